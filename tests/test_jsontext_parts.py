"""A line with a long text content is written in parts that are never joined (issue 15's memory
target): the parts make exactly the line :func:`dumps_line` writes, whatever the data."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graph_memory.mcp import jsontext
from graph_memory.mcp.jsontext import dumps_indent2, dumps_line, dumps_line_parts

from helpers import json_values


def tool_result(value: Any) -> dict[str, Any]:
    """A tool result as the server writes it: the text item renders the structured content."""
    return {"jsonrpc": "2.0", "id": 7, "result": {
        "content": [{"type": "text", "text": dumps_indent2(value)}], "structuredContent": value}}


any_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)))   # control chars, DEL, emoji…
values = json_values(any_text)   # floats like 1e-07 take pydantic's path


@pytest.fixture
def short_long_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """Texts over 20 characters count as long, so small examples take the parts' path."""
    monkeypatch.setattr(jsontext, "LONG_TEXT", 20)


@settings(max_examples=400)
@given(values)
def test_the_parts_are_the_line(value: Any) -> None:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(jsontext, "LONG_TEXT", 20)
        message = tool_result(value)
        parts = dumps_line_parts(message)
        assert "".join(parts) == dumps_line(message)
        assert len(parts) == (3 if len(message["result"]["content"][0]["text"]) > 20 else 1)


def test_a_graph_reply_is_cut_around_its_escaped_text(short_long_text: None) -> None:
    graph = {"entities": [{"name": "Zoë 🍵", "entityType": "person", "observations": ['says "hi"\n', "w: 1e-07"]}],
             "relations": [{"from": "Zoë 🍵", "to": "x", "relationType": "knows", "weight": 1e-07}]}
    message = tool_result(graph)
    head, text, tail = dumps_line_parts(message)
    assert head.endswith('"text":') and text.startswith('"{\\n  \\"entities\\"')
    assert tail.startswith('}],"structuredContent":')
    assert (head + text + tail).isascii() and head + text + tail == dumps_line(message)


def test_short_texts_and_other_messages_are_one_part(short_long_text: None) -> None:
    assert dumps_line_parts(tool_result({"a": 1})) == [dumps_line(tool_result({"a": 1}))]
    two = {"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "x" * 50}] * 2}}
    assert dumps_line_parts(two) == [dumps_line(two)]
    listing = {"jsonrpc": "2.0", "id": 2, "result": {"tools": [{"name": "y" * 50}]}}
    assert dumps_line_parts(listing) == [dumps_line(listing)]
