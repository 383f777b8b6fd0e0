"""PriorityClasses and pod priority on the embedded cluster, through the official client and
kubectl: the system classes, kube's Priority admission answers, and ``kubectl create
priorityclass`` (a protobuf body).

The cluster is this module's own: a ``globalDefault`` class changes every pod created after
it, which must not leak into other tests."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from kubernetes.client.rest import ApiException

from pyscheduler_sim.harness import BackgroundCluster
from tests.conftest import KUBECTL, Kubectl, small_cluster, wait_for


@pytest.fixture(scope="module")
def own(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundCluster]:
    with BackgroundCluster(small_cluster(), tmp_path_factory.mktemp("priority")) as c:
        yield c


@pytest.fixture(scope="module")
def api(own: BackgroundCluster) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(own.kubeconfig))


@pytest.fixture(scope="module")
def kubectl(own: BackgroundCluster, tmp_path_factory: pytest.TempPathFactory) -> Kubectl:
    if KUBECTL is None:
        pytest.skip("kubectl is not installed on this machine")
    return Kubectl(Path(own.kubeconfig), tmp_path_factory.mktemp("kubectl-cache"))


@pytest.fixture
def namespace(api: client.ApiClient) -> str:
    name = f"t-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(api).create_namespace({"metadata": {"name": name}})
    return name


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                     **spec}}


def status_of(exc: ApiException) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(exc.body)
    return body


def test_system_classes_through_the_typed_client(api: client.ApiClient) -> None:
    scheduling = client.SchedulingV1Api(api)
    classes = {pc.metadata.name: pc for pc in scheduling.list_priority_class().items}
    assert {"system-node-critical", "system-cluster-critical"} <= set(classes)
    node = classes["system-node-critical"]
    assert (node.value, node.preemption_policy, node.global_default) == (
        2000001000, "PreemptLowerPriority", None)
    with pytest.raises(ApiException) as caught:
        scheduling.delete_priority_class("system-node-critical")
    assert caught.value.status == 403
    assert status_of(caught.value)["message"] == (
        'priorityclasses.scheduling.k8s.io "system-node-critical" is forbidden: this is a '
        "system priority class and cannot be deleted")


def test_pods_get_their_class_priority(api: client.ApiClient, namespace: str) -> None:
    scheduling, core = client.SchedulingV1Api(api), client.CoreV1Api(api)
    scheduling.create_priority_class({"metadata": {"name": "batch-low"}, "value": 100,
                                      "preemptionPolicy": "Never"})
    created = core.create_namespaced_pod(namespace, pod("p", priorityClassName="batch-low"))
    assert (created.spec.priority, created.spec.preemption_policy) == (100, "Never")
    plain = core.create_namespaced_pod(namespace, pod("q"))
    assert (plain.spec.priority, plain.spec.preemption_policy) == (0, "PreemptLowerPriority")
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod(namespace, pod("r", priorityClassName="missing"))
    assert (caught.value.status, status_of(caught.value)["reason"]) == (403, "Forbidden")
    assert status_of(caught.value)["message"] == (
        'pods "r" is forbidden: no PriorityClass with name missing was found')
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod(namespace, pod("s", priorityClassName="batch-low",
                                                  priority=5))
    assert status_of(caught.value)["message"] == (
        'pods "s" is forbidden: the integer value of priority (5) must not be provided in pod '
        "spec; priority admission controller computed 100 from the given PriorityClass name")


def test_controller_made_pods_are_admitted_too(api: client.ApiClient, namespace: str) -> None:
    client.SchedulingV1Api(api).create_priority_class({"metadata": {"name": "web-high"},
                                                       "value": 5000})
    client.AppsV1Api(api).create_namespaced_deployment(namespace, {
        "metadata": {"name": "web"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": {"priorityClassName": "web-high", "containers": [
                                  {"name": "c", "image": "nginx:1.27"}]}}}})
    core = client.CoreV1Api(api)
    pods = wait_for(lambda: (items := core.list_namespaced_pod(namespace).items)
                    and len(items) == 2 and items, what="2 pods")
    assert {p.spec.priority for p in pods} == {5000}


def test_global_default_class(api: client.ApiClient, namespace: str,
                              kubectl: Kubectl) -> None:
    scheduling, core = client.SchedulingV1Api(api), client.CoreV1Api(api)
    scheduling.create_priority_class({"metadata": {"name": "everyone"}, "value": 7,
                                      "globalDefault": True})
    try:
        created = core.create_namespaced_pod(namespace, pod("d"))
        assert (created.spec.priority_class_name, created.spec.priority) == ("everyone", 7)
        with pytest.raises(ApiException) as caught:
            scheduling.create_priority_class({"metadata": {"name": "another"}, "value": 8,
                                              "globalDefault": True})
        assert caught.value.status == 403
        assert status_of(caught.value)["message"] == (
            'priorityclasses.scheduling.k8s.io "another" is forbidden: PriorityClass everyone '
            "is already marked as default. Only one default can exist")
        rows = kubectl("get", "pc", "everyone").stdout.splitlines()
        assert rows[0].split() == ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"]
        assert rows[1].split()[:3] == ["everyone", "7", "true"]
    finally:
        scheduling.delete_priority_class("everyone")


def test_kubectl_create_priorityclass_and_its_refusals(kubectl: Kubectl) -> None:
    # A typed kubectl command: its body is protobuf.
    out = kubectl("create", "priorityclass", "nightly", "--value=300",
                  "--preemption-policy=Never", "--description=nightly jobs")
    assert out.stdout.strip() == "priorityclass.scheduling.k8s.io/nightly created"
    created = kubectl.json("get", "priorityclass", "nightly")
    assert (created["value"], created["preemptionPolicy"], created["description"]) == (
        300, "Never", "nightly jobs")
    refused = kubectl("create", "priorityclass", "system-mine", "--value=1", check=False)
    assert refused.returncode != 0
    assert refused.stderr.strip() == (
        'error: failed to create priorityclass: PriorityClass.scheduling.k8s.io "system-mine" '
        "is invalid: metadata.name: Forbidden: priority class names with 'system-' prefix are "
        "reserved for system use only. error: system-mine is not a known system priority "
        "class")
    refused = kubectl("delete", "pc", "system-cluster-critical", check=False)
    assert refused.stderr.strip() == (
        'Error from server (Forbidden): priorityclasses.scheduling.k8s.io '
        '"system-cluster-critical" is forbidden: this is a system priority class and cannot be '
        "deleted")
    patched = kubectl("patch", "pc", "nightly", "--type=merge", "-p", '{"value": 301}',
                      check=False)
    assert 'value: Forbidden: may not be changed in an update.' in patched.stderr
    rows = kubectl("get", "pc").stdout.splitlines()
    names = [row.split()[0] for row in rows[1:]]
    assert {"nightly", "system-cluster-critical", "system-node-critical"} <= set(names)
