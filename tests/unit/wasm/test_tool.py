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


def test_every_stage_runs_offline_with_permit_holds_and_prebind_patches() -> None:
    from pyscheduler.wasm.resource import StageSpec
    from tests.integration.test_fragment_stages import stages_wat

    module = wasmtime.wat2wasm(stages_wat({
        "prefilter": (0, 0, "", ""), "reserve": (0, 0, "", ""),
        "permit": (2, 5000, "waiting for the batch", ""),
        "unreserve": (0, 0, "", ""),
        "prebind": (0, 0, "", "label team=ml\nlabel other=x"),
        "postfilter": (3, 0, "wait for room", "")}))
    reports = what_if(module, [node("a", "1"), node("b", "1")],
                      [pod("p1", "800m"), pod("p2", "800m"), pod("p3", "800m")],
                      prebind=StageSpec("extend", allowed_labels=("team",)))
    # No filter or score export: the built-ins place; every pod waits at permit holding its
    # room, so the third finds none and the post-filter says to wait.
    assert [r.outcome for r in reports] == ["waiting", "waiting", "unschedulable"]
    assert reports[0].stages == ("prefilter: pass", "reserve: ok",
                                 "permit: wait 5s: waiting for the batch")
    assert reports[2].stages == ("prefilter: pass", "postfilter: wait: wait for room")
    assert reports[2].message == "0/2 nodes are available: 2 Insufficient cpu."
    text = format_reports(reports)
    assert "still held at permit" in text and "postfilter: wait: wait for room" in text

    allow = wasmtime.wat2wasm(stages_wat({
        "permit": (0, 0, "", ""),
        "prebind": (0, 0, "", "label team=ml\nlabel other=x")}))
    [bound] = what_if(allow, [node("a")], [pod("p", "100m")],
                      prebind=StageSpec("extend", allowed_labels=("team", "other")))
    assert bound.outcome == "bound" and bound.node == "a"
    assert bound.patch == {"labels": {"team": "ml", "other": "x"}, "annotations": {}}
    assert bound.stages == ("permit: allow", "prebind: ok")
    # A key outside the allowlist fails the call as in the scheduler: nothing is added.
    [refused] = what_if(allow, [node("a")], [pod("p", "100m")],
                        prebind=StageSpec("extend", allowed_labels=("team",)))
    assert refused.patch is None
    assert refused.stages == ("permit: allow", "prebind: failed: output: label other is not "
                                               "allowed (spec.stages.prebind.allowedLabels: "
                                               "team)")


def test_the_cli_runs_the_gang_example_offline_and_shows_the_permit_holds(
        tmp_path: Any) -> None:
    """``pyscheduler fragment test`` on the gang example: the first two members are held at
    permit with the group's message, the third allows them all; the members of a group that
    cannot complete are reported still held."""
    import subprocess
    import sys
    from pathlib import Path

    import yaml

    gang = Path(__file__).resolve().parents[3] / "fragments" / "examples" / "gang" / "gang.wasm"
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump({"nodePools": [
        {"name": "n", "count": 3, "cpu": "4", "memory": "8Gi"}]}))

    def member(name: str, group: str, size: int) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": name, "namespace": "ml", "uid": f"uid-{name}",
            "labels": {"pod-group.wssp.io/name": group},
            "annotations": {"pod-group.wssp.io/min-member": str(size)}},
            "spec": {"containers": [{"name": "c", "image": "x",
                                     "resources": {"requests": {"cpu": "1"}}}]}}

    pods = tmp_path / "pods.yaml"
    pods.write_text(yaml.safe_dump_all(
        [member(f"w{i}", "trainer", 3) for i in range(3)] + [member("solo", "pair", 2)]))
    done = subprocess.run([sys.executable, "-m", "pyscheduler.cli", "fragment", "test",
                           str(gang), "--cluster", str(cluster), "--pods", str(pods),
                           "--fragment-config", '{"timeoutSeconds": 30}', "--json"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    reports = {r["pod"]: r for r in __import__("json").loads(done.stdout)}
    assert [reports[f"ml/w{i}"]["outcome"] for i in range(3)] == ["bound"] * 3
    assert reports["ml/w0"]["stages"] == [
        "prefilter: pass", "permit: wait 30s: waiting for pod group ml/trainer: 1 of 3 "
                           "members reserved", "allowed"]
    assert reports["ml/w2"]["stages"] == ["prefilter: pass", "permit: allow", "allows ml/w0",
                                          "allows ml/w1"]
    assert reports["ml/solo"]["outcome"] == "waiting"
    text = subprocess.run([sys.executable, "-m", "pyscheduler.cli", "fragment", "test",
                           str(gang), "--cluster", str(cluster), "--pods", str(pods)],
                          capture_output=True, text=True, timeout=120).stdout
    assert "pod ml/solo: -> " in text and "still held at permit" in text


def test_publish_lists_the_stages_the_module_exports_with_the_prebind_allowlist() -> None:
    from pathlib import Path

    from pyscheduler.wasm.resource import StageSpec, parse_resource
    from pyscheduler.wasm.tool import lifecycle_exports, module_exports, resource_body

    gang = Path(__file__).resolve().parents[3] / "fragments" / "examples" / "gang" / "gang.wasm"
    exports = module_exports(gang.read_bytes())
    assert lifecycle_exports(exports) == ("prefilter", "postfilter", "unreserve", "permit")
    body = resource_body("gang", "1.0.0", "s3://b/gang.wasm", "0" * 64, filter_mode=None,
                         score_mode=None, weight=1, config=None, failure_policy="Fail",
                         shadow=False, lifecycle=("permit", "prebind"),
                         prebind=StageSpec("extend", allowed_labels=("example.com/*",)))
    assert body["spec"]["stages"] == {
        "permit": {}, "prebind": {"allowedLabels": ["example.com/*"]}}
    spec = parse_resource(body)
    assert set(spec.lifecycle) == {"permit", "prebind"} and spec.filter is None
