"""A pool that kept refusing a pod: the copy that tries the next pool."""

from __future__ import annotations

from typing import Any

import pytest

from pyscheduler.virtual.refusals import next_pool_pod


def refused_pod(name: str = "web", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "ns", "uid": "u-1",
                         "resourceVersion": "7",
                         "labels": {"app": "web", "wssp/virtual-node": "true",
                                    "wssp/cloud-pool": "aci"},
                         "annotations": {"wssp/cloud-instance": "aci/i-1", "team": "a"},
                         **meta},
            "spec": {"nodeName": "wssp-virtual-aci", "schedulerName": "pyscheduler",
                     "containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": "Failed", "reason": "ProviderFailed"}}


def test_a_bare_pod_refused_by_its_pool_gets_an_unbound_copy() -> None:
    copy = next_pool_pod(refused_pod(), pools=3)
    assert copy is not None
    meta = copy["metadata"]
    assert meta["name"] == "web-p2" and meta["namespace"] == "ns"
    assert "uid" not in meta and "resourceVersion" not in meta and "status" not in copy
    assert meta["labels"] == {"app": "web"}
    assert meta["annotations"] == {"team": "a", "wssp/burst-attempt": "2",
                                   "wssp/replaces": "web (web u-1)"}
    assert "nodeName" not in copy["spec"] and copy["spec"]["schedulerName"] == "pyscheduler"
    # The copy refused in its turn: the next copy keeps the first pod's name as its base.
    again = next_pool_pod({**copy, "metadata": {**meta, "uid": "u-2"}}, pools=3)
    assert again is not None
    assert again["metadata"]["name"] == "web-p3"
    assert again["metadata"]["annotations"]["wssp/replaces"] == "web (web-p2 u-2)"
    # Every pool had its try.
    assert next_pool_pod({**again, "metadata": {**again["metadata"], "uid": "u-3"}},
                         pools=3) is None


@pytest.mark.parametrize("meta", [
    pytest.param({"ownerReferences": [{"kind": "ReplicaSet", "name": "web-1", "uid": "r",
                                       "apiVersion": "apps/v1", "controller": True}]},
                 id="owned: its controller replaces it"),
    pytest.param({"deletionTimestamp": "2026-01-01T00:00:00Z"}, id="being deleted"),
])
def test_no_copy_for_pods_a_controller_replaces_or_being_deleted(meta: dict[str, Any]) -> None:
    assert next_pool_pod(refused_pod(**meta), pools=3) is None


def test_one_pool_means_no_next_pool_and_long_names_stay_valid() -> None:
    assert next_pool_pod(refused_pod(), pools=1) is None
    long = "a" * 250 + "-b"
    copy = next_pool_pod(refused_pod(long), pools=2)
    assert copy is not None
    name = copy["metadata"]["name"]
    assert len(name) <= 253 and name.endswith("-p2") and not name[:-3].endswith("-")

