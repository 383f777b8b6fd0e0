"""The lifecycle stages of ABI minor 3 (fragments/ABI.md §9): the calls, the context fields
the guest sees, every answer the host refuses, the load-time export checks, and the prefilter in
a pod's batch of calls.

Most tests use one *scripted* guest: each stage function copies the context to a fixed place
(so the test reads what the guest saw) and then answers what the test wrote into the guest's
memory for that stage (code, value, message, output lines, a trap, a loop, a non-zero return,
the prefilter rows to keep).
"""

from __future__ import annotations

import asyncio
import struct
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pyscheduler.framework.interface import CycleContext
from pyscheduler.framework.nodetable import NodeTable
from pyscheduler.framework.pod import pod_info
from pyscheduler.wasm.abi import (
    ABI_MINOR,
    ALL_ROWS,
    MAX_MESSAGE_BYTES,
    NEW_STAGES,
    NO_ROW,
    STAGE_IDS,
    StageAnswer,
    exported_stages,
)
from pyscheduler.wasm.errors import CallError, LoadError
from pyscheduler.wasm.fragment import Breaker, Fragment
from pyscheduler.wasm.vm import Limits
from tests.unit.plugins.builders import build_table, make_node, make_pod

wasmtime = pytest.importorskip("wasmtime")
FIXTURES = Path(__file__).parent / "fixtures"
HOSTILE = Path(__file__).resolve().parents[3] / "fragments" / "hostile"

# Fuel ends a looping call quickly on both runtimes; the wall clock is loose (wasmer has none).
LIMITS = Limits(fuel=5_000_000, timeout_seconds=2.0)


@pytest.fixture(params=["wasmtime", "wasmer"])
def runtime(request: pytest.FixtureRequest) -> str:
    """Each test on both runtimes (wasmer where it is installed: Python 3.10)."""
    name: str = request.param
    if name == "wasmer":
        pytest.importorskip("wasmer")
    return name


# -- the scripted guest ---------------------------------------------------------------------------

SNAP_STAGE = 1024    # the context as the last lifecycle call saw it on entry
SNAP_FILTER = 1280   # the context as the last filter call saw it on entry
SCRIPT = 1536        # per stage id s, 32 bytes at SCRIPT + 32 s: what to answer
TEXT = 2048          # messages and output lines the tests write
MODE_TRAP, MODE_LOOP, MODE_FAIL = 1, 2, 3

_ALLOC = """
  (global $heap (mut i32) (i32.const 16384))
  (func (export "wssp_alloc") (param $size i32) (result i32)
    (local $ptr i32) (local $end i32)
    (local.set $ptr (global.get $heap))
    (local.set $end (i32.and (i32.add (i32.add (local.get $ptr) (local.get $size)) (i32.const 7))
                             (i32.const -8)))
    (if (i32.gt_u (local.get $end) (i32.shl (memory.size) (i32.const 16)))
      (then
        (if (i32.eq (memory.grow (i32.shr_u (i32.sub (i32.add (local.get $end) (i32.const 65535))
                                                      (i32.shl (memory.size) (i32.const 16)))
                                             (i32.const 16)))
                    (i32.const -1))
          (then (return (i32.const 0))))))
    (global.set $heap (local.get $end))
    (local.get $ptr))
"""

_FILTER_SCORE = """
  (global $filter_calls (export "filter_calls") (mut i32) (i32.const 0))
  (global $score_calls (export "score_calls") (mut i32) (i32.const 0))
  ;; every row passes
  (func (export "wssp_filter") (param $ctx i32) (result i32)
    (global.set $filter_calls (i32.add (global.get $filter_calls) (i32.const 1)))
    (memory.copy (i32.const 1280) (local.get $ctx) (i32.const 256))
    (memory.fill (i32.load offset=80 (local.get $ctx)) (i32.const 0)
                 (i32.shl (i32.load offset=8 (local.get $ctx)) (i32.const 1)))
    (i32.const 0))
  ;; candidate row i scores 10 + i
  (func (export "wssp_score") (param $ctx i32) (result i32)
    (local $i i32)
    (global.set $score_calls (i32.add (global.get $score_calls) (i32.const 1)))
    (block $done
      (loop $rows
        (br_if $done (i32.ge_u (local.get $i) (i32.load offset=8 (local.get $ctx))))
        (if (i32.load8_u (i32.add (i32.load offset=76 (local.get $ctx)) (local.get $i)))
          (then (i64.store (i32.add (i32.load offset=84 (local.get $ctx))
                                    (i32.shl (local.get $i) (i32.const 3)))
                           (i64.extend_i32_u (i32.add (local.get $i) (i32.const 10))))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $rows)))
    (i32.const 0))
"""

