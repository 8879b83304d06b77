"""The migration runner: fresh, re-open, edited, newer, and a failing migration."""

from __future__ import annotations

from pathlib import Path

import apsw
import pytest

from graph_memory.db import migrations
from graph_memory.db.store import Store
from graph_memory.errors import MigrationError, StoreError


def ledger(path: Path) -> list[tuple[int, str, str]]:
    conn = apsw.Connection(str(path))
    try:
        return list(conn.execute("SELECT id, name, checksum FROM schema_migrations ORDER BY id"))
    finally:
        conn.close()


def file_state(path: Path) -> tuple[bytes, bytes]:
    wal = path.with_name(path.name + "-wal")
    return path.read_bytes(), wal.read_bytes() if wal.exists() else b""


def test_fresh_database_gets_every_migration_recorded_with_checksum(db_path: Path) -> None:
    Store.open(db_path).close()
    known = migrations.load_migrations()
    assert ledger(db_path) == [(m.id, m.name, m.checksum) for m in known]
    assert known[0].name == "0001_initial"
    conn = apsw.Connection(str(db_path))
    assert conn.execute("PRAGMA user_version").fetchone()[0] == known[-1].id
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    conn.close()


def test_reopening_is_a_no_op(db_path: Path) -> None:
    Store.open(db_path).close()
    before = ledger(db_path)
    store = Store.open(db_path)
    assert migrations.migrate(store.conn, str(db_path)) == []
    store.close()
    assert ledger(db_path) == before


def test_edited_migration_is_refused_and_nothing_changes(db_path: Path) -> None:
    Store.open(db_path).close()
    conn = apsw.Connection(str(db_path))
    conn.execute("UPDATE schema_migrations SET checksum = 'feedface' WHERE id = 1")
    conn.close()
    before = file_state(db_path)
    with pytest.raises(MigrationError, match="0001_initial differs from the one applied") as err:
        Store.open(db_path)
    assert str(db_path) in str(err.value)
    assert file_state(db_path) == before


def test_newer_database_is_refused_and_nothing_changes(db_path: Path) -> None:
    Store.open(db_path).close()
    conn = apsw.Connection(str(db_path))
    conn.execute("INSERT INTO schema_migrations (id, name, checksum) VALUES (9999, '9999_future', 'x')")
    conn.close()
    before = file_state(db_path)
    with pytest.raises(MigrationError, match="newer graph-memory") as err:
        Store.open(db_path)
    assert "9999" in str(err.value) and "upgrade graph-memory" in str(err.value)
    assert file_state(db_path) == before


def test_status_reports_pending_without_applying(tmp_path: Path) -> None:
    path = tmp_path / "plain.db"
    conn = apsw.Connection(str(path))
    state = migrations.status(conn, str(path))
    assert state.version == 0
    assert [m.name for m in state.pending] == [m.name for m in migrations.load_migrations()]
    assert conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0] == 0
    conn.close()


