"""Default topology spread constraints (pyscheduler.spread_defaults): kube's
``buildDefaultConstraints`` and ``helper.DefaultSelector``, the selector index the informers
keep, and the cache of answers."""

from __future__ import annotations

from typing import Any

import pytest

from pyscheduler.api.labels import EQUALS, EXISTS
from pyscheduler.framework.pod import PodInfo, SpreadConstraint, pod_info
from pyscheduler.settings import (
    DefaultSpreadConstraint,
    PluginsConfig,
    PodTopologySpreadConfig,
    SchedulerConfig,
    ScorePlugin,
)
from pyscheduler.spread_defaults import SpreadDefaults, WorkloadSelectors, owner_of

from tests.unit.plugins.builders import make_pod
from tests.unit.plugins.workloads import (
    feed_workload,
    replica_set,
    replication_controller,
    service,
    stateful_set,
)

Obj = dict[str, Any]
HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
SYSTEM = PodTopologySpreadConfig()
#: kube's filtering_test "default constraints and a service".
NODE_RACK = PodTopologySpreadConfig("List", (
    DefaultSpreadConstraint(3, "node", "DoNotSchedule"),
    DefaultSpreadConstraint(2, "node", "ScheduleAnyway"),
    DefaultSpreadConstraint(5, "rack", "DoNotSchedule")))
FOO_EXISTS = {"matchExpressions": [{"key": "foo", "operator": "Exists"}]}


def pod(*labels: tuple[str, str], namespace: str = "default",
        owner: tuple[str, str, str] | None = None, controller: bool = True,
        spread: Obj | None = None) -> Obj:
    b = make_pod("p", namespace)
    for k, v in labels:
        b.label(k, v)
    obj = b.obj()
    if owner is not None:
        api_version, kind, name = owner
        obj["metadata"]["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": "n", "uid": "x"},
            {"apiVersion": api_version, "kind": kind, "name": name, "uid": f"uid-{name}",
             "controller": controller}]
    if spread is not None:
        obj["spec"]["topologySpreadConstraints"] = [spread]
    return obj


def defaults(settings: PodTopologySpreadConfig, *workloads: Obj) -> SpreadDefaults:
    selectors = WorkloadSelectors()
    for w in workloads:
        feed_workload(selectors, w)
    return SpreadDefaults(None, settings, selectors=selectors)


def summary(constraints: tuple[SpreadConstraint, ...]) -> list[tuple[Any, ...]]:
    """(maxSkew, key, action, selector text, system) per constraint."""
    return [(c.max_skew, c.topology_key, c.when_unsatisfiable, c.selector_key, c.system_default)
            for c in constraints]


RS = ("apps/v1", "ReplicaSet", "rs1")


