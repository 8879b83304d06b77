"""The real ``graph-memory`` process over stdio, on a copy of a file written by the reference server."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest

from helpers import sample_path, upstream_oracle

EXE = Path(sys.executable).with_name("graph-memory")


def run_session(env: dict[str, str], requests: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], str, int]:
    """Send JSON-RPC lines to a fresh server, wait for every reply, close stdin, and return
    (stdout messages, stderr, exit code). Fails when any stdout line is not a JSON-RPC message."""
    command = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "graph_memory"]
    expected = {r["id"] for r in requests if "id" in r}
    with tempfile.TemporaryFile() as stderr_file:
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr_file,
                                env=env)
        assert proc.stdin is not None and proc.stdout is not None
        messages: list[dict[str, Any]] = []
        try:
            for request in requests:
                proc.stdin.write((json.dumps(request) + "\n").encode())
            proc.stdin.flush()
            while expected:
                raw = proc.stdout.readline()
                if not raw:
                    break  # the server exited
                message = json.loads(raw)  # anything that is not JSON fails the test here
                assert message.get("jsonrpc") == "2.0", raw
                messages.append(message)
                expected.discard(message.get("id"))
            proc.stdin.close()
            rest = proc.stdout.read()
            proc.wait(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
        stderr_file.seek(0)
        stderr = stderr_file.read()
    for raw in rest.decode("utf-8").splitlines():
        message = json.loads(raw)
        assert message.get("jsonrpc") == "2.0", raw
        messages.append(message)
    return messages, stderr.decode("utf-8", "replace"), proc.returncode


def handshake(*calls: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    requests: list[dict[str, Any]] = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    for i, (tool, arguments) in enumerate(calls, start=1):
        requests.append({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                         "params": {"name": tool, "arguments": arguments}})
    return requests


def by_id(messages: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    return {m["id"]: m for m in messages if "id" in m}


def server_env(tmp_path: Path, file_path: Path, **settings: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(MEMORY_FILE_PATH=str(file_path), MEMORY_LOG_FORMAT="json", HOME=str(tmp_path), **settings)
    return env


def test_stdio_server_imports_upstream_file_and_read_graph_returns_all_of_it(tmp_path: Path) -> None:
    legacy = tmp_path / "memory.jsonl"
    shutil.copyfile(sample_path(), legacy)
    original = legacy.read_bytes()
    messages, stderr, code = run_session(server_env(tmp_path, legacy), handshake(("read_graph", {})))
    assert code == 0, stderr
    replies = by_id(messages)
    assert replies[0]["result"]["serverInfo"]["name"] == "graph-memory"
    graph = replies[1]["result"]["structuredContent"]
    entities, relations = upstream_oracle(legacy)
    assert graph["entities"] == entities
    assert graph["relations"] == relations
    assert json.loads(replies[1]["result"]["content"][0]["text"]) == graph
    assert legacy.read_bytes() == original
    assert (tmp_path / "memory.db").exists()
    events = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    imports = [e for e in events if e.get("event") == "legacy_import"]
    assert len(imports) == 1 and imports[0]["entities"] == len(entities)


def test_stdio_server_imports_only_on_first_start_and_keeps_writes(tmp_path: Path) -> None:
    legacy = tmp_path / "memory.jsonl"
    shutil.copyfile(sample_path(), legacy)
    env = server_env(tmp_path, legacy)
    first, _, _ = run_session(env, handshake(("create_entities", {"entities": [
        {"name": "Ünïcödé 🚀", "entityType": "test", "observations": ["written over stdio"]}]})))
    assert not by_id(first)[1]["result"].get("isError")
    second, stderr, code = run_session(env, handshake(("search_nodes", {"query": "WRITTEN OVER"}),
                                                      ("read_graph", {})))
    assert code == 0
    assert [e["name"] for e in by_id(second)[1]["result"]["structuredContent"]["entities"]] == ["Ünïcödé 🚀"]
    entities, _ = upstream_oracle(legacy)
    assert len(by_id(second)[2]["result"]["structuredContent"]["entities"]) == len(entities) + 1
    assert "legacy_import" not in stderr


def test_every_request_is_answered_when_stdin_closes_right_after_them(tmp_path: Path) -> None:
    # A script (printf … | graph-memory) or a host that writes its last calls and closes stdin
    # at once: the SDK alone ends the loop at end of input and drops the replies still in flight.
    calls = [("create_entities", {"entities": [{"name": f"n{i}", "entityType": "t", "observations": [f"fact {i}"]}
                                               for i in range(50)]})]
    calls += [("search_nodes", {"query": f"fact {i}"}) for i in range(10)] + [("read_graph", {})] * 3
    requests = handshake(*calls)
    command = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "graph_memory"]
    payload = "".join(json.dumps(r) + "\n" for r in requests).encode()
    result = subprocess.run(command, input=payload, capture_output=True, timeout=120,
                            env=server_env(tmp_path, tmp_path / "memory.db"))
    assert result.returncode == 0, result.stderr[-2000:]
    replies = by_id([json.loads(line) for line in result.stdout.decode().splitlines()])
    assert sorted(replies) == list(range(len(calls) + 1))
    assert [e["name"] for e in replies[3]["result"]["structuredContent"]["entities"]] == \
        ["n1"] + [f"n{i}" for i in range(10, 20)]  # "fact 1" is in "fact 10" … "fact 19" too
    assert [e["name"] for e in replies[11]["result"]["structuredContent"]["entities"]] == ["n9"]
    assert len(replies[len(calls)]["result"]["structuredContent"]["entities"]) == 50


def test_the_last_reply_reaches_a_slow_reader_whole_after_stdin_closed(tmp_path: Path) -> None:
    """The reply's end used to stay in the event loop's write buffer when the server reached the
    end of input: a client that closed stdin after its request and read in bursts (a script, a
    host under load) got it cut at 64 or 128 KiB, without a newline."""
    observations = 150   # a reply of ~130 KB: more than the pipe holds, less than the write buffer's mark
    big = [{"name": "big", "entityType": "t", "observations": [f"fact {i} " + "x" * 400 for i in range(observations)]}]
    seed = subprocess.run([str(EXE)] if EXE.exists() else [sys.executable, "-m", "graph_memory"],
                          input="".join(json.dumps(r) + "\n" for r in handshake(
                              ("create_entities", {"entities": big}))).encode(),
                          capture_output=True, timeout=120, env=server_env(tmp_path, tmp_path / "memory.db"))
    assert seed.returncode == 0, seed.stderr[-2000:]
    command = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "graph_memory"]
    for _ in range(3):   # the end of input meets the buffer at a moment that varies: a few sessions
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                env=server_env(tmp_path, tmp_path / "memory.db"))
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("".join(json.dumps(r) + "\n" for r in handshake(("read_graph", {}))).encode())
        proc.stdin.close()
        received = []
        while chunk := (time.sleep(0.3), os.read(proc.stdout.fileno(), 65536))[1]:   # reads in bursts
            received.append(chunk)
        assert proc.wait(timeout=60) == 0
        lines = b"".join(received).split(b"\n")
        assert lines[-1] == b"" and len(lines) == 3, [len(line) for line in lines]
        (entity,) = json.loads(lines[1])["result"]["structuredContent"]["entities"]
        assert len(entity["observations"]) == observations


def test_a_line_that_is_not_json_rpc_gets_the_json_rpc_error_reply(tmp_path: Path) -> None:
    lines = [json.dumps(handshake()[0]), "", "   ", "this is not json {", json.dumps({"secret": "x", "id": 5}),
             json.dumps({"secret": "x", "id": True}), json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})]
    command = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "graph_memory"]
    result = subprocess.run(command, input="".join(line + "\n" for line in lines).encode(), capture_output=True,
                            timeout=120, env=server_env(tmp_path, tmp_path / "memory.db"))
    assert result.returncode == 0, result.stderr[-2000:]
    replies = [json.loads(line) for line in result.stdout.decode().splitlines()]
    # Blank lines are skipped; an invalid message's id is echoed when it is a string or an integer.
    assert [r.get("id") for r in replies] == [0, None, 5, None, 2]
    assert replies[1]["error"]["code"] == -32700 and "not valid JSON" in replies[1]["error"]["message"]
    assert replies[2]["error"]["code"] == -32600 and '"jsonrpc" must be "2.0"' in replies[2]["error"]["message"]
    assert replies[3]["error"]["code"] == -32600
    assert len(replies[4]["result"]["tools"]) >= 9  # the session goes on
    assert b"secret" not in result.stderr and b"this is not json" not in result.stderr  # logs name the fault only


def test_a_request_nested_deeper_than_the_parser_reads_is_answered_with_its_own_id(tmp_path: Path) -> None:
    """JSON nested past pydantic-core's ~200 levels is valid JSON the SDK cannot read: it was
    answered as a parse error with id null, and the client waited for its id until it timed out
    (the reference server answers at any depth). Now the refusal carries the request's id (found
    without parsing what is nested) and says what to change; a notification gets no answer; the
    session goes on."""
    def call(request_id: str, depth: int, id_last: bool = False) -> str:
        nested = "[" * depth + "]" * depth
        body = (f'"method":"tools/call","params":{{"name":"open_nodes","arguments":{{"names":["a"],'
                f'"x":{nested}}}}}')
        return ("{" + body + f',"jsonrpc":"2.0","id":{request_id}}}' if id_last
                else f'{{"jsonrpc":"2.0","id":{request_id},' + body + "}")
    lines = [json.dumps(handshake()[0]), call("7", 150), call("8", 250), call('"deep \\"x\\""', 5000),
             call("9", 100_000, id_last=True), call("1.5", 300),
             # a notification gets no answer, however deep (it got one with id null)
             '{"jsonrpc":"2.0","method":"notifications/progress","params":{"x":' + "[" * 300 + "]" * 300 + '}}',
             json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})]
    command = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "graph_memory"]
    result = subprocess.run(command, input="".join(line + "\n" for line in lines).encode(), capture_output=True,
                            timeout=120, env=server_env(tmp_path, tmp_path / "memory.db"))
    assert result.returncode == 0, result.stderr[-2000:]
    replies = [json.loads(line) for line in result.stdout.decode().splitlines()]
    answers = {r.get("id"): r for r in replies}   # a tool call is answered when it is done
    assert len(replies) == 7 and set(answers) == {0, 7, 8, 'deep "x"', 9, None, 2}
    assert "result" in answers[7]            # 150 levels: read as usual (an unknown key is ignored)
    for refused in (answers[8], answers['deep "x"'], answers[9], answers[None]):   # 1.5: no usable id
        assert refused["error"]["code"] == -32600, refused
        assert "nests arrays and objects deeper than the server reads" in refused["error"]["message"]
    assert len(answers[2]["result"]["tools"]) >= 9  # the session goes on


def test_a_request_holding_a_number_of_thousands_of_digits_is_answered_with_its_own_id(tmp_path: Path) -> None:
    """A JSON integer of over 4,300 digits (even under a key the tool ignores) is valid JSON the
    parser does not read: it was answered as "not valid JSON" with id null, and the client waited
    for its id (found by QA). Now the refusal carries the id and says what to send instead."""
    def call(request_id: int, digits: int) -> str:
        return json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                           "params": {"name": "read_graph", "arguments": {"limit": 1, "x": "NUMBER"}}}
                          ).replace('"NUMBER"', "9" * digits)
    lines = [json.dumps(handshake()[0]), call(7, 4300), call(8, 4301), call(9, 100_000),
             '{"jsonrpc":"2.0","method":"notifications/progress","params":{"x":' + "9" * 5000 + "}}",
             json.dumps({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})]
    command = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "graph_memory"]
    result = subprocess.run(command, input="".join(line + "\n" for line in lines).encode(), capture_output=True,
                            timeout=120, env=server_env(tmp_path, tmp_path / "memory.db"))
    assert result.returncode == 0, result.stderr[-2000:]
    answers = {r.get("id"): r for r in map(json.loads, result.stdout.decode().splitlines())}
    assert set(answers) == {0, 7, 8, 9, 2}   # the notification gets no answer
    assert "result" in answers[7]
    for refused in (answers[8], answers[9]):
        assert refused["error"]["code"] == -32600, refused
        assert "holds a number longer than the server reads" in refused["error"]["message"]
    assert len(answers[2]["result"]["tools"]) >= 9


def test_a_client_that_stops_reading_stdout_ends_the_session_without_a_traceback(tmp_path: Path) -> None:
    command = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "graph_memory"]
    db = tmp_path / "memory.db"
    with tempfile.TemporaryFile() as stderr_file:
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr_file,
                                env=server_env(tmp_path, db))
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdout.close()  # the reader goes away (a host that exited, `… | head`)
        ada = {"name": "Ada", "entityType": "p", "observations": []}
        requests = handshake(("create_entities", {"entities": [ada]}), ("read_graph", {}))
        try:
            proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests).encode())
            proc.stdin.close()
        except BrokenPipeError:
            pass  # the server may already be gone
        assert proc.wait(timeout=60) == 0
        stderr_file.seek(0)
        stderr = stderr_file.read().decode()
    assert "Traceback" not in stderr and "BrokenPipeError" not in stderr, stderr[-2000:]
    assert '"client_gone"' in stderr and '"server_stopped"' in stderr
    from graph_memory.db.store import Store

    store = Store.open(db, migrate=False)
    try:  # whether or not the write ran before the session ended, the file is sound
        assert store.integrity_problems() == []
    finally:
        store.close()


def test_an_open_listen_stream_does_not_hold_the_exit(tmp_path: Path) -> None:
    # A 2026-07-28 subscriptions/listen stays open until cancelled: it has no reply to wait for.
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
            "io.modelcontextprotocol/clientCapabilities": {}}
    listen = {"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen",
              "params": {"notifications": {"toolsListChanged": True}, "_meta": meta}}
    command = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "graph_memory"]
    started = time.monotonic()
    result = subprocess.run(command, input=(json.dumps(listen) + "\n").encode(), capture_output=True, timeout=120,
                            env=server_env(tmp_path, tmp_path / "memory.db"))
    assert result.returncode == 0, result.stderr[-2000:]
    assert time.monotonic() - started < 15, "the exit waited for the listen stream"
    assert b"replies_dropped" not in result.stderr


@pytest.mark.anyio
async def test_in_flight_requests_are_waited_for_until_answered_or_out_of_time() -> None:
    import anyio
    from mcp.shared.message import SessionMessage
    from mcp_types import JSONRPCNotification, JSONRPCRequest, JSONRPCResponse

    from graph_memory.mcp.stdio import InFlight

    in_flight = InFlight()
    assert await in_flight.wait(0.01)  # nothing read: nothing to wait for
    in_flight.read(SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=7, method="tools/list")))
    in_flight.read(SessionMessage(JSONRPCNotification(jsonrpc="2.0", method="notifications/initialized")))
    in_flight.read(ValueError("a line that is not JSON-RPC"))
    assert len(in_flight) == 1
    assert not await in_flight.wait(0.05)
    in_flight.sent(SessionMessage(JSONRPCNotification(jsonrpc="2.0", method="notifications/resources/updated")))
    in_flight.sent(SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=8, result={})))  # not one of ours
    assert len(in_flight) == 1
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(in_flight.wait, 5.0)
        in_flight.sent(SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=7, result={})))
    assert len(in_flight) == 0 and await in_flight.wait(0.01)
    # A request the client cancels is not answered (the protocol's rule): nothing to wait for.
    in_flight.read(SessionMessage(JSONRPCRequest(jsonrpc="2.0", id="a", method="tools/call")))
    in_flight.read(SessionMessage(JSONRPCNotification(jsonrpc="2.0", method="notifications/cancelled",
                                                      params={"requestId": "a", "reason": "timeout"})))
    assert len(in_flight) == 0 and await in_flight.wait(0.01)
    # Nor is a listen stream, which stays open.
    in_flight.read(SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=9, method="subscriptions/listen")))
    assert len(in_flight) == 0


def test_stdio_server_refuses_a_bad_legacy_line_and_leaves_everything_untouched(tmp_path: Path) -> None:
    legacy = tmp_path / "memory.jsonl"
    legacy.write_bytes(b'{"type":"entity","name":"a","entityType":"t","observations":[]}\n{not json\n')
    original = legacy.read_bytes()
    messages, stderr, code = run_session(server_env(tmp_path, legacy), handshake(("read_graph", {})))
    assert code == 1
    assert "line 2" in stderr and "--skip-invalid" in stderr and "the legacy file was left as it is" in stderr
    # The client is told too, in the instructions and by every call (not "connection closed").
    assert [m["id"] for m in messages] == [0, 1]
    assert "line 2" in messages[0]["result"]["instructions"]
    call = messages[1]["result"]
    assert call["isError"] is True and "--skip-invalid" in call["content"][0]["text"]
    assert legacy.read_bytes() == original
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.jsonl"]   # no database was made


@pytest.mark.anyio
@pytest.mark.parametrize("profile", ["reference", "memorymesh"])
async def test_a_refused_start_answers_every_call_with_why_through_the_official_client(
        tmp_path: Path, profile: str) -> None:
    """A host told only "connection closed" leaves its user to find the server's log; the
    reference server, which opens its file on each call, answers such problems per call. So a
    refused start on stdio lists the profile's tools as usual and answers each call and resource
    read with the refusal and what to do, then exits 1 when the client leaves. Here: a file that
    is not a database, then an invalid setting (no Settings at all)."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters
    from mcp.shared.exceptions import MCPError

    garbage = tmp_path / "memory.db"
    garbage.write_bytes(b"not a database " * 100)
    cases = [(server_env(tmp_path, garbage), "is not a SQLite database"),
             (server_env(tmp_path, tmp_path / "other.db", MEMORY_MAX_BATCH="many"), "MEMORY_MAX_BATCH")]
    for env, reason in cases:
        env["MEMORY_TOOLS"] = profile
        params = StdioServerParameters(command=str(EXE), args=[], env=env)
        async with Client(params, mode="legacy") as client:
            assert reason in (client.instructions or "")
            tools = [t.name for t in (await client.list_tools()).tools]
            assert tools[0] == ("create_entities" if profile == "reference" else "add_nodes")
            for tool in ("read_graph", tools[0], "no_such_tool"):
                result = await client.call_tool(tool, {})
                text = result.content[0].text   # type: ignore[union-attr]
                assert result.is_error and reason in text and "restart this MCP server" in text, text
                assert (result.structured_content is not None) == (profile == "memorymesh")
            with pytest.raises(MCPError, match=reason):
                await client.read_resource("memory://knowledge-graph")
    assert garbage.read_bytes() == b"not a database " * 100
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory.db"]


