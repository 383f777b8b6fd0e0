"""The rebalancer moves only what is its own, never what is gone, and its moves survive the
leader: killed with SIGKILL in the middle of make-before-break moves, the standby that takes over
finishes or rolls back every one, so no pod ends up running twice."""

from __future__ import annotations

import copy
import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config

from pyscheduler.api.names import NEVER, REBALANCE_ANNOTATION
from pyscheduler_sim.cluster import ClusterSpec, PoolSpec
from pyscheduler_sim.cloud import BackgroundCloudSim
from pyscheduler_sim.cloud import PoolSpec as CloudPool
from tests.conftest import AnyCluster, SchedulerThread, open_cluster, wait_for

GI = 2**30
CLUSTER = ClusterSpec(pools=[PoolSpec(name="real", count=2, cpu="4", memory="16Gi")],
                      pod_start_seconds=0.05, pod_termination_seconds=0.1,
                      lease_renew_seconds=5)
POOLS = [CloudPool("aci", "azure", creation_latency_seconds=0.05, price_per_cpu_hour=0.05)]


def pod(name: str, scheduler: str, cpu: str = "1", *, node: str | None = None,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "schedulerName": scheduler, "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": cpu, "memory": "256Mi"}}}]}
    if node is not None:
        spec["nodeName"] = node
    return {"metadata": {"name": name, "labels": labels or {},
                         "annotations": annotations or {}}, "spec": spec}


def fill_real_nodes(core: client.CoreV1Api, ns: str) -> None:
    """Eight one-cpu pods bound by name: the two real nodes are full."""
    for i in range(8):
        core.create_namespaced_pod(ns, pod(f"filler-{i}", "nobody", node=f"real-{i % 2}",
                                           labels={"role": "filler"}))
    wait_for(lambda: len(core.list_namespaced_pod(ns, label_selector="role=filler").items) == 8,
             what="the fillers")


def free_real_nodes(core: client.CoreV1Api, ns: str) -> None:
    core.delete_collection_namespaced_pod(ns, label_selector="role=filler",
                                          grace_period_seconds=0)


def running_on(core: client.CoreV1Api, ns: str) -> dict[str, str]:
    """Pod name -> node, for the running pods not being deleted."""
    return {p.metadata.name: p.spec.node_name for p in core.list_namespaced_pod(ns).items
            if p.status.phase == "Running" and p.metadata.deletion_timestamp is None}


@pytest.fixture(scope="module")
def cloud() -> Iterator[BackgroundCloudSim]:
    with BackgroundCloudSim(POOLS, seed=5) as c:
        yield c


@pytest.fixture
def sim(request: pytest.FixtureRequest, server: str, tmp_path: Path) -> Iterator[AnyCluster]:
    with open_cluster(request, CLUSTER, tmp_path / "sim") as c:
        yield c


def settings(cloud: BackgroundCloudSim, name: str, ready_timeout: float = 30) -> dict[str, Any]:
    return {"schedulerName": name, "scheduleFragment": None,
            "podInitialBackoffSeconds": 0.2, "podMaxBackoffSeconds": 1,
            "virtualNodes": {"enabled": True, "cloudUrl": cloud.url, "heartbeatSeconds": 1,
                             "reconcileSeconds": 0.5, "orphanGraceSeconds": 2,
                             "pools": [{"name": "aci", "platform": "azure"}]},
            "rebalancer": {"intervalSeconds": 1, "minCloudSeconds": 0.5,
                           "maxMovesPerCycle": 10, "maxMovesPerNamespace": 10,
                           "readyTimeoutSeconds": ready_timeout}}


