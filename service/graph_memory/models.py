"""Plain value objects of the knowledge graph, and their wire shapes.

Field names follow the data model of the reference server: an entity is
``{"name", "entityType", "observations"}``, a relation ``{"from", "to", "relationType"}``.
``weight`` (our addition, in [0, 1], default 1.0) appears on the wire only when it is not the
default, so upstream's shape is unchanged for every caller that never sets it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, NamedTuple

DEFAULT_WEIGHT = 1.0

Mode = Literal["substring", "words", "fts"]
"""The search_nodes modes: ``substring`` (the reference server's rule, the default), ``words``
(every word, any order, ranked) and ``fts`` (full-text query syntax, ranked)."""
MODES: tuple[Mode, ...] = ("substring", "words", "fts")

View = Literal["full", "summary"]
"""How read_graph / search_nodes / open_nodes show entities: ``full`` (the default: every
observation) or ``summary`` (``observationCount`` instead of the observation texts)."""
VIEWS: tuple[View, ...] = ("full", "summary")


class Times(NamedTuple):
    """When a row was created and last changed: ISO 8601 UTC strings
    (``2026-12-01T17:29:28.123Z``), None when unknown (rows imported from a legacy file, which
    keeps no times). A tuple: a large read builds one per observation."""

    created_at: str | None
    updated_at: str | None

    def to_dict(self) -> dict[str, Any]:
        """``{"createdAt", "updatedAt"}`` (null when unknown)."""
        return {"createdAt": self.created_at, "updatedAt": self.updated_at}


@dataclass(slots=True)
class EntityTimes:
    """An entity's :class:`Times` (``updated_at``: its last change, an observation added, edited
    or removed included) and one :class:`Times` per observation, in the observations' order."""

    entity: Times
    observations: list[Times]


@dataclass(slots=True)
class Entity:
    """A node: ``name`` is the unique key (exact, case-sensitive); ``observations`` keep
    insertion order and hold no duplicates."""

    name: str
    entity_type: str
    observations: list[str] = field(default_factory=list)
    times: EntityTimes | None = field(default=None, compare=False)   # loaded only when asked for

    def to_dict(self) -> dict[str, Any]:
        """The wire shape ``{"name", "entityType", "observations"}`` in upstream's key order."""
        return {"name": self.name, "entityType": self.entity_type, "observations": list(self.observations)}

    def shaped(self, view: View, timestamps: bool) -> dict[str, Any]:
        """The wire shape for ``view``: ``full`` as :meth:`to_dict`; ``summary``
        ``{"name", "entityType", "observationCount"}``. With ``timestamps`` (and :attr:`times`
        loaded) ``createdAt``/``updatedAt`` follow, and in the full view ``observationTimes``:
        ``[{"createdAt", "updatedAt"}]`` parallel to ``observations``."""
        out: dict[str, Any] = {"name": self.name, "entityType": self.entity_type}
        if view == "summary":
            out["observationCount"] = len(self.observations)
        else:
            out["observations"] = list(self.observations)
        if timestamps and self.times is not None:
            out.update(self.times.entity.to_dict())
            if view == "full":
                out["observationTimes"] = [t.to_dict() for t in self.times.observations]
        return out


@dataclass(frozen=True, slots=True)
class Relation:
    """A directed edge ``source -[relation_type]-> target``, unique by the triple (exact).

    Endpoints are entity names. A relation read from a legacy file may name an entity that does
    not exist; such relations are kept as they were stored (the reference server keeps them too).
    """

    source: str
    target: str
    relation_type: str
    weight: float = DEFAULT_WEIGHT
    times: Times | None = field(default=None, compare=False)   # loaded only when asked for

    @property
    def key(self) -> tuple[str, str, str]:
        """The identity triple ``(from, to, relationType)``."""
        return (self.source, self.target, self.relation_type)

    def to_dict(self) -> dict[str, Any]:
        """The wire shape ``{"from", "to", "relationType"}`` (+ ``weight`` when not 1.0)."""
        out: dict[str, Any] = {"from": self.source, "to": self.target, "relationType": self.relation_type}
        if self.weight != DEFAULT_WEIGHT:
            out["weight"] = self.weight
        return out

    def shaped(self, timestamps: bool) -> dict[str, Any]:
        """:meth:`to_dict`, with ``timestamps`` (and :attr:`times` loaded) plus
        ``createdAt``/``updatedAt`` (``updatedAt``: the last weight change, else ``createdAt``)."""
        out = self.to_dict()
        if timestamps and self.times is not None:
            out.update(self.times.to_dict())
        return out


