"""Logs answer "did my assistant save that?" (issue 13, item 8): one ``info`` line per call of a
tool that may write (tool, counts, milliseconds, never names or observation text), reads at
``debug``; a stdio server started by hand says what it waits for; the HTTP server logs the URL."""

from __future__ import annotations

import json
import os
import pty
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from graph_memory.mcp.http import client_url
from test_http import TOKEN, mcp_client
from test_stdio import EXE, handshake, run_session, server_env

from helpers import call

SECRET_NAME = "Zebulon Quux"
SECRET_TEXT = "keeps the spare key under the blue flowerpot"

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("create_entities", {"entities": [
        {"name": SECRET_NAME, "entityType": "person", "observations": [SECRET_TEXT, "likes tea"]},
        {"name": "Quuxcorp", "entityType": "organization", "observations": ["makes quux"]}]}),
    ("create_entities", {"entities": [{"name": SECRET_NAME, "entityType": "person", "observations": []}]}),
    ("create_relations", {"relations": [{"from": SECRET_NAME, "to": "Quuxcorp", "relationType": "works_at"}]}),
    ("add_observations", {"observations": [{"entityName": SECRET_NAME, "contents": ["likes tea", "owns a zebra"]}]}),
    ("read_graph", {}),
    ("search_nodes", {"query": "zebra"}),
    ("open_nodes", {"names": [SECRET_NAME]}),
    ("update_observations", {"updates": [{"entityName": SECRET_NAME, "match": "owns a zebra",
                                          "replacement": "owns two zebras"}]}),
    ("delete_observations", {"deletions": [{"entityName": SECRET_NAME, "observations": ["likes tea"]}]}),
    ("add_observations", {"observations": [{"entityName": "Nobody Here", "contents": [SECRET_TEXT]}]}),  # refused
    ("delete_entities", {"entityNames": ["Quuxcorp", "Nobody Here"]}),
]
READS = {"read_graph", "search_nodes", "open_nodes"}


def tool_lines(level: str, tmp_path: Path) -> tuple[list[dict[str, Any]], str]:
    """Run CALLS through a real stdio server at log ``level``: its tool log lines and all of stderr."""
    env = {**server_env(tmp_path, tmp_path / "memory.db"), "MEMORY_LOG_LEVEL": level}
    messages, stderr, code = run_session(env, handshake(*CALLS))
    assert code == 0, stderr
    assert len([m for m in messages if m.get("id", 0) > 0]) == len(CALLS)
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    return [line for line in lines if line["event"] in ("tool_call", "tool_refused")], stderr


def test_each_writing_call_logs_one_info_line_with_counts_and_ms_and_no_names_or_text(tmp_path: Path) -> None:
    lines, stderr = tool_lines("info", tmp_path)
    assert [(line["event"], line["tool"]) for line in lines] == [
        ("tool_call" if tool != "add_observations" or i != 9 else "tool_refused", tool)
        for i, (tool, _) in enumerate(CALLS) if tool not in READS
    ]
    assert all(line["level"] == "info" and isinstance(line["ms"], float) and line["ms"] >= 0 for line in lines)
    counted = [{k: v for k, v in line.items() if k not in ("event", "tool", "ms", "level", "logger", "timestamp")}
               for line in lines]
    assert counted == [
        {"entities_created": 2, "entities_skipped": 0, "observations_added": 3},
        {"entities_created": 0, "entities_skipped": 1, "observations_added": 0},   # "was it saved?": no, existed
        {"relations_created": 1, "relations_skipped": 0},
        {"observations_added": 1, "observations_skipped": 1, "entities": 1},
        {"observations_updated": 1},
        {"observations_deleted": 1, "observations_not_found": 0, "entities_not_found": 0},
        {"error": "EntityNotFound"},
        {"entities_deleted": 1, "entities_not_found": 1, "relations_deleted": 1},
    ]
    for secret in (SECRET_NAME, SECRET_TEXT, "zebra", "Quuxcorp", "Nobody Here"):
        assert secret not in stderr


