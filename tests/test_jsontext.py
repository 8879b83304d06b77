"""The fast text encoder gives exactly the standard library's ``json.dumps(indent=2, ensure_ascii=False)``."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graph_memory.mcp.jsontext import dumps_indent2, dumps_line, escape_non_ascii


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


# -- the stdio line: the SDK writer's JSON value, ASCII-escaped, floats exactly as pydantic wrote them --

line_values = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=40,
)


def sdk_line(message: dict[str, Any]) -> str:
    """What the SDK's stdio writer wrote (pydantic's JSON), with non-ASCII escaped."""
    import pydantic_core

    return escape_non_ascii(pydantic_core.to_json(message).decode())


@settings(max_examples=500)
@given(line_values)
def test_a_line_is_the_sdk_writers_json_in_ascii(value: Any) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "result": {"structuredContent": value}}
    line = dumps_line(message)
    assert line.isascii() and "\n" not in line
    assert line == sdk_line(message)
    assert json.loads(line) == json.loads(json.dumps(message))


@pytest.mark.parametrize("weight, wire", [
    (0.1, "0.1"), (1.0, "1.0"), (0.30000000000000004, "0.30000000000000004"), (1e-7, "1e-7"),
    (5e-05, "0.00005"), (0.5, "0.5"), (1e-4, "0.0001"), (0.0, "0.0"), (1e16, "1e+16"),
])
def test_weights_in_a_line_are_written_as_the_sdk_wrote_them(weight: float, wire: str) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "result": {"structuredContent": {"relations": [{"weight": weight}]}}}
    assert dumps_line(message) == sdk_line(message)
    assert '"weight":' + wire + "}" in dumps_line(message)


@pytest.mark.parametrize("weight, text", [
    (0.1, "0.1"), (1.0, "1.0"), (0.30000000000000004, "0.30000000000000004"), (1e-7, "1e-07"), (5e-05, "5e-05"),
])
def test_weights_in_the_text_content_are_pythons_repr(weight: float, text: str) -> None:
    assert f'"weight": {text}\n' in dumps_indent2({"relations": [{"weight": weight}]})


def test_non_ascii_is_escaped_as_json_dumps_escapes_it() -> None:
    value = {"s": "é 中 😀 \u2028 \x7f \x00 \"\\"}
    assert dumps_line(value) == json.dumps(value, separators=(",", ":"))
    assert escape_non_ascii('"é😀"') == json.dumps("é😀")
