"""Helpers for the container tests: containers that are always removed, a stdio MCP session
attached to a container the way ``docker run -i`` attaches, one-shot CLI runs on a volume (and the
database check an operator would do), files into and out of volumes, published ports and probes.

Imported relatively by the test modules (``from .support import ...``); the fixtures live in
``conftest.py``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from helpers import upstream_oracle as shared_upstream_oracle

UID = 10001
PY = "/opt/graph-memory/bin/python"
"""The image's venv interpreter (has the mcp SDK, httpx2 and apsw)."""
DB = "/data/memory.db"
SCHEMA_VERSION = len(list((Path(__file__).resolve().parents[2] / "migrations").glob("[0-9]*.sql")))
"""The schema version a fully migrated database has: one per migration file in the repository."""
PROTOCOL = "2025-11-25"
LABEL = "io.graph-memory.integration-test"
"""Every container a test creates carries this label (value: this test session's id), so the
session's safety net in conftest.py can remove leftovers of a test that crashed its own cleanup."""
SESSION_ID = f"{os.getpid()}-{int(time.time())}"

HARDENED: dict[str, Any] = {
    "read_only": True,
    "tmpfs": {"/tmp": ""},
    "cap_drop": ["ALL"],
    "security_opt": ["no-new-privileges:true"],
}
"""How compose.yaml and the Kubernetes manifests run the image: read-only root, a tmpfs /tmp,
no capabilities, no privilege escalation."""


def data_volume(volume: str) -> dict[str, dict[str, str]]:
    """``volumes=`` for the docker SDK: the named volume read-write at /data."""
    return {volume: {"bind": "/data", "mode": "rw"}}


def remove(container: Any) -> None:
    """Remove a container and its anonymous volumes, whatever state it is in."""
    import docker.errors

    with contextlib.suppress(docker.errors.NotFound):
        container.remove(force=True, v=True)


@contextlib.contextmanager
def created(client: Any, image: str, **kwargs: Any) -> Iterator[Any]:
    """A created (not started) container, removed with its anonymous volumes afterwards."""
    labels = {LABEL: SESSION_ID, **kwargs.pop("labels", {})}
    container = client.containers.create(image, labels=labels, **kwargs)
    try:
        yield container
    finally:
        remove(container)


@contextlib.contextmanager
def started(client: Any, image: str, **kwargs: Any) -> Iterator[Any]:
    """A started container (detached), removed with its anonymous volumes afterwards."""
    with created(client, image, detach=True, **kwargs) as container:
        container.start()
        yield container


