"""Odd database paths get a clear answer and are never modified (issue 13, item 6).

A folder, a path below a file, a dangling symbolic link, a FIFO or device, another program's
SQLite file: every command refuses with one sentence and exit status 1, and the path is left
byte-identical. Read-only inspection (stats, export, backup, healthcheck) of a database this user
can only read succeeds without creating or changing a file; those tests run the real command as
another user (root ignores file permissions), or as this user with chmod when not root.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from graph_memory import cli
from graph_memory.db import graph
from graph_memory.db.store import Store
from graph_memory.errors import StoreError
from graph_memory.logs import configure_logging
from graph_memory.models import Entity, Relation

SCRIPT = Path(sys.executable).with_name("graph-memory")
ROOT = os.geteuid() == 0
NOBODY = 65534


@pytest.fixture(autouse=True)
def _quiet_logs() -> Iterator[None]:
    yield
    configure_logging("warning", "console")


def commands(tmp_path: Path) -> list[list[str]]:
    legacy = tmp_path / "legacy.jsonl"
    legacy.write_text('{"type":"entity","name":"A","entityType":"t","observations":[]}\n', encoding="utf-8")
    return [["serve"], ["stats"], ["export"], ["backup", str(tmp_path / "copy.db")], ["healthcheck"],
            ["import", str(legacy)], ["migrate"], ["migrate", "--check"]]


def snapshot(folder: Path) -> dict[str, bytes | str]:
    """Every entry below ``folder``: file bytes, or what else it is."""
    found: dict[str, bytes | str] = {}
    for entry in sorted(folder.rglob("*")):
        mode = entry.lstat().st_mode
        key = str(entry.relative_to(folder))
        found[key] = (entry.read_bytes() if stat.S_ISREG(mode) else
                      f"link:{os.readlink(entry)}" if stat.S_ISLNK(mode) else f"mode:{stat.S_IFMT(mode)}")
    return found


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- paths that cannot be a database ------------------------------------------------------------


def _folder(base: Path) -> Path:
    (base / "data").mkdir()
    return base / "data"


def _below_a_file(base: Path) -> Path:
    (base / "notes.txt").write_text("my notes, not a folder\n")
    return base / "notes.txt" / "memory.db"


def _dangling_link(base: Path) -> Path:
    (base / "memory.db").symlink_to(base / "gone" / "memory.db")
    return base / "memory.db"


def _fifo(base: Path) -> Path:
    os.mkfifo(base / "pipe.db")
    return base / "pipe.db"


ODD = {"folder": (_folder, "is a folder; name a file such as {path}/memory.db"),
       "below a file": (_below_a_file, "is a file, not a folder"),
       "dangling symlink": (_dangling_link, "is a symbolic link to"),
       "fifo": (_fifo, "is a named pipe (FIFO), not a database file")}


@pytest.mark.parametrize("kind", list(ODD))
def test_every_command_refuses_an_odd_database_path_and_changes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str) -> None:
    place = tmp_path / "place"
    place.mkdir()
    make, expected = ODD[kind]
    path = make(place)
    before = snapshot(place)
    for argv in commands(tmp_path):
        code, out, err = run(capsys, "--database", str(path), *argv)
        assert code == cli.EXIT_ERROR, (argv, out, err)
        assert expected.format(path=path) in err, (argv, err)
        assert "MEMORY_FILE_PATH" in err and "Traceback" not in err and out == ""
        assert snapshot(place) == before, argv
    assert not (tmp_path / "copy.db").exists()


def test_a_device_is_refused_by_every_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for argv in commands(tmp_path):
        code, _, err = run(capsys, "--database", os.devnull, *argv)
        assert code == cli.EXIT_ERROR
        assert "is a character device, not a database file" in err


def test_store_open_refuses_a_folder_and_creates_nothing_in_it(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="is a folder; name a file such as"):
        Store.open(tmp_path)
    with pytest.raises(StoreError, match="is a folder"):
        Store.open_readonly(tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_folder_refusal_through_the_real_script_has_no_traceback(tmp_path: Path) -> None:
    done = subprocess.run([str(SCRIPT), "--database", str(tmp_path), "stats"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 1
    assert done.stderr.strip() == (f"graph-memory: error: {tmp_path} is a folder; name a file such as "
                                   f"{tmp_path}/memory.db in MEMORY_FILE_PATH (or --database). "
                                   f"Nothing was created in it.")


@pytest.mark.parametrize("command", [["serve"], ["stats"], ["migrate"]])
def test_a_legacy_path_that_is_a_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch, command: list[str]) -> None:
    # what `docker run -v ./memory.jsonl:/data/memory.jsonl` makes when the file did not exist
    (tmp_path / "memory.jsonl").mkdir()
    monkeypatch.setenv("MEMORY_FILE_PATH", str(tmp_path / "memory.jsonl"))
    code, _, err = run(capsys, *command)
    assert code == cli.EXIT_ERROR
    assert f"MEMORY_FILE_PATH {tmp_path / 'memory.jsonl'} is a folder" in err
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["memory.jsonl"]  # no memory.db beside it


# -- another program's SQLite file ---------------------------------------------------------------


def _foreign(path: Path, journal: str) -> None:
    conn = apsw.Connection(str(path))
    conn.execute(f"PRAGMA journal_mode = {journal}")
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT); INSERT INTO notes (body) VALUES ('mine')")
    conn.close()


@pytest.mark.parametrize("journal", ["delete", "wal"])
def test_another_programs_sqlite_file_is_refused_unmodified(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], journal: str) -> None:
    place = tmp_path / "place"
    place.mkdir()
    db = place / "app.db"
    _foreign(db, journal)
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    assert os.listdir(place) == ["app.db"]
    for argv in commands(tmp_path):
        code, out, err = run(capsys, "--database", str(db), *argv)
        assert code == cli.EXIT_ERROR, (argv, out, err)
        assert "is a SQLite database of another program (it holds notes" in err, (argv, err)
        assert "It was not modified." in err
        assert hashlib.sha256(db.read_bytes()).hexdigest() == digest, argv
        assert os.listdir(place) == ["app.db"], argv  # no -wal, -shm or -journal left behind
    header = db.read_bytes()[18:20]
    assert header == (b"\x02\x02" if journal == "wal" else b"\x01\x01")  # journal mode as it was
    with pytest.raises(StoreError, match="another program"):
        Store.open(db)
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest


@pytest.mark.parametrize("content", [b"", None])
def test_an_empty_sqlite_file_is_initialised(tmp_path: Path, content: bytes | None) -> None:
    db = tmp_path / "memory.db"
    if content is None:  # a SQLite file with a header and no tables
        conn = apsw.Connection(str(db))
        conn.execute("PRAGMA user_version = 7; VACUUM")
        conn.close()
        assert db.stat().st_size > 0
    else:
        db.write_bytes(content)
    store = Store.open(db)
    try:
        store.run_write(lambda c: graph.create_entities(c, [Entity("A", "t", [])]))
        assert [e.name for e in store.run_read(graph.read_graph).entities] == ["A"]
    finally:
        store.close()


# -- read-only inspection ------------------------------------------------------------------------


def _reader() -> tuple[list[str], dict[str, Any]]:
    """How to run a command as a user who can only read the test's files: as root, the user
    nobody (through setpriv with only CAP_DAC_READ_SEARCH when nobody cannot reach this Python,
    e.g. under a 0700 /root: it may read everything, and write only what nobody may); else this
    user (the files are chmod-ed read-only)."""
    if not ROOT:
        return [], {}
    try:
        subprocess.run([sys.executable, "-c", "pass"], user=NOBODY, group=NOBODY, extra_groups=[],
                       capture_output=True, check=True, cwd="/")
        return [], {"user": NOBODY, "group": NOBODY, "extra_groups": []}
    except (OSError, subprocess.CalledProcessError):
        pass
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("the user nobody cannot run this Python and setpriv is missing")
    return [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups",
            "--inh-caps=+dac_read_search", "--ambient-caps=+dac_read_search"], {}


@pytest.fixture
def shared() -> Iterator[Path]:
    """A folder the other user can traverse (pytest's tmp_path is private to its owner)."""
    folder = Path(tempfile.mkdtemp(prefix="graph-memory-readonly-"))
    folder.chmod(0o755)
    yield folder
    for entry in [folder, *folder.rglob("*")]:
        if not entry.is_symlink():
            entry.chmod(0o700 if entry.is_dir() else 0o600)
    shutil.rmtree(folder)


def _as_reader(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    prefix, kwargs = _reader()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env["HOME"] = str(cwd)
    return subprocess.run([*prefix, str(SCRIPT), *argv], capture_output=True, text=True, timeout=120, check=False,
                          cwd=cwd, env=env, **kwargs)


def _lock_down(folder: Path, *, folder_writable: bool = False) -> None:
    for entry in folder.iterdir():
        entry.chmod(0o444)
    folder.chmod(0o777 if folder_writable else 0o555)


def _seed(store: Store) -> None:
    store.run_write(lambda c: graph.create_entities(c, [
        Entity("Alice", "person", ["likes tea"]), Entity("Bob", "person", []), Entity("Lyon", "place", [])]))
    store.run_write(lambda c: graph.create_relations(c, [Relation("Alice", "Bob", "knows")]))


def _inspect_read_only(db: Path, out: Path) -> None:
    """stats, export, backup and healthcheck as the reader: each succeeds and sees the graph."""
    done = _as_reader(["--database", str(db), "stats", "--json"], out)
    assert done.returncode == 0, done.stderr
    stats = json.loads(done.stdout)
    assert (stats["entities"], stats["observations"], stats["relations"]) == (3, 1, 1)
    assert stats["pending_migrations"] == []
    done = _as_reader(["--database", str(db), "export"], out)
    assert done.returncode == 0, done.stderr
    assert [json.loads(line)["name"] for line in done.stdout.splitlines()[:3]] == ["Alice", "Bob", "Lyon"]
    done = _as_reader(["--database", str(db), "backup", str(out / "copy.db"), "--json"], out)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["entities"] == 3
    done = _as_reader(["--database", str(db), "healthcheck"], out)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"ok: {db} at schema version")


def _out(shared: Path) -> Path:
    out = shared / "out"
    out.mkdir()
    out.chmod(0o777)
    return out


@pytest.mark.parametrize("folder_writable", [False, True])
def test_read_only_commands_read_a_database_this_user_can_only_read(shared: Path, folder_writable: bool) -> None:
    data = shared / "data"
    data.mkdir()
    store = Store.open(data / "memory.db")
    _seed(store)
    store.close()
    assert os.listdir(data) == ["memory.db"]  # WAL mode, log checkpointed and removed
    _lock_down(data, folder_writable=folder_writable)
    before = snapshot(data)
    _inspect_read_only(data / "memory.db", _out(shared))
    assert snapshot(data) == before  # byte-identical, and no -wal/-shm created


def test_read_only_commands_read_committed_pages_still_in_the_wal(shared: Path) -> None:
    data = shared / "data"
    data.mkdir()
    writer = Store.open(data / "memory.db")
    try:
        writer.conn.execute("PRAGMA wal_autocheckpoint = 0")  # every commit stays in memory.db-wal
        _seed(writer)
        assert (data / "memory.db-wal").stat().st_size > 0
        _lock_down(data)
        before = snapshot(data)
        _inspect_read_only(data / "memory.db", _out(shared))
        assert snapshot(data) == before
    finally:
        writer.close()


def test_read_only_commands_read_a_copy_whose_wal_holds_pages_and_has_no_shm(shared: Path) -> None:
    data, copy = shared / "data", shared / "copy"
    data.mkdir()
    copy.mkdir()
    writer = Store.open(data / "memory.db")
    try:
        writer.conn.execute("PRAGMA wal_autocheckpoint = 0")
        _seed(writer)
        for name in ("memory.db", "memory.db-wal"):  # copied as a user might, without the -shm
            shutil.copyfile(data / name, copy / name)
    finally:
        writer.close()
    _lock_down(copy)
    before = snapshot(copy)
    _inspect_read_only(copy / "memory.db", _out(shared))
    assert snapshot(copy) == before


@pytest.mark.skipif(not ROOT, reason="needs files of two users: run as root")
def test_a_log_of_another_user_beside_the_database_is_named(shared: Path) -> None:
    """memory.db-wal and -shm left by graph-memory run as another user (root, say): the error said
    to check the file and folder permissions, both of which were fine (found by QA)."""
    data = shared / "data"
    data.mkdir()
    db = data / "memory.db"
    store = Store.open(db)
    _seed(store)
    store.conn.execute("PRAGMA wal_autocheckpoint = 0")
    store.run_write(lambda c: graph.create_entities(c, [Entity("Carol", "person", [])]))
    sides = [data / "memory.db-wal", data / "memory.db-shm"]
    copies = {side: side.read_bytes() for side in sides}
    store.close()
    for side, content in copies.items():   # what a crashed root server left (close removed its own)
        side.write_bytes(content)
        side.chmod(0o600)
    os.chown(db, NOBODY, NOBODY)
    os.chown(data, NOBODY, NOBODY)
    prefix, kwargs = _reader()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    requests = [{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
                {"jsonrpc": "2.0", "method": "notifications/initialized"},
                {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "create_entities", "arguments": {
                    "entities": [{"name": "Dan", "entityType": "person", "observations": []}]}}}]
    done = subprocess.run([*prefix, str(SCRIPT), "--database", str(db)], capture_output=True, text=True, timeout=120,
                          input="".join(json.dumps(r) + "\n" for r in requests), cwd=shared,
                          env={**env, "HOME": str(shared)}, **kwargs)
    said = done.stderr + done.stdout   # refused at the start, or the write refused
    assert "memory.db-wal and memory.db-shm beside it cannot be read and written by this user" in said, said
