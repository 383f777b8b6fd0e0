"""Fragments at the extension points after filtering, in the running scheduler against the
embedded cluster: prefilter, post-filter, reserve/unreserve, permit (deny, wait, time out),
pre-bind (allowlisted labels only) and post-bind — each answer's effect on the pod, the
failure policy on a bad answer, and no room kept by a pod that was not bound."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from tests.conftest import AnyCluster, SchedulerThread, wait_for
from tests.fragment_cluster import apply_fragment, assumed, calls, fragment_cluster, held_at_permit
from tests.wat import ALLOC_WAT

wasmtime = pytest.importorskip("wasmtime")

SCHEDULER = "stage-sched"
NODES = 3
# Context fields of ABI minor 3 (fragments/ABI.md §4).
ANSWER, VALUE, MESSAGE, MESSAGE_LEN, OUTPUT, OUTPUT_LEN = 112, 116, 120, 124, 144, 148

Answer = tuple[int, int, str, str]  # code, value, message, output lines


def stages_wat(answers: dict[str, Answer], trap_in: str = "") -> str:
    """A fragment exporting one function per stage in ``answers``, each giving the same answer
    for every pod; ``trap_in`` names a stage that executes ``unreachable`` instead."""
    data, funcs, offset = [], [], 1024
    for stage, (code, value, message, output) in answers.items():
        body = [f"(i32.store offset={ANSWER} (local.get $ctx) (i32.const {code}))",
                f"(i32.store offset={VALUE} (local.get $ctx) (i32.const {value}))"]
        for text, ptr, length in ((message, MESSAGE, MESSAGE_LEN), (output, OUTPUT, OUTPUT_LEN)):
            if text:
                raw = text.encode()
                data.append(f'(data (i32.const {offset}) "{raw.decode()}")'.replace("\n", "\\0a"))
                body += [f"(i32.store offset={ptr} (local.get $ctx) (i32.const {offset}))",
                         f"(i32.store offset={length} (local.get $ctx) (i32.const {len(raw)}))"]
                offset += len(raw) + 8
        if stage == trap_in:
            body = ["(unreachable)"]
        funcs.append(f'(func (export "wssp_{stage}") (param $ctx i32) (result i32)\n  '
                     + "\n  ".join(body) + "\n  (i32.const 0))")
    return f"""
