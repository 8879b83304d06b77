"""The one bound on what a reply may weigh (``MEMORY_MAX_REPLY_BYTES``), for every tool and the
resource, in both profiles.

MCP clients do not read arbitrarily large messages: the official TypeScript client drops any
stdio message over 10 MiB and the connection with it, and the model never learns why. So no
reply goes out over the bound, and none is cut short either: it is refused with an error that
says how to get all of it. A reply's line, newline included, must be shorter than the bound (a
line of exactly the bound is refused).

- The reading tools of the reference profile refuse first, from an estimate, before they build
  their payload, with advice that fits (pages, the summary view, fewer names:
  :meth:`graph_memory.service.MemoryService.check_reply`), when it is surely over; near the bound
  they measure the built reply (:func:`least_line_bytes`), so the estimate's error never refuses
  a reply that fits.
- A writing call whose reply could go over (a reply repeats what the call creates or deletes, as
  text and as structured content: about twice what the call sends) is refused before it writes
  anything, with the number of calls to split it into (:func:`check_request`).
- Every other reply is measured once built (:func:`check_reply`; ``Outcome.sized`` marks the
  reading tools' replies, already held to the bound): MemoryMesh's reads, the typed tools, a
  write whose reply grew from what the graph already held. A write refused here is saved; its
  error says so.
- The ``memory://knowledge-graph`` resource (:func:`check_resource`).
- Last, the stdio transport measures each line it writes, exactly and for free, and replaces one
  over the bound by an error (:func:`refused_line`): the estimates above cannot be exact near the
  bound (quotes and backslashes are escaped twice in the text content, for one).

Sizes are the bytes of the JSON-RPC message in UTF-8 (compact, non-ASCII unescaped: what the
SDK's own writers send, and the reference server), measured exactly, but only for texts long
enough to come near the bound. The stdio transport sends a line with non-ASCII escaped when that
fits (the official Python client reads it faster) and the UTF-8 line otherwise, so escaping never
costs a reply (a CJK or emoji text takes twice or three times its UTF-8 bytes escaped).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from json.encoder import encode_basestring_ascii  # C implementation on CPython
from typing import Any

import orjson

from graph_memory.errors import ReplyTooLarge
from graph_memory.mcp.jsontext import dumps_indent2
from graph_memory.settings import DEFAULT_MAX_REPLY_BYTES

__all__ = ["check_reply", "check_request", "check_resource", "least_line_bytes", "message_bytes", "refused_line"]

# The JSON-RPC envelope and the result's own keys around the payload (ids, content type, isError…).
_ENVELOPE = 200
# A character takes at most this many bytes in a JSON string (an escape "\uXXXX": a control
# character or a lone surrogate; UTF-8 takes at most 4): a text shorter than bound / (2 * this)
# cannot reach the bound, so it is not measured.
_MAX_BYTES_PER_CHAR = 6
# What structured content may hold beyond the text's value (MemoryMesh's action text, a timestamp).
_STRUCTURED_EXTRA = 8192
# A tool result's line around its text and structured content, with the shortest id ("0") and
# the newline: what the stdio transport writes (tests/test_reply_bound.py checks it is exact).
_TOOL_LINE = len(b'{"jsonrpc":"2.0","id":0,"result":{"content":[{"text":,"type":"text"}],"isError":false,'
                 b'"structuredContent":}}\n')
# A resource's line around its text (uri and mimeType included), likewise.
_RESOURCE_LINE = len(b'{"jsonrpc":"2.0","id":0,"result":{"contents":[{"uri":"memory://knowledge-graph",'
                     b'"mimeType":"application/json","text":}]}}\n')


def least_line_bytes(text: str, structured: dict[str, Any] | None = None) -> int:
    """The bytes of the shortest line a reply holding the text content ``text`` (and
    ``structured`` content) can take on the wire: UTF-8, compact, a one-character id, the
    newline. A lower bound of the line the transport writes (a longer id, or non-ASCII escaped
    where that fits, only add to it), exact for ids of one character: so a reply is refused
    only when it is surely over, and a line of exactly the bound is refused."""
    if structured is None:
        return _RESOURCE_LINE + _json_bytes(text)
    return _TOOL_LINE + _json_bytes(text) + _json_bytes(structured)


def message_bytes(text: str, structured: dict[str, Any] | None = None) -> int:
    """The bytes a reply holding the text content ``text`` (and ``structured`` content) takes
    on the wire in UTF-8: both JSON-encoded, compact, plus the envelope."""
    size = _ENVELOPE + _json_bytes(text)
    if structured is not None:
        size += _json_bytes(structured)
    return size


def _json_bytes(value: object) -> int:
    """The bytes of ``value`` as compact JSON in UTF-8; escaped where orjson refuses the value
    (lone surrogates, which only an escape carries; integers beyond 64 bits)."""
    try:
        return len(orjson.dumps(value, default=str))
    except TypeError:   # orjson.JSONEncodeError is a TypeError
        if isinstance(value, str):
            return len(encode_basestring_ascii(value))
        return len(json.dumps(value, ensure_ascii=True, separators=(",", ":"), check_circular=False, default=str))


def _over(bound: int, text: str, structured: dict[str, Any] | None) -> int | None:
    """The size of the reply's line (:func:`least_line_bytes`) when it reaches ``bound`` (0: no
    bound), else None. Measures only what can bring it there: nothing for a short text; the text
    alone while twice its size fits with room to spare (the structured content is the text's
    value compact, plus a few keys)."""
    copies = 1 if structured is None else 2
    if not bound or copies * _MAX_BYTES_PER_CHAR * len(text) + _ENVELOPE < bound:
        return None
    text_bytes = _ENVELOPE + _json_bytes(text)
    if copies * text_bytes + _STRUCTURED_EXTRA < bound:
        return None
    size = least_line_bytes(text, structured)
    return size if size >= bound else None


def _bound_text(bound: int) -> str:
    return (f"the {bound:,}-byte bound on replies (MEMORY_MAX_REPLY_BYTES) that keeps them within what MCP "
            f"clients accept")


def _within(value: object, longest: int, batch: int) -> bool:
    """Whether no string in ``value`` is longer than ``longest`` and no list longer than ``batch``."""
    if isinstance(value, str):
        return len(value) <= longest
    if isinstance(value, dict):
        return all(_within(item, longest, batch) for item in value.values())
    if isinstance(value, list):
        return len(value) <= batch and all(_within(item, longest, batch) for item in value)
    return True


def check_request(tool: str, arguments: object, bound: int, *, longest: int, batch: int) -> None:
    """Refuse a writing call whose reply could be over ``bound`` (0: none) before it writes:
    the reply repeats what the call sends, once as text and once as structured content. A call
    with a string longer than ``longest`` or a list longer than ``batch`` (the input limits) is
    left to the tool, whose refusal names the limit it breaks.

    Raises:
        ReplyTooLarge: the message gives the number of calls to split it into; nothing was written.
    """
    if not bound:
        return
    try:
        sent = len(orjson.dumps(arguments, default=str))
    except TypeError:   # what orjson refuses (lone surrogates, huge integers): the standard library
        sent = len(json.dumps(arguments, ensure_ascii=False, separators=(",", ":"), default=str))
    # Indentation adds at most about 5 bytes per byte sent (one-character strings, nested deep).
    if 6 * sent + _ENVELOPE < bound:
        return
    reply = _echo_bytes(arguments)
    if reply < bound or not _within(arguments, longest, batch):
        return
    raise ReplyTooLarge(
        f"{tool}: this call sends about {sent:,} bytes, and its reply, which repeats what it writes (as "
        f"indented text and as structured content), could be about {reply:,} bytes, over {_bound_text(bound)}; "
        f"nothing was written. {_split_advice(tool, arguments, reply, bound)}")


def _echo_bytes(arguments: object) -> int:
    """The bytes of a reply that repeats ``arguments`` as indented text and as structured content."""
    return message_bytes(dumps_indent2(arguments), arguments if isinstance(arguments, dict) else None)


# What a writing tool's items hold that can be sent over several calls, and how to say so.
_PARTS_OF_ONE_ITEM = {
    "create_entities": ("observations", "Create {name} with a part of its observations, then add the rest with "
                                        "add_observations, a part per call"),
    "add_observations": ("contents", "Add the contents for {name} over several calls, a part each"),
    "delete_observations": ("observations", "Delete the observations of {name} over several calls, a part each"),
}


def _split_advice(tool: str, arguments: object, reply: int, bound: int) -> str:
    """How to send what a refused writing call sends within the bound: in parts of its items;
    when one item alone is over it, that item's observations in parts (found by QA: two
    create_entities calls of one entity's halves lost the second half, its name being taken);
    when one text alone is, to shorten it or raise the bound (a split cannot help)."""
    budget = int(bound * 0.8)
    listed = [(key, value) for key, value in arguments.items() if isinstance(value, list)] \
        if isinstance(arguments, dict) else []
    if not listed:
        return "Raise MEMORY_MAX_REPLY_BYTES for it."
    key, items = listed[0]
    sizes = [_echo_bytes({key: [item]}) for item in items]
    if len(items) > 1 and max(sizes) < budget:
        advice = f"Split it into {-(-reply // budget)} or more calls with a part of the {key} each"
        if tool == "create_entities":   # a name already created is skipped: send each entity whole
            advice += " (each entity whole: add more observations to one with add_observations)"
        return advice + "."
    heaviest = items[sizes.index(max(sizes))]
    inner_key, how = _PARTS_OF_ONE_ITEM.get(tool, ("", ""))
    inner = heaviest.get(inner_key) if isinstance(heaviest, dict) else None
    if isinstance(inner, list) and len(inner) > 1:
        one = [_echo_bytes({key: [{**heaviest, inner_key: [text]}]}) for text in inner]
        if max(one) < budget:
            name = heaviest.get("name", heaviest.get("entityName", ""))
            return how.format(name=repr(name)) + "."
    return ("One item alone is over it (a text too long for a reply that repeats it): shorten that text, or raise "
            "MEMORY_MAX_REPLY_BYTES.")


def check_reply(tool: str, text: str, structured: dict[str, Any], bound: int, *, wrote: bool,
                profile: str = "reference") -> None:
    """Refuse a built reply over ``bound`` (0: none): ``text`` and ``structured`` are its text
    and structured content; ``wrote`` says whether the call changed the graph (then its changes
    are kept, and the error says so: the call must not be repeated).

    Raises:
        ReplyTooLarge: over the bound; the message says what to do instead.
    """
    size = _over(bound, text, structured)
    if size is None:
        return
    what = f"{tool}: this reply would be about {size:,} bytes, over {_bound_text(bound)}; it was not sent. "
    if wrote:
        how = ("The call itself succeeded and its changes are saved: do not repeat it. Look at the entities it "
               "changed with open_nodes (a few names per call)")
    elif profile == "memorymesh":
        how = ("Ask for less per call: search_nodes with a narrower query, open_nodes with fewer names (MemoryMesh's "
               "read_graph has no pages; the reference profile, MEMORY_TOOLS=reference, reads a graph of any size "
               "page by page)")
    else:
        how = ("Ask for less per call: fewer names, a narrower query, pages (limit, then cursor=nextCursor) or "
               "view 'summary' where the tool has them")
    raise ReplyTooLarge(what + how + ".")


def check_resource(uri: str, text: str, bound: int, profile: str = "reference",
                   page: Callable[[], int] | None = None) -> None:
    """Refuse a ``resources/read`` reply whose content ``text`` is over ``bound`` (0: none).
    ``page()``: a read_graph ``limit`` whose pages fit (asked only when refusing).

    Raises:
        ReplyTooLarge: the message says how to read the whole graph with read_graph's pages.
    """
    size = _over(bound, text, None)
    if size is None:
        return
    what = f"{uri}: the whole knowledge graph is about {size:,} bytes, over {_bound_text(bound)}; it was not sent. "
    if profile == "memorymesh":
        how = ("Read it in parts with the search_nodes and open_nodes tools (MemoryMesh's read_graph has no pages; "
               "the reference profile, MEMORY_TOOLS=reference, reads a graph of any size page by page)")
    else:
        limit = f"limit {page()} (or less)" if page is not None else "limit, e.g. 1000"
        how = (f"Read all of it with the read_graph tool in pages ({limit}, then cursor set to each "
               "reply's nextCursor until a reply has none), or get an overview with read_graph view 'summary' "
               "(names, types and observation counts)")
    raise ReplyTooLarge(what + how + ".")


def refused_line(request_id: str | int, result: dict[str, Any], size: int, bound: int) -> dict[str, Any]:
    """The message that replaces the reply ``result`` to request ``request_id`` when its line
    (``size`` bytes with its newline) is over ``bound``: the last, exact check, where the line is
    built (the checks above estimate, or measure only part of it). A tool's result becomes a tool
    error the model reads; any other result a JSON-RPC error (-32603, as for the resource). A
    reply that holds no memory (tools/list, initialize…) cannot be asked for in parts: its error
    says to raise the bound, which is then set below what the server itself needs."""
    if not isinstance(result.get("content"), list) and not isinstance(result.get("contents"), list):
        return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32603, "message": (
            f"This reply would be {size:,} bytes, over {_bound_text(bound)}; it was not sent. It holds no memory "
            f"and comes only whole (a listing of the server's tools or resources, or its handshake): set "
            f"MEMORY_MAX_REPLY_BYTES to at least {size:,} (the default is {DEFAULT_MAX_REPLY_BYTES:,}; 0: no "
            f"bound) and restart the server.")}}
    if result.get("isError") is True:   # a refused call: its transaction wrote nothing
        text = next((c.get("text") for c in result.get("content", []) if isinstance(c, dict)), "")
        what = (f"The call failed, and its error message was {size:,} bytes, over {_bound_text(bound)}; nothing "
                f"was written. It began: {str(text)[:300]}")
    else:
        what = (f"This reply would be {size:,} bytes, over {_bound_text(bound)}; it was not sent. Ask for less "
                f"per call: read_graph and search_nodes in pages (limit, then cursor set to each reply's nextCursor "
                f"until a reply has none) or with view 'summary', open_nodes with fewer names; the "
                f"memory://knowledge-graph resource through read_graph's pages. A call that writes has done its "
                f"work: do not repeat it.")
    if isinstance(result.get("content"), list):
        return {"jsonrpc": "2.0", "id": request_id,
                "result": {"content": [{"type": "text", "text": what}], "isError": True}}
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32603, "message": what}}
