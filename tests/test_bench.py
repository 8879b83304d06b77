"""The benchmark harness (``python -m bench``) runs end to end and reports what it measured.

A quick run on a 1,000-entity graph through the real stdio transport and the official client:
every operation checks its result (bench.workload), every point operation gets a floor, a ratio,
and the ratio with the client's output-schema validation taken out; the report renders it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from helpers import REPO

pytest.importorskip("psutil")
pytestmark = pytest.mark.slow   # subprocess runs of the harness: about 15 s


@pytest.fixture(scope="module")
def quick_result(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("bench") / "quick.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    proc = subprocess.run([sys.executable, "-m", "bench", "--quick", "--sizes", "1000", "--mode", "legacy",
                           "--clients", "python", "--out", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "targets:" in proc.stdout
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return result


BASE_OPS = {"search_rare", "search_common", "search_broad", "search_two_words", "search_words_mode", "open_nodes",
            "create_entities", "create_relations", "add_observations", "update_observations",
            "delete_observations", "delete_relations", "delete_entities", "read_graph"}


def expected_ops(tools: dict[str, list[str]]) -> set[str]:
    """Our operations: every base one, and paging and the summary view where our tools/list
    advertises them."""
    optional = {"search_broad_summary": "view" in tools["search_nodes"],
                "read_graph_page": "limit" in tools["read_graph"],
                "read_graph_paged": {"limit", "cursor"} <= set(tools["read_graph"]),
                "read_graph_summary": "view" in tools["read_graph"]}
    return BASE_OPS | {key for key, advertised in optional.items() if advertised}


def test_every_operation_is_measured_against_its_floor(quick_result: dict[str, Any]) -> None:
    size = quick_result["sizes"]["1000"]
    ops = size["ours"]["ops"]
    assert set(ops) == expected_ops(size["ours"]["tools"])
    for key, op in ops.items():
        assert op["n"] > 0 and 0 < op["p50"] <= op["p95"], key
        assert op["ratio"] == pytest.approx(op["p50"] / op["floor_p50"]), key
    assert size["import"]["seconds_median"] > 0 and size["db_bytes_after_import"] > 0
    assert 0 < size["ours"]["cold_start_p50_s"] < 30


def test_the_whole_graph_is_read_by_a_bare_client_for_the_servers_own_time_and_memory(
        quick_result: dict[str, Any]) -> None:
    """Issue 15's memory target needs the whole read_graph at every size, where a client cannot
    take the reply (over 10 MiB) or takes minutes for it: a bare JSON-RPC client reads it, with
    no bound on our replies, and the server's peak RSS after it is recorded and reported."""
    from bench import clients_report

    size = quick_result["sizes"]["1000"]
    read = size["whole_read"]["ours"]
    assert read["entities"] == 1000 and read["bytes"] > 1000 * 100
    assert 0 < read["first_byte_s"] <= read["last_byte_s"] and read["peak_rss_mb"] > 10
    assert any(line.startswith("whole read_graph through a bare JSON-RPC client") and "ours" in line
               for line in clients_report.notes(size))


def test_client_validation_is_measured_and_taken_out_of_both_sides(quick_result: dict[str, Any]) -> None:
    from bench.workload import READS

    ops = quick_result["sizes"]["1000"]["ours"]["ops"]
    for key, op in ops.items():
        if key in {r.key for r in READS}:   # whole-graph reads: no validation clock
            continue
        # The client checks every structured result against the tool's output schema.
        assert op["validation_p50"] > 0, key
        assert op["net_p50"] < op["p50"] and op["net_floor_p50"] < op["floor_p50"], key
        assert op["net_ratio"] == pytest.approx(op["net_p50"] / op["net_floor_p50"]), key
    # A result of 1 % of the entities with their neighbors costs the client more to check than one
    # entity does: the clock follows the reply. (About 5x at 1,000 entities since the reading tools'
    # schemas check only each item's required keys; 2x leaves room for a noisy machine.)
    assert ops["search_common"]["validation_p50"] > 2 * ops["open_nodes"]["validation_p50"]


def test_report_renders_tables_and_targets(quick_result: dict[str, Any]) -> None:
    from bench import report

    markdown = report.markdown(quick_result)
    assert "| open_nodes (1 name) |" in markdown and "‡" in markdown
    assert "## Targets (issue 6)" in markdown
    targets = report.targets(quick_result)
    assert any(t.get("info") and "without the client's output-schema validation" in t["target"] for t in targets)
    text = report.text_table(quick_result)
    assert "open_nodes" in text and "‡" in text and "search_nodes, common term ('Kraków', 1 % of entities) †" in text


