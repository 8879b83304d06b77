"""Hostile and broken input: fuzzing every tool's arguments, size limits, injection attempts.

Every call must end in a success whose structuredContent matches the tool's outputSchema, or in a
clean ``isError`` result with a message (never a protocol error, an exception in the client, an
"internal error", or a dead server); a failed call must leave the graph exactly as it was (no
partially applied batch). SQL and FTS5 syntax in names, observations and queries is inert data.

The fuzzer derives arguments from each tool's advertised input schema (so new tools and options
are covered as they appear), then mutates them: wrong types, missing and extra fields, huge and
over-limit strings, lone surrogates, NUL, other unicode edge cases, deep nesting, names that
exist next to names that do not.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from anyio.from_thread import start_blocking_portal
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graph_memory.db.backend import SqliteBackend
from graph_memory.db.store import Store
from graph_memory.mcp.server import build_server
from graph_memory.mcp.tools import TOOLS
from graph_memory.service import Limits, MemoryService

from .conftest import SLOW, RawServer, server_env

LIMITS = Limits(max_name_length=40, max_observation_length=120, max_batch=12)
SEED_GRAPH = {
    "entities": [
        {"name": "alpha", "entityType": "person", "observations": ["likes tea", "NEAR( it", "'); DROP TABLE x; --"]},
        {"name": "beta", "entityType": "org", "observations": ['"*" OR 1=1', "plain fact"]},
        {"name": "gamma\u0000nul", "entityType": "thing", "observations": ["zero\u0000byte"]},
        {"name": "İstanbul ẞ ς", "entityType": "place", "observations": ["ǅ title-case", "\u2028line sep"]},
    ],
    "relations": [("alpha", "beta", "works_at"), ("beta", "alpha", "employs"), ("alpha", "gamma\u0000nul", "owns")],
}
SEED_NAMES = [e["name"] for e in SEED_GRAPH["entities"]]
INJECTIONS = [
    "'); DROP TABLE entities; --", "\"; DELETE FROM observations; --", "' OR '1'='1", "x' UNION SELECT sql FROM "
    "sqlite_schema --", '"*" OR', "NEAR(", "NEAR(a b, 0)", "*", "a*", "^x", "NOT", "AND", "OR", "(", ")", "{",
    "name:", "entity_fts:", "rank:", '"', "'", "\"\"\"", "%", "_", "\\", "json_each", "entity_fts MATCH '*'",
    "x\" OR \"y", "-", "--", "col:umn", "+", "'integrity-check'", "rebuild", "delete-all",
]
ODD_TEXT = [
    "", " ", "\u0000", "a\u0000b", "\ud800", "\udfff", "x\udc80y", "\ud83d", "\U0001F600", "\u200b", "\u202e",
    "\ufeff", "\uffff", "\ufffe", "\u2028", "\r\n", "\t", "İ", "ẞ", "Σ", "ﬀ", "e\u0301", "\u00e9",
    "🏳️‍🌈", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "\x7f", "\x1b[31m",
]


def _chars() -> st.SearchStrategy[str]:
    # Every code point class, surrogates included (not valid Unicode text; must be refused cleanly).
    return st.characters(codec=None, categories=None)


def _string(limit: int) -> st.SearchStrategy[str]:
    return st.one_of(
        st.sampled_from(SEED_NAMES),
        st.sampled_from(SEED_NAMES),
        st.sampled_from(INJECTIONS),
        st.sampled_from(ODD_TEXT),
        st.text(_chars(), max_size=12),
        st.text(st.sampled_from("ab \u0000\ud800é"), max_size=8),
        st.builds(lambda n, c: c * n, st.integers(limit - 1, limit + 2), st.sampled_from("xé\U0001F600")),
        st.builds(lambda n: "y" * n, st.sampled_from([3000, 70_000])),
    )


JSON_LEAF = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                      st.floats(allow_nan=True, allow_infinity=True), st.text(_chars(), max_size=5))
JSON_ANY = st.recursive(JSON_LEAF, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                           st.dictionaries(st.text(max_size=4), inner, max_size=4)),
                        max_leaves=12)


def _nested(depth: int) -> Any:
    value: Any = "deep"
    for i in range(depth):
        value = [value] if i % 2 else {"entities": value}
    return value


def _clean_string() -> st.SearchStrategy[str]:
    """Valid text within the limits: existing names, injection attempts, unicode oddities."""
    valid_odd = [t for t in ODD_TEXT if not any(0xD800 <= ord(c) <= 0xDFFF for c in t)]
    return st.one_of(st.sampled_from(SEED_NAMES), st.sampled_from(SEED_NAMES), st.sampled_from(INJECTIONS),
                     st.sampled_from(valid_odd), st.text(st.characters(codec="utf-8"), max_size=10),
                     st.sampled_from(["likes tea", "plain fact", "works_at", "employs", "owns", "zero\u0000byte"]))


def from_schema(schema: dict[str, Any], key: str = "", *, hostile: bool = True) -> st.SearchStrategy[Any]:
    """Values for a JSON schema. ``hostile``: mostly well-typed with hostile strings, sometimes
    anything at all, fields dropped or added; otherwise well-formed values of valid text (so
    that successful calls, and batches mixing existing and unknown names, are common too)."""
    kind = schema.get("type")
    if "enum" in schema:
        good: st.SearchStrategy[Any] = st.one_of(st.sampled_from(schema["enum"]),
                                                 _string(8) if hostile else st.sampled_from(schema["enum"]))
    elif kind == "string":
        limit = (LIMITS.max_observation_length if key in ("contents", "observations", "match", "replacement")
                 else LIMITS.max_name_length)
        good = _string(limit) if hostile else _clean_string()
    elif kind == "number":
        good = (st.one_of(st.floats(0, 1), st.floats(allow_nan=True, allow_infinity=True), st.integers(-3, 3))
                if hostile else st.floats(0, 1))
    elif kind == "integer":
        good = (st.one_of(st.integers(-3, 50), st.integers(-(2**80), 2**80), st.floats(0, 10))
                if hostile else st.integers(1, 20))
    elif kind == "boolean":
        good = st.booleans()
    elif kind == "array":
        items = from_schema(schema.get("items", {}), key, hostile=hostile)
        good = st.lists(items, max_size=4)
        if hostile:
            good = st.one_of(good, st.lists(items, min_size=LIMITS.max_batch - 1, max_size=LIMITS.max_batch + 1))
    elif kind == "object":
        props = schema.get("properties", {})
        required = [k for k in schema.get("required", []) if k in props]
        optional = {k: from_schema(v, k, hostile=hostile) for k, v in props.items() if k not in required}
        good = st.fixed_dictionaries({k: from_schema(props[k], k, hostile=hostile) for k in required},
                                     optional=optional)
        if hostile:
            good = good.flatmap(lambda d: st.one_of(
                st.just(d), st.just(d), st.just(d),
                st.sampled_from(sorted(d) or [""]).map(lambda drop: {k: v for k, v in d.items() if k != drop}),
                st.builds(lambda extra: {**d, **extra},
                          st.dictionaries(st.text(max_size=6), JSON_LEAF, max_size=2)),
            ))
    else:
        good = JSON_ANY
    return st.one_of(good, good, good, good, JSON_ANY) if hostile else good


def tool_arguments(spec: Any) -> st.SearchStrategy[dict[str, Any]]:
    hostile = from_schema(spec.input_schema).filter(lambda a: isinstance(a, dict))
    clean = from_schema(spec.input_schema, hostile=False)
    return st.one_of(clean, clean, clean, hostile, hostile, hostile,
                     st.dictionaries(st.text(max_size=8), JSON_ANY, max_size=3),
                     st.just({}), st.builds(lambda d: {"entities": _nested(d)}, st.integers(20, 120)))


# -- the in-process server the fuzzer talks to ----------------------------------------------------


def _seed(store: Store) -> None:
    from graph_memory.db import graph
    from graph_memory.models import Entity, Relation

    def run(conn: Any) -> None:
        conn.execute("DELETE FROM relations")
        conn.execute("DELETE FROM entities")
        graph.create_entities(conn, [Entity(e["name"], e["entityType"], list(e["observations"]))
                                     for e in SEED_GRAPH["entities"]])
        graph.create_relations(conn, [Relation(a, b, t) for a, b, t in SEED_GRAPH["relations"]])

    store.run_write(run)


class Harness:
    """One in-process server with small limits, driven from synchronous hypothesis tests
    through a blocking portal (the client lives on the portal's event loop)."""

    def __init__(self, portal: Any, client: Any, store: Store) -> None:
        self.portal, self.client, self.store = portal, client, store
        self.specs = {spec.name: spec for spec in TOOLS}
        self.calls = 0

    def call(self, tool: str, arguments: Any) -> Any:
        self.calls += 1
        return self.portal.call(self.client.call_tool, tool, arguments)

    def snapshot(self) -> dict[str, Any]:
        result = self.call("read_graph", {})
        assert not result.is_error, result.content[0].text
        return result.structured_content

    def check_call(self, tool: str, arguments: Any) -> Any:
        """Call; a failure must be clean and change nothing, a success must match the schema."""
        before = self.snapshot()
        result = self.call(tool, arguments)
        after = self.snapshot()
        assert len(result.content) == 1 and result.content[0].type == "text"
        text = result.content[0].text
        if result.is_error:
            assert text.strip(), "an error without a message"
            assert "internal error" not in text and "Traceback" not in text, f"{tool}: unclean error: {text}"
            assert after == before, f"{tool} failed ({text[:200]}) but changed the graph"
        else:
            spec = self.specs[tool]
            jsonschema.validate(result.structured_content, spec.output_schema)
            payload = json.loads(text)
            structured = result.structured_content
            assert payload == (next(iter(structured.values())) if isinstance(payload, list) else structured)
            if spec.annotations["readOnlyHint"]:
                assert after == before
        if len(after["entities"]) > 200:
            _seed(self.store)
        return result


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Harness]:
    from mcp import Client

    db = tmp_path_factory.mktemp("fuzz") / "memory.db"
    store = Store.open(db)
    _seed(store)
    server = build_server(MemoryService(SqliteBackend(store), LIMITS)).server
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(Client(server, cache=None)) as client:
        h = Harness(portal, client, store)
        yield h
        assert store.integrity_problems() == []
    store.close()


FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
# The long run explores new inputs every time (a failure prints the blob that reproduces it).
FUZZ_SLOW = settings(FUZZ, max_examples=300, derandomize=False, print_blob=True)
TOOL_NAMES = [spec.name for spec in TOOLS]


def _fuzz_tool(harness: Harness, tool: str, data: st.DataObject) -> None:
    arguments = data.draw(tool_arguments(harness.specs[tool]), label="arguments")
    harness.check_call(tool, arguments)


@pytest.mark.parametrize("tool", TOOL_NAMES)
@FUZZ
@given(data=st.data())
def test_fuzz_every_tool(harness: Harness, tool: str, data: st.DataObject) -> None:
    _fuzz_tool(harness, tool, data)


@SLOW
@pytest.mark.parametrize("tool", TOOL_NAMES)
@FUZZ_SLOW
@given(data=st.data())
def test_fuzz_every_tool_long(harness: Harness, tool: str, data: st.DataObject) -> None:
    _fuzz_tool(harness, tool, data)


@FUZZ
@given(name=st.sampled_from([*TOOL_NAMES, "no_such_tool", "", "�", "read_graph\x00", "x" * 5000]),
       arguments=JSON_ANY)
def test_fuzz_unknown_tools_and_any_arguments(harness: Harness, name: str, arguments: Any) -> None:
    if not isinstance(arguments, dict):
        arguments = {"arguments": arguments}
    result = harness.call(name, arguments)
    if name not in harness.specs:
        assert result.is_error and "Unknown tool" in result.content[0].text
    assert not harness.call("read_graph", {}).is_error


