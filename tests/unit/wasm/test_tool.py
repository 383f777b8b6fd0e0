"""``pyscheduler fragment test``'s what-if: a fragment's verdicts and scores per node, pods placed
one after another as the scheduler would place them, virtual nodes left to the burst pass."""

from __future__ import annotations

from typing import Any

import pytest

from pyscheduler.api.names import POOL_LABEL, TYPE_LABEL, TYPE_VIRTUAL_KUBELET
from pyscheduler.wasm.tool import VIRTUAL_NODE_REASON, format_reports, what_if

wasmtime = pytest.importorskip("wasmtime")

from tests.integration.test_fragments import uniform_wat  # noqa: E402


def node(name: str, cpu: str = "2", *, labels: dict[str, str] | None = None,
         taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name,
                                                  **(labels or {})}},
            "spec": {"taints": taints or []},
            "status": {"allocatable": {"cpu": cpu, "memory": "8Gi", "pods": "110"}}}


def pod(name: str, cpu: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"},
            "spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]}}


VIRTUAL = node("wssp-virtual-aci", "100", labels={TYPE_LABEL: TYPE_VIRTUAL_KUBELET,
                                                    POOL_LABEL: "aci"},
               taints=[{"key": "virtual-kubelet.io/provider", "value": "azure",
                        "effect": "NoSchedule"}])


def test_pods_are_placed_one_after_another_on_real_nodes_only() -> None:
    module = wasmtime.wat2wasm(uniform_wat(score=70))
    reports = what_if(module, [node("a"), node("b"), VIRTUAL],
                      [pod("p1", "1500m"), pod("p2", "1500m"), pod("p3", "1500m")])
    placed = [r.node for r in reports]
    # An allow-all fragment in replace mode still cannot over-commit a node (invariant
    # filters), and never picks the virtual node: the third pod fits nowhere.
    assert sorted(placed[:2]) == ["a", "b"] and placed[2] is None
    assert reports[2].message == "0/2 nodes are available: 2 Insufficient cpu."
    first = reports[0].nodes
    assert first["wssp-virtual-aci"] == (False, VIRTUAL_NODE_REASON, None, None)
    assert first["a"][:3] == (True, "", 70) and first["b"][:3] == (True, "", 70)
    assert "wssp-virtual-aci  no" in format_reports(reports)


def test_a_fragment_rejection_is_reported_per_node() -> None:
    module = wasmtime.wat2wasm(uniform_wat(verdict=1, reason="not today"))
    [report] = what_if(module, [node("a"), node("b")], [pod("p", "100m")])
    assert report.node is None
    assert report.nodes["a"] == (False, "not today", None, None)
    assert report.message == "0/2 nodes are available: 2 not today."
