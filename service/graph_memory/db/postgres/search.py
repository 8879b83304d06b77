"""search_nodes on PostgreSQL: the three modes over the search documents and their trigram indexes.

The documents (``entity_search``) hold each entity's name, type and observations lower-cased with
Python ``str.lower()`` (observations joined by newlines), exactly as the SQLite backend builds
them, and every mode lower-cases the caller's text the same way. ``LIKE '%text%'`` on these
``COLLATE "C"`` columns is an exact substring test; the pg_trgm GIN indexes only let PostgreSQL
find the candidates of a 3+ character text quickly, LIKE decides.

``substring`` (default)
    The reference server's rule, exactly, as on SQLite; entities in creation order.
``words``
    The same entity set as on SQLite: every whitespace-separated term is a substring of the name,
    the type or one observation. Ranked by a weighted count of the fields each term hits (name 10,
    type 4, observations 1), ties by creation order. (SQLite ranks terms of 3+ characters by
    BM25, which PostgreSQL does not have; it uses this count only for short terms.)
``fts``
    The same syntax and checks as on SQLite (parsed by :func:`graph_memory.db.search.parse_fts`),
    translated to LIKE conditions: a term or ``"phrase"`` (also ``prefix*``) is a substring of a
    column, ``^term`` starts a column (the first observation for ``observations``), ``AND``,
    ``OR``, ``NOT`` and column filters as in FTS5. ``NEAR(…)`` and phrase concatenation (``a + b``)
    are refused with an error. Ranked like ``words`` over the query's terms.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import apsw.fts5query as fq

from graph_memory.db.graph import unique
from graph_memory.db.postgres.graph import HEAD
from graph_memory.db.postgres.text import ESCAPE, encode, needs_check
from graph_memory.db.search import WEIGHTS, _storable, check_query, entity_matches, parse_fts
from graph_memory.errors import InvalidQuery
from graph_memory.models import MODES, Entity, GraphSlice, Mode

if TYPE_CHECKING:
    from graph_memory.db.postgres.graph import PostgresGraph

_COLUMNS = ("name", "entity_type", "observations")
_WEIGHT = dict(zip(_COLUMNS, WEIGHTS, strict=True))
_HEAD = f"{HEAD} FROM entity_search s JOIN entities e ON e.id = s.entity_id"


def search(graph: PostgresGraph, query: str, mode: Mode = "substring", limit: int | None = None, *,
           related: bool = True) -> GraphSlice:
    """``search_nodes``, as :func:`graph_memory.db.search.search` (same errors; ``related=False``:
    the entities only)."""
    found = [entity for _, entity in matches(graph, query, mode, limit)]
    return graph.slice(found) if related else GraphSlice(found, [])


def matches(graph: PostgresGraph, query: str, mode: Mode, limit: int | None) -> list[tuple[int, Entity]]:
    """``(id, entity)`` of the entities ``query`` finds in ``mode`` (at most ``limit``), in the
    order :func:`search` returns them.

    Raises:
        InvalidQuery: as :func:`graph_memory.db.search.search`.
    """
    if mode == "substring":
        return substring_matches(graph, query, limit)
    if mode == "words":
        return words_matches(graph, query, limit)
    if mode == "fts":
        return fts_matches(graph, query, limit)
    raise InvalidQuery(f"unknown search mode {mode!r}; use one of: {', '.join(MODES)}")


def match_ids(graph: PostgresGraph, query: str, mode: Mode) -> list[int]:
    """The ids of every entity ``query`` matches in ``mode``, in the order :func:`search` returns
    them: what paging (:mod:`graph_memory.db.postgres.pages`) cuts into pages.

    Raises:
        InvalidQuery: as :func:`search`.
    """
    return [i for i, _ in matches(graph, query, mode, None)]


def like_pattern(text: str, *, anchored: bool = False) -> str:
    """A LIKE pattern matching the encoded ``text`` as a substring (``anchored``: at the start)."""
    escaped = encode(text).replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return ("" if anchored else "%") + escaped + "%"


def _hit(column: str, param: str) -> str:
    return f"s.{column} LIKE %({param})s"


def _any_field(param: str) -> str:
    return "(" + " OR ".join(_hit(c, param) for c in _COLUMNS) + ")"


def _limit(limit: int | None) -> str:
    return "" if limit is None else f"LIMIT {min(max(int(limit), 0), 2**63 - 1):d}"  # bigint, as SQLite clamps


def _heads(graph: PostgresGraph, sql: str, params: dict[str, Any]) -> list[tuple[int, Entity]]:
    """``(id, entity)`` for the rows ``sql`` selects (:data:`~graph_memory.db.postgres.graph.HEAD`:
    the observations come in the same query), in their order."""
    heads = graph._rows(sql, params)
    return list(zip([int(h[0]) for h in heads], graph._with_observations(heads), strict=True))


def _cut(found: list[tuple[int, Entity]], limit: int | None) -> list[tuple[int, Entity]]:
    return found if limit is None else found[:max(limit, 0)]


def substring_matches(graph: PostgresGraph, query: str, limit: int | None = None, *, after: int = 0,
                      since: str | None = None) -> list[tuple[int, Entity]]:
    """The reference server's rule: ``query.lower()`` is a substring of the entity's lower-cased
    name, type or one observation; ``(id, entity)`` in creation order (the first ``limit``), only
    ids over ``after`` and, with ``since``, entities changed at or after it (pages:
    :mod:`graph_memory.db.postgres.pages`)."""
    check_query(query)
    needle = query.lower()
    params: dict[str, Any] = {"after": after, "since": since}
    extra = "e.id > %(after)s" + (" AND e.updated_at >= %(since)s::timestamptz" if since is not None else "")
    if not needle:
        return _heads(graph, f"SELECT {HEAD} FROM entities e WHERE {extra} ORDER BY e.id "
                             f"{_limit(limit)}", params)
    if not _storable(needle):
        return []
    params["p"] = like_pattern(needle)
    if "\n" in needle or needs_check(needle):
        # The document joins observations with newlines, and an escape could hold the needle's
        # start: the documents give a superset, the rule itself decides.
        candidates = _heads(graph, f"SELECT {_HEAD} WHERE {_any_field('p')} AND {extra} ORDER BY e.id", params)
        return _cut([(i, e) for i, e in candidates if entity_matches(e, needle)], limit)
    return _heads(graph, f"SELECT {_HEAD} WHERE {_any_field('p')} AND {extra} ORDER BY e.id {_limit(limit)}",
                  params)


def substring_among(graph: PostgresGraph, query: str, ids: set[int], since: str | None = None) -> set[int]:
    """Which of the entities ``ids`` ``query`` matches in ``substring`` mode (and changed at or
    after ``since``), decided by the rule itself on their current text."""
    needle = query.lower()
    if not ids or not _storable(needle):
        return set()
    changed = " AND e.updated_at >= %(since)s::timestamptz" if since is not None else ""
    found = _heads(graph, f"SELECT {HEAD} FROM entities e WHERE e.id = ANY(%(ids)s){changed}",
                   {"ids": sorted(ids), "since": since})
    return {i for i, e in found if not needle or entity_matches(e, needle)}


def _score(terms: Sequence[tuple[str, Sequence[str]]]) -> str:
    """The ranking expression: per ``(param, columns)`` the weights of the columns it hits."""
    parts = [f"{_WEIGHT[c]} * ({_hit(c, param)})::int" for param, columns in terms for c in columns]
    return " + ".join(parts) if parts else "0"


def words_matches(graph: PostgresGraph, query: str, limit: int | None = None) -> list[tuple[int, Entity]]:
    """Every whitespace-separated term of ``query`` (lower-cased) is a substring of the name, the
    type or one observation; ranked by the weighted count of fields the terms hit, ties by creation
    order. A blank query matches every entity in creation order."""
    check_query(query)
    terms = unique(t.lower() for t in query.split())
    if not terms:
        return _heads(graph, f"SELECT {HEAD} FROM entities e ORDER BY e.id {_limit(limit)}", {})
    if not all(_storable(t) for t in terms):
        return []
    params = {f"t{i}": like_pattern(t) for i, t in enumerate(terms)}
    where = " AND ".join(_any_field(f"t{i}") for i in range(len(terms)))
    order = f"ORDER BY {_score([(f't{i}', _COLUMNS) for i in range(len(terms))])} DESC, e.id"
    if any(needs_check(t) for t in terms):
        candidates = _heads(graph, f"SELECT {_HEAD} WHERE {where} {order}", params)
        return _cut([(i, e) for i, e in candidates if all(entity_matches(e, t) for t in terms)], limit)
    return _heads(graph, f"SELECT {_HEAD} WHERE {where} {order} {_limit(limit)}", params)


class _Translation:
    """An fts query tree as a SQL condition on ``entity_search s``, with its parameters and the
    positive terms (for the ranking)."""

    def __init__(self) -> None:
        self.params: dict[str, Any] = {}
        self.ranked: list[tuple[str, Sequence[str]]] = []

    def condition(self, node: fq.QUERY, columns: Sequence[str], *, positive: bool = True) -> str:
        if isinstance(node, fq.PHRASE):
            return self._phrase(node, columns, positive)
        if isinstance(node, fq.AND):
            return "(" + " AND ".join(self.condition(q, columns, positive=positive) for q in node.queries) + ")"
        if isinstance(node, fq.OR):
            return "(" + " OR ".join(self.condition(q, columns, positive=positive) for q in node.queries) + ")"
        if isinstance(node, fq.NOT):
            return (f"({self.condition(node.match, columns, positive=positive)} AND NOT "
                    f"{self.condition(node.no_match, columns, positive=False)})")
        if isinstance(node, fq.COLUMNFILTER):
            named = set(node.columns)
            inner = [c for c in columns if (c in named) == (node.filter == "include")]
            return self.condition(node.query, inner, positive=positive)
        raise InvalidQuery("invalid fts query: NEAR(...) is not supported by the PostgreSQL backend; "
                           "use AND between the terms, or a \"quoted phrase\" for adjacent words")

    def _phrase(self, node: fq.PHRASE, columns: Sequence[str], positive: bool) -> str:
        if node.plus is not None:
            raise InvalidQuery("invalid fts query: phrase concatenation (a + b) is not supported by the "
                               "PostgreSQL backend; write the text as one \"quoted phrase\"")
        text = node.phrase if isinstance(node.phrase, str) else node.phrase.encode()
        if text[:1] in (ESCAPE, "\U0010fffe"):
            raise InvalidQuery("invalid fts query: a term starts with the noncharacter U+10FFFE or U+10FFFF; "
                               "use mode 'substring'")
        if not columns:
            return "FALSE"
        param = f"p{len(self.params)}"
        self.params[param] = like_pattern(text, anchored=node.initial)
        if positive:
            self.ranked.append((param, columns))
        return "(" + " OR ".join(_hit(c, param) for c in columns) + ")"


def fts_matches(graph: PostgresGraph, query: str, limit: int | None = None) -> list[tuple[int, Entity]]:
    """FTS5 query syntax translated to LIKE conditions (see the module's docstring).

    Raises:
        InvalidQuery: as on SQLite (empty, malformed, a term under 3 characters, an unknown
            column), and for ``NEAR`` and ``+``, which this backend does not translate.
    """
    check_query(query)
    tree = parse_fts(query)
    translation = _Translation()
    where = translation.condition(tree, _COLUMNS)
    order = f"ORDER BY {_score(translation.ranked)} DESC, e.id"
    return _heads(graph, f"SELECT {_HEAD} WHERE {where} {order} {_limit(limit)}", translation.params)

