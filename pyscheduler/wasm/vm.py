"""One interface over two WebAssembly runtimes: compile a fragment, instantiate it, call it under
limits.

``get_runtime("wasmtime")`` (the default) or ``get_runtime("wasmer")`` returns a process-wide
:class:`Runtime`; ``Runtime.compile`` checks and compiles bytes into a :class:`Module`;
``Module.instantiate`` makes an :class:`Instance` whose ``call`` runs one export under the
:class:`Limits`. Both runtimes are imported lazily, so this module imports without either.

Load-time checks are the runtime-independent ones of :mod:`pyscheduler.wasm.meter` (size, magic,
import allowlist with exact signatures, memory defined by the module and its minimum within the
cap), so both runtimes refuse a module with the same :class:`LoadError` message before they see
it.

Per-call bounds (``fragments/ABI.md`` §7):

wasmtime
    Fuel is native (``Config.consume_fuel``; the store is refilled to ``Limits.fuel`` before
    every call). The wall-clock deadline uses epoch interruption: one daemon thread shared by
    every wasmtime runtime of the process increments each engine's epoch every
    ``EPOCH_TICK_SECONDS`` and every call sets its deadline ``timeout / tick + 1`` ticks ahead.
    The memory cap is the store's limiter (``memory.grow`` past it returns -1); wasm stack
    overflow is a clean trap (``Config.max_wasm_stack``, well within a thread's native stack).
    SIMD, threads and the other post-MVP proposals the ABI does not allow are disabled in the
    engine, so both runtimes accept the same modules. Calls go straight to wasmtime's C API
    through the package's own ctypes bindings when they are present (a few microseconds instead
    of tens), falling back to ``Func.__call__`` otherwise.

wasmer (1.1, Python <= 3.10 only)
    wasmer has neither fuel nor interruption, so :func:`meter.instrument` rewrites the module at
    load: a fuel counter charged at every function entry and loop header (bulk memory
    operations by their length, host calls at a high fixed cost), a call-depth counter, the
    memory maximum capped, and the start function turned into a call the host makes right
    after instantiation. **On wasmer the per-call bound is fuel only**: there is no preemption,
    ``Limits.timeout_seconds`` is not enforced, and time follows from fuel. Measured on a busy
    2-core x86-64 VM, metered code runs 1.2 to 2.8 million fuel units per millisecond
    (wasmtime's native fuel: 0.3 to 4 million), so the default fuel (5e8) stops an endless loop
    after 0.2 to 0.45 s. wasmer's Python objects may only be touched by the thread that created
    them, so each wasmer runtime owns one daemon thread that compiles, instantiates and calls;
    other threads hand it their work and wait, which adds about 25 microseconds per call (a
    call costs 30 to 60 us on wasmer, 7 to 20 us on wasmtime). ``Instance.memory()`` needs no
    such trip: the memory's place and size are refreshed with every call.

Failures: a trap, fuel or time exhaustion raises :class:`CallError` (``kind`` ``trap``,
``fuel``, ``timeout`` or ``memory``) and marks the instance ``poisoned``; the caller discards it
and instantiates afresh. An instance must not be called from two threads at once.

Host functions (ABI §2): ``wssp.log(level, ptr, len)`` passes ``(level, bytes)`` to the
instance's ``log`` callback (at most ``LOG_MAX_BYTES`` bytes; a range outside the guest memory
traps, and so does the call's ``LOG_CALLS_PER_CALL + 1``-th line: every line is a trip into
Python that needs the GIL, which a call logging without end would keep from the scheduler's
loop); ``env.abort(msg, file, line, column)`` traps the call, its message decoding
AssemblyScript's string arguments when it can.
"""

from __future__ import annotations

import abc
import ctypes
import importlib
import math
import queue
import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import numpy as np
import numpy.typing as npt

from pyscheduler.wasm import meter
from pyscheduler.wasm.errors import CallError, FragmentError, LoadError

