"""``graph-memory view``: a read-only web page over the database (see :mod:`graph_memory.view.app`)."""

from __future__ import annotations

import contextlib
import signal
import socket
import sys
import threading
import webbrowser
from collections.abc import Iterator

import uvicorn

from graph_memory.browse import GraphBrowser
from graph_memory.errors import GraphError
from graph_memory.logs import get_logger
from graph_memory.settings import Settings

__all__ = ["serve_view", "view_url"]

log = get_logger("graph_memory.view")
_LOOPBACK = ("127.0.0.1", "localhost", "::1")


def view_url(host: str, port: int) -> str:
    """The page's URL for the bound ``host:port`` (a wildcard bind as its loopback address)."""
    host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
    return f"http://{f'[{host}]' if ':' in host else host}:{port}/"


def _listen(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port`` (port 0: a free one). Raises GraphError."""
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        family, kind, proto, _, address = infos[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        raise GraphError(f"cannot listen on {host}:{port}: {exc.strerror or exc}; choose another --port "
                         f"(0 picks a free one) or --host") from exc
    return sock


def serve_view(settings: Settings, *, host: str = "127.0.0.1", port: int = 0, open_browser: bool = True) -> None:
    """Serve the read-only page for ``settings``' database on ``host:port`` until Ctrl-C/SIGTERM;
    print its URL on stdout and, with ``open_browser``, open it in the default browser.

    Raises:
        StoreError, PendingMigrationsError: the database cannot be opened read-only.
        GraphError: the address cannot be bound.
    """
    from graph_memory.view.app import build_view_app

    browser = GraphBrowser.open(settings)
    try:
        sock = _listen(host, port)
        bound = sock.getsockname()[1]
        hosts = list(settings.allowed_hosts)
        origins = list(settings.allowed_origins)
        if host not in (*_LOOPBACK, "0.0.0.0", "::", ""):
            named = f"[{host}]" if ":" in host else host
            hosts.append(f"{named}:{bound}")
            origins.append(f"http://{named}:{bound}")
        elif host not in _LOOPBACK:
            log.warning("view_on_all_interfaces", host=host, hint="other machines can reach the port; only the "
                        "Host names of MEMORY_ALLOWED_HOSTS are answered")
        app = build_view_app(browser, allowed_hosts=hosts, allowed_origins=origins)
        config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off", ws="none",
                                server_header=False, timeout_graceful_shutdown=2)
        server = _ViewServer(config)
        url = view_url(host, bound)
        database = settings.database_label   # a PostgreSQL URL (password masked) or the SQLite file
        print(f"graph-memory view of {database}: {url} (read-only; Ctrl-C stops it)", flush=True)
        log.info("view_listening", url=url, database=str(database))
        if open_browser:
            threading.Thread(target=_open, args=(url,), daemon=True).start()
        server.run(sockets=[sock])
    finally:
        browser.close()
        sys.stdout.flush()


class _ViewServer(uvicorn.Server):
    """uvicorn's server on which Ctrl-C or SIGTERM ends :func:`serve_view` normally (exit status
    0), instead of uvicorn re-raising the signal once it has stopped."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield
            return
        original = {sig: signal.signal(sig, self.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in original.items():
                signal.signal(sig, handler)


# Text-mode browsers Python's webbrowser falls back to without a display: they would take over
# the terminal the view runs in, so the URL is only printed then.
_CONSOLE_BROWSERS = frozenset({"www-browser", "links", "elinks", "lynx", "w3m"})


def _open(url: str) -> None:
    try:
        browser = webbrowser.get()
        if isinstance(browser, webbrowser.GenericBrowser) and browser.name in _CONSOLE_BROWSERS:
            log.info("view_no_browser", hint="no graphical browser; open the URL yourself")
        elif not browser.open(url):
            log.info("view_no_browser", hint="open the URL yourself")
    except webbrowser.Error as exc:
        log.info("view_no_browser", error=str(exc))
