"""The graph operations: what every tool does, one function each.

Each function takes an apsw connection that is already inside the call's transaction (the server
and CLI open it through :class:`~graph_memory.db.store.Store`), runs plain SQL, and returns value
objects. Raising any :class:`~graph_memory.errors.GraphError` rolls the whole call back, so a
rejected batch writes nothing. Semantics follow ``INTERFACE.md``, which follows the reference
server (``@modelcontextprotocol/server-memory``) wherever it defines them. ``search_nodes`` lives
in :mod:`graph_memory.db.search`, built on the loaders here (``load_entities``, ``with_neighborhood``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from typing import cast

import apsw

from graph_memory.db import index, schema
from graph_memory.db.rows import StoredEntity, StoredObservation, StoredRelation
from graph_memory.errors import Conflict, EntityNotFound, RelationNotFound
from graph_memory.models import (
    AddedObservations,
    DeletedObservations,
    DeleteEntitiesResult,
    DeleteObservationsResult,
    DeleteRelationsResult,
    Entity,
    EntityTimes,
    GraphSlice,
    ObservationUpdate,
    Relation,
    Times,
    UpdatedObservations,
    WeightChange,
    relations_from_rows,
)

# The stored time of a write (ISO 8601 UTC, milliseconds), and the stored "unknown" (rows
# imported from a legacy file, which keeps no times; migrations/0006 says why it is '' and not NULL).
NOW = "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"
UNKNOWN_TIME = ""
# Set while graph.merging runs: the rows inserted then come from a legacy file, times unknown.
_importing: ContextVar[bool] = ContextVar("graph_memory_importing", default=False)


def unique(items: Iterable[str]) -> list[str]:
    """Items in first-occurrence order without repeats."""
    return list(dict.fromkeys(items))


def _json(values: Iterable[object]) -> str:
    return json.dumps(list(values), ensure_ascii=False)


# Up to this many values go into ``IN (...)`` as separate parameters; more go as one JSON array
# through json_each. Binding a few values directly costs SQLite half as much as json_each (about
# 10 µs less per statement), which matters for point operations (issue 6).
_INLINE_VALUES = 16


def bind_members(values: Sequence[str] | Sequence[int]) -> tuple[str, tuple[str | int, ...]]:
    """``(sql, params)`` for ``column IN <sql>``: the values bound one by one when there are a few
    (1 to 16), else one JSON array read through ``json_each`` (one statement shape for any count)."""
    if 0 < len(values) <= _INLINE_VALUES:
        return "(" + ",".join("?" * len(values)) + ")", tuple(values)
    return "(SELECT value FROM json_each(?))", (_json(values),)


# -- reading ------------------------------------------------------------------------------------


def _entity_ids(conn: apsw.Connection, names: Sequence[str]) -> dict[str, int]:
    """``{name: id}`` for the names that are entities."""
    members, params = bind_members(names)
    return dict(conn.execute(f"SELECT name, id FROM entities WHERE name IN {members}", params))


def _require_entity(conn: apsw.Connection, name: str) -> int:
    row = conn.execute("SELECT id FROM entities WHERE name = ?", (name,)).fetchone()
    if row is None:
        raise EntityNotFound(name)
    return int(row[0])


def load_entities(conn: apsw.Connection, where: str = "", params: tuple[apsw.SQLiteValue, ...] = ()
                   ) -> list[Entity]:
    """Entities (with observations) selected by ``where`` over ``entities e``, in rowid order."""
    # The columns are INTEGER PRIMARY KEY and two NOT NULL TEXT columns (migrations/0001).
    heads = cast(list[tuple[int, str, str]], conn.execute(
        f"SELECT e.id, e.name, e.entity_type FROM entities e {where} ORDER BY e.id", params).fetchall())
    if not heads:
        return []
    by_id = {row[0]: Entity(row[1], row[2], []) for row in heads}
    if where:
        fill_observations(conn, by_id)
    else:
        for entity_id, content in conn.execute("SELECT entity_id, content FROM observations ORDER BY id"):
            by_id[entity_id].observations.append(content)
    return list(by_id.values())


def fill_observations(conn: apsw.Connection, by_id: dict[int, Entity]) -> None:
    """Append to each entity of ``by_id`` (``{entity id: Entity}``) its observations in insertion
    (id) order, read in one query."""
    if not by_id:
        return
    members, ids = bind_members(list(by_id))
    rows = cast(list[tuple[int, int, str]], conn.execute(
        f"SELECT id, entity_id, content FROM observations WHERE entity_id IN {members}", ids).fetchall())
    rows.sort()  # by observation id: cheaper here than ORDER BY in SQL
    for _, entity_id, content in rows:
        by_id[entity_id].observations.append(content)


def _entities_named(conn: apsw.Connection, names: Sequence[str]) -> list[Entity]:
    """The entities with these names (unknown names skipped), in rowid order."""
    if not names:
        return []
    members, params = bind_members(names)
    return load_entities(conn, f"WHERE e.name IN {members}", params)


def relations_touching(conn: apsw.Connection, names: Sequence[str]) -> list[Relation]:
    """Relations with at least one endpoint among ``names``, in rowid order."""
    if not names:
        return []
    members, params = bind_members(names)
    return relations_from_rows(conn.execute(
        f"SELECT from_name, to_name, relation_type, weight FROM relations "
        f"WHERE from_name IN {members} OR to_name IN {members} ORDER BY id", params + params))


def with_neighborhood(conn: apsw.Connection, entities: list[Entity]) -> GraphSlice:
    """Entities plus the relations touching them and the neighbors those relations reach."""
    names = [e.name for e in entities]
    relations = relations_touching(conn, names)
    inside = set(names)
    far = unique(n for r in relations for n in (r.source, r.target) if n not in inside)
    neighbors = _entities_named(conn, far)
    return GraphSlice(entities, relations, neighbors)


def is_empty(conn: apsw.Connection) -> bool:
    """True when the graph holds no entity and no relation (one indexed probe of each table)."""
    row = conn.execute("SELECT NOT EXISTS (SELECT 1 FROM entities) AND NOT EXISTS (SELECT 1 FROM relations)"
                       ).fetchone()
    return bool(row is not None and row[0])


def read_graph(conn: apsw.Connection) -> GraphSlice:
    """Every entity and every relation (dangling ones included), in rowid order;
    ``neighbors`` is always empty."""
    entities = load_entities(conn)
    relations = relations_from_rows(
        conn.execute("SELECT from_name, to_name, relation_type, weight FROM relations ORDER BY id"))
    return GraphSlice(entities, relations, [])


def with_times(conn: apsw.Connection, result: GraphSlice) -> GraphSlice:
    """``result`` with the times of its entities, their observations and its relations loaded
    (:attr:`Entity.times`, :attr:`Relation.times`; None where unknown). Run it in the transaction
    that read ``result``."""
    # nullif: the stored UNKNOWN_TIME is shown as null (migrations/0006).
    entities = result.entities + result.neighbors
    if entities:
        members, params = bind_members([e.name for e in entities])
        heads = {row[0]: (row[1], Times(row[2], row[3])) for row in conn.execute(
            f"SELECT name, id, nullif(created_at, ''), nullif(updated_at, '') FROM entities WHERE name IN {members}",
            params)}
        # Observations are listed in id order (the loaders' order), so their times are too. Rows
        # written together share their times: one Times object each (a large read holds many).
        members, ids = bind_members([entity_id for entity_id, _ in heads.values()])
        observed: dict[int, list[Times]] = {entity_id: [] for entity_id, _ in heads.values()}
        shared: dict[tuple[str | None, str | None], Times] = {}
        for entity_id, created, updated in conn.execute(
                f"SELECT entity_id, nullif(created_at, ''), nullif(updated_at, '') FROM observations "
                f"WHERE entity_id IN {members} ORDER BY id", ids):
            key = (created, updated)
            times = shared.get(key)
            if times is None:
                times = shared[key] = Times(created, updated)
            observed[entity_id].append(times)
        for entity in entities:
            entity_id, times = heads[entity.name]
            entity.times = EntityTimes(times, observed[entity_id])
    if result.relations:
        rows = conn.execute(
            "SELECT r.from_name, r.to_name, r.relation_type, nullif(r.created_at, ''), "
            "nullif(coalesce(r.updated_at, r.created_at), '') FROM json_each(?) j JOIN relations r "
            "ON r.from_name = j.value ->> 0 AND r.to_name = j.value ->> 1 AND r.relation_type = j.value ->> 2",
            (_json([list(r.key) for r in result.relations]),))
        times_of = {(row[0], row[1], row[2]): Times(row[3], row[4]) for row in rows}
        result.relations = [Relation(r.source, r.target, r.relation_type, r.weight, times_of[r.key])
                            for r in result.relations]
    return result


def open_nodes(conn: apsw.Connection, names: Sequence[str]) -> GraphSlice:
    """The entities with exactly these names (unknown names skipped), in rowid order, with the
    relations that have at least one endpoint among them and their neighbors."""
    return with_neighborhood(conn, _entities_named(conn, names))


# -- writing ------------------------------------------------------------------------------------


def create_entities(conn: apsw.Connection, entities: Sequence[Entity]) -> list[Entity]:
    """Create entities whose names do not exist yet.

    Names that exist are skipped; within one call the first occurrence of a name wins; each
    entity's observations are de-duplicated (first occurrence kept). The search documents are
    kept in step as :func:`graph_memory.db.index.sync_mode` chooses for new entities (each
    written once, not once per observation).

    Returns:
        The entities created, as stored, in call order.
    """
    with index.keeping_in_sync(conn, index.sync_mode(new_entities=len(entities)), grows_existing=False):
        return _insert_entities(conn, entities)


def _insert_entities(conn: apsw.Connection, entities: Sequence[Entity]) -> list[Entity]:
    created: list[Entity] = []
    seen: set[str] = set()
    for entity in entities:
        if entity.name in seen:
            continue
        seen.add(entity.name)
        inserted = _insert_entity(conn, entity.name, entity.entity_type)
        if inserted is None:
            continue
        entity_id, created_at = inserted
        observations = unique(entity.observations)
        # Created together: the observations carry the entity's own creation time.
        insert_observations(conn, [(entity_id, o) for o in observations], at=created_at)
        created.append(Entity(entity.name, entity.entity_type, observations))
    return created


def refuse_missing_endpoints(relations: Sequence[Relation], known: Container[str],
                             stored: Callable[[Relation], bool]) -> None:
    """Raise EntityNotFound for the first endpoint (in call order) of a relation to be created
    that is not a ``known`` entity. A relation already ``stored`` is skipped, as every existing
    triple is: a dangling relation a legacy file brought in is not created again, so repeating it
    is no error (the reference server answers ``[]`` too)."""
    for relation in relations:
        missing = next((n for n in (relation.source, relation.target) if n not in known), None)
        if missing is not None and not stored(relation):
            raise EntityNotFound(missing)


def create_relations(conn: apsw.Connection, relations: Sequence[Relation]) -> list[Relation]:
    """Create relations between existing entities.

    Existing triples and in-call repeats are skipped (an existing relation keeps its weight).

    Returns:
        The relations created, in call order.

    Raises:
        EntityNotFound: an endpoint is not an entity (the whole call is refused, as the reference
            server does since its fix for dangling relations).
    """
    names = unique(n for r in relations for n in (r.source, r.target))
    known = _entity_ids(conn, names)
    refuse_missing_endpoints(relations, known, lambda r: relation_exists(conn, r))
    created: list[Relation] = []
    for relation in relations:
        if insert_relation(conn, relation):
            created.append(relation)
    return created


# -- the rows themselves: the one place with INSERTs on entities, observations and relations ----


def insert_entity(conn: apsw.Connection, name: str, entity_type: str) -> int | None:
    """Insert an entity without observations; returns its id, or None when the name exists
    (nothing written)."""
    inserted = _insert_entity(conn, name, entity_type)
    return None if inserted is None else inserted[0]


def _insert_entity(conn: apsw.Connection, name: str, entity_type: str) -> tuple[int, str] | None:
    """:func:`insert_entity`, returning ``(id, created_at)``."""
    if _importing.get():
        row = conn.execute("INSERT INTO entities (name, entity_type, created_at, updated_at) VALUES (?, ?, '', '') "
                           "ON CONFLICT (name) DO NOTHING RETURNING id, created_at", (name, entity_type)).fetchone()
    else:
        row = conn.execute(
            "INSERT INTO entities (name, entity_type) VALUES (?, ?) ON CONFLICT (name) DO NOTHING "
            "RETURNING id, created_at", (name, entity_type),
        ).fetchone()
    return None if row is None else (cast(int, row[0]), cast(str, row[1]))


def find_entity(conn: apsw.Connection, name: str) -> tuple[int, str] | None:
    """``(id, entity_type)`` of the entity ``name``, or None."""
    row = conn.execute("SELECT id, entity_type FROM entities WHERE name = ?", (name,)).fetchone()
    return None if row is None else (cast(int, row[0]), cast(str, row[1]))


def observation_contents(conn: apsw.Connection, entity_id: int) -> set[str]:
    """The observations the entity ``entity_id`` has."""
    return {cast(str, c) for (c,) in conn.execute("SELECT content FROM observations WHERE entity_id = ?",
                                                  (entity_id,))}


def insert_observations(conn: apsw.Connection, rows: Iterable[tuple[int, str]], *, at: str | None = None) -> None:
    """Insert observations ``(entity_id, content)`` the entities do not have yet (the caller
    checked: a repeat violates the unique constraint and fails the call), created ``at`` that
    stored time (default: now; unknown while importing)."""
    if at is not None and not _importing.get():
        conn.executemany("INSERT INTO observations (entity_id, content, created_at, updated_at) VALUES (?, ?, ?, ?)",
                         ((entity_id, content, at, at) for entity_id, content in rows))
    elif _importing.get():
        conn.executemany("INSERT INTO observations (entity_id, content, created_at, updated_at) "
                         "VALUES (?, ?, '', '')", rows)
    else:
        conn.executemany("INSERT INTO observations (entity_id, content) VALUES (?, ?)", rows)


def insert_relation(conn: apsw.Connection, relation: Relation) -> bool:
    """Insert ``relation`` as it is (endpoints not checked); False when its triple exists
    (nothing written: the existing one keeps its weight)."""
    created = "''" if _importing.get() else NOW
    return conn.execute(
        f"INSERT INTO relations (from_name, to_name, relation_type, weight, created_at) VALUES (?, ?, ?, ?, {created}) "
        "ON CONFLICT DO NOTHING RETURNING id",
        (relation.source, relation.target, relation.relation_type, relation.weight),
    ).fetchone() is not None


def insert_entities(conn: apsw.Connection, rows: Sequence[tuple[str, str]]) -> dict[str, int]:
    """Insert entities ``(name, entity_type)`` without observations, in one statement run per
    row (names distinct); returns ``{name: id}`` of those inserted (a name that exists is
    absent: nothing written for it). Inside a merge their times are unknown."""
    created = "''" if _importing.get() else NOW
    # The new rows are read back by id (larger than every id before them) rather than with
    # RETURNING, which makes apsw's executemany step each row's results: 2.5x the cost.
    last = _largest_id(conn, "entities")
    conn.executemany(f"INSERT INTO entities (name, entity_type, created_at, updated_at) "
                     f"VALUES (?, ?, {created}, {created}) ON CONFLICT (name) DO NOTHING", rows)
    if _largest_id(conn, "entities") == last + len(rows):  # every row inserted, ids in order
        return {name: entity_id for entity_id, (name, _) in enumerate(rows, last + 1)}
    return {cast(str, name): cast(int, entity_id)
            for entity_id, name in conn.execute("SELECT id, name FROM entities WHERE id > ?", (last,))}


def _largest_id(conn: apsw.Connection, table: str) -> int:
    """The largest id of ``table`` (0 when empty). A rowid table gives a new row the largest id
    plus one: after inserting n rows, the largest id grew by n exactly when all n were inserted,
    and then their ids are the next n in insertion order (reading them back cost ~1 s per
    1,000,000 rows of an import)."""
    return cast(int, conn.execute(f"SELECT coalesce(max(id), 0) FROM {table}").fetchall()[0][0])


def insert_relations(conn: apsw.Connection, relations: Sequence[Relation]) -> dict[tuple[str, str, str], int]:
    """Insert ``relations`` as they are (endpoints not checked), in one statement run per row;
    returns ``{(source, target, type): id}`` of those inserted (a triple that exists, or repeats
    an earlier one of ``relations``, is absent: nothing written for it)."""
    created = "''" if _importing.get() else NOW
    last = _largest_id(conn, "relations")  # see insert_entities
    conn.executemany(f"INSERT INTO relations (from_name, to_name, relation_type, weight, created_at) "
                     f"VALUES (?, ?, ?, ?, {created}) ON CONFLICT DO NOTHING",
                     [(r.source, r.target, r.relation_type, r.weight) for r in relations])
    if _largest_id(conn, "relations") == last + len(relations):
        return {r.key: relation_id for relation_id, r in enumerate(relations, last + 1)}
    return {(cast(str, a), cast(str, b), cast(str, t)): cast(int, relation_id)
            for relation_id, a, b, t in conn.execute(
                "SELECT id, from_name, to_name, relation_type FROM relations WHERE id > ?", (last,))}


def relation_exists(conn: apsw.Connection, relation: Relation) -> bool:
    """Whether ``relation``'s triple (source, target, type) is stored."""
    return conn.execute("SELECT 1 FROM relations WHERE from_name = ? AND to_name = ? AND relation_type = ?",
                        (relation.source, relation.target, relation.relation_type)).fetchone() is not None