@pytest.mark.parametrize(("settings", "workloads", "incoming", "expected"), [
    # kube's filtering_test / scoring_test cases involving default constraints.
    pytest.param(NODE_RACK, [service("svc", {"foo": "bar"})], pod(("foo", "bar"), ("baz", "kar")),
                 [(3, "node", "DoNotSchedule", "foo=bar", False),
                  (2, "node", "ScheduleAnyway", "foo=bar", False),
                  (5, "rack", "DoNotSchedule", "foo=bar", False)],
                 id="default constraints and a service"),
    pytest.param(NODE_RACK, [service("svc", {"baz": "kep"})], pod(("foo", "bar")), [],
                 id="default constraints and a service that doesn't match"),
    pytest.param(NODE_RACK, [service("svc", {"foo": "bar"})],
                 pod(("foo", "bar"), ("baz", "tar"), spread={
                     "maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule",
                     "labelSelector": {"matchLabels": {"baz": "tar"}}}), [],
                 id="default constraints and a service, but pod has constraints"),
    pytest.param(PodTopologySpreadConfig("List", (
        DefaultSpreadConstraint(2, "planet", "ScheduleAnyway"),)),
        [replica_set("rs1", {"matchExpressions": [{"key": "tar", "operator": "Exists"}]})],
        pod(("foo", "bar"), ("baz", "sup"), owner=("apps/v1", "ReplicaSet", "rs2")), [],
        id="default constraints and a replicaset that doesn't match"),
    pytest.param(SYSTEM, [replica_set("rs1", FOO_EXISTS)],
                 pod(("foo", "tar"), ("baz", "sup"), owner=RS),
                 [(3, HOST, "ScheduleAnyway", "foo", True),
                  (5, ZONE, "ScheduleAnyway", "foo", True)],
                 id="system default constraints and a replicaset"),
    pytest.param(PodTopologySpreadConfig("List", (
        DefaultSpreadConstraint(1, HOST, "ScheduleAnyway"),
        DefaultSpreadConstraint(2, "rack", "DoNotSchedule"),
        DefaultSpreadConstraint(2, "planet", "ScheduleAnyway"))),
        [replica_set("rs1", FOO_EXISTS)], pod(("foo", "tar"), ("baz", "sup"), owner=RS),
        [(1, HOST, "ScheduleAnyway", "foo", False), (2, "rack", "DoNotSchedule", "foo", False),
         (2, "planet", "ScheduleAnyway", "foo", False)],
        id="default constraints and a replicaset"),
    pytest.param(PodTopologySpreadConfig("List", (
        DefaultSpreadConstraint(2, "galaxy", "ScheduleAnyway"),)),
        [replica_set("rs1", FOO_EXISTS)],
        pod(("foo", "bar"), ("baz", "sup"), owner=RS, spread={
            "maxSkew": 2, "topologyKey": "planet", "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"baz": "sup"}}}), [],
        id="default constraints and a replicaset, but pod has constraints"),
    # The selector: kube's helper.DefaultSelector.
    pytest.param(SYSTEM, [service("web", {"app": "web"}),
                          replica_set("web-1", {"matchLabels": {"app": "web",
                                                                "pod-template-hash": "1"}})],
                 pod(("app", "web"), ("pod-template-hash", "1"), ("tier", "x"),
                     owner=("apps/v1", "ReplicaSet", "web-1")),
                 [(3, HOST, "ScheduleAnyway", "app=web,app=web,pod-template-hash=1", True),
                  (5, ZONE, "ScheduleAnyway", "app=web,app=web,pod-template-hash=1", True)],
                 id="a Service and the ReplicaSet owning the pod"),
    pytest.param(SYSTEM, [service("a", {"app": "web"}), service("b", {"tier": "x"}),
                          service("c", {"tier": "y"})],
                 pod(("app", "web"), ("tier", "x")),
                 [(3, HOST, "ScheduleAnyway", "app=web,tier=x", True),
                  (5, ZONE, "ScheduleAnyway", "app=web,tier=x", True)],
                 id="the union of the Services that select the pod"),
    pytest.param(SYSTEM, [stateful_set("db", {"matchExpressions": [
        {"key": "app", "operator": "In", "values": ["db", "db-legacy"]}]})],
        pod(("app", "db"), owner=("apps/v1", "StatefulSet", "db")),
        [(3, HOST, "ScheduleAnyway", "app in (db,db-legacy)", True),
         (5, ZONE, "ScheduleAnyway", "app in (db,db-legacy)", True)],
        id="a StatefulSet owner"),
    pytest.param(SYSTEM, [service("svc", {"app": "old"}),
                          replication_controller("rc", {"app": "old", "version": "2"})],
                 pod(("app", "old"), owner=("v1", "ReplicationController", "rc")),
                 [(3, HOST, "ScheduleAnyway", "app=old,version=2", True),
                  (5, ZONE, "ScheduleAnyway", "app=old,version=2", True)],
                 id="a ReplicationController's selector is merged into the Services' labels"),
    pytest.param(SYSTEM, [], pod(("app", "web"), owner=RS), [],
                 id="no matching objects: no constraints"),
    pytest.param(SYSTEM, [service("web", {"app": "web"}, namespace="other")], pod(("app", "web")),
                 [], id="a Service of another namespace"),
    pytest.param(SYSTEM, [service("headless", None)], pod(("app", "web")), [],
                 id="a Service without a selector selects nothing"),
    pytest.param(SYSTEM, [replica_set("rs1", FOO_EXISTS)],
                 pod(("foo", "x"), owner=RS, controller=False), [],
                 id="an owner that is not the controller"),
    pytest.param(SYSTEM, [replica_set("rs1", FOO_EXISTS)],
                 pod(("foo", "x"), owner=("extensions/v1beta1", "ReplicaSet", "rs1")), [],
                 id="a controller of another API version"),
    pytest.param(SYSTEM, [replica_set("rs1", FOO_EXISTS)],
                 pod(("foo", "x"), owner=("apps/v1", "Deployment", "rs1")), [],
                 id="a controller of an unsupported kind"),
    pytest.param(SYSTEM, [replica_set("rs1", {"matchExpressions": [
        {"key": "foo", "operator": "In", "values": []}]})],
        pod(("foo", "x"), owner=RS), [],
        id="an invalid ReplicaSet selector adds nothing"),
    pytest.param(SYSTEM, [replica_set("rs1", None)], pod(("foo", "x"), owner=RS), [],
                 id="a ReplicaSet without a selector adds nothing"),
    pytest.param(SYSTEM, [replica_set("rs1", {})], pod(("foo", "x"), owner=RS), [],
                 id="an empty selector: no constraints"),
    pytest.param(PodTopologySpreadConfig("List", ()), [service("svc", {"foo": "bar"})],
                 pod(("foo", "bar")), [], id="List without constraints: no defaulting"),
    pytest.param(PodTopologySpreadConfig("List", (
        DefaultSpreadConstraint(1, "zone", "DoNotSchedule", 3, "Ignore", "Honor"),)),
        [service("svc", {"foo": "bar"})], pod(("foo", "bar")),
        [(1, "zone", "DoNotSchedule", "foo=bar", False)],
        id="policies and minDomains of a listed constraint"),
])
def test_default_constraints(settings: PodTopologySpreadConfig, workloads: list[Obj],
                             incoming: Obj, expected: list[tuple[Any, ...]]) -> None:
    got = defaults(settings, *workloads).constraints(pod_info(incoming))
    assert summary(got) == expected
    assert all(c.match_label_keys == () for c in got)


def test_listed_constraint_keeps_policies() -> None:
    got = defaults(PodTopologySpreadConfig("List", (
        DefaultSpreadConstraint(1, "zone", "DoNotSchedule", 3, "Ignore", "Honor"),)),
        service("svc", {"foo": "bar"})).constraints(pod_info(pod(("foo", "bar"))))
    (c,) = got
    assert (c.min_domains, c.node_affinity_policy, c.node_taints_policy) == (3, "Ignore", "Honor")
    system = defaults(SYSTEM, service("svc", {"foo": "bar"})).constraints(
        pod_info(pod(("foo", "bar"))))
    assert {(c.min_domains, c.node_affinity_policy, c.node_taints_policy) for c in system} == {
        (None, "Honor", "Ignore")}


def test_selector_requirements() -> None:
    spread = defaults(SYSTEM, service("web", {"app": "web"}),
                      stateful_set("db", {"matchLabels": {"role": "db"}, "matchExpressions": [
                          {"key": "shard", "operator": "Exists"}]}))
    (c, _) = spread.constraints(pod_info(pod(("app", "web"), ("role", "db"), ("shard", "1"),
                                             owner=("apps/v1", "StatefulSet", "db"))))
    assert c.selector.requirements == (("app", EQUALS, ("web",)), ("role", EQUALS, ("db",)),
                                       ("shard", EXISTS, ()))
    assert not c.selector.matches({"app": "web", "role": "db"})


def test_view_copies_the_pod_and_leaves_the_queued_one_alone() -> None:
    spread = defaults(SYSTEM, service("web", {"app": "web"}))
    queued = pod_info(pod(("app", "web")))
    seen = spread.view(queued)
    assert seen is not queued and queued.spread == ()
    assert [c.topology_key for c in seen.spread] == [HOST, ZONE]
    assert (seen.uid, seen.labels, seen.requests) == (queued.uid, queued.labels, queued.requests)
    own = pod_info(pod(("app", "web"), spread={"maxSkew": 1, "topologyKey": "zone",
                                              "whenUnsatisfiable": "DoNotSchedule"}))
    assert spread.view(own) is own
    alone = pod_info(pod(("app", "none")))
    assert spread.view(alone) is alone


def test_answers_are_cached_until_a_selector_changes() -> None:
    selectors = WorkloadSelectors()
    spread = SpreadDefaults(None, SYSTEM, selectors=selectors)
    first = pod_info(pod(("app", "web"), owner=RS))
    assert spread.constraints(first) == ()
    rs = replica_set("rs1", {"matchLabels": {"app": "web"}})
    feed_workload(selectors, rs)
    answer = spread.constraints(first)
    assert [c.selector_key for c in answer] == ["app=web", "app=web"]
    # Another pod of the same workload shares the answer.
    twin = pod_info({**pod(("app", "web"), owner=RS), "metadata": {
        **pod(("app", "web"), owner=RS)["metadata"], "name": "q", "uid": "uid-q"}})
    assert spread.constraints(twin) is answer
    # A status update leaves the selectors (and the answer) as they are.
    generation = selectors.generation
    feed_workload(selectors, {**rs, "status": {"replicas": 3}, "metadata": {
        **rs["metadata"], "resourceVersion": "2"}})
    assert selectors.generation == generation
    assert spread.constraints(first) is answer
    # A new selector is seen at once.
    feed_workload(selectors, replica_set("rs1", {"matchLabels": {"app": "web", "v": "2"}}))
    assert selectors.generation > generation
    assert [c.selector_key for c in spread.constraints(first)] == ["app=web,v=2"] * 2
    selectors.delete_replica_set(rs)
    assert spread.constraints(first) == ()
    assert selectors.replica_sets == {}


def test_services_are_indexed_per_namespace() -> None:
    selectors = WorkloadSelectors()
    for i in range(3):
        feed_workload(selectors, service(f"s{i}", {"app": f"a{i}"}, namespace=f"ns{i}"))
    assert set(selectors.services) == {"ns0", "ns1", "ns2"}
    assert selectors.services["ns1"] == {"s1": {"app": "a1"}}
    # A selector removed by an update takes the Service out of the index.
    feed_workload(selectors, service("s1", None, namespace="ns1"))
    assert "ns1" not in selectors.services
    selectors.delete_service(service("s0", {"app": "a0"}, namespace="ns0"))
    assert set(selectors.services) == {"ns2"}


@pytest.mark.parametrize(("refs", "expected"), [
    pytest.param([], None, id="no owner"),
    pytest.param([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r", "controller": True}],
                 ("apps", "v1", "ReplicaSet", "r"), id="apps/v1"),
    pytest.param([{"apiVersion": "v1", "kind": "ReplicationController", "name": "r",
                   "controller": True}], ("", "v1", "ReplicationController", "r"), id="core v1"),
    pytest.param([{"apiVersion": "a/b/c", "kind": "X", "name": "r", "controller": True}], None,
                 id="no group/version"),
    pytest.param([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "r"}], None,
                 id="not a controller"),
])
def test_owner_of(refs: list[Obj], expected: tuple[str, ...] | None) -> None:
    obj = pod(("app", "x"))
    obj["metadata"]["ownerReferences"] = refs
    assert owner_of(pod_info(obj)) == expected


def test_informers_only_when_defaults_are_in_effect() -> None:
    client: Any = object()  # the informers are built, never started
    spread = SpreadDefaults.for_scheduler(client, SchedulerConfig())
    assert [i.name for i in spread.informers] == [
        "services", "replicationcontrollers", "replicasets", "statefulsets"]
    assert [i.path for i in spread.informers] == [
        "/api/v1/services", "/api/v1/replicationcontrollers", "/apis/apps/v1/replicasets",
        "/apis/apps/v1/statefulsets"]
    listless = SchedulerConfig(pod_topology_spread=PodTopologySpreadConfig("List", ()))
    assert SpreadDefaults.for_scheduler(client, listless).informers == ()
    # Without the plugin, no defaults and no informers (kube builds them inside the plugin).
    off = SchedulerConfig(plugins=PluginsConfig(
        filter=("NodeResourcesFit",), score=(ScorePlugin("NodeResourcesFit", 1),)))
    spread_off = SpreadDefaults.for_scheduler(client, off)
    assert spread_off.informers == ()
    web: PodInfo = pod_info(pod(("app", "web")))
    assert spread_off.view(web) is web
