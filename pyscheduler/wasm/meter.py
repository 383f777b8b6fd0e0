"""A small WebAssembly binary reader and the load-time rewriter that bounds a module's execution.

Two jobs, both done on the raw bytes before any runtime sees them:

``check``
    Parses the module's sections (types, imports, functions, tables, memories, globals, exports)
    and enforces the fragment rules of ``fragments/ABI.md`` §2 and §7 with the same messages on
    every runtime: the bytes are a WebAssembly module, no larger than the limit; every import is
    one of the allowed host functions with its exact signature; memory is defined by the module,
    there is at most one, and its declared minimum fits the memory cap. The result, a
    :class:`ModuleInfo`, lists imports, exports and the signature of every exported function.

``instrument``
    Rewrites the module so that a runtime without fuel or interruption (wasmer) still bounds
    every call:

    * two mutable globals are appended after the existing ones (so no global index moves) and
      exported under reserved names: ``__wssp_fuel`` (i64) and ``__wssp_depth`` (i32);
    * the code is split into *regions*: a function body outside its loops, and each loop body
      outside its nested loops. At the function entry and right after every ``loop`` header the
      rewriter inserts code that subtracts the region's cost (the number of instructions it holds,
      counted like wasmtime counts fuel: ``nop``, ``drop``, ``block``, ``loop``, ``else``,
      ``end``, ``return`` and ``unreachable`` are free; at least ``MIN_REGION_COST``, since the
      inserted code is work too and a one-instruction loop must not run ten instructions per
      unit) from ``__wssp_fuel`` and executes ``unreachable`` once the counter is negative.
      Every back edge of a wasm program targets a loop header and every call enters a function,
      so any run of unbounded length pays at each step and traps; a region is charged in full on
      entry, so the count is an upper bound of the instructions executed (both arms of an ``if``
      are charged). Two kinds of instruction take time a count does not see, so they pay more:
      a call to a host function costs ``HOST_CALL_COST``, and the bulk operations
      (``memory.fill/copy/init``, ``table.fill/copy/init/grow``) are charged at run time one
      unit per ``2**BULK_SHIFT`` bytes or elements of their length (read with a ``local.tee``
      into a local the rewriter adds to the function);
    * every function counts its call depth in ``__wssp_depth`` and traps beyond
      ``max_depth``: the body is wrapped in a ``block`` of the function's result type, so every
      branch to the function's label lands on the decrement after it, and every ``return`` is
      preceded by the decrement. Deep recursion then fails quickly and cleanly instead of
      exhausting the native stack;
    * the memory maximum becomes ``min(declared maximum, cap)`` and the table maximum
      ``min(declared maximum, MAX_TABLE_ELEMENTS)``, so ``memory.grow`` past the cap returns -1
      in the guest;
    * the start function, if any, is no longer started by the runtime but exported as
      ``__wssp_start``: the host calls it right after instantiation like any call, so its fuel,
      depth and trap are reported like those of any call (and it reaches the memory to log).

    The host sets ``__wssp_fuel`` (and resets ``__wssp_depth`` to 0) before each call; a trap
    with a negative fuel counter is a fuel exhaustion. Function bodies are decoded instruction by
    instruction (MVP, mutable globals, sign extension, saturating truncation, bulk memory,
    reference types and multi-value block types); anything else, SIMD (``0xfd``) included, is
    refused with a :class:`LoadError` naming the opcode. Instructions are copied byte for byte:
    only the inserted code is new, so the rewritten module computes what the original does.
    The type, global and export sections only gain entries at their ends (a type for the wrapper
    block of a function with several results, the two globals, their exports) and a function
    at most one local after its own, so no index changes; the other sections are copied
    unchanged, except custom sections other than ``name``, which are dropped (``name`` stays
    valid). Rewriting costs about half a microsecond of Python per instruction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyscheduler.wasm.errors import LoadError

__all__ = [
    "BULK_SHIFT",
    "DEPTH_EXPORT",
    "FUEL_EXPORT",
    "HOST_CALL_COST",
    "HOST_IMPORTS",
    "I32",
    "I64",
    "MAX_CALL_DEPTH",
    "MAX_TABLE_ELEMENTS",
    "MIN_REGION_COST",
    "PAGE_SIZE",
    "RESERVED_EXPORT_PREFIX",
    "START_EXPORT",
    "FuncSig",
    "Import",
    "ModuleInfo",
    "check",
    "describe_sig",
    "instrument",
    "parse",
]

PAGE_SIZE = 65536
FUEL_EXPORT = "__wssp_fuel"
DEPTH_EXPORT = "__wssp_depth"
START_EXPORT = "__wssp_start"
RESERVED_EXPORT_PREFIX = "__wssp_"
MAX_CALL_DEPTH = 10_000
MIN_REGION_COST = 8
HOST_CALL_COST = 10_000
BULK_SHIFT = 4
MAX_TABLE_ELEMENTS = 1 << 16

I32, I64, F32, F64, V128, FUNCREF, EXTERNREF = 0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F
_VALTYPE_NAMES = {I32: "i32", I64: "i64", F32: "f32", F64: "f64", V128: "v128",
                  FUNCREF: "funcref", EXTERNREF: "externref"}
_KIND_NAMES = {0: "func", 1: "table", 2: "memory", 3: "global", 4: "tag"}


@dataclass(frozen=True, slots=True)
class FuncSig:
    """A function type: parameter and result value types (``I32``, ``I64``, ...)."""

    params: tuple[int, ...]
    results: tuple[int, ...]


def type_name(t: int) -> str:
    """``i32``, ``f64``, ... for a value type byte."""
    return _VALTYPE_NAMES.get(t, hex(t))


def describe_sig(sig: FuncSig) -> str:
    """``(i32, i32) -> (i32)``."""
    def names(types: tuple[int, ...]) -> str:
        return ", ".join(_VALTYPE_NAMES.get(t, hex(t)) for t in types)
    return f"({names(sig.params)}) -> ({names(sig.results)})"


#: The host functions a fragment may import, with the signature each must have (ABI §2).
HOST_IMPORTS: dict[tuple[str, str], FuncSig] = {
    ("wssp", "log"): FuncSig((I32, I32, I32), ()),
    ("env", "abort"): FuncSig((I32, I32, I32, I32), ()),
}


@dataclass(frozen=True, slots=True)
class Import:
    module: str
    name: str
    kind: str                   # "func" | "table" | "memory" | "global" | "tag"
    sig: FuncSig | None = None  # for functions


@dataclass(slots=True)
class ModuleInfo:
    """What the reader learnt about a module."""

    size: int
    imports: list[Import] = field(default_factory=list)
    exports: dict[str, str] = field(default_factory=dict)
    #: exported function name -> its signature
    export_sigs: dict[str, FuncSig] = field(default_factory=dict)
    types: list[FuncSig] = field(default_factory=list)
    #: type index of every function, imported ones first
    func_types: list[int] = field(default_factory=list)
    imported_funcs: int = 0
    imported_globals: int = 0
    defined_globals: int = 0
    #: value type of every global, imported ones first
    global_types: list[int] = field(default_factory=list)
    #: exported global name -> its value type
    export_globals: dict[str, int] = field(default_factory=dict)
    #: (minimum, maximum or None) in pages of the memory the module defines, None when none
    memory: tuple[int, int | None] | None = None
    imported_memory: bool = False
    memory_export: str | None = None
    #: (id, payload start, payload end) of every section, in file order
    sections: list[tuple[int, int, int]] = field(default_factory=list)


class _Reader:
    """Cursor over a byte string with the LEB128 decoders of the binary format."""

    __slots__ = ("data", "pos", "end")

    def __init__(self, data: bytes, pos: int = 0, end: int | None = None) -> None:
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end

    def fail(self, what: str) -> LoadError:
        return LoadError(f"not a WebAssembly module: {what} at offset {self.pos:#x}")

    def byte(self) -> int:
        if self.pos >= self.end:
            raise self.fail("unexpected end")
        b = self.data[self.pos]
        self.pos += 1
        return b

    def u32(self) -> int:
        result = shift = 0
        for _ in range(5):
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                if result > 0xFFFFFFFF:
                    raise self.fail("integer too large")
                return result
            shift += 7
        raise self.fail("integer representation too long")

    def take(self, n: int) -> bytes:
        if n > self.end - self.pos:
            raise self.fail("unexpected end")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def name(self) -> str:
        raw = self.take(self.u32())
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise self.fail("name is not UTF-8") from None

    def limits(self) -> tuple[int, int | None, int]:
        """(minimum, maximum or None, flags)."""
        flags = self.byte()
        if flags > 1:
            raise LoadError(f"unsupported limits flags {flags:#x} (shared or 64-bit memories and "
                            "tables are not supported)")
        minimum = self.u32()
        maximum = self.u32() if flags & 1 else None
        return minimum, maximum, flags


# Section ids in the order the binary format requires them (custom sections, id 0, go anywhere).
_SECTION_ORDER = {1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7, 8: 8, 9: 9, 12: 10, 10: 11, 11: 12}
_SEC_TYPE, _SEC_IMPORT, _SEC_FUNCTION, _SEC_TABLE, _SEC_MEMORY = 1, 2, 3, 4, 5
_SEC_GLOBAL, _SEC_EXPORT, _SEC_START, _SEC_CODE = 6, 7, 8, 10
_MAGIC = b"\0asm"


def parse(wasm: bytes) -> ModuleInfo:
    """Read the module's structure. Raises :class:`LoadError` on malformed bytes."""
    if len(wasm) < 8 or wasm[:4] != _MAGIC:
        raise LoadError("not a WebAssembly module: the bytes do not start with \\0asm")
    if wasm[4:8] != b"\x01\0\0\0":
        raise LoadError("not a WebAssembly module: unsupported binary version "
                        f"{int.from_bytes(wasm[4:8], 'little')} (a component, or a newer "
                        "format?); expected version 1")
    info = ModuleInfo(size=len(wasm))
    r = _Reader(wasm, 8)
    last = 0
    while r.pos < r.end:
        sid = r.byte()
        size = r.u32()
        start = r.pos
        if size > r.end - start:
            raise r.fail(f"section {sid} runs past the end of the module")
        if sid != 0:
            rank = _SECTION_ORDER.get(sid)
            if rank is None:
                raise LoadError(f"unsupported section id {sid} (fragments use WebAssembly 1.0 "
                                "sections only)")
            if rank <= last:
                raise r.fail(f"section {sid} out of order")
            last = rank
        info.sections.append((sid, start, start + size))
        s = _Reader(wasm, start, start + size)
        if sid == _SEC_TYPE:
            _parse_types(s, info)
        elif sid == _SEC_IMPORT:
            _parse_imports(s, info)
        elif sid == _SEC_FUNCTION:
            for _ in range(s.u32()):
                info.func_types.append(_type_index(s, info))
        elif sid == _SEC_TABLE:
            for _ in range(s.u32()):
                _table_type(s)
        elif sid == _SEC_MEMORY:
            count = s.u32()
            if count + (1 if info.imported_memory else 0) > 1:
                raise LoadError("a fragment may define at most one memory")
            if count:
                minimum, maximum, _ = s.limits()
                info.memory = (minimum, maximum)
        elif sid == _SEC_GLOBAL:
            info.defined_globals = s.u32()
            for _ in range(info.defined_globals):
                info.global_types.append(_valtype(s))
                s.byte()  # mutability
                _skip_const_expr(s)
        elif sid == _SEC_EXPORT:
            _parse_exports(s, info)
        r.pos = start + size
    return info


