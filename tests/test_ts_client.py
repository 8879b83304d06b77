"""Interoperability with the official TypeScript MCP SDK, the client of Claude Desktop and the
MCP Inspector: it validates our structured results against our output schemas with its own
JSON Schema validator. Needs node and npm (the SDK is installed from the npm registry once per
session); skipped with the reason when either is missing or the registry cannot be reached."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

SDK = "@modelcontextprotocol/sdk@1.32.2"
SCRIPT = Path(__file__).parent / "clients" / "ts_client.mjs"
EXE = Path(sys.executable).with_name("graph-memory")


@pytest.fixture(scope="session")
def ts_sdk(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("node") is None or shutil.which("npm") is None:
        pytest.skip("node/npm not installed: the TypeScript SDK interop test needs them")
    folder = tmp_path_factory.mktemp("ts-sdk")
    install = subprocess.run(["npm", "install", "--silent", "--no-audit", "--no-fund", "--prefix", str(folder), SDK],
                             capture_output=True, text=True, timeout=300)
    if install.returncode != 0:
        pytest.skip(f"npm could not install {SDK}: {install.stderr.strip()[-300:]}")
    shutil.copy(SCRIPT, folder / SCRIPT.name)
    return folder


def test_typescript_sdk_client_drives_every_tool(ts_sdk: Path, tmp_path: Path) -> None:
    run = subprocess.run(["node", str(ts_sdk / SCRIPT.name), str(EXE), str(tmp_path / "ts.db")],
                         capture_output=True, text=True, timeout=120, cwd=ts_sdk)
    assert run.returncode == 0, run.stderr
    steps: list[tuple[str, Any]] = [(s["step"], s["value"]) for s in map(json.loads, run.stdout.splitlines())]
    got = dict(steps)
    assert got["server"]["name"] == "graph-memory"
    assert {"create_entities", "search_nodes", "update_observations"} <= set(got["tools"])
    errors = [(name, value["error"]) for name, value in steps if isinstance(value, dict) and "error" in value]
    assert errors == [("create_relations", "Entity with name Zed not found")]
    searches = [value for name, value in steps if name == "search_nodes"]
    assert [[e["name"] for e in s["entities"]] for s in searches] == [["Bob"], ["Bob"]]
    assert got["delete_entities"]["deletedEntities"] == ["Bob"]
    final = {"entities": [{"name": "Ada", "entityType": "person", "observations": ["İstanbul trip"]}],
             "relations": [], "neighbors": []}
    assert got["read_graph"] == final
    assert got["resource"] == final


CUT_EMOJI = Path(__file__).parent / "clients" / "ts_cut_emoji.mjs"


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_typescript_sdk_client_storing_a_cut_emoji_gets_its_reply_and_u_fffd(ts_sdk: Path, tmp_path: Path,
                                                                             transport: str) -> None:
    """``"hi 😀".slice(0, 4)`` leaves half a surrogate pair, which the SDK sends as ``"\\ud83d"``:
    the call is answered at once (not after the client's timeout) and stores U+FFFD."""
    shutil.copy(CUT_EMOJI, ts_sdk / CUT_EMOJI.name)
    database = tmp_path / "ts.db"
    if transport == "stdio":
        run = subprocess.run(["node", str(ts_sdk / CUT_EMOJI.name), "stdio", str(EXE), str(database)],
                             capture_output=True, text=True, timeout=120, cwd=ts_sdk)
    else:
        from test_http import TOKEN, serve_process  # `graph-memory serve --transport http`, with a token

        with serve_process(tmp_path, database) as server:
            run = subprocess.run(["node", str(ts_sdk / CUT_EMOJI.name), "http", f"{server.url}/mcp", TOKEN],
                                 capture_output=True, text=True, timeout=120, cwd=ts_sdk)
        warnings = [e for e in server.stderr_lines() if e["event"] == "lone_surrogates_replaced"]
        assert [(w["transport"], w["replaced"], w["tool"]) for w in warnings] == [("http", 1, "create_entities")]
    assert run.returncode == 0, run.stderr
    got = {s["step"]: s["value"] for s in map(json.loads, run.stdout.splitlines())}
    stored = {"name": "Ada", "entityType": "person", "observations": ["hi \ufffd", "whole 😀"]}
    assert got["create_entities"] == {"entities": [stored]}
    assert got["milliseconds"] < 10_000
    assert got["read_graph"]["entities"] == [stored]


READING = Path(__file__).parent / "clients" / "ts_reading.mjs"


def test_typescript_sdk_client_reads_in_pages_and_views_and_gets_size_errors(ts_sdk: Path, tmp_path: Path) -> None:
    """Issue 15 through the client of Node hosts: its own schema validation accepts the summary
    view, timestamps and nextCursor; paging reads everything; an oversized reply is a tool error."""
    shutil.copy(READING, ts_sdk / READING.name)
    run = subprocess.run(["node", str(ts_sdk / READING.name), str(EXE), str(tmp_path / "ts.db")],
                         capture_output=True, text=True, timeout=120, cwd=ts_sdk)
    assert run.returncode == 0, run.stderr
    got = {s["step"]: s["value"] for s in map(json.loads, run.stdout.splitlines())}
    assert "MEMORY_MAX_REPLY_BYTES" in got["too_large"]["error"] and "nextCursor" in got["too_large"]["error"]
    assert got["summary"]["entities"] == [{"name": "E0", "entityType": "thing", "observationCount": 1},
                                          {"name": "E1", "entityType": "thing", "observationCount": 1}]
    assert "nextCursor" in got["summary"]
    e1 = got["timestamps"]["entities"][0]
    assert e1["createdAt"] and e1["observationTimes"][0] == {"createdAt": e1["createdAt"], "updatedAt": e1["updatedAt"]}
    assert [e["name"] for e in got["since"]["entities"]] == ["E0", "E1", "E2"] and "nextCursor" in got["since"]
    assert got["pages"]["entities"] == [f"E{i}" for i in range(60)]
    assert got["pages"]["relations"] == 59 and got["pages"]["errors"] == [] and got["pages"]["count"] == 5
    assert "not a cursor this server issued" in got["bad_cursor"]["error"]


STRICT = Path(__file__).parent / "clients" / "ts_strict.mjs"
EXAMPLE_SCHEMAS = Path(__file__).resolve().parents[1] / "examples" / "schemas"


@pytest.mark.parametrize("profile", ["reference", "memorymesh"])
def test_every_advertised_schema_compiles_in_the_typescript_sdks_strict_validator(ts_sdk: Path, tmp_path: Path,
                                                                                 profile: str) -> None:
    """A host may pass the TypeScript SDK the strict Ajv its documentation shows; it compiles every
    output schema when it lists the tools and refuses the whole listing if one fails (strictRequired:
    each ``required`` key declared in its schema object's ``properties``; found by QA on the reading
    tools' items). Typed tools from the example schema files are listed too."""
    shutil.copy(STRICT, ts_sdk / STRICT.name)
    run = subprocess.run(["node", str(ts_sdk / STRICT.name), str(EXE), str(tmp_path / "strict.db"), profile,
                          str(EXAMPLE_SCHEMAS)], capture_output=True, text=True, timeout=120, cwd=ts_sdk)
    assert run.returncode == 0, run.stderr
    got = {s["step"]: s["value"] for s in map(json.loads, run.stdout.splitlines())}
    assert isinstance(got["tools"], list), got["tools"]
    assert {"read_graph", "search_nodes", "open_nodes", "add_npc"} <= set(got["tools"])
    keys = {"reference": ["entities", "relations", "neighbors"], "memorymesh": ["timestamp", "data", "actionTaken"]}
    for tool in ("read_graph", "search_nodes", "open_nodes"):
        assert isinstance(got[tool], list) and set(keys[profile]) <= set(got[tool]), (tool, got[tool])