__all__ = [
    "ALLOWED_IMPORTS",
    "EPOCH_TICK_SECONDS",
    "LOG_CALLS_PER_CALL",
    "LOG_MAX_BYTES",
    "Instance",
    "Limits",
    "LogCallback",
    "Module",
    "Runtime",
    "WasmerRuntime",
    "WasmtimeRuntime",
    "available_runtimes",
    "get_runtime",
]

ALLOWED_IMPORTS: frozenset[tuple[str, str]] = frozenset(meter.HOST_IMPORTS)
EPOCH_TICK_SECONDS = 0.005
# Instantiation (the module's start function, data segments) happens once per instance, off the
# scheduling thread except after a failed call. Fuel bounds a runaway start function exactly; the
# wall clock is only a backstop there, so it is not held to a call's tight deadline, which a
# busy machine can overrun before the guest runs a single instruction.
INSTANTIATE_TIMEOUT_SECONDS = 2.0
LOG_MAX_BYTES = 4096
# A call that logs more lines than this traps (far beyond what the log's rate limit writes).
LOG_CALLS_PER_CALL = 1000
WASM_STACK_BYTES = 512 * 1024

LogCallback = Callable[[int, bytes], None]
Memory = npt.NDArray[np.uint8]

_MASK32 = 0xFFFFFFFF
_POISONED = "instance discarded after a failed call"


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds of one fragment: memory per instance, fuel and wall clock per call, module size."""

    memory_bytes: int = 64 * 2**20      # cap on the instance's linear memory
    fuel: int = 500_000_000             # per call: instructions (approximately)
    timeout_seconds: float = 0.25       # per call wall clock (wasmtime: epoch interruption)
    max_module_bytes: int = 16 * 2**20  # larger modules are refused at compile

    def __post_init__(self) -> None:
        if self.memory_bytes < 0 or self.fuel <= 0 or self.timeout_seconds <= 0 \
                or self.max_module_bytes <= 0:
            raise ValueError(f"invalid limits: {self}")


class Runtime(abc.ABC):
    """A WebAssembly engine. ``compile`` is thread-safe."""

    name: str

    @abc.abstractmethod
    def compile(self, wasm: bytes, limits: Limits) -> Module:
        """Check and compile ``wasm``; raises :class:`LoadError`. CPU heavy: run it in a worker
        thread."""


class Module(abc.ABC):
    """A compiled fragment: its imports and exports, ready to instantiate."""

    runtime: str
    limits: Limits
    imports: tuple[tuple[str, str], ...]
    #: export name -> "func" | "memory" | "global" | "table"
    exports: dict[str, str]
    export_globals: dict[str, int]

    def __init__(self, runtime: str, info: meter.ModuleInfo, limits: Limits) -> None:
        self.runtime = runtime
        self.limits = limits
        self.imports = tuple((i.module, i.name) for i in info.imports)
        self.exports = dict(info.exports)
        #: exported global name -> its value type (``meter.I32``, ...)
        self.export_globals = dict(info.export_globals)
        self._info = info
        self._callable: dict[str, meter.FuncSig] = {}

    @abc.abstractmethod
    def instantiate(self, log: LogCallback | None = None) -> Instance:
        """A fresh instance (its start function, if any, runs under the call limits); raises
        :class:`LoadError`."""

    def _signature(self, name: str) -> meter.FuncSig:
        """The signature of export ``name``, which the host can call; else :class:`LoadError`."""
        sig = self._callable.get(name)
        if sig is not None:
            return sig
        kind = self.exports.get(name)
        if kind is None:
            raise LoadError(f"module has no export {name!r}")
        if kind != "func":
            raise LoadError(f"export {name!r} is a {kind}, not a function")
        sig = self._info.export_sigs[name]
        if any(t not in (meter.I32, meter.I64) for t in sig.params) or len(sig.results) > 1 \
                or any(t not in (meter.I32, meter.I64) for t in sig.results):
            raise LoadError(f"export {name!r} has type {meter.describe_sig(sig)}: the host calls "
                            "only functions with i32/i64 parameters and at most one i32/i64 "
                            "result")
        self._callable[name] = sig
        return sig


class Instance(abc.ABC):
    """An instantiated fragment. ``poisoned`` turns True after any :class:`CallError`."""

    poisoned: bool
    #: Whether :meth:`shorten_deadline` can bound a call below the module's deadline (wasmtime's
    #: epoch interruption can; wasmer's fuel-only bound cannot).
    deadlines: bool = False

    def __init__(self, module: Module) -> None:
        self.poisoned = False
        self._module = module

    def shorten_deadline(self, seconds: float | None) -> None:
        """Bound the next calls to ``seconds`` of wall clock (never more than the module's
        deadline); None restores the module's. A call stopped by it fails with
        :class:`CallError` kind ``timeout``, like one stopped by the module's deadline."""

    @abc.abstractmethod
    def call(self, name: str, *args: int) -> int:
        """Call export ``name``; returns its i32/i64 result (0 when it has none). Raises
        :class:`CallError` on a trap or an exhausted limit, :class:`LoadError` when the export
        is missing, not a function or called with the wrong number of arguments."""

    def bind(self, name: str) -> Callable[..., int]:
        """``call`` for one export, looked up once (for the calls made on every pod)."""
        return lambda *args: self.call(name, *args)

    @abc.abstractmethod
    def global_value(self, name: str) -> int | None:
        """Value of an exported integer global; None when absent (or not an integer)."""

    @abc.abstractmethod
    def memory(self) -> Memory:
        """A zero-copy ``uint8`` view of the current linear memory; writes are visible to the
        guest. Fetch it again after a call: the memory may have grown."""

    @abc.abstractmethod
    def memory_size(self) -> int:
        """Bytes of linear memory."""

    def _check_call(self, name: str, args: tuple[int, ...]) -> meter.FuncSig:
        if self.poisoned:
            raise CallError("trap", _POISONED)
        sig = self._module._signature(name)
        if len(args) != len(sig.params):
            raise LoadError(f"export {name!r} takes {len(sig.params)} parameters, called with "
                            f"{len(args)}")
        return sig


