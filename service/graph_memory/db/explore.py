"""Bounded reads for looking at the graph (``graph-memory view``, ``export --format mermaid|dot``).

Every function here answers with a bounded number of indexed queries, each returning a bounded
number of rows, whatever the size of the graph — except where a caller passes ``None`` as the
cap (the export of a whole neighbourhood) and the two overview counts, which scan a table once
(:func:`type_counts`, :func:`most_connected`; the viewer keeps their answer until the graph
changes). The indexes used: ``entities.name`` (unique), ``observations (entity_id, content)``
(unique), ``relations (from_name, to_name, relation_type)`` (unique), ``relations (to_name)``
and the rowids (creation order).

Nothing here writes, so every function runs on a read-only connection.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, cast

import apsw

from graph_memory.db.graph import bind_members
from graph_memory.models import Relation

_NO_LIMIT = -1  # SQLite's LIMIT for "all rows"
_RELATION = "from_name, to_name, relation_type, weight"


@dataclass(frozen=True, slots=True)
class Node:
    """An entity of a :class:`Neighborhood`: ``entity_type`` None when a (legacy, dangling) relation
    names it but no entity has that name; ``hops`` from the nearest center; ``degree``: every
    relation touching it in the graph (out + in; a self-relation counts twice); ``hidden``: how
    many of those the neighbourhood does not show."""

    name: str
    entity_type: str | None
    hops: int
    degree: int
    hidden: int

    def to_dict(self) -> dict[str, Any]:
        """``{"name", "entityType", "hops", "degree", "hidden"}``."""
        return {"name": self.name, "entityType": self.entity_type, "hops": self.hops, "degree": self.degree,
                "hidden": self.hidden}


@dataclass(slots=True)
class Neighborhood:
    """The entities within ``hops`` relations of the ``centers`` (at most the cap, nearest first)
    and every relation among them. ``truncated``: the cap left out entities that were in reach;
    ``hidden``: relations touching a shown entity that are not shown (their other end left out)."""

    centers: list[str]
    nodes: list[Node]
    relations: list[Relation]
    truncated: bool = False

    @property
    def hidden(self) -> int:
        """Relations of the shown entities left out of the picture."""
        return sum(n.hidden for n in self.nodes)

    def to_dict(self) -> dict[str, Any]:
        """``{"centers", "nodes", "relations", "truncated", "hidden"}``."""
        return {"centers": list(self.centers), "nodes": [n.to_dict() for n in self.nodes],
                "relations": [_relation_dict(r) for r in self.relations], "truncated": self.truncated,
                "hidden": self.hidden}


def _relation_dict(r: Relation) -> dict[str, Any]:
    """A relation with its weight always present (the view shows weights)."""
    return {"from": r.source, "to": r.target, "relationType": r.relation_type, "weight": r.weight}


def _limit(cap: int | None) -> int:
    return _NO_LIMIT if cap is None else max(0, int(cap))


def neighborhood(conn: apsw.Connection, names: list[str], hops: int, max_entities: int | None) -> Neighborhood:
    """The neighbourhood of the entities ``names`` (unknown names skipped): breadth first up to
    ``hops`` relations away (either direction), at most ``max_entities`` entities (None: all).

    Bounded: each expanded entity reads at most ``max_entities`` relations each way, the relations
    among the chosen entities are read by index seeks over pairs of them, and two indexed counts per
    entity give its degree.
    """
    cap = _limit(max_entities)
    members, params = bind_members(names)
    known = {row[0] for row in conn.execute(f"SELECT name FROM entities WHERE name IN {members}", params)} \
        if names else set()

    def far_ends(name: str) -> Iterator[str]:
        for sql in ("SELECT to_name FROM relations WHERE from_name = ? LIMIT ?",
                    "SELECT from_name FROM relations WHERE to_name = ? LIMIT ?"):
            for (other,) in conn.execute(sql, (name, cap)):
                yield cast(str, other)

    return walk_neighborhood(
        [n for n in dict.fromkeys(names) if n in known], hops, max_entities, far_ends,
        lambda chosen: _relations_among(conn, chosen), lambda chosen: _types(conn, chosen),
        lambda name: _degree(conn, name))


def walk_neighborhood(centers: list[str], hops: int, max_entities: int | None,
                      far_ends: Callable[[str], Iterable[str]],
                      relations_among: Callable[[list[str]], list[Relation]],
                      types: Callable[[list[str]], dict[str, str]],
                      degree: Callable[[str], int]) -> Neighborhood:
    """The backend-neutral part of :func:`neighborhood`: from the existing ``centers``, breadth
    first up to ``hops`` relations away, at most ``max_entities`` entities (nearest first; None: all),
    then each chosen entity as a :class:`Node` with its distance, degree and the relations left out.

    A backend supplies its reads: ``far_ends(name)`` the other ends of the entity's relations
    (outgoing, then incoming, each capped at ``max_entities``; read lazily, only as far as the walk
    needs), ``relations_among(names)`` the relations with both ends among them, ``types(names)``
    their entity types, ``degree(name)`` how many relations the entity has.
    """
    depth: dict[str, int] = {}
    for name in centers:
        if max_entities is None or len(depth) < max_entities:
            depth[name] = 0
    truncated = len(depth) < len(centers)
    frontier = list(depth)
    for hop in range(1, max(0, hops) + 1):
        following: list[str] = []
        for name in frontier:
            for other in far_ends(name):
                if other in depth:
                    continue
                if max_entities is not None and len(depth) >= max_entities:
                    truncated = True  # full: the entities nearer the centers are kept
                    break
                depth[other] = hop
                following.append(other)
            if truncated:
                break
        frontier = following
        if not frontier or truncated:
            break
    chosen = list(depth)
    relations = relations_among(chosen)
    drawn: dict[str, int] = dict.fromkeys(chosen, 0)
    for r in relations:
        drawn[r.source] += 1
        drawn[r.target] += 1
    names_types = types(chosen)
    nodes = []
    for name in chosen:
        entity_degree = degree(name)
        nodes.append(Node(name, names_types.get(name), depth[name], entity_degree,
                          max(0, entity_degree - drawn[name])))
    return Neighborhood(centers, nodes, relations, truncated)


def _relations_among(conn: apsw.Connection, names: list[str]) -> list[Relation]:
    """Every relation whose both ends are among ``names``, in rowid order (index seeks on
    ``(from_name, to_name)`` pairs)."""
    if not names:
        return []
    members, params = bind_members(names)
    rows = cast(list[tuple[int, str, str, str, float]], conn.execute(
        f"SELECT id, {_RELATION} FROM relations WHERE from_name IN {members} AND to_name IN {members}",
        params + params).fetchall())
    rows.sort()
    return [Relation(source, target, kind, weight) for _, source, target, kind, weight in rows]


def _degree(conn: apsw.Connection, name: str) -> int:
    row = conn.execute("SELECT (SELECT count(*) FROM relations WHERE from_name = ?1) "
                       "+ (SELECT count(*) FROM relations WHERE to_name = ?1)", (name,)).fetchone()
    return int(cast(int, row[0])) if row else 0


def _types(conn: apsw.Connection, names: list[str]) -> dict[str, str]:
    """``{name: entity type}`` for the names that are entities."""
    if not names:
        return {}
    members, params = bind_members(names)
    return dict(cast(list[tuple[str, str]], conn.execute(
        f"SELECT name, entity_type FROM entities WHERE name IN {members}", params).fetchall()))


# -- one entity ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Observation:
    """One observation with its times (ISO 8601 UTC, as stored)."""

    content: str
    created_at: str
    updated_at: str

    def to_dict(self) -> dict[str, Any]:
        """``{"content", "createdAt", "updatedAt"}``."""
        return {"content": self.content, "createdAt": self.created_at, "updatedAt": self.updated_at}


@dataclass(slots=True)
class EntityPage:
    """One entity as the viewer shows it: its observations (insertion order), the relations from
    it and to it (by the other end's name), ``max_items`` of each from position ``offset`` on,
    with the totals, and the types of the entities at their other ends."""

    name: str
    entity_type: str
    created_at: str
    updated_at: str
    observations: list[Observation]
    observations_total: int
    outgoing: list[Relation]
    outgoing_total: int
    incoming: list[Relation]
    incoming_total: int
    neighbor_types: dict[str, str] = field(default_factory=dict)
    offset: int = 0

    def to_dict(self) -> dict[str, Any]:
        """The viewer's JSON shape of the page."""
        return {
            "name": self.name, "entityType": self.entity_type, "createdAt": self.created_at,
            "updatedAt": self.updated_at, "offset": self.offset,
            "observations": [o.to_dict() for o in self.observations], "observationsTotal": self.observations_total,
            "outgoing": [_relation_dict(r) for r in self.outgoing], "outgoingTotal": self.outgoing_total,
            "incoming": [_relation_dict(r) for r in self.incoming], "incomingTotal": self.incoming_total,
            "neighborTypes": dict(self.neighbor_types),
        }


def entity_page(conn: apsw.Connection, name: str, max_items: int, offset: int = 0) -> EntityPage | None:
    """The entity ``name`` (exact) as :class:`EntityPage` (each list from position ``offset``,
    ``max_items`` at most), or None when there is none."""
    head = conn.execute("SELECT id, entity_type, created_at, updated_at FROM entities WHERE name = ?",
                        (name,)).fetchone()
    if head is None:
        return None
    entity_id, entity_type, created_at, updated_at = cast(tuple[int, str, str, str], head)
    cap = _limit(max_items)
    # The (entity_id, content) index finds the rows; sorting one entity's rows by id is bounded by them.
    observations = [Observation(*row) for row in conn.execute(
        "SELECT content, created_at, updated_at FROM observations WHERE entity_id = ? ORDER BY id LIMIT ? OFFSET ?",
        (entity_id, cap, offset))]
    outgoing = [Relation(*row) for row in conn.execute(
        f"SELECT {_RELATION} FROM relations WHERE from_name = ? ORDER BY to_name, relation_type LIMIT ? OFFSET ?",
        (name, cap, offset))]
    incoming = [Relation(*row) for row in conn.execute(
        f"SELECT {_RELATION} FROM relations WHERE to_name = ? ORDER BY from_name, relation_type LIMIT ? OFFSET ?",
        (name, cap, offset))]

    def count(sql: str, value: object) -> int:
        row = conn.execute(sql, (value,)).fetchone()
        return int(cast(int, row[0])) if row else 0

    others = list(dict.fromkeys([r.target for r in outgoing] + [r.source for r in incoming]))
    return EntityPage(
        name, entity_type, created_at, updated_at, observations,
        count("SELECT count(*) FROM observations WHERE entity_id = ?", entity_id),
        outgoing, count("SELECT count(*) FROM relations WHERE from_name = ?", name),
        incoming, count("SELECT count(*) FROM relations WHERE to_name = ?", name),
        _types(conn, others), offset)


# -- the overview -------------------------------------------------------------------------------


def type_counts(conn: apsw.Connection, limit: int) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """``(entity types, relation types)``, each the ``limit`` most frequent ``(type, count)``
    (most first, then by name). One scan of each table."""
    def by(table: str, column: str) -> list[tuple[str, int]]:
        return cast(list[tuple[str, int]], conn.execute(
            f"SELECT {column}, count(*) AS n FROM {table} GROUP BY {column} ORDER BY n DESC, {column} LIMIT ?",
            (_limit(limit),)).fetchall())

    return by("entities", "entity_type"), by("relations", "relation_type")


def totals(conn: apsw.Connection) -> dict[str, int]:
    """``{"entities", "observations", "relations"}`` row counts."""
    row = conn.execute("SELECT (SELECT count(*) FROM entities), (SELECT count(*) FROM observations), "
                       "(SELECT count(*) FROM relations)").fetchone()
    assert row is not None
    return {"entities": int(cast(int, row[0])), "observations": int(cast(int, row[1])),
            "relations": int(cast(int, row[2]))}


def most_connected(conn: apsw.Connection, limit: int) -> list[tuple[str, str | None, int]]:
    """The ``limit`` entity names with the most relations (in + out) as ``(name, type or None,
    degree)``, most first, then by name. Reads the two relation indexes once each (covering)."""
    rows = cast(list[tuple[str, int]], conn.execute(
        "SELECT name, sum(n) AS degree FROM ("
        " SELECT from_name AS name, count(*) AS n FROM relations GROUP BY from_name"
        " UNION ALL SELECT to_name, count(*) FROM relations GROUP BY to_name"
        ") GROUP BY name ORDER BY degree DESC, name LIMIT ?", (_limit(limit),)).fetchall())
    types = _types(conn, [name for name, _ in rows])
    return [(name, types.get(name), int(n)) for name, n in rows]


ChangeKind = Literal["entity", "observation", "relation"]


@dataclass(frozen=True, slots=True)
class Change:
    """A recent addition: an entity created, an observation added (``text``: its content) or a
    relation created (``text``: its type, ``other``: the entity it points to), at ``at``."""

    kind: ChangeKind
    at: str
    entity: str
    text: str = ""
    other: str = ""

    def to_dict(self) -> dict[str, Any]:
        """``{"kind", "at", "entity", "text", "other"}``."""
        return {"kind": self.kind, "at": self.at, "entity": self.entity, "text": self.text, "other": self.other}


def recent_changes(conn: apsw.Connection, limit: int) -> list[Change]:
    """The ``limit`` latest additions (entities, observations, relations), newest first, read
    backwards along each table's rowid (creation order; an observation edited in place keeps
    its place)."""
    cap = _limit(limit)
    changes = [Change("entity", at, name) for name, at in conn.execute(
        "SELECT name, created_at FROM entities ORDER BY id DESC LIMIT ?", (cap,))]
    changes += [Change("observation", at, name, content) for name, content, at in conn.execute(
        "SELECT e.name, o.content, o.created_at FROM (SELECT entity_id, content, created_at FROM observations "
        "ORDER BY id DESC LIMIT ?) o JOIN entities e ON e.id = o.entity_id", (cap,))]
    changes += [Change("relation", at, source, kind, target) for source, kind, target, at in conn.execute(
        "SELECT from_name, relation_type, to_name, created_at FROM relations ORDER BY id DESC LIMIT ?", (cap,))]
    changes.sort(key=lambda c: c.at, reverse=True)
    return changes[:cap] if cap >= 0 else changes
