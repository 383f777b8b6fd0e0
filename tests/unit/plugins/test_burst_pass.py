"""The burst pass: the same pipeline over the cloud pools' virtual nodes.

Table tests per burst plugin (BurstEligible, CloudPlatform, InstanceLimits, PoolRefusals,
PoolOrder), then the whole burst profile over a table holding real and virtual rows: the rules a
real node keeps (every resource the pod asks, node affinity, topology spread, inter-pod
affinity, taints other than the provider's) hold for a pool's virtual node too.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from pyscheduler.api.names import PRICE_ANNOTATION
from pyscheduler.config import parse_config
from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.nodetable import NodeTable, node_info
from pyscheduler.framework.pipeline import Pipeline, ScheduleResult
from pyscheduler.framework.pod import pod_info
from pyscheduler.plugins.burst_eligible import BurstEligible, burst_blocker
from pyscheduler.plugins.cloud_platform import CloudPlatform
from pyscheduler.plugins.instance_limits import ERR_LIMITS_UNKNOWN, InstanceLimits
from pyscheduler.plugins.pool_order import PoolOrder
from pyscheduler.plugins.pool_refusals import ERR_REFUSED, PoolRefusals
from pyscheduler.plugins.registry import build_profiles
from pyscheduler.virtual.node import PoolConfig, pool_annotations, virtual_node
from pyscheduler.virtual.types import PoolCapacity
from tests.unit.plugins.builders import build_table, expr, make_node, make_pod, outcome

GI = 2**30
Obj = dict[str, Any]

ACI = PoolConfig("aci", "azure")
ECI = PoolConfig("eci", "alibaba")


def pool_node(pool: PoolConfig, *, cpu: str = "100", memory: str = "400Gi", pods: int = 100,
              max_cpu: int = 4000, max_memory: int = 16 * GI, ready: bool = True,
              gpus: int | None = None, limits: bool = True) -> Obj:
    """The virtual node the provider registers for ``pool`` (per-instance limits reported
    unless ``limits`` is False)."""
    capacity = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    if gpus is not None:
        capacity["nvidia.com/gpu"] = str(gpus)
    notes = pool_annotations(PoolCapacity(
        pool.name, pool.platform, 0, 0, 0, 0, 0, 0, max_cpu, max_memory,
        price_per_cpu_hour=0.05)) if limits else None
    return virtual_node(pool, capacity, ready=ready, annotations=notes)


def burst_ctx(pod: Obj, nodes: list[Obj], pods: dict[str, list[Obj]] | None = None
              ) -> CycleContext:
    return CycleContext.for_pod(pod_info(pod), build_table(nodes, pods), virtual_pass=True)


def real_node(name: str, cpu: str = "4", zone: str = "a") -> Obj:
    return make_node(name).capacity(cpu=cpu, memory="16Gi", pods=110) \
        .label("kubernetes.io/hostname", name).label("topology.kubernetes.io/zone", zone).obj()


# -- plugins, one by one ---------------------------------------------------------------------------

@pytest.mark.parametrize(("pod", "reason"), [
    pytest.param(make_pod().obj(), None, id="a plain pod may burst"),
    pytest.param(make_pod().annotation("wssp/burst", "never").obj(),
                 'the pod is annotated wssp/burst: "never"', id="opted out"),
    pytest.param(make_pod().annotation("wssp/burst", "always").obj(), None,
                 id="another annotation value is no opt-out"),
    pytest.param({**make_pod().obj(), "metadata": {"name": "ds", "ownerReferences": [
        {"kind": "DaemonSet", "name": "agent", "apiVersion": "apps/v1", "uid": "x"}]}},
        "DaemonSet pods run on every real node and never burst", id="daemonset"),
    pytest.param(make_pod().host_port(8080).obj(), "container c0 uses hostPort 8080",
                 id="host port"),
    pytest.param({**make_pod().obj(), "spec": {**make_pod().obj()["spec"],
                                               "hostNetwork": True}},
                 "the pod uses hostNetwork", id="host network"),
    pytest.param({**make_pod().obj(), "spec": {**make_pod().obj()["spec"], "volumes": [
        {"name": "logs", "hostPath": {"path": "/var/log"}}]}},
        "volume logs is a hostPath volume", id="hostPath volume"),
    pytest.param({**make_pod().obj(), "spec": {**make_pod().obj()["spec"], "volumes": [
        {"name": "cfg", "configMap": {"name": "c"}}, {"name": "ssd", "local": {"path": "/m"}}]}},
        "volume ssd is a local volume", id="local volume"),
    pytest.param({**make_pod().obj(), "spec": {**make_pod().obj()["spec"], "volumes": [
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}},
        "volume data is a PersistentVolumeClaim, which a cloud pool cannot attach",
        id="persistent volume claim"),
    pytest.param({**make_pod().obj(), "spec": {**make_pod().obj()["spec"], "volumes": [
        {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}]}},
        "volume scratch is a PersistentVolumeClaim, which a cloud pool cannot attach",
        id="generic ephemeral volume"),
    pytest.param({**make_pod().obj(), "spec": {**make_pod().obj()["spec"], "volumes": [
        {"name": "tmp", "emptyDir": {}}]}}, None, id="emptyDir may burst"),
])
def test_burst_eligible(pod: Obj, reason: str | None) -> None:
    assert burst_blocker(pod) == reason
    ctx = burst_ctx(pod, [real_node("n1"), pool_node(ACI)])
    got = outcome(BurstEligible().filter(ctx), ctx.table)
    assert got["wssp-virtual-aci"] == ([] if reason is None else
                                       [(f"cloud pool(s) cannot take the pod: {reason}", True)])
    assert got["n1"] == []  # real rows are not this pass's candidates
    # The first pass is not concerned.
    first = CycleContext.for_pod(pod_info(pod), ctx.table)
    assert BurstEligible().filter(first).passed is None


@pytest.mark.parametrize(("label", "passing"), [
    pytest.param(None, {"wssp-virtual-aci", "wssp-virtual-eci"}, id="no label: any pool"),
    pytest.param("alibaba", {"wssp-virtual-eci"}, id="one platform"),
    pytest.param("gcp", set(), id="no pool of that platform"),
])
def test_cloud_platform(label: str | None, passing: set[str]) -> None:
    pod = make_pod()
    if label is not None:
        pod = pod.label("wssp/cloud-platform", label)
    ctx = burst_ctx(pod.obj(), [pool_node(ACI), pool_node(ECI)])
    got = outcome(CloudPlatform().filter(ctx), ctx.table)
    assert {n for n, r in got.items() if not r} == passing
    for name in {"wssp-virtual-aci", "wssp-virtual-eci"} - passing:
        assert got[name] == [(f"node(s) are not on cloud platform {label}", True)]


@pytest.mark.parametrize(("cpu", "memory", "expected"), [
    pytest.param("4", "16Gi", [], id="the largest instance exactly"),
    pytest.param("4500m", "1Gi", [("cloud pool(s) whose largest instance has less than "
                                   "4500m cpu", True)], id="too much cpu"),
    pytest.param("1", "17Gi", [("cloud pool(s) whose largest instance has less than "
                                f"{17 * GI} bytes of memory", True)], id="too much memory"),
    pytest.param("64", "64Gi", [("cloud pool(s) whose largest instance has less than "
                                 "64000m cpu", True)], id="both: cpu named"),
])
def test_instance_limits(cpu: str, memory: str, expected: list[tuple[str, bool]]) -> None:
    ctx = burst_ctx(make_pod().req(cpu=cpu, memory=memory).obj(), [pool_node(ACI)])
    assert outcome(InstanceLimits().filter(ctx), ctx.table)["wssp-virtual-aci"] == expected


def test_instance_limits_not_reported_yet_take_nothing() -> None:
    """A pool whose limits the cloud has not reported (the scheduler just started) takes no pod:
    a guess would have the cloud refuse instances one by one. The reason is resolvable."""
    ctx = burst_ctx(make_pod().req(cpu="100m").obj(),
                    [pool_node(ACI, limits=False), pool_node(ECI)])
    got = outcome(InstanceLimits().filter(ctx), ctx.table)
    assert got == {"wssp-virtual-aci": [(ERR_LIMITS_UNKNOWN, False)], "wssp-virtual-eci": []}


def test_pool_refusals_age_out_and_spare_smaller_pods() -> None:
    now = [0.0]
    plugin = PoolRefusals(clock=lambda: now[0])
    table = build_table([pool_node(ACI), pool_node(ECI)])
    table.refuse("wssp-virtual-aci", 2000, GI, until=60.0)
    table.refuse("n-unknown", 2000, GI, until=60.0)     # not a row: ignored

    def verdict(cpu: str, memory: str) -> dict[str, list[tuple[str, bool]]]:
        pod = pod_info(make_pod().req(cpu=cpu, memory=memory).obj())
        ctx = CycleContext.for_pod(pod, table, virtual_pass=True)
        return outcome(plugin.filter(ctx), table)
    assert verdict("2", "1Gi") == {"wssp-virtual-aci": [(ERR_REFUSED, False)],
                                   "wssp-virtual-eci": []}
    assert verdict("4", "2Gi")["wssp-virtual-aci"] == [(ERR_REFUSED, False)]  # larger still
    assert verdict("500m", "1Gi")["wssp-virtual-aci"] == []                   # smaller fits
    assert verdict("2", "512Mi")["wssp-virtual-aci"] == []
    now[0] = 61.0
    assert verdict("2", "1Gi")["wssp-virtual-aci"] == []
    assert table.refusals == {}   # aged out entries are dropped


def test_pool_order_scores_the_configured_order_and_filters_foreign_pools() -> None:
    plugin = PoolOrder(["eci", "aci"])
    gcp = PoolConfig("gke", "gcp")
    ctx = burst_ctx(make_pod().obj(), [real_node("n1"), pool_node(ACI), pool_node(ECI),
                                       pool_node(gcp)])
    got = outcome(plugin.filter(ctx), ctx.table)
    assert got["wssp-virtual-gke"] == [("cloud pool(s) not served by this scheduler", True)]
    assert got["wssp-virtual-aci"] == got["wssp-virtual-eci"] == []
    values = plugin.score(ctx, ctx.nodes())
    slots = ctx.table.slots
    assert values[slots["wssp-virtual-eci"]] > values[slots["wssp-virtual-aci"]] > 0


def test_a_virtual_node_is_recognised_by_its_labels_and_name_together() -> None:
    """Only the node the provider registers for a pool is a virtual row: a real node that
    carries the pool label, or a look-alike name without the labels, stays a real node."""
    info = node_info(pool_node(ACI))
    assert info.pool == "aci" and info.max_instance_cpu == 4000 \
        and info.max_instance_memory == 16 * GI and info.price_per_cpu_hour == 0.05
    impostor = make_node("n1").label("wssp/cloud-pool", "aci") \
        .label("type", "virtual-kubelet").obj()
    assert node_info(impostor).pool is None
    look_alike = make_node("wssp-virtual-aci").obj()
    assert node_info(look_alike).pool is None
    garbled = pool_node(ACI)
    garbled["metadata"]["annotations"].update({"wssp/max-instance-cpu": "lots",
                                               PRICE_ANNOTATION: "-3"})
    info = node_info(garbled)
    assert info.max_instance_cpu == 0 and info.price_per_cpu_hour == 0.0


# -- the whole burst pass ------------------------------------------------------------------------

def passes(config: Obj | None = None, seed: int = 1) -> tuple[Pipeline, Pipeline]:
    doc = {"virtualNodes": {"enabled": True, "cloudUrl": "http://127.0.0.1:9",
                            "pools": [{"name": "aci", "platform": "azure"},
                                      {"name": "eci", "platform": "alibaba"}]},
           **(config or {})}
    first, burst = build_profiles(parse_config(doc, "t"))
    assert burst is not None
    return Pipeline(first, seed=seed), Pipeline(burst, seed=seed)


def schedule(pod: Obj, table: NodeTable, config: Obj | None = None
             ) -> tuple[ScheduleResult, ScheduleResult]:
    """Both passes for ``pod``; the burst pass's result explained. The fast path (row-local
    answers kept per pod signature and recomputed for changed rows, as the scheduler runs it)
    must choose as the explained full run does: both run, on fresh and on warm pipelines."""
    # One warm pair per table, as a scheduler has one per cache (the memo is the table's).
    _, first, burst = PIPELINES.setdefault((id(table), repr(config)), (table, *passes(config)))
    info = pod_info(pod)
    table.request_vector(info)
    explained = burst.schedule(CycleContext.for_pod(info, table, virtual_pass=True),
                               explain=True)
    fast = burst.schedule(CycleContext.for_pod(info, table, virtual_pass=True))
    cold = passes(config)[1].schedule(CycleContext.for_pod(info, table, virtual_pass=True))
    assert (fast.node is None) == (explained.node is None) == (cold.node is None)
    if explained.filtered.feasible.sum() == 1:
        assert fast.node == explained.node == cold.node
    return first.schedule(CycleContext.for_pod(info, table)), explained


PIPELINES: dict[tuple[int, str], tuple[NodeTable, Pipeline, Pipeline]] = {}


def message(result: ScheduleResult) -> str:
    return result.filtered.diagnose().message()


def test_the_first_pass_never_places_on_a_virtual_node() -> None:
    """A pod that tolerates every taint still sees only real nodes in the first pass."""
    table = build_table([real_node("n1", cpu="1"), pool_node(ACI)])
    pod = make_pod().req(cpu="2").toleration(operator="Exists").obj()
    first, burst = schedule(pod, table)
    assert first.node is None and message(first).startswith("0/1 nodes are available")
    assert burst.node == "wssp-virtual-aci"


def test_pools_are_tried_in_order_and_filled_to_their_quota() -> None:
    table = build_table([pool_node(ACI, cpu="10"), pool_node(ECI)])
    pod = make_pod().req(cpu="4", memory="1Gi")
    _, burst = schedule(pod.obj(), table)
    assert burst.node == "wssp-virtual-aci"
    slot = table.slots["wssp-virtual-aci"]
    for i in range(2):  # the cache's ledger: two 4-cpu pods on the aci pool
        table.add_pod(slot, pod_info(make_pod(f"on-aci-{i}").req(cpu="4", memory="1Gi").obj()))
    _, burst = schedule(pod.obj(), table)
    assert burst.node == "wssp-virtual-eci"                # 2 cpu left on aci
    table.remove_pod(slot, "uid-default-on-aci-1")
    _, burst = schedule(pod.obj(), table)
    assert burst.node == "wssp-virtual-aci"


def test_a_gpu_pod_bursts_only_to_a_pool_that_offers_gpus() -> None:
    gpu = make_pod().req({"nvidia.com/gpu": 1}, cpu="1").obj()
    table = build_table([real_node("n1"), pool_node(ACI), pool_node(ECI)])
    _, burst = schedule(gpu, table)
    assert burst.node is None
    assert message(burst) == "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    table = build_table([real_node("n1"), pool_node(ACI), pool_node(ECI, gpus=8)])
    _, burst = schedule(gpu, table)
    assert burst.node == "wssp-virtual-eci"


def test_hard_topology_spread_holds_in_the_burst_pass() -> None:
    """A virtual node has the topology labels of its pool (hostname = the node's name, no zone
    unless the pool is given one): a DoNotSchedule constraint on a key no virtual node carries
    keeps the pod off every pool, as kube keeps it off a node missing the key."""
    spread = {"maxSkew": 1, "topologyKey": "example.com/rack",
              "whenUnsatisfiable": "DoNotSchedule",
              "labelSelector": {"matchLabels": {"app": "web"}}}
    pod = make_pod().label("app", "web").obj()
    pod["spec"]["topologySpreadConstraints"] = [spread]
    table = build_table([real_node("n1", cpu="0"), pool_node(ACI), pool_node(ECI)])
    _, burst = schedule(pod, table)
    assert burst.node is None
    assert "didn't match pod topology spread constraints (missing required label)" \
        in message(burst)
    # ScheduleAnyway is a preference only: the pod bursts.
    pod["spec"]["topologySpreadConstraints"] = [{**spread,
                                                 "whenUnsatisfiable": "ScheduleAnyway"}]
    _, burst = schedule(pod, table)
    assert burst.node == "wssp-virtual-aci"


def test_required_pod_anti_affinity_holds_in_the_burst_pass() -> None:
    """Required anti-affinity against pods already in a pool keeps a pod out of that pool."""
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
        "labelSelector": {"matchLabels": {"app": "db"}},
        "topologyKey": "kubernetes.io/hostname"}]}}
    pod = make_pod("db-2").label("app", "db").obj()
    pod["spec"]["affinity"] = anti
    running = make_pod("db-1").label("app", "db").obj()
    table = build_table([real_node("n1", cpu="0"), pool_node(ACI), pool_node(ECI)],
                        pods={"wssp-virtual-aci": [running]})
    _, burst = schedule(pod, table)
    assert burst.node == "wssp-virtual-eci"
    table = build_table([real_node("n1", cpu="0"), pool_node(ACI), pool_node(ECI)],
                        pods={"wssp-virtual-aci": [running], "wssp-virtual-eci": [running]})
    _, burst = schedule(pod, table)
    assert burst.node is None
    assert "didn't match pod anti-affinity rules" in message(burst)


def test_node_affinity_with_gt_lt_is_the_node_affinity_plugin_s() -> None:
    """The burst pass uses NodeAffinity itself (the old chooser had its own copy)."""
    table = build_table([pool_node(ACI), pool_node(ECI)])
    pod = make_pod().required_term(expr("wssp/cloud-pool", "In", "eci")).obj()
    assert schedule(pod, table)[1].node == "wssp-virtual-eci"
    pod = make_pod().required_term(expr("kubernetes.io/os", "NotIn", "linux")).obj()
    _, burst = schedule(pod, table)
    assert burst.node is None and "didn't match Pod's node affinity/selector" in message(burst)
    pod = make_pod().node_selector(disk="nvme").obj()
    assert schedule(pod, table)[1].node is None


def test_taints_other_than_the_provider_s_are_kept() -> None:
    tainted = pool_node(ACI)
    tainted["spec"]["taints"].append({"key": "maintenance", "value": "x",
                                      "effect": "NoSchedule"})
    table = build_table([tainted, pool_node(ECI)])
    first, burst = schedule(make_pod().obj(), table)
    assert burst.node == "wssp-virtual-eci"
    got = burst.filtered.diagnose().message()
    assert "untolerated taint {maintenance: x}" in got
    assert "virtual-kubelet.io/provider" not in got


def test_a_cordoned_or_not_ready_pool_takes_nothing() -> None:
    cordoned = pool_node(ACI)
    cordoned["spec"]["unschedulable"] = True
    table = build_table([cordoned, pool_node(ECI, ready=False)])
    _, burst = schedule(make_pod().obj(), table)
    assert burst.node is None
    got = message(burst)
    assert "1 node(s) were unschedulable" in got and "1 node(s) were not ready" in got


def test_per_instance_limits_and_pod_caps_are_reasons() -> None:
    table = build_table([pool_node(ACI, pods=1)])
    big = make_pod().req(cpu="8").label("wssp/cloud-platform", "azure").obj()
    _, burst = schedule(big, table)
    assert message(burst) == ("0/1 nodes are available: 1 cloud pool(s) whose largest "
                              "instance has less than 8000m cpu.")
    table.add_pod(table.slots["wssp-virtual-aci"],
                  pod_info(make_pod("x").req(cpu="1").obj()))
    _, burst = schedule(make_pod().req(cpu="1").obj(), table)
    assert message(burst) == "0/1 nodes are available: 1 Too many pods."


def test_a_pod_that_may_not_burst_says_why_once_per_pool() -> None:
    table = build_table([pool_node(ACI), pool_node(ECI)])
    _, burst = schedule(make_pod().annotation("wssp/burst", "never").obj(), table)
    assert burst.node is None
    assert message(burst) == ('0/2 nodes are available: 2 cloud pool(s) cannot take the pod: '
                              'the pod is annotated wssp/burst: "never".')
    assert burst.filtered.diagnose().unresolvable


@pytest.mark.parametrize("virtual_pass", [False, True])
def test_candidate_rows_are_the_rows_of_the_pass(virtual_pass: bool) -> None:
    # The incremental path asks about the changed rows only; it must agree with nodes().
    table = build_table([real_node("r1"), pool_node(ACI), real_node("r2"), pool_node(ECI),
                         real_node("gone")])
    table.remove_node("gone")  # a hole
    ctx = CycleContext.for_pod(pod_info(make_pod().obj()), table, virtual_pass=virtual_pass)
    every = np.arange(table.n, dtype=np.intp)
    assert ctx.candidate_rows(every).tolist() == np.flatnonzero(ctx.nodes()).tolist()
    assert len(ctx.candidate_rows(every)) == 2
    assert ctx.candidate_rows(every[:1]).tolist() == ([] if virtual_pass else [0])
