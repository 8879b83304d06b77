"""The storage boundary: what the service (:mod:`graph_memory.service`) needs from a backend.

:class:`Backend` runs operations in transactions; inside one, :class:`Graph` offers the graph
operations with the reference server's semantics (the contract in ``docs/``). The SQLite
backend is :class:`SqliteBackend` over :class:`~graph_memory.db.store.Store`, with the SQL in
:mod:`graph_memory.db.graph` and :mod:`graph_memory.db.search`. A PostgreSQL backend (a later
issue) provides the same two protocols from its own subpackage (``db/postgres/``); its index,
retries and error translation stay behind them, as SQLite's trigram FTS5, WAL and apsw do here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Literal, Protocol, TypeVar

from graph_memory.db import explore, graph, index, pages, paths, records, search
from graph_memory.db.backup import (
    BackupResult,
    GraphCounts,
    RestoreResult,
    backup_database,
    database_files,
    graph_counts,
    restore_database,
)
from graph_memory.db.explore import Change, EntityPage, Neighborhood
from graph_memory.db.migrations import Migration, MigrationStatus, load_migrations
from graph_memory.db.paths import check_database_path
from graph_memory.db.records import ImportRecord
from graph_memory.db.rows import StoredEntity, StoredObservation, StoredRelation
from graph_memory.db.store import Connection, Store
from graph_memory.errors import OutputError, StoreError
from graph_memory.hints import graph_memory_command
from graph_memory.models import (
    AddedObservations,
    DeleteEntitiesResult,
    DeleteObservationsResult,
    DeleteRelationsResult,
    Entity,
    GraphSlice,
    Mode,
    ObservationUpdate,
    Relation,
    UpdatedObservations,
    WeightChange,
)
from graph_memory.paging import ReadPosition, SearchPosition
from graph_memory.settings import Settings

T = TypeVar("T")
# The requirement of pyproject.toml's `postgres` extra (test_postgres_driver_advice keeps them equal).
POSTGRES_DRIVER = "psycopg[binary,pool]>=3.2"

OpenMode = Literal["migrate", "unmigrated", "current", "readonly"]
"""How a command opens the database: ``migrate`` (serve, import: create it when missing and apply
pending migrations), ``unmigrated`` (``migrate``: as ``migrate``, applying nothing yet),
``current`` (export, dry runs: an existing database, read-only, refused
with the ``migrate`` command when migrations are pending), ``readonly`` (stats, healthcheck: an
existing database as it is, also with migrations pending; works for a user who can only read)."""


class Graph(Protocol):
    """The graph operations of one transaction. Errors are :class:`~graph_memory.errors.GraphError`
    subclasses (e.g. ``EntityNotFound`` refuses the whole call; the transaction rolls back)."""

    def read_graph(self) -> GraphSlice:
        """Every entity and relation."""
        ...

    def open_nodes(self, names: Sequence[str]) -> GraphSlice:
        """The named entities (unknown names skipped), the relations touching them, their neighbors."""
        ...

    def search(self, query: str, mode: Mode, limit: int | None) -> GraphSlice:
        """The entities ``query`` finds in ``mode`` (at most ``limit``), as :meth:`open_nodes`."""
        ...

    def read_page(self, since: str | None, after: ReadPosition | None,
                  limit: int | None) -> tuple[GraphSlice, ReadPosition | None]:
        """A page of read_graph (entities then relations, at most ``limit`` together; only those
        changed at or after ``since``) and where the next starts, None after the last
        (semantics: :mod:`graph_memory.db.pages`)."""
        ...

    def search_page(self, query: str, mode: Mode, since: str | None, after: SearchPosition | None,
                    limit: int | None) -> tuple[GraphSlice, SearchPosition | None]:
        """A page of search_nodes (at most ``limit`` matches changed at or after ``since``) and
        where the next starts, None after the last."""
        ...

    def with_times(self, result: GraphSlice) -> GraphSlice:
        """``result`` with the created/updated times of its rows loaded (None where unknown)."""
        ...

    def cursor_secret(self) -> bytes:
        """The database's own key for signing paging cursors (never leaves the server)."""
        ...

    def create_entities(self, entities: Sequence[Entity]) -> list[Entity]:
        """The entities created (existing names are skipped)."""
        ...

    def create_relations(self, relations: Sequence[Relation]) -> list[Relation]:
        """The relations created (existing ones skipped; both ends must exist)."""
        ...

    def add_observations(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[AddedObservations]:
        """Per ``(entity_name, contents)``: the contents that were new."""
        ...

    def delete_entities(self, names: Sequence[str]) -> DeleteEntitiesResult:
        """Delete entities with their observations and relations."""
        ...

    def delete_observations(self, items: Sequence[tuple[str, Sequence[str]]]) -> DeleteObservationsResult:
        """Delete observations (exact text) per entity."""
        ...

    def delete_relations(self, relations: Sequence[Relation]) -> DeleteRelationsResult:
        """Delete relations by ``(from, to, relationType)``."""
        ...

    def update_observations(self, updates: Sequence[ObservationUpdate]) -> list[UpdatedObservations]:
        """Replace observations in place, all or nothing."""
        ...

    def update_relation_weights(self, items: Sequence[tuple[Relation, float]]) -> list[WeightChange]:
        """Weigh evidence ``(relation, evidence)``: weight becomes ``(weight + evidence) / 2``."""
        ...

    def entity_type(self, name: str) -> str | None:
        """The entity's type, or None when there is no entity ``name``."""
        ...

    def relations_from(self, source: str, relation_type: str) -> list[Relation]:
        """The relations of type ``relation_type`` starting at ``source``."""
        ...

    def is_empty(self) -> bool:
        """True when the graph holds no entity and no relation."""
        ...

    def counts(self) -> GraphCounts:
        """Row counts of the graph (``stats``); all zero before the first migration."""
        ...

    def import_records(self) -> list[ImportRecord]:
        """Every legacy-import record, oldest first."""
        ...

    def latest_record(self, path: str) -> ImportRecord | None:
        """The newest legacy-import record of the file recorded as ``path``."""
        ...

    def line_digests(self, path: str) -> bytes | None:
        """The line digests of the newest record of the file recorded as ``path`` (migration
        0008), or None: no record, or one kept without them."""
        ...

    def first_start_action(self) -> str | None:
        """What the next start still owes: ``'import'``, ``'baseline'`` or None."""
        ...

    # -- the primitives of a legacy import (merge decisions are the importer's) --------------

    def merging(self, entities: int, *, on_rebuild: Callable[[], None] | None = None
                ) -> AbstractContextManager[None]:
        """Around a merge of ``entities`` entities (with observations and relations) by the
        primitives below: keeps the search index in step the cheapest way for a merge of that
        size; ``on_rebuild`` is called before a long index rebuild at the end."""
        ...

    def insert_entity(self, name: str, entity_type: str) -> int | None:
        """Insert an entity without observations: its id, or None when ``name`` exists (nothing written)."""
        ...

    def find_entity(self, name: str) -> tuple[int, str] | None:
        """``(id, entity_type)`` of the entity ``name``, or None."""
        ...

    def observation_contents(self, entity_id: int) -> set[str]:
        """The observations of the entity with id ``entity_id``."""
        ...

    def insert_observations(self, rows: Iterable[tuple[int, str]]) -> None:
        """Insert observations ``(entity_id, content)`` the entities do not have yet."""
        ...

    def insert_relation(self, relation: Relation) -> bool:
        """Insert ``relation`` as it is (endpoints not checked, its weight kept); False when its
        triple exists (nothing written)."""
        ...

    def insert_entities(self, rows: Sequence[tuple[str, str]]) -> dict[str, int]:
        """Insert entities ``(name, entity_type)`` (distinct names) without observations:
        ``{name: id}`` of those inserted; a name that exists is absent (nothing written)."""
        ...

    def insert_relations(self, relations: Sequence[Relation]) -> dict[tuple[str, str, str], int]:
        """Insert ``relations`` as they are (endpoints not checked, weights kept): ``{triple: id}``
        of those inserted; a triple that exists or repeats an earlier one is absent."""
        ...

    def relation_exists(self, relation: Relation) -> bool:
        """Whether ``relation``'s triple is stored."""
        ...

    def relation_id(self, relation: Relation) -> int | None:
        """The row id of the relation with ``relation``'s triple, or None. Ids grow: the rows a
        transaction inserts have larger ids than every row before it."""
        ...

    def take_first_start(self, action: str) -> bool:
        """Clear the first-start duty ``action`` ('import' or 'baseline'); True when it was owed."""
        ...

    def insert_record(self, kind: str, *, path: str, size_bytes: int, sha256: str, mtime: str,
                      mtime_ns: int, counts: tuple[int | None, int | None, int | None],
                      line_digests: bytes | None = None) -> None:
        """Add a legacy-import record (``counts``: entities, observations, relations created;
        ``line_digests``: :func:`graph_memory.legacy.line_digests` of the file)."""
        ...

    def set_entity_type(self, name: str, entity_type: str) -> bool:
        """Give the entity ``name`` another type; whether it changed (EntityNotFound if missing)."""
        ...

    def replace_observations(self, name: str, contents: Sequence[str]) -> bool:
        """Make the entity's observations exactly ``contents``, in order; whether anything changed."""
        ...

    def find_relation(self, source: str, target: str, relation_type: str) -> Relation | None:
        """The relation with this triple, or None."""
        ...

    def move_relation(self, key: tuple[str, str, str], new_key: tuple[str, str, str],
                      evidence: float | None) -> tuple[Relation, Relation]:
        """Re-point relation ``key`` to ``new_key`` and fold ``evidence`` into its weight;
        ``(before, after)`` (RelationNotFound, EntityNotFound, Conflict)."""
        ...

    def create_inverses(self, relations: Sequence[Relation], inverses: Mapping[str, str]) -> list[Relation]:
        """Materialize the declared inverse of each of ``relations`` (just created); the inverses made."""
        ...

    def inverse_links(self) -> dict[tuple[str, str, str], str]:
        """Every materialized inverse: its triple → its primary's relation type (an export keeps them)."""
        ...

    def link_inverse(self, key: tuple[str, str, str], primary_type: str) -> bool:
        """Mark relation ``key`` the materialized inverse of ``(to, from, primary_type)`` (an import
        restoring an export's record); False when either is missing or the primary is an inverse."""
        ...

    # -- whole rows, times included (graph-memory copy: an exact copy into an empty database) --

    def stored_entities(self, after: int, limit: int) -> list[StoredEntity]:
        """Up to ``limit`` entity rows with ids above ``after``, in id (creation) order."""
        ...

    def stored_observations(self, after: int, limit: int) -> list[StoredObservation]:
        """Up to ``limit`` observation rows with ids above ``after``, in id order."""
        ...

    def stored_relations(self, after: int, limit: int) -> list[StoredRelation]:
        """Up to ``limit`` relation rows with ids above ``after``, in id order."""
        ...

    def restore_entities(self, rows: Sequence[StoredEntity]) -> list[int]:
        """Insert entity rows as they are (times included; their ids are not kept), in order,
        inside :meth:`merging`; the ids they get here, in the same order."""
        ...

    def restore_observations(self, rows: Sequence[StoredObservation]) -> None:
        """Insert observation rows as they are (``entity_id``: an id of this database), in order."""
        ...

    def restore_relations(self, rows: Sequence[StoredRelation]) -> None:
        """Insert relation rows as they are (weights and times included), in order."""
        ...

    def restore_record(self, record: ImportRecord) -> None:
        """Add a legacy-import record as it is, ``recorded_at`` included."""
        ...

    def set_first_start(self, action: str | None) -> None:
        """Make ``action`` ('import', 'baseline' or None) what the next start owes."""
        ...

    # -- bounded reads for looking at the graph (graph-memory view, export --format mermaid|dot) --

    def neighborhood(self, names: Sequence[str], hops: int, max_entities: int | None) -> Neighborhood:
        """The entities within ``hops`` relations of ``names`` (at most ``max_entities``, nearest
        first; None: all) and the relations among them, with each entity's degree."""
        ...

    def find_entities(self, query: str, mode: Mode, limit: int) -> list[Entity]:
        """The entities :meth:`search` finds (at most ``limit``), without relations or neighbors."""
        ...

    def entity_page(self, name: str, max_items: int, offset: int = 0) -> EntityPage | None:
        """The entity ``name`` with ``max_items`` of its observations, relations out and in each,
        from position ``offset`` on (with totals); None when there is no such entity."""
        ...

    def type_counts(self, limit: int) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
        """The ``limit`` most frequent entity types and relation types, as ``(type, count)``."""
        ...

    def totals(self) -> dict[str, int]:
        """``{"entities", "observations", "relations"}`` counts."""
        ...

    def most_connected(self, limit: int) -> list[tuple[str, str | None, int]]:
        """The ``limit`` entities with the most relations: ``(name, type or None, degree)``."""
        ...

    def recent_changes(self, limit: int) -> list[Change]:
        """The ``limit`` latest additions (entities, observations, relations), newest first."""
        ...


class Backend(Protocol):
    """A database holding one knowledge graph: transactions, schema, change counters, index upkeep
    and backups. Open one with :func:`open_backend`; :meth:`close` it when done."""

    kind: str
    """The backend's name for logs, ``stats`` and ``healthcheck`` (``"sqlite"``)."""

    idle_catch_up_seconds: float
    """How long the server waits after its last call before :meth:`catch_up_when_idle`."""

    catch_up_poll_seconds: float
    """How often an idle server polls for index upkeep left by other processes."""

    @property
    def path(self) -> Path | str:
        """Where the database is (for messages, hints and logs): the SQLite file, or the
        PostgreSQL URL with its password masked (``postgresql://user:***@host:5432/db``)."""
        ...

    def close(self) -> None:
        """Release the database; later calls raise ``StoreError``. Idempotent."""
        ...

    def schema_status(self) -> MigrationStatus:
        """Applied and pending migrations, changing nothing. Raises: MigrationError (edited or
        newer history), StoreError."""
        ...

    def migrate(self) -> list[Migration]:
        """Apply the pending migrations; returns them in order. Raises: MigrationError, StoreError."""
        ...

    def has_graph(self) -> bool:
        """True when the graph's tables exist (a database no migration has set up has none)."""
        ...

    def files(self) -> dict[str, int]:
        """The database's files and their sizes in bytes (``stats``)."""
        ...

    def run_read(self, operation: Callable[[Graph], T]) -> T:
        """``operation`` in one read transaction (a consistent snapshot), retried while busy."""
        ...

    def run_search(self, operation: Callable[[Graph], T]) -> T:
        """:meth:`run_read` for an operation that searches: the index is brought up to date first
        when it can be, and the search finds every committed write either way."""
        ...

    def run_write(self, operation: Callable[[Graph], T], *, large: bool = False) -> T:
        """``operation`` in one write transaction: all of it commits, or nothing (on any error).
        ``large``: one write of many rows (an import), which may use more memory to go faster."""
        ...

    def catch_up_when_idle(self) -> int | None:
        """Index upkeep for an idle server; never raises."""
        ...

    def change_counters(self) -> tuple[int, int | None] | None:
        """``(commits by other connections, graph changes)`` counters, None once closed."""
        ...


class SqliteGraph:
    """:class:`Graph` on one apsw connection inside a :class:`Store` transaction."""

    __slots__ = ("conn",)

    def __init__(self, conn: Connection) -> None:
        self.conn = conn

    def read_graph(self) -> GraphSlice:
        return graph.read_graph(self.conn)

    def open_nodes(self, names: Sequence[str]) -> GraphSlice:
        return graph.open_nodes(self.conn, names)

    def search(self, query: str, mode: Mode, limit: int | None) -> GraphSlice:
        return search.search(self.conn, query, mode, limit)

    def read_page(self, since: str | None, after: ReadPosition | None,
                  limit: int | None) -> tuple[GraphSlice, ReadPosition | None]:
        return pages.read_page(pages.SqlitePages(self.conn), since, after, limit)

    def search_page(self, query: str, mode: Mode, since: str | None, after: SearchPosition | None,
                    limit: int | None) -> tuple[GraphSlice, SearchPosition | None]:
        return pages.search_page(pages.SqlitePages(self.conn), query, mode, since, after, limit)

    def with_times(self, result: GraphSlice) -> GraphSlice:
        return graph.with_times(self.conn, result)

    def cursor_secret(self) -> bytes:
        return pages.cursor_secret(self.conn)

    def create_entities(self, entities: Sequence[Entity]) -> list[Entity]:
        return graph.create_entities(self.conn, entities)

    def create_relations(self, relations: Sequence[Relation]) -> list[Relation]:
        return graph.create_relations(self.conn, relations)

    def add_observations(self, items: Sequence[tuple[str, Sequence[str]]]) -> list[AddedObservations]:
        return graph.add_observations(self.conn, items)

    def delete_entities(self, names: Sequence[str]) -> DeleteEntitiesResult:
        return graph.delete_entities(self.conn, names)

    def delete_observations(self, items: Sequence[tuple[str, Sequence[str]]]) -> DeleteObservationsResult:
        return graph.delete_observations(self.conn, items)

    def delete_relations(self, relations: Sequence[Relation]) -> DeleteRelationsResult:
        return graph.delete_relations(self.conn, relations)

    def update_observations(self, updates: Sequence[ObservationUpdate]) -> list[UpdatedObservations]:
        return graph.update_observations(self.conn, updates)

    def update_relation_weights(self, items: Sequence[tuple[Relation, float]]) -> list[WeightChange]:
        return graph.update_relation_weights(self.conn, items)

    def entity_type(self, name: str) -> str | None:
        return graph.entity_type(self.conn, name)

    def relations_from(self, source: str, relation_type: str) -> list[Relation]:
        return graph.relations_from(self.conn, source, relation_type)

    def is_empty(self) -> bool:
        return graph.is_empty(self.conn)

    def counts(self) -> GraphCounts:
        return graph_counts(self.conn)

    def import_records(self) -> list[ImportRecord]:
        return records.import_records(self.conn)

    def latest_record(self, path: str) -> ImportRecord | None:
        return records.latest_record(self.conn, path)

    def line_digests(self, path: str) -> bytes | None:
        return records.line_digests(self.conn, path)

    def first_start_action(self) -> str | None:
        return records.first_start_action(self.conn)

    def merging(self, entities: int, *, on_rebuild: Callable[[], None] | None = None
                ) -> AbstractContextManager[None]:
        return graph.merging(self.conn, entities, on_rebuild=on_rebuild)

    def insert_entity(self, name: str, entity_type: str) -> int | None:
        return graph.insert_entity(self.conn, name, entity_type)

    def find_entity(self, name: str) -> tuple[int, str] | None:
        return graph.find_entity(self.conn, name)

    def observation_contents(self, entity_id: int) -> set[str]:
        return graph.observation_contents(self.conn, entity_id)

    def insert_observations(self, rows: Iterable[tuple[int, str]]) -> None:
        graph.insert_observations(self.conn, rows)

    def insert_relation(self, relation: Relation) -> bool:
        return graph.insert_relation(self.conn, relation)

    def insert_entities(self, rows: Sequence[tuple[str, str]]) -> dict[str, int]:
        return graph.insert_entities(self.conn, rows)

    def insert_relations(self, relations: Sequence[Relation]) -> dict[tuple[str, str, str], int]:
        return graph.insert_relations(self.conn, relations)

    def relation_exists(self, relation: Relation) -> bool:
        return graph.relation_exists(self.conn, relation)

    def relation_id(self, relation: Relation) -> int | None:
        return graph.relation_id(self.conn, relation)

    def take_first_start(self, action: str) -> bool:
        return records.take_first_start(self.conn, action)

    def insert_record(self, kind: str, *, path: str, size_bytes: int, sha256: str, mtime: str,
                      mtime_ns: int, counts: tuple[int | None, int | None, int | None],
                      line_digests: bytes | None = None) -> None:
        records.insert_record(self.conn, kind, path=path, size_bytes=size_bytes, sha256=sha256, mtime=mtime,
                              mtime_ns=mtime_ns, counts=counts, line_digests=line_digests)

    def set_entity_type(self, name: str, entity_type: str) -> bool:
        return graph.set_entity_type(self.conn, name, entity_type)

    def replace_observations(self, name: str, contents: Sequence[str]) -> bool:
        return graph.replace_observations(self.conn, name, contents)

    def find_relation(self, source: str, target: str, relation_type: str) -> Relation | None:
        return graph.find_relation(self.conn, source, target, relation_type)

    def move_relation(self, key: tuple[str, str, str], new_key: tuple[str, str, str],
                      evidence: float | None) -> tuple[Relation, Relation]:
        return graph.move_relation(self.conn, key, new_key, evidence)

    def create_inverses(self, relations: Sequence[Relation], inverses: Mapping[str, str]) -> list[Relation]:
        return graph.create_inverses(self.conn, relations, inverses)

    def inverse_links(self) -> dict[tuple[str, str, str], str]:
        return graph.inverse_links(self.conn)

    def link_inverse(self, key: tuple[str, str, str], primary_type: str) -> bool:
        return graph.link_inverse(self.conn, key, primary_type)

    def stored_entities(self, after: int, limit: int) -> list[StoredEntity]:
        return graph.stored_entities(self.conn, after, limit)

    def stored_observations(self, after: int, limit: int) -> list[StoredObservation]:
        return graph.stored_observations(self.conn, after, limit)

    def stored_relations(self, after: int, limit: int) -> list[StoredRelation]:
        return graph.stored_relations(self.conn, after, limit)

    def restore_entities(self, rows: Sequence[StoredEntity]) -> list[int]:
        return graph.restore_entities(self.conn, rows)

    def restore_observations(self, rows: Sequence[StoredObservation]) -> None:
        graph.restore_observations(self.conn, rows)

    def restore_relations(self, rows: Sequence[StoredRelation]) -> None:
        graph.restore_relations(self.conn, rows)

    def restore_record(self, record: ImportRecord) -> None:
        records.restore_record(self.conn, record)

    def set_first_start(self, action: str | None) -> None:
        records.set_first_start(self.conn, action)

    def neighborhood(self, names: Sequence[str], hops: int, max_entities: int | None) -> Neighborhood:
        return explore.neighborhood(self.conn, list(names), hops, max_entities)

    def find_entities(self, query: str, mode: Mode, limit: int) -> list[Entity]:
        return search.search(self.conn, query, mode, limit, related=False).entities

    def entity_page(self, name: str, max_items: int, offset: int = 0) -> EntityPage | None:
        return explore.entity_page(self.conn, name, max_items, offset)

    def type_counts(self, limit: int) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
        return explore.type_counts(self.conn, limit)

    def totals(self) -> dict[str, int]:
        return explore.totals(self.conn)

    def most_connected(self, limit: int) -> list[tuple[str, str | None, int]]:
        return explore.most_connected(self.conn, limit)

    def recent_changes(self, limit: int) -> list[Change]:
        return explore.recent_changes(self.conn, limit)


class SqliteBackend:
    """:class:`Backend` on one SQLite file through a :class:`Store` (closed by :meth:`close`)."""

    __slots__ = ("store",)

    kind = "sqlite"
    idle_catch_up_seconds = index.IDLE_CATCH_UP_SECONDS
    catch_up_poll_seconds = index.CATCH_UP_POLL_SECONDS

    def __init__(self, store: Store) -> None:
        self.store = store

    @classmethod
    def open(cls, path: Path, mode: OpenMode, *, busy_timeout_ms: int) -> SqliteBackend:
        """The SQLite file at ``path`` opened as ``mode`` says (:data:`OpenMode`).

        Raises:
            StoreError: no file (``current``/``readonly``), an odd path, not SQLite, unreadable.
            MigrationError: an edited or newer migration history.
            PendingMigrationsError: ``current`` with migrations pending.
        """
        if mode in ("migrate", "unmigrated"):
            return cls(Store.open(path, busy_timeout_ms=busy_timeout_ms, migrate=mode == "migrate"))
        check_database_path(path, must_exist=True)  # the read-only modes never create a file
        if mode == "current":
            return cls(Store.open_current(path, busy_timeout_ms=busy_timeout_ms))
        return cls(Store.open_readonly(path, busy_timeout_ms=busy_timeout_ms))

    @property
    def path(self) -> Path:
        return self.store.path

    def close(self) -> None:
        self.store.close()

    def schema_status(self) -> MigrationStatus:
        return self.store.schema_status()

    def migrate(self) -> list[Migration]:
        return self.store.migrate()

    def has_graph(self) -> bool:
        return self.store.has_graph_tables()

    def files(self) -> dict[str, int]:
        return database_files(self.store.path)

    def run_read(self, operation: Callable[[Graph], T]) -> T:
        return self.store.run_read(lambda conn: operation(SqliteGraph(conn)))

    def run_search(self, operation: Callable[[Graph], T]) -> T:
        return self.store.run_search(lambda conn: operation(SqliteGraph(conn)))

    def run_write(self, operation: Callable[[Graph], T], *, large: bool = False) -> T:
        return self.store.run_write(lambda conn: operation(SqliteGraph(conn)), large=large)

    def catch_up_when_idle(self) -> int | None:
        return self.store.catch_up_when_idle()

    def change_counters(self) -> tuple[int, int | None] | None:
        return self.store.change_counters()


def open_backend(settings: Settings, mode: OpenMode = "migrate") -> Backend:
    """The database ``settings`` name, opened as ``mode`` says (:data:`OpenMode`): the one place
    that chooses the backend. PostgreSQL when ``MEMORY_DATABASE_URL`` is set
    (:class:`~graph_memory.db.postgres.backend.PostgresBackend`), else SQLite at
    ``settings.database_path``.

    Raises:
        StoreError, MigrationError, PendingMigrationsError: as :meth:`SqliteBackend.open`
            (and StoreError when the URL is set but the ``postgres`` extra is not installed).
    """
    if settings.database_url is not None:
        return _open_postgres(settings, mode)
    return SqliteBackend.open(settings.database_path, mode, busy_timeout_ms=settings.busy_timeout_ms)


def _open_postgres(settings: Settings, mode: OpenMode) -> Backend:
    """:class:`~graph_memory.db.postgres.backend.PostgresBackend`, imported only when selected.

    Raises:
        StoreError: psycopg (the ``postgres`` extra) is not installed; as ``PostgresBackend.open``.
    """
    try:
        from graph_memory.db.postgres.backend import PostgresBackend
    except ImportError as exc:
        import shlex
        import sys

        # Into this interpreter, by the extra's requirement: `pip install 'graph-memory[postgres]'`
        # would fetch another project of that name from PyPI (found by QA).
        raise StoreError(f"MEMORY_DATABASE_URL selects PostgreSQL, but its driver is not installed ({exc}); "
                         f"install it (the 'postgres' extra) with: {shlex.quote(sys.executable)} -m pip install "
                         f"'{POSTGRES_DRIVER}'") from None
    return PostgresBackend.open(settings, mode)


@contextmanager
def building_new(settings: Settings) -> Iterator[Backend]:
    """The SQLite database ``settings`` name, which does not exist yet, built aside and put in
    place when the body returns (:meth:`Store.building`): nothing opens it before it is whole,
    and a body that raises leaves no database. For writing a whole graph at once (an import into
    a new database, ~20 % faster than into an open one at 1,000,000 entities).

    Raises:
        DatabaseAppeared: another process created the database meanwhile (nothing was kept).
        StoreError: as :meth:`Store.building`; also when ``settings`` names PostgreSQL.
    """
    if settings.database_url is not None:
        raise StoreError("a PostgreSQL database is created by its administrator, never built by graph-memory")
    with Store.building(settings.database_path, busy_timeout_ms=settings.busy_timeout_ms) as store:
        yield SqliteBackend(store)


def database_missing(settings: Settings) -> bool:
    """Whether the database ``settings`` name does not exist yet: a SQLite file not created yet
    (a PostgreSQL database is created by its administrator, never by graph-memory: False)."""
    return settings.database_url is None and not settings.database_path.is_file()


def check_configured_paths(settings: Settings) -> None:
    """Refuse odd configured paths before anything opens or creates a file
    (:func:`graph_memory.db.paths.check_configured_paths`); with PostgreSQL only the legacy file
    ``MEMORY_FILE_PATH`` may name is checked (no SQLite file is used or created).

    Raises:
        StoreError: a folder, a named pipe… where a file belongs.
    """
    if settings.database_url is None:
        paths.check_configured_paths(settings.file_path, settings.database_path)
    elif settings.file_path != settings.database_path:
        paths.check_legacy_path(settings.file_path)


def known_migrations(settings: Settings) -> list[Migration]:
    """The migrations this version knows for the backend ``settings`` select, in order."""
    if settings.database_url is not None:
        return load_migrations("postgres")
    return load_migrations()


def backup(settings: Settings, dest: str, *, force: bool = False,
           progress: Callable[[int, int], None] | None = None) -> BackupResult:
    """Copy the database ``settings`` name to ``dest`` and verify the copy (``graph-memory
    backup``; for SQLite :func:`~graph_memory.db.backup.backup_database`, ``progress(done, total)``
    in pages). It reads the database without opening it as a backend: a backup copies any
    database, also one this version could not serve.

    Raises:
        StoreError, OutputError: leaving nothing at ``dest``.
    """
    if settings.database_url is not None:
        raise OutputError(postgres_backup_advice(settings, dest))
    check_database_path(settings.database_path, must_exist=True)
    return backup_database(settings.database_path, dest, force=force, busy_timeout_ms=settings.busy_timeout_ms,
                           progress=progress)


def restore(settings: Settings, backup_file: str) -> RestoreResult:
    """Make the database ``settings`` name hold the memory of ``backup_file`` (``graph-memory
    restore``; for SQLite :func:`~graph_memory.db.backup.restore_database`: what it held is saved
    beside it first). A PostgreSQL database is restored with ``pg_restore``: refused, saying how.

    Raises:
        StoreError, OutputError: nothing was changed.
    """
    if settings.database_url is not None:
        raise OutputError(f"restore reads a SQLite backup file into a SQLite database; {settings.database_label} is "
                          f"PostgreSQL: restore a pg_dump with pg_restore --clean --dbname=URL FILE, or load a SQLite "
                          f"backup into an empty PostgreSQL database with: "
                          f"MEMORY_DATABASE_URL= "   # empty: the copy's source is the SQLite file named
                          f"{graph_memory_command('copy', '--to', 'URL', database=Path(backup_file).absolute())}")
    return restore_database(backup_file, settings.database_path, busy_timeout_ms=settings.busy_timeout_ms)


def postgres_backup_advice(settings: Settings, dest: str) -> str:
    """Why ``backup`` refuses a PostgreSQL database, with the exact commands that copy it to
    ``dest`` (a folder: to time-stamped files in it; pg_dump cannot write to a folder, found by QA)."""
    import os
    from datetime import datetime
    from urllib.parse import urlsplit, urlunsplit

    from graph_memory.hints import shell_quote

    label = str(settings.database_label)
    parts = urlsplit(label)
    # The URL without its password (pg_dump takes it from PGPASSWORD or ~/.pgpass).
    url = urlunsplit(parts._replace(netloc=parts.netloc.replace(":***@", "@")))
    dump_file, export_file = dest, dest + ".jsonl"
    if dest.endswith(("/", os.sep)) or Path(dest).is_dir():   # a folder, as for SQLite: files named in it
        stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
        named = Path(dest).absolute() / f"memory-{stamp}"
        dump_file, export_file = f"{named}.dump", f"{named}.jsonl"
    dump = f"pg_dump --format=custom --file={shell_quote(dump_file)} {shell_quote(url)}"
    export = graph_memory_command("export", "--with-weights", "-o", export_file, database=label)
    return (f"graph-memory backup copies SQLite files; the PostgreSQL database {label} is backed up with "
            f"PostgreSQL's own tools, e.g.: {dump} (restore with pg_restore), or as a portable copy of the "
            f"graph with: {export}")