# -- a valid batch with one bad item anywhere writes nothing --------------------------------------


def _bad_items() -> dict[str, list[tuple[str, Any]]]:
    """Per write tool: (description, bad item) — each must fail the whole call."""
    long_name, long_obs = "n" * (LIMITS.max_name_length + 1), "o" * (LIMITS.max_observation_length + 1)
    return {
        "create_entities": [
            ("name too long", {"name": long_name, "entityType": "t", "observations": []}),
            ("observation too long", {"name": "ok-name", "entityType": "t", "observations": [long_obs]}),
            ("lone surrogate", {"name": "bad\ud800", "entityType": "t", "observations": []}),
            ("number as name", {"name": 7, "entityType": "t", "observations": []}),
            ("missing type", {"name": "ok-name", "observations": []}),
            ("observations not a list", {"name": "ok-name", "entityType": "t", "observations": "x"}),
        ],
        "add_observations": [
            ("unknown entity", {"entityName": "nobody", "contents": ["x"]}),
            ("observation too long", {"entityName": "alpha", "contents": [long_obs]}),
            ("surrogate content", {"entityName": "alpha", "contents": ["\udfff"]}),
            ("null contents", {"entityName": "alpha", "contents": None}),
        ],
        "create_relations": [
            ("unknown endpoint", {"from": "alpha", "to": "nobody", "relationType": "r"}),
            ("type too long", {"from": "alpha", "to": "beta", "relationType": long_name}),
            ("missing to", {"from": "alpha", "relationType": "r"}),
        ],
        "update_observations": [
            ("absent match", {"entityName": "alpha", "match": "never said", "replacement": "z"}),
            ("unknown entity", {"entityName": "nobody", "match": "x", "replacement": "z"}),
            ("replacement exists", {"entityName": "alpha", "match": "likes tea", "replacement": "NEAR( it"}),
        ],
        "delete_entities": [("name too long", long_name), ("not a string", {"name": "alpha"})],
        "delete_observations": [("observation too long", {"entityName": "alpha", "observations": [long_obs]}),
                                ("not a list", {"entityName": "alpha", "observations": "likes tea"})],
        "delete_relations": [("endpoint too long", {"from": long_name, "to": "beta", "relationType": "works_at"})],
    }


