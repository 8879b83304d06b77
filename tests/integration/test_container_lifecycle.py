"""The container's security and lifecycle: non-root on a read-only root filesystem, SIGTERM (what
``docker stop`` and Kubernetes send) stops it promptly with the database intact in both transports,
and a SIGKILL in the middle of a stream of writes loses no acknowledged write.
"""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
import time
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from .support import (
    DB,
    HARDENED,
    PY,
    SCHEMA_VERSION,
    UID,
    data_volume,
    database_state,
    json_lines,
    logs,
    published_port,
    started,
    stdio_server,
    wait_exit,
    wait_http,
)

STOP_WITHIN = 5.0
"""Seconds from SIGTERM to the container's exit (Docker's and Kubernetes' grace periods are 10 and
30 s; a memory server has nothing to flush that takes longer)."""

# Every process of the container with its real/effective uid and gid, from /proc.
PROCESSES = r'''
import json, os
rows = []
for pid in sorted(int(p) for p in os.listdir("/proc") if p.isdigit()):
    try:
        status = dict(l.split(":", 1) for l in open(f"/proc/{pid}/status").read().splitlines() if ":" in l)
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode().strip()
    except OSError:
        continue
    rows.append({"pid": pid, "uid": status["Uid"].split(), "gid": status["Gid"].split(), "cmd": cmd})
print(json.dumps(rows))
'''


def entity(name: str, *observations: str) -> dict[str, Any]:
    return {"name": name, "entityType": "thing", "observations": list(observations) or [f"{name} exists"]}


def test_non_root_on_a_read_only_root_filesystem(docker_client: Any, image: str, volume: str) -> None:
    with stdio_server(docker_client, image, volume) as session:
        session.initialize()
        session.call_tool("create_entities", {"entities": [entity("written-on-a-read-only-root")]})
        container = session.container
        container.reload()
        host_config = container.attrs["HostConfig"]
        assert host_config["ReadonlyRootfs"] is True
        assert host_config["Tmpfs"] == {"/tmp": ""}

        assert container.exec_run(["id", "-u"]).output.decode().strip() == str(UID)
        assert container.exec_run(["id", "-g"]).output.decode().strip() == str(UID)
        listing = container.exec_run([PY, "-c", PROCESSES])
        assert listing.exit_code == 0, listing.output
        processes = [p for p in json.loads(listing.output) if "-c" not in p["cmd"]]  # not the lister itself
        assert processes[0]["pid"] == 1 and processes[0]["cmd"].startswith("/usr/bin/tini -- graph-memory")
        assert any("graph-memory" in p["cmd"] and "tini" not in p["cmd"] for p in processes), processes
        for p in processes:
            assert p["uid"] == [str(UID)] * 4 and p["gid"] == [str(UID)] * 4, p

        # Writes: /data (the volume) and /tmp (tmpfs) work, the root filesystem refuses them —
        # for root too, so it is the read-only mount and not only file permissions.
        assert container.exec_run(["touch", "/data/probe", "/tmp/probe"]).exit_code == 0
        for path in ("/probe", "/etc/probe", "/opt/graph-memory/probe", "/opt/graph-memory/bin/probe"):
            as_user = container.exec_run(["touch", path])
            assert as_user.exit_code != 0, path
            as_root = container.exec_run(["touch", path], user="0")
            assert as_root.exit_code != 0, path
            assert b"Read-only file system" in as_root.output, as_root.output
        container.exec_run(["rm", "-f", "/data/probe"])

        # The image's HEALTHCHECK command works beside the running stdio server too.
        health = container.exec_run(["graph-memory", "healthcheck"])
        assert health.exit_code == 0, health.output
        assert health.output.decode() == f"ok: {DB} at schema version {SCHEMA_VERSION}\n"

        # Still serving after all that.
        found = session.call_tool("search_nodes", {"query": "read-only"})
        assert [e["name"] for e in found["entities"]] == ["written-on-a-read-only-root"]
        code = session.end()
        assert code == 0, session.stderr.decode("utf-8", "replace")
        assert [line for line in session.stderr_lines() if line["level"] in ("error", "critical")] == []

    assert database_state(docker_client, image, volume)["entities"] == 1


