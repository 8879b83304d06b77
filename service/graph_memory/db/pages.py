"""Pages and ``since`` for read_graph and search_nodes: the rules, for every backend, and SQLite's rows.

Pages are cut on stable keys, never offsets (positions: :mod:`graph_memory.paging`), so a row
committed before the first page is neither skipped nor repeated, whatever is written between
pages; rows written later may or may not appear.

read_graph
    Entities in id (creation) order, then relations in id order; ``limit`` counts both (a page holds
    at most ``limit`` entities and relations together). ``neighbors`` is always empty. With
    ``since``: the entities whose ``updated_at`` (created, or an observation added, edited or
    removed) is at or after it, and the relations created or re-weighed at or after it.
search_nodes
    ``limit`` counts matched entities, as it always has. Each page holds its matches, the
    relations touching them that no earlier page held (a relation between two matches comes with
    the earlier one), and the neighbors (far ends that match nothing) no earlier page held.
    ``substring`` pages in id order keyed on the last entity id; the ranked modes rank every
    match again for each page and send the best ones that no earlier page sent as matches (the
    cursor never carries the ranking: a broad query's order took over 100,000 characters), so a
    page costs as much as the first and its cursor grows only with what was sent. With ``since``, only
    matches changed at or after it count. What "an earlier page held" means is what it sent: the
    cursor carries the ids sent as matches and as neighbors, and those a page left for a later
    one as matches (:class:`~graph_memory.paging.SearchPosition`), so a write between pages that
    makes an entity match or stop matching, or adds or removes a relation, makes no page skip
    or repeat a relation or neighbor that existed before the first page. An entity sent as a
    neighbor that comes to match later is not sent again, but its relations come with its page.
    Every mode's pages follow the graph as it is: a match that stops matching before its page is
    left out with the relations only it brought, unless an earlier page sent a relation to it
    (then it comes as a neighbor); a write between pages may change the ranked order of what is
    still to come, never what was sent. SQLite gives a new entity the
    id of a deleted one when that was the largest: an id an earlier page sent names an entity
    created after that page then, which is told by its ``created_at`` (the cursor carries the
    moment of the page that issued it) and never taken for the one that was sent. A far end
    promised to a later page as a match that stops matching comes as a neighbor while it
    exists, also one created after the first page.

Concatenating the pages (entities, relations and neighbors each in page order) gives the
unpaged reply's entities in the same order and its relations and neighbors each exactly once.

These rules are written once, here, for every backend (:func:`read_page`, :func:`search_page`):
a backend supplies its rows through a :class:`PageSource` (SQLite: :class:`SqlitePages` below;
PostgreSQL: :class:`graph_memory.db.postgres.pages.PostgresPages`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Protocol, cast

import apsw

from graph_memory.db import search
from graph_memory.db.graph import bind_members, load_entities, relations_touching, unique
from graph_memory.models import Entity, GraphSlice, Mode, Relation, relations_from_rows
from graph_memory.paging import ReadPosition, SearchPosition

# The columns of a relation row both sources read for read_graph pages.
RELATION_COLUMNS = "id, from_name, to_name, relation_type, weight"

IdTest = Callable[[set[int]], set[int]]


class PageSource(Protocol):
    """The rows a backend gives the page rules, inside the one transaction of the call. Entity
    and relation ids grow in creation order; times are the backend's stored strings/instants."""

    def now(self) -> str:
        """The database's clock as ``created_at`` holds it (UTC): the first page's moment."""
        ...

    def entity_ids(self, after: int, since: str | None, limit: int | None) -> list[int]:
        """Ids over ``after`` in id order (with ``since``: ``updated_at`` at or after it), at most ``limit``."""
        ...

    def relations(self, after: int, since: str | None, limit: int | None) -> tuple[list[int], list[Relation]]:
        """Ids and relations over id ``after`` in id order (with ``since``: created or re-weighed at
        or after it), at most ``limit``."""
        ...

    def substring_page(self, query: str, after: int, since: str | None,
                       limit: int | None) -> tuple[list[int], list[Entity], bool]:
        """The next ``limit`` (None: all) ``substring`` matches over id ``after`` (with ``since``:
        changed at or after it): their ids, the entities in the same order, whether more follow.

        Raises:
            InvalidQuery: as :func:`graph_memory.db.search.search`.
        """
        ...

    def substring_among(self, query: str, ids: set[int], since: str | None) -> set[int]:
        """Which of ``ids`` the ``substring`` query matches now (and changed at or after ``since``)."""
        ...

    def match_ids(self, query: str, mode: Mode) -> list[int]:
        """Every match of a ranked ``mode``, best first.

        Raises:
            InvalidQuery: as :func:`graph_memory.db.search.search`.
        """
        ...

    def changed(self, ids: list[int], since: str) -> set[int]:
        """Those of ``ids`` (or more: the caller intersects) whose ``updated_at`` is at or after ``since``."""
        ...

    def existing(self, ids: Iterable[int]) -> set[int]:
        """Those of ``ids`` whose entities exist."""
        ...

    def created_after(self, ids: Iterable[int], moment: str) -> set[int]:
        """Those of ``ids`` whose entities were created after ``moment`` (unknown times never are)."""
        ...

    def touching(self, names: list[str]) -> list[Relation]:
        """The relations with an end among ``names``, in creation order."""
        ...

    def ids(self, names: set[str]) -> dict[str, int]:
        """``{name: entity id}`` of those of ``names`` that are entities."""
        ...

    def load_names(self, names: list[str]) -> list[Entity]:
        """Those entities, with observations, in the order given (unknown names skipped)."""
        ...

    def load_ids(self, ids: list[int], *, ordered: bool = False) -> list[Entity]:
        """The entities ``ids`` with observations: in id order, or with ``ordered`` in the order of ``ids``."""
        ...


