"""A parked pod goes back only for an event that one of the plugins that rejected it
registered (kube's EventsToRegister), also when the event arrives while the pod is being
tried; a pod rejected by logic that registered nothing moves on every event but an assigned
pod's; the informer handlers say what changed on a node or a pod as kube's do."""

from __future__ import annotations

from typing import Any

import pytest

from pyscheduler.framework import events
from pyscheduler.framework.interface import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    QueueingHint,
)
from pyscheduler.framework.nodetable import node_info
from pyscheduler.framework.queue import SchedulingQueue
from pyscheduler.plugins.inter_pod_affinity import InterPodAffinity
from pyscheduler.plugins.node_affinity import NodeAffinity
from pyscheduler.plugins.node_resources_fit import NodeResourcesFit
from pyscheduler.plugins.taint_toleration import TaintToleration
from pyscheduler.postfilter.bursting import CloudBurst
from tests.unit.framework.test_queue import Clock, pod

NODE_LABEL = ClusterEvent("Node", ActionType.UPDATE_NODE_LABEL)
NODE_ALLOCATABLE = ClusterEvent("Node", ActionType.UPDATE_NODE_ALLOCATABLE)


def registrations() -> dict[str, tuple[ClusterEventWithHint, ...]]:
    plugins: list[Any] = [NodeAffinity(), NodeResourcesFit(), TaintToleration(),
                          InterPodAffinity()]
    return {p.name: tuple(p.events_to_register()) for p in plugins} | {
        "CloudBurst": tuple(CloudBurst.events_to_register(None))}  # type: ignore[arg-type]


def parked(q: SchedulingQueue, name: str, *rejected_by: str, **spec: Any) -> str:
    q.add(pod(name, **spec))
    entry = q.pop_nowait()
    assert entry is not None and entry.pod.name == name
    q.requeue_unschedulable(entry.pod.uid, frozenset(rejected_by))
    return entry.pod.uid


def active(q: SchedulingQueue) -> list[str]:
    out = []
    while (entry := q.pop_nowait()) is not None:
        out.append(entry.pod.name)
    return sorted(out)


@pytest.mark.parametrize(("event", "moved"), [
    (NODE_LABEL, ["affinity", "fragment", "inter", "unknown"]),
    (NODE_ALLOCATABLE, ["fit", "fragment", "unknown"]),
    (events.ASSIGNED_POD_DELETE, ["fit", "fragment", "inter", "unknown"]),
    (events.ASSIGNED_POD_ADD, ["inter"]),
    (ClusterEvent("Node", ActionType.UPDATE_NODE_TAINT), ["fragment", "taints", "unknown"]),
    (events.NODE_ADD, ["affinity", "fit", "fragment", "inter", "taints", "unknown"]),
    (ClusterEvent("PersistentVolumeClaim", ActionType.ADD), ["fragment", "unknown"]),
])
def test_only_the_events_a_rejecting_plugin_registered_move_a_pod(
        event: ClusterEvent, moved: list[str]) -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock, registrations=registrations())
    parked(q, "affinity", "NodeAffinity")
    parked(q, "fit", "NodeResourcesFit")
    parked(q, "taints", "TaintToleration")
    parked(q, "inter", "InterPodAffinity")
    parked(q, "fragment", "NodeAffinity", "fragment:gpu")  # a filter that registered nothing
    parked(q, "unknown")  # the rejectors are not known
    clock.now += 60  # past every backoff
    q.cluster_event(event, label="test")
    assert active(q) == moved
    assert q.counts()["unschedulable"] == 6 - len(moved)


def test_a_pod_rejected_by_several_plugins_moves_for_any_of_theirs() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock, registrations=registrations())
    parked(q, "both", "NodeAffinity", "NodeResourcesFit")
    clock.now += 60
    q.cluster_event(ClusterEvent("Node", ActionType.UPDATE_NODE_TAINT))
    assert active(q) == []
    q.cluster_event(NODE_ALLOCATABLE)
    assert active(q) == ["both"]


def test_an_event_while_the_pod_is_tried_counts_only_if_it_may_help() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock, initial_backoff=1, registrations=registrations())
    q.add(pod("p"))
    entry = q.pop_nowait()
    assert entry is not None
    q.cluster_event(ClusterEvent("Node", ActionType.UPDATE_NODE_TAINT))  # not NodeAffinity's
    q.requeue_unschedulable(entry.pod.uid, frozenset({"NodeAffinity"}))
    assert q.counts()["unschedulable"] == 1
    q.cluster_event(events.ASSIGNED_POD_DELETE)
    clock.now += 60
    assert active(q) == []
    q.cluster_event(NODE_LABEL)
    entry = q.pop_nowait()
    assert entry is not None
    q.cluster_event(NODE_LABEL)  # arrives while it is tried again: it may help
    q.requeue_unschedulable(entry.pod.uid, frozenset({"NodeAffinity"}))
    assert q.counts() == {"active": 0, "backoff": 1, "unschedulable": 0, "gated": 0}


