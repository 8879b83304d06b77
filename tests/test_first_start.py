"""First start: a new database imports the legacy file beside it (or the one MEMORY_FILE_PATH
names), reports like ``graph-memory import``, never imports twice, never touches the legacy file,
and refuses a bad line with its number, creating no database (a new one is built beside its
name) or leaving one that owes the import empty. (Records, upgrades, changed
files and deletions that must stay deleted: test_import_records.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from graph_memory.db import graph
from graph_memory.db.backend import SqliteBackend
from graph_memory.db.store import Store
from graph_memory.errors import LegacyFormatError
from graph_memory.importer import first_start_import
from graph_memory.logs import configure_logging
from graph_memory.models import Entity
from graph_memory.settings import Settings

SCRIPT = Path(sys.executable).with_name("graph-memory")
GOOD = (b'{"type":"entity","name":"Alice","entityType":"person","observations":["likes tea","likes tea"]}\r\n'
        b'{"type":"entity","name":"Alice","entityType":"person","observations":["Zo\xc3\xab"]}\r\n'
        b'{"type":"relation","from":"Alice","to":"Ghost","relationType":"fears"}')
GOOD_GRAPH = ([("Alice", "person", ["likes tea", "Zoë"])], [("Alice", "Ghost", "fears")])


@pytest.fixture(autouse=True)
def _quiet_logs() -> Any:
    yield
    configure_logging("warning", "console")


def start(monkeypatch: pytest.MonkeyPatch, file_path: Path) -> tuple[Settings, Store, Any]:
    """What ``graph-memory serve`` does before serving: settings, open (migrate), first-start import."""
    monkeypatch.setenv("MEMORY_FILE_PATH", str(file_path))
    settings = Settings()
    store = Store.open(settings.database_path)
    try:
        report = first_start_import(SqliteBackend(store), settings.legacy_candidates)
    except BaseException:
        store.close()
        raise
    return settings, store, report


def contents(store: Store) -> tuple[list[tuple[str, str, list[str]]], list[tuple[str, str, str]]]:
    g = store.run_read(graph.read_graph)
    return [(e.name, e.entity_type, e.observations) for e in g.entities], [r.key for r in g.relations]


def test_a_jsonl_path_means_a_sibling_database_filled_from_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(GOOD)
    configure_logging("info", "json")  # onto the captured stderr
    settings, store, report = start(monkeypatch, legacy)
    try:
        assert settings.database_path == tmp_path / "memory.db" and store.path == tmp_path / "memory.db"
        assert contents(store) == GOOD_GRAPH
    finally:
        store.close()
    assert report.entities_created == 1 and report.observations_added == 2 and report.relations_created == 1
    assert legacy.read_bytes() == GOOD
    events = [json.loads(x) for x in capsys.readouterr().err.splitlines() if x.startswith("{")]
    (logged,) = [e for e in events if e["event"] == "legacy_import"]
    assert logged["path"] == str(legacy) and logged["database"] == str(tmp_path / "memory.db")
    assert {k: logged[k] for k in ("entities_created", "entities_merged", "observations_added", "relations_created",
                                   "relations_skipped", "file_merged_entities", "file_collapsed_observations",
                                   "file_dangling_relations", "file_lines")} == {
        "entities_created": 1, "entities_merged": 0, "observations_added": 2, "relations_created": 1,
        "relations_skipped": 0, "file_merged_entities": 1, "file_collapsed_observations": 1,
        "file_dangling_relations": 1, "file_lines": 3}


def test_a_database_path_imports_the_memory_jsonl_beside_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "memory.jsonl").write_bytes(GOOD)
    (tmp_path / "memory.json").write_bytes(b'{"type":"entity","name":"Other","entityType":"t","observations":[]}')
    _, store, report = start(monkeypatch, tmp_path / "memory.db")
    try:
        assert report is not None and report.source == str(tmp_path / "memory.jsonl")
        assert contents(store) == GOOD_GRAPH
    finally:
        store.close()


@pytest.mark.parametrize("data", [
    GOOD,  # the JSONL format under the older name
    json.dumps({"entities": [{"name": "Alice", "entityType": "person", "observations": ["likes tea", "Zoë"]}],
                "relations": [{"from": "Alice", "to": "Ghost", "relationType": "fears"}]}, indent=2).encode(),
], ids=["jsonl", "single-document"])
def test_memory_json_is_the_fallback(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes) -> None:
    legacy = tmp_path / "memory.json"
    legacy.write_bytes(data)
    _, store, report = start(monkeypatch, tmp_path / "memory.db")
    try:
        assert report is not None and report.source == str(legacy)
        assert contents(store) == GOOD_GRAPH
    finally:
        store.close()
    assert legacy.read_bytes() == data


def test_a_non_empty_database_is_never_imported_into_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(GOOD)
    _, store, first = start(monkeypatch, legacy)
    try:
        store.run_write(lambda c: graph.delete_entities(c, ["Alice"]))
        store.run_write(lambda c: graph.create_entities(c, [Entity("Bob", "person", [])]))
    finally:
        store.close()
    assert first is not None
    _, store, second = start(monkeypatch, legacy)
    try:
        assert second is None
        assert contents(store) == ([("Bob", "person", [])], [])
    finally:
        store.close()


def test_no_legacy_file_leaves_the_database_empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _, store, report = start(monkeypatch, tmp_path / "memory.db")
    try:
        assert report is None and contents(store) == ([], [])
    finally:
        store.close()


def test_a_bad_line_refuses_with_its_number_and_leaves_the_database_empty(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    legacy = tmp_path / "memory.jsonl"
    data = GOOD + b'\n{"type":"entity","name":"B","entityType":"t","observations":"oops"}\n'
    legacy.write_bytes(data)
    with pytest.raises(LegacyFormatError) as caught:
        start(monkeypatch, legacy)
    assert caught.value.line == 4 and '"observations"' in caught.value.reason
    store = Store.open(tmp_path / "memory.db")
    try:
        assert contents(store) == ([], [])
    finally:
        store.close()
    assert legacy.read_bytes() == data


def test_a_bad_line_after_many_batches_rolls_the_first_import_back_and_it_stays_owed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first start reads the file once, checking as it merges: a bad line found after
    thousands of entities were written rolls all of them back, and the next start imports the
    mended file."""
    legacy = tmp_path / "memory.jsonl"
    good = b"".join(b'{"type":"entity","name":"E%d","entityType":"t","observations":["o%d"]}\n' % (i, i)
                    for i in range(12_000))
    legacy.write_bytes(good + b'{"type":"relation","from":"E1"}\n')
    with pytest.raises(LegacyFormatError) as caught:
        start(monkeypatch, legacy)
    assert caught.value.line == 12_001 and "left empty" in str(caught.value)
    store = Store.open(tmp_path / "memory.db")
    try:
        assert contents(store) == ([], [])
        assert SqliteBackend(store).run_read(lambda g: g.first_start_action()) == "import"
    finally:
        store.close()
    legacy.write_bytes(good)
    _, store, report = start(monkeypatch, legacy)
    try:
        assert report.entities_created == 12_000 and len(contents(store)[0]) == 12_000
    finally:
        store.close()