async def _open_session_then_sigterm(url: str, token: str, container: Any) -> tuple[int, float]:
    """Write through a handshake-era session, then SIGTERM the container while that session (and
    its standing GET stream) is still open; return (exit status, seconds to exit)."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, trust_env=False,
                                  timeout=httpx2.Timeout(30.0, read=300.0)) as http:
        client = Client(streamable_http_client(url, http_client=http), mode="legacy")
        await client.__aenter__()
        try:
            result = await client.call_tool("create_entities", {"entities": [entity("before-sigterm")]})
            assert not result.is_error, result.content
            await anyio.sleep(0.3)  # let the session's GET stream open
            container.kill(signal="SIGTERM")
            code, took = await anyio.to_thread.run_sync(wait_exit, container, STOP_WITHIN + 5)
        finally:
            with contextlib.suppress(Exception):  # the server is gone: closing the session may fail
                await client.__aexit__(None, None, None)
    return code, took


def test_sigterm_stops_http_mode_promptly_with_the_database_intact(
        docker_client: Any, image: str, volume: str) -> None:
    token = secrets.token_hex(16)
    env = {"MEMORY_TRANSPORT": "http", "MEMORY_HTTP_HOST": "0.0.0.0", "MEMORY_HTTP_TOKEN": token}
    with started(docker_client, image, environment=env, volumes=data_volume(volume),
                 ports={"8000/tcp": ("127.0.0.1", None)}, **HARDENED) as server:
        base = f"http://127.0.0.1:{published_port(server)}"
        wait_http(f"{base}/readyz", container=server)
        code, took = anyio.run(_open_session_then_sigterm, f"{base}/mcp", token, server)
        stdout, stderr = logs(server)

    assert took < STOP_WITHIN, f"took {took:.1f} s to stop"
    assert code == 0, stderr[-3000:]
    assert stdout == ""
    log = json_lines(stderr)
    events = [line["event"] for line in log]
    assert "http_stopping" in events and events[-1] == "server_stopped", events
    assert [line for line in log if line["level"] in ("error", "critical")] == []
    stats = database_state(docker_client, image, volume)
    assert stats["entities"] == 1


def test_sigterm_stops_stdio_mode_promptly_with_the_database_intact(
        docker_client: Any, image: str, volume: str) -> None:
    """A stdio server with an open session (stdin still open, as a connected client keeps it) and a
    committed write gets SIGTERM (`docker stop`): it exits at once, status 0, database intact."""
    with stdio_server(docker_client, image, volume) as session:
        session.initialize()
        session.call_tool("create_entities", {"entities": [entity("before-sigterm")]})
        session.container.kill(signal="SIGTERM")
        code, took = wait_exit(session.container, STOP_WITHIN + 5)
        session.wait_eof(10)
    assert took < STOP_WITHIN, f"took {took:.1f} s to stop (exit {code})"
    assert session.bad_lines == []
    stats = database_state(docker_client, image, volume)
    assert (stats["entities"], stats["observations"]) == (1, 1)
    # Exit status 0 and the clean-shutdown log, as in HTTP mode (a stop is not a failure).
    assert code == 0, f"exit {code} on SIGTERM; stderr:\n{session.stderr.decode('utf-8', 'replace')[-3000:]}"
    log = session.stderr_lines()
    assert [line["event"] for line in log][-1] == "server_stopped"
    assert [line for line in log if line["level"] in ("error", "critical")] == []


@pytest.mark.parametrize(("sig", "status"), [("SIGKILL", 137), ("SIGTERM", 0)])
def test_signal_mid_write_loses_no_acknowledged_write(
        docker_client: Any, image: str, volume: str, sig: str, status: int) -> None:
    """A client streams create_entities calls over stdio (several in flight at once); the container
    gets SIGKILL (a crash, OOM kill, node loss) or SIGTERM (docker stop) after enough of them were
    acknowledged. On restart every acknowledged batch is there, every batch is all-or-nothing,
    nothing unsent appears, and the database checks out. SIGTERM also stops it promptly, status 0."""
    batch_size, window, kill_after = 4, 8, 40

    def batch(i: int) -> list[dict[str, Any]]:
        return [entity(f"w{i:05d}-{j}", f"batch {i}", f"item {j}") for j in range(batch_size)]

    sent: dict[int, int] = {}  # request id -> batch number
    with stdio_server(docker_client, image, volume) as session:
        session.initialize()
        stop = threading.Event()

        def writer() -> None:
            i = 0
            with contextlib.suppress(AssertionError, OSError):
                while not stop.is_set():
                    sent[session.start_request("tools/call", {
                        "name": "create_entities", "arguments": {"entities": batch(i)}})] = i
                    if i >= window:  # at most `window` calls in flight
                        session.answer(next(r for r, b in sent.items() if b == i - window), timeout=30)
                    i += 1

        thread = threading.Thread(target=writer, name="writer", daemon=True)
        thread.start()

        def acknowledged() -> list[int]:
            return [sent[m["id"]] for m in list(session.messages)
                    if m.get("id") in sent and "result" in m and not m["result"].get("isError")]

        deadline = time.monotonic() + 60
        while len(acknowledged()) < kill_after:
            assert time.monotonic() < deadline and thread.is_alive(), session.stderr.decode("utf-8", "replace")
            time.sleep(0.01)
        session.container.kill(signal=sig)
        code, took = wait_exit(session.container, STOP_WITHIN + 5)
        stop.set()
        session.wait_eof(10)
        thread.join(30)
        assert not thread.is_alive()
        acked = set(acknowledged())
        attempted = set(sent.values())
    assert code == status, session.stderr.decode("utf-8", "replace")[-3000:]  # 137: it really was killed
    assert took < STOP_WITHIN
    assert session.bad_lines == []
    assert len(attempted) > len(acked), "the kill came after the last write: nothing was in flight"

    with stdio_server(docker_client, image, volume) as restarted:
        restarted.initialize()
        graph = restarted.call_tool("read_graph", {})
        assert restarted.end() == 0

    present: dict[int, set[str]] = {}
    for e in graph["entities"]:
        number = int(e["name"][1:6])
        present.setdefault(number, set()).add(e["name"])
        assert e["observations"] == [f"batch {number}", f"item {e['name'][-1]}"], e
    assert set(present) <= attempted, "entities of a batch that was never sent"
    missing = sorted(acked - set(present))
    assert missing == [], f"acknowledged batches lost after SIGKILL: {missing}"
    for number, members in present.items():
        assert members == {e["name"] for e in batch(number)}, f"batch {number} half-written: {sorted(members)}"
    stats = database_state(docker_client, image, volume)
    assert stats["entities"] == len(graph["entities"]) == batch_size * len(present)
