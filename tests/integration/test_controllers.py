"""Controllers of the embedded cluster: ReplicaSet, Deployment, DaemonSet, garbage
collection, PodDisruptionBudgets and eviction, CustomResourceDefinitions, namespaces, and the
kubelets' part in a pod's graceful deletion."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from pyscheduler_sim.harness import BackgroundCluster
from tests.conftest import Http, Kubectl, small_cluster, wait_for

#: a test of the embedded cluster's own controllers and kubelets.
pytestmark = pytest.mark.embedded_only("a test of the embedded cluster's own controllers and kubelets")


def template(app: str) -> dict[str, Any]:
    return {"metadata": {"labels": {"app": app}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]}}


def replicaset(name: str, replicas: int) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": template(name)}}


def bind(core: client.CoreV1Api, namespace: str, pod: str, node: str) -> None:
    core.create_namespaced_pod_binding(pod, namespace, {
        "metadata": {"name": pod}, "target": {"kind": "Node", "name": node}},
        _preload_content=False)


def pods_of(core: client.CoreV1Api, namespace: str, selector: str) -> list[Any]:
    return [p for p in core.list_namespaced_pod(namespace, label_selector=selector).items
            if p.metadata.deletion_timestamp is None]


def test_replicaset_scale_down_order(api: client.ApiClient, core: client.CoreV1Api,
                                     namespace: str) -> None:
    apps = client.AppsV1Api(api)
    apps.create_namespaced_replica_set(namespace, replicaset("rs", 5))
    pods = wait_for(lambda: len(pods_of(core, namespace, "app=rs")) == 5
                    and pods_of(core, namespace, "app=rs"), what="5 pods")
    names = sorted(p.metadata.name for p in pods)
    # pending (unscheduled): names[0]; running ready on node-0: names[1], names[2] (doubled up),
    # running on node-1: names[3] with a high deletion cost, names[4] with a low one.
    for name, node in ((names[1], "node-0"), (names[2], "node-0"), (names[3], "node-1"),
                       (names[4], "node-2")):
        bind(core, namespace, name, node)
    core.patch_namespaced_pod(names[3], namespace, {"metadata": {"annotations": {
        "controller.kubernetes.io/pod-deletion-cost": "100"}}})
    core.patch_namespaced_pod(names[4], namespace, {"metadata": {"annotations": {
        "controller.kubernetes.io/pod-deletion-cost": "-5"}}})
    wait_for(lambda: all(p.status.phase == "Running" for p in pods_of(core, namespace, "app=rs")
                         if p.spec.node_name), what="bound pods running")

    def survivors(n: int) -> set[str]:
        apps.patch_namespaced_replica_set_scale("rs", namespace, {"spec": {"replicas": n}})
        return wait_for(lambda: len(pods_of(core, namespace, "app=rs")) == n
                        and {p.metadata.name for p in pods_of(core, namespace, "app=rs")},
                        what=f"{n} pods")

    assert survivors(4) == set(names[1:]), "the unscheduled pod goes first"
    assert survivors(3) == {names[1], names[2], names[3]}, "lowest deletion cost next"
    remaining = survivors(2)
    assert names[3] in remaining and len(remaining & {names[1], names[2]}) == 1, \
        "then a pod doubled up on node-0 before the lone high-cost pod"
    rs = wait_for(lambda: (r := apps.read_namespaced_replica_set("rs", namespace)).status
                  .ready_replicas == 2 and r, what="status")
    assert rs.status.replicas == 2


def test_replicaset_adopts_and_releases(api: client.ApiClient, core: client.CoreV1Api,
                                        namespace: str) -> None:
    core.create_namespaced_pod(namespace, {"metadata": {"name": "orphan",
                                                        "labels": {"app": "ad"}},
                                           "spec": template("ad")["spec"]})
    apps = client.AppsV1Api(api)
    rs = apps.create_namespaced_replica_set(namespace, replicaset("ad", 2))
    wait_for(lambda: len(pods_of(core, namespace, "app=ad")) == 2, what="2 pods")
    orphan = core.read_namespaced_pod("orphan", namespace)
    assert orphan.metadata.owner_references[0].uid == rs.metadata.uid
    core.patch_namespaced_pod("orphan", namespace, {"metadata": {"labels": {"app": "other"}}})
    wait_for(lambda: not core.read_namespaced_pod("orphan", namespace).metadata.owner_references,
             what="release")
    wait_for(lambda: len(pods_of(core, namespace, "app=ad")) == 2, what="replacement")


def test_deployment_creates_replicaset_and_scales(api: client.ApiClient, core: client.CoreV1Api,
                                                  namespace: str) -> None:
    apps = client.AppsV1Api(api)
    apps.create_namespaced_deployment(namespace, {
        "metadata": {"name": "web"},
        "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}},
                 "template": template("web")}})
    wait_for(lambda: len(pods_of(core, namespace, "app=web")) == 3, what="3 pods")
    rss = apps.list_namespaced_replica_set(namespace).items
    assert len(rss) == 1 and rss[0].metadata.name.startswith("web-")
    assert rss[0].metadata.owner_references[0].kind == "Deployment"
    assert "pod-template-hash" in rss[0].spec.selector.match_labels
    apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 5}})
    wait_for(lambda: len(pods_of(core, namespace, "app=web")) == 5, what="scale up")
    apps.patch_namespaced_deployment_scale("web", namespace, {"spec": {"replicas": 1}})
    wait_for(lambda: len(pods_of(core, namespace, "app=web")) == 1, what="scale down")
    dep = wait_for(lambda: (d := apps.read_namespaced_deployment("web", namespace)).status
                   .replicas == 1 and d, what="status")
    assert dep.status.observed_generation == dep.metadata.generation

    # A new template rolls out through a second ReplicaSet.
    for p in pods_of(core, namespace, "app=web"):
        bind(core, namespace, p.metadata.name, "node-0")
    apps.patch_namespaced_deployment("web", namespace, {"spec": {"template": {"spec": {
        "containers": [{"name": "c", "image": "nginx:1.28"}]}}}})
    wait_for(lambda: len(apps.list_namespaced_replica_set(namespace).items) == 2, what="new RS")
    wait_for(lambda: [p.spec.containers[0].image for p in pods_of(core, namespace, "app=web")]
             == ["nginx:1.28"], what="rollout", timeout=30)


@pytest.mark.parametrize("policy, dependents_remain", [
    pytest.param("Background", False, id="background deletes dependents"),
    pytest.param("Foreground", False, id="foreground deletes dependents first"),
    pytest.param("Orphan", True, id="orphan keeps dependents without owner"),
])
def test_garbage_collection(api: client.ApiClient, core: client.CoreV1Api, namespace: str,
                            policy: str, dependents_remain: bool) -> None:
    apps = client.AppsV1Api(api)
    rs = apps.create_namespaced_replica_set(namespace, replicaset("gc", 2))
    wait_for(lambda: len(pods_of(core, namespace, "app=gc")) == 2, what="pods")
    apps.delete_namespaced_replica_set("gc", namespace, propagation_policy=policy)
    if policy == "Foreground":
        # The owner stays, marked, until its dependents are gone.
        seen = apps.read_namespaced_replica_set("gc", namespace)
        assert seen.metadata.deletion_timestamp is not None
        assert "foregroundDeletion" in seen.metadata.finalizers
    wait_for(lambda: not [r for r in apps.list_namespaced_replica_set(namespace).items],
             what="owner gone")
    if dependents_remain:
        pods = wait_for(lambda: all(not p.metadata.owner_references for p in pods_of(
            core, namespace, "app=gc")) and pods_of(core, namespace, "app=gc"), what="orphans")
        assert len(pods) == 2
    else:
        wait_for(lambda: not core.list_namespaced_pod(namespace, label_selector="app=gc").items,
                 what="dependents deleted")
    assert rs.metadata.uid


def test_dangling_owner_reference_is_collected(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_config_map(namespace, {"metadata": {
        "name": "dep", "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap",
                                            "name": "ghost", "uid": "no-such-uid"}]}})
    wait_for(lambda: not core.list_namespaced_config_map(
        namespace, field_selector="metadata.name=dep").items, what="collection")


def test_eviction_honours_pod_disruption_budget(api: client.ApiClient, core: client.CoreV1Api,
                                                namespace: str) -> None:
    policy = client.PolicyV1Api(api)
    for i in range(2):
        core.create_namespaced_pod(namespace, {
            "metadata": {"name": f"db-{i}", "labels": {"app": "db"}},
            "spec": {"nodeName": f"node-{i}", **template("db")["spec"]}})
    wait_for(lambda: all(p.status.phase == "Running" for p in pods_of(core, namespace, "app=db")),
             what="running")
    policy.create_namespaced_pod_disruption_budget(namespace, {
        "metadata": {"name": "db"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "db"}}}})
    pdb = wait_for(lambda: (p := policy.read_namespaced_pod_disruption_budget("db", namespace))
                   .status and p.status.current_healthy == 2 and p, what="PDB status")
    assert pdb.status.disruptions_allowed == 1 and pdb.status.desired_healthy == 1
    evict = {"apiVersion": "policy/v1", "kind": "Eviction",
             "metadata": {"name": "db-0", "namespace": namespace}}
    core.create_namespaced_pod_eviction("db-0", namespace, evict)
    evict["metadata"]["name"] = "db-1"
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod_eviction("db-1", namespace, evict)
    assert exc.value.status == 429
    assert "would violate the pod's disruption budget" in exc.value.body
    assert core.read_namespaced_pod("db-1", namespace).metadata.deletion_timestamp is None


CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "widgets.example.com"},
    "spec": {"group": "example.com", "scope": "Cluster",
             "names": {"plural": "widgets", "singular": "widget", "kind": "Widget",
                       "shortNames": ["wd"]},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "subresources": {"status": {}},
                           "additionalPrinterColumns": [
                               {"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
                           "schema": {"openAPIV3Schema": {
                               "type": "object", "x-kubernetes-preserve-unknown-fields": True}}}]},
}


def test_crd_is_served_dynamically_with_status(api: client.ApiClient, http: Http) -> None:
    ext = client.ApiextensionsV1Api(api)
    custom = client.CustomObjectsApi(api)
    crd = ext.create_custom_resource_definition(CRD)
    assert any(c.type == "Established" and c.status == "True" for c in crd.status.conditions)
    try:
        w = custom.create_cluster_custom_object("example.com", "v1", "widgets", {
            "apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w1"},
            "spec": {"size": 3}, "status": {"ignored": True}})
        assert w["metadata"]["generation"] == 1 and "status" not in w
        # status only changes through the status subresource, and spec not through it
        w["status"] = {"phase": "Ready"}
        w = custom.replace_cluster_custom_object("example.com", "v1", "widgets", "w1", w)
        assert "status" not in w
        w["status"] = {"phase": "Ready"}
        w["spec"] = {"size": 100}
        w = custom.replace_cluster_custom_object_status("example.com", "v1", "widgets", "w1", w)
        assert w["status"] == {"phase": "Ready"} and w["spec"] == {"size": 3}
        w = custom.patch_cluster_custom_object("example.com", "v1", "widgets", "w1",
                                               {"spec": {"size": 4}})
        assert w["metadata"]["generation"] == 2 and w["status"] == {"phase": "Ready"}
        listed = custom.list_cluster_custom_object("example.com", "v1", "widgets")
        assert [i["metadata"]["name"] for i in listed["items"]] == ["w1"]
        _, resources = http("GET", "/apis/example.com/v1")
        assert {r["name"] for r in resources["resources"]} == {"widgets", "widgets/status"}
    finally:
        ext.delete_custom_resource_definition("widgets.example.com")
    with pytest.raises(ApiException) as exc:
        custom.list_cluster_custom_object("example.com", "v1", "widgets")
    assert exc.value.status == 404


def test_namespace_deletion_removes_content(core: client.CoreV1Api) -> None:
    core.create_namespace({"metadata": {"name": "doomed"}})
    core.create_namespaced_config_map("doomed", {"metadata": {"name": "c"}})
    core.create_namespaced_pod("doomed", {"metadata": {"name": "p"},
                                          "spec": {"nodeName": "node-0",
                                                   **template("x")["spec"]}})
    core.delete_namespace("doomed")
    assert core.read_namespace("doomed").status.phase == "Terminating"
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_config_map("doomed", {"metadata": {"name": "late"}})
    assert exc.value.status == 403
    wait_for(lambda: "doomed" not in {n.metadata.name for n in core.list_namespace().items},
             what="namespace removal")


def test_node_fault_injection(core: client.CoreV1Api) -> None:
    core.patch_node("node-2", {"metadata": {"annotations": {
        "sim.pyscheduler.io/condition": "NotReady"}}})
    try:
        node = wait_for(lambda: (n := core.read_node("node-2")).spec.taints and n,
                        what="not-ready taint")
        ready = [c for c in node.status.conditions if c.type == "Ready"][0]
        assert ready.status == "False"
        assert {(t.key, t.effect) for t in node.spec.taints} == {
            ("node.kubernetes.io/not-ready", "NoSchedule"),
            ("node.kubernetes.io/not-ready", "NoExecute")}
    finally:
        core.patch_node("node-2", {"metadata": {"annotations": {
            "sim.pyscheduler.io/condition": "Ready"}}})
    wait_for(lambda: not core.read_node("node-2").spec.taints, what="recovery")


def test_nodes_and_leases(core: client.CoreV1Api, api: client.ApiClient) -> None:
    nodes = core.list_node().items
    assert [n.metadata.name for n in nodes] == ["node-0", "node-1", "node-2"]
    n = nodes[0]
    assert n.status.allocatable["cpu"] == "4" and n.status.allocatable["pods"] == "110"
    assert n.metadata.labels["topology.kubernetes.io/zone"] == "zone-a"
    assert n.spec.pod_cidr
    leases = client.CoordinationV1Api(api).list_namespaced_lease("kube-node-lease").items
    assert {le.metadata.name for le in leases} == {"node-0", "node-1", "node-2"}
    first = {le.metadata.name: le.metadata.resource_version for le in leases}
    wait_for(lambda: all(le.metadata.resource_version != first[le.metadata.name] for le in
                         client.CoordinationV1Api(api).list_namespaced_lease(
                             "kube-node-lease").items), timeout=8, what="lease renewals")


SCHEMA_CRD = {
    "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
    "metadata": {"name": "knobs.example.com"},
    "spec": {"group": "example.com", "scope": "Namespaced",
             "names": {"plural": "knobs", "singular": "knob", "kind": "Knob"},
             "versions": [{"name": "v1", "served": True, "storage": True,
                           "schema": {"openAPIV3Schema": {
                               "type": "object",
                               "properties": {"spec": {
                                   "type": "object", "required": ["url"],
                                   "properties": {
                                       "url": {"type": "string", "pattern": "^s3://"},
                                       "mode": {"type": "string", "enum": ["replace", "extend"],
                                                "default": "replace"},
                                       "config": {"type": "object",
                                                  "x-kubernetes-preserve-unknown-fields": True},
                                   }}}}}}]},
}


def test_custom_resources_are_defaulted_pruned_and_validated(api: client.ApiClient,
                                                             http: Http) -> None:
    ext = client.ApiextensionsV1Api(api)
    ext.create_custom_resource_definition(SCHEMA_CRD)
    base = "/apis/example.com/v1/namespaces/default/knobs"
    try:
        status, doc = http("POST", base, {"apiVersion": "example.com/v1", "kind": "Knob",
                                          "metadata": {"name": "k1"},
                                          "spec": {"url": "s3://b/k", "extra": 1,
                                                   "config": {"free": {"form": True}}}})
        assert status == 201, doc
        assert doc["spec"] == {"url": "s3://b/k", "mode": "replace",
                               "config": {"free": {"form": True}}}
        status, doc = http("POST", base, {"apiVersion": "example.com/v1", "kind": "Knob",
                                          "metadata": {"name": "k2"},
                                          "spec": {"url": "http://x", "mode": "fast"}})
        assert status == 422, doc
        messages = {c["field"]: c["message"] for c in doc["details"]["causes"]}
        assert "should match '^s3://'" in messages["spec.url"]
        assert 'supported values: "replace", "extend"' in messages["spec.mode"]
        status, doc = http("POST", base + "?fieldValidation=Strict",
                           {"apiVersion": "example.com/v1", "kind": "Knob",
                            "metadata": {"name": "k3"}, "spec": {"url": "s3://a", "typo": 1}})
        assert status == 400 and 'unknown field "spec.typo"' in doc["message"], doc
    finally:
        ext.delete_custom_resource_definition("knobs.example.com")


def test_crd_with_a_non_structural_schema_is_rejected(http: Http) -> None:
    bad = json.loads(json.dumps(SCHEMA_CRD))
    bad["metadata"]["name"] = "bads.example.com"
    bad["spec"]["names"] = {"plural": "bads", "singular": "bad", "kind": "Bad"}
    del bad["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["type"]
    status, doc = http("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", bad)
    assert status == 422, doc
    assert any("spec.versions[0].schema.openAPIV3Schema" in c["field"]
               for c in doc["details"]["causes"])


# -- DaemonSets ---------------------------------------------------------------------------------

def daemonset(name: str, **pod_spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name},
            "spec": {"selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "agent:1"}],
                                           **pod_spec}}}}


def daemon_node(pod: Any) -> str:
    """The node a daemon pod's required node affinity names (matchFields metadata.name)."""
    required = pod.spec.affinity.node_affinity.required_during_scheduling_ignored_during_execution
    field = required.node_selector_terms[0].match_fields[0]
    assert (field.key, field.operator) == ("metadata.name", "In")
    return str(field.values[0])


