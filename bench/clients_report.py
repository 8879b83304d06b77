"""Both official clients side by side: the tables, the client's own cost and issue 15's targets.

A size's result (see ``bench.run``) holds the Python client's sides under ``ours``/``reference``
and the TypeScript client's under ``typescript``; :func:`sides` pairs them up. Every cell is a
p50 in milliseconds, or why there is none (a read refused by the server's reply bound, or by the
TypeScript client's 10 MiB limit on one message, or not run).
"""

from __future__ import annotations

from typing import Any

CLIENTS = {"python": "Python client (mcp.Client)", "typescript": "TypeScript client (@modelcontextprotocol/sdk)"}
ORDER = ["search_rare", "search_common", "search_broad", "search_broad_summary", "search_two_words",
         "search_words_mode", "open_nodes", "create_entities", "create_relations", "add_observations",
         "update_observations", "delete_observations", "delete_relations", "delete_entities",
         "read_graph_page", "read_graph_paged", "read_graph_summary", "read_graph"]


def sides(size_result: dict[str, Any]) -> dict[str, tuple[dict[str, Any], dict[str, Any] | None]]:
    """client → (ours, reference or None) of one size."""
    ref = size_result.get("reference")
    out = {"python": (size_result["ours"], ref if ref and "skipped" not in ref else None)}
    ts = size_result.get("typescript")
    if ts:
        out["typescript"] = (ts["ours"], ts.get("reference"))
    return out


def cell(side: dict[str, Any] | None, key: str) -> tuple[float | None, str]:
    """(p50 in ms or None, text) of one operation on one side."""
    if side is None:
        return None, "—"
    op = side.get("ops", {}).get(key)
    if op:
        return op["p50"], _ms(op["p50"])
    refused = side.get("refused", {}).get(key, "")
    if refused.startswith("refused by the client"):
        return None, "refused by the client"
    if refused.startswith("refused by the server"):
        return None, "refused by the server"
    return None, "—" if not refused else "failed"


def _ms(value: float) -> str:
    return f"{value:.2f}" if value < 10 else f"{value:.1f}" if value < 100 else f"{value:,.0f}"


def _x(value: float) -> str:
    return f"{value:.2f}×" if value < 10 else f"{value:,.0f}×"


