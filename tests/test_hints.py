"""The commands messages suggest run this graph-memory when pasted into another shell."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from graph_memory import hints
from graph_memory.db.store import Store
from graph_memory.hints import graph_memory_command

COMMAND = Path(sys.executable).parent / "graph-memory"


@pytest.fixture(autouse=True)
def _fresh_program() -> Iterator[None]:
    hints.program.cache_clear()   # it is computed once per process: not from another test's PATH
    yield
    hints.program.cache_clear()   # nor a later test from this one's


def _paste(command: str, path: str, home: Path) -> subprocess.CompletedProcess[str]:
    """``command`` run by a shell whose PATH is ``path`` and no MEMORY_* variable."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    return subprocess.run(["/bin/sh", "-c", command], capture_output=True, text=True, timeout=60,
                          env={**env, "PATH": path, "HOME": str(home)})


def test_a_command_not_on_path_is_named_by_its_full_path_and_runs_from_any_shell(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A venv not activated (or an MCP client's own PATH): the bare `graph-memory` a message
    suggested was "command not found" in the user's shell (found by QA)."""
    db = tmp_path / "my memory.db"
    Store.open(db).close()
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    command = graph_memory_command("stats", database=db)
    assert shlex.split(command)[:2] == [str(COMMAND), "stats"]
    done = _paste(command, "/usr/bin:/bin", tmp_path)
    assert done.returncode == 0 and str(db) in done.stdout, done.stderr


def test_the_bare_name_when_path_finds_this_command_and_not_when_it_finds_another(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", f"{COMMAND.parent}{os.pathsep}/usr/bin:/bin")
    assert hints.program() == ("graph-memory",)
    other = tmp_path / "bin"
    other.mkdir()
    (other / "graph-memory").write_text("#!/bin/sh\nexit 7\n")
    (other / "graph-memory").chmod(0o755)
    hints.program.cache_clear()
    monkeypatch.setenv("PATH", f"{other}{os.pathsep}{COMMAND.parent}")
    assert hints.program() == (str(COMMAND),)   # not the other installation's


def test_without_an_installed_command_the_module_is_run_by_this_interpreter(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    python = tmp_path / "python3"
    python.symlink_to(sys.executable)
    monkeypatch.setattr(sys, "executable", str(python))
    assert hints.program() == (str(python), "-m", "graph_memory")
    assert graph_memory_command("stats", database=tmp_path / "m.db").startswith(f"{python} -m graph_memory stats ")
