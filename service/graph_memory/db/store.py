"""The SQLite store: the one place that opens connections and runs transactions.

A :class:`Store` owns one apsw connection to one database file, with WAL journaling, a busy
timeout, foreign keys on, and the ``python_lower`` SQL function the search triggers need. Every
tool call runs in exactly one transaction through :meth:`Store.read` (a deferred transaction: a
consistent snapshot) or :meth:`Store.write` (``BEGIN IMMEDIATE``: the write lock is taken up front,
so two writers never deadlock, and the whole call commits or nothing does). apsw errors are
translated into :class:`~graph_memory.errors.StoreError` here (:func:`translate`) and nowhere
else; outside :mod:`graph_memory.db` no code imports apsw.

The connection is not shared between threads: the server runs every call on its event loop
thread; other threads (CLI backup, tests) open their own Store.
"""

from __future__ import annotations

import contextlib
import glob
import os
import random
import shutil
import signal
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import TypeVar, cast

import apsw

from graph_memory.db import index, migrations
from graph_memory.db.paths import check_database_path, fsync_directory, fsync_file, link_new, side_files
from graph_memory.errors import GraphError, PendingMigrationsError, StoreError
from graph_memory.hints import graph_memory_command, shell_quote
from graph_memory.logs import get_logger
from graph_memory.wording import plural

T = TypeVar("T")
# Online backup (Store.backup_to): restarts (the source changed between steps) tolerated before
# copying the rest in one step, and busy steps tolerated before giving up.
_MAX_RESTARTS = 3
_BACKUP_BUSY_RETRIES = 50
# Page cache of a large write (an import), in KiB as SQLite's negative cache_size means (64 MiB,
# used only as needed).
_LARGE_WRITE_CACHE_KIB = -65_536
# Page cache of every read-write connection (16 MiB, used only as needed; SQLite's default is
# 2 MiB): the pages a search reads in a 10,000-entity graph (~20 MB file) stay cached between
# calls; matching 2.5 % of it then spends ~20 % less in SQLite (issue 15). It costs ~15 MiB of
# peak memory after a whole read_graph at 100,000 entities (bench: 667 -> 702 MiB with 32 MiB).
_CACHE_KIB = -16_384
log = get_logger("graph_memory.store")
# The connection graph operations receive inside a transaction (for annotations outside db/).
Connection = apsw.Connection

# SQLITE_BUSY can still reach us after the busy timeout (e.g. a checkpoint or WAL recovery in
# another process, or a short busy timeout under a lock held longer); the whole transaction is then
# retried for the rest of the busy timeout, and for at least _BUSY_RETRY_SECONDS (_BusyWaits); a
# read-only connection is retried this many times. The pauses are jittered so that processes
# retrying together do not collide again in step.
_BUSY_RETRIES = 5
_BUSY_RETRY_SECONDS = 2.0
_BUMP_GRAPH_VERSION = "UPDATE graph_version SET version = version + 1 WHERE id = 1"


def python_lower(*args: apsw.SQLiteValue) -> apsw.SQLiteValue:
    """SQL ``python_lower(x)``: ``str.lower()`` of text (the reference server's case rule),
    anything else unchanged. Registered with exactly one argument."""
    (value,) = args
    return value.lower() if isinstance(value, str) else value


# A database being built (Store.building) is written to all the time; one whose file has not
# changed for this long was left by a process that was killed, and is removed by the next build
# of that name or the next read-write open of the database (_remove_stale_builds).
STALE_BUILD_SECONDS = 600.0


def _prepare_folder(path: Path) -> None:
    """Create the folder of the database ``path`` will name, and check that a file can be
    created in it.

    Raises:
        StoreError: the folder cannot be created, or this user cannot create files in it (the
            message says so: mkstemp or open alone would say "Permission denied" or "Read-only
            file system" without naming the folder's part).
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"cannot create the folder {path.parent} for the database: {exc.strerror or exc}; "
            f"choose another location with MEMORY_FILE_PATH (or --database)"
        ) from exc
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise StoreError(f"cannot create the database in {path.parent}: folder not writable; "
                         f"choose another location with MEMORY_FILE_PATH (or --database)")


def _builds(path: Path) -> list[tuple[Path, float]]:
    """The files builds of ``path`` keep beside it (``.NAME.*.building``) with how many seconds
    ago each last changed (a build writes all the time; a killed one stops)."""
    now, found = time.time(), []
    for build in path.parent.glob(f".{glob.escape(path.name)}.*.building"):
        with contextlib.suppress(OSError):   # gone meanwhile: finished or removed
            found.append((build, now - build.stat().st_mtime))
    return found


def build_in_progress(path: Path) -> Path | None:
    """A build of the database ``path`` that is under way (its file changed within
    :data:`STALE_BUILD_SECONDS`), e.g. a first-start import, or None."""
    return next((build for build, age in _builds(path) if age < STALE_BUILD_SECONDS), None)


def _remove_stale_builds(path: Path, *, keep: Path | None = None) -> None:
    """Remove what killed builds of ``path`` left beside it (``.NAME.*.building`` and its
    :func:`~graph_memory.db.paths.side_files`, unchanged for :data:`STALE_BUILD_SECONDS`), except
    ``keep``; best effort. Run by every build and every read-write open of the database (a build
    killed before it took its name leaves its file, up to the database's size)."""
    for leftover, age in _builds(path):
        try:
            if leftover == keep or age < STALE_BUILD_SECONDS:
                continue
            for name in (leftover, *side_files(leftover)):
                name.unlink(missing_ok=True)
        except OSError as exc:
            log.warning("stale_build_not_removed", path=str(leftover), error=str(exc))
            continue
        log.info("stale_build_removed", path=str(leftover), unchanged_s=round(age))


def set_orphans_aside(path: Path) -> None:
    """Before a new database takes the name ``path``: a ``-wal``/``-shm`` left there by a deleted
    database is renamed ``*.orphaned-TIME`` (see :func:`_move_orphans_aside`)."""
    _move_orphans_aside(path, before=time.time())


def _move_orphans_aside(path: Path, *, before: float) -> None:
    """Rename the ``-wal``/``-shm``/``-journal`` of ``path`` when ``path`` itself does not exist
    (a database deleted while a crashed server's log was left): SQLite would replay that log into
    the database about to take the name, losing it or corrupting it. Only files last changed
    before ``before`` (the build's start, as a file time): a database that took the name just
    after the check has fresh ones, which are its own. Kept as ``NAME-wal.orphaned-TIME``, logged
    (``orphaned_database_files_moved``), never deleted."""
    if path.exists():
        return
    moved = []
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    for side in side_files(path):
        with contextlib.suppress(FileNotFoundError):
            if side.stat().st_mtime < before:
                side.rename(side.with_name(f"{side.name}.orphaned-{stamp}"))
                moved.append(str(side))
    if moved:
        log.warning("orphaned_database_files_moved", database=str(path), files=moved,
                    hint=f"they belonged to a database {path} that no longer exists; renamed *.orphaned-{stamp} "
                         f"so that they are not applied to the new one")


# The signals that stop a process politely (SIGHUP: its terminal closed; none on Windows).
_STOPPING_SIGNALS = tuple(getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name))


