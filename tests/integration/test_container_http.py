"""HTTP mode in containers: probes, bearer token and the Docker HEALTHCHECK from the host through a
port published on 127.0.0.1; the Kubernetes pod topology (a client container in the server's
network namespace calling MCP over localhost) and the Host check that refuses /mcp on the pod IP.
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import httpx2

from .support import (
    HARDENED,
    LABEL,
    PY,
    SCHEMA_VERSION,
    SESSION_ID,
    data_volume,
    json_lines,
    logs,
    run,
    started,
    wait_exit,
    wait_for_log,
    wait_http,
)

INITIALIZE = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {},
               "clientInfo": {"name": "integration-test", "version": "0"}},
}
MCP_HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
FAST_HEALTHCHECK = {"interval": 500_000_000, "retries": 3}
"""The image's HEALTHCHECK (its command, timeout and start period are inherited: Docker merges an
empty ``Test`` with the image's), polled every 0.5 s instead of 30 s so the test need not wait."""


def http_env(token: str) -> dict[str, str]:
    return {"MEMORY_TRANSPORT": "http", "MEMORY_HTTP_HOST": "0.0.0.0", "MEMORY_HTTP_TOKEN": token}


def test_http_mode_probes_token_and_docker_healthcheck(docker_client: Any, image: str, volume: str) -> None:
    from testcontainers.core.container import DockerContainer
    from testcontainers.core.wait_strategies import HealthcheckWaitStrategy

    token = secrets.token_hex(16)
    server = DockerContainer(image, env=http_env(token)).with_volume_mapping(volume, "/data", "rw")
    # Published on the host's loopback only, as compose.yaml does (testcontainers' with_bind_ports
    # takes no host address; the docker SDK's (address, port) form goes through unchanged).
    server.ports["8000/tcp"] = ("127.0.0.1", None)  # type: ignore[assignment]
    hardened = {key: value for key, value in HARDENED.items() if key != "tmpfs"}
    server.with_tmpfs_mount("/tmp")
    server.with_kwargs(labels={LABEL: SESSION_ID}, healthcheck=FAST_HEALTHCHECK, **hardened)
    server.waiting_for(HealthcheckWaitStrategy().with_startup_timeout(60))
    with server:
        wrapped = server.get_wrapped_container()
        image_check = docker_client.images.get(image).attrs["Config"]["Healthcheck"]["Test"]
        assert wrapped.attrs["Config"]["Healthcheck"]["Test"] == image_check == ["CMD", "graph-memory", "healthcheck"]
        wrapped.reload()
        health = wrapped.attrs["State"]["Health"]
        assert health["Status"] == "healthy"
        assert health["Log"][-1]["ExitCode"] == 0
        assert health["Log"][-1]["Output"] == f"ok: /data/memory.db at schema version {SCHEMA_VERSION}\n"

        bindings = wrapped.attrs["NetworkSettings"]["Ports"]["8000/tcp"]
        assert [b["HostIp"] for b in bindings] == ["127.0.0.1"]
        base = f"http://127.0.0.1:{bindings[0]['HostPort']}"
        # The healthcheck probes the database, not the listener: wait for the port too.
        wait_http(f"{base}/healthz", container=wrapped)
        with httpx2.Client(base_url=base, timeout=10, trust_env=False) as http:
            healthz = http.get("/healthz")
            assert (healthz.status_code, healthz.text) == (200, "ok")
            readyz = http.get("/readyz")
            assert readyz.status_code == 200
            assert readyz.json() == {"status": "ready", "schemaVersion": SCHEMA_VERSION}

            missing = http.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS)
            assert missing.status_code == 401
            assert missing.headers["www-authenticate"].startswith("Bearer")
            wrong = http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "authorization": f"Bearer {token}x"})
            assert wrong.status_code == 401
            ok = http.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "authorization": f"Bearer {token}"})
            assert ok.status_code == 200, ok.text
            assert "mcp-session-id" in ok.headers

        def logged(lines: list[dict[str, Any]]) -> set[tuple[str, str, int]]:
            return {(r["method"], r["path"], r["status"]) for r in lines if r["event"] == "http_request"}

        wait_for_log(wrapped, lambda lines: logged(lines) >= {("POST", "/mcp", 401), ("POST", "/mcp", 200)})
        stdout, stderr = logs(wrapped)
        assert stdout == "", "HTTP mode must write nothing to stdout"
        assert token not in stderr
        listening = next(line for line in json_lines(stderr) if line["event"] == "http_listening")
        assert listening["addresses"] == ["0.0.0.0:8000"]
        assert [line for line in json_lines(stderr) if line["level"] in ("error", "critical")] == []


