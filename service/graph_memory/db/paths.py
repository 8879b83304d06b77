"""Checks of the paths a user names (``MEMORY_FILE_PATH``, ``--database``) before anything opens them.

Each check only looks (``stat``, ``readlink``): it never creates, opens or changes a file, so an
odd path gets a sentence saying what is there and what to name instead, and is left as it was.
Nothing is opened for reading either: opening a FIFO would block, a device may have side effects.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from graph_memory.errors import StoreError
from graph_memory.hints import graph_memory_command

_SETTING = "MEMORY_FILE_PATH (or --database)"
_KINDS = ((stat.S_ISFIFO, "named pipe (FIFO)"), (stat.S_ISCHR, "character device"),
          (stat.S_ISBLK, "block device"), (stat.S_ISSOCK, "socket"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "special file")


def _file_on_the_way(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` when it is not a folder (a file where a folder
    should be), else None."""
    for ancestor in path.parents:
        try:
            mode = ancestor.stat().st_mode
        except FileNotFoundError:
            continue
        except OSError:
            return None
        return None if stat.S_ISDIR(mode) else ancestor
    return None


def _stat_or_refuse(path: Path, what: str) -> os.stat_result | None:
    """``path.stat()`` (following links); None when nothing is there and nothing stands in the
    way of creating it.

    Raises:
        StoreError: a dangling symbolic link, a file where a folder of the path should be, a
            folder on the way this user cannot enter, a symbolic-link loop.
    """
    try:
        return path.stat()
    except (FileNotFoundError, NotADirectoryError):
        pass
    except PermissionError as exc:
        raise StoreError(f"cannot reach the {what} {path}: a folder on the way is not accessible to this user "
                         f"({exc.strerror}); fix its permissions or set {_SETTING} to another file") from None
    except OSError as exc:  # e.g. ELOOP: symbolic links pointing at each other
        raise StoreError(f"cannot use {path} as the {what}: {exc.strerror or exc}; "
                         f"set {_SETTING} to a regular file") from None
    if path.is_symlink():
        raise StoreError(f"{path} is a symbolic link to {os.readlink(path)}, which does not exist; point the link "
                         f"at an existing file, or set {_SETTING} to the file itself. Nothing was created.")
    blocker = _file_on_the_way(path)
    if blocker is not None:
        raise StoreError(f"{blocker} is a file, not a folder, so the {what} {path} cannot be there; set "
                         f"{_SETTING} to a path inside a folder, such as {blocker.parent / 'memory.db'}. "
                         f"{blocker} was not modified.")
    return None


def check_database_path(path: Path, *, must_exist: bool = False) -> None:
    """Refuse a database path that cannot be a database file, before anything opens it.

    Args:
        path: the absolute database path.
        must_exist: also refuse a missing file (the read-only commands never create one).

    Raises:
        StoreError: the path is a folder, a named pipe, device or socket, a dangling symbolic
            link, or lies below a file; or it is missing and ``must_exist``. Nothing is changed.
    """
    found = _stat_or_refuse(path, "database")
    if found is None:
        if must_exist:
            from graph_memory.db.store import build_in_progress  # (store imports this module)

            if (building := build_in_progress(path)) is not None:   # not "the first start creates it" (QA)
                raise StoreError(f"no database at {path} yet: it is being built now, as {building.name} beside it "
                                 f"(a first start importing its legacy file, or an import); run this again once "
                                 f"that is done")
            raise StoreError(f"no database at {path} yet: the server's first start creates it (and imports "
                             f"the memory.jsonl that MEMORY_FILE_PATH names, or that lies beside it), as does "
                             f"{graph_memory_command('import', 'FILE', database=path)}; if your database is "
                             f"elsewhere, set {_SETTING} to that file")
        return
    if stat.S_ISDIR(found.st_mode):
        raise StoreError(f"{path} is a folder; name a file such as {path / 'memory.db'} in {_SETTING}. "
                         f"Nothing was created in it.")
    if not stat.S_ISREG(found.st_mode):
        raise StoreError(f"{path} is a {_kind(found.st_mode)}, not a database file; set {_SETTING} to a regular "
                         f"file, such as memory.db in a folder of yours. It was not opened.")


def check_legacy_path(path: Path) -> None:
    """Refuse a legacy memory path (``MEMORY_FILE_PATH`` ending in ``.jsonl``/``.json``) that is
    not a file: a missing one is fine (nothing to import), anything else but a regular file is not.

    Raises:
        StoreError: the path is a folder (as a container engine creates for a bind-mounted file
            that did not exist), a named pipe, device or socket, or a dangling symbolic link.
    """
    found = _stat_or_refuse(path, "memory file")
    if found is None or stat.S_ISREG(found.st_mode):
        return
    if stat.S_ISDIR(found.st_mode):
        raise StoreError(
            f"MEMORY_FILE_PATH {path} is a folder, not the reference server's memory file; set it to the file "
            f"itself (such as {path / 'memory.jsonl'} if it is in there) or to a database file such as "
            f"{path.with_suffix('.db')}. (Docker creates a folder when a bind-mounted file did not exist.) "
            f"Nothing was created in it.")
    raise StoreError(f"MEMORY_FILE_PATH {path} is a {_kind(found.st_mode)}, not a memory file; set it to a "
                     f"regular .jsonl file or to a database file. It was not opened.")


def check_configured_paths(file_path: Path, database_path: Path) -> None:
    """Refuse odd configured paths for every command, before any of them opens or creates a file:
    ``file_path`` as a legacy file when it names one, and ``database_path``.

    Raises:
        StoreError: see :func:`check_legacy_path` and :func:`check_database_path`.
    """
    if file_path != database_path:
        check_legacy_path(file_path)
    check_database_path(database_path)


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


def fsync_file(path: Path) -> None:
    """Make the content of the file ``path`` durable (before it is renamed or linked into place)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def link_new(finished: Path, target: Path) -> None:
    """Give the finished file ``finished`` the name ``target`` (and drop its own name), never
    replacing a file that is there: a hard link fails when the name exists. Where the file
    system has no hard links, it is renamed after a check that the name is free.

    Raises:
        FileExistsError: ``target`` exists (``finished`` is left as it was).
        OSError: the link or rename failed otherwise (e.g. ``finished`` is gone).
    """
    try:
        os.link(finished, target)
    except (FileExistsError, FileNotFoundError):
        raise
    except OSError:  # no hard links on this file system
        if target.exists():
            raise FileExistsError(errno.EEXIST, "File exists", str(target)) from None
        os.replace(finished, target)
        return
    finished.unlink()


def side_files(path: Path) -> tuple[Path, Path, Path]:
    """The files SQLite keeps beside the database file ``path`` (``-wal``, ``-shm``, ``-journal``:
    its log, the log's shared index, its rollback journal), whether they exist or not."""
    return (path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm"),
            path.with_name(path.name + "-journal"))