class _Signalled(BaseException):
    """SIGTERM or SIGHUP arrived while a database was built aside (:func:`_signals_as_exceptions`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum


def _hold(*signums: int) -> set[int] | None:
    """Block ``signums`` in this thread (where the platform can); returns the mask to restore."""
    if not hasattr(signal, "pthread_sigmask"):
        return None
    return signal.pthread_sigmask(signal.SIG_BLOCK, signums)


def _release(held: set[int] | None) -> None:
    """Restore the mask :func:`_hold` returned: a signal that came meanwhile is delivered now."""
    if held is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


@contextmanager
def _signals_as_exceptions(*signums: int) -> Iterator[None]:
    """While inside (in the main thread), ``signums`` raise :class:`_Signalled` instead of ending
    the process at once, so that what is being built is removed first (Ctrl-C already raises
    KeyboardInterrupt); the previous handlers come back on leaving."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def raise_signalled(signum: int, _frame: object) -> None:
        raise _Signalled(signum)

    previous = {signum: signal.signal(signum, raise_signalled) for signum in signums}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            if handler is not None:  # None: a handler not set from Python, which cannot be restored
                signal.signal(signum, handler)


class DatabaseAppeared(StoreError):
    """A database built aside (:meth:`Store.building`) could not take its name: another process
    created a database there meanwhile."""


class _BusyWaits:
    """The retries of a transaction that SQLite reported busy, within one busy timeout in all.

    SQLite's busy handler waits up to the busy timeout per attempt; retried as they were, a lock
    held longer made a call wait six timeouts (61 s with the default 10 s, past the official
    clients' 60 s request timeout: found by QA). Each retry now waits only for what is left of the
    timeout since the first attempt began, and the call gives up once the timeout is spent (at
    least :data:`_BUSY_RETRY_SECONDS`: busy reports that come without waiting, such as WAL
    recovery in another process, are retried for that long with a short growing, jittered pause)."""

    def __init__(self, conn: apsw.Connection, busy_timeout_ms: int) -> None:
        self._conn, self._timeout_ms = conn, busy_timeout_ms
        self._started = time.monotonic()
        self._attempt = 0

    def again(self) -> bool:
        """After a busy attempt: pause and return True to try again, or False to give up."""
        self._attempt += 1
        if time.monotonic() - self._started >= max(self._timeout_ms / 1000, _BUSY_RETRY_SECONDS):
            return False   # (a timeout spent in one wait overshot by five more retries: found by QA)
        time.sleep(min(0.05 * self._attempt, 0.25) * random.uniform(0.5, 1.5))
        left_ms = self._timeout_ms - (time.monotonic() - self._started) * 1000
        self._conn.set_busy_timeout(max(int(left_ms), 0))
        return True

    def done(self) -> None:
        """Give the connection its busy timeout back (a retry shortened it)."""
        if self._attempt:
            self._conn.set_busy_timeout(self._timeout_ms)


