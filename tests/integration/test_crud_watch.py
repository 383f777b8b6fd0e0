"""The embedded API server driven by the official kubernetes client over real HTTP."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from pyscheduler_sim.cluster import ClusterSpec, PoolSpec
from pyscheduler_sim.harness import BackgroundCluster
from tests.conftest import ETCD_34_WATCH, Http, wait_for

#: The embedded server's own REST emulation, tested as it is.


def pod(name: str, labels: dict[str, str] | None = None, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {}},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}], **spec}}


def test_pod_crud_and_metadata(core: client.CoreV1Api, namespace: str) -> None:
    created = core.create_namespaced_pod(namespace, pod("web", {"app": "web"}))
    meta = created.metadata
    assert meta.uid and meta.creation_timestamp and int(meta.resource_version) > 0
    # Defaulting and admission as kube-apiserver does them.
    assert created.spec.scheduler_name == "default-scheduler"
    assert created.spec.restart_policy == "Always"
    assert created.status.phase == "Pending" and created.status.qos_class == "BestEffort"
    assert {t.key for t in created.spec.tolerations} == {
        "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}

    got = core.read_namespaced_pod("web", namespace)
    assert got.metadata.uid == meta.uid

    got.metadata.labels["tier"] = "front"
    updated = core.replace_namespaced_pod("web", namespace, got)
    assert int(updated.metadata.resource_version) > int(meta.resource_version)
    assert updated.metadata.labels == {"app": "web", "tier": "front"}

    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod(namespace, pod("web"))
    assert exc.value.status == 409 and '"reason":"AlreadyExists"' in exc.value.body.replace(" ", "")

    core.delete_namespaced_pod("web", namespace)
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_pod("web", namespace)
    assert exc.value.status == 404
    assert 'pods \\"web\\" not found' in exc.value.body or 'pods "web" not found' in exc.value.body


def test_resource_version_is_global_and_monotonic(core: client.CoreV1Api, namespace: str) -> None:
    a = core.create_namespaced_config_map(namespace, {"metadata": {"name": "a"}})
    b = core.create_namespaced_pod(namespace, pod("b"))
    c = core.patch_namespaced_config_map("a", namespace, {"data": {"k": "v"}})
    rvs = [int(x.metadata.resource_version) for x in (a, b, c)]
    assert rvs == sorted(rvs) and len(set(rvs)) == 3


def test_generate_name(core: client.CoreV1Api, namespace: str) -> None:
    made = core.create_namespaced_pod(namespace, {
        "metadata": {"generateName": "worker-"},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]}})
    name = made.metadata.name
    assert name.startswith("worker-") and len(name) == len("worker-") + 5
    assert all(ch in "bcdfghjklmnpqrstvwxz2456789" for ch in name[-5:])


def test_generation_bumps_on_spec_change_only(api: client.ApiClient, namespace: str) -> None:
    apps = client.AppsV1Api(api)
    dep = apps.create_namespaced_deployment(namespace, {
        "metadata": {"name": "d"},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "d"}},
                 "template": {"metadata": {"labels": {"app": "d"}},
                              "spec": {"containers": [{"name": "c", "image": "x"}]}}}})
    assert dep.metadata.generation == 1
    dep = apps.patch_namespaced_deployment("d", namespace, {"metadata": {"labels": {"x": "y"}}})
    assert dep.metadata.generation == 1
    dep = apps.patch_namespaced_deployment("d", namespace, {"spec": {"replicas": 0,
                                                                     "paused": True}})
    assert dep.metadata.generation == 2


def test_update_with_stale_resource_version_conflicts(core: client.CoreV1Api,
                                                      namespace: str) -> None:
    cm = core.create_namespaced_config_map(namespace, {"metadata": {"name": "cfg"},
                                                       "data": {"a": "1"}})
    stale = cm.metadata.resource_version
    cm.data = {"a": "2"}
    core.replace_namespaced_config_map("cfg", namespace, cm)
    cm.data = {"a": "3"}
    cm.metadata.resource_version = stale
    with pytest.raises(ApiException) as exc:
        core.replace_namespaced_config_map("cfg", namespace, cm)
    assert exc.value.status == 409
    assert "the object has been modified" in exc.value.body
    assert core.read_namespaced_config_map("cfg", namespace).data == {"a": "2"}


def test_noop_update_writes_nothing(core: client.CoreV1Api, namespace: str) -> None:
    cm = core.create_namespaced_config_map(namespace, {"metadata": {"name": "same"},
                                                       "data": {"a": "1"}})
    again = core.patch_namespaced_config_map("same", namespace, {"data": {"a": "1"}})
    assert again.metadata.resource_version == cm.metadata.resource_version


def test_list_pagination_is_consistent(core: client.CoreV1Api, namespace: str) -> None:
    for i in range(7):
        core.create_namespaced_config_map(namespace, {"metadata": {"name": f"cm-{i}"}})
    first = core.list_namespaced_config_map(namespace, limit=3)
    assert [c.metadata.name for c in first.items] == ["cm-0", "cm-1", "cm-2"]
    assert first.metadata._continue
    # A write between pages does not show up in the rest of this list (a consistent snapshot).
    core.create_namespaced_config_map(namespace, {"metadata": {"name": "cm-9"}})
    names = [c.metadata.name for c in first.items]
    token = first.metadata._continue
    while token:
        page = core.list_namespaced_config_map(namespace, limit=3, _continue=token)
        assert page.metadata.resource_version == first.metadata.resource_version
        names += [c.metadata.name for c in page.items]
        token = page.metadata._continue
    assert names == [f"cm-{i}" for i in range(7)]


@pytest.mark.parametrize("selector, expected", [
    pytest.param("app=web", {"a", "b"}, id="equals"),
    pytest.param("app==web,tier=front", {"a"}, id="double equals and AND"),
    pytest.param("app!=web", {"c", "d"}, id="not equals includes objects without the key"),
    pytest.param("tier in (front,back)", {"a", "b", "c"}, id="in"),
    pytest.param("tier notin (front)", {"b", "c", "d"}, id="notin includes missing key"),
    pytest.param("tier", {"a", "b", "c"}, id="exists"),
    pytest.param("!tier", {"d"}, id="does not exist"),
])
def test_label_selectors(core: client.CoreV1Api, namespace: str, selector: str,
                         expected: set[str]) -> None:
    labels = {"a": {"app": "web", "tier": "front"}, "b": {"app": "web", "tier": "back"},
              "c": {"app": "db", "tier": "back"}, "d": {"app": "cache"}}
    for name, lab in labels.items():
        core.create_namespaced_pod(namespace, pod(name, lab))
    got = core.list_namespaced_pod(namespace, label_selector=selector)
    assert {p.metadata.name for p in got.items} == expected


def test_field_selectors(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod("mine", schedulerName="pyscheduler"))
    core.create_namespaced_pod(namespace, pod("theirs"))
    core.create_namespaced_pod(namespace, pod("placed", nodeName="node-0"))
    names = lambda sel: {p.metadata.name for p in core.list_namespaced_pod(  # noqa: E731
        namespace, field_selector=sel).items}
    assert names("spec.schedulerName=pyscheduler") == {"mine"}
    assert names("spec.nodeName=") == {"mine", "theirs"}
    assert names("spec.nodeName!=,metadata.name==placed") == {"placed"}
    assert names(f"metadata.namespace={namespace},metadata.name!=mine") == {"theirs", "placed"}
    with pytest.raises(ApiException) as exc:
        core.list_namespaced_pod(namespace, field_selector="spec.bogus=1")
    assert exc.value.status == 400 and "field label not supported: spec.bogus" in exc.value.body


def _collect(core: client.CoreV1Api, namespace: str, out: list[tuple[str, str]],
             ready: threading.Event, **kwargs: Any) -> None:
    w = watch.Watch()
    ready.set()
    for ev in w.stream(core.list_namespaced_pod, namespace, timeout_seconds=3, **kwargs):
        out.append((ev["type"], ev["object"].metadata.name))


def test_watch_from_resource_version_replays_then_follows(core: client.CoreV1Api,
                                                          namespace: str) -> None:
    start = core.list_namespaced_pod(namespace).metadata.resource_version
    core.create_namespaced_pod(namespace, pod("early"))
    events: list[tuple[str, str]] = []
    ready = threading.Event()
    t = threading.Thread(target=_collect, args=(core, namespace, events, ready),
                         kwargs={"resource_version": start})
    t.start()
    ready.wait()
    core.create_namespaced_pod(namespace, pod("late"))
    core.patch_namespaced_pod("late", namespace, {"metadata": {"labels": {"x": "1"}}})
    core.delete_namespaced_pod("early", namespace)
    t.join(10)
    # A pod's deletion is graceful even when it is immediate (it never ran): its deletion
    # stamp is written, then it goes.
    assert events == [("ADDED", "early"), ("ADDED", "late"), ("MODIFIED", "late"),
                      ("MODIFIED", "early"), ("DELETED", "early")]


def test_watch_selector_enter_and_leave(core: client.CoreV1Api, namespace: str) -> None:
    start = core.list_namespaced_pod(namespace).metadata.resource_version
    events: list[tuple[str, str]] = []
    ready = threading.Event()
    t = threading.Thread(target=_collect, args=(core, namespace, events, ready),
                         kwargs={"resource_version": start, "label_selector": "role=db"})
    t.start()
    ready.wait()
    core.create_namespaced_pod(namespace, pod("p", {"role": "web"}))
    core.patch_namespaced_pod("p", namespace, {"metadata": {"labels": {"role": "db"}}})
    core.patch_namespaced_pod("p", namespace, {"metadata": {"labels": {"extra": "1"}}})
    core.patch_namespaced_pod("p", namespace, {"metadata": {"labels": {"role": "web"}}})
    t.join(10)
    assert events == [("ADDED", "p"), ("MODIFIED", "p"), ("DELETED", "p")]


@pytest.mark.embedded_only(ETCD_34_WATCH)
def test_watch_without_resource_version_starts_with_current_state(
        core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod("there"))
    events: list[tuple[str, str]] = []
    ready = threading.Event()
    _collect(core, namespace, events, ready)
    assert events == [("ADDED", "there")]


@pytest.mark.embedded_only("tunes the embedded server's bookmark interval")
def test_watch_bookmarks_and_timeout(http: Http, namespace: str,
                                     cluster: BackgroundCluster) -> None:
    cluster.call(lambda: setattr(cluster.cluster.server, "bookmark_interval", 0.2))
    try:
        rv = cluster.call(lambda: cluster.cluster.registry.store.rv)
        resp = http.raw("GET", f"/api/v1/namespaces/{namespace}/pods?watch=true&"
                        f"allowWatchBookmarks=true&timeoutSeconds=1&resourceVersion={rv}")
        lines = [line for line in resp.data.decode().splitlines() if line]
    finally:
        cluster.call(lambda: setattr(cluster.cluster.server, "bookmark_interval", 5.0))
    import json
    types = [json.loads(line)["type"] for line in lines]
    assert types and set(types) == {"BOOKMARK"}
    assert 2 <= len(types) <= 8  # one every 0.2 s for 1 s, and the stream ended on its own


def test_watch_too_old_resource_version_gets_410(tmp_path: Any) -> None:
    spec = ClusterSpec(pools=[PoolSpec(name="n", count=1)])
    from kubernetes import config
    with BackgroundCluster(spec, tmp_path, history=5) as c:
        core = client.CoreV1Api(config.new_client_from_config(config_file=str(c.kubeconfig)))
        start = core.list_namespaced_config_map("default").metadata.resource_version
        for i in range(10):
            core.create_namespaced_config_map("default", {"metadata": {"name": f"c{i}"}})
        with pytest.raises(ApiException) as exc:
            for _ in watch.Watch().stream(core.list_namespaced_config_map, "default",
                                          resource_version=start, timeout_seconds=2):
                pass
        assert exc.value.status == 410
        # A relist gives a revision the watch can resume from.
        rv = core.list_namespaced_config_map("default").metadata.resource_version
        core.create_namespaced_config_map("default", {"metadata": {"name": "after"}})
        got = [e["object"].metadata.name for e in watch.Watch().stream(
            core.list_namespaced_config_map, "default", resource_version=rv, timeout_seconds=1)]
        assert got == ["after"]


@pytest.mark.parametrize("patch_type, body, expect", [
    pytest.param("application/merge-patch+json",
                 {"metadata": {"labels": {"a": None, "b": "2"}}},
                 lambda p: p.metadata.labels == {"b": "2"}, id="merge patch deletes with null"),
    pytest.param("application/strategic-merge-patch+json",
                 {"spec": {"containers": [{"name": "app", "image": "nginx:2"}]}},
                 lambda p: [(c.name, c.image) for c in p.spec.containers] == [
                     ("app", "nginx:2"), ("side", "busybox")],
                 id="strategic merge patch merges containers by name"),
    pytest.param("application/json-patch+json",
                 [{"op": "add", "path": "/metadata/annotations", "value": {"k": "v"}},
                  {"op": "test", "path": "/metadata/labels/a", "value": "1"}],
                 lambda p: p.metadata.annotations == {"k": "v"}, id="json patch"),
])
def test_patch_types(http: Http, core: client.CoreV1Api, namespace: str,
                     patch_type: str, body: Any, expect: Any) -> None:
    p = pod("p", {"a": "1"})
    p["spec"]["containers"].append({"name": "side", "image": "busybox"})
    before = core.create_namespaced_pod(namespace, p)
    status, doc = http("PATCH", f"/api/v1/namespaces/{namespace}/pods/p", body, patch_type)
    assert status == 200, doc
    assert int(doc["metadata"]["resourceVersion"]) > int(before.metadata.resource_version)
    assert expect(core.read_namespaced_pod("p", namespace))


def test_failed_json_patch_test_op_changes_nothing(http: Http, core: client.CoreV1Api,
                                                   namespace: str) -> None:
    before = core.create_namespaced_pod(namespace, pod("p", {"a": "1"}))
    status, doc = http("PATCH", f"/api/v1/namespaces/{namespace}/pods/p",
                       [{"op": "test", "path": "/metadata/labels/a", "value": "2"},
                        {"op": "remove", "path": "/metadata/labels"}],
                       "application/json-patch+json")
    assert status == 422 and doc["reason"] == "Invalid", doc
    after = core.read_namespaced_pod("p", namespace)
    assert after.metadata.resource_version == before.metadata.resource_version


def test_pod_spec_is_immutable_except_allowed_fields(core: client.CoreV1Api,
                                                     namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod("p"))
    core.patch_namespaced_pod("p", namespace, {"spec": {"containers": [
        {"name": "app", "image": "nginx:2"}]}})
    with pytest.raises(ApiException) as exc:
        core.patch_namespaced_pod("p", namespace, {"spec": {"restartPolicy": "Never"}})
    assert exc.value.status == 422 and "Forbidden: pod updates may not change" in exc.value.body
    with pytest.raises(ApiException) as exc:
        core.patch_namespaced_pod("p", namespace, {"spec": {"nodeName": "node-0"}})
    assert exc.value.status == 422


def test_binding(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod("p"))
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "node-1"}}
    core.create_namespaced_pod_binding("p", namespace, body, _preload_content=False)
    bound = core.read_namespaced_pod("p", namespace)
    assert bound.spec.node_name == "node-1"
    assert any(c.type == "PodScheduled" and c.status == "True" for c in bound.status.conditions)
    with pytest.raises(ApiException) as exc:
        core.create_namespaced_pod_binding("p", namespace, body, _preload_content=False)
    assert exc.value.status == 409
    assert 'pod p is already assigned to node \\"node-1\\"' in exc.value.body
    # The simulated kubelet runs it.
    running = wait_for(lambda: core.read_namespaced_pod("p", namespace).status.pod_ip,
                       what="pod IP")
    assert running.startswith("10.")
    assert core.read_namespaced_pod("p", namespace).status.phase == "Running"


def test_graceful_pod_deletion_and_finalizers(core: client.CoreV1Api, namespace: str) -> None:
    p = pod("p", nodeName="node-0")
    p["metadata"]["finalizers"] = ["example.com/hold"]
    core.create_namespaced_pod(namespace, p)
    wait_for(lambda: core.read_namespaced_pod("p", namespace).status.phase == "Running")
    core.delete_namespaced_pod("p", namespace, grace_period_seconds=30)
    held = core.read_namespaced_pod("p", namespace)
    assert held.metadata.deletion_timestamp is not None
    assert held.metadata.deletion_grace_period_seconds in (0, 30)
    # The kubelet finishes, but the finalizer keeps the object until it is removed.
    wait_for(lambda: core.read_namespaced_pod("p", namespace)
             .metadata.deletion_grace_period_seconds == 0, what="kubelet termination")
    assert core.read_namespaced_pod("p", namespace).metadata.name == "p"
    core.patch_namespaced_pod("p", namespace, {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as exc:
        core.read_namespaced_pod("p", namespace)
    assert exc.value.status == 404


def test_delete_preconditions(core: client.CoreV1Api, namespace: str) -> None:
    cm = core.create_namespaced_config_map(namespace, {"metadata": {"name": "c"}})
    with pytest.raises(ApiException) as exc:
        core.delete_namespaced_config_map("c", namespace, body=client.V1DeleteOptions(
            preconditions=client.V1Preconditions(uid="not-the-uid")))
    assert exc.value.status == 409
    assert json.loads(exc.value.body)["message"] == (
        'Operation cannot be fulfilled on ConfigMap "c": the UID in the precondition '
        f"(not-the-uid) does not match the UID in record ({cm.metadata.uid}). The object might "
        "have been deleted and then recreated")
    with pytest.raises(ApiException) as exc:
        core.delete_namespaced_config_map("c", namespace, body=client.V1DeleteOptions(
            preconditions=client.V1Preconditions(resource_version="1")))
    assert json.loads(exc.value.body)["message"] == (
        'Operation cannot be fulfilled on ConfigMap "c": the ResourceVersion in the precondition '
        f"(1) does not match the ResourceVersion in record ({cm.metadata.resource_version}). "
        "The object might have been modified")
    core.delete_namespaced_config_map("c", namespace, body=client.V1DeleteOptions(
        preconditions=client.V1Preconditions(uid=cm.metadata.uid)))


def test_unauthorized_without_or_with_wrong_token(cluster: BackgroundCluster) -> None:
    import urllib3
    http = urllib3.PoolManager(ca_certs=str(cluster.ca_file))
    # No credentials: kube-apiserver's anonymous auth lets the request in as system:anonymous,
    # and RBAC refuses it.
    anonymous = 'is forbidden: User "system:anonymous" cannot'
    for method, path, message in (
            ("GET", "/api/v1/pods",
             f'pods {anonymous} list resource "pods" in API group "" at the cluster scope'),
            ("GET", "/api/v1/pods?watch=true",
             f'pods {anonymous} watch resource "pods" in API group "" at the cluster scope'),
            ("GET", "/apis/apps/v1/namespaces/default/deployments/web",
             f'deployments.apps "web" {anonymous} get resource "deployments" in API group '
             '"apps" in the namespace "default"'),
            ("POST", "/api/v1/namespaces/default/pods/web/binding",
             f'pods "web" {anonymous} create resource "pods/binding" in API group "" in the '
             'namespace "default"'),
            ("DELETE", "/api/v1/namespaces/default/configmaps",
             f'configmaps {anonymous} deletecollection resource "configmaps" in API group "" '
             'in the namespace "default"'),
            ("GET", "/api/v1/namespaces/default",
             f'namespaces "default" {anonymous} get resource "namespaces" in API group "" in '
             'the namespace "default"'),
            ("GET", "/api", f'forbidden: User "system:anonymous" cannot get path "/api"'),
    ):
        r = http.request(method, cluster.url + path)
        body = json.loads(r.data)
        assert (r.status, body["reason"], body["message"]) == (403, "Forbidden", message), path
    # A token the server does not know is refused outright.
    r = http.request("GET", f"{cluster.url}/api/v1/pods",
                     headers={"Authorization": "Bearer wrong"})
    assert r.status == 401
    assert json.loads(r.data)["reason"] == "Unauthorized"
    r = http.request("GET", f"{cluster.url}/api/v1/pods",
                     headers={"Authorization": f"Bearer {cluster.token}"})
    assert r.status == 200


def test_events_are_one_store_behind_two_apis(api: client.ApiClient, core: client.CoreV1Api,
                                              http: Http, namespace: str) -> None:
    ev = client.EventsV1Api(api)
    p = core.create_namespaced_pod(namespace, pod("subject"))
    # Not through the typed client: it rewrites eventTime as "...T00:00:00+00:00", which
    # kube-apiserver refuses (a MicroTime has six fraction digits).
    status, created = http("POST", f"/apis/events.k8s.io/v1/namespaces/{namespace}/events", {
        "metadata": {"name": "subject.1"},
        "eventTime": "2026-01-01T00:00:00.000000Z", "action": "Scheduling",
        "reason": "FailedScheduling", "note": "0/3 nodes are available.", "type": "Warning",
        "reportingController": "pyscheduler", "reportingInstance": "pyscheduler-0",
        "regarding": {"kind": "Pod", "name": "subject", "namespace": namespace,
                      "uid": p.metadata.uid, "apiVersion": "v1"}})
    assert status == 201, created
    old = core.list_namespaced_event(
        namespace, field_selector=f"involvedObject.name=subject,involvedObject.uid="
                                  f"{p.metadata.uid}").items
    assert [(e.reason, e.message, e.reporting_component) for e in old] == [
        ("FailedScheduling", "0/3 nodes are available.", "pyscheduler")]
    new = ev.list_namespaced_event(namespace, field_selector="regarding.name=subject").items
    assert [(e.reason, e.note, e.regarding.uid) for e in new] == [
        ("FailedScheduling", "0/3 nodes are available.", p.metadata.uid)]
    # What an event says cannot change through events.k8s.io (kube names the core field)...
    with pytest.raises(ApiException) as refused:
        ev.patch_namespaced_event("subject.1", namespace, {"note": "changed"})
    assert refused.value.status == 422
    assert [(c["field"], c["message"]) for c in json.loads(refused.value.body)["details"][
        "causes"]] == [("message", 'Invalid value: "changed": field is immutable')]
    # ... but can through the core API, and the other API reads the change.
    patched = core.patch_namespaced_event("subject.1", namespace, {"message": "changed"})
    assert patched.message == "changed"
    assert ev.read_namespaced_event("subject.1", namespace).note == "changed"


def test_kubelet_records_container_events(core: client.CoreV1Api, namespace: str) -> None:
    core.create_namespaced_pod(namespace, pod("ev", nodeName="node-0"))
    got = wait_for(lambda: [e.reason for e in core.list_namespaced_event(
        namespace, field_selector="involvedObject.name=ev").items], what="events")
    assert got == ["Pulled", "Created", "Started"]