def test_a_hint_decides_and_one_that_raises_counts_as_queue() -> None:
    said: list[str] = []

    def hint(pod: Any, old: Any, new: Any) -> QueueingHint:
        said.append(new)
        if new == "boom":
            raise RuntimeError("hint failed")
        return QueueingHint.QUEUE if new == "yes" else QueueingHint.SKIP

    clock = Clock()
    q = SchedulingQueue(clock=clock, registrations={"Custom": (ClusterEventWithHint(
        ClusterEvent("Node", ActionType.ADD), hint),)})
    parked(q, "p", "Custom")
    clock.now += 60
    q.cluster_event(events.NODE_ADD, None, "no")
    assert active(q) == []
    q.cluster_event(events.NODE_ADD, None, "yes")
    assert active(q) == ["p"]
    parked(q, "p2", "Custom")
    clock.now += 60
    q.cluster_event(events.NODE_ADD, None, "boom")
    assert active(q) == ["p2"] and said == ["no", "yes", "boom"]


def test_without_registrations_every_event_moves_every_pod() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock)
    parked(q, "p", "NodeAffinity")
    clock.now += 60
    q.cluster_event(events.ASSIGNED_POD_ADD)
    assert active(q) == ["p"]


def test_a_deleted_or_moved_pod_leaves_the_indexes() -> None:
    clock = Clock()
    q = SchedulingQueue(clock=clock, registrations=registrations())
    uid = parked(q, "gone", "NodeAffinity")
    q.delete(uid)
    clock.now += 60
    q.cluster_event(NODE_LABEL)
    assert active(q) == [] and not any(q._parked.values())


def node(labels: dict[str, str] | None = None, cpu: str = "4", taints: Any = None,
         ready: str = "True") -> Any:
    return node_info({"metadata": {"name": "n", "labels": labels or {}},
                      "spec": {"taints": taints or []},
                      "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "10"},
                                 "conditions": [{"type": "Ready", "status": ready}]}})


def test_what_changed_on_a_node_in_kubes_words() -> None:
    base = node()
    assert events.node_update(base, node()) is None  # a heartbeat
    assert events.node_update(base, node(labels={"a": "b"})) == ActionType.UPDATE_NODE_LABEL
    assert events.node_update(base, node(cpu="8")) == ActionType.UPDATE_NODE_ALLOCATABLE
    assert events.node_update(base, node(taints=[{"key": "k", "effect": "NoSchedule"}])) \
        == ActionType.UPDATE_NODE_TAINT
    assert events.node_update(base, node(ready="False")) == ActionType.UPDATE_NODE_CONDITION
    both = events.node_update(base, node(labels={"a": "b"}, cpu="8"))
    assert both == ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_ALLOCATABLE


def assigned(name: str, namespace: str = "ns", **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"nodeName": "n1"}}


def test_a_pod_changing_matters_to_spread_only_if_a_constraint_selects_it() -> None:
    from pyscheduler.plugins.pod_topology_spread import PodTopologySpread

    spread = {"topologySpreadConstraints": [{
        "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"app": "web"}}}]}
    clock = Clock()
    regs = {"PodTopologySpread": tuple(PodTopologySpread().events_to_register())}
    q = SchedulingQueue(clock=clock, registrations=regs)
    parked(q, "web", "PodTopologySpread", **spread)
    clock.now += 60
    q.cluster_event(events.ASSIGNED_POD_ADD, None, assigned("db", app="db"))
    q.cluster_event(events.ASSIGNED_POD_ADD, None, assigned("web2", "other", app="web"))
    assert active(q) == []  # another app, another namespace: the counts it reads are as they were
    q.cluster_event(events.ASSIGNED_POD_DELETE, assigned("web1", app="web"), None)
    assert active(q) == ["web"]


def test_one_more_pod_helps_pod_affinity_only_if_a_required_term_selects_it() -> None:
    affinity = {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}]}}}
    anti = {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "zone"}]}}}
    clock = Clock()
    regs = {"InterPodAffinity": tuple(InterPodAffinity().events_to_register())}
    q = SchedulingQueue(clock=clock, registrations=regs)
    parked(q, "wants-db", "InterPodAffinity", **affinity)
    parked(q, "shuns-db", "InterPodAffinity", **anti)
    clock.now += 60
    q.cluster_event(events.ASSIGNED_POD_ADD, None, assigned("cache", app="cache"))
    q.cluster_event(events.ASSIGNED_POD_ADD, None, assigned("db0", "elsewhere", app="db"))
    assert active(q) == []
    q.cluster_event(events.ASSIGNED_POD_ADD, None, assigned("db1", app="db"))
    assert active(q) == ["wants-db"]
    q.cluster_event(events.ASSIGNED_POD_DELETE, assigned("db1", app="db"), None)
    assert active(q) == ["shuns-db"]