def read_page(source: PageSource, since: str | None, after: ReadPosition | None,
              limit: int | None) -> tuple[GraphSlice, ReadPosition | None]:
    """One page of read_graph (everything left when ``limit`` is None) and where the next starts
    (None: this was the last)."""
    position = after or ReadPosition("entities", 0)
    room = limit
    entities: list[Entity] = []
    if position.phase == "entities":
        ids = source.entity_ids(position.last_id, since, None if room is None else room + 1)
        if room is not None and len(ids) > room:
            ids = ids[:room]
            return GraphSlice(source.load_ids(ids), [], []), ReadPosition("entities", ids[-1])
        entities = source.load_ids(ids)
        if room is not None:
            room -= len(ids)
        position = ReadPosition("relations", 0)
    ids, relations = source.relations(position.last_id, since, None if room is None else room + 1)
    if room is None or len(ids) <= room:
        return GraphSlice(entities, relations, []), None
    last = ids[room - 1] if room else position.last_id
    return GraphSlice(entities, relations[:room], []), ReadPosition("relations", last)


def search_page(source: PageSource, query: str, mode: Mode, since: str | None, after: SearchPosition | None,
                limit: int | None) -> tuple[GraphSlice, SearchPosition | None]:
    """One page of search_nodes (every match left when ``limit`` is None) and where the next
    starts (None: this was the last).

    Raises:
        InvalidQuery: as :func:`graph_memory.db.search.search`.
    """
    now = source.now()
    before = _without_reused_ids(source, after) if after is not None else SearchPosition(first=now)
    found, delivered = _search_page(source, query, mode, since, before, limit)
    return found, None if delivered is None else replace(delivered, last=now)


def _without_reused_ids(source: PageSource, before: SearchPosition) -> SearchPosition:
    """``before`` without the ids that name another entity now: SQLite gives a deleted newest
    entity's id to the next one, so an id an earlier page sent (or promised) whose entity was
    created after that page names an entity no page sent (found by QA: such a new match was
    taken for the neighbor sent before, and never came)."""
    reused = source.created_after(before.matches | before.neighbors | before.promised, before.last or before.first)
    if not reused:
        return before
    return replace(before, matches=before.matches - reused, neighbors=before.neighbors - reused,
                   promised=before.promised - reused)


def _search_page(source: PageSource, query: str, mode: Mode, since: str | None, before: SearchPosition,
                 limit: int | None) -> tuple[GraphSlice, SearchPosition | None]:
    if mode == "substring":
        # Keyed on the id: the page's matches come from the index with LIMIT, and only the ends
        # of its relations are checked against the query, never every match.
        page, entities, more = source.substring_page(query, before.after, since, limit)

        def later(candidates: set[int]) -> set[int]:   # the matches a later page will bring
            beyond = {i for i in candidates if i > page[-1]} if more else set()
            return source.substring_among(query, beyond, since)

        # a promised match whose turn has come and that is not on this page stopped matching
        turn = {i for i in before.promised if not more or i <= page[-1]} - set(page)
        due = source.existing(turn)
        found, delivered = page_slice(source, entities, page, replace(before, promised=before.promised - turn),
                                      later, due)
        return found, replace(delivered, after=page[-1]) if more else None
    # The ranked modes rank the matches again for every page and send the best ones no earlier
    # page sent: a cursor carries what was sent, never the ranking (the order of a broad query's
    # tens of thousands of matches made cursors of over 100,000 characters).
    todo = source.match_ids(query, mode)
    if since is not None:
        recent = source.changed(todo, since)
        todo = [i for i in todo if i in recent]
    remaining = [i for i in todo if i not in before.matches]
    page = remaining if limit is None else remaining[:limit]
    rest = remaining[len(page):]
    # a far end left for a later page as a match that no longer matches: sent now, as a neighbor
    gone = before.promised - set(remaining)
    due = source.existing(gone)
    found, delivered = page_slice(source, source.load_ids(page, ordered=True), page,
                                  replace(before, promised=before.promised - gone), set(rest).intersection, due)
    return found, delivered if rest else None


