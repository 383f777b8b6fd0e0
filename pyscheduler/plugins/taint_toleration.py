"""TaintToleration: taints repel pods that do not tolerate them.

Reproduces the behaviour of kube-scheduler's ``pkg/scheduler/framework/plugins/tainttoleration``:

* **Filter.** A node fails when it carries a ``NoSchedule`` or ``NoExecute`` taint that none of
  the pod's tolerations tolerates (``FindMatchingUntoleratedTaint`` with
  ``DoNotScheduleTaintsFilterFunc``); ``PreferNoSchedule`` taints never filter. The reason names
  the taint, ``node(s) had untolerated taint {key: value}`` (Go's ``{%s: %s}``, so an empty
  value prints as ``{key: }``), and is ``UnschedulableAndUnresolvable``. Tolerance is
  ``Toleration.ToleratesTaint``: an effect, if set, must equal the taint's; a key, if set, must
  equal it; then ``Exists`` tolerates any value and ``Equal`` (the default) needs the same value.
* **Score.** The number of ``PreferNoSchedule`` taints on the node that the pod does not tolerate,
  counting only tolerations whose effect is ``PreferNoSchedule`` or empty, normalized with
  ``helper.DefaultNormalizeScore(100, reverse=true)`` over the scored nodes: fewer intolerable
  taints score higher, ``100 - count * 100 // max``, and 100 everywhere when no scored node has
  any.

Attribution of a node with several untolerated taints: kube reports the *first* one in the
node's ``spec.taints`` order. The table indexes taints as (key, value, effect) -> row mask
without their position on each node, so this plugin charges such a node to the untolerated taint
that appears first in the table's taint index (the order in which taints were first seen in the
cluster), which is the same taint whenever nodes list shared taints in a consistent order. Every
failing node still carries exactly one reason, naming a taint it really has, so the counts in the
"0/N nodes are available" message add up as in kube. (kube 1.35 went further and dropped the
taint from the text, ``node(s) had untolerated taint(s)``; the named form is kept because it
tells the user which toleration is missing.)

Vectorized: the pod's tolerations are checked once per *distinct* taint in the cluster (a few),
and each untolerated taint contributes its row mask; no per-node loop.

In the burst pass (``ctx.virtual_pass``: only the cloud pools' virtual nodes are candidates) the
virtual nodes' provider taint ``virtual-kubelet.io/provider`` counts as tolerated: it keeps pods
that did not ask for a pool off virtual nodes everywhere else, and bursting is that asking. No
other taint is waived.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from pyscheduler.framework.events import on
from pyscheduler.framework.interface import ActionType, ClusterEventWithHint
from pyscheduler.api.names import PROVIDER_TAINT_KEY
from pyscheduler.framework.interface import MAX_NODE_SCORE, CycleContext, FilterResult, Reason
from pyscheduler.framework.nodetable import BoolArray, IntArray, Taint
from pyscheduler.framework.pod import Toleration

__all__ = ["NAME", "TaintToleration", "untolerated_taint_message"]

NAME = "TaintToleration"

_DO_NOT_SCHEDULE = ("NoSchedule", "NoExecute")
_PREFER_NO_SCHEDULE = "PreferNoSchedule"


def untolerated_taint_message(taint: Taint) -> str:
    """kube's filter reason for an untolerated taint."""
    return f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}"


def _tolerated(tolerations: tuple[Toleration, ...] | list[Toleration], taint: Taint,
               virtual_pass: bool = False) -> bool:
    if virtual_pass and taint.key == PROVIDER_TAINT_KEY:
        return True
    return any(t.tolerates(taint.key, taint.value, taint.effect) for t in tolerations)


