"""VolumeBinding: a pod's PersistentVolumeClaims decide where it may go, and get bound before it.

kube's ``volumebinding`` plugin (``volume_binding.go``, ``binder.go``):

* **For the pod** (PreFilter; fails every node, unresolvably): every claim must exist
  (``persistentvolumeclaim "data" not found``; for a generic ephemeral volume ``waiting for
  ephemeral volume controller to create the persistentvolumeclaim "web-0-scratch"``), not be
  lost (``persistentvolumeclaim "data" bound to non-existent persistentvolume "pv-1"``) nor
  being deleted (``persistentvolumeclaim "data" is being deleted``), and an ephemeral volume's
  claim must be the pod's own (``PVC ns/web-0-scratch was not created for pod ns/web-0 (pod is
  not owner)``). A claim not bound yet — no volume, or a volume named but the binding not
  completed (pre-bound) — must wait for the PV controller unless it has no volume and its
  StorageClass binds ``WaitForFirstConsumer``: ``pod has unbound immediate
  PersistentVolumeClaims`` (a claim without a class, or whose class does not exist, is
  immediate). The pod is retried when the claims change.
* **Per node** (Filter, ``FindPodVolumes``; every reason ``UnschedulableAndUnresolvable``, so
  preemption does not try such nodes):

  - the bound claims, in the pod's order, until one fails: a volume whose node affinity
    excludes the node gives ``node(s) had volume node affinity conflict``, a volume that does
    not exist ``node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)``;
  - the ``WaitForFirstConsumer`` claims: one annotated ``volume.kubernetes.io/selected-node``
    fits only that node (it is being provisioned there); the others, the smallest request
    first, each take the first of its
    :meth:`~pyscheduler.framework.volumes.VolumeCatalog.static_candidates` that fits the node
    and that no claim before it took there (a volume pre-bound to the claim is its only
    candidate); a claim left without one must be provisioned, which needs a
    provisioner (not ``kubernetes.io/no-provisioner``) whose class's ``allowedTopologies``
    admit the node. Otherwise: ``node(s) didn't find available persistent volumes to bind``.

  A node may get several of these reasons, in that order (conflict, bind, non-existent).

Binding (kube's Reserve and PreBind) is :func:`plan` here and the scheduler's API calls: on the
chosen node, the same matching gives each waiting claim its static volume or dynamic
provisioning. The chosen volumes are assumed in the catalog at once, so the next pod does not
count on them.

Not implemented: storage capacity tracking (``CSIStorageCapacity``, ``node(s) did not have
enough free storage``: provisioning is taken to fit), the in-tree volume translation to CSI,
and the volume capacity score (alpha in kube, off by default). A claim two volumes of the pod
mount is matched once (kube would match it twice).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np

from pyscheduler.framework.events import on
from pyscheduler.framework.interface import ActionType, ClusterEventWithHint
from pyscheduler.framework.interface import CycleContext, FilterResult, Reason
from pyscheduler.framework.nodetable import BoolArray, IntArray, NodeTable
from pyscheduler.framework.volumes import (
    NO_PROVISIONER,
    WAIT_FOR_FIRST_CONSUMER,
    Claim,
    StorageClass,
    Volume,
    VolumeCatalog,
    claim_refs,
    not_found,
    not_owner,
)
from pyscheduler.plugins.node_affinity import node_selector_mask

__all__ = [
    "BIND_CONFLICT",
    "IMMEDIATE_UNBOUND",
    "NAME",
    "NODE_CONFLICT",
    "PV_NOT_EXIST",
    "BindingPlan",
    "VolumeBinding",
    "plan",
    "waits_for_consumer",
]

NAME = "VolumeBinding"

IMMEDIATE_UNBOUND = "pod has unbound immediate PersistentVolumeClaims"
NODE_CONFLICT = "node(s) had volume node affinity conflict"
BIND_CONFLICT = "node(s) didn't find available persistent volumes to bind"
PV_NOT_EXIST = "node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)"


def _everywhere(ctx: CycleContext, message: str) -> FilterResult:
    """A rejection of the pod as a whole (kube's PreFilter)."""
    nodes = ctx.nodes()
    return FilterResult(np.zeros(ctx.n, np.bool_),
                        [Reason(message, nodes.copy(), True, prefilter=True)])


def _rows(table: NodeTable, volume: Volume) -> BoolArray | None:
    """Rows the volume may be used on; None: every row."""
    if volume.node_terms is None:
        return None
    return node_selector_mask(table, table.n, volume.node_terms)


def _provisionable(table: NodeTable, sc: StorageClass | None) -> BoolArray:
    """``checkVolumeProvisions`` for one claim: rows where its class may provision."""
    if sc is None or not sc.provisioner or sc.provisioner == NO_PROVISIONER:
        return np.zeros(table.n, np.bool_)
    if not sc.allowed_topologies:
        return np.ones(table.n, np.bool_)
    return node_selector_mask(table, table.n, sc.allowed_topologies)


def waits_for_consumer(catalog: VolumeCatalog, claim: Claim) -> bool:
    """An unbound claim whose class binds when a pod using it is scheduled (kube's delayed
    binding: ``IsDelayBindingMode`` and no volume named)."""
    sc = catalog.classes.get(claim.storage_class) if claim.storage_class else None
    return not claim.volume_name and sc is not None \
        and sc.binding_mode == WAIT_FOR_FIRST_CONSUMER


@dataclass(frozen=True, slots=True)
class _PodClaims:
    bound: tuple[Claim, ...]  # bound, in the pod's order
    waiting: tuple[Claim, ...]  # WaitForFirstConsumer, in the pod's order


def _pod_claims(ctx: CycleContext) -> _PodClaims | str:
    """The pod's claims sorted as ``GetPodVolumeClaims`` sorts them, or the problem that
    holds on every node (``podHasPVCs``, then unbound immediate claims)."""
    pod, catalog = ctx.pod, ctx.table.volumes
    claims = []
    for ref in claim_refs(pod):
        claim = catalog.claims.get((pod.namespace, ref.name))
        if claim is None:
            if ref.ephemeral:
                return ("waiting for ephemeral volume controller to create the "
                        f'persistentvolumeclaim "{ref.name}"')
            return not_found("persistentvolumeclaim", ref.name)
        if claim.lost:
            return (f'persistentvolumeclaim "{ref.name}" bound to non-existent '
                    f'persistentvolume "{claim.volume_name}"')
        if claim.deleting:
            return f'persistentvolumeclaim "{ref.name}" is being deleted'
        if ref.ephemeral and claim.owner_uid != pod.uid:
            return not_owner(pod, ref.name)
        claims.append(claim)
    bound: list[Claim] = []
    waiting: list[Claim] = []
    immediate = False
    for claim in claims:
        if claim.bound:
            bound.append(claim)
        elif waits_for_consumer(catalog, claim):
            waiting.append(claim)
        else:
            immediate = True  # pre-bound claims too: the PV controller finishes those
    if immediate:
        return IMMEDIATE_UNBOUND
    return _PodClaims(tuple(bound), tuple(waiting))


@dataclass
class _Match:
    """``FindPodVolumes`` over some rows at once."""

    node_conflict: BoolArray
    bind_conflict: BoolArray
    pv_missing: BoolArray
    #: claims annotated with a selected node: provisioned there
    selected: list[Claim] = field(default_factory=list)
    #: the other waiting claims, smallest request first: their candidate volumes and, per
    #: row, the index of the one taken there (-1: none, the claim is to be provisioned)
    matched: list[tuple[Claim, list[Volume], IntArray]] = field(default_factory=list)


def _match(ctx: CycleContext, claims: _PodClaims, rows: BoolArray) -> _Match:
    table, catalog, n = ctx.table, ctx.table.volumes, ctx.n
    out = _Match(np.zeros(n, np.bool_), np.zeros(n, np.bool_), np.zeros(n, np.bool_))
    # checkBoundClaims: the first bound claim that fails a row decides that row.
    decided = ~rows
    for claim in claims.bound:
        volume = catalog.volume_of(claim)
        if volume is None:
            out.pv_missing |= ~decided
            break
        allowed = _rows(table, volume)
        if allowed is not None:
            conflict = ~allowed & ~decided
            out.node_conflict |= conflict
            decided |= conflict
    if not claims.waiting:
        return out
    # A claim being provisioned for a node fits that node only.
    open_rows = rows.copy()
    for claim in claims.waiting:
        if claim.selected_node is None:
            continue
        here = np.zeros(n, np.bool_)
        slot = table.slots.get(claim.selected_node)
        if slot is not None and slot < n:
            here[slot] = True
        out.bind_conflict |= open_rows & ~here
        open_rows &= here
        out.selected.append(claim)
    provisionable = open_rows.copy()
    for claim in out.selected:
        provisionable &= _provisionable(table, catalog.classes.get(claim.storage_class))
    # findMatchingVolumes: smallest request first; a volume taken by one claim on a row is
    # not offered to the next there.
    taken: dict[str, BoolArray] = {}
    pending = sorted((c for c in claims.waiting if c.selected_node is None),
                     key=lambda c: c.request)
    for claim in pending:
        candidates = catalog.static_candidates(claim)
        choice = np.full(n, -1, np.int64)
        left = open_rows.copy()
        for i, volume in enumerate(candidates):
            if not left.any():
                break
            allowed = _rows(table, volume)
            fits = left.copy() if allowed is None else left & allowed
            used = taken.get(volume.name)
            if used is not None:
                fits &= ~used
            if fits.any():
                choice[fits] = i
                left &= ~fits
                taken[volume.name] = fits if used is None else used | fits
        if left.any():  # left over: checkVolumeProvisions
            provisionable &= ~left | _provisionable(table,
                                                    catalog.classes.get(claim.storage_class))
        out.matched.append((claim, candidates, choice))
    out.bind_conflict |= open_rows & ~provisionable
    return out


class VolumeBinding:
    """Filter: claims exist and can be bound (or are bound) where the node is."""

    name: ClassVar[str] = NAME

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        """The events that may make a pod this plugin rejected schedulable (kube's, with
        queueing hints on)."""
        return (on("StorageClass", ActionType.ADD | ActionType.UPDATE),
                on("PersistentVolumeClaim", ActionType.ADD | ActionType.UPDATE),
                on("PersistentVolume", ActionType.ADD | ActionType.UPDATE),
                on("Node", ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
                on("CSINode", ActionType.ADD | ActionType.UPDATE),
                on("CSIDriver", ActionType.UPDATE),
                on("CSIStorageCapacity", ActionType.ADD | ActionType.UPDATE))

    def filter(self, ctx: CycleContext) -> FilterResult:
        if not ctx.pod.claims:
            return FilterResult.all_pass()
        claims = _pod_claims(ctx)
        if isinstance(claims, str):
            return _everywhere(ctx, claims)
        if not claims.bound and not claims.waiting:
            return FilterResult.all_pass()
        nodes = ctx.nodes()
        found = _match(ctx, claims, nodes)
        failed = found.node_conflict | found.bind_conflict | found.pv_missing
        if not (failed & nodes).any():
            return FilterResult.all_pass()
        return FilterResult(~failed,
                            [Reason(NODE_CONFLICT, found.node_conflict & nodes, True),
                             Reason(BIND_CONFLICT, found.bind_conflict & nodes, True),
                             Reason(PV_NOT_EXIST, found.pv_missing & nodes, True)])


@dataclass(frozen=True, slots=True)
class BindingPlan:
    """What binding a pod's waiting claims on one node takes: a static volume for some
    (``static``: (claim, volume) pairs), dynamic provisioning for the others."""

    static: tuple[tuple[Claim, Volume], ...] = ()
    dynamic: tuple[Claim, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.static and not self.dynamic


def plan(ctx: CycleContext, slot: int) -> BindingPlan | str:
    """The binding plan for ``ctx.pod``'s waiting claims on the node in ``slot`` (kube's
    ``PodVolumes`` for that node: the claims matched smallest request first, the claims to
    provision those with a selected node first), or why there is none: the node's filter
    reason (the claims changed since the filter ran). Nothing is assumed here; see
    :attr:`VolumeCatalog.assumed`."""
    if not ctx.pod.claims:
        return BindingPlan()
    claims = _pod_claims(ctx)
    if isinstance(claims, str):
        return claims
    rows = np.zeros(ctx.n, np.bool_)
    rows[slot] = True
    found = _match(ctx, claims, rows)
    for mask, message in ((found.node_conflict, NODE_CONFLICT),
                          (found.bind_conflict, BIND_CONFLICT), (found.pv_missing, PV_NOT_EXIST)):
        if mask[slot]:
            return message
    static = tuple((claim, candidates[int(choice[slot])])
                   for claim, candidates, choice in found.matched if choice[slot] >= 0)
    dynamic = tuple(found.selected) + tuple(claim for claim, _, choice in found.matched
                                            if choice[slot] < 0)
    return BindingPlan(static, dynamic)