def _good_item(tool: str, i: int) -> Any:
    return {
        "create_entities": {"name": f"fresh{i}", "entityType": "t", "observations": [f"f{i}"]},
        "add_observations": {"entityName": SEED_NAMES[i % 2], "contents": [f"new fact {i}"]},
        "create_relations": {"from": "alpha", "to": "beta", "relationType": f"new_rel{i}"},
        "update_observations": {"entityName": "beta", "match": "plain fact", "replacement": "plain fact x"},
        "delete_entities": SEED_NAMES[i % len(SEED_NAMES)],
        "delete_observations": {"entityName": "alpha", "observations": ["likes tea"]},
        "delete_relations": {"from": "alpha", "to": "beta", "relationType": "works_at"},
    }[tool]


BATCH_KEY = {"create_entities": "entities", "add_observations": "observations", "create_relations": "relations",
             "update_observations": "updates", "delete_entities": "entityNames", "delete_observations": "deletions",
             "delete_relations": "relations"}
BAD_CASES = [(tool, what, item) for tool, items in _bad_items().items() for what, item in items]


@pytest.mark.parametrize(("tool", "what", "bad"), BAD_CASES, ids=[f"{t}-{w}" for t, w, _ in BAD_CASES])
@settings(FUZZ, max_examples=8)
@given(good=st.integers(0, 6), position=st.integers(0, 6))
def test_batch_with_one_bad_item_writes_nothing(harness: Harness, tool: str, what: str, bad: Any,
                                                good: int, position: int) -> None:
    _seed(harness.store)
    items = [_good_item(tool, i) for i in range(good)]
    if tool == "update_observations":
        items = items[:1]  # one update of an observation; a second identical one would conflict itself
    items.insert(min(position, len(items)), bad)
    result = harness.check_call(tool, {BATCH_KEY[tool]: items})
    assert result.is_error, f"{tool} accepted a batch with a bad item ({what})"


# -- size limits ----------------------------------------------------------------------------------


