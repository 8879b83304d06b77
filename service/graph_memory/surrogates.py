"""Lone UTF-16 surrogates from outside are replaced with U+FFFD, at every entry point alike.

A client that cuts a string in the middle of a surrogate pair (JavaScript's
``"hi 😀".slice(0, 4)``) sends ``"hi \\ud83d"``: a JSON escape for half a character. The official
TypeScript SDK does so, and the reference server writes such escapes into ``memory.jsonl``. The
SDK's JSON parser (jiter) refuses the whole line, which over stdio leaves the client waiting for a
reply that never comes.

We **accept** such strings and replace each lone surrogate with U+FFFD (REPLACEMENT CHARACTER):

* the half emoji is already lost on the client side; nothing we do brings it back;
* refusing the call would lose the whole fact the assistant wanted to store, for one character;
* U+FFFD is what a UTF-8 encoder does with a character it cannot encode (``errors="replace"``,
  the WHATWG encoder, ``TextEncoder`` in JavaScript);
* SQLite text is UTF-8, which cannot hold a lone surrogate at all.

A valid pair (``\\ud83d\\ude00``) is one character and stays the emoji. Where it happens:

* :func:`repair_json_text` / :func:`repair_json_bytes` rewrite the escapes in a JSON-RPC message
  before the SDK parses it (stdio: only a line the SDK refused, see ``graph_memory.mcp.stdio``;
  HTTP: ``graph_memory.mcp.http.RequestLimits``, which holds each body anyway); each repaired message logs one warning
  ``lone_surrogates_replaced`` with the count and where (transport, JSON-RPC method, request id,
  tool name, field paths), never the text;
* :func:`replace_in_value` fixes decoded values (the legacy reader, which counts them in
  ``LegacyGraph.replaced_surrogates``).

Only a Python caller of the in-process API can still hand a tool a lone surrogate (no wire it could
have come through): the tools refuse it with an error naming the field.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from graph_memory.logs import get_logger

REPLACEMENT: Final = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")
# One backslash escape of a JSON string, in the order tried at each backslash: a valid pair (kept),
# a lone surrogate escape (group 1, replaced), any other escape (kept; consuming "\\\\" keeps the
# parity of backslashes right, so "\\\\ud83d" — a backslash then "ud83d" — is left alone).
_ESCAPES = (r"\\(?:u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
            r"|(u[dD][89a-fA-F][0-9a-fA-F]{2})|.)")
_ESCAPE_TEXT = re.compile(_ESCAPES, re.DOTALL)
_ESCAPE_BYTES = re.compile(_ESCAPES.encode("ascii"), re.DOTALL)
# The cheap test: any surrogate escape at all (paired or not).
_MAYBE_TEXT = re.compile(r"\\u[dD][89a-fA-F]")
_MAYBE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")
_LISTED_FIELDS = 5
# Values nested deeper than this are left as they are (no stored text is: observations sit at depth
# 2 of an entity, tool arguments at 5 of a message), so hostile nesting cannot exhaust the stack.
MAX_DEPTH: Final = 64

log = get_logger("graph_memory.surrogates")


def repair_json_text(text: str) -> tuple[str, int]:
    """``text`` (JSON) with every lone surrogate escape (``\\ud800``–``\\udfff`` not part of a
    valid high+low pair) rewritten as ``\\ufffd``, and the number rewritten. Escapes keep their
    length (6 characters), so nothing else in the text moves."""
    if not _MAYBE_TEXT.search(text):
        return text, 0
    counter = _Counter()
    return _ESCAPE_TEXT.sub(counter.text, text), counter.count


def repair_json_bytes(data: bytes) -> tuple[bytes, int]:
    """:func:`repair_json_text` for a UTF-8 JSON body; same length as ``data``."""
    if b"\\u" not in data or not _MAYBE_BYTES.search(data):
        return data, 0
    counter = _Counter()
    return _ESCAPE_BYTES.sub(counter.bytes, data), counter.count


class _Counter:
    """Replacement functions for :data:`_ESCAPE_TEXT` / :data:`_ESCAPE_BYTES` that count."""

    def __init__(self) -> None:
        self.count = 0

    def text(self, match: re.Match[str]) -> str:
        if match.group(1) is None:
            return match.group(0)
        self.count += 1
        return "\\ufffd"

    def bytes(self, match: re.Match[bytes]) -> bytes:
        if match.group(1) is None:
            return match.group(0)
        self.count += 1
        return b"\\ufffd"


def replace_in_value(value: Any, path: str = "", fields: list[str] | None = None, depth: int = 0) -> tuple[Any, int]:
    """A decoded JSON value (str, list, dict; keys too) with every surrogate code point replaced by
    U+FFFD, and how many were replaced. ``json.loads`` joins valid pairs into one character, so
    any surrogate left in its output is lone. Unchanged containers are returned as they are.
    ``fields`` (optional) collects the path of each string that had one (``a.b[0]``). Containers
    deeper than :data:`MAX_DEPTH` are left as they are."""
    if isinstance(value, str):
        if not _SURROGATE.search(value):
            return value, 0
        if fields is not None:
            fields.append(path or "$")
        return _SURROGATE.subn(REPLACEMENT, value)
    if depth >= MAX_DEPTH:
        return value, 0
    if isinstance(value, list):
        total = 0
        items = []
        for index, item in enumerate(value):
            fixed, count = replace_in_value(item, f"{path}[{index}]", fields, depth + 1)
            items.append(fixed)
            total += count
        return (items if total else value), total
    if isinstance(value, dict):
        total = 0
        pairs = {}
        for key, item in value.items():
            fixed_key, key_count = replace_in_value(key)
            label = _key_label(fixed_key)
            child = f"{path}.{label}" if path else label
            if key_count and fields is not None:
                fields.append(f"{child} (the key)")
            fixed, count = replace_in_value(item, child, fields, depth + 1)
            pairs[fixed_key] = fixed
            total += key_count + count
        return (pairs if total else value), total
    return value, 0


_FIELD_NAME = re.compile(r"[A-Za-z_$][\w$-]{0,63}")


def _key_label(key: Any) -> str:
    """A key as it may appear in a logged field path: a field name as such, anything else (a
    key a client filled with its own text) as ``*``, so paths never carry memory content."""
    return key if isinstance(key, str) and _FIELD_NAME.fullmatch(key) else "*"


def log_replaced(transport: str, original: str | bytes, replaced: int) -> None:
    """The one warning line for a repaired message: count and where (method, request id, tool
    name, field paths from the message's own JSON), never the text itself."""
    where: dict[str, Any] = {}
    try:
        message = json.loads(original)
    except (ValueError, RecursionError):
        message = None
    if isinstance(message, dict):
        params = message.get("params")
        fields: list[str] = []
        replace_in_value(message, "", fields)
        where = {"method": message.get("method"), "request_id": message.get("id"),
                 "tool": params.get("name") if isinstance(params, dict) and message.get("method") == "tools/call"
                 else None,
                 "fields": fields[:_LISTED_FIELDS]}
        where = {k: _printable(v) for k, v in where.items() if v is not None}
    log.warning("lone_surrogates_replaced", transport=transport, replaced=replaced, **where,
                hint="a client cut a character (such as an emoji) in half; each half was read as U+FFFD")


def _printable(value: Any) -> Any:
    """A log value without lone surrogates (a method or id holding one cannot be written as UTF-8)."""
    return replace_in_value(value)[0]
