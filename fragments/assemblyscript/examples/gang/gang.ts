// gang (AssemblyScript): place a pod group all at once or not at all. The same rule as
// fragments/examples/gang/gang.c, written with the AssemblyScript SDK; both give the same
// answers, messages and commands (see fragments/examples/gang/README.md).
//
// A pod belongs to a group when it carries the group label (config "groupLabel", default
// "pod-group.wssp.io/name"); groups are per namespace. Its minMember is its annotation (config
// "minMemberAnnotation", default "pod-group.wssp.io/min-member"), else config "groups"
// {"<group>": minMember}; without either it is not gang-scheduled and passes every stage.
//
//   permit      wait (at most config "timeoutSeconds", default 60) until minMember members of
//               the group are reserved; the member completing the group allows every waiting one
//   unreserve   reject every waiting member of the group (a timeout of one releases them all)
//   postfilter  a member fits no node: reject every waiting member of the group
//   prefilter   refuse a group pod while members of another group wait at permit (when two
//               groups wait, the first in (namespace, name) order goes on)
//
// No state is kept between calls: everything comes from the pod record and the waiting lines.
// Per call nothing is allocated (Slices into the host's text, the SDK's reused buffers).

import {
  Context, Json, NO_SLICE, PERMIT_WAIT, PREFILTER_REJECT, Slice, Waiting,
  bytesEqual, bytesEqualBytes, causeText, linesLookup, parseInt64, parsedValue, slice, slicePtr,
  sliceLen,
} from "../../assembly/wssp";
export { wssp_abi_v1, wssp_alloc } from "../../assembly/wssp";

let groupLabel = "pod-group.wssp.io/name";
let minAnnotation = "pod-group.wssp.io/min-member";
let timeoutMs: u32 = 60000;
let groupNames: string[] = [];
let groupMins: i64[] = [];

/** A string member: absent -> fallback; present but not a non-empty string -> null. */
function configString(cfg: Json, key: string, fallback: string): string | null {
  if (!cfg.has(key)) return fallback;
  const s = cfg.getString(key);
  return s != null && s.length > 0 ? s : null;
}

export function wssp_init(ctx: usize, config: usize, len: i32): i32 {
  const cfg = new Json(config, len);
  const label = configString(cfg, "groupLabel", groupLabel);
  const annotation = configString(cfg, "minMemberAnnotation", minAnnotation);
  if (label == null || annotation == null) return 1;
  groupLabel = label;
  minAnnotation = annotation;
  if (cfg.has("timeoutSeconds")) {
    if (!cfg.hasInt("timeoutSeconds")) return 1;
    const seconds = cfg.getInt("timeoutSeconds");
    if (seconds < 1 || seconds > 4294967) return 1;
    timeoutMs = <u32>(seconds * 1000);
  }
  if (cfg.has("groups")) {
    const groups = cfg.getIntMap("groups");
    if (groups == null) return 1;
    const names = groups.keys();
    for (let k = 0; k < names.length; k++) {
      const name = unchecked(names[k]);
      const min = groups.get(name);
      if (min < 1) return 1;
      groupNames.push(name);
      groupMins.push(min);
    }
  }
  return 0;
}

// The pod of the call (read by readPod).
const NOT_GANG = 0;
const GANG = 1;
const BAD_MIN = 2;
let podNs: Slice = 0;
let podName: Slice = 0;
let podUid: Slice = 0;
let podGroup: Slice = 0;
let podMin: i64 = 0;
let badMin: Slice = 0; // the annotation's text when BAD_MIN

const waiting = new Waiting();

/** config groups[name] for a group name, or 0. */
function configuredMin(group: Slice): i64 {
  for (let k = 0; k < groupNames.length; k++) {
    if (bytesEqual(slicePtr(group), sliceLen(group), unchecked(groupNames[k]))) {
      return unchecked(groupMins[k]);
    }
  }
  return 0;
}

function readPod(c: Context): i32 {
  podNs = c.podNamespaceSlice();
  podName = c.podNameSlice();
  podUid = c.podUid();
  podGroup = c.podLabel(groupLabel);
  if (podGroup == NO_SLICE || sliceLen(podGroup) == 0) return NOT_GANG;
  const annotations = c.podAnnotations();
  badMin = linesLookup(slicePtr(annotations), sliceLen(annotations), minAnnotation);
  if (badMin != NO_SLICE) {
    if (parseInt64(slicePtr(badMin), sliceLen(badMin)) && parsedValue() >= 1) {
      podMin = parsedValue();
      return GANG;
    }
    return BAD_MIN;
  }
  podMin = configuredMin(podGroup);
  return podMin > 0 ? GANG : NOT_GANG;
}

@inline function same(a: Slice, b: Slice): bool {
  return bytesEqualBytes(slicePtr(a), sliceLen(a), slicePtr(b), sliceLen(b));
}

/** The current waiting pod's group, or NO_SLICE. */
function waitingGroup(): Slice {
  const group = waiting.label(groupLabel);
  return group != NO_SLICE && sliceLen(group) > 0 ? group : NO_SLICE;
}

/** Whether the current waiting pod is a member of group ns/group (other than `uid`). */
function inGroup(ns: Slice, group: Slice, uid: Slice): bool {
  const g = waitingGroup();
  return g != NO_SLICE && same(g, group) && same(waiting.ns, ns) && !same(waiting.uid, uid);
}