def test_limits_are_enforced_at_the_edge_with_clear_errors(harness: Harness) -> None:
    _seed(harness.store)
    n, o, b = LIMITS.max_name_length, LIMITS.max_observation_length, LIMITS.max_batch

    def ok(tool: str, arguments: Any) -> Any:
        result = harness.check_call(tool, arguments)
        assert not result.is_error, result.content[0].text
        return result

    def refused(tool: str, arguments: Any, *needles: str) -> None:
        result = harness.check_call(tool, arguments)
        assert result.is_error
        for needle in needles:
            assert needle in result.content[0].text, result.content[0].text

    ok("create_entities", {"entities": [{"name": "N" * n, "entityType": "T" * n, "observations": ["o" * o]}]})
    refused("create_entities", {"entities": [{"name": "N" * (n + 1), "entityType": "t", "observations": []}]},
            "entities.0.name", str(n), "MEMORY_MAX_NAME_LENGTH")
    refused("create_entities", {"entities": [{"name": "x", "entityType": "T" * (n + 1), "observations": []}]},
            "entities.0.entityType", "MEMORY_MAX_NAME_LENGTH")
    refused("create_entities", {"entities": [{"name": "x", "entityType": "t", "observations": ["o" * (o + 1)]}]},
            "entities.0.observations.0", "MEMORY_MAX_OBSERVATION_LENGTH")
    # Characters, not bytes: an emoji counts once.
    ok("create_entities", {"entities": [{"name": "\U0001F600" * n, "entityType": "t", "observations": []}]})
    ok("create_entities", {"entities": [{"name": f"b{i}", "entityType": "t", "observations": []} for i in range(b)]})
    refused("create_entities", {"entities": [{"name": f"c{i}", "entityType": "t", "observations": []}
                                             for i in range(b + 1)]}, str(b + 1), "MEMORY_MAX_BATCH")
    refused("create_entities", {"entities": [{"name": "x", "entityType": "t", "observations":
                                              [f"o{i}" for i in range(b + 1)]}]}, "MEMORY_MAX_BATCH")
    refused("add_observations",
            {"observations": [{"entityName": "alpha", "contents": [f"o{i}" for i in range(b + 1)]}]},
            "MEMORY_MAX_BATCH")
    refused("add_observations", {"observations": [{"entityName": "alpha", "contents": ["o" * (o + 1)]}]},
            "MEMORY_MAX_OBSERVATION_LENGTH")
    refused("create_relations", {"relations": [{"from": "alpha", "to": "beta", "relationType": "r" * (n + 1)}]},
            "relations.0.relationType", "MEMORY_MAX_NAME_LENGTH")
    refused("delete_entities", {"entityNames": ["z"] * (b + 1)}, "MEMORY_MAX_BATCH")
    refused("delete_entities", {"entityNames": ["z" * (n + 1)]}, "MEMORY_MAX_NAME_LENGTH")
    refused("delete_observations", {"deletions": [{"entityName": "alpha", "observations": ["o" * (o + 1)]}]},
            "MEMORY_MAX_OBSERVATION_LENGTH")
    refused("delete_relations", {"relations": [{"from": "a" * (n + 1), "to": "b", "relationType": "r"}]},
            "MEMORY_MAX_NAME_LENGTH")
    refused("update_observations", {"updates": [{"entityName": "alpha", "match": "likes tea",
                                                 "replacement": "o" * (o + 1)}]}, "MEMORY_MAX_OBSERVATION_LENGTH")
    refused("open_nodes", {"names": ["alpha"] * (b + 1)}, "MEMORY_MAX_BATCH")
    for mode in (None, "substring", "words", "fts"):
        extra = {} if mode is None else {"mode": mode}
        ok("search_nodes", {"query": "tea " * 512, **extra})  # exactly 2048 characters
        refused("search_nodes", {"query": "q" * 2049, **extra}, "2049", "2048")


@pytest.fixture
def default_limits_client(store: Store) -> Iterator[Any]:
    from mcp import Client

    server = build_server(MemoryService(SqliteBackend(store))).server  # the defaults: 1024 / 65536 / 10000
    with start_blocking_portal() as portal, portal.wrap_async_context_manager(Client(server, cache=None)) as client:
        yield lambda tool, args: portal.call(client.call_tool, tool, args)


def test_default_limits_ten_thousand_item_batches(default_limits_client: Any, store: Store) -> None:
    call = default_limits_client
    assert Limits() == Limits(1024, 65536, 10_000)
    started = time.monotonic()
    result = call("create_entities", {"entities": [
        {"name": f"e{i}", "entityType": "bulk", "observations": [f"fact {i}"]} for i in range(10_000)]})
    assert not result.is_error, result.content[0].text
    assert len(result.structured_content["entities"]) == 10_000
    result = call("add_observations", {"observations": [{"entityName": "e0", "contents": [
        f"observation number {j} of a long list" for j in range(10_000)]}]})
    assert not result.is_error, result.content[0].text
    result = call("create_relations", {"relations": [
        {"from": f"e{i}", "to": f"e{i + 1}", "relationType": "next"} for i in range(9_999)] +
        [{"from": "e9999", "to": "e0", "relationType": "next"}]})
    assert not result.is_error
    elapsed = time.monotonic() - started
    assert elapsed < 60, f"three 10,000-item batches took {elapsed:.1f}s"
    over = call("create_entities", {"entities": [{"name": f"x{i}", "entityType": "t", "observations": []}
                                                 for i in range(10_001)]})
    assert over.is_error and "10001 items" in over.content[0].text and "MEMORY_MAX_BATCH" in over.content[0].text
    over = call("create_entities", {"entities": [{"name": "x", "entityType": "t", "observations": ["o" * 65_537]}]})
    assert over.is_error and "MEMORY_MAX_OBSERVATION_LENGTH" in over.content[0].text
    assert not call("open_nodes", {"names": [f"x{i}" for i in range(10_000)]}).is_error
    result = call("delete_entities", {"entityNames": [f"e{i}" for i in range(10_000)]})
    assert not result.is_error and len(result.structured_content["deletedEntities"]) == 10_000
    assert store.integrity_problems() == []


