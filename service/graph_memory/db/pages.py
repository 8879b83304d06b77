"""Pages and ``since`` for read_graph and search_nodes (SQLite).

Pages are cut on stable keys, never offsets (positions: :mod:`graph_memory.paging`), so a row
committed before the first page is neither skipped nor repeated, whatever is written between
pages; rows written later may or may not appear.

read_graph
    Entities in rowid order, then relations in rowid order; ``limit`` counts both (a page holds
    at most ``limit`` entities and relations together). ``neighbors`` is always empty. With
    ``since``: the entities whose ``updated_at`` (created, or an observation added, edited or
    removed) is at or after it, and the relations created or re-weighed at or after it.
search_nodes
    ``limit`` counts matched entities, as it always has. Each page holds its matches, the
    relations touching them that no earlier page held (a relation between two matches comes with
    the earlier one), and the neighbors (far ends that match nothing) no earlier page held.
    ``substring`` pages in rowid order keyed on the last entity id; the ranked modes rank once, at
    the first page, and the cursor carries the ids still to come in that order (about 2 characters
    per match), so a later write cannot reorder, skip or repeat them. With ``since``, only
    matches changed at or after it count.

Concatenating the pages (entities, relations and neighbors each in page order) gives the
unpaged reply's entities in the same order and its relations and neighbors each exactly once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import cast

import apsw

from graph_memory.db import search
from graph_memory.db.graph import bind_members, load_entities, relations_touching, unique
from graph_memory.models import Entity, GraphSlice, Mode, Relation, relations_from_rows
from graph_memory.paging import ReadPosition, SearchPosition

_RELATION = "id, from_name, to_name, relation_type, weight"


def cursor_secret(conn: apsw.Connection) -> bytes:
    """This database's key for signing cursors (migrations/0006)."""
    row = conn.execute("SELECT secret FROM cursor_secret WHERE id = 1").fetchone()
    return bytes(row[0]) if row is not None else b""


def read_page(conn: apsw.Connection, since: str | None, after: ReadPosition | None,
              limit: int | None) -> tuple[GraphSlice, ReadPosition | None]:
    """One page of read_graph (everything left when ``limit`` is None) and where the next starts
    (None: this was the last)."""
    position = after or ReadPosition("entities", 0)
    room = limit
    entities: list[Entity] = []
    if position.phase == "entities":
        changed = " AND updated_at >= ?" if since is not None else ""
        params: tuple[object, ...] = (position.last_id, *((since,) if since is not None else ()))
        ids = [row[0] for row in conn.execute(
            f"SELECT id FROM entities WHERE id > ?{changed} ORDER BY id"
            f"{'' if room is None else ' LIMIT ' + str(int(room) + 1)}", params)]
        if room is not None and len(ids) > room:
            ids = ids[:room]
            return GraphSlice(_load_ids(conn, ids), [], []), ReadPosition("entities", ids[-1])
        entities = _load_ids(conn, ids)
        if room is not None:
            room -= len(ids)
        position = ReadPosition("relations", 0)
    changed = " AND coalesce(updated_at, created_at) >= ?" if since is not None else ""
    params = (position.last_id, *((since,) if since is not None else ()))
    rows = cast(list[tuple[int, str, str, str, float]], conn.execute(
        f"SELECT {_RELATION} FROM relations WHERE id > ?{changed} ORDER BY id"
        f"{'' if room is None else ' LIMIT ' + str(int(room) + 1)}", params).fetchall())
    more = room is not None and len(rows) > room
    if more:
        rows = rows[:room]
    relations = relations_from_rows(row[1:] for row in rows)
    following = ReadPosition("relations", rows[-1][0] if rows else position.last_id) if more else None
    return GraphSlice(entities, relations, []), following


