"""ReplicationControllers in the embedded API server (kube-scheduler lists them): kube's
defaults, validation messages, scale subresource and table."""

from __future__ import annotations

from typing import Any

import pytest

from pyscheduler_sim import errors
from pyscheduler_sim.registry import Registry
from pyscheduler_sim.tables import to_table

Obj = dict[str, Any]


@pytest.fixture
def registry() -> Registry:
    return Registry()


def rc(**spec: Any) -> Obj:
    return {"metadata": {"name": "web"},
            "spec": {"template": {"metadata": {"labels": {"app": "web"}},
                                  "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
                     **spec}}


def test_defaults_from_the_template(registry: Registry) -> None:
    rt = registry.type("", "v1", "replicationcontrollers")
    created = registry.create(rt, "default", rc())
    assert created["spec"]["selector"] == {"app": "web"}
    assert created["spec"]["replicas"] == 1
    assert created["metadata"]["labels"] == {"app": "web"}
    assert created["status"] == {"replicas": 0}
    assert created["spec"]["template"]["spec"]["restartPolicy"] == "Always"
    scale = registry.get_scale(rt, "default", "web")
    assert (scale["spec"]["replicas"], scale["status"]["selector"]) == (1, "app=web")
    cells = to_table("", "replicationcontrollers", [created])["rows"][0]["cells"]
    assert cells[:4] == ["web", 1, 0, 0] and cells[5:] == ["c", "nginx", "app=web"]


@pytest.mark.parametrize("change,expected", [
    pytest.param({"selector": {"app": "other"}},
                 ['spec.template.metadata.labels: Invalid value: {"app":"web"}: `selector` '
                  "does not match template `labels`"], id="selector not matching"),
    pytest.param({"replicas": -1},
                 ["spec.replicas: Invalid value: -1: must be greater than or equal to 0"],
                 id="negative replicas"),
    pytest.param({"template": {"metadata": {"labels": {"app": "web"}}, "spec": {
        "containers": [{"name": "c", "image": "nginx"}], "restartPolicy": "OnFailure",
        "activeDeadlineSeconds": 3}}},
        ['spec.template.spec.restartPolicy: Unsupported value: "OnFailure": supported values: '
         '"Always"',
         "spec.template.spec.activeDeadlineSeconds: Forbidden: activeDeadlineSeconds in "
         "ReplicationController is not Supported"], id="restart policy and deadline"),
])
def test_invalid_replication_controllers(registry: Registry, change: Obj,
                                         expected: list[str]) -> None:
    with pytest.raises(errors.ApiError) as caught:
        registry.create(registry.type("", "v1", "replicationcontrollers"), "default",
                        rc(**change))
    assert caught.value.details is not None
    assert [f"{c['field']}: {c['message']}" for c in caught.value.details["causes"]] == expected


def test_a_selector_is_required_without_template_labels(registry: Registry) -> None:
    body = rc()
    body["spec"]["template"]["metadata"] = {}
    with pytest.raises(errors.ApiError) as caught:
        registry.create(registry.type("", "v1", "replicationcontrollers"), "default", body)
    assert caught.value.details is not None
    assert [c["field"] for c in caught.value.details["causes"]] == ["spec.selector"]
