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
    matches changed at or after it count. What "an earlier page held" means is what it sent: the
    cursor carries the ids sent as matches and as neighbors, and those a page left for a later
    one as matches (:class:`~graph_memory.paging.SearchPosition`), so a write between pages that
    makes an entity match or stop matching, or adds or removes a relation, makes no page skip
    or repeat a relation or neighbor that existed before the first page. An entity sent as a
    neighbor that comes to match later is not sent again, but its relations come with its page.
    The ranked modes keep the first page's matches: each comes on its page while it exists,
    matching or not. ``substring`` pages follow the graph as it is: a match that stops matching
    before its page is left out with the relations only it brought, unless an earlier page sent
    a relation to it (then it comes with its page as a neighbor). SQLite gives a new entity the
    id of a deleted one when that was the largest: an id seen by an earlier page names an entity
    created after the first page then, which is told by its ``created_at`` and never taken for
    the one that was seen.

Concatenating the pages (entities, relations and neighbors each in page order) gives the
unpaged reply's entities in the same order and its relations and neighbors each exactly once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
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
    before = after or SearchPosition(first=_now(conn))
    if mode == "substring":
        # Keyed on rowid: the page's matches come from the index with LIMIT, and only the ends
        # of its relations are checked against the query, never every match.
        ids = search.substring_ids(conn, query, after=before.after, limit=None if limit is None else limit + 1,
                                   since=since)
        page = ids if limit is None else ids[:limit]
        more = len(ids) > len(page)

        def later(candidates: set[int]) -> set[int]:   # the matches a later page will bring
            beyond = {i for i in candidates if i > page[-1]} if more else set()
            return search.substring_among(conn, query, beyond, since)

        # a promised match whose turn has come and that is not on this page stopped matching
        turn = {i for i in before.promised if not more or i <= page[-1]} - set(page)
        due = _existing(conn, turn, before.first)
        found, delivered = _page_slice(conn, _load_ids(conn, page), page,
                                       replace(before, promised=before.promised - turn), later, due)
        return found, replace(delivered, after=page[-1]) if more else None
    # The ranked modes rank every match once, at the first page, and freeze that order: a match
    # of it comes on its page while it exists, whether it still matches or not.
    if before.rest is None:
        todo = search.match_ids(conn, query, mode)
        if since is not None:
            recent = {row[0] for row in conn.execute("SELECT id FROM entities WHERE updated_at >= ?", (since,))}
            todo = [i for i in todo if i in recent]
    else:   # what no longer exists is gone
        alive = _existing(conn, before.rest, before.first)
        todo = [i for i in before.rest if i in alive]
    page = todo if limit is None else todo[:limit]
    rest = todo[len(page):]
    found, delivered = _page_slice(conn, _load_ids(conn, page, ordered=True), page, before, set(rest).intersection,
                                   set())
    # rest holds what is promised (a match of the ranking comes while it exists): nothing to carry
    return found, replace(delivered, rest=tuple(rest), promised=frozenset()) if rest else None


def _now(conn: apsw.Connection) -> str:
    """The database's clock as entities' ``created_at`` holds it (UTC, milliseconds)."""
    return cast(str, conn.execute("SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now')").fetchall()[0][0])


IdTest = Callable[[set[int]], set[int]]


def _page_slice(conn: apsw.Connection, entities: list[Entity], page: list[int], before: SearchPosition,
                later: IdTest, due: set[int]) -> tuple[GraphSlice, SearchPosition]:
    """:func:`page_slice` on SQLite."""
    return page_slice(entities, page, before, later, due, touching=lambda names: relations_touching(conn, names),
                      ids=lambda names: _ids(conn, names), load_names=lambda names: _load_names(conn, names),
                      load_ids=lambda ids: _load_ids(conn, ids))


def page_slice(entities: list[Entity], page: list[int], before: SearchPosition, later: IdTest, due: set[int], *,
               touching: Callable[[list[str]], list[Relation]],
               ids: Callable[[set[str]], dict[str, int]],
               load_names: Callable[[list[str]], list[Entity]],
               load_ids: Callable[[list[int]], list[Entity]]) -> tuple[GraphSlice, SearchPosition]:
    """The page of the matches ``entities`` (ids ``page``, in the same order): with the relations
    touching them whose other end no earlier page sent as a match (such a relation came with that
    page), and as neighbors the far ends of those relations that neither a later page brings as
    matches (``later`` takes a set of entity ids and returns those it will) nor an earlier page
    sent, then the ``due`` ones (promised to this page as matches, not on it: they stopped
    matching; ids of entities that still exist as they were). A match an earlier page sent as a
    neighbor is not sent again, but its relations come with this page as any match's do.
    ``before``: what the earlier pages sent (:class:`SearchPosition`). Returns the page and
    ``before`` with this page's matches, neighbors and promises added, and the kept promises
    taken off.

    Backend-neutral: a backend supplies ``touching(names)`` (the relations with an end among the
    names, in creation order), ``ids(names)`` (``{name: entity id}`` of those that are entities),
    ``load_names(names)`` (those entities, with observations, in the order given) and
    ``load_ids(ids)`` (the same by id, in id order).
    """
    names = [e.name for e in entities]
    inside = set(names)
    near = touching(names)
    id_of = ids({n for r in near for n in (r.source, r.target) if n not in inside})
    sent = before.matches
    relations = [r for r in near if id_of.get(r.source) not in sent and id_of.get(r.target) not in sent]
    ends = {n: id_of[n] for r in relations for n in (r.source, r.target) if n not in inside and n in id_of}
    coming = later(set(ends.values()))
    far = unique(n for r in relations for n in (r.source, r.target)
                 if n in ends and ends[n] not in coming and ends[n] not in before.neighbors)
    neighbors = {ends[n] for n in far}
    late = sorted(due - neighbors - before.neighbors)
    delivered = replace(before, matches=sent | set(page), neighbors=before.neighbors | neighbors | set(late),
                        promised=(before.promised - set(page) - neighbors - due) | coming)
    shown = [entity for entity, i in zip(entities, page, strict=True) if i not in before.neighbors]
    return GraphSlice(shown, relations, load_names(far) + load_ids(late)), delivered


def _existing(conn: apsw.Connection, ids: Iterable[int], first: str) -> set[int]:
    """Those of ``ids`` whose entities exist and were created by ``first`` (the first page's
    moment): SQLite gives a new row the id of a deleted one when it was the largest, and that
    entity is not the one the first page saw (unknown times, '', are older than any)."""
    members, params = bind_members(list(ids))
    return {row[0] for row in conn.execute(f"SELECT id FROM entities WHERE id IN {members} AND created_at <= ?",
                                           (*params, first))}


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
