"""Bad input gets kube-apiserver's Status object and code; nothing stored is lost. (An unserved
group's path answers plain text: see test_server_parity.)"""

from __future__ import annotations

import json
from typing import Any

import pytest
import urllib3

from tests.conftest import AnyCluster


def request(cluster: AnyCluster, method: str, path: str, body: bytes | None = None,
            content_type: str = "application/json") -> tuple[int, dict[str, Any]]:
    http = urllib3.PoolManager(ca_certs=str(cluster.ca_file))
    r = http.request(method, cluster.url + path, body=body,
                     headers={"Authorization": f"Bearer {cluster.token}",
                              "Content-Type": content_type})
    return r.status, json.loads(r.data)


POD = b'{"metadata":{"name":"ok"},"spec":{"containers":[{"name":"c","image":"x"}]}}'


@pytest.mark.parametrize("method, path, body, content_type, code, reason", [
    pytest.param("POST", "/api/v1/namespaces/default/pods", b"{not json", "application/json",
                 400, "BadRequest", id="malformed JSON"),
    pytest.param("GET", "/api/v1/namespaces/default/widgets", None, "application/json",
                 404, "NotFound", id="unknown resource"),
    pytest.param("POST", "/api/v1/namespaces/default/pods",
                 b'{"metadata":{"name":"Bad_Name"},"spec":{"containers":[{"name":"c",'
                 b'"image":"x"}]}}', "application/json", 422, "Invalid", id="invalid name"),
    pytest.param("POST", "/api/v1/namespaces/default/pods",
                 b'{"metadata":{"name":"nocontainers"},"spec":{}}', "application/json",
                 422, "Invalid", id="pod without containers"),
    pytest.param("POST", "/api/v1/namespaces/default/pods",
                 b'{"metadata":{"name":"q"},"spec":{"containers":[{"name":"c","image":"x",'
                 b'"resources":{"requests":{"cpu":"lots"}}}]}}', "application/json",
                 400, "BadRequest", id="bad quantity (refused as it is decoded)"),
    pytest.param("POST", "/api/v1/namespaces/default/pods",
                 b'{"metadata":{"name":"l","labels":{"bad key":"v"}},"spec":{"containers":'
                 b'[{"name":"c","image":"x"}]}}', "application/json", 422, "Invalid",
                 id="bad label key"),
    pytest.param("POST", "/api/v1/namespaces/nowhere/pods", POD, "application/json",
                 404, "NotFound", id="namespace does not exist"),
    pytest.param("PUT", "/api/v1/namespaces/default/pods", POD, "application/json",
                 405, "MethodNotAllowed", id="PUT on a collection"),
    pytest.param("PATCH", "/api/v1/namespaces/default/configmaps/kube-root", b"{}",
                 "application/merge-patch+json", 404, "NotFound", id="patch missing object"),
    pytest.param("POST", "/api/v1/namespaces/default/pods", b'{"kind":"Service",'
                 b'"apiVersion":"v1","metadata":{"name":"x"}}', "application/json",
                 400, "BadRequest", id="wrong kind for the resource"),
    pytest.param("POST", "/api/v1/namespaces/default/pods", b"[1,2]", "application/json",
                 400, "BadRequest", id="body that is not an object"),
    pytest.param("GET", "/api/v1/pods?labelSelector=a%20in", None, "application/json",
                 400, "BadRequest", id="bad label selector"),
    pytest.param("GET", "/api/v1/pods?limit=x", None, "application/json",
                 400, "BadRequest", id="bad limit"),
])
def test_bad_requests_get_kube_status(cluster: AnyCluster, method: str, path: str,
                                      body: bytes | None, content_type: str, code: int,
                                      reason: str) -> None:
    status, doc = request(cluster, method, path, body, content_type)
    assert (status, doc["kind"], doc["status"], doc["reason"], doc["code"]) == (
        code, "Status", "Failure", reason, code), doc
    assert doc["message"]


def test_invalid_reports_causes_with_fields(cluster: AnyCluster) -> None:
    status, doc = request(cluster, "POST", "/api/v1/namespaces/default/pods",
                          b'{"metadata":{"name":"Bad_Name"},"spec":{"containers":[]}}')
    assert status == 422
    assert doc["message"].startswith('Pod "Bad_Name" is invalid: [')
    fields = {c["field"] for c in doc["details"]["causes"]}
    assert {"metadata.name", "spec.containers"} <= fields
    assert doc["details"]["kind"] == "Pod" and doc["details"]["name"] == "Bad_Name"


def test_unsupported_patch_type(cluster: AnyCluster) -> None:
    request(cluster, "POST", "/api/v1/namespaces/default/configmaps",
            b'{"metadata":{"name":"patchme"}}')
    status, doc = request(cluster, "PATCH", "/api/v1/namespaces/default/configmaps/patchme",
                          b"{}", "text/plain")
    assert status == 415 and doc["reason"] == "UnsupportedMediaType"


def test_oversized_body_is_rejected_and_nothing_is_lost(cluster: AnyCluster) -> None:
    status, before = request(cluster, "GET", "/api/v1/namespaces/default/configmaps")
    big = b'{"metadata":{"name":"big"},"data":{"x":"' + b"a" * (4 * 1024 * 1024) + b'"}}'
    status, doc = request(cluster, "POST", "/api/v1/namespaces/default/configmaps", big)
    assert status == 413 and doc["reason"] == "RequestEntityTooLarge"
    status, after = request(cluster, "GET", "/api/v1/namespaces/default/configmaps")
    assert [i["metadata"]["name"] for i in after["items"]] == [
        i["metadata"]["name"] for i in before["items"]]
    # The server still serves.
    status, _ = request(cluster, "GET", "/version")
    assert status == 200


def test_discovery_documents(cluster: AnyCluster) -> None:
    status, doc = request(cluster, "GET", "/api")
    assert doc["kind"] == "APIVersions" and doc["versions"] == ["v1"]
    status, doc = request(cluster, "GET", "/api/v1")
    names = {r["name"] for r in doc["resources"]}
    assert {"pods", "pods/binding", "pods/eviction", "pods/status", "nodes", "events",
            "namespaces", "configmaps", "secrets"} <= names
    status, doc = request(cluster, "GET", "/apis")
    groups = {g["name"] for g in doc["groups"]}
    assert {"apps", "policy", "coordination.k8s.io", "events.k8s.io",
            "apiextensions.k8s.io"} <= groups
    http = urllib3.PoolManager(ca_certs=str(cluster.ca_file))
    r = http.request("GET", cluster.url + "/apis", headers={
        "Authorization": f"Bearer {cluster.token}",
        "Accept": "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,"
                  "application/json"})
    assert "as=APIGroupDiscoveryList" in r.headers["Content-Type"]
    agg = json.loads(r.data)
    assert agg["kind"] == "APIGroupDiscoveryList"
    apps = [g for g in agg["items"] if g["metadata"]["name"] == "apps"][0]
    res = {r["resource"]: r for r in apps["versions"][0]["resources"]}
    assert {s["subresource"] for s in res["deployments"]["subresources"]} == {"status", "scale"}
