"""Tests for pyscheduler.wasm.resource: parsing resources, names, selectors and status patches."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from pyscheduler.settings import MAX_CALL_TIMEOUT_MILLISECONDS
from pyscheduler.wasm.resource import (
    CRD_PATH,
    GROUP,
    KIND,
    PHASES,
    PLURAL,
    VERSION,
    FragmentLimits,
    FragmentSpec,
    ResourceError,
    StageSpec,
    parse_resource,
    selector,
    split_name,
    status_patch,
)

SHA = "ab" * 32


def resource(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"url": "s3://modules/gpu.wasm", "sha256": SHA,
                            "stages": {"filter": {"mode": "replace"}}}
    body.update(spec)
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": KIND,
            "metadata": {"name": "gpu-binpack-v1.2.0", "generation": 3, "uid": "u-1"},
            "spec": {k: v for k, v in body.items() if v is not None}}


def problems_of(obj: Any) -> list[str]:
    with pytest.raises(ResourceError) as info:
        parse_resource(obj)
    assert str(info.value) == "\n".join(info.value.problems)
    return list(info.value.problems)


# ---- valid resources ------------------------------------------------------------------------


def test_a_full_resource_parses_into_a_spec() -> None:
    obj = resource(url="https://example.test/m.wasm",
                   stages={"filter": {"mode": "extend"}, "score": {"mode": "replace", "weight": 7}},
                   config={"tier": "gold", "nested": {"list": [1, 2]}},
                   limits={"fuel": 1_000_000, "timeoutMilliseconds": 250, "memoryMiB": 64},
                   failurePolicy="Ignore", shadow=True, runtime="wasmer")
    spec = parse_resource(obj)
    assert spec == FragmentSpec(
        resource_name="gpu-binpack-v1.2.0", name="gpu-binpack", version=(1, 2, 0), generation=3,
        uid="u-1", url="https://example.test/m.wasm", sha256=SHA,
        filter=StageSpec("extend", 1), score=StageSpec("replace", 7),
        config={"tier": "gold", "nested": {"list": [1, 2]}},
        limits=FragmentLimits(fuel=1_000_000, timeout_seconds=0.25, memory_bytes=64 * 2**20),
        failure_policy="Ignore", shadow=True, runtime="wasmer")
    assert spec.remote
    assert spec.config_json == '{"tier":"gold","nested":{"list":[1,2]}}'


def test_defaults_of_a_minimal_resource() -> None:
    obj = {"metadata": {"name": "x-v0.0.1"},
           "spec": {"url": "file:///opt/fragments/x.wasm", "stages": {"score": {"mode": "extend"}}}}
    spec = parse_resource(obj)
    assert (spec.name, spec.version, spec.generation, spec.uid) == ("x", (0, 0, 1), 0, "")
    assert spec.sha256 is None and not spec.remote
    assert spec.filter is None and spec.score == StageSpec("extend", 1)
    assert spec.limits == FragmentLimits(None, None, None)
    assert (spec.failure_policy, spec.shadow, spec.runtime) == ("Fail", False, None)
    assert dict(spec.config) == {} and spec.config_json == "{}"


def test_the_spec_holds_a_private_read_only_copy_of_config() -> None:
    obj = resource(config={"a": {"b": 1}})
    spec = parse_resource(obj)
    obj["spec"]["config"]["a"]["b"] = 2
    assert spec.config["a"]["b"] == 1
    with pytest.raises(TypeError):
        spec.config["c"] = 3  # type: ignore[index]


def test_nulls_mean_absent_and_integral_floats_are_integers() -> None:
    spec = parse_resource(resource(runtime=None, config=None,
                                   limits={"fuel": 5.0, "timeoutMilliseconds": None}))
    assert spec.runtime is None and spec.limits == FragmentLimits(fuel=5)


# ---- invalid resources: every problem, with its field path ------------------------------------

NAME_RULE = ("must be <name>-v<major>.<minor>.<patch> (e.g. gpu-binpack-v1.2.0), where <name> is "
             "lowercase letters, digits and '-', starting and ending with a letter or digit, and "
             "the version numbers have no leading zeros; at most 253 characters; got ")


def renamed(name: Any) -> dict[str, Any]:
    obj = resource()
    obj["metadata"]["name"] = name
    return obj


def edited(edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    obj = resource()
    edit(obj)
    return obj


@pytest.mark.parametrize(("obj", "expected"), [
    pytest.param(renamed("gpu-binpack"), [f'metadata.name: {NAME_RULE}"gpu-binpack"'],
                 id="name without version"),
    pytest.param(renamed("gpu-binpack-v1.2"), [f'metadata.name: {NAME_RULE}"gpu-binpack-v1.2"'],
                 id="two-part version"),
    pytest.param(renamed("gpu-binpack-v1.02.0"),
                 [f'metadata.name: {NAME_RULE}"gpu-binpack-v1.02.0"'], id="leading zero"),
    pytest.param(renamed("GPU-v1.0.0"), [f'metadata.name: {NAME_RULE}"GPU-v1.0.0"'],
                 id="uppercase"),
    pytest.param(renamed("-v1.0.0"), [f'metadata.name: {NAME_RULE}"-v1.0.0"'], id="empty name"),
    pytest.param(renamed("a" * 250 + "-v1.0.0"),
                 [f'metadata.name: {NAME_RULE}"{"a" * 76}...'], id="too long"),
    pytest.param(renamed(None), ["metadata.name: required"], id="no name"),
    pytest.param(edited(lambda o: o.pop("spec")), ["spec: required"], id="no spec"),
    pytest.param(edited(lambda o: o.update(spec=[])), ["spec: must be an object, got a list"],
                 id="spec not an object"),
    pytest.param(edited(lambda o: o.update(kind="Pod", apiVersion="v1")),
                 ['kind: must be WsspSchedulerConfiguration, got "Pod"',
                  'apiVersion: must be wssp.pyscheduler.io/v1alpha1, got "v1"'], id="wrong kind"),
    pytest.param(edited(lambda o: o["metadata"].update(generation=-1, uid=7)),
                 ["metadata.generation: must be a non-negative integer, got -1",
                  "metadata.uid: must be a string, got 7"], id="bad metadata"),
    pytest.param(resource(url=None), ["spec.url: required"], id="no url"),
    pytest.param(resource(url=5), ["spec.url: must be a string, got 5"], id="url not a string"),
    pytest.param(resource(url="ftp://host/m.wasm"),
                 ['spec.url: must start with s3://, https://, http:// or file://, '
                  'got "ftp://host/m.wasm"'], id="bad scheme"),
    pytest.param(resource(url="s3://modules"),
                 ['spec.url: must be s3://<bucket>/<key>, got "s3://modules"'], id="s3 no key"),
    pytest.param(resource(url="https:///m.wasm"),
                 ['spec.url: must be https://<host>/<path>, got "https:///m.wasm"'],
                 id="https no host"),
    pytest.param(resource(url="http://host:99999/m.wasm"),
                 ['spec.url: is not a valid URL (Port out of range 0-65535), '
                  'got "http://host:99999/m.wasm"'], id="bad port"),
    pytest.param(resource(url="file://other/x.wasm"),
                 ['spec.url: must be file:///<absolute path>, got "file://other/x.wasm"'],
                 id="file with a host"),
    pytest.param(resource(url="s3://b/k y"),
                 ['spec.url: must not contain white space, got "s3://b/k y"'], id="space"),
    pytest.param(resource(sha256=None),
                 ["spec.sha256: required for remote URLs (s3://, http(s)://)"], id="s3 no sha"),
    pytest.param(resource(sha256=None, url="http://h/m.wasm"),
                 ["spec.sha256: required for remote URLs (s3://, http(s)://)"], id="http no sha"),
    pytest.param(resource(sha256="AB" * 32),
                 [f'spec.sha256: must be 64 lowercase hex digits, got "{"AB" * 32}"'],
                 id="uppercase sha"),
    pytest.param(resource(sha256="abc"),
                 ['spec.sha256: must be 64 lowercase hex digits, got "abc"'], id="short sha"),
    pytest.param(resource(stages=None),
                 ["spec.stages: required (at least one of filter, score)"], id="no stages"),
    pytest.param(resource(stages={}),
                 ["spec.stages: must configure at least one of filter, score, prefilter, postfilter, reserve, unreserve, permit, prebind, postbind"], id="empty stages"),
    pytest.param(resource(stages={"bind": {"mode": "replace"}}),
                 ["spec.stages.bind: unknown field; known fields: filter, score, prefilter, postfilter, reserve, unreserve, permit, prebind, postbind",
                  "spec.stages: must configure at least one of filter, score, prefilter, postfilter, reserve, unreserve, permit, prebind, postbind"],
                 id="unknown stage"),
    pytest.param(resource(stages={"prefilter": {"mode": "replace"}}),
                 ['spec.stages.prefilter.mode: must be extend (the only mode of this stage), '
                  'got "replace"'], id="prefilter replace"),
    pytest.param(resource(stages={"postfilter": {"mode": "extend"}}),
                 ['spec.stages.postfilter.mode: must be replace (the only mode of this stage), '
                  'got "extend"'], id="postfilter extend"),
    pytest.param(resource(stages={"permit": {"timeout": 5}}),
                 ["spec.stages.permit.timeout: unknown field; known fields: mode"],
                 id="permit unknown field"),
    pytest.param(resource(stages={"prebind": {"allowedLabels": "team"}}),
                 ['spec.stages.prebind.allowedLabels: must be a list of keys, got "team"'],
                 id="allowlist not a list"),
    pytest.param(resource(stages={"prebind": {"allowedLabels": ["ok/*", "Bad Key"],
                                               "allowedAnnotations": ["wssp/decision",
                                                                      "node.kubernetes.io/*",
                                                                      "k8s.io/x"]}}),
                 ["spec.stages.prebind.allowedLabels[1]: 'Bad Key' is not a key or prefix/*: "
                  "name part must consist of alphanumeric characters, '-', '_' or '.', and "
                  "must start and end with an alphanumeric character (e.g. 'MyName',  or "
                  "'my.name',  or '123-abc', regex used for validation is "
                  "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
                  "spec.stages.prebind.allowedAnnotations[0]: 'wssp/decision': keys under "
                  "wssp/, kubernetes.io and k8s.io are the scheduler's and Kubernetes' own",
                  "spec.stages.prebind.allowedAnnotations[1]: 'node.kubernetes.io/*': keys "
                  "under wssp/, kubernetes.io and k8s.io are the scheduler's and Kubernetes' "
                  "own",
                  "spec.stages.prebind.allowedAnnotations[2]: 'k8s.io/x': keys under wssp/, "
                  "kubernetes.io and k8s.io are the scheduler's and Kubernetes' own"],
                 id="bad allowlist entries"),
    pytest.param(resource(stages={"prebind": {"allowedLabels": [f"k{i}" for i in range(65)]}}),
                 ["spec.stages.prebind.allowedLabels: at most 64 entries, got 65"],
                 id="allowlist too long"),
    pytest.param(resource(stages={"filter": {}}),
                 ["spec.stages.filter.mode: required (one of replace, extend)"], id="no mode"),
    pytest.param(resource(stages={"filter": {"mode": "Replace"}}),
                 ['spec.stages.filter.mode: must be one of replace, extend, got "Replace"'],
                 id="bad mode"),
    pytest.param(resource(stages={"filter": {"mode": "extend", "weight": 2}}),
                 ["spec.stages.filter.weight: unknown field; known fields: mode"],
                 id="filter weight"),
    pytest.param(resource(stages={"score": "extend"}),
                 ['spec.stages.score: must be an object, got "extend"'], id="stage not object"),
    pytest.param(resource(stages={"score": {"mode": "extend", "weight": 0}}),
                 ["spec.stages.score.weight: must be an integer between 1 and 100, got 0"],
                 id="weight 0"),
    pytest.param(resource(stages={"score": {"mode": "extend", "weight": 101}}),
                 ["spec.stages.score.weight: must be an integer between 1 and 100, got 101"],
                 id="weight 101"),
    pytest.param(resource(stages={"score": {"mode": "extend", "weight": True}}),
                 ["spec.stages.score.weight: must be an integer between 1 and 100, got true"],
                 id="weight bool"),
    pytest.param(resource(limits={"fuel": 0, "timeoutMilliseconds": 1001, "memoryMiB": "1Gi"}),
                 ["spec.limits.fuel: must be an integer of at least 1, got 0",
                  "spec.limits.timeoutMilliseconds: must be an integer between 1 and 1000, "
                  "got 1001",
                  'spec.limits.memoryMiB: must be an integer between 1 and 4096, got "1Gi"'],
                 id="bad limits"),
    pytest.param(resource(limits={"cpu": 1}),
                 ["spec.limits.cpu: unknown field; known fields: fuel, timeoutMilliseconds, "
                  "memoryMiB"], id="unknown limit"),
    pytest.param(resource(limits=[]), ["spec.limits: must be an object, got a list"],
                 id="limits not object"),
    pytest.param(resource(failurePolicy="fail"),
                 ['spec.failurePolicy: must be one of Fail, Ignore, Default, got "fail"'],
                 id="bad failurePolicy"),
    pytest.param(resource(shadow="yes"), ['spec.shadow: must be true or false, got "yes"'],
                 id="bad shadow"),
    pytest.param(resource(runtime="wazero"),
                 ['spec.runtime: must be one of wasmtime, wasmer, got "wazero"'], id="bad runtime"),
    pytest.param(resource(config="tier=gold"),
                 ['spec.config: must be an object, got "tier=gold"'], id="config string"),
    pytest.param(resource(config=[1]), ["spec.config: must be an object, got a list"],
                 id="config list"),
    pytest.param(resource(config={"x": float("nan")}),
                 ["spec.config: must hold only JSON values (objects, lists, strings, finite "
                  "numbers, true, false, null)"], id="config NaN"),
    pytest.param(resource(config={"when": object()}),
                 ["spec.config: must hold only JSON values (objects, lists, strings, finite "
                  "numbers, true, false, null)"], id="config object"),
    pytest.param(resource(urll="s3://b/k"),
                 ["spec.urll: unknown field; known fields: url, sha256, stages, config, limits, "
                  "failurePolicy, shadow, runtime"], id="unknown spec field"),
    pytest.param(["not", "an", "object"], ["<resource>: must be an object, got a list"],
                 id="not an object"),
])
def test_invalid_resources_name_every_problem(obj: Any, expected: list[str]) -> None:
    assert problems_of(obj) == expected


def test_all_problems_are_reported_together() -> None:
    obj = resource(url="gopher://x", sha256="nope", stages={"score": {"mode": "x", "weight": 0}},
                   failurePolicy="Never", runtime="v8")
    obj["metadata"]["name"] = "Bad"
    problems = problems_of(obj)
    assert [p.split(":", 1)[0] for p in problems] == [
        "metadata.name", "spec.url", "spec.sha256", "spec.stages.score.mode",
        "spec.stages.score.weight", "spec.failurePolicy", "spec.runtime"]
    with pytest.raises(ResourceError) as info:
        parse_resource(obj)
    assert info.value.resource_name == "Bad"
    assert isinstance(info.value, ValueError)


# ---- names and selectors ----------------------------------------------------------------------


@pytest.mark.parametrize(("name", "expected"), [
    ("gpu-binpack-v1.2.0", ("gpu-binpack", (1, 2, 0))),
    ("a-v0.0.0", ("a", (0, 0, 0))),
    ("x1-v10.20.30", ("x1", (10, 20, 30))),
    ("fragment-v2-v3.0.1", ("fragment-v2", (3, 0, 1))),
    ("gpu-binpack", None),
    ("gpu-binpack-v1.2", None),
    ("gpu-binpack-1.2.0", None),
    ("gpu-binpack-v1.2.0-rc1", None),
    ("gpu-binpack-v01.2.0", None),
    ("gpu.binpack-v1.2.0", None),
    ("gpu-binpack-v１.2.0", None),  # a full-width digit is not a digit here
    ("a" * 247 + "-v1.0.0", None),
])
def test_split_name(name: str, expected: Any) -> None:
    assert split_name(name) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("gpu-binpack-v1.2.0", ("gpu-binpack", (1, 2, 0))),
    ("gpu-binpack", ("gpu-binpack", None)),
    ("default:v1.0.0", ("default", (1, 0, 0))),
    ("gpu-binpack:v1.2.0", ("gpu-binpack", (1, 2, 0))),
    ("  gpu-binpack-v1.2.0\n", ("gpu-binpack", (1, 2, 0))),
    ("gpu-v1", ("gpu-v1", None)),
])
def test_selector_forms(text: str, expected: Any) -> None:
    assert selector(text) == expected


@pytest.mark.parametrize("text", [
    "", "GPU", "gpu-binpack:1.2.0", "gpu-binpack:v1.2", "gpu_binpack", "gpu-binpack-v1.2.0:v1.0.0",
    "gpu-binpack@v1.2.0", "default:v1.00.0", "-gpu", "a/b",
])
def test_selector_rejects_anything_else(text: str) -> None:
    with pytest.raises(ValueError) as info:
        selector(text)
    assert str(info.value) == (
        f"invalid fragment reference {json.dumps(text)}: expected "
        "<name>-v<major>.<minor>.<patch> (e.g. gpu-binpack-v1.2.0), "
        "<name>:v<major>.<minor>.<patch> (e.g. gpu-binpack:v1.2.0) or a bare <name> for the "
        "newest Ready version, where <name> is lowercase letters, digits and '-', starting and "
        "ending with a letter or digit")


def test_selector_rejects_non_strings() -> None:
    with pytest.raises(ValueError, match="must be a string, got 5"):
        selector(5)  # type: ignore[arg-type]


# ---- status patches ---------------------------------------------------------------------------

NOW = "2030-01-02T03:04:05Z"


def test_status_patch_when_ready() -> None:
    patch = status_patch("Ready", generation=4, message="serving", digest=SHA, runtime="wasmtime",
                         load_seconds=0.1204, now=NOW)
    assert patch == {"status": {
        "phase": "Ready", "message": "serving", "observedGeneration": 4,
        "conditions": [{"type": "Ready", "status": "True", "reason": "Ready",
                        "message": "serving", "lastTransitionTime": NOW,
                        "observedGeneration": 4}],
        "digest": SHA, "shortDigest": SHA[:12], "runtime": "wasmtime", "loadTime": "0.120s",
        "loadedAt": NOW, "nextAttemptAt": None}}


def test_status_patch_of_a_quarantine_keeps_what_the_load_recorded() -> None:
    patch = status_patch("Quarantined", generation=4, message="5 consecutive failed calls",
                         digest=SHA, runtime="wasmtime", now=NOW,
                         next_attempt="2030-01-01T00:00:30Z")
    status = patch["status"]
    assert status["phase"] == "Quarantined" and status["conditions"][0]["status"] == "False"
    assert status["conditions"][0]["reason"] == "Quarantined"
    assert status["nextAttemptAt"] == "2030-01-01T00:00:30Z"
    # A quarantine is not a load: the load's time and moment stay as they were.
    assert "loadTime" not in status and "loadedAt" not in status
    back = status_patch("Ready", generation=4, message="serving", digest=SHA,
                        runtime="wasmtime", now=NOW, previous=status)["status"]
    assert back["nextAttemptAt"] is None and "loadedAt" not in back


def test_status_patch_when_failed_clears_what_is_unknown() -> None:
    patch = status_patch("Failed", generation=1, message="sha256 mismatch", now=NOW)
    status = patch["status"]
    assert status["conditions"][0]["status"] == "False"
    assert status["conditions"][0]["reason"] == "Failed"
    for key in ("digest", "shortDigest", "runtime", "loadTime", "loadedAt"):
        assert key in status and status[key] is None  # null removes the field in a merge patch


def test_status_patch_keeps_the_transition_time_while_the_condition_holds() -> None:
    earlier = status_patch("Loading", generation=1, message="fetching", now="2030-01-01T00:00:00Z")
    again = status_patch("Failed", generation=2, message="bad", now=NOW,
                         previous=earlier["status"])
    assert again["status"]["conditions"][0]["lastTransitionTime"] == "2030-01-01T00:00:00Z"
    ready = status_patch("Ready", generation=2, message="ok", now=NOW, previous=again["status"])
    assert ready["status"]["conditions"][0]["lastTransitionTime"] == NOW


def test_status_patch_cuts_long_messages_and_checks_its_arguments() -> None:
    patch = status_patch("Failed", generation=1, message="x" * 40000, now=NOW)
    assert len(patch["status"]["message"]) == 32768
    assert patch["status"]["message"].endswith("...")
    with pytest.raises(ValueError, match="phase must be one of Pending, Loading, Ready, Quarantined, Failed"):
        status_patch("Done", generation=1, message="", now=NOW)
    with pytest.raises(ValueError, match="generation"):
        status_patch("Ready", generation=-1, message="", now=NOW)


# ---- the manifest agrees with the parser ------------------------------------------------------


def test_the_crd_manifest_matches_the_constants() -> None:
    crd = yaml.safe_load(CRD_PATH.read_text())
    assert crd["metadata"]["name"] == f"{PLURAL}.{GROUP}"
    assert crd["spec"]["group"] == GROUP and crd["spec"]["scope"] == "Cluster"
    assert crd["spec"]["names"]["kind"] == KIND and crd["spec"]["names"]["plural"] == PLURAL
    [version] = crd["spec"]["versions"]
    assert version["name"] == VERSION and version["served"] and version["storage"]
    schema = version["schema"]["openAPIV3Schema"]["properties"]
    spec = schema["spec"]["properties"]
    assert spec["failurePolicy"]["enum"] == ["Fail", "Ignore", "Default"]
    assert spec["runtime"]["enum"] == ["wasmtime", "wasmer"]
    assert schema["status"]["properties"]["phase"]["enum"] == list(PHASES) == [
        "Pending", "Loading", "Ready", "Quarantined", "Failed"]
    # The longest call deadline a resource may ask for is the scheduler's own ceiling.
    limits = spec["limits"]["properties"]
    assert limits["timeoutMilliseconds"]["maximum"] == MAX_CALL_TIMEOUT_MILLISECONDS
    assert MAX_CALL_TIMEOUT_MILLISECONDS <= 1000  # well under any lease renew deadline


def test_the_name_pattern_in_the_manifest_agrees_with_split_name() -> None:
    import re

    crd = yaml.safe_load(CRD_PATH.read_text())
    pattern = re.compile(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
        "metadata"]["properties"]["name"]["pattern"])
    for name in ("gpu-binpack-v1.2.0", "a-v0.0.0", "gpu-binpack", "gpu-binpack-v01.2.0",
                 "x-v1.2.3.4", "X-v1.0.0", "gpu-binpack-v1.2.0-rc1"):
        assert bool(pattern.search(name)) == (split_name(name) is not None), name


def test_specs_are_frozen() -> None:
    spec = parse_resource(copy.deepcopy(resource()))
    with pytest.raises(AttributeError):
        spec.url = "s3://other/k"  # type: ignore[misc]


def test_lifecycle_stages_parse_with_their_one_mode_and_the_prebind_allowlist() -> None:
    spec = parse_resource(resource(stages={
        "permit": None, "postfilter": {}, "reserve": {"mode": "extend"},
        "prebind": {"allowedLabels": ["team", "example.com/*"],
                    "allowedAnnotations": ["example.com/owner"]}}))
    assert spec.filter is None and spec.score is None
    assert {k: v.mode for k, v in spec.lifecycle.items()} == {
        "permit": "extend", "postfilter": "replace", "reserve": "extend", "prebind": "extend"}
    prebind = spec.lifecycle["prebind"]
    assert prebind.allows("label", "team") and prebind.allows("label", "example.com/gpu")
    assert not prebind.allows("label", "team2") and not prebind.allows("label", "example.org/a")
    assert not prebind.allows("annotation", "team")
    assert prebind.allows("annotation", "example.com/owner")
    # Keys that are the scheduler's or Kubernetes' own never pass, whatever a list says.
    assert not StageSpec("extend", allowed_labels=("wssp/*",)).allows("label",
                                                                       "wssp/virtual-node")
    assert not StageSpec("extend", allowed_labels=("topology.kubernetes.io/zone",)).allows(
        "label", "topology.kubernetes.io/zone")
