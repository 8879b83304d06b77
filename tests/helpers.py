"""Small helpers shared by the MCP-level tests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import warnings
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from graph_memory.mcp.tools import GRAPH_OUT

REPO = Path(__file__).resolve().parents[1]
# Copies of shared/data/upstream-memory.jsonl (a file the reference server really wrote) and of
# shared/docs/upstream-tools.json (its advertised schemas), so the tests never depend on a folder
# outside the repository.
UPSTREAM_SAMPLE = REPO / "tests" / "data" / "upstream-memory.jsonl"
UPSTREAM_TOOLS = REPO / "tests" / "data" / "upstream-tools.json"


def sample_path() -> Path:
    """The reference server's real memory file in shared/ (skips the test when absent)."""
    if not UPSTREAM_SAMPLE.exists():
        pytest.skip(f"{UPSTREAM_SAMPLE} not present")
    return UPSTREAM_SAMPLE


_FIELDS = "Fields: #/definitions/"


def checked(schema: Any) -> Any:
    """``schema`` with every item that points to its fields (``graph_memory.mcp.tools.fields_in``:
    advertised by its required keys, described ``Fields: #/definitions/<name>``) replaced by a
    ``$ref`` to them: the schema every reply is checked against field by field in the tests."""
    if isinstance(schema, list):
        return [checked(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    description = schema.get("description")
    if isinstance(description, str) and description.startswith(_FIELDS):
        return {"$ref": description.removeprefix("Fields: ")}
    return {key: checked(value) for key, value in schema.items()}


def undeclared_required(schema: Any, path: str = "#") -> list[str]:
    """Where ``schema`` (definitions included) lists a ``required`` key its own schema object does
    not declare in ``properties``: the schemas Ajv's strict mode (the TypeScript SDK's documented
    strict validator; ``strictRequired``) refuses to compile, as ``path: key`` strings."""
    if isinstance(schema, list):
        return [found for i, item in enumerate(schema) for found in undeclared_required(item, f"{path}/{i}")]
    if not isinstance(schema, dict):
        return []
    declared = schema.get("properties", {})
    found = [f"{path}: {key}" for key in schema.get("required", []) if key not in declared]
    return found + [hit for key, value in schema.items() for hit in undeclared_required(value, f"{path}/{key}")]


# Every field of a reading tool's reply, as its output schema's definitions declare them.
GRAPH_REPLY = jsonschema.Draft7Validator(checked(GRAPH_OUT))


async def call(client: Any, tool: str, arguments: dict[str, Any]) -> Any:
    """Call ``tool``; assert it succeeded, that its text equals its structured content
    (or the bare array for the three tools whose text is upstream's bare array) and, for the
    reading tools, that every field is as their output schema's definitions declare."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    text = json.loads(result.content[0].text)
    structured = result.structured_content
    if tool in ("read_graph", "search_nodes", "open_nodes") and "entities" in structured:
        GRAPH_REPLY.validate(structured)
    if tool in ("create_entities", "create_relations", "add_observations"):
        (only_value,) = structured.values()
        assert text == only_value
    else:
        assert text == structured
    return structured


async def call_error(client: Any, tool: str, arguments: dict[str, Any]) -> str:
    """Call ``tool``; assert it failed as a tool result and return its message."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, f"{tool} unexpectedly succeeded: {result.structured_content}"
    assert len(result.content) == 1
    return str(result.content[0].text)


def names(graph: dict[str, Any], key: str = "entities") -> list[str]:
    """Entity names of a graph payload, in order."""
    return [e["name"] for e in graph[key]]


def upstream_oracle(path: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The graph a reader of upstream's file should see: entity lines merged by name (first type,
    observations unioned in order), relations de-duplicated, in file order."""
    entities: dict[str, dict[str, Any]] = {}
    relations: dict[tuple[str, str, str], dict[str, Any]] = {}
    for line in path.read_bytes().split(b"\n"):
        if not line.strip():
            continue
        item = json.loads(line)
        if item["type"] == "entity":
            entity = entities.setdefault(item["name"], {"name": item["name"], "entityType": item["entityType"],
                                                        "observations": []})
            for obs in item["observations"]:
                if obs not in entity["observations"]:
                    entity["observations"].append(obs)
        elif item["type"] == "relation":
            key = (item["from"], item["to"], item["relationType"])
            relations.setdefault(key, {"from": key[0], "to": key[1], "relationType": key[2]})
    return list(entities.values()), list(relations.values())


async def subscribe_legacy(client: Any, uri: str = "memory://knowledge-graph") -> None:
    """``resources/subscribe`` from a handshake-era client (deprecated in the newest protocol,
    hence the silenced warning)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        await client.subscribe_resource(uri)


def json_values(text: Any, *, nulls: bool = True, nan: bool = False, size: int = 5, leaves: int = 40) -> Any:
    """A hypothesis strategy of JSON-like values (nested lists and ``str``-keyed dicts) whose
    strings come from ``text``; ``nulls`` adds None, ``nan`` NaN and the infinities."""
    from hypothesis import strategies as st

    scalars = (st.booleans() | st.integers(min_value=-(2**63), max_value=2**63 - 1) | text
               | st.floats(allow_nan=nan, allow_infinity=nan))
    return st.recursive(st.none() | scalars if nulls else scalars,
                        lambda inner: st.lists(inner, max_size=size) | st.dictionaries(text, inner, max_size=size),
                        max_leaves=leaves)


def install_debian_package(package: str) -> str | None:
    """Install Debian's ``package`` with apt-get when the tests run as root on such a machine (as
    ``.ci/docker-setup.sh`` provides Docker): None when done, else why not."""
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        return f"{package} is missing: install Debian's package, apt-get install -y --no-install-recommends {package}"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    command = [apt, "install", "-y", "-q", "--no-install-recommends", package]
    if subprocess.run(command, env=env, capture_output=True, timeout=1800).returncode != 0:
        subprocess.run([apt, "update", "-q"], env=env, capture_output=True, timeout=600)
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            return f"apt-get install {package} failed: {done.stderr[-500:]}"
    return None
