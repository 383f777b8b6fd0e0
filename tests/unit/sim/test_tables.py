"""Unit tests for pyscheduler_sim.tables (server-side Table rendering)."""

from __future__ import annotations

import copy
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from pyscheduler_sim.tables import column_definitions, human_duration, to_table

NOW = datetime(2024, 6, 1, 12, 0, 0, tzinfo=timezone.utc)


def ago(seconds: float) -> str:
    """An RFC 3339 timestamp ``seconds`` before NOW."""
    return (NOW - timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


CREATED = ago(300)  # every object below is five minutes old unless stated


def meta(name: str = "obj", **extra: Any) -> dict[str, Any]:
    return {"name": name, "namespace": "default", "creationTimestamp": CREATED, **extra}


def row_cells(group: str, plural: str, obj: dict[str, Any], **kwargs: Any) -> list[Any]:
    table = to_table(group, plural, [obj], now=NOW, **kwargs)
    assert len(table["rows"]) == 1
    cells: list[Any] = table["rows"][0]["cells"]
    assert len(cells) == len(table["columnDefinitions"])
    return cells


def cell(group: str, plural: str, obj: dict[str, Any], column: str, **kwargs: Any) -> Any:
    table = to_table(group, plural, [obj], now=NOW, **kwargs)
    names = [c["name"] for c in table["columnDefinitions"]]
    return table["rows"][0]["cells"][names.index(column)]


def headers(group: str, plural: str, *, wide: bool = False, **kwargs: Any) -> list[str]:
    """Column headers as kubectl prints them (priority > 0 only with -o wide)."""
    return [
        c["name"].upper()
        for c in column_definitions(group, plural, **kwargs)
        if wide or c["priority"] == 0
    ]


# ---------------------------------------------------------------------------
# human_duration
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "expected"),
    [
        pytest.param(0, "0s", id="zero"),
        pytest.param(5, "5s", id="seconds"),
        pytest.param(5.9, "5s", id="fraction-truncated"),
        pytest.param(119, "119s", id="under-two-minutes"),
        pytest.param(120, "2m", id="two-minutes"),
        pytest.param(123, "2m3s", id="minutes-seconds"),
        pytest.param(599, "9m59s", id="just-under-ten-minutes"),
        pytest.param(600, "10m", id="ten-minutes"),
        pytest.param(659, "10m", id="minutes-drop-seconds"),
        pytest.param(3 * 3600 - 1, "179m", id="under-three-hours"),
        pytest.param(3 * 3600, "3h", id="three-hours"),
        pytest.param(3 * 3600 + 4 * 60, "3h4m", id="hours-minutes"),
        pytest.param(8 * 3600, "8h", id="eight-hours"),
        pytest.param(47 * 3600 + 59 * 60, "47h", id="under-two-days"),
        pytest.param(48 * 3600, "2d", id="two-days"),
        pytest.param(5 * 86400, "5d", id="days"),
        pytest.param(5 * 86400 + 3 * 3600, "5d3h", id="days-hours"),
        pytest.param(8 * 86400 + 5 * 3600, "8d", id="days-drop-hours"),
        pytest.param(400 * 86400, "400d", id="under-two-years"),
        pytest.param(2 * 365 * 86400, "2y", id="two-years"),
        pytest.param(2 * 365 * 86400 + 3 * 86400, "2y3d", id="years-days"),
        pytest.param(9 * 365 * 86400 + 50 * 86400, "9y", id="years-drop-days"),
        pytest.param(-0.5, "0s", id="skew-subsecond"),
        pytest.param(-1.9, "0s", id="skew-one-second"),
        pytest.param(-2, "<invalid>", id="future"),
        pytest.param(float("nan"), "<invalid>", id="nan"),
    ],
)
def test_human_duration(seconds: float, expected: str) -> None:
    assert human_duration(seconds) == expected


# ---------------------------------------------------------------------------
# Pods
# ---------------------------------------------------------------------------


def pod(
    *,
    phase: str | None = "Running",
    containers: int = 1,
    statuses: list[dict[str, Any]] | None = None,
    init_containers: list[dict[str, Any]] | None = None,
    init_statuses: list[dict[str, Any]] | None = None,
    conditions: list[dict[str, Any]] | None = None,
    reason: str | None = None,
    deleted: bool = False,
    gates: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    metadata = meta("web-0")
    if deleted:
        metadata["deletionTimestamp"] = ago(10)
    spec: dict[str, Any] = {"containers": [{"name": f"c{i}", "image": "nginx"} for i in range(containers)]}
    if init_containers is not None:
        spec["initContainers"] = init_containers
    if gates is not None:
        spec["schedulingGates"] = gates
    status: dict[str, Any] = {}
    if phase is not None:
        status["phase"] = phase
    if statuses is not None:
        status["containerStatuses"] = statuses
    if init_statuses is not None:
        status["initContainerStatuses"] = init_statuses
    if conditions is not None:
        status["conditions"] = conditions
    if reason is not None:
        status["reason"] = reason
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec, "status": status}


RUNNING = {"name": "c0", "ready": True, "restartCount": 0, "state": {"running": {"startedAt": CREATED}}}
NOT_READY_RUNNING = {**RUNNING, "ready": False}


def waiting(reason: str, name: str = "c0", restarts: int = 0) -> dict[str, Any]:
    return {"name": name, "ready": False, "restartCount": restarts, "state": {"waiting": {"reason": reason}}}


