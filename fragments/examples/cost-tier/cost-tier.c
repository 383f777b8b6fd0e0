/*
 * cost-tier: a business rule on a node label.
 *
 * Filter: a node must carry the label (config "label", default "cost-tier") with one of the
 * allowed values (config "allowed"); others fail with "node(s) are not in an allowed cost
 * tier". Without an "allowed" list (or with an empty one) every node passes.
 *
 * Score: 100 for nodes in the preferred tier (config "preferred"), 50 for every other node.
 *
 * Configuration: {"label": "cost-tier", "allowed": ["spot", "standard"], "preferred": "spot"}
 */
#include "wssp.h"

#define MAX_ALLOWED 32

static wssp_str tier_key;
static wssp_str allowed[MAX_ALLOWED];
static wssp_u32 n_allowed;
static wssp_str preferred;
static int has_preferred;
static wssp_u32 reason_not_allowed;

WSSP_EXPORT("wssp_init") int wssp_init(wssp_ctx *ctx, const char *config, int config_len) {
    wssp_json cfg = wssp_json_of(config, config_len);
    wssp_str raw;
    if (wssp_json_string(cfg, "label", &raw)) {
        if (!wssp_json_unescape(raw, &tier_key) || tier_key.len == 0) return 1;
    } else {
        tier_key = wssp_cstr("cost-tier");
    }
    wssp_json_iter it;
    if (wssp_json_array(cfg, "allowed", &it)) {
        while (wssp_json_array_next_string(&it, &raw)) {
            if (n_allowed == MAX_ALLOWED) return 1;
            if (!wssp_json_unescape(raw, &allowed[n_allowed])) return 1;
            n_allowed++;
        }
    }
    if (wssp_json_string(cfg, "preferred", &raw)) {
        if (!wssp_json_unescape(raw, &preferred)) return 1;
        has_preferred = 1;
    }
    reason_not_allowed = wssp_add_reason(ctx, "node(s) are not in an allowed cost tier");
    if (!reason_not_allowed || !wssp_want_label_str(ctx, tier_key)) return 1;
    return 0;
}

WSSP_EXPORT("wssp_filter") int wssp_filter(wssp_ctx *ctx) {
    wssp_u32 n = wssp_rows(ctx);
    wssp_i32 tier = wssp_label_column_str(ctx, tier_key);
    /* Value ids of the allowed tiers, looked up per call: a tier no node had before may have
     * appeared since (ids never change once given). -1: no node is in that tier. */
    wssp_i32 ids[MAX_ALLOWED];
    for (wssp_u32 k = 0; k < n_allowed; k++) ids[k] = wssp_label_value_id(ctx, tier, allowed[k]);
    for (wssp_u32 row = 0; row < n; row++) {
        int ok = n_allowed == 0;
        wssp_i32 id = wssp_label_id(ctx, tier, row);
        for (wssp_u32 k = 0; k < n_allowed && !ok && id >= 0; k++) ok = ids[k] == id;
        wssp_set_verdict(ctx, row, ok ? 0 : reason_not_allowed);
    }
    return 0;
}

WSSP_EXPORT("wssp_score") int wssp_score(wssp_ctx *ctx) {
    wssp_u32 n = wssp_rows(ctx);
    wssp_i32 tier = wssp_label_column_str(ctx, tier_key);
    wssp_i32 best = has_preferred ? wssp_label_value_id(ctx, tier, preferred) : -1;
    for (wssp_u32 row = 0; row < n; row++) {
        if (!wssp_candidate(ctx, row)) continue;
        int is_preferred = best >= 0 && wssp_label_id(ctx, tier, row) == best;
        wssp_set_score(ctx, row, is_preferred ? 100 : 50);
    }
    return 0;
}