class Store:
    """One open database file. Create with :meth:`Store.open`; close with :meth:`close`.

    Attributes:
        path: absolute path of the database file.
        conn: the apsw connection (for graph operations inside :meth:`read`/:meth:`write`).
    """

    def __init__(self, path: Path, conn: apsw.Connection) -> None:
        self.path = path
        self.conn = conn
        # Set when SQLite reported the file corrupt: from then on writes are refused, so nothing
        # is written into a damaged file (it could spread the damage and make recovery harder).
        self.corrupt: apsw.CorruptError | None = None
        self.busy_timeout_ms = 0
        # A private folder holding a snapshot this Store reads (open_readonly), removed on close.
        self.snapshot_dir: Path | None = None

    @classmethod
    def open(cls, path: Path | str, *, busy_timeout_ms: int = 10_000, migrate: bool = True,
             building_for: Path | None = None) -> Store:
        """Open (creating parent folders and the file if needed) and migrate the database.
        ``building_for``: ``path`` is a new file no other connection opens, built to become the
        database of this name (:meth:`building`); logs and messages give that name.

        Raises:
            StoreError: the folder cannot be created or written, the file is not SQLite or is
                corrupt, or the database is locked beyond the busy timeout.
            MigrationError: the migration history is edited or newer than this code.
        """
        path = Path(path).expanduser().absolute()
        check_database_path(path)
        if path.exists() and not os.access(path, os.R_OK | os.W_OK):
            raise StoreError(f"database {path} is not readable and writable by this user; fix its permissions")
        if not path.exists():
            _prepare_folder(path)
        if path.exists() and path.stat().st_size > 0:
            _refuse_foreign_unmodified(path)
            if building_for is None:
                _remove_stale_builds(path)
        if not path.exists():
            # A log left by a deleted database is kept aside, as a build does: SQLite discarded it
            # silently when a server then created the database (found by QA).
            set_orphans_aside(path)
            # A memory is personal: create the file readable by its owner only. SQLite gives the
            # -wal and -shm files the same permissions.
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))
            except FileExistsError:
                pass  # another process created it meanwhile
            except OSError as exc:
                raise StoreError(f"cannot create the database {path}: {exc.strerror or exc}; "
                                 f"choose another location with MEMORY_FILE_PATH (or --database)") from exc
        try:
            conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE)
        except apsw.Error as exc:
            raise StoreError(f"cannot open database {path}: {exc}") from exc
        store = cls(building_for or path, conn)
        try:
            waits = _BusyWaits(conn, busy_timeout_ms)
            while True:
                try:
                    store._prepare(busy_timeout_ms, migrate, building=building_for is not None)
                    break
                except (apsw.BusyError, apsw.LockedError):
                    # e.g. another process recovering the WAL after a crash, which SQLite reports
                    # as busy without waiting: the same retry as every transaction gets.
                    if not waits.again():
                        raise
            waits.done()
        except GraphError:
            conn.close()
            raise
        except apsw.Error as exc:
            conn.close()
            raise translate(exc, path) from exc
        return store

    @classmethod
    @contextmanager
    def building(cls, path: Path | str, *, busy_timeout_ms: int = 10_000) -> Iterator[Store]:
        """A new database for ``path``, which must not exist yet, built whole before any other
        process can open it: created and migrated under a temporary name beside it
        (``.NAME.XXXXXXXX.building``, readable by its owner only), written with its rollback
        journal in memory and no fsync per commit, then, when the body returns, switched to WAL,
        synced and linked into place as ``path``. When the body raises (Ctrl-C, SIGTERM and SIGHUP
        too: the process then ends as the signal would have ended it) the temporary file is
        removed: ``path`` never existed. A ``-wal``/``-shm``/``-journal`` left at ``path`` by a
        deleted database is renamed aside first (``*.orphaned-TIME``), never replayed into it.
        A process killed outright leaves the temporary file behind (the ``building`` name says
        what it is; nothing reads it): a later build of ``path``, or a read-write open of the
        database, removes it once it has not changed for :data:`STALE_BUILD_SECONDS`.

        Raises:
            DatabaseAppeared: ``path`` was created meanwhile by another process (nothing of the
                body was kept; ``path`` is left as it is).
            StoreError: as :meth:`open`, for the folder and the temporary file; the finished
                file could not be given its name (nothing was kept).
        """
        path = Path(path).expanduser().absolute()
        check_database_path(path)
        try:
            # From before the temporary file exists to after it took its name: SIGTERM and SIGHUP
            # raise, so it is removed; the process then ends as the signal would have ended it.
            with _signals_as_exceptions(*_STOPPING_SIGNALS):
                yield from cls._build(path, busy_timeout_ms)
        except _Signalled as exc:
            signal.signal(exc.signum, signal.SIG_DFL)
            os.kill(os.getpid(), exc.signum)
            raise

    @classmethod
    def _build(cls, path: Path, busy_timeout_ms: int) -> Iterator[Store]:
        """:meth:`building`'s steps, for a checked absolute ``path``."""
        _prepare_folder(path)
        # A stopping signal (or Ctrl-C) between the file's creation and the cleanup below taking
        # charge of it would leave the file: held back until then (delivered there, and raised
        # inside it).
        held = _hold(signal.SIGINT, *_STOPPING_SIGNALS)
        try:
            try:
                fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".building", dir=path.parent)
                started = os.fstat(fd).st_mtime   # the build's start on the folder's own clock
                os.close(fd)
            except OSError as exc:
                raise StoreError(f"cannot create the database in {path.parent}: {exc.strerror or exc}; "
                                 f"choose another location with MEMORY_FILE_PATH (or --database)") from exc
            building = Path(name)
        except BaseException:
            _release(held)
            raise
        try:
            _release(held)
            _remove_stale_builds(path, keep=building)
            # Logs, messages and reports name the database being made (a full disk is that
            # folder's), not the temporary file; nothing reopens the store by its path.
            store = cls.open(building, busy_timeout_ms=busy_timeout_ms, building_for=path)
            try:
                yield store
                store.conn.execute("PRAGMA journal_mode = WAL")  # as every database is
            finally:
                store.close()
            try:
                fsync_file(building)
                _move_orphans_aside(path, before=started)
                link_new(building, path)
            except FileExistsError:
                raise DatabaseAppeared(f"the database {path} was created by another process while this one "
                                       f"was built beside it") from None
            except OSError as exc:
                raise StoreError(f"cannot give the database built as {building} its name {path}: "
                                 f"{exc.strerror or exc}; nothing was kept") from exc
        except BaseException as exc:
            for leftover in (building, *side_files(building)):
                leftover.unlink(missing_ok=True)
            # one line for whoever wonders why a start or an import left no database (a host
            # that keeps stopping a long first start, say); the error itself goes on
            log.info("database_build_removed", database=str(path), building=building.name,
                     reason=signal.Signals(exc.signum).name if isinstance(exc, _Signalled) else type(exc).__name__)
            raise
        fsync_directory(path.parent)

    @classmethod
    def open_readonly(cls, path: Path | str, *, busy_timeout_ms: int = 10_000, check_history: bool = True) -> Store:
        """Open an existing database for reading only (stats, export, backup, healthcheck): it
        works when this user can only read the file and its folder, and never creates or changes
        a file. Writes through this Store fail (:class:`~graph_memory.errors.StoreError`).

        How the file is opened (SQLite's rules for read-only WAL databases):

        * not in WAL mode: ``mode=ro``, which needs nothing but read access;
        * WAL mode with a ``-shm`` file (a connection is open, or one ended without cleaning
          up): ``mode=ro`` reads the log through it, even when it is not writable for this user;
        * WAL mode, no ``-shm`` and the ``-wal`` absent or empty (the normal state after the
          last connection closed): every committed page is in the main file, so it is opened
          with ``immutable=1``, which needs no ``-shm`` and creates none. (``mode=ro`` would
          create ``-wal`` and ``-shm`` files and leave them, owned by this user, or fail
          when the folder is not writable.) Immutable means unlocked: a writer that starts and
          checkpoints during this read could make it see a mix; the read is short and a writer
          only checkpoints after about 4 MiB of log or on close;
        * WAL mode, no ``-shm``, committed pages still in the ``-wal`` (a copy taken without
          its ``-shm``): no connection is open (each keeps the ``-shm``), so the database and
          its log are copied into a private temporary folder, SQLite replays the log there,
          and the copy is read (and deleted on :meth:`close`);
        * ``mode=ro`` refused (a ``-shm`` this user cannot read): as the immutable case when the
          log is empty, else refused with what to do.

        Args:
            check_history: refuse an edited or newer migration history (a backup copies any).

        Raises:
            StoreError: no file, an odd path (:func:`~graph_memory.db.paths.check_database_path`),
                not SQLite, another program's database, unreadable as described above.
            MigrationError: ``check_history`` and the migration history is edited or newer
                than this code.
        """
        path = Path(path).expanduser().absolute()
        check_database_path(path, must_exist=True)
        if not os.access(path, os.R_OK):
            raise StoreError(f"database {path} is not readable by this user; fix its permissions")
        conn, snapshot = _connect_readonly_retrying(path)
        store = cls(path, conn)
        store.snapshot_dir = snapshot
        try:
            store._attach(busy_timeout_ms)
            if check_history:
                migrations.status(conn, str(path))
        except BaseException as exc:
            store.close()
            if isinstance(exc, apsw.Error):
                raise translate(exc, path) from exc
            raise
        return store

    def _prepare(self, busy_timeout_ms: int, migrate: bool, building: bool = False) -> None:
        """Configure the connection, then apply pending migrations (or only check them)."""
        self._configure(busy_timeout_ms, building)
        if migrate:
            applied = migrations.migrate(self.conn, str(self.path))
            if applied:
                log.info("migrations_applied", path=str(self.path), migrations=[m.name for m in applied])
        else:
            migrations.status(self.conn, str(self.path))

    def _attach(self, busy_timeout_ms: int) -> None:
        """What every connection needs (read-write or read-only): the busy timeout, the search's
        ``python_lower`` function, and a first touch of the file — one that is not SQLite fails
        here, before anything is written; so does another program's database."""
        self.busy_timeout_ms = busy_timeout_ms
        self.conn.set_busy_timeout(busy_timeout_ms)
        self.conn.create_scalar_function("python_lower", python_lower, 1, deterministic=True)
        refuse_foreign(self.conn, self.path)

    def _configure(self, busy_timeout_ms: int, building: bool = False) -> None:
        self._attach(busy_timeout_ms)  # before WAL: switching to it would already change the file
        conn = self.conn
        if building:
            # A file nothing else opens, thrown away unless complete (Store.building): the rollback
            # journal in memory (it stays small: pages the file did not have when a transaction
            # began are not journaled) and no fsync per commit. Every page is written once, where
            # WAL writes it to the log and again into the file: a ninth of a 1,000,000-entity import.
            conn.execute("PRAGMA journal_mode = MEMORY")
            conn.execute("PRAGMA synchronous = OFF")
        else:
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()
            if mode is None or str(mode[0]).lower() != "wal":
                log.warning("wal_unavailable", path=str(self.path), journal_mode=mode and mode[0])
            # WAL + NORMAL: a commit is durable across any crash of the process (SIGKILL included)
            # and the file never corrupts; only a power loss / OS crash may roll back the last
            # commits. FULL fsyncs the WAL on every commit: ~4 ms per write call here, 20× the
            # write itself (issue 6).
            conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
        # Temporary tables (a search's index of documents still waiting for the FTS index) live in
        # memory: a search never needs disk space.
        conn.execute("PRAGMA temp_store = MEMORY")
        conn.execute(f"PRAGMA cache_size = {_CACHE_KIB:d}")

    def close(self) -> None:
        """Close the connection (a WAL checkpoint runs when this is the last read-write
        connection); remove the private snapshot a read-only Store may have read."""
        self.conn.close()
        if self.snapshot_dir is not None:
            shutil.rmtree(self.snapshot_dir, ignore_errors=True)
            self.snapshot_dir = None

    def catch_up_search_index(self, *, wait_ms: int | None = None) -> int | None:
        """Index every changed search document now (:func:`graph_memory.db.index.catch_up`), in a
        write transaction of its own.

        Args:
            wait_ms: None to wait and retry like any write, and raise on failure. Otherwise a
                best-effort catch-up (before a search, when idle, at shutdown: a later one catches
                up anyway): it waits at most this many milliseconds (and at most the busy timeout)
                for the write lock, and a failure (e.g. a full disk) is logged as
                ``search_index_catch_up_failed``, not raised.

        Returns:
            How many entities' documents were indexed; None when a best-effort catch-up gave up
            (the lock stayed taken) or failed.

        Raises:
            StoreError: with ``wait_ms=None`` only, as :meth:`run_write`.
        """
        if wait_ms is None:
            return self._retrying(lambda: self.write(graph=False), index.catch_up)
        self.conn.set_busy_timeout(min(wait_ms, self.busy_timeout_ms))
        try:
            with self.write(graph=False) as conn:
                return index.catch_up(conn)
        except _Busy:
            return None
        except StoreError as exc:
            log.warning("search_index_catch_up_failed", error=str(exc)[:500])
            return None
        finally:
            self.conn.set_busy_timeout(self.busy_timeout_ms)

    def catch_up_when_idle(self) -> int | None:
        """The catch-up of the idle policy (an idle server, every
        :data:`~graph_memory.db.index.IDLE_CATCH_UP_SECONDS` after its last write and every
        :data:`~graph_memory.db.index.CATCH_UP_POLL_SECONDS`; shutdown): when documents wait for
        the index, catch up without waiting for the write lock. Never raises: a failure (the
        store closed meanwhile, a full disk) is logged as ``search_index_catch_up_failed``.

        Returns:
            How many documents were indexed; None when none waited or it could not run now.
        """
        try:  # the look costs a one-row read; the catch-up itself never raises (wait_ms given)
            if not self.run_read(index.behind):
                return None
            caught_up = self.catch_up_search_index(wait_ms=0)
            log.debug("search_index_caught_up", entities=caught_up)
            return caught_up
        except (GraphError, apsw.Error) as exc:
            log.warning("search_index_catch_up_failed", error=str(exc)[:500])
            return None

    # -- change counters (other processes' commits) ---------------------------------------------

    def has_graph_tables(self) -> bool:
        """True when the file has the graph's tables (a database ``migrate`` has not set up yet,
        or an empty file opened read-only, has none)."""
        query = "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'entities'"
        return self.conn.execute(query).fetchone() is not None

    def change_counters(self) -> tuple[int, int | None] | None:
        """``(PRAGMA data_version, graph_version)`` read in one read transaction, so both describe
        the same snapshot: a commit of another process lands before both or after both, never
        between them.

        Returns:
            The pair (graph_version None before migration 0005), or None when this Store was closed.

        Raises:
            StoreError: they cannot be read now (e.g. busy during another process's WAL recovery).
        """
        try:
            self.conn.execute("BEGIN")
            try:
                graph = graph_version(self.conn)   # the first read starts the snapshot
                data = int(cast(int, self.conn.execute("PRAGMA data_version").fetchall()[0][0]))
            finally:
                if self.conn.in_transaction:
                    self.conn.execute("COMMIT")
        except apsw.ConnectionClosedError:
            return None
        except apsw.Error as exc:
            raise translate(exc, self.path) from exc
        return data, graph

    # -- migrations -----------------------------------------------------------------------------

    @classmethod
    def open_current(cls, path: Path | str, *, busy_timeout_ms: int = 10_000) -> Store:
        """:meth:`open_readonly`, refusing a database with older migrations applied (this code
        reads the current schema only; export, dry runs). One with none applied yet has no graph
        tables and reads as empty.

        Raises:
            PendingMigrationsError: migrations are pending on a database that has some applied;
                the message gives the ``graph-memory migrate`` command to run first.
            StoreError, MigrationError: as :meth:`open_readonly`.
        """
        store = cls.open_readonly(path, busy_timeout_ms=busy_timeout_ms)
        try:
            state = store.schema_status()
            if state.pending and state.version > 0:
                raise PendingMigrationsError(
                    f"database {store.path} has {plural(len(state.pending), 'pending migration')}; "
                    f"first run: {graph_memory_command('migrate', database=store.path)}")
        except BaseException:
            store.close()
            raise
        return store

    def schema_status(self) -> migrations.MigrationStatus:
        """The applied and pending migrations, changing nothing.

        Raises:
            MigrationError: the history is edited or newer than this code.
            StoreError: the database could not be read.
        """
        try:
            return migrations.status(self.conn, str(self.path))
        except apsw.Error as exc:
            raise translate(exc, self.path) from exc

    def migrate(self) -> list[migrations.Migration]:
        """Apply the pending migrations now (``graph-memory migrate``; :meth:`open` does it too).

        Returns:
            The migrations applied, in order.

        Raises:
            MigrationError: the history is edited or newer than this code (nothing applied).
            StoreError: the database could not be written.
        """
        try:
            return migrations.migrate(self.conn, str(self.path))
        except apsw.Error as exc:
            raise translate(exc, self.path) from exc

    # -- transactions -------------------------------------------------------------------------

    @contextmanager
    def read(self) -> Iterator[apsw.Connection]:
        """A read transaction: every statement inside sees one consistent snapshot."""
        with self._translated():
            self.conn.execute("BEGIN")
            try:
                yield self.conn
            finally:
                if self.conn.in_transaction:
                    self.conn.execute("COMMIT")

    @contextmanager
    def write(self, *, graph: bool = True, large: bool = False) -> Iterator[apsw.Connection]:
        """A write transaction started ``IMMEDIATE``; commits on success, rolls back on any
        exception (a rejected batch writes nothing). Prefer :meth:`run_write`, which retries
        when SQLite reports the database busy.

        Args:
            graph: the transaction may change the graph: when it changed a row of entities,
                observations or relations, it also adds one to ``graph_version`` (migration
                0005), which tells other processes it was a change of the graph; False for
                search-index upkeep, which changes none.
            large: one large write that only adds rows (an import, a copy): a larger page cache
                while it runs (:data:`_LARGE_WRITE_CACHE_KIB`), so fewer dirty pages spill early,
                and whether it changed the graph is told from the graph tables' largest ids
                before and after (:func:`_graph_rows_added`) instead of SQLite's update hook, a
                Python call for each of its rows (~2 s of a 1,000,000-entity import).
        """
        if self.corrupt is not None:
            raise StoreError(f"{translate(self.corrupt, self.path)}. This server refuses writes to it until "
                             f"restarted; nothing of this call was written")
        with self._translated(), self._cache(_LARGE_WRITE_CACHE_KIB if large else None):
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                if graph:
                    with (_graph_rows_added if large else _graph_rows_watched)(self.conn) as changed:
                        yield self.conn
                    if changed:
                        _bump_graph_version(self.conn)
                else:
                    yield self.conn
                if index.backlog_full(self.conn):
                    self._catch_up_within_write()
                self.conn.execute("COMMIT")
            except BaseException:
                if self.conn.in_transaction:  # also when COMMIT itself failed (e.g. the disk is full)
                    self.conn.execute("ROLLBACK")
                raise

    def _catch_up_within_write(self) -> None:
        """The catch-up of a full backlog, at the end of a write: when it fails but the write
        is intact (its savepoint undone, e.g. no disk space for the index), the write commits
        without it and the backlog waits for the next catch-up; a write that e.g. deletes
        entities to free space is never refused for the index's sake."""
        try:
            index.catch_up(self.conn)
        except apsw.Error as exc:
            if not self.conn.in_transaction:  # SQLite rolled the whole write back
                raise
            log.warning("search_index_catch_up_failed", error=str(exc)[:500])

    @contextmanager
    def _cache(self, kib: int | None) -> Iterator[None]:
        """``PRAGMA cache_size = kib`` (SQLite's negative form: KiB) for the body, then back."""
        if kib is None:
            yield
            return
        previous = int(cast(int, self.conn.execute("PRAGMA cache_size").fetchall()[0][0]))
        self.conn.execute(f"PRAGMA cache_size = {kib:d}")
        try:
            yield
        finally:
            self.conn.execute(f"PRAGMA cache_size = {previous:d}")

    def run_write(self, operation: Callable[[apsw.Connection], T], *, large: bool = False) -> T:
        """Run ``operation(conn)`` in one write transaction, retrying the whole transaction
        when SQLite reports the database busy or locked past the busy timeout. ``large``: one
        large write, e.g. an import (see :meth:`write`).

        Raises:
            StoreError: still busy after the retries (another process holds the write lock).
            GraphError: whatever ``operation`` raises (after the rollback).
        """
        return self._retrying(lambda: self.write(large=large), operation)

    def run_search(self, operation: Callable[[apsw.Connection], T]) -> T:
        """:meth:`run_read` for an operation that reads the FTS index (a search): when changed
        documents wait for the index (search_pending), the index catches up first, in a write
        transaction of its own, then ``operation`` runs on a fresh snapshot. When the catch-up
        cannot run now (another process holds the write lock for more than
        ``index.SEARCH_LOCK_WAIT_MS``, the disk is full) ``operation`` runs all the same: it
        searches around the backlog (:func:`graph_memory.db.index.match_tables`) and finds every
        committed write either way, the index only makes it faster.

        Raises:
            StoreError: as :meth:`run_read`.
        """
        result = self.run_read(lambda conn: _Behind if index.behind(conn) else operation(conn))
        if result is _Behind:
            # When it cannot (e.g. the disk is full), the search reads around the backlog.
            self.catch_up_search_index(wait_ms=index.SEARCH_LOCK_WAIT_MS)
            result = self.run_read(operation)
        return cast(T, result)

    def run_read(self, operation: Callable[[apsw.Connection], T]) -> T:
        """Run ``operation(conn)`` in one read transaction, retried like :meth:`run_write` when
        SQLite reports the database busy (WAL recovery or an exclusive lock in another process).

        Raises:
            StoreError: still busy after the retries.
        """
        return self._retrying(self.read, operation)

    def _retrying(self, transaction: Callable[[], AbstractContextManager[apsw.Connection]],
                  operation: Callable[[apsw.Connection], T]) -> T:
        """``operation(conn)`` inside ``transaction()``, the whole transaction retried with a short
        growing, jittered pause while SQLite reports the database busy or locked, within the busy
        timeout in all (at least :data:`_BUSY_RETRY_SECONDS`; see :class:`_BusyWaits`)."""
        waits = _BusyWaits(self.conn, self.busy_timeout_ms)
        try:
            while True:
                try:
                    with transaction() as conn:
                        return operation(conn)
                except _Busy:
                    if not waits.again():
                        break
        finally:
            waits.done()
        raise StoreError(
            f"database {self.path} stayed locked by another process; try again, or find the process "
            f"holding it (another graph-memory or a tool with an open write transaction)"
        )

    @contextmanager
    def _translated(self) -> Iterator[None]:
        try:
            yield
        except (apsw.BusyError, apsw.LockedError) as exc:
            raise _Busy(str(exc)) from exc
        except apsw.Error as exc:
            if isinstance(exc, apsw.CorruptError):
                self.corrupt = exc
            raise translate(exc, self.path) from exc

    # -- maintenance --------------------------------------------------------------------------

    @classmethod
    def open_as_is(cls, path: Path) -> Store:
        """Open an existing file read-write exactly as it is: no pragmas, no migrations, no
        checks, nothing written by the opening (a backup's copy being verified).

        Raises:
            StoreError: the file cannot be opened.
        """
        try:
            return cls(path, apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READWRITE))
        except apsw.Error as exc:
            raise translate(exc, path) from exc

    def backup_to(self, target: Path, *, pages_per_step: int,
                  progress: Callable[[int, int], None] | None = None) -> tuple[int, int]:
        """Copy this database into the new file ``target`` with SQLite's online backup API: a
        consistent snapshot even while other connections write. When another connection changes
        the source between two steps, SQLite restarts the copy; after :data:`_MAX_RESTARTS`
        restarts the rest is copied in one step (one read snapshot; in WAL mode that blocks no
        writer).

        Args:
            pages_per_step: pages copied per step, between chances for writers.
            progress: called with ``(pages copied, pages in total)`` after each step.

        Returns:
            ``(pages, restarts)``.

        Raises:
            StoreError: the copy failed, or the source stayed locked.
        """
        try:
            dst = apsw.Connection(str(target))
            try:
                with dst.backup("main", self.conn, "main") as job:
                    restarts = busy = copied = 0
                    while not job.done:
                        step = pages_per_step if restarts < _MAX_RESTARTS else -1
                        try:
                            job.step(step)
                        except (apsw.BusyError, apsw.LockedError) as exc:
                            busy += 1
                            if busy > _BACKUP_BUSY_RETRIES:
                                raise StoreError(f"database {self.path} stayed locked; try the backup again") from exc
                            time.sleep(0.02 * min(busy, 10))
                            continue
                        now_copied = job.page_count - job.remaining
                        if not job.done and now_copied <= copied:
                            restarts += 1  # the source changed: SQLite started over
                        copied = now_copied
                        if progress:
                            progress(copied, job.page_count)
                    pages = job.page_count
            finally:
                dst.close()
        except apsw.Error as exc:
            raise _backup_failed(exc, self.path, target) from exc
        return pages, restarts

    def replace_with(self, source: Path) -> None:
        """Replace everything this database holds with the database file ``source`` (same page
        size), in one transaction through SQLite's online backup API, and count it as a graph
        change (``graph_version`` past both the old and the new value) so that every process's
        subscribers are told. Other connections see the new content from their next transaction.

        Raises:
            StoreError: it stayed locked by another process's write, or the copy failed (nothing changed).
        """
        before = graph_version(self.conn) or 0
        waits = _BusyWaits(self.conn, self.busy_timeout_ms)
        try:
            src = apsw.Connection(str(source), flags=apsw.SQLITE_OPEN_READONLY)
            try:
                while True:
                    try:
                        with self.conn.backup("main", src, "main") as job:
                            job.step(-1)
                        break
                    except (apsw.BusyError, apsw.LockedError) as exc:
                        if not waits.again():
                            raise translate(exc, self.path) from exc
            finally:
                src.close()
        except apsw.Error as exc:
            raise translate(exc, self.path) from exc
        finally:
            waits.done()
        # The copy is committed: a failure from here on must not report the restore as failed (it
        # did, and the copy saved before it was then removed: found by QA on a nearly full disk).
        try:
            with self.write(graph=False) as conn:
                conn.execute("UPDATE graph_version SET version = max(version, ?) + 1 WHERE id = 1", (before,))
        except (GraphError, _Busy, apsw.Error) as exc:
            log.warning("restore_not_announced", database=str(self.path), error=str(exc)[:300],
                        hint="the restore is complete; running servers' subscribers were not told")

    def integrity_problems(self) -> list[str]:
        """``PRAGMA integrity_check`` plus the integrity check of every FTS5 table, which compares an
        external-content index with its content table. Documents still waiting for the index
        (search_pending) are indexed first in a transaction (or savepoint) that is rolled back: the
        check sees the index as a search would, and nothing is written. Needs no application SQL
        function.

        Returns:
            Problem descriptions; empty when the database and its search indexes are sound.
        """
        conn = self.conn
        problems = [row[0] for row in conn.execute("PRAGMA integrity_check") if row[0] != "ok"]
        names = {name for (name,) in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
        fts_tables = [name for (name,) in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'table' "
            "AND sql LIKE 'CREATE VIRTUAL TABLE%USING fts5%'")]
        # The write lock up front (waiting for it as writes do) unless the caller holds a transaction:
        # turning a read into a write later fails at once when another connection is writing.
        own = not conn.in_transaction
        try:
            conn.execute("BEGIN IMMEDIATE" if own else "SAVEPOINT integrity")
        except (apsw.BusyError, apsw.LockedError) as exc:
            return [*problems,
                    f"search index: not checked, the database is locked by another process ({exc})"]
        try:
            if "search_pending" in names:
                try:
                    index.catch_up(conn)
                except apsw.Error as exc:
                    problems.append(f"search index backlog (search_pending): {exc}")
            for name in fts_tables:
                quoted = '"' + name.replace('"', '""') + '"'
                try:
                    conn.execute(f"INSERT INTO {quoted} ({quoted}, rank) VALUES ('integrity-check', 1)")
                except apsw.Error as exc:
                    problems.append(f"search index {name}: {exc}")
        finally:
            if own:
                conn.execute("ROLLBACK")
            else:
                conn.execute("ROLLBACK TO integrity")
                conn.execute("RELEASE integrity")
        return problems


