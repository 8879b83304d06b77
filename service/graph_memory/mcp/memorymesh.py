"""The MemoryMesh tool profile (``MEMORY_TOOLS=memorymesh``): MemoryMesh's eleven static tools,
its response format, and its envelope around the typed tools.

The same database as the reference profile: a node is an entity (``nodeType`` = ``entityType``,
``metadata`` = observations), an edge is a relation with its weight. Adapters parse arguments
into the models below, call one :class:`~graph_memory.service.MemoryService` method (one
transaction; a refused call writes nothing) and build the result:

* success: ``structuredContent`` ``{"timestamp", "data", "actionTaken", "suggestions"?}`` and one
  text item, ``data`` as JSON (indent 2), as MemoryMesh 0.3.0 answers;
* failure (built by :func:`error_result`, which the server's one error mapping calls in this
  profile): ``isError`` with the texts ``Error during <tool>: <message>`` and ``Context: {...}``
  and ``structuredContent`` ``{"timestamp", "error", "context", "suggestions", "recoverySteps"}``,
  ``context`` being ``{"args": <the call's arguments>, "tool": <its name>}``.

Every advertised output schema (:func:`envelope`) admits exactly these two shapes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from graph_memory.errors import Conflict, EntityNotFound, GraphError, InvalidInput, RelationNotFound, StartRefused
from graph_memory.mcp.tools import (
    ADDITIVE,
    DESTRUCTIVE,
    EDITING,
    READ_ONLY,
    Arguments,
    Outcome,
    ToolSpec,
    _Args,
    _array,
    _object,
    _str,
    declared,
    fields_in,
    parse_args,
)
from graph_memory.models import DEFAULT_WEIGHT, Entity, GraphSlice, Relation
from graph_memory.service import EdgeUpdate, MemoryService, NodeUpdate

# -- wire shapes ----------------------------------------------------------------------------------


def node_dict(entity: Entity) -> dict[str, Any]:
    """A node on the wire: ``{"name", "nodeType", "metadata"}``."""
    return {"name": entity.name, "nodeType": entity.entity_type, "metadata": list(entity.observations)}


def edge_dict(relation: Relation) -> dict[str, Any]:
    """An edge on the wire: ``{"from", "to", "edgeType", "weight"}`` (the weight always, 1 by default)."""
    return {"from": relation.source, "to": relation.target, "edgeType": relation.relation_type,
            "weight": relation.weight}


def graph_dict(result: GraphSlice) -> dict[str, Any]:
    """``{"nodes", "edges"}``: the matched nodes, then their neighbours, and the edges touching them."""
    return {"nodes": [node_dict(e) for e in [*result.entities, *result.neighbors]],
            "edges": [edge_dict(r) for r in result.relations]}


def timestamp() -> str:
    """Now, as JavaScript's ``toISOString`` writes it (UTC, milliseconds, ``Z``)."""
    now = datetime.now(UTC)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def _edge_text(key: tuple[str, str, str]) -> str:
    return f"{key[0]} -[{key[2]}]-> {key[1]}"


# -- advertised schemas ---------------------------------------------------------------------------

_WEIGHT = {"type": "number", "minimum": 0, "maximum": 1}
NODE_OUT = {**_object({"name": _str(), "nodeType": _str(), "metadata": _array(_str())},
                      ["name", "nodeType", "metadata"]), "additionalProperties": False}
EDGE_OUT = {**_object({"from": _str(), "to": _str(), "edgeType": _str(), "weight": _WEIGHT},
                      ["from", "to", "edgeType", "weight"]), "additionalProperties": False}
EDGE_KEY_OUT = {**_object({"from": _str(), "to": _str(), "edgeType": _str()}, ["from", "to", "edgeType"]),
                "additionalProperties": False}
