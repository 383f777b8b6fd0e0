// wssp.ts — AssemblyScript SDK for pyscheduler fragments, ABI v1 (fragments/ABI.md).
//
// A fragment is one entry file that re-exports the SDK's two required exports and defines its
// own stages:
//
//     import { Context, Json } from "../../assembly/wssp";
//     export { wssp_abi_v1, wssp_alloc } from "../../assembly/wssp";
//
//     export function wssp_init(ctx: usize, config: usize, len: i32): i32 { ... }
//     export function wssp_filter(ctx: usize): i32 { const c = Context.at(ctx); ... }
//     export function wssp_score(ctx: usize): i32 { ... }
//
// and, for the stages of ABI minor 3 it takes (see "Stages of minor 3" below), any of
// wssp_prefilter, wssp_postfilter, wssp_reserve, wssp_unreserve, wssp_permit, wssp_prebind,
// wssp_postbind: each `(ctx: usize): i32`, returning 0 when the call worked.
//
// Build with the options in ../asconfig.json: the stub runtime (a bump allocator, no garbage
// collector), no exported runtime, no bindings. The only import the result may have is
// `env.abort` (allowed by the ABI: it traps).
//
// Text in guest memory is UTF-8 (pointer + length); AssemblyScript strings are UTF-16. The
// helpers compare the two without allocating (hot paths: label keys, values, resource names);
// the few that return a `string` (nodeName, podLabel, the JSON reader) allocate and are meant
// for wssp_init or occasional use.

// ---------------------------------------------------------------------------------------------
// Memory: wssp_alloc and the marker
// ---------------------------------------------------------------------------------------------

// The stub runtime's allocator hands out the same heap and traps when memory cannot grow; the
// ABI wants 0 instead. So wssp_alloc first makes sure the runtime will not need to grow: it
// learns where the next block goes (allocate nothing, free it again: the stub drops a freed
// last block), grows memory itself if needed (returning 0 if it cannot), then allocates and
// zero-fills.
const BLOCK_OVERHEAD: usize = 4; // the stub runtime's block header
const SLACK: usize = 32; // header plus alignment, generously

/** A pointer to `size` fresh zero-filled bytes, 16-byte aligned; 0 when out of memory. */
export function alloc(size: usize): usize {
  if (size > 0x3ffffff0) return 0; // larger than the runtime's largest block
  const probe = heap.alloc(0);
  heap.free(probe);
  const end = <u64>(probe - BLOCK_OVERHEAD) + <u64>size + <u64>SLACK;
  const have = <u64>memory.size() << 16;
  if (end > have) {
    const pages = <i32>((end - have + 0xffff) >> 16);
    if (memory.grow(pages) < 0) return 0;
  }
  const ptr = heap.alloc(size);
  memory.fill(ptr, 0, size);
  return ptr;
}

export function wssp_alloc(size: i32): usize {
  return size < 0 ? 0 : alloc(<usize>size);
}

/** ABI major 1 (the name), minor 1 (the value): the outputs are the guest's between calls.
 * The value stays 1 with the stages of minor 3: a host takes a stage because the module
 * exports its function, not because of this number, so such a module still loads on a host of
 * minor 2 for its filter and score stages. */
export function wssp_abi_v1(): i32 {
  return 1;
}

/** `Context.changedCount()` when every row must be computed (ABI.md §4.3). */
export const ALL_ROWS: u32 = 0xffffffff;

// ---------------------------------------------------------------------------------------------
// UTF-8 text: comparing, lines, integers
// ---------------------------------------------------------------------------------------------

/** The code point of `s` at UTF-16 index k (joining a surrogate pair), and its width in units. */
@inline function codePointAt(s: string, k: i32): u32 {
  const c = <u32>s.charCodeAt(k);
  if (c >= 0xd800 && c < 0xdc00 && k + 1 < s.length) {
    const d = <u32>s.charCodeAt(k + 1);
    if (d >= 0xdc00 && d < 0xe000) return 0x10000 + ((c - 0xd800) << 10) + (d - 0xdc00);
  }
  return c;
}

/** Whether the UTF-8 bytes at ptr..ptr+len spell `s`. Allocates nothing. */
export function bytesEqual(ptr: usize, len: u32, s: string): bool {
  let i: u32 = 0;
  for (let k = 0; k < s.length; k++) {
    const cp = codePointAt(s, k);
    if (cp >= 0x10000) k++;
    if (cp < 0x80) {
      if (i + 1 > len || load<u8>(ptr + i) != cp) return false;
      i += 1;
    } else if (cp < 0x800) {
      if (i + 2 > len) return false;
      if (load<u8>(ptr + i) != (0xc0 | (cp >> 6))) return false;
      if (load<u8>(ptr + i + 1) != (0x80 | (cp & 0x3f))) return false;
      i += 2;
    } else if (cp < 0x10000) {
      if (i + 3 > len) return false;
      if (load<u8>(ptr + i) != (0xe0 | (cp >> 12))) return false;
      if (load<u8>(ptr + i + 1) != (0x80 | ((cp >> 6) & 0x3f))) return false;
      if (load<u8>(ptr + i + 2) != (0x80 | (cp & 0x3f))) return false;
      i += 3;
    } else {
      if (i + 4 > len) return false;
      if (load<u8>(ptr + i) != (0xf0 | (cp >> 18))) return false;
      if (load<u8>(ptr + i + 1) != (0x80 | ((cp >> 12) & 0x3f))) return false;
      if (load<u8>(ptr + i + 2) != (0x80 | ((cp >> 6) & 0x3f))) return false;
      if (load<u8>(ptr + i + 3) != (0x80 | (cp & 0x3f))) return false;
      i += 4;
    }
  }
  return i == len;
}

/** Whether two byte ranges are equal. */
export function bytesEqualBytes(a: usize, alen: u32, b: usize, blen: u32): bool {
  if (alen != blen) return false;
  for (let i: u32 = 0; i < alen; i++) if (load<u8>(a + i) != load<u8>(b + i)) return false;
  return true;
}

/** The UTF-8 bytes at ptr..ptr+len as a string (allocates). */
export function textAt(ptr: usize, len: u32): string {
  return String.UTF8.decodeUnsafe(ptr, len);
}

/** A slice packed in one value: pointer in the high 32 bits, length in the low 32. */
export type Slice = u64;
@inline export function slice(ptr: usize, len: u32): Slice {
  return (<u64>ptr << 32) | <u64>len;
}
@inline export function slicePtr(s: Slice): usize {
  return <usize>(s >> 32);
}
@inline export function sliceLen(s: Slice): u32 {
  return <u32>s;
}
/** "not found" for functions returning a Slice (no real slice starts at address 2^32-1). */
export const NO_SLICE: Slice = 0xffffffff_00000000;

