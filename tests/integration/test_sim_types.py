"""The embedded cluster's RBAC objects, StatefulSets, Jobs, ResourceQuotas and Secrets: stored,
defaulted and validated as kube-apiserver does, discoverable, and printed by ``kubectl get``;
the discovery of its storage, scheduling, DaemonSet and ReplicationController types (the
behaviour of the first ones is tested in test_sim_storage.py, test_sim_priority.py and
test_controllers.py); and its request log."""

from __future__ import annotations

import base64
import uuid
from typing import Any

import pytest

from pyscheduler_sim.harness import BackgroundCluster
from pyscheduler_sim.server import AuditRecord
from tests.conftest import Http, Kubectl, wait_for

#: a test of the embedded server's own types and defaults.

RBAC = "/apis/rbac.authorization.k8s.io/v1"
Obj = dict[str, Any]


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


def container(**extra: Any) -> Obj:
    return {"name": "c", "image": "registry.k8s.io/pause:3.10", **extra}


def statefulset(name: str, **spec: Any) -> Obj:
    return {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": name},
            "spec": {"serviceName": name, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [container()]}},
                     "volumeClaimTemplates": [{
                         "metadata": {"name": "data"},
                         "spec": {"accessModes": ["ReadWriteOnce"],
                                  "resources": {"requests": {"storage": "1Gi"}}}}],
                     **spec}}


def job(name: str, **spec: Any) -> Obj:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"restartPolicy": "Never",
                                           "containers": [container()]}},
                     **spec}}


def causes(body: Obj) -> list[str]:
    return [f"{c['field']}: {c['message']}" for c in body["details"]["causes"]]


# --------------------------------------------------------------------------------------------
# Discovery


def test_new_types_are_discoverable(http: Http) -> None:
    status, doc = http("GET", RBAC)
    assert status == 200
    scopes = {r["name"]: r["namespaced"] for r in doc["resources"]}
    assert scopes == {"clusterroles": False, "clusterrolebindings": False, "roles": True,
                      "rolebindings": True}
    _, doc = http("GET", "/apis/apps/v1")
    names = {r["name"]: r for r in doc["resources"]}
    assert {"statefulsets", "statefulsets/status", "statefulsets/scale"} <= set(names)
    assert names["statefulsets"]["shortNames"] == ["sts"]
    _, doc = http("GET", "/apis/batch/v1")
    # (A real server serves more of the group, cronjobs among them.)
    assert {"jobs", "jobs/status"} <= {r["name"] for r in doc["resources"]}
    _, doc = http("GET", "/api/v1")
    quota = next(r for r in doc["resources"] if r["name"] == "resourcequotas")
    assert quota["shortNames"] == ["quota"] and quota["namespaced"]
    _, groups = http("GET", "/apis")
    assert {"rbac.authorization.k8s.io", "batch"} <= {g["name"] for g in groups["groups"]}
    # kubectl's validation looks for each kind's PATCH operation in the OpenAPI v3 document.
    _, openapi = http("GET", "/openapi/v3/apis/rbac.authorization.k8s.io/v1")
    assert "/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}/rolebindings/{name}" in \
        openapi["paths"]
    _, openapi = http("GET", "/openapi/v3/apis/batch/v1")
    assert "/apis/batch/v1/namespaces/{namespace}/jobs/{name}" in openapi["paths"]