# --------------------------------------------------------------------------------------------
# Host functions, shared by both runtimes


class _GuestTrap(Exception):
    """Raised inside a host function to trap the call; the reason is in ``_HostState.error``."""


class _HostState:
    """What the host functions of one instance share: the log callback, the reason of a trap
    they raised, and how many log lines the current call wrote."""

    __slots__ = ("log", "error", "read", "log_calls")

    def __init__(self, log: LogCallback | None) -> None:
        self.log = log
        self.error: CallError | None = None
        self.log_calls = 0  # reset by every call from the host
        #: (ptr, len) -> bytes of guest memory, or None when no memory is reachable; set by the
        #: backend. Raises IndexError for a range outside the memory.
        self.read: Callable[[int, int], bytes] | None = None

    def trap(self, message: str) -> _GuestTrap:
        self.error = CallError("trap", message)
        return _GuestTrap(message)

    def take_error(self) -> CallError | None:
        error, self.error = self.error, None
        return error

    def host_log(self, level: int, ptr: int, length: int) -> None:
        ptr &= _MASK32
        length &= _MASK32
        self.log_calls += 1
        if self.log_calls > LOG_CALLS_PER_CALL:
            # Each line is a trip into Python and a turn at the GIL: a call logging without
            # end would keep the scheduler's loop waiting for the GIL until its deadline.
            raise self.trap(f"wssp.log called more than {LOG_CALLS_PER_CALL} times in one call")
        if self.read is None:
            return
        try:
            data = self.read(ptr, min(length, LOG_MAX_BYTES)) if length else b""
            if length > LOG_MAX_BYTES:
                self.read(ptr + length - 1, 1)      # the whole range must be in bounds
        except IndexError:
            raise self.trap(f"wssp.log: bytes [{ptr}, {ptr + length}) are outside the guest "
                            "memory") from None
        if self.log is not None:
            try:
                self.log(level, data)
            except Exception as e:
                raise self.trap(f"wssp.log: the host's log callback failed: "
                                f"{type(e).__name__}: {e}") from None

    def host_abort(self, msg: int, file: int, line: int, column: int) -> None:
        text = self._as_string(msg)
        where = self._as_string(file)
        raise self.trap(f"env.abort called by the guest: {text or f'message at {msg & _MASK32:#x}'}"
                        f" at {where or f'file at {file & _MASK32:#x}'}:{line}:{column}")

    def _as_string(self, ptr: int) -> str | None:
        """An AssemblyScript string (UTF-16, byte length in the u32 before it), if readable."""
        ptr &= _MASK32
        if self.read is None or ptr < 4:
            return None
        try:
            size = int.from_bytes(self.read(ptr - 4, 4), "little")
            if size > 2048 or size % 2:
                return None
            return self.read(ptr, size).decode("utf-16-le")
        except (IndexError, UnicodeDecodeError):
            return None


