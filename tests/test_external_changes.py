"""Subscribers hear of changes other processes commit to the same database file (issue 13, item 7):
the server looks at SQLite's ``PRAGMA data_version`` while anyone is subscribed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from graph_memory.db import graph
from graph_memory.db.store import Store
from graph_memory.mcp.server import ServerHandle
from graph_memory.models import Entity
from test_stdio import EXE, handshake, run_session, server_env

from helpers import call, subscribe_legacy

pytestmark = pytest.mark.anyio
URI = "memory://knowledge-graph"
# Generous upper bound for "within about a second" (the server looks every 0.5 s).
NOTICED_WITHIN = 3.0


class Inbox:
    """Counts resources/updated notifications a handshake-era client receives."""

    def __init__(self) -> None:
        self.uris: list[str] = []

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))

    async def wait_for(self, count: int, within: float = NOTICED_WITHIN) -> None:
        with anyio.fail_after(within):
            while len(self.uris) < count:
                await anyio.sleep(0.02)
        assert self.uris == [URI] * count


def write_elsewhere(db: Path, name: str) -> None:
    """Commit one new entity through a connection of its own (as another process would)."""
    other = Store.open(db)
    try:
        other.run_write(lambda conn: graph.create_entities(conn, [Entity(name, "person", ["seen elsewhere"])]))
    finally:
        other.close()


async def test_legacy_subscriber_hears_of_another_connections_commit(server: Any, db_path: Path) -> None:
    inbox = Inbox()
    async with Client(server, mode="legacy", message_handler=inbox) as watcher:
        await subscribe_legacy(watcher, URI)
        write_elsewhere(db_path, "Alice")
        await inbox.wait_for(1)
        write_elsewhere(db_path, "Bob")  # every later commit too, not only the first
        await inbox.wait_for(2)
        assert {e["name"] for e in (await call(watcher, "read_graph", {}))["entities"]} == {"Alice", "Bob"}


async def test_another_connections_search_index_upkeep_is_not_a_change(server: Any, db_path: Path) -> None:
    """Another process bringing the FTS index up to date commits, but changes no entity,
    observation or relation (graph_version, migration 0005, stays): no notification for it."""
    inbox = Inbox()
    async with Client(server, mode="legacy", message_handler=inbox) as watcher:
        await subscribe_legacy(watcher, URI)
        other = Store.open(db_path)
        try:
            other.run_write(lambda conn: graph.create_entities(conn, [Entity("Alice", "person", ["o"])]))
            await inbox.wait_for(1)
            assert other.catch_up_search_index() == 1        # an index-only commit of its own
            await anyio.sleep(1.5)                           # three looks of the server
            assert inbox.uris == [URI]
            other.run_write(lambda conn: graph.add_observations(conn, [("Alice", ["more"])]))
            await inbox.wait_for(2)                          # a graph change is heard again
        finally:
            other.close()


async def test_modern_listen_stream_hears_of_another_connections_commit(server: Any, db_path: Path) -> None:
    async with Client(server) as watcher, watcher.listen(resource_subscriptions=[URI]) as sub:
        write_elsewhere(db_path, "Alice")
        with anyio.fail_after(NOTICED_WITHIN):
            event = await sub.__aiter__().__anext__()
        assert event.uri == URI


async def test_a_real_second_process_writing_reaches_the_subscriber(server: Any, db_path: Path, tmp_path: Path) -> None:
    """A second ``graph-memory`` stdio server on the same file (the README's several processes per
    file) creates an entity; this server's subscriber is told within about a second."""
    inbox = Inbox()
    async with Client(server, mode="legacy", message_handler=inbox) as watcher:
        await subscribe_legacy(watcher, URI)
        requests = handshake(("create_entities", {"entities": [
            {"name": "Carol", "entityType": "person", "observations": ["from process two"]}]}))
        messages, stderr, code = await anyio.to_thread.run_sync(
            run_session, server_env(tmp_path, db_path), requests)
        assert code == 0, stderr
        assert not any("error" in m or m.get("result", {}).get("isError") for m in messages), messages
        await inbox.wait_for(1)


