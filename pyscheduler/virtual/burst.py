"""Which pods may burst to a cloud pool, and to which pool — decided when no real node fits.

Pure logic over the scheduler's view: the configured pools (in fallback order), each pool's
virtual node as the cluster shows it (its allocatable is the pool's quota), the pods already
placed on each virtual node, and the pod. :meth:`Burster.choose` answers a pool's virtual node, or
the reason the pod stays unschedulable, in words an operator can act on:

* pods that cannot run outside the cluster's own machines: DaemonSet pods, ``hostNetwork``,
  host ports, ``hostPath`` and ``local`` volumes;
* pods that opt out: ``wssp/burst: "never"``;
* a ``wssp/cloud-platform`` label that names no configured pool's platform;
* requests beyond every candidate pool's per-instance limits, a pool's remaining quota, or its
  pod cap.

Placements are counted at once (:meth:`Burster.place`), before the binding is sent, so a burst
of pods cannot overrun a pool between two decisions; :meth:`Burster.forget` undoes one.

When a pool keeps refusing a pod's instance, the provider marks the pod Failed and the pool is
skipped for pods at least that large (:meth:`Burster.refused`). A controller's replacement pod
then tries the next pool; a bare pod has no controller, so :func:`next_pool_pod` makes its
replacement: a copy, unbound, named ``<name>-p<attempt>`` (a pod's node cannot change), at most
one per further pool.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pyscheduler.api.names import (
    BURST_ANNOTATION,
    BURST_ATTEMPT_ANNOTATION,
    INSTANCE_ANNOTATION,
    NEVER,
    PLATFORM_LABEL,
    POOL_LABEL,
    REPLACES_ANNOTATION,
    VIRTUAL_LABEL,
    virtual_node_name,
)
from pyscheduler.framework.pod import NodeSelectorRequirement, NodeSelectorTerm

__all__ = [
    "BurstDecision",
    "Burster",
    "PoolSettings",
    "burst_blocker",
    "next_pool_pod",
]

_MAX_NAME = 253


@dataclass(frozen=True, slots=True)
class PoolSettings:
    name: str
    platform: str
    max_pods: int | None = None
    # Per-instance limits as the cloud reports them (0: unknown, no check).
    max_instance_cpu_millis: int = 0
    max_instance_memory_bytes: int = 0


@dataclass(frozen=True, slots=True)
class BurstDecision:
    node: str | None
    pool: str | None
    reason: str  # why not (empty when node is set)


@dataclass(slots=True)
class _PoolState:
    settings: PoolSettings
    allocatable_cpu: int = 0      # millicores; from the virtual node
    allocatable_memory: int = 0   # bytes
    allocatable_pods: int = 0
    ready: bool = False
    labels: Mapping[str, str] = field(default_factory=dict)
    placed: dict[str, tuple[int, int]] = field(default_factory=dict)  # uid -> (cpu, memory)
    cpu: int = 0      # sums over placed, kept as pods come and go
    memory: int = 0

    def used(self) -> tuple[int, int, int]:
        return self.cpu, self.memory, len(self.placed)

    def add(self, uid: str, cpu: int, memory: int) -> None:
        self.remove(uid)
        self.placed[uid] = (cpu, memory)
        self.cpu += cpu
        self.memory += memory

    def remove(self, uid: str) -> None:
        old = self.placed.pop(uid, None)
        if old is not None:
            self.cpu -= old[0]
            self.memory -= old[1]


def burst_blocker(pod: Mapping[str, Any]) -> str | None:
    """Why this pod may never run on a virtual node, or None when it may."""
    meta = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    if (meta.get("annotations") or {}).get(BURST_ANNOTATION) == NEVER:
        return f'the pod is annotated {BURST_ANNOTATION}: "never"'
    for ref in meta.get("ownerReferences") or ():
        if ref.get("kind") == "DaemonSet":
            return "DaemonSet pods run on every real node and never burst"
    if spec.get("hostNetwork"):
        return "the pod uses hostNetwork"
    for c in (spec.get("containers") or []) + (spec.get("initContainers") or []):
        for p in (c.get("ports") or ()) if isinstance(c, Mapping) else ():
            if isinstance(p, Mapping) and p.get("hostPort"):
                return f"container {c.get('name')} uses hostPort {p.get('hostPort')}"
    for v in spec.get("volumes") or ():
        if isinstance(v, Mapping):
            if "hostPath" in v:
                return f"volume {v.get('name')} is a hostPath volume"
            if "local" in v:
                return f"volume {v.get('name')} is a local volume"
    return None


class Burster:
    """The pools in fallback order and what each holds."""

    def __init__(self, pools: Sequence[PoolSettings], *, refusal_ttl: float = 300.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.pools: dict[str, _PoolState] = {p.name: _PoolState(p) for p in pools}
        # pool -> (cpu, memory, until): the cloud refused an instance this large; pods at
        # least as large try the next pool until the refusal ages out.
        self.refusals: dict[str, list[tuple[int, int, float]]] = {}
        self.refusal_ttl = refusal_ttl
        self.clock = clock
        self.order = [p.name for p in pools]
        self.by_node = {virtual_node_name(p.name): p.name for p in pools}

    # -- what the cluster shows ----------------------------------------------------------------

    def is_virtual_node(self, name: str) -> bool:
        return name in self.by_node

    def node_seen(self, name: str, cpu_millis: int, memory_bytes: int, pods: int,
                  ready: bool, labels: Mapping[str, str] | None = None) -> None:
        state = self.pools[self.by_node[name]]
        state.allocatable_cpu, state.allocatable_memory = cpu_millis, memory_bytes
        state.allocatable_pods, state.ready = pods, ready
        state.labels = dict(labels or {})

    def set_limits(self, pool: str, max_cpu_millis: int, max_memory_bytes: int) -> None:
        """The pool's per-instance limits, as the cloud reports them."""
        state = self.pools[pool]
        state.settings = PoolSettings(state.settings.name, state.settings.platform,
                                      state.settings.max_pods, max_cpu_millis, max_memory_bytes)

    def refused(self, node: str, cpu_millis: int, memory_bytes: int) -> None:
        """The cloud kept refusing a pod of this size in this pool (the provider gave up)."""
        pool = self.by_node.get(node)
        if pool is not None:
            self.refusals.setdefault(pool, []).append(
                (cpu_millis, memory_bytes, self.clock() + self.refusal_ttl))

    def _was_refused(self, pool: str, cpu_millis: int, memory_bytes: int) -> bool:
        now = self.clock()
        live = [r for r in self.refusals.get(pool, ()) if r[2] > now]
        self.refusals[pool] = live
        return any(cpu_millis >= c and memory_bytes >= m for c, m, _ in live)

    def node_gone(self, name: str) -> None:
        state = self.pools[self.by_node[name]]
        state.ready = False
        state.allocatable_cpu = state.allocatable_memory = state.allocatable_pods = 0

    def place(self, node: str, uid: str, cpu_millis: int, memory_bytes: int) -> None:
        """Count a pod on a virtual node (idempotent by uid)."""
        self.pools[self.by_node[node]].add(uid, cpu_millis, memory_bytes)

    def forget(self, uid: str) -> None:
        for state in self.pools.values():
            state.remove(uid)

    def placed_on(self, node: str) -> int:
        return len(self.pools[self.by_node[node]].placed)

    # -- the decision --------------------------------------------------------------------------

    def choose(self, pod: Mapping[str, Any], cpu_millis: int, memory_bytes: int, *,
               node_selector: Mapping[str, str] | None = None,
               required_terms: Sequence[NodeSelectorTerm] = ()) -> BurstDecision:
        blocker = burst_blocker(pod)
        if blocker is not None:
            return BurstDecision(None, None, f"cannot burst: {blocker}")
        labels = (pod.get("metadata") or {}).get("labels") or {}
        platform = labels.get(PLATFORM_LABEL)
        candidates = self.order
        if platform is not None:
            candidates = [p for p in self.order if self.pools[p].settings.platform == platform]
            if not candidates:
                known = sorted({s.settings.platform for s in self.pools.values()})
                return BurstDecision(None, None, f"cannot burst: label {PLATFORM_LABEL}="
                                     f"{platform} names no configured pool (platforms: "
                                     f"{', '.join(known) or 'none'})")
        why: list[str] = []
        for name in candidates:
            state = self.pools[name]
            s = state.settings
            if not state.ready:
                why.append(f"pool {name}: virtual node not ready")
                continue
            if self._was_refused(name, cpu_millis, memory_bytes):
                why.append(f"pool {name}: recently refused an instance this large")
                continue
            if not _matches(state.labels, virtual_node_name(name), node_selector or {},
                            required_terms):
                why.append(f"pool {name}: the pod's node selector or affinity does not match "
                           f"its virtual node")
                continue
            if s.max_instance_cpu_millis and cpu_millis > s.max_instance_cpu_millis:
                why.append(f"pool {name}: cpu request {cpu_millis}m exceeds the per-instance "
                           f"limit {s.max_instance_cpu_millis}m")
                continue
            if s.max_instance_memory_bytes and memory_bytes > s.max_instance_memory_bytes:
                why.append(f"pool {name}: memory request {memory_bytes} exceeds the "
                           f"per-instance limit {s.max_instance_memory_bytes}")
                continue
            cpu, mem, count = state.used()
            cap = state.allocatable_pods if s.max_pods is None else min(
                s.max_pods, state.allocatable_pods)
            if count >= cap:
                why.append(f"pool {name}: {count} pods, cap {cap}")
                continue
            if cpu + cpu_millis > state.allocatable_cpu or \
                    mem + memory_bytes > state.allocatable_memory:
                why.append(f"pool {name}: quota exhausted")
                continue
            return BurstDecision(virtual_node_name(name), name, "")
        return BurstDecision(None, None, "cannot burst: " + "; ".join(why or ["no pools"]))


