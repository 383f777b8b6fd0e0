"""The Kubernetes manifests (``manifests/``): what they render to, that every document is valid
for Kubernetes and for pyscheduler, that the embedded cluster accepts them through ``kubectl``,
and that the RBAC they grant is exactly what the scheduler uses.

The RBAC check runs the scheduler (fragments and virtual nodes on) against the embedded cluster
with its request log on, maps every request to the attributes kube-apiserver's authorizer sees
(verb, API group, resource, subresource, namespace, name) and evaluates the manifests' Roles and
ClusterRoles on them as the RBAC authorizer does: every request must be allowed, and every
permission granted must have been used (or be listed in :data:`RARE_PERMISSIONS` with the
reason it is needed).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import yaml
from kubernetes import client, config

from pyscheduler_sim.cluster import ClusterSpec, PoolSpec
from pyscheduler_sim.server import KUBE_VERSION, AuditRecord
from tests.conftest import AnyCluster, KUBECTL, Kubectl, SchedulerThread, open_cluster, wait_for

pytestmark = pytest.mark.kubectl

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "manifests"
STAND_IN_CRDS = ROOT / "tests" / "data"
COST_TIER_WASM = ROOT / "fragments" / "examples" / "cost-tier" / "cost-tier.wasm"
#: The Kubernetes version the embedded cluster speaks, and the schemas the documents must pass.
K8S_VERSION = f"{KUBE_VERSION['major']}.{KUBE_VERSION['minor']}"
NAMESPACE = "pyscheduler-system"
SCHEDULER_LABELS = {"app.kubernetes.io/name": "pyscheduler",
                    "app.kubernetes.io/component": "scheduler"}
CLUSTER_SCOPED = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
                  "WsspSchedulerConfiguration"}

Obj = dict[str, Any]

#: Permissions granted but not used by the RBAC test's run, each with the code path that needs
#: it. Keyed by (scope, API group, resource[/subresource], verb); scope is "cluster" for a
#: ClusterRole bound cluster-wide, else the Role's namespace. The run exercises every
#: permission today, so this is empty; a permission that only a failure path uses goes here.
RARE_PERMISSIONS: dict[tuple[str, str, str, str], str] = {}


# --------------------------------------------------------------------------------------------
# Rendering


def kustomize(path: Path) -> list[Obj]:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed on this machine")
    proc = subprocess.run([KUBECTL, "kustomize", str(path)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, f"kubectl kustomize {path} failed:\n{proc.stderr}"
    return [d for d in yaml.safe_load_all(proc.stdout) if d]


@dataclass(frozen=True)
class Rendered:
    main: list[Obj]          # manifests/
    monitoring: list[Obj]    # manifests/monitoring/ (also part of main)
    virtual: list[Obj]       # manifests/virtual-nodes/
    examples: list[Obj]      # manifests/examples/

    @property
    def everything(self) -> list[Obj]:
        return self.main + self.virtual + self.examples


@pytest.fixture(scope="module")
def rendered() -> Rendered:
    return Rendered(kustomize(MANIFESTS), kustomize(MANIFESTS / "monitoring"),
                    kustomize(MANIFESTS / "virtual-nodes"), kustomize(MANIFESTS / "examples"))


def key(doc: Obj) -> tuple[str, str, str, str]:
    meta = doc.get("metadata") or {}
    return (doc["apiVersion"].split("/")[0] if "/" in doc["apiVersion"] else "", doc["kind"],
            meta.get("namespace") or "", meta["name"])


def find(docs: Sequence[Obj], kind: str, name: str | None = None, *,
         prefix: str | None = None) -> Obj:
    found = [d for d in docs if d["kind"] == kind and (
        name is None or d["metadata"]["name"] == name) and (
        prefix is None or d["metadata"]["name"].startswith(prefix))]
    assert len(found) == 1, f"expected one {kind} {name or prefix or ''}, found {len(found)}"
    return found[0]


def scheduler_deployment(docs: Sequence[Obj]) -> Obj:
    return find(docs, "Deployment", "pyscheduler")


def scheduler_container(docs: Sequence[Obj]) -> Obj:
    containers: list[Obj] = scheduler_deployment(docs)["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1
    return containers[0]


def config_text(docs: Sequence[Obj]) -> str:
    """The scheduler configuration the Deployment mounts, found through its --config argument."""
    deployment = scheduler_deployment(docs)
    args = scheduler_container(docs)["args"]
    path = Path(args[args.index("--config") + 1])
    mount = next(m for m in scheduler_container(docs)["volumeMounts"]
                 if Path(m["mountPath"]) == path.parent)
    volume = next(v for v in deployment["spec"]["template"]["spec"]["volumes"]
                  if v["name"] == mount["name"])
    config_map = find(docs, "ConfigMap", volume["configMap"]["name"])
    text: str = config_map["data"][path.name]
    return text


def config_document(docs: Sequence[Obj]) -> Obj:
    doc: Obj = yaml.safe_load(config_text(docs))
    return doc


def virtual_nodes_example(docs: Sequence[Obj]) -> Obj:
    """The commented-out virtual nodes example of the configuration, uncommented."""
    lines = config_text(docs).splitlines()
    begin = lines.index("# virtual nodes example begin")
    end = lines.index("# virtual nodes example end")
    block = "\n".join(line.removeprefix("#").removeprefix(" ") for line in lines[begin + 1:end])
    example: Obj = yaml.safe_load(block)
    return example


def load(text: str, tmp_path: Path, name: str = "scheduler.yaml") -> Any:
    from pyscheduler.config import load_config

    path = tmp_path / name
    path.write_text(text)
    return load_config(str(path))


# --------------------------------------------------------------------------------------------
# What is rendered


def test_main_kustomization_installs_the_scheduler_and_only_it(rendered: Rendered) -> None:
    main = {key(d) for d in rendered.main}
    expected = {
        ("", "Namespace", "", NAMESPACE),
        ("apiextensions.k8s.io", "CustomResourceDefinition", "",
         "wsspschedulerconfigurations.wssp.pyscheduler.io"),
        ("", "ServiceAccount", NAMESPACE, "pyscheduler"),
        ("rbac.authorization.k8s.io", "ClusterRole", "", "pyscheduler"),
        ("rbac.authorization.k8s.io", "ClusterRoleBinding", "", "pyscheduler"),
        ("rbac.authorization.k8s.io", "Role", NAMESPACE, "pyscheduler"),
        ("rbac.authorization.k8s.io", "RoleBinding", NAMESPACE, "pyscheduler"),
        ("apps", "Deployment", NAMESPACE, "pyscheduler"),
        ("policy", "PodDisruptionBudget", NAMESPACE, "pyscheduler"),
        ("", "Service", NAMESPACE, "pyscheduler-metrics"),
        ("monitoring.coreos.com", "ServiceMonitor", NAMESPACE, "pyscheduler"),
        ("", "Secret", NAMESPACE, "pyscheduler-minio"),
        ("apps", "StatefulSet", NAMESPACE, "minio"),
        ("", "Service", NAMESPACE, "minio"),
        ("batch", "Job", NAMESPACE, "minio-create-bucket"),
    }
    assert expected <= main, f"missing: {sorted(expected - main)}"
    find(rendered.main, "ConfigMap", prefix="pyscheduler-config")
    # monitoring/ is part of it; the examples and the virtual-node RBAC are not.
    assert {key(d) for d in rendered.monitoring} <= main
    assert rendered.monitoring, "manifests/monitoring renders nothing"
    assert not main & {key(d) for d in rendered.examples + rendered.virtual}
    # The CRD is the very file the scheduler reads (pyscheduler.wasm.resource.CRD_PATH).
    from pyscheduler.wasm.resource import CRD_PATH

    assert find(rendered.main, "CustomResourceDefinition") == yaml.safe_load(
        CRD_PATH.read_text())
    # Nothing lands in whatever namespace the kubeconfig defaults to.
    for doc in rendered.everything:
        if doc["kind"] not in CLUSTER_SCOPED:
            assert doc["metadata"].get("namespace"), f"{key(doc)} names no namespace"


def _schema_errors(doc: Obj, crds: dict[tuple[str, str], Obj]) -> list[str]:
    import kubernetes_validate

    group, kind = key(doc)[:2]
    crd = crds.get((group, kind))
    if crd is not None:
        # Custom resources: the CRD's own openAPIV3Schema, as the API server applies it.
        from pyscheduler_sim.schema import compile_schema

        version = next(v for v in crd["spec"]["versions"]
                       if f"{group}/{v['name']}" == doc["apiVersion"])
        errors = compile_schema(version["schema"]["openAPIV3Schema"]).validate(doc)
        return [str(e) for e in errors]
    try:
        kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
    except kubernetes_validate.ValidationError as exc:
        return [f"{'.'.join(str(p) for p in exc.path)}: {exc.message}"]
    return []


def test_every_document_validates_against_its_schema(rendered: Rendered) -> None:
    crds = {(c["spec"]["group"], c["spec"]["names"]["kind"]): c
            for c in [find(rendered.main, "CustomResourceDefinition")]
            + [yaml.safe_load(p.read_text()) for p in sorted(STAND_IN_CRDS.glob("crd-*.yaml"))]}
    problems = {f"{d['kind']}/{d['metadata']['name']}": errors for d in rendered.everything
                if (errors := _schema_errors(d, crds))}
    assert not problems, problems
    kinds = {(key(d)[0], d["kind"]) for d in rendered.everything}
    # Every custom kind has a CRD to check against; the rest went through the Kubernetes schemas.
    assert {k for k in kinds if k[0].endswith((".pyscheduler.io", ".coreos.com"))} <= set(crds)
    # The fragment resource also passes the scheduler's own checks.
    from pyscheduler.wasm.resource import parse_resource

    for doc in rendered.examples:
        if doc["kind"] == "WsspSchedulerConfiguration":
            parse_resource(doc)


def test_a_broken_document_fails_the_schema_check(rendered: Rendered) -> None:
    """The check above can fail: a typo and a wrong type are caught."""
    deployment = scheduler_deployment(rendered.main)
    typo = {**deployment, "spec": {**deployment["spec"], "replica": 2}}
    assert _schema_errors(typo, {})
    wrong = {**deployment, "spec": {**deployment["spec"], "replicas": "two"}}
    assert _schema_errors(wrong, {})


# --------------------------------------------------------------------------------------------
# The scheduler's Deployment, configuration, Service and ServiceMonitor


def test_configuration_is_valid_and_fits_the_manifests(rendered: Rendered,
                                                       tmp_path: Path) -> None:
    text = config_text(rendered.main)
    assert text == (MANIFESTS / "config" / "scheduler.yaml").read_text()
    config = load(text, tmp_path)
    deployment = scheduler_deployment(rendered.main)
    election = config.leader_election
    assert election.enabled
    assert election.lease_namespace == deployment["metadata"]["namespace"] == NAMESPACE
    assert config.metrics_host in ("0.0.0.0", "")   # reachable by the kubelet and Prometheus
    assert not config.virtual_nodes.enabled        # no cloud gateway in a cluster by default
    assert config.schedule_fragment is not None
    # The Role allows exactly this Lease and this Secret.
    role = find(rendered.main, "Role", "pyscheduler")
    names = {(r["resources"][0], n) for r in role["rules"] for n in r.get("resourceNames", [])}
    secret_ref = config.storage.credentials_secret
    assert ("leases", election.lease_name) in names
    assert ("secrets", secret_ref.name) in names and secret_ref.namespace == NAMESPACE
    secret = find(rendered.main, "Secret", secret_ref.name)
    assert {"accessKey", "secretKey"} <= set(secret["stringData"])
    # The scheduler schedules the pods that name it, not its own.
    pod_spec = deployment["spec"]["template"]["spec"]
    assert pod_spec.get("schedulerName", "default-scheduler") == "default-scheduler"
    assert config.scheduler_name != "default-scheduler"


def test_the_commented_virtual_nodes_example_is_a_valid_configuration(
        rendered: Rendered, tmp_path: Path) -> None:
    document = {**config_document(rendered.main), **virtual_nodes_example(rendered.main)}
    config = load(yaml.safe_dump(document), tmp_path)
    assert config.virtual_nodes.enabled and config.virtual_nodes.pools
    assert config.rebalancer.enabled
    # The example pods' cloud platform is one of the example's pools.
    platforms = {p.platform for p in config.virtual_nodes.pools}
    cloud_pod = find(rendered.examples, "Pod", "burst-to-azure")
    assert cloud_pod["metadata"]["labels"]["wssp/cloud-platform"] in platforms


def test_deployment_runs_two_hardened_replicas_with_leader_election(
        rendered: Rendered) -> None:
    deployment = scheduler_deployment(rendered.main)
    assert deployment["metadata"]["labels"] == SCHEDULER_LABELS
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    assert spec["strategy"]["type"] == "RollingUpdate"
    assert spec["selector"]["matchLabels"] == SCHEDULER_LABELS
    assert spec["template"]["metadata"]["labels"] == SCHEDULER_LABELS
    pod = spec["template"]["spec"]
    assert pod["serviceAccountName"] == find(rendered.main, "ServiceAccount")["metadata"]["name"]
    assert pod["automountServiceAccountToken"] is True
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["podAffinityTerm"]["labelSelector"]["matchLabels"] == SCHEDULER_LABELS
    assert anti[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    container = scheduler_container(rendered.main)
    assert container["image"] == "pyscheduler:dev"
    assert "command" not in container        # the image's ENTRYPOINT is `pyscheduler run`
    assert container["args"][:2] == ["--config", "/etc/pyscheduler/scheduler.yaml"]
    resources = container["resources"]
    assert {"cpu", "memory"} <= set(resources["requests"]) and "memory" in resources["limits"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert pod["securityContext"]["runAsUser"] == 10001
    # A PodDisruptionBudget keeps one replica through drains.
    pdb = find(rendered.main, "PodDisruptionBudget", "pyscheduler")
    assert pdb["spec"]["selector"]["matchLabels"] == SCHEDULER_LABELS
    assert pdb["spec"]["minAvailable"] == 1
    # The critical priority class is allowed in this namespace by a matching quota.
    quota = find(rendered.main, "ResourceQuota")
    expression = quota["spec"]["scopeSelector"]["matchExpressions"][0]
    assert expression["scopeName"] == "PriorityClass"
    assert pod["priorityClassName"] in expression["values"]
    assert int(quota["spec"]["hard"]["pods"]) >= spec["replicas"] + spec["strategy"][
        "rollingUpdate"]["maxSurge"]


RESTRICTED_VOLUMES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral",
                      "persistentVolumeClaim", "projected", "secret"}


def _restricted_violations(where: str, pod: Obj) -> list[str]:
    """The "restricted" Pod Security Standard, which the namespace enforces."""
    out: list[str] = []
    pod_security = pod.get("securityContext") or {}
    for flag in ("hostNetwork", "hostPID", "hostIPC"):
        if pod.get(flag):
            out.append(f"{where}: {flag}")
    for volume in pod.get("volumes") or ():
        if not set(volume) - {"name"} <= RESTRICTED_VOLUMES:
            out.append(f"{where}: volume {volume['name']} of a restricted type")
    for c in (pod.get("initContainers") or []) + pod["containers"]:
        sc = c.get("securityContext") or {}
        if sc.get("allowPrivilegeEscalation") is not False:
            out.append(f"{where}/{c['name']}: allowPrivilegeEscalation must be false")
        if "ALL" not in (sc.get("capabilities") or {}).get("drop", []):
            out.append(f"{where}/{c['name']}: capabilities must drop ALL")
        if set((sc.get("capabilities") or {}).get("add", [])) - {"NET_BIND_SERVICE"}:
            out.append(f"{where}/{c['name']}: adds capabilities")
        if sc.get("privileged"):
            out.append(f"{where}/{c['name']}: privileged")
        if not (sc.get("runAsNonRoot", pod_security.get("runAsNonRoot")) is True):
            out.append(f"{where}/{c['name']}: runAsNonRoot must be true")
        if sc.get("runAsUser", pod_security.get("runAsUser")) == 0:
            out.append(f"{where}/{c['name']}: runs as uid 0")
        seccomp = (sc.get("seccompProfile") or pod_security.get("seccompProfile") or {})
        if seccomp.get("type") not in ("RuntimeDefault", "Localhost"):
            out.append(f"{where}/{c['name']}: seccompProfile must be RuntimeDefault")
        if sc.get("readOnlyRootFilesystem") is not True:   # ours, beyond the standard
            out.append(f"{where}/{c['name']}: root filesystem must be read-only")
        for port in c.get("ports") or ():
            if port.get("hostPort"):
                out.append(f"{where}/{c['name']}: hostPort")
    return out


def test_every_pod_in_the_namespace_passes_the_restricted_standard(rendered: Rendered) -> None:
    namespace = find(rendered.main, "Namespace", NAMESPACE)
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    templates = [(f"{d['kind']}/{d['metadata']['name']}", d["spec"]["template"]["spec"])
                 for d in rendered.main if d["kind"] in ("Deployment", "StatefulSet", "Job")]
    assert len(templates) >= 3
    violations = [v for where, pod in templates for v in _restricted_violations(where, pod)]
    assert not violations, violations
    # The checker itself notices a violation.
    bad = {"containers": [{"name": "c", "securityContext": {"privileged": True}}]}
    assert len(_restricted_violations("bad", bad)) >= 4


async def _served(paths: Sequence[str], *, ready: bool) -> dict[str, tuple[int, str]]:
    from pyscheduler.metrics import HealthServer, SchedulerMetrics

    server = HealthServer(SchedulerMetrics(), host="127.0.0.1", port=0)
    server.add_readiness_check("informers-synced", lambda: ready)
    await server.start()
    try:
        async with aiohttp.ClientSession() as session:
            answers = {}
            for path in paths:
                async with session.get(f"http://127.0.0.1:{server.port}{path}") as resp:
                    answers[path] = (resp.status, await resp.text())
            return answers
    finally:
        await server.stop()


def test_probes_and_ports_are_what_the_scheduler_serves(rendered: Rendered,
                                                        tmp_path: Path) -> None:
    container = scheduler_container(rendered.main)
    config = load(config_text(rendered.main), tmp_path)
    [port] = container["ports"]
    assert port["name"] == "metrics" and port["containerPort"] == config.metrics_port
    live, ready = container["livenessProbe"]["httpGet"], container["readinessProbe"]["httpGet"]
    assert live["port"] == ready["port"] == "metrics"
    service = find(rendered.main, "Service", "pyscheduler-metrics")
    [service_port] = service["spec"]["ports"]
    assert service_port["name"] == "metrics" and service_port["targetPort"] == "metrics"
    monitor = find(rendered.main, "ServiceMonitor")
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] == service_port["name"]
    paths = [live["path"], ready["path"], endpoint["path"]]
    # The metrics server answers these paths: all healthy once the informers have synced...
    answers = asyncio.run(_served(paths, ready=True))
    assert all(status == 200 for status, _ in answers.values()), answers
    assert "scheduler_schedule_attempts_total" in answers[endpoint["path"]][1]
    # ...and before that the pod is alive but not ready, so the kubelet waits, not restarts.
    answers = asyncio.run(_served(paths, ready=False))
    assert answers[live["path"]][0] == 200 and answers[ready["path"]][0] == 503


def test_service_and_servicemonitor_select_the_scheduler(rendered: Rendered) -> None:
    service = find(rendered.main, "Service", "pyscheduler-metrics")
    assert service["metadata"]["namespace"] == NAMESPACE
    assert service["metadata"]["labels"] == SCHEDULER_LABELS
    pod_labels = scheduler_deployment(rendered.main)["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    monitor = find(rendered.main, "ServiceMonitor")
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= service["metadata"]["labels"].items()
    assert service["metadata"]["namespace"] in monitor["spec"]["namespaceSelector"]["matchNames"]
    # The selector picks this Service only, not MinIO's.
    minio = find(rendered.main, "Service", "minio")
    assert not selector.items() <= minio["metadata"]["labels"].items()


def test_fragment_storage_is_the_in_cluster_minio(rendered: Rendered, tmp_path: Path) -> None:
    from pyscheduler.cli import build_parser

    config = load(config_text(rendered.main), tmp_path)
    storage = config.storage
    service = find(rendered.main, "Service", "minio")
    host, port = storage.endpoint.rsplit(":", 1)
    assert host == f"minio.{service['metadata']['namespace']}.svc"
    assert int(port) == service["spec"]["ports"][0]["port"]
    statefulset = find(rendered.main, "StatefulSet", "minio")
    pod = statefulset["spec"]["template"]["spec"]
    assert statefulset["spec"]["serviceName"] == "minio-headless"
    assert find(rendered.main, "Service", "minio-headless")["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"].items() <= \
        statefulset["spec"]["template"]["metadata"]["labels"].items()
    assert statefulset["spec"]["volumeClaimTemplates"][0]["metadata"]["name"] in {
        m["name"] for m in pod["containers"][0]["volumeMounts"]}
    # MinIO's root credentials are the scheduler's Secret.
    secret = storage.credentials_secret
    env = {e["name"]: e["valueFrom"]["secretKeyRef"] for e in pod["containers"][0]["env"]
           if "valueFrom" in e}
    assert env["MINIO_ROOT_USER"] == {"name": secret.name, "key": "accessKey"}
    assert env["MINIO_ROOT_PASSWORD"] == {"name": secret.name, "key": "secretKey"}
    # The Job creates the bucket that `fragment publish` uploads to by default, and that the
    # example fragment names, at the same endpoint.
    job = find(rendered.main, "Job", "minio-create-bucket")
    job_env = {e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]
               ["env"]}
    publish = build_parser().parse_args(["fragment", "publish", "x.wasm", "--name", "n",
                                         "--version", "1.0.0"])
    example = find(rendered.examples, "WsspSchedulerConfiguration")
    assert job_env["BUCKET"] == publish.bucket == example["spec"]["url"].split("/")[2]
    assert job_env["MINIO_URL"] == f"http://{storage.endpoint}"
    assert "--ignore-existing" in job["spec"]["template"]["spec"]["containers"][0]["args"][0]
    # Images are pinned.
    for doc in (statefulset, job):
        for c in doc["spec"]["template"]["spec"]["containers"]:
            assert re.fullmatch(r"quay\.io/minio/\w+:RELEASE\.[0-9T-]+Z", c["image"]), c["image"]


def _run_bucket_script(rendered: Rendered, tmp_path: Path, failures: int) -> tuple[int, str,
                                                                                    list[str]]:
    """Run the Job's script with stand-ins for ``mc`` (failing ``ls`` ``failures`` times, as a
    MinIO that is not up yet) and ``sleep`` (returning at once)."""
    import os
    import stat

    container = find(rendered.main, "Job")["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") or f"<{e['name']}>" for e in container["env"]}
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(parents=True)
    calls = tmp_path / "calls"
    stubs = {
        "mc": f"""#!/bin/sh
