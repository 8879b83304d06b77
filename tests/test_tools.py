"""Every tool through an in-process MCP client: success shapes, errors, and atomic batches."""

from __future__ import annotations

from typing import Any

import pytest

from helpers import call, call_error, names

pytestmark = [pytest.mark.anyio, pytest.mark.both_backends]

ALICE = {"name": "Alice", "entityType": "person", "observations": ["likes coffee", "lives in Lyon"]}
BOB = {"name": "Bob", "entityType": "person", "observations": []}
ACME = {"name": "Acme", "entityType": "organization", "observations": ["makes anvils"]}


async def seed(client: Any) -> None:
    await call(client, "create_entities", {"entities": [ALICE, BOB, ACME]})
    await call(client, "create_relations", {"relations": [
        {"from": "Alice", "to": "Acme", "relationType": "works_at"},
        {"from": "Bob", "to": "Alice", "relationType": "knows"},
    ]})


async def graph_of(client: Any) -> dict[str, Any]:
    return await call(client, "read_graph", {})


# -- create_entities -------------------------------------------------------------------------------

async def test_create_entities_returns_created_entities_as_text_array_and_structured(client: Any) -> None:
    result = await client.call_tool("create_entities", {"entities": [ALICE]})
    assert not result.is_error
    assert result.structured_content == {"entities": [ALICE]}
    assert result.content[0].text.startswith("[\n  {\n    \"name\": \"Alice\"")


async def test_create_entities_skips_existing_names_and_in_call_repeats(client: Any) -> None:
    await call(client, "create_entities", {"entities": [ALICE]})
    out = await call(client, "create_entities", {"entities": [
        {"name": "Alice", "entityType": "robot", "observations": ["new"]},
        BOB,
        {"name": "Bob", "entityType": "cat", "observations": ["second Bob"]},
    ]})
    assert out == {"entities": [BOB]}
    graph = await graph_of(client)
    assert graph["entities"] == [ALICE, BOB]


async def test_create_entities_deduplicates_observations_keeping_first_order(client: Any) -> None:
    out = await call(client, "create_entities", {"entities": [
        {"name": "X", "entityType": "t", "observations": ["b", "a", "b", "c", "a"]}]})
    assert out["entities"][0]["observations"] == ["b", "a", "c"]


async def test_create_entities_names_are_case_sensitive(client: Any) -> None:
    await call(client, "create_entities", {"entities": [ALICE, {**ALICE, "name": "alice"}]})
    assert names(await graph_of(client)) == ["Alice", "alice"]


async def test_create_entities_wrong_type_is_a_clear_error_and_writes_nothing(client: Any) -> None:
    message = await call_error(client, "create_entities", {"entities": [ALICE, {"name": 5, "entityType": "x",
                                                                               "observations": []}]})
    assert "entities.1.name" in message and "string" in message
    assert (await graph_of(client))["entities"] == []


async def test_create_entities_missing_field_is_reported_by_path(client: Any) -> None:
    message = await call_error(client, "create_entities", {"entities": [{"name": "A", "entityType": "x"}]})
    assert "entities.0.observations" in message
    assert "Field required" in message


# -- create_relations ------------------------------------------------------------------------------

async def test_create_relations_skips_existing_and_repeated_triples(client: Any) -> None:
    await seed(client)
    out = await call(client, "create_relations", {"relations": [
        {"from": "Alice", "to": "Acme", "relationType": "works_at"},
        {"from": "Acme", "to": "Bob", "relationType": "employs"},
        {"from": "Acme", "to": "Bob", "relationType": "employs"},
    ]})
    assert out == {"relations": [{"from": "Acme", "to": "Bob", "relationType": "employs"}]}
    assert len((await graph_of(client))["relations"]) == 3


@pytest.mark.parametrize("missing_end", ["from", "to"])
async def test_create_relations_unknown_endpoint_fails_whole_call(client: Any, missing_end: str) -> None:
    await seed(client)
    bad = {"from": "Alice", "to": "Bob", "relationType": "admires", missing_end: "Zed"}
    message = await call_error(client, "create_relations", {"relations": [
        {"from": "Bob", "to": "Acme", "relationType": "visited"}, bad]})
    assert message == "Entity with name Zed not found"
    assert len((await graph_of(client))["relations"]) == 2


