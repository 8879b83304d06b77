"""Commands suggested to the user, ready to paste into a shell.

Every message that tells the user to run ``graph-memory …`` builds the command here, so each one
names the database it is about (``--database``, absolute) and the command as a shell finds it
(:func:`program`): pasted into a shell without the MCP client's environment (no
``MEMORY_FILE_PATH``, another ``PATH``), it still runs this graph-memory on that database, not
on the default one.
"""

from __future__ import annotations

import functools
import os
import shlex
import shutil
import sys
from pathlib import Path


@functools.cache
def program() -> tuple[str, ...]:
    """The words that run this graph-memory from a shell: ``graph-memory`` when that name on
    ``PATH`` is this installation's command; else that command's absolute path (a venv not
    activated, or an MCP client's own ``PATH``: the bare name failed with "command not found",
    found by QA); else this interpreter with ``-m graph_memory`` (no command installed)."""
    name = "graph-memory.exe" if os.name == "nt" else "graph-memory"
    beside = Path(sys.executable).parent / name   # where pip put this installation's command
    if not beside.is_file():
        return (sys.executable, "-m", "graph_memory")
    found = shutil.which("graph-memory")
    try:
        if found is not None and os.path.samefile(found, beside):
            return ("graph-memory",)
    except OSError:
        pass
    return (str(beside),)


def graph_memory_command(*args: str | os.PathLike[str], database: str | os.PathLike[str] | None) -> str:
    """``graph-memory ARGS… --database DB`` as one shell command line (``graph-memory`` as
    :func:`program` gives it).

    A PostgreSQL database (``database`` a ``postgresql://`` URL, its password masked) is named by
    ``MEMORY_DATABASE_URL`` instead (:func:`postgres_command`).

    Args:
        args: the command and its arguments (placeholders such as ``DEST`` are fine); paths are
            used as given, so pass absolute ones.
        database: the database the command is about; made absolute. None only where no path is
            known: the placeholder ``DB`` then stands for it.

    Raises:
        ValueError: ``database`` ends in ``.jsonl``/``.json`` (such a ``--database`` names a
            legacy file, and the command would act on its sibling ``.db``).

    Returns:
        The words joined by spaces, each quoted with :func:`shlex.quote` where the shell needs it.
    """
    if isinstance(database, str) and database.startswith(("postgresql://", "postgres://")):
        return postgres_command(*args, url=database)
    if database is not None and Path(database).suffix.lower() in (".jsonl", ".json"):
        # --database x.jsonl names a legacy file whose database is x.db: never the file meant.
        raise ValueError(f"{database} cannot be named as a database with --database")
    target = "DB" if database is None else str(Path(database).absolute())
    words = [*program(), *(os.fspath(a) for a in args), "--database", target]
    return shlex.join(words)


def shell_quote(path: str | os.PathLike[str]) -> str:
    """``path`` quoted for a POSIX shell (for commands of other programs, e.g. ``sqlite3``)."""
    return shlex.quote(os.fspath(path))


def postgres_command(*args: str | os.PathLike[str], url: str) -> str:
    """``MEMORY_DATABASE_URL=URL graph-memory ARGS…`` for the PostgreSQL database ``url``: the URL
    without its (masked) password, which libpq then takes from PGPASSWORD or ~/.pgpass (or set
    MEMORY_DATABASE_PASSWORD_FILE)."""
    plain = url.replace(":***@", "@", 1)
    return f"MEMORY_DATABASE_URL={shlex.quote(plain)} " + shlex.join([*program(), *(os.fspath(a) for a in args)])
