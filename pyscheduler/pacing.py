"""Pacing: exponential backoff with jitter, and a token bucket. No I/O, no clock of its own
beyond the one given (monotonic seconds by default)."""

from __future__ import annotations

import random
import time
from collections.abc import Callable

__all__ = ["Backoff", "TokenBucket"]


class Backoff:
    """Exponential backoff with full jitter around the nominal delay (×[0.5, 1.5)).

    ``next()`` returns the delay to wait now and doubles the nominal delay up to ``maximum``;
    ``reset()`` goes back to ``initial`` after a success.
    """

    def __init__(self, *, initial: float = 0.2, maximum: float = 30.0,
                 rng: random.Random | None = None) -> None:
        if initial <= 0 or maximum < initial:
            raise ValueError("backoff needs 0 < initial <= maximum")
        self.initial = initial
        self.maximum = maximum
        self._current = initial
        self._rng = rng or random.Random()

    def next(self) -> float:
        delay = self._current * (0.5 + self._rng.random())
        self._current = min(self._current * 2, self.maximum)
        return min(delay, self.maximum)

    def reset(self) -> None:
        self._current = self.initial


class TokenBucket:
    """A token bucket: ``rate`` tokens per second, at most ``burst`` saved up. Not thread-safe."""

    def __init__(self, *, rate: float, burst: int,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a token bucket needs rate > 0 and burst >= 1")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._tokens = float(burst)
        self._at = clock()

    def try_take(self) -> bool:
        now = self._clock()
        self._tokens = min(float(self.burst), self._tokens + (now - self._at) * self.rate)
        self._at = now
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    def wait_time(self) -> float:
        """Seconds until :meth:`try_take` can next succeed (0 if it can now)."""
        now = self._clock()
        tokens = min(float(self.burst), self._tokens + (now - self._at) * self.rate)
        return max(0.0, (1.0 - tokens) / self.rate)
