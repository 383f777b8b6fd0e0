"""An informer's transform changes listed and watched objects before the cache and the
handlers see them (how the scheduler drops managedFields)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from pyscheduler.kube.client import KubeClient, api_path
from pyscheduler.kube.informer import Informer, drop_managed_fields
from pyscheduler_sim.harness import BackgroundCluster
from tests.integration.test_kube_client import configmap, run
from tests.integration.test_kube_informer import eventually


def test_transform_applies_to_listed_and_watched_objects(cluster: BackgroundCluster,
                                                        namespace: str) -> None:
    def drop_bulk(obj: dict[str, Any]) -> None:
        (obj.get("data") or {}).pop("bulk", None)

    async def body() -> None:
        async with await KubeClient.from_kubeconfig(str(cluster.kubeconfig)) as client:
            collection = api_path("v1", "configmaps", namespace=namespace)
            await client.create(collection, configmap("listed", bulk="x" * 1000, v="1"))
            seen: list[dict[str, Any]] = []
            informer = Informer(client, collection, transform=drop_bulk,
                                on_add=seen.append, on_update=lambda old, new: seen.append(new))
            informer.start()
            try:
                await asyncio.wait_for(informer.synced.wait(), 5)
                await client.create(collection, configmap("watched", bulk="y" * 1000, v="2"))
                await client.patch(api_path("v1", "configmaps", namespace=namespace,
                                            name="listed"), {"data": {"v": "3"}})
                await eventually(lambda: len(seen) == 3, what="add, add, update")
                assert [o["data"] for o in seen] == [{"v": "1"}, {"v": "2"}, {"v": "3"}]
                assert all("bulk" not in o["data"] for o in informer.objects.values())
            finally:
                await informer.stop()
    run(body)


def test_drop_managed_fields() -> None:
    obj = {"metadata": {"name": "a", "managedFields": [{"manager": "kubectl"}]}}
    drop_managed_fields(obj)
    assert obj == {"metadata": {"name": "a"}}
    drop_managed_fields({"metadata": None})  # nothing to drop, nothing raised


def test_slim_pod_keeps_what_scheduling_reads_of_a_bound_pod() -> None:
    from pyscheduler.kube.informer import slim_pod

    def bound(node: str) -> dict[str, Any]:
        return {"metadata": {"name": "p", "managedFields": [{}]},
                "spec": {"nodeName": node, "containers": [{"name": "c"}]},
                "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z",
                           "qosClass": "Burstable", "podIP": "10.0.0.1",
                           "conditions": [{"type": "Ready", "status": "True"},
                                          {"type": "DisruptionTarget", "status": "True"}],
                           "containerStatuses": [{"name": "c", "ready": True}]}}

    real = bound("n-0")
    slim_pod(real, keep_whole_on=lambda node: node.startswith("wssp-virtual-"))
    assert real["status"] == {"phase": "Running", "startTime": "2026-01-01T00:00:00Z",
                              "qosClass": "Burstable",
                              "conditions": [{"type": "DisruptionTarget", "status": "True"}]}
    assert "managedFields" not in real["metadata"]
    assert real["spec"] == bound("n-0")["spec"]
    # A pod on a virtual node keeps its whole status (the provider reads it); a pending pod
    # keeps its conditions (the scheduler reads its PodScheduled condition).
    virtual = bound("wssp-virtual-aci")
    slim_pod(virtual, keep_whole_on=lambda node: node.startswith("wssp-virtual-"))
    assert virtual["status"] == bound("x")["status"]
    pending = {"metadata": {"name": "q"}, "spec": {}, "status": {
        "phase": "Pending", "conditions": [{"type": "PodScheduled", "status": "False"}]}}
    slim_pod(pending)
    assert pending["status"]["conditions"] == [{"type": "PodScheduled", "status": "False"}]


def _rich_pods() -> list[dict[str, Any]]:
    """Bound pods using every part of a spec the cache counts, and the parts it does not."""
    sel = {"matchLabels": {"app": "a"}}
    common: dict[str, Any] = {
        "schedulerName": "pyscheduler", "priority": 7, "nodeName": "n-1",
        "tolerations": [{"key": "k", "operator": "Exists", "effect": "NoExecute"}],
        "dnsPolicy": "ClusterFirst", "restartPolicy": "Always", "securityContext": {},
        "serviceAccountName": "default", "terminationGracePeriodSeconds": 30,
        "nodeSelector": {"disk": "ssd"}}
    app = {"name": "app", "image": "registry.example.com/app:v1", "env": [{"name": "A",
           "value": "x" * 500}], "command": ["/app"],
           "resources": {"requests": {"cpu": "250m", "memory": "64Mi"},
                         "limits": {"nvidia.com/gpu": "1"}},
           "ports": [{"containerPort": 80}, {"containerPort": 8443, "hostPort": 443,
                                             "protocol": "TCP"}],
           "volumeMounts": [{"name": "data", "mountPath": "/data"}]}
    sidecar = {"name": "proxy", "image": "proxy:1", "restartPolicy": "Always",
               "resources": {"requests": {"cpu": "100m"}},
               "ports": [{"containerPort": 9000, "hostPort": 9000}]}
    init = {"name": "setup", "image": "setup:1", "resources": {"requests": {"cpu": "2"}},
            "ports": [{"containerPort": 7000, "hostPort": 7000}]}
    return [
        {"metadata": {"name": "rich", "namespace": "ns", "uid": "u-1", "labels": {"app": "a"},
                      "annotations": {"team": "x", "kubectl.kubernetes.io/last-applied-"
                                      "configuration": "{" + "x" * 2000 + "}"},
                      "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                           "name": "rs", "uid": "rs-1", "controller": True}]},
         "spec": {**common, "containers": [app], "initContainers": [sidecar, init],
                  "overhead": {"cpu": "10m", "memory": "1Mi"},
                  "affinity": {
                      "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
                          {"labelSelector": sel, "topologyKey": "kubernetes.io/hostname"}]},
                      "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                          {"weight": 5, "podAffinityTerm": {
                              "labelSelector": sel, "topologyKey": "zone"}}]}},
                  "topologySpreadConstraints": [
                      {"maxSkew": 1, "topologyKey": "zone", "labelSelector": sel,
                       "whenUnsatisfiable": "DoNotSchedule",
                       "matchLabelKeys": ["pod-template-hash"]}],
                  "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}},
                              {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {}}},
                              {"name": "cfg", "configMap": {"name": "cfg"}}]},
         "status": {"phase": "Running", "startTime": "2026-01-01T00:00:00Z"}},
        {"metadata": {"name": "hostnet", "namespace": "ns", "uid": "u-2"},
         "spec": {**common, "hostNetwork": True, "containers": [
             {"name": "c", "image": "c:1", "ports": [{"containerPort": 53, "protocol": "UDP"},
                                                     {"containerPort": 8080}]}]},
         "status": {"phase": "Running"}},
    ]


def test_slim_pod_leaves_what_the_cache_counts_of_a_bound_pod_unchanged() -> None:
    """Every field the scheduler reads of a pod already on a node parses the same from the
    slimmed pod as from the whole one, and what it does not read is gone."""
    import copy

    from pyscheduler.framework.pod import pod_info
    from pyscheduler.framework.volumes import claim_refs
    from pyscheduler.kube.informer import slim_pod

    read_of_bound = ("uid", "namespace", "name", "labels", "scheduler_name", "node_name",
                     "priority", "phase", "deleting", "gated", "requests", "nonzero_cpu",
                     "nonzero_memory", "host_ports", "spread", "affinity", "anti_affinity",
                     "preferred_affinity", "preferred_anti_affinity", "claims")
    for whole in _rich_pods():
        slim = copy.deepcopy(whole)
        slim_pod(slim)
        full_info, slim_info = pod_info(whole), pod_info(slim)
        for field in read_of_bound:
            assert getattr(slim_info, field) == getattr(full_info, field), field
        assert claim_refs(slim_info) == claim_refs(full_info)
        assert full_info.host_ports  # the comparison above compared something
        spec = slim["spec"]
        assert not {"tolerations", "dnsPolicy", "securityContext", "serviceAccountName",
                    "restartPolicy", "terminationGracePeriodSeconds"} & set(spec)
        for c in spec["containers"] + spec.get("initContainers", []):
            assert set(c) <= {"name", "resources", "ports", "restartPolicy"}
        assert "kubectl.kubernetes.io/last-applied-configuration" not in \
            slim["metadata"].get("annotations", {})
    rich = copy.deepcopy(_rich_pods()[0])
    slim_pod(rich)
    # Of the app container's ports only the one held on the host is left; with hostNetwork
    # every container port is one.
    assert rich["spec"]["containers"][0]["ports"] == [
        {"containerPort": 8443, "hostPort": 443, "protocol": "TCP"}]
    assert rich["metadata"]["annotations"] == {"team": "x"}
    assert rich["metadata"]["ownerReferences"]
    hostnet = copy.deepcopy(_rich_pods()[1])
    slim_pod(hostnet)
    assert len(hostnet["spec"]["containers"][0]["ports"]) == 2
    # A pending pod keeps its whole spec: it is still to be scheduled.
    pending = copy.deepcopy(_rich_pods()[0])
    del pending["spec"]["nodeName"]
    before = copy.deepcopy(pending)
    slim_pod(pending)
    assert pending == before


@pytest.mark.parametrize("pod", [
    {"metadata": "x", "spec": {"nodeName": "n", "containers": "x", "initContainers": [1, None]},
     "status": []},
    {"metadata": {"annotations": ["x"]}, "spec": {"nodeName": "n", "containers": [
        {"name": "c", "ports": "x"}, {"name": "d", "ports": [1, {"hostPort": "x"}, {}]}]}},
    {"spec": {"nodeName": 5, "containers": [{"image": "i"}]}},
    {"spec": ["nodeName"]},
    {"metadata": {"annotations": None}, "spec": {"nodeName": "n"}, "status": None},
])
def test_slim_pod_takes_any_shape(pod: dict[str, Any]) -> None:
    """Whatever an API server sends, the transform changes what it understands and leaves the
    rest: it never raises (a transform that raised would fail the whole list)."""
    import copy

    from pyscheduler.kube.informer import slim_pod
    slim_pod(copy.deepcopy(pod))
