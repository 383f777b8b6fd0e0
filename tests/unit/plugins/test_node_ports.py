"""NodePorts: host port conflicts by protocol, port and address."""

from __future__ import annotations

from typing import Any

import pytest

from pyscheduler.plugins.node_ports import ERR_REASON, NAME, NodePorts
from tests.unit.plugins.builders import PodBuilder, context, make_node, make_pod, outcome

CONFLICT = [(ERR_REASON, False)]


def running(*ports: tuple[int, str, str]) -> list[dict[str, Any]]:
    pod = make_pod("existing")
    for port, protocol, ip in ports:
        pod.host_port(port, protocol, ip)
    return [pod.obj()]


@pytest.mark.parametrize(("pod", "used", "want"), [
    pytest.param(make_pod().host_port(8080), running((8080, "TCP", "")), CONFLICT,
                 id="same port and protocol on all addresses"),
    pytest.param(make_pod().host_port(8080), running((8081, "TCP", "")), [],
                 id="different port"),
    pytest.param(make_pod().host_port(8080, "UDP"), running((8080, "TCP", "")), [],
                 id="different protocol"),
    pytest.param(make_pod().host_port(8080, ip="10.0.0.1"),
                 running((8080, "TCP", "10.0.0.2")), [], id="different specific addresses"),
    pytest.param(make_pod().host_port(8080, ip="10.0.0.1"),
                 running((8080, "TCP", "10.0.0.1")), CONFLICT, id="same specific address"),
    pytest.param(make_pod().host_port(8080, ip="10.0.0.1"), running((8080, "TCP", "")),
                 CONFLICT, id="wildcard in use conflicts with a specific address"),
    pytest.param(make_pod().host_port(8080), running((8080, "TCP", "10.0.0.1")), CONFLICT,
                 id="wildcard request conflicts with any address in use"),
    pytest.param(make_pod().host_port(9000).host_port(8080, "UDP"),
                 running((8080, "UDP", ""), (9001, "TCP", "")), CONFLICT,
                 id="any one conflicting port fails the node"),
    pytest.param(make_pod().host_port(8080, "SCTP"), running((8080, "SCTP", "")), CONFLICT,
                 id="SCTP conflicts with SCTP"),
])
def test_filter(pod: PodBuilder, used: list[dict[str, Any]],
                want: list[tuple[str, bool]]) -> None:
    ctx = context(pod.obj(), [make_node("n1").obj(), make_node("free").obj()],
                  pods={"n1": used})
    assert outcome(NodePorts().filter(ctx), ctx.table) == {"n1": want, "free": []}


def test_host_network_container_ports_are_host_ports() -> None:
    pod = make_pod().obj()
    pod["spec"]["hostNetwork"] = True
    pod["spec"]["containers"][0]["ports"] = [{"containerPort": 9100}]
    ctx = context(pod, [make_node("n1").obj()], pods={"n1": running((9100, "TCP", ""))})
    assert outcome(NodePorts().filter(ctx), ctx.table) == {"n1": CONFLICT}


def test_port_freed_when_the_pod_leaves() -> None:
    ctx = context(make_pod().host_port(80).obj(), [make_node("n1").obj()],
                  pods={"n1": running((80, "TCP", ""))})
    ctx.table.remove_pod(0, "uid-default-existing")
    assert outcome(NodePorts().filter(ctx), ctx.table) == {"n1": []}


@pytest.mark.parametrize("pod", [
    pytest.param(make_pod().req(cpu="1"), id="no host ports"),
    pytest.param(make_pod().host_port(7777), id="ports nobody uses"),
])
def test_does_not_apply(pod: PodBuilder) -> None:
    ctx = context(pod.obj(), [make_node("n1").obj()], pods={"n1": running((80, "TCP", ""))})
    assert NodePorts().filter(ctx).passed is None


def test_name() -> None:
    assert NAME == NodePorts.name == "NodePorts"


def _with_init_port(obj: dict[str, Any], port: int, *, sidecar: bool) -> dict[str, Any]:
    init: dict[str, Any] = {"name": f"init-{port}", "image": "x",
                            "ports": [{"containerPort": port, "hostPort": port}]}
    if sidecar:
        init["restartPolicy"] = "Always"
    obj["spec"].setdefault("initContainers", []).append(init)
    return obj


@pytest.mark.parametrize(("sidecar", "want"), [
    pytest.param(False, [], id="an ordinary init container's port is free once it has run"),
    pytest.param(True, CONFLICT, id="a sidecar's port is held while the pod runs"),
])
def test_init_container_ports_of_the_incoming_pod(sidecar: bool,
                                                  want: list[tuple[str, bool]]) -> None:
    # kube's GetHostPorts: app containers and restartable (sidecar) init containers only.
    pod = _with_init_port(make_pod().obj(), 8080, sidecar=sidecar)
    ctx = context(pod, [make_node("n1").obj()], pods={"n1": running((8080, "TCP", ""))})
    assert outcome(NodePorts().filter(ctx), ctx.table) == {"n1": want}


@pytest.mark.parametrize(("sidecar", "want"), [
    pytest.param(False, [], id="an ordinary init container of a pod on the node holds nothing"),
    pytest.param(True, CONFLICT, id="a sidecar of a pod on the node holds its port"),
])
def test_init_container_ports_of_pods_on_the_node(sidecar: bool,
                                                  want: list[tuple[str, bool]]) -> None:
    existing = _with_init_port(make_pod("existing").obj(), 8080, sidecar=sidecar)
    ctx = context(make_pod().host_port(8080).obj(), [make_node("n1").obj()],
                  pods={"n1": [existing]})
    assert outcome(NodePorts().filter(ctx), ctx.table) == {"n1": want}
