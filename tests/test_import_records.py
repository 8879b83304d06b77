"""The legacy file is imported once, on the start that creates the database, and every import is
recorded: deletions stay deleted, a legacy file that changed later gets one warning naming the
command that merges it, databases from before the records (schema 3) are never imported into on
upgrade, and every command a message suggests names ``--database``.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from graph_memory import cli, importer
from graph_memory.db import graph, migrations
from graph_memory.db.backend import SqliteBackend
from graph_memory.db.records import first_start_action, import_records
from graph_memory.db.store import Store
from graph_memory.errors import LegacyFormatError
from graph_memory.hints import graph_memory_command
from graph_memory.importer import first_start_import
from graph_memory.legacy import LineDigester, line_digests
from graph_memory.logs import configure_logging, get_logger
from graph_memory.models import Entity, Relation
from graph_memory.settings import Settings

SCRIPT = Path(sys.executable).with_name("graph-memory")
GOOD = (b'{"type":"entity","name":"Alice","entityType":"person","observations":["likes tea"]}\n'
        b'{"type":"entity","name":"Bob","entityType":"person","observations":[]}\n'
        b'{"type":"relation","from":"Alice","to":"Bob","relationType":"knows"}\n'
        b'{"type":"relation","from":"Alice","to":"Ghost","relationType":"fears"}\n')
MORE = b'{"type":"entity","name":"Carol","entityType":"person","observations":["came back later"]}\n'


@pytest.fixture(autouse=True)
def _fresh_importer_logger(monkeypatch: pytest.MonkeyPatch) -> Any:
    """structlog caches a logger with the level configured at its first use: each test gets a
    fresh importer logger (the module's own stays as it was), so a test that configures JSON logs
    at info on its captured stderr sees them."""
    monkeypatch.setattr(importer, "log", get_logger("graph_memory.importer"))
    yield
    configure_logging("warning", "console")


def start(file_path: Path) -> tuple[Store, importer.ImportReport | None]:
    """What ``graph-memory serve`` does before serving: settings, open (migrate), first start."""
    settings = Settings(file_path=file_path)
    store = Store.open(settings.database_path)
    try:
        return store, first_start_import(SqliteBackend(store), settings.legacy_candidates)
    except BaseException:
        store.close()
        raise


def start_and_close(file_path: Path) -> importer.ImportReport | None:
    store, report = start(file_path)
    store.close()
    return report


def contents(db: Path) -> tuple[list[str], list[tuple[str, str, str]]]:
    store = Store.open(db, migrate=False)
    try:
        g = store.run_read(graph.read_graph)
    finally:
        store.close()
    return [e.name for e in g.entities], [r.key for r in g.relations]


def records(db: Path) -> list[dict[str, Any]]:
    store = Store.open(db, migrate=False)
    try:
        return [r.to_dict() for r in store.run_read(import_records)]
    finally:
        store.close()


def events(stderr: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]


def wipe(db: Path) -> None:
    """Delete every entity and relation, as a user's "forget everything" does."""
    store = Store.open(db)
    try:
        g = store.run_read(graph.read_graph)
        store.run_write(lambda c: graph.delete_entities(c, [e.name for e in g.entities]))
        store.run_write(lambda c: graph.delete_relations(c, [Relation(*r.key) for r in g.relations]))
    finally:
        store.close()
    assert contents(db) == ([], [])


def schema_3_database(db: Path, monkeypatch: pytest.MonkeyPatch, *, entities: list[Entity]) -> None:
    """A database as graph-memory 0.x left it: migrations 0001-0003 only."""
    known = migrations.load_migrations()
    with monkeypatch.context() as patch:
        patch.setattr(migrations, "load_migrations", lambda: known[:3])
        store = Store.open(db)
        if entities:
            store.run_write(lambda c: graph.create_entities(c, entities))
        store.close()
    store = Store.open(db, migrate=False)
    try:
        state = migrations.status(store.conn, str(db))
        assert state.version == 3 and state.pending[0].name == "0004_legacy_import_records"
    finally:
        store.close()


def run_cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    configure_logging("warning", "console")
    return code, out, err


def serve(home: Path, file_path: Path, stdin: bytes = b"") -> subprocess.CompletedProcess[str]:
    """The real ``graph-memory`` console script serving stdio; it stops at the end of ``stdin``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_FILE_PATH=str(file_path), MEMORY_LOG_FORMAT="json", HOME=str(home))
    return subprocess.run([str(SCRIPT)], input=stdin.decode(), capture_output=True, text=True, env=env, timeout=60)


def mcp_session(*calls: tuple[str, dict[str, Any]]) -> bytes:
    lines: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    lines += [{"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
              for i, (tool, arguments) in enumerate(calls, start=1)]
    return "".join(json.dumps(line) + "\n" for line in lines).encode()


def replies(done: subprocess.CompletedProcess[str]) -> dict[int, dict[str, Any]]:
    return {m["id"]: m for m in map(json.loads, done.stdout.splitlines()) if "id" in m}


# -- deletions stay deleted ----------------------------------------------------------------------


def test_forgetting_everything_through_the_tools_survives_a_restart_of_the_console_script(tmp_path: Path) -> None:
    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(GOOD)
    first = serve(tmp_path, legacy, mcp_session(("read_graph", {})))
    assert first.returncode == 0, first.stderr
    assert len([e for e in events(first.stderr) if e["event"] == "legacy_import"]) == 1
    g = replies(first)[1]["result"]["structuredContent"]
    assert [e["name"] for e in g["entities"]] == ["Alice", "Bob"] and len(g["relations"]) == 2

    forget = serve(tmp_path, legacy, mcp_session(
        ("delete_entities", {"entityNames": [e["name"] for e in g["entities"]]}),
        ("delete_relations", {"relations": g["relations"]}),  # whatever relation outlived its entities
        ("read_graph", {})))
    assert forget.returncode == 0, forget.stderr
    assert replies(forget)[3]["result"]["structuredContent"]["entities"] == []
    assert replies(forget)[3]["result"]["structuredContent"]["relations"] == []

    again = serve(tmp_path, legacy, mcp_session(("read_graph", {})))
    assert again.returncode == 0, again.stderr
    assert replies(again)[1]["result"]["structuredContent"]["entities"] == []
    assert replies(again)[1]["result"]["structuredContent"]["relations"] == []
    names = [e["event"] for e in events(again.stderr)]
    assert not {"legacy_import", "legacy_import_started", "legacy_file_changed"} & set(names)
    assert legacy.read_bytes() == GOOD
    (record,) = records(tmp_path / "memory.db")
    assert record["kind"] == "first_start" and record["path"] == str(legacy)


def test_wiping_the_graph_then_restarting_in_process_imports_nothing(tmp_path: Path) -> None:
    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(GOOD)
    assert start_and_close(legacy) is not None
    wipe(tmp_path / "memory.db")
    assert start_and_close(legacy) is None
    assert contents(tmp_path / "memory.db") == ([], [])


def test_the_first_start_import_is_recorded_with_path_size_hash_mtime_and_counts(tmp_path: Path) -> None:
    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(GOOD)
    os.utime(legacy, ns=(1_700_000_000_123_456_789, 1_700_000_000_123_456_789))
    assert start_and_close(legacy) is not None
    (record,) = records(tmp_path / "memory.db")
    assert {k: v for k, v in record.items() if k != "recorded_at"} == {
        "kind": "first_start", "path": str(legacy), "size_bytes": len(GOOD),
        "sha256": hashlib.sha256(GOOD).hexdigest(), "mtime": "2023-11-14T22:13:20.123457Z",
        "entities": 2, "observations": 1, "relations": 2}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record["recorded_at"])


def test_a_database_created_without_a_legacy_file_never_imports_one_that_appears_later(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "json")  # onto the captured stderr
    db = tmp_path / "memory.db"
    assert start_and_close(db) is None
    (tmp_path / "memory.jsonl").write_bytes(GOOD)
    capsys.readouterr()
    assert start_and_close(db) is None
    assert contents(db) == ([], []) and records(db) == []
    (warning,) = [e for e in events(capsys.readouterr().err) if e["level"] == "warning"]
    assert warning["event"] == "legacy_file_not_imported"
    assert warning["merge_command"] == shlex.join(
        ["graph-memory", "import", str(tmp_path / "memory.jsonl"), "--database", str(db)])


# -- once, also when racing or crashing ------------------------------------------------------------


def test_a_start_interrupted_before_its_import_leaves_the_import_to_the_next_start(tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    Store.open(db).close()  # the schema was created, then the process died before importing
    (tmp_path / "memory.jsonl").write_bytes(GOOD)
    report = start_and_close(db)
    assert report is not None and report.entities_created == 2
    assert contents(db)[0] == ["Alice", "Bob"]


def test_a_refused_first_import_is_retried_once_the_file_is_fixed(tmp_path: Path) -> None:
    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(GOOD + b"{oops\n")
    with pytest.raises(LegacyFormatError):
        start(legacy)
    assert contents(tmp_path / "memory.db") == ([], []) and records(tmp_path / "memory.db") == []
    legacy.write_bytes(GOOD)
    assert start_and_close(legacy) is not None
    assert [r["kind"] for r in records(tmp_path / "memory.db")] == ["first_start"]


def test_of_two_starts_that_both_saw_the_duty_only_one_imports(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(GOOD)
    db = tmp_path / "memory.db"
    slow, fast = Store.open(db), Store.open(db)
    real_parse = importer.stream_memory_file
    other: list[importer.ImportReport | None] = []

    def parse_while_the_other_imports(data: Any, **kwargs: Any) -> Any:
        # ``slow`` has seen the import duty; ``fast`` does the whole import meanwhile.
        monkeypatch.setattr(importer, "stream_memory_file", real_parse)
        other.append(first_start_import(SqliteBackend(fast), [legacy]))
        return real_parse(data, **kwargs)

    monkeypatch.setattr(importer, "stream_memory_file", parse_while_the_other_imports)
    try:
        assert first_start_import(SqliteBackend(slow), [legacy]) is None
    finally:
        slow.close()
        fast.close()
    assert other[0] is not None and other[0].entities_created == 2
    assert [r["kind"] for r in records(db)] == ["first_start"]


def test_servers_started_together_on_a_new_file_import_it_once(tmp_path: Path) -> None:
    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(GOOD + b"".join(
        b'{"type":"entity","name":"E%d","entityType":"t","observations":["o"]}\n' % i for i in range(3000)))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_FILE_PATH=str(legacy), MEMORY_LOG_FORMAT="json", HOME=str(tmp_path))
    procs = [subprocess.Popen([str(SCRIPT)], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(3)]
    outputs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], [err for _, err in outputs]
    logged = [e["event"] for _, err in outputs for e in events(err)]
    assert logged.count("legacy_import") == 1
    assert [r["kind"] for r in records(tmp_path / "memory.db")] == ["first_start"]
    assert len(contents(tmp_path / "memory.db")[0]) == 3002


def _serve_start(legacy: Path) -> tuple[str, importer.ImportReport | None]:
    """What ``graph-memory serve`` does before serving, in process: the build aside, the open,
    the first start (service.first_start_built, open_backend, service.first_start)."""
    from graph_memory import service

    settings, log = Settings(file_path=legacy), get_logger("test")
    built = service.first_start_built(settings, log)
    backend = service.open_backend(settings, "migrate")
    try:
        return built, service.first_start(backend, settings, log, lost_build=built == "lost")
    finally:
        backend.close()


@pytest.mark.parametrize("meanwhile", ["import of another file", "another start of this file", "migrate"])
def test_a_first_start_whose_build_loses_to_another_process_still_imports_its_file_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, meanwhile: str) -> None:
    """A server starts on a new database and builds it beside its name; before it takes the name,
    another process creates it. The legacy file is then imported into that database unless it has
    a record of the file (found by QA: after `graph-memory import other.jsonl` won, the legacy
    file was never imported, where the server used to import it into the database it created)."""
    from graph_memory.db import store as stores
    from graph_memory.service import import_file

    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(GOOD)
    other = tmp_path / "other.jsonl"
    other.write_bytes(MORE)
    db = tmp_path / "memory.db"
    real_link = stores.link_new
    ran: list[str] = []

    def link_after_another_process(building: Path, target: Path) -> None:
        if not ran:
            ran.append(meanwhile)
            if meanwhile == "import of another file":
                import_file(Settings(file_path=db), str(other))
            elif meanwhile == "another start of this file":
                assert _serve_start(legacy)[0] == "built"
            else:
                Store.open(db).close()   # graph-memory migrate: a database that still owes its import
        real_link(building, target)

    monkeypatch.setattr(stores, "link_new", link_after_another_process)
    built, report = _serve_start(legacy)
    assert built == "lost" and ran == [meanwhile]
    entities, relations = contents(db)
    expected = ["Alice", "Bob"] + (["Carol"] if meanwhile == "import of another file" else [])
    assert sorted(entities) == sorted(expected) and len(relations) == 2
    kinds = [r["kind"] for r in records(db)]
    if meanwhile == "import of another file":
        assert kinds == ["import", "first_start"] and report is not None and report.entities_created == 2
    elif meanwhile == "another start of this file":
        assert kinds == ["first_start"] and report is None   # imported once, by the start that won
    else:
        assert kinds == ["first_start"] and report is not None
    assert _serve_start(legacy) == ("not built", None)   # and never again


# -- upgrading a database from before the records (schema 3) ---------------------------------------


@pytest.mark.parametrize("entities", [
    [],                                          # a user who had deleted everything
    [Entity("Dora", "person", ["kept"])],       # a user with a memory of their own
], ids=["empty", "non-empty"])
def test_an_upgraded_schema_3_database_is_never_imported_into(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        entities: list[Entity]) -> None:
    db = tmp_path / "memory.db"
    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(GOOD)
    schema_3_database(db, monkeypatch, entities=entities)
    before = contents(db)
    assert start_and_close(db) is None
    assert start_and_close(db) is None
    assert contents(db) == before
    code, out, _ = run_cli(capsys, "stats", "--json", "--database", str(db))
    data = json.loads(out)
    assert code == 0 and data["schema_version"] == len(migrations.load_migrations())
    assert data["legacy_first_start_pending"] is None
    upgrade, baseline = data["legacy_imports"]
    assert upgrade["kind"] == "upgrade" and upgrade["path"] is None and upgrade["entities"] is None
    assert baseline["kind"] == "baseline" and baseline["path"] == str(legacy)
    assert baseline["sha256"] == hashlib.sha256(GOOD).hexdigest() and baseline["size_bytes"] == len(GOOD)
    assert baseline["entities"] is None
    code, out, _ = run_cli(capsys, "stats", "--database", str(db))
    assert "upgrade: the database predates import records" in out
    assert f"baseline: {legacy} ({len(GOOD)} bytes" in out and "not imported by this version" in out


def test_an_upgraded_database_warns_once_the_legacy_file_changes_after_its_baseline(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "memory.db"
    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(GOOD)
    schema_3_database(db, monkeypatch, entities=[])
    assert start_and_close(db) is None
    legacy.write_bytes(GOOD + MORE)
    done = serve(tmp_path, db)
    assert done.returncode == 0, done.stderr
    (warning,) = [e for e in events(done.stderr) if e["level"] == "warning"]
    assert warning["event"] == "legacy_file_changed" and warning["recorded_kind"] == "baseline"
    assert contents(db) == ([], [])


def test_an_upgrade_start_without_a_legacy_file_records_no_baseline(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "memory.db"
    schema_3_database(db, monkeypatch, entities=[])
    assert start_and_close(db) is None
    store = Store.open(db)
    try:
        assert store.run_read(first_start_action) is None
    finally:
        store.close()
    assert [r["kind"] for r in records(db)] == ["upgrade"]


def test_the_baseline_of_an_upgraded_database_records_line_digests_so_new_lines_works(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    db, legacy = tmp_path / "memory.db", tmp_path / "memory.jsonl"
    legacy.write_bytes(GOOD)
    schema_3_database(db, monkeypatch, entities=[])   # the file imported then everything deleted, say
    assert start_and_close(db) is None                # the first start after the upgrade: baseline
    store = Store.open(db)
    try:
        (digests,) = store.conn.execute("SELECT line_digests FROM legacy_imports WHERE kind = 'baseline'").fetchone()
    finally:
        store.close()
    assert digests == line_digests(GOOD)

    legacy.write_bytes(GOOD + MORE)
    done = serve(tmp_path, db)
    assert done.returncode == 0, done.stderr
    (warning,) = [e for e in events(done.stderr) if e["level"] == "warning"]
    assert warning["event"] == "legacy_file_changed" and "--new-lines" in str(warning["merge_command"])
    code, out, err = run_cli(capsys, *shlex.split(str(warning["merge_command"]))[1:])
    assert code == 0, err
    assert contents(db) == (["Carol"], [])   # only the new line: what was deleted stays deleted
    assert "unchanged:     4 lines" in out


def test_a_baseline_whose_line_digests_fail_still_lets_the_server_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Fault injection only (digests that cannot be had, say memory ran out): the baseline is
    recorded without them, a warning says so, and the start goes on."""
    db, legacy = tmp_path / "memory.db", tmp_path / "memory.jsonl"
    legacy.write_bytes(GOOD)
    schema_3_database(db, monkeypatch, entities=[])

    class Failing(LineDigester):
        def feed(self, piece: bytes) -> None:
            raise MemoryError

    monkeypatch.setattr(importer, "LineDigester", Failing)
    configure_logging("info", "json")  # onto the captured stderr
    capsys.readouterr()
    assert start_and_close(db) is None
    assert [r["kind"] for r in records(db)] == ["upgrade", "baseline"]
    (warning,) = [e for e in events(capsys.readouterr().err) if e["event"] == "legacy_line_digests_unavailable"]
    assert warning["error"] == "MemoryError" and warning["level"] == "warning"


# -- a legacy file that changed after its import --------------------------------------------------


def test_a_changed_legacy_file_gets_one_warning_with_the_exact_merge_command(tmp_path: Path) -> None:
    folder = tmp_path / "my memory's folder"  # a space and a quote: the command must be shell-quoted
    folder.mkdir()
    legacy, db = folder / "memory.jsonl", folder / "memory.db"
    legacy.write_bytes(GOOD)
    assert serve(tmp_path, legacy).returncode == 0
    legacy.write_bytes(GOOD + MORE)  # the user went back to the reference server for a while
    done = serve(tmp_path, legacy)
    assert done.returncode == 0, done.stderr
    (warning,) = [e for e in events(done.stderr) if e["level"] == "warning"]
    command = shlex.join(["graph-memory", "import", "--new-lines", str(legacy), "--database", str(db)])
    assert warning["event"] == "legacy_file_changed" and warning["merge_command"] == command
    assert command in warning["message"] and "newer than what was imported" in warning["message"]
    assert "Carol" not in contents(db)[0]  # never merged silently

    merge = subprocess.run([str(SCRIPT), *shlex.split(command)[1:]], capture_output=True, text=True, timeout=60,
                           env={k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")})
    assert merge.returncode == 0, merge.stderr
    assert contents(db)[0] == ["Alice", "Bob", "Carol"]
    assert [r["kind"] for r in records(db)] == ["first_start", "import"]
    quiet = serve(tmp_path, legacy)
    assert quiet.returncode == 0 and [e for e in events(quiet.stderr) if e["level"] == "warning"] == []


def test_the_changed_file_warning_and_the_dry_run_say_what_a_merge_would_bring_back(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A newcomer QA pass: after deleting Bob through the tools and adding Carol to the file, the
    command the warning suggested merged the whole file and Bob came back, and neither the
    warning nor the dry run (counts only) said so. Now the warning suggests --new-lines (what
    changed in the file: Carol) and, for a record kept without line digests (an older version),
    says that a merge brings back what was deleted and points to the dry run, which names every
    entity it would create and when the file was imported."""
    legacy, db = tmp_path / "memory.jsonl", tmp_path / "memory.db"
    legacy.write_bytes(GOOD)
    done = serve(tmp_path, legacy, mcp_session(("delete_entities", {"entityNames": ["Bob"]})))
    assert done.returncode == 0 and "result" in replies(done)[1], done.stderr
    legacy.write_bytes(GOOD + MORE)
    (warning,) = [e for e in events(serve(tmp_path, legacy).stderr) if e["level"] == "warning"]
    assert "--new-lines" in warning["merge_command"] and "what was deleted from the memory since stays deleted" \
        in warning["message"]
    store = Store.open(db)   # as an older version recorded it: no digests of the lines
    try:
        store.conn.execute("UPDATE legacy_imports SET line_digests = NULL")
    finally:
        store.close()
    (warning,) = [e for e in events(serve(tmp_path, legacy).stderr) if e["level"] == "warning"]
    dry_run = graph_memory_command("import", "--dry-run", str(legacy), database=db)
    assert "whatever was deleted from the memory since then comes back too" in warning["message"]
    assert dry_run in warning["message"]
    (recorded,) = records(db)
    code, out, _ = run_cli(capsys, *shlex.split(dry_run)[1:])
    assert code == 0 and '  would create:  "Bob", "Carol"\n' in out, out
    assert f"this file was imported into this database at {recorded['recorded_at']}" in out
    assert "deleted from the memory since (an import brings those back)" in out
    code, out, _ = run_cli(capsys, *shlex.split(dry_run)[1:], "--json")
    report = json.loads(out)
    assert code == 0 and report["entities_to_create"] == ["Bob", "Carol"]
    assert report["recorded"]["kind"] == "first_start" and report["recorded"]["recorded_at"] == recorded["recorded_at"]
    assert contents(db)[0] == ["Alice"]   # the dry run wrote nothing


def test_a_touched_but_identical_legacy_file_gives_no_warning(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("info", "json")  # onto the captured stderr
    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(GOOD)
    start_and_close(legacy)
    later = time.time_ns() + 10**9
    os.utime(legacy, ns=(later, later))
    capsys.readouterr()
    assert start_and_close(legacy) is None
    assert [e for e in events(capsys.readouterr().err) if e["level"] == "warning"] == []


def test_a_manual_import_is_recorded_and_settles_the_first_start(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "memory.db"
    other = tmp_path / "other.jsonl"
    other.write_bytes(MORE)
    code, _, err = run_cli(capsys, "import", str(other), "--database", str(db))  # creates the database
    assert code == 0, err
    code, _, _ = run_cli(capsys, "import", "--dry-run", str(other), "--database", str(db))
    assert code == 0
    (record,) = records(db)
    assert record["kind"] == "import" and record["path"] == str(other) and record["entities"] == 1
    (tmp_path / "memory.jsonl").write_bytes(GOOD)
    assert start_and_close(db) is None  # this start did not create the database: no import
    assert contents(db)[0] == ["Carol"]


# -- every suggested command names the database ----------------------------------------------------


def test_the_damaged_line_hint_of_serve_names_the_database(tmp_path: Path) -> None:
    folder = tmp_path / "with space"
    folder.mkdir()
    legacy = folder / "memory.jsonl"
    legacy.write_bytes(GOOD + b"{oops\n")
    done = serve(tmp_path, legacy)
    assert done.returncode == 1
    assert shlex.join(["graph-memory", "import", "--skip-invalid", str(legacy), "--database",
                       str(folder / "memory.db")]) in done.stderr


def test_the_damaged_line_hint_of_import_names_the_database(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(GOOD + b"{oops\n")
    code, _, err = run_cli(capsys, "import", str(legacy), "--database", str(tmp_path / "x.db"))
    assert code == 1
    assert f"graph-memory import --skip-invalid {legacy} --database {tmp_path / 'x.db'}" in err


def test_pending_migration_hints_name_the_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "memory.db"
    schema_3_database(db, monkeypatch, entities=[])
    command = f"graph-memory migrate --database {db}"
    code, _, err = run_cli(capsys, "export", "--database", str(db))
    assert code == 1 and command in err
    code, out, _ = run_cli(capsys, "stats", "--database", str(db))
    assert code == 0 and command in out
    code, _, err = run_cli(capsys, "healthcheck", "--database", str(db))
    assert code == 1 and command in err


def test_the_sqlite_file_given_to_import_hint_names_it_as_the_database(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "memory.db"
    Store.open(db).close()
    code, _, err = run_cli(capsys, "import", str(db), "--database", str(tmp_path / "other.db"))
    assert code == 1 and f"graph-memory backup DEST --database {db}" in err


def test_the_command_helper_quotes_for_the_shell_and_makes_the_database_absolute(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    line = graph_memory_command("import", "/a b/it's.jsonl", database="rel.db")
    assert shlex.split(line) == ["graph-memory", "import", "/a b/it's.jsonl", "--database", str(tmp_path / "rel.db")]


_COMMAND_IN_TEXT = re.compile(r"graph-memory (serve|import|export|backup|stats|migrate|healthcheck)\b")


def test_no_message_in_the_code_spells_a_command_by_hand() -> None:
    """Every ``graph-memory <command>`` a message names is built by hints.graph_memory_command
    (so it carries --database); only docstrings and comments may spell one out."""
    package = Path(importer.__file__).parent
    offenders = []
    for source in sorted(package.glob("*.py")):
        tree = ast.parse(source.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef)
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if (isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                    and _COMMAND_IN_TEXT.search(node.value)):
                offenders.append(f"{source.name}:{node.lineno}: {node.value[:80]!r}")
    assert offenders == []
