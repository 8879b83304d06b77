"""Shared fixtures: a real SQLite file per test, the MCP server over it, and in-process clients.

Every test gets a fresh database under its own tmp_path; no state is shared between tests.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from graph_memory.db.backend import Backend, SqliteBackend, open_backend
from graph_memory.db.store import Store
from graph_memory.logs import configure_logging
from graph_memory.mcp.server import ServerHandle, build_server
from graph_memory.service import MemoryService
from graph_memory.settings import Settings

from pgcluster import Cluster, find_bin

configure_logging("warning", "console")

# The suite runs as a user with the venv activated: graph-memory on PATH, so the commands messages
# suggest start with the bare name (graph_memory.hints.program; its other cases are tested there).
os.environ["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


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
def memory(graph_backend: Backend) -> MemoryService:
    return MemoryService(graph_backend)


# -- both backends ----------------------------------------------------------------------------------
#
# A test (or module, with ``pytestmark``) marked ``both_backends`` that uses ``graph_backend`` (or
# ``memory``, or anything built on them) runs once on SQLite and once on PostgreSQL; unmarked, on
# SQLite only. The PostgreSQL cluster is started once per session (tests/pgcluster.py) and every
# test gets a database of its own.


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "backend_kind" in metafunc.fixturenames and metafunc.definition.get_closest_marker("both_backends"):
        metafunc.parametrize("backend_kind", ["sqlite", "postgres"], indirect=True)


@pytest.fixture
def backend_kind(request: pytest.FixtureRequest) -> str:
    """``sqlite`` or ``postgres`` (see ``both_backends``)."""
    return str(getattr(request, "param", "sqlite"))


@pytest.fixture
def database_settings(request: pytest.FixtureRequest, backend_kind: str, db_path: Path) -> Settings:
    """Settings naming the test's database of ``backend_kind`` (``db_path``, or a new PostgreSQL
    database of the session's cluster)."""
    if backend_kind == "sqlite":
        return Settings.load(file_path=db_path)
    url = request.getfixturevalue("postgres_url")
    return Settings.load(file_path=db_path.parent / "memory.jsonl", database_url=url)


@pytest.fixture
def graph_backend(request: pytest.FixtureRequest, backend_kind: str, database_settings: Settings) -> Iterator[Backend]:
    """A freshly migrated backend of ``backend_kind``: SQLite over the ``store`` fixture, or
    PostgreSQL on a new database of the session's cluster."""
    if backend_kind == "sqlite":
        yield SqliteBackend(request.getfixturevalue("store"))
        return
    backend = open_backend(database_settings)
    yield backend
    backend.close()


def _require_postgres(reason: str) -> None:
    """Fail in CI (the PostgreSQL tests must run there), skip with ``reason`` elsewhere."""
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"{reason}; CI must run the PostgreSQL backend's tests")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_cluster() -> Iterator[Cluster]:
    """A throwaway PostgreSQL cluster for the session (stopped and removed at its end)."""
    for key in [k for k in os.environ if k.startswith("PG")]:
        del os.environ[key]  # libpq reads PG* variables: none of the developer's may leak in
    bindir = find_bin()
    if bindir is None:
        _require_postgres("PostgreSQL server binaries (initdb, pg_ctl) are not installed: apt-get install postgresql")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _require_postgres("psycopg is not installed: pip install -e '.[test]'")
    assert bindir is not None
    cluster = Cluster.start(bindir)
    yield cluster
    cluster.stop()


@pytest.fixture
def postgres_url(postgres_cluster: Cluster) -> Iterator[str]:
    """The URL of a new, empty database owned by an ordinary role (dropped after the test)."""
    name = postgres_cluster.create_database()
    yield postgres_cluster.url(name)
    postgres_cluster.drop_database(name)


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