# A sidecar's client: the image's own venv (mcp SDK + httpx2), talking to localhost:8000 of the
# network namespace it shares with the server, as an agent container in the same pod would.
POD_CLIENT = r'''
import json, os, time, urllib.error, urllib.request

import anyio, httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

BASE = "http://localhost:8000"
TOKEN = os.environ["TOKEN"]
out = {}

deadline = time.monotonic() + 60
while True:  # a sidecar's client waits for readiness, as the kubelet's probe would
    try:
        with urllib.request.urlopen(BASE + "/readyz", timeout=2) as r:
            out["readyz"] = r.status
            break
    except (urllib.error.URLError, OSError):
        if time.monotonic() > deadline:
            raise
        time.sleep(0.2)

def status(path, token=None, host=None):
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}})
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if token:
        headers["authorization"] = "Bearer " + token
    request = urllib.request.Request(BASE + path, data=body.encode(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code

out["raw_without_token"] = status("/mcp")
out["raw_with_token"] = status("/mcp", TOKEN)

async def call(client, tool, arguments):
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content

async def main():
    async with httpx2.AsyncClient(headers={"Authorization": "Bearer " + TOKEN},
                                  timeout=httpx2.Timeout(30.0, read=300.0)) as http:
        async with Client(streamable_http_client(BASE + "/mcp", http_client=http), mode="legacy") as client:
            out["legacy_protocol"] = client.protocol_version
            out["created"] = await call(client, "create_entities", {"entities": [
                {"name": "agent", "entityType": "program", "observations": ["runs in the pod"]},
                {"name": "graph-memory", "entityType": "program", "observations": ["is the sidecar"]}]})
            out["related"] = await call(client, "create_relations", {"relations": [
                {"from": "agent", "to": "graph-memory", "relationType": "remembers_with"}]})
        async with Client(streamable_http_client(BASE + "/mcp", http_client=http)) as client:
            out["modern_protocol"] = client.protocol_version
            out["found"] = await call(client, "search_nodes", {"query": "sidecar"})
            out["graph"] = await call(client, "read_graph", {})
    try:
        async with httpx2.AsyncClient(timeout=10) as http:
            async with Client(streamable_http_client(BASE + "/mcp", http_client=http)) as client:
                await client.list_tools()
        out["without_token"] = "accepted"
    except BaseException as exc:
        out["without_token"] = type(exc).__name__

anyio.run(main)
print(json.dumps(out))
'''

# Another container on Docker's default bridge, addressing the server by its container IP (as
# anything addressing a pod by its IP does): probes pass, /mcp fails the Host check.
BRIDGE_PROBE = r'''
import json, os, urllib.error, urllib.request

BASE = "http://" + os.environ["SERVER_IP"] + ":8000"

def status(path, method="GET", token=None):
    data = None
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream"}
    if method == "POST":
        data = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}}).encode()
    if token:
        headers["authorization"] = "Bearer " + token
    request = urllib.request.Request(BASE + path, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code

print(json.dumps({
    "healthz": status("/healthz"),
    "readyz": status("/readyz"),
    "mcp_with_token": status("/mcp", "POST", os.environ["TOKEN"]),
    "mcp_without_token": status("/mcp", "POST"),
}))
'''


def test_pod_topology_client_in_the_server_network_namespace(docker_client: Any, image: str, volume: str) -> None:
    token = secrets.token_hex(16)
    with started(docker_client, image, environment=http_env(token), volumes=data_volume(volume),
                 **HARDENED) as server:
        # The agent container of the pod: same network namespace, so localhost is the server.
        client = run(docker_client, image, volume, ["-c", POD_CLIENT], entrypoint=[PY],
                     environment={"TOKEN": token}, network_mode=f"container:{server.id}", volumes={},
                     timeout=120)
        assert client.exit_code == 0, f"{client.stdout}\n{client.stderr}\nserver:\n{logs(server)[1][-3000:]}"
        out = json.loads(client.stdout.strip().splitlines()[-1])
        assert out["readyz"] == 200
        assert (out["raw_without_token"], out["raw_with_token"]) == (401, 200)
        assert out["legacy_protocol"] == "2025-11-25"
        assert out["modern_protocol"] == "2026-07-28"
        assert [e["name"] for e in out["created"]["entities"]] == ["agent", "graph-memory"]
        assert [e["name"] for e in out["found"]["entities"]] == ["graph-memory"]
        assert sorted(e["name"] for e in out["graph"]["entities"]) == ["agent", "graph-memory"]
        assert out["graph"]["relations"] == [{"from": "agent", "to": "graph-memory", "relationType": "remembers_with"}]
        assert out["without_token"] != "accepted"

        # From outside the pod, by the server's IP on the default bridge network.
        server.reload()
        server_ip = server.attrs["NetworkSettings"]["IPAddress"]
        assert server_ip, server.attrs["NetworkSettings"]
        probe = run(docker_client, image, volume, ["-c", BRIDGE_PROBE], entrypoint=[PY], volumes={},
                    environment={"SERVER_IP": server_ip, "TOKEN": token}).ok()
        statuses = json.loads(probe.stdout)
        assert statuses == {"healthz": 200, "readyz": 200, "mcp_with_token": 421, "mcp_without_token": 401}, statuses

        server.kill(signal="SIGTERM")
        code, _ = wait_exit(server, 15)
        assert code == 0
        stdout, stderr = logs(server)
        assert stdout == ""
        assert token not in stderr
        log = json_lines(stderr)
        requests = [line for line in log if line["event"] == "http_request"]
        assert any(r["path"] == "/mcp" and r["status"] == 421 and r["client"] != "127.0.0.1" for r in requests)
        assert [line for line in log if line["level"] in ("error", "critical")] == []
        assert log[-1]["event"] == "server_stopped"