def test_daemonset_runs_one_pod_per_node(api: client.ApiClient, core: client.CoreV1Api,
                                         namespace: str, kubectl: Kubectl) -> None:
    apps = client.AppsV1Api(api)
    created = apps.create_namespaced_daemon_set(namespace, daemonset("agent"))
    assert created.spec.update_strategy.rolling_update.max_unavailable == 1
    assert created.metadata.annotations["deprecated.daemonset.template.generation"] == "1"
    pods = wait_for(lambda: len(pods_of(core, namespace, "app=agent")) == 3
                    and pods_of(core, namespace, "app=agent"), what="3 daemon pods")
    # Placed by the scheduler, not by the controller: no nodeName, one node each.
    assert [p.spec.node_name for p in pods] == [None, None, None]
    assert sorted(daemon_node(p) for p in pods) == ["node-0", "node-1", "node-2"]
    pod = pods[0]
    assert pod.metadata.owner_references[0].kind == "DaemonSet"
    assert pod.metadata.labels["pod-template-generation"] == "1"
    tolerations = {(t.key, t.effect, t.toleration_seconds) for t in pod.spec.tolerations}
    assert {("node.kubernetes.io/not-ready", "NoExecute", None),
            ("node.kubernetes.io/unreachable", "NoExecute", None),
            ("node.kubernetes.io/unschedulable", "NoSchedule", None)} <= tolerations
    ds = wait_for(lambda: (d := apps.read_namespaced_daemon_set_status("agent", namespace))
                  .status.desired_number_scheduled == 3 and d, what="status")
    assert (ds.status.current_number_scheduled, ds.status.number_ready) == (3, 0)
    # Acting as the scheduler: each pod to its node; the kubelets run them.
    for p in pods:
        bind(core, namespace, p.metadata.name, daemon_node(p))
    ds = wait_for(lambda: (d := apps.read_namespaced_daemon_set_status("agent", namespace))
                  .status.number_ready == 3 and d, what="3 ready")
    assert (ds.status.number_available, ds.status.updated_number_scheduled,
            ds.status.number_unavailable) == (3, 3, None)
    rows = kubectl("get", "ds", "-n", namespace).stdout.splitlines()
    assert rows[0].split() == ["NAME", "DESIRED", "CURRENT", "READY", "UP-TO-DATE", "AVAILABLE",
                               "NODE", "SELECTOR", "AGE"]
    assert rows[1].split()[:7] == ["agent", "3", "3", "3", "3", "3", "<none>"]
    # Deleting the DaemonSet deletes its pods (garbage collection).
    apps.delete_namespaced_daemon_set("agent", namespace)
    wait_for(lambda: not pods_of(core, namespace, "app=agent"), what="pods collected")


