"""The two servers under test and how to reach them over real MCP stdio.

Each server runs as its own subprocess, spawned by the official Python client
(``mcp.Client`` over ``mcp.client.stdio.stdio_client``), exactly as a desktop host would. The
benchmark finds the child's pid (``psutil``) to read its peak resident set (``VmHWM``) before
closing the connection.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import psutil
from mcp import Client, stdio_client
from mcp.client.stdio import StdioServerParameters

REPO = Path(__file__).resolve().parents[1]
REFERENCE_PACKAGE = "@modelcontextprotocol/server-memory"
REFERENCE_VERSION = "2026.8.31"
REFERENCE_DIR = REPO / "bench" / ".reference"
REFERENCE_ENTRY = REFERENCE_DIR / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
NOOP_TOOL = "bench_no_such_tool"   # a tools/call both servers answer without touching their data


class BenchError(RuntimeError):
    """The benchmark cannot continue (a server misbehaved or a tool is missing)."""


@dataclass(frozen=True)
class ServerSpec:
    """How to spawn one server: ``kind`` is ``ours`` or ``reference``; ``mode`` the client mode."""

    kind: str
    command: str
    args: tuple[str, ...]
    env: dict[str, str]
    mode: str
    marker: str          # a part of the server's command line, to find its pid
    cwd: str | None = None

    def params(self) -> StdioServerParameters:
        return StdioServerParameters(command=self.command, args=list(self.args), env=self.env, cwd=self.cwd)


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without any ``MEMORY_*`` setting, plus ``extra``: what a server
    or command the bench starts sees (its settings are the bench's, never the caller's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMORY_")}
    env.update(extra)
    return env


def graph_memory_command() -> str:
    """The ``graph-memory`` console script of this interpreter's environment."""
    candidate = Path(sys.executable).parent / "graph-memory"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("graph-memory")
    if not found:
        raise BenchError("graph-memory is not installed in this environment (pip install -e .)")
    return found


def ours(database: Path, mode: str) -> ServerSpec:
    """graph-memory on ``database`` (default log level, as users run it)."""
    return ServerSpec("ours", graph_memory_command(), (), {"MEMORY_FILE_PATH": str(database)}, mode, "graph-memory")


def reference(jsonl: Path) -> ServerSpec:
    """The reference server on ``jsonl``, always with the handshake (it predates 2026-07-28)."""
    node = shutil.which("node")
    if node is None:
        raise BenchError("node is not on PATH; --reference needs Node 18+")
    return ServerSpec("reference", node, (str(REFERENCE_ENTRY),), {"MEMORY_FILE_PATH": str(jsonl)}, "legacy",
                      str(REFERENCE_ENTRY))


def ensure_reference() -> str:
    """Install the reference server under bench/.reference/node_modules (git-ignored) if missing.

    Returns:
        The installed version.
    """
    package_json = REFERENCE_ENTRY.parent.parent / "package.json"
    if not REFERENCE_ENTRY.exists():
        npm_install(REFERENCE_DIR, f"{REFERENCE_PACKAGE}@{REFERENCE_VERSION}")
    import json

    return str(json.loads(package_json.read_text())["version"])


def npm_install(prefix: Path, package: str) -> None:
    """``npm install`` ``package`` (``name@version``) into ``prefix``/node_modules (git-ignored).

    Raises:
        BenchError: npm is not on PATH (the message gives the command to run by hand).
    """
    npm = shutil.which("npm")
    if npm is None:
        raise BenchError(f"npm is not on PATH; install by hand: npm install --prefix {prefix} {package}")
    prefix.mkdir(parents=True, exist_ok=True)
    print(f"installing {package} into {prefix} …", file=sys.stderr)
    subprocess.run([npm, "install", "--no-save", "--no-package-lock", "--no-audit", "--no-fund",
                    "--prefix", str(prefix), package], check=True, stdout=subprocess.DEVNULL)


def server_pid(spec: ServerSpec) -> int:
    """The pid of the running server process spawned by this process for ``spec``."""
    for child in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            if child.status() != psutil.STATUS_ZOMBIE and any(spec.marker in part for part in child.cmdline()):
                return child.pid
    raise BenchError(f"cannot find the {spec.kind} server process")


def peak_rss_mb(pid: int) -> float:
    """``VmHWM`` (peak resident set over the process's life) of ``pid``, in MiB; its current
    resident set where the kernel gives no ``VmHWM``."""
    peak = vm_hwm_mib(pid)
    return peak if peak is not None else float(psutil.Process(pid).memory_info().rss) / 2**20


def vm_hwm_mib(pid: int) -> float | None:
    """``VmHWM`` of ``pid`` from ``/proc/PID/status`` in MiB; None when the status has none (a
    process that has exited and not been waited for).

    Raises:
        OSError: no such process (or no ``/proc``)."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return None


@contextlib.asynccontextmanager
async def connect(spec: ServerSpec, errlog: IO[str]) -> AsyncIterator[Client]:
    """A connected client (handshake or discover done) to a freshly spawned server."""
    client = Client(stdio_client(spec.params(), errlog=errlog), mode=spec.mode,  # type: ignore[arg-type]
                    read_timeout_seconds=900)
    async with client:
        yield client


def versions() -> dict[str, Any]:
    """Versions of everything that shapes the numbers."""
    import platform
    from importlib.metadata import version

    import apsw

    out: dict[str, Any] = {
        "python": platform.python_version(),
        "mcp": version("mcp"),
        "apsw": apsw.apsw_version(),
        "sqlite": apsw.sqlite_lib_version(),
        "graph_memory": version("graph-memory"),
    }
    node = shutil.which("node")
    if node:
        out["node"] = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    return out


def machine() -> dict[str, Any]:
    """uname, CPU model and count, memory."""
    cpu = "unknown"
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as info:
        for line in info:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    return {
        "uname": " ".join(os.uname()),
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
    }
