"""Typed tools from schema files, the MemoryMesh model: ``add_/update_/delete_<type>``.

``MEMORY_SCHEMAS_DIR`` names a folder of ``<type>.schema.json`` files (MemoryMesh's own
``add_<type>.schema.json`` names work too)::

    {"name": "add_npc", "description": "An NPC of the campaign",
     "properties": {
        "name":  {"type": "string", "description": "Unique name", "required": true},
        "race":  {"type": "string", "description": "Species", "required": true, "enum": ["Human", "Elf"]},
        "currentLocation": {"type": "string", "description": "Where the NPC is",
                            "relationship": {"edgeType": "located_in", "nodeType": "location"}}},
     "additionalProperties": false}

Every file is checked when the server starts (:func:`load_typed_tools`); the first problem stops
the start with a :class:`~graph_memory.errors.SchemaError` naming the file. The type is what
follows ``add_`` in ``name``; a file named otherwise is loaded with a warning in the log.

Each schema yields three tools whose arguments are wrapped in an object named after the type
(``{"npc": {...}}``). A typed entity is an ordinary entity (``entityType`` = the type); each
property is one observation ``"Display Name: value"`` (camelCase → Title Case, arrays joined with
``", "``); a ``relationship`` property also holds the relations ``name -[edgeType]-> value``, one
per array item. The name is the key and is never stored as an observation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from graph_memory.errors import InvalidInput, SchemaError
from graph_memory.logs import get_logger
from graph_memory.mcp.memorymesh import TOOL_NAMES as MESH_TOOL_NAMES
from graph_memory.mcp.tools import (
    ADDITIVE,
    DELETE_OUT_BASE,
    DESTRUCTIVE,
    EDITING,
    ENTITY_OUT,
    RELATION_OUT,
    TOOLS,
    Arguments,
    Outcome,
    ToolSpec,
    _array,
    _object,
    _str,
)
from graph_memory.models import Entity, Relation, inverse_types, property_key
from graph_memory.service import MemoryService, TypedValue
from graph_memory.wording import plural

SUFFIX = ".schema.json"
TOP_KEYS = {"name", "description", "properties", "additionalProperties"}
DOC_KEYS = {"$schema", "$id", "$comment", "title"}          # accepted and ignored
PROPERTY_KEYS = {"type", "description", "required", "enum", "relationship", "items", "$comment"}
RELATIONSHIP_KEYS = {"edgeType", "nodeType", "description", "inverse"}
VERBS = ("add", "update", "delete")
# Tool names are [A-Za-z0-9_-]; 57 + len("update_") keeps every tool name within 64 characters.
TYPE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,56}")
PROPERTY_NAME = re.compile(r"[^\W\d][\w-]*")
# Typed tools may not shadow a static tool of either profile (MEMORY_TOOLS).
STANDARD_TOOLS = frozenset(spec.name for spec in TOOLS) | MESH_TOOL_NAMES
EXTRA_VALUE = {"anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}]}
log = get_logger("graph_memory.typed")

Value = str | list[str]


def display_name(key: str) -> str:
    """The observation label of a property: camelCase, snake_case and kebab-case become Title Case
    words (``currentLocation`` → ``Current Location``, ``home_town`` → ``Home Town``, ``npcID`` →
    ``Npc ID``); letters after the first of each word keep their case."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])", " ", key)
    return " ".join(w[:1].upper() + w[1:] for w in re.split(r"[\s_-]+", spaced) if w)


@dataclass(frozen=True, slots=True)
class Relationship:
    """A property's edge: ``<entity> -[edge_type]-> <value>``; ``node_type`` documents the target;
    ``inverse`` declares the inverse relation type (``<value> -[inverse]-> <entity>`` is then
    materialized with it, as for ``MEMORY_INVERSE_RELATIONS``)."""

    edge_type: str
    node_type: str | None = None
    description: str | None = None
    inverse: str | None = None


