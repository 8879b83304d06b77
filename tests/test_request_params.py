"""A request whose parameters have the wrong shape gets -32602 with its own id and a message that
names the problem (graph_memory.mcp.request_params), on every path a request can take: the stdio
process, the in-process client of both protocol generations, and streamable HTTP of both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from test_http import INITIALIZE, MCP_HEADERS, running
from test_stdio import by_id, handshake, run_session, server_env

NOT_OBJECTS = [
    ([], "array"),
    (["entities"], "array"),
    ("entities", "string"),
    (5, "number"),
    (True, "boolean"),
]
MODERN = "2026-07-28"


def assert_names_the_arguments(error: dict[str, Any], kind: str) -> None:
    assert error["code"] == -32602
    assert f"arguments must be a JSON object, got {kind}" in error["message"]


def test_stdio_tools_call_with_arguments_not_an_object_is_answered_with_its_id(tmp_path: Path) -> None:
    requests = handshake(*[("create_entities", arguments) for arguments, _ in NOT_OBJECTS],
                         ("read_graph", None),  # null means no arguments, as when the key is absent
                         ("read_graph", {}))
    requests.append({"jsonrpc": "2.0", "id": "no-name", "method": "tools/call", "params": {"arguments": {}}})
    messages, stderr, code = run_session(server_env(tmp_path, tmp_path / "memory.db"), requests)
    replies = by_id(messages)
    for number, (_, kind) in enumerate(NOT_OBJECTS, start=1):
        assert_names_the_arguments(replies[number]["error"], kind)
    assert replies[len(NOT_OBJECTS) + 1]["result"]["structuredContent"]["entities"] == []
    assert replies[len(NOT_OBJECTS) + 2]["result"]["isError"] is False
    # Other shape faults of the SDK's validation name the field too, instead of a bare -32602.
    assert replies["no-name"]["error"] == {"code": -32602,
                                           "message": "Invalid request parameters for tools/call: name: Field required"}
    assert code == 0, stderr


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["auto", "legacy"])
@pytest.mark.parametrize(("arguments", "kind"), NOT_OBJECTS[:3])
async def test_in_process_tools_call_with_arguments_not_an_object_names_it(server: Any, mode: str, arguments: Any,
                                                                           kind: str) -> None:
    async with Client(server, mode=mode) as client:
        # The client's own call_tool only takes a dict: send the raw request, as a foreign client would.
        with pytest.raises(MCPError) as caught:
            await client.session._dispatcher.send_raw_request(
                "tools/call", {"name": "create_entities", "arguments": arguments}, {})
        assert_names_the_arguments(caught.value.error.model_dump(), kind)
        graph = await client.call_tool("read_graph", {})
        assert graph.structured_content == {"entities": [], "relations": [], "neighbors": []}


def _sse_message(response: httpx2.Response) -> dict[str, Any]:
    if response.headers["content-type"].startswith("application/json"):
        message: dict[str, Any] = response.json()
        return message
    data = [line.removeprefix("data:").strip() for line in response.text.splitlines() if line.startswith("data:")]
    assert len(data) == 1, response.text
    message = json.loads(data[0])
    return message


@pytest.mark.parametrize("era", ["2025-11-25", MODERN])
def test_http_tools_call_with_arguments_not_an_object_is_answered_with_its_id(db_path: Path, era: str) -> None:
    call = {"jsonrpc": "2.0", "id": 41, "method": "tools/call",
            "params": {"name": "create_entities", "arguments": ["entities"]}}
    with running(db_path) as srv, httpx2.Client(base_url=srv.url) as http:
        headers = {**MCP_HEADERS, "MCP-Protocol-Version": era}
        if era == MODERN:  # sessionless: the request carries its envelope
            call["params"]["_meta"] = {"io.modelcontextprotocol/protocolVersion": MODERN,  # type: ignore[index]
                                       "io.modelcontextprotocol/clientCapabilities": {}}
            headers.update({"Mcp-Method": "tools/call", "Mcp-Name": "create_entities"})
        else:
            init = http.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS)
            headers["mcp-session-id"] = init.headers["mcp-session-id"]
            http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
        reply = _sse_message(http.post("/mcp", json=call, headers=headers))
    assert reply["id"] == 41
    assert_names_the_arguments(reply["error"], "array")