echo "$*" >> {calls}
case "$*" in *" ls "*)
  n=$(cat {tmp_path}/ls 2>/dev/null || echo 0); echo $((n + 1)) > {tmp_path}/ls
  [ "$n" -ge {failures} ] || exit 1;;
esac
""",
        "sleep": "#!/bin/sh\n",
    }
    for name, text in stubs.items():
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(stat.S_IRWXU)
    proc = subprocess.run([*container["command"], *container["args"]], capture_output=True,
                          text=True, timeout=30,
                          env={**env, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    lines = calls.read_text().splitlines() if calls.exists() else []
    return proc.returncode, proc.stderr, lines


def test_bucket_job_waits_for_minio_then_creates_the_bucket_idempotently(
        rendered: Rendered, tmp_path: Path) -> None:
    code, stderr, calls = _run_bucket_script(rendered, tmp_path / "slow", failures=2)
    assert code == 0, stderr
    config = "--config-dir /tmp/mc"
    alias = f"{config} alias set store http://minio.{NAMESPACE}.svc:9000 <ACCESS_KEY> <SECRET_KEY>"
    assert calls == [alias, f"{config} ls store"] * 3 + [
        f"{config} mb --ignore-existing store/fragments"]
    # MinIO never answering: the script gives up (bounded) and the Job's retries take over.
    code, stderr, calls = _run_bucket_script(rendered, tmp_path / "down", failures=1000)
    assert code == 1 and "did not answer" in stderr
    assert len(calls) == 120 and not any(" mb " in c for c in calls)


def test_examples_use_the_scheduler_and_the_committed_fragment(rendered: Rendered,
                                                               tmp_path: Path) -> None:
    from pyscheduler.wasm.resource import parse_resource

    config = load(config_text(rendered.main), tmp_path)
    pods = [d["spec"] for d in rendered.examples if d["kind"] == "Pod"] + [
        d["spec"]["template"]["spec"] for d in rendered.examples if d["kind"] == "Deployment"]
    assert len(pods) >= 4
    assert all(p["schedulerName"] == config.scheduler_name for p in pods)
    fragment = parse_resource(find(rendered.examples, "WsspSchedulerConfiguration"))
    assert fragment.sha256 == hashlib.sha256(COST_TIER_WASM.read_bytes()).hexdigest()
    # The key `fragment publish` would upload it under.
    assert fragment.url.endswith(f"/{fragment.name}/{fragment.resource_name}.wasm")
    annotated = find(rendered.examples, "Pod", "cost-aware")
    assert annotated["metadata"]["annotations"]["wssp/schedulefragment"] in (
        fragment.name, fragment.resource_name)
    assert find(rendered.examples, "Pod", "hello")["metadata"]["annotations"][
        "wssp/explain"] == "true"


def test_an_overlay_turns_on_virtual_nodes_and_drops_the_operator_kinds(
        rendered: Rendered, tmp_path: Path) -> None:
    """The overlay manifests/README.md shows: image, configuration with the virtual nodes
    example, the virtual-node RBAC, and no prometheus-operator kinds."""
    import os

    lines = config_text(rendered.main).splitlines()
    begin = lines.index("# virtual nodes example begin")
    end = lines.index("# virtual nodes example end")
    kept = [line for line in lines[:begin] if line not in ("virtualNodes:", "  enabled: false")]
    (tmp_path / "scheduler.yaml").write_text("\n".join(
        kept + [line.removeprefix("#").removeprefix(" ") for line in lines[begin + 1:end]]))
    up = Path(os.path.relpath(MANIFESTS, tmp_path))
    (tmp_path / "kustomization.yaml").write_text(yaml.safe_dump({
        "apiVersion": "kustomize.config.k8s.io/v1beta1", "kind": "Kustomization",
        "resources": [str(up), str(up / "virtual-nodes")],
        "images": [{"name": "pyscheduler", "newName": "registry.example.com/pyscheduler",
                    "newTag": "0.1.0"}],
        "configMapGenerator": [{"name": "pyscheduler-config", "namespace": NAMESPACE,
                                "behavior": "replace", "files": ["scheduler.yaml"]}],
        "patches": [{"target": {"group": "monitoring.coreos.com"},
                     "patch": "$patch: delete\napiVersion: monitoring.coreos.com/v1\n"
                              "kind: Any\nmetadata:\n  name: any\n"}]}))
    docs = kustomize(tmp_path)
    assert scheduler_container(docs)["image"] == "registry.example.com/pyscheduler:0.1.0"
    config = load(config_text(docs), tmp_path, "loaded.yaml")
    assert config.virtual_nodes.enabled
    assert {key(d) for d in rendered.virtual} <= {key(d) for d in docs}
    assert not [d for d in docs if d["apiVersion"].startswith("monitoring.coreos.com/")]


def test_every_rbac_rule_names_the_code_that_needs_it() -> None:
    files = [MANIFESTS / "rbac.yaml", MANIFESTS / "virtual-nodes" / "rbac.yaml"]
    rules = 0
    for path in files:
        lines = path.read_text().splitlines()
        docs = [d for d in yaml.safe_load_all(path.read_text()) if d and "rules" in d]
        verbs_in_order = [r["verbs"] for d in docs for r in d["rules"]]
        starts = [i for i, line in enumerate(lines) if line.strip().startswith("- apiGroups:")]
        assert len(starts) == len(verbs_in_order)
        for start, verbs in zip(starts, verbs_in_order):
            comment = []
            i = start - 1
            while i >= 0 and lines[i].strip().startswith("#"):
                comment.append(lines[i])
                i -= 1
            text = " ".join(comment)
            modules = re.findall(r"pyscheduler/[\w/]+\.py", text)
            assert modules, f"{path.name}:{start + 1}: the rule names no module"
            assert all((ROOT / m).is_file() for m in modules), modules
            for verb in verbs:
                assert re.search(rf"\b{verb}\b", text), \
                    f"{path.name}:{start + 1}: the comment does not justify {verb!r}"
            rules += 1
    assert rules >= 10


# --------------------------------------------------------------------------------------------
# The embedded cluster accepts them


@pytest.fixture(scope="module")
def sim(request: pytest.FixtureRequest, server: str,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[AnyCluster]:
    spec = ClusterSpec(pools=[PoolSpec(name="real", count=2, cpu="2", memory="8Gi")],
                       pod_start_seconds=0.05, pod_termination_seconds=0.1,
                       lease_renew_seconds=5)
    with open_cluster(request, spec, tmp_path_factory.mktemp("manifests")) as c:
        yield c


@pytest.fixture(scope="module")
def sim_kubectl(sim: AnyCluster, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed on this machine")
    return Kubectl(sim.kubeconfig, tmp_path_factory.mktemp("kubectl-cache"))


def _write(docs: Sequence[Obj], path: Path) -> Path:
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


@pytest.fixture(scope="module")
def installed(sim_kubectl: Kubectl, rendered: Rendered,
              tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The stand-in CRDs, then manifests/ and manifests/virtual-nodes/, created with kubectl."""
    out = tmp_path_factory.mktemp("rendered")
    files = {"main": _write(rendered.main, out / "main.yaml"),
             "virtual": _write(rendered.virtual, out / "virtual.yaml"),
             "examples": _write(rendered.examples, out / "examples.yaml")}
    sim_kubectl("create", "-f", str(STAND_IN_CRDS))
    for name in ("main", "virtual"):
        created = sim_kubectl("create", "-f", str(files[name])).stdout.splitlines()
        assert len(created) == len(getattr(rendered, name)), created
        assert all(line.endswith(" created") for line in created), created
    return files


