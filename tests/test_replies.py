"""Replies on the wire: built once, written as one ASCII line, byte for byte the JSON the SDK's
own path wrote (weights included), through the real ``graph-memory`` process over stdio."""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import mcp_types as types
import pytest
from mcp_types.methods import serialize_server_result

from graph_memory.mcp.jsontext import escape_non_ascii
from graph_memory.mcp.replies import reply_building, tool_result
from test_stdio import EXE, handshake, server_env

WEIGHTS = [0.1, 1e-7, 0.30000000000000004, 5e-05, 0.25]


def sdk_wrote(request_id: int, text: str, payload: dict[str, Any]) -> bytes:
    """The line the SDK's own result path and stdio writer produced for a tool's result
    (dump, validate and dump for the protocol version, then ``model_dump_json``), ASCII-escaped."""
    result = types.CallToolResult(content=[types.TextContent(type="text", text=text)], structured_content=payload)
    dumped = serialize_server_result("tools/call", "2025-11-25",
                                     result.model_dump(by_alias=True, mode="json", exclude_none=True))
    line = types.JSONRPCResponse(jsonrpc="2.0", id=request_id, result=dumped).model_dump_json(
        by_alias=True, exclude_unset=True)
    return escape_non_ascii(line).encode("ascii") + b"\n"


def test_a_read_graph_line_is_ascii_and_byte_for_byte_the_sdks_json_with_weights_as_before(tmp_path: Path) -> None:
    entities = [{"name": "Zoë", "entityType": "person", "observations": ["café 😀 中文", "line\nbreak \x7f"]},
                *({"name": f"e{i}", "entityType": "thing", "observations": []} for i in range(len(WEIGHTS)))]
    relations = [{"from": "Zoë", "to": f"e{i}", "relationType": "knows", "weight": w} for i, w in enumerate(WEIGHTS)]
    requests = handshake(("create_entities", {"entities": entities}), ("create_relations", {"relations": relations}),
                         ("read_graph", {}))
    command = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "graph_memory"]
    result = subprocess.run(command, input="".join(json.dumps(r) + "\n" for r in requests).encode(),
                            capture_output=True, timeout=120, env=server_env(tmp_path, tmp_path / "memory.db"))
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines(keepends=True)
    replies = {json.loads(line)["id"]: line for line in lines}
    assert all(line.isascii() for line in lines)
    for request_id in (1, 2, 3):
        result = json.loads(replies[request_id])["result"]
        text, payload = result["content"][0]["text"], result["structuredContent"]
        assert text == json.dumps(json.loads(text), indent=2, ensure_ascii=False)
        assert replies[request_id] == sdk_wrote(request_id, text, payload)
    graph = replies[3]
    assert b'"weight":1e-7}' in graph and b'\\"weight\\": 1e-07\\n' in graph      # as pydantic / repr wrote them
    assert b'"weight":0.00005}' in graph and b'\\"weight\\": 5e-05\\n' in graph
    assert b'"weight":0.30000000000000004}' in graph
    assert b"caf\\u00e9 \\ud83d\\ude00 \\u4e2d\\u6587" in graph


def test_tool_result_outside_the_middleware_holds_the_content() -> None:
    result = tool_result('{"a": 1}', {"a": 1})
    assert result.structured_content == {"a": 1}
    assert [c.text for c in result.content if isinstance(c, types.TextContent)] == ['{"a": 1}']


def test_reply_building_re_enables_the_collector_even_when_building_fails() -> None:
    assert gc.isenabled()
    with pytest.raises(RuntimeError), reply_building():
        assert not gc.isenabled()
        raise RuntimeError("boom")
    assert gc.isenabled()
    gc.disable()
    try:
        with reply_building():
            pass
        assert not gc.isenabled()   # left as it was
    finally:
        gc.enable()
        gc.unfreeze()


def test_a_reply_of_several_mebibytes_arrives_whole_beside_the_other_replies(tmp_path: Path) -> None:
    # ~2.4 million characters, half of them escaped (6 bytes each): a line of ~10 MB, written in pieces.
    observations = ["é" * 1500 + "x" * 1500 + str(k) for k in range(20)]
    entities = [{"name": f"big{i}", "entityType": "blob", "observations": observations} for i in range(40)]
    requests = handshake(("create_entities", {"entities": entities}), ("read_graph", {}),
                         ("open_nodes", {"names": ["big1"]}))
    command = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "graph_memory"]
    # The transport, not the reply bound, is under test: create_entities' echo of this (~20 MB) is over it.
    env = {**server_env(tmp_path, tmp_path / "memory.db"), "MEMORY_MAX_REPLY_BYTES": "0"}
    result = subprocess.run(command, input="".join(json.dumps(r) + "\n" for r in requests).encode(),
                            capture_output=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    replies = {m["id"]: m for m in map(json.loads, result.stdout.splitlines())}
    assert sorted(replies) == [0, 1, 2, 3]
    graph = replies[2]["result"]["structuredContent"]
    assert len(replies[2]["result"]["content"][0]["text"]) > 2_400_000
    assert [e["observations"] for e in graph["entities"]] == [observations] * 40
    assert json.loads(replies[2]["result"]["content"][0]["text"]) == graph
    assert replies[3]["result"]["structuredContent"]["entities"][0]["name"] == "big1"


@pytest.mark.anyio
async def test_a_timer_scheduled_during_a_call_does_not_keep_its_reply() -> None:
    # asyncio copies the context into every timer a call schedules (the index's idle catch-up,
    # the change poller): what the call left in it must not hold the reply until the timer fires.
    import asyncio
    from types import SimpleNamespace

    from graph_memory.mcp import replies

    seen: list[object] = []

    async def handler(ctx: object) -> dict[str, object]:
        tool_result("text", {"entities": ["big"]})
        asyncio.get_running_loop().call_soon(lambda: seen.append(replies._slot.get()))
        return {"content": [{"text": "", "type": "text"}], "isError": False, "structuredContent": {}}

    ctx = SimpleNamespace(method="tools/call", request_id=1)
    result = await replies.prebuilt_results(cast(Any, ctx), cast(Any, handler))
    assert isinstance(result, dict)
    assert result["structuredContent"] == {"entities": ["big"]} and result["content"][0]["text"] == "text"
    await asyncio.sleep(0)
    slot = seen[0]
    assert isinstance(slot, replies._Slot) and slot.text is None and slot.structured is None