/**
 * Lines: items separated by '\n', no trailing '\n'; empty text has no items. Iterate with
 *
 *     const it = new Lines(ptr, len);   // or reset() a long-lived one, to avoid allocating
 *     while (it.next()) { it.ptr; it.len; }
 */
export class Lines {
  ptr: usize = 0;
  len: u32 = 0;
  private pos: usize;
  private end: usize;
  private done: bool;

  constructor(ptr: usize, len: u32) {
    this.pos = ptr;
    this.end = ptr + len;
    this.done = len == 0;
  }

  reset(ptr: usize, len: u32): Lines {
    this.pos = ptr;
    this.end = ptr + len;
    this.done = len == 0;
    return this;
  }

  next(): bool {
    if (this.done) return false;
    const start = this.pos;
    let p = start;
    while (p < this.end && load<u8>(p) != 10) p++;
    this.ptr = start;
    this.len = <u32>(p - start);
    if (p < this.end) this.pos = p + 1;
    else this.done = true;
    return true;
  }
}

// One shared iterator for the helpers below (fragments are single-threaded).
const scan = new Lines(0, 0);

/** Index of the first line equal to `needle`, or -1. */
export function linesFind(ptr: usize, len: u32, needle: string): i32 {
  scan.reset(ptr, len);
  let i = 0;
  while (scan.next()) {
    if (bytesEqual(scan.ptr, scan.len, needle)) return i;
    i++;
  }
  return -1;
}

/** Index of the first line equal to the bytes at needle..needle+needleLen, or -1. */
export function linesFindBytes(ptr: usize, len: u32, needle: usize, needleLen: u32): i32 {
  scan.reset(ptr, len);
  let i = 0;
  while (scan.next()) {
    if (bytesEqualBytes(scan.ptr, scan.len, needle, needleLen)) return i;
    i++;
  }
  return -1;
}

/** Line `index` (0-based) as a Slice, or NO_SLICE. */
export function linesAt(ptr: usize, len: u32, index: u32): Slice {
  scan.reset(ptr, len);
  let i: u32 = 0;
  while (scan.next()) {
    if (i == index) return slice(scan.ptr, scan.len);
    i++;
  }
  return NO_SLICE;
}

/** Number of lines. */
export function linesCount(ptr: usize, len: u32): u32 {
  if (len == 0) return 0;
  let n: u32 = 1;
  for (let i: u32 = 0; i < len; i++) if (load<u8>(ptr + i) == 10) n++;
  return n;
}

/** In "key=value" lines, the value of the first line whose key is `key`, or NO_SLICE. */
export function linesLookup(ptr: usize, len: u32, key: string): Slice {
  const keyLen = <u32>String.UTF8.byteLength(key);
  scan.reset(ptr, len);
  while (scan.next()) {
    if (scan.len > keyLen && load<u8>(scan.ptr + keyLen) == 61 /* = */ &&
        bytesEqual(scan.ptr, keyLen, key)) {
      return slice(scan.ptr + keyLen + 1, scan.len - keyLen - 1);
    }
  }
  return NO_SLICE;
}

// Result of parseInt64 (AssemblyScript has no out-parameters for value types).
let parsed: i64 = 0;

/** The value of the last successful parseInt64. */
export function parsedValue(): i64 {
  return parsed;
}

/**
 * A decimal integer the way Go's strconv.ParseInt(s, 10, 64) reads it (Kubernetes' Gt/Lt):
 * optional sign, one or more ASCII digits, within int64. The value is parsedValue().
 */
export function parseInt64(ptr: usize, len: u32): bool {
  let i: u32 = 0;
  let negative = false;
  if (len > 0) {
    const c = load<u8>(ptr);
    if (c == 43 /* + */ || c == 45 /* - */) {
      negative = c == 45;
      i = 1;
    }
  }
  if (i == len) return false;
  const limit: u64 = negative ? <u64>i64.MAX_VALUE + 1 : <u64>i64.MAX_VALUE;
  let value: u64 = 0;
  for (; i < len; i++) {
    const c = load<u8>(ptr + i);
    if (c < 48 || c > 57) return false;
    const digit = <u64>(c - 48);
    if (value > (limit - digit) / 10) return false;
    value = value * 10 + digit;
  }
  parsed = negative ? <i64>(0 - value) : <i64>value;
  return true;
}

// ---------------------------------------------------------------------------------------------
// The context (§4): a view of the 256 bytes at ctx
// ---------------------------------------------------------------------------------------------

export const STAGE_INIT: u32 = 0;
export const STAGE_FILTER: u32 = 1;
export const STAGE_SCORE: u32 = 2;
// Stages of minor 3; a module takes those whose wssp_<stage> it exports.
export const STAGE_PREFILTER: u32 = 3;
export const STAGE_POSTFILTER: u32 = 4;
export const STAGE_RESERVE: u32 = 5;
export const STAGE_UNRESERVE: u32 = 6;
export const STAGE_PERMIT: u32 = 7;
export const STAGE_PREBIND: u32 = 8;
export const STAGE_POSTBIND: u32 = 9;

// Answer codes (ABI.md "Answers"); unreserve's and postbind's answers are ignored.
export const PREFILTER_PASS: u32 = 0;
export const PREFILTER_REJECT: u32 = 1; // unschedulable, with the message
export const PREFILTER_RESTRICT: u32 = 2; // only the rows marked with setPrefilterRow
export const POSTFILTER_DEFAULT: u32 = 0; // the configured preemption and bursting
export const POSTFILTER_PREEMPT: u32 = 1; // preemption only
export const POSTFILTER_BURST: u32 = 2; // bursting only
export const POSTFILTER_WAIT: u32 = 3; // neither: the pod stays Pending
export const POSTFILTER_NOMINATE: u32 = 4; // preempt on the real node at row answer_value only
export const RESERVE_OK: u32 = 0;
export const RESERVE_REJECT: u32 = 1;
export const PERMIT_ALLOW: u32 = 0;
export const PERMIT_DENY: u32 = 1;
export const PERMIT_WAIT: u32 = 2; // answer_value: the longest wait in milliseconds, >= 1
export const PREBIND_OK: u32 = 0;
export const PREBIND_REJECT: u32 = 1;