# The reading tools' nodes and edges: advertised by their required keys, their fields declared in
# the output schema's definitions (graph_memory.mcp.tools.GRAPH_OUT says why: the official Python
# client's check of a 10,000-node read_graph took 690 ms field by field).
GRAPH_OUT = {**_object({"nodes": _array(fields_in("node", NODE_OUT)), "edges": _array(fields_in("edge", EDGE_OUT))},
                       ["nodes", "edges"]),
             "additionalProperties": False}
GRAPH_DEFINITIONS = {"node": NODE_OUT, "edge": EDGE_OUT}
_STRINGS = _array(_str())


def _closed(properties: dict[str, Any]) -> dict[str, Any]:
    return {**_object(properties, list(properties)), "additionalProperties": False}


def envelope(data: dict[str, Any], definitions: dict[str, Any] | None = None) -> dict[str, Any]:
    """The output schema of a tool in this profile whose ``data`` has the schema ``data``: a
    success ``{timestamp, data, actionTaken, suggestions?}`` or an error ``{timestamp, error,
    context, suggestions, recoverySteps}``, nothing else; ``definitions``, when given, are the
    schema's (what ``data``'s items point to: :func:`graph_memory.mcp.tools.fields_in`)."""
    return {
        **({"definitions": definitions} if definitions else {}),
        "type": "object",
        "properties": {
            "timestamp": {"type": "string", "description": "When the call was answered (ISO 8601, UTC)"},
            "data": data,
            "actionTaken": _str("What the call did"),
            "suggestions": _array(_str(), "What to do next"),
            "error": _str("Why the call failed; nothing was written"),
            "context": {"type": "object", "description": "The failed call: {args, tool}, its arguments and tool"},
            "recoverySteps": _array(_str(), "How to recover from the error"),
        },
        "required": ["timestamp"],
        "additionalProperties": False,
        "anyOf": [
            {**declared("data", "actionTaken"), "not": {"anyOf": [declared("error"), declared("recoverySteps")]}},
            {**declared("error", "context", "suggestions", "recoverySteps"),
             "not": {"anyOf": [declared("data"), declared("actionTaken")]}},
        ],
    }


def _ok(data: dict[str, Any], action: str, *, changed: bool = False, counts: dict[str, int] | None = None,
        suggestions: Sequence[str] = ()) -> Outcome:
    structured: dict[str, Any] = {"timestamp": timestamp(), "data": data, "actionTaken": action}
    if suggestions:
        structured["suggestions"] = list(suggestions)
    return Outcome(structured, data, changed, counts or {})


# -- errors ----------------------------------------------------------------------------------------

_ADVICE: tuple[tuple[type[GraphError], list[str], list[str]], ...] = (
    (EntityNotFound,
     ["Check the node name with search_nodes or open_nodes (names are exact and case-sensitive)",
      "Create the node first with add_nodes (or a typed add_ tool)"],
     ["Find the right name with search_nodes", "Add the missing node, then repeat the call"]),
    (RelationNotFound,
     ["Check the edge with open_nodes on one of its ends", "Create it with add_edges"],
     ["Read the node's edges with open_nodes", "Repeat the call with an existing from, to and edgeType"]),
    (Conflict,
     ["Use update_nodes, update_edges or add_metadata to change what exists"],
     ["Leave out what already exists, or change it with an update tool", "Repeat the call"]),
    (InvalidInput,
     ["Check the arguments against the tool's input schema"],
     ["Fix the arguments the message names", "Repeat the call"]),
    (StartRefused,
     ["Tell the user why memory is unavailable: the error names what to fix on their machine"],
     ["Fix what the error names", "Restart the MCP server"]),
)


# The longest arguments (compact JSON characters) an error repeats in its context.
_LONGEST_ECHO = 16_384


