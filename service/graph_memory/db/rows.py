"""Whole stored rows of the graph, times included, the same on every backend: what
``graph-memory copy`` reads from one database (``Graph.stored_*``) and writes into another
(``Graph.restore_*``) so that the copy is exact.

Times are ISO 8601 UTC text with milliseconds, as the SQLite backend stores them
(``2026-12-01T17:29:28.123Z``), or None when unknown (rows imported from a legacy file; SQLite
stores ``''``, PostgreSQL NULL). ``id`` is the row's id in the database it was read from: it
orders the rows (creation order) and links an observation to its entity, nothing more.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class StoredEntity:
    """One row of ``entities``."""

    id: int
    name: str
    entity_type: str
    created_at: str | None
    updated_at: str | None


@dataclass(frozen=True, slots=True)
class StoredObservation:
    """One row of ``observations``; ``entity_id`` is its entity's ``id`` in the same database."""

    id: int
    entity_id: int
    content: str
    created_at: str | None
    updated_at: str | None


@dataclass(frozen=True, slots=True)
class StoredRelation:
    """One row of ``relations`` (``updated_at`` None: its weight never changed, or unknown)."""

    id: int
    source: str
    target: str
    relation_type: str
    weight: float
    created_at: str | None
    updated_at: str | None