@pytest.fixture(scope="module")
def own_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BackgroundCluster]:
    """A cluster of this module's own, for tests that change nodes."""
    with BackgroundCluster(small_cluster(), tmp_path_factory.mktemp("own")) as c:
        yield c


def test_daemonset_follows_its_nodes(own_cluster: BackgroundCluster) -> None:
    api = config.new_client_from_config(config_file=str(own_cluster.kubeconfig))
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    apps.create_namespaced_daemon_set("default", daemonset("ssd", nodeSelector={"disk": "ssd"}))

    def nodes() -> list[str]:
        return sorted(daemon_node(p) for p in pods_of(core, "default", "app=ssd"))

    assert apps.read_namespaced_daemon_set("ssd", "default").status.desired_number_scheduled \
        == 0
    core.patch_node("node-1", {"metadata": {"labels": {"disk": "ssd"}}})
    core.patch_node("node-2", {"metadata": {"labels": {"disk": "ssd"}}})
    wait_for(lambda: nodes() == ["node-1", "node-2"], what="pods on the ssd nodes")
    # An untolerated NoExecute taint removes the daemon pod; NoSchedule keeps it.
    core.patch_node("node-1", {"spec": {"taints": [{"key": "evict", "effect": "NoExecute"}]}})
    core.patch_node("node-2", {"spec": {"taints": [{"key": "cordon", "effect": "NoSchedule"}]}})
    wait_for(lambda: nodes() == ["node-2"], what="the pod of the NoExecute node removed")
    ds = wait_for(lambda: (d := apps.read_namespaced_daemon_set("ssd", "default"))
                  .status.number_misscheduled == 1 and d, what="misscheduled")
    assert ds.status.desired_number_scheduled == 0
    core.patch_node("node-1", {"spec": {"taints": None}})
    wait_for(lambda: nodes() == ["node-1", "node-2"], what="the pod back")
    # A node that goes away takes its daemon pod with it, bound or not.
    pod = next(p for p in pods_of(core, "default", "app=ssd") if daemon_node(p) == "node-2")
    bind(core, "default", pod.metadata.name, "node-2")
    core.delete_node("node-1")
    core.delete_node("node-2")
    wait_for(lambda: not core.list_namespaced_pod("default", label_selector="app=ssd").items,
             what="pods of deleted nodes removed")