_GRAPH_TABLES = frozenset({"entities", "observations", "relations"})


@contextmanager
def _graph_rows_watched(conn: apsw.Connection) -> Iterator[list[bool]]:
    """While inside, note whether any row of entities, observations or relations was inserted,
    updated or deleted (SQLite's update hook; bookkeeping such as the search index's queue,
    import records or a no-op write does not count). Yields a list that is truthy once one was."""
    changed: list[bool] = []

    def hook(_op: int, _database: str, table: str, _rowid: int) -> None:
        if not changed and table in _GRAPH_TABLES:
            changed.append(True)

    conn.set_update_hook(hook)
    try:
        yield changed
    finally:
        conn.set_update_hook(None)


_LARGEST_IDS = ("SELECT (SELECT max(id) FROM entities), (SELECT max(id) FROM observations), "
                "(SELECT max(id) FROM relations)")


@contextmanager
def _graph_rows_added(conn: apsw.Connection) -> Iterator[list[bool]]:
    """:func:`_graph_rows_watched` for a body that only inserts rows (and changes only rows it
    inserted): a row was added when a graph table's largest id grew (ids of new rows are larger
    than every id before them). Yields a list that is truthy after the body when one was."""
    changed: list[bool] = []
    before = conn.execute(_LARGEST_IDS).fetchall()
    yield changed
    if conn.execute(_LARGEST_IDS).fetchall() != before:
        changed.append(True)


