"""Serving one stdio connection: our own transport on the event loop, and every request read is
answered before the server exits.

:func:`stdio_streams` gives ``server.run`` its two streams. Lines are read and written on the
event loop's pipe transports (the SDK's ``stdio_server()`` hops to a worker thread to read each
line and twice to write and flush each reply: ~0.4 ms of every call, issue 15), and each message
is serialised once, straight to its line (:func:`~graph_memory.mcp.jsontext.dumps_line`: compact,
ASCII-escaped). A client that closes our stdout ends the session (logged once as
``client_gone``) without a traceback.

When stdin reaches end of file, the SDK's serving loop ends and cancels the requests still being
handled, so a client that writes its requests and closes stdin at once (``printf … |
graph-memory``, a script, a host shutting down after a last write) would lose their replies,
though the writes themselves are committed. So the read side reports end of file only once every
request read has had its reply written (or after :data:`DRAIN_SECONDS`).

A line that is not a JSON-RPC message, which the SDK passes on as an exception and then ignores,
gets the error reply JSON-RPC 2.0 prescribes: -32700 when it is not JSON, -32600 when it is JSON but
not a message, with the line's id when it has a usable one. A client that sent a malformed request
is told so instead of waiting for a reply that never comes. So is a request whose ``id`` is not a
string or integer (true, 1.5, null, an object): the SDK reads it as a notification and would drop
it, so a line the SDK read as a notification but that has an ``"id"`` member gets -32600 with id
null and is not served (:func:`unusable_id_reply`; only such lines are parsed a second time).
Blank lines are skipped. A line refused only for lone surrogate escapes (half an emoji) is read
with U+FFFD in their place and served (:func:`with_lone_surrogates_replaced`,
:mod:`graph_memory.surrogates`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
import sys
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, Self

import anyio
from mcp.shared.message import SessionMessage
from mcp_types import (
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)
from pydantic import ValidationError

from graph_memory.logs import get_logger
from graph_memory.mcp.bounds import refused_line
from graph_memory.mcp.jsontext import dumps_line, dumps_line_parts, dumps_line_utf8, escape_non_ascii
from graph_memory.mcp.messages import is_notification, message_problem, top_level_id, unreadable_json
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
    server does not answer).

    Bookkeeping only, on every request: an event is made only for someone who waits (the end of
    input, a refusal behind ``initialize``), not per request (issue 15: an ``anyio.Event`` costs
    about 1.3 µs to make)."""

    def __init__(self) -> None:
        self._ids: set[int | str] = set()
        self._answered: anyio.Event | None = None
        self._initialize_id: int | str | None = None
        self._initialized: anyio.Event | None = None

    def read(self, item: object) -> None:
        """Note a message read from the client (a request adds its id, a cancellation removes it)."""
        message = getattr(item, "message", None)
        if isinstance(message, JSONRPCRequest) and message.method not in LONG_LIVED:
            self._ids.add(message.id)
            if message.method == "initialize":
                self._initialize_id = message.id
        elif isinstance(message, JSONRPCNotification) and message.method == "notifications/cancelled":
            params = message.params if isinstance(message.params, dict) else {}
            self._done(params.get("requestId"))

    def sent(self, item: object) -> None:
        """Note a message sent to the client (a reply removes its request's id)."""
        message = getattr(item, "message", None)
        if isinstance(message, JSONRPCResponse | JSONRPCError):
            self._done(message.id)

    def _done(self, request_id: object) -> None:
        if isinstance(request_id, int | str) and request_id in self._ids:
            self._ids.discard(request_id)
            if not self._ids and self._answered is not None:
                self._answered.set()
                self._answered = None
            if request_id == self._initialize_id:
                self._initialize_id = None
                if self._initialized is not None:
                    self._initialized.set()
                    self._initialized = None

    def abandon(self) -> None:
        """Forget every request read: their replies can no longer be delivered (the client closed
        our stdout), so the end of input does not wait for them."""
        self._ids.clear()
        self._initialize_id = None
        for event in (self._answered, self._initialized):
            if event is not None:
                event.set()
        self._answered = self._initialized = None

    async def initialize_answered(self) -> None:
        """Return once an ``initialize`` read is answered. The SDK answers it before it reads
        on (its replies keep that order); a refusal of a later line waits for it likewise."""
        if self._initialize_id is None:
            return
        if self._initialized is None:
            self._initialized = anyio.Event()
        await self._initialized.wait()

    def __len__(self) -> int:
        return len(self._ids)

    async def wait(self, seconds: float) -> bool:
        """Wait until every request read is answered; False when ``seconds`` passed first."""
        if not self._ids:
            return True
        if self._answered is None:
            self._answered = anyio.Event()
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
    """A read stream (:class:`LineReadStream`) whose end of input waits for :class:`InFlight` to
    empty, and which answers the lines that are not messages."""

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
                    await self._send_reply(refusal)
                    continue
            if isinstance(item, ValidationError):
                item = with_lone_surrogates_replaced(item)
            if isinstance(item, ValidationError):
                reply = invalid_message_reply(item, line)
                if reply is not None:
                    await self._send_reply(reply)
                continue
            self._in_flight.read(item)
            return item

    async def _send_reply(self, reply: SessionMessage) -> None:
        # The SDK reads one line ahead of the request it serves: without this wait, the refusal of
        # a line after `initialize` could overtake the reply to `initialize`.
        await self._in_flight.initialize_answered()
        with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):  # the client left
            await self._reply(reply)

    async def receive(self) -> Any:
        try:
            return await self.__anext__()
        except StopAsyncIteration:
            raise anyio.EndOfStream from None



