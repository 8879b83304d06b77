"""Materialized inverse relations (MEMORY_INVERSE_RELATIONS, a typed schema's relationship
``inverse``): created with their primary, deleted with it without being reported, kept apart
from ordinary relations by export --with-weights and import. Through in-process MCP clients of
both profiles."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from graph_memory.db.backend import Backend
from graph_memory.errors import SchemaError
from graph_memory.logs import configure_logging
from graph_memory.mcp.server import build_server
from graph_memory.mcp.typed import declared_inverses, load_typed_tools
from graph_memory.models import inverse_types
from graph_memory.service import MemoryService, export_graph, import_file
from graph_memory.settings import Settings

from helpers import call

pytestmark = [pytest.mark.anyio, pytest.mark.both_backends]
PAIRS = ["manages:reports_to", "married_to:married_to"]
TEAM = {"entities": [{"name": n, "entityType": "person", "observations": []} for n in ("Ann", "Bob", "Cy")]}


@pytest.fixture(autouse=True)
def _quiet_logs() -> Any:
    yield
    configure_logging("warning", "console")


@pytest.fixture
def schemas(tmp_path: Path) -> Path:
    folder = tmp_path / "schemas"
    folder.mkdir()
    (folder / "npc.schema.json").write_text(json.dumps({
        "name": "add_npc", "description": "A character",
        "properties": {"name": {"type": "string", "description": "Name", "required": True},
                       "home": {"type": "string", "description": "Where it lives",
                                "relationship": {"edgeType": "lives_in", "inverse": "home_of"}}}}),
        encoding="utf-8")
    (folder / "place.schema.json").write_text(json.dumps({
        "name": "add_place", "description": "A place",
        "properties": {"name": {"type": "string", "description": "Name", "required": True}}}), encoding="utf-8")
    return folder


@pytest.fixture
def inverse_memory(graph_backend: Backend, schemas: Path) -> MemoryService:
    return MemoryService(graph_backend, inverses=declared_inverses(schemas, PAIRS))


@pytest.fixture
async def ref(inverse_memory: MemoryService, schemas: Path) -> AsyncIterator[Any]:
    async with Client(build_server(inverse_memory, extra_tools=load_typed_tools(schemas)).server) as client:
        yield client


@pytest.fixture
async def mesh(inverse_memory: MemoryService, schemas: Path) -> AsyncIterator[Any]:
    server = build_server(inverse_memory, extra_tools=load_typed_tools(schemas), profile="memorymesh").server
    async with Client(server) as client:
        yield client


def rel(source: str, target: str, relation_type: str, **extra: Any) -> dict[str, Any]:
    return {"from": source, "to": target, "relationType": relation_type, **extra}


async def relations(client: Any) -> list[dict[str, Any]]:
    return list((await call(client, "read_graph", {}))["relations"])


async def test_creating_a_relation_of_a_declared_type_creates_its_inverse_not_listed_in_the_result(ref: Any) -> None:
    await call(ref, "create_entities", TEAM)
    out = await call(ref, "create_relations", {"relations": [rel("Ann", "Bob", "manages", weight=0.5),
                                                             rel("Bob", "Cy", "married_to"),
                                                             rel("Cy", "Ann", "knows")]})
    assert out == {"relations": [rel("Ann", "Bob", "manages", weight=0.5), rel("Bob", "Cy", "married_to"),
                                 rel("Cy", "Ann", "knows")]}
    # the inverses follow the call's relations, in their order
    assert await relations(ref) == [rel("Ann", "Bob", "manages", weight=0.5), rel("Bob", "Cy", "married_to"),
                                    rel("Cy", "Ann", "knows"), rel("Bob", "Ann", "reports_to", weight=0.5),
                                    rel("Cy", "Bob", "married_to")]


async def test_either_type_of_a_pair_is_a_primary_when_created(ref: Any) -> None:
    await call(ref, "create_entities", TEAM)
    await call(ref, "create_relations", {"relations": [rel("Bob", "Ann", "reports_to")]})
    assert await relations(ref) == [rel("Bob", "Ann", "reports_to"), rel("Ann", "Bob", "manages")]


async def test_deleting_the_primary_removes_its_inverse_without_reporting_it(ref: Any) -> None:
    await call(ref, "create_entities", TEAM)
    await call(ref, "create_relations", {"relations": [rel("Ann", "Bob", "manages")]})
    out = await call(ref, "delete_relations", {"relations": [rel("Ann", "Bob", "manages")]})
    assert out["deletedRelations"] == [rel("Ann", "Bob", "manages")]
    assert await relations(ref) == []


async def test_deleting_an_inverse_directly_removes_only_it(ref: Any) -> None:
    await call(ref, "create_entities", TEAM)
    await call(ref, "create_relations", {"relations": [rel("Ann", "Bob", "manages")]})
    out = await call(ref, "delete_relations", {"relations": [rel("Bob", "Ann", "reports_to")]})
    assert out["deletedRelations"] == [rel("Bob", "Ann", "reports_to")]
    assert await relations(ref) == [rel("Ann", "Bob", "manages")]


async def test_an_existing_relation_in_the_inverse_place_stays_an_ordinary_relation(ref: Any) -> None:
    await call(ref, "create_entities", TEAM)
    await call(ref, "create_relations", {"relations": [rel("Bob", "Ann", "reports_to")]})   # its inverse: manages
    await call(ref, "delete_relations", {"relations": [rel("Ann", "Bob", "manages")]})     # the inverse goes
    await call(ref, "create_relations", {"relations": [rel("Ann", "Bob", "manages")]})     # a primary again
    await call(ref, "delete_relations", {"relations": [rel("Ann", "Bob", "manages")]})
    assert await relations(ref) == [rel("Bob", "Ann", "reports_to")]                      # was there before


async def test_deleting_a_node_counts_each_primary_once(mesh: Any) -> None:
    result = await mesh.call_tool("add_nodes", {"nodes": [{"name": n, "nodeType": "person", "metadata": []}
                                                          for n in ("Ann", "Bob")]})
    assert not result.is_error
    await mesh.call_tool("add_edges", {"edges": [{"from": "Ann", "to": "Bob", "edgeType": "manages"}]})
    result = await mesh.call_tool("delete_nodes", {"nodeNames": ["Ann"]})
    assert result.structured_content["data"]["deletedEdgeCount"] == 1


async def test_repointing_an_edge_moves_its_inverse(mesh: Any) -> None:
    await mesh.call_tool("add_nodes", {"nodes": [{"name": n, "nodeType": "person", "metadata": []}
                                                 for n in ("Ann", "Bob", "Cy")]})
    await mesh.call_tool("add_edges", {"edges": [{"from": "Ann", "to": "Bob", "edgeType": "manages"}]})
    result = await mesh.call_tool("update_edges", {"edges": [{"from": "Ann", "to": "Bob", "edgeType": "manages",
                                                              "newTo": "Cy"}]})
    assert not result.is_error
    edges = (await mesh.call_tool("read_graph", {})).structured_content["data"]["edges"]
    assert [(e["from"], e["edgeType"], e["to"]) for e in edges] == [("Ann", "manages", "Cy"),
                                                                    ("Cy", "reports_to", "Ann")]


async def test_a_schema_relationship_inverse_is_materialized_and_moves_with_the_property(ref: Any) -> None:
    await call(ref, "add_place", {"place": {"name": "Inn"}})
    await call(ref, "add_place", {"place": {"name": "Farm"}})
    await call(ref, "add_npc", {"npc": {"name": "Mira", "home": "Inn"}})
    assert await relations(ref) == [rel("Mira", "Inn", "lives_in"), rel("Inn", "Mira", "home_of")]
    await call(ref, "update_npc", {"npc": {"name": "Mira", "home": "Farm"}})
    assert await relations(ref) == [rel("Mira", "Farm", "lives_in"), rel("Farm", "Mira", "home_of")]


def test_a_schema_inverse_contradicting_the_setting_is_refused(schemas: Path) -> None:
    with pytest.raises(SchemaError, match="lives_in"):
        declared_inverses(schemas, ["lives_in:resident_of"])
    assert inverse_types([("a", "b"), ("b", "a")]) == {"a": "b", "b": "a"}


async def test_a_full_export_marks_inverses_and_an_import_restores_them(
        ref: Any, graph_backend: Backend, database_settings: Settings, tmp_path: Path) -> None:
    await call(ref, "create_entities", TEAM)
    await call(ref, "create_relations", {"relations": [rel("Ann", "Bob", "manages"), rel("Cy", "Ann", "knows")]})
    plain, full = tmp_path / "plain.jsonl", tmp_path / "full.jsonl"
    export_graph(database_settings, plain)
    export_graph(database_settings, full, with_weights=True)
    plain_relations = [json.loads(line) for line in plain.read_text().splitlines()][3:]
    assert [r["relationType"] for r in plain_relations] == ["manages", "knows", "reports_to"]
    assert all("inverseOf" not in r for r in plain_relations)   # the reference server's bytes
    full_relations = [json.loads(line) for line in full.read_text().splitlines()][3:]
    assert full_relations[2] == {"type": "relation", **rel("Bob", "Ann", "reports_to"), "inverseOf": "manages"}
    assert all("inverseOf" not in r for r in full_relations[:2])

    await call(ref, "delete_entities", {"entityNames": ["Ann", "Bob", "Cy"]})
    import_file(database_settings, str(full))
    # No pairs declared here: the link itself came from the file.
    async with Client(build_server(MemoryService(graph_backend)).server) as other:
        assert [r["relationType"] for r in await relations(other)] == ["manages", "knows", "reports_to"]
        await call(other, "delete_relations", {"relations": [rel("Ann", "Bob", "manages")]})
        assert await relations(other) == [rel("Cy", "Ann", "knows")]


@pytest.mark.parametrize(("value", "problem"), [
    ("manages", "not a pair"),
    ("manages:", "not a pair"),
    ("a:b:c", "not a pair"),
    ("a:b,a:c", "inverse of both"),
])
def test_a_bad_inverse_relations_setting_names_the_variable(value: str, problem: str) -> None:
    from graph_memory.errors import SettingsError
    from graph_memory.settings import Settings

    with pytest.raises(SettingsError, match="MEMORY_INVERSE_RELATIONS") as caught:
        Settings.load(inverse_relations=value)
    assert problem in str(caught.value)


def test_an_inverse_of_marker_that_is_not_a_relation_type_is_a_bad_line() -> None:
    from graph_memory.errors import LegacyFormatError
    from graph_memory.legacy import parse_legacy

    with pytest.raises(LegacyFormatError, match=r'line 1.*"inverseOf" must be a non-empty string'):
        parse_legacy(b'{"type":"relation","from":"a","to":"b","relationType":"x","inverseOf":3}\n')
