"""What the official Python client spends on one reply by itself, timed in-process.

A large reply's time through ``mcp.Client`` is partly the client's own work, which no server can
remove: its stdio reader (``mcp.client.stdio.stdio_client``) receives 64 KiB chunks and re-joins
its whole line buffer for each (``(buffer + chunk).split("\\n")``: quadratic in one message's
size), then parses the line into a JSON-RPC message, validates the result against the negotiated
revision's schema and builds a ``CallToolResult``; finally ``jsonschema`` checks the structured
content against the tool's output schema (timed live by ``bench.workload.ValidationClock``).

:func:`capture_replies` gets the exact bytes a server writes for ``tools/call`` requests (a raw
JSON-RPC session on the server's pipes); :func:`python_client_cost` replays them through the same steps:
the reader's loop (the same statements as the SDK's, on the same chunk size) and the SDK's own
parsing functions.
"""

from __future__ import annotations

import codecs
import json
import subprocess
import time
from typing import Any

from mcp import types
from mcp_types import methods

from bench.servers import BenchError, ServerSpec

CHUNK = 65_536                  # anyio's default receive size, what the SDK's reader gets per read
PROTOCOL = "2025-11-25"         # a handshake-era revision both servers speak


def capture_replies(spec: ServerSpec, env: dict[str, str], calls: list[tuple[str, dict[str, Any]]], *,
                    timeout: float = 900) -> list[bytes]:
    """The JSON-RPC lines (without their newlines) ``spec``'s server writes in answer to
    ``tools/call`` of each (tool, arguments) in ``calls``, one after the other on one connection
    after the initialize handshake.

    Raises:
        BenchError: the server exited, took longer than ``timeout`` seconds, or answered with a
            JSON-RPC error.
    """
    proc = subprocess.Popen([spec.command, *spec.args], env={**env, **spec.env}, cwd=spec.cwd,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    deadline = time.monotonic() + timeout

    def send(message: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(message).encode() + b"\n")
        proc.stdin.flush()

    def answer(request_id: int, what: str) -> bytes:
        assert proc.stdout is not None
        while time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                raise BenchError(f"{spec.kind} exited before answering {what}")
            message = json.loads(line)   # notifications and other requests have no matching id
            if message.get("id") == request_id:
                if "result" not in message:
                    raise BenchError(f"{spec.kind} answered {what} with an error: {message.get('error')}")
                return line.rstrip(b"\r\n")
        raise BenchError(f"{spec.kind} did not answer {what} within {timeout:.0f} s")

    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": PROTOCOL, "capabilities": {},
                         "clientInfo": {"name": "bench", "version": "0"}}})
        answer(1, "initialize")
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        out = []
        for n, (tool, args) in enumerate(calls, start=2):
            send({"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": {"name": tool, "arguments": args}})
            out.append(answer(n, tool))
        return out
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def python_client_cost(line: bytes, *, repeat: int = 3) -> dict[str, Any]:
    """The official Python client's work on one captured reply, best of ``repeat``, in ms:
    ``reader_ms`` (its stdio reader's loop over 64 KiB chunks), ``parse_ms`` (the line into a
    JSON-RPC message), ``result_ms`` (the result checked against the revision's schema and built
    into a ``CallToolResult``); with the reply's size, chunk count and whether it is all ASCII."""
    data = line + b"\n"

    def reader() -> str:
        # The statements of mcp.client.stdio.stdio_client's stdout_reader (TextReceiveStream decodes
        # each chunk incrementally), kept apart from the parse that follows them there.
        decoder = codecs.getincrementaldecoder("utf-8")()
        buffer, got = "", ""
        for start in range(0, len(data), CHUNK):
            chunk = decoder.decode(data[start:start + CHUNK])
            lines = (buffer + chunk).split("\n")
            buffer = lines.pop()
            for one in lines:
                got = one
        return got

    def best(step: Any) -> tuple[float, Any]:
        times, value = [], None
        for _ in range(repeat):
            start = time.perf_counter_ns()
            value = step()
            times.append(time.perf_counter_ns() - start)
        return min(times) / 1e6, value

    reader_ms, text = best(reader)
    parse_ms, message = best(lambda: types.jsonrpc_message_adapter.validate_json(text, by_name=False))
    raw = message.result

    def result() -> types.CallToolResult:
        # As ClientSession.send_request: the revision's result schema, then the result model.
        methods.validate_server_result("tools/call", PROTOCOL, raw)
        return types.CallToolResult.model_validate(raw, by_name=False)

    result_ms, _ = best(result)
    return {"reply_bytes": len(line), "chunks": -(-len(data) // CHUNK), "ascii": line.isascii(),
            "reader_ms": reader_ms, "parse_ms": parse_ms, "result_ms": result_ms}
