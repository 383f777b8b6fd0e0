"""What a plugin answers at an extension point: a :class:`Status`, as kube's framework has it.

A status is a code and the reasons that explain it (kube's ``framework.Status``). The codes are
kube's, in kube's order:

* ``Success``: the plugin ran and has nothing against the pod. ``None`` means the same.
* ``Error``: a fault (unexpected input, a failed call): the pod is retried soon, without the
  plugin being counted among those that rejected it.
* ``Unschedulable``: the plugin rejects the pod here; PostFilter plugins (preemption, bursting)
  may still make room for it.
* ``UnschedulableAndUnresolvable``: rejected, and no PostFilter plugin could change that for
  this node (editing the pod or node spec could).
* ``Wait``: a Permit plugin holds the pod before binding.
* ``Skip``: the plugin does not apply: a PreFilter's coupled Filter, a PreScore's coupled Score
  is skipped; a Bind plugin leaves binding to the next one.
* ``Pending``: the attempt stops without penalty and the pod goes straight back to the active
  queue (its answer is being worked out elsewhere).

Unschedulable, UnschedulableAndUnresolvable and Pending *reject* the pod (:attr:`Status.rejected`);
the framework records which plugin did (:attr:`Status.plugin`) so that only the events that
plugin registered requeue the pod.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

__all__ = ["Code", "PostFilterResult", "PreFilterResult", "Status", "SUCCESS", "as_status"]


class Code(enum.IntEnum):
    SUCCESS = 0
    ERROR = 1
    UNSCHEDULABLE = 2
    UNSCHEDULABLE_AND_UNRESOLVABLE = 3
    WAIT = 4
    SKIP = 5
    PENDING = 6

    def __str__(self) -> str:
        return _CODE_NAMES[self]


_CODE_NAMES = ("Success", "Error", "Unschedulable", "UnschedulableAndUnresolvable", "Wait",
               "Skip", "Pending")

_REJECTING = frozenset({Code.UNSCHEDULABLE, Code.UNSCHEDULABLE_AND_UNRESOLVABLE, Code.PENDING})


@dataclass(frozen=True, slots=True)
class Status:
    """A plugin's answer. Build one with :meth:`of` (or :data:`SUCCESS`); a fault becomes an
    ``Error`` status with :func:`as_status`."""

    code: Code = Code.SUCCESS
    reasons: tuple[str, ...] = ()
    #: The plugin that rejected the pod, set by the framework.
    plugin: str = ""
    error: BaseException | None = field(default=None, compare=False)

    @classmethod
    def of(cls, code: Code, *reasons: str) -> Status:
        return cls(code, tuple(reasons))

    @property
    def success(self) -> bool:
        return self.code is Code.SUCCESS

    @property
    def rejected(self) -> bool:
        return self.code in _REJECTING

    @property
    def skipped(self) -> bool:
        return self.code is Code.SKIP

    @property
    def waiting(self) -> bool:
        return self.code is Code.WAIT

    @property
    def failed(self) -> bool:
        """A fault, not a verdict on the pod."""
        return self.code is Code.ERROR

    @property
    def message(self) -> str:
        """The reasons, joined as kube joins them (the fault's text first)."""
        reasons: Iterable[str] = self.reasons
        if self.error is not None:
            reasons = (str(self.error), *self.reasons)
        return ", ".join(reasons)

    def with_plugin(self, plugin: str) -> Status:
        return Status(self.code, self.reasons, plugin, self.error)

    def with_reason(self, reason: str) -> Status:
        return Status(self.code, (*self.reasons, reason), self.plugin, self.error)

    def as_error(self) -> BaseException | None:
        """None for Success, Wait and Skip; the fault, or an error carrying the message, for
        the rest (kube's ``AsError``)."""
        if self.code in (Code.SUCCESS, Code.WAIT, Code.SKIP):
            return None
        return self.error if self.error is not None else RuntimeError(self.message)

    def __str__(self) -> str:
        return self.message


SUCCESS = Status()


def as_status(error: BaseException) -> Status:
    """A fault as a status (kube's ``AsStatus``)."""
    return Status(Code.ERROR, (), "", error)


@dataclass(frozen=True, slots=True)
class PreFilterResult:
    """The nodes a PreFilter plugin narrows the attempt to; ``node_names`` None: every node."""

    node_names: frozenset[str] | None = None

    @property
    def all_nodes(self) -> bool:
        return self.node_names is None

    def merge(self, other: PreFilterResult | None) -> PreFilterResult:
        """The nodes both results allow (kube runs every PreFilter plugin and intersects)."""
        if other is None or other.node_names is None:
            return self
        if self.node_names is None:
            return other
        return PreFilterResult(self.node_names & other.node_names)


@dataclass(frozen=True, slots=True)
class PostFilterResult:
    """What a PostFilter plugin made of a pod no node fits (kube's ``PostFilterResult``, with
    what this scheduler's plugins add):

    * ``nominated_node``: room is being made there (preemption); the pod is tried again once
      it is, and the attempt ends unschedulable meanwhile, as kube's does;
    * ``node``: the pod goes there now (bursting chose a virtual node): it is reserved and
      bound in this attempt;
    * ``only``: the later PostFilter plugins that may still run (None: all of them) — a pod's
      own logic choosing "preemption only", say;
    * ``nodes``: the nodes the later plugins may consider (None: every node);
    * ``explanation``: what the plugin adds to the pod's ``wssp/decision`` when one was asked
      for (the burst pass's own explanation).
    """

    nominated_node: str | None = None
    node: str | None = None
    only: frozenset[str] | None = None
    nodes: frozenset[str] | None = None
    explanation: Mapping[str, object] | None = field(default=None, compare=False)
