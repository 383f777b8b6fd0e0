"""The WsspSchedulerConfiguration CRD on the embedded API server: the manifest installs, the
schema defaults and rejects what it should, tables show the printer columns, and the status
subresource takes what :func:`status_patch` builds."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from pyscheduler.wasm.resource import (
    CRD_NAME,
    CRD_PATH,
    GROUP,
    KIND,
    PLURAL,
    VERSION,
    StageSpec,
    parse_resource,
    status_patch,
)
from pyscheduler_sim.harness import BackgroundCluster
from tests.conftest import KUBECTL, Http, Kubectl, wait_for

SHA = "0123456789abcdef" * 4
BASE = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
NOW = "2030-01-02T03:04:05Z"


def manifest() -> dict[str, Any]:
    crd = yaml.safe_load(CRD_PATH.read_text())
    assert isinstance(crd, dict)
    return crd


@pytest.fixture(scope="module")
def crd(http: Http, cluster: BackgroundCluster,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The CRD, installed from the manifest file with ``kubectl create -f`` (a POST where kubectl
    is missing); left alone if another test installed it already."""
    if KUBECTL is not None:
        kubectl = Kubectl(cluster.kubeconfig, tmp_path_factory.mktemp("kubectl-cache"))
        out = kubectl("create", "-f", str(CRD_PATH), check=False)
        assert out.returncode == 0 or "AlreadyExists" in out.stderr, out.stderr
        created = out.returncode == 0
    else:
        status, doc = http("POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                           manifest())
        assert status in (201, 409), doc
        created = status == 201
    wait_for(lambda: http("GET", BASE)[0] == 200, what="the CRD to be served")
    yield
    if created:
        http("DELETE", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}")


def resource(name: str, **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"url": "s3://modules/m.wasm", "sha256": SHA,
                            "stages": {"score": {"mode": "extend"}}}
    body.update(spec)
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND, "metadata": {"name": name},
            "spec": body}


@pytest.fixture
def cleanup(http: Http) -> Iterator[list[str]]:
    names: list[str] = []
    yield names
    for name in names:
        http("DELETE", f"{BASE}/{name}")


def create(http: Http, cleanup: list[str], obj: dict[str, Any]) -> tuple[int, Any]:
    status, doc = http("POST", BASE, obj)
    if status == 201:
        cleanup.append(doc["metadata"]["name"])
    return status, doc


def causes(doc: Any) -> dict[str, str]:
    return {c.get("field", ""): c["message"] for c in doc["details"]["causes"]}