def _valtype(s: _Reader) -> int:
    t = s.byte()
    if t not in _VALTYPE_NAMES:
        raise LoadError(f"unsupported value type {t:#x}")
    return t


# Constant expressions (global initializers): the opcodes with an immediate, and its form.
_CONST_IMMEDIATES = {0x41: "leb", 0x42: "leb", 0x23: "leb", 0xD2: "leb", 0xD0: "byte",
                     0x43: 4, 0x44: 8}
# Extended constant expressions: i32/i64 add, sub, mul (no immediate).
_CONST_OPERATORS = frozenset((0x6A, 0x6B, 0x6C, 0x7C, 0x7D, 0x7E))


def _skip_const_expr(s: _Reader) -> None:
    """Step over a constant expression, up to and including its ``end``."""
    while True:
        op = s.byte()
        if op == 0x0B:
            return
        immediate = _CONST_IMMEDIATES.get(op)
        if immediate == "leb":
            while s.byte() & 0x80:
                pass
        elif immediate == "byte":
            s.byte()
        elif isinstance(immediate, int):
            s.take(immediate)
        elif op not in _CONST_OPERATORS:
            raise s.fail(f"opcode {op:#x} in a constant expression")


def _type_index(s: _Reader, info: ModuleInfo) -> int:
    index = s.u32()
    if index >= len(info.types):
        raise s.fail(f"type index {index} out of range")
    return index


