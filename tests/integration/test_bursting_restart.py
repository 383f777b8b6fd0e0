"""A scheduler restarted in the middle of a burst: the new one rebuilds its state from the pods
and the cloud's instance list — every pod ends Running with one instance, no orphan is left."""

from __future__ import annotations

from pathlib import Path

from kubernetes import client, config

from pyscheduler_sim.cluster import ClusterSpec, PoolSpec
from pyscheduler_sim.harness import BackgroundCluster
from pyscheduler_sim.cloud import BackgroundCloudSim
from pyscheduler_sim.cloud import PoolSpec as CloudPool
from tests.conftest import SchedulerThread, wait_for

OUTAGE_POOLS = [CloudPool("aci", "azure", creation_latency_seconds=0.05)]
#: One real node that holds one of the pods; the others must go to the cloud.
OUTAGE_CLUSTER = ClusterSpec(pools=[PoolSpec(name="real", count=1, cpu="1", memory="4Gi")],
                             pod_start_seconds=0.05, lease_renew_seconds=5)


def cpu_pod(name: str, scheduler: str) -> dict[str, object]:
    return {"metadata": {"name": name},
            "spec": {"schedulerName": scheduler, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "pause", "resources": {
                         "requests": {"cpu": "1", "memory": "128Mi"}}}]}}


def test_restart_mid_burst_leaves_no_duplicate_and_no_orphan(tmp_path: Path) -> None:
    pools = [CloudPool("aci", "azure", cpu_millis=100_000, memory_bytes=400 * 2**30,
                       instances=300, creation_latency_seconds=0.3)]
    spec = ClusterSpec(pools=[PoolSpec(name="real", count=1, cpu="1", memory="4Gi")],
                       pod_start_seconds=0.05, lease_renew_seconds=5)
    settings = dict(schedulerName="restart-sched", leaderElection={"enabled": False},
                    scheduleFragment=None,
                    virtualNodes={"enabled": True, "cloudUrl": "", "heartbeatSeconds": 1,
                                  "reconcileSeconds": 0.5, "orphanGraceSeconds": 1,
                                  "pools": [{"name": "aci", "platform": "azure"}]},
                    rebalancer={"enabled": False})
    with BackgroundCloudSim(pools, seed=2) as cloud, BackgroundCluster(spec, tmp_path) as sim:
        settings["virtualNodes"]["cloudUrl"] = cloud.url  # type: ignore[index]
        api = config.new_client_from_config(config_file=str(sim.kubeconfig))
        core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
        first = SchedulerThread(sim.kubeconfig, **settings).start()
        wait_for(lambda: core.list_node(label_selector="type=virtual-kubelet").items,
                 what="the virtual node")
        apps.create_namespaced_deployment("default", {
            "metadata": {"name": "wave"},
            "spec": {"replicas": 60, "selector": {"matchLabels": {"app": "wave"}},
                     "template": {"metadata": {"labels": {"app": "wave"}}, "spec": {
                         "schedulerName": "restart-sched", "terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "c", "image": "pause", "resources": {
                             "requests": {"cpu": "500m", "memory": "128Mi"}}}]}}}})

        def on_cloud() -> list[client.V1Pod]:
            return [p for p in core.list_namespaced_pod("default", label_selector="app=wave")
                    .items if p.spec.node_name == "wssp-virtual-aci"]
        # Stop while instances are still being created (creation takes 0.3 s each).
        wait_for(lambda: len(on_cloud()) >= 10, what="the burst to start")
        first.stop()
        second = SchedulerThread(sim.kubeconfig, **settings).start()
        try:
            def settled() -> bool:
                pods = core.list_namespaced_pod("default", label_selector="app=wave").items
                return len(pods) == 60 and all(p.status.phase == "Running" for p in pods)
            wait_for(settled, timeout=60, what="every pod to run after the restart")
            pods = {p.metadata.uid for p in core.list_namespaced_pod(
                "default", label_selector="app=wave").items
                if p.spec.node_name == "wssp-virtual-aci"}

            def instances() -> list[str]:
                return [i.pod_uid for i in cloud.call(lambda: cloud.sim.list("aci"))]
            # One instance per virtual pod, none for anything else (orphans collected).
            wait_for(lambda: sorted(instances()) == sorted(pods), timeout=20,
                     what="instances to match the virtual pods one to one")
        finally:
            second.stop()


def outage_scheduler(sim: BackgroundCluster, cloud: BackgroundCloudSim, name: str,
                     settings: dict[str, object] | None = None,
                     **virtual_nodes: object) -> SchedulerThread:
    """A started scheduler bursting to the outage pool ``aci``, without the rebalancer;
    ``virtual_nodes`` add to its virtualNodes settings, ``settings`` to the rest."""
    return SchedulerThread(sim.kubeconfig, schedulerName=name,
                           leaderElection={"enabled": False}, scheduleFragment=None,
                           virtualNodes={"enabled": True, "cloudUrl": cloud.url,
                                         "heartbeatSeconds": 0.5, "reconcileSeconds": 0.5,
                                         "pools": [{"name": "aci", "platform": "azure"}],
                                         **virtual_nodes},
                           rebalancer={"enabled": False}, **(settings or {})).start()


