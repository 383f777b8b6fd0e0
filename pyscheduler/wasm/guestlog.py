"""A fragment's ``wssp.log`` lines into the scheduler's log, within bounds.

A guest may call ``wssp.log`` as often as its fuel allows: hundreds of thousands of times in one
call. Written as they come, such lines flood the scheduler's log (megabytes per pod, on every
retry) and cost the host far more than the guest. So each fragment's lines pass a token bucket
(``rate`` lines per second, bursts of ``burst``); lines beyond it are dropped and counted
(``pyscheduler_fragment_log_lines_dropped_total``), and the next line that passes is preceded by
one warning saying how many were dropped.

Each line is made readable and short before it is written: invalid UTF-8 is replaced, control
characters are written in caret notation (NUL as ``^@``, a newline as ``^J``, DEL as ``^?``; C1
controls as ``?``) — two characters instead of the six of a JSON ``\\u0000`` — and the text is cut
at :data:`MAX_CHARS` characters with a note of how much was left out.

Lines arrive on the fragment's worker thread; a :class:`GuestLog` may be called from any thread.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import structlog

from pyscheduler.pacing import TokenBucket

__all__ = ["MAX_CHARS", "GuestLog", "escape_controls"]

log = structlog.get_logger("pyscheduler.wasm")

MAX_CHARS = 1024
_LEVELS = ("debug", "info", "warning", "error")
# C0 controls except tab, and DEL, in caret notation; C1 controls as "?".
_CARET = {c: "^" + chr(c + 64) for c in range(32) if c != 9}
_CARET[127] = "^?"
_CARET.update({c: "?" for c in range(0x80, 0xA0)})


def escape_controls(text: str) -> str:
    """``text`` with control characters in caret notation (see the module docstring)."""
    return text.translate(_CARET)


class GuestLog:
    """The log callback of one fragment's instances (``LogCallback`` of :mod:`wasm.vm`)."""

    def __init__(self, fragment: str, *, rate: float = 10.0, burst: int = 100,
                 on_dropped: Callable[[int], None] | None = None,
                 clock: Callable[[], float] = time.monotonic,
                 logger: Any = None) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError("a guest log needs rate > 0 and burst >= 1")
        self.fragment = fragment
        self.rate = rate
        self.burst = burst
        self.on_dropped = on_dropped
        self.clock = clock
        self.logger = logger if logger is not None else log
        self._bucket = TokenBucket(rate=rate, burst=burst, clock=clock)
        self._lock = threading.Lock()
        self.written = 0
        self.dropped = 0
        self._unreported = 0  # dropped since the last line written

    def _take(self) -> tuple[bool, int]:
        """(whether a line may be written now, lines dropped before it to report)."""
        with self._lock:
            if not self._bucket.try_take():
                self.dropped += 1
                self._unreported += 1
                return False, 0
            self.written += 1
            reported, self._unreported = self._unreported, 0
            return True, reported

    def __call__(self, level: int, data: bytes) -> None:
        ok, dropped = self._take()
        if not ok:
            if self.on_dropped is not None:
                self.on_dropped(1)
            return
        if dropped:
            self.logger.warning("fragment log lines dropped", fragment=self.fragment,
                                dropped=dropped, limit=f"{self.rate:g}/s, bursts of {self.burst}")
        text = escape_controls(data.decode("utf-8", "replace"))
        if len(text) > MAX_CHARS:
            text = f"{text[:MAX_CHARS]}... [{len(text) - MAX_CHARS} more characters]"
        method = _LEVELS[level] if 0 <= level < len(_LEVELS) else "info"
        getattr(self.logger, method)("fragment log", fragment=self.fragment, text=text)