def _table_type(s: _Reader) -> tuple[int, int | None]:
    ref = s.byte()
    if ref not in (FUNCREF, EXTERNREF):
        raise LoadError(f"unsupported table element type {ref:#x}")
    minimum, maximum, _ = s.limits()
    if minimum > MAX_TABLE_ELEMENTS:
        raise LoadError(f"table minimum of {minimum} elements exceeds the limit of "
                        f"{MAX_TABLE_ELEMENTS}")
    return minimum, maximum


def _parse_types(s: _Reader, info: ModuleInfo) -> None:
    for _ in range(s.u32()):
        form = s.byte()
        if form != 0x60:
            raise LoadError(f"unsupported type form {form:#x} (only function types are "
                            "supported)")
        params = tuple(_valtype(s) for _ in range(s.u32()))
        results = tuple(_valtype(s) for _ in range(s.u32()))
        info.types.append(FuncSig(params, results))


def _parse_imports(s: _Reader, info: ModuleInfo) -> None:
    for _ in range(s.u32()):
        module = s.name()
        name = s.name()
        kind = s.byte()
        sig: FuncSig | None = None
        if kind == 0:
            index = _type_index(s, info)
            info.func_types.append(index)
            info.imported_funcs += 1
            sig = info.types[index]
        elif kind == 1:
            _table_type(s)
        elif kind == 2:
            s.limits()
            info.imported_memory = True
        elif kind == 3:
            info.global_types.append(_valtype(s))
            s.byte()
            info.imported_globals += 1
        elif kind == 4:
            s.byte()
            _type_index(s, info)
        else:
            raise s.fail(f"import {module}.{name} has unknown kind {kind:#x}")
        info.imports.append(Import(module, name, _KIND_NAMES[kind], sig))


