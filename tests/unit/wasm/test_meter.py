"""The module reader and the metering rewriter (pyscheduler.wasm.meter).

The fixtures (fixtures/{control,numeric,signext,memory,globals}.wat) cover every instruction
family the decoder knows; fixtures/clang.wat is a C compiler's output. Each runs twice under a
plain wasmtime engine, as written and as rewritten, with the same calls in the same order:
results, traps and memory must agree, and the call depth must be back at 0 after every call
that returns. When wasmer is importable the rewritten modules also run there, through the
wasmer runtime, against the same reference.
"""

from __future__ import annotations

import hashlib
import re
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest

from pyscheduler.wasm import binary, meter
from pyscheduler.wasm.errors import CallError, LoadError

wasmtime = pytest.importorskip("wasmtime")

FIXTURES = Path(__file__).parent / "fixtures"
FAMILIES = ("control", "numeric", "signext", "memory", "globals", "clang")
BIG_FUEL = 10**15


def wat(text: str) -> bytes:
    """WebAssembly text to bytes (this module needs wasmtime anyway, to run the reference)."""
    return bytes(wasmtime.wat2wasm(text))


def fixture(name: str) -> bytes:
    return wat((FIXTURES / f"{name}.wat").read_text())


def uleb(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def section(sid: int, payload: bytes) -> bytes:
    return bytes((sid,)) + uleb(len(payload)) + payload


def module_with_body(body: bytes) -> bytes:
    """A module with one function ``() -> ()`` whose code is ``body`` (no locals)."""
    code = b"\x00" + body
    return (b"\0asm\x01\0\0\0" + section(1, b"\x01\x60\x00\x00") + section(3, b"\x01\x00") +
            section(10, b"\x01" + uleb(len(code)) + code))


I32_VALUES = [0, 1, 2, 3, 7, 13, 100, -1, -7, 0x7FFFFFFF, -0x80000000, 123456789]
I64_VALUES = [0, 1, 2, 7, -1, -13, 2**40 + 5, -(2**63), 2**63 - 1, 1234567890123, 64, 3]


def vectors(sig: binary.FuncSig) -> list[tuple[int, ...]]:
    if not sig.params:
        return [()]
    out = []
    for i in range(len(I32_VALUES)):
        out.append(tuple((I32_VALUES if t == binary.I32 else I64_VALUES)[(i + 5 * j) % 12]
                         for j, t in enumerate(sig.params)))
    return out


def plan(wasm: bytes) -> list[tuple[str, tuple[int, ...]]]:
    """Every exported function with integer parameters, each with its argument vectors."""
    info = binary.parse(wasm)
    calls = []
    for name, sig in info.export_sigs.items():
        if all(t in (binary.I32, binary.I64) for t in sig.params):
            calls += [(name, args) for args in vectors(sig)]
    return calls


def run_wasmtime(wasm: bytes, calls: list[tuple[str, tuple[int, ...]]],
                 metered: bool) -> list[tuple[Any, ...]]:
    """Run ``calls`` in order on one instance of a plain wasmtime engine; the outcome of each:
    result or trap code, and a digest of the memory after it."""
    engine = wasmtime.Engine()
    store = wasmtime.Store(engine)
    instance = wasmtime.Instance(store, wasmtime.Module(engine, wasm), [])
    exports = instance.exports(store)
    if metered and exports.get(meter.START_EXPORT) is not None:
        exports[meter.START_EXPORT](store)      # the runtime no longer starts it
    memory = exports.get("memory")
    outcomes: list[tuple[Any, ...]] = []
    for name, args in calls:
        if metered:
            exports[meter.DEPTH_EXPORT].set_value(store, wasmtime.Val.i32(0))
        try:
            outcome: tuple[Any, ...] = ("ok", exports[name](store, *args))
            if metered:
                assert exports[meter.DEPTH_EXPORT].value(store) == 0, (name, args)
        except wasmtime.Trap as e:
            outcome = ("trap", e.trap_code)
        if memory is not None:
            outcome += (hashlib.sha256(memory.read(store, 0, memory.data_len(store))).hexdigest(),)
        seen = exports.get("seen")
        if seen is not None:
            outcome += (seen.value(store),)
        outcomes.append(outcome)
    return outcomes


@pytest.mark.parametrize("family", FAMILIES)
def test_rewritten_fixture_validates_and_computes_the_same(family: str) -> None:
    original = fixture(family)
    rewritten = meter.instrument(original, fuel=BIG_FUEL, memory_cap_pages=None)
    calls = plan(original)
    assert len(calls) >= 12
    expected = run_wasmtime(original, calls, metered=False)
    assert run_wasmtime(rewritten, calls, metered=True) == expected
    # Not every call traps: the fixtures exercise real computations.
    assert sum(o[0] == "ok" for o in expected) > len(expected) // 2


@pytest.mark.parametrize("family", FAMILIES)
def test_rewritten_fixture_computes_the_same_on_wasmer(family: str) -> None:
    pytest.importorskip("wasmer")
    pytest.importorskip("wasmer_compiler_cranelift")
    from pyscheduler.wasm.vm import Limits, get_runtime

    original = fixture(family)
    info = binary.parse(original)
    calls = [(n, a) for n, a in plan(original) if len(info.export_sigs[n].results) <= 1]
    expected = [o[:1] + ((o[1] if o[0] == "ok" else None),) + o[2:]
                for o in run_wasmtime(original, calls, metered=False)]
    module = get_runtime("wasmer").compile(original, Limits(timeout_seconds=10))
    instance = module.instantiate()
    outcomes = []
    for name, args in calls:
        try:
            outcome: tuple[Any, ...] = ("ok", instance.call(name, *args))
        except CallError as e:
            assert e.kind == "trap", e.message
            outcome = ("trap", None)
            # The reference keeps calling the same instance after a trap: so does this run.
            instance.poisoned = False
        if "memory" in info.exports:
            outcome += (hashlib.sha256(instance.memory().tobytes()).hexdigest(),)
        seen = instance.global_value("seen")
        if seen is not None:
            outcome += (seen,)
        outcomes.append(outcome)
    # Results of i32 functions come back signed from both runtimes.
    assert outcomes == expected


COUNT = """(module
  (global (export "iterations") (mut i32) (i32.const 0))
  (global $acc (mut i32) (i32.const 0))
  (func (export "count") (param i32)
    (loop
      (global.set $acc (i32.xor (global.get $acc) (local.get 0)))
      (br_if 0 (local.tee 0 (i32.sub (local.get 0) (i32.const 1))))))
  (func (export "forever")
    (loop (global.set 0 (i32.add (global.get 0) (i32.const 1))) (br 0))))"""


def metered_instance(wasm: bytes, fuel: int) -> tuple[Any, Any]:
    engine = wasmtime.Engine()
    store = wasmtime.Store(engine)
    module = wasmtime.Module(engine, meter.instrument(wasm, fuel=fuel, memory_cap_pages=None))
    return store, wasmtime.Instance(store, module, []).exports(store)


def test_fuel_is_charged_per_loop_iteration_like_wasmtime_counts() -> None:
    store, exports = metered_instance(wat(COUNT), BIG_FUEL)
    fuel = exports[meter.FUEL_EXPORT]

    def used(n: int) -> int:
        fuel.set_value(store, wasmtime.Val.i64(BIG_FUEL))
        exports["count"](store, n)
        return BIG_FUEL - int(fuel.value(store))

    per_iteration = (used(2000) - used(1000)) // 1000
    # global.get, local.get, i32.xor, global.set, local.get, i32.const, i32.sub, local.tee, br_if
    assert per_iteration == 9
    # wasmtime's own fuel charges the same loop alike
    config = wasmtime.Config()
    config.consume_fuel = True
    engine = wasmtime.Engine(config)
    native_store = wasmtime.Store(engine)
    native = wasmtime.Instance(native_store, wasmtime.Module(engine, wat(COUNT)), [])
    count = native.exports(native_store)["count"]

    def native_used(n: int) -> int:
        native_store.set_fuel(BIG_FUEL)
        count(native_store, n)
        return BIG_FUEL - int(native_store.get_fuel())

    assert (native_used(2000) - native_used(1000)) // 1000 == per_iteration


def test_a_call_traps_exactly_when_its_fuel_runs_out() -> None:
    store, exports = metered_instance(wat(COUNT), BIG_FUEL)
    fuel = exports[meter.FUEL_EXPORT]
    fuel.set_value(store, wasmtime.Val.i64(BIG_FUEL))
    exports["count"](store, 100)
    needed = BIG_FUEL - int(fuel.value(store))
    fuel.set_value(store, wasmtime.Val.i64(needed))
    exports["count"](store, 100)
    assert fuel.value(store) == 0
    fuel.set_value(store, wasmtime.Val.i64(needed - 1))
    with pytest.raises(wasmtime.Trap) as trap:
        exports["count"](store, 100)
    assert trap.value.trap_code == wasmtime.TrapCode.UNREACHABLE
    assert fuel.value(store) < 0


def test_an_endless_loop_stops_after_about_the_configured_fuel() -> None:
    budget = 100_000
    store, exports = metered_instance(wat(COUNT), budget)
    with pytest.raises(wasmtime.Trap):
        exports["forever"](store)
    assert exports[meter.FUEL_EXPORT].value(store) < 0
    # 5 instructions an iteration (global.get, i32.const, i32.add, global.set, br), charged as
    # the minimum a region costs
    assert meter.MIN_REGION_COST > 5
    assert abs(exports["iterations"].value(store) - budget // meter.MIN_REGION_COST) <= 2


def test_bulk_operations_pay_for_their_length_and_host_calls_pay_more() -> None:
    wasm = wat("""(module
      (import "wssp" "log" (func $log (param i32 i32 i32)))
      (memory 2)
      (table 1 funcref)
      (func (export "fill") (param $n i32) (param $unused i64) (local $a f64) (local $b i32)
        (memory.fill (i32.const 0) (i32.const 1) (local.get $n))
        (memory.copy (i32.const 65536) (i32.const 0) (local.get $n)))
      (func (export "grow_table") (param $n i32) (result i32)
        (table.grow (ref.null func) (local.get $n)))
      (func (export "log") (call $log (i32.const 0) (i32.const 0) (i32.const 0))))""")
    engine = wasmtime.Engine()
    store = wasmtime.Store(engine)
    logged = []
    log = wasmtime.Func(store, wasmtime.FuncType([wasmtime.ValType.i32()] * 3, []),
                        lambda *args: logged.append(args))
    module = wasmtime.Module(engine, meter.instrument(wasm, fuel=BIG_FUEL, memory_cap_pages=None))
    exports = wasmtime.Instance(store, module, [log]).exports(store)
    fuel = exports[meter.FUEL_EXPORT]

    def used(name: str, *args: int) -> int:
        fuel.set_value(store, wasmtime.Val.i64(BIG_FUEL))
        exports[name](store, *args)
        return BIG_FUEL - int(fuel.value(store))

    assert used("fill", 65536, 0) - used("fill", 0, 0) == 2 * (65536 >> meter.BULK_SHIFT)
    assert used("grow_table", 4096) - used("grow_table", 0) == 4096 >> meter.BULK_SHIFT
    assert meter.HOST_CALL_COST <= used("log") < meter.HOST_CALL_COST + 10
    assert logged == [(0, 0, 0)]


RECURSE = """(module
  (func $down (export "down") (param i32) (result i32)
    (if (result i32) (local.get 0)
      (then (i32.add (call $down (i32.sub (local.get 0) (i32.const 1))) (i32.const 1)))
      (else (i32.const 0)))))"""


def test_call_depth_is_counted_and_limited() -> None:
    store, exports = metered_instance(wat(RECURSE), BIG_FUEL)
    depth = exports[meter.DEPTH_EXPORT]
    assert exports["down"](store, meter.MAX_CALL_DEPTH - 1) == meter.MAX_CALL_DEPTH - 1
    assert depth.value(store) == 0
    with pytest.raises(wasmtime.Trap):
        exports["down"](store, meter.MAX_CALL_DEPTH)
    assert depth.value(store) == meter.MAX_CALL_DEPTH + 1
    assert exports[meter.FUEL_EXPORT].value(store) > 0


def test_memory_and_table_maximums_are_capped() -> None:
    cases = [("(memory 1)", 3, (1, 3)), ("(memory 1 2)", 3, (1, 2)), ("(memory 2 100)", 5, (2, 5)),
             ("(memory 0)", None, (0, None))]
    for decl, cap, want in cases:
        rewritten = meter.instrument(wat(f"(module {decl})"), fuel=1, memory_cap_pages=cap)
        assert binary.parse(rewritten).memory == want, decl
    grow = wat("""(module (memory 1)
      (func (export "grow") (result i32) (memory.grow (i32.const 1))))""")
    engine = wasmtime.Engine()
    store = wasmtime.Store(engine)
    capped = wasmtime.Module(engine, meter.instrument(grow, fuel=BIG_FUEL, memory_cap_pages=3))
    fn = wasmtime.Instance(store, capped, []).exports(store)["grow"]
    assert [fn(store) for _ in range(4)] == [1, 2, -1, -1]

    table = meter.instrument(wat("(module (table 1 funcref))"), fuel=1, memory_cap_pages=None)
    assert f"(table (;0;) 1 {binary.MAX_TABLE_ELEMENTS} funcref)" in wasm2wat(table)
    with pytest.raises(LoadError, match="table minimum"):
        binary.parse(wat(f"(module (table {binary.MAX_TABLE_ELEMENTS + 1} funcref))"))


def wasm2wat(wasm: bytes) -> str:
    binary = shutil.which("wasm2wat")
    if binary is None:
        pytest.skip("wasm2wat (wabt) is not installed")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.wasm"
        path.write_bytes(wasm)
        return subprocess.run([binary, str(path)], check=True, capture_output=True,
                              text=True).stdout


def test_sections_are_added_when_missing_and_globals_keep_their_indices() -> None:
    for text in ("(module)", "(module (func))", "(module (global i32 (i32.const 3)))"):
        rewritten = meter.instrument(wat(text), fuel=77, memory_cap_pages=None)
        engine = wasmtime.Engine()
        store = wasmtime.Store(engine)
        exports = wasmtime.Instance(store, wasmtime.Module(engine, rewritten), []).exports(store)
        assert exports[meter.FUEL_EXPORT].value(store) == 77
        assert exports[meter.DEPTH_EXPORT].value(store) == 0
    info = binary.parse(meter.instrument(fixture("globals"), fuel=1, memory_cap_pages=None))
    assert info.defined_globals == 5 + 2


def test_the_name_section_is_kept_and_other_custom_sections_dropped() -> None:
    original = wat('(module (func $named (export "f") unreachable))')
    custom = section(0, b"\x05extra" + b"payload")
    rewritten = meter.instrument(original + custom, fuel=BIG_FUEL, memory_cap_pages=None)
    names = []
    for sid, start, end in binary.parse(rewritten).sections:
        if sid == 0:
            names.append(rewritten[start + 1:start + 1 + rewritten[start]].decode())
    assert names == ["name"]
    engine = wasmtime.Engine()
    store = wasmtime.Store(engine)
    f = wasmtime.Instance(store, wasmtime.Module(engine, rewritten), []).exports(store)["f"]
    with pytest.raises(wasmtime.Trap, match="named"):
        f(store)


@pytest.mark.parametrize(("body", "opcode"), [
    (b"\xc5\x0b", "0xc5 (unknown opcode)"),
    (b"\x08\x00\x0b", "0x08 (throw (exception handling))"),
    (b"\xfe\x03\x00\x0b", "0xfe (atomics (threads))"),
    (b"\x12\x00\x0b", "0x12 (return_call (tail calls))"),
    (b"\xfc\x20\x0b", "0xfc 32"),
])
def test_the_decoder_refuses_instructions_it_does_not_know(body: bytes, opcode: str) -> None:
    with pytest.raises(LoadError,
                       match=rf"unsupported instruction {re.escape(opcode)}.* in function 0"):
        meter.instrument(module_with_body(body), fuel=1, memory_cap_pages=None)


def test_the_decoder_refuses_simd() -> None:
    simd = wat("""(module (func (export "f") (result i32)
        (i32x4.extract_lane 0 (v128.const i32x4 1 2 3 4))))""")
    with pytest.raises(LoadError, match=r"0xfd \(SIMD\)"):
        meter.instrument(simd, fuel=1, memory_cap_pages=None)


@pytest.mark.parametrize("body", [b"\x41\x00\x1a", b"\x0b\x01\x0b", b"\x02\x40\x0b", b"\x41\xff"])
def test_malformed_bodies_are_refused(body: bytes) -> None:
    with pytest.raises(LoadError):
        meter.instrument(module_with_body(body), fuel=1, memory_cap_pages=None)


def check(wasm: bytes, memory_bytes: int = 1 << 20, max_module_bytes: int = 1 << 20) -> None:
    binary.check(wasm, max_module_bytes=max_module_bytes, memory_bytes=memory_bytes)


@pytest.mark.parametrize(("text", "message"), [
    ('(module (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) '
     '(result i32))))',
     r"import wasi_snapshot_preview1\.fd_write \(func\) is not allowed \(WASI is not available "
     r"to fragments\): a fragment may import only wssp\.log \(i32, i32, i32\) -> \(\) and "
     r"env\.abort"),
    ('(module (import "env" "now" (func (result i64))))',
     r"import env\.now \(func\) is not allowed: a fragment may import only wssp\.log"),
    ('(module (import "wssp" "log" (func (param i32))))',
     r"import wssp\.log has type \(i32\) -> \(\), expected \(i32, i32, i32\) -> \(\)"),
    ('(module (import "env" "abort" (global i32)))',
     r"import env\.abort must be a function \(i32, i32, i32, i32\) -> \(\), not a global"),
    ('(module (import "env" "memory" (memory 1)))',
     r"imported memory env\.memory is not allowed: a fragment must define its own memory"),
    ("(module (memory 17))",
     r"memory minimum of 17 pages \(1114112 bytes\) exceeds the cap of 16 pages"),
    ('(module (global (export "__wssp_fuel") i32 (i32.const 0)))',
     r"export name '__wssp_fuel' is reserved"),
])
def test_check_refuses_with_a_clear_message(text: str, message: str) -> None:
    with pytest.raises(LoadError, match=message):
        check(wat(text))


def test_check_refuses_non_modules_and_oversized_ones() -> None:
    with pytest.raises(LoadError, match=r"not a WebAssembly module: the bytes do not start"):
        check(b"hello world, not wasm")
    with pytest.raises(LoadError, match=r"not a WebAssembly module: unsupported binary version"):
        check(b"\0asm\x0d\0\x01\0")
    with pytest.raises(LoadError, match=r"not a WebAssembly module: section 1 runs past"):
        check(b"\0asm\x01\0\0\0\x01\x40\x00")
    with pytest.raises(LoadError, match=r"module is 2002 bytes, above the limit of 1000 bytes"):
        check(b"\0asm\x01\0\0\0" + section(0, b"\x01x" + bytes(1989)), max_module_bytes=1000)


def test_check_reports_imports_exports_and_signatures() -> None:
    info = binary.check(wat("""(module
        (import "wssp" "log" (func (param i32 i32 i32)))
        (import "env" "abort" (func (param i32 i32 i32 i32)))
        (memory (export "mem") 1 2)
        (global (export "wssp_abi_v1") i32 (i32.const 0))
        (func (export "wssp_filter") (param i32) (result i32) (i32.const 0)))"""),
        max_module_bytes=1 << 20, memory_bytes=1 << 20)
    assert [(i.module, i.name, i.kind) for i in info.imports] == [
        ("wssp", "log", "func"), ("env", "abort", "func")]
    assert info.exports == {"mem": "memory", "wssp_abi_v1": "global", "wssp_filter": "func"}
    assert info.export_sigs["wssp_filter"] == binary.FuncSig((binary.I32,), (binary.I32,))
    assert info.memory == (1, 2) and info.memory_export == "mem"
