"""A pod as a container-instance request: what the cloud adapter is asked to run for a pod
bound to a virtual node (:func:`build_instance_request`), and why a pod cannot be run that way
(:class:`PodConversionError`). Pure: unit-tested without any I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyscheduler.api.problems import InputError
from pyscheduler.api.names import TAG_POD_NAME, TAG_POD_NAMESPACE, TAG_POD_UID, TAG_POOL
from pyscheduler.api.quantity import QuantityError, milli_value, value
from pyscheduler.virtual.types import ContainerSpec, InstanceRequest

__all__ = ["Conversion", "PodConversionError", "build_instance_request"]

Obj = dict[str, Any]
# Resources a container instance is sized by; anything else (GPUs, hugepages) cannot be
# honoured by the adapter's request, so such a pod is refused rather than run without it.
_SIZED = ("cpu", "memory")
_IGNORED_RESOURCES = ("ephemeral-storage",)


class PodConversionError(InputError):
    """The pod cannot be run as a container instance; ``problems`` names each reason."""

    def __init__(self, problems: Sequence[str]) -> None:
        super().__init__(problems)


@dataclass(frozen=True, slots=True)
class Conversion:
    """An instance request made from a pod, and what of the pod it leaves out (one note each,
    e.g. an environment variable that refers to a Secret)."""

    request: InstanceRequest
    skipped: tuple[str, ...] = ()


def _strings(raw: Any, where: str, problems: list[str]) -> tuple[str, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list) or not all(isinstance(x, str) for x in raw):
        problems.append(f"{where}: must be a list of strings")
        return ()
    return tuple(raw)


def _quantities(raw: Any, where: str, problems: list[str]) -> dict[str, int]:
    """A resource list as integers: cpu in millicores, everything else in units."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        problems.append(f"{where}: must be a map of resource name to quantity")
        return {}
    out: dict[str, int] = {}
    for name, q in raw.items():
        try:
            amount = milli_value(q) if name == "cpu" else value(q)
        except (QuantityError, TypeError):
            problems.append(f"{where}.{name}: {q!r} is not a valid quantity")
            continue
        if amount < 0:
            problems.append(f"{where}.{name}: must not be negative, got {q!r}")
            continue
        out[str(name)] = amount
    return out


def _container(c: Any, where: str, problems: list[str],
               skipped: list[str]) -> ContainerSpec | None:
    if not isinstance(c, Mapping):
        problems.append(f"{where}: must be an object")
        return None
    name = c.get("name")
    image = c.get("image")
    if not isinstance(name, str) or not name:
        problems.append(f"{where}.name: required")
        return None
    if not isinstance(image, str) or not image:
        problems.append(f"{where}.image: required")
        return None
    env: dict[str, str] = {}
    for i, var in enumerate(c.get("env") or ()):
        if not isinstance(var, Mapping) or not isinstance(var.get("name"), str):
            problems.append(f"{where}.env[{i}]: must be an object with a name")
            continue
        if var.get("valueFrom") is not None:
            # Secret, ConfigMap, field and resource references are resolved by a kubelet;
            # the cloud has no access to the API server.
            kind = next(iter(var["valueFrom"]), "valueFrom") \
                if isinstance(var["valueFrom"], Mapping) else "valueFrom"
            skipped.append(f"container {name}: env {var['name']} ({kind}) skipped: the cloud "
                           "cannot resolve references")
            continue
        env[var["name"]] = str(var.get("value") or "")
    for i, source in enumerate(c.get("envFrom") or ()):
        kind = next(iter(source), "envFrom") if isinstance(source, Mapping) else "envFrom"
        skipped.append(f"container {name}: envFrom[{i}] ({kind}) skipped: the cloud cannot "
                       "resolve references")
    resources = c.get("resources") or {}
    if not isinstance(resources, Mapping):
        problems.append(f"{where}.resources: must be an object")
        resources = {}
    requests = _quantities(resources.get("requests"), f"{where}.resources.requests", problems)
    limits = _quantities(resources.get("limits"), f"{where}.resources.limits", problems)
    # An instance has one size: the requests, defaulted from the limits (API server defaulting).
    sized = {**limits, **requests}
    unsupported = sorted(k for k in sized if k not in _SIZED and k not in _IGNORED_RESOURCES)
    if unsupported:
        problems.append(f"{where}.resources: {', '.join(unsupported)} cannot be provided by a "
                        "cloud container instance")
    return ContainerSpec(
        name=name, image=image,
        command=_strings(c.get("command"), f"{where}.command", problems),
        args=_strings(c.get("args"), f"{where}.args", problems),
        env=env, cpu_millis=sized.get("cpu", 0), memory_bytes=sized.get("memory", 0))


def build_instance_request(pod: Obj, pool: str) -> Conversion:
    """The instance request for ``pod`` in ``pool``.

    Each container keeps its image, command, args and plain ``env`` values; references
    (``valueFrom``, ``envFrom``) are left out and named in :attr:`Conversion.skipped`. Sizes are
    the requests, defaulted from the limits. The pod UID is the idempotency key and a tag.
    Volumes, ports and probes are not part of an instance and are ignored. Raises
    :class:`PodConversionError` for what would run *differently* if ignored: init containers,
    extended resources (GPUs, hugepages), a pod without containers, malformed fields.
    """
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    problems: list[str] = []
    skipped: list[str] = []
    uid = meta.get("uid")
    if not isinstance(uid, str) or not uid:
        problems.append("metadata.uid: required")
    if spec.get("initContainers"):
        problems.append("spec.initContainers: init containers cannot run in a cloud container "
                        "instance")
    raw = spec.get("containers")
    if not isinstance(raw, list) or not raw:
        problems.append("spec.containers: at least one container is required")
        raw = []
    containers = [_container(c, f"spec.containers[{i}]", problems, skipped)
                  for i, c in enumerate(raw)]
    if problems:
        raise PodConversionError(problems)
    namespace = str(meta.get("namespace") or "default")
    name = str(meta.get("name") or "")
    request = InstanceRequest(
        pool=pool, pod_uid=str(uid), namespace=namespace, name=name,
        containers=tuple(c for c in containers if c is not None),
        tags={TAG_POD_UID: str(uid), TAG_POD_NAMESPACE: namespace, TAG_POD_NAME: name,
              TAG_POOL: pool})
    return Conversion(request, tuple(skipped))