_STAGE = """
  (func $stage (param $ctx i32) (result i32)
    (local $s i32) (local $mode i32) (local $keep i32) (local $i i32)
    (memory.copy (i32.const 1024) (local.get $ctx) (i32.const 256))
    (local.set $s (i32.add (i32.const 1536)
                           (i32.shl (i32.load offset=92 (local.get $ctx)) (i32.const 5))))
    (local.set $mode (i32.load offset=24 (local.get $s)))
    (if (i32.eq (local.get $mode) (i32.const 1)) (then (unreachable)))
    (if (i32.eq (local.get $mode) (i32.const 2)) (then (loop $spin (br $spin))))
    (i32.store offset=112 (local.get $ctx) (i32.load offset=0 (local.get $s)))
    (i32.store offset=116 (local.get $ctx) (i32.load offset=4 (local.get $s)))
    (i32.store offset=120 (local.get $ctx) (i32.load offset=8 (local.get $s)))
    (i32.store offset=124 (local.get $ctx) (i32.load offset=12 (local.get $s)))
    (i32.store offset=144 (local.get $ctx) (i32.load offset=16 (local.get $s)))
    (i32.store offset=148 (local.get $ctx) (i32.load offset=20 (local.get $s)))
    ;; prefilter: row i stays a candidate when bit i of the mask is set (rows the mask leaves
    ;; out are not written: the host zeroed them)
    (local.set $keep (i32.load offset=28 (local.get $s)))
    (block $done
      (loop $rows
        (br_if $done (i32.or (i32.eqz (local.get $keep))
                             (i32.ge_u (local.get $i) (i32.load offset=8 (local.get $ctx)))))
        (if (i32.and (i32.shr_u (local.get $keep) (local.get $i)) (i32.const 1))
          (then (i32.store8 (i32.add (i32.load offset=160 (local.get $ctx)) (local.get $i))
                            (i32.const 1))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br_if $done (i32.ge_u (local.get $i) (i32.const 32)))
        (br $rows)))
    (if (i32.eq (local.get $mode) (i32.const 3)) (then (return (i32.const 1))))
    (i32.const 0))
"""


def scripted(stages: Iterable[str] = NEW_STAGES, *, minor: int = 3, extra: str = "") -> bytes:
    """The scripted guest exporting ``stages`` (and filter and score), marker ``minor``."""
    exports = "".join(f'  (func (export "wssp_{s}") (param i32) (result i32) '
                      f"(call $stage (local.get 0)))\n" for s in stages)
    text = (f'(module\n  (memory (export "memory") 2)\n'
            f'  (func (export "wssp_abi_v1") (result i32) (i32.const {minor}))\n'
            f'{_ALLOC}  (func (export "wssp_init") (param i32 i32 i32) (result i32) '
            f"(i32.const 0))\n{_FILTER_SCORE}{_STAGE}{exports}{extra})")
    data: bytes = wasmtime.wat2wasm(text)
    return data


SCRIPTED = scripted()


def load(runtime: str, wasm: bytes = SCRIPTED, table: NodeTable | None = None,
         **kwargs: Any) -> Fragment:
    kwargs.setdefault("limits", LIMITS)
    return Fragment.load(wasm, runtime=runtime, table=table, **kwargs)


def compile_(runtime: str, wasm: bytes = SCRIPTED, **kwargs: Any) -> Fragment:
    kwargs.setdefault("limits", LIMITS)
    return Fragment.compile(wasm, runtime=runtime, **kwargs)


@dataclass(frozen=True)
class Plan:
    """What the scripted guest answers in one stage."""

    code: int = 0
    value: int = 0
    message: bytes = b""
    output: bytes = b""
    mode: int = 0
    keep: int = 0           # prefilter: bit i keeps row i
    message_ptr: int | None = None
    output_ptr: int | None = None
    output_len: int | None = None


def plan(frag: Fragment, table: NodeTable, stage: str, p: Plan = Plan()) -> None:
    """Write ``p`` into the serving instance (created if need be) for ``stage``."""
    mem = frag.prepare(table).instance.memory()
    message_ptr = TEXT if p.message_ptr is None else p.message_ptr
    output_ptr = TEXT + len(p.message) if p.output_ptr is None else p.output_ptr
    texts = p.message + p.output
    if texts:
        mem[TEXT: TEXT + len(texts)] = np.frombuffer(texts, np.uint8)
    fields = struct.pack("<8I", p.code, p.value, message_ptr, len(p.message), output_ptr,
                         len(p.output) if p.output_len is None else p.output_len, p.mode,
                         p.keep)
    at = SCRIPT + 32 * STAGE_IDS[stage]
    mem[at: at + 32] = np.frombuffer(fields, np.uint8)


