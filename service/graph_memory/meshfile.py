"""MemoryMesh's memory file: detect it, read it, write it.

MemoryMesh (0.3.0 and the versions before it) keeps its graph in ``dist/data/memory.json``: JSON
lines, despite the name, one per node or edge::

    {"type":"node","name":"Gandalf","nodeType":"npc","metadata":["Role: Wizard"]}
    {"type":"edge","from":"Gandalf","to":"Rivendell","edgeType":"located_in","weight":1}

Edges written before 0.2.8 have no ``weight`` (read as 1.0, as MemoryMesh does). A single JSON
document ``{"nodes": [...], "edges": [...]}`` is read too. Reading is the reference reader of
:mod:`graph_memory.legacy` with MemoryMesh's words (:data:`MEMORYMESH`), so every rule holds
alike: all or nothing with line-numbered errors (``--skip-invalid`` lists and skips bad lines),
names merged, duplicates collapsed, edges to unknown nodes kept. Unlike MemoryMesh, which drops a
line it cannot parse without a word, a bad line refuses the file, and a weight outside 0..1 (which
MemoryMesh 0.3.0 never checks) is a bad line: the database keeps weights in range.

Writing produces what MemoryMesh writes and reads: compact JSON, nodes then edges, keys in
MemoryMesh's order, every edge with its weight.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any, TextIO

from graph_memory.legacy import REFERENCE, Dialect, LegacyGraph, LegacyStream, parse_legacy, stream_legacy
from graph_memory.models import Entity, Relation

__all__ = ["MEMORYMESH", "detect", "iter_memorymesh_lines", "parse_memory_file", "stream_memory_file",
           "write_memorymesh"]

MEMORYMESH = Dialect(entity="node", relation="edge", entity_fields=("name", "nodeType", "metadata"),
                     relation_fields=("from", "to", "edgeType"), document_keys=("nodes", "edges"))
"""MemoryMesh's words for :func:`graph_memory.legacy.parse_legacy`."""

_HEAD_BYTES = 1 << 16
_TAGS = {"node": MEMORYMESH, "edge": MEMORYMESH, "entity": REFERENCE, "relation": REFERENCE}


def detect(data: bytes) -> Dialect:
    """The format of a memory file's bytes: :data:`MEMORYMESH` when its first line with a known
    ``"type"`` is a node or an edge (or it is one document with ``nodes``/``edges``), else the
    reference server's (also for a file that says neither: the reference reader then explains)."""
    # Read line by line from the bytes: decoding a large file whole would hold it again as text
    # (4 bytes a character once one emoji is in it) and again as a list of lines.
    head = data[:_HEAD_BYTES].decode("utf-8", errors="replace").removeprefix("\ufeff").lstrip()
    if head.startswith("{") and data.find(b"\n{", data.find(b"{")) == -1:  # perhaps one document
        try:
            doc = json.loads(data.decode("utf-8", errors="replace").removeprefix("\ufeff").strip())
        except json.JSONDecodeError:
            doc = None
        if isinstance(doc, dict) and "type" not in doc:
            return MEMORYMESH if ("nodes" in doc or "edges" in doc) else REFERENCE
    start = 0
    while start < len(data):
        end = data.find(b"\n", start)
        end = len(data) if end == -1 else end
        line = data[start:end].decode("utf-8", errors="replace")
        if start == 0:
            line = line.removeprefix("\ufeff")
        start = end + 1
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        tag = obj.get("type") if isinstance(obj, dict) else None
        if isinstance(tag, str) and tag in _TAGS:
            return _TAGS[tag]
    return REFERENCE


def parse_memory_file(data: bytes, *, skip_invalid: bool = False, path: str | None = None) -> LegacyGraph:
    """Parse a reference-server or MemoryMesh memory file (:func:`detect` tells which) with
    :func:`graph_memory.legacy.parse_legacy`; same result, rules and errors for both."""
    return parse_legacy(data, skip_invalid=skip_invalid, path=path, dialect=detect(data))


def stream_memory_file(data: bytes, *, skip_invalid: bool = False, path: str | None = None,
                       check: bool = True, known_lines: frozenset[bytes] = frozenset()) -> LegacyStream:
    """:func:`parse_memory_file` for a streamed import (:func:`graph_memory.legacy.stream_legacy`):
    the file checked whole, its records read again one at a time (``check`` False: checked by
    that reading); ``known_lines``: digests of lines to leave out (imported before)."""
    return stream_legacy(data, skip_invalid=skip_invalid, path=path, dialect=detect(data), check=check,
                         known_lines=known_lines)


def _dumps(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def iter_memorymesh_lines(entities: Iterable[Entity], relations: Iterable[Relation]) -> Iterator[str]:
    """MemoryMesh's file, one line at a time (each ending with ``"\\n"``): nodes, then edges."""
    for e in entities:
        yield _dumps({"type": "node", "name": e.name, "nodeType": e.entity_type, "metadata": e.observations}) + "\n"
    for r in relations:
        # 1 rather than 1.0, as JavaScript writes a whole number
        weight: float | int = int(r.weight) if r.weight.is_integer() else r.weight
        yield _dumps({"type": "edge", "from": r.source, "to": r.target, "edgeType": r.relation_type,
                      "weight": weight}) + "\n"


def write_memorymesh(entities: Iterable[Entity], relations: Iterable[Relation], out: TextIO) -> int:
    """Write MemoryMesh's file to ``out`` (a text stream opened with ``encoding="utf-8",
    newline=""``); returns the number of lines written."""
    count = 0
    for line in iter_memorymesh_lines(entities, relations):
        out.write(line)
        count += 1
    return count
