"""DefaultPreemption: eligibility, victims per node, the choice between nodes, and messages.

The cases follow kube's ``default_preemption_test.go`` (SelectVictimsOnNode, DryRunPreemption,
SelectBestCandidate, PodEligibleToPreemptOthers) on the real default profile: the dry run
asks the same filters the scheduler runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.nodetable import NodeTable
from pyscheduler.framework.pipeline import Pipeline
from pyscheduler.framework.pod import PodInfo, pod_info
from pyscheduler.plugins.default_preemption import (
    NO_VICTIMS,
    NOT_HELPFUL,
    Candidate,
    DefaultPreemption,
    DisruptionBudget,
    pick_one_node,
)
from pyscheduler.plugins.registry import build_profile
from pyscheduler.settings import SchedulerConfig
from tests.unit.plugins.builders import build_table, make_node, make_pod

Obj = dict[str, Any]
T0 = "2026-01-01T00:00:00Z"
T1 = "2026-01-01T00:01:00Z"
T2 = "2026-01-01T00:02:00Z"


def pod(name: str, *, cpu: str = "1", memory: str = "1Gi", priority: int = 0,
        start: str | None = T0, labels: Mapping[str, str] | None = None,
        scheduler: str = "pyscheduler", **spec: Any) -> Obj:
    b = make_pod(name).req(cpu=cpu, memory=memory)
    for k, v in (labels or {}).items():
        b.label(k, v)
    obj = b.obj()
    obj["spec"].update(priority=priority, schedulerName=scheduler, **spec)
    if start is not None:
        obj["status"] = {"startTime": start}
    return obj


def node(name: str, cpu: str = "4", **labels: str) -> Obj:
    return make_node(name).capacity(cpu=cpu, memory="32Gi", pods=110).labels(labels).obj()


class Cluster:
    """A table, the default profile's pipeline, and DefaultPreemption over them."""

    def __init__(self, nodes: Sequence[Obj], pods: Mapping[str, Sequence[Obj]],
                 **plugin_args: int) -> None:
        self.table: NodeTable = build_table(nodes, pods)
        self.pipeline = Pipeline(build_profile(SchedulerConfig()), seed=1)
        self.plugin = DefaultPreemption(rng=np.random.default_rng(0), **plugin_args)

    def preempt(self, preemptor: Obj, budgets: Sequence[DisruptionBudget] = (),
                may_evict: Any = lambda p: True) -> Any:
        info = pod_info(preemptor)
        ctx = CycleContext.for_pod(info, self.table)
        outcome = self.pipeline.filter(ctx)
        assert not outcome.feasible.any(), "the preemptor fits somewhere already"

        def fits(slot: int, why: bool) -> list[str] | None:
            return self.pipeline.fits_row(CycleContext.for_pod(info, self.table), slot,
                                          why=why)

        return self.plugin.preempt(ctx, outcome, fits, may_evict, budgets)

    def snapshot(self) -> tuple[Any, ...]:
        n = self.table.n
        return (self.table.requested[:n].tobytes(),
                tuple(tuple(sorted(p)) for p in self.table.pods[:n]))


def victims(result: Any) -> tuple[str, list[str]]:
    assert result.candidate is not None, result.message
    return result.candidate.node, sorted(v.name for v in result.candidate.victims)


# -- SelectVictimsOnNode / DryRunPreemption ----------------------------------------------------

def test_lower_priority_pods_make_room_and_the_table_is_restored() -> None:
    cluster = Cluster([node("n1")], {"n1": [pod("low1", cpu="2", priority=1),
                                             pod("low2", cpu="2", priority=1)]})
    before = cluster.snapshot()
    result = cluster.preempt(pod("high", cpu="3", priority=10))
    assert victims(result) == ("n1", ["low1", "low2"])
    assert result.message == ""
    assert cluster.snapshot() == before


def test_only_as_many_victims_as_needed_the_least_important_go() -> None:
    # kube reprieves the most important first: the higher-priority low pod stays.
    cluster = Cluster([node("n1")], {"n1": [pod("p5", cpu="1", priority=5),
                                             pod("p1", cpu="1", priority=1),
                                             pod("p3", cpu="2", priority=3)]})
    result = cluster.preempt(pod("high", cpu="1", priority=10))
    assert victims(result) == ("n1", ["p1"])


