"""A cloud instance's life as a pod status: what the provider writes through ``pods/status``
for an instance (:func:`instance_pod_status`), a refused one (:func:`provider_failed_status`)
or a vanished one (:func:`lost_pod_status`), and whether a write would change anything
(:func:`status_changed`). Pure: unit-tested without any I/O."""

from __future__ import annotations

import datetime as dt
import functools
from collections.abc import Iterable
from typing import Any

from pyscheduler.api.times import rfc3339
from pyscheduler.virtual.types import FAILED, PENDING, RUNNING, SUCCEEDED, Instance

__all__ = ["REASON_NOT_FOUND", "REASON_PROVIDER_FAILED", "instance_pod_status", "merged_status_key",
           "lost_pod_status", "provider_failed_status", "status_changed", "status_key"]

Obj = dict[str, Any]
# Pod status reasons.
REASON_PROVIDER_FAILED = "ProviderFailed"
REASON_NOT_FOUND = "NotFound"
# The conditions the provider owns on a pod (others, such as readiness gates, are left alone).
_POD_CONDITIONS = ("PodScheduled", "PodReadyToStartContainers", "Initialized",
                   "ContainersReady", "Ready")


@functools.lru_cache(maxsize=4096)
def _unix_rfc3339(seconds: float, fallback: str) -> str:
    if seconds <= 0:
        return fallback
    return rfc3339(seconds)


def _current_conditions(pod: Obj) -> dict[str, Obj]:
    status = pod.get("status") or {}
    return {str(c.get("type")): c for c in status.get("conditions") or ()
            if isinstance(c, dict)}


def _conditions(pod: Obj, wanted: Iterable[tuple[str, bool, str, str]], now: str) -> list[Obj]:
    """Conditions with ``lastTransitionTime`` kept from the pod when the status is unchanged."""
    current = _current_conditions(pod)
    out = []
    for type_, ok, reason, message in wanted:
        status = "True" if ok else "False"
        previous = current.get(type_)
        since = now
        if previous is not None and previous.get("status") == status \
                and previous.get("lastTransitionTime"):
            since = str(previous["lastTransitionTime"])
        condition: Obj = {"type": type_, "status": status, "lastProbeTime": None,
                          "lastTransitionTime": since}
        # A strategic merge keeps fields a list item leaves out: a reason or message that no
        # longer holds (Ready turning True after ContainersNotReady) is deleted with null.
        for key, value in (("reason", reason), ("message", message)):
            if value:
                condition[key] = value
            elif previous is not None and previous.get(key):
                condition[key] = None
        out.append(condition)
    return out


def _clear(status: Obj, pod: Obj, *keys: str) -> Obj:
    """Null out (strategic merge: delete) fields the pod has and ``status`` does not set."""
    current = pod.get("status") or {}
    for key in keys:
        if key not in status and current.get(key) is not None:
            status[key] = None
    return status


def instance_pod_status(pod: Obj, instance: Instance, *, now: dt.datetime) -> Obj:
    """The pod ``status`` (for a strategic merge into ``pods/status``) that reports
    ``instance``, shaped as a kubelet reports a pod: phase, ``podIP``/``hostIP`` (a container
    instance is its own host, as on Fargate), ``startTime``, one ``containerStatuses`` entry per
    container of the spec, and the PodScheduled/Initialized/ContainersReady/Ready conditions."""
    stamp = rfc3339(now)
    spec = pod.get("spec") or {}
    current = pod.get("status") or {}
    reported = {name: (ready, restarts) for name, ready, restarts in instance.containers}
    phase = instance.phase if instance.phase in (PENDING, RUNNING, SUCCEEDED, FAILED) \
        else PENDING
    started = _unix_rfc3339(instance.started_at or instance.created_at, stamp)
    statuses: list[Obj] = []
    for c in spec.get("containers") or ():
        name = str(c.get("name") or "")
        ready, restarts = reported.get(name, (phase == RUNNING, 0))
        cs: Obj = {"name": name, "image": c.get("image") or "", "imageID": "",
                   "containerID": f"cloud://{instance.id}/{name}",
                   "restartCount": int(restarts)}
        if phase == PENDING:
            cs.update(ready=False, started=False,
                      state={"waiting": {"reason": "ContainerCreating"}})
        elif phase == RUNNING:
            cs.update(ready=bool(ready), started=True, state={"running": {"startedAt": started}})
        else:
            ok = phase == SUCCEEDED
            terminated: Obj = {"exitCode": 0 if ok else 1,
                               "reason": "Completed" if ok else "Error",
                               "startedAt": started, "finishedAt": stamp}
            if not ok and instance.message:
                terminated["message"] = instance.message
            cs.update(ready=False, started=False, state={"terminated": terminated})
        statuses.append(cs)
    all_ready = phase == RUNNING and all(cs["ready"] for cs in statuses)
    if phase == SUCCEEDED:
        not_ready = ("PodCompleted", "")
    else:
        unready = [cs["name"] for cs in statuses if not cs["ready"]]
        not_ready = ("ContainersNotReady",
                     f"containers with unready status: [{' '.join(unready)}]")
    ready_reason, ready_message = ("", "") if all_ready else not_ready
    status: Obj = {
        "phase": phase,
        "conditions": _conditions(pod, (
            ("PodScheduled", True, "", ""),
            ("PodReadyToStartContainers", phase != PENDING, "", ""),
            ("Initialized", True, "", ""),
            ("ContainersReady", all_ready, ready_reason, ready_message),
            ("Ready", all_ready, ready_reason, ready_message)), stamp),
        "startTime": current.get("startTime") or _unix_rfc3339(instance.created_at, stamp),
        "containerStatuses": statuses,
    }
    if instance.ip:
        status.update(podIP=instance.ip, podIPs=[{"ip": instance.ip}], hostIP=instance.ip,
                      hostIPs=[{"ip": instance.ip}])
    if phase == FAILED and instance.message:
        status["message"] = instance.message
    return _clear(status, pod, "reason", "message")


