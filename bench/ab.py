"""``python -m bench.ab``: two versions of graph-memory side by side, to decide whether a change helps.

On a shared 2-core machine two runs of ``python -m bench`` minutes apart differ by more than most
changes gain. This runs both versions at once instead: each is a source tree (a checkout or
``git worktree add /tmp/a HEAD~1``), served from ``TREE/service`` on its own copy of the same
database, and the versions take turns block by block (ten empty calls, then ten calls of the
operation), so a busy moment of the machine hits both alike. Every result is checked (an error
reply stops the run). It prints, per operation and version, the p50 of the empty call, of the
operation, their ratio and the difference. Operations that act on what another one creates
(``create_relations`` on new entities, the deletes on what was added) bring that one along.

Example::

    git worktree add /tmp/before HEAD~1
    python -m bench.ab --db /tmp/ab-100k.db --size 100000 /tmp/before .

``--db`` holds ``bench.datagen.make_graph(SIZE)``; when the file does not exist it is made first
(the graph written as JSONL and imported with the installed ``graph-memory``, about 15 s at 100k).
A tree older than that database's migrations refuses it (its error shows on stderr): make the
database with the older version then. Run from the repository root (``bench`` is not installed).
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

import anyio
import apsw

from bench import servers, workload
from bench.datagen import Graph, make_graph


def spec_for(tree: Path, database: Path, mode: str, index: int) -> servers.ServerSpec:
    """graph-memory from ``tree``'s sources (not the installed package) on ``database``."""
    env = {"MEMORY_FILE_PATH": str(database), "PYTHONPATH": str(tree.resolve() / "service")}
    return servers.ServerSpec("ours", sys.executable, ("-m", "graph_memory"), env, mode, f"graph_memory#{index}")


# Operations whose targets another operation creates (see bench.workload): measured together.
NEEDS = {"create_relations": ["create_entities"], "delete_relations": ["create_entities", "create_relations"],
         "delete_observations": ["add_observations"]}


def select_ops(graph: Graph, total: int, wanted: list[str] | None) -> list[workload.Op]:
    """The point operations to measure, in the workload's order, with the ones they depend on.

    Raises:
        SystemExit: a key that is not a point operation.
    """
    ops = [o for o in workload.build_ops(graph, total) if o.point]
    if wanted is None:
        return ops
    keys = [o.key for o in ops]
    unknown = [k for k in wanted if k not in keys]
    if unknown:
        raise SystemExit(f"bench.ab: unknown operation {', '.join(unknown)}; the point operations are "
                         f"{', '.join(keys)}")
    chosen = set(wanted)
    for key in wanted:
        chosen.update(NEEDS.get(key, []))
    if added := sorted(chosen - set(wanted)):
        print(f"also measuring {', '.join(added)} (the selected operations act on what they create)", file=sys.stderr)
    return [o for o in ops if o.key in chosen]


def check_database(path: Path, size: int) -> None:
    """Refuse a database that does not hold ``size`` entities (the operations would miss)."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        (count,) = conn.execute("SELECT count(*) FROM entities").fetchall()[0]
    finally:
        conn.close()
    if count != size:
        raise SystemExit(f"bench.ab: {path} holds {count:,} entities, not --size {size:,}; "
                         f"give the matching --size or a new --db path")


async def run(args: argparse.Namespace) -> None:
    graph = make_graph(args.size)
    if not args.db.exists():
        from bench.run import run_import

        with tempfile.TemporaryDirectory(prefix="graph-memory-ab-") as tmp:
            jsonl = Path(tmp) / "graph.jsonl"
            graph.write_jsonl(jsonl)
            print(f"importing {args.size:,} entities into {args.db} …", file=sys.stderr)
            run_import(jsonl, args.db)
    check_database(args.db, args.size)
    warmup = 5
    ops = select_ops(graph, warmup + args.rounds * args.blocks * 10, args.ops)
    times: list[dict[str, tuple[list[int], list[int]]]] = [{} for _ in args.trees]
    with tempfile.TemporaryDirectory(prefix="graph-memory-ab-") as tmp:
        specs = []
        for i, tree in enumerate(args.trees):
            copy = Path(tmp) / f"v{i}.db"
            shutil.copy(args.db, copy)
            specs.append(spec_for(tree, copy, args.mode, i))
        async with contextlib.AsyncExitStack() as stack:
            # Server logs (and a refusal, e.g. a database migrated by a newer version) go to stderr.
            clients = [await stack.enter_async_context(servers.connect(spec, sys.stderr)) for spec in specs]
            for client in clients:
                await workload.warm_up(client, "ours", ops, warmup)
            # Alternate the versions block by block: ten empty calls, then ten of the operation.
            for r in range(args.rounds):
                for op in ops:
                    for b in range(args.blocks):
                        for i, client in enumerate(clients):
                            floors, samples = times[i].setdefault(op.key, ([], []))
                            floors += await workload.measure_floor(client, "ours", 10)
                            for j in range(10):
                                g = warmup + (r * args.blocks + b) * 10 + j
                                samples.append((await workload.timed_call(client, op.tool, op.make_args(g)))[0])
    for op in ops:
        cells = []
        for i, tree in enumerate(args.trees):
            floors, samples = times[i][op.key]
            floor, p50 = statistics.median(floors) / 1e6, statistics.median(samples) / 1e6
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
    try:
        anyio.run(run, args)
    except servers.BenchError as exc:
        print(f"bench.ab: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
