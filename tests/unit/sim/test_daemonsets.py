"""DaemonSets in the embedded cluster: the node rules of kube's component-helpers
(:mod:`pyscheduler_sim.nodematch`), the DaemonSet controller's decisions
(:mod:`pyscheduler_sim.daemonsets`), and the API server's defaults and validation."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from pyscheduler_sim import errors
from pyscheduler_sim.daemonsets import DAEMON_TOLERATIONS, new_pod, should_run, target_node
from pyscheduler_sim.nodematch import node_selector_matches, tolerates, untolerated_taint
from pyscheduler_sim.registry import Registry

Obj = dict[str, Any]


class N:
    """A fluent node builder."""

    def __init__(self, name: str = "node-0") -> None:
        self.obj: Obj = {"metadata": {"name": name, "labels": {}}, "spec": {}}

    def label(self, key: str, value: str) -> N:
        self.obj["metadata"]["labels"][key] = value
        return self

    def taint(self, key: str, effect: str, value: str = "") -> N:
        taint = {"key": key, "effect": effect}
        if value:
            taint["value"] = value
        self.obj["spec"].setdefault("taints", []).append(taint)
        return self


def term(*expressions: Obj, fields: tuple[Obj, ...] = ()) -> Obj:
    out: Obj = {}
    if expressions:
        out["matchExpressions"] = list(expressions)
    if fields:
        out["matchFields"] = list(fields)
    return out


def req(key: str, op: str, *values: str) -> Obj:
    out: Obj = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


NODE = N("node-0").label("zone", "a").label("cpus", "8").obj


@pytest.mark.parametrize("terms,matches", [
    pytest.param([term(req("zone", "In", "a", "b"))], True, id="In"),
    pytest.param([term(req("zone", "In", "b"))], False, id="In other value"),
    pytest.param([term(req("zone", "NotIn", "b"))], True, id="NotIn"),
    pytest.param([term(req("rack", "NotIn", "b"))], True, id="NotIn absent label"),
    pytest.param([term(req("zone", "Exists"))], True, id="Exists"),
    pytest.param([term(req("zone", "DoesNotExist"))], False, id="DoesNotExist"),
    pytest.param([term(req("cpus", "Gt", "4"))], True, id="Gt"),
    pytest.param([term(req("cpus", "Lt", "4"))], False, id="Lt"),
    pytest.param([term(req("zone", "Gt", "4"))], False, id="Gt on a non-number label"),
    pytest.param([term(req("cpus", "Gt", "x"))], False, id="Gt bound not a number"),
    pytest.param([term(req("zone", "In", "a"), req("cpus", "Gt", "16"))], False,
                 id="expressions are ANDed"),
    pytest.param([term(req("zone", "In", "b")), term(req("cpus", "Gt", "1"))], True,
                 id="terms are ORed"),
    pytest.param([term()], False, id="empty term matches nothing"),
    pytest.param([], False, id="no terms"),
    pytest.param([term(req("zone", "Near", "a")), term(req("zone", "In", "a"))], True,
                 id="a term that does not parse is skipped"),
    pytest.param([term(req("zone", "In", "not a value"))], False,
                 id="invalid label value: the term is skipped"),
    pytest.param([term(fields=(req("metadata.name", "In", "node-0"),))], True,
                 id="matchFields on the name"),
    pytest.param([term(fields=(req("metadata.name", "NotIn", "node-0"),))], False,
                 id="matchFields NotIn"),
    pytest.param([term(fields=(req("metadata.name", "In", "node-0", "node-1"),))], False,
                 id="matchFields with two values does not parse"),
    pytest.param([term(req("zone", "In", "a"), fields=(req("metadata.name", "In", "x"),))],
                 False, id="expressions and fields are ANDed"),
])
def test_node_selector_terms(terms: list[Obj], matches: bool) -> None:
    assert node_selector_matches({"nodeSelectorTerms": terms}, NODE) is matches


@pytest.mark.parametrize("toleration,taint,expected", [
    pytest.param({"key": "k", "operator": "Equal", "value": "v", "effect": "NoSchedule"},
                 {"key": "k", "value": "v", "effect": "NoSchedule"}, True, id="equal"),
    pytest.param({"key": "k", "value": "v"}, {"key": "k", "value": "v", "effect": "NoExecute"},
                 True, id="default operator Equal, any effect"),
    pytest.param({"key": "k", "value": "w"}, {"key": "k", "value": "v", "effect": "NoSchedule"},
                 False, id="other value"),
    pytest.param({"key": "k", "operator": "Exists", "effect": "NoExecute"},
                 {"key": "k", "value": "v", "effect": "NoSchedule"}, False, id="other effect"),
    pytest.param({"operator": "Exists"}, {"key": "any", "effect": "NoExecute"}, True,
                 id="tolerate everything"),
    pytest.param({"key": "k", "operator": "Exists"}, {"key": "other", "effect": "NoSchedule"},
                 False, id="other key"),
])
def test_tolerations(toleration: Obj, taint: Obj, expected: bool) -> None:
    assert tolerates(toleration, taint) is expected


def test_untolerated_taint_only_looks_at_the_given_effects() -> None:
    taints = [{"key": "a", "effect": "PreferNoSchedule"}, {"key": "b", "effect": "NoSchedule"}]
    assert untolerated_taint(taints, [], ("NoSchedule", "NoExecute")) == taints[1]
    assert untolerated_taint(taints, [{"key": "b", "operator": "Exists"}],
                             ("NoSchedule",)) is None


# -- the controller's decisions -----------------------------------------------------------------

def daemonset(**pod_spec: Any) -> Obj:
    return {"metadata": {"name": "agent", "namespace": "kube-system", "uid": "ds-uid",
                         "annotations": {"deprecated.daemonset.template.generation": "3"}},
            "spec": {"selector": {"matchLabels": {"app": "agent"}},
                     "template": {"metadata": {"labels": {"app": "agent"},
                                               "annotations": {"note": "x"}},
                                  "spec": {"containers": [{"name": "c", "image": "agent:1"}],
                                           **pod_spec}}}}


@pytest.mark.parametrize("ds,node,expected", [
    pytest.param(daemonset(), N().obj, (True, True), id="plain node"),
    pytest.param(daemonset(), N().taint("dedicated", "NoSchedule").obj, (False, True),
                 id="NoSchedule taint: no new pod, the old one stays"),
    pytest.param(daemonset(), N().taint("dedicated", "NoExecute").obj, (False, False),
                 id="NoExecute taint: the pod goes"),
    pytest.param(daemonset(), N().taint("dedicated", "PreferNoSchedule").obj, (True, True),
                 id="PreferNoSchedule is ignored"),
    pytest.param(daemonset(), N().taint("node.kubernetes.io/unschedulable", "NoSchedule")
                 .taint("node.kubernetes.io/not-ready", "NoExecute")
                 .taint("node.kubernetes.io/unreachable", "NoExecute")
                 .taint("node.kubernetes.io/disk-pressure", "NoSchedule")
                 .taint("node.kubernetes.io/memory-pressure", "NoSchedule")
                 .taint("node.kubernetes.io/pid-pressure", "NoSchedule").obj, (True, True),
                 id="the daemon tolerations"),
    pytest.param(daemonset(), N().taint("node.kubernetes.io/network-unavailable",
                                        "NoSchedule").obj, (False, True),
                 id="network-unavailable is tolerated by host-network pods only"),
    pytest.param(daemonset(hostNetwork=True),
                 N().taint("node.kubernetes.io/network-unavailable", "NoSchedule").obj,
                 (True, True), id="host-network pod on a network-unavailable node"),
    pytest.param(daemonset(tolerations=[{"key": "dedicated", "operator": "Exists"}]),
                 N().taint("dedicated", "NoExecute").obj, (True, True),
                 id="the template's own toleration"),
    pytest.param(daemonset(nodeSelector={"disk": "ssd"}), N().obj, (False, False),
                 id="node selector not matched"),
    pytest.param(daemonset(nodeSelector={"disk": "ssd"}), N().label("disk", "ssd").obj,
                 (True, True), id="node selector matched"),
    pytest.param(daemonset(affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            term(req("zone", "In", "b"))]}}}), N().label("zone", "a").obj, (False, False),
                 id="required node affinity not matched"),
    pytest.param(daemonset(nodeName="node-1"), N().obj, (False, False),
                 id="template for another node"),
])
def test_should_run(ds: Obj, node: Obj, expected: tuple[bool, bool]) -> None:
    assert should_run(ds, node) == expected


def test_the_daemon_pod_for_a_node() -> None:
    ds = daemonset(
        tolerations=[{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                      "effect": "NoExecute", "tolerationSeconds": 30},
                     {"key": "custom", "operator": "Exists"}],
        affinity={"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                term(req("zone", "In", "a"))]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "preference": term(req("disk", "Exists"))}]}})
    template = copy.deepcopy(ds["spec"]["template"])
    pod = new_pod(ds, "node-7", "abc")
    assert ds["spec"]["template"] == template, "the DaemonSet is not changed"
    meta = pod["metadata"]
    assert meta["generateName"] == "agent-" and meta["namespace"] == "kube-system"
    assert meta["labels"] == {"app": "agent", "pod-template-generation": "3",
                              "controller-revision-hash": "abc"}
    assert meta["annotations"] == {"note": "x"}
    assert meta["ownerReferences"] == [{"apiVersion": "apps/v1", "kind": "DaemonSet",
                                        "name": "agent", "uid": "ds-uid", "controller": True,
                                        "blockOwnerDeletion": True}]
    spec = pod["spec"]
    assert "nodeName" not in spec
    node_affinity = spec["affinity"]["nodeAffinity"]
    # The required terms are replaced by the node's name; preferences stay.
    assert node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] == {
        "nodeSelectorTerms": [{"matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["node-7"]}]}]}
    assert node_affinity["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"] == 1
    # A daemon toleration replaces a matching one (its tolerationSeconds is dropped).
    assert spec["tolerations"] == [DAEMON_TOLERATIONS[0], {"key": "custom", "operator": "Exists"},
                                   *DAEMON_TOLERATIONS[1:]]
    assert target_node(pod) == "node-7"
    assert target_node({"spec": {"nodeName": "node-2", **spec}}) == "node-2"
    assert target_node({"spec": {}}) == ""


# -- the API server's side ----------------------------------------------------------------------

@pytest.fixture
def registry() -> Registry:
    return Registry()


def api_daemonset(**spec: Any) -> Obj:
    body = daemonset()
    body["metadata"] = {"name": "agent"}
    body["spec"].update(spec)
    return body


def test_daemonset_defaults_status_and_template_generation(registry: Registry) -> None:
    rt = registry.type("apps", "v1", "daemonsets")
    created = registry.create(rt, "default", api_daemonset())
    spec = created["spec"]
    assert spec["updateStrategy"] == {"type": "RollingUpdate",
                                      "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}}
    assert spec["revisionHistoryLimit"] == 10
    assert spec["template"]["spec"]["restartPolicy"] == "Always"
    assert created["status"] == {"currentNumberScheduled": 0, "numberMisscheduled": 0,
                                 "desiredNumberScheduled": 0, "numberReady": 0}
    annotations = created["metadata"]["annotations"]
    assert annotations["deprecated.daemonset.template.generation"] == "1"
    assert created["metadata"]["generation"] == 1
    # The template generation is the server's: a client cannot set it, a new template bumps it.
    annotations["deprecated.daemonset.template.generation"] = "9"
    same = registry.update(rt, "default", "agent", created)
    assert same["metadata"]["annotations"]["deprecated.daemonset.template.generation"] == "1"
    same["spec"]["template"]["spec"]["containers"][0]["image"] = "agent:2"
    bumped = registry.update(rt, "default", "agent", same)
    assert bumped["metadata"]["annotations"]["deprecated.daemonset.template.generation"] == "2"
    assert bumped["metadata"]["generation"] == 2


@pytest.mark.parametrize("change,expected", [
    pytest.param({"selector": {"matchLabels": {"app": "other"}}},
                 ['spec.template.metadata.labels: Invalid value: {"app":"agent"}: `selector` '
                  "does not match template `labels`"], id="selector not matching"),
    pytest.param({"selector": {}},
                 ["spec.selector: Invalid value: {}: empty selector is invalid for daemonset"],
                 id="empty selector"),
    pytest.param({"template": {"metadata": {"labels": {"app": "agent"}}, "spec": {
        "containers": [{"name": "c", "image": "i"}], "restartPolicy": "Never",
        "activeDeadlineSeconds": 5}}},
        ['spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: '
         '"Always"',
         "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in "
         "DaemonSet is not Supported"], id="restart policy and deadline"),
    pytest.param({"updateStrategy": {"type": "RollingUpdate",
                                     "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 0}}},
                 ["spec.updateStrategy.rollingUpdate.maxUnavailable: Required value: cannot be "
                  "0 when maxSurge is 0"], id="both zero"),
    pytest.param({"updateStrategy": {"type": "RollingUpdate",
                                     "rollingUpdate": {"maxUnavailable": 1, "maxSurge": "10%"}}},
                 ['spec.updateStrategy.rollingUpdate.maxSurge: Invalid value: "10%": may not be '
                  "set when maxUnavailable is non-zero"], id="both set"),
    pytest.param({"updateStrategy": {"type": "RollingUpdate",
                                     "rollingUpdate": {"maxUnavailable": "150%"}}},
                 ['spec.updateStrategy.rollingUpdate.maxUnavailable: Invalid value: "150%": '
                  "must not be greater than 100%"], id="more than 100%"),
    pytest.param({"updateStrategy": {"type": "Sideways"}},
                 ['spec.updateStrategy: Unsupported value: {"type":"Sideways"}: supported '
                  'values: "RollingUpdate", "OnDelete"'], id="unknown strategy"),
    pytest.param({"minReadySeconds": -1},
                 ["spec.minReadySeconds: Invalid value: -1: must be greater than or equal to 0"],
                 id="negative minReadySeconds"),
])
def test_invalid_daemonsets_are_refused(registry: Registry, change: Obj,
                                        expected: list[str]) -> None:
    with pytest.raises(errors.ApiError) as caught:
        registry.create(registry.type("apps", "v1", "daemonsets"), "default",
                        api_daemonset(**change))
    assert caught.value.code == 422
    assert caught.value.details is not None
    assert [f"{c['field']}: {c['message']}" for c in caught.value.details["causes"]] == expected


def test_daemonset_selector_is_immutable(registry: Registry) -> None:
    rt = registry.type("apps", "v1", "daemonsets")
    created = registry.create(rt, "default", api_daemonset())
    created["spec"]["selector"] = {"matchLabels": {"app": "agent", "x": "y"}}
    created["spec"]["template"]["metadata"]["labels"]["x"] = "y"
    with pytest.raises(errors.ApiError) as caught:
        registry.update(rt, "default", "agent", created)
    assert caught.value.details is not None
    assert caught.value.details["causes"][0]["field"] == "spec.selector"
    assert caught.value.details["causes"][0]["message"].endswith("field is immutable")