def error_result(tool: str, message: str, exc: Exception, arguments: Arguments
                 ) -> tuple[list[str], dict[str, Any]]:
    """MemoryMesh's error answer for a call of ``tool`` with ``arguments`` that failed with
    ``message`` (already made safe to show by the server): ``(texts, structuredContent)``."""
    suggestions, steps = ["Check the server log if the problem persists"], ["Repeat the call later"]
    for kind, kind_suggestions, kind_steps in _ADVICE:
        if isinstance(exc, kind):
            suggestions, steps = kind_suggestions, kind_steps
            break
    if isinstance(exc, EntityNotFound) and tool.startswith("delete_"):   # not "create it first" (QA)
        suggestions = [suggestions[0], "If the node was deleted already, there is nothing left to delete"]
        steps = [steps[0], "Repeat the call with the right name"]
    context: dict[str, Any] = {"args": arguments, "tool": tool}   # MemoryMesh's {"args": …}, and which tool failed
    echoed = len(json.dumps(arguments, ensure_ascii=False))
    if echoed > _LONGEST_ECHO:
        # Repeated twice (text and structured content), a large call's arguments made its error
        # larger than the reply bound, and the error was replaced by one about the size (found by QA).
        context["args"] = f"({echoed:,} characters of arguments, not repeated here)"
    structured = {"timestamp": timestamp(), "error": message, "context": context,
                  "suggestions": suggestions, "recoverySteps": steps}
    texts = [f"Error during {tool}: {message}", "Context: " + json.dumps(context, ensure_ascii=False)]
    return texts, structured


# -- argument models --------------------------------------------------------------------------------


def _check_weight(value: float | None) -> float | None:
    if value is not None and not 0.0 <= value <= 1.0:   # also refuses NaN and infinities
        raise PydanticCustomError("weight_range", "weight must be a number from 0 to 1 (got {value})",
                                  {"value": value})
    return value


class NodeArg(_Args):
    """One node of add_nodes: ``{name, nodeType, metadata[]}``."""

    name: str = Field(min_length=1)
    nodeType: str = Field(min_length=1)
    metadata: list[str]


class NodeUpdateArg(_Args):
    """One node of update_nodes: ``{name, nodeType?, metadata?}`` (metadata replaces the old list)."""

    name: str = Field(min_length=1)
    nodeType: str | None = Field(default=None, min_length=1)
    metadata: list[str] | None = None


class EdgeArg(_Args):
    """One edge of add_edges: ``{from, to, edgeType, weight?}`` (weight in [0, 1], default 1)."""

    source: str = Field(alias="from", min_length=1)
    to: str = Field(min_length=1)
    edgeType: str = Field(min_length=1)
    weight: float | None = None

    @field_validator("weight")
    @classmethod
    def _weight_in_range(cls, value: float | None) -> float | None:
        return _check_weight(value)


class EdgeKeyArg(_Args):
    """One edge of delete_edges: ``{from, to, edgeType}``."""

    source: str = Field(alias="from")
    to: str
    edgeType: str


class EdgeUpdateArg(_Args):
    """One edge of update_edges: ``{from, to, edgeType}`` names it; ``newFrom``/``newTo``/
    ``newEdgeType`` re-point it; ``weight`` (or MemoryMesh's ``newWeight``) is new evidence."""

    source: str = Field(alias="from")
    to: str
    edgeType: str
    newFrom: str | None = Field(default=None, min_length=1)
    newTo: str | None = Field(default=None, min_length=1)
    newEdgeType: str | None = Field(default=None, min_length=1)
    weight: float | None = None
    newWeight: float | None = None

    @field_validator("weight", "newWeight")
    @classmethod
    def _weight_in_range(cls, value: float | None) -> float | None:
        return _check_weight(value)


class AddNodesArgs(_Args):
    """Arguments of add_nodes."""

    nodes: list[NodeArg]


class UpdateNodesArgs(_Args):
    """Arguments of update_nodes."""

    nodes: list[NodeUpdateArg]


class DeleteNodesArgs(_Args):
    """Arguments of delete_nodes."""

    nodeNames: list[str]