def test_bench_ab_compares_two_trees(tmp_path: Path) -> None:
    """bench.ab builds its database when missing and prints one line per operation and tree."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    proc = subprocess.run([sys.executable, "-m", "bench.ab", "--db", str(tmp_path / "ab.db"), "--size", "300",
                           "--rounds", "1", "--blocks", "1", "--ops", "open_nodes,add_observations", ".", "."],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [line for line in proc.stdout.splitlines() if line.strip()]
    assert [line.split()[0] for line in lines] == ["open_nodes", "add_observations"]
    assert all(line.count("floor") == 2 for line in lines)
    # An operation that acts on what another creates brings it along; unknown keys are refused.
    proc = subprocess.run([sys.executable, "-m", "bench.ab", "--db", str(tmp_path / "ab.db"), "--size", "300",
                           "--rounds", "1", "--blocks", "1", "--ops", "delete_relations", "."],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [line.split()[0] for line in proc.stdout.splitlines() if line.strip()] == [
        "create_entities", "create_relations", "delete_relations"]
    for wrong in (["--ops", "no_such_op"], ["--size", "301"]):
        proc = subprocess.run([sys.executable, "-m", "bench.ab", "--db", str(tmp_path / "ab.db"), "--size", "300",
                               "--rounds", "1", "--blocks", "1", *wrong, "."],
                              cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode != 0 and "bench.ab:" in proc.stderr, wrong


# Both official clients. The TypeScript SDK comes from tests/test_ts_client.py's session fixture
# (npm install into a temporary folder; skipped without node/npm).
from test_ts_client import ts_sdk  # noqa: E402, F401  (a fixture, used by name)


@pytest.fixture(scope="module")
def both_clients_result(ts_sdk: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], str]:  # noqa: F811
    """The smallest run through both clients: 300 entities, ours only."""
    out = tmp_path_factory.mktemp("bench-clients") / "quick.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    proc = subprocess.run([sys.executable, "-m", "bench", "--quick", "--sizes", "300", "--mode", "legacy",
                           "--clients", "python,typescript", "--ts-sdk", str(ts_sdk), "--out", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return result, proc.stdout


def test_both_clients_run_the_same_schedule(both_clients_result: tuple[dict[str, Any], str]) -> None:
    result, stdout = both_clients_result
    from test_ts_client import SDK

    assert result["meta"]["versions"]["ts_sdk"] == SDK.rsplit("@", 1)[1]
    size = result["sizes"]["300"]
    python, typescript = size["ours"], size["typescript"]["ours"]
    # The same operations through both clients, paging and the summary view where advertised.
    assert set(typescript["ops"]) == set(python["ops"]) == expected_ops(python["tools"])
    for key, op in typescript["ops"].items():
        assert op["n"] > 0 and 0 < op["p50"] <= op["p95"], key
        assert op["ratio"] == pytest.approx(op["p50"] / op["floor_p50"]), key
        assert op["label"] == python["ops"][key]["label"], key
    assert typescript["floor"]["n"] > 0 and typescript["refused"] == {}
    assert 0 < typescript["peak_rss_mb_ops"] <= typescript["peak_rss_mb"]
    if "read_graph_paged" in typescript["ops"]:
        assert typescript["pages"]["read_graph_paged"] >= 1
    # The Python client's own work on our growing replies, measured on captured replies.
    cost = size["python_client_cost"]
    assert {"search_common", "search_broad", "read_graph"} <= set(cost)
    sizes = [cost[key]["reply_bytes"] for key in ("read_graph", "search_broad", "search_common")]
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] > 0
    for key, c in cost.items():
        assert c["chunks"] >= 1 and min(c["reader_ms"], c["parse_ms"], c["result_ms"]) > 0, key
        # ... and the TypeScript client's own work on the same reply.
        assert c["typescript"]["valid"] is True and c["typescript"]["readBufferMs"] > 0, key
    # Both clients side by side in the terminal and in the Markdown; issue 15's targets listed.
    assert "both official clients side by side" in stdout and "the Python client's own work" in stdout
    assert "the TypeScript client's own: ReadBuffer" in stdout
    from bench import clients_report, report

    markdown = report.markdown(result)
    assert ("| operation | Python client: ours | reference | speedup | TypeScript client: ours | reference | speedup |"
            in markdown)
    assert "## Targets (issue 15)" in markdown and "## Running the benchmark" in markdown
    rows = {row["key"]: row for row in clients_report.rows(size)}
    assert rows["search_broad"]["clients"]["typescript"]["ours"] != "—"



def test_client_cost_times_each_clients_own_work_on_captured_replies(ts_sdk: Path, tmp_path: Path) -> None:  # noqa: F811
    """bench.client_cost: the replies and output schemas captured from a real server, then each
    official client's own steps on them (the TypeScript client's through its SDK's own code)."""
    sys.path.insert(0, str(REPO))
    from bench import client_cost, servers
    from bench.datagen import BROAD_TERM, make_graph
    from bench.run import run_import

    jsonl, database = tmp_path / "graph.jsonl", tmp_path / "graph.db"
    make_graph(300).write_jsonl(jsonl)
    run_import(jsonl, database)
    schemas: dict[str, Any] = {}
    calls: list[tuple[str, dict[str, Any]]] = [("read_graph", {}), ("search_nodes", {"query": BROAD_TERM})]
    lines = client_cost.capture_replies(servers.ours(database, "legacy"), servers.clean_env(), calls, schemas=schemas)
    assert schemas["read_graph"]["properties"]["entities"]["type"] == "array"
    assert len(json.loads(lines[0])["result"]["structuredContent"]["entities"]) == 300
    assert client_cost.python_output_check_ms(lines[0], schemas["read_graph"], repeat=1) > 0
    costs = client_cost.typescript_client_cost(lines, [schemas[tool] for tool, _ in calls], ts_sdk, repeat=1)
    assert len(costs) == 2
    for cost in costs:
        assert cost["valid"] is True
        assert min(cost["readBufferMs"], cost["jsonParseMs"], cost["outputSchemaMs"]) >= 0
    # A reply its schema refuses is an error, not a number.
    with pytest.raises(client_cost.BenchError, match="does not match"):
        client_cost.python_output_check_ms(lines[1], {"type": "object", "required": ["nothing"]}, repeat=1)

