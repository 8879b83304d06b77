"""The MemoryMesh profile (MEMORY_TOOLS=memorymesh) through an in-process MCP client: the eleven
static tools (shapes, errors, atomicity), the response format against the advertised output
schemas, the typed tools in this profile, the profile switch over one database, and the design
document's behavioural tests (MEMORYMESH-SPEC §14) re-expressed over MCP."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from mcp import Client

from graph_memory.errors import SchemaError
from graph_memory.mcp.server import build_server
from graph_memory.mcp.typed import load_schemas, load_typed_tools
from graph_memory.service import MemoryService

from helpers import call, checked, undeclared_required

pytestmark = [pytest.mark.anyio, pytest.mark.both_backends]

STATIC = ["add_nodes", "update_nodes", "delete_nodes", "add_edges", "update_edges", "delete_edges",
          "add_metadata", "delete_metadata", "read_graph", "search_nodes", "open_nodes"]

# The design document's npc schema (§3.1) and a location schema with a relationship of its own.
NPC_SCHEMA = {
    "name": "add_npc",
    "description": "Add a non-player character to the knowledge graph",
    "properties": {
        "name": {"type": "string", "description": "The name of the NPC", "required": True},
        "role": {"type": "string", "description": "The NPC's role", "required": True,
                 "enum": ["Warrior", "Wizard", "Merchant", "Noble", "Peasant", "Thief"]},
        "status": {"type": "string", "description": "Current status", "required": True,
                   "enum": ["Active", "Inactive", "Deceased", "Missing"]},
        "currentLocation": {"type": "string", "description": "Where the NPC currently is", "required": False,
                            "relationship": {"edgeType": "located_in", "nodeType": "location",
                                             "description": "The location where this NPC resides"}},
        "description": {"type": "string", "description": "Physical or personality description"},
        "traits": {"type": "array", "description": "Character traits"},
    },
    "additionalProperties": True,
}
LOCATION_SCHEMA = {
    "name": "add_location",
    "description": "A place",
    "properties": {
        "name": {"type": "string", "description": "The name of the place", "required": True},
        "atmosphere": {"type": "string", "description": "How it feels"},
        "parentLocation": {"type": "string", "description": "The place it lies in",
                           "relationship": {"edgeType": "contained_in", "nodeType": "location"}},
    },
}
ARTIFACT_SCHEMA = {
    "name": "add_artifact",
    "description": "A thing of note",
    "properties": {"name": {"type": "string", "description": "Its name", "required": True},
                   "rarity": {"type": "string", "description": "How rare"}},
}


@pytest.fixture
def schemas(tmp_path: Path) -> Path:
    folder = tmp_path / "schemas"
    folder.mkdir()
    for name, schema in (("npc", NPC_SCHEMA), ("location", LOCATION_SCHEMA), ("artifact", ARTIFACT_SCHEMA)):
        (folder / f"{name}.schema.json").write_text(json.dumps(schema), encoding="utf-8")
    return folder


@pytest.fixture
def mesh_server(memory: MemoryService, schemas: Path) -> Any:
    return build_server(memory, extra_tools=load_typed_tools(schemas), profile="memorymesh").server


@pytest.fixture
async def mesh(mesh_server: Any) -> AsyncIterator[Any]:
    async with Client(mesh_server) as client:
        yield client


@pytest.fixture
async def reference(memory: MemoryService) -> AsyncIterator[Any]:
    """A reference-profile client on the same database as ``mesh``."""
    async with Client(build_server(memory).server) as client:
        yield client


_SCHEMAS: dict[int, dict[str, Any]] = {}


async def _output_schema(client: Any, tool: str) -> dict[str, Any]:
    """``tool``'s advertised output schema with its items checked field by field (helpers.checked)."""
    if id(client) not in _SCHEMAS:
        listed = await client.list_tools()
        _SCHEMAS[id(client)] = {t.name: checked(t.output_schema) for t in listed.tools}
    return _SCHEMAS[id(client)][tool]


async def mcall(client: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call ``tool``; assert MemoryMesh's success format (validated against the advertised output
    schema) and that the text is ``data`` as JSON; return ``data``."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, [c.text for c in result.content]
    structured = result.structured_content
    jsonschema.validate(structured, await _output_schema(client, tool))
    assert set(structured) <= {"timestamp", "data", "actionTaken", "suggestions"}
    assert structured["timestamp"].endswith("Z") and structured["actionTaken"]
    assert len(result.content) == 1 and json.loads(result.content[0].text) == structured["data"]
    data: dict[str, Any] = structured["data"]
    return data