class AddEdgesArgs(_Args):
    """Arguments of add_edges."""

    edges: list[EdgeArg]


class UpdateEdgesArgs(_Args):
    """Arguments of update_edges."""

    edges: list[EdgeUpdateArg]


class DeleteEdgesArgs(_Args):
    """Arguments of delete_edges."""

    edges: list[EdgeKeyArg]


class MetadataArg(_Args):
    """One item of add_metadata: ``{nodeName, contents[]}``."""

    nodeName: str
    contents: list[str]


class AddMetadataArgs(_Args):
    """Arguments of add_metadata: ``{metadata: [{nodeName, contents}]}``."""

    metadata: list[MetadataArg]


class MetadataDeletionArg(_Args):
    """One item of delete_metadata: ``{nodeName, metadata[]}``."""

    nodeName: str
    metadata: list[str]


class DeleteMetadataArgs(_Args):
    """Arguments of delete_metadata: ``{deletions: [{nodeName, metadata}]}``."""

    deletions: list[MetadataDeletionArg]


class SearchArgs(_Args):
    """Arguments of search_nodes: ``{query}``."""

    query: str


class OpenArgs(_Args):
    """Arguments of open_nodes: ``{names[]}``."""

    names: list[str]


class NoArgs(_Args):
    """read_graph takes no arguments."""


# -- adapters ---------------------------------------------------------------------------------------


def _names(items: Sequence[str]) -> str:
    return ", ".join(items) if items else "(none)"


def _add_nodes(app: MemoryService, arguments: Arguments) -> Outcome:
    args = parse_args(AddNodesArgs, "add_nodes", arguments)
    created = app.add_nodes([Entity(n.name, n.nodeType, list(n.metadata)) for n in args.nodes])
    return _ok({"nodes": [node_dict(e) for e in created]}, f"Added nodes: {_names([e.name for e in created])}",
               changed=bool(created), counts={"entities_created": len(created),
                                              "observations_added": sum(len(e.observations) for e in created)})


def _update_nodes(app: MemoryService, arguments: Arguments) -> Outcome:
    args = parse_args(UpdateNodesArgs, "update_nodes", arguments)
    nodes = app.update_nodes([NodeUpdate(n.name, n.nodeType, n.metadata) for n in args.nodes])
    return _ok({"nodes": [node_dict(e) for e in nodes]}, f"Updated nodes: {_names([e.name for e in nodes])}",
               changed=bool(nodes), counts={"entities_updated": len(nodes)})


def _delete_nodes(app: MemoryService, arguments: Arguments) -> Outcome:
    args = parse_args(DeleteNodesArgs, "delete_nodes", arguments)
    result = app.delete_entities(args.nodeNames)
    suggestions = [f"Not found (nothing to delete): {_names(result.not_found)}"] if result.not_found else []
    return _ok({"deletedNodes": result.deleted, "notFound": result.not_found,
                "deletedEdgeCount": result.relations_deleted},
               f"Deleted nodes: {_names(result.deleted)}", changed=result.changed, suggestions=suggestions,
               counts={"entities_deleted": len(result.deleted), "entities_not_found": len(result.not_found),
                       "relations_deleted": result.relations_deleted})


def _add_edges(app: MemoryService, arguments: Arguments) -> Outcome:
    args = parse_args(AddEdgesArgs, "add_edges", arguments)
    created = app.add_edges([Relation(e.source, e.to, e.edgeType, DEFAULT_WEIGHT if e.weight is None else e.weight)
                             for e in args.edges])
    return _ok({"edges": [edge_dict(r) for r in created]},
               f"Added edges: {_names([_edge_text(r.key) for r in created])}", changed=bool(created),
               counts={"relations_created": len(created)})


