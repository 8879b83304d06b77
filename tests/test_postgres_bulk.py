"""Imports and copies into PostgreSQL write their rows in bulk (db/postgres/bulk.py): batches
buffered, ids drawn ahead from the identity sequences, rows inserted a batch per statement. Across
every batch boundary the outcome is exactly what the SQLite backend makes of the same file:
counts, rows in creation order, times unknown, inverse marks, search documents and searches.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from graph_memory.db.backend import Backend, open_backend
from graph_memory.db.postgres import bulk
from graph_memory.errors import StoreError
from graph_memory.importer import load_graph
from graph_memory.legacy import stream_legacy
from graph_memory.settings import Settings
from test_import import ent, jsonl, rel
from test_import_stream import REPEATS, outcome, seed_backend

# NUL and U+10FFFF (escaped on PostgreSQL), non-ASCII lower-casing, and REPEATS' repeats of new and
# stored entities and relations, an inverse whose primary comes later, a dangling relation.
ODD_TEXT = jsonl(
    ent("Nul\0name", "t\0", ["a\0b", "\U0010ffff tail", "İstanbul ẞ"]),
    rel("Nul\0name", "Alice", "rel\0type"),
    ent("Alice", "person", ["İstanbul ẞ", "brand new"]),
)


@pytest.fixture
def backends(postgres_url: str, tmp_path: Path) -> Iterator[list[Backend]]:
    """A fresh PostgreSQL and a fresh SQLite backend, each seeded alike."""
    opened = [open_backend(Settings.load(database_url=postgres_url, file_path=tmp_path / "memory.jsonl")),
              open_backend(Settings.load(file_path=tmp_path / "lite.db"))]
    try:
        for backend in opened:
            seed_backend(backend)
        yield opened
    finally:
        for backend in opened:
            backend.close()


def state(backend: Backend) -> tuple[Any, ...]:
    """Everything an import decides that a reader can see, times and search results included."""
    read = backend.run_read(lambda g: g.with_times(g.read_graph()))
    searches = [backend.run_search(lambda g, q=q: g.search(q, "substring", None)).entities
                for q in ("istanbul", "nul\0", "\U0010ffff", "new", "ẞ", "o3")]
    return (read.entities, read.relations, backend.run_read(lambda g: g.inverse_links()), searches,
            backend.run_read(lambda g: g.totals()))


@pytest.mark.parametrize("bulk_rows", [1, 2, 3, 5_000])
@pytest.mark.parametrize("data", [REPEATS, ODD_TEXT, REPEATS + ODD_TEXT], ids=["repeats", "odd_text", "both"])
def test_a_bulk_import_into_postgres_ends_exactly_as_on_sqlite_across_batch_boundaries(
        backends: list[Backend], monkeypatch: pytest.MonkeyPatch, bulk_rows: int, data: bytes) -> None:
    monkeypatch.setattr(bulk, "BULK_ROWS", bulk_rows)
    results = []
    for backend in backends:
        report = load_graph(backend, stream_legacy(data), source="f", batch=2)
        results.append((outcome(report), state(backend)))
    assert results[0] == results[1]


def test_importing_the_same_file_twice_into_postgres_adds_nothing_the_second_time(
        backends: list[Backend], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulk, "BULK_ROWS", 2)
    postgres = backends[0]
    load_graph(postgres, stream_legacy(REPEATS + ODD_TEXT), source="f")
    before = state(postgres)
    again = load_graph(postgres, stream_legacy(REPEATS + ODD_TEXT), source="f")
    assert (again.entities_created, again.observations_added, again.relations_created) == (0, 0, 0)
    assert state(postgres) == before


def test_a_database_failure_after_bulk_batches_were_written_leaves_postgres_as_it_was(
        backends: list[Backend], postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulk, "BULK_ROWS", 2)
    postgres = backends[0]
    before = state(postgres)
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute("CREATE FUNCTION refuse_boom() RETURNS trigger LANGUAGE plpgsql AS "
                     "$$BEGIN RAISE EXCEPTION 'refused by the test'; END$$")
        conn.execute("CREATE TRIGGER refuse_boom BEFORE INSERT ON relations FOR EACH ROW "
                     "WHEN (new.from_name = 'Boom') EXECUTE FUNCTION refuse_boom()")
    data = jsonl(*(ent(f"E{i}", "t", ["o", "p"]) for i in range(20)), ent("Alice", "t", ["more"]),
                 rel("E0", "E1"), rel("Boom", "E1"), rel("E2", "E3"))
    with pytest.raises(StoreError, match="refused by the test"):
        load_graph(postgres, stream_legacy(data), source="f", batch=2)
    assert state(postgres) == before
