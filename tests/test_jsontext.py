"""The fast text encoder gives exactly the standard library's ``json.dumps(indent=2, ensure_ascii=False)``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graph_memory.mcp.jsontext import dumps_indent2


def reference(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5)
    | st.tuples(inner, inner),
    max_leaves=40,
)


@settings(max_examples=500)
@given(json_values)
def test_equals_json_dumps_on_any_json_value(value: Any) -> None:
    assert dumps_indent2(value) == reference(value)


@pytest.mark.parametrize("value", [
    {"entities": [], "relations": [], "neighbors": []},                  # empty containers
    {"s": "\u2028\u2029\x00\x1f\x7f\"\\/é😀中"},                            # escapes and non-ASCII
    {"weight": 0.1, "big": 1e300, "small": 5e-324, "n": -0.0},          # float repr
    [True, False, None, 0, -1, 2**70],
    {1: "int key", None: "null key", 2.5: "float key", False: "bool key"},  # non-str keys
    {"nested": [[[]], [{}], {"a": [{"b": []}]}]},
])
def test_equals_json_dumps_on_edge_cases(value: Any) -> None:
    assert dumps_indent2(value) == reference(value)


def test_unsupported_values_fail_as_json_dumps_does() -> None:
    with pytest.raises(TypeError, match="not JSON serializable"):
        dumps_indent2({"a": object()})
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="Circular reference"):
        dumps_indent2(loop)