def scheduler_on_full_nodes(sim: AnyCluster, cloud: BackgroundCloudSim, name: str,
                            prefix: str) -> tuple[SchedulerThread, client.CoreV1Api, str]:
    """A scheduler ``name`` with its virtual node registered, and a new namespace whose
    fillers leave the real nodes full; the caller stops the scheduler."""
    core = client.CoreV1Api(config.new_client_from_config(config_file=str(sim.kubeconfig)))
    s = SchedulerThread(sim.kubeconfig, leaderElection={"enabled": False},
                        **settings(cloud, name)).start()
    try:
        wait_for(lambda: core.list_node(label_selector="type=virtual-kubelet").items,
                 what="the virtual node")
        ns = f"{prefix}-{uuid.uuid4().hex[:6]}"
        core.create_namespace({"metadata": {"name": ns}})
        fill_real_nodes(core, ns)
    except BaseException:
        s.stop()
        raise
    return s, core, ns


def test_only_its_own_pods_move_and_never_a_pod_just_deleted(
        sim: AnyCluster, cloud: BackgroundCloudSim) -> None:
    """Another scheduler's pod and a pod a user put on the virtual node with nodeName stay
    where they are; a pod the rebalancer still believes running after its deletion (a lagging
    watch) is read again before any copy is made, and is not copied."""
    name = "own-sched"
    s, core, ns = scheduler_on_full_nodes(sim, cloud, name, "own")
    try:
        rebalancer = s.app.rebalancer
        core.create_namespaced_pod(ns, pod("mine", name))
        core.create_namespaced_pod(ns, pod("doomed", name))
        core.create_namespaced_pod(ns, pod("theirs", "other-sched", node="wssp-virtual-aci"))
        core.create_namespaced_pod(ns, pod("by-hand", name, node="wssp-virtual-aci"))
        wait_for(lambda: {"mine", "doomed", "theirs", "by-hand"} <= set(running_on(core, ns)),
                 timeout=30, what="every pod to run on the cloud")
        assert {n for n, node in running_on(core, ns).items() if node == "wssp-virtual-aci"} \
            == {"mine", "doomed", "theirs", "by-hand"}
        # What the rebalancer holds of "doomed" now; then the user deletes it.
        uid = core.read_namespaced_pod("doomed", ns).metadata.uid
        stale = s.call(lambda: copy.deepcopy(rebalancer.virtual_pods.get(uid)))
        assert stale is not None
        assert s.call(lambda: sorted(p["metadata"]["name"]
                                     for p in rebalancer.virtual_pods.values())) == \
            ["doomed", "mine"]   # only what this scheduler placed on the cloud
        core.delete_namespaced_pod("doomed", ns)
        wait_for(lambda: "doomed" not in {p.metadata.name
                                          for p in core.list_namespaced_pod(ns).items},
                 timeout=20, what="doomed to be gone")
        wait_for(lambda: s.call(lambda: uid not in rebalancer.virtual_pods),
                 what="the rebalancer to hear of it")
        # A watch lagging behind: the rebalancer sees the deleted pod once more.
        s.call(lambda: rebalancer.pod_seen(stale))
        free_real_nodes(core, ns)
        wait_for(lambda: "mine" not in running_on(core, ns) and any(
            n.startswith("mine-rb-") and node.startswith("real-")
            for n, node in running_on(core, ns).items()), timeout=30,
            what="mine to move back to a real node")
        time.sleep(3)  # a few more sweeps
        now = running_on(core, ns)
        assert now["theirs"] == now["by-hand"] == "wssp-virtual-aci", now
        assert not [n for n in now if n.startswith(("doomed", "theirs-", "by-hand-"))], now
        assert s.call(lambda: uid not in rebalancer.virtual_pods)   # the stale entry dropped
    finally:
        s.stop()


