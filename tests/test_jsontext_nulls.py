"""The text content of a reply holding ``null`` — a value, or the word inside a string — is
still exactly ``json.dumps(indent=2, ensure_ascii=False)``, and takes the fast path unless a
NaN or an infinity may hide behind a null (orjson writes them as ``null``)."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graph_memory.mcp import jsontext
from graph_memory.mcp.jsontext import dumps_indent2

from helpers import json_values


def reference(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


# Texts made of the pieces that could fool the search for a null value: quotes, backslashes,
# colons, spaces, newlines and the word itself.
tricky_text = st.lists(st.sampled_from(['null', '"', '\\', ':', ' ', '\n', ': ', '": ', 'x', 'é']),
                       max_size=8).map("".join)
values = json_values(tricky_text, nan=True, size=4, leaves=30)


@settings(max_examples=800)
@given(values)
def test_text_with_nulls_equals_json_dumps(value: Any) -> None:
    assert dumps_indent2(value) == reference(value)


@pytest.fixture
def no_slow_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The pure-Python encoder fails the test if it is used."""
    def refuse(*args: object) -> None:
        raise AssertionError("the pure-Python encoder ran")

    monkeypatch.setattr(jsontext, "_encode", refuse)


@pytest.mark.parametrize("value", [
    {"entities": [{"name": "api", "entityType": "module", "observations": ["returns null on a miss"]}]},
    {"observations": ["null", "a: null", 'say \\": null', "x\\n  null", "  null"]},   # the word in strings, not values
    {"null": "null"},
])
def test_the_word_null_in_strings_keeps_the_fast_path(value: Any, no_slow_path: None) -> None:
    assert dumps_indent2(value) == reference(value)


@pytest.mark.parametrize("value", [
    {"createdAt": None, "updatedAt": None},                     # unknown times: null values
    [None, [None], {"a": [1, None]}],
    None,
])
def test_null_values_without_non_finite_floats_keep_the_fast_path(value: Any, no_slow_path: None) -> None:
    assert dumps_indent2(value) == reference(value)


@pytest.mark.parametrize("value", [
    {"weight": math.nan, "createdAt": None},
    [None, math.inf],
    {"w": -math.inf},
])
def test_non_finite_floats_are_written_as_json_dumps_writes_them(value: Any) -> None:
    assert dumps_indent2(value) == reference(value)
