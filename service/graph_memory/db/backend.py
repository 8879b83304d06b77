"""The storage boundary: what the service (:mod:`graph_memory.service`) needs from a backend.

:class:`Backend` runs operations in transactions; inside one, :class:`Graph` offers the graph
operations with the reference server's semantics (the contract in ``docs/``). The SQLite
backend is :class:`SqliteBackend` over :class:`~graph_memory.db.store.Store`, with the SQL in
:mod:`graph_memory.db.graph` and :mod:`graph_memory.db.search`. A PostgreSQL backend (a later
issue) provides the same two protocols from its own subpackage (``db/postgres/``); its index,
retries and error translation stay behind them, as SQLite's trigram FTS5, WAL and apsw do here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol, TypeVar

from graph_memory.db import explore, graph, search
from graph_memory.db.explore import Change, EntityPage, Neighborhood
from graph_memory.db.graph import (
    AddedObservations,
    DeleteEntitiesResult,
    DeleteObservationsResult,
    DeleteRelationsResult,
    ObservationUpdate,
    PrefixEdit,
    WeightChange,
)
from graph_memory.db.store import Connection, Store
from graph_memory.models import Entity, GraphSlice, Mode, Relation

T = TypeVar("T")


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

    def update_observations(self, updates: Sequence[ObservationUpdate]) -> list[dict[str, object]]:
        """Replace observations in place, all or nothing."""
        ...

    def update_relation_weights(self, items: Sequence[tuple[Relation, float]]) -> list[WeightChange]:
        """Weigh evidence ``(relation, evidence)``: weight becomes ``(weight + evidence) / 2``."""
        ...

    def entity_type(self, name: str) -> str | None:
        """The entity's type, or None when there is no entity ``name``."""
        ...

    def set_observation_by_prefix(self, name: str, prefix: str, content: str) -> PrefixEdit:
        """Replace the observation starting with ``prefix``, or add ``content``."""
        ...

    def delete_observations_by_prefix(self, name: str, prefix: str) -> list[str]:
        """Delete the observations starting with ``prefix``; returns them."""
        ...

    def relations_from(self, source: str, relation_type: str) -> list[Relation]:
        """The relations of type ``relation_type`` starting at ``source``."""
        ...

    # -- bounded reads for looking at the graph (graph-memory view, export --format mermaid|dot) --

    def neighborhood(self, names: Sequence[str], hops: int, max_entities: int | None) -> Neighborhood:
        """The entities within ``hops`` relations of ``names`` (at most ``max_entities``, nearest
        first; None: all) and the relations among them, with each entity's degree."""
        ...

    def find_entities(self, query: str, mode: Mode, limit: int) -> list[Entity]:
        """The entities :meth:`search` finds (at most ``limit``), without relations or neighbors."""
        ...

    def entity_page(self, name: str, max_items: int) -> EntityPage | None:
        """The entity ``name`` with its first ``max_items`` observations, relations out and in
        (with totals); None when there is no such entity."""
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
    """A database holding one knowledge graph: transactions, change counters and index upkeep."""

    @property
    def path(self) -> Path:
        """Where the database is (for messages and logs)."""
        ...

    def run_read(self, operation: Callable[[Graph], T]) -> T:
        """``operation`` in one read transaction (a consistent snapshot), retried while busy."""
        ...

    def run_search(self, operation: Callable[[Graph], T]) -> T:
        """:meth:`run_read` for an operation that searches: the index is brought up to date first
        when it can be, and the search finds every committed write either way."""
        ...

    def run_write(self, operation: Callable[[Graph], T]) -> T:
        """``operation`` in one write transaction: all of it commits, or nothing (on any error)."""
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

    def update_observations(self, updates: Sequence[ObservationUpdate]) -> list[dict[str, object]]:
        return graph.update_observations(self.conn, updates)

    def update_relation_weights(self, items: Sequence[tuple[Relation, float]]) -> list[WeightChange]:
        return graph.update_relation_weights(self.conn, items)

    def entity_type(self, name: str) -> str | None:
        return graph.entity_type(self.conn, name)

    def set_observation_by_prefix(self, name: str, prefix: str, content: str) -> PrefixEdit:
        return graph.set_observation_by_prefix(self.conn, name, prefix, content)

    def delete_observations_by_prefix(self, name: str, prefix: str) -> list[str]:
        return graph.delete_observations_by_prefix(self.conn, name, prefix)

    def relations_from(self, source: str, relation_type: str) -> list[Relation]:
        return graph.relations_from(self.conn, source, relation_type)

    def neighborhood(self, names: Sequence[str], hops: int, max_entities: int | None) -> Neighborhood:
        return explore.neighborhood(self.conn, list(names), hops, max_entities)

    def find_entities(self, query: str, mode: Mode, limit: int) -> list[Entity]:
        return search.search(self.conn, query, mode, limit, related=False).entities

    def entity_page(self, name: str, max_items: int) -> EntityPage | None:
        return explore.entity_page(self.conn, name, max_items)

    def type_counts(self, limit: int) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
        return explore.type_counts(self.conn, limit)

    def totals(self) -> dict[str, int]:
        return explore.totals(self.conn)

    def most_connected(self, limit: int) -> list[tuple[str, str | None, int]]:
        return explore.most_connected(self.conn, limit)

    def recent_changes(self, limit: int) -> list[Change]:
        return explore.recent_changes(self.conn, limit)


class SqliteBackend:
    """:class:`Backend` on an open :class:`Store` (the caller opens and closes it)."""

    __slots__ = ("store",)

    def __init__(self, store: Store) -> None:
        self.store = store

    @property
    def path(self) -> Path:
        return self.store.path

    def run_read(self, operation: Callable[[Graph], T]) -> T:
        return self.store.run_read(lambda conn: operation(SqliteGraph(conn)))

    def run_search(self, operation: Callable[[Graph], T]) -> T:
        return self.store.run_search(lambda conn: operation(SqliteGraph(conn)))

    def run_write(self, operation: Callable[[Graph], T]) -> T:
        return self.store.run_write(lambda conn: operation(SqliteGraph(conn)))

    def catch_up_when_idle(self) -> int | None:
        return self.store.catch_up_when_idle()

    def change_counters(self) -> tuple[int, int | None] | None:
        return self.store.change_counters()