def relation_id(conn: apsw.Connection, relation: Relation) -> int | None:
    """The id of the relation with ``relation``'s triple, or None (a new row's id is larger
    than every id before it: the table's ids are never reused while a larger one exists)."""
    row = conn.execute("SELECT id FROM relations WHERE from_name = ? AND to_name = ? AND relation_type = ?",
                       (relation.source, relation.target, relation.relation_type)).fetchone()
    return None if row is None else cast(int, row[0])


# The graph tables' indexes of CREATE INDEX (not those of UNIQUE constraints, which a merge's
# inserts rely on): a merge that rebuilds the search index sets them aside and creates them at the
# end, sorted once, instead of inserting each row's key at a random place (relations by target
# name: ~15 % of the relation inserts of a 1,000,000-entity import; issue 15).
_SECONDARY_INDEXES = ("SELECT name, sql FROM sqlite_schema WHERE type = 'index' AND sql IS NOT NULL "
                      "AND tbl_name IN ('entities', 'observations', 'relations') ORDER BY rowid")


@contextmanager
def merging(conn: apsw.Connection, entities: int, *,
            on_rebuild: Callable[[], None] | None = None) -> Iterator[None]:
    """Inside a write transaction: the body merges ``entities`` entities (with observations) and
    relations into the graph (an import, with the helpers above); the search documents are
    kept in step as :func:`graph_memory.db.index.sync_mode` chooses for a merge of this size
    into what is stored. ``on_rebuild`` is called before the search index is rebuilt at the
    end, when it is (a long step worth reporting).

    The rows inserted in the body get unknown times (a legacy file keeps none); existing rows
    keep theirs."""
    (existing,) = conn.execute("SELECT count(*) FROM entities").fetchall()[0]
    mode = index.sync_mode(merged_entities=entities, existing_entities=cast(int, existing))
    rebuilding = mode is index.SyncMode.REBUILD
    importing = _importing.set(True)
    try:
        with index.keeping_in_sync(conn, mode), \
                (schema.set_aside(conn, "INDEX", _SECONDARY_INDEXES) if rebuilding else nullcontext()):
            yield
            if rebuilding and on_rebuild is not None:
                on_rebuild()
    finally:
        _importing.reset(importing)


