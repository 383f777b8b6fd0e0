"""Kubernetes' time formats (pyscheduler.api.times)."""

from __future__ import annotations

import datetime as dt

from pyscheduler.api.times import micro_time, rfc3339, utcnow


def test_time_is_whole_seconds_and_micro_time_keeps_microseconds() -> None:
    moment = dt.datetime(2026, 12, 2, 10, 0, 0, 999_999, tzinfo=dt.timezone.utc)
    assert rfc3339(moment) == "2026-12-02T10:00:00Z"  # rounded down, as metav1.Time
    assert rfc3339(moment.timestamp() + 0.5) == "2026-12-02T10:00:01Z"
    assert micro_time(moment) == "2026-12-02T10:00:00.999999Z"
    east = moment.astimezone(dt.timezone(dt.timedelta(hours=9)))
    assert rfc3339(east) == "2026-12-02T10:00:00Z" and micro_time(east).endswith("T10:00:00.999999Z")


def test_now_is_utc_and_aware() -> None:
    now = utcnow()
    assert now.tzinfo is not None and now.utcoffset() == dt.timedelta(0)
    assert abs(dt.datetime.strptime(rfc3339(), "%Y-%m-%dT%H:%M:%SZ").replace(
        tzinfo=dt.timezone.utc) - now) < dt.timedelta(seconds=5)
