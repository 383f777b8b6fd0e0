"""The wasmtime runtime behind :mod:`pyscheduler.wasm.vm`'s interface: native fuel, epoch
interruption for the wall clock, a store limiter for memory, and direct C-API calls (see the
docstring of :mod:`pyscheduler.wasm.vm`)."""

from __future__ import annotations

import ctypes
import importlib
import math
import threading
import time
import weakref
from collections.abc import Callable
from types import ModuleType
from typing import Any

from pyscheduler.wasm import binary
from pyscheduler.wasm.errors import CallError, LoadError
from pyscheduler.wasm.vm import (
    EPOCH_TICK_SECONDS,
    INSTANTIATE_TIMEOUT_SECONDS,
    WASM_STACK_BYTES,
    HostState,
    Instance,
    Limits,
    LogCallback,
    Memory,
    Module,
    Runtime,
    memory_view,
    signed,
    trap_cause,
)

__all__ = ["WasmtimeRuntime"]


# --------------------------------------------------------------------------------------------
# wasmtime


def _import_wasmtime() -> ModuleType:
    try:
        return importlib.import_module("wasmtime")
    except ImportError as e:
        raise LoadError(f"runtime wasmtime is not installed ({e}): pip install wasmtime") from None


class _EpochTicker:
    """One daemon thread incrementing the epoch of every live wasmtime engine, once per
    ``EPOCH_TICK_SECONDS`` of monotonic time (catching up when the thread slept longer)."""

    def __init__(self) -> None:
        self._engines: weakref.WeakSet[Any] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def add(self, engine: Any) -> None:
        with self._lock:
            self._engines.add(engine)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="wssp-wasm-epoch",
                                                daemon=True)
                self._thread.start()

    def _run(self) -> None:
        due = time.monotonic() + EPOCH_TICK_SECONDS
        while True:
            time.sleep(max(0.0, due - time.monotonic()))
            ticks = 0
            now = time.monotonic()
            while due <= now and ticks < 1000:
                due += EPOCH_TICK_SECONDS
                ticks += 1
            if due <= now:          # far behind (a suspended process): start afresh
                due = now + EPOCH_TICK_SECONDS
            with self._lock:
                engines = list(self._engines)
                if not engines:
                    self._thread = None
                    return
            for engine in engines:
                for _ in range(ticks):
                    engine.increment_epoch()
            del engines


_TICKER = _EpochTicker()


class _FastCall:
    """wasmtime's ctypes entry points for the direct call path, looked up once."""

    __slots__ = ("ffi", "set_fuel", "set_epoch_deadline", "func_call", "trap_type",
                 "trap_class", "raise_last_exception")

    def __init__(self, wasmtime: ModuleType, ffi: Any, func_module: Any, bindings: Any) -> None:
        self.ffi = ffi
        # The raw ctypes functions when the package has them (one Python frame less per call).
        self.set_fuel = getattr(bindings, "_wasmtime_context_set_fuel",
                                ffi.wasmtime_context_set_fuel)
        self.set_epoch_deadline = getattr(bindings, "_wasmtime_context_set_epoch_deadline",
                                          ffi.wasmtime_context_set_epoch_deadline)
        self.func_call = getattr(bindings, "_wasmtime_func_call", ffi.wasmtime_func_call)
        self.trap_type = ctypes.POINTER(ffi.wasm_trap_t)
        self.trap_class = wasmtime.Trap
        self.raise_last_exception = func_module.maybe_raise_last_exn


def _fast_call_bindings(wasmtime: ModuleType) -> _FastCall | None:
    """wasmtime's ctypes bindings, when this version of the package has the names the direct
    call path uses."""
    try:
        ffi = importlib.import_module("wasmtime._ffi")
        func_module = importlib.import_module("wasmtime._func")
        bindings = importlib.import_module("wasmtime._bindings")
    except ImportError:
        return None
    needed = ("wasmtime_func_call", "wasmtime_val_t", "WASMTIME_I32", "WASMTIME_I64",
              "wasmtime_context_set_fuel", "wasmtime_context_set_epoch_deadline", "wasm_trap_t")
    if not all(hasattr(ffi, n) for n in needed) \
            or not hasattr(func_module, "maybe_raise_last_exn") \
            or not hasattr(wasmtime.Store, "_context") \
            or not hasattr(wasmtime.Trap, "_from_ptr"):
        return None
    return _FastCall(wasmtime, ffi, func_module, bindings)