async def merror(client: Any, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call ``tool``; assert MemoryMesh's error format (also valid against the output schema);
    return the structured error."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool} unexpectedly succeeded: {result.structured_content}"
    structured = result.structured_content
    jsonschema.validate(structured, await _output_schema(client, tool))
    assert result.content[0].text == f"Error during {tool}: {structured['error']}"
    assert json.loads(result.content[1].text.removeprefix("Context: ")) == structured["context"]
    assert structured["context"] == {"args": arguments, "tool": tool}   # 0.3.0's {"args": …}, and the tool
    assert structured["suggestions"] and structured["recoverySteps"]
    return dict(structured)


async def graph(client: Any) -> dict[str, Any]:
    return await mcall(client, "read_graph", {})


def node(name: str, node_type: str = "npc", metadata: list[str] | None = None) -> dict[str, Any]:
    return {"name": name, "nodeType": node_type, "metadata": metadata or []}


def edge(source: str, target: str, edge_type: str, weight: float = 1) -> dict[str, Any]:
    return {"from": source, "to": target, "edgeType": edge_type, "weight": weight}


async def abc(client: Any) -> None:
    """Nodes A, B, C; edges A→B and B→C."""
    await mcall(client, "add_nodes", {"nodes": [node("A", "t", ["alpha"]), node("B", "t"), node("C", "t")]})
    await mcall(client, "add_edges", {"edges": [{"from": "A", "to": "B", "edgeType": "knows"},
                                                {"from": "B", "to": "C", "edgeType": "knows"}]})


# -- the profile's tool list --------------------------------------------------------------------------


async def test_profile_advertises_the_eleven_static_tools_then_typed_tools_and_no_reference_tool(mesh: Any) -> None:
    listed = (await mesh.list_tools()).tools
    tool_names = [t.name for t in listed]
    assert tool_names[:11] == STATIC
    assert sorted(tool_names[11:]) == sorted(f"{v}_{t}" for t in ("npc", "location", "artifact")
                                             for v in ("add", "update", "delete"))
    assert "create_entities" not in tool_names
    for tool in listed:
        assert tool.input_schema["type"] == "object" and tool.output_schema["type"] == "object"
        jsonschema.Draft7Validator.check_schema(tool.output_schema)


async def test_reading_tools_check_nodes_and_edges_by_their_required_keys_and_declare_fields_in_definitions(
        mesh: Any) -> None:
    """As in the reference profile (test_schemas): the official Python client checks every reply in
    pure Python, one step per field of every item; the fields are declared exactly in definitions."""
    listed = {t.name: t.output_schema for t in (await mesh.list_tools()).tools}
    node = {"name": "a", "nodeType": "t", "metadata": ["x"]}
    edge = {"from": "a", "to": "b", "edgeType": "e", "weight": 1}
    for name in ("read_graph", "search_nodes", "open_nodes"):
        schema = listed[name]
        data = schema["properties"]["data"]["properties"]
        assert data["nodes"]["items"] == {"type": "object", "required": ["name", "nodeType", "metadata"],
                                          "properties": {"name": True, "nodeType": True, "metadata": True},
                                          "description": "Fields: #/definitions/node"}
        assert data["edges"]["items"]["description"] == "Fields: #/definitions/edge"
        assert schema["definitions"]["node"]["additionalProperties"] is False
        advertised_check, full_check = jsonschema.Draft7Validator(schema), jsonschema.Draft7Validator(checked(schema))
        reply = {"timestamp": "2026-12-02T00:00:00.000Z", "actionTaken": "read", "data": {"nodes": [node],
                                                                                          "edges": [edge]}}
        assert advertised_check.is_valid(reply) and full_check.is_valid(reply)
        for wrong in ({"nodes": [{**node, "metadata": [1]}], "edges": []}, {"nodes": [{**node, "x": 1}], "edges": []},
                      {"nodes": [], "edges": [{**edge, "weight": 2}]}):
            wrong_reply = {**reply, "data": wrong}
            assert advertised_check.is_valid(wrong_reply) and not full_check.is_valid(wrong_reply)
        for bad in ({"nodes": [{"name": "a", "nodeType": "t"}], "edges": []}, {"nodes": [], "edges": [{"from": "a"}]},
                    {"nodes": []}):
            assert not advertised_check.is_valid({**reply, "data": bad})
        assert undeclared_required(schema) == []   # Ajv's strict mode compiles it, definitions too
    # The writing tools' items stay checked field by field.
    assert listed["add_nodes"]["properties"]["data"]["properties"]["nodes"]["items"]["additionalProperties"] is False


async def test_static_tools_take_memorymeshs_input_property_names(mesh: Any) -> None:
    schemas = {t.name: t.input_schema for t in (await mesh.list_tools()).tools}
    assert schemas["add_nodes"]["properties"]["nodes"]["items"]["required"] == ["name", "nodeType", "metadata"]
    assert schemas["delete_nodes"]["required"] == ["nodeNames"]
    assert schemas["add_edges"]["properties"]["edges"]["items"]["properties"]["weight"]["maximum"] == 1
    assert schemas["add_metadata"]["properties"]["metadata"]["items"]["required"] == ["nodeName", "contents"]
    assert schemas["delete_metadata"]["properties"]["deletions"]["items"]["required"] == ["nodeName", "metadata"]
    assert schemas["read_graph"]["properties"] == {} and "required" not in schemas["read_graph"]
    assert schemas["open_nodes"]["required"] == ["names"] and schemas["search_nodes"]["required"] == ["query"]


# -- nodes ---------------------------------------------------------------------------------------------


async def test_add_nodes_returns_the_nodes_and_stores_them(mesh: Any) -> None:
    data = await mcall(mesh, "add_nodes", {"nodes": [node("Gandalf", "npc", ["Role: Wizard", "Role: Wizard"])]})
    assert data == {"nodes": [node("Gandalf", "npc", ["Role: Wizard"])]}
    assert (await graph(mesh)) == {"nodes": [node("Gandalf", "npc", ["Role: Wizard"])], "edges": []}


async def test_add_nodes_refuses_an_existing_name_and_writes_nothing_of_the_batch(mesh: Any) -> None:
    await mcall(mesh, "add_nodes", {"nodes": [node("Gandalf")]})
    error = await merror(mesh, "add_nodes", {"nodes": [node("Frodo"), node("Gandalf", "wizard")]})
    assert "Gandalf" in error["error"] and "already exists" in error["error"]
    assert [n["name"] for n in (await graph(mesh))["nodes"]] == ["Gandalf"]


async def test_add_nodes_refuses_a_name_given_twice_and_empty_names(mesh: Any) -> None:
    await merror(mesh, "add_nodes", {"nodes": [node("X"), node("X")]})
    await merror(mesh, "add_nodes", {"nodes": [node("")]})
    await merror(mesh, "add_nodes", {"nodes": [{"name": "Y", "nodeType": "t"}]})   # metadata is required
    assert (await graph(mesh))["nodes"] == []


async def test_update_nodes_replaces_metadata_in_the_given_order_and_changes_type(mesh: Any) -> None:
    await mcall(mesh, "add_nodes", {"nodes": [node("A", "t", ["one", "two", "three"]), node("B", "t", ["x"])]})
    data = await mcall(mesh, "update_nodes", {"nodes": [{"name": "A", "metadata": ["three", "four", "one"]},
                                                        {"name": "B", "nodeType": "person"}]})
    assert data == {"nodes": [node("A", "t", ["three", "four", "one"]), node("B", "person", ["x"])]}
    assert (await graph(mesh))["nodes"] == data["nodes"]
    # a type change is searchable at once
    assert [n["name"] for n in (await mcall(mesh, "search_nodes", {"query": "PERS"}))["nodes"]] == ["B"]


async def test_update_nodes_dates_the_node_so_since_finds_it(mesh: Any, reference: Any) -> None:
    import anyio

    await mcall(mesh, "add_nodes", {"nodes": [node("A", "t", ["one"]), node("B", "t", ["x"]), node("C", "t")]})
    await anyio.sleep(0.005)   # times are stored to the millisecond: the next write is later
    moment = datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    await anyio.sleep(0.005)
    await mcall(mesh, "update_nodes", {"nodes": [{"name": "A", "metadata": ["one", "two"]},
                                                 {"name": "B", "nodeType": "person"}]})
    changed = await call(reference, "read_graph", {"since": moment, "timestamps": True})
    assert [e["name"] for e in changed["entities"]] == ["A", "B"]
    assert all(e["createdAt"] < moment <= e["updatedAt"] for e in changed["entities"])


async def test_update_nodes_of_an_unknown_node_fails_and_changes_nothing(mesh: Any) -> None:
    await mcall(mesh, "add_nodes", {"nodes": [node("A", "t", ["one"])]})
    error = await merror(mesh, "update_nodes", {"nodes": [{"name": "A", "metadata": []},
                                                          {"name": "Nobody", "nodeType": "x"}]})
    assert "Nobody" in error["error"]
    assert (await graph(mesh))["nodes"] == [node("A", "t", ["one"])]


async def test_delete_nodes_cascades_to_edges_and_reports_unknown_names(mesh: Any) -> None:
    await abc(mesh)
    data = await mcall(mesh, "delete_nodes", {"nodeNames": ["B", "Nobody"]})
    assert data == {"deletedNodes": ["B"], "notFound": ["Nobody"], "deletedEdgeCount": 2}
    assert await graph(mesh) == {"nodes": [node("A", "t", ["alpha"]), node("C", "t")], "edges": []}


# -- edges ---------------------------------------------------------------------------------------------


async def test_add_edges_default_weight_is_one_and_a_given_weight_is_kept(mesh: Any) -> None:
    await mcall(mesh, "add_nodes", {"nodes": [node("A"), node("B")]})
    data = await mcall(mesh, "add_edges", {"edges": [{"from": "A", "to": "B", "edgeType": "knows"},
                                                     {"from": "B", "to": "A", "edgeType": "knows", "weight": 0.25}]})
    assert data == {"edges": [edge("A", "B", "knows"), edge("B", "A", "knows", 0.25)]}
    assert (await graph(mesh))["edges"] == data["edges"]


@pytest.mark.parametrize("bad", [
    {"from": "A", "to": "Nobody", "edgeType": "knows"},            # an end does not exist
    {"from": "A", "to": "B", "edgeType": "likes"},                 # the triple exists
    {"from": "A", "to": "B", "edgeType": "knows", "weight": 1.5},  # weight out of range
    {"from": "A", "to": "B", "edgeType": "knows", "weight": -0.1},
    {"from": "A", "to": "", "edgeType": "knows"},                  # empty end
])
async def test_add_edges_refuses_a_bad_edge_and_writes_nothing_of_the_batch(mesh: Any, bad: dict[str, Any]) -> None:
    await mcall(mesh, "add_nodes", {"nodes": [node("A"), node("B")]})
    await mcall(mesh, "add_edges", {"edges": [{"from": "A", "to": "B", "edgeType": "likes"}]})
    await merror(mesh, "add_edges", {"edges": [{"from": "B", "to": "A", "edgeType": "knows"}, bad]})
    assert (await graph(mesh))["edges"] == [edge("A", "B", "likes")]


async def test_update_edges_averages_the_weight_with_the_new_evidence(mesh: Any) -> None:
    await mcall(mesh, "add_nodes", {"nodes": [node("A"), node("B")]})
    await mcall(mesh, "add_edges", {"edges": [{"from": "A", "to": "B", "edgeType": "knows"}]})
    for evidence, expected in ((0.6, 0.8), (0.4, 0.6), (1.0, 0.8)):   # the design document's §10.2 example
        data = await mcall(mesh, "update_edges", {"edges": [{"from": "A", "to": "B", "edgeType": "knows",
                                                             "weight": evidence}]})
        assert data["edges"][0]["weight"] == pytest.approx(expected)
    data = await mcall(mesh, "update_edges", {"edges": [{"from": "A", "to": "B", "edgeType": "knows",
                                                         "newWeight": 0.2}]})
    assert data["edges"][0]["weight"] == pytest.approx(0.5)
    assert data["previous"][0]["weight"] == pytest.approx(0.8)


async def test_update_edges_repoints_an_edge_with_new_from_to_and_type(mesh: Any) -> None:
    await mcall(mesh, "add_nodes", {"nodes": [node("A"), node("B"), node("C")]})
    await mcall(mesh, "add_edges", {"edges": [{"from": "A", "to": "B", "edgeType": "knows", "weight": 0.4},
                                              {"from": "B", "to": "C", "edgeType": "knows"}]})
    data = await mcall(mesh, "update_edges", {"edges": [
        {"from": "A", "to": "B", "edgeType": "knows", "newTo": "C", "newEdgeType": "trusts"},
        {"from": "B", "to": "C", "edgeType": "knows", "newFrom": "A", "newTo": "B", "weight": 0.5}]})
    assert data["edges"] == [edge("A", "C", "trusts", 0.4), edge("A", "B", "knows", 0.75)]
    assert (await graph(mesh))["edges"] == data["edges"]   # same rows: positions kept


@pytest.mark.parametrize("bad", [
    {"from": "A", "to": "B", "edgeType": "nope", "weight": 0.5},           # no such edge
    {"from": "A", "to": "B", "edgeType": "knows", "newTo": "Nobody"},      # new end does not exist
    {"from": "A", "to": "B", "edgeType": "knows", "newTo": "C"},           # new triple exists
    {"from": "A", "to": "B", "edgeType": "knows", "weight": 2},            # evidence out of range
    {"from": "A", "to": "B", "edgeType": "knows", "weight": 0.1, "newWeight": 0.9},
])
async def test_update_edges_refuses_a_bad_update_and_changes_nothing(mesh: Any, bad: dict[str, Any]) -> None:
    await mcall(mesh, "add_nodes", {"nodes": [node("A"), node("B"), node("C")]})
    await mcall(mesh, "add_edges", {"edges": [{"from": "A", "to": "B", "edgeType": "knows"},
                                              {"from": "A", "to": "C", "edgeType": "knows"}]})
    before = await graph(mesh)
    await merror(mesh, "update_edges", {"edges": [{"from": "A", "to": "C", "edgeType": "knows", "weight": 0}, bad]})
    assert await graph(mesh) == before


async def test_delete_edges_removes_exact_triples_and_reports_the_rest(mesh: Any) -> None:
    await abc(mesh)
    data = await mcall(mesh, "delete_edges", {"edges": [{"from": "A", "to": "B", "edgeType": "knows"},
                                                        {"from": "B", "to": "A", "edgeType": "knows"}]})
    assert data == {"deletedEdges": [edge("A", "B", "knows")],
                    "notFound": [{"from": "B", "to": "A", "edgeType": "knows"}]}
    assert (await graph(mesh))["edges"] == [edge("B", "C", "knows")]


# -- metadata ------------------------------------------------------------------------------------------


async def test_add_metadata_appends_new_entries_only(mesh: Any) -> None:
    await mcall(mesh, "add_nodes", {"nodes": [node("A", "t", ["one"])]})
    data = await mcall(mesh, "add_metadata", {"metadata": [{"nodeName": "A", "contents": ["one", "two", "two"]}]})
    assert data == {"metadata": [{"nodeName": "A", "addedMetadata": ["two"]}]}   # 0.3.0's shape
    assert (await graph(mesh))["nodes"] == [node("A", "t", ["one", "two"])]


async def test_add_metadata_to_an_unknown_node_fails_and_adds_nothing(mesh: Any) -> None:
    await mcall(mesh, "add_nodes", {"nodes": [node("A")]})
    await merror(mesh, "add_metadata", {"metadata": [{"nodeName": "A", "contents": ["x"]},
                                                     {"nodeName": "Nobody", "contents": ["y"]}]})
    assert (await graph(mesh))["nodes"] == [node("A")]


async def test_delete_metadata_removes_exact_entries(mesh: Any) -> None:
    await mcall(mesh, "add_nodes", {"nodes": [node("A", "t", ["one", "two"])]})
    data = await mcall(mesh, "delete_metadata", {"deletions": [{"nodeName": "A", "metadata": ["two", "ten"]}]})
    assert data == {"results": [{"nodeName": "A", "deletedMetadata": ["two"]}]}
    assert (await graph(mesh))["nodes"] == [node("A", "t", ["one"])]


async def test_delete_metadata_of_an_unknown_node_fails_and_deletes_nothing(mesh: Any) -> None:
    await mcall(mesh, "add_nodes", {"nodes": [node("A", "t", ["one"])]})
    error = await merror(mesh, "delete_metadata", {"deletions": [{"nodeName": "A", "metadata": ["one"]},
                                                                 {"nodeName": "Nobody", "metadata": ["x"]}]})
    assert "Nobody" in error["error"]
    assert (await graph(mesh))["nodes"] == [node("A", "t", ["one"])]


# -- reads and neighbours (§14.3) -------------------------------------------------------------------


async def test_search_returns_the_matches_with_their_neighbours_and_edges(mesh: Any) -> None:
    await mcall(mesh, "add_nodes", {"nodes": [node("A", "t", ["alpha"]), node("B", "t"), node("C", "t")]})
    await mcall(mesh, "add_edges", {"edges": [{"from": "A", "to": "B", "edgeType": "knows"}]})
    data = await mcall(mesh, "search_nodes", {"query": "ALPHA"})
    assert data == {"nodes": [node("A", "t", ["alpha"]), node("B", "t")], "edges": [edge("A", "B", "knows")]}


async def test_open_nodes_returns_the_nodes_with_their_neighbours_and_edges(mesh: Any) -> None:
    await abc(mesh)
    data = await mcall(mesh, "open_nodes", {"names": ["A"]})
    assert data == {"nodes": [node("A", "t", ["alpha"]), node("B", "t")], "edges": [edge("A", "B", "knows")]}


async def test_an_empty_search_suggests_what_to_try(mesh: Any) -> None:
    result = await mesh.call_tool("search_nodes", {"query": "nothing here"})
    assert result.structured_content["data"] == {"nodes": [], "edges": []}
    assert result.structured_content["suggestions"]


# -- errors --------------------------------------------------------------------------------------------


async def test_invalid_arguments_are_a_memorymesh_error_with_context(mesh: Any) -> None:
    error = await merror(mesh, "add_nodes", {"nodes": "not a list"})
    assert "nodes" in error["error"]
    error = await merror(mesh, "open_nodes", {})
    assert "names" in error["error"]


# -- typed tools in this profile (§14.1, §14.2, §14.4) ----------------------------------------------


def test_schema_loading_three_files_make_nine_typed_tools_and_a_name_without_add_is_refused(
        schemas: Path, tmp_path: Path) -> None:
    assert len(load_typed_tools(schemas)) == 9
    (npc,) = [s for s in load_schemas(schemas) if s.type_name == "npc"]
    assert [p.key for p in npc.properties] == ["name", "role", "status", "currentLocation", "description", "traits"]
    assert npc.properties[3].relationship is not None and npc.properties[3].relationship.edge_type == "located_in"
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "npc.schema.json").write_text(json.dumps({**NPC_SCHEMA, "name": "npc"}), encoding="utf-8")
    with pytest.raises(SchemaError, match="must start with 'add_'"):
        load_typed_tools(bad)


