"""Tool results built once and serialised once, without the garbage collector scanning them.

The SDK shapes a handler's ``CallToolResult`` for the wire in three passes over every value in
it: a ``model_dump``, a validation against the protocol version's result model and a second
dump — then the transport encodes it. At 100,000 entities those copies held the graph several
times over (1.5 GB peak) and cost seconds (issue 15). Here a tool's result skips them through
public interfaces: inside :func:`prebuilt_results` (a server middleware, around the SDK's own
handling of ``tools/call``), :func:`tool_result` hands the SDK a result with empty
placeholders — validated and shaped as usual — and the middleware puts the real content and
structured content, built once by the tool, into the shaped dict. The transport then encodes
that dict once (:func:`graph_memory.mcp.jsontext.dumps_line` on stdio). Outside the middleware
(a handler called directly) :func:`tool_result` returns the whole ``CallToolResult``.

:func:`reply_building` keeps CPython's cyclic garbage collector from scanning a reply while it is
being built (millions of new dicts, lists and strings trigger collections that scan all of them,
about 1 s at 100,000 entities) and afterwards (it moves them to the permanent generation,
``gc.freeze``): replies hold no reference cycles, so reference counting frees them as before.
The next reply returns the frozen objects to the collector (``gc.unfreeze``).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import mcp_types as types
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext

__all__ = ["prebuilt_results", "reply_building", "tool_result"]


class _Slot:
    """Where :func:`tool_result` leaves one call's content for :func:`prebuilt_results`."""

    __slots__ = ("structured", "text")

    def __init__(self) -> None:
        self.text: str | None = None
        self.structured: dict[str, Any] | None = None


_slot: ContextVar[_Slot | None] = ContextVar("graph_memory_tool_result", default=None)


def tool_result(text: str, structured: dict[str, Any]) -> types.CallToolResult:
    """The successful result of a tool: one text item ``text`` and ``structured`` content.

    Within :func:`prebuilt_results` the values are handed on as they are (never copied or
    re-validated) and the returned result holds empty placeholders; elsewhere it holds them."""
    slot = _slot.get()
    if slot is None:
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                    structured_content=structured)
    slot.text = text
    slot.structured = structured
    return types.CallToolResult(content=[types.TextContent(type="text", text="")], structured_content={})


async def prebuilt_results(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware: put the content a ``tools/call`` handler gave :func:`tool_result` into
    the wire dict the SDK shaped from its placeholders (same keys, same order). Every other
    request, and every result not built by :func:`tool_result` (errors), passes untouched."""
    if ctx.method != "tools/call" or ctx.request_id is None:
        return await call_next(ctx)
    slot = _Slot()
    token = _slot.set(slot)
    try:
        result = await call_next(ctx)
    finally:
        _slot.reset(token)
    text, structured = slot.text, slot.structured
    # Emptied at once: timers the call scheduled (asyncio copies the context into each) keep the
    # slot until they fire, and must not keep the reply with it.
    slot.text = slot.structured = None
    if text is None or not isinstance(result, dict) or "structuredContent" not in result:
        return result
    shaped = result.get("content")
    if not (isinstance(shaped, list) and len(shaped) == 1 and isinstance(shaped[0], dict) and "text" in shaped[0]):
        return result
    # The SDK's key order is kept: the bytes on the wire are the ones its own passes produced.
    content = [{key: (text if key == "text" else value) for key, value in shaped[0].items()}]
    return {key: (content if key == "content" else structured if key == "structuredContent" else value)
            for key, value in result.items()}


@contextmanager
def reply_building() -> Iterator[None]:
    """Build a reply inside this block: the cyclic garbage collector does not run meanwhile, and
    what exists at the end (the reply) is frozen (never scanned; freed by reference counting
    as usual). The collector is re-enabled however the block ends, unless it was off before."""
    gc.unfreeze()   # the previous reply's survivors (few: replies are freed once written)
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
