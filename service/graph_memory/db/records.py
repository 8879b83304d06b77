"""The records of legacy imports and the first-start duty (tables ``legacy_imports`` and
``legacy_first_start``, migration 0004): the only SQL on them. The importer decides when to
record and what; these functions read and write the rows inside the caller's transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, cast

from graph_memory.db.store import Connection
from graph_memory.wording import plural


@dataclass(frozen=True, slots=True)
class ImportRecord:
    """One row of ``legacy_imports`` (migration 0004). ``kind``: ``first_start`` (imported by
    the start that created the database), ``import`` (the import command, not a dry run),
    ``upgrade`` (the database predates these records: created before schema 4), ``baseline``
    (the legacy file as the first start after that upgrade found it; not imported by this
    version), ``moved`` (migration 0009: a start found the bytes of a file recorded under
    another path under this one, its folder moved or copied with the database; not imported
    again) or ``export`` (migration 0009: ``graph-memory export`` wrote the file from this
    database; not imported). File fields are None for ``upgrade``; counts (rows the import
    created) are None for ``upgrade``, ``baseline``, ``moved`` and ``export``. Times are ISO 8601
    UTC."""

    kind: str
    path: str | None
    size_bytes: int | None
    sha256: str | None
    mtime: str | None
    mtime_ns: int | None
    entities: int | None
    observations: int | None
    relations: int | None
    recorded_at: str

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict of every field (``mtime_ns`` left out: ``mtime`` says it)."""
        return {"kind": self.kind, "path": self.path, "size_bytes": self.size_bytes, "sha256": self.sha256,
                "mtime": self.mtime, "entities": self.entities, "observations": self.observations,
                "relations": self.relations, "recorded_at": self.recorded_at}

    @property
    def done_with_database(self) -> str:
        """What the record says was done with the file and the database, for messages ("the file
        was … the database"): ``imported into``, ``recorded into`` (a baseline, a moved file) or
        ``exported from``."""
        return {"baseline": "recorded into", "moved": "recorded into", "export": "exported from"}.get(
            self.kind, "imported into")

    def describe(self) -> str:
        """One line for people (``graph-memory stats``)."""
        if self.kind == "upgrade":
            return (f"{self.recorded_at} upgrade: the database predates import records (created by "
                    f"graph-memory before schema 4); whether it imported a legacy file then is unknown")
        file = f"{self.path} ({plural(self.size_bytes or 0, 'byte')}, modified {self.mtime}, sha256 {self.sha256})"
        if self.kind == "baseline":
            return (f"{self.recorded_at} baseline: {file} as found at the first start after the upgrade; "
                    f"not imported by this version, kept to notice later changes")
        if self.kind == "moved":
            return (f"{self.recorded_at} moved: {file}: the same bytes as a file recorded before under another "
                    f"path (the record with this sha256); not imported again, kept to notice later changes")
        if self.kind == "export":
            return (f"{self.recorded_at} exported: {file}: written from this database by the export command (to "
                    f"switch back); not imported, kept to notice later changes")
        how = "imported on the first start" if self.kind == "first_start" else "imported by the import command"
        return (f"{self.recorded_at} {how}: {file}: {plural(self.entities or 0, 'entity', 'entities')}, "
                f"{plural(self.observations or 0, 'observation')}, {plural(self.relations or 0, 'relation')} "
                f"created")



RECORD_COLUMNS = ("kind, path, size_bytes, sha256, mtime, mtime_ns, entities, observations, relations, "
                   "recorded_at")