def _update_edges(app: MemoryService, arguments: Arguments) -> Outcome:
    args = parse_args(UpdateEdgesArgs, "update_edges", arguments)
    updates = []
    for i, e in enumerate(args.edges):
        if e.weight is not None and e.newWeight is not None and e.weight != e.newWeight:
            raise InvalidInput(f"invalid arguments for update_edges: edges.{i}: give the new evidence once, as "
                               f"weight or as newWeight")
        evidence = e.newWeight if e.newWeight is not None else e.weight
        updates.append(EdgeUpdate((e.source, e.to, e.edgeType), e.newFrom, e.newTo, e.newEdgeType, evidence))
    changes = app.update_edges(updates)
    changed = sum(1 for before, after in changes if before != after)
    return _ok({"edges": [edge_dict(after) for _, after in changes],
                "previous": [edge_dict(before) for before, _ in changes]},
               f"Updated edges: {_names([_edge_text(after.key) for _, after in changes])}", changed=bool(changed),
               counts={"relations_updated": len(changes), "relations_changed": changed})


def _delete_edges(app: MemoryService, arguments: Arguments) -> Outcome:
    args = parse_args(DeleteEdgesArgs, "delete_edges", arguments)
    result = app.delete_relations([Relation(e.source, e.to, e.edgeType) for e in args.edges])
    gone = {r.key for r in result.deleted}
    missing = [{"from": e.source, "to": e.to, "edgeType": e.edgeType} for e in args.edges
               if (e.source, e.to, e.edgeType) not in gone]
    return _ok({"deletedEdges": [edge_dict(r) for r in result.deleted], "notFound": missing},
               f"Deleted edges: {_names([_edge_text(r.key) for r in result.deleted])}", changed=result.changed,
               counts={"relations_deleted": len(result.deleted), "relations_not_found": len(missing)})


def _add_metadata(app: MemoryService, arguments: Arguments) -> Outcome:
    args = parse_args(AddMetadataArgs, "add_metadata", arguments)
    results = app.add_observations([(m.nodeName, m.contents) for m in args.metadata])
    added = sum(len(r.added) for r in results)
    return _ok({"metadata": [{"nodeName": r.entity_name, "addedMetadata": r.added} for r in results]},
               f"Added metadata to nodes: {_names([r.entity_name for r in results])}", changed=bool(added),
               counts={"observations_added": added})


def _delete_metadata(app: MemoryService, arguments: Arguments) -> Outcome:
    args = parse_args(DeleteMetadataArgs, "delete_metadata", arguments)
    result = app.delete_metadata([(d.nodeName, d.metadata) for d in args.deletions])
    deleted = sum(len(r.deleted) for r in result.results)
    return _ok({"results": [{"nodeName": r.entity_name, "deletedMetadata": r.deleted} for r in result.results]},
               f"Deleted metadata from nodes: {_names([r.entity_name for r in result.results])}",
               changed=result.changed, counts={"observations_deleted": deleted})


def _graph(result: GraphSlice, action: str, *, empty_hint: str | None = None) -> Outcome:
    data = graph_dict(result)
    suggestions = [empty_hint] if empty_hint and not data["nodes"] else []
    return _ok(data, action, suggestions=suggestions, counts={"nodes": len(data["nodes"]), "edges": len(data["edges"])})


def _read_graph(app: MemoryService, arguments: Arguments) -> Outcome:
    parse_args(NoArgs, "read_graph", arguments)
    return _graph(app.read_graph(), "Read graph", empty_hint="The graph is empty: add nodes with add_nodes")


def _search_nodes(app: MemoryService, arguments: Arguments) -> Outcome:
    args = parse_args(SearchArgs, "search_nodes", arguments)
    return _graph(app.search_nodes(args.query, "substring"), f"Searched nodes with query: {args.query}",
                  empty_hint="No node matched: try a shorter query or another word")


def _open_nodes(app: MemoryService, arguments: Arguments) -> Outcome:
    args = parse_args(OpenArgs, "open_nodes", arguments)
    return _graph(app.open_nodes(args.names), f"Opened nodes: {_names(args.names)}",
                  empty_hint="No node has these names: find them with search_nodes")


