"""Drive MemoryMesh 0.3.0 and graph-memory (``MEMORY_TOOLS=memorymesh``) side by side.

Not collected by pytest (it needs a built MemoryMesh clone, which CI does not have). Run it by hand::

    git clone <MemoryMesh repository> /tmp/memorymesh
    (cd /tmp/memorymesh && npm install && npm run build)
    .venv/bin/python tests/manual/compare_memorymesh.py /tmp/memorymesh [--json report.json]

Each scenario starts both servers fresh over stdio with the official Python MCP client:
MemoryMesh from its own copy of ``dist/`` (it keeps its memory at ``dist/data/memory.json``, with
no setting), graph-memory on a new database with MemoryMesh's example schemas. Every step is sent
to both; the script prints, per step, whether both succeeded or failed alike, how ``data`` and
``read_graph`` differ afterwards, and at the end compares the advertised tools, MemoryMesh's
memory file with ``graph-memory export --format memorymesh``, and whether MemoryMesh reads our
export back. Differences are printed, not asserted: README's "Switching from MemoryMesh" lists
the deliberate ones.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from mcp import Client, StdioServerParameters

GRAPH_MEMORY = Path(sys.executable).with_name("graph-memory")
Step = tuple[str, dict[str, Any]]

# -- scenarios ------------------------------------------------------------------------------------

STATIC: list[Step] = [
    ("add_nodes", {"nodes": [
        {"name": "Alice", "nodeType": "person", "metadata": ["Likes tea", "Works at Acme"]},
        {"name": "Bob", "nodeType": "person", "metadata": ["Plays chess"]},
        {"name": "Acme", "nodeType": "company", "metadata": []}]}),
    ("add_nodes", {"nodes": [{"name": "Alice", "nodeType": "person", "metadata": []}]}),
    ("add_edges", {"edges": [
        {"from": "Alice", "to": "Acme", "edgeType": "works_at", "weight": 0.8},
        {"from": "Bob", "to": "Alice", "edgeType": "knows"}]}),
    ("add_edges", {"edges": [{"from": "Alice", "to": "Nobody", "edgeType": "knows"}]}),
    ("add_edges", {"edges": [{"from": "Alice", "to": "Acme", "edgeType": "works_at"}]}),
    ("update_edges", {"edges": [{"from": "Alice", "to": "Acme", "edgeType": "works_at", "newWeight": 0.4}]}),
    ("update_edges", {"edges": [{"from": "Bob", "to": "Alice", "edgeType": "knows", "newEdgeType": "trusts"}]}),
    ("update_edges", {"edges": [{"from": "Bob", "to": "Alice", "edgeType": "trusts", "newFrom": "Acme",
                                 "newTo": "Bob", "newEdgeType": "employs"}]}),
    ("update_edges", {"edges": [{"from": "Bob", "to": "Alice", "edgeType": "nothing", "newWeight": 0.5}]}),
    ("add_edges", {"edges": [{"from": "Alice", "to": "Bob", "edgeType": "rates", "weight": 1.5}]}),
    ("update_edges", {"edges": [{"from": "Alice", "to": "Acme", "edgeType": "works_at", "newWeight": -1}]}),
    ("add_nodes", {"nodes": [{"name": "Dup", "nodeType": "x", "metadata": []},
                             {"name": "Dup", "nodeType": "x", "metadata": []}]}),
    ("add_nodes", {"nodes": [{"name": "Eve", "nodeType": "person", "metadata": []},
                             {"name": "Alice", "nodeType": "person", "metadata": []}]}),
    ("update_nodes", {"nodes": [{"name": "Bob", "nodeType": "employee", "metadata": ["Joined 2024"]}]}),
    ("update_nodes", {"nodes": [{"name": "Carol", "metadata": ["x"]}]}),
    ("add_metadata", {"metadata": [{"nodeName": "Alice", "contents": ["Likes tea", "Speaks French"]}]}),
    ("add_metadata", {"metadata": [{"nodeName": "Nobody", "contents": ["x"]}]}),
    ("delete_metadata", {"deletions": [{"nodeName": "Alice", "metadata": ["Works at Acme", "not there"]}]}),
    ("delete_metadata", {"deletions": [{"nodeName": "Nobody", "metadata": ["x"]}]}),
    ("search_nodes", {"query": "tea"}),
    ("search_nodes", {"query": "EMPLOYEE"}),
    ("open_nodes", {"names": ["Bob", "Nobody"]}),
    ("open_nodes", {"names": []}),
    ("delete_edges", {"edges": [{"from": "Alice", "to": "Acme", "edgeType": "works_at"},
                                {"from": "Alice", "to": "Acme", "edgeType": "missing"}]}),
    ("delete_nodes", {"nodeNames": ["Acme", "Nobody"]}),
    ("read_graph", {}),
]

TYPED: list[Step] = [
    ("add_location", {"location": {"name": "Tavern", "type": "Building", "description": "A warm inn",
                                   "status": "Open"}}),
    ("add_location", {"location": {"name": "Forest", "type": "Wilderness", "description": "Dark woods",
                                   "status": "Quiet"}}),
    ("add_npc", {"npc": {"name": "Grog", "role": "Innkeeper", "status": "Alive", "currentLocation": "Tavern",
                         "description": "Burly", "traits": ["Loud", "Kind"], "mood": "cheerful"}}),
    ("add_npc", {"npc": {"name": "Mira", "role": "Ranger", "status": "Alive", "currentLocation": ["Forest"],
                         "description": "Quiet"}}),
    ("add_npc", {"npc": {"name": "Ghost", "role": "Spirit", "status": "Dead", "currentLocation": "Nowhere",
                         "description": "Pale"}}),
    ("update_npc", {"update_npc": {"name": "Grog", "status": "Injured", "currentLocation": "Forest"}}),
    ("update_npc", {"update_npc": {"name": "Mira", "currentLocation": ["Tavern"]}}),
    ("update_npc", {"update_npc": {"name": "Grog", "metadata": ["Status: Retired"]}}),
    ("update_npc", {"update_npc": {"name": "Nobody", "status": "x"}}),
    ("add_quest", {"quest": {"name": "Q1", "description": "Find it", "status": "Bogus", "objectives": ["a"],
                             "rewards": ["gold"], "relatedNPCs": ["Grog"]}}),
    ("add_temporal", {"temporal": {"name": "Dawn", "time": "06:00"}}),
    ("add_temporal", {"temporal": {"time": "07:00"}}),
    ("delete_npc", {"delete_npc": {"name": "Grog"}}),
    ("delete_npc", {"delete_npc": {"name": "Nobody"}}),
    ("read_graph", {}),
]

# Only steps where both agree by design: the memory file and the export should then hold the same lines.
FILES: list[Step] = [
    ("add_nodes", {"nodes": [
        {"name": "Alice", "nodeType": "person", "metadata": ["Likes tea", "Ünïcödé ✓"]},
        {"name": "Bob", "nodeType": "person", "metadata": []},
        {"name": "Acme", "nodeType": "company", "metadata": ["Founded 1999"]}]}),
    ("add_edges", {"edges": [
        {"from": "Alice", "to": "Acme", "edgeType": "works_at", "weight": 0.25},
        {"from": "Bob", "to": "Alice", "edgeType": "knows"}, {"from": "Acme", "to": "Bob", "edgeType": "employs"}]}),
    ("update_edges", {"edges": [{"from": "Bob", "to": "Alice", "edgeType": "knows", "newEdgeType": "trusts"}]}),
    ("add_metadata", {"metadata": [{"nodeName": "Bob", "contents": ["Plays chess"]}]}),
    ("update_nodes", {"nodes": [{"name": "Acme", "nodeType": "organisation"}]}),
    ("delete_edges", {"edges": [{"from": "Acme", "to": "Bob", "edgeType": "employs"}]}),
    ("read_graph", {}),
]

SCENARIOS = {"static": STATIC, "typed": TYPED, "files": FILES}

# -- servers --------------------------------------------------------------------------------------


def memorymesh_params(clone: Path, root: Path, memory: str = "") -> StdioServerParameters:
    """MemoryMesh on its own copy of ``dist/`` under ``root`` (node_modules linked, memory file set)."""
    shutil.copytree(clone / "dist", root / "dist")
    shutil.copy(clone / "package.json", root / "package.json")  # "type": "module" for node
    os.symlink(clone / "node_modules", root / "node_modules")
    (root / "dist" / "data" / "memory.json").write_text(memory)
    return StdioServerParameters(command="node", args=[str(root / "dist" / "index.js")], cwd=str(root))


def graph_memory_env(clone: Path, root: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_TOOLS="memorymesh", MEMORY_FILE_PATH=str(root / "memory.json"), HOME=str(root),
               MEMORY_SCHEMAS_DIR=str(clone / "dist" / "data" / "schemas"), MEMORY_LOG_LEVEL="warning")
    return env


def graph_memory_params(clone: Path, root: Path) -> StdioServerParameters:
    return StdioServerParameters(command=str(GRAPH_MEMORY), args=[], env=graph_memory_env(clone, root))


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """One call as a comparable record: error flag, structured content (no timestamp), texts."""
    result = await client.call_tool(tool, arguments)
    structured = dict(result.structured_content or {})
    structured.pop("timestamp", None)
    texts = [getattr(c, "text", "") for c in result.content]
    data: Any = structured.get("data")
    if data is None and not result.is_error and texts:
        try:
            data = json.loads(texts[0])
        except ValueError:
            data = texts[0]
    return {"error": result.is_error, "structured": structured, "data": data, "texts": texts}


def graph(data: Any) -> dict[str, Any]:
    """A graph payload in a comparable form: nodes and edges sorted, metadata in order, an edge
    without a weight as weight 1 (MemoryMesh stores none by default; see the README)."""
    if not isinstance(data, dict):
        return {"unreadable": data}
    nodes = sorted((n["name"], n.get("nodeType"), tuple(n.get("metadata", []))) for n in data.get("nodes", []))
    edges = sorted((e["from"], e["to"], e["edgeType"], e.get("weight", 1)) for e in data.get("edges", []))
    return {"nodes": nodes, "edges": edges}


def diff(a: Any, b: Any, path: str = "") -> list[str]:
    """Where ``a`` (MemoryMesh) and ``b`` (graph-memory) differ, one line per difference."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for key in sorted(set(a) | set(b), key=str):
            if key not in b:
                out.append(f"{path}/{key}: only MemoryMesh: {json.dumps(a[key], default=str)[:160]}")
            elif key not in a:
                out.append(f"{path}/{key}: only graph-memory: {json.dumps(b[key], default=str)[:160]}")
            else:
                out += diff(a[key], b[key], f"{path}/{key}")
        return out
    if a != b:
        return [f"{path}: MemoryMesh {json.dumps(a, default=str)[:300]} | graph-memory "
                f"{json.dumps(b, default=str)[:300]}"]
    return []