def test_storage_scheduling_and_daemonset_types_are_discoverable(http: Http,
                                                                 kubectl: Kubectl) -> None:
    _, doc = http("GET", "/api/v1")
    core = {r["name"]: r for r in doc["resources"]}
    assert (core["persistentvolumes"]["namespaced"], core["persistentvolumes"]["shortNames"]) == (
        False, ["pv"])
    assert (core["persistentvolumeclaims"]["namespaced"],
            core["persistentvolumeclaims"]["shortNames"]) == (True, ["pvc"])
    assert {"persistentvolumes/status", "persistentvolumeclaims/status"} <= set(core)
    assert (core["replicationcontrollers"]["shortNames"], core["replicationcontrollers"][
        "categories"]) == (["rc"], ["all"])
    assert {"replicationcontrollers/status", "replicationcontrollers/scale"} <= set(core)
    _, doc = http("GET", "/apis/storage.k8s.io/v1")
    scopes = {r["name"]: r["namespaced"] for r in doc["resources"]}
    assert {name: scopes.get(name) for name in ("storageclasses", "csinodes", "csidrivers")} \
        == {"storageclasses": False, "csinodes": False, "csidrivers": False}
    assert next(r for r in doc["resources"] if r["name"] == "storageclasses")["shortNames"] == [
        "sc"]
    _, doc = http("GET", "/apis/scheduling.k8s.io/v1")
    assert [(r["name"], r["namespaced"], r["shortNames"]) for r in doc["resources"]] == [
        ("priorityclasses", False, ["pc"])]
    _, doc = http("GET", "/apis/apps/v1")
    apps = {r["name"]: r for r in doc["resources"]}
    assert apps["daemonsets"]["shortNames"] == ["ds"] and apps["daemonsets"]["categories"] == [
        "all"]
    assert "daemonsets/status" in apps
    _, groups = http("GET", "/apis")
    assert {"storage.k8s.io", "scheduling.k8s.io"} <= {g["name"] for g in groups["groups"]}
    _, openapi = http("GET", "/openapi/v3/apis/storage.k8s.io/v1")
    assert "/apis/storage.k8s.io/v1/storageclasses/{name}" in openapi["paths"]
    _, openapi = http("GET", "/openapi/v3/api/v1")
    assert "/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}" in openapi["paths"]
    names = set(kubectl("api-resources", "-o", "name").stdout.split())
    assert {"persistentvolumes", "persistentvolumeclaims", "replicationcontrollers",
            "daemonsets.apps",
            "priorityclasses.scheduling.k8s.io", "storageclasses.storage.k8s.io",
            "csinodes.storage.k8s.io", "csidrivers.storage.k8s.io"} <= names
    listed = kubectl("get", "pc,sc,pv,csinode,csidriver", "-o", "name").stdout.split()
    assert {"priorityclass.scheduling.k8s.io/system-node-critical",
            "priorityclass.scheduling.k8s.io/system-cluster-critical"} <= set(listed)


