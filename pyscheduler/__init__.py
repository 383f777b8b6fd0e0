"""pyscheduler: a standalone Kubernetes scheduler.

Pods opt in with ``spec.schedulerName: pyscheduler``. The package also ships an embedded
Kubernetes API server and simulated cluster (:mod:`pyscheduler_sim`) used to try scheduling
logic locally and to test the scheduler against real clients.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
