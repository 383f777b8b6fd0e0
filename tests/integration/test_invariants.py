"""A fragment narrows, never widens: a replace-mode filter fragment that answers "feasible"
for every node still gets only nodes the host's invariant filters accept — not a cordoned node,
not one whose NoSchedule taint the pod does not tolerate, not a full one, and not a cloud pool's
virtual node in the first pass (ABI.md §5.1). Over real HTTPS, with a real WebAssembly module."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from pyscheduler.api.quantity import milli_value
from pyscheduler_sim.cluster import ClusterSpec, PoolSpec
from pyscheduler.virtual.node import PoolConfig, virtual_node
from pyscheduler.wasm.resource import GROUP, PLURAL, VERSION
from tests.conftest import AnyCluster, SchedulerThread, install_crd, open_cluster, wait_for
from tests.integration.test_fragments import uniform_wat, wat_bytes

pytest.importorskip("wasmtime")

SCHEDULER = "allow-all-sched"
FRAGMENT = "allow-all-v1.0.0"


@pytest.fixture(scope="module")
def sim(request: pytest.FixtureRequest, server: str,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[AnyCluster]:
    spec = ClusterSpec(pools=[PoolSpec(name="node", count=4, cpu="4", memory="8Gi")],
                       pod_start_seconds=0.05, lease_renew_seconds=5)
    with open_cluster(request, spec, tmp_path_factory.mktemp("invariants")) as c:
        install_crd(c.kubeconfig)
        yield c


def pod(name: str, cpu: str = "1") -> dict[str, Any]:
    return {"metadata": {"name": name, "annotations": {"wssp/schedulefragment": FRAGMENT}},
            "spec": {"schedulerName": SCHEDULER, "containers": [{
                "name": "c", "image": "pause",
                "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}}


def test_an_allow_all_replace_fragment_cannot_place_pods_where_they_must_not_go(
        sim: AnyCluster, tmp_path: Path) -> None:
    api = config.new_client_from_config(config_file=str(sim.kubeconfig))
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    names = sorted(n.metadata.name for n in core.list_node().items)
    cordoned, tainted, full, free = names
    core.patch_node(cordoned, {"spec": {"unschedulable": True}})
    core.patch_node(tainted, {"spec": {"taints": [
        {"key": "dedicated", "value": "db", "effect": "NoSchedule"}]}})
    # A cloud pool's virtual node, registered by another scheduler's provider: this scheduler
    # serves no pool, and even one that did would use it only in its burst pass.
    core.create_node(virtual_node(PoolConfig("aci", "azure"),
                                  {"cpu": "1000", "memory": "4Ti", "pods": "1000"}))
    # "full" already runs 4 cpu of its 4 (bound by name, as another scheduler would).
    core.create_namespace({"metadata": {"name": "inv"}})
    core.create_namespaced_pod("inv", {"metadata": {"name": "hog"}, "spec": {
        "nodeName": full, "containers": [{"name": "c", "image": "pause", "resources": {
            "requests": {"cpu": "4", "memory": "64Mi"}}}]}})
    (tmp_path / f"{FRAGMENT}.wasm").write_bytes(wat_bytes(uniform_wat(verdict=0, score=50)))
    custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, {
        "apiVersion": f"{GROUP}/{VERSION}", "kind": "WsspSchedulerConfiguration",
        "metadata": {"name": FRAGMENT},
        "spec": {"url": f"file://{tmp_path / FRAGMENT}.wasm",
                 "stages": {"filter": {"mode": "replace"}, "score": {"mode": "replace"}}}})
    s = SchedulerThread(sim.kubeconfig, schedulerName=SCHEDULER,
                        leaderElection={"enabled": False}, scheduleFragment=None,
                        podInitialBackoffSeconds=0.2, podMaxBackoffSeconds=0.5,
                        storage={"allowedFileDirs": [str(tmp_path)]}).start()
    try:
        wait_for(lambda: (custom.get_cluster_custom_object(GROUP, VERSION, PLURAL, FRAGMENT)
                          .get("status") or {}).get("phase") == "Ready",
                 what="the fragment to be Ready")
        for i in range(6):
            core.create_namespaced_pod("inv", pod(f"p-{i}"))

        def settled() -> list[Any] | None:
            pods = [p for p in core.list_namespaced_pod("inv").items
                    if p.metadata.name != "hog"]
            bound = [p for p in pods if p.spec.node_name]
            waiting = [p for p in pods if not p.spec.node_name and any(
                c.type == "PodScheduled" and c.status == "False"
                for c in p.status.conditions or ())]
            return pods if len(bound) == 4 and len(waiting) == 2 else None
        pods = wait_for(settled, timeout=30, what="4 pods bound and 2 unschedulable")
        placed = {p.metadata.name: p.spec.node_name for p in pods if p.spec.node_name}
        # Only the one node with room, uncordoned and untainted, and only as much as it holds.
        assert set(placed.values()) == {free}, placed
        used = sum(milli_value(p.spec.containers[0].resources.requests["cpu"])
                   for p in core.list_namespaced_pod(
                       "inv", field_selector=f"spec.nodeName={free}").items)
        assert used == 4000
        message = next(c.message for p in pods if not p.spec.node_name
                       for c in p.status.conditions if c.type == "PodScheduled")
        # The first pass counts the real nodes: a cloud pool's virtual node is no candidate.
        assert message.startswith("0/4 nodes are available: "), message
        for part in ("Insufficient cpu", "node(s) were unschedulable",
                     "node(s) had untolerated taint {dedicated: db}"):
            assert part in message, message
        # Nothing went to the virtual node, which the cluster still shows untouched.
        assert not core.list_namespaced_pod(
            "inv", field_selector="spec.nodeName=wssp-virtual-aci").items
    finally:
        s.stop()
