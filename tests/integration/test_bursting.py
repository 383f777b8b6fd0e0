"""Cloud bursting end to end on the embedded cluster and the simulated cloud: the scheduler
sends pods no real node fits to virtual nodes, the provider runs them as cloud instances, and
the rebalancer brings them back when real capacity frees up."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config

from pyscheduler_sim.cluster import ClusterSpec, PoolSpec
from pyscheduler_sim.cloud import BackgroundCloudSim
from pyscheduler_sim.cloud import PoolSpec as CloudPool
from tests.conftest import AnyCluster, SchedulerThread, open_cluster, wait_for

SCHEDULER = "burst-sched"
GI = 2**30


@pytest.fixture(scope="module")
def cloud() -> Iterator[BackgroundCloudSim]:
    pools = [CloudPool("aci", "azure", cpu_millis=100_000, memory_bytes=400 * GI,
                       instances=400, creation_latency_seconds=0.05, price_per_cpu_hour=0.05),
             CloudPool("eci", "alibaba", cpu_millis=50_000, memory_bytes=200 * GI,
                       instances=200, creation_latency_seconds=0.05, price_per_cpu_hour=0.02)]
    with BackgroundCloudSim(pools, seed=1) as c:
        yield c


@pytest.fixture(scope="module")
def sim(request: pytest.FixtureRequest, server: str,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[AnyCluster]:
    spec = ClusterSpec(pools=[PoolSpec(name="real", count=2, cpu="4", memory="16Gi")],
                       pod_start_seconds=0.05, pod_termination_seconds=0.1,
                       lease_renew_seconds=5)
    with open_cluster(request, spec, tmp_path_factory.mktemp("burst")) as c:
        yield c


@pytest.fixture(scope="module")
def api(sim: AnyCluster) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(sim.kubeconfig))


@pytest.fixture(scope="module")
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture(scope="module")
def scheduler(sim: AnyCluster, cloud: BackgroundCloudSim) -> Iterator[SchedulerThread]:
    s = SchedulerThread(sim.kubeconfig, schedulerName=SCHEDULER,
                        leaderElection={"enabled": False}, scheduleFragment=None,
                        podInitialBackoffSeconds=0.2, podMaxBackoffSeconds=1,
                        virtualNodes={"enabled": True, "cloudUrl": cloud.url,
                                      "heartbeatSeconds": 1, "reconcileSeconds": 0.5,
                                      "orphanGraceSeconds": 1,
                                      "pools": [{"name": "aci", "platform": "azure"},
                                                {"name": "eci", "platform": "alibaba"}]},
                        rebalancer={"intervalSeconds": 1, "minCloudSeconds": 1,
                                    "maxMovesPerCycle": 50, "maxMovesPerNamespace": 50,
                                    "readyTimeoutSeconds": 20}).start()
    wait_for(lambda: len(client.CoreV1Api(config.new_client_from_config(
        config_file=str(sim.kubeconfig))).list_node(
        label_selector="type=virtual-kubelet").items) == 2, what="the virtual nodes")
    yield s
    s.stop()


def pod(name: str, cpu: str = "1", labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {},
                         "annotations": annotations or {}},
            "spec": {"schedulerName": SCHEDULER, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                                     "resources": {"requests": {"cpu": cpu,
                                                                "memory": "256Mi"}}}]}}


def milli(q: str) -> int:
    from pyscheduler.api.quantity import milli_value
    return milli_value(q)


def pods_by_node(core: client.CoreV1Api, ns: str, selector: str = "") -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for p in core.list_namespaced_pod(ns, label_selector=selector).items:
        if p.metadata.deletion_timestamp is None:
            out.setdefault(p.spec.node_name or "", []).append(p.metadata.name)
    return out


def running(core: client.CoreV1Api, ns: str, name: str) -> bool:
    p = core.read_namespaced_pod(name, ns)
    return p.status.phase == "Running" and bool(p.status.pod_ip)


@pytest.fixture
def ns(core: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    """A namespace per test, deleted afterwards (with its pods) so capacity is free again."""
    import hashlib
    name = "b-" + hashlib.sha1(request.node.name.encode()).hexdigest()[:8]
    core.create_namespace({"metadata": {"name": name}})
    yield name
    for d in client.AppsV1Api(core.api_client).list_namespaced_deployment(name).items:
        client.AppsV1Api(core.api_client).delete_namespaced_deployment(d.metadata.name, name)
    core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
    wait_for(lambda: not core.list_namespaced_pod(name).items, timeout=30,
             what="the test's pods to be gone")


def test_virtual_nodes_show_the_pool_quota(scheduler: SchedulerThread,
                                           core: client.CoreV1Api) -> None:
    node = core.read_node("wssp-virtual-aci")
    assert node.metadata.labels["type"] == "virtual-kubelet"
    assert node.metadata.labels["wssp/cloud-platform"] == "azure"
    assert [(t.key, t.value, t.effect) for t in node.spec.taints] == [
        ("virtual-kubelet.io/provider", "azure", "NoSchedule")]
    assert node.status.allocatable["cpu"] == "100"
    assert node.status.allocatable["pods"] == "400"


def test_burst_then_move_back(scheduler: SchedulerThread, core: client.CoreV1Api,
                              api: client.ApiClient, cloud: BackgroundCloudSim, ns: str) -> None:
    apps = client.AppsV1Api(api)
    # Fill the real nodes (2 x 4 cpu) with 8 one-cpu filler pods.
    for i in range(8):
        core.create_namespaced_pod(ns, pod(f"filler-{i}", labels={"role": "filler"}))
    wait_for(lambda: sum(len(v) for k, v in pods_by_node(core, ns, "role=filler").items()
                         if k.startswith("real")) == 8, what="the fillers to bind")
    # A Deployment of 200 and 3 bare pods: no real node fits, they burst.
    apps.create_namespaced_deployment(ns, {
        "metadata": {"name": "web"},
        "spec": {"replicas": 200, "selector": {"matchLabels": {"app": "web"}},
                 "template": {"metadata": {"labels": {"app": "web"}},
                              "spec": pod("x", cpu="250m")["spec"]}}})
    for i in range(3):
        core.create_namespaced_pod(ns, pod(f"bare-{i}", labels={"role": "bare"}))
    core.create_namespaced_pod(ns, pod("on-alibaba", labels={"wssp/cloud-platform": "alibaba"}))
    core.create_namespaced_pod(ns, pod("never", annotations={"wssp/burst": "never"}))

    def all_running() -> bool:
        pods = core.list_namespaced_pod(ns).items
        web = [p for p in pods if (p.metadata.labels or {}).get("app") == "web"]
        return len(web) == 200 and all(p.status.phase == "Running" and p.status.pod_ip
                                      for p in web) and all(
            running(core, ns, n) for n in ("bare-0", "bare-1", "bare-2", "on-alibaba"))
    wait_for(all_running, timeout=60, what="every burst pod to run with an IP")
    placement = pods_by_node(core, ns)
    assert len(placement["wssp-virtual-aci"]) == 203
    assert placement["wssp-virtual-eci"] == ["on-alibaba"]
    p = core.read_namespaced_pod("bare-0", ns)
    assert p.metadata.labels["wssp/virtual-node"] == "true"
    assert p.status.pod_ip.startswith("100.")
    never = core.read_namespaced_pod("never", ns)
    assert never.spec.node_name is None
    cond = [c for c in never.status.conditions or () if c.type == "PodScheduled"]
    assert cond and cond[0].message.endswith(
        'Burst: 0/2 cloud pools are available: 2 cloud pool(s) cannot take the pod: the pod is '
        'annotated wssp/burst: "never".'), cond[0].message
    on_cloud = {i.pod_uid for i in cloud.call(lambda: cloud.sim.list("aci"))}
    web_uids = {p.metadata.uid for p in core.list_namespaced_pod(ns, label_selector="app=web")
                .items}
    assert web_uids <= on_cloud  # one instance per virtual pod, keyed by pod uid

    # Free 4 cpu on the real nodes: the rebalancer moves pods back (bare pods by copy, the
    # Deployment's by eviction) until the freed cpu is used, never beyond it.
    core.delete_namespaced_pod("never", ns)
    for i in range(4):
        core.delete_namespaced_pod(f"filler-{i}", ns)

    def real_cpu() -> int:
        total = 0
        for p in core.list_namespaced_pod(ns).items:
            if p.spec.node_name and p.spec.node_name.startswith("real") and \
                    p.metadata.deletion_timestamp is None:
                total += milli(p.spec.containers[0].resources.requests["cpu"])
        return total
    wait_for(lambda: real_cpu() >= 7000, timeout=60, what="pods to move back")
    assert real_cpu() <= 8000  # never more than the real nodes hold
    # Every workload pod still exists somewhere.
    wait_for(lambda: len([p for p in core.list_namespaced_pod(ns, label_selector="app=web")
                          .items if p.metadata.deletion_timestamp is None]) == 200,
             timeout=30, what="the Deployment to be whole")
    # Make-before-break: a moved bare pod briefly exists twice (the Ready copy, then the
    # original is deleted); in the end each is there once.
    wait_for(lambda: len([n for v in pods_by_node(core, ns).values() for n in v
                          if n.startswith("bare-")]) == 3, timeout=30,
             what="moved bare pods' originals to be deleted")
    placement = pods_by_node(core, ns)
    moved = [n for n in placement.get("real-0", []) + placement.get("real-1", [])
             if "-rb-" in n or n.startswith("web-")]
    assert moved, placement
    for node in ("real-0", "real-1"):
        used = sum(milli(p.spec.containers[0].resources.requests["cpu"])
                   for p in core.list_namespaced_pod(ns, field_selector=f"spec.nodeName={node}")
                   .items if p.metadata.deletion_timestamp is None)
        assert used <= 4000, (node, used)


def test_virtual_pods_are_deleted_with_their_instances(
        scheduler: SchedulerThread, core: client.CoreV1Api, cloud: BackgroundCloudSim,
        ns: str) -> None:
    core.create_namespaced_pod(ns, pod("big", cpu="3"))
    core.create_namespaced_pod(ns, pod("big2", cpu="3"))
    core.create_namespaced_pod(ns, pod("big3", cpu="3"))
    wait_for(lambda: any(running(core, ns, n) and core.read_namespaced_pod(n, ns).spec.node_name
                         == "wssp-virtual-aci" for n in ("big", "big2", "big3")),
             timeout=30, what="a big pod on the cloud")
    virtual = [n for n in ("big", "big2", "big3")
               if core.read_namespaced_pod(n, ns).spec.node_name == "wssp-virtual-aci"]
    uid = core.read_namespaced_pod(virtual[0], ns).metadata.uid
    core.delete_namespaced_pod(virtual[0], ns)

    def gone() -> bool:
        try:
            core.read_namespaced_pod(virtual[0], ns)
            return False
        except client.ApiException as exc:
            return exc.status == 404
    wait_for(gone, timeout=20, what="the virtual pod to be finalized")
    wait_for(lambda: uid not in {i.pod_uid for i in cloud.call(lambda: cloud.sim.list("aci"))},
             timeout=10, what="its instance to be deleted")


def test_a_pdb_that_allows_no_disruption_keeps_pods_on_the_cloud(
        scheduler: SchedulerThread, core: client.CoreV1Api, api: client.ApiClient,
        ns: str) -> None:
    apps, policy = client.AppsV1Api(api), client.PolicyV1Api(api)
    for i in range(8):
        core.create_namespaced_pod(ns, pod(f"hold-{i}", labels={"role": "hold"}))
    wait_for(lambda: sum(1 for p in core.list_namespaced_pod(ns, label_selector="role=hold")
                         .items if p.spec.node_name) == 8, what="the holders to bind")
    policy.create_namespaced_pod_disruption_budget(ns, {
        "metadata": {"name": "api"},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": {"app": "api"}}}})
    apps.create_namespaced_deployment(ns, {
        "metadata": {"name": "api"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "api"}},
                 "template": {"metadata": {"labels": {"app": "api"}},
                              "spec": pod("x")["spec"]}}})

    def api_pods() -> list[Any]:
        return [p for p in core.list_namespaced_pod(ns, label_selector="app=api").items
                if p.metadata.deletion_timestamp is None]
    wait_for(lambda: len(api_pods()) == 3 and all(
        p.status.phase == "Running" for p in api_pods()), timeout=30, what="api to run")
    on_cloud = {p.metadata.name for p in api_pods() if p.spec.node_name.startswith("wssp-")}
    assert on_cloud
    for p in core.list_namespaced_pod(ns, label_selector="role=hold").items:
        if p.spec.node_name and p.spec.node_name.startswith("real"):
            core.delete_namespaced_pod(p.metadata.name, ns)

    def refused() -> bool:
        events = core.list_namespaced_event(ns).items
        return any(e.reason == "RebalanceSkipped" and "PodDisruptionBudget" in e.message
                   for e in events)
    wait_for(refused, timeout=30, what="the eviction to be refused by the PDB")
    # Nothing was disrupted: the same pods still run on the cloud.
    assert {p.metadata.name for p in api_pods()
            if p.spec.node_name.startswith("wssp-")} == on_cloud


def test_pods_refused_by_their_pool_try_the_next_one(
        scheduler: SchedulerThread, core: client.CoreV1Api, api: client.ApiClient,
        cloud: BackgroundCloudSim, ns: str) -> None:
    """aci runs out of stock: after the provider's retries the pod is Failed (ProviderFailed);
    a Deployment's replacement and a bare pod's copy both run in eci instead."""
    for i in range(2):
        core.create_namespaced_pod(ns, pod(f"full-{i}", cpu="3", labels={"role": "full"}))
    wait_for(lambda: sum(1 for p in core.list_namespaced_pod(ns, label_selector="role=full")
                         .items if p.spec.node_name) == 2, what="the real nodes to fill")
    # Larger than any pod of the other tests, so aci stays open for theirs.
    big = "3500m"
    cloud.call(lambda: cloud.sim.set_faults("aci", reject_next=8))
    try:
        core.create_namespaced_pod(ns, pod("lonely", cpu=big))
        client.AppsV1Api(api).create_namespaced_deployment(ns, {
            "metadata": {"name": "solo"},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "solo"}},
                     "template": {"metadata": {"labels": {"app": "solo"}},
                                  "spec": pod("x", cpu=big)["spec"]}}})

        def on_eci() -> dict[str, Any] | None:
            pods = {p.metadata.name: p for p in core.list_namespaced_pod(ns).items}
            copy_, solo = pods.get("lonely-p2"), [
                p for p in pods.values() if (p.metadata.labels or {}).get("app") == "solo"
                and p.status.phase == "Running"]
            if copy_ is not None and copy_.status.phase == "Running" and solo:
                return {"copy": copy_, "solo": solo, "pods": pods}
            return None
        found = wait_for(on_eci, timeout=60, what="the refused pods to run in the next pool")
    finally:
        cloud.call(lambda: cloud.sim.set_faults("aci", reject_next=0))
    copy_, pods = found["copy"], found["pods"]
    assert copy_.spec.node_name == "wssp-virtual-eci"
    assert copy_.metadata.annotations["wssp/burst-attempt"] == "2"
    assert copy_.metadata.annotations["wssp/replaces"].startswith("lonely (lonely ")
    assert copy_.metadata.annotations.get("wssp/cloud-instance", "eci/").startswith("eci/")
    assert [p.spec.node_name for p in found["solo"]] == ["wssp-virtual-eci"]
    original = pods["lonely"]
    assert original.spec.node_name == "wssp-virtual-aci"
    assert original.status.phase == "Failed" and original.status.reason == "ProviderFailed"
    assert "InsufficientCapacity" in original.status.message
    notes = [e.message for e in core.list_namespaced_event(ns).items
             if e.involved_object.name == "lonely" and e.reason == "BurstRetry"]
    assert notes == ["created lonely-p2 to try the next pool (attempt 2 of 2)"], notes
    # Nothing is left in aci for these pods: refused creates leave no instance behind.
    uids = {p.metadata.uid for p in pods.values()}
    assert not uids & {i.pod_uid for i in cloud.call(lambda: cloud.sim.list("aci"))}