def test_limits_come_from_the_environment_of_the_real_server(spawn: Any, tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    env = server_env(db, MEMORY_MAX_NAME_LENGTH="5", MEMORY_MAX_OBSERVATION_LENGTH="7", MEMORY_MAX_BATCH="2")
    server: RawServer = spawn(db, env=env)
    server.initialize()
    ok = server.call("create_entities",
                     {"entities": [{"name": "12345", "entityType": "t", "observations": ["1234567"]}]})
    assert not ok.get("isError")
    for arguments, needle in [
        ({"entities": [{"name": "123456", "entityType": "t", "observations": []}]}, "MEMORY_MAX_NAME_LENGTH"),
        ({"entities": [{"name": "a", "entityType": "t", "observations": ["12345678"]}]},
         "MEMORY_MAX_OBSERVATION_LENGTH"),
        ({"entities": [{"name": n, "entityType": "t", "observations": []} for n in "abc"]}, "MEMORY_MAX_BATCH"),
    ]:
        result = server.call("create_entities", arguments)
        assert result["isError"] and needle in result["content"][0]["text"]
    assert [e["name"] for e in server.read_graph()["entities"]] == ["12345"]
    server.close()


# -- injection ------------------------------------------------------------------------------------


def _schema_sql(store: Store) -> list[tuple[Any, ...]]:
    return store.run_read(lambda conn: conn.execute("SELECT type, name, sql FROM sqlite_schema ORDER BY name")
                          .fetchall())


@pytest.mark.parametrize("payload", INJECTIONS)
def test_sql_and_fts_injection_is_inert(harness: Harness, payload: str) -> None:
    _seed(harness.store)
    schema = _schema_sql(harness.store)
    name = payload[:LIMITS.max_name_length]
    observation = f"note {payload} end"[:LIMITS.max_observation_length]
    created = harness.check_call("create_entities", {"entities": [
        {"name": name, "entityType": payload[:LIMITS.max_name_length], "observations": [observation]}]})
    assert not created.is_error
    harness.check_call("create_relations", {"relations": [{"from": name, "to": "alpha", "relationType": name}]})
    opened = harness.check_call("open_nodes", {"names": [name]}).structured_content
    assert [e["name"] for e in opened["entities"]] == [name]
    assert opened["entities"][0]["observations"] == [observation]
    # Substring search finds exactly what contains the text, never more (no syntax is interpreted).
    found = harness.check_call("search_nodes", {"query": observation}).structured_content
    assert [e["name"] for e in found["entities"]] == [name]
    for mode in ("substring", "words", "fts"):
        result = harness.check_call("search_nodes", {"query": payload, "mode": mode})
        if not result.is_error:
            for entity in result.structured_content["entities"]:
                assert entity["name"] in [*SEED_NAMES, name]
    graph = harness.snapshot()
    assert {e["name"] for e in graph["entities"]} == set(SEED_NAMES) | {name}
    assert _schema_sql(harness.store) == schema, "the schema changed"
    deleted = harness.check_call("delete_entities", {"entityNames": [name]}).structured_content
    assert deleted["deletedEntities"] == [name]
    assert {e["name"] for e in harness.snapshot()["entities"]} == set(SEED_NAMES)
    assert harness.store.integrity_problems() == []


def test_unicode_edge_cases_round_trip_exactly(harness: Harness) -> None:
    _seed(harness.store)
    valid = [t for t in ODD_TEXT if t and t.encode("utf-8", "surrogatepass") == t.encode("utf-8", "surrogatepass")
             and not any(0xD800 <= ord(c) <= 0xDFFF for c in t)]
    entities = [{"name": f"u{i}{t}", "entityType": t or "empty", "observations": [t, f"{t}{t}x"]}
                for i, t in enumerate(valid)]
    for start in range(0, len(entities), LIMITS.max_batch):
        batch = entities[start:start + LIMITS.max_batch]
        assert not harness.check_call("create_entities", {"entities": batch}).is_error
    graph = {e["name"]: e for e in harness.snapshot()["entities"]}
    for entity in entities:
        stored = graph[entity["name"]]
        assert stored["entityType"] == entity["entityType"]
        assert stored["observations"] == list(dict.fromkeys(entity["observations"]))
        # Each one can be found again by its own name, and opened by it.
        found = harness.check_call("search_nodes", {"query": entity["name"]}).structured_content
        assert entity["name"] in [e["name"] for e in found["entities"]]
        opened = harness.check_call("open_nodes", {"names": [entity["name"]]}).structured_content
        assert [e["name"] for e in opened["entities"]] == [entity["name"]]


def test_lone_surrogates_are_refused_cleanly_everywhere(harness: Harness) -> None:
    _seed(harness.store)
    bad = "a\ud800b"
    for tool, arguments in [
        ("create_entities", {"entities": [{"name": bad, "entityType": "t", "observations": []}]}),
        ("create_entities", {"entities": [{"name": "ok", "entityType": "t", "observations": [bad]}]}),
        ("add_observations", {"observations": [{"entityName": "alpha", "contents": [bad]}]}),
        ("create_relations", {"relations": [{"from": "alpha", "to": "beta", "relationType": bad}]}),
        ("update_observations", {"updates": [{"entityName": "alpha", "match": "likes tea", "replacement": bad}]}),
        ("search_nodes", {"query": bad}),
        ("search_nodes", {"query": bad, "mode": "words"}),
        ("search_nodes", {"query": bad, "mode": "fts"}),
        ("open_nodes", {"names": [bad]}),
        ("delete_entities", {"entityNames": [bad]}),
        ("delete_observations", {"deletions": [{"entityName": "alpha", "observations": [bad]}]}),
        ("delete_relations", {"relations": [{"from": bad, "to": "beta", "relationType": "works_at"}]}),
    ]:
        result = harness.check_call(tool, arguments)
        assert result.is_error, f"{tool} accepted a lone surrogate"
        assert "surrogate" in result.content[0].text, (tool, result.content[0].text)


# -- the wire: garbage on stdin never kills the real server ---------------------------------------


def test_garbage_on_the_wire_leaves_the_server_serving(spawn: Any, tmp_path: Path) -> None:
    db = tmp_path / "memory.db"
    server: RawServer = spawn(db)
    server.initialize()
    server.call_ok("create_entities", {"entities": [{"name": "kept", "entityType": "t", "observations": ["x"]}]})
    garbage = [
        b"not json at all", b"\xff\xfe invalid utf-8 \xc3\x28", b"{", b"[]", b"null", b"42", b'"str"',
        b"[" * 100_000 + b"]" * 100_000,
        b'{"jsonrpc":"2.0","id":9001,"method":"tools/call","params":{"name":"create_entities","arguments":[1]}}',
        b'{"jsonrpc":"2.0","id":9002,"method":"tools/call","params":{"name":"create_entities"}}',
        b'{"jsonrpc":"2.0","id":9003,"method":"tools/call"}',
        b'{"jsonrpc":"2.0","id":9004,"method":"tools/call","params":{"name":"create_entities","arguments":'
        b'{"entities":' + b"[" * 5000 + b"]" * 5000 + b"}}}",
        b'{"jsonrpc":"2.0","id":9005,"method":"tools/call","params":{"name":"search_nodes","arguments":'
        b'{"query":"\\ud800abc"}}}',
        b'{"jsonrpc":"2.0","id":9006,"method":"tools/call","params":{"name":"create_entities","arguments":'
        b'{"entities":[{"name":"' + b"x" * 8_000_000 + b'","entityType":"t","observations":[]}]}}}',
        b'{"jsonrpc":"2.0","id":9007,"method":"no/such/method"}',
        b'{"jsonrpc":"2.0","id":9008,"method":"tools/call","params":{"name":"create_entities","arguments":'
        b'{"entities":[{"name":"a\\u0000b","entityType":"t","observations":["\\u0000"]}]}}}',
    ]
    for line in garbage:
        server.send_raw(line)
    # Every request the transport could parse gets an answer; the rest are dropped by the SDK's
    # stdio transport (no JSON-RPC parse-error reply), but nothing stops the server.
    for rid in (9001, 9002, 9003, 9007):
        answer = server.wait(rid, 60)
        assert "error" in answer or answer["result"]["isError"], answer
    answer = server.wait(9006, 60)
    assert answer["result"]["isError"] and "MEMORY_MAX_NAME_LENGTH" in answer["result"]["content"][0]["text"]
    answer = server.wait(9008, 60)
    assert not answer["result"]["isError"]
    answer = server.wait(9005, 60)  # a lone surrogate escape is read as U+FFFD: a search like any other
    assert answer["result"]["structuredContent"]["entities"] == []
    names = [e["name"] for e in server.read_graph()["entities"]]
    assert names == ["kept", "a\u0000b"]
    assert server.alive()
    assert server.close() == 0
    assert "Traceback" not in server.stderr_text()


# -- big batches write each search document once; the result equals the per-row path -------------


def _search_documents(store: Store) -> list[tuple[Any, ...]]:
    return store.run_read(lambda conn: conn.execute(
        "SELECT e.name, s.name, s.entity_type, s.observations FROM entity_search s JOIN entities e "
        "ON e.id = s.entity_id ORDER BY e.name").fetchall())


@settings(FUZZ, max_examples=25)
@given(batches=st.lists(st.lists(st.tuples(st.sampled_from(["Ann", "Bob", "Cy", "Dee", "Eve"]),
                                           st.lists(st.sampled_from(["Likes TEA", "İstanbul", "x\u0000y", "ẞig",
                                                                     "café", "dup", "dup", "more", "\u2028"]),
                                                    max_size=30)),
                                 min_size=1, max_size=4), min_size=1, max_size=4))
def test_big_batches_index_exactly_like_small_ones(tmp_path_factory: pytest.TempPathFactory,
                                                   batches: list[list[tuple[str, list[str]]]]) -> None:
    """The same additions as one call per observation (triggers, row by row) and as whole batches
    (batched search sync from 16 observations on) give identical search documents and results."""
    from graph_memory.db import search
    from graph_memory.mcp import tools

    folder = tmp_path_factory.mktemp("equiv")
    small, big = Store.open(folder / "small.db"), Store.open(folder / "big.db")
    try:
        m_small, m_big = MemoryService(SqliteBackend(small)), MemoryService(SqliteBackend(big))
        for batch in batches:
            entities = [{"name": n, "entityType": "Person", "observations": obs} for n, obs in batch]
            tools._create_entities(m_big, {"entities": entities})
            tools._add_observations(m_big, {"observations": [{"entityName": n, "contents": [*obs, "late " + n]}
                                                             for n, obs in batch]})
            for n, obs in batch:
                tools._create_entities(m_small, {"entities": [{"name": n, "entityType": "Person",
                                                                "observations": obs[:1]}]})
                for o in [*obs, "late " + n]:
                    tools._add_observations(m_small, {"observations": [{"entityName": n, "contents": [o]}]})
        assert _search_documents(small) == _search_documents(big)
        for query in ["tea", "likes", "istanbul", "i̇stanbul", "ßig", "dup", "late", "x\u0000y", "caf"]:
            for store in (small, big):
                assert store.integrity_problems() == []
            found = [store.run_read(lambda c, q=query: [e.name for e in search.search(c, q).entities])
                     for store in (small, big)]
            assert found[0] == found[1], query
    finally:
        small.close()
        big.close()


@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_resource_read_failures_never_leak_internal_text(store: Store, mode: str, monkeypatch: Any) -> None:
    """A bug while reading ``memory://knowledge-graph`` must not send its exception text to the
    client (handshake-era sessions would otherwise relay ``str(exc)``); a StoreError is relayed."""
    from mcp import Client
    from mcp.shared.exceptions import MCPError

    from graph_memory.errors import StoreError

    server = build_server(MemoryService(SqliteBackend(store))).server
    with start_blocking_portal() as portal, \
            portal.wrap_async_context_manager(Client(server, mode=mode, cache=None)) as client:
        def secret(operation: Any) -> Any:
            raise ValueError("secret detail /etc/shadow")

        monkeypatch.setattr(store, "run_read", secret)
        with pytest.raises(MCPError) as caught:
            portal.call(client.read_resource, "memory://knowledge-graph")
        assert "secret" not in str(caught.value) and "internal error" in str(caught.value)

        def locked(operation: Any) -> Any:
            raise StoreError(f"database {store.path} stayed locked by another process; try again")

        monkeypatch.setattr(store, "run_read", locked)
        with pytest.raises(MCPError, match="stayed locked"):
            portal.call(client.read_resource, "memory://knowledge-graph")
