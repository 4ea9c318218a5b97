"""The files in deploy/ run as shipped: every manifest passes a schema check, one image name per
image, the agent's shipped configuration starts every collector (the hook listener included,
reached over TCP as a pod would), the systemd units give the agent /run/reflex, and /dev/kmsg
is readable under the DaemonSet's security context.

Manifests are checked twice: always by the structural check below (kinds, known keys, names
that refer to each other), and also by ``kubernetes-validate`` (the Kubernetes OpenAPI schemas,
offline) when it is installed: on PATH, or where ``REFLEX_KUBE_VALIDATE`` points, or in
``~/.cache/reflex/tools-venv`` (``python3.11 -m venv ~/.cache/reflex/tools-venv &&
~/.cache/reflex/tools-venv/bin/pip install kubernetes-validate``). Units are checked with
``systemd-analyze verify`` where it exists, else against the keys they may use.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

import pytest
from yaml_subset import load_all

from reflex_localize.collectors.hook_receiver import build as build_hook
from reflex_localize.collectors.hook_socket import TcpSink
from reflex_localize.collectors.settings import COLLECTOR_NAMES, CollectSettings
from reflex_localize.influx.config import Identity, section_as

REPO = Path(__file__).resolve().parents[1]
DEPLOY = REPO / "deploy"
MANIFESTS = sorted(DEPLOY.glob("*.yaml"))
UNITS = sorted([*DEPLOY.glob("*.service"), *DEPLOY.glob("*.timer")])
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
IMAGES = {
    "agent.Containerfile": f"registry.example.internal/reflex-agent:{VERSION}",
    "flow.Containerfile": f"registry.example.internal/reflex-flow:{VERSION}",
}
HOOK_PORT = 9103

# ---- the structural check ---------------------------------------------------------------------

_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_KEYS = {
    "metadata": {"name", "namespace", "labels", "annotations"},
    "container": {"name", "image", "command", "args", "env", "ports", "livenessProbe",
                  "readinessProbe", "startupProbe", "securityContext", "resources",
                  "volumeMounts", "workingDir", "imagePullPolicy"},
    "pod": {"containers", "volumes", "nodeSelector", "tolerations", "priorityClassName",
            "hostNetwork", "hostPID", "runtimeClassName", "securityContext", "restartPolicy",
            "terminationGracePeriodSeconds", "serviceAccountName", "dnsPolicy"},
    "securityContext": {"privileged", "capabilities", "readOnlyRootFilesystem",
                        "allowPrivilegeEscalation", "runAsNonRoot", "runAsUser", "runAsGroup",
                        "fsGroup", "seccompProfile"},
    "env": {"name", "value", "valueFrom"},
    "volumeMount": {"name", "mountPath", "readOnly", "subPath"},
    "volume": {"name", "configMap", "secret", "hostPath", "emptyDir", "persistentVolumeClaim"},
    "port": {"name", "containerPort", "protocol", "hostPort"},
}  # fmt: skip
_FIELD_PATHS = re.compile(
    r"metadata\.(name|namespace|uid)|metadata\.labels\['[^']+'\]|spec\.nodeName|"
    r"spec\.serviceAccountName|status\.(hostIP|hostIPs|podIP|podIPs)"
)
_WORKLOADS = {("apps/v1", "DaemonSet"), ("apps/v1", "StatefulSet"), ("batch/v1", "Job")}
_KINDS = {("v1", "ConfigMap"), ("v1", "Service"), *_WORKLOADS}


def structural_problems(doc: dict[str, Any]) -> list[str]:
    """What is wrong with one manifest, as the API server or the kubelet would refuse it."""
    problems: list[str] = []
    kind = (doc.get("apiVersion"), doc.get("kind"))
    if kind not in _KINDS:
        return [f"unknown apiVersion/kind {kind}"]
    meta = doc.get("metadata") or {}
    problems += _unknown(meta, "metadata")
    if not _NAME.fullmatch(str(meta.get("name", ""))):
        problems.append(f"metadata.name {meta.get('name')!r}")
    if kind == ("v1", "ConfigMap"):
        problems += [f"data.{k} is not a string" for k, v in doc["data"].items()
                     if not isinstance(v, str)]  # fmt: skip
    if kind in _WORKLOADS:
        problems += _workload_problems(doc)
    return problems


def _workload_problems(doc: dict[str, Any]) -> list[str]:
    spec, problems = doc["spec"], []
    template = spec["template"]
    labels = (template.get("metadata") or {}).get("labels") or {}
    wanted = (spec.get("selector") or {}).get("matchLabels") or {}
    if any(labels.get(k) != v for k, v in wanted.items()):
        problems.append(f"selector {wanted} does not match the template's labels {labels}")
    pod = template["spec"]
    problems += _unknown(pod, "pod")
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for volume in volumes.values():
        problems += _unknown(volume, "volume")
    claims = {c["metadata"]["name"] for c in spec.get("volumeClaimTemplates", [])}
    for container in pod["containers"]:
        problems += _container_problems(container, volumes, claims)
    return problems


def _container_problems(
    container: dict[str, Any], volumes: dict[str, Any], claims: set[str]
) -> list[str]:
    name = container.get("name", "?")
    problems = [f"{name}: {p}" for p in _unknown(container, "container")]
    if not container.get("image"):
        problems.append(f"{name}: no image")
    ports = container.get("ports", [])
    port_names = [p.get("name") for p in ports if p.get("name")]
    for port in ports:
        problems += _unknown(port, "port")
        if not isinstance(port.get("containerPort"), int):
            problems.append(f"{name}: containerPort {port.get('containerPort')!r}")
    if len(set(port_names)) != len(port_names) or any(len(n) > 15 for n in port_names):
        problems.append(f"{name}: port names {port_names}")
    for probe in ("livenessProbe", "readinessProbe", "startupProbe"):
        port = ((container.get(probe) or {}).get("httpGet") or {}).get("port")
        if isinstance(port, str) and port not in port_names:
            problems.append(f"{name}: {probe} names no port of the container: {port}")
    defined: set[str] = set()
    for variable in container.get("env", []):
        problems += _unknown(variable, "env")
        if ("value" in variable) == ("valueFrom" in variable):
            problems.append(f"{name}: env {variable.get('name')}: one of value, valueFrom")
        path = ((variable.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath")
        if path is not None and not _FIELD_PATHS.fullmatch(path):
            problems.append(f"{name}: env {variable['name']}: fieldPath {path!r}")
        for ref in re.findall(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", str(variable.get("value", ""))):
            if ref not in defined:
                problems.append(f"{name}: env {variable['name']} uses $({ref}) before it is set")
        defined.add(variable["name"])
    security = container.get("securityContext") or {}
    problems += _unknown(security, "securityContext")
    if security.get("privileged") and security.get("allowPrivilegeEscalation") is False:
        problems.append(f"{name}: privileged with allowPrivilegeEscalation false (refused)")
    for mount in container.get("volumeMounts", []):
        problems += _unknown(mount, "volumeMount")
        if mount["name"] not in volumes and mount["name"] not in claims:
            problems.append(f"{name}: mounts {mount['name']!r}, which is no volume")
        host = (volumes.get(mount["name"]) or {}).get("hostPath") or {}
        if host.get("type") == "CharDevice" and not security.get("privileged"):
            # The device cgroup admits only the runtime's default devices: open() gets EPERM.
            problems.append(f"{name}: {host['path']} needs privileged (device cgroup)")
    return problems


def _unknown(obj: dict[str, Any], what: str) -> list[str]:
    return [f"unknown {what} key {key!r}" for key in obj if key not in _KEYS[what]]


def external_validator() -> list[str] | None:
    """The command line of kubernetes-validate, where one is installed."""
    candidates = [
        os.environ.get("REFLEX_KUBE_VALIDATE", ""),
        shutil.which("kubernetes-validate") or "",
        str(Path.home() / ".cache/reflex/tools-venv/bin/kubernetes-validate"),
    ]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return [candidate, "--strict"]
    return None


# ---- the tests ---------------------------------------------------------------------------------


def manifests() -> dict[str, list[dict[str, Any]]]:
    return {path.name: load_all(path.read_text()) for path in MANIFESTS}


def test_the_structural_check_finds_what_kubernetes_refuses() -> None:
    daemonset = manifests()["reflex-collect-daemonset.yaml"][1]
    container = daemonset["spec"]["template"]["spec"]["containers"][0]
    assert not structural_problems(daemonset)
    mounts = [*container["volumeMounts"], {"name": "nope", "mountPath": "/x"}]
    broken = {**container, "imagee": "x", "volumeMounts": mounts}
    broken["securityContext"] = {"allowPrivilegeEscalation": False}  # not privileged
    pod = {**daemonset["spec"]["template"]["spec"], "containers": [broken]}
    bad = {**daemonset, "spec": {**daemonset["spec"], "template": {
        **daemonset["spec"]["template"], "spec": pod}}}  # fmt: skip
    found = "\n".join(structural_problems(bad))
    assert "unknown container key 'imagee'" in found
    assert "mounts 'nope', which is no volume" in found
    assert "/dev/kmsg needs privileged" in found


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_every_manifest_passes_the_schema_check(path: Path) -> None:
    docs = load_all(path.read_text())
    assert docs
    for doc in docs:
        assert not structural_problems(doc), (doc["kind"], structural_problems(doc))
    command = external_validator()
    if command is not None:  # the Kubernetes OpenAPI schemas as well
        done = subprocess.run([*command, str(path)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr


def images_of(docs: list[dict[str, Any]]) -> set[str]:
    return {
        container["image"]
        for doc in docs
        if "template" in doc.get("spec", {})
        for container in doc["spec"]["template"]["spec"]["containers"]
    }


def test_one_image_name_across_containerfiles_and_manifests() -> None:
    found = manifests()
    assert images_of(found["reflex-collect-daemonset.yaml"]) == {IMAGES["agent.Containerfile"]}
    assert images_of(found["reflex-flow-statefulset.yaml"]) == {IMAGES["flow.Containerfile"]}
    for name, image in IMAGES.items():
        tags = set(re.findall(r"-t (\S+) \.", (DEPLOY / name).read_text()))
        assert tags == {image}, (name, tags)


def daemonset_config() -> dict[str, Any]:
    configmap = manifests()["reflex-collect-daemonset.yaml"][0]
    return tomllib.loads(configmap["data"]["collect.toml"])


@pytest.mark.parametrize("where", ["daemonset", "collect.toml"])
def test_the_shipped_configs_start_every_collector(where: str) -> None:
    raw = daemonset_config() if where == "daemonset" else tomllib.loads(
        (DEPLOY / "collect.toml").read_text())  # fmt: skip
    settings = section_as(raw["collect"], CollectSettings, where="[collect]")
    assert settings.enabled == COLLECTOR_NAMES
    assert settings.hook_socket == "/run/reflex/hook.sock"


def test_the_agent_with_the_daemonset_config_opens_the_hook_listener(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The DaemonSet's own settings, but for two paths of this machine: the socket in a
    temporary folder, and the TCP address on loopback (it is the node's address there)."""
    daemonset = manifests()["reflex-collect-daemonset.yaml"][1]
    container = daemonset["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["HOST_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP"
    assert env["REFLEX_HOOK_ADDRESS"]["value"] == f"$(HOST_IP):{HOOK_PORT}"
    assert daemonset["spec"]["template"]["spec"]["hostNetwork"] is True
    pod = manifests()["training-pod-example.yaml"][0]["spec"]["template"]["spec"]
    pod_env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert pod_env["REFLEX_HOOK_ADDRESS"]["value"] == f"$(HOST_IP):{HOOK_PORT}"
    assert "volumes" not in pod  # no host mount

    raw = daemonset_config()["collect"]
    raw["hook_socket"] = str(tmp_path / "hook.sock")
    monkeypatch.setenv("REFLEX_HOOK_ADDRESS", "127.0.0.1:0")
    settings = section_as(raw, CollectSettings, where="[collect]")
    receiver = build_hook(Identity(cluster="train-a", node="gpu-7"), settings)
    receiver.start_background(lambda points: None)
    try:
        assert receiver.tcp_port and Path(settings.hook_socket).is_socket()
        line = "train_step,cluster=c,job=j,node=n,rank=0 step=1i 1700000000000000000"
        assert TcpSink(f"127.0.0.1:{receiver.tcp_port}").send_lines([line], 0) == 1
        assert receiver.wait_for(1)
        assert [p.tags["node"] for p in receiver.collect(0)] == ["gpu-7"]
    finally:
        receiver.stop_background()


def test_dev_kmsg_is_readable_under_the_daemonsets_security_context() -> None:
    pod = manifests()["reflex-collect-daemonset.yaml"][1]["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    container = pod["containers"][0]
    kmsg = [m for m in container["volumeMounts"] if m["mountPath"] == "/dev/kmsg"]
    assert kmsg and volumes[kmsg[0]["name"]]["hostPath"]["type"] == "CharDevice"
    assert container["securityContext"]["privileged"] is True  # the device cgroup admits it
    assert "kmsg_path = \"/dev/kmsg\"" in manifests()["reflex-collect-daemonset.yaml"][0][
        "data"]["collect.toml"]  # fmt: skip


def test_the_flow_is_a_statefulset_with_its_recovery_volume() -> None:
    docs = {d["kind"]: d for d in manifests()["reflex-flow-statefulset.yaml"]}
    spec = docs["StatefulSet"]["spec"]
    container = spec["template"]["spec"]["containers"][0]
    out = re.search(r"--out (\S+)", " ".join(container["args"]))
    assert out is not None and "--source influx" in " ".join(container["args"])
    claims = {c["metadata"]["name"] for c in spec["volumeClaimTemplates"]}
    mounted = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    assert mounted[out.group(1)] in claims
    assert spec["podManagementPolicy"] == "Parallel"
    assert docs["Service"]["spec"]["clusterIP"] == "None"


def unit(path: Path) -> dict[str, list[str]]:
    keys: dict[str, list[str]] = {}
    for line in path.read_text().splitlines():
        if "=" in line and not line.startswith(("#", "[", " ")):
            key, _, value = line.partition("=")
            keys.setdefault(key, []).append(value)
    return keys


_UNIT_KEYS = {
    "Description", "Documentation", "After", "Wants", "Requires", "Type", "Environment",
    "EnvironmentFile", "ExecStart", "Restart", "RestartSec", "User", "Group", "StateDirectory",
    "RuntimeDirectory", "RuntimeDirectoryMode", "AmbientCapabilities", "CapabilityBoundingSet",
    "NoNewPrivileges", "ProtectSystem", "ProtectHome", "ReadWritePaths", "PrivateTmp",
    "PrivateDevices", "Nice", "CPUQuota", "MemoryMax", "WantedBy", "LoadCredential", "KillMode",
    "TimeoutStopSec", "DynamicUser", "RestrictAddressFamilies", "OnCalendar", "Persistent",
    "RandomizedDelaySec", "Unit", "ReadOnlyPaths", "TimeoutStartSec", "StateDirectoryMode",
    "UMask",
}  # fmt: skip


@pytest.mark.parametrize("path", UNITS, ids=lambda p: p.name)
def test_every_unit_passes_its_check(path: Path, tmp_path: Path) -> None:
    unknown = set(unit(path)) - _UNIT_KEYS
    assert not unknown, f"keys this check does not know (add them if systemd does): {unknown}"
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        return  # the key check above is the whole check here
    copy = tmp_path / path.name  # the binary where the unit expects it: this checkout's
    reflex = REPO / ".venv/bin/reflex"
    copy.write_text(path.read_text().replace("/opt/reflex/.venv/bin/reflex", str(reflex)))
    if path.suffix == ".timer":
        (tmp_path / path.with_suffix(".service").name).write_text(
            (DEPLOY / path.with_suffix(".service").name).read_text()
            .replace("/opt/reflex/.venv/bin/reflex", str(reflex)))  # fmt: skip
    done = subprocess.run([analyze, "verify", "--man=no", str(copy)], capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    said = [line for line in (done.stdout + done.stderr).splitlines() if path.name in line]
    assert done.returncode == 0 and not said, done.stdout + done.stderr


def test_the_agent_unit_creates_run_reflex_for_its_socket() -> None:
    keys = unit(DEPLOY / "reflex-collect.service")
    assert keys["RuntimeDirectory"] == ["reflex"] and keys["User"] == ["reflex"]
    socket_dir = Path(CollectSettings().hook_socket).parent
    assert socket_dir == Path("/run") / keys["RuntimeDirectory"][0]
    assert keys["RuntimeDirectoryMode"] == ["0755"]  # jobs of other users reach the socket
    assert "CAP_SYSLOG" in keys["AmbientCapabilities"][0]
