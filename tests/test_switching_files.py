"""Switching users' files and paths (issue 13): pipes import, empty settings mean the default,
backups in one second both keep, hints for odd files lead somewhere true. Each test pins a defect a
review found by driving a fresh install as a switching user would."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest

from graph_memory import cli, importer
from graph_memory.db import backup, graph
from graph_memory.db.backend import SqliteBackend
from graph_memory.db.store import Store
from graph_memory.errors import LegacyFormatError
from graph_memory.hints import graph_memory_command
from graph_memory.legacy import read_legacy
from graph_memory.logs import configure_logging
from graph_memory.models import Entity
from graph_memory.settings import Settings

LINE = b'{"type":"entity","name":"Alice","entityType":"person","observations":["likes tea"]}\n'


def _database_with_alice(path: Path) -> None:
    store = Store.open(path)
    try:
        store.run_write(lambda c: graph.create_entities(c, [Entity("Alice", "person", ["likes tea"])]))
    finally:
        store.close()


def test_sqlite_file_named_memory_jsonl_backup_hint_names_that_file(tmp_path: Path) -> None:
    """A graph-memory database renamed memory.jsonl: the message suggests
    `graph-memory backup DEST --database …/memory.jsonl`, but a --database ending in .jsonl names
    a legacy file, so the pasted command backs up the sibling memory.db (empty), not this file."""
    sqlite_file = tmp_path / "memory.jsonl"
    _database_with_alice(tmp_path / "other.db")
    (tmp_path / "other.db").rename(sqlite_file)
    with pytest.raises(LegacyFormatError) as caught:
        read_legacy(sqlite_file)
    # No command can name a .jsonl file as a database: the message says to give it a .db name.
    message = str(caught.value)
    assert "--database" not in message.split("MEMORY_FILE_PATH")[0]
    command = message.split("(e.g. ", 1)[1].split(")", 1)[0]
    words = shlex.split(command)
    assert words == ["mv", str(sqlite_file), str(tmp_path / "memory.db")]
    assert Settings(file_path=words[2]).database_path == tmp_path / "memory.db"
    with pytest.raises(ValueError):
        graph_memory_command("backup", "DEST", database=sqlite_file)


def test_a_file_saved_in_another_encoding_imports_as_the_reference_server_reads_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A line an editor saved in cp1252 ("caf\\xe9") loads in the reference server as "caf\ufffd";
    the first start used to refuse the file and --skip-invalid dropped the whole entity. Both the
    first start and `graph-memory import` take it as the reference server reads it and say so."""
    legacy = tmp_path / "memory.jsonl"
    data = LINE + b'{"type":"entity","name":"Bob","entityType":"p","observations":["caf\xe9 au lait"]}\n'
    legacy.write_bytes(data)
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_FILE_PATH=str(legacy), MEMORY_LOG_FORMAT="json", HOME=str(tmp_path))
    done = subprocess.run([sys.executable, "-m", "graph_memory"], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, env=env, timeout=60)
    assert done.returncode == 0 and done.stdout == "", done.stderr
    warned = [json.loads(x) for x in done.stderr.splitlines() if "legacy_invalid_utf8_replaced" in x]
    assert [(w["lines"], w["first_lines"], w["level"]) for w in warned] == [(1, [2], "warning")]
    store = Store.open(tmp_path / "memory.db")
    try:
        entities = store.run_read(graph.read_graph).entities
        assert [(e.name, e.observations) for e in entities] == [("Alice", ["likes tea"]),
                                                                 ("Bob", ["caf\ufffd au lait"])]
    finally:
        store.close()
    assert legacy.read_bytes() == data
    code = cli.main(["import", str(legacy), "--database", str(tmp_path / "other.db")])
    out, _ = capsys.readouterr()
    configure_logging("warning", "console")
    assert code == 0 and "bytes that are not UTF-8 on 1 line (2) with U+FFFD" in out, out


