"""Copying and inspecting a database file: ``graph-memory backup`` and ``graph-memory stats``.

A backup uses SQLite's online backup API (through apsw), so it is a consistent snapshot even while
a server writes: when another connection changes the source between two steps, SQLite restarts the
copy, and after a few restarts the rest is copied in one step (one read snapshot; in WAL mode that
blocks no writer). The copy is written to a temporary file beside the destination, verified
(``PRAGMA integrity_check`` and every FTS5 index's own integrity check) and only then renamed into
place; an existing destination is replaced only when asked (``force``). Nothing is written to the
source: it is opened read-only (:meth:`~graph_memory.db.store.Store.open_readonly`), so a user who can
only read the database (and its folder) can back it up, and no file beside it is created or changed.
"""

from __future__ import annotations

import contextlib
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import apsw

from graph_memory.db.paths import check_database_path, fsync_directory, fsync_file, link_new, side_files
from graph_memory.db.store import Connection, Store, graph_version, holds_json_text, set_orphans_aside
from graph_memory.errors import OutputError, StoreError
from graph_memory.hints import graph_memory_command, shell_quote

# Pages copied per backup step (4 MiB at the default page size) between chances for writers.
PAGES_PER_STEP = 1024


@dataclass(slots=True)
class GraphCounts:
    """Row counts of a graph database; ``*_by_type`` are ordered by count, then type."""

    entities: int = 0
    observations: int = 0
    relations: int = 0
    dangling_relations: int = 0       # relations with an endpoint that is not an entity
    entities_by_type: dict[str, int] = field(default_factory=dict)
    relations_by_type: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "entities": self.entities,
            "entities_by_type": self.entities_by_type,
            "observations": self.observations,
            "relations": self.relations,
            "relations_by_type": self.relations_by_type,
            "dangling_relations": self.dangling_relations,
        }


def graph_counts(conn: Connection) -> GraphCounts:
    """Count the graph's rows (run it inside one read transaction for a consistent picture).
    A database without the graph tables (not migrated yet) counts as empty."""
    if conn.execute("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'entities'").fetchone() is None:
        return GraphCounts()

    def by_type(table: str, column: str) -> dict[str, int]:
        return {kind: n for kind, n in conn.execute(
            f"SELECT {column}, count(*) AS n FROM {table} GROUP BY {column} ORDER BY n DESC, {column}")}

    entities = by_type("entities", "entity_type")
    relations = by_type("relations", "relation_type")
    return GraphCounts(
        entities=sum(entities.values()),
        observations=_scalar(conn, "SELECT count(*) FROM observations"),
        relations=sum(relations.values()),
        dangling_relations=_scalar(
            conn, "SELECT count(*) FROM relations r "
            "WHERE NOT EXISTS (SELECT 1 FROM entities WHERE name = r.from_name) "
            "OR NOT EXISTS (SELECT 1 FROM entities WHERE name = r.to_name)"),
        entities_by_type=entities,
        relations_by_type=relations,
    )


def _scalar(conn: Connection, sql: str) -> int:
    """The integer a one-row, one-column query returns (a count, a max)."""
    row = conn.execute(sql).fetchone()
    assert row is not None, sql
    return int(cast(int, row[0]))


def schema_version(conn: Connection) -> int:
    """The highest applied migration id (0 when none), read without judging the history."""
    if conn.execute("SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = 'schema_migrations'"
                    ).fetchone() is None:
        return 0
    return _scalar(conn, "SELECT coalesce(max(id), 0) FROM schema_migrations")


def database_files(path: Path) -> dict[str, int]:
    """Sizes in bytes of the database file and its write-ahead log, those that exist."""
    sizes: dict[str, int] = {}
    for candidate in (path, path.with_name(path.name + "-wal")):
        try:
            sizes[candidate.name] = candidate.stat().st_size
        except FileNotFoundError:
            continue
    return sizes


@dataclass(slots=True)
class BackupResult:
    """A verified backup: where it is, how big, and what it holds."""

    path: Path
    source: Path
    bytes: int
    pages: int
    restarts: int
    schema_version: int
    counts: GraphCounts

    def to_dict(self) -> dict[str, Any]:
        return {"path": str(self.path), "source": str(self.source), "bytes": self.bytes, "pages": self.pages,
                "schema_version": self.schema_version, "integrity": "ok", **self.counts.to_dict()}


