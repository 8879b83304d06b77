"""Relation weights: create_relations' optional weight, its validation, where it shows, and
update_relations' evidence rule (weight = (weight + evidence) / 2)."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from helpers import call, call_error

pytestmark = [pytest.mark.anyio, pytest.mark.both_backends]


async def seed(client: Any) -> None:
    await call(client, "create_entities", {"entities": [
        {"name": n, "entityType": "person", "observations": []} for n in ("Ann", "Ben", "Cid")]})


def rel(source: str, target: str, kind: str = "knows", **extra: Any) -> dict[str, Any]:
    return {"from": source, "to": target, "relationType": kind, **extra}


async def graph_of(client: Any) -> dict[str, Any]:
    return await call(client, "read_graph", {})


# -- create_relations -----------------------------------------------------------------------------


async def test_weight_is_stored_and_shown_only_when_not_the_default(client: Any) -> None:
    await seed(client)
    out = await call(client, "create_relations", {"relations": [
        rel("Ann", "Ben", weight=0.25), rel("Ben", "Cid"), rel("Cid", "Ann", weight=1.0), rel("Ann", "Cid", weight=0),
        rel("Cid", "Ben", weight=1)]})
    expected = [rel("Ann", "Ben", weight=0.25), rel("Ben", "Cid"), rel("Cid", "Ann"), rel("Ann", "Cid", weight=0.0),
                rel("Cid", "Ben")]
    assert out["relations"] == expected
    assert (await graph_of(client))["relations"] == expected
    opened = await call(client, "open_nodes", {"names": ["Ben"]})
    assert rel("Ann", "Ben", weight=0.25) in opened["relations"]
    found = await call(client, "search_nodes", {"query": "Ann"})
    assert rel("Ann", "Cid", weight=0.0) in found["relations"]
    deleted = await call(client, "delete_relations", {"relations": [rel("Ann", "Ben")]})
    assert deleted["deletedRelations"] == [rel("Ann", "Ben", weight=0.25)]


async def test_existing_relation_keeps_its_weight(client: Any) -> None:
    await seed(client)
    await call(client, "create_relations", {"relations": [rel("Ann", "Ben", weight=0.5)]})
    out = await call(client, "create_relations", {"relations": [rel("Ann", "Ben", weight=0.9)]})
    assert out["relations"] == []
    assert (await graph_of(client))["relations"] == [rel("Ann", "Ben", weight=0.5)]


BAD_WEIGHTS = [
    (1.5, "weight must be a number from 0 to 1 (got 1.5)"),     # above the range
    (-0.1, "weight must be a number from 0 to 1 (got -0.1)"),   # below the range
    ("x", "Input should be a valid number"),                    # not a number
    ("0.5", "Input should be a valid number"),                  # a number in a string is still a string
    (True, "Input should be a valid number"),                   # JSON true is not 1
]


@pytest.mark.parametrize(("weight", "message"), BAD_WEIGHTS, ids=[repr(w) for w, _ in BAD_WEIGHTS])
async def test_invalid_weight_is_a_clear_error_and_writes_nothing(client: Any, weight: Any, message: str) -> None:
    await seed(client)
    error = await call_error(client, "create_relations", {"relations": [rel("Ann", "Ben"), rel("Ben", "Cid",
                                                                                              weight=weight)]})
    assert "relations.1.weight" in error and message in error
    assert (await graph_of(client))["relations"] == []


async def test_create_relations_advertises_an_optional_bounded_weight(client: Any) -> None:
    tools = {t.name: t for t in (await client.list_tools()).tools}
    item = tools["create_relations"].input_schema["properties"]["relations"]["items"]
    assert item["required"] == ["from", "to", "relationType"]
    assert item["properties"]["weight"]["minimum"] == 0 and item["properties"]["weight"]["maximum"] == 1
    validator = jsonschema.Draft202012Validator(tools["create_relations"].input_schema)
    assert validator.is_valid({"relations": [rel("a", "b", weight=0.3)]})
    assert not validator.is_valid({"relations": [rel("a", "b", weight=2)]})


# -- update_relations -----------------------------------------------------------------------------


async def test_update_relations_averages_with_the_evidence_and_reports_both_weights(client: Any) -> None:
    await seed(client)
    await call(client, "create_relations", {"relations": [rel("Ann", "Ben", weight=0.8), rel("Ben", "Cid")]})
    out = await call(client, "update_relations", {"relations": [
        {**rel("Ann", "Ben"), "weight": 0.4}, {**rel("Ben", "Cid"), "weight": 0}, {**rel("Ben", "Cid"), "weight": 0}]})
    assert out["results"] == [
        {**rel("Ann", "Ben"), "previousWeight": 0.8, "evidence": 0.4, "weight": pytest.approx(0.6)},
        {**rel("Ben", "Cid"), "previousWeight": 1.0, "evidence": 0.0, "weight": 0.5},
        {**rel("Ben", "Cid"), "previousWeight": 0.5, "evidence": 0.0, "weight": 0.25},   # applied in order
    ]
    relations = (await graph_of(client))["relations"]
    assert relations == [rel("Ann", "Ben", weight=pytest.approx(0.6)), rel("Ben", "Cid", weight=0.25)]


async def test_weight_back_at_one_is_not_shown(client: Any) -> None:
    await seed(client)
    await call(client, "create_relations", {"relations": [rel("Ann", "Ben", weight=0.5)]})
    await call(client, "update_relations", {"relations": [{**rel("Ann", "Ben"), "weight": 1.0}]})   # 0.75
    await call(client, "update_relations", {"relations": [{**rel("Ann", "Ben"), "weight": 1.0}]})   # 0.875
    assert (await graph_of(client))["relations"] == [rel("Ann", "Ben", weight=0.875)]
    await call(client, "delete_relations", {"relations": [rel("Ann", "Ben")]})
    await call(client, "create_relations", {"relations": [rel("Ann", "Ben")]})
    out = await call(client, "update_relations", {"relations": [{**rel("Ann", "Ben"), "weight": 1}]})
    assert out["results"][0]["weight"] == 1.0
    assert (await graph_of(client))["relations"] == [rel("Ann", "Ben")]


FAILED_UPDATES = [
    ([{**rel("Ann", "Ben"), "weight": 0.1}, {**rel("Ben", "Ann"), "weight": 0.1}],
     "Relation Ben -[knows]-> Ann not found"),                                  # the first edit is rolled back
    ([{**rel("Ann", "Ben"), "weight": 1.5}], "relations.0.weight: weight must be a number from 0 to 1"),
    ([rel("Ann", "Ben")], "relations.0.weight: Field required"),                # evidence is required
    ([{**rel("Ann", "Ben"), "weight": "high"}], "relations.0.weight: Input should be a valid number"),
]


@pytest.mark.parametrize(("relations", "message"), FAILED_UPDATES, ids=[m for _, m in FAILED_UPDATES])
async def test_failed_update_relations_changes_nothing(client: Any, relations: list[dict[str, Any]],
                                                       message: str) -> None:
    await seed(client)
    await call(client, "create_relations", {"relations": [rel("Ann", "Ben", weight=0.5)]})
    before = await graph_of(client)
    assert message in await call_error(client, "update_relations", {"relations": relations})
    assert await graph_of(client) == before
