"""Pod parsing: Kubernetes' request arithmetic and clear errors for specs that cannot work."""

from __future__ import annotations

from typing import Any

import pytest

from pyscheduler.framework.pod import (
    DEFAULT_MEMORY_REQUEST,
    DEFAULT_MILLI_CPU_REQUEST,
    MAX_QUANTITY,
    PodSpecError,
    pod_info,
)


def spec(**kw: Any) -> dict[str, Any]:
    return {"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {"containers": [{"name": "c", "image": "x"}], **kw}}


def c(name: str, cpu: str | None = None, memory: str | None = None, **kw: Any) -> dict[str, Any]:
    req = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
    return {"name": name, "image": "x", "resources": {"requests": req}, **kw}


@pytest.mark.parametrize("body, cpu, memory, nonzero_cpu, nonzero_memory", [
    pytest.param(spec(containers=[c("a", "100m", "1Gi"), c("b", "250m", "1Gi")]),
                 350, 2 * 2**30, 350, 2 * 2**30, id="containers are summed"),
    pytest.param(spec(containers=[c("a", "100m")], initContainers=[c("i", "2")]),
                 2000, 0, 2000, DEFAULT_MEMORY_REQUEST, id="the largest init container wins"),
    pytest.param(spec(containers=[c("a", "100m")],
                      initContainers=[c("side", "500m", restartPolicy="Always"), c("i", "1")]),
                 1500, 0, 1500, DEFAULT_MEMORY_REQUEST,
                 id="a sidecar runs beside later init containers and the app"),
    pytest.param(spec(containers=[c("a", "100m", "1Gi")], overhead={"cpu": "50m"}),
                 150, 2**30, 150, 2**30, id="overhead is added"),
    pytest.param(spec(containers=[c("a")]), 0, 0, DEFAULT_MILLI_CPU_REQUEST,
                 DEFAULT_MEMORY_REQUEST, id="absent requests get the scoring defaults"),
    pytest.param(spec(containers=[c("a", "0", "0")]), 0, 0, 0, 0,
                 id="an explicit zero is not defaulted"),
    pytest.param(spec(containers=[{"name": "a", "image": "x", "resources": {
        "limits": {"cpu": "1", "nvidia.com/gpu": "2"}}}]), 1000, 0, 1000,
        DEFAULT_MEMORY_REQUEST, id="limits default missing requests"),
])
def test_requests(body: dict[str, Any], cpu: int, memory: int, nonzero_cpu: int,
                  nonzero_memory: int) -> None:
    pod = pod_info(body)
    assert (pod.requests.get("cpu", 0), pod.requests.get("memory", 0)) == (cpu, memory)
    assert (pod.nonzero_cpu, pod.nonzero_memory) == (nonzero_cpu, nonzero_memory)


@pytest.mark.parametrize("body, problem", [
    pytest.param(spec(containers=[c("a", "lots")]),
                 "spec.containers[0].resources.requests.cpu: 'lots' is not a valid quantity",
                 id="bad quantity"),
    pytest.param(spec(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                 {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "a", "operator": "Near", "values": ["x"]}]}]}}}),
                 "'Near' is not a valid node selector operator", id="unknown operator"),
    pytest.param(spec(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                 {"nodeSelectorTerms": [{"matchExpressions": [
                     {"key": "a", "operator": "Gt", "values": ["1_0"]}]}]}}}),
                 "must be a single integer for operator Gt", id="Gt needs a Go integer"),
    pytest.param(spec(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                 {"nodeSelectorTerms": [{"matchFields": [
                     {"key": "metadata.name", "operator": "In", "values": ["a", "b"]}]}]}}}),
                 "must be only one value for a node field selector",
                 id="matchFields takes one value"),
    pytest.param(spec(topologySpreadConstraints=[{"maxSkew": 0, "topologyKey": "z",
                                                  "whenUnsatisfiable": "DoNotSchedule"}]),
                 "maxSkew: must be an integer of at least 1", id="bad spread constraint"),
    pytest.param(spec(containers=[c("a", "10000000000000000")]),
                 "resources: the pod requests 10000000000000000000m cpu in all, more than the "
                 f"scheduler can count (at most {MAX_QUANTITY}m)", id="cpu beyond int64"),
    pytest.param(spec(containers=[c("a", memory="5Pi"), c("b", memory="5Pi")]),
                 "resources: the pod requests 11258999068426240 memory in all, more than the "
                 f"scheduler can count (at most {MAX_QUANTITY})",
                 id="memory summed over containers beyond the bound"),
    pytest.param(spec(affinity=["not", "an", "object"]),
                 "the pod cannot be read: AttributeError", id="a list where an object belongs"),
    pytest.param(spec(priority="high"), "the pod cannot be read: ValueError",
                 id="a priority that is not a number"),
])
def test_specs_that_cannot_be_scheduled_name_the_problem(body: dict[str, Any],
                                                         problem: str) -> None:
    with pytest.raises(PodSpecError) as exc:
        pod_info(body)
    assert problem in str(exc.value)


def test_a_pod_beyond_the_bounds_is_still_counted_as_far_as_it_can_be() -> None:
    """A pod already running somewhere with an absurd request still uses its node: the error
    carries the pod with its amounts capped at the bound, for the cache to count."""
    with pytest.raises(PodSpecError) as exc:
        pod_info(spec(containers=[c("a", "10000000000000000", "1Gi")]))
    partial = exc.value.partial
    assert partial is not None
    assert partial.requests == {"cpu": MAX_QUANTITY, "memory": 2**30}
    assert partial.nonzero_cpu == MAX_QUANTITY


def test_an_unreadable_pod_has_no_partial() -> None:
    with pytest.raises(PodSpecError) as exc:
        pod_info(spec(affinity=["x"]))
    assert exc.value.partial is None


@pytest.mark.parametrize("body, images", [
    pytest.param(spec(containers=[{"name": "a", "image": "nginx"},
                                  {"name": "b", "image": "gcr.io/app:v1"}]),
                 ("nginx:latest", "gcr.io/app:v1"), id="normalized, in container order"),
    pytest.param(spec(initContainers=[{"name": "i", "image": "busybox", "restartPolicy": "Always"},
                                      {"name": "j", "image": "busybox"}],
                      containers=[{"name": "a", "image": "busybox:latest"}]),
                 ("busybox:latest",) * 3, id="init containers first, duplicates kept"),
    pytest.param(spec(containers=[{"name": "a"}, {"name": "b", "image": 7}]),
                 (":latest", ":latest"), id="a container without an image still counts"),
    pytest.param({"metadata": {"name": "p"}, "spec": {}}, (), id="no containers"),
])
def test_images(body: dict[str, Any], images: tuple[str, ...]) -> None:
    """What ImageLocality reads: one name per container, as kube's normalizedImageName."""
    assert pod_info(body).images == images
