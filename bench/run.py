"""``python -m bench``: graph-memory against the reference server, over real MCP stdio.

For each graph size (default 10,000 and 100,000 entities): generate the graph (``bench.datagen``),
import it with ``graph-memory import`` (timed), measure cold start, then every operation in
alternating blocks (ten empty calls, then ten calls of the operation) through the official Python
client (``bench.workload``), the whole-graph reads (whole, summary view and page by page where
the server advertises them) and the server's peak RSS; with ``--reference``, the same against
``@modelcontextprotocol/server-memory`` on its own copy of the JSONL file. Then the Python
client's own work on our largest replies (``bench.client_cost``), and the same schedule through
the official TypeScript client (``bench.ts_client``) on fresh copies of the data. Results: a
table on stdout, JSON under bench/results/, and (full runs) the README table text in
docs/benchmarks.md and the plot docs/bench.png.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import psutil

from bench import client_cost, report, servers, ts_client, workload
from bench.datagen import make_graph
from bench.stats import flatten, round_medians, spread, summary

RESULTS = servers.REPO / "bench" / "results"
DOCS = servers.REPO / "docs"


@dataclass(frozen=True)
class Budget:
    """How many samples to take. Ours: ``rounds`` × ``per_round`` per operation. The reference
    rewrites its whole file on every call, so it gets fewer at large sizes (see ``reference``)."""

    rounds: int
    per_round: int
    warmup: int
    floor: int
    cold_starts: int
    imports: int

    def read_graph(self, size: int) -> int:
        """read_graph samples (plus one warm-up below 100k). At 100k the official client's stdio
        reader needs minutes for the ~100 MB reply (it re-joins its buffer on every 64 KiB chunk):
        one sample, no warm-up."""
        return 20 if size <= 1_000 else 10 if size <= 10_000 else 1

    def heavy(self, size: int) -> int | None:
        """Samples per round for operations whose result grows with the graph (None: as many as
        point operations)."""
        return None if size <= 10_000 else max(3, self.per_round // 5)

    def reference(self, size: int) -> tuple[int, int]:
        """(samples per round, warm-up samples) for the reference server at ``size`` (it runs as
        many rounds as ours, interleaved with them)."""
        if size <= 1_000:
            return 12, 2
        if size <= 10_000:
            return 5, 1
        return 2, 1


FULL = Budget(rounds=4, per_round=50, warmup=5, floor=300, cold_starts=5, imports=3)


class QuickBudget(Budget):
    def read_graph(self, size: int) -> int:
        return 5 if size <= 1_000 else 3 if size <= 10_000 else 0

    def reference(self, size: int) -> tuple[int, int]:
        if size <= 1_000:
            return 5, 1
        if size <= 10_000:
            return 2, 1
        return 1, 1


QUICK = QuickBudget(rounds=2, per_round=15, warmup=3, floor=100, cold_starts=3, imports=1)


def log(message: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def run_import(jsonl: Path, database: Path) -> dict[str, Any]:
    """``graph-memory --database DB import FILE`` on an empty database: wall time, CPU time and
    peak RSS. The peak is the import's own ``VmHWM``, read every 10 ms while it runs: the
    ``ru_maxrss`` that ``wait4`` gives counts the bench process too (Linux carries a process's
    peak across ``exec``, and the child starts as a copy of the bench, which may hold a graph of
    millions of entities)."""
    for suffix in ("", "-wal", "-shm"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)
    cmd = [servers.graph_memory_command(), "--database", str(database), "import", str(jsonl)]
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, env=servers.clean_env(), stdout=out, stderr=subprocess.STDOUT)
        peak = 0.0
        while True:
            peak = max(peak, _own_peak_mib(proc.pid))
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            time.sleep(0.01)
        seconds = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
    if proc.returncode != 0:
        raise servers.BenchError(f"import failed ({proc.returncode}): {text[-2000:]}")
    return {"seconds": seconds, "peak_rss_mb": peak, "cpu_seconds": usage.ru_utime + usage.ru_stime}


def _own_peak_mib(pid: int) -> float:
    """``VmHWM`` of the running process ``pid`` in MiB (0 once it has exited)."""
    with contextlib.suppress(OSError):
        return servers.vm_hwm_mib(pid) or 0.0
    return 0.0


def measure_large_import(entities: int, workdir: Path) -> dict[str, Any]:
    """``graph-memory import`` of a generated ``entities``-entity file into a new database, once
    (:func:`run_import`), with the file's size; the file and database are removed after."""
    jsonl, database = workdir / f"import-{entities}.jsonl", workdir / f"import-{entities}.db"
    make_graph(entities).write_jsonl(jsonl)   # the graph is dropped before the import runs
    try:
        return {**run_import(jsonl, database), "entities": entities, "jsonl_bytes": jsonl.stat().st_size}
    finally:
        for path in (jsonl, *(Path(f"{database}{s}") for s in ("", "-wal", "-shm"))):
            path.unlink(missing_ok=True)


