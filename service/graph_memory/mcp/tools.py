"""The MCP tools: advertised schemas, argument parsing, and thin adapters onto the service.

Input schemas carry exactly the reference server's property names, types and ``required`` lists
(``upstream-tools.json`` in the shared docs), plus our optional extras; output schemas are
supersets of upstream's. Adapters parse arguments into typed models, call one
:class:`~graph_memory.service.MemoryService` method and shape the wire result.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from graph_memory.errors import InvalidInput
from graph_memory.mcp.bounds import least_line_bytes
from graph_memory.mcp.jsontext import dumps_indent2
from graph_memory.models import (
    DEFAULT_WEIGHT,
    MODES,
    DeleteEntitiesResult,
    DeleteObservationsResult,
    DeleteRelationsResult,
    Entity,
    GraphSlice,
    ObservationUpdate,
    Relation,
)
from graph_memory.paging import parse_since
from graph_memory.service import MemoryService
from graph_memory.wording import excerpt, plural

# -- advertised JSON schemas ----------------------------------------------------------------------


def _str(description: str | None = None) -> dict[str, Any]:
    return {"type": "string", **({"description": description} if description else {})}


def _array(items: dict[str, Any], description: str | None = None) -> dict[str, Any]:
    return {"type": "array", "items": items, **({"description": description} if description else {})}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


def declared(*keys: str) -> dict[str, Any]:
    """``{"required": keys}``, each key also declared in ``properties`` as ``true`` (anything):
    Ajv in strict mode (the TypeScript SDK's documented strict validator) refuses to compile a
    ``required`` key its schema object does not declare, and a ``true`` subschema costs a
    pure-Python check almost nothing (an empty ``{}`` would cost a descent)."""
    return {"properties": dict.fromkeys(keys, True), "required": list(keys)}


ENTITY_IN = _object(
    {
        "name": _str("Unique name of the entity (exact, case-sensitive)"),
        "entityType": _str("Kind of entity, e.g. person, organization, event"),
        "observations": _array(_str(), "Atomic facts about the entity"),
    },
    ["name", "entityType", "observations"],
)
RELATION_IN = _object(
    {
        "from": _str("Name of the entity the relation starts at"),
        "to": _str("Name of the entity the relation points to"),
        "relationType": _str("Relation in active voice, e.g. works_at"),
    },
    ["from", "to", "relationType"],
)
WEIGHT_IN = {"type": "number", "minimum": 0, "maximum": 1,
             "description": "Confidence in the relation, from 0 to 1 (default 1.0)"}
RELATION_IN_WEIGHTED = _object({**RELATION_IN["properties"], "weight": WEIGHT_IN}, ["from", "to", "relationType"])
ENTITY_OUT = _object(
    {"name": _str(), "entityType": _str(), "observations": _array(_str())},
    ["name", "entityType", "observations"],
)
RELATION_OUT = _object(
    {"from": _str(), "to": _str(), "relationType": _str(),
     "weight": {"type": "number", "minimum": 0, "maximum": 1, "description": "Present only when not 1.0"}},
    ["from", "to", "relationType"],
)
# The reading tools' entities: the full view (observations), or the summary view
# (observationCount); with timestamps, times that are null when unknown.
_TIME_OUT = {"type": ["string", "null"], "description": "ISO 8601 UTC; null when unknown"}
_TIMES_OUT = {"createdAt": _TIME_OUT, "updatedAt": _TIME_OUT}
ENTITY_READ_OUT = {
    **_object(
        {**ENTITY_OUT["properties"],
         "observationCount": {"type": "integer", "minimum": 0,
                              "description": "view 'summary': instead of observations"},
         **_TIMES_OUT, "observationTimes": _array(_object(_TIMES_OUT, ["createdAt", "updatedAt"]))},
        ["name", "entityType"]),
    "oneOf": [declared("observations"), declared("observationCount")],
}
RELATION_READ_OUT = _object({**RELATION_OUT["properties"], **_TIMES_OUT}, RELATION_OUT["required"])


def fields_in(definition: str, item: dict[str, Any]) -> dict[str, Any]:
    """The advertised schema of an item of a large reply whose fields ``item`` declares under the
    output schema's ``#/definitions/<definition>``: an object with ``item``'s required keys; the
    description points to the fields (the tests check replies against them)."""
    return {"type": "object", **declared(*item["required"]), "description": f"Fields: #/definitions/{definition}"}


# The reading tools' replies can hold thousands of entities and relations. Each is advertised as an
# object with its required keys, its fields declared in "definitions" (which apply only where a
# $ref points, and none does). The official Python client checks every reply with jsonschema in pure
# Python, one subschema descent per present field of every item: that was 19 of the 37 ms of a
# 2.5 % search at 10,000 entities through that client, 330 of its 700 ms for read_graph
# (docs/benchmarks.md, "The output schema's shape"). The TypeScript client's compiled check costs
# under 2 ms either way.
_ENTITY_ITEM = fields_in("entity", ENTITY_READ_OUT)
GRAPH_OUT = {
    **_object(
        {
            "entities": _array(_ENTITY_ITEM),
            "relations": _array(fields_in("relation", RELATION_READ_OUT)),
            "neighbors": _array(_ENTITY_ITEM, "Entities at the far end of the returned relations that are "
                                              "not themselves in 'entities'"),
            "nextCursor": _str("Present when there is more: pass it as cursor to get the next page"),
        },
        ["entities", "relations", "neighbors"],
    ),
    "definitions": {"entity": ENTITY_READ_OUT, "relation": RELATION_READ_OUT},
}
DELETE_OUT_BASE = {"success": {"type": "boolean"}, "message": _str()}

READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}
ADDITIVE = {"readOnlyHint": False, "destructiveHint": False, "idempotentHint": False, "openWorldHint": False}
DESTRUCTIVE = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True, "openWorldHint": False}
EDITING = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": False}


# -- argument models (strict: a number where a string belongs is an error, as upstream's zod) ------


class _Args(BaseModel):
    # defer_build: a model's validator is built at its first use, not at import (cold start).
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True, populate_by_name=True, defer_build=True)


class EntityArg(_Args):
    """One entity of create_entities: ``{name, entityType, observations[]}``."""

    name: str
    entityType: str
    observations: list[str]


class RelationArg(_Args):
    """One relation ``{from, to, relationType}`` (+ optional ``weight`` in [0, 1] on create_relations)."""

    source: str = Field(alias="from")
    to: str
    relationType: str
    weight: float | None = None   # None: the default, 1.0; only create_relations stores it

    @field_validator("weight")
    @classmethod
    def _weight_in_range(cls, value: float | None) -> float | None:
        if value is not None and not 0.0 <= value <= 1.0:   # also refuses NaN and infinities
            raise PydanticCustomError("weight_range", "weight must be a number from 0 to 1 (got {value})",
                                      {"value": value})
        return value


class EvidenceArg(RelationArg):
    """One relation of update_relations with the new evidence ``weight`` in [0, 1]."""

    weight: float   # required here: the new evidence, in [0, 1]


class ObservationsArg(_Args):
    """One item of add_observations: ``{entityName, contents[]}``."""

    entityName: str
    contents: list[str]


class DeletionArg(_Args):
    """One item of delete_observations: ``{entityName, observations[]}``."""

    entityName: str
    observations: list[str]


class UpdateArg(_Args):
    """One edit of update_observations: ``{entityName, match, replacement}``."""

    entityName: str
    match: str
    replacement: str


class CreateEntitiesArgs(_Args):
    """Arguments of create_entities: ``{entities[]}``."""

    entities: list[EntityArg]


class CreateRelationsArgs(_Args):
    """Arguments of create_relations: ``{relations[]}``."""

    relations: list[RelationArg]


class AddObservationsArgs(_Args):
    """Arguments of add_observations: ``{observations[]}``."""

    observations: list[ObservationsArg]


class DeleteEntitiesArgs(_Args):
    """Arguments of delete_entities: ``{entityNames[]}``."""

    entityNames: list[str]


class DeleteObservationsArgs(_Args):
    """Arguments of delete_observations: ``{deletions[]}``."""

    deletions: list[DeletionArg]


class DeleteRelationsArgs(_Args):
    """Arguments of delete_relations: ``{relations[]}``."""

    relations: list[RelationArg]


class UpdateObservationsArgs(_Args):
    """Arguments of update_observations: ``{updates[]}``."""

    updates: list[UpdateArg]


class UpdateRelationsArgs(_Args):
    """Arguments of update_relations: ``{relations[]}`` with evidence weights."""

    relations: list[EvidenceArg]


class ShapeArgs(_Args):
    """The optional shape of a reading tool's reply: ``view`` (``full`` or ``summary``) and
    ``timestamps`` (add createdAt/updatedAt)."""

    view: Literal["full", "summary"] | None = None   # None: the default, full
    timestamps: bool | None = None


class PageArgs(ShapeArgs):
    """read_graph's arguments, also part of search_nodes': ``since`` (ISO 8601), ``limit`` (page
    size, ≥ 1) and ``cursor`` (a previous reply's nextCursor). All optional (extra keys are
    ignored, as upstream's schema allows)."""

    since: str | None = None
    limit: int | None = None
    cursor: str | None = None

    @field_validator("limit", mode="before")
    @classmethod
    def _page_size(cls, value: object) -> object:
        # JSON Schema's integer takes 2.0 (a Python client sends a float as written); found by QA.
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        if value is not None and (type(value) is not int or value < 1):
            raise PydanticCustomError("limit", "the page size must be a whole number, 1 or more (got {value})",
                                      {"value": excerpt(json.dumps(value, default=repr))})
        return value

    @field_validator("since")
    @classmethod
    def _moment(cls, value: str | None) -> str | None:
        # Checked here, not only where it is used, so one reply names every bad argument (found by QA).
        if value is not None:
            try:
                parse_since(value)
            except InvalidInput as exc:
                raise PydanticCustomError("since", "{problem}", {"problem": str(exc).removeprefix("since: ")}
                                          ) from None
        return value


class SearchArgs(PageArgs):
    """Arguments of search_nodes: ``query`` (≤ 2048 characters), optional ``mode`` and the
    paging, time and shape arguments of :class:`PageArgs`."""

    query: str
    mode: Literal["substring", "words", "fts"] | None = None   # None: the default, substring


class OpenArgs(ShapeArgs):
    """Arguments of open_nodes: ``{names[]}`` and the optional ``view``/``timestamps``. The
    reading arguments it has no use for (``since``, ``limit``, ``cursor``) are refused unless null,
    rather than ignored as other extra keys are: a caller would take the reply as filtered (found
    by QA)."""

    names: list[str]
    since: object = None
    limit: object = None
    cursor: object = None

    @field_validator("since", "limit", "cursor")
    @classmethod
    def _not_taken(cls, value: object, info: ValidationInfo) -> None:
        if value is not None:
            raise PydanticCustomError(
                "open_nodes_args", "not taken by open_nodes, which opens the names given, whole; use "
                "search_nodes or read_graph for {what}", {"what": "pages" if info.field_name != "since" else
                                                          "a time filter"})
        return None


M = TypeVar("M", bound=BaseModel)

Arguments = Mapping[str, object]
"""A tool call's ``arguments`` as the client sent them (a JSON object), before parsing."""


def parse_args(model: type[M], tool: str, arguments: Arguments) -> M:
    """Validate ``arguments`` into ``model``.

    Raises:
        InvalidInput: with every problem as ``path: message`` (e.g. ``entities.0.name: Input
            should be a valid string``) so a model can correct its call.
    """
    try:
        return model.model_validate(arguments)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or '(arguments)'}: {err['msg']}" for err in exc.errors()
        )
        raise InvalidInput(f"invalid arguments for {tool}: {problems}") from None


