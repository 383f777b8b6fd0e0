"""One interface over two WebAssembly runtimes: compile a fragment, instantiate it, call it under
limits.

``get_runtime("wasmtime")`` (the default) or ``get_runtime("wasmer")`` returns a process-wide
:class:`Runtime`; ``Runtime.compile`` checks and compiles bytes into a :class:`Module`;
``Module.instantiate`` makes an :class:`Instance` whose ``call`` runs one export under the
:class:`Limits`. Both runtimes are imported lazily, so this module imports without either;
each lives in a module of its own (:mod:`pyscheduler.wasm.vm_wasmtime`, :mod:`pyscheduler.wasm.vm_wasmer`),
this one holds what they share (limits, the host functions, the interface).

Load-time checks are the runtime-independent ones of :mod:`pyscheduler.wasm.binary` (size, magic,
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
import threading
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from pyscheduler.wasm import binary
from pyscheduler.wasm.errors import CallError, LoadError

__all__ = [
    "HostState",
    "memory_view",
    "signed",
    "trap_cause",
    "ALLOWED_IMPORTS",
    "EPOCH_TICK_SECONDS",
    "LOG_CALLS_PER_CALL",
    "LOG_MAX_BYTES",
    "Instance",
    "Limits",
    "LogCallback",
    "Module",
    "Runtime",
    "available_runtimes",
    "get_runtime",
]

ALLOWED_IMPORTS: frozenset[tuple[str, str]] = frozenset(binary.HOST_IMPORTS)
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

    def __init__(self, runtime: str, info: binary.ModuleInfo, limits: Limits) -> None:
        self.runtime = runtime
        self.limits = limits
        self.imports = tuple((i.module, i.name) for i in info.imports)
        self.exports = dict(info.exports)
        #: exported global name -> its value type (``binary.I32``, ...)
        self.export_globals = dict(info.export_globals)
        self._info = info
        self._callable: dict[str, binary.FuncSig] = {}

    @abc.abstractmethod
    def instantiate(self, log: LogCallback | None = None) -> Instance:
        """A fresh instance (its start function, if any, runs under the call limits); raises
        :class:`LoadError`."""

    def _signature(self, name: str) -> binary.FuncSig:
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
        if any(t not in (binary.I32, binary.I64) for t in sig.params) or len(sig.results) > 1 \
                or any(t not in (binary.I32, binary.I64) for t in sig.results):
            raise LoadError(f"export {name!r} has type {binary.describe_sig(sig)}: the host calls "
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

    def _check_call(self, name: str, args: tuple[int, ...]) -> binary.FuncSig:
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
    """Raised inside a host function to trap the call; the reason is in ``HostState.error``."""


class HostState:
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


def signed(value: int, bits: int) -> int:
    value &= (1 << bits) - 1
    return value - (1 << bits) if value >> (bits - 1) else value


def memory_view(address: int, size: int, owner: object) -> Memory:
    """A numpy view of ``size`` bytes at ``address`` that keeps ``owner`` alive (which must not
    refer back to the view: numpy arrays take no part in cycle collection)."""
    if size == 0:
        return np.zeros(0, dtype=np.uint8)
    buffer = (ctypes.c_ubyte * size).from_address(address)
    setattr(buffer, "_wssp_owner", owner)     # ctypes arrays take attributes: a keep-alive
    view: Memory = np.frombuffer(memoryview(buffer), dtype=np.uint8)
    return view


def trap_cause(text: str) -> str:
    """The useful part of a runtime's error text: what follows "Caused by:", else its first
    line."""
    if "Caused by:" in text:
        lines = [line.strip() for line in text.split("Caused by:", 1)[1].splitlines()]
        text = "; ".join(line for line in lines if line)
    else:
        text = text.strip().split("\n", 1)[0]
    return text if len(text) <= 500 else text[:500] + "..."


# --------------------------------------------------------------------------------------------

def _wasmtime() -> Runtime:
    from pyscheduler.wasm.vm_wasmtime import WasmtimeRuntime
    return WasmtimeRuntime()


def _wasmer() -> Runtime:
    from pyscheduler.wasm.vm_wasmer import WasmerRuntime
    return WasmerRuntime()


# The runtimes' modules are imported when first asked for (they import this one).
_FACTORIES: dict[str, Callable[[], Runtime]] = {"wasmtime": _wasmtime, "wasmer": _wasmer}
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
