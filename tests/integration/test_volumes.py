"""Persistent volumes on the embedded cluster: a StatefulSet whose WaitForFirstConsumer claims
are provisioned where its pods are spread, pods coming back to their volume's zone, a missing
claim reported and then scheduled, immediate claims waiting for the PV controller, static
local volumes pinning pods to their node, and ReadWriteOncePod."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config

from pyscheduler_sim.cluster import ClusterSpec, PoolSpec
from tests.conftest import AnyCluster, SchedulerThread, open_cluster, wait_for

Obj = dict[str, Any]
ZONE = "topology.kubernetes.io/zone"
NODES = 6
NOT_HELPFUL = f"preemption: 0/{NODES} nodes are available: {NODES} Preemption is not helpful " \
              "for scheduling."


@pytest.fixture(scope="module")
def sim(request: pytest.FixtureRequest, server: str,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[AnyCluster]:
    spec = ClusterSpec(pools=[PoolSpec(name="n", count=NODES, cpu="4", memory="8Gi",
                                       zones=("zone-a", "zone-b", "zone-c"))],
                       pod_start_seconds=0.05, pod_termination_seconds=0.2)
    with open_cluster(request, spec, tmp_path_factory.mktemp("volumes")) as c:
        storage = client.StorageV1Api(config.new_client_from_config(
            config_file=str(c.kubeconfig)))
        storage.create_storage_class({
            "metadata": {"name": "zonal"}, "provisioner": "zonal.csi.example.com",
            "volumeBindingMode": "WaitForFirstConsumer"})
        storage.create_storage_class({
            "metadata": {"name": "manual"}, "provisioner": "kubernetes.io/no-provisioner"})
        storage.create_storage_class({
            "metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer"})
        yield c


@pytest.fixture(scope="module")
def core(sim: AnyCluster) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(config_file=str(sim.kubeconfig)))


@pytest.fixture(scope="module")
def scheduler(sim: AnyCluster) -> Iterator[SchedulerThread]:
    s = SchedulerThread(sim.kubeconfig, leaderElection={"enabled": False}, seed=5).start()
    yield s
    s.stop()


@pytest.fixture
def ns(core: client.CoreV1Api) -> Iterator[str]:
    name = f"v-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    apps = client.AppsV1Api(core.api_client)
    for s in apps.list_namespaced_stateful_set(name).items:
        apps.delete_namespaced_stateful_set(s.metadata.name, name)
    core.delete_collection_namespaced_pod(name, grace_period_seconds=0)


def pod_spec(claims: dict[str, str], **spec: Any) -> Obj:
    return {"schedulerName": "pyscheduler",
            "containers": [{"name": "c", "image": "x",
                            "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}}}],
            "volumes": [{"name": volume, "persistentVolumeClaim": {"claimName": claim}}
                        for volume, claim in claims.items()], **spec}


def claim(name: str, storage_class: str, *, modes: tuple[str, ...] = ("ReadWriteOnce",),
          size: str = "1Gi") -> Obj:
    return {"metadata": {"name": name},
            "spec": {"accessModes": list(modes), "storageClassName": storage_class,
                     "resources": {"requests": {"storage": size}}}}


def scheduled_message(core: client.CoreV1Api, ns: str, name: str) -> Any:
    pod = core.read_namespaced_pod(name, ns)
    return next((c.message for c in pod.status.conditions or ()
                 if c.type == "PodScheduled" and c.status == "False"), None)


def node_zone(core: client.CoreV1Api, node: str) -> str:
    return str(core.read_node(node).metadata.labels[ZONE])


def volume_zones(volume: Any) -> list[str]:
    terms = volume.spec.node_affinity.required.node_selector_terms
    return [v for t in terms for e in t.match_expressions if e.key == ZONE for v in e.values]


def test_statefulset_claims_are_provisioned_where_its_pods_spread(
        core: client.CoreV1Api, ns: str, scheduler: SchedulerThread) -> None:
    apps = client.AppsV1Api(core.api_client)
    labels = {"app": "db"}
    apps.create_namespaced_stateful_set(ns, {
        "metadata": {"name": "db"},
        "spec": {"replicas": 3, "serviceName": "db", "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels}, "spec": pod_spec({}, **{
                     "topologySpreadConstraints": [{
                         "maxSkew": 1, "topologyKey": ZONE,
                         "whenUnsatisfiable": "DoNotSchedule",
                         "labelSelector": {"matchLabels": labels}}]})},
                 "volumeClaimTemplates": [claim("data", "zonal")]}})

    def running() -> list[Any]:
        pods = core.list_namespaced_pod(ns, label_selector="app=db").items
        return [p for p in pods if p.status.phase == "Running"]

    pods = wait_for(lambda: len(running()) == 3 and running(), timeout=30,
                    what="three StatefulSet pods running")
    zones = {p.metadata.name: node_zone(core, p.spec.node_name) for p in pods}
    assert sorted(zones.values()) == ["zone-a", "zone-b", "zone-c"]
    for p in pods:
        pvc = core.read_namespaced_persistent_volume_claim(f"data-{p.metadata.name}", ns)
        assert pvc.status.phase == "Bound"
        assert pvc.metadata.annotations["volume.kubernetes.io/selected-node"] == \
            p.spec.node_name
        volume = core.read_persistent_volume(pvc.spec.volume_name)
        assert volume_zones(volume) == [zones[p.metadata.name]]

    # A pod made again goes where its volume is: the bound claim's node affinity.
    first = core.read_namespaced_pod("db-1", ns)
    core.delete_namespaced_pod("db-1", ns)

    def recreated() -> Any:
        try:
            pod = core.read_namespaced_pod("db-1", ns)
        except client.ApiException as exc:
            if exc.status == 404:
                return None  # the old pod is gone, the new one not made yet
            raise
        return pod.metadata.uid != first.metadata.uid and pod.spec.node_name and pod

    again = wait_for(recreated, timeout=20, what="db-1 recreated and bound")
    assert node_zone(core, again.spec.node_name) == zones["db-1"]


def test_missing_claim_is_reported_then_scheduled_once_it_exists(
        core: client.CoreV1Api, ns: str, scheduler: SchedulerThread) -> None:
    core.create_namespaced_pod(ns, {"metadata": {"name": "p"},
                                    "spec": pod_spec({"data": "later"})})
    message = wait_for(lambda: scheduled_message(core, ns, "p"), what="unschedulable")
    assert message == f'0/{NODES} nodes are available: persistentvolumeclaim "later" not ' \
                      f"found. {NOT_HELPFUL}"
    events = wait_for(lambda: [e for e in core.list_namespaced_event(ns).items
                               if e.reason == "FailedScheduling"], what="event")
    assert events[0].message == message
    core.create_namespaced_persistent_volume_claim(ns, claim("later", "zonal"))
    node = wait_for(lambda: core.read_namespaced_pod("p", ns).spec.node_name, timeout=20,
                    what="bound once the claim exists")
    pvc = core.read_namespaced_persistent_volume_claim("later", ns)
    assert pvc.status.phase == "Bound"
    volume = core.read_persistent_volume(pvc.spec.volume_name)
    assert volume_zones(volume) == [node_zone(core, node)]


def test_immediate_claim_waits_for_the_volume_controller(
        core: client.CoreV1Api, ns: str, scheduler: SchedulerThread) -> None:
    core.create_namespaced_persistent_volume_claim(ns, claim("manual", "manual", size="5Gi"))
    core.create_namespaced_pod(ns, {"metadata": {"name": "p"},
                                    "spec": pod_spec({"data": "manual"})})
    message = wait_for(lambda: scheduled_message(core, ns, "p"), what="unschedulable")
    assert message == f"0/{NODES} nodes are available: pod has unbound immediate " \
                      f"PersistentVolumeClaims. {NOT_HELPFUL}"
    core.create_persistent_volume({
        "metadata": {"name": f"manual-{ns}"},
        "spec": {"capacity": {"storage": "10Gi"}, "accessModes": ["ReadWriteOnce"],
                 "storageClassName": "manual", "hostPath": {"path": "/data"}}})
    wait_for(lambda: core.read_namespaced_pod("p", ns).spec.node_name, timeout=20,
             what="bound after the PV controller bound its claim")


def test_static_local_volumes_pin_pods_to_their_node(
        core: client.CoreV1Api, ns: str, scheduler: SchedulerThread) -> None:
    nodes = sorted(n.metadata.name for n in core.list_node().items)
    target = nodes[-1]
    for size in ("20Gi", "10Gi"):
        core.create_persistent_volume({
            "metadata": {"name": f"local-{ns}-{size.lower()}"},
            "spec": {"capacity": {"storage": size}, "accessModes": ["ReadWriteOnce"],
                     "storageClassName": "local", "local": {"path": "/mnt/disk"},
                     "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                         {"key": "kubernetes.io/hostname", "operator": "In",
                          "values": [target]}]}]}}}})
    core.create_namespaced_persistent_volume_claim(ns, claim("fast", "local", size="5Gi"))
    # Both volumes must have reached the scheduler's informer as Available (the PV
    # controller's phase) before the pod is created: otherwise the only one it can use is the
    # right choice (kube-scheduler races the same way).
    names = {f"local-{ns}-20gi", f"local-{ns}-10gi"}

    def available() -> set[str]:
        volumes = scheduler.app.scheduler.cache.table.volumes.volumes
        return {name for name, v in volumes.items() if v.phase == "Available"}

    wait_for(lambda: names <= scheduler.call(available), what="volumes seen Available")
    core.create_namespaced_pod(ns, {"metadata": {"name": "p"},
                                    "spec": pod_spec({"data": "fast"})})
    assert wait_for(lambda: core.read_namespaced_pod("p", ns).spec.node_name, timeout=20,
                    what="bound") == target
    # The smaller volume that fits was chosen.
    pvc = wait_for(lambda: (c := core.read_namespaced_persistent_volume_claim("fast", ns))
                   .spec.volume_name and c, what="claim bound")
    assert pvc.spec.volume_name == f"local-{ns}-10gi"


def test_read_write_once_pod_claim_serves_one_pod(
        core: client.CoreV1Api, ns: str, scheduler: SchedulerThread) -> None:
    core.create_namespaced_persistent_volume_claim(
        ns, claim("solo", "zonal", modes=("ReadWriteOncePod",)))
    core.create_namespaced_pod(ns, {"metadata": {"name": "first"},
                                    "spec": pod_spec({"data": "solo"})})
    wait_for(lambda: core.read_namespaced_pod("first", ns).spec.node_name, timeout=20,
             what="first bound")
    core.create_namespaced_pod(ns, {"metadata": {"name": "second"},
                                    "spec": pod_spec({"data": "solo"})})
    message = wait_for(lambda: scheduled_message(core, ns, "second"), what="unschedulable")
    assert message.startswith(
        f"0/{NODES} nodes are available: {NODES} node has pod using PersistentVolumeClaim "
        "with the same name and ReadWriteOncePod access mode.")
    core.delete_namespaced_pod("first", ns, grace_period_seconds=0)
    wait_for(lambda: core.read_namespaced_pod("second", ns).spec.node_name, timeout=20,
             what="second bound once the first is gone")
