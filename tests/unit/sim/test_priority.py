"""PriorityClasses and the Priority admission plugin of the embedded API server, through the
registry (no HTTP): kube's defaults, validation messages and admission answers."""

from __future__ import annotations

from typing import Any

import pytest

from pyscheduler_sim import errors
from pyscheduler_sim.registry import Registry

Obj = dict[str, Any]


@pytest.fixture
def registry() -> Registry:
    return Registry()


def pc(name: str, value: int, **extra: Any) -> Obj:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value, **extra}


def pod(name: str = "", **spec: Any) -> Obj:
    meta = {"name": name} if name else {"generateName": "p-"}
    return {"metadata": meta, "spec": {"containers": [{"name": "c", "image": "pause"}], **spec}}


def causes(exc: errors.ApiError) -> list[str]:
    assert exc.details is not None
    return [f"{c['field']}: {c['message']}" for c in exc.details["causes"]]


def test_a_new_cluster_has_the_system_classes(registry: Registry) -> None:
    classes = {s.name: s.view for s in registry.store.iter(registry.priority_classes)}
    assert set(classes) == {"system-node-critical", "system-cluster-critical"}
    node = classes["system-node-critical"]
    assert (node["value"], node["preemptionPolicy"], node["metadata"]["generation"]) == (
        2000001000, "PreemptLowerPriority", 1)
    assert node["description"] == ("Used for system critical pods that must not be moved from "
                                   "their current node.")
    assert "globalDefault" not in node
    assert classes["system-cluster-critical"]["value"] == 2000000000


def test_class_defaults_and_generation_that_updates_do_not_bump(registry: Registry) -> None:
    created = registry.create(registry.priority_classes, "", pc("batch", 100))
    assert created["preemptionPolicy"] == "PreemptLowerPriority"
    assert created["metadata"]["generation"] == 1
    created["description"] = "changed"
    updated = registry.update(registry.priority_classes, "", "batch", created)
    assert updated["description"] == "changed" and updated["metadata"]["generation"] == 1


@pytest.mark.parametrize("body,expected", [
    pytest.param(pc("too-high", 1_000_000_001),
                 ["value: Forbidden: maximum allowed value of a user defined priority is "
                  "1000000000"], id="above the user maximum"),
    pytest.param(pc("system-mine", 10),
                 ["metadata.name: Forbidden: priority class names with 'system-' prefix are "
                  "reserved for system use only. error: system-mine is not a known system "
                  "priority class"], id="reserved prefix"),
    pytest.param(pc("system-node-critical", 10),
                 ["metadata.name: Forbidden: priority class names with 'system-' prefix are "
                  "reserved for system use only. error: value of system-node-critical "
                  "PriorityClass must be 2000001000"], id="system name with another value"),
    pytest.param(pc("system-cluster-critical", 2_000_000_000, globalDefault=True),
                 ["metadata.name: Forbidden: priority class names with 'system-' prefix are "
                  "reserved for system use only. error: globalDefault of "
                  "system-cluster-critical PriorityClass must be false"],
                 id="system class as global default"),
    pytest.param(pc("odd", 1, preemptionPolicy="Sometimes"),
                 ['preemptionPolicy: Unsupported value: "Sometimes": supported values: '
                  '"PreemptLowerPriority", "Never"'], id="unknown preemption policy"),
    pytest.param(pc("blank", 1, preemptionPolicy=""),
                 ["preemptionPolicy: Required value"], id="empty preemption policy"),
    pytest.param(pc("Upper", 1),
                 ['metadata.name: Invalid value: "Upper": a lowercase RFC 1123 subdomain must '
                  "consist of lower case alphanumeric characters, '-' or '.', and must start "
                  "and end with an alphanumeric character (e.g. 'example.com', regex used for "
                  "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*"
                  "[a-z0-9])?)*')"], id="name not a DNS subdomain"),
])
def test_invalid_classes_are_refused(registry: Registry, body: Obj, expected: list[str]) -> None:
    with pytest.raises(errors.ApiError) as caught:
        registry.create(registry.priority_classes, "", body)
    assert caught.value.code == 422
    assert causes(caught.value) == expected


