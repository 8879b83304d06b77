"""``graph-memory export``: the reference server's format byte for byte, written atomically, and
the round trips import(export(db)) == db and export(import(file)) == file with duplicates merged.

The export is read back by :func:`upstream_read`, a pure-Python copy of the reference server's
``loadGraph`` (split on ``\\n``, skip blank lines, ``JSON.parse`` each, keep entities and
relations), so no code of ours judges its own output.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graph_memory import cli, importer, service
from graph_memory.db import graph
from graph_memory.db.backend import SqliteBackend
from graph_memory.db.store import Store
from graph_memory.importer import load_graph
from graph_memory.legacy import LegacyGraph
from graph_memory.logs import configure_logging
from graph_memory.models import Entity, Relation

from helpers import sample_path

Graph = tuple[list[dict[str, Any]], list[dict[str, Any]]]


@pytest.fixture(autouse=True)
def _quiet_logs() -> Any:
    yield
    configure_logging("warning", "console")


def upstream_read(data: bytes) -> Graph:
    """The reference server's loadGraph, in Python: what it would hold after reading ``data``."""
    entities: list[dict[str, Any]] = []
    relations: list[dict[str, Any]] = []
    for raw in data.decode("utf-8").split("\n"):
        if raw.strip() == "":
            continue
        item = json.loads(raw)
        if item["type"] == "entity":
            entities.append({"name": item["name"], "entityType": item["entityType"],
                             "observations": item["observations"]})
        elif item["type"] == "relation":
            relations.append({"from": item["from"], "to": item["to"], "relationType": item["relationType"]})
    return entities, relations


def merged(graph_: Graph) -> Graph:
    """Duplicates merged the way our import documents it: first position and type of a name,
    observations unioned in first-seen order; the first of each relation triple."""
    by_name: dict[str, dict[str, Any]] = {}
    for e in graph_[0]:
        seen = by_name.setdefault(e["name"], {"name": e["name"], "entityType": e["entityType"], "observations": []})
        for observation in e["observations"]:
            if observation not in seen["observations"]:
                seen["observations"].append(observation)
    triples: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in graph_[1]:
        triples.setdefault((r["from"], r["to"], r["relationType"]), r)
    return list(by_name.values()), list(triples.values())


def db_graph(path: Path) -> Graph:
    store = Store.open(path)
    try:
        g = store.run_read(graph.read_graph)
    finally:
        store.close()
    return [e.to_dict() for e in g.entities], [r.to_dict() for r in g.relations]


def fill(path: Path, entities: list[Entity], relations: list[Relation]) -> None:
    store = Store.open(path)
    try:
        load_graph(SqliteBackend(store), LegacyGraph(entities, relations), source="test")
    finally:
        store.close()


def export(db: Path, out: Path | None = None) -> tuple[int, bytes]:
    """Run ``graph-memory export`` in process; the bytes of the output file (or of ``out`` read back)."""
    target = out or db.with_name("export.jsonl")
    code = cli.main(["--database", str(db), "export", "-o", str(target)])
    return code, target.read_bytes() if target.exists() else b""


# -- the format, byte for byte --------------------------------------------------------------------

TRICKY_ENTITIES = [
    Entity("Zoë 🚀", "person", ['say "hi"', "back\\slash", "tab\there", "new\nline", "sep\u2028arator",
                               "ctl\x01\x1f", "del\x7f", "ünï"]),
    Entity("Empty", "thing", []),
]
TRICKY_RELATIONS = [Relation("Zoë 🚀", "Empty", "owns"), Relation("Empty", "Nowhere", "points_to", weight=0.5)]
# What the reference server's JSON.stringify writes for them: compact, keys in its order, non-ASCII
# raw, \b\t\n\f\r short escapes, other controls as lower-case \u00XX, U+2028 and DEL raw.
TRICKY_EXPECTED = (
    '{"type":"entity","name":"Zoë 🚀","entityType":"person","observations":["say \\"hi\\"","back\\\\slash",'
    '"tab\\there","new\\nline","sep\u2028arator","ctl\\u0001\\u001f","del\x7f","ünï"]}\n'
    '{"type":"entity","name":"Empty","entityType":"thing","observations":[]}\n'
    '{"type":"relation","from":"Zoë 🚀","to":"Empty","relationType":"owns"}\n'
    '{"type":"relation","from":"Empty","to":"Nowhere","relationType":"points_to"}\n'
).encode()