def _contained(expected: Any, actual: Any, path: str) -> list[str]:
    """Where ``actual`` lacks or changes what ``expected`` says (defaults may be added)."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path}: {actual!r} is not an object"]
        return [p for k, v in expected.items()
                for p in (_contained(v, actual[k], f"{path}.{k}") if k in actual
                          else [f"{path}.{k}: missing"])]
    if isinstance(expected, list):
        if not isinstance(actual, list) or len(actual) != len(expected):
            return [f"{path}: {actual!r} is not a list of {len(expected)}"]
        return [p for i, (e, a) in enumerate(zip(expected, actual))
                for p in _contained(e, a, f"{path}[{i}]")]
    return [] if expected == actual else [f"{path}: {actual!r} != {expected!r}"]


def _read_back_problems(docs: Sequence[Obj], stored: Sequence[Obj]) -> list[str]:
    by_key = {key(d): d for d in stored}
    problems = []
    for doc in docs:
        actual = by_key.get(key(doc))
        if actual is None:
            problems.append(f"{key(doc)}: not found")
            continue
        expected = dict(doc)
        if doc["kind"] == "Secret":   # stringData is write-only: it is merged into data
            strings = expected.pop("stringData", {})
            decoded = {k: base64.b64decode(v).decode() for k, v in actual["data"].items()}
            problems += [f"{key(doc)}: data[{k}]" for k, v in strings.items()
                         if decoded.get(k) != v]
        problems += _contained(expected, actual, "/".join(key(doc)))
    return problems


def test_the_embedded_cluster_accepts_every_manifest(sim_kubectl: Kubectl, rendered: Rendered,
                                                     installed: dict[str, Path]) -> None:
    created = sim_kubectl("create", "-f", str(installed["examples"])).stdout.splitlines()
    try:
        assert len(created) == len(rendered.examples), created
        for name in ("main", "virtual", "examples"):
            stored = sim_kubectl.json("get", "-f", str(installed[name]))["items"]
            problems = _read_back_problems(getattr(rendered, name), stored)
            assert not problems, problems
        # kubectl's table output for the kinds the manifests brought to the embedded cluster.
        headers = {
            "statefulsets": ["NAME", "READY", "AGE"],
            "jobs": ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"],
            "roles": ["NAME", "CREATED", "AT"],
            "rolebindings": ["NAME", "ROLE", "AGE"],
            "resourcequotas": ["NAME", "REQUEST", "LIMIT", "AGE"],
        }
        for plural, header in headers.items():
            lines = sim_kubectl("get", plural, "-n", NAMESPACE).stdout.splitlines()
            assert lines[0].split() == header, (plural, lines)
            assert len(lines) >= 2, (plural, lines)
        bindings = sim_kubectl("get", "clusterrolebindings", "-o", "wide").stdout
        assert re.search(r"pyscheduler\s+ClusterRole/pyscheduler\s+\S+\s+"
                         rf"{NAMESPACE}/pyscheduler", bindings), bindings
    finally:
        sim_kubectl("delete", "-f", str(installed["examples"]), "--ignore-not-found",
                    "--wait=true", "--timeout=60s")


def _readme_yaml_blocks() -> list[Obj]:
    """Each YAML block's first document (a KubeSchedulerConfiguration file has a second)."""
    text = (ROOT / "README.md").read_text()
    return [next(yaml.safe_load_all(block))
            for block in re.findall(r"```yaml\n(.*?)```", text, re.S)]