def insert_record(conn: Connection, kind: str, *, path: str, size_bytes: int, sha256: str, mtime: str,
                  mtime_ns: int, counts: tuple[int | None, int | None, int | None],
                  line_digests: bytes | None = None) -> None:
    """Add one record of kind ``kind`` for the file described (``counts``: entities,
    observations and relations the import created, or Nones for a ``baseline``
    and ``moved``; ``line_digests``: :func:`graph_memory.legacy.line_digests` of its lines)."""
    columns = "kind, path, size_bytes, sha256, mtime, mtime_ns, entities, observations, relations"
    values: list[Any] = [kind, path, size_bytes, sha256, mtime, mtime_ns, *counts]
    if line_digests is not None:   # named only then: a record without them suits every schema since 0004
        columns += ", line_digests"
        values.append(line_digests)
    conn.execute(f"INSERT INTO legacy_imports ({columns}) VALUES ({', '.join('?' * len(values))})", values)
    if line_digests is not None:
        conn.execute(FORGET_OLDER_DIGESTS.replace("%s", "?"), (path, path))


# Only the newest record of a file has its line digests read (:func:`line_digests`): older ones'
# are dropped when a newer record is written, so exporting a changing memory over its legacy file
# every hour does not grow the database by 8 bytes a line each time (found by QA).
FORGET_OLDER_DIGESTS = ("UPDATE legacy_imports SET line_digests = NULL WHERE path = %s AND line_digests IS NOT NULL "
                        "AND id < (SELECT max(id) FROM legacy_imports WHERE path = %s)")


def line_digests(conn: Connection, path: str) -> bytes | None:
    """The line digests of the newest record of the file recorded as ``path``, or None."""
    row = conn.execute("SELECT line_digests FROM legacy_imports WHERE path = ? ORDER BY id DESC LIMIT 1",
                       (path,)).fetchone()
    return None if row is None or row[0] is None else bytes(cast(bytes, row[0]))


def take_first_start(conn: Connection, action: str) -> bool:
    """Clear the first-start duty ``action`` ('import' or 'baseline') inside the caller's write
    transaction; True when it was still owed (so this transaction is the one doing it)."""
    return conn.execute("UPDATE legacy_first_start SET action = NULL WHERE id = 1 AND action = ? RETURNING 1",
                        (action,)).fetchall() != []


def _has_table(conn: Connection, name: str) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?", (name,)).fetchall() != []


def import_records(conn: Connection) -> list[ImportRecord]:
    """Every import record, oldest first; empty for a database before migration 0004."""
    if not _has_table(conn, "legacy_imports"):
        return []
    return [ImportRecord(*row) for row in conn.execute(f"SELECT {RECORD_COLUMNS} FROM legacy_imports ORDER BY id")]


def first_start_action(conn: Connection) -> str | None:
    """What the next start still owes: 'import', 'baseline' or None (see migration 0004)."""
    if not _has_table(conn, "legacy_first_start"):
        return None
    rows = conn.execute("SELECT action FROM legacy_first_start WHERE id = 1").fetchall()
    return str(rows[0][0]) if rows and rows[0][0] is not None else None


def latest_record(conn: Connection, path: str) -> ImportRecord | None:
    """The newest record of the file recorded as ``path``, or None."""
    row = conn.execute(f"SELECT {RECORD_COLUMNS} FROM legacy_imports WHERE path = ? ORDER BY id DESC LIMIT 1",
                       (path,)).fetchone()
    return ImportRecord(*row) if row is not None else None


def restore_record(conn: Connection, record: ImportRecord) -> None:
    """Add ``record`` as it is, its ``recorded_at`` included (``graph-memory copy``)."""
    conn.execute(f"INSERT INTO legacy_imports ({RECORD_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 (record.kind, record.path, record.size_bytes, record.sha256, record.mtime, record.mtime_ns,
                  record.entities, record.observations, record.relations, record.recorded_at))


def set_first_start(conn: Connection, action: str | None) -> None:
    """Make ``action`` ('import', 'baseline' or None) what the next start owes (``graph-memory copy``
    carries the source's duty, so a copy never imports a legacy file its source did not owe)."""
    conn.execute("UPDATE legacy_first_start SET action = ? WHERE id = 1", (action,))