# -- runs -----------------------------------------------------------------------------------------


async def run_scenario(clone: Path, steps: list[Step], work: Path) -> dict[str, Any]:
    mm_root, gm_root = work / "memorymesh", work / "graph-memory"
    mm_root.mkdir()
    gm_root.mkdir()
    report: list[dict[str, Any]] = []
    async with Client(memorymesh_params(clone, mm_root), mode="legacy") as mm, \
            Client(graph_memory_params(clone, gm_root), mode="legacy") as gm:
        for tool, arguments in steps:
            a, b = await call(mm, tool, arguments), await call(gm, tool, arguments)
            ga, gb = (await call(mm, "read_graph", {}))["data"], (await call(gm, "read_graph", {}))["data"]
            report.append({"tool": tool, "arguments": arguments, "memorymesh": a, "graph_memory": b,
                           "error_agrees": a["error"] == b["error"],
                           "data_diff": [] if a["error"] or b["error"] else diff(a["data"], b["data"]),
                           "graph_diff": diff(graph(ga), graph(gb))})
    subprocess.run([str(GRAPH_MEMORY), "export", "--format", "memorymesh", "--output", str(work / "export.json")],
                   env=graph_memory_env(clone, gm_root), check=True, capture_output=True)
    return {"steps": report, "memorymesh_file": (mm_root / "dist" / "data" / "memory.json").read_text(),
            "export": (work / "export.json").read_text()}


