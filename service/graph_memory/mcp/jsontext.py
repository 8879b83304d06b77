"""JSON text, fast and exact: the text content of tool results (:func:`dumps_indent2`) and the
JSON-RPC lines the stdio transport writes (:func:`dumps_line`).

The text content is ``json.dumps(value, indent=2, ensure_ascii=False)``, faster.

With ``indent`` set, the standard library encodes in pure Python through nested generators
(its C encoder only serves compact output on Python < 3.13); that was the largest share of our
own time in a point operation and ~20 ms per 1,000 entities of read_graph (issue 6). This encoder
produces the same string for the JSON types tool payloads hold — ``dict`` with ``str`` keys,
``list``/``tuple``, ``str``, ``int``, ``float``, ``bool``, ``None`` — escaping strings with the
standard library's own C function; for anything else it hands the whole value to ``json.dumps``,
so the output (or the error) is always exactly the standard library's. orjson encodes
first (another ~3× faster); its output is used only when it is certainly the same
string: it refuses what the standard library would encode differently (non-``str`` keys, integers
beyond 64 bits, lone surrogates); it writes NaN and infinities as ``null``, so a text with a
``null`` is not used; and the one kind of value it writes differently — a float
that Python's ``repr`` writes with an exponent, like ``1e-07`` (orjson: ``1e-7``) — is found by
:func:`_may_hold_exponent_floats`, which then hands the value to the pure-Python encoder.
"""

from __future__ import annotations

import json
import re
import secrets
from json.encoder import encode_basestring, encode_basestring_ascii  # C implementations on CPython
from typing import Any

import orjson

__all__ = ["LONG_TEXT", "dumps_indent2", "dumps_line", "dumps_line_parts", "dumps_line_utf8", "escape_non_ascii"]

_INDENT = "  "
_INF = float("inf")


class _Unsupported(Exception):
    """A value this encoder does not handle; ``json.dumps`` takes over."""


