"""The same measurements through the official TypeScript MCP client (``@modelcontextprotocol/sdk``).

What Claude Desktop, VS Code and Cursor run. :func:`build_plan` turns the schedule that
``bench.run.measure_sides`` runs through the Python client (floor slices, warm-up, rounds of
alternating blocks, then the whole-graph reads) into a plan of steps; ``bench/ts_driver.mjs``
connects to every server at once with ``StdioClientTransport``, runs the steps and prints each
step's per-call latencies (``performance.now()``); :func:`parse` folds them back into
:class:`bench.workload.Samples`, so both clients' figures go through the same statistics.

The SDK is installed with npm into ``bench/.ts-client`` (git-ignored) on first use — the way
``tests/test_ts_client.py`` provides it: ``npm install --prefix FOLDER``, with the script copied
into that folder so Node resolves the SDK from it. ``--ts-sdk FOLDER`` points at an existing
install instead.

The client refuses any message over ``STDIO_DEFAULT_MAX_BUFFER_SIZE`` (10 MiB) and drops the
connection; a read refused that way is recorded as such (the driver reconnects for the next step)
instead of failing the run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bench import servers, workload
from bench.servers import BenchError

SDK_PACKAGE = "@modelcontextprotocol/sdk"
SDK_VERSION = "1.32.2"   # as tests/test_ts_client.py
SDK_DIR = servers.REPO / "bench" / ".ts-client"
DRIVER = Path(__file__).with_name("ts_driver.mjs")


def ensure_sdk(folder: Path | None = None) -> tuple[Path, str]:
    """The folder holding the SDK (installed into ``bench/.ts-client`` when ``folder`` is None and
    it is missing), with the driver copied in; and the SDK's version.

    Raises:
        BenchError: node or npm missing, or ``folder`` holds no SDK.
    """
    if shutil.which("node") is None:
        raise BenchError("node is not on PATH: the TypeScript client needs Node 18+ "
                         "(or measure with the Python client only: --clients python)")
    package_json = (folder or SDK_DIR) / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"
    if not package_json.exists():
        if folder is not None:
            raise BenchError(f"--ts-sdk {folder}: no {SDK_PACKAGE} under node_modules there")
        servers.npm_install(SDK_DIR, f"{SDK_PACKAGE}@{SDK_VERSION}")
    target = folder or SDK_DIR
    shutil.copy(DRIVER, target / DRIVER.name)   # Node resolves the SDK from the script's own folder
    return target, str(json.loads(package_json.read_text(encoding="utf-8"))["version"])


@dataclass
class Plan:
    """The driver's input (``servers``, ``steps``) and, per step, what it measures (``meta``:
    server, key, phase, round, expected entities)."""

    servers: dict[str, dict[str, Any]] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    meta: list[tuple[str, str, str, int, int | None]] = field(default_factory=list)

    def add(self, server: str, key: str, phase: str, tool: str, args: workload.Args, *, round_index: int = 0,
            repeat: int = 1, expect_error: bool = False, page_limit: int | None = None,
            entities: int | None = None) -> None:
        step: dict[str, Any] = {"server": server, "tool": tool, "args": args, "repeat": repeat}
        if expect_error:
            step["expectError"] = True
        if page_limit:
            step["pageLimit"] = page_limit
        self.steps.append(step)
        self.meta.append((server, key, phase, round_index, entities))


@dataclass
class TsSide:
    """One server for the TypeScript client: its spawn spec and what it runs (already filtered to
    what its tools/list advertises), with the same budgets as the Python client's side."""

    spec: servers.ServerSpec
    ops: list[workload.Op]
    per_round: int
    warmup: int
    heavy_per_round: int | None
    reads: list[tuple[workload.Read, int]]   # (read, samples)


