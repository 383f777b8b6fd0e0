"""The runtime layer (pyscheduler.wasm.vm) on real runtimes: every test runs on each runtime
that imports here (wasmtime on any Python; wasmer 1.1 on Python <= 3.10, see
hack/test_wasmer.sh)."""

from __future__ import annotations

import gc
import importlib.util
import shutil
import subprocess
import tempfile
import threading
import time
import weakref
from pathlib import Path

import numpy as np
import pytest

from pyscheduler.wasm import binary, meter, vm
from pyscheduler.wasm.errors import CallError, LoadError

PACKAGES = {"wasmtime": ("wasmtime",), "wasmer": ("wasmer", "wasmer_compiler_cranelift")}


def wat(text: str) -> bytes:
    """WebAssembly text to bytes: wasmtime's parser when it imports, else wabt's wat2wasm."""
    try:
        import wasmtime
    except ImportError:
        binary = shutil.which("wat2wasm")
        if binary is None:
            pytest.skip("no WebAssembly text parser (pip install wasmtime, or install wabt)")
        with tempfile.TemporaryDirectory() as tmp:
            src, out = Path(tmp) / "m.wat", Path(tmp) / "m.wasm"
            src.write_text(text)
            subprocess.run([binary, str(src), "-o", str(out)], check=True)
            return out.read_bytes()
    return bytes(wasmtime.wat2wasm(text))


@pytest.fixture(params=sorted(PACKAGES))
def runtime(request: pytest.FixtureRequest) -> vm.Runtime:
    for package in PACKAGES[request.param]:
        pytest.importorskip(package)
    return vm.get_runtime(request.param)


SMALL = vm.Limits(memory_bytes=4 * binary.PAGE_SIZE, fuel=2_000_000, timeout_seconds=5)

GUEST = wat(r"""(module
  (import "wssp" "log" (func $log (param i32 i32 i32)))
  (import "env" "abort" (func $abort (param i32 i32 i32 i32)))
  (memory (export "memory") 1)
  (global (export "answer") i32 (i32.const 42))
  (global (export "wide") (mut i64) (i64.const -5000000000))
  (global (export "ratio") f64 (f64.const 0.5))
  (data (i32.const 16) "hello, host")
  ;; an AssemblyScript string: byte length, then UTF-16 text
  (data (i32.const 60) "\0a\00\00\00o\00o\00p\00s\00!\00")
  (data (i32.const 80) "\0e\00\00\00g\00u\00e\00s\00t\00.\00t\00")
  (func (export "nop"))
  (func (export "add") (param i32 i32) (result i32) (i32.add (local.get 0) (local.get 1)))
  (func (export "add64") (param i64 i64) (result i64) (i64.add (local.get 0) (local.get 1)))
  (func (export "load") (param i32) (result i32) (i32.load8_u (local.get 0)))
  (func (export "store") (param i32 i32) (i32.store8 (local.get 0) (local.get 1)))
  (func (export "sum") (param i32 i32) (result i32) (local $acc i32)
    (block $done
      (loop $next
        (br_if $done (i32.eqz (local.get 1)))
        (local.set $acc (i32.add (local.get $acc) (i32.load8_u (local.get 0))))
        (local.set 0 (i32.add (local.get 0) (i32.const 1)))
        (local.set 1 (i32.sub (local.get 1) (i32.const 1)))
        (br $next)))
    (local.get $acc))
  (func (export "spin") (loop (br 0)))
  (func $down (export "down") (param i32) (result i32)
    (i32.add (call $down (i32.add (local.get 0) (i32.const 1))) (i32.const 1)))
  (func (export "boom") (unreachable))
  (func (export "divide") (param i32 i32) (result i32) (i32.div_s (local.get 0) (local.get 1)))
  (func (export "grow") (param i32) (result i32) (memory.grow (local.get 0)))
  (func (export "bomb") (result i32) (local $pages i32)
    (block $full
      (loop $more
        (br_if $full (i32.eq (memory.grow (i32.const 1)) (i32.const -1)))
        (local.set $pages (i32.add (local.get $pages) (i32.const 1)))
        (br $more)))
    (local.get $pages))
  (func (export "say") (param i32 i32 i32) (call $log (local.get 0) (local.get 1) (local.get 2)))
  (func (export "hello") (call $log (i32.const 1) (i32.const 16) (i32.const 11)))
  (func (export "abort") (call $abort (i32.const 0) (i32.const 0) (i32.const 12) (i32.const 3)))
  (func (export "abort_as")
    (call $abort (i32.const 64) (i32.const 84) (i32.const 7) (i32.const 9)))
  (func (export "float") (param f64) (result f64) (local.get 0))
  (func (export "pair") (result i32 i32) (i32.const 1) (i32.const 2))
)""")