def test_a_refused_start_exits_1_once_the_client_leaves_and_over_http_at_once(tmp_path: Path) -> None:
    garbage = tmp_path / "memory.db"
    garbage.write_bytes(b"not a database " * 100)
    messages, stderr, code = run_session(server_env(tmp_path, garbage), handshake(("open_nodes", {"names": []})))
    assert code == 1 and [m["id"] for m in messages] == [0, 1] and messages[1]["result"]["isError"]
    assert stderr.count("graph-memory: error:") == 1 and "is not a SQLite database" in stderr
    # HTTP: nothing to answer a client through; an orchestrator restarts it and shows the log.
    done = subprocess.run([str(EXE), "serve", "--transport", "http"], stdin=subprocess.PIPE, capture_output=True,
                          env={**server_env(tmp_path, garbage), "MEMORY_HTTP_PORT": "0"}, timeout=60)
    assert done.returncode == 1 and done.stdout == b"" and b"is not a SQLite database" in done.stderr


@pytest.mark.anyio
async def test_official_stdio_client_sees_the_tools(tmp_path: Path) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=str(EXE), args=[], env=server_env(tmp_path, tmp_path / "m.db"))
    async with Client(params, mode="legacy") as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        assert {"create_entities", "search_nodes", "update_observations"} <= tools
        result = await client.call_tool("open_nodes", {"names": []})
        assert result.structured_content == {"entities": [], "relations": [], "neighbors": []}