async def test_create_relations_repeating_a_stored_dangling_relation_creates_nothing(client: Any,
                                                                                       graph_backend: Any) -> None:
    """A relation to a missing entity that a legacy file brought in exists already: repeating it
    is skipped like any existing triple ([] as the reference server answers), not refused for its
    missing endpoint; a new relation to that missing entity is still refused."""
    from graph_memory.importer import load_graph
    from graph_memory.legacy import parse_legacy

    load_graph(graph_backend, parse_legacy(
        b'{"type":"entity","name":"Alice","entityType":"person","observations":[]}\n'
        b'{"type":"relation","from":"Alice","to":"Ghost","relationType":"fears"}\n'), source="memory.jsonl")
    fears = {"from": "Alice", "to": "Ghost", "relationType": "fears"}
    assert await call(client, "create_relations", {"relations": [fears]}) == {"relations": []}
    assert await call_error(client, "create_relations", {"relations": [
        fears, {"from": "Ghost", "to": "Alice", "relationType": "haunts"}]}) == "Entity with name Ghost not found"
    assert (await graph_of(client))["relations"] == [fears]
    out = await call(client, "delete_entities", {"entityNames": ["Ghost"]})   # the relation goes, and says so
    assert out["message"] == "Deleted 0 of 1 entity (and 1 relation to or from the names given); not found: Ghost"
    assert (await graph_of(client))["relations"] == []


# -- add_observations ------------------------------------------------------------------------------

async def test_add_observations_adds_only_new_contents(client: Any) -> None:
    await seed(client)
    out = await call(client, "add_observations", {"observations": [
        {"entityName": "Alice", "contents": ["likes coffee", "plays chess", "plays chess"]},
        {"entityName": "Bob", "contents": ["new here"]},
    ]})
    assert out == {"results": [
        {"entityName": "Alice", "addedObservations": ["plays chess"]},
        {"entityName": "Bob", "addedObservations": ["new here"]},
    ]}
    graph = await graph_of(client)
    assert graph["entities"][0]["observations"] == ["likes coffee", "lives in Lyon", "plays chess"]


async def test_add_observations_unknown_entity_writes_nothing(client: Any) -> None:
    await seed(client)
    message = await call_error(client, "add_observations", {"observations": [
        {"entityName": "Alice", "contents": ["should not stay"]},
        {"entityName": "Nobody", "contents": ["x"]},
    ]})
    assert message == "Entity with name Nobody not found"
    assert (await graph_of(client))["entities"][0] == ALICE


# -- delete_entities -------------------------------------------------------------------------------

async def test_delete_entities_cascades_and_reports_what_matched(client: Any) -> None:
    await seed(client)
    out = await call(client, "delete_entities", {"entityNames": ["Alice", "Alise"]})
    assert out == {"success": True, "message": "Deleted 1 of 2 entities (and 2 relations to or from the names "
                                               "given); not found: Alise",
                   "deletedEntities": ["Alice"]}
    graph = await graph_of(client)
    assert names(graph) == ["Bob", "Acme"]
    assert graph["relations"] == []
    search = await call(client, "search_nodes", {"query": "coffee"})
    assert search["entities"] == []


async def test_delete_entities_of_nothing_changes_nothing(client: Any) -> None:
    await seed(client)
    out = await call(client, "delete_entities", {"entityNames": []})
    assert out["deletedEntities"] == [] and out["message"] == "Deleted 0 of 0 entities"
    assert len((await graph_of(client))["entities"]) == 3


# -- delete_observations ---------------------------------------------------------------------------

async def test_delete_observations_exact_match_with_per_entity_messages(client: Any) -> None:
    await seed(client)
    out = await call(client, "delete_observations", {"deletions": [
        {"entityName": "Alice", "observations": ["likes coffee", "LIKES COFFEE"]},
        {"entityName": "Ghost", "observations": ["boo"]},
    ]})
    assert out["success"] is True
    assert out["results"] == [
        {"entityName": "Alice", "deletedObservations": ["likes coffee"], "message": "deleted 1 of 2 requested"},
        {"entityName": "Ghost", "deletedObservations": [], "message": "Entity with name Ghost not found"},
    ]
    assert "not found: Ghost" in out["message"]
    assert (await graph_of(client))["entities"][0]["observations"] == ["lives in Lyon"]