class ObservedWriteStream(_StreamWrapper):
    """A write stream (:class:`LineWriteStream`), telling :class:`InFlight` about every reply handed on."""

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
    return SessionMessage(_with_original_id(message, line))


def _with_original_id(message: JSONRPCMessage, line: str) -> JSONRPCMessage:
    """``message`` (read from ``line`` repaired) with the id ``line`` gave it: a lone surrogate in
    the id itself must come back as sent (the reply line is ASCII, so it is written escaped),
    or the client could not match the reply to its request."""
    request_id = getattr(message, "id", None)
    if not isinstance(request_id, str):
        return message
    try:
        sent = json.loads(line).get("id")
    except (ValueError, AttributeError):
        return message
    return message.model_copy(update={"id": sent}) if isinstance(sent, str) and sent != request_id else message


def invalid_message_reply(error: ValidationError, line: str | None = None) -> SessionMessage | None:
    """The JSON-RPC error reply to a line the SDK could not read as a message: -32700 when it is
    not JSON, -32600 when it is JSON but not a message (saying what is wrong with it when
    :func:`~graph_memory.mcp.messages.message_problem` can tell from ``line``), with the line's id
    when it has a usable one (a string or an integer), else id null. None for a blank line, which
    is skipped."""
    faults = error.errors()
    inputs = [fault.get("input") for fault in faults]
    request_id = None
    if any(fault["type"] == "json_invalid" for fault in faults):
        if all(isinstance(value, str) and not value.strip() for value in inputs):
            return None  # an empty or whitespace-only line: nothing was sent
        code, what = PARSE_ERROR, "Parse error: the line is not valid JSON"
        unreadable = next(filter(None, (unreadable_json(fault["msg"]) for fault in faults)), None)
        if line is not None and unreadable is not None:
            # Valid JSON that the SDK's parser does not read (nested deeper than ~200 levels, a
            # number of thousands of digits): a request all the same, so the answer carries its
            # id, or its client would wait for ever (found by QA); a notification gets no answer
            # (JSON-RPC 2.0).
            if is_notification(line):
                log.warning("notification_not_read", reason=unreadable)
                return None
            code, request_id, what = INVALID_REQUEST, top_level_id(line), unreadable
    else:
        code, what = INVALID_REQUEST, "Invalid Request: the line is JSON but not a JSON-RPC 2.0 message"
        problem = _line_problem(line)
        if problem is not None:
            what = f"Invalid Request: {problem}"
    request_id = next((value["id"] for value in inputs if isinstance(value, dict)
                       and type(value.get("id")) in (int, str)), request_id)
    # The kinds of fault only: the line itself may hold the user's data.
    log.warning("invalid_message", code=code, faults=sorted({fault["type"] for fault in faults})[:5])
    return SessionMessage(JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(
        code=code, message=f"{what}; send one JSON-RPC message per line")))


