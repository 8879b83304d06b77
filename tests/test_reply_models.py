"""The fast paths that build read replies give the same objects and shapes as the plain ones."""

from __future__ import annotations

import dataclasses

import pytest

from graph_memory.models import Entity, GraphSlice, Relation, relations_from_rows

ROWS = [("a", "b", "knows", 1.0), ("b", "ä", "works_at", 0.25), ("x", "x", "is", 0.0)]


def test_relations_from_rows_are_the_relations_the_constructor_builds() -> None:
    built = relations_from_rows(iter(ROWS))
    assert built == [Relation(*row) for row in ROWS]
    for relation, row in zip(built, ROWS, strict=True):
        assert dataclasses.astuple(relation) == (*row, None)
        assert hash(relation) == hash(Relation(*row))
        assert relation.to_dict() == Relation(*row).to_dict()


def test_relations_from_rows_are_frozen_like_any_relation() -> None:
    (relation,) = relations_from_rows([ROWS[0]])
    field = "weight"
    with pytest.raises(dataclasses.FrozenInstanceError):
        setattr(relation, field, 0.5)


def test_a_slice_shapes_entities_as_to_dict_does() -> None:
    entities = [Entity("a", "person", ["one", "two"]), Entity("b", "place", [])]
    neighbors = [Entity("c", "thing", ["three"])]
    relations = relations_from_rows(ROWS)
    graph = GraphSlice(entities, relations, neighbors)
    expected = {"entities": [e.to_dict() for e in entities], "relations": [r.to_dict() for r in relations],
                "neighbors": [e.to_dict() for e in neighbors]}
    assert graph.to_dict() == expected
    assert graph.shaped() == expected
    assert list(graph.to_dict()["entities"][0]) == ["name", "entityType", "observations"]   # the wire's key order