def seen(frag: Fragment, table: NodeTable, at: int = SNAP_STAGE) -> dict[str, int]:
    """The context fields the last lifecycle (or filter) call saw on entry."""
    mem = frag.prepare(table).instance.memory()
    words = struct.unpack_from("<64I", bytes(mem[at: at + 256]))
    names = {"stage": 92, "n_changed": 100, "host_minor": 104, "node_row": 108, "answer": 112,
             "answer_value": 116, "message": 120, "message_len": 124, "output": 144,
             "output_len": 148, "waiting": 152, "waiting_len": 156, "prefilter_rows": 160,
             "cause": 164, "pod": 64, "pod_len": 68, "count": 8}
    out = {name: words[offset // 4] for name, offset in names.items()}
    out["now_ms"] = words[42] | words[43] << 32
    return out


def guest_bytes(frag: Fragment, table: NodeTable, ptr: int, length: int) -> bytes:
    return bytes(frag.prepare(table).instance.memory()[ptr: ptr + length])


def three_nodes() -> NodeTable:
    return build_table([make_node(f"n{i}").capacity(cpu="4", memory="8Gi", pods=10).obj()
                        for i in range(3)])


def ctx_of(table: NodeTable, uid: str = "3f2a-uid") -> CycleContext:
    pod = make_pod("web-1", "shop").uid(uid).req(cpu="1").obj()
    return CycleContext.for_pod(pod_info(pod), table)


def counter(frag: Fragment, table: NodeTable, name: str) -> int:
    value = frag.prepare(table).instance.global_value(name)
    assert value is not None
    return value


# -- which stages a module takes ------------------------------------------------------------------

def test_a_module_takes_the_stages_it_exports(runtime: str) -> None:
    frag = load(runtime, scripted(("reserve", "permit", "unreserve")))
    assert frag.stages == {"reserve", "permit", "unreserve"}
    assert exported_stages(frag.module) == frag.stages
    assert load(runtime).stages == set(NEW_STAGES)
    probe = wasmtime.wat2wasm((FIXTURES / "probe.wat").read_text())  # minor 0, ABI 1.0
    assert load(runtime, probe).stages == frozenset()


def test_a_stage_the_module_does_not_export_is_not_called(runtime: str) -> None:
    table = three_nodes()
    frag = load(runtime, scripted(("reserve",)), table)
    with pytest.raises(ValueError, match="does not export wssp_permit"):
        frag.call_sync("permit", ctx_of(table))
    with pytest.raises(ValueError, match="unknown stage 'bind'"):
        frag.call_sync("bind", ctx_of(table))


# -- answers the host takes -----------------------------------------------------------------------

ACCEPTED = [
    pytest.param("prefilter", Plan(), StageAnswer("prefilter", 0), id="prefilter passes"),
    pytest.param("prefilter", Plan(code=1, message=b"quota of team a used up"),
                 StageAnswer("prefilter", 1, message="quota of team a used up"),
                 id="prefilter rejects, with a message"),
    pytest.param("prefilter", Plan(code=0, output=b"allow uid-1\nreject uid-2"),
                 StageAnswer("prefilter", 0, commands=(("allow", "uid-1"), ("reject", "uid-2"))),
                 id="prefilter allows and rejects waiting pods"),
    pytest.param("postfilter", Plan(code=1), StageAnswer("postfilter", 1), id="preempt only"),
    pytest.param("postfilter", Plan(code=2), StageAnswer("postfilter", 2), id="burst only"),
    pytest.param("postfilter", Plan(code=3, message=b"wait for the batch window"),
                 StageAnswer("postfilter", 3, message="wait for the batch window"),
                 id="postfilter waits"),
    pytest.param("postfilter", Plan(code=4, value=2), StageAnswer("postfilter", 4, 2),
                 id="postfilter nominates a row"),
    pytest.param("reserve", Plan(), StageAnswer("reserve", 0), id="reserve ok"),
    pytest.param("reserve", Plan(code=1, message=b"rack full"),
                 StageAnswer("reserve", 1, message="rack full"), id="reserve rejects"),
    pytest.param("unreserve", Plan(code=9, value=4, output=b"reject uid-7\n"),
                 StageAnswer("unreserve", 0, commands=(("reject", "uid-7"),)),
                 id="unreserve's answer is ignored, its commands are not"),
    pytest.param("permit", Plan(), StageAnswer("permit", 0), id="permit allows"),
    pytest.param("permit", Plan(code=1, message=b"gang incomplete"),
                 StageAnswer("permit", 1, message="gang incomplete"), id="permit denies"),
    pytest.param("permit", Plan(code=2, value=1500, output=b"allow uid-a\nallow uid-b"),
                 StageAnswer("permit", 2, 1500, commands=(("allow", "uid-a"), ("allow", "uid-b"))),
                 id="permit waits and lets two waiting pods go"),
    pytest.param("prebind", Plan(output=b"label team=a\nannotation example.com/note=two words\n"
                                        b"label empty="),
                 StageAnswer("prebind", 0, commands=(
                     ("label", "team=a"), ("annotation", "example.com/note=two words"),
                     ("label", "empty="))),
                 id="prebind patches labels and annotations"),
    pytest.param("prebind", Plan(code=1, message=b"no"), StageAnswer("prebind", 1, message="no"),
                 id="prebind rejects"),
    pytest.param("postbind", Plan(code=5, value=5), StageAnswer("postbind", 0),
                 id="postbind's answer is ignored"),
    pytest.param("permit", Plan(output=b"\n\nallow uid-a\n\n"),
                 StageAnswer("permit", 0, commands=(("allow", "uid-a"),)),
                 id="empty lines are skipped"),
]


@pytest.mark.parametrize(("stage", "p", "expected"), ACCEPTED)
def test_stage_answers(runtime: str, stage: str, p: Plan, expected: StageAnswer) -> None:
    table = three_nodes()
    frag = load(runtime, table=table)
    plan(frag, table, stage, p)
    answer = frag.call_sync(stage, ctx_of(table), node_row=1)
    assert answer == expected
    assert seen(frag, table)["stage"] == STAGE_IDS[stage]


def test_prefilter_restricts_rows(runtime: str) -> None:
    table = three_nodes()
    frag = load(runtime, table=table)
    plan(frag, table, "prefilter", Plan(code=2, keep=0b101))
    answer = frag.call_sync("prefilter", ctx_of(table))
    assert answer.code == 2 and answer.rows is not None
    assert answer.rows.tolist() == [True, False, True]
    # the host zeroes the rows before every call: a guest writing none keeps none
    plan(frag, table, "prefilter", Plan(code=2))
    answer = frag.call_sync("prefilter", ctx_of(table))
    assert answer.rows is not None and answer.rows.tolist() == [False, False, False]
    # rows only go with answer 2
    plan(frag, table, "prefilter", Plan(code=0, keep=0b1))
    assert frag.call_sync("prefilter", ctx_of(table)).rows is None


def test_the_message_is_cut_and_sanitized(runtime: str) -> None:
    table = three_nodes()
    frag = load(runtime, table=table)
    message = b"bad\x00pod\x1b[31m\nline\xff\x7f" + b"x" * 3000
    plan(frag, table, "reserve", Plan(code=1, message=message))
    answer = frag.call_sync("reserve", ctx_of(table))
    assert answer.message.startswith("bad pod [31m line\ufffd ")
    assert len(answer.message.encode()) <= MAX_MESSAGE_BYTES + 2  # U+FFFD is 3 bytes for 1
    assert answer.message.endswith("x")
    assert not any(ord(c) < 32 or ord(c) == 127 for c in answer.message)


# -- answers the host refuses ---------------------------------------------------------------------

def _bad_code(stage: str, code: int, highest: int) -> Any:
    return pytest.param(stage, Plan(code=code), "output",
                        f"answer {code} is not one of 0..{highest} for wssp_{stage}",
                        id=f"{stage} answers {code}")


REFUSED = [
    _bad_code("prefilter", 3, 2),
    _bad_code("prefilter", 0xFFFFFFFF, 2),
    _bad_code("postfilter", 5, 4),
    _bad_code("reserve", 2, 1),
    _bad_code("permit", 3, 2),
    _bad_code("prebind", 2, 1),
    pytest.param("postfilter", Plan(code=4, value=3), "output",
                 "wssp_postfilter nominated row 3, which is not one of the rows 0..2",
                 id="nominated row beyond the rows"),
    pytest.param("permit", Plan(code=2, value=0), "output",
                 r"wssp_permit answered 2 \(wait\) with answer_value 0", id="wait of 0 ms"),
    pytest.param("permit", Plan(output=b"a" * 10, output_len=65537), "output",
                 "wssp_permit wrote 65537 bytes of output, more than 65536", id="output > 64 KiB"),
    pytest.param("reserve", Plan(output=b"allow u\n" * 1001), "output",
                 "wssp_reserve wrote 1001 output lines, more than 1000", id="1001 lines"),
    pytest.param("prefilter", Plan(output=b"allow u\nlabel a=b"), "output",
                 "wssp_prefilter output line 2 \"label a=b\": 'label' is not a command of "
                 r"wssp_prefilter \(it takes allow, reject\)", id="prefilter labels"),
    pytest.param("postfilter", Plan(output=b"annotation a=b"), "output",
                 "'annotation' is not a command of wssp_postfilter", id="postfilter annotates"),
    pytest.param("reserve", Plan(output=b"label a=b"), "output",
                 "'label' is not a command of wssp_reserve", id="reserve labels"),
    pytest.param("unreserve", Plan(output=b"bind uid-1"), "output",
                 "'bind' is not a command of wssp_unreserve", id="unknown verb"),
    pytest.param("permit", Plan(output=b"label a=b"), "output",
                 "'label' is not a command of wssp_permit", id="permit labels"),
    pytest.param("prebind", Plan(output=b"label a=b\nallow uid-1"), "output",
                 "wssp_prebind output line 2 \"allow uid-1\": 'allow' is not a command of "
                 r"wssp_prebind \(it takes label, annotation\)", id="prebind allows"),
    pytest.param("postbind", Plan(output=b"allow uid-1"), "output",
                 "wssp_postbind output line 1 \"allow uid-1\": wssp_postbind takes no commands",
                 id="postbind writes a command"),
    pytest.param("permit", Plan(output=b"allow"), "output", "expected allow <uid>",
                 id="allow without a uid"),
    pytest.param("permit", Plan(output=b"reject a b"), "output", "expected reject <uid>",
                 id="reject with two words"),
    pytest.param("prebind", Plan(output=b"label team"), "output",
                 "expected label <key>=<value>", id="label without ="),
    pytest.param("prebind", Plan(output=b"annotation =v"), "output",
                 "expected annotation <key>=<value>", id="annotation without a key"),
    pytest.param("permit", Plan(output=b"allow a\tb"), "output", "control character",
                 id="control character in a line"),
    pytest.param("permit", Plan(output=b"allow \xff\xfe"), "output",
                 r"wssp_permit's output is not UTF-8 \(at byte 6\)", id="output not UTF-8"),
    pytest.param("permit", Plan(output=b"x", output_ptr=0xFFFFFF00), "output",
                 r"wssp_permit's output \[4294967040, 4294967041\) is outside the guest memory",
                 id="output outside memory"),
    pytest.param("reserve", Plan(code=1, message=b"x", message_ptr=0xFFFFFFF0), "output",
                 "wssp_reserve's message .* is outside the guest memory",
                 id="message outside memory"),
    pytest.param("reserve", Plan(mode=MODE_TRAP), "trap", "unreachable", id="trap"),
    pytest.param("permit", Plan(mode=MODE_LOOP), "fuel|timeout", "fuel|deadline",
                 id="endless loop"),
    pytest.param("prebind", Plan(mode=MODE_FAIL), "return", "wssp_prebind returned 1",
                 id="non-zero return"),
    pytest.param("postbind", Plan(mode=MODE_TRAP), "trap", "unreachable",
                 id="postbind traps"),
]


@pytest.mark.parametrize(("stage", "p", "kind", "message"), REFUSED)
def test_refused_answers_fail_the_call_and_discard_the_instance(
        runtime: str, stage: str, p: Plan, kind: str, message: str) -> None:
    table = three_nodes()
    frag = load(runtime, table=table)
    plan(frag, table, stage, p)
    with pytest.raises(CallError, match=message) as failed:
        frag.call_sync(stage, ctx_of(table), node_row=0)
    assert failed.value.kind in kind.split("|"), failed.value.message
    assert frag.stats.failures == 1
    # a fresh instance serves the next call
    plan(frag, table, stage, Plan())
    assert frag.call_sync(stage, ctx_of(table), node_row=0).code == 0
    assert frag.stats.instances == 2


def test_nominating_a_row_whose_node_is_gone_is_refused(runtime: str) -> None:
    table = three_nodes()
    frag = load(runtime, table=table)
    table.remove_node("n1")  # row 1 is a hole now, below the count
    plan(frag, table, "postfilter", Plan(code=4, value=1))
    with pytest.raises(CallError, match="nominated row 1, which holds no node"):
        frag.call_sync("postfilter", ctx_of(table))
    plan(frag, table, "postfilter", Plan(code=4, value=2))
    assert frag.call_sync("postfilter", ctx_of(table)).value == 2


# -- what the guest sees --------------------------------------------------------------------------

def test_context_fields_of_a_lifecycle_call(runtime: str) -> None:
    table = three_nodes()
    frag = load(runtime, table=table)
    waiting = b"uid-1 shop/web-0 n0 app=web,tier=front\nuid-2 shop/db-0 n2 "
    # the previous call's answer fields are cleared before the next call
    plan(frag, table, "permit", Plan(code=2, value=10, message=b"later", output=b"allow x"))
    before = time.time() * 1000
    frag.call_sync("permit", ctx_of(table), node_row=2, waiting=waiting)
    after = time.time() * 1000
    fields = seen(frag, table)
    assert fields["stage"] == STAGE_IDS["permit"] == 7
    assert fields["node_row"] == 2
    assert fields["cause"] == 0
    assert fields["host_minor"] == ABI_MINOR == 3
    assert fields["n_changed"] == ALL_ROWS
    assert before - 1 <= fields["now_ms"] <= after + 1
    assert guest_bytes(frag, table, fields["waiting"], fields["waiting_len"]) == waiting
    assert fields["prefilter_rows"] != 0
    plan(frag, table, "unreserve", Plan())
    frag.call_sync("unreserve", ctx_of(table), node_row=1, cause=3)
    fields = seen(frag, table)
    assert (fields["stage"], fields["node_row"], fields["cause"]) == (6, 1, 3)
    assert fields["waiting_len"] == 0
    assert (fields["answer"], fields["answer_value"], fields["message_len"],
            fields["output_len"], fields["message"], fields["output"]) == (0, 0, 0, 0, 0, 0)
    plan(frag, table, "prefilter", Plan())
    frag.call_sync("prefilter", ctx_of(table), waiting=waiting)
    fields = seen(frag, table)
    assert fields["node_row"] == NO_ROW
    assert guest_bytes(frag, table, fields["waiting"], fields["waiting_len"]) == waiting


def test_filter_and_score_see_no_lifecycle_fields(runtime: str) -> None:
    table = three_nodes()
    frag = load(runtime, table=table)
    ctx = ctx_of(table)
    frag.filter(ctx)
    fields = seen(frag, table, SNAP_FILTER)
    assert (fields["stage"], fields["node_row"], fields["cause"]) == (1, NO_ROW, 0)
    assert fields["now_ms"] > 1_600_000_000_000
    plan(frag, table, "unreserve", Plan())
    frag.call_sync("unreserve", ctx, node_row=2, waiting=b"uid-1 a/b n1 ", cause=4)
    frag.filter(ctx)
    fields = seen(frag, table, SNAP_FILTER)
    assert (fields["stage"], fields["node_row"], fields["cause"], fields["waiting_len"]) == (
        1, NO_ROW, 0, 0)


def test_a_long_waiting_list_reaches_the_guest(runtime: str) -> None:
    table = three_nodes()
    frag = load(runtime, table=table)
    waiting = b"\n".join(b"uid-%05d ns/pod-%05d n%d app=x" % (i, i, i % 3) for i in range(2000))
    assert len(waiting) > 60_000
    plan(frag, table, "permit", Plan())
    frag.call_sync("permit", ctx_of(table), node_row=0, waiting=waiting)
    fields = seen(frag, table)
    assert guest_bytes(frag, table, fields["waiting"], fields["waiting_len"]) == waiting


def test_the_pod_record_carries_the_uid(runtime: str) -> None:
    table = three_nodes()
    frag = load(runtime, table=table)
    plan(frag, table, "reserve", Plan())
    frag.call_sync("reserve", ctx_of(table, uid="0b1c-7d"), node_row=0)
    fields = seen(frag, table)
    record = guest_bytes(frag, table, fields["pod"], fields["pod_len"])
    size, r = struct.unpack_from("<II", record)
    assert size == len(record) == fields["pod_len"]

    def text(at: int) -> bytes:
        offset, length = struct.unpack_from("<II", record, at + 8 * r)
        assert offset + length <= size
        return record[offset: offset + length]
    assert (text(40), text(48), text(72)) == (b"shop", b"web-1", b"0b1c-7d")


# -- load-time checks -----------------------------------------------------------------------------

_MINIMAL = """(module
  (memory (export "memory") 1)
  (func (export "wssp_abi_v1") (result i32) (i32.const 3))
  (func (export "wssp_alloc") (param i32) (result i32) (i32.const 8))
  (func (export "wssp_init") (param i32 i32 i32) (result i32) (i32.const 0))
  (func (export "wssp_filter") (param i32) (result i32) (i32.const 0))
  %s)"""


@pytest.mark.parametrize(("exports", "message"), [
    pytest.param('(func (export "wssp_permit") (param i32 i32) (result i32) (i32.const 0))',
                 r"export wssp_permit must be a function \(i32\) -> \(i32\), "
                 r"not \(i32, i32\) -> \(i32\)", id="stage with two parameters"),
    pytest.param('(func (export "wssp_reserve") (param i32))',
                 r"export wssp_reserve must be a function \(i32\) -> \(i32\), not \(i32\) -> \(\)",
                 id="stage without a result"),
    pytest.param('(func (export "wssp_postbind") (param i64) (result i32) (i32.const 0))',
                 r"export wssp_postbind must be a function \(i32\) -> \(i32\), "
                 r"not \(i64\) -> \(i32\)", id="stage taking an i64"),
    pytest.param('(global (export "wssp_prefilter") i32 (i32.const 0))',
                 r"export wssp_prefilter must be a function \(i32\) -> \(i32\), not a global",
                 id="stage as a global"),
    pytest.param('(func (export "wssp_score") (param i32) (result i64) (i64.const 0))',
                 r"export wssp_score must be a function \(i32\) -> \(i32\), not \(i32\) -> \(i64\)",
                 id="score, even unconfigured"),
    pytest.param('(func (export "wssp_permitt") (param i32) (result i32) (i32.const 0))',
                 r"unknown export wssp_permitt \(known: wssp_alloc, wssp_init, wssp_prefilter, "
                 r"wssp_filter, wssp_score, wssp_postfilter, wssp_reserve, wssp_unreserve, "
                 r"wssp_permit, wssp_prebind, wssp_postbind and the marker wssp_abi_v1\)",
                 id="misspelt stage"),
    pytest.param('(global (export "wssp_version") i32 (i32.const 0))',
                 "unknown export wssp_version", id="unknown global"),
    pytest.param('(func (export "wssp_abi_vx") (result i32) (i32.const 0))',
                 "unknown export wssp_abi_vx", id="marker-like name"),
])
def test_wrong_stage_exports_are_refused_at_load(runtime: str, exports: str,
                                                 message: str) -> None:
    with pytest.raises(LoadError, match=message):
        compile_(runtime, wasmtime.wat2wasm(_MINIMAL % exports), score=False)


@pytest.mark.parametrize(("module", "message"), [
    pytest.param(_MINIMAL.replace('(func (export "wssp_alloc") (param i32) (result i32)',
                                  '(func (export "wssp_alloc") (param i32 i32) (result i32)') % "",
                 r"export wssp_alloc must be a function \(i32\) -> \(i32\), "
                 r"not \(i32, i32\) -> \(i32\)", id="alloc"),
    pytest.param(_MINIMAL.replace('"wssp_init") (param i32 i32 i32)', '"wssp_init") (param i32)')
                 % "", r"export wssp_init must be a function \(i32, i32, i32\) -> \(i32\), "
                       r"not \(i32\) -> \(i32\)", id="init"),
    pytest.param(_MINIMAL.replace('"wssp_filter") (param i32) (result i32) (i32.const 0)',
                                  '"wssp_filter") (param i32)') % "",
                 r"export wssp_filter must be a function \(i32\) -> \(i32\), not \(i32\) -> \(\)",
                 id="filter"),
])
def test_wrong_signatures_of_the_older_exports_are_refused_at_load(
        runtime: str, module: str, message: str) -> None:
    with pytest.raises(LoadError, match=message):
        compile_(runtime, wasmtime.wat2wasm(module), score=False)


def test_other_exports_are_left_alone(runtime: str) -> None:
    extra = ('(func (export "helper") (param f64) (result f64) (local.get 0))\n'
             '(global (export "build_id") i32 (i32.const 7))\n'
             '(func (export "wssp_abi_v2") (result i32) (i32.const 0))')
    frag = compile_(runtime, wasmtime.wat2wasm(_MINIMAL % extra), score=False)
    assert frag.stages == frozenset()


def test_the_existing_load_messages_stay(runtime: str) -> None:
    no_filter = _MINIMAL.replace(
        '(func (export "wssp_filter") (param i32) (result i32) (i32.const 0))', "") % ""
    with pytest.raises(LoadError, match=r"^missing export wssp_filter \(the resource configures "
                                        r"that stage\)$"):
        compile_(runtime, wasmtime.wat2wasm(no_filter))
    with pytest.raises(LoadError, match="^missing export wssp_score"):
        compile_(runtime, wasmtime.wat2wasm(_MINIMAL % ""), score=True)


# -- older guests ---------------------------------------------------------------------------------

@pytest.mark.parametrize("minor", [1, 2])
def test_guests_of_older_minors_keep_working(runtime: str, minor: int) -> None:
    table = three_nodes()
    frag = load(runtime, scripted((), minor=minor), table)
    assert frag.stages == frozenset()

    async def main() -> None:
        ctx = ctx_of(table)
        answers = await frag.evaluate(ctx, ctx.nodes().copy(), prefilter=True,
                                      waiting=b"uid-1 a/b n0 ")
        assert answers.prefilter is None  # no prefilter export: not called
        assert answers.filter is not None and not isinstance(answers.filter, CallError)
        assert answers.scores is not None and not isinstance(answers.scores, CallError)
        assert answers.scores.tolist() == [10, 11, 12]
        with pytest.raises(ValueError, match="does not export wssp_permit"):
            await frag.call("permit", ctx)
    asyncio.run(main())
    assert frag.prepare(table).minor == minor


# -- the prefilter in a pod's batch of calls ------------------------------------------------------

def _evaluate(frag: Fragment, table: NodeTable, *, inline: bool = False,
              **kwargs: Any) -> Any:
    async def main() -> Any:
        await frag.start(table)
        ctx = ctx_of(table)
        if inline:
            return frag.evaluate_inline(ctx, ctx.nodes().copy(), **kwargs)
        return await frag.evaluate(ctx, ctx.nodes().copy(), **kwargs)
    return asyncio.run(main())


PATHS = [pytest.param(False, id="worker"), pytest.param(True, id="inline")]


def _frag_for(runtime: str, inline: bool, table: NodeTable) -> Fragment:
    if inline and runtime != "wasmtime":
        pytest.skip("calls run on the loop only with a deadline to bound them (wasmtime)")
    frag = compile_(runtime)
    frag.inline_seconds = 0.5 if inline else 0.0
    frag.prepare(table)
    return frag


@pytest.mark.parametrize("inline", PATHS)
def test_a_rejecting_prefilter_leaves_filter_and_score_uncalled(runtime: str,
                                                                inline: bool) -> None:
    table = three_nodes()
    frag = _frag_for(runtime, inline, table)
    plan(frag, table, "prefilter", Plan(code=1, message=b"over quota"))
    answers = _evaluate(frag, table, inline=inline, prefilter=True, waiting=b"uid-9 a/b n0 ")
    assert isinstance(answers.prefilter, StageAnswer)
    assert (answers.prefilter.code, answers.prefilter.message) == (1, "over quota")
    assert answers.filter is None and answers.scores is None
    assert counter(frag, table, "filter_calls") == counter(frag, table, "score_calls") == 0
    fields = seen(frag, table)
    assert guest_bytes(frag, table, fields["waiting"], fields["waiting_len"]) == b"uid-9 a/b n0 "
    assert frag.breaker.failures == 0 and frag.stats.calls == 1


@pytest.mark.parametrize("inline", PATHS)
def test_a_failing_prefilter_fails_the_batch(runtime: str, inline: bool) -> None:
    table = three_nodes()
    frag = _frag_for(runtime, inline, table)
    guest = frag.prepare(table)
    plan(frag, table, "prefilter", Plan(mode=MODE_TRAP))
    answers = _evaluate(frag, table, inline=inline, prefilter=True)
    assert isinstance(answers.prefilter, CallError) and answers.prefilter.kind == "trap"
    for skipped in (answers.filter, answers.scores):
        assert isinstance(skipped, CallError) and skipped.kind == "trap"
        assert skipped.message == "not called: the prefilter call failed"
    assert guest.instance.global_value("filter_calls") == 0
    assert answers.failure() is answers.prefilter
    assert (frag.breaker.failures, frag.stats.failures) == (1, 1)


@pytest.mark.parametrize("inline", PATHS)
def test_a_restricting_prefilter_narrows_the_score_candidates(runtime: str,
                                                              inline: bool) -> None:
    table = three_nodes()
    frag = _frag_for(runtime, inline, table)
    plan(frag, table, "prefilter", Plan(code=2, keep=0b101))
    answers = _evaluate(frag, table, inline=inline, prefilter=True)
    assert isinstance(answers.prefilter, StageAnswer) and answers.prefilter.code == 2
    assert answers.filter.passed.tolist() == [True, True, True]  # the filter call saw every row
    assert answers.scores.tolist() == [10, 0, 12]
    assert answers.prefilter_seconds > 0
    # a prefilter that passes changes nothing
    plan(frag, table, "prefilter", Plan(code=0))
    answers = _evaluate(frag, table, inline=inline, prefilter=True)
    assert answers.scores.tolist() == [10, 11, 12]
    # not asked for: not called
    plan(frag, table, "prefilter", Plan(code=1))
    answers = _evaluate(frag, table, inline=inline)
    assert answers.prefilter is None and answers.scores.tolist() == [10, 11, 12]


# -- one lifecycle call: awaited, inline, quarantined ---------------------------------------------

def test_call_awaits_the_answer_on_the_worker(runtime: str) -> None:
    table = three_nodes()
    frag = compile_(runtime)
    frag.prepare(table)
    plan(frag, table, "permit", Plan(code=2, value=1500, message=b"waiting for 3 more"))

    async def main() -> StageAnswer | CallError:
        return await frag.call("permit", ctx_of(table), node_row=1, waiting=b"uid-1 a/b n0 ")
    answer = asyncio.run(main())
    assert answer == StageAnswer("permit", 2, 1500, "waiting for 3 more")
    assert seen(frag, table)["node_row"] == 1
    assert frag.stats.calls == 1
    assert frag.call_now("permit", ctx_of(table)) is None  # not on the loop: inline_seconds 0


def test_call_runs_inline_when_calls_are_short() -> None:
    table = three_nodes()
    frag = compile_("wasmtime")
    frag.inline_seconds = 0.5
    frag.prepare(table)
    plan(frag, table, "reserve", Plan(code=1, message=b"no"))
    answer = frag.call_now("reserve", ctx_of(table), node_row=0)
    assert answer == StageAnswer("reserve", 1, message="no")

    async def main() -> StageAnswer | CallError:
        return await frag.call("reserve", ctx_of(table), node_row=0)
    assert asyncio.run(main()) == answer
    assert frag.stats.calls == 2 and not frag.offloaded


def test_failed_calls_count_for_the_breaker(runtime: str) -> None:
    table = three_nodes()
    clock = [0.0]
    frag = compile_(runtime)
    frag.breaker = Breaker(threshold=2, cooldown=30.0, clock=lambda: clock[0])
    ctx = ctx_of(table)

    async def call(stage: str) -> StageAnswer | CallError:
        frag.prepare(table)
        plan(frag, table, stage, Plan(mode=MODE_TRAP))
        return await frag.call(stage, ctx, node_row=0)

    async def main() -> None:
        for stage in ("reserve", "permit"):
            failed = await call(stage)
            assert isinstance(failed, CallError) and failed.kind == "trap"
        assert frag.breaker.state == "open"
        refused = await frag.call("prebind", ctx, node_row=0)
        assert isinstance(refused, CallError) and refused.kind == "quarantined"
        answers = await frag.evaluate(ctx, ctx.nodes().copy(), prefilter=True)
        assert all(isinstance(a, CallError) and a.kind == "quarantined"
                   for a in (answers.prefilter, answers.filter, answers.scores))
        clock[0] += 31.0  # the trial call succeeds: serving again
        frag.prepare(table)
        plan(frag, table, "postbind", Plan())
        assert isinstance(await frag.call("postbind", ctx, node_row=0), StageAnswer)
        assert frag.breaker.seconds_left() == 0 and not frag.breaker.failures
    asyncio.run(main())
    assert frag.breaker.state == "closed"
    assert frag.stats.failures == 2


def test_call_now_answers_the_quarantine_at_once() -> None:
    table = three_nodes()
    frag = compile_("wasmtime")
    frag.inline_seconds = 0.5
    frag.breaker = Breaker(threshold=1)
    frag.prepare(table)
    plan(frag, table, "permit", Plan(mode=MODE_LOOP))
    failed = frag.call_now("permit", ctx_of(table))
    assert isinstance(failed, CallError) and failed.kind in ("fuel", "timeout")
    refused = frag.call_now("permit", ctx_of(table))
    assert isinstance(refused, CallError) and refused.kind == "quarantined"


def test_an_inline_call_overrunning_its_bound_goes_to_the_worker() -> None:
    """A call stopped by the inline bound is made again on the worker thread with the whole
    deadline."""
    table = three_nodes()
    wasm = (HOSTILE / "prefilter-loops.wasm").read_bytes()
    frag = compile_("wasmtime", wasm, limits=Limits(fuel=10**12, timeout_seconds=0.3))
    frag.inline_seconds = 0.02
    frag.prepare(table)

    async def main() -> StageAnswer | CallError:
        return await frag.call("prefilter", ctx_of(table))
    started = time.perf_counter()
    answer = asyncio.run(main())
    assert isinstance(answer, CallError) and answer.kind == "timeout"
    assert time.perf_counter() - started >= 0.25  # the whole deadline, on the worker
    # (Whether the fragment stays offloaded depends on the CPU the stopped call got, which a
    # busy machine decides: tests/unit/wasm/test_offloop.py covers that rule.)
    assert frag.stats.failures == 1 and frag.stats.calls == 1
