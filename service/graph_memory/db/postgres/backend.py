""":class:`PostgresBackend`: the :class:`~graph_memory.db.backend.Backend` on a PostgreSQL database.

Many graph-memory processes (replicas) may share one database. Each keeps a small psycopg
connection pool (``MEMORY_DATABASE_POOL_SIZE``) and runs every tool call as one transaction:

* writes run ``SERIALIZABLE``, so concurrent calls from any number of replicas behave as if they
  ran one after the other (no lost or half-applied write, no relation created to an entity that
  another call deleted meanwhile); a serialization failure or deadlock rolls the call back and
  runs it again, up to :data:`ATTEMPTS` times;
* reads run ``REPEATABLE READ READ ONLY``: one consistent snapshot per call.

Every write transaction that changed the graph sends ``NOTIFY graph_memory_changed`` with this
process's replica id before it commits (delivered on commit, once per transaction). The server's
:class:`~graph_memory.mcp.server.ExternalChanges` polls :meth:`PostgresBackend.change_counters`,
which counts the notifications of *other* replicas on a LISTEN connection of its own, so
``memory://knowledge-graph`` subscribers of every replica hear of every change.

Migrations are this backend's own numbered files (``migrations/postgres/NNNN_name.sql``) with the
same ledger as SQLite's (``schema_migrations``: id, name, checksum; an edited or newer history is
refused), all pending ones applied in one transaction under ``pg_advisory_xact_lock``, so ten
replicas starting together migrate once and the others wait, then find nothing to do.

The password comes from the URL, ``MEMORY_DATABASE_PASSWORD_FILE``, or libpq's own
``PGPASSWORD``/``~/.pgpass``; it never appears in a message (:attr:`PostgresBackend.path` is the
URL with the password masked, and error texts are scrubbed of it).
"""

from __future__ import annotations

import logging
import random
import re
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, TypeVar

import psycopg
import psycopg.errors
from psycopg_pool import ConnectionPool, PoolTimeout

from graph_memory.db.migrations import Migration, MigrationStatus, compare, load_migrations
from graph_memory.db.postgres.graph import Connection, PostgresGraph
from graph_memory.errors import GraphError, MigrationError, PendingMigrationsError, StoreError
from graph_memory.hints import graph_memory_command
from graph_memory.logs import get_logger
from graph_memory.settings import Settings
from graph_memory.wording import plural

T = TypeVar("T")
log = get_logger("graph_memory.db.postgres")

OpenMode = str  # one of graph_memory.db.backend.OpenMode (not imported: that module imports this one)

CHANNEL = "graph_memory_changed"
# pg_advisory_xact_lock key of the migrations: the first 8 bytes of sha256("graph-memory migrations").
MIGRATION_LOCK = 0x2F1C_9D4B_6A83_E057
# A call that fails to serialize (another replica wrote the same rows) or deadlocks is run again,
# this many times in all, after a short random pause that grows with each attempt.
ATTEMPTS = 12
_BACKOFF_SECONDS = 0.005
CONNECT_TIMEOUT_SECONDS = 10
POOL_TIMEOUT_SECONDS = 30.0

_LEDGER_SQL = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    id         integer PRIMARY KEY,          -- the NNNN of the file
    name       text NOT NULL,                -- the file name without .sql
    checksum   text NOT NULL,                -- sha256 of the SQL text (LF line endings)
    applied_at timestamptz NOT NULL DEFAULT clock_timestamp()
)
"""
_RETRYABLE = (psycopg.errors.SerializationFailure, psycopg.errors.DeadlockDetected)


class _AbortedPipelineExit(logging.Filter):
    """Drops psycopg's warning that leaving a pipeline failed too ("error ignored terminating
    <psycopg.Pipeline [INERROR]>: pipeline aborted") when a statement's error is already on its
    way out of the block: that error is raised and handled (a write conflict between replicas is
    retried, logged as ``transaction_retried``), and the warning showed up in the logs of normal
    operation under concurrent writes (found by QA). Every other psycopg record passes."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not (record.msg == "error ignored terminating %r: %s" and len(args) == 2
                    and isinstance(args[1], psycopg.errors.PipelineAborted))


logging.getLogger("psycopg").addFilter(_AbortedPipelineExit())


def known_migrations() -> list[Migration]:
    """The PostgreSQL migrations this version ships (``migrations/postgres``), in order."""
    return load_migrations("postgres")