def test_two_backups_into_one_folder_in_the_same_second_are_both_kept(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """`backup DIR/` picks its name before copying and refuses at publish time when another
    backup took the name meanwhile: two backups started in the same second (cron plus a manual
    one) make the second fail with "already exists; choose another name" although the user named
    only a folder."""
    db = tmp_path / "memory.db"
    _database_with_alice(db)
    folder = tmp_path / "backups"
    fixed = datetime(2026, 12, 1, 15, 1, 1)

    class FixedNow(datetime):
        @classmethod
        def now(cls, tz=None):  # type: ignore[override]
            return fixed

    monkeypatch.setattr(backup, "datetime", FixedNow)
    real_copy = backup._copy
    other: list[backup.BackupResult] = []
    raced: list[bool] = []

    def copy_while_another_backup_finishes(*args, **kwargs):  # type: ignore[no-untyped-def]
        if not raced:
            raced.append(True)
            other.append(backup.backup_database(db, f"{folder}/"))
        return real_copy(*args, **kwargs)

    monkeypatch.setattr(backup, "_copy", copy_while_another_backup_finishes)
    first = backup.backup_database(db, f"{folder}/")
    assert first.path != other[0].path
    assert first.path.exists() and other[0].path.exists()


def test_merge_through_another_spelling_of_the_same_file_ends_the_warning(tmp_path: Path) -> None:
    """Records are keyed by the path string (Path.absolute, no resolve): a client that names the
    file through a symlinked folder, and a merge that names its real path (e.g. from
    `import --discover`), leave `legacy_file_changed` at every start although the file was merged."""
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    (real / "memory.jsonl").write_bytes(LINE)
    settings = Settings(file_path=tmp_path / "link" / "memory.jsonl")
    store = Store.open(settings.database_path)
    try:
        importer.first_start_import(SqliteBackend(store), settings.legacy_candidates)
        with (real / "memory.jsonl").open("ab") as handle:
            handle.write(b'{"type":"entity","name":"Carol","entityType":"person","observations":[]}\n')
        # the same file, by its real path
        assert cli.main(["import", str(real / "memory.jsonl"), "--database", str(settings.database_path)]) == 0
        assert importer.warn_if_legacy_file_changed(SqliteBackend(store), settings.legacy_candidates[0]) is None
    finally:
        store.close()


def test_empty_memory_file_path_means_the_default_as_for_the_reference_server(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`"env": {"MEMORY_FILE_PATH": ""}` (or compose's `MEMORY_FILE_PATH=${MEMORY_FILE_PATH}` with
    the variable unset): the reference server treats an empty value as unset and uses its default
    file; graph-memory resolves "" to the working directory and refuses to start ("<cwd> is a
    folder"), without even the note that the value was relative."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("MEMORY_FILE_PATH", "")
    settings = Settings()
    assert settings.file_path == Settings.model_fields["file_path"].default_factory()  # type: ignore[misc]


def test_import_from_a_pipe_imports_the_content(tmp_path: Path) -> None:
    """`cat memory.jsonl | graph-memory import /dev/stdin` and `graph-memory import <(ssh … cat …)`
    (a pipe): FileState.of reads the stream to hash it, then read_legacy opens it again and reads
    nothing, so the import reports "0 created" with exit 0 and records it. The previous release
    (9890743) imported every entity."""
    import os
    import subprocess
    import sys

    db = tmp_path / "memory.db"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    done = subprocess.run([sys.executable, "-m", "graph_memory", "import", "/dev/stdin", "--database", str(db)],
                          input=LINE, capture_output=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    store = Store.open(db, migrate=False)
    try:
        names = [e.name for e in store.run_read(graph.read_graph).entities]
    finally:
        store.close()
    assert names == ["Alice"], done.stdout.decode()


def test_upgraded_empty_database_warns_about_a_legacy_file_it_never_held(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The previous release refused a start on a damaged line and left the database empty, telling
    the user to fix the line ("the next start imports it"). The user fixes it and upgrades: the
    start records a `baseline` at info level, imports nothing and never warns, so the memory stays
    empty in silence (issue 13 item 2: never ignored silently). An upgraded database holding
    nothing while the legacy file holds entities deserves the warning with the merge command."""
    from test_import_records import events, schema_3_database, serve

    db = tmp_path / "memory.db"
    schema_3_database(db, monkeypatch, entities=[])
    (tmp_path / "memory.jsonl").write_bytes(LINE)
    done = serve(tmp_path, tmp_path / "memory.jsonl")
    warnings = [e for e in events(done.stderr) if e.get("level") == "warning"]
    assert any("merge_command" in e for e in warnings), [e["event"] for e in events(done.stderr)]