def _signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def _view(address: int, size: int, owner: object) -> Memory:
    """A numpy view of ``size`` bytes at ``address`` that keeps ``owner`` alive (which must not
    refer back to the view: numpy arrays take no part in cycle collection)."""
    if size == 0:
        return np.zeros(0, dtype=np.uint8)
    buffer = (ctypes.c_ubyte * size).from_address(address)
    setattr(buffer, "_wssp_owner", owner)     # ctypes arrays take attributes: a keep-alive
    view: Memory = np.frombuffer(memoryview(buffer), dtype=np.uint8)
    return view


def _cause(text: str) -> str:
    """The useful part of a runtime's error text: what follows "Caused by:", else its first
    line."""
    if "Caused by:" in text:
        lines = [line.strip() for line in text.split("Caused by:", 1)[1].splitlines()]
        text = "; ".join(line for line in lines if line)
    else:
        text = text.strip().split("\n", 1)[0]
    return text if len(text) <= 500 else text[:500] + "..."


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
        info = meter.check(wasm, max_module_bytes=limits.max_module_bytes,
                           memory_bytes=limits.memory_bytes)
        try:
            module = self._wt.Module(self._engine, wasm)
        except self._wt.WasmtimeError as e:
            raise LoadError(f"invalid WebAssembly module: {_cause(str(e))}") from None
        return _WasmtimeModule(self, module, info, limits)


def _ticks(seconds: float) -> int:
    """Epoch ticks for a deadline ``seconds`` ahead (one more: the current tick is partial)."""
    return max(1, math.ceil(seconds / EPOCH_TICK_SECONDS)) + 1


class _WasmtimeModule(Module):
    def __init__(self, runtime: WasmtimeRuntime, module: Any, info: meter.ModuleInfo,
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
                         table_elements=meter.MAX_TABLE_ELEMENTS)
        state = _HostState(log)
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
            return CallError("memory", _cause(str(e)))
        message = _cause(str(e))
        frames = e.frames
        if frames:
            frame = frames[0]
            message += f" (in function {frame.func_name or frame.func_index})"
        return CallError("trap", message)
    if isinstance(e, wt.WasmtimeError):
        return CallError("trap", _cause(str(e)))
    return CallError("trap", f"{type(e).__name__}: {e}")


class _WasmtimeFunc:
    """A cached export: the function and, for the direct path, its argument buffers."""

    __slots__ = ("func", "kinds", "nresults", "params", "results", "pointer")

    def __init__(self, func: Any, sig: meter.FuncSig, ffi: Any | None) -> None:
        self.func = func
        self.kinds = tuple(32 if t == meter.I32 else 64 for t in sig.params)
        self.nresults = len(sig.results)
        if ffi is not None:
            self.params = (ffi.wasmtime_val_t * max(1, len(sig.params)))()
            for i, t in enumerate(sig.params):
                self.params[i].kind = (ffi.WASMTIME_I32 if t == meter.I32 else
                                       ffi.WASMTIME_I64).value
            self.results = (ffi.wasmtime_val_t * max(1, self.nresults))()
            self.pointer = ctypes.byref(func._func)


class _WasmtimeInstance(Instance):
    deadlines = True

    def __init__(self, module: _WasmtimeModule, store: Any, instance: Any,
                 state: _HostState) -> None:
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

    def _func(self, name: str, sig: meter.FuncSig) -> _WasmtimeFunc:
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
            values = [_signed(a, bits) for a, bits in zip(args, entry.kinds)]
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
            self._view = _view(address, size, (self._store, self._instance))
        return self._view

    def memory_size(self) -> int:
        return int(self._memory().data_len(self._store))