async def test_a_stdio_server_process_notifies_its_subscriber_of_another_process_write(tmp_path: Path) -> None:
    """Both ends real: the subscribed server is a ``graph-memory`` process (stdio mode, its own
    event loop), the writer another process (``graph-memory import``)."""
    db = tmp_path / "memory.db"
    inbox = Inbox()
    params = StdioServerParameters(command=str(EXE), args=[], env=server_env(tmp_path, db))
    async with Client(params, mode="legacy", message_handler=inbox) as watcher:
        await subscribe_legacy(watcher, URI)
        legacy = tmp_path / "other.jsonl"
        legacy.write_text(json.dumps({"type": "entity", "name": "Dana", "entityType": "person",
                                      "observations": []}) + "\n")
        done = await anyio.run_process([str(EXE), "import", str(legacy)], check=False,
                                        env={**server_env(tmp_path, db)})
        assert done.returncode == 0, done.stderr.decode()
        await inbox.wait_for(1)


async def test_own_writes_are_notified_once_not_again_by_the_polling(server: Any, store: Store) -> None:
    """The server's own commits (the write and its idle index catch-up) do not change its
    connection's data_version: one notification per changing call."""
    inbox = Inbox()
    async with Client(server, mode="legacy", message_handler=inbox) as watcher, \
            Client(server, mode="legacy") as writer:
        await subscribe_legacy(watcher, URI)
        await call(writer, "create_entities", {"entities": [{"name": "A", "entityType": "t", "observations": ["o"]}]})
        await inbox.wait_for(1)
        # Past two looks and the idle catch-up of the search index (0.5 s after the write).
        await anyio.sleep(1.5)
        assert inbox.uris == [URI]
        assert not store.run_read(lambda c: c.execute(
            "SELECT count(*) FROM search_pending").fetchall()[0][0])  # the catch-up did run


async def test_polling_runs_only_while_someone_is_subscribed(server: Any, server_handle: ServerHandle,
                                                              db_path: Path) -> None:
    external = server_handle.external_changes
    async with Client(server, mode="legacy") as plain:
        await call(plain, "read_graph", {})
        assert external._handle is None  # no subscriber, no polling
    async with Client(server) as watcher:
        async with watcher.listen(resource_subscriptions=[URI]):
            with anyio.fail_after(NOTICED_WITHIN):
                while external._handle is None:
                    await anyio.sleep(0.02)
        with anyio.fail_after(NOTICED_WITHIN):  # the stream ended: the next look stops the polling
            while external._handle is not None:
                await anyio.sleep(0.05)


async def test_http_subscribers_of_both_generations_hear_of_another_connections_commit(db_path: Path) -> None:
    from test_http import mcp_client, running

    inbox = Inbox()
    with running(db_path) as srv:
        async with mcp_client(srv.mcp, mode="legacy", message_handler=inbox) as legacy, mcp_client(srv.mcp) as modern:
            await subscribe_legacy(legacy, URI)
            with anyio.fail_after(10):  # the handshake-era session's GET stream is open
                while srv.front.streams < 1:
                    await anyio.sleep(0.02)
            async with modern.listen(resource_subscriptions=[URI]) as sub:
                write_elsewhere(db_path, "Erin")
                with anyio.fail_after(NOTICED_WITHIN):
                    event = await sub.__aiter__().__anext__()
                assert event.uri == URI
                await inbox.wait_for(1)


async def test_looking_ends_quietly_when_the_store_is_closed(server: Any, server_handle: ServerHandle,
                                                             store: Store) -> None:
    external = server_handle.external_changes
    async with Client(server) as watcher, watcher.listen(resource_subscriptions=[URI]):
        with anyio.fail_after(NOTICED_WITHIN):
            while external._handle is None:
                await anyio.sleep(0.02)
        store.close()  # as the server does when it stops
        with anyio.fail_after(NOTICED_WITHIN):
            while external._handle is not None:
                await anyio.sleep(0.05)
