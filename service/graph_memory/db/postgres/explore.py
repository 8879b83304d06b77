"""Bounded reads for looking at the graph on PostgreSQL (``graph-memory view``, ``export --format
mermaid|dot``): the answers of :mod:`graph_memory.db.explore` (the SQLite backend's, where the
bounds are described), in the same order. Lookups by name go through the sha256 keys
(``name_key``, ``from_key``, ``to_key``) and their indexes; unknown times are shown as ``''``,
as SQLite stores them.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from graph_memory.db.explore import Change, EntityPage, Neighborhood, Observation, walk_neighborhood
from graph_memory.db.postgres.graph import relations_of, stored_time
from graph_memory.db.postgres.text import decode, key
from graph_memory.models import Relation

if TYPE_CHECKING:
    from graph_memory.db.postgres.graph import PostgresGraph

_RELATION = "from_name, to_name, relation_type, weight"


def _cap(cap: int | None) -> int | None:
    """A LIMIT parameter: None (LIMIT NULL) is every row, as SQLite's -1."""
    return None if cap is None else max(0, int(cap))


def _time(column: str) -> str:
    return f"coalesce({stored_time(column)}, '')"


def neighborhood(graph: PostgresGraph, names: list[str], hops: int, max_entities: int | None) -> Neighborhood:
    """As :func:`graph_memory.db.explore.neighborhood` (outgoing relations by the other end's
    name, incoming ones in creation order, as SQLite's indexes give them)."""
    cap = _cap(max_entities)
    known = {decode(n) for (n,) in graph._rows("SELECT name FROM entities WHERE name_key = ANY(%s)",
                                                ([key(n) for n in names],))} if names else set()

    def far_ends(name: str) -> Iterator[str]:
        for sql in ("SELECT to_name FROM relations WHERE from_key = %s ORDER BY to_name, relation_type LIMIT %s",
                    "SELECT from_name FROM relations WHERE to_key = %s ORDER BY id LIMIT %s"):
            for (stored,) in graph._rows(sql, (key(name), cap)):
                yield decode(stored)

    return walk_neighborhood(
        [n for n in dict.fromkeys(names) if n in known], hops, max_entities, far_ends,
        lambda chosen: _relations_among(graph, chosen), lambda chosen: _types(graph, chosen),
        lambda name: _degree(graph, name))


def _relations_among(graph: PostgresGraph, names: list[str]) -> list[Relation]:
    """Every relation whose both ends are among ``names``, in creation order."""
    if not names:
        return []
    keys = [key(n) for n in names]
    return relations_of(graph._rows(
        f"SELECT {_RELATION} FROM relations WHERE from_key = ANY(%s) AND to_key = ANY(%s) ORDER BY id", (keys, keys)))


def _degree(graph: PostgresGraph, name: str) -> int:
    row = graph._one("SELECT (SELECT count(*) FROM relations WHERE from_key = %s) "
                     "+ (SELECT count(*) FROM relations WHERE to_key = %s)", (key(name), key(name)))
    return int(row[0]) if row else 0


def _types(graph: PostgresGraph, names: list[str]) -> dict[str, str]:
    """``{name: entity type}`` for the names that are entities."""
    if not names:
        return {}
    return {decode(n): decode(t) for n, t in graph._rows(
        "SELECT name, entity_type FROM entities WHERE name_key = ANY(%s)", ([key(n) for n in names],))}


def entity_page(graph: PostgresGraph, name: str, max_items: int, offset: int = 0) -> EntityPage | None:
    """As :func:`graph_memory.db.explore.entity_page`."""
    head = graph._one(f"SELECT id, entity_type, {_time('created_at')}, {_time('updated_at')} FROM entities "
                      f"WHERE name_key = %s", (key(name),))
    if head is None:
        return None
    entity_id, entity_type, created_at, updated_at = head
    cap = _cap(max_items)
    observations = [Observation(decode(c), created, updated) for c, created, updated in graph._rows(
        f"SELECT content, {_time('created_at')}, {_time('updated_at')} FROM observations WHERE entity_id = %s "
        f"ORDER BY id LIMIT %s OFFSET %s", (entity_id, cap, offset))]
    outgoing = relations_of(graph._rows(
        f"SELECT {_RELATION} FROM relations WHERE from_key = %s ORDER BY to_name, relation_type LIMIT %s OFFSET %s",
        (key(name), cap, offset)))
    incoming = relations_of(graph._rows(
        f"SELECT {_RELATION} FROM relations WHERE to_key = %s ORDER BY from_name, relation_type LIMIT %s OFFSET %s",
        (key(name), cap, offset)))

    def count(sql: str, value: object) -> int:
        row = graph._one(sql, (value,))
        return int(row[0]) if row else 0

    others = list(dict.fromkeys([r.target for r in outgoing] + [r.source for r in incoming]))
    return EntityPage(
        name, decode(entity_type), created_at, updated_at, observations,
        count("SELECT count(*) FROM observations WHERE entity_id = %s", entity_id),
        outgoing, count("SELECT count(*) FROM relations WHERE from_key = %s", key(name)),
        incoming, count("SELECT count(*) FROM relations WHERE to_key = %s", key(name)),
        _types(graph, others), offset)


def type_counts(graph: PostgresGraph, limit: int) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
    """As :func:`graph_memory.db.explore.type_counts` (ties by the type, in byte order)."""
    def by(table: str, column: str) -> list[tuple[str, int]]:
        return [(decode(kind), int(n)) for kind, n in graph._rows(
            f"SELECT {column}, count(*) AS n FROM {table} GROUP BY {column} ORDER BY n DESC, {column} LIMIT %s",
            (_cap(limit),))]

    return by("entities", "entity_type"), by("relations", "relation_type")


def most_connected(graph: PostgresGraph, limit: int) -> list[tuple[str, str | None, int]]:
    """As :func:`graph_memory.db.explore.most_connected`."""
    rows = [(decode(name), int(n)) for name, n in graph._rows(
        "SELECT name, sum(n) AS degree FROM ("
        " SELECT from_name AS name, count(*) AS n FROM relations GROUP BY from_name"
        " UNION ALL SELECT to_name, count(*) FROM relations GROUP BY to_name"
        ") d GROUP BY name ORDER BY degree DESC, name LIMIT %s", (_cap(limit),))]
    types = _types(graph, [name for name, _ in rows])
    return [(name, types.get(name), n) for name, n in rows]


def recent_changes(graph: PostgresGraph, limit: int) -> list[Change]:
    """As :func:`graph_memory.db.explore.recent_changes`: newest first, read backwards along each
    table's creation order."""
    cap = _cap(limit)
    changes = [Change("entity", at, decode(name)) for name, at in graph._rows(
        f"SELECT name, {_time('created_at')} FROM entities ORDER BY id DESC LIMIT %s", (cap,))]
    changes += [Change("observation", at, decode(name), decode(content)) for name, content, at in graph._rows(
        f"SELECT e.name, o.content, o.at FROM (SELECT id, entity_id, content, {_time('created_at')} AS at "
        f"FROM observations ORDER BY id DESC LIMIT %s) o JOIN entities e ON e.id = o.entity_id ORDER BY o.id DESC",
        (cap,))]
    changes += [Change("relation", at, decode(source), decode(kind), decode(target))
                for source, kind, target, at in graph._rows(
                    f"SELECT from_name, relation_type, to_name, {_time('created_at')} FROM relations "
                    f"ORDER BY id DESC LIMIT %s", (cap,))]
    changes.sort(key=lambda c: c.at, reverse=True)
    return changes if cap is None else changes[:cap]