def terminated(name: str = "c0", *, reason: str = "", exit_code: int = 0, signal: int = 0) -> dict[str, Any]:
    state: dict[str, Any] = {"exitCode": exit_code}
    if reason:
        state["reason"] = reason
    if signal:
        state["signal"] = signal
    return {"name": name, "ready": False, "restartCount": 0, "state": {"terminated": state}}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(pod(phase=None), "Pending", id="undefaulted-pending"),
        pytest.param(pod(phase="Pending"), "Pending", id="pending"),
        pytest.param(pod(phase="Pending", statuses=[waiting("ContainerCreating")]), "ContainerCreating", id="container-creating"),
        pytest.param(pod(statuses=[RUNNING]), "Running", id="running"),
        pytest.param(pod(statuses=[RUNNING], deleted=True), "Terminating", id="terminating"),
        pytest.param(pod(phase="Succeeded", statuses=[terminated(reason="Completed")], deleted=True), "Completed", id="terminal-phase-not-terminating"),
        pytest.param(pod(phase="Succeeded", statuses=[terminated(reason="Completed")]), "Completed", id="completed"),
        pytest.param(pod(phase="Failed", statuses=[terminated(reason="Error", exit_code=1)]), "Error", id="error"),
        pytest.param(pod(phase="Failed", statuses=[terminated(exit_code=3)]), "ExitCode:3", id="exit-code-without-reason"),
        pytest.param(pod(phase="Failed", statuses=[terminated(exit_code=137, signal=9)]), "Signal:9", id="signal-without-reason"),
        pytest.param(pod(statuses=[waiting("CrashLoopBackOff", restarts=4)]), "CrashLoopBackOff", id="crashloop"),
        pytest.param(pod(statuses=[waiting("ImagePullBackOff")]), "ImagePullBackOff", id="image-pull-backoff"),
        pytest.param(
            pod(phase="Pending", conditions=[{"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]),
            "SchedulingGated",
            id="scheduling-gated-condition",
        ),
        pytest.param(pod(phase="Pending", gates=[{"name": "example.com/wait"}]), "SchedulingGated", id="scheduling-gates"),
        pytest.param(
            pod(
                phase="Pending",
                gates=[{"name": "example.com/wait"}],
                conditions=[{"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}],
            ),
            "Pending",
            id="gates-but-scheduler-condition",
        ),
        pytest.param(pod(phase="Failed", reason="Evicted"), "Evicted", id="evicted"),
        pytest.param(pod(phase="Running", reason="NodeLost", deleted=True), "Unknown", id="node-lost-deleted"),
        pytest.param(pod(phase="Failed", reason="ProviderFailed"), "ProviderFailed", id="provider-failed"),
        pytest.param(
            pod(
                containers=2,
                statuses=[terminated("c0", reason="Completed"), {**RUNNING, "name": "c1"}],
                conditions=[{"type": "Ready", "status": "True"}],
            ),
            "Running",
            id="completed-with-running-ready",
        ),
        pytest.param(
            pod(containers=2, statuses=[terminated("c0", reason="Completed"), {**RUNNING, "name": "c1"}]),
            "NotReady",
            id="completed-with-running-not-ready",
        ),
        pytest.param(
            pod(phase="Pending", init_containers=[{"name": "i0"}], init_statuses=[waiting("PodInitializing", "i0")]),
            "Init:0/1",
            id="init-progress",
        ),
        pytest.param(
            pod(
                phase="Pending",
                init_containers=[{"name": "i0"}, {"name": "i1"}],
                init_statuses=[terminated("i0", reason="Completed"), waiting("CrashLoopBackOff", "i1")],
            ),
            "Init:CrashLoopBackOff",
            id="init-waiting-reason",
        ),
        pytest.param(
            pod(phase="Pending", init_containers=[{"name": "i0"}], init_statuses=[terminated("i0", reason="Error", exit_code=1)]),
            "Init:Error",
            id="init-error",
        ),
        pytest.param(
            pod(phase="Pending", init_containers=[{"name": "i0"}], init_statuses=[terminated("i0", exit_code=2)]),
            "Init:ExitCode:2",
            id="init-exit-code",
        ),
    ],
)
def test_pod_status(obj: dict[str, Any], expected: str) -> None:
    assert cell("", "pods", obj, "Status") == expected


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(pod(phase="Pending"), "0/1", id="no-statuses"),
        pytest.param(pod(containers=2, statuses=[RUNNING, {**NOT_READY_RUNNING, "name": "c1"}]), "1/2", id="one-of-two"),
        pytest.param(pod(containers=2, statuses=[RUNNING, {**RUNNING, "name": "c1"}]), "2/2", id="all-ready"),
        pytest.param(
            pod(
                init_containers=[{"name": "sidecar", "restartPolicy": "Always"}, {"name": "setup"}],
                init_statuses=[
                    {"name": "sidecar", "ready": True, "started": True, "restartCount": 0, "state": {"running": {}}},
                    terminated("setup", reason="Completed"),
                ],
                statuses=[RUNNING],
            ),
            "2/2",
            id="restartable-init-container-counts",
        ),
    ],
)
def test_pod_ready(obj: dict[str, Any], expected: str) -> None:
    assert cell("", "pods", obj, "Ready") == expected


def with_restarts(count: int, finished_ago: float | None, name: str = "c0") -> dict[str, Any]:
    status = {**RUNNING, "name": name, "restartCount": count}
    if finished_ago is not None:
        status["lastState"] = {"terminated": {"exitCode": 1, "finishedAt": ago(finished_ago)}}
    return status


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(pod(statuses=[RUNNING]), "0", id="none"),
        pytest.param(pod(statuses=[with_restarts(3, None)]), "3", id="unknown-last-restart"),
        pytest.param(pod(statuses=[with_restarts(5, 300)]), "5 (5m ago)", id="with-last-restart"),
        pytest.param(
            pod(containers=2, statuses=[with_restarts(2, 3600), with_restarts(1, 90, "c1")]),
            "3 (90s ago)",
            id="sum-and-latest",
        ),
        pytest.param(
            pod(
                phase="Pending",
                init_containers=[{"name": "i0"}],
                init_statuses=[{**waiting("CrashLoopBackOff", "i0", restarts=4)}],
                statuses=[with_restarts(7, 60)],
            ),
            "4",
            id="initializing-counts-init-only",
        ),
    ],
)
def test_pod_restarts(obj: dict[str, Any], expected: str) -> None:
    assert cell("", "pods", obj, "Restarts") == expected


def test_pod_row_full() -> None:
    obj = pod(
        statuses=[RUNNING],
        conditions=[{"type": "Ready", "status": "True"}, {"type": "example.com/gate", "status": "True"}],
    )
    obj["spec"]["nodeName"] = "node-1"
    obj["spec"]["readinessGates"] = [{"conditionType": "example.com/gate"}, {"conditionType": "example.com/other"}]
    obj["status"]["podIPs"] = [{"ip": "10.0.0.7"}, {"ip": "fd00::7"}]
    obj["status"]["podIP"] = "10.0.0.7"
    assert row_cells("", "pods", obj) == [
        "web-0", "1/1", "Running", "0", "5m", "10.0.0.7", "node-1", "<none>", "1/2",
    ]


def test_pod_wide_placeholders() -> None:
    obj = pod(phase="Pending")
    obj["status"]["podIP"] = "10.1.1.1"  # podIPs absent: podIP is used
    obj["status"]["nominatedNodeName"] = "node-9"
    assert row_cells("", "pods", obj)[5:] == ["10.1.1.1", "<none>", "node-9", "<none>"]