# -- graceful deletion ------------------------------------------------------------------------

def test_a_deleted_pod_terminates_through_its_kubelet(core: client.CoreV1Api,
                                                      namespace: str) -> None:
    """A bound pod deleted with a grace period is marked and stays until its node's kubelet
    has stopped it; the scheduler's preemption counts on victims going this way."""
    core.create_namespaced_pod(namespace, {"metadata": {"name": "victim", "labels": {"app": "v"}},
                                           "spec": {"nodeName": "node-0",
                                                    "terminationGracePeriodSeconds": 30,
                                                    **template("v")["spec"]}})
    running = wait_for(lambda: (p := core.read_namespaced_pod("victim", namespace))
                       .status.phase == "Running" and p, what="running")
    core.delete_namespaced_pod("victim", namespace)
    marked = core.read_namespaced_pod("victim", namespace)
    assert marked.metadata.deletion_timestamp is not None
    assert marked.metadata.deletion_grace_period_seconds == 30
    # The kubelet stops it (the pool's termination time, under the grace period), then it goes.
    wait_for(lambda: not core.list_namespaced_pod(namespace, label_selector="app=v").items,
             what="the kubelet finishing the deletion")
    types = [e["type"] for e in watch.Watch().stream(
        core.list_namespaced_pod, namespace, label_selector="app=v",
        resource_version=running.metadata.resource_version, timeout_seconds=2)]
    # Marked; then the kubelet's own deletion at zero seconds, which kube also writes first.
    assert types == ["MODIFIED", "MODIFIED", "DELETED"]
    reasons = {e.reason for e in core.list_namespaced_event(
        namespace, field_selector="involvedObject.name=victim").items}
    assert "Killing" in reasons