def test_equal_priority_the_later_started_goes() -> None:
    cluster = Cluster([node("n1", cpu="2")], {"n1": [pod("old", priority=1, start=T0),
                                                      pod("new", priority=1, start=T1)]})
    assert victims(cluster.preempt(pod("high", priority=10))) == ("n1", ["new"])


def test_equal_or_higher_priority_pods_are_never_victims() -> None:
    cluster = Cluster([node("n1", cpu="2")], {"n1": [pod("same", priority=10),
                                                      pod("higher", priority=20)]})
    result = cluster.preempt(pod("high", priority=10))
    assert result.candidate is None
    assert result.message == f"0/1 nodes are available: 1 {NO_VICTIMS}."
    assert result.clear_nomination


def test_no_victims_on_any_node_is_answered_without_a_dry_run() -> None:
    cluster = Cluster([node("n1", cpu="1"), node("n2", cpu="1")],
                      {"n1": [pod("a", priority=0)], "n2": [pod("b", priority=0)]})
    result = cluster.preempt(pod("p", priority=0))
    assert result.message == f"0/2 nodes are available: 2 {NO_VICTIMS}."


def test_removing_every_victim_is_not_enough() -> None:
    cluster = Cluster([node("n1", cpu="4")], {"n1": [pod("low", cpu="1", priority=1),
                                                      pod("high", cpu="3", priority=100)]})
    result = cluster.preempt(pod("p", cpu="2", priority=10))
    assert result.candidate is None
    assert result.message == "0/1 nodes are available: 1 Insufficient cpu."


def test_unresolvable_nodes_are_not_tried() -> None:
    # n2 fails the pod's node selector (unresolvable): preemption is not helpful there.
    cluster = Cluster([node("n1", cpu="1", zone="a"), node("n2", cpu="1", zone="b")],
                      {"n1": [pod("low1", priority=1)], "n2": [pod("low2", priority=1)]})
    result = cluster.preempt(pod("p", priority=10, nodeSelector={"zone": "a"}))
    assert victims(result) == ("n1", ["low1"])
    cluster2 = Cluster([node("n1", cpu="1", zone="b")], {"n1": [pod("low", priority=1)]})
    result2 = cluster2.preempt(pod("p", priority=10, nodeSelector={"zone": "a"}))
    assert result2.candidate is None
    assert result2.message == f"0/1 nodes are available: 1 {NOT_HELPFUL}."


