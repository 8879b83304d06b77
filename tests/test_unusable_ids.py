"""JSON-RPC 2.0: a request whose ``id`` is not a string or integer (true, 1.5, null, an object, an
array) is an Invalid Request, answered with -32600 and id null. The SDK reads such a message as a
notification and drops it, so without our check the client waits for its timeout. Such a request
is not served; true notifications (no ``id``) still get no reply."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest

from graph_memory.mcp.http import request_id_of, unusable_id_type
from test_http import INITIALIZE, MCP_HEADERS, running
from test_http_limits import answer, open_session, session_headers
from test_stdio import EXE, handshake, server_env

UNUSABLE_IDS = [True, 1.5, None, {"a": 1}, [1]]


def ghost_call(request_id: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {
        "name": "create_entities", "arguments": {"entities": [
            {"name": "Ghost", "entityType": "t", "observations": []}]}}}


@pytest.mark.parametrize("bad_id", UNUSABLE_IDS)
def test_a_request_with_an_unusable_id_gets_an_invalid_request_reply(tmp_path: Path, bad_id: Any) -> None:
    """Over stdio: the one error with id null is -32600; the call was not served (the graph stays
    empty); the notification and the later requests are handled as usual."""
    lines = [json.dumps(m) for m in handshake()] + [
        json.dumps(ghost_call(bad_id)),
        json.dumps({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}}),
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "read_graph", "arguments": {}}}),
        json.dumps({"jsonrpc": "2.0", "id": 3, "method": "ping"})]
    command = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "graph_memory"]
    done = subprocess.run(command, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60,
                          env=server_env(tmp_path, tmp_path / "memory.db"))
    replies = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    errors = [m for m in replies if m.get("id") is None and "error" in m]
    assert [e["error"]["code"] for e in errors] == [-32600], replies
    assert "string or an integer" in errors[0]["error"]["message"]
    by_id = {m["id"]: m for m in replies if m.get("id") is not None}
    assert sorted(by_id) == [0, 2, 3], replies
    assert by_id[2]["result"]["structuredContent"]["entities"] == []


@pytest.mark.parametrize("bad_id", UNUSABLE_IDS)
def test_an_http_request_with_an_unusable_id_gets_400_and_an_invalid_request_error(db_path: Path,
                                                                                   bad_id: Any) -> None:
    """Over HTTP, in a session and without one: HTTP 400 (the transport spec's answer to a message
    the server cannot accept) with error -32600 and id null, instead of 202 with nothing; the call
    is not served and the session keeps working."""
    with running(db_path) as srv, httpx2.Client(base_url=srv.url, timeout=30) as http:
        session = open_session(http)
        for headers in (session_headers(session), MCP_HEADERS):
            refused = http.post("/mcp", json=ghost_call(bad_id), headers=headers)
            assert refused.status_code == 400, refused.text
            assert refused.headers["content-type"] == "application/json"
            body = refused.json()
            assert body["id"] is None and body["error"]["code"] == -32600, body
            assert "string or an integer" in body["error"]["message"]
        graph = http.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "read_graph", "arguments": {}}}, headers=session_headers(session))
        assert answer(graph)["result"]["structuredContent"]["entities"] == []
        cancelled = http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/cancelled",
                                            "params": {"requestId": 99}}, headers=session_headers(session))
        assert cancelled.status_code == 202


def test_a_usable_id_late_in_the_body_is_served(db_path: Path) -> None:
    """An id after the params (not found by the cheap scan of the body's start) is still a request."""
    with running(db_path) as srv, httpx2.Client(base_url=srv.url, timeout=30) as http:
        session = open_session(http)
        body = json.dumps({"jsonrpc": "2.0", "method": "ping", "params": {}, "id": "late"})
        response = http.post("/mcp", content=body, headers=session_headers(session))
        assert response.status_code == 200 and answer(response)["id"] == "late"
        response = http.post("/mcp", json=INITIALIZE | {"id": 7}, headers=MCP_HEADERS)
        assert response.status_code == 200


@pytest.mark.parametrize(("body", "expected"), [
    (b'{"jsonrpc": "2.0", "id": true, "method": "ping"}', "boolean"),
    (b'{"jsonrpc": "2.0", "method": "ping", "id": 1.5}', "number"),
    (b'{"jsonrpc": "2.0", "id": null, "method": "ping"}', "null"),
    (b'{"method": "ping", "id": {"a": 1}, "jsonrpc": "2.0"}', "object"),
    (b'{"jsonrpc": "2.0", "id": [1], "method": "ping"}', "array"),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}', None),
    (b'{"jsonrpc": "2.0", "method": "ping", "id": "x"}', None),
    (b'{"jsonrpc": "2.0", "method": "notifications/initialized"}', None),
    (b'{"jsonrpc": "2.0", "method": "x", "params": {"id": true}}', None),
    (b'[{"jsonrpc": "2.0", "id": true, "method": "ping"}]', None),
    (b'{"jsonrpc": "2.0", "id": tru', None),
])
def test_unusable_id_type_names_the_id_s_json_type(body: bytes, expected: str | None) -> None:
    assert unusable_id_type(body, request_id_of(body)) == expected