def test_a_cloud_down_for_a_while_costs_time_not_pods(tmp_path: Path) -> None:
    with BackgroundCloudSim(OUTAGE_POOLS, seed=3) as cloud, \
            BackgroundCluster(OUTAGE_CLUSTER, tmp_path) as sim:
        api = config.new_client_from_config(config_file=str(sim.kubeconfig))
        core = client.CoreV1Api(api)
        s = outage_scheduler(sim, cloud, "outage-sched", notReadyAfterSeconds=30)
        try:
            wait_for(lambda: core.list_node(label_selector="type=virtual-kubelet").items,
                     what="the virtual node")
            cloud.call(lambda: cloud.sim.set_faults("aci", down=True))
            for i in range(5):
                core.create_namespaced_pod("default", cpu_pod(f"p{i}", "outage-sched"))
            # The pods are bound to the virtual node and wait; the node stays Ready (the outage
            # is shorter than notReadyAfterSeconds).
            wait_for(lambda: sum(1 for p in core.list_namespaced_pod("default").items
                                 if p.spec.node_name == "wssp-virtual-aci") >= 4,
                     what="the pods to be bound to the virtual node")
            import time
            time.sleep(3)
            node = core.read_node("wssp-virtual-aci")
            assert [c.status for c in node.status.conditions if c.type == "Ready"] == ["True"]
            assert not any(p.status.phase == "Running"
                           for p in core.list_namespaced_pod("default").items
                           if p.spec.node_name == "wssp-virtual-aci")
            cloud.call(lambda: cloud.sim.set_faults("aci", down=False))

            def running() -> int:
                return sum(1 for p in core.list_namespaced_pod("default").items
                           if p.status.phase == "Running")
            wait_for(lambda: running() == 5, timeout=60, what="every pod to run afterwards")
        finally:
            s.stop()


def test_a_cloud_down_for_many_times_the_not_ready_threshold_loses_nothing(
        tmp_path: Path) -> None:
    """An outage of twelve seconds with notReadyAfterSeconds 2 and the pool read every 0.5 s:
    in the time scale of the defaults (120 s, 15 s) that is twelve minutes. The virtual node turns
    NotReady and back; pods bound before the outage wait on it and run afterwards, pods created
    during it wait unscheduled (the message says why) and burst afterwards; every pod ends with
    exactly one instance, and no instance is left without its pod."""
    import time
    with BackgroundCloudSim(OUTAGE_POOLS, seed=4) as cloud, \
            BackgroundCluster(OUTAGE_CLUSTER, tmp_path) as sim:
        api = config.new_client_from_config(config_file=str(sim.kubeconfig))
        core = client.CoreV1Api(api)
        s = outage_scheduler(sim, cloud, "long-outage", {"podInitialBackoffSeconds": 0.2,
                                                         "podMaxBackoffSeconds": 1},
                             refreshSeconds=0.5, notReadyAfterSeconds=2, orphanGraceSeconds=1)

        def ready() -> list[str]:
            nodes = core.list_node(field_selector="metadata.name=wssp-virtual-aci").items
            return [c.status for n in nodes for c in n.status.conditions or ()
                    if c.type == "Ready"]
        try:
            wait_for(lambda: ready() == ["True"], what="the virtual node to be Ready")
            cloud.call(lambda: cloud.sim.set_faults("aci", down=True))
            for i in range(3):
                core.create_namespaced_pod("default", cpu_pod(f"before-{i}", "long-outage"))
            wait_for(lambda: sum(1 for p in core.list_namespaced_pod("default").items
                                 if p.spec.node_name == "wssp-virtual-aci") >= 2,
                     what="pods bound to the virtual node while the cloud is down")
            wait_for(lambda: ready() == ["False"], timeout=15,
                     what="the virtual node to turn NotReady")
            node = core.read_node("wssp-virtual-aci")
            cond = [c for c in node.status.conditions if c.type == "Ready"][0]
            assert cond.reason == "CloudUnavailable", cond
            core.create_namespaced_pod("default", cpu_pod("during", "long-outage"))

            def waits_unscheduled() -> bool:
                p = core.read_namespaced_pod("during", "default")
                cs = [c for c in p.status.conditions or () if c.type == "PodScheduled"]
                return p.spec.node_name is None and bool(cs) and \
                    "Burst: 0/1 cloud pools are available: 1 node(s) were not ready." \
                    in (cs[0].message or "")
            wait_for(waits_unscheduled, timeout=15,
                     what="a pod created during the outage to wait, saying why")
            time.sleep(12 - 4)   # the rest of the outage
            # The real node holds one pod; the others wait for the cloud, none failed.
            pods = core.list_namespaced_pod("default").items
            waiting = sorted((p.metadata.name, p.status.phase) for p in pods
                             if p.spec.node_name != "real-0")
            assert len(waiting) == 3 and ("during", "Pending") in waiting and all(
                phase == "Pending" for _, phase in waiting), waiting
            assert ready() == ["False"]
            cloud.call(lambda: cloud.sim.set_faults("aci", down=False))
            wait_for(lambda: ready() == ["True"], timeout=15, what="the node to be Ready again")

            def all_running() -> bool:
                pods = core.list_namespaced_pod("default").items
                return len(pods) == 4 and all(p.status.phase == "Running" for p in pods)
            wait_for(all_running, timeout=60, what="every pod to run after the outage")
            uids = sorted(p.metadata.uid for p in core.list_namespaced_pod("default").items
                          if p.spec.node_name == "wssp-virtual-aci")
            instances = sorted(i.pod_uid for i in cloud.call(lambda: cloud.sim.list("aci")))
            assert instances == uids      # one instance per virtual pod, none orphaned
        finally:
            s.stop()