def test_a_schema_type_may_not_shadow_a_memorymesh_static_tool(tmp_path: Path) -> None:
    (tmp_path / "nodes.schema.json").write_text(json.dumps({**ARTIFACT_SCHEMA, "name": "add_nodes"}),
                                                encoding="utf-8")
    with pytest.raises(SchemaError, match="standard tool"):
        load_typed_tools(tmp_path)


async def test_typed_add_creates_the_node_with_metadata_and_answers_in_memorymesh_format(mesh: Any) -> None:
    data = await mcall(mesh, "add_npc", {"npc": {"name": "Gandalf", "role": "Wizard", "status": "Active"}})
    assert data == {"nodes": [node("Gandalf", "npc", ["Role: Wizard", "Status: Active"])], "edges": []}


async def test_typed_add_with_a_relationship_property_creates_the_edge(mesh: Any) -> None:
    await mcall(mesh, "add_location", {"location": {"name": "Rivendell"}})
    data = await mcall(mesh, "add_npc", {"npc": {"name": "Gandalf", "role": "Wizard", "status": "Active",
                                                 "currentLocation": "Rivendell"}})
    metadata = ["Role: Wizard", "Status: Active", "Current Location: Rivendell"]
    assert data == {"nodes": [node("Gandalf", "npc", metadata)], "edges": [edge("Gandalf", "Rivendell", "located_in")]}