def destination(dest: str | os.PathLike[str], source: Path, now: datetime | None = None,
                name: str | None = None) -> Path:
    """The backup file for ``dest``: ``dest`` itself, or ``<name>-YYYYmmdd-HHMMSS.db`` (local
    time; ``name`` defaults to the source's stem) inside it when ``dest`` is a directory or ends
    with a path separator.

    A time-stamped name already taken (a second backup within the same second) gets the first free
    suffix ``_2``, ``_3``, … (``memory-20261201-150101_2.db``): a generated name never points at
    an existing backup, with or without ``force``. ``_`` sorts after ``.``, so a listing by name
    stays in creation order."""
    target = Path(os.fspath(dest)).expanduser().absolute()
    if names_a_folder(dest):
        stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
        stamped = f"{name or source.stem}-{stamp}"
        candidate = target / f"{stamped}.db"
        suffix = 1
        while os.path.lexists(candidate):
            suffix += 1
            candidate = target / f"{stamped}_{suffix}.db"
        return candidate
    return target


def names_a_folder(dest: str | os.PathLike[str]) -> bool:
    """True when ``dest`` is a directory or ends with a path separator: the backup then gets a
    time-stamped name of its own inside it (:func:`destination`)."""
    text = os.fspath(dest)
    return text.endswith(("/", os.sep)) or Path(text).expanduser().is_dir()


def backup_database(source: str | os.PathLike[str], dest: str | os.PathLike[str], *, force: bool = False,
                    busy_timeout_ms: int = 10_000, pages_per_step: int = PAGES_PER_STEP,
                    progress: Callable[[int, int], None] | None = None, name: str | None = None) -> BackupResult:
    """Copy the database ``source`` to ``dest`` (see :func:`destination`) and verify the copy.

    Args:
        force: replace an existing destination file (never the source itself).
        name: the generated file name's part before its time stamp when ``dest`` is a folder.
        progress: called with ``(pages copied, pages in total)`` after each step.

    Raises:
        StoreError: the source is missing, not SQLite or unreadable; the copy failed its
            integrity check (it is deleted; the destination is left as it was).
        OutputError: the destination exists (without ``force``), is the source, or cannot be written.
    """
    src_path = Path(source).expanduser().absolute()
    check_database_path(src_path, must_exist=True)
    generated = names_a_folder(dest)
    target = destination(dest, src_path, name=name)
    if target.exists():
        if target.is_dir() or os.path.samefile(target, src_path):
            raise OutputError(f"{target} is {'a directory' if target.is_dir() else 'the database itself'}; "
                             f"choose another destination")
        if not target.is_file():   # with --force the copy was renamed over it: /dev/null itself, as root
            raise OutputError(f"{target} is not a regular file (a device or named pipe); a backup is a database "
                              f"file: name a file or a folder")
        if not force:
            raise OutputError(f"{target} already exists; choose another name, or pass --force to replace it")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        os.close(fd)
    except OSError as exc:
        raise OutputError(f"cannot write in {target.parent}: {exc.strerror or exc}") from exc
    tmp = Path(tmp_name)
    try:
        pages, restarts = _copy(src_path, tmp, busy_timeout_ms, pages_per_step, progress)
        version, counts = _verify(tmp, target, src_path)
        os.chmod(tmp, src_path.stat().st_mode & 0o777)
        fsync_file(tmp)
        if generated:
            target = _publish_new(tmp, target)
        else:
            _publish(tmp, target, force)
    except BaseException:
        for leftover in (tmp, *side_files(tmp)):
            leftover.unlink(missing_ok=True)
        raise
    fsync_directory(target.parent)
    return BackupResult(path=target, source=src_path, bytes=target.stat().st_size, pages=pages,
                        restarts=restarts, schema_version=version, counts=counts)


def _copy(src_path: Path, tmp: Path, busy_timeout_ms: int, pages_per_step: int,
          progress: Callable[[int, int], None] | None) -> tuple[int, int]:
    """Run the online backup into ``tmp`` (:meth:`Store.backup_to`); returns ``(pages, restarts)``."""
    source = Store.open_readonly(src_path, busy_timeout_ms=busy_timeout_ms, check_history=False)
    try:
        return source.backup_to(tmp, pages_per_step=pages_per_step, progress=progress)
    finally:
        source.close()