def test_the_manifest_is_accepted_and_established(crd: None, http: Http) -> None:
    status, doc = http("GET", f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{CRD_NAME}")
    assert status == 200, doc
    assert {c["type"]: c["status"] for c in doc["status"]["conditions"]} == {
        "NamesAccepted": "True", "Established": "True"}
    status, doc = http("GET", f"/apis/{GROUP}/{VERSION}")
    assert status == 200, doc
    served = {r["name"]: r for r in doc["resources"]}
    assert set(served) == {PLURAL, f"{PLURAL}/status"}
    assert served[PLURAL]["namespaced"] is False
    assert served[PLURAL]["shortNames"] == ["wssp"]


@pytest.mark.kubectl
def test_kubectl_lists_resources_with_printer_columns(crd: None, kubectl: Kubectl,
                                                      cleanup: list[str]) -> None:
    kubectl("create", "-f", "-", input=json.dumps(resource("kubectl-frag-v1.0.0")))
    cleanup.append("kubectl-frag-v1.0.0")
    patch = status_patch("Ready", generation=1, message="serving", digest=SHA,
                         runtime="wasmtime", load_seconds=0.12, now=NOW)
    kubectl("patch", "wssp", "kubectl-frag-v1.0.0", "--subresource=status", "--type=merge",
            "-p", json.dumps(patch))
    lines = kubectl("get", "wssp", "kubectl-frag-v1.0.0").stdout.splitlines()
    assert lines[0].split() == ["NAME", "PHASE", "DIGEST", "RUNTIME", "AGE"]
    assert lines[1].split()[:4] == ["kubectl-frag-v1.0.0", "Ready", SHA[:12], "wasmtime"]
    wide = kubectl("get", "wsspschedulerconfigurations", "-o", "wide").stdout.splitlines()
    assert wide[0].split() == ["NAME", "PHASE", "DIGEST", "RUNTIME", "LOAD-TIME", "URL",
                               "MESSAGE", "AGE"]
    row = next(line.split() for line in wide[1:] if line.startswith("kubectl-frag-v1.0.0"))
    assert row[:7] == ["kubectl-frag-v1.0.0", "Ready", SHA[:12], "wasmtime", "0.120s",
                       "s3://modules/m.wasm", "serving"]
    got = kubectl.json("get", "wssp", "kubectl-frag-v1.0.0")
    assert parse_resource(got).score == StageSpec("extend", 1)
    bad = kubectl("create", "-f", "-", check=False,
                  input=json.dumps(resource("kubectl-bad-v1.0.0", sha256="nope")))
    assert bad.returncode == 1 and "spec.sha256" in bad.stderr, bad.stderr


def test_a_valid_resource_is_stored_with_defaults(crd: None, http: Http,
                                                  cleanup: list[str]) -> None:
    status, doc = create(http, cleanup, resource("gpu-binpack-v1.2.0", config={"tier": "gold"},
                                                 limits={"fuel": 10**12}, extra="pruned"))
    assert status == 201, doc
    spec = doc["spec"]
    assert spec["failurePolicy"] == "Fail" and spec["shadow"] is False
    assert spec["stages"] == {"score": {"mode": "extend", "weight": 1}}
    assert spec["config"] == {"tier": "gold"} and "extra" not in spec
    assert doc["metadata"]["generation"] == 1 and "status" not in doc
    parsed = parse_resource(doc)
    assert (parsed.name, parsed.version, parsed.generation) == ("gpu-binpack", (1, 2, 0), 1)
    assert parsed.uid == doc["metadata"]["uid"] and parsed.limits.fuel == 10**12
    status, listed = http("GET", BASE)
    assert status == 200 and "gpu-binpack-v1.2.0" in {i["metadata"]["name"]
                                                      for i in listed["items"]}


def test_file_urls_need_no_sha256(crd: None, http: Http, cleanup: list[str]) -> None:
    obj = resource("local-v0.1.0", url="file:///opt/fragments/local.wasm",
                   stages={"filter": {"mode": "replace"}})
    del obj["spec"]["sha256"]
    status, doc = create(http, cleanup, obj)
    assert status == 201, doc
    assert parse_resource(doc).sha256 is None


@pytest.mark.parametrize("url", ["s3://modules/m.wasm", "https://example.org/m.wasm"])
def test_remote_urls_need_a_sha256_as_the_crd_rule_says(crd: None, http: Http,
                                                        cleanup: list[str], url: str) -> None:
    """The CRD's validation rule (CEL), evaluated as kube-apiserver evaluates it."""
    obj = resource("unpinned-v1.0.0", url=url)
    del obj["spec"]["sha256"]
    status, doc = create(http, cleanup, obj)
    assert status == 422, doc
    assert causes(doc) == {"spec.sha256": 'Invalid value: sha256 is required for '
                                          "remote URLs (s3://, http(s)://)"}, doc
    assert doc["message"].endswith('spec.sha256: Invalid value: sha256 is required '
                                   "for remote URLs (s3://, http(s)://)"), doc["message"]


@pytest.mark.parametrize(("edit", "field", "message"), [
    pytest.param({"sha256": "ABC"}, "spec.sha256", "should match '^[a-f0-9]{64}$'",
                 id="sha256 pattern"),
    pytest.param({"stages": {"filter": {"mode": "fast"}}}, "spec.stages.filter.mode",
                 'Unsupported value: "fast": supported values: "replace", "extend"',
                 id="mode enum"),
    pytest.param({"url": None}, "spec.url", "Required value", id="missing url"),
    pytest.param({"url": "ftp://x/m.wasm"}, "spec.url", "should match '^(s3|https?|file)://'",
                 id="url scheme"),
    pytest.param({"stages": {}}, "spec.stages",
                 "should have at least 1 properties", id="no stage"),
    pytest.param({"stages": {"score": {"mode": "extend", "weight": 0}}},
                 "spec.stages.score.weight", "should be greater than or equal to 1",
                 id="weight"),
    pytest.param({"limits": {"timeoutMilliseconds": 20000}}, "spec.limits.timeoutMilliseconds",
                 "should be less than or equal to 1000", id="timeout"),
    pytest.param({"limits": {"memoryMiB": 0}}, "spec.limits.memoryMiB",
                 "should be greater than or equal to 1", id="memory"),
    pytest.param({"failurePolicy": "Retry"}, "spec.failurePolicy",
                 'supported values: "Fail", "Ignore", "Default"', id="failurePolicy"),
    pytest.param({"runtime": "v8"}, "spec.runtime", 'supported values: "wasmtime", "wasmer"',
                 id="runtime"),
    pytest.param({"config": "x"}, "spec.config", "must be of type object", id="config"),
    pytest.param({"shadow": "yes"}, "spec.shadow", "must be of type boolean", id="shadow"),
])
def test_schema_rejections_name_the_field(crd: None, http: Http, cleanup: list[str],
                                          edit: dict[str, Any], field: str, message: str) -> None:
    obj = resource("rejected-v1.0.0")
    for key, value in edit.items():
        if value is None:
            del obj["spec"][key]
        else:
            obj["spec"][key] = value
    status, doc = create(http, cleanup, obj)
    assert status == 422, doc
    assert doc["reason"] == "Invalid"
    found = causes(doc)
    assert field in found, found
    assert message in found[field], found


def test_the_name_must_carry_a_version(crd: None, http: Http, cleanup: list[str]) -> None:
    status, doc = create(http, cleanup, resource("gpu-binpack"))
    assert status == 422, doc
    assert "metadata.name" in causes(doc), doc


def test_status_subresource_takes_status_patch(crd: None, http: Http,
                                               cleanup: list[str]) -> None:
    status, doc = create(http, cleanup, resource("status-v2.0.0"))
    assert status == 201, doc
    path = f"{BASE}/status-v2.0.0/status"
    loading = status_patch("Loading", generation=1, message="fetching s3://modules/m.wasm",
                           now="2030-01-01T00:00:00Z")
    status, doc = http("PATCH", path, loading, "application/merge-patch+json")
    assert status == 200, doc
    assert doc["status"]["phase"] == "Loading"
    assert "digest" not in doc["status"]  # nulls removed the unknown fields
    ready = status_patch("Ready", generation=1, message="serving", digest=SHA, runtime="wasmtime",
                         load_seconds=0.25, now=NOW, previous=doc["status"])
    status, doc = http("PATCH", path, ready, "application/merge-patch+json")
    assert status == 200, doc
    assert doc["status"] == {
        "phase": "Ready", "message": "serving", "observedGeneration": 1, "digest": SHA,
        "shortDigest": SHA[:12], "runtime": "wasmtime", "loadTime": "0.250s", "loadedAt": NOW,
        "conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
                        "message": "serving", "lastTransitionTime": NOW,
                        "observedGeneration": 1}]}
    assert doc["metadata"]["generation"] == 1  # status writes do not bump the generation
    failed = status_patch("Failed", generation=1, message="trap", now=NOW,
                          previous=doc["status"])
    status, doc = http("PATCH", path, failed, "application/merge-patch+json")
    assert status == 200, doc
    assert doc["status"]["phase"] == "Failed"
    assert not {"digest", "shortDigest", "runtime", "loadTime", "loadedAt"} & set(doc["status"])
    # A status the schema refuses is refused through the subresource too.
    bad = copy.deepcopy(failed)
    bad["status"]["phase"] = "Exploded"
    status, doc = http("PATCH", path, bad, "application/merge-patch+json")
    assert status == 422 and "status.phase" in causes(doc), doc