def test_a_move_recorded_since_the_cache_saw_the_pod_is_followed_not_overwritten(
        sim: AnyCluster, cloud: BackgroundCloudSim) -> None:
    """A leader whose cache still shows a pod without the move another leader recorded on it
    reads the pod before moving it, finds the record, and finishes or undoes that move: it
    never writes a record of its own over it (which would leave the other copy behind)."""
    name = "stale-sched"
    s, core, ns = scheduler_on_full_nodes(sim, cloud, name, "stale")
    try:
        rebalancer = s.app.rebalancer
        # Never moved by a sweep of its own (which would race with the move staged below, the
        # moment the real nodes are free); a move recorded on it is still followed.
        core.create_namespaced_pod(ns, pod("mine", name,
                                           annotations={REBALANCE_ANNOTATION: NEVER}))
        wait_for(lambda: running_on(core, ns).get("mine") == "wssp-virtual-aci", timeout=30,
                 what="mine to run on the cloud")
        uid = core.read_namespaced_pod("mine", ns).metadata.uid
        stale = s.call(lambda: copy.deepcopy(rebalancer.virtual_pods.get(uid)))
        assert stale is not None and "wssp/move" not in stale["metadata"].get(
            "annotations", {})
        free_real_nodes(core, ns)
        wait_for(lambda: s.call(lambda: requested_on(s, "real-0")) == 0,
                 what="the scheduler to see real-0 free")
        # Hold the pod as if a move of ours were starting, so no sweep follows the record.
        reservation = s.call(lambda: rebalancer.reserve(stale, "real-0"))
        assert reservation is not None
        s.call(lambda: rebalancer.moving.__setitem__(uid, reservation))
        record = {"copy": "mine-rb-1", "node": "real-0",
                  "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        core.patch_namespaced_pod("mine", ns, {"metadata": {"annotations": {
            "wssp/move": json.dumps(record, sort_keys=True)}}})
        wait_for(lambda: s.call(lambda: "wssp/move" in rebalancer.virtual_pods[uid][
            "metadata"].get("annotations", {})), what="the record to reach the cache")
        # The move starts from the version without the record.
        s.call(lambda: rebalancer._spawn(rebalancer._move(stale, "real-0", "copy",
                                                          reservation)))
        wait_for(lambda: "wssp/move" not in (core.read_namespaced_pod(
            "mine", ns).metadata.annotations or {}), timeout=30,
            what="the recorded move to be undone")
        failed = [e.message for e in core.list_namespaced_event(ns).items
                  if e.reason == "RebalanceFailed"]
        assert failed and all("copy mine-rb-1 on real-0" in m for m in failed), failed
        time.sleep(1)
        assert running_on(core, ns).get("mine") == "wssp-virtual-aci"
        assert not [p.metadata.name for p in core.list_namespaced_pod(ns).items
                    if p.metadata.name.startswith("mine-rb-")]   # no copy of its own
        assert s.call(lambda: rebalancer.moving) == {}
        assert s.call(lambda: requested_on(s, "real-0")) == 0   # the reservation released
    finally:
        s.stop()


def requested_on(s: SchedulerThread, node: str) -> int:
    """The cpu (millicores) the scheduler counts on ``node``; call on its loop."""
    table = s.app.scheduler.cache.table
    return int(table.requested[table.slots[node], 0])


def _run_scheduler(kubeconfig: Path, cfg: Path, log: Path) -> subprocess.Popen[bytes]:
    out = log.open("wb")
    return subprocess.Popen([sys.executable, "-m", "pyscheduler.cli", "run", "--kubeconfig",
                             str(kubeconfig), "--config", str(cfg), "--log-format", "json"],
                            stdout=out, stderr=subprocess.STDOUT)


def _holder(api: client.ApiClient) -> str | None:
    try:
        lease = client.CoordinationV1Api(api).read_namespaced_lease("rb-lease", "default")
    except client.ApiException:
        return None
    holder: str | None = lease.spec.holder_identity
    return holder


