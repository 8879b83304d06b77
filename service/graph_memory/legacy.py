"""Read and write the reference server's storage format (``memory.jsonl`` / ``memory.json``).

The format of ``@modelcontextprotocol/server-memory``: one JSON object per line, either
``{"type":"entity","name":..,"entityType":..,"observations":[..]}`` or
``{"type":"relation","from":..,"to":..,"relationType":..}``. A file that is one JSON document
``{"entities": [...], "relations": [...]}`` (possibly pretty-printed) is accepted too.

Reading is lossless and reports what it had to reconcile (see :class:`LegacyGraph`); it never
touches a database. Rules come from docs/INTERFACE.md, section "Legacy JSONL":

* lines are split on ``\\n`` only: U+2028, U+2029 and other control characters inside strings are
  data; one trailing ``\\r`` per line (CRLF), a UTF-8 BOM, blank lines and a missing final newline
  are tolerated;
* raw control characters inside JSON strings are accepted as data (``JSONDecoder(strict=False)``);
* a lone surrogate escape (``"hi \\ud83d"``: the reference server stores what a client sends,
  also half an emoji) is replaced with U+FFFD and counted (``replaced_surrogates``), as the stdio
  and HTTP transports do (:mod:`graph_memory.surrogates` says why); a valid pair stays the
  character;
* bytes that are not UTF-8 (a line saved by an editor in Latin-1 or cp1252: ``caf\xe9``) are read
  as U+FFFD, each maximal bad sequence one, as the reference server's ``readFile(path, "utf-8")``
  reads them; the lines holding them are listed (``replaced_utf8_lines``) and the file itself is
  never changed, so the original bytes stay there;
* a line that is not one JSON object, or a missing / mistyped required field refuses the file
  (:class:`LegacyFormatError` with the line), unless ``skip_invalid`` is set, in which case such
  lines are listed and skipped;
* duplicate entity names merge (first position and type kept, observations unioned), duplicate
  observations and duplicate relation triples collapse, relations to unknown entities are kept.

A relation line may carry our ``"weight"`` key (a number from 0 to 1, as
``graph-memory export --with-weights`` writes it); it is read back, and a weight that is not such a
number makes the line invalid. The reference server ignores the key. Likewise ``"inverseOf"`` (the
relation type of the relation this one is the materialized inverse of, see
:func:`graph_memory.db.graph.create_inverses`), which must be a non-empty string.

Writing produces exactly the reference server's bytes for each line: compact JSON, non-ASCII
unescaped, keys in upstream's order; ``weight`` is not part of the format and is written only when
asked for (``with_weights``), after the reference's keys, on relations whose weight is not 1.0.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

import orjson

from graph_memory.errors import LegacyFormatError
from graph_memory.hints import graph_memory_command, shell_quote
from graph_memory.models import DEFAULT_WEIGHT, Entity, Relation
from graph_memory.surrogates import replace_in_value
from graph_memory.wording import excerpt, json_type

__all__ = [
    "REFERENCE",
    "Dialect",
    "LegacyGraph",
    "LegacyRecord",
    "LegacyRelation",
    "LegacyStream",
    "LineDigester",
    "SkippedLine",
    "UnchangedEntity",
    "iter_legacy_lines",
    "parse_legacy",
    "read_legacy",
    "stream_legacy",
    "write_legacy",
]

_JSON_WS = " \t\r\n"
_NOT_JSON_WS = re.compile(rb"[^ \t\r\n]")
_BOM = "\ufeff"
_BOM_BYTES = _BOM.encode()
_SQLITE_HEADER = b"SQLite format 3\x00"
_DECODER = json.JSONDecoder(strict=False)


@dataclass(frozen=True, slots=True)
class Dialect:
    """The words of one JSON-lines memory format: the ``"type"`` tags of an entity line and a
    relation line, their fields (name, type, facts / from, to, type), and the two keys of the
    single-document form. The reference server's is :data:`REFERENCE`; MemoryMesh's is
    :data:`graph_memory.meshfile.MEMORYMESH`. Every rule of the reader holds for each."""

    entity: str = "entity"
    relation: str = "relation"
    entity_fields: tuple[str, str, str] = ("name", "entityType", "observations")
    relation_fields: tuple[str, str, str] = ("from", "to", "relationType")
    document_keys: tuple[str, str] = ("entities", "relations")


REFERENCE = Dialect()


@dataclass(frozen=True, slots=True)
class SkippedLine:
    """A line left out of the import: ``line`` is 1-based, ``reason`` says why."""

    line: int
    reason: str


@dataclass(slots=True)
class LegacyGraph:
    """The content of a legacy file, reconciled, with counters of what was reconciled.

    ``entities`` are merged by name in first-occurrence order; ``relations`` are de-duplicated by
    ``(from, to, relationType)`` in file order (the first line of a triple wins, its weight too),
    with the line's ``weight`` or the default 1.0. ``lines`` is the number of
    physical lines read (1 for the single-document form). ``skipped_lines`` lists lines with an
    unknown or missing ``"type"``; ``invalid_lines`` lists lines dropped by ``skip_invalid``.
    ``unknown_keys`` counts extra keys (one per key, per line or item) that were ignored; a
    relation's ``weight`` is read, not counted.
    ``replaced_surrogates`` counts lone surrogates (half of an emoji a client cut) replaced with
    U+FFFD; ``replaced_utf8_lines`` lists the physical lines (1-based, in either form) whose
    bytes were not UTF-8 and were read with U+FFFD in their place.
    """

    entities: list[Entity]
    relations: list[Relation]
    lines: int = 0
    merged_entities: int = 0
    type_conflicts: int = 0
    collapsed_observations: int = 0
    duplicate_relations: int = 0
    dangling_relations: int = 0
    unknown_keys: int = 0
    replaced_surrogates: int = 0
    replaced_utf8_lines: list[int] = field(default_factory=list)
    unchanged_lines: int = 0   # lines left out as already imported (known_lines)
    # the names of the entity lines among them: entities the file held when it was imported
    unchanged_entities: set[str] = field(default_factory=set)
    skipped_lines: list[SkippedLine] = field(default_factory=list)
    invalid_lines: list[SkippedLine] = field(default_factory=list)
    # relations marked as materialized inverses: triple → the relation type of their primary
    inverse_of: dict[tuple[str, str, str], str] = field(default_factory=dict)

    @property
    def observation_count(self) -> int:
        """Total observations over all (merged) entities."""
        return sum(len(e.observations) for e in self.entities)

    def summary(self) -> dict[str, int]:
        """Every counter as ``{name: int}``, for logs and the CLI.

        Keys: ``entities, observations, relations, lines, merged_entities, type_conflicts,
        collapsed_observations, duplicate_relations, dangling_relations, unknown_keys,
        replaced_surrogates, replaced_utf8_lines, unchanged_lines, skipped_lines, invalid_lines``
        (``replaced_utf8_lines`` and the last two are the lengths of the lists).
        """
        return {
            "entities": len(self.entities),
            "observations": self.observation_count,
            "relations": len(self.relations),
            "lines": self.lines,
            "merged_entities": self.merged_entities,
            "type_conflicts": self.type_conflicts,
            "collapsed_observations": self.collapsed_observations,
            "duplicate_relations": self.duplicate_relations,
            "dangling_relations": self.dangling_relations,
            "unknown_keys": self.unknown_keys,
            "replaced_surrogates": self.replaced_surrogates,
            "replaced_utf8_lines": len(self.replaced_utf8_lines),
            "unchanged_lines": self.unchanged_lines,
            "skipped_lines": len(self.skipped_lines),
            "invalid_lines": len(self.invalid_lines),
        }


class _Invalid(Exception):
    """Internal: one line or item is invalid; ``args[0]`` is the reason."""




_STR = {str}


def _require_str(obj: dict[str, Any], key: str) -> str:
    if key not in obj:
        raise _Invalid(f'field "{key}" is missing')
    value = obj[key]
    if type(value) is not str:
        raise _Invalid(f'field "{key}" must be a string, got {json_type(value)}')
    return value


def _entity_fields(obj: dict[str, Any], fields: tuple[str, str, str] = REFERENCE.entity_fields
                   ) -> tuple[str, str, list[str]]:
    """``(name, entityType, observations)`` of an entity object (its ``fields`` named as the
    dialect names them), or :class:`_Invalid`."""
    name_key, type_key, facts_key = fields
    name, entity_type, observations = obj.get(name_key), obj.get(type_key), obj.get(facts_key)
    # Every line of a large file passes: one test for that (a third of the check's time at
    # 1,000,000 entities went to naming faults that were not there); the rest names the fault.
    if (type(name) is str and type(entity_type) is str and type(observations) is list
            and (not observations or set(map(type, observations)) == _STR)):
        return name, entity_type, observations
    name = _require_str(obj, name_key)
    entity_type = _require_str(obj, type_key)
    if facts_key not in obj:
        raise _Invalid(f'field "{facts_key}" is missing')
    observations = obj[facts_key]
    if type(observations) is not list:
        raise _Invalid(f'field "{facts_key}" must be a list of strings, got {json_type(observations)}')
    if not all(type(o) is str for o in observations):
        index, bad = next((i, o) for i, o in enumerate(observations) if type(o) is not str)
        raise _Invalid(f'field "{facts_key}" must be a list of strings, item {index} is {json_type(bad)}')
    return name, entity_type, observations


def _relation_fields(obj: dict[str, Any], fields: tuple[str, str, str] = REFERENCE.relation_fields
                     ) -> tuple[str, str, str]:
    """``(from, to, relationType)`` of a relation object, or :class:`_Invalid`."""
    source, target, relation_type = obj.get(fields[0]), obj.get(fields[1]), obj.get(fields[2])
    if type(source) is str and type(target) is str and type(relation_type) is str:
        return source, target, relation_type
    values = tuple(_require_str(obj, key) for key in fields)  # names the fault
    return values[0], values[1], values[2]


def _relation_weight(obj: dict[str, Any]) -> float:
    """The ``weight`` of a relation object (1.0 when absent or null: MemoryMesh writes the
    ``"weight": null`` of an edge added with one), or :class:`_Invalid` when it is not a number
    from 0 to 1 -- the range the database and the tools enforce (``tools.RelationArg``)."""
    value = obj.get("weight")
    if value is None:
        return DEFAULT_WEIGHT
    # bool is an int in Python, but true/false are not numbers in JSON; NaN and +-Infinity (which
    # Python's reader accepts) fail the range test.
    if type(value) not in (int, float) or not 0 <= value <= 1:
        shown = excerpt(json.dumps(value)) if type(value) in (int, float) else json_type(value)
        raise _Invalid(f'field "weight" must be a number from 0 to 1, got {shown}')
    return float(value) + 0.0   # -0 becomes 0


def _inverse_of(obj: dict[str, Any]) -> str | None:
    """The ``inverseOf`` of a relation object (None when absent), or :class:`_Invalid`."""
    if "inverseOf" not in obj:
        return None
    value = obj["inverseOf"]
    if type(value) is not str or not value:
        raise _Invalid(f'field "inverseOf" must be a non-empty string (a relation type), got {json_type(value)}')
    return value


def _diagnose(line: str) -> str:
    """Why ``line`` (which failed ``json.loads``) is not one JSON value."""
    start = len(line) - len(line.lstrip(_JSON_WS))
    try:
        _, end = _DECODER.raw_decode(line, start)
    except json.JSONDecodeError as exc:
        # json's own messages may end in "at" ("Unterminated string starting at"): one "at" only
        return f"not valid JSON: {exc.msg.removesuffix(' at')} at column {exc.colno}"
    rest = len(line) - len(line[end:].lstrip(_JSON_WS))
    try:
        _DECODER.raw_decode(line, rest)
    except json.JSONDecodeError:
        return f"unexpected data after the JSON value at column {rest + 1}"
    return f"two JSON values on one line (the second starts at column {rest + 1})"


class _Builder:
    """Accumulates entities and relations with the merge rules, then builds a LegacyGraph."""

    def __init__(self, skip_invalid: bool, path: str | None, dialect: Dialect = REFERENCE,
                 known_lines: frozenset[bytes] = frozenset()) -> None:
        self.skip_invalid = skip_invalid
        self.path = path
        self.dialect = dialect
        self.known_lines = known_lines
        self.entities: dict[str, Entity] = {}
        self.relations: dict[tuple[str, str, str], Relation] = {}
        self.graph = LegacyGraph(entities=[], relations=[])
        self.lines = 0
        self.names_unchanged = True   # whether to read the name of an unchanged entity line

    def unchanged_entity(self, name: str) -> None:
        """An entity line left out as unchanged (``known_lines``) names ``name``."""
        self.graph.unchanged_entities.add(name)

    def reject(self, line: int | None, reason: str, *, offset: int | None = None) -> None:
        """Record an invalid line (``skip_invalid``) or refuse the file."""
        if not self.skip_invalid:
            raise LegacyFormatError(reason, path=self.path, line=line, offset=offset, skippable=True)
        self.graph.invalid_lines.append(SkippedLine(line if line is not None else 1, reason))

    def add_entity(self, name: str, entity_type: str, observations: list[str]) -> None:
        unique = list(dict.fromkeys(observations))
        graph = self.graph
        graph.collapsed_observations += len(observations) - len(unique)
        existing = self.entities.get(name)
        if existing is None:
            self.entities[name] = Entity(name, entity_type, unique)
            return
        graph.merged_entities += 1
        if existing.entity_type != entity_type:
            graph.type_conflicts += 1
        seen = set(existing.observations)
        for observation in unique:
            if observation in seen:
                graph.collapsed_observations += 1
            else:
                seen.add(observation)
                existing.observations.append(observation)

    def add_relation(self, source: str, target: str, relation_type: str, weight: float = DEFAULT_WEIGHT,
                     inverse_of: str | None = None) -> None:
        key = (source, target, relation_type)
        if key in self.relations:
            self.graph.duplicate_relations += 1
        else:
            self.relations[key] = Relation(source, target, relation_type, weight)
            if inverse_of is not None:
                self.graph.inverse_of[key] = inverse_of

    def replace_surrogates(self, value: Any) -> Any:
        """``value`` with its lone surrogates replaced by U+FFFD, counted in the graph."""
        value, replaced = replace_in_value(value)
        self.graph.replaced_surrogates += replaced
        return value

    def add_object(self, obj: dict[str, Any], kind: str) -> None:
        """Validate and add one entity/relation object; extra keys besides ``type`` (and a
        relation's ``weight``) are counted."""
        known = 3 + ("type" in obj)
        if kind == "entity":
            self.add_entity(*_entity_fields(obj, self.dialect.entity_fields))
        else:
            fields = _relation_fields(obj, self.dialect.relation_fields)
            self.add_relation(*fields, _relation_weight(obj), _inverse_of(obj))
            known += ("weight" in obj) + ("inverseOf" in obj)
        self.graph.unknown_keys += len(obj) - known

    def finish(self) -> LegacyGraph:
        graph = self.graph
        graph.lines = self.lines
        graph.entities = list(self.entities.values())
        graph.relations = list(self.relations.values())
        graph.invalid_lines.sort(key=lambda s: s.line)  # bad UTF-8 is found before the JSON
        # the file's entities: those read, and those of lines left out as unchanged (known_lines)
        names = self.entities.keys() | graph.unchanged_entities if graph.unchanged_entities else self.entities
        graph.dangling_relations = sum(
            1 for r in graph.relations if r.source not in names or r.target not in names
        )
        return graph


def _split_text(text: str) -> list[str]:
    """Physical lines of ``text`` (``\\n`` only); a final newline does not start a new line."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _first_utf8_error(data: bytes, piece: int = 1 << 20) -> UnicodeDecodeError | None:
    """The error ``data.decode("utf-8")`` would raise (offsets absolute), checked a piece at a
    time so the whole text is never held at once. Pieces end just after a newline, which never
    ends or splits a valid sequence, so every fault reads exactly as in one decode."""
    start = 0
    while start < len(data):
        end = data.find(b"\n", start + piece)
        end = len(data) if end == -1 else end + 1
        try:
            data[start:end].decode("utf-8")
        except UnicodeDecodeError as exc:
            return UnicodeDecodeError("utf-8", data, start + exc.start, start + exc.end, exc.reason)
        start = end
    return None


def _iter_lines(data: bytes) -> Iterator[bytes]:
    """The physical lines of ``data`` (valid UTF-8; ``\\n`` only; a final newline does not start a
    new line), as bytes, undecoded (orjson reads them as they are: at 1,000,000 entities decoding
    each line first cost ~2 s of each reading of the file). The first line loses a UTF-8 BOM."""
    start, number = 0, 0
    while start < len(data):
        end = data.find(b"\n", start)
        if end == -1:
            end = len(data)
        number += 1
        line = data[start:end]
        yield line.removeprefix(_BOM_BYTES) if number == 1 else line
        start = end + 1


def _lines_not_utf8(data: bytes) -> list[int]:
    """The 1-based numbers of the lines of ``data`` (``\\n``-separated) that are not valid UTF-8,
    each line checked in place (a memoryview: no copy of the file)."""
    view, bad, start, number = memoryview(data), [], 0, 0
    while start < len(data):
        end = data.find(b"\n", start)
        if end == -1:
            end = len(data)
        number += 1
        try:
            codecs.utf_8_decode(view[start:end], "strict", True)
        except UnicodeDecodeError:
            bad.append(number)
        start = end + 1
    return bad


def _surely_jsonl(data: bytes) -> bool:
    """Whether ``data`` (valid UTF-8) is certainly not the single-document form, decided from its
    first line alone: that line is one complete JSON value and more than whitespace follows it,
    so the whole text cannot be one JSON document. Then it is read line by line, never decoded
    whole (a 1,000,000-entity file would be held again as text, and again as lines)."""
    end = data.find(b"\n")
    # searched in place: a slice of the rest would copy the whole file
    if end == -1 or _NOT_JSON_WS.search(data, end + 1) is None:
        return False
    first = data[:end].decode("utf-8").removeprefix(_BOM).strip(_JSON_WS)
    try:
        _, stop = _DECODER.raw_decode(first)
    except json.JSONDecodeError:
        return False
    return stop == len(first)


def _as_document(text: str, keys: tuple[str, str] = REFERENCE.document_keys) -> dict[str, Any] | None:
    """The single-document form: the whole text is one object with ``keys`` (entities/relations),
    no type."""
    if not text.lstrip(_JSON_WS).startswith("{"):
        return None
    try:
        obj = _DECODER.decode(text)
    except json.JSONDecodeError:
        return None
    if type(obj) is dict and (keys[0] in obj or keys[1] in obj) and "type" not in obj:
        return obj
    return None


def _scan_document(doc: dict[str, Any], builder: _Builder) -> Iterator[None]:
    """Import ``{"entities": [...], "relations": [...]}`` into ``builder``, yielding after each
    item; item faults name ``entities[i]``."""
    entities_key, relations_key = builder.dialect.document_keys
    builder.graph.unknown_keys += len(doc.keys() - {entities_key, relations_key})
    tags = {"entity": builder.dialect.entity, "relation": builder.dialect.relation}
    for kind, key in (("entity", entities_key), ("relation", relations_key)):
        items = doc.get(key, [])
        if type(items) is not list:
            raise LegacyFormatError(f'"{key}" must be an array, got {json_type(items)}', path=builder.path)
        for index, item in enumerate(items):
            try:
                if type(item) is not dict:
                    raise _Invalid(f"not a JSON object (got {json_type(item)})")
                builder.add_object(item, kind)
            except _Invalid as exc:
                builder.reject(None, f"{key}[{index}]: {tags[kind]}: {exc.args[0]}")
            yield
    builder.lines = 1


def _scan_lines(lines: Iterable[str | bytes | None], builder: _Builder) -> Iterator[None]:
    """Import JSONL lines (``None`` = already rejected; bytes: valid UTF-8) into ``builder``,
    yielding after each line; line numbers are 1-based."""
    skipped = builder.graph.skipped_lines
    decode, fast_decode = _DECODER.decode, orjson.loads
    kinds = {builder.dialect.entity: "entity", builder.dialect.relation: "relation"}
    known = builder.known_lines
    number = 0
    for number, line in enumerate(lines, 1):
        if number > 1:
            yield  # after the line before: what it added is complete
        if line is None:
            continue
        if known and line_digest(line if isinstance(line, bytes) else line.encode("utf-8", "surrogatepass")) in known:
            builder.graph.unchanged_lines += 1
            if builder.names_unchanged and (name := _entity_name(line, builder.dialect)) is not None:
                builder.unchanged_entity(name)
            continue
        try:
            # orjson reads JSON whitespace around the value (a CR before the newline too) and
            # refuses what needs a closer look below: blank lines, lone surrogate escapes, raw
            # control characters in strings, NaN, integers past 64 bits.
            obj = fast_decode(line)
        except orjson.JSONDecodeError:
            text = line.decode("utf-8") if isinstance(line, bytes) else line
            if text.endswith("\r"):
                text = text[:-1]
            if not text.strip(_JSON_WS):
                continue
            try:
                obj = decode(text)
            except json.JSONDecodeError:
                builder.reject(number, _diagnose(text))
                continue
            if type(obj) is dict and "\\u" in text:  # only an escape can give a lone surrogate
                obj = builder.replace_surrogates(obj)
        if type(obj) is not dict:
            builder.reject(number, f"not a JSON object (got {json_type(obj)})")
            continue
        tag = obj.get("type")
        kind = kinds.get(tag) if type(tag) is str else None
        if kind is None:
            if "type" not in obj:
                skipped.append(SkippedLine(number, 'no "type" key'))
            else:
                skipped.append(SkippedLine(number, f"unknown type {json.dumps(tag, ensure_ascii=False)}"))
            continue
        try:
            builder.add_object(obj, kind)
        except _Invalid as exc:
            builder.reject(number, f"{tag}: {exc.args[0]}")
    builder.lines = number
    yield


def _entity_name(line: str | bytes, dialect: Dialect) -> str | None:
    """The name of the entity ``line`` holds (lone surrogates replaced), or None: a relation, or
    no valid entity line."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        try:
            obj = replace_in_value(_DECODER.decode(line.decode("utf-8") if isinstance(line, bytes) else line))[0]
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None
    if type(obj) is not dict or obj.get("type") != dialect.entity:
        return None
    name = obj.get(dialect.entity_fields[0])
    return name if type(name) is str else None


def parse_legacy(data: bytes, *, skip_invalid: bool = False, path: str | None = None,
                 dialect: Dialect = REFERENCE, known_lines: frozenset[bytes] = frozenset()) -> LegacyGraph:
    """Parse the bytes of a legacy memory file into a reconciled :class:`LegacyGraph`.

    Args:
        data: the whole file, raw bytes (UTF-8, optional BOM; JSONL or one JSON document).
        skip_invalid: list invalid lines in ``invalid_lines`` and keep the rest, instead of raising.
        path: the file name, only used in error messages.
        dialect: the format's words (default: the reference server's; MemoryMesh's is
            :data:`graph_memory.meshfile.MEMORYMESH`).

    Returns:
        A :class:`LegacyGraph`; ``lines`` counts physical lines (``\\n``-separated, a final newline
        does not add one), or 1 for the single-document form.

    Raises:
        LegacyFormatError: invalid UTF-8 (``offset`` = 0-based absolute byte offset of the first bad
            byte, ``line`` = its line); a line that is not JSON, holds two JSON values, is not an
            object, or lacks / mistypes a required field (``line``).
            For the single-document form, item faults carry no line and name ``entities[i]`` or
            ``relations[i]``; a non-array ``entities`` / ``relations`` is refused even with
            ``skip_invalid``. With ``skip_invalid`` only those structural faults raise.

    Rules: docs/INTERFACE.md "Legacy JSONL" and the reference server's ``loadGraph``.
    """
    builder = _Builder(skip_invalid, path, dialect, known_lines)
    for _ in _scan(data, builder):
        pass
    return builder.finish()


def _scan(data: bytes, builder: _Builder) -> Iterator[None]:
    """Read ``data`` (a whole legacy file) into ``builder`` line by line (item by item for the
    single-document form), yielding after each; :func:`parse_legacy` gives the rules and errors."""
    path = builder.path
    if data.startswith(_SQLITE_HEADER):
        if path is not None and os.path.splitext(path)[1].lower() not in (".jsonl", ".json"):
            raise LegacyFormatError("this is a SQLite database, not a reference-server memory file; to copy "
                                    f"a database use: {graph_memory_command('backup', 'DEST', database=path)}",
                                    path=path)
        # No command can name this file as a database: a .jsonl/.json --database names a legacy
        # file (its database is the sibling .db), so the way out is a .db name.
        raise LegacyFormatError("this is a SQLite database, not a reference-server memory file. If it is a "
                                "graph-memory database, give it a name ending in .db (e.g. mv "
                                f"{shell_quote(path or 'FILE')} {shell_quote(_db_name(path))}) and point "
                                "MEMORY_FILE_PATH (or --database) at that name", path=path)
    error = _first_utf8_error(data)
    if error is None and _surely_jsonl(data):
        yield from _scan_lines(_iter_lines(data), builder)
        return
    if error is None:
        text = data.decode("utf-8")
    else:
        # Read as the reference server reads it (Node's UTF-8 decoder: U+FFFD per maximal bad
        # sequence, as Python's "replace"): its memory, not a refused start or a dropped entity.
        text = data.decode("utf-8", "replace")
        builder.graph.replaced_utf8_lines.extend(_lines_not_utf8(data))
    text = text.removeprefix(_BOM)
    doc = _as_document(text, builder.dialect.document_keys)
    if doc is not None and builder.known_lines:
        raise LegacyFormatError("this file is one JSON document, not JSONL: it has no lines to tell new ones "
                                "from those imported before; import it whole", path=path)
    if doc is not None:
        yield from _scan_document(builder.replace_surrogates(doc) if "\\u" in text else doc, builder)
        return
    yield from _scan_lines(_split_text(text), builder)


@dataclass(frozen=True, slots=True)
class LegacyRelation:
    """A relation line of a streamed file: the relation (its ``weight`` read, else 1.0) and its
    ``inverseOf`` (the relation type of the primary it is the materialized inverse of), if any."""

    relation: Relation
    inverse_of: str | None = None


@dataclass(frozen=True, slots=True)
class UnchangedEntity:
    """An entity line a reading left out as unchanged since the file's last import
    (``known_lines``): only its name, which tells a merge that the file still holds an entity the
    database may have deleted since."""

    name: str


LegacyRecord = Entity | LegacyRelation | UnchangedEntity
"""One entity or relation line (or item) of a file, as read: nothing merged with other lines."""


class _Checker(_Builder):
    """Validates every line and counts the records, keeping none but the hashes of names and
    triples, to tell which may repeat (:func:`stream_legacy`)."""

    def __init__(self, skip_invalid: bool, path: str | None, dialect: Dialect,
                 known_lines: frozenset[bytes] = frozenset()) -> None:
        super().__init__(skip_invalid, path, dialect, known_lines)
        self.names_unchanged = False   # the merge's own reading hands them on
        self.entity_records = 0
        self.relation_records = 0
        self.name_hashes: set[int] = set()
        self.triple_hashes: set[int] = set()
        self.repeated_names: set[int] = set()
        self.repeated_triples: set[int] = set()

    def add_entity(self, name: str, entity_type: str, observations: list[str]) -> None:
        self.entity_records += 1
        _note(hash(name), self.name_hashes, self.repeated_names)

    def add_relation(self, source: str, target: str, relation_type: str, weight: float = DEFAULT_WEIGHT,
                     inverse_of: str | None = None) -> None:
        self.relation_records += 1
        _note(hash((source, target, relation_type)), self.triple_hashes, self.repeated_triples)


def _note(value: int, seen: set[int], repeated: set[int]) -> None:
    if value in seen:
        repeated.add(value)
    else:
        seen.add(value)


class _Collector(_Builder):
    """Hands each record on as read (:meth:`LegacyStream.records`)."""

    def __init__(self, skip_invalid: bool, path: str | None, dialect: Dialect,
                 known_lines: frozenset[bytes] = frozenset()) -> None:
        super().__init__(skip_invalid, path, dialect, known_lines)
        self.out: list[LegacyRecord] = []

    def add_entity(self, name: str, entity_type: str, observations: list[str]) -> None:
        self.out.append(Entity(name, entity_type, observations))

    def unchanged_entity(self, name: str) -> None:
        self.out.append(UnchangedEntity(name))

    def add_relation(self, source: str, target: str, relation_type: str, weight: float = DEFAULT_WEIGHT,
                     inverse_of: str | None = None) -> None:
        self.out.append(LegacyRelation(Relation(source, target, relation_type, weight), inverse_of))


@dataclass(frozen=True, slots=True)
class LegacyStream:
    """A legacy file checked whole (every line validated as :func:`parse_legacy` does, nothing
    kept), to be read again record by record, as often as needed (a retried transaction reads it
    again): an import of it holds the file's bytes and one record at a time, not its graph.

    ``scan`` carries what the check counted (``lines``, ``unknown_keys``, ``replaced_surrogates``,
    ``skipped_lines``, ``invalid_lines``); its entities, relations and reconciliation counters
    are empty, since merging lines is the importer's part. ``entity_records`` and
    ``relation_records`` count the lines (or items) read as each. ``repeated_names`` and
    ``repeated_triples`` hold the ``hash()`` (of this process) of every entity name and every
    ``(from, to, relationType)`` that occurs more than once, and rarely of others (hashes may
    collide): what a merge must remember beyond one record.

    ``checked`` False (``stream_legacy(check=False)``): nothing was read yet, ``scan`` and the
    counts are empty and the repeats unknown; each :meth:`records` reading checks the lines as it
    goes (a bad line raises there) and counts into the ``scan`` it is given. An import into an
    empty graph reads such a stream once instead of twice (issue 15).
    """

    data: bytes
    path: str | None
    skip_invalid: bool
    dialect: Dialect
    scan: LegacyGraph
    entity_records: int
    relation_records: int
    repeated_names: frozenset[int] = frozenset()
    repeated_triples: frozenset[int] = frozenset()
    checked: bool = True
    known_lines: frozenset[bytes] = frozenset()   # lines left out as imported before (line_digest)

    def records(self, scan: LegacyGraph | None = None) -> Iterator[LegacyRecord]:
        """Every entity and relation line in file order, as read (observations as written, with
        any repeats; lone surrogates replaced): lines the check skipped are skipped, and an entity
        line left out as unchanged (``known_lines``) comes as an :class:`UnchangedEntity`.

        ``scan``: a new :class:`LegacyGraph` that receives what this reading counted, as the check
        counts it (``lines``, ``unknown_keys``, ``replaced_surrogates``, ``skipped_lines``,
        ``invalid_lines``; complete once the records are exhausted): the check of a stream that
        was not checked.

        Raises:
            LegacyFormatError: a bad line without ``skip_invalid`` (of a checked stream only when
                ``data`` is not what was checked: the check refused such a file already), or a
                file refused whole (not UTF-8, a SQLite database).
        """
        collector = _Collector(self.skip_invalid, self.path, self.dialect, self.known_lines)
        if scan is not None:
            collector.graph = scan
        out = collector.out
        for _ in _scan(self.data, collector):
            if out:
                yield from out
                out.clear()
        if scan is not None:
            collector.finish()  # completes the scan as the check's finish does (no entities kept)

    def graph(self) -> LegacyGraph:
        """The whole file reconciled (:func:`parse_legacy`), e.g. for a dry run."""
        return parse_legacy(self.data, skip_invalid=self.skip_invalid, path=self.path, dialect=self.dialect,
                            known_lines=self.known_lines)


def stream_legacy(data: bytes, *, skip_invalid: bool = False, path: str | None = None,
                  dialect: Dialect = REFERENCE, check: bool = True,
                  known_lines: frozenset[bytes] = frozenset()) -> LegacyStream:
    """Check the bytes of a legacy memory file line by line and return them as a
    :class:`LegacyStream` (same arguments, rules and errors as :func:`parse_legacy`). With
    ``check`` False nothing is read here: the stream's first reading checks it.

    Raises:
        LegacyFormatError: as :func:`parse_legacy` (only with ``check``).
    """
    if not check:
        return LegacyStream(data, path, skip_invalid, dialect, LegacyGraph([], []), 0, 0, checked=False,
                            known_lines=known_lines)
    checker = _Checker(skip_invalid, path, dialect, known_lines)
    for _ in _scan(data, checker):
        pass
    return LegacyStream(data, path, skip_invalid, dialect, checker.finish(), checker.entity_records,
                        checker.relation_records, frozenset(checker.repeated_names),
                        frozenset(checker.repeated_triples), known_lines=known_lines)


def line_digest(line: bytes) -> bytes:
    """The 8-byte BLAKE2b digest of one line of a legacy file, surrounding whitespace (a CR
    included) left out: what an import records of each line (:func:`line_digests`)."""
    return hashlib.blake2b(line.strip(b" \t\r\n"), digest_size=_DIGEST).digest()


def line_digests(data: bytes, dialect: Dialect = REFERENCE) -> bytes | None:
    """The :func:`line_digest` of every non-blank line of ``data`` (a BOM left out), in file
    order, concatenated: what an import records, so ``graph-memory import --new-lines`` can
    leave out the lines it has seen (8 bytes a line: 8 MB for 1,000,000 entities). A line that
    is not UTF-8 counts as read (U+FFFD for its bad bytes), as the reference server writes it
    back (found by QA: its rewrite made every such line look new). None for the single-document
    form, which has no lines."""
    error = _first_utf8_error(data)
    if not (error is None and _surely_jsonl(data)):
        text = data.decode("utf-8", "replace").removeprefix(_BOM)
        if _as_document(text, dialect.document_keys) is not None:
            return None
    out = bytearray()
    for line in _iter_lines(data):
        if line.strip(b" \t\r\n"):
            out += line_digest(line if error is None else line.decode("utf-8", "replace").encode("utf-8"))
    return bytes(out)


class LineDigester:
    """:func:`line_digests` of a file fed a piece at a time (:meth:`feed`), so a file recorded
    without an import (a baseline, a moved file) need not be held whole: the same digests, or,
    from :meth:`digests`, None when only the whole file can tell (its first line is not one
    complete JSON value followed by more: perhaps the single-document form)."""

    def __init__(self) -> None:
        self._out = bytearray()
        self._rest = b""
        self._first: bytes | None = None
        self._more = False          # anything but whitespace after the first line

    def feed(self, piece: bytes) -> None:
        """The next bytes of the file."""
        data = self._rest + piece
        end = data.rfind(b"\n")
        if end == -1:
            self._rest = data
            return
        block, self._rest = data[:end], data[end + 1:]
        try:
            block.decode("utf-8")   # one check for the whole block (a newline never splits a sequence)
            valid = True
        except UnicodeDecodeError:
            valid = False
        for line in block.split(b"\n"):
            self._line(line, valid)

    def _line(self, line: bytes, valid: bool) -> None:
        if self._first is None:
            line = line.removeprefix(_BOM_BYTES)
            self._first = line
        elif not self._more and _NOT_JSON_WS.search(line):
            self._more = True
        if line.strip(b" \t\r\n"):
            self._out += line_digest(line if valid else line.decode("utf-8", "replace").encode("utf-8"))

    def digests(self) -> bytes | None:
        """The digests of every line fed (the file's end reached), or None when the first line does
        not show that the file is not one JSON document (then :func:`line_digests` of the whole)."""
        if self._rest:
            rest, self._rest = self._rest, b""
            try:
                rest.decode("utf-8")
                valid = True
            except UnicodeDecodeError:
                valid = False
            had_first = self._first is not None
            self._line(rest, valid)
            if not had_first:   # a file of one line, without a newline: no line follows it
                return None
        if self._first is None or not self._more:
            return None
        first = self._first.decode("utf-8", "replace").strip(_JSON_WS)
        try:
            _, stop = _DECODER.raw_decode(first)
        except json.JSONDecodeError:
            return None
        return bytes(self._out) if stop == len(first) else None


def known_lines(digests: bytes) -> frozenset[bytes]:
    """The set of the digests :func:`line_digests` concatenated."""
    return frozenset(digests[i:i + _DIGEST] for i in range(0, len(digests), _DIGEST))


_DIGEST = 8


def _db_name(path: str | None) -> str:
    """``memory.jsonl`` → ``memory.db`` (``memory.jsonl.db`` when that sibling exists already)."""
    if path is None:
        return "memory.db"
    target = os.path.splitext(path)[0] + ".db"
    return path + ".db" if os.path.exists(target) else target


def read_legacy(path: str | os.PathLike[str], *, skip_invalid: bool = False) -> LegacyGraph:
    """Read and parse a legacy file; it is opened read-only, in binary mode, and never modified.

    Raises:
        LegacyFormatError: the file cannot be read (``OSError``: missing, permissions, a
            directory), or its content is refused by :func:`parse_legacy`.
    """
    name = os.fspath(path)
    try:
        with open(name, "rb") as handle:
            data = handle.read()
    except OSError as exc:
        raise LegacyFormatError(f"cannot read the file: {exc.strerror or exc}", path=name) from exc
    return parse_legacy(data, skip_invalid=skip_invalid, path=name)


def _dumps(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def iter_legacy_lines(entities: Iterable[Entity], relations: Iterable[Relation], *,
                      with_weights: bool = False,
                      inverses: Mapping[tuple[str, str, str], str] | None = None) -> Iterator[str]:
    """The export format, one line at a time, each ending with ``"\\n"``: entities, then relations.

    Each line is what the reference server writes (``JSON.stringify``): compact JSON, non-ASCII
    unescaped, keys ``type,name,entityType,observations`` / ``type,from,to,relationType``.
    ``weight`` is not written (the format has no such field) unless ``with_weights``: then a
    relation whose weight is not 1.0 gets a last key ``"weight"`` (the shortest decimal that reads
    back as the same float; the reference server ignores the key, our reader reads it back), and a
    relation ``inverses`` names (a materialized inverse) gets a last key ``"inverseOf"``: the
    relation type of its primary.
    Upstream joins lines without a final newline; it ignores blank lines when reading, so the
    trailing newline here is harmless.
    """
    for e in entities:
        obs = e.observations
        entity = {"type": "entity", "name": e.name, "entityType": e.entity_type, "observations": obs}
        yield _dumps(entity) + "\n"
    for r in relations:
        relation: dict[str, Any] = {"type": "relation", "from": r.source, "to": r.target,
                                    "relationType": r.relation_type}
        if with_weights and r.weight != DEFAULT_WEIGHT:
            relation["weight"] = r.weight
        if with_weights and inverses and r.key in inverses:
            relation["inverseOf"] = inverses[r.key]
        yield _dumps(relation) + "\n"


def write_legacy(entities: Iterable[Entity], relations: Iterable[Relation], out: TextIO, *,
                 with_weights: bool = False, inverses: Mapping[tuple[str, str, str], str] | None = None) -> int:
    """Write the export format to ``out`` and return the number of lines written
    (``with_weights``: see :func:`iter_legacy_lines`).

    ``out`` must be a text stream opened with ``encoding="utf-8", newline=""`` so that ``"\\n"``
    is not translated to ``"\\r\\n"`` on Windows. Nothing else is written (no header, no BOM).
    """
    count = 0
    for line in iter_legacy_lines(entities, relations, with_weights=with_weights, inverses=inverses):
        out.write(line)
        count += 1
    return count