BIG_REPLY_SERVER = r'''
import json, sys
# A minimal MCP server over stdio: read_graph answers 11 MiB unless asked for a page.
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "big", "version": "0"}}
    elif msg["method"] == "tools/list":
        result = {"tools": [{"name": "read_graph", "inputSchema": {"type": "object"}}]}
    else:
        small = "limit" in msg["params"]["arguments"]
        text = "x" * (10 if small else 11 * 2**20)
        result = {"content": [{"type": "text", "text": text}], "structuredContent": {"entities": [{"t": text}]}}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
    sys.stdout.flush()
'''


def test_a_reply_the_typescript_client_refuses_is_recorded_and_the_run_goes_on(ts_sdk: Path,  # noqa: F811
                                                                                tmp_path: Path) -> None:
    """The SDK drops the connection on a message over 10 MiB: the driver reports it, reconnects,
    and the next step is measured."""
    from bench import servers, ts_client
    from bench.workload import Read

    server = tmp_path / "big_server.py"
    server.write_text(BIG_REPLY_SERVER, encoding="utf-8")
    spec = servers.ServerSpec("ours", sys.executable, (str(server),), {}, "legacy", str(server))
    whole, paged = Read("read_graph", "whole", {}), Read("read_graph_paged", "paged", {}, page_limit=5)
    plan = ts_client.build_plan([ts_client.TsSide(spec, [], 0, 0, None, [(whole, 1), (paged, 1)])],
                                rounds=0, floor=10, graph_size=1)
    keep = [i for i, step in enumerate(plan.steps) if step["tool"] == "read_graph"]   # the fake's only tool
    plan.steps, plan.meta = [plan.steps[i] for i in keep], [plan.meta[i] for i in keep]
    sdk, _ = ts_client.ensure_sdk(ts_sdk)
    with open(tmp_path / "err.log", "w", encoding="utf-8") as errlog:
        results = ts_client.run(plan, sdk, tmp_path, errlog, dict(os.environ))
    ours = results["ours"]
    assert ours.refused == {"read_graph": "refused by the client (over its 10 MiB limit on one message; "
                                          "it dropped the connection)"}
    assert set(ours.samples) == {"read_graph_paged"} and ours.pages == {"read_graph_paged": 1}


def test_the_postgres_bench_compares_both_backends_and_counts_replica_writes(tmp_path: Path) -> None:
    """``python -m bench --postgres`` on a tiny graph: its own throwaway cluster, every point
    operation measured on both backends, and writes/s for 1 and 2 replicas on one database."""
    from pgcluster import find_bin

    if find_bin() is None:
        pytest.skip("PostgreSQL server binaries (initdb, pg_ctl) are not installed")
    out = tmp_path / "pg.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMORY_", "PG"))}
    proc = subprocess.run([sys.executable, "-m", "bench", "--postgres", "--quick", "--sizes", "300", "--mode", "legacy",
                           "--replicas", "2", "--replica-writes", "5", "--replica-rounds", "1", "--out", str(out)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text(encoding="utf-8"))
    ops = result["sizes"]["300"]["ops"]
    assert {"open_nodes", "create_entities", "add_observations", "delete_entities", "search_rare"} <= set(ops)
    for key, op in ops.items():
        for backend in ("sqlite", "postgres"):
            assert op[backend]["n"] > 0 and op[backend]["median_of_rounds"] > 0, (key, backend)
        assert op["ratio"] == pytest.approx(op["postgres"]["median_of_rounds"] / op["sqlite"]["median_of_rounds"])
    assert [(r["replicas"], r["writes"]) for r in result["replicas"]] == [(1, 5), (2, 10)]
    assert all(r["writes_per_s"] > 0 for r in result["replicas"])
    assert "replica(s)" in proc.stdout


def test_summary_view_measures_what_the_readme_table_shows(tmp_path: Path) -> None:
    """``python -m bench.summary_view`` (the README's command for its summary-view table) had
    fallen behind the importer's API and crashed (found by QA); its rows must match the README."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    proc = subprocess.run([sys.executable, "-m", "bench.summary_view", "1000"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    sample, generated = [line for line in proc.stdout.splitlines() if line.startswith("| ") and " B " in line]
    for row in (sample, generated):
        full, summary = row.split(" | ")[1:3]
        assert f"| {full} | {summary} |" in readme, row