def test_an_unbound_pod_is_deleted_at_once(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, {"metadata": {"name": "pending"},
                                           "spec": {"terminationGracePeriodSeconds": 30,
                                                    **template("p")["spec"]}})
    core.delete_namespaced_pod("pending", namespace)
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_pod("pending", namespace)
    assert exc.value.status == 404


def test_a_starting_pod_keeps_the_conditions_its_kubelet_does_not_own(
        core: client.CoreV1Api, namespace: str) -> None:
    """The kubelet writes Ready, ContainersReady, Initialized and PodReadyToStartContainers and
    keeps every other condition: a DisruptionTarget written just before the pod started (a
    preemption racing the start) is still there once it runs."""
    core.create_namespaced_pod(namespace, {"metadata": {"name": "late"},
                                           "spec": {"schedulerName": "nobody",
                                                    **template("late")["spec"]}})
    core.patch_namespaced_pod_status("late", namespace, {"status": {"conditions": [
        {"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler",
         "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())},
        {"type": "example.com/gate", "status": "False"}]}})
    bind(core, namespace, "late", "node-0")
    started = wait_for(lambda: (p := core.read_namespaced_pod("late", namespace))
                       .status.phase == "Running" and p, what="running")
    types = {c.type: c.status for c in started.status.conditions}
    assert types == {"DisruptionTarget": "True", "example.com/gate": "False",
                     "PodScheduled": "True", "PodReadyToStartContainers": "True",
                     "Initialized": "True", "Ready": "True", "ContainersReady": "True"}, types