class PostgresBackend:
    """:class:`~graph_memory.db.backend.Backend` on the PostgreSQL database ``MEMORY_DATABASE_URL``
    names. Open with :meth:`open`; :meth:`close` when done."""

    kind = "postgres"
    # No index upkeep to do (documents are written with each change): the idle timer finds nothing.
    idle_catch_up_seconds = 0.5
    catch_up_poll_seconds = 60.0

    def __init__(self, conninfo: str, options: dict[str, Any], label: str, secrets: tuple[str, ...], *,
                 read_only: bool, pool_size: int) -> None:
        self._conninfo = conninfo
        self._options = options
        self._label = label
        self._secrets = tuple(sorted({s for s in secrets if s}, key=len, reverse=True))
        self._read_only = read_only
        self._replica = uuid.uuid4().hex
        self._listener: Connection | None = None
        self._foreign_changes = 0
        self._pool: ConnectionPool[Connection] | None = None
        self._pool_size = pool_size

    # -- opening ------------------------------------------------------------------------------------

    @classmethod
    def open(cls, settings: Settings, mode: OpenMode) -> PostgresBackend:
        """The database of ``settings.database_url``, opened as ``mode`` says
        (:data:`~graph_memory.db.backend.OpenMode`): ``migrate`` applies the pending migrations,
        ``current`` refuses pending ones, ``readonly``/``current`` run read transactions only.

        Raises:
            StoreError: the database cannot be reached (the message names it, password masked).
            MigrationError: an edited or newer migration history.
            PendingMigrationsError: ``current`` with migrations pending.
        """
        assert settings.database_url is not None
        url = settings.database_url.get_secret_value()
        options: dict[str, Any] = {"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_SECONDS,
                                   "application_name": "graph-memory"}
        secrets = _url_secrets(url)
        if settings.database_password_file is not None:
            options["password"] = _read_password(settings.database_password_file)
            secrets = (options["password"], *secrets)
        backend = cls(url, options, str(settings.database_label), secrets,
                      read_only=mode in ("current", "readonly"), pool_size=settings.database_pool_size)
        try:
            if mode == "migrate":
                applied = backend.migrate()
                if applied:
                    log.info("migrations_applied", database=backend.path, migrations=[m.name for m in applied])
            elif mode == "current":
                state = backend.schema_status()
                if state.pending and state.version > 0:
                    raise PendingMigrationsError(
                        f"database {backend.path} has {plural(len(state.pending), 'pending migration')}; "
                        f"first run: {graph_memory_command('migrate', database=backend.path)}")
            else:
                with backend._connection():
                    pass  # reachable: fail here, not at the first call
        except BaseException:
            backend.close()
            raise
        return backend

    @property
    def path(self) -> str:
        """The database for messages: its URL with the password masked."""
        return self._label

    def _scrub(self, text: str) -> str:
        """``text`` (an error message) without the password, should it contain it: libpq quotes
        a URL it cannot parse whole, or the token it stumbled on (the password itself)."""
        for secret in self._secrets:  # longest first: the whole URL before the password in it
            text = text.replace(secret, self._label if secret == self._conninfo else "***")
        return text

    def _error(self, exc: BaseException, doing: str) -> StoreError:
        """A StoreError for a psycopg error while ``doing``, naming the database, never the password."""
        detail = self._scrub(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__)
        if isinstance(exc, psycopg.OperationalError | PoolTimeout):
            return StoreError(f"PostgreSQL database {self.path} cannot be reached while {doing} ({detail}); check "
                              f"that the server runs and MEMORY_DATABASE_URL (host, port, database, user) and the "
                              f"password (MEMORY_DATABASE_PASSWORD_FILE, PGPASSWORD or ~/.pgpass)")
        if isinstance(exc, psycopg.errors.InsufficientPrivilege):
            return StoreError(f"PostgreSQL database {self.path} refused {doing} ({detail}); graph-memory needs a "
                              f"role that owns its database")
        return StoreError(f"database error on {self.path} while {doing}: {detail}")

    def _connect(self) -> Connection:
        try:
            return psycopg.connect(self._conninfo, **self._options)
        except psycopg.Error as exc:
            raise self._error(exc, "connecting") from None

    @contextmanager
    def _connection(self) -> Iterator[Connection]:
        """A connection of the pool (opened at first use)."""
        if self._pool is None:
            if self._conninfo == "":
                raise StoreError(f"the database {self.path} was closed")
            conn = self._connect()  # the real error (bad password, no such database) before the pool's retries
            conn.close()
            self._pool = ConnectionPool(self._conninfo, kwargs=self._options, min_size=1, max_size=self._pool_size,
                                        open=False, name="graph-memory", configure=_configure,
                                        timeout=POOL_TIMEOUT_SECONDS)
            self._pool.open()
        try:
            with self._pool.connection() as conn:
                yield conn
        except PoolTimeout as exc:
            raise self._error(exc, "waiting for a connection") from None

    def close(self) -> None:
        self._conninfo = ""
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    # -- schema ---------------------------------------------------------------------------------------

    def _applied(self, conn: Connection) -> dict[int, tuple[str, str]]:
        if conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone() != (True,):
            return {}
        return {int(i): (str(n), str(c)) for i, n, c in
                conn.execute("SELECT id, name, checksum FROM schema_migrations").fetchall()}

    def schema_status(self) -> MigrationStatus:
        try:
            with self._connection() as conn:
                return compare(self._applied(conn), known_migrations(), self.path)
        except psycopg.Error as exc:
            raise self._error(exc, "reading the migration history") from None

    def migrate(self) -> list[Migration]:
        """Apply every pending migration in one transaction under the migrations' advisory lock
        (replicas starting together: one migrates, the others wait and find nothing pending).

        Raises:
            MigrationError: an edited or newer history (nothing changed), or a migration failed
                (nothing of this call stays).
        """
        known = known_migrations()
        try:
            with self._connection() as conn:
                if not compare(self._applied(conn), known, self.path).pending:
                    return []
                conn.execute("BEGIN")
                try:
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                    conn.execute(_LEDGER_SQL)
                    pending = compare(self._applied(conn), known, self.path).pending
                    for migration in pending:
                        try:
                            conn.execute(migration.sql.encode("utf-8"))
                        except psycopg.Error as exc:
                            raise MigrationError(f"migration {migration.name} failed on {self.path}: "
                                                 f"{self._scrub(str(exc).strip())}") from None
                        conn.execute("INSERT INTO schema_migrations (id, name, checksum) VALUES (%s, %s, %s)",
                                     (migration.id, migration.name, migration.checksum))
                except BaseException:
                    _rollback(conn)
                    raise
                conn.execute("COMMIT")
                return pending
        except psycopg.Error as exc:
            raise self._error(exc, "migrating") from None

    def has_graph(self) -> bool:
        try:
            with self._connection() as conn:
                return conn.execute("SELECT to_regclass('entities') IS NOT NULL").fetchone() == (True,)
        except psycopg.Error as exc:
            raise self._error(exc, "reading the schema") from None

    def files(self) -> dict[str, int]:
        """``{"database": size in bytes}`` (``pg_database_size``)."""
        try:
            with self._connection() as conn:
                row = conn.execute("SELECT pg_database_size(current_database())").fetchone()
        except psycopg.Error as exc:
            raise self._error(exc, "reading the database size") from None
        return {"database": int(row[0]) if row else 0}

    # -- transactions ---------------------------------------------------------------------------------

    def run_read(self, operation: Callable[[PostgresGraph], T]) -> T:
        return self._run(operation, write=False)

    def run_search(self, operation: Callable[[PostgresGraph], T]) -> T:
        return self._run(operation, write=False)

    def run_write(self, operation: Callable[[PostgresGraph], T], *, large: bool = False) -> T:
        if self._read_only:
            raise StoreError(f"the database {self.path} was opened read-only here; nothing was written")
        return self._run(operation, write=True)

    def _run(self, operation: Callable[[PostgresGraph], T], *, write: bool) -> T:
        for attempt in range(1, ATTEMPTS + 1):
            try:
                with self._connection() as conn:
                    return self._attempt(conn, operation, write=write)
            except _RETRYABLE as exc:
                if attempt == ATTEMPTS:
                    raise StoreError(f"the call could not be completed on {self.path}: other calls kept changing "
                                     f"the same rows ({plural(ATTEMPTS, 'attempt')}); nothing of it was written. "
                                     f"Try again") from exc
                log.debug("transaction_retried", attempt=attempt, error=type(exc).__name__)
                time.sleep(random.uniform(0, _BACKOFF_SECONDS * 2 ** min(attempt, 6)))
            except _CommitUnknown as exc:
                raise StoreError(f"the connection to {self.path} was lost while committing; the call may or may "
                                 f"not have been written: read the graph to check") from exc.__cause__
            except psycopg.OperationalError as exc:
                # The connection broke before COMMIT (a server restart, a failover): nothing was
                # written, and the pool replaces the connection; one more try on a fresh one.
                if attempt >= 2:
                    raise self._error(exc, "running the call") from None
                log.info("connection_lost_retrying", database=self.path, error=self._scrub(str(exc))[:200])
            except psycopg.Error as exc:
                raise self._error(exc, "running the call") from None
        raise AssertionError("unreachable")

    def _attempt(self, conn: Connection, operation: Callable[[PostgresGraph], T], *, write: bool) -> T:
        # Pipeline mode: a statement whose result nobody reads yet (BEGIN, an UPDATE, the
        # document upsert, the NOTIFY, COMMIT) is sent with the next one instead of waiting for
        # its own round trip; the operation still reads each result it needs when it needs it.
        # A point call takes 2-4 round trips instead of 5-9 (docs/benchmarks.md, PostgreSQL).
        committing = False
        try:
            with conn.pipeline():
                conn.execute("BEGIN ISOLATION LEVEL SERIALIZABLE" if write else
                             "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                graph = PostgresGraph(conn)
                result = operation(graph)
                if write:
                    graph.flush_documents()
                    if graph.changed:
                        conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, self._replica))
                committing = True
                conn.execute("COMMIT")
                # Leaving the block sends what is queued and waits for it: an error of any queued
                # statement, COMMIT's own included, is raised here.
        except BaseException as exc:
            _rollback(conn)
            # Only a lost connection leaves the outcome unknown: while it stands, an error (a
            # serialization failure at COMMIT included) means nothing was committed.
            if committing and isinstance(exc, psycopg.OperationalError) and (conn.broken or conn.closed):
                raise _CommitUnknown from exc
            raise
        return result

    def catch_up_when_idle(self) -> int | None:
        """Nothing to catch up: the search documents are written with each change."""
        return None

    # -- other replicas' changes ----------------------------------------------------------------------

    def _on_notify(self, notify: psycopg.Notify) -> None:
        if notify.payload != self._replica:
            self._foreign_changes += 1

    def change_counters(self) -> tuple[int, int | None] | None:
        """``(changes committed by other replicas, the same)`` as counted from their
        notifications since the first call (which starts listening). A listening connection that
        was lost is opened again and counts as one change (one may have been missed).

        Raises:
            StoreError: the database cannot be reached now (the next call tries again).
        """
        if self._conninfo == "":
            return None
        try:
            if self._listener is None or self._listener.closed:
                fresh = self._listener is not None
                self._listener = None
                listener = self._connect()
                listener.add_notify_handler(self._on_notify)
                listener.execute(f"LISTEN {CHANNEL}")
                self._listener = listener
                self._foreign_changes += fresh
            else:
                self._listener.execute("SELECT 1")  # delivers the notifications received since the last look
        except psycopg.Error as exc:
            if self._listener is not None:
                self._listener.close()
            raise self._error(exc, "listening for changes") from None
        except GraphError:
            raise
        return self._foreign_changes, self._foreign_changes