def test_failing_migration_rolls_back_its_own_transaction(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    Store.open(db_path).close()
    good = migrations.load_migrations()
    broken = migrations.Migration(len(good) + 1, f"{len(good) + 1:04d}_broken",
                                  "CREATE TABLE half_done (x); SELECT no_such_function();", "c")
    monkeypatch.setattr(migrations, "load_migrations", lambda: [*good, broken])
    conn = apsw.Connection(str(db_path))
    with pytest.raises(MigrationError, match="_broken failed"):
        migrations.migrate(conn, str(db_path))
    assert conn.execute("SELECT count(*) FROM sqlite_schema WHERE name = 'half_done'").fetchone()[0] == 0
    assert [row[0] for row in conn.execute("SELECT id FROM schema_migrations")] == [m.id for m in good]
    conn.close()


def test_migration_files_ship_inside_the_package() -> None:
    from importlib import resources

    folder = resources.files("graph_memory.db").joinpath("migrations")
    assert folder.joinpath("0001_initial.sql").is_file()


def test_not_a_database_is_refused_without_touching_it(db_path: Path) -> None:
    db_path.write_bytes(b"PK\x03\x04 a zip file, say" * 200)
    before = db_path.read_bytes()
    with pytest.raises(StoreError, match="is not a SQLite database"):
        Store.open(db_path)
    assert db_path.read_bytes() == before


@pytest.mark.parametrize("name", ["memory", "memory.txt", "memory.db", "memory.ndjson"])
def test_a_reference_memory_file_at_the_database_path_says_how_to_use_it(tmp_path: Path, name: str) -> None:
    """The reference server takes MEMORY_FILE_PATH as it is, whatever its name; ours read a file
    not named .jsonl/.json as a database and only said it was none (found by QA)."""
    path = tmp_path / name
    path.write_bytes(b"\xef\xbb\xbf" + b'{"type":"entity","name":"x","entityType":"y","observations":[]}\n' * 200)
    before = path.read_bytes()
    with pytest.raises(StoreError) as refused:
        Store.open(path)
    message = str(refused.value)
    assert f"{path} holds JSON text, not a database" in message
    assert f"rename it to {tmp_path / 'memory.jsonl'} and set MEMORY_FILE_PATH to that" in message
    importing = f"graph-memory import {path} --database {tmp_path / 'memory.db'}"
    assert (importing in message) == (name != "memory.db"), message   # never into the file itself
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == [name]


def test_an_older_sqlite3_shell_can_read_the_database(db_path: Path) -> None:
    """The schema parses on SQLite before 3.44 (no aggregate ORDER BY), so the system sqlite3 of
    an older distribution can inspect and back up the file."""
    import shutil
    import subprocess

    shell = shutil.which("sqlite3")
    if shell is None:
        pytest.skip("no sqlite3 shell on this machine")
    store = Store.open(db_path)
    from graph_memory.db import graph
    from graph_memory.models import Entity

    store.run_write(lambda conn: graph.create_entities(conn, [Entity("Ada", "person", ["wrote notes"])]))
    store.close()
    out = subprocess.run([shell, str(db_path), "SELECT name FROM entities; PRAGMA integrity_check;"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["Ada", "ok"]


def test_no_migration_uses_aggregate_order_by() -> None:
    import re

    latest: dict[str, str] = {}
    for migration in migrations.load_migrations():
        for name, body in re.findall(r"CREATE TRIGGER (\w+)(.*?)END;", migration.sql, flags=re.S):
            latest[name] = body
    offenders = [n for n, body in latest.items() if re.search(r"group_concat\([^()]*ORDER BY", body)]
    assert offenders == []


def test_new_database_files_are_private_to_their_owner(db_path: Path) -> None:
    import stat

    store = Store.open(db_path)
    store.conn.execute("CREATE TABLE IF NOT EXISTS scratch (x)")  # makes SQLite create -wal and -shm
    for suffix in ("", "-wal", "-shm"):
        mode = stat.S_IMODE(db_path.with_name(db_path.name + suffix).stat().st_mode)
        assert mode == 0o600, (suffix, oct(mode))
    store.close()


def test_a_new_database_is_created_in_one_transaction_or_not_at_all(db_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    good = migrations.load_migrations()
    broken = migrations.Migration(len(good) + 1, f"{len(good) + 1:04d}_broken", "SELECT no_such_function();", "c")
    monkeypatch.setattr(migrations, "load_migrations", lambda: [*good, broken])
    conn = apsw.Connection(str(db_path))
    with pytest.raises(MigrationError, match="_broken failed"):
        migrations.migrate(conn, str(db_path))
    assert conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0] == 0  # not half created
    conn.close()


def test_only_a_new_database_owes_a_first_start_import(db_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = Store.open(db_path)
    assert store.conn.execute("SELECT count(*) FROM sqlite_temp_schema").fetchone()[0] == 0  # context dropped
    store.close()
    conn = apsw.Connection(str(db_path))
    assert conn.execute("SELECT action FROM legacy_first_start").fetchall() == [("import",)]
    assert conn.execute("SELECT count(*) FROM legacy_imports").fetchone()[0] == 0
    conn.close()
    old = db_path.with_name("old.db")
    known = migrations.load_migrations()
    with monkeypatch.context() as patch:
        patch.setattr(migrations, "load_migrations", lambda: known[:3])
        Store.open(old).close()  # a database of the previous version (schema 3)
    Store.open(old).close()  # the upgrade to 0004
    conn = apsw.Connection(str(old))
    assert conn.execute("SELECT action FROM legacy_first_start").fetchall() == [("baseline",)]
    assert conn.execute("SELECT kind, path FROM legacy_imports").fetchall() == [("upgrade", None)]
    conn.close()
