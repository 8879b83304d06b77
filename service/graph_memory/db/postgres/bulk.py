"""Writing many rows to PostgreSQL at once: what makes an import or a ``graph-memory copy`` of
100,000 entities take seconds rather than minutes.

Row at a time, a merge waits for one round trip per entity and per relation (the primitive must
say whether the row was new) and the server runs one statement per row. Here, instead:

* :func:`insert_rows` writes a whole batch as one ``INSERT … SELECT FROM unnest(arrays)``
  statement, its arrays sent in binary (COPY would be as fast, but psycopg cannot run COPY in
  the pipeline every call runs in);
* :class:`BulkMerge` (the state of one merge, :meth:`PostgresGraph.merging
  <graph_memory.db.postgres.graph.PostgresGraph.merging>`) answers the merge primitives from what
  it knows instead of asking the server: the keys of the entities and relations stored before the
  merge (read once), the rows the merge inserted, and row ids drawn from the tables' identity
  sequences a block at a time (so ids still grow in creation order). The rows are buffered and
  written by :func:`insert_rows` when a batch is full or before anything reads the database.

Memory: a 32-byte key per entity and relation stored before the merge and per relation it
inserts, the set of the names it inserts (the merge holds those strings anyway) and one batch.

Everything stays inside the caller's one transaction: a refused file or a failed copy writes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from graph_memory.db.postgres.text import encode, key, relation_key
from graph_memory.models import Relation

Connection = psycopg.Connection[tuple[Any, ...]]

# Rows per statement (and ids drawn per sequence call): beyond a few thousand a batch buys little.
BULK_ROWS = 5_000

# The columns :func:`insert_rows` writes, with the PostgreSQL array type each is sent as.
ENTITY_COLUMNS = (("id", "bigint"), ("name", "text"), ("name_key", "bytea"), ("entity_type", "text"),
                  ("created_at", "timestamptz"), ("updated_at", "timestamptz"))
OBSERVATION_COLUMNS = (("entity_id", "bigint"), ("content", "text"), ("content_key", "bytea"),
                       ("created_at", "timestamptz"), ("updated_at", "timestamptz"))
RELATION_COLUMNS = (("id", "bigint"), ("from_name", "text"), ("to_name", "text"), ("relation_type", "text"),
                    ("from_key", "bytea"), ("to_key", "bytea"), ("relation_key", "bytea"),
                    ("weight", "double precision"), ("created_at", "timestamptz"), ("updated_at", "timestamptz"))


def insert_rows(conn: Connection, table: str, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[Any]],
                *, suffix: str = "") -> None:
    """Insert ``rows`` (tuples in the order of ``columns``: ``(name, type)``; times as ISO text
    or None) into ``table`` with one statement, in row order, without waiting for its reply (an
    error surfaces at the next read or at COMMIT, and fails the transaction). An ``id`` column is
    written as given (``OVERRIDING SYSTEM VALUE``); other identity columns take the next values.
    ``suffix``: SQL after the SELECT (e.g. ``ON CONFLICT …``)."""
    if not rows:
        return
    names = ", ".join(name for name, _ in columns)
    # Times travel as text (they are ISO text or None) and are cast on the server.
    arrays = ", ".join(f"%b::text[]::{kind}[]" if kind == "timestamptz" else f"%b::{kind}[]" for _, kind in columns)
    overriding = " OVERRIDING SYSTEM VALUE" if columns[0][0] == "id" else ""
    # unnest with several arrays keeps their order; ORDER BY ordinality makes the insert order
    # (and so the identity values drawn) follow the rows.
    sql = (f"INSERT INTO {table} ({names}){overriding} SELECT {names} FROM unnest({arrays}) "
           f"WITH ORDINALITY AS r ({names}, n) ORDER BY n {suffix}")
    conn.execute(sql, [list(column) for column in zip(*rows, strict=True)])


def next_ids(conn: Connection, table: str, count: int) -> list[int]:
    """``count`` new values of ``table``'s identity ``id``, ascending (one round trip)."""
    rows = conn.execute(f"SELECT nextval(pg_get_serial_sequence('{table}', 'id')) AS id "
                        f"FROM generate_series(1, %s) ORDER BY id", (count,)).fetchall()
    return [int(row[0]) for row in rows]