def search_page(conn: apsw.Connection, query: str, mode: Mode, since: str | None, after: SearchPosition | None,
                limit: int | None) -> tuple[GraphSlice, SearchPosition | None]:
    """One page of search_nodes (every match left when ``limit`` is None) and where the next
    starts (None: this was the last).

    Raises:
        InvalidQuery: as :func:`graph_memory.db.search.search`.
    """
    if mode == "substring":
        # Keyed on rowid: the page's matches come from the index with LIMIT, and only the ends
        # of its relations are checked against the query, never every match.
        start = after.after if after is not None else 0
        ids = search.substring_ids(conn, query, after=start, limit=None if limit is None else limit + 1, since=since)
        page = ids if limit is None else ids[:limit]
        following = SearchPosition(after=page[-1]) if len(ids) > len(page) else None

        def matched(candidates: set[int]) -> set[int]:
            return candidates & set(page) | search.substring_among(conn, query, candidates - set(page), since)

        def earlier(candidates: set[int]) -> set[int]:
            return matched({i for i in candidates if i <= start})

        return _page_slice(conn, _load_ids(conn, page), earlier if start else None, matched), following
    # The ranked modes rank every match once, at the first page, and freeze that order.
    matches = search.match_ids(conn, query, mode)
    if since is not None:
        recent = {row[0] for row in conn.execute("SELECT id FROM entities WHERE updated_at >= ?", (since,))}
        matches = [i for i in matches if i in recent]
    if after is None or after.rest is None:
        todo = matches
    else:   # what no longer exists is gone
        alive = _existing(conn, after.rest)
        todo = [i for i in after.rest if i in alive]
    page = todo if limit is None else todo[:limit]
    rest = todo[len(page):]
    found, waiting = set(matches) | set(page), set(todo)

    def earlier_ranked(candidates: set[int]) -> set[int]:
        return {i for i in candidates if i in found and i not in waiting}

    return (_page_slice(conn, _load_ids(conn, page, ordered=True), None if after is None else earlier_ranked,
                        found.intersection),
            SearchPosition(rest=tuple(rest)) if rest else None)


IdTest = Callable[[set[int]], set[int]]


def _page_slice(conn: apsw.Connection, entities: list[Entity], earlier: IdTest | None, matched: IdTest) -> GraphSlice:
    """:func:`page_slice` on SQLite."""
    return page_slice(entities, earlier, matched, touching=lambda names: relations_touching(conn, names),
                      ids=lambda names: _ids(conn, names), load_names=lambda names: _load_names(conn, names))


def page_slice(entities: list[Entity], earlier: IdTest | None, matched: IdTest, *,
               touching: Callable[[list[str]], list[Relation]],
               ids: Callable[[set[str]], dict[str, int]],
               load_names: Callable[[list[str]], list[Entity]]) -> GraphSlice:
    """``entities`` with the relations touching them whose other end is no ``earlier`` match
    (those came with an earlier page), and the far ends of those relations that are not
    ``matched`` and touch no ``earlier`` match. Both tests take a set of entity ids and return
    the subset that passes; ``earlier`` None: the first page.

    Backend-neutral: a backend supplies ``touching(names)`` (the relations with an end among the
    names, in creation order), ``ids(names)`` (``{name: entity id}`` of those that are entities)
    and ``load_names(names)`` (those entities, with observations, in the order given).
    """
    names = [e.name for e in entities]
    inside = set(names)
    near = touching(names)
    id_of = ids({n for r in near for n in (r.source, r.target) if n not in inside})
    before = earlier(set(id_of.values())) if earlier is not None else set()
    relations = [r for r in near if id_of.get(r.source) not in before and id_of.get(r.target) not in before]
    ends = {n: id_of[n] for r in relations for n in (r.source, r.target) if n not in inside and n in id_of}
    matching = matched(set(ends.values()))
    far = unique(n for r in relations for n in (r.source, r.target) if n in ends and ends[n] not in matching)
    if far and earlier is not None:   # a neighbor of an earlier page's match came with that page
        around = touching(far)
        others = ids({n for r in around for n in (r.source, r.target)})
        gone = earlier({others[n] for r in around for n in (r.source, r.target) if n in others and n not in far})
        seen = {n for r in around for n, other in ((r.source, r.target), (r.target, r.source))
                if n in far and others.get(other) in gone}
        far = [n for n in far if n not in seen]
    return GraphSlice(entities, relations, load_names(far))


def _existing(conn: apsw.Connection, ids: Iterable[int]) -> set[int]:
    members, params = bind_members(list(ids))
    return {row[0] for row in conn.execute(f"SELECT id FROM entities WHERE id IN {members}", params)}


def _ids(conn: apsw.Connection, names: set[str]) -> dict[str, int]:
    """``{name: id}`` of the names that are entities."""
    if not names:
        return {}
    members, params = bind_members(list(names))
    return dict(conn.execute(f"SELECT name, id FROM entities WHERE name IN {members}", params))


def _load_ids(conn: apsw.Connection, ids: list[int], *, ordered: bool = False) -> list[Entity]:
    """The entities ``ids`` with their observations: in rowid order, or with ``ordered`` in the
    order of ``ids``."""
    if not ids:
        return []
    members, params = bind_members(ids)
    entities = load_entities(conn, f"WHERE e.id IN {members}", params)
    if not ordered:
        return entities
    by_name = {e.name: e for e in entities}
    names = dict(conn.execute(f"SELECT id, name FROM entities WHERE id IN {members}", params))
    return [by_name[names[i]] for i in ids if i in names]


def _load_names(conn: apsw.Connection, names: list[str]) -> list[Entity]:
    if not names:
        return []
    members, params = bind_members(names)
    return load_entities(conn, f"WHERE e.name IN {members}", params)