def _touch(conn: apsw.Connection, entity_id: int) -> None:
    """Record that the entity's observations changed now (its ``updated_at``: what ``since`` reads)."""
    conn.execute(f"UPDATE entities SET updated_at = {NOW} WHERE id = ?", (entity_id,))


def add_observations(conn: apsw.Connection, items: Sequence[tuple[str, Sequence[str]]]) -> list[AddedObservations]:
    """Add observations ``[(entity_name, contents)]``; only contents the entity lacks are added.

    The search documents are kept in step as :func:`graph_memory.db.index.sync_mode` chooses
    for this many observations.

    Raises:
        EntityNotFound: an entity does not exist (the whole call is refused).
    """
    with index.keeping_in_sync(conn, index.sync_mode(grown_observations=sum(len(c) for _, c in items))):
        return _add_observations(conn, items)


def _add_observations(conn: apsw.Connection, items: Sequence[tuple[str, Sequence[str]]]) -> list[AddedObservations]:
    results: list[AddedObservations] = []
    for name, contents in items:
        entity_id = _require_entity(conn, name)
        added: list[str] = []
        for content in unique(contents):
            row = conn.execute(
                "INSERT INTO observations (entity_id, content) VALUES (?, ?) ON CONFLICT DO NOTHING RETURNING id",
                (entity_id, content),
            ).fetchone()
            if row is not None:
                added.append(content)
        if added:
            _touch(conn, entity_id)
        results.append(AddedObservations(name, added))
    return results