def test_every_yaml_example_of_the_readme_is_accepted(sim_kubectl: Kubectl,
                                                     installed: dict[str, Path],
                                                     tmp_path: Path) -> None:
    """Each YAML block of the README does what it says against the embedded cluster (which
    evaluates the CRD's schema and validation rules as kube-apiserver does): objects are
    created, the overlay renders, the pod snippet makes a valid pod."""
    blocks = _readme_yaml_blocks()
    assert len(blocks) >= 3, blocks
    kinds = []
    for i, doc in enumerate(blocks):
        if doc.get("kind") == "KubeSchedulerConfiguration":
            continue  # a configuration file, not an object (tests/unit/test_component_config)
        if "kind" in doc:  # a whole object
            path = _write([doc], tmp_path / f"object-{i}.yaml")
            kinds.append(doc["kind"])
        elif "resources" in doc:  # a kustomize overlay of manifests/
            overlay = tmp_path / f"overlay-{i}" / "my-cluster"
            overlay.mkdir(parents=True)
            (overlay.parent / "manifests").symlink_to(MANIFESTS)
            (overlay / "kustomization.yaml").write_text(yaml.safe_dump(doc))
            deployment = find(kustomize(overlay), "Deployment", "pyscheduler")
            images = {c["image"] for c in deployment["spec"]["template"]["spec"]["containers"]}
            assert images == {"registry.example.com/pyscheduler:0.1.0"}, images
            kinds.append("overlay")
            continue
        else:  # a snippet of a pod: completed into one
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": f"readme-{i}", "namespace": "default",
                                **doc.get("metadata", {})},
                   "spec": {"containers": [{"name": "c", "image": "pause"}],
                            **doc.get("spec", {})}}
            path = _write([pod], tmp_path / f"pod-{i}.yaml")
            kinds.append("pod snippet")
        try:
            proc = sim_kubectl("create", "-f", str(path))
            assert proc.stdout.strip().endswith(" created"), proc.stdout
        finally:
            sim_kubectl("delete", "-f", str(path), "--ignore-not-found", "--wait=false")
    assert kinds == ["overlay", "pod snippet", "WsspSchedulerConfiguration"], kinds


