// least-cpu (AssemblyScript): place pods where the most CPU stays free.
//
// Filter: the node matches the pod's nodeSelector and required node affinity
// ("node(s) didn't match Pod's node affinity/selector") and has the CPU the pod requests free
// ("Insufficient cpu"). Nothing else is checked: pair it with the built-in filters.
//
// Score: LeastAllocated on cpu, per node:
//     score = max(allocatable - requested - request, 0) * 100 / allocatable   (0 without cpu)
// using actual requests (the ABI's `requested` column sums the pods' requests as written).
//
// Configuration: none.

import { Context } from "../../assembly/wssp";
export { wssp_abi_v1, wssp_alloc } from "../../assembly/wssp";

let reasonAffinity: u32 = 0;
let reasonCpu: u32 = 0;

export function wssp_init(ctx: usize, config: usize, len: i32): i32 {
  const c = Context.at(ctx);
  reasonAffinity = c.addReason("node(s) didn't match Pod's node affinity/selector");
  reasonCpu = c.addReason("Insufficient cpu");
  return reasonAffinity != 0 && reasonCpu != 0 ? 0 : 1;
}

export function wssp_filter(ctx: usize): i32 {
  const c = Context.at(ctx);
  const n = c.rows();
  const cpu = c.resource("cpu");
  const request = c.podRequest(cpu);
  for (let row: u32 = 0; row < n; row++) {
    let verdict: u32 = 0;
    if (!c.nodeMatches(row)) {
      verdict = reasonAffinity;
    } else if (request > 0 && request > c.allocatableOf(cpu, row) - c.requestedOf(cpu, row)) {
      verdict = reasonCpu;
    }
    c.setVerdict(row, verdict);
  }
  return 0;
}

export function wssp_score(ctx: usize): i32 {
  const c = Context.at(ctx);
  const n = c.rows();
  const cpu = c.resource("cpu");
  const request = c.podRequest(cpu);
  for (let row: u32 = 0; row < n; row++) {
    if (!c.candidate(row)) continue;
    const alloc = c.allocatableOf(cpu, row);
    let score: i64 = 0;
    if (alloc > 0) {
      let free = alloc - c.requestedOf(cpu, row) - request;
      if (free < 0) free = 0;
      score = free * 100 / alloc;
    }
    c.setScore(row, score);
  }
  return 0;
}
