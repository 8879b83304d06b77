"""Lone UTF-16 surrogates (half an emoji a client cut) are read as U+FFFD at every entry point:
stdio and HTTP calls get their reply with their own id and store U+FFFD, a reference-written file
holding such escapes imports, by ``graph-memory import`` and at first start; a valid pair stays
the character. (The official TypeScript SDK client is in test_ts_client.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx2
import pytest

from graph_memory.db import graph
from graph_memory.db.store import Store
from graph_memory.legacy import parse_legacy, read_legacy
from graph_memory.surrogates import repair_json_bytes, repair_json_text, replace_in_value

SCRIPT = Path(sys.executable).with_name("graph-memory")
# What @modelcontextprotocol/server-memory 2026.8.31 wrote when the TypeScript SDK client stored
# "hi 😀".slice(0, 4) (and other cut strings): JSON.stringify's "\ud83d" escapes, byte for byte.
REFERENCE_FILE = Path(__file__).resolve().parent / "data" / "reference-cut-emoji.jsonl"
REFERENCE_GRAPH = ([("Ada", "person", ["hi \ufffd", "whole 😀"]), ("x\ufffd", "\ufffd", [])],
                   [("Ada", "x\ufffd", "r\ufffd")])
CUT = "hi 😀".encode("utf-16-le")[:8].decode("utf-16-le", "surrogatepass")  # JavaScript's .slice(0, 4)


def test_the_reference_fixture_holds_the_escapes_the_reference_server_writes() -> None:
    data = REFERENCE_FILE.read_bytes()
    assert data.count(b"\\ud83d") == 4 and data.count(b"\\ude00") == 1
    assert "😀".encode() in data and not data.endswith(b"\n")  # non-ASCII raw, no final newline
    assert CUT == "hi \ud83d"


# -- the repair itself ---------------------------------------------------------------------------


@pytest.mark.parametrize(("json_text", "repaired", "count"), [
    ('"hi \\ud83d"', '"hi \\ufffd"', 1),                   # a cut emoji: the high half
    ('"\\ude00 tail"', '"\\ufffd tail"', 1),               # the low half alone
    ('"\\ud83d\\ude00"', '"\\ud83d\\ude00"', 0),           # a valid pair stays
    ('"\\uD83D\\uDE00"', '"\\uD83D\\uDE00"', 0),           # upper-case hex too
    ('"\\ud83d\\ud83d\\ude00"', '"\\ufffd\\ud83d\\ude00"', 1),  # two highs: the second pairs
    ('"\\ude00\\ud83d"', '"\\ufffd\\ufffd"', 2),           # low then high is no pair
    ('"\\\\ud83d"', '"\\\\ud83d"', 0),                     # an escaped backslash, then text
    ('"\\\\\\ud83d"', '"\\\\\\ufffd"', 1),                 # an escaped backslash, then an escape
    ('"\\u00e9\\n\\ud7ff\\ue000"', '"\\u00e9\\n\\ud7ff\\ue000"', 0),  # neighbours of the range
])
def test_lone_surrogate_escapes_are_rewritten_and_nothing_else(json_text: str, repaired: str, count: int) -> None:
    assert repair_json_text(json_text) == (repaired, count)
    assert repair_json_bytes(json_text.encode()) == (repaired.encode(), count)
    assert len(repaired) == len(json_text)  # Content-Length stays true
    json.loads(repaired).encode("utf-8")  # the result is storable text


def test_decoded_values_are_replaced_with_their_paths() -> None:
    fields: list[str] = []
    value = {"a": ["ok", "x\ud83d"], "k\udc00": "v", "n": 1}
    fixed, count = replace_in_value(value, "", fields)
    assert fixed == {"a": ["ok", "x\ufffd"], "k\ufffd": "v", "n": 1} and count == 2
    assert fields == ["a[1]", "* (the key)"]   # a key that is not a field name is not logged
    fields = []
    replace_in_value({"params": {"my secret key": ["x\ud83d"]}}, "", fields)
    assert fields == ["params.*[0]"]
    untouched = {"a": ["ok"]}
    assert replace_in_value(untouched)[0] is untouched


# -- the legacy reader ---------------------------------------------------------------------------


def keys(legacy: Any) -> tuple[list[tuple[str, str, list[str]]], list[tuple[str, str, str]]]:
    return ([(e.name, e.entity_type, e.observations) for e in legacy.entities],
            [(r.source, r.target, r.relation_type) for r in legacy.relations])


def test_a_reference_written_file_with_cut_emoji_reads_with_u_fffd() -> None:
    legacy = read_legacy(REFERENCE_FILE)
    assert keys(legacy) == REFERENCE_GRAPH
    assert legacy.replaced_surrogates == 5 and legacy.summary()["replaced_surrogates"] == 5
    assert legacy.invalid_lines == [] and legacy.dangling_relations == 0


def test_the_single_document_form_is_treated_alike() -> None:
    doc = ('{\n  "entities": [{"name": "A", "entityType": "t", "observations": ["hi \\ud83d", "\\ud83d\\ude00"]}],\n'
           '  "relations": [{"from": "A", "to": "A", "relationType": "\\ude00"}]\n}\n')
    legacy = parse_legacy(doc.encode())
    assert keys(legacy) == ([("A", "t", ["hi \ufffd", "😀"])], [("A", "A", "\ufffd")])
    assert legacy.replaced_surrogates == 2


def test_names_that_differ_only_in_their_cut_halves_merge() -> None:
    data = (b'{"type":"entity","name":"x\\ud83d","entityType":"t","observations":["a"]}\n'
            b'{"type":"entity","name":"x\\ud83e","entityType":"t","observations":["b"]}')
    legacy = parse_legacy(data)
    assert keys(legacy) == ([("x\ufffd", "t", ["a", "b"])], [])
    assert legacy.merged_entities == 1 and legacy.replaced_surrogates == 2


def script_env(tmp_path: Path, file_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_FILE_PATH=str(file_path), MEMORY_LOG_FORMAT="json", HOME=str(tmp_path))
    return env


def stored(database: Path) -> tuple[list[tuple[str, str, list[str]]], list[tuple[str, str, str]]]:
    store = Store.open(database)
    try:
        g = store.run_read(graph.read_graph)
    finally:
        store.close()
    return [(e.name, e.entity_type, e.observations) for e in g.entities], [r.key for r in g.relations]


def test_graph_memory_import_accepts_the_reference_file_and_reports_the_count(tmp_path: Path) -> None:
    database = tmp_path / "memory.db"
    env = script_env(tmp_path, database)
    done = subprocess.run([str(SCRIPT), "import", str(REFERENCE_FILE), "--database", str(database)],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "replaced:      5 lone surrogates" in done.stdout and "U+FFFD" in done.stdout
    as_json = subprocess.run([str(SCRIPT), "import", "--json", "--dry-run", str(REFERENCE_FILE),
                              "--database", str(database)], capture_output=True, text=True, env=env, timeout=60)
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout)["file"]["replaced_surrogates"] == 5
    assert stored(database) == REFERENCE_GRAPH


def test_first_start_imports_the_reference_file_and_logs_the_count(tmp_path: Path) -> None:
    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(REFERENCE_FILE.read_bytes())
    done = subprocess.run([str(SCRIPT)], stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          env=script_env(tmp_path, legacy), timeout=60)
    assert done.returncode == 0, done.stderr
    (logged,) = [e for e in map(json.loads, done.stderr.splitlines()) if e["event"] == "legacy_import"]
    assert logged["file_replaced_surrogates"] == 5 and logged["entities_created"] == 2
    assert stored(tmp_path / "memory.db") == REFERENCE_GRAPH
    assert legacy.read_bytes() == REFERENCE_FILE.read_bytes()  # never modified


# -- stdio: the real process ---------------------------------------------------------------------


def initialize(request_id: int | str = 0) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "test", "version": "1"}}}


def tool_call(request_id: int | str, tool: str, arguments: dict[str, Any], era: str | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": tool, "arguments": arguments}
    if era is not None:  # a sessionless request carries its envelope
        params["_meta"] = {"io.modelcontextprotocol/protocolVersion": era,
                           "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
                           "io.modelcontextprotocol/clientCapabilities": {}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def stdio_session(tmp_path: Path, lines: list[bytes], replies: int
                  ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Write raw lines to ``graph-memory`` on stdio, read ``replies`` stdout lines, close stdin;
    return (the replies, the JSON log lines of stderr)."""
    env = script_env(tmp_path, tmp_path / "memory.db")
    with tempfile.TemporaryFile() as stderr_file:
        proc = subprocess.Popen([str(SCRIPT)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr_file,
                                env=env)
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write(b"".join(line + b"\n" for line in lines))
            proc.stdin.flush()
            messages = [json.loads(proc.stdout.readline() or b"null") for _ in range(replies)]
            proc.stdin.close()
            assert proc.wait(timeout=30) == 0
        finally:
            if proc.poll() is None:
                proc.kill()
        stderr_file.seek(0)
        logs = [json.loads(line) for line in stderr_file.read().decode().splitlines()]
    return messages, logs


def test_stdio_call_with_a_cut_emoji_gets_its_own_reply_and_stores_u_fffd(tmp_path: Path) -> None:
    create = tool_call(7, "create_entities", {"entities": [
        {"name": "Ada", "entityType": "person", "observations": [CUT, "whole 😀", "\\ud83d literally"]}]})
    raw = json.dumps(create).encode()  # ensure_ascii: the lone half goes out as "\ud83d", as from JavaScript
    assert b'"hi \\ud83d"' in raw and b"\\ud83d\\ude00" in raw
    messages, logs = stdio_session(tmp_path, [
        json.dumps(initialize()).encode(), b'{"jsonrpc":"2.0","method":"notifications/initialized"}', raw,
        json.dumps(tool_call("s-8", "search_nodes", {"query": CUT})).encode(),
    ], replies=3)
    replies = {m["id"]: m for m in messages}
    assert set(replies) == {0, 7, "s-8"}
    created = replies[7]["result"]
    assert not created["isError"], created
    assert created["structuredContent"]["entities"][0]["observations"] == ["hi \ufffd", "whole 😀", "\\ud83d literally"]
    # The same cut text finds what was stored (it is read as U+FFFD the same way).
    found = replies["s-8"]["result"]["structuredContent"]["entities"]
    assert [e["name"] for e in found] == ["Ada"]
    assert stored(tmp_path / "memory.db")[0] == [("Ada", "person", ["hi \ufffd", "whole 😀", "\\ud83d literally"])]
    warnings = [e for e in logs if e["event"] == "lone_surrogates_replaced"]
    assert [(w["transport"], w["replaced"], w["method"], w["request_id"], w.get("tool")) for w in warnings] == [
        ("stdio", 1, "tools/call", 7, "create_entities"), ("stdio", 1, "tools/call", "s-8", "search_nodes")]
    assert warnings[0]["fields"] == ["params.arguments.entities[0].observations[0]"]
    assert not any("hi \ufffd" in json.dumps(w, ensure_ascii=False) or "hi \\ud83d" in json.dumps(w)
                   for w in warnings)  # never the text


def test_stdio_line_with_a_cut_emoji_that_is_no_message_gets_invalid_request_with_its_id(tmp_path: Path) -> None:
    messages, _ = stdio_session(tmp_path, [
        json.dumps(initialize()).encode(), b'{"jsonrpc":"2.0","id":5,"params":{"x":"\\ud83d"}}',
        b'{"jsonrpc":"2.0","id":6,"method":"ping","params":{"x":"\\ud83d"', b'{"jsonrpc":"2.0","id":7,"method":"ping"}',
    ], replies=4)
    replies = {m["id"]: m for m in messages}
    assert replies[5]["error"]["code"] == -32600  # JSON once repaired, but no method: its own id
    assert replies[None]["error"]["code"] == -32700  # not JSON either way: id null, as before
    assert replies[7]["result"] == {}


def test_a_request_id_with_a_lone_surrogate_comes_back_as_sent(tmp_path: Path) -> None:
    """Repairing a line must not repair its id: the reply carries the id the client sent (escaped
    as it was), or the client could never match it to its request."""
    messages, _ = stdio_session(tmp_path, [
        json.dumps(initialize()).encode(), b'{"jsonrpc":"2.0","id":"\\ud800x","method":"ping"}',
        b'{"jsonrpc":"2.0","id":"r\\udc00","method":"tools/call","params":{"name":"read_graph","arguments":{}}}',
    ], replies=3)
    ids = [m["id"] for m in messages]
    assert ids == [0, "\ud800x", "r\udc00"], ids
    assert messages[1]["result"] == {} and not messages[2]["result"]["isError"]


# -- streamable HTTP: the real app ---------------------------------------------------------------


@pytest.mark.parametrize("era", [None, "2026-07-28"])
def test_http_call_with_a_cut_emoji_is_answered_and_stores_u_fffd(db_path: Path, era: str | None,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from graph_memory.logs import configure_logging
    from test_http import INITIALIZE, MCP_HEADERS, running

    configure_logging("info", "json")
    try:
        with running(db_path) as srv, httpx2.Client(base_url=srv.url, timeout=30) as http:
            headers = dict(MCP_HEADERS)
            if era is None:  # handshake era: a session
                opened = http.post("/mcp", json=INITIALIZE, headers=headers)
                assert opened.status_code == 200
                headers["mcp-session-id"] = opened.headers["mcp-session-id"]
                http.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
            else:
                headers |= {"MCP-Protocol-Version": era, "Mcp-Method": "tools/call"}
            body = json.dumps(tool_call("h-1", "add_observations", {"observations": [
                {"entityName": "Ada", "contents": [CUT]}]}, era)).encode()
            create = json.dumps(tool_call(9, "create_entities", {"entities": [
                {"name": "Ada", "entityType": "person", "observations": ["whole 😀"]}]}, era)).encode()
            def routed(tool: str) -> dict[str, str]:  # a sessionless call names its tool in a header too
                return headers | ({"Mcp-Name": tool} if era else {})

            first = http.post("/mcp", content=create, headers=routed("create_entities"))
            assert first.status_code == 200, first.text
            assert b'"hi \\ud83d"' in body
            answer = http.post("/mcp", content=body, headers=routed("add_observations"))
            assert answer.status_code == 200, answer.text
            reply = sse_or_json(answer.text)
            assert reply["id"] == "h-1" and not reply["result"]["isError"], reply
            assert "hi \ufffd" in json.dumps(reply["result"]["structuredContent"], ensure_ascii=False), reply
            stored_now = srv.store.run_read(graph.read_graph)
            assert [e.observations for e in stored_now.entities] == [["whole 😀", "hi \ufffd"]]
    finally:
        logged = [json.loads(line) for line in capsys.readouterr().err.splitlines() if line.startswith("{")]
        configure_logging("warning", "console")
    (warning,) = [e for e in logged if e["event"] == "lone_surrogates_replaced"]
    assert (warning["transport"], warning["replaced"], warning["request_id"], warning["tool"]) == (
        "http", 1, "h-1", "add_observations")


def sse_or_json(text: str) -> dict[str, Any]:
    """The JSON-RPC reply in a response body (a JSON object, or the data line of an SSE stream)."""
    if text.lstrip().startswith("{"):
        return dict(json.loads(text))
    data = [line[len("data:"):] for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]
    return dict(json.loads(data[-1]))


def test_hostile_nesting_is_left_alone_instead_of_exhausting_the_stack() -> None:
    deep: Any = "x\ud83d"
    for _ in range(5000):
        deep = [deep]
    fixed, count = replace_in_value(deep)
    assert fixed is deep and count == 0
    line = b'{"type":"entity","name":"A","entityType":"t","observations":["\\ud83d"],"extra":' \
        + b"[" * 900 + b'"\\ud83d"' + b"]" * 900 + b"}"
    legacy = parse_legacy(line)
    assert keys(legacy) == ([("A", "t", ["\ufffd"])], []) and legacy.replaced_surrogates == 1