def delete_entities(conn: apsw.Connection, names: Sequence[str]) -> DeleteEntitiesResult:
    """Delete entities by name with their observations and every relation naming them.

    Unknown names are skipped, not an error; relations that name them are still removed (the
    reference server filters relations by the requested names, whether or not they exist).
    """
    requested = unique(names)
    members, params = bind_members(requested)
    deleted = [row[0] for row in conn.execute(f"DELETE FROM entities WHERE name IN {members} RETURNING name", params)]
    gone = set(deleted)
    deleted = [n for n in requested if n in gone]
    # A materialized inverse (migration 0007) goes with its primary and is not counted on its own.
    relations = conn.execute(
        f"DELETE FROM relations WHERE from_name IN {members} OR to_name IN {members} RETURNING inverse_of",
        params + params,
    ).fetchall()
    primaries = sum(1 for (inverse_of,) in relations if inverse_of is None)
    return DeleteEntitiesResult(len(requested), deleted, [n for n in requested if n not in gone], primaries)


def delete_observations(conn: apsw.Connection, items: Sequence[tuple[str, Sequence[str]]]) -> DeleteObservationsResult:
    """Delete observations ``[(entity_name, observations)]`` by exact match; unknown entities are
    skipped and reported in their result."""
    out = DeleteObservationsResult()
    for name, observations in items:
        row = conn.execute("SELECT id FROM entities WHERE name = ?", (name,)).fetchone()
        if row is None:
            out.results.append(DeletedObservations(name, len(observations), [], found=False))
            continue
        deleted: list[str] = []
        for content in unique(observations):
            if conn.execute("DELETE FROM observations WHERE entity_id = ? AND content = ? RETURNING id",
                            (row[0], content)).fetchone() is not None:
                deleted.append(content)
        if deleted:
            _touch(conn, row[0])
        out.results.append(DeletedObservations(name, len(observations), deleted))
    return out


