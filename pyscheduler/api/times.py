"""Kubernetes' two time formats, and now.

``metav1.Time`` is RFC 3339 in UTC at whole seconds (``2026-12-02T10:00:00Z``: conditions,
timestamps, leases' renew times are MicroTime); ``metav1.MicroTime`` keeps microseconds
(``...T10:00:00.000123Z``: events' ``eventTime``, leases). A moment is a timezone-aware
:class:`datetime.datetime` or POSIX seconds; none means now.
"""

from __future__ import annotations

import datetime as dt
import math
import time

__all__ = ["micro_time", "rfc3339", "utcnow"]


def utcnow() -> dt.datetime:
    """Now, timezone-aware in UTC."""
    return dt.datetime.now(dt.timezone.utc)


def rfc3339(moment: dt.datetime | float | None = None) -> str:
    """A ``metav1.Time``: RFC 3339 in UTC, whole seconds (rounded down), ``Z``."""
    if moment is None:
        moment = time.time()
    elif isinstance(moment, dt.datetime):
        moment = moment.timestamp()
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(math.floor(moment)))


def micro_time(moment: dt.datetime | None = None) -> str:
    """A ``metav1.MicroTime``: RFC 3339 in UTC with microseconds (``...T10:00:00.000123Z``)."""
    return (moment or utcnow()).astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