@dataclass(frozen=True, slots=True)
class Property:
    """One property of a type: stored as the observation ``"<display>: <value>"``."""

    key: str
    kind: Literal["string", "array"]
    description: str
    required: bool = False
    enum: tuple[str, ...] | None = None
    relationship: Relationship | None = None

    def observation(self, value: Value) -> str:
        """The observation stating ``value``: ``"Display Name: value"``."""
        return f"{display_name(self.key)}: " + (value if isinstance(value, str) else ", ".join(value))

    def json_schema(self, type_name: str, *, update: bool = False) -> dict[str, Any]:
        """The advertised JSON Schema of this property (in ``update``, optional enums admit "")."""
        description = self.description
        rel = self.relationship
        if rel is not None:
            target, edge = rel.node_type or "entity", f"{type_name} -[{rel.edge_type}]->"
            description += (f". Name of an existing {target} (or a list of names); sets the relation {edge} it"
                            if self.kind == "string"
                            else f". Names of existing {target} entities; one relation {edge} each")
            if rel.description:
                description += f" ({rel.description})"
        enum = list(self.enum) if self.enum is not None else None
        if enum is not None and update and not self.required and self.kind == "string":
            enum.append("")
        if self.kind == "string" and rel is not None:
            # MemoryMesh advertises (and its callers send) a relationship property as a list of
            # names; one name as a plain string is the design document's form: accept both.
            one = {"type": "string", **({"enum": enum} if enum else {})}
            return {"anyOf": [one, {"type": "array", "items": one}], "description": description}
        if self.kind == "string":
            return {"type": "string", "description": description, **({"enum": enum} if enum else {})}
        items: dict[str, Any] = {"type": "string", **({"enum": enum} if enum else {})}
        return {"type": "array", "items": items, "description": description}


NAME = Property("name", "string", "Unique name of the entity (exact, case-sensitive)", required=True)


@dataclass(frozen=True, slots=True)
class TypeSchema:
    """A validated schema file: the type, its properties (``name`` first) and whether extra
    properties are allowed (they are then stored as observations too)."""

    type_name: str
    description: str
    properties: tuple[Property, ...]
    additional: bool
    source: str

    def tools(self) -> tuple[ToolSpec, ToolSpec, ToolSpec]:
        """``add_<type>``, ``update_<type>`` and ``delete_<type>``."""
        return _typed_tools(self)


# -- loading and validation -----------------------------------------------------------------------


def declared_inverses(folder: Path | None, pairs: list[str]) -> dict[str, str]:
    """The inverse relation types in force: the ``type:inverse`` ``pairs`` of
    ``MEMORY_INVERSE_RELATIONS`` and the ``inverse`` of every schema relationship in ``folder``
    (:func:`graph_memory.models.inverse_types`: both ways).

    Raises:
        SchemaError: a schema file is invalid, or its inverse contradicts another declaration.
    """
    declared: list[tuple[str, str]] = [(a, b) for a, _, b in (p.partition(":") for p in pairs)]
    for schema in load_schemas(folder) if folder is not None else []:
        for prop in schema.properties:
            rel = prop.relationship
            if rel is not None and rel.inverse is not None:
                declared.append((rel.edge_type, rel.inverse))
                try:
                    inverse_types(declared)
                except ValueError as exc:
                    raise SchemaError(f"property {prop.key!r}: {exc} (MEMORY_INVERSE_RELATIONS or another "
                                      f"schema declares the other)", path=schema.source) from None
    return inverse_types(declared)



def load_typed_tools(folder: Path | None) -> tuple[ToolSpec, ...]:
    """The typed tools of every schema file in ``folder`` (``None``: no typed tools).

    Raises:
        SchemaError: the folder is missing or a file is invalid (the first problem found).
    """
    if folder is None:
        return ()
    schemas = load_schemas(folder)
    log.info("typed_tools_loaded", folder=str(folder), types=[s.type_name for s in schemas])
    return tuple(spec for schema in schemas for spec in schema.tools())


