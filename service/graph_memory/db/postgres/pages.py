"""Pages and ``since`` for read_graph and search_nodes on PostgreSQL: the semantics of
:mod:`graph_memory.db.pages` (the SQLite backend's, where they are described), the same keys
(entity and relation ids in creation order) and the same cursor positions.

``since`` compares the timestamptz columns with the moment (whole milliseconds), which selects
exactly the rows whose shown time (milliseconds cut) is at or after it; unknown times (NULL)
are never selected.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from graph_memory.db.pages import IdTest, page_slice
from graph_memory.db.postgres.search import match_ids, substring_among, substring_matches
from graph_memory.db.postgres.text import decode, key
from graph_memory.models import Entity, GraphSlice, Mode, Relation
from graph_memory.paging import ReadPosition, SearchPosition

if TYPE_CHECKING:
    from graph_memory.db.postgres.graph import PostgresGraph

_RELATION = "id, from_name, to_name, relation_type, weight"


def _limit(room: int | None) -> str:
    return "" if room is None else f" LIMIT {int(room) + 1:d}"


def read_page(graph: PostgresGraph, since: str | None, after: ReadPosition | None,
              limit: int | None) -> tuple[GraphSlice, ReadPosition | None]:
    """One page of read_graph (everything left when ``limit`` is None) and where the next starts
    (None: this was the last)."""
    position = after or ReadPosition("entities", 0)
    room = limit
    entities: list[Entity] = []
    if position.phase == "entities":
        changed = " AND updated_at >= %s::timestamptz" if since is not None else ""
        params: tuple[object, ...] = (position.last_id, *((since,) if since is not None else ()))
        ids = [int(row[0]) for row in graph._rows(
            f"SELECT id FROM entities WHERE id > %s{changed} ORDER BY id{_limit(room)}", params)]
        if room is not None and len(ids) > room:
            ids = ids[:room]
            return GraphSlice(_load_ids(graph, ids), [], []), ReadPosition("entities", ids[-1])
        entities = _load_ids(graph, ids)
        if room is not None:
            room -= len(ids)
        position = ReadPosition("relations", 0)
    changed = " AND coalesce(updated_at, created_at) >= %s::timestamptz" if since is not None else ""
    params = (position.last_id, *((since,) if since is not None else ()))
    rows = graph._rows(f"SELECT {_RELATION} FROM relations WHERE id > %s{changed} ORDER BY id{_limit(room)}", params)
    more = room is not None and len(rows) > room
    if more:
        rows = rows[:room]
    relations = [Relation(decode(r[1]), decode(r[2]), decode(r[3]), float(r[4])) for r in rows]
    following = ReadPosition("relations", int(rows[-1][0]) if rows else position.last_id) if more else None
    return GraphSlice(entities, relations, []), following


def search_page(graph: PostgresGraph, query: str, mode: Mode, since: str | None, after: SearchPosition | None,
                limit: int | None) -> tuple[GraphSlice, SearchPosition | None]:
    """One page of search_nodes (every match left when ``limit`` is None) and where the next
    starts (None: this was the last).

    Raises:
        InvalidQuery: as :func:`graph_memory.db.search.search`.
    """
    before = after or SearchPosition(first=_now(graph))
    if mode == "substring":
        found = substring_matches(graph, query, None if limit is None else limit + 1, after=before.after, since=since)
        page = found if limit is None else found[:limit]
        more = len(found) > len(page)
        ids = [i for i, _ in page]

        def later(candidates: set[int]) -> set[int]:   # the matches a later page will bring
            beyond = {i for i in candidates if i > ids[-1]} if more else set()
            return substring_among(graph, query, beyond, since)

        # a promised match whose turn has come and that is not on this page stopped matching
        turn = {i for i in before.promised if not more or i <= ids[-1]} - set(ids)
        due = _existing(graph, turn, before.first)
        result, delivered = _page_slice(graph, [e for _, e in page], ids,
                                        replace(before, promised=before.promised - turn), later, due)
        return result, replace(delivered, after=ids[-1]) if more else None
    # The ranked modes rank every match once, at the first page, and freeze that order: a match
    # of it comes on its page while it exists, whether it still matches or not.
    if before.rest is None:
        todo = match_ids(graph, query, mode)
        if since is not None:
            recent = {int(row[0]) for row in graph._rows(
                "SELECT id FROM entities WHERE id = ANY(%s) AND updated_at >= %s::timestamptz", (todo, since))}
            todo = [i for i in todo if i in recent]
    else:   # what no longer exists is gone
        alive = _existing(graph, before.rest, before.first)
        todo = [i for i in before.rest if i in alive]
    page_ids = todo if limit is None else todo[:limit]
    rest = todo[len(page_ids):]
    result, delivered = _page_slice(graph, _load_ids(graph, page_ids, ordered=True), page_ids, before,
                                    set(rest).intersection, set())
    # rest holds what is promised (a match of the ranking comes while it exists): nothing to carry
    return result, replace(delivered, rest=tuple(rest), promised=frozenset()) if rest else None


def _now(graph: PostgresGraph) -> str:
    """The database's clock (UTC, microseconds, as precise as created_at), as the first page's moment."""
    row = graph._one("SELECT to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US\"Z\"')", ())
    assert row is not None
    return str(row[0])


def _page_slice(graph: PostgresGraph, entities: list[Entity], page: list[int], before: SearchPosition,
                later: IdTest, due: set[int]) -> tuple[GraphSlice, SearchPosition]:
    """:func:`graph_memory.db.pages.page_slice` on PostgreSQL."""
    return page_slice(entities, page, before, later, due, touching=graph._relations_touching,
                      ids=lambda names: _ids(graph, names), load_names=graph._entities_named,
                      load_ids=lambda ids: _load_ids(graph, ids))


def _existing(graph: PostgresGraph, ids: Iterable[int], first: str) -> set[int]:
    """Those of ``ids`` whose entities exist and were created by ``first`` (as on SQLite; identity
    columns never give an id twice, so this only holds what the SQLite backend must check)."""
    return {int(row[0]) for row in graph._rows(
        "SELECT id FROM entities WHERE id = ANY(%s) AND (created_at IS NULL OR created_at <= %s::timestamptz)",
        (list(ids), first))}


def _ids(graph: PostgresGraph, names: set[str]) -> dict[str, int]:
    """``{name: id}`` of the names that are entities."""
    if not names:
        return {}
    return {decode(name): int(i) for name, i in graph._rows(
        "SELECT name, id FROM entities WHERE name_key = ANY(%s)", ([key(n) for n in names],))}


def _load_ids(graph: PostgresGraph, ids: list[int], *, ordered: bool = False) -> list[Entity]:
    """The entities ``ids`` with their observations: in id order, or with ``ordered`` in the
    order of ``ids``."""
    if not ids:
        return []
    if not ordered:
        return graph._entities_by("WHERE e.id = ANY(%s)", (ids,))
    heads = {int(row[0]): row for row in graph._rows(
        "SELECT id, name, entity_type FROM entities WHERE id = ANY(%s)", (ids,))}
    return graph._with_observations([heads[i] for i in ids if i in heads])
