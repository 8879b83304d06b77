"""Moving a graph between the store and the reference server's file: import, dry run, export.

An import is one write transaction, all or nothing: the legacy graph is merged into whatever the
database holds (new entities are created in file order, an existing entity keeps its type and gains
only the observations it lacks, existing relation triples are skipped), and a failure leaves the
database exactly as it was. A dry run makes the same decisions with reads only and writes nothing.
The legacy file itself is only ever read. An export is written to a temporary file beside the
target and renamed over it once complete, so a failed export never leaves a half-written file.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import apsw

from graph_memory.errors import GraphError
from graph_memory.legacy import LegacyGraph, read_legacy, write_legacy
from graph_memory.logs import get_logger
from graph_memory.models import Entity, Relation
from graph_memory.store import Store

log = get_logger("graph_memory.importer")

# Rebuilding the whole search index costs about as much per entity already in the database as
# syncing it row by row costs per imported entity divided by this factor; above it, rebuild once.
_BULK_FACTOR = 10
# Observations buffered before one executemany; progress is reported every this many items.
_FLUSH_ROWS = 10_000
_PROGRESS_EVERY = 1_000
# Page cache while importing, in KiB as SQLite's negative cache_size means (64 MiB, used only as needed).
_IMPORT_CACHE_KIB = -65_536


class Progress(Protocol):
    """Where an import reports how far it got (the CLI draws a bar; nothing else needs one)."""

    def advance(self, items: int) -> None:
        """``items`` more file entities or relations were processed."""

    def phase(self, name: str) -> None:
        """A new phase started (``"importing"``, then ``"indexing"`` for the search index)."""


@dataclass(slots=True)
class ImportReport:
    """What an import did (or, for a dry run, would do). Counts are of database rows.

    ``file`` is :meth:`LegacyGraph.summary` of the file (what the reader reconciled inside the
    file itself); the other counts compare the file with the database.
    """

    source: str
    database: str | None = None
    dry_run: bool = False
    entities_created: int = 0
    entities_merged: int = 0          # file entities that already existed in the database
    type_conflicts: int = 0           # of those, how many have another type there (theirs is kept)
    observations_added: int = 0
    relations_created: int = 0
    relations_skipped: int = 0        # already in the database
    file: dict[str, int] = field(default_factory=dict)
    skipped_lines: list[tuple[int, str]] = field(default_factory=list)
    invalid_lines: list[tuple[int, str]] = field(default_factory=list)

    @classmethod
    def for_graph(cls, legacy: LegacyGraph, *, source: str, database: str | None, dry_run: bool) -> ImportReport:
        """An empty report carrying the file's own summary and listed lines."""
        return cls(source=source, database=database, dry_run=dry_run, file=legacy.summary(),
                   skipped_lines=[(s.line, s.reason) for s in legacy.skipped_lines],
                   invalid_lines=[(s.line, s.reason) for s in legacy.invalid_lines])

    def counts(self) -> dict[str, int]:
        """The database-side counts as ``{name: int}``."""
        return {
            "entities_created": self.entities_created,
            "entities_merged": self.entities_merged,
            "type_conflicts": self.type_conflicts,
            "observations_added": self.observations_added,
            "relations_created": self.relations_created,
            "relations_skipped": self.relations_skipped,
        }

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every count and listed line, for ``--json`` output."""
        return {
            "source": self.source,
            "database": self.database,
            "dry_run": self.dry_run,
            **self.counts(),
            "file": self.file,
            "skipped_lines": [{"line": n, "reason": r} for n, r in self.skipped_lines],
            "invalid_lines": [{"line": n, "reason": r} for n, r in self.invalid_lines],
        }

    def log_fields(self) -> dict[str, Any]:
        """Flat fields for one structured log line (line lists reduced to their counts)."""
        return {"path": self.source, "database": self.database, "dry_run": self.dry_run,
                # the short names first-start logs have always carried (rows written):
                "entities": self.entities_created, "observations": self.observations_added,
                "relations": self.relations_created,
                **self.counts(), **{f"file_{k}": v for k, v in self.file.items()}}


def _scalar(conn: apsw.Connection, sql: str, params: tuple[Any, ...] = ()) -> Any:
    """The first column of the one row ``sql`` returns."""
    row = conn.execute(sql, params).fetchone()
    assert row is not None, sql
    return row[0]


_INSERT_ENTITY = "INSERT INTO entities (name, entity_type) VALUES (?, ?) ON CONFLICT (name) DO NOTHING RETURNING id"
_FIND_ENTITY = "SELECT id, entity_type FROM entities WHERE name = ?"


class _NotEmpty(Exception):
    """Raised inside the first-start transaction when another process imported first."""


def _merge(conn: apsw.Connection, legacy: LegacyGraph, report: ImportReport, *, write: bool,
           progress: Progress | None) -> None:
    """Decide, entity by entity and relation by relation, what the file adds; write it when
    ``write``. The decisions only read rows that exist before the call (the reader already merged
    duplicate names and triples), so a dry run and a real import count exactly alike."""
    pending: list[tuple[int, str]] = []
    insert_observations = "INSERT INTO observations (entity_id, content) VALUES (?, ?)"

    def flush() -> None:
        if pending:
            conn.executemany(insert_observations, pending)
            pending.clear()

    done = 0
    for entity in legacy.entities:
        found = None
        if write:  # one statement for a new entity; a conflict means it exists
            row = conn.execute(_INSERT_ENTITY, (entity.name, entity.entity_type)).fetchone()
            if row is None:
                found = conn.execute(_FIND_ENTITY, (entity.name,)).fetchone()
            else:
                pending.extend((row[0], o) for o in entity.observations)
        else:
            found = conn.execute(_FIND_ENTITY, (entity.name,)).fetchone()
        if found is None:
            report.entities_created += 1
            report.observations_added += len(entity.observations)
        else:
            entity_id, entity_type = found
            report.entities_merged += 1
            report.type_conflicts += entity_type != entity.entity_type
            if entity.observations:
                have = {c for (c,) in conn.execute("SELECT content FROM observations WHERE entity_id = ?",
                                                   (entity_id,))}
                new = [o for o in entity.observations if o not in have]
                report.observations_added += len(new)
                if write:
                    pending.extend((entity_id, o) for o in new)
        if len(pending) >= _FLUSH_ROWS:
            flush()
        done += 1
        if progress and done % _PROGRESS_EVERY == 0:
            progress.advance(_PROGRESS_EVERY)
    flush()
    for relation in legacy.relations:
        key = (relation.source, relation.target, relation.relation_type)
        if write:
            created = conn.execute(
                "INSERT INTO relations (from_name, to_name, relation_type, weight) VALUES (?, ?, ?, ?) "
                "ON CONFLICT DO NOTHING RETURNING id", (*key, relation.weight)).fetchone() is not None
        else:
            created = conn.execute("SELECT 1 FROM relations WHERE from_name = ? AND to_name = ? "
                                   "AND relation_type = ?", key).fetchone() is None
        if created:
            report.relations_created += 1
        else:
            report.relations_skipped += 1
        done += 1
        if progress and done % _PROGRESS_EVERY == 0:
            progress.advance(_PROGRESS_EVERY)
    if progress:
        progress.advance(done % _PROGRESS_EVERY)


def _is_empty(conn: apsw.Connection) -> bool:
    return bool(_scalar(conn, "SELECT NOT EXISTS (SELECT 1 FROM entities) AND NOT EXISTS (SELECT 1 FROM relations)"))


def _load(store: Store, legacy: LegacyGraph, *, source: str, progress: Progress | None,
          require_empty: bool) -> ImportReport | None:
    def run(conn: apsw.Connection) -> ImportReport:
        # A fresh report per attempt: run_write may retry the whole transaction when busy.
        report = ImportReport.for_graph(legacy, source=source, database=str(store.path), dry_run=False)
        if require_empty and not _is_empty(conn):
            raise _NotEmpty
        if progress:
            progress.phase("importing")
        existing = _scalar(conn, "SELECT count(*) FROM entities")
        if len(legacy.entities) * _BULK_FACTOR >= existing:
            # Per-row search sync off; entity_search and the FTS index are rebuilt once on exit.
            with store.bulk_load(conn):
                _merge(conn, legacy, report, write=True, progress=progress)
                if progress:
                    progress.phase("indexing")
        else:  # a small file into a large database: the triggers keep the index in sync
            _merge(conn, legacy, report, write=True, progress=progress)
        return report

    # A larger page cache for the one big transaction: fewer dirty pages spilled to the WAL early.
    previous = _scalar(store.conn, "PRAGMA cache_size")
    store.conn.execute(f"PRAGMA cache_size = {_IMPORT_CACHE_KIB:d}")
    try:
        return store.run_write(run)
    except _NotEmpty:
        return None
    finally:
        store.conn.execute(f"PRAGMA cache_size = {int(previous):d}")


def load_graph(store: Store, legacy: LegacyGraph, *, source: str, progress: Progress | None = None) -> ImportReport:
    """Merge ``legacy`` into ``store`` in one write transaction.

    Entities are created in file order; an entity that exists keeps its type and gains only the
    observations it lacks (appended in file order); relations are inserted as stored (also those
    whose endpoints are not entities, which the reference server keeps too) with the weight they
    carry (the file's ``weight``, else 1.0), existing triples skipped and left as they are (an
    existing relation keeps its own weight, whatever weight the file gives it).

    Raises:
        StoreError: the database could not be written (nothing was).
    """
    report = _load(store, legacy, source=source, progress=progress, require_empty=False)
    assert report is not None
    return report


def plan_graph(store: Store | None, legacy: LegacyGraph, *, source: str, database: str | None = None) -> ImportReport:
    """What :func:`load_graph` would do, computed with reads only (a dry run; nothing is written).

    Args:
        store: the database to compare with, or ``None`` for one that does not exist yet (or has
            no tables): everything in the file would be created.
        database: the database path to name in the report when ``store`` is None.
    """
    report = ImportReport.for_graph(legacy, source=source, dry_run=True,
                                    database=str(store.path) if store else database)
    if store is None:
        report.entities_created = len(legacy.entities)
        report.observations_added = legacy.observation_count
        report.relations_created = len(legacy.relations)
        return report

    def run(conn: apsw.Connection) -> None:
        _merge(conn, legacy, report, write=False, progress=None)

    store.run_read(run)
    return report


def import_file(store: Store, path: str | os.PathLike[str], *, skip_invalid: bool = False, dry_run: bool = False,
                progress: Progress | None = None) -> ImportReport:
    """Read ``path`` with the legacy reader, then :func:`load_graph` it (or :func:`plan_graph`
    it for a dry run).

    Raises:
        LegacyFormatError: the file cannot be imported as it is (nothing was written).
        StoreError: the database could not be written (nothing was).
    """
    legacy = read_legacy(path, skip_invalid=skip_invalid)
    if dry_run:
        return plan_graph(store, legacy, source=os.fspath(path))
    return load_graph(store, legacy, source=os.fspath(path), progress=progress)


def is_empty(store: Store) -> bool:
    """True when the database holds no entity and no relation."""
    return store.run_read(_is_empty)


def first_start_import(store: Store, candidates: list[Path], *,
                       progress: Progress | None = None) -> ImportReport | None:
    """On an empty database, import the first legacy file of ``candidates`` that exists.

    The emptiness check is repeated inside the import transaction, so two servers starting on one
    new database at once import the file only once. Logs ``legacy_import`` with every count.

    Returns:
        The report, or None when the database is not empty or no candidate exists.

    Raises:
        LegacyFormatError: the legacy file has a bad line; the database stays empty and the
            legacy file untouched.
    """
    legacy_path = next((p for p in candidates if p.is_file()), None)
    if legacy_path is None or not is_empty(store):
        return None
    log.info("legacy_import_started", path=str(legacy_path), database=str(store.path),
             bytes=legacy_path.stat().st_size)
    legacy = read_legacy(legacy_path)
    report = _load(store, legacy, source=str(legacy_path), progress=progress, require_empty=True)
    if report is None:
        log.info("legacy_import_skipped", path=str(legacy_path), database=str(store.path),
                 reason="the database was filled by another process meanwhile")
        return None
    log.info("legacy_import", **report.log_fields())
    for number, reason in report.skipped_lines:
        log.warning("legacy_line_skipped", path=str(legacy_path), line=number, reason=reason)
    return report


# -- export --------------------------------------------------------------------------------------


def export_file(path: str | os.PathLike[str], entities: Iterable[Entity], relations: Iterable[Relation], *,
                with_weights: bool = False) -> int:
    """Write the reference server's format to ``path`` atomically and return the line count
    (``with_weights``: relation weights too, see :func:`graph_memory.legacy.iter_legacy_lines`).

    The lines go to a temporary file in the same folder, which is flushed, fsynced and renamed
    over ``path`` only when complete; on any failure the temporary file is removed and ``path``
    is left as it was. A new file gets the usual permissions (0666 less the umask), a replaced
    one keeps its own.

    Raises:
        GraphError: the folder cannot be written (the message names it).
    """
    target = Path(path).expanduser().absolute()
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise GraphError(f"cannot write in {target.parent}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            count = write_legacy(entities, relations, out, with_weights=with_weights)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp_name, mode)
        os.replace(tmp_name, target)
    except BaseException as exc:
        Path(tmp_name).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise GraphError(f"cannot write {target}: {exc.strerror or exc}; it was left as it was") from exc
        raise
    fsync_directory(target.parent)
    return count


def fsync_directory(folder: Path) -> None:
    """Make a rename inside ``folder`` durable (a no-op where directories cannot be opened)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