# -- input schemas --------------------------------------------------------------------------------

_NODE_IN = _object({"name": _str("Unique name of the node (exact, case-sensitive)"),
                    "nodeType": _str("Type of the node, e.g. npc, location"),
                    "metadata": _array(_str(), "Facts about the node, e.g. 'Role: Wizard'")},
                   ["name", "nodeType", "metadata"])
_EDGE_IN = _object({"from": _str("Name of the node the edge starts at"),
                    "to": _str("Name of the node the edge points to"),
                    "edgeType": _str("Type of the edge, e.g. located_in"),
                    "weight": {**_WEIGHT, "description": "Strength or confidence, 0 to 1 (default 1)"}},
                   ["from", "to", "edgeType"])
_EDGE_KEY_IN = _object({"from": _str("Source node"), "to": _str("Target node"), "edgeType": _str("Edge type")},
                       ["from", "to", "edgeType"])


def _spec(name: str, description: str, input_schema: dict[str, Any], data: dict[str, Any],
          annotations: dict[str, bool], run: Callable[[MemoryService, Arguments], Outcome],
          definitions: dict[str, Any] | None = None) -> ToolSpec:
    return ToolSpec(name, description, input_schema, envelope(data, definitions), annotations, run)


TOOLS: tuple[ToolSpec, ...] = (
    _spec("add_nodes", "Add nodes to the knowledge graph. Fails, adding nothing, if a name already exists.",
          _object({"nodes": _array(_NODE_IN, "Nodes to add")}, ["nodes"]),
          _closed({"nodes": _array(NODE_OUT)}), ADDITIVE, _add_nodes),
    _spec("update_nodes", "Update existing nodes: a given metadata list replaces the old one, a given nodeType "
          "replaces the type. Fails, changing nothing, if a node does not exist.",
          _object({"nodes": _array(_object(
              {"name": _str("Name of the node to update"), "nodeType": _str("New node type"),
               "metadata": _array(_str(), "New metadata, replacing the old")}, ["name"]), "Nodes to update")},
              ["nodes"]),
          _closed({"nodes": _array(NODE_OUT)}), EDITING, _update_nodes),
    _spec("delete_nodes", "Delete nodes and every edge touching them. Unknown names are reported, not refused.",
          _object({"nodeNames": _array(_str(), "Names of the nodes to delete")}, ["nodeNames"]),
          _closed({"deletedNodes": _STRINGS, "notFound": _STRINGS, "deletedEdgeCount": {"type": "integer"}}),
          {**DESTRUCTIVE}, _delete_nodes),
    _spec("add_edges", "Add directed edges between existing nodes, with an optional weight from 0 to 1 "
          "(default 1). Fails, adding nothing, if an end does not exist or the edge already exists.",
          _object({"edges": _array(_EDGE_IN, "Edges to add")}, ["edges"]),
          _closed({"edges": _array(EDGE_OUT)}), ADDITIVE, _add_edges),
    _spec("update_edges", "Update existing edges: newFrom, newTo and newEdgeType re-point an edge; a weight "
          "(new evidence, 0 to 1) is averaged with the current one: (current + new) / 2. Fails, changing "
          "nothing, if an edge does not exist.",
          _object({"edges": _array(_object(
              {**_EDGE_KEY_IN["properties"],
               "newFrom": _str("New source node"), "newTo": _str("New target node"),
               "newEdgeType": _str("New edge type"),
               "weight": {**_WEIGHT, "description": "New evidence, 0 to 1, averaged into the weight"},
               "newWeight": {**_WEIGHT, "description": "Same as weight (MemoryMesh's name)"}},
              ["from", "to", "edgeType"]), "Edges to update, in order")}, ["edges"]),
          _closed({"edges": _array(EDGE_OUT), "previous": _array(EDGE_OUT)}), EDITING, _update_edges),
    _spec("delete_edges", "Delete edges by their exact from, to and edgeType. Unknown edges are reported.",
          _object({"edges": _array(_EDGE_KEY_IN, "Edges to delete")}, ["edges"]),
          _closed({"deletedEdges": _array(EDGE_OUT), "notFound": _array(EDGE_KEY_OUT)}), DESTRUCTIVE, _delete_edges),
    _spec("add_metadata", "Add metadata to existing nodes; entries a node already has are skipped. Fails, "
          "adding nothing, if a node does not exist.",
          _object({"metadata": _array(_object(
              {"nodeName": _str("Name of the node"), "contents": _array(_str(), "Metadata to add")},
              ["nodeName", "contents"]), "Metadata per node")}, ["metadata"]),
          _closed({"metadata": _array(_closed({"nodeName": _str(), "addedMetadata": _STRINGS}))}),
          ADDITIVE, _add_metadata),
    _spec("delete_metadata", "Delete metadata entries (exact text) from nodes. Fails, deleting nothing, if a "
          "node does not exist.",
          _object({"deletions": _array(_object(
              {"nodeName": _str("Name of the node"), "metadata": _array(_str(), "Metadata to delete")},
              ["nodeName", "metadata"]), "Deletions per node")}, ["deletions"]),
          _closed({"results": _array(_closed({"nodeName": _str(), "deletedMetadata": _STRINGS}))}),
          DESTRUCTIVE, _delete_metadata),
    _spec("read_graph", "Read the whole knowledge graph: every node and edge.",
          {"type": "object", "properties": {}}, GRAPH_OUT, READ_ONLY, _read_graph, GRAPH_DEFINITIONS),
    _spec("search_nodes", "Find nodes whose name, type or metadata contains the query (case-insensitive), "
          "with their neighbouring nodes and the edges touching them.",
          _object({"query": _str("Text to find")}, ["query"]), GRAPH_OUT, READ_ONLY, _search_nodes,
          GRAPH_DEFINITIONS),
    _spec("open_nodes", "Open nodes by exact name, with their neighbouring nodes and the edges touching them.",
          _object({"names": _array(_str(), "Names of the nodes to open")}, ["names"]), GRAPH_OUT, READ_ONLY,
          _open_nodes, GRAPH_DEFINITIONS),
)
TOOL_NAMES = frozenset(spec.name for spec in TOOLS)


