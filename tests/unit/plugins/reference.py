"""Plain reference implementations of the built-in plugins: one node at a time, no numpy.

Each function restates kube-scheduler's rule for a single node as directly as possible, from the
node's own object and the pods running on it (not from the node table's derived columns), so the
differential tests can check the vectorized plugins against something obviously right.

Filters return the node's reasons as ``(message, unresolvable)`` pairs, in kube's order; an empty
list means the node passes. Scores take the list of nodes being scored (kube normalizes over
them) and return one score per node.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from pyscheduler.framework.nodetable import NodeInfo, Taint
from pyscheduler.framework.pod import (
    HostPort,
    NodeSelectorRequirement,
    NodeSelectorTerm,
    PodInfo,
    Toleration,
)

__all__ = [
    "RefNode",
    "balanced_allocation",
    "RefImageStates",
    "default_normalize_score",
    "image_locality",
    "least_allocated",
    "most_allocated",
    "most_free_memory",
    "node_affinity",
    "node_affinity_score",
    "node_name",
    "node_ports",
    "node_resources_fit",
    "node_unschedulable",
    "requested_to_capacity_ratio",
    "taint_toleration",
    "taint_toleration_score",
    "untolerated_taints",
]

Reasons = list[tuple[str, bool]]

MAX_NODE_SCORE = 100
DEFAULT_MILLI_CPU = 100
DEFAULT_MEMORY = 200 * 1024 * 1024


@dataclass
class RefNode:
    """A node and the pods bound (or assumed) to it, like kube's ``NodeInfo``."""

    info: NodeInfo
    pods: list[PodInfo] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.info.name

    def allocatable(self, resource: str) -> int:
        return self.info.allocatable.get(resource, 0)

    def requested(self, resource: str) -> int:
        """Sum of the pods' actual requests (``NodeInfo.Requested``)."""
        return sum(p.requests.get(resource, 0) for p in self.pods)

    def nonzero_requested(self, resource: str) -> int:
        """``NodeInfo.NonZeroRequested`` for cpu and memory."""
        if resource == "cpu":
            return sum(p.nonzero_cpu for p in self.pods)
        return sum(p.nonzero_memory for p in self.pods)

    def used_ports(self) -> list[HostPort]:
        return [hp for p in self.pods for hp in p.host_ports]


