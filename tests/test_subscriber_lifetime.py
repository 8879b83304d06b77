"""A handshake-era session that sent ``resources/subscribe`` leaves ``Subscribers`` when its
connection ends: an HTTP session by DELETE or by the idle timeout, a stdio-like connection when
its serving loop ends. Sending to an ended HTTP session does not fail, so without this each such
session would stay for good (memory, and time on every later notification)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client

from graph_memory.mcp.server import ServerHandle
from test_external_changes import URI, Inbox
from test_http import mcp_client, running
from test_http_limits import answer, open_session, session_headers

from helpers import subscribe_legacy

pytestmark = pytest.mark.anyio

SUBSCRIBE = {"jsonrpc": "2.0", "id": 5, "method": "resources/subscribe", "params": {"uri": URI}}


async def subscribe(client: Client) -> None:
    await subscribe_legacy(client, URI)


async def test_closed_http_sessions_are_not_kept_as_subscribers(db_path: Path) -> None:
    """Three clients subscribe and end their sessions (the SDK client sends DELETE); a later write
    finds no subscriber left."""
    with running(db_path) as srv:
        for _ in range(3):
            async with mcp_client(srv.mcp, mode="legacy") as legacy:
                await subscribe(legacy)
                assert len(srv.server.subscribers) == 1
        async with mcp_client(srv.mcp, mode="legacy") as writer:
            await writer.call_tool("create_entities", {"entities": [
                {"name": "After", "entityType": "t", "observations": []}]})
        await anyio.sleep(0.5)
        assert len(srv.server.subscribers) == 0


def test_many_subscribe_then_delete_sessions_leave_no_subscriber(db_path: Path) -> None:
    """200 raw sessions each subscribe and DELETE: none stays in Subscribers (memory stays flat)."""
    with running(db_path) as srv, httpx2.Client(base_url=srv.url, timeout=30) as http:
        for _ in range(200):
            session = open_session(http)
            subscribed = http.post("/mcp", json=SUBSCRIBE, headers=session_headers(session))
            assert "error" not in answer(subscribed), subscribed.text
            assert http.delete("/mcp", headers=session_headers(session)).status_code == 200
        deadline = time.monotonic() + 10
        while len(srv.server.subscribers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(srv.server.subscribers) == 0


def test_an_idle_reaped_session_leaves_the_subscribers(db_path: Path) -> None:
    """A session that subscribes and then goes silent (no DELETE, no GET stream) is reaped after
    the idle time (1 s here) and leaves Subscribers with it (generous bound: 20 idle periods)."""
    with running(db_path, http_session_idle_seconds=1) as srv, httpx2.Client(base_url=srv.url, timeout=30) as http:
        session = open_session(http)
        subscribed = http.post("/mcp", json=SUBSCRIBE, headers=session_headers(session))
        assert "error" not in answer(subscribed), subscribed.text
        assert len(srv.server.subscribers) == 1
        deadline = time.monotonic() + 20
        while len(srv.server.subscribers) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(srv.server.subscribers) == 0
        reaped = http.post("/mcp", json={"jsonrpc": "2.0", "id": 6, "method": "ping"},
                           headers=session_headers(session))
        assert reaped.status_code == 404  # it was the idle timeout that ended it


async def test_a_stdio_like_session_is_notified_while_connected_and_forgotten_when_it_ends(
        server: Any, server_handle: ServerHandle) -> None:
    """Over ``Server.run`` (what stdio serves; one session for the whole process) the subscriber
    stays for the connection's whole life and still hears of changes, and is forgotten at its end."""
    inbox = Inbox()
    async with Client(server, mode="legacy", message_handler=inbox) as watcher:
        await subscribe(watcher)
        await watcher.call_tool("create_entities", {"entities": [
            {"name": "Seen", "entityType": "t", "observations": []}]})
        with anyio.fail_after(5):
            while not inbox.uris:
                await anyio.sleep(0.05)
        assert inbox.uris == [URI]
        assert len(server_handle.subscribers) == 1
    assert len(server_handle.subscribers) == 0