def test_compile_reports_imports_and_exports(runtime: vm.Runtime) -> None:
    module = runtime.compile(GUEST, SMALL)
    assert module.runtime == runtime.name
    assert module.imports == (("wssp", "log"), ("env", "abort"))
    assert module.exports["memory"] == "memory"
    assert module.exports["add"] == "func"
    assert module.exports["answer"] == "global"
    assert not any(name.startswith("__wssp") for name in module.exports)


def test_add_and_integer_arguments(runtime: vm.Runtime) -> None:
    instance = runtime.compile(GUEST, SMALL).instantiate()
    assert instance.call("add", 2, 3) == 5
    assert instance.call("add", 2**31 - 1, 1) == -(2**31)          # i32 wraps, results signed
    assert instance.call("add", 0xFFFFFFFF, 0) == -1                 # unsigned in, signed out
    assert instance.call("add64", 2**40, -1) == 2**40 - 1
    assert instance.call("nop") == 0


def test_globals(runtime: vm.Runtime) -> None:
    instance = runtime.compile(GUEST, SMALL).instantiate()
    assert instance.global_value("answer") == 42
    assert instance.global_value("wide") == -5_000_000_000
    assert instance.global_value("ratio") is None      # not an integer
    assert instance.global_value("add") is None        # a function
    assert instance.global_value("missing") is None


def test_memory_view_is_shared_with_the_guest(runtime: vm.Runtime) -> None:
    instance = runtime.compile(GUEST, SMALL).instantiate()
    assert instance.memory_size() == binary.PAGE_SIZE
    mem = instance.memory()
    assert mem.dtype == np.uint8 and mem.shape == (binary.PAGE_SIZE,)
    assert bytes(mem[16:27]) == b"hello, host"
    mem[1000:1004] = [1, 2, 3, 250]                  # host writes, guest reads
    assert instance.call("load", 1003) == 250
    assert instance.call("sum", 1000, 4) == 256
    instance.call("store", 2000, 77)                 # guest writes, host reads
    assert instance.memory()[2000] == 77
    mem = instance.memory()
    mem[5000:5008].view(np.int64)[0] = -2            # typed views of the same bytes
    assert instance.call("load", 5000) == 0xFE
    assert instance.call("grow", 1) == 1             # grown: fetch the view again
    assert instance.memory_size() == 2 * binary.PAGE_SIZE
    mem = instance.memory()
    assert mem.shape == (2 * binary.PAGE_SIZE,) and mem[2000] == 77
    mem[-1] = 9
    assert instance.call("load", 2 * binary.PAGE_SIZE - 1) == 9


def test_an_endless_loop_runs_out_of_fuel(runtime: vm.Runtime) -> None:
    instance = runtime.compile(GUEST, SMALL).instantiate()
    start = time.perf_counter()
    with pytest.raises(CallError) as failure:
        instance.call("spin")
    assert failure.value.kind == "fuel"
    assert "fuel" in failure.value.message
    assert time.perf_counter() - start < 1.0
    assert instance.poisoned


def test_default_limits_bound_an_endless_loop_well_under_a_second(runtime: vm.Runtime) -> None:
    instance = runtime.compile(GUEST, vm.Limits()).instantiate()
    start = time.perf_counter()
    with pytest.raises(CallError) as failure:
        instance.call("spin")
    elapsed = time.perf_counter() - start
    assert failure.value.kind in ("fuel", "timeout")
    assert elapsed < 1.0, elapsed