def _bump_graph_version(conn: apsw.Connection) -> None:
    with contextlib.suppress(apsw.SQLError):  # no such table: a store opened without migrating
        conn.execute(_BUMP_GRAPH_VERSION)


def graph_version(conn: apsw.Connection) -> int | None:
    """How many write transactions have changed the graph (migration 0005's counter; None on a
    database before it). Equal numbers on two reads: no entity, observation or relation changed
    between them (search-index upkeep does not count)."""
    try:
        rows = conn.execute("SELECT version FROM graph_version WHERE id = 1").fetchall()
    except apsw.SQLError:  # no such table: an older schema
        return None
    return int(cast(int, rows[0][0])) if rows else None


class _Behind:
    """Marker: the FTS index was behind (:meth:`Store.run_search`)."""


class _Busy(Exception):
    """SQLITE_BUSY / SQLITE_LOCKED reached us: the transaction may be retried."""


_SQLITE_HEADER = b"SQLite format 3\x00"


def refuse_foreign(conn: apsw.Connection, path: Path) -> None:
    """Refuse another program's SQLite database: one that holds tables (or any schema object)
    but no graph-memory ledger (``schema_migrations``). Only reads; an empty database passes.
    The read also makes SQLite check the header: a file that is not SQLite fails here.

    Raises:
        StoreError: the database belongs to another program.
        apsw.Error: the file is not SQLite, is damaged or locked.
    """
    names = [name for (name,) in conn.execute("SELECT name FROM sqlite_schema ORDER BY type DESC, name")]
    if names and "schema_migrations" not in names:
        shown = ", ".join(names[:3]) + (", …" if len(names) > 3 else "")
        other = path.parent / ("memory.db" if path.name != "memory.db" else "graph-memory.db")
        raise StoreError(f"{path} is a SQLite database of another program (it holds {shown} and no graph-memory "
                         f"schema_migrations table); graph-memory does not touch it. Set MEMORY_FILE_PATH (or "
                         f"--database) to another file, such as {other}. It was not modified.")


