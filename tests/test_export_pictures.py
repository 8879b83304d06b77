"""``graph-memory export --format mermaid|dot``: well-formed pictures of the whole graph or of the
neighbourhood of named entities, whatever text the names, types and relation types hold."""

from __future__ import annotations

import itertools
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graph_memory import cli
from graph_memory.db import graph
from graph_memory.db.backend import SqliteBackend
from graph_memory.db.store import Store
from graph_memory.importer import load_graph
from graph_memory.legacy import LegacyGraph
from graph_memory.logs import configure_logging
from graph_memory.models import Entity, Relation
from graph_memory.pictures import dot_text, mermaid_text

from helpers import install_debian_package

HOSTILE = [
    'Ann "The" <b>',
    "Bob\nsecond line\r\nthird [x] {y} (z) | pipe # hash ; semi `tick` --> arrow",
    "back\\slash \\n not a newline \\",
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(1)>",
    "東京 🎉 Zoë",
    "end",
    "tab\there \x01 control",
]


@pytest.fixture(autouse=True)
def _quiet_logs() -> Any:
    yield
    configure_logging("warning", "console")


def seed(path: Path) -> None:
    """A chain HOSTILE[0] → HOSTILE[1] → … (types hostile too), plus a dangling relation."""
    store = Store.open(path)
    store.run_write(lambda c: graph.create_entities(c, [Entity(n, f"type {n}", ["obs"]) for n in HOSTILE]))
    store.run_write(lambda c: graph.create_relations(c, [
        Relation(a, b, f'rel "{i}" <{a}>', 0.5 if i == 1 else 1.0)
        for i, (a, b) in enumerate(itertools.pairwise(HOSTILE))]))
    load_graph(SqliteBackend(store), LegacyGraph([], [Relation(HOSTILE[0], "Ghost", "fears")]), source="test")
    store.close()


def export(capsys: pytest.CaptureFixture[str], db: Path, *args: str) -> tuple[int, str, str]:
    code = cli.main(["export", "--database", str(db), *args])
    out, err = capsys.readouterr()
    return code, out, err


# -- decoding the two languages' labels back (what a renderer shows) ----------------------------------

MERMAID_NODE = re.compile(r'^    (n\d+)\["([^"\n]*)"\]$')
MERMAID_EDGE = re.compile(r'^    (n\d+) -->\|"([^"\n]*)"\| (n\d+)$')
DOT_STRING = r'"((?:[^"\\\n]|\\.)*)"'
DOT_NODE = re.compile(rf"^    (n\d+) \[label={DOT_STRING}\];$")
DOT_EDGE = re.compile(rf"^    (n\d+) -> (n\d+) \[label={DOT_STRING}\];$")


def mermaid_decode(label: str) -> str:
    assert not re.search(r"[<>&\"`|]", label.replace("<br>", "")), label  # no markup, no early end
    return re.sub(r"#(\d+);", lambda m: chr(int(m.group(1))), label.replace("<br>", "\n"))


def dot_decode(label: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), label)