function compare(a: Slice, b: Slice): i32 {
  const al = sliceLen(a);
  const bl = sliceLen(b);
  const n = al < bl ? al : bl;
  for (let i: u32 = 0; i < n; i++) {
    const x = load<u8>(slicePtr(a) + i);
    const y = load<u8>(slicePtr(b) + i);
    if (x != y) return x < y ? -1 : 1;
  }
  return al < bl ? -1 : al > bl ? 1 : 0;
}

/** Groups in (namespace, name) order. */
function groupBefore(ns: Slice, group: Slice, otherNs: Slice, otherGroup: Slice): bool {
  const c = compare(ns, otherNs);
  return c < 0 || (c == 0 && compare(group, otherGroup) < 0);
}

/** Waiting members of ns/group (other than `uid`): reject each, or count them; -1 when out of
 * memory. */
function members(c: Context, ns: Slice, group: Slice, uid: Slice, reject: bool): i64 {
  let n: i64 = 0;
  waiting.reset(c);
  while (waiting.next()) {
    if (!inGroup(ns, group, uid)) continue;
    n++;
    if (reject && !c.outputReject(waiting.uid)) return -1;
  }
  return n;
}

/** "<ns>/<name>" */
function messagePath(c: Context, ns: Slice, name: Slice): void {
  c.messageAddSlice(ns);
  c.messageAdd("/");
  c.messageAddSlice(name);
}

export function wssp_prefilter(ctx: usize): i32 {
  const c = Context.at(ctx);
  const kind = readPod(c);
  if (kind == BAD_MIN) {
    c.setAnswer(PREFILTER_REJECT);
    c.setMessage("pod group ");
    messagePath(c, podNs, podGroup);
    c.messageAdd(": annotation ");
    c.messageAdd(minAnnotation);
    c.messageAdd("=");
    c.messageAddSlice(badMin);
    c.messageAdd(" is not a positive integer");
    return 0;
  }
  if (kind != GANG) return 0;

  // Is the own group assembling, and which other group is in the way?
  let own = false;
  let otherNs: Slice = NO_SLICE;
  let otherGroup: Slice = NO_SLICE;
  let firstNs: Slice = NO_SLICE;
  let firstGroup: Slice = NO_SLICE;
  waiting.reset(c);
  while (waiting.next()) {
    const group = waitingGroup();
    if (group == NO_SLICE) continue;
    if (same(group, podGroup) && same(waiting.ns, podNs)) {
      own = true;
      continue;
    }
    if (firstGroup == NO_SLICE) {
      firstNs = waiting.ns;
      firstGroup = group;
    }
    if (otherGroup == NO_SLICE && groupBefore(waiting.ns, group, podNs, podGroup)) {
      otherNs = waiting.ns;
      otherGroup = group;
    }
  }
  if (!own && firstGroup != NO_SLICE) {
    otherNs = firstNs;
    otherGroup = firstGroup;
  }
  if (otherGroup == NO_SLICE) return 0;

  const reserved = members(c, otherNs, otherGroup, slice(0, 0), false);
  c.setAnswer(PREFILTER_REJECT);
  c.setMessage("pod group ");
  messagePath(c, podNs, podGroup);
  c.messageAdd(" is waiting for pod group ");
  messagePath(c, otherNs, otherGroup);
  c.messageAdd(" to be placed (");
  c.messageAddInt(reserved);
  const min = configuredMin(otherGroup);
  if (min > 0) {
    c.messageAdd("/");
    c.messageAddInt(min);
  }
  c.messageAdd(" reserved)");
  return 0;
}

export function wssp_permit(ctx: usize): i32 {
  const c = Context.at(ctx);
  if (readPod(c) != GANG) return 0;
  const reserved = members(c, podNs, podGroup, podUid, false) + 1; // + this pod
  if (reserved >= podMin) {
    waiting.reset(c);
    while (waiting.next()) {
      if (inGroup(podNs, podGroup, podUid) && !c.outputAllow(waiting.uid)) return 1;
    }
    return 0; // PERMIT_ALLOW
  }
  c.setAnswer(PERMIT_WAIT);
  c.setAnswerValue(timeoutMs);
  c.setMessage("waiting for pod group ");
  messagePath(c, podNs, podGroup);
  c.messageAdd(": ");
  c.messageAddInt(reserved);
  c.messageAdd(" of ");
  c.messageAddInt(podMin);
  c.messageAdd(" members reserved");
  return 0;
}

export function wssp_unreserve(ctx: usize): i32 {
  const c = Context.at(ctx);
  if (readPod(c) != GANG) return 0;
  c.setMessage("pod group ");
  messagePath(c, podNs, podGroup);
  c.messageAdd(" released: member ");
  messagePath(c, podNs, podName);
  c.messageAdd(" was unreserved (");
  c.messageAdd(causeText(c.cause));
  c.messageAdd(")");
  return members(c, podNs, podGroup, podUid, true) < 0 ? 1 : 0;
}

export function wssp_postfilter(ctx: usize): i32 {
  const c = Context.at(ctx);
  if (readPod(c) != GANG) return 0;
  c.setMessage("pod group ");
  messagePath(c, podNs, podGroup);
  c.messageAdd(" cannot be placed: ");
  messagePath(c, podNs, podName);
  c.messageAdd(" fits no node");
  return members(c, podNs, podGroup, podUid, true) < 0 ? 1 : 0; // POSTFILTER_DEFAULT
}
