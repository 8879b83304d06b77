"""Review A of issue 13 (wire): failing tests for defects found from a fresh clone."""

from __future__ import annotations

import json
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from graph_memory.db import graph
from graph_memory.db.store import Store
from graph_memory.mcp.server import ServerHandle
from graph_memory.models import Entity
from test_external_changes import URI, Inbox, write_elsewhere
from test_stdio import EXE, handshake, server_env

pytestmark = pytest.mark.anyio


async def test_another_process_call_that_changes_nothing_is_not_notified(server: Any, db_path: Path) -> None:
    """create_entities of an entity that exists changes nothing; its own server sends no
    notification (outcome.changed is False), but Store.write counts the search_sync toggles of
    batched_search_sync as changes and bumps graph_version, so every other process's subscriber
    is told the graph changed."""
    write_elsewhere(db_path, "Existing")
    inbox = Inbox()
    async with Client(server, mode="legacy", message_handler=inbox) as watcher:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await watcher.subscribe_resource(URI)
        other = Store.open(db_path)
        try:
            created = other.run_write(lambda conn: graph.create_entities(
                conn, [Entity("Existing", "person", ["seen elsewhere"])]))
        finally:
            other.close()
        assert created == []  # nothing changed
        await anyio.sleep(1.5)  # three looks
        assert inbox.uris == []


async def test_a_foreign_commit_between_the_two_reads_of_a_look_is_notified(server: Any, server_handle: ServerHandle,
                                                                            db_path: Path) -> None:
    """ExternalChanges.look reads PRAGMA data_version and graph_version; a foreign commit landing
    between the two reads must not move graph_version into the baseline while data_version still
    looks unchanged (the next look would call it index upkeep and never notify). Both are read in
    one read transaction (Store.change_counters): a commit injected just before the graph_version
    read is seen by both or by neither."""
    from graph_memory.db import store as store_module

    external = server_handle.external_changes
    real = store_module.graph_version
    injected = []

    def graph_version_with_a_commit_just_before(conn: Any) -> int | None:
        if external._version is not None and not injected:
            injected.append(True)
            write_elsewhere(db_path, "Racer")  # another process commits right now
        return real(conn)

    inbox = Inbox()
    async with Client(server, mode="legacy", message_handler=inbox) as watcher:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await watcher.subscribe_resource(URI)
        store_module.graph_version = graph_version_with_a_commit_just_before  # type: ignore[assignment]
        try:
            await anyio.sleep(2.0)
        finally:
            store_module.graph_version = real
        assert injected
        assert inbox.uris == [URI], "the commit of 'Racer' was never notified"


@pytest.mark.parametrize("bad_id", [True, 1.5, None, {"a": 1}, [1]])
def test_a_request_with_an_unusable_id_gets_an_invalid_request_reply(tmp_path: Path, bad_id: Any) -> None:
    """JSON-RPC 2.0: a request whose id is not a string or integer is an Invalid Request, answered
    with -32600 and id null. Today the SDK reads it as a notification and drops it silently
    (stdio and HTTP answer nothing; HTTP says 202), so the client waits for its timeout."""
    lines = [json.dumps(m) for m in handshake()] + [
        json.dumps({"jsonrpc": "2.0", "id": bad_id, "method": "tools/call",
                    "params": {"name": "read_graph", "arguments": {}}}),
        json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"})]
    command = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "graph_memory"]
    done = subprocess.run(command, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=60,
                          env=server_env(tmp_path, tmp_path / "memory.db"))
    replies = [json.loads(line) for line in done.stdout.splitlines() if line.strip()]
    errors = [m for m in replies if m.get("id") is None and "error" in m]
    assert [e["error"]["code"] for e in errors] == [-32600], replies


async def test_closed_http_sessions_are_not_kept_as_subscribers(db_path: Path) -> None:
    """A handshake-era HTTP client subscribes, then ends its session (DELETE) or is reaped as idle.
    Subscribers keeps the session object, and notifying it later does not fail, so it is never
    dropped: each such session costs memory for good (~18 KB; 4,500 → +80 MiB RSS) and time on
    every later write (4,500 → ~150 ms per call instead of 2 ms)."""
    from test_http import mcp_client, running

    with running(db_path) as srv:
        for _ in range(3):
            async with mcp_client(srv.mcp, mode="legacy") as legacy:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    await legacy.subscribe_resource(URI)
        async with mcp_client(srv.mcp, mode="legacy") as writer:
            await writer.call_tool("create_entities", {"entities": [
                {"name": "After", "entityType": "t", "observations": []}]})
        await anyio.sleep(0.5)
        assert len(srv.server.subscribers) == 0