# -- tools ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Outcome:
    """A tool's result: ``structured`` (the structuredContent object), ``text`` (the payload of
    the one text item), ``changed`` (whether the graph changed: subscribers are notified),
    ``counts`` (what changed, e.g. ``{"entities_created": 2, "observations_added": 5}``, for the
    server's log line; empty: the sizes of the lists in ``structured``); ``sized``: the reply was
    already held to the reply bound before it was built (:mod:`graph_memory.mcp.bounds`)."""

    structured: dict[str, Any]
    text: Any
    changed: bool = False
    counts: dict[str, int] = field(default_factory=dict)
    sized: bool = False   # already held to MEMORY_MAX_REPLY_BYTES (MemoryService.check_reply): not measured again
    _rendered: str | None = field(default=None, repr=False, compare=False)

    def render(self) -> str:
        """The text content: ``json.dumps(text, indent=2, ensure_ascii=False)`` (same string, faster;
        made once: a reply measured against the bound is not rendered again to be sent)."""
        rendered = self._rendered
        if rendered is None:
            rendered = dumps_indent2(self.text)
            object.__setattr__(self, "_rendered", rendered)   # a cache on a frozen value
        return rendered


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """One advertised tool and the adapter that runs it: parse the arguments, call one
    :class:`MemoryService` method, build the :class:`Outcome`."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    annotations: dict[str, bool]
    run: Callable[[MemoryService, Arguments], Outcome]
    title: str | None = None   # what a host shows for the tool (the reference server's titles)


def _relations(items: list[RelationArg]) -> list[Relation]:
    return [Relation(r.source, r.to, r.relationType, DEFAULT_WEIGHT if r.weight is None else r.weight)
            for r in items]


# -- the wire text of the delete tools (the reference server's success/message shape) ----------


def _deleted_entities(result: DeleteEntitiesResult) -> dict[str, Any]:
    """``{"success", "message", "deletedEntities"}``."""
    message = f"Deleted {len(result.deleted)} of {plural(result.requested, 'entity')}"
    if result.relations_deleted:   # also those of a name that is no entity (a dangling relation's end)
        message += f" (and {plural(result.relations_deleted, 'relation')} to or from the names given)"
    if result.not_found:
        message += "; not found: " + ", ".join(result.not_found)
    return {"success": True, "message": message, "deletedEntities": result.deleted}


def _deleted_observations(result: DeleteObservationsResult) -> dict[str, Any]:
    """``{"success", "message", "results": [{"entityName", "deletedObservations", "message"}]}``."""
    count = sum(len(r.deleted) for r in result.results)
    entities = len({r.entity_name for r in result.results if r.deleted})   # an entity named twice is one
    message = f"Deleted {plural(count, 'observation')} from {plural(entities, 'entity')}"
    missing = [r.entity_name for r in result.results if not r.found]
    if missing:
        message += "; not found: " + ", ".join(missing)
    return {"success": True, "message": message, "results": [
        {"entityName": r.entity_name, "deletedObservations": r.deleted,
         "message": (f"deleted {len(r.deleted)} of {r.requested} requested" if r.found
                     else f"Entity with name {r.entity_name} not found")}
        for r in result.results]}


def _deleted_relations(result: DeleteRelationsResult) -> dict[str, Any]:
    """``{"success", "message", "deletedRelations"}``."""
    return {
        "success": True,
        "message": f"Deleted {len(result.deleted)} of {plural(result.requested, 'relation')}",
        "deletedRelations": [r.to_dict() for r in result.deleted],
    }


def _create_entities(app: MemoryService, arguments: Arguments) -> Outcome:
    args = parse_args(CreateEntitiesArgs, "create_entities", arguments)
    entities = [Entity(e.name, e.entityType, list(e.observations)) for e in args.entities]
    created = app.create_entities(entities)
    payload = [e.to_dict() for e in created]
    return Outcome({"entities": payload}, payload, bool(created), {
        "entities_created": len(created), "entities_skipped": len(entities) - len(created),
        "observations_added": sum(len(e.observations) for e in created)})


def _create_relations(app: MemoryService, arguments: Arguments) -> Outcome:
    args = parse_args(CreateRelationsArgs, "create_relations", arguments)
    relations = _relations(args.relations)
    created = app.create_relations(relations)
    payload = [r.to_dict() for r in created]
    return Outcome({"relations": payload}, payload, bool(created),
                   {"relations_created": len(created), "relations_skipped": len(relations) - len(created)})


def _add_observations(app: MemoryService, arguments: Arguments) -> Outcome:
    args = parse_args(AddObservationsArgs, "add_observations", arguments)
    items = [(o.entityName, o.contents) for o in args.observations]
    results = app.add_observations(items)
    payload = [r.to_dict() for r in results]
    added = sum(len(r.added) for r in results)
    return Outcome({"results": payload}, payload, bool(added), {
        "observations_added": added, "observations_skipped": sum(len(c) for _, c in items) - added,
        "entities": len(results)})


def _delete_entities(app: MemoryService, arguments: Arguments) -> Outcome:
    args = parse_args(DeleteEntitiesArgs, "delete_entities", arguments)
    result = app.delete_entities(args.entityNames)
    payload = _deleted_entities(result)
    return Outcome(payload, payload, result.changed, {
        "entities_deleted": len(result.deleted), "entities_not_found": len(result.not_found),
        "relations_deleted": result.relations_deleted})


def _delete_observations(app: MemoryService, arguments: Arguments) -> Outcome:
    args = parse_args(DeleteObservationsArgs, "delete_observations", arguments)
    items = [(d.entityName, d.observations) for d in args.deletions]
    result = app.delete_observations(items)
    payload = _deleted_observations(result)
    deleted = sum(len(r.deleted) for r in result.results)
    return Outcome(payload, payload, result.changed, {
        "observations_deleted": deleted, "observations_not_found": sum(len(o) for _, o in items) - deleted,
        "entities_not_found": sum(1 for r in result.results if not r.found)})


def _delete_relations(app: MemoryService, arguments: Arguments) -> Outcome:
    args = parse_args(DeleteRelationsArgs, "delete_relations", arguments)
    relations = _relations(args.relations)
    result = app.delete_relations(relations)
    payload = _deleted_relations(result)
    return Outcome(payload, payload, result.changed, {
        "relations_deleted": len(result.deleted), "relations_not_found": len(relations) - len(result.deleted)})


def _update_observations(app: MemoryService, arguments: Arguments) -> Outcome:
    args = parse_args(UpdateObservationsArgs, "update_observations", arguments)
    results = app.update_observations([ObservationUpdate(u.entityName, u.match, u.replacement)
                                       for u in args.updates])
    payload = {"results": [r.to_dict() for r in results]}
    return Outcome(payload, payload, bool(results),
                   {"observations_updated": sum(len(r.updated) for r in results)})


def _update_relations(app: MemoryService, arguments: Arguments) -> Outcome:
    args = parse_args(UpdateRelationsArgs, "update_relations", arguments)
    changes = app.update_relations(_relations(list(args.relations)))
    payload = {"results": [c.to_dict() for c in changes]}
    changed = sum(1 for c in changes if c.relation.weight != c.previous)
    return Outcome(payload, payload, bool(changed),
                   {"relations_weighed": len(changes), "relation_weights_changed": changed})


def _graph_outcome(app: MemoryService, tool: str, result: GraphSlice, args: ShapeArgs) -> Outcome:
    view, timestamps, cursor = args.view or "full", bool(args.timestamps), getattr(args, "cursor", None)
    near = app.check_reply(tool, result, view, timestamps, cursor)
    payload = result.shaped(view, timestamps)
    outcome = Outcome(payload, payload, sized=True)
    if near and (size := least_line_bytes(outcome.render(), payload)) >= app.limits.max_reply_bytes:
        app.refuse_reply(tool, result, view, timestamps, cursor, size)
    return outcome


def _read_graph(app: MemoryService, arguments: Arguments) -> Outcome:
    args = parse_args(PageArgs, "read_graph", arguments)
    result = app.read_graph(since=args.since, limit=args.limit, cursor=args.cursor, timestamps=bool(args.timestamps))
    return _graph_outcome(app, "read_graph", result, args)


def _search_nodes(app: MemoryService, arguments: Arguments) -> Outcome:
    args = parse_args(SearchArgs, "search_nodes", arguments)
    result = app.search_nodes(args.query, args.mode or "substring", args.limit, since=args.since, cursor=args.cursor,
                              timestamps=bool(args.timestamps))
    return _graph_outcome(app, "search_nodes", result, args)


def _open_nodes(app: MemoryService, arguments: Arguments) -> Outcome:
    args = parse_args(OpenArgs, "open_nodes", arguments)
    return _graph_outcome(app, "open_nodes", app.open_nodes(args.names, timestamps=bool(args.timestamps)), args)


# The reading tools' optional arguments. Every word here is in every conversation's tools/list:
# keep them short (bench/tools_list.py measures it against the reference server).
VIEW_IN = {"type": "string", "enum": ["full", "summary"]}
TIMESTAMPS_IN = {"type": "boolean"}
SHAPE_IN = {"view": VIEW_IN, "timestamps": TIMESTAMPS_IN}
PAGE_IN = {"since": {"type": "string"}, "limit": {"type": "integer", "minimum": 1, "description": "Page size"},
           "cursor": {"type": "string"}}


def _results_schema(item: dict[str, Any]) -> dict[str, Any]:
    return _object({"results": _array(item)}, ["results"])


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(
        "create_entities",
        "Create entities (people, organizations, events, …), each with a type and observations "
        "(atomic facts). Existing names are skipped.",
        _object({"entities": _array(ENTITY_IN)}, ["entities"]),
        _object({"entities": _array(ENTITY_OUT)}, ["entities"]),
        ADDITIVE,
        _create_entities,
        "Create Entities",
    ),
    ToolSpec(
        "create_relations",
        "Create directed relations between existing entities, in active voice (from -[relationType]-> "
        "to). Existing ones are skipped. Optional weight (0 to 1, default 1.0): how sure you are; "
        "update_relations adjusts it.",
        _object({"relations": _array(RELATION_IN_WEIGHTED)}, ["relations"]),
        _object({"relations": _array(RELATION_OUT)}, ["relations"]),
        ADDITIVE,
        _create_relations,
        "Create Relations",
    ),
    ToolSpec(
        "add_observations",
        "Add observations (atomic facts) to existing entities. Observations an entity already has "
        "are skipped; the result lists what was added.",
        _object({"observations": _array(_object(
            {"entityName": _str("Name of the entity to add to"),
             "contents": _array(_str(), "Observations to add")},
            ["entityName", "contents"]))}, ["observations"]),
        _results_schema(_object({"entityName": _str(), "addedObservations": _array(_str())},
                                ["entityName", "addedObservations"])),
        ADDITIVE,
        _add_observations,
        "Add Observations",
    ),
    ToolSpec(
        "delete_entities",
        "Delete entities with their observations and every relation naming them. Unknown names "
        "are skipped.",
        _object({"entityNames": _array(_str())}, ["entityNames"]),
        _object({**DELETE_OUT_BASE, "deletedEntities": _array(_str())}, ["success", "message"]),
        DESTRUCTIVE,
        _delete_entities,
        "Delete Entities",
    ),
    ToolSpec(
        "delete_observations",
        "Delete specific observations (exact text) from entities. Reports what matched per entity.",
        _object({"deletions": _array(_object(
            {"entityName": _str("Name of the entity holding the observations"),
             "observations": _array(_str(), "Observations to delete (exact text)")},
            ["entityName", "observations"]))}, ["deletions"]),
        _object({**DELETE_OUT_BASE, "results": _array(_object(
            {"entityName": _str(), "deletedObservations": _array(_str()), "message": _str()},
            ["entityName", "deletedObservations", "message"]))}, ["success", "message"]),
        DESTRUCTIVE,
        _delete_observations,
        "Delete Observations",
    ),
    ToolSpec(
        "delete_relations",
        "Delete relations by their exact (from, to, relationType). Reports the relations that matched.",
        _object({"relations": _array(RELATION_IN)}, ["relations"]),
        _object({**DELETE_OUT_BASE, "deletedRelations": _array(RELATION_OUT)}, ["success", "message"]),
        DESTRUCTIVE,
        _delete_relations,
        "Delete Relations",
    ),
    ToolSpec(
        "update_observations",
        "Correct observations in place: replace an entity's observation 'match' by 'replacement', "
        "keeping its position. Fails, changing nothing, if match is missing or replacement exists.",
        _object({"updates": _array(_object(
            {"entityName": _str("Name of the entity"),
             "match": _str("The current observation text (exact)"),
             "replacement": _str("The new observation text")},
            ["entityName", "match", "replacement"]), "Applied in order")}, ["updates"]),
        _results_schema(_object(
            {"entityName": _str(), "updatedObservations": _array(_object(
                {"match": _str(), "replacement": _str()}, ["match", "replacement"]))},
            ["entityName", "updatedObservations"])),
        EDITING,
        _update_observations,
        "Update Observations",
    ),
    ToolSpec(
        "update_relations",
        "Weigh new evidence (0 to 1) for existing relations: weight becomes (weight + evidence) / 2. "
        "Reports the previous and new weight. Fails, changing nothing, if a relation does not exist.",
        _object({"relations": _array(_object(
            {**RELATION_IN["properties"],
             "weight": {**WEIGHT_IN, "description": "New evidence from 0 (contradicts) to 1 (confirms)"}},
            ["from", "to", "relationType", "weight"]), "Applied in order")},
            ["relations"]),
        _results_schema(_object(
            {"from": _str(), "to": _str(), "relationType": _str(), "previousWeight": {"type": "number"},
             "evidence": {"type": "number"}, "weight": {"type": "number"}},
            ["from", "to", "relationType", "previousWeight", "evidence", "weight"])),
        EDITING,
        _update_relations,
        "Update Relations",
    ),
    ToolSpec(
        "read_graph",
        "Read the entire knowledge graph. When it is large: view 'summary' (observation counts, no "
        "texts), since (ISO 8601: only what changed since), or pages (limit, then cursor=nextCursor "
        "until none). timestamps adds createdAt/updatedAt.",
        {"type": "object", "properties": {**SHAPE_IN, **PAGE_IN}},
        GRAPH_OUT,
        READ_ONLY,
        _read_graph,
        "Read Graph",
    ),
    ToolSpec(
        "search_nodes",
        "Find entities by text in name, type or observations (case-insensitive), with the relations "
        "touching them and their neighbors. mode: substring (default: the whole query verbatim), words "
        "(every word, any order, ranked), fts (FTS5: \"phrase\", AND/OR/NOT, NEAR, name:/entityType:/"
        "observations:). limit, cursor, view, since, timestamps: as read_graph.",
        _object({
            "query": _str("Text to find"),
            "mode": {"type": "string", "enum": list(MODES), "default": "substring"},
            **SHAPE_IN, **PAGE_IN,
        }, ["query"]),
        GRAPH_OUT,
        READ_ONLY,
        _search_nodes,
        "Search Nodes",
    ),
    ToolSpec(
        "open_nodes",
        "Open entities by exact name, with the relations touching them and their neighbors. "
        "Unknown names are skipped.",
        _object({"names": _array(_str()), **SHAPE_IN}, ["names"]),
        GRAPH_OUT,
        READ_ONLY,
        _open_nodes,
        "Open Nodes",
    ),
)