def _verify(tmp: Path, target: Path, source: Path) -> tuple[int, GraphCounts]:
    """Integrity-check the copy of ``source``; returns its schema version and counts."""
    copy = Store.open_as_is(tmp)
    try:
        try:
            problems = copy.integrity_problems()
        except apsw.Error as exc:   # a copy too damaged to be checked (a corrupt source's pages)
            problems = [str(exc)]
        if problems:
            save = graph_memory_command("export", "-o", "memory-export.jsonl", "--with-weights", database=source)
            raise StoreError(f"the copy for {target} failed its integrity check ({_first_lines(problems)}); "
                             f"it was deleted and {target} left as it was. The source may be damaged: check it "
                             f"with: sqlite3 {shell_quote(source)} 'PRAGMA integrity_check'; save what it holds "
                             f"with: {save}"
                             f" (then import that file into a new database)")
        return copy.run_read(lambda conn: (schema_version(conn), graph_counts(conn)))
    finally:
        copy.close()


def _first_lines(problems: list[str], lines: int = 3) -> str:
    """The first few lines of an integrity check's findings (a damaged file has thousands)."""
    found = [line for problem in problems for line in problem.splitlines() if line.strip()]
    more = f"; … {len(found) - lines} more" if len(found) > lines else ""
    return "; ".join(found[:lines]) + more