# -- delete_relations ------------------------------------------------------------------------------

async def test_delete_relations_reports_only_matches(client: Any) -> None:
    await seed(client)
    out = await call(client, "delete_relations", {"relations": [
        {"from": "Alice", "to": "Acme", "relationType": "works_at"},
        {"from": "Alice", "to": "Acme", "relationType": "WORKS_AT"},
    ]})
    assert out == {"success": True, "message": "Deleted 1 of 2 relations",
                   "deletedRelations": [{"from": "Alice", "to": "Acme", "relationType": "works_at"}]}
    assert (await graph_of(client))["relations"] == [{"from": "Bob", "to": "Alice", "relationType": "knows"}]


# -- update_observations ---------------------------------------------------------------------------

async def test_update_observations_edits_in_place_keeping_position(client: Any, store: Any, backend_kind: str) -> None:
    if backend_kind != "sqlite":
        pytest.skip("reads the SQLite rows; the PostgreSQL rows are checked in test_postgres")
    await seed(client)
    created = store.conn.execute(
        "SELECT id, created_at FROM observations WHERE content = 'likes coffee'").fetchone()
    out = await call(client, "update_observations", {"updates": [
        {"entityName": "Alice", "match": "likes coffee", "replacement": "likes tea"}]})
    assert out == {"results": [{"entityName": "Alice",
                                "updatedObservations": [{"match": "likes coffee", "replacement": "likes tea"}]}]}
    assert (await graph_of(client))["entities"][0]["observations"] == ["likes tea", "lives in Lyon"]
    row = store.conn.execute("SELECT id, created_at, updated_at FROM observations WHERE content = 'likes tea'"
                             ).fetchone()
    assert row[:2] == created
    assert row[2] >= row[1]
    assert names(await call(client, "search_nodes", {"query": "tea"})) == ["Alice"]
    assert (await call(client, "search_nodes", {"query": "coffee"}))["entities"] == []


@pytest.mark.parametrize(("update", "expected"), [
    ({"entityName": "Nobody", "match": "a", "replacement": "b"}, "Entity with name Nobody not found"),
    ({"entityName": "Alice", "match": "absent", "replacement": "b"}, "no observation 'absent'"),
    ({"entityName": "Alice", "match": "likes coffee", "replacement": "lives in Lyon"}, "already has"),
    ({"entityName": "Alice", "match": "likes coffee", "replacement": "likes coffee"}, "already has"),
])
async def test_update_observations_failure_writes_nothing(client: Any, update: dict[str, str], expected: str) -> None:
    await seed(client)
    message = await call_error(client, "update_observations", {"updates": [
        {"entityName": "Acme", "match": "makes anvils", "replacement": "makes rockets"}, update]})
    assert expected in message
    graph = await graph_of(client)
    assert graph["entities"][2]["observations"] == ["makes anvils"]


async def test_update_observations_later_updates_see_earlier_ones(client: Any) -> None:
    await seed(client)
    await call(client, "update_observations", {"updates": [
        {"entityName": "Acme", "match": "makes anvils", "replacement": "makes rockets"},
        {"entityName": "Acme", "match": "makes rockets", "replacement": "makes rocket skates"},
    ]})
    assert (await graph_of(client))["entities"][2]["observations"] == ["makes rocket skates"]


async def test_update_observations_checks_each_replacement_after_the_earlier_updates(client: Any) -> None:
    await seed(client)
    message = await call_error(client, "update_observations", {"updates": [
        {"entityName": "Alice", "match": "likes coffee", "replacement": "likes tea"},
        {"entityName": "Alice", "match": "lives in Lyon", "replacement": "likes tea"}]})
    assert "already has the observation 'likes tea'" in message
    assert (await graph_of(client))["entities"][0]["observations"] == ["likes coffee", "lives in Lyon"]
    await call(client, "update_observations", {"updates": [   # the first frees what the second takes
        {"entityName": "Alice", "match": "likes coffee", "replacement": "likes tea"},
        {"entityName": "Alice", "match": "lives in Lyon", "replacement": "likes coffee"}]})
    assert (await graph_of(client))["entities"][0]["observations"] == ["likes tea", "likes coffee"]