def test_a_wrong_manifest_is_refused_with_the_reason(sim_kubectl: Kubectl,
                                                     rendered: Rendered,
                                                     installed: dict[str, Path]) -> None:
    """What the embedded cluster accepts means something: kube's rules refuse broken copies."""
    job = find(rendered.main, "Job")
    broken_job = {**job, "metadata": {**job["metadata"], "name": "broken"}}
    broken_job["spec"] = {**job["spec"], "template": {
        **job["spec"]["template"], "spec": {**job["spec"]["template"]["spec"],
                                            "restartPolicy": "Always"}}}
    role = find(rendered.main, "Role")
    broken_role = {**role, "metadata": {**role["metadata"], "name": "broken"},
                   "rules": [{"apiGroups": [""], "resources": ["pods"]}]}
    for doc, reason in ((broken_job, 'spec.template.spec.restartPolicy: Required value: '
                                     'valid values: "OnFailure", "Never"'),
                        (broken_role, "rules[0].verbs: Required value")):
        proc = sim_kubectl("create", "-f", "-", input=yaml.safe_dump(doc), check=False)
        assert proc.returncode != 0 and reason in proc.stderr, proc.stderr


# --------------------------------------------------------------------------------------------
# RBAC: every request allowed, every permission used


@dataclass(frozen=True)
class Request:
    """A request as kube-apiserver's RequestInfoFactory sees it (resource requests only)."""

    verb: str
    group: str
    resource: str        # with "/subresource" when there is one
    namespace: str
    name: str

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        what = f"{self.resource}/{self.name}" if self.name else self.resource
        return f"{self.verb} {self.group or 'core'} {what}{where}"