# --------------------------------------------------------------------------------------------
# wasmer


def _import_wasmer() -> tuple[ModuleType, ModuleType]:
    try:
        wasmer = importlib.import_module("wasmer")
        cranelift = importlib.import_module("wasmer_compiler_cranelift")
    except ImportError as e:
        raise LoadError(f"runtime wasmer is not installed ({e}): pip install wasmer==1.1.0 "
                        "wasmer-compiler-cranelift==1.1.0 (wheels exist for Python <= 3.10 "
                        "only)") from None
    return wasmer, cranelift


class _Owner:
    """The thread that owns every wasmer object of one runtime. wasmer's Python objects may be
    used only by the thread that created them; other threads hand their work over here."""

    def __init__(self, name: str) -> None:
        self._jobs: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...], list[Any],
                                            Any] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, args=(self._jobs,), name=name,
                                        daemon=True)
        self._thread.start()

    def run(self, fn: Callable[..., Any], *args: Any) -> Any:
        if threading.get_ident() == self._thread.ident:
            return fn(*args)
        done = threading.Lock()
        done.acquire()
        box: list[Any] = [None, None]
        self._jobs.put((fn, args, box, done))
        done.acquire()
        if box[1] is not None:
            raise box[1]
        return box[0]

    def release(self, *objects: Any) -> None:
        """Drop ``objects`` on the owner thread (without waiting)."""
        self._jobs.put((_noop, objects, [None, None], None))

    def stop(self) -> None:
        self._jobs.put(None)

    @staticmethod
    def _serve(jobs: queue.SimpleQueue[tuple[Callable[..., Any], tuple[Any, ...], list[Any],
                                             Any] | None]) -> None:
        while True:
            job = jobs.get()
            if job is None:
                return
            fn, args, box, done = job
            del job
            try:
                box[0] = fn(*args)
            except FragmentError as e:
                # An expected outcome: its frames, holding wasmer objects, stay on this thread.
                e.__context__ = None
                box[1] = e.with_traceback(None)
            except BaseException as e:
                box[1] = e
            del fn, args
            if done is not None:
                done.release()
            del box, done


def _noop(*_: Any) -> None:
    pass


