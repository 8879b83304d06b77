"""A streamed import (the file checked whole, then merged record by record in batches inside one
transaction) decides, counts and writes exactly what an import of the reconciled file does, across
batch boundaries, and stays all or nothing.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from graph_memory.db import graph
from graph_memory.db.backend import Backend, SqliteBackend, open_backend
from graph_memory.db.store import Store
from graph_memory.errors import LegacyFormatError, StoreError
from graph_memory.importer import ImportReport, load_graph
from graph_memory.legacy import parse_legacy, stream_legacy
from graph_memory.models import Entity, Relation
from graph_memory.settings import Settings
from test_import import OK_CASES, ent, file_state, jsonl, line, rel, search_documents_are_consistent, seed, snapshot


def inverses(store: Store) -> dict[tuple[str, str, str], str]:
    return store.run_read(graph.inverse_links)


def outcome(report: ImportReport) -> tuple[dict[str, int], dict[str, int], list[Any], list[Any]]:
    return report.counts(), report.file, report.skipped_lines, report.invalid_lines


def import_both_ways(tmp_path: Path, data: bytes, *, batch: int, seeded: bool,
                     skip_invalid: bool = False) -> tuple[Store, Store, ImportReport, ImportReport]:
    """``data`` imported streamed (``batch`` records at a time) into one database and as the
    reconciled graph into another, both fresh or both seeded."""
    streamed, whole = Store.open(tmp_path / "streamed.db"), Store.open(tmp_path / "whole.db")
    if seeded:
        seed(streamed)
        seed(whole)
    report = load_graph(SqliteBackend(streamed), stream_legacy(data, skip_invalid=skip_invalid), source="f",
                        batch=batch)
    expected = load_graph(SqliteBackend(whole), parse_legacy(data, skip_invalid=skip_invalid), source="f")
    return streamed, whole, report, expected


# Repeats far apart (more than a batch between them), of new and of stored entities and relations.
REPEATS = jsonl(
    rel("Carol", "Alice", "admires"),                 # both ends defined later
    ent("Alice", "human", ["likes tea", "plays go"]),  # stored: type kept, only "plays go" added
    *(ent(f"E{i}", "t", [f"o{i}", f"o{i}"]) for i in range(7)),
    ent("Carol", "person", ["new", "new", "here"]),
    rel("Alice", "Bob"),                              # stored
    rel("Carol", "Alice", "admires"),                 # a repeat of a relation this import created
    ent("Alice", "robot", ["plays go", "sings", "likes tea"]),  # stored, again: "sings" added
    ent("Carol", "robot", ["here", "later"]),         # created above, again: "later" added
    rel("Alice", "Bob"),                              # stored, again
    rel("Bob", "Carol", "fears", inverseOf="feared_by"),  # its primary comes later
    *(rel(f"E{i}", f"E{i + 1}", "next") for i in range(6)),
    rel("Carol", "Bob", "feared_by"),
    rel("E0", "Nobody", "misses"),                    # dangling
    ent("Bob", "robot", ["beeps"]),                   # stored
    ent("Zed", "t", []),
)


@pytest.mark.parametrize("batch", [1, 2, 3, 5_000])
@pytest.mark.parametrize("seeded", [False, True], ids=["empty", "seeded"])
def test_repeats_across_batches_merge_exactly_as_the_reconciled_file(tmp_path: Path, batch: int,
                                                                    seeded: bool) -> None:
    streamed, whole, report, expected = import_both_ways(tmp_path, REPEATS, batch=batch, seeded=seeded)
    try:
        assert outcome(report) == outcome(expected)
        assert snapshot(streamed) == snapshot(whole)
        assert inverses(streamed) == inverses(whole) == {("Bob", "Carol", "fears"): "feared_by"}
        search_documents_are_consistent(streamed)
    finally:
        streamed.close()
        whole.close()
    assert report.file["merged_entities"] == 2 and report.file["duplicate_relations"] == 2
    assert report.file["dangling_relations"] == 1 and report.file["collapsed_observations"] == 7 + 1 + 3
    assert report.entities_merged == (2 if seeded else 0)


@pytest.mark.parametrize("data", [case[1] for case in OK_CASES], ids=[case[0] for case in OK_CASES])
def test_every_legacy_case_streams_to_the_same_outcome(tmp_path: Path, data: bytes) -> None:
    streamed, whole, report, expected = import_both_ways(tmp_path, data, batch=1, seeded=True)
    try:
        assert outcome(report) == outcome(expected)
        assert snapshot(streamed) == snapshot(whole)
    finally:
        streamed.close()
        whole.close()


def test_skip_invalid_streams_to_the_same_outcome(tmp_path: Path) -> None:
    data = jsonl(ent("A"), "{not json", ent("B", "t", [1]), rel("A", "B"), line({"type": "mystery"}), ent("A", "u"))
    streamed, whole, report, expected = import_both_ways(tmp_path, data, batch=1, seeded=False, skip_invalid=True)
    try:
        assert outcome(report) == outcome(expected)
        assert report.invalid_lines and report.skipped_lines
        assert snapshot(streamed) == snapshot(whole)
    finally:
        streamed.close()
        whole.close()


def test_relations_to_entities_defined_later_are_not_dangling(store: Store) -> None:
    data = jsonl(rel("A", "B"), rel("B", "Ghost"), *(ent(name, "t", ["o"]) for name in "AB"))
    report = load_graph(SqliteBackend(store), stream_legacy(data), source="f", batch=1)
    assert report.file["dangling_relations"] == 1 and report.relations_created == 2
    assert snapshot(store) == ([("A", "t", ["o"]), ("B", "t", ["o"])], [("A", "B", "knows"), ("B", "Ghost", "knows")])


def test_a_line_refused_after_the_first_batches_were_written_leaves_the_database_as_it_was(store: Store) -> None:
    # The check refuses a bad file before any write; should a bad line reach the merge all the
    # same (here: bytes swapped after the check), the rows already written are rolled back.
    good = jsonl(*(ent(f"E{i}", "t", ["o"]) for i in range(20)), rel("E0", "E1"))
    bad = good + b"{not json\n"
    seed(store)
    before = snapshot(store)
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    files_before = file_state(store.path)
    stream = dataclasses.replace(stream_legacy(good), data=bad)
    with pytest.raises(LegacyFormatError, match="line 22"):
        load_graph(SqliteBackend(store), stream, source="f", batch=2)
    assert snapshot(store) == before and file_state(store.path) == files_before
    search_documents_are_consistent(store)


def test_a_database_failure_after_the_first_batches_rolls_the_whole_import_back(store: Store) -> None:
    seed(store)
    before = snapshot(store)
    store.conn.execute("CREATE TEMP TRIGGER refuse_boom BEFORE INSERT ON relations WHEN new.from_name = 'Boom' "
                       "BEGIN SELECT RAISE(ABORT, 'refused by the test'); END")
    data = jsonl(*(ent(f"E{i}", "t", ["o", "p"]) for i in range(20)), ent("Alice", "t", ["more"]),
                 rel("E0", "E1"), rel("Boom", "E1"))
    with pytest.raises(StoreError):
        load_graph(SqliteBackend(store), stream_legacy(data), source="f", batch=2)
    assert snapshot(store) == before
    search_documents_are_consistent(store)


def seed_backend(backend: Backend) -> None:
    """:func:`test_import.seed` on any backend."""
    backend.run_write(lambda g: g.create_entities([Entity("Alice", "person", ["likes tea", "lives in Lyon"]),
                                                   Entity("Bob", "robot", [])]))
    backend.run_write(lambda g: g.create_relations([Relation("Alice", "Bob", "knows")]))


@pytest.mark.parametrize("batch", [1, 5_000])
def test_repeats_across_batches_merge_alike_on_postgres(postgres_url: str, tmp_path: Path, batch: int) -> None:
    results = []
    for settings in (Settings.load(database_url=postgres_url, file_path=tmp_path / "memory.jsonl"),
                     Settings.load(file_path=tmp_path / "lite.db")):
        backend = open_backend(settings)
        try:
            seed_backend(backend)
            report = load_graph(backend, stream_legacy(REPEATS), source="f", batch=batch)
            read = backend.run_read(lambda g: g.read_graph())
            results.append((outcome(report), read.entities, read.relations,
                            backend.run_read(lambda g: g.inverse_links())))
        finally:
            backend.close()
    assert results[0] == results[1]


def test_a_rebuilt_search_document_lowercases_each_observation_on_its_own(store: Store) -> None:
    # A rebuild lower-cases an entity's joined observations in one call: Greek final sigma and
    # other context rules must still see each observation alone, as the per-row triggers do.
    observations = ["ΟΔΟΣ", "Σ'", "'ΣΑ", "ΑΣ\u0345", "İ", "x Σ"]
    data = jsonl(ent("ΟΔΟΣ", "ΤΥΠΟΣ", observations), *(ent(f"E{i}", "t", ["Σ"]) for i in range(3)))
    load_graph(SqliteBackend(store), stream_legacy(data), source="f", batch=2)
    document = store.run_read(lambda c: c.execute(
        "SELECT s.observations FROM entity_search s JOIN entities e ON e.id = s.entity_id "
        "WHERE e.name = 'ΟΔΟΣ'").fetchall())
    assert document == [("\n".join(o.lower() for o in observations),)]
    search_documents_are_consistent(store)


def test_batch_inserts_give_each_inserted_row_its_own_id(store: Store) -> None:
    """insert_entities/insert_relations compute the ids of a batch inserted whole (the largest id
    grew by the batch size) and read them back otherwise: both ways agree with the table."""
    def ids(conn: Any, sql: str) -> dict[Any, int]:
        return {tuple(row[1:]) if len(row) > 2 else row[1]: row[0] for row in conn.execute(sql)}

    def check(conn: Any) -> None:
        created = graph.insert_entities(conn, [("A", "t"), ("B", "t")])                # all new
        conn.execute("DELETE FROM entities WHERE name = 'B'")                         # the largest id goes
        created |= graph.insert_entities(conn, [("C", "t"), ("A", "t"), ("D", "t")])  # A exists
        created |= graph.insert_entities(conn, [("E", "t")])
        assert created == ids(conn, "SELECT id, name FROM entities") | {"B": 2}
        assert list(graph.insert_entities(conn, [("E", "t")])) == []
        rels = [Relation("A", "C", "r"), Relation("A", "C", "r"), Relation("C", "A", "r")]  # a repeat
        made = graph.insert_relations(conn, rels)
        made |= graph.insert_relations(conn, [Relation("D", "E", "r"), Relation("E", "D", "r", 0.5)])
        assert made == ids(conn, "SELECT id, from_name, to_name, relation_type FROM relations")
        assert len(made) == 4

    store.run_write(check)


def test_an_import_that_adds_rows_counts_as_a_graph_change_and_one_adding_none_does_not(store: Store) -> None:
    data = jsonl(ent("A", "t", ["o"]), rel("A", "B"))
    version = store.run_read(lambda conn: conn.execute("SELECT version FROM graph_version").fetchall()[0][0])
    load_graph(SqliteBackend(store), stream_legacy(data), source="f")
    after = store.run_read(lambda conn: conn.execute("SELECT version FROM graph_version").fetchall()[0][0])
    assert after == version + 1
    report = load_graph(SqliteBackend(store), stream_legacy(data), source="f")  # all there already
    assert report.entities_created == report.observations_added == report.relations_created == 0
    again = store.run_read(lambda conn: conn.execute("SELECT version FROM graph_version").fetchall()[0][0])
    assert again == after
