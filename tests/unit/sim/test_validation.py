"""Tests for pyscheduler.api.validation: kube-apiserver's rules and exact messages."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from pyscheduler.api.validation import (
    DUPLICATE,
    FORBIDDEN,
    INVALID,
    NOT_SUPPORTED,
    REQUIRED,
    TOO_LONG,
    FieldError,
    aggregate_message,
    go_quote,
    invalid_message,
    is_dns1123_label,
    is_qualified_name,
    status_causes,
    validate_annotations,
    validate_dns1123_label,
    validate_dns1123_subdomain,
    validate_labels,

)
from pyscheduler_sim.validation import (
    UndecodableValue,
    validate_generic,
    validate_namespace,
    validate_node,
    validate_object_meta,
    validate_pod,
    validate_pod_spec,
    validate_resource_list,
)

SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
NAME_PART_MSG = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_MSG = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used "
    "for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
@dataclass(frozen=True)
class Undecodable:
    """A value kube-apiserver refuses while decoding (400), before any validation."""

    why: str


def outcome(validate: Callable[[], list[FieldError]]) -> list[str] | Undecodable:
    try:
        return messages(validate())
    except UndecodableValue as exc:
        return Undecodable(str(exc))


QUANTITY_MSG = "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"


def messages(errs: list[FieldError]) -> list[str]:
    return [e.message for e in errs]


def valid_pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "web-1",
            "namespace": "default",
            "labels": {"app": "web", "example.com/tier": "front_end-1.0"},
            "annotations": {"Example.COM/Note": "anything goes here"},
            "finalizers": ["example.com/cleanup", "orphan"],
            "ownerReferences": [
                {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "uid": "1234", "controller": True}
            ],
        },
        "spec": {
            "containers": [
                {
                    "name": "app",
                    "image": "nginx:1.25",
                    "ports": [{"name": "http", "containerPort": 80, "protocol": "TCP"}, {"containerPort": 53,
                                                                                         "protocol": "UDP",
                                                                                         "hostPort": 5353}],
                    "resources": {
                        "requests": {"cpu": "100m", "memory": "128Mi", "example.com/gpu": "1"},
                        "limits": {"cpu": 1, "memory": "1Gi", "example.com/gpu": "1"},
                    },
                }
            ],
            "initContainers": [{"name": "init", "image": "busybox"}],
            "restartPolicy": "OnFailure",
            "nodeSelector": {"kubernetes.io/os": "linux", "disk": ""},
            "nodeName": "node-1.example",
            "schedulerName": "pyscheduler",
            "priority": 1000,
            "priorityClassName": "high",
            "hostNetwork": False,
            "tolerations": [
                {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                 "tolerationSeconds": 300},
                {"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"},
                {"operator": "Exists"},
            ],
            "overhead": {"cpu": "250m", "memory": "120Mi"},
        },
    }


# ---------------------------------------------------------------- rendering


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        pytest.param(FieldError(INVALID, "metadata.name", "x", "bad"), 'metadata.name: Invalid value: "x": bad',
                     id="invalid-string"),
        pytest.param(FieldError(INVALID, "a", 70000, "too big"), "a: Invalid value: 70000: too big", id="invalid-int"),
        pytest.param(FieldError(INVALID, "a", True, "d"), "a: Invalid value: true: d", id="invalid-bool"),
        pytest.param(FieldError(INVALID, "a", None, "d"), 'a: Invalid value: "null": d', id="invalid-null"),
        pytest.param(FieldError(INVALID, "a", 1.5, "d"), "a: Invalid value: 1.5: d", id="invalid-float"),
        pytest.param(FieldError(INVALID, "a", 1e6, "d"), "a: Invalid value: 1e+06: d", id="invalid-large-float"),
        pytest.param(FieldError(INVALID, "a", 80.0, "d"), "a: Invalid value: 80: d", id="invalid-whole-float"),
        pytest.param(FieldError(INVALID, "a", ["x", "y"], "d"), 'a: Invalid value: ["x","y"]: d',
                     id="invalid-string-list"),
        pytest.param(FieldError(INVALID, "a", {"k": 1}, "d"), 'a: Invalid value: {"k":1}: d', id="invalid-object"),
        pytest.param(FieldError(INVALID, "a", 'q"\\\n\x01é', ""), 'a: Invalid value: "q\\"\\\\\\n\\x01é"',
                     id="go-quoting"),
        pytest.param(FieldError(REQUIRED, "spec.containers", "", ""), "spec.containers: Required value",
                     id="required"),
        pytest.param(FieldError(REQUIRED, "metadata.name", "", "name or generateName is required"),
                     "metadata.name: Required value: name or generateName is required", id="required-detail"),
        pytest.param(FieldError(DUPLICATE, "spec.containers[1].name", "app", ""),
                     'spec.containers[1].name: Duplicate value: "app"', id="duplicate"),
        pytest.param(FieldError(NOT_SUPPORTED, "p", "X", 'supported values: "A", "B"'),
                     'p: Unsupported value: "X": supported values: "A", "B"', id="not-supported"),
        pytest.param(FieldError(FORBIDDEN, "metadata.namespace", "", "not allowed on this type"),
                     "metadata.namespace: Forbidden: not allowed on this type", id="forbidden"),
        pytest.param(FieldError(TOO_LONG, "metadata.annotations", "", "must have at most 262144 bytes"),
                     "metadata.annotations: Too long: must have at most 262144 bytes", id="too-long"),
    ],
)
def test_message_rendering(error: FieldError, expected: str) -> None:
    assert error.message == expected
    assert str(error) == expected
    assert error.body == expected.split(": ", 1)[1]


def test_field_error_is_frozen_and_slotted() -> None:
    err = FieldError(INVALID, "a", 1, "d")
    with pytest.raises(AttributeError):
        err.detail = "x"  # type: ignore[misc]
    assert not hasattr(err, "__dict__")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("plain", '"plain"', id="plain"),
        pytest.param("tab\there", '"tab\\there"', id="tab"),
        pytest.param("\x7f", '"\\x7f"', id="del"),
        pytest.param("\u00a0", '"\\u00a0"', id="nbsp"),
        pytest.param("日本", '"日本"', id="printable-unicode"),
        pytest.param("\U0001f600", '"\U0001f600"', id="emoji"),
    ],
)
def test_go_quote(text: str, expected: str) -> None:
    assert go_quote(text) == expected


# ---------------------------------------------------------------- formats


@pytest.mark.parametrize(
    ("func", "value", "expected"),
    [
        pytest.param(validate_dns1123_subdomain, "example.com", [], id="subdomain-ok"),
        pytest.param(validate_dns1123_subdomain, "Foo_1",
                     [f'metadata.name: Invalid value: "Foo_1": {SUBDOMAIN_MSG}'], id="subdomain-bad"),
        pytest.param(validate_dns1123_subdomain, "a" * 254,
                     [f'metadata.name: Invalid value: "{"a" * 254}": must be no more than 253 characters'],
                     id="subdomain-too-long"),
        pytest.param(validate_dns1123_label, "my-name", [], id="label-ok"),
        pytest.param(validate_dns1123_label, "a.b", ['metadata.name: Invalid value: "a.b": must not contain dots'],
                     id="label-dots"),
        pytest.param(validate_dns1123_label, "-x", [f'metadata.name: Invalid value: "-x": {LABEL_MSG}'],
                     id="label-bad"),
        pytest.param(validate_dns1123_label, "a" * 64,
                     [f'metadata.name: Invalid value: "{"a" * 64}": must be no more than 63 characters'],
                     id="label-too-long"),
        pytest.param(validate_dns1123_label, 5, ['metadata.name: Invalid value: 5: must be a string'],
                     id="label-not-string"),
    ],
)
def test_name_formats(func: Any, value: object, expected: list[str]) -> None:
    assert messages(func(value, "metadata.name")) == expected


@pytest.mark.parametrize(
    ("key", "expected"),
    [
        pytest.param("app", [], id="simple"),
        pytest.param("example.com/App_1.x", [], id="prefixed"),
        pytest.param("bad key", [NAME_PART_MSG], id="space"),
        pytest.param("/x", ["prefix part must be non-empty"], id="empty-prefix"),
        pytest.param("Example.com/x", ["prefix part " + SUBDOMAIN_MSG], id="bad-prefix"),
        pytest.param("a/", ["name part must be non-empty", NAME_PART_MSG], id="empty-name"),
        pytest.param("a" * 64, ["name part must be no more than 63 characters"], id="long-name"),
        pytest.param("a/b/c", [
            "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
            "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and "
            "'/' (e.g. 'example.com/MyName')"], id="two-slashes"),
    ],
)
def test_qualified_name(key: str, expected: list[str]) -> None:
    assert is_qualified_name(key) == expected


def test_is_dns1123_label_returns_fresh_lists() -> None:
    first = is_dns1123_label("A")
    first.append("mutated")
    assert is_dns1123_label("A") == [LABEL_MSG]


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        pytest.param(None, [], id="absent"),
        pytest.param({}, [], id="empty"),
        pytest.param({"app": "web", "empty": ""}, [], id="valid"),
        pytest.param({"bad key": "x"}, [f'metadata.labels: Invalid value: "bad key": {NAME_PART_MSG}'], id="key"),
        pytest.param({"a": "b c"}, [f'metadata.labels: Invalid value: "b c": {LABEL_VALUE_MSG}'], id="value"),
        pytest.param({"a": "v" * 64},
                     [f'metadata.labels: Invalid value: "{"v" * 64}": must be no more than 63 characters'],
                     id="value-too-long"),
        pytest.param({"a": 1}, ["metadata.labels: Invalid value: 1: must be a string"], id="non-string-value"),
        pytest.param(["a"], ['metadata.labels: Invalid value: ["a"]: must be an object'], id="not-a-map"),
    ],
)
def test_validate_labels(labels: object, expected: list[str]) -> None:
    assert messages(validate_labels(labels)) == expected


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        pytest.param({"Example.com/Mixed-Case": "x" * 1000}, [], id="case-insensitive-key"),
        pytest.param({"bad key": ""}, [f'metadata.annotations: Invalid value: "bad key": {NAME_PART_MSG}'],
                     id="bad-key"),
        pytest.param({"a": "x" * (256 * 1024 - 1)}, [], id="at-limit"),
        pytest.param({"a": "x" * (256 * 1024)}, ["metadata.annotations: Too long: must have at most 262144 bytes"],
                     id="over-limit"),
        pytest.param({"a": "é" * (128 * 1024)}, ["metadata.annotations: Too long: must have at most 262144 bytes"],
                     id="counted-in-bytes"),
    ],
)
def test_validate_annotations(annotations: object, expected: list[str]) -> None:
    assert messages(validate_annotations(annotations)) == expected


# ---------------------------------------------------------------- object metadata


@pytest.mark.parametrize(
    ("meta", "namespaced", "expected"),
    [
        pytest.param({"name": "a", "namespace": "ns"}, True, [], id="valid-namespaced"),
        pytest.param({"name": "a"}, False, [], id="valid-cluster"),
        pytest.param({"generateName": "web-", "namespace": "ns"}, True,
                     ["metadata.name: Required value: name or generateName is required"], id="generate-name-only"),
        pytest.param({"namespace": "ns"}, True,
                     ["metadata.name: Required value: name or generateName is required"], id="no-name"),
        pytest.param(None, True, ["metadata.name: Required value: name or generateName is required",
                                  "metadata.namespace: Required value"], id="no-metadata"),
        pytest.param({"generateName": "Web-", "name": "x", "namespace": "ns"}, True,
                     [f'metadata.generateName: Invalid value: "Web-": {SUBDOMAIN_MSG}'], id="bad-generate-name"),
        pytest.param({"name": "Foo_1", "namespace": "ns"}, True,
                     [f'metadata.name: Invalid value: "Foo_1": {SUBDOMAIN_MSG}'], id="bad-name"),
        pytest.param({"name": "a"}, True, ["metadata.namespace: Required value"], id="namespace-required"),
        pytest.param({"name": "a", "namespace": "a.b"}, True,
                     ['metadata.namespace: Invalid value: "a.b": must not contain dots'], id="namespace-is-label"),
        pytest.param({"name": "a", "namespace": "ns"}, False,
                     ["metadata.namespace: Forbidden: not allowed on this type"], id="namespace-forbidden"),
        pytest.param({"name": "a", "generation": -1}, False,
                     ["metadata.generation: Invalid value: -1: must be greater than or equal to 0"],
                     id="negative-generation"),
        pytest.param({"name": "a", "finalizers": ["foo"]}, False,
                     ['metadata.finalizers: Invalid value: "foo": name is neither a standard finalizer name nor is '
                      "it fully qualified"], id="unqualified-finalizer"),
        pytest.param({"name": "a", "finalizers": ["kubernetes", "example.com/x"]}, False, [],
                     id="standard-finalizers"),
        pytest.param({"name": "a", "finalizers": ["orphan", "foregroundDeletion"]}, False,
                     ['metadata.finalizers: Invalid value: ["orphan","foregroundDeletion"]: finalizer '
                      "orphan and foregroundDeletion cannot be both set"], id="conflicting-finalizers"),
        pytest.param({"name": "a", "ownerReferences": [{}]}, False,
                     ['metadata.ownerReferences.apiVersion: Invalid value: "": version must not be empty',
                      'metadata.ownerReferences.kind: Invalid value: "": must not be empty',
                      'metadata.ownerReferences.name: Invalid value: "": must not be empty',
                      'metadata.ownerReferences.uid: Invalid value: "": must not be empty'], id="empty-owner"),
        pytest.param({"name": "a", "ownerReferences": [
            {"apiVersion": "v1", "kind": "A", "name": "x", "uid": "1", "controller": True},
            {"apiVersion": "v1", "kind": "B", "name": "y", "uid": "2", "controller": True}]}, False,
            ['metadata.ownerReferences: Invalid value: [{"apiVersion":"v1","controller":true,"kind":"A","name":"x",'
             '"uid":"1"},{"apiVersion":"v1","controller":true,"kind":"B","name":"y","uid":"2"}]: Only one reference '
             'can have Controller set to true. Found "true" in references for A/x and B/y'], id="two-controllers"),
        pytest.param("x", False, ['metadata: Invalid value: "x": must be an object'], id="not-an-object"),
    ],
)
def test_validate_object_meta(meta: object, namespaced: bool, expected: list[str]) -> None:
    assert messages(validate_object_meta(meta, namespaced=namespaced)) == expected


def test_generate_name_prefix_may_end_with_dash() -> None:
    assert validate_object_meta({"generateName": "web-", "name": "web-x1"}, namespaced=False) == []


def test_object_meta_custom_name_validator() -> None:
    errs = validate_object_meta({"name": "a.b"}, namespaced=False, name_validator=validate_dns1123_label)
    assert messages(errs) == ['metadata.name: Invalid value: "a.b": must not contain dots']
    assert validate_object_meta({"name": "Any Thing"}, namespaced=False, name_validator=None) == []


# ---------------------------------------------------------------- resources


@pytest.mark.parametrize(
    ("rl", "expected"),
    [
        pytest.param({"cpu": "1", "memory": 1024, "example.com/foo": "2", "pods": "110"}, [], id="valid"),
        pytest.param({"cpu": "1x"}, Undecodable(QUANTITY_MSG), id="bad-quantity"),
        pytest.param({"cpu": "1kk"}, Undecodable("unable to parse quantity's suffix"), id="bad-suffix"),
        pytest.param({"cpu": "-100m"},
                     ['spec.overhead[cpu]: Invalid value: "-100m": must be greater than or equal to 0'],
                     id="negative"),
        pytest.param({"foo": "1"},
                     ['spec.overhead[foo]: Invalid value: "foo": must be a standard resource type or fully qualified'],
                     id="non-standard-name"),
        pytest.param({"bad name/x": "1"}, ['spec.overhead[bad name/x]: Invalid value: "bad name/x": prefix part '
                                           + SUBDOMAIN_MSG], id="bad-prefix"),
        pytest.param({"example.com/gpu": "1500m"},
                     ["spec.overhead[example.com/gpu]: Invalid value: 1500m: must be an integer"],
                     id="extended-must-be-integer"),
        pytest.param({"cpu": True}, ["spec.overhead[cpu]: Invalid value: true: must be a quantity string or number"],
                     id="bool-value"),
        pytest.param("1", ['spec.overhead: Invalid value: "1": must be an object'], id="not-an-object"),
    ],
)
def test_validate_resource_list(rl: object, expected: list[str] | Undecodable) -> None:
    assert outcome(lambda: validate_resource_list(rl, "spec.overhead")) == expected


def test_validate_resource_list_container_rules() -> None:
    errs = validate_resource_list({"pods": "1"}, "r", container=True)
    assert messages(errs) == ['r[pods]: Invalid value: "pods": must be a standard resource for containers']


# ---------------------------------------------------------------- pods


def test_valid_pod_has_no_errors() -> None:
    assert validate_pod(valid_pod()) == []


def test_minimal_pod_has_no_errors() -> None:
    pod = {"metadata": {"name": "p", "namespace": "default"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    assert validate_pod(pod) == []


_DELETE = object()
_C0: tuple[str | int, ...] = ("spec", "containers", 0)


def _with(path: tuple[str | int, ...], value: object) -> dict[str, Any]:
    """A valid pod with the value at ``path`` replaced (or deleted)."""
    pod = valid_pod()
    target: Any = pod
    for key in path[:-1]:
        target = target[key]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return pod


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        pytest.param(("spec", "containers"), _DELETE, ["spec.containers: Required value"], id="containers-missing"),
        pytest.param(("spec", "containers"), [], ["spec.containers: Required value"], id="containers-empty"),
        pytest.param(("spec",), _DELETE, ["spec.containers: Required value"], id="spec-missing"),
        pytest.param(("spec",), [], ["spec: Invalid value: []: must be an object"], id="spec-not-object"),
        pytest.param((*_C0, "image"), _DELETE, ["spec.containers[0].image: Required value"], id="image-missing"),
        pytest.param((*_C0, "image"), " nginx",
                     ['spec.containers[0].image: Invalid value: " nginx": must not have leading or trailing whitespace'],
                     id="image-whitespace"),
        pytest.param((*_C0, "name"), _DELETE, ["spec.containers[0].name: Required value"], id="name-missing"),
        pytest.param((*_C0, "name"), "App", [f'spec.containers[0].name: Invalid value: "App": {LABEL_MSG}'],
                     id="name-not-label"),
        pytest.param(("spec", "initContainers", 0, "name"), "app",
                     ['spec.initContainers[0].name: Duplicate value: "app"'], id="init-duplicates-container"),
        pytest.param((*_C0, "resources", "requests", "cpu"), "2",
                     ['spec.containers[0].resources.requests: Invalid value: "2": must be less than or equal to cpu '
                      "limit of 1"], id="request-over-limit"),
        pytest.param((*_C0, "resources", "requests", "memory"), "2Gi",
                     ['spec.containers[0].resources.requests: Invalid value: "2Gi": must be less than or equal to '
                      "memory limit of 1Gi"], id="memory-request-over-limit"),
        pytest.param((*_C0, "resources", "requests", "example.com/gpu"), "2",
                     ['spec.containers[0].resources.requests: Invalid value: "2": must be equal to example.com/gpu '
                      "limit of 1"], id="extended-request-differs-from-limit"),
        pytest.param((*_C0, "resources", "requests", "memory"), "12x", Undecodable(QUANTITY_MSG),
                     id="bad-quantity"),
        pytest.param((*_C0, "resources", "limits", "cpu"), "-1",
                     ['spec.containers[0].resources.limits[cpu]: Invalid value: "-1": must be greater than or equal '
                      "to 0",
                      'spec.containers[0].resources.requests: Invalid value: "100m": must be less than or equal to '
                      "cpu limit of -1"], id="negative-limit"),
        pytest.param((*_C0, "ports", 0, "containerPort"), 70000,
                     ["spec.containers[0].ports[0].containerPort: Invalid value: 70000: must be between 1 and 65535, "
                      "inclusive"], id="container-port-range"),
        pytest.param((*_C0, "ports", 0, "containerPort"), _DELETE,
                     ["spec.containers[0].ports[0].containerPort: Required value"], id="container-port-missing"),
        pytest.param((*_C0, "ports", 1, "hostPort"), -1,
                     ["spec.containers[0].ports[1].hostPort: Invalid value: -1: must be between 1 and 65535, "
                      "inclusive"], id="host-port-range"),
        pytest.param((*_C0, "ports", 0, "protocol"), "HTTP",
                     ['spec.containers[0].ports[0].protocol: Unsupported value: "HTTP": supported values: "SCTP", '
                      '"TCP", "UDP"'], id="protocol"),
        pytest.param(("spec", "restartPolicy"), "Sometimes",
                     ['spec.restartPolicy: Unsupported value: "Sometimes": supported values: "Always", "OnFailure", '
                      '"Never"'], id="restart-policy"),
        pytest.param(("spec", "nodeName"), "Node_1", [f'spec.nodeName: Invalid value: "Node_1": {SUBDOMAIN_MSG}'],
                     id="node-name"),
        pytest.param(("spec", "schedulerName"), "My Scheduler",
                     [f'spec.schedulerName: Invalid value: "My Scheduler": {SUBDOMAIN_MSG}'], id="scheduler-name"),
        pytest.param(("spec", "nodeSelector"), {"disk": "fast ssd"},
                     [f'spec.nodeSelector: Invalid value: "fast ssd": {LABEL_VALUE_MSG}'], id="node-selector"),
        pytest.param(("spec", "priority"), "high", ['spec.priority: Invalid value: "high": must be an integer'],
                     id="priority-type"),
        pytest.param(("spec", "priority"), 2**31,
                     ["spec.priority: Invalid value: 2147483648: must be between -2147483648 and 2147483647, "
                      "inclusive"], id="priority-range"),
        pytest.param(("spec", "tolerations", 1), {"key": "a", "operator": "Exists", "value": "b"},
                     ['spec.tolerations[1].operator: Invalid value: {"key":"a","operator":"Exists","value":"b"}: '
                      "value must be empty when `operator` is 'Exists'"], id="toleration-exists-with-value"),
        pytest.param(("spec", "tolerations", 1), {"operator": "Equal", "value": "x"},
                     ['spec.tolerations[1].operator: Invalid value: "Equal": operator must be Exists when `key` is '
                      'empty, which means "match all values and all keys"'], id="toleration-empty-key"),
        pytest.param(("spec", "tolerations", 1), {"key": "a", "operator": "In"},
                     ['spec.tolerations[1].operator: Unsupported value: "In": supported values: "Equal", "Exists"'],
                     id="toleration-operator"),
        pytest.param(("spec", "tolerations", 1), {"key": "a", "effect": "NoRun"},
                     ['spec.tolerations[1].effect: Unsupported value: "NoRun": supported values: "NoSchedule", '
                      '"PreferNoSchedule", "NoExecute"'], id="toleration-effect"),
        pytest.param(("spec", "tolerations", 1), {"key": "a", "effect": "NoSchedule", "tolerationSeconds": 5},
                     ["spec.tolerations[1].effect: Invalid value: \"NoSchedule\": effect must be 'NoExecute' when "
                      "`tolerationSeconds` is set"], id="toleration-seconds"),
        pytest.param(("spec", "tolerations", 1), {"key": "a", "value": "b c"},
                     [f'spec.tolerations[1].operator: Invalid value: "b c": {LABEL_VALUE_MSG}'],
                     id="toleration-value"),
        pytest.param(("spec", "overhead"), {"cpu": "-1"},
                     ['spec.overhead.limits[cpu]: Invalid value: "-1": must be greater than or equal to 0'],
                     id="overhead"),
        pytest.param(("spec", "hostNetwork"), "yes", ['spec.hostNetwork: Invalid value: "yes": must be a boolean'],
                     id="host-network-type"),
    ],
)
def test_pod_spec_errors(path: tuple[str | int, ...], value: object,
                         expected: list[str] | Undecodable) -> None:
    assert outcome(lambda: validate_pod(_with(path, value))) == expected


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        pytest.param({"requests": {"example.com/gpu": "1"}},
                     ["r.limits: Required value: Limit must be set for non overcommitable resources"],
                     id="extended-needs-limit"),
        pytest.param({"limits": {"hugepages-2Mi": "2Mi"}}, ["r: Forbidden: HugePages require cpu or memory"],
                     id="hugepages-alone"),
        pytest.param({"limits": {"hugepages-2Mi": "2Mi", "memory": "1Gi"}, "requests": {"hugepages-2Mi": "2Mi"}}, [],
                     id="hugepages-with-memory"),
        pytest.param({"requests": {"cpu": "1500m"}, "limits": {"cpu": "1.5"}}, [], id="equal-in-other-units"),
        pytest.param({"requests": {"foo": "1"}},
                     ['r.requests[foo]: Invalid value: "foo": must be a standard resource type or fully qualified',
                      'r.requests[foo]: Invalid value: "foo": must be a standard resource for containers'],
                     id="unknown-resource"),
        pytest.param({"requests": {"example.com/x_y": "1"}, "limits": {"example.com/x_y": "1"}}, [],
                     id="extended-resource"),
    ],
)
def test_container_resources(resources: dict[str, Any], expected: list[str]) -> None:
    spec = {"containers": [{"name": "c", "image": "i", "resources": resources}]}
    errs = validate_pod_spec(spec)
    assert [m.replace("spec.containers[0].resources", "r") for m in messages(errs)] == expected


def test_duplicate_container_names() -> None:
    spec = {"containers": [{"name": "c", "image": "i"}, {"name": "c", "image": "i"}],
            "initContainers": [{"name": "d", "image": "i"}, {"name": "d", "image": "i"}]}
    assert messages(validate_pod_spec(spec)) == ['spec.containers[1].name: Duplicate value: "c"',
                                                 'spec.initContainers[1].name: Duplicate value: "d"']


def test_duplicate_port_names() -> None:
    spec = {"containers": [{"name": "c", "image": "i", "ports": [{"name": "http", "containerPort": 80},
                                                                 {"name": "http", "containerPort": 81},
                                                                 {"name": "HTTP", "containerPort": 82}]}]}
    assert messages(validate_pod_spec(spec)) == [
        'spec.containers[0].ports[1].name: Duplicate value: "http"',
        'spec.containers[0].ports[2].name: Invalid value: "HTTP": must contain only alpha-numeric characters '
        "(a-z, 0-9), and hyphens (-)",
        'spec.containers[0].ports[2].name: Invalid value: "HTTP": must contain at least one letter (a-z)',
    ]


def test_pod_metadata_and_spec_errors_combine() -> None:
    errs = validate_pod({"metadata": {"name": "x"}, "spec": {}})
    assert messages(errs) == ["metadata.namespace: Required value", "spec.containers: Required value"]


def test_validate_pod_does_not_mutate_input() -> None:
    pod = valid_pod()
    before = copy.deepcopy(pod)
    validate_pod(pod)
    assert pod == before


def test_validate_pod_rejects_non_object() -> None:
    assert messages(validate_pod([])) == ["Invalid value: []: must be an object"]


# ---------------------------------------------------------------- nodes, namespaces, others


def valid_node() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "node-1", "labels": {"kubernetes.io/hostname": "node-1"}},
        "spec": {"unschedulable": False, "taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
                                                    {"key": "dedicated", "value": "gpu", "effect": "NoExecute"}]},
        "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"},
                   "allocatable": {"cpu": "3800m", "memory": "15Gi", "pods": 110}},
    }


def test_valid_node_has_no_errors() -> None:
    assert validate_node(valid_node()) == []


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        pytest.param(lambda n: n["metadata"].update(namespace="default"),
                     ["metadata.namespace: Forbidden: not allowed on this type"], id="namespace-forbidden"),
        pytest.param(lambda n: n["spec"]["taints"].append({"key": "dedicated", "effect": "NoSchedule"}),
                     ['spec.taints[2]: Duplicate value: {"effect":"NoSchedule","key":"dedicated"}: taints must be '
                      "unique by key and effect pair"], id="duplicate-taint"),
        pytest.param(lambda n: n["spec"]["taints"][0].pop("effect"), ["spec.taints[0].effect: Required value"],
                     id="taint-effect-required"),
        pytest.param(lambda n: n["spec"]["taints"][0].update(effect="Never"),
                     ['spec.taints[0].effect: Unsupported value: "Never": supported values: "NoSchedule", '
                      '"PreferNoSchedule", "NoExecute"'], id="taint-effect-unsupported"),
        pytest.param(lambda n: n["spec"]["taints"][0].update(key=""),
                     ['spec.taints[0].key: Invalid value: "": name part must be non-empty',
                      f'spec.taints[0].key: Invalid value: "": {NAME_PART_MSG}'], id="taint-key-empty"),
        pytest.param(lambda n: n["status"]["capacity"].update(cpu="-1"),
                     ['status.capacity.cpu: Invalid value: "-1": must be greater than or equal to 0'],
                     id="negative-capacity"),
        pytest.param(lambda n: n["status"]["allocatable"].update(pods="1.5"),
                     ["status.allocatable.pods: Invalid value: 1500m: must be an integer"], id="fractional-pods"),
        pytest.param(lambda n: n["spec"].update(unschedulable="yes"),
                     ['spec.unschedulable: Invalid value: "yes": must be a boolean'], id="unschedulable-type"),
    ],
)
def test_node_errors(mutate: Any, expected: list[str]) -> None:
    node = valid_node()
    mutate(node)
    assert messages(validate_node(node)) == expected


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param({"metadata": {"name": "team-a"}, "spec": {"finalizers": ["kubernetes"]}}, [], id="valid"),
        pytest.param({"metadata": {"name": "team.a"}}, ['metadata.name: Invalid value: "team.a": must not contain '
                                                        "dots"], id="name-is-label"),
        pytest.param({"metadata": {"name": "a", "namespace": "a"}},
                     ["metadata.namespace: Forbidden: not allowed on this type"], id="namespace-forbidden"),
        pytest.param({"metadata": {"name": "a"}, "spec": {"finalizers": ["custom"]}},
                     ['spec.finalizers: Invalid value: "custom": name is neither a standard finalizer name nor is it '
                      "fully qualified"], id="spec-finalizer"),
    ],
)
def test_namespace(obj: dict[str, Any], expected: list[str]) -> None:
    assert messages(validate_namespace(obj)) == expected


@pytest.mark.parametrize(
    ("obj", "namespaced", "expected"),
    [
        pytest.param({"apiVersion": "v1", "metadata": {"name": "cm", "namespace": "d"}}, True, [], id="configmap"),
        pytest.param({"apiVersion": "example.com/v1", "metadata": {"name": "w", "finalizers": ["plain"]}}, False, [],
                     id="custom-finalizer-allowed"),
        pytest.param({"apiVersion": "v1", "metadata": {"name": "w", "finalizers": ["plain"]}}, False,
                     ['metadata.finalizers: Invalid value: "plain": name is neither a standard finalizer name nor is '
                      "it fully qualified"], id="core-finalizer-rule"),
        pytest.param({"metadata": {"name": "x"}}, True, ["metadata.namespace: Required value"], id="namespace"),
    ],
)
def test_validate_generic(obj: dict[str, Any], namespaced: bool, expected: list[str]) -> None:
    assert messages(validate_generic(obj, namespaced)) == expected


# ---------------------------------------------------------------- status helpers


def test_status_helpers() -> None:
    errs = validate_pod({"metadata": {"name": "x"}, "spec": {}})
    assert aggregate_message(errs) == "[metadata.namespace: Required value, spec.containers: Required value]"
    assert aggregate_message(errs[:1]) == "metadata.namespace: Required value"
    assert aggregate_message(errs + errs) == aggregate_message(errs)
    assert aggregate_message([]) == ""
    assert invalid_message("Pod", "", "x", errs) == (
        'Pod "x" is invalid: [metadata.namespace: Required value, spec.containers: Required value]')
    assert invalid_message("Deployment", "apps", "d", []) == 'Deployment.apps "d" is invalid'
    assert status_causes(errs) == [
        {"reason": "FieldValueRequired", "message": "Required value", "field": "metadata.namespace"},
        {"reason": "FieldValueRequired", "message": "Required value", "field": "spec.containers"},
    ]
