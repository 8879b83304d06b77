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


# -- times -----------------------------------------------------------------------------------------

def _times(row: dict[str, Any]) -> tuple[str | None, str | None]:
    return row["createdAt"], row["updatedAt"]


def _utc_now() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


async def test_timestamps_show_when_rows_were_written_and_default_replies_have_none(client: Any) -> None:
    before = _utc_now()
    await seed(client)
    after = _utc_now()
    graph = await call(client, "read_graph", {"timestamps": True})
    alice = graph["entities"][0]
    assert list(alice) == ["name", "entityType", "observations", "createdAt", "updatedAt", "observationTimes"]
    assert alice["observations"] == ALICE["observations"]
    assert len(alice["observationTimes"]) == 2
    for row in [alice, *alice["observationTimes"], *graph["relations"]]:
        assert before <= row["createdAt"] == row["updatedAt"] <= after
    assert graph["relations"][1]["weight"] == 0.5
    short = await call(client, "read_graph", {"timestamps": True, "view": "summary"})
    assert short["entities"][0] == {"name": "Alice", "entityType": "person", "observationCount": 2,
                                    "createdAt": alice["createdAt"], "updatedAt": alice["updatedAt"]}
    assert "createdAt" not in (await call(client, "read_graph", {}))["entities"][0]
    opened = await call(client, "open_nodes", {"names": ["Alice"], "timestamps": True})
    assert opened["entities"][0] == alice and all("createdAt" in n for n in opened["neighbors"])
    found = await call(client, "search_nodes", {"query": "coffee", "timestamps": True})
    assert found["entities"][0] == alice


@pytest.mark.parametrize(("tool", "arguments"), [
    ("add_observations", {"observations": [{"entityName": "Bob", "contents": ["plays chess"]}]}),
    ("delete_observations", {"deletions": [{"entityName": "Bob", "observations": ["owns a cat"]}]}),
    ("update_observations", {"updates": [{"entityName": "Bob", "match": "owns a cat", "replacement": "owns a dog"}]}),
])
async def test_every_observation_change_updates_its_entity_and_since_finds_it(client: Any, tool: str,
                                                                              arguments: dict[str, Any]) -> None:
    import anyio

    await seed(client)
    await call(client, "add_observations", {"observations": [{"entityName": "Bob", "contents": ["owns a cat"]}]})
    await anyio.sleep(0.005)   # times are stored to the millisecond: the next write is later
    moment = _utc_now()
    await anyio.sleep(0.005)
    await call(client, tool, arguments)
    bob = (await call(client, "open_nodes", {"names": ["Bob"], "timestamps": True}))["entities"][0]
    assert bob["createdAt"] < moment <= bob["updatedAt"]
    changed = await call(client, "read_graph", {"since": moment})
    assert changed == {"entities": [(await call(client, "open_nodes", {"names": ["Bob"]}))["entities"][0]],
                       "relations": [], "neighbors": []}
    assert names(await call(client, "search_nodes", {"query": "", "since": moment})) == ["Bob"]
    assert names(await call(client, "search_nodes", {"query": "person", "since": moment})) == ["Bob"]
    assert (await call(client, "search_nodes", {"query": "Acme", "since": moment}))["entities"] == []


async def test_since_is_inclusive_and_update_relations_dates_the_relation(client: Any) -> None:
    import anyio

    await seed(client)
    alice = (await call(client, "open_nodes", {"names": ["Alice"], "timestamps": True}))["entities"][0]
    assert names(await call(client, "read_graph", {"since": alice["updatedAt"]}))[:1] == ["Alice"]
    await anyio.sleep(0.005)
    moment = _utc_now()
    await anyio.sleep(0.005)
    await call(client, "update_relations", {"relations": [{**WORKS, "weight": 0.0}]})
    graph = await call(client, "read_graph", {"since": moment, "timestamps": True})
    assert graph["entities"] == []
    (relation,) = graph["relations"]
    assert (relation["from"], relation["weight"]) == ("Alice", 0.5)
    assert relation["createdAt"] < moment <= relation["updatedAt"]


@pytest.mark.parametrize("since", ["yesterday", "2026-13-01", "", "12/01/2026"])
async def test_bad_since_is_a_clear_error(client: Any, since: str) -> None:
    for tool, arguments in (("read_graph", {}), ("search_nodes", {"query": "a"})):
        message = await call_error(client, tool, {**arguments, "since": since})
        assert "is not an ISO 8601 date or time" in message and "2026-12-01T09:30:00Z" in message