def _line_problem(line: str | None) -> str | None:
    if line is None:
        return None
    try:
        return message_problem(json.loads(line), "line")
    except ValueError:  # read only after its lone surrogates were replaced: the SDK's verdict stands
        return None


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


# -- the transport: stdin and stdout on the event loop ----------------------------------------------

# The longest line read (bytes): the SDK's own reader has no limit either; asyncio needs one.
_LINE_LIMIT = sys.maxsize
# A line longer than this (characters) is written in pieces of this size.
_PIECE = 1 << 20
# At the end of a session: how long stdout may take no byte of what is left before the server
# stops waiting for the client to read it (StdoutLines.aclose).
_STALL_SECONDS = 10.0


def _is_pipe_or_socket(fd: int) -> bool:
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


class StdinLines:
    """The lines of the protocol's input, read on the event loop when it is a pipe or a socket
    (what MCP hosts give), else (a file, a terminal) by a worker thread per line. Lines are
    decoded as UTF-8 with bad bytes replaced, as the SDK's reader does."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._file = os.fdopen(fd, "rb", buffering=0 if _is_pipe_or_socket(fd) else -1)
        self._reader: asyncio.StreamReader | None = None
        self._transport: asyncio.BaseTransport | None = None
        self._ended = False

    async def open(self) -> None:
        """Attach a pipe or socket to the event loop (before the first :meth:`readline`)."""
        if self._reader is None and _is_pipe_or_socket(self._fd):
            loop = asyncio.get_running_loop()
            reader = asyncio.StreamReader(limit=_LINE_LIMIT)
            protocol = asyncio.StreamReaderProtocol(reader)
            self._transport, _ = await loop.connect_read_pipe(lambda: protocol, self._file)
            self._reader = reader

    async def readline(self) -> bytes:
        """The next line with its newline (the last may lack it); ``b""`` at end of input."""
        if self._ended:
            return b""
        if self._reader is not None:
            line = await self._reader.readline()
        else:
            line = await anyio.to_thread.run_sync(self._file.readline, abandon_on_cancel=True)
        # Remembered: a terminal's end of input (Ctrl-D) is read once; the next read would block.
        self._ended = not line
        return line

    @property
    def on_loop(self) -> bool:
        """Whether lines are read on the event loop (a pipe or a socket), where :meth:`end` also
        ends a pending read; a worker thread reading a terminal or a file cannot be woken."""
        return self._reader is not None

    def end(self) -> None:
        """Make the pending and every later :meth:`readline` return end of input."""
        self._ended = True
        if self._reader is not None:
            self._reader.feed_eof()

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()
        else:
            self._file.close()


class StdoutLines:
    """The protocol's output: whole lines written on the event loop when it is a pipe or a socket
    (back-pressure: a send waits while the client is not reading), else written directly."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()

    async def open(self) -> None:
        """Attach a pipe or socket to the event loop (before the first :meth:`write`)."""
        if self._writer is None and _is_pipe_or_socket(self._fd):
            loop = asyncio.get_running_loop()
            transport, protocol = await loop.connect_write_pipe(
                asyncio.streams.FlowControlMixin, os.fdopen(self._fd, "wb", buffering=0))
            self._writer = asyncio.StreamWriter(transport, protocol, None, loop)

    async def write(self, line: str | bytes | list[str]) -> None:
        """Write ``line`` (an ASCII string, UTF-8 bytes, or ASCII parts to write one after the
        other) and a newline, whole: concurrent writers never interleave inside a line. A long
        line goes out in pieces, each encoded when the pipe has room for it, so a huge reply is
        never held a second time as bytes (nor a third in the pipe's buffer).

        Raises:
            BrokenPipeError: the client closed its end.
        """
        parts: Sequence[str | bytes] = line if isinstance(line, list) else [line]
        async with self._lock:   # an asyncio lock: taking it free does not yield to the loop
            if len(parts) == 1 and len(parts[0]) < _PIECE:
                one = parts[0]
                await self._write_piece(one + b"\n" if isinstance(one, bytes) else (one + "\n").encode("ascii"))
                return
            for part in parts:
                for start in range(0, len(part), _PIECE):
                    piece = part[start:start + _PIECE]
                    await self._write_piece(piece if isinstance(piece, bytes) else piece.encode("ascii"))
            await self._write_piece(b"\n")

    async def _write_piece(self, data: bytes) -> None:
        if self._writer is None:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
            return
        if self._writer.transport.is_closing():
            raise BrokenPipeError("stdout was closed")
        self._writer.write(data)
        try:
            await self._writer.drain()
        except ConnectionResetError as exc:   # asyncio's name for a pipe the reader closed
            raise BrokenPipeError(str(exc)) from exc

    async def aclose(self) -> None:
        """Close stdout once every byte written has left the process. ``drain()`` returns while
        up to the transport's low-water mark is still buffered, and the event loop ends right after
        the last reply: a client that closed stdin after its requests and reads slowly lost the
        end of its last reply (issue 15). So this waits until the buffer is empty, for as long as
        the client keeps reading (:data:`_STALL_SECONDS` without progress: it stopped, give up)."""
        writer = self._writer
        if writer is None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            return
        transport = writer.transport
        with anyio.CancelScope(shield=True):   # also when the serving task is being cancelled
            if not transport.is_closing():   # closed: the client closed our stdout
                transport.set_write_buffer_limits(high=0)   # drain() now returns once it is empty
            while not transport.is_closing() and (left := transport.get_write_buffer_size()):
                try:
                    await asyncio.wait_for(writer.drain(), _STALL_SECONDS)
                except TimeoutError:
                    if transport.get_write_buffer_size() >= left:
                        log.warning("reply_not_delivered", bytes=left,
                                    reason=f"the client read nothing for {_STALL_SECONDS:.0f} s at the end")
                        break
                except (ConnectionResetError, BrokenPipeError):
                    break   # the client closed our stdout: nothing more can be delivered
        writer.close()