def shown(text: str) -> str:
    """What a picture can show of ``text``: line breaks normalised, control characters as U+FFFD."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "".join(c if c.isprintable() or c in "\n\t" else "\ufffd" for c in text)


def parse_mermaid(text: str) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    lines = text.splitlines()
    assert lines[0] == "flowchart LR"
    nodes: dict[str, str] = {}
    edges: list[tuple[str, str, str]] = []
    for line in lines[1:]:
        if m := MERMAID_NODE.match(line):
            nodes[m.group(1)] = mermaid_decode(m.group(2))
        elif m := MERMAID_EDGE.match(line):
            edges.append((nodes[m.group(1)], mermaid_decode(m.group(2)), nodes[m.group(3)]))
        else:
            raise AssertionError(f"not a node or edge line: {line!r}")
    return nodes, edges


def parse_dot(text: str) -> tuple[dict[str, str], list[tuple[str, str, str]]]:
    lines = text.splitlines()
    assert lines[:4] == ["digraph memory {", '    charset="UTF-8";', "    rankdir=LR;",
                         '    node [shape=box, style="rounded"];'] and lines[-1] == "}"
    nodes: dict[str, str] = {}
    edges: list[tuple[str, str, str]] = []
    for line in lines[4:-1]:
        if m := DOT_NODE.match(line):
            nodes[m.group(1)] = dot_decode(m.group(2))
        elif m := DOT_EDGE.match(line):
            edges.append((nodes[m.group(1)], dot_decode(m.group(3)), nodes[m.group(2)]))
        else:
            raise AssertionError(f"not a node or edge line: {line!r}")
    return nodes, edges


PARSERS = {"mermaid": parse_mermaid, "dot": parse_dot}


@pytest.mark.parametrize("fmt", ["mermaid", "dot"])
def test_whole_graph_picture_shows_every_entity_and_relation_with_hostile_text_intact(
        capsys: pytest.CaptureFixture[str], db_path: Path, fmt: str) -> None:
    seed(db_path)
    code, out, err = export(capsys, db_path, "--format", fmt)
    assert code == 0, err
    assert re.search(f"exported {len(HOSTILE)} entities and {len(HOSTILE)} relations of \\S+ to stdout as {fmt}", err)
    nodes, edges = PARSERS[fmt](out)
    labels = sorted(nodes.values())
    assert labels == sorted([shown(f"{n}\n[type {n}]") for n in HOSTILE] + ["Ghost"])
    expected = [(shown(f"{a}\n[type {a}]"), shown(f'rel "{i}" <{a}>' + (" (0.5)" if i == 1 else "")),
                 shown(f"{b}\n[type {b}]")) for i, (a, b) in enumerate(itertools.pairwise(HOSTILE))]
    assert edges == [*expected, (shown(f"{HOSTILE[0]}\n[type {HOSTILE[0]}]"), "fears", "Ghost")]


@pytest.mark.parametrize(("hops", "expected"), [("0", HOSTILE[2:3]), ("1", HOSTILE[1:4]), ("2", HOSTILE[0:5])])
def test_entity_neighbourhood_reaches_hops_relations_in_both_directions(
        capsys: pytest.CaptureFixture[str], db_path: Path, hops: str, expected: list[str]) -> None:
    seed(db_path)
    code, out, err = export(capsys, db_path, "--format", "dot", "--entity", HOSTILE[2], "--hops", hops)
    assert code == 0, err
    nodes, edges = parse_dot(out)
    assert sorted(nodes.values()) == sorted(shown(f"{n}\n[type {n}]") for n in expected)
    assert len(edges) == len(expected) - 1   # the chain between them, nothing to outside entities


def test_several_entities_and_default_hops_of_one(capsys: pytest.CaptureFixture[str], db_path: Path) -> None:
    seed(db_path)
    code, out, _ = export(capsys, db_path, "--format", "mermaid", "--entity", HOSTILE[0], "--entity", HOSTILE[7])
    assert code == 0
    nodes, _ = parse_mermaid(out)
    # Ghost: a dangling relation's end (no entity has that name), drawn without a type
    assert sorted(nodes.values()) == sorted([shown(f"{n}\n[type {n}]") for n in
                                             [HOSTILE[0], HOSTILE[1], HOSTILE[6], HOSTILE[7]]] + ["Ghost"])


def test_neighbourhood_export_as_jsonl_holds_full_entities(capsys: pytest.CaptureFixture[str], db_path: Path) -> None:
    seed(db_path)
    code, out, _ = export(capsys, db_path, "--entity", HOSTILE[5], "--hops", "1")
    assert code == 0
    assert out.count('"type":"entity"') == 3 and out.count('"type":"relation"') == 2
    assert '"observations":["obs"]' in out


def test_unknown_entity_is_refused_naming_it(capsys: pytest.CaptureFixture[str], db_path: Path) -> None:
    seed(db_path)
    code, out, err = export(capsys, db_path, "--format", "dot", "--entity", "Nobody")
    assert (code, out) == (1, "")
    assert "Entity with name Nobody not found" in err


@pytest.mark.parametrize(("args", "message"), [
    (["--hops", "2"], "--hops needs --entity"),
    (["--format", "dot", "--with-weights"], "--with-weights is for --format jsonl"),
    (["--format", "png"], "invalid choice"),
])
def test_contradicting_options_are_usage_errors(capsys: pytest.CaptureFixture[str], db_path: Path,
                                                args: list[str], message: str) -> None:
    seed(db_path)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["export", "--database", str(db_path), *args])
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_negative_hops_is_refused(capsys: pytest.CaptureFixture[str], db_path: Path) -> None:
    seed(db_path)
    code, _, err = export(capsys, db_path, "--format", "dot", "--entity", HOSTILE[0], "--hops", "-1")
    assert code == 1 and "--hops must be 0 or more" in err


def test_picture_to_a_file_is_written_whole(capsys: pytest.CaptureFixture[str], db_path: Path, tmp_path: Path) -> None:
    seed(db_path)
    target = tmp_path / "memory.mmd"
    code, out, _ = export(capsys, db_path, "--format", "mermaid", "-o", str(target))
    assert (code, out) == (0, "")
    nodes, edges = parse_mermaid(target.read_text(encoding="utf-8"))
    assert len(nodes) == len(HOSTILE) + 1 and len(edges) == len(HOSTILE)


@pytest.fixture(scope="session")
def dot() -> str:
    """Graphviz's dot, installed from Debian's package when missing (as the browser tests get Chromium)."""
    if shutil.which("dot") is None and (problem := install_debian_package("graphviz")) is not None:
        pytest.skip(problem)
    found = shutil.which("dot")
    if found is None:
        pytest.skip("Graphviz's dot is not installed (apt-get install graphviz)")
    return found


def test_graphviz_renders_the_dot_export(capsys: pytest.CaptureFixture[str], db_path: Path, dot: str) -> None:
    seed(db_path)
    _, out, _ = export(capsys, db_path, "--format", "dot")
    svg = subprocess.run([dot, "-Tsvg"], input=out.encode(), capture_output=True, check=True).stdout.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in svg and "<script>" not in svg
    assert "東京 🎉 Zoë" in svg and "back\\slash \\n not a newline \\" in svg


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_any_text_survives_both_label_encodings(text: str) -> None:
    assert mermaid_decode(mermaid_text(text)) == shown(text)
    encoded = dot_text(text)
    assert re.fullmatch(r'(?:[^"\\\n]|\\.)*', encoded)   # stays inside one quoted string
    assert dot_decode(encoded) == shown(text)
