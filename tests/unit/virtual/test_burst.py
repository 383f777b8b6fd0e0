"""Which pods may burst, and where: table-driven over the reasons an operator reads."""

from __future__ import annotations

from typing import Any

import pytest

from pyscheduler.framework.pod import pod_info
from pyscheduler.virtual.burst import Burster, PoolSettings, burst_blocker, next_pool_pod
from tests.unit.plugins.builders import expr, make_pod

GI = 2**30


def burster(**caps: Any) -> Burster:
    b = Burster([PoolSettings("aci", "azure", max_pods=caps.get("max_pods"),
                              max_instance_cpu_millis=4000, max_instance_memory_bytes=16 * GI),
                 PoolSettings("eci", "alibaba")])
    b.node_seen("wssp-virtual-aci", 10_000, 40 * GI, 100, True,
                labels={"type": "virtual-kubelet", "wssp/cloud-platform": "azure"})
    b.node_seen("wssp-virtual-eci", 100_000, 400 * GI, 1000, True,
                labels={"type": "virtual-kubelet", "wssp/cloud-platform": "alibaba"})
    return b


def choose(b: Burster, obj: dict[str, Any]) -> tuple[str | None, str]:
    info = pod_info(obj)
    d = b.choose(obj, info.requests.get("cpu", 0), info.requests.get("memory", 0),
                 node_selector=info.node_selector, required_terms=info.required_terms)
    return d.node, d.reason


@pytest.mark.parametrize(("pod", "reason"), [
    pytest.param(make_pod().annotation("wssp/burst", "never").obj(),
                 'the pod is annotated wssp/burst: "never"', id="opted out"),
    pytest.param({**make_pod().obj(), "metadata": {"name": "ds", "ownerReferences": [
        {"kind": "DaemonSet", "name": "agent", "apiVersion": "apps/v1", "uid": "x"}]}},
        "DaemonSet pods run on every real node and never burst", id="daemonset"),
    pytest.param(make_pod().host_port(8080).obj(), "container c0 uses hostPort 8080",
                 id="host port"),
])
def test_pods_that_never_burst(pod: dict[str, Any], reason: str) -> None:
    assert burst_blocker(pod) == reason


def test_host_network_and_host_volumes_never_burst() -> None:
    pod = make_pod().obj()
    pod["spec"]["hostNetwork"] = True
    assert burst_blocker(pod) == "the pod uses hostNetwork"
    pod = make_pod().obj()
    pod["spec"]["volumes"] = [{"name": "logs", "hostPath": {"path": "/var/log"}}]
    assert burst_blocker(pod) == "volume logs is a hostPath volume"
    pod["spec"]["volumes"] = [{"name": "ssd", "local": {"path": "/mnt/ssd"}}]
    assert burst_blocker(pod) == "volume ssd is a local volume"


def test_pools_are_tried_in_order_and_filled_to_their_quota() -> None:
    b = burster()
    pod = make_pod().req(cpu="4", memory="1Gi").obj()
    assert choose(b, pod)[0] == "wssp-virtual-aci"
    b.place("wssp-virtual-aci", "a", 4000, GI)
    b.place("wssp-virtual-aci", "b", 4000, GI)
    # aci has 2000m left: the next pod falls through to eci.
    assert choose(b, pod)[0] == "wssp-virtual-eci"
    b.forget("b")
    assert choose(b, pod)[0] == "wssp-virtual-aci"


def test_platform_label_picks_the_pool_or_says_it_names_none() -> None:
    b = burster()
    pod = make_pod().label("wssp/cloud-platform", "alibaba").obj()
    assert choose(b, pod)[0] == "wssp-virtual-eci"
    pod = make_pod().label("wssp/cloud-platform", "gcp").obj()
    assert choose(b, pod) == (None, "cannot burst: label wssp/cloud-platform=gcp names no "
                                    "configured pool (platforms: alibaba, azure)")


def test_per_instance_limits_and_pod_caps_are_reasons() -> None:
    b = burster(max_pods=1)
    pod = make_pod().req(cpu="8").label("wssp/cloud-platform", "azure").obj()
    assert choose(b, pod) == (None, "cannot burst: pool aci: cpu request 8000m exceeds the "
                                    "per-instance limit 4000m")
    small = make_pod().req(cpu="1").label("wssp/cloud-platform", "azure").obj()
    b.place("wssp-virtual-aci", "x", 1000, 0)
    assert choose(b, small) == (None, "cannot burst: pool aci: 1 pods, cap 1")


def test_node_constraints_must_match_the_virtual_node() -> None:
    b = burster()
    assert choose(b, make_pod().node_selector(disk="nvme").obj())[0] is None
    pod = make_pod().required_term(expr("type", "In", "virtual-kubelet")).obj()
    assert choose(b, pod)[0] == "wssp-virtual-aci"


def test_a_virtual_node_that_is_not_ready_takes_nothing() -> None:
    b = burster()
    b.node_gone("wssp-virtual-aci")
    b.node_gone("wssp-virtual-eci")
    assert choose(b, make_pod().obj()) == (
        None, "cannot burst: pool aci: virtual node not ready; pool eci: virtual node not ready")


def test_a_pool_that_kept_refusing_a_size_is_skipped_until_the_refusal_ages_out() -> None:
    now = [0.0]
    b = Burster([PoolSettings("aci", "azure"), PoolSettings("eci", "alibaba")],
                refusal_ttl=60, clock=lambda: now[0])
    for name in ("wssp-virtual-aci", "wssp-virtual-eci"):
        b.node_seen(name, 100_000, 400 * GI, 100, True)
    big = make_pod().req(cpu="2", memory="1Gi").obj()
    small = make_pod().req(cpu="500m", memory="1Gi").obj()
    b.refused("wssp-virtual-aci", 2000, GI)
    assert choose(b, big)[0] == "wssp-virtual-eci"      # the next pool
    assert choose(b, small)[0] == "wssp-virtual-aci"    # smaller pods still fit there
    now[0] = 61.0
    assert choose(b, big)[0] == "wssp-virtual-aci"


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