def test_the_maximum_user_value_is_allowed(registry: Registry) -> None:
    assert registry.create(registry.priority_classes, "", pc("top", 1_000_000_000))["value"] == \
        1_000_000_000


@pytest.mark.parametrize("change,expected", [
    pytest.param({"value": 7}, ["value: Forbidden: may not be changed in an update."],
                 id="value"),
    pytest.param({"preemptionPolicy": "Never"},
                 ['preemptionPolicy: Invalid value: "Never": field is immutable'],
                 id="preemption policy"),
])
def test_value_and_policy_are_immutable(registry: Registry, change: Obj,
                                        expected: list[str]) -> None:
    created = registry.create(registry.priority_classes, "", pc("fixed", 5))
    with pytest.raises(errors.ApiError) as caught:
        registry.update(registry.priority_classes, "", "fixed", {**created, **change})
    assert caught.value.code == 422 and causes(caught.value) == expected


def test_only_one_global_default(registry: Registry) -> None:
    registry.create(registry.priority_classes, "", pc("first", 10, globalDefault=True))
    with pytest.raises(errors.ApiError) as caught:
        registry.create(registry.priority_classes, "", pc("second", 20, globalDefault=True))
    assert (caught.value.code, caught.value.reason, caught.value.message) == (
        403, "Forbidden", 'priorityclasses.scheduling.k8s.io "second" is forbidden: '
                          "PriorityClass first is already marked as default. Only one default "
                          "can exist")
    # Marking another class default later is refused the same way; the default itself may
    # be updated.
    other = registry.create(registry.priority_classes, "", pc("second", 20))
    with pytest.raises(errors.ApiError) as caught:
        registry.update(registry.priority_classes, "", "second", {**other, "globalDefault": True})
    assert caught.value.code == 403
    first = registry.get(registry.priority_classes, "", "first")
    registry.update(registry.priority_classes, "", "first", {**first, "description": "d"})


def test_system_classes_cannot_be_deleted_one_by_one(registry: Registry) -> None:
    with pytest.raises(errors.ApiError) as caught:
        registry.delete(registry.priority_classes, "", "system-node-critical")
    assert (caught.value.code, caught.value.message) == (
        403, 'priorityclasses.scheduling.k8s.io "system-node-critical" is forbidden: this is a '
             "system priority class and cannot be deleted")
    registry.create(registry.priority_classes, "", pc("mine", 1))
    assert registry.delete(registry.priority_classes, "", "mine")[0] == 200
    # A DeleteCollection goes through the generic store, which has no such rule (as in kube).
    assert registry.delete(registry.priority_classes, "", "system-cluster-critical",
                           collection=True)[0] == 200


# -- the Priority admission plugin ------------------------------------------------------------

def test_pod_priority_comes_from_its_class(registry: Registry) -> None:
    registry.create(registry.priority_classes, "", pc("gold", 1000, preemptionPolicy="Never"))
    created = registry.create(registry.pods, "default", pod(priorityClassName="gold"))
    spec = created["spec"]
    assert (spec["priority"], spec["preemptionPolicy"], spec["priorityClassName"]) == (
        1000, "Never", "gold")
    system = registry.create(registry.pods, "kube-system",
                             pod(priorityClassName="system-node-critical"))
    assert system["spec"]["priority"] == 2000001000


