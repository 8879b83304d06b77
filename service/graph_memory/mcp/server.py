"""The MCP server: tools, the knowledge-graph resource, and change notifications.

Built on the SDK's low-level ``Server`` so the advertised schemas are exactly ours and every
result is built once, with no second validation layer on the hot path, and handed to the
transport without the SDK's copies (:mod:`graph_memory.mcp.replies`). Tool adapters live in
:mod:`graph_memory.mcp.tools`; this module maps their outcomes onto MCP results and holds the
one ``GraphError → MCP`` mapping (:func:`_tool_error`, :func:`_resource_error`).

Notifications: after a call that changed the graph, ``notifications/resources/updated`` for
``memory://knowledge-graph`` goes to every subscribed session of both protocol generations —
handshake-era sessions that sent ``resources/subscribe`` (kept in :class:`Subscribers`), and
2026-07-28 ``subscriptions/listen`` streams (through the SDK's subscription bus). Changes other
processes commit to the same file reach them too: while anyone is subscribed,
:class:`ExternalChanges` looks at SQLite's ``PRAGMA data_version`` every
:data:`EXTERNAL_CHANGE_POLL_SECONDS`.

Logs: one ``tool_call`` line per call — at ``info`` for tools that may write (tool, counts of
what changed, milliseconds), at ``debug`` for reads (tool, result counts, milliseconds). Names and
observation text never appear at ``info``.
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from typing import Any, Literal

import anyio
import mcp_types as types
from mcp.server import Server, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated, ServerEvent
from mcp.shared.exceptions import MCPError

from graph_memory import package_version
from graph_memory.db.backend import Backend
from graph_memory.errors import GraphError, InvalidInput, ReplyTooLarge, StartRefused, StoreError
from graph_memory.logs import get_logger
from graph_memory.mcp import bounds
from graph_memory.mcp.jsontext import dumps_indent2
from graph_memory.mcp.replies import prebuilt_results, reply_building, tool_result
from graph_memory.mcp.request_params import explain_invalid_params
from graph_memory.mcp.tools import TOOLS, Outcome, ToolSpec
from graph_memory.service import MemoryService

Profile = Literal["reference", "memorymesh"]
"""The tool profiles (``MEMORY_TOOLS``)."""
GRAPH_URI = "memory://knowledge-graph"
SERVER_NAME = "graph-memory"
INSTRUCTIONS = (
    "A persistent knowledge graph of what you learn about the user and their work: entities "
    "(people, organizations, events…) with observations (atomic facts) and directed relations. "
    "Search or open what you need before answering; store new facts as observations."
)
log = get_logger("graph_memory.server")

Lifespan = dict[str, Any]
"""What the SDK's default lifespan (we set none) yields, its parameter of ``Server`` and contexts."""
SdkServer = Server[Lifespan]
RequestContext = ServerRequestContext[Lifespan]


class Subscribers:
    """Handshake-era sessions subscribed to resource URIs via ``resources/subscribe``.

    Keyed by the session's connection, so repeated subscriptions from one client count once. A
    session leaves when its connection ends: :meth:`add` pushes :meth:`forget` onto the
    connection's ``exit_stack``, which the SDK unwinds however the connection ended (an HTTP
    session's DELETE or idle timeout, stdin's end, a crash). Sending to an ended HTTP session
    does not fail, so without this it would stay for good, costing memory and time on every
    notification. A send that does fail (a stuck connection) drops the session too.
    """

    def __init__(self) -> None:
        self._by_connection: dict[int, tuple[ServerSession, set[str]]] = {}

    @staticmethod
    def _key(session: ServerSession) -> int:
        return id(getattr(session, "_connection", session))

    def add(self, session: ServerSession, uri: str, ends: AsyncExitStack | None = None) -> None:
        """Subscribe ``session`` to ``uri``; ``ends`` is its connection's ``exit_stack``, unwound
        when the connection ends, which then forgets the session (None: only :meth:`remove`,
        :meth:`forget` or a failed send do)."""
        key = self._key(session)
        entry = self._by_connection.get(key)
        if entry is None:
            entry = self._by_connection[key] = (session, set())
            if ends is not None:
                ends.callback(self._forget_key, key, session)
        entry[1].add(uri)

    def forget(self, session: ServerSession) -> None:
        """Unsubscribe ``session`` from every URI (no error when it was not subscribed)."""
        self._forget_key(self._key(session), session)

    def _forget_key(self, key: int, session: ServerSession) -> None:
        entry = self._by_connection.get(key)
        if entry is not None and entry[0] is session:  # not a later session reusing the id
            del self._by_connection[key]
            log.debug("subscriber_ended")

    def remove(self, session: ServerSession, uri: str) -> None:
        """Unsubscribe ``session`` from ``uri`` (no error when it was not subscribed)."""
        key = self._key(session)
        entry = self._by_connection.get(key)
        if entry is not None:
            entry[1].discard(uri)
            if not entry[1]:
                del self._by_connection[key]

    def __len__(self) -> int:
        return len(self._by_connection)

    async def notify(self, uri: str) -> None:
        """Send ``notifications/resources/updated`` for ``uri`` to every subscribed session."""
        for key, (session, uris) in list(self._by_connection.items()):
            if uri not in uris:
                continue
            try:
                with anyio.fail_after(5):
                    await session.send_resource_updated(uri)
            except Exception as exc:  # a closed or stuck connection: forget it
                log.debug("subscriber_dropped", reason=repr(exc))
                self._by_connection.pop(key, None)


