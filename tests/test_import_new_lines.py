"""`graph-memory import --new-lines`: a legacy file that changed after its import is merged by what
changed in it, so what was deleted from the memory since stays deleted (a newcomer QA pass: the
whole-file merge the warning suggested brought deleted entities back). Both backends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from graph_memory import cli
from graph_memory.errors import InvalidInput, LegacyFormatError
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
        graph_backend: Any, database_settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
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
    # Alice's old line is gone from the file (edited there): said, since a merge cannot delete.
    assert dry.lines_gone == report.lines_gone == 1 and report.to_dict()["lines_gone"] == 1
    cli._print_import(report)
    printed = capsys.readouterr().out
    assert "gone:          1 line of the file at its last import or record is no longer in it" in printed
    assert graph_of(memory) == ([("Alice", ["likes tea", "moved to Oslo"]), ("Carol", ["new friend"])],
                                [("Carol", "Alice", "knows")])
    # The new record describes the file as it is now: merging again adds nothing.
    assert graph_backend.run_read(lambda g: g.line_digests(record_path(legacy))) == line_digests(legacy.read_bytes())
    again = import_file(database_settings, str(legacy), new_lines=True)
    assert again.file["unchanged_lines"] == 5 and again.entities_created == again.observations_added == 0
    assert again.lines_gone == 0
    # Without --new-lines the whole file is merged, as before: Bob comes back.
    assert import_file(database_settings, str(legacy)).lines_gone is None
    assert [name for name, _ in graph_of(memory)[0]] == ["Alice", "Carol", "Bob"]


BOB_LIKES = b'{"type":"relation","from":"Bob","to":"Alice","relationType":"likes"}'
ALICE_MEETS_DAN = b'{"type":"relation","from":"Alice","to":"Dan","relationType":"meets"}'


@pytest.mark.parametrize("emptied", [False, True], ids=["graph-kept", "graph-emptied"])
def test_a_new_relation_to_an_entity_deleted_here_is_left_out_not_left_dangling(
        graph_backend: Any, database_settings: Settings, tmp_path: Path, emptied: bool,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Bob was deleted here (his relations with him); the reference server then wrote a relation
    line of his. Bob's own line is unchanged, so --new-lines leaves him out: the relation would
    dangle (found by QA). It is left out and counted; a relation to a name the file never held
    (Dan) is kept, as every import keeps it. Both the checked reading and the single reading of
    an import into an emptied graph."""
    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(b"\n".join([ALICE, BOB, KNOWS]) + b"\n")
    import_file(database_settings, str(legacy))
    memory = MemoryService(graph_backend)
    memory.delete_entities(["Alice", "Bob"] if emptied else ["Bob"])
    legacy.write_bytes(b"\n".join([ALICE, BOB, CAROL, KNOWS, BOB_LIKES, CAROL_KNOWS, ALICE_MEETS_DAN]) + b"\n")

    dry = import_file(database_settings, str(legacy), new_lines=True, dry_run=True)
    report = import_file(database_settings, str(legacy), new_lines=True)
    for counted in (dry, report):
        assert counted.file["unchanged_lines"] == 3   # Alice, Bob, and the relation between them
        assert counted.file["dangling_relations"] == 1   # to Dan: Alice and Bob are the file's
        assert (counted.relations_created, counted.relations_left_out) == ((0, 3) if emptied else (2, 1))
    cli._print_import(report)
    assert (f"relations:     {report.relations_created} created, 0 already present, {report.relations_left_out} "
            f"left out (new lines relating an entity deleted here since the last import)") in capsys.readouterr().out
    if emptied:   # every new relation names Alice or Bob, both deleted here
        assert graph_of(memory) == ([("Carol", ["new friend"])], [])
    else:
        assert graph_of(memory) == ([("Alice", ["likes tea"]), ("Carol", ["new friend"])],
                                    [("Carol", "Alice", "knows"), ("Alice", "Dan", "meets")])
    assert graph_backend.run_read(lambda g: g.line_digests(record_path(legacy))) == line_digests(legacy.read_bytes())


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


