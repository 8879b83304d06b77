"""Finding the reference server's memory files (``import --discover``), the first-start hint, and
what a relative database path means in logs and errors.

The reference server keeps ``memory.jsonl`` in its own package folder (under npx: npm's cache), so
the tests build that layout under a fake HOME and run the installed console script with it.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from graph_memory import cli
from graph_memory.discover import Place, find_reference_files, reference_places
from graph_memory.logs import configure_logging
from graph_memory.settings import NodePackagePlaces, Settings

from helpers import sample_path

SCRIPT = Path(sys.executable).with_name("graph-memory")
PACKAGE = "node_modules/@modelcontextprotocol/server-memory"
# Variables npm, nvm and Windows use to say where packages live: a test names its own places.
NODE_VARIABLES = {"npm_config_cache", "npm_config_prefix", "nvm_dir", "localappdata", "appdata"}


@pytest.fixture(autouse=True)
def _quiet_logs(monkeypatch: pytest.MonkeyPatch) -> Any:
    for key in list(os.environ):
        if key.lower() in NODE_VARIABLES:
            monkeypatch.delenv(key)
    yield
    configure_logging("warning", "console")


def npx_package(home: Path, digest: str = "c98ccc168155bafa") -> Path:
    """The folder npx installs the reference server in (as npx 11 lays it out), with its code."""
    package = home / ".npm" / "_npx" / digest / PACKAGE
    (package / "dist").mkdir(parents=True)
    (package / "package.json").write_text('{"name": "@modelcontextprotocol/server-memory", "version": "2026.8.31"}')
    (package / "dist" / "index.js").write_text("#!/usr/bin/env node\nexport {};\n")
    return package


def script_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_") and k.lower() not in NODE_VARIABLES}
    env.update(HOME=str(home), MEMORY_LOG_FORMAT="json")
    return env


def script(*argv: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SCRIPT), *argv], capture_output=True, text=True, env=env, cwd=cwd,
                          stdin=subprocess.DEVNULL, timeout=120)


def counts_by_type(path: Path) -> tuple[int, int]:
    kinds = [json.loads(line)["type"] for line in path.read_bytes().split(b"\n") if line.strip()]
    return kinds.count("entity"), kinds.count("relation")


def outside(home: Path) -> list[Place]:
    """The places of this machine that are not under ``home`` (system-wide installs)."""
    return [p for p in reference_places(home=home) if not p.pattern.startswith(str(home))]


def log_events(stderr: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


# -- import --discover ----------------------------------------------------------------------------


def test_discover_lists_an_npx_cache_file_with_the_import_command_that_works(tmp_path: Path) -> None:
    home = tmp_path / "a home"   # a space: the printed command must quote it
    memory = npx_package(home) / "dist" / "memory.jsonl"
    memory.write_bytes(sample_path().read_bytes())
    database = tmp_path / "new db" / "memory.db"
    env = script_env(home)

    text = script("import", "--discover", "--database", str(database), env=env)
    assert text.returncode == 0, text.stderr
    command = f"graph-memory import {shlex.quote(str(memory))} --database {shlex.quote(str(database))}"
    assert str(memory) in text.stdout and command in text.stdout
    assert "npx cache, version 2026.8.31" in text.stdout
    entities, relations = counts_by_type(memory)
    assert f"{entities} entities, {relations} relations" in text.stdout

    listed = script("import", "--discover", "--json", "--database", str(database), env=env)
    assert listed.returncode == 0, listed.stderr
    report = json.loads(listed.stdout)
    assert report["database"] == str(database)
    (found,) = [f for f in report["files"] if f["path"] == str(memory)]
    assert found["import_command"] == command
    assert (found["entities"], found["relations"], found["size_bytes"]) == (entities, relations,
                                                                             memory.stat().st_size)
    assert found["place"] == "npx cache" and found["note"] is None

    argv = shlex.split(found["import_command"])
    assert argv[0] == "graph-memory"
    imported = script(*argv[1:], "--json", env=env)
    assert imported.returncode == 0, imported.stderr
    assert json.loads(imported.stdout)["database"] == str(database)
    stats = json.loads(script("stats", "--json", "--database", str(database), env=env).stdout)
    assert stats["entities"] > 0 and stats["relations"] > 0
    assert memory.read_bytes() == sample_path().read_bytes()   # only read


def test_discover_finding_nothing_says_where_it_looked_and_exits_0(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    if find_reference_files(outside(home)):
        pytest.skip("this machine has the reference server's memory in a system-wide place")
    env = script_env(home)
    database = tmp_path / "memory.db"

    text = script("import", "--discover", "--database", str(database), env=env)
    assert text.returncode == 0, text.stderr
    assert "No memory file of the reference server" in text.stdout
    assert f"{home}/.npm/_npx/*/{PACKAGE}/dist" in text.stdout and "/app/dist" in text.stdout
    assert f"graph-memory import FILE --database {database}" in text.stdout
    report = json.loads(script("import", "--discover", "--json", "--database", str(database), env=env).stdout)
    assert report["files"] == [] and {"label": "Docker volume", "pattern": "/app/dist"} in report["searched"]
    assert not database.exists()   # looking creates nothing


@pytest.mark.parametrize("argv", [
    ["import"],                                 # neither a file nor --discover
    ["import", "memory.jsonl", "--discover"],   # both
    ["import", "--discover", "--dry-run"],      # --discover only lists
])
def test_import_needs_exactly_one_of_a_file_and_discover(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv)
    assert exit_.value.code == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert "name the FILE to import, or pass --discover" in err and "--discover [--json]" in err


def test_only_reference_memory_files_are_listed_with_subfolders_and_the_package_folder(tmp_path: Path) -> None:
    package = npx_package(tmp_path)
    dist = package / "dist"
    (dist / "memory.jsonl").write_text('{"type":"entity","name":"A","entityType":"t","observations":[]}\n'
                                       '{"type":"relation","from":"A","to":"B","relationType":"r"}')
    (dist / "data").mkdir()   # MEMORY_FILE_PATH=data/work.jsonl; other writers' key order
    (dist / "data" / "work.JSONL").write_text('{"name":"B","type":"entity","entityType":"t","observations":[]}\n')
    (package / "memory.jsonl").write_text('{"type":"relation","from":"A","to":"B","relationType":"r"}\n')
    (dist / "settings.json").write_text('{"type": "config"}\n')       # JSON, not memory
    (dist / "empty.jsonl").write_text("")                             # nothing to import
    (dist / "memory.jsonl.0123abcd.tmp").write_text('{"type":"entity"}')  # the reference's temporary file
    (dist / "node_modules").mkdir()
    (dist / "node_modules" / "memory.jsonl").write_text('{"type":"entity","name":"X"}\n')

    found = find_reference_files([Place("npx cache", str(tmp_path / ".npm/_npx/*" / PACKAGE / "dist"))])
    by_path = {f.path: f for f in found}
    assert set(by_path) == {dist / "memory.jsonl", dist / "data" / "work.JSONL", package / "memory.jsonl"}
    assert (by_path[dist / "memory.jsonl"].entities, by_path[dist / "memory.jsonl"].relations) == (1, 1)
    assert by_path[dist / "memory.jsonl"].lines == 2
    assert by_path[dist / "data" / "work.JSONL"].entities == 1
    assert all(f.package_version == "2026.8.31" for f in found)


def test_a_memory_json_says_whether_the_reference_server_still_reads_it(tmp_path: Path) -> None:
    line = '{"type":"entity","name":"A","entityType":"t","observations":[]}\n'
    alone, both = npx_package(tmp_path, "aaaa") / "dist", npx_package(tmp_path, "bbbb") / "dist"
    (alone / "memory.json").write_text(line)
    (both / "memory.json").write_text(line)
    (both / "memory.jsonl").write_text(line)

    found = {f.path: f.note for f in find_reference_files(reference_places(NodePackagePlaces(), home=tmp_path))}
    assert "renames it to memory.jsonl" in (found[alone / "memory.json"] or "")
    assert "no longer reads" in (found[both / "memory.json"] or "")
    assert found[both / "memory.jsonl"] is None


def test_newest_file_comes_first_and_a_file_reached_twice_is_listed_once(tmp_path: Path) -> None:
    line = '{"type":"entity","name":"A","entityType":"t","observations":[]}\n'
    old = npx_package(tmp_path, "old") / "dist" / "memory.jsonl"
    new = npx_package(tmp_path, "new") / "dist" / "memory.jsonl"
    old.write_text(line)
    new.write_text(line)
    os.utime(old, (1_700_000_000, 1_700_000_000))
    (tmp_path / ".npm-global" / "lib").mkdir(parents=True)
    (tmp_path / ".npm-global" / "lib" / "node_modules").symlink_to(new.parents[3])   # a symlinked prefix

    found = find_reference_files(reference_places(NodePackagePlaces(), home=tmp_path))
    mine = [f.path for f in found if str(f.path).startswith(str(tmp_path))]
    assert mine == [new, old]


def test_npm_and_windows_variables_move_the_places(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("NPM_CONFIG_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("npm_config_prefix", str(tmp_path / "prefix"))
    monkeypatch.setenv("NVM_DIR", str(tmp_path / "nvm"))
    monkeypatch.setenv("LOCALAPPDATA", str(tmp_path / "Local"))
    monkeypatch.setenv("APPDATA", str(tmp_path / "Roaming"))
    patterns = [p.pattern for p in reference_places(home=tmp_path / "home")]
    for expected in (f"{tmp_path}/cache/_npx/*/{PACKAGE}/dist",
                     f"{tmp_path}/Local/npm-cache/_npx/*/{PACKAGE}/dist",
                     f"{tmp_path}/prefix/lib/{PACKAGE}/dist",
                     f"{tmp_path}/nvm/versions/node/*/lib/{PACKAGE}/dist",
                     f"{tmp_path}/Roaming/npm/{PACKAGE}/dist",
                     f"{tmp_path}/home/.npm/_npx/*/{PACKAGE}/dist"):
        assert expected in patterns


# -- the first-start hint and relative paths ------------------------------------------------------


def test_first_start_on_an_empty_database_names_the_reference_file_and_a_relative_path(tmp_path: Path) -> None:
    home = tmp_path / "home"
    memory = npx_package(home) / "dist" / "memory.jsonl"
    memory.write_bytes(sample_path().read_bytes())
    work = tmp_path / "work"
    work.mkdir()
    env = {**script_env(home), "MEMORY_FILE_PATH": "data/memory.db"}

    first = script(env=env, cwd=work)
    assert first.returncode == 0, first.stderr
    events = {e["event"]: e for e in log_events(first.stderr)}
    relative = events["database_path_relative"]
    assert relative["database"] == str(work / "data" / "memory.db") and relative["level"] == "info"
    assert f"MEMORY_FILE_PATH was the relative path 'data/memory.db', resolved against the working directory " \
           f"{work}" == relative["note"]
    hint = events["reference_memory_found"]
    assert hint["level"] == "info" and hint["path"] == str(memory)
    assert f"graph-memory import --discover --database {work / 'data' / 'memory.db'}" in hint["hint"]
    assert [e["event"] for e in log_events(first.stderr)].count("reference_memory_found") == 1

    imported = script("import", str(memory), env=env, cwd=work)
    assert imported.returncode == 0, imported.stderr
    again = script(env=env, cwd=work)
    assert "reference_memory_found" not in {e["event"] for e in log_events(again.stderr)}


def test_an_absolute_path_logs_no_relative_note(tmp_path: Path) -> None:
    done = script(env={**script_env(tmp_path), "MEMORY_FILE_PATH": str(tmp_path / "memory.db")})
    assert done.returncode == 0, done.stderr
    assert "database_path_relative" not in {e["event"] for e in log_events(done.stderr)}


@pytest.mark.parametrize("given_by", ["MEMORY_FILE_PATH", "--database"])
def test_an_error_about_a_relative_database_path_says_it_was_relative(
        given_by: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "notes.db").write_text("not a database")
    argv = ["stats"]
    if given_by == "--database":
        argv += ["--database", "notes.db"]
    else:
        monkeypatch.setenv("MEMORY_FILE_PATH", "notes.db")
    assert cli.main(argv) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert f"{tmp_path / 'notes.db'} is not a SQLite database" in err
    # On a line of its own, so that a command at the end of the message can be copied whole.
    assert (f"\ngraph-memory: note: {given_by} was the relative path 'notes.db', resolved against the working "
            f"directory {tmp_path}\n") in err
    assert (tmp_path / "notes.db").read_text() == "not a database"


def test_a_missing_relative_database_says_it_was_relative(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMORY_FILE_PATH", "sub/memory.jsonl")   # a legacy name: the database is sub/memory.db
    assert cli.main(["export"]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert f"no database at {tmp_path / 'sub' / 'memory.db'}" in err
    assert "MEMORY_FILE_PATH was the relative path 'sub/memory.jsonl'" in err


def test_errors_about_other_paths_or_absolute_ones_carry_no_note(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "bad.jsonl").mkdir()   # unreadable as a file: the message names only the import file
    assert cli.main(["import", str(tmp_path / "bad.jsonl"), "--database", "memory.db"]) == cli.EXIT_ERROR
    assert "relative path" not in error_line(capsys)        # about the import file, not the database
    assert cli.main(["stats", "--database", str(tmp_path / "none.db")]) == cli.EXIT_ERROR
    assert "relative path" not in error_line(capsys)        # absolute


def error_line(capsys: pytest.CaptureFixture[str]) -> str:
    (line,) = [x for x in capsys.readouterr().err.splitlines() if x.startswith("graph-memory: error:")]
    return line


@pytest.mark.parametrize(("given", "relative"), [
    ("memory.db", True), ("./a/b.db", True), ("../up.jsonl", True),
    ("/abs/memory.db", False), ("~/memory.db", False),
])
def test_settings_keep_whether_the_file_path_was_relative(given: str, relative: bool, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMORY_FILE_PATH", given)
    settings = Settings()
    assert settings.file_path.is_absolute()
    note = settings.relative_path_note()
    assert (note == f"MEMORY_FILE_PATH was the relative path {given!r}, resolved against the working directory "
                    f"{tmp_path}") if relative else note is None
