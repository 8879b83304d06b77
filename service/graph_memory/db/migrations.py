"""Numbered SQL migrations, shipped inside the package and applied at start.

Files are ``migrations/NNNN_<name>.sql`` (``NNNN`` = 1, 2, 3 … without gaps), loaded with
importlib.resources from the installed package, so a data volume can never shadow them. Each is
applied in its own ``BEGIN IMMEDIATE`` transaction together with its record in
``schema_migrations`` (id, name, sha256 checksum of the text with CRLF folded to LF, time), and
``PRAGMA user_version`` follows the highest applied id for tools that only read that.

A brand-new database (a file holding no table at all when the write lock is taken) gets every
migration in ONE transaction, so it is either fully created or not at all, and the migrations can
tell it apart from an upgrade: while a migration runs, the connection's temporary table
``temp.migration_context`` holds one row whose ``new_database`` is 1 when this transaction creates
the database and 0 when it upgrades an existing one (0004 uses it: only a new database imports a
legacy file at its first start).

Refused with :class:`MigrationError`, before anything is changed: a database whose applied
migration was edited (checksum differs), or one migrated by a newer graph-memory (an applied id
this code does not know).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

import apsw

from graph_memory.errors import MigrationError

_FILE_RE = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

_LEDGER_SQL = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    id         INTEGER PRIMARY KEY,  -- the NNNN of the file
    name       TEXT NOT NULL,        -- the file name without .sql
    checksum   TEXT NOT NULL,        -- sha256 of the SQL text (LF line endings)
    applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
)
"""


@dataclass(frozen=True, slots=True)
class Migration:
    """One migration file: ``id`` (1-based), ``name`` (``0001_initial``), ``sql``, ``checksum``."""

    id: int
    name: str
    sql: str
    checksum: str


@dataclass(frozen=True, slots=True)
class MigrationStatus:
    """Where a database stands: ``applied`` and ``pending`` migrations, in id order."""

    applied: list[Migration]
    pending: list[Migration]

    @property
    def version(self) -> int:
        """Highest applied migration id (0 for an empty database)."""
        return self.applied[-1].id if self.applied else 0


def checksum(sql: str) -> str:
    """sha256 hex digest of ``sql`` with CRLF folded to LF (a Windows checkout stays valid)."""
    return hashlib.sha256(sql.replace("\r\n", "\n").encode("utf-8")).hexdigest()


def load_migrations(backend: str | None = None) -> list[Migration]:
    """Read the packaged migrations in id order: SQLite's (``migrations/*.sql``), or with
    ``backend`` those of that backend's own folder (``migrations/postgres/*.sql``). Folders and
    other files are ignored.

    Raises:
        MigrationError: a file name out of pattern, a duplicate id, or a gap in the numbering.
    """
    folder = resources.files("graph_memory.db").joinpath("migrations")
    if backend is not None:
        folder = folder.joinpath(backend)
    found: dict[int, Migration] = {}
    for entry in folder.iterdir():
        if not entry.name.endswith(".sql"):
            continue
        match = _FILE_RE.match(entry.name)
        if match is None:
            raise MigrationError(f"migration file {entry.name!r} is not named NNNN_name.sql")
        number = int(match.group(1))
        if number in found:
            raise MigrationError(f"two migration files share the number {number:04d}")
        sql = entry.read_text(encoding="utf-8")
        found[number] = Migration(number, entry.name[:-4], sql, checksum(sql))
    ids = sorted(found)
    if ids != list(range(1, len(ids) + 1)):
        raise MigrationError(f"migration numbers must run 1, 2, 3 … without gaps; found {ids}")
    return [found[i] for i in ids]


def _applied(conn: apsw.Connection) -> dict[int, tuple[str, str]]:
    exists = conn.execute(
        "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'"
    ).fetchone()
    if exists is None:
        return {}
    return {row[0]: (row[1], row[2]) for row in conn.execute("SELECT id, name, checksum FROM schema_migrations")}


