"""A JSON-RPC line whose text is ASCII anyway is written by orjson: the same line as before,
character for character (the SDK writer's JSON value, floats as pydantic writes them)."""

from __future__ import annotations

import datetime
import enum
from typing import Any

import pydantic_core
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graph_memory.mcp import jsontext
from graph_memory.mcp.jsontext import dumps_indent2, dumps_line, escape_non_ascii

from helpers import json_values


def sdk_line(message: dict[str, Any]) -> str:
    """What the SDK's stdio writer wrote (pydantic's JSON), with non-ASCII escaped."""
    return escape_non_ascii(pydantic_core.to_json(message).decode())


def tool_result(value: Any) -> dict[str, Any]:
    """A tool result as the server writes it: the text item renders the structured content."""
    return {"jsonrpc": "2.0", "id": 7, "result": {
        "content": [{"type": "text", "text": dumps_indent2(value)}], "structuredContent": value, "isError": False}}


ascii_text = st.text(alphabet=st.characters(max_codepoint=0x7F))   # control characters and DEL too
ascii_values = json_values(ascii_text, nulls=False)


@settings(max_examples=500)
@given(ascii_values)
def test_an_ascii_tool_result_line_is_the_sdk_writers(value: Any) -> None:
    message = tool_result(value)
    assert dumps_line(message) == sdk_line(message)


@pytest.fixture
def no_standard_encoder(monkeypatch: pytest.MonkeyPatch) -> None:
    """The standard library's encoder fails the test if dumps_line uses it."""
    def refuse(*args: object, **kwargs: object) -> str:
        raise AssertionError("json.dumps ran")

    monkeypatch.setattr(jsontext.json, "dumps", refuse)


def test_an_ascii_graph_reply_is_written_by_orjson(no_standard_encoder: None) -> None:
    graph = {"entities": [{"name": "api", "entityType": "module", "observations": ["tab\there", 'q"\\']}],
             "relations": [{"from": "api", "to": "db", "relationType": "uses", "weight": 0.25}], "neighbors": []}
    message = tool_result(graph)
    assert dumps_line(message) == sdk_line(message)


class Color(enum.Enum):
    RED = "red"


class Level(enum.IntEnum):
    HIGH = 3


@pytest.mark.parametrize("value", [
    {"s": "del \x7f here"},                          # orjson leaves DEL as it is; json escapes it
    {"w": 1e-7, "v": 5e-05},                         # floats orjson writes otherwise
    {"n": None},                                     # a null (orjson writes NaN so too)
    {"at": datetime.datetime(2026, 12, 1, 17, 29, 28, tzinfo=datetime.UTC)},
    {"level": Level.HIGH, "color": Color.RED},       # subclasses and enums
    {"big": 2**70},
    {"non-ascii structured content": "é"},
])
def test_lines_orjson_would_write_otherwise_are_the_sdk_writers(value: Any) -> None:
    message = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "x"}],
                                                     "structuredContent": value}}
    assert dumps_line(message) == sdk_line(message)


def test_a_non_ascii_text_item_takes_the_standard_path_with_the_same_line() -> None:
    value = {"entities": [{"name": "Vilnius", "entityType": "city", "observations": ["Šv. Jono g.", "😀"]}]}
    assert dumps_line(tool_result(value)) == sdk_line(tool_result(value))