def test_export_writes_the_reference_format_byte_for_byte(db_path: Path, capsysbinary: Any) -> None:
    fill(db_path, TRICKY_ENTITIES, TRICKY_RELATIONS)
    assert cli.main(["--database", str(db_path), "export"]) == 0
    out, err = capsysbinary.readouterr()
    assert out == TRICKY_EXPECTED
    assert re.search(rb"exported 2 entities and 2 relations of \S+ to stdout", err)
    assert b"1 relation weight was not written" in err and b"--with-weights" in err


def test_export_to_a_file_has_the_same_bytes_and_no_temporary_file_left(db_path: Path, tmp_path: Path) -> None:
    fill(db_path, TRICKY_ENTITIES, TRICKY_RELATIONS)
    out = tmp_path / "out" / "memory.jsonl"
    out.parent.mkdir()
    code, data = export(db_path, out)
    assert code == 0 and data == TRICKY_EXPECTED
    assert sorted(p.name for p in out.parent.iterdir()) == ["memory.jsonl"]


def test_export_entities_then_relations_in_creation_order(db_path: Path) -> None:
    store = Store.open(db_path)
    store.run_write(lambda c: graph.create_entities(c, [Entity("B", "t", ["1"])]))
    store.run_write(lambda c: graph.create_relations(c, [Relation("B", "B", "self")]))
    store.run_write(lambda c: graph.create_entities(c, [Entity("A", "t", [])]))
    store.run_write(lambda c: graph.add_observations(c, [("B", ["2"])]))
    store.close()
    _, data = export(db_path)
    assert [json.loads(x)["type"] for x in data.splitlines()] == ["entity", "entity", "relation"]
    assert upstream_read(data) == ([{"name": "B", "entityType": "t", "observations": ["1", "2"]},
                                    {"name": "A", "entityType": "t", "observations": []}],
                                   [{"from": "B", "to": "B", "relationType": "self"}])


def test_export_of_an_empty_database_is_an_empty_file(db_path: Path) -> None:
    Store.open(db_path).close()
    assert export(db_path) == (0, b"")


