"""The search documents and the FTS index stay exactly in step with the graph after every write.

Adding writes take one of two paths: per-row triggers for small additions to existing entities,
or index.batched, which writes each touched document once (graph.create_entities always;
add_observations from index.BATCHED_SYNC_FROM observations, see index.sync_mode). Whichever path
ran, each entity's document must equal the one a full rebuild would produce, the FTS5 index must
pass its integrity check against the documents, and every observation must be found by search.
"""

from __future__ import annotations

from typing import Any

import pytest

from graph_memory.db import graph, index, search
from graph_memory.db.store import Store
from graph_memory.errors import InvalidInput
from graph_memory.mcp.tools import TOOLS
from graph_memory.mcp.typed import load_typed_tools
from graph_memory.models import Entity
from graph_memory.service import MemoryService

from helpers import REPO

SPECS = {spec.name: spec for spec in TOOLS}


def run(memory: MemoryService, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return dict(SPECS[tool].run(memory, arguments).structured)


def assert_index_matches_graph(store: Store) -> None:
    conn = store.conn
    expected: dict[int, tuple[str, str, str]] = {}
    for entity_id, name, entity_type in conn.execute("SELECT id, name, entity_type FROM entities"):
        observations = [content for (content,) in conn.execute(
            "SELECT content FROM observations WHERE entity_id = ? ORDER BY id", (entity_id,))]
        expected[entity_id] = (name.lower(), entity_type.lower(), "\n".join(o.lower() for o in observations))
    stored = {row[0]: tuple(row[1:]) for row in conn.execute(
        "SELECT entity_id, name, entity_type, observations FROM entity_search")}
    assert stored == expected
    assert store.integrity_problems() == []
    for name, _, document in expected.values():
        for observation in document.split("\n") if document else []:
            hits = store.run_read(lambda c, o=observation: search.search_substring(c, o))
            assert name in [e.name.lower() for e in hits.entities], (observation, name)


@pytest.mark.parametrize("batched_from", [1, index.BATCHED_SYNC_FROM, 10_000])
def test_documents_follow_every_adding_write(memory: MemoryService, store: Store, monkeypatch: pytest.MonkeyPatch,
                                             batched_from: int) -> None:
    monkeypatch.setattr(index, "BATCHED_SYNC_FROM", batched_from)
    run(memory, "create_entities", {"entities": [
        {"name": "Ada Łovelace", "entityType": "Person", "observations": ["Wrote the first PROGRAM", "İstanbul trip"]},
        {"name": "Bare", "entityType": "thing", "observations": []},
        {"name": "Ada Łovelace", "entityType": "dup", "observations": ["ignored: the first occurrence wins"]},
    ]})
    assert_index_matches_graph(store)
    # Existing names are skipped while new ones in the same call are indexed.
    created = run(memory, "create_entities", {"entities": [
        {"name": "Bare", "entityType": "thing", "observations": ["never added"]},
        {"name": "Grace", "entityType": "person", "observations": ["COBOL", "COBOL", "Navy ⚓"]},
    ]})
    assert [e["name"] for e in created["entities"]] == ["Grace"]
    assert_index_matches_graph(store)
    run(memory, "add_observations", {"observations": [
        {"entityName": "Bare", "contents": ["now has a fact"]},
        {"entityName": "Grace", "contents": ["Navy ⚓", "compiler pioneer"] + [f"fact {i}" for i in range(20)]},
    ]})
    assert_index_matches_graph(store)
    run(memory, "update_observations", {"updates": [
        {"entityName": "Grace", "match": "COBOL", "replacement": "FLOW-MATIC and COBOL"}]})
    run(memory, "delete_observations", {"deletions": [
        {"entityName": "Ada Łovelace", "observations": ["İstanbul trip"]}]})
    run(memory, "delete_entities", {"entityNames": ["Bare"]})
    assert_index_matches_graph(store)
    assert [e.name for e in store.run_read(lambda c: search.search_substring(c, "flow-matic")).entities] == ["Grace"]
    assert store.run_read(lambda c: search.search_substring(c, "never added")).entities == []
    assert store.run_read(lambda c: search.search_substring(c, "first occurrence")).entities == []


def test_failed_create_rolls_back_the_sync_switch(memory: MemoryService, store: Store,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A create_entities call failing after its inserts (inside the batched sync) writes nothing
    and leaves the per-row sync on, so later writes keep the index in step."""
    original = graph.create_entities

    def create_then_fail(conn: Any, entities: Any) -> Any:
        original(conn, entities)
        raise InvalidInput("simulated failure after the inserts")

    monkeypatch.setattr(graph, "create_entities", create_then_fail)
    with pytest.raises(InvalidInput):
        run(memory, "create_entities", {"entities": [{"name": "x", "entityType": "t", "observations": ["a fact"]}]})
    monkeypatch.setattr(graph, "create_entities", original)
    assert store.conn.execute("SELECT enabled FROM search_sync").fetchall() == [(1,)]
    assert store.conn.execute("SELECT count(*) FROM entities").fetchall() == [(0,)]
    run(memory, "create_entities", {"entities": [{"name": "y", "entityType": "t", "observations": ["ok fact"]}]})
    run(memory, "add_observations", {"observations": [{"entityName": "y", "contents": ["second fact"]}]})
    assert_index_matches_graph(store)


def test_typed_add_indexes_every_property(memory: MemoryService, store: Store) -> None:
    """add_<type> (schema-driven tools) writes the new entity's document once, with every
    property observation in it."""
    typed = {spec.name: spec for spec in load_typed_tools(REPO / "examples" / "schemas")}
    typed["add_location"].run(memory, {"location": {"name": "Greywater", "kind": "city",
                                                    "description": "A harbour town with Tide-Bells"}})
    typed["add_artifact"].run(memory, {"artifact": {"name": "Bell of Ys", "rarity": "legendary",
                                                    "description": "Rings before storms",
                                                    "keptIn": "Greywater", "powers": ["calls fog", "calms waves"]}})
    assert_index_matches_graph(store)
    for needle in ("tide-bells", "storms", "calms waves", "legendary"):
        assert store.run_read(lambda c, n=needle: search.search_substring(c, n)).entities, needle


def test_batched_sync_inside_a_batch_or_bulk_load_leaves_the_documents_to_it(store: Store) -> None:
    """create_entities inside an enclosing batch or a bulk load does not switch the per-row sync
    back on half-way: the enclosing one writes every document once, at its end."""
    def nested(conn: Any) -> None:
        with index.batched(conn):
            graph.create_entities(conn, [Entity("a", "t", ["first fact"])])
            assert conn.execute("SELECT enabled FROM search_sync").fetchall() == [(0,)]
            graph.add_observations(conn, [("a", ["second fact"])])

    store.run_write(nested)

    def bulk(conn: Any) -> None:
        with index.rebuild(conn):
            graph.create_entities(conn, [Entity("b", "t", ["bulk fact"])])
            assert conn.execute("SELECT enabled FROM search_sync").fetchall() == [(0,)]
            assert conn.execute("SELECT count(*) FROM entity_search WHERE entity_id = 2").fetchall() == [(0,)]

    store.run_write(bulk)
    assert store.conn.execute("SELECT enabled FROM search_sync").fetchall() == [(1,)]
    assert_index_matches_graph(store)
    for needle, name in (("second fact", "a"), ("bulk fact", "b")):
        assert [e.name for e in store.run_read(lambda c, n=needle: search.search_substring(c, n)).entities] == [name]