def build_plan(sides: list[TsSide], *, rounds: int, floor: int, graph_size: int) -> Plan:
    """The schedule of ``bench.run.measure_sides``, as driver steps."""
    plan = Plan()
    for side in sides:
        spec = side.spec
        side.ops = [op for op in side.ops if spec.kind == "ours" or not op.ours_only]
        plan.servers[spec.kind] = {"command": spec.command, "args": list(spec.args), "env": spec.env, "cwd": spec.cwd}

    def floor_step(kind: str, key: str, phase: str, count: int, r: int = 0) -> None:
        tool, args = workload.floor_call(kind)
        plan.add(kind, key, phase, tool, args, round_index=r, repeat=count,
                 expect_error=tool == servers.NOOP_TOOL)

    for side in sides:
        floor_step(side.spec.kind, "floor", "setup", 20)
    for _ in range(5):
        for side in sides:
            floor_step(side.spec.kind, "floor", "floor", floor // 5)
            plan.add(side.spec.kind, "noop", "noop", servers.NOOP_TOOL, {}, repeat=max(10, floor // 10),
                     expect_error=True)
    for side in sides:
        for g in range(side.warmup):
            for op in side.ops:
                plan.add(side.spec.kind, op.key, "warmup", op.tool, op.make_args(g),
                         entities=op.entities if g == 0 else None)
    block = 10
    for r in range(rounds):
        for side in sides:
            if not side.per_round:
                continue
            for op in side.ops:
                count = side.per_round if op.point or side.heavy_per_round is None \
                    else min(side.per_round, side.heavy_per_round)
                j = 0
                while j < count:
                    size = min(block, count - j)
                    floor_step(side.spec.kind, op.key, "op_floor", size, r)
                    for _ in range(size):
                        g = side.warmup + r * side.per_round + j
                        plan.add(side.spec.kind, op.key, "op", op.tool, op.make_args(g), round_index=r,
                                 entities=op.entities if r == 0 and j == 0 else None)
                        j += 1
    for side in sides:
        for read, count in side.reads:
            if count and graph_size < 100_000:
                plan.add(side.spec.kind, read.key, "read_warmup", "read_graph", read.args, page_limit=read.page_limit)
            for _ in range(count):
                floor_step(side.spec.kind, read.key, "read_floor", 10)
                plan.add(side.spec.kind, read.key, "read", "read_graph", read.args, page_limit=read.page_limit,
                         entities=graph_size)
    return plan


@dataclass
class TsResult:
    """What the TypeScript client measured on one server (latencies in nanoseconds)."""

    samples: dict[str, workload.Samples] = field(default_factory=dict)
    floor: list[int] = field(default_factory=list)
    noop: list[int] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    pages: dict[str, int] = field(default_factory=dict)
    peak_rss_mb_ops: float | None = None
    peak_rss_mb: float | None = None


def _mib(value: Any) -> str:
    return f"{int(value) / 2**20:.0f} MiB" if isinstance(value, int) else "its limit"


def parse(plan: Plan, lines: list[str]) -> dict[str, TsResult]:
    """Fold the driver's output lines into per-server results.

    Raises:
        BenchError: an operation (not a whole-graph read) failed, a result held the wrong number of
            entities, or the driver stopped before the last step.
    """
    out = {kind: TsResult() for kind in plan.servers}
    done = 0
    for line in lines:
        record = json.loads(line)
        if "i" not in record:
            continue
        kind, key, phase, r, expected = plan.meta[record["i"]]
        res = out[kind]
        done = max(done, record["i"] + 1)
        failure = record.get("error") or record.get("refused")
        if failure:
            if not phase.startswith("read"):
                raise BenchError(f"TypeScript client, {kind} {key}: {record.get('error') or record.get('message')}")
            if "error" in record:
                res.refused[key] = f"refused by the server: {record['error']}"
            elif record["refused"] == "client":
                res.refused[key] = (f"refused by the client (over its {_mib(record.get('maxMessageBytes'))} "
                                    f"limit on one message; it dropped the connection)")
            else:
                res.refused[key] = f"connection lost: {record.get('message')}"
            continue
        ns: list[int] = record["ns"]
        if expected is not None and any(n != expected for n in record["entities"]):
            raise BenchError(f"TypeScript client, {kind} {key}: expected {expected} entities, got {record['entities']}")
        if record.get("rssMb") is not None:
            if phase == "op":
                res.peak_rss_mb_ops = record["rssMb"]
            if phase == "read":
                res.peak_rss_mb = max(res.peak_rss_mb or 0.0, record["rssMb"])
        if phase == "floor":
            res.floor += ns
        elif phase == "noop":
            res.noop += ns
        elif phase in ("op", "op_floor", "read", "read_floor"):
            samples = res.samples.setdefault(key, workload.Samples())
            series = samples.op if phase in ("op", "read") else samples.floor
            index = r if phase.startswith("op") else 0
            while len(series) <= index:
                series.append([])
            series[index] += ns
            if phase == "read" and "pages" in record:
                res.pages[key] = record["pages"]
    if done < len(plan.steps):
        raise BenchError(f"the TypeScript driver stopped after {done} of {len(plan.steps)} steps (see servers.log)")
    for res in out.values():
        res.peak_rss_mb = max(res.peak_rss_mb or 0.0, res.peak_rss_mb_ops or 0.0) or None
        # A read refused on every sample leaves floors without operations: not a row.
        for key in [k for k, s in res.samples.items() if not any(s.op)]:
            del res.samples[key]
    return out


def run(plan: Plan, sdk: Path, workdir: Path, errlog: IO[str], env: dict[str, str]) -> dict[str, TsResult]:
    """Run ``plan`` with the driver in ``sdk`` (see :func:`ensure_sdk`); servers' stderr and the
    driver's go to ``errlog``.

    Raises:
        BenchError: the driver failed (see :func:`parse`).
    """
    plan_file = workdir / "ts-plan.json"
    plan_file.write_text(json.dumps({"servers": plan.servers, "steps": plan.steps}, ensure_ascii=False),
                         encoding="utf-8")
    errlog.flush()
    proc = subprocess.run(["node", str(sdk / DRIVER.name), str(plan_file)], cwd=sdk, env=env,
                          stdout=subprocess.PIPE, stderr=errlog, text=True, check=False)
    results = parse(plan, proc.stdout.splitlines())
    if proc.returncode != 0:
        raise BenchError(f"the TypeScript driver exited with {proc.returncode} (see servers.log)")
    return results