def _publish_new(tmp: Path, target: Path) -> Path:
    """Put the verified copy at ``target`` or, when another backup took that generated name
    meanwhile (two backups in one second: cron and a manual one), at the next free ``_N`` name;
    never replaces a file. Returns the name used."""
    base = re.sub(r"_\d+$", "", target.stem)
    number = int(target.stem[len(base) + 1:] or 1)
    candidate = target
    while True:
        try:
            try:
                os.link(tmp, candidate)
            except FileExistsError:
                raise
            except OSError:  # no hard links on this file system: reserve the name, then rename
                os.close(os.open(candidate, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                os.replace(tmp, candidate)
                return candidate
        except FileExistsError:
            number += 1
            candidate = target.with_name(f"{base}_{number}{target.suffix}")
            continue
        tmp.unlink()
        return candidate


def _publish(tmp: Path, target: Path, force: bool) -> None:
    """Rename the verified copy into place; without ``force`` never replace a file that appeared
    meanwhile (a hard link fails when the name exists)."""
    if force:
        os.replace(tmp, target)
        return
    try:
        link_new(tmp, target)
    except FileExistsError:
        raise OutputError(f"{target} already exists; choose another name, or pass --force to replace it") from None


@dataclass(slots=True)
class RestoreResult:
    """A restore: the database that now holds the backup's memory (``path``), the backup read
    (``source``), where what the database held before was saved (``saved``; None when there was
    no database), and what it holds now."""

    path: Path
    source: Path
    saved: Path | None
    schema_version: int
    counts: GraphCounts

    def to_dict(self) -> dict[str, Any]:
        """The ``restore --json`` object."""
        return {"path": str(self.path), "source": str(self.source),
                "saved": None if self.saved is None else str(self.saved),
                "schema_version": self.schema_version, **self.counts.to_dict()}


def restore_database(backup: str | os.PathLike[str], database: Path, *, busy_timeout_ms: int = 10_000) -> RestoreResult:
    """Make ``database`` hold the memory of the file ``backup`` (a ``graph-memory backup``, or any
    graph-memory database), losing nothing.

    1. A verified copy of ``backup`` is made beside the database (:func:`backup_database`: the
       backup itself is only read), refused when it holds no memory, migrated to this version (a
       backup of a newer version is refused) and given the database's page size.
    2. The database must not be open in another process (a running server, view or sqlite3
       shell): what such a process wrote between the save and the restore would be lost (found by
       QA), so the restore is refused until they are stopped.
    3. What ``database`` holds now is saved first, verified, as
       ``<stem>-before-restore-YYYYmmdd-HHMMSS.db`` beside it.
    4. The copy is written into ``database`` through SQLite (its online backup API, one
       transaction): copying the file over it would let its write-ahead log (``-wal``) be replayed
       onto the backup. Without a database there, the copy takes its name, a log left there by a
       deleted database set aside (``*.orphaned-TIME``).

    Raises:
        StoreError: the backup is missing, holds no memory, is not a graph-memory database, is
            damaged or of a newer version; the database is open elsewhere, could not be saved
            first (damaged: the message says how to set it aside) or stayed locked. Nothing was
            changed (a copy saved before a failure is removed again).
        OutputError: ``backup`` is the database itself.
    """
    source = Path(os.fspath(backup)).expanduser().absolute()
    if not source.exists():
        raise StoreError(f"no backup at {source}; name a file made by the backup command")
    check_database_path(source, must_exist=True)
    database = database.expanduser().absolute()
    if database.is_symlink() and database.exists():   # its -wal and -shm are beside the file it names
        database = Path(os.path.realpath(database))
    exists = database.exists()
    if exists and os.path.samefile(source, database):
        raise OutputError(f"{source} is the database itself; name a backup of it")
    if exists and open_elsewhere(database):
        raise _in_use(database)
    database.parent.mkdir(parents=True, exist_ok=True)
    _remove_dead_stagings(database)
    staged = database.with_name(f".{database.name}.restoring-{os.getpid()}.db")
    saved: Path | None = None
    try:
        _stage(source, staged, database, exists, busy_timeout_ms)
        if not exists:
            set_orphans_aside(database)
            link_new(staged, database)
            fsync_directory(database.parent)
        else:
            saved = _replace_saving_first(database, staged, busy_timeout_ms)
    finally:
        for leftover in (staged, *side_files(staged)):
            leftover.unlink(missing_ok=True)
    try:
        check = Store.open_readonly(database, busy_timeout_ms=busy_timeout_ms, check_history=False)
        try:
            version, counts = check.run_read(lambda conn: (schema_version(conn), graph_counts(conn)))
        finally:
            check.close()
    except StoreError as exc:   # restored all the same: say so, and where the old memory is
        kept = "" if saved is None else f" (what it held before is saved in {saved})"
        raise StoreError(f"the backup {source} was restored into {database}{kept}, but reading it back to count "
                         f"it failed: {exc}") from exc
    return RestoreResult(path=database, source=source, saved=saved, schema_version=version, counts=counts)


def _replace_saving_first(database: Path, staged: Path, busy_timeout_ms: int) -> Path:
    """Save what ``database`` holds, then write ``staged`` into it; returns the saved copy.

    A write another process commits after the save would be lost by the replace: the save is made
    again when the graph changed since (``graph_version``), checked right before the replace takes
    the write lock, and the restore is refused when the database got opened elsewhere meanwhile.
    When the replace does not happen the saved copy is removed: the database is as it was."""
    for _ in range(_SAVE_ATTEMPTS):
        if open_elsewhere(database):
            raise _in_use(database)
        saved = _save_before_restore(database, busy_timeout_ms)
        replaced = False
        try:
            with contextlib.closing(Store.open_as_is(saved)) as copy:
                at_save = copy.run_read(graph_version)
            live = Store.open(database, busy_timeout_ms=busy_timeout_ms)
            try:
                if live.run_read(graph_version) == at_save:
                    live.replace_with(staged)
                    replaced = True
                    return saved
            finally:
                live.close()
        finally:
            if not replaced:   # failed, or written to since the save (then saved again)
                for leftover in (saved, *side_files(saved)):
                    leftover.unlink(missing_ok=True)
    raise StoreError(f"the database {database} kept changing while it was being saved before the restore (another "
                     f"program writing to it?); stop it, then run the restore again. Nothing was changed.")


_SAVE_ATTEMPTS = 3


def _in_use(database: Path) -> StoreError:
    return StoreError(f"the database {database} is open in another process (a running graph-memory server or "
                      f"view, a sqlite3 shell); stop it, then run the restore again: what it wrote during the "
                      f"restore would be lost. Nothing was changed.")


def _remove_dead_stagings(database: Path) -> None:
    """Remove the staged copies (``.NAME.restoring-PID.db``, up to the backup's size) that restores
    of ``database`` killed by SIGKILL left behind: those whose process is gone; best effort."""
    import glob

    for staged in database.parent.glob(f".{glob.escape(database.name)}.restoring-*.db"):
        pid = staged.name.removesuffix(".db").rpartition("-")[2]
        if not pid.isdigit() or _running(int(pid)):
            continue
        for leftover in (staged, *side_files(staged)):
            try:
                leftover.unlink(missing_ok=True)
            except OSError:
                continue


def _running(pid: int) -> bool:
    """Whether a process ``pid`` exists (one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:   # another user's
        return True
    return True


def _stage(source: Path, staged: Path, database: Path, exists: bool, busy_timeout_ms: int) -> None:
    """The verified copy of the backup ``source`` at ``staged``, holding a memory, migrated to this
    version, with the page size of ``database`` when it ``exists`` (SQLite copies pages only
    between equal sizes).

    Raises:
        StoreError: about ``source`` (the staging file is never named: it is removed).
    """
    if holds_json_text(source):
        raise StoreError(f"the backup {source} cannot be restored: it is a memory file in the reference server's "
                         f"JSONL format, not a backup; merge it in with: "
                         f"{graph_memory_command('import', source, database=database)}. Nothing was changed.")
    try:
        backup_database(source, staged, force=True, busy_timeout_ms=busy_timeout_ms)
        copy = Store.open_as_is(staged)
        try:
            version = copy.run_read(schema_version)
        finally:
            copy.close()
        if version == 0:
            raise StoreError(f"{source} holds no memory (no graph-memory tables: an empty file?); name a file made "
                             f"by the backup command. Nothing was changed.")
        Store.open(staged, busy_timeout_ms=busy_timeout_ms).close()   # migrated to this version
        if exists:
            _match_page_size(staged, database)
    except (StoreError, OutputError) as exc:
        # What is wrong with the backup, without the advice meant for a database (to restore into
        # the backup, or set MEMORY_FILE_PATH: found by QA)
        reason = str(exc).replace(str(staged), str(source)).split(";")[0]
        if isinstance(exc.__cause__, apsw.FullError | apsw.IOError):   # writing the copy beside the database
            reason = f"there is no room for its copy beside the database ({reason}); free some space"
        raise StoreError(f"the backup {source} cannot be restored: {reason}. Nothing was changed.") from exc


def _match_page_size(staged: Path, database: Path) -> None:
    """Rewrite ``staged`` with the page size of ``database`` when they differ (a backup made
    elsewhere, or a database rebuilt with another size)."""
    with contextlib.closing(apsw.Connection(str(database), flags=apsw.SQLITE_OPEN_READONLY)) as conn:
        wanted = cast(int, conn.execute("PRAGMA page_size").fetchall()[0][0])
    with contextlib.closing(apsw.Connection(str(staged))) as conn:
        if conn.execute("PRAGMA page_size").fetchall()[0][0] == wanted:
            return
        conn.execute("PRAGMA journal_mode = DELETE")   # a page size changes only outside WAL
        conn.execute(f"PRAGMA page_size = {wanted:d}")
        conn.execute("VACUUM")
        conn.execute("PRAGMA journal_mode = WAL")


def open_elsewhere(database: Path) -> bool:
    """Whether another process has the WAL database ``database`` open: every SQLite connection
    holds a shared lock on one byte of its ``-shm`` file while it is open (the "DMS" byte, offset
    128 in SQLite's Unix VFS). False where that cannot be told (no ``-shm``, no fcntl locks, the
    file not writable by this user): the restore then goes on as before.

    Call it before this process opens the database: POSIX locks do not conflict within a process,
    and closing the file here drops this process's locks on it."""
    shm = database.with_name(database.name + "-shm")
    try:
        import fcntl
    except ImportError:   # Windows
        return False
    try:
        fd = os.open(shm, os.O_RDWR)
    except OSError:
        return False
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, _SHM_DMS_BYTE, os.SEEK_SET)
    except OSError:
        return True
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, _SHM_DMS_BYTE, os.SEEK_SET)
        return False
    finally:
        os.close(fd)


# The byte of a WAL database's -shm file on which each open connection holds a shared lock
# (UNIX_SHM_DMS in SQLite's os_unix.c: 120 + SQLITE_SHM_NLOCK).
_SHM_DMS_BYTE = 128


def _save_before_restore(database: Path, busy_timeout_ms: int) -> Path:
    """A verified backup of what ``database`` holds, beside it, before a restore replaces it:
    ``<stem>-before-restore-YYYYmmdd-HHMMSS.db`` (``_2``… when taken, as backups are named)."""
    try:
        return backup_database(database, database.parent, busy_timeout_ms=busy_timeout_ms,
                               name=f"{database.stem}-before-restore").path
    except StoreError as exc:
        wal, shm, _ = side_files(database)
        raise StoreError(f"what {database} holds now could not be saved before the restore ({exc}); nothing was "
                         f"changed. If that database is damaged: stop every program using it, move it and its "
                         f"{wal.name} and {shm.name} files aside, then run the restore again") from exc
