"""`graph-memory import --new-lines`: a legacy file that changed after its import is merged by what
changed in it, so what was deleted from the memory since stays deleted (a newcomer QA pass: the
whole-file merge the warning suggested brought deleted entities back). Both backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from graph_memory.errors import InvalidInput
from graph_memory.importer import record_path
from graph_memory.legacy import line_digest, line_digests
from graph_memory.service import MemoryService, import_file
from graph_memory.settings import Settings

pytestmark = pytest.mark.both_backends

ALICE = b'{"type":"entity","name":"Alice","entityType":"person","observations":["likes tea"]}'
BOB = b'{"type":"entity","name":"Bob","entityType":"person","observations":["plays chess"]}'
KNOWS = b'{"type":"relation","from":"Alice","to":"Bob","relationType":"knows"}'
ALICE_EDITED = b'{"type":"entity","name":"Alice","entityType":"person","observations":["likes tea","moved to Oslo"]}'
CAROL = b'{"type":"entity","name":"Carol","entityType":"person","observations":["new friend"]}'
CAROL_KNOWS = b'{"type":"relation","from":"Carol","to":"Alice","relationType":"knows"}'


def graph_of(memory: MemoryService) -> tuple[list[tuple[str, list[str]]], list[tuple[str, str, str]]]:
    g = memory.read_graph()
    return [(e.name, e.observations) for e in g.entities], [r.key for r in g.relations]


def test_a_changed_file_merges_its_new_and_edited_lines_and_deletions_stay(
        graph_backend: Any, database_settings: Settings, tmp_path: Path) -> None:
    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(b"\xef\xbb\xbf" + ALICE + b"\r\n" + BOB + b"\r\n\r\n" + KNOWS)   # a BOM, CRLF, a blank line
    first = import_file(database_settings, str(legacy))
    assert first.entities_created == 2
    recorded = graph_backend.run_read(lambda g: g.line_digests(record_path(legacy)))
    assert recorded == line_digest(ALICE) + line_digest(BOB) + line_digest(KNOWS)   # blank lines are no lines

    memory = MemoryService(graph_backend)
    memory.delete_entities(["Bob"])   # the relation goes with him
    # Meanwhile the reference server rewrote the file: Alice learnt something, Carol is new.
    legacy.write_bytes(b"\n".join([ALICE_EDITED, BOB, CAROL, KNOWS, CAROL_KNOWS]) + b"\n")

    dry = import_file(database_settings, str(legacy), new_lines=True, dry_run=True)
    assert dry.entities_to_create == ["Carol"] and dry.file["unchanged_lines"] == 2
    report = import_file(database_settings, str(legacy), new_lines=True)
    assert (report.entities_created, report.observations_added, report.relations_created) == (1, 2, 1)
    assert report.file["unchanged_lines"] == 2
    assert graph_of(memory) == ([("Alice", ["likes tea", "moved to Oslo"]), ("Carol", ["new friend"])],
                                [("Carol", "Alice", "knows")])
    # The new record describes the file as it is now: merging again adds nothing.
    assert graph_backend.run_read(lambda g: g.line_digests(record_path(legacy))) == line_digests(legacy.read_bytes())
    again = import_file(database_settings, str(legacy), new_lines=True)
    assert again.file["unchanged_lines"] == 5 and again.entities_created == again.observations_added == 0
    # Without --new-lines the whole file is merged, as before: Bob comes back.
    import_file(database_settings, str(legacy))
    assert [name for name, _ in graph_of(memory)[0]] == ["Alice", "Carol", "Bob"]


def test_new_lines_without_a_record_of_the_files_lines_is_refused_saying_what_to_do(
        graph_backend: Any, database_settings: Settings, tmp_path: Path) -> None:
    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(ALICE + b"\n")
    MemoryService(graph_backend).read_graph()   # the database exists, the file was never imported into it
    with pytest.raises(InvalidInput) as refused:
        import_file(database_settings, str(legacy), new_lines=True)
    message = str(refused.value)
    assert "has no record of the lines" in message and "--dry-run" in message and "bringing back" in message
    assert graph_of(MemoryService(graph_backend)) == ([], [])


def test_new_lines_refuses_a_single_document_file(graph_backend: Any, database_settings: Settings,
                                                  tmp_path: Path) -> None:
    legacy = tmp_path / "memory.json"
    legacy.write_bytes(ALICE + b"\n")
    import_file(database_settings, str(legacy))
    legacy.write_text('{"entities": [{"name": "Carol", "entityType": "p", "observations": []}], "relations": []}')
    with pytest.raises(Exception, match="one JSON document, not JSONL"):
        import_file(database_settings, str(legacy), new_lines=True)