def delete_relations(conn: apsw.Connection, relations: Sequence[Relation]) -> DeleteRelationsResult:
    """Delete relations by exact ``(from, to, relationType)`` triple; reports only what matched."""
    deleted: list[Relation] = []
    for relation in relations:
        row = conn.execute(
            "DELETE FROM relations WHERE from_name = ? AND to_name = ? AND relation_type = ? "
            "RETURNING from_name, to_name, relation_type, weight",
            relation.key,
        ).fetchone()
        if row is not None:
            deleted.append(Relation(*row))
    return DeleteRelationsResult(len(relations), deleted)


def update_observations(conn: apsw.Connection, updates: Sequence[ObservationUpdate]) -> list[UpdatedObservations]:
    """Edit observations in place, in call order (a later update sees earlier ones).

    The row keeps its id (position) and ``created_at``; ``updated_at`` is set; the search index
    follows through the triggers.

    Returns:
        The edits grouped by entity, in order of first appearance.

    Raises:
        EntityNotFound: the entity does not exist.
        Conflict: ``match`` is not an observation of the entity, or ``replacement`` already is
            (including ``replacement == match``). The whole batch is refused.
    """
    grouped: dict[str, list[tuple[str, str]]] = {}
    for update in updates:
        entity_id = _require_entity(conn, update.entity_name)
        if conn.execute("SELECT 1 FROM observations WHERE entity_id = ? AND content = ?",
                        (entity_id, update.replacement)).fetchone() is not None:
            raise Conflict(f"entity {update.entity_name} already has the observation {update.replacement!r}; "
                           f"nothing was changed")
        row = conn.execute(
            "UPDATE observations SET content = ?, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') "
            "WHERE entity_id = ? AND content = ? RETURNING id",
            (update.replacement, entity_id, update.match),
        ).fetchone()
        if row is None:
            raise Conflict(f"entity {update.entity_name} has no observation {update.match!r}; "
                           f"nothing was changed")
        _touch(conn, entity_id)
        grouped.setdefault(update.entity_name, []).append((update.match, update.replacement))
    return [UpdatedObservations(name, items) for name, items in grouped.items()]