# -- typed tools in this profile ---------------------------------------------------------------------


def enveloped(spec: ToolSpec) -> ToolSpec:
    """A typed tool (:mod:`graph_memory.mcp.typed`) answering in this profile's format: the same
    arguments and behaviour, its result as ``data`` in MemoryMesh 0.3.0's shapes (nodes and edges
    as :func:`node_dict` and :func:`edge_dict` write them):

    * ``add_<type>``: ``{"nodes": [node], "edges": [created edges]}``;
    * ``update_<type>``: ``{"updatedNode": node, "edgeChanges": {"remove": [edges], "add": [edges]},
      "updatedMetadata": [{"match", "replacement"}], "addedMetadata", "deletedMetadata"}`` (the
      last three are ours; the edges are those the call really removed and added);
    * ``delete_<type>``: ``{"success", "message", "deletedNodes", "deletedEdges"}`` (0.3.0 has no
      ``data`` there).
    """
    verb, _, type_name = spec.name.partition("_")
    inner = spec.run
    shape = _TYPED_SHAPES[verb]

    def run(app: MemoryService, arguments: Arguments) -> Outcome:
        outcome = inner(app, arguments)
        data = shape(outcome.structured)
        if verb == "delete":
            action = f"Deleted {type_name}: {', '.join(data['deletedNodes'])}"
        elif verb == "add":
            action = f"Created {type_name}: {data['nodes'][0]['name']}"
        else:
            action = f"Updated {type_name}: {data['updatedNode']['name']}"
        return replace(_ok(data, action, changed=outcome.changed), counts=outcome.counts)

    return replace(spec, input_schema=_mesh_wrapper(spec.input_schema, verb, type_name),
                   output_schema=envelope(_TYPED_SCHEMAS[verb](spec.output_schema)), run=run)