async def test_typed_update_moves_the_edge_and_edits_the_metadata(mesh: Any) -> None:
    await mcall(mesh, "add_location", {"location": {"name": "Rivendell"}})
    await mcall(mesh, "add_location", {"location": {"name": "Mordor"}})
    await mcall(mesh, "add_npc", {"npc": {"name": "Gandalf", "role": "Wizard", "status": "Active",
                                          "currentLocation": "Rivendell"}})
    # MemoryMesh's callers wrap update arguments as {"update_npc": …}
    data = await mcall(mesh, "update_npc", {"update_npc": {"name": "Gandalf", "currentLocation": "Mordor"}})
    # 0.3.0's {updatedNode, edgeChanges: {remove, add}}, with what changed in the metadata beside it
    assert data == {"updatedNode": node("Gandalf", "npc", ["Role: Wizard", "Status: Active",
                                                           "Current Location: Mordor"]),
                    "edgeChanges": {"remove": [edge("Gandalf", "Rivendell", "located_in")],
                                    "add": [edge("Gandalf", "Mordor", "located_in")]},
                    "updatedMetadata": [{"match": "Current Location: Rivendell",
                                         "replacement": "Current Location: Mordor"}],
                    "addedMetadata": [], "deletedMetadata": []}
    assert (await graph(mesh))["edges"] == [edge("Gandalf", "Mordor", "located_in")]


