"""The load-time rewriter that bounds a module's execution on a runtime without fuel (wasmer).

Done on the raw bytes, after :func:`pyscheduler.wasm.binary.check`, before the runtime sees them.

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

from pyscheduler.wasm.binary import (
    FuncSig,
    MAGIC,
    MAX_TABLE_ELEMENTS,
    ModuleInfo,
    Reader,
    SECTION_ORDER,
    SEC_CODE,
    SEC_EXPORT,
    SEC_GLOBAL,
    SEC_MEMORY,
    SEC_START,
    SEC_TABLE,
    SEC_TYPE,
    VALTYPE_NAMES,
    parse,
    read_table_type,
    read_valtype,
)
from pyscheduler.wasm.errors import LoadError

__all__ = [
    "BULK_SHIFT",
    "DEPTH_EXPORT",
    "FUEL_EXPORT",
    "HOST_CALL_COST",
    "MAX_CALL_DEPTH",
    "MIN_REGION_COST",
    "START_EXPORT",
    "instrument",
]

BULK_SHIFT = 4
DEPTH_EXPORT = "__wssp_depth"
FUEL_EXPORT = "__wssp_fuel"
HOST_CALL_COST = 10_000
MAX_CALL_DEPTH = 10_000
MIN_REGION_COST = 8
START_EXPORT = "__wssp_start"


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
_VALTYPE_BYTES = frozenset(VALTYPE_NAMES)


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
                    r = Reader(data, p, end)
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
                r = Reader(data, p, end)
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
                r = Reader(data, p, end)
                count = r.u32()
                p = r.pos + count
            elif kind == _PREFIX_FC:
                r = Reader(data, p, end)
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
            if sid == SEC_START:
                start_export = _name(START_EXPORT) + b"\x00" + wasm[start:end]
            elif sid == 0:
                r = Reader(wasm, start, end)
                if r.name() == "name":
                    names.append(wasm[start:end])
            elif sid == SEC_CODE:
                out[sid] = self.code(start, end)
            elif sid == SEC_MEMORY:
                out[sid] = self.memories(start, end)
            elif sid == SEC_TABLE:
                out[sid] = self.tables(start, end)
            else:
                out[sid] = wasm[start:end]
        if len(info.func_types) > info.imported_funcs and SEC_CODE not in out:
            raise LoadError("not a WebAssembly module: functions are declared but there is no "
                            "code section")
        fuel_global = b"\x7e\x01\x42" + _sleb(self.fuel) + b"\x0b"
        depth_global = b"\x7f\x01\x41\x00\x0b"
        out[SEC_GLOBAL] = _append(out.get(SEC_GLOBAL), fuel_global + depth_global, 2)
        fuel_index = info.imported_globals + info.defined_globals
        exports = (_name(FUEL_EXPORT) + b"\x03" + _uleb(fuel_index) +
                   _name(DEPTH_EXPORT) + b"\x03" + _uleb(fuel_index + 1) + start_export)
        out[SEC_EXPORT] = _append(out.get(SEC_EXPORT), exports, 3 if start_export else 2)
        if self.new_types:
            encoded = b"".join(b"\x60\x00" + _uleb(len(t.results)) + bytes(t.results)
                               for t in self.new_types)
            out[SEC_TYPE] = _append(out.get(SEC_TYPE), encoded, len(self.new_types))
        parts = [MAGIC, b"\x01\0\0\0"]
        for sid in sorted(out, key=SECTION_ORDER.__getitem__):
            parts += [bytes((sid,)), _uleb(len(out[sid])), out[sid]]
        for payload in names:
            parts += [b"\x00", _uleb(len(payload)), payload]
        return b"".join(parts)

    def memories(self, start: int, end: int) -> bytes:
        r = Reader(self.wasm, start, end)
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
        r = Reader(self.wasm, start, end)
        count = r.u32()
        parts = [_uleb(count)]
        for _ in range(count):
            ref = self.wasm[r.pos]
            minimum, maximum = read_table_type(r)
            maximum = MAX_TABLE_ELEMENTS if maximum is None else min(maximum,
                                                                      MAX_TABLE_ELEMENTS)
            parts.append(bytes((ref, 1)) + _uleb(minimum) + _uleb(maximum))
        return b"".join(parts)

    def code(self, start: int, end: int) -> bytes:
        info, wasm = self.info, self.wasm
        r = Reader(wasm, start, end)
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
            locals_reader = Reader(wasm, body_start, body_end)
            groups = locals_reader.u32()
            declarations = locals_reader.pos
            n_locals = len(sig.params)
            for _ in range(groups):
                n_locals += locals_reader.u32()
                read_valtype(locals_reader)
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
    r = Reader(payload)
    count = r.u32()
    return _uleb(count + n) + payload[r.pos:] + entries


def instrument(wasm: bytes, info: ModuleInfo | None = None, *, fuel: int,
               memory_cap_pages: int | None, max_depth: int = MAX_CALL_DEPTH) -> bytes:
    """The metered module (see the module docstring). ``fuel`` is the initial value of the fuel
    counter (what the start function, if any, may spend); ``memory_cap_pages`` caps the memory
    maximum (None: unchanged). ``info`` is ``parse(wasm)`` when the caller has it."""
    return _Rewriter(wasm, info if info is not None else parse(wasm), fuel, memory_cap_pages,
                     max_depth).run()
