"""Reading a large memory through a real MCP client: the summary view, times, ``since``, paging
and the reply-size bound (issue 15). Every structured result is validated by the client against
the advertised output schema."""

from __future__ import annotations

import json
from typing import Any

import pytest

from helpers import call, call_error, names, sample_path, upstream_oracle

pytestmark = pytest.mark.anyio

ALICE = {"name": "Alice", "entityType": "person", "observations": ["likes coffee", "lives in Lyon"]}
BOB = {"name": "Bob", "entityType": "person", "observations": []}
ACME = {"name": "Acme", "entityType": "organization", "observations": ["makes anvils"]}
WORKS = {"from": "Alice", "to": "Acme", "relationType": "works_at"}
KNOWS = {"from": "Bob", "to": "Alice", "relationType": "knows", "weight": 0.5}


async def seed(client: Any) -> None:
    await call(client, "create_entities", {"entities": [ALICE, BOB, ACME]})
    await call(client, "create_relations", {"relations": [WORKS, KNOWS]})


def summary(entity: dict[str, Any]) -> dict[str, Any]:
    return {"name": entity["name"], "entityType": entity["entityType"],
            "observationCount": len(entity["observations"])}


# -- the default reply is unchanged ------------------------------------------------------------------

@pytest.mark.parametrize(("tool", "arguments"), [
    ("read_graph", {}),
    ("search_nodes", {"query": "a"}),
    ("open_nodes", {"names": ["Alice"]}),
])
async def test_default_reply_text_has_exactly_the_reference_keys(client: Any, tool: str,
                                                                 arguments: dict[str, Any]) -> None:
    await seed(client)
    result = await client.call_tool(tool, arguments)
    text = result.content[0].text
    payload = json.loads(text)
    assert text == json.dumps(payload, indent=2, ensure_ascii=False)
    assert list(payload) == ["entities", "relations", "neighbors"]
    for entity in payload["entities"] + payload["neighbors"]:
        assert list(entity) == ["name", "entityType", "observations"]
    for relation in payload["relations"]:
        assert set(relation) <= {"from", "to", "relationType", "weight"}


# -- summary view ----------------------------------------------------------------------------------

async def test_read_graph_summary_counts_observations_and_keeps_relations(client: Any) -> None:
    await seed(client)
    full = await call(client, "read_graph", {})
    short = await call(client, "read_graph", {"view": "summary"})
    assert short == {"entities": [summary(e) for e in full["entities"]], "relations": full["relations"],
                     "neighbors": []}
    assert short["entities"][0] == {"name": "Alice", "entityType": "person", "observationCount": 2}
    assert (await call(client, "read_graph", {"view": "full"})) == full


@pytest.mark.parametrize(("tool", "arguments"), [
    ("search_nodes", {"query": "Alice"}),
    ("search_nodes", {"query": "coffee", "mode": "words"}),
    ("open_nodes", {"names": ["Acme"]}),
])
async def test_summary_view_shows_entities_and_neighbors_without_texts(client: Any, tool: str,
                                                                      arguments: dict[str, Any]) -> None:
    await seed(client)
    full = await call(client, tool, arguments)
    short = await call(client, tool, {**arguments, "view": "summary"})
    assert full["neighbors"], "the case must have neighbors"
    assert short == {"entities": [summary(e) for e in full["entities"]], "relations": full["relations"],
                     "neighbors": [summary(e) for e in full["neighbors"]]}


async def test_unknown_view_is_a_clear_error(client: Any) -> None:
    message = await call_error(client, "read_graph", {"view": "brief"})
    assert "view" in message and "'full' or 'summary'" in message


async def test_summary_of_the_reference_sample_is_a_fraction_of_the_full_reply(client: Any) -> None:
    entities, relations = upstream_oracle(sample_path())
    known = {e["name"] for e in entities}
    relations = [r for r in relations if r["from"] in known and r["to"] in known]  # no dangling ones
    await call(client, "create_entities", {"entities": entities})
    await call(client, "create_relations", {"relations": relations})
    full = await client.call_tool("read_graph", {})
    short = await client.call_tool("read_graph", {"view": "summary"})
    assert len(short.content[0].text) < 0.7 * len(full.content[0].text)   # relations stay whole
    assert names(json.loads(short.content[0].text)) == [e["name"] for e in entities]
    assert json.loads(short.content[0].text)["relations"] == relations