async def test_typed_relationship_property_takes_a_list_of_names_as_memorymesh_advertises_it(mesh: Any) -> None:
    # MemoryMesh 0.3.0 advertises a relationship property as an array of names and its callers send one.
    schemas = {t.name: t.input_schema for t in (await mesh.list_tools()).tools}
    location = schemas["add_npc"]["properties"]["npc"]["properties"]["currentLocation"]
    assert {"type": "array", "items": {"type": "string"}} in location["anyOf"]
    await mcall(mesh, "add_location", {"location": {"name": "Rivendell"}})
    await mcall(mesh, "add_location", {"location": {"name": "Mordor"}})
    data = await mcall(mesh, "add_npc", {"npc": {"name": "Gandalf", "role": "Wizard", "status": "Active",
                                                 "currentLocation": ["Rivendell"]}})
    assert data["edges"] == [edge("Gandalf", "Rivendell", "located_in")]
    assert data["nodes"][0]["metadata"] == ["Role: Wizard", "Status: Active", "Current Location: Rivendell"]
    data = await mcall(mesh, "update_npc", {"update_npc": {"name": "Gandalf", "currentLocation": ["Mordor"]}})
    assert data["updatedMetadata"] == [{"match": "Current Location: Rivendell",
                                        "replacement": "Current Location: Mordor"}]
    assert (await graph(mesh))["edges"] == [edge("Gandalf", "Mordor", "located_in")]
    error = await merror(mesh, "add_npc", {"npc": {"name": "Frodo", "role": "Thief", "status": "Active",
                                                   "currentLocation": ["Shire"]}})
    assert "Shire" in error["error"]
    assert [n["name"] for n in (await graph(mesh))["nodes"]] == ["Rivendell", "Mordor", "Gandalf"]


