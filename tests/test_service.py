"""The service facade on real SQLite files: limits, one transaction per operation, domain results.

The MCP-level tests (test_tools, test_typed, …) pin the wire; these pin what MemoryService itself
promises to any edge.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from graph_memory.db.backend import SqliteBackend
from graph_memory.db.graph import ObservationUpdate
from graph_memory.db.store import Store
from graph_memory.errors import Conflict, EntityNotFound, InvalidInput, InvalidQuery
from graph_memory.models import Entity, Relation
from graph_memory.service import Limits, MemoryService, TypedValue


@pytest.fixture
def service(store: Store) -> MemoryService:
    return MemoryService(SqliteBackend(store), Limits(max_name_length=20, max_observation_length=30, max_batch=3))


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
    assert service.update_observations([ObservationUpdate("Ada", "likes tea", "likes coffee")]) == [
        {"entityName": "Ada", "updatedObservations": [{"match": "likes tea", "replacement": "likes coffee"}]}]


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
        TypedValue("Race: ", "Race: Human"),
        TypedValue("Allies: ", "Allies: Bob", "allied_with", ["Bob"]),
    ], "update_npc")
    assert update.changed
    assert update.updated == [("Race: Elf", "Race: Human")] and update.added == ["Allies: Bob"]
    assert update.relations_created == [Relation("Cy", "Bob", "allied_with")]
    assert update.relations_deleted == [Relation("Cy", "Ada", "allied_with")]
    assert update.entity.observations == ["Race: Human", "Allies: Bob"]
    again = service.update_typed("npc", "Cy", [TypedValue("Race: ", "Race: Human")], "update_npc")
    assert not again.changed
    snapshot = service.delete_typed("npc", "Cy", "delete_npc")
    assert [e.name for e in snapshot.entities] == ["Cy"] and len(snapshot.relations) == 1
    assert service.open_nodes(["Cy"]).entities == []


def test_a_second_service_on_the_same_file_sees_committed_writes(service: MemoryService, db_path: Path) -> None:
    _seed(service)
    other = Store.open(db_path)
    try:
        assert [e.name for e in MemoryService(SqliteBackend(other)).search_nodes("tea").entities] == ["Ada"]
    finally:
        other.close()
