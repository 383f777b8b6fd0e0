"""A scheduler restarted in the middle of a burst: the new one rebuilds its state from the pods
and the cloud's instance list — every pod ends Running with one instance, no orphan is left."""

from __future__ import annotations

from pathlib import Path

from kubernetes import client, config

from pyscheduler.sim.cluster import ClusterSpec, PoolSpec
from pyscheduler.sim.harness import BackgroundCluster
from pyscheduler.virtual.cloudsim import BackgroundCloudSim
from pyscheduler.virtual.cloudsim import PoolSpec as CloudPool
from tests.conftest import SchedulerThread, wait_for


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


def test_a_cloud_down_for_a_while_costs_time_not_pods(tmp_path: Path) -> None:
    pools = [CloudPool("aci", "azure", creation_latency_seconds=0.05)]
    spec = ClusterSpec(pools=[PoolSpec(name="real", count=1, cpu="1", memory="4Gi")],
                       pod_start_seconds=0.05, lease_renew_seconds=5)
    with BackgroundCloudSim(pools, seed=3) as cloud, BackgroundCluster(spec, tmp_path) as sim:
        api = config.new_client_from_config(config_file=str(sim.kubeconfig))
        core = client.CoreV1Api(api)
        s = SchedulerThread(sim.kubeconfig, schedulerName="outage-sched",
                            leaderElection={"enabled": False}, scheduleFragment=None,
                            virtualNodes={"enabled": True, "cloudUrl": cloud.url,
                                          "heartbeatSeconds": 0.5, "reconcileSeconds": 0.5,
                                          "notReadyAfterSeconds": 30,
                                          "pools": [{"name": "aci", "platform": "azure"}]},
                            rebalancer={"enabled": False}).start()
        try:
            wait_for(lambda: core.list_node(label_selector="type=virtual-kubelet").items,
                     what="the virtual node")
            cloud.call(lambda: cloud.sim.set_faults("aci", down=True))
            for i in range(5):
                core.create_namespaced_pod("default", {
                    "metadata": {"name": f"p{i}"},
                    "spec": {"schedulerName": "outage-sched",
                             "containers": [{"name": "c", "image": "pause", "resources": {
                                 "requests": {"cpu": "1", "memory": "128Mi"}}}]}})
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
