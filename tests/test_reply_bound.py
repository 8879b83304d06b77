"""The one bound on reply size (MEMORY_MAX_REPLY_BYTES) beyond the reading tools' own check
(tests/test_reading.py): the knowledge-graph resource, writing tools, MemoryMesh's reads and
writes whose reply grew from what the graph held, on both backends and both protocol generations."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from tests.helpers import call, call_error

from graph_memory.db.backend import Backend
from graph_memory.mcp.bounds import message_bytes
from graph_memory.mcp.server import GRAPH_URI, build_server
from graph_memory.models import Entity, Relation
from graph_memory.service import Limits, MemoryService

pytestmark = [pytest.mark.anyio, pytest.mark.both_backends]

BOUND = 4_000


def _fill(memory: MemoryService, count: int = 30) -> None:
    memory.create_entities([Entity(f"E{i:02d}", "thing", [f"fact {i} " + "x" * 40]) for i in range(count)])


@pytest.fixture
def bounded(graph_backend: Backend) -> MemoryService:
    return MemoryService(graph_backend, Limits(max_reply_bytes=BOUND))


@pytest.fixture(params=["auto", "legacy"])
async def bounded_client(request: pytest.FixtureRequest, bounded: MemoryService) -> AsyncIterator[Any]:
    """A client of each protocol generation (2026-07-28 and the handshake era) of a server whose
    replies are bounded at BOUND bytes."""
    async with Client(build_server(bounded).server, mode=request.param) as c:
        yield c


async def test_a_small_graph_resource_is_the_whole_graph_as_before(memory: MemoryService, client: Any) -> None:
    _fill(memory, 3)
    read = await client.read_resource(GRAPH_URI)
    assert read.contents[0].text == json.dumps(memory.read_graph().to_dict(), indent=2, ensure_ascii=False)


async def test_a_resource_over_the_bound_is_refused_saying_how_to_read_all_of_it(
        bounded: MemoryService, bounded_client: Any) -> None:
    _fill(bounded)
    with pytest.raises(MCPError) as refused:
        await bounded_client.read_resource(GRAPH_URI)
    message = refused.value.error.message
    assert "MEMORY_MAX_REPLY_BYTES" in message and "not sent" in message
    assert "read_graph" in message and "limit" in message and "nextCursor" in message and "'summary'" in message
    # What the message says works: read_graph page by page, with the limit it gives, gets every
    # entity within the bound (found by QA: it said "limit, e.g. 1000" whatever the graph).
    given = re.search(r"limit (\d+) \(or less\)", message)
    assert given is not None, message
    limit = int(given.group(1))
    assert 1 <= limit < 30
    seen: list[str] = []
    arguments: dict[str, Any] = {"limit": limit}
    while True:
        page = await call(bounded_client, "read_graph", arguments)
        seen += [e["name"] for e in page["entities"]]
        if "nextCursor" not in page:
            break
        arguments = {"limit": limit, "cursor": page["nextCursor"]}
    assert seen == [f"E{i:02d}" for i in range(30)]


async def test_a_write_whose_reply_could_be_over_the_bound_is_refused_before_writing(
        bounded: MemoryService, bounded_client: Any) -> None:
    entities = [{"name": f"N{i:02d}", "entityType": "thing", "observations": ["y" * 60]} for i in range(40)]
    message = await call_error(bounded_client, "create_entities", {"entities": entities})
    assert "MEMORY_MAX_REPLY_BYTES" in message and "nothing was written" in message
    assert bounded.read_graph().entities == []
    parts = int(message.split("Split it into ")[1].split(" ")[0])
    size = -(-len(entities) // parts)
    for start in range(0, len(entities), size):   # what the message says works
        await call(bounded_client, "create_entities", {"entities": entities[start:start + size]})
    assert len(bounded.read_graph().entities) == 40


@pytest.fixture
async def mesh_client(bounded: MemoryService) -> AsyncIterator[Any]:
    async with Client(build_server(bounded, profile="memorymesh").server) as c:
        yield c


async def test_memorymesh_reads_over_the_bound_are_refused_with_what_works_there(
        bounded: MemoryService, mesh_client: Any) -> None:
    _fill(bounded)
    for tool, arguments in (("read_graph", {}), ("search_nodes", {"query": "fact"}),
                            ("open_nodes", {"names": [f"E{i:02d}" for i in range(30)]})):
        result = await mesh_client.call_tool(tool, arguments)
        assert result.is_error
        text = " ".join(c.text for c in result.content)
        assert "MEMORY_MAX_REPLY_BYTES" in text and "open_nodes with fewer names" in text, text
    assert not (await mesh_client.call_tool("open_nodes", {"names": ["E01"]})).is_error
    with pytest.raises(MCPError, match="search_nodes and open_nodes"):
        await mesh_client.read_resource(GRAPH_URI)


async def test_a_memorymesh_error_repeats_large_arguments_only_by_their_size(graph_backend: Backend) -> None:
    """MemoryMesh's error repeats the call's arguments (text and structured content): a large
    refused call made an error over the bound, which stdio replaced by one saying the call had
    done its work (found by QA: nothing was written). Arguments over 16 KiB are now named by
    their size; and a replaced error says that nothing was written."""
    from graph_memory.mcp.bounds import refused_line

    memory = MemoryService(graph_backend, Limits(max_batch=5, max_reply_bytes=50_000))
    nodes = [{"name": f"N{i}", "nodeType": "thing", "metadata": ["x" * 5_000]} for i in range(6)]
    async with Client(build_server(memory, profile="memorymesh").server) as mesh:
        result = await mesh.call_tool("add_nodes", {"nodes": nodes})
    assert result.is_error and result.structured_content is not None
    assert result.content[0].text.startswith("Error during add_nodes:") and "the limit is 5" in result.content[0].text
    echoed = len(json.dumps({"nodes": nodes}, ensure_ascii=False))
    assert result.structured_content["context"]["args"] == f"({echoed:,} characters of arguments, not repeated here)"
    assert sum(len(c.text) for c in result.content) < 2_000 and memory.read_graph().entities == []
    line = refused_line(7, {"content": [{"type": "text", "text": "Error during add_nodes: boom"}], "isError": True},
                        60_000, 50_000)
    text = line["result"]["content"][0]["text"]
    assert "nothing was written" in text and "Error during add_nodes: boom" in text and "do not repeat" not in text


async def test_a_write_whose_reply_grew_over_the_bound_keeps_its_change_and_says_so(
        bounded: MemoryService, mesh_client: Any) -> None:
    """update_nodes answers with the whole node: a small call on a node with many observations."""
    bounded.create_entities([Entity("Big", "thing", [f"fact {i} " + "z" * 40 for i in range(100)])])
    result = await mesh_client.call_tool("update_nodes", {"nodes": [{"name": "Big", "nodeType": "place"}]})
    assert result.is_error
    text = " ".join(c.text for c in result.content)
    assert "succeeded and its changes are saved" in text and "do not repeat it" in text
    (entity,) = bounded.open_nodes(["Big"]).entities
    assert entity.entity_type == "place" and len(entity.observations) == 100


async def test_no_bound_when_it_is_zero(graph_backend: Backend) -> None:
    memory = MemoryService(graph_backend, Limits(max_reply_bytes=0))
    _fill(memory)
    async with Client(build_server(memory).server) as c:
        read = await c.read_resource(GRAPH_URI)
        assert len(read.contents[0].text) > BOUND


def test_message_bytes_is_the_size_of_the_json_rpc_line_in_utf8() -> None:
    """Sizes are UTF-8 bytes, what the SDK's writers send (the stdio transport sends its escaped
    ASCII line only when that fits the bound too: tests/test_stdio.py)."""
    from graph_memory.mcp.jsontext import dumps_line_utf8

    structured = {"entities": [{"name": "Zoë 🍵 喜欢喝茶", "observations": ['says "hi"\n']}]}
    text = json.dumps(structured, indent=2, ensure_ascii=False)
    line = dumps_line_utf8({"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": text}], "structuredContent": structured, "isError": False}})
    assert line is not None
    assert 0 <= message_bytes(text, structured) - len(line) <= 200
    # A lone surrogate cannot be UTF-8: only the escaped line carries it, and it is counted as such.
    assert dumps_line_utf8({"text": "half an emoji \ud83d"}) is None
    assert message_bytes("\ud83d") == message_bytes("x") + 5


async def test_one_entity_too_large_to_open_is_refused_saying_what_works(
        bounded: MemoryService, bounded_client: Any) -> None:
    bounded.create_entities([Entity("Big", "thing", [f"fact {i} " + "z" * 40 for i in range(100)])])
    message = await call_error(bounded_client, "open_nodes", {"names": ["Big"]})
    # read_graph's pages cannot help either: the entity is over the bound on its own
    assert "Big alone is over the bound" in message and "MEMORY_MAX_REPLY_BYTES" in message
    assert "view 'summary'" in message and "Open fewer names" not in message
    summary = await call(bounded_client, "open_nodes", {"names": ["Big"], "view": "summary"})
    assert summary["entities"][0]["observationCount"] == 100


@pytest.mark.parametrize("text", ["喜欢喝茶，住在東京。", "🍵🌸 emoji", "Zoë, café, naïve — «quotes»"])
async def test_a_non_ascii_reply_is_estimated_as_the_line_carries_it(memory: MemoryService, text: str) -> None:
    """Sizes are UTF-8 bytes: a Chinese character takes 3, an emoji 4, in each of the reply's two
    copies. The reading tools' estimate counts that (it once counted characters: 3 to 4 times too
    few for Chinese or emoji, and such a reply could pass the bound and be dropped)."""
    from graph_memory.mcp.jsontext import dumps_indent2
    from graph_memory.service import reply_bytes

    memory.create_entities([Entity(f"{text[:3]} {i}", text[:2], [text * 20, text]) for i in range(40)])
    result = memory.read_graph()
    payload = result.shaped("full", False)
    actual = message_bytes(dumps_indent2(payload), payload)
    assert abs(reply_bytes(result, "full", False) - actual) <= actual / 10, (reply_bytes(result, "full", False), actual)


async def test_the_suggested_page_size_fits_a_page_of_the_largest_entities(
        bounded: MemoryService, bounded_client: Any) -> None:
    """Many small entities and a few large ones together: the page size the refusal suggests is
    sized from the largest entity, not the average one, so paging with it is never refused and
    gets every entity once (sized from the average, the page holding the large ones was over)."""
    import re

    bounded.create_entities([Entity(f"S{i:02d}", "t", ["s"]) for i in range(40)]
                            + [Entity(f"L{i}", "t", ["x" * 600]) for i in range(3)])
    message = await call_error(bounded_client, "read_graph", {})
    assert "also over it: in pages of limit" in message   # the summary of 43 entities is over 4,000 too
    found = re.search(r"limit (\d+)", message)
    assert found is not None, message
    names: list[str] = []
    arguments: dict[str, Any] = {"limit": int(found.group(1))}
    while True:
        page = await call(bounded_client, "read_graph", arguments)   # fails the test on a tool error
        names += [e["name"] for e in page["entities"]]
        if "nextCursor" not in page:
            break
        arguments = {"limit": int(found.group(1)), "cursor": page["nextCursor"]}
    assert names == [f"S{i:02d}" for i in range(40)] + ["L0", "L1", "L2"]


async def _follow(client: Any, tool: str, arguments: dict[str, Any], limit: int) -> list[str]:
    """Every page of ``tool`` with page size ``limit`` (a refused page fails the test); the names sent."""
    names: list[str] = []
    page_arguments = {**arguments, "limit": limit}
    while True:
        page = await call(client, tool, page_arguments)
        names += [e["name"] for e in page["entities"]]
        if "nextCursor" not in page:
            return names
        page_arguments = {**arguments, "limit": limit, "cursor": page["nextCursor"]}


@pytest.mark.parametrize("view", ["full", "summary"])
async def test_the_advised_page_of_a_search_fits_where_early_matches_carry_the_relations(
        bounded: MemoryService, bounded_client: Any, view: str) -> None:
    """A relation between two matches comes with the earlier one, so a search's first pages carry
    more than the average match: the advised limit is sized by cutting the reply into pages
    (found by QA: the summary view's advised page was refused at once)."""
    bounded.create_entities([Entity(f"M{i:02d}", "t", [f"zz {i}"]) for i in range(16)])
    bounded.create_relations([Relation(f"M{i:02d}", f"M{j:02d}", "knows") for i in range(16) for j in range(i + 1, 16)])
    message = await call_error(bounded_client, "search_nodes", {"query": "zz", "view": view})
    found = re.search(r"limit (\d+)", message)
    assert found is not None, message
    assert await _follow(bounded_client, "search_nodes", {"query": "zz", "view": view},
                         int(found.group(1))) == [f"M{i:02d}" for i in range(16)]


async def test_a_hub_match_over_the_bound_is_refused_with_advice_that_works(
        bounded: MemoryService, bounded_client: Any) -> None:
    """One match whose relations and neighbors alone are over the bound: no page size can help
    (found by QA: the error advised limit 1, which was refused the same way); read_graph's pages
    can, and the summary view when it fits."""
    bounded.create_entities([Entity("Hub", "t", ["zzhub"])] + [Entity(f"N{i:03d}", "t", ["spoke"]) for i in range(80)])
    bounded.create_relations([Relation("Hub", f"N{i:03d}", "links") for i in range(80)])
    message = await call_error(bounded_client, "search_nodes", {"query": "zzhub"})
    assert "limit 1 " not in message and "The entity Hub alone, with the relations touching it" in message
    assert "read_graph" in message
    found = re.search(r"limit (\d+)", (await call_error(bounded_client, "read_graph", {})))
    assert found is not None
    assert len(await _follow(bounded_client, "read_graph", {}, int(found.group(1)))) == 81


def test_the_page_items_add_up_to_the_reply_estimate(bounded: MemoryService) -> None:
    """The advised page size weighs each entity and relation at its own kind's bytes per character
    (entities full of escaped quotes here, plain relations): together they are the estimate of the
    whole reply (a relation's rate once stood in for the entities', which made the advice of a
    read_graph with no relation that of a reply a third of its size)."""
    from graph_memory.service import _page_items, reply_bytes

    bounded.create_entities([Entity(f"E{i:02d}", "t", ['"\\' * 150]) for i in range(30)])
    bounded.create_relations([Relation(f"E{i:02d}", f"E{(i + 1) % 30:02d}", "next", 0.5) for i in range(30)])
    for tool, result in (("read_graph", bounded.read_graph()), ("search_nodes", bounded.search_nodes("E"))):
        for view in ("full", "summary"):
            costs, _ = _page_items(tool, result, view, False)   # type: ignore[arg-type]
            whole = reply_bytes(result, view, False)   # type: ignore[arg-type]
            assert abs(sum(costs) + 250 - whole) <= whole / 100, (tool, view, sum(costs), whole)
    entities_only = bounded.read_graph(limit=30)
    assert entities_only.relations == []
    costs, _ = _page_items("read_graph", entities_only, "full", False)
    assert abs(sum(costs) + 250 + 2 * len(entities_only.next_cursor or "") + 40
               - reply_bytes(entities_only, "full", False)) <= 10


async def test_the_advised_search_page_leaves_room_for_the_cursor_it_grows(graph_backend: Backend) -> None:
    """A search cursor carries every id the pages sent, so late pages carry a longer cursor: the
    advised page leaves room for it (found by QA: pages of the advised size were refused part-way,
    and the refusal advised the same size again); a search whose cursor alone would outgrow the
    bound is told to narrow the query or page read_graph."""
    import re

    memory = MemoryService(graph_backend, Limits(max_reply_bytes=12_000))
    for start in range(0, 1500, 500):
        memory.create_entities([Entity(f"Z{i:04d}", "t", ["zz"]) for i in range(start, start + 500)])
    async with Client(build_server(memory).server) as c:
        message = await call_error(c, "search_nodes", {"query": "zz", "view": "summary"})
        found = re.search(r"limit (\d+)", message)
        assert found is not None, message
        sent = await _follow(c, "search_nodes", {"query": "zz", "view": "summary"}, int(found.group(1)))
        assert sent == [f"Z{i:04d}" for i in range(1500)]
    tight = MemoryService(graph_backend, Limits(max_reply_bytes=6_000))
    async with Client(build_server(tight).server) as c:
        message = await call_error(c, "search_nodes", {"query": "zz", "view": "summary"})
        assert "too many entities to be read page by page" in message and "read_graph" in message, message


@pytest.mark.parametrize("heavy", ["word " + "\x01" * 900, "word " + '"\\' * 600, "word " + "漢字😀" * 300])
async def test_the_advised_page_fits_where_a_few_entities_hold_wide_or_escaped_text(graph_backend: Backend,
                                                                                    heavy: str) -> None:
    """Entities whose text takes several bytes a character (control characters, quotes, CJK,
    emoji) among plain ones: each is weighed on its own text, so the pages holding them fit too
    (found by QA: weighed at the reply's average, the page with the heavy one was refused)."""
    import re

    memory = MemoryService(graph_backend, Limits(max_reply_bytes=20_000))
    entities = [Entity(f"plain{i:03d}", "t", ["word " * 20]) for i in range(200)]
    for at in (50, 51, 120):
        entities.insert(at, Entity(f"heavy{at}", "t", [heavy]))
    memory.create_entities(entities)
    async with Client(build_server(memory).server) as c:
        for tool, arguments in (("read_graph", {}), ("search_nodes", {"query": "word"}),
                                ("search_nodes", {"query": "word", "mode": "words"})):
            message = await call_error(c, tool, arguments)
            found = re.search(r"limit (\d+)", message)
            assert found is not None, message
            assert len(await _follow(c, tool, arguments, int(found.group(1)))) == 203


async def test_a_later_search_page_is_advised_with_room_for_the_cursor_it_was_given(graph_backend: Backend) -> None:
    """The rest of a search asked for with a long cursor (500 matches and their scattered
    neighbors sent): the pages it is told to ask for carry at least as long a cursor, so the
    advice leaves room for it, or says that the cursor leaves none (found by QA: the advised
    pages were refused)."""
    import random
    import re

    rng = random.Random(7)
    free = MemoryService(graph_backend)
    free.create_entities([Entity(f"F{i:04d}", "t", ["filler"]) for i in range(2000)])
    free.create_entities([Entity(f"S{i:03d}", "t", ["word"]) for i in range(500)])
    free.create_relations([Relation(f"S{i:03d}", f"F{rng.randrange(2000):04d}", "near") for i in range(500)])
    free.create_entities([Entity(f"H{i}", "t", ["word " + "y" * 900]) for i in range(5)])
    cursor = None
    for _ in range(5):
        cursor = free.search_nodes("word", limit=100, cursor=cursor).next_cursor
    assert cursor is not None and len(cursor) > 500, cursor
    bounded = MemoryService(graph_backend, Limits(max_reply_bytes=3_000))
    async with Client(build_server(bounded).server) as c:
        message = await call_error(c, "search_nodes", {"query": "word", "cursor": cursor})
        found = re.search(r"limit (\d+)", message)
        if found is None:
            assert "too many entities to be read page by page" in message, message
            return
        names: list[str] = []
        arguments = {"query": "word", "limit": int(found.group(1)), "cursor": cursor}
        while True:
            page = await call(c, "search_nodes", arguments)   # a refused page fails the test
            names += [e["name"] for e in page["entities"]]
            if "nextCursor" not in page:
                break
            arguments["cursor"] = page["nextCursor"]
        assert names == [f"H{i}" for i in range(5)]


async def test_one_entity_over_the_bound_is_advised_in_parts_that_keep_every_observation(
        bounded: MemoryService, bounded_client: Any) -> None:
    """One entity too large for a reply was advised "Split it into 2 or more calls with a part of
    the items each": two create_entities calls of its halves lost the second half, the name being
    taken (found by QA). The advice now says to add the rest with add_observations, and works."""
    observations = [f"fact {i} " + "z" * 90 for i in range(30)]
    message = await call_error(bounded_client, "create_entities",
                               {"entities": [{"name": "Big", "entityType": "thing", "observations": observations}]})
    assert "nothing was written" in message
    assert "Create 'Big' with a part of its observations, then add the rest with add_observations" in message
    assert bounded.read_graph().entities == []
    await call(bounded_client, "create_entities",
               {"entities": [{"name": "Big", "entityType": "thing", "observations": observations[:10]}]})
    for start in (10, 20):
        await call(bounded_client, "add_observations",
                   {"observations": [{"entityName": "Big", "contents": observations[start:start + 10]}]})
    assert bounded.read_graph().entities[0].observations == observations
    # several entities: whole entities per call
    many = [{"name": f"N{i}", "entityType": "t", "observations": ["y" * 60]} for i in range(40)]
    assert "(each entity whole: add more observations to one with add_observations)" in await call_error(
        bounded_client, "create_entities", {"entities": many})


@pytest.mark.parametrize(("tool", "arguments"), [
    ("create_entities", {"entities": [{"name": "Long", "entityType": "t", "observations": ["w" * 2_500]}]}),
    ("add_observations", {"observations": [{"entityName": "Long", "contents": ["w" * 2_500]}]}),
    ("delete_observations", {"deletions": [{"entityName": "Long", "observations": ["w" * 2_500]}]}),
])
async def test_one_text_over_the_bound_is_advised_to_be_shortened_not_split(
        bounded_client: Any, tool: str, arguments: dict[str, Any]) -> None:
    """A single item with one long text was advised to be split into 2 calls, which cannot be
    done (found by QA)."""
    message = await call_error(bounded_client, tool, arguments)
    assert "nothing was written" in message and "Split it" not in message
    assert "One item alone is over it (a text too long for a reply that repeats it): shorten that text, or raise " \
           "MEMORY_MAX_REPLY_BYTES." in message


async def test_open_nodes_of_a_name_over_the_bound_alone_is_advised_what_reads_it(
        bounded: MemoryService, bounded_client: Any) -> None:
    """open_nodes of several names, one over the bound without any relation, sent the caller to
    read_graph's pages, where that entity was refused again (found by QA): raising the bound is
    what reads it; the other names are advised as before."""
    bounded.create_entities([Entity("Big", "thing", ["b" * 2_500]), Entity("A", "t", []), Entity("B", "t", [])])
    message = await call_error(bounded_client, "open_nodes", {"names": ["Big", "A", "B"]})
    assert "Big alone is over the bound, even without relations: raise MEMORY_MAX_REPLY_BYTES to read it whole" \
        in message, message
    assert "read_graph" not in message
    assert "or ask for view 'summary'" in message
    opened = await call(bounded_client, "open_nodes", {"names": ["A", "B"]})
    assert [e["name"] for e in opened["entities"]] == ["A", "B"]
    alone = await call_error(bounded_client, "open_nodes", {"names": ["Big"]})
    assert "(1 entity, 0 relations, 0 neighbors), over the 4,000-byte bound" in alone, alone   # was "1 entities"
