"""The PostFilter plugins: what happens to a pod no node fits.

* :mod:`~pyscheduler.postfilter.preemption` — kube's DefaultPreemption: evict lower-priority
  pods to make room, nominating the pod to the node;
* :mod:`~pyscheduler.postfilter.bursting` — CloudBurst: the same filters over the cloud pools'
  virtual nodes, the pools' configured order as the score.

They run in the configured order (preemption first by default), after the pod's fragment,
whose post-filter answer may leave them fewer choices.
"""

from typing import Final

__all__ = ["BURSTING", "PREEMPTION"]

#: The plugins' names, as profiles and a fragment's answers name them.
PREEMPTION: Final = "DefaultPreemption"
BURSTING: Final = "CloudBurst"