_VERBS = {"GET": "get", "HEAD": "get", "POST": "create", "PUT": "update", "PATCH": "patch",
          "DELETE": "delete"}


def request_info(record: AuditRecord) -> Request:
    parts = [p for p in record.path.split("/") if p]
    if parts[:1] == ["api"]:
        rest = parts[2:]
        group = ""
    elif parts[:1] == ["apis"]:
        rest = parts[3:]
        group = parts[1]
    else:
        raise AssertionError(f"a non-resource request: {record.method} {record.path}")
    namespace = ""
    if rest[:1] == ["namespaces"] and len(rest) > 1:
        namespace = rest[1]
        if len(rest) > 2 and rest[2] not in ("status", "finalize"):
            rest = rest[2:]
    resource = rest[0]
    name = rest[1] if len(rest) > 1 else ""
    if len(rest) > 2:
        resource += "/" + rest[2]
    verb = _VERBS[record.method]
    if not name and verb == "get":
        verb = "watch" if record.query.get("watch") in ("true", "1") else "list"
    if not name and verb == "delete":
        verb = "deletecollection"
    return Request(verb, group, resource, namespace, name)


def test_request_info_reads_paths_as_kube_apiserver_does() -> None:
    def info(method: str, path: str, **query: str) -> Request:
        return request_info(AuditRecord(method, path, query, ""))

    assert info("GET", "/api/v1/pods", watch="true") == Request("watch", "", "pods", "", "")
    assert info("GET", "/api/v1/nodes") == Request("list", "", "nodes", "", "")
    assert info("POST", "/api/v1/namespaces/a/pods/p/binding") == Request(
        "create", "", "pods/binding", "a", "p")
    assert info("PATCH", "/apis/wssp.pyscheduler.io/v1alpha1/wsspschedulerconfigurations/x/"
                         "status") == Request("patch", "wssp.pyscheduler.io",
                                              "wsspschedulerconfigurations/status", "", "x")
    assert info("GET", "/api/v1/namespaces/a") == Request("get", "", "namespaces", "a", "a")
    assert info("DELETE", "/api/v1/namespaces/a/pods") == Request(
        "deletecollection", "", "pods", "a", "")


@dataclass(frozen=True)
class Grant:
    scope: str           # "cluster" (ClusterRoleBinding) or the RoleBinding's namespace
    rule: Obj

    def allows(self, r: Request) -> bool:
        """``RuleAllows`` of kube's RBAC authorizer, within the binding's scope."""
        rule = self.rule
        if self.scope != "cluster" and r.namespace != self.scope:
            return False
        sub = r.resource.partition("/")[2]
        return ((r.verb in rule["verbs"] or "*" in rule["verbs"])
                and (r.group in rule["apiGroups"] or "*" in rule["apiGroups"])
                and any(res in ("*", r.resource) or (sub and res == f"*/{sub}")
                        for res in rule["resources"])
                and (not rule.get("resourceNames") or r.name in rule["resourceNames"]))

    def permissions(self) -> list[tuple[str, str, str, str]]:
        return [(self.scope, g, res, v) for g in self.rule["apiGroups"]
                for res in self.rule["resources"] for v in self.rule["verbs"]]

    def used_by(self, permission: tuple[str, str, str, str], requests: set[Request]) -> bool:
        _, group, resource, verb = permission
        narrow = Grant(self.scope, {**self.rule, "apiGroups": [group], "resources": [resource],
                                    "verbs": [verb]})
        return any(narrow.allows(r) for r in requests)


def grants_for(docs: Sequence[Obj], account: str, namespace: str) -> list[Grant]:
    """Every rule the service account gets through the bindings in ``docs``."""
    roles = {(d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"]): d
             for d in docs if d["kind"] in ("Role", "ClusterRole")}
    grants = []
    for binding in docs:
        if binding["kind"] not in ("RoleBinding", "ClusterRoleBinding"):
            continue
        bns = binding["metadata"].get("namespace", "")
        if not any(s["kind"] == "ServiceAccount" and s["name"] == account
                   and s.get("namespace", bns) == namespace for s in binding["subjects"]):
            continue
        ref = binding["roleRef"]
        role = roles[(ref["kind"], bns if ref["kind"] == "Role" else "", ref["name"])]
        scope = "cluster" if binding["kind"] == "ClusterRoleBinding" else bns
        grants += [Grant(scope, rule) for rule in role.get("rules") or ()]
    return grants


def test_grant_evaluation_follows_kube_rbac() -> None:
    pods = Grant("cluster", {"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]})
    assert pods.allows(Request("get", "", "pods", "a", "p"))
    assert not pods.allows(Request("get", "", "pods/status", "a", "p"))
    assert not pods.allows(Request("list", "", "pods", "a", ""))
    assert not pods.allows(Request("get", "apps", "pods", "a", "p"))
    lease = Grant("ns", {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                         "resourceNames": ["x"], "verbs": ["update"]})
    assert lease.allows(Request("update", "coordination.k8s.io", "leases", "ns", "x"))
    assert not lease.allows(Request("update", "coordination.k8s.io", "leases", "ns", "y"))
    assert not lease.allows(Request("update", "coordination.k8s.io", "leases", "other", "x"))
    assert Grant("cluster", {"apiGroups": ["*"], "resources": ["*/status"],
                             "verbs": ["*"]}).allows(Request("patch", "", "pods/status", "a",
                                                             "p"))


def _service_account(rendered: Rendered) -> tuple[str, str]:
    deployment = scheduler_deployment(rendered.main)
    return (deployment["spec"]["template"]["spec"]["serviceAccountName"],
            deployment["metadata"]["namespace"])


def _scheduler_requests(sim: AnyCluster, log: list[AuditRecord]) -> set[Request]:
    records = sim.call(lambda: list(log))
    ours = [r for r in records if r.user_agent.startswith("pyscheduler/")]
    assert ours, "the scheduler's requests were not recorded"
    return {request_info(r) for r in ours}


def _pod(name: str, cpu: str, *, labels: Obj | None = None,
         annotations: Obj | None = None) -> Obj:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}, "annotations": annotations or {}},
            "spec": {"schedulerName": "pyscheduler", "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": cpu,
                                                                "memory": "64Mi"}}}]}}