async def test_since_accepts_dates_and_offsets(client: Any) -> None:
    await seed(client)
    for since in ("2000-01-01", "2000-01-01T00:00", "2000-01-01T02:00:00+02:00", "2000-01-01T00:00:00Z"):
        assert names(await call(client, "read_graph", {"since": since})) == ["Alice", "Bob", "Acme"]
    assert (await call(client, "read_graph", {"since": "2999-01-01"}))["entities"] == []


# -- unknown times: rows imported from a legacy file -----------------------------------------------

LEGACY = (b'{"type":"entity","name":"Old","entityType":"thing","observations":["was here"]}\n'
          b'{"type":"entity","name":"Older","entityType":"thing","observations":[]}\n'
          b'{"type":"relation","from":"Old","to":"Older","relationType":"precedes"}\n')


def _first_start(folder: Any) -> Any:
    from graph_memory.db.store import Store
    from graph_memory.importer import first_start_import

    (folder / "memory.jsonl").write_bytes(LEGACY)
    store = Store.open(folder / "memory.db")
    first_start_import(store, [folder / "memory.jsonl"])
    return store


async def test_imported_rows_have_unknown_times_until_they_change(tmp_path: Any) -> None:
    from mcp import Client

    from graph_memory.db.backend import SqliteBackend
    from graph_memory.mcp.server import build_server
    from graph_memory.service import MemoryService

    store = _first_start(tmp_path)
    try:
        async with Client(build_server(MemoryService(SqliteBackend(store))).server) as client:
            graph = await call(client, "read_graph", {"timestamps": True})
            old, older = graph["entities"]
            assert _times(old) == _times(older) == _times(graph["relations"][0]) == (None, None)
            assert old["observationTimes"] == [{"createdAt": None, "updatedAt": None}]
            assert (await call(client, "read_graph", {"since": "2000-01-01"})) == {
                "entities": [], "relations": [], "neighbors": []}
            await call(client, "add_observations", {"observations": [{"entityName": "Old", "contents": ["still is"]}]})
            old = (await call(client, "open_nodes", {"names": ["Old"], "timestamps": True}))["entities"][0]
            assert old["createdAt"] is None and old["updatedAt"] is not None
            assert old["observationTimes"][0] == {"createdAt": None, "updatedAt": None}
            assert old["observationTimes"][1]["createdAt"] == old["updatedAt"]
            assert names(await call(client, "read_graph", {"since": "2000-01-01"})) == ["Old"]
    finally:
        store.close()


def test_migration_0006_marks_first_start_imports_unknown_and_keeps_later_times(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from graph_memory.db import migrations
    from graph_memory.db.store import Store

    known = migrations.load_migrations()
    with monkeypatch.context() as patch:   # a database made and imported into by the previous version
        patch.setattr(migrations, "load_migrations", lambda: known[:5])
        store = _first_start(tmp_path)
        for table in ("entities", "observations"):   # the previous version wrote the import moment
            store.conn.execute(f"UPDATE {table} SET created_at = (SELECT recorded_at FROM legacy_imports), "
                               f"updated_at = (SELECT recorded_at FROM legacy_imports)")
        store.conn.execute("UPDATE relations SET created_at = (SELECT recorded_at FROM legacy_imports)")
        time.sleep(0.005)
        store.conn.execute("INSERT INTO observations (entity_id, content) VALUES (1, 'learned later')")
        later = store.conn.execute("SELECT created_at FROM observations WHERE content = 'learned later'"
                                   ).fetchone()[0]
        imported = store.conn.execute("SELECT created_at FROM entities WHERE name = 'Older'").fetchone()[0]
        store.close()
    assert imported != "" and imported < later
    store = Store.open(tmp_path / "memory.db")   # applies 0006
    try:
        rows = store.conn.execute("SELECT name, created_at, updated_at FROM entities ORDER BY id").fetchall()
        assert rows == [("Old", "", later), ("Older", "", "")]
        assert store.conn.execute("SELECT content, created_at FROM observations ORDER BY id").fetchall() == [
            ("was here", ""), ("learned later", later)]
        assert store.conn.execute("SELECT created_at, updated_at FROM relations").fetchall() == [("", None)]
        assert len(store.conn.execute("SELECT secret FROM cursor_secret").fetchone()[0]) == 32
    finally:
        store.close()
