"""Merging a legacy file into the graph record by record, inside the caller's write transaction.

:func:`merge_records` takes the file's entity and relation lines in file order (a
:class:`~graph_memory.legacy.LegacyStream` reads them again from the file's bytes) and writes
them in batches, holding one batch and a few per-file indexes rather than the file's graph. It
makes exactly the decisions of an import of the reconciled graph
(:func:`graph_memory.legacy.parse_legacy` then the importer's merge): duplicate names within the
file merge (first position and type kept, observations unioned), repeated triples collapse (the
first line wins, its weight and ``inverseOf`` too), an entity that exists keeps its type and gains
only the observations it lacks, a relation that exists is skipped; and it counts what the file
reconciled (the report's ``file`` summary) as the reader would.

What tells a repeat within the file from a row stored before: the set of the file's entity names
(also what the dangling count needs, since a relation may name an entity defined later in the
file), and the relations' row ids (rows this transaction inserts have larger ids than every row
before it). Beyond that, only the entities and relations that existed before the import and occur
more than once in the file are remembered, with the file's first type and observations of each
(``repeats``: hashes of what may occur more than once, from the file's check).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import Protocol

from graph_memory.db.backend import Graph
from graph_memory.legacy import LegacyRecord, LegacyRelation, UnchangedEntity
from graph_memory.models import Entity, Relation

__all__ = ["BATCH_ROWS", "FileTally", "MergeCounts", "merge_records", "relates_deleted_entity"]

# Rows (entities, observations, relations) buffered before they are written together (one
# executemany per kind). Memory grows with it; beyond a few thousand it buys little speed.
BATCH_ROWS = 5_000


class _Progress(Protocol):
    """What :func:`merge_records` reports to (the importer's ``Progress``)."""

    def advance(self, items: int) -> None:
        """``items`` more records were merged."""


@dataclass(slots=True)
class MergeCounts:
    """Database-side counts, as :class:`graph_memory.importer.ImportReport` names them."""

    entities_created: int = 0
    entities_merged: int = 0
    type_conflicts: int = 0
    observations_added: int = 0
    relations_created: int = 0
    relations_skipped: int = 0
    relations_left_out: int = 0   # new relation lines to an entity deleted here (import --new-lines)


@dataclass(slots=True)
class FileTally:
    """What the file reconciled within itself, as :meth:`graph_memory.legacy.LegacyGraph.summary`
    counts it: distinct ``entities``, their ``observations`` (unioned), distinct ``relations``,
    ``merged_entities`` (repeated names), ``type_conflicts`` (a repeat with another type),
    ``collapsed_observations``, ``duplicate_relations``, ``dangling_relations``."""

    entities: int = 0
    observations: int = 0
    relations: int = 0
    merged_entities: int = 0
    type_conflicts: int = 0
    collapsed_observations: int = 0
    duplicate_relations: int = 0
    dangling_relations: int = 0


@dataclass(slots=True)
class _Merge:
    g: Graph
    counts: MergeCounts
    tally: FileTally
    # hashes of the names and triples that may occur more than once (None: any may)
    repeats: tuple[Collection[int], Collection[int]] | None
    # every entity name of the file so far:
    names: set[str] = field(default_factory=set)
    # entities stored before the merge, met in the file: the file's first type and observations
    stored: dict[str, tuple[str, set[str]]] = field(default_factory=dict)
    # relations stored before the merge, met in the file
    stored_relations: set[tuple[str, str, str]] = field(default_factory=set)
    # the id of the first relation this merge inserted (every later one has a larger id)
    first_new_relation: int | None = None
    # the relations whose ends were not (yet) both file entities when read, and whether this merge created them
    endpoints_later: list[tuple[Relation, bool]] = field(default_factory=list)
    # the names of the file's entity lines left out as unchanged (import --new-lines)
    unchanged: set[str] = field(default_factory=set)
    inverses: list[tuple[tuple[str, str, str], str]] = field(default_factory=list)
    pending: list[tuple[int, str]] = field(default_factory=list)  # observations to insert
    # the file's first lines of entities not yet inserted: name -> (type, unique observations)
    new_entities: dict[str, tuple[str, list[str]]] = field(default_factory=dict)
    # relation lines not yet inserted, with whether both ends were file entities when read
    new_relations: list[tuple[LegacyRelation, bool]] = field(default_factory=list)

    def flush(self) -> None:
        """Write every batch: entities, then their observations, then relations."""
        self.flush_entities()
        self.flush_observations()
        self.flush_relations()

    def flush_observations(self) -> None:
        if self.pending:
            self.g.insert_observations(self.pending)
            self.pending.clear()

    def flush_entities(self) -> None:
        """Insert the batch of first lines (one batch call); those whose name was stored before
        merge into the stored entity, in file order."""
        if not self.new_entities:
            return
        batch, self.new_entities = self.new_entities, {}
        created = self.g.insert_entities([(name, entity_type) for name, (entity_type, _) in batch.items()])
        counts, pending = self.counts, self.pending
        for name, (entity_type, unique) in batch.items():
            created_id = created.get(name)
            if created_id is not None:
                counts.entities_created += 1
                counts.observations_added += len(unique)
                pending.extend([(created_id, o) for o in unique])
                continue
            found = self.g.find_entity(name)
            assert found is not None  # the insert met it
            entity_id, stored_type = found
            counts.entities_merged += 1
            counts.type_conflicts += stored_type != entity_type
            if self.repeats is None or hash(name) in self.repeats[0]:
                self.stored[name] = (entity_type, set(unique))
            if unique:
                self._add_missing(entity_id, unique)

    def entity(self, entity: Entity) -> None:
        g, counts, tally = self.g, self.counts, self.tally
        name = entity.name
        observations = entity.observations
        unique = list(dict.fromkeys(observations))
        tally.collapsed_observations += len(observations) - len(unique)
        if name not in self.names:
            self.names.add(name)
            tally.entities += 1
            tally.observations += len(unique)
            self.new_entities[name] = (entity.entity_type, unique)
            return
        # A repeat of a name earlier in the file: merged into that entity (written first, if it
        # waits in the batch).
        tally.merged_entities += 1
        if name in self.new_entities:
            self.flush_entities()
        found = g.find_entity(name)
        assert found is not None  # written by this merge, or stored before
        entity_id, stored_type = found
        first = self.stored.get(name)
        if first is None:  # created by this merge: its type and observations are the file's
            tally.type_conflicts += stored_type != entity.entity_type
            self.flush_observations()
            have = g.observation_contents(entity_id)
            new = [o for o in unique if o not in have]
            tally.collapsed_observations += len(unique) - len(new)
            tally.observations += len(new)
            counts.observations_added += len(new)
            self.pending.extend((entity_id, o) for o in new)
            return
        first_type, seen = first
        tally.type_conflicts += first_type != entity.entity_type
        new = [o for o in unique if o not in seen]
        tally.collapsed_observations += len(unique) - len(new)
        tally.observations += len(new)
        seen.update(new)
        if new:
            self._add_missing(entity_id, new)

    def _add_missing(self, entity_id: int, contents: list[str]) -> None:
        """Queue the ``contents`` the stored entity ``entity_id`` lacks."""
        self.flush_observations()
        have = self.g.observation_contents(entity_id)
        new = [o for o in contents if o not in have]
        self.counts.observations_added += len(new)
        self.pending.extend((entity_id, o) for o in new)

    def relation(self, record: LegacyRelation) -> None:
        relation, names = record.relation, self.names
        self.new_relations.append((record, relation.source in names and relation.target in names))

    def flush_relations(self) -> None:
        """Insert the batch of relation lines (one batch call), then count each as created,
        skipped (stored before) or a repeat within the file, in file order."""
        if not self.new_relations:
            return
        batch, self.new_relations = self.new_relations, []
        g, counts, tally = self.g, self.counts, self.tally
        created = g.insert_relations([record.relation for record, _ in batch])
        if self.first_new_relation is None and created:
            self.first_new_relation = min(created.values())
        for record, ends_known in batch:
            relation = record.relation
            key = relation.key
            made = created.pop(key, None) is not None   # the first line of its triple in the batch
            if made:
                counts.relations_created += 1
                if record.inverse_of is not None:
                    self.inverses.append((key, record.inverse_of))
            else:
                if self._inserted_here(relation) or key in self.stored_relations:
                    tally.duplicate_relations += 1
                    continue
                if self.repeats is None or hash(key) in self.repeats[1]:
                    self.stored_relations.add(key)
                counts.relations_skipped += 1
            tally.relations += 1
            if not ends_known:
                self.endpoints_later.append((relation, made))

    def _inserted_here(self, relation: Relation) -> bool:
        """Whether the stored relation with ``relation``'s triple was inserted by this merge."""
        if self.first_new_relation is None:
            return False
        row_id = self.g.relation_id(relation)
        return row_id is not None and row_id >= self.first_new_relation

    def finish(self) -> None:
        self.flush()
        names, unchanged = self.names, self.unchanged
        left_out: list[Relation] = []
        for relation, made in self.endpoints_later:
            ends = [end for end in (relation.source, relation.target) if end not in names]
            if not ends:
                continue
            if any(end not in unchanged for end in ends):   # an entity the file does not hold
                self.tally.dangling_relations += 1
            # A new line relating an entity whose own line is unchanged since the import, and which
            # is gone here: deleted since, and deleting it deleted its relations (found by QA: it
            # came back as a dangling relation).
            if made and relates_deleted_entity(self.g, relation, names, unchanged):
                left_out.append(relation)
        if left_out:
            self.g.delete_relations(left_out)
            self.counts.relations_created -= len(left_out)
            self.counts.relations_left_out += len(left_out)
        dropped = {relation.key for relation in left_out}
        for key, primary_type in self.inverses:  # after every relation: a primary may come later
            if key not in dropped:
                self.g.link_inverse(key, primary_type)


def relates_deleted_entity(g: Graph, relation: Relation, names: Collection[str], unchanged: Collection[str]) -> bool:
    """Whether ``relation`` names an entity the file holds only on lines left out as unchanged
    (in ``unchanged``, not in ``names``: the file's other entity names) which ``g`` no longer has:
    deleted since the import, so ``import --new-lines`` leaves the relation out (the merge and the
    dry run's plan alike)."""
    return any(end not in names and end in unchanged and g.find_entity(end) is None
               for end in (relation.source, relation.target))


def merge_records(g: Graph, records: Iterable[LegacyRecord], *, progress: _Progress | None = None,
                  batch: int = BATCH_ROWS, progress_every: int = 1_000,
                  repeats: tuple[Collection[int], Collection[int]] | None = None) -> tuple[MergeCounts, FileTally]:
    """Merge ``records`` (a file's entity and relation lines in file order) into the graph of
    ``g``'s write transaction (see the module docstring for the rules); returns the database-side
    counts and what the file reconciled. ``batch``: rows (entities, observations, relations)
    buffered before they are written together (a parameter for tests; the default suits any
    file). ``progress.advance(n)`` is
    called every ``progress_every`` records and once at the end. ``repeats``: the ``hash()`` of
    every entity name and of every relation key that occurs more than once in ``records`` (more
    may be given), so that only those are remembered; None remembers every stored one met.

    Raises whatever reading ``records`` raises (e.g. LegacyFormatError): the caller's transaction
    then rolls back, so nothing of the file is written.
    """
    merge = _Merge(g, MergeCounts(), FileTally(), repeats)
    done = 0
    for record in records:
        if isinstance(record, Entity):
            merge.entity(record)
        elif isinstance(record, UnchangedEntity):
            merge.unchanged.add(record.name)
            continue
        else:
            merge.relation(record)
        done += 1
        if len(merge.pending) + len(merge.new_entities) + len(merge.new_relations) >= batch:
            merge.flush()
        if progress and done % progress_every == 0:
            progress.advance(progress_every)
    merge.finish()
    if progress:
        progress.advance(done % progress_every)
    return merge.counts, merge.tally
