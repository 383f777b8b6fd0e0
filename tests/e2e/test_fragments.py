"""A fragment published to storage and described by a WsspSchedulerConfiguration becomes Ready,
and the pods that name it are placed by it.

The fragment is the cost-tier example (``fragments/examples/cost-tier``) pointed at the
``kubernetes.io/hostname`` label: allowed one node, every pod naming it must land there; allowed
no node, a pod naming it must stay Pending with the fragment's own reason in the message.
"""

from __future__ import annotations

import hashlib
import io
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from tests.e2e.conftest import E2EConfig, pause_pod, pod_condition, wait_for

GROUP, VERSION, PLURAL = "wssp.pyscheduler.io", "v1alpha1", "wsspschedulerconfigurations"
CRD_NAME = f"{PLURAL}.{GROUP}"
MODULE = Path(__file__).resolve().parents[2] / "fragments/examples/cost-tier/cost-tier.wasm"
REASON = "node(s) are not in an allowed cost tier"

Publish = Callable[[str, bytes], str]


@pytest.fixture(scope="module")
def crd_installed(api: client.ApiClient) -> None:
    try:
        client.ApiextensionsV1Api(api).read_custom_resource_definition(CRD_NAME)
    except client.ApiException as exc:
        if exc.status == 404:
            pytest.skip(f"the CRD {CRD_NAME} is not installed in the cluster")
        raise


@pytest.fixture
def publish(e2e: E2EConfig) -> Iterator[Publish]:
    """Store a module where the scheduler can fetch it; returns its URL. Removed afterwards."""
    removals: list[Callable[[], None]] = []
    if e2e.fragment_dir is not None:
        directory = e2e.fragment_dir

        def to_file(key: str, data: bytes) -> str:
            path = directory / key
            path.write_bytes(data)
            path.chmod(0o644)
            removals.append(lambda: path.unlink(missing_ok=True))
            return path.resolve().as_uri()
        yield to_file
    elif e2e.s3 is not None:
        from minio import Minio

        s3 = e2e.s3
        storage = Minio(s3.endpoint, access_key=s3.access_key, secret_key=s3.secret_key,
                        secure=s3.secure)
        if not storage.bucket_exists(s3.bucket):
            storage.make_bucket(s3.bucket)

        def to_bucket(key: str, data: bytes) -> str:
            storage.put_object(s3.bucket, key, io.BytesIO(data), len(data),
                               content_type="application/wasm")
            removals.append(lambda: storage.remove_object(s3.bucket, key))
            return f"s3://{s3.bucket}/{key}"
        yield to_bucket
    else:
        pytest.skip("no fragment storage reachable from the suite: set E2E_FRAGMENT_DIR (a "
                    "directory in storage.allowedFileDirs) or E2E_S3_ENDPOINT and its keys")
    for remove in removals:
        remove()


@pytest.fixture
def resources(api: client.ApiClient) -> Iterator[list[str]]:
    """Names of fragment resources to delete after the test (they are cluster-scoped)."""
    custom = client.CustomObjectsApi(api)
    names: list[str] = []
    yield names
    for name in names:
        try:
            custom.delete_cluster_custom_object(GROUP, VERSION, PLURAL, name)
        except client.ApiException as exc:
            if exc.status != 404:
                raise


def _resource(name: str, url: str, digest: str, allowed: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "WsspSchedulerConfiguration",
        "metadata": {"name": name},
        "spec": {"url": url, "sha256": digest,
                 "stages": {"filter": {"mode": "extend"}, "score": {"mode": "extend",
                                                                    "weight": 1}},
                 "config": {"label": "kubernetes.io/hostname", "allowed": allowed},
                 "failurePolicy": "Fail"},
    }


def _target_node(core: client.CoreV1Api) -> str:
    """The hostname label of a node pods can go to (the last by name, not the first an
    unordered choice would make)."""
    usable = []
    for node in core.list_node().items:
        taints = [t for t in node.spec.taints or [] if t.effect in ("NoSchedule", "NoExecute")]
        ready = [c for c in node.status.conditions or [] if c.type == "Ready"]
        labels = node.metadata.labels or {}
        if (not node.spec.unschedulable and not taints and ready and ready[0].status == "True"
                and labels.get("type") != "virtual-kubelet"
                and "kubernetes.io/hostname" in labels):
            usable.append(labels["kubernetes.io/hostname"])
    assert usable, "no schedulable node without taints"
    return sorted(usable)[-1]


def test_a_published_fragment_becomes_ready_and_places_the_pods_that_name_it(
        crd_installed: None, publish: Publish, resources: list[str], api: client.ApiClient,
        core: client.CoreV1Api, namespace: str, e2e: E2EConfig) -> None:
    custom = client.CustomObjectsApi(api)
    data = MODULE.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    tag = uuid.uuid4().hex[:8]
    url = publish(f"e2e-{tag}.wasm", data)
    target = _target_node(core)
    one = f"e2e-one-{tag}"
    none = f"e2e-none-{tag}"
    for name, allowed in ((one, [target]), (none, ["e2e-no-such-node"])):
        resources.append(f"{name}-v1.0.0")
        custom.create_cluster_custom_object(GROUP, VERSION, PLURAL,
                                            _resource(f"{name}-v1.0.0", url, digest, allowed))

    for name in (one, none):
        def ready(resource: str = f"{name}-v1.0.0") -> Any:
            obj: Any = custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, resource)
            status = obj.get("status") or {}
            if status.get("phase") == "Failed":
                pytest.fail(f"{resource} Failed: {status.get('message')}")
            return obj if status.get("phase") == "Ready" else None

        obj = wait_for(ready, timeout=e2e.timeout, what=f"{name}-v1.0.0 to be Ready")
        status = obj["status"]
        assert status["digest"] == digest
        assert status["observedGeneration"] == obj["metadata"]["generation"]
        conditions = {c["type"]: c for c in status.get("conditions") or []}
        assert conditions["Ready"]["status"] == "True"

    # Following the name (no version): the newest Ready version, here the only one.
    pods = [f"placed-{i}" for i in range(3)]
    for pod in pods:
        core.create_namespaced_pod(namespace, pause_pod(
            pod, e2e, annotations={"wssp/schedulefragment": one, "wssp/burst": "never"}))
    core.create_namespaced_pod(namespace, pause_pod(
        "refused", e2e, annotations={"wssp/schedulefragment": f"{none}-v1.0.0",
                                     "wssp/burst": "never"}))
    for pod in pods:
        node = wait_for(lambda: core.read_namespaced_pod(pod, namespace).spec.node_name,
                        timeout=e2e.timeout, what=f"pod {pod} to be bound")
        labels = core.read_node(node).metadata.labels or {}
        assert labels.get("kubernetes.io/hostname") == target, \
            f"{pod} went to {node}; the fragment allows only {target}"

    def refused() -> Any:
        condition = pod_condition(core.read_namespaced_pod("refused", namespace),
                                  "PodScheduled")
        return condition if condition is not None and condition.status == "False" else None

    condition = wait_for(refused, timeout=e2e.timeout, what="pod refused to be unschedulable")
    assert condition.reason == "Unschedulable"
    assert REASON in (condition.message or ""), condition.message
