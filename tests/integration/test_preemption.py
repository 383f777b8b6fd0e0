"""Preemption on the embedded cluster: PriorityClasses resolved at admission, a high-priority
Deployment evicting low-priority pods with a PodDisruptionBudget honoured, nominations that
keep lower-priority pods off the freed room, ``preemptionPolicy: Never``, and the victims'
events and conditions as kube-scheduler leaves them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config

from pyscheduler_sim.cluster import ClusterSpec, PoolSpec
from pyscheduler_sim.harness import BackgroundCluster
from tests.conftest import AnyCluster, SchedulerThread, open_cluster, wait_for

Obj = dict[str, Any]


@pytest.fixture(scope="module")
def sim(request: pytest.FixtureRequest, server: str,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[AnyCluster]:
    spec = ClusterSpec(pools=[PoolSpec(name="n", count=2, cpu="2", memory="8Gi")],
                       pod_start_seconds=0.05, pod_termination_seconds=1.0)
    with open_cluster(request, spec, tmp_path_factory.mktemp("preempt")) as c:
        api = client.ApiClient(config.new_client_from_config(config_file=str(c.kubeconfig))
                               .configuration)
        scheduling = client.SchedulingV1Api(api)
        for name, value in (("low", 100), ("mid", 500), ("high", 1000)):
            scheduling.create_priority_class({"metadata": {"name": name}, "value": value})
        scheduling.create_priority_class({"metadata": {"name": "polite"}, "value": 1000,
                                          "preemptionPolicy": "Never"})
        yield c


@pytest.fixture(scope="module")
def api(sim: AnyCluster) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(sim.kubeconfig))


@pytest.fixture(scope="module")
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture(scope="module")
def scheduler(sim: AnyCluster) -> Iterator[SchedulerThread]:
    s = SchedulerThread(sim.kubeconfig, leaderElection={"enabled": False}, seed=3).start()
    yield s
    s.stop()


@pytest.fixture
def ns(core: client.CoreV1Api) -> Iterator[str]:
    name = f"p-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": name}})
    yield name
    core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
    apps = client.AppsV1Api(core.api_client)
    for d in apps.list_namespaced_deployment(name).items:
        apps.delete_namespaced_deployment(d.metadata.name, name)
    core.delete_collection_namespaced_pod(name, grace_period_seconds=0)
    wait_for(lambda: not core.list_namespaced_pod(name).items, timeout=20,
             what="namespace emptied")


#: The scheduler name of the leader-change test's own two schedulers.
FAILOVER = "failover-sched"


def template(app: str, priority_class: str, cpu: str = "1", **spec: Any) -> Obj:
    return {"metadata": {"labels": {"app": app}},
            "spec": {"schedulerName": "pyscheduler", "priorityClassName": priority_class,
                     "terminationGracePeriodSeconds": 1,
                     "containers": [{"name": "c", "image": "x", "resources": {
                         "requests": {"cpu": cpu, "memory": "128Mi"}}}], **spec}}


def deployment(name: str, replicas: int, pod_template: Obj) -> Obj:
    return {"metadata": {"name": name},
            "spec": {"replicas": replicas,
                     "selector": {"matchLabels": pod_template["metadata"]["labels"]},
                     "template": pod_template}}


def running(core: client.CoreV1Api, ns: str, app: str) -> list[Any]:
    return [p for p in core.list_namespaced_pod(ns, label_selector=f"app={app}").items
            if p.spec.node_name and not p.metadata.deletion_timestamp]


def test_priority_class_sets_the_priority(core: client.CoreV1Api, ns: str) -> None:
    created = core.create_namespaced_pod(ns, {
        "metadata": {"name": "p"}, **{"spec": template("x", "high")["spec"]}})
    assert created.spec.priority == 1000
    assert created.spec.preemption_policy == "PreemptLowerPriority"


def test_high_priority_deployment_preempts_and_honours_the_budget(
        core: client.CoreV1Api, ns: str, scheduler: SchedulerThread) -> None:
    apps = client.AppsV1Api(core.api_client)
    policy = client.PolicyV1Api(core.api_client)
    # Fill both nodes: two database pods a budget protects, two web pods nothing protects.
    apps.create_namespaced_deployment(ns, deployment("db", 2, template("db", "low")))
    apps.create_namespaced_deployment(ns, deployment("web", 2, template("web", "low")))
    wait_for(lambda: len(running(core, ns, "db")) == 2 and len(running(core, ns, "web")) == 2,
             timeout=20, what="low-priority pods running")
    policy.create_namespaced_pod_disruption_budget(ns, {
        "metadata": {"name": "db"},
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"}}}})
    wait_for(lambda: (policy.read_namespaced_pod_disruption_budget("db", ns).status or
                      client.V1PodDisruptionBudgetStatus(
                          current_healthy=0, desired_healthy=0, disruptions_allowed=0,
                          expected_pods=0)).expected_pods == 2,
             what="budget observed")
    db_before = {p.metadata.uid for p in running(core, ns, "db")}
    web_before = {p.metadata.uid: p.spec.node_name for p in running(core, ns, "web")}

    apps.create_namespaced_deployment(ns, deployment("important", 2,
                                                     template("important", "high")))
    wait_for(lambda: len(running(core, ns, "important")) == 2, timeout=30,
             what="the high-priority pods bound")
    # The budget held: the database pods are the same pods; the web pods were the victims.
    assert {p.metadata.uid for p in running(core, ns, "db")} == db_before
    assert not set(web_before) & {p.metadata.uid for p in running(core, ns, "web")}
    events = [e for e in core.list_namespaced_event(ns).items if e.reason == "Preempted"]
    preemptors = {p.metadata.uid: p.spec.node_name for p in running(core, ns, "important")}
    assert len(events) == 2
    for event in events:
        victim = event.involved_object
        assert victim.uid in web_before
        preemptor_uid, node = event.message.removeprefix("Preempted by pod ").split(" on node ")
        assert preemptors[preemptor_uid] == node == web_before[victim.uid]
    # The web pods the ReplicaSet made again wait: lower priority cannot preempt higher.
    replacements = [p for p in core.list_namespaced_pod(ns, label_selector="app=web").items
                    if p.metadata.uid not in web_before]

    def still_pending() -> Any:
        pods = [core.read_namespaced_pod(p.metadata.name, ns) for p in replacements]
        return all(not p.spec.node_name for p in pods) and all(
            any(c.type == "PodScheduled" and c.status == "False"
                for c in (p.status.conditions or ())) for p in pods)

    wait_for(still_pending, timeout=15, what="replacement web pods unschedulable")


def test_victims_carry_the_disruption_condition_while_terminating(
        core: client.CoreV1Api, ns: str, scheduler: SchedulerThread) -> None:
    for i in range(2):
        body = {"metadata": {"name": f"low{i}", "labels": {"app": "low"}},
                "spec": template("low", "low", cpu="2")["spec"]}
        body["spec"]["terminationGracePeriodSeconds"] = 30
        core.create_namespaced_pod(ns, body)
    wait_for(lambda: len(running(core, ns, "low")) == 2, what="low pods bound")
    core.create_namespaced_pod(ns, {"metadata": {"name": "high", "labels": {"app": "high"}},
                                    "spec": template("high", "high", cpu="2")["spec"]})

    def victim() -> Any:
        for p in core.list_namespaced_pod(ns, label_selector="app=low").items:
            if p.metadata.deletion_timestamp:
                return p
        return None

    terminating = wait_for(victim, what="a victim terminating")
    condition = next(c for c in terminating.status.conditions if c.type == "DisruptionTarget")
    assert (condition.status, condition.reason) == ("True", "PreemptionByScheduler")
    assert condition.message == "pyscheduler: preempting to accommodate a higher priority pod"
    # kube-controller-manager resets a DisruptionTarget condition whose transition time is
    # more than two minutes old (or unset) on a pod not yet deleted.
    assert condition.last_transition_time is not None
    high = wait_for(lambda: core.read_namespaced_pod("high", ns).status.nominated_node_name,
                    what="nomination written")
    assert high == terminating.spec.node_name
    # While the victim terminates, a mid-priority pod arrives. The nominee counts on its node,
    # so the mid pod cannot have that room even by preempting there: it preempts the other
    # low pod, on the other node.
    core.create_namespaced_pod(ns, {"metadata": {"name": "mid", "labels": {"app": "mid"}},
                                    "spec": template("mid", "mid", cpu="2")["spec"]})
    wait_for(lambda: core.read_namespaced_pod("high", ns).spec.node_name == high,
             timeout=20, what="the preemptor bound on its nominated node")
    # Exactly one low pod was preempted for the high one; the mid pod preempted the other.
    wait_for(lambda: core.read_namespaced_pod("mid", ns).spec.node_name, timeout=20,
             what="the mid pod bound after preempting the other low pod")
    assert core.read_namespaced_pod("mid", ns).spec.node_name != high


def test_preemption_policy_never_waits_and_says_why(
        core: client.CoreV1Api, ns: str, scheduler: SchedulerThread) -> None:
    for i in range(2):
        core.create_namespaced_pod(ns, {"metadata": {"name": f"low{i}", "labels": {"app": "low"}},
                                        "spec": template("low", "low", cpu="2")["spec"]})
    wait_for(lambda: len(running(core, ns, "low")) == 2, what="low pods bound")
    spec = template("polite", "polite", cpu="2")["spec"]
    core.create_namespaced_pod(ns, {"metadata": {"name": "polite"}, "spec": spec})

    def message() -> Any:
        pod = core.read_namespaced_pod("polite", ns)
        return next((c.message for c in pod.status.conditions or ()
                     if c.type == "PodScheduled" and c.status == "False"), None)

    assert wait_for(message, what="unschedulable condition") == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: not eligible due to preemptionPolicy=Never.")
    assert len(running(core, ns, "low")) == 2


# -- preemption and cloud pools ------------------------------------------------------------------

@pytest.mark.parametrize(("order", "preempts"), [
    pytest.param(None, True, id="default: preempt then burst"),
    pytest.param("BurstThenPreempt", False, id="burst then preempt"),
])
def test_the_configured_order_decides_between_preempting_and_bursting(
        tmp_path: Any, order: str | None, preempts: bool) -> None:
    from pyscheduler_sim.cloud import BackgroundCloudSim
    from pyscheduler_sim.cloud import PoolSpec as CloudPool

    name = "order-sched"
    cluster = ClusterSpec(pools=[PoolSpec(name="real", count=1, cpu="2", memory="4Gi")],
                          pod_start_seconds=0.05, pod_termination_seconds=0.2)
    with BackgroundCloudSim([CloudPool("aci", "azure", creation_latency_seconds=0.05)],
                            seed=2) as cloud, BackgroundCluster(cluster, tmp_path) as sim:
        api = config.new_client_from_config(config_file=str(sim.kubeconfig))
        core = client.CoreV1Api(api)
        for pc, value in (("low", 100), ("high", 1000)):
            client.SchedulingV1Api(api).create_priority_class(
                {"metadata": {"name": pc}, "value": value})
        extra = {"preemption": {"order": order}} if order else {}
        s = SchedulerThread(sim.kubeconfig, schedulerName=name,
                            leaderElection={"enabled": False}, scheduleFragment=None,
                            podInitialBackoffSeconds=0.2, podMaxBackoffSeconds=1,
                            virtualNodes={"enabled": True, "cloudUrl": cloud.url,
                                          "heartbeatSeconds": 0.5, "reconcileSeconds": 0.5,
                                          "pools": [{"name": "aci", "platform": "azure"}]},
                            rebalancer={"enabled": False}, **extra).start()
        try:
            def create(pod_name: str, priority_class: str) -> None:
                spec = template(pod_name, priority_class, cpu="2")["spec"]
                spec["schedulerName"] = name
                core.create_namespaced_pod("default", {
                    "metadata": {"name": pod_name, "labels": {"app": pod_name}},
                    "spec": spec})

            create("low", "low")
            assert wait_for(lambda: core.read_namespaced_pod("low", "default").spec.node_name,
                            what="the low pod on the real node") == "real-0"
            create("high", "high")
            node = wait_for(lambda: core.read_namespaced_pod("high", "default").spec.node_name,
                            timeout=20, what="the high pod placed")
            if preempts:
                assert node == "real-0"
                events = [e for e in core.list_namespaced_event("default").items
                          if e.reason == "Preempted"]
                assert [e.involved_object.name for e in events] == ["low"]
            else:
                assert node != "real-0"  # its pool's virtual node
                assert core.read_namespaced_pod("low", "default").spec.node_name == "real-0"
                assert not [e for e in core.list_namespaced_event("default").items
                            if e.reason == "Preempted"]
        finally:
            s.stop()


@pytest.mark.embedded_only("injects API failures into the embedded server")
def test_failed_evictions_and_a_new_leader_still_finish_the_preemption(
        sim: AnyCluster, core: client.CoreV1Api, ns: str) -> None:
    """The API server refuses the victim's deletion and the scheduler is stopped right after
    it nominated: the nomination is on the pod, a second scheduler reads it back, preempts
    again and binds the pod — with exactly one pod evicted."""
    # A scheduler name of its own: the module's scheduler (kept by other tests) must not bind
    # these pods beside the two schedulers of this test.
    first = SchedulerThread(sim.kubeconfig, schedulerName=FAILOVER,
                            leaderElection={"enabled": False}, seed=4).start()
    try:
        for i in range(2):
            core.create_namespaced_pod(ns, {
                "metadata": {"name": f"low{i}", "labels": {"app": "low"}},
                "spec": {**template("low", "low", cpu="2")["spec"],
                         "schedulerName": FAILOVER}})
        wait_for(lambda: len(running(core, ns, "low")) == 2, what="low pods bound")
        sim.call(lambda: sim.cluster.server.inject_failures(
            "DELETE", rf"/namespaces/{ns}/pods/low", 500, 10**6))
        core.create_namespaced_pod(ns, {"metadata": {"name": "high", "labels": {"app": "high"}},
                                        "spec": {**template("high", "high", cpu="2")["spec"],
                                                 "schedulerName": FAILOVER}})
        wait_for(lambda: core.read_namespaced_pod("high", ns).status.nominated_node_name,
                 what="the nomination written before the victims")
        assert len(running(core, ns, "low")) == 2  # no deletion got through
    finally:
        first.stop()
    # The nomination was left on the pod: the second scheduler reads it back.
    assert core.read_namespaced_pod("high", ns).status.nominated_node_name
    sim.call(lambda: sim.cluster.server.clear_failures())
    second = SchedulerThread(sim.kubeconfig, schedulerName=FAILOVER,
                             leaderElection={"enabled": False}, seed=4).start()
    try:
        wait_for(lambda: core.read_namespaced_pod("high", ns).spec.node_name,
                 timeout=30, what="the new scheduler finishing the preemption")
        left = running(core, ns, "low")
        assert len(left) == 1
        # It preempted again (on the nominated node, or on the other: kube's candidate choice
        # does not prefer the nominated node) and took the room its one victim left.
        high = core.read_namespaced_pod("high", ns).spec.node_name
        assert high not in {p.spec.node_name for p in left}
    finally:
        second.stop()