def provider_failed_status(pod: Obj, message: str, *, final: bool, now: dt.datetime) -> Obj:
    """The pod status after the cloud refused its instance: reason ``ProviderFailed`` on a pod
    still Pending (``final=False``, a retry is coming), or the pod Failed (``final=True``)."""
    status: Obj = {"reason": REASON_PROVIDER_FAILED, "message": message}
    if final:
        status["phase"] = "Failed"
        status["conditions"] = _conditions(pod, (
            ("ContainersReady", False, REASON_PROVIDER_FAILED, message),
            ("Ready", False, REASON_PROVIDER_FAILED, message)), rfc3339(now))
    return status


def lost_pod_status(pod: Obj, message: str, *, now: dt.datetime) -> Obj:
    """The pod status once its instance vanished: Failed with reason ``NotFound``; containers
    terminated the way a kubelet reports a container it can no longer find."""
    stamp = rfc3339(now)
    statuses = []
    previous = {str(cs.get("name")): cs for cs in (pod.get("status") or {}).get(
        "containerStatuses") or () if isinstance(cs, dict)}
    for c in (pod.get("spec") or {}).get("containers") or ():
        name = str(c.get("name") or "")
        restarts = int((previous.get(name) or {}).get("restartCount") or 0)
        statuses.append({
            "name": name, "image": c.get("image") or "", "imageID": "", "ready": False,
            "started": False, "restartCount": restarts,
            "state": {"terminated": {
                "exitCode": 137, "reason": "ContainerStatusUnknown",
                "message": "The container could not be located when the pod was terminated",
                "finishedAt": stamp}}})
    return {"phase": "Failed", "reason": REASON_NOT_FOUND, "message": message,
            "containerStatuses": statuses,
            "conditions": _conditions(pod, (
                ("ContainersReady", False, REASON_NOT_FOUND, message),
                ("Ready", False, REASON_NOT_FOUND, message)), stamp)}


def status_key(status: Obj) -> tuple[Any, ...]:
    conditions = tuple(sorted(
        (str(c.get("type")), c.get("status"), c.get("reason") or "")
        for c in status.get("conditions") or ()
        if isinstance(c, dict) and c.get("type") in _POD_CONDITIONS))
    containers = tuple(
        (cs.get("name"), cs.get("ready"), cs.get("restartCount"),
         next(iter(cs.get("state") or {}), ""))
        for cs in status.get("containerStatuses") or () if isinstance(cs, dict))
    return (status.get("phase"), status.get("podIP") or "", status.get("reason") or "",
            status.get("message") or "", conditions, containers)


def merged_status_key(pod: Obj, status: Obj) -> tuple[Any, ...]:
    """What the pod would report (timestamps aside) once ``status`` is merged into it."""
    current = pod.get("status") or {}
    merged = {**current, **{k: v for k, v in status.items() if v is not None}}
    for key, v in status.items():
        if v is None:
            merged.pop(key, None)
    if "conditions" in status:
        by_type = _current_conditions(pod)
        by_type.update({str(c["type"]): c for c in status["conditions"]})
        merged["conditions"] = list(by_type.values())
    return status_key(merged)


def status_changed(pod: Obj, status: Obj) -> bool:
    """Whether writing ``status`` would change what the pod reports (timestamps aside)."""
    return merged_status_key(pod, status) != status_key(pod.get("status") or {})