def test_spec_changes_bump_the_generation_and_keep_status(crd: None, http: Http,
                                                          cleanup: list[str]) -> None:
    status, doc = create(http, cleanup, resource("gen-v1.0.0"))
    assert status == 201, doc
    patch = status_patch("Ready", generation=1, message="ok", digest=SHA, now=NOW)
    status, _ = http("PATCH", f"{BASE}/gen-v1.0.0/status", patch, "application/merge-patch+json")
    assert status == 200
    status, doc = http("PATCH", f"{BASE}/gen-v1.0.0",
                       {"spec": {"stages": {"score": {"weight": 5}}}},
                       "application/merge-patch+json")
    assert status == 200, doc
    assert doc["metadata"]["generation"] == 2
    assert doc["status"]["observedGeneration"] == 1
    assert parse_resource(doc).score == StageSpec("extend", 5)


@pytest.mark.parametrize("version", ["1.28.0", "latest"])
def test_the_manifest_validates_against_the_kubernetes_openapi(version: str) -> None:
    # Optional: kubernetes-validate carries the API schemas of each Kubernetes release.
    kubernetes_validate = pytest.importorskip("kubernetes_validate")
    if version == "latest":
        version = kubernetes_validate.latest_version()
    kubernetes_validate.validate(manifest(), version, strict=True)