def disk_bytes(database: Path) -> int:
    return sum(Path(f"{database}{s}").stat().st_size for s in ("", "-wal", "-shm") if Path(f"{database}{s}").exists())


async def cold_start(spec: servers.ServerSpec, name: str, errlog: Any) -> dict[str, float]:
    """Spawn → connected (initialize or discover) → first tools/call answered, in seconds. The
    official client lists the tools before its first call (to validate results); that round trip
    is part of a real first reply and is included."""
    start = time.perf_counter()
    async with servers.connect(spec, errlog) as client:
        connected = time.perf_counter()
        await workload.timed_call(client, "open_nodes", {"names": [name]})
        answered = time.perf_counter()
    return {"connect_s": connected - start, "first_reply_s": answered - start}


async def probe_modes(database: Path, errlog: Any, calls: int, alternations: int = 3) -> dict[str, Any]:
    """Our empty-call floor under each client mode (alternating connections), to pick the fair one."""
    variants = {"legacy": servers.ours(database, "legacy"), "auto": servers.ours(database, "auto")}
    results: dict[str, list[int]] = {name: [] for name in variants}
    versions: dict[str, str] = {}
    for _ in range(alternations):
        for name, spec in variants.items():
            async with servers.connect(spec, errlog) as client:
                versions[name] = str(client.protocol_version)
                await client.list_tools()
                await workload.measure_floor(client, "ours", 30)
                results[name] += await workload.measure_floor(client, "ours", calls)
    out: dict[str, Any] = {name: {**summary(v), "protocol": versions[name]} for name, v in results.items()}
    out["chosen"] = min(("legacy", "auto"), key=lambda m: out[m]["p50"])
    return out


@dataclass
class Side:
    """One server under test during a size: its connection, operations and sample budget."""

    spec: servers.ServerSpec
    client: Any
    pid: int
    ops: list[workload.Op]
    per_round: int
    warmup: int
    heavy_per_round: int | None
    samples: dict[str, workload.Samples]
    clock: workload.ValidationClock | None = None
    reads: list[workload.Read] = field(default_factory=list)


def _net(times: list[list[int]], checks: list[list[int]]) -> list[int]:
    """Each sample minus the client's output-schema validation within it."""
    return [t - c for t, c in zip(flatten(times), flatten(checks), strict=True)]


def op_stats(samples: workload.Samples, label: str, point: bool) -> dict[str, Any]:
    op_stats = summary(flatten(samples.op))
    floor_stats = summary(flatten(samples.floor))
    medians = round_medians(samples.op)
    ratios = [o / f for o, f in zip(medians, round_medians(samples.floor), strict=True)]
    validation: dict[str, Any] = {}
    if samples.op_validation:
        validation["validation_p50"] = summary(flatten(samples.op_validation))["p50"]
    if samples.op_validation and samples.floor_validation:
        # The same ratio with the client's jsonschema check of the result taken out of both the
        # operation and its floor: what the server and the transport cost, without the client's
        # (pure-Python) validation, which grows with the size of the result.
        net_op, net_floor = summary(_net(samples.op, samples.op_validation)), \
            summary(_net(samples.floor, samples.floor_validation))
        validation.update({"floor_validation_p50": summary(flatten(samples.floor_validation))["p50"],
                           "net_p50": net_op["p50"], "net_floor_p50": net_floor["p50"],
                           "net_ratio": net_op["p50"] / net_floor["p50"]})
    return {
        "label": label,
        "point": point,
        **op_stats,
        "floor_p50": floor_stats["p50"],
        # ×floor: p50 of the operation ÷ p50 of the empty calls interleaved with it (blocks).
        "ratio": op_stats["p50"] / floor_stats["p50"],
        "round_p50s": medians,
        "round_ratios": ratios,
        "round_spread": spread(medians),
        **validation,
    }