@dataclass(slots=True)
class GraphSlice:
    """What read_graph / search_nodes / open_nodes return.

    ``neighbors`` are the far endpoints of ``relations`` that are not in ``entities``, as full
    entities, de-duplicated, in rowid order (empty for read_graph).
    """

    entities: list[Entity]
    relations: list[Relation]
    neighbors: list[Entity] = field(default_factory=list)
    next_cursor: str | None = None   # a page that stops early: where the next one starts

    def to_dict(self) -> dict[str, Any]:
        """``{"entities": [...], "relations": [...], "neighbors": [...]}``, entities as
        :meth:`Entity.to_dict` writes them except that each shares its entity's
        ``observations`` list instead of copying it: a slice is built for one reply, and copying
        50,000 short lists was 7 ms of a 10,000-entity read_graph (issue 15). Copy the slice
        (or the lists) before changing either."""
        return {
            "entities": _entity_dicts(self.entities),
            "relations": [r.to_dict() for r in self.relations],
            "neighbors": _entity_dicts(self.neighbors),
        }

    def shaped(self, view: View = "full", timestamps: bool = False) -> dict[str, Any]:
        """:meth:`to_dict` in ``view``, with times when ``timestamps`` (see :meth:`Entity.shaped`)
        and ``nextCursor`` when a page stopped early; the defaults give exactly :meth:`to_dict`."""
        if view == "full" and not timestamps:
            out = self.to_dict()
        else:
            out = {
                "entities": [e.shaped(view, timestamps) for e in self.entities],
                "relations": [r.shaped(timestamps) for r in self.relations],
                "neighbors": [e.shaped(view, timestamps) for e in self.neighbors],
            }
        if self.next_cursor is not None:
            out["nextCursor"] = self.next_cursor
        return out


def _entity_dicts(entities: list[Entity]) -> list[dict[str, Any]]:
    """:meth:`Entity.to_dict` of each entity, sharing (not copying) its ``observations``."""
    return [{"name": e.name, "entityType": e.entity_type, "observations": e.observations} for e in entities]


# Relation.__init__ (a frozen dataclass's: one object.__setattr__ per field) was 1 µs a relation,
# 10 ms of a 10,000-entity read_graph; setting the slots directly costs under half (issue 15).
_RELATION_FIELDS = ("source", "target", "relation_type", "weight", "times")
if tuple(f.name for f in fields(Relation)) != _RELATION_FIELDS:   # relations_from_rows must learn them
    raise TypeError("Relation's fields changed: update relations_from_rows")
_RELATION_SLOTS = tuple(Relation.__dict__[name].__set__ for name in _RELATION_FIELDS)


def relations_from_rows(rows: Iterable[Sequence[Any]]) -> list[Relation]:
    """``[Relation(*row) for row in rows]`` for rows ``(source, target, relation_type, weight)``,
    faster; the same objects (``times`` None). Values are not checked (``Relation(*row)`` does
    not check them either)."""
    new = object.__new__
    source, target, relation_type, weight, times = _RELATION_SLOTS
    out: list[Relation] = []
    append = out.append
    for a, b, c, d in rows:
        relation = new(Relation)
        source(relation, a)
        target(relation, b)
        relation_type(relation, c)
        weight(relation, d)
        times(relation, None)
        append(relation)
    return out


# -- results of the graph operations (what the storage layer returns; the edges render them) --


