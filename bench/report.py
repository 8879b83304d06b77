"""Turning a results dict (see ``bench.run``) into a text table, Markdown and a plot."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from bench import clients_report

POINT_TARGET_RATIO = 1.3
SPEEDUP_TARGETS = {10_000: 10.0, 100_000: 100.0}
IMPORT_TARGET_S = 15.0
RSS_TARGET_MB = 150.0
MIB_IN_MB = 2**20 / 10**6
COLD_TARGET_S = 1.5
ORDER = clients_report.ORDER


def ms(value: float | None) -> str:
    """A latency in milliseconds with sensible precision."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if value < 10:
        return f"{value:.2f}"
    if value < 100:
        return f"{value:.1f}"
    return f"{value:,.0f}"


def ratio(value: float | None) -> str:
    if value is None or math.isnan(value):
        return "—"
    return f"{value:.2f}×" if value < 10 else f"{value:,.0f}×"


def _ops(side: dict[str, Any] | None) -> dict[str, Any]:
    return (side or {}).get("ops", {}) if side and "skipped" not in side else {}


def rows(size_result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per operation: ours and reference figures and the speedup."""
    ours, ref = size_result["ours"], size_result.get("reference")
    ours_ops, ref_ops = _ops(ours), _ops(ref)
    out = [{
        "key": "floor", "label": "empty call (before the rounds; each row has its own)", "point": True,
        "ours": {"p50": ours["floor"]["p50"], "p95": ours["floor"]["p95"]},
        "ref": {"p50": ref["floor"]["p50"], "p95": ref["floor"]["p95"]} if ref_ops else None,
    }]
    for key in ORDER:
        if key not in ours_ops:
            continue
        o, r = ours_ops[key], ref_ops.get(key)
        out.append({"key": key, "label": o["label"], "point": o["point"], "ours": o, "ref": r,
                    "speedup": (r["p50"] / o["p50"]) if r else None})
    return out


def _cells(o: dict[str, Any]) -> str:
    """p50, p95, paired floor and ratio of one side of a row, aligned for the text table."""
    floor = ms(o["floor_p50"]) if "floor_p50" in o else ""
    times = ratio(o["ratio"]) if "ratio" in o else ""
    return f"{ms(o['p50']):>9} {ms(o['p95']):>8} {floor:>7} {times:>7}"


def _net(o: dict[str, Any]) -> str:
    return ratio(o["net_ratio"]) if "net_ratio" in o else ""


def text_table(result: dict[str, Any]) -> str:
    meta = result["meta"]
    lines = [f"graph-memory benchmark — {meta['date']} — {meta['machine']['cpu']} ×{meta['machine']['cpus']} — "
             f"client mode for ours: {meta['ours_mode']}"]
    probe = result.get("mode_probe")
    if probe:
        lines.append(f"our empty-call floor by client mode (empty graph): legacy {ms(probe['legacy']['p50'])} ms, "
                     f"auto/2026-07-28 {ms(probe['auto']['p50'])} ms → {probe['chosen']}")
    empty = result["empty"]
    lines.append(f"empty graph: ours open_nodes([]) {ms(empty['ours']['floor']['p50'])} ms, unknown tool "
                 f"{ms(empty['ours']['noop']['p50'])} ms" + (
                     f"; reference unknown tool {ms(empty['reference']['floor']['p50'])} ms, open_nodes([]) "
                     f"{ms(empty['reference']['open_nodes_empty']['p50'])} ms" if "reference" in empty else ""))
    for size, s in result["sizes"].items():
        g = s["graph"]
        lines.append("")
        lines.append(f"== {int(size):,} entities · {g['observations']:,} observations · "
                     f"{g['relations']:,} relations ==")
        ref = s.get("reference")
        if ref and "skipped" in ref:
            lines.append(f"(reference skipped: {ref['skipped']})")
        elif ref:
            lines.append(f"(reference: {ref['samples_note']})")
        table = rows(s)
        width = max(len(row["label"]) + (0 if row["point"] else 2) for row in table)
        header = (f"{'operation':<{width}} {'ours p50':>9} {'p95':>8} {'floor':>7} {'×floor':>7} {'‡':>6} │ "
                  f"{'ref p50':>9} {'p95':>8} {'floor':>7} {'×floor':>7} │ {'ref/ours':>8}")
        lines += [header, "─" * len(header)]
        for row in table:
            mark = "" if row["point"] else " †"
            label = row["label"]
            ref_part = _cells(row["ref"]) if row["ref"] else f"{'—' if ref else '':>9} {'':>8} {'':>7} {'':>7}"
            speed = ratio(row.get("speedup")) if row.get("speedup") else ""
            lines.append(f"{label + mark:<{width}} {_cells(row['ours'])} {_net(row['ours']):>6} │ {ref_part} │ "
                         f"{speed:>8}")
        lines.append("(ms; floor = the empty calls interleaved with that row; ‡ = ×floor without the client's "
                     "output-schema validation; † = result grows with the graph)")
        lines.append(_facts_line(s))
        lines += ["", "both official clients side by side (p50 ms; speedup = reference ÷ ours):",
                  *clients_report.text_table(s), *clients_report.notes(s)]
        cost = clients_report.client_cost_lines(s)
        if cost:
            lines += ["the Python client's own work on our replies (in-process, on a captured reply; the "
                      "TypeScript client's where it ran):", *cost]
    lines.append("")
    lines.append("targets:")
    for t in targets(result) + clients_report.targets(result):
        state = "note" if t.get("info") else "met" if t["met"] else "MISSED" if t["met"] is False else "n/a"
        lines.append(f"  [{state}] {t['target']}: {t['value']}")
    return "\n".join(lines)


def rss_text(side: dict[str, Any]) -> str:
    """Peak RSS through the operations, and after read_graph when it ran."""
    text = f"{side['peak_rss_mb_ops']:.0f} MiB"
    if "read_graph" in side["ops"]:
        text += f" ({side['peak_rss_mb']:.0f} after read_graph)"
    return text


def _facts_line(s: dict[str, Any]) -> str:
    ours, ref = s["ours"], s.get("reference")
    parts = [f"other jobs took {s['load']['others_busy'] * 100:.0f} % of the CPUs (load {s['load']['start'][0]:.1f}→"
             f"{s['load']['end'][0]:.1f})",
             f"import {s['import']['seconds_median']:.2f} s wall, {s['import']['cpu_seconds_median']:.2f} s CPU "
             f"(peak RSS {s['import']['peak_rss_mb']:.0f} MiB)",
             f"db {s['db_bytes_after_import'] / 2**20:.1f} MiB (JSONL {s['graph']['jsonl_bytes'] / 2**20:.1f} MiB)",
             f"cold start ours {ours['cold_start_p50_s']:.2f} s",
             f"server peak RSS ours {rss_text(ours)}"]
    if ref and "skipped" not in ref:
        parts.append(f"reference: cold start {ref['cold_start_p50_s']:.2f} s, peak RSS {rss_text(ref)}")
    if "first_start_import" in s:
        parts.append(f"first start on the legacy file (server imports, then answers) "
                     f"{s['first_start_import']['first_reply_s']:.2f} s")
    return "; ".join(parts)


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The issue's targets, evaluated on this run (``met`` None when the run cannot tell)."""
    out: list[dict[str, Any]] = []
    sizes = {int(k): v for k, v in result["sizes"].items()}
    largest = max(sizes)
    big = sizes[largest]
    points = [(k, o) for k, o in big["ours"]["ops"].items() if o["point"]]
    worst = max(points, key=lambda kv: kv[1]["ratio"])
    # The targets are stated at 100,000 entities; a smaller run shows its largest size for reference.
    only = "" if largest >= 100_000 else f"only {largest:,} measured: "
    out.append({"target": f"every point operation at 100,000 within {POINT_TARGET_RATIO}× of our floor",
                "met": worst[1]["ratio"] <= POINT_TARGET_RATIO if largest >= 100_000 else None,
                "value": f"{only}worst {worst[0]} {worst[1]['ratio']:.2f}× ("
                         + ", ".join(f"{k} {o['ratio']:.2f}×" for k, o in points) + ")"})
    if all("net_ratio" in o for _, o in points):
        net_worst = max(points, key=lambda kv: kv[1]["net_ratio"])
        out.append({"target": f"(for reading the above, not a target) the same at {largest:,} entities without "
                              f"the client's output-schema validation",
                    "met": None, "info": True,
                    "value": f"worst {net_worst[0]} {net_worst[1]['net_ratio']:.2f}× ("
                             + ", ".join(f"{k} {o['net_ratio']:.2f}×" for k, o in points) + ")"})
    for size, need in SPEEDUP_TARGETS.items():
        s = sizes.get(size)
        ref_ops = _ops(s.get("reference")) if s else {}
        if not ref_ops:
            out.append({"target": f"≥{need:.0f}× faster than the reference at {size:,} (point operations)",
                        "met": None, "value": "not measured in this run"})
            continue
        speed = {k: ref_ops[k]["p50"] / o["p50"] for k, o in s["ours"]["ops"].items() if o["point"] and k in ref_ops}
        low = min(speed, key=speed.__getitem__)
        out.append({"target": f"≥{need:.0f}× faster than the reference at {size:,} (point operations)",
                    "met": speed[low] >= need,
                    "value": f"lowest {low} {speed[low]:,.0f}× ("
                             + ", ".join(f"{k} {v:,.0f}×" for k, v in speed.items()) + ")"})
    imp = sizes.get(100_000, {}).get("import") if 100_000 in sizes else None
    out.append({"target": f"import of a 100k-entity JSONL ≤ {IMPORT_TARGET_S:.0f} s",
                "met": imp["seconds_median"] <= IMPORT_TARGET_S if imp else None,
                "value": (", ".join(f"{r['seconds']:.2f} s wall ({r['cpu_seconds']:.2f} s CPU)" for r in imp["runs"])
                          if imp else "not measured")})
    rss = big["ours"]["peak_rss_mb_ops"]   # MiB (VmHWM); the target is in MB (10^6 bytes)
    out.append({"target": f"server peak RSS ≤ {RSS_TARGET_MB:.0f} MB at 100,000",
                "met": rss * MIB_IN_MB <= RSS_TARGET_MB if largest >= 100_000 else None,
                "value": f"{only}{rss * MIB_IN_MB:.0f} MB ({rss:.0f} MiB) through every point and search operation"
                         + (f"; {big['ours']['peak_rss_mb']:.0f} MiB after read_graph of the whole graph"
                            if "read_graph" in big["ours"]["ops"] else "")})
    colds = {k: v["ours"]["cold_start_p50_s"] for k, v in sizes.items()}
    worst_cold = max(colds.values())
    out.append({"target": f"cold start to first reply ≤ {COLD_TARGET_S} s",
                "met": worst_cold <= COLD_TARGET_S,
                "value": ", ".join(f"{k:,}: {v:.2f} s" for k, v in colds.items()) + " (median of runs)"})
    return out


READING = [
    "- **The floor is the SDK's.** An empty call is a JSON-RPC round trip through the MCP SDK at both "
    "ends; graph-memory's own code is about 20 µs of it (argument parsing, one read transaction, the reply "
    "text). Since issue 15 graph-memory serves stdio on the event loop's pipes itself, on uvloop where it is "
    "installed (the SDK's own transport read every line and wrote every reply on a worker thread, three thread "
    "hops per call); what remains is the SDK's session and request handling in Python and the client's own "
    "work (about half of the Python client's floor; see \"The floor, profiled\" below). The reference "
    "server's Node SDK answers an empty call in less time still.",
    "- **Point operations add 0.1–0.5 ms to the floor, and that excess does not grow with the graph.** The "
    "‡ column splits it: the official Python client checks every structured result against the tool's output "
    "schema with `jsonschema` (pure Python), which costs about 0.05 ms for the entity, relations and neighbors "
    "that `open_nodes` and `search_nodes` return (0.1–0.2 ms before their items were checked by their "
    "required keys only; the reference server's replies are checked the same way). "
    "On the server, in a tight loop, a point read is 40–60 µs of SQLite and a write 70–100 µs. Writes do not "
    "update the FTS5 index themselves: they queue the entities whose search documents changed, and the index "
    "catches up for all of them at once — before the next search, after half a second without writes, or "
    "within the write that brings the queue to 64 entities (3.5 ms for 63 entities at 100,000, 55 µs each, "
    "where indexing one entity on its own costs 175 µs). Indexing every write on its own cost about 0.15 ms "
    "per write end to end (measured side by side with `python -m bench.ab`). Between two calls of a real "
    "session the client and the SDK have cooled the CPU caches, and the same work takes 2–3 times as long "
    "(measured: 105 → 410 µs for `open_nodes` when 16 MiB is touched between calls). A profile of the "
    "server under `open_nodes` at 100,000 entities (perf) puts SQLite at 3 % of its CPU time, the Python "
    "interpreter running the SDK and our code at 56 % and the kernel (mostly the stdio transport's thread "
    "switches) at 31 %: what remains above the floor for reads is the size of the reply — three entities "
    "with their observations, once as structured content and once as text — through the SDK at both ends.",
    "- **p95 and the worst case of writes are the index catching up.** Every 64 changed entities one write "
    "indexes the whole queue (a few ms), and FTS5 merges its segments incrementally: now and then a catch-up "
    "does a few hundred pages of merge work (5–30 ms), and rarely a merge rewrites the whole index (about "
    "1 s at 100,000 entities). Batching writes fewer, larger segments, so merges come less often than when "
    "every write added one. An import ends with the index merged into one segment.",
    "- **Results that grow with the graph are the client's time.** Validating thousands of entities with "
    "`jsonschema` dominates common-term searches and `read_graph` for both servers; at 100,000 entities the "
    "client's stdio reader also re-joins its line buffer for every 64 KiB it receives (quadratic in the "
    "size of one message), so the ~100 MB `read_graph` reply takes minutes whichever server sends it.",
    "- **The reference server reads and rewrites its whole file on every call**, so each of its "
    "operations grows linearly with the graph; graph-memory's point operations stay flat.",
]


RUNNING = [
    "From the repository root (`bench/` is not part of the installed package): `pip install -e '.[bench]'`, "
    "then `python -m bench --reference` — 10,000 and 100,000 entities, graph-memory and the reference server, "
    "through both official clients. It needs Node 18+ and npm: the reference server is installed into "
    "`bench/.reference` and the TypeScript SDK client into `bench/.ts-client` on first use (both git-ignored; "
    "`--ts-sdk FOLDER` uses an existing install). A full run rewrites this page, `docs/bench.png` and the "
    "README's table.",
    "",
    "- `--quick` (10,000 entities unless `--sizes` says otherwise; a few minutes): fewer samples, writes "
    "nothing but `bench/results/`. `--sizes 1000,10000` picks the graphs; `--clients python` leaves the "
    "TypeScript client out; `--render RESULTS.json` rebuilds the pages from a saved run.",
    "- `--import-size 1000000` also times `graph-memory import` of a generated 1,000,000-entity file into a "
    "new database (issue 15's ≤ 90 s and ≤ 1 GB; about 3 minutes more, 0.4 GB of disk; peak memory is the "
    "import's own VmHWM).",
    "- The TypeScript client runs `bench/ts_driver.mjs` (`StdioClientTransport`, latencies from "
    "`performance.now()`), on its own copy of the data, with the schedule the Python client ran; paged reads "
    "(`limit` + `cursor`, every page) and `view: \"summary\"` run wherever the server's `tools/list` "
    "advertises them. That client refuses any message over 10 MiB and drops the connection: such a read is "
    "reported as refused by the client, and the driver reconnects for the next step.",
    "- To tell whether a change helps, compare two source trees side by side on one database with "
    "`python -m bench.ab` (the two versions take turns block by block; see its docstring).",
    "- To see how much of a large reply's time is the client's own, `python -m bench.client_cost --reference` "
    "times each official client's steps (stdio reader, parse, output-schema check) on captured replies of "
    "read_graph and the 2.5 % search from both servers.",
]


def markdown(result: dict[str, Any]) -> str:
    meta = result["meta"]
    v = meta["versions"]
    lines = [
        "# Benchmarks",
        "",
        "<!-- generated by `python -m bench --reference` (bench/report.py); do not edit by hand -->",
        "",
        f"Measured {meta['date']} on `{meta['machine']['uname']}` — {meta['machine']['cpu']}, "
        f"{meta['machine']['cpus']} cores, {meta['machine']['memory_gb']} GB RAM (a shared machine: load "
        f"average {meta['loadavg_start'][0]:.2f} at the start, {meta['loadavg_end'][0]:.2f} at the end; how much "
        f"CPU other jobs took is under Noise). Python {v['python']}, mcp {v['mcp']}, apsw {v['apsw']}, "
        f"SQLite {v['sqlite']}, graph-memory {v['graph_memory']}"
        + (f", Node {v['node']}, reference server `@modelcontextprotocol/server-memory@{v['reference_server']}`"
           if "reference_server" in v else "")
        + (f", TypeScript SDK `@modelcontextprotocol/sdk@{v['ts_sdk']}`" if "ts_sdk" in v else "") + ".",
        "",
        "Every figure is a round trip through an official MCP client over stdio to a server subprocess — what "
        "a host application sees: the Python client (`mcp.Client`, what Python agent frameworks run) and, "
        "where marked, the TypeScript client (`@modelcontextprotocol/sdk` under Node, what Claude Desktop, "
        "VS Code and Cursor run), each on its own copy of the data and with the same schedule. Graphs have 5 "
        "observations per entity and as "
        "many relations as entities, with accented, CJK and emoji text. Each row carries its own "
        "**floor**: what an empty `tools/call` costs on the same server process at that moment (ours: "
        "`open_nodes` with no names; the "
        "reference: a call to an unknown tool, since every one of its tools re-reads its whole file). "
        "Calls go in alternating blocks of ten — empty calls back to back, then the operation back to back — "
        "so each kind of call is timed in its own steady state, within milliseconds of the other. **×floor** "
        "is the operation's p50 ÷ the p50 of the empty calls interleaved with it: 1.00× means the operation "
        "costs nothing beyond the protocol. Both servers are connected at once and their measuring rounds "
        "alternate, so a busy moment of the machine hits both alike.",
        "",
    ]
    probe = result.get("mode_probe")
    if probe:
        lines += [f"Client mode against graph-memory: **{meta['ours_mode']}** (the lower floor on an empty graph: "
                  f"handshake-era `legacy` {ms(probe['legacy']['p50'])} ms, `auto` → 2026-07-28 "
                  f"{ms(probe['auto']['p50'])} ms). The reference server is handshake-era, so it runs in "
                  f"`legacy` mode.", ""]
    lines += ["## Summary", "", "| graph | import (CLI), wall / CPU | database | cold start ours | "
              "cold start reference | peak RSS ours | peak RSS reference |", "|---|---|---|---|---|---|---|"]
    for size, s in result["sizes"].items():
        ours, ref = s["ours"], s.get("reference")
        has_ref = ref and "skipped" not in ref
        ref_cold = f"{ref['cold_start_p50_s']:.2f} s" if has_ref else "—"
        ref_rss = rss_text(ref) if has_ref else "—"
        lines.append(
            f"| {int(size):,} entities | {s['import']['seconds_median']:.2f} s / "
            f"{s['import']['cpu_seconds_median']:.2f} s | "
            f"{s['db_bytes_after_import'] / 2**20:.1f} MiB (JSONL {s['graph']['jsonl_bytes'] / 2**20:.1f} MiB) | "
            f"{ours['cold_start_p50_s']:.2f} s | {ref_cold} | "
            f"{rss_text(ours)} | {ref_rss} |")
    first = next((s["first_start_import"] for s in result["sizes"].values() if "first_start_import" in s), None)
    if first:
        lines += ["", f"First start on a legacy `memory.jsonl` of {max(int(k) for k in result['sizes']):,} entities "
                      f"(the server imports it, then answers): {first['first_reply_s']:.2f} s to the first reply."]
    for size, s in result["sizes"].items():
        ref = s.get("reference")
        has_ref = ref and "skipped" not in ref
        lines += ["", f"## {int(size):,} entities", "",
                  "p50 in milliseconds through each official client; speedup = the reference's p50 ÷ ours. "
                  "Pages, the summary view and `update_observations` exist only on graph-memory; a reply "
                  "refused for its size is marked as such (notes below the table).", "",
                  *clients_report.markdown_table(s)]
        notes = clients_report.notes(s)
        if notes:
            lines += ["", *[f"- {n}" for n in notes]]
        cost = clients_report.client_cost_lines(s)
        if cost:
            lines += ["", "The Python client's own work on our replies (timed in-process on a reply captured from "
                          "the server; its stdio reader re-joins its buffer for every 64 KiB chunk, its output-"
                          "schema check is pure-Python `jsonschema`; where the TypeScript client ran, its own "
                          "work on the same reply: its ReadBuffer concatenates its whole buffer for every 64 KiB "
                          "read, its output-schema check is compiled by ajv):", "", *[f"- {c}" for c in cost]]
        lines += ["", f"## {int(size):,} entities, Python client in detail (×floor)", ""]
        if ref and not has_ref:
            lines += [f"Reference server skipped at this size ({ref['skipped']}).", ""]
        elif has_ref:
            lines += [f"Reference server: {ref['samples_note']}.", ""]
        lines += ["| operation | ours p50 | ours p95 | ×floor | ×floor w/o client validation ‡ | reference p50 | "
                  "reference p95 | ×floor | speedup |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for row in rows(s):
            o, r = row["ours"], row["ref"]
            label = row["label"] + ("" if row["point"] else " †")
            ours_cells = (f"{ms(o['p50'])} ms | {ms(o['p95'])} ms | {ratio(o['ratio']) if 'ratio' in o else '1.00×'} | "
                          + (f"{ratio(o['net_ratio'])} ({ms(o['validation_p50'])} ms)" if "net_ratio" in o else ""))
            if r:
                ref_cells = f"{ms(r['p50'])} ms | {ms(r['p95'])} ms | {ratio(r['ratio']) if 'ratio' in r else '1.00×'}"
            else:
                ref_cells = "— | — | —"
            speed = f"**{ratio(row['speedup'])}**" if row.get("speedup") else ""
            lines.append(f"| {label} | {ours_cells} | {ref_cells} | {speed} |")
    lines += ["", "† the result grows with the graph (1 % or 0.1 % of the entities, or all of them): not a point "
                  "operation. Both servers' figures include the client parsing and validating the result.", "",
              "‡ the same ratio with the official client's output-schema check taken out of both the operation "
              "and its floor (in brackets: that check's p50 for the operation). The client validates every "
              "structured result with `jsonschema`, in pure Python, so its share grows with the size of the "
              "result; what remains is the server, the transport and the client's JSON parsing.", ""]
    lines += ["## Targets (issue 6)", "",
              "The numbers this benchmark was built to check, from graph-memory's issue 6 "
              "(\"Benchmarks: latency and scale side by side with the reference server\"):", ""]
    for t in targets(result):
        state = ("note" if t.get("info") else "met" if t["met"] else "**missed**" if t["met"] is False
                 else "not judged (size not run)")
        lines.append(f"- {state} — {t['target']}: {t['value']}")
    lines += ["", "## Targets (issue 15)", "",
              "Recall that fits a context window, large replies as fast as the bytes allow, through both clients:",
              ""]
    for t in clients_report.targets(result):
        state = "met" if t["met"] else "**missed**" if t["met"] is False else "not judged"
        lines.append(f"- {state} — {t['target']}: {t['value']}")
    lines += ["", "## Noise", "", _noise(result), "", "## Reading the numbers", "", *READING, "",
              "![latency vs graph size](bench.png)", "",
              "## Running the benchmark", "", *RUNNING, ""]
    return "\n".join(lines)


def _noise(result: dict[str, Any]) -> str:
    """How much the per-round medians moved, for our operations."""
    parts = []
    for size, s in result["sizes"].items():
        spreads = [o["round_spread"] for o in s["ours"]["ops"].values() if len(o.get("round_p50s", [])) > 1]
        if spreads:
            spreads.sort()
            parts.append(f"{int(size):,} entities (other jobs used {s['load']['others_busy'] * 100:.0f} % of the "
                         f"CPUs): median "
                         f"{spreads[len(spreads) // 2] * 100:.0f} %, worst {spreads[-1] * 100:.0f} %")
    return ("Each of our operations ran in several rounds; the spread of the per-round medians "
            "((max − min) ÷ min) was " + "; ".join(parts) + ". Ratios to the floor are steadier than absolute "
            "figures because the floor is sampled alongside.") if parts else ""


def plot(result: dict[str, Any], path: Path) -> None:
    """Latency p50 vs graph size, log axes, one panel per official client: a few key operations
    (read_graph included: its time is mostly the client's) for us and the reference, and both
    floors."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = sorted(int(k) for k in result["sizes"])
    keys = [("open_nodes", "open_nodes", "tab:blue"), ("add_observations", "add_observations", "tab:orange"),
            ("search_rare", "search_nodes (rare term)", "tab:green"),
            ("search_broad", "search_nodes (2.5 % of entities)", "tab:purple"),
            ("read_graph", "read_graph (whole graph)", "tab:red"),
            ("read_graph_paged", "read_graph, every page", "tab:brown")]
    clients = [c for c in clients_report.CLIENTS
               if any(c in clients_report.sides(result["sizes"][str(n)]) for n in sizes)]
    fig, axes = plt.subplots(1, len(clients), figsize=(7.5 * len(clients), 6.5), dpi=110, sharey=True,
                             squeeze=False)
    for ax, client in zip(axes[0], clients, strict=True):
        pairs = {n: clients_report.sides(result["sizes"][str(n)]).get(client) for n in sizes}
        for key, label, color in keys:
            for index, (who, style) in enumerate((("graph-memory", "-"), ("reference", "--"))):
                points = [(n, clients_report.cell(p[index], key)[0]) for n, p in pairs.items() if p]
                points = [(n, v) for n, v in points if v]
                if points:
                    ax.plot(*zip(*points, strict=True), marker="os"[index], linestyle=style, color=color,
                            alpha=1.0 if index == 0 else 0.8, label=f"{label} — {who}")
        for index, (who, color) in enumerate((("graph-memory", "black"), ("reference", "gray"))):
            sides = [(n, p[index]) for n, p in pairs.items() if p]
            floor = [(n, side["floor"]["p50"]) for n, side in sides if side]
            if floor:
                ax.plot(*zip(*floor, strict=True), color=color, linewidth=2, linestyle="-" if index == 0 else "--",
                        label=f"empty call (floor) — {who}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(sizes, [f"{n:,}" for n in sizes])
        ax.set_xlabel("entities in the graph (5 observations each, as many relations)")
        ax.set_title(clients_report.CLIENTS[client], fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7, loc="upper left", ncol=2)
    axes[0][0].set_ylabel("latency p50 per call, ms (over stdio)")
    meta = result["meta"]
    fig.suptitle(f"graph-memory vs @modelcontextprotocol/server-memory — {meta['date'][:10]}, "
                 f"{meta['machine']['cpus']}-core {meta['machine']['cpu']}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