// Why wssp_unreserve is called (the context's `cause`).
export const CAUSE_NONE: u32 = 0; // every other stage
export const CAUSE_REFUSED: u32 = 1; // a stage after reserve refused the pod (reserve, prebind)
export const CAUSE_DENIED: u32 = 2; // permit denied it: an answer or a `reject` command
export const CAUSE_TIMEOUT: u32 = 3; // its permit wait timed out
export const CAUSE_BIND_FAILED: u32 = 4; // the binding failed
export const CAUSE_GONE: u32 = 5; // the pod was deleted, or the scheduler stopped leading

/** `node_row` outside reserve .. postbind. */
export const NO_ROW: u32 = 0xffffffff;

/** A short English text for a cause, for messages ("permit wait timed out"). */
export function causeText(cause: u32): string {
  switch (cause) {
    case CAUSE_NONE: return "no cause";
    case CAUSE_REFUSED: return "refused after reserve";
    case CAUSE_DENIED: return "denied at permit";
    case CAUSE_TIMEOUT: return "permit wait timed out";
    case CAUSE_BIND_FAILED: return "binding failed";
    case CAUSE_GONE: return "pod deleted or scheduler stopped leading";
    default: return "unknown cause";
  }
}

export const NODE_PRESENT: u8 = 1;
export const NODE_UNSCHEDULABLE: u8 = 2;
export const NODE_NOT_READY: u8 = 4;
export const NODE_VIRTUAL: u8 = 8; // a cloud pool's virtual node (host minor 2)

export const OP_IN: u32 = 0;
export const OP_NOT_IN: u32 = 1;
export const OP_EXISTS: u32 = 2;
export const OP_DOES_NOT_EXIST: u32 = 3;
export const OP_GT: u32 = 4;
export const OP_LT: u32 = 5;

export const MAX_SCORE: i64 = 100;

/**
 * The context. Fields mirror ABI.md §4 (their offsets are checked at compile time below);
 * methods read the columns and the pod record. Get one with `Context.at(ctx)`.
 */
@unmanaged
export class Context {
  // host fields
  abi_version: u32; // 0
  capacity: u32; // 4    C: rows per node column
  count: u32; // 8       N: rows in use
  n_resources: u32; // 12
  resource_names: u32; // 16
  resource_names_len: u32; // 20
  allocatable: u32; // 24  i64[R x C]
  requested: u32; // 28    i64[R x C]
  node_flags: u32; // 32   u8[C]
  n_labels: u32; // 36
  label_capacity: u32; // 40
  label_keys: u32; // 44
  label_keys_len: u32; // 48
  labels: u32; // 52       i32[label_capacity x C]
  label_values: u32; // 56 u32[2 x label_capacity]
  node_names: u32; // 60   u32[2 x C]
  pod: u32; // 64
  pod_len: u32; // 68
  pod_taints: u32; // 72   u8[C]
  candidates: u32; // 76   u8[C]
  verdicts: u32; // 80     u16[C]
  scores: u32; // 84       i64[C]
  generation: u32; // 88
  stage: u32; // 92
  changed: u32; // 96      u32[C]: rows changed since this stage's last call (1.1)
  n_changed: u32; // 100
  host_minor: u32; // 104
  // stages 3-9 (1.3; zero on older hosts, which never call those stages)
  node_row: u32; // 108      host: the pod's node row (reserve..postbind), else NO_ROW
  answer: u32; // 112        guest: the stage's answer code (host writes 0)
  answer_value: u32; // 116  guest: a number going with the answer (host writes 0)
  message: u32; // 120       guest: text, why (host writes 0)
  message_len: u32; // 124
  // guest fields
  reasons: u32; // 128
  reasons_len: u32; // 132
  want_labels: u32; // 136
  want_labels_len: u32; // 140
  // stages 3-9, continued (1.3)
  output: u32; // 144        guest: command lines (host writes 0)
  output_len: u32; // 148
  waiting: u32; // 152       host: lines, the pods waiting at this fragment's permit
  waiting_len: u32; // 156
  prefilter_rows: u32; // 160  host: u8[C], zeroed before each wssp_prefilter
  cause: u32; // 164         host: why wssp_unreserve is called (CAUSE_*)
  now_ms: i64; // 168        host: wall clock, Unix milliseconds (stages 1-9)

  @inline static at(ptr: usize): Context {
    return changetype<Context>(ptr);
  }

  /** Rows to write outputs for (N). */
  @inline rows(): u32 {
    return this.count;
  }

  /** How many rows changed since this stage's previous call (`changedRow(k)` names them), or
   * ALL_ROWS. Outputs of the other rows stand from that call: reuse them only when the pod
   * inputs your rule reads are the previous call's too (ABI.md §4.3). */
  changedCount(): u32 {
    return this.host_minor < 1 || this.n_changed > this.count ? ALL_ROWS : this.n_changed;
  }

  @inline changedRow(k: u32): u32 {
    return load<u32>(<usize>this.changed + (<usize>k << 2));
  }

  // -- resources --

  /** Column of resource `name` ("cpu", "memory", "nvidia.com/gpu", ...), or -1. */
  resource(name: string): i32 {
    const r = linesFind(this.resource_names, this.resource_names_len, name);
    return r < <i32>this.n_resources ? r : -1;
  }

  /** Allocatable amount of resource column r on a row (0 for r < 0). */
  @inline allocatableOf(r: i32, row: u32): i64 {
    if (r < 0) return 0;
    return load<i64>(<usize>this.allocatable + ((<usize>r * this.capacity + row) << 3));
  }

  /** Sum of the requests of the row's pods for resource column r (0 for r < 0). */
  @inline requestedOf(r: i32, row: u32): i64 {
    if (r < 0) return 0;
    return load<i64>(<usize>this.requested + ((<usize>r * this.capacity + row) << 3));
  }

  // -- node flags, names, per-pod columns, outputs --

  @inline flags(row: u32): u8 {
    return load<u8>(this.node_flags + row);
  }
  @inline present(row: u32): bool {
    return (this.flags(row) & NODE_PRESENT) != 0;
  }
  @inline unschedulable(row: u32): bool {
    return (this.flags(row) & NODE_UNSCHEDULABLE) != 0;
  }
  @inline notReady(row: u32): bool {
    return (this.flags(row) & NODE_NOT_READY) != 0;
  }

  @inline virtual(row: u32): bool {
    return (this.flags(row) & NODE_VIRTUAL) != 0;
  }

  /** Row's node name (allocates a string). */
  nodeName(row: u32): string {
    const at = <usize>this.node_names + (<usize>row << 3);
    return textAt(load<u32>(at), load<u32>(at + 4));
  }