def logs(container: Any) -> tuple[str, str]:
    """(stdout, stderr) of a container so far, decoded."""
    out = container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
    err = container.logs(stdout=False, stderr=True).decode("utf-8", "replace")
    return out, err


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line of ``text`` parsed as a JSON object (fails on one that is not)."""
    parsed = []
    for line in text.splitlines():
        if line.strip():
            item = json.loads(line)
            assert isinstance(item, dict), line
            parsed.append(item)
    return parsed


def wait_for_log(container: Any, predicate: Callable[[list[dict[str, Any]]], bool], timeout: float = 10
                 ) -> list[dict[str, Any]]:
    """The container's JSON log lines (stderr) once ``predicate(lines)`` holds. An access-log line
    is written when the request handler returns, a moment after the client got the full answer."""
    deadline = time.monotonic() + timeout
    while True:
        lines = json_lines(logs(container)[1])
        if predicate(lines):
            return lines
        assert time.monotonic() < deadline, f"log condition not met within {timeout} s:\n{lines}"
        time.sleep(0.1)


def wait_exit(container: Any, timeout: float) -> tuple[int, float]:
    """Wait for the container to exit; return (exit status, seconds waited). Fails (leaving the
    container running, for its owner to remove) when it is still running after ``timeout``."""
    import requests.exceptions

    started_at = time.monotonic()
    try:
        result = container.wait(timeout=timeout)
    except requests.exceptions.RequestException:  # the engine's answer did not come in time
        container.reload()
        raise AssertionError(f"container still {container.status} after {timeout} s; stderr:\n"
                             f"{logs(container)[1][-3000:]}") from None
    return int(result["StatusCode"]), time.monotonic() - started_at


# -- one-shot commands -----------------------------------------------------------------------------


@dataclass
class Run:
    exit_code: int
    stdout: str
    stderr: str

    def ok(self) -> Run:
        assert self.exit_code == 0, f"exit {self.exit_code}\nstdout: {self.stdout}\nstderr: {self.stderr}"
        return self


def run(client: Any, image: str, volume: str, command: list[str], *, timeout: float = 60, **kwargs: Any) -> Run:
    """Run ``IMAGE command`` (a graph-memory subcommand, unless ``entrypoint=`` says otherwise)
    on the volume, hardened as in production, and return its exit status and output."""
    options = {**HARDENED, "volumes": data_volume(volume), **kwargs}
    with created(client, image, command=command, detach=True, **options) as container:
        container.start()
        code, _ = wait_exit(container, timeout)
        out, err = logs(container)
    return Run(code, out, err)


def database_state(client: Any, image: str, volume: str) -> dict[str, Any]:
    """Check the database on ``volume`` the way an operator would, with no server running, in one
    container: ``graph-memory healthcheck`` (opens it, every migration applied), SQLite's
    ``PRAGMA integrity_check``, then ``graph-memory stats --json`` (returned)."""
    integrity = f"import apsw; print(apsw.Connection({DB!r}).execute('PRAGMA integrity_check').fetchall())"
    script = f"set -e; graph-memory healthcheck; {PY} -c \"{integrity}\"; graph-memory stats --json"
    result = run(client, image, volume, ["-c", script], entrypoint=["/bin/sh"]).ok()
    health, checked, stats = result.stdout.split("\n", 2)
    assert health == f"ok: {DB} at schema version {SCHEMA_VERSION}", result.stdout
    assert checked == "[('ok',)]", result.stdout
    state = json.loads(stats)
    assert (state["schema_version"], state["pending_migrations"]) == (SCHEMA_VERSION, []), state
    return dict(state)


def put_files(container: Any, directory: str, files: dict[str, bytes], *, uid: int = UID, mode: int = 0o644) -> None:
    """Copy ``{relative path: bytes}`` into ``directory`` of a (created or running) container,
    files and the folders they need owned by ``uid``."""
    buffer = io.BytesIO()
    folders = sorted({str(parent) for name in files for parent in Path(name).parents if str(parent) != "."})
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for folder in folders:
            info = tarfile.TarInfo(folder)
            info.type, info.mode, info.uid, info.gid = tarfile.DIRTYPE, 0o755, uid, uid
            tar.addfile(info)
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.uid, info.gid = len(data), mode, uid, uid
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
    assert container.put_archive(directory, buffer.getvalue())


def put_file(container: Any, directory: str, name: str, data: bytes, *, uid: int = UID, mode: int = 0o644) -> None:
    """Copy ``data`` into ``directory/name`` of a (created or running) container, owned by uid."""
    put_files(container, directory, {name: data}, uid=uid, mode=mode)


def get_file(container: Any, path: str) -> tuple[bytes, tarfile.TarInfo]:
    """The bytes and tar header (owner, mode) of one file of a (created or stopped) container."""
    stream, _ = container.get_archive(path)
    with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
        member = tar.getmembers()[0]
        extracted = tar.extractfile(member)
        assert extracted is not None, f"{path} is not a regular file"
        return extracted.read(), member


# -- stdio: `docker run -i` ------------------------------------------------------------------------


class RPCError(AssertionError):
    """A JSON-RPC error answer."""


@dataclass
class StdioSession:
    """A JSON-RPC session over the attached stdin/stdout of one container.

    Attached before the container starts, with ``stdin`` open and no TTY, exactly as
    ``docker run -i`` does (``StdinOnce``: closing our side of stdin closes the server's). A
    reader thread demultiplexes Docker's stream frames: stdout bytes are split into lines, each
    of which must be a JSON-RPC message; stderr bytes are kept apart.
    """

    container: Any
    timeout: float = 30
    stdout: bytearray = field(default_factory=bytearray)
    stderr: bytearray = field(default_factory=bytearray)
    messages: list[dict[str, Any]] = field(default_factory=list)
    bad_lines: list[bytes] = field(default_factory=list)
    _next_id: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Condition()
        self._sock = self.container.attach_socket(params={"stdin": 1, "stdout": 1, "stderr": 1, "stream": 1})
        self._raw: socket.socket = self._sock._sock
        self._pending = b""
        self._eof = False
        self._reader = threading.Thread(target=self._read, name="stdio-reader", daemon=True)
        self._reader.start()

    # -- transport

    def _read(self) -> None:
        from docker.utils.socket import STDERR, STDOUT, frames_iter

        try:
            for stream, data in frames_iter(self._sock, tty=False):
                with self._lock:
                    if stream == STDOUT:
                        self.stdout += data
                        self._pending += data
                        *lines, self._pending = self._pending.split(b"\n")
                        for line in lines:
                            self._message(line)
                    elif stream == STDERR:
                        self.stderr += data
                    self._lock.notify_all()
        except (OSError, ValueError):
            pass  # the socket was closed under us (ValueError: by close() while reading)
        finally:
            with self._lock:
                if self._pending:
                    self._message(self._pending)
                    self._pending = b""
                self._eof = True
                self._lock.notify_all()

    def _message(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            self.bad_lines.append(line)
            return
        if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
            self.bad_lines.append(line)
            return
        self.messages.append(message)

    def send(self, message: dict[str, Any]) -> None:
        self._raw.sendall(json.dumps(message, ensure_ascii=False).encode("utf-8") + b"\n")

    def close_stdin(self) -> None:
        """End the server's stdin (what an MCP client does to stop a stdio server)."""
        self._raw.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._raw.close()
        self._sock.close()
        self._reader.join(5)

    def end(self, timeout: float = 15) -> int:
        """End the session as a client does (close stdin); wait for the container to exit and for
        the last of its output to be read; return its exit status."""
        self.close_stdin()
        code, _ = wait_exit(self.container, timeout)
        self.wait_eof(timeout)
        return code

    def wait_eof(self, timeout: float | None = None) -> None:
        """Wait until the container closed its stdout and stderr (the process ended)."""
        with self._lock:
            assert self._lock.wait_for(lambda: self._eof, timeout or self.timeout), "stdout stayed open"

    # -- JSON-RPC

    def start_request(self, method: str, params: dict[str, Any] | None = None) -> int:
        """Send a request without waiting for its answer; return its id."""
        with self._lock:
            self._next_id += 1
            request_id = self._next_id
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return request_id

    def answer(self, request_id: int, timeout: float | None = None) -> dict[str, Any]:
        """The answer (``result`` or ``error`` message) to ``request_id``, waiting for it."""

        def find() -> dict[str, Any] | None:
            return next((m for m in self.messages if m.get("id") == request_id and "method" not in m), None)

        with self._lock:
            found = self._lock.wait_for(lambda: find() is not None or self._eof, timeout or self.timeout)
            message = find()
        assert message is not None, (
            f"no answer to request {request_id} (eof={self._eof}); stderr:\n{self.stderr.decode('utf-8', 'replace')}"
            if found else f"no answer to request {request_id} within {timeout or self.timeout} s")
        return message

    def request(self, method: str, params: dict[str, Any] | None = None, timeout: float | None = None) -> Any:
        answer = self.answer(self.start_request(method, params), timeout)
        if "error" in answer:
            raise RPCError(f"{method}: {answer['error']}")
        return answer["result"]

    def notify(self, method: str, params: dict[str, Any] | None = None) -> None:
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)

    def initialize(self) -> dict[str, Any]:
        """The handshake-era handshake: ``initialize`` then ``notifications/initialized``."""
        result = self.request("initialize", {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "graph-memory-integration-test", "version": "0"},
        }, timeout=60)
        assert result["protocolVersion"] == PROTOCOL, result
        self.notify("notifications/initialized")
        return dict(result)

    def call_tool(self, name: str, arguments: dict[str, Any], timeout: float | None = None) -> Any:
        """Call a tool; assert it succeeded and return its structured content."""
        result = self.request("tools/call", {"name": name, "arguments": arguments}, timeout)
        assert not result.get("isError"), result
        return result["structuredContent"]

    def stderr_lines(self) -> list[dict[str, Any]]:
        with self._lock:
            return json_lines(self.stderr.decode("utf-8"))


