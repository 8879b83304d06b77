"""``python -m bench --postgres``: the PostgreSQL backend against the SQLite backend, and replicas.

Starts a throwaway PostgreSQL cluster of its own (``tests/pgcluster.py``: the installed server
binaries, fsync and synchronous_commit off, graph-memory connecting as an ordinary role over the
Unix socket), then:

* **point operations** — for each graph size, the same graph imported into a SQLite file and into a
  PostgreSQL database; two graph-memory servers (one per backend) connected at once through the
  official Python client; the point operations of :mod:`bench.workload` measured in rounds that
  alternate between the two (so a busy phase of the shared machine hits both alike), each against
  its own empty-call floor. Reported: per-round medians and their median, and PostgreSQL ÷ SQLite.
* **replicas** — 1, then ``--replicas`` graph-memory servers on one PostgreSQL database, each driven
  by its own client in its own process, all writing at once (``create_entities`` of one entity
  with two observations, distinct names) a fixed number of writes each; writes/s of the whole, and
  the CPU seconds per write of the clients, the servers and PostgreSQL (what a 2-core machine can
  give at most).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import multiprocessing
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import psutil

from bench import servers, workload
from bench.datagen import make_graph
from bench.stats import flatten, round_medians, summary

REPLICA_WRITES = 300   # writes per replica in the replicas test (full runs; quick: 60; --replica-writes)


def start_cluster() -> Any:
    """A throwaway cluster (``tests/pgcluster.py``, shared with the tests), started now.

    Raises:
        BenchError: no PostgreSQL server binaries, or psycopg missing.
    """
    sys.path.insert(0, str(servers.REPO / "tests"))
    import pgcluster

    for name in [k for k in os.environ if k.startswith("PG")]:
        del os.environ[name]   # libpq reads PG* variables: none of the developer's may leak in
    bindir = pgcluster.find_bin()
    if bindir is None:
        raise servers.BenchError("PostgreSQL server binaries (initdb, pg_ctl) are not installed: "
                                 "apt-get install postgresql")
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise servers.BenchError("psycopg is not installed: pip install -e '.[postgres]'") from None
    return pgcluster.Cluster.start(bindir)


def socket_url(cluster: Any, database: str) -> str:
    """The URL graph-memory connects with: the ordinary role over the cluster's Unix socket."""
    return f"postgresql://{cluster_role()}@/{database}?host={cluster.base}&port={cluster.port}"


def cluster_role() -> str:
    import pgcluster

    return str(pgcluster.ROLE)


def pg_env(url: str, workdir: Path) -> dict[str, str]:
    """Server environment for PostgreSQL; the legacy file named does not exist (nothing to import)."""
    return {"MEMORY_DATABASE_URL": url, "MEMORY_FILE_PATH": str(workdir / "no-legacy-file.jsonl")}


def spec(env: dict[str, str], mode: str) -> servers.ServerSpec:
    return servers.ServerSpec("ours", servers.graph_memory_command(), (), env, mode, "graph-memory")