def _requirement_ok(req: NodeSelectorRequirement, value: str | None) -> bool:
    op = req.operator
    if op == "In":
        return value is not None and value in req.values
    if op == "NotIn":
        return value is None or value not in req.values
    if op == "Exists":
        return value is not None
    if op == "DoesNotExist":
        return value is None
    try:
        have, bound = int(value or ""), int(req.values[0])
    except (ValueError, IndexError):
        return False
    return have > bound if op == "Gt" else have < bound


def _matches(labels: Mapping[str, str], name: str, selector: Mapping[str, str],
             terms: Sequence[NodeSelectorTerm]) -> bool:
    """Kubernetes' node selector and required node affinity against one node."""
    if any(labels.get(k) != v for k, v in selector.items()):
        return False
    if not terms:
        return True
    return any((term.match_expressions or term.match_fields)
               and all(_requirement_ok(r, labels.get(r.key)) for r in term.match_expressions)
               and all(_requirement_ok(r, name) for r in term.match_fields)
               for term in terms)


def next_pool_pod(pod: Mapping[str, Any], pools: int) -> dict[str, Any] | None:
    """The copy of a bare pod whose pool kept refusing it, to be scheduled again (the refused
    pool is skipped): ``None`` for a pod a controller owns (the controller replaces it), a pod
    being deleted, or one that has already had a try in every pool."""
    meta = pod.get("metadata") or {}
    if meta.get("deletionTimestamp") or any(
            ref.get("controller") for ref in meta.get("ownerReferences") or ()):
        return None
    annotations = dict(meta.get("annotations") or {})
    try:
        attempt = int(annotations.get(BURST_ATTEMPT_ANNOTATION, "1")) + 1
    except ValueError:
        attempt = 2
    if attempt > pools:
        return None
    original = str(meta.get("name", ""))
    replaces = annotations.get(REPLACES_ANNOTATION)
    if replaces:  # a copy of a copy keeps the first pod's name as its base
        original = replaces.split(" ", 1)[0]
    suffix = f"-p{attempt}"
    name = original[:_MAX_NAME - len(suffix)].rstrip("-.") + suffix
    annotations.pop(INSTANCE_ANNOTATION, None)
    annotations[BURST_ATTEMPT_ANNOTATION] = str(attempt)
    annotations[REPLACES_ANNOTATION] = f"{original} ({meta.get('name')} {meta.get('uid', '')})"
    labels = {k: v for k, v in (meta.get("labels") or {}).items()
              if k not in (VIRTUAL_LABEL, POOL_LABEL)}
    spec = {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"}
    out_meta: dict[str, Any] = {"name": name, "namespace": meta.get("namespace"),
                                "labels": labels, "annotations": annotations}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": out_meta, "spec": spec}