async def measure_sides(specs: list[tuple[servers.ServerSpec, list[workload.Op], int, int, int | None]], *,
                        rounds: int, floor: int, read_graph: dict[str, int], graph_size: int,
                        errlog: Any) -> dict[str, dict[str, Any]]:
    """Both servers connected at once; their rounds alternate (ours, reference, ours, …) so a
    busy phase of the machine hits both alike. Then read_graph on each, and peak RSS."""
    async with contextlib.AsyncExitStack() as stack:
        sides: list[Side] = []
        for spec, ops, per_round, warmup, heavy in specs:
            client = await stack.enter_async_context(servers.connect(spec, errlog))
            sides.append(Side(spec, client, servers.server_pid(spec), ops, per_round, warmup, heavy, {},
                              workload.ValidationClock(client)))
        out: dict[str, dict[str, Any]] = {}
        for side in sides:
            kind = side.spec.kind
            # Paging and the summary view run where the server's inputSchema advertises them.
            tools = workload.advertised(await side.client.list_tools())
            side.ops = workload.supported(side.ops, tools)
            side.reads = workload.supported(workload.READS, tools, "read_graph")
            await workload.measure_floor(side.client, kind, 20)
            out[kind] = {"mode": side.spec.mode, "protocol": str(side.client.protocol_version),
                         "tools": {name: sorted(args) for name, args in tools.items()}, "refused": {}}
        # Floor blocks, interleaved in slices.
        floors: dict[str, list[int]] = {s.spec.kind: [] for s in sides}
        noops: dict[str, list[int]] = {s.spec.kind: [] for s in sides}
        for _ in range(5):
            for side in sides:
                floors[side.spec.kind] += await workload.measure_floor(side.client, side.spec.kind, floor // 5)
                noops[side.spec.kind] += await workload.measure_noop(side.client, max(10, floor // 10))
        for side in sides:
            await workload.warm_up(side.client, side.spec.kind, side.ops, side.warmup)
        for r in range(rounds):
            for side in sides:
                if side.per_round:
                    await workload.run_round(side.client, side.spec.kind, side.ops, side.samples, round_index=r,
                                             per_round=side.per_round, warmup=side.warmup,
                                             heavy_per_round=side.heavy_per_round, clock=side.clock)
            log(f"  round {r + 1}/{rounds} done (load {os.getloadavg()[0]:.2f})")
        for side in sides:
            kind = side.spec.kind
            out[kind]["peak_rss_mb_ops"] = servers.peak_rss_mb(side.pid)
            for read in side.reads:
                count = read_count(read, read_graph.get(kind, 0))
                if not count:
                    continue
                log(f"  {kind}: {read.key} × {count}")
                got = await workload.run_read(side.client, kind, read, count, graph_size,
                                              warmup=graph_size < 100_000, clock=side.clock)
                if isinstance(got, str):
                    out[kind]["refused"][read.key] = f"refused by the server: {got}"
                else:
                    side.samples[read.key] = got
            out[kind]["peak_rss_mb"] = servers.peak_rss_mb(side.pid)
    for side in sides:
        kind = side.spec.kind
        labels = labels_of(side.ops, side.reads)
        out[kind]["floor"] = summary(floors[kind])
        out[kind]["noop"] = summary(noops[kind])
        out[kind]["ops"] = {key: op_stats(s, *labels[key]) for key, s in side.samples.items()}
    return out


def read_count(read: workload.Read, whole: int) -> int:
    """Samples of ``read`` given ``whole``, the budget's samples of the whole-graph read_graph at
    this size: a paged walk or the summary view takes at least one even where the whole reply is
    skipped (the size where it is too large to read quickly, or at all through the TS client)."""
    return whole if read.key == "read_graph" else max(1, whole)


def labels_of(ops: list[workload.Op], reads: list[workload.Read]) -> dict[str, tuple[str, bool]]:
    """key → (table label, point operation?) of every operation and read."""
    return {**{op.key: (op.label, op.point) for op in ops}, **{r.key: (r.label, False) for r in reads}}


def _cpu_busy() -> tuple[float, float, float]:
    """(busy, ours, total) CPU seconds so far: the whole machine busy, this benchmark and its
    (finished) children, and the machine's total."""
    times = psutil.cpu_times()
    me = psutil.Process().cpu_times()
    ours = me.user + me.system + me.children_user + me.children_system
    return times.user + times.nice + times.system + times.irq + times.softirq, ours, sum(times)


async def measure_size(size: int, args: argparse.Namespace, budget: Budget, workdir: Path,
                       errlog: Any, ours_mode: str) -> dict[str, Any]:
    out: dict[str, Any] = {"load": {"start": os.getloadavg()}}
    busy0, ours0, total0 = _cpu_busy()
    t = time.perf_counter()
    graph = make_graph(size)
    jsonl = workdir / f"graph-{size}.jsonl"
    jsonl_bytes = graph.write_jsonl(jsonl)
    observations = sum(len(e[2]) for e in graph.entities)
    out["graph"] = {"entities": size, "observations": observations, "relations": len(graph.relations),
                    "jsonl_bytes": jsonl_bytes, "generate_s": time.perf_counter() - t}
    log(f"{size:,} entities: graph written ({jsonl_bytes / 2**20:.1f} MiB JSONL)")

    database = workdir / f"ours-{size}.db"
    imports = [run_import(jsonl, database)]
    for i in range(1, budget.imports if size == max(args.sizes) else 1):
        imports.append(run_import(jsonl, workdir / f"scratch-{i}.db"))
        for suffix in ("", "-wal", "-shm"):
            Path(f"{workdir / f'scratch-{i}.db'}{suffix}").unlink(missing_ok=True)
    median_run = sorted(imports, key=lambda i: i["seconds"])[len(imports) // 2]   # wall and CPU of one run
    out["import"] = {"runs": imports, "seconds_median": median_run["seconds"],
                     "cpu_seconds_median": median_run["cpu_seconds"],
                     "peak_rss_mb": max(i["peak_rss_mb"] for i in imports)}
    out["db_bytes_after_import"] = disk_bytes(database)
    runs = ", ".join(f"{i['seconds']:.2f} s (CPU {i['cpu_seconds']:.2f} s)" for i in imports)
    log(f"  import: {runs}; db {out['db_bytes_after_import'] / 2**20:.1f} MiB")

    total = budget.warmup + budget.rounds * budget.per_round
    ops = workload.build_ops(graph, total)
    probe_name = graph.entities[size // 3][0]
    ours_spec = servers.ours(database, ours_mode)
    ref_spec = None
    if args.reference and size > args.reference_max_size:
        out["reference"] = {"skipped": f"above --reference-max-size {args.reference_max_size:,}"}
        log(f"  reference: skipped at {size:,} (above --reference-max-size)")
    elif args.reference:
        ref_file = workdir / f"reference-{size}.jsonl"
        shutil.copy(jsonl, ref_file)
        ref_spec = servers.reference(ref_file)

    # Cold starts, alternating between the servers.
    colds: dict[str, list[dict[str, float]]] = {"ours": [], "reference": []}
    for i in range(budget.cold_starts):
        colds["ours"].append(await cold_start(ours_spec, probe_name, errlog))
        if ref_spec and i < 3:
            colds["reference"].append(await cold_start(ref_spec, probe_name, errlog))

    sides: list[tuple[servers.ServerSpec, list[workload.Op], int, int, int | None]] = [
        (ours_spec, ops, budget.per_round, budget.warmup, budget.heavy(size))]
    read_graph = {"ours": budget.read_graph(size)}
    ref_per_round = 0
    if ref_spec:
        ref_per_round, ref_warmup = budget.reference(size)
        sides.append((ref_spec, workload.build_ops(graph, ref_warmup + budget.rounds * ref_per_round),
                      ref_per_round, ref_warmup, None))
        read_graph["reference"] = min(budget.read_graph(size), max(1, budget.read_graph(size) // 2))
    ts_sides: list[ts_client.TsSide] = []
    if "typescript" in args.clients:
        # The TypeScript client gets its own copies of the data as imported: both clients start
        # from the same graph (the Python rounds' writes would collide with the same targets).
        ts_db = workdir / f"ts-ours-{size}.db"
        for suffix in ("", "-wal", "-shm"):
            if Path(f"{database}{suffix}").exists():
                shutil.copy(f"{database}{suffix}", f"{ts_db}{suffix}")
        ts_sides.append(ts_client.TsSide(servers.ours(ts_db, ours_mode), ops, *sides[0][2:], reads=[]))
        if ref_spec:
            ts_ref = workdir / f"ts-reference-{size}.jsonl"
            shutil.copy(jsonl, ts_ref)
            ts_sides.append(ts_client.TsSide(servers.reference(ts_ref), *sides[1][1:], reads=[]))
    log(f"  measuring: ours {budget.rounds}×{budget.per_round} samples/op"
        + (f", reference {budget.rounds}×{ref_per_round}" if ref_spec else ""))
    measured = await measure_sides(sides, rounds=budget.rounds, floor=budget.floor, read_graph=read_graph,
                                   graph_size=size, errlog=errlog)
    for kind, result in measured.items():
        result["cold_start"] = colds[kind]
        result["cold_start_p50_s"] = sorted(c["first_reply_s"] for c in colds[kind])[len(colds[kind]) // 2]
        out[kind] = result
    out["whole_read"] = measure_whole_reads(ours_spec, ref_spec)
    out["python_client_cost"] = measure_client_cost(ours_spec, ops, measured["ours"],
                                                    args.ts_sdk if ts_sides else None)
    if ts_sides:
        out["typescript"] = measure_typescript(ts_sides, measured, args, budget, read_graph, size, workdir, errlog)
    if ref_spec:
        out["reference"]["samples_note"] = (f"{budget.rounds}×{ref_per_round} samples per operation "
                                            f"(it rereads and rewrites its whole file on every call)")
    out["db_bytes_after_run"] = disk_bytes(database)

    if size == max(args.sizes) and not args.quick:
        # First start on a legacy file: the server imports it before answering.
        first = workdir / "first-start"
        shutil.rmtree(first, ignore_errors=True)
        first.mkdir()
        shutil.copy(jsonl, first / "memory.jsonl")
        legacy_spec = servers.ours(first / "memory.jsonl", ours_mode)
        out["first_start_import"] = await cold_start(legacy_spec, probe_name, errlog)
        shutil.rmtree(first, ignore_errors=True)
    busy1, ours1, total1 = _cpu_busy()
    out["load"]["end"] = os.getloadavg()
    out["load"]["machine_busy"] = (busy1 - busy0) / max(1e-9, total1 - total0)
    # CPU that other processes (other people's jobs) took while this size was measured.
    out["load"]["others_busy"] = max(0.0, (busy1 - busy0) - (ours1 - ours0)) / max(1e-9, total1 - total0)
    return out


def measure_whole_reads(ours: servers.ServerSpec, reference: servers.ServerSpec | None) -> dict[str, Any]:
    """The whole graph read once by each server on its data after the rounds, through a bare
    JSON-RPC client (:func:`bench.replies.whole_read`), ours with no bound on replies: each server's
    own time to the last byte and its peak resident set after the reply (issue 15's memory target),
    at every size, also where a client cannot take the reply or needs minutes for it."""
    from bench.replies import whole_read

    out: dict[str, Any] = {}
    for spec, extra in ((ours, {"MEMORY_MAX_REPLY_BYTES": "0"}), (reference, {})):
        if spec is not None:
            out[spec.kind] = whole_read([spec.command, *spec.args], servers.clean_env(**spec.env, **extra))
            log(f"  {spec.kind}: whole read_graph, bare client: {out[spec.kind]['last_byte_s']:.2f} s, "
                f"{out[spec.kind]['bytes'] / 2**20:.1f} MiB, peak RSS {out[spec.kind]['peak_rss_mb']:.0f} MiB")
    return out


COSTED = ("search_common", "search_broad", "search_broad_summary", "read_graph_summary", "read_graph")


def measure_client_cost(spec: servers.ServerSpec, ops: list[workload.Op], measured: dict[str, Any],
                        ts_sdk: Path | None = None) -> dict[str, Any]:
    """The Python client's own work (``bench.client_cost``) on our replies of the operations whose
    result grows with the graph, captured from the server after the rounds (the graph has its
    size again); the whole read_graph only where the Python client read it. With ``ts_sdk`` (the
    TypeScript SDK's folder) each also holds ``typescript``: that client's own work on the same
    reply (``bench/ts_client_cost.mjs``)."""
    args = {op.key: (op.tool, op.make_args(0)) for op in ops}
    args.update({r.key: ("read_graph", r.args) for r in workload.READS if not r.page_limit})
    keys = [k for k in COSTED if k in measured["ops"] and k in args]
    log(f"  clients' own cost: capturing {', '.join(keys)}")
    schemas: dict[str, Any] = {}
    replies = client_cost.capture_replies(spec, servers.clean_env(), [args[k] for k in keys], schemas=schemas)
    out = {key: client_cost.python_client_cost(line) for key, line in zip(keys, replies, strict=True)}
    # Only replies that client accepts (it drops the connection on a message over 10 MiB).
    fits = [(k, line) for k, line in zip(keys, replies, strict=True) if len(line) < client_cost.TS_MAX_MESSAGE_BYTES]
    if ts_sdk is not None and fits:
        ts = client_cost.typescript_client_cost([line for _, line in fits], [schemas[args[k][0]] for k, _ in fits],
                                                ts_sdk)
        for (key, _), cost in zip(fits, ts, strict=True):
            out[key]["typescript"] = cost
    return out


def measure_typescript(sides: list[ts_client.TsSide], measured: dict[str, dict[str, Any]], args: argparse.Namespace,
                       budget: Budget, read_graph: dict[str, int], size: int, workdir: Path,
                       errlog: Any) -> dict[str, Any]:
    """The schedule the Python client just ran, through the TypeScript client on fresh copies of
    the data; each server runs what its tools/list advertised to the Python client."""
    for side in sides:
        tools = {name: set(a) for name, a in measured[side.spec.kind]["tools"].items()}
        side.ops = workload.supported(side.ops, tools)
        side.reads = [(r, read_count(r, read_graph.get(side.spec.kind, 0)))
                      for r in workload.supported(workload.READS, tools, "read_graph")]
    log(f"  TypeScript client ({', '.join(s.spec.kind for s in sides)})")
    plan = ts_client.build_plan(sides, rounds=budget.rounds, floor=budget.floor, graph_size=size)
    results = ts_client.run(plan, args.ts_sdk, workdir, errlog, servers.clean_env())
    out: dict[str, Any] = {}
    for side in sides:
        res = results[side.spec.kind]
        labels = labels_of(side.ops, [r for r, _ in side.reads])
        out[side.spec.kind] = {
            "floor": summary(res.floor), "noop": summary(res.noop),
            "ops": {key: op_stats(s, *labels[key]) for key, s in res.samples.items()},
            "refused": res.refused, "pages": res.pages,
            "peak_rss_mb_ops": res.peak_rss_mb_ops, "peak_rss_mb": res.peak_rss_mb,
        }
    return out


async def empty_floors(args: argparse.Namespace, budget: Budget, workdir: Path, errlog: Any,
                       ours_mode: str) -> dict[str, Any]:
    """Both servers on an empty graph, connected at once, their floor series interleaved."""
    empty_ref = workdir / "reference-empty.jsonl"
    empty_ref.write_text("")
    specs = [servers.ours(workdir / "empty.db", ours_mode)]
    if args.reference:
        specs.append(servers.reference(empty_ref))
    series: dict[str, list[int]] = {}
    async with contextlib.AsyncExitStack() as stack:
        clients = [(spec.kind, await stack.enter_async_context(servers.connect(spec, errlog))) for spec in specs]
        for kind, client in clients:
            await client.list_tools()
            await workload.measure_floor(client, kind, 30)
        step = max(10, budget.floor // 10)
        for _ in range(10):
            for kind, client in clients:
                series.setdefault(f"{kind}.floor", []).extend(await workload.measure_floor(client, kind, step))
                series.setdefault(f"{kind}.noop", []).extend(await workload.measure_noop(client, step))
                if kind == "reference":
                    series.setdefault("reference.open_nodes_empty", []).extend(
                        [(await workload.timed_call(client, "open_nodes", {"names": []}))[0] for _ in range(step)])
    out: dict[str, Any] = {}
    for key, values in series.items():
        kind, name = key.split(".", 1)
        out.setdefault(kind, {})[name] = summary(values)
    return out


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    budget = QUICK if args.quick else FULL
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="graph-memory-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    RESULTS.mkdir(parents=True, exist_ok=True)
    errlog = open(workdir / "servers.log", "a", encoding="utf-8")  # noqa: SIM115 — closed at the end
    meta: dict[str, Any] = {
        "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "machine": servers.machine(),
        "versions": servers.versions(),
        "args": {"sizes": args.sizes, "reference": args.reference, "quick": args.quick, "clients": args.clients,
                 "mode": args.mode, "reference_max_size": args.reference_max_size},
        "loadavg_start": os.getloadavg(),
        "workdir": str(workdir),
    }
    if args.reference:
        meta["versions"]["reference_server"] = servers.ensure_reference()
    if "typescript" in args.clients:
        args.ts_sdk, meta["versions"]["ts_sdk"] = ts_client.ensure_sdk(args.ts_sdk)
    log(f"workdir {workdir}; machine {meta['machine']['cpu']} ×{meta['machine']['cpus']}; "
        f"load {meta['loadavg_start'][0]:.2f}")

    result: dict[str, Any] = {"meta": meta, "empty": {}, "sizes": {}}
    if args.mode == "best":
        probe = await probe_modes(workdir / "empty.db", errlog, calls=budget.floor)
        ours_mode = probe["chosen"]
        result["mode_probe"] = probe
        log(f"client mode for ours: {ours_mode} (floor p50 legacy {probe['legacy']['p50']:.3f} ms, "
            f"auto {probe['auto']['p50']:.3f} ms)")
    else:
        ours_mode = args.mode
    meta["ours_mode"] = ours_mode
    result["empty"] = await empty_floors(args, budget, workdir, errlog, ours_mode)

    for size in args.sizes:
        result["sizes"][str(size)] = await measure_size(size, args, budget, workdir, errlog, ours_mode)
    if args.import_size:
        print(f"bench: importing a generated file of {args.import_size:,} entities", file=sys.stderr)
        result["large_import"] = measure_large_import(args.import_size, workdir)
    meta["loadavg_end"] = os.getloadavg()
    errlog.close()
    if not args.keep:
        shutil.rmtree(workdir, ignore_errors=True)
    return result


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", help="comma-separated entity counts (default 10000,100000; with --quick 10000)")
    parser.add_argument("--reference", action="store_true",
                        help="also run the reference server (installed under bench/.reference with npm)")
    parser.add_argument("--reference-max-size", type=int, default=100_000,
                        help="skip the reference server above this many entities (default 100000)")
    parser.add_argument("--quick", action="store_true",
                        help="fewer samples, 10,000 entities unless --sizes is given; docs are not rewritten")
    parser.add_argument("--mode", choices=["best", "legacy", "auto"], default="best",
                        help="client mode against our server: best (measure both on an empty graph, "
                             "use the lower floor; default), legacy (initialize handshake) or auto (2026-07-28)")
    parser.add_argument("--clients", default="python,typescript",
                        help="official MCP clients to measure through: python (mcp.Client), typescript "
                             "(@modelcontextprotocol/sdk under Node, installed into bench/.ts-client with npm); "
                             "default both")
    parser.add_argument("--ts-sdk", type=Path, metavar="FOLDER",
                        help="a folder whose node_modules holds @modelcontextprotocol/sdk (default: bench/.ts-client)")
    parser.add_argument("--import-size", type=int, metavar="N",
                        help="also time `graph-memory import` of a generated N-entity file into a new database "
                             "(issue 15's target: 1000000 within 90 s and 1 GB; about 3 minutes and 0.4 GB of "
                             "disk per million)")
    parser.add_argument("--out", help="JSON results file (default bench/results/bench-<timestamp>.json)")
    parser.add_argument("--docs", action=argparse.BooleanOptionalAction, default=None,
                        help="write docs/benchmarks.md and docs/bench.png (default: on for full runs)")
    parser.add_argument("--workdir", help="where graphs and databases go (default: a temporary folder)")
    parser.add_argument("--keep", action="store_true", help="keep the workdir")
    parser.add_argument("--postgres", action="store_true",
                        help="measure the PostgreSQL backend instead (bench.postgres): point operations on SQLite "
                             "and PostgreSQL side by side, then writes/s of 1 and --replicas replicas on one "
                             "database; starts a throwaway PostgreSQL cluster (needs the server binaries)")
    parser.add_argument("--replicas", type=int, default=4,
                        help="with --postgres: replicas of the many-replica write test (default 4)")
    parser.add_argument("--replica-writes", type=int,
                        help="with --postgres: writes per replica in the replica test (default 300; --quick 60)")
    parser.add_argument("--replica-rounds", type=int, default=3,
                        help="with --postgres: rounds of the replica test, 1 then --replicas each (default 3)")
    parser.add_argument("--render", metavar="RESULTS_JSON",
                        help="measure nothing: print the table of a results file and write the docs from it")
    args = parser.parse_args(argv)
    if args.sizes is None:
        args.sizes = "10000" if args.quick else "10000,100000"
    try:
        args.sizes = [int(s.replace("_", "")) for s in args.sizes.split(",") if s.strip()]
    except ValueError:
        parser.error("--sizes takes comma-separated integers, e.g. 1000,10000")
    args.clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    if "python" not in args.clients or not set(args.clients) <= {"python", "typescript"}:
        parser.error("--clients takes python or python,typescript (the Python client's run sets the schedule)")
    if not args.sizes or min(args.sizes) < 100:
        parser.error("sizes must be at least 100 entities")
    if args.docs is None and not args.render:   # --render decides from the saved run (see main)
        args.docs = not args.quick
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.render:
        result = json.loads(Path(args.render).read_text(encoding="utf-8"))
        print(report.text_table(result))
        run_args = result["meta"].get("args", {})
        partial = run_args.get("quick") or not run_args.get("reference")
        if args.docs or (args.docs is None and not partial):
            write_docs(result)
        elif partial and args.docs is None:
            print("docs not written: a --quick run or one without --reference; add --docs to write them anyway",
                  file=sys.stderr)
        return 0
    if args.postgres:
        return postgres_main(args)
    try:
        result = anyio.run(main_async, args)
    except servers.BenchError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 1
    save_and_print(args, result, "bench", report.text_table(result))
    if args.docs:
        write_docs(result)
    return 0


def postgres_main(args: argparse.Namespace) -> int:
    """``--postgres``: run :mod:`bench.postgres`, print its table, save its JSON (docs by hand)."""
    from bench import postgres

    try:
        result = anyio.run(postgres.main_async, args, QUICK if args.quick else FULL)
    except servers.BenchError as exc:
        print(f"bench: error: {exc}", file=sys.stderr)
        return 1
    save_and_print(args, result, "bench-postgres", postgres.text_table(result))
    return 0


def save_and_print(args: argparse.Namespace, result: dict[str, Any], prefix: str, table: str) -> None:
    """Write ``result`` as JSON to ``--out`` (default ``bench/results/<prefix>-<timestamp>.json``),
    then print ``table`` and where the results went."""
    out = Path(args.out) if args.out else RESULTS / f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    print(table)
    print(f"\nresults: {out}")


README_START, README_END = "<!-- bench:start -->", "<!-- bench:end -->"


HAND_WRITTEN = "<!-- hand-written below: kept when the tables above are regenerated -->"


def write_docs(result: dict[str, Any]) -> None:
    """docs/benchmarks.md (every table), docs/bench.png, and the summary block of README.md
    (between the bench:start/bench:end markers: machine, date, versions, the largest graph's table)."""
    DOCS.mkdir(exist_ok=True)
    text = report.markdown(result)
    target = DOCS / "benchmarks.md"
    # Sections written by hand after HAND_WRITTEN (e.g. the A/B measurements of one change) are kept.
    if target.exists() and HAND_WRITTEN in (previous := target.read_text(encoding="utf-8")):
        text = text.rstrip("\n") + "\n\n" + HAND_WRITTEN + previous.split(HAND_WRITTEN, 1)[1]
    target.write_text(text, encoding="utf-8")
    report.plot(result, DOCS / "bench.png")
    readme = DOCS.parent / "README.md"
    current = readme.read_text(encoding="utf-8")
    if README_START in current and README_END in current:
        head, rest = current.split(README_START, 1)
        _, tail = rest.split(README_END, 1)
        readme.write_text(head + README_START + "\n" + readme_block(text) + README_END + tail, encoding="utf-8")
    print(f"docs: {DOCS / 'benchmarks.md'}, {DOCS / 'bench.png'}, {readme}")


def readme_block(markdown: str) -> str:
    """The README's excerpt of docs/benchmarks.md: the measurement line, the summary table, the
    largest graph's operation table and the targets."""
    sections = markdown.split("\n## ")
    measured = next(line for line in markdown.splitlines() if line.startswith("Measured "))
    by_title = {s.split("\n", 1)[0]: s.split("\n", 1)[1].strip() for s in sections[1:]}
    sizes = [t for t in by_title if t.endswith(" entities")]
    largest = sizes[-1]
    parts = [
        "<!-- generated by `python -m bench --reference` from docs/benchmarks.md; do not edit by hand -->",
        measured,
        "### Summary\n\n" + by_title["Summary"],
        f"### {largest}\n\n" + by_title[largest],
        "### Targets\n\n" + by_title["Targets (issue 6)"],
        "All sizes, the method and how to read the numbers: [docs/benchmarks.md](docs/benchmarks.md).\n\n"
        "![latency vs graph size](docs/bench.png)",
    ]
    return "\n\n".join(parts) + "\n"