def status(conn: apsw.Connection, path: str, known: list[Migration] | None = None) -> MigrationStatus:
    """Compare the database's ledger with the packaged migrations, changing nothing.

    Raises:
        MigrationError: an applied migration was edited, or the database is newer than the code.
    """
    known = load_migrations() if known is None else known
    return compare(_applied(conn), known, path)


def compare(applied: dict[int, tuple[str, str]], known: list[Migration], path: str) -> MigrationStatus:
    """The status of a database whose ledger holds ``applied`` (``{id: (name, checksum)}``)
    against the ``known`` migrations (any backend's); ``path`` names the database in messages.

    Raises:
        MigrationError: an applied migration was edited, or the database is newer than the code.
    """
    by_id = {m.id: m for m in known}
    newer = sorted(i for i in applied if i not in by_id)
    if newer:
        raise MigrationError(
            f"database {path} was migrated by a newer graph-memory (it has migration {newer[-1]:04d}, "
            f"this version knows up to {len(known):04d}); upgrade graph-memory or use a backup made "
            f"with this version. Nothing was changed."
        )
    for number, (name, digest) in sorted(applied.items()):
        mine = by_id[number]
        if digest != mine.checksum or name != mine.name:
            raise MigrationError(
                f"migration {mine.name} differs from the one applied to {path} (recorded as {name}, "
                f"checksum {digest[:12]}…, packaged {mine.checksum[:12]}…); applied migrations must "
                f"never be edited: add a new numbered migration instead. Nothing was changed."
            )
    return MigrationStatus(
        applied=[m for m in known if m.id in applied], pending=[m for m in known if m.id not in applied]
    )


def migrate(conn: apsw.Connection, path: str) -> list[Migration]:
    """Apply every pending migration in order, each in its own IMMEDIATE transaction (all of them
    in one transaction when the file holds no table yet: a new database).

    Safe when two processes start on one new file at once: each transaction re-reads the ledger
    after taking the write lock and skips what the other process already applied; only the one
    that finds the file without tables creates the database (``new_database`` = 1).

    Returns:
        The migrations this call applied (empty when the database was up to date).

    Raises:
        MigrationError: see :func:`status`; or a migration's SQL failed (that migration is rolled
        back, earlier ones stay applied; for a new database nothing stays).
    """
    known = load_migrations()
    if not status(conn, path, known).pending:
        return []
    done: list[Migration] = []
    conn.execute(_CONTEXT_SQL)
    try:
        with _immediate(conn):
            new_database = conn.execute("SELECT NOT EXISTS (SELECT 1 FROM sqlite_schema WHERE type = 'table')"
                                        ).fetchall()[0][0] == 1
            if new_database:
                conn.execute(_LEDGER_SQL)
                for migration in known:
                    _apply(conn, path, migration, new_database=True)
                    done.append(migration)
        if new_database:
            return done
        for migration in known:
            with _immediate(conn):
                conn.execute(_LEDGER_SQL)
                if migration.id in _applied(conn):
                    continue
                _apply(conn, path, migration, new_database=False)
            done.append(migration)
        return done
    finally:
        conn.execute("DROP TABLE IF EXISTS temp.migration_context")


_CONTEXT_SQL = "CREATE TEMP TABLE IF NOT EXISTS migration_context (new_database INTEGER NOT NULL)"


def _apply(conn: apsw.Connection, path: str, migration: Migration, *, new_database: bool) -> None:
    """Run one migration and record it, inside the caller's transaction."""
    conn.execute("DELETE FROM temp.migration_context")
    conn.execute("INSERT INTO temp.migration_context (new_database) VALUES (?)", (int(new_database),))
    try:
        conn.execute(migration.sql)
    except apsw.Error as exc:
        raise MigrationError(f"migration {migration.name} failed on {path}: {exc}") from exc
    conn.execute(
        "INSERT INTO schema_migrations (id, name, checksum) VALUES (?, ?, ?)",
        (migration.id, migration.name, migration.checksum),
    )
    conn.execute(f"PRAGMA user_version = {migration.id:d}")


class _immediate:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` (``ROLLBACK`` on any exception)."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> None:
        self.conn.execute("BEGIN IMMEDIATE")

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        self.conn.execute("COMMIT" if exc_type is None else "ROLLBACK")