def _refuse_foreign_unmodified(path: Path) -> None:
    """Before a read-write open of an existing file: refuse a file that is not SQLite or is
    another program's database, reading it as :meth:`Store.open_readonly` does (a read-write
    connection could already create ``-wal``/``-shm`` files or checkpoint another program's log
    into its file). Anything else that goes wrong here is left to the read-write open to report."""
    try:
        conn, snapshot = _connect_readonly(path)
    except apsw.NotADBError as exc:
        raise translate(exc, path) from exc
    except (apsw.Error, StoreError, OSError):
        return
    try:
        refuse_foreign(conn, path)
    except apsw.NotADBError as exc:
        raise translate(exc, path) from exc
    except apsw.Error:
        return
    finally:
        conn.close()
        if snapshot is not None:
            shutil.rmtree(snapshot, ignore_errors=True)


def _sidecar(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def _in_wal_mode(path: Path) -> bool:
    """Whether the file's header says WAL mode (read and write versions 2, bytes 18–19)."""
    with open(path, "rb") as file:
        header = file.read(20)
    return len(header) == 20 and header.startswith(_SQLITE_HEADER) and header[18] == 2


def _log_is_empty(path: Path) -> bool:
    try:
        return _sidecar(path, "-wal").stat().st_size == 0
    except FileNotFoundError:
        return True


def _connect(path: Path, parameter: str) -> apsw.Connection:
    """A read-only connection through a ``file:`` URI with ``parameter``, its schema read once
    (SQLite opens lazily: a file it cannot read fails here)."""
    uri = f"file:{urllib.parse.quote(str(path))}?{parameter}"
    conn = apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
    try:
        conn.execute("SELECT count(*) FROM sqlite_schema").fetchall()
    except BaseException:
        conn.close()
        raise
    return conn


def _connect_readonly(path: Path) -> tuple[apsw.Connection, Path | None]:
    """The connection of :meth:`Store.open_readonly` (see there for the cases) and the private
    snapshot folder it reads from, if any."""
    # SQLite keeps -wal and -shm beside the file a symbolic link names: look for them there (beside
    # the link, a running server's log was missed and its last writes left out: found by QA).
    path = Path(os.path.realpath(path))
    wal_mode = _in_wal_mode(path)
    if wal_mode and not _sidecar(path, "-shm").exists():
        if _log_is_empty(path):
            return _connect(path, "immutable=1"), None
        return _snapshot(path)
    try:
        return _connect(path, "mode=ro"), None
    except (apsw.ReadOnlyError, apsw.CantOpenError, apsw.PermissionsError) as exc:
        if not wal_mode:
            raise
        if _log_is_empty(path):
            return _connect(path, "immutable=1"), None
        raise StoreError(
            f"database {path} cannot be read by this user: its write-ahead log {path.name}-wal holds changes "
            f"not yet in the file, and reading them needs {path.name}-shm, which this user cannot use ({exc}). "
            f"Ask its owner for a copy ({graph_memory_command('backup', 'DEST', database=path)}), or run this "
            f"as the owner. Nothing was changed."
        ) from exc


def _connect_readonly_retrying(path: Path) -> tuple[apsw.Connection, Path | None]:
    """:func:`_connect_readonly` with the busy retries every transaction gets; errors translated."""
    for attempt in range(_BUSY_RETRIES + 1):
        try:
            return _connect_readonly(path)
        except (apsw.BusyError, apsw.LockedError) as exc:
            if attempt == _BUSY_RETRIES:
                raise translate(exc, path) from exc
            time.sleep(0.05 * (attempt + 1))
        except apsw.Error as exc:
            raise translate(exc, path) from exc
        except OSError as exc:  # reading the header, or copying into the snapshot folder
            raise StoreError(f"cannot read database {path}: {exc.strerror or exc}") from exc
    raise AssertionError("unreachable: the last attempt returns or raises")


def _snapshot(path: Path) -> tuple[apsw.Connection, Path]:
    """Copy the database and its ``-wal`` into a new private folder and open the copy read-write
    there, which replays the log into it (the original files are only read)."""
    folder = Path(tempfile.mkdtemp(prefix="graph-memory-read-"))
    try:
        copy = folder / path.name
        shutil.copyfile(_sidecar(path, "-wal"), _sidecar(copy, "-wal"))
        shutil.copyfile(path, copy)
        conn = apsw.Connection(str(copy), flags=apsw.SQLITE_OPEN_READWRITE)
        try:
            conn.execute("SELECT count(*) FROM sqlite_schema").fetchall()
        except BaseException:
            conn.close()
            raise
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return conn, folder


def translate(exc: apsw.Error, path: Path) -> StoreError:
    """Turn an apsw error into a StoreError that names the file and what to do."""
    if isinstance(exc, apsw.NotADBError):
        if holds_json_text(path):   # the reference server takes any name for its file (found by QA)
            named = path.with_suffix(".jsonl")
            database = named.with_suffix(".db")
            importing = ("" if database == path else   # named memory.db itself: renaming it frees the name
                         f", or import it with: {graph_memory_command('import', path, database=database)}")
            return StoreError(
                f"{path} holds JSON text, not a database: the reference server's memory file? graph-memory "
                f"reads such a file when its name ends in .jsonl or .json: rename it to {named} and set "
                f"MEMORY_FILE_PATH to that (its memory is imported on the first start into {database} beside "
                f"it, and the file is never changed){importing}. It was not modified.")
        return StoreError(f"{path} is not a SQLite database (or its header is damaged); move it aside "
                          f"or point MEMORY_FILE_PATH (or --database) at another file. It was not modified.")
    if isinstance(exc, apsw.CorruptError):
        return StoreError(f"database {path} is corrupt ({exc}); restore a backup "
                          f"({graph_memory_command('restore', 'BACKUP', database=path)}), or recover what is readable "
                          f"with: sqlite3 {shell_quote(path)} .recover (backups are made with: "
                          f"{graph_memory_command('backup', 'DEST', database=path)})")
    if isinstance(exc, apsw.BusyError | apsw.LockedError):
        return StoreError(f"database {path} is locked by another process ({exc}); close the program holding "
                          f"it (another graph-memory, a sqlite3 shell, a backup) or raise MEMORY_BUSY_TIMEOUT_MS")
    if isinstance(exc, apsw.FullError):
        return StoreError(f"the disk holding {path} is full; nothing of this call was written. Free some "
                          f"space there and try again")
    if isinstance(exc, apsw.ReadOnlyError | apsw.PermissionsError | apsw.CantOpenError):
        blocked = [side.name for side in side_files(path)[:2]
                   if side.exists() and not os.access(side, os.R_OK | os.W_OK)]
        if blocked:   # the database and its folder may be fine (found by QA)
            return StoreError(f"database {path} cannot be written: {' and '.join(blocked)} beside it cannot be "
                              f"read and written by this user (left by graph-memory run as another user?); give "
                              f"them the database's owner, or remove them while no program uses the database")
        return StoreError(f"database {path} cannot be written ({exc}); check the file and folder permissions")
    if isinstance(exc, apsw.IOError):
        if _disk_nearly_full(path):  # e.g. the shared-memory file (-shm) could not be extended
            return translate(apsw.FullError(str(exc)), path)
        return StoreError(f"I/O error on database {path}: {exc}; check the disk and file system holding it "
                          f"(free space, a removed or network volume)")
    return StoreError(f"database error on {path}: {exc}")


def _backup_failed(exc: apsw.Error, source: Path, target: Path) -> StoreError:
    """What to tell about an online backup of ``source`` into ``target`` that failed. apsw words an
    error of the destination with the other connection's message, "not an error" (found by QA), so
    the kind of error says it."""
    untouched = f"no backup was made and {source} is untouched"
    if isinstance(exc, apsw.FullError) or (isinstance(exc, apsw.IOError) and _disk_nearly_full(target)):
        return StoreError(f"the disk holding {target.parent} is full; {untouched}. Free some space there or "
                          f"choose another destination")
    if isinstance(exc, apsw.IOError | apsw.ReadOnlyError | apsw.PermissionsError | apsw.CantOpenError):
        return StoreError(f"cannot write the backup in {target.parent} (an I/O error: a full disk or quota, a "
                          f"file size limit, a read-only or removed volume); {untouched}. Check that folder or "
                          f"choose another destination")
    return StoreError(f"backup of {source} into {target.parent} failed ({type(exc).__name__}); {untouched}")


def holds_json_text(path: Path) -> bool:
    """Whether the file ``path`` starts (after a BOM and blank space) with a JSON object or array."""
    try:
        with path.open("rb") as file:
            head = file.read(64)
    except OSError:
        return False
    return head.removeprefix(b"\xef\xbb\xbf").lstrip()[:1] in (b"{", b"[")


def _disk_nearly_full(path: Path) -> bool:
    """Whether the file system holding ``path`` has less than 1 MiB left for this user."""
    try:
        stats = os.statvfs(path.parent)
    except OSError:
        return False
    return stats.f_bavail * stats.f_frsize < 1024 * 1024