class WasmtimeRuntime(Runtime):
    """wasmtime: native fuel, epoch deadline, store memory limiter (one Engine per object)."""

    name = "wasmtime"

    def __init__(self) -> None:
        wt = _import_wasmtime()
        config = wt.Config()
        config.consume_fuel = True
        config.epoch_interruption = True
        config.max_wasm_stack = WASM_STACK_BYTES
        for feature in ("wasm_simd", "wasm_relaxed_simd", "wasm_threads", "wasm_multi_memory",
                        "wasm_memory64", "wasm_exceptions", "wasm_gc", "wasm_function_references",
                        "wasm_tail_call", "wasm_wide_arithmetic", "wasm_stack_switching",
                        "wasm_custom_page_sizes", "wasm_component_model"):
            if hasattr(wt.Config, feature):
                try:
                    setattr(config, feature, False)
                except Exception:   # a feature this build cannot toggle
                    pass
        self._wt = wt
        self._engine = wt.Engine(config)
        self._fast = _fast_call_bindings(wt)
        _TICKER.add(self._engine)

    def compile(self, wasm: bytes, limits: Limits) -> Module:
        info = binary.check(wasm, max_module_bytes=limits.max_module_bytes,
                           memory_bytes=limits.memory_bytes)
        try:
            module = self._wt.Module(self._engine, wasm)
        except self._wt.WasmtimeError as e:
            raise LoadError(f"invalid WebAssembly module: {trap_cause(str(e))}") from None
        return _WasmtimeModule(self, module, info, limits)


def _ticks(seconds: float) -> int:
    """Epoch ticks for a deadline ``seconds`` ahead (one more: the current tick is partial)."""
    return max(1, math.ceil(seconds / EPOCH_TICK_SECONDS)) + 1


class _WasmtimeModule(Module):
    def __init__(self, runtime: WasmtimeRuntime, module: Any, info: binary.ModuleInfo,
                 limits: Limits) -> None:
        super().__init__(runtime.name, info, limits)
        self._runtime = runtime
        self._module = module
        self.deadline_ticks = _ticks(limits.timeout_seconds)
        self.instantiate_ticks = _ticks(max(limits.timeout_seconds, INSTANTIATE_TIMEOUT_SECONDS))

    def instantiate(self, log: LogCallback | None = None) -> Instance:
        wt = self._runtime._wt
        store = wt.Store(self._runtime._engine)
        store.set_limits(memory_size=self.limits.memory_bytes,
                         table_elements=binary.MAX_TABLE_ELEMENTS)
        state = HostState(log)
        memory_name = self._info.memory_export
        i32 = wt.ValType.i32()

        def with_memory(fn: Callable[..., None]) -> Callable[..., None]:
            def host(caller: Any, *args: int) -> None:
                memory: Any = caller.get(memory_name) if memory_name is not None else None

                def read(ptr: int, length: int) -> bytes:
                    if ptr + length > memory.data_len(caller):
                        raise IndexError(ptr)
                    return bytes(memory.read(caller, ptr, ptr + length))
                state.read = read if memory is not None else None
                try:
                    fn(*args)
                finally:
                    state.read = None
            return host

        imports = []
        for imp in self._info.imports:
            if (imp.module, imp.name) == ("wssp", "log"):
                ty = wt.FuncType([i32] * 3, [])
                imports.append(wt.Func(store, ty, with_memory(state.host_log), access_caller=True))
            else:
                ty = wt.FuncType([i32] * 4, [])
                imports.append(wt.Func(store, ty, with_memory(state.host_abort),
                                       access_caller=True))
        store.set_fuel(self.limits.fuel)
        store.set_epoch_deadline(self.instantiate_ticks)
        try:
            instance = wt.Instance(store, self._module, imports)
        except Exception as e:
            error = state.take_error() or _wasmtime_error(wt, e, self)
            raise LoadError(f"instantiation failed: {error.message}") from None
        return _WasmtimeInstance(self, store, instance, state)


def _wasmtime_error(wt: ModuleType, e: BaseException, module: Module,
                    deadline: float | None = None) -> CallError:
    if isinstance(e, wt.Trap):
        code = e.trap_code
        if code == wt.TrapCode.OUT_OF_FUEL:
            return CallError("fuel", f"fuel exhausted: the call used more than "
                                     f"{module.limits.fuel} units")
        if code == wt.TrapCode.INTERRUPT:
            seconds = module.limits.timeout_seconds if deadline is None else deadline
            return CallError("timeout", f"deadline exceeded: the call ran longer than "
                                        f"{seconds:g} s")
        if code == getattr(wt.TrapCode, "ALLOCATION_TOO_LARGE", None):
            return CallError("memory", trap_cause(str(e)))
        message = trap_cause(str(e))
        frames = e.frames
        if frames:
            frame = frames[0]
            message += f" (in function {frame.func_name or frame.func_index})"
        return CallError("trap", message)
    if isinstance(e, wt.WasmtimeError):
        return CallError("trap", trap_cause(str(e)))
    return CallError("trap", f"{type(e).__name__}: {e}")


class _WasmtimeFunc:
    """A cached export: the function and, for the direct path, its argument buffers."""

    __slots__ = ("func", "kinds", "nresults", "params", "results", "pointer")

    def __init__(self, func: Any, sig: binary.FuncSig, ffi: Any | None) -> None:
        self.func = func
        self.kinds = tuple(32 if t == binary.I32 else 64 for t in sig.params)
        self.nresults = len(sig.results)
        if ffi is not None:
            self.params = (ffi.wasmtime_val_t * max(1, len(sig.params)))()
            for i, t in enumerate(sig.params):
                self.params[i].kind = (ffi.WASMTIME_I32 if t == binary.I32 else
                                       ffi.WASMTIME_I64).value
            self.results = (ffi.wasmtime_val_t * max(1, self.nresults))()
            self.pointer = ctypes.byref(func._func)