def import_into(jsonl: Path, env: dict[str, str]) -> float:
    """``graph-memory import FILE`` with ``env`` (a fresh database); wall seconds."""
    import subprocess


    start = time.perf_counter()
    proc = subprocess.run([servers.graph_memory_command(), "import", str(jsonl)], env=servers.clean_env(**env),
                          capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise servers.BenchError(f"import failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return time.perf_counter() - start


def _stats(samples: workload.Samples, label: str) -> dict[str, Any]:
    medians = round_medians(samples.op)
    floors = round_medians(samples.floor)
    return {"label": label, **summary(flatten(samples.op)), "round_p50s": medians,
            "median_of_rounds": statistics.median(medians), "floor_p50": statistics.median(floors)}


async def compare(size: int, budget: Any, cluster: Any, workdir: Path, errlog: Any, mode: str) -> dict[str, Any]:
    """Point operations on SQLite and PostgreSQL at ``size`` entities (see the module's docstring)."""
    from bench.run import log

    graph = make_graph(size)
    jsonl = workdir / f"graph-{size}.jsonl"
    graph.write_jsonl(jsonl)
    sqlite_env = {"MEMORY_FILE_PATH": str(workdir / f"sqlite-{size}.db")}
    database = cluster.create_database()
    pg_url = socket_url(cluster, database)
    envs = {"sqlite": sqlite_env, "postgres": pg_env(pg_url, workdir)}
    imports = {kind: import_into(jsonl, env) for kind, env in envs.items()}
    log(f"{size:,} entities imported: sqlite {imports['sqlite']:.1f} s, postgres {imports['postgres']:.1f} s")
    # What autovacuum does within a minute of the import anyway (hint bits, visibility map, the
    # trigram indexes' pending lists merged), done now: the rounds measure the settled database a
    # server sees after that first minute, not autovacuum running beside them on the 2 cores.
    start = time.perf_counter()
    cluster.admin("VACUUM (ANALYZE)", database)
    log(f"  postgres database vacuumed after the import: {time.perf_counter() - start:.1f} s")
    total = budget.warmup + budget.rounds * budget.per_round
    ops = [op for op in workload.build_ops(graph, total) if op.point]
    samples: dict[str, dict[str, workload.Samples]] = {kind: {} for kind in envs}
    async with contextlib.AsyncExitStack() as stack:
        clients = {kind: await stack.enter_async_context(servers.connect(spec(env, mode), errlog))
                   for kind, env in envs.items()}
        for client in clients.values():
            await client.list_tools()
            await workload.measure_floor(client, "ours", 30)
            await workload.warm_up(client, "ours", ops, budget.warmup)
        for r in range(budget.rounds):
            for kind, client in clients.items():
                await workload.run_round(client, "ours", ops, samples[kind], round_index=r,
                                         per_round=budget.per_round, warmup=budget.warmup, heavy_per_round=None)
            log(f"  round {r + 1}/{budget.rounds} done (load {os.getloadavg()[0]:.2f})")
    out: dict[str, Any] = {"import_s": imports, "ops": {}}
    for op in ops:
        sqlite, pg = _stats(samples["sqlite"][op.key], op.label), _stats(samples["postgres"][op.key], op.label)
        out["ops"][op.key] = {"label": op.label, "sqlite": sqlite, "postgres": pg,
                              "ratio": pg["median_of_rounds"] / sqlite["median_of_rounds"]}
    return out


def _writer(env: dict[str, str], mode: str, replica: int, writes: int, barrier: Any, results: Any) -> None:
    """One replica's client (own process): connect, wait for the others, write ``writes`` times."""

    async def drive() -> None:
        server = spec(env, mode)
        with open(os.devnull, "w", encoding="utf-8") as errlog:
            async with servers.connect(server, errlog) as client:
                await client.list_tools()
                pid = servers.server_pid(server)
                for i in range(5):   # warm: prepared statements, pool connection
                    await workload.timed_call(client, "create_entities", _entity(replica, -1 - i))
                await anyio.to_thread.run_sync(barrier.wait)
                cpu0 = _cpu(pid), _cpu(os.getpid())
                start = time.perf_counter()
                for i in range(writes):
                    await workload.timed_call(client, "create_entities", _entity(replica, i))
                end = time.perf_counter()
                results.put((replica, start, end, _cpu(pid) - cpu0[0], _cpu(os.getpid()) - cpu0[1]))

    anyio.run(drive)


def _entity(replica: int, i: int) -> dict[str, Any]:
    return {"entities": [{"name": f"replica {replica} write {i}", "entityType": "bench",
                          "observations": [f"written by replica {replica}", f"write number {i}"]}]}


def _cpu(pid: int) -> float:
    times = psutil.Process(pid).cpu_times()
    return float(times.user + times.system)


def _postgres_cpu(cluster: Any) -> float:
    """CPU seconds of every process of the cluster (postmaster and backends) so far."""
    pid = int((cluster.base / "data" / "postmaster.pid").read_text().split()[0])
    root = psutil.Process(pid)
    total = 0.0
    for proc in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            times = proc.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
    return total


def replicas(count: int, writes: int, cluster: Any, workdir: Path, mode: str) -> dict[str, Any]:
    """``count`` servers on one fresh PostgreSQL database, each written ``writes`` times at once by
    its own client process; writes/s over the span from the first start to the last end."""
    env = pg_env(socket_url(cluster, cluster.create_database()), workdir)
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(count + 1)
    results = context.Queue()
    procs = [context.Process(target=_writer, args=(env, mode, r, writes, barrier, results)) for r in range(count)]
    for proc in procs:
        proc.start()
    barrier.wait(timeout=300)
    pg0 = _postgres_cpu(cluster)
    got = [results.get(timeout=900) for _ in procs]
    pg_cpu = _postgres_cpu(cluster) - pg0
    for proc in procs:
        proc.join(timeout=60)
    span = max(g[2] for g in got) - min(g[1] for g in got)
    total = count * writes
    return {"replicas": count, "writes": total, "seconds": span, "writes_per_s": total / span,
            "cpu_ms_per_write": {"servers": 1000 * sum(g[3] for g in got) / total,
                                 "clients": 1000 * sum(g[4] for g in got) / total,
                                 "postgres": 1000 * pg_cpu / total}}


async def main_async(args: argparse.Namespace, budget: Any) -> dict[str, Any]:
    import tempfile

    from bench.run import log

    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="graph-memory-bench-pg-"))
    workdir.mkdir(parents=True, exist_ok=True)
    mode = "legacy" if args.mode == "best" else args.mode
    result: dict[str, Any] = {"meta": {"date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                                       "machine": servers.machine(), "versions": servers.versions(),
                                       "command": "python -m bench " + " ".join(sys.argv[1:]),
                                       "mode": mode, "loadavg_start": os.getloadavg()},
                              "sizes": {}, "replicas": []}
    cluster = start_cluster()
    try:
        result["meta"]["versions"]["postgresql"] = cluster.bindir.parts[-2]
        with open(workdir / "servers.log", "a", encoding="utf-8") as errlog:
            for size in args.sizes:
                result["sizes"][str(size)] = await compare(size, budget, cluster, workdir, errlog, mode)
        writes = args.replica_writes or (60 if args.quick else REPLICA_WRITES)
        for _ in range(args.replica_rounds):
            for count in (1, args.replicas):
                measured = await anyio.to_thread.run_sync(replicas, count, writes, cluster, workdir, mode)
                log(f"replicas {count}: {measured['writes_per_s']:.0f} writes/s")
                result["replicas"].append(measured)
    finally:
        cluster.stop()
    result["meta"]["loadavg_end"] = os.getloadavg()
    return result


