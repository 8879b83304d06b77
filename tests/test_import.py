"""Importing the reference server's file into the database: the importer and ``graph-memory import``.

Every legacy case is a small file written by the test, with the exact outcome in the database:
counts, the line (or byte offset) of a refusal, the database untouched and the file unchanged.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from graph_memory import cli
from graph_memory.db import graph
from graph_memory.db.backend import SqliteBackend
from graph_memory.db.store import Store
from graph_memory.errors import LegacyFormatError, StoreError
from graph_memory.importer import FileState, ImportReport, load_graph, plan_graph
from graph_memory.legacy import LegacyGraph, read_legacy, stream_legacy
from graph_memory.logs import configure_logging
from graph_memory.models import Entity, Relation

from helpers import sample_path


@pytest.fixture(autouse=True)
def _quiet_logs() -> Any:
    """cli.main reconfigures logging onto the captured stderr; put the test default back."""
    yield
    configure_logging("warning", "console")


def import_file(store: Store, path: Any, *, skip_invalid: bool = False) -> ImportReport:
    """What ``graph-memory import PATH`` does: the file's state, check it, merge it streamed (recorded)."""
    state, data = FileState.read(path)
    legacy = stream_legacy(data, skip_invalid=skip_invalid, path=str(path))
    return load_graph(SqliteBackend(store), legacy, source=str(path), record=state)


