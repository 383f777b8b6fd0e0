"""The wasmer (1.1) runtime behind :mod:`pyscheduler.wasm.vm`'s interface: fuel by
instrumentation, one owner thread per runtime (see the docstring of :mod:`pyscheduler.wasm.vm`).
wasmer installs on Python 3.10 only."""

from __future__ import annotations

import ctypes
import importlib
import queue
import threading
from collections.abc import Callable
from types import ModuleType
from typing import Any

from pyscheduler.wasm import binary, meter
from pyscheduler.wasm.errors import CallError, FragmentError, LoadError
from pyscheduler.wasm.vm import (
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

__all__ = ["WasmerRuntime"]


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
        info = binary.check(wasm, max_module_bytes=limits.max_module_bytes,
                           memory_bytes=limits.memory_bytes)
        metered = meter.instrument(wasm, info, fuel=limits.fuel,
                                   memory_cap_pages=limits.memory_bytes // binary.PAGE_SIZE)
        handle = self._owner.run(self._compile, wasm, metered)
        return _WasmerModule(self, handle, info, limits)

    def _compile(self, original: bytes, metered: bytes) -> Any:   # on the owner thread
        wasmer = self._wasmer
        if not wasmer.Module.validate(self._store, original):
            try:
                wasmer.Module(self._store, original)
                reason = "rejected by wasmer's validator"
            except Exception as e:
                reason = trap_cause(str(e))
            raise LoadError(f"invalid WebAssembly module: {reason}")
        try:
            return wasmer.Module(self._store, metered)
        except Exception as e:
            raise LoadError(f"the metered module does not compile ({trap_cause(str(e))}): a bug "
                            "of pyscheduler.wasm.meter") from None


class _WasmerModule(Module):
    def __init__(self, runtime: WasmerRuntime, module: Any, info: binary.ModuleInfo,
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
        state = HostState(log)
        handle = self._owner.run(self._instantiate, state)
        return _WasmerInstance(self, handle, self._owner.run(handle.memory_info))

    def _instantiate(self, state: HostState) -> _WasmerHandle:   # on the owner thread
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
            message = error.message if error is not None else trap_cause(str(e))
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
                 state: HostState) -> None:
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
        text = trap_cause(str(e))
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
        values = [signed(a, 32 if t == binary.I32 else 64) for a, t in zip(args, sig.params)]
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
            self._view = memory_view(*self._memory_info, self._resources)
        return self._view

    def memory_size(self) -> int:
        if self._memory_info is None:
            raise LoadError("module exports no memory")
        return self._memory_info[1]