def _tolerates(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    """``TolerationsTolerateTaint`` / ``Toleration.ToleratesTaint``, written out."""
    for t in tolerations:
        if t.effect != "" and t.effect != taint.effect:
            continue
        if t.key != "" and t.key != taint.key:
            continue
        if t.operator == "Exists" or t.value == taint.value:
            return True
    return False


# -- filters ------------------------------------------------------------------------------------

def node_unschedulable(pod: PodInfo, node: RefNode) -> Reasons:
    if not node.info.unschedulable:
        return []
    if _tolerates(pod.tolerations, Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")):
        return []
    return [("node(s) were unschedulable", True)]


def node_name(pod: PodInfo, node: RefNode) -> Reasons:
    if pod.node_name == "" or pod.node_name == node.name:
        return []
    return [("node(s) didn't match the requested node name", True)]


def _go_int(text: str) -> int | None:
    if not re.fullmatch(r"[+-]?[0-9]+", text):
        return None
    number = int(text)
    return number if -(2**63) <= number < 2**63 else None


def _requirement_ok(r: NodeSelectorRequirement) -> bool:
    """Whether kube can parse the requirement (labels.NewRequirement's checks that matter)."""
    if r.operator in ("In", "NotIn"):
        return len(r.values) > 0
    if r.operator in ("Exists", "DoesNotExist"):
        return len(r.values) == 0
    if r.operator in ("Gt", "Lt"):
        return len(r.values) == 1 and _go_int(r.values[0]) is not None
    return False


def _expression_matches(r: NodeSelectorRequirement, labels: dict[str, str]) -> bool:
    has = r.key in labels
    value = labels.get(r.key, "")
    if r.operator == "In":
        return has and value in r.values
    if r.operator == "NotIn":
        return not has or value not in r.values
    if r.operator == "Exists":
        return has
    if r.operator == "DoesNotExist":
        return not has
    bound = _go_int(r.values[0])
    number = _go_int(value) if has else None
    if bound is None or number is None:
        return False
    return number > bound if r.operator == "Gt" else number < bound


def _field_ok(r: NodeSelectorRequirement) -> bool:
    return r.key == "metadata.name" and r.operator in ("In", "NotIn") and len(r.values) == 1


def term_matches(term: NodeSelectorTerm, node: RefNode) -> bool:
    """``nodeSelectorTerm.match`` of component-helpers, with kube's parse errors as no-match."""
    if not term.match_expressions and not term.match_fields:
        return False
    if not all(_requirement_ok(r) for r in term.match_expressions):
        return False
    if not all(_field_ok(r) for r in term.match_fields):
        return False
    labels = dict(node.info.labels)
    for r in term.match_expressions:
        if not _expression_matches(r, labels):
            return False
    for r in term.match_fields:
        equal = node.name == r.values[0]
        if equal != (r.operator == "In"):
            return False
    return True


def _pinned_names(pod: PodInfo) -> set[str] | None:
    union: set[str] | None = None
    for term in pod.required_terms:
        names: set[str] | None = None
        for r in term.match_fields:
            if r.key == "metadata.name" and r.operator == "In":
                names = set(r.values) if names is None else names & set(r.values)
        if names is None:
            return None
        union = names if union is None else union | names
    return union


def node_affinity(pod: PodInfo, node: RefNode) -> Reasons:
    if not pod.node_selector and not pod.required_terms:
        return []
    pinned = _pinned_names(pod)
    if pinned is not None and not pinned:
        return [("pod affinity terms conflict", True)]
    if pinned is not None and node.name not in pinned:
        return [("node(s) didn't satisfy plugin(s) [NodeAffinity]", True)]
    labels = node.info.labels
    selector_ok = all(k in labels and labels[k] == v for k, v in pod.node_selector.items())
    affinity_ok = not pod.required_terms or any(term_matches(t, node)
                                                 for t in pod.required_terms)
    if selector_ok and affinity_ok:
        return []
    return [("node(s) didn't match Pod's node affinity/selector", True)]


def untolerated_taints(pod: PodInfo, node: RefNode) -> list[str]:
    """Messages of the node's NoSchedule/NoExecute taints the pod does not tolerate, in the
    node's taint order; kube reports the first."""
    return [f"node(s) had untolerated taint {{{t.key}: {t.value}}}"
            for t in node.info.taints
            if t.effect in ("NoSchedule", "NoExecute") and not _tolerates(pod.tolerations, t)]


def taint_toleration(pod: PodInfo, node: RefNode) -> Reasons:
    untolerated = untolerated_taints(pod, node)
    return [(untolerated[0], True)] if untolerated else []


def _port_conflict(used: HostPort, wanted: HostPort) -> bool:
    if wanted.port <= 0 or (used.protocol, used.port) != (wanted.protocol, wanted.port):
        return False
    return "0.0.0.0" in (wanted.ip, used.ip) or used.ip == wanted.ip


def node_ports(pod: PodInfo, node: RefNode) -> Reasons:
    used = node.used_ports()
    for wanted in pod.host_ports:
        if any(_port_conflict(u, wanted) for u in used):
            return [("node(s) didn't have free ports for the requested pod ports", False)]
    return []


def _is_extended(name: str) -> bool:
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def _fit_order(names: Iterable[str]) -> list[str]:
    base = ["cpu", "memory", "ephemeral-storage"]
    return [n for n in base if n in names] + sorted(n for n in names if n not in base)


def node_resources_fit(pod: PodInfo, node: RefNode, ignored: Iterable[str] = (),
                       ignored_groups: Iterable[str] = ()) -> Reasons:
    """``fitsRequest``."""
    reasons: Reasons = []
    if len(node.pods) + 1 > node.allocatable("pods"):
        reasons.append(("Too many pods", False))
    for name in _fit_order(pod.requests):
        amount = pod.requests[name]
        if name == "pods" or amount <= 0:
            continue
        if _is_extended(name) and (name in set(ignored)
                                   or name.split("/")[0] in set(ignored_groups)):
            continue
        if amount > node.allocatable(name) - node.requested(name):
            reasons.append((f"Insufficient {name}", amount > node.allocatable(name)))
    return reasons


# -- scores -------------------------------------------------------------------------------------

def default_normalize_score(scores: Sequence[int], reverse: bool) -> list[int]:
    """``helper.DefaultNormalizeScore(MaxNodeScore, reverse, scores)``."""
    top = 0
    for s in scores:
        if s > top:
            top = s
    if top == 0:
        return [MAX_NODE_SCORE if reverse else s for s in scores]
    out = []
    for s in scores:
        s = MAX_NODE_SCORE * s // top
        out.append(MAX_NODE_SCORE - s if reverse else s)
    return out


def node_affinity_score(pod: PodInfo, nodes: Sequence[RefNode]) -> list[int]:
    if not pod.preferred_terms:
        return [0] * len(nodes)
    raw = []
    for node in nodes:
        total = 0
        for weight, term in pod.preferred_terms:
            if weight != 0 and term_matches(term, node):
                total += weight
        raw.append(total)
    return default_normalize_score(raw, reverse=False)


def taint_toleration_score(pod: PodInfo, nodes: Sequence[RefNode]) -> list[int]:
    prefer = [t for t in pod.tolerations if t.effect in ("", "PreferNoSchedule")]
    raw = []
    for node in nodes:
        raw.append(sum(1 for t in node.info.taints
                       if t.effect == "PreferNoSchedule" and not _tolerates(prefer, t)))
    return default_normalize_score(raw, reverse=True)


def _pod_request(pod: PodInfo, resource: str, nonzero: bool) -> int:
    if nonzero and resource == "cpu":
        return pod.nonzero_cpu
    if nonzero and resource == "memory":
        return pod.nonzero_memory
    return pod.requests.get(resource, 0)


def _allocatable_requested(pod: PodInfo, node: RefNode, resource: str,
                           nonzero: bool) -> tuple[int, int]:
    """``calculateResourceAllocatableRequest``: (0, 0) means "leave this resource out"."""
    amount = _pod_request(pod, resource, nonzero)
    if resource in ("cpu", "memory"):
        used = node.nonzero_requested(resource) if nonzero else node.requested(resource)
        return node.allocatable(resource), used + amount
    if resource == "ephemeral-storage":
        return node.allocatable(resource), node.requested(resource) + amount
    if resource == "pods" or amount == 0:
        return 0, 0
    if resource not in node.info.allocatable:
        return 0, 0
    return node.allocatable(resource), node.requested(resource) + amount


def _weighted(pod: PodInfo, node: RefNode, resources: Sequence[tuple[str, int]],
              per_resource: str) -> int:
    node_score = weight_sum = 0
    for resource, weight in resources:
        alloc, req = _allocatable_requested(pod, node, resource, nonzero=True)
        if alloc == 0:
            continue
        if per_resource == "least":
            score = 0 if req > alloc else (alloc - req) * MAX_NODE_SCORE // alloc
        else:
            score = min(req, alloc) * MAX_NODE_SCORE // alloc
        node_score += score * weight
        weight_sum += weight
    return node_score // weight_sum if weight_sum else 0


def least_allocated(pod: PodInfo, node: RefNode,
                    resources: Sequence[tuple[str, int]] = (("cpu", 1), ("memory", 1))) -> int:
    return _weighted(pod, node, resources, "least")


def most_allocated(pod: PodInfo, node: RefNode,
                   resources: Sequence[tuple[str, int]] = (("cpu", 1), ("memory", 1))) -> int:
    return _weighted(pod, node, resources, "most")


def most_free_memory(pod: PodInfo, nodes: Sequence[RefNode]) -> list[int]:
    free = [max(0, n.allocatable("memory") - n.requested("memory")
                - pod.requests.get("memory", 0)) for n in nodes]
    top = max(free, default=0)
    return [f * MAX_NODE_SCORE // top if top else 0 for f in free]


def balanced_allocation(pod: PodInfo, node: RefNode,
                        resources: Sequence[str] = ("cpu", "memory")) -> int:
    """``balancedResourceScorer`` with actual requests; 0 for a best-effort pod (Skip)."""
    if all(_pod_request(pod, r, nonzero=False) == 0 for r in resources if r != "pods"):
        return 0
    fractions: list[float] = []
    total = 0.0
    for resource in resources:
        alloc, req = _allocatable_requested(pod, node, resource, nonzero=False)
        if alloc == 0:
            continue
        fraction = float(req) / float(alloc)
        if fraction > 1:
            fraction = 1.0
        total += fraction
        fractions.append(fraction)
    std = 0.0
    if len(fractions) == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif len(fractions) > 2:
        mean = total / float(len(fractions))
        squares = 0.0
        for fraction in fractions:
            squares = squares + (fraction - mean) * (fraction - mean)
        std = math.sqrt(squares / float(len(fractions)))
    return int((1 - std) * float(MAX_NODE_SCORE))


def _go_round(x: float) -> int:
    """Go's ``math.Round`` for non-negative values: halves away from zero."""
    return math.floor(x + 0.5)


def _shape_score(shape: Sequence[tuple[int, int]], p: int) -> int:
    """``BuildBrokenLinearFunction`` over points already scaled to 0..100, step by step."""
    for i in range(len(shape)):
        if p <= shape[i][0]:
            if i == 0:
                return shape[0][1]
            rise = (shape[i][1] - shape[i - 1][1]) * (p - shape[i - 1][0])
            run = shape[i][0] - shape[i - 1][0]
            return shape[i - 1][1] + int(rise / run)  # Go: truncation toward zero
    return shape[len(shape) - 1][1]


def requested_to_capacity_ratio(pod: PodInfo, node: RefNode,
                                resources: Sequence[tuple[str, int]],
                                shape: Sequence[tuple[int, int]]) -> int:
    """``requestedToCapacityRatioScorer`` with ``resourceAllocationScorer``'s pairs."""
    scaled = [(u, s * 10) for u, s in shape]
    node_score = weight_sum = 0
    for resource, weight in resources:
        alloc, req = _allocatable_requested(pod, node, resource, nonzero=True)
        if alloc == 0:
            continue
        if req > alloc:
            score = _shape_score(scaled, 100)
        else:
            score = _shape_score(scaled, req * 100 // alloc)
        if score > 0:
            node_score += score * weight
            weight_sum += weight
    if weight_sum == 0:
        return 0
    return _go_round(float(node_score) / float(weight_sum))


# -- ImageLocality ------------------------------------------------------------------------------

def _size(raw: object) -> int:
    """A ``sizeBytes`` as pyscheduler counts it (see nodetable's ``NodeImages``)."""
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 0:
        return 0
    return min(raw, 2**53)


class RefImageStates:
    """kube's scheduler cache image bookkeeping written out: ``imageStates`` (name -> size and
    the set of nodes listing it) kept by ``addNodeImageStates`` / ``removeNodeImageStates``,
    from the nodes' raw ``status.images``."""

    def __init__(self) -> None:
        self.states: dict[str, tuple[int, set[str]]] = {}
        self.images: dict[str, list[dict[str, object]]] = {}

    def set_node(self, name: str, images: list[dict[str, object]]) -> None:
        """AddNode / UpdateNode: the old list's names are removed, then the new ones added."""
        self.remove_node(name)
        self.images[name] = images
        for image in images:
            names = image.get("names")
            for image_name in names if isinstance(names, list) else []:
                if not isinstance(image_name, str):
                    continue
                if image_name not in self.states:
                    self.states[image_name] = (_size(image.get("sizeBytes")), {name})
                else:
                    self.states[image_name][1].add(name)

    def remove_node(self, name: str) -> None:
        for image in self.images.pop(name, []):
            names = image.get("names")
            for image_name in names if isinstance(names, list) else []:
                state = self.states.get(image_name) if isinstance(image_name, str) else None
                if state is not None:
                    state[1].discard(name)
                    if not state[1]:
                        del self.states[image_name]

    def node_states(self, name: str) -> dict[str, tuple[int, int]]:
        """The node's ``ImageStates``: each name it lists -> (size, number of nodes)."""
        out = {}
        for image in self.images.get(name, []):
            names = image.get("names")
            for image_name in names if isinstance(names, list) else []:
                if isinstance(image_name, str):
                    size, nodes = self.states[image_name]
                    out[image_name] = (size, len(nodes))
        return out


def _normalized(image: str) -> str:
    if image.rfind(":") <= image.rfind("/"):
        return image + ":latest"
    return image


def image_locality(pod: PodInfo, states: dict[str, tuple[int, int]], total_nodes: int) -> int:
    """``ImageLocality.Score`` for one node, from the pod's raw containers."""
    spec = pod.raw.get("spec") or {}
    containers = list(spec.get("initContainers") or []) + list(spec.get("containers") or [])
    total = 0
    for container in containers:
        image = container.get("image")
        state = states.get(_normalized(image if isinstance(image, str) else ""))
        if state is not None:
            size, nodes = state
            total += int(float(size) * (float(nodes) / float(total_nodes)))
    most = 1000 * 1024 * 1024 * len(containers)
    least = 23 * 1024 * 1024
    if total < least:
        total = least
    elif total > most:
        total = most
    return MAX_NODE_SCORE * (total - least) // (most - least)
