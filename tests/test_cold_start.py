"""Cold start: a stdio server imports nothing its first reply does not need (issue 15, item 8).

Pinned without timing: a real server process answers ``initialize`` on stdio, and what it
imported meanwhile is compared with what the SDK's own import brings in. Timings are in
docs/benchmarks.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# Ours or optional, never needed to answer on stdio: the HTTP transport, the web view and its
# browsing, the PostgreSQL backend, the other tool profile and typed tools (no schemas given),
# CLI-only helpers (discovery of reference files, progress bars), the fts-mode query parser.
NEVER_AT_START = ("graph_memory.mcp.http", "graph_memory.view", "graph_memory.browse", "graph_memory.db.postgres",
                  "psycopg", "psycopg_pool", "graph_memory.mcp.memorymesh", "graph_memory.mcp.typed",
                  "graph_memory.discover", "tqdm", "apsw.fts5query")
# Not needed either, but the SDK's `import mcp` itself imports them (its client, HTTP transports,
# pydantic's plugin loader): pinned only while the SDK does not.
UNLESS_THE_SDK_DOES = ("uvicorn", "starlette", "sse_starlette", "httpx", "httpx2", "importlib.metadata")

_SERVE = """
import json, sys
from graph_memory.cli import main
status = main([])
with open(sys.argv[1], "w") as out:
    json.dump(sorted(sys.modules), out)
sys.exit(status)
"""

_INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}})


def _modules_of(code: str, tmp_path: Path, stdin: str = "", env: dict[str, str] | None = None) -> tuple[set[str], str]:
    listing = tmp_path / "modules.json"
    done = subprocess.run([sys.executable, "-c", code, str(listing)], input=stdin.encode(), capture_output=True,
                          env=env, timeout=60, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    return set(json.loads(listing.read_text())), done.stdout.decode()


def _loaded(modules: set[str], name: str) -> bool:
    return any(m == name or m.startswith(name + ".") for m in modules)


def test_a_stdio_start_imports_nothing_its_first_reply_does_not_need(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_FILE_PATH=str(tmp_path / "memory.db"), MEMORY_LOG_LEVEL="warning")
    _modules_of(_SERVE, tmp_path, _INITIALIZE + "\n", env)   # the start that creates the database
    ours, stdout = _modules_of(_SERVE, tmp_path, _INITIALIZE + "\n", env)   # an ordinary start
    reply = json.loads(stdout.splitlines()[0])
    assert reply["id"] == 1 and reply["result"]["serverInfo"]["name"] == "graph-memory"
    sdk, _ = _modules_of("import json, sys\nimport mcp.server.lowlevel\n"
                         "json.dump(sorted(sys.modules), open(sys.argv[1], 'w'))", tmp_path)
    assert "graph_memory.mcp.server" in ours
    unneeded = [name for name in NEVER_AT_START if _loaded(ours, name)]
    unneeded += [name for name in UNLESS_THE_SDK_DOES if _loaded(ours, name) and not _loaded(sdk, name)]
    assert unneeded == []


@pytest.mark.parametrize("variable", ["MEMORY_SCHEMAS_DIR", "MEMORY_TOOLS"])
def test_typed_tools_and_the_memorymesh_profile_still_load_when_asked_for(tmp_path: Path, variable: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_FILE_PATH=str(tmp_path / "memory.db"), MEMORY_LOG_LEVEL="warning")
    schemas = tmp_path / "schemas"
    schemas.mkdir()
    env[variable] = str(schemas) if variable == "MEMORY_SCHEMAS_DIR" else "memorymesh"
    modules, stdout = _modules_of(_SERVE, tmp_path, _INITIALIZE + "\n", env)
    assert json.loads(stdout.splitlines()[0])["id"] == 1
    wanted = "graph_memory.mcp.typed" if variable == "MEMORY_SCHEMAS_DIR" else "graph_memory.mcp.memorymesh"
    assert _loaded(modules, wanted)
