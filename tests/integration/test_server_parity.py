"""Behaviours where the embedded cluster once answered differently from kube-apiserver, each
checked on both servers (``[embedded]`` and ``[real]``): these tests were written against the
real server, so a double that lacks the behaviour fails them."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.conftest import AnyCluster, Http, wait_for
from tests.unit.sim.test_schema import RULES_SCHEMA

GROUP = "parity.example.com"
WIDGETS = f"/apis/{GROUP}/v1/widgets"


@pytest.mark.parametrize("path", [
    pytest.param(f"/apis/unserved.{GROUP}/v1/things", id="resource of an unserved group"),
    pytest.param(f"/apis/unserved.{GROUP}", id="unserved group"),
    pytest.param("/no-such-root", id="path outside /api and /apis"),
])
def test_a_path_no_handler_serves_is_a_plain_text_404(http: Http, path: str) -> None:
    reply = http.raw("GET", path)
    assert reply.status == 404
    assert reply.headers["Content-Type"].startswith("text/plain")
    assert reply.data == b"404 page not found\n"


@pytest.mark.parametrize("path", [
    pytest.param("/api/v1/no-such-resource", id="unknown core resource"),
    pytest.param("/apis/apps/v9", id="unknown version of a served group"),
    pytest.param("/api/v1/namespaces/default/pods/p/no-such-subresource", id="unknown subresource"),
])
def test_an_unknown_resource_of_a_served_group_is_a_status(http: Http, path: str) -> None:
    status, doc = http("GET", path)
    assert status == 404
    assert doc["kind"] == "Status" and doc["reason"] == "NotFound", doc
    assert doc["message"] == "the server could not find the requested resource", doc


def test_node_affinity_is_validated_with_kubes_messages(core: client.CoreV1Api,
                                                       namespace: str) -> None:
    path = "spec.affinity.nodeAffinity"
    bad = {"metadata": {"name": "bad"}, "spec": {
        "containers": [{"name": "c", "image": "x"}],
        "affinity": {"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "a", "operator": "Near"}]}]},
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 0, "preference": {"matchExpressions": [
                    {"key": "a", "operator": "In"}]}}]}}}}
    with pytest.raises(ApiException) as caught:
        core.create_namespaced_pod(namespace, bad)
    assert caught.value.status == 422
    causes = {c["field"]: c["message"]
              for c in json.loads(caught.value.body)["details"]["causes"]}
    assert causes == {
        f"{path}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0]"
        ".matchExpressions[0].operator": 'Invalid value: "Near": not a valid selector operator',
        f"{path}.preferredDuringSchedulingIgnoredDuringExecution[0].weight":
            "Invalid value: 0: must be in the range 1-100",
        f"{path}.preferredDuringSchedulingIgnoredDuringExecution[0].preference"
        ".matchExpressions[0].values":
            "Required value: must be specified when `operator` is 'In' or 'NotIn'"}


@pytest.fixture(scope="module")
def widgets(api: client.ApiClient, http: Http) -> Any:
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": f"widgets.{GROUP}"},
           "spec": {"group": GROUP, "scope": "Cluster",
                    "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                    "versions": [{"name": "v1", "served": True, "storage": True,
                                  "schema": {"openAPIV3Schema": RULES_SCHEMA}}]}}
    extensions = client.ApiextensionsV1Api(api)
    extensions.create_custom_resource_definition(crd)
    wait_for(lambda: http("GET", WIDGETS)[0] == 200, what="the widgets CRD served")
    yield
    extensions.delete_custom_resource_definition(f"widgets.{GROUP}")


def widget(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name},
            "spec": spec}


def test_validation_rules_report_as_kube_apiserver_does(widgets: None, http: Http) -> None:
    """x-kubernetes-validations: a node's rules before its children's; the value a rule failed
    on is printed for a scalar and omitted for an object (apimachinery's OmitValueType)."""
    status, doc = http("POST", WIDGETS, widget("w1", replicas=5, maxReplicas=3, mode="legacy",
                                               names=["n-a", "b"]))
    assert status == 422, doc
    assert doc["message"] == (
        'Widget.parity.example.com "w1" is invalid: ['
        "spec.replicas: Invalid value: replicas must not exceed maxReplicas, "
        "spec: Forbidden: legacy mode is gone, "
        "spec.names[1]: Invalid value: \"b\": failed rule: self.startsWith('n-')]")
    assert [(c["reason"], c["field"]) for c in doc["details"]["causes"]] == [
        ("FieldValueInvalid", "spec.replicas"), ("FieldValueForbidden", "spec"),
        ("FieldValueInvalid", "spec.names[1]")]


def test_a_transition_rule_runs_on_update(widgets: None, http: Http) -> None:
    status, doc = http("POST", WIDGETS, widget("w2", replicas=1, maxReplicas=4))
    assert status == 201, doc
    doc["spec"]["maxReplicas"] = 2
    status, doc = http("PUT", f"{WIDGETS}/w2", doc)
    assert status == 422, doc
    assert doc["message"] == ('Widget.parity.example.com "w2" is invalid: spec: Invalid value: '
                              "failed rule: self.maxReplicas >= oldSelf.maxReplicas")


def test_a_watch_from_a_compacted_version_ends_with_410(cluster: AnyCluster,
                                                        core: client.CoreV1Api,
                                                        namespace: str) -> None:
    first = core.create_namespaced_config_map(namespace, {"metadata": {"name": "a"}})
    old = first.metadata.resource_version
    for i in range(3):
        core.patch_namespaced_config_map("a", namespace, {"data": {"i": str(i)}})
    cluster.compact()
    deadline = time.monotonic() + 30
    while True:
        try:
            stream = watch.Watch().stream(core.list_namespaced_config_map, namespace,
                                          resource_version=old, timeout_seconds=2,
                                          _preload_content=False)
            events = [e for e in stream]
        except ApiException as exc:
            # The client turns the watch's ERROR event into this exception.
            assert exc.status == 410, exc
            assert exc.reason.startswith(f"Expired: too old resource version: {old} ("), exc
            return
        if any(e["type"] == "ERROR" for e in events):
            error = next(e for e in events if e["type"] == "ERROR")["raw_object"]
            assert error["code"] == 410 and error["reason"] == "Expired", error
            return
        assert time.monotonic() < deadline, f"no 410 from version {old}: {events[:3]}"
        time.sleep(0.5)


def test_a_stale_disruption_condition_is_reset_to_false(core: client.CoreV1Api,
                                                        namespace: str) -> None:
    """kube-controller-manager's disruption controller takes a DisruptionTarget=True
    condition on a pod that is not deleting for stale once it is two minutes old, and one
    without a transition time at once; a fresh one stands."""
    def disruption(name: str) -> Any:
        pod = core.read_namespaced_pod(name, namespace)
        return next(c for c in pod.status.conditions or () if c.type == "DisruptionTarget")

    now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    for name, condition in (("untimed", {}), ("fresh", {"lastTransitionTime": now})):
        core.create_namespaced_pod(namespace, {"metadata": {"name": name}, "spec": {
            "containers": [{"name": "c", "image": "x"}]}})
        core.patch_namespaced_pod_status(name, namespace, {"status": {"conditions": [
            {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
             "message": "going", **condition}]}})
    reset = wait_for(lambda: (c := disruption("untimed")).status == "False" and c,
                     timeout=30, what="the untimed DisruptionTarget condition reset")
    assert (reset.reason, reset.message) == (None, None)
    assert reset.last_transition_time is not None
    fresh = disruption("fresh")
    assert (fresh.status, fresh.reason) == ("True", "PreemptionByScheduler")
