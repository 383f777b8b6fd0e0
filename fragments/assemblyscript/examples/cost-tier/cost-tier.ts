// cost-tier (AssemblyScript): a business rule on a node label. The same rule as
// fragments/examples/cost-tier/cost-tier.c, written with the AssemblyScript SDK.
//
// Filter: a node must carry the label (config "label", default "cost-tier") with one of the
// allowed values (config "allowed"); others fail with "node(s) are not in an allowed cost
// tier". Without an "allowed" list (or with an empty one) every node passes.
//
// Score: 100 for nodes in the preferred tier (config "preferred"), 50 for every other node.
//
// Configuration: {"label": "cost-tier", "allowed": ["spot", "standard"], "preferred": "spot"}

import { Context, Json } from "../../assembly/wssp";
export { wssp_abi_v1, wssp_alloc } from "../../assembly/wssp";

let tierKey = "cost-tier";
let allowed: string[] = [];
let preferred: string | null = null;
let reasonNotAllowed: u32 = 0;
// Value ids of the allowed tiers, refreshed per call (-1: no node is in that tier yet).
let allowedIds: StaticArray<i32> = new StaticArray<i32>(0);

export function wssp_init(ctx: usize, config: usize, len: i32): i32 {
  const c = Context.at(ctx);
  const cfg = new Json(config, len);
  const key = cfg.getString("label", "cost-tier");
  if (key == null || key.length == 0) return 1;
  tierKey = key;
  const list = cfg.getStringArray("allowed");
  if (list != null) allowed = list;
  allowedIds = new StaticArray<i32>(allowed.length);
  preferred = cfg.getString("preferred");
  reasonNotAllowed = c.addReason("node(s) are not in an allowed cost tier");
  if (reasonNotAllowed == 0 || !c.wantLabel(tierKey)) return 1;
  return 0;
}

export function wssp_filter(ctx: usize): i32 {
  const c = Context.at(ctx);
  const n = c.rows();
  const tier = c.labelColumn(tierKey);
  const count = allowed.length;
  for (let k = 0; k < count; k++) allowedIds[k] = c.labelValueId(tier, unchecked(allowed[k]));
  for (let row: u32 = 0; row < n; row++) {
    let ok = count == 0;
    const id = c.labelId(tier, row);
    for (let k = 0; k < count && !ok && id >= 0; k++) ok = unchecked(allowedIds[k]) == id;
    c.setVerdict(row, ok ? 0 : reasonNotAllowed);
  }
  return 0;
}

export function wssp_score(ctx: usize): i32 {
  const c = Context.at(ctx);
  const n = c.rows();
  const tier = c.labelColumn(tierKey);
  const best = preferred != null ? c.labelValueId(tier, preferred!) : -1;
  for (let row: u32 = 0; row < n; row++) {
    if (!c.candidate(row)) continue;
    c.setScore(row, best >= 0 && c.labelId(tier, row) == best ? 100 : 50);
  }
  return 0;
}
