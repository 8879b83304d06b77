"""The text content of tool results: ``json.dumps(value, indent=2, ensure_ascii=False)``, faster.

With ``indent`` set, the standard library encodes in pure Python through nested generators
(its C encoder only serves compact output on Python < 3.13); that was the largest share of our
own time in a point operation and ~20 ms per 1,000 entities of read_graph (issue 6). This encoder
produces the same string for the JSON types tool payloads hold — ``dict`` with ``str`` keys,
``list``/``tuple``, ``str``, ``int``, ``float``, ``bool``, ``None`` — escaping strings with the
standard library's own C function; for anything else it hands the whole value to ``json.dumps``,
so the output (or the error) is always exactly the standard library's.
"""

from __future__ import annotations

import json
from json.encoder import encode_basestring  # the C implementation when available (CPython)
from typing import Any

__all__ = ["dumps_indent2"]

_INDENT = "  "
_INF = float("inf")


class _Unsupported(Exception):
    """A value this encoder does not handle; ``json.dumps`` takes over."""


def dumps_indent2(value: Any) -> str:
    """``json.dumps(value, indent=2, ensure_ascii=False)``, the same string, several times faster."""
    out: list[str] = []
    try:
        _encode(value, out, "\n")
    except (_Unsupported, RecursionError):
        return json.dumps(value, indent=2, ensure_ascii=False)
    return "".join(out)


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