def _fast(document: Obj) -> Obj:
    """The configuration with timings for a test: short leases, fast retries, no fixed port."""
    return {**document, "metricsAddress": "127.0.0.1:0",
            "leaderElection": {**document["leaderElection"], "leaseDurationSeconds": 3,
                               "renewDeadlineSeconds": 2, "retryPeriodSeconds": 0.5},
            "podInitialBackoffSeconds": 0.2, "podMaxBackoffSeconds": 1,
            "podMaxInUnschedulablePodsSeconds": 1}


def _recording(sim: AnyCluster) -> list[AuditRecord]:
    log: list[AuditRecord] = []
    sim.call(lambda: setattr(sim.cluster.server, "audit_log", log))
    return log


def _stop_recording(sim: AnyCluster) -> None:
    sim.call(lambda: setattr(sim.cluster.server, "audit_log", None))


def _delete_leader_lease(kubectl: Kubectl, document: Obj) -> None:
    """Each run starts without the Lease, so that it creates one."""
    election = document["leaderElection"]
    kubectl("delete", "lease", election["leaseName"], "-n", election["leaseNamespace"],
            "--ignore-not-found")


def _check(requests: set[Request], grants: list[Grant], *, unused_allowed: bool) -> None:
    denied = sorted(str(r) for r in requests if not any(g.allows(r) for g in grants))
    assert not denied, f"requests the manifests do not allow: {denied}"
    if unused_allowed:
        return
    unused = sorted(p for g in grants for p in g.permissions()
                    if not g.used_by(p, requests) and p not in RARE_PERMISSIONS)
    assert not unused, f"permissions no request used (and not declared rare): {unused}"
    granted = {p for g in grants for p in g.permissions()}
    stale = sorted(set(RARE_PERMISSIONS) - granted)
    assert not stale, f"rare permissions that the manifests no longer grant: {stale}"


@pytest.mark.embedded_only("reads the embedded server's audit of every request")
def test_shipped_configuration_needs_only_the_main_rbac(
        sim: AnyCluster, sim_kubectl: Kubectl, rendered: Rendered,
        installed: dict[str, Path]) -> None:
    """With the configuration as shipped (virtual nodes off), manifests/ alone suffices."""
    document = _fast(config_document(rendered.main))
    sim_kubectl("create", "namespace", "rbac-main")
    _delete_leader_lease(sim_kubectl, document)
    log = _recording(sim)
    scheduler = SchedulerThread(sim.kubeconfig, **document)
    try:
        scheduler.start()
        for pod in (_pod("fits", "100m", annotations={"wssp/explain": "true"}),
                    _pod("too-big", "64")):
            sim_kubectl("create", "-n", "rbac-main", "-f", "-", input=yaml.safe_dump(pod))
        wait_for(lambda: sim_kubectl.json("get", "pod", "fits", "-n", "rbac-main")["spec"]
                 .get("nodeName"), timeout=30, what="the pod to be bound")
        wait_for(lambda: any(c.get("reason") == "Unschedulable" for c in sim_kubectl.json(
            "get", "pod", "too-big", "-n", "rbac-main")["status"].get("conditions", [])),
            timeout=30, what="the unschedulable condition")
    finally:
        scheduler.stop()
        _stop_recording(sim)
        sim_kubectl("delete", "namespace", "rbac-main", "--wait=false")
    requests = _scheduler_requests(sim, log)
    _check(requests, grants_for(rendered.main, *_service_account(rendered)),
           unused_allowed=True)
    # Sanity: the run did bind, write status and events, and hold the Lease.
    verbs = {(r.resource, r.verb) for r in requests}
    assert {("pods/binding", "create"), ("pods/status", "patch"), ("events", "create"),
            ("leases", "create"), ("secrets", "get")} <= verbs


