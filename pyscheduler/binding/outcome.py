"""What a binding-cycle plugin says beyond kube's status codes: that the pod is gone, or was
bound by someone else meanwhile. Both end the attempt without a retry."""

from __future__ import annotations

from pyscheduler.framework.status import Code, Status

__all__ = ["BOUND_ELSEWHERE", "POD_GONE", "ends_the_pod"]

#: The pod was deleted (or deleted and recreated) while it was being bound.
POD_GONE = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("the pod is gone",))
#: Someone else bound the pod first, to another node.
BOUND_ELSEWHERE = Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("the pod was bound elsewhere",))


def ends_the_pod(status: Status) -> Status | None:
    """:data:`POD_GONE` or :data:`BOUND_ELSEWHERE` when ``status`` is one of them (whichever
    plugin answered it), else None."""
    for known in (POD_GONE, BOUND_ELSEWHERE):
        if status.code is known.code and status.reasons == known.reasons:
            return known
    return None
