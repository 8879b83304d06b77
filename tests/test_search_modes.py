"""search_nodes' own modes: ``words`` and ``fts`` (ranked), ``limit``, and the MCP arguments.

``words``: every whitespace-separated term must be a lower-cased substring of some field; ranked by
BM25 (name over type over observations), ties by rowid. ``fts``: FTS5 syntax through apsw's parser,
lower-cased, ranked the same way; malformed input is a clean error. ``limit`` caps the entities, and
relations and neighbors follow the entities returned.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graph_memory.db import graph, search
from graph_memory.db.store import Store
from graph_memory.errors import InvalidQuery
from graph_memory.models import Entity, GraphSlice, Relation
from test_search import GRAPH, query_for, replace_graph

from helpers import call, call_error, names

# Dana, Eve: observation hits; Morning Brew: a type hit; Coffee: a name hit.
CAFE = [
    Entity("Dana", "person", ["Drinks coffee every morning", "Lives in Oslo"]),
    Entity("Morning Brew", "coffee shop", ["Opens at seven"]),
    Entity("Coffee", "drink", ["Hot and bitter"]),
    Entity("Eve", "person", ["Prefers tea", "Owns a coffee grinder", "coffee snob"]),
    Entity("Tea", "drink", ["Green or black"]),
]
CAFE_RELATIONS = [Relation("Dana", "Morning Brew", "visits"), Relation("Eve", "Tea", "drinks"),
                  Relation("Eve", "Dana", "knows")]


@pytest.fixture
def cafe(store: Store) -> Store:
    store.run_write(lambda conn: graph.create_entities(conn, CAFE))
    store.run_write(lambda conn: graph.create_relations(conn, CAFE_RELATIONS))
    return store


def run(store: Store, query: str, mode: search.Mode, limit: int | None = None) -> GraphSlice:
    return store.run_read(lambda conn: search.search(conn, query, mode, limit))


def ranked(store: Store, query: str, mode: search.Mode, limit: int | None = None) -> list[str]:
    return [e.name for e in run(store, query, mode, limit).entities]


def words_oracle(entities: Sequence[Entity], query: str) -> set[str]:
    """Every term of query.split(), lower-cased, is a substring of some lower-cased field."""
    terms = [t.lower() for t in query.split()]
    return {e.name for e in entities
            if all(any(t in f.lower() for f in (e.name, e.entity_type, *e.observations)) for t in terms)}


# -- words ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("query", "expected"), [
    # one term: name hit, then type hit, then observation hits (two before one)
    ("coffee", ["Coffee", "Morning Brew", "Eve", "Dana"]),
    ("COFFEE", ["Coffee", "Morning Brew", "Eve", "Dana"]),
    # terms may sit in different fields; every term must occur somewhere
    ("coffee morning", ["Morning Brew", "Dana"]),
    ("Dana coffee Oslo", ["Dana"]),
    ("coffee  tea", ["Eve"]),
    ("coffee unicorn", []),
    # a term is a substring, not a whole word; order of terms does not matter
    ("offe ning", ["Morning Brew", "Dana"]),
    ("ning offe", ["Morning Brew", "Dana"]),
    # short terms (under 3 characters) filter exactly; ranking then comes from the long terms
    ("coffee sn", ["Eve"]),
    ("tea gr", ["Tea", "Eve"]),
    # only short terms: weighted count of fields hit (name 10, type 4, observation 1), ties by rowid
    ("a", ["Tea", "Dana", "Morning Brew", "Coffee", "Eve"]),
    ("e o", ["Morning Brew", "Coffee", "Eve", "Tea", "Dana"]),
    # blank query: everything, in rowid order (as an empty substring query)
    ("", ["Dana", "Morning Brew", "Coffee", "Eve", "Tea"]),
    (" \t\n", ["Dana", "Morning Brew", "Coffee", "Eve", "Tea"]),
    # FTS syntax is plain text in words mode
    ('"coffee" AND', []),
    ("coffee*", []),
])
def test_words_matches_every_term_and_ranks_name_over_type_over_observation(
        cafe: Store, query: str, expected: list[str]) -> None:
    assert ranked(cafe, query, "words") == expected
    assert set(expected) == words_oracle(CAFE, query)


def test_words_term_with_a_lone_surrogate_matches_nothing(cafe: Store) -> None:
    assert ranked(cafe, "coffee \ud800", "words") == []
    assert ranked(cafe, "coffee", "words") != []


def test_words_ties_keep_rowid_order(store: Store) -> None:
    store.run_write(lambda conn: graph.create_entities(conn, [
        Entity("node-b", "kind", ["same text"]), Entity("node-a", "kind", ["same text"]),
        Entity("node-c", "kind", ["same text"])]))
    assert ranked(store, "same text", "words") == ["node-b", "node-a", "node-c"]
    assert ranked(store, "node", "words") == ["node-b", "node-a", "node-c"]
    assert ranked(store, "e", "words") == ["node-b", "node-a", "node-c"]


def test_words_uses_python_lower_case_rule(store: Store) -> None:
    store.run_write(lambda conn: graph.create_entities(conn, [
        Entity("İstanbul", "city", ["Große STRAẞE", "ΟΔΟΣ 𐐀"]), Entity("Istanbul", "city", [])]))
    assert ranked(store, "i\u0307stanbul", "words") == ["İstanbul"]
    assert ranked(store, "İSTANBUL straße", "words") == ["İstanbul"]
    assert ranked(store, "οδος 𐐨", "words") == ["İstanbul"]
    assert ranked(store, "οδοσ", "words") == []
    assert ranked(store, "strasse", "words") == []


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    store = Store.open(tmp_path_factory.mktemp("modes") / "memory.db")
    yield store
    store.close()


@st.composite
def words_query(draw: st.DrawFn, entities: list[Entity]) -> str:
    """Up to three pieces of the graph's text or random text (see test_search.query_for), joined
    with assorted whitespace."""
    pieces = [query_for(draw, entities) for _ in range(draw(st.integers(0, 3)))]
    return draw(st.sampled_from([" ", "  ", "\t", "\n"])).join(pieces)


@settings(max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(GRAPH, st.booleans(), st.data())
def test_words_equals_its_oracle_on_random_graphs(shared_store: Store, entities: list[Entity], bulk: bool,
                                                   data: st.DataObject) -> None:
    replace_graph(shared_store, entities, bulk)
    for _ in range(5):
        query = data.draw(words_query(entities))
        result = ranked(shared_store, query, "words")
        assert len(result) == len(set(result))
        assert set(result) == words_oracle(entities, query), query
        limit = data.draw(st.integers(1, 4))
        assert ranked(shared_store, query, "words", limit) == result[:limit]


# -- fts ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("query", "expected"), [
    ("coffee", ["Coffee", "Morning Brew", "Eve", "Dana"]),
    ("CoFFee", ["Coffee", "Morning Brew", "Eve", "Dana"]),
    # phrase, implicit AND, explicit AND / OR / NOT
    ('"coffee every"', ["Dana"]),
    ('"every coffee"', []),
    ("coffee morning", ["Morning Brew", "Dana"]),
    ("coffee AND morning", ["Morning Brew", "Dana"]),
    ("coffee NOT person", ["Coffee", "Morning Brew"]),
    ("(snob OR bitter) AND coffee", ["Coffee", "Eve"]),
    ("tea OR oslo", ["Dana", "Tea", "Eve"]),
    # prefix (on a trigram index every term is a substring already)
    ("coff*", ["Coffee", "Morning Brew", "Eve", "Dana"]),
    ("snob*", ["Eve"]),
    # NEAR counts characters (trigram tokens), within one column
    ("NEAR(drinks morning, 20)", ["Dana"]),
    ("NEAR(drinks morning, 5)", []),
    # ^: at the start of a column (observations are one column: only the first one's start counts)
    ("^coffee", ["Coffee", "Morning Brew"]),
    # column filters, with our column names and aliases, case-insensitive
    ("name: coffee", ["Coffee"]),
    ("entityType: coffee", ["Morning Brew"]),
    ("entity_type: drink", ["Tea", "Coffee"]),  # same hit: the shorter entity ranks first (BM25)
    ("TYPE: person", ["Dana", "Eve"]),
    ("observations: coffee", ["Eve", "Dana"]),
    ("-observations: coffee", ["Coffee", "Morning Brew"]),
    ("{name entityType}: coffee", ["Coffee", "Morning Brew"]),
    ("name: (coffee OR tea)", ["Tea", "Coffee"]),  # the rarer term weighs more (BM25)
    # punctuation inside quotes is text
    ('"at seven"', ["Morning Brew"]),
    ("unicorn", []),
])
def test_fts_syntax_works_and_is_ranked(cafe: Store, query: str, expected: list[str]) -> None:
    assert ranked(cafe, query, "fts") == expected


def test_fts_lower_cases_terms_with_python_rule(store: Store) -> None:
    store.run_write(lambda conn: graph.create_entities(conn, [Entity("İstanbul", "city", ["Große STRAẞE"])]))
    assert ranked(store, "İSTANBUL", "fts") == ["İstanbul"]
    assert ranked(store, '"straße"', "fts") == ["İstanbul"]
    assert ranked(store, "istanbul", "fts") == []


RAW_TEXT = ("sqlite", "fts5:", "syntax error", "no such column", "unterminated", "Traceback")

# (query, fragment the message must contain)
MALFORMED = [
    ("", "empty"),                                        # nothing to search for
    ("   ", "empty"),
    ('"coffee', "double quote is never closed"),         # unbalanced quotes
    ('coffee "tea', "double quote is never closed"),
    ('a"b', "double quote is never closed"),
    ("(coffee", "'(' is never closed"),                  # unbalanced parentheses
    ("coffee)", "unexpected text at position 6"),
    ("AND", "expected a search term"),                   # lone operators
    ("OR", "expected a search term"),
    ("NOT", "expected a search term"),
    ("coffee AND", "expected a search term at the end of the query"),
    ("NOT coffee", "expected a search term at position 0"),
    ("coffee OR OR tea", "expected a search term"),
    ("-", "expected a column name"),                     # lone column-filter syntax
    (":", "expected a search term"),
    ("*", "expected a search term"),
    ("^", "expected a search term"),
    ("+", "expected a search term"),
    ("coffee-bar", "put it in double quotes"),            # punctuation outside quotes
    ("name coffee: tea", "unknown column 'coffee'"),
    ("foo: coffee", "unknown column 'foo'"),              # column filters on unknown columns
    ("rank: coffee", "unknown column 'rank'"),
    ("entity_fts: coffee", "unknown column 'entity_fts'"),
    ("{name foo}: coffee", "unknown column 'foo'"),
    ("{}: coffee", "expected a column name"),
    ("{name: coffee", "expected '}'"),
    ("NEAR(coffee tea, x)", "NEAR distance must be a plain number"),
    ('NEAR(coffee tea, "5")', "NEAR distance must be a plain number"),
    ("NEAR(coffee tea, ²)", "not valid FTS5 syntax"),
    ("NEAR(coffee tea", "expected a search term at the end of the query"),
    ("NEAR(coffee tea, 5", "expected ')' at the end of the query"),
    ("NEAR()", "NEAR(...) needs at least one term"),
    ("coffee!", "the character '!' is not FTS5 syntax"),
    ("coffee; DROP TABLE entities", "the character ';'"),
    ("\x00coffee", "the character '\\x00'"),
    ('"cof\x00fee"', "NUL character"),
    ("ab", "shorter than 3 characters"),                 # too short for the trigram index
    ("coffee ab*", "the term 'ab' is shorter than 3"),
    ('""', "the term '' is shorter than 3"),
    ("NEAR(co fee)", "the term 'co' is shorter"),
    ("(" * 600 + "coffee" + ")" * 600, "not valid FTS5 syntax"),
    ("x" * 2049, "2049 characters long; the limit is 2048"),
    ("coffee OR tea\ud800", "contains an unpaired surrogate"),
]


@pytest.mark.parametrize(("query", "fragment"), MALFORMED)
def test_malformed_fts_is_a_clear_error(cafe: Store, query: str, fragment: str) -> None:
    with pytest.raises(InvalidQuery) as info:
        run(cafe, query, "fts")
    message = str(info.value)
    assert fragment in message
    assert not any(raw in message for raw in RAW_TEXT), message
    assert len(message) < 600


# -- limit and the shape of ranked results --------------------------------------------------------


def test_limit_keeps_the_best_ranked_and_relations_follow(cafe: Store) -> None:
    result = run(cafe, "coffee", "words", limit=2)
    assert [e.name for e in result.entities] == ["Coffee", "Morning Brew"]
    assert [r.to_dict() for r in result.relations] == [{"from": "Dana", "to": "Morning Brew", "relationType": "visits"}]
    assert [e.name for e in result.neighbors] == ["Dana"]
    result = run(cafe, "coffee", "fts", limit=3)
    assert [e.name for e in result.entities] == ["Coffee", "Morning Brew", "Eve"]
    # relations in rowid order, neighbors in rowid order, whatever the rank order
    assert [(r.source, r.target) for r in result.relations] == [("Dana", "Morning Brew"), ("Eve", "Tea"),
                                                                ("Eve", "Dana")]
    assert [e.name for e in result.neighbors] == ["Dana", "Tea"]
    assert ranked(cafe, "coffee", "substring", limit=2) == ["Dana", "Morning Brew"]
    assert ranked(cafe, "", "words", limit=2) == ["Dana", "Morning Brew"]
    assert ranked(cafe, "coffee", "fts", limit=10**30) == ["Coffee", "Morning Brew", "Eve", "Dana"]


def test_ranked_entities_carry_their_observations(cafe: Store) -> None:
    result = run(cafe, "coffee", "words")
    assert [e.to_dict() for e in result.entities] == [
        CAFE[2].to_dict(), CAFE[1].to_dict(), CAFE[3].to_dict(), CAFE[0].to_dict()]


def test_unknown_mode_is_refused(cafe: Store) -> None:
    with pytest.raises(InvalidQuery, match="unknown search mode 'regex'"):
        run(cafe, "x", "regex")  # type: ignore[arg-type]


# -- over MCP -------------------------------------------------------------------------------------

async def load_cafe(client: Any) -> None:
    await call(client, "create_entities", {"entities": [e.to_dict() for e in CAFE]})
    await call(client, "create_relations", {"relations": [r.to_dict() for r in CAFE_RELATIONS]})


@pytest.mark.anyio
async def test_search_nodes_advertises_mode_and_limit(client: Any) -> None:
    tool = next(t for t in (await client.list_tools()).tools if t.name == "search_nodes")
    schema = tool.input_schema
    assert schema["required"] == ["query"]
    assert schema["properties"]["query"]["type"] == "string"
    assert schema["properties"]["mode"]["enum"] == ["substring", "words", "fts"]
    assert schema["properties"]["mode"]["type"] == "string"
    assert (schema["properties"]["limit"]["type"], schema["properties"]["limit"]["minimum"]) == ("integer", 1)
    for word in ("substring", "words", "fts", "limit"):
        assert word in tool.description


@pytest.mark.anyio
async def test_search_nodes_modes_and_limit_over_mcp(client: Any) -> None:
    await load_cafe(client)
    assert names(await call(client, "search_nodes", {"query": "coffee"})) == ["Dana", "Morning Brew", "Coffee", "Eve"]
    assert names(await call(client, "search_nodes", {"query": "coffee", "mode": "substring"})) == [
        "Dana", "Morning Brew", "Coffee", "Eve"]
    assert names(await call(client, "search_nodes", {"query": "Dana Oslo coffee", "mode": "words"})) == ["Dana"]
    assert names(await call(client, "search_nodes", {"query": "coffee", "mode": "words"})) == [
        "Coffee", "Morning Brew", "Eve", "Dana"]
    result = await call(client, "search_nodes", {"query": "name: coffee OR snob", "mode": "fts", "limit": 1})
    assert names(result) == ["Coffee"]
    assert result["relations"] == [] and result["neighbors"] == []
    # null means "not given" (some clients send every optional argument)
    assert names(await call(client, "search_nodes", {"query": "coffee", "mode": None, "limit": None})) == [
        "Dana", "Morning Brew", "Coffee", "Eve"]
    result = await call(client, "search_nodes", {"query": "coffee", "limit": 1})
    assert names(result) == ["Dana"]
    assert result["relations"] == [{"from": "Dana", "to": "Morning Brew", "relationType": "visits"},
                                   {"from": "Eve", "to": "Dana", "relationType": "knows"}]
    # Morning Brew and Eve match too: they come as entities of the next pages (nextCursor), not
    # as neighbors here, so the pages together hold each entity once (issue 15).
    assert names(result, "neighbors") == []
    assert "nextCursor" in result


@pytest.mark.anyio
@pytest.mark.parametrize(("arguments", "fragment"), [
    ({"query": "x", "mode": "regex"}, "mode: Input should be 'substring', 'words' or 'fts'"),
    ({"query": "x", "mode": "WORDS"}, "mode: Input should be"),
    ({"query": "x", "mode": 1}, "mode: Input should be"),
    ({"query": "x", "limit": 0}, "limit: the page size must be a whole number, 1 or more (got 0)"),
    ({"query": "x", "limit": -5}, "limit: the page size must be a whole number, 1 or more (got -5)"),
    ({"query": "x", "limit": "5"}, 'limit: the page size must be a whole number, 1 or more (got "5")'),
    ({"query": "x", "limit": 2.5}, "limit: the page size must be a whole number, 1 or more (got 2.5)"),
    ({"query": "x", "limit": True}, "limit: the page size must be a whole number, 1 or more (got true)"),
    ({"query": '"coffee', "mode": "fts"}, "invalid fts query: a double quote is never closed"),
    ({"query": "foo: bar", "mode": "fts"}, "unknown column 'foo'"),
    ({"query": "", "mode": "fts"}, "the fts query is empty"),
    ({"query": "x" * 2049, "mode": "words"}, "the limit is 2048"),
])
async def test_search_nodes_bad_arguments_are_tool_errors(client: Any, arguments: dict[str, Any],
                                                          fragment: str) -> None:
    message = await call_error(client, "search_nodes", arguments)
    assert fragment in message
    assert not any(raw in message for raw in RAW_TEXT), message


@pytest.mark.anyio
async def test_search_nodes_modes_over_the_handshake_era_protocol(legacy_client: Any) -> None:
    await load_cafe(legacy_client)
    assert names(await call(legacy_client, "search_nodes", {"query": "coffee snob", "mode": "words"})) == ["Eve"]
    message = await call_error(legacy_client, "search_nodes", {"query": "NOT", "mode": "fts"})
    assert "expected a search term" in message