def test_a_single_document_file_is_recorded_without_lines_and_merged_whole(
        graph_backend: Any, database_settings: Settings, tmp_path: Path) -> None:
    """A .json document has no lines to tell apart: its record keeps none, so the warning of a
    changed file offers the whole merge (QA: it offered --new-lines, which then refused it)."""
    legacy = tmp_path / "memory.json"
    legacy.write_text('{"entities": [{"name": "Ada", "entityType": "p", "observations": []}], "relations": []}')
    import_file(database_settings, str(legacy))
    assert graph_backend.run_read(lambda g: g.line_digests(record_path(legacy))) is None
    legacy.write_text('{"entities": [{"name": "Carol", "entityType": "p", "observations": []}], "relations": []}')
    with pytest.raises(InvalidInput, match="one JSON document, which has no lines"):
        import_file(database_settings, str(legacy), new_lines=True)


def test_a_line_that_is_not_utf8_is_known_again_once_the_reference_server_wrote_it_back(
        graph_backend: Any, database_settings: Settings, tmp_path: Path) -> None:
    """The reference server reads a cp1252 byte as U+FFFD and writes the line back in UTF-8; the
    line must still count as imported (QA: every such line looked new, and brought back what
    was deleted)."""
    legacy = tmp_path / "memory.jsonl"
    latin = b'{"type":"entity","name":"Ren\xe9e","entityType":"person","observations":["caf\xe9"]}'
    legacy.write_bytes(latin + b"\n" + BOB + b"\n")
    import_file(database_settings, str(legacy))
    MemoryService(graph_backend).delete_entities(["Ren\ufffde"])
    legacy.write_bytes(latin.decode("utf-8", "replace").encode() + b"\n" + BOB + b"\n" + CAROL + b"\n")
    report = import_file(database_settings, str(legacy), new_lines=True)
    assert report.file["unchanged_lines"] == 2 and report.entities_created == 1
    assert [name for name, _ in graph_of(MemoryService(graph_backend))[0]] == ["Bob", "Carol"]


@pytest.mark.parametrize("dry_run", [False, True])
def test_a_bad_line_under_new_lines_suggests_skipping_it_with_new_lines_kept(
        graph_backend: Any, database_settings: Settings, tmp_path: Path, dry_run: bool) -> None:
    """QA: the refusal's --skip-invalid command left --new-lines out, and merged the whole file."""
    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(ALICE + b"\n")
    import_file(database_settings, str(legacy))
    legacy.write_bytes(ALICE + b"\n" + b'{"type":"entity","name":"Bad",' + b"\n" + CAROL + b"\n")
    with pytest.raises(LegacyFormatError) as refused:
        import_file(database_settings, str(legacy), new_lines=True, dry_run=dry_run)
    flags = "--new-lines --dry-run --skip-invalid" if dry_run else "--new-lines --skip-invalid"
    assert f"graph-memory import {flags} {legacy}" in str(refused.value), str(refused.value)


