"""Pure mappings of the virtual-kubelet role: pod → instance request, instance → pod status,
pool quota → node capacity, and the event note format. No server, no cloud."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from pyscheduler.api.names import (
    INSTANCE_ANNOTATION,
    PLATFORM_LABEL,
    POOL_LABEL,
    PROVIDER_TAINT_KEY,
    TAG_POD_UID,
    virtual_node_name,
)
from pyscheduler.virtual.node import PoolConfig, node_capacity, virtual_node
from pyscheduler.virtual.conversion import PodConversionError, build_instance_request
from pyscheduler.virtual.podstatus import (
    instance_pod_status,
    lost_pod_status,
    provider_failed_status,
    status_changed,
)
from pyscheduler.virtual.provider import event_note, parse_instance_annotation
from pyscheduler.virtual.types import FAILED, PENDING, RUNNING, SUCCEEDED, Instance, PoolCapacity

GIB = 1 << 30
NOW = dt.datetime(2025, 1, 2, 3, 4, 5, tzinfo=dt.timezone.utc)
LATER = NOW + dt.timedelta(seconds=30)


def container(name: str = "app", image: str = "nginx:1.27", **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": image, **fields}


def pod(*containers: dict[str, Any], uid: str = "uid-1", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web", "namespace": "shop", "uid": uid},
            "spec": {"nodeName": "wssp-virtual-aci",
                     "containers": list(containers) or [container()], **spec},
            "status": {"phase": "Pending"}}


def instance(phase: str = RUNNING, **fields: Any) -> Instance:
    values: dict[str, Any] = {
        "id": "aci-00000001", "pool": "aci", "pod_uid": "uid-1", "namespace": "shop",
        "name": "web", "phase": phase, "ip": "100.64.0.1" if phase != PENDING else "",
        "created_at": 1_735_787_045.0, "started_at": 1_735_787_046.0 if phase != PENDING else 0.0,
        "containers": (("app", phase == RUNNING, 0),)}
    values.update(fields)
    return Instance(**values)


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


# -- pod -> instance request --------------------------------------------------------------------

def test_request_carries_image_command_args_env_and_the_uid() -> None:
    p = pod(container(command=["nginx"], args=["-g", "daemon off;"],
                      env=[{"name": "MODE", "value": "prod"}, {"name": "EMPTY"}]))
    conversion = build_instance_request(p, "aci")
    request = conversion.request
    assert (request.pool, request.pod_uid, request.namespace, request.name) == \
        ("aci", "uid-1", "shop", "web")
    assert request.tags[TAG_POD_UID] == "uid-1"
    [c] = request.containers
    assert (c.name, c.image, c.command, c.args) == \
        ("app", "nginx:1.27", ("nginx",), ("-g", "daemon off;"))
    assert dict(c.env) == {"MODE": "prod", "EMPTY": ""}
    assert conversion.skipped == ()


@pytest.mark.parametrize(("resources", "cpu", "memory"), [
    pytest.param({"requests": {"cpu": "500m", "memory": "1Gi"}}, 500, GIB, id="requests"),
    pytest.param({"limits": {"cpu": "2", "memory": "512Mi"}}, 2000, 512 << 20,
                 id="limits default the requests"),
    pytest.param({"requests": {"cpu": "250m"}, "limits": {"cpu": "1", "memory": "1Gi"}},
                 250, GIB, id="requests win over limits, per resource"),
    pytest.param({}, 0, 0, id="nothing asked"),
    pytest.param({"requests": {"cpu": "100m", "ephemeral-storage": "1Gi"}}, 100, 0,
                 id="ephemeral storage is ignored"),
])
def test_resources_are_requests_defaulted_from_limits(resources: dict[str, Any], cpu: int,
                                                      memory: int) -> None:
    [c] = build_instance_request(pod(container(resources=resources)), "aci").request.containers
    assert (c.cpu_millis, c.memory_bytes) == (cpu, memory)


def test_request_sums_containers() -> None:
    p = pod(container("a", resources={"requests": {"cpu": "300m", "memory": "256Mi"}}),
            container("b", resources={"limits": {"cpu": "200m", "memory": "256Mi"}}))
    request = build_instance_request(p, "aci").request
    assert (request.cpu_millis, request.memory_bytes) == (500, 512 << 20)
    assert [c.name for c in request.containers] == ["a", "b"]


def test_references_are_skipped_and_named() -> None:
    p = pod(container(env=[{"name": "PLAIN", "value": "1"},
                           {"name": "SECRET", "valueFrom": {"secretKeyRef": {
                               "name": "s", "key": "k"}}}],
                      envFrom=[{"configMapRef": {"name": "cm"}}]))
    conversion = build_instance_request(p, "aci")
    assert dict(conversion.request.containers[0].env) == {"PLAIN": "1"}
    assert len(conversion.skipped) == 2
    assert "SECRET (secretKeyRef)" in conversion.skipped[0]
    assert "envFrom[0] (configMapRef)" in conversion.skipped[1]


@pytest.mark.parametrize(("p", "problem"), [
    pytest.param(pod(initContainers=[container("init")]), "spec.initContainers",
                 id="init containers"),
    pytest.param(pod(container(resources={"limits": {"nvidia.com/gpu": "1"}})),
                 "nvidia.com/gpu", id="extended resource"),
    pytest.param(pod(container(image="")), "spec.containers[0].image", id="no image"),
    pytest.param(pod(container(resources={"requests": {"cpu": "lots"}})),
                 "spec.containers[0].resources.requests.cpu", id="bad quantity"),
    pytest.param(pod(container(command="nginx")), "spec.containers[0].command",
                 id="command not a list"),
    pytest.param({"metadata": {"name": "x", "uid": "u"}, "spec": {"containers": []}},
                 "spec.containers", id="no containers"),
])
def test_pods_that_would_run_differently_are_refused(p: dict[str, Any], problem: str) -> None:
    with pytest.raises(PodConversionError) as info:
        build_instance_request(p, "aci")
    assert any(problem in message for message in info.value.problems), info.value.problems


# -- instance -> pod status ---------------------------------------------------------------------

def test_pending_instance_reports_creating_containers() -> None:
    status = instance_pod_status(pod(), instance(PENDING), now=NOW)
    assert status["phase"] == "Pending"
    assert "podIP" not in status
    [cs] = status["containerStatuses"]
    assert cs["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert cs["ready"] is False
    conds = conditions(status)
    assert conds["PodScheduled"]["status"] == "True"
    assert conds["Ready"]["status"] == "False"
    assert conds["Ready"]["reason"] == "ContainersNotReady"


def test_running_instance_reports_ip_start_time_and_ready() -> None:
    status = instance_pod_status(pod(), instance(RUNNING), now=NOW)
    assert status["phase"] == "Running"
    assert status["podIP"] == status["hostIP"] == "100.64.0.1"
    assert status["podIPs"] == status["hostIPs"] == [{"ip": "100.64.0.1"}]
    assert status["startTime"] == "2025-01-02T03:04:05Z"   # the instance's creation
    [cs] = status["containerStatuses"]
    assert cs["state"] == {"running": {"startedAt": "2025-01-02T03:04:06Z"}}
    assert (cs["ready"], cs["started"], cs["restartCount"]) == (True, True, 0)
    assert cs["containerID"] == "cloud://aci-00000001/app"
    conds = conditions(status)
    assert {t: c["status"] for t, c in conds.items()} == {
        "PodScheduled": "True", "PodReadyToStartContainers": "True", "Initialized": "True",
        "ContainersReady": "True", "Ready": "True"}


def test_unready_container_keeps_the_pod_unready() -> None:
    status = instance_pod_status(pod(), instance(RUNNING, containers=(("app", False, 2),)),
                                 now=NOW)
    [cs] = status["containerStatuses"]
    assert (cs["ready"], cs["restartCount"]) == (False, 2)
    assert conditions(status)["Ready"]["message"] == "containers with unready status: [app]"


@pytest.mark.parametrize(("phase", "exit_code", "reason"), [
    pytest.param(SUCCEEDED, 0, "Completed", id="succeeded"),
    pytest.param(FAILED, 1, "Error", id="failed"),
])
def test_finished_instance_finishes_the_pod(phase: str, exit_code: int, reason: str) -> None:
    status = instance_pod_status(pod(), instance(phase, message="exit 1"), now=NOW)
    assert status["phase"] == phase
    terminated = status["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (exit_code, reason)
    assert conditions(status)["Ready"]["status"] == "False"
    if phase == SUCCEEDED:
        assert conditions(status)["Ready"]["reason"] == "PodCompleted"
    else:
        assert status["message"] == "exit 1"


def test_transition_times_are_kept_while_a_condition_holds() -> None:
    p = pod()
    p["status"] = instance_pod_status(p, instance(RUNNING), now=NOW)
    again = instance_pod_status(p, instance(RUNNING), now=LATER)
    assert conditions(again)["Ready"]["lastTransitionTime"] == "2025-01-02T03:04:05Z"
    done = instance_pod_status(p, instance(SUCCEEDED), now=LATER)
    assert conditions(done)["Ready"]["lastTransitionTime"] == "2025-01-02T03:04:35Z"
    assert not status_changed(p, again)
    assert status_changed(p, done)


def test_running_clears_an_earlier_provider_failure() -> None:
    p = pod()
    p["status"].update(provider_failed_status(p, "quota", final=False, now=NOW))
    assert p["status"]["reason"] == "ProviderFailed"
    assert p["status"]["phase"] == "Pending"
    status = instance_pod_status(p, instance(RUNNING), now=NOW)
    assert status["reason"] is None and status["message"] is None   # deleted by the merge
    assert status_changed(p, status)


def test_final_provider_failure_and_lost_instance_fail_the_pod() -> None:
    failed = provider_failed_status(pod(), "pool aci refused", final=True, now=NOW)
    assert (failed["phase"], failed["reason"], failed["message"]) == \
        ("Failed", "ProviderFailed", "pool aci refused")
    assert conditions(failed)["Ready"]["status"] == "False"
    lost = lost_pod_status(pod(), "instance gone", now=NOW)
    assert (lost["phase"], lost["reason"]) == ("Failed", "NotFound")
    terminated = lost["containerStatuses"][0]["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (137, "ContainerStatusUnknown")


def test_event_note_and_annotation_formats() -> None:
    assert event_note("create", "aci-1", "aci", "created (Pending)") == \
        "create instance aci-1 in pool aci: created (Pending)"
    assert event_note("create", "", "aci", "rejected (QuotaExceeded): full") == \
        "create instance - in pool aci: rejected (QuotaExceeded): full"
    p = pod()
    assert parse_instance_annotation(p) is None
    p["metadata"]["annotations"] = {INSTANCE_ANNOTATION: "aci/aci-00000001"}
    assert parse_instance_annotation(p) == ("aci", "aci-00000001")
    p["metadata"]["annotations"] = {INSTANCE_ANNOTATION: "garbage"}
    assert parse_instance_annotation(p) is None


# -- pool -> node -------------------------------------------------------------------------------

def capacity(**fields: Any) -> PoolCapacity:
    values: dict[str, Any] = {
        "pool": "aci", "platform": "azure", "cpu_millis": 100_500, "memory_bytes": 400 * GIB,
        "instances": 100, "used_cpu_millis": 0, "used_memory_bytes": 0, "used_instances": 0,
        "max_instance_cpu_millis": 4000, "max_instance_memory_bytes": 16 * GIB}
    values.update(fields)
    return PoolCapacity(**values)


@pytest.mark.parametrize(("max_pods", "pods"), [(None, "100"), (20, "20"), (500, "100")])
def test_node_capacity_is_the_quota(max_pods: int | None, pods: str) -> None:
    pool = PoolConfig("aci", "azure", max_pods)
    assert node_capacity(pool, capacity()) == {"cpu": "100500m", "memory": "400Gi",
                                               "pods": pods}
    # Not a multiple of 1024: printed in plain bytes, as Quantity.String() prints BinarySI.
    assert node_capacity(pool, capacity(memory_bytes=1_500_000_000))["memory"] == "1500000000"


def test_virtual_node_shape() -> None:
    pool = PoolConfig("aci", "azure")
    node = virtual_node(pool, {"cpu": "4", "memory": "8Gi", "pods": "10"}, now=NOW)
    assert node["metadata"]["name"] == virtual_node_name("aci") == "wssp-virtual-aci"
    labels = node["metadata"]["labels"]
    assert labels["type"] == "virtual-kubelet"
    assert labels["kubernetes.io/role"] == "agent"
    assert labels["kubernetes.io/hostname"] == "wssp-virtual-aci"
    assert (labels[PLATFORM_LABEL], labels[POOL_LABEL]) == ("azure", "aci")
    assert node["spec"]["taints"] == [{"key": PROVIDER_TAINT_KEY, "value": "azure",
                                       "effect": "NoSchedule"}]
    assert node["status"]["capacity"] == node["status"]["allocatable"] == \
        {"cpu": "4", "memory": "8Gi", "pods": "10"}
    ready = {c["type"]: c for c in node["status"]["conditions"]}["Ready"]
    assert (ready["status"], ready["reason"]) == ("True", "KubeletReady")


@pytest.mark.parametrize("args", [("Bad_Name", "azure"), ("aci", ""), ("aci", "azure", -1)])
def test_pool_config_is_validated(args: tuple[Any, ...]) -> None:
    with pytest.raises(ValueError):
        PoolConfig(*args)
