"""Pods as the scheduler sees them: parsed once from raw JSON into what the plugins need.

:func:`pod_info` turns a pod's JSON (a plain dict, as the informer decodes it) into a
:class:`PodInfo`: identity, resource requests computed the way Kubernetes computes them, and the
scheduling constraints (node selector and affinity, tolerations, host ports, topology spread,
inter-pod affinity) in parsed form. Anything malformed raises :class:`PodSpecError` naming every
problem, so the scheduler can report the pod unschedulable with that message instead of
failing mid-cycle.

The container images (init containers first, then app containers) are kept with kube-scheduler's
normalization (``normalizedImageName``: a reference without a tag gets ``:latest``), for
ImageLocality.

Resource requests follow Kubernetes' rules (``resourcehelper.PodRequests``): the sum over
containers, the maximum over init containers (restartable "sidecar" init containers run beside
later ones and the app containers, so they add up), plus the pod overhead. CPU is kept in
millicores, everything else in integer units (bytes, counts). The *non-zero* requests used for
scoring substitute kube-scheduler's defaults (100m CPU, 200 MiB memory) for containers that ask
for nothing, so best-effort pods still spread.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyscheduler.api.problems import InputError
from pyscheduler.api.labels import LabelSelector, SelectorError, label_selector_from_dict
from pyscheduler.api.quantity import QuantityError, milli_value, parse_quantity, value

#: What ``isinstance`` tests for an object: dict first, which every decoded object is and
#: which it answers at once (the Mapping ABC alone costs a lookup through its registry).
_MAPPING = (dict, Mapping)

__all__ = [
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "MAX_QUANTITY",
    "AffinityTerm",
    "HostPort",
    "NodeSelectorRequirement",
    "NodeSelectorTerm",
    "PodInfo",
    "PodSpecError",
    "SpreadConstraint",
    "Toleration",
    "NOT_STARTED",
    "has_affinity_terms",
    "normalized_image_name",
    "node_term",
    "nominated_node",
    "preempts_never",
    "start_time",
    "terminating_by_preemption",
    "pod_info",
    "pod_key",
]

DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024
# The largest amount of any resource the scheduler counts (see the module docstring).
MAX_QUANTITY = 2**53

Obj = Mapping[str, Any]


class PodSpecError(InputError):
    """A pod whose spec cannot be scheduled as written; ``problems`` lists every issue.

    ``partial`` is the pod as far as it could be parsed (requests capped at
    :data:`MAX_QUANTITY`), when parsing got that far: a pod already running on a node still
    uses that node, and the cache counts what it can of it.
    """

    def __init__(self, problems: list[str], partial: PodInfo | None = None) -> None:
        super().__init__(problems)
        self.partial = partial


@dataclass(frozen=True, slots=True)
class NodeSelectorRequirement:
    key: str
    operator: str  # In, NotIn, Exists, DoesNotExist, Gt, Lt
    values: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class NodeSelectorTerm:
    """Requirements ANDed together; ``match_fields`` select on node fields (metadata.name)."""

    match_expressions: tuple[NodeSelectorRequirement, ...]
    match_fields: tuple[NodeSelectorRequirement, ...]


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str  # "" with operator Exists tolerates everything
    operator: str  # Equal, Exists
    value: str
    effect: str  # "" matches every effect

    def tolerates(self, key: str, value: str, effect: str) -> bool:
        """Kubernetes' ``Toleration.ToleratesTaint``."""
        if self.effect and self.effect != effect:
            return False
        if self.key and self.key != key:
            return False
        if self.operator == "Exists":
            return True
        return self.value == value


@dataclass(frozen=True, slots=True)
class HostPort:
    ip: str  # "0.0.0.0" means every address
    protocol: str
    port: int