def _mesh_wrapper(schema: dict[str, Any], verb: str, type_name: str) -> dict[str, Any]:
    """``schema`` advertising MemoryMesh's wrapper key: ``{"update_<type>": …}`` and
    ``{"delete_<type>": …}`` (``add_<type>`` keeps ``{"<type>": …}``, as in MemoryMesh). The
    tools accept the ``<type>`` key too, so callers of either profile keep working."""
    if verb == "add" or type_name not in schema["properties"]:
        return schema
    key = f"{verb}_{type_name}"
    properties = {key if k == type_name else k: v for k, v in schema["properties"].items()}
    required = [key if k == type_name else k for k in schema.get("required", [])]
    return {**schema, "properties": properties, "required": required}


def _mesh_node(entity: dict[str, Any]) -> dict[str, Any]:
    """A typed tool's entity as a node."""
    return {"name": entity["name"], "nodeType": entity["entityType"], "metadata": entity["observations"]}


def _mesh_edges(relations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A typed tool's relations as edges."""
    return [{"from": r["from"], "to": r["to"], "edgeType": r["relationType"],
             "weight": r.get("weight", DEFAULT_WEIGHT)} for r in relations]


def _typed_add_data(payload: dict[str, Any]) -> dict[str, Any]:
    return {"nodes": [_mesh_node(payload["entity"])], "edges": _mesh_edges(payload["createdRelations"])}


def _typed_update_data(payload: dict[str, Any]) -> dict[str, Any]:
    return {"updatedNode": _mesh_node(payload["entity"]),
            "edgeChanges": {"remove": _mesh_edges(payload["deletedRelations"]),
                            "add": _mesh_edges(payload["createdRelations"])},
            "updatedMetadata": payload["updatedObservations"], "addedMetadata": payload["addedObservations"],
            "deletedMetadata": payload["deletedObservations"]}


def _typed_delete_data(payload: dict[str, Any]) -> dict[str, Any]:
    return {"success": payload["success"], "message": payload["message"],
            "deletedNodes": payload["deletedEntities"], "deletedEdges": _mesh_edges(payload["deletedRelations"])}


_TYPED_SHAPES: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "add": _typed_add_data, "update": _typed_update_data, "delete": _typed_delete_data}


def _typed_add_schema(_: dict[str, Any]) -> dict[str, Any]:
    return _closed({"nodes": _array(NODE_OUT), "edges": _array(EDGE_OUT)})


def _typed_update_schema(schema: dict[str, Any]) -> dict[str, Any]:
    return _closed({"updatedNode": NODE_OUT,
                    "edgeChanges": _closed({"remove": _array(EDGE_OUT), "add": _array(EDGE_OUT)}),
                    "updatedMetadata": schema["properties"]["updatedObservations"],
                    "addedMetadata": _STRINGS, "deletedMetadata": _STRINGS})


def _typed_delete_schema(schema: dict[str, Any]) -> dict[str, Any]:
    properties = schema["properties"]
    return _closed({"success": properties["success"], "message": properties["message"],
                    "deletedNodes": _STRINGS, "deletedEdges": _array(EDGE_OUT)})


_TYPED_SCHEMAS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "add": _typed_add_schema, "update": _typed_update_schema, "delete": _typed_delete_schema}


def profile_tools(typed: Sequence[ToolSpec]) -> tuple[ToolSpec, ...]:
    """Every tool of this profile: the eleven static tools, then ``typed`` in this profile's format."""
    return (*TOOLS, *(enveloped(spec) for spec in typed))
