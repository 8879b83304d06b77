"""HTTP limits: the request-body cap, the number of open sessions and the idle time after which
a session closes are settings, and each refusal is a JSON-RPC error naming the limit and the
setting that raises it.

The real app under a real uvicorn (``running`` from test_http), spoken to with raw HTTP so the
status, body and session ids are visible, and with the SDK's client where a client's view matters.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp.shared.exceptions import MCPError

from graph_memory.mcp.http import request_id_of
from graph_memory.settings import Settings
from test_http import INITIALIZE, MCP_HEADERS, mcp_client, running

from helpers import call, names

pytestmark = pytest.mark.anyio

PROTOCOL = {"mcp-protocol-version": "2025-11-25"}


# -- raw handshake-era sessions -------------------------------------------------------------------


def answer(response: httpx2.Response) -> dict[str, Any]:
    """The JSON-RPC message of a response, whether sent as JSON or as one SSE event."""
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
        return json.loads(next(d for d in data if d))  # type: ignore[no-any-return]
    return response.json()  # type: ignore[no-any-return]


def open_session(http: httpx2.Client) -> str:
    """Initialize a handshake-era session over raw HTTP; its ``Mcp-Session-Id``."""
    response = http.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS)
    assert response.status_code == 200, response.text
    session = response.headers["mcp-session-id"]
    initialized = http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"},
                            headers={**MCP_HEADERS, **PROTOCOL, "mcp-session-id": session})
    assert initialized.status_code == 202, initialized.text
    return session


def session_headers(session: str) -> dict[str, str]:
    return {**MCP_HEADERS, **PROTOCOL, "mcp-session-id": session}


def ping(http: httpx2.Client, session: str) -> httpx2.Response:
    return http.post("/mcp", json={"jsonrpc": "2.0", "id": 99, "method": "ping"}, headers=session_headers(session))


def create_call(request_id: int, name: str, padding: int) -> bytes:
    """A ``tools/call`` of create_entities (id first, as the Python SDK writes it) whose one
    observation is ``padding`` characters long."""
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {
        "name": "create_entities",
        "arguments": {"entities": [{"name": name, "entityType": "t", "observations": ["x" * padding]}]},
    }}).encode()


def sized_call(request_id: int, name: str, size: int) -> bytes:
    """:func:`create_call` padded to exactly ``size`` bytes."""
    body = create_call(request_id, name, size - len(create_call(request_id, name, 0)))
    assert len(body) == size
    return body


def one_entity(name: str) -> dict[str, Any]:
    """Arguments of a create_entities call that creates one small entity."""
    return {"entities": [{"name": name, "entityType": "t", "observations": []}]}


def chunks(body: bytes, size: int = 4096) -> Iterator[bytes]:
    """The body as a stream without Content-Length (chunked transfer encoding)."""
    for start in range(0, len(body), size):
        yield body[start:start + size]


def graph_names(http: httpx2.Client, session: str) -> list[str]:
    response = http.post("/mcp", headers=session_headers(session), json={
        "jsonrpc": "2.0", "id": 50, "method": "tools/call", "params": {"name": "read_graph", "arguments": {}}})
    assert response.status_code == 200, response.text
    graph = answer(response)["result"]["structuredContent"]
    return [e["name"] for e in graph["entities"]]


# -- settings -------------------------------------------------------------------------------------


def test_http_limits_default_to_4_mib_1000_sessions_and_an_hour_idle(db_path: Path) -> None:
    settings = Settings(file_path=db_path)
    assert settings.http_max_body_bytes == 4 * 1024 * 1024
    assert settings.http_max_sessions == 1000
    assert settings.http_session_idle_seconds == 3600


def test_http_limits_are_read_from_the_environment(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMORY_HTTP_MAX_BODY_BYTES", "1048576")
    monkeypatch.setenv("MEMORY_HTTP_MAX_SESSIONS", "5")
    monkeypatch.setenv("MEMORY_HTTP_SESSION_IDLE_SECONDS", "90.5")
    settings = Settings(file_path=db_path)
    assert (settings.http_max_body_bytes, settings.http_max_sessions, settings.http_session_idle_seconds) == (
        1048576, 5, 90.5)


@pytest.mark.parametrize(("variable", "value"), [
    ("MEMORY_HTTP_MAX_BODY_BYTES", "0"),
    ("MEMORY_HTTP_MAX_SESSIONS", "0"),
    ("MEMORY_HTTP_SESSION_IDLE_SECONDS", "0"),
    ("MEMORY_HTTP_SESSION_IDLE_SECONDS", "inf"),  # sessions would never close
])
def test_http_limits_refuse_values_that_disable_them(db_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     variable: str, value: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=variable.removeprefix("MEMORY_").lower()):
        Settings(file_path=db_path)


# -- request body ---------------------------------------------------------------------------------


@pytest.mark.parametrize("framing", ["content-length", "chunked"])
def test_body_over_the_limit_gets_a_jsonrpc_error_naming_the_setting_and_writes_nothing(
        db_path: Path, framing: str) -> None:
    limit = 20_000
    with running(db_path, http_max_body_bytes=limit) as srv, httpx2.Client(base_url=srv.url, timeout=30) as http:
        session = open_session(http)
        body = sized_call(7, "too-big", limit + 1)
        content: bytes | Iterator[bytes] = body if framing == "content-length" else chunks(body)
        response = http.post("/mcp", content=content, headers=session_headers(session))

        assert response.status_code == 413
        assert response.headers["content-type"] == "application/json"
        error = response.json()
        assert error["jsonrpc"] == "2.0" and error["id"] == 7  # the id leads the body: it is known
        assert error["error"]["code"] == -32600
        message = error["error"]["message"]
        assert "20000 bytes" in message and "MEMORY_HTTP_MAX_BODY_BYTES" in message
        assert error["error"]["data"] == {"limitBytes": limit, "setting": "MEMORY_HTTP_MAX_BODY_BYTES"}
        # Nothing was done, the session goes on, and a body of exactly the limit is served.
        assert graph_names(http, session) == []
        fits = http.post("/mcp", content=sized_call(8, "fits", limit) if framing == "content-length"
                         else chunks(sized_call(8, "fits", limit)), headers=session_headers(session))
        assert fits.status_code == 200, fits.text
        assert answer(fits)["id"] == 8 and not answer(fits)["result"].get("isError")
        assert graph_names(http, session) == ["fits"]


def test_default_body_limit_is_4_mib_for_sessions_and_the_first_request(db_path: Path) -> None:
    """The default cap; the refused request here opens no session (it is an initialize)."""
    padding = "x" * (4 * 1024 * 1024)
    body = json.dumps({**INITIALIZE, "params": {**INITIALIZE["params"], "pad": padding}}).encode()
    with running(db_path) as srv, httpx2.Client(base_url=srv.url, timeout=30) as http:
        for content in (body, chunks(body, 256 * 1024)):
            response = http.post("/mcp", content=content, headers=MCP_HEADERS)
            assert response.status_code == 413
            assert "mcp-session-id" not in response.headers
            assert "4194304 bytes (4 MiB)" in response.json()["error"]["message"]
        assert http.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS).status_code == 200


async def test_sdk_client_shows_the_body_limit_error_and_keeps_working(db_path: Path) -> None:
    with running(db_path, http_max_body_bytes=20_000) as srv:
        for mode in ("legacy", "auto"):
            async with mcp_client(srv.mcp, mode=mode) as client:
                big = {"entities": [{"name": "big", "entityType": "t", "observations": ["x" * 30_000]}]}
                with pytest.raises(MCPError, match="MEMORY_HTTP_MAX_BODY_BYTES"):
                    await client.call_tool("create_entities", big)
                await call(client, "create_entities", one_entity(mode))
        async with mcp_client(srv.mcp) as client:
            assert sorted(names(await call(client, "read_graph", {}))) == ["auto", "legacy"]


@pytest.mark.parametrize(("body", "expected"), [
    (b'{"jsonrpc":"2.0","id":7,"method":"tools/call"', 7),  # the Python SDK's order, cut off
    (b' {\n "id" : "req-1" , "method": "x"}', "req-1"),  # whitespace, string id
    (b'{"params":{"id":3},"id":4}', 4),  # a nested "id" is not the request's
    (b'{"method":"x","params":{"o":"' + b"y" * 100_000 + b'"},"id":4}', None),  # id after a long value
    (b'{"method":"x","params":{"o":"yyy', None),  # cut off before the id
    (b'[{"jsonrpc":"2.0","id":1}]', None),  # a batch has no one id
    (b'{"id":true}', None),  # not a JSON-RPC id
    (b'{"id":1.5}', None),
    (b'{"id":null}', None),
    (b"not json", None),
    (b"", None),
])
def test_request_id_is_read_from_the_start_of_a_body_when_cheap(body: bytes, expected: Any) -> None:
    assert request_id_of(body) == expected


# -- sessions -------------------------------------------------------------------------------------


async def test_session_past_the_limit_is_refused_clearly_and_the_others_keep_working(db_path: Path) -> None:
    with running(db_path, http_max_sessions=2) as srv, httpx2.Client(base_url=srv.url, timeout=30) as http:
        first, second = open_session(http), open_session(http)

        refused = http.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS)
        assert refused.status_code == 503
        assert "mcp-session-id" not in refused.headers
        error = refused.json()
        assert error["id"] == INITIALIZE["id"] and error["error"]["code"] == -32000
        message = error["error"]["message"]
        assert "at most 2 HTTP sessions" in message and "MEMORY_HTTP_MAX_SESSIONS" in message
        assert "MEMORY_HTTP_SESSION_IDLE_SECONDS" in message
        assert error["error"]["data"] == {"maxSessions": 2, "setting": "MEMORY_HTTP_MAX_SESSIONS"}
        # The SDK's client shows it to its user (raised out of the client's task group).
        with pytest.RaisesGroup(pytest.RaisesExc(MCPError, match="MEMORY_HTTP_MAX_SESSIONS"),
                                flatten_subgroups=True):
            async with mcp_client(srv.mcp, mode="legacy"):
                pass

        for session in (first, second):
            assert ping(http, session).status_code == 200
        # 2026-07-28 requests are sessionless: the limit does not apply to them.
        async with mcp_client(srv.mcp, mode="auto") as client:
            await call(client, "create_entities", one_entity("modern"))
        # A session that ends makes room for a new one.
        assert http.delete("/mcp", headers=session_headers(first)).status_code == 200
        assert ping(http, first).status_code == 404
        third = open_session(http)
        assert graph_names(http, third) == ["modern"]


async def test_idle_session_is_reaped_and_its_id_answers_404_while_active_ones_stay(db_path: Path) -> None:
    """Idle time 1.5 s, room for three sessions: one idle, one with an open GET stream, one that
    pings every 0.1 s. The idle one is closed (a fourth session then fits), its id answers 404
    (so a client initializes again); the two active ones still work."""
    idle_seconds = 1.5
    with running(db_path, http_session_idle_seconds=idle_seconds, http_max_sessions=3) as srv, \
            httpx2.Client(base_url=srv.url, timeout=30) as http:
        idle, streaming, pinging = open_session(http), open_session(http), open_session(http)
        assert http.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS).status_code == 503  # full

        async with httpx2.AsyncClient(base_url=srv.url, timeout=30) as aio, \
                aio.stream("GET", "/mcp", headers={**session_headers(streaming), "accept": "text/event-stream"}
                           ) as stream, anyio.create_task_group() as tg:
            assert stream.status_code == 200
            stop = anyio.Event()

            async def keep_pinging() -> None:
                while not stop.is_set():
                    response = await aio.post("/mcp", json={"jsonrpc": "2.0", "id": 98, "method": "ping"},
                                              headers=session_headers(pinging))
                    assert response.status_code == 200, response.text
                    await anyio.sleep(0.1)

            tg.start_soon(keep_pinging)
            # Room frees up once the idle session is reaped (generous bound: 20 idle periods).
            with anyio.fail_after(30):
                while (fourth := await aio.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS)).status_code == 503:
                    await anyio.sleep(0.2)
            assert fourth.status_code == 200
            # Reaped after at least the idle time since its last request (none since opening).
            gone = ping(http, idle)
            assert gone.status_code == 404
            assert "Session not found" in gone.text
            # A session that is used, or holds its GET stream open, is not reaped.
            assert ping(http, streaming).status_code == 200
            assert ping(http, pinging).status_code == 200
            stop.set()


# -- bodies nested deeper than the parsers read ---------------------------------------------------


@pytest.mark.parametrize("depth", [250, 1000, 5000])
def test_a_body_nested_too_deeply_is_answered_with_its_own_id_never_a_500(db_path: Path, depth: int) -> None:
    """Past ~200 levels the SDK answered -32700 with id null; past Python's own parser (~1,000)
    our id scan raised and the answer was a bare 500 (found by QA). Now every such request gets
    -32600 with its own id, saying to nest less, as over stdio; a notification is accepted (202)
    and gets no answer; the session goes on."""
    nested = "[" * depth + "]" * depth
    with running(db_path) as srv, httpx2.Client(base_url=srv.url, timeout=30) as http:
        session = open_session(http)
        bodies = {7: '{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"open_nodes","arguments":'
                     '{"names":[],"x":' + nested + '}}}',
                  8: '{"jsonrpc":"2.0","method":"tools/call","params":{"x":' + nested + '},"id":8}'}
        for request_id, body in bodies.items():
            response = http.post("/mcp", content=body.encode(), headers=session_headers(session))
            assert response.status_code == 400, response.text
            error = answer(response)
            assert error["id"] == request_id and error["error"]["code"] == -32600
            assert "nests arrays and objects deeper than the server reads" in error["error"]["message"]
        notification = '{"jsonrpc":"2.0","method":"notifications/progress","params":{"x":' + nested + "}}"
        accepted = http.post("/mcp", content=notification.encode(), headers=session_headers(session))
        assert accepted.status_code == 202 and accepted.content == b""
        assert ping(http, session).status_code == 200


def test_a_body_holding_a_number_of_thousands_of_digits_is_answered_with_its_own_id(db_path: Path) -> None:
    """Valid JSON with an integer of over 4,300 digits was answered -32700 "not valid JSON" with id
    null (found by QA over stdio); now -32600 with the request's id, saying to send it as a
    string; a notification is accepted and gets no answer."""
    with running(db_path) as srv, httpx2.Client(base_url=srv.url, timeout=30) as http:
        session = open_session(http)
        body = ('{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_graph","arguments":'
                '{"x":' + "9" * 5000 + '}}}')
        response = http.post("/mcp", content=body.encode(), headers=session_headers(session))
        assert response.status_code == 400, response.text
        error = answer(response)
        assert error["id"] == 7 and error["error"]["code"] == -32600
        assert "holds a number longer than the server reads" in error["error"]["message"]
        notification = '{"jsonrpc":"2.0","method":"notifications/progress","params":{"x":' + "9" * 5000 + "}}"
        accepted = http.post("/mcp", content=notification.encode(), headers=session_headers(session))
        assert accepted.status_code == 202 and accepted.content == b""
        assert ping(http, session).status_code == 200