def connection_exit_stack(session: ServerSession) -> AsyncExitStack | None:
    """The ``exit_stack`` of ``session``'s SDK ``Connection``: the SDK unwinds it (shielded) when
    the connection's serving loop ends, whatever ended it. Handlers' contexts do not expose the
    connection, so it is read off the session's ``_connection``; None if a later SDK moves it
    (``test_subscriber_lifetime`` then fails)."""
    stack = getattr(getattr(session, "_connection", None), "exit_stack", None)
    return stack if isinstance(stack, AsyncExitStack) else None


class IdleCatchUp:
    """The timer of the search index's idle policy (:mod:`graph_memory.db.index`), on the event
    loop (asyncio) like every call: :meth:`Backend.catch_up_when_idle` ``delay`` seconds after the
    last write of this server, and every ``poll`` seconds for what other processes left waiting.
    A search, a large enough backlog and shutdown catch up too, so this only moves work off the
    calls."""

    def __init__(self, store: Backend, delay: float | None = None, poll: float | None = None) -> None:
        self.store = store
        self.delay = store.idle_catch_up_seconds if delay is None else delay
        self.poll = store.catch_up_poll_seconds if poll is None else poll
        self._handle: asyncio.TimerHandle | None = None

    def after_call(self, wrote: bool) -> None:
        """Called on the event loop after each tool call: a write (re)starts the short countdown;
        any call starts the polling if it is not running yet."""
        if self._handle is not None and not wrote:
            return
        self._schedule(self.delay if wrote else self.poll)

    def _schedule(self, seconds: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        try:
            self._handle = asyncio.get_running_loop().call_later(seconds, self.run)
        except RuntimeError:  # not on an asyncio loop: searches and shutdown catch up instead
            self._handle = None

    def cancel(self) -> None:
        """Stop the countdown (nothing runs until the next call)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def run(self) -> None:
        """Catch up now (:meth:`Backend.catch_up_when_idle`: never raises), then poll again later."""
        self._handle = None
        self.store.catch_up_when_idle()
        self._schedule(self.poll)


# While a session is subscribed, how often the server looks for commits of other processes to the
# same file (seconds): a subscriber hears of them within about this long. One look is one
# `PRAGMA data_version`, a few microseconds.
EXTERNAL_CHANGE_POLL_SECONDS = 0.5


class ExternalChanges:
    """Notices commits other connections (other processes on the same file, a second Store) made,
    while ``watching()`` is true, and awaits ``changed()`` on the event loop for each look that
    found some.

    ``PRAGMA data_version`` on the store's own connection changes exactly when another
    connection committed since the last look; this server's own commits leave it unchanged, so
    its writes (notified by the tool call itself) and its own index catch-ups are never notified
    twice. A foreign commit is a change of the graph when it also moved ``graph_version``
    (migration 0005: one count per write transaction that changed the graph, see
    :meth:`Store.write`); another process's search-index catch-up moves only data_version and
    is not notified. Both reads are one-row lookups (microseconds).

    Runs on the asyncio loop like :class:`IdleCatchUp`, in stdio and HTTP modes alike:
    :meth:`start` when a subscription begins; the polling stops by itself once ``watching()`` is
    false, and with the loop.
    """

    def __init__(self, store: Backend, watching: Callable[[], bool],
                 changed: Callable[[], Coroutine[object, object, None]],
                 interval: float = EXTERNAL_CHANGE_POLL_SECONDS) -> None:
        self.store = store
        self.watching = watching
        self.changed = changed
        self.interval = interval
        self._version: int | None = None
        self._graph: int | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def start(self) -> None:
        """Start looking (no-op while already looking); the first look's baseline is now."""
        if self._handle is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # not on an asyncio loop: no polling (tool calls still notify)
            return
        try:
            counters = self.store.change_counters()
        except GraphError:  # e.g. busy during another process's WAL recovery: the first look sets it
            counters = None
        self._version, self._graph = counters if counters is not None else (None, None)
        self._handle = loop.call_later(self.interval, self.look)

    def cancel(self) -> None:
        """Stop looking (a later :meth:`start` resumes)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def look(self) -> None:
        """One look: notify when another connection committed since the last, then look again
        later while anyone is subscribed. A store that cannot answer now (busy) is asked again
        at the next look; a closed one (the server stops) ends the looking."""
        self._handle = None
        if not self.watching():
            return
        try:
            counters = self.store.change_counters()
        except GraphError as exc:  # busy: the next look tries again
            log.debug("external_change_look_failed", error=str(exc)[:200])
            self._handle = asyncio.get_running_loop().call_later(self.interval, self.look)
            return
        if counters is None:  # the store was closed
            return
        # With data_version unchanged no other connection committed, so a moved graph_version
        # is this server's own writes (notified by their calls): it only moves the baseline.
        version, graph = counters
        if self._version is None or version == self._version:
            self._version = version
            self._graph = graph
        else:
            self._version = version
            if graph is not None and graph == self._graph:
                log.debug("external_index_upkeep_noticed", data_version=version)
            else:
                self._graph = graph
                log.debug("external_change_noticed", data_version=version, graph_version=graph)
                task = asyncio.get_running_loop().create_task(self.changed())
                self._tasks.add(task)  # keep a reference until it is done
                task.add_done_callback(self._tasks.discard)
        self._handle = asyncio.get_running_loop().call_later(self.interval, self.look)


class _CountingBus(InMemorySubscriptionBus):
    """The SDK's in-process bus, counting its listeners (open ``subscriptions/listen`` streams)
    and calling ``on_subscribe`` whenever one starts."""

    def __init__(self, on_subscribe: Callable[[], None]) -> None:
        super().__init__()
        self.listeners = 0
        self._on_subscribe = on_subscribe

    def subscribe(self, listener: Callable[[ServerEvent], None]) -> Callable[[], None]:
        unsubscribe = super().subscribe(listener)
        self.listeners += 1
        done = False

        def counted_unsubscribe() -> None:
            nonlocal done
            if not done:
                done = True
                self.listeners -= 1
            unsubscribe()

        self._on_subscribe()
        return counted_unsubscribe


def _counts(outcome: Outcome) -> dict[str, int]:
    """The counts a ``tool_call`` log line carries: the tool's own, else the sizes of the lists
    in its structured result (e.g. ``entities=3 relations=2`` for a read)."""
    if outcome.counts:
        return outcome.counts
    return {key: len(value) for key, value in outcome.structured.items() if isinstance(value, list)}


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


def _tool_error(spec: ToolSpec, exc: Exception, started: float, profile: Profile = "reference",
                arguments: dict[str, Any] | None = None) -> types.CallToolResult:
    """The one ``GraphError → MCP`` mapping of tool calls: a refusal (:class:`GraphError`) is
    an ``isError`` result with its message; anything else is logged and answered without its
    text (it may hold internals). In the ``memorymesh`` profile the same message comes in
    MemoryMesh's error format (:func:`graph_memory.mcp.memorymesh.error_result`: the call's
    context, suggestions and recovery steps)."""
    if isinstance(exc, StoreError):
        # The database itself (locked, full, damaged, unwritable): whoever runs the server must see
        # why, not only the client (found by QA). These messages name the database, not the graph.
        log.warning("tool_failed_storage", tool=spec.name, error=str(exc)[:500], ms=_ms(started))
        message = str(exc)
    elif isinstance(exc, GraphError):
        # The message may quote names and observations: only its kind at info.
        writes = not spec.annotations["readOnlyHint"]
        (log.info if writes else log.debug)("tool_refused", tool=spec.name, error=type(exc).__name__,
                                            ms=_ms(started))
        log.debug("tool_refused_detail", tool=spec.name, error=str(exc)[:500])
        message = str(exc)
    else:
        log.exception("tool_failed", tool=spec.name)  # called in the except block: logs the traceback
        message = (f"{spec.name} failed with an internal error; nothing was written. "
                   f"The server log has the details.")
    if profile == "memorymesh":
        return _mesh_error(spec.name, message, exc, arguments or {})
    return _error(message)


def _mesh_error(tool: str, message: str, exc: Exception, arguments: dict[str, Any]) -> types.CallToolResult:
    """The ``isError`` result of the memorymesh profile (:func:`graph_memory.mcp.memorymesh.error_result`)."""
    from graph_memory.mcp import memorymesh  # only the memorymesh profile: not on the start path

    texts, structured = memorymesh.error_result(tool, message, exc, arguments)
    return types.CallToolResult(content=[types.TextContent(type="text", text=t) for t in texts],
                                structured_content=structured, is_error=True)


def _resource_error(exc: Exception) -> MCPError:
    """The ``GraphError → MCP`` mapping of a resource read: a JSON-RPC internal error that says
    what went wrong (e.g. the file is corrupt or locked), never the raw text of another error
    (handshake-era sessions would pass it to the client)."""
    if isinstance(exc, GraphError):
        return MCPError(code=types.INTERNAL_ERROR, message=str(exc))
    log.exception("resource_read_failed", uri=GRAPH_URI)  # called in the except block
    return MCPError(code=types.INTERNAL_ERROR, message="reading the knowledge graph failed with an "
                    "internal error; the server log has the details")


# The JSON Schema dialect of every advertised schema: the reference server's (its schemas declare
# draft-07), and cheaper for clients to check results against than the 2020-12 default — the
# official Python client validates each structured result ~18 % faster (issue 6). Our schemas
# use no keyword whose meaning differs between the two.
SCHEMA_DIALECT = "http://json-schema.org/draft-07/schema#"


def _ms(started: float) -> float:
    """Milliseconds since ``started`` (a ``time.perf_counter()``), rounded to 0.1 ms."""
    return round((time.perf_counter() - started) * 1000, 1)


def _dialect(schema: dict[str, Any]) -> dict[str, Any]:
    return schema if "$schema" in schema else {"$schema": SCHEMA_DIALECT, **schema}


def _tool(spec: ToolSpec) -> types.Tool:
    return types.Tool(
        name=spec.name,
        title=spec.title,
        description=spec.description,
        input_schema=_dialect(spec.input_schema),
        output_schema=_dialect(spec.output_schema),
        annotations=types.ToolAnnotations(
            read_only_hint=spec.annotations["readOnlyHint"],
            destructive_hint=spec.annotations["destructiveHint"],
            idempotent_hint=spec.annotations["idempotentHint"],
            open_world_hint=spec.annotations["openWorldHint"],
        ),
    )


@dataclass(frozen=True, slots=True)
class ServerHandle:
    """What :func:`build_server` returns: the SDK ``server`` to serve, and the parts of ours
    that the transports and tests reach: the handshake-era ``subscribers``, the ``listen``
    handler of ``subscriptions/listen`` streams (HTTP mode closes them on shutdown), the index's
    ``idle_catch_up`` timer and the ``external_changes`` poller."""

    server: SdkServer
    subscribers: Subscribers
    listen: ListenHandler
    idle_catch_up: IdleCatchUp
    external_changes: ExternalChanges


def build_server(memory: MemoryService, *, extra_tools: tuple[ToolSpec, ...] = (),
                 profile: Profile = "reference") -> ServerHandle:
    """The MCP server over ``memory`` (the service: a backend plus limits).

    Args:
        memory: the service tools run against; its backend must stay open while the server
            runs (the caller closes it).
        extra_tools: more tools to advertise after the standard ones (e.g. typed tools).
        profile: ``MEMORY_TOOLS``: ``reference`` (the reference server's tools) or ``memorymesh``
            (MemoryMesh's static tools instead, and every tool, ``extra_tools`` included,
            answering in MemoryMesh's format: :mod:`graph_memory.mcp.memorymesh`).

    Returns:
        A :class:`ServerHandle`; serve its low-level ``mcp.server.Server`` (named
        ``graph-memory``) with ``handle.server.run(...)`` (stdio) or through
        :func:`graph_memory.mcp.http.serve_http` (HTTP).
    """
    specs = {spec.name: spec for spec in _profile_tools(profile, extra_tools)}
    handlers = _Handlers(memory, specs, profile)
    listen = ListenHandler(handlers.bus)
    server: SdkServer = Server(
        SERVER_NAME,
        version=package_version(),
        instructions=INSTRUCTIONS,
        on_list_tools=_list_tools(specs.values()),
        on_call_tool=handlers.call_tool,
        on_list_resources=_list_resources,
        on_read_resource=handlers.read_resource,
        on_subscribe_resource=handlers.subscribe,
        on_unsubscribe_resource=handlers.unsubscribe,
        on_subscriptions_listen=listen,
    )
    _set_middleware(server)
    return ServerHandle(server, handlers.subscribers, listen, handlers.idle_catch_up, handlers.external)


def _profile_tools(profile: Profile, extra_tools: tuple[ToolSpec, ...]) -> tuple[ToolSpec, ...]:
    """The tools a server of ``profile`` advertises, ``extra_tools`` (the typed tools) included."""
    if profile == "memorymesh":
        from graph_memory.mcp import memorymesh  # imported only for its profile (cold start)

        return memorymesh.profile_tools(extra_tools)
    return (*TOOLS, *extra_tools)


def refusal_text(reason: str) -> str:
    """What every call of a server refusing its start answers (:func:`build_refusing_server`)."""
    return (f"graph-memory could not start, so no memory can be read or stored in this session. {reason}\n"
            f"Once that is fixed, restart this MCP server (or the application that started it).")


def build_refusing_server(reason: str, *, profile: Profile = "reference",
                          extra_tools: tuple[ToolSpec, ...] = ()) -> SdkServer:
    """The server a refused start serves on stdio (``graph_memory.cli._answer_with_refusal``): the
    profile's tools (and ``extra_tools``, the typed tools) and the knowledge-graph resource listed
    as usual, every tool call an ``isError`` result and every resource read an error saying why
    (:func:`refusal_text` of ``reason``, the refusal's message), and the same in the initialize
    result's instructions. No database is open.
    """
    tools = _profile_tools(profile, extra_tools)
    text = refusal_text(reason)

    async def call_tool(ctx: RequestContext, params: types.CallToolRequestParams) -> types.CallToolResult:
        log.info("tool_refused_start", tool=params.name)
        if profile == "memorymesh":
            return _mesh_error(params.name, text, StartRefused(text), params.arguments or {})
        return _error(text)

    async def read_resource(ctx: RequestContext, params: types.ReadResourceRequestParams
                            ) -> types.ReadResourceResult:
        raise MCPError(code=types.INTERNAL_ERROR, message=text)

    server: SdkServer = Server(
        SERVER_NAME, version=package_version(), instructions=text,
        on_list_tools=_list_tools(tools), on_call_tool=call_tool,
        on_list_resources=_list_resources, on_read_resource=read_resource,
    )
    _set_middleware(server)
    return server


class _Handlers:
    """The request handlers of one server over ``memory``, and the notification state they share:
    handshake-era ``subscribers``, the listen-stream ``bus``, the index's idle timer and the
    poller of other processes' commits."""

    def __init__(self, memory: MemoryService, specs: dict[str, ToolSpec], profile: Profile = "reference") -> None:
        self.memory = memory
        self.specs = specs
        self.profile = profile
        self.subscribers = Subscribers()
        self.idle_catch_up = IdleCatchUp(memory.backend)
        self.external = ExternalChanges(memory.backend, self._watched, self.graph_changed)
        self.bus = _CountingBus(self.external.start)

    def _watched(self) -> bool:
        return bool(len(self.subscribers) or self.bus.listeners)

    async def graph_changed(self) -> None:
        """Tell every subscriber of both protocol generations that the graph changed."""
        await self.bus.publish(ResourceUpdated(uri=GRAPH_URI))
        await self.subscribers.notify(GRAPH_URI)

    async def call_tool(self, ctx: RequestContext, params: types.CallToolRequestParams
                        ) -> types.CallToolResult:
        spec = self.specs.get(params.name)
        if spec is None:
            message = f"Unknown tool: {params.name}. Available tools: {', '.join(self.specs)}"
            if self.profile == "memorymesh":
                return _mesh_error(params.name, message, InvalidInput(message), params.arguments or {})
            return _error(message)
        started = time.perf_counter()
        writes = not spec.annotations["readOnlyHint"]
        limits = self.memory.limits
        bound = limits.max_reply_bytes
        try:
            if writes:   # a reply that could be too large is refused before anything is written
                bounds.check_request(spec.name, params.arguments or {}, bound,
                                     longest=max(limits.max_name_length, limits.max_observation_length),
                                     batch=limits.max_batch)
            with reply_building():
                outcome: Outcome = spec.run(self.memory, params.arguments or {})
                text = outcome.render()
        except Exception as exc:
            return _tool_error(spec, exc, started, self.profile, params.arguments)
        (log.info if writes else log.debug)("tool_call", tool=spec.name, **_counts(outcome), ms=_ms(started))
        self.idle_catch_up.after_call(outcome.changed)
        if outcome.changed:
            await self.graph_changed()
        try:   # every reply, whichever tool built it, within the one bound (graph_memory.mcp.bounds)
            if not outcome.sized:
                bounds.check_reply(spec.name, text, outcome.structured, bound, wrote=outcome.changed,
                                   profile=self.profile)
        except ReplyTooLarge as exc:
            return _tool_error(spec, exc, started, self.profile, params.arguments)
        return tool_result(text, outcome.structured)

    async def read_resource(self, ctx: RequestContext, params: types.ReadResourceRequestParams
                            ) -> types.ReadResourceResult:
        if str(params.uri) != GRAPH_URI:
            raise MCPError(code=-32002, message=f"Resource not found: {params.uri}")
        try:
            with reply_building():
                graph = self.memory.read_graph()
                text = dumps_indent2(graph.to_dict())   # json.dumps(indent=2), faster
                bounds.check_resource(GRAPH_URI, text, self.memory.limits.max_reply_bytes, self.profile,
                                      page=lambda: self.memory.fitting_page("read_graph", graph))
        except Exception as exc:
            raise _resource_error(exc) from None
        return types.ReadResourceResult(contents=[types.TextResourceContents(
            uri=GRAPH_URI, mime_type="application/json", text=text,
        )])

    async def subscribe(self, ctx: RequestContext, params: types.SubscribeRequestParams
                        ) -> types.EmptyResult:
        self.subscribers.add(ctx.session, str(params.uri), connection_exit_stack(ctx.session))
        self.external.start()
        return types.EmptyResult()

    async def unsubscribe(self, ctx: RequestContext, params: types.UnsubscribeRequestParams
                          ) -> types.EmptyResult:
        self.subscribers.remove(ctx.session, str(params.uri))
        return types.EmptyResult()


def _list_tools(specs: Iterable[ToolSpec]) -> Callable[
        [RequestContext, types.PaginatedRequestParams | None], Awaitable[types.ListToolsResult]]:
    """The ``tools/list`` handler: one result, built once."""
    tool_list = types.ListToolsResult(tools=[_tool(spec) for spec in specs])

    async def list_tools(ctx: RequestContext, params: types.PaginatedRequestParams | None
                         ) -> types.ListToolsResult:
        return tool_list

    return list_tools


async def _list_resources(ctx: RequestContext, params: types.PaginatedRequestParams | None
                          ) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[types.Resource(
        uri=GRAPH_URI, name="knowledge-graph", title="Knowledge graph",
        description="The whole knowledge graph: every entity and relation (same payload as read_graph).",
        mime_type="application/json",
    )])


def _set_middleware(server: SdkServer) -> None:
    if importlib.util.find_spec("opentelemetry.sdk") is None:
        # The SDK's OpenTelemetry middleware can only emit spans through an installed OTel SDK;
        # without one it does nothing yet costs ~30 µs per request (issue 6), so drop it then.
        server.middleware = [m for m in server.middleware if type(m).__name__ != "OpenTelemetryMiddleware"]
    server.middleware.append(explain_invalid_params)
    server.middleware.append(prebuilt_results)
