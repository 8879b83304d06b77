"""``python -m bench.replies``: the empty-call floor, ``read_graph`` and peak memory of one or more
source trees, through the official Python client over real stdio.

For changes to how replies are built, serialised and written (issue 15): each tree is served from
``TREE/service`` on its own copy of the same database (made with ``bench.datagen`` when missing,
as in :mod:`bench.ab`), one after the other. Per tree it prints the p50 of ``--floor`` empty
calls, the min and median of ``--reads`` ``read_graph`` calls (each checked for the entity count)
and the server's peak resident set (``VmHWM``) after them. ``--raw`` drives the server with a bare
JSON-RPC client instead (no schema validation, a linear reader; read_graph timed to its first
byte and its last): the server's own share, at 100,000 entities too, where the official Python
client needs minutes per read (its quadratic reader).

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


class RawSession:
    """A bare JSON-RPC client on a server process's pipes (no schema checks, a linear reader),
    after the handshake; :meth:`call` times a reply to its first byte and to its last."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        import subprocess

        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env)
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self._stdin, self._stdout = self.proc.stdin, self.proc.stdout
        self.call(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "1"}})
        self._stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')

    def call(self, request_id: int, method: str, params: dict[str, object]) -> tuple[float, float, bytes]:
        """(seconds to the reply's first byte, to its last, the reply line)."""
        import json

        start = time.perf_counter()
        self._stdin.write(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
                                     ).encode() + b"\n")
        self._stdin.flush()
        first = self._stdout.read(1)
        first_byte = time.perf_counter() - start
        line = first + self._stdout.readline()
        return first_byte, time.perf_counter() - start, line

    def close(self) -> None:
        """Close the server's stdin (its end of input) and wait up to 120 s for it to exit."""
        self._stdin.close()
        self.proc.wait(timeout=120)


def whole_read(command: list[str], env: dict[str, str]) -> dict[str, float | int]:
    """One ``read_graph`` of the whole graph through :class:`RawSession` (a reply of any size:
    give our server ``MEMORY_MAX_REPLY_BYTES=0``): seconds to its first and last byte, its bytes
    and entities, and the server's peak resident set after it (MiB) — the server's own cost,
    where the official Python client needs minutes for a 100 MB line (its quadratic reader)."""
    import json

    session = RawSession(command, env)
    try:
        first_byte, whole, line = session.call(1, "tools/call", {"name": "read_graph", "arguments": {}})
        entities = len(json.loads(line)["result"].get("structuredContent", {}).get("entities", []))
        peak = servers.peak_rss_mb(session.proc.pid)
    finally:
        session.close()
    return {"first_byte_s": first_byte, "last_byte_s": whole, "bytes": len(line), "entities": entities,
            "peak_rss_mb": peak}


def measure_raw(tree: Path, database: Path, args: argparse.Namespace) -> str:
    """The server's side alone (:class:`RawSession`): empty calls, then read_graph timed to its
    first byte and to its last."""
    import json

    env = servers.clean_env(MEMORY_FILE_PATH=str(database), PYTHONPATH=str(tree.resolve() / "service"))
    session = RawSession([sys.executable, "-m", "graph_memory"], env)
    try:
        floors = [session.call(i, "tools/call", {"name": servers.NOOP_TOOL, "arguments": {}})[1]
                  for i in range(1, args.floor + 1)]
        reads = []
        for i in range(args.reads):
            first_byte, whole, line = session.call(10_000 + i, "tools/call", {"name": "read_graph", "arguments": {}})
            got = len(json.loads(line)["result"]["structuredContent"]["entities"])
            if got != args.size:
                raise servers.BenchError(f"read_graph returned {got} entities, expected {args.size}")
            reads.append((first_byte, whole, len(line)))
        peak = servers.peak_rss_mb(session.proc.pid)
    finally:
        session.close()
    best = min(reads)
    return (f"{str(tree)[-24:]:>24}: raw floor {statistics.median(floors) * 1e3:.3f} ms  read_graph first byte "
            f"{best[0]:.3f} s, whole {best[1]:.3f} s ({best[2] / 2**20:.1f} MiB)  peak RSS {peak:.0f} MiB")


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
            print(measure_raw(tree, copy, args) if args.raw else await measure(tree, copy, args, i), flush=True)


def add_tree_arguments(parser: argparse.ArgumentParser, trees: str) -> None:
    """The arguments of the tools that compare source trees on one generated graph: ``trees``
    (argparse ``nargs``), ``--db`` and ``--size``."""
    parser.add_argument("trees", nargs=trees, type=Path, help="source trees to compare (each with service/)")
    parser.add_argument("--db", type=Path, required=True, help="database of make_graph(SIZE) (made if missing)")
    parser.add_argument("--size", type=int, default=10_000, help="entities in that graph (default 10000)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.replies", description=__doc__.split("\n\n")[0])
    add_tree_arguments(parser, "+")
    parser.add_argument("--floor", type=int, default=300, help="empty calls for the floor (default 300)")
    parser.add_argument("--reads", type=int, default=3, help="read_graph calls (default 3)")
    parser.add_argument("--raw", action="store_true",
                        help="a bare JSON-RPC client instead of the official one: the server's own time")
    parser.add_argument("--mode", choices=["legacy", "auto"], default="legacy", help="client mode")
    anyio.run(run, parser.parse_args(argv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
