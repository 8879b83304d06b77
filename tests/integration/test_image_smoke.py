"""Smoke test of the image: metadata, non-root user, and the CLI inside it."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
UID = 10001


def _project_version() -> str:
    """The version as the source writes it (pyproject.toml reads it from the package: hatch's
    dynamic version)."""
    source = (REPO / "service" / "graph_memory" / "__init__.py").read_text(encoding="utf-8")
    found = re.search(r'^__version__ = "([^"]+)"$', source, re.MULTILINE)
    assert found, "no __version__ in graph_memory/__init__.py"
    return found.group(1)


def test_image_config(docker_client: Any, image: str) -> None:
    config = docker_client.images.get(image).attrs["Config"]
    assert config["User"] == f"{UID}:{UID}"
    assert config["Entrypoint"] == ["/usr/bin/tini", "--", "graph-memory"]
    assert not config.get("Cmd"), "no arguments: serve the transport from MEMORY_TRANSPORT (stdio)"
    assert "/data" in config["Volumes"]
    assert "MEMORY_FILE_PATH=/data/memory.db" in config["Env"]
    assert config["Healthcheck"]["Test"] == ["CMD", "graph-memory", "healthcheck"]


def test_version_on_a_read_only_root(docker_client: Any, image: str, volume: str) -> None:
    out = docker_client.containers.run(
        image,
        ["--version"],
        remove=True,
        read_only=True,
        tmpfs={"/tmp": ""},
        volumes={volume: {"bind": "/data", "mode": "rw"}},
    )
    assert out.decode().strip() == f"graph-memory {_project_version()}"


def test_server_runs_as_uid_10001(docker_client: Any, image: str, volume: str) -> None:
    # The stdio server (no arguments) stays up while its stdin is open.
    container = docker_client.containers.run(
        image,
        detach=True,
        stdin_open=True,
        tty=False,
        read_only=True,
        tmpfs={"/tmp": ""},
        volumes={volume: {"bind": "/data", "mode": "rw"}},
    )
    try:
        deadline = time.monotonic() + 30
        processes: list[list[str]] = []
        while time.monotonic() < deadline:
            container.reload()
            assert container.status in ("created", "running"), container.logs().decode()[-2000:]
            top = container.top(ps_args="-o pid,uid,gid,args")
            processes = top["Processes"] or []
            if any("graph-memory" in p[-1] and "tini" not in p[-1] for p in processes):
                break
            time.sleep(0.2)
        assert processes, "no process in the container"
        assert {(p[1], p[2]) for p in processes} == {(str(UID), str(UID))}, processes
        assert any(p[-1].startswith("/usr/bin/tini") for p in processes), processes
        # The server creates the database on the volume, owned by the same user.
        while True:
            stat = container.exec_run(["stat", "-c", "%u:%g %n", "/data", "/data/memory.db"])
            if stat.exit_code == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        assert stat.exit_code == 0, stat.output
        assert stat.output.decode().split("\n")[:2] == [f"{UID}:{UID} /data", f"{UID}:{UID} /data/memory.db"]
    finally:
        container.remove(force=True)
