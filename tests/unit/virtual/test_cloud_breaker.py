"""The circuit breaker alone, on a fake clock."""

from __future__ import annotations

import pytest

from pyscheduler.virtual.cloud import CircuitBreaker


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def state(b: CircuitBreaker) -> str:
    """The state as a plain string (mypy would narrow the property's literal type)."""
    return b.state


def breaker(failures: int = 3, reset: float = 10.0) -> tuple[CircuitBreaker, Clock]:
    clock = Clock()
    return CircuitBreaker(failures, reset, clock=clock), clock


def test_closed_until_n_consecutive_failures() -> None:
    b, _ = breaker(3)
    for _ in range(2):
        assert b.allow()
        b.record_failure()
    assert state(b) == "closed" and b.allow()
    b.record_failure()
    assert state(b) == "open"
    assert not b.allow()
    assert b.consecutive_failures == 3


def test_success_resets_the_count() -> None:
    b, _ = breaker(3)
    b.record_failure()
    b.record_failure()
    b.record_success()
    b.record_failure()
    b.record_failure()
    assert state(b) == "closed"
    assert b.consecutive_failures == 2


def test_open_refuses_until_reset_then_admits_one_trial() -> None:
    b, clock = breaker(1, reset=10.0)
    b.record_failure()
    assert state(b) == "open"
    assert b.retry_in() == pytest.approx(10.0)
    clock.now += 9.9
    assert not b.allow()
    assert b.retry_in() == pytest.approx(0.1)
    clock.now += 0.1
    assert state(b) == "half-open"
    assert b.retry_in() == 0.0
    assert b.allow()          # the trial
    assert not b.allow()      # everyone else waits for its outcome
    assert not b.allow()


def test_trial_success_closes() -> None:
    b, clock = breaker(2, reset=5.0)
    b.record_failure()
    b.record_failure()
    clock.now += 5
    assert b.allow()
    b.record_success()
    assert state(b) == "closed"
    assert b.consecutive_failures == 0
    assert b.allow() and b.allow()


def test_trial_failure_reopens_for_a_full_period() -> None:
    b, clock = breaker(2, reset=5.0)
    b.record_failure()
    b.record_failure()
    clock.now += 7
    assert b.allow()
    b.record_failure()        # a single failure in half-open is enough
    assert state(b) == "open"
    assert b.retry_in() == pytest.approx(5.0)
    clock.now += 4.9
    assert not b.allow()
    clock.now += 0.1
    assert b.allow()


def test_abandoned_trial_lets_another_caller_try() -> None:
    b, clock = breaker(1, reset=1.0)
    b.record_failure()
    clock.now += 1
    assert b.allow()
    assert not b.allow()
    b.abandon()               # the trial was cancelled without an outcome
    assert state(b) == "half-open"
    assert b.allow()


def test_abandon_outside_half_open_changes_nothing() -> None:
    b, _ = breaker(1)
    b.abandon()
    assert state(b) == "closed"
    b.record_failure()
    b.abandon()
    assert state(b) == "open" and not b.allow()


def test_failures_while_open_do_not_extend_the_period() -> None:
    b, clock = breaker(1, reset=10.0)
    b.record_failure()
    clock.now += 6
    b.record_failure()        # a straggler admitted before the circuit opened
    assert b.retry_in() == pytest.approx(4.0)


def test_straggler_success_while_open_closes() -> None:
    b, _ = breaker(1)
    b.record_failure()
    b.record_success()
    assert state(b) == "closed" and b.allow()


def test_zero_reset_goes_straight_to_half_open() -> None:
    b, _ = breaker(1, reset=0.0)
    b.record_failure()
    assert state(b) == "half-open"
    assert b.allow() and not b.allow()


@pytest.mark.parametrize("failures,reset", [(0, 1.0), (-1, 1.0), (1, -0.5)])
def test_invalid_settings(failures: int, reset: float) -> None:
    with pytest.raises(ValueError):
        CircuitBreaker(failures, reset)


def test_repr_shows_state() -> None:
    b, _ = breaker(1)
    b.record_failure()
    assert "open" in repr(b)