# -- typed tools (graph_memory.mcp.typed) -------------------------------------------------------


def entity_type(conn: apsw.Connection, name: str) -> str | None:
    """The entityType of the entity ``name``, or ``None`` when there is no such entity."""
    row = conn.execute("SELECT entity_type FROM entities WHERE name = ?", (name,)).fetchone()
    return None if row is None else str(row[0])


def relations_from(conn: apsw.Connection, source: str, relation_type: str) -> list[Relation]:
    """The relations ``source -[relation_type]-> *``, in rowid order."""
    rows = conn.execute(
        "SELECT from_name, to_name, relation_type, weight FROM relations "
        "WHERE from_name = ? AND relation_type = ? ORDER BY id",
        (source, relation_type),
    )
    return [Relation(*row) for row in rows]


# -- relation weights ----------------------------------------------------------------------------


def update_relation_weights(conn: apsw.Connection, items: Sequence[tuple[Relation, float]]) -> list[WeightChange]:
    """Apply new evidence to existing relations: ``weight = (weight + evidence) / 2`` (MemoryMesh's rule).

    ``items`` are ``(relation, evidence)`` pairs; only the relation's triple is used. They apply in
    call order, so a relation named twice averages twice. Evidence equal to the stored weight
    changes nothing, so it writes nothing (its ``updatedAt`` and ``since`` stay as they were).

    Raises:
        RelationNotFound: a triple is not a relation (the whole call is refused).
    """
    changes: list[WeightChange] = []
    for relation, evidence in items:
        row = conn.execute(
            "SELECT id, weight FROM relations WHERE from_name = ? AND to_name = ? AND relation_type = ?",
            relation.key,
        ).fetchone()
        if row is None:
            raise RelationNotFound(*relation.key)
        previous = float(row[1])
        weight = (previous + evidence) / 2
        if weight != previous:
            conn.execute(f"UPDATE relations SET weight = ?, updated_at = {NOW} WHERE id = ?", (weight, row[0]))
        changes.append(WeightChange(Relation(*relation.key, weight), previous, evidence))
    return changes


# -- the MemoryMesh profile (graph_memory.mcp.memorymesh) ------------------------------------------


def set_entity_type(conn: apsw.Connection, name: str, entity_type: str) -> bool:
    """Give the entity ``name`` the type ``entity_type`` (the search document follows through the
    trigger). Returns whether the type changed.

    Raises:
        EntityNotFound: the entity does not exist.
    """
    row = conn.execute(
        "UPDATE entities SET entity_type = ?2, updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') "
        "WHERE name = ?1 AND entity_type <> ?2 RETURNING id", (name, entity_type)).fetchone()
    if row is None:
        _require_entity(conn, name)
        return False
    return True