  /** The node has a NoSchedule/NoExecute taint the pod does not tolerate. */
  @inline podTaint(row: u32): bool {
    return (load<u8>(this.pod_taints + row) & 1) != 0;
  }

  /** The node is cordoned and the pod does not tolerate
   *  node.kubernetes.io/unschedulable:NoSchedule (kube's NodeUnschedulable). */
  @inline podCordoned(row: u32): bool {
    return (load<u8>(this.pod_taints + row) & 2) != 0;
  }

  /** During wssp_score: the row is to be scored. */
  @inline candidate(row: u32): bool {
    return load<u8>(this.candidates + row) != 0;
  }

  /** Filter output: 0 feasible, k >= 1 a reason id from addReason(). */
  @inline setVerdict(row: u32, reason: u32): void {
    store<u16>(<usize>this.verdicts + (<usize>row << 1), <u16>reason);
  }

  /** Score output, clamped to 0..100 so an arithmetic slip cannot fail the call. */
  @inline setScore(row: u32, score: i64): void {
    if (score < 0) score = 0;
    if (score > MAX_SCORE) score = MAX_SCORE;
    store<i64>(<usize>this.scores + (<usize>row << 3), score);
  }

  // -- labels --

  /** Label key column of `key`, or -1 when it is not resident (ask with wantLabel in init). */
  labelColumn(key: string): i32 {
    const l = linesFind(this.label_keys, this.label_keys_len, key);
    return l < <i32>this.n_labels ? l : -1;
  }

  /** Value id of label column l on a row; -1 when the node lacks the label (or l < 0). */
  @inline labelId(l: i32, row: u32): i32 {
    if (l < 0) return -1;
    return load<i32>(<usize>this.labels + ((<usize>l * this.capacity + row) << 2));
  }

  /** The value lines of label column l as a Slice (value id v is line v). */
  labelValues(l: i32): Slice {
    const at = <usize>this.label_values + (<usize>l << 3);
    return slice(load<u32>(at), load<u32>(at + 4));
  }

  /** Value id of `value` in label column l, or -1 when no node has it (yet). */
  labelValueId(l: i32, value: string): i32 {
    if (l < 0) return -1;
    const values = this.labelValues(l);
    return linesFind(slicePtr(values), sliceLen(values), value);
  }

  /** Row's value of label column l as a Slice, or NO_SLICE when the node lacks the label. */
  labelValue(l: i32, row: u32): Slice {
    const id = this.labelId(l, row);
    if (id < 0) return NO_SLICE;
    const values = this.labelValues(l);
    return linesAt(slicePtr(values), sliceLen(values), <u32>id);
  }

  // -- the pod record (§4.2) --

  @inline private podR(): u32 {
    return load<u32>(this.pod + 4);
  }
  @inline private tail(): usize {
    return <usize>this.pod + 8 + (<usize>this.podR() << 3);
  }

  /** The pod's request for resource column r (0 for r < 0). */
  podRequest(r: i32): i64 {
    if (r < 0 || <u32>r >= this.podR()) return 0;
    return load<i64>(<usize>this.pod + 8 + (<usize>r << 3));
  }
  podNonzeroCpu(): i64 {
    return load<i64>(this.tail());
  }
  podNonzeroMemory(): i64 {
    return load<i64>(this.tail() + 8);
  }
  podPriority(): i32 {
    return load<i32>(this.tail() + 16);
  }
  podTerms(): u32 {
    return load<u32>(this.tail() + 20);
  }
  podRequirementCount(): u32 {
    return load<u32>(this.tail() + 24);
  }
  /** Address of the first requirement. */
  podRequirements(): usize {
    return <usize>this.pod + load<u32>(this.tail() + 28);
  }
  private podText(field: usize): Slice {
    const at = this.tail() + field;
    return slice(<usize>this.pod + load<u32>(at), load<u32>(at + 4));
  }
  podNamespace(): string {
    const s = this.podText(32);
    return textAt(slicePtr(s), sliceLen(s));
  }
  podName(): string {
    const s = this.podText(40);
    return textAt(slicePtr(s), sliceLen(s));
  }
  /** The pod's namespace as a Slice (no allocation). */
  podNamespaceSlice(): Slice {
    return this.podText(32);
  }
  /** The pod's name as a Slice (no allocation). */
  podNameSlice(): Slice {
    return this.podText(40);
  }
  /** The pod's uid (record offset 72 + 8R, minor 3) as a Slice; empty (length 0) when the
   * record is older and does not cover the field (its `size` says how far it goes). */
  podUid(): Slice {
    const size = load<u32>(this.pod);
    const at = <u32>(this.tail() - <usize>this.pod) + 64;
    if (size > this.pod_len || at + 8 > size) return slice(0, 0);
    const offset = load<u32>(<usize>this.pod + at);
    const len = load<u32>(<usize>this.pod + at + 4);
    if (offset > size || len > size - offset) return slice(0, 0);
    return slice(<usize>this.pod + offset, len);
  }
  /** The pod's labels as "key=value" lines. */
  podLabels(): Slice {
    return this.podText(48);
  }
  /** The pod's annotations as "key=value" lines. */
  podAnnotations(): Slice {
    return this.podText(56);
  }
  /** Value of the pod's label `key` as a Slice, or NO_SLICE. */
  podLabel(key: string): Slice {
    const s = this.podLabels();
    return linesLookup(slicePtr(s), sliceLen(s), key);
  }
  /** Value of the pod's annotation `key` as a Slice, or NO_SLICE. */
  podAnnotation(key: string): Slice {
    const s = this.podAnnotations();
    return linesLookup(slicePtr(s), sliceLen(s), key);
  }

  // -- node constraints --

  /** Whether the row satisfies one requirement. */
  requirementMatches(req: Requirement, row: u32): bool {
    const id = this.labelId(<i32>req.label, row);
    const op = req.op;
    if (op == OP_IN || op == OP_NOT_IN) {
      let found = false;
      if (id >= 0) {
        for (let k: u32 = 0; k < req.n_values; k++) {
          if (req.value(k) == <i64>id) {
            found = true;
            break;
          }
        }
      }
      return op == OP_IN ? found : !found;
    }
    if (op == OP_EXISTS) return id >= 0;
    if (op == OP_DOES_NOT_EXIST) return id < 0;
    if (op == OP_GT || op == OP_LT) {
      if (req.n_values < 1) return false;
      const text = this.labelValue(<i32>req.label, row);
      if (text == NO_SLICE || !parseInt64(slicePtr(text), sliceLen(text))) return false;
      const bound = req.value(0);
      return op == OP_GT ? parsed > bound : parsed < bound;
    }
    return false; // an operator from a newer minor version: fail closed
  }