async def test_typed_update_and_delete_advertise_memorymeshs_wrapper_and_accept_the_type_key(mesh: Any) -> None:
    schemas = {t.name: t.input_schema for t in (await mesh.list_tools()).tools}
    assert schemas["add_npc"]["required"] == ["npc"]
    assert schemas["update_npc"]["required"] == ["update_npc"]
    assert schemas["delete_npc"]["required"] == ["delete_npc"]
    await mcall(mesh, "add_npc", {"npc": {"name": "Gandalf", "role": "Wizard", "status": "Active"}})
    data = await mcall(mesh, "update_npc", {"npc": {"name": "Gandalf", "status": "Missing"}})
    assert "Status: Missing" in data["updatedNode"]["metadata"]
    assert data["edgeChanges"] == {"remove": [], "add": []}
    data = await mcall(mesh, "delete_npc", {"npc": {"name": "Gandalf"}})
    assert data["deletedNodes"] == ["Gandalf"]


async def test_typed_errors_name_the_wrapper_key_the_call_used_and_fit_the_verb(mesh: Any) -> None:
    """QA: an update wrapped as MemoryMesh advertises it was told about "npc.name"; a call with no
    wrapper was shown only the {"npc": …} shape; deleting a missing node was told to create it."""
    error = await merror(mesh, "update_npc", {"update_npc": {"role": "Wizard"}})
    assert "update_npc.name: Field required" in error["error"]
    error = await merror(mesh, "delete_npc", {})
    assert '{"delete_npc": {"name": "...", ...}}' in error["error"]
    await mcall(mesh, "add_npc", {"npc": {"name": "Gandalf", "role": "Wizard", "status": "Active"}})
    error = await merror(mesh, "update_npc", {"npc": {"name": "Gandalf"},   # QA: the second was ignored
                                              "update_npc": {"name": "Gandalf", "role": "Thief"}})
    assert 'give the npc once, as "update_npc" or as "npc", not both' in error["error"]
    assert "Role: Wizard" in (await graph(mesh))["nodes"][0]["metadata"]
    error = await merror(mesh, "delete_npc", {"delete_npc": {"name": "Nobody"}})
    assert "Nobody" in error["error"]
    assert not any("Create" in text for text in error["suggestions"] + error["recoverySteps"])