def read_message(line: str) -> SessionMessage | Exception:
    """The message of one line as the SDK's stdio reader reads it
    (``jsonrpc_message_adapter.validate_json``), or the exception that refused it.

    A plain request (most lines) is validated as a ``JSONRPCRequest`` directly: the same result
    in less than half the time of the union of the four kinds of message (~1.8 µs against
    ~4.4 µs, issue 15). Every other line, and a request that fails that check, is read by the
    union, so what is returned, and every refusal, is the SDK's own."""
    # A line with a "result" or "error" member, or a key spelled with escapes, could read as a
    # reply or an error instead: only the union decides those.
    if '"result"' not in line and '"error"' not in line and "\\u" not in line:
        try:
            return SessionMessage(JSONRPCRequest.model_validate_json(line, by_name=False))
        except ValidationError:
            pass   # a notification, an unusable id, not a message: the union says which
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_json(line, by_name=False))
    except Exception as exc:
        return exc


class LineReadStream:
    """The read stream ``server.run`` takes: one item per line of stdin, as the SDK's reader
    yields them (a :class:`SessionMessage`, or the exception of a line that is not a message),
    each line kept in :attr:`lines` for :class:`DrainingReadStream`. Blank lines are skipped."""

    # No per-message sender context (the SDK looks for one on every item it reads).
    last_context = None

    def __init__(self, stdin: StdinLines) -> None:
        self._stdin = stdin
        self.lines: deque[str] = deque()

    @property
    def can_end(self) -> bool:
        """Whether :meth:`aclose` ends a pending read at once (see :attr:`StdinLines.on_loop`)."""
        return self._stdin.on_loop

    def __aiter__(self) -> LineReadStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        while True:
            raw = await self._stdin.readline()
            if not raw:
                raise StopAsyncIteration
            line = raw.decode("utf-8", errors="replace")
            if line.strip():
                break
        self.lines.append(line)
        return read_message(line)

    async def receive(self) -> SessionMessage | Exception:
        try:
            return await self.__anext__()
        except StopAsyncIteration:
            raise anyio.EndOfStream from None

    async def aclose(self) -> None:
        self._stdin.end()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