  /** Every requirement of `term` holds (a term >= 1 without requirements matches nothing, as
   * in Kubernetes; term 0 without requirements matches every node). */
  termMatches(term: u32, row: u32): bool {
    let ptr = this.podRequirements();
    const end = <usize>this.pod + this.pod_len;
    let any = false;
    for (let i: u32 = 0, n = this.podRequirementCount(); i < n && ptr + 16 <= end; i++) {
      const req = Requirement.at(ptr);
      if (req.term == term) {
        any = true;
        if (!this.requirementMatches(req, row)) return false;
      }
      ptr = req.next();
    }
    return any || term == 0;
  }

  /** The pod's node constraints: nodeSelector AND (term 1 OR term 2 ...). */
  nodeMatches(row: u32): bool {
    const terms = this.podTerms();
    if (terms == 0 && this.podRequirementCount() == 0) return true;
    if (!this.termMatches(0, row)) return false;
    if (terms == 0) return true;
    for (let k: u32 = 1; k <= terms; k++) if (this.termMatches(k, row)) return true;
    return false;
  }

  // -- stages of minor 3 (prefilter .. postbind) --
  //
  // The host zeroes answer, answer_value, message and output before every call of these
  // stages: a stage that sets nothing answers 0 (pass, default, ok, allow) with no message and
  // no command. Message and output text go into two buffers of the SDK (allocated with alloc(),
  // reused from call to call, growing only when a call needs more than any before): building
  // them allocates nothing in the steady state. Every helper publishes the buffer's pointer and
  // length into the context at once; the first one used in a call starts from empty. Text is
  // copied, so it may come from anywhere (literals, the pod record, the waiting lines).

  /** The row of the node the pod is placed on (reserve .. postbind), NO_ROW in the others. */
  @inline nodeRow(): u32 {
    return this.node_row;
  }

  /** Wall clock at the call, Unix milliseconds (0 during init and on older hosts). */
  @inline nowMs(): i64 {
    return this.now_ms;
  }

  @inline setAnswer(code: u32): void {
    this.answer = code;
  }

  @inline setAnswerValue(value: u32): void {
    this.answer_value = value;
  }

  /** During wssp_prefilter with PREFILTER_RESTRICT: keep the row a candidate (the host zeroes
   * every row before the call, so unmarked rows are taken away). */
  @inline setPrefilterRow(row: u32, keep: bool): void {
    store<u8>(<usize>this.prefilter_rows + row, keep ? 1 : 0);
  }

  /** Replace this call's message (at most 1024 bytes are read); false when out of memory. */
  setMessage(text: string): bool {
    this.messageOf().len = 0;
    return this.messageAdd(text);
  }

  /** Append to this call's message. */
  messageAdd(text: string): bool {
    return this.publishMessage(this.messageOf().addString(text));
  }

  messageAddSlice(text: Slice): bool {
    return this.publishMessage(this.messageOf().addBytes(slicePtr(text), sliceLen(text)));
  }

  /** Append an integer in decimal. */
  messageAddInt(value: i64): bool {
    return this.publishMessage(this.messageOf().addInt(value));
  }

  /** `allow <uid>`: the pod waiting at this fragment's permit goes on to bind (prefilter,
   * postfilter, reserve, unreserve, permit). False when out of memory or uid has a newline. */
  outputAllow(uid: Slice): bool {
    return this.outputLine("allow", uid);
  }

  /** `reject <uid>`: the waiting pod is refused (its unreserve runs with CAUSE_DENIED, and this
   * call's message tells it why). Same stages as outputAllow. */
  outputReject(uid: Slice): bool {
    return this.outputLine("reject", uid);
  }

  /** `label <key>=<value>` (prebind only; the key must be in the resource's allowlist). */
  outputLabel(key: string, value: string): bool {
    return this.outputPair("label", key, value);
  }

  /** `annotation <key>=<value>` (prebind only). */
  outputAnnotation(key: string, value: string): bool {
    return this.outputPair("annotation", key, value);
  }

  /** Drop this call's commands. */
  outputClear(): void {
    const out = outputBuf();
    out.len = 0;
    this.output = <u32>out.ptr;
    this.output_len = 0;
  }

  /** The message buffer, emptied when the context no longer shows it (a new call). */
  private messageOf(): ByteBuf {
    const b = messageBuf();
    if (this.message != <u32>b.ptr || this.message_len != b.len) b.len = 0;
    return b;
  }

  private publishMessage(ok: bool): bool {
    const b = messageBuf();
    this.message = <u32>b.ptr;
    this.message_len = b.len;
    return ok;
  }

  private outputOf(): ByteBuf {
    const b = outputBuf();
    if (this.output != <u32>b.ptr || this.output_len != b.len) b.len = 0;
    return b;
  }

  private publishOutput(): bool {
    const b = outputBuf();
    this.output = <u32>b.ptr;
    this.output_len = b.len;
    return true;
  }

  /** One line "<verb> <arg>", all or nothing. */
  private outputLine(verb: string, arg: Slice): bool {
    const ptr = slicePtr(arg);
    const len = sliceLen(arg);
    for (let i: u32 = 0; i < len; i++) if (load<u8>(ptr + i) == 10) return false;
    const out = this.outputOf();
    if (!out.reserve(2 + <u32>verb.length + len)) return false;
    if (out.len > 0) out.addByte(10);
    out.addString(verb);
    out.addByte(32);
    out.addBytes(ptr, len);
    return this.publishOutput();
  }

  /** One line "<verb> <key>=<value>", all or nothing. */
  private outputPair(verb: string, key: string, value: string): bool {
    if (key.indexOf("\n") >= 0 || value.indexOf("\n") >= 0) return false;
    const out = this.outputOf();
    const need = 3 + <u32>verb.length + <u32>String.UTF8.byteLength(key) +
      <u32>String.UTF8.byteLength(value);
    if (!out.reserve(need)) return false;
    if (out.len > 0) out.addByte(10);
    out.addString(verb);
    out.addByte(32);
    out.addString(key);
    out.addByte(61);
    out.addString(value);
    return this.publishOutput();
  }

  // -- init: reasons and wanted labels --

  /** Declare a failure reason (in wssp_init); returns its id, 0 on failure. */
  addReason(reason: string): u32 {
    const id = reasonsText.add(reason);
    this.reasons = <u32>reasonsText.ptr;
    this.reasons_len = reasonsText.len;
    return id;
  }

