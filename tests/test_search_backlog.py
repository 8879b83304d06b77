"""The FTS index catches up in batches (migration 0003), and no search ever misses a write.

Writes record the entities whose search documents changed in ``search_pending``; the index
catches up when a search runs (``Store.run_search``), when the backlog reaches
``store.SEARCH_BACKLOG`` entities, when the server has been idle (``server.IdleCatchUp``) and when
it stops. A search that finds a backlog it cannot index now (another process holds the write
lock, the disk is full, or it was called directly) reads around it. Every test compares what a
search finds with a backlog against what it finds once the index has caught up, or against
upstream's rule.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import apsw
import pytest

from graph_memory.db import graph, index, search
from graph_memory.db.backend import SqliteBackend
from graph_memory.db.store import Store
from graph_memory.errors import GraphError
from graph_memory.mcp.server import IdleCatchUp
from graph_memory.mcp.tools import TOOLS
from graph_memory.models import Entity
from graph_memory.service import MemoryService

SPECS = {spec.name: spec for spec in TOOLS}


def run(memory: MemoryService, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return dict(SPECS[tool].run(memory, arguments).structured)


def pending(store: Store) -> int:
    return int(store.run_read(lambda c: c.execute("SELECT count(*) FROM search_pending").fetchall()[0][0]))


BASE = [
    Entity("Ada Łovelace", "Person", ["Wrote the first PROGRAM", "İstanbul trip in 1840", "likes green tea"]),
    Entity("Grace Hopper", "person", ["COBOL", "Navy ⚓ admiral", "green tea every morning"]),
    Entity("Kraków office", "Place", ["Old town, near the theremin shop"]),
    Entity("東京 team", "team", ["ships the compiler", "喫茶店 on Fridays"]),
    Entity("Σίσυφος", "myth", ["ΣΊΣΥΦΟΣ pushes the stone", "green stone, no tea"]),
] + [Entity(f"filler {i}", "thing", [f"fact number {i}", "tea" if i % 3 else "coffee"]) for i in range(20)]

QUERIES = ["tea", "green tea", "theremin", "compiler", "cobol", "σίσυφος", "喫茶", "stone", "fact number 1",
           "first program", "kraków", "person", "xyz never", "new text", "admiral"]
FTS_QUERIES = ['"green tea"', "tea NOT coffee", "comp*", "name:grace OR name:ada", "NEAR(green tea, 5)",
               "observations:stone", "new text", "ship AND comp*", '"fact number"']


def _write_after_catch_up(memory: MemoryService, store: Store) -> None:
    """A graph whose index is current, then one write of every kind left waiting for it."""
    store.run_write(lambda c: graph.create_entities(c, BASE))
    store.catch_up_search_index()
    assert pending(store) == 0
    run(memory, "add_observations", {"observations": [
        {"entityName": "Kraków office", "contents": ["new text: a tea room opened"]},
        {"entityName": "filler 3", "contents": ["now a compiler shop", "green tea too"]}]})
    run(memory, "update_observations", {"updates": [
        {"entityName": "Grace Hopper", "match": "COBOL", "replacement": "FLOW-MATIC, then new text"}]})
    run(memory, "delete_observations", {"deletions": [
        {"entityName": "Ada Łovelace", "observations": ["likes green tea"]},
        {"entityName": "Σίσυφος", "observations": ["green stone, no tea"]}]})
    run(memory, "delete_entities", {"entityNames": ["filler 4", "東京 team"]})
    run(memory, "create_entities", {"entities": [
        {"name": "Newcomer", "entityType": "person", "observations": ["brings new text and green tea"]},
        {"name": "Gone soon", "entityType": "person", "observations": ["tea, then deleted"]}]})
    run(memory, "delete_entities", {"entityNames": ["Gone soon"]})
    # The last entity was deleted: its id is free again and the next one takes it (rowid reuse).
    run(memory, "create_entities", {"entities": [
        {"name": "Reused id", "entityType": "thing", "observations": ["theremin and tea"]}]})
    assert pending(store) == 9  # "Gone soon" and "Reused id" share one id, so one row


def _all_results(store: Store) -> dict[tuple[str, str, int | None], list[str]]:
    results = {}
    for mode, queries in (("substring", QUERIES), ("words", QUERIES), ("fts", FTS_QUERIES)):
        for query in queries:
            for limit in (None, 1, 3):
                found = store.run_read(lambda c, q=query, m=mode, n=limit: search.search(c, q, m, n))
                results[(mode, query, limit)] = [e.name for e in found.entities]
    return results


def test_searches_with_a_backlog_find_exactly_what_they_find_once_it_is_indexed(memory: MemoryService,
                                                                               store: Store) -> None:
    _write_after_catch_up(memory, store)
    with_backlog = _all_results(store)
    assert pending(store) == 9, "a search in a read transaction must not write"
    assert store.catch_up_search_index() == 9
    caught_up = _all_results(store)
    for key, names in caught_up.items():
        mode, _, limit = key
        if mode == "substring":
            assert with_backlog[key] == names, key  # rowid order, exact
        elif limit is None:
            # Ranked modes: the same entities; while the index is behind, the waiting ones come first.
            assert sorted(with_backlog[key]) == sorted(names), key
        else:
            # A limit cuts the same order as without one.
            assert with_backlog[key] == with_backlog[(mode, key[1], None)][:limit], key
    # And the substring results are upstream's rule over the whole graph.
    everything = store.run_read(graph.read_graph).entities
    for query in QUERIES:
        expected = [e.name for e in everything if search.entity_matches(e, query.lower())]
        assert caught_up[("substring", query, None)] == expected, query
    assert caught_up[("substring", "new text", None)] == ["Grace Hopper", "Kraków office", "Newcomer"]
    assert caught_up[("substring", "theremin", None)] == ["Kraków office", "Reused id"]
    assert "Gone soon" not in caught_up[("substring", "tea", None)]
    assert store.integrity_problems() == []


def test_the_backlog_is_indexed_within_the_write_that_fills_it(memory: MemoryService, store: Store) -> None:
    for i in range(index.SEARCH_BACKLOG - 1):
        run(memory, "create_entities", {"entities": [{"name": f"n{i}", "entityType": "t", "observations": ["o"]}]})
    assert pending(store) == index.SEARCH_BACKLOG - 1
    # A write that changes no search document (relations) leaves the backlog as it is.
    run(memory, "create_relations", {"relations": [{"from": "n0", "to": "n1", "relationType": "knows"}]})
    assert pending(store) == index.SEARCH_BACKLOG - 1
    run(memory, "add_observations", {"observations": [{"entityName": "n0", "contents": ["more"]}]})
    assert pending(store) == index.SEARCH_BACKLOG - 1  # n0 was waiting already
    run(memory, "create_entities", {"entities": [{"name": "last", "entityType": "t", "observations": ["o"]}]})
    assert pending(store) == 0
    assert store.integrity_problems() == []


def test_a_search_call_indexes_the_backlog_first(memory: MemoryService, store: Store) -> None:
    run(memory, "create_entities", {"entities": [{"name": "Ada", "entityType": "person", "observations": ["tea"]}]})
    assert pending(store) == 1
    assert [e["name"] for e in run(memory, "search_nodes", {"query": "tea"})["entities"]] == ["Ada"]
    assert pending(store) == 0
    # open_nodes and read_graph do not read the index: they leave the backlog alone.
    run(memory, "add_observations", {"observations": [{"entityName": "Ada", "contents": ["coffee"]}]})
    run(memory, "open_nodes", {"names": ["Ada"]})
    run(memory, "read_graph", {})
    assert pending(store) == 1


def test_a_search_finds_waiting_writes_while_another_process_holds_the_write_lock(db_path: Path) -> None:
    store = Store.open(db_path, busy_timeout_ms=50)
    memory = MemoryService(SqliteBackend(store))
    try:
        run(memory, "create_entities", {"entities": [{"name": "Ada", "entityType": "person", "observations": ["tea"]}]})
        hog = apsw.Connection(str(db_path))
        hog.execute("BEGIN IMMEDIATE")
        try:
            for mode, query in (("substring", "tea"), ("words", "tea ada"), ("fts", "tea")):
                found = run(memory, "search_nodes", {"query": query, "mode": mode})
                assert [e["name"] for e in found["entities"]] == ["Ada"], mode
            assert pending(store) == 1  # it could not be indexed meanwhile; nothing failed
            assert store.catch_up_search_index(wait_ms=0) is None
        finally:
            hog.execute("ROLLBACK")
            hog.close()
        assert store.catch_up_search_index(wait_ms=0) == 1
    finally:
        store.close()


def test_ranked_searches_around_a_backlog_put_the_waiting_matches_first(db_path: Path) -> None:
    # Their BM25 scores come from a small index in which nearly every document matches, so every
    # term weighs almost nothing there: merged by score they would always come last, and a limit
    # would cut exactly the latest writes.
    store = Store.open(db_path, busy_timeout_ms=50)
    memory = MemoryService(SqliteBackend(store))
    try:
        run(memory, "create_entities", {"entities": [
            {"name": f"filler {i}", "entityType": "thing", "observations": ["mentions tea once" if i < 3 else "coffee"]}
            for i in range(100)]})
        store.catch_up_search_index()
        run(memory, "create_entities", {"entities": [{"name": "Tea", "entityType": "drink", "observations": ["tea"]}]})
        hog = apsw.Connection(str(db_path))
        hog.execute("BEGIN IMMEDIATE")  # e.g. a second server in the middle of a write
        try:
            for mode in ("words", "fts"):
                found = run(memory, "search_nodes", {"query": "tea", "mode": mode, "limit": 3})
                assert [e["name"] for e in found["entities"]] == ["Tea", "filler 0", "filler 1"], mode
            assert pending(store) == 1
        finally:
            hog.execute("ROLLBACK")
            hog.close()
        found = run(memory, "search_nodes", {"query": "tea", "mode": "words", "limit": 3})
        assert [e["name"] for e in found["entities"]] == ["Tea", "filler 0", "filler 1"]  # a name hit ranks first
        assert pending(store) == 0
    finally:
        store.close()


def test_a_full_disk_during_the_catch_up_reports_the_full_disk(memory: MemoryService, store: Store) -> None:
    run(memory, "create_entities", {"entities": [
        {"name": f"e{i}", "entityType": "t", "observations": ["x" * 3000 + f" big {i}"]} for i in range(100)]})
    store.catch_up_search_index()
    for i in range(index.SEARCH_BACKLOG - 1):
        run(memory, "add_observations", {"observations": [
            {"entityName": f"e{i}", "contents": [f"w{i:03d} " + "y" * 3000]}]})
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    (pages,) = store.conn.execute("PRAGMA page_count").fetchall()[0]
    store.conn.execute(f"PRAGMA max_page_count = {pages}")  # no page more: a full disk, for SQLite
    # Searches read around the backlog they cannot index.
    assert [e["name"] for e in run(memory, "search_nodes", {"query": "W005"})["entities"]] == ["e5"]
    # The write that fills the backlog carries its catch-up: refused as the disk is full, not as a
    # database error, and nothing of it is written.
    with pytest.raises(GraphError, match="is full; nothing of this call was written"):
        run(memory, "delete_entities", {"entityNames": ["e99"]})
    assert pending(store) == index.SEARCH_BACKLOG - 1
    store.conn.execute("PRAGMA max_page_count = 1000000000")
    assert run(memory, "delete_entities", {"entityNames": ["e99"]})["deletedEntities"] == ["e99"]
    assert pending(store) == 0
    assert store.integrity_problems() == []


def test_the_integrity_check_reports_a_write_lock_it_cannot_take(memory: MemoryService, store: Store,
                                                                 db_path: Path) -> None:
    hog = apsw.Connection(str(db_path))
    hog.execute("BEGIN IMMEDIATE")
    store.conn.set_busy_timeout(50)
    try:
        problems = store.integrity_problems()
    finally:
        hog.execute("ROLLBACK")
        hog.close()
    assert len(problems) == 1 and "locked by another process" in problems[0], problems
    assert not store.conn.in_transaction
    assert store.integrity_problems() == []


def test_the_integrity_check_indexes_the_backlog_in_a_savepoint_and_keeps_it(memory: MemoryService,
                                                                             store: Store) -> None:
    run(memory, "create_entities", {"entities": [{"name": "Ada", "entityType": "person", "observations": ["tea"]}]})
    assert store.integrity_problems() == []
    assert pending(store) == 1
    # A backlog row naming a version the index never held is damage, and the check reports it.
    store.conn.execute("UPDATE search_pending SET name = 'never indexed', entity_type = 'x', observations = 'y'")
    assert store.integrity_problems() != []


def test_an_import_that_rebuilds_the_index_leaves_no_backlog(memory: MemoryService, store: Store) -> None:
    run(memory, "create_entities", {"entities": [{"name": "Ada", "entityType": "person", "observations": ["tea"]}]})

    def bulk(conn: apsw.Connection) -> None:
        with index.rebuild(conn):
            graph.create_entities(conn, [Entity(f"b{i}", "t", [f"bulk {i}"]) for i in range(100)])

    store.run_write(bulk)
    assert pending(store) == 0
    assert store.integrity_problems() == []
    assert [e["name"] for e in run(memory, "search_nodes", {"query": "bulk 99"})["entities"]] == ["b99"]


def test_catch_up_runs_in_a_savepoint_of_the_callers_transaction(memory: MemoryService, store: Store) -> None:
    run(memory, "create_entities", {"entities": [{"name": "Ada", "entityType": "person", "observations": ["tea"]}]})
    with pytest.raises(RuntimeError), store.write() as conn:
        assert index.catch_up(conn) == 1
        raise RuntimeError("roll the whole call back")
    assert pending(store) == 1
    assert store.integrity_problems() == []


@pytest.mark.anyio
async def test_the_server_indexes_the_backlog_once_writes_pause(memory: MemoryService, store: Store) -> None:
    idle = IdleCatchUp(SqliteBackend(store), delay=0.05)
    run(memory, "create_entities", {"entities": [{"name": "Ada", "entityType": "person", "observations": ["tea"]}]})
    idle.after_call(True)
    await anyio.sleep(0.02)
    run(memory, "add_observations", {"observations": [{"entityName": "Ada", "contents": ["coffee"]}]})
    idle.after_call(True)  # restarts the countdown
    await anyio.sleep(0.04)
    assert pending(store) == 1
    await anyio.sleep(0.1)
    assert pending(store) == 0
    assert store.integrity_problems() == []
    idle.after_call(True)
    idle.cancel()
    await anyio.sleep(0.1)  # nothing runs after cancel (nor fails on an empty backlog)


@pytest.mark.anyio
async def test_the_server_indexes_what_other_processes_left_waiting(memory: MemoryService, store: Store,
                                                                     db_path: Path) -> None:
    # E.g. a server of a version before migration 0003, whose searches read the index alone.
    idle = IdleCatchUp(SqliteBackend(store), delay=0.02, poll=0.05)
    idle.after_call(False)  # a read: polling starts
    other = Store.open(db_path)
    try:
        run(MemoryService(SqliteBackend(other)), "create_entities",
            {"entities": [{"name": "Ada", "entityType": "p", "observations": ["t"]}]})
        assert pending(store) == 1
        await anyio.sleep(0.2)
        assert pending(store) == 0
        hits = other.run_read(lambda c: c.execute(
            "SELECT rowid FROM entity_fts WHERE entity_fts MATCH 'ada'").fetchall())
        assert len(hits) == 1  # in the index itself, for a reader that knows nothing of the backlog
    finally:
        idle.cancel()
        other.close()


def test_idle_catch_up_outside_an_event_loop_is_left_to_searches(memory: MemoryService, store: Store) -> None:
    idle = IdleCatchUp(SqliteBackend(store), delay=0.01)
    run(memory, "create_entities", {"entities": [{"name": "Ada", "entityType": "person", "observations": ["tea"]}]})
    idle.after_call(True)  # no running asyncio loop: nothing scheduled, nothing raised
    assert pending(store) == 1
    idle.run()
    assert pending(store) == 0
