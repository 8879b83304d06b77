"""``python -m bench.ab``: two versions of graph-memory side by side, to decide whether a change helps.

On a shared 2-core machine two runs of ``python -m bench`` minutes apart differ by more than most
changes gain. This runs both versions at once instead: each is a source tree (a checkout or
``git worktree add /tmp/a HEAD~1``), served from ``TREE/service`` on its own copy of the same
database, and their measuring blocks alternate (empty calls, then the operation, ten each), so a
busy moment of the machine hits both alike. It prints, per operation and version, the p50 of the
empty call, of the operation, their ratio and the difference.

Example::

    git worktree add /tmp/before HEAD~1
    python -m bench.ab --db /tmp/ab-100k.db --size 100000 /tmp/before .

``--db`` holds ``bench.datagen.make_graph(SIZE)``; when the file does not exist it is made first
(the graph written as JSONL and imported with ``graph-memory import``, about 15 s at 100k).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from bench import servers, workload
from bench.datagen import make_graph


def spec_for(tree: Path, database: Path, mode: str, index: int) -> servers.ServerSpec:
    """graph-memory from ``tree``'s sources (not the installed package) on ``database``."""
    env = {"MEMORY_FILE_PATH": str(database), "PYTHONPATH": str(tree.resolve() / "service")}
    return servers.ServerSpec("ours", sys.executable, ("-m", "graph_memory"), env, mode, f"graph_memory#{index}")


async def run(args: argparse.Namespace) -> None:
    graph = make_graph(args.size)
    if not args.db.exists():
        from bench.run import run_import

        with tempfile.TemporaryDirectory(prefix="graph-memory-ab-") as tmp:
            jsonl = Path(tmp) / "graph.jsonl"
            graph.write_jsonl(jsonl)
            print(f"importing {args.size:,} entities into {args.db} …", file=sys.stderr)
            run_import(jsonl, args.db)
    ops = [o for o in workload.build_ops(graph, 5 + args.rounds * args.blocks * 10)
           if o.point and (not args.ops or o.key in args.ops)]
    with tempfile.TemporaryDirectory(prefix="graph-memory-ab-") as tmp:
        specs = []
        for i, tree in enumerate(args.trees):
            copy = Path(tmp) / f"v{i}.db"
            shutil.copy(args.db, copy)
            specs.append(spec_for(tree, copy, args.mode, i))
        async with contextlib.AsyncExitStack() as stack:
            clients = [await stack.enter_async_context(servers.connect(spec, open(os.devnull, "w")))  # noqa: SIM115
                       for spec in specs]
            for client in clients:
                for op in ops:
                    for g in range(5):
                        await client.call_tool(op.tool, op.make_args(g))
            times: list[dict[str, tuple[list[float], list[float]]]] = [{} for _ in clients]
            for r in range(args.rounds):
                for op in ops:
                    for i, client in enumerate(clients):
                        floors, samples = times[i].setdefault(op.key, ([], []))
                        for b in range(args.blocks):
                            for _ in range(10):
                                start = time.perf_counter()
                                await client.call_tool("open_nodes", {"names": []})
                                floors.append(time.perf_counter() - start)
                            for j in range(10):
                                g = 5 + (r * args.blocks + b) * 10 + j
                                start = time.perf_counter()
                                await client.call_tool(op.tool, op.make_args(g))
                                samples.append(time.perf_counter() - start)
    for op in ops:
        cells = []
        for i, tree in enumerate(args.trees):
            floors, samples = times[i][op.key]
            floor, p50 = statistics.median(floors) * 1e3, statistics.median(samples) * 1e3
            cells.append(f"{str(tree)[-18:]:>18}: floor {floor:.3f} op {p50:.3f} ms "
                         f"×{p50 / floor:.2f} +{p50 - floor:.3f}")
        print(f"{op.key:20} " + " │ ".join(cells))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", type=Path, help="source trees to compare (each with service/)")
    parser.add_argument("--db", type=Path, required=True,
                        help="database of make_graph(SIZE), copied per tree (made first if missing)")
    parser.add_argument("--size", type=int, default=100_000, help="entities in that graph (default 100000)")
    parser.add_argument("--ops", type=lambda s: s.split(","), default=None,
                        help="comma-separated operation keys (default: every point operation)")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--blocks", type=int, default=5, help="blocks of ten per operation per round")
    parser.add_argument("--mode", choices=["legacy", "auto"], default="legacy", help="client mode")
    args = parser.parse_args(argv)
    anyio.run(run, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