def test_pod_without_class_gets_zero_or_the_lowest_global_default(registry: Registry) -> None:
    plain = registry.create(registry.pods, "default", pod())["spec"]
    assert (plain["priority"], plain["preemptionPolicy"]) == (0, "PreemptLowerPriority")
    assert "priorityClassName" not in plain
    registry.create(registry.priority_classes, "", pc("low", 5, globalDefault=True,
                                                      preemptionPolicy="Never"))
    # Two defaults can only come from a race in kube (admission refuses a second one); the
    # lowest value wins there. The race is staged by writing to the store directly.
    registry.store.put(registry.priority_classes, {**pc("high", 50, globalDefault=True),
                                                   "metadata": {"name": "high", "uid": "x"}})
    spec = registry.create(registry.pods, "default", pod())["spec"]
    assert (spec["priority"], spec["preemptionPolicy"], spec["priorityClassName"]) == (
        5, "Never", "low")


@pytest.mark.parametrize("spec,message", [
    pytest.param({"priorityClassName": "nope"}, "no PriorityClass with name nope was found",
                 id="unknown class"),
    pytest.param({"priorityClassName": "gold", "priority": 7},
                 "the integer value of priority (7) must not be provided in pod spec; priority "
                 "admission controller computed 1000 from the given PriorityClass name",
                 id="own priority against the class"),
    pytest.param({"priority": 3},
                 "the integer value of priority (3) must not be provided in pod spec; priority "
                 "admission controller computed 0 from the given PriorityClass name",
                 id="own priority without class"),
    pytest.param({"priorityClassName": "gold", "preemptionPolicy": "Never"},
                 "the string value of PreemptionPolicy (Never) must not be provided in pod "
                 "spec; priority admission controller computed PreemptLowerPriority from the "
                 "given PriorityClass name", id="own preemption policy against the class"),
])
def test_pods_disagreeing_with_their_class_are_forbidden(registry: Registry, spec: Obj,
                                                         message: str) -> None:
    registry.create(registry.priority_classes, "", pc("gold", 1000))
    with pytest.raises(errors.ApiError) as caught:
        registry.create(registry.pods, "default", pod("web", **spec))
    assert (caught.value.code, caught.value.reason) == (403, "Forbidden")
    assert caught.value.message == f'pods "web" is forbidden: {message}'
    assert caught.value.details == {"name": "web", "kind": "pods"}


def test_forbidden_pod_is_named_by_its_generate_name(registry: Registry) -> None:
    with pytest.raises(errors.ApiError) as caught:
        registry.create(registry.pods, "default", pod(priorityClassName="nope"))
    assert caught.value.message == 'pods "p-" is forbidden: no PriorityClass with name nope ' \
                                   "was found"


def test_priority_that_agrees_is_accepted(registry: Registry) -> None:
    registry.create(registry.priority_classes, "", pc("gold", 1000))
    spec = registry.create(registry.pods, "default",
                           pod(priorityClassName="gold", priority=1000))["spec"]
    assert spec["priority"] == 1000


def test_update_keeps_the_priority_an_update_leaves_out(registry: Registry) -> None:
    registry.create(registry.priority_classes, "", pc("gold", 1000))
    created = registry.create(registry.pods, "default", pod("web", priorityClassName="gold"))
    created["spec"].pop("priority")
    created["metadata"]["labels"] = {"a": "b"}
    updated = registry.update(registry.pods, "default", "web", created)
    assert updated["spec"]["priority"] == 1000 and updated["metadata"]["labels"] == {"a": "b"}
    # Changing it is still refused by pod update validation.
    updated["spec"]["priority"] = 5
    with pytest.raises(errors.ApiError) as caught:
        registry.update(registry.pods, "default", "web", updated)
    assert caught.value.code == 422


def test_admission_comes_after_the_namespace_check(registry: Registry) -> None:
    """NamespaceLifecycle runs first: a pod in a missing namespace is 404 whatever its class."""
    with pytest.raises(errors.ApiError) as caught:
        registry.create(registry.pods, "nowhere", pod("web", priorityClassName="nope"))
    assert (caught.value.code, caught.value.message) == (404, 'namespaces "nowhere" not found')
