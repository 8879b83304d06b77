"""MemoryMesh's memory file: detection, reading with the reference reader's rules (all or nothing,
line-numbered errors, --skip-invalid), first-start import, ``export --format memorymesh``, and the
round trips. The export is read back by :func:`memorymesh_read`, a Python copy of MemoryMesh's
loader (split on newlines, drop blank lines, parse each, keep nodes and edges), so no code of ours
judges its own output."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from graph_memory import cli
from graph_memory.db import graph
from graph_memory.db.backend import SqliteBackend
from graph_memory.db.store import Store
from graph_memory.errors import LegacyFormatError
from graph_memory.importer import first_start_import
from graph_memory.legacy import REFERENCE, parse_legacy
from graph_memory.logs import configure_logging
from graph_memory.meshfile import MEMORYMESH, detect, parse_memory_file

MESH_FILE = (
    '{"type":"node","name":"Gandalf","nodeType":"npc","metadata":["Role: Wizard","Status: Active"]}\n'
    '{"type":"node","name":"Rivendell","nodeType":"location","metadata":["Atmosphere: Peaceful"]}\n'
    '{"type":"node","name":"Zoë 🚀","nodeType":"npc","metadata":["say \\"hi\\"","new\\nline"]}\n'
    '{"type":"edge","from":"Gandalf","to":"Rivendell","edgeType":"located_in","weight":1}\n'
    '{"type":"edge","from":"Zoë 🚀","to":"Gandalf","edgeType":"knows","weight":0.35}\n'
).encode()
# the same graph in the reference server's words
REFERENCE_FILE = (
    '{"type":"entity","name":"Gandalf","entityType":"npc","observations":["Role: Wizard","Status: Active"]}\n'
    '{"type":"entity","name":"Rivendell","entityType":"location","observations":["Atmosphere: Peaceful"]}\n'
    '{"type":"entity","name":"Zoë 🚀","entityType":"npc","observations":["say \\"hi\\"","new\\nline"]}\n'
    '{"type":"relation","from":"Gandalf","to":"Rivendell","relationType":"located_in"}\n'
    '{"type":"relation","from":"Zoë 🚀","to":"Gandalf","relationType":"knows","weight":0.35}\n'
).encode()


@pytest.fixture(autouse=True)
def _quiet_logs() -> Any:
    yield
    configure_logging("warning", "console")


def memorymesh_read(data: bytes) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """MemoryMesh's loadGraph, in Python: the nodes and edges it holds after reading ``data``."""
    nodes, edges = [], []
    for raw in data.decode("utf-8").split("\n"):
        if not raw.strip():
            continue
        item = json.loads(raw)
        rest = {k: v for k, v in item.items() if k != "type"}
        if item["type"] == "node":
            nodes.append(rest)
        elif item["type"] == "edge":
            edges.append(rest)
    return nodes, edges