def rows(size_result: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per operation any side ran or refused: label, and per client the two cells and the
    speedup (reference p50 ÷ ours p50)."""
    pairs = sides(size_result)
    labels: dict[str, str] = {}
    for ours, ref in pairs.values():
        for side in (ours, ref):
            for key, op in (side or {}).get("ops", {}).items():
                labels.setdefault(key, op["label"])
    out = [{"key": "floor", "label": "empty call (floor)", "clients": {
        client: {"ours": _ms(ours["floor"]["p50"]), "ref": _ms(ref["floor"]["p50"]) if ref else "—",
                 "speedup": None} for client, (ours, ref) in pairs.items()}}]
    refused_keys = {k for ours, ref in pairs.values() for side in (ours, ref) for k in (side or {}).get("refused", {})}
    for key in ORDER:
        if key not in labels and key not in refused_keys:
            continue
        clients = {}
        for client, (ours, ref) in pairs.items():
            (o, o_text), (r, r_text) = cell(ours, key), cell(ref, key)
            clients[client] = {"ours": o_text, "ref": r_text, "speedup": r / o if o and r else None}
        out.append({"key": key, "label": labels.get(key, key), "clients": clients})
    return out


def markdown_table(size_result: dict[str, Any]) -> list[str]:
    """The side-by-side table of one size (p50 in ms), as Markdown lines."""
    clients = list(sides(size_result))
    head = "| operation | " + " | ".join(f"{CLIENTS[c].split(' (')[0]}: ours | reference | speedup" for c in clients)
    lines = [head + " |", "|---|" + "---:|---:|---:|" * len(clients)]
    for row in rows(size_result):
        cells = []
        for c in clients:
            x = row["clients"][c]
            speed = f"**{_x(x['speedup'])}**" if x["speedup"] else ""
            cells += [x["ours"], x["ref"], speed]
        lines.append(f"| {row['label']} | " + " | ".join(cells) + " |")
    return lines


def text_table(size_result: dict[str, Any]) -> list[str]:
    """The side-by-side table of one size, for the terminal."""
    table = rows(size_result)
    clients = list(sides(size_result))
    width = max(len(r["label"]) for r in table)
    header = f"{'operation (p50 ms)':<{width}}" + "".join(
        f" │ {c + ': ours':>21} {'reference':>21} {'speedup':>8}" for c in clients)
    lines = [header, "─" * len(header)]
    for row in table:
        parts = []
        for c in clients:
            x = row["clients"][c]
            parts.append(f" │ {x['ours']:>21} {x['ref']:>21} {_x(x['speedup']) if x['speedup'] else '':>8}")
        lines.append(f"{row['label']:<{width}}" + "".join(parts))
    return lines


def notes(size_result: dict[str, Any]) -> list[str]:
    """Refusals in full, pages walked, peak RSS after the whole-graph reads, per client."""
    out = []
    for client, (ours, ref) in sides(size_result).items():
        for kind, side in (("ours", ours), ("reference", ref)):
            if not side:
                continue
            for key, why in side.get("refused", {}).items():
                out.append(f"{client} client, {kind}, {key}: {why}")
            for key, pages in side.get("pages", {}).items():
                out.append(f"{client} client, {kind}, {key}: {pages:,} pages")
            if side.get("peak_rss_mb") is not None:
                out.append(f"{client} client, {kind}: server peak RSS {side['peak_rss_mb_ops'] or 0:.0f} MiB through "
                           f"the operations, {side['peak_rss_mb']:.0f} MiB after the whole-graph reads")
    for kind, read in (size_result.get("whole_read") or {}).items():
        unbound = ", no bound on replies" if kind == "ours" else ""
        out.append(f"whole read_graph through a bare JSON-RPC client (no client's own cost{unbound}), "
                   f"{kind}: first byte {read['first_byte_s']:.2f} s, last byte {read['last_byte_s']:.2f} s, "
                   f"{read['bytes'] / 1e6:.2f} MB, {read['entities']:,} entities; server peak RSS after it "
                   f"{read['peak_rss_mb']:.0f} MiB")
    return out


def client_cost_lines(size_result: dict[str, Any]) -> list[str]:
    """What the Python client spends on our replies by itself (``bench.client_cost``), next to the
    call's p50 through that client and through the TypeScript client."""
    cost = size_result.get("python_client_cost") or {}
    pairs = sides(size_result)
    out = []
    for key, c in cost.items():
        py = pairs["python"][0]["ops"].get(key)
        ts = pairs["typescript"][0]["ops"].get(key) if "typescript" in pairs else None
        check = py.get("validation_p50") if py else None
        own = c["reader_ms"] + c["parse_ms"] + c["result_ms"] + (check or 0.0)
        out.append(
            f"{key} ({c['reply_bytes'] / 1e6:.2f} MB reply, {'ASCII' if c['ascii'] else 'non-ASCII'} JSON): "
            f"stdio reader {_ms(c['reader_ms'])} ms ({c['chunks']:,} chunks, buffer re-joined per chunk), "
            f"JSON-RPC parse {_ms(c['parse_ms'])} ms, result model {_ms(c['result_ms'])} ms"
            + (f", output-schema check {_ms(check)} ms (live p50)" if check is not None else "")
            + f" = {_ms(own)} ms of the client's own work"
            + (f", in a call of {_ms(py['p50'])} ms through the Python client" if py else "")
            + (f" ({_ms(ts['p50'])} ms through the TypeScript client)" if ts else "")
            + (_typescript_cost(c["typescript"]) if "typescript" in c else ""))
    return out


def _typescript_cost(c: dict[str, Any]) -> str:
    """The TypeScript client's own work on the same reply (``bench/ts_client_cost.mjs``)."""
    own = c["readBufferMs"] + c["resultSchemaMs"] + c["outputSchemaMs"]
    return (f"; the TypeScript client's own: ReadBuffer {_ms(c['readBufferMs'])} ms (its buffer concatenated per "
            f"64 KiB read; including the line's decode {_ms(c['decodeMs'])} ms and JSON.parse "
            f"{_ms(c['jsonParseMs'])} ms), "
            f"result check {_ms(c['resultSchemaMs'])} ms, output-schema check {_ms(c['outputSchemaMs'])} ms "
            f"= {_ms(own)} ms")


def targets(result: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 15's targets on this run (``met`` None when the run cannot tell)."""
    sizes = {int(k): v for k, v in result["sizes"].items()}
    out: list[dict[str, Any]] = []

    def speed(size: int, client: str, key: str, ref_key: str | None = None) -> float | None:
        s = sizes.get(size)
        if not s or client not in sides(s):
            return None
        ours, ref = sides(s)[client]
        o, r = cell(ours, key)[0], cell(ref, ref_key or key)[0]
        return r / o if o and r else None

    def judge(target: str, value: float | None, need: float, what: str = "") -> None:
        out.append({"target": target, "met": None if value is None else value >= need,
                    "value": "not measured in this run" if value is None else f"{_x(value)}{what}"})

    for size in (10_000, 100_000):
        s = sizes.get(size)
        if s and "typescript" in sides(s):
            speeds = [(r["key"], r["clients"]["typescript"]["speedup"]) for r in rows(s)[1:]]
            known = [(k, v) for k, v in speeds if v]
            low = min(known, key=lambda kv: kv[1]) if known else None
            out.append({"target": f"TypeScript client, {size:,}: every operation faster than the reference",
                        "met": (low[1] > 1) if low else None,
                        "value": f"slowest {low[0]} {_x(low[1])}" if low else "no reference in this run"})
        judge(f"TypeScript client, {size:,}: read_graph ≥ 1.5× the reference",
              speed(size, "typescript", "read_graph"), 1.5)
        judge(f"TypeScript client, {size:,}: 2.5 % search (default reply) ≥ 3× the reference",
              speed(size, "typescript", "search_broad"), 3.0)
    judge("Python client, 10,000: read_graph ≥ 1.3× the reference", speed(10_000, "python", "read_graph"), 1.3)
    judge("Python client, 10,000: 2.5 % search (default reply) ≥ 1.5× the reference",
          speed(10_000, "python", "search_broad"), 1.5)
    judge("Python client, 10,000: 2.5 % search, summary view, ≥ 3× the reference's (default) reply",
          speed(10_000, "python", "search_broad_summary", "search_broad"), 3.0)
    empty = result.get("empty", {}).get("ours", {}).get("floor")
    out.append({"target": "empty-call floor with the Python client ≤ 0.6 ms",
                "met": empty["p50"] <= 0.6 if empty else None,
                "value": f"{empty['p50']:.2f} ms (empty graph)" if empty else "not measured"})
    big = sizes.get(100_000)
    page = big["ours"]["ops"].get("read_graph_page") if big else None
    out.append({"target": "a 100-entity page at 100,000 entities ≤ 3× the floor (Python client)",
                "met": page["ratio"] <= 3 if page else None,
                "value": f"{page['ratio']:.2f}× ({page['p50']:.2f} ms)" if page else "not measured in this run"})
    ts_walk = (big or {}).get("typescript", {}).get("ours", {}).get("ops", {}).get("read_graph_paged")
    out.append({"target": "TypeScript client, 100,000: the whole graph read page by page",
                "met": bool(ts_walk) if big and "typescript" in big else None,
                "value": f"{ts_walk['p50']:,.0f} ms for every page" if ts_walk else "not measured in this run"})
    ref = (big or {}).get("reference")
    whole = (big or {}).get("whole_read") or {}
    if "ours" in whole and "reference" in whole:
        out.append({"target": "peak RSS after read_graph at 100,000 ≤ the reference's (the whole graph, bare client)",
                    "met": whole["ours"]["peak_rss_mb"] <= whole["reference"]["peak_rss_mb"],
                    "value": f"{whole['ours']['peak_rss_mb']:.0f} MiB vs {whole['reference']['peak_rss_mb']:.0f} MiB"})
    elif big and ref and "skipped" not in ref and "read_graph" in big["ours"]["ops"]:
        out.append({"target": "peak RSS after read_graph at 100,000 ≤ the reference's (Python client)",
                    "met": big["ours"]["peak_rss_mb"] <= ref["peak_rss_mb"],
                    "value": f"{big['ours']['peak_rss_mb']:.0f} MiB vs {ref['peak_rss_mb']:.0f} MiB"})
    else:
        out.append({"target": "peak RSS after read_graph at 100,000 ≤ the reference's", "met": None,
                    "value": "not measured in this run"})
    out.append(large_import_target(result.get("large_import")))
    return out


# Issue 15: a 1,000,000-entity file imports within this wall time (s) and peak memory (MB, 10^6 bytes).
LARGE_IMPORT_ENTITIES = 1_000_000
LARGE_IMPORT_S = 90.0
LARGE_IMPORT_MB = 1000.0


def large_import_target(run: dict[str, Any] | None) -> dict[str, Any]:
    """The 1,000,000-entity import target on ``run`` (``bench.run.measure_large_import``)."""
    target = (f"import of {LARGE_IMPORT_ENTITIES:,} entities ≤ {LARGE_IMPORT_S:.0f} s with peak memory "
              f"≤ {LARGE_IMPORT_MB / 1000:.0f} GB")
    if not run or run["entities"] < LARGE_IMPORT_ENTITIES:
        return {"target": target, "met": None, "value": "not measured in this run (--import-size 1000000)"}
    mb = run["peak_rss_mb"] * 2**20 / 10**6
    return {"target": target, "met": run["seconds"] <= LARGE_IMPORT_S and mb <= LARGE_IMPORT_MB,
            "value": f"{run['entities']:,} entities ({run['jsonl_bytes'] / 1e6:,.0f} MB JSONL): {run['seconds']:.1f} s "
                     f"wall, {run['cpu_seconds']:.1f} s CPU, peak {mb:,.0f} MB ({run['peak_rss_mb']:,.0f} MiB)"}
