"""Serving one stdio connection: every request read is answered before the server exits.

When stdin reaches end of file, the SDK's serving loop ends and cancels the requests still being
handled, so a client that writes its requests and closes stdin at once (``printf … |
graph-memory``, a script, a host shutting down after a last write) loses their replies, though
the writes themselves are committed. Here the SDK's streams are wrapped: the read side reports end
of file only once every request read has had its reply handed to the SDK's stdout writer (or
after :data:`DRAIN_SECONDS`). Nothing is parsed twice: the wrappers look at the SDK's own
messages.

A line that is not a JSON-RPC message, which the SDK passes on as an exception and then ignores,
gets the error reply JSON-RPC 2.0 prescribes: -32700 when it is not JSON, -32600 when it is JSON but
not a message, with the line's id when it has a usable one. A client that sent a malformed request
is told so instead of waiting for a reply that never comes. So is a request whose ``id`` is not a
string or integer (true, 1.5, null, an object): the SDK reads it as a notification and would drop
it, so a line the SDK read as a notification but that has an ``"id"`` member gets -32600 with id
null and is not served (:func:`unusable_id_reply`; only such lines are parsed a second time, which
needs the raw lines, see :func:`tapped_stdin`). Blank lines are skipped. A line refused
only for lone surrogate escapes (half an emoji) is read with U+FFFD in their place and served
(:func:`with_lone_surrogates_replaced`, :mod:`graph_memory.surrogates`).
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any, Self

import anyio
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from graph_memory.logs import get_logger
from graph_memory.surrogates import log_replaced, repair_json_text

# How long, at end of input, the server waits for the replies of requests still in flight.
DRAIN_SECONDS = 30.0
log = get_logger("graph_memory.stdio")


# Requests that are not answered when their work is done: a 2026-07-28 ``subscriptions/listen``
# stream stays open until the client cancels it or goes away.
LONG_LIVED = frozenset({"subscriptions/listen"})


class InFlight:
    """The ids of requests read but not answered yet: every request, except the long-lived ones
    (:data:`LONG_LIVED`) and those the client cancelled (``notifications/cancelled``, which the
    server does not answer)."""

    def __init__(self) -> None:
        self._ids: set[Any] = set()
        self._answered = anyio.Event()
        self._answered.set()

    def read(self, item: Any) -> None:
        """Note a message read from the client (a request adds its id, a cancellation removes it)."""
        message = getattr(item, "message", None)
        if isinstance(message, JSONRPCRequest) and message.method not in LONG_LIVED:
            if not self._ids:
                self._answered = anyio.Event()
            self._ids.add(message.id)
        elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
            params = message.params if isinstance(message.params, dict) else {}
            self._done(params.get("requestId"))

    def sent(self, item: Any) -> None:
        """Note a message sent to the client (a reply removes its request's id)."""
        message = getattr(item, "message", None)
        if isinstance(message, JSONRPCResponse | JSONRPCError):
            self._done(message.id)

    def _done(self, request_id: Any) -> None:
        if isinstance(request_id, int | str) and request_id in self._ids:
            self._ids.discard(request_id)
            if not self._ids:
                self._answered.set()

    def __len__(self) -> int:
        return len(self._ids)

    async def wait(self, seconds: float) -> bool:
        """Wait until every request read is answered; False when ``seconds`` passed first."""
        with anyio.move_on_after(seconds):
            await self._answered.wait()
            return True
        return False


class _StreamWrapper:
    """Delegates everything but what a subclass overrides to the wrapped SDK stream ``_inner``."""

    _inner: Any

    async def aclose(self) -> None:
        await self._inner.aclose()

    def close(self) -> None:
        self._inner.close()

    async def __aenter__(self) -> Self:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> Any:
        return await self._inner.__aexit__(*exc_info)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class DrainingReadStream(_StreamWrapper):
    """The SDK's read stream, whose end of input waits for :class:`InFlight` to empty."""

    def __init__(self, inner: Any, in_flight: InFlight, reply: Callable[[Any], Awaitable[None]],
                 drain_seconds: float = DRAIN_SECONDS, lines: deque[str] | None = None) -> None:
        self._inner = inner
        self._in_flight = in_flight
        self._reply = reply
        self._drain_seconds = drain_seconds
        self._lines = lines

    @property
    def last_context(self) -> Any:
        """The sender context of the last message (the SDK's context-carrying streams have one)."""
        return getattr(self._inner, "last_context", None)

    def __aiter__(self) -> DrainingReadStream:
        return self

    async def __anext__(self) -> Any:
        while True:
            try:
                item = await self._inner.__anext__()
            except StopAsyncIteration:
                if len(self._in_flight) and not await self._in_flight.wait(self._drain_seconds):
                    log.warning("replies_dropped_at_end_of_input", requests=len(self._in_flight))
                raise
            # The SDK reads one item (a message or an error) per line, in order.
            line = self._lines.popleft() if self._lines else None
            if line is not None and isinstance(getattr(item, "message", None), JSONRPCNotification):
                refusal = unusable_id_reply(item.message, line)
                if refusal is not None:
                    await self._reply(refusal)
                    continue
            if isinstance(item, ValidationError):
                item = with_lone_surrogates_replaced(item)
            if isinstance(item, ValidationError):
                reply = invalid_message_reply(item)
                if reply is not None:
                    await self._reply(reply)
                continue
            self._in_flight.read(item)
            return item

    async def receive(self) -> Any:
        try:
            return await self.__anext__()
        except StopAsyncIteration:
            raise anyio.EndOfStream from None



class ObservedWriteStream(_StreamWrapper):
    """The SDK's write stream, telling :class:`InFlight` about every reply handed on."""

    def __init__(self, inner: Any, in_flight: InFlight) -> None:
        self._inner = inner
        self._in_flight = in_flight

    async def send(self, item: Any) -> None:
        await self._inner.send(item)
        self._in_flight.sent(item)



def with_lone_surrogates_replaced(error: ValidationError) -> SessionMessage | ValidationError:
    """The message of a line the SDK refused only because it holds lone surrogate escapes
    (``"hi \\ud83d"``, a client that cut an emoji in half), read with each replaced by U+FFFD
    and logged (see :mod:`graph_memory.surrogates`); else the error to answer: the SDK's own, or
    the one of the repaired line when that is still not a message (a -32600 with its id).

    Only lines the SDK already refused come here, so well-formed lines cost nothing more."""
    line = next((fault["input"] for fault in error.errors()
                 if fault["type"] == "json_invalid" and isinstance(fault.get("input"), str)), None)
    if line is None:
        return error
    repaired, replaced = repair_json_text(line)
    if not replaced:
        return error
    try:
        message = jsonrpc_message_adapter.validate_json(repaired, by_name=False)
    except ValidationError as still_invalid:
        return still_invalid
    log_replaced("stdio", line, replaced)
    return SessionMessage(message)


def invalid_message_reply(error: ValidationError) -> SessionMessage | None:
    """The JSON-RPC error reply to a line the SDK could not read as a message: -32700 when it is
    not JSON, -32600 when it is JSON but not a message, with the line's id when it has a usable
    one (a string or an integer), else id null. None for a blank line, which is skipped."""
    faults = error.errors()
    inputs = [fault.get("input") for fault in faults]
    if any(fault["type"] == "json_invalid" for fault in faults):
        if all(isinstance(value, str) and not value.strip() for value in inputs):
            return None  # an empty or whitespace-only line: nothing was sent
        code, what = PARSE_ERROR, "Parse error: the line is not valid JSON"
    else:
        code, what = INVALID_REQUEST, "Invalid Request: the line is JSON but not a JSON-RPC 2.0 message"
    request_id = next((value["id"] for value in inputs if isinstance(value, dict)
                       and type(value.get("id")) in (int, str)), None)
    # The kinds of fault only: the line itself may hold the user's data.
    log.warning("invalid_message", code=code, faults=sorted({fault["type"] for fault in faults})[:5])
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(
        code=code, message=f"{what}; send one JSON-RPC message per line")))


