"""Container integration tests: the image built from the repository's Dockerfile, run in Docker.

Every test under tests/integration/ is marked ``integration``. When no Docker engine answers, they
are skipped with the reason (``-ra`` shows it in the summary); ``.ci/docker-setup.sh`` provides an
engine and the local base image on machines without one.

Image build, in order of preference:
- ``GRAPH_MEMORY_IMAGE=name:tag``: test that existing image, build nothing;
- the local base image ``graph-memory-base:bookworm`` (``GRAPH_MEMORY_BASE_IMAGE`` overrides)
  exists: build on it with the offline path (wheels built on the host into the git-ignored
  ``wheelhouse/``, ``PIP_NO_INDEX=1``, ``PIP_FIND_LINKS=/wheels``) - no registry, no PyPI in the build;
- else: the Dockerfile's default base (python:*-slim) from a registry, pip from PyPI.
The image is built once per session, tagged ``graph-memory:integration-test`` and kept (the build
cache makes the next session's build fast; testcontainers' cleanup would remove by image id, which
also drops any other tag on the same id).
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from .support import LABEL, SESSION_ID

# Ryuk's image cannot be pulled on machines without a registry; the fixtures clean up themselves.
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

REPO = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
BASE_IMAGE = os.environ.get("GRAPH_MEMORY_BASE_IMAGE", "graph-memory-base:bookworm")
TEST_TAG = "graph-memory:integration-test"
UID = 10001


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in Path(item.path).resolve().parents:
            item.add_marker(pytest.mark.integration)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[Any]:
    """A Docker SDK client whose engine answers; skips the test when there is none."""
    try:
        import docker
    except ImportError as exc:  # pragma: no cover - the test extra installs it
        pytest.skip(f"container tests skipped: docker SDK not installed ({exc})")
    try:
        client = docker.from_env(timeout=30)
        client.ping()
    except Exception as exc:
        pytest.skip(
            f"container tests skipped: no Docker engine answers ({type(exc).__name__}: {exc}); "
            "run .ci/docker-setup.sh to provide one"
        )
    yield client
    client.close()


def _image_exists(client: Any, name: str) -> bool:
    import docker.errors

    try:
        client.images.get(name)
    except docker.errors.ImageNotFound:
        return False
    return True


@pytest.fixture(scope="session")
def wheelhouse() -> Path:
    """The project and its dependencies, with the ``postgres`` extra the image installs (plus the
    build backend), as wheels in REPO/wheelhouse/.

    Built on the host with this interpreter's pip, so the image build needs no network. hatchling
    is included because pip builds the project's wheel inside the image in an isolated build
    environment, which must find the build backend in the wheelhouse too.
    """
    target = REPO / "wheelhouse"
    cmd = [sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(target), ".[postgres]", "hatchling"]
    result = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600, check=False)
    if result.returncode != 0:
        if any(target.glob("*.whl")):  # offline, but a previous run left wheels: use them
            print(f"pip wheel failed; using the existing {target}:\n{result.stderr[-2000:]}", file=sys.stderr)
        else:
            pytest.fail(f"could not build the wheelhouse ({' '.join(cmd)}):\n{result.stderr[-4000:]}")
    return target


@pytest.fixture(scope="session")
def image(docker_client: Any, request: pytest.FixtureRequest) -> str:
    """Tag of the graph-memory image under test (built once per session)."""
    prebuilt = os.environ.get("GRAPH_MEMORY_IMAGE")
    if prebuilt:
        if not _image_exists(docker_client, prebuilt):
            pytest.fail(f"GRAPH_MEMORY_IMAGE={prebuilt} does not exist in the engine")
        return prebuilt

    import docker.errors
    from testcontainers.core.image import DockerImage

    buildargs: dict[str, str] = {}
    if _image_exists(docker_client, BASE_IMAGE):
        request.getfixturevalue("wheelhouse")
        buildargs = {"PYTHON_IMAGE": BASE_IMAGE, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": "/wheels"}
    else:
        default_base = _dockerfile_default_base()
        if not _image_exists(docker_client, default_base):
            try:
                docker_client.images.pull(default_base)
            except docker.errors.APIError as exc:
                pytest.skip(
                    f"container tests skipped: neither {BASE_IMAGE} nor {default_base} is available "
                    f"({exc.explanation}); run .ci/docker-setup.sh to build the local base image"
                )
    try:
        built = DockerImage(path=REPO, tag=TEST_TAG, clean_up=False, buildargs=buildargs, rm=True, forcerm=True)
        built.build()
    except docker.errors.BuildError as exc:
        log = "".join(str(chunk.get("stream", chunk.get("error", ""))) for chunk in exc.build_log)
        pytest.fail(f"docker build failed ({exc.msg}); build args {buildargs}:\n{log[-6000:]}")
    # Untagged leftovers of this and earlier builds (builder stage, the previous test image).
    try:
        docker_client.images.prune(filters={"dangling": True, "label": "org.opencontainers.image.title=graph-memory"})
    except docker.errors.APIError as exc:
        print(f"could not prune old graph-memory images: {exc}", file=sys.stderr)
    return TEST_TAG


def _dockerfile_default_base() -> str:
    for line in (REPO / "Dockerfile").read_text(encoding="utf-8").splitlines():
        if line.startswith("ARG PYTHON_IMAGE="):
            return line.split("=", 1)[1].strip()
    raise AssertionError("Dockerfile has no `ARG PYTHON_IMAGE=` default")


@pytest.fixture(scope="session", autouse=True)
def _remove_leftover_containers() -> Iterator[None]:
    """Safety net: every container the tests create carries ``LABEL=SESSION_ID`` and is removed by
    the test itself; whatever a crashed cleanup left behind is removed (with its anonymous
    volumes) when the session ends."""
    yield
    try:
        import docker

        client = docker.from_env(timeout=30)
        leftovers = client.containers.list(all=True, filters={"label": f"{LABEL}={SESSION_ID}"})
    except Exception:  # no engine: nothing was created
        return
    for container in leftovers:
        print(f"removing leftover container {container.name}", file=sys.stderr)
        try:
            container.remove(force=True, v=True)
        except Exception as exc:
            print(f"could not remove {container.name}: {exc}", file=sys.stderr)
    client.close()


@pytest.fixture
def volume(docker_client: Any) -> Iterator[str]:
    """A fresh named volume (removed afterwards); mount it at /data."""
    name = f"graph-memory-it-{uuid.uuid4().hex[:12]}"
    docker_client.volumes.create(name)
    yield name
    try:
        docker_client.volumes.get(name).remove(force=True)
    except Exception as exc:  # a container still using it is the test's bug; report, don't mask
        print(f"could not remove volume {name}: {exc}", file=sys.stderr)