@dataclass(slots=True)
class AddedObservations:
    """One entity's result of add_observations: the contents that were new."""

    entity_name: str
    added: list[str]

    def to_dict(self) -> dict[str, Any]:
        """``{"entityName", "addedObservations"}``."""
        return {"entityName": self.entity_name, "addedObservations": self.added}


@dataclass(slots=True)
class UpdatedObservations:
    """One entity's result of update_observations: its edits ``(match, replacement)`` in call order."""

    entity_name: str
    updated: list[tuple[str, str]]

    def to_dict(self) -> dict[str, Any]:
        """``{"entityName", "updatedObservations": [{"match", "replacement"}]}``."""
        return {"entityName": self.entity_name,
                "updatedObservations": [{"match": m, "replacement": r} for m, r in self.updated]}


@dataclass(slots=True)
class DeleteEntitiesResult:
    """What delete_entities matched: ``deleted`` entity names and the relations removed with them."""

    requested: int
    deleted: list[str]
    not_found: list[str]
    relations_deleted: int

    @property
    def changed(self) -> bool:
        """True when anything was removed."""
        return bool(self.deleted or self.relations_deleted)


@dataclass(slots=True)
class DeletedObservations:
    """One entity's result of delete_observations."""

    entity_name: str
    requested: int
    deleted: list[str]
    found: bool = True


@dataclass(slots=True)
class DeleteObservationsResult:
    """Per-entity results of delete_observations, in call order."""

    results: list[DeletedObservations] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """True when at least one observation was removed."""
        return any(r.deleted for r in self.results)


@dataclass(slots=True)
class DeleteRelationsResult:
    """The relations delete_relations removed, in call order."""

    requested: int
    deleted: list[Relation]

    @property
    def changed(self) -> bool:
        """True when at least one relation was removed."""
        return bool(self.deleted)


@dataclass(frozen=True, slots=True)
class ObservationUpdate:
    """One requested edit: replace the observation ``match`` of ``entity_name`` by ``replacement``."""

    entity_name: str
    match: str
    replacement: str


def property_key(label: str) -> str:
    """What tells one property of a typed entity from another: the letters and digits of its
    name or label, casefolded. ``Current Location`` (our label), ``currentLocation`` (the key
    MemoryMesh's add tools write), ``Currentlocation`` (what its update tools write) and
    ``current_location`` are one property. Upper-cased before casefolding, so that a label's
    capital stays its key's letter (``ırk`` is labelled ``Irk``; found by QA)."""
    return "".join(ch for ch in label.upper().casefold() if ch.isalnum())


def observation_property(content: str) -> str | None:
    """The :func:`property_key` of an observation ``"Key: value"`` (split at the first ``": "``,
    as MemoryMesh splits its metadata), or None when it has no ``": "``."""
    key, colon, _ = content.partition(": ")
    return property_key(key) if colon else None


@dataclass(frozen=True, slots=True)
class WeightChange:
    """One relation's weight before and after an evidence update."""

    relation: Relation
    previous: float
    evidence: float

    def to_dict(self) -> dict[str, Any]:
        """``{"from", "to", "relationType", "previousWeight", "evidence", "weight"}`` (weights always shown)."""
        return {"from": self.relation.source, "to": self.relation.target,
                "relationType": self.relation.relation_type, "previousWeight": self.previous,
                "evidence": self.evidence, "weight": self.relation.weight}


def inverse_types(pairs: Iterable[Sequence[str]]) -> dict[str, str]:
    """The inverse of each declared relation type, both ways: ``[("manages", "reports_to")]`` gives
    ``{"manages": "reports_to", "reports_to": "manages"}`` (a pair of one type, ``married_to:married_to``,
    makes it its own inverse). A pair given twice is fine.

    Raises:
        ValueError: a type would have two inverses (the message names both).
    """
    out: dict[str, str] = {}
    for first, second in pairs:
        for a, b in ((first, second), (second, first)):
            if out.setdefault(a, b) != b:
                raise ValueError(f"relation type {a!r} is declared the inverse of both {out[a]!r} and {b!r}; "
                                 f"give each type one inverse")
    return out
