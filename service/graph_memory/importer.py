"""Moving a graph between the database and the reference server's file: import, dry run, export.

An import is one write transaction, all or nothing: the legacy graph is merged into whatever the
database holds (new entities are created in file order, an existing entity keeps its type and gains
only the observations it lacks, existing relation triples are skipped), and a failure leaves the
database exactly as it was. A dry run makes the same decisions with reads only and writes nothing.
The legacy file itself is only ever read. An export is written to a temporary file beside the
target and renamed over it once complete, so a failed export never leaves a half-written file.

Every import is recorded in the database (table ``legacy_imports``, migration 0004): the file's
absolute path, size, sha256 and modification time, the rows it created, when, and how (the first
start, or ``graph-memory import``). The automatic import happens once, on the start that creates
the database; later starts only compare the legacy file with its latest record and warn when it
changed (:func:`first_start_import`).
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import chain
from pathlib import Path
from typing import Any, BinaryIO, Protocol, TextIO

from graph_memory.db.backend import Backend, Graph
from graph_memory.db.paths import fsync_directory
from graph_memory.db.records import ImportRecord
from graph_memory.errors import GraphError, LegacyFormatError, OutputError
from graph_memory.hints import graph_memory_command
from graph_memory.legacy import (
    LegacyGraph,
    LegacyRecord,
    LegacyRelation,
    LegacyStream,
    LineDigester,
    line_digests,
    write_legacy,
)
from graph_memory.logs import get_logger
from graph_memory.merge import BATCH_ROWS, FileTally, merge_records, relates_deleted_entity
from graph_memory.meshfile import detect, stream_memory_file
from graph_memory.models import Entity, Relation
from graph_memory.settings import LEGACY_SUFFIXES

__all__ = ["FileState", "ImportRecord", "ImportReport", "Progress", "export_file", "first_start_import",
           "load_graph", "log_first_start_import", "moved_from", "plan_graph", "read_legacy_file", "record_path",
           "refused", "warn_if_legacy_file_changed", "write_atomically"]

log = get_logger("graph_memory.importer")

# Progress is reported every this many items.
_PROGRESS_EVERY = 1_000


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
    relations_left_out: int = 0       # new lines relating an entity deleted here since (--new-lines)
    # --new-lines: lines of the file at its last import it no longer holds (removed or edited there)
    lines_gone: int | None = None
    # --new-lines on a file recorded under another path only (moved here): that path, whose
    # recorded lines were the ones left out
    lines_of: str | None = None
    # --new-lines: of those gone lines, the entities and relations the memory still holds just as
    # the line had them (reference-format dicts): what the other program deleted (or edited) there
    gone_held: list[dict[str, Any]] = field(default_factory=list)
    file: dict[str, int] = field(default_factory=dict)
    skipped_lines: list[tuple[int, str]] = field(default_factory=list)
    invalid_lines: list[tuple[int, str]] = field(default_factory=list)
    replaced_utf8_lines: list[int] = field(default_factory=list)   # read with U+FFFD for bytes not UTF-8
    # A dry run only: the names of the entities the import would create, in file order, and the
    # latest record of this file in the database (it was imported, or recorded, before; for a file
    # with none under its path, that of the file it may have been moved from: moved_from).
    entities_to_create: list[str] = field(default_factory=list)
    recorded: ImportRecord | None = None

    @classmethod
    def for_graph(cls, legacy: LegacyGraph | LegacyStream, *, source: str, database: str | None,
                  dry_run: bool) -> ImportReport:
        """An empty report carrying the file's own summary and listed lines (of a stream: what its
        check counted; the merge completes the summary)."""
        graph = legacy.scan if isinstance(legacy, LegacyStream) else legacy
        return cls(source=source, database=database, dry_run=dry_run, file=graph.summary(),
                   skipped_lines=[(s.line, s.reason) for s in graph.skipped_lines],
                   invalid_lines=[(s.line, s.reason) for s in graph.invalid_lines],
                   replaced_utf8_lines=list(graph.replaced_utf8_lines))

    def counts(self) -> dict[str, int]:
        """The database-side counts as ``{name: int}``."""
        return {
            "entities_created": self.entities_created,
            "entities_merged": self.entities_merged,
            "type_conflicts": self.type_conflicts,
            "observations_added": self.observations_added,
            "relations_created": self.relations_created,
            "relations_skipped": self.relations_skipped,
            "relations_left_out": self.relations_left_out,
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
            "replaced_utf8_lines": self.replaced_utf8_lines,
            **({"lines_gone": self.lines_gone} if self.lines_gone is not None else {}),
            **({"lines_of": self.lines_of} if self.lines_of is not None else {}),
            **({"gone_held": self.gone_held} if self.lines_gone is not None else {}),
            **({"entities_to_create": self.entities_to_create,
                "recorded": self.recorded.to_dict() if self.recorded else None} if self.dry_run else {}),
        }

    def log_fields(self) -> dict[str, Any]:
        """Flat fields for one structured log line (line lists reduced to their counts)."""
        return {"path": self.source, "database": self.database, "dry_run": self.dry_run,
                # the short names first-start logs have always carried (rows written):
                "entities": self.entities_created, "observations": self.observations_added,
                "relations": self.relations_created,
                **self.counts(), **{f"file_{k}": v for k, v in self.file.items()}}


class _AlreadyImported(Exception):
    """Raised inside the first-start transaction when another process did the import first."""


def _plan(g: Graph, legacy: LegacyGraph, report: ImportReport) -> None:
    """Decide, entity by entity and relation by relation, what the reconciled file would add,
    with reads only (a dry run): the counts :func:`graph_memory.merge.merge_records` writes."""
    for entity in legacy.entities:
        found = g.find_entity(entity.name)
        if found is None:
            report.entities_created += 1
            report.entities_to_create.append(entity.name)
            report.observations_added += len(entity.observations)
        else:
            entity_id, entity_type = found
            report.entities_merged += 1
            report.type_conflicts += entity_type != entity.entity_type
            if entity.observations:
                have = g.observation_contents(entity_id)
                report.observations_added += sum(1 for o in entity.observations if o not in have)
    unchanged = legacy.unchanged_entities
    names = {entity.name for entity in legacy.entities} if unchanged else set()
    for relation in legacy.relations:
        if g.relation_exists(relation):
            report.relations_skipped += 1
        elif unchanged and relates_deleted_entity(g, relation, names, unchanged):
            report.relations_left_out += 1
        else:
            report.relations_created += 1


def _records(legacy: LegacyGraph | LegacyStream, scan: LegacyGraph | None) -> Iterator[LegacyRecord]:
    """The records of ``legacy`` in file order: a stream's lines (what reading them counted into
    ``scan``), or a reconciled graph's entities then relations (each with the ``inverseOf`` the
    file gave it)."""
    if isinstance(legacy, LegacyStream):
        return legacy.records(scan)
    return chain(legacy.entities, (LegacyRelation(r, legacy.inverse_of.get(r.key)) for r in legacy.relations))


def _complete_summary(report: ImportReport, tally: FileTally) -> None:
    """A stream's ``file`` summary: the check's counts with what the merge reconciled."""
    for name in ("entities", "observations", "relations", "merged_entities", "type_conflicts",
                 "collapsed_observations", "duplicate_relations", "dangling_relations"):
        report.file[name] = getattr(tally, name)


def _load(backend: Backend, legacy: LegacyGraph | LegacyStream, *, source: str, progress: Progress | None,
          first_start: bool = False, record: FileState | None = None, unless_recorded: str | None = None,
          batch: int = BATCH_ROWS, digests: bytes | None = None) -> ImportReport | None:
    """The import transaction. With ``first_start`` it runs only while the database still owes
    its first-start import (which it then clears), else returns None; with ``unless_recorded``
    (a :func:`record_path`) it runs only while the database has no record of that file, else
    returns None, and records itself as a first-start import; with ``record`` it writes the
    import record (kind first_start or import) in the same transaction. The merge reads the
    records of ``legacy`` in file order and writes their observations ``batch`` at a time
    (:func:`graph_memory.merge.merge_records`). ``digests``: the file's
    :func:`~graph_memory.legacy.line_digests` for the record, when the caller has them already."""
    # How many entities the merge may bring (for how it keeps the search index in step) and
    # what it must remember beyond one record: the repeats in the file.
    repeats: tuple[frozenset[int], frozenset[int]] | None
    unchecked = isinstance(legacy, LegacyStream) and not legacy.checked
    if not isinstance(legacy, LegacyStream):  # a reconciled graph has no repeats
        entities, repeats = len(legacy.entities), (frozenset(), frozenset())
    elif unchecked:  # as many entities as lines at most; repeats unknown: every stored one met is remembered
        entities, repeats = legacy.data.count(b"\n") + 1, None
    else:
        entities, repeats = legacy.entity_records, (legacy.repeated_names, legacy.repeated_triples)

    def indexing() -> None:
        if progress:
            progress.phase("indexing")

    # What each line of the file was, recorded with the import (`import --new-lines` leaves them out later).
    if digests is None and record is not None and isinstance(legacy, LegacyStream):
        digests = line_digests(legacy.data, legacy.dialect)

    def run(g: Graph) -> ImportReport:
        # A fresh report per attempt: run_write may retry the whole transaction when busy.
        report = ImportReport.for_graph(legacy, source=source, database=str(backend.path), dry_run=False)
        # The first-start duty is cleared by whichever import comes first (a manual one included):
        # after any import, a start never imports on its own.
        if not g.take_first_start("import") and first_start:
            raise _AlreadyImported
        if unless_recorded is not None and g.latest_record(unless_recorded) is not None:
            raise _AlreadyImported
        if progress:
            progress.phase("importing")
        # The graph keeps the search index in step the cheapest way for a merge of this size.
        scan = LegacyGraph([], []) if unchecked else None
        with g.merging(entities, on_rebuild=indexing):
            counts, tally = merge_records(g, _records(legacy, scan), progress=progress, batch=batch,
                                          progress_every=_PROGRESS_EVERY, repeats=repeats)
        if scan is not None:  # the reading was the check: the file's summary is known only now
            report = ImportReport.for_graph(scan, source=source, database=report.database, dry_run=False)
        for name in ("entities_created", "entities_merged", "type_conflicts", "observations_added",
                     "relations_created", "relations_skipped", "relations_left_out"):
            setattr(report, name, getattr(counts, name))
        if isinstance(legacy, LegacyStream):
            _complete_summary(report, tally)
        if record is not None:
            _insert_record(g, "first_start" if first_start or unless_recorded else "import", record, report,
                           digests)
        return report

    try:
        return backend.run_write(run, large=True)
    except _AlreadyImported:
        return None


def load_graph(backend: Backend, legacy: LegacyGraph | LegacyStream, *, source: str,
               progress: Progress | None = None, record: FileState | None = None,
               batch: int = BATCH_ROWS, digests: bytes | None = None) -> ImportReport:
    """Merge ``legacy`` (a reconciled graph, or a checked file streamed record by record) into
    ``backend``'s graph in one write transaction, observations ``batch`` at a time (memory: the
    file's bytes, one batch, and the file's entity names).

    With ``record`` (the file's state, taken before it was read) the same transaction records the
    import in ``legacy_imports`` as kind ``import``, with ``digests`` (the file's
    :func:`~graph_memory.legacy.line_digests`; computed here when not given). Any import also
    clears a first-start import the database still owes, so no start imports on its own after it.

    Entities are created in file order; an entity that exists keeps its type and gains only the
    observations it lacks (appended in file order); relations are inserted as stored (also those
    whose endpoints are not entities, which the reference server keeps too) with the weight they
    carry (the file's ``weight``, else 1.0), existing triples skipped and left as they are (an
    existing relation keeps its own weight, whatever weight the file gives it).

    Raises:
        StoreError: the database could not be written (nothing was).
        LegacyFormatError: a stream not checked yet (``checked`` False) has a bad line, found by
            the merge's reading (nothing was written).
    """
    report = _load(backend, legacy, source=source, progress=progress, record=record, batch=batch, digests=digests)
    assert report is not None
    return report


def read_legacy_file(path: str, *, skip_invalid: bool, database: Path | str, check: bool = True,
                     known_lines: frozenset[bytes] = frozenset(), flags: Sequence[str] = ()
                     ) -> tuple[FileState, LegacyStream]:
    """Read the legacy file ``path`` once and check every line, for ``graph-memory import`` into
    ``database``: its state (what the import record describes) and its records
    (:meth:`LegacyStream.graph` parses them whole, e.g. for a dry run). ``check`` False: only
    read; the import's reading of the records checks them (its errors: :func:`refused`).
    ``known_lines``: digests of the lines to leave out (:func:`graph_memory.legacy.line_digest`).

    Raises:
        LegacyFormatError: the file cannot be read or (without ``skip_invalid``) has a bad line;
            the message says nothing was imported and, for a bad line, gives the
            ``import --skip-invalid`` command that imports every other line.
    """
    try:
        state, data = FileState.read(path)
        return state, stream_memory_file(data, skip_invalid=skip_invalid, path=path, check=check,
                                         known_lines=known_lines)
    except LegacyFormatError as exc:
        raise refused(exc, path, skip_invalid=skip_invalid, database=database, flags=flags) from exc


def refused(exc: LegacyFormatError, path: str, *, skip_invalid: bool, database: Path | str,
            flags: Sequence[str] = ()) -> LegacyFormatError:
    """``exc`` (the file ``path`` refused by ``graph-memory import`` into ``database``) saying that
    nothing was imported and, for a bad line, giving the ``import --skip-invalid`` command that
    imports every other line (with the call's own ``flags``: ``--new-lines``, ``--dry-run``; found
    by QA: without ``--new-lines`` it merged the whole file)."""
    skipping = graph_memory_command("import", *flags, "--skip-invalid", Path(path).absolute(), database=database)
    hint = "" if skip_invalid or not exc.skippable else (
        f"; fix that line, or import every other line (the bad ones are listed) with: {skipping}")
    return exc.advised(f". Nothing was imported{hint}")


def plan_graph(backend: Backend | None, legacy: LegacyGraph | LegacyStream, *, source: str,
               database: str | None = None) -> ImportReport:
    """What :func:`load_graph` would do, computed with reads only (a dry run; nothing is written;
    a stream is parsed whole first).

    Args:
        backend: the database to compare with, or ``None`` for one that does not exist yet (or has
            no tables): everything in the file would be created.
        database: the database path to name in the report when ``backend`` is None.
    """
    if isinstance(legacy, LegacyStream):
        legacy = legacy.graph()
    report = ImportReport.for_graph(legacy, source=source, dry_run=True,
                                    database=str(backend.path) if backend else database)
    if backend is None:
        report.entities_to_create = [e.name for e in legacy.entities]
        report.entities_created = len(legacy.entities)
        report.observations_added = legacy.observation_count
        report.relations_created = len(legacy.relations)
        return report

    def run(g: Graph) -> None:
        _plan(g, legacy, report)
        report.recorded = g.latest_record(record_path(source))

    backend.run_read(run)
    if report.recorded is None and (found := moved_from(backend, source)) is not None:
        report.recorded = found[0]   # its folder moved here, perhaps: say what was recorded there
    return report


# -- records of imports, and the first start -----------------------------------------------------

_HASH_CHUNK = 1024 * 1024


@dataclass(frozen=True, slots=True)
class FileState:
    """A legacy file as it is on disk: absolute ``path``, ``size_bytes``, ``sha256`` (hex) and
    ``mtime_ns`` (modification time, nanoseconds since the epoch)."""

    path: str
    size_bytes: int
    sha256: str
    mtime_ns: int

    @classmethod
    def of(cls, path: str | os.PathLike[str], feed: Callable[[bytes], None] | None = None) -> FileState:
        """Stat and hash ``path`` (read once, in 1 MiB chunks, each also given to ``feed``), for
        comparing a file with its record. An import uses :meth:`read`, which hashes the very
        bytes it imports.

        Raises:
            LegacyFormatError: the file cannot be read.
        """
        digest = hashlib.sha256()
        with _opened(path) as (name, handle):
            stat = os.fstat(handle.fileno())
            while chunk := handle.read(_HASH_CHUNK):
                digest.update(chunk)
                if feed is not None:
                    feed(chunk)
        return cls(name, stat.st_size, digest.hexdigest(), stat.st_mtime_ns)

    @classmethod
    def read(cls, path: str | os.PathLike[str]) -> tuple[FileState, bytes]:
        """The file's state and its bytes, read once: what is recorded is exactly what is parsed
        and imported, also when ``path`` is a pipe (``/dev/stdin``, ``<(…)``), which can be read
        only once (its size is then the bytes read).

        Raises:
            LegacyFormatError: the file cannot be read.
        """
        with _opened(path) as (name, handle):
            stat = os.fstat(handle.fileno())
            data = handle.read()
        return cls(name, len(data), hashlib.sha256(data).hexdigest(), stat.st_mtime_ns), data

    @property
    def mtime(self) -> str:
        """The modification time as ISO 8601 UTC (microseconds)."""
        return _iso(self.mtime_ns)


def record_path(path: str | os.PathLike[str]) -> str:
    """The name a legacy file is recorded under: its real path (symbolic links resolved, so
    two spellings of one file share their records), or the absolute path as given for what is
    not a regular file (a pipe)."""
    given = Path(path).absolute()
    try:
        real = given.resolve(strict=True)
    except (OSError, RuntimeError):
        return str(given)
    return str(real) if real.is_file() else str(given)


@contextmanager
def _opened(path: str | os.PathLike[str]) -> Iterator[tuple[str, BinaryIO]]:
    """``(record_path(path), binary handle)``; an OSError becomes LegacyFormatError."""
    name = record_path(path)
    try:
        with open(os.fspath(path), "rb") as handle:
            yield name, handle
    except OSError as exc:
        raise LegacyFormatError(f"cannot read the file: {exc.strerror or exc}", path=name) from exc


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _insert_record(g: Graph, kind: str, state: FileState, report: ImportReport | None,
                   digests: bytes | None = None) -> None:
    counts = ((report.entities_created, report.observations_added, report.relations_created)
              if report is not None else (None, None, None))
    g.insert_record(kind, path=state.path, size_bytes=state.size_bytes, sha256=state.sha256,
                    mtime=state.mtime, mtime_ns=state.mtime_ns, counts=counts, line_digests=digests)


def first_start_import(backend: Backend, candidates: list[Path], *, progress: Progress | None = None,
                       creating: bool = False, lost_build: bool = False) -> ImportReport | None:
    """At start, settle the legacy file (the first of ``candidates`` that exists) with the database.

    - A database created by this version (migration 0004 ran on a new file) owes one import: the
      start that finds it owing imports the file, records it (kind ``first_start``) and clears
      the duty in the same transaction, so a crash before the commit leaves the duty to the next
      start, and of two servers starting on one new file only one imports. Without a legacy
      file the duty is cleared all the same: a file that appears later is never imported on its
      own. A bad line leaves the duty (and the database) as they were.
    - A database from before 0004 (upgraded, recorded as kind ``upgrade``) is never imported
      into: whether it once imported the file, or its user deleted everything since, cannot be
      told. Its first start records the file's current state as kind ``baseline`` (not imported
      by this version) with the digests of its lines, so later changes are noticed and
      ``import --new-lines`` merges only them.
    - Every other start compares the file with its latest record (size and mtime, then sha256)
      and, when it changed or was never imported, logs one warning (``legacy_file_changed`` or
      ``legacy_file_not_imported``) with the command that merges it. Nothing is merged or
      recorded then, except for a file with no record under its path but the bytes of a record
      of another path (its folder moved with the database): that is logged at info
      (``legacy_file_moved``) and recorded as kind ``moved`` under its new path.

    - ``lost_build``: this start built the database beside its name, but another process created
      it meanwhile (e.g. ``graph-memory import`` of another file, which settles the duty): the
      file is merged into that database all the same, as this start's first-start import, unless
      the database has a record of it (another start, or an import of this file, came first).

    Returns:
        The report of a first-start import, else None.

    Only the import can stop a start: the baseline, the comparison and the settling without a
    file are best effort (when they fail, e.g. on an unreadable file or a damaged or locked
    database, they log a warning, the server starts all the same and an owed duty stays owed).

    Raises:
        LegacyFormatError: the legacy file to import cannot be read or has a bad line; the
            database stays as it was (empty; ``creating``: ``backend`` is a database being built
            beside its name, which is then not created) and the legacy file untouched. The message
            says so and what to do (fix the line, or the ``import --skip-invalid`` command).
        StoreError: with a legacy file present, the database cannot be read, or written for an
            owed import.
    """
    legacy_path = next((p for p in candidates if p.is_file()), None)
    if legacy_path is None:
        if len(candidates) == 1 and candidates[0].suffix.lower() in LEGACY_SUFFIXES:
            _warn_if_named_file_missing(backend, candidates[0])
        _settle_without_file(backend)
        return None
    action = backend.run_read(lambda g: g.first_start_action())
    if action == "import":
        return _import_on_first_start(backend, legacy_path, progress, creating)
    if lost_build and action is None and (report := _import_after_lost_build(backend, legacy_path, progress)):
        return report
    _check_legacy_file(backend, legacy_path, baseline=action == "baseline")
    return None


def _check_legacy_file(backend: Backend, legacy_path: Path, *, baseline: bool) -> None:
    """A start that owes no import: record the file's state first when ``baseline`` is owed,
    then warn when the file differs from its latest record. Best effort: a failure (e.g. an
    unreadable file) is logged, the server starts all the same and an owed baseline stays owed."""
    try:
        if baseline:
            _record_baseline(backend, legacy_path)
        warn_if_legacy_file_changed(backend, legacy_path)
    except GraphError as exc:  # a check only: the server serves all the same
        log.warning("legacy_file_not_checked", path=str(legacy_path), database=str(backend.path),
                    error=str(exc)[:500])


def _import_on_first_start(backend: Backend, legacy_path: Path, progress: Progress | None,
                           creating: bool) -> ImportReport | None:
    """The owed first-start import of ``legacy_path`` (see :func:`first_start_import`); None when
    another process did it meanwhile."""
    try:
        state, data = FileState.read(legacy_path)
        log.info("legacy_import_started", path=state.path, database=str(backend.path), bytes=state.size_bytes)
        # A database that owes its first import was created empty: nothing stored can merge with
        # a repeat in the file, so the merge's one reading is the file's check (a bad line rolls
        # the import back; 8.8 s less at 1,000,000 entities, issue 15).
        legacy = stream_memory_file(data, path=str(legacy_path), check=False)
        report = _load(backend, legacy, source=str(legacy_path), progress=progress, first_start=True, record=state)
    except LegacyFormatError as exc:
        kept = (f"No database was created at {backend.path}" if creating else
                f"The database {backend.path} was left empty")
        raise _refused_at_start(exc, backend, kept) from exc
    if report is None:
        log.info("legacy_import_skipped", path=str(legacy_path), database=str(backend.path),
                 reason="another process did the first-start import meanwhile")
        return None
    if not creating:  # a database being built is logged once it has its name (it may never get it)
        log_first_start_import(report)
    return report


def _import_after_lost_build(backend: Backend, legacy_path: Path, progress: Progress | None) -> ImportReport | None:
    """The first-start import of ``legacy_path`` into a database another process created while
    this start built its own (see :func:`first_start_import`): checked first (the database holds
    what the other process wrote), then merged unless the database has a record of the file;
    None when it has."""
    path = record_path(legacy_path)
    if backend.run_read(lambda g: g.latest_record(path)) is not None:
        return None
    try:
        state, data = FileState.read(legacy_path)
        log.info("legacy_import_started", path=state.path, database=str(backend.path), bytes=state.size_bytes,
                 reason="the database was created by another process while this start built its own")
        legacy = stream_memory_file(data, path=str(legacy_path))
        report = _load(backend, legacy, source=str(legacy_path), progress=progress, record=state,
                       unless_recorded=path)
    except LegacyFormatError as exc:
        kept = f"Nothing of it was imported into {backend.path} (created meanwhile by another process)"
        raise _refused_at_start(exc, backend, kept) from exc
    if report is not None:
        log_first_start_import(report)
    return report


def _refused_at_start(exc: LegacyFormatError, backend: Backend, kept: str) -> LegacyFormatError:
    """``exc`` (the legacy file a start was to import cannot be read, or has a bad line) with what
    became of the database (``kept``: a sentence without its full stop) and what to do: fix the
    line or import what can be read (``import --skip-invalid``), or fix or move the file."""
    command = graph_memory_command("import", "--skip-invalid", exc.path or "FILE", database=backend.path)
    what_to_do = (f"Fix that line, or import what can be read with: {command}" if exc.skippable else
                  "Fix or move that file (MEMORY_FILE_PATH names it, or it lies beside the database)")
    return exc.advised(f". {kept}; the legacy file was left as it is. {what_to_do}")


def log_first_start_import(report: ImportReport) -> None:
    """The log lines of a first-start import that took effect: ``legacy_import`` with its counts,
    and a warning for replaced lone surrogates and for each skipped line."""
    log.info("legacy_import", **report.log_fields())
    if replaced := report.file.get("replaced_surrogates", 0):
        log.warning("legacy_lone_surrogates_replaced", path=report.source, replaced=replaced,
                    hint="the file holds halves of characters (such as an emoji a client cut in two); each "
                         "half was imported as U+FFFD")
    if lines := report.replaced_utf8_lines:
        log.warning("legacy_invalid_utf8_replaced", path=report.source, lines=len(lines), first_lines=lines[:10],
                    hint="these lines hold bytes that are not UTF-8 (text saved in another encoding, such as "
                         "Latin-1); each bad sequence was imported as U+FFFD, as the reference server reads it. "
                         "The file is unchanged: its original bytes are still there")
    for number, reason in report.skipped_lines:
        log.warning("legacy_line_skipped", path=report.source, line=number, reason=reason)


def _warn_if_named_file_missing(backend: Backend, named: Path) -> None:
    """The start that creates the database found no legacy file where ``MEMORY_FILE_PATH`` names
    one (a typo, another folder): say so, since the memory it starts is empty, not the user's.
    Best effort, like the settling that follows."""
    try:
        owed = backend.run_read(lambda g: g.first_start_action()) == "import"
    except GraphError:
        return
    if owed:
        discover = graph_memory_command("import", "--discover", database=backend.path)
        log.warning("legacy_file_missing", path=str(named), database=str(backend.path),
                    message=f"MEMORY_FILE_PATH names the legacy file {named}, which does not exist (or is not a "
                            f"file), so a new, empty memory was started in {backend.path}. If your memory is in "
                            f"another file, correct MEMORY_FILE_PATH and restart (the new, empty database can be "
                            f"deleted); {discover} lists the reference server's memory files")


def _settle_without_file(backend: Backend) -> None:
    """No legacy file: clear an owed first start, so a file that appears later is never imported
    on its own. Best effort: a database that cannot be read or written here (damaged, locked)
    still starts and answers each tool call with the reason; the duty then waits for a later
    start."""
    def run(g: Graph) -> None:
        g.take_first_start("import") or g.take_first_start("baseline")

    try:
        if backend.run_read(lambda g: g.first_start_action()) is not None:
            backend.run_write(run)
    except GraphError as exc:
        log.warning("legacy_first_start_not_settled", database=str(backend.path), error=str(exc)[:500])


def _record_baseline(backend: Backend, legacy_path: Path) -> None:
    """The first start after the upgrade to 0004: record the file's state, with the digests of
    its lines (so ``import --new-lines`` can later merge only what changed in it), unless the
    file has a record already (a ``graph-memory import`` of it ran since), clearing the duty."""
    state, digests = _state_and_digests(legacy_path)

    def run(g: Graph) -> bool:
        if not g.take_first_start("baseline"):
            return False
        if g.latest_record(state.path) is not None:
            return False
        _insert_record(g, "baseline", state, None, digests)
        return True

    if backend.run_write(run):
        log.info("legacy_file_baseline", path=state.path, database=str(backend.path), size_bytes=state.size_bytes,
                 sha256=state.sha256, mtime=state.mtime, line_digests=digests is not None,
                 note="the database predates import records; the file was not imported, its state is "
                      "recorded so later changes are noticed",
                 merge_command=graph_memory_command("import", state.path, database=backend.path))


def _state_and_digests(legacy_path: Path) -> tuple[FileState, bytes | None]:
    """The state of a file recorded without an import (a baseline, a moved file) and the
    :func:`~graph_memory.legacy.line_digests` of its lines, read a MiB at a time (never held
    whole; only a file whose first line leaves open whether it is one JSON document is read again
    whole for them). The digests are best effort: None (the record can then only be merged
    whole) when they cannot be had, since a start must not fail for a record.

    Raises:
        LegacyFormatError: the file cannot be read.
    """
    digester, failed = LineDigester(), list[Exception]()

    def feed(piece: bytes) -> None:
        if not failed:
            try:
                digester.feed(piece)
            except Exception as exc:  # a record's extra only (e.g. MemoryError)
                failed.append(exc)

    state = FileState.of(legacy_path, feed)
    try:
        if failed:
            raise failed[0]
        digests = digester.digests()
        if digests is None:   # perhaps one JSON document: only the whole file tells
            again, data = FileState.read(legacy_path)
            digests = line_digests(data, detect(data)) if again.sha256 == state.sha256 else None
    except Exception as exc:  # the server serves all the same
        log.warning("legacy_line_digests_unavailable", path=state.path, error=str(exc)[:500] or type(exc).__name__,
                    note="its lines cannot be compared one by one: a change to it can only be merged whole")
        digests = None
    return state, digests


def _recorded_elsewhere(records: Sequence[ImportRecord], path: str) -> list[ImportRecord]:
    """The records of files under another path than ``path``, oldest first."""
    return [r for r in records if r.path is not None and r.path != path]


def moved_from(backend: Backend, file: str | os.PathLike[str]) -> tuple[ImportRecord, bool] | None:
    """For a legacy ``file`` the database has no record of under its own path: the record of
    another path it may have been moved (or copied with the database) from, and whether its bytes
    are that record's. First the newest record of the same size and sha256 (hashed only when
    some record has the file's size), else the newest of a file of the same name (perhaps moved,
    then changed). None when neither is found, or ``file`` is not a regular file (a pipe is read
    only once)."""
    path = record_path(file)
    if not Path(path).is_file():
        return None
    others = _recorded_elsewhere(backend.run_read(lambda g: g.import_records()), path)
    size = Path(path).stat().st_size
    if any(r.size_bytes == size for r in others):
        state = FileState.of(path)
        same = [r for r in others if (r.size_bytes, r.sha256) == (state.size_bytes, state.sha256)]
        if same:
            return same[-1], True
    named = [r for r in others if r.path is not None and Path(r.path).name == Path(path).name]
    return (named[-1], False) if named else None


def _record_moved(backend: Backend, legacy_path: Path, recorded: ImportRecord) -> None:
    """``legacy_path`` holds the bytes recorded under ``recorded.path``: its folder moved (or was
    copied with the database). Record its state under its own path as kind ``moved`` (nothing is
    imported), with the digests of its lines, so later starts and ``import --new-lines`` compare
    it as usual; said at info, not warned. A file that changed meanwhile is left to the next
    start; a record that cannot be written (a read-only database) only leaves it unrecorded."""
    state, digests = _state_and_digests(legacy_path)
    if (state.size_bytes, state.sha256) != (recorded.size_bytes, recorded.sha256):
        return

    def run(g: Graph) -> bool:
        if g.latest_record(state.path) is not None:  # another start recorded it meanwhile
            return False
        _insert_record(g, "moved", state, None, digests)
        return True

    error: str | None = None
    try:
        wrote: bool | None = backend.run_write(run)
    except GraphError as exc:
        wrote, error = None, str(exc)[:500]
    log.info("legacy_file_moved", path=state.path, recorded_path=recorded.path, database=str(backend.path),
             recorded_kind=recorded.kind, recorded_at=recorded.recorded_at, sha256=state.sha256,
             recorded=wrote is not None, **({"error": error} if error else {}),
             note="the file has the bytes recorded under the other path (moved, or copied with the database): "
                  "nothing was imported; it is compared under its new path from now on")


def legacy_file_changed_since_recorded(backend: Backend, file: Path, legacy_files: Sequence[Path]) -> str | None:
    """Before an export writes over ``file``: when it is a legacy file of this database (recorded
    under its path, or one of ``legacy_files``, which a first start would import) and it holds
    something the database has no record of — changed since its latest record (another program,
    the reference server switched back to, wrote to it) or never imported — why writing over it
    would lose that, with what to do; else None (nothing would be lost).

    Raises:
        LegacyFormatError: the file cannot be read.
    """
    path = record_path(file)
    if not Path(path).is_file():
        return None
    latest = backend.run_read(lambda g: g.latest_record(path))
    if latest is None:
        if path not in {record_path(f) for f in legacy_files} or Path(path).stat().st_size == 0:
            return None
        moved = moved_from(backend, path)
        if moved is None:
            return (f"{path} is a memory file this database ({backend.path}) never imported: writing over it would "
                    f"lose what it holds. Merge it first with "
                    f"{graph_memory_command('import', path, database=backend.path)}, or export elsewhere")
        record, same = moved
        if same:   # the bytes recorded under the path it was moved from: nothing to lose
            return None
        # A whole-file import would bring back what was deleted since (found by QA): its lines.
        return (f"{path} differs from {record.path} as it was recorded at {record.recorded_at} (moved here, then "
                f"changed by another program?): " + _merge_first(backend, path, record.path or ""))
    state = FileState.of(path)
    if latest.sha256 is None or state.sha256 == latest.sha256 or same_as_recorded(backend, path, state):
        return None
    return (f"{path} changed since it was {latest.done_with_database} {backend.path} at {latest.recorded_at} "
            f"(another program, such as the reference server or MemoryMesh, wrote to it): "
            + _merge_first(backend, path, path))


def _merge_first(backend: Backend, path: str, recorded_path: str) -> str:
    """The end of an export's refusal to write over the changed legacy file ``path``: merge it
    first, by its new lines when the record of ``recorded_path`` it is compared with kept them."""
    merge = _merge_command(backend, path, backend.run_read(lambda g: g.line_digests(recorded_path)) is not None)
    return (f"writing over it would lose those changes. Merge them first with {merge} (add --dry-run to see what "
            f"it would add), then export again")


def same_as_recorded(backend: Backend, path: str, state: FileState) -> bool:
    """Whether the legacy file ``path`` (``state``), whose bytes differ from its latest record,
    holds nothing new all the same: the bytes of another record of this database (its folder
    moved back, an earlier copy), or the same lines as its latest record, written back (the
    reference server and MemoryMesh leave out the last newline). Found by QA: each was warned of
    at every start as a change, and an export over it refused.

    Raises:
        LegacyFormatError: the file cannot be read.
    """
    records = backend.run_read(lambda g: g.import_records())
    if any((r.size_bytes, r.sha256) == (state.size_bytes, state.sha256) for r in records):
        return True
    recorded = backend.run_read(lambda g: g.line_digests(path))
    return recorded is not None and _state_and_digests(Path(path))[1] == recorded


def is_legacy_file(backend: Backend, file: Path, legacy_files: Sequence[Path]) -> bool:
    """Whether ``file`` is a legacy file of this database: it has a record under its path, or it
    is one of ``legacy_files`` (the files a first start would import)."""
    path = record_path(file)
    return (path in {record_path(f) for f in legacy_files}
            or backend.run_read(lambda g: g.latest_record(path)) is not None)


def record_export(backend: Backend, file: Path, legacy_files: Sequence[Path]) -> bool:
    """After ``graph-memory export -o FILE`` of the whole graph (the reference format, or
    MemoryMesh's for a MemoryMesh file): when ``FILE`` is a legacy file of this database
    (:func:`is_legacy_file`), record its new state as kind ``export`` with the digests of its
    lines. Else the next start took graph-memory's own lines for a change (a warning at every
    start), and a later ``import --new-lines`` counted them as new and gone (found by QA); now it
    merges only what another program — the reference server, switched back to — changed in the
    file since. A file just as its latest record has it (a repeated export of an unchanged
    memory) adds no record. Returns whether the file is a legacy file (and so recorded).

    Raises:
        GraphError: the record could not be written (the database is locked, or read-only).
    """
    if not is_legacy_file(backend, file, legacy_files):
        return False
    path = record_path(file)
    state, digests = _state_and_digests(Path(path))

    def run(g: Graph) -> None:
        latest = g.latest_record(path)
        if latest is None or latest.sha256 != state.sha256 or latest.kind != "export":
            _insert_record(g, "export", state, None, digests)

    backend.run_write(run)
    log.info("legacy_file_exported", path=path, database=str(backend.path), size_bytes=state.size_bytes,
             sha256=state.sha256, line_digests=digests is not None)
    return True


def warn_if_legacy_file_changed(backend: Backend, legacy_path: Path) -> str | None:
    """Compare ``legacy_path`` with its latest import record and log one warning when it differs
    (size and mtime first; the sha256 only when those differ, so an unchanged file costs a stat).

    Returns:
        The warning's event name (``legacy_file_changed`` or ``legacy_file_not_imported``), or
        None when the file is as recorded.
    """
    path = record_path(legacy_path)
    latest = backend.run_read(lambda g: g.latest_record(path))
    try:
        stat = legacy_path.stat()
    except OSError:
        return None
    if latest is not None and (latest.size_bytes, latest.mtime_ns) == (stat.st_size, stat.st_mtime_ns):
        return _warn_if_baseline_never_merged(backend, latest, path)
    if latest is None:
        return _warn_if_never_imported(backend, legacy_path, path, stat)
    state = FileState.of(path)
    if latest.sha256 == state.sha256:
        return _warn_if_baseline_never_merged(backend, latest, path)  # touched, same bytes
    if same_as_recorded(backend, path, state):
        return None
    newer = latest.mtime_ns is not None and state.mtime_ns > latest.mtime_ns
    changed = (f"the legacy file {path} is {'newer than' if newer else 'different from'} what was "
               f"{latest.done_with_database} {backend.path} at "
               f"{latest.recorded_at}; it was not merged. ")
    command, how = _merge_advice(backend, path, backend.run_read(lambda g: g.line_digests(path)) is not None)
    log.warning("legacy_file_changed", path=path, database=str(backend.path), recorded_kind=latest.kind,
                recorded_at=latest.recorded_at, recorded_size_bytes=latest.size_bytes, recorded_mtime=latest.mtime,
                size_bytes=state.size_bytes, mtime=state.mtime, message=changed + how, merge_command=command)
    return "legacy_file_changed"


def _merge_advice(backend: Backend, path: str, digests: bool) -> tuple[str, str]:
    """The command that merges the changed legacy file ``path`` and the sentences that say what it
    does: ``import --new-lines`` when the record it is compared with kept line ``digests``, else
    the whole-file merge, with the warning that it brings back what was deleted since."""
    command = _merge_command(backend, path, digests)
    if digests:
        return command, (f"To merge what changed in it since (its new and edited lines; what was deleted from the "
                         f"memory since stays deleted) run: {command} (add --dry-run to see first what it would add)")
    return command, (f"An import merges the whole file (existing entities gain only what they lack), so whatever "
                     f"was deleted from the memory since then comes back too: first see what it would add, entity "
                     f"by entity, with: {graph_memory_command('import', '--dry-run', path, database=backend.path)}; "
                     f"then merge it with: {command}")


def _merge_command(backend: Backend, path: str, digests: bool) -> str:
    """The command that merges the legacy file ``path``: by its new lines (``import --new-lines``)
    when the record it is compared with kept line ``digests``, else whole."""
    return graph_memory_command("import", *(["--new-lines"] if digests else []), path, database=backend.path)


def _warn_if_never_imported(backend: Backend, legacy_path: Path, path: str, stat: os.stat_result) -> str | None:
    """``legacy_path`` has no record under its own ``path``. With the bytes of a record of another
    path it is that file moved here (:func:`_record_moved`: no warning). With the name of one
    (but other bytes) it may be that file moved and changed since: the warning says that a
    whole-file merge brings back what was deleted, as for a changed file. Else it was never
    imported (the stat says all that warning needs; a file is hashed only when some record has
    its size)."""
    found = moved_from(backend, legacy_path)
    if found is not None and found[1]:
        _record_moved(backend, legacy_path, found[0])
        return None
    if found is None:
        command = graph_memory_command("import", path, database=backend.path)
        log.warning("legacy_file_not_imported", path=path, database=str(backend.path), size_bytes=stat.st_size,
                    mtime=_iso(stat.st_mtime_ns),
                    message=f"the legacy file {path} was never imported into {backend.path} and is not merged "
                            f"automatically; to merge it run: {command}",
                    merge_command=command)
        return "legacy_file_not_imported"
    recorded = found[0]
    old_path = recorded.path or ""
    digests = backend.run_read(lambda g: g.line_digests(old_path)) is not None
    command, how = _merge_advice(backend, path, digests)
    log.warning("legacy_file_not_imported", path=path, database=str(backend.path), size_bytes=stat.st_size,
                mtime=_iso(stat.st_mtime_ns), recorded_path=recorded.path, recorded_kind=recorded.kind,
                recorded_at=recorded.recorded_at,
                message=f"the legacy file {path} was never imported into {backend.path} under this path, but a file "
                        f"of the same name, {recorded.path}, was {recorded.done_with_database} it at "
                        f"{recorded.recorded_at}; if this is that file, moved here (or copied with the database) "
                        f"and changed since, it was not merged. " + how
                        + (f" (its lines are compared with those recorded for {recorded.path})" if digests else ""),
                merge_command=command)
    return "legacy_file_not_imported"


def _warn_if_baseline_never_merged(backend: Backend, latest: ImportRecord, path: str) -> str | None:
    """An upgraded database (its legacy file recorded as a ``baseline``, never imported by this
    version) that holds nothing while the file holds something: perhaps its old version never
    got to import the file (a bad line that was fixed since), perhaps everything was deleted on
    purpose; it cannot be told, so the file is not imported, but each start says so."""
    if latest.kind != "baseline" or not latest.size_bytes or not backend.run_read(lambda g: g.is_empty()):
        return None
    command = graph_memory_command("import", path, database=backend.path)
    log.warning("legacy_file_not_imported", path=path, database=str(backend.path), size_bytes=latest.size_bytes,
                message=f"the database {backend.path} is empty and the legacy file {path} was never imported into "
                        f"it by this version (the database was created by an older one, so its file is not "
                        f"imported automatically). To import it run: {command} (if you emptied the memory on "
                        f"purpose, move the file away and this message stops)",
                merge_command=command)
    return "legacy_file_not_imported"


# -- export --------------------------------------------------------------------------------------


def export_file(path: str | os.PathLike[str], entities: Iterable[Entity], relations: Iterable[Relation], *,
                with_weights: bool = False,
                writer: Callable[[Iterable[Entity], Iterable[Relation], TextIO], int] | None = None,
                inverses: Mapping[tuple[str, str, str], str] | None = None) -> int:
    """Write the reference server's format to ``path`` atomically and return the line count
    (``with_weights``: relation weights too, see :func:`graph_memory.legacy.iter_legacy_lines`).

    The lines go to a temporary file in the same folder, which is flushed, fsynced and renamed
    over ``path`` only when complete; on any failure the temporary file is removed and ``path``
    is left as it was. ``writer(entities, relations, out)`` writes another format instead
    (e.g. :func:`graph_memory.meshfile.write_memorymesh`). A new file gets the usual permissions
    (0666 less the umask), a replaced one keeps its own.

    Raises:
        OutputError: the folder cannot be written (the message names it).
    """
    if writer is not None:
        return write_atomically(path, lambda out: writer(entities, relations, out))
    return write_atomically(path, lambda out: write_legacy(entities, relations, out, with_weights=with_weights,
                                                           inverses=inverses))


def write_atomically(path: str | os.PathLike[str], write: Callable[[TextIO], int]) -> int:
    """Run ``write(stream)`` on a new UTF-8 text stream that replaces ``path`` atomically when
    ``write`` returns (as :func:`export_file` describes); returns what ``write`` returned.

    Raises:
        OutputError: the folder or file cannot be written (nothing changed at ``path``).
    """
    target = Path(path).expanduser().absolute()
    if target.is_dir():
        raise OutputError(f"{target} is a folder; name a file to write")
    if target.exists() and not target.is_file():
        # A device or named pipe, also through a link (/dev/null, /dev/stdout, a FIFO, >(gzip)) is
        # written into: renaming a file over it replaced /dev/null and /dev/stdout themselves for
        # everyone when run as root (found by QA).
        try:
            with open(target, "w", encoding="utf-8", newline="") as out:
                return write(out)
        except OSError as exc:
            raise OutputError(f"cannot write {target}: {exc.strerror or exc}") from exc
    if target.is_symlink():   # the file it names is replaced, not the link (found by QA)
        target = Path(os.path.realpath(target))
    try:
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise OutputError(f"cannot write in {target.parent}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
            count = write(out)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp_name, mode)
        os.replace(tmp_name, target)
    except BaseException as exc:
        Path(tmp_name).unlink(missing_ok=True)
        if isinstance(exc, OSError):
            raise OutputError(f"cannot write {target}: {exc.strerror or exc}; it was left as it was") from exc
        raise
    fsync_directory(target.parent)
    return count