async def test_typed_delete_removes_the_node_and_its_edges(mesh: Any) -> None:
    await mcall(mesh, "add_location", {"location": {"name": "Rivendell"}})
    await mcall(mesh, "add_npc", {"npc": {"name": "Gandalf", "role": "Wizard", "status": "Active",
                                          "currentLocation": "Rivendell"}})
    data = await mcall(mesh, "delete_npc", {"delete_npc": {"name": "Gandalf"}})
    assert data["deletedNodes"] == ["Gandalf"] and data["deletedEdges"] == [edge("Gandalf", "Rivendell", "located_in")]
    assert await graph(mesh) == {"nodes": [node("Rivendell", "location")], "edges": []}


async def test_typed_enum_violation_is_an_error(mesh: Any) -> None:
    error = await merror(mesh, "add_npc", {"npc": {"name": "Smaug", "role": "Dragon", "status": "Active"}})
    assert "Dragon" in error["error"]
    assert (await graph(mesh))["nodes"] == []


async def test_a_typed_node_whose_relationship_target_is_missing_is_rolled_back(mesh: Any) -> None:
    """§14.4: add node, fail on the edge's bad reference: the node is not kept either."""
    error = await merror(mesh, "add_npc", {"npc": {"name": "Gandalf", "role": "Wizard", "status": "Active",
                                                   "currentLocation": "Nowhere"}})
    assert "Nowhere" in error["error"]
    assert await graph(mesh) == {"nodes": [], "edges": []}


