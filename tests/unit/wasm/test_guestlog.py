"""A fragment's log lines: rate-limited per fragment, dropped lines counted and reported, control
characters escaped compactly, long lines cut."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.pod import pod_info
from pyscheduler.wasm.fragment import Fragment
from pyscheduler.wasm.guestlog import MAX_CHARS, GuestLog, escape_controls
from pyscheduler.wasm.vm import Limits
from tests.unit.plugins.builders import build_table, make_node, make_pod

HOSTILE = Path(__file__).resolve().parents[3] / "fragments" / "hostile"


class Recorder:
    """A logger that keeps what it was given."""

    def __init__(self) -> None:
        self.lines: list[tuple[str, str, dict[str, Any]]] = []

    def __getattr__(self, level: str) -> Any:
        def emit(event: str, **fields: Any) -> None:
            self.lines.append((level, event, fields))
        return emit

    def events(self, event: str) -> list[dict[str, Any]]:
        return [fields for _, name, fields in self.lines if name == event]


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_passes_then_the_rate_holds_and_drops_are_reported() -> None:
    clock, out, dropped = Clock(), Recorder(), []
    guest_log = GuestLog("f-v1.0.0", rate=10, burst=100, on_dropped=dropped.append,
                         clock=clock, logger=out)
    for _ in range(1000):
        guest_log(1, b"hello")
    assert len(out.events("fragment log")) == 100
    assert guest_log.dropped == 900 and sum(dropped) == 900
    assert out.events("fragment log lines dropped") == []  # said with the next line written
    clock.now += 1.0  # ten more lines' worth
    for _ in range(50):
        guest_log(2, b"again")
    assert len(out.events("fragment log")) == 110
    [report] = out.events("fragment log lines dropped")
    assert report["dropped"] == 900 and report["fragment"] == "f-v1.0.0"
    assert guest_log.dropped == 940
    levels = {level for level, event, _ in out.lines if event == "fragment log"}
    assert levels == {"info", "warning"}


@pytest.mark.parametrize(("raw", "shown"), [
    pytest.param(b"a\x00b", "a^@b", id="NUL"),
    pytest.param(b"one\ntwo\r", "one^Jtwo^M", id="newline and return"),
    pytest.param(b"tab\tstays", "tab\tstays", id="tab"),
    pytest.param(b"del\x7f", "del^?", id="DEL"),
    pytest.param("c1\u0085".encode(), "c1?", id="C1 control"),
    pytest.param(b"bad \xff utf-8", "bad \ufffd utf-8", id="invalid UTF-8"),
    pytest.param("ünïcödé".encode(), "ünïcödé", id="text stays text"),
])
def test_control_characters_are_escaped_compactly(raw: bytes, shown: str) -> None:
    out = Recorder()
    GuestLog("f", logger=out)(1, raw)
    assert out.events("fragment log")[0]["text"] == shown
    assert escape_controls(raw.decode("utf-8", "replace")) == shown


def test_a_line_of_nul_bytes_stays_short() -> None:
    out = Recorder()
    GuestLog("f", logger=out)(1, b"\x00" * 4096)
    text = out.events("fragment log")[0]["text"]
    assert text.startswith("^@^@") and len(text) < MAX_CHARS + 40
    assert text.endswith(f"... [{2 * 4096 - MAX_CHARS} more characters]")


def test_a_flooding_fragment_reaches_the_log_only_within_the_limit() -> None:
    """log-flood.wasm would write 200,000 lines in one call: the log gets the burst, the rest up
    to the per-call budget is counted as dropped, and the line after the budget traps."""
    from pyscheduler.wasm.errors import CallError
    from pyscheduler.wasm.vm import LOG_CALLS_PER_CALL

    out, dropped = Recorder(), []
    guest_log = GuestLog("flood-v1.0.0", rate=10, burst=50, on_dropped=dropped.append,
                         clock=Clock(), logger=out)  # time stands still: no refill
    table = build_table([make_node("n1").capacity(cpu="4", memory="8Gi", pods=10).obj()])
    frag = Fragment.load((HOSTILE / "log-flood.wasm").read_bytes(), table=table,
                         log=guest_log, limits=Limits(fuel=10**10, timeout_seconds=5.0))
    ctx = CycleContext.for_pod(pod_info(make_pod().req(cpu="1").obj()), table)
    with pytest.raises(CallError) as failed:
        frag.filter(ctx)
    assert failed.value.kind == "trap"
    assert failed.value.message == (f"wssp.log called more than {LOG_CALLS_PER_CALL} times in "
                                    "one call")
    written = out.events("fragment log")
    assert len(written) == 50
    assert all(fields["text"] == "flood^@^J" for fields in written)
    assert guest_log.dropped == LOG_CALLS_PER_CALL - 50 == sum(dropped)