def test_sigterm_stops_the_stdio_server_cleanly_keeping_acknowledged_writes(tmp_path: Path) -> None:
    import signal
    import time

    import apsw

    db = tmp_path / "m.db"
    proc = subprocess.Popen([str(EXE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=server_env(tmp_path, db))
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for request in handshake(("create_entities", {"entities": [
                {"name": "kept", "entityType": "t", "observations": ["acknowledged"]}]})):
            proc.stdin.write((json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        replies = {}
        while 1 not in replies:
            message = json.loads(proc.stdout.readline())
            replies[message.get("id")] = message
        assert not replies[1]["result"].get("isError")
        started = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=5) == 0
        assert time.monotonic() - started < 5
    finally:
        if proc.poll() is None:
            proc.kill()
    conn = apsw.Connection(str(db))
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("SELECT name FROM entities").fetchall() == [("kept",)]
    conn.close()


def test_sigterm_during_a_large_call_still_writes_its_whole_reply(tmp_path: Path) -> None:
    """A SIGTERM while a large write ran cut its ~3 MB reply after 160 KB, exit 0, though the write
    had committed: the client saw the connection close and thought it lost (found by QA). The
    signal now ends the input: what was read is answered, whole, then the server stops."""
    import signal
    import time

    import apsw

    db = tmp_path / "m.db"
    proc = subprocess.Popen([str(EXE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=server_env(tmp_path, db))
    assert proc.stdin is not None and proc.stdout is not None
    entities = [{"name": f"e{i}", "entityType": "t", "observations": [f"{i} {j} " + "x" * 160 for j in range(3)]}
                for i in range(5000)]
    try:
        for request in handshake():
            proc.stdin.write((json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 0
        proc.stdin.write((json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "create_entities", "arguments": {"entities": entities}}}) + "\n").encode())
        proc.stdin.flush()
        time.sleep(0.15)
        proc.send_signal(signal.SIGTERM)
        rest = proc.stdout.read()
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert rest.endswith(b"\n"), f"{len(rest)} bytes and no newline"
    reply = json.loads(rest)
    assert reply["id"] == 1 and len(reply["result"]["structuredContent"]["entities"]) == 5000
    conn = apsw.Connection(str(db))
    assert conn.execute("SELECT count(*) FROM entities").fetchall() == [(5000,)]
    conn.close()


@pytest.mark.parametrize("signum", ["SIGTERM", "SIGINT"])
def test_two_signals_in_a_row_still_exit_0(tmp_path: Path, signum: str) -> None:
    """The second signal met the default handler once the event loop was gone: exit 143/130 (QA)."""
    import signal
    import time

    proc = subprocess.Popen([str(EXE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            env=server_env(tmp_path, tmp_path / "m.db"))
    assert proc.stdin is not None and proc.stdout is not None
    try:
        for request in handshake():
            proc.stdin.write((json.dumps(request) + "\n").encode())
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 0
        for _ in range(2):
            proc.send_signal(getattr(signal, signum))
            time.sleep(0.01)
        assert proc.wait(timeout=10) == 0
    finally:
        if proc.poll() is None:
            proc.kill()


def test_healthcheck_never_creates_a_database(tmp_path: Path) -> None:
    db = tmp_path / "absent.db"
    proc = subprocess.run([str(EXE), "healthcheck"], capture_output=True, env=server_env(tmp_path, db), timeout=30)
    assert proc.returncode == 1
    assert str(db) in proc.stderr.decode()
    assert not db.exists()


def test_healthcheck_while_the_database_is_built_says_it_is_starting(tmp_path: Path) -> None:
    """A first start builds a new database beside its name: meanwhile the healthcheck passes
    saying so (as it did while a first start imported into the database it had created), rather
    than telling the user to fix MEMORY_FILE_PATH (found by QA); a killed build's stale file does
    not count."""
    from graph_memory.db.store import STALE_BUILD_SECONDS

    db = tmp_path / "memory.db"
    build = tmp_path / ".memory.db.x1y2z3w4.building"
    build.write_bytes(b"SQLite format 3\x00")
    proc = subprocess.run([str(EXE), "healthcheck"], capture_output=True, env=server_env(tmp_path, db), timeout=30)
    assert proc.returncode == 0 and proc.stdout.decode().startswith("ok: starting:"), proc
    assert build.name in proc.stdout.decode() and not db.exists()
    for command in ("stats", "export", "backup"):   # said "the server's first start creates it" (QA)
        args = [str(EXE), command, *([str(tmp_path / "bk.db")] if command == "backup" else [])]
        proc = subprocess.run(args, capture_output=True, env=server_env(tmp_path, db), timeout=30)
        assert proc.returncode == 1 and "is being built now, as .memory.db.x1y2z3w4.building" in proc.stderr.decode()
    old = time.time() - STALE_BUILD_SECONDS - 60
    os.utime(build, (old, old))
    proc = subprocess.run([str(EXE), "healthcheck"], capture_output=True, env=server_env(tmp_path, db), timeout=30)
    assert proc.returncode == 1 and str(db) in proc.stderr.decode()


def test_a_reply_line_over_the_bound_is_replaced_by_an_error_saying_how_to_ask_for_less(tmp_path: Path) -> None:
    """The stdio transport measures every line it writes: a read_graph whose estimate passes the
    bound but whose line does not (here through what no estimate sees: a request id of 30,000
    characters) is a tool error naming MEMORY_MAX_REPLY_BYTES, with the request's id; a page of
    it under the bound comes whole, and the session goes on."""
    bound = 40_000
    calls: list[tuple[str, dict[str, Any]]] = [
        ("create_entities", {"entities": [{"name": f"E{i:02d}", "entityType": "t", "observations": ["x" * 300]}]})
        for i in range(30)]
    calls += [("read_graph", {}), ("read_graph", {"limit": 5})]
    env = {**server_env(tmp_path, tmp_path / "memory.db"), "MEMORY_MAX_REPLY_BYTES": str(bound)}
    requests = [*handshake(*calls), {"jsonrpc": "2.0", "id": 99, "method": "ping"}]
    long_id = "r" * 30_000
    requests[-3]["id"] = long_id
    messages, stderr, code = run_session(env, requests)
    assert code == 0, stderr[-2000:]
    by_id = {m["id"]: m for m in messages if "id" in m}
    assert all(not by_id[i]["result"].get("isError") for i in range(1, 31))
    refused = by_id[long_id]["result"]
    assert refused["isError"] is True and "structuredContent" not in refused, refused
    text = refused["content"][0]["text"]
    assert "MEMORY_MAX_REPLY_BYTES" in text and "not sent" in text and "nextCursor" in text, text
    page = by_id[32]["result"]["structuredContent"]
    assert [e["observations"] for e in page["entities"]] == [["x" * 300]] * 5 and "nextCursor" in page
    assert by_id[99]["result"] == {}
    assert '"reply_too_large"' in stderr


def _one_reply_line(env: dict[str, str], method: str, params: dict[str, Any]) -> bytes:
    """The reply line (bytes, newline included) of one request with id 1 to a fresh server."""
    lines = [handshake()[0], handshake()[1], {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}]
    command = [str(EXE)] if EXE.exists() else [sys.executable, "-m", "graph_memory"]
    done = subprocess.run(command, input="".join(json.dumps(x) + "\n" for x in lines).encode(), capture_output=True,
                          timeout=60, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    (line,) = [x + b"\n" for x in done.stdout.splitlines() if json.loads(x).get("id") == 1]
    return line


def test_a_line_of_exactly_the_bound_is_refused_and_one_byte_shorter_is_sent(tmp_path: Path) -> None:
    """Issue 15: MEMORY_MAX_REPLY_BYTES counts the reply's line with its newline, and a line must
    be shorter than it. Each reading tool, view and option, and the resource, measured exactly:
    at a bound of the line's length it is refused (saying how to ask for less), at one more it
    comes whole. Found by QA: the estimate refused lines 6 to 21 bytes under the bound."""
    env = server_env(tmp_path, tmp_path / "memory.db")
    entities = [{"name": f"E{i:02d}", "entityType": "thing",
                 "observations": [f"fact {i} " + "x" * (i % 7) * 9, 'a "quoted" back\\slash']} for i in range(60)]
    relations = [{"from": f"E{i:02d}", "to": f"E{i * 7 % 60:02d}", "relationType": "knows"} for i in range(60)]
    _, stderr, code = run_session(env, handshake(("create_entities", {"entities": entities}),
                                                 ("create_relations", {"relations": relations})))
    assert code == 0, stderr[-2000:]
    calls: list[tuple[str, dict[str, Any]]] = [
        ("tools/call", {"name": "read_graph", "arguments": {}}),
        ("tools/call", {"name": "read_graph", "arguments": {"limit": 7}}),
        ("tools/call", {"name": "read_graph", "arguments": {"view": "summary"}}),
        ("tools/call", {"name": "read_graph", "arguments": {"view": "summary", "timestamps": True, "limit": 7}}),
        ("tools/call", {"name": "open_nodes", "arguments": {"names": ["E01", "E02"]}}),
        ("tools/call", {"name": "search_nodes", "arguments": {"query": "fact 1"}}),   # (a search cursor holds
        # the first page's moment: its length changes from one server to the next)
        ("tools/call", {"name": "search_nodes", "arguments": {"query": "x", "timestamps": True}}),
        ("resources/read", {"uri": "memory://knowledge-graph"}),
    ]
    for method, params in calls:
        whole = _one_reply_line(env, method, params)
        assert whole.isascii() and b"isError\":true" not in whole, whole[:300]
        at = _one_reply_line({**env, "MEMORY_MAX_REPLY_BYTES": str(len(whole))}, method, params)
        assert b"MEMORY_MAX_REPLY_BYTES" in at and len(at) < len(whole), (params, at[:300])
        under = _one_reply_line({**env, "MEMORY_MAX_REPLY_BYTES": str(len(whole) + 1)}, method, params)
        sent, expected = json.loads(under)["result"], json.loads(whole)["result"]
        for result in (sent, expected):   # a cursor is made anew by each server
            result.get("structuredContent", {}).pop("nextCursor", None)
        assert len(under) == len(whole) and sent == expected, (params, under[:300])


def test_a_reply_over_the_bound_only_when_escaped_is_sent_whole_in_utf8(tmp_path: Path) -> None:
    """Lines escape non-ASCII (the Python client reads them faster), which takes a Chinese
    character 6 bytes instead of 3: a reply that fits the bound in UTF-8, as the SDK's own writer
    and the reference server send it, is sent so, whole, never refused for the escaping. One over
    the bound in UTF-8 too is refused as before."""
    bound = 60_000
    text = "喜欢喝茶，住在東京。" * 30   # 300 characters: 900 bytes in UTF-8, 1,800 escaped
    calls: list[tuple[str, dict[str, Any]]] = [
        ("create_entities", {"entities": [{"name": f"人{i:02d}", "entityType": "人", "observations": [text]}]})
        for i in range(20)]
    calls += [("read_graph", {}), ("read_graph", {"limit": 3})]
    env = {**server_env(tmp_path, tmp_path / "memory.db"), "MEMORY_MAX_REPLY_BYTES": str(bound)}
    messages, stderr, code = run_session(env, handshake(*calls))
    assert code == 0, stderr[-2000:]
    replies = by_id(messages)
    whole = replies[21]["result"]
    assert not whole.get("isError"), whole
    assert [e["observations"] for e in whole["structuredContent"]["entities"]] == [[text]] * 20
    sent = json.dumps(replies[21], ensure_ascii=False, separators=(",", ":")).encode()
    escaped = json.dumps(replies[21], separators=(",", ":")).encode()
    assert len(sent) < bound < len(escaped)
    assert '"reply_sent_in_utf8"' in stderr and '"reply_too_large"' not in stderr
    assert "nextCursor" in replies[22]["result"]["structuredContent"]   # small replies: as before
    # Over the bound in UTF-8 too: refused, saying how to ask for less.
    env["MEMORY_MAX_REPLY_BYTES"] = str(len(sent) // 2)
    messages, stderr, code = run_session(env, handshake(("read_graph", {})))
    refused = by_id(messages)[1]["result"]
    assert code == 0 and refused["isError"] is True and "MEMORY_MAX_REPLY_BYTES" in refused["content"][0]["text"]


def test_a_tool_listing_over_the_bound_says_to_raise_the_bound_not_to_page(tmp_path: Path) -> None:
    """A bound set below the server's own tools/list cannot be met by asking for less: its error
    names the size to set MEMORY_MAX_REPLY_BYTES to, and says nothing of pages; the session goes on."""
    env = {**server_env(tmp_path, tmp_path / "memory.db"), "MEMORY_MAX_REPLY_BYTES": "9000"}
    requests = [*handshake(), {"jsonrpc": "2.0", "id": 7, "method": "tools/list"},
                {"jsonrpc": "2.0", "id": 99, "method": "ping"}]
    messages, stderr, code = run_session(env, requests)
    assert code == 0, stderr[-2000:]
    by_id = {m["id"]: m for m in messages if "id" in m}
    message = by_id[7]["error"]["message"]
    found = re.search(r"would be ([\d,]+) bytes", message)
    assert found is not None, message
    size = int(found[1].replace(",", ""))
    assert size > 9000 and f"MEMORY_MAX_REPLY_BYTES to at least {size:,}" in message, message
    assert "read_graph" not in message and "nextCursor" not in message, message
    assert by_id[99]["result"] == {}


# Lines whose reading the fast path for plain requests must leave exactly as the SDK's union reads
# them: replies and errors that also name a method, keys spelled with escapes, unusable ids, lone
# surrogates, notifications, lines that are not messages.
_LINES_READ_AS_THE_SDK_READS_THEM = [
    '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"open_nodes","arguments":{"names":[]}}}',
    '{"jsonrpc":"2.0","id":"a","method":"x","params":{"q":"é \\" }"}}',
    '{"jsonrpc":"2.0","id":1,"method":"x","params":null}',
    '{"jsonrpc":"2.0","id":1,"method":"x","result":{}}',
    '{"jsonrpc":"2.0","id":1,"method":"x","error":{"code":1,"message":"m"}}',
    '{"jsonrpc":"2.0","id":1,"method":"x","\\u0065rror":{"code":1,"message":"m"}}',
    '{"jsonrpc":"2.0","id":1,"result":{}}',
    '{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"m"}}',
    '{"jsonrpc":"2.0","method":"notifications/initialized"}',
    '{"jsonrpc":"2.0","id":1.5,"method":"x"}', '{"jsonrpc":"2.0","id":true,"method":"x"}',
    '{"jsonrpc":"2.0","id":null,"method":"x"}', '{"jsonrpc":"2.0","id":{"a":1},"method":"x"}',
    '{"jsonrpc":"2.0","id":"\\ud83d","method":"x"}', '{"jsonrpc":"2.0","id":1,"method":"x","params":[]}',
    '{"jsonrpc":"1.0","id":1,"method":"x"}', '{"id":1,"method":"x"}', '[]', 'not json', '',
]


@pytest.mark.parametrize("line", _LINES_READ_AS_THE_SDK_READS_THEM)
def test_a_line_is_read_as_the_sdks_reader_reads_it(line: str) -> None:
    from mcp_types import jsonrpc_message_adapter
    from pydantic import ValidationError

    from graph_memory.mcp.stdio import read_message

    read = read_message(line)
    try:
        expected = jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValidationError as refused:
        assert isinstance(read, ValidationError)
        assert read.errors() == refused.errors()
        return
    assert not isinstance(read, Exception)
    assert type(read.message) is type(expected) and read.message == expected


@pytest.mark.anyio
async def test_a_refusal_waits_for_the_initialize_reply_only_while_it_is_pending() -> None:
    import anyio
    from mcp.shared.message import SessionMessage
    from mcp_types import JSONRPCRequest, JSONRPCResponse

    from graph_memory.mcp.stdio import InFlight

    in_flight = InFlight()
    with anyio.fail_after(1):
        await in_flight.initialize_answered()   # no initialize read: nothing to wait for
    in_flight.read(SessionMessage(JSONRPCRequest(jsonrpc="2.0", id=0, method="initialize")))
    with anyio.move_on_after(0.05) as waited:
        await in_flight.initialize_answered()
    assert waited.cancelled_caught
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(in_flight.initialize_answered)
        await anyio.sleep(0.01)
        in_flight.sent(SessionMessage(JSONRPCResponse(jsonrpc="2.0", id=0, result={})))
    with anyio.fail_after(1):
        await in_flight.initialize_answered()
    assert len(in_flight) == 0 and await in_flight.wait(0.01)


def test_stdio_is_served_on_uvloop_where_it_is_installed() -> None:
    from graph_memory.cli import _loop_options

    assert _loop_options() == {"use_uvloop": sys.platform != "win32"}


def test_a_refused_start_lists_the_typed_tools_and_answers_an_invalid_transport_name(tmp_path: Path) -> None:
    """Found by QA: the typed tools were missing from a refused start's list; an invalid
    MEMORY_TRANSPORT ("STDIO") exited at once, so the host saw only "disconnected"."""
    garbage = tmp_path / "memory.db"
    garbage.write_bytes(b"not a database " * 100)
    schemas = Path(__file__).parents[1] / "examples" / "schemas"
    env = server_env(tmp_path, garbage, MEMORY_SCHEMAS_DIR=str(schemas))
    messages, _, code = run_session(env, [*handshake(), {"jsonrpc": "2.0", "id": 5, "method": "tools/list"}])
    names = [t["name"] for t in by_id(messages)[5]["result"]["tools"]]
    assert code == 1 and "create_entities" in names and "add_npc" in names
    env = server_env(tmp_path, tmp_path / "fine.db", MEMORY_TRANSPORT="STDIO")
    messages, _, code = run_session(env, handshake(("read_graph", {})))
    assert code == 1 and "MEMORY_TRANSPORT" in by_id(messages)[1]["result"]["content"][0]["text"]
    assert not (tmp_path / "fine.db").exists()


def test_a_refused_start_exits_1_on_two_quick_signals_and_with_stdin_closed(tmp_path: Path) -> None:
    """A second signal during the interpreter's teardown met the default handler (killed by
    SIGTERM, found by QA); a closed stdin (`<&-`) ended in a traceback without the message."""
    garbage = tmp_path / "memory.db"
    garbage.write_bytes(b"not a database " * 100)
    for _ in range(3):
        proc = subprocess.Popen([str(EXE)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, env=server_env(tmp_path, garbage))
        assert proc.stdin is not None and proc.stdout is not None
        try:
            proc.stdin.write((json.dumps(handshake()[0]) + "\n").encode())
            proc.stdin.flush()
            assert json.loads(proc.stdout.readline())["id"] == 0
            proc.send_signal(signal.SIGTERM)
            time.sleep(0.02)
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=10) == 1
        finally:
            if proc.poll() is None:
                proc.kill()
    done = subprocess.run(f"exec {EXE} <&-", shell=True, capture_output=True, text=True, timeout=60,
                          env=server_env(tmp_path, garbage))
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "graph-memory: error:" in done.stderr and "is not a SQLite database" in done.stderr
