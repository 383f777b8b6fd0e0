"""A small WebAssembly binary reader and the fragment rules every runtime enforces at load.

``check`` parses the module's sections (types, imports, functions, tables, memories, globals,
exports) and enforces the fragment rules of ``fragments/ABI.md`` §2 and §7 with the same messages
on every runtime: the bytes are a WebAssembly module, no larger than the limit; every import is
one of the allowed host functions with its exact signature; memory is defined by the module,
there is at most one, and its declared minimum fits the memory cap. The result, a
:class:`ModuleInfo`, lists imports, exports and the signature of every exported function.
The rewriting that meters a module for wasmer is :mod:`pyscheduler.wasm.meter`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyscheduler.wasm.errors import LoadError

__all__ = [
    "MAGIC",
    "Reader",
    "SECTION_ORDER",
    "SEC_CODE",
    "SEC_EXPORT",
    "SEC_FUNCTION",
    "SEC_GLOBAL",
    "SEC_IMPORT",
    "SEC_MEMORY",
    "SEC_START",
    "SEC_TABLE",
    "SEC_TYPE",
    "VALTYPE_NAMES",
    "read_table_type",
    "read_valtype",
    "HOST_IMPORTS",
    "I32",
    "I64",
    "MAX_TABLE_ELEMENTS",
    "PAGE_SIZE",
    "RESERVED_EXPORT_PREFIX",
    "FuncSig",
    "Import",
    "ModuleInfo",
    "check",
    "describe_sig",
    "parse",
]

PAGE_SIZE = 65536
RESERVED_EXPORT_PREFIX = "__wssp_"
MAX_TABLE_ELEMENTS = 1 << 16

I32, I64, F32, F64, V128, FUNCREF, EXTERNREF = 0x7F, 0x7E, 0x7D, 0x7C, 0x7B, 0x70, 0x6F
VALTYPE_NAMES = {I32: "i32", I64: "i64", F32: "f32", F64: "f64", V128: "v128",
                  FUNCREF: "funcref", EXTERNREF: "externref"}
_KIND_NAMES = {0: "func", 1: "table", 2: "memory", 3: "global", 4: "tag"}


@dataclass(frozen=True, slots=True)
class FuncSig:
    """A function type: parameter and result value types (``I32``, ``I64``, ...)."""

    params: tuple[int, ...]
    results: tuple[int, ...]


def type_name(t: int) -> str:
    """``i32``, ``f64``, ... for a value type byte."""
    return VALTYPE_NAMES.get(t, hex(t))


def describe_sig(sig: FuncSig) -> str:
    """``(i32, i32) -> (i32)``."""
    def names(types: tuple[int, ...]) -> str:
        return ", ".join(VALTYPE_NAMES.get(t, hex(t)) for t in types)
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


class Reader:
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
SECTION_ORDER = {1: 1, 2: 2, 3: 3, 4: 4, 5: 5, 6: 6, 7: 7, 8: 8, 9: 9, 12: 10, 10: 11, 11: 12}
SEC_TYPE, SEC_IMPORT, SEC_FUNCTION, SEC_TABLE, SEC_MEMORY = 1, 2, 3, 4, 5
SEC_GLOBAL, SEC_EXPORT, SEC_START, SEC_CODE = 6, 7, 8, 10
MAGIC = b"\0asm"


def parse(wasm: bytes) -> ModuleInfo:
    """Read the module's structure. Raises :class:`LoadError` on malformed bytes."""
    if len(wasm) < 8 or wasm[:4] != MAGIC:
        raise LoadError("not a WebAssembly module: the bytes do not start with \\0asm")
    if wasm[4:8] != b"\x01\0\0\0":
        raise LoadError("not a WebAssembly module: unsupported binary version "
                        f"{int.from_bytes(wasm[4:8], 'little')} (a component, or a newer "
                        "format?); expected version 1")
    info = ModuleInfo(size=len(wasm))
    r = Reader(wasm, 8)
    last = 0
    while r.pos < r.end:
        sid = r.byte()
        size = r.u32()
        start = r.pos
        if size > r.end - start:
            raise r.fail(f"section {sid} runs past the end of the module")
        if sid != 0:
            rank = SECTION_ORDER.get(sid)
            if rank is None:
                raise LoadError(f"unsupported section id {sid} (fragments use WebAssembly 1.0 "
                                "sections only)")
            if rank <= last:
                raise r.fail(f"section {sid} out of order")
            last = rank
        info.sections.append((sid, start, start + size))
        s = Reader(wasm, start, start + size)
        if sid == SEC_TYPE:
            _parse_types(s, info)
        elif sid == SEC_IMPORT:
            _parse_imports(s, info)
        elif sid == SEC_FUNCTION:
            for _ in range(s.u32()):
                info.func_types.append(_type_index(s, info))
        elif sid == SEC_TABLE:
            for _ in range(s.u32()):
                read_table_type(s)
        elif sid == SEC_MEMORY:
            count = s.u32()
            if count + (1 if info.imported_memory else 0) > 1:
                raise LoadError("a fragment may define at most one memory")
            if count:
                minimum, maximum, _ = s.limits()
                info.memory = (minimum, maximum)
        elif sid == SEC_GLOBAL:
            info.defined_globals = s.u32()
            for _ in range(info.defined_globals):
                info.global_types.append(read_valtype(s))
                s.byte()  # mutability
                _skip_const_expr(s)
        elif sid == SEC_EXPORT:
            _parse_exports(s, info)
        r.pos = start + size
    return info


