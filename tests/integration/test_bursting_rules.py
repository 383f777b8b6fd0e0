"""Bursting keeps the rules a real node keeps, from the first pod on: pods already pending when
the scheduler starts wait for the pools' per-instance limits instead of being sent where the
cloud refuses them; a pod whose hard constraints no pool meets stays unschedulable, saying why,
and one whose rule only a pool's own labels meet goes to that pool;
``wssp/decision`` explains a burst; a pod that may use one pool only gets no copy for a "next
pool" it may not use."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kubernetes import client, config

from pyscheduler_sim.cluster import ClusterSpec, PoolSpec
from pyscheduler_sim.harness import BackgroundCluster
from pyscheduler_sim.cloud import BackgroundCloudSim
from pyscheduler_sim.cloud import PoolSpec as CloudPool
from tests.conftest import SchedulerThread, wait_for

NAME = "rules-sched"
POOLS = [CloudPool("aci", "azure", creation_latency_seconds=0.05),       # instances <= 4 cpu
         CloudPool("eci", "alibaba", creation_latency_seconds=0.05)]
CLUSTER = ClusterSpec(pools=[PoolSpec(name="real", count=1, cpu="1", memory="4Gi")],
                      pod_start_seconds=0.05, lease_renew_seconds=5)


def pod(name: str, cpu: str = "1", *, labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": labels or {},
                         "annotations": annotations or {}},
            "spec": {"schedulerName": NAME, "terminationGracePeriodSeconds": 0,
                     "containers": [{"name": "c", "image": "pause", "resources": {
                         "requests": {"cpu": cpu, "memory": "128Mi"}}}], **spec}}


def unschedulable(core: client.CoreV1Api, name: str) -> str | None:
    p = core.read_namespaced_pod(name, "default")
    if p.spec.node_name:
        return None
    for c in p.status.conditions or ():
        if c.type == "PodScheduled" and c.status == "False":
            return str(c.message)
    return None


def test_burst_rules_hold_from_the_first_pod(tmp_path: Path) -> None:
    with BackgroundCloudSim(POOLS, seed=6) as cloud, BackgroundCluster(CLUSTER, tmp_path) as sim:
        core = client.CoreV1Api(config.new_client_from_config(config_file=str(sim.kubeconfig)))
        # Pending before the scheduler starts: one pod fills the real node, and a 64-cpu pod
        # that no pool's instances can hold (aci's and eci's largest are 4 cpu).
        core.create_namespaced_pod("default", pod("fill"))
        core.create_namespaced_pod("default", pod("huge", cpu="64"))
        gpu = pod("gpu")
        gpu["spec"]["containers"][0]["resources"]["requests"]["nvidia.com/gpu"] = "1"
        gpu["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/gpu": "1"}
        core.create_namespaced_pod("default", gpu)
        spread = pod("spread", labels={"app": "spread"}, topologySpreadConstraints=[{
            "maxSkew": 1, "topologyKey": "example.com/rack",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "spread"}}}])
        core.create_namespaced_pod("default", spread)
        # The same rule on a key one pool's labels give its virtual node: that pool only.
        zoned = pod("zoned", labels={"app": "zoned"}, topologySpreadConstraints=[{
            "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"app": "zoned"}}}])
        core.create_namespaced_pod("default", zoned)
        s = SchedulerThread(sim.kubeconfig, schedulerName=NAME,
                            leaderElection={"enabled": False}, scheduleFragment=None,
                            podInitialBackoffSeconds=0.2, podMaxBackoffSeconds=1,
                            virtualNodes={"enabled": True, "cloudUrl": cloud.url,
                                          "heartbeatSeconds": 0.5, "reconcileSeconds": 0.5,
                                          "pools": [{"name": "aci", "platform": "azure"},
                                                    {"name": "eci", "platform": "alibaba",
                                                     "labels": {
                                                         "topology.kubernetes.io/zone": "z1"}}
                                                    ]},
                            rebalancer={"enabled": False}).start()
        try:
            wait_for(lambda: core.read_namespaced_pod("fill", "default").spec.node_name,
                     what="the real node to fill")
            # Limits first: "huge" waits, naming them, and is never sent to a pool.
            message = wait_for(lambda: unschedulable(core, "huge"), timeout=20,
                               what="huge to be reported unschedulable")
            wait_for(lambda: "largest instance has less than 64000m cpu" in str(
                unschedulable(core, "huge")), timeout=20,
                what="huge's message to name the instance limits")
            message = str(unschedulable(core, "huge"))
            assert message == (
                "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are "
                "available: 1 Preemption is not helpful for scheduling., Burst: 0/2 cloud "
                "pools are available: 2 cloud pool(s) whose largest instance has less than "
                "64000m cpu."), \
                message
            # Hard constraints no pool meets: unschedulable, saying why.
            assert wait_for(lambda: unschedulable(core, "gpu"), timeout=10,
                            what="gpu's message").endswith(
                "Burst: 0/2 cloud pools are available: 2 Insufficient nvidia.com/gpu.")
            assert "node(s) didn't match pod topology spread constraints (missing required " \
                   "label)" in wait_for(lambda: unschedulable(core, "spread"), timeout=10,
                                        what="spread's message").split("Burst:")[1]
            assert wait_for(lambda: core.read_namespaced_pod("zoned", "default").spec.node_name,
                            timeout=20, what="zoned to burst") == "wssp-virtual-eci"
            eci = core.read_node("wssp-virtual-eci").metadata.labels
            assert eci["topology.kubernetes.io/zone"] == "z1" and eci["type"] == "virtual-kubelet"
            assert "topology.kubernetes.io/zone" not in core.read_node(
                "wssp-virtual-aci").metadata.labels

            # A burst explained: the decision says which pass chose the pool, and why the
            # real nodes did not fit.
            core.create_namespaced_pod("default", pod("explained", annotations={
                "wssp/explain": "true"}))

            def decision() -> dict[str, Any] | None:
                p = core.read_namespaced_pod("explained", "default")
                raw = (p.metadata.annotations or {}).get("wssp/decision")
                return json.loads(raw) if raw else None
            d = wait_for(decision, timeout=20, what="the burst pod's wssp/decision")
            assert d["pass"] == "burst" and d["selected"] == "wssp-virtual-aci", d
            assert d["realNodes"]["selected"] is None and \
                d["realNodes"]["failures"] == {"Insufficient cpu": 1}, d
            assert [t["node"] for t in d["top"]] == ["wssp-virtual-aci", "wssp-virtual-eci"]

            # A pod that may use aci only, refused there: no copy for a pool it may not use.
            cloud.call(lambda: cloud.sim.set_faults("aci", reject_next=20))
            core.create_namespaced_pod("default", pod("azure-only", labels={
                "wssp/cloud-platform": "azure"}))

            def exhausted() -> list[str]:
                return [e.message for e in core.list_namespaced_event("default").items
                        if e.involved_object.name == "azure-only"
                        and e.reason.startswith("BurstRetry")]
            notes = wait_for(exhausted, timeout=60, what="azure-only's BurstRetry event")
            cloud.call(lambda: cloud.sim.set_faults("aci", reject_next=0))
            assert notes == ["no other pool of platform azure to try: the pod had a try in "
                             "each of the 1 it may use"], notes
            p = core.read_namespaced_pod("azure-only", "default")
            assert p.status.phase == "Failed" and p.status.reason == "ProviderFailed"
            names = {p.metadata.name for p in core.list_namespaced_pod("default").items}
            assert "azure-only-p2" not in names and "huge-p2" not in names, names
            # Nothing of "huge" ever reached the cloud.
            huge = core.read_namespaced_pod("huge", "default")
            assert huge.spec.node_name is None
            assert huge.metadata.uid not in {
                i.pod_uid for pool in ("aci", "eci")
                for i in cloud.call(lambda pool=pool: cloud.sim.list(pool))}
        finally:
            s.stop()