def dumps_indent2(value: Any) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=False)``, the same string, several times faster."""
    try:
        encoded = orjson.dumps(value, option=orjson.OPT_INDENT_2)
    except (TypeError, ValueError):   # orjson.JSONEncodeError is a TypeError
        encoded = None
    # orjson writes NaN and infinities as null: a null value may be one (then that text is not used).
    if encoded is not None and not _may_hold_exponent_floats(encoded) and not _may_hold_non_finite(value, encoded):
        return encoded.decode()
    out: list[str] = []
    try:
        _encode(value, out, "\n")
    except (_Unsupported, RecursionError):
        return json.dumps(value, indent=2, ensure_ascii=False)
    return "".join(out)


def _may_hold_non_finite(value: Any, encoded: bytes) -> bool:
    """Whether ``encoded`` (orjson's indented text of ``value``) may have a NaN or an infinity
    written as ``null``: only when it holds a null value; then the standard library's C encoder,
    which refuses them, decides (4× cheaper than the pure-Python encoder). The word ``null``
    inside a string (an observation "returns null") is no null value: that reply once went the
    pure-Python way, ten times slower (issue 15)."""
    if not _holds_null_value(encoded):
        return False
    try:
        json.dumps(value, allow_nan=False, check_circular=False)
    except (ValueError, TypeError, RecursionError):   # NaN or infinity; or a value for the exact path
        return True
    return False


def _holds_null_value(encoded: bytes) -> bool:
    """Whether orjson's indented ``encoded`` holds a ``null`` outside strings. Conservative: a
    ``null`` counts unless it is certainly inside a string. Outside strings a value starts the
    text, a line (an array item: indented, and strings hold no raw newline) or follows ``": ``
    (an object's value; inside a string that quote would be escaped, which is rare enough to be
    counted too)."""
    at = encoded.find(b"null")
    while at != -1:
        start = at
        while start and encoded[start - 1] == 0x20:   # the indent of an array item
            start -= 1
        if start == 0 or encoded[start - 1] == 0x0A or encoded[at - 3:at] == b'": ':
            return True
        at = encoded.find(b"null", at + 4)
    return False


def _float(value: float) -> str:
    if value != value:
        return "NaN"
    if value == _INF:
        return "Infinity"
    if value == -_INF:
        return "-Infinity"
    return float.__repr__(value)


def _encode(value: Any, out: list[str], newline: str) -> None:
    """Append the encoding of ``value`` to ``out``; ``newline`` is ``"\\n"`` plus the current indent."""
    kind = type(value)
    if kind is str:
        out.append(encode_basestring(value))
    elif kind is dict:
        if not value:
            out.append("{}")
            return
        inner = newline + _INDENT
        separator = "{" + inner
        for key, item in value.items():
            if type(key) is not str:
                raise _Unsupported
            out.append(separator)
            out.append(encode_basestring(key))
            out.append(": ")
            if type(item) is str:
                out.append(encode_basestring(item))
            else:
                _encode(item, out, inner)
            separator = "," + inner
        out.append(newline + "}")
    elif kind is list or kind is tuple:
        if not value:
            out.append("[]")
            return
        inner = newline + _INDENT
        if all(type(item) is str for item in value):   # e.g. observations: one join
            out.append("[" + inner + ("," + inner).join(map(encode_basestring, value)) + newline + "]")
            return
        separator = "[" + inner
        for item in value:
            out.append(separator)
            _encode(item, out, inner)
            separator = "," + inner
        out.append(newline + "]")
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif kind is int:
        out.append(int.__repr__(value))
    elif kind is float:
        out.append(_float(value))
    else:
        raise _Unsupported


def _may_hold_exponent_floats(encoded: bytes | str, *, orjson_style: bool = True) -> bool:
    """Whether JSON ``encoded`` may hold a float written with an exponent (``1e-7``, ``1e-07``,
    ``1e+16``) or, when ``orjson_style``, orjson's ``0.0000…`` (Python writes ``1e-05``): the
    floats whose text differs between Python's ``repr``, orjson and pydantic. Every other float
    is written alike by all three (shortest round-trip digits). Conservative: text like
    ``"3e-4"`` inside a string also answers True (callers then take their exact path).

    Exponents always carry a sign, so the scan looks for ``-`` and ``+`` (memchr speed: a few ms
    for 50 MB) and looks closer only there.
    """
    if isinstance(encoded, bytes):
        return _exponent_in(encoded, b"-", b"+", b"e", b"E") or (orjson_style and b"0.0000" in encoded)
    return _exponent_in(encoded, "-", "+", "e", "E") or (orjson_style and "0.0000" in encoded)


def _exponent_in(encoded: Any, minus: Any, plus: Any, e: Any, upper_e: Any) -> bool:
    """Whether a digit, ``e`` or ``E``, and a sign follow each other somewhere in ``encoded``."""
    for sign in (minus, plus):
        at = encoded.find(sign, 2)
        while at != -1:
            if encoded[at - 1:at] in (e, upper_e) and encoded[at - 2:at - 1].isdigit():
                return True
            at = encoded.find(sign, at + 1)
    return False


_NON_ASCII = re.compile("[^\x00-\x7e]+")   # what json.dumps(ensure_ascii=True) escapes: DEL too


def _escaped(match: re.Match[str]) -> str:
    return encode_basestring_ascii(match.group())[1:-1]


def escape_non_ascii(text: str) -> str:
    """JSON ``text`` with every non-ASCII character inside its strings written as ``\\uXXXX``
    (surrogate pairs beyond U+FFFF), as ``json.dumps(ensure_ascii=True)`` writes them: the same
    JSON value, in ASCII, the same text as ``json.dumps`` writes (DEL is escaped too). Outside
    strings JSON has no such characters."""
    return text if text.isascii() and "\x7f" not in text else _NON_ASCII.sub(_escaped, text)


# Values orjson would write in its own way (datetimes, dataclasses) or subclasses of str, int,
# dict and list (an enum's text) are refused: those lines take the standard library's path.
_LINE_OPTIONS = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS | orjson.OPT_PASSTHROUGH_SUBCLASS


def _texts_are_ascii(message: dict[str, Any]) -> bool:
    """Whether the text items of a tool result (the rendering of the same data as its structured
    content) are ASCII: a cheap sign (``str.isascii`` is O(1)) that the whole line may be."""
    return all(text.isascii() for text in _texts(message))


def _texts(message: dict[str, Any]) -> list[str]:
    """The texts of the content items of a tool result message (none for any other message)."""
    result = message.get("result")
    content = result.get("content") if isinstance(result, dict) else None
    if not isinstance(content, list):
        return []
    return [text for item in content if isinstance(item, dict) and isinstance(text := item.get("text"), str)]


def _ascii_line(message: dict[str, Any]) -> str | None:
    """orjson's compact text of ``message`` when it is certainly :func:`dumps_line`'s: ASCII
    (where orjson and ``json.dumps(ensure_ascii=True)`` escape alike, DEL aside), no ``null``
    (orjson writes NaN so), no float that orjson writes otherwise. Else None."""
    try:
        encoded = orjson.dumps(message, option=_LINE_OPTIONS)
    except (TypeError, ValueError):   # orjson.JSONEncodeError is a TypeError
        return None
    if (not encoded.isascii() or encoded.find(b"\x7f") != -1 or encoded.find(b"null") != -1
            or _may_hold_exponent_floats(encoded)):
        return None
    return encoded.decode("ascii")


def dumps_line(message: dict[str, Any]) -> str:
    """One JSON-RPC message as its stdio line, without the newline: compact JSON in ASCII
    (non-ASCII escaped); the same JSON value as the SDK's writer produces (pydantic's
    ``to_json``), floats written exactly as pydantic writes them.

    ASCII because the official Python client reads a line holding any character beyond Latin-1
    as a 4-byte-per-character string and re-joins its buffer per 64 KiB read: escaped lines are
    read 2–4× faster for ~14 % more bytes (issue 15). A line that is ASCII anyway is orjson's
    (the same text, 1.6–2.3× sooner than the standard library's C encoder); others take one pass
    of the C encoder; only a message holding a float with an exponent (``1e-07``, which pydantic
    writes ``1e-7``) or a value the C encoder refuses (NaN) goes through pydantic and
    :func:`escape_non_ascii` instead.
    """
    return _dumps_line(message, _texts_are_ascii(message))


def _dumps_line(message: dict[str, Any], try_orjson: bool) -> str:
    if try_orjson:
        line = _ascii_line(message)
        if line is not None:
            return line
    try:
        text = json.dumps(message, ensure_ascii=True, separators=(",", ":"), allow_nan=False,
                          check_circular=False)
    except (TypeError, ValueError, RecursionError):
        text = None
    if text is not None and not _may_hold_exponent_floats(text, orjson_style=False):
        return text
    import pydantic_core

    return escape_non_ascii(pydantic_core.to_json(message).decode())


# A text content longer than this (characters) is escaped apart from the rest of its line.
LONG_TEXT = 1 << 20


def dumps_line_parts(message: dict[str, Any]) -> list[str]:
    """:func:`dumps_line` as parts whose concatenation is exactly that line: one part, or, for a
    tool result whose one text content is longer than :data:`LONG_TEXT`, the text escaped on its
    own between the rest of the line cut in two. The parts are written one after the other and
    never joined: a 100,000-entity read_graph line is ~100 MB, and joining it held the graph once
    more at the moment the reply was at its largest (issue 15's memory target)."""
    text = _long_text(message)
    if text is None:
        return [dumps_line(message)]
    token = "graph-memory-text-" + secrets.token_hex(16)
    result = message["result"]
    swapped = {**message, "result": {**result, "content": [{**result["content"][0], "text": token}]}}
    rest = _dumps_line(swapped, text.isascii())   # the structured content renders the same data
    marker = f'"{token}"'
    at = rest.find(marker)
    if at == -1 or rest.find(marker, at + len(marker)) != -1:
        return [dumps_line(message)]
    head, tail = rest[:at], rest[at + len(marker):]
    del rest   # before the text's escaped copy is made
    return [head, encode_basestring_ascii(text), tail]


def _long_text(message: dict[str, Any]) -> str | None:
    """The text content of a tool result holding one text item longer than :data:`LONG_TEXT`."""
    texts = _texts(message)
    if len(texts) != 1 or len(message["result"]["content"]) != 1:   # one item, and it is a text
        return None
    return texts[0] if type(texts[0]) is str and len(texts[0]) > LONG_TEXT else None


def dumps_line_utf8(message: dict[str, Any]) -> bytes | None:
    """The same line as :func:`dumps_line` with non-ASCII characters as UTF-8 instead of escapes:
    exactly what the SDK's own writer sends (pydantic's ``to_json``), 12–40 % fewer bytes for
    non-Latin text. None when the message holds a lone surrogate, which UTF-8 cannot carry (only
    the escaped line can)."""
    import pydantic_core

    try:
        return pydantic_core.to_json(message)
    except pydantic_core.PydanticSerializationError:
        return None