def test_kubectl_lists_and_prints_the_new_types(kubectl: Kubectl, namespace: str) -> None:
    resources = kubectl("api-resources", "--api-group=rbac.authorization.k8s.io", "-o", "name"
                        ).stdout.split()
    assert sorted(resources) == sorted([
        "clusterrolebindings.rbac.authorization.k8s.io",
        "clusterroles.rbac.authorization.k8s.io",
        "rolebindings.rbac.authorization.k8s.io", "roles.rbac.authorization.k8s.io"])
    name = unique("demo")
    manifests = f"""
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {{name: {name}}}
rules: [{{apiGroups: [""], resources: [pods], verbs: [get]}}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {{name: {name}}}
roleRef: {{kind: Role, name: {name}}}
subjects:
  - {{kind: ServiceAccount, name: robot, namespace: {namespace}}}
  - {{kind: User, name: alice}}
  - {{kind: Group, name: admins}}
---
apiVersion: v1
kind: ResourceQuota
metadata: {{name: {name}}}
spec: {{hard: {{pods: "4", limits.cpu: "8"}}}}
"""
    created = kubectl("create", "-n", namespace, "-f", "-", input=manifests).stdout.split("\n")
    assert created[:3] == [f"role.rbac.authorization.k8s.io/{name} created",
                           f"rolebinding.rbac.authorization.k8s.io/{name} created",
                           f"resourcequota/{name} created"]
    kubectl("create", "-n", namespace, "-f", "-", input=_yaml(statefulset(name)))
    kubectl("create", "-n", namespace, "-f", "-", input=_yaml(job(name)))

    def table(*args: str) -> list[list[str]]:
        out = kubectl("get", *args, "-n", namespace).stdout.splitlines()
        return [line.split() for line in out]

    assert table("roles")[0] == ["NAME", "CREATED", "AT"]
    rows = table("rolebindings", "-o", "wide")
    assert rows[0] == ["NAME", "ROLE", "AGE", "USERS", "GROUPS", "SERVICEACCOUNTS"]
    assert rows[1][:2] == [name, f"Role/{name}"]
    assert rows[1][3:] == ["alice", "admins", f"{namespace}/robot"]
    sets = table("statefulsets")
    assert sets[0] == ["NAME", "READY", "AGE"] and sets[1][:2] == [name, "0/1"]
    jobs = table("jobs")
    assert jobs[0] == ["NAME", "STATUS", "COMPLETIONS", "DURATION", "AGE"]
    assert jobs[1][:3] == [name, "Running", "0/1"]
    # The columns print the status, which the quota controller fills.
    quotas = wait_for(lambda: (lines := kubectl("get", "quota", name, "-n", namespace)
                               .stdout.splitlines()) and "pods:" in lines[1] and lines,
                      what="the quota's status")
    assert quotas[0].split() == ["NAME", "REQUEST", "LIMIT", "AGE"]
    row = quotas[1].split()
    # (The StatefulSet's and the Job's pods count, once their controllers have made them.)
    assert row[1] == "pods:" and row[2].endswith("/4") and row[3:5] == ["limits.cpu:", "0/8"]
    assert kubectl("scale", "statefulset", name, "-n", namespace, "--replicas=3"
                   ).stdout.strip() == f"statefulset.apps/{name} scaled"
    assert kubectl.json("get", "statefulset", name, "-n", namespace)["spec"]["replicas"] == 3