async def read_back(clone: Path, export: str, work: Path) -> dict[str, Any]:
    """MemoryMesh started on a copy of our export: its read_graph."""
    root = work / "readback"
    root.mkdir()
    async with Client(memorymesh_params(clone, root, export), mode="legacy") as mm:
        return await call(mm, "read_graph", {})


async def import_theirs(clone: Path, memory: str, work: Path) -> dict[str, Any]:
    """graph-memory started on a copy of MemoryMesh's memory file (first-start import): its read_graph."""
    root = work / "import"
    root.mkdir()
    (root / "memory.json").write_text(memory)
    # `graph-memory import` first, for its message if it refuses the file (the server would not start).
    checked = subprocess.run([str(GRAPH_MEMORY), "import", "--dry-run", str(root / "memory.json")],
                             env=graph_memory_env(clone, root), capture_output=True, text=True)
    if checked.returncode != 0:
        return {"error": True, "data": None, "texts": [checked.stderr.strip()[-400:]]}
    async with Client(graph_memory_params(clone, root), mode="legacy") as gm:
        return await call(gm, "read_graph", {})


def file_lines(text: str) -> list[dict[str, Any]]:
    """A memory file's lines, sorted, keys sorted; an edge without a weight (MemoryMesh stores
    none by default) read as weight 1, as graph-memory reads it."""
    lines = [json.loads(line) for line in text.splitlines() if line.strip()]
    for line in lines:
        if line.get("type") == "edge":
            line.setdefault("weight", 1)
    return sorted(lines, key=lambda line: json.dumps(line, sort_keys=True))