def unusable_id_reply(message: JSONRPCNotification, line: str) -> SessionMessage | None:
    """The -32600 reply (id null) to ``line`` when the SDK read it as the notification ``message``
    although it has an ``id`` member: a request whose id is not a string or integer (JSON-RPC 2.0:
    an Invalid Request). None for a true notification. Parses ``line`` only when it contains
    ``"id"``; notifications are few and short."""
    if '"id"' not in line:
        return None
    try:
        raw = json.loads(line)
    except ValueError:  # e.g. read only after its lone surrogates were replaced: not this case
        return None
    if not isinstance(raw, dict) or "id" not in raw or raw.get("method") != message.method:
        return None
    # The kind of id only: the line itself may hold the user's data.
    log.warning("invalid_message", code=INVALID_REQUEST, faults=[f"unusable_id_{type(raw['id']).__name__}"])
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(
        code=INVALID_REQUEST, message=f"Invalid Request: {UNUSABLE_ID}; send one JSON-RPC message per line")))


UNUSABLE_ID = ("the request's id must be a string or an integer (true, a number with a fraction, null, an "
               "object or an array cannot be answered); leave id out only for a notification")


class LineTap:
    """The SDK's stdin as the async iterator of lines it reads, keeping each line in :attr:`lines`
    until :class:`DrainingReadStream` takes it with the SDK's item for that line."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.lines: deque[str] = deque()

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        async for line in self._inner:
            self.lines.append(line)
            yield line


@contextlib.contextmanager
def tapped_stdin() -> Iterator[LineTap | None]:
    """Stdin for ``stdio_server(stdin=…)``, claimed as the SDK claims it (fd 0 points at the null
    device while serving, so nothing else reads the protocol's input) and tapped
    (:class:`LineTap`). None when this SDK has no such claim (then serve plain ``stdio_server()``;
    requests with an unusable id then go unanswered, as before)."""
    try:
        from mcp.server.stdio import _claim_fd, _open_stdin_diversion, _UnownedTextWrapper
    except ImportError:  # pragma: no cover - a later SDK: see the docstring
        yield None
        return
    import anyio

    buffer, release = _claim_fd(0, sys.stdin, "rb", _open_stdin_diversion)
    try:
        yield LineTap(anyio.wrap_file(_UnownedTextWrapper(buffer, encoding="utf-8", errors="replace")))
    finally:
        if release is not None:
            release()


def answering_every_request(read_stream: Any, write_stream: Any, stdin: LineTap | None = None
                            ) -> tuple[DrainingReadStream, ObservedWriteStream]:
    """The pair of ``stdio_server()`` streams to hand to ``server.run``, wrapped as above;
    ``stdin``: the tapped stdin the SDK reads, so requests with an unusable id are answered."""
    in_flight = InFlight()
    writer = ObservedWriteStream(write_stream, in_flight)
    lines = stdin.lines if stdin is not None else None
    return DrainingReadStream(read_stream, in_flight, writer.send, lines=lines), writer