def db_graph(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    store = Store.open(path)
    try:
        g = store.run_read(graph.read_graph)
    finally:
        store.close()
    return ([{"name": e.name, "nodeType": e.entity_type, "metadata": e.observations} for e in g.entities],
            [{"from": r.source, "to": r.target, "edgeType": r.relation_type, "weight": r.weight} for r in g.relations])


# -- detection and reading ----------------------------------------------------------------------------


@pytest.mark.parametrize(("data", "expected"), [
    (MESH_FILE, MEMORYMESH),
    (REFERENCE_FILE, REFERENCE),
    (b"\n\n" + MESH_FILE, MEMORYMESH),                                    # blank lines first
    (b"not json\n" + MESH_FILE, MEMORYMESH),                              # a bad first line
    (b'{"type":"edge","from":"a","to":"b","edgeType":"x"}\n', MEMORYMESH),  # edges only, no weight
    (b'{"nodes": [], "edges": []}', MEMORYMESH),                          # one document
    (b'{\n  "entities": [],\n  "relations": []\n}', REFERENCE),
    (b"", REFERENCE),
])
def test_detect_tells_memorymeshs_file_from_the_reference_servers(data: bytes, expected: Any) -> None:
    assert detect(data) is expected


def test_a_memorymesh_file_reads_as_the_same_graph_as_its_reference_twin() -> None:
    mesh = parse_memory_file(MESH_FILE, path="memory.json")
    ref = parse_legacy(REFERENCE_FILE, path="memory.jsonl")
    assert mesh.entities == ref.entities and mesh.relations == ref.relations
    assert mesh.summary() == ref.summary()


def test_edges_without_weight_from_older_memorymesh_read_as_weight_one() -> None:
    data = (b'{"type":"node","name":"a","nodeType":"t","metadata":[]}\n'
            b'{"type":"edge","from":"a","to":"a","edgeType":"x"}')
    (relation,) = parse_memory_file(data).relations
    assert relation.weight == 1.0


def test_duplicates_merge_as_in_the_reference_format() -> None:
    data = (b'{"type":"node","name":"a","nodeType":"t","metadata":["1","2"]}\n'
            b'{"type":"node","name":"a","nodeType":"u","metadata":["2","3"]}\n'
            b'{"type":"edge","from":"a","to":"b","edgeType":"x","weight":0.5}\n'
            b'{"type":"edge","from":"a","to":"b","edgeType":"x","weight":0.9}\n')
    result = parse_memory_file(data)
    assert [(e.name, e.entity_type, e.observations) for e in result.entities] == [("a", "t", ["1", "2", "3"])]
    assert [r.weight for r in result.relations] == [0.5]
    assert result.summary()["merged_entities"] == 1 and result.summary()["dangling_relations"] == 1


@pytest.mark.parametrize(("line", "reason"), [
    ('{"type":"node","name":"b","metadata":[]}', 'node: field "nodeType" is missing'),
    ('{"type":"node","name":"b","nodeType":"t","metadata":"x"}', 'node: field "metadata" must be a list of strings'),
    ('{"type":"edge","from":"a","to":"b","weight":1}', 'edge: field "edgeType" is missing'),
    ('{"type":"edge","from":"a","to":"b","edgeType":"x","weight":1.5}', 'field "weight" must be a number from 0 to 1'),
    ('{"type":"node",', "not valid JSON"),
])
def test_a_bad_line_refuses_the_file_with_its_line_number(line: str, reason: str) -> None:
    data = ('{"type":"node","name":"a","nodeType":"t","metadata":[]}\n' + line + "\n").encode()
    with pytest.raises(LegacyFormatError) as caught:
        parse_memory_file(data, path="memory.json")
    assert caught.value.line == 2 and reason in str(caught.value)
    skipped = parse_memory_file(data, skip_invalid=True)
    assert [s.line for s in skipped.invalid_lines] == [2] and [e.name for e in skipped.entities] == ["a"]


def test_reference_lines_in_a_memorymesh_file_are_listed_as_skipped() -> None:
    result = parse_memory_file(MESH_FILE + b'{"type":"entity","name":"x","entityType":"t","observations":[]}\n')
    assert [(s.line, s.reason) for s in result.skipped_lines] == [(6, 'unknown type "entity"')]


# -- import, first start, export ----------------------------------------------------------------------


def test_import_command_reads_a_memorymesh_file(tmp_path: Path) -> None:
    source = tmp_path / "memory.json"
    source.write_bytes(MESH_FILE)
    db = tmp_path / "graph.db"
    assert cli.main(["--database", str(db), "import", str(source)]) == 0
    assert db_graph(db) == memorymesh_read(MESH_FILE)


def test_import_of_a_bad_memorymesh_file_writes_nothing_and_names_the_line(tmp_path: Path,
                                                                          capsys: pytest.CaptureFixture[str]) -> None:
    source = tmp_path / "memory.json"
    source.write_bytes(MESH_FILE + b'{"type":"edge","from":"a"}\n')
    db = tmp_path / "graph.db"
    assert cli.main(["--database", str(db), "import", str(source)]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert "line 6" in err and "Nothing was imported" in err and "--skip-invalid" in err
    assert not db.exists() or db_graph(db) == ([], [])


def test_first_start_imports_a_memorymesh_file_once(tmp_path: Path) -> None:
    source = tmp_path / "memory.json"
    source.write_bytes(MESH_FILE)
    store = Store.open(tmp_path / "memory.db")
    try:
        report = first_start_import(SqliteBackend(store), [source])
        assert report is not None and report.entities_created == 3 and report.relations_created == 2
        assert first_start_import(SqliteBackend(store), [source]) is None   # once
    finally:
        store.close()
    assert db_graph(tmp_path / "memory.db") == memorymesh_read(MESH_FILE)


def test_export_memorymesh_is_memorymeshs_file_byte_for_byte(tmp_path: Path) -> None:
    source = tmp_path / "memory.json"
    source.write_bytes(MESH_FILE)
    db = tmp_path / "graph.db"
    assert cli.main(["--database", str(db), "import", str(source)]) == 0
    out = tmp_path / "export.json"
    assert cli.main(["--database", str(db), "export", "--format", "memorymesh", "-o", str(out)]) == 0
    assert out.read_bytes() == MESH_FILE                      # export(import(file)) == file
    assert memorymesh_read(out.read_bytes()) == db_graph(db)


def test_export_memorymesh_then_import_into_a_new_database_keeps_everything(tmp_path: Path,
                                                                           capsysbinary: Any) -> None:
    db = tmp_path / "one.db"
    source = tmp_path / "memory.jsonl"
    source.write_bytes(REFERENCE_FILE)
    assert cli.main(["--database", str(db), "import", str(source)]) == 0
    capsysbinary.readouterr()
    assert cli.main(["--database", str(db), "export", "--format", "memorymesh"]) == 0
    exported, _ = capsysbinary.readouterr()
    assert exported == MESH_FILE
    copy = tmp_path / "copy.json"
    copy.write_bytes(exported)
    again = tmp_path / "two.db"
    assert cli.main(["--database", str(again), "import", str(copy)]) == 0
    assert db_graph(again) == db_graph(db)                    # import(export(db)) == db


def test_export_memorymesh_refuses_with_weights(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "graph.db"
    Store.open(db).close()
    with pytest.raises(SystemExit) as exit_:
        cli.main(["--database", str(db), "export", "--format", "memorymesh", "--with-weights"])
    assert exit_.value.code == 2 and "always writes weights" in capsys.readouterr().err
