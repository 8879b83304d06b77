"""The web edge of ``graph-memory view``: one HTML page, its static files and four JSON reads.

Routes (GET only; every answer bounded, see :mod:`graph_memory.browse`):

=========================  ====================================================================
``/``                      the page (``static/index.html``)
``/static/…``              its scripts, styles and the vendored cytoscape.js
``/api/overview``          totals, counts by type, most connected entities, latest additions
                           (``fresh=1``: wait for counts of the graph as it is now)
``/api/search``            ``q``, ``mode`` (substring, words, fts), ``limit`` (≤ 200)
``/api/entity``            ``name``, ``offset`` (of each list): the entity page, 404 when there is none
``/api/neighborhood``      ``name``, ``hops`` (1–2), ``limit`` (≤ 150 entities)
=========================  ====================================================================

:class:`ViewGuard` wraps the whole app: any method but GET and HEAD is refused (405) before a
route runs, a ``Host`` header outside the allowed list is refused (421: DNS rebinding would
otherwise let any web page read the memory), an ``Origin`` outside the allowed list is refused
(403), and every answer carries a strict Content-Security-Policy (scripts and styles from this
origin only, no inline code, nothing loaded from elsewhere) and no-sniff / no-framing headers.
The page builds its DOM with ``textContent`` only; the JSON carries stored strings as data.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from graph_memory.browse import GraphBrowser
from graph_memory.errors import GraphError, InvalidInput, StoreError
from graph_memory.logs import get_logger
from graph_memory.models import MODES, Mode

STATIC = Path(__file__).with_name("static")
ALLOWED_METHODS = ("GET", "HEAD")

log = get_logger("graph_memory.view")

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]


def matches(value: str, patterns: Iterable[str]) -> bool:
    """Whether ``value`` (a Host ``name:port`` or an Origin ``scheme://name:port``) is one of
    ``patterns``, where ``name:*`` allows any port (the rule of ``MEMORY_ALLOWED_HOSTS``)."""
    for pattern in patterns:
        if value == pattern or (pattern.endswith(":*") and value.startswith(pattern[:-1])
                                and value[len(pattern) - 1:].isdigit()):
            return True
    return False


class ViewGuard:
    """ASGI middleware: GET/HEAD only, allowed Host and Origin only, security headers on every
    answer (see the module docstring)."""

    def __init__(self, app: ASGIApp, *, allowed_hosts: Iterable[str], allowed_origins: Iterable[str]) -> None:
        self.app = app
        self.allowed_hosts = tuple(allowed_hosts)
        self.allowed_origins = tuple(allowed_origins)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *SECURITY_HEADERS]}
            await send(message)

        problem: tuple[int, str, list[tuple[bytes, bytes]]] | None = None
        if scope["method"] not in ALLOWED_METHODS:
            problem = (405, "this page only reads: GET is the one method it answers", [(b"allow", b"GET, HEAD")])
        elif not matches(headers.get("host", ""), self.allowed_hosts):
            problem = (421, "this Host is not allowed (DNS-rebinding protection); open the page at the URL "
                            "graph-memory printed, or add the host to MEMORY_ALLOWED_HOSTS", [])
        elif "origin" in headers and not matches(headers["origin"], self.allowed_origins):
            problem = (403, "requests from other sites are refused; add the origin to MEMORY_ALLOWED_ORIGINS", [])
        if problem is not None:
            status, text, extra = problem
            log.info("view_request_refused", status=status, method=scope["method"], path=scope.get("path"))
            body = text.encode() + b"\n"
            await secured({"type": "http.response.start", "status": status, "headers": [
                (b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode()),
                (b"cache-control", b"no-store"), *extra]})
            await secured({"type": "http.response.body", "body": body if scope["method"] != "HEAD" else b""})
            return
        await self.app(scope, receive, secured)


def _json(data: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(data, status_code=status, headers={"cache-control": "no-store"})


def _error(exc: GraphError) -> JSONResponse:
    """A refused read: 400 for a bad query or argument, 503 when the database cannot be read."""
    if isinstance(exc, StoreError):
        log.warning("view_read_failed", error=str(exc)[:500])
        return _json({"error": "the database cannot be read now; see graph-memory's log"}, 503)
    return _json({"error": str(exc)}, 400)


def _int(request: Request, key: str, default: int) -> int:
    raw = request.query_params.get(key)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise InvalidInput(f"{key} must be a whole number, not {raw[:40]!r}") from None


def _mode(request: Request) -> Mode:
    raw = request.query_params.get("mode") or "substring"
    for mode in MODES:
        if raw == mode:
            return mode
    raise InvalidInput(f"unknown search mode {raw[:40]!r}; use one of: {', '.join(MODES)}")


def build_view_app(browser: GraphBrowser, *, allowed_hosts: Iterable[str], allowed_origins: Iterable[str]
                   ) -> ViewGuard:
    """The viewer's ASGI app over ``browser`` (GET only; Host and Origin checked against the lists,
    whose entries may end in ``:*`` for any port)."""

    def page(request: Request) -> Response:
        return FileResponse(STATIC / "index.html", headers={"cache-control": "no-store"})

    def overview(request: Request) -> Response:
        try:
            return _json(browser.overview(fresh=request.query_params.get("fresh") == "1").to_dict())
        except GraphError as exc:
            return _error(exc)

    def search(request: Request) -> Response:
        try:
            result = browser.search(request.query_params.get("q", ""), _mode(request), _int(request, "limit", 50))
            return _json(result.to_dict())
        except GraphError as exc:
            return _error(exc)

    def entity(request: Request) -> Response:
        name = request.query_params.get("name", "")
        try:
            found = browser.entity(name, _int(request, "offset", 0))
        except GraphError as exc:
            return _error(exc)
        if found is None:
            return _json({"error": f"Entity with name {name} not found"}, 404)
        return _json(found.to_dict())

    def neighborhood(request: Request) -> Response:
        try:
            area = browser.neighborhood(request.query_params.get("name", ""), _int(request, "hops", 1),
                                        _int(request, "limit", 40))
        except GraphError as exc:
            return _error(exc)
        return _json(area.to_dict())

    get = ["GET"]  # Starlette answers HEAD for GET routes itself
    app = Starlette(routes=[
        Route("/", page, methods=get),
        Route("/api/overview", overview, methods=get),
        Route("/api/search", search, methods=get),
        Route("/api/entity", entity, methods=get),
        Route("/api/neighborhood", neighborhood, methods=get),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ])
    return ViewGuard(app, allowed_hosts=allowed_hosts, allowed_origins=allowed_origins)
