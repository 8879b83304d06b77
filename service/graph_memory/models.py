"""Plain value objects of the knowledge graph, and their wire shapes.

Field names follow the data model of the reference server: an entity is
``{"name", "entityType", "observations"}``, a relation ``{"from", "to", "relationType"}``.
``weight`` (our addition, in [0, 1], default 1.0) appears on the wire only when it is not the
default, so upstream's shape is unchanged for every caller that never sets it.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

DEFAULT_WEIGHT = 1.0

Mode = Literal["substring", "words", "fts"]
"""The search_nodes modes: ``substring`` (the reference server's rule, the default), ``words``
(every word, any order, ranked) and ``fts`` (full-text query syntax, ranked)."""
MODES: tuple[Mode, ...] = ("substring", "words", "fts")


@dataclass(slots=True)
class Entity:
    """A node: ``name`` is the unique key (exact, case-sensitive); ``observations`` keep
    insertion order and hold no duplicates."""

    name: str
    entity_type: str
    observations: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """The wire shape ``{"name", "entityType", "observations"}`` in upstream's key order."""
        return {"name": self.name, "entityType": self.entity_type, "observations": list(self.observations)}


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


@dataclass(slots=True)
class GraphSlice:
    """What read_graph / search_nodes / open_nodes return.

    ``neighbors`` are the far endpoints of ``relations`` that are not in ``entities``, as full
    entities, de-duplicated, in rowid order (empty for read_graph).
    """

    entities: list[Entity]
    relations: list[Relation]
    neighbors: list[Entity] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """``{"entities": [...], "relations": [...], "neighbors": [...]}``."""
        return {
            "entities": [e.to_dict() for e in self.entities],
            "relations": [r.to_dict() for r in self.relations],
            "neighbors": [e.to_dict() for e in self.neighbors],
        }


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
