"""Unit tests for pyscheduler_sim.patch (merge patch, JSON patch, strategic merge patch)."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from pyscheduler_sim.patch import (
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    STRATEGIC_MERGE_SCHEMAS,
    FieldStrategy,
    PatchError,
    UnsupportedPatchType,
    apply_json_patch,
    apply_merge_patch,
    apply_patch,
    apply_strategic_merge_patch,
    kind_path_of,
    strategic_merge_supported,
)

POD = ("", "Pod")


def _pod(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": spec or {"containers": [{"name": "app", "image": "app:1"}]},
    }


def _containers(*names: str) -> list[dict[str, Any]]:
    return [{"name": n, "image": f"{n}:1"} for n in names]


def _names(items: list[dict[str, Any]], key: str = "name") -> list[Any]:
    return [item[key] for item in items]


# --------------------------------------------------------------------------------------------
# JSON merge patch
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("target", "patch", "expected"),
    [
        pytest.param({"a": 1, "b": 2}, {"a": None}, {"b": 2}, id="null-deletes-key"),
        pytest.param({"a": 1}, {"zz": None}, {"a": 1}, id="null-for-absent-key-is-noop"),
        pytest.param(
            {"metadata": {"labels": {"x": "1", "y": "2"}, "name": "n"}},
            {"metadata": {"labels": {"y": None, "z": "3"}}},
            {"metadata": {"labels": {"x": "1", "z": "3"}, "name": "n"}},
            id="nested-merge",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "a"}, {"name": "b"}]}},
            {"spec": {"containers": [{"name": "c"}]}},
            {"spec": {"containers": [{"name": "c"}]}},
            id="arrays-replaced",
        ),
        pytest.param({"a": {"b": 1}}, {"a": 5}, {"a": 5}, id="object-replaced-by-scalar"),
        pytest.param(
            {"a": 5},
            {"a": {"b": 1, "c": None}},
            {"a": {"b": 1}},
            id="scalar-replaced-by-object-nulls-dropped",
        ),
        pytest.param({"a": 1}, ["x"], ["x"], id="non-object-patch-replaces-target"),
        pytest.param({"a": 1}, {}, {"a": 1}, id="empty-patch-noop"),
    ],
)
def test_merge_patch(target: Any, patch: Any, expected: Any) -> None:
    assert apply_merge_patch(target, patch) == expected


# --------------------------------------------------------------------------------------------
# Strategic merge patch: successful cases
# --------------------------------------------------------------------------------------------

SMP_CASES = [
    pytest.param(
        _pod(containers=_containers("a", "b", "c")),
        {
            "spec": {
                "containers": [
                    {"name": "b", "image": "b:2"},
                    {"name": "d", "image": "d:1"},
                    {"name": "c", "$patch": "delete"},
                ]
            }
        },
        POD,
        {
            "spec.containers": [
                {"name": "a", "image": "a:1"},
                {"name": "b", "image": "b:2"},
                {"name": "d", "image": "d:1"},
            ]
        },
        id="containers-by-name-update-add-delete",
    ),
    pytest.param(
        _pod(containers=_containers("a", "b")),
        {"spec": {"containers": [{"name": "new", "image": "new:1"}]}},
        POD,
        {"spec.containers": [{"name": "new", "image": "new:1"}, *_containers("a", "b")]},
        id="containers-new-only-item-goes-first-like-kubernetes",
    ),
    pytest.param(
        _pod(containers=_containers("a", "b", "c")),
        {"spec": {"containers": [{"name": "b", "image": "b:2"}, {"name": "d", "image": "d:1"}]}},
        POD,
        {
            "spec.containers": [
                *_containers("a"),
                {"name": "b", "image": "b:2"},
                *_containers("d", "c"),
            ]
        },
        id="containers-new-item-follows-preceding-patch-item",
    ),
    pytest.param(
        _pod(
            containers=[
                {
                    "name": "a",
                    "image": "a:1",
                    "env": [{"name": "X", "value": "1"}, {"name": "Y", "value": "2"}],
                }
            ]
        ),
        {
            "spec": {
                "containers": [
                    {
                        "name": "a",
                        "env": [
                            {"name": "Y", "value": "22"},
                            {"name": "X", "$patch": "delete"},
                            {"name": "Z", "value": "3"},
                        ],
                    }
                ]
            }
        },
        POD,
        {
            "spec.containers": [
                {
                    "name": "a",
                    "image": "a:1",
                    "env": [{"name": "Y", "value": "22"}, {"name": "Z", "value": "3"}],
                }
            ]
        },
        id="env-by-name-inside-container",
    ),
    pytest.param(
        _pod(
            containers=[
                {
                    "name": "a",
                    "image": "a:1",
                    "env": [{"name": "X", "value": "1", "valueFrom": None}],
                }
            ]
        ),
        {"spec": {"containers": [{"name": "a", "env": [{"name": "X", "value": None}]}]}},
        POD,
        {
            "spec.containers": [
                {"name": "a", "image": "a:1", "env": [{"name": "X", "valueFrom": None}]}
            ]
        },
        id="null-inside-merged-list-item-deletes-field",
    ),
    pytest.param(
        _pod(
            containers=[
                {
                    "name": "a",
                    "image": "a:1",
                    "ports": [{"containerPort": 80}, {"containerPort": 90}],
                }
            ]
        ),
        {
            "spec": {
                "containers": [{"name": "a", "ports": [{"containerPort": 90, "protocol": "UDP"}]}]
            }
        },
        POD,
        {
            "spec.containers": [
                {
                    "name": "a",
                    "image": "a:1",
                    "ports": [{"containerPort": 80}, {"containerPort": 90, "protocol": "UDP"}],
                }
            ]
        },
        id="ports-by-containerPort",
    ),
    pytest.param(
        _pod(containers=[{"name": "a", "image": "a:1", "ports": [{"containerPort": 80}]}]),
        {
            "spec": {
                "containers": [{"name": "a", "ports": [{"containerPort": 80.0, "name": "http"}]}]
            }
        },
        POD,
        {
            "spec.containers": [
                {
                    "name": "a",
                    "image": "a:1",
                    "ports": [{"containerPort": 80.0, "name": "http"}, {"containerPort": 80}],
                }
            ]
        },
        id="merge-key-80-and-80.0-differ-as-in-go",
    ),
    pytest.param(
        {
            **_pod(),
            "status": {
                "phase": "Pending",
                "conditions": [
                    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"},
                    {"type": "Ready", "status": "False"},
                ],
            },
        },
        {
            "status": {
                "conditions": [
                    {"type": "PodScheduled", "status": "True", "reason": None},
                    {"type": "Initialized", "status": "True"},
                ]
            }
        },
        POD,
        {
            "status.conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Initialized", "status": "True"},
                {"type": "Ready", "status": "False"},
            ],
            "status.phase": "Pending",
        },
        id="pod-conditions-by-type",
    ),
    pytest.param(
        {
            **_pod(),
            "status": {
                "containerStatuses": [{"name": "a", "ready": False}, {"name": "b", "ready": False}]
            },
        },
        {"status": {"containerStatuses": [{"name": "a", "ready": True}]}},
        POD,
        {"status.containerStatuses": [{"name": "a", "ready": True}]},
        id="containerStatuses-have-no-strategy-so-are-replaced",
    ),
    pytest.param(
        {**_pod(), "metadata": {"name": "p", "finalizers": ["a", "b"]}},
        {"metadata": {"finalizers": ["b", "c", "c"]}},
        POD,
        {"metadata.finalizers": ["a", "b", "c"]},
        id="finalizers-set-merge",
    ),
    pytest.param(
        {**_pod(), "metadata": {"name": "p", "finalizers": ["a", "b", "c"]}},
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b", "zz"]}},
        POD,
        {"metadata.finalizers": ["a", "c"]},
        id="deleteFromPrimitiveList",
    ),
    pytest.param(
        {**_pod(), "metadata": {"name": "p"}},
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["b"]}},
        POD,
        {"metadata": {"name": "p"}},
        id="deleteFromPrimitiveList-on-absent-list-is-noop",
    ),
    pytest.param(
        {**_pod(), "metadata": {"name": "p", "finalizers": ["a", "b"]}},
        {"metadata": {"$setElementOrder/finalizers": ["c", "b", "a"], "finalizers": ["c"]}},
        POD,
        {"metadata.finalizers": ["c", "b", "a"]},
        id="setElementOrder-primitive-list",
    ),
    pytest.param(
        _pod(containers=_containers("a", "b", "c")),
        {
            "spec": {
                "$setElementOrder/containers": [
                    {"name": "c"},
                    {"name": "new"},
                    {"name": "a"},
                    {"name": "b"},
                ],
                "containers": [{"name": "new", "image": "new:1"}],
            }
        },
        POD,
        {"spec.containers": [*_containers("c", "new", "a", "b")]},
        id="setElementOrder-containers",
    ),
    pytest.param(
        _pod(containers=_containers("a", "b", "c")),
        {"spec": {"$setElementOrder/containers": [{"name": "c"}, {"name": "a"}]}},
        POD,
        # Unlisted live items are kept and interleaved by live position, as kubectl shows.
        {"spec.containers": [*_containers("b", "c", "a")]},
        id="setElementOrder-keeps-unlisted-live-items",
    ),
    pytest.param(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d"},
            "spec": {"strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1}}},
        },
        {"spec": {"strategy": {"$retainKeys": ["type"], "type": "Recreate"}}},
        ("apps", "Deployment"),
        {"spec.strategy": {"type": "Recreate"}},
        id="retainKeys",
    ),
    pytest.param(
        _pod(containers=_containers("a"), volumes=[{"name": "v", "emptyDir": {}}]),
        {
            "spec": {
                "volumes": [
                    {"name": "v", "$retainKeys": ["hostPath", "name"], "hostPath": {"path": "/x"}}
                ]
            }
        },
        POD,
        {"spec.volumes": [{"name": "v", "hostPath": {"path": "/x"}}]},
        id="retainKeys-in-volume-item",
    ),
    pytest.param(
        _pod(containers=_containers("a"), securityContext={"runAsUser": 1, "runAsGroup": 2}),
        {"spec": {"securityContext": {"$patch": "replace", "fsGroup": 3}}},
        POD,
        {"spec.securityContext": {"fsGroup": 3}},
        id="patch-replace-on-map",
    ),
    pytest.param(
        _pod(containers=_containers("a"), securityContext={"runAsUser": 1}),
        {"spec": {"securityContext": {"$patch": "delete"}}},
        POD,
        {"spec": {"containers": _containers("a")}},
        id="patch-delete-on-map-removes-it",
    ),
    pytest.param(
        _pod(containers=_containers("a", "b")),
        {"spec": {"containers": [{"$patch": "replace"}, {"name": "z", "image": "z:1"}]}},
        POD,
        {"spec.containers": _containers("z")},
        id="patch-replace-as-list-item",
    ),
    pytest.param(
        _pod(
            containers=_containers("a"),
            tolerations=[{"key": "a", "operator": "Exists"}, {"key": "b", "operator": "Exists"}],
        ),
        {"spec": {"tolerations": [{"key": "c", "operator": "Exists"}]}},
        POD,
        {"spec.tolerations": [{"key": "c", "operator": "Exists"}]},
        id="tolerations-have-no-patch-strategy-in-kubernetes-so-are-replaced",
    ),
    pytest.param(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n"},
            "spec": {"taints": [{"key": "a", "effect": "NoSchedule"}], "podCIDRs": ["10.0.0.0/24"]},
        },
        {"spec": {"taints": [{"key": "b", "effect": "NoExecute"}], "podCIDRs": ["10.0.1.0/24"]}},
        ("", "Node"),
        {
            "spec.taints": [{"key": "b", "effect": "NoExecute"}],
            "spec.podCIDRs": ["10.0.1.0/24", "10.0.0.0/24"],
        },
        id="node-taints-replaced-podCIDRs-set-merged",
    ),
    pytest.param(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": "n"},
            "status": {
                "addresses": [
                    {"type": "InternalIP", "address": "1.1.1.1"},
                    {"type": "Hostname", "address": "n"},
                ],
                "conditions": [{"type": "Ready", "status": "True"}],
            },
        },
        {
            "status": {
                "addresses": [{"type": "InternalIP", "address": "2.2.2.2"}],
                "conditions": [{"type": "Ready", "status": "False"}],
            }
        },
        ("", "Node"),
        {
            "status.addresses": [
                {"type": "InternalIP", "address": "2.2.2.2"},
                {"type": "Hostname", "address": "n"},
            ],
            "status.conditions": [{"type": "Ready", "status": "False"}],
        },
        id="node-addresses-and-conditions-by-type",
    ),
    pytest.param(
        {
            **_pod(),
            "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}, "annotations": {"k": "v"}},
        },
        {"metadata": {"labels": {"a": None, "c": "3"}, "annotations": None}},
        POD,
        {"metadata": {"name": "p", "labels": {"b": "2", "c": "3"}}},
        id="labels-merged-and-deleted-with-null",
    ),
    pytest.param(
        {
            **_pod(),
            "metadata": {
                "name": "p",
                "ownerReferences": [{"uid": "1", "name": "rs", "controller": True}],
            },
        },
        {
            "metadata": {
                "ownerReferences": [{"uid": "1", "controller": None}, {"uid": "2", "name": "other"}]
            }
        },
        POD,
        {"metadata.ownerReferences": [{"uid": "1", "name": "rs"}, {"uid": "2", "name": "other"}]},
        id="ownerReferences-by-uid",
    ),
    pytest.param(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "s"},
            "spec": {"ports": [{"port": 80, "targetPort": 8080}, {"port": 443}]},
        },
        {"spec": {"ports": [{"port": 80, "targetPort": 9090}]}},
        ("", "Service"),
        {"spec.ports": [{"port": 80, "targetPort": 9090}, {"port": 443}]},
        id="service-ports-by-port",
    ),
    pytest.param(
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "b"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"a": "b"}}},
        },
        {"spec": {"selector": {"matchLabels": {"c": "d"}}}},
        ("policy", "PodDisruptionBudget"),
        {"spec": {"minAvailable": 1, "selector": {"matchLabels": {"c": "d"}}}},
        id="pdb-selector-has-replace-strategy",
    ),
    pytest.param(
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "d"},
            "spec": {"template": {"spec": {"containers": _containers("a", "b")}}},
            "status": {"conditions": [{"type": "Available", "status": "False"}]},
        },
        {
            "spec": {"template": {"spec": {"containers": [{"name": "b", "image": "b:2"}]}}},
            "status": {"conditions": [{"type": "Progressing", "status": "True"}]},
        },
        ("apps", "Deployment"),
        {
            "spec.template.spec.containers": [*_containers("a"), {"name": "b", "image": "b:2"}],
            "status.conditions": [
                {"type": "Progressing", "status": "True"},
                {"type": "Available", "status": "False"},
            ],
        },
        id="deployment-pod-template-and-conditions",
    ),
    pytest.param(
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": "c"},
            "spec": {
                "jobTemplate": {
                    "spec": {"template": {"spec": {"containers": _containers("a", "b")}}}
                }
            },
        },
        {
            "spec": {
                "jobTemplate": {
                    "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "a:2"}]}}}
                }
            }
        },
        ("batch", "CronJob"),
        {
            "spec.jobTemplate.spec.template.spec.containers": [
                {"name": "a", "image": "a:2"},
                *_containers("b"),
            ]
        },
        id="cronjob-nested-pod-template",
    ),
    pytest.param(
        _pod(containers=_containers("a")),
        {
            "spec": {
                "initContainers": [
                    {
                        "name": "i",
                        "image": "i:1",
                        "env": [{"name": "X", "$patch": "delete"}],
                        "args": None,
                    }
                ],
                "affinity": {"nodeAffinity": None},
            }
        },
        POD,
        {"spec.initContainers": [{"name": "i", "image": "i:1", "env": []}], "spec.affinity": {}},
        id="values-for-absent-fields-are-cleaned-of-directives-and-nulls",
    ),
    pytest.param(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}},
        {"data": {"a": None, "b": "2"}},
        ("core", "ConfigMap"),
        {"data": {"b": "2"}},
        id="core-group-alias",
    ),
]


def _lookup(obj: dict[str, Any], dotted: str) -> Any:
    value: Any = obj
    for part in dotted.split("."):
        value = value[part]
    return value


@pytest.mark.parametrize(("target", "patch", "kind_path", "expected"), SMP_CASES)
def test_strategic_merge_patch(
    target: dict[str, Any],
    patch: dict[str, Any],
    kind_path: tuple[str, str],
    expected: dict[str, Any],
) -> None:
    before = copy.deepcopy(target)
    patch_before = copy.deepcopy(patch)
    result = apply_strategic_merge_patch(target, patch, kind_path)
    for dotted, value in expected.items():
        assert _lookup(result, dotted) == value, dotted
    assert target == before, "target must not be mutated"
    assert patch == patch_before, "patch must not be mutated"
    # The same patch through the HTTP-level entry point gives the same answer.
    assert (
        apply_patch(STRATEGIC_MERGE_PATCH, target, orjson.dumps(patch), kind_path=kind_path)
        == result
    )


@pytest.mark.parametrize(
    ("target", "patch", "kind_path"),
    [
        pytest.param(_pod(containers=_containers("a", "b")), {}, POD, id="empty-patch"),
        pytest.param(
            _pod(containers=_containers("a", "b", "c")),
            {"spec": {"containers": [{"name": "b", "image": "b:1"}]}},
            POD,
            id="same-container",
        ),
        pytest.param(
            _pod(containers=_containers("a", "b")),
            {"spec": {"containers": _containers("a", "b")}},
            POD,
            id="whole-list-same-order",
        ),
        pytest.param(
            {**_pod(), "metadata": {"name": "p", "finalizers": ["x", "y"]}},
            {"metadata": {"finalizers": ["y"]}},
            POD,
            id="finalizer-already-present",
        ),
        pytest.param(
            {**_pod(), "metadata": {"name": "p", "labels": {"a": "1"}}},
            {"metadata": {"labels": {"a": "1", "b": None}}},
            POD,
            id="labels-unchanged",
        ),
        pytest.param(
            _pod(containers=_containers("a", "b")),
            {"spec": {"$setElementOrder/containers": [{"name": "a"}, {"name": "b"}]}},
            POD,
            id="setElementOrder-of-current-order",
        ),
    ],
)
def test_strategic_merge_patch_without_changes_returns_input(
    target: dict[str, Any], patch: dict[str, Any], kind_path: tuple[str, str]
) -> None:
    assert apply_strategic_merge_patch(target, patch, kind_path) == target


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        pytest.param(
            {"spec": {"$patch": "bogus"}}, "unknown patch type", id="unknown-patch-directive-in-map"
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "a", "$patch": "bogus"}]}},
            "unknown patch type",
            id="unknown-patch-directive-in-list",
        ),
        pytest.param(
            {"spec": {"containers": [{"name": "a", "$patch": "merge"}]}},
            "merging lists cannot yet be specified",
            id="patch-merge-in-list",
        ),
        pytest.param(
            {"spec": {"containers": [{"image": "x"}]}},
            "does not contain declared merge key: name",
            id="missing-merge-key",
        ),
        pytest.param(
            {"spec": {"containers": [{"$patch": "delete", "image": "x"}]}},
            "merge key",
            id="delete-without-merge-key",
        ),
        pytest.param(
            {"metadata": {"$retainKeys": ["name"], "labels": {"a": "b"}}},
            "retainKeys",
            id="retainKeys-not-covering-patch",
        ),
        pytest.param(
            {"metadata": {"$retainKeys": "name"}}, "retainKeys", id="retainKeys-not-a-list"
        ),
        pytest.param(
            {
                "spec": {
                    "$setElementOrder/containers": [{"name": "b"}],
                    "containers": [{"name": "a", "image": "a:2"}],
                }
            },
            "doesn't match",
            id="setElementOrder-inconsistent",
        ),
        pytest.param(
            {"spec": {"$setElementOrder/containers": "a"}},
            "setElementOrder",
            id="setElementOrder-not-a-list",
        ),
        pytest.param(
            {"metadata": {"$deleteFromPrimitiveList/finalizers": "a"}},
            "primitive list",
            id="deleteFromPrimitiveList-not-a-list",
        ),
        pytest.param(
            {"spec": {"$deleteFromPrimitiveList/containers": ["a"]}},
            "list of primitives",
            id="deleteFromPrimitiveList-on-list-of-objects",
        ),
        pytest.param(
            {"metadata": {"$deleteFromPrimitiveListfinalizers": ["a"]}},
            "primitive list",
            id="malformed-directive-key",
        ),
        pytest.param({"spec": {"containers": ["a"]}}, "not identical", id="mixed-element-types"),
        pytest.param({"spec": {"containers": [["a"]]}}, "lists of lists", id="lists-of-lists"),
    ],
)
def test_strategic_merge_patch_errors(patch: dict[str, Any], message: str) -> None:
    target = {**_pod(), "metadata": {"name": "p", "finalizers": ["a"]}}
    with pytest.raises(PatchError, match=message) as info:
        apply_strategic_merge_patch(target, patch, POD)
    assert not isinstance(info.value, UnsupportedPatchType)
    assert info.value.code in (400, 422)


@pytest.mark.parametrize(
    "patch",
    [
        pytest.param([{"op": "add", "path": "/a", "value": 1}], id="array"),
        pytest.param("spec", id="string"),
        pytest.param(None, id="null"),
    ],
)
def test_strategic_merge_patch_must_be_an_object(patch: Any) -> None:
    with pytest.raises(PatchError, match="must be a JSON object"):
        apply_strategic_merge_patch(_pod(), patch, POD)


@pytest.mark.parametrize(
    "kind_path",
    [
        pytest.param(("example.com", "Widget"), id="custom-resource"),
        pytest.param(("", "Widget"), id="unknown-core-kind"),
        pytest.param(("apps", "Pod"), id="wrong-group"),
    ],
)
def test_strategic_merge_patch_unknown_kind_is_unsupported(kind_path: tuple[str, str]) -> None:
    assert not strategic_merge_supported(kind_path)
    with pytest.raises(UnsupportedPatchType) as info:
        apply_strategic_merge_patch({"spec": {}}, {"spec": {"a": 1}}, kind_path)
    assert info.value.code == 415
    assert info.value.reason == "UnsupportedMediaType"
    assert STRATEGIC_MERGE_PATCH not in str(info.value)


# --------------------------------------------------------------------------------------------
# JSON patch
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        pytest.param(
            [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}],
            {"metadata": {"name": "n", "labels": {"a": "b"}}, "list": [1, 2, 3]},
            id="add",
        ),
        pytest.param(
            [{"op": "add", "path": "/list/-", "value": 4}],
            {"metadata": {"name": "n"}, "list": [1, 2, 3, 4]},
            id="add-append",
        ),
        pytest.param(
            [{"op": "remove", "path": "/list/1"}],
            {"metadata": {"name": "n"}, "list": [1, 3]},
            id="remove",
        ),
        pytest.param(
            [{"op": "replace", "path": "/metadata/name", "value": "m"}],
            {"metadata": {"name": "m"}, "list": [1, 2, 3]},
            id="replace",
        ),
        pytest.param(
            [
                {"op": "test", "path": "/metadata/name", "value": "n"},
                {"op": "replace", "path": "/list", "value": []},
            ],
            {"metadata": {"name": "n"}, "list": []},
            id="test-passes",
        ),
        pytest.param(
            [{"op": "move", "from": "/list", "path": "/moved"}],
            {"metadata": {"name": "n"}, "moved": [1, 2, 3]},
            id="move",
        ),
        pytest.param(
            [{"op": "copy", "from": "/metadata/name", "path": "/copy"}],
            {"metadata": {"name": "n"}, "list": [1, 2, 3], "copy": "n"},
            id="copy",
        ),
        pytest.param([], {"metadata": {"name": "n"}, "list": [1, 2, 3]}, id="empty"),
    ],
)
def test_json_patch(patch: list[Any], expected: Any) -> None:
    target = {"metadata": {"name": "n"}, "list": [1, 2, 3]}
    before = copy.deepcopy(target)
    assert apply_json_patch(target, patch) == expected
    assert target == before


@pytest.mark.parametrize(
    ("patch", "message", "code"),
    [
        pytest.param(
            [{"op": "test", "path": "/metadata/name", "value": "other"}],
            r"operation 0 \('test' at path '/metadata/name'\).*testing value",
            422,
            id="test-fails",
        ),
        pytest.param(
            [{"op": "test", "path": "/count", "value": True}],
            r"'test' at path '/count'",
            422,
            id="test-true-is-not-1",
        ),
        pytest.param(
            [{"op": "test", "path": "/count", "value": 1.0}],
            r"'test' at path '/count'",
            422,
            id="test-1.0-is-not-1",
        ),
        pytest.param(
            [{"op": "test", "path": "/missing", "value": 1}],
            r"'test' at path '/missing'",
            422,
            id="test-missing-path",
        ),
        pytest.param(
            [{"op": "add", "path": "/a", "value": 1}, {"op": "remove", "path": "/nope"}],
            r"operation 1 \('remove' at path '/nope'\)",
            422,
            id="remove-missing-path",
        ),
        pytest.param(
            [{"op": "replace", "path": "/x/y", "value": 1}],
            r"'replace' at path '/x/y'",
            422,
            id="replace-missing-parent",
        ),
        pytest.param(
            [{"op": "add", "path": "/list/9", "value": 1}],
            r"'add' at path '/list/9'",
            422,
            id="add-out-of-range",
        ),
        pytest.param(
            [{"op": "frobnicate", "path": "/a"}],
            "invalid json patch operation 0",
            400,
            id="unknown-op",
        ),
        pytest.param([{"path": "/a"}], "invalid json patch", 400, id="missing-op"),
        pytest.param(
            [{"op": "add", "path": "a", "value": 1}],
            "invalid json patch",
            400,
            id="path-without-slash",
        ),
        pytest.param(["add"], "invalid json patch", 400, id="operation-not-object"),
        pytest.param(
            {"op": "add", "path": "/a", "value": 1}, "must be an array", 400, id="not-a-list"
        ),
    ],
)
def test_json_patch_errors(patch: Any, message: str, code: int) -> None:
    target = {"metadata": {"name": "n"}, "count": 1, "list": [1]}
    before = copy.deepcopy(target)
    with pytest.raises(PatchError, match=message) as info:
        apply_json_patch(target, patch)
    assert info.value.code == code
    assert target == before


# --------------------------------------------------------------------------------------------
# apply_patch dispatch
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("content_type", "body", "expected_labels"),
    [
        pytest.param(
            MERGE_PATCH, b'{"metadata": {"labels": {"a": null, "b": "2"}}}', {"b": "2"}, id="merge"
        ),
        pytest.param(
            "application/merge-patch+json; charset=utf-8",
            b'{"metadata": {"labels": {"c": "3"}}}',
            {"a": "1", "c": "3"},
            id="merge-with-charset",
        ),
        pytest.param(
            "Application/Strategic-Merge-Patch+JSON",
            b'{"metadata": {"labels": {"a": null}}}',
            {},
            id="strategic-case-insensitive",
        ),
        pytest.param(
            JSON_PATCH,
            b'[{"op": "add", "path": "/metadata/labels/z", "value": "9"}]',
            {"a": "1", "z": "9"},
            id="json-patch",
        ),
        pytest.param(
            STRATEGIC_MERGE_PATCH,
            '{"metadata": {"labels": {"s": "t"}}}',
            {"a": "1", "s": "t"},
            id="str-body",
        ),
    ],
)
def test_apply_patch_dispatch(
    content_type: str, body: bytes | str, expected_labels: dict[str, str]
) -> None:
    target = {**_pod(), "metadata": {"name": "p", "labels": {"a": "1"}}}
    before = copy.deepcopy(target)
    result = apply_patch(content_type, target, body)
    assert result["metadata"]["labels"] == expected_labels
    assert target == before


@pytest.mark.parametrize(
    ("content_type", "body", "kwargs", "error", "code"),
    [
        pytest.param(
            "application/json", b"{}", {}, UnsupportedPatchType, 415, id="plain-json-unsupported"
        ),
        pytest.param(
            "application/apply-patch+yaml",
            b"{}",
            {},
            UnsupportedPatchType,
            415,
            id="apply-patch-unsupported",
        ),
        pytest.param("", b"{}", {}, UnsupportedPatchType, 415, id="empty-content-type"),
        pytest.param(
            STRATEGIC_MERGE_PATCH,
            b"{}",
            {"strategic_supported": False},
            UnsupportedPatchType,
            415,
            id="strategic-disabled",
        ),
        pytest.param(
            STRATEGIC_MERGE_PATCH,
            b"{}",
            {"kind_path": ("stable.example.com", "CronTab")},
            UnsupportedPatchType,
            415,
            id="strategic-custom-resource",
        ),
        pytest.param(MERGE_PATCH, b"{not json", {}, PatchError, 400, id="body-not-json"),
        pytest.param(JSON_PATCH, b"", {}, PatchError, 400, id="empty-body"),
        pytest.param(
            STRATEGIC_MERGE_PATCH, b"[1, 2", {}, PatchError, 400, id="strategic-body-not-json"
        ),
        pytest.param(MERGE_PATCH, b"[1, 2]", {}, PatchError, 400, id="merge-patch-not-object"),
        pytest.param(
            STRATEGIC_MERGE_PATCH, b'"x"', {}, PatchError, 400, id="strategic-patch-not-object"
        ),
        pytest.param(JSON_PATCH, b'{"op": "add"}', {}, PatchError, 400, id="json-patch-not-list"),
        pytest.param(
            JSON_PATCH,
            b'[{"op": "replace", "path": "", "value": 5}]',
            {},
            PatchError,
            422,
            id="json-patch-result-not-object",
        ),
        pytest.param(
            JSON_PATCH,
            b'[{"op": "test", "path": "/kind", "value": "Node"}]',
            {},
            PatchError,
            422,
            id="json-patch-test-fails",
        ),
    ],
)
def test_apply_patch_errors(
    content_type: str, body: bytes, kwargs: dict[str, Any], error: type[PatchError], code: int
) -> None:
    target = _pod()
    before = copy.deepcopy(target)
    with pytest.raises(error) as info:
        apply_patch(content_type, target, body, **kwargs)
    assert info.value.code == code
    assert str(info.value)
    if error is PatchError:
        assert not isinstance(info.value, UnsupportedPatchType)
    assert target == before


def test_unsupported_content_type_message_lists_accepted_types() -> None:
    with pytest.raises(UnsupportedPatchType) as info:
        apply_patch("text/plain", _pod(), b"{}")
    assert info.value.media_type == "text/plain"
    assert set(info.value.accepted) == {JSON_PATCH, MERGE_PATCH, STRATEGIC_MERGE_PATCH}
    assert "unknown format" in str(info.value)


def test_strategic_kind_comes_from_target() -> None:
    node = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "n"},
        "spec": {"podCIDRs": ["a"]},
    }
    result = apply_patch(STRATEGIC_MERGE_PATCH, node, b'{"spec": {"podCIDRs": ["b"]}}')
    assert result["spec"]["podCIDRs"] == ["b", "a"]
    assert kind_path_of({"apiVersion": "apps/v1", "kind": "Deployment"}) == ("apps", "Deployment")
    assert kind_path_of({"apiVersion": "v1", "kind": "Pod"}) == ("", "Pod")
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "spec": {}}
    with pytest.raises(UnsupportedPatchType):
        apply_patch(STRATEGIC_MERGE_PATCH, widget, b"{}")
    assert apply_patch(MERGE_PATCH, widget, b'{"spec": {"a": 1}}')["spec"] == {"a": 1}


# --------------------------------------------------------------------------------------------
# Immutability and schema table
# --------------------------------------------------------------------------------------------


def test_inputs_are_never_mutated_or_aliased() -> None:
    target = {
        **_pod(containers=[{"name": "a", "image": "a:1", "env": [{"name": "X", "value": "1"}]}]),
        "metadata": {"name": "p", "labels": {"a": "1"}, "finalizers": ["f"]},
    }
    snapshot = copy.deepcopy(target)
    smp = {
        "metadata": {"labels": {"a": None}, "finalizers": ["g"]},
        "spec": {
            "tolerations": [{"key": "t"}],
            "containers": [{"name": "a", "env": [{"name": "Y", "value": "2"}]}],
        },
    }
    smp_snapshot = copy.deepcopy(smp)
    merge = {"spec": {"tolerations": [{"key": "t"}]}}
    jsonp = [{"op": "add", "path": "/spec/tolerations", "value": [{"key": "t"}]}]
    results = [
        apply_strategic_merge_patch(target, smp, POD),
        apply_merge_patch(target, merge),
        apply_json_patch(target, jsonp),
        apply_patch(STRATEGIC_MERGE_PATCH, target, orjson.dumps(smp)),
        apply_patch(MERGE_PATCH, target, orjson.dumps(merge)),
        apply_patch(JSON_PATCH, target, orjson.dumps(jsonp)),
    ]
    assert target == snapshot
    assert smp == smp_snapshot
    for result in results:
        result["metadata"]["name"] = "changed"
        result["spec"]["containers"][0]["image"] = "changed"
        result["spec"]["tolerations"][0]["key"] = "changed"
    assert target == snapshot
    assert smp == smp_snapshot
    assert merge == {"spec": {"tolerations": [{"key": "t"}]}}
    assert jsonp[0]["value"] == [{"key": "t"}]


def _walk(
    fields: dict[str, FieldStrategy] | Any, path: str = ""
) -> list[tuple[str, FieldStrategy]]:
    out: list[tuple[str, FieldStrategy]] = []
    for name, meta in fields.items():
        out.append((f"{path}.{name}".lstrip("."), meta))
        out.extend(_walk(meta.fields, f"{path}.{name}"))
    return out


def test_schema_table_covers_required_kinds_and_tags() -> None:
    for kind_path in [
        ("", "Pod"),
        ("", "Node"),
        ("", "Namespace"),
        ("", "Service"),
        ("", "Event"),
        ("", "ConfigMap"),
        ("", "Secret"),
        ("apps", "Deployment"),
        ("apps", "ReplicaSet"),
        ("apps", "DaemonSet"),
        ("apps", "StatefulSet"),
        ("batch", "Job"),
        ("policy", "PodDisruptionBudget"),
        ("coordination.k8s.io", "Lease"),
        ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ]:
        assert strategic_merge_supported(kind_path), kind_path
    pod = dict(_walk(dict(STRATEGIC_MERGE_SCHEMAS[POD])))
    assert pod["spec.containers"] == pod["spec.initContainers"] == pod["spec.ephemeralContainers"]
    assert pod["spec.containers.env"].merge_key == "name"
    assert pod["spec.containers.ports"].merge_key == "containerPort"
    assert pod["spec.containers.volumeMounts"].merge_key == "mountPath"
    assert pod["spec.containers.volumeDevices"].merge_key == "devicePath"
    assert pod["spec.topologySpreadConstraints"].merge_key == "topologyKey"
    assert pod["spec.volumes"].strategy == ("merge", "retainKeys")
    assert pod["status.podIPs"].merge_key == "ip"
    assert pod["metadata.finalizers"] == FieldStrategy(("merge",))
    assert pod["metadata.ownerReferences"].merge_key == "uid"
    for absent in (
        "spec.tolerations",
        "spec.readinessGates",
        "status.containerStatuses",
        "status.initContainerStatuses",
        "status.ephemeralContainerStatuses",
    ):
        assert absent not in pod
    assert "spec.taints" not in dict(_walk(dict(STRATEGIC_MERGE_SCHEMAS[("", "Node")])))
    for (group, kind), schema in STRATEGIC_MERGE_SCHEMAS.items():
        for path, meta in _walk(dict(schema)):
            assert set(meta.strategy) <= {"merge", "replace", "retainKeys"}, (group, kind, path)
            if meta.merge_key:
                assert meta.merges_list, (group, kind, path)