def test_host_port_conflict_is_resolved_by_evicting_the_holder() -> None:
    holder = pod("holder", cpu="100m", priority=1)
    holder["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80}]
    cluster = Cluster([node("n1")], {"n1": [holder, pod("other", cpu="100m", priority=1)]})
    preemptor = pod("p", cpu="100m", priority=10)
    preemptor["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80}]
    # Only the pod holding the port goes: the dry run runs every filter, not only resources.
    assert victims(cluster.preempt(preemptor)) == ("n1", ["holder"])


def test_anti_affinity_of_a_lower_priority_pod_is_resolved_by_evicting_it() -> None:
    term = {"labelSelector": {"matchLabels": {"app": "web"}},
            "topologyKey": "kubernetes.io/hostname"}
    guard = pod("guard", cpu="100m", priority=1, affinity={
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}})
    cluster = Cluster([node("n1", **{"kubernetes.io/hostname": "n1"})],
                      {"n1": [guard, pod("bystander", cpu="100m", priority=1)]})
    result = cluster.preempt(pod("web", cpu="100m", priority=10, labels={"app": "web"}))
    assert victims(result) == ("n1", ["guard"])


def test_may_evict_limits_the_victims() -> None:
    cluster = Cluster([node("n1", cpu="2")],
                      {"n1": [pod("mine", priority=1),
                              pod("theirs", priority=1, scheduler="default-scheduler")]})
    result = cluster.preempt(pod("p", cpu="2", priority=10),
                             may_evict=lambda p: p.scheduler_name == "pyscheduler")
    assert result.candidate is None
    assert result.message == "0/1 nodes are available: 1 Insufficient cpu."
    result = cluster.preempt(pod("p", cpu="1", priority=10),
                             may_evict=lambda p: p.scheduler_name == "pyscheduler")
    assert victims(result) == ("n1", ["mine"])


# -- budgets ---------------------------------------------------------------------------------

def budget(allowed: int, selector: Obj | None = None, disrupted: Sequence[str] = ()) -> Any:
    return DisruptionBudget.from_object({
        "metadata": {"namespace": "default", "name": "pdb"},
        "spec": {"selector": selector if selector is not None else
                 {"matchLabels": {"app": "db"}}},
        "status": {"disruptionsAllowed": allowed,
                   "disruptedPods": {name: T0 for name in disrupted}}})


def test_the_node_violating_no_budget_is_chosen() -> None:
    cluster = Cluster([node("n1", cpu="1"), node("n2", cpu="1")],
                      {"n1": [pod("db", priority=1, labels={"app": "db"})],
                       "n2": [pod("web", priority=5)]})
    # Without a budget the lower-priority victim wins; with one, the node violating none.
    assert victims(cluster.preempt(pod("p", priority=10))) == ("n1", ["db"])
    result = cluster.preempt(pod("p", priority=10), budgets=[budget(0)])
    assert victims(result) == ("n2", ["web"])
    assert result.candidate.pdb_violations == 0


def test_violations_are_counted_and_pods_reprieved_first() -> None:
    # Two db pods (budget allows one disruption) and a free pod; one cpu needed: the pod
    # violating the budget is reprieved first, so the victim is the non-violating one.
    cluster = Cluster([node("n1", cpu="3")],
                      {"n1": [pod("db1", priority=1, labels={"app": "db"}),
                              pod("db2", priority=1, labels={"app": "db"}, start=T1),
                              pod("free", priority=1, start=T2)]})
    result = cluster.preempt(pod("p", cpu="2", priority=10), budgets=[budget(1)])
    node_name, names = victims(result)
    assert names == ["db2", "free"] or names == ["db1", "free"]
    assert result.candidate.pdb_violations == 0
    result = cluster.preempt(pod("p", cpu="3", priority=10), budgets=[budget(1)])
    assert victims(result) == ("n1", ["db1", "db2", "free"])
    assert result.candidate.pdb_violations == 1


@pytest.mark.parametrize(("pdb", "violations"), [
    pytest.param(budget(0), 1, id="no disruption allowed"),
    pytest.param(budget(1), 0, id="one disruption allowed"),
    pytest.param(budget(0, disrupted=["db"]), 0, id="already disrupted pods are not counted"),
    pytest.param(budget(0, selector={}), 0, id="an empty selector selects nothing"),
    pytest.param(budget(0, selector={"matchLabels": {"app": "web"}}), 0,
                 id="another app"),
])
def test_budget_matching(pdb: DisruptionBudget, violations: int) -> None:
    cluster = Cluster([node("n1", cpu="1")], {"n1": [pod("db", priority=1,
                                                          labels={"app": "db"})]})
    result = cluster.preempt(pod("p", priority=10), budgets=[pdb])
    assert result.candidate.pdb_violations == violations


# -- SelectBestCandidate (pickOneNodeForPreemption) --------------------------------------------

def info(name: str, priority: int, start: str = T0) -> PodInfo:
    return pod_info(pod(name, priority=priority, start=start))


@pytest.mark.parametrize(("candidates", "want"), [
    pytest.param([Candidate("n1", (info("a", 1),), 1), Candidate("n2", (info("b", 9),), 0)],
                 "n2", id="fewest PDB violations first"),
    pytest.param([Candidate("n1", (info("a", 5),), 0), Candidate("n2", (info("b", 3),
                                                                           info("c", 3)), 0)],
                 "n2", id="lowest highest victim priority"),
    pytest.param([Candidate("n1", (info("a", 5), info("b", 4)), 0),
                  Candidate("n2", (info("c", 5), info("d", 1)), 0)],
                 "n2", id="smallest priority sum when the highest are equal"),
    pytest.param([Candidate("n1", (info("a", -5), info("b", -5)), 0),
                  Candidate("n2", (info("c", -5),), 0)],
                 "n2", id="negative priorities: fewer victims is still the smaller sum"),
    pytest.param([Candidate("n1", (info("a", 5, T0),), 0),
                  Candidate("n2", (info("b", 5, T1),), 0)],
                 "n2", id="latest start of the highest-priority victims"),
    pytest.param([Candidate("n1", (info("a", 5, T2), info("b", 1, T0)), 0),
                  Candidate("n2", (info("c", 5, T1), info("d", 1, T2)), 0)],
                 "n1", id="start time compares only the highest-priority victims"),
    pytest.param([Candidate("n1", (info("a", 5),), 0), Candidate("n2", (info("b", 5),), 0)],
                 "n1", id="a full tie takes the first"),
])
def test_pick_one_node(candidates: list[Candidate], want: str) -> None:
    assert pick_one_node(candidates).node == want


def test_dry_run_prefers_the_node_with_the_cheapest_victims() -> None:
    cluster = Cluster([node("n1", cpu="2"), node("n2", cpu="2"), node("n3", cpu="2")],
                      {"n1": [pod("a1", priority=5), pod("a2", priority=5)],
                       "n2": [pod("b1", priority=1), pod("b2", priority=5)],
                       "n3": [pod("c1", priority=7), pod("c2", priority=100)]})
    assert victims(cluster.preempt(pod("p", priority=10))) == ("n2", ["b1"])


def test_candidates_wanted() -> None:
    plugin = DefaultPreemption(min_candidate_nodes_percentage=10,
                               min_candidate_nodes_absolute=100)
    assert plugin.candidates_wanted(50) == 50
    assert plugin.candidates_wanted(5000) == 500
    assert plugin.candidates_wanted(1500) == 150
    assert DefaultPreemption(min_candidate_nodes_percentage=0,
                             min_candidate_nodes_absolute=1).candidates_wanted(10) == 1


def test_dry_run_stops_once_enough_candidates_are_found() -> None:
    nodes = [node(f"n{i}", cpu="1") for i in range(20)]
    cluster = Cluster(nodes, {f"n{i}": [pod(f"v{i}", priority=1)] for i in range(20)},
                      min_candidate_nodes_percentage=0, min_candidate_nodes_absolute=3)
    tried: list[int] = []
    with_port = pod("p", priority=10)  # a host port: every node gets the full dry run
    with_port["spec"]["containers"][0]["ports"] = [{"containerPort": 80, "hostPort": 80}]
    info_ = pod_info(with_port)
    ctx = CycleContext.for_pod(info_, cluster.table)
    outcome = cluster.pipeline.filter(ctx)

    def fits(slot: int, why: bool) -> list[str] | None:
        tried.append(slot)
        return cluster.pipeline.fits_row(CycleContext.for_pod(info_, cluster.table), slot,
                                         why=why)

    result = cluster.plugin.preempt(ctx, outcome, fits, lambda p: True)
    assert result.candidate is not None
    # One fit check after removing the victim and one reprieve per node, three nodes.
    assert len(set(tried)) == 3


# -- PodEligibleToPreemptOthers ----------------------------------------------------------------

def test_preemption_policy_never() -> None:
    cluster = Cluster([node("n1", cpu="1")], {"n1": [pod("low", priority=1)]})
    result = cluster.preempt(pod("p", priority=10, preemptionPolicy="Never"))
    assert result.candidate is None
    assert result.message == "not eligible due to preemptionPolicy=Never."
    assert not result.clear_nomination


def terminating(name: str, priority: int) -> Obj:
    obj = pod(name, priority=priority)
    obj["metadata"]["deletionTimestamp"] = T1
    obj["status"]["conditions"] = [{"type": "DisruptionTarget", "status": "True",
                                    "reason": "PreemptionByScheduler"}]
    return obj


def test_waits_while_its_victims_terminate_on_the_nominated_node() -> None:
    cluster = Cluster([node("n1", cpu="1"), node("n2", cpu="1")],
                      {"n1": [terminating("victim", 1)], "n2": [pod("other", priority=1)]})
    preemptor = pod("p", priority=10)
    preemptor["status"]["nominatedNodeName"] = "n1"
    result = cluster.preempt(preemptor)
    assert result.candidate is None
    assert result.message == "not eligible due to a terminating pod on the nominated node."
    assert not result.clear_nomination
    # A terminating pod that was not preempted (deleted by someone) does not hold it back.
    plain = pod("victim", priority=1)
    plain["metadata"]["deletionTimestamp"] = T1
    cluster = Cluster([node("n1", cpu="1")], {"n1": [plain]})
    assert victims(cluster.preempt(preemptor)) == ("n1", ["victim"])


def test_budget_from_object_with_an_unreadable_selector_selects_nothing() -> None:
    pdb = DisruptionBudget.from_object({
        "metadata": {"namespace": "default", "name": "x"},
        "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "Bogus"}]}},
        "status": {}})
    assert not pdb.selects(pod_info(pod("db", labels={"app": "db"})))
    assert pdb.allowed == 0


# -- a check asked once per candidate (a fragment's filter) -------------------------------------

def test_verification_turns_down_a_candidate_and_the_next_best_is_taken() -> None:
    cluster = Cluster([node("n1", cpu="1"), node("n2", cpu="1")],
                      {"n1": [pod("cheap", priority=1)], "n2": [pod("dear", priority=5)]})
    preemptor = pod_info(pod("p", priority=10))
    ctx = CycleContext.for_pod(preemptor, cluster.table)
    outcome = cluster.pipeline.filter(ctx)
    seen: list[tuple[str, int]] = []

    def fits(slot: int, why: bool) -> list[str] | None:
        return cluster.pipeline.fits_row(CycleContext.for_pod(preemptor, cluster.table), slot,
                                         why=why)

    def verify(slot: int) -> bool:
        # Asked with the candidate's victims gone from the table.
        seen.append((cluster.table.names[slot], len(cluster.table.pods[slot])))
        return cluster.table.names[slot] == "n2"

    before = cluster.snapshot()
    result = cluster.plugin.preempt(ctx, outcome, fits, lambda p: True, verify=verify)
    assert victims(result) == ("n2", ["dear"])
    assert seen == [("n1", 0), ("n2", 0)]
    assert cluster.snapshot() == before
    refused = cluster.plugin.preempt(ctx, outcome, fits, lambda p: True,
                                     verify=lambda slot: False)
    assert refused.candidate is None and refused.clear_nomination
    assert refused.message == ("the pod's stage logic rejects every candidate node even with "
                               "the victims gone")


@pytest.mark.parametrize("seed", range(20))
def test_victims_by_resources_agree_with_the_full_dry_run(seed: int) -> None:
    """For a pod whose fit only resources decide, the arithmetic reprieve picks the same
    victims as running the filters at every step, on every node."""
    rng = np.random.default_rng(seed)
    nodes = [node(f"n{i}", cpu=str(int(rng.integers(2, 6)))) for i in range(6)]
    pods: dict[str, list[Obj]] = {}
    for i in range(6):
        pods[f"n{i}"] = [pod(f"v{i}-{j}", cpu=f"{int(rng.integers(1, 10)) * 100}m",
                             priority=int(rng.integers(0, 8)), start=(T0, T1, T2)[j % 3],
                             labels={"app": "db"} if rng.random() < 0.4 else None)
                         for j in range(int(rng.integers(1, 6)))]
    cluster = Cluster(nodes, pods)
    preemptor = pod_info(pod("p", cpu=f"{int(rng.integers(5, 40)) * 100}m", priority=5))
    ctx = CycleContext.for_pod(preemptor, cluster.table)
    budgets = [budget(int(rng.integers(0, 2)))]

    def fits(slot: int, why: bool) -> list[str] | None:
        return cluster.pipeline.fits_row(CycleContext.for_pod(preemptor, cluster.table), slot,
                                         why=why)

    for slot in range(cluster.table.n):
        full = cluster.plugin._victims_on(ctx, slot, fits, lambda p: True, budgets)
        quick = cluster.plugin._victims_by_resources(ctx, slot, lambda p: True, budgets)
        if isinstance(full, Candidate):
            assert isinstance(quick, Candidate)
            assert [v.name for v in quick.victims] == [v.name for v in full.victims]
            assert quick.pdb_violations == full.pdb_violations
        else:
            assert quick == full
