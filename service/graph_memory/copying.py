"""Copying a whole memory from one database into another, SQLite or PostgreSQL (``graph-memory copy``).

The copy is exact: every entity, observation and relation with its weight and its created/updated
times (unknown stays unknown), in creation order; the materialized-inverse marks; the
legacy-import records and the first-start duty. Not copied: the cursor key (each database signs
its own paging cursors, so a cursor of one is refused by the other) and the change counters.

The source is read in one read transaction (a consistent snapshot, also while servers write to
it) and never written; the destination is written in one write transaction, so a failure leaves
it as empty as it was. Rows move in batches of :data:`BATCH` through the ``Graph`` primitives
``stored_*`` and ``restore_*``, so a large memory is never held in memory whole; only the map
from source to destination entity ids is (one pair of ints per entity).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from graph_memory.db.backend import Backend, Graph
from graph_memory.errors import OutputError, StoreError
from graph_memory.wording import plural

# Rows read and written per statement batch.
BATCH = 1000


@dataclass(frozen=True, slots=True)
class CopyResult:
    """What ``graph-memory copy`` copied: from ``source`` into ``destination`` (PostgreSQL URLs
    with the password masked), the row counts, the legacy-import ``records`` and the first-start
    duty the destination now owes (``first_start``: 'import', 'baseline' or None)."""

    source: str
    destination: str
    entities: int
    observations: int
    relations: int
    inverse_relations: int
    records: int
    first_start: str | None

    def to_dict(self) -> dict[str, Any]:
        """The ``copy --json`` object."""
        return {"source": self.source, "destination": self.destination, "entities": self.entities,
                "observations": self.observations, "relations": self.relations,
                "inverse_relations": self.inverse_relations, "legacy_imports": self.records,
                "legacy_first_start_pending": self.first_start}


def copy_memory(source: Backend, destination: Backend, *,
                progress: Callable[[int], None] | None = None) -> CopyResult:
    """Copy everything ``source`` holds into ``destination`` (migrated, empty) in one write
    transaction on ``destination``, reading ``source`` in one read transaction.
    ``progress(rows)`` is called after each batch of rows written.

    Raises:
        OutputError: ``destination`` holds entities, relations or import records (nothing written).
        StoreError: either database cannot be read or written (nothing written).
    """
    def copy(src: Graph) -> CopyResult:
        return destination.run_write(lambda dst: _copy(src, dst, progress), large=True)

    result = source.run_read(copy)
    return replace(result, source=str(source.path), destination=str(destination.path))


def _copy(src: Graph, dst: Graph, progress: Callable[[int], None] | None) -> CopyResult:
    """The copy inside both transactions (run again from the start when the destination's write
    transaction is retried)."""
    _require_empty(dst)
    totals = src.totals()
    ids: dict[int, int] = {}   # source entity id -> destination entity id
    copied = {"entities": 0, "observations": 0, "relations": 0}

    def advance(rows: int) -> None:
        if progress is not None:
            progress(rows)

    with dst.merging(totals["entities"]):  # the search index is written once, at the end
        after = 0
        while entities := src.stored_entities(after, BATCH):
            ids.update(zip((e.id for e in entities), dst.restore_entities(entities), strict=True))
            after = entities[-1].id
            copied["entities"] += len(entities)
            advance(len(entities))
        after = 0
        while observations := src.stored_observations(after, BATCH):
            dst.restore_observations([replace(o, entity_id=ids[o.entity_id]) for o in observations])
            after = observations[-1].id
            copied["observations"] += len(observations)
            advance(len(observations))
        after = 0
        while relations := src.stored_relations(after, BATCH):
            dst.restore_relations(relations)
            after = relations[-1].id
            copied["relations"] += len(relations)
            advance(len(relations))
    inverses = src.inverse_links()
    for key, primary_type in inverses.items():
        if not dst.link_inverse(key, primary_type):
            raise StoreError(f"the relation {key[0]} -[{key[2]}]-> {key[1]} could not be marked as the inverse of "
                             f"{key[1]} -[{primary_type}]-> {key[0]} in the copy; nothing was written")
    records = src.import_records()
    for record in records:
        dst.restore_record(record)
    first_start = src.first_start_action()
    dst.set_first_start(first_start)
    return CopyResult("", "", copied["entities"], copied["observations"], copied["relations"], len(inverses),
                      len(records), first_start)


def _require_empty(dst: Graph) -> None:
    """Refuse a destination that holds anything: a copy never merges into or overwrites a memory."""
    records = len(dst.import_records())
    if dst.is_empty() and not records:
        return
    totals = dst.totals()
    held = [plural(totals["entities"], "entity"), plural(totals["relations"], "relation")]
    if records:
        held.append(plural(records, "legacy-import record"))
    raise OutputError(f"the destination already holds {', '.join(held)}; graph-memory copy writes only into an "
                      f"empty database and never merges or overwrites: copy into a new SQLite file or an empty "
                      f"PostgreSQL database (e.g. one made with createdb); nothing was written")
