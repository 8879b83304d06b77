"""The search index module (graph_memory.db.index) on real SQLite files: the choice of sync mode
from the size of a write, the one search-document definition, catch-up and the backlog view."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from graph_memory.db import graph, index
from graph_memory.db.index import SyncMode
from graph_memory.db.store import Store
from graph_memory.models import Entity, Relation


@pytest.fixture
def store(tmp_path: Path) -> Any:
    opened = Store.open(tmp_path / "memory.db")
    yield opened
    opened.close()


def pending(store: Store) -> int:
    return int(store.conn.execute("SELECT count(*) FROM search_pending").fetchall()[0][0])


def documents(store: Store) -> dict[int, tuple[Any, ...]]:
    return {row[0]: tuple(row[1:]) for row in store.conn.execute(
        "SELECT entity_id, name, entity_type, observations FROM entity_search ORDER BY entity_id")}


@pytest.mark.parametrize(("size", "mode"), [
    ({}, SyncMode.ROW),                                                         # writes nothing new
    ({"new_entities": 1}, SyncMode.BATCHED),                                    # any create: batched
    ({"grown_observations": index.BATCHED_SYNC_FROM - 1}, SyncMode.ROW),       # small additions: triggers
    ({"grown_observations": index.BATCHED_SYNC_FROM}, SyncMode.BATCHED),
    ({"merged_entities": 0, "existing_entities": 0}, SyncMode.REBUILD),         # an import into an empty file
    ({"merged_entities": 10, "existing_entities": 10 * index.BULK_FACTOR}, SyncMode.REBUILD),
    ({"merged_entities": 10, "existing_entities": 10 * index.BULK_FACTOR + 1}, SyncMode.ROW),
    ({"merged_entities": 5, "new_entities": 5, "existing_entities": 10_000}, SyncMode.ROW),  # merge rule wins
])
def test_sync_mode_follows_the_size_of_the_write(size: dict[str, int], mode: SyncMode) -> None:
    assert index.sync_mode(**size) is mode


def test_the_runtime_document_is_the_one_the_triggers_build(store: Store) -> None:
    """Documents written by the per-row triggers (migration 0002) and by index.DOCUMENT (batched
    and rebuild) are byte-identical, case rules and observation order included."""
    observations = ["Zeta ÅNGSTRÖM", "alpha", "İstanbul", "ß and ẞ", "second\tline", "ＦＵＬＬ"]

    def per_row(conn: Any) -> None:  # one observation at a time: the triggers write the document
        graph.create_entities(conn, [Entity("Row", "Kind", [])])
        for content in observations:
            graph.add_observations(conn, [("Row", [content])])

    store.run_write(per_row)
    store.run_write(lambda conn: graph.create_entities(conn, [Entity("Batched", "Kind", observations)]))
    (row, batched) = documents(store).values()
    assert row[2] == batched[2] == "\n".join(o.lower() for o in observations)

    def rebuild(conn: Any) -> None:
        with index.rebuild(conn):
            pass

    store.run_write(rebuild)
    rebuilt = documents(store)
    assert list(rebuilt.values()) == [row, batched]


def test_the_runtime_document_sql_has_no_aggregate_order_by() -> None:
    """group_concat(x ORDER BY y) needs SQLite 3.44+; the document is built from an ordered
    subquery instead, like the triggers of migration 0002."""
    assert "ORDER BY" not in index.DOCUMENT.split("FROM (")[0]


def test_batched_and_row_writes_leave_the_same_documents(tmp_path: Path) -> None:
    results = []
    for mode in (SyncMode.ROW, SyncMode.BATCHED, SyncMode.REBUILD):
        store = Store.open(tmp_path / f"{mode.value}.db")
        try:
            def write(conn: Any, mode: SyncMode = mode) -> None:
                with index.keeping_in_sync(conn, mode):
                    graph._insert_entities(conn, [Entity("a", "T", ["One", "Two"]), Entity("b", "T", [])])
                    graph._add_observations(conn, [("b", ["Three"]), ("a", ["Four"])])

            store.run_write(write)
            assert store.integrity_problems() == []
            results.append(documents(store))
        finally:
            store.close()
    assert results[0] == results[1] == results[2] == {
        1: ("a", "t", "one\ntwo\nfour"), 2: ("b", "t", "three")}


def test_catch_up_indexes_the_backlog_once_and_empties_it(store: Store) -> None:
    store.run_write(lambda conn: graph.create_entities(conn, [Entity(f"e{i}", "t", ["x"]) for i in range(3)]))
    assert pending(store) == 3
    assert store.run_read(index.behind)
    assert store.run_write(index.catch_up) == 3
    assert pending(store) == 0 and not store.run_read(index.behind)
    assert store.run_write(index.catch_up) == 0
    assert store.integrity_problems() == []


def test_catch_up_if_full_waits_for_a_full_backlog(store: Store) -> None:
    store.run_write(lambda conn: graph.create_entities(conn, [Entity("e", "t", ["x"])]))
    assert store.run_write(index.catch_up_if_full) == 0 and pending(store) == 1
    store.run_write(lambda conn: graph.create_entities(
        conn, [Entity(f"f{i}", "t", ["y"]) for i in range(index.SEARCH_BACKLOG)]))
    assert pending(store) == 0  # the write itself caught up before it committed


def test_the_backlog_view_searches_waiting_documents_beside_the_index(store: Store) -> None:
    store.run_write(lambda conn: graph.create_entities(conn, [Entity("old", "t", ["harbour"])]))
    store.catch_up_search_index()
    store.run_write(lambda conn: graph.add_observations(conn, [("old", ["lighthouse"])]))
    store.run_write(lambda conn: graph.create_entities(conn, [Entity("new", "t", ["lighthouse"])]))

    def view(conn: Any) -> tuple[Any, list[Any]]:
        tables = index.match_tables(conn)
        backlog = conn.execute("SELECT rowid FROM temp.search_backlog WHERE search_backlog MATCH "
                               "'\"lighthouse\"' ORDER BY rowid").fetchall()
        return tables, backlog

    tables, backlog = store.run_read(view)
    assert tables[1] == index.BACKLOG and tables[0][0] == "entity_fts" and "search_pending" in tables[0][1]
    assert backlog == [(1,), (2,)]  # both documents as they are now, not as the index holds them
    store.catch_up_search_index()
    assert store.run_read(index.match_tables) == (index.MAIN,)


def test_catch_up_when_idle_indexes_only_when_documents_wait(store: Store) -> None:
    assert store.catch_up_when_idle() is None
    store.run_write(lambda conn: graph.create_entities(conn, [Entity("e", "t", ["x"])]))
    assert store.catch_up_when_idle() == 1
    store.close()
    assert store.catch_up_when_idle() is None  # closed: logged, never raised


def schema_of_triggers(store: Store) -> list[tuple[Any, ...]]:
    return store.conn.execute(
        "SELECT name, tbl_name, sql FROM sqlite_schema WHERE type = 'trigger' ORDER BY name").fetchall()


def fts_settings(store: Store) -> dict[Any, Any]:
    return dict(store.conn.execute("SELECT k, v FROM entity_fts_config").fetchall())


def test_a_rebuild_leaves_the_triggers_and_the_index_settings_as_they_were(store: Store) -> None:
    """The sync triggers are dropped while a rebuild's body writes (issue 15: each still tested
    the switch for every row) and created again from their own SQL; the FTS5 settings the
    rebuild changes come back to FTS5's defaults (or the index's own values)."""
    triggers = schema_of_triggers(store)
    assert len(triggers) >= 9
    during: list[int] = []

    def rebuild(conn: Any) -> None:
        with index.rebuild(conn):
            during.append(len(conn.execute(index._SYNC_TRIGGERS).fetchall()))
            graph.create_entities(conn, [Entity("Ada", "person", ["Wrote the first program"])])

    store.run_write(rebuild)
    assert during == [0]
    assert schema_of_triggers(store) == triggers
    assert fts_settings(store) | {"version": None} == {"automerge": 4, "crisismerge": 16, "hashsize": 1024 * 1024,
                                                       "version": None}
    # The triggers work again: a per-row write after the rebuild reaches the index.
    store.run_write(lambda conn: graph.add_observations(conn, [("Ada", ["Translated Menabrea"])]))
    assert documents(store)[1][2] == "wrote the first program\ntranslated menabrea"
    store.run_write(index.catch_up)
    assert store.conn.execute("SELECT rowid FROM entity_fts WHERE entity_fts MATCH 'menabrea'").fetchall() == [(1,)]

    # An index with settings of its own keeps them.
    store.run_write(lambda conn: conn.execute("INSERT INTO entity_fts (entity_fts, rank) VALUES ('automerge', 8)"))
    store.run_write(rebuild)
    assert fts_settings(store)["automerge"] == 8


def test_a_failed_rebuild_body_leaves_the_triggers_for_a_caller_that_carries_on(store: Store) -> None:
    triggers = schema_of_triggers(store)

    def failing(conn: Any) -> None:
        with pytest.raises(RuntimeError), index.rebuild(conn):
            raise RuntimeError("the merge failed")
        assert len(conn.execute(index._SYNC_TRIGGERS).fetchall()) == len(triggers) - 1  # entities_bd: no switch

    store.run_write(failing)
    assert schema_of_triggers(store) == triggers


def test_a_rebuilding_merge_sets_the_secondary_indexes_aside_and_leaves_the_schema_as_migrated(
        store: Store, tmp_path: Path) -> None:
    """An import into an empty graph (a merge that rebuilds the search index) inserts without the
    indexes of CREATE INDEX and without the sync triggers, then creates them again: afterwards
    the schema is exactly a newly migrated database's, and a query by target name uses its index."""
    fresh = Store.open(tmp_path / "fresh.db")
    schema_sql = "SELECT type, name, tbl_name, sql FROM sqlite_schema WHERE type IN ('index', 'trigger') ORDER BY name"
    migrated = fresh.conn.execute(schema_sql).fetchall()
    fresh.close()
    during: list[list[Any]] = []

    def merge(conn: Any) -> None:
        with graph.merging(conn, 2):
            during.append([row[1] for row in conn.execute(schema_sql).fetchall()])
            graph.create_entities(conn, [Entity("Ada", "person", ["a"]), Entity("Bo", "person", [])])
            graph.create_relations(conn, [Relation("Ada", "Bo", "knows")])

    store.run_write(merge)
    assert "relations_to_name" not in during[0] and "observations_ai" not in during[0]
    assert "sqlite_autoindex_relations_1" in during[0]   # a UNIQUE constraint's: merges rely on it
    assert store.conn.execute(schema_sql).fetchall() == migrated
    plan = store.conn.execute("EXPLAIN QUERY PLAN SELECT from_name FROM relations WHERE to_name = 'Bo'").fetchall()
    assert "relations_to_name" in str(plan)
