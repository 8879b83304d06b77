"""search_nodes in its default mode is the reference server's rule, exactly.

The rule (INTERFACE.md): an entity matches when ``query.lower()`` is a substring of
``name.lower()``, ``entityType.lower()`` or one ``observation.lower()`` (Python ``str.lower()``);
the empty query matches everything; entities come back in creation (rowid) order. The FTS5 trigram
index only finds candidates, so these tests compare the search with a plain-Python oracle on
random graphs and queries, with the characters where lower-casing is tricky.
"""

from __future__ import annotations

import string
from collections.abc import Iterator, Sequence
from pathlib import Path

import apsw
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from graph_memory.db import graph, search
from graph_memory.db.backend import SqliteBackend
from graph_memory.db.store import Store
from graph_memory.errors import InvalidQuery
from graph_memory.importer import load_graph
from graph_memory.legacy import LegacyGraph, read_legacy
from graph_memory.models import Entity, Relation

from helpers import sample_path


def oracle(entities: Sequence[Entity], query: str) -> list[str]:
    """Upstream's search over ``entities`` (in creation order): names of the matches."""
    q = query.lower()
    return [e.name for e in entities
            if q in e.name.lower() or q in e.entity_type.lower() or any(q in o.lower() for o in e.observations)]


def found(store: Store, query: str, limit: int | None = None) -> list[str]:
    return [e.name for e in store.run_read(lambda conn: search.search_substring(conn, query, limit)).entities]


# -- random graphs ----------------------------------------------------------------------------------

# Characters whose lower-casing is not one code point to one code point, or is context-dependent,
# or that the trigram tokenizer treats specially; plus ASCII so that matches are frequent.
TRICKY = [
    "İ",        # U+0130 → "i̇" (i + combining dot above): lower() grows the string
    "i", "I", "ı", "\u0307",
    "ß", "ẞ",   # ẞ (U+1E9E) lower-cases to ß; ß has no single-character upper case
    "Σ", "σ", "ς",  # str.lower() gives final ς for Σ at the end of a word
    "𐐀", "𐐨",  # Deseret capital/small long I (outside the BMP)
    "e", "é", "\u0301",  # combining acute vs precomposed
    "😀", "👍", "\U0001f3fd", "☕",  # emoji, skin-tone modifier
    "Ω", "Ω", "K", "ǅ", "ﬃ", "ΐ",  # ohm, Kelvin, titlecase digraph, ligature, Greek with marks
    "\n", "\t", " ", '"', "*", "-", ":", "(", ")", "^", "%", "_",
    "\x00", "\ufffe", "\uffff", "\ufffd",  # NUL and the non-characters the tokenizer maps to U+FFFD
]
# The characters where the index and the rule could part ways (NUL, U+FFFE, the newline joining
# observations) get a branch of their own so that they turn up often.
CHARS = st.one_of(st.sampled_from(TRICKY), st.sampled_from(list("abcAB")), st.sampled_from(["\x00", "\ufffe", "\n"]),
                  st.characters(exclude_categories=("Cs",)))
TEXT = st.text(CHARS, max_size=12)
ENTITY = st.builds(Entity, name=st.text(CHARS, min_size=1, max_size=10), entity_type=TEXT,
                   observations=st.lists(TEXT, max_size=4, unique=True))
GRAPH = st.lists(ENTITY, max_size=8, unique_by=lambda e: e.name)


def query_for(draw: st.DrawFn, entities: list[Entity]) -> str:
    """Mostly slices of the graph's text (1–5 characters, case flipped sometimes, or altered the
    ways the trigram tokenizer blurs text: NUL dropped, U+FFFE/U+FFFF read as U+FFFD, one character
    left out), else random text."""
    texts = [t for e in entities for t in (e.name, e.entity_type, *e.observations) if t]
    blurry = [t for t in texts if any(c in t for c in "\x00\ufffe\uffff")]
    if blurry and draw(st.booleans()):  # a window around a character the tokenizer blurs, blurred
        text = draw(st.sampled_from(blurry))
        at = min(i for i, c in enumerate(text) if c in "\x00\ufffe\uffff")
        window = text[max(0, at - draw(st.integers(0, 3))):at + draw(st.integers(1, 4))]
        return draw(st.sampled_from([window.replace("\x00", ""), window.translate(BLURRED), window]))
    joined = ["\n".join(e.observations) for e in entities if len(e.observations) > 1]
    if joined and draw(st.integers(0, 3)) == 0:  # across two observations, as the index stores them
        text = draw(st.sampled_from(joined))
        at = text.index("\n")
        return text[max(0, at - draw(st.integers(0, 3))):at + draw(st.integers(1, 4))]
    if texts and draw(st.integers(0, 3)):
        text = draw(st.sampled_from(texts))
        start = draw(st.integers(0, len(text) - 1))
        piece = text[start:start + draw(st.integers(1, 5))]
        cut = draw(st.integers(0, len(piece) - 1))
        return draw(st.sampled_from([
            piece, piece.upper(), piece.lower(), piece.swapcase(), piece.title(),
            piece.replace("\x00", ""), piece.translate(BLURRED), piece[:cut] + piece[cut + 1:],
        ]))
    return draw(st.text(CHARS, max_size=5))


