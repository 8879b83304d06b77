"""Shared fixtures: a real SQLite file per test, the MCP server over it, and in-process clients.

Every test gets a fresh database under its own tmp_path; no state is shared between tests.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from graph_memory.db.backend import SqliteBackend
from graph_memory.db.store import Store
from graph_memory.logs import configure_logging
from graph_memory.mcp.server import ServerHandle, build_server
from graph_memory.service import MemoryService

configure_logging("warning", "console")


@pytest.fixture(autouse=True)
def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """No MEMORY_* variable of the developer's shell leaks into a test."""
    for key in list(os.environ):
        if key.startswith("MEMORY_"):
            monkeypatch.delenv(key)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """Path of a not-yet-created database file."""
    return tmp_path / "memory.db"


@pytest.fixture
def store(db_path: Path) -> Iterator[Store]:
    """A freshly migrated store on a real file."""
    s = Store.open(db_path)
    yield s
    s.close()


@pytest.fixture
def memory(store: Store) -> MemoryService:
    return MemoryService(SqliteBackend(store))


@pytest.fixture
def server_handle(memory: MemoryService) -> ServerHandle:
    """The server over ``memory`` with its subscribers, listen handler and pollers."""
    return build_server(memory)


@pytest.fixture
def server(server_handle: ServerHandle) -> Any:
    """The SDK server to connect in-process clients to."""
    return server_handle.server


@pytest.fixture
async def client(server: Any) -> AsyncIterator[Any]:
    """An in-process MCP client (2026-07-28 protocol generation)."""
    from mcp import Client

    async with Client(server) as c:
        yield c


@pytest.fixture
async def legacy_client(server: Any) -> AsyncIterator[Any]:
    """An in-process MCP client speaking the handshake-era protocol."""
    from mcp import Client

    async with Client(server, mode="legacy") as c:
        yield c