def serve(tmp_path: Path, file_path: Path) -> subprocess.CompletedProcess[str]:
    """``graph-memory`` (serve on stdio) with stdin closed: it starts, finds EOF, and stops."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_FILE_PATH=str(file_path), MEMORY_LOG_FORMAT="json", HOME=str(tmp_path))
    return subprocess.run([str(SCRIPT)], stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
                          timeout=60)


def test_serve_refuses_a_bad_legacy_line_with_exit_1_and_touches_nothing(tmp_path: Path) -> None:
    """The first start builds the new database beside its name: a bad line leaves no database
    (and no temporary file), so the next start tries again."""
    legacy = tmp_path / "memory.jsonl"
    data = GOOD + b"\n{oops\n"
    legacy.write_bytes(data)
    done = serve(tmp_path, legacy)
    assert done.returncode == 1 and done.stdout == ""
    assert f"{legacy}, line 4: not valid JSON" in done.stderr
    assert f"No database was created at {tmp_path / 'memory.db'}" in done.stderr and "--skip-invalid" in done.stderr
    assert legacy.read_bytes() == data
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.jsonl"]
    legacy.write_bytes(GOOD)
    assert serve(tmp_path, legacy).returncode == 0
    store = Store.open(tmp_path / "memory.db")
    try:
        assert contents(store) == GOOD_GRAPH
    finally:
        store.close()


def test_a_named_legacy_file_that_does_not_exist_is_warned_about_once(tmp_path: Path) -> None:
    """A newcomer QA pass: MEMORY_FILE_PATH=.../memroy.jsonl (a typo) started an empty memory
    with info lines only. The start that creates the database now warns, naming both paths;
    later starts and a database path without a legacy file say nothing."""
    typo = tmp_path / "memroy.jsonl"
    first = serve(tmp_path, typo)
    assert first.returncode == 0, first.stderr
    warnings = [e for e in map(json.loads, first.stderr.splitlines()) if e["level"] == "warning"]
    assert [(w["event"], w["path"], w["database"]) for w in warnings] == [
        ("legacy_file_missing", str(typo), str(tmp_path / "memroy.db"))]
    assert "does not exist" in warnings[0]["message"] and "correct MEMORY_FILE_PATH" in warnings[0]["message"]
    for done in (serve(tmp_path, typo), serve(tmp_path, tmp_path / "other.db")):
        assert done.returncode == 0 and '"level": "warning"' not in done.stderr, done.stderr


def test_serve_builds_the_new_database_aside_and_logs_its_import_once(tmp_path: Path) -> None:
    """What the built database holds and says is what a first start into a server-created
    database gives: the graph, one first_start record, no import still owed, WAL; logged under
    the database's own name."""
    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(GOOD)
    done = serve(tmp_path, legacy)
    assert done.returncode == 0, done.stderr
    logged = [json.loads(x) for x in done.stderr.splitlines()]
    assert [e["event"] for e in logged].count("legacy_import") == 1 and ".building" not in done.stderr
    assert {e["path"] for e in logged if e["event"] == "migrations_applied"} == {str(tmp_path / "memory.db")}
    store = Store.open(tmp_path / "memory.db")
    try:
        assert contents(store) == GOOD_GRAPH
        backend = SqliteBackend(store)
        assert backend.run_read(lambda g: g.first_start_action()) is None
        assert [r.kind for r in backend.run_read(lambda g: g.import_records())] == ["first_start"]
        assert store.conn.execute("PRAGMA journal_mode").fetchall()[0][0] == "wal"
    finally:
        store.close()


