"""Cold start on stdio, and how much of it is the SDK's own import (issue 15, item 8).

    python -m bench.cold_start [--runs 15] [--source PATH]

Measures, in alternation (so a busy machine weighs on every variant alike), the median wall
time and CPU time (user + system, of the child process) of:

- ``python -c pass``: the interpreter's own start;
- ``python -c "import mcp.server.lowlevel"``: the SDK's own import (``import mcp`` imports its
  client, HTTP transports and types whatever submodule is asked for), and with it the other
  libraries a start needs (pydantic-settings, structlog, apsw): times up to the end of the
  import, without the interpreter's teardown;
- ``python -m graph_memory``: spawn → the ``initialize`` reply on stdout (a bare JSON-RPC
  client; CPU time read from ``/proc`` at the reply);
- the same through the official Python client (``bench.run.cold_start``: connected, then the
  first ``tools/call`` answered), wall time only.

``--source`` puts another source tree's ``service/`` folder first on ``PYTHONPATH`` (e.g. the
main checkout, for a before/after). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench import run, servers

_INITIALIZE = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}) + "\n"
_TICK = os.sysconf("SC_CLK_TCK")


def _env(database: Path, source: str | None) -> dict[str, str]:
    env = servers.clean_env(MEMORY_FILE_PATH=str(database))
    if source:
        env["PYTHONPATH"] = source
    return env


def _python(code: str, env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds of ``python -c code`` up to the end of ``code`` (not the interpreter's
    teardown): ``code`` runs first, then the process reports its times."""
    report = ("\nimport os, time\nt = os.times()\n"
              "print(time.clock_gettime(time.CLOCK_BOOTTIME), t.user + t.system)")
    start = time.clock_gettime(time.CLOCK_BOOTTIME)
    done = subprocess.run([sys.executable, "-c", code + report], env=env, capture_output=True, check=True)
    ended, cpu = map(float, done.stdout.split())
    return ended - start, cpu


def _server(env: dict[str, str]) -> tuple[float, float]:
    """Wall seconds from spawn to the initialize reply, and the server's CPU seconds by then."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "graph_memory"], env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(_INITIALIZE.encode())
    proc.stdin.flush()
    line = proc.stdout.readline()
    wall = time.perf_counter() - start
    fields = Path(f"/proc/{proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / _TICK   # utime, stime
    proc.stdin.close()
    proc.wait()
    if b'"result"' not in line:
        raise servers.BenchError(f"no initialize reply: {line[:200]!r}")
    return wall, cpu


def measure(runs: int, source: str | None) -> dict[str, Any]:
    """Medians over ``runs`` alternating rounds (see the module docstring)."""
    samples: dict[str, list[tuple[float, float]]] = {"python": [], "sdk_import": [], "sdk_and_settings": [],
                                                     "initialize": []}
    client: list[float] = []
    with tempfile.TemporaryDirectory() as folder:
        database = Path(folder) / "memory.db"
        env = _env(database, source)
        _server(env)   # creates the database: every measured start is an ordinary one
        spec = servers.ours(database, "legacy")
        spec.env.update({k: v for k, v in env.items() if k == "PYTHONPATH"})
        for _ in range(runs):
            samples["python"].append(_python("pass", env))
            samples["sdk_import"].append(_python("import mcp.server.lowlevel", env))
            samples["sdk_and_settings"].append(_python("import mcp.server.lowlevel, pydantic_settings, structlog, apsw",
                                                       env))
            samples["initialize"].append(_server(env))
            with open(os.devnull, "w") as errlog:
                client.append(asyncio.run(run.cold_start(spec, "nobody", errlog))["first_reply_s"])
    out: dict[str, Any] = {name: {"wall_s": round(statistics.median(w for w, _ in v), 3),
                                  "cpu_s": round(statistics.median(c for _, c in v), 3)} for name, v in samples.items()}
    out["official_client_first_tools_call"] = {"wall_s": round(statistics.median(client), 3)}
    out["runs"] = runs
    out["load_average"] = os.getloadavg()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--source", help="a source tree's service/ folder to measure instead of the installed one")
    args = parser.parse_args()
    print(json.dumps(measure(args.runs, args.source), indent=2))


if __name__ == "__main__":
    main()