@dataclass(frozen=True, slots=True)
class SpreadConstraint:
    max_skew: int
    topology_key: str
    when_unsatisfiable: str  # DoNotSchedule, ScheduleAnyway
    selector: LabelSelector
    selector_key: str  # canonical text of the selector, for caching counts
    min_domains: int | None
    node_affinity_policy: str  # Honor, Ignore
    node_taints_policy: str  # Honor, Ignore
    match_label_keys: tuple[str, ...]
    #: Added by kube's system defaulting (PodTopologySpread ``defaultingType: System``) to a pod
    #: without constraints of its own: scoring then keeps nodes lacking a topology key.
    system_default: bool = False


@dataclass(frozen=True, slots=True)
class AffinityTerm:
    """A PodAffinityTerm (with its weight when preferred)."""

    selector: LabelSelector
    selector_key: str
    namespaces: frozenset[str]  # resolved: the pod's namespace when none are given
    namespace_selector: LabelSelector | None  # None: only `namespaces`
    topology_key: str
    weight: int = 0


@dataclass(slots=True)
class PodInfo:
    uid: str
    namespace: str
    name: str
    labels: dict[str, str]
    scheduler_name: str
    node_name: str
    priority: int
    creation: str
    phase: str
    deleting: bool
    gated: bool
    # Resource requests: cpu in millicores, others in integer units.
    requests: dict[str, int]
    nonzero_cpu: int
    nonzero_memory: int
    node_selector: dict[str, str] = field(default_factory=dict)
    required_terms: tuple[NodeSelectorTerm, ...] = ()
    preferred_terms: tuple[tuple[int, NodeSelectorTerm], ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    host_ports: tuple[HostPort, ...] = ()
    spread: tuple[SpreadConstraint, ...] = ()
    affinity: tuple[AffinityTerm, ...] = ()
    anti_affinity: tuple[AffinityTerm, ...] = ()
    preferred_affinity: tuple[AffinityTerm, ...] = ()
    preferred_anti_affinity: tuple[AffinityTerm, ...] = ()
    annotations: dict[str, str] = field(default_factory=dict)
    #: One normalized image name per init and app container, in that order (duplicates kept:
    #: kube's ImageLocality counts each container).
    images: tuple[str, ...] = ()
    #: The PersistentVolumeClaims the pod mounts, by name in its namespace (a generic
    #: ephemeral volume's claim is ``<pod>-<volume>``, as kube names it).
    claims: tuple[str, ...] = ()
    raw: dict[str, Any] = field(default_factory=dict, repr=False)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")


def has_affinity_terms(pod: PodInfo) -> bool:
    """Whether the pod carries any inter-pod (anti-)affinity term, required or preferred."""
    return bool(pod.affinity or pod.anti_affinity or pod.preferred_affinity
                or pod.preferred_anti_affinity)


def _claims(spec: Obj, pod_name: str) -> tuple[str, ...]:
    """The claim names of the pod's ``persistentVolumeClaim`` and ``ephemeral`` volumes."""
    out: list[str] = []
    for volume in spec.get("volumes") or ():
        if not isinstance(volume, _MAPPING):
            continue
        source = volume.get("persistentVolumeClaim")
        if isinstance(source, _MAPPING) and source.get("claimName"):
            out.append(str(source["claimName"]))
        elif isinstance(volume.get("ephemeral"), Mapping):
            out.append(f"{pod_name}-{volume.get('name', '')}")
    return tuple(dict.fromkeys(out))


def normalized_image_name(name: str) -> str:
    """kube-scheduler's ``normalizedImageName`` (imagelocality): a reference whose last ``:``
    does not come after its last ``/`` has no tag and gets ``:latest`` (``nginx`` ->
    ``nginx:latest``, ``gcr.io:5000/root`` -> ``gcr.io:5000/root:latest``); references with a
    tag or a digest are kept as they are. Nothing else is expanded: like kube, ``nginx`` does
    not match a node listing only ``docker.io/library/nginx:latest``."""
    if name.rfind(":") <= name.rfind("/"):
        name += ":latest"
    return sys.intern(name)


def _images(spec: Obj) -> tuple[str, ...]:
    out = []
    for key in ("initContainers", "containers"):
        containers = spec.get(key)
        for c in containers if isinstance(containers, list) else ():
            image = c.get("image") if isinstance(c, _MAPPING) else None
            out.append(normalized_image_name(image if isinstance(image, str) else ""))
    return tuple(out)


def pod_key(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '')}"


