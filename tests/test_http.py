"""Streamable HTTP transport: probes, bearer token, Host/Origin checks, notifications
across sessions, access log on stderr (nothing on stdout), graceful shutdown.

Most tests run the real app under a real uvicorn on a free port in a thread of this process; the
process-level ones (stdout, signals, exit status, database after exit) start
``graph-memory serve --transport http`` as a subprocess. Every test has its own SQLite file.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import apsw
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import MCPError

from graph_memory.db import migrations
from graph_memory.db.backend import SqliteBackend
from graph_memory.db.store import Store
from graph_memory.mcp.http import (
    AccessLog,
    BearerAuth,
    build_app,
    build_uvicorn,
    host_port,
    listen_streams_closer,
    readiness,
)
from graph_memory.mcp.server import GRAPH_URI, ServerHandle, build_server
from graph_memory.service import MemoryService
from graph_memory.settings import Settings

from helpers import call, names

pytestmark = pytest.mark.anyio

TOKEN = "s3cret-token-for-tests"
INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "raw-test", "version": "0"}},
}
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


# -- an in-process server ------------------------------------------------------------------------


@dataclass
class Running:
    url: str  # http://127.0.0.1:PORT
    port: int
    server: ServerHandle  # the MCP server and its subscribers
    store: Store
    front: AccessLog  # the outermost ASGI layer (counts requests and open GET streams)
    uv: Any  # the uvicorn server
    thread: threading.Thread

    @property
    def mcp(self) -> str:
        return f"{self.url}/mcp"

    def stop(self, timeout: float = 15) -> float:
        """Ask uvicorn to shut down as a signal would; return how long it took."""
        started = time.monotonic()
        self.uv.should_exit = True
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the HTTP server did not stop"
        return time.monotonic() - started


@contextlib.contextmanager
def running(db: Path, *, migrate: bool = True, **overrides: Any) -> Iterator[Running]:
    """The real app (build_app + build_uvicorn, as serve_http wires them) on a free port.

    The store is used only by the server thread while it runs and closed after it stopped.
    """
    settings = Settings(file_path=db, http_port=0, **overrides)
    store = Store.open(db, migrate=migrate)
    server = build_server(MemoryService(SqliteBackend(store)))
    front = build_app(server.server, SqliteBackend(store), settings)
    uv = build_uvicorn(front, settings, on_shutdown=listen_streams_closer(server))
    thread = threading.Thread(target=uv.run, name="uvicorn", daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not uv.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the HTTP server did not start"
        time.sleep(0.01)
    port = uv.servers[0].sockets[0].getsockname()[1]
    srv = Running(f"http://127.0.0.1:{port}", port, server, store, front, uv, thread)
    try:
        yield srv
    finally:
        if thread.is_alive():
            srv.stop()
        store.close()


@contextlib.asynccontextmanager
async def mcp_client(url: str, *, token: str | None = None, mode: str = "auto", message_handler: Any = None,
                     server_stops: bool = False) -> AsyncIterator[Client]:
    """The SDK's client over streamable HTTP, with a bearer token when given.

    ``server_stops``: the server is stopped inside the block, so closing the session (DELETE,
    the GET stream's reconnect) may fail; such failures are ignored, the block's own are not.
    """
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with create_mcp_http_client(headers=headers) as http:
        client = Client(streamable_http_client(url, http_client=http), mode=mode, message_handler=message_handler)
        await client.__aenter__()
        try:
            yield client
        except BaseException as exc:
            with contextlib.suppress(Exception):
                await client.__aexit__(type(exc), exc, exc.__traceback__)
            raise
        if not server_stops:
            await client.__aexit__(None, None, None)
            return
        with contextlib.suppress(Exception):
            await client.__aexit__(None, None, None)


def entity(name: str) -> dict[str, Any]:
    return {"name": name, "entityType": "person", "observations": [f"{name} exists"]}


# -- probes --------------------------------------------------------------------------------------


def test_healthz_and_readyz_answer_200(db_path: Path) -> None:
    with running(db_path) as srv, httpx2.Client(base_url=srv.url) as http:
        health = http.get("/healthz")
        assert (health.status_code, health.text) == (200, "ok")
        ready = http.get("/readyz")
        assert ready.status_code == 200
        assert ready.json() == {"status": "ready", "schemaVersion": len(migrations.load_migrations())}


def test_readyz_503_with_reason_when_migrations_pending(db_path: Path) -> None:
    """A database opened without migrating: the process is alive, but not ready."""
    pending = len(migrations.load_migrations())
    with running(db_path, migrate=False) as srv, httpx2.Client(base_url=srv.url) as http:
        assert http.get("/healthz").status_code == 200
        ready = http.get("/readyz")
        assert ready.status_code == 503
        assert ready.json() == {"status": "unavailable", "reason": f"{pending} migrations pending"}
        assert str(db_path) not in ready.text  # unauthenticated: names no file


def test_readiness_reports_an_unusable_database(db_path: Path) -> None:
    store = Store.open(db_path)
    assert readiness(SqliteBackend(store))[0] is True
    store.close()
    assert readiness(SqliteBackend(store)) == (False, "database unavailable", None)


def test_probes_need_no_token_and_pass_any_host(db_path: Path) -> None:
    """kubelet probes carry no token and address the pod IP."""
    with running(db_path, http_token=TOKEN) as srv, httpx2.Client(base_url=srv.url) as http:
        for path in ("/healthz", "/readyz"):
            response = http.get(path, headers={"Host": f"10.42.0.17:{srv.port}"})
            assert response.status_code == 200, (path, response.text)


def test_an_unexpected_error_answers_500_without_details(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import graph_memory.mcp.http

    def broken(*args: Any) -> Any:
        raise RuntimeError("secret internals at /srv/data")

    monkeypatch.setattr(graph_memory.mcp.http, "readiness", broken)
    with running(db_path) as srv, httpx2.Client(base_url=srv.url) as http:
        response = http.get("/readyz")
        assert response.status_code == 500
        assert "secret" not in response.text and "Traceback" not in response.text
        # uvicorn closes the connection after an application error; a new one is served as usual.
        assert httpx2.get(f"{srv.url}/healthz").status_code == 200


# -- bearer token --------------------------------------------------------------------------------


def test_mcp_without_or_with_wrong_token_is_401(db_path: Path) -> None:
    with running(db_path, http_token=TOKEN) as srv, httpx2.Client(base_url=srv.url) as http:
        missing = http.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS)
        assert missing.status_code == 401
        assert missing.headers["www-authenticate"].startswith("Bearer")
        for wrong in (f"Bearer {TOKEN}x", "Bearer", f"Basic {TOKEN}", TOKEN, f"Bearer {TOKEN[:-1]}"):
            response = http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": wrong})
            assert response.status_code == 401, wrong
            assert response.headers["www-authenticate"].startswith("Bearer")
            assert TOKEN not in response.text
        # Other paths are not an unauthenticated way in either.
        assert http.get("/mcp/").status_code == 401
        assert http.get("/anything").status_code == 401
        ok = http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"bearer {TOKEN}"})
        assert ok.status_code == 200


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_mcp_with_right_token_serves_tool_calls(db_path: Path, mode: str) -> None:
    with running(db_path, http_token=TOKEN) as srv:
        async with mcp_client(srv.mcp, token=TOKEN, mode=mode) as client:
            assert client.protocol_version == ("2025-11-25" if mode == "legacy" else "2026-07-28")
            await call(client, "create_entities", {"entities": [entity("Alice"), entity("Bob")]})
            await call(client, "create_relations", {"relations": [
                {"from": "Alice", "to": "Bob", "relationType": "knows"}]})
            graph = await call(client, "read_graph", {})
            assert names(graph) == ["Alice", "Bob"]
            assert graph["relations"] == [{"from": "Alice", "to": "Bob", "relationType": "knows"}]
            found = await call(client, "search_nodes", {"query": "alice"})
            assert names(found) == ["Alice"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_reply_over_a_mib_reaches_the_official_python_client(db_path: Path, mode: str) -> None:
    """Replies went out as server-sent events, and the official Python client refuses an event
    over 1 MiB (DEFAULT_MAX_SSE_EVENT_SIZE): a handshake-era read of 2,500 entities failed with
    "SSE stream failed" (found by QA) although MEMORY_MAX_REPLY_BYTES allows 10 MiB. A request's
    answer is now one JSON body."""
    with running(db_path) as srv:
        async with mcp_client(srv.mcp, mode=mode) as client:
            notes = ["x" * 200] * 4
            for start in range(0, 2500, 500):
                await call(client, "create_entities", {"entities": [
                    {"name": f"E{i:04d}", "entityType": "t",
                     "observations": [f"{j} {n} {i}" for j, n in enumerate(notes)]}
                    for i in range(start, start + 500)]})
            result = await client.call_tool("read_graph", {})
            assert not result.is_error
            assert len(result.content[0].text) > 2 * 1024 * 1024   # the text alone is over 2 MiB
            assert len(result.structured_content["entities"]) == 2500


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_sdk_client_without_token_is_refused(db_path: Path, mode: str) -> None:
    with running(db_path, http_token=TOKEN) as srv:
        with pytest.raises(ExceptionGroup) as refused:
            with anyio.fail_after(20):
                async with mcp_client(srv.mcp, mode=mode) as client:
                    await client.list_tools()
        assert refused.group_contains(MCPError, depth=None)
        assert srv.store.run_read(lambda c: c.execute("SELECT count(*) FROM entities").fetchone()[0]) == 0


async def test_bearer_auth_middleware_passes_lifespan_and_public_paths() -> None:
    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope.get("path", scope["type"]))

    sent: list[Any] = []

    async def send(message: Any) -> None:
        sent.append(message)

    auth = BearerAuth(app, TOKEN)
    await auth({"type": "lifespan"}, None, send)
    await auth({"type": "http", "path": "/healthz", "headers": []}, None, send)
    await auth({"type": "http", "path": "/mcp", "headers": [(b"authorization", f"Bearer {TOKEN}".encode())]},
               None, send)
    assert seen == ["lifespan", "/healthz", "/mcp"]
    assert sent == []
    await auth({"type": "http", "path": "/mcp", "headers": [(b"authorization", b"Bearer nope")]}, None, send)
    assert seen == ["lifespan", "/healthz", "/mcp"]
    assert sent[0]["status"] == 401
    assert (b"www-authenticate", b'Bearer realm="graph-memory", error="invalid_token"') in sent[0]["headers"]


def test_no_token_configured_means_no_auth(db_path: Path) -> None:
    with running(db_path) as srv, httpx2.Client(base_url=srv.url) as http:
        assert http.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS).status_code == 200


# -- Host / Origin (DNS rebinding) ---------------------------------------------------------------


@pytest.mark.parametrize("era", [None, "2026-07-28"])
def test_foreign_host_is_refused_on_mcp_but_not_on_probes(db_path: Path, era: str | None) -> None:
    era_header = {"MCP-Protocol-Version": era} if era else {}
    with running(db_path, http_token=TOKEN) as srv, httpx2.Client(base_url=srv.url) as http:
        headers = {**MCP_HEADERS, **era_header, "Authorization": f"Bearer {TOKEN}", "Host": "evil.example:80"}
        refused = http.post("/mcp", json=INITIALIZE, headers=headers)
        assert refused.status_code == 421
        assert "Traceback" not in refused.text
        assert http.get("/healthz", headers={"Host": "evil.example:80"}).status_code == 200
        # The default allowlist is the localhost forms.
        for host in (f"localhost:{srv.port}", f"127.0.0.1:{srv.port}"):
            ok = http.post("/mcp", json=INITIALIZE, headers={**headers, "Host": host})
            assert ok.status_code != 421, host


def test_dns_rebinding_protection_stays_on_when_bound_to_all_interfaces(db_path: Path) -> None:
    """Bound to 0.0.0.0 the SDK would switch the Host check off; we keep it on, and the operator
    lists the pod's own names in MEMORY_ALLOWED_HOSTS."""
    with running(db_path, http_host="0.0.0.0", allowed_hosts=["10.42.0.17:*", "graph-memory:*"]) as srv, \
            httpx2.Client(base_url=srv.url) as http:
        assert http.post("/mcp", json=INITIALIZE,
                         headers={**MCP_HEADERS, "Host": f"127.0.0.1:{srv.port}"}).status_code == 421
        assert http.post("/mcp", json=INITIALIZE,
                         headers={**MCP_HEADERS, "Host": "evil.example:8000"}).status_code == 421
        for host in ("10.42.0.17:8000", "graph-memory:8000"):
            assert http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Host": host}).status_code == 200


@pytest.mark.parametrize("era", [None, "2026-07-28"])
def test_foreign_origin_is_refused(db_path: Path, era: str | None) -> None:
    era_header = {"MCP-Protocol-Version": era} if era else {}
    with running(db_path) as srv, httpx2.Client(base_url=srv.url) as http:
        refused = http.post("/mcp", json=INITIALIZE,
                            headers={**MCP_HEADERS, **era_header, "Origin": "http://evil.example"})
        assert refused.status_code == 403
        allowed = http.post("/mcp", json=INITIALIZE,
                            headers={**MCP_HEADERS, "Origin": f"http://localhost:{srv.port}"})
        assert allowed.status_code == 200


# -- bind address --------------------------------------------------------------------------------


def test_binds_localhost_by_default(db_path: Path) -> None:
    settings = Settings(file_path=db_path)
    assert settings.http_host == "127.0.0.1"
    store = Store.open(db_path)
    try:
        server = build_server(MemoryService(SqliteBackend(store))).server
        uv = build_uvicorn(build_app(server, store, settings), settings)
        assert (uv.config.host, uv.config.port) == ("127.0.0.1", 8000)
        assert uv.config.log_config is None and uv.config.access_log is False
        assert uv.config.lifespan == "on"
    finally:
        store.close()


# -- notifications across sessions ---------------------------------------------------------------


async def test_resource_updates_reach_every_subscribed_http_session(db_path: Path) -> None:
    """Two handshake-era sessions subscribe with resources/subscribe, a 2026-07-28 client listens;
    a mutation from a third session reaches all of them. A call that changes nothing sends none."""
    with running(db_path, http_token=TOKEN) as srv:
        received: dict[str, list[str]] = {"a": [], "b": []}

        def handler(key: str) -> Any:
            async def handle(message: Any) -> None:
                if getattr(message, "method", None) == "notifications/resources/updated":
                    received[key].append(str(message.params.uri))
            return handle

        async with mcp_client(srv.mcp, token=TOKEN, mode="legacy", message_handler=handler("a")) as a, \
                mcp_client(srv.mcp, token=TOKEN, mode="legacy", message_handler=handler("b")) as b, \
                mcp_client(srv.mcp, token=TOKEN) as modern, \
                mcp_client(srv.mcp, token=TOKEN, mode="legacy") as writer:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # resources/subscribe is deprecated in the 2026 era
                await a.subscribe_resource(GRAPH_URI)
                await b.subscribe_resource(GRAPH_URI)
            assert len(srv.server.subscribers) == 2
            with anyio.fail_after(10):  # each handshake-era session's GET stream is open
                while srv.front.streams < 3:
                    await anyio.sleep(0.02)
            async with modern.listen(resource_subscriptions=[GRAPH_URI]) as subscription:
                await call(writer, "create_entities", {"entities": [entity("Carol")]})
                with anyio.fail_after(10):
                    async for event in subscription:
                        assert event.uri == GRAPH_URI
                        break
                    while not (received["a"] and received["b"]):
                        await anyio.sleep(0.05)
                assert received == {"a": [GRAPH_URI], "b": [GRAPH_URI]}

                # The subscriber's own mutation notifies the other subscriber (and itself).
                await call(a, "add_observations", {"observations": [{"entityName": "Carol", "contents": ["new"]}]})
                with anyio.fail_after(10):
                    while len(received["b"]) < 2 or len(received["a"]) < 2:
                        await anyio.sleep(0.05)

                # Nothing changed: no notification.
                await call(writer, "create_entities", {"entities": [entity("Carol")]})
                await anyio.sleep(0.5)
                assert len(received["a"]) == len(received["b"]) == 2


# -- graceful shutdown (in process) --------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_shutdown_lets_an_in_flight_call_finish(db_path: Path, mode: str) -> None:
    """Shutdown starts while a mutating call is still being served (held in its notification
    step): the call completes, its answer reaches the client, then the server stops."""
    with running(db_path) as srv:
        entered = threading.Event()
        notify = srv.server.subscribers.notify

        async def slow_notify(uri: str) -> None:
            entered.set()
            await anyio.sleep(1.0)
            await notify(uri)

        srv.server.subscribers.notify = slow_notify
        result: dict[str, Any] = {}
        stopped: dict[str, float] = {}
        async with mcp_client(srv.mcp, mode=mode, server_stops=True) as client:
            # The client validates results against the tool's output schema, fetching tools/list
            # first if it has not yet: do that now, the stopping server accepts no new connection.
            await client.list_tools()

            async def call_tool() -> None:
                result["value"] = await client.call_tool("create_entities", {"entities": [entity("Dave")]})

            async with anyio.create_task_group() as tg:
                tg.start_soon(call_tool)
                assert await anyio.to_thread.run_sync(entered.wait, 10)
                stopped["after"] = await anyio.to_thread.run_sync(srv.stop)
        assert not result["value"].is_error
        assert json.loads(result["value"].content[0].text)[0]["name"] == "Dave"
        assert 0.5 < stopped["after"] < 8
    check = Store.open(db_path)
    try:
        assert check.integrity_problems() == []
        assert check.run_read(lambda c: c.execute("SELECT name FROM entities").fetchall()) == [("Dave",)]
    finally:
        check.close()


# -- the real process ----------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Process:
    proc: subprocess.Popen[bytes]
    port: int
    stdout: Path
    stderr: Path

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stderr_lines(self) -> list[dict[str, Any]]:
        lines = [line for line in self.stderr.read_text(encoding="utf-8").splitlines() if line.strip()]
        return [json.loads(line) for line in lines]  # every line is one JSON object


@contextlib.contextmanager
def serve_process(tmp_path: Path, db: Path, *extra: str) -> Iterator[Process]:
    port = _free_port()
    script = Path(sys.executable).with_name("graph-memory")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "graph_memory"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_FILE_PATH=str(db), MEMORY_HTTP_TOKEN=TOKEN, MEMORY_LOG_FORMAT="json", MEMORY_LOG_LEVEL="info")
    out, err = tmp_path / "stdout.txt", tmp_path / "stderr.txt"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen([*command, "serve", "--transport", "http", "--port", str(port), *extra],
                                stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=env)
    process = Process(proc, port, out, err)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, f"server exited early: {err.read_text()}"
            assert time.monotonic() < deadline, f"server did not become ready: {err.read_text()}"
            with contextlib.suppress(httpx2.TransportError):
                if httpx2.get(f"{process.url}/readyz", timeout=1).status_code == 200:
                    break
            time.sleep(0.1)
        yield process
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(10)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
async def test_process_serves_logs_to_stderr_and_stops_cleanly(tmp_path: Path, sig: signal.Signals) -> None:
    """`graph-memory serve --transport http`: nothing on stdout, JSON access-log lines on stderr
    (without the token), bound to 127.0.0.1; a signal while a handshake-era session (with its GET
    stream) and a 2026-07-28 listen stream are open stops it within seconds with status 0, the
    listen stream ends gracefully, and the database is intact."""
    db = tmp_path / "memory.db"
    with serve_process(tmp_path, db) as server:
        url = f"{server.url}/mcp"
        async with mcp_client(url, token=TOKEN) as modern:
            await call(modern, "create_entities", {"entities": [entity("Erin")]})
        async with mcp_client(url, token=TOKEN, mode="legacy") as legacy:
            await call(legacy, "add_observations", {"observations": [{"entityName": "Erin", "contents": ["x"]}]})

        ended: dict[str, Any] = {}
        async with contextlib.AsyncExitStack() as stack:
            legacy = await stack.enter_async_context(mcp_client(url, token=TOKEN, mode="legacy", server_stops=True))
            await call(legacy, "read_graph", {})
            modern = await stack.enter_async_context(mcp_client(url, token=TOKEN, server_stops=True))
            subscription = await stack.enter_async_context(modern.listen(resource_subscriptions=[GRAPH_URI]))
            await anyio.sleep(0.3)  # let the legacy session's GET stream open

            started = time.monotonic()
            server.proc.send_signal(sig)
            with anyio.fail_after(10):
                async for _ in subscription:
                    pass  # ends when the server closes the stream gracefully
            ended["listen"] = time.monotonic() - started
            code = await anyio.to_thread.run_sync(server.proc.wait, 15)
            ended["process"] = time.monotonic() - started

        assert code == 0
        assert ended["listen"] < 3
        assert ended["process"] < 5, ended
        assert server.stdout.read_bytes() == b""
        raw = server.stderr.read_text(encoding="utf-8")
        assert TOKEN not in raw
        lines = server.stderr_lines()
        requests = [line for line in lines if line["event"] == "http_request"]
        assert {(r["method"], r["path"]) for r in requests} >= {("POST", "/mcp"), ("GET", "/mcp"), ("DELETE", "/mcp")}
        for r in requests:
            assert set(r) >= {"method", "path", "status", "duration_ms", "level", "timestamp"}
            assert isinstance(r["status"], int) and isinstance(r["duration_ms"], float)
        listening = next(line for line in lines if line["event"] == "http_listening")
        assert listening["addresses"] == [f"127.0.0.1:{server.port}"]
        assert [line["event"] for line in lines][-1] == "server_stopped"
        assert [line for line in lines if line["level"] in ("error", "critical")] == []

    conn = apsw.Connection(str(db))
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert conn.execute("SELECT name FROM entities").fetchall() == [("Erin",)]
    finally:
        conn.close()