@contextlib.contextmanager
def stdio_server(client: Any, image: str, volume: str, *, timeout: float = 30, **kwargs: Any
                 ) -> Iterator[StdioSession]:
    """``docker run -i --rm -v VOLUME:/data IMAGE`` (hardened) with an attached session."""
    options = {**HARDENED, "volumes": data_volume(volume), **kwargs}
    # detach=False + stdin_open=True is what `docker run -i` creates: AttachStdin and StdinOnce.
    with created(client, image, stdin_open=True, tty=False, detach=False, **options) as container:
        session = StdioSession(container, timeout=timeout)
        try:
            container.start()
            yield session
        finally:
            session.close()


# -- HTTP ------------------------------------------------------------------------------------------


def published_port(container: Any, port: int = 8000) -> int:
    """The host port Docker published ``port`` on (waits for the binding to appear)."""
    deadline = time.monotonic() + 10
    while True:
        container.reload()
        bindings = (container.attrs["NetworkSettings"]["Ports"] or {}).get(f"{port}/tcp")
        if bindings:
            return int(bindings[0]["HostPort"])
        assert time.monotonic() < deadline, f"port {port} was not published: {container.attrs['NetworkSettings']}"
        time.sleep(0.1)


def wait_http(url: str, *, container: Any | None = None, timeout: float = 30) -> None:
    """Wait until ``url`` answers 200 (fails early with the logs when the container exited)."""
    import httpx2

    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        if container is not None:
            container.reload()
            if container.status == "exited":
                raise AssertionError(f"the server exited while starting:\n{logs(container)[1][-4000:]}")
        try:
            response = httpx2.get(url, timeout=2, trust_env=False)  # never through a proxy
            if response.status_code == 200:
                return
            last = response.status_code
        except httpx2.TransportError as exc:
            last = exc
        time.sleep(0.1)
    raise AssertionError(f"{url} did not answer 200 within {timeout} s (last: {last!r})")


def upstream_oracle(path: Path) -> tuple[dict[str, dict[str, Any]], set[tuple[str, str, str]]]:
    """The reference file's graph (``helpers.upstream_oracle``) keyed by entity name, with the
    relations as a set of ``(from, to, relationType)`` triples."""
    entities, relations = shared_upstream_oracle(path)
    return {e["name"]: e for e in entities}, {(r["from"], r["to"], r["relationType"]) for r in relations}