NOT_MESSAGES = [
    (b"[1, 2]", None, "the body is a JSON array, not a message object"),
    (b"42", None, "the body is a JSON number, not a message object"),
    (b'{"foo": 1}', None, '"jsonrpc" must be "2.0"'),
    (b'{"jsonrpc": "1.0", "id": 3, "method": "ping"}', 3, '"jsonrpc" must be "2.0"'),
    (b'{"jsonrpc": "2.0", "id": 4}', 4, 'needs a "method"'),
    (b'{"jsonrpc": "2.0", "id": "x", "method": 5}', "x", '"method" must be a string, not a JSON number'),
    (b'{"jsonrpc": "2.0", "id": 6, "method": "tools/list", "params": 5}', 6,
     '"params" must be an object, not a JSON number'),
]


def test_an_http_body_that_is_no_jsonrpc_message_gets_an_explained_invalid_request(db_path: Path) -> None:
    """JSON that is no JSON-RPC 2.0 message: HTTP 400 with -32600 saying what is wrong and what a
    message looks like, with the request's id when it has one (the SDK alone answers -32602 with
    pydantic's dump of every union branch and id null). A parse error keeps the SDK's -32700, and
    the session keeps working."""
    with running(db_path) as srv, httpx2.Client(base_url=srv.url, timeout=30) as http:
        session = open_session(http)
        for body, request_id, problem in NOT_MESSAGES:
            refused = http.post("/mcp", content=body, headers=session_headers(session))
            assert refused.status_code == 400, refused.text
            error = refused.json()
            assert error["id"] == request_id, error
            assert error["error"]["code"] == -32600, error
            assert problem in error["error"]["message"] and '"method": "tools/list"' in error["error"]["message"]
            assert error["error"]["data"] == {"problem": error["error"]["data"]["problem"]}
            assert "validation error" not in refused.text.lower()
        parse_error = http.post("/mcp", content=b"{bad", headers=session_headers(session))
        assert parse_error.status_code == 400 and parse_error.json()["error"]["code"] == -32700
        ping = http.post("/mcp", json={"jsonrpc": "2.0", "id": 9, "method": "ping"}, headers=session_headers(session))
        assert answer(ping)["id"] == 9


def test_a_stdio_line_that_is_no_jsonrpc_message_gets_the_same_explanation_as_over_http(tmp_path: Path) -> None:
    """The same malformed messages as one line each over stdio: -32600 saying what is wrong (the
    words HTTP uses, with "line" for "body"), with the line's id when it has one; the session goes
    on (the ping after them is answered)."""
    lines = [json.dumps(m) for m in handshake()] + [body.decode() for body, _, _ in NOT_MESSAGES] + [
        json.dumps({"jsonrpc": "2.0", "id": 99, "method": "ping"})]
    command = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "graph_memory"]
    done = subprocess.run(command, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60,
                          env=server_env(tmp_path, tmp_path / "memory.db"))
    replies = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    refusals = [m for m in replies if "error" in m]
    assert len(refusals) == len(NOT_MESSAGES), replies
    for refusal, (_, request_id, problem) in zip(refusals, NOT_MESSAGES, strict=True):
        assert refusal["id"] == request_id, refusal
        assert refusal["error"]["code"] == -32600, refusal
        assert problem.replace("the body", "the line") in refusal["error"]["message"], refusal
    assert replies[-1] == {"jsonrpc": "2.0", "id": 99, "result": {}}