# -- parsing ------------------------------------------------------------------------------------

def _resource_list(rl: Any, where: str, problems: list[str]) -> dict[str, int]:
    out: dict[str, int] = {}
    if rl is None:
        return out
    if not isinstance(rl, _MAPPING):
        problems.append(f"{where}: must be a map of resource name to quantity")
        return out
    for name, raw in rl.items():
        if type(raw) is str and type(name) is str:
            # The common case, answered from the cached string converters; a negative or
            # malformed value takes the slow path below for its message.
            try:
                v = milli_value(raw) if name == "cpu" else value(raw)
            except QuantityError:
                v = -1
            if v >= 0 and raw[:1] != "-":
                out[name] = v
                continue
        try:
            q = parse_quantity(raw)
        except (QuantityError, TypeError):
            problems.append(f"{where}.{name}: {raw!r} is not a valid quantity")
            continue
        if q < 0:
            problems.append(f"{where}.{name}: must not be negative, got {raw!r}")
            continue
        out[str(name)] = milli_value(q) if name == "cpu" else value(q)
    return out


def _add(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        into[k] = into.get(k, 0) + v


def _max(into: dict[str, int], other: Mapping[str, int]) -> None:
    for k, v in other.items():
        if v > into.get(k, 0):
            into[k] = v


def _container_requests(c: Any, where: str, problems: list[str]) -> dict[str, int]:
    if not isinstance(c, _MAPPING):
        problems.append(f"{where}: must be an object")
        return {}
    resources = c.get("resources") or {}
    if not isinstance(resources, _MAPPING):
        problems.append(f"{where}.resources: must be an object")
        return {}
    requests = _resource_list(resources.get("requests"), f"{where}.resources.requests",
                              problems)
    # Limits without requests default the requests (API server defaulting; repeated here for
    # pods that reach us without it).
    for k, v in _resource_list(resources.get("limits"), f"{where}.resources.limits",
                               problems).items():
        requests.setdefault(k, v)
    return requests


def _pod_requests(spec: Obj, problems: list[str]) -> tuple[dict[str, int], int, int]:
    total: dict[str, int] = {}
    nonzero_cpu = nonzero_mem = 0
    containers = spec.get("containers") or []
    if not isinstance(containers, list):
        problems.append("spec.containers: must be a list")
        containers = []
    for i, c in enumerate(containers):
        req = _container_requests(c, f"spec.containers[{i}]", problems)
        _add(total, req)
        # kube-scheduler's non-zero defaults apply to requests that are absent, not to an
        # explicit zero (GetNonzeroRequestForResource).
        nonzero_cpu += req["cpu"] if "cpu" in req else DEFAULT_MILLI_CPU_REQUEST
        nonzero_mem += req["memory"] if "memory" in req else DEFAULT_MEMORY_REQUEST
    if not spec.get("initContainers") and spec.get("overhead") is None \
            and all(amount <= MAX_QUANTITY for amount in total.values()):
        # Most pods: nothing below applies (no init containers, no overhead, no overflow).
        return total, min(nonzero_cpu, MAX_QUANTITY), min(nonzero_mem, MAX_QUANTITY)
    init_max: dict[str, int] = {}
    sidecars: dict[str, int] = {}
    for i, c in enumerate(spec.get("initContainers") or []):
        req = _container_requests(c, f"spec.initContainers[{i}]", problems)
        if isinstance(c, _MAPPING) and c.get("restartPolicy") == "Always":
            _add(sidecars, req)
            _max(init_max, sidecars)
        else:
            running = dict(sidecars)
            _add(running, req)
            _max(init_max, running)
    _add(total, sidecars)
    _max(total, init_max)
    nonzero_cpu = max(nonzero_cpu + sidecars.get("cpu", 0), init_max.get("cpu", 0))
    nonzero_mem = max(nonzero_mem + sidecars.get("memory", 0), init_max.get("memory", 0))
    overhead = _resource_list(spec.get("overhead"), "spec.overhead", problems)
    _add(total, overhead)
    nonzero_cpu += overhead.get("cpu", 0)
    nonzero_mem += overhead.get("memory", 0)
    for name, amount in total.items():
        if amount > MAX_QUANTITY:
            unit = "m" if name == "cpu" else ""
            problems.append(f"resources: the pod requests {amount}{unit} {name} in all, more "
                            f"than the scheduler can count (at most {MAX_QUANTITY}{unit})")
            total[name] = MAX_QUANTITY
    return total, min(nonzero_cpu, MAX_QUANTITY), min(nonzero_mem, MAX_QUANTITY)


_NODE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")


def _requirements(items: Any, where: str, problems: list[str],
                  fields: bool = False) -> tuple[NodeSelectorRequirement, ...]:
    out = []
    for i, r in enumerate(items or ()):
        path = f"{where}[{i}]"
        if not isinstance(r, _MAPPING):
            problems.append(f"{path}: must be an object")
            continue
        op = r.get("operator")
        values = tuple(str(v) for v in r.get("values") or ())
        if op not in _NODE_OPERATORS or (fields and op not in ("In", "NotIn")):
            problems.append(f"{path}.operator: {op!r} is not a valid node selector operator")
            continue
        if op in ("In", "NotIn") and not values:
            problems.append(f"{path}.values: must be specified when operator is {op}")
            continue
        if op in ("Exists", "DoesNotExist") and values:
            problems.append(f"{path}.values: may not be specified when operator is {op}")
            continue
        if op in ("Gt", "Lt"):
            if len(values) != 1 or not _is_int(values[0]):
                problems.append(f"{path}.values: must be a single integer for operator {op}")
                continue
        if fields and len(values) != 1:
            problems.append(f"{path}.values: must be only one value for a node field selector")
            continue
        if fields and r.get("key") != "metadata.name":
            problems.append(f"{path}.key: only metadata.name is supported in matchFields")
            continue
        out.append(NodeSelectorRequirement(str(r.get("key", "")), op, values))
    return tuple(out)


_INT = re.compile(r"[+-]?[0-9]+")


def _is_int(s: str) -> bool:
    """Go's strconv.Atoi: an optional sign and digits, nothing else (no spaces, no '_')."""
    return _INT.fullmatch(s) is not None


def node_term(term: Any, where: str, problems: list[str]) -> NodeSelectorTerm | None:
    """A NodeSelectorTerm (``matchExpressions``, ``matchFields``); problems are appended to
    ``problems`` (paths under ``where``), and None returned for a term that is no object."""
    return _node_term(term, where, problems)


def _node_term(term: Any, where: str, problems: list[str]) -> NodeSelectorTerm | None:
    if not isinstance(term, _MAPPING):
        problems.append(f"{where}: must be an object")
        return None
    return NodeSelectorTerm(
        _requirements(term.get("matchExpressions"), f"{where}.matchExpressions", problems),
        _requirements(term.get("matchFields"), f"{where}.matchFields", problems, fields=True))


def _tolerations(items: Any, problems: list[str]) -> tuple[Toleration, ...]:
    out = []
    for i, t in enumerate(items or ()):
        if not isinstance(t, _MAPPING):
            problems.append(f"spec.tolerations[{i}]: must be an object")
            continue
        op = t.get("operator") or "Equal"
        if op not in ("Equal", "Exists"):
            problems.append(f"spec.tolerations[{i}].operator: {op!r} is not Equal or Exists")
            continue
        out.append(Toleration(str(t.get("key") or ""), op, str(t.get("value") or ""),
                              str(t.get("effect") or "")))
    return tuple(out)


def _host_ports(spec: Obj) -> tuple[HostPort, ...]:
    """The host ports the pod holds while it runs: those of its app containers and of its
    sidecars (init containers with ``restartPolicy: Always``), as kube's GetHostPorts counts
    them. An ordinary init container has finished before the app containers start. With
    ``hostNetwork``, a container port without a host port is one (the API server defaults the
    host port to the container port)."""
    out = []
    running = [c for c in spec.get("initContainers") or ()
               if isinstance(c, _MAPPING) and c.get("restartPolicy") == "Always"]
    running += [c for c in spec.get("containers") or () if isinstance(c, _MAPPING)]
    host_network = bool(spec.get("hostNetwork"))
    for c in running:
        for p in c.get("ports") or ():
            if not isinstance(p, _MAPPING):
                continue
            port = p.get("hostPort") or (p.get("containerPort") if host_network else None)
            if port:
                out.append(HostPort(str(p.get("hostIP") or "0.0.0.0"),
                                    str(p.get("protocol") or "TCP"), int(port)))
    return tuple(out)


def _selector(sel: Any, where: str, problems: list[str]) -> tuple[LabelSelector, str] | None:
    try:
        compiled = label_selector_from_dict(sel)
    except SelectorError as exc:
        problems.append(f"{where}: {exc}")
        return None
    # An absent selector matches nothing, an empty one everything: both print as "", so the
    # cache key must tell them apart.
    return compiled, "<nothing>" if compiled.matches_nothing else str(compiled)


def _with_match_label_keys(sel: Any, keys: Any, labels: Mapping[str, str]) -> Any:
    """matchLabelKeys: the pod's own values for those keys are ANDed into the selector."""
    if not keys or not isinstance(sel, _MAPPING):
        return sel
    merged = dict(sel)
    exprs = list(merged.get("matchExpressions") or [])
    for k in keys:
        if k in labels:
            exprs.append({"key": k, "operator": "In", "values": [labels[k]]})
    merged["matchExpressions"] = exprs
    return merged


def _spread(spec: Obj, labels: Mapping[str, str], problems: list[str]
            ) -> tuple[SpreadConstraint, ...]:
    out = []
    for i, c in enumerate(spec.get("topologySpreadConstraints") or ()):
        where = f"spec.topologySpreadConstraints[{i}]"
        if not isinstance(c, _MAPPING):
            problems.append(f"{where}: must be an object")
            continue
        skew = c.get("maxSkew")
        if not isinstance(skew, int) or isinstance(skew, bool) or skew < 1:
            problems.append(f"{where}.maxSkew: must be an integer of at least 1")
            continue
        when = c.get("whenUnsatisfiable")
        if when not in ("DoNotSchedule", "ScheduleAnyway"):
            problems.append(f"{where}.whenUnsatisfiable: {when!r} is not DoNotSchedule or "
                            "ScheduleAnyway")
            continue
        if not c.get("topologyKey"):
            problems.append(f"{where}.topologyKey: required")
            continue
        keys = tuple(str(k) for k in c.get("matchLabelKeys") or ())
        parsed = _selector(_with_match_label_keys(c.get("labelSelector"), keys, labels),
                           f"{where}.labelSelector", problems)
        if parsed is None:
            continue
        min_domains = c.get("minDomains")
        out.append(SpreadConstraint(
            max_skew=skew, topology_key=str(c["topologyKey"]), when_unsatisfiable=when,
            selector=parsed[0], selector_key=parsed[1],
            min_domains=min_domains if isinstance(min_domains, int) else None,
            node_affinity_policy=str(c.get("nodeAffinityPolicy") or "Honor"),
            node_taints_policy=str(c.get("nodeTaintsPolicy") or "Ignore"),
            match_label_keys=keys))
    return tuple(out)


def _affinity_terms(items: Any, where: str, namespace: str, labels: Mapping[str, str],
                    problems: list[str], weighted: bool) -> tuple[AffinityTerm, ...]:
    out = []
    for i, raw in enumerate(items or ()):
        path = f"{where}[{i}]"
        if not isinstance(raw, _MAPPING):
            problems.append(f"{path}: must be an object")
            continue
        weight = 0
        term = raw
        if weighted:
            weight = raw.get("weight")  # type: ignore[assignment]
            if not isinstance(weight, int) or not 1 <= weight <= 100:
                problems.append(f"{path}.weight: must be an integer from 1 to 100")
                continue
            term = raw.get("podAffinityTerm") or {}
            path += ".podAffinityTerm"
        if not term.get("topologyKey"):
            problems.append(f"{path}.topologyKey: required")
            continue
        sel = _with_match_label_keys(term.get("labelSelector"), term.get("matchLabelKeys"),
                                     labels)
        parsed = _selector(sel, f"{path}.labelSelector", problems)
        if parsed is None:
            continue
        ns_sel = None
        if term.get("namespaceSelector") is not None:
            ns_parsed = _selector(term["namespaceSelector"], f"{path}.namespaceSelector",
                                  problems)
            if ns_parsed is None:
                continue
            ns_sel = ns_parsed[0]
        namespaces = frozenset(str(n) for n in term.get("namespaces") or ())
        if not namespaces and ns_sel is None:
            namespaces = frozenset((namespace,))
        out.append(AffinityTerm(parsed[0], parsed[1], namespaces, ns_sel,
                                str(term["topologyKey"]), weight))
    return tuple(out)


def pod_info(obj: Obj) -> PodInfo:
    """Parse a pod; raises :class:`PodSpecError` listing every problem found.

    Nothing else escapes: a shape the checks below do not foresee (a list where an object
    belongs, a priority that is not a number) is reported as a problem too, so that one
    malformed pod is that pod's problem and never a fault of the caller.
    """
    try:
        return _pod_info(obj)
    except PodSpecError:
        raise
    except Exception as exc:
        raise PodSpecError([f"the pod cannot be read: {type(exc).__name__}: {exc}"]) from exc


def _pod_info(obj: Obj) -> PodInfo:
    problems: list[str] = []
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    if not isinstance(meta, _MAPPING) or not isinstance(spec, _MAPPING):
        raise PodSpecError(["metadata and spec must be objects"])
    labels = dict(meta.get("labels") or {})
    requests, nonzero_cpu, nonzero_mem = _pod_requests(spec, problems)
    node_selector = spec.get("nodeSelector") or {}
    if not isinstance(node_selector, _MAPPING):
        problems.append("spec.nodeSelector: must be a map")
        node_selector = {}
    affinity = spec.get("affinity") or {}
    node_aff = affinity.get("nodeAffinity") or {}
    required: tuple[NodeSelectorTerm, ...] = ()
    req = node_aff.get("requiredDuringSchedulingIgnoredDuringExecution")
    if req is not None:
        terms = [_node_term(t, "spec.affinity.nodeAffinity.required.nodeSelectorTerms"
                            f"[{i}]", problems)
                 for i, t in enumerate(req.get("nodeSelectorTerms") or ())]
        required = tuple(t for t in terms if t is not None)
        if not required:
            problems.append("spec.affinity.nodeAffinity.required.nodeSelectorTerms: must have "
                            "at least one term")
    preferred = []
    for i, p in enumerate(node_aff.get("preferredDuringSchedulingIgnoredDuringExecution") or ()):
        where = f"spec.affinity.nodeAffinity.preferred[{i}]"
        weight = p.get("weight") if isinstance(p, _MAPPING) else None
        if not isinstance(weight, int) or not 1 <= weight <= 100:
            problems.append(f"{where}.weight: must be an integer from 1 to 100")
            continue
        term = _node_term(p.get("preference") or {}, f"{where}.preference", problems)
        if term is not None:
            preferred.append((weight, term))
    namespace = str(meta.get("namespace") or "default")
    pa = affinity.get("podAffinity") or {}
    paa = affinity.get("podAntiAffinity") or {}
    info = PodInfo(
        uid=str(meta.get("uid") or ""),
        namespace=namespace,
        name=str(meta.get("name") or ""),
        labels=labels,
        scheduler_name=str(spec.get("schedulerName") or "default-scheduler"),
        node_name=str(spec.get("nodeName") or ""),
        priority=int(spec.get("priority") or 0),
        creation=str(meta.get("creationTimestamp") or ""),
        phase=str(status.get("phase") or "Pending"),
        deleting=bool(meta.get("deletionTimestamp")),
        gated=bool(spec.get("schedulingGates")),
        requests=requests,
        nonzero_cpu=nonzero_cpu,
        nonzero_memory=nonzero_mem,
        node_selector={str(k): str(v) for k, v in node_selector.items()},
        required_terms=required,
        preferred_terms=tuple(preferred),
        tolerations=_tolerations(spec.get("tolerations"), problems),
        host_ports=_host_ports(spec),
        spread=_spread(spec, labels, problems),
        affinity=_affinity_terms(pa.get("requiredDuringSchedulingIgnoredDuringExecution"),
                                 "spec.affinity.podAffinity.required", namespace, labels,
                                 problems, False),
        anti_affinity=_affinity_terms(
            paa.get("requiredDuringSchedulingIgnoredDuringExecution"),
            "spec.affinity.podAntiAffinity.required", namespace, labels, problems, False),
        preferred_affinity=_affinity_terms(
            pa.get("preferredDuringSchedulingIgnoredDuringExecution"),
            "spec.affinity.podAffinity.preferred", namespace, labels, problems, True),
        preferred_anti_affinity=_affinity_terms(
            paa.get("preferredDuringSchedulingIgnoredDuringExecution"),
            "spec.affinity.podAntiAffinity.preferred", namespace, labels, problems, True),
        annotations=dict(meta.get("annotations") or {}),
        images=_images(spec),
        claims=_claims(spec, str(meta.get("name") or "")),
        raw=dict(obj),
    )
    if problems:
        raise PodSpecError(problems, info)
    return info


# -- what preemption reads of a pod (kept in its raw object: read rarely) ----------------------

#: A pod's start time when it has none yet (assumed, or bound and not started): later than any
#: real one, as kube's ``GetPodStartTime`` answers "now".
NOT_STARTED = "~"


def start_time(pod: PodInfo) -> str:
    """``status.startTime`` (RFC 3339, comparable as text), or :data:`NOT_STARTED`."""
    status = pod.raw.get("status")
    value = status.get("startTime") if isinstance(status, _MAPPING) else None
    return value if isinstance(value, str) and value else NOT_STARTED


def preempts_never(pod: PodInfo) -> bool:
    """``spec.preemptionPolicy: Never``: the pod waits rather than evict anyone."""
    spec = pod.raw.get("spec")
    return isinstance(spec, _MAPPING) and spec.get("preemptionPolicy") == "Never"


def nominated_node(pod: PodInfo) -> str:
    """``status.nominatedNodeName``: the node a preemption made room on for this pod."""
    status = pod.raw.get("status")
    value = status.get("nominatedNodeName") if isinstance(status, _MAPPING) else None
    return value if isinstance(value, str) else ""


def terminating_by_preemption(pod: PodInfo) -> bool:
    """Being deleted because a scheduler preempted it (kube's ``podTerminatingByPreemption``):
    a deletion timestamp and the ``DisruptionTarget`` condition with reason
    ``PreemptionByScheduler``."""
    if not pod.deleting:
        return False
    status = pod.raw.get("status")
    for condition in (status.get("conditions") or ()) if isinstance(status, _MAPPING) else ():
        if isinstance(condition, _MAPPING) and condition.get("type") == "DisruptionTarget":
            return condition.get("status") == "True" and \
                condition.get("reason") == "PreemptionByScheduler"
    return False