def _parse_exports(s: _Reader, info: ModuleInfo) -> None:
    for _ in range(s.u32()):
        name = s.name()
        kind = s.byte()
        index = s.u32()
        if kind not in (0, 1, 2, 3):
            raise LoadError(f"export {name!r} has unsupported kind {kind:#x}")
        if name in info.exports:
            raise LoadError(f"duplicate export {name!r}")
        info.exports[name] = _KIND_NAMES[kind]
        if kind == 0:
            if index >= len(info.func_types):
                raise s.fail(f"export {name!r} names function {index}, which does not exist")
            info.export_sigs[name] = info.types[info.func_types[index]]
        elif kind == 2 and (info.memory_export is None or name == "memory"):
            info.memory_export = name
        elif kind == 3 and index < len(info.global_types):
            info.export_globals[name] = info.global_types[index]


def check(wasm: bytes, *, max_module_bytes: int, memory_bytes: int) -> ModuleInfo:
    """Parse ``wasm`` and enforce the fragment rules (size, imports, memory); see the module
    docstring. Raises :class:`LoadError` with a message naming what is wrong."""
    if len(wasm) > max_module_bytes:
        raise LoadError(f"module is {len(wasm)} bytes, above the limit of {max_module_bytes} "
                        "bytes")
    info = parse(wasm)
    allowed = " and ".join(f"{m}.{n} {describe_sig(sig)}" for (m, n), sig in HOST_IMPORTS.items())
    for imp in info.imports:
        what = f"{imp.module}.{imp.name}"
        if imp.kind == "memory":
            raise LoadError(f"imported memory {what} is not allowed: a fragment must define its "
                            "own memory (fragments/ABI.md §2)")
        want = HOST_IMPORTS.get((imp.module, imp.name))
        if want is None:
            hint = " (WASI is not available to fragments)" if imp.module.startswith("wasi") else ""
            raise LoadError(f"import {what} ({imp.kind}) is not allowed{hint}: a fragment may "
                            f"import only {allowed} (fragments/ABI.md §2)")
        if imp.kind != "func" or imp.sig is None:
            raise LoadError(f"import {what} must be a function {describe_sig(want)}, not a "
                            f"{imp.kind}")
        if imp.sig != want:
            raise LoadError(f"import {what} has type {describe_sig(imp.sig)}, expected "
                            f"{describe_sig(want)}")
    for name in info.exports:
        if name.startswith(RESERVED_EXPORT_PREFIX):
            raise LoadError(f"export name {name!r} is reserved (names starting with "
                            f"{RESERVED_EXPORT_PREFIX!r} belong to the host)")
    cap_pages = memory_bytes // PAGE_SIZE
    if info.memory is not None and info.memory[0] > cap_pages:
        minimum = info.memory[0]
        raise LoadError(f"memory minimum of {minimum} pages ({minimum * PAGE_SIZE} bytes) exceeds "
                        f"the cap of {cap_pages} pages ({memory_bytes} bytes)")
    return info


