"""Environment faults: the database folder not writable, the disk full, the file corrupt or not
SQLite, a database newer than the code, another process holding the write lock.

Each must give a clear startup error (exit status 1, one ``graph-memory: error:`` line on stderr,
nothing on stdout) or a clean tool error, naming the path and what to do — and the file on disk
must not be overwritten (its bytes are compared).

These tests run as root in CI's container, where permission bits do not stop anything: read-only
folders come from a read-only tmpfs mount (or ``chattr +i``), the full disk from a 1–2 MiB tmpfs.
Where mounting is not permitted they skip with the reason; as a normal user, ``chmod`` is used.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from graph_memory.db.store import Store

from .conftest import RawServer, integrity_problems, server_command, server_env, start_failure

ROOT = os.geteuid() == 0


def _make_db(path: Path, entities: int = 3) -> Path:
    from graph_memory.db import graph
    from graph_memory.models import Entity

    store = Store.open(path)
    store.run_write(lambda conn: graph.create_entities(conn, [Entity(f"e{i}", "t", [f"fact {i} " + "x" * 100])
                                                             for i in range(entities)]))
    store.close()  # checkpoints: everything is in the main file
    return path


def _assert_refused(result: subprocess.CompletedProcess[str], *needles: str, served: bool = True) -> str:
    """Exit status 1 and exactly one ``graph-memory: error:`` line on stderr that contains every
    needle; a server (``served``; a command: nothing on stdout) answered its client
    (:func:`start_failure`) with the same message in the initialize result's instructions and as
    read_graph's tool error. Returns the line."""
    assert result.returncode == 1, (result.returncode, result.stdout[:500], result.stderr[-2000:])
    lines = [line for line in result.stderr.splitlines() if line.startswith("graph-memory: error:")]
    assert len(lines) == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    if not served:
        assert result.stdout == ""
        return lines[0]
    said = lines[0].removeprefix("graph-memory: error: ")
    replies = [json.loads(line) for line in result.stdout.splitlines()]
    assert [reply["id"] for reply in replies] == [1, 2], result.stdout[:2000]
    assert said in replies[0]["result"]["instructions"]
    call = replies[1]["result"]
    assert call["isError"] is True and "structuredContent" not in call
    assert said in call["content"][0]["text"] and "restart this MCP server" in call["content"][0]["text"]
    return lines[0]


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Any]:
    """``tmpfs(size="1m", ro=False) -> Path``: a fresh tmpfs mount, unmounted at teardown;
    skips the test where mounting is not permitted."""
    mounts: list[Path] = []

    def mount(size: str = "1m", ro: bool = False) -> Path:
        target = tmp_path / f"tmpfs{len(mounts)}"
        target.mkdir()
        options = f"size={size},mode=1777" + (",ro" if ro else "")
        result = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)],
                                capture_output=True, text=True, check=False)
        if result.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here ({result.stderr.strip() or result.returncode}); "
                        f"this test needs root or CAP_SYS_ADMIN")
        mounts.append(target)
        return target

    yield mount
    for target in reversed(mounts):
        subprocess.run(["umount", "-l", str(target)], capture_output=True, check=False)


def remount(target: Path, mode: str) -> None:
    subprocess.run(["mount", "-o", f"remount,{mode}", str(target)], check=True, capture_output=True)


# -- folder and file not writable -----------------------------------------------------------------


def test_database_folder_is_a_regular_file(tmp_path: Path) -> None:
    blocker = tmp_path / "notes.txt"
    blocker.write_bytes(b"my notes, not a folder\n")
    line = _assert_refused(start_failure(blocker / "memory.db"), str(blocker), "MEMORY_FILE_PATH")
    assert "folder" in line
    assert blocker.read_bytes() == b"my notes, not a folder\n"