def page_slice(source: PageSource, entities: list[Entity], page: list[int], before: SearchPosition, later: IdTest,
               due: set[int]) -> tuple[GraphSlice, SearchPosition]:
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
    """
    names = [e.name for e in entities]
    inside = set(names)
    near = source.touching(names)
    id_of = source.ids({n for r in near for n in (r.source, r.target) if n not in inside})
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
    return GraphSlice(shown, relations, source.load_names(far) + source.load_ids(late)), delivered


def cursor_secret(conn: apsw.Connection) -> bytes:
    """This database's key for signing cursors (migrations/0006)."""
    row = conn.execute("SELECT secret FROM cursor_secret WHERE id = 1").fetchone()
    return bytes(row[0]) if row is not None else b""


class SqlitePages:
    """The :class:`PageSource` of a SQLite connection."""

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn

    def now(self) -> str:
        return cast(str, self.conn.execute("SELECT strftime('%Y-%m-%dT%H:%M:%fZ', 'now')").fetchall()[0][0])

    def entity_ids(self, after: int, since: str | None, limit: int | None) -> list[int]:
        changed = " AND updated_at >= ?" if since is not None else ""
        return [row[0] for row in self.conn.execute(
            f"SELECT id FROM entities WHERE id > ?{changed} ORDER BY id{limit_clause(limit)}",
            keyset_params(after, since))]

    def relations(self, after: int, since: str | None, limit: int | None) -> tuple[list[int], list[Relation]]:
        changed = " AND coalesce(updated_at, created_at) >= ?" if since is not None else ""
        rows = cast(list[tuple[int, str, str, str, float]], self.conn.execute(
            f"SELECT {RELATION_COLUMNS} FROM relations WHERE id > ?{changed} ORDER BY id{limit_clause(limit)}",
            keyset_params(after, since)).fetchall())
        return [row[0] for row in rows], relations_from_rows(row[1:] for row in rows)

    def substring_page(self, query: str, after: int, since: str | None,
                       limit: int | None) -> tuple[list[int], list[Entity], bool]:
        ids = search.substring_ids(self.conn, query, after=after, limit=None if limit is None else limit + 1,
                                   since=since)
        page = ids if limit is None else ids[:limit]
        return page, self.load_ids(page), len(ids) > len(page)

    def substring_among(self, query: str, ids: set[int], since: str | None) -> set[int]:
        return search.substring_among(self.conn, query, ids, since)

    def match_ids(self, query: str, mode: Mode) -> list[int]:
        return search.match_ids(self.conn, query, mode)

    def changed(self, ids: list[int], since: str) -> set[int]:
        # every recent entity: one indexed range, cheaper than binding thousands of ids
        return {row[0] for row in self.conn.execute("SELECT id FROM entities WHERE updated_at >= ?", (since,))}

    def existing(self, ids: Iterable[int]) -> set[int]:
        members, params = bind_members(list(ids))
        return {row[0] for row in self.conn.execute(f"SELECT id FROM entities WHERE id IN {members}", params)}

    def created_after(self, ids: Iterable[int], moment: str) -> set[int]:
        # unknown creation times ('') are older than any moment
        members, params = bind_members(list(ids))
        return {row[0] for row in self.conn.execute(
            f"SELECT id FROM entities WHERE id IN {members} AND created_at > ?", (*params, moment))}

    def touching(self, names: list[str]) -> list[Relation]:
        return relations_touching(self.conn, names)

    def ids(self, names: set[str]) -> dict[str, int]:
        if not names:
            return {}
        members, params = bind_members(list(names))
        return dict(self.conn.execute(f"SELECT name, id FROM entities WHERE name IN {members}", params))

    def load_ids(self, ids: list[int], *, ordered: bool = False) -> list[Entity]:
        if not ids:
            return []
        members, params = bind_members(ids)
        entities = load_entities(self.conn, f"WHERE e.id IN {members}", params)
        if not ordered:
            return entities
        by_name = {e.name: e for e in entities}
        names = dict(self.conn.execute(f"SELECT id, name FROM entities WHERE id IN {members}", params))
        return [by_name[names[i]] for i in ids if i in names]

    def load_names(self, names: list[str]) -> list[Entity]:
        if not names:
            return []
        members, params = bind_members(names)
        return load_entities(self.conn, f"WHERE e.name IN {members}", params)


def limit_clause(limit: int | None) -> str:
    """`` LIMIT n`` for a page's query (both backends' SQL), or nothing for no limit."""
    return "" if limit is None else f" LIMIT {int(limit):d}"


def keyset_params(after: int, since: str | None) -> tuple[object, ...]:
    """The parameters of a page's ``id > ?`` (and ``… >= since``) condition, in that order."""
    return (after,) if since is None else (after, since)