# --------------------------------------------------------------------------------------------
# Rewriting


def _uleb(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _sleb(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if (n == 0 and not b & 0x40) or (n == -1 and b & 0x40):
            out.append(b)
            return bytes(out)
        out.append(b | 0x80)


def _name(s: str) -> bytes:
    raw = s.encode("utf-8")
    return _uleb(len(raw)) + raw


# Immediate kinds of one-byte opcodes.
_NONE, _BLOCK, _LEB, _LEB2, _BR_TABLE, _MEMARG, _F32, _F64, _SELECT_T, _PREFIX_FC, _BAD = range(11)
_IMMEDIATES = bytearray([_BAD]) * 256
for _op in (0x00, 0x01, 0x05, 0x0B, 0x0F, 0x1A, 0x1B, 0xD1):
    _IMMEDIATES[_op] = _NONE
for _op in range(0x45, 0xC5):   # numeric instructions, sign extension (0xc0-0xc4) included
    _IMMEDIATES[_op] = _NONE
for _op in (0x02, 0x03, 0x04):
    _IMMEDIATES[_op] = _BLOCK
# br, br_if, call, local.*, global.*, table.get/set, memory.size/grow, i32/i64.const,
# ref.null (heap type), ref.func
for _op in (0x0C, 0x0D, 0x10, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x3F, 0x40, 0x41, 0x42,
            0xD0, 0xD2):
    _IMMEDIATES[_op] = _LEB
_IMMEDIATES[0x11] = _LEB2       # call_indirect: type index, table index
_IMMEDIATES[0x0E] = _BR_TABLE
for _op in range(0x28, 0x3F):   # loads and stores
    _IMMEDIATES[_op] = _MEMARG
_IMMEDIATES[0x43] = _F32
_IMMEDIATES[0x44] = _F64
_IMMEDIATES[0x1C] = _SELECT_T
_IMMEDIATES[0xFC] = _PREFIX_FC
del _op

# 0xfc sub-opcodes: number of u32 immediates (0-7 saturating truncation; 8 memory.init,
# 9 data.drop, 10 memory.copy, 11 memory.fill, 12 table.init, 13 elem.drop, 14 table.copy,
# 15 table.grow, 16 table.size, 17 table.fill).
_FC_IMMEDIATES = (0, 0, 0, 0, 0, 0, 0, 0, 2, 1, 2, 1, 2, 1, 2, 1, 1, 1)

_UNSUPPORTED = {
    0x06: "try (exception handling)", 0x07: "catch (exception handling)",
    0x08: "throw (exception handling)", 0x09: "rethrow (exception handling)",
    0x0A: "throw_ref (exception handling)", 0x18: "delegate (exception handling)",
    0x19: "catch_all (exception handling)", 0x1F: "try_table (exception handling)",
    0x12: "return_call (tail calls)", 0x13: "return_call_indirect (tail calls)",
    0x14: "call_ref (function references)", 0x15: "return_call_ref (tail calls)",
    0xD3: "ref.as_non_null (function references)", 0xD4: "br_on_null (function references)",
    0xD5: "ref.eq (GC)", 0xD6: "br_on_non_null (function references)",
    0xFB: "GC instructions", 0xFD: "SIMD", 0xFE: "atomics (threads)",
}

# Instructions wasmtime does not charge fuel for; they are free here too.
_FREE = frozenset((0x00, 0x01, 0x02, 0x03, 0x05, 0x0B, 0x0F, 0x1A))
_VALTYPE_BYTES = frozenset(_VALTYPE_NAMES)


def _unsupported(op: int, data: bytes, p: int, func: int) -> LoadError:
    what = _UNSUPPORTED.get(op, "unknown opcode")
    return LoadError(f"unsupported instruction {op:#04x} ({what}) in function {func} at offset "
                     f"{p:#x}: fragments may use WebAssembly 1.0 instructions plus sign "
                     "extension, saturating truncation, bulk memory and reference types")


_RETURN, _BULK = -1, -2
# 0xfc sub-opcodes whose last operand is a length: memory.init, memory.copy, memory.fill,
# table.init, table.copy, table.grow, table.fill.
_FC_BULK = frozenset((8, 10, 11, 12, 14, 15, 17))


def _scan_body(data: bytes, pos: int, end: int, func: int,
               imported_funcs: int) -> tuple[list[int], list[tuple[int, int]]]:
    """Decode one function body's instructions (``pos`` is past the locals). Returns the cost of
    every region (0: the function outside its loops, then one per loop in order) and the
    insertion points: (offset, region) after each loop header, (offset, _RETURN) before each
    ``return``, (offset, _BULK) before each bulk operation."""
    costs = [0]
    inserts: list[tuple[int, int]] = []
    stack = [0]
    cur = 0
    immediates = _IMMEDIATES
    free = _FREE
    p = pos
    try:
        while p < end:
            start = p
            op = data[p]
            p += 1
            kind = immediates[op]
            if op not in free:
                costs[cur] += 1
            if kind == _NONE:
                if op == 0x0B:
                    stack.pop()
                    if not stack:
                        if p != end:
                            raise LoadError(f"function {func}: code after the final end at "
                                            f"offset {p:#x}")
                        return costs, inserts
                    cur = stack[-1]
                elif op == 0x0F:
                    inserts.append((start, -1))
            elif kind == _LEB:
                if op == 0x10:      # call: a host function costs more
                    r = _Reader(data, p, end)
                    if r.u32() < imported_funcs:
                        costs[cur] += HOST_CALL_COST
                while data[p] & 0x80:
                    p += 1
                p += 1
            elif kind == _MEMARG:
                align = shift = 0
                while True:
                    b = data[p]
                    p += 1
                    align |= (b & 0x7F) << shift
                    shift += 7
                    if not b & 0x80:
                        break
                if align & 0x40:    # multi-memory: a memory index follows
                    while data[p] & 0x80:
                        p += 1
                    p += 1
                while data[p] & 0x80:
                    p += 1
                p += 1
            elif kind == _BLOCK:
                b = data[p]
                if b == 0x40 or b in _VALTYPE_BYTES:
                    p += 1
                else:               # s33 type index (multi-value)
                    while data[p] & 0x80:
                        p += 1
                    p += 1
                if op == 0x03:
                    cur = len(costs)
                    costs.append(0)
                    inserts.append((p, cur))
                stack.append(cur)
            elif kind == _LEB2:
                for _ in range(2):
                    while data[p] & 0x80:
                        p += 1
                    p += 1
            elif kind == _BR_TABLE:
                r = _Reader(data, p, end)
                count = r.u32()
                p = r.pos
                for _ in range(count + 1):
                    while data[p] & 0x80:
                        p += 1
                    p += 1
            elif kind == _F32:
                p += 4
            elif kind == _F64:
                p += 8
            elif kind == _SELECT_T:
                r = _Reader(data, p, end)
                count = r.u32()
                p = r.pos + count
            elif kind == _PREFIX_FC:
                r = _Reader(data, p, end)
                sub = r.u32()
                p = r.pos
                if sub >= len(_FC_IMMEDIATES):
                    raise LoadError(f"unsupported instruction 0xfc {sub} in function {func} at "
                                    f"offset {start:#x}: fragments may use WebAssembly 1.0 "
                                    "instructions plus sign extension, saturating truncation, "
                                    "bulk memory and reference types")
                for _ in range(_FC_IMMEDIATES[sub]):
                    while data[p] & 0x80:
                        p += 1
                    p += 1
                if sub in _FC_BULK:
                    inserts.append((start, _BULK))
            else:
                raise _unsupported(op, data, start, func)
    except IndexError:
        pass
    raise LoadError(f"not a WebAssembly module: function {func}'s body is truncated or does not "
                    "end with end")


class _Rewriter:
    """State of one :func:`instrument` run."""

    def __init__(self, wasm: bytes, info: ModuleInfo, fuel: int, memory_cap_pages: int | None,
                 max_depth: int) -> None:
        self.wasm = wasm
        self.info = info
        self.fuel = fuel
        self.memory_cap_pages = memory_cap_pages
        self.max_depth = max_depth
        fuel_index = info.imported_globals + info.defined_globals
        self.fuel_global = _uleb(fuel_index)
        self.depth_global = _uleb(fuel_index + 1)
        self.new_types: list[FuncSig] = []
        # Code fragments inserted into the bodies.
        g, d = self.fuel_global, self.depth_global
        self.charge_head = b"\x23" + g + b"\x42"                                 # get, i64.const
        self.charge_tail = (b"\x7d\x24" + g + b"\x23" + g +                      # sub, set, get
                            b"\x42\x00\x53\x04\x40\x00\x0b")                     # <0 ? trap
        self.enter = (b"\x23" + d + b"\x41\x01\x6a\x24" + d +                    # depth += 1
                      b"\x23" + d + b"\x41" + _sleb(max_depth) +                 # depth > max ?
                      b"\x4b\x04\x40\x00\x0b")                                   #   trap
        self.leave = b"\x23" + d + b"\x41\x01\x6b\x24" + d                      # depth -= 1

    def bulk(self, local: int) -> bytes:
        """Charge the length on top of the stack (kept there) >> BULK_SHIFT."""
        g, t = self.fuel_global, _uleb(local)
        return (b"\x22" + t + b"\x23" + g + b"\x20" + t +                  # tee, get, get
                b"\xad\x42" + _sleb(BULK_SHIFT) + b"\x88\x7d\x24" + g +        # fuel -= n >> s
                b"\x23" + g + b"\x42\x00\x53\x04\x40\x00\x0b")                # <0 ? trap

    def charge(self, cost: int) -> bytes:
        return self.charge_head + _sleb(max(cost, MIN_REGION_COST)) + self.charge_tail

    def block_type(self, results: tuple[int, ...]) -> bytes:
        """The block type of a function body's wrapper block."""
        if not results:
            return b"\x40"
        if len(results) == 1:
            return bytes(results)
        want = FuncSig((), results)
        types = self.info.types + self.new_types
        if want in types:
            return _sleb(types.index(want))
        self.new_types.append(want)
        return _sleb(len(types))

    def run(self) -> bytes:
        info, wasm = self.info, self.wasm
        out: dict[int, bytes] = {}
        names: list[bytes] = []
        start_export = b""
        for sid, start, end in info.sections:
            if sid == _SEC_START:
                start_export = _name(START_EXPORT) + b"\x00" + wasm[start:end]
            elif sid == 0:
                r = _Reader(wasm, start, end)
                if r.name() == "name":
                    names.append(wasm[start:end])
            elif sid == _SEC_CODE:
                out[sid] = self.code(start, end)
            elif sid == _SEC_MEMORY:
                out[sid] = self.memories(start, end)
            elif sid == _SEC_TABLE:
                out[sid] = self.tables(start, end)
            else:
                out[sid] = wasm[start:end]
        if len(info.func_types) > info.imported_funcs and _SEC_CODE not in out:
            raise LoadError("not a WebAssembly module: functions are declared but there is no "
                            "code section")
        fuel_global = b"\x7e\x01\x42" + _sleb(self.fuel) + b"\x0b"
        depth_global = b"\x7f\x01\x41\x00\x0b"
        out[_SEC_GLOBAL] = _append(out.get(_SEC_GLOBAL), fuel_global + depth_global, 2)
        fuel_index = info.imported_globals + info.defined_globals
        exports = (_name(FUEL_EXPORT) + b"\x03" + _uleb(fuel_index) +
                   _name(DEPTH_EXPORT) + b"\x03" + _uleb(fuel_index + 1) + start_export)
        out[_SEC_EXPORT] = _append(out.get(_SEC_EXPORT), exports, 3 if start_export else 2)
        if self.new_types:
            encoded = b"".join(b"\x60\x00" + _uleb(len(t.results)) + bytes(t.results)
                               for t in self.new_types)
            out[_SEC_TYPE] = _append(out.get(_SEC_TYPE), encoded, len(self.new_types))
        parts = [_MAGIC, b"\x01\0\0\0"]
        for sid in sorted(out, key=_SECTION_ORDER.__getitem__):
            parts += [bytes((sid,)), _uleb(len(out[sid])), out[sid]]
        for payload in names:
            parts += [b"\x00", _uleb(len(payload)), payload]
        return b"".join(parts)

    def memories(self, start: int, end: int) -> bytes:
        r = _Reader(self.wasm, start, end)
        count = r.u32()
        if not count:
            return self.wasm[start:end]
        minimum, maximum, _ = r.limits()
        cap = self.memory_cap_pages
        if cap is not None:
            if minimum > cap:
                raise LoadError(f"memory minimum of {minimum} pages exceeds the cap of {cap} "
                                "pages")
            maximum = cap if maximum is None else min(maximum, cap)
        limits = b"\x00" + _uleb(minimum) if maximum is None else \
            b"\x01" + _uleb(minimum) + _uleb(maximum)
        return b"\x01" + limits

    def tables(self, start: int, end: int) -> bytes:
        r = _Reader(self.wasm, start, end)
        count = r.u32()
        parts = [_uleb(count)]
        for _ in range(count):
            ref = self.wasm[r.pos]
            minimum, maximum = _table_type(r)
            maximum = MAX_TABLE_ELEMENTS if maximum is None else min(maximum,
                                                                      MAX_TABLE_ELEMENTS)
            parts.append(bytes((ref, 1)) + _uleb(minimum) + _uleb(maximum))
        return b"".join(parts)

    def code(self, start: int, end: int) -> bytes:
        info, wasm = self.info, self.wasm
        r = _Reader(wasm, start, end)
        count = r.u32()
        defined = len(info.func_types) - info.imported_funcs
        if count != defined:
            raise LoadError(f"not a WebAssembly module: {count} function bodies for {defined} "
                            "declared functions")
        parts = [_uleb(count)]
        for i in range(count):
            func = info.imported_funcs + i
            size = r.u32()
            body_start = r.pos
            body_end = body_start + size
            if body_end > end:
                raise r.fail(f"function {func}'s body runs past the code section")
            sig = info.types[info.func_types[func]]
            locals_reader = _Reader(wasm, body_start, body_end)
            groups = locals_reader.u32()
            declarations = locals_reader.pos
            n_locals = len(sig.params)
            for _ in range(groups):
                n_locals += locals_reader.u32()
                _valtype(locals_reader)
            code_start = locals_reader.pos
            costs, inserts = _scan_body(wasm, code_start, body_end, func, info.imported_funcs)
            if any(region == _BULK for _, region in inserts):
                # one more i32 local, for the lengths of bulk operations
                header = _uleb(groups + 1) + wasm[declarations:code_start] + b"\x01\x7f"
            else:
                header = wasm[body_start:code_start]
            pieces = [header, self.charge(costs[0]), self.enter,
                      b"\x02", self.block_type(sig.results)]
            last = code_start
            for offset, region in inserts:
                pieces.append(wasm[last:offset])
                pieces.append(self.leave if region == _RETURN else
                              self.bulk(n_locals) if region == _BULK else
                              self.charge(costs[region]))
                last = offset
            # The original final ``end`` now closes the wrapper block.
            pieces += [wasm[last:body_end], self.leave, b"\x0b"]
            body = b"".join(pieces)
            parts += [_uleb(len(body)), body]
            r.pos = body_end
        return b"".join(parts)


def _append(payload: bytes | None, entries: bytes, n: int) -> bytes:
    """A vector section ``payload`` with ``n`` encoded ``entries`` appended."""
    if payload is None:
        return _uleb(n) + entries
    r = _Reader(payload)
    count = r.u32()
    return _uleb(count + n) + payload[r.pos:] + entries


def instrument(wasm: bytes, info: ModuleInfo | None = None, *, fuel: int,
               memory_cap_pages: int | None, max_depth: int = MAX_CALL_DEPTH) -> bytes:
    """The metered module (see the module docstring). ``fuel`` is the initial value of the fuel
    counter (what the start function, if any, may spend); ``memory_cap_pages`` caps the memory
    maximum (None: unchanged). ``info`` is ``parse(wasm)`` when the caller has it."""
    return _Rewriter(wasm, info if info is not None else parse(wasm), fuel, memory_cap_pages,
                     max_depth).run()
