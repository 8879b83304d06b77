"""The graph operations on PostgreSQL: :class:`PostgresGraph`, the :class:`~graph_memory.db.backend.Graph`
of one transaction.

The semantics are those of the SQLite backend (:mod:`graph_memory.db.graph`, the reference): the
same results, errors and ordering (creation order: the identity ``id``), dangling relations kept,
``update_relations`` averaging weights, the typed tools' prefix edits. Text goes through
:mod:`graph_memory.db.postgres.text` (NUL escaped, sha256 keys for uniqueness).

Search documents (``entity_search``) are written by this class, not by triggers: PostgreSQL cannot
run Python's ``str.lower()``. Every write marks the entities whose documents changed, and
:meth:`PostgresGraph.flush_documents` rewrites each of them once, at the end of the write (the
backend calls it before committing), or at the end of a merge (:meth:`PostgresGraph.merging`).

Inside a merge (an import, a copy) rows are written in bulk (:mod:`graph_memory.db.postgres.bulk`):
the merge primitives are answered without a round trip each, and whole batches are inserted by
one statement.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import psycopg

from graph_memory.db.backup import GraphCounts
from graph_memory.db.explore import Change, EntityPage, Neighborhood
from graph_memory.db.graph import refuse_missing_endpoints, unique
from graph_memory.db.postgres.bulk import (
    ENTITY_COLUMNS,
    OBSERVATION_COLUMNS,
    RELATION_COLUMNS,
    BulkMerge,
    insert_rows,
    next_ids,
)
from graph_memory.db.postgres.text import decode, document, encode, key, relation_key
from graph_memory.db.postgres.text import key as _key
from graph_memory.db.records import FORGET_OLDER_DIGESTS, RECORD_COLUMNS, ImportRecord
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
    Mode,
    ObservationUpdate,
    Relation,
    Times,
    UpdatedObservations,
    WeightChange,
    relations_from_rows,
)
from graph_memory.paging import ReadPosition, SearchPosition

Connection = psycopg.Connection[tuple[Any, ...]]

# Documents are rewritten this many entities per statement (a merge may touch 100,000).
_DOCUMENT_BATCH = 1000
_DOCUMENT_COLUMNS = (("entity_id", "bigint"), ("name", "text"), ("entity_type", "text"), ("observations", "text"))
_RELATION_COLUMNS = "from_name, to_name, relation_type, weight"
# An entity row: id, name, type and its observations in position order (``entities e``).
HEAD = "e.id, e.name, e.entity_type, ARRAY(SELECT o.content FROM observations o WHERE o.entity_id = e.id ORDER BY o.id)"
# The relations touching the entities of the name keys ``%(keys)s``, in creation order.
_TOUCHING = (f"SELECT {_RELATION_COLUMNS}, from_key, to_key FROM relations "
             f"WHERE from_key = ANY(%(keys)s) OR to_key = ANY(%(keys)s) ORDER BY id")
# The entities at the far ends of the relations ``touching`` selects, other than ``%(keys)s``, in
# id order. The ends are gathered into an array first (computed once), so the entities are found
# through their name index, never by testing every entity against the relations.
_NEIGHBORS = (f"SELECT {HEAD} FROM entities e WHERE e.name_key = ANY(ARRAY("
              f"SELECT k FROM ({{touching}}) r, LATERAL (VALUES (r.from_key), (r.to_key)) AS v(k))) "
              f"AND NOT e.name_key = ANY(%(keys)s) ORDER BY e.id")
_RECORDED_AT = "to_char(recorded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"


def stored_time(column: str) -> str:
    """SQL showing the timestamptz ``column`` as the SQLite backend stores times
    (``2026-12-01T17:29:28.123Z``: UTC, milliseconds cut), NULL when unknown. ``since`` compares
    the column itself: ``since`` has whole milliseconds, so ``t >= since`` exactly when the
    shown ``t`` is."""
    return f"to_char({column} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"


def _relation(row: Sequence[Any]) -> Relation:
    return Relation(decode(row[0]), decode(row[1]), decode(row[2]), float(row[3]))


def relations_of(rows: Iterable[Sequence[Any]]) -> list[Relation]:
    """The relations of ``(from, to, type, weight)`` rows, decoded (built as
    :func:`~graph_memory.models.relations_from_rows` builds SQLite's: no per-object ``__init__``)."""
    return relations_from_rows((decode(r[0]), decode(r[1]), decode(r[2]), float(r[3])) for r in rows)


# Up to this many name keys, the reads of a slice run on their generic plans (_generic_plans).
_GENERIC_KEYS = 8


@contextmanager
def _generic_plans(conn: Connection, keys: int) -> Iterator[None]:
    """Statements sent inside run on their generic plan once psycopg has prepared them, when they
    look up at most :data:`_GENERIC_KEYS` name keys (the pool sets ``force_custom_plan``, see
    ``backend._configure``). For the key lookups of a slice only (unique and B-tree indexes, the
    same plan for any few keys): planning them anew took longer than running them (~0.25 ms of
    a one-hit search at 100,000 entities). Not for more keys: a custom plan hashes a constant
    key array (PostgreSQL 14+), a generic plan scans the parameter array for every row, 3-4x
    slower at thousands of keys. ``SET LOCAL`` ends with the transaction, also on an error."""
    if keys > _GENERIC_KEYS:
        yield
        return
    conn.execute("SET LOCAL plan_cache_mode = force_generic_plan")
    yield
    conn.execute("SET LOCAL plan_cache_mode = force_custom_plan")


class PostgresGraph:
    """:class:`~graph_memory.db.backend.Graph` on one psycopg connection inside a transaction of
    :class:`~graph_memory.db.postgres.backend.PostgresBackend`.

    ``changed`` is set when the transaction changed the graph (the backend then notifies other
    replicas); ``stale`` holds the ids of entities whose search documents must be rewritten."""

    __slots__ = ("_bulk", "_merging", "changed", "conn", "stale")

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.changed = False
        self.stale: set[int] = set()
        self._merging = False
        self._bulk: BulkMerge | None = None

    def _write_pending(self) -> None:
        """Write the rows a merge buffered (before a read, which must see them, or other rows)."""
        if self._bulk is not None and self._bulk.pending:
            self._bulk.flush()

    def _rows(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        self._write_pending()
        return self.conn.execute(sql, params).fetchall()

    def _one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        self._write_pending()
        return self.conn.execute(sql, params).fetchone()

    # -- reading ----------------------------------------------------------------------------------

    def _require_entity(self, name: str) -> int:
        row = self._one("SELECT id FROM entities WHERE name_key = %s", (key(name),))
        if row is None:
            raise EntityNotFound(name)
        return int(row[0])

    def _entities_by(self, where: str, params: Sequence[Any]) -> list[Entity]:
        """Entities (with observations, in position order) selected by ``where`` over
        ``entities e``, in id order."""
        return self._with_observations(self._rows(f"SELECT {HEAD} FROM entities e {where} ORDER BY e.id", params))

    def _with_observations(self, heads: Sequence[tuple[Any, ...]]) -> list[Entity]:
        """Entities for ``(id, name, type, observations)`` rows (:data:`HEAD`), in their order;
        for ``(id, name, type)`` rows the observations are read in one more query."""
        if not heads:
            return []
        if len(heads[0]) > 3:
            return [Entity(decode(row[1]), decode(row[2]), [decode(c) for c in row[3]]) for row in heads]
        by_id = {int(row[0]): Entity(decode(row[1]), decode(row[2]), []) for row in heads}
        for entity_id, content in self._rows(
                "SELECT entity_id, content FROM observations WHERE entity_id = ANY(%s) ORDER BY id", (list(by_id),)):
            by_id[entity_id].observations.append(decode(content))
        return list(by_id.values())

    def _entities_named(self, names: Sequence[str]) -> list[Entity]:
        if not names:
            return []
        return self._entities_by("WHERE e.name_key = ANY(%s)", ([key(n) for n in names],))

    def _relations_touching(self, names: Sequence[str]) -> list[Relation]:
        if not names:
            return []
        keys = [key(n) for n in names]
        rows = self._rows(f"SELECT {_RELATION_COLUMNS} FROM relations WHERE from_key = ANY(%s) OR to_key = ANY(%s) "
                          f"ORDER BY id", (keys, keys))
        return relations_of(rows)

    def slice(self, entities: list[Entity]) -> GraphSlice:
        """Entities plus the relations touching them and the neighbors those relations reach.

        Both queries are sent before either result is read: in the backend's pipeline they cost
        one round trip together."""
        if not entities:
            return GraphSlice(entities, [], [])
        keys = [key(e.name) for e in entities]
        with _generic_plans(self.conn, len(keys)):
            relations = self.conn.execute(_TOUCHING, {"keys": keys})
            # The far ends of those relations that are entities, in id order (the unique() of
            # the relations' ends, read in one query).
            neighbors = self.conn.execute(_NEIGHBORS.format(touching=_TOUCHING), {"keys": keys})
        return GraphSlice(entities, relations_of(relations.fetchall()),
                          self._with_observations(neighbors.fetchall()))

    def open_nodes(self, names: Sequence[str]) -> GraphSlice:
        """The named entities, the relations touching them, their neighbors: three queries sent
        together (one round trip in the pipeline), the relations found from the names that are
        entities."""
        if not names:
            return GraphSlice([], [], [])
        keys = [key(n) for n in names]
        with _generic_plans(self.conn, len(keys)):
            named = self.conn.execute(f"SELECT {HEAD} FROM entities e WHERE e.name_key = ANY(%s) ORDER BY e.id",
                                      (keys,))
            found = "ARRAY(SELECT name_key FROM entities WHERE name_key = ANY(%(keys)s))"
            touching = _TOUCHING.replace("%(keys)s", found)
            relations = self.conn.execute(touching, {"keys": keys})
            neighbors = self.conn.execute(_NEIGHBORS.format(touching=touching), {"keys": keys})
        return GraphSlice(self._with_observations(named.fetchall()), relations_of(relations.fetchall()),
                          self._with_observations(neighbors.fetchall()))

    def read_graph(self) -> GraphSlice:
        heads = self._rows("SELECT id, name, entity_type FROM entities ORDER BY id")
        by_id = {int(row[0]): Entity(decode(row[1]), decode(row[2]), []) for row in heads}
        for entity_id, content in self._rows("SELECT entity_id, content FROM observations ORDER BY id"):
            by_id[entity_id].observations.append(decode(content))
        relations = relations_of(self._rows(f"SELECT {_RELATION_COLUMNS} FROM relations ORDER BY id"))
        return GraphSlice(list(by_id.values()), relations, [])

    def search(self, query: str, mode: Mode, limit: int | None) -> GraphSlice:
        from graph_memory.db.postgres.search import search

        return search(self, query, mode, limit)

    def is_empty(self) -> bool:
        row = self._one("SELECT NOT EXISTS (SELECT 1 FROM entities) AND NOT EXISTS (SELECT 1 FROM relations)")
        return bool(row is not None and row[0])

    def counts(self) -> GraphCounts:
        if self._one("SELECT to_regclass('entities') IS NOT NULL") != (True,):
            return GraphCounts()

        def by_type(table: str, column: str) -> dict[str, int]:
            rows = [(decode(kind), int(n)) for kind, n in self._rows(
                f"SELECT {column}, count(*) FROM {table} GROUP BY {column}")]
            # By count, then type in code-point order (SQLite's BINARY collation on UTF-8).
            return dict(sorted(rows, key=lambda item: (-item[1], item[0])))

        entities = by_type("entities", "entity_type")
        relations = by_type("relations", "relation_type")
        observations = self._one("SELECT count(*) FROM observations")
        dangling = self._one("SELECT count(*) FROM relations r "
                             "WHERE NOT EXISTS (SELECT 1 FROM entities WHERE name_key = r.from_key) "
                             "OR NOT EXISTS (SELECT 1 FROM entities WHERE name_key = r.to_key)")
        return GraphCounts(entities=sum(entities.values()), observations=int(observations[0]) if observations else 0,
                           relations=sum(relations.values()), dangling_relations=int(dangling[0]) if dangling else 0,
                           entities_by_type=entities, relations_by_type=relations)

    # -- writing ----------------------------------------------------------------------------------

    def create_entities(self, entities: Sequence[Entity]) -> list[Entity]:
        created: list[Entity] = []
        seen: set[str] = set()
        for entity in entities:
            if entity.name in seen:
                continue
            seen.add(entity.name)
            inserted = self._insert_entity(entity.name, entity.entity_type)
            if inserted is None:
                continue
            entity_id, created_at = inserted
            observations = unique(entity.observations)
            # Created together: the observations carry the entity's own creation time.
            self.insert_observations([(entity_id, o) for o in observations], at=created_at)
            created.append(Entity(entity.name, entity.entity_type, observations))
        return created

    def create_relations(self, relations: Sequence[Relation]) -> list[Relation]:
        names = unique(n for r in relations for n in (r.source, r.target))
        if names:
            # FOR KEY SHARE: a concurrent delete of an endpoint waits for this transaction (and
            # then fails to serialize), so no relation is created to an entity deleted meanwhile.
            keys = {bytes(k) for (k,) in self._rows(
                "SELECT name_key FROM entities WHERE name_key = ANY(%s) FOR KEY SHARE", ([key(n) for n in names],))}
            refuse_missing_endpoints(relations, {n for n in names if key(n) in keys}, self.relation_exists)
        return [r for r in relations if self.insert_relation(r)]

    def insert_entity(self, name: str, entity_type: str) -> int | None:
        if self._bulk is not None:
            entity_id = self._bulk.insert_entity(name, entity_type)
            if entity_id is not None:
                self.changed = True
                self.stale.add(entity_id)
            return entity_id
        inserted = self._insert_entity(name, entity_type)
        return None if inserted is None else inserted[0]

    def _insert_entity(self, name: str, entity_type: str) -> tuple[int, datetime | None] | None:
        """:meth:`insert_entity`, returning ``(id, created_at)``; inside a merge (an import from a
        legacy file, which keeps no times) the times are unknown (NULL)."""
        times = "NULL, NULL" if self._merging else "DEFAULT, DEFAULT"
        row = self._one(f"INSERT INTO entities (name, name_key, entity_type, created_at, updated_at) "
                        f"VALUES (%s, %s, %s, {times}) ON CONFLICT (name_key) DO NOTHING RETURNING id, created_at",
                        (encode(name), key(name), encode(entity_type)))
        if row is None:
            return None
        entity_id = int(row[0])
        self.changed = True
        self.stale.add(entity_id)
        return entity_id, row[1]

    def find_entity(self, name: str) -> tuple[int, str] | None:
        row = self._one("SELECT id, entity_type FROM entities WHERE name_key = %s", (key(name),))
        return None if row is None else (int(row[0]), decode(row[1]))

    def observation_contents(self, entity_id: int) -> set[str]:
        return {decode(c) for (c,) in self._rows("SELECT content FROM observations WHERE entity_id = %s",
                                                 (entity_id,))}

    def insert_observations(self, rows: Iterable[tuple[int, str]], *, at: datetime | None = None) -> None:
        """Insert observations ``(entity_id, content)`` the entities lack (the caller checked),
        created ``at`` (default: now; unknown, NULL, inside a merge)."""
        if self._bulk is not None:
            rows = list(rows)
            self._bulk.insert_observations(rows)
            if rows:
                self.changed = True
                self.stale.update(entity_id for entity_id, _ in rows)
            return
        params: list[tuple[Any, ...]] = [(entity_id, encode(content), key(content)) for entity_id, content in rows]
        if not params:
            return
        if self._merging:
            sql = "INSERT INTO observations (entity_id, content, content_key, created_at, updated_at) " \
                  "VALUES (%s, %s, %s, NULL, NULL)"
        elif at is not None:
            sql = "INSERT INTO observations (entity_id, content, content_key, created_at, updated_at) " \
                  "VALUES (%s, %s, %s, %s, %s)"
            params = [(*row, at, at) for row in params]
        else:
            sql = "INSERT INTO observations (entity_id, content, content_key) VALUES (%s, %s, %s)"
        with self.conn.cursor() as cur:
            cur.executemany(sql, params)
        self.changed = True
        self.stale.update(int(row[0]) for row in params)

    def insert_relation(self, relation: Relation) -> bool:
        if self._bulk is not None:
            inserted = self._bulk.insert_relation(relation)
            self.changed |= inserted
            return inserted
        created = "NULL" if self._merging else "DEFAULT"   # a legacy file keeps no times
        row = self._one(
            f"INSERT INTO relations (from_name, to_name, relation_type, from_key, to_key, relation_key, weight, "
            f"created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, {created}) ON CONFLICT (relation_key) DO NOTHING "
            f"RETURNING id",
            (encode(relation.source), encode(relation.target), encode(relation.relation_type), key(relation.source),
             key(relation.target), relation_key(*relation.key), relation.weight))
        if row is None:
            return False
        self.changed = True
        return True

    def insert_entities(self, rows: Sequence[tuple[str, str]]) -> dict[str, int]:
        # Row by row: an import's cost on PostgreSQL is its round trips, not worth a second path yet.
        inserted: dict[str, int] = {}
        for name, entity_type in rows:
            entity_id = self.insert_entity(name, entity_type)
            if entity_id is not None:
                inserted[name] = entity_id
        return inserted

    def insert_relations(self, relations: Sequence[Relation]) -> dict[tuple[str, str, str], int]:
        inserted: dict[tuple[str, str, str], int] = {}
        for relation in relations:
            if self.insert_relation(relation):
                relation_id = self.relation_id(relation)
                assert relation_id is not None  # just inserted
                inserted[relation.key] = relation_id
        return inserted

    def relation_exists(self, relation: Relation) -> bool:
        return self._one("SELECT 1 FROM relations WHERE relation_key = %s", (relation_key(*relation.key),)) is not None

    def relation_id(self, relation: Relation) -> int | None:
        row = self._one("SELECT id FROM relations WHERE relation_key = %s", (relation_key(*relation.key),))
        return None if row is None else int(row[0])

    @contextmanager
    def merging(self, entities: int, *, on_rebuild: Callable[[], None] | None = None) -> Iterator[None]:
        """Around a merge (an import, a copy): its rows are written in bulk
        (:class:`~graph_memory.db.postgres.bulk.BulkMerge`), and the documents of every entity it
        touched once, at the end (``on_rebuild`` is called first when there are many)."""
        outer, self._merging = self._merging, True
        if not outer:
            self._bulk = BulkMerge.start(self.conn)
        try:
            yield
            if not outer and self._bulk is not None:
                self._bulk.flush()
        finally:
            self._merging = outer
            if not outer:
                self._bulk = None
        if not outer:
            large = len(self.stale) >= _DOCUMENT_BATCH
            if on_rebuild is not None and large:
                on_rebuild()
            self.flush_documents()
            if large:
                # Fresh statistics for the planner: without them, right after a large import it
                # scans every search document instead of using the trigram indexes (650 ms for a
                # one-hit search at 100,000 entities) until autovacuum gets to the tables.
                self.conn.execute("ANALYZE entities, observations, relations, entity_search")

    def add_observations(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[AddedObservations]:
        results: list[AddedObservations] = []
        for name, contents in items:
            wanted = unique(contents)
            # The lookup and the insert go together (one round trip in the pipeline); the insert
            # adds nothing when the entity does not exist, and rows go in in the given order.
            lookup = self.conn.execute("SELECT id FROM entities WHERE name_key = %s", (key(name),))
            inserted = self.conn.execute(
                "INSERT INTO observations (entity_id, content, content_key) "
                "SELECT e.id, c.content, c.content_key FROM entities e, "
                "unnest(%s::text[], %s::bytea[]) WITH ORDINALITY AS c(content, content_key, n) "
                "WHERE e.name_key = %s ORDER BY c.n "
                "ON CONFLICT (entity_id, content_key) DO NOTHING RETURNING content_key",
                ([encode(c) for c in wanted], [key(c) for c in wanted], key(name))) if wanted else None
            row = lookup.fetchone()
            if row is None:
                raise EntityNotFound(name)
            fresh = {bytes(k) for (k,) in inserted.fetchall()} if inserted is not None else set()
            added = [c for c in wanted if key(c) in fresh]
            if added:
                self._touch(int(row[0]))
            results.append(AddedObservations(name, added))
        return results

    def _touch(self, entity_id: int) -> None:
        """Record that the entity's observations changed now (its ``updated_at``: what ``since``
        reads); its search document is rewritten at the end of the write."""
        self.conn.execute("UPDATE entities SET updated_at = clock_timestamp() WHERE id = %s", (entity_id,))
        self.changed = True
        self.stale.add(entity_id)

    def delete_entities(self, names: Sequence[str]) -> DeleteEntitiesResult:
        requested = unique(names)
        keys = [key(n) for n in requested]
        # Both deletes are sent before either result is read (one round trip in the pipeline).
        entities = self.conn.execute("DELETE FROM entities WHERE name_key = ANY(%s) RETURNING name", (keys,))
        # A materialized inverse goes with its primary (both name the entity) and is not counted.
        touching = self.conn.execute("DELETE FROM relations WHERE from_key = ANY(%s) OR to_key = ANY(%s) "
                                     "RETURNING inverse_of", (keys, keys))
        gone = {decode(n) for (n,) in entities.fetchall()}
        deleted = [n for n in requested if n in gone]
        relations = touching.fetchall()
        if gone or relations:
            self.changed = True
        primaries = sum(1 for (inverse_of,) in relations if inverse_of is None)
        return DeleteEntitiesResult(len(requested), deleted, [n for n in requested if n not in gone], primaries)

    def delete_observations(self, items: Sequence[tuple[str, Sequence[str]]]) -> DeleteObservationsResult:
        out = DeleteObservationsResult()
        for name, observations in items:
            wanted = unique(observations)
            # The lookup and the delete go together (one round trip in the pipeline).
            lookup = self.conn.execute("SELECT id FROM entities WHERE name_key = %s", (key(name),))
            removed = self.conn.execute(
                "DELETE FROM observations WHERE entity_id = (SELECT id FROM entities WHERE name_key = %s) "
                "AND content_key = ANY(%s) RETURNING content_key", (key(name), [key(c) for c in wanted]))
            row = lookup.fetchone()
            gone = {bytes(k) for (k,) in removed.fetchall()}
            if row is None:
                out.results.append(DeletedObservations(name, len(observations), [], found=False))
                continue
            deleted = [c for c in wanted if key(c) in gone]
            if deleted:
                self._touch(int(row[0]))
            out.results.append(DeletedObservations(name, len(observations), deleted))
        return out

    def delete_relations(self, relations: Sequence[Relation]) -> DeleteRelationsResult:
        deleted: list[Relation] = []
        for relation in relations:
            row = self._one(f"DELETE FROM relations WHERE relation_key = %s RETURNING {_RELATION_COLUMNS}",
                            (relation_key(*relation.key),))
            if row is not None:
                deleted.append(_relation(row))
        if deleted:
            self.changed = True
        return DeleteRelationsResult(len(relations), deleted)

    def _replace_observation(self, observation_id: int, content: str) -> None:
        self.conn.execute("UPDATE observations SET content = %s, content_key = %s, updated_at = clock_timestamp() "
                          "WHERE id = %s", (encode(content), key(content), observation_id))

    def update_observations(self, updates: Sequence[ObservationUpdate]) -> list[UpdatedObservations]:
        grouped: dict[str, list[tuple[str, str]]] = {}
        for update in updates:
            # The entity, whether it has the replacement already and the match's row, in one
            # round trip (the edits of earlier updates were sent before it: it sees them).
            row = self._one("SELECT e.id, EXISTS (SELECT 1 FROM observations WHERE entity_id = e.id AND "
                            "content_key = %s), (SELECT id FROM observations WHERE entity_id = e.id AND "
                            "content_key = %s) FROM entities e WHERE e.name_key = %s",
                            (key(update.replacement), key(update.match), key(update.entity_name)))
            if row is None:
                raise EntityNotFound(update.entity_name)
            entity_id, taken, observation_id = int(row[0]), bool(row[1]), row[2]
            if taken:
                raise Conflict(f"entity {update.entity_name} already has the observation {update.replacement!r}; "
                               f"nothing was changed")
            if observation_id is None:
                raise Conflict(f"entity {update.entity_name} has no observation {update.match!r}; "
                               f"nothing was changed")
            self._replace_observation(int(observation_id), update.replacement)
            self._touch(entity_id)
            grouped.setdefault(update.entity_name, []).append((update.match, update.replacement))
        return [UpdatedObservations(name, items) for name, items in grouped.items()]

    def update_relation_weights(self, items: Sequence[tuple[Relation, float]]) -> list[WeightChange]:
        changes: list[WeightChange] = []
        for relation, evidence in items:
            row = self._one("SELECT id, weight FROM relations WHERE relation_key = %s FOR UPDATE",
                            (relation_key(*relation.key),))
            if row is None:
                raise RelationNotFound(*relation.key)
            previous = float(row[1])
            weight = (previous + evidence) / 2
            if weight != previous:   # equal evidence changes nothing: nothing written (graph.py)
                self.conn.execute("UPDATE relations SET weight = %s, updated_at = clock_timestamp() WHERE id = %s",
                                  (weight, row[0]))
                self.changed = True
            changes.append(WeightChange(Relation(*relation.key, weight), previous, evidence))
        return changes

    # -- typed tools --------------------------------------------------------------------------------

    def entity_type(self, name: str) -> str | None:
        row = self._one("SELECT entity_type FROM entities WHERE name_key = %s", (key(name),))
        return None if row is None else decode(row[0])

    def relations_from(self, source: str, relation_type: str) -> list[Relation]:
        rows = self._rows(f"SELECT {_RELATION_COLUMNS} FROM relations WHERE from_key = %s AND relation_type = %s "
                          f"ORDER BY id", (key(source), encode(relation_type)))
        return relations_of(rows)

    # -- the MemoryMesh profile and materialized inverses (SQLite: migrations 0007) --------------

    def set_entity_type(self, name: str, entity_type: str) -> bool:
        row = self._one("UPDATE entities SET entity_type = %s, updated_at = clock_timestamp() "
                        "WHERE name_key = %s AND entity_type <> %s RETURNING id",
                        (encode(entity_type), key(name), encode(entity_type)))
        if row is None:
            self._require_entity(name)
            return False
        self.changed = True
        self.stale.add(int(row[0]))
        return True

    def replace_observations(self, name: str, contents: Sequence[str]) -> bool:
        """As :func:`graph_memory.db.graph.replace_observations`: kept observations keep their rows
        when the order allows it, else every row is written again in the new order."""
        entity_id = self._require_entity(name)
        wanted = unique(contents)
        current = [decode(c) for (c,) in self._rows(
            "SELECT content FROM observations WHERE entity_id = %s ORDER BY id", (entity_id,))]
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
            self.conn.execute("DELETE FROM observations WHERE entity_id = %s AND content_key = ANY(%s)",
                              (entity_id, [key(c) for c in gone]))
        self.insert_observations([(entity_id, c) for c in fresh])
        self._touch(entity_id)
        return True

    def find_relation(self, source: str, target: str, relation_type: str) -> Relation | None:
        row = self._one(f"SELECT {_RELATION_COLUMNS} FROM relations WHERE relation_key = %s",
                        (relation_key(source, target, relation_type),))
        return None if row is None else _relation(row)

    def move_relation(self, key: tuple[str, str, str], new_key: tuple[str, str, str],
                      evidence: float | None) -> tuple[Relation, Relation]:
        row = self._one("SELECT id, weight FROM relations WHERE relation_key = %s FOR UPDATE", (relation_key(*key),))
        if row is None:
            raise RelationNotFound(*key)
        before = Relation(*key, float(row[1]))
        for old, new in ((key[0], new_key[0]), (key[1], new_key[1])):
            if new != old:
                self._require_entity(new)
        if new_key != key and self.find_relation(*new_key) is not None:
            raise Conflict(f"Relation {new_key[0]} -[{new_key[2]}]-> {new_key[1]} already exists; delete one of "
                           f"the two first, or update that one")
        weight = before.weight if evidence is None else (before.weight + evidence) / 2
        if new_key == key:
            self.conn.execute("UPDATE relations SET weight = %s WHERE id = %s", (weight, row[0]))
        else:
            # A re-pointed relation is an ordinary one, and the inverse it had no longer fits it.
            self.conn.execute("DELETE FROM relations WHERE inverse_of = %s", (row[0],))
            source, target, kind = new_key
            self.conn.execute(
                "UPDATE relations SET from_name = %s, to_name = %s, relation_type = %s, from_key = %s, to_key = %s, "
                "relation_key = %s, weight = %s, inverse_of = NULL WHERE id = %s",
                (encode(source), encode(target), encode(kind), _key(source), _key(target),
                 relation_key(*new_key), weight, row[0]))
        self.changed = True
        return before, Relation(*new_key, weight)

    def create_inverses(self, relations: Sequence[Relation], inverses: Mapping[str, str]) -> list[Relation]:
        made: list[Relation] = []
        for relation in relations:
            inverse_type = inverses.get(relation.relation_type)
            if inverse_type is None:
                continue
            inverse = Relation(relation.target, relation.source, inverse_type, relation.weight)
            row = self._one(
                "INSERT INTO relations (from_name, to_name, relation_type, from_key, to_key, relation_key, weight, "
                "inverse_of) SELECT %s, %s, %s, %s, %s, %s, %s, id FROM relations WHERE relation_key = %s "
                "ON CONFLICT (relation_key) DO NOTHING RETURNING id",
                (encode(inverse.source), encode(inverse.target), encode(inverse_type), _key(inverse.source),
                 _key(inverse.target), relation_key(*inverse.key), inverse.weight, relation_key(*relation.key)))
            if row is not None:
                made.append(inverse)
                self.changed = True
        return made

    def inverse_links(self) -> dict[tuple[str, str, str], str]:
        rows = self._rows("SELECT i.from_name, i.to_name, i.relation_type, p.relation_type FROM relations i "
                          "JOIN relations p ON p.id = i.inverse_of")
        return {(decode(a), decode(b), decode(t)): decode(primary) for a, b, t, primary in rows}

    def link_inverse(self, key: tuple[str, str, str], primary_type: str) -> bool:
        row = self._one(
            "UPDATE relations SET inverse_of = p.id FROM relations p "
            "WHERE p.relation_key = %s AND p.inverse_of IS NULL AND relations.relation_key = %s "
            "AND relations.id <> p.id RETURNING relations.id",
            (relation_key(key[1], key[0], primary_type), relation_key(*key)))
        if row is None:
            return False
        self.changed = True
        return True

    # -- whole rows, times included (graph-memory copy; db/rows.py) --------------------------------

    def stored_entities(self, after: int, limit: int) -> list[StoredEntity]:
        return [StoredEntity(int(i), decode(n), decode(t), c, u) for i, n, t, c, u in self._rows(
            f"SELECT id, name, entity_type, {stored_time('created_at')}, {stored_time('updated_at')} FROM entities "
            f"WHERE id > %s ORDER BY id LIMIT %s", (after, limit))]

    def stored_observations(self, after: int, limit: int) -> list[StoredObservation]:
        return [StoredObservation(int(i), int(e), decode(content), c, u) for i, e, content, c, u in self._rows(
            f"SELECT id, entity_id, content, {stored_time('created_at')}, {stored_time('updated_at')} "
            f"FROM observations WHERE id > %s ORDER BY id LIMIT %s", (after, limit))]

    def stored_relations(self, after: int, limit: int) -> list[StoredRelation]:
        return [StoredRelation(int(i), decode(a), decode(b), decode(t), float(w), c, u) for i, a, b, t, w, c, u in
                self._rows(f"SELECT id, from_name, to_name, relation_type, weight, {stored_time('created_at')}, "
                           f"{stored_time('updated_at')} FROM relations WHERE id > %s ORDER BY id LIMIT %s",
                           (after, limit))]

    def restore_entities(self, rows: Sequence[StoredEntity]) -> list[int]:
        if not rows:
            return []
        self._write_pending()
        # Ids drawn first (one round trip), then the rows in one statement (times as
        # milliseconds text or None: timestamptz keeps them exactly).
        ids = next_ids(self.conn, "entities", len(rows))
        insert_rows(self.conn, "entities", ENTITY_COLUMNS,
                    [(i, encode(r.name), key(r.name), encode(r.entity_type), r.created_at, r.updated_at)
                     for i, r in zip(ids, rows, strict=True)])
        self.changed = True
        self.stale.update(ids)
        return ids

    def restore_observations(self, rows: Sequence[StoredObservation]) -> None:
        if not rows:
            return
        self._write_pending()
        insert_rows(self.conn, "observations", OBSERVATION_COLUMNS,
                    [(r.entity_id, encode(r.content), key(r.content), r.created_at, r.updated_at) for r in rows])
        self.changed = True
        self.stale.update(r.entity_id for r in rows)

    def restore_relations(self, rows: Sequence[StoredRelation]) -> None:
        if not rows:
            return
        self._write_pending()
        ids = next_ids(self.conn, "relations", len(rows))
        insert_rows(self.conn, "relations", RELATION_COLUMNS,
                    [(i, encode(r.source), encode(r.target), encode(r.relation_type), key(r.source), key(r.target),
                      relation_key(r.source, r.target, r.relation_type), r.weight, r.created_at, r.updated_at)
                     for i, r in zip(ids, rows, strict=True)])
        self.changed = True

    # -- pages, since and times (SQLite: migrations 0006, db/pages.py) ----------------------------

    def read_page(self, since: str | None, after: ReadPosition | None,
                  limit: int | None) -> tuple[GraphSlice, ReadPosition | None]:
        from graph_memory.db import pages
        from graph_memory.db.postgres.pages import PostgresPages

        return pages.read_page(PostgresPages(self), since, after, limit)

    def search_page(self, query: str, mode: Mode, since: str | None, after: SearchPosition | None,
                    limit: int | None) -> tuple[GraphSlice, SearchPosition | None]:
        from graph_memory.db import pages
        from graph_memory.db.postgres.pages import PostgresPages

        return pages.search_page(PostgresPages(self), query, mode, since, after, limit)

    def cursor_secret(self) -> bytes:
        row = self._one("SELECT secret FROM cursor_secret WHERE id = 1")
        return bytes(row[0]) if row is not None else b""

    def with_times(self, result: GraphSlice) -> GraphSlice:
        """As :func:`graph_memory.db.graph.with_times`: the times of the rows of ``result``
        (None where unknown)."""
        entities = result.entities + result.neighbors
        if entities:
            heads = {decode(row[0]): (int(row[1]), Times(row[2], row[3])) for row in self._rows(
                f"SELECT name, id, {stored_time('created_at')}, {stored_time('updated_at')} FROM entities "
                f"WHERE name_key = ANY(%s)", ([key(e.name) for e in entities],))}
            observed: dict[int, list[Times]] = {entity_id: [] for entity_id, _ in heads.values()}
            shared: dict[tuple[str | None, str | None], Times] = {}
            for entity_id, created, updated in self._rows(
                    f"SELECT entity_id, {stored_time('created_at')}, {stored_time('updated_at')} FROM observations "
                    f"WHERE entity_id = ANY(%s) ORDER BY id", (list(observed),)):
                times = shared.get((created, updated))
                if times is None:
                    times = shared[(created, updated)] = Times(created, updated)
                observed[entity_id].append(times)
            for entity in entities:
                entity_id, entity_times = heads[entity.name]
                entity.times = EntityTimes(entity_times, observed[entity_id])
        if result.relations:
            rows = self._rows(
                f"SELECT relation_key, {stored_time('created_at')}, {stored_time('coalesce(updated_at, created_at)')} "
                f"FROM relations WHERE relation_key = ANY(%s)", ([relation_key(*r.key) for r in result.relations],))
            times_of = {bytes(row[0]): Times(row[1], row[2]) for row in rows}
            result.relations = [Relation(r.source, r.target, r.relation_type, r.weight,
                                         times_of[relation_key(*r.key)]) for r in result.relations]
        return result

    # -- bounded reads for looking at the graph (SQLite: db/explore.py) ----------------------------

    def neighborhood(self, names: Sequence[str], hops: int, max_entities: int | None) -> Neighborhood:
        from graph_memory.db.postgres import explore

        return explore.neighborhood(self, list(names), hops, max_entities)

    def find_entities(self, query: str, mode: Mode, limit: int) -> list[Entity]:
        from graph_memory.db.postgres.search import search

        return search(self, query, mode, limit, related=False).entities

    def entity_page(self, name: str, max_items: int, offset: int = 0) -> EntityPage | None:
        from graph_memory.db.postgres import explore

        return explore.entity_page(self, name, max_items, offset)

    def type_counts(self, limit: int) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
        from graph_memory.db.postgres import explore

        return explore.type_counts(self, limit)

    def totals(self) -> dict[str, int]:
        row = self._one("SELECT (SELECT count(*) FROM entities), (SELECT count(*) FROM observations), "
                        "(SELECT count(*) FROM relations)")
        assert row is not None
        return {"entities": int(row[0]), "observations": int(row[1]), "relations": int(row[2])}

    def most_connected(self, limit: int) -> list[tuple[str, str | None, int]]:
        from graph_memory.db.postgres import explore

        return explore.most_connected(self, limit)

    def recent_changes(self, limit: int) -> list[Change]:
        from graph_memory.db.postgres import explore

        return explore.recent_changes(self, limit)

    # -- legacy-import records ----------------------------------------------------------------------

    def _has_table(self, name: str) -> bool:
        return self._one("SELECT to_regclass(%s) IS NOT NULL", (name,)) == (True,)

    def import_records(self) -> list[ImportRecord]:
        if not self._has_table("legacy_imports"):
            return []
        return [ImportRecord(*row) for row in self._rows(
            f"SELECT {_record_columns()} FROM legacy_imports ORDER BY id")]

    def latest_record(self, path: str) -> ImportRecord | None:
        row = self._one(f"SELECT {_record_columns()} FROM legacy_imports WHERE path = %s ORDER BY id DESC LIMIT 1",
                        (encode(path),))
        return ImportRecord(*row) if row is not None else None

    def first_start_action(self) -> str | None:
        if not self._has_table("legacy_first_start"):
            return None
        row = self._one("SELECT action FROM legacy_first_start WHERE id = 1")
        return str(row[0]) if row is not None and row[0] is not None else None

    def take_first_start(self, action: str) -> bool:
        return self._one("UPDATE legacy_first_start SET action = NULL WHERE id = 1 AND action = %s RETURNING 1",
                         (action,)) is not None

    def insert_record(self, kind: str, *, path: str, size_bytes: int, sha256: str, mtime: str,
                      mtime_ns: int, counts: tuple[int | None, int | None, int | None],
                      line_digests: bytes | None = None) -> None:
        columns = "kind, path, size_bytes, sha256, mtime, mtime_ns, entities, observations, relations"
        values: list[Any] = [kind, encode(path), size_bytes, sha256, mtime, mtime_ns, *counts]
        if line_digests is not None:   # named only then: a record without them suits every schema
            columns += ", line_digests"
            values.append(line_digests)
        self.conn.execute(f"INSERT INTO legacy_imports ({columns}) VALUES ({', '.join(['%s'] * len(values))})",
                          values)
        if line_digests is not None:
            self.conn.execute(FORGET_OLDER_DIGESTS, (encode(path), encode(path)))

    def line_digests(self, path: str) -> bytes | None:
        row = self._one("SELECT line_digests FROM legacy_imports WHERE path = %s ORDER BY id DESC LIMIT 1",
                        (encode(path),))
        return None if row is None or row[0] is None else bytes(row[0])

    def restore_record(self, record: ImportRecord) -> None:
        self.conn.execute(f"INSERT INTO legacy_imports ({RECORD_COLUMNS}) "
                          f"VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s::timestamptz)",
                          (record.kind, None if record.path is None else encode(record.path), record.size_bytes,
                           record.sha256, record.mtime, record.mtime_ns, record.entities, record.observations,
                           record.relations, record.recorded_at))

    def set_first_start(self, action: str | None) -> None:
        self.conn.execute("UPDATE legacy_first_start SET action = %s WHERE id = 1", (action,))

    # -- search documents ---------------------------------------------------------------------------

    def flush_documents(self) -> None:
        """Rewrite the search documents of the entities this transaction changed (``stale``),
        each once; inside a merge, nothing until it ends."""
        if self._merging or not self.stale:
            return
        ids = sorted(self.stale)
        self.stale.clear()
        batches = [ids[start:start + _DOCUMENT_BATCH] for start in range(0, len(ids), _DOCUMENT_BATCH)]
        select = f"SELECT {HEAD} FROM entities e WHERE e.id = ANY(%s)"
        # One batch read ahead: the server reads the next batch (and writes the last documents)
        # while this process lower-cases the current one.
        reading = self.conn.execute(select, (batches[0],))
        for number in range(len(batches)):
            ahead = self.conn.execute(select, (batches[number + 1],)) if number + 1 < len(batches) else None
            rows = [(int(i), encode(decode(n).lower()), encode(decode(t).lower()), document([decode(c) for c in obs]))
                    for i, n, t, obs in reading.fetchall()]
            insert_rows(self.conn, "entity_search", _DOCUMENT_COLUMNS, rows,
                        suffix="ON CONFLICT (entity_id) DO UPDATE SET name = excluded.name, "
                               "entity_type = excluded.entity_type, observations = excluded.observations")
            if ahead is not None:
                reading = ahead

def _record_columns() -> str:
    return RECORD_COLUMNS.replace("recorded_at", _RECORDED_AT)