def test_serve_imports_on_the_first_start_only_and_logs_the_counts(tmp_path: Path) -> None:
    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(GOOD)
    first = serve(tmp_path, legacy)
    assert first.returncode == 0, first.stderr
    assert first.stdout == ""  # stdout belongs to the protocol
    events = [json.loads(x) for x in first.stderr.splitlines()]
    (logged,) = [e for e in events if e["event"] == "legacy_import"]
    assert logged["entities_created"] == 1 and logged["observations_added"] == 2 and logged["relations_created"] == 1
    second = serve(tmp_path, legacy)
    assert second.returncode == 0 and "legacy_import" not in second.stderr
    assert legacy.read_bytes() == GOOD


def test_a_failed_start_logs_its_start_before_its_stop(tmp_path: Path) -> None:
    """Every server_stopped follows its server_starting, also when the start fails (a damaged
    legacy file); a database that cannot be opened logs server_start_failed."""
    import subprocess

    from test_stdio import EXE, server_env

    legacy = tmp_path / "memory.jsonl"
    legacy.write_text("{oops\n")
    env = {**server_env(tmp_path, legacy), "MEMORY_LOG_FORMAT": "json"}
    done = subprocess.run([str(EXE)], input="", capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 1 and done.stdout == ""
    events = [json.loads(x)["event"] for x in done.stderr.splitlines() if x.startswith("{")]
    # no database yet: it was to be built with the file imported, and never was
    assert events[0] == "server_starting" and events[-1] == "server_start_failed", events
    assert "server_stopped" not in events
    Store.open(tmp_path / "memory.db").close()  # a database that exists and still owes its import
    done = subprocess.run([str(EXE)], input="", capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 1 and done.stdout == ""
    events = [json.loads(x)["event"] for x in done.stderr.splitlines() if x.startswith("{")]
    assert events.index("server_starting") < events.index("server_stopped"), events
    (tmp_path / "not.db").write_text("not a database")
    env["MEMORY_FILE_PATH"] = str(tmp_path / "not.db")
    done = subprocess.run([str(EXE)], input="", capture_output=True, text=True, timeout=60, env=env)
    events = [json.loads(x)["event"] for x in done.stderr.splitlines() if x.startswith("{")]
    assert done.returncode == 1 and events == ["server_starting", "server_start_failed"], done.stderr


def test_a_database_path_imports_the_legacy_file_of_its_own_name(tmp_path: Path) -> None:
    """MEMORY_FILE_PATH=mymem.jsonl keeps its database in mymem.db; the other way round,
    mymem.db imported nothing from mymem.jsonl beside it, without a word (found by QA)."""
    from test_stdio import EXE, server_env

    (tmp_path / "mymem.jsonl").write_text('{"type":"entity","name":"Mine","entityType":"t","observations":["o"]}\n')
    (tmp_path / "memory.jsonl").write_text('{"type":"entity","name":"Other","entityType":"t","observations":[]}\n')
    db = tmp_path / "mymem.db"
    done = subprocess.run([str(EXE)], input="", capture_output=True, text=True, timeout=60,
                          env=server_env(tmp_path, db))
    assert done.returncode == 0, done.stderr
    store = Store.open(db)
    try:
        names = store.run_read(lambda conn: [row[0] for row in conn.execute("SELECT name FROM entities")])
    finally:
        store.close()
    assert names == ["Mine"]