def read_valtype(s: Reader) -> int:
    t = s.byte()
    if t not in VALTYPE_NAMES:
        raise LoadError(f"unsupported value type {t:#x}")
    return t


# Constant expressions (global initializers): the opcodes with an immediate, and its form.
_CONST_IMMEDIATES = {0x41: "leb", 0x42: "leb", 0x23: "leb", 0xD2: "leb", 0xD0: "byte",
                     0x43: 4, 0x44: 8}
# Extended constant expressions: i32/i64 add, sub, mul (no immediate).
_CONST_OPERATORS = frozenset((0x6A, 0x6B, 0x6C, 0x7C, 0x7D, 0x7E))


def _skip_const_expr(s: Reader) -> None:
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


def _type_index(s: Reader, info: ModuleInfo) -> int:
    index = s.u32()
    if index >= len(info.types):
        raise s.fail(f"type index {index} out of range")
    return index


def read_table_type(s: Reader) -> tuple[int, int | None]:
    ref = s.byte()
    if ref not in (FUNCREF, EXTERNREF):
        raise LoadError(f"unsupported table element type {ref:#x}")
    minimum, maximum, _ = s.limits()
    if minimum > MAX_TABLE_ELEMENTS:
        raise LoadError(f"table minimum of {minimum} elements exceeds the limit of "
                        f"{MAX_TABLE_ELEMENTS}")
    return minimum, maximum


def _parse_types(s: Reader, info: ModuleInfo) -> None:
    for _ in range(s.u32()):
        form = s.byte()
        if form != 0x60:
            raise LoadError(f"unsupported type form {form:#x} (only function types are "
                            "supported)")
        params = tuple(read_valtype(s) for _ in range(s.u32()))
        results = tuple(read_valtype(s) for _ in range(s.u32()))
        info.types.append(FuncSig(params, results))


def _parse_imports(s: Reader, info: ModuleInfo) -> None:
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
            read_table_type(s)
        elif kind == 2:
            s.limits()
            info.imported_memory = True
        elif kind == 3:
            info.global_types.append(read_valtype(s))
            s.byte()
            info.imported_globals += 1
        elif kind == 4:
            s.byte()
            _type_index(s, info)
        else:
            raise s.fail(f"import {module}.{name} has unknown kind {kind:#x}")
        info.imports.append(Import(module, name, _KIND_NAMES[kind], sig))


def _parse_exports(s: Reader, info: ModuleInfo) -> None:
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