@pytest.mark.parametrize(
    ("phase", "conditions"),
    [
        pytest.param("Succeeded", [{"type": "Completed", "status": "True", "reason": "Succeeded", "message": "The pod has completed successfully."}], id="succeeded"),
        pytest.param("Failed", [{"type": "Completed", "status": "True", "reason": "Failed", "message": "The pod failed."}], id="failed"),
        pytest.param("Running", None, id="running"),
    ],
)
def test_pod_row_conditions(phase: str, conditions: list[dict[str, str]] | None) -> None:
    row = to_table("", "pods", [pod(phase=phase)], now=NOW)["rows"][0]
    assert row.get("conditions") == conditions


# ---------------------------------------------------------------------------
# Nodes
# ---------------------------------------------------------------------------


def node(
    ready: str | None = "True",
    *,
    unschedulable: bool = False,
    labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "nodeInfo": {
            "kubeletVersion": "v1.32.0",
            "osImage": "Ubuntu 24.04",
            "kernelVersion": "6.8.0",
            "containerRuntimeVersion": "containerd://1.7.0",
        },
        "addresses": [
            {"type": "Hostname", "address": "node-1"},
            {"type": "InternalIP", "address": "10.0.0.1"},
            {"type": "InternalIP", "address": "10.0.0.2"},
        ],
        "conditions": [{"type": "MemoryPressure", "status": "False"}],
    }
    if ready is not None:
        status["conditions"].append({"type": "Ready", "status": ready})
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta("node-1", labels=labels or {}),
        "spec": {"unschedulable": True} if unschedulable else {},
        "status": status,
    }


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(node("True"), "Ready", id="ready"),
        pytest.param(node("False"), "NotReady", id="not-ready"),
        pytest.param(node("Unknown"), "NotReady", id="ready-unknown-is-not-ready"),
        pytest.param(node(None), "Unknown", id="no-ready-condition"),
        pytest.param(node("True", unschedulable=True), "Ready,SchedulingDisabled", id="cordoned"),
        pytest.param(node("False", unschedulable=True), "NotReady,SchedulingDisabled", id="cordoned-not-ready"),
    ],
)
def test_node_status(obj: dict[str, Any], expected: str) -> None:
    assert cell("", "nodes", obj, "Status") == expected


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        pytest.param({}, "<none>", id="none"),
        pytest.param({"node-role.kubernetes.io/control-plane": ""}, "control-plane", id="prefix-label"),
        pytest.param(
            {"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/control-plane": "true"},
            "control-plane,worker",
            id="sorted",
        ),
        pytest.param({"kubernetes.io/role": "master"}, "master", id="legacy-label"),
        pytest.param(
            {"kubernetes.io/role": "gpu", "node-role.kubernetes.io/gpu": "", "node-role.kubernetes.io/": ""},
            "gpu",
            id="deduplicated-and-empty-ignored",
        ),
        pytest.param({"kubernetes.io/role": ""}, "<none>", id="empty-legacy-value"),
    ],
)
def test_node_roles(labels: dict[str, str], expected: str) -> None:
    assert cell("", "nodes", node(labels=labels), "Roles") == expected


def test_node_row_full() -> None:
    assert row_cells("", "nodes", node()) == [
        "node-1", "Ready", "<none>", "5m", "v1.32.0",
        "10.0.0.1", "<none>", "Ubuntu 24.04", "6.8.0", "containerd://1.7.0",
    ]


def test_node_wide_unknowns() -> None:
    obj = {"metadata": meta("bare")}
    assert row_cells("", "nodes", obj) == [
        "bare", "Unknown", "<none>", "5m", "", "<none>", "<none>", "<unknown>", "<unknown>", "<unknown>",
    ]


# ---------------------------------------------------------------------------
# Column headers (what kubectl shows)
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("group", "plural", "wide", "expected"),
    [
        pytest.param("", "pods", False, ["NAME", "READY", "STATUS", "RESTARTS", "AGE"], id="pods"),
        pytest.param(
            "", "pods", True,
            ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE", "NOMINATED NODE", "READINESS GATES"],
            id="pods-wide",
        ),
        pytest.param("core", "pods", False, ["NAME", "READY", "STATUS", "RESTARTS", "AGE"], id="core-alias"),
        pytest.param("", "nodes", False, ["NAME", "STATUS", "ROLES", "AGE", "VERSION"], id="nodes"),
        pytest.param(
            "", "nodes", True,
            ["NAME", "STATUS", "ROLES", "AGE", "VERSION", "INTERNAL-IP", "EXTERNAL-IP", "OS-IMAGE",
             "KERNEL-VERSION", "CONTAINER-RUNTIME"],
            id="nodes-wide",
        ),
        pytest.param("", "namespaces", False, ["NAME", "STATUS", "AGE"], id="namespaces"),
        pytest.param("", "events", False, ["LAST SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"], id="events"),
        pytest.param(
            "events.k8s.io", "events", True,
            ["LAST SEEN", "TYPE", "REASON", "OBJECT", "SUBOBJECT", "SOURCE", "MESSAGE", "FIRST SEEN", "COUNT", "NAME"],
            id="events-wide",
        ),
        pytest.param("apps", "deployments", False, ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE"], id="deployments"),
        pytest.param(
            "apps", "deployments", True,
            ["NAME", "READY", "UP-TO-DATE", "AVAILABLE", "AGE", "CONTAINERS", "IMAGES", "SELECTOR"],
            id="deployments-wide",
        ),
        pytest.param("apps", "replicasets", False, ["NAME", "DESIRED", "CURRENT", "READY", "AGE"], id="replicasets"),
        pytest.param("coordination.k8s.io", "leases", False, ["NAME", "HOLDER", "AGE"], id="leases"),
        pytest.param(
            "policy", "poddisruptionbudgets", False,
            ["NAME", "MIN AVAILABLE", "MAX UNAVAILABLE", "ALLOWED DISRUPTIONS", "AGE"],
            id="pdbs",
        ),
        pytest.param("", "configmaps", False, ["NAME", "DATA", "AGE"], id="configmaps"),
        pytest.param("", "secrets", False, ["NAME", "TYPE", "DATA", "AGE"], id="secrets"),
        pytest.param(
            "", "services", True,
            ["NAME", "TYPE", "CLUSTER-IP", "EXTERNAL-IP", "PORT(S)", "AGE", "SELECTOR"],
            id="services-wide",
        ),
        pytest.param(
            "scheduling.k8s.io", "priorityclasses", False,
            ["NAME", "VALUE", "GLOBAL-DEFAULT", "AGE", "PREEMPTIONPOLICY"],
            id="priorityclasses",
        ),
        pytest.param(
            "", "persistentvolumes", False,
            ["NAME", "CAPACITY", "ACCESS MODES", "RECLAIM POLICY", "STATUS", "CLAIM", "STORAGECLASS",
             "VOLUMEATTRIBUTESCLASS", "REASON", "AGE"],
            id="persistentvolumes",
        ),
        pytest.param(
            "", "persistentvolumeclaims", True,
            ["NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS MODES", "STORAGECLASS", "VOLUMEATTRIBUTESCLASS",
             "AGE", "VOLUMEMODE"],
            id="persistentvolumeclaims-wide",
        ),
        pytest.param(
            "storage.k8s.io", "storageclasses", False,
            ["NAME", "PROVISIONER", "RECLAIMPOLICY", "VOLUMEBINDINGMODE", "ALLOWVOLUMEEXPANSION", "AGE"],
            id="storageclasses",
        ),
        pytest.param("storage.k8s.io", "csinodes", False, ["NAME", "DRIVERS", "AGE"], id="csinodes"),
        pytest.param(
            "storage.k8s.io", "csidrivers", False,
            ["NAME", "ATTACHREQUIRED", "PODINFOONMOUNT", "STORAGECAPACITY", "TOKENREQUESTS", "REQUIRESREPUBLISH",
             "MODES", "AGE"],
            id="csidrivers",
        ),
        pytest.param("apiextensions.k8s.io", "customresourcedefinitions", False, ["NAME", "CREATED AT"], id="crds"),
        pytest.param("example.com", "widgets", False, ["NAME", "CREATED AT"], id="unknown"),
    ],
)
def test_headers(group: str, plural: str, wide: bool, expected: list[str]) -> None:
    assert headers(group, plural, wide=wide) == expected


