"""Typed tools from schema files (MEMORY_SCHEMAS_DIR): loading and validation, the generated
add_/update_/delete_<type> tools through an in-process MCP client, and the documented session."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import jsonschema
import mcp_types as types
import pytest
from mcp import Client

from graph_memory import cli
from graph_memory.db.backend import SqliteBackend
from graph_memory.db.store import Store
from graph_memory.errors import SchemaError
from graph_memory.mcp.server import build_server
from graph_memory.mcp.typed import PROPERTY_NAME, display_name, load_schemas, load_typed_tools
from graph_memory.models import property_key
from graph_memory.service import MemoryService

from helpers import REPO, call, call_error, undeclared_required

pytestmark = [pytest.mark.anyio, pytest.mark.both_backends]
EXAMPLES = REPO / "examples" / "schemas"
DOCS = [REPO / "README.md", REPO / "docs" / "typed-tools.md"]

NPC = {
    "name": "add_npc",
    "description": "A character",
    "properties": {
        "name": {"type": "string", "description": "Unique name", "required": True},
        "race": {"type": "string", "description": "Species", "required": True, "enum": ["Human", "Elf"]},
    },
}


@pytest.fixture
def typed_server(memory: MemoryService) -> Any:
    return build_server(memory, extra_tools=load_typed_tools(EXAMPLES)).server


@pytest.fixture
async def typed(typed_server: Any) -> AsyncIterator[Any]:
    async with Client(typed_server) as client:
        yield client


async def snapshot(client: Any) -> dict[str, Any]:
    return await call(client, "read_graph", {})


async def world(client: Any) -> None:
    """Two locations and an NPC in the first."""
    await call(client, "add_location", {"location": {"name": "Greywater", "kind": "city",
                                                     "description": "A harbour town"}})
    await call(client, "add_location", {"location": {"name": "Rusty Anchor", "kind": "building",
                                                     "description": "A tavern", "parentLocation": "Greywater"}})
    await call(client, "add_npc", {"npc": {"name": "Mira", "race": "Elf", "role": "innkeeper",
                                           "currentLocation": "Rusty Anchor"}})


def write_schema(folder: Path, name: str, content: Any) -> Path:
    path = folder / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return path


def with_property(key: str, spec: Any) -> dict[str, Any]:
    return {**NPC, "properties": {**NPC["properties"], key: spec}}


# -- loading and validation -----------------------------------------------------------------------

INVALID: list[tuple[Any, str]] = [
    ('{"name": "add_npc", ', "is not valid JSON"),                              # truncated file
    ([NPC], "must be a JSON object"),                                           # a list, not an object
    ({**NPC, "name": "npc"}, "must start with 'add_'"),                         # no add_ prefix
    ({k: v for k, v in NPC.items() if k != "name"}, "'name' is missing"),       # no name at all
    ({**NPC, "name": "add_"}, "must start with a letter"),                      # empty type
    ({**NPC, "name": "add_my npc"}, "only letters, digits"),                    # not usable in a tool name
    ({**NPC, "name": "add_observations"}, "standard tool"),                     # add_observations exists
    ({**NPC, "name": "add_relations"}, "update_relations"),                     # update_relations exists
    ({k: v for k, v in NPC.items() if k != "description"}, "'description' is missing"),
    ({k: v for k, v in NPC.items() if k != "properties"}, "'properties' is missing"),
    ({**NPC, "propertes": {}}, "unknown key(s) 'propertes'"),                   # a typo at the top
    ({**NPC, "additionalProperties": "yes"}, "'additionalProperties' must be true or false"),
    (with_property("age", {"description": "Age"}), "property 'age': 'type' is missing"),
    (with_property("age", {"type": "number", "description": "Age"}), "typed tools support \"string\" and \"array\""),
    (with_property("age", {"type": "string"}), "property 'age': 'description' is missing"),
    (with_property("age", {"type": "string", "description": " "}), "property 'age': 'description' is missing"),
    (with_property("age", "string"), "property 'age': must be an object"),
    (with_property("age", {"type": "string", "description": "Age", "requried": True}), "unknown key(s) 'requried'"),
    (with_property("age", {"type": "string", "description": "Age", "required": "yes"}), "'required' must be true"),
    (with_property("mood", {"type": "string", "description": "Mood", "enum": "happy"}), "'enum' must be a non-empty"),
    (with_property("mood", {"type": "string", "description": "Mood", "enum": []}), "'enum' must be a non-empty"),
    (with_property("mood", {"type": "string", "description": "Mood", "enum": [1, 2]}), "'enum' must be a non-empty"),
    (with_property("mood", {"type": "string", "description": "Mood", "enum": ["a", "a"]}), "lists a value twice"),
    (with_property("mood", {"type": "string", "description": "Mood", "items": {"type": "string", "enum": ["a"]}}),
     "'items' belongs to an array property"),                                   # an enum on a string's items
    (with_property("tags", {"type": "array", "description": "Tags", "items": {"type": "number"}}),
     "'items' may only be"),
    (with_property("home", {"type": "string", "description": "Home", "relationship": {}}), "'edgeType' is missing"),
    (with_property("home", {"type": "string", "description": "Home", "relationship": "lives_in"}),
     "'relationship' must be an object"),
    (with_property("home", {"type": "string", "description": "Home",
                            "relationship": {"edgeType": "lives_in", "target": "x"}}), "unknown key(s) 'target'"),
    (with_property("name", {"type": "array", "description": "Names"}), "must be a plain string"),
    (with_property("name", {"type": "string", "description": "Name", "required": False}), "always required"),
    (with_property("9lives", {"type": "string", "description": "Lives"}), "a property name starts with a letter"),
    ({**NPC, "properties": {"homeTown": {"type": "string", "description": "a"},
                            "home_town": {"type": "string", "description": "b"}}}, "both be stored as 'Home Town"),
    ({**NPC, "properties": {"homeTown": {"type": "string", "description": "a"},   # one key in any spelling
                            "hometown": {"type": "string", "description": "b"}}}, "or as one in another spelling"),
    ({**NPC, "properties": {"home": {"type": "string", "description": "a", "relationship": {"edgeType": "in"}},
                            "work": {"type": "string", "description": "b", "relationship": {"edgeType": "in"}}}},
     "both use edgeType 'in'"),
]


@pytest.mark.parametrize(("content", "problem"), INVALID, ids=[p for _, p in INVALID])
def test_invalid_schema_is_refused_naming_file_and_problem(tmp_path: Path, content: Any, problem: str) -> None:
    write_schema(tmp_path, "fine.schema.json", {**NPC, "name": "add_fine"})
    path = write_schema(tmp_path, "npc.schema.json", content)
    with pytest.raises(SchemaError) as raised:
        load_typed_tools(tmp_path)
    assert str(path) in str(raised.value)
    assert problem in str(raised.value)


def test_schema_that_is_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "npc.schema.json"
    path.write_bytes(b'{"name": "add_npc", "description": "caf\xe9"}')
    with pytest.raises(SchemaError, match="is not UTF-8 text") as raised:
        load_schemas(tmp_path)
    assert str(path) in str(raised.value)


def test_two_files_defining_one_type_are_refused(tmp_path: Path) -> None:
    first = write_schema(tmp_path, "npc.schema.json", NPC)
    second = write_schema(tmp_path, "people.schema.json", NPC)
    with pytest.raises(SchemaError) as raised:
        load_schemas(tmp_path)
    message = str(raised.value)
    assert str(second) in message and str(first) in message and "type 'npc' is already defined" in message


@pytest.mark.parametrize("make", [lambda p: p / "missing", lambda p: write_schema(p, "file", "x")])
def test_schemas_dir_that_is_not_a_folder_is_refused(tmp_path: Path, make: Any) -> None:
    with pytest.raises(SchemaError, match="MEMORY_SCHEMAS_DIR"):
        load_schemas(make(tmp_path))


def test_no_folder_means_no_typed_tools() -> None:
    assert load_typed_tools(None) == ()


def test_name_property_is_implicit_and_memorymesh_file_names_work(tmp_path: Path) -> None:
    write_schema(tmp_path, "add_npc.schema.json",
                 {**NPC, "properties": {"race": NPC["properties"]["race"]}})   # MemoryMesh's file naming
    write_schema(tmp_path, "README.md", "not a schema")                          # other files are ignored
    (schema,) = load_schemas(tmp_path)
    assert schema.type_name == "npc"
    assert [p.key for p in schema.properties] == ["name", "race"]
    add = schema.tools()[0].input_schema["properties"]["npc"]
    assert add["required"] == ["name", "race"]


def test_every_example_schema_loads() -> None:
    names = {s.type_name for s in load_schemas(EXAMPLES)}
    assert {"npc", "location", "artifact", "quest"} <= names


@pytest.mark.parametrize(("key", "label"), [("race", "Race"), ("currentLocation", "Current Location"),
                                            ("home_town", "Home Town"), ("npcID", "Npc ID"),
                                            ("XMLFile", "XML File"), ("level2Boss", "Level2 Boss")])
def test_display_names_are_title_case(key: str, label: str) -> None:
    assert display_name(key) == label


def test_a_property_label_has_its_keys_property_key_for_every_first_letter() -> None:
    """``update_<type>`` finds a property's lines by ``property_key``: the label the tools write
    must have the key's (QA: ``ırk`` is labelled ``Irk``, and its own line was not found again)."""
    starts = [chr(c) for c in range(0x110000) if PROPERTY_NAME.fullmatch(chr(c))]
    assert len(starts) > 100_000
    differing = [c for c in starts if property_key(display_name(c + "ab")) != property_key(c + "ab")]
    assert differing == []


