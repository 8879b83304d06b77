"""The advertised tool schemas: upstream's inputs exactly (plus optional extras), outputs that
validate what the tools return, and upstream's annotations."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from graph_memory.mcp.tools import ENTITY_READ_OUT, RELATION_READ_OUT

from helpers import UPSTREAM_TOOLS, checked

pytestmark = pytest.mark.anyio

UPSTREAM_NAMES = ["create_entities", "create_relations", "add_observations", "delete_entities",
                  "delete_observations", "delete_relations", "read_graph", "search_nodes", "open_nodes"]
IGNORED_KEYS = {"description", "$schema", "title"}


def upstream_tools() -> dict[str, dict[str, Any]]:
    if not UPSTREAM_TOOLS.exists():
        pytest.skip(f"{UPSTREAM_TOOLS} not present")
    return {t["name"]: t for t in json.loads(UPSTREAM_TOOLS.read_text(encoding="utf-8"))["tools"]}


def skeleton(schema: Any) -> Any:
    """A schema without documentation keys: what decides which instances are accepted."""
    if isinstance(schema, dict):
        return {k: skeleton(v) for k, v in schema.items() if k not in IGNORED_KEYS}
    if isinstance(schema, list):
        return [skeleton(v) for v in schema]
    return schema


def without_optional_extras(ours: dict[str, Any], theirs: dict[str, Any]) -> dict[str, Any]:
    """Our schema minus the optional properties upstream does not have, at every object level
    (the top level and inside array items, e.g. create_relations' optional ``weight``)."""
    out = dict(ours)
    if "properties" in ours:
        extras = set(ours["properties"]) - set(theirs.get("properties", {}))
        assert not extras & set(ours.get("required", [])), "extras must be optional"
        out["properties"] = {k: without_optional_extras(v, theirs["properties"][k])
                             for k, v in ours["properties"].items() if k not in extras}
    if isinstance(ours.get("items"), dict) and isinstance(theirs.get("items"), dict):
        out["items"] = without_optional_extras(ours["items"], theirs["items"])
    return out


async def advertised(client: Any) -> dict[str, Any]:
    return {t.name: t for t in (await client.list_tools()).tools}


async def test_every_upstream_tool_is_advertised_plus_update_observations(client: Any) -> None:
    tools = await advertised(client)
    assert set(UPSTREAM_NAMES) <= set(tools)
    assert "update_observations" in tools


@pytest.mark.parametrize("name", UPSTREAM_NAMES)
async def test_input_schema_accepts_exactly_what_upstream_accepts(client: Any, name: str) -> None:
    theirs = upstream_tools()[name]["inputSchema"]
    ours = (await advertised(client))[name].input_schema
    assert skeleton(without_optional_extras(ours, theirs)) == skeleton(theirs)


# Instances on both sides of upstream's schemas; both validators must agree on each.
PROBES: dict[str, list[Any]] = {
    "create_entities": [{"entities": []}, {"entities": [{"name": "a", "entityType": "b", "observations": []}]},
                        {"entities": [{"name": "a", "entityType": "b"}]}, {"entities": [{"name": 1, "entityType": "b",
                        "observations": []}]}, {}, {"entities": "x"}, {"entities": [{"name": "a", "entityType": "b",
                        "observations": [1]}]}, {"entities": [], "extra": 1}],
    "create_relations": [{"relations": [{"from": "a", "to": "b", "relationType": "c"}]},
                         {"relations": [{"from": "a", "to": "b"}]}, {"relations": [{"source": "a", "to": "b",
                         "relationType": "c"}]}],
    "add_observations": [{"observations": [{"entityName": "a", "contents": ["x"]}]},
                         {"observations": [{"entityName": "a"}]}, {"observations": [{"entityName": "a",
                         "contents": "x"}]}],
    "delete_entities": [{"entityNames": ["a"]}, {"entityNames": "a"}, {"entity_names": ["a"]}],
    "delete_observations": [{"deletions": [{"entityName": "a", "observations": ["x"]}]}, {"deletions": [{}]}],
    "delete_relations": [{"relations": []}, {"relations": [{"from": "a", "to": "b", "relationType": 3}]}],
    "read_graph": [{}, {"anything": 1}],
    "search_nodes": [{"query": "x"}, {"query": ""}, {}, {"query": 5}],
    "open_nodes": [{"names": ["a"]}, {"names": [1]}, {"names": None}],
}


@pytest.mark.parametrize("name", UPSTREAM_NAMES)
async def test_input_schema_validates_probe_instances_like_upstream(client: Any, name: str) -> None:
    theirs = upstream_tools()[name]["inputSchema"]
    ours = (await advertised(client))[name].input_schema
    theirs_validator = jsonschema.Draft7Validator(theirs)
    ours_validator = jsonschema.Draft202012Validator(ours)
    for probe in PROBES[name]:
        assert ours_validator.is_valid(probe) == theirs_validator.is_valid(probe), probe


@pytest.mark.parametrize("name", UPSTREAM_NAMES)
async def test_annotations_match_upstream(client: Any, name: str) -> None:
    theirs = upstream_tools()[name]["annotations"]
    ann = (await advertised(client))[name].annotations
    assert {
        "readOnlyHint": ann.read_only_hint, "destructiveHint": ann.destructive_hint,
        "idempotentHint": ann.idempotent_hint, "openWorldHint": ann.open_world_hint,
    } == theirs


@pytest.mark.parametrize("name", UPSTREAM_NAMES)
async def test_titles_match_upstream(client: Any, name: str) -> None:
    """Hosts show a tool's title (VS Code's tool picker, approval prompts): a switching user sees
    the reference server's titles, not bare names."""
    assert (await advertised(client))[name].title == upstream_tools()[name]["title"]


async def test_our_own_tools_have_titles_in_the_same_style(client: Any) -> None:
    tools = await advertised(client)
    for name in ("update_observations", "update_relations"):
        assert tools[name].title == name.replace("_", " ").title()


@pytest.mark.parametrize("name", UPSTREAM_NAMES)
async def test_output_schema_keeps_every_upstream_field(client: Any, name: str) -> None:
    theirs = upstream_tools()[name]["outputSchema"]
    ours = (await advertised(client))[name].output_schema
    assert set(theirs["properties"]) <= set(ours["properties"])
    assert set(theirs.get("required", [])) <= set(ours.get("required", []))


async def test_every_output_schema_is_a_valid_json_schema(client: Any) -> None:
    for tool in (await advertised(client)).values():
        jsonschema.Draft202012Validator.check_schema(tool.output_schema)
        jsonschema.Draft202012Validator.check_schema(tool.input_schema)
        assert tool.input_schema["type"] == "object"


@pytest.mark.parametrize("name", UPSTREAM_NAMES)
async def test_schemas_declare_the_reference_servers_dialect(client: Any, name: str) -> None:
    """Draft-07, as upstream's schemas declare: a client picks its validator from ``$schema``
    (the official Python client checks results ~18 % faster under draft-07 than under the
    2020-12 default), and the schemas are valid in it."""
    tool = (await advertised(client))[name]
    theirs = upstream_tools()[name]
    for ours, upstream in ((tool.input_schema, theirs["inputSchema"]), (tool.output_schema, theirs["outputSchema"])):
        assert ours["$schema"] == upstream["$schema"] == "http://json-schema.org/draft-07/schema#"
        jsonschema.Draft7Validator.check_schema(ours)
        assert jsonschema.validators.validator_for(ours) is jsonschema.Draft7Validator


@pytest.mark.parametrize("name", ["read_graph", "search_nodes", "open_nodes"])
async def test_reading_tools_check_items_by_their_required_keys_and_declare_fields_in_definitions(
        client: Any, name: str) -> None:
    """The official Python client checks every result with jsonschema in pure Python, one subschema
    descent per present field of every item (about half of its time on a broad search,
    docs/benchmarks.md): the advertised items are objects with their required keys, and their
    fields are declared in ``definitions``, exactly as the replies are checked by the tests."""
    schema = (await advertised(client))[name].output_schema
    assert schema["definitions"] == {"entity": ENTITY_READ_OUT, "relation": RELATION_READ_OUT}
    for key, definition in (("entities", "entity"), ("neighbors", "entity"), ("relations", "relation")):
        items = schema["properties"][key]["items"]
        assert set(items) == {"type", "properties", "required", "description"}
        assert items["required"] == schema["definitions"][definition]["required"]
        # Declared as `true` (anything): Ajv's strict mode needs each required key declared.
        assert items["properties"] == dict.fromkeys(items["required"], True)
        assert items["description"] == f"Fields: #/definitions/{definition}"
        assert checked(items) == {"$ref": f"#/definitions/{definition}"}
    advertised_check, full_check = jsonschema.Draft7Validator(schema), jsonschema.Draft7Validator(checked(schema))
    entity = {"name": "a", "entityType": "t", "observations": ["x"]}
    for good in ({"entities": [entity], "relations": [{"from": "a", "to": "b", "relationType": "r"}],
                  "neighbors": [{"name": "b", "entityType": "t", "observationCount": 2}]},
                 {"entities": [], "relations": [], "neighbors": [], "nextCursor": "c"}):
        assert advertised_check.is_valid(good) and full_check.is_valid(good)
    for bad in ({"entities": [{"name": "a", "observations": []}], "relations": [], "neighbors": []},
                {"entities": ["a"], "relations": [], "neighbors": []},
                {"entities": [], "relations": [{"from": "a", "to": "b"}], "neighbors": []},
                {"entities": [], "relations": []}):
        assert not advertised_check.is_valid(bad) and not full_check.is_valid(bad)
    for wrong_field in ({**entity, "observations": [1]}, {**entity, "observationCount": 1},
                        {"name": "a", "entityType": "t"}, {**entity, "createdAt": 5}):
        reply = {"entities": [wrong_field], "relations": [], "neighbors": []}
        assert advertised_check.is_valid(reply) and not full_check.is_valid(reply)