def load_schemas(folder: Path) -> list[TypeSchema]:
    """Every ``*.schema.json`` in ``folder`` (not recursive; hidden files skipped), by file name.

    Raises:
        SchemaError: the folder does not exist, a file is invalid, or two files define one type.
    """
    if not folder.is_dir():
        problem = "is not a folder" if folder.exists() else "does not exist"
        raise SchemaError(f"MEMORY_SCHEMAS_DIR {problem}", path=str(folder))
    files = sorted(p for p in folder.iterdir() if p.name.endswith(SUFFIX) and not p.name.startswith("."))
    if not files:
        log.warning("no_schema_files", folder=str(folder), expected=f"<type>{SUFFIX}")
    schemas: list[TypeSchema] = []
    seen: dict[str, Path] = {}
    for path in files:
        schema = load_schema(path)
        if schema.type_name in seen:
            raise SchemaError(f"type '{schema.type_name}' is already defined by {seen[schema.type_name]}; "
                              f"keep one schema file per type", path=str(path))
        seen[schema.type_name] = path
        schemas.append(schema)
    return schemas


def load_schema(path: Path) -> TypeSchema:
    """Read and validate one schema file.

    Raises:
        SchemaError: unreadable, not UTF-8, not JSON, or not a valid schema.
    """
    try:
        text = path.read_bytes().decode("utf-8-sig")
    except OSError as exc:
        raise SchemaError(f"cannot be read: {exc.strerror or exc}", path=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise SchemaError(f"is not UTF-8 text (byte offset {exc.start})", path=str(path)) from exc
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SchemaError(f"is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
                          path=str(path)) from exc
    schema = parse_schema(data, str(path))
    stem = path.name[: -len(SUFFIX)]
    if stem not in (schema.type_name, f"add_{schema.type_name}"):
        log.warning("schema_file_name_mismatch", path=str(path), type=schema.type_name,
                    expected=f"{schema.type_name}{SUFFIX}")
    return schema


def parse_schema(data: Any, source: str) -> TypeSchema:
    """Validate a parsed schema document; ``source`` names it in errors.

    Raises:
        SchemaError: the first problem, e.g. ``property 'race': 'enum' must be a non-empty list of
            strings``.
    """
    def fail(problem: str) -> SchemaError:
        return SchemaError(problem, path=source)

    if not isinstance(data, dict):
        raise fail(f"must be a JSON object with name, description and properties, not {_json_type(data)}")
    unknown = sorted(set(data) - TOP_KEYS - DOC_KEYS)
    if unknown:
        raise fail(f"unknown key(s) {', '.join(map(repr, unknown))}; a schema has {', '.join(sorted(TOP_KEYS))}")
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise fail("'name' is missing; it must be 'add_<type>', e.g. 'add_npc'")
    if not name.startswith("add_"):
        raise fail(f"'name' is {name!r}: it must start with 'add_' (e.g. 'add_{name}')")
    type_name = name[len("add_"):]
    if not TYPE_NAME.fullmatch(type_name):
        raise fail(f"type {type_name!r} (from 'name') must start with a letter and contain only letters, digits, "
                   f"'_' and '-' (at most 57 characters), since it becomes part of tool names")
    clashes = sorted({f"{verb}_{type_name}" for verb in VERBS} & STANDARD_TOOLS)
    if clashes:
        raise fail(f"type {type_name!r} would create {', '.join(clashes)}, a standard tool; rename the type")
    description = data.get("description")
    if not isinstance(description, str) or not description.strip():
        raise fail("'description' is missing or empty; it tells the model what an entity of this type is")
    raw = data.get("properties")
    if not isinstance(raw, dict):
        raise fail("'properties' is missing or not an object of property definitions")
    additional = data.get("additionalProperties", False)
    if not isinstance(additional, bool):
        raise fail(f"'additionalProperties' must be true or false, not {_json_type(additional)}")
    properties = [_parse_property(key, spec, fail) for key, spec in raw.items()]
    declared_name = next((p for p in properties if p.key == "name"), None)
    if declared_name is None:
        properties.insert(0, NAME)
    else:
        properties.remove(declared_name)
        properties.insert(0, Property("name", "string", declared_name.description, True, declared_name.enum))
    _check_distinct(properties, fail)
    return TypeSchema(type_name, description, tuple(properties), additional, source)


def _parse_property(key: Any, spec: Any, fail: Callable[[str], SchemaError]) -> Property:
    where = f"property {key!r}"
    if not PROPERTY_NAME.fullmatch(key):
        raise fail(f"{where}: a property name starts with a letter and contains letters, digits, '_' or '-'")
    if not isinstance(spec, dict):
        raise fail(f"{where}: must be an object with type and description, not {_json_type(spec)}")
    unknown = sorted(set(spec) - PROPERTY_KEYS)
    if unknown:
        raise fail(f"{where}: unknown key(s) {', '.join(map(repr, unknown))}; a property has "
                   f"{', '.join(sorted(PROPERTY_KEYS - {'$comment'}))}")
    kind = spec.get("type")
    if kind is None:
        raise fail(f"{where}: 'type' is missing; use \"string\" or \"array\" (of strings)")
    if kind not in ("string", "array"):
        raise fail(f"{where}: 'type' is {json.dumps(kind)}; typed tools support \"string\" and \"array\" (of strings)")
    description = spec.get("description")
    if not isinstance(description, str) or not description.strip():
        raise fail(f"{where}: 'description' is missing or empty; it tells the model what to put there")
    required = spec.get("required", False)
    if not isinstance(required, bool):
        raise fail(f"{where}: 'required' must be true or false, not {_json_type(required)}")
    enum = spec.get("enum")
    items = spec.get("items")
    if items is not None:
        if kind != "array":
            raise fail(f"{where}: 'items' belongs to an array property, and this one is a {kind}")
        if not isinstance(items, dict) or items.get("type") != "string" or set(items) - {"type", "enum"}:
            raise fail(f"{where}: 'items' may only be {{\"type\": \"string\"}} (with an optional enum)")
        if "enum" in items and enum is not None:
            raise fail(f"{where}: give the enum once, either on the property or in 'items'")
        enum = items.get("enum", enum)
    if enum is not None:
        if not isinstance(enum, list) or not enum or not all(isinstance(v, str) and v for v in enum):
            raise fail(f"{where}: 'enum' must be a non-empty list of non-empty strings")
        if len(set(enum)) != len(enum):
            raise fail(f"{where}: 'enum' lists a value twice")
    relationship = spec.get("relationship")
    rel = None if relationship is None else _parse_relationship(where, relationship, fail)
    if key == "name":
        if kind != "string" or rel is not None:
            raise fail(f"{where}: the name identifies the entity: it must be a plain string, without relationship")
        if spec.get("required") is False:
            raise fail(f"{where}: the name identifies the entity and is always required; drop 'required': false")
    return Property(key, kind, description.strip(), required, None if enum is None else tuple(enum), rel)


def _parse_relationship(where: str, spec: Any, fail: Callable[[str], SchemaError]) -> Relationship:
    if not isinstance(spec, dict):
        raise fail(f"{where}: 'relationship' must be an object with edgeType, not {_json_type(spec)}")
    unknown = sorted(set(spec) - RELATIONSHIP_KEYS)
    if unknown:
        raise fail(f"{where}: relationship has unknown key(s) {', '.join(map(repr, unknown))}; it has "
                   f"{', '.join(sorted(RELATIONSHIP_KEYS))}")
    edge_type = spec.get("edgeType")
    if not isinstance(edge_type, str) or not edge_type.strip():
        raise fail(f"{where}: relationship 'edgeType' is missing or empty (e.g. \"located_in\")")
    for key in ("nodeType", "description"):
        if key in spec and not isinstance(spec[key], str):
            raise fail(f"{where}: relationship '{key}' must be a string")
    inverse = spec.get("inverse")
    if inverse is not None and (not isinstance(inverse, str) or not inverse.strip()):
        raise fail(f"{where}: relationship 'inverse' must be a relation type (e.g. \"contains\")")
    return Relationship(edge_type, spec.get("nodeType") or None, spec.get("description") or None,
                        inverse.strip() if inverse else None)


def _check_distinct(properties: list[Property], fail: Callable[[str], SchemaError]) -> None:
    """Two properties may share neither an observation label (in any spelling: ``property_key``)
    nor an edgeType (an update could not tell their observations or relations apart)."""
    labels: dict[str, str] = {}
    edges: dict[str, str] = {}
    for p in properties[1:]:
        label = property_key(p.key)
        if label in labels:
            raise fail(f"properties {labels[label]!r} and {p.key!r} would both be stored as "
                       f"'{display_name(p.key)}: …' (or as one in another spelling); rename one")
        labels[label] = p.key
        if p.relationship is not None:
            edge = p.relationship.edge_type
            if edge in edges:
                raise fail(f"properties {edges[edge]!r} and {p.key!r} both use edgeType {edge!r}; each "
                           f"relationship property needs its own edgeType")
            edges[edge] = p.key


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


# -- argument checking ----------------------------------------------------------------------------


def _inner(schema: TypeSchema, tool: str, arguments: Arguments, alias: str | None) -> tuple[str, dict[str, Any]]:
    """``(key, object)``: the object under ``<type>`` (or MemoryMesh's ``update_<type>``/
    ``delete_<type>`` key, which the memorymesh profile advertises), and the key the call used
    (what problems are named under)."""
    key = schema.type_name
    value = arguments.get(key)
    if value is not None and alias is not None and arguments.get(alias) is not None:   # QA: one was ignored
        raise InvalidInput(f'invalid arguments for {tool}: give the {schema.type_name} once, as "{alias}" or as '
                           f'"{schema.type_name}", not both')
    if value is None and alias is not None:
        key, value = alias, arguments.get(alias)
    if value is None:
        shapes = [f'{{"{k}": {{"name": "...", ...}}}}' for k in (schema.type_name, alias) if k is not None]
        raise InvalidInput(f"invalid arguments for {tool}: {schema.type_name}: Field required; call it as "
                           + " or ".join(shapes))
    if not isinstance(value, dict):
        raise InvalidInput(f"invalid arguments for {tool}: {key}: should be an object, not {_json_type(value)}")
    return key, value


def _values(schema: TypeSchema, tool: str, app: MemoryService, wrapped: tuple[str, dict[str, Any]], *,
            adding: bool) -> tuple[str, list[tuple[Property, Value]]]:
    """Check the wrapped object (:func:`_inner`): ``(name, [(property, value)])`` in schema order,
    then extras. An empty value (``""``/``[]``) is kept only when updating (it removes the property).

    Raises:
        InvalidInput: every problem, as ``<key>.<property>: problem`` (``<key>``: the wrapper key
            the call used), joined with ``; ``.
    """
    t, obj = wrapped
    problems: list[str] = []
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        problems.append(f"{t}.name: " + ("Field required" if name is None else "should be a non-empty string"))
    declared = {p.key: p for p in schema.properties}
    extras: list[Property] = []
    labels = {property_key(k) for k in declared}
    for key, value in obj.items():
        if key in declared:
            continue
        if not schema.additional:
            problems.append(f"{t}.{key}: unknown property; a {schema.type_name} has {', '.join(declared)}")
        elif not isinstance(key, str) or not PROPERTY_NAME.fullmatch(key) or property_key(key) in labels:
            problems.append(f"{t}.{key}: not usable as an extra property (it must be a name of letters, digits, "
                            f"'_' or '-', stored under a label no other property uses)")
        else:
            labels.add(property_key(key))
            extras.append(Property(key, "array" if isinstance(value, list) else "string", "extra property"))
    values: list[tuple[Property, Value]] = []
    for prop in [*schema.properties[1:], *extras]:
        if prop.key not in obj:
            if adding and prop.required:
                problems.append(f"{t}.{prop.key}: Field required")
            continue
        value = _check_value(f"{t}.{prop.key}", prop, obj[prop.key], problems)
        if value is None:
            continue
        if not value and prop.required:
            problems.append(f"{t}.{prop.key}: must not be empty (required)")
        elif value or not adding:
            values.append((prop, value))
    if problems:
        raise InvalidInput(f"invalid arguments for {tool}: " + "; ".join(problems))
    assert isinstance(name, str)
    app.limits.name(name, f"{t}.name")
    for prop, value in values:
        if isinstance(value, list):
            app.limits.batch(value, f"{t}.{prop.key}")
        app.limits.observation(prop.observation(value), f"{t}.{prop.key}")
        if prop.relationship is not None:
            for target in [value] if isinstance(value, str) else value:
                app.limits.name(target, f"{t}.{prop.key}")
    return name, values


def _check_value(where: str, prop: Property, raw: Any, problems: list[str]) -> Value | None:
    """``raw`` checked against ``prop`` (arrays de-duplicated), or None after recording problems."""
    if prop.kind == "string" and not (prop.relationship is not None and isinstance(raw, list)):
        if not isinstance(raw, str):
            problems.append(f"{where}: should be a string, not {_json_type(raw)}")
            return None
        items = [raw] if raw else []
    else:
        if not isinstance(raw, list) or not all(isinstance(v, str) for v in raw):
            problems.append(f"{where}: should be an array of strings")
            return None
        items = list(dict.fromkeys(raw))
        if "" in items:
            problems.append(f"{where}: items must not be empty strings")
            return None
    if prop.enum is not None:
        bad = [v for v in items if v not in prop.enum]
        if bad:
            problems.append(f"{where}: {', '.join(map(repr, bad))} is not one of "
                            f"{', '.join(map(repr, prop.enum))}")
            return None
    return raw if isinstance(raw, str) else items


def _targets(value: Value) -> list[str]:
    """The relationship targets a value names (none for an empty value)."""
    if not value:
        return []
    return [value] if isinstance(value, str) else list(value)


# -- the three tools ------------------------------------------------------------------------------


def _add(schema: TypeSchema, tool: str) -> Callable[[MemoryService, Arguments], Outcome]:
    def run(app: MemoryService, arguments: Arguments) -> Outcome:
        name, values = _values(schema, tool, app, _inner(schema, tool, arguments, None), adding=True)
        entity = Entity(name, schema.type_name, [p.observation(v) for p, v in values])
        relations = [Relation(name, target, p.relationship.edge_type)
                     for p, v in values if p.relationship is not None for target in _targets(v)]
        created, made = app.add_typed(entity, relations)
        payload = {"entity": created.to_dict(), "createdRelations": [r.to_dict() for r in made]}
        return Outcome(payload, payload, True, {"entities_created": 1, "observations_added": len(created.observations),
                                                "relations_created": len(made)})
    return run


def _update(schema: TypeSchema, tool: str) -> Callable[[MemoryService, Arguments], Outcome]:
    def run(app: MemoryService, arguments: Arguments) -> Outcome:
        name, values = _values(schema, tool, app, _inner(schema, tool, arguments, f"update_{schema.type_name}"),
                               adding=False)
        edits = [TypedValue(property_key(prop.key), prop.observation(value) if value else None,
                            None if prop.relationship is None else prop.relationship.edge_type, _targets(value))
                 for prop, value in values]
        result = app.update_typed(schema.type_name, name, edits, tool)
        payload = {"entity": result.entity.to_dict(),
                   "updatedObservations": [{"match": old, "replacement": new} for old, new in result.updated],
                   "addedObservations": result.added, "deletedObservations": result.deleted,
                   "createdRelations": [r.to_dict() for r in result.relations_created],
                   "deletedRelations": [r.to_dict() for r in result.relations_deleted]}
        counts = {"observations_updated": len(result.updated),
                  "observations_added": len(result.added),
                  "observations_deleted": len(result.deleted),
                  "relations_created": len(result.relations_created),
                  "relations_deleted": len(result.relations_deleted)}
        return Outcome(payload, payload, result.changed, counts)
    return run


def _delete(schema: TypeSchema, tool: str) -> Callable[[MemoryService, Arguments], Outcome]:
    def run(app: MemoryService, arguments: Arguments) -> Outcome:
        key, obj = _inner(schema, tool, arguments, f"delete_{schema.type_name}")
        name = obj.get("name")
        if not isinstance(name, str) or not name:
            raise InvalidInput(f"invalid arguments for {tool}: {key}.name: "
                               + ("Field required" if name is None else "should be a non-empty string"))
        app.limits.name(name, f"{key}.name")
        snapshot = app.delete_typed(schema.type_name, name, tool)
        (entity,) = snapshot.entities
        n, m = len(entity.observations), len(snapshot.relations)
        payload = {"success": True,
                   "message": f"Deleted {schema.type_name} {name} with {plural(n, 'observation')} "
                              f"and {plural(m, 'relation')}",
                   "deletedEntities": [name], "deletedRelations": [r.to_dict() for r in snapshot.relations]}
        return Outcome(payload, payload, True,
                       {"entities_deleted": 1, "relations_deleted": len(snapshot.relations)})
    return run


def _typed_tools(schema: TypeSchema) -> tuple[ToolSpec, ToolSpec, ToolSpec]:
    t = schema.type_name
    add_props = {p.key: p.json_schema(t) for p in schema.properties}
    update_props = {p.key: p.json_schema(t, update=True) for p in schema.properties}
    update_props["name"] = {**update_props["name"], "description": f"Name of the {t} to update"}
    extra: dict[str, Any] | bool = EXTRA_VALUE if schema.additional else False

    def wrapped(inner_props: dict[str, Any], required: list[str], description: str,
                additional: dict[str, Any] | bool) -> dict[str, Any]:
        inner = {"type": "object", "description": description, "properties": inner_props,
                 "required": required, "additionalProperties": additional}
        return _object({t: inner}, [t])

    extras_note = (" Extra properties (strings or lists of strings) are stored as observations too."
                   if schema.additional else "")
    relation_changes = {"createdRelations": _array(RELATION_OUT), "deletedRelations": _array(RELATION_OUT)}
    add = ToolSpec(
        f"add_{t}",
        f"{schema.description.rstrip('.')}. Creates one {t} entity: each property becomes an observation "
        f"'Display Name: value' and relationship properties also create relations to existing entities. "
        f"Fails if the name exists.{extras_note}",
        wrapped(add_props, [p.key for p in schema.properties if p.required], f"The {t} to add", extra),
        _object({"entity": ENTITY_OUT, "createdRelations": _array(RELATION_OUT)}, ["entity", "createdRelations"]),
        ADDITIVE,
        _add(schema, f"add_{t}"),
    )
    update = ToolSpec(
        f"update_{t}",
        f"Update an existing {t}: give its name and only the properties to change. Each changed property's "
        f"observation is edited in place and relationship properties move their relations to the new "
        f"targets; an empty string or list removes an optional property. Fails if there is no {t} with "
        f"that name.",
        wrapped(update_props, ["name"], f"The {t} to update and the properties to change", extra),
        _object({"entity": ENTITY_OUT,
                 "updatedObservations": _array(_object({"match": _str(), "replacement": _str()},
                                                       ["match", "replacement"])),
                 "addedObservations": _array(_str()), "deletedObservations": _array(_str()), **relation_changes},
                ["entity", "updatedObservations", "addedObservations", "deletedObservations",
                 *relation_changes]),
        EDITING,
        _update(schema, f"update_{t}"),
    )
    delete = ToolSpec(
        f"delete_{t}",
        f"Delete a {t} with its observations and every relation touching it. Fails if there is no entity "
        f"with that name or it is not a {t}.",
        wrapped({"name": _str(f"Name of the {t} to delete")}, ["name"], f"The {t} to delete", False),
        _object({**DELETE_OUT_BASE, "deletedEntities": _array(_str()), "deletedRelations": _array(RELATION_OUT)},
                ["success", "message", "deletedEntities", "deletedRelations"]),
        DESTRUCTIVE,
        _delete(schema, f"delete_{t}"),
    )
    return add, update, delete
