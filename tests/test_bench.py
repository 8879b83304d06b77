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
                           "--out", str(out)], cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "targets:" in proc.stdout
    result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return result


def test_every_operation_is_measured_against_its_floor(quick_result: dict[str, Any]) -> None:
    size = quick_result["sizes"]["1000"]
    ops = size["ours"]["ops"]
    expected = {"search_rare", "search_common", "search_two_words", "search_words_mode", "open_nodes",
                "create_entities", "create_relations", "add_observations", "update_observations",
                "delete_observations", "delete_relations", "delete_entities", "read_graph"}
    assert set(ops) == expected
    for key, op in ops.items():
        assert op["n"] > 0 and 0 < op["p50"] <= op["p95"], key
        assert op["ratio"] == pytest.approx(op["p50"] / op["floor_p50"]), key
    assert size["import"]["seconds_median"] > 0 and size["db_bytes_after_import"] > 0
    assert 0 < size["ours"]["cold_start_p50_s"] < 30


def test_client_validation_is_measured_and_taken_out_of_both_sides(quick_result: dict[str, Any]) -> None:
    ops = quick_result["sizes"]["1000"]["ours"]["ops"]
    for key, op in ops.items():
        if key == "read_graph":
            continue
        # The client checks every structured result against the tool's output schema.
        assert op["validation_p50"] > 0, key
        assert op["net_p50"] < op["p50"] and op["net_floor_p50"] < op["floor_p50"], key
        assert op["net_ratio"] == pytest.approx(op["net_p50"] / op["net_floor_p50"]), key
    # A result of 1 % of the entities with their neighbors costs the client far more to check
    # than one entity does.
    assert ops["search_common"]["validation_p50"] > 5 * ops["open_nodes"]["validation_p50"]


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
