"""Loading a legacy graph (from the reference server's file) into the store.

One transaction, all or nothing: the graph is merged into whatever the database holds (existing
entities gain the observations they lack, existing relations are skipped), the search index is
rebuilt once at the end, and a failure leaves the database exactly as it was. The legacy file
itself is only ever read.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import apsw

from graph_memory.legacy import LegacyGraph, read_legacy
from graph_memory.logs import get_logger
from graph_memory.store import Store

log = get_logger("graph_memory.importer")


@dataclass(slots=True)
class ImportReport:
    """What an import did (or, for a dry run, would do). Counts are of rows written."""

    source: str
    dry_run: bool = False
    entities_created: int = 0
    entities_merged: int = 0          # file entities that already existed in the database
    observations_added: int = 0
    relations_created: int = 0
    relations_skipped: int = 0        # already in the database
    file: dict[str, int] = field(default_factory=dict)   # LegacyGraph.summary() of the file
    skipped_lines: list[tuple[int, str]] = field(default_factory=list)
    invalid_lines: list[tuple[int, str]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every count, for logs and ``--json`` output."""
        return {
            "source": self.source,
            "dry_run": self.dry_run,
            "entities_created": self.entities_created,
            "entities_merged": self.entities_merged,
            "observations_added": self.observations_added,
            "relations_created": self.relations_created,
            "relations_skipped": self.relations_skipped,
            "file": self.file,
            "skipped_lines": [{"line": n, "reason": r} for n, r in self.skipped_lines],
            "invalid_lines": [{"line": n, "reason": r} for n, r in self.invalid_lines],
        }


class _DryRun(Exception):
    """Raised inside the import transaction to roll a dry run back."""


def load_graph(store: Store, legacy: LegacyGraph, *, source: str, dry_run: bool = False,
               progress: Callable[[int], None] | None = None) -> ImportReport:
    """Merge ``legacy`` into ``store`` in one write transaction.

    Entities are created in file order; an entity that exists keeps its type and gains only the
    observations it lacks; relations are inserted as stored (also those whose endpoints are not
    entities, which the reference server keeps too), existing triples skipped.

    Args:
        progress: called with the number of items processed since the last call.
        dry_run: run everything, report the counts, then roll back.

    Raises:
        StoreError: the database could not be written (nothing was).
    """
    report = ImportReport(source=source, dry_run=dry_run, file=legacy.summary(),
                          skipped_lines=[(s.line, s.reason) for s in legacy.skipped_lines],
                          invalid_lines=[(s.line, s.reason) for s in legacy.invalid_lines])

    def run(conn: apsw.Connection) -> None:
        with store.bulk_load(conn):
            _insert(conn, legacy, report, progress)
        if dry_run:
            raise _DryRun

    with contextlib.suppress(_DryRun):
        store.run_write(run)
    return report


def _insert(conn: apsw.Connection, legacy: LegacyGraph, report: ImportReport,
            progress: Callable[[int], None] | None) -> None:
    insert_observations = "INSERT INTO observations (entity_id, content) VALUES (?, ?) ON CONFLICT DO NOTHING"
    for entity in legacy.entities:
        row = conn.execute(
            "INSERT INTO entities (name, entity_type) VALUES (?, ?) ON CONFLICT (name) DO NOTHING RETURNING id",
            (entity.name, entity.entity_type),
        ).fetchone()
        if row is not None:  # new entity: the reader already de-duplicated its observations
            report.entities_created += 1
            conn.executemany(insert_observations, [(row[0], o) for o in entity.observations])
            report.observations_added += len(entity.observations)
        else:
            report.entities_merged += 1
            entity_id = conn.execute("SELECT id FROM entities WHERE name = ?", (entity.name,)).fetchone()[0]
            for content in entity.observations:
                if conn.execute(insert_observations + " RETURNING id", (entity_id, content)).fetchone():
                    report.observations_added += 1
        if progress:
            progress(1)
    for relation in legacy.relations:
        row = conn.execute(
            "INSERT INTO relations (from_name, to_name, relation_type, weight) VALUES (?, ?, ?, ?) "
            "ON CONFLICT DO NOTHING RETURNING id",
            (relation.source, relation.target, relation.relation_type, relation.weight),
        ).fetchone()
        if row is None:
            report.relations_skipped += 1
        else:
            report.relations_created += 1
        if progress:
            progress(1)


def import_file(store: Store, path: Path, *, skip_invalid: bool = False, dry_run: bool = False,
                progress: Callable[[int], None] | None = None) -> ImportReport:
    """Read ``path`` with the legacy reader and merge it into ``store`` (see :func:`load_graph`).

    Raises:
        LegacyFormatError: the file cannot be imported as it is (nothing was written).
        StoreError: the database could not be written (nothing was).
    """
    legacy = read_legacy(path, skip_invalid=skip_invalid)
    return load_graph(store, legacy, source=str(path), dry_run=dry_run, progress=progress)


def is_empty(store: Store) -> bool:
    """True when the database holds no entity and no relation."""
    def check(conn: apsw.Connection) -> bool:
        return (conn.execute("SELECT EXISTS (SELECT 1 FROM entities) OR EXISTS (SELECT 1 FROM relations)")
                .fetchone()[0] == 0)
    return store.run_read(check)


def first_start_import(store: Store, candidates: list[Path]) -> ImportReport | None:
    """On an empty database, import the first legacy file of ``candidates`` that exists.

    Returns:
        The report, or None when the database is not empty or no candidate exists.

    Raises:
        LegacyFormatError: the legacy file has a bad line; the database stays empty and the
            message says how to fix or skip it.
    """
    legacy_path = next((p for p in candidates if p.is_file()), None)
    if legacy_path is None or not is_empty(store):
        return None
    report = import_file(store, legacy_path)
    log.info("legacy_import", path=str(legacy_path), database=str(store.path),
             entities=report.entities_created, observations=report.observations_added,
             relations=report.relations_created, **{f"file_{k}": v for k, v in report.file.items()})
    return report