def replace_observations(conn: apsw.Connection, name: str, contents: Sequence[str]) -> bool:
    """Make the entity's observations exactly ``contents`` (duplicates collapsed), in that order.

    Observations that stay keep their rows (id, ``created_at``) when the order allows it: when the
    kept ones are already in the new order and the new ones come after them, only the removed rows
    are deleted and the new ones appended; otherwise every row is written again in the new order.
    A change sets the entity's ``updated_at`` (what ``since`` reads). Returns whether anything changed.

    Raises:
        EntityNotFound: the entity does not exist.
    """
    entity_id = _require_entity(conn, name)
    wanted = unique(contents)
    current = [cast(str, c) for (c,) in conn.execute(
        "SELECT content FROM observations WHERE entity_id = ? ORDER BY id", (entity_id,))]
    if current == wanted:
        return False
    wanted_set = set(wanted)
    kept = [c for c in current if c in wanted_set]
    if wanted[:len(kept)] == kept:
        gone = [c for c in current if c not in wanted_set]
        fresh = wanted[len(kept):]
    else:  # the order changed: rewrite them all
        gone, fresh = current, wanted
    if gone:
        members, params = bind_members(gone)
        conn.execute(f"DELETE FROM observations WHERE entity_id = ? AND content IN {members}",
                     (entity_id, *params))
    conn.executemany("INSERT INTO observations (entity_id, content) VALUES (?, ?)",
                     [(entity_id, c) for c in fresh])
    _touch(conn, entity_id)   # an observation change dates its entity (migrations/0006)
    return True


def find_relation(conn: apsw.Connection, source: str, target: str, relation_type: str) -> Relation | None:
    """The relation with this triple, or None."""
    row = conn.execute("SELECT from_name, to_name, relation_type, weight FROM relations "
                       "WHERE from_name = ? AND to_name = ? AND relation_type = ?",
                       (source, target, relation_type)).fetchone()
    return None if row is None else Relation(*row)


def move_relation(conn: apsw.Connection, key: tuple[str, str, str], new_key: tuple[str, str, str],
                  evidence: float | None) -> tuple[Relation, Relation]:
    """Re-point the relation ``key`` to ``new_key`` (same row: it keeps its position) and, with
    ``evidence``, fold it into the weight: ``(weight + evidence) / 2``.

    Returns ``(before, after)``.

    Raises:
        RelationNotFound: no relation has ``key``.
        EntityNotFound: a changed endpoint of ``new_key`` is not an entity.
        Conflict: another relation already has ``new_key``.
    """
    row = conn.execute("SELECT id, weight FROM relations WHERE from_name = ? AND to_name = ? AND relation_type = ?",
                       key).fetchone()
    if row is None:
        raise RelationNotFound(*key)
    before = Relation(*key, float(row[1]))
    for old, new in ((key[0], new_key[0]), (key[1], new_key[1])):
        if new != old:
            _require_entity(conn, new)
    if new_key != key and find_relation(conn, *new_key) is not None:
        raise Conflict(f"Relation {new_key[0]} -[{new_key[2]}]-> {new_key[1]} already exists; delete one of the "
                       f"two first, or update that one")
    weight = before.weight if evidence is None else (before.weight + evidence) / 2
    if new_key == key:
        conn.execute("UPDATE relations SET weight = ? WHERE id = ?", (weight, row[0]))
    else:
        # A re-pointed relation is an ordinary one, and the inverse it had no longer fits it.
        conn.execute("DELETE FROM relations WHERE inverse_of = ?", (row[0],))
        conn.execute("UPDATE relations SET from_name = ?, to_name = ?, relation_type = ?, weight = ?, "
                     "inverse_of = NULL WHERE id = ?", (*new_key, weight, row[0]))
    return before, Relation(*new_key, weight)


# -- materialized inverse relations (migration 0007; declared pairs: models.inverse_types) ---------


def create_inverses(conn: apsw.Connection, relations: Sequence[Relation], inverses: Mapping[str, str]
                    ) -> list[Relation]:
    """For each of ``relations`` (just created, so stored) whose type has a declared inverse,
    create ``to -[inverse]-> from`` with the same weight, marked as its materialized inverse
    (``inverse_of``: deleting the relation deletes it too). An inverse triple that exists already
    is left as it is (it stays an ordinary relation). Returns the inverses created.
    """
    made: list[Relation] = []
    for relation in relations:
        inverse_type = inverses.get(relation.relation_type)
        if inverse_type is None:
            continue
        inverse = Relation(relation.target, relation.source, inverse_type, relation.weight)
        row = conn.execute(
            "INSERT INTO relations (from_name, to_name, relation_type, weight, inverse_of) "
            "SELECT ?, ?, ?, ?, id FROM relations WHERE from_name = ? AND to_name = ? AND relation_type = ? "
            "ON CONFLICT DO NOTHING RETURNING id",
            (*inverse.key, inverse.weight, *relation.key)).fetchone()
        if row is not None:
            made.append(inverse)
    return made