class _WasmtimeInstance(Instance):
    deadlines = True

    def __init__(self, module: _WasmtimeModule, store: Any, instance: Any,
                 state: HostState) -> None:
        super().__init__(module)
        self._deadline_ticks = module.deadline_ticks
        self._deadline_seconds = module.limits.timeout_seconds
        self._wmodule = module
        self._wt = module._runtime._wt
        self._fast = module._runtime._fast
        self._store = store
        self._instance = instance
        self._exports = instance.exports(store)
        self._state = state
        self._funcs: dict[str, _WasmtimeFunc] = {}
        self._context = store._context() if self._fast is not None else None
        self._memory_extern: Any = None
        self._view: Memory | None = None     # reused while the size is unchanged

    def _func(self, name: str, sig: binary.FuncSig) -> _WasmtimeFunc:
        entry = self._funcs.get(name)
        if entry is None:
            func = self._exports[name]
            entry = _WasmtimeFunc(func, sig, self._fast.ffi if self._fast else None)
            self._funcs[name] = entry
        return entry

    def bind(self, name: str) -> Callable[..., int]:
        if self._fast is None:
            return super().bind(name)
        entry = self._func(name, self._module._signature(name))
        arity = len(entry.kinds)

        def call(*args: int) -> int:
            if self.poisoned or len(args) != arity:
                return self.call(name, *args)   # the checks, and their errors
            try:
                return self._call_direct(entry, args)
            except Exception as e:
                raise self._failed(e) from None
        return call

    def _failed(self, e: BaseException) -> CallError:
        """The instance is done for: what went wrong, as a :class:`CallError`."""
        self.poisoned = True
        return self._state.take_error() or _wasmtime_error(self._wt, e, self._wmodule,
                                                            self._deadline_seconds)

    def call(self, name: str, *args: int) -> int:
        sig = self._check_call(name, args)
        entry = self._func(name, sig)
        store = self._store
        try:
            if self._fast is not None:
                return self._call_direct(entry, args)
            self._state.log_calls = 0
            store.set_fuel(self._wmodule.limits.fuel)
            store.set_epoch_deadline(self._deadline_ticks)
            values = [signed(a, bits) for a, bits in zip(args, entry.kinds)]
            result = entry.func(store, *values)
            return 0 if result is None else int(result)
        except Exception as e:
            raise self._failed(e) from None

    def _call_direct(self, entry: _WasmtimeFunc, args: tuple[int, ...]) -> int:
        fast: _FastCall = self._fast     # type: ignore[assignment]
        context = self._context
        self._state.log_calls = 0
        error = fast.set_fuel(context, self._wmodule.limits.fuel)
        if error:   # fuel is enabled in the engine: this does not happen
            raise self._wt.WasmtimeError._from_ptr(error)
        fast.set_epoch_deadline(context, self._deadline_ticks)
        params = entry.params
        for i, value in enumerate(args):
            if entry.kinds[i] == 32:
                params[i].of.i32 = value
            else:
                params[i].of.i64 = value
        results = entry.results
        trap = fast.trap_type()
        error = fast.func_call(context, entry.pointer, params, len(args), results,
                               entry.nresults, ctypes.byref(trap))
        if error or trap:
            # What wasmtime's own Func.__call__ does: an exception a host function raised
            # first, then the trap or error.
            fast.raise_last_exception()
            if error:
                raise self._wt.WasmtimeError._from_ptr(error)
            raise fast.trap_class._from_ptr(trap)
        if not entry.nresults:
            return 0
        result = results[0]
        return int(result.of.i32 if result.kind == fast.ffi.WASMTIME_I32.value else
                   result.of.i64)

    def shorten_deadline(self, seconds: float | None) -> None:
        limit = self._wmodule.limits.timeout_seconds
        if seconds is None or seconds >= limit:
            self._deadline_ticks, self._deadline_seconds = self._wmodule.deadline_ticks, limit
        else:
            self._deadline_ticks, self._deadline_seconds = _ticks(seconds), seconds

    def global_value(self, name: str) -> int | None:
        item = self._exports.get(name)
        if not isinstance(item, self._wt.Global):
            return None
        value = item.value(self._store)
        return value if isinstance(value, int) else None

    def _memory(self) -> Any:
        if self._memory_extern is None:
            name = self._wmodule._info.memory_export
            if name is None:
                raise LoadError("module exports no memory")
            self._memory_extern = self._exports[name]
        return self._memory_extern

    def memory(self) -> Memory:
        memory = self._memory()
        size = memory.data_len(self._store)
        if self._view is None or len(self._view) != size:     # only growing moves a memory
            address = ctypes.addressof(memory.data_ptr(self._store).contents) if size else 0
            self._view = memory_view(address, size, (self._store, self._instance))
        return self._view

    def memory_size(self) -> int:
        return int(self._memory().data_len(self._store))