def text_table(result: dict[str, Any]) -> str:
    """The results as plain text (also pasted into docs/benchmarks.md)."""
    lines = [f"{result['meta']['date']}: {result['meta']['command']}"]
    for size, measured in result["sizes"].items():
        lines.append(f"\n{int(size):,} entities (median of per-round medians, ms; client floor in brackets)")
        lines.append(f"{'operation':48} {'SQLite':>14} {'PostgreSQL':>14} {'PG/SQLite':>9}")
        for op in measured["ops"].values():
            s, p = op["sqlite"], op["postgres"]
            lines.append(f"{op['label'][:48]:48} {s['median_of_rounds']:6.2f} ({s['floor_p50']:.2f}) "
                         f"{p['median_of_rounds']:6.2f} ({p['floor_p50']:.2f}) {op['ratio']:8.2f}×")
    by_count: dict[int, list[dict[str, Any]]] = {}
    for run in result["replicas"]:
        by_count.setdefault(run["replicas"], []).append(run)
    if by_count:
        lines.append("\nreplicas on one database (create_entities, each replica driven by its own client process)")
        for count, runs in by_count.items():
            rate = statistics.median(r["writes_per_s"] for r in runs)
            cpu = {k: statistics.median(r["cpu_ms_per_write"][k] for r in runs) for k in runs[0]["cpu_ms_per_write"]}
            each = ", ".join(f"{r['writes_per_s']:.0f}" for r in runs)
            lines.append(f"{count} replica(s): {rate:7.0f} writes/s (median of {len(runs)}: {each}); CPU ms per write: "
                         + ", ".join(f"{k} {v:.2f}" for k, v in cpu.items()))
    return "\n".join(lines)