def test_kubectl_typed_create_commands(kubectl: Kubectl, namespace: str) -> None:
    """kubectl's typed create commands send protobuf bodies; they arrive as kubectl meant."""
    name = unique("typed")
    ns = ["-n", namespace]
    kubectl("create", "role", name, *ns, "--verb=get,list",
            "--resource=pods,leases.coordination.k8s.io", "--resource-name=a")
    kubectl("create", "rolebinding", name, *ns, f"--role={name}",
            f"--serviceaccount={namespace}:robot", "--user=alice")
    kubectl("create", "clusterrole", name, "--verb=get", "--non-resource-url=/metrics")
    kubectl("create", "clusterrolebinding", name, f"--clusterrole={name}", "--group=ops")
    kubectl("create", "quota", name, *ns, "--hard=pods=4,requests.cpu=2",
            "--scopes=NotBestEffort")
    role = kubectl.json("get", "role", name, *ns)
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "resourceNames": ["a"],
         "verbs": ["get", "list"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["a"],
         "verbs": ["get", "list"]}]
    binding = kubectl.json("get", "rolebinding", name, *ns)
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                  "name": name}
    assert binding["subjects"] == [
        {"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": "alice"},
        {"kind": "ServiceAccount", "name": "robot", "namespace": namespace}]
    cluster_role = kubectl.json("get", "clusterrole", name)
    assert cluster_role["rules"] == [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    cluster_binding = kubectl.json("get", "clusterrolebinding", name)
    assert cluster_binding["subjects"] == [
        {"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": "ops"}]
    quota = kubectl.json("get", "quota", name, *ns)
    assert quota["spec"] == {"hard": {"pods": "4", "requests.cpu": "2"},
                             "scopes": ["NotBestEffort"]}
    for kind in ("clusterrolebinding", "clusterrole"):
        kubectl("delete", kind, name)


def _yaml(obj: Obj) -> str:
    import yaml

    return yaml.safe_dump(obj)


# --------------------------------------------------------------------------------------------
# RBAC


def test_rbac_objects_are_stored_with_kube_defaults(http: Http, namespace: str) -> None:
    role = unique("system:reader")          # RBAC names are path segments: ':' is fine
    status, created = http("POST", f"{RBAC}/clusterroles", {
        "metadata": {"name": role},
        "rules": [{"apiGroups": [""], "resources": ["pods", "pods/log"],
                   "verbs": ["get", "list"]},
                  {"nonResourceURLs": ["/healthz", "/metrics"], "verbs": ["get"]}]})
    assert status == 201, created
    assert created["kind"] == "ClusterRole" and "generation" not in created["metadata"]
    status, binding = http("POST", f"{RBAC}/namespaces/{namespace}/rolebindings", {
        "metadata": {"name": "readers"},
        "roleRef": {"kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "User", "name": "alice"},
                     {"kind": "ServiceAccount", "name": "robot"}]})
    assert status == 201, binding
    assert binding["roleRef"]["apiGroup"] == "rbac.authorization.k8s.io"
    assert binding["subjects"][0]["apiGroup"] == "rbac.authorization.k8s.io"
    assert "apiGroup" not in binding["subjects"][1]
    # Subjects may change; the role a binding grants may not.
    path = f"{RBAC}/namespaces/{namespace}/rolebindings/readers"
    status, patched = http("PATCH", path, {"subjects": [{"kind": "Group", "name": "admins"}]},
                           content_type="application/merge-patch+json")
    assert status == 200 and patched["subjects"][0]["apiGroup"] == "rbac.authorization.k8s.io"
    status, refused = http("PATCH", path, {"roleRef": {"name": "other"}},
                           content_type="application/merge-patch+json")
    assert status == 422 and causes(refused) == [
        'roleRef: Invalid value: {"APIGroup":"rbac.authorization.k8s.io","Kind":"ClusterRole",'
        '"Name":"other"}: cannot change roleRef']
    status, listed = http("GET", f"{RBAC}/rolebindings")
    assert any(b["metadata"]["name"] == "readers" for b in listed["items"])
    assert http("DELETE", path)[0] == 200
    assert http("GET", path)[0] == 404


@pytest.mark.parametrize("kind,body,expected", [
    pytest.param("roles", {"rules": [{"apiGroups": [""], "resources": ["pods"]}]},
                 ["rules[0].verbs: Required value: verbs must contain at least one value"],
                 id="a rule without verbs"),
    pytest.param("roles", {"rules": [{"nonResourceURLs": ["/healthz"], "verbs": ["get"]}]},
                 ['rules[0].nonResourceURLs: Invalid value: ["/healthz"]: namespaced '
                  'rules cannot apply to non-resource URLs'],
                 id="non-resource URLs in a Role"),
    pytest.param("clusterroles", {"rules": [{"apiGroups": [""], "resources": ["pods"],
                                             "nonResourceURLs": ["/x"], "verbs": ["get"]}]},
                 ['rules[0].nonResourceURLs: Invalid value: ["/x"]: rules cannot apply '
                  'to both regular resources and non-resource URLs'],
                 id="resources and URLs in one rule"),
    pytest.param("clusterroles", {"rules": [{"resources": ["pods"], "verbs": ["get"]}]},
                 ["rules[0].apiGroups: Required value: resource rules must supply at least one "
                  "api group"], id="no api group"),
    pytest.param("clusterrolebindings", {"roleRef": {"kind": "Role", "name": "r"},
                                         "subjects": [{"kind": "ServiceAccount", "name": "s"}]},
                 ['roleRef.kind: Unsupported value: "Role": supported values: "ClusterRole"',
                  "subjects[0].namespace: Required value"],
                 id="cluster binding to a Role, service account without namespace"),
    pytest.param("rolebindings", {"roleRef": {"kind": "Role", "name": "r"},
                                  "subjects": [{"kind": "Robot", "name": "r"}]},
                 ['subjects[0].kind: Unsupported value: "Robot": supported values: '
                  '"ServiceAccount", "User", "Group"'], id="unknown subject kind"),
    pytest.param("roles", {"metadata": {"name": "a%b"}, "rules": []},
                 ['metadata.name: Invalid value: "a%b": may not contain \'%\''],
                 id="a name that is not a path segment"),
])
def test_invalid_rbac_objects_are_refused(http: Http, namespace: str, kind: str, body: Obj,
                                          expected: list[str]) -> None:
    scoped = kind in ("roles", "rolebindings")
    path = f"{RBAC}/namespaces/{namespace}/{kind}" if scoped else f"{RBAC}/{kind}"
    status, answer = http("POST", path, {"metadata": {"name": unique("bad")}, **body})
    assert status == 422, answer
    assert causes(answer) == expected


# --------------------------------------------------------------------------------------------
# StatefulSets and Jobs


def test_statefulset_defaults_status_scale_and_update_rules(http: Http, namespace: str) -> None:
    base = f"/apis/apps/v1/namespaces/{namespace}/statefulsets"
    status, sts = http("POST", base, statefulset("db"))
    assert status == 201, sts
    spec = sts["spec"]
    assert (spec["replicas"], spec["podManagementPolicy"], spec["revisionHistoryLimit"]) == (
        1, "OrderedReady", 10)
    assert spec["updateStrategy"] == {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}}
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain",
                                                            "whenScaled": "Retain"}
    assert spec["volumeClaimTemplates"][0]["spec"]["volumeMode"] == "Filesystem"
    assert spec["template"]["spec"]["restartPolicy"] == "Always"
    assert sts["status"] == {"replicas": 0, "availableReplicas": 0}
    assert sts["metadata"]["generation"] == 1
    status, scale = http("PUT", f"{base}/db/scale", {
        "apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": "db"},
        "spec": {"replicas": 3}})
    assert status == 200 and scale["spec"]["replicas"] == 3 and scale["status"]["selector"] == \
        "app=db"
    status, sts = http("PATCH", f"{base}/db", {"spec": {"template": {"spec": {"containers": [
        container(image="registry.k8s.io/pause:3.9")]}}}},
        content_type="application/strategic-merge-patch+json")
    assert status == 200 and sts["metadata"]["generation"] == 3
    status, refused = http("PATCH", f"{base}/db", {"spec": {"serviceName": "other"}},
                           content_type="application/merge-patch+json")
    assert status == 422
    assert causes(refused)[0].startswith("spec: Forbidden: updates to statefulset spec for "
                                         "fields other than 'replicas'")