class WasmerRuntime(Runtime):
    """wasmer 1.1 with cranelift: the module is metered at load (see the module docstring)."""

    name = "wasmer"

    def __init__(self) -> None:
        self._wasmer, cranelift = _import_wasmer()
        self._owner = _Owner("wssp-wasmer")
        wasmer = self._wasmer
        self._store = self._owner.run(
            lambda: wasmer.Store(wasmer.engine.Universal(cranelift.Compiler)))

    def __del__(self) -> None:
        owner = getattr(self, "_owner", None)
        if owner is not None:
            owner.release(self.__dict__.pop("_store", None))
            owner.stop()

    def compile(self, wasm: bytes, limits: Limits) -> Module:
        wasm = bytes(wasm)      # wasmer refuses a bytearray or memoryview
        info = meter.check(wasm, max_module_bytes=limits.max_module_bytes,
                           memory_bytes=limits.memory_bytes)
        metered = meter.instrument(wasm, info, fuel=limits.fuel,
                                   memory_cap_pages=limits.memory_bytes // meter.PAGE_SIZE)
        handle = self._owner.run(self._compile, wasm, metered)
        return _WasmerModule(self, handle, info, limits)

    def _compile(self, original: bytes, metered: bytes) -> Any:   # on the owner thread
        wasmer = self._wasmer
        if not wasmer.Module.validate(self._store, original):
            try:
                wasmer.Module(self._store, original)
                reason = "rejected by wasmer's validator"
            except Exception as e:
                reason = _cause(str(e))
            raise LoadError(f"invalid WebAssembly module: {reason}")
        try:
            return wasmer.Module(self._store, metered)
        except Exception as e:
            raise LoadError(f"the metered module does not compile ({_cause(str(e))}): a bug "
                            "of pyscheduler.wasm.meter") from None


class _WasmerModule(Module):
    def __init__(self, runtime: WasmerRuntime, module: Any, info: meter.ModuleInfo,
                 limits: Limits) -> None:
        super().__init__(runtime.name, info, limits)
        self._runtime = runtime
        self._owner = runtime._owner
        self._module = module

    def __del__(self) -> None:
        owner = getattr(self, "_owner", None)
        if owner is not None:
            owner.release(self.__dict__.pop("_module", None))

    def instantiate(self, log: LogCallback | None = None) -> Instance:
        state = _HostState(log)
        handle = self._owner.run(self._instantiate, state)
        return _WasmerInstance(self, handle, self._owner.run(handle.memory_info))

    def _instantiate(self, state: _HostState) -> _WasmerHandle:   # on the owner thread
        wasmer = self._runtime._wasmer
        store = self._runtime._store
        i32 = wasmer.Type.I32
        imports: dict[str, dict[str, Any]] = {}
        for imp in self._info.imports:
            if (imp.module, imp.name) == ("wssp", "log"):
                fn = wasmer.Function(store, state.host_log, wasmer.FunctionType([i32] * 3, []))
            else:
                fn = wasmer.Function(store, state.host_abort, wasmer.FunctionType([i32] * 4, []))
            imports.setdefault(imp.module, {})[imp.name] = fn
        try:
            instance = wasmer.Instance(self._module, imports)
        except Exception as e:
            error = state.take_error()
            message = error.message if error is not None else _cause(str(e))
            raise LoadError(f"instantiation failed: {message}") from None
        handle = _WasmerHandle(instance, self._info.memory_export, self.limits, state)
        if handle.memory is not None:
            memory = handle.memory

            def read(ptr: int, length: int) -> bytes:
                if ptr + length > memory.data_size:
                    raise IndexError(ptr)
                with memoryview(memory.buffer) as view:
                    return view[ptr:ptr + length].tobytes()
            state.read = read
        if any(sid == 8 for sid, _, _ in self._info.sections):   # the deferred start function
            try:
                handle.invoke(getattr(instance.exports, meter.START_EXPORT), [])
            except CallError as e:
                raise LoadError(f"instantiation failed: {e.message}") from None
        return handle


class _WasmerHandle:
    """The wasmer objects of one instance; touched only on the owner thread."""

    def __init__(self, instance: Any, memory_name: str | None, limits: Limits,
                 state: _HostState) -> None:
        exports = instance.exports
        self.instance = instance
        self.limits = limits
        self.state = state
        self.fuel = getattr(exports, meter.FUEL_EXPORT)
        self.depth = getattr(exports, meter.DEPTH_EXPORT)
        self.memory = getattr(exports, memory_name) if memory_name is not None else None
        self.funcs: dict[str, Any] = {}
        self._info: tuple[int, int] | None = None

    def memory_info(self) -> tuple[int, int] | None:
        """(address, size) of the linear memory, None without an exported one. The address is
        looked up again only when the size changed (only growing can move a memory)."""
        memory = self.memory
        if memory is None:
            return None
        size = int(memory.data_size)
        if self._info is not None and self._info[1] == size:
            return self._info
        address = 0
        if size:
            with memoryview(memory.buffer) as view:
                anchor = ctypes.c_ubyte.from_buffer(view)
                address = ctypes.addressof(anchor)
                del anchor
        self._info = (address, size)
        return self._info

    def invoke(self, func: Any, args: list[int]) -> int:
        """Call ``func`` under the limits; :class:`CallError` on failure."""
        self.fuel.value = self.limits.fuel
        self.depth.value = 0
        self.state.log_calls = 0
        try:
            result = func(*args)
        except Exception as e:
            raise self.error(e) from None
        return 0 if result is None else int(result)

    def error(self, e: Exception) -> CallError:
        """What made a call fail: a host function's trap, the fuel or depth counter, else the
        runtime's trap text."""
        error = self.state.take_error()
        if error is not None:
            return error
        if self.fuel.value < 0:
            return CallError("fuel", f"fuel exhausted: the call used more than "
                                     f"{self.limits.fuel} units")
        if self.depth.value > meter.MAX_CALL_DEPTH:
            return CallError("trap", f"call stack exhausted: call depth above "
                                     f"{meter.MAX_CALL_DEPTH}")
        text = _cause(str(e))
        if text.startswith("RuntimeError: "):
            text = text[len("RuntimeError: "):]
        if not isinstance(e, RuntimeError):
            text = f"{type(e).__name__}: {text}"
        return CallError("trap", text)


class _WasmerResources:
    """The wasmer objects of one instance, shared by the instance and its memory views; when the
    last of them lets go, the objects are handed to the owner thread to be dropped there."""

    __slots__ = ("owner", "handle")

    def __init__(self, owner: _Owner, handle: _WasmerHandle) -> None:
        self.owner = owner
        self.handle = handle

    def __del__(self) -> None:
        self.owner.release(self.handle)


class _WasmerInstance(Instance):
    def __init__(self, module: _WasmerModule, handle: _WasmerHandle,
                 memory_info: tuple[int, int] | None) -> None:
        super().__init__(module)
        self._wmodule = module
        self._owner = module._owner
        self._resources = _WasmerResources(module._owner, handle)
        # The memory's place and size, refreshed on the owner thread after every call, and
        # the view over it: memory() needs no trip to the owner thread.
        self._memory_info = memory_info
        self._view: Memory | None = None

    @property
    def _handle(self) -> _WasmerHandle:
        return self._resources.handle

    def call(self, name: str, *args: int) -> int:
        sig = self._check_call(name, args)
        values = [_signed(a, 32 if t == meter.I32 else 64) for a, t in zip(args, sig.params)]
        self._view = None
        try:
            result, self._memory_info = self._owner.run(self._call, name, values)
        except CallError:
            self.poisoned = True
            self._memory_info = self._owner.run(self._handle.memory_info)
            raise
        return int(result)

    def _call(self, name: str, args: list[int]) -> tuple[int, tuple[int, int] | None]:
        # on the owner thread
        handle = self._handle
        func = handle.funcs.get(name)
        if func is None:
            func = handle.funcs[name] = getattr(handle.instance.exports, name)
        return handle.invoke(func, args), handle.memory_info()

    def global_value(self, name: str) -> int | None:
        def read() -> int | None:
            try:
                item = getattr(self._handle.instance.exports, name)
            except LookupError:
                return None
            if not isinstance(item, self._wmodule._runtime._wasmer.Global):
                return None
            value = item.value
            return value if isinstance(value, int) else None
        result: int | None = self._owner.run(read)
        return result

    def memory(self) -> Memory:
        if self._view is None:
            if self._memory_info is None:
                raise LoadError("module exports no memory")
            self._view = _view(*self._memory_info, self._resources)
        return self._view

    def memory_size(self) -> int:
        if self._memory_info is None:
            raise LoadError("module exports no memory")
        return self._memory_info[1]


# --------------------------------------------------------------------------------------------

_FACTORIES: dict[str, Callable[[], Runtime]] = {"wasmtime": WasmtimeRuntime,
                                                "wasmer": WasmerRuntime}
_RUNTIMES: dict[str, Runtime] = {}
_RUNTIMES_LOCK = threading.Lock()


def get_runtime(name: str = "wasmtime") -> Runtime:
    """The process-wide runtime ``name``; :class:`LoadError` when unknown or not installed."""
    factory = _FACTORIES.get(name)
    if factory is None:
        raise LoadError(f"unknown WebAssembly runtime {name!r}: choose one of "
                        f"{', '.join(_FACTORIES)}")
    with _RUNTIMES_LOCK:
        runtime = _RUNTIMES.get(name)
        if runtime is None:
            runtime = _RUNTIMES[name] = factory()
        return runtime


def available_runtimes() -> list[str]:
    """The runtimes whose packages import here."""
    names = []
    for name, packages in (("wasmtime", ("wasmtime",)),
                           ("wasmer", ("wasmer", "wasmer_compiler_cranelift"))):
        try:
            for package in packages:
                importlib.import_module(package)
        except ImportError:
            continue
        names.append(name)
    return names
