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
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp import types
from mcp_types import methods

from bench.servers import BenchError, ServerSpec

CHUNK = 65_536                  # anyio's default receive size, what the SDK's reader gets per read
PROTOCOL = "2025-11-25"         # a handshake-era revision both servers speak
TS_MAX_MESSAGE_BYTES = 10 * 2**20   # the TypeScript SDK's STDIO_DEFAULT_MAX_BUFFER_SIZE: larger is refused


def capture_replies(spec: ServerSpec, env: dict[str, str], calls: list[tuple[str, dict[str, Any]]], *,
                    timeout: float = 900, schemas: dict[str, Any] | None = None) -> list[bytes]:
    """The JSON-RPC lines (without their newlines) ``spec``'s server writes in answer to
    ``tools/call`` of each (tool, arguments) in ``calls``, one after the other on one connection
    after the initialize handshake. ``schemas``, when given, receives each tool's
    ``outputSchema`` from ``tools/list`` (listed first, as the official clients do).

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
        if schemas is not None:
            send({"jsonrpc": "2.0", "id": 0, "method": "tools/list"})
            listed = json.loads(answer(0, "tools/list"))["result"]["tools"]
            schemas.update({t["name"]: t.get("outputSchema") for t in listed})
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


def python_output_check_ms(line: bytes, schema: dict[str, Any], *, repeat: int = 3) -> float:
    """The official Python client's output-schema check of one captured reply, best of
    ``repeat``, in ms: the validator ``ClientSession`` compiles once per tool (``jsonschema``,
    pure Python), then ``best_match`` over its errors, as ``validate_tool_result`` does."""
    from jsonschema import exceptions
    from jsonschema.validators import validator_for
    from referencing import Registry

    structured = json.loads(line)["result"]["structuredContent"]
    validator = validator_for(schema)(schema, registry=Registry())
    times = []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        error = exceptions.best_match(validator.iter_errors(structured))
        times.append(time.perf_counter_ns() - start)
        if error is not None:
            raise BenchError(f"a captured reply does not match its output schema: {error.message}")
    return min(times) / 1e6


def typescript_client_cost(lines: list[bytes], schemas: list[dict[str, Any]], sdk: Path, *,
                           repeat: int = 3) -> list[dict[str, Any]]:
    """The official TypeScript client's work on each captured reply (``bench/ts_client_cost.mjs``:
    its stdio ReadBuffer, JSON.parse, zod checks and compiled output-schema check), best of
    ``repeat``, in ms; ``sdk`` holds ``node_modules/@modelcontextprotocol/sdk``.

    Raises:
        BenchError: node is missing or the script failed.
    """
    node = shutil.which("node")
    if node is None:
        raise BenchError("node is not on PATH; the TypeScript client's cost needs Node 18+")
    with tempfile.TemporaryDirectory(prefix="graph-memory-ts-cost-") as tmp:
        items = []
        for n, (line, schema) in enumerate(zip(lines, schemas, strict=True)):
            path = Path(tmp) / f"reply{n}.json"
            path.write_bytes(line)
            items.append({"line": str(path), "schema": schema})
        plan = Path(tmp) / "plan.json"
        plan.write_text(json.dumps({"sdk": str(sdk.resolve()), "repeat": repeat, "items": items}), encoding="utf-8")
        proc = subprocess.run([node, str(Path(__file__).with_name("ts_client_cost.mjs")), str(plan)],
                              capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        raise BenchError(f"ts_client_cost.mjs failed: {proc.stderr[-2000:]}")
    return [json.loads(out) for out in proc.stdout.splitlines()]


def main(argv: list[str] | None = None) -> int:
    """``python -m bench.client_cost``: print what each official client spends by itself on our
    (and, with ``--reference``, the reference server's) replies of ``read_graph`` and the broad
    search at ``--size`` entities. The servers' replies are timed one after the other: on a busy
    machine compare figures of one run only, and run it twice."""
    import argparse

    from bench import servers
    from bench.datagen import BROAD_TERM, make_graph
    from bench.run import run_import
    from bench.ts_client import SDK_DIR

    parser = argparse.ArgumentParser(prog="python -m bench.client_cost", description=main.__doc__)
    parser.add_argument("--size", type=int, default=10_000, help="entities in the generated graph (default 10000)")
    parser.add_argument("--reference", action="store_true", help="also the reference server's replies")
    parser.add_argument("--ts-sdk", type=Path, default=SDK_DIR,
                        help="folder whose node_modules holds @modelcontextprotocol/sdk (default bench/.ts-client)")
    parser.add_argument("--repeat", type=int, default=3, help="best of this many per step (default 3)")
    args = parser.parse_args(argv)
    calls: list[tuple[str, dict[str, Any]]] = [("read_graph", {}), ("search_nodes", {"query": BROAD_TERM})]
    with tempfile.TemporaryDirectory(prefix="graph-memory-client-cost-") as tmp:
        jsonl, database = Path(tmp) / "graph.jsonl", Path(tmp) / "graph.db"
        make_graph(args.size).write_jsonl(jsonl)
        run_import(jsonl, database)
        specs = [servers.ours(database, "legacy")]
        if args.reference:
            servers.ensure_reference()
            specs.append(servers.reference(jsonl))
        for spec in specs:
            schemas: dict[str, Any] = {}
            lines = capture_replies(spec, servers.clean_env(), calls, schemas=schemas)
            fits = [n for n, line in enumerate(lines) if len(line) < TS_MAX_MESSAGE_BYTES]
            ts = dict(zip(fits, typescript_client_cost([lines[n] for n in fits], [schemas[calls[n][0]] for n in fits],
                                                       args.ts_sdk, repeat=args.repeat), strict=True))
            for n, ((tool, _), line) in enumerate(zip(calls, lines, strict=True)):
                py = python_client_cost(line, repeat=args.repeat)
                check = python_output_check_ms(line, schemas[tool], repeat=args.repeat)
                t = ts.get(n)
                print(f"{spec.kind:9} {tool:12} {len(line) / 1e6:5.2f} MB {'ASCII' if line.isascii() else 'UTF-8'} | "
                      f"Python client: reader {py['reader_ms']:.1f}, parse {py['parse_ms']:.1f}, result "
                      f"{py['result_ms']:.1f}, output-schema check {check:.1f} ms | TypeScript client: "
                      + (f"ReadBuffer {t['readBufferMs']:.1f} (decode {t['decodeMs']:.1f}, JSON.parse "
                         f"{t['jsonParseMs']:.1f}), zod {t['messageSchemaMs'] + t['resultSchemaMs']:.1f}, "
                         f"output-schema check {t['outputSchemaMs']:.1f} ms" if t else "refuses it (over 10 MiB)"),
                      flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