SLOW_LOOPS = wat("""(module
  (import "wssp" "log" (func $log (param i32 i32 i32)))
  (memory (export "memory") 16)
  (func (export "fill_forever")
    (loop (memory.fill (i32.const 0) (i32.const 7) (i32.const 1048576)) (br 0)))
  (func (export "log_forever")
    (loop (call $log (i32.const 0) (i32.const 0) (i32.const 4)) (br 0))))""")


@pytest.mark.parametrize("export", ["fill_forever", "log_forever"])
def test_default_limits_bound_loops_of_slow_instructions(runtime: vm.Runtime,
                                                         export: str) -> None:
    """Bulk memory operations and host calls take time an instruction count does not see."""
    instance = runtime.compile(SLOW_LOOPS, vm.Limits()).instantiate(lambda level, text: None)
    start = time.perf_counter()
    with pytest.raises(CallError) as failure:
        instance.call(export)
    elapsed = time.perf_counter() - start
    if export == "log_forever":  # the per-call line budget ends it first
        assert failure.value.kind == "trap"
        assert failure.value.message == (f"wssp.log called more than {vm.LOG_CALLS_PER_CALL} "
                                         "times in one call")
    else:
        assert failure.value.kind in ("fuel", "timeout")
    assert elapsed < 1.5, elapsed


def test_wall_clock_deadline_on_wasmtime() -> None:
    pytest.importorskip("wasmtime")
    limits = vm.Limits(fuel=10**15, timeout_seconds=0.05)
    instance = vm.get_runtime("wasmtime").compile(GUEST, limits).instantiate()
    start = time.perf_counter()
    with pytest.raises(CallError) as failure:
        instance.call("spin")
    elapsed = time.perf_counter() - start
    assert failure.value.kind == "timeout"
    assert "0.05 s" in failure.value.message
    assert 0.04 <= elapsed < 0.5, elapsed
    # the deadline is per call: a fresh instance runs normally right after
    fresh = vm.get_runtime("wasmtime").compile(GUEST, limits).instantiate()
    assert fresh.call("sum", 16, 5) == sum(b"hello")


def test_a_memory_bomb_stops_at_the_cap(runtime: vm.Runtime) -> None:
    instance = runtime.compile(GUEST, SMALL).instantiate()
    assert instance.call("bomb") == 3               # 1 page to begin with, cap 4
    assert instance.memory_size() == 4 * binary.PAGE_SIZE
    assert instance.call("grow", 1) == -1
    assert instance.call("grow", 0) == 4
    assert not instance.poisoned


def test_deep_recursion_traps_cleanly(runtime: vm.Runtime) -> None:
    module = runtime.compile(GUEST, vm.Limits(fuel=10**9, timeout_seconds=5))
    instance = module.instantiate()
    start = time.perf_counter()
    with pytest.raises(CallError) as failure:
        instance.call("down", 0)
    assert failure.value.kind == "trap"
    assert "stack" in failure.value.message
    assert time.perf_counter() - start < 1.0
    assert module.instantiate().call("add", 1, 1) == 2


def test_a_trap_poisons_the_instance_and_a_fresh_one_works(runtime: vm.Runtime) -> None:
    module = runtime.compile(GUEST, SMALL)
    instance = module.instantiate()
    with pytest.raises(CallError) as failure:
        instance.call("boom")
    assert failure.value.kind == "trap"
    assert "unreachable" in failure.value.message
    assert instance.poisoned
    with pytest.raises(CallError, match="instance discarded after a failed call") as again:
        instance.call("add", 1, 2)
    assert again.value.kind == "trap"
    fresh = module.instantiate()
    assert not fresh.poisoned
    assert fresh.call("add", 1, 2) == 3
    with pytest.raises(CallError, match="divide by zero|division by zero") as division:
        fresh.call("divide", 1, 0)
    assert division.value.kind == "trap"


def test_env_abort_traps(runtime: vm.Runtime) -> None:
    module = runtime.compile(GUEST, SMALL)
    with pytest.raises(CallError, match=r"env\.abort called by the guest.*:12:3") as failure:
        module.instantiate().call("abort")
    assert failure.value.kind == "trap"
    with pytest.raises(CallError, match=r"env\.abort called by the guest: oops! at guest\.t:7:9"):
        module.instantiate().call("abort_as")