  /** Ask for a label key column from the start (in wssp_init); false on failure. */
  wantLabel(key: string): bool {
    const n = wantText.add(key);
    this.want_labels = <u32>wantText.ptr;
    this.want_labels_len = wantText.len;
    return n != 0;
  }
}

// The layout must be the ABI's, byte for byte.
// @ts-ignore: compile-time check
if (offsetof<Context>("stage") != 92) ERROR("Context.stage must be at offset 92");
// @ts-ignore: compile-time check
if (offsetof<Context>("host_minor") != 104) ERROR("Context.host_minor must be at offset 104");
// @ts-ignore: compile-time check
if (offsetof<Context>("reasons") != 128) ERROR("Context.reasons must be at offset 128");
// @ts-ignore: compile-time check
if (offsetof<Context>("want_labels_len") != 140) ERROR("Context.want_labels_len must be at 140");
// @ts-ignore: compile-time check
if (offsetof<Context>("node_row") != 108) ERROR("Context.node_row must be at offset 108");
// @ts-ignore: compile-time check
if (offsetof<Context>("message_len") != 124) ERROR("Context.message_len must be at offset 124");
// @ts-ignore: compile-time check
if (offsetof<Context>("output") != 144) ERROR("Context.output must be at offset 144");
// @ts-ignore: compile-time check
if (offsetof<Context>("waiting") != 152) ERROR("Context.waiting must be at offset 152");
// @ts-ignore: compile-time check
if (offsetof<Context>("cause") != 164) ERROR("Context.cause must be at offset 164");
// @ts-ignore: compile-time check
if (offsetof<Context>("now_ms") != 168) ERROR("Context.now_ms must be at offset 168");

/** A requirement of the pod record: 16 bytes, then n_values i64 values. */
@unmanaged
export class Requirement {
  term: u32; // 0: nodeSelector; k >= 1: required node affinity term k
  label: u32; // label key column
  op: u32; // OP_*
  n_values: u32;

  @inline static at(ptr: usize): Requirement {
    return changetype<Requirement>(ptr);
  }
  /** Value k: a value id (In/NotIn, -1: no node has it) or the integer (Gt/Lt). */
  @inline value(k: u32): i64 {
    return load<i64>(changetype<usize>(this) + 16 + (<usize>k << 3));
  }
  /** Address of the next requirement. */
  @inline next(): usize {
    return changetype<usize>(this) + 16 + (<usize>this.n_values << 3);
  }
}

/** A growing lines buffer in guest memory (old buffers are left behind: init runs once). */
class TextBuilder {
  ptr: usize = 0;
  len: u32 = 0;
  cap: u32 = 0;
  count: u32 = 0;

  /** Append a line; returns its 1-based number, 0 when out of memory or it has a '\n'. */
  add(line: string): u32 {
    if (line.indexOf("\n") >= 0) return 0;
    const bytes = <u32>String.UTF8.byteLength(line);
    const need = this.len + (this.count > 0 ? 1 : 0) + bytes;
    if (need > this.cap) {
      let cap: u32 = this.cap > 0 ? this.cap : 64;
      while (cap < need) cap *= 2;
      const bigger = alloc(cap);
      if (bigger == 0) return 0;
      if (this.len > 0) memory.copy(bigger, this.ptr, this.len);
      this.ptr = bigger;
      this.cap = cap;
    }
    if (this.count > 0) {
      store<u8>(this.ptr + this.len, 10);
      this.len++;
    }
    String.UTF8.encodeUnsafe(changetype<usize>(line), line.length, this.ptr + this.len);
    this.len += bytes;
    return ++this.count;
  }
}

const reasonsText = new TextBuilder();
const wantText = new TextBuilder();

/**
 * A reusable byte buffer in guest memory (allocated with alloc()). Growing leaves the old block
 * behind (nothing is freed): it at most doubles the memory a buffer holds, once. The add
 * methods return false when out of memory, having appended nothing.
 */
@unmanaged
export class ByteBuf {
  ptr: usize = 0;
  len: u32 = 0;
  cap: u32 = 0;

  /** Room for `extra` more bytes. */
  reserve(extra: u32): bool {
    const need = <u64>this.len + <u64>extra;
    if (need <= <u64>this.cap) return true;
    if (need > 0x40000000) return false;
    let cap: u32 = this.cap > 0 ? this.cap : 256;
    while (<u64>cap < need) cap *= 2;
    const bigger = alloc(cap);
    if (bigger == 0) return false;
    if (this.len > 0) memory.copy(bigger, this.ptr, this.len);
    this.ptr = bigger;
    this.cap = cap;
    return true;
  }

  @inline clear(): void {
    this.len = 0;
  }

  @inline slice(): Slice {
    return slice(this.ptr, this.len);
  }

  addByte(b: u8): bool {
    if (!this.reserve(1)) return false;
    store<u8>(this.ptr + this.len, b);
    this.len++;
    return true;
  }

  addBytes(ptr: usize, len: u32): bool {
    if (!this.reserve(len)) return false;
    memory.copy(this.ptr + this.len, ptr, len);
    this.len += len;
    return true;
  }

  /** The string's UTF-8 bytes (no allocation). */
  addString(s: string): bool {
    const bytes = <u32>String.UTF8.byteLength(s);
    if (!this.reserve(bytes)) return false;
    String.UTF8.encodeUnsafe(changetype<usize>(s), s.length, this.ptr + this.len);
    this.len += bytes;
    return true;
  }

  /** An integer in decimal. */
  addInt(value: i64): bool {
    let v: u64 = value < 0 ? 0 - <u64>value : <u64>value;
    let n: u32 = 0;
    let t = v;
    do {
      n++;
      t /= 10;
    } while (t != 0);
    if (!this.reserve(n + 1)) return false;
    if (value < 0) {
      store<u8>(this.ptr + this.len, 45 /* - */);
      this.len++;
    }
    for (let k = n; k > 0; k--) {
      store<u8>(this.ptr + this.len + k - 1, <u8>(48 + v % 10));
      v /= 10;
    }
    this.len += n;
    return true;
  }
}

// The SDK's message and output buffers, made on first use (a module without the stages of
// minor 3 carries neither).
let messageBuffer: ByteBuf | null = null;
let outputBuffer: ByteBuf | null = null;

function messageBuf(): ByteBuf {
  let b = messageBuffer;
  if (b == null) messageBuffer = b = new ByteBuf();
  return b;
}