async def compare_tools(clone: Path, work: Path) -> list[str]:
    out: list[str] = []
    (work / "tools-mm").mkdir()
    (work / "tools-gm").mkdir()
    async with Client(memorymesh_params(clone, work / "tools-mm"), mode="legacy") as mm, \
            Client(graph_memory_params(clone, work / "tools-gm"), mode="legacy") as gm:
        a = {t.name: t for t in (await mm.list_tools()).tools}
        b = {t.name: t for t in (await gm.list_tools()).tools}
    out += [f"tool only in MemoryMesh: {n}" for n in sorted(set(a) - set(b))]
    out += [f"tool only in graph-memory: {n}" for n in sorted(set(b) - set(a))]
    for name in sorted(set(a) & set(b)):
        out += [f"{name} input{line}" for line in diff(_bare(a[name].input_schema), _bare(b[name].input_schema))]
    return out


def _bare(schema: Any) -> Any:
    """A JSON schema without its prose (descriptions, titles) and without $schema."""
    if isinstance(schema, dict):
        return {k: _bare(v) for k, v in schema.items() if k not in ("description", "title", "$schema")}
    if isinstance(schema, list):
        return [_bare(v) for v in schema]
    return schema


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("clone", type=Path, help="a MemoryMesh clone after npm install && npm run build")
    parser.add_argument("--json", type=Path, help="write the full report here")
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), action="append")
    args = parser.parse_args()
    clone = args.clone.resolve()
    full: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        print("== advertised tools")
        full["tools"] = await compare_tools(clone, work)
        print("\n".join(f"  {line}" for line in full["tools"]) or "  identical")
        for name in args.scenario or sorted(SCENARIOS):
            (work / name).mkdir()
            result = await run_scenario(clone, SCENARIOS[name], work / name)
            full[name] = result
            print(f"== scenario {name}")
            for i, step in enumerate(result["steps"]):
                a, b = step["memorymesh"], step["graph_memory"]
                status = "ok" if not a["error"] else "error"
                flag = "" if step["error_agrees"] else (
                    f"  <-- MemoryMesh {'error' if a['error'] else 'ok'}, graph-memory "
                    f"{'error' if b['error'] else 'ok'}")
                print(f"  {i:2} {step['tool']} {status}{flag}")
                for line in a["texts"] if a["error"] else []:
                    print(f"       MemoryMesh: {line[:200]}")
                for line in b["texts"] if b["error"] else []:
                    print(f"       graph-memory: {line[:200]}")
                for line in step["data_diff"]:
                    print(f"       data{line}")
                for line in step["graph_diff"]:
                    print(f"       graph{line}")
            ours, theirs = file_lines(result["export"]), file_lines(result["memorymesh_file"])
            print("  memory file vs export:", "identical lines" if ours == theirs else "differ")
            for line in diff({"lines": theirs}, {"lines": ours}):
                print(f"       {line}")
            back = await read_back(clone, result["export"], work / name)
            last = result["steps"][-1]["graph_memory"]["data"]
            print("  MemoryMesh reads our export:", "error" if back["error"] else "ok",
                  "(same graph)" if graph(back["data"]) == graph(last) else "(graph differs)")
            for line in diff(graph(back["data"]), graph(last)):
                print(f"       {line}")
            imported = await import_theirs(clone, result["memorymesh_file"], work / name)
            theirs_last = result["steps"][-1]["memorymesh"]["data"]
            if imported["error"]:
                print(f"       {imported['texts'][0]}")
            print("  graph-memory imports MemoryMesh's file:", "error" if imported["error"] else "ok",
                  "(same graph)" if graph(imported["data"]) == graph(theirs_last) else "(graph differs)")
            for line in diff(graph(theirs_last), graph(imported["data"])):
                print(f"       {line}")
    if args.json:
        args.json.write_text(json.dumps(full, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