BLURRED = str.maketrans({"\ufffe": "\ufffd", "\uffff": "\ufffd"})


@st.composite
def graph_and_queries(draw: st.DrawFn) -> tuple[list[Entity], bool, list[str]]:
    entities = draw(GRAPH)
    queries = [query_for(draw, entities) for _ in range(6)]
    return entities, draw(st.booleans()), queries


@pytest.fixture(scope="module")
def shared_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    """One database for every hypothesis example; each example clears it first."""
    store = Store.open(tmp_path_factory.mktemp("search") / "memory.db")
    yield store
    store.close()


def replace_graph(store: Store, entities: list[Entity], bulk: bool) -> None:
    """Empty the store, then write ``entities`` through the tools' path (row triggers) or the bulk
    import path (search index rebuilt at the end)."""
    def clear(conn: apsw.Connection) -> None:
        conn.execute("DELETE FROM relations")
        conn.execute("DELETE FROM entities")
    store.run_write(clear)
    if bulk:
        legacy = LegacyGraph([Entity(e.name, e.entity_type, list(e.observations)) for e in entities], [])
        load_graph(SqliteBackend(store), legacy, source="test")
    else:
        store.run_write(lambda conn: graph.create_entities(conn, entities))


@settings(max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(graph_and_queries())
def test_substring_equals_upstream_rule_on_random_graphs(shared_store: Store,
                                                         example: tuple[list[Entity], bool, list[str]]) -> None:
    entities, bulk, queries = example
    replace_graph(shared_store, entities, bulk)
    for query in queries:
        assert found(shared_store, query) == oracle(entities, query), query


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(GRAPH, st.data())
def test_substring_stays_exact_after_edits(shared_store: Store, entities: list[Entity], data: st.DataObject) -> None:
    """Observations added, replaced and deleted keep the index in step (the row triggers)."""
    assume(entities)
    replace_graph(shared_store, entities, bulk=False)
    target = data.draw(st.sampled_from(entities))
    extra = data.draw(st.lists(TEXT, max_size=3, unique=True))
    extra = [o for o in extra if o not in target.observations]
    shared_store.run_write(lambda conn: graph.add_observations(conn, [(target.name, extra)]))
    target.observations.extend(extra)
    if target.observations:
        old = data.draw(st.sampled_from(target.observations))
        new = data.draw(TEXT)
        if new not in target.observations:
            shared_store.run_write(lambda conn: graph.update_observations(
                conn, [graph.ObservationUpdate(target.name, old, new)]))
            target.observations[target.observations.index(old)] = new
        gone = data.draw(st.sampled_from(target.observations))
        shared_store.run_write(lambda conn: graph.delete_observations(conn, [(target.name, [gone])]))
        target.observations.remove(gone)
    for _ in range(6):
        query = query_for(data.draw, entities)
        assert found(shared_store, query) == oracle(entities, query), query


# -- pinned cases ---------------------------------------------------------------------------------

CASES: list[tuple[list[Entity], str, list[str]]] = [
    # İ lower-cases to "i̇" (two code points): "i̇" and "İ" find it, a plain "i" too
    ([Entity("İstanbul", "city", [])], "i̇s", ["İstanbul"]),
    ([Entity("İstanbul", "city", [])], "İ", ["İstanbul"]),
    ([Entity("İstanbul", "city", [])], "is", []),
    # ẞ lower-cases to ß, ß stays ß; "ss" is not ß (no case folding)
    ([Entity("STRAẞE", "street", [])], "straße", ["STRAẞE"]),
    ([Entity("Straße", "street", [])], "STRASSE", []),
    # final sigma: "ΟΔΟΣ" lowers to "οδος" with a final ς, so σ at the end does not match
    ([Entity("ΟΔΟΣ", "word", [])], "οδος", ["ΟΔΟΣ"]),
    ([Entity("ΟΔΟΣ", "word", [])], "οδοσ", []),
    # Deseret: 𐐀 lowers to 𐐨
    ([Entity("𐐀𐐀𐐀x", "deseret", [])], "𐐨𐐨𐐨", ["𐐀𐐀𐐀x"]),
    # combining marks are characters of their own: "e" finds "e\u0301", "é" (precomposed) does not
    ([Entity("cafe\u0301", "place", [])], "cafe", ["cafe\u0301"]),
    ([Entity("cafe\u0301", "place", [])], "café", []),
    # a query must not span two observations (they are joined with a newline in the index)
    ([Entity("A", "t", ["abc", "def"])], "c\nd", []),
    ([Entity("A", "t", ["abc\ndef"])], "c\nd", ["A"]),
    ([Entity("A", "t", ["abc", "def"])], "\n", []),
    # NUL inside text: the tokenizer skips it, the search does not
    ([Entity("A", "t", ["ab\x00cd"])], "abc", []),
    ([Entity("A", "t", ["ab\x00cd"])], "b\x00c", ["A"]),
    ([Entity("A", "t", ["x\x00\x00abc"])], "\x00\x00ab", ["A"]),
    # FTS5 syntax characters are plain text here
    ([Entity("A", "t", ['say "hi" * 2'])], '"hi" *', ["A"]),
    ([Entity("A", "t", ["foo-bar"]), Entity("B", "t", ["NOT this"])], "not", ["B"]),
    # emoji and empty query
    ([Entity("A", "t", ["☕ please"]), Entity("B", "t", [])], "☕", ["A"]),
    ([Entity("A", "t", []), Entity("B", "t", [])], "", ["A", "B"]),
]


@pytest.mark.parametrize(("entities", "query", "expected"), CASES)
def test_substring_pinned_cases(store: Store, entities: list[Entity], query: str, expected: list[str]) -> None:
    store.run_write(lambda conn: graph.create_entities(conn, entities))
    assert oracle(entities, query) == expected
    assert found(store, query) == expected


def test_substring_limit_keeps_rowid_order_and_relations_follow(store: Store) -> None:
    store.run_write(lambda conn: graph.create_entities(conn, [
        Entity("Alpha", "t", ["shared"]), Entity("Beta", "t", ["shared"]), Entity("Gamma", "t", ["shared"]),
        Entity("Delta", "t", ["other"])]))
    store.run_write(lambda conn: graph.create_relations(conn, [
        Relation("Alpha", "Delta", "r"), Relation("Gamma", "Beta", "r"), Relation("Beta", "Alpha", "r")]))
    result = store.run_read(lambda conn: search.search_substring(conn, "SHARED", 2))
    assert [e.name for e in result.entities] == ["Alpha", "Beta"]
    assert [(r.source, r.target) for r in result.relations] == [("Alpha", "Delta"), ("Gamma", "Beta"),
                                                                ("Beta", "Alpha")]
    assert [e.name for e in result.neighbors] == ["Gamma", "Delta"]
    assert found(store, "shared", 10) == ["Alpha", "Beta", "Gamma"]
    assert found(store, "", 1) == ["Alpha"]
    assert found(store, "c\nd", 1) == []


@pytest.mark.parametrize("query", ["\ud800", "ab\udfff", "\udc00abc"])
def test_query_with_a_lone_surrogate_matches_nothing(store: Store, query: str) -> None:
    """Stored text is UTF-8 and cannot hold a lone surrogate, so by the rule nothing contains the
    query: an empty result, as the reference server gives, not an error."""
    store.run_write(lambda conn: graph.create_entities(conn, [Entity("abc", "t", ["ab"])]))
    assert oracle(store.run_read(graph.read_graph).entities, query) == []
    assert found(store, query) == []


def test_query_over_2048_characters_is_refused(store: Store) -> None:
    assert found(store, "x" * 2048) == []
    with pytest.raises(InvalidQuery, match="2049 characters long; the limit is 2048"):
        found(store, "x" * 2049)


# -- the reference server's own data ---------------------------------------------------------------


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Store, LegacyGraph]]:
    legacy = read_legacy(sample_path())
    store = Store.open(Path(tmp_path_factory.mktemp("sample")) / "memory.db")
    load_graph(SqliteBackend(store), legacy, source="sample")
    yield store, legacy
    store.close()