(module
  (memory (export "memory") 2)
  (global $heap (mut i32) (i32.const 8192))
  {chr(10).join(data)}
  (func (export "wssp_abi_v1") (result i32) (i32.const 3))
{ALLOC_WAT}  (func (export "wssp_init") (param $ctx i32) (param i32 i32) (result i32) (i32.const 0))
  {chr(10).join(funcs)}
)"""


@pytest.fixture(scope="module")
def sim(request: pytest.FixtureRequest, server: str,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[AnyCluster]:
    with fragment_cluster(request, tmp_path_factory.mktemp("stages"), NODES) as c:
        yield c


@pytest.fixture(scope="module")
def core(sim: AnyCluster) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(config_file=str(sim.kubeconfig)))


@pytest.fixture(scope="module")
def custom(core: client.CoreV1Api) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(core.api_client)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("modules")


@pytest.fixture(scope="module")
def scheduler(sim: AnyCluster, store: Path,
              custom: client.CustomObjectsApi) -> Iterator[SchedulerThread]:
    s = SchedulerThread(sim.kubeconfig, schedulerName=SCHEDULER,
                        leaderElection={"enabled": False}, podInitialBackoffSeconds=0.2,
                        podMaxBackoffSeconds=0.5, seed=1,
                        storage={"allowedFileDirs": [str(store)]}).start()
    yield s
    s.stop()


@pytest.fixture
def ns(core: client.CoreV1Api, request: pytest.FixtureRequest) -> str:
    name = "s-" + hashlib.sha1(request.node.name.encode()).hexdigest()[:8]
    core.create_namespace({"metadata": {"name": name}})
    return name


def publish(custom: client.CustomObjectsApi, store: Path, resource: str, wat: str,
            stages: dict[str, Any], **spec: Any) -> None:
    path = store / f"{resource}.wasm"
    path.write_bytes(wasmtime.wat2wasm(wat))
    apply_fragment(custom, resource, path, stages, **spec)


def make_pod(core: client.CoreV1Api, ns: str, name: str, fragment: str, *, cpu: str = "100m",
             annotations: dict[str, str] | None = None) -> None:
    core.create_namespaced_pod(ns, {
        "metadata": {"name": name, "annotations": {"wssp/schedulefragment": fragment,
                                                   **(annotations or {})}},
        "spec": {"schedulerName": SCHEDULER, "containers": [
            {"name": "c", "image": "pause",
             "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]}})


def condition(core: client.CoreV1Api, ns: str, name: str) -> str | None:
    for c in core.read_namespaced_pod(name, ns).status.conditions or ():
        if c.type == "PodScheduled" and c.status == "False":
            return str(c.message)
    return None


def test_prebind_adds_the_allowed_labels_and_postbind_is_told(
        scheduler: SchedulerThread, core: client.CoreV1Api, custom: client.CustomObjectsApi,
        store: Path, ns: str) -> None:
    publish(custom, store, "labeller-v1.0.0", stages_wat({
        "prebind": (0, 0, "", "label example.com/tier=gold\nannotation example.com/by=stage"),
        "postbind": (0, 0, "", "")}),
        {"prebind": {"allowedLabels": ["example.com/*"],
                     "allowedAnnotations": ["example.com/by"]}})
    make_pod(core, ns, "p", "labeller-v1.0.0", annotations={"wssp/explain": "true"})
    wait_for(lambda: core.read_namespaced_pod("p", ns).spec.node_name, what="bound")
    meta = core.read_namespaced_pod("p", ns).metadata
    assert meta.labels["example.com/tier"] == "gold"
    assert meta.annotations["example.com/by"] == "stage"
    wait_for(lambda: calls(scheduler, "labeller-v1.0.0", "postbind") == 1, what="postbind")
    decision = json.loads(wait_for(lambda: core.read_namespaced_pod("p", ns).metadata
                                   .annotations.get("wssp/decision"), what="decision"))
    assert decision["fragment"] == {"name": "labeller-v1.0.0", "answered": {
        "reserve": "ok", "permit": "allow",
        "prebind": "ok (label example.com/tier=gold, annotation example.com/by)"}}


@pytest.mark.parametrize("policy, bound", [("Fail", False), ("Ignore", True)])
def test_a_prebind_key_outside_the_allowlist_fails_the_call(
        scheduler: SchedulerThread, core: client.CoreV1Api, custom: client.CustomObjectsApi,
        store: Path, ns: str, policy: str, bound: bool) -> None:
    resource = f"sneaky-{policy.lower()}-v1.0.0"
    publish(custom, store, resource, stages_wat({
        "prebind": (0, 0, "", "label team=a\nlabel example.com/x=1")}),
        {"prebind": {"allowedLabels": ["team"]}}, failurePolicy=policy)
    make_pod(core, ns, "p", resource)
    if bound:
        wait_for(lambda: core.read_namespaced_pod("p", ns).spec.node_name, what="bound")
        # Ignore: the stage has no effect at all — not even the allowed label is added.
        assert "team" not in (core.read_namespaced_pod("p", ns).metadata.labels or {})
        return
    message = wait_for(lambda: condition(core, ns, "p"), what="the condition")
    assert message == (f'fragment "{resource}" failed in prebind: output: label '
                       f"example.com/x is not allowed (spec.stages.prebind.allowedLabels: "
                       f"team)")
    assert core.read_namespaced_pod("p", ns).spec.node_name is None
    assert (core.read_namespaced_pod("p", ns).metadata.labels or {}) == {}
    wait_for(lambda: assumed(scheduler) == 0, what="the room given back")


def test_reserve_and_permit_refusals_give_the_room_back_and_unreserve_is_told(
        scheduler: SchedulerThread, core: client.CoreV1Api, custom: client.CustomObjectsApi,
        store: Path, ns: str) -> None:
    publish(custom, store, "quota-v1.0.0", stages_wat({
        "reserve": (1, 0, "team quota exhausted", ""), "unreserve": (0, 0, "", "")}),
        {"reserve": {}})
    publish(custom, store, "gate-v1.0.0", stages_wat({
        "permit": (1, 0, "maintenance window", ""), "unreserve": (0, 0, "", "")}),
        {"permit": {}})
    # Each asks for a whole node: a pod that kept its room would show on the next attempt.
    make_pod(core, ns, "quota", "quota-v1.0.0", cpu="4")
    make_pod(core, ns, "gate", "gate-v1.0.0", cpu="4")
    # (An attempt that finds no room at first, while an earlier test's pods still go away,
    # says so; the refusal follows once a node is free.)
    wait_for(lambda: condition(core, ns, "quota") == "team quota exhausted",
             what="quota refused at reserve")
    wait_for(lambda: condition(core, ns, "gate") == "maintenance window",
             what="gate refused at permit")
    wait_for(lambda: calls(scheduler, "quota-v1.0.0", "unreserve") >= 1
             and calls(scheduler, "gate-v1.0.0", "unreserve") >= 1, what="unreserve calls")
    wait_for(lambda: calls(scheduler, "quota-v1.0.0", "reserve") >= 3, what="retries")
    for name in ("quota", "gate"):
        assert core.read_namespaced_pod(name, ns).spec.node_name is None
    core.delete_namespaced_pod("quota", ns, grace_period_seconds=0)
    core.delete_namespaced_pod("gate", ns, grace_period_seconds=0)
    wait_for(lambda: assumed(scheduler) == 0, what="no room kept")


def test_a_permit_wait_holds_the_room_then_times_out_and_requeues(
        scheduler: SchedulerThread, core: client.CoreV1Api, custom: client.CustomObjectsApi,
        store: Path, ns: str) -> None:
    publish(custom, store, "slow-gate-v1.0.0", stages_wat({
        "permit": (2, 600, "waiting for the batch window", ""), "unreserve": (0, 0, "", "")}),
        {"permit": {}})
    make_pod(core, ns, "p", "slow-gate-v1.0.0", cpu="3")
    # While it waits, the pod holds its node's room: the scheduler counts it there.
    wait_for(lambda: held_at_permit(scheduler) == 1,
             what="the pod waiting at permit")
    assert assumed(scheduler) == 1
    message = wait_for(lambda: condition(core, ns, "p"), what="the timeout")
    assert message == "rejected due to timeout after waiting 0.6s at permit of fragment " \
                      "slow-gate-v1.0.0"
    events = [e for e in core.list_namespaced_event(ns).items if e.reason == "WaitingOnPermit"]
    assert events and events[0].message == "waiting for the batch window"
    assert core.read_namespaced_pod("p", ns).spec.node_name is None
    core.delete_namespaced_pod("p", ns, grace_period_seconds=0)
    wait_for(lambda: assumed(scheduler) == 0 and scheduler.call(
        lambda: len(scheduler.app.scheduler.permits)) == 0, what="nothing held after delete")
    registry = scheduler.call(lambda: scheduler.app.metrics.registry)
    assert registry.get_sample_value("scheduler_permit_wait_duration_seconds_count",
                                     {"result": "Unschedulable"}) >= 1


def test_prefilter_rejects_and_restricts(
        scheduler: SchedulerThread, core: client.CoreV1Api, custom: client.CustomObjectsApi,
        store: Path, ns: str) -> None:
    publish(custom, store, "admission-v1.0.0", stages_wat({
        "prefilter": (1, 0, "pod is missing a cost-center label", "")}), {"prefilter": {}})
    make_pod(core, ns, "p", "admission-v1.0.0", annotations={"wssp/explain": "true"})
    message = wait_for(lambda: condition(core, ns, "p"), what="the condition")
    assert message.startswith(f"0/{NODES} nodes are available: pod is missing a cost-center "
                              "label.")
    decision = json.loads(wait_for(lambda: core.read_namespaced_pod("p", ns).metadata
                                   .annotations.get("wssp/decision"), what="decision"))
    assert decision["fragment"]["answered"]["prefilter"] == \
        "reject: pod is missing a cost-center label"
    # Restrict to no row at all: each node fails with the plugin-style reason.
    publish(custom, store, "nowhere-v1.0.0", stages_wat({"prefilter": (2, 0, "", "")}),
            {"prefilter": {}})
    make_pod(core, ns, "q", "nowhere-v1.0.0")
    message = wait_for(lambda: condition(core, ns, "q"), what="the condition")
    assert message.startswith(f"0/{NODES} nodes are available: {NODES} node(s) didn't "
                              "satisfy plugin(s) [nowhere-v1.0.0].")


def test_postfilter_wait_keeps_preemption_away_and_says_why(
        scheduler: SchedulerThread, core: client.CoreV1Api, custom: client.CustomObjectsApi,
        store: Path, ns: str) -> None:
    publish(custom, store, "patient-v1.0.0", stages_wat({
        "postfilter": (3, 0, "batch pods wait for room", "")}), {"postfilter": {}})
    make_pod(core, ns, "p", "patient-v1.0.0", cpu="10")
    make_pod(core, ns, "q", "patient-v1.0.0", cpu="10", annotations={"wssp/explain": "true"})
    message = wait_for(lambda: condition(core, ns, "p"), what="the condition")
    assert message == f"0/{NODES} nodes are available: {NODES} Insufficient cpu. " \
                      "patient-v1.0.0: batch pods wait for room"
    decision = json.loads(wait_for(lambda: core.read_namespaced_pod("q", ns).metadata
                                   .annotations.get("wssp/decision"), what="decision"))
    assert decision["fragment"] == {"name": "patient-v1.0.0", "answered": {
        "postfilter": "wait: batch pods wait for room"}}


def test_hostile_answers_meet_the_failure_policy(
        scheduler: SchedulerThread, core: client.CoreV1Api, custom: client.CustomObjectsApi,
        store: Path, ns: str) -> None:
    publish(custom, store, "bad-permit-v1.0.0", stages_wat({"permit": (9, 0, "", "")}),
            {"permit": {}})
    publish(custom, store, "trap-reserve-v1.0.0", stages_wat(
        {"reserve": (0, 0, "", "")}, trap_in="reserve"), {"reserve": {}}, failurePolicy="Ignore")
    make_pod(core, ns, "bad", "bad-permit-v1.0.0")
    make_pod(core, ns, "trap", "trap-reserve-v1.0.0")
    message = wait_for(lambda: condition(core, ns, "bad"), what="the condition")
    assert message.startswith('fragment "bad-permit-v1.0.0" failed in permit: output: ')
    assert "9" in message
    # Ignore: the reserve stage has no effect, and the pod is bound.
    wait_for(lambda: core.read_namespaced_pod("trap", ns).spec.node_name, what="bound")
    assert calls(scheduler, "trap-reserve-v1.0.0", "reserve", "trap") >= 1
    core.delete_namespaced_pod("bad", ns, grace_period_seconds=0)
    wait_for(lambda: assumed(scheduler) == 0, what="no room kept")


@pytest.mark.parametrize("policy", ["Fail", "Default"])
def test_a_trapping_prefilter_meets_the_failure_policy(
        scheduler: SchedulerThread, core: client.CoreV1Api, custom: client.CustomObjectsApi,
        store: Path, ns: str, policy: str) -> None:
    resource = f"pre-trap-{policy.lower()}-v1.0.0"
    publish(custom, store, resource, stages_wat({"prefilter": (0, 0, "", "")},
                                                trap_in="prefilter"),
            {"prefilter": {}}, failurePolicy=policy)
    make_pod(core, ns, "p", resource)
    if policy == "Default":  # the stage has no effect: the built-ins place the pod
        wait_for(lambda: core.read_namespaced_pod("p", ns).spec.node_name, what="bound")
    else:
        message = wait_for(lambda: condition(core, ns, "p"), what="the condition")
        assert message.startswith(f'fragment "{resource}" failed in prefilter: trap: ')
    assert calls(scheduler, resource, "prefilter", "trap") >= 1


HOSTILE = Path(__file__).resolve().parents[2] / "fragments" / "hostile"


def test_hostile_modules_for_the_new_stages_hurt_only_their_own_pods(
        scheduler: SchedulerThread, core: client.CoreV1Api, custom: client.CustomObjectsApi,
        store: Path, ns: str) -> None:
    from pyscheduler.wasm.resource import GROUP, PLURAL, VERSION

    # Refused at load, naming what is wrong.
    for name, stages in (("stage-bad-signature", {"permit": {}}),
                         ("unknown-stage-export", {"filter": {"mode": "extend"}})):
        path = store / f"{name}.wasm"
        path.write_bytes((HOSTILE / f"{name}.wasm").read_bytes())
        custom.create_cluster_custom_object(GROUP, VERSION, PLURAL, {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "WsspSchedulerConfiguration",
            "metadata": {"name": f"{name}-v1.0.0"},
            "spec": {"url": f"file://{path}", "stages": stages}})
    statuses = {n: wait_for(lambda n=n: (st := custom.get_cluster_custom_object(
        GROUP, VERSION, PLURAL, f"{n}-v1.0.0").get("status") or {}).get("phase") == "Failed"
        and st, what=f"{n} Failed") for n in ("stage-bad-signature", "unknown-stage-export")}
    assert "export wssp_permit must be a function (i32) -> (i32), not (i32, i32) -> (i32)" \
        in statuses["stage-bad-signature"]["message"]
    assert "unknown export wssp_permitt" in statuses["unknown-stage-export"]["message"]
    # Loaded, and failing at call time: a prefilter that never returns, a prebind flooding
    # its output, a postfilter naming a row that does not exist.
    for name, stages in (("prefilter-loops", {"prefilter": {}}),
                         ("prebind-flood", {"prebind": {"allowedLabels": ["a"]}}),
                         ("postfilter-bad-row", {"postfilter": {}})):
        path = store / f"{name}.wasm"
        path.write_bytes((HOSTILE / f"{name}.wasm").read_bytes())
        apply_fragment(custom, f"{name}-v1.0.0", path, stages,
                       limits={"timeoutMilliseconds": 50})
    make_pod(core, ns, "loops", "prefilter-loops-v1.0.0")
    make_pod(core, ns, "flood", "prebind-flood-v1.0.0")
    make_pod(core, ns, "badrow", "postfilter-bad-row-v1.0.0", cpu="10")
    for i in range(5):
        core.create_namespaced_pod(ns, {"metadata": {"name": f"plain{i}"}, "spec": {
            "schedulerName": SCHEDULER, "containers": [{"name": "c", "image": "pause"}]}})
    loops = wait_for(lambda: condition(core, ns, "loops"), what="loops condition")
    assert loops.startswith('fragment "prefilter-loops-v1.0.0" failed in prefilter: ')
    assert any(kind in loops for kind in ("fuel", "timeout"))
    flood = wait_for(lambda: condition(core, ns, "flood"), what="flood condition")
    assert flood.startswith('fragment "prebind-flood-v1.0.0" failed in prebind: output: ')
    badrow = wait_for(lambda: condition(core, ns, "badrow"), what="badrow condition")
    assert badrow.startswith('fragment "postfilter-bad-row-v1.0.0" failed in postfilter: '
                             'output: ')
    # Everyone else was scheduled meanwhile, and nothing holds room for the failed pods.
    wait_for(lambda: all(core.read_namespaced_pod(f"plain{i}", ns).spec.node_name
                         for i in range(5)), what="the plain pods bound")
    assert core.read_namespaced_pod("flood", ns).spec.node_name is None
    for name in ("loops", "flood", "badrow"):
        core.delete_namespaced_pod(name, ns, grace_period_seconds=0)
    wait_for(lambda: assumed(scheduler) == 0, what="no room kept")