@pytest.mark.parametrize(("start_seconds", "ready_timeout", "finished"), [
    pytest.param(8, 30, True, id="the copies become Ready: the new leader finishes"),
    pytest.param(120, 6, False, id="the copies never start: the new leader rolls back"),
])
def test_a_leader_killed_mid_move_leaves_no_pod_running_twice(
        sim: AnyCluster, cloud: BackgroundCloudSim, tmp_path: Path,
        start_seconds: int, ready_timeout: float, finished: bool) -> None:
    name = "rb-sched"
    api = config.new_client_from_config(config_file=str(sim.kubeconfig))
    core = client.CoreV1Api(api)
    ns = f"moves-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        for who in ("a", "b"):
            cfg = tmp_path / f"{who}.yaml"
            cfg.write_text(yaml.safe_dump({
                **settings(cloud, name, ready_timeout), "metricsAddress": "127.0.0.1:0",
                "leaderElection": {"enabled": True, "leaseName": "rb-lease",
                                   "leaseNamespace": "default", "identity": who,
                                   "leaseDurationSeconds": 3, "renewDeadlineSeconds": 2,
                                   "retryPeriodSeconds": 0.5}}))
            procs[who] = _run_scheduler(sim.kubeconfig, cfg, tmp_path / f"{who}.log")
            if who == "a":
                wait_for(lambda: _holder(api) == "a", timeout=30, what="a to lead")
        fill_real_nodes(core, ns)
        # Bare pods (moved by make-before-break) whose copies are slow to start on a real node:
        # a window to kill the leader while its moves wait for the copies to be Ready.
        bare = [f"bare-{i}" for i in range(4)]
        for n in bare:
            core.create_namespaced_pod(ns, pod(n, name, annotations={
                "sim.pyscheduler.io/start-seconds": str(start_seconds)}))
        wait_for(lambda: set(bare) <= set(running_on(core, ns)), timeout=40,
                 what="the bare pods to run on the cloud")
        assert {running_on(core, ns)[n] for n in bare} == {"wssp-virtual-aci"}
        free_real_nodes(core, ns)

        def moves_in_flight() -> list[str]:
            return [p.metadata.name for p in core.list_namespaced_pod(ns).items
                    if "wssp/move" in (p.metadata.annotations or {})]
        in_flight = wait_for(lambda: len(moves_in_flight()) >= 3 and moves_in_flight(),
                             timeout=30, what="moves in flight")
        procs["a"].send_signal(signal.SIGKILL)
        procs["a"].wait(10)
        for n in in_flight:
            # The record comes first (make-before-break): it names the copy it plans, which
            # the killed leader may or may not have created yet.
            record = json.loads(core.read_namespaced_pod(n, ns).metadata.annotations["wssp/move"])
            assert record["copy"].startswith(f"{n}-rb-") and record["node"].startswith(
                "real-"), record
        wait_for(lambda: _holder(api) == "b", timeout=30, what="b to take over")

        def settled() -> dict[str, str] | None:
            pods = core.list_namespaced_pod(ns).items
            if any("wssp/move" in (p.metadata.annotations or {}) for p in pods):
                return None
            if any(p.metadata.deletion_timestamp for p in pods):
                return None
            placed = running_on(core, ns)
            return placed if len([n for n in placed if n.startswith("bare-")]) == 4 else None
        placed = wait_for(settled, timeout=60, what="every move to be finished or undone")
        # Each bare pod runs exactly once: the original on the cloud or its copy on a real
        # node, never both.
        for n in bare:
            running = [p for p in placed if p == n or p.startswith(f"{n}-rb-")]
            assert len(running) == 1, (n, placed)
        moved = [p for p in placed if "-rb-" in p]
        if finished:
            assert moved and all(placed[p].startswith("real-") for p in moved), placed
        else:   # rolled back: the copies deleted, every pod still on the cloud
            assert not moved and not [p for p in core.list_namespaced_pod(ns).items
                                      if "-rb-" in p.metadata.name], placed
            assert {placed[n] for n in bare} == {"wssp-virtual-aci"}
            failed = [e.message for e in core.list_namespaced_event(ns).items
                      if e.reason == "RebalanceFailed"]
            assert len(failed) >= len(in_flight) and all(
                "did not become Ready within 6s" in m for m in failed), failed
        # The cloud runs exactly the pods left on the virtual node.
        on_cloud = {p.metadata.uid for p in core.list_namespaced_pod(ns).items
                    if p.spec.node_name == "wssp-virtual-aci"}
        wait_for(lambda: {i.pod_uid for i in cloud.call(lambda: cloud.sim.list("aci"))
                          if i.namespace == ns} == on_cloud, timeout=20,
                 what="the instances of moved pods to be deleted")
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in procs.values():
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