def test_an_export_over_the_legacy_file_is_recorded_so_only_the_reference_servers_changes_count(
        graph_backend: Any, database_settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Switching back: `export -o` over the legacy file, the reference server changes it, then
    the user returns. Without a record of the export every start warned of graph-memory's own lines
    as a change, and `--new-lines` counted them as new and gone (found by QA)."""
    from graph_memory.importer import warn_if_legacy_file_changed
    from graph_memory.models import Entity
    from graph_memory.service import export_graph

    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(b"\n".join([ALICE, BOB, KNOWS]) + b"\n")
    import_file(database_settings, str(legacy))
    memory = MemoryService(graph_backend)
    memory.create_entities([Entity("Dave", "person", ["learnt here"])])
    memory.add_observations([("Alice", ["moved to Oslo"])])
    assert export_graph(database_settings, legacy).recorded
    assert warn_if_legacy_file_changed(graph_backend, legacy) is None   # what graph-memory wrote: no change
    exported = legacy.read_bytes().splitlines()
    assert len(exported) == 4
    # The reference server deletes Bob (and so the relation) and adds Carol.
    legacy.write_bytes(b"\n".join([*(line for line in exported if b"Bob" not in line), CAROL]))
    assert warn_if_legacy_file_changed(graph_backend, legacy) == "legacy_file_changed"
    report = import_file(database_settings, str(legacy), new_lines=True)
    assert (report.entities_created, report.observations_added, report.relations_created) == (1, 1, 0)
    assert report.file["unchanged_lines"] == 2 and report.lines_gone == 2   # Bob's line and the relation
    # What those lines held is still here, named so it can be deleted (a count said too little).
    assert report.gone_held == [
        {"type": "entity", "name": "Bob", "entityType": "person", "observations": ["plays chess"]},
        {"type": "relation", "from": "Alice", "to": "Bob", "relationType": "knows"}]
    assert report.to_dict()["gone_held"] == report.gone_held
    cli._print_import(report)
    printed = capsys.readouterr().out
    assert 'still held:    2 items' in printed and 'entity "Bob" (person)' in printed
    assert 'relation "Alice" knows "Bob"' in printed
    assert [r.kind for r in graph_backend.run_read(lambda g: g.import_records())] == ["import", "export", "import"]
    # Another file is not the legacy file: nothing recorded.
    assert not export_graph(database_settings, tmp_path / "elsewhere.jsonl").recorded
    assert len(graph_backend.run_read(lambda g: g.import_records())) == 3


def test_an_export_to_the_file_a_first_start_would_import_is_recorded(tmp_path: Path) -> None:
    """A database made without a legacy file, exported to the memory.jsonl beside it to switch
    back: its return is then a change of that file, not a file never imported (SQLite)."""
    from graph_memory.db.backend import open_backend
    from graph_memory.importer import warn_if_legacy_file_changed
    from graph_memory.models import Entity
    from graph_memory.service import export_graph

    settings = Settings.load(file_path=tmp_path / "memory.db")
    backend = open_backend(settings, "migrate")
    try:
        MemoryService(backend).create_entities([Entity("Alice", "person", ["likes tea"])])
        assert export_graph(settings, tmp_path / "memory.jsonl").recorded
        assert warn_if_legacy_file_changed(backend, tmp_path / "memory.jsonl") is None
        assert [r.kind for r in backend.run_read(lambda g: g.import_records())] == ["export"]
    finally:
        backend.close()


def test_an_export_never_writes_over_what_the_database_does_not_hold_without_force(
        graph_backend: Any, database_settings: Settings, tmp_path: Path) -> None:
    """QA: a second `export -o` over the legacy file silently lost what the reference server had
    written to it since; an empty (wrong) database emptied a memory file; a symbolic link was
    replaced by a file."""
    from graph_memory.errors import OutputError
    from graph_memory.importer import warn_if_legacy_file_changed
    from graph_memory.models import Entity
    from graph_memory.service import export_graph

    legacy = database_settings.legacy_candidates[0]   # the file a first start would import (both backends)
    assert not legacy.exists()
    with pytest.raises(OutputError, match="holds no memory: writing it would empty"):
        (tmp_path / "other.jsonl").write_bytes(ALICE + b"\n")
        export_graph(database_settings, tmp_path / "other.jsonl")
    assert (tmp_path / "other.jsonl").read_bytes() == ALICE + b"\n"
    MemoryService(graph_backend).create_entities([Entity("Dave", "person", ["learnt here"])])
    assert export_graph(database_settings, legacy).recorded   # no record of it before: a legacy file all the same
    # The reference server adds Carol; exporting again would lose her.
    legacy.write_bytes(legacy.read_bytes() + CAROL + b"\n")
    changed = legacy.read_bytes()
    with pytest.raises(OutputError, match=r"changed since it was exported from .*import --new-lines") as refused:
        export_graph(database_settings, legacy)
    assert "--force" in str(refused.value) and legacy.read_bytes() == changed
    import_file(database_settings, str(legacy), new_lines=True)
    assert export_graph(database_settings, legacy).recorded   # merged first: nothing is lost now
    assert b"Carol" in legacy.read_bytes()
    legacy.write_bytes(b"")   # --force writes over anything
    assert export_graph(database_settings, legacy, force=True).recorded
    # Through a symbolic link the file it names is written, and recorded as that file.
    link = tmp_path / "link.jsonl"
    link.symlink_to(legacy)
    assert export_graph(database_settings, link).recorded
    assert link.is_symlink() and warn_if_legacy_file_changed(graph_backend, legacy) is None


def test_still_held_names_lost_observations_of_an_entity_the_file_still_has_and_weighed_relations(
        graph_backend: Any, database_settings: Settings, tmp_path: Path) -> None:
    """QA: an entity the reference server only edited (an observation deleted) was listed whole as
    still held, so following the advice deleted it; a relation exported with its weight and then
    deleted there was not listed at all."""
    from graph_memory.models import Relation
    from graph_memory.service import export_graph

    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(b"\n".join([ALICE_EDITED, BOB, KNOWS]) + b"\n")
    import_file(database_settings, str(legacy))
    MemoryService(graph_backend).update_relations([Relation("Alice", "Bob", "knows", 0.2)])
    assert export_graph(database_settings, legacy, with_weights=True).recorded
    # The reference server: Alice loses "likes tea", Bob gains one, the relation goes.
    legacy.write_bytes(b"\n".join([
        b'{"type":"entity","name":"Alice","entityType":"person","observations":["moved to Oslo"]}',
        b'{"type":"entity","name":"Bob","entityType":"person","observations":["plays chess","new"]}']))
    dry = import_file(database_settings, str(legacy), new_lines=True, dry_run=True)
    report = import_file(database_settings, str(legacy), new_lines=True)
    expected = [{"type": "observations", "entityName": "Alice", "observations": ["likes tea"]},
                {"type": "relation", "from": "Alice", "to": "Bob", "relationType": "knows"}]
    assert dry.gone_held == report.gone_held == expected
    assert report.lines_gone == 3 and report.observations_added == 1


def test_an_edit_there_as_delete_and_add_still_names_the_lost_observation_after_the_merge(
        graph_backend: Any, database_settings: Settings, tmp_path: Path) -> None:
    """QA: the reference server edits an observation by deleting it and adding another; the dry
    run named the lost one, the real merge (which changes the entity first) no longer did."""
    from graph_memory.service import export_graph

    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(ALICE_EDITED + b"\n")
    import_file(database_settings, str(legacy))
    assert export_graph(database_settings, legacy).recorded
    legacy.write_bytes(b'{"type":"entity","name":"Alice","entityType":"person","observations":["moved to Oslo",'
                       b'"likes coffee"]}')
    expected = [{"type": "observations", "entityName": "Alice", "observations": ["likes tea"]}]
    assert import_file(database_settings, str(legacy), new_lines=True, dry_run=True).gone_held == expected
    assert import_file(database_settings, str(legacy), new_lines=True).gone_held == expected


def test_exports_over_the_legacy_file_that_lose_nothing_or_record_nothing(
        graph_backend: Any, database_settings: Settings, tmp_path: Path) -> None:
    """QA: a picture or a part of the graph written over the legacy file (the reference server's
    memory) was neither refused nor recorded; the same lines rewritten by the reference server
    (without the last newline) were refused as a change; every repeated export added a record."""
    from graph_memory.errors import OutputError
    from graph_memory.service import export_graph

    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(b"\n".join([ALICE, BOB, KNOWS]) + b"\n")
    import_file(database_settings, str(legacy))
    for fmt, entities in (("mermaid", ()), ("jsonl", ("Bob",))):
        with pytest.raises(OutputError, match=r"is the memory file of the database .* a picture or a part"):
            export_graph(database_settings, legacy, fmt=fmt, entities=entities)   # type: ignore[arg-type]
    assert export_graph(database_settings, tmp_path / "picture.mmd", fmt="mermaid").entities == 2
    for _ in range(3):
        assert export_graph(database_settings, legacy).recorded
    assert [r.kind for r in graph_backend.run_read(lambda g: g.import_records())] == ["import", "export"]
    legacy.write_bytes(legacy.read_bytes().rstrip(b"\n"))   # as the reference server writes it back
    assert export_graph(database_settings, legacy).recorded


def test_only_the_newest_record_of_a_file_keeps_its_line_digests(
        graph_backend: Any, database_settings: Settings, tmp_path: Path) -> None:
    """QA: each export of a changed memory over its legacy file added 8 bytes a line for good
    (5 exports of 50,000 lines: +2 MB), though only the newest record's digests are ever read."""
    from graph_memory.models import Entity
    from graph_memory.service import export_graph

    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(b"\n".join([ALICE, BOB, KNOWS]) + b"\n")
    import_file(database_settings, str(legacy))
    memory = MemoryService(graph_backend)
    for n in range(3):
        memory.create_entities([Entity(f"E{n}", "t", [])])
        assert export_graph(database_settings, legacy).recorded
    other = tmp_path / "other.jsonl"
    other.write_bytes(CAROL + b"\n")
    import_file(database_settings, str(other))
    assert len(graph_backend.run_read(lambda g: g.import_records())) == 5
    sql = ("SELECT path, count(line_digests) FROM legacy_imports GROUP BY path ORDER BY path"
           if graph_backend.kind == "sqlite" else
           "SELECT path, count(line_digests)::int FROM legacy_imports GROUP BY path ORDER BY path")
    if graph_backend.kind == "sqlite":
        kept = graph_backend.run_read(lambda g: list(g.conn.execute(sql)))
    else:
        kept = graph_backend.run_read(lambda g: [tuple(r) for r in g.conn.execute(sql).fetchall()])
    assert [count for _, count in kept] == [1, 1]
    assert graph_backend.run_read(lambda g: g.line_digests(record_path(legacy))) == line_digests(legacy.read_bytes())


NODE_A = b'{"type":"node","name":"Alice","nodeType":"person","metadata":["likes tea","moved to Oslo"]}'
NODE_B = b'{"type":"node","name":"Bob","nodeType":"person","metadata":["plays chess"]}'
EDGE = b'{"type":"edge","from":"Alice","to":"Bob","edgeType":"knows","weight":1}'


def test_a_memorymesh_legacy_file_round_trip_names_what_memorymesh_deleted(
        graph_backend: Any, database_settings: Settings, tmp_path: Path) -> None:
    """QA: a MemoryMesh file never got a `still held` list (its lines were matched as the
    reference format writes them), and a reference-format export over it was written silently."""
    from graph_memory.errors import OutputError
    from graph_memory.service import export_graph

    legacy = tmp_path / "memory.json"
    legacy.write_bytes(b"\n".join([NODE_A, NODE_B, EDGE]) + b"\n")
    import_file(database_settings, str(legacy))
    with pytest.raises(OutputError, match=r"in MemoryMesh's format.*add --format memorymesh"):
        export_graph(database_settings, legacy)
    assert export_graph(database_settings, legacy, fmt="memorymesh").recorded
    # MemoryMesh deletes Bob (and the edge) and one of Alice's metadata, writing without a last newline.
    legacy.write_bytes(b'{"type":"node","name":"Alice","nodeType":"person","metadata":["moved to Oslo"]}')
    report = import_file(database_settings, str(legacy), new_lines=True)
    assert report.lines_gone == 3 and report.gone_held == [
        {"type": "observations", "entityName": "Alice", "observations": ["likes tea"]},
        {"type": "entity", "name": "Bob", "entityType": "person", "observations": ["plays chess"]},
        {"type": "relation", "from": "Alice", "to": "Bob", "relationType": "knows"}]


def test_the_same_lines_written_back_or_bytes_recorded_elsewhere_are_no_change(
        graph_backend: Any, database_settings: Settings, tmp_path: Path) -> None:
    """QA: the reference server writing the same lines back without the last newline, or a
    folder moved back, was warned of at every start; an export over a moved and changed file
    suggested a whole-file import, which brings back what was deleted."""
    import shutil

    from graph_memory.errors import OutputError
    from graph_memory.importer import warn_if_legacy_file_changed
    from graph_memory.service import export_graph

    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(b"\n".join([ALICE, BOB, KNOWS]) + b"\n")
    import_file(database_settings, str(legacy))
    legacy.write_bytes(b"\n".join([ALICE, BOB, KNOWS]))
    assert warn_if_legacy_file_changed(graph_backend, legacy) is None
    elsewhere = tmp_path / "moved" / "memory.jsonl"
    elsewhere.parent.mkdir()
    shutil.copyfile(legacy, elsewhere)
    elsewhere.write_bytes(elsewhere.read_bytes() + b"\n" + CAROL)   # moved, then changed there
    if graph_backend.kind == "sqlite":   # the database moves with it
        from graph_memory.db.backup import backup_database

        backup_database(database_settings.database_path, elsewhere.with_suffix(".db"))
        moved = Settings.load(file_path=elsewhere)
    else:   # one database, its legacy file elsewhere now
        moved = database_settings.model_copy(update={"file_path": elsewhere})
    with pytest.raises(OutputError, match=r"differs from .* import --new-lines"):
        export_graph(moved, elsewhere)