# -- the CLI refuses to start with an invalid schema ----------------------------------------------


def test_cli_serve_refuses_invalid_schema_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    bad = write_schema(schemas, "npc.schema.json", {**NPC, "name": "npc"})
    monkeypatch.setenv("MEMORY_SCHEMAS_DIR", str(schemas))
    monkeypatch.setenv("MEMORY_FILE_PATH", str(tmp_path / "memory.db"))
    assert cli.main(["serve"]) == cli.EXIT_ERROR
    err = capsys.readouterr().err
    assert str(bad) in err and "must start with 'add_'" in err
    assert not (tmp_path / "memory.db").exists()   # refused before the database was opened


def test_server_process_exits_1_naming_the_bad_schema(tmp_path: Path) -> None:
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    write_schema(schemas, "quest.schema.json", with_property("mood", {"type": "string", "description": "x",
                                                                     "enum": []}))
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_SCHEMAS_DIR=str(schemas), MEMORY_FILE_PATH=str(tmp_path / "memory.db"))
    done = subprocess.run([sys.executable, "-m", "graph_memory"], env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 1
    assert "quest.schema.json" in done.stderr and "'enum' must be a non-empty list" in done.stderr


def test_a_start_without_memory_schemas_dir_names_the_schemas_beside_the_memory_file(tmp_path: Path) -> None:
    """MemoryMesh loads schemas/ beside its memory file by itself; a start here without
    MEMORY_SCHEMAS_DIR served no typed tools and said nothing (found by QA)."""
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    write_schema(schemas, "add_npc.schema.json", NPC)
    (tmp_path / "memory.json").write_text('{"type":"node","name":"Grog","nodeType":"npc","metadata":[]}\n')
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_FILE_PATH=str(tmp_path / "memory.json"), MEMORY_TOOLS="memorymesh")
    done = subprocess.run([sys.executable, "-m", "graph_memory"], env=env, stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "schemas_dir_not_set" in done.stderr and f"MEMORY_SCHEMAS_DIR={schemas}" in done.stderr


# -- advertised schemas ---------------------------------------------------------------------------


async def test_every_output_schema_declares_its_required_keys_for_strict_validators(typed: Any) -> None:
    """Ajv in strict mode (the TypeScript SDK's documented strict validator) refuses a schema with a
    ``required`` key its object does not declare, definitions included (a host that resolves them
    compiles them): every tool, typed ones too (tests/test_ts_client.py compiles the listing)."""
    tools = (await typed.list_tools()).tools
    assert len(tools) > 20
    assert {tool.name: undeclared_required(tool.output_schema) for tool in tools} == {tool.name: [] for tool in tools}


async def test_typed_tools_are_advertised_with_real_json_schemas(typed: Any) -> None:
    tools = {t.name: t for t in (await typed.list_tools()).tools}
    for kind in ("npc", "location", "artifact", "quest"):
        for verb in ("add", "update", "delete"):
            tool = tools[f"{verb}_{kind}"]
            jsonschema.Draft202012Validator.check_schema(tool.input_schema)
            jsonschema.Draft202012Validator.check_schema(tool.output_schema)
            assert tool.input_schema["required"] == [kind]
    npc = tools["add_npc"].input_schema["properties"]["npc"]
    assert npc["required"] == ["name", "race", "role", "currentLocation"]
    assert npc["properties"]["race"]["enum"][0] == "Human"
    assert npc["additionalProperties"] != False  # noqa: E712  # npc allows extra properties
    assert tools["add_location"].input_schema["properties"]["location"]["additionalProperties"] is False
    assert tools["update_npc"].input_schema["properties"]["npc"]["required"] == ["name"]
    assert "" in tools["update_npc"].input_schema["properties"]["npc"]["properties"]["status"]["enum"]
    validator = jsonschema.Draft202012Validator(tools["add_npc"].input_schema)
    assert not validator.is_valid({"npc": {"name": "X", "race": "Hobbit", "role": "guard", "currentLocation": "Y"}})
    assert validator.is_valid({"npc": {"name": "X", "race": "Elf", "role": "guard", "currentLocation": "Y"}})


# -- add_<type> -----------------------------------------------------------------------------------


async def test_add_stores_properties_as_observations_and_relationships_as_relations(typed: Any) -> None:
    await world(typed)
    out = await call(typed, "add_npc", {"npc": {
        "name": "Tomas", "race": "Human", "role": "guard", "currentLocation": "Greywater",
        "traits": ["gruff", "loyal", "gruff"], "allies": ["Mira", "Tomas"], "favoriteDrink": "dark ale"}})
    assert out["entity"] == {"name": "Tomas", "entityType": "npc", "observations": [
        "Race: Human", "Role: guard", "Current Location: Greywater", "Traits: gruff, loyal",
        "Allies: Mira, Tomas", "Favorite Drink: dark ale"]}
    assert out["createdRelations"] == [
        {"from": "Tomas", "to": "Greywater", "relationType": "located_in"},
        {"from": "Tomas", "to": "Mira", "relationType": "allied_with"},
        {"from": "Tomas", "to": "Tomas", "relationType": "allied_with"},
    ]
    graph = await snapshot(typed)
    assert {"from": "Rusty Anchor", "to": "Greywater", "relationType": "located_in"} in graph["relations"]
    assert graph["entities"][-1] == out["entity"]


async def test_add_skips_empty_optional_values(typed: Any) -> None:
    await world(typed)
    out = await call(typed, "add_npc", {"npc": {"name": "Ned", "race": "Human", "role": "commoner",
                                                "currentLocation": "Greywater", "traits": [], "status": ""}})
    assert out["entity"]["observations"] == ["Race: Human", "Role: commoner", "Current Location: Greywater"]


FAILED_ADDS: list[tuple[dict[str, Any], str]] = [
    ({"npc": {"name": "X", "race": "Hobbit", "role": "guard", "currentLocation": "Greywater"}},
     "npc.race: 'Hobbit' is not one of 'Human', 'Elf'"),                        # enum
    ({"npc": {"name": "X", "race": "Elf", "role": "guard", "currentLocation": "Greywater",
              "status": "asleep"}}, "npc.status: 'asleep' is not one of"),       # optional enum
    ({"npc": {"name": "X", "role": "guard", "currentLocation": "Greywater"}}, "npc.race: Field required"),
    ({"npc": {"race": "Elf", "role": "guard", "currentLocation": "Greywater"}}, "npc.name: Field required"),
    ({"npc": {"name": "X", "race": "Elf", "role": "guard", "currentLocation": ""}},
     "npc.currentLocation: must not be empty"),
    ({"npc": {"name": "X", "race": "Elf", "role": "guard", "currentLocation": 7}},
     "npc.currentLocation: should be a string"),
    ({"npc": {"name": "X", "race": "Elf", "role": "guard", "currentLocation": "Greywater", "traits": "shy"}},
     "npc.traits: should be an array of strings"),
    ({"npc": {"name": "X", "race": "Elf", "role": "guard", "currentLocation": "Nowhere"}},
     "Entity with name Nowhere not found"),                                      # relationship target missing
    ({"npc": {"name": "X", "race": "Elf", "role": "guard", "currentLocation": "Greywater",
              "allies": ["Mira", "Ghost"]}}, "Entity with name Ghost not found"),
    ({"npc": {"name": "Mira", "race": "Elf", "role": "guard", "currentLocation": "Greywater"}},
     "Entity with name Mira already exists"),
    ({"name": "X", "race": "Elf"}, 'call it as {"npc": {"name"'),               # not wrapped
    ({"npc": "X"}, "npc: should be an object"),
    ({"npc": {"name": "X", "race": "Elf", "role": "guard", "currentLocation": "Greywater", "age": 3}},
     "npc.age: should be a string"),                                             # extra property, not text
]


@pytest.mark.parametrize(("arguments", "message"), FAILED_ADDS, ids=[m for _, m in FAILED_ADDS])
async def test_failed_add_is_a_clear_error_and_writes_nothing(typed: Any, arguments: dict[str, Any],
                                                              message: str) -> None:
    await world(typed)
    before = await snapshot(typed)
    assert message in await call_error(typed, "add_npc", arguments)
    assert await snapshot(typed) == before


async def test_add_refuses_unknown_property_when_schema_is_closed(typed: Any) -> None:
    message = await call_error(typed, "add_location", {"location": {
        "name": "Cave", "kind": "dungeon", "description": "Damp", "smell": "bad"}})
    assert "location.smell: unknown property" in message
    assert (await snapshot(typed))["entities"] == []


async def test_add_reports_every_problem_at_once(typed: Any) -> None:
    message = await call_error(typed, "add_npc", {"npc": {"name": "X", "race": "Dragon"}})
    assert "npc.race: 'Dragon'" in message and "npc.role: Field required" in message
    assert "npc.currentLocation: Field required" in message


# -- update_<type> --------------------------------------------------------------------------------


def observation_rows(store: Store, name: str) -> list[tuple[int, str, str, str]]:
    return [tuple(row) for row in store.conn.execute(  # type: ignore[misc]
        "SELECT o.id, o.content, o.created_at, o.updated_at FROM observations o "
        "JOIN entities e ON e.id = o.entity_id WHERE e.name = ? ORDER BY o.id", (name,))]


async def test_update_edits_the_observation_in_place_and_moves_the_edge(typed: Any, store: Store,
                                                                       backend_kind: str) -> None:
    if backend_kind != "sqlite":
        pytest.skip("reads the SQLite rows; the PostgreSQL rows are checked in test_postgres")
    await world(typed)
    before = observation_rows(store, "Mira")
    await anyio.sleep(0.01)   # so a rewritten row would get a different created_at
    out = await call(typed, "update_npc", {"npc": {"name": "Mira", "currentLocation": "Greywater",
                                                   "role": "merchant"}})
    assert out["entity"]["observations"] == ["Race: Elf", "Role: merchant", "Current Location: Greywater"]
    assert out["updatedObservations"] == [
        {"match": "Role: innkeeper", "replacement": "Role: merchant"},
        {"match": "Current Location: Rusty Anchor", "replacement": "Current Location: Greywater"},
    ]
    assert out["deletedRelations"] == [{"from": "Mira", "to": "Rusty Anchor", "relationType": "located_in"}]
    assert out["createdRelations"] == [{"from": "Mira", "to": "Greywater", "relationType": "located_in"}]
    assert out["addedObservations"] == [] and out["deletedObservations"] == []
    after = observation_rows(store, "Mira")
    assert [(r[0], r[2]) for r in after] == [(r[0], r[2]) for r in before]   # same rows, same created_at
    assert after[1][3] > before[1][3] and after[0][3] == before[0][3]       # updated_at set on edited rows only
    relations = (await snapshot(typed))["relations"]
    assert {"from": "Mira", "to": "Greywater", "relationType": "located_in"} in relations
    assert {"from": "Mira", "to": "Rusty Anchor", "relationType": "located_in"} not in relations


async def test_update_of_an_array_relationship_keeps_edges_that_stay_with_their_weight(typed: Any) -> None:
    await world(typed)
    for name in ("Ana", "Bo", "Cy"):
        await call(typed, "add_npc", {"npc": {"name": name, "race": "Human", "role": "guard",
                                              "currentLocation": "Greywater"}})
    await call(typed, "update_npc", {"npc": {"name": "Mira", "allies": ["Ana", "Bo"]}})
    await call(typed, "update_relations", {"relations": [{"from": "Mira", "to": "Bo", "relationType": "allied_with",
                                                          "weight": 0.5}]})
    out = await call(typed, "update_npc", {"npc": {"name": "Mira", "allies": ["Bo", "Cy"]}})
    assert out["updatedObservations"] == [{"match": "Allies: Ana, Bo", "replacement": "Allies: Bo, Cy"}]
    assert out["deletedRelations"] == [{"from": "Mira", "to": "Ana", "relationType": "allied_with"}]
    assert out["createdRelations"] == [{"from": "Mira", "to": "Cy", "relationType": "allied_with"}]
    allies = [r for r in (await snapshot(typed))["relations"] if r["relationType"] == "allied_with"]
    assert allies == [{"from": "Mira", "to": "Bo", "relationType": "allied_with", "weight": 0.75},
                      {"from": "Mira", "to": "Cy", "relationType": "allied_with"}]


async def test_update_adds_an_unset_property_and_empty_value_removes_it(typed: Any) -> None:
    await world(typed)
    await call(typed, "add_npc", {"npc": {"name": "Bo", "race": "Human", "role": "guard",
                                          "currentLocation": "Greywater"}})
    out = await call(typed, "update_npc", {"npc": {"name": "Mira", "status": "wounded", "allies": ["Bo"]}})
    assert out["addedObservations"] == ["Allies: Bo", "Status: wounded"]
    out = await call(typed, "update_npc", {"npc": {"name": "Mira", "status": "", "allies": []}})
    assert out["deletedObservations"] == ["Allies: Bo", "Status: wounded"]
    assert out["deletedRelations"] == [{"from": "Mira", "to": "Bo", "relationType": "allied_with"}]
    assert out["entity"]["observations"] == ["Race: Elf", "Role: innkeeper", "Current Location: Rusty Anchor"]


async def test_update_finds_a_property_in_every_spelling_memorymesh_writes_and_leaves_one_value(typed: Any) -> None:
    """MemoryMesh's add tools store ``currentLocation: …`` (the raw key), its update tools
    ``Currentlocation: …``; we write ``Current Location: …``. An update added its own line beside
    theirs, leaving two contradicting values (found by QA on a MemoryMesh file). Now the first
    line of the property, in any spelling, is edited in place and the others are deleted."""
    await world(typed)
    await call(typed, "create_entities", {"entities": [{"name": "Grog", "entityType": "npc", "observations": [
        "name: Grog", "race: Orc", "status: alive", "note: currentLocation is guessed", "currentLocation: Greywater",
        "Currentlocation: Rusty Anchor", "Status: wounded"]}]})
    out = await call(typed, "update_npc", {"npc": {"name": "Grog", "status": "dead", "currentLocation": "Greywater"}})
    assert out["updatedObservations"] == [   # in the schema's order of properties
        {"match": "currentLocation: Greywater", "replacement": "Current Location: Greywater"},
        {"match": "status: alive", "replacement": "Status: dead"}]
    assert out["deletedObservations"] == ["Currentlocation: Rusty Anchor", "Status: wounded"]
    assert out["entity"]["observations"] == ["name: Grog", "race: Orc", "Status: dead",
                                             "note: currentLocation is guessed", "Current Location: Greywater"]
    # Our own line is found again (nothing changes); an empty value removes every spelling.
    out = await call(typed, "update_npc", {"npc": {"name": "Grog", "status": "dead", "race": "Orc"}})
    assert out["updatedObservations"] == [{"match": "race: Orc", "replacement": "Race: Orc"}]
    assert out["addedObservations"] == out["deletedObservations"] == []
    await call(typed, "add_observations", {"observations": [{"entityName": "Grog", "contents": ["STATUS: unsure"]}]})
    out = await call(typed, "update_npc", {"npc": {"name": "Grog", "status": ""}})
    assert out["deletedObservations"] == ["Status: dead", "STATUS: unsure"]
    assert out["entity"]["observations"] == ["name: Grog", "Race: Orc", "note: currentLocation is guessed",
                                             "Current Location: Greywater"]


async def test_update_with_unchanged_values_changes_nothing(typed: Any) -> None:
    await world(typed)
    before = await snapshot(typed)
    out = await call(typed, "update_npc", {"npc": {"name": "Mira", "race": "Elf", "currentLocation": "Rusty Anchor"}})
    assert [out[k] for k in ("updatedObservations", "addedObservations", "deletedObservations",
                             "createdRelations", "deletedRelations")] == [[], [], [], [], []]
    assert await snapshot(typed) == before


async def test_update_accepts_memorymesh_wrapper_and_extra_properties(typed: Any) -> None:
    await world(typed)
    out = await call(typed, "update_npc", {"update_npc": {"name": "Mira", "favoriteDrink": "tea"}})
    assert out["addedObservations"] == ["Favorite Drink: tea"]
    out = await call(typed, "update_npc", {"npc": {"name": "Mira", "favoriteDrink": "wine"}})
    assert out["updatedObservations"] == [{"match": "Favorite Drink: tea", "replacement": "Favorite Drink: wine"}]


FAILED_UPDATES: list[tuple[str, dict[str, Any], str]] = [
    ("update_npc", {"npc": {"name": "Nobody", "role": "guard"}}, "Entity with name Nobody not found"),
    ("update_npc", {"npc": {"name": "Greywater", "role": "guard"}}, "has entityType 'location', not 'npc'"),
    ("update_npc", {"npc": {"name": "Mira", "role": "guard", "currentLocation": "Atlantis"}},
     "Entity with name Atlantis not found"),                 # the role edit before it is rolled back too
    ("update_npc", {"npc": {"name": "Mira", "race": "Dragon"}}, "npc.race: 'Dragon' is not one of"),
    ("update_npc", {"npc": {"name": "Mira", "race": ""}}, "npc.race: must not be empty (required)"),
    ("update_npc", {"npc": {"role": "guard"}}, "npc.name: Field required"),
    ("update_location", {"location": {"name": "Greywater", "mayor": "Bob"}}, "location.mayor: unknown property"),
    ("delete_npc", {"npc": {"name": "Greywater"}}, "has entityType 'location', not 'npc'"),
    ("delete_npc", {"npc": {"name": "Nobody"}}, "Entity with name Nobody not found"),
    ("delete_npc", {"npc": {}}, "npc.name: Field required"),
    ("delete_location", {}, 'call it as {"location"'),
]


@pytest.mark.parametrize(("tool", "arguments", "message"), FAILED_UPDATES, ids=[m for _, _, m in FAILED_UPDATES])
async def test_failed_update_or_delete_is_a_clear_error_and_writes_nothing(
        typed: Any, tool: str, arguments: dict[str, Any], message: str) -> None:
    await world(typed)
    before = await snapshot(typed)
    assert message in await call_error(typed, tool, arguments)
    assert await snapshot(typed) == before


# -- delete_<type> --------------------------------------------------------------------------------


async def test_delete_cascades_and_reports_what_went(typed: Any) -> None:
    await world(typed)
    await call(typed, "add_artifact", {"artifact": {"name": "Tide Key", "rarity": "rare",
                                                    "description": "A brass key", "owner": "Mira"}})
    out = await call(typed, "delete_npc", {"delete_npc": {"name": "Mira"}})   # MemoryMesh's wrapper works too
    assert out == {"success": True, "message": "Deleted npc Mira with 3 observations and 2 relations",
                   "deletedEntities": ["Mira"], "deletedRelations": [
                       {"from": "Mira", "to": "Rusty Anchor", "relationType": "located_in"},
                       {"from": "Tide Key", "to": "Mira", "relationType": "belongs_to"}]}
    graph = await snapshot(typed)
    assert "Mira" not in [e["name"] for e in graph["entities"]]
    assert all("Mira" not in (r["from"], r["to"]) for r in graph["relations"])


# -- typed entities are ordinary entities ---------------------------------------------------------


async def test_typed_entities_are_seen_and_changed_by_the_standard_tools(typed: Any) -> None:
    await world(typed)
    found = await call(typed, "search_nodes", {"query": "innkeeper"})
    assert [e["name"] for e in found["entities"]] == ["Mira"]
    assert [e["name"] for e in found["neighbors"]] == ["Rusty Anchor"]
    opened = await call(typed, "open_nodes", {"names": ["Rusty Anchor"]})
    assert opened["entities"][0]["entityType"] == "location"
    resource = await typed.read_resource("memory://knowledge-graph")
    assert json.loads(resource.contents[0].text) == await snapshot(typed)
    await call(typed, "add_observations", {"observations": [{"entityName": "Mira", "contents": ["Sings"]}]})
    out = await call(typed, "update_npc", {"npc": {"name": "Mira", "role": "priest"}})
    assert out["entity"]["observations"] == ["Race: Elf", "Role: priest", "Current Location: Rusty Anchor", "Sings"]
    await call(typed, "delete_entities", {"entityNames": ["Mira"]})
    assert "Entity with name Mira not found" in await call_error(typed, "update_npc", {"npc": {"name": "Mira"}})


async def test_typed_mutations_notify_subscribers(typed_server: Any) -> None:
    updates: list[str] = []
    arrived = anyio.Event()

    async def inbox(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            updates.append(str(message.params.uri))
            arrived.set()

    async with Client(typed_server, mode="legacy", message_handler=inbox) as watcher, \
            Client(typed_server) as writer:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            await watcher.subscribe_resource("memory://knowledge-graph")
        await call(writer, "add_location", {"location": {"name": "Moor", "kind": "wilderness",
                                                         "description": "Fog"}})
        with anyio.fail_after(5):
            await arrived.wait()
    assert updates == ["memory://knowledge-graph"]


# -- the documented session is true ---------------------------------------------------------------

STEP = re.compile(r"^→ `(?P<tool>\w+)`\n```json\n(?P<args>.*?)\n```\n← (?P<kind>result|error)\n```(?:json|text)\n"
                  r"(?P<out>.*?)\n```", re.S | re.M)


def documented_sessions() -> list[tuple[Path, list[re.Match[str]]]]:
    sessions = []
    for path in DOCS:
        if path.exists():
            text = path.read_text(encoding="utf-8")
            if "<!-- typed-session -->" in text:
                start = text.index("<!-- typed-session -->")
                sessions.append((path, list(STEP.finditer(text, start, text.index("<!-- /typed-session -->")))))
    return sessions


def test_the_typed_tools_session_is_documented() -> None:
    assert documented_sessions(), "docs/typed-tools.md (or its README section) holds the example session"


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
async def test_documented_session_replays_exactly(doc: Path, tmp_path: Path) -> None:
    sessions = dict(documented_sessions())
    assert doc in sessions, f"{doc} has no <!-- typed-session --> block"
    steps = sessions[doc]
    path, index = doc, doc.stem
    assert len(steps) >= 6, path
    store = Store.open(tmp_path / f"replay{index}.db")
    try:
        handle = build_server(MemoryService(SqliteBackend(store)), extra_tools=load_typed_tools(EXAMPLES))
        async with Client(handle.server) as client:
            for step in steps:
                result = await client.call_tool(step["tool"], json.loads(step["args"]))
                if step["kind"] == "error":
                    assert result.is_error and result.content[0].text == step["out"], step["tool"]
                else:
                    assert not result.is_error, result.content[0].text
                    assert json.loads(result.content[0].text) == json.loads(step["out"]), step["tool"]
    finally:
        store.close()