function outputBuf(): ByteBuf {
  let b = outputBuffer;
  if (b == null) outputBuffer = b = new ByteBuf();
  return b;
}

/**
 * The pods waiting at this fragment's permit (the context's `waiting` lines, minor 3): one line
 * `<uid> <namespace>/<name> <node> <labels>`, labels as `k=v,k=v`. The parts are Slices into the
 * host's text (valid during the call). Make one iterator at module level and reset it per call:
 *
 *     const waiting = new Waiting();
 *     ...
 *     waiting.reset(c);
 *     while (waiting.next()) {
 *       const group = waiting.label("pod-group.wssp.io/name");   // NO_SLICE when absent
 *       if (group != NO_SLICE) c.outputAllow(waiting.uid);
 *     }
 *
 * Lines not of that shape are skipped.
 */
export class Waiting {
  uid: Slice = 0;
  ns: Slice = 0; // namespace
  name: Slice = 0;
  node: Slice = 0;
  labels: Slice = 0; // k=v,k=v
  private lines: Lines = new Lines(0, 0);

  reset(c: Context): Waiting {
    this.lines.reset(c.waiting, c.waiting_len);
    return this;
  }

  next(): bool {
    while (this.lines.next()) if (this.parse(this.lines.ptr, this.lines.len)) return true;
    return false;
  }

  /** Split one line into the fields; false when it is not of the documented shape. */
  parse(ptr: usize, len: u32): bool {
    let start: u32 = 0;
    let k = 0;
    let uid: Slice = 0;
    let path: Slice = 0;
    let node: Slice = 0;
    for (let i: u32 = 0; i < len && k < 3; i++) {
      if (load<u8>(ptr + i) != 32) continue;
      const part = slice(ptr + start, i - start);
      if (k == 0) uid = part;
      else if (k == 1) path = part;
      else node = part;
      k++;
      start = i + 1;
    }
    if (k < 3) return false;
    const pathPtr = slicePtr(path);
    const pathLen = sliceLen(path);
    let slash: u32 = 0;
    while (slash < pathLen && load<u8>(pathPtr + slash) != 47 /* / */) slash++;
    if (slash == pathLen) return false;
    this.uid = uid;
    this.ns = slice(pathPtr, slash);
    this.name = slice(pathPtr + slash + 1, pathLen - slash - 1);
    this.node = node;
    this.labels = slice(ptr + start, len - start);
    return true;
  }

  /** The value of the current pod's label `key` as a Slice, or NO_SLICE. */
  label(key: string): Slice {
    const keyLen = <u32>String.UTF8.byteLength(key);
    let p = slicePtr(this.labels);
    const end = p + sliceLen(this.labels);
    while (p < end) {
      const item = p;
      while (p < end && load<u8>(p) != 44 /* , */) p++;
      const n = <u32>(p - item);
      if (n > keyLen && load<u8>(item + keyLen) == 61 /* = */ && bytesEqual(item, keyLen, key)) {
        return slice(item + keyLen + 1, n - keyLen - 1);
      }
      p++;
    }
    return NO_SLICE;
  }
}

// ---------------------------------------------------------------------------------------------
// A small JSON reader for flat configuration objects (meant for wssp_init: it allocates)
// ---------------------------------------------------------------------------------------------

/**
 * The top-level object's members by key: strings, integers, booleans, arrays of strings.
 * Nested values are skipped correctly but not read.
 *
 *     const cfg = new Json(config, len);
 *     const label = cfg.getString("label", "cost-tier");
 *     const allowed = cfg.getStringArray("allowed");   // null when absent
 */
export class Json {
  private start: usize;
  private end: usize;
  // the last value found by find()
  private vstart: usize = 0;
  private vend: usize = 0;

  constructor(ptr: usize, len: i32) {
    this.start = ptr;
    this.end = ptr + (len > 0 ? <usize>len : <usize>0);
  }

  private ws(p: usize, end: usize): usize {
    while (p < end) {
      const c = load<u8>(p);
      if (c != 32 && c != 9 && c != 10 && c != 13) break;
      p++;
    }
    return p;
  }

  /** p at '"': the position after the closing quote, or 0. */
  private skipString(p: usize, end: usize): usize {
    for (p++; p < end; p++) {
      const c = load<u8>(p);
      if (c == 92 /* \ */) p++;
      else if (c == 34 /* " */) return p + 1;
    }
    return 0;
  }

  /** The position after the value starting at p, or 0. */
  private skipValue(p: usize, end: usize): usize {
    p = this.ws(p, end);
    if (p >= end) return 0;
    const first = load<u8>(p);
    if (first == 34) return this.skipString(p, end);
    if (first == 123 /* { */ || first == 91 /* [ */) {
      let depth = 0;
      while (p < end) {
        const c = load<u8>(p);
        if (c == 34) {
          p = this.skipString(p, end);
          if (p == 0) return 0;
          continue;
        }
        if (c == 123 || c == 91) depth++;
        if (c == 125 || c == 93) {
          if (--depth == 0) return p + 1;
        }
        p++;
      }
      return 0;
    }
    const from = p;
    while (p < end) {
      const c = load<u8>(p);
      if (c == 44 || c == 125 || c == 93 || c == 32 || c == 9 || c == 10 || c == 13) break;
      p++;
    }
    return p > from ? p : 0;
  }

  /** Find the member `key`; its value is then vstart..vend. */
  private find(key: string): bool {
    let p = this.ws(this.start, this.end);
    const end = this.end;
    if (p >= end || load<u8>(p) != 123) return false;
    p++;
    while (true) {
      p = this.ws(p, end);
      if (p >= end || load<u8>(p) != 34) return false;
      const name = p + 1;
      const after = this.skipString(p, end);
      if (after == 0) return false;
      const nameLen = <u32>(after - 1 - name);
      p = this.ws(after, end);
      if (p >= end || load<u8>(p) != 58 /* : */) return false;
      p = this.ws(p + 1, end);
      const valueEnd = this.skipValue(p, end);
      if (valueEnd == 0) return false;
      if (bytesEqual(name, nameLen, key)) {
        this.vstart = p;
        this.vend = valueEnd;
        return true;
      }
      p = this.ws(valueEnd, end);
      if (p < end && load<u8>(p) == 44) {
        p++;
        continue;
      }
      return false;
    }
  }

  /** Whether the object has member `key`. */
  has(key: string): bool {
    return this.find(key);
  }

  /** Whether member `key` is an integer (read it with getInt). */
  hasInt(key: string): bool {
    return this.find(key) && parseInt64(this.vstart, <u32>(this.vend - this.vstart));
  }

