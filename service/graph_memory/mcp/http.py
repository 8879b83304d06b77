"""Streamable HTTP transport: MCP at ``/mcp``, probes at ``/healthz`` and ``/readyz``.

The app is the SDK's ``Server.streamable_http_app`` (stateful sessions, so handshake-era
``resources/subscribe`` notifications reach their sessions; 2026-07-28 requests are sessionless
either way) with two routes of ours added, wrapped in small pure-ASGI layers (no
``BaseHTTPMiddleware``, which would buffer the SSE streams)::

    AccessLog ─▶ BearerAuth ─▶ RequestLimits ─▶ Starlette ─┬─ /mcp     SDK transport: Host (421) and
                                                           │           Origin (403) checks, sessions,
                                                           │           then MCP
                                                           ├─ /healthz 200 "ok" while the process serves
                                                           └─ /readyz  200 when the database answers and
                                                                       every migration is applied, else
                                                                       503 + reason

Each request's answer is one JSON body (the SDK's JSON-response mode), not a server-sent event:
the official Python client refuses an event over 1 MiB. Server-sent events remain for the
handshake-era sessions' GET streams (resource notifications) and ``subscriptions/listen``.

RequestLimits also rewrites each lone surrogate escape in a ``/mcp`` body (half an emoji) as
``\\ufffd`` before the SDK parses it (:mod:`graph_memory.surrogates`), as the stdio transport does.

* DNS-rebinding protection is always on, also when bound to ``0.0.0.0``: the SDK checks ``Host``
  and ``Origin`` of ``/mcp`` requests against ``MEMORY_ALLOWED_HOSTS`` / ``MEMORY_ALLOWED_ORIGINS``
  (localhost forms by default). The probe routes are plain Starlette routes, which the SDK does not
  Host-check, so kubelet probes addressed to the pod IP pass.
* ``MEMORY_HTTP_TOKEN`` set: every path except the probes needs ``Authorization: Bearer <token>``
  (compared in constant time); otherwise 401 with ``WWW-Authenticate: Bearer``.
* :class:`RequestLimits` answers the HTTP limits as JSON-RPC errors that name the limit and the
  setting that raises it: a ``/mcp`` body over ``MEMORY_HTTP_MAX_BODY_BYTES`` gets 413 (refused
  while it streams in, never read whole), a new session past ``MEMORY_HTTP_MAX_SESSIONS`` gets 503.
  The SDK closes a handshake-era session after ``MEMORY_HTTP_SESSION_IDLE_SECONDS`` without a
  request in flight (an open GET stream counts as one); its id then answers 404, so the client
  initializes a new session. Together they bound what never-closed sessions can hold.
* uvicorn runs here with ``log_config=None`` and its access log off; :class:`AccessLog` writes one
  structlog line per request (method, path without query, status, duration) to stderr. Nothing is
  written to stdout.
* SIGTERM/SIGINT, in this order: stop accepting connections; end every 2026-07-28
  ``subscriptions/listen`` stream gracefully (the client gets the stream's final result); wait
  until no other request is in flight (at most :data:`GRACEFUL_SHUTDOWN_SECONDS`), so calls being
  served finish and their answers reach the client; then end the handshake-era SSE streams (the
  sessions' GET streams; sse-starlette's own "end every stream on the signal" hook is switched off
  while we serve, as it would also cut the SSE answer of a call still in flight); then uvicorn's
  own shutdown (bounded by :data:`STREAM_CLOSE_SECONDS`) and the lifespan exit, which ends the
  SDK's sessions. :func:`serve_http` then returns normally (exit status 0) and the caller closes
  the backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import re
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final

import uvicorn
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from graph_memory.errors import MigrationError, ServeError
from graph_memory.logs import get_logger
from graph_memory.mcp.messages import (
    MAX_NESTING,
    TOO_DEEP,
    is_notification,
    message_problem,
    top_level_id,
    unreadable_json,
)
from graph_memory.surrogates import log_replaced, repair_json_bytes
from graph_memory.wording import plural

if TYPE_CHECKING:
    from graph_memory.db.backend import Backend
    from graph_memory.mcp.server import SdkServer, ServerHandle
    from graph_memory.settings import Settings

MCP_PATH: Final = "/mcp"
HEALTH_PATH: Final = "/healthz"
READY_PATH: Final = "/readyz"
PUBLIC_PATHS: Final = frozenset({HEALTH_PATH, READY_PATH})
GRACEFUL_SHUTDOWN_SECONDS: Final = 10
"""How long shutdown waits for in-flight calls before ending the remaining streams."""
STREAM_CLOSE_SECONDS: Final = 5
"""How long uvicorn then waits for connections to close before cancelling their tasks."""

log = get_logger("graph_memory.http")


# -- probes ---------------------------------------------------------------------------------------


def readiness(backend: Backend) -> tuple[bool, str, int | None]:
    """Whether the backend can serve: the database answers and no migration is pending.

    Runs on the event-loop thread, like every tool call, so it never shares the connection with
    another thread. The reason is short and names no file (the probe is unauthenticated); the full
    error goes to the log.

    Returns:
        ``(ready, reason, schema_version)``.
    """
    try:
        state = backend.schema_status()
    except MigrationError as exc:
        log.warning("not_ready", reason=str(exc))
        return False, "the database's migration history does not match this graph-memory version", None
    except Exception as exc:  # a closed backend, or anything unexpected: not ready
        log.warning("not_ready", reason=repr(exc))
        return False, "database unavailable", None
    if state.pending:
        return False, f"{plural(len(state.pending), 'migration')} pending", state.version
    return True, "ready", state.version


def _probe_routes(backend: Backend) -> list[Route]:
    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    async def readyz(request: Request) -> Response:
        ready, reason, version = readiness(backend)
        if ready:
            return JSONResponse({"status": "ready", "schemaVersion": version})
        return JSONResponse({"status": "unavailable", "reason": reason}, status_code=503)

    return [Route(HEALTH_PATH, healthz, methods=["GET"]), Route(READY_PATH, readyz, methods=["GET"])]


# -- ASGI layers ----------------------------------------------------------------------------------


class BearerAuth:
    """Require ``Authorization: Bearer <token>`` on every HTTP request outside ``public_paths``.

    The presented token and the expected one are hashed first and the digests compared with
    :func:`hmac.compare_digest`, so neither the content nor the length of the token leaks through
    timing. A refused request gets 401 with ``WWW-Authenticate: Bearer`` and is never passed on.
    """

    def __init__(self, app: ASGIApp, token: str, public_paths: frozenset[str] = PUBLIC_PATHS) -> None:
        self.app = app
        self._expected = hashlib.sha256(token.encode("utf-8")).digest()
        self._public = public_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan" or scope.get("path") in self._public:
            await self.app(scope, receive, send)
            return
        presented = _bearer_token(scope)
        if presented is not None and hmac.compare_digest(hashlib.sha256(presented).digest(), self._expected):
            await self.app(scope, receive, send)
            return
        await _unauthorized(send, invalid=presented is not None)


def _bearer_token(scope: Scope) -> bytes | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, token = value.partition(b" ")
            if scheme.lower() == b"bearer" and token.strip():
                return bytes(token.strip())
            return None
    return None


async def _unauthorized(send: Send, *, invalid: bool) -> None:
    if invalid:
        challenge = b'Bearer realm="graph-memory", error="invalid_token"'
        body = {"error": "invalid_token", "error_description": "The bearer token is not valid."}
    else:
        challenge = b'Bearer realm="graph-memory"'
        body = {"error": "unauthorized", "error_description": "Send 'Authorization: Bearer <token>'."}
    payload = json.dumps(body).encode("utf-8")
    await send({"type": "http.response.start", "status": 401, "headers": [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode("ascii")),
        (b"www-authenticate", challenge),
    ]})
    await send({"type": "http.response.body", "body": payload})


class AccessLog:
    """One structlog line per HTTP request when it ends: method, path (no query string, no
    headers, so no token), status, duration in ms, client address. Successful probe requests log
    at debug, so kubelet's polling does not drown the log. A streamed response the app left
    unfinished (sse-starlette's stream end at shutdown) gets its terminating empty chunk here.

    Also counts the open standing SSE streams of handshake-era sessions (``GET /mcp``) in
    :attr:`streams` and every other request in flight in :attr:`in_flight`: shutdown waits for
    ``in_flight`` to reach zero before it ends the streams.
    """

    def __init__(self, app: ASGIApp, public_paths: frozenset[str] = PUBLIC_PATHS) -> None:
        self.app = app
        self._public = public_paths
        self.in_flight = 0
        self.streams = 0
        # What the app holds open besides the caller's store (the view's connection): closed after serving.
        self.closers: list[Callable[[], None]] = []

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        stream = scope.get("method") == "GET" and scope.get("path") == MCP_PATH
        if stream:
            self.streams += 1
        else:
            self.in_flight += 1
        try:
            await self._logged(scope, receive, send)
        finally:
            if stream:
                self.streams -= 1
            else:
                self.in_flight -= 1

    async def _logged(self, scope: Scope, receive: Receive, send: Send) -> None:
        started = time.perf_counter()
        status: int | None = None
        complete = False

        async def send_status(message: Message) -> None:
            nonlocal status, complete
            if message["type"] == "http.response.start":
                status = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                complete = True
            await send(message)

        try:
            await self.app(scope, receive, send_status)
            if status is not None and not complete:
                # An SSE stream ended at shutdown without its final chunk: end it properly.
                with contextlib.suppress(Exception):
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
        except BaseException:
            if status is None:
                status = 500
            raise
        finally:
            client = scope.get("client")
            fields = {
                "method": scope.get("method"),
                "path": scope.get("path"),
                "status": status,
                "duration_ms": round((time.perf_counter() - started) * 1000, 1),
                "client": client[0] if client else None,
            }
            if status == 200 and scope.get("path") in self._public:
                log.debug("http_request", **fields)
            else:
                log.info("http_request", **fields)


# -- request limits -------------------------------------------------------------------------------

BODY_LIMIT_SETTING: Final = "MEMORY_HTTP_MAX_BODY_BYTES"
SESSIONS_SETTING: Final = "MEMORY_HTTP_MAX_SESSIONS"
SESSION_IDLE_SETTING: Final = "MEMORY_HTTP_SESSION_IDLE_SECONDS"
JSONRPC_INVALID_REQUEST: Final = -32600
JSONRPC_SERVER_BUSY: Final = -32000
"""In JSON-RPC's range for implementation-defined server errors: no room for another session."""
ID_SCAN_BYTES: Final = 64 * 1024
"""How much of the start of a refused body is searched for the request's ``id``."""
_SESSION_ID_HEADER: Final = b"mcp-session-id"


class RequestLimits:
    """The HTTP limits of ``POST /mcp``, each refused with a JSON-RPC error a client can show.

    * **Body size**: a body over ``max_body_bytes`` gets HTTP 413 and error -32600 naming the limit
      and :data:`BODY_LIMIT_SETTING`. A declared ``Content-Length`` over the limit is refused after
      at most the body's first chunk has been read (none when the client waits for
      ``100 Continue``); a body without one (chunked) is counted as it streams in and refused as
      soon as the count passes the limit, so no more than the limit plus one chunk is ever held.
      Nothing of a refused request reaches the SDK, so nothing is done (uvicorn reads and discards
      the rest of the body, so the client still reads the answer). A body within the limit is
      passed on whole, as one message.
    * **Open sessions**: past ``max_sessions`` the SDK refuses a new handshake-era session with a
      bare 503; that answer is replaced by HTTP 503 and error -32000 naming the limit,
      :data:`SESSIONS_SETTING` and the idle time after which sessions close by themselves.

    * **Lone surrogates**: a body within the limit has each lone surrogate escape (half an emoji a
      client cut) rewritten as ``\\ufffd`` (:func:`~graph_memory.surrogates.repair_json_bytes`,
      one log line), as stdio does; the body keeps its length, so ``Content-Length`` stays true.
    * **Unusable id**: a body whose message has an ``id`` that is not a string or integer gets
      HTTP 400 and error -32600 with id null (:func:`unusable_id_type`), as the transport spec
      says for a message the server cannot accept; the SDK would read it as a notification and
      answer 202 with nothing, so the client would wait for its timeout.

    * **Not a JSON-RPC message**: the SDK answers a JSON body that is no JSON-RPC 2.0 message
      (an array, a number, no ``method``, ``"jsonrpc": "1.0"``…) with HTTP 400 and error -32602
      carrying pydantic's dump of eleven union branches; that answer is replaced by error -32600
      (JSON-RPC's Invalid Request) saying what is wrong and what a message looks like
      (:func:`invalid_message_problem`). Only the SDK's 400 answers are read; others pass as sent.

    The error's ``id`` is the request's when the start of its body names it (``{"jsonrpc": "2.0",
    "id": 7, …``, see :func:`request_id_of`), else null. Other paths and methods pass untouched.
    """

    def __init__(self, app: ASGIApp, *, max_body_bytes: int, max_sessions: int, session_idle_seconds: float,
                 path: str = MCP_PATH) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.max_sessions = max_sessions
        self._path = path
        self._too_large = (
            f"Request body too large: this server accepts at most {_bytes_text(max_body_bytes)} per "
            f"request, set by {BODY_LIMIT_SETTING}. The request was not processed. Send less in one "
            f"call (for example, split a large batch into several calls), or raise {BODY_LIMIT_SETTING} "
            f"on the server."
        )
        self._too_many = (
            f"Too many open sessions: this server keeps at most {max_sessions} HTTP sessions open at "
            f"once, set by {SESSIONS_SETTING}. A session closes when its client ends it, or after "
            f"{session_idle_seconds:g} s without a request ({SESSION_IDLE_SETTING}). Try again later, "
            f"or raise {SESSIONS_SETTING} on the server."
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST" or scope.get("path") != self._path:
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers", ()))
        declared = _content_length(headers.get(b"content-length"))
        over = declared is not None and declared > self.max_body_bytes
        waits_for_continue = headers.get(b"expect", b"").lower() == b"100-continue"
        body = bytearray()
        seen_body = False
        more_body = True
        trailing: Message | None = None  # a disconnect that arrived instead of the body's end
        while more_body and not (over and (body or waits_for_continue)):
            message = await receive()
            if message["type"] != "http.request":
                trailing = message
                break
            seen_body = True
            body += message.get("body", b"")
            more_body = message.get("more_body", False)
            if len(body) > self.max_body_bytes:
                over = True
                break
        if over:
            log.warning("http_body_too_large", limit_bytes=self.max_body_bytes, content_length=declared,
                        setting=BODY_LIMIT_SETTING)
            await _jsonrpc_error(send, 413, JSONRPC_INVALID_REQUEST, self._too_large, request_id_of(body),
                                 {"limitBytes": self.max_body_bytes, "setting": BODY_LIMIT_SETTING})
            return
        original = bytes(body)
        data, replaced = repair_json_bytes(original)
        if replaced:
            log_replaced("http", original, replaced)
        id_type = unusable_id_type(data, request_id_of(data))
        if id_type is not None:
            log.warning("invalid_message", code=JSONRPC_INVALID_REQUEST, faults=[f"unusable_id_{id_type}"])
            await _jsonrpc_error(send, 400, JSONRPC_INVALID_REQUEST, UNUSABLE_ID_MESSAGE, None, {"idType": id_type})
            return
        replay: list[Message] = []
        if seen_body:
            replay.append({"type": "http.request", "body": data, "more_body": more_body})
        if trailing is not None:
            replay.append(trailing)

        async def replayed() -> Message:
            return replay.pop(0) if replay else await receive()

        send = _explain_invalid_message(send, data)
        if _SESSION_ID_HEADER not in headers:  # a request that may open a session
            send = self._explain_session_refusal(send, data)
        await self.app(scope, replayed, send)

    def _explain_session_refusal(self, send: Send, body: bytes) -> Send:
        """``send``, with the SDK's bare 503 for a request without a session id (the only 503 it
        gives there: no room for a new session) replaced by the explained one."""
        refused = False

        async def explained(message: Message) -> None:
            nonlocal refused
            if message["type"] == "http.response.start" and message["status"] == 503:
                refused = True
                return
            if not refused:
                await send(message)
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                log.warning("http_sessions_full", max_sessions=self.max_sessions, setting=SESSIONS_SETTING)
                await _jsonrpc_error(send, 503, JSONRPC_SERVER_BUSY, self._too_many, request_id_of(body),
                                     {"maxSessions": self.max_sessions, "setting": SESSIONS_SETTING})

        return explained


def _explain_invalid_message(send: Send, body: bytes) -> Send:
    """``send``, with the SDK's HTTP 400 "Validation error" answer to a body that is not a JSON-RPC
    message replaced by an explained -32600 (see :class:`RequestLimits`); any other answer passes."""
    start: Message | None = None
    held = bytearray()

    async def explained(message: Message) -> None:
        nonlocal start
        if message["type"] == "http.response.start" and message["status"] == 400:
            start = message
            return
        if start is None:
            await send(message)
            return
        if message["type"] != "http.response.body":
            return
        held.extend(message.get("body", b""))
        if message.get("more_body", False):
            return
        error = _answer_error(bytes(held))
        unreadable = unreadable_json(str(error.get("message", ""))) if error.get("code") == -32700 else None
        if unreadable is not None:
            # Valid JSON that the SDK's parser does not read (nested too deeply: found by QA, deeper
            # than Python's own parser reads it was a 500; a number of thousands of digits):
            # answered as over stdio, with the request's own id.
            text = body.decode("utf-8", "replace")
            deep = unreadable == TOO_DEEP
            log.warning("invalid_message", code=JSONRPC_INVALID_REQUEST,
                        faults=["nested_too_deeply" if deep else "number_too_long"])
            if is_notification(text):   # a notification is accepted and gets no answer
                await send({"type": "http.response.start", "status": 202, "headers": []})
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return
            await _jsonrpc_error(send, 400, JSONRPC_INVALID_REQUEST, unreadable, top_level_id(text),
                                 {"maxNesting": MAX_NESTING} if deep else {})
            return
        problem = invalid_message_problem(body) if _is_validation_error(error) else None
        if problem is None:
            await send(start)
            await send({"type": "http.response.body", "body": bytes(held), "more_body": False})
            return
        log.warning("invalid_message", code=JSONRPC_INVALID_REQUEST, faults=["not_a_jsonrpc_message"])
        await _jsonrpc_error(send, 400, JSONRPC_INVALID_REQUEST, f"Invalid Request: {problem}. {_MESSAGE_SHAPE}",
                             request_id_of(body), {"problem": problem})

    return explained


_MESSAGE_SHAPE: Final = ('Send one JSON-RPC 2.0 message object per POST, for example '
                         '{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}')


def _answer_error(answer: bytes) -> dict[str, Any]:
    """The ``error`` of the SDK's JSON-RPC answer ``answer`` ({} when it has none)."""
    try:
        error = json.loads(answer).get("error") or {}
    except (ValueError, AttributeError):
        return {}
    return error if isinstance(error, dict) else {}


def _is_validation_error(error: dict[str, Any]) -> bool:
    return bool(error.get("code") == -32602 and str(error.get("message", "")).startswith("Validation error"))


def invalid_message_problem(body: bytes) -> str | None:
    """What makes the JSON ``body`` no JSON-RPC 2.0 message, in a few words (None when it is not
    JSON, or no problem is found here: the SDK's own answer then stands)."""
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):
        return None
    return message_problem(message, "body")


def host_port(host: str, port: int) -> str:
    """``host:port`` as in a URL: an IPv6 address in brackets (``[::1]:8000``)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _content_length(value: bytes | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None  # the HTTP parser has already refused a malformed length


def _bytes_text(count: int) -> str:
    """``4194304`` → ``"4194304 bytes (4 MiB)"``; small counts in bytes only."""
    if count < 1024 * 1024:
        return f"{count} bytes"
    return f"{count} bytes ({round(count / (1024 * 1024), 2):g} MiB)"


_JSON_WHITESPACE = re.compile(r"[ \t\n\r]*")
_JSON_DECODER = json.JSONDecoder()


def request_id_of(body: bytes | bytearray) -> int | str | None:
    """The ``id`` of the JSON-RPC request whose body starts with ``body``, when it can be known
    cheaply: the body is a JSON object and its top-level ``id`` (a string or integer) comes before
    any value that does not end within the first :data:`ID_SCAN_BYTES`. Else None (a batch, an id
    after a long ``params``, not JSON)."""
    text = bytes(body[:ID_SCAN_BYTES]).decode("utf-8", "ignore")
    at = _skip_space(text, 0)
    if not text.startswith("{", at):
        return None
    at += 1
    try:
        while True:
            at = _skip_space(text, at)
            if not text.startswith('"', at):
                return None
            key, at = _JSON_DECODER.raw_decode(text, at)
            at = _skip_space(text, at)
            if not text.startswith(":", at):
                return None
            value, at = _JSON_DECODER.raw_decode(text, _skip_space(text, at + 1))
            if key == "id":
                return value if isinstance(value, str | int) and not isinstance(value, bool) else None
            at = _skip_space(text, at)
            if not text.startswith(",", at):
                return None
            at += 1
    except (ValueError, RecursionError):  # cut off inside a value, not JSON, or nested too deeply to read here
        return None


UNUSABLE_ID_MESSAGE: Final = (
    "Invalid Request: the request's id must be a string or an integer (true, a number with a fraction, null, "
    "an object or an array cannot be answered); leave id out only for a notification. The request was not "
    "processed."
)


def unusable_id_type(body: bytes | bytearray, early_id: int | str | None) -> str | None:
    """The JSON type of the ``id`` of the JSON-RPC message ``body`` when it has one that is not a
    string or integer (``"boolean"``, ``"number"``, ``"null"``, ``"object"``, ``"array"``): JSON-RPC
    2.0's Invalid Request, which the SDK would take for a notification and answer 202 with nothing.
    None otherwise, also for a body that is not a JSON object (the SDK answers those itself).

    ``early_id`` is :func:`request_id_of` of the body: a usable id found at its start (every
    request of the official clients) settles it without parsing the body again; so does a body
    without the text ``"id"``.
    """
    if early_id is not None or b'"id"' not in body:
        return None
    try:
        message = json.loads(body)
    except (ValueError, RecursionError):  # not JSON (or not UTF-8), or too deep: the SDK's parse error
        return None
    if not isinstance(message, dict) or "id" not in message:
        return None
    value = message["id"]
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return None
    return {bool: "boolean", float: "number", dict: "object", list: "array"}.get(type(value), "null")


def _skip_space(text: str, at: int) -> int:
    match = _JSON_WHITESPACE.match(text, at)
    return match.end() if match else at


async def _jsonrpc_error(send: Send, status: int, code: int, message: str, request_id: int | str | None,
                         data: dict[str, Any]) -> None:
    payload = json.dumps({"jsonrpc": "2.0", "id": request_id,
                          "error": {"code": code, "message": message, "data": data}}).encode("utf-8")
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode("ascii")),
    ]})
    await send({"type": "http.response.body", "body": payload})


# -- app and server -------------------------------------------------------------------------------


def build_app(server: SdkServer, backend: Backend, settings: Settings) -> AccessLog:
    """The complete ASGI app: the SDK's streamable-HTTP app plus probes, auth and access log.

    Args:
        server: the low-level MCP server from :func:`graph_memory.mcp.server.build_server`.
        backend: the open database the server works on (``/readyz`` checks it).
        settings: HTTP host, token, allowed hosts and origins, and the request limits come from here.
    """
    closers: list[Callable[[], None]] = []
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=list(settings.allowed_hosts),
        allowed_origins=list(settings.allowed_origins),
    )
    app: ASGIApp = server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        host=settings.http_host,
        transport_security=security,
        stateless_http=False,  # handshake-era notifications need the session's GET stream
        # Each request's answer is one JSON body, not a server-sent event: the official Python
        # client refuses an event over 1 MiB (found by QA: a 2,500-entity read failed although
        # MEMORY_MAX_REPLY_BYTES allows 10 MiB). No tool sends anything else within a request.
        json_response=True,
        max_request_body_size=settings.http_max_body_bytes,
        session_idle_timeout=settings.http_session_idle_seconds,
        max_sessions=settings.http_max_sessions,
        custom_starlette_routes=_probe_routes(backend),
        debug=False,  # 500s carry no traceback
    )
    if settings.http_view_path is not None:
        app = ViewMount(app, settings, closers)
    app = RequestLimits(app, max_body_bytes=settings.http_max_body_bytes, max_sessions=settings.http_max_sessions,
                        session_idle_seconds=settings.http_session_idle_seconds)
    token = _token(settings)
    if token is not None:
        app = BearerAuth(app, token)
    front = AccessLog(app)
    front.closers += closers
    return front


class ViewMount:
    """ASGI: requests under ``MEMORY_HTTP_VIEW_PATH`` go to the read-only page of ``graph-memory
    view`` (its own read-only connection to the database, whose close is appended to
    ``closers``; the view's GET-only, Host and Origin checks with the lists /mcp uses), the rest
    to ``app``. Mounted inside :class:`BearerAuth`, so the token applies as to /mcp."""

    def __init__(self, app: ASGIApp, settings: Settings, closers: list[Callable[[], None]]) -> None:
        from graph_memory.browse import GraphBrowser
        from graph_memory.view.app import build_view_app

        assert settings.http_view_path is not None
        self.app = app
        self.path = settings.http_view_path
        browser = GraphBrowser.open(settings)
        closers.append(browser.close)
        self.view = build_view_app(browser, allowed_hosts=settings.allowed_hosts,
                                   allowed_origins=settings.allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path == self.path:  # the page's relative links need the trailing slash
            await RedirectResponse(self.path + "/", status_code=307)(scope, receive, send)
        elif path.startswith(self.path + "/"):
            await self.view({**scope, "root_path": scope.get("root_path", "") + self.path}, receive, send)
        else:
            await self.app(scope, receive, send)


def _token(settings: Settings) -> str | None:
    """``MEMORY_HTTP_TOKEN``, or None when unset or empty."""
    value = settings.http_token.get_secret_value() if settings.http_token is not None else ""
    return value or None


def listen_streams_closer(handle: ServerHandle) -> Callable[[], None]:
    """A callable that gracefully ends every open ``subscriptions/listen`` stream (the handler
    ``build_server`` returns as ``handle.listen``)."""
    return handle.listen.close


@contextlib.contextmanager
def _sse_drain_control() -> Iterator[Callable[[], None]]:
    """Take over sse-starlette's shutdown hook while serving.

    By default sse-starlette ends every ``EventSourceResponse`` as soon as uvicorn sees the
    signal, which also cuts the SSE answer of a handshake-era call still in flight. Switched off
    here; the yielded callable ends the streams when we choose. Restored afterwards (the flags are
    process-wide), so another server in the same process starts clean.
    """
    try:
        from sse_starlette.sse import AppStatus
    except ImportError:  # the SDK no longer uses sse-starlette: nothing to coordinate
        yield lambda: None
        return
    was_enabled = AppStatus.enable_automatic_graceful_drain
    AppStatus.enable_automatic_graceful_drain = False

    def end_streams() -> None:
        AppStatus.should_exit = True

    try:
        yield end_streams
    finally:
        AppStatus.should_exit = False
        AppStatus.enable_automatic_graceful_drain = was_enabled


class GracefulServer(uvicorn.Server):
    """uvicorn's server with the shutdown order of this module's docstring; signals end it
    without being re-raised afterwards (a SIGTERM stop is a normal return, so the caller's
    cleanup runs and the exit status is 0); the bound address is logged once listening."""

    def __init__(self, config: uvicorn.Config, front: AccessLog | None,
                 on_shutdown: Callable[[], None]) -> None:
        super().__init__(config)
        self._front = front
        self._on_shutdown = on_shutdown
        self._end_sse_streams: Callable[[], None] = lambda: None
        self.token_required = False  # said in the http_listening line

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        handled = (signal.SIGINT, signal.SIGTERM)
        original = {sig: signal.signal(sig, self.handle_exit) for sig in handled}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)

    async def serve(self, sockets: list[socket.socket] | None = None) -> None:
        with _sse_drain_control() as end_sse_streams:
            self._end_sse_streams = end_sse_streams
            await super().serve(sockets)

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            bound = [sock.getsockname()[:2] for srv in self.servers for sock in (srv.sockets or ())]
            log.info("http_listening", addresses=[host_port(h, p) for h, p in bound], path=MCP_PATH,
                     url=client_url(*bound[0]) if bound else None,
                     auth="a bearer token (MEMORY_HTTP_TOKEN) is required" if self.token_required else "none")

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        front = self._front
        log.info("http_stopping", connections=len(self.server_state.connections),
                 in_flight=front.in_flight if front else None, streams=front.streams if front else None)
        for srv in self.servers:
            srv.close()  # no new connections from here on
        try:
            self._on_shutdown()
        except Exception:
            log.exception("listen_streams_close_failed")
        await self._wait_for_calls()
        self._end_sse_streams()
        await super().shutdown(sockets)

    async def _wait_for_calls(self) -> None:
        if self._front is None:
            return
        deadline = time.monotonic() + GRACEFUL_SHUTDOWN_SECONDS
        while self._front.in_flight > 0 and not self.force_exit:
            if time.monotonic() >= deadline:
                log.warning("shutdown_calls_unfinished", in_flight=self._front.in_flight)
                return
            await asyncio.sleep(0.02)


def client_url(host: str, port: int) -> str:
    """The URL a client on this machine pastes for the bound ``host:port``: ``http://HOST:PORT/mcp``,
    IPv6 in brackets, a wildcard bind (0.0.0.0, ::) as its loopback address."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(host, host)
    return f"http://{f'[{host}]' if ':' in host else host}:{port}{MCP_PATH}"


def build_uvicorn(app: ASGIApp, settings: Settings, *, on_shutdown: Callable[[], None] = lambda: None
                  ) -> GracefulServer:
    """A uvicorn server for ``app`` on ``settings.http_host:http_port``: logging left to our
    structlog setup (``log_config=None``, own access log), lifespan on (it runs the SDK's session
    manager), bounded graceful shutdown, no ``Server`` header.

    ``on_shutdown`` runs when shutdown starts (:func:`serve_http` passes the closer of the listen
    streams). When ``app`` is an :class:`AccessLog`, shutdown waits for its in-flight calls.
    """
    config = uvicorn.Config(
        app,
        host=settings.http_host,
        port=settings.http_port,
        log_config=None,
        access_log=False,
        lifespan="on",
        ws="none",
        server_header=False,
        timeout_graceful_shutdown=STREAM_CLOSE_SECONDS,
    )
    front = app if isinstance(app, AccessLog) else None
    server = GracefulServer(config, front, on_shutdown)
    server.token_required = _token(settings) is not None
    return server


def serve_http(handle: ServerHandle, backend: Backend, settings: Settings) -> None:
    """Serve MCP over streamable HTTP until SIGTERM/SIGINT, then return (the caller closes the backend).

    Raises:
        GraphError: the server could not start (address in use, permission denied, …); the
            cause is in the log.
    """
    if _token(settings) is None and settings.http_host not in ("127.0.0.1", "localhost", "::1"):
        log.warning("http_without_token", host=settings.http_host,
                    hint="set MEMORY_HTTP_TOKEN when /mcp is reachable from other machines or pods")
    app = build_app(handle.server, backend, settings)
    uv = build_uvicorn(app, settings, on_shutdown=listen_streams_closer(handle))
    log.info("http_starting", host=settings.http_host, port=settings.http_port,
             auth="none" if _token(settings) is None else "bearer",
             allowed_hosts=list(settings.allowed_hosts), view_path=settings.http_view_path)
    try:
        uv.run()
    except SystemExit as exc:  # uvicorn exits on bind or lifespan-startup failure (already logged)
        raise ServeError(
            f"the HTTP server could not start on {settings.http_host}:{settings.http_port} "
            f"(exit {exc.code}); see the log line before this one"
        ) from None
    finally:
        for close in app.closers:
            close()
    if not uv.started:
        raise ServeError(f"the HTTP server did not start on {settings.http_host}:{settings.http_port}; "
                         f"see the log for the cause")