def _import_failure(db: Path, file: Path) -> subprocess.CompletedProcess[str]:
    """``graph-memory import FILE`` into ``db`` (a new database: built beside its name)."""
    return subprocess.run([*server_command(), "--database", str(db), "import", str(file)], env=server_env(db),
                          capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("how", ["start", "import"])
def test_database_folder_not_writable(tmp_path: Path, tmpfs: Any, how: str) -> None:
    if ROOT:
        folder = tmpfs("64k", ro=True)  # root ignores permission bits, not a read-only mount
    else:
        folder = tmp_path / "locked"
        folder.mkdir()
        folder.chmod(0o555)
    file = tmp_path / "memory.jsonl"
    file.write_text('{"type":"entity","name":"A","entityType":"t","observations":["x"]}\n')
    try:
        db = folder / "memory.db"
        result = start_failure(db) if how == "start" else _import_failure(db, file)
        line = _assert_refused(result, str(folder), "MEMORY_FILE_PATH", served=how == "start")
        assert "not writable" in line
        assert os.listdir(folder) == []
    finally:
        if not ROOT:
            folder.chmod(0o755)


def test_existing_database_on_a_read_only_file_system(tmpfs: Any) -> None:
    if not ROOT:
        pytest.skip("remounting read-only needs root; covered by the chmod variant below")
    folder = tmpfs("2m")
    db = _make_db(folder / "memory.db")
    before = db.read_bytes()
    remount(folder, "ro")
    try:
        line = _assert_refused(start_failure(db), str(db))
        assert "permissions" in line or "cannot be written" in line
    finally:
        remount(folder, "rw")
    assert db.read_bytes() == before


def test_database_file_not_writable(tmp_path: Path) -> None:
    db = _make_db(tmp_path / "memory.db")
    before = db.read_bytes()
    if ROOT:
        locked = subprocess.run(["chattr", "+i", str(db)], capture_output=True, text=True, check=False)
        if locked.returncode != 0:
            pytest.skip(f"chattr +i is not supported here ({locked.stderr.strip()}); root ignores chmod")
    else:
        db.chmod(0o444)
    try:
        line = _assert_refused(start_failure(db), str(db))
        assert "permissions" in line
    finally:
        if ROOT:
            subprocess.run(["chattr", "-i", str(db)], check=True)
        else:
            db.chmod(0o644)
    assert db.read_bytes() == before


# -- disk full ------------------------------------------------------------------------------------


def _fill(folder: Path, leave: int) -> Path:
    """Fill the file system with a filler file until ``leave`` bytes remain (or it is full)."""
    stats = os.statvfs(folder)
    free = stats.f_bavail * stats.f_frsize
    filler = folder / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        os.write(fd, b"\0" * max(0, free - leave))
        while leave == 0:
            os.write(fd, b"\0" * 4096)
    except OSError:
        pass
    finally:
        os.close(fd)
    return filler


def test_disk_full_while_writing_then_space_freed(tmpfs: Any, spawn: Any) -> None:
    folder = tmpfs("2m")
    db = folder / "memory.db"
    server: RawServer = spawn(db)
    server.initialize()
    server.call_ok("create_entities", {"entities": [{"name": "before", "entityType": "t", "observations": ["x"]}]})
    filler = _fill(folder, leave=300_000)
    acked, refused = ["before"], None
    for i in range(2000):
        result = server.call("create_entities", {"entities": [
            {"name": f"e{i}", "entityType": "t", "observations": [f"{i} " + "y" * 3000, f"{i} second"]}]})
        if result.get("isError"):
            refused = result["content"][0]["text"]
            break
        acked.append(f"e{i}")
    assert refused is not None, "the disk never filled up"
    assert "full" in refused and str(db) in refused and "Free some space" in refused, refused
    # Reads keep working on a full disk; the refused call left nothing behind.
    names = [e["name"] for e in server.read_graph()["entities"]]
    assert names == acked
    assert not server.call("search_nodes", {"query": "second"}).get("isError")
    filler.unlink()
    server.call_ok("create_entities", {"entities": [{"name": "after", "entityType": "t", "observations": ["z"]}]})
    assert server.close() == 0
    server = spawn(db)
    server.initialize()
    assert [e["name"] for e in server.read_graph()["entities"]] == [*acked, "after"]
    assert server.close() == 0
    assert integrity_problems(db) == []


def test_disk_full_at_start(tmpfs: Any) -> None:
    folder = tmpfs("1m")
    existing = _make_db(folder / "existing.db", entities=1)
    before = existing.read_bytes()
    _fill(folder, leave=0)
    _assert_refused(start_failure(folder / "memory.db"), str(folder / "memory.db"), "full", "Free some space")
    _assert_refused(start_failure(existing), str(existing), "full", "Free some space")
    assert existing.read_bytes() == before


# -- not SQLite, corrupt, empty -------------------------------------------------------------------


def _truncated_db(path: Path) -> bytes:
    _make_db(path, entities=300)
    data = path.read_bytes()
    path.unlink()
    return data[: len(data) // 2]


CONTENTS = {
    "text": lambda p: b"Remember: buy milk.\nThis is not a database.\n",
    "upstream-jsonl": lambda p: b'{"type":"entity","name":"a","entityType":"t","observations":["x"]}\n',
    "binary-garbage": lambda p: bytes((i * 37 + 11) % 256 for i in range(50_000)),
    "sqlite-header-only": lambda p: b"SQLite format 3\x00" + b"\xff" * 200,
    "truncated-database": _truncated_db,
}


@pytest.mark.parametrize("kind", sorted(CONTENTS))
def test_not_a_database_or_damaged_header_is_refused_untouched(tmp_path: Path, kind: str) -> None:
    db = tmp_path / "memory.db"
    content = CONTENTS[kind](db)
    db.write_bytes(content)
    line = _assert_refused(start_failure(db), str(db))
    if kind == "upstream-jsonl":   # the reference server's file under a database's name: how to use it
        assert "holds JSON text, not a database" in line and "MEMORY_FILE_PATH" in line, line
    else:
        assert "not a SQLite database" in line or "corrupt" in line, line
        assert "MEMORY_FILE_PATH" in line or "backup" in line, line
    assert db.read_bytes() == content
    assert sorted(os.listdir(tmp_path)) == ["memory.db"], "the refused start left files behind"


def test_directory_in_place_of_the_database(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    db.mkdir()
    (db / "keep.txt").write_text("mine")
    _assert_refused(start_failure(db), str(db))
    assert os.listdir(db) == ["keep.txt"]


def test_empty_file_becomes_a_new_database(spawn: Any, tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    db.write_bytes(b"")
    server: RawServer = spawn(db)
    server.initialize()
    server.call_ok("create_entities", {"entities": [{"name": "a", "entityType": "t", "observations": []}]})
    assert server.close() == 0
    assert integrity_problems(db) == []


def test_corrupt_pages_give_tool_errors_and_no_more_writes(spawn: Any, tmp_path: Path) -> None:
    """Damage inside the file (not the header) is found by the first call that reads it: that call
    and every later one fails with the path and what to do, and nothing more is written."""
    db = _make_db(tmp_path / "memory.db", entities=2000)
    data = bytearray(db.read_bytes())
    for offset in range(4096 * 20, 4096 * 60):
        data[offset] = (data[offset] * 7 + 13) & 0xFF
    db.write_bytes(bytes(data))
    server: RawServer = spawn(db)
    server.initialize()
    result = server.call("read_graph", {})
    assert result["isError"]
    text = result["content"][0]["text"]
    assert "corrupt" in text and str(db) in text and "backup" in text, text
    answer = server.wait(server.send("resources/read", {"uri": "memory://knowledge-graph"}))
    assert answer["error"]["code"] == -32603 and "corrupt" in answer["error"]["message"], answer
    write = server.call("create_entities", {"entities": [{"name": "new", "entityType": "t", "observations": []}]})
    assert write["isError"] and "corrupt" in write["content"][0]["text"], write
    assert "nothing of this call was written" in write["content"][0]["text"]
    assert server.close() == 0
    assert db.read_bytes() == bytes(data)
    assert "Traceback" not in server.stderr_text()


# -- newer than the code ---------------------------------------------------------------------------


@pytest.mark.parametrize("change", ["newer-migration", "edited-migration"])
def test_database_from_a_newer_or_different_version_is_refused_untouched(tmp_path: Path, change: str) -> None:
    db = _make_db(tmp_path / "memory.db")
    conn = apsw.Connection(str(db))
    if change == "newer-migration":
        conn.execute("INSERT INTO schema_migrations (id, name, checksum) VALUES (9999, '9999_future', 'abc')")
    else:
        conn.execute("UPDATE schema_migrations SET checksum = 'edited' WHERE id = 1")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    before = db.read_bytes()
    line = _assert_refused(start_failure(db), str(db), "Nothing was changed")
    if change == "newer-migration":
        assert "newer graph-memory" in line and "9999" in line and "upgrade" in line, line
    else:
        assert "differs" in line, line
    assert db.read_bytes() == before


# -- another process holding the write lock --------------------------------------------------------


def test_write_lock_held_long_by_another_process(spawn: Any, tmp_path: Path) -> None:
    db = _make_db(tmp_path / "memory.db")
    hog = apsw.Connection(str(db))
    hog.execute("BEGIN IMMEDIATE")
    try:
        server: RawServer = spawn(db, env=server_env(db, MEMORY_BUSY_TIMEOUT_MS="100"))
        server.initialize()
        # Reads are not blocked by a writer (WAL).
        assert [e["name"] for e in server.read_graph()["entities"]] == ["e0", "e1", "e2"]
        started = time.monotonic()
        result = server.call("create_entities", {"entities": [{"name": "x", "entityType": "t", "observations": []}]})
        elapsed = time.monotonic() - started
        assert result["isError"], result
        text = result["content"][0]["text"]
        assert "locked by another process" in text and str(db) in text and "try again" in text, text
        assert elapsed < 15, f"the caller waited {elapsed:.1f}s"
        found = server.call_ok("search_nodes", {"query": "fact"})
        assert [e["name"] for e in found["entities"]] == ["e0", "e1", "e2"]
    finally:
        hog.execute("ROLLBACK")
        hog.close()
    server.call_ok("create_entities", {"entities": [{"name": "x", "entityType": "t", "observations": []}]})
    assert [e["name"] for e in server.read_graph()["entities"]] == ["e0", "e1", "e2", "x"]
    assert server.close() == 0
    # The search under the lock could not index the waiting documents; the server did on its way out.
    conn = apsw.Connection(str(db))
    try:
        assert conn.execute("SELECT count(*) FROM search_pending").fetchall() == [(0,)]
    finally:
        conn.close()


def test_a_write_under_a_held_lock_waits_one_busy_timeout_in_all(tmp_path: Path) -> None:
    """The busy timeout is how long a write waits in all: each retry of the transaction waited a
    whole timeout again, six in all (61 s with the default 10 s, past the official clients' 60 s
    request timeout, so the caller never saw the 'locked' message: found by QA)."""
    from graph_memory.errors import StoreError

    db = _make_db(tmp_path / "memory.db")
    store = Store.open(db, busy_timeout_ms=3000)
    hog = apsw.Connection(str(db))
    hog.execute("BEGIN IMMEDIATE")
    try:
        started = time.monotonic()
        with pytest.raises(StoreError, match="locked by another process"):
            store.run_write(lambda conn: conn.execute("UPDATE search_sync SET enabled = enabled"))
        elapsed = time.monotonic() - started
        assert 3.0 <= elapsed < 4.5, f"waited {elapsed:.1f}s for a 3 s busy timeout"
        assert store.conn.execute("PRAGMA busy_timeout").fetchall() == [(3000,)]   # given back
    finally:
        hog.execute("ROLLBACK")
        hog.close()
    store.run_write(lambda conn: conn.execute("UPDATE search_sync SET enabled = enabled"))
    store.close()


HOG = """
import sys, apsw
conn = apsw.Connection(sys.argv[1])
conn.execute("PRAGMA locking_mode = EXCLUSIVE")
conn.execute("BEGIN IMMEDIATE; UPDATE search_sync SET enabled = 1; COMMIT")  # takes the lock for good
print("locked", flush=True)
sys.stdin.read()
"""


def test_exclusive_lock_at_start(tmp_path: Path) -> None:
    """Another program holds the file in exclusive locking mode: the server cannot even read
    it, and says so after the busy timeout (instead of hanging or overwriting anything)."""
    import sys

    db = _make_db(tmp_path / "memory.db")
    hog = subprocess.Popen([sys.executable, "-c", HOG, str(db)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           text=True)
    try:
        assert hog.stdout is not None and hog.stdout.readline().strip() == "locked"
        before = db.read_bytes()
        line = _assert_refused(start_failure(db, env=server_env(db, MEMORY_BUSY_TIMEOUT_MS="200")), str(db),
                               "locked by another process")
        assert "MEMORY_BUSY_TIMEOUT_MS" in line
        assert db.read_bytes() == before
    finally:
        assert hog.stdin is not None
        hog.stdin.close()
        hog.wait(30)


def test_unknown_path_characters_and_relative_paths(spawn: Any, tmp_path: Path, monkeypatch: Any) -> None:
    """Odd but valid folder names work (spaces, unicode, a leading dash); parents are created."""
    db = tmp_path / "my memory ✓" / "-deep" / "nested" / "memory.db"
    server: RawServer = spawn(db)
    server.initialize()
    server.call_ok("create_entities", {"entities": [{"name": "a", "entityType": "t", "observations": []}]})
    assert server.close() == 0
    assert db.exists() and integrity_problems(db) == []
    shutil.rmtree(tmp_path / "my memory ✓")


def test_busy_reads_are_retried_then_reported_cleanly(tmp_path: Path) -> None:
    """SQLITE_BUSY on a read (WAL recovery or an exclusive lock elsewhere) is retried, and when it
    persists it is a StoreError naming the file, not an internal error."""
    from graph_memory.errors import StoreError

    store = Store.open(tmp_path / "memory.db")
    attempts = []

    def flaky(conn: Any) -> str:
        attempts.append(1)
        if len(attempts) < 3:
            raise apsw.BusyError("database is locked")
        return "read"

    def stuck(conn: Any) -> str:
        raise apsw.BusyError("database is locked")

    try:
        assert store.run_read(flaky) == "read" and len(attempts) == 3
        with pytest.raises(StoreError, match="locked by another process") as caught:
            store.run_read(stuck)
        assert str(store.path) in str(caught.value)
        assert not store.conn.in_transaction
    finally:
        store.close()
