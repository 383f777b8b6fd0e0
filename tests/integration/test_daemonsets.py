"""A DaemonSet scheduled by pyscheduler: the DaemonSet controller gives each pod a required
node affinity on ``metadata.name`` (matchFields), and each lands on its own node — including a
cordoned one, which its daemon tolerations allow, and not a node with a taint it does not
tolerate."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client, config

from pyscheduler_sim.cluster import ClusterSpec, PoolSpec
from tests.conftest import AnyCluster, SchedulerThread, open_cluster, wait_for


@pytest.fixture(scope="module")
def sim(request: pytest.FixtureRequest, server: str,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[AnyCluster]:
    spec = ClusterSpec(pools=[
        PoolSpec(name="plain", count=3, cpu="2", memory="4Gi"),
        PoolSpec(name="gpu", count=1, cpu="2", memory="4Gi",
                 taints=[{"key": "gpu", "value": "yes", "effect": "NoSchedule"}])],
        pod_start_seconds=0.05)
    with open_cluster(request, spec, tmp_path_factory.mktemp("ds")) as c:
        yield c


def test_daemonset_pods_land_one_per_eligible_node(sim: AnyCluster) -> None:
    api = config.new_client_from_config(config_file=str(sim.kubeconfig))
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    core.patch_node("plain-2", {"spec": {"unschedulable": True}})
    scheduler = SchedulerThread(sim.kubeconfig, leaderElection={"enabled": False}).start()
    try:
        labels = {"app": "agent"}
        apps.create_namespaced_daemon_set("default", {
            "metadata": {"name": "agent"},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "schedulerName": "pyscheduler",
                         "containers": [{"name": "c", "image": "x", "resources": {
                             "requests": {"cpu": "100m", "memory": "64Mi"}}}]}}}})

        def placed() -> dict[str, str]:
            pods = core.list_namespaced_pod("default", label_selector="app=agent").items
            return {p.metadata.name: p.spec.node_name for p in pods if p.spec.node_name}

        nodes = wait_for(lambda: len(placed()) == 3 and placed(), timeout=20,
                         what="three daemon pods bound")
        assert sorted(nodes.values()) == ["plain-0", "plain-1", "plain-2"]
        for pod in core.list_namespaced_pod("default", label_selector="app=agent").items:
            terms = pod.spec.affinity.node_affinity.\
                required_during_scheduling_ignored_during_execution.node_selector_terms
            assert [(f.key, f.operator, f.values) for f in terms[0].match_fields] == [
                ("metadata.name", "In", [pod.spec.node_name])]
        status = wait_for(lambda: (ds := apps.read_namespaced_daemon_set("agent", "default"))
                          .status.number_ready == 3 and ds.status, timeout=20, what="ready")
        assert status.desired_number_scheduled == 3
    finally:
        scheduler.stop()