@pytest.mark.embedded_only("reads the embedded server's audit of every request")
def test_rbac_allows_every_request_and_grants_nothing_unused(
        sim: AnyCluster, sim_kubectl: Kubectl, rendered: Rendered,
        installed: dict[str, Path], tmp_path: Path) -> None:
    """Fragments and virtual nodes on: manifests/ plus manifests/virtual-nodes/ allow every
    request the scheduler makes, and every permission they grant is used."""
    from pyscheduler_sim.cloud import BackgroundCloudSim
    from pyscheduler_sim.cloud import PoolSpec as CloudPool
    from pyscheduler.virtual.node import PoolConfig

    example = virtual_nodes_example(rendered.main)
    pools = example["virtualNodes"]["pools"]
    document = _fast({**config_document(rendered.main), **example})
    document["storage"] = {**document["storage"], "allowedFileDirs": [str(COST_TIER_WASM.parent)]}
    document["rebalancer"] = {**example["rebalancer"], "intervalSeconds": 0.5,
                              "minCloudSeconds": 0.5, "readyTimeoutSeconds": 20}
    ns = "rbac-virtual"
    virtual_nodes = [PoolConfig(p["name"], p["platform"]).node_name for p in pools]
    # A node left by an earlier run: the scheduler adopts it (and patches its labels back).
    sim_kubectl("create", "-f", "-", input=yaml.safe_dump(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": virtual_nodes[0]}}))
    sim_kubectl("create", "namespace", ns)
    _delete_leader_lease(sim_kubectl, document)
    fragment = find(rendered.examples, "WsspSchedulerConfiguration")
    local_fragment = {**fragment, "spec": {**fragment["spec"],
                                           "url": f"file://{COST_TIER_WASM}"}}
    cloud_pools = [CloudPool(p["name"], p["platform"], creation_latency_seconds=0.02)
                   for p in pools]
    with BackgroundCloudSim(cloud_pools, seed=1) as cloud:
        document["virtualNodes"] = {**example["virtualNodes"], "cloudUrl": cloud.url,
                                    "heartbeatSeconds": 0.5, "reconcileSeconds": 0.5,
                                    "orphanGraceSeconds": 1}
        log = _recording(sim)
        scheduler = SchedulerThread(sim.kubeconfig, **document)
        try:
            scheduler.start()
            _exercise_everything(sim_kubectl, scheduler, ns, local_fragment, virtual_nodes, log)
        finally:
            scheduler.stop()
            _stop_recording(sim)
            sim_kubectl("delete", "wssp", fragment["metadata"]["name"], "--wait=false")
            sim_kubectl("delete", "namespace", ns, "--wait=false")
    requests = _scheduler_requests(sim, log)
    _check(requests, grants_for(rendered.main + rendered.virtual, *_service_account(rendered)),
           unused_allowed=False)


def _on_virtual(pod: Obj, virtual_nodes: Sequence[str]) -> bool:
    return pod["spec"].get("nodeName") in virtual_nodes


def _exercise_everything(kubectl: Kubectl, scheduler: SchedulerThread, ns: str, fragment: Obj,
                         virtual_nodes: Sequence[str], log: list[AuditRecord]) -> None:
    """Fill the real nodes, burst a Deployment's pod and a bare pod to the cloud, keep one pod
    unschedulable, load a fragment, then free the real nodes so that both burst pods move back
    (the bare one copied, the Deployment's evicted)."""
    def create(doc: Obj) -> None:
        kubectl("create", "-n", ns, "-f", "-", input=yaml.safe_dump(doc))

    def pods() -> list[Obj]:
        return [p for p in kubectl.json("get", "pods", "-n", ns)["items"]
                if not p["metadata"].get("deletionTimestamp")]

    kubectl("create", "-f", "-", input=yaml.safe_dump(fragment))
    # Claims bound with their pods: one provisioned on the node chosen (the selected-node
    # annotation), one given a static volume (its claimRef).
    kubectl("create", "-f", "-", input=yaml.safe_dump_all([
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
         "metadata": {"name": f"{ns}-provisioned"}, "provisioner": "disk.csi.example.com",
         "volumeBindingMode": "WaitForFirstConsumer"},
        {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
         "metadata": {"name": f"{ns}-static"}, "provisioner": "kubernetes.io/no-provisioner",
         "volumeBindingMode": "WaitForFirstConsumer"},
        {"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": f"{ns}-static"},
         "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"],
                  "storageClassName": f"{ns}-static", "hostPath": {"path": "/data"}}}]))
    for kind in ("provisioned", "static"):
        create({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": kind},
                "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": f"{ns}-{kind}",
                         "resources": {"requests": {"storage": "1Gi"}}}})
        with_claim = _pod(f"uses-{kind}", "10m")
        with_claim["spec"]["volumes"] = [{"name": "data",
                                          "persistentVolumeClaim": {"claimName": kind}}]
        create(with_claim)
    wait_for(lambda: sum(1 for p in pods() if p["spec"].get("nodeName")) == 2, timeout=20,
             what="the pods with claims to be bound")
    for i in range(2):   # 1500m of each real node's 2 cpu
        create(_pod(f"filler-{i}", "1500m", labels={"role": "filler"}))
    wait_for(lambda: sum(1 for p in pods() if p["spec"].get("nodeName")) == 4, timeout=20,
             what="the fillers to be bound")
    template = _pod("x", "600m", labels={"app": "burst"})
    create({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "burst"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "burst"}},
                     "template": {"metadata": template["metadata"],
                                  "spec": template["spec"]}}})
    create(_pod("bare", "600m"))
    create(_pod("stays", "600m", annotations={"wssp/burst": "never"}))

    def burst_running() -> bool:
        burst = [p for p in pods() if _on_virtual(p, virtual_nodes)]
        return len(burst) == 2 and all(p["status"].get("phase") == "Running" for p in burst)
    wait_for(burst_running, timeout=30, what="two pods running on the cloud")
    wait_for(lambda: kubectl.json("get", "wssp", fragment["metadata"]["name"])
             .get("status", {}).get("phase") == "Ready", timeout=30, what="the fragment")
    # FailedScheduling repeats for the pod that may not burst: its count is patched on stop.
    wait_for(lambda: scheduler.call(lambda: scheduler.app.scheduler.recorder.aggregated) > 0,
             timeout=20, what="a repeated FailedScheduling event")
    kubectl("delete", "pods", "-n", ns, "-l", "role=filler", "--grace-period=0", "--wait=true")

    def moved_back() -> bool:
        current = [p for p in pods() if not p["metadata"]["name"].startswith("uses-")]
        return (len(current) == 3 and not any(_on_virtual(p, virtual_nodes) for p in current)
                and all(p["status"].get("phase") == "Running" for p in current)
                and any(p["metadata"]["name"].startswith("bare-rb-") for p in current))
    wait_for(moved_back, timeout=60, what="the burst pods to move back to real nodes")

    def renewed() -> bool:
        paths = [(r.method, r.path) for r in list(log)]
        return any(m == "PUT" and "/leases/" in p for m, p in paths) and any(
            m == "PATCH" and "/namespaces/kube-node-lease/leases/" in p for m, p in paths)
    wait_for(renewed, timeout=20, what="the leader and node Leases to be renewed")


def _service_account_kubeconfig(sim: AnyCluster, rendered: Rendered, path: Path) -> Path:
    """A kubeconfig that authenticates as the Deployment's ServiceAccount, with a token from
    the TokenRequest API, as the kubelet mounts one into the scheduler's pod."""
    from pyscheduler_sim.cluster import kubeconfig as kubeconfig_for

    core = client.CoreV1Api(config.new_client_from_config(config_file=str(sim.kubeconfig)))
    account, namespace = _service_account(rendered)
    token = core.create_namespaced_service_account_token(account, namespace, {
        "spec": {"audiences": ["https://kubernetes.default.svc.cluster.local"],
                 "expirationSeconds": 3600}}).status.token
    path.write_text(yaml.safe_dump(kubeconfig_for(sim.url, token, sim.ca_file.read_bytes())))
    return path


@pytest.mark.real_only("kube-apiserver enforces RBAC; the embedded cluster authorizes every "
                       "request (its audit is checked against the rules instead)")
def test_the_shipped_service_account_is_enough_on_a_real_server(
        sim: AnyCluster, sim_kubectl: Kubectl, rendered: Rendered,
        installed: dict[str, Path], tmp_path: Path) -> None:
    """The scheduler runs as the shipped ServiceAccount, bound by manifests/ alone, on a server
    that denies whatever the rules do not grant: it leads, binds, reports and records."""
    document = _fast(config_document(rendered.main))
    ns = "rbac-real"
    sim_kubectl("create", "namespace", ns)
    _delete_leader_lease(sim_kubectl, document)
    scheduler = SchedulerThread(_service_account_kubeconfig(sim, rendered, tmp_path / "kc"),
                                **document)
    try:
        scheduler.start()
        for pod in (_pod("fits", "100m", annotations={"wssp/explain": "true"}),
                    _pod("too-big", "64")):
            sim_kubectl("create", "-n", ns, "-f", "-", input=yaml.safe_dump(pod))
        fits = wait_for(lambda: (lambda p: p["spec"].get("nodeName") and p)(
            sim_kubectl.json("get", "pod", "fits", "-n", ns)), timeout=30,
            what="the pod to be bound")
        assert "wssp/decision" in fits["metadata"]["annotations"]
        wait_for(lambda: any(c.get("reason") == "Unschedulable" for c in sim_kubectl.json(
            "get", "pod", "too-big", "-n", ns)["status"].get("conditions", [])),
            timeout=30, what="the unschedulable condition")
        events = sim_kubectl.json("get", "events", "-n", ns)["items"]
        assert {"Scheduled", "FailedScheduling"} <= {e["reason"] for e in events}
        election = document["leaderElection"]
        lease = sim_kubectl.json("get", "lease", election["leaseName"], "-n",
                                 election["leaseNamespace"])
        assert lease["spec"]["holderIdentity"]
    finally:
        scheduler.stop()
        sim_kubectl("delete", "namespace", ns, "--wait=false")