def test_wssp_log_delivers_bytes(runtime: vm.Runtime) -> None:
    module = runtime.compile(GUEST, SMALL)
    lines: list[tuple[int, bytes]] = []
    instance = module.instantiate(lambda level, text: lines.append((level, text)))
    instance.call("hello")
    instance.call("say", 3, 16, 5)
    instance.call("say", 0, 0, 0)
    assert lines == [(1, b"hello, host"), (3, b"hello"), (0, b"")]
    lines.clear()
    instance.call("say", 2, 0, vm.LOG_MAX_BYTES + 10)         # long lines are cut
    assert len(lines[0][1]) == vm.LOG_MAX_BYTES
    module.instantiate().call("hello")                        # no callback: ignored
    with pytest.raises(CallError, match=r"wssp\.log: bytes \[65530, 65630\) are outside") as bad:
        instance.call("say", 1, 65530, 100)
    assert bad.value.kind == "trap"

    def failing(level: int, text: bytes) -> None:
        raise RuntimeError("log sink down")
    with pytest.raises(CallError, match="log sink down"):
        module.instantiate(failing).call("hello")


def test_exports_the_host_cannot_call(runtime: vm.Runtime) -> None:
    instance = runtime.compile(GUEST, SMALL).instantiate()
    with pytest.raises(LoadError, match="module has no export 'missing'"):
        instance.call("missing")
    with pytest.raises(LoadError, match="export 'answer' is a global, not a function"):
        instance.call("answer")
    with pytest.raises(LoadError, match="export 'add' takes 2 parameters, called with 1"):
        instance.call("add", 1)
    with pytest.raises(LoadError, match=r"export 'float' has type \(f64\) -> \(f64\)"):
        instance.call("float", 1)
    with pytest.raises(LoadError, match=r"export 'pair' has type \(\) -> \(i32, i32\)"):
        instance.call("pair")
    assert not instance.poisoned
    assert instance.call("add", 1, 1) == 2


@pytest.mark.parametrize(("text", "message"), [
    ('(module (import "wasi_snapshot_preview1" "fd_write" (func (param i32 i32 i32 i32) '
     '(result i32))) (memory (export "memory") 1))',
     r"import wasi_snapshot_preview1\.fd_write \(func\) is not allowed .*: a fragment may import "
     r"only wssp\.log .* and env\.abort"),
    ('(module (import "env" "random" (func (result i32))))',
     r"import env\.random \(func\) is not allowed"),
    ('(module (import "wssp" "log" (func (param i64 i32 i32))))',
     r"import wssp\.log has type \(i64, i32, i32\) -> \(\), expected \(i32, i32, i32\) -> \(\)"),
    ('(module (import "env" "memory" (memory 1)))',
     r"imported memory env\.memory is not allowed"),
    ("(module (memory 5))", r"memory minimum of 5 pages \(327680 bytes\) exceeds the cap of 4 "
                            r"pages \(262144 bytes\)"),
])
def test_modules_refused_at_load(runtime: vm.Runtime, text: str, message: str) -> None:
    with pytest.raises(LoadError, match=message):
        runtime.compile(wat(text), SMALL)


def test_bytes_that_are_not_a_module(runtime: vm.Runtime) -> None:
    with pytest.raises(LoadError, match=r"^not a WebAssembly module: the bytes do not start"):
        runtime.compile(b"(module)", SMALL)
    with pytest.raises(LoadError, match=r"^not a WebAssembly module"):
        runtime.compile(b"\0asm\x01\0\0\0\x0a\xff", SMALL)
    # well formed, but the body of a function () -> () leaves an i32 on the stack
    code = b"\x00\x41\x00\x0b"
    ill_typed = (b"\0asm\x01\0\0\0" + b"\x01\x04\x01\x60\x00\x00" + b"\x03\x02\x01\x00" +
                 b"\x0a" + bytes((len(code) + 2, 1, len(code))) + code)
    with pytest.raises(LoadError, match=r"^invalid WebAssembly module: .+"):
        runtime.compile(ill_typed, SMALL)


def test_an_oversized_module(runtime: vm.Runtime) -> None:
    limits = vm.Limits(max_module_bytes=len(GUEST) - 1)
    with pytest.raises(LoadError, match=rf"module is {len(GUEST)} bytes, above the limit of "
                                        rf"{len(GUEST) - 1} bytes"):
        runtime.compile(GUEST, limits)