def test_a_call_the_database_refuses_is_logged_as_a_warning_with_the_reason(tmp_path: Path) -> None:
    """Locked, full, damaged: the operator must read why in the log, not only the client (it was an
    info line with the error's kind alone: found by QA)."""
    import apsw

    db = tmp_path / "memory.db"
    env = {**server_env(tmp_path, db), "MEMORY_LOG_LEVEL": "info", "MEMORY_BUSY_TIMEOUT_MS": "100"}
    run_session(env, handshake(CALLS[0]))
    hog = apsw.Connection(str(db))
    hog.execute("BEGIN IMMEDIATE")
    try:
        messages, stderr, code = run_session(env, handshake(CALLS[2]))
    finally:
        hog.execute("ROLLBACK")
        hog.close()
    assert code == 0 and messages[-1]["result"]["isError"], messages
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    (warning,) = [line for line in lines if line["event"] == "tool_failed_storage"]
    assert warning["level"] == "warning" and warning["tool"] == "create_relations"
    assert "locked by another process" in warning["error"] and str(db) in warning["error"]
    assert SECRET_NAME not in stderr


def test_reads_log_at_debug_with_result_counts(tmp_path: Path) -> None:
    lines, _ = tool_lines("debug", tmp_path)
    reads = [line for line in lines if line["tool"] in READS]
    assert [(line["tool"], line["level"]) for line in reads] == [
        ("read_graph", "debug"), ("search_nodes", "debug"), ("open_nodes", "debug")]
    assert [(line["entities"], line["relations"]) for line in reads] == [(2, 1), (1, 1), (1, 1)]
    assert all(isinstance(line["ms"], float) for line in reads)
    assert [line["tool"] for line in lines if line["level"] == "info"] == [t for t, _ in CALLS if t not in READS]


def test_stdio_server_on_a_terminal_says_it_waits_for_a_client_and_how_to_quit(tmp_path: Path) -> None:
    main, terminal = pty.openpty()
    proc = subprocess.Popen([str(EXE)], stdin=terminal, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=server_env(tmp_path, tmp_path / "memory.db"))
    os.close(terminal)
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 30
        said = b""
        while b"waiting for an MCP client on stdin" not in said:
            assert time.monotonic() < deadline, said
            said += proc.stderr.readline()
        assert b"Ctrl-D" in said and b"Ctrl-C" in said
        os.write(main, b"\x04")  # Ctrl-D: end of input on the terminal
        assert proc.wait(timeout=30) == 0
        assert proc.stdout is not None and proc.stdout.read() == b""  # stdout stays the protocol's
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(main)


def test_stdio_server_started_by_a_client_says_nothing_extra(tmp_path: Path) -> None:
    _, stderr, code = run_session(server_env(tmp_path, tmp_path / "memory.db"), handshake())
    assert code == 0 and "waiting for an MCP client" not in stderr


@pytest.mark.parametrize(("host", "port", "url"), [
    ("127.0.0.1", 8000, "http://127.0.0.1:8000/mcp"),
    ("0.0.0.0", 9000, "http://127.0.0.1:9000/mcp"),     # a wildcard bind: the local address to paste
    ("::1", 8000, "http://[::1]:8000/mcp"),              # IPv6 in brackets
    ("::", 8001, "http://[::1]:8001/mcp"),
    ("192.168.1.5", 80, "http://192.168.1.5:80/mcp"),
])
def test_client_url_is_pasteable(host: str, port: int, url: str) -> None:
    assert client_url(host, port) == url


@pytest.mark.anyio
async def test_http_server_logs_the_url_with_the_real_port_and_that_a_token_is_needed(tmp_path: Path) -> None:
    env = {**server_env(tmp_path, tmp_path / "memory.db"), "MEMORY_HTTP_TOKEN": TOKEN}
    err = tmp_path / "stderr.txt"
    with err.open("wb") as stderr:
        proc = subprocess.Popen([str(EXE), "serve", "--transport", "http", "--port", "0"],
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr, env=env)
    try:
        deadline = time.monotonic() + 30
        listening: dict[str, Any] | None = None
        while listening is None:
            assert proc.poll() is None and time.monotonic() < deadline, err.read_text()
            lines = [json.loads(line) for line in err.read_text().splitlines() if line.startswith("{")]
            listening = next((line for line in lines if line["event"] == "http_listening"), None)
            time.sleep(0.05)
        url = listening["url"]
        assert url.startswith("http://127.0.0.1:") and url.endswith("/mcp") and not url.endswith(":0/mcp")
        assert "token" in listening["auth"] and TOKEN not in err.read_text()
        async with mcp_client(url, token=TOKEN) as client:  # the logged URL works as it is
            assert isinstance(client, Client)
            await call(client, "read_graph", {})
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