class TaintToleration:
    """Filter out nodes with untolerated NoSchedule/NoExecute taints; prefer nodes with fewer
    untolerated PreferNoSchedule taints."""

    name: ClassVar[str] = NAME

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        """The events that may make a pod this plugin rejected schedulable (kube's, with
        queueing hints on)."""
        return (on("Node", ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
                on("Pod", ActionType.UPDATE_POD_TOLERATION))

    def filter(self, ctx: CycleContext) -> FilterResult:
        n, tolerations = ctx.n, ctx.pod.tolerations
        by_message: dict[str, BoolArray] = {}
        virtual = ctx.virtual_pass
        for taint, mask in ctx.table.taint_index.items():
            if taint.effect not in _DO_NOT_SCHEDULE or _tolerated(tolerations, taint, virtual):
                continue
            rows = mask[:n]
            if not rows.any():
                continue
            message = untolerated_taint_message(taint)
            seen = by_message.get(message)
            # NoSchedule and NoExecute taints with one key and value read the same.
            by_message[message] = rows if seen is None else seen | rows
        if not by_message:
            return FilterResult.all_pass()
        if len(by_message) == 1:
            (message, rows), = by_message.items()
            return FilterResult(~rows, [Reason(message, rows, True)])
        # A node with several untolerated taints is reported with the first of them in its
        # own taint list, as kube's FindMatchingUntoleratedTaint does (not in the order the
        # table happens to index taints, which differs between the table and a row view).
        masks = {m: rows.copy() for m, rows in by_message.items()}
        failing = np.zeros(n, np.int64)
        for rows in by_message.values():
            failing += rows
        for slot in np.flatnonzero(failing > 1).tolist():
            first = self._first_untolerated(ctx, slot)
            for message, mask in masks.items():
                mask[slot] = message == first
        charged = np.zeros(n, np.bool_)
        for rows in by_message.values():
            charged |= rows
        return FilterResult(~charged, [Reason(m, mask, True) for m, mask in masks.items()
                                       if mask.any()])

    @staticmethod
    def _first_untolerated(ctx: CycleContext, slot: int) -> str | None:
        info = ctx.table.infos[slot]
        for taint in info.taints if info is not None else ():
            if taint.effect in _DO_NOT_SCHEDULE and not _tolerated(
                    ctx.pod.tolerations, taint, ctx.virtual_pass):
                return untolerated_taint_message(taint)
        return None

    def filter_row(self, ctx: CycleContext, slot: int) -> bool:
        """:meth:`filter`'s verdict for one row (the pipeline's incremental path)."""
        info = ctx.table.infos[slot]
        if info is None:
            return True
        return all(taint.effect not in _DO_NOT_SCHEDULE
                   or _tolerated(ctx.pod.tolerations, taint, ctx.virtual_pass)
                   for taint in info.taints)

    def score(self, ctx: CycleContext, feasible: BoolArray) -> IntArray:
        n = ctx.n
        prefer = [t for t in ctx.pod.tolerations if t.effect in ("", _PREFER_NO_SCHEDULE)]
        masks = [mask[:n] for taint, mask in ctx.table.taint_index.items()
                 if taint.effect == _PREFER_NO_SCHEDULE and not _tolerated(prefer, taint)]
        if not masks:
            # No intolerable PreferNoSchedule taint anywhere: every node scores the maximum.
            return np.full(n, MAX_NODE_SCORE, np.int64)
        scored = feasible[:n]
        if len(masks) == 1:
            # The common case, one intolerable taint in the cluster: counts are 0 or 1.
            if not (masks[0] & scored).any():
                return np.full(n, MAX_NODE_SCORE, np.int64)
            single: IntArray = np.where(masks[0], np.int64(0), np.int64(MAX_NODE_SCORE))
            return single
        # Counts are small integers (at most one per distinct taint): count in a narrow type
        # and map each possible count to its normalized score with one table look-up.
        counts = masks[0].astype(np.uint8 if len(masks) < 256 else np.int64)
        for mask in masks[1:]:
            counts += mask
        # Holes carry no taints (count 0), so they cannot raise the maximum: no need to mask
        # them out of the scored rows.
        top = int(counts[scored].max(initial=0))
        if top == 0:
            return np.full(n, MAX_NODE_SCORE, np.int64)
        possible = np.arange(len(masks) + 1, dtype=np.int64)
        lookup = np.clip(MAX_NODE_SCORE - possible * MAX_NODE_SCORE // top, 0, MAX_NODE_SCORE)
        out: IntArray = lookup[counts]
        return out