@dataclass(slots=True)
class BulkMerge:
    """What one merge knows and has not written yet (see the module docstring).

    ``stored_names``/``stored_relations``: the name and triple keys stored before the merge;
    ``entities``: the names of the entities the merge inserted; ``relations``: the triple keys of
    the relations it inserted (what they hold beyond that, the database is asked for, after the
    pending rows are written); the ``pending_*`` rows are not written yet."""

    conn: Connection
    stored_names: set[bytes]
    stored_relations: set[bytes]
    entities: set[str] = field(default_factory=set)
    relations: set[bytes] = field(default_factory=set)
    pending_entities: list[tuple[Any, ...]] = field(default_factory=list)
    pending_observations: list[tuple[Any, ...]] = field(default_factory=list)
    pending_relations: list[tuple[Any, ...]] = field(default_factory=list)
    _entity_ids: list[int] = field(default_factory=list)
    _relation_ids: list[int] = field(default_factory=list)

    @classmethod
    def start(cls, conn: Connection) -> BulkMerge:
        """The state of a merge into the graph ``conn``'s transaction sees (reads every entity
        and relation key once: 32 bytes each)."""
        names = {bytes(k) for (k,) in conn.execute("SELECT name_key FROM entities").fetchall()}
        relations = {bytes(k) for (k,) in conn.execute("SELECT relation_key FROM relations").fetchall()}
        return cls(conn, names, relations)

    @property
    def pending(self) -> bool:
        return bool(self.pending_entities or self.pending_observations or self.pending_relations)

    def insert_entity(self, name: str, entity_type: str) -> int | None:
        """As :meth:`Graph.insert_entity`: the new entity's id, or None when ``name`` exists.
        Times unknown (NULL), as every merge writes them."""
        if name in self.entities:
            return None
        name_key = key(name)
        if name_key in self.stored_names:
            return None
        if not self._entity_ids:
            self._entity_ids = self._draw("entities", len(self.entities))
        entity_id = self._entity_ids.pop()
        self.entities.add(name)
        self.pending_entities.append((entity_id, encode(name), name_key, encode(entity_type), None, None))
        self._full()
        return entity_id

    def insert_observations(self, rows: Sequence[tuple[int, str]]) -> None:
        """Observations ``(entity_id, content)`` the entities lack (the caller checked), times unknown."""
        self.pending_observations.extend((entity_id, encode(content), key(content), None, None)
                                         for entity_id, content in rows)
        self._full()

    def insert_relation(self, relation: Relation) -> bool:
        """As :meth:`Graph.insert_relation`, times unknown (NULL)."""
        triple = relation_key(*relation.key)
        if triple in self.relations or triple in self.stored_relations:
            return False
        if not self._relation_ids:
            self._relation_ids = self._draw("relations", len(self.relations))
        relation_id = self._relation_ids.pop()
        self.relations.add(triple)
        self.pending_relations.append((relation_id, encode(relation.source), encode(relation.target),
                                       encode(relation.relation_type), key(relation.source), key(relation.target),
                                       triple, relation.weight, None, None))
        self._full()
        return True

    def _draw(self, table: str, drawn: int) -> list[int]:
        """New ids of ``table``, the smallest last: as many as were drawn so far (at least 16, at
        most :data:`BULK_ROWS`), so a small import leaves no large gap in the ids."""
        return next_ids(self.conn, table, min(BULK_ROWS, max(16, drawn)))[::-1]

    def _full(self) -> None:
        if max(len(self.pending_entities), len(self.pending_observations), len(self.pending_relations)) >= BULK_ROWS:
            self.flush()

    def flush(self) -> None:
        """Write the pending rows (entities first: observations refer to them)."""
        insert_rows(self.conn, "entities", ENTITY_COLUMNS, self.pending_entities)
        insert_rows(self.conn, "observations", OBSERVATION_COLUMNS, self.pending_observations)
        insert_rows(self.conn, "relations", RELATION_COLUMNS, self.pending_relations)
        self.pending_entities.clear()
        self.pending_observations.clear()
        self.pending_relations.clear()
