"""Subscribers hear of exactly the graph changes of other processes: not of a call that changed
nothing, and a commit between the two reads of a look is not lost (found by a review of issue 13)."""

from __future__ import annotations

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

from helpers import subscribe_legacy

pytestmark = pytest.mark.anyio


async def test_another_process_call_that_changes_nothing_is_not_notified(server: Any, db_path: Path) -> None:
    """create_entities of an entity that exists changes nothing; its own server sends no
    notification (outcome.changed is False), but Store.write counts the search_sync toggles of
    batched_search_sync as changes and bumps graph_version, so every other process's subscriber
    is told the graph changed."""
    write_elsewhere(db_path, "Existing")
    inbox = Inbox()
    async with Client(server, mode="legacy", message_handler=inbox) as watcher:
        await subscribe_legacy(watcher, URI)
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
        await subscribe_legacy(watcher, URI)
        store_module.graph_version = graph_version_with_a_commit_just_before  # type: ignore[assignment]
        try:
            await anyio.sleep(2.0)
        finally:
            store_module.graph_version = real
        assert injected
        assert inbox.uris == [URI], "the commit of 'Racer' was never notified"
