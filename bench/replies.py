"""``python -m bench.replies``: the empty-call floor, ``read_graph`` and peak memory of one or more
source trees, through the official Python client over real stdio.

For changes to how replies are built, serialised and written (issue 15): each tree is served from
``TREE/service`` on its own copy of the same database (made with ``bench.datagen`` when missing,
as in :mod:`bench.ab`), one after the other. Per tree it prints the p50 of ``--floor`` empty
calls, the min and median of ``--reads`` ``read_graph`` calls (each checked for the entity count)
and the server's peak resident set (``VmHWM``) after them.

Example::

    git archive HEAD~3 | tar -x -C /tmp/before
    python -m bench.replies --db /tmp/g100k.db --size 100000 /tmp/before .
"""

from __future__ import annotations

import argparse
import dataclasses
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from bench import servers, workload
from bench.ab import check_database, spec_for


async def measure(tree: Path, database: Path, args: argparse.Namespace, index: int) -> str:
    # The marker finds the server's pid by its command line (``python -m graph_memory``).
    spec = dataclasses.replace(spec_for(tree, database, args.mode, index), marker="graph_memory")
    async with servers.connect(spec, sys.stderr) as client:
        pid = servers.server_pid(spec)
        await workload.measure_noop(client, 20)
        floor = statistics.median(await workload.measure_noop(client, args.floor)) / 1e6
        reads = []
        for _ in range(args.reads):
            start = time.perf_counter()
            result = await client.call_tool("read_graph", {})
            reads.append(time.perf_counter() - start)
            got = len((result.structured_content or {}).get("entities", []))
            if result.is_error or got != args.size:
                raise servers.BenchError(f"read_graph returned {got} entities, expected {args.size}")
        peak = servers.peak_rss_mb(pid)
    return (f"{str(tree)[-24:]:>24}: floor {floor:.3f} ms  read_graph min {min(reads):.3f} s "
            f"median {statistics.median(reads):.3f} s  peak RSS {peak:.0f} MiB")


async def run(args: argparse.Namespace) -> None:
    if not args.db.exists():
        from bench.datagen import make_graph
        from bench.run import run_import

        with tempfile.TemporaryDirectory(prefix="graph-memory-replies-") as tmp:
            jsonl = Path(tmp) / "graph.jsonl"
            make_graph(args.size).write_jsonl(jsonl)
            run_import(jsonl, args.db)
    check_database(args.db, args.size)
    with tempfile.TemporaryDirectory(prefix="graph-memory-replies-") as tmp:
        for i, tree in enumerate(args.trees):
            copy = Path(tmp) / f"v{i}.db"
            shutil.copy(args.db, copy)
            print(await measure(tree, copy, args, i), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replies", description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", type=Path, help="source trees to compare (each with service/)")
    parser.add_argument("--db", type=Path, required=True, help="database of make_graph(SIZE) (made if missing)")
    parser.add_argument("--size", type=int, default=10_000, help="entities in that graph (default 10000)")
    parser.add_argument("--floor", type=int, default=300, help="empty calls for the floor (default 300)")
    parser.add_argument("--reads", type=int, default=3, help="read_graph calls (default 3)")
    parser.add_argument("--mode", choices=["legacy", "auto"], default="legacy", help="client mode")
    anyio.run(run, parser.parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
