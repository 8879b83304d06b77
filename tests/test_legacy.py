"""Reading and writing the reference server's memory file (graph_memory.legacy)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graph_memory.errors import LegacyFormatError
from graph_memory.legacy import (
    LegacyGraph,
    LineDigester,
    SkippedLine,
    iter_legacy_lines,
    line_digests,
    parse_legacy,
    read_legacy,
    write_legacy,
)
from graph_memory.models import Entity, Relation

SAMPLE = Path(__file__).resolve().parent / "data" / "upstream-memory.jsonl"


def line(obj: dict[str, Any]) -> str:
    """One line as the reference server writes it (JSON.stringify, no trailing newline)."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def ent(name: str, entity_type: str = "person", observations: list[Any] | None = None, **extra: Any) -> str:
    return line(
        {
            "type": "entity",
            "name": name,
            "entityType": entity_type,
            "observations": observations or [],
            **extra,
        }
    )


def rel(source: str, target: str, relation_type: str = "knows", **extra: Any) -> str:
    return line({"type": "relation", "from": source, "to": target, "relationType": relation_type, **extra})


def write_file(tmp_path: Path, data: bytes, name: str = "memory.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def entity_tuples(graph: LegacyGraph) -> list[tuple[str, str, list[str]]]:
    return [(e.name, e.entity_type, e.observations) for e in graph.entities]


def relation_keys(graph: LegacyGraph) -> list[tuple[str, str, str]]:
    return [r.key for r in graph.relations]


BASIC = [ent("Alice", "person", ["likes tea"]), ent("Bob", "person", []), rel("Alice", "Bob")]
BASIC_ENTITIES = [("Alice", "person", ["likes tea"]), ("Bob", "person", [])]


# --- line splitting and encoding tolerance -----------------------------------------------------


def test_crlf_line_endings_are_tolerated(tmp_path: Path) -> None:
    path = write_file(tmp_path, ("\r\n".join(BASIC) + "\r\n").encode())
    graph = read_legacy(path)
    assert entity_tuples(graph) == BASIC_ENTITIES
    assert relation_keys(graph) == [("Alice", "Bob", "knows")]
    assert graph.lines == 3
    assert graph.invalid_lines == [] and graph.skipped_lines == []


def test_only_one_trailing_carriage_return_is_stripped_and_inner_cr_is_data(tmp_path: Path) -> None:
    path = write_file(tmp_path, (ent("A", "t", ["a\rb"]) + "\r\n").encode())
    assert entity_tuples(read_legacy(path)) == [("A", "t", ["a\rb"])]


def test_utf8_bom_at_start_is_tolerated(tmp_path: Path) -> None:
    path = write_file(tmp_path, b"\xef\xbb\xbf" + "\n".join(BASIC).encode())
    graph = read_legacy(path)
    assert entity_tuples(graph) == BASIC_ENTITIES
    assert graph.lines == 3


def test_blank_and_whitespace_only_lines_are_ignored(tmp_path: Path) -> None:
    text = "\n" + BASIC[0] + "\n\n   \n\t\r\n" + BASIC[1] + "\n \n" + BASIC[2] + "\n\n"
    graph = read_legacy(write_file(tmp_path, text.encode()))
    assert entity_tuples(graph) == BASIC_ENTITIES
    assert relation_keys(graph) == [("Alice", "Bob", "knows")]
    assert graph.lines == 9
    assert graph.skipped_lines == [] and graph.invalid_lines == []


def test_missing_final_newline_is_tolerated(tmp_path: Path) -> None:
    with_newline = read_legacy(write_file(tmp_path, ("\n".join(BASIC) + "\n").encode(), "a.jsonl"))
    without = read_legacy(write_file(tmp_path, "\n".join(BASIC).encode(), "b.jsonl"))
    assert entity_tuples(without) == entity_tuples(with_newline) == BASIC_ENTITIES
    assert relation_keys(without) == relation_keys(with_newline)
    assert without.lines == with_newline.lines == 3


def test_empty_file_is_an_empty_graph() -> None:
    graph = parse_legacy(b"")
    assert graph.entities == [] and graph.relations == [] and graph.lines == 0


def test_line_separators_and_control_characters_inside_strings_are_data(tmp_path: Path) -> None:
    # U+2028 / U+2029 are written raw by JSON.stringify, \x1f as \u001f: none of them splits a line.
    observations = ["before\u2028after", "para\u2029graph", "unit\x1fsep", "nel\x85next", "ff\x0c"]
    source = [ent("Zoë\u2028", "odd\u2029type", observations), rel("Zoë\u2028", "x\x1fy", "r\u2028")]
    data = ("\n".join(source) + "\n").encode()
    assert b"\\u001f" in data and "\u2028".encode() in data
    graph = read_legacy(write_file(tmp_path, data))
    assert entity_tuples(graph) == [("Zoë\u2028", "odd\u2029type", observations)]
    assert relation_keys(graph) == [("Zoë\u2028", "x\x1fy", "r\u2028")]
    assert graph.lines == 2
    assert "".join(iter_legacy_lines(graph.entities, graph.relations)).encode() == data


def test_raw_control_characters_inside_strings_are_accepted(tmp_path: Path) -> None:
    # A hand-edited file may hold a raw TAB or \x1f inside a string; it is data, not an error.
    data = b'{"type":"entity","name":"A","entityType":"t","observations":["a\tb","c\x1fd"]}\n'
    assert entity_tuples(read_legacy(write_file(tmp_path, data))) == [("A", "t", ["a\tb", "c\x1fd"])]


def test_very_long_line_is_read_whole(tmp_path: Path) -> None:
    big = "é" * 500_000 + "x" * 1_000_000
    graph = read_legacy(write_file(tmp_path, (ent("Big", "blob", [big]) + "\n" + rel("Big", "Big")).encode()))
    assert graph.entities[0].observations == [big]
    assert len(graph.entities[0].observations[0]) == 1_500_000
    assert relation_keys(graph) == [("Big", "Big", "knows")]


# --- reconciliation ----------------------------------------------------------------------------


def test_duplicate_entity_lines_merge_keeping_first_position_and_type(tmp_path: Path) -> None:
    text = "\n".join(
        [
            ent("A", "person", ["a1", "a2"]),
            ent("B", "place", ["b1"]),
            ent("A", "robot", ["a2", "a3"]),
            ent("C", "thing", []),
            ent("A", "person", ["a4", "a1"]),
        ]
    )
    graph = read_legacy(write_file(tmp_path, text.encode()))
    assert entity_tuples(graph) == [
        ("A", "person", ["a1", "a2", "a3", "a4"]),
        ("B", "place", ["b1"]),
        ("C", "thing", []),
    ]
    assert graph.merged_entities == 2
    assert graph.type_conflicts == 1
    assert graph.collapsed_observations == 2  # "a2" on line 3, "a1" on line 5
    assert graph.observation_count == 5


def test_duplicate_observations_inside_one_entity_collapse_in_first_order(tmp_path: Path) -> None:
    graph = read_legacy(write_file(tmp_path, ent("A", "t", ["x", "y", "x", "z", "y", "x"]).encode()))
    assert entity_tuples(graph) == [("A", "t", ["x", "y", "z"])]
    assert graph.collapsed_observations == 3
    assert graph.merged_entities == 0


def test_duplicate_relation_lines_keep_the_first(tmp_path: Path) -> None:
    text = "\n".join(
        [ent("A"), ent("B"), rel("A", "B"), rel("B", "A"), rel("A", "B"), rel("A", "B", "likes")]
    )
    graph = read_legacy(write_file(tmp_path, text.encode()))
    assert relation_keys(graph) == [("A", "B", "knows"), ("B", "A", "knows"), ("A", "B", "likes")]
    assert graph.duplicate_relations == 1


def test_relations_to_missing_entities_are_kept_and_counted(tmp_path: Path) -> None:
    text = "\n".join(
        [
            rel("A", "Later"),  # "Later" is defined after the relation: not dangling
            ent("A"),
            rel("A", "Ghost"),
            rel("Phantom", "A", "haunts"),
            rel("Nobody", "Nowhere"),
            ent("Later"),
        ]
    )
    graph = read_legacy(write_file(tmp_path, text.encode()))
    assert relation_keys(graph) == [
        ("A", "Later", "knows"),
        ("A", "Ghost", "knows"),
        ("Phantom", "A", "haunts"),
        ("Nobody", "Nowhere", "knows"),
    ]
    assert graph.dangling_relations == 3
    assert [e.name for e in graph.entities] == ["A", "Later"]


def test_unknown_or_missing_type_lines_are_skipped_with_their_line_numbers(tmp_path: Path) -> None:
    text = "\n".join(
        [
            ent("A"),
            line({"type": "note", "text": "hello"}),
            line({"name": "B", "entityType": "t", "observations": []}),
            line({"type": 7}),
            rel("A", "A"),
        ]
    )
    graph = read_legacy(write_file(tmp_path, text.encode()))
    assert [s.line for s in graph.skipped_lines] == [2, 3, 4]
    assert "note" in graph.skipped_lines[0].reason
    assert "type" in graph.skipped_lines[1].reason
    assert [e.name for e in graph.entities] == ["A"]
    assert relation_keys(graph) == [("A", "A", "knows")]
    assert graph.invalid_lines == []


def test_unknown_keys_are_ignored_and_counted(tmp_path: Path) -> None:
    text = "\n".join([ent("A", "t", ["o"], id=1, extra={"x": 1}), rel("A", "A", weight=0.5, note="n"), ent("B")])
    graph = read_legacy(write_file(tmp_path, text.encode()))
    assert graph.unknown_keys == 3  # a relation's weight is read, not counted as unknown
    assert entity_tuples(graph) == [("A", "t", ["o"]), ("B", "person", [])]
    assert graph.relations == [Relation("A", "A", "knows", weight=0.5)]


def test_a_relation_weight_is_read_back_and_the_first_line_of_a_triple_wins() -> None:
    text = "\n".join([rel("A", "B", weight=0.25), rel("A", "B", weight=0.75), rel("B", "A", weight=0),
                      rel("A", "A", weight=1), rel("B", "B", weight=-0.0), rel("C", "C"),
                      rel("D", "D", weight=None)])   # null, as MemoryMesh writes it: the default
    graph = parse_legacy(text.encode())
    assert [(r.key, r.weight) for r in graph.relations] == [
        (("A", "B", "knows"), 0.25), (("B", "A", "knows"), 0.0), (("A", "A", "knows"), 1.0),
        (("B", "B", "knows"), 0.0), (("C", "C", "knows"), 1.0), (("D", "D", "knows"), 1.0)]
    assert graph.duplicate_relations == 1 and graph.unknown_keys == 0
    assert all(type(r.weight) is float for r in graph.relations)
    document = json.dumps({"entities": [], "relations": [{"from": "A", "to": "B", "relationType": "r",
                                                          "weight": 0.5}]})
    assert parse_legacy(document.encode()).relations == [Relation("A", "B", "r", 0.5)]


@pytest.mark.parametrize(("weight", "shown"), [
    ("1.5", "1.5"), ("-0.1", "-0.1"), ("2", "2"),     # out of the range the tools and the database enforce
    ("NaN", "NaN"), ("Infinity", "Infinity"), ("1e400", "Infinity"),  # Python's reader accepts these
    ("true", "boolean"), ('"0.5"', "string"), ("[0.5]", "array"), ("{}", "object"),
])
def test_an_invalid_relation_weight_is_an_invalid_line_with_its_reason(weight: str, shown: str) -> None:
    bad = '{"type":"relation","from":"A","to":"B","relationType":"r","weight":' + weight + "}"
    text = "\n".join([ent("A"), bad, rel("A", "A")])
    with pytest.raises(LegacyFormatError) as caught:
        parse_legacy(text.encode())
    assert caught.value.line == 2
    assert f'relation: field "weight" must be a number from 0 to 1, got {shown}' in str(caught.value)
    graph = parse_legacy(text.encode(), skip_invalid=True)
    assert graph.invalid_lines == [
        SkippedLine(2, f'relation: field "weight" must be a number from 0 to 1, got {shown}')]
    assert relation_keys(graph) == [("A", "A", "knows")]


def test_empty_names_are_kept_as_the_reference_server_stores_them(tmp_path: Path) -> None:
    graph = read_legacy(write_file(tmp_path, "\n".join([ent("", ""), rel("", "", "")]).encode()))
    assert entity_tuples(graph) == [("", "", [])]
    assert relation_keys(graph) == [("", "", "")]
    assert graph.dangling_relations == 0


# --- refusals ----------------------------------------------------------------------------------


def test_missing_entity_name_is_refused_with_line_and_field(tmp_path: Path) -> None:
    bad = line({"type": "entity", "entityType": "t", "observations": []})
    path = write_file(tmp_path, "\n".join([ent("A"), ent("B"), bad, ent("C")]).encode())
    with pytest.raises(LegacyFormatError) as caught:
        read_legacy(path)
    assert caught.value.line == 3
    assert caught.value.path == str(path)
    assert '"name"' in caught.value.reason and "missing" in caught.value.reason
    assert "line 3" in str(caught.value)


@pytest.mark.parametrize(
    ("observations", "expected"),
    [
        ("just a string", "got string"),
        (None, "got null"),
        (["ok", 3], "item 1 is number"),
        (["ok", ["nested"]], "item 1 is array"),
    ],
)
def test_observations_that_are_not_a_list_of_strings_are_refused(observations: Any, expected: str) -> None:
    bad = line({"type": "entity", "name": "A", "entityType": "t", "observations": observations})
    with pytest.raises(LegacyFormatError) as caught:
        parse_legacy(("\n" + bad).encode())
    assert caught.value.line == 2
    assert '"observations"' in caught.value.reason and expected in caught.value.reason


@pytest.mark.parametrize("missing", ["from", "to", "relationType"])
def test_relation_missing_a_field_is_refused(missing: str) -> None:
    obj = {"type": "relation", "from": "A", "to": "B", "relationType": "r"}
    del obj[missing]
    with pytest.raises(LegacyFormatError) as caught:
        parse_legacy((ent("A") + "\n" + line(obj)).encode())
    assert caught.value.line == 2 and f'"{missing}"' in caught.value.reason


def test_non_string_entity_type_is_refused() -> None:
    bad = line({"type": "entity", "name": "A", "entityType": 5, "observations": []})
    with pytest.raises(LegacyFormatError) as caught:
        parse_legacy(bad.encode())
    assert (
        caught.value.line == 1 and '"entityType"' in caught.value.reason and "number" in caught.value.reason
    )


def test_invalid_utf8_reads_as_u_fffd_and_names_its_line(tmp_path: Path) -> None:
    first = b"\xef\xbb\xbf" + ent("Zoë 🚀").encode() + b"\r\n"
    second = b'{"type":"entity","name":"caf\xc3\xa9 \xc3(","entityType":"t","observations":[]}\n'
    path = write_file(tmp_path, first + second + ent("C").encode())
    graph = read_legacy(path)
    assert [e.name for e in graph.entities] == ["Zoë 🚀", "café \ufffd(", "C"]
    assert graph.replaced_utf8_lines == [2] and graph.summary()["replaced_utf8_lines"] == 1
    assert graph.invalid_lines == [] and graph.lines == 3


def test_a_cut_string_is_refused_with_its_column_said_once() -> None:
    with pytest.raises(LegacyFormatError) as caught:
        parse_legacy(b'{"type":"entity","name":"A","entityType":"t","observations":[]}\n{"type":"entity","name":"B')
    assert caught.value.line == 2
    assert "not valid JSON: Unterminated string starting at column 25" in caught.value.reason, caught.value.reason


def test_two_json_objects_on_one_line_are_refused_with_the_line_number() -> None:
    data = "\n".join([ent("A"), ent("B"), ent("C") + ent("D"), ent("E")]).encode()
    with pytest.raises(LegacyFormatError) as caught:
        parse_legacy(data)
    assert caught.value.line == 3
    assert "two JSON values on one line" in caught.value.reason


@pytest.mark.parametrize(
    ("bad", "expected"),
    [
        ('{"type":"entity","name":"A"', "not valid JSON"),
        ("hello", "not valid JSON"),
        ('["type","entity"]', "not a JSON object (got array)"),
        ('"just a string"', "not a JSON object (got string)"),
        ('{"type":"relation","from":"A","to":"B","relationType":"r"} trailing', "unexpected data"),
    ],
)
def test_a_line_that_is_not_one_json_object_is_refused(bad: str, expected: str) -> None:
    with pytest.raises(LegacyFormatError) as caught:
        parse_legacy(f"{ent('A')}\n{bad}\n{ent('B')}".encode())
    assert caught.value.line == 2
    assert expected in caught.value.reason


def test_unpaired_surrogate_is_replaced_with_u_fffd_and_counted() -> None:
    cut = '{"type":"entity","name":"A","entityType":"t","observations":["ok","x\\ud800y"]}'
    graph = parse_legacy(f"{ent('B')}\n{cut}".encode())
    assert [(e.name, e.observations) for e in graph.entities] == [("B", []), ("A", ["ok", "x\ufffdy"])]
    assert graph.replaced_surrogates == 1 and graph.invalid_lines == []


def test_escaped_surrogate_pairs_are_decoded_to_the_character() -> None:
    data = b'{"type":"relation","from":"\\ud83d\\ude80","to":"b","relationType":"r"}'
    assert relation_keys(parse_legacy(data)) == [("🚀", "b", "r")]


def test_unreadable_path_is_refused_with_the_path(tmp_path: Path) -> None:
    missing = tmp_path / "nope.jsonl"
    with pytest.raises(LegacyFormatError) as caught:
        read_legacy(missing)
    assert caught.value.path == str(missing)
    assert "cannot read" in caught.value.reason
    with pytest.raises(LegacyFormatError):
        read_legacy(tmp_path)  # a directory


# --- skip_invalid ------------------------------------------------------------------------------


def test_skip_invalid_lists_bad_lines_and_keeps_the_good_ones(tmp_path: Path) -> None:
    lines = [
        ent("A", "t", ["a"]),
        "not json",
        ent("B") + ent("C"),
        line({"type": "entity", "entityType": "t", "observations": []}),
        line({"type": "note"}),
        rel("A", "D"),
        line({"type": "relation", "from": "A", "to": 1, "relationType": "r"}),
        ent("D"),
    ]
    data = "\n".join(lines).encode()
    graph = read_legacy(write_file(tmp_path, data), skip_invalid=True)
    assert entity_tuples(graph) == [("A", "t", ["a"]), ("D", "person", [])]
    assert relation_keys(graph) == [("A", "D", "knows")]
    assert [s.line for s in graph.invalid_lines] == [2, 3, 4, 7]
    assert "two JSON values" in graph.invalid_lines[1].reason
    assert '"name"' in graph.invalid_lines[2].reason
    assert '"to"' in graph.invalid_lines[3].reason
    assert graph.skipped_lines == [SkippedLine(5, 'unknown type "note"')]
    assert graph.summary()["invalid_lines"] == 4
    with pytest.raises(LegacyFormatError):
        parse_legacy(data)


def test_invalid_utf8_in_a_crlf_file_with_a_bom_is_read_as_u_fffd_in_its_line() -> None:
    first = b"\xef\xbb\xbf" + ent("A").encode() + b"\n"
    second = b'{"type":"entity","name":"\xff","entityType":"t","observations":[]}\r\n'
    third = ent("B").encode() + b"\n"
    fourth = rel("A", "B").encode()
    for skip_invalid in (False, True):
        graph = parse_legacy(first + second + third + fourth, skip_invalid=skip_invalid)
        assert [e.name for e in graph.entities] == ["A", "\ufffd", "B"]
        assert relation_keys(graph) == [("A", "B", "knows")]
        assert graph.invalid_lines == [] and graph.replaced_utf8_lines == [2]
        assert graph.lines == 4


# --- the single-document form ------------------------------------------------------------------


def test_single_json_document_form_is_imported(tmp_path: Path) -> None:
    doc = {
        "entities": [
            {"name": "A", "entityType": "person", "observations": ["x", "x", "y"]},
            {"name": "B", "entityType": "place", "observations": [], "id": 3},
            {"name": "A", "entityType": "person", "observations": ["z"]},
        ],
        "relations": [
            {"from": "A", "to": "B", "relationType": "visits"},
            {"from": "A", "to": "Q", "relationType": "knows"},
        ],
    }
    path = write_file(tmp_path, json.dumps(doc, indent=2, ensure_ascii=False).encode(), "memory.json")
    graph = read_legacy(path)
    assert entity_tuples(graph) == [("A", "person", ["x", "y", "z"]), ("B", "place", [])]
    assert relation_keys(graph) == [("A", "B", "visits"), ("A", "Q", "knows")]
    assert graph.lines == 1
    assert graph.merged_entities == 1
    assert graph.collapsed_observations == 1
    assert graph.dangling_relations == 1
    assert graph.unknown_keys == 1


def test_single_document_item_faults_name_the_item() -> None:
    doc = {"entities": [{"name": "A", "entityType": "t", "observations": []}, {"name": "B"}]}
    with pytest.raises(LegacyFormatError) as caught:
        parse_legacy(json.dumps(doc).encode())
    assert "entities[1]" in caught.value.reason and '"entityType"' in caught.value.reason
    graph = parse_legacy(json.dumps(doc).encode(), skip_invalid=True)
    assert [e.name for e in graph.entities] == ["A"]
    assert len(graph.invalid_lines) == 1 and "entities[1]" in graph.invalid_lines[0].reason


def test_single_jsonl_line_is_not_mistaken_for_a_document() -> None:
    graph = parse_legacy(ent("A", "t", ["o"]).encode())
    assert entity_tuples(graph) == [("A", "t", ["o"])]


# --- the real sample file ----------------------------------------------------------------------


def oracle(raw: bytes) -> dict[str, Any]:
    """Independent reference: a plain dict-based merge of a clean JSONL file."""
    entities: dict[str, tuple[str, list[str]]] = {}
    relations: list[tuple[str, str, str]] = []
    merged = conflicts = collapsed = duplicates = 0
    for text in raw.decode("utf-8").split("\n"):
        if not text.strip():
            continue
        obj = json.loads(text)
        if obj["type"] == "entity":
            if obj["name"] in entities:
                merged += 1
                conflicts += entities[obj["name"]][0] != obj["entityType"]
            kept = entities.setdefault(obj["name"], (obj["entityType"], []))[1]
            for o in obj["observations"]:
                if o in kept:
                    collapsed += 1
                else:
                    kept.append(o)
        else:
            key = (obj["from"], obj["to"], obj["relationType"])
            if key in relations:
                duplicates += 1
            else:
                relations.append(key)
    return {
        "entities": [(n, t, o) for n, (t, o) in entities.items()],
        "relations": relations,
        "merged_entities": merged,
        "type_conflicts": conflicts,
        "collapsed_observations": collapsed,
        "duplicate_relations": duplicates,
        "dangling_relations": sum(1 for s, t, _ in relations if s not in entities or t not in entities),
    }


@pytest.mark.skipif(not SAMPLE.exists(), reason="sample file not present")
def test_the_real_sample_file_parses_with_the_oracle_counts() -> None:
    raw = SAMPLE.read_bytes()
    expected = oracle(raw)
    graph = read_legacy(SAMPLE)
    assert entity_tuples(graph) == expected["entities"]
    assert relation_keys(graph) == expected["relations"]
    for counter in (
        "merged_entities",
        "type_conflicts",
        "collapsed_observations",
        "duplicate_relations",
        "dangling_relations",
    ):
        assert getattr(graph, counter) == expected[counter], counter
    assert graph.lines == raw.count(b"\n") + (not raw.endswith(b"\n"))
    assert graph.skipped_lines == [] and graph.invalid_lines == [] and graph.unknown_keys == 0
    # The sample is known to hold duplicates and dangling relations; make sure the test sees them.
    assert graph.merged_entities > 0 and graph.collapsed_observations > 0 and graph.dangling_relations > 0
    summary = graph.summary()
    assert summary["entities"] == len(expected["entities"])
    assert summary["observations"] == sum(len(o) for _, _, o in expected["entities"])
    assert summary["relations"] == len(expected["relations"])


def test_read_legacy_never_modifies_the_file(tmp_path: Path) -> None:
    data = ("\r\n".join([*BASIC, ent("Alice", "robot", ["likes tea", "x"]), "{bad"]) + "\r\n").encode()
    path = write_file(tmp_path, b"\xef\xbb\xbf" + data)
    os.utime(path, ns=(1_000_000_000_000_000_000, 1_000_000_000_000_000_000))
    before = (path.read_bytes(), path.stat().st_mtime_ns, path.stat().st_size)
    read_legacy(path, skip_invalid=True)
    with pytest.raises(LegacyFormatError):
        read_legacy(path)
    assert (path.read_bytes(), path.stat().st_mtime_ns, path.stat().st_size) == before


# --- writing -----------------------------------------------------------------------------------


def test_write_legacy_round_trips_and_reports_the_line_count() -> None:
    entities = [Entity("A", "person", ["x", 'say "hi"\n', "🚀"]), Entity("B", "place", [])]
    relations = [Relation("A", "B", "visits"), Relation("B", "Nowhere", "near", weight=0.25)]
    out = io.StringIO()
    assert write_legacy(entities, relations, out) == 4
    text = out.getvalue()
    assert text.endswith("\n") and text.count("\n") == 4
    assert "weight" not in text
    graph = parse_legacy(text.encode())
    assert graph.entities == entities
    assert relation_keys(graph) == [r.key for r in relations]
    assert text.splitlines()[0] == (
        '{"type":"entity","name":"A","entityType":"person","observations":["x","say \\"hi\\"\\n","🚀"]}'
    )
    assert text.splitlines()[3] == '{"type":"relation","from":"B","to":"Nowhere","relationType":"near"}'


def test_write_legacy_with_weights_adds_the_weight_last_and_only_where_it_is_not_1() -> None:
    relations = [Relation("A", "B", "visits"), Relation("B", "Nowhere", "near", weight=0.1),
                 Relation("B", "A", "far", weight=0.0)]
    out = io.StringIO()
    assert write_legacy([], relations, out, with_weights=True) == 3
    assert out.getvalue().splitlines() == [
        '{"type":"relation","from":"A","to":"B","relationType":"visits"}',
        '{"type":"relation","from":"B","to":"Nowhere","relationType":"near","weight":0.1}',
        '{"type":"relation","from":"B","to":"A","relationType":"far","weight":0.0}',
    ]
    assert parse_legacy(out.getvalue().encode()).relations == relations


@pytest.mark.skipif(not SAMPLE.exists(), reason="sample file not present")
def test_re_export_of_sample_lines_is_byte_identical_to_the_reference_server() -> None:
    raw_lines = SAMPLE.read_bytes().split(b"\n")
    names = [json.loads(r)["name"] for r in raw_lines if json.loads(r)["type"] == "entity"]
    clean = [
        r
        for r in raw_lines
        if (obj := json.loads(r))["type"] == "relation"
        or (names.count(obj["name"]) == 1 and len(set(obj["observations"])) == len(obj["observations"]))
    ]
    assert len(clean) > 100
    data = b"\n".join(clean)
    graph = parse_legacy(data)
    exported = "".join(iter_legacy_lines(graph.entities, graph.relations)).encode()
    entity_lines = [r for r in clean if json.loads(r)["type"] == "entity"]
    relation_lines = [r for r in clean if json.loads(r)["type"] == "relation"]
    assert exported == b"".join(r + b"\n" for r in entity_lines + relation_lines)


# --- property ----------------------------------------------------------------------------------

_TRICKY = st.sampled_from(
    ["\u2028", "\u2029", "\r", "\n", "\x85", '"', "\\", "🚀", "\x1f", "\ufeff", "é", "\x00"]
)
_TEXT = st.text(alphabet=st.one_of(st.characters(codec="utf-8"), _TRICKY), max_size=20)

_ENTITIES = st.lists(
    st.builds(Entity, _TEXT, _TEXT, st.lists(_TEXT, unique=True, max_size=5)),
    unique_by=lambda e: e.name,
    max_size=8,
)
_RELATIONS = st.lists(st.builds(Relation, _TEXT, _TEXT, _TEXT), unique_by=lambda r: r.key, max_size=8)


@settings(max_examples=50, deadline=None)
@given(entities=_ENTITIES, relations=_RELATIONS)
def test_random_unicode_graphs_round_trip_write_then_parse(
    entities: list[Entity], relations: list[Relation]
) -> None:
    out = io.StringIO()
    write_legacy(entities, relations, out)
    graph = parse_legacy(out.getvalue().encode("utf-8"))
    assert graph.entities == entities
    assert graph.relations == relations
    assert graph.lines == len(entities) + len(relations)
    assert graph.merged_entities == graph.collapsed_observations == graph.duplicate_relations == 0
    assert graph.skipped_lines == [] and graph.invalid_lines == []


def test_lines_read_as_bytes_read_as_decoded_lines_do() -> None:
    """A file of valid UTF-8 gives orjson its lines as bytes, undecoded (issue 15: decoding each
    line first cost ~2 s per reading of a 1,000,000-entity file); a file with a bad byte is
    decoded (U+FFFD for the bad bytes) and read as text. Both readings of the same lines agree on
    everything but the bad line."""
    lines = [
        b"\xef\xbb\xbf" + ent("Zo\u00eb \U0001f680", "person", ["caf\u00e9", "caf\u00e9"]).encode(),
        ent("Lone", "t", []).replace("Lone", "Lone \\ud800").encode(),  # a lone surrogate escape
        b"   ", b"\t\r", b"",                                            # blank lines, a lone CR
        ent("Crlf", "t", ["a"]).encode() + b"\r",
        b'{"type":"entity","name":"Raw\x01","entityType":"t","observations":[]}',  # raw control character
        rel("Zo\u00eb \U0001f680", "Crlf", "knows", weight=0.5).encode(),
        b'{"type":"relation","from":"a","to":"b","relationType":"r","weight":1e400}',  # not a number 0-1
        b'{"type":"mystery"}', b'{"no type":1}', b"[1, 2]", b'"text"', b"{bad",
        ent("Extra", "t", [], color="red").encode(),
        ent("Zo\u00eb \U0001f680", "robot", ["caf\u00e9", "tea"]).encode(),  # a repeat: merged
    ]
    data = b"\n".join(lines) + b"\n"
    whole = parse_legacy(data, skip_invalid=True)
    with_bad_byte = parse_legacy(data + b"\xff\n", skip_invalid=True)
    # the bad line reads as "\ufffd": not JSON, so it is an invalid line (and listed as replaced)
    assert [s.line for s in with_bad_byte.invalid_lines] == [s.line for s in whole.invalid_lines] + [len(lines) + 1]
    assert with_bad_byte.replaced_utf8_lines == [len(lines) + 1] and whole.replaced_utf8_lines == []
    with_bad_byte.invalid_lines.pop()
    with_bad_byte.replaced_utf8_lines.clear()
    with_bad_byte.lines -= 1
    assert with_bad_byte == whole
    assert entity_tuples(whole)[0] == ("Zo\u00eb \U0001f680", "person", ["caf\u00e9", "tea"])
    assert whole.replaced_surrogates == 1 and whole.unknown_keys == 1 and whole.merged_entities == 1
    assert [s.line for s in whole.invalid_lines] == [9, 12, 13, 14]
    assert [s.line for s in whole.skipped_lines] == [10, 11]
    assert "Raw\x01" in [e.name for e in whole.entities]  # the tolerant reader takes a raw control character


_ENTITY = b'{"type":"entity","name":"A","entityType":"t","observations":["x"]}'
_RELATION = b'{"type":"relation","from":"A","to":"B","relationType":"r"}'


@pytest.mark.parametrize("data", [
    _ENTITY + b"\n" + _RELATION + b"\n",                       # the usual file
    _ENTITY + b"\n" + _RELATION,                               # no final newline
    b"\xef\xbb\xbf" + _ENTITY + b"\r\n\r\n  \n" + _RELATION + b"\r\n",   # BOM, CRLF, blank lines
    _ENTITY.replace(b'"x"', b'"caf\xe9"') + b"\n" + _RELATION + b"\n",   # Latin-1: not UTF-8
    b"\xe9" + _ENTITY + b"\n" + _RELATION + b"\n",               # a bad byte on the first line
    _ENTITY + b"\n",                                            # one line: the whole file decides
    _ENTITY,                                                    # one line, no newline
    b'{"entities": [], "relations": []}\n',                     # the single-document form
    b'{\n  "entities": [],\n  "relations": []\n}\n',            # the same, pretty-printed
    b"",                                                        # empty
    b"\n\n",                                                    # blank
    ("\n".join(f'{{"type":"entity","name":"n{i}","entityType":"t","observations":["{"é" * i}"]}}'
               for i in range(300))).encode(),                  # lines cut by the pieces below
], ids=["usual", "no-final-newline", "bom-crlf-blank", "latin1", "bad-first-line", "one-line", "one-line-bare",
        "document", "document-pretty", "empty", "blank", "many"])
def test_line_digests_fed_in_pieces_equal_those_of_the_whole_file(data: bytes) -> None:
    """A baseline or a moved file records its line digests without holding the file whole
    (LineDigester); they must be the import's (line_digests), or None when only the whole
    file can tell (the caller then reads it whole)."""
    for piece in (1, 7, 64, 1 << 20):
        digester = LineDigester()
        for start in range(0, len(data), piece):
            digester.feed(data[start:start + piece])
        got = digester.digests()
        assert got is None or got == line_digests(data), piece
        if data.count(b"\n") >= 2 and data.strip().startswith(b'{"type"'):   # surely lines: no whole read
            assert got == line_digests(data), piece


@settings(max_examples=200, deadline=None)
@given(parts=st.lists(st.sampled_from([_ENTITY, _RELATION, b"", b"  ", b"\r", b"\xe9", b"\xef\xbb\xbf", b"{",
                                       b'"x"', b"\xc3\xa9"]), max_size=12),
       newlines=st.lists(st.booleans(), min_size=12, max_size=12), piece=st.integers(1, 40))
def test_line_digests_fed_in_pieces_never_differ_from_the_whole_files(parts: list[bytes], newlines: list[bool],
                                                                      piece: int) -> None:
    data = b"".join(p + (b"\n" if nl else b"") for p, nl in zip(parts, newlines, strict=False))
    digester = LineDigester()
    for start in range(0, len(data), piece):
        digester.feed(data[start:start + piece])
    got = digester.digests()
    assert got is None or got == line_digests(data)
