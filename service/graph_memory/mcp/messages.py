"""What makes a parsed JSON value no JSON-RPC 2.0 message, in a few words.

Shared by both transports, so a client that sends a malformed message gets the same explanation
over stdio and over HTTP (kept free of the HTTP stack: the stdio path imports it at start)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

from graph_memory.wording import json_type


def message_problem(message: object, carrier: str) -> str | None:
    """The problem of ``message`` (a parsed JSON value, the whole ``carrier``: "body" or "line")
    as a JSON-RPC 2.0 message, or None when none is found here (the SDK's own verdict stands)."""
    if not isinstance(message, dict):
        return f"the {carrier} is a JSON {json_type(message)}, not a message object"
    if message.get("jsonrpc") != "2.0":
        return '"jsonrpc" must be "2.0"'
    if "method" in message:
        method, params = message["method"], message.get("params", {})
        if not isinstance(method, str):
            return f'"method" must be a string, not a JSON {json_type(method)}'
        return None if isinstance(params, dict) else f'"params" must be an object, not a JSON {json_type(params)}'
    if "result" in message or "error" in message:
        return None
    return 'a request or notification needs a "method" (a response: "result" or "error")'


# How deeply the SDK's JSON parser (pydantic-core) nests arrays and objects, and what a request
# nested deeper is told (over stdio and HTTP alike).
MAX_NESTING = 200
TOO_DEEP = (f"Invalid Request: the message nests arrays and objects deeper than the server reads "
            f"(about {MAX_NESTING} levels); send the data less deeply nested")


# A JSON string (escapes included), or one bracket: the tokens that decide nesting.
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[{}\[\]]')
_COLON = re.compile(r"[ \t\r\n]*:[ \t\r\n]*")


def _top_level_members(text: str) -> Iterator[tuple[str, int]]:
    """The members of the JSON object ``text`` (key, offset of its value), found without parsing
    what is nested. Linear in ``text``."""
    depth = 0
    for token in _TOKEN.finditer(text):
        value = token.group()
        if value in "{[":
            depth += 1
        elif value in "}]":
            depth -= 1
        elif depth == 1 and (colon := _COLON.match(text, token.end())) is not None:
            yield json.loads(value), colon.end()


TOO_LONG_NUMBER = ("Invalid Request: the message holds a number longer than the server reads (thousands of "
                   "digits); send it as a string")
# The JSON parser's words for valid JSON it does not read, and what the reply says instead.
_UNREADABLE_JSON = (("recursion limit", TOO_DEEP), ("number out of range", TOO_LONG_NUMBER))


def unreadable_json(parse_error: str) -> str | None:
    """For the parser's ``parse_error`` message about a line: when the line is valid JSON that
    the parser does not read (nested deeper than ~200 levels, a number of thousands of digits),
    what the answer to it says (:data:`TOO_DEEP`, :data:`TOO_LONG_NUMBER`); else None."""
    return next((problem for cue, problem in _UNREADABLE_JSON if cue in parse_error), None)


def top_level_id(text: str) -> int | str | None:
    """The ``"id"`` member of the JSON object ``text`` when it is a string or an integer, found
    without parsing what is nested (a line too deeply nested for any parser still names its
    request); None when there is none or it is of another kind. Linear in ``text``."""
    for key, offset in _top_level_members(text):
        if key != "id":
            continue
        try:
            found, _ = _DECODER.raw_decode(text, offset)
        except (ValueError, RecursionError):
            return None
        return found if type(found) in (int, str) else None
    return None


def is_notification(text: str) -> bool:
    """Whether the JSON object ``text`` has a ``"method"`` member and no ``"id"``: a notification,
    which gets no reply even when it cannot be read (JSON-RPC 2.0). Linear in ``text``."""
    keys = {key for key, _ in _top_level_members(text)}
    return "method" in keys and "id" not in keys


_DECODER = json.JSONDecoder()
