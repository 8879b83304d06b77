"""The service facade on real SQLite files: limits, one transaction per operation, domain results.

The MCP-level tests (test_tools, test_typed, …) pin the wire; these pin what MemoryService itself
promises to any edge.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from graph_memory.db.backend import Backend, SqliteBackend, open_backend
from graph_memory.db.store import Store
from graph_memory.errors import (
    Conflict,
    EntityNotFound,
    InvalidInput,
    InvalidQuery,
    LegacyFormatError,
    OutputError,
    PendingMigrationsError,
    StoreError,
)
from graph_memory.logs import get_logger
from graph_memory.models import Entity, ObservationUpdate, Relation
from graph_memory.service import (
    Limits,
    MemoryService,
    TypedValue,
    backup,
    export_graph,
    first_start,
    import_file,
    stats,
)
from graph_memory.settings import Settings

# The facade's tests run on both backends (conftest: both_backends); the data commands' on SQLite.
pytestmark = pytest.mark.both_backends


@pytest.fixture
def service(graph_backend: Backend) -> MemoryService:
    return MemoryService(graph_backend, Limits(max_name_length=20, max_observation_length=30, max_batch=3))


def _seed(service: MemoryService) -> None:
    service.create_entities([Entity("Ada", "person", ["likes tea"]), Entity("Bob", "person", [])])
    service.create_relations([Relation("Ada", "Bob", "knows")])


def test_create_entities_returns_only_the_new_ones_and_skips_existing_names(service: MemoryService) -> None:
    assert service.create_entities([Entity("Ada", "person", ["a"])]) == [Entity("Ada", "person", ["a"])]
    assert service.create_entities([Entity("Ada", "robot", []), Entity("Bob", "p", [])]) == [Entity("Bob", "p", [])]
    assert [e.entity_type for e in service.read_graph().entities] == ["person", "p"]


def test_a_name_over_the_limit_is_refused_before_anything_is_written(service: MemoryService) -> None:
    with pytest.raises(InvalidInput, match=r"entities\.1\.name is 21 characters long; the limit is 20"):
        service.create_entities([Entity("Ok", "t", []), Entity("x" * 21, "t", [])])
    assert service.read_graph().entities == []


def test_a_batch_over_the_limit_names_the_setting(service: MemoryService) -> None:
    with pytest.raises(InvalidInput, match="MEMORY_MAX_BATCH"):
        service.open_nodes(["a", "b", "c", "d"])
    with pytest.raises(InvalidInput, match=r"observations\.0\.contents\.0 is 31 characters"):
        service.add_observations([("Ada", ["y" * 31])])


def test_add_observations_to_an_unknown_entity_writes_nothing(service: MemoryService) -> None:
    _seed(service)
    with pytest.raises(EntityNotFound):
        service.add_observations([("Ada", ["new fact"]), ("Nobody", ["x"])])
    assert service.open_nodes(["Ada"]).entities[0].observations == ["likes tea"]


def test_add_observations_reports_only_what_was_new(service: MemoryService) -> None:
    _seed(service)
    (result,) = service.add_observations([("Ada", ["likes tea", "plays go"])])
    assert (result.entity_name, result.added) == ("Ada", ["plays go"])


def test_search_nodes_finds_with_its_relations_in_every_mode(service: MemoryService) -> None:
    _seed(service)
    for mode in ("substring", "words", "fts"):
        found = service.search_nodes("tea", mode)
        assert [e.name for e in found.entities] == ["Ada"], mode
        assert [(r.source, r.target) for r in found.relations] == [("Ada", "Bob")], mode


def test_search_nodes_refuses_a_bad_mode_and_lone_surrogates(service: MemoryService) -> None:
    with pytest.raises(InvalidQuery):
        service.search_nodes("tea", "regex")  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="unpaired surrogate"):
        service.search_nodes("\ud800")


def test_deletes_report_what_matched(service: MemoryService) -> None:
    _seed(service)
    removed = service.delete_relations([Relation("Ada", "Bob", "knows"), Relation("Bob", "Ada", "knows")])
    assert removed.deleted == [Relation("Ada", "Bob", "knows")] and removed.changed
    gone = service.delete_entities(["Bob", "Nobody"])
    assert (gone.deleted, gone.not_found) == (["Bob"], ["Nobody"])
    result = service.delete_observations([("Ada", ["likes tea", "never said"])])
    assert result.changed and result.results[0].deleted == ["likes tea"]


def test_update_observations_is_all_or_nothing(service: MemoryService) -> None:
    _seed(service)
    with pytest.raises(EntityNotFound):
        service.update_observations([ObservationUpdate("Ada", "likes tea", "likes coffee"),
                                     ObservationUpdate("Nobody", "a", "b")])
    assert service.open_nodes(["Ada"]).entities[0].observations == ["likes tea"]
    (result,) = service.update_observations([ObservationUpdate("Ada", "likes tea", "likes coffee")])
    assert (result.entity_name, result.updated) == ("Ada", [("likes tea", "likes coffee")])
    assert result.to_dict() == {
        "entityName": "Ada", "updatedObservations": [{"match": "likes tea", "replacement": "likes coffee"}]}


def test_update_relations_averages_the_weight_with_the_evidence(service: MemoryService) -> None:
    _seed(service)
    (change,) = service.update_relations([Relation("Ada", "Bob", "knows", 0.0)])
    assert (change.previous, change.relation.weight) == (1.0, 0.5)


def test_typed_add_refuses_an_existing_name_and_update_refuses_another_type(service: MemoryService) -> None:
    _seed(service)
    with pytest.raises(Conflict, match="already exists"):
        service.add_typed(Entity("Ada", "npc", []), [])
    with pytest.raises(InvalidInput, match="update_npc only changes npc entities"):
        service.update_typed("npc", "Ada", [], "update_npc")
    with pytest.raises(EntityNotFound):
        service.delete_typed("npc", "Nobody", "delete_npc")


def test_typed_update_sets_properties_and_relationship_targets(service: MemoryService) -> None:
    _seed(service)
    created, made = service.add_typed(Entity("Cy", "npc", ["Race: Elf"]), [Relation("Cy", "Ada", "allied_with")])
    assert created.observations == ["Race: Elf"] and made == [Relation("Cy", "Ada", "allied_with")]
    update = service.update_typed("npc", "Cy", [
        TypedValue("race", "Race: Human"),
        TypedValue("allies", "Allies: Bob", "allied_with", ["Bob"]),
    ], "update_npc")
    assert update.changed
    assert update.updated == [("Race: Elf", "Race: Human")] and update.added == ["Allies: Bob"]
    assert update.relations_created == [Relation("Cy", "Bob", "allied_with")]
    assert update.relations_deleted == [Relation("Cy", "Ada", "allied_with")]
    assert update.entity.observations == ["Race: Human", "Allies: Bob"]
    again = service.update_typed("npc", "Cy", [TypedValue("race", "Race: Human")], "update_npc")
    assert not again.changed
    snapshot = service.delete_typed("npc", "Cy", "delete_npc")
    assert [e.name for e in snapshot.entities] == ["Cy"] and len(snapshot.relations) == 1
    assert service.open_nodes(["Cy"]).entities == []


def test_a_second_service_on_the_same_file_sees_committed_writes(service: MemoryService,
                                                                 database_settings: Settings) -> None:
    _seed(service)
    other = open_backend(database_settings)
    try:
        assert [e.name for e in MemoryService(other).search_nodes("tea").entities] == ["Ada"]
    finally:
        other.close()


# -- the data commands' facade -------------------------------------------------------------------

_LEGACY = ('{"type":"entity","name":"Ada","entityType":"person","observations":["likes tea"]}\n'
           '{"type":"entity","name":"Bob","entityType":"person","observations":[]}\n'
           '{"type":"relation","from":"Ada","to":"Bob","relationType":"knows","weight":0.5}\n')


def _legacy(tmp_path: Path, text: str = _LEGACY) -> str:
    path = tmp_path / "memory.jsonl"
    path.write_text(text, encoding="utf-8")
    return str(path)


def _unmigrate_last(db_path: Path) -> None:
    import apsw

    conn = apsw.Connection(str(db_path))
    try:
        conn.execute("DELETE FROM schema_migrations WHERE id = (SELECT max(id) FROM schema_migrations)")
    finally:
        conn.close()


def test_import_file_dry_run_writes_nothing_and_creates_no_database(db_path: Path, tmp_path: Path) -> None:
    report = import_file(Settings(file_path=db_path), _legacy(tmp_path), dry_run=True)
    assert (report.dry_run, report.entities_created, report.relations_created) == (True, 2, 1)
    assert not db_path.exists()


def test_import_file_merges_records_and_reports_progress_totals(db_path: Path, tmp_path: Path) -> None:
    settings = Settings(file_path=db_path)
    totals: list[int | None] = []

    class Bar:
        def __init__(self, total: int | None) -> None:
            totals.append(total)

        def __enter__(self) -> Bar:
            return self

        def __exit__(self, *exc: object) -> None:
            pass

        def advance(self, items: int) -> None:
            pass

        def phase(self, name: str) -> None:
            pass

    report = import_file(settings, _legacy(tmp_path), progress=Bar)
    assert (report.dry_run, report.entities_created, report.observations_added) == (False, 2, 1)
    assert totals == [None]  # a new database: built from one reading, which counts as it goes
    import_file(settings, _legacy(tmp_path), progress=Bar)
    assert totals == [None, 3]  # an existing one: the file's check counted its records first
    again = import_file(settings, _legacy(tmp_path), dry_run=True)
    assert (again.entities_merged, again.entities_created, again.relations_skipped) == (2, 0, 1)
    result = stats(settings)
    assert (result.counts.entities, result.counts.relations) == (2, 1)
    assert [r.kind for r in result.records] == ["import", "import"] and result.owes is None


def test_import_file_refuses_a_bad_line_before_opening_the_database(db_path: Path, tmp_path: Path) -> None:
    with pytest.raises(LegacyFormatError, match=r"line 2: .*Nothing was imported.*--skip-invalid"):
        import_file(Settings(file_path=db_path), _legacy(tmp_path, _LEGACY.replace('{"type":"entity","name":"Bob"',
                                                                                   'oops', 1)))
    assert not db_path.exists()


def test_a_dry_run_and_export_refuse_pending_migrations_that_stats_reports(db_path: Path, tmp_path: Path) -> None:
    settings = Settings(file_path=db_path)
    import_file(settings, _legacy(tmp_path))
    _unmigrate_last(db_path)
    with pytest.raises(PendingMigrationsError, match="graph-memory migrate --database"):
        import_file(settings, _legacy(tmp_path), dry_run=True)
    with pytest.raises(PendingMigrationsError):
        export_graph(settings, tmp_path / "out.jsonl")
    assert len(stats(settings).pending) == 1
    assert stats(settings).to_dict()["pending_migrations"] == stats(settings).pending


def test_the_read_only_commands_refuse_a_missing_database_and_create_none(db_path: Path, tmp_path: Path) -> None:
    settings = Settings(file_path=db_path)
    for command in (lambda: stats(settings), lambda: export_graph(settings, tmp_path / "out.jsonl"),
                    lambda: backup(settings, str(tmp_path / "copy.db"))):
        with pytest.raises(StoreError, match="no database at"):
            command()
    assert not db_path.exists() and not (tmp_path / "out.jsonl").exists() and not (tmp_path / "copy.db").exists()


def test_export_graph_writes_the_file_or_the_stream_and_counts_weights(db_path: Path, tmp_path: Path) -> None:
    settings = Settings(file_path=db_path)
    import_file(settings, _legacy(tmp_path))
    out = tmp_path / "out.jsonl"
    result = export_graph(settings, out, with_weights=True)
    assert (result.entities, result.relations, result.weighted) == (2, 1, 1)
    assert out.read_text(encoding="utf-8").count("\n") == 3 and '"weight":0.5' in out.read_text(encoding="utf-8")
    import io

    stream = io.StringIO()

    def to_stream(write: Callable[[Any], int]) -> None:
        write(stream)

    export_graph(settings, to_stream)
    assert stream.getvalue().count("\n") == 3 and "weight" not in stream.getvalue()
    with pytest.raises(OutputError, match="is the database itself"):
        export_graph(settings, db_path)


def test_backup_copies_and_verifies_the_graph(db_path: Path, tmp_path: Path) -> None:
    settings = Settings(file_path=db_path)
    import_file(settings, _legacy(tmp_path))
    pages: list[tuple[int, int]] = []
    result = backup(settings, str(tmp_path / "copy.db"), progress=lambda done, total: pages.append((done, total)))
    assert result.path == tmp_path / "copy.db" and pages and pages[-1][0] == pages[-1][1]
    assert (result.counts.entities, result.counts.relations) == (2, 1)
    assert stats(Settings(file_path=tmp_path / "copy.db")).counts.observations == 1


def test_first_start_imports_the_legacy_file_once(tmp_path: Path) -> None:
    legacy = _legacy(tmp_path)
    settings = Settings(file_path=Path(legacy))
    log = get_logger("test")
    for expected in (2, None):
        store = Store.open(settings.database_path)
        try:
            report = first_start(SqliteBackend(store), settings, log)
        finally:
            store.close()
        assert (report.entities_created if report else None) == expected
    assert stats(settings).counts.entities == 2