def test_column_definition_shape() -> None:
    columns = column_definitions("", "pods")
    assert columns[0]["name"] == "Name" and columns[0]["format"] == "name"
    assert columns[0]["description"].startswith("Name must be unique within a namespace.")
    for column in columns:
        assert list(column) == ["name", "type", "format", "description", "priority"]
        assert column["type"] in {"string", "integer", "number", "boolean", "date"}
    columns[0]["name"] = "mutated"
    assert column_definitions("", "pods")[0]["name"] == "Name"


# ---------------------------------------------------------------------------
# Workloads and other built-ins
# ---------------------------------------------------------------------------

TEMPLATE = {
    "metadata": {"labels": {"app": "web"}},
    "spec": {"containers": [{"name": "web", "image": "nginx:1.27"}, {"name": "log", "image": "busybox"}]},
}


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(
            {
                "metadata": meta("web"),
                "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web", "tier": "fe"}}, "template": TEMPLATE},
                "status": {"replicas": 3, "readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2},
            },
            ["web", "2/3", 3, 2, "5m", "web,log", "nginx:1.27,busybox", "app=web,tier=fe"],
            id="rolling",
        ),
        pytest.param(
            {"metadata": meta("fresh"), "spec": {"template": TEMPLATE}},
            ["fresh", "0/1", 0, 0, "5m", "web,log", "nginx:1.27,busybox", ""],
            id="defaults-and-nil-selector",
        ),
        pytest.param(
            {
                "metadata": meta("expr"),
                "spec": {
                    "replicas": 0,
                    "selector": {
                        "matchLabels": {"tier": "be"},
                        "matchExpressions": [
                            {"key": "env", "operator": "In", "values": ["prod", "dev"]},
                            {"key": "canary", "operator": "DoesNotExist"},
                        ],
                    },
                    "template": {"spec": {"containers": []}},
                },
            },
            ["expr", "0/0", 0, 0, "5m", "", "", "!canary,env in (dev,prod),tier=be"],
            id="expression-selector",
        ),
        pytest.param(
            {
                "metadata": meta("bad"),
                "spec": {"selector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}},
            },
            ["bad", "0/1", 0, 0, "5m", "", "", "<invalid>"],
            id="invalid-selector",
        ),
    ],
)
def test_deployment_cells(obj: dict[str, Any], expected: list[Any]) -> None:
    assert row_cells("apps", "deployments", obj) == expected


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(
            {
                "metadata": meta("web-5d4f"),
                "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "web"}}, "template": TEMPLATE},
                "status": {"replicas": 3, "readyReplicas": 1},
            },
            ["web-5d4f", 3, 3, 1, "5m", "web,log", "nginx:1.27,busybox", "app=web"],
            id="scaling",
        ),
        pytest.param(
            {"metadata": meta("empty"), "spec": {"selector": {}}},
            ["empty", 1, 0, 0, "5m", "", "", "<none>"],
            id="defaults-and-empty-selector",
        ),
    ],
)
def test_replicaset_cells(obj: dict[str, Any], expected: list[Any]) -> None:
    assert row_cells("apps", "replicasets", obj) == expected