@pytest.mark.parametrize("change,expected", [
    pytest.param({"template": {"metadata": {"labels": {"app": "x"}},
                               "spec": {"restartPolicy": "OnFailure",
                                        "containers": [container()]}}},
                 ["spec.template.metadata.labels: Invalid value: {\"app\":\"x\"}: `selector` "
                  "does not match template `labels`",
                  'spec.template.spec.restartPolicy: Unsupported value: "OnFailure": '
                  'supported values: "Always"'], id="wrong labels and restart policy"),
    pytest.param({"selector": {}},
                 ["spec.selector: Invalid value: {}: empty selector is invalid for statefulset"],
                 id="empty selector"),
    pytest.param({"volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {}}]},
                 ["spec.volumeClaimTemplates[0].spec.accessModes: Required value: at least 1 "
                  "access mode is required",
                  "spec.volumeClaimTemplates[0].spec.resources[storage]: Required value"],
                 id="claim template without access mode and size"),
    pytest.param({"podManagementPolicy": "Random"},
                 ['spec.podManagementPolicy: Invalid value: "Random": must be \'OrderedReady\' '
                  "or 'Parallel'"], id="unknown pod management policy"),
])
def test_invalid_statefulsets_are_refused(http: Http, namespace: str, change: Obj,
                                          expected: list[str]) -> None:
    body = statefulset("bad")
    body["spec"].update(change)
    status, answer = http("POST", f"/apis/apps/v1/namespaces/{namespace}/statefulsets", body)
    assert status == 422, answer
    assert causes(answer) == expected


def test_job_selector_is_generated_from_its_uid(http: Http, namespace: str) -> None:
    base = f"/apis/batch/v1/namespaces/{namespace}/jobs"
    status, created = http("POST", base, job("once"))
    assert status == 201, created
    uid = created["metadata"]["uid"]
    spec = created["spec"]
    assert spec["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert spec["template"]["metadata"]["labels"] == {
        "app": "once", "batch.kubernetes.io/controller-uid": uid,
        "batch.kubernetes.io/job-name": "once", "controller-uid": uid, "job-name": "once"}
    assert (spec["completions"], spec["parallelism"], spec["backoffLimit"],
            spec["completionMode"], spec["suspend"], spec["manualSelector"]) == (
        1, 1, 6, "NonIndexed", False, False)
    # Copied from the template, which kube's defaulting shares with the Job: the generated
    # labels are the Job's too.
    assert created["metadata"]["labels"] == spec["template"]["metadata"]["labels"]
    assert created["status"] == {}
    # The template is immutable; a Job's pods never restart "Always".
    status, refused = http("PATCH", f"{base}/once", {"spec": {"template": {"spec": {
        "activeDeadlineSeconds": 5}}}}, content_type="application/merge-patch+json")
    assert status == 422 and causes(refused)[0].startswith("spec.template: Invalid value:")
    assert causes(refused)[0].endswith(": field is immutable")
    status, refused = http("POST", base, job("always", template={
        "spec": {"restartPolicy": "Always", "containers": [container()]}}))
    assert status == 422 and causes(refused) == [
        'spec.template.spec.restartPolicy: Required value: valid values: "OnFailure", "Never"']
    # A selector of one's own needs manualSelector.
    own = {"matchLabels": {"app": "mine"}}
    template = {"metadata": {"labels": {"app": "mine"}},
                "spec": {"restartPolicy": "OnFailure", "containers": [container()]}}
    status, refused = http("POST", base, job("mine", selector=own, template=template))
    assert status == 422
    assert causes(refused)[-1].startswith('spec.selector: Invalid value: {"matchLabels":')
    assert causes(refused)[-1].endswith(": `selector` not auto-generated")
    status, manual = http("POST", base, job("mine", selector=own, template=template,
                                            manualSelector=True))
    assert status == 201 and manual["spec"]["selector"] == own
    assert manual["spec"]["template"]["metadata"]["labels"] == {"app": "mine"}


# --------------------------------------------------------------------------------------------
# Secrets and ResourceQuotas


def test_secret_string_data_is_merged_into_data(http: Http, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/secrets"
    status, secret = http("POST", base, {"metadata": {"name": "creds"},
                                         "data": {"a": base64.b64encode(b"old").decode()},
                                         "stringData": {"a": "new", "b": "two"}})
    assert status == 201, secret
    assert "stringData" not in secret and secret["type"] == "Opaque"
    decoded = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert decoded == {"a": "new", "b": "two"}
    status, secret = http("PATCH", f"{base}/creds", {"stringData": {"c": "three"}},
                          content_type="application/merge-patch+json")
    assert status == 200 and "stringData" not in secret
    assert base64.b64decode(secret["data"]["c"]) == b"three" and set(secret["data"]) == {
        "a", "b", "c"}
    status, refused = http("POST", base, {"metadata": {"name": "bad"},
                                          "data": {"no/slash": "eA=="}})
    assert status == 422
    assert [c.split(":")[0] for c in causes(refused)] == ["data[no/slash]"]
    # Bytes that are not base64 cannot even be decoded: 400, before any validation.
    status, refused = http("POST", base, {"metadata": {"name": "bad"},
                                          "data": {"ok": "not base64!"}})
    assert (status, refused["reason"], refused["message"]) == (
        400, "BadRequest", 'Secret in version "v1" cannot be handled as a Secret: illegal '
                           "base64 data at input byte 3")


def test_resource_quota_scopes_are_checked(http: Http, namespace: str) -> None:
    base = f"/api/v1/namespaces/{namespace}/resourcequotas"
    status, quota = http("POST", base, {
        "metadata": {"name": "critical"},
        "spec": {"hard": {"pods": "3"}, "scopeSelector": {"matchExpressions": [
            {"scopeName": "PriorityClass", "operator": "In",
             "values": ["system-cluster-critical"]}]}}})
    assert status == 201, quota
    status, refused = http("POST", base, {
        "metadata": {"name": "bad"},
        "spec": {"hard": {"pods": "1.5"}, "scopeSelector": {"matchExpressions": [
            {"scopeName": "Expensive", "operator": "In"}]}}})
    assert status == 422
    # kube's paths name the selector's expressions without an index.
    assert [c.split(":")[0] for c in causes(refused)] == [
        "spec.hard[pods]", "spec.scopeSelector.matchExpressions.scopeName",
        "spec.scopeSelector.matchExpressions.values"]
    assert causes(refused)[1] == ('spec.scopeSelector.matchExpressions.scopeName: Invalid '
                                  'value: "Expensive": unsupported scope')
    status, refused = http("POST", base, {
        "metadata": {"name": "bad"},
        "spec": {"hard": {"cpu": "1"}, "scopes": ["BestEffort", "NotBestEffort"]}})
    assert status == 422
    assert causes(refused) == [
        'spec.scopes: Invalid value: ["BestEffort","NotBestEffort"]: unsupported scope '
        'applied to resource',
        'spec.scopes: Invalid value: ["BestEffort","NotBestEffort"]: conflicting scopes']


# --------------------------------------------------------------------------------------------
# The request log


@pytest.mark.embedded_only("reads the embedded server's audit log")
def test_request_log_records_who_asked_for_what(cluster: BackgroundCluster, http: Http,
                                                namespace: str) -> None:
    server = cluster.cluster.server
    assert cluster.call(lambda: server.audit_log) is None     # off unless asked for
    log: list[AuditRecord] = []
    cluster.call(lambda: setattr(server, "audit_log", log))
    try:
        http("GET", f"/api/v1/namespaces/{namespace}/pods?limit=5",
             headers={"User-Agent": "probe/1"})
        http.raw("GET", "/api/v1/nodes", headers={"Authorization": "Bearer wrong",
                                                  "User-Agent": "intruder/1"})
    finally:
        cluster.call(lambda: setattr(server, "audit_log", None))
    records = cluster.call(lambda: list(log))
    mine = [r for r in records if r.user_agent in ("probe/1", "intruder/1")]
    # Only authenticated requests are recorded, with their query.
    assert mine == [AuditRecord("GET", f"/api/v1/namespaces/{namespace}/pods", {"limit": "5"},
                                "probe/1")]


def test_version_answers_with_a_trailing_slash_and_health_without(api: Any, http: Http,
                                                             server: str) -> None:
    """kube-apiserver serves /version/ (what the official client's VersionApi asks for), but
    not the health paths with a trailing slash; without credentials, only the version and the
    health paths."""
    from kubernetes import client

    info = client.VersionApi(api).get_code()
    # The embedded server says 1.32 on purpose: the kubectl on PATH here is a dispatcher that
    # picks its version by the server's, and has no 1.36 to pick.
    minor = "32" if server == "embedded" else "36"
    assert (info.major, info.minor) == ("1", minor)
    assert info.git_version.startswith(f"v1.{minor}.")
    # RBAC's system:public-info-viewer lets anyone read these paths, exactly these.
    for path in ("/version", "/version/", "/healthz", "/readyz", "/livez"):
        assert http.pool.request("GET", http.base + path).status == 200, path
    for path in ("/healthz/", "/readyz/", "/livez/", "/api/v1/namespaces"):
        assert http.pool.request("GET", http.base + path).status == 403, path
    for path in ("/healthz/", "/readyz/", "/livez/"):
        assert http.raw("GET", path).status == 404, path