def test_failed_export_keeps_the_previous_file_and_leaves_no_half_file(db_path: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    fill(db_path, TRICKY_ENTITIES, TRICKY_RELATIONS)
    out = tmp_path / "exports" / "memory.jsonl"
    out.parent.mkdir()
    out.write_bytes(b"previous export\n")

    def disk_full(entities: Any, relations: Any, stream: Any, **options: Any) -> int:
        stream.write('{"type":"entity","name":"half')
        stream.flush()
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(service, "write_legacy", disk_full)
    code = cli.main(["--database", str(db_path), "export", "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and "No space left on device" in err and "left as it was" in err
    assert out.read_bytes() == b"previous export\n"
    assert sorted(p.name for p in out.parent.iterdir()) == ["memory.jsonl"]


def test_export_replacing_a_file_keeps_its_permissions(db_path: Path, tmp_path: Path) -> None:
    fill(db_path, TRICKY_ENTITIES, [])
    out = tmp_path / "export.jsonl"   # not memory.jsonl: the file a first start would import
    out.write_bytes(b"old")
    out.chmod(0o600)
    assert export(db_path, out)[0] == 0
    assert out.stat().st_mode & 0o777 == 0o600


def test_export_refuses_a_missing_database_without_creating_it(db_path: Path, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["--database", str(db_path), "export", "-o", str(tmp_path / "x.jsonl")])
    assert code == 1 and "no database at" in capsys.readouterr().err
    assert not db_path.exists() and not (tmp_path / "x.jsonl").exists()


def test_export_refuses_to_overwrite_the_database_itself(db_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fill(db_path, TRICKY_ENTITIES, [])
    before = db_path.read_bytes()
    code = cli.main(["--database", str(db_path), "export", "-o", str(db_path)])
    assert code == 1 and "the database itself" in capsys.readouterr().err
    assert db_path.read_bytes() == before


# -- round trips ----------------------------------------------------------------------------------


WEIGHTED = [Relation("Zoë 🚀", "Empty", "owns", 0.1), Relation("Empty", "Zoë 🚀", "owned_by"),
            Relation("Empty", "Empty", "points_to", 0.0), Relation("Zoë 🚀", "Zoë 🚀", "is", 1 / 3)]


def weights(path: Path) -> dict[tuple[str, str, str], float]:
    store = Store.open(path)
    try:
        return {r.key: r.weight for r in store.run_read(graph.read_graph).relations}
    finally:
        store.close()


def test_export_with_weights_then_import_gives_the_same_weights(tmp_path: Path, capsysbinary: Any) -> None:
    first, second, out = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "full.jsonl"
    store = Store.open(first)  # written through the tools' path, with update_relations' evidence rule
    store.run_write(lambda c: graph.create_entities(c, TRICKY_ENTITIES))
    store.run_write(lambda c: graph.create_relations(c, WEIGHTED))
    store.run_write(lambda c: graph.update_relation_weights(c, [(WEIGHTED[1], 0.3)]))
    store.close()
    assert cli.main(["--database", str(first), "export", "--with-weights", "-o", str(out)]) == 0
    err = capsysbinary.readouterr().err
    assert re.search(rb"exported 2 entities and 4 relations of \S+ to", err) and b"with 4 relation weights" in err
    assert b"not written" not in err
    lines = out.read_bytes().splitlines()
    assert lines[2] == '{"type":"relation","from":"Zoë 🚀","to":"Empty","relationType":"owns","weight":0.1}'.encode()
    # what the reference server reads from it is what the default export gives
    assert upstream_read(out.read_bytes()) == upstream_read(export(first)[1])
    assert cli.main(["--database", str(second), "import", str(out)]) == 0
    assert weights(second) == weights(first) == {
        ("Zoë 🚀", "Empty", "owns"): 0.1, ("Empty", "Zoë 🚀", "owned_by"): 0.65,
        ("Empty", "Empty", "points_to"): 0.0, ("Zoë 🚀", "Zoë 🚀", "is"): 1 / 3}
    assert db_graph(second) == db_graph(first)
    # and the copy exports the very same bytes
    again = tmp_path / "again.jsonl"
    assert cli.main(["--database", str(second), "export", "--with-weights", "-o", str(again)]) == 0
    assert again.read_bytes() == out.read_bytes()


def test_first_start_reads_the_weights_of_a_full_export(tmp_path: Path) -> None:
    first, second, out = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "memory.jsonl"
    fill(first, TRICKY_ENTITIES, WEIGHTED)
    assert cli.main(["--database", str(first), "export", "--with-weights", "-o", str(out)]) == 0
    store = Store.open(second)
    try:
        report = importer.first_start_import(SqliteBackend(store), [out])
    finally:
        store.close()
    assert report is not None and report.relations_created == 4 and report.file["unknown_keys"] == 0
    assert weights(second) == weights(first)


def test_importing_a_relation_that_exists_keeps_the_weight_in_the_database(tmp_path: Path) -> None:
    db, source = tmp_path / "a.db", tmp_path / "memory.jsonl"
    fill(db, [], [Relation("A", "B", "r", 0.9)])
    source.write_text('{"type":"relation","from":"A","to":"B","relationType":"r","weight":0.2}\n'
                      '{"type":"relation","from":"B","to":"A","relationType":"r","weight":0.2}\n', encoding="utf-8")
    assert cli.main(["--database", str(db), "import", str(source)]) == 0
    assert weights(db) == {("A", "B", "r"): 0.9, ("B", "A", "r"): 0.2}


def test_an_invalid_weight_refuses_the_import_or_is_skipped_with_skip_invalid(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db, source = tmp_path / "a.db", tmp_path / "memory.jsonl"
    source.write_text('{"type":"relation","from":"A","to":"B","relationType":"r","weight":1.5}\n'
                      '{"type":"relation","from":"B","to":"A","relationType":"r","weight":0.5}\n', encoding="utf-8")
    assert cli.main(["--database", str(db), "import", str(source)]) == 1
    err = capsys.readouterr().err
    assert 'line 1: relation: field "weight" must be a number from 0 to 1, got 1.5' in err
    assert not db.exists()
    assert cli.main(["--database", str(db), "import", "--skip-invalid", str(source)]) == 0
    out = capsys.readouterr().out
    assert 'invalid line (skipped) 1: relation: field "weight" must be a number from 0 to 1, got 1.5' in out
    assert weights(db) == {("B", "A", "r"): 0.5}


def test_import_of_the_export_gives_the_same_graph(tmp_path: Path) -> None:
    first, second = tmp_path / "a.db", tmp_path / "b.db"
    store = Store.open(first)  # written through the tools' path, not the importer
    store.run_write(lambda c: graph.create_entities(c, TRICKY_ENTITIES))
    store.run_write(lambda c: graph.create_relations(c, [Relation("Zoë 🚀", "Empty", "owns")]))
    store.close()
    assert export(first, tmp_path / "export.jsonl")[0] == 0
    assert cli.main(["--database", str(second), "import", str(tmp_path / "export.jsonl")]) == 0
    assert db_graph(second) == db_graph(first)


def test_export_of_the_imported_sample_is_the_sample_with_duplicates_merged(db_path: Path, tmp_path: Path) -> None:
    source = sample_path().read_bytes()
    assert cli.main(["--database", str(db_path), "import", str(sample_path())]) == 0
    _, data = export(db_path, tmp_path / "export.jsonl")
    assert upstream_read(data) == merged(upstream_read(source))
    # lines the reference server wrote for entities without duplicates come back byte-identical
    exported = set(data.split(b"\n"))
    names = [json.loads(x).get("name") for x in source.split(b"\n")]
    clean = [x for x, n in zip(source.split(b"\n"), names, strict=True) if n is None or names.count(n) == 1]
    unchanged = [x for x in clean if x in exported]
    assert len(unchanged) > 0.9 * len(clean)
    assert sample_path().read_bytes() == source


def test_export_of_an_imported_file_merges_its_duplicates(db_path: Path, tmp_path: Path) -> None:
    path = tmp_path / "memory.jsonl"
    lines = [
        '{"type":"entity","name":"A","entityType":"t","observations":["1","2","1"]}',
        '{"type":"relation","from":"A","to":"B","relationType":"r"}',
        '{"type":"entity","name":"B","entityType":"u","observations":[]}',
        '{"type":"entity","name":"A","entityType":"other","observations":["3","2"]}',
        '{"type":"relation","from":"A","to":"B","relationType":"r"}',
    ]
    path.write_text("\n".join(lines), encoding="utf-8")
    assert cli.main(["--database", str(db_path), "import", str(path)]) == 0
    _, data = export(db_path)
    assert data == (
        b'{"type":"entity","name":"A","entityType":"t","observations":["1","2","3"]}\n'
        b'{"type":"entity","name":"B","entityType":"u","observations":[]}\n'
        b'{"type":"relation","from":"A","to":"B","relationType":"r"}\n'
    )
    assert upstream_read(data) == merged(upstream_read(path.read_bytes()))


_TRICKY = st.sampled_from(["\u2028", "\u2029", "\r", "\n", "\x85", '"', "\\", "🚀", "\x1f", "\ufeff", "é", "İ",
                           "ß", "\x00", " "])
_TEXT = st.text(alphabet=st.one_of(st.characters(codec="utf-8"), _TRICKY), max_size=12)
_ENTITIES = st.lists(st.builds(Entity, _TEXT, _TEXT, st.lists(_TEXT, unique=True, max_size=4)),
                     unique_by=lambda e: e.name, max_size=6)
_RELATIONS = st.lists(st.builds(Relation, _TEXT, _TEXT, _TEXT), unique_by=lambda r: r.key, max_size=6)


@settings(max_examples=30, deadline=None)
@given(entities=_ENTITIES, relations=_RELATIONS)
def test_random_unicode_graphs_survive_import_export_import(entities: list[Entity],
                                                            relations: list[Relation]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        source = tmp / "source.jsonl"
        with open(source, "w", encoding="utf-8", newline="") as out:
            for e in entities:
                out.write(json.dumps({"type": "entity", **e.to_dict()}, ensure_ascii=False) + "\n")
            for r in relations:
                out.write(json.dumps({"type": "relation", **r.to_dict()}, ensure_ascii=False) + "\n")
        first, second = tmp / "first.db", tmp / "second.db"
        assert cli.main(["--database", str(first), "import", str(source)]) == 0
        code, data = export(first, tmp / "export.jsonl")
        assert code == 0
        expected = ([e.to_dict() for e in entities], [r.to_dict() for r in relations])
        assert upstream_read(data) == expected
        assert cli.main(["--database", str(second), "import", str(tmp / "export.jsonl")]) == 0
        assert db_graph(second) == db_graph(first) == expected
        assert export(second, tmp / "again.jsonl")[1] == data
        assert not any(name.endswith(".tmp") for name in os.listdir(folder))


def test_export_and_backup_never_replace_a_device_or_named_pipe(db_path: Path, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """`export -o /dev/null` renamed its finished file over the device: run as root, /dev/null
    became a regular file for every program (found by QA). A named pipe stands in for the device
    here: export writes into it; backup refuses it (a database file goes there)."""
    import os
    import stat
    import threading

    fill(db_path, TRICKY_ENTITIES, [])
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    assert cli.main(["--database", str(db_path), "export", "-o", str(fifo)]) == 0
    reader.join(timeout=30)
    assert stat.S_ISFIFO(fifo.lstat().st_mode) and len(received[0].splitlines()) == len(TRICKY_ENTITIES)
    assert cli.main(["--database", str(db_path), "backup", "--force", str(fifo)]) == 1
    assert "not a regular file" in capsys.readouterr().err and stat.S_ISFIFO(fifo.lstat().st_mode)
    # Through a symbolic link, as /dev/stdout is one: the pipe it names is written into.
    link = tmp_path / "stdout"
    link.symlink_to(fifo)
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    assert cli.main(["--database", str(db_path), "export", "-o", str(link)]) == 0
    reader.join(timeout=30)
    assert link.is_symlink() and stat.S_ISFIFO(fifo.lstat().st_mode) and received[1] == received[0]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_an_export_over_the_legacy_file_that_cannot_be_recorded_says_so(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """QA: with the database locked by another process the export's record failed, said only by
    an info log; the next export over the file was then refused as another program's change."""
    import apsw

    legacy = tmp_path / "memory.jsonl"
    legacy.write_text('{"type":"entity","name":"A","entityType":"t","observations":["x"]}\n', encoding="utf-8")
    db = tmp_path / "memory.db"
    assert cli.main(["--database", str(db), "import", str(legacy)]) == 0
    holder = apsw.Connection(str(db))
    holder.execute("BEGIN IMMEDIATE")
    try:
        os.environ["MEMORY_BUSY_TIMEOUT_MS"] = "100"
        code = cli.main(["--database", str(db), "export", "-o", str(legacy)])
    finally:
        del os.environ["MEMORY_BUSY_TIMEOUT_MS"]
        holder.execute("ROLLBACK")
        holder.close()
    err = capsys.readouterr().err
    assert code == 0 and "is the database's legacy file, and what was written could not be recorded" in err
    assert "locked" in err