@pytest.mark.parametrize(
    ("group", "plural", "obj", "expected"),
    [
        pytest.param("", "namespaces", {"metadata": meta("kube-system"), "status": {"phase": "Terminating"}}, ["kube-system", "Terminating", "5m"], id="namespace"),
        pytest.param("", "namespaces", {"metadata": meta("new")}, ["new", "Active", "5m"], id="namespace-default-phase"),
        pytest.param(
            "coordination.k8s.io", "leases",
            {"metadata": meta("kube-scheduler"), "spec": {"holderIdentity": "sched-1_abc"}},
            ["kube-scheduler", "sched-1_abc", "5m"],
            id="lease",
        ),
        pytest.param("coordination.k8s.io", "leases", {"metadata": meta("idle"), "spec": {}}, ["idle", "", "5m"], id="lease-no-holder"),
        pytest.param(
            "policy", "poddisruptionbudgets",
            {"metadata": meta("pdb"), "spec": {"minAvailable": 2}, "status": {"disruptionsAllowed": 1}},
            ["pdb", "2", "N/A", 1, "5m"],
            id="pdb-min",
        ),
        pytest.param(
            "policy", "poddisruptionbudgets",
            {"metadata": meta("pdb"), "spec": {"maxUnavailable": "25%"}},
            ["pdb", "N/A", "25%", 0, "5m"],
            id="pdb-max-percent",
        ),
        pytest.param("", "configmaps", {"metadata": meta("cfg"), "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}}, ["cfg", 3, "5m"], id="configmap"),
        pytest.param("", "configmaps", {"metadata": meta("empty")}, ["empty", 0, "5m"], id="configmap-empty"),
        pytest.param(
            "", "secrets",
            {"metadata": meta("tls"), "type": "kubernetes.io/tls", "data": {"tls.crt": "", "tls.key": ""}},
            ["tls", "kubernetes.io/tls", 2, "5m"],
            id="secret",
        ),
        pytest.param(
            "", "secrets",
            {"metadata": meta("s"), "data": {"a": "eA=="}, "stringData": {"a": "x", "b": "y"}},
            ["s", "Opaque", 2, "5m"],
            id="secret-default-type-and-string-data",
        ),
        pytest.param("", "serviceaccounts", {"metadata": meta("default")}, ["default", 0, "5m"], id="serviceaccount"),
        pytest.param(
            "scheduling.k8s.io", "priorityclasses",
            {"metadata": meta("high"), "value": 1000, "globalDefault": True},
            ["high", 1000, True, "5m", "PreemptLowerPriority"],
            id="priorityclass",
        ),
        pytest.param(
            "", "persistentvolumes",
            {
                "metadata": meta("pv-1"),
                "spec": {
                    "capacity": {"storage": "1024Mi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain", "claimRef": {"namespace": "ns", "name": "data"},
                    "storageClassName": "fast", "volumeMode": "Block",
                },
                "status": {"phase": "Bound"},
            },
            ["pv-1", "1Gi", "RWO,RWX", "Retain", "Bound", "ns/data", "fast", "<unset>", "", "5m", "Block"],
            id="pv-bound",
        ),
        pytest.param(
            "", "persistentvolumes",
            {
                "metadata": {**meta("pv-2"), "deletionTimestamp": ago(1),
                             "annotations": {"volume.beta.kubernetes.io/storage-class": "beta"}},
                "spec": {"storageClassName": "ignored", "volumeAttributesClassName": "gold"},
                "status": {"phase": "Released", "reason": "Recycled"},
            },
            ["pv-2", "0", "", "", "Terminating", "", "beta", "gold", "Recycled", "5m", "<unset>"],
            id="pv-terminating-beta-class",
        ),
        pytest.param(
            "", "persistentvolumeclaims",
            {
                "metadata": meta("data"),
                "spec": {"volumeName": "pv-1", "storageClassName": "fast", "volumeMode": "Filesystem",
                         "resources": {"requests": {"storage": "1Gi"}}},
                "status": {"phase": "Bound", "accessModes": ["ReadWriteOncePod"], "capacity": {"storage": "5Gi"}},
            },
            ["data", "Bound", "pv-1", "5Gi", "RWOP", "fast", "<unset>", "5m", "Filesystem"],
            id="pvc-bound",
        ),
        pytest.param(
            "", "persistentvolumeclaims",
            {"metadata": meta("wait"), "spec": {"resources": {"requests": {"storage": "1Gi"}}},
             "status": {"phase": "Pending", "accessModes": ["ReadWriteOnce"]}},
            ["wait", "Pending", "", "", "", "", "<unset>", "5m", "<unset>"],
            id="pvc-pending-shows-no-capacity",
        ),
        pytest.param(
            "storage.k8s.io", "storageclasses",
            {"metadata": {**meta("fast"), "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
             "provisioner": "ebs.csi.aws.com", "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": True},
            ["fast (default)", "ebs.csi.aws.com", "Delete", "WaitForFirstConsumer", True, "5m"],
            id="storageclass-default",
        ),
        pytest.param(
            "storage.k8s.io", "csinodes",
            {"metadata": meta("node-0"), "spec": {"drivers": [{"name": "a"}, {"name": "b"}]}},
            ["node-0", 2, "5m"],
            id="csinode",
        ),
        pytest.param(
            "storage.k8s.io", "csidrivers",
            {"metadata": meta("ebs.csi.aws.com"),
             "spec": {"podInfoOnMount": True, "tokenRequests": [{"audience": "a"}, {"audience": "b"}],
                      "volumeLifecycleModes": ["Persistent", "Ephemeral"]}},
            ["ebs.csi.aws.com", True, True, False, "a,b", False, "Persistent,Ephemeral", "5m"],
            id="csidriver",
        ),
        pytest.param(
            "storage.k8s.io", "csidrivers",
            {"metadata": meta("bare"), "spec": {"attachRequired": False}},
            ["bare", False, False, False, "<unset>", False, "<none>", "5m"],
            id="csidriver-unset",
        ),
        pytest.param(
            "apps", "statefulsets",
            {"metadata": meta("db"), "spec": {"replicas": 3, "template": TEMPLATE}, "status": {"readyReplicas": 3}},
            ["db", "3/3", "5m", "web,log", "nginx:1.27,busybox"],
            id="statefulset",
        ),
        pytest.param(
            "apps", "daemonsets",
            {
                "metadata": meta("agent"),
                "spec": {
                    "selector": {"matchLabels": {"app": "agent"}},
                    "template": {"spec": {"nodeSelector": {"os": "linux"}, "containers": [{"name": "a", "image": "agent:1"}]}},
                },
                "status": {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2, "updatedNumberScheduled": 3, "numberAvailable": 2},
            },
            ["agent", 3, 3, 2, 3, 2, "os=linux", "5m", "a", "agent:1", "app=agent"],
            id="daemonset",
        ),
        pytest.param(
            "batch", "jobs",
            {
                "metadata": meta("pi"),
                "spec": {"completions": 2, "parallelism": 2, "template": {"spec": {"containers": [{"name": "pi", "image": "perl"}]}}},
                "status": {"succeeded": 2, "startTime": ago(200), "completionTime": ago(80), "conditions": [{"type": "Complete", "status": "True"}]},
            },
            ["pi", "Complete", "2/2", "2m", "5m", "pi", "perl", "<none>"],
            id="job-complete",
        ),
        pytest.param(
            "batch", "jobs",
            {"metadata": meta("work"), "spec": {"parallelism": 3}, "status": {"startTime": ago(60)}},
            ["work", "Running", "0/1 of 3", "60s", "5m", "", "", "<none>"],
            id="job-work-queue",
        ),
    ],
)
def test_builtin_cells(group: str, plural: str, obj: dict[str, Any], expected: list[Any]) -> None:
    assert row_cells(group, plural, obj) == expected


@pytest.mark.parametrize(
    ("spec", "status", "expected"),
    [
        pytest.param(
            {"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"], "ports": [{"port": 53, "protocol": "UDP"}, {"port": 53}], "selector": {"k8s-app": "kube-dns"}},
            {},
            ["svc", "ClusterIP", "10.96.0.10", "<none>", "53/UDP,53/TCP", "5m", "k8s-app=kube-dns"],
            id="cluster-ip",
        ),
        pytest.param(
            {"type": "NodePort", "clusterIP": "10.96.1.1", "ports": [{"port": 80, "nodePort": 30080, "protocol": "TCP"}], "externalIPs": ["1.2.3.4"]},
            {},
            ["svc", "NodePort", "10.96.1.1", "1.2.3.4", "80:30080/TCP", "5m", "<none>"],
            id="node-port",
        ),
        pytest.param(
            {"type": "LoadBalancer", "clusterIPs": ["10.96.2.2"], "ports": [{"port": 443, "nodePort": 31443}]},
            {},
            ["svc", "LoadBalancer", "10.96.2.2", "<pending>", "443:31443/TCP", "5m", "<none>"],
            id="load-balancer-pending",
        ),
        pytest.param(
            {"type": "LoadBalancer", "clusterIPs": ["10.96.2.2"], "ports": [{"port": 443}]},
            {"loadBalancer": {"ingress": [{"ip": "203.0.113.9"}, {"hostname": "lb.example.com"}]}},
            ["svc", "LoadBalancer", "10.96.2.2", "203.0.113.9,lb.example.com", "443/TCP", "5m", "<none>"],
            id="load-balancer-ready",
        ),
        pytest.param(
            {"type": "ExternalName", "externalName": "db.example.com"},
            {},
            ["svc", "ExternalName", "<none>", "db.example.com", "<none>", "5m", "<none>"],
            id="external-name",
        ),
        pytest.param(
            {"clusterIP": "None", "ports": [{"port": 5432}]},
            {},
            ["svc", "ClusterIP", "None", "<none>", "5432/TCP", "5m", "<none>"],
            id="headless",
        ),
    ],
)
def test_service_cells(spec: dict[str, Any], status: dict[str, Any], expected: list[Any]) -> None:
    obj = {"metadata": meta("svc"), "spec": spec, "status": status}
    assert row_cells("", "services", obj) == expected


# ---------------------------------------------------------------------------
# Events
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("group", "obj", "expected"),
    [
        pytest.param(
            "",
            {
                "metadata": meta("web-0.17a"),
                "involvedObject": {"kind": "Pod", "name": "web-0", "fieldPath": "spec.containers{web}"},
                "reason": "Pulled",
                "message": "  Container image pulled \n",
                "type": "Normal",
                "source": {"component": "kubelet", "host": "node-1"},
                "firstTimestamp": ago(600),
                "lastTimestamp": ago(60),
                "count": 4,
            },
            ["60s", "Normal", "Pulled", "pod/web-0", "spec.containers{web}", "kubelet, node-1", "Container image pulled", "10m", 4, "web-0.17a"],
            id="core-legacy",
        ),
        pytest.param(
            "",
            {
                "metadata": meta("web-0.17b"),
                "involvedObject": {"kind": "Pod", "name": "web-0"},
                "reason": "Scheduled",
                "message": "Successfully assigned default/web-0 to node-1",
                "type": "Normal",
                "eventTime": "2024-06-01T11:59:29.500000Z",
                "reportingComponent": "default-scheduler",
                "reportingInstance": "default-scheduler-node-0",
            },
            ["30s", "Normal", "Scheduled", "pod/web-0", "", "default-scheduler, default-scheduler-node-0", "Successfully assigned default/web-0 to node-1", "30s", 1, "web-0.17b"],
            id="core-new-style-singleton",
        ),
        pytest.param(
            "events.k8s.io",
            {
                "metadata": meta("node-1.17c"),
                "regarding": {"kind": "Node", "name": "node-1"},
                "reason": "NodeNotReady",
                "note": "Node node-1 status is now: NodeNotReady",
                "type": "Warning",
                "eventTime": ago(900),
                "series": {"count": 7, "lastObservedTime": ago(45)},
                "reportingController": "node-controller",
            },
            ["45s", "Warning", "NodeNotReady", "node/node-1", "", "node-controller", "Node node-1 status is now: NodeNotReady", "15m", 7, "node-1.17c"],
            id="events-k8s-io-series",
        ),
        pytest.param(
            "events.k8s.io",
            {
                "metadata": meta("x"),
                "regarding": {"kind": "Namespace"},
                "reason": "Legacy",
                "note": "old",
                "type": "Normal",
                "deprecatedFirstTimestamp": ago(7200),
                "deprecatedCount": 2,
                "deprecatedSource": {"component": "ctl"},
            },
            ["120m", "Normal", "Legacy", "namespace", "", "ctl", "old", "120m", 2, "x"],
            id="events-k8s-io-deprecated-fields",
        ),
    ],
)
def test_event_cells(group: str, obj: dict[str, Any], expected: list[Any]) -> None:
    assert row_cells(group, "events", obj) == expected


# ---------------------------------------------------------------------------
# Custom resources
# ---------------------------------------------------------------------------

WIDGET_COLUMNS: list[dict[str, Any]] = [
    {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
    {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas", "format": "int32"},
    {"name": "Ratio", "type": "number", "jsonPath": ".status.ratio", "priority": 1},
    {"name": "Paused", "type": "boolean", "jsonPath": ".spec.paused"},
    {"name": "Hosts", "type": "string", "jsonPath": ".spec.servers[*].host", "description": "First host"},
    {"name": "Selector", "type": "string", "jsonPath": ".spec.selector"},
    {"name": "Started", "type": "date", "jsonPath": ".status.startTime"},
    {"name": "Missing", "type": "string", "jsonPath": ".status.nothing.here"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
]

WIDGET: dict[str, Any] = {
    "apiVersion": "example.com/v1",
    "kind": "Widget",
    "metadata": meta("w1"),
    "spec": {
        "replicas": 3,
        "paused": False,
        "servers": [{"host": "a.example.com"}, {"host": "b.example.com"}],
        "selector": {"matchLabels": {"app": "w<1>"}},
    },
    "status": {
        "ratio": 2,
        "startTime": ago(3 * 3600 + 240),
        "conditions": [{"type": "Synced", "status": "True"}, {"type": "Ready", "status": "False"}],
    },
}


def test_custom_resource_columns() -> None:
    columns = column_definitions("example.com", "widgets", WIDGET_COLUMNS)
    assert [c["name"] for c in columns] == ["Name"] + [c["name"] for c in WIDGET_COLUMNS]
    assert columns[2] == {
        "name": "Replicas",
        "type": "integer",
        "format": "int32",
        "description": "Custom resource definition column (in JSONPath format): .spec.replicas",
        "priority": 0,
    }
    assert columns[3]["priority"] == 1
    assert columns[5]["description"] == "First host"


def test_custom_resource_cells() -> None:
    assert row_cells("example.com", "widgets", WIDGET, printer_columns=WIDGET_COLUMNS) == [
        "w1",
        "False",  # the condition filter picks the Ready condition
        3,
        2.0,  # number columns are floats
        False,
        "a.example.com",  # kube shows only the first match of [*]
        '{"matchLabels":{"app":"w\\u003c1\\u003e"}}',  # maps render as Go JSON
        "3h4m",
        None,
        "5m",
    ]


@pytest.mark.parametrize(
    ("column", "obj", "expected"),
    [
        pytest.param({"type": "string", "jsonPath": ".spec.replicas"}, {"spec": {"replicas": 3}}, "3", id="string-of-int"),
        pytest.param({"type": "string", "jsonPath": ".spec.f"}, {"spec": {"f": 1.0}}, "1", id="string-of-float"),
        pytest.param({"type": "string", "jsonPath": ".spec.f"}, {"spec": {"f": 2e6}}, "2e+06", id="string-of-big-float"),
        pytest.param({"type": "string", "jsonPath": ".spec.b"}, {"spec": {"b": True}}, "true", id="string-of-bool"),
        pytest.param({"type": "string", "jsonPath": ".spec.n"}, {"spec": {"n": None}}, "<no value>", id="string-of-null"),
        pytest.param({"type": "string", "jsonPath": ".spec.l"}, {"spec": {"l": ["x", 1]}}, '["x",1]', id="string-of-list"),
        pytest.param({"type": "integer", "jsonPath": ".spec.f"}, {"spec": {"f": 3.9}}, 3, id="integer-truncates"),
        pytest.param({"type": "integer", "jsonPath": ".spec.s"}, {"spec": {"s": "3"}}, None, id="integer-of-string"),
        pytest.param({"type": "integer", "jsonPath": ".spec.b"}, {"spec": {"b": True}}, None, id="integer-of-bool"),
        pytest.param({"type": "boolean", "jsonPath": ".spec.b"}, {"spec": {"b": "yes"}}, None, id="boolean-of-string"),
        pytest.param({"type": "date", "jsonPath": ".spec.t"}, {"spec": {"t": "yesterday"}}, "<invalid>", id="date-invalid"),
        pytest.param({"type": "date", "jsonPath": ".spec.t"}, {"spec": {"t": ""}}, "<unknown>", id="date-empty"),
        pytest.param({"type": "date", "jsonPath": ".spec.t"}, {"spec": {"t": ago(-3600)}}, "<invalid>", id="date-future"),
        pytest.param({"type": "date", "jsonPath": ".spec.t"}, {"spec": {"t": "2024-06-01T13:59:00+02:00"}}, "60s", id="date-offset"),
        pytest.param({"type": "string", "jsonPath": ".spec.items[1].name"}, {"spec": {"items": [{"name": "a"}, {"name": "b"}]}}, "b", id="index"),
        pytest.param({"type": "string", "jsonPath": ".spec.items[-1].name"}, {"spec": {"items": [{"name": "a"}, {"name": "b"}]}}, "b", id="negative-index"),
        pytest.param({"type": "string", "jsonPath": ".spec.items[5].name"}, {"spec": {"items": [{"name": "a"}]}}, None, id="index-out-of-range"),
        pytest.param({"type": "string", "jsonPath": ".spec.items[0]"}, {"spec": {"items": []}}, None, id="index-empty-list"),
        pytest.param({"type": "string", "jsonPath": ".metadata.labels['app.kubernetes.io/name']"}, {"metadata": {"labels": {"app": "x"}}}, None, id="dict-key-with-dots-splits"),
        pytest.param({"type": "string", "jsonPath": ".metadata.annotations.example\\.com/mode"}, {"metadata": {"annotations": {"example.com/mode": "fast"}}}, "fast", id="escaped-dot"),
        pytest.param({"type": "integer", "jsonPath": ".status.conditions[?(@.priority>1)].priority"}, {"status": {"conditions": [{"priority": 1}, {"priority": 5}]}}, 5, id="numeric-filter"),
        pytest.param({"type": "string", "jsonPath": '.status.conditions[?(@.status!="True")].type'}, {"status": {"conditions": [{"type": "A", "status": "True"}, {"type": "B", "status": "False"}]}}, "B", id="not-equal-filter"),
        pytest.param({"type": "string", "jsonPath": ".status.conditions[?(@.reason)].type"}, {"status": {"conditions": [{"type": "A"}, {"type": "B", "reason": "x"}]}}, "B", id="exists-filter"),
        pytest.param({"type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'}, {"status": {}}, None, id="filter-no-conditions"),
        pytest.param({"type": "string", "jsonPath": ".status.conditions[?(@.priority==1)].type"}, {"status": {"conditions": [{"type": "A", "priority": 1.5}]}}, None, id="filter-type-mismatch"),
        pytest.param({"type": "string", "jsonPath": "..image"}, {"spec": {"containers": [{"image": "nginx"}]}}, "nginx", id="recursive-descent"),
        pytest.param({"type": "string", "jsonPath": ".spec.ports[0,1].port"}, {"spec": {"ports": [{"port": 80}, {"port": 443}]}}, "80", id="union"),
        pytest.param({"type": "string", "jsonPath": ".metadata.labels.*"}, {"metadata": {"labels": {"a": "1"}}}, "1", id="wildcard-map"),
        pytest.param({"type": "unknown", "jsonPath": ".spec.a"}, {"spec": {"a": "x"}}, None, id="unknown-type"),
    ],
)
def test_custom_resource_jsonpath(column: dict[str, Any], obj: dict[str, Any], expected: Any) -> None:
    obj = copy.deepcopy(obj)
    obj["metadata"] = {**meta("cr"), **obj.get("metadata", {})}
    cells = row_cells("example.com", "things", obj, printer_columns=[{"name": "Col", **column}])
    assert cells == ["cr", expected]


@pytest.mark.parametrize(
    ("printer_columns", "expected_headers", "expected_cells"),
    [
        pytest.param([], ["NAME", "AGE"], ["w1", "5m"], id="no-columns-default-age"),
        pytest.param(
            [
                {"name": "Replicas", "type": "integer", "jsonPath": ".spec.replicas"},
                {"name": "Broken", "type": "string", "jsonPath": ".spec[?(@.x"},
                {"name": "After", "type": "string", "jsonPath": ".spec.paused"},
            ],
            ["NAME", "REPLICAS"],
            ["w1", 3],
            id="syntax-error-truncates",
        ),
        pytest.param(
            [{"name": "Ranged", "type": "string", "jsonPath": "range .spec.servers[*]"}],
            ["NAME", "RANGED"],
            ["w1", None],
            id="unsupported-kept-empty",
        ),
    ],
)
def test_custom_resource_column_rules(
    printer_columns: list[dict[str, Any]], expected_headers: list[str], expected_cells: list[Any]
) -> None:
    assert headers("example.com", "widgets", printer_columns=printer_columns) == expected_headers
    assert row_cells("example.com", "widgets", WIDGET, printer_columns=printer_columns) == expected_cells


def test_printer_columns_ignored_for_builtins() -> None:
    columns = column_definitions("", "pods", [{"name": "X", "type": "string", "jsonPath": ".x"}])
    assert [c["name"] for c in columns][:2] == ["Name", "Ready"]


# ---------------------------------------------------------------------------
# Default table, include_object, table envelope
# ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("group", "plural", "obj", "expected"),
    [
        pytest.param(
            "example.com", "gadgets",
            {"metadata": {"name": "g", "creationTimestamp": "2024-01-02T05:04:05.5+02:00"}},
            ["g", "2024-01-02T03:04:05Z"],
            id="unknown-resource",
        ),
        pytest.param(
            "apiextensions.k8s.io", "customresourcedefinitions",
            {"metadata": {"name": "widgets.example.com", "creationTimestamp": "2024-01-02T03:04:05Z"}},
            ["widgets.example.com", "2024-01-02T03:04:05Z"],
            id="crd",
        ),
        pytest.param("", "bindings", {"metadata": {"name": "b"}}, ["b", "0001-01-01T00:00:00Z"], id="missing-timestamp"),
    ],
)
def test_default_table(group: str, plural: str, obj: dict[str, Any], expected: list[Any]) -> None:
    table = to_table(group, plural, [obj], now=NOW)
    assert [(c["name"], c["type"], c["format"]) for c in table["columnDefinitions"]] == [
        ("Name", "string", "name"),
        ("Created At", "date", ""),
    ]
    assert table["rows"][0]["cells"] == expected


@pytest.mark.parametrize(
    ("include_object", "expected"),
    [
        pytest.param(None, None, id="python-none"),
        pytest.param("None", None, id="none"),
        pytest.param("Object", WIDGET, id="object"),
        pytest.param(
            "PartialObjectMetadata",
            {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": WIDGET["metadata"]},
            id="partial-object-metadata",
        ),
        pytest.param(
            "Metadata",
            {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": WIDGET["metadata"]},
            id="metadata-alias",
        ),
    ],
)
def test_include_object(include_object: str | None, expected: dict[str, Any] | None) -> None:
    row = to_table("example.com", "widgets", [WIDGET], include_object=include_object, printer_columns=[], now=NOW)["rows"][0]
    if expected is None:
        assert "object" not in row
    else:
        assert row["object"] == expected


def test_include_object_default_is_partial_metadata() -> None:
    row = to_table("", "configmaps", [{"metadata": meta("cfg")}], now=NOW)["rows"][0]
    assert row["object"]["kind"] == "PartialObjectMetadata"


def test_include_object_rejects_unknown() -> None:
    with pytest.raises(ValueError):
        to_table("", "pods", [], include_object="Everything")


def test_table_envelope() -> None:
    table = to_table(
        "", "namespaces",
        [{"metadata": meta("a")}, {"metadata": meta("b")}],
        list_meta={"resourceVersion": "42", "continue": "tok"},
        now=NOW,
    )
    assert table["kind"] == "Table"
    assert table["apiVersion"] == "meta.k8s.io/v1"
    assert table["metadata"] == {"resourceVersion": "42", "continue": "tok"}
    assert [r["cells"][0] for r in table["rows"]] == ["a", "b"]
    assert to_table("", "namespaces", [], now=NOW)["metadata"] == {}
    assert to_table("", "namespaces", [], now=NOW)["rows"] == []


@pytest.mark.parametrize(
    ("created", "expected"),
    [
        pytest.param(None, "<unknown>", id="missing"),
        pytest.param("", "<unknown>", id="empty"),
        pytest.param("garbage", "<unknown>", id="unparseable"),
        pytest.param(ago(2 * 86400 + 3600), "2d1h", id="days"),
        pytest.param("2024-06-01T11:59:00.5Z", "59s", id="fractional-truncates"),
    ],
)
def test_age(created: str | None, expected: str) -> None:
    metadata: dict[str, Any] = {"name": "x"}
    if created is not None:
        metadata["creationTimestamp"] = created
    assert cell("", "namespaces", {"metadata": metadata}, "Age") == expected


def test_naive_now_is_utc() -> None:
    naive = NOW.replace(tzinfo=None)
    table = to_table("", "namespaces", [{"metadata": meta("a")}], now=naive)
    assert table["rows"][0]["cells"][2] == "5m"


def test_default_now_is_current_time() -> None:
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    table = to_table("", "namespaces", [{"metadata": {"name": "a", "creationTimestamp": stamp}}])
    assert table["rows"][0]["cells"][2] in {"0s", "1s", "2s"}


@pytest.mark.parametrize(
    ("group", "plural"),
    [
        pytest.param("", "pods", id="pods"),
        pytest.param("", "nodes", id="nodes"),
        pytest.param("", "namespaces", id="namespaces"),
        pytest.param("", "events", id="events"),
        pytest.param("events.k8s.io", "events", id="events-k8s-io"),
        pytest.param("", "configmaps", id="configmaps"),
        pytest.param("", "secrets", id="secrets"),
        pytest.param("", "serviceaccounts", id="serviceaccounts"),
        pytest.param("", "services", id="services"),
        pytest.param("apps", "deployments", id="deployments"),
        pytest.param("apps", "replicasets", id="replicasets"),
        pytest.param("apps", "daemonsets", id="daemonsets"),
        pytest.param("apps", "statefulsets", id="statefulsets"),
        pytest.param("batch", "jobs", id="jobs"),
        pytest.param("coordination.k8s.io", "leases", id="leases"),
        pytest.param("policy", "poddisruptionbudgets", id="pdbs"),
        pytest.param("scheduling.k8s.io", "priorityclasses", id="priorityclasses"),
        pytest.param("", "persistentvolumes", id="persistentvolumes"),
        pytest.param("", "persistentvolumeclaims", id="persistentvolumeclaims"),
        pytest.param("storage.k8s.io", "storageclasses", id="storageclasses"),
        pytest.param("storage.k8s.io", "csinodes", id="csinodes"),
        pytest.param("storage.k8s.io", "csidrivers", id="csidrivers"),
    ],
)
def test_minimal_objects_fill_every_column(group: str, plural: str) -> None:
    """A bare object still yields one cell per column (never a crash)."""
    for obj in ({}, {"metadata": {"name": "x"}}, {"metadata": None, "spec": None, "status": None}):
        row_cells(group, plural, obj)