class LineWriteStream:
    """The write stream ``server.run`` takes: each message serialised once, straight onto stdout
    as one ASCII JSON line (:func:`~graph_memory.mcp.jsontext.dumps_line`), with no worker thread
    and no queue in between. A client that closed our stdout ends the session: logged once as
    ``client_gone``, stdin is read no further, and every later send fails as a closed stream
    (the SDK then drops the reply, as for any closed connection)."""

    def __init__(self, stdout: StdoutLines, on_gone: Callable[[], None], max_line_bytes: int = 0) -> None:
        self._stdout = stdout
        self._on_gone = on_gone
        self._gone = False
        self._bound = max_line_bytes

    async def send(self, item: SessionMessage) -> None:
        if self._gone:
            raise anyio.BrokenResourceError
        message = item.message
        if isinstance(message, JSONRPCResponse):
            # The SDK writes `model_dump_json(by_alias=True, exclude_unset=True)`: every field of
            # a response is required, so that is exactly this envelope.
            response = {"jsonrpc": message.jsonrpc, "id": message.id, "result": message.result}
            parts = dumps_line_parts(response)
            size = sum(map(len, parts)) + 1   # an ASCII line: characters are bytes
            line: str | bytes | list[str] = parts
            if self._bound and size >= self._bound:   # the line must be shorter than the bound
                line = self._within_bound(response, size)
        else:
            line = escape_non_ascii(message.model_dump_json(by_alias=True, exclude_unset=True))
        try:
            await self._stdout.write(line)
        except BrokenPipeError:
            if not self._gone:
                self._gone = True
                log.info("client_gone", reason="stdout closed by the client")
                self._on_gone()
            raise anyio.BrokenResourceError from None

    def _within_bound(self, response: dict[str, Any], ascii_size: int) -> str | bytes:
        """The line for ``response`` when its ASCII line (``ascii_size`` bytes with the newline) is
        not shorter than the bound: the same JSON in UTF-8 when that is — escaping is there for the
        Python client's speed and must never cost a reply that the SDK's own writer (and the reference
        server) would deliver — else the error saying how to ask for less."""
        wide = dumps_line_utf8(response)
        size = ascii_size if wide is None else len(wide) + 1
        if wide is not None and size < self._bound:
            log.info("reply_sent_in_utf8", bytes=size, ascii_bytes=ascii_size, bound=self._bound)
            return wide
        log.warning("reply_too_large", bytes=size, bound=self._bound)
        return dumps_line(refused_line(response["id"], response["result"], size, self._bound))

    async def aclose(self) -> None:
        pass

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()


@contextlib.asynccontextmanager
async def stdio_streams(max_line_bytes: int = 0) -> AsyncIterator[tuple[DrainingReadStream, ObservedWriteStream]]:
    """The pair of streams to hand to ``server.run`` for one stdio connection (see the module
    docstring for what they answer and how they end). A reply whose line (with its newline) is
    not shorter than ``max_line_bytes`` (``MEMORY_MAX_REPLY_BYTES``; 0: no bound) is replaced by an error
    saying how to ask for less (:func:`graph_memory.mcp.bounds.refused_line`).

    While serving, fd 0 points at the null device and fd 1 at stderr (as the SDK's own
    ``stdio_server()`` does), so stray reads and prints of a library never touch the protocol;
    the wire is served from private duplicates and both descriptors are restored on exit.
    """
    sys.stdout.flush()
    wire_in, wire_out = os.dup(0), os.dup(1)
    saved_in, saved_out = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(devnull, 0)
        os.dup2(2, 1)
    finally:
        os.close(devnull)
    stdin, stdout = StdinLines(wire_in), StdoutLines(wire_out)
    in_flight = InFlight()

    def gone() -> None:
        in_flight.abandon()
        stdin.end()

    try:
        await stdin.open()
        await stdout.open()
        lines = LineReadStream(stdin)
        writer = ObservedWriteStream(LineWriteStream(stdout, gone, max_line_bytes), in_flight)
        yield DrainingReadStream(lines, in_flight, writer.send, lines=lines.lines), writer
    finally:
        stdin.close()
        await stdout.aclose()
        for saved, fd in ((saved_in, 0), (saved_out, 1)):
            with contextlib.suppress(OSError):
                os.dup2(saved, fd)
            os.close(saved)
