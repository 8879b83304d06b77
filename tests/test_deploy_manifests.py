"""Offline checks of the deployment artifacts: Kubernetes manifests, compose.yaml, Dockerfile.

Every manifest under deploy/ is validated against the Kubernetes OpenAPI schemas shipped with
kubernetes-validate (strict: unknown fields fail), for the oldest version we support (1.29: native
sidecars on by default) and the newest the library knows. The properties the deployment relies on
(single writer, probes, hardening, token from a Secret, loopback-only compose port) are asserted.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

kubernetes_validate = pytest.importorskip("kubernetes_validate")
from kubernetes_validate import utils as kv_utils  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
UID = 10001
SERVER_IMAGE = "graph-memory"

# 1.29: native sidecars (init container restartPolicy: Always) beta and on by default; GA in 1.33.
K8S_VERSIONS = sorted({"1.29.0", "1.33.0", kv_utils.latest_version()}, key=lambda v: tuple(map(int, v.split("."))))


def _manifest_files() -> list[Path]:
    return sorted(p for p in DEPLOY.rglob("*.y*ml") if p.name not in ("kustomization.yaml", "kustomization.yml"))


def _kustomizations() -> list[Path]:
    return sorted(DEPLOY.rglob("kustomization.yaml"))


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]


def _all_docs() -> list[tuple[Path, dict[str, Any]]]:
    return [(p, d) for p in _manifest_files() for d in _docs(p)]


def _find(kind: str, name: str, folder: str) -> dict[str, Any]:
    found = [
        d for p, d in _all_docs() if p.parent.name == folder and d["kind"] == kind and d["metadata"]["name"] == name
    ]
    assert len(found) == 1, f"expected one {kind}/{name} in deploy/{folder}, found {len(found)}"
    return found[0]


def _env(container: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {e["name"]: e for e in container.get("env", [])}


def _server_containers(pod_spec: dict[str, Any]) -> list[dict[str, Any]]:
    all_containers = pod_spec.get("initContainers", []) + pod_spec.get("containers", [])
    return [c for c in all_containers if c["image"].split(":")[0].rsplit("/", 1)[-1] == SERVER_IMAGE]


# --- schema validation ---------------------------------------------------------------------------


def test_deploy_tree_has_manifests() -> None:
    assert {p.parent.name for p in _kustomizations()} >= {"sidecar", "standalone"}
    assert len(_all_docs()) >= 5


@pytest.mark.parametrize("version", K8S_VERSIONS)
@pytest.mark.parametrize("path", _manifest_files(), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_manifest_is_valid_kubernetes(path: Path, version: str) -> None:
    docs = _docs(path)
    assert docs, f"{path} holds no document"
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            where = "/".join(str(p) for p in exc.path)
            pytest.fail(
                f"{path.relative_to(REPO)} {doc.get('kind')}/{doc['metadata'].get('name')} "
                f"invalid for Kubernetes {version} at {where}: {exc.message}"
            )


@pytest.mark.parametrize("kustomization", _kustomizations(), ids=lambda p: p.parent.name)
def test_kustomization_lists_every_manifest(kustomization: Path) -> None:
    k = yaml.safe_load(kustomization.read_text(encoding="utf-8"))
    assert k["apiVersion"] == "kustomize.config.k8s.io/v1beta1"
    assert k["kind"] == "Kustomization"
    listed = {(kustomization.parent / r).resolve() for r in k.get("resources", [])}
    for r in listed:
        assert r.exists(), f"{kustomization} lists a missing resource {r}"
    here = {p.resolve() for p in _manifest_files() if p.parent == kustomization.parent}
    assert here <= listed, f"manifests not in {kustomization}: {sorted(map(str, here - listed))}"
    assert [i["name"] for i in k.get("images", [])] == [SERVER_IMAGE]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed (kustomize render check)")
@pytest.mark.parametrize("kustomization", _kustomizations(), ids=lambda p: p.parent.name)
def test_kustomize_renders_valid_manifests(kustomization: Path) -> None:
    result = subprocess.run(
        ["kubectl", "kustomize", str(kustomization.parent)], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    docs = [d for d in yaml.safe_load_all(result.stdout) if d]
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, kv_utils.latest_version(), strict=True)
        for c in _server_containers(doc.get("spec", {}).get("template", {}).get("spec", {})):
            assert ":" in c["image"], f"kustomize did not pin the image tag: {c['image']}"


# --- properties the deployment relies on ---------------------------------------------------------


def _assert_hardened(pod_spec: dict[str, Any], where: str) -> None:
    pod_sc = pod_spec.get("securityContext", {})
    assert pod_sc.get("runAsNonRoot") is True, where
    assert pod_sc.get("runAsUser") == UID, where
    assert pod_sc.get("fsGroup") == UID, where
    assert pod_spec.get("automountServiceAccountToken") is False, where
    for c in pod_spec.get("initContainers", []) + pod_spec["containers"]:
        sc = c.get("securityContext", {})
        assert sc.get("runAsNonRoot", pod_sc.get("runAsNonRoot")) is True, f"{where}/{c['name']}"
        assert sc.get("readOnlyRootFilesystem") is True, f"{where}/{c['name']}"
        assert sc.get("allowPrivilegeEscalation") is False, f"{where}/{c['name']}"
        assert sc.get("capabilities", {}).get("drop") == ["ALL"], f"{where}/{c['name']}"
        res = c.get("resources", {})
        assert {"cpu", "memory"} <= set(res.get("requests", {})), f"{where}/{c['name']} requests"
        assert {"cpu", "memory"} <= set(res.get("limits", {})), f"{where}/{c['name']} limits"


def _assert_server_container(c: dict[str, Any], pod_spec: dict[str, Any], where: str) -> None:
    env = _env(c)
    assert env["MEMORY_TRANSPORT"]["value"] == "http", where
    assert env["MEMORY_HTTP_HOST"]["value"] == "0.0.0.0", where  # kubelet probes hit the pod IP
    assert env["MEMORY_HTTP_PORT"]["value"] == "8000", where
    allowed = [h.strip() for h in env["MEMORY_ALLOWED_HOSTS"]["value"].split(",")]
    assert {"localhost:*", "127.0.0.1:*"} <= set(allowed), where
    assert c["securityContext"].get("runAsUser", pod_spec["securityContext"]["runAsUser"]) == UID
    assert [p["containerPort"] for p in c["ports"]] == [8000]
    port = c["ports"][0]["name"]
    assert c["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port}, where
    assert c["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port}, where
    assert c["startupProbe"]["httpGet"]["path"] == "/readyz", where
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    assert "/data" in mounts and "/tmp" in mounts, where
    volumes = {v["name"]: v for v in pod_spec.get("volumes", [])}
    assert "emptyDir" in volumes[mounts["/tmp"]], where
    assert env.get("MEMORY_FILE_PATH", {}).get("value", "/data/memory.db").startswith("/data/")


def test_sidecar_is_a_native_sidecar_with_a_single_writer() -> None:
    dep = _find("Deployment", "agent", "sidecar")
    # one writer per database file: one replica, and the old pod gone before the new one starts
    assert dep["spec"]["replicas"] == 1
    assert dep["spec"]["strategy"] == {"type": "Recreate"}
    text = (DEPLOY / "sidecar" / "deployment.yaml").read_text(encoding="utf-8")
    assert re.search(r"#.*SQLite", text) and re.search(r"#.*ReadWriteOnce", text), "the why-comment is missing"

    pod = dep["spec"]["template"]["spec"]
    _assert_hardened(pod, "sidecar")
    servers = _server_containers(pod)
    assert len(servers) == 1
    (server,) = servers
    assert server in pod["initContainers"], "graph-memory must be a native sidecar (init container)"
    assert server["restartPolicy"] == "Always"
    _assert_server_container(server, pod, "sidecar")

    agents = pod["containers"]
    assert agents and all(c not in servers for c in agents)
    assert _env(agents[0])["MEMORY_URL"]["value"] == "http://localhost:8000/mcp"

    # nothing outside the pod reaches the (token-less) sidecar
    policy = _find("NetworkPolicy", "agent-deny-ingress", "sidecar")
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= dep["spec"]["template"]["metadata"]["labels"].items()
    assert policy["spec"]["policyTypes"] == ["Ingress"] and policy["spec"]["ingress"] == []

    data_volume = next(v for v in pod["volumes"] if v["name"] == "data")
    pvc = _find("PersistentVolumeClaim", data_volume["persistentVolumeClaim"]["claimName"], "sidecar")
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"]


def test_standalone_statefulset_service_and_token() -> None:
    sts = _find("StatefulSet", "graph-memory", "standalone")
    assert sts["spec"]["replicas"] == 1
    pod = sts["spec"]["template"]["spec"]
    _assert_hardened(pod, "standalone")
    (server,) = _server_containers(pod)
    assert server in pod["containers"]
    _assert_server_container(server, pod, "standalone")

    token = _env(server)["MEMORY_HTTP_TOKEN"]
    assert "value" not in token, "the token must never be written into a manifest"
    assert set(token["valueFrom"]["secretKeyRef"]) >= {"name", "key"}
    assert not [d for _, d in _all_docs() if d["kind"] == "Secret"], "no Secret (and no token) in git"

    (claim,) = sts["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert {m["name"] for m in server["volumeMounts"] if m["mountPath"] == "/data"} == {"data"}

    labels = sts["spec"]["template"]["metadata"]["labels"]
    headless = _find("Service", sts["spec"]["serviceName"], "standalone")
    assert headless["spec"]["clusterIP"] == "None"
    service = _find("Service", "graph-memory", "standalone")
    for svc in (service, headless):
        assert svc["spec"]["selector"].items() <= labels.items()
        (port,) = svc["spec"]["ports"]
        assert port["port"] == 8000 and port["targetPort"] == server["ports"][0]["name"]
    # clients in other pods reach it through the Service's names: those must pass the Host check
    allowed = _env(server)["MEMORY_ALLOWED_HOSTS"]["value"].split(",")
    assert "graph-memory:*" in allowed and "graph-memory.$(POD_NAMESPACE).svc:*" in allowed
    names = [e["name"] for e in server["env"]]
    assert names.index("POD_NAMESPACE") < names.index("MEMORY_ALLOWED_HOSTS")  # $(VAR) needs it defined first


# --- compose.yaml ------------------------------------------------------------------------------------


def test_compose_serves_http_on_loopback_with_a_named_volume() -> None:
    compose = yaml.safe_load((REPO / "compose.yaml").read_text(encoding="utf-8"))
    svc = compose["services"]["graph-memory"]
    assert svc["build"]["context"] == "."
    assert svc["ports"] == ["127.0.0.1:8000:8000"], "publish on the host's loopback only"
    env = svc["environment"]
    assert env["MEMORY_TRANSPORT"] == "http"
    assert env["MEMORY_HTTP_HOST"] == "0.0.0.0"
    assert env["MEMORY_HTTP_PORT"] == "8000"
    assert re.fullmatch(r"\$\{MEMORY_HTTP_TOKEN(:?\?.*)?\}", env["MEMORY_HTTP_TOKEN"]), "token comes from the env"
    (volume,) = svc["volumes"]
    name, target = volume.split(":")[:2]
    assert target == "/data"
    assert name in compose["volumes"], "a named volume, not a bind mount"
    assert svc["read_only"] is True and "/tmp" in svc["tmpfs"]


# --- Dockerfile and .dockerignore agree with the manifests ------------------------------------------


def test_dockerfile_contract() -> None:
    text = (REPO / "Dockerfile").read_text(encoding="utf-8")
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.\d+-slim$", text, re.M)
    assert re.search(r"^USER 10001:10001$", text, re.M), "uid must match runAsUser in deploy/"
    assert "MEMORY_FILE_PATH=/data/memory.db" in text
    assert re.search(r"^VOLUME /data$", text, re.M)
    assert re.search(r'^HEALTHCHECK .*\n?.*CMD \["graph-memory", "healthcheck"\]', text, re.M)
    assert re.search(r'^ENTRYPOINT \["/usr/bin/tini", "--", "graph-memory"\]$', text, re.M)
    assert text.index("chown 10001:10001 /data") < text.index("VOLUME /data"), "chown after VOLUME is lost"


def test_cli_has_the_commands_the_image_relies_on() -> None:
    cli = pytest.importorskip("graph_memory.cli")
    parser = cli.build_parser()
    with pytest.raises(SystemExit) as exc:
        parser.parse_args(["--version"])
    assert exc.value.code == 0
    assert parser.parse_args(["healthcheck"]).handler is not None


def test_dockerignore_keeps_the_context_small() -> None:
    lines = [ln.strip() for ln in (REPO / ".dockerignore").read_text(encoding="utf-8").splitlines()]
    rules = [ln for ln in lines if ln and not ln.startswith("#")]
    assert rules[0] == "*", "allowlist: everything is ignored unless re-included"
    assert {"!pyproject.toml", "!service/", "!migrations/", "!wheelhouse/"} <= set(rules)
    assert "**/*.db" in rules and "**/__pycache__" in rules


def test_replicas_share_postgres_with_the_url_and_password_from_secrets() -> None:
    dep = _find("Deployment", "graph-memory", "replicas")
    assert dep["spec"]["replicas"] > 1
    pod = dep["spec"]["template"]["spec"]
    _assert_hardened(pod, "replicas")
    (server,) = pod["containers"]
    env = _env(server)
    assert set(env["MEMORY_DATABASE_URL"]["valueFrom"]["secretKeyRef"]) >= {"name", "key"}
    assert "value" not in env["MEMORY_DATABASE_URL"] and "value" not in env["MEMORY_HTTP_TOKEN"]
    assert env["MEMORY_DATABASE_PASSWORD_FILE"]["value"].startswith("/run/secrets/")
    assert server["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert not any("persistentVolumeClaim" in v for v in pod["volumes"]), "the memory lives in PostgreSQL"
    service = _find("Service", "graph-memory", "replicas")
    assert service["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