def link_inverse(conn: apsw.Connection, key: tuple[str, str, str], primary_type: str) -> bool:
    """Mark the relation ``key`` as the materialized inverse of ``(to, from, primary_type)`` (an
    import restoring what an export recorded); False when either relation is missing or the
    primary is itself a materialized inverse."""
    primary = (key[1], key[0], primary_type)
    return conn.execute(
        "UPDATE relations SET inverse_of = p.id FROM relations p "
        "WHERE p.from_name = ?1 AND p.to_name = ?2 AND p.relation_type = ?3 AND p.inverse_of IS NULL "
        "AND relations.from_name = ?4 AND relations.to_name = ?5 AND relations.relation_type = ?6 "
        "AND relations.id <> p.id RETURNING relations.id",
        (*primary, *key)).fetchone() is not None


def inverse_links(conn: apsw.Connection) -> dict[tuple[str, str, str], str]:
    """Every materialized inverse: its triple → the relation type of its primary (whose ends are
    the inverse's, swapped)."""
    rows = conn.execute("SELECT i.from_name, i.to_name, i.relation_type, p.relation_type FROM relations i "
                        "JOIN relations p ON p.id = i.inverse_of")
    return {(cast(str, a), cast(str, b), cast(str, t)): cast(str, primary) for a, b, t, primary in rows}


# -- whole rows, times included (graph-memory copy; db/rows.py) ------------------------------------


def stored_entities(conn: apsw.Connection, after: int, limit: int) -> list[StoredEntity]:
    """Up to ``limit`` entity rows with ids above ``after``, in id order (unknown times: None)."""
    return [StoredEntity(*row) for row in conn.execute(
        "SELECT id, name, entity_type, nullif(created_at, ''), nullif(updated_at, '') FROM entities "
        "WHERE id > ? ORDER BY id LIMIT ?", (after, limit))]


def stored_observations(conn: apsw.Connection, after: int, limit: int) -> list[StoredObservation]:
    """Up to ``limit`` observation rows with ids above ``after``, in id order."""
    return [StoredObservation(*row) for row in conn.execute(
        "SELECT id, entity_id, content, nullif(created_at, ''), nullif(updated_at, '') FROM observations "
        "WHERE id > ? ORDER BY id LIMIT ?", (after, limit))]


def stored_relations(conn: apsw.Connection, after: int, limit: int) -> list[StoredRelation]:
    """Up to ``limit`` relation rows with ids above ``after``, in id order."""
    return [StoredRelation(*row) for row in conn.execute(
        "SELECT id, from_name, to_name, relation_type, weight, nullif(created_at, ''), updated_at FROM relations "
        "WHERE id > ? ORDER BY id LIMIT ?", (after, limit))]


def restore_entities(conn: apsw.Connection, rows: Sequence[StoredEntity]) -> list[int]:
    """Insert entity rows as they are, times included (None: unknown), in order; their new ids.
    The caller keeps the search index in step (:func:`merging`)."""
    ids: list[int] = []
    for row in rows:
        (entity_id,) = conn.execute(
            "INSERT INTO entities (name, entity_type, created_at, updated_at) VALUES (?, ?, ?, ?) RETURNING id",
            (row.name, row.entity_type, row.created_at or UNKNOWN_TIME, row.updated_at or UNKNOWN_TIME)).fetchall()[0]
        ids.append(cast(int, entity_id))
    return ids


def restore_observations(conn: apsw.Connection, rows: Sequence[StoredObservation]) -> None:
    """Insert observation rows as they are (``entity_id``: an id of this database), in order."""
    conn.executemany("INSERT INTO observations (entity_id, content, created_at, updated_at) VALUES (?, ?, ?, ?)",
                     [(r.entity_id, r.content, r.created_at or UNKNOWN_TIME, r.updated_at or UNKNOWN_TIME)
                      for r in rows])


def restore_relations(conn: apsw.Connection, rows: Sequence[StoredRelation]) -> None:
    """Insert relation rows as they are, weights and times included, in order."""
    conn.executemany("INSERT INTO relations (from_name, to_name, relation_type, weight, created_at, updated_at) "
                     "VALUES (?, ?, ?, ?, ?, ?)",
                     [(r.source, r.target, r.relation_type, r.weight, r.created_at or UNKNOWN_TIME, r.updated_at)
                      for r in rows])