def test_process_reports_a_port_in_use(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
        env.update(MEMORY_FILE_PATH=str(tmp_path / "memory.db"), MEMORY_LOG_FORMAT="json")
        done = subprocess.run([sys.executable, "-m", "graph_memory", "serve", "--transport", "http",
                               "--port", str(port)], env=env, capture_output=True, timeout=30)
    assert done.returncode == 1
    assert done.stdout == b""
    assert b"could not start" in done.stderr


async def test_access_log_counts_calls_in_flight_and_standing_streams_apart() -> None:
    during: list[int] = []
    streams: list[int] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        during.append(front.in_flight)
        streams.append(front.streams)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    async def send(message: Any) -> None:
        pass

    front = AccessLog(app)
    for method, path in (("POST", "/mcp"), ("GET", "/mcp"), ("DELETE", "/mcp"), ("GET", "/readyz")):
        await front({"type": "http", "method": method, "path": path, "headers": []}, None, send)
    assert during == [1, 0, 1, 1]
    assert streams == [0, 1, 0, 0]
    assert front.in_flight == front.streams == 0


def test_healthcheck_in_http_mode_also_asks_the_server_for_readyz(db_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from graph_memory import cli

    monkeypatch.setenv("MEMORY_TRANSPORT", "http")
    with running(db_path) as srv:
        monkeypatch.setenv("MEMORY_HTTP_PORT", str(srv.port))
        assert cli.main(["--database", str(db_path), "healthcheck"]) == 0
    monkeypatch.setenv("MEMORY_HTTP_PORT", str(_free_port()))
    assert cli.main(["--database", str(db_path), "healthcheck"]) == 1
    assert "does not answer" in capsys.readouterr().err


@pytest.mark.parametrize(("host", "port", "expected"), [
    ("127.0.0.1", 8000, "127.0.0.1:8000"), ("::1", 8000, "[::1]:8000"), ("::", 80, "[::]:80"),
    ("fe80::1%eth0", 1, "[fe80::1%eth0]:1"), ("localhost", 9, "localhost:9")])
def test_listening_addresses_bracket_ipv6_as_urls_do(host: str, port: int, expected: str) -> None:
    assert host_port(host, port) == expected