def sample_queries(legacy: LegacyGraph) -> list[str]:
    """A few hundred queries: every 1- and 3-character slice of some names and observations,
    punctuation, unicode, case variants, the empty string and one that matches nothing."""
    texts = [e.name for e in legacy.entities[:12]] + sorted({o for e in legacy.entities for o in e.observations})[:25]
    queries: set[str] = set()
    for text in texts:
        for i in range(len(text)):
            queries.add(text[i])
            queries.add(text[i:i + 3])
    queries |= {q.upper() for q in list(queries)[:100]}
    queries |= set(string.punctuation) | {" ", "  ", "\t", "\n", "日本語", "☕", "🚀", "—", "ü", "Ü", "Ł", "ł", "é",
                                          "É", "İ", "ß", "", "UTC+09:00", "'The Null", "no such thing anywhere"}
    return sorted(queries)


def test_substring_equals_upstream_rule_on_the_reference_servers_file(sample: tuple[Store, LegacyGraph]) -> None:
    store, legacy = sample
    queries = sample_queries(legacy)
    assert len(queries) > 300
    hits = 0
    for query in queries:
        expected = oracle(legacy.entities, query)
        assert found(store, query) == expected, query
        hits += bool(expected)
    assert found(store, "") == [e.name for e in legacy.entities]
    assert found(store, "no such thing anywhere") == []
    assert hits > len(queries) // 2


def test_sample_relations_and_neighbors_follow_the_matches(sample: tuple[Store, LegacyGraph]) -> None:
    store, legacy = sample
    query = legacy.entities[1].name[:5]
    result = store.run_read(lambda conn: search.search_substring(conn, query))
    matched = {e.name for e in result.entities}
    expected = [r for r in legacy.relations if r.source in matched or r.target in matched]
    assert [r.key for r in result.relations] == [r.key for r in expected]
    known = {e.name for e in legacy.entities}
    far = {n for r in expected for n in (r.source, r.target)} - matched
    assert {e.name for e in result.neighbors} == far & known
