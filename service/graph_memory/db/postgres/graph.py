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
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg

from graph_memory.db.backup import GraphCounts
from graph_memory.db.graph import unique
from graph_memory.db.postgres.text import decode, document, encode, key, relation_key
from graph_memory.db.records import RECORD_COLUMNS, ImportRecord
from graph_memory.errors import Conflict, EntityNotFound, RelationNotFound
from graph_memory.models import (
    AddedObservations,
    DeletedObservations,
    DeleteEntitiesResult,
    DeleteObservationsResult,
    DeleteRelationsResult,
    Entity,
    GraphSlice,
    Mode,
    ObservationUpdate,
    PrefixEdit,
    Relation,
    UpdatedObservations,
    WeightChange,
)

Connection = psycopg.Connection[tuple[Any, ...]]

# Documents are rewritten this many entities per statement (a merge may touch 100,000).
_DOCUMENT_BATCH = 1000
_RELATION_COLUMNS = "from_name, to_name, relation_type, weight"
_RECORDED_AT = "to_char(recorded_at AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')"


def _relation(row: Sequence[Any]) -> Relation:
    return Relation(decode(row[0]), decode(row[1]), decode(row[2]), float(row[3]))


class PostgresGraph:
    """:class:`~graph_memory.db.backend.Graph` on one psycopg connection inside a transaction of
    :class:`~graph_memory.db.postgres.backend.PostgresBackend`.

    ``changed`` is set when the transaction changed the graph (the backend then notifies other
    replicas); ``stale`` holds the ids of entities whose search documents must be rewritten."""

    __slots__ = ("_merging", "changed", "conn", "stale")

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.changed = False
        self.stale: set[int] = set()
        self._merging = False

    def _rows(self, sql: str, params: Sequence[Any] | dict[str, Any] = ()) -> list[tuple[Any, ...]]:
        return self.conn.execute(sql, params).fetchall()

    def _one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
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
        heads = self._rows(f"SELECT e.id, e.name, e.entity_type FROM entities e {where} ORDER BY e.id", params)
        return self._with_observations(heads)

    def _with_observations(self, heads: Sequence[tuple[Any, ...]]) -> list[Entity]:
        """Entities for ``(id, name, type)`` rows, in their order, with their observations read
        in one query."""
        if not heads:
            return []
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
        return [_relation(r) for r in rows]

    def slice(self, entities: list[Entity]) -> GraphSlice:
        """Entities plus the relations touching them and the neighbors those relations reach."""
        names = [e.name for e in entities]
        relations = self._relations_touching(names)
        inside = set(names)
        far = unique(n for r in relations for n in (r.source, r.target) if n not in inside)
        return GraphSlice(entities, relations, self._entities_named(far))

    def read_graph(self) -> GraphSlice:
        heads = self._rows("SELECT id, name, entity_type FROM entities ORDER BY id")
        by_id = {int(row[0]): Entity(decode(row[1]), decode(row[2]), []) for row in heads}
        for entity_id, content in self._rows("SELECT entity_id, content FROM observations ORDER BY id"):
            by_id[entity_id].observations.append(decode(content))
        relations = [_relation(r) for r in self._rows(f"SELECT {_RELATION_COLUMNS} FROM relations ORDER BY id")]
        return GraphSlice(list(by_id.values()), relations, [])

    def open_nodes(self, names: Sequence[str]) -> GraphSlice:
        return self.slice(self._entities_named(names))

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
            entity_id = self.insert_entity(entity.name, entity.entity_type)
            if entity_id is None:
                continue
            observations = unique(entity.observations)
            self.insert_observations([(entity_id, o) for o in observations])
            created.append(Entity(entity.name, entity.entity_type, observations))
        return created

    def create_relations(self, relations: Sequence[Relation]) -> list[Relation]:
        names = unique(n for r in relations for n in (r.source, r.target))
        if names:
            # FOR KEY SHARE: a concurrent delete of an endpoint waits for this transaction (and
            # then fails to serialize), so no relation is created to an entity deleted meanwhile.
            known = {bytes(k) for (k,) in self._rows(
                "SELECT name_key FROM entities WHERE name_key = ANY(%s) FOR KEY SHARE", ([key(n) for n in names],))}
            for name in names:
                if key(name) not in known:
                    raise EntityNotFound(name)
        return [r for r in relations if self.insert_relation(r)]

    def insert_entity(self, name: str, entity_type: str) -> int | None:
        row = self._one("INSERT INTO entities (name, name_key, entity_type) VALUES (%s, %s, %s) "
                        "ON CONFLICT (name_key) DO NOTHING RETURNING id",
                        (encode(name), key(name), encode(entity_type)))
        if row is None:
            return None
        entity_id = int(row[0])
        self.changed = True
        self.stale.add(entity_id)
        return entity_id

    def find_entity(self, name: str) -> tuple[int, str] | None:
        row = self._one("SELECT id, entity_type FROM entities WHERE name_key = %s", (key(name),))
        return None if row is None else (int(row[0]), decode(row[1]))

    def observation_contents(self, entity_id: int) -> set[str]:
        return {decode(c) for (c,) in self._rows("SELECT content FROM observations WHERE entity_id = %s",
                                                 (entity_id,))}

    def insert_observations(self, rows: Iterable[tuple[int, str]]) -> None:
        params = [(entity_id, encode(content), key(content)) for entity_id, content in rows]
        if not params:
            return
        with self.conn.cursor() as cur:
            cur.executemany("INSERT INTO observations (entity_id, content, content_key) VALUES (%s, %s, %s)", params)
        self.changed = True
        self.stale.update(entity_id for entity_id, _, _ in params)

    def insert_relation(self, relation: Relation) -> bool:
        row = self._one(
            "INSERT INTO relations (from_name, to_name, relation_type, from_key, to_key, relation_key, weight) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (relation_key) DO NOTHING RETURNING id",
            (encode(relation.source), encode(relation.target), encode(relation.relation_type), key(relation.source),
             key(relation.target), relation_key(*relation.key), relation.weight))
        if row is None:
            return False
        self.changed = True
        return True

    def relation_exists(self, relation: Relation) -> bool:
        return self._one("SELECT 1 FROM relations WHERE relation_key = %s", (relation_key(*relation.key),)) is not None

    @contextmanager
    def merging(self, entities: int, *, on_rebuild: Callable[[], None] | None = None) -> Iterator[None]:
        """Around a merge (an import): the documents of every entity it touched are written once,
        at the end (``on_rebuild`` is called first when there are many)."""
        outer, self._merging = self._merging, True
        try:
            yield
        finally:
            self._merging = outer
        if not outer:
            if on_rebuild is not None and len(self.stale) >= _DOCUMENT_BATCH:
                on_rebuild()
            self.flush_documents()

    def add_observations(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[AddedObservations]:
        results: list[AddedObservations] = []
        for name, contents in items:
            entity_id = self._require_entity(name)
            added: list[str] = []
            for content in unique(contents):
                row = self._one("INSERT INTO observations (entity_id, content, content_key) VALUES (%s, %s, %s) "
                                "ON CONFLICT (entity_id, content_key) DO NOTHING RETURNING id",
                                (entity_id, encode(content), key(content)))
                if row is not None:
                    added.append(content)
            if added:
                self.changed = True
                self.stale.add(entity_id)
            results.append(AddedObservations(name, added))
        return results

    def delete_entities(self, names: Sequence[str]) -> DeleteEntitiesResult:
        requested = unique(names)
        keys = [key(n) for n in requested]
        gone = {decode(n) for (n,) in self._rows("DELETE FROM entities WHERE name_key = ANY(%s) RETURNING name",
                                                 (keys,))}
        deleted = [n for n in requested if n in gone]
        relations = self._rows("DELETE FROM relations WHERE from_key = ANY(%s) OR to_key = ANY(%s) RETURNING id",
                               (keys, keys))
        if gone or relations:
            self.changed = True
        return DeleteEntitiesResult(len(requested), deleted, [n for n in requested if n not in gone], len(relations))

    def delete_observations(self, items: Sequence[tuple[str, Sequence[str]]]) -> DeleteObservationsResult:
        out = DeleteObservationsResult()
        for name, observations in items:
            row = self._one("SELECT id FROM entities WHERE name_key = %s", (key(name),))
            if row is None:
                out.results.append(DeletedObservations(name, len(observations), [], found=False))
                continue
            deleted: list[str] = []
            for content in unique(observations):
                if self._one("DELETE FROM observations WHERE entity_id = %s AND content_key = %s RETURNING id",
                             (row[0], key(content))) is not None:
                    deleted.append(content)
            if deleted:
                self.changed = True
                self.stale.add(int(row[0]))
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
            entity_id = self._require_entity(update.entity_name)
            if self._one("SELECT 1 FROM observations WHERE entity_id = %s AND content_key = %s",
                         (entity_id, key(update.replacement))) is not None:
                raise Conflict(f"entity {update.entity_name} already has the observation {update.replacement!r}; "
                               f"nothing was changed")
            row = self._one("SELECT id FROM observations WHERE entity_id = %s AND content_key = %s",
                            (entity_id, key(update.match)))
            if row is None:
                raise Conflict(f"entity {update.entity_name} has no observation {update.match!r}; "
                               f"nothing was changed")
            self._replace_observation(int(row[0]), update.replacement)
            self.changed = True
            self.stale.add(entity_id)
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
            self.conn.execute("UPDATE relations SET weight = %s WHERE id = %s", (weight, row[0]))
            self.changed = True
            changes.append(WeightChange(Relation(*relation.key, weight), previous, evidence))
        return changes

    # -- typed tools --------------------------------------------------------------------------------

    def entity_type(self, name: str) -> str | None:
        row = self._one("SELECT entity_type FROM entities WHERE name_key = %s", (key(name),))
        return None if row is None else decode(row[0])

    def _starting_with(self, entity_id: int, prefix: str) -> list[tuple[int, str]]:
        """``(id, content)`` of the entity's observations starting with ``prefix``, in position order.
        The escaping is prefix-free, so a prefix of the encoded text is the encoded prefix."""
        stored = encode(prefix)
        return [(int(i), decode(c)) for i, c in self._rows(
            "SELECT id, content FROM observations WHERE entity_id = %s AND left(content, %s) = %s ORDER BY id",
            (entity_id, len(stored), stored))]

    def set_observation_by_prefix(self, name: str, prefix: str, content: str) -> PrefixEdit:
        entity_id = self._require_entity(name)
        if self._one("SELECT 1 FROM observations WHERE entity_id = %s AND content_key = %s",
                     (entity_id, key(content))) is not None:
            return PrefixEdit("unchanged", content)
        found = self._starting_with(entity_id, prefix)
        self.changed = True
        self.stale.add(entity_id)
        if not found:
            self.insert_observations([(entity_id, content)])
            return PrefixEdit("added", content)
        observation_id, old = found[0]
        self._replace_observation(observation_id, content)
        return PrefixEdit("updated", content, old)

    def delete_observations_by_prefix(self, name: str, prefix: str) -> list[str]:
        entity_id = self._require_entity(name)
        found = self._starting_with(entity_id, prefix)
        if found:
            self.conn.execute("DELETE FROM observations WHERE id = ANY(%s)", ([i for i, _ in found],))
            self.changed = True
            self.stale.add(entity_id)
        return [content for _, content in found]

    def relations_from(self, source: str, relation_type: str) -> list[Relation]:
        rows = self._rows(f"SELECT {_RELATION_COLUMNS} FROM relations WHERE from_key = %s AND relation_type = %s "
                          f"ORDER BY id", (key(source), encode(relation_type)))
        return [_relation(r) for r in rows]

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
                      mtime_ns: int, counts: tuple[int | None, int | None, int | None]) -> None:
        self.conn.execute("INSERT INTO legacy_imports (kind, path, size_bytes, sha256, mtime, mtime_ns, entities, "
                          "observations, relations) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                          (kind, encode(path), size_bytes, sha256, mtime, mtime_ns, *counts))

    # -- search documents ---------------------------------------------------------------------------

    def flush_documents(self) -> None:
        """Rewrite the search documents of the entities this transaction changed (``stale``),
        each once; inside a merge, nothing until it ends."""
        if self._merging or not self.stale:
            return
        ids = sorted(self.stale)
        self.stale.clear()
        for start in range(0, len(ids), _DOCUMENT_BATCH):
            batch = ids[start:start + _DOCUMENT_BATCH]
            heads = {int(i): (decode(n), decode(t)) for i, n, t in self._rows(
                "SELECT id, name, entity_type FROM entities WHERE id = ANY(%s)", (batch,))}
            observations: dict[int, list[str]] = {i: [] for i in heads}
            for entity_id, content in self._rows(
                    "SELECT entity_id, content FROM observations WHERE entity_id = ANY(%s) ORDER BY id", (batch,)):
                observations[entity_id].append(decode(content))
            rows = [(i, encode(n.lower()), encode(t.lower()), document(observations[i])) for i, (n, t) in heads.items()]
            with self.conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO entity_search (entity_id, name, entity_type, observations) VALUES (%s, %s, %s, %s) "
                    "ON CONFLICT (entity_id) DO UPDATE SET name = excluded.name, entity_type = excluded.entity_type, "
                    "observations = excluded.observations", rows)


def _record_columns() -> str:
    return RECORD_COLUMNS.replace("recorded_at", _RECORDED_AT)