def test_a_failing_start_function_fails_the_instantiation(runtime: vm.Runtime) -> None:
    module = runtime.compile(wat("""(module (func $s (loop (br 0))) (start $s))"""), SMALL)
    with pytest.raises(LoadError, match="instantiation failed: fuel"):
        module.instantiate()
    module = runtime.compile(wat("""(module (func $s unreachable) (start $s))"""), SMALL)
    with pytest.raises(LoadError, match="instantiation failed: .*unreachable"):
        module.instantiate()


def test_instances_are_independent(runtime: vm.Runtime) -> None:
    module = runtime.compile(GUEST, SMALL)
    a, b = module.instantiate(), module.instantiate()
    a.memory()[3000] = 5
    assert a.call("load", 3000) == 5
    assert b.call("load", 3000) == 0


def test_discarded_instances_are_freed_and_views_outlive_them(runtime: vm.Runtime) -> None:
    module = runtime.compile(GUEST, SMALL)
    instance = module.instantiate()
    instance.memory()
    instance.call("nop")
    instance.memory()
    ref = weakref.ref(instance)
    del instance
    gc.collect()
    assert ref() is None
    instance = module.instantiate()
    view = instance.memory()
    del instance
    gc.collect()
    assert bytes(view[16:21]) == b"hello"       # the memory lives as long as a view of it
    view[16] = 0


def test_compile_call_and_view_from_other_threads(runtime: vm.Runtime) -> None:
    results: dict[str, object] = {}

    def compile_and_instantiate() -> None:
        results["instance"] = runtime.compile(GUEST, SMALL).instantiate()
    worker = threading.Thread(target=compile_and_instantiate)
    worker.start()
    worker.join()
    instance = results["instance"]
    assert isinstance(instance, vm.Instance)
    instance.memory()[100] = 33
    assert instance.call("load", 100) == 33

    def use() -> None:
        results["sum"] = instance.call("add", 20, 22)
        results["byte"] = int(instance.memory()[100])
    worker = threading.Thread(target=use)
    worker.start()
    worker.join()
    assert results["sum"] == 42 and results["byte"] == 33


def test_reserved_export_names_are_refused(runtime: vm.Runtime) -> None:
    """The metering globals' names belong to the host, on either runtime."""
    rewritten = meter.instrument(GUEST, fuel=10**9, memory_cap_pages=4)
    with pytest.raises(LoadError, match="export name '__wssp_fuel' is reserved"):
        runtime.compile(rewritten, SMALL)


def test_runtime_selection() -> None:
    with pytest.raises(LoadError, match=r"unknown WebAssembly runtime 'v8': choose one of "
                                        r"wasmtime, wasmer"):
        vm.get_runtime("v8")
    for name in vm.available_runtimes():
        assert vm.get_runtime(name) is vm.get_runtime(name)
        assert vm.get_runtime(name).name == name
    if importlib.util.find_spec("wasmer") is None:
        assert "wasmer" not in vm.available_runtimes()
        with pytest.raises(LoadError, match=r"pip install wasmer==1\.1\.0 "
                                            r"wasmer-compiler-cranelift==1\.1\.0"):
            vm.get_runtime("wasmer")
    assert vm.ALLOWED_IMPORTS == {("wssp", "log"), ("env", "abort")}


def test_wasmtime_without_the_direct_call_path() -> None:
    """The public-API fallback used when wasmtime's ctypes bindings change shape."""
    pytest.importorskip("wasmtime")
    from pyscheduler.wasm.vm_wasmtime import WasmtimeRuntime
    runtime = WasmtimeRuntime()
    runtime._fast = None
    module = runtime.compile(GUEST, SMALL)
    instance = module.instantiate()
    assert instance.call("add", 0xFFFFFFFF, 2) == 1
    assert instance.call("add64", -(2**63), -1) == 2**63 - 1
    assert instance.call("nop") == 0
    with pytest.raises(CallError) as failure:
        instance.call("spin")
    assert failure.value.kind == "fuel"
    with pytest.raises(CallError, match=r"env\.abort"):
        module.instantiate().call("abort")
