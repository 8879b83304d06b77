"""``python -m bench.server_time``: our server's own time for graph-shaped replies, for one or more
source trees side by side (issue 15).

Four operations on a ``bench.datagen`` graph: the 2.5 % search (``search_nodes "Vilnius"``), the
same in the summary view, a 100-entity ``read_graph`` page and the whole ``read_graph``. Per tree:

- raw: a bare JSON-RPC client on a stdio server's pipes (no schema check, a linear reader), min
  and median of ``--rounds`` calls to the reply's last byte, and the first byte; the trees' servers
  answer in turn, and their lines must be byte-identical. The search, summary and page run at
  the default reply bound, the whole read_graph with ``MEMORY_MAX_REPLY_BYTES=0``.
- in-process (``--in-process``): the tool run, ``Outcome.render`` and ``dumps_line``, min of
  ``--rounds`` each, in a process of the tree's own.

Example::

    git archive 9c57668 | tar -x -C /tmp/base
    python -m bench.server_time --db /tmp/g10k.db /tmp/base .
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import servers
from bench.replies import RawSession, add_tree_arguments

OPERATIONS: dict[str, dict[str, Any]] = {
    "search 2.5 %": {"name": "search_nodes", "arguments": {"query": "Vilnius"}},
    "search summary": {"name": "search_nodes", "arguments": {"query": "Vilnius", "view": "summary"}},
    "read_graph page 100": {"name": "read_graph", "arguments": {"limit": 100}},
    "read_graph whole": {"name": "read_graph", "arguments": {}},
}
UNBOUNDED = {"read_graph whole"}


def _env(tree: Path, database: Path, unbounded: bool) -> dict[str, str]:
    env = servers.clean_env(MEMORY_FILE_PATH=str(database), PYTHONPATH=os.pathsep.join(
        [str(tree.resolve() / "service"), str(Path(__file__).resolve().parents[1])]))
    if unbounded:
        env["MEMORY_MAX_REPLY_BYTES"] = "0"
    return env


def measure_raw(trees: list[Path], database: Path, rounds: int, tmp: Path) -> None:
    for unbounded in (False, True):
        sessions = []
        for i, tree in enumerate(trees):
            copy = tmp / f"raw{i}.db"
            shutil.copy(database, copy)
            sessions.append(RawSession([sys.executable, "-m", "graph_memory"], _env(tree, copy, unbounded)))
        try:
            for label, params in OPERATIONS.items():
                if (label in UNBOUNDED) != unbounded:
                    continue
                times: list[list[tuple[float, float]]] = [[] for _ in trees]
                lines: list[bytes] = [b""] * len(trees)
                for _ in range(rounds if not unbounded else max(3, rounds // 3)):
                    for i, server in enumerate(sessions):
                        first, last, lines[i] = server.call(1, "tools/call", params)
                        times[i].append((last, first))
                if any(line != lines[0] for line in lines):
                    print(f"{label}: the trees' replies differ", file=sys.stderr)
                for tree, measured in zip(trees, times, strict=True):
                    print(f"raw  {label:20s} {str(tree)[-24:]:>24}: last byte min {min(measured)[0] * 1e3:8.2f} ms "
                          f"median {statistics.median(t[0] for t in measured) * 1e3:8.2f}  first byte min "
                          f"{min(t[1] for t in measured) * 1e3:8.2f}  ({len(lines[0]):,} B)", flush=True)
        finally:
            for server in sessions:
                server.close()


def in_process(database: Path, rounds: int) -> None:
    """Time the tool run, render and dumps_line of each operation in this process (the tree's
    ``graph_memory`` is on ``PYTHONPATH``)."""
    from graph_memory.db.backend import open_backend
    from graph_memory.mcp.jsontext import dumps_line
    from graph_memory.mcp.replies import reply_building
    from graph_memory.mcp.tools import TOOLS
    from graph_memory.service import Limits, MemoryService
    from graph_memory.settings import Settings

    settings = Settings(file_path=database, max_reply_bytes=0)
    memory = MemoryService(open_backend(settings, "migrate"), Limits.from_settings(settings), {})
    specs = {spec.name: spec for spec in TOOLS}
    for label, params in OPERATIONS.items():
        best = [float("inf")] * 3
        for _ in range(rounds if label not in UNBOUNDED else max(3, rounds // 3)):
            started = time.perf_counter()
            with reply_building():
                outcome = specs[params["name"]].run(memory, params["arguments"])
                ran = time.perf_counter()
                text = outcome.render()
                rendered = time.perf_counter()
            result = {"content": [{"type": "text", "text": text}], "structuredContent": outcome.structured,
                      "isError": False}
            dumps_line({"jsonrpc": "2.0", "id": 1, "result": result})
            done = time.perf_counter()
            del outcome, text, result
            best = [min(b, t) for b, t in zip(best, (ran - started, rendered - ran, done - rendered), strict=True)]
        print(f"  {label:20s} run {best[0] * 1e3:8.2f}  render {best[1] * 1e3:7.2f}  "
              f"dumps_line {best[2] * 1e3:7.2f} ms", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.server_time", description=__doc__.split("\n\n")[0])
    add_tree_arguments(parser, "*")
    parser.add_argument("--rounds", type=int, default=21, help="calls per operation (whole read_graph: a third)")
    parser.add_argument("--in-process", action="store_true", help=argparse.SUPPRESS)   # the child's side
    args = parser.parse_args(argv)
    if args.in_process:
        in_process(args.db, args.rounds)
        return 0
    if not args.db.exists():
        from bench.datagen import make_graph
        from bench.run import run_import

        with tempfile.TemporaryDirectory(prefix="graph-memory-server-time-") as tmp:
            jsonl = Path(tmp) / "graph.jsonl"
            make_graph(args.size).write_jsonl(jsonl)
            run_import(jsonl, args.db)
    with tempfile.TemporaryDirectory(prefix="graph-memory-server-time-") as tmp:
        measure_raw(args.trees, args.db, args.rounds, Path(tmp))
        for i, tree in enumerate(args.trees):
            copy = Path(tmp) / f"in{i}.db"
            shutil.copy(args.db, copy)
            print(f"in-process {tree}:", flush=True)
            subprocess.run([sys.executable, "-m", "bench.server_time", "--in-process", "--db", str(copy),
                            "--rounds", str(args.rounds)], env=_env(tree, copy, True), check=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