def _configure(conn: Connection) -> None:
    """Plan every statement for its own parameters. psycopg prepares a statement run five times;
    PostgreSQL then may switch to one generic plan, which cannot see how selective a name list or
    a search pattern is (a trigram search became a scan of every entity: 650 ms at 100,000)."""
    conn.execute("SET plan_cache_mode = force_custom_plan")


class _CommitUnknown(Exception):
    """COMMIT failed with the connection: whether it was applied is unknown."""


def _rollback(conn: Connection) -> None:
    """Roll back, unless the connection is gone (then the server rolled back already).

    ``Connection.rollback()``, not a ROLLBACK statement: it also forgets the statements psycopg
    prepared (``DEALLOCATE ALL``), whose cache no longer matches the server after a pipeline
    aborted (the next call would fail with 'prepared statement "_pg3_N" does not exist')."""
    if not conn.closed and not conn.broken:
        with suppress(psycopg.OperationalError):
            conn.rollback()


def _url_secrets(url: str) -> tuple[str, ...]:
    """What of ``url`` must never appear in a message (only to scrub messages): the URL itself
    and its password as written and as decoded, also when libpq cannot parse the URL (its error
    then quotes the URL, or the password as the token it stumbled on)."""
    from urllib.parse import unquote

    from psycopg.conninfo import conninfo_to_dict

    found = [url]
    with suppress(psycopg.ProgrammingError):
        found.append(str(conninfo_to_dict(url).get("password") or ""))
    rest = url.split("://", 1)[-1]
    for userinfo in {rest.split("@", 1)[0], rest.rsplit("@", 1)[0]} if "@" in rest else ():
        if ":" in userinfo:
            found.append(userinfo.split(":", 1)[1])
    found += re.findall(r"[?&]password=([^&]*)", url)
    return tuple(dict.fromkeys(x for raw in found for x in (raw, unquote(raw)) if x))


def _read_password(path: Any) -> str:
    """The password in the file ``path`` (its first line, without the line end).

    Raises:
        StoreError: the file cannot be read (the message never quotes its content).
    """
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.readline().rstrip("\r\n")
    except (OSError, UnicodeDecodeError) as exc:
        raise StoreError(f"MEMORY_DATABASE_PASSWORD_FILE {path} cannot be read ({type(exc).__name__}: "
                         f"{getattr(exc, 'strerror', None) or 'not UTF-8 text'})") from None