  /** The object member `key` as a Json of its own (read with the same methods), or null when
   * absent or not an object. */
  getObject(key: string): Json | null {
    if (!this.find(key) || load<u8>(this.vstart) != 123) return null;
    return new Json(this.vstart, <i32>(this.vend - this.vstart));
  }

  /** An object member whose values are all integers (`"groups": {"a": 2, "b": 4}`) as a Map
   * from the member names (escapes decoded; the first of duplicate names counts); null when
   * absent, not an object, malformed, or when a value is not an integer. */
  getIntMap(key: string): Map<string, i64> | null {
    if (!this.find(key) || load<u8>(this.vstart) != 123) return null;
    const end = this.vend - 1; // at '}'
    let p = this.vstart + 1;
    const out = new Map<string, i64>();
    while (true) {
      p = this.ws(p, end);
      if (p < end && load<u8>(p) == 44 && out.size > 0) p = this.ws(p + 1, end);
      if (p >= end) return out;
      if (load<u8>(p) != 34) return null;
      const after = this.skipString(p, end);
      if (after == 0) return null;
      const name = decodeJsonString(p, after);
      if (name == null) return null;
      p = this.ws(after, end);
      if (p >= end || load<u8>(p) != 58 /* : */) return null;
      p = this.ws(p + 1, end);
      const valueEnd = this.skipValue(p, end);
      if (valueEnd == 0 || !parseInt64(p, <u32>(valueEnd - p))) return null;
      if (!out.has(name)) out.set(name, parsed);
      p = valueEnd;
    }
  }

  /** A string member (escapes decoded), or `fallback` when absent or not a string. */
  getString(key: string, fallback: string | null = null): string | null {
    if (!this.find(key) || load<u8>(this.vstart) != 34) return fallback;
    return decodeJsonString(this.vstart, this.vend);
  }

  /** An integer member, or `fallback`. */
  getInt(key: string, fallback: i64 = 0): i64 {
    if (!this.find(key)) return fallback;
    return parseInt64(this.vstart, <u32>(this.vend - this.vstart)) ? parsed : fallback;
  }

  /** A boolean member, or `fallback`. */
  getBool(key: string, fallback: bool = false): bool {
    if (!this.find(key)) return fallback;
    const len = <u32>(this.vend - this.vstart);
    if (bytesEqual(this.vstart, len, "true")) return true;
    if (bytesEqual(this.vstart, len, "false")) return false;
    return fallback;
  }

  /** The string elements of an array member (others skipped), or null when absent. */
  getStringArray(key: string): string[] | null {
    if (!this.find(key) || load<u8>(this.vstart) != 91) return null;
    const out = new Array<string>();
    const end = this.vend - 1; // at ']'
    let p = this.vstart + 1;
    while (true) {
      p = this.ws(p, end);
      if (p < end && load<u8>(p) == 44) p = this.ws(p + 1, end);
      if (p >= end) break;
      const after = this.skipValue(p, end);
      if (after == 0) break;
      if (load<u8>(p) == 34) {
        const s = decodeJsonString(p, after);
        if (s != null) out.push(s);
      }
      p = after;
    }
    return out;
  }
}

function hexDigit(c: u32): i32 {
  if (c >= 48 && c <= 57) return <i32>(c - 48);
  if (c >= 97 && c <= 102) return <i32>(c - 87);
  if (c >= 65 && c <= 70) return <i32>(c - 55);
  return -1;
}

/** Decode the JSON string at start..end (quotes included); null on a malformed escape. */
function decodeJsonString(start: usize, end: usize): string | null {
  const from = start + 1;
  const to = end - 1;
  let plain = true;
  for (let p = from; p < to; p++) if (load<u8>(p) == 92) plain = false;
  if (plain) return textAt(from, <u32>(to - from));
  // Decode into UTF-8 scratch (never longer than the source), then into a string.
  const buf = heap.alloc(to - from);
  let n: usize = 0;
  for (let p = from; p < to; p++) {
    const c = load<u8>(p);
    if (c != 92) {
      store<u8>(buf + n++, c);
      continue;
    }
    if (++p >= to) return null;
    const e = load<u8>(p);
    if (e == 34 || e == 92 || e == 47) store<u8>(buf + n++, e);
    else if (e == 98) store<u8>(buf + n++, 8);
    else if (e == 102) store<u8>(buf + n++, 12);
    else if (e == 110) store<u8>(buf + n++, 10);
    else if (e == 114) store<u8>(buf + n++, 13);
    else if (e == 116) store<u8>(buf + n++, 9);
    else if (e == 117) {
      let cp: u32 = 0;
      for (let k = 0; k < 4; k++) {
        if (++p >= to) return null;
        const h = hexDigit(load<u8>(p));
        if (h < 0) return null;
        cp = cp * 16 + <u32>h;
      }
      if (cp >= 0xd800 && cp < 0xdc00 && p + 6 < to && load<u8>(p + 1) == 92 &&
          load<u8>(p + 2) == 117) {
        let low: u32 = 0;
        let ok = true;
        for (let k: usize = 3; k < 7; k++) {
          const h = hexDigit(load<u8>(p + k));
          if (h < 0) ok = false;
          low = low * 16 + <u32>(h < 0 ? 0 : h);
        }
        if (ok && low >= 0xdc00 && low < 0xe000) {
          cp = 0x10000 + ((cp - 0xd800) << 10) + (low - 0xdc00);
          p += 6;
        }
      }
      if (cp < 0x80) {
        store<u8>(buf + n++, <u8>cp);
      } else if (cp < 0x800) {
        store<u8>(buf + n++, <u8>(0xc0 | (cp >> 6)));
        store<u8>(buf + n++, <u8>(0x80 | (cp & 0x3f)));
      } else if (cp < 0x10000) {
        store<u8>(buf + n++, <u8>(0xe0 | (cp >> 12)));
        store<u8>(buf + n++, <u8>(0x80 | ((cp >> 6) & 0x3f)));
        store<u8>(buf + n++, <u8>(0x80 | (cp & 0x3f)));
      } else {
        store<u8>(buf + n++, <u8>(0xf0 | (cp >> 18)));
        store<u8>(buf + n++, <u8>(0x80 | ((cp >> 12) & 0x3f)));
        store<u8>(buf + n++, <u8>(0x80 | ((cp >> 6) & 0x3f)));
        store<u8>(buf + n++, <u8>(0x80 | (cp & 0x3f)));
      }
    } else return null;
  }
  return textAt(buf, <u32>n);
}