async def test_a_successful_call_commits_the_node_and_its_edge_together(mesh: Any) -> None:
    await mcall(mesh, "add_location", {"location": {"name": "Shire"}})
    await mcall(mesh, "add_location", {"location": {"name": "Bag End", "parentLocation": "Shire"}})
    assert (await graph(mesh))["edges"] == [edge("Bag End", "Shire", "contained_in")]


# -- one database, two profiles ------------------------------------------------------------------------


async def test_switching_profiles_keeps_everything_both_ways(mesh: Any, reference: Any) -> None:
    await abc(mesh)
    await mcall(mesh, "update_edges", {"edges": [{"from": "A", "to": "B", "edgeType": "knows", "weight": 0.5}]})
    ref = await call(reference, "read_graph", {})
    assert ref["entities"] == [{"name": "A", "entityType": "t", "observations": ["alpha"]},
                               {"name": "B", "entityType": "t", "observations": []},
                               {"name": "C", "entityType": "t", "observations": []}]
    assert ref["relations"] == [{"from": "A", "to": "B", "relationType": "knows", "weight": 0.75},
                                {"from": "B", "to": "C", "relationType": "knows"}]
    await call(reference, "create_entities", {"entities": [{"name": "D", "entityType": "u", "observations": ["d"]}]})
    await call(reference, "create_relations", {"relations": [{"from": "D", "to": "A", "relationType": "sees",
                                                              "weight": 0.3}]})
    data = await graph(mesh)
    assert data["nodes"][-1] == node("D", "u", ["d"])
    assert data["edges"][-1] == edge("D", "A", "sees", 0.3)


# -- the real process -------------------------------------------------------------------------------


def test_the_real_server_switches_profile_by_setting_and_imports_a_memorymesh_file_on_first_start(
        tmp_path: Path) -> None:
    from test_stdio import handshake, run_session

    legacy = tmp_path / "memory.json"
    legacy.write_text('{"type":"node","name":"Gandalf","nodeType":"npc","metadata":["Role: Wizard"]}\n'
                      '{"type":"node","name":"Shire","nodeType":"location","metadata":[]}\n'
                      '{"type":"edge","from":"Gandalf","to":"Shire","edgeType":"visits","weight":0.5}\n',
                      encoding="utf-8")
    env = {**os.environ, "MEMORY_FILE_PATH": str(legacy), "MEMORY_TOOLS": "memorymesh", "MEMORY_LOG_LEVEL": "warning"}
    messages, stderr, code = run_session(env, [
        *handshake(("read_graph", {}), ("add_nodes", {"nodes": [node("Frodo", "hobbit")]})),
        {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}])
    assert code == 0, stderr
    by_id = {m.get("id"): m for m in messages}
    assert by_id[1]["result"]["structuredContent"]["data"] == {
        "nodes": [node("Gandalf", "npc", ["Role: Wizard"]), node("Shire", "location")],
        "edges": [edge("Gandalf", "Shire", "visits", 0.5)]}
    assert not by_id[2]["result"].get("isError")
    assert [t["name"] for t in by_id[9]["result"]["tools"]] == STATIC
    env["MEMORY_TOOLS"] = "reference"
    messages, stderr, code = run_session(env, handshake(("read_graph", {})))
    assert code == 0, stderr
    (reply,) = [m for m in messages if m.get("id") == 1]
    assert [e["name"] for e in reply["result"]["structuredContent"]["entities"]] == ["Gandalf", "Shire", "Frodo"]


async def test_an_unknown_tool_is_a_memorymesh_error_naming_the_tools(mesh: Any) -> None:
    result = await mesh.call_tool("create_entities", {"entities": []})
    assert result.is_error and result.content[0].text.startswith("Error during create_entities: Unknown tool")
    assert "add_nodes" in result.structured_content["error"] and result.structured_content["recoverySteps"]