def line(obj: dict[str, Any]) -> str:
    """One line as the reference server writes it (JSON.stringify)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def ent(name: str, entity_type: str = "person", observations: list[Any] | None = None, **extra: Any) -> str:
    return line({"type": "entity", "name": name, "entityType": entity_type, "observations": observations or [],
                 **extra})


def rel(source: str, target: str, relation_type: str = "knows", **extra: Any) -> str:
    return line({"type": "relation", "from": source, "to": target, "relationType": relation_type, **extra})


def jsonl(*lines: str, end: str = "\n") -> bytes:
    return ("\n".join(lines) + end).encode()


def snapshot(store: Store) -> tuple[list[tuple[str, str, list[str]]], list[tuple[str, str, str]]]:
    """The database graph as plain tuples, in rowid order."""
    g = store.run_read(graph.read_graph)
    return [(e.name, e.entity_type, e.observations) for e in g.entities], [r.key for r in g.relations]


def file_state(path: Path) -> tuple[bytes, bytes]:
    """The bytes of a database file and its WAL (empty when there is none)."""
    wal = path.with_name(path.name + "-wal")
    return path.read_bytes(), wal.read_bytes() if wal.exists() else b""


def counts(report: ImportReport) -> dict[str, int]:
    return report.counts()


def search_documents_are_consistent(store: Store) -> None:
    """The search index matches the graph: FTS integrity, and one lower-cased document per entity."""
    assert store.integrity_problems() == []
    docs = dict(store.run_read(lambda c: [(r[0], r[1:]) for r in c.execute(
        "SELECT e.name, s.name, s.entity_type, s.observations "
        "FROM entity_search s JOIN entities e ON e.id = s.entity_id")]))
    entities, _ = snapshot(store)
    assert docs == {name: (name.lower(), kind.lower(), "\n".join(o.lower() for o in obs))
                    for name, kind, obs in entities}


# -- into an empty database -----------------------------------------------------------------------


def test_import_into_an_empty_database_creates_everything_and_reports_counts(store: Store, tmp_path: Path) -> None:
    path = tmp_path / "memory.jsonl"
    path.write_bytes(jsonl(ent("Alice", "person", ["likes tea", "Zoë 🚀"]), ent("Bob", "person"),
                           rel("Alice", "Bob"), rel("Alice", "Nobody", "misses")))
    report = import_file(store, path)
    assert counts(report) == {"entities_created": 2, "entities_merged": 0, "type_conflicts": 0,
                              "observations_added": 2, "relations_created": 2, "relations_skipped": 0,
                              "relations_left_out": 0}
    assert report.file["dangling_relations"] == 1 and report.database == str(store.path)
    assert snapshot(store) == ([("Alice", "person", ["likes tea", "Zoë 🚀"]), ("Bob", "person", [])],
                               [("Alice", "Bob", "knows"), ("Alice", "Nobody", "misses")])
    search_documents_are_consistent(store)


def test_the_real_sample_file_imports_with_the_reference_counts(store: Store) -> None:
    report = import_file(store, sample_path())
    assert counts(report) == {"entities_created": 295, "entities_merged": 0, "type_conflicts": 0,
                              "observations_added": 1065, "relations_created": 424, "relations_skipped": 0,
                              "relations_left_out": 0}
    assert report.file["merged_entities"] == 3 and report.file["collapsed_observations"] == 99
    assert report.file["dangling_relations"] == 10
    search_documents_are_consistent(store)
    again = import_file(store, sample_path())
    assert counts(again) == {"entities_created": 0, "entities_merged": 295, "type_conflicts": 0,
                             "observations_added": 0, "relations_created": 0, "relations_skipped": 424,
                             "relations_left_out": 0}


# -- merging into a non-empty database ------------------------------------------------------------


def seed(store: Store) -> None:
    store.run_write(lambda c: graph.create_entities(c, [
        Entity("Alice", "person", ["likes tea", "lives in Lyon"]), Entity("Bob", "robot", [])]))
    store.run_write(lambda c: graph.create_relations(c, [Relation("Alice", "Bob", "knows")]))


MERGE_FILE = jsonl(
    ent("Carol", "person", ["new here"]),
    ent("Alice", "person", ["lives in Lyon", "plays go", "likes tea", "ÉCRIT en français"]),
    ent("Bob", "person", ["beeps"]),  # the database says robot: its type is kept
    rel("Alice", "Bob"),              # already there
    rel("Carol", "Alice", "admires"),
    rel("Carol", "Ghost", "haunts"),  # kept, as upstream keeps it
)
MERGED_ENTITIES = [("Alice", "person", ["likes tea", "lives in Lyon", "plays go", "ÉCRIT en français"]),
                   ("Bob", "robot", ["beeps"]), ("Carol", "person", ["new here"])]
MERGED_RELATIONS = [("Alice", "Bob", "knows"), ("Carol", "Alice", "admires"), ("Carol", "Ghost", "haunts")]
MERGE_COUNTS = {"entities_created": 1, "entities_merged": 2, "type_conflicts": 1,
                "observations_added": 4, "relations_created": 2, "relations_skipped": 1,
                "relations_left_out": 0}


def test_merge_adds_missing_observations_keeps_types_and_skips_existing_relations(store: Store,
                                                                                 tmp_path: Path) -> None:
    seed(store)
    path = tmp_path / "memory.jsonl"
    path.write_bytes(MERGE_FILE)
    report = import_file(store, path)
    assert counts(report) == MERGE_COUNTS
    assert snapshot(store) == (MERGED_ENTITIES, MERGED_RELATIONS)
    search_documents_are_consistent(store)


def test_small_merge_into_a_large_database_keeps_the_index_in_step_row_by_row(store: Store) -> None:
    # 60 existing entities, 2 in the file: below the bulk threshold, the row triggers sync the
    # search documents and queue both changed entities for the FTS index (search_pending).
    store.run_write(lambda c: graph.create_entities(c, [Entity(f"E{i}", "t", [f"fact {i}"]) for i in range(60)]))
    assert store.catch_up_search_index() == 60
    legacy = LegacyGraph([Entity("E1", "t", ["NEW Fact"]), Entity("Fresh", "T", ["Ünïcode"])], [])
    report = load_graph(SqliteBackend(store), legacy, source="test")
    assert report.entities_created == 1 and report.entities_merged == 1 and report.observations_added == 2
    search_documents_are_consistent(store)
    assert store.catch_up_search_index() == 2
    assert store.catch_up_search_index() == 0
    hits = store.run_read(lambda c: c.execute(
        "SELECT e.name FROM entity_fts f JOIN entities e ON e.id = f.rowid WHERE entity_fts MATCH ?",
        ('"new fact"',)).fetchall())
    assert hits == [("E1",)]


def test_dry_run_counts_exactly_like_the_import_and_writes_nothing(store: Store, tmp_path: Path) -> None:
    seed(store)
    path = tmp_path / "memory.jsonl"
    path.write_bytes(MERGE_FILE)
    legacy = read_legacy(path)
    before = snapshot(store)
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    files_before = file_state(store.path)
    plan = plan_graph(SqliteBackend(store), legacy, source=str(path))
    assert plan.dry_run and counts(plan) == MERGE_COUNTS
    assert file_state(store.path) == files_before and snapshot(store) == before
    assert counts(load_graph(SqliteBackend(store), legacy, source=str(path))) == counts(plan)


def test_dry_run_against_no_database_counts_everything_as_new() -> None:
    legacy = LegacyGraph([Entity("A", "t", ["x", "y"])], [Relation("A", "B", "r")])
    plan = plan_graph(None, legacy, source="f", database="/nowhere/memory.db")
    assert counts(plan) == {"entities_created": 1, "entities_merged": 0, "type_conflicts": 0,
                            "observations_added": 2, "relations_created": 1, "relations_skipped": 0,
                            "relations_left_out": 0}


def test_a_failure_half_way_rolls_the_whole_import_back(store: Store) -> None:
    seed(store)
    before = snapshot(store)
    # the last relation breaks the weight CHECK after every entity and observation was written
    legacy = LegacyGraph([Entity("New", "t", ["a"]), Entity("Alice", "person", ["more"])],
                         [Relation("New", "Alice", "r"), Relation("New", "Bob", "bad", weight=2.0)])
    with pytest.raises(StoreError):
        load_graph(SqliteBackend(store), legacy, source="test")
    assert snapshot(store) == before
    search_documents_are_consistent(store)


def test_progress_reports_every_item_and_the_indexing_phase(store: Store) -> None:
    events: list[Any] = []

    class Recorder:
        def advance(self, items: int) -> None:
            events.append(items)

        def phase(self, name: str) -> None:
            events.append(name)

    legacy = LegacyGraph([Entity(f"E{i}", "t", []) for i in range(2500)], [Relation("E0", "E1", "r")])
    load_graph(SqliteBackend(store), legacy, source="test", progress=Recorder())
    assert events[0] == "importing" and events[-2:] == [501, "indexing"]
    assert sum(e for e in events if isinstance(e, int)) == 2501


# -- each legacy case, into the database ----------------------------------------------------------

LONG = "x" * 1_000_000
OK_CASES: list[tuple[str, bytes, list[tuple[str, str, list[str]]], list[tuple[str, str, str]], dict[str, int]]] = [
    ("crlf", b"\r\n".join(s.encode() for s in (ent("A", "t", ["o"]), rel("A", "B"))) + b"\r\n",
     [("A", "t", ["o"])], [("A", "B", "knows")], {"lines": 2}),
    ("bom", b"\xef\xbb\xbf" + jsonl(ent("A"), ent("B")),
     [("A", "person", []), ("B", "person", [])], [], {"lines": 2}),
    ("blank lines", jsonl("", ent("A"), "   ", "\t", ent("B"), ""),
     [("A", "person", []), ("B", "person", [])], [], {"lines": 6}),
    ("no final newline", jsonl(ent("A"), rel("A", "A", "is"), end=""),
     [("A", "person", [])], [("A", "A", "is")], {"lines": 2}),
    ("line separators and controls are data",
     jsonl(ent("Zoë\u2028", "t\u2029", ["a\u2028b", "unit\x1fsep", "nel\x85"]), rel("Zoë\u2028", "x\x1fy", "r")),
     [("Zoë\u2028", "t\u2029", ["a\u2028b", "unit\x1fsep", "nel\x85"])], [("Zoë\u2028", "x\x1fy", "r")],
     {"lines": 2}),
    ("very long line", jsonl(ent("A", "t", [LONG, "short"])), [("A", "t", [LONG, "short"])], [], {"lines": 1}),
    ("duplicate entity lines merge", jsonl(ent("A", "t", ["1", "2"]), ent("B"), ent("A", "other", ["2", "3"])),
     [("A", "t", ["1", "2", "3"]), ("B", "person", [])], [],
     {"merged_entities": 1, "type_conflicts": 1, "collapsed_observations": 1}),
    ("duplicate observations collapse", jsonl(ent("A", "t", ["x", "y", "x", "x"])),
     [("A", "t", ["x", "y"])], [], {"collapsed_observations": 2}),
    ("relations to missing entities are kept", jsonl(ent("A"), rel("A", "Ghost"), rel("Ghost", "Nobody")),
     [("A", "person", [])], [("A", "Ghost", "knows"), ("Ghost", "Nobody", "knows")], {"dangling_relations": 2}),
    ("duplicate relations collapse", jsonl(ent("A"), rel("A", "A"), rel("A", "A")),
     [("A", "person", [])], [("A", "A", "knows")], {"duplicate_relations": 1}),
    ("unknown types and keys are skipped and counted",
     jsonl(ent("A", colour="blue"), line({"type": "note", "text": "hi"}), line({"name": "no type"}),
           rel("A", "A", since=2020)),
     [("A", "person", [])], [("A", "A", "knows")], {"unknown_keys": 2, "skipped_lines": 2}),
    ("single JSON document", json.dumps({
        "entities": [{"name": "A", "entityType": "t", "observations": ["o"]},
                     {"name": "A", "entityType": "t", "observations": ["p"]}],
        "relations": [{"from": "A", "to": "B", "relationType": "r"}]}, indent=2).encode(),
     [("A", "t", ["o", "p"])], [("A", "B", "r")], {"lines": 1, "merged_entities": 1}),
]


@pytest.mark.parametrize(("data", "entities", "relations", "file_counts"),
                         [case[1:] for case in OK_CASES], ids=[case[0] for case in OK_CASES])
def test_legacy_case_imports_with_the_exact_outcome(store: Store, tmp_path: Path, data: bytes,
                                                    entities: list[Any], relations: list[Any],
                                                    file_counts: dict[str, int]) -> None:
    path = tmp_path / "memory.jsonl"
    path.write_bytes(data)
    report = import_file(store, path)
    assert snapshot(store) == (entities, relations)
    assert report.entities_created == len(entities) and report.relations_created == len(relations)
    assert report.observations_added == sum(len(obs) for _, _, obs in entities)
    assert {k: report.file[k] for k in file_counts} == file_counts
    assert path.read_bytes() == data
    search_documents_are_consistent(store)


REFUSED_CASES: list[tuple[str, bytes, int, int | None, str]] = [
    ("missing name", jsonl(ent("A"), line({"type": "entity", "entityType": "t", "observations": []})),
     2, None, 'field "name" is missing'),
    ("observations not a list", jsonl(ent("A"), ent("B"), ent("C", "t", "oops")),  # type: ignore[arg-type]
     3, None, 'field "observations" must be a list of strings, got string'),
    ("observation not a string", jsonl(ent("A", "t", ["ok", 7])), 1, None, "item 1 is number"),
    ("relation without relationType", jsonl(ent("A"), line({"type": "relation", "from": "A", "to": "A"})),
     2, None, 'field "relationType" is missing'),
    ("not JSON", jsonl(ent("A"), "{not json", ent("B")), 2, None, "not valid JSON"),
    ("two objects on one line", jsonl(ent("A"), ent("B") + ent("C")), 2, None, "two JSON values on one line"),
]


@pytest.mark.parametrize(("data", "line_number", "offset", "reason"), [case[1:] for case in REFUSED_CASES],
                         ids=[case[0] for case in REFUSED_CASES])
def test_refused_legacy_case_names_the_line_and_leaves_the_database_untouched(
        store: Store, tmp_path: Path, data: bytes, line_number: int, offset: int | None, reason: str) -> None:
    seed(store)
    before = snapshot(store)
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    files_before = file_state(store.path)
    path = tmp_path / "memory.jsonl"
    path.write_bytes(data)
    with pytest.raises(LegacyFormatError) as caught:
        import_file(store, path)
    assert caught.value.line == line_number and caught.value.offset == offset
    assert reason in caught.value.reason and f"line {line_number}" in str(caught.value)
    assert snapshot(store) == before and file_state(store.path) == files_before
    assert path.read_bytes() == data


# Bytes that are not UTF-8, and what Node's UTF-8 decoder (the reference server's
# readFile(path, "utf-8")) reads for them: one U+FFFD per maximal bad sequence.
NOT_UTF8 = [(b"caf\xe9", "caf\ufffd"), (b"\xc3(", "\ufffd("), (b"\xe2\x82(", "\ufffd("),
            (b"\xf0\x80\x80", "\ufffd" * 3), (b"\xed\xa0\x80", "\ufffd" * 3), (b"\xff\xfe", "\ufffd" * 2),
            (b"\xf4\x90\x80\x80", "\ufffd" * 4), (b"a\xc0\xafb", "a\ufffd\ufffdb"), (b"\xf0\x9f\x98", "\ufffd")]


@pytest.mark.parametrize(("raw", "read"), NOT_UTF8, ids=[repr(raw) for raw, _ in NOT_UTF8])
def test_bytes_that_are_not_utf8_import_as_the_reference_server_reads_them(store: Store, tmp_path: Path,
                                                                           raw: bytes, read: str) -> None:
    """A file saved in another encoding (an editor's Latin-1 "café") loads in the reference server;
    its import neither refuses the file nor drops the line's entity: each bad sequence becomes
    U+FFFD, the lines are listed, the file is left as it was."""
    data = (jsonl(ent("A")) + b'{"type":"entity","name":"N' + raw + b'","entityType":"t","observations":["o'
            + raw + b'"]}\n' + jsonl(rel("A", "N" + read)) + b'{"type":"entity","name":"B","entityType":"t",'
            b'"observations":["' + raw + b'"]}')
    path = tmp_path / "memory.jsonl"
    path.write_bytes(data)
    report = import_file(store, path)
    assert snapshot(store) == ([("A", "person", []), ("N" + read, "t", ["o" + read]), ("B", "t", [read])],
                               [("A", "N" + read, "knows")])
    assert report.replaced_utf8_lines == [2, 4] and report.file["replaced_utf8_lines"] == 2
    assert report.to_dict()["replaced_utf8_lines"] == [2, 4]
    assert path.read_bytes() == data


def test_skip_invalid_imports_the_good_lines_and_lists_the_bad_ones(store: Store, tmp_path: Path) -> None:
    data = jsonl(ent("A"), "{not json", ent("B", "t", [1]), rel("A", "B"),
                 line({"type": "mystery"})) + b"\xff\xfe\n" + jsonl(ent("C"))
    path = tmp_path / "memory.jsonl"
    path.write_bytes(data)
    report = import_file(store, path, skip_invalid=True)
    assert snapshot(store) == ([("A", "person", []), ("C", "person", [])], [("A", "B", "knows")])
    assert [n for n, _ in report.invalid_lines] == [2, 3, 6]
    assert report.skipped_lines == [(5, 'unknown type "mystery"')]
    assert path.read_bytes() == data


# -- graph-memory import (in process) -------------------------------------------------------------


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = cli.main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_import_merges_and_prints_the_counts(db_path: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    store = Store.open(db_path)
    seed(store)
    store.close()
    path = tmp_path / "memory.jsonl"
    path.write_bytes(MERGE_FILE)
    code, out, err = run(["--database", str(db_path), "import", str(path)], capsys)
    assert code == 0, err
    assert out.startswith(f"imported {path} into {db_path}:")
    assert "1 created, 2 merged into existing ones (1 with another type there" in out
    assert "4 added" in out and "2 created, 1 already present" in out
    assert "Traceback" not in err
    with _opened(db_path) as reopened:
        assert snapshot(reopened) == (MERGED_ENTITIES, MERGED_RELATIONS)


class _opened:
    """``with _opened(path) as store`` (Store has no context manager of its own)."""

    def __init__(self, path: Path) -> None:
        self.store = Store.open(path)

    def __enter__(self) -> Store:
        return self.store

    def __exit__(self, *exc: object) -> None:
        self.store.close()


def test_cli_import_json_report_has_every_count(db_path: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "memory.jsonl"
    path.write_bytes(jsonl(ent("A", "t", ["x", "x"]), line({"type": "note"})))
    code, out, _ = run(["--database", str(db_path), "import", "--json", str(path)], capsys)
    assert code == 0
    report = json.loads(out)
    assert report["entities_created"] == 1 and report["observations_added"] == 1 and report["dry_run"] is False
    assert report["file"]["collapsed_observations"] == 1
    assert report["skipped_lines"] == [{"line": 2, "reason": 'unknown type "note"'}]


def test_cli_refusal_exits_1_with_line_and_hint_and_creates_no_database(db_path: Path, tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "memory.jsonl"
    data = jsonl(ent("A"), ent("B"), '{"type":"entity","name":"C"')
    path.write_bytes(data)
    code, out, err = run(["--database", str(db_path), "import", str(path)], capsys)
    assert code == 1 and out == ""
    assert f"{path}, line 3: not valid JSON" in err and "--skip-invalid" in err and "Nothing was imported" in err
    assert not db_path.exists()
    assert path.read_bytes() == data


def test_cli_refusal_leaves_an_existing_database_byte_identical(db_path: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    store = Store.open(db_path)
    seed(store)
    store.close()
    before = file_state(db_path)
    path = tmp_path / "memory.jsonl"
    path.write_bytes(jsonl(ent("New"), ent("Alice", "t", "not a list")))  # type: ignore[arg-type]
    code, _, err = run(["--database", str(db_path), "import", str(path)], capsys)
    assert code == 1 and "line 2" in err
    assert file_state(db_path) == before


def test_cli_skip_invalid_lists_bad_lines_on_stdout_and_exits_0(db_path: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "memory.jsonl"
    path.write_bytes(jsonl(ent("A"), "garbage", ent("B")))
    code, out, _ = run(["--database", str(db_path), "import", "--skip-invalid", str(path)], capsys)
    assert code == 0
    assert "2 created" in out and "invalid line (skipped) 2: not valid JSON" in out


def test_cli_dry_run_writes_nothing_and_reports_what_would_happen(db_path: Path, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    store = Store.open(db_path)
    seed(store)
    store.close()
    before = file_state(db_path)
    mtime = db_path.stat().st_mtime_ns
    path = tmp_path / "memory.jsonl"
    path.write_bytes(MERGE_FILE)
    code, out, _ = run(["--database", str(db_path), "import", "--dry-run", "--json", str(path)], capsys)
    assert code == 0
    report = json.loads(out)
    assert report["dry_run"] is True and {k: report[k] for k in MERGE_COUNTS} == MERGE_COUNTS
    assert file_state(db_path) == before and db_path.stat().st_mtime_ns == mtime
    assert not db_path.with_name(db_path.name + "-wal").exists()


def test_cli_dry_run_does_not_create_a_missing_database(db_path: Path, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "memory.jsonl"
    path.write_bytes(jsonl(ent("A", "t", ["x"]), rel("A", "B")))
    code, out, _ = run(["--database", str(db_path), "import", "--dry-run", str(path)], capsys)
    assert code == 0 and out.startswith("dry run, nothing was written")
    assert "1 created, 0 merged" in out
    assert not db_path.exists()


def test_cli_import_of_an_unreadable_file_exits_1(db_path: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["--database", str(db_path), "import", str(tmp_path / "missing.jsonl")], capsys)
    assert code == 1 and out == "" and "cannot read the file" in err
    assert not db_path.exists()


def test_progress_bar_goes_to_a_terminal_stderr_never_to_stdout(db_path: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr(cli, "PROGRESS_DELAY", 0)
    monkeypatch.setenv("MEMORY_LOG_LEVEL", "error")
    path = tmp_path / "memory.jsonl"
    path.write_bytes(jsonl(*(ent(f"E{i}") for i in range(3000))))
    monkeypatch.setattr("sys.stderr", terminal)
    code = cli.main(["--database", str(db_path), "import", str(path)])
    out = capsys.readouterr().out
    assert code == 0
    assert "importing" in terminal.getvalue() and "3.00k" in terminal.getvalue()
    assert "importing" not in out and "\r" not in out and out.startswith("imported")


def test_progress_bar_is_silent_when_stderr_is_not_a_terminal(db_path: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(cli, "PROGRESS_DELAY", 0)
    monkeypatch.setenv("MEMORY_LOG_LEVEL", "error")
    path = tmp_path / "memory.jsonl"
    path.write_bytes(jsonl(*(ent(f"E{i}") for i in range(3000))))
    code, out, err = run(["--database", str(db_path), "import", str(path)], capsys)
    assert code == 0 and err == "" and out.startswith("imported")


def test_importing_a_database_file_is_refused_clearly(store: Store, tmp_path: Path) -> None:
    with pytest.raises(LegacyFormatError, match="SQLite database"):
        import_file(store, store.path)