# -- read_graph / open_nodes / search_nodes --------------------------------------------------------

async def test_read_graph_returns_everything_in_creation_order(client: Any) -> None:
    await seed(client)
    graph = await graph_of(client)
    assert graph == {
        "entities": [ALICE, BOB, ACME],
        "relations": [{"from": "Alice", "to": "Acme", "relationType": "works_at"},
                      {"from": "Bob", "to": "Alice", "relationType": "knows"}],
        "neighbors": [],
    }


async def test_open_nodes_returns_relations_touching_and_neighbors(client: Any) -> None:
    await seed(client)
    out = await call(client, "open_nodes", {"names": ["Alice", "Nobody"]})
    assert names(out) == ["Alice"]
    assert out["relations"] == [{"from": "Alice", "to": "Acme", "relationType": "works_at"},
                                {"from": "Bob", "to": "Alice", "relationType": "knows"}]
    assert names(out, "neighbors") == ["Bob", "Acme"]


async def test_open_nodes_closed_set_has_no_neighbors_and_rowid_order(client: Any) -> None:
    await seed(client)
    out = await call(client, "open_nodes", {"names": ["Acme", "Alice"]})
    assert names(out) == ["Alice", "Acme"]
    assert out["relations"] == [{"from": "Alice", "to": "Acme", "relationType": "works_at"},
                                {"from": "Bob", "to": "Alice", "relationType": "knows"}]
    assert names(out, "neighbors") == ["Bob"]
    assert (await call(client, "open_nodes", {"names": ["Alice", "Bob", "Acme"]}))["neighbors"] == []


async def test_search_nodes_matches_name_type_and_observations_case_insensitively(client: Any) -> None:
    await seed(client)
    assert names(await call(client, "search_nodes", {"query": "ACME"})) == ["Acme"]
    assert names(await call(client, "search_nodes", {"query": "Person"})) == ["Alice", "Bob"]
    assert names(await call(client, "search_nodes", {"query": "anvil"})) == ["Acme"]
    assert names(await call(client, "search_nodes", {"query": ""})) == ["Alice", "Bob", "Acme"]
    assert names(await call(client, "search_nodes", {"query": "zz"})) == []


async def test_search_nodes_whole_query_must_appear(client: Any) -> None:
    await seed(client)
    assert (await call(client, "search_nodes", {"query": "Alice coffee"}))["entities"] == []


async def test_search_nodes_query_over_2048_characters_is_refused(client: Any) -> None:
    message = await call_error(client, "search_nodes", {"query": "x" * 2049})
    assert "2048" in message


async def test_unknown_tool_is_a_tool_error(client: Any) -> None:
    message = await call_error(client, "drop_everything", {})
    assert "Unknown tool" in message


# -- limits ----------------------------------------------------------------------------------------

async def test_unpaired_surrogate_is_refused_with_a_clear_error(client: Any) -> None:
    message = await call_error(client, "create_entities", {"entities": [
        {"name": "bad\ud800", "entityType": "t", "observations": []}]})
    assert "surrogate" in message and "entities.0.name" in message


async def test_overlong_name_is_refused(client: Any) -> None:
    message = await call_error(client, "create_entities", {"entities": [
        {"name": "n" * 1025, "entityType": "t", "observations": []}]})
    assert "1024" in message and "MEMORY_MAX_NAME_LENGTH" in message


# -- resource --------------------------------------------------------------------------------------

async def test_knowledge_graph_resource_has_read_graph_payload(client: Any) -> None:
    import json

    await seed(client)
    listed = await client.list_resources()
    assert [str(r.uri) for r in listed.resources] == ["memory://knowledge-graph"]
    assert listed.resources[0].mime_type == "application/json"
    read = await client.read_resource("memory://knowledge-graph")
    assert json.loads(read.contents[0].text) == await graph_of(client)
