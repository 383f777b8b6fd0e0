/*
 * zone-spread: prefer the zones that run the fewest pods.
 *
 * Score only (no filter stage). A node's zone is its value of the label named by config
 * "label" (default "topology.kubernetes.io/zone"), declared as a wanted label so the host keeps
 * that column resident from the start. A zone's load is the number of pods running in it: the
 * sum of the `pods` column of `requested` over every node of the zone (the ABI has no per-pod-
 * group counts, so this spreads all pods, not one application's). Among the candidates:
 *
 *     score = (most - load) * 100 / (most - fewest)
 *
 * where most/fewest are the highest/lowest loads of the candidates' zones: the emptiest zone
 * scores 100, the fullest 0, and every candidate 100 when all zones are equally loaded. Nodes
 * without the label score 0.
 *
 * Configuration: {"label": "topology.kubernetes.io/zone"}
 */
#include "wssp.h"

static wssp_str zone_key;

/* Per-zone pod counts, indexed by value id; grown (never shrunk) as zones appear. */
static wssp_i64 *loads;
static wssp_u32 loads_cap;

WSSP_EXPORT("wssp_init") int wssp_init(wssp_ctx *ctx, const char *config, int config_len) {
    wssp_json cfg = wssp_json_of(config, config_len);
    wssp_str raw;
    if (wssp_json_string(cfg, "label", &raw)) {
        if (!wssp_json_unescape(raw, &zone_key) || zone_key.len == 0) return 1;
    } else {
        zone_key = wssp_cstr("topology.kubernetes.io/zone");
    }
    return wssp_want_label_str(ctx, zone_key) ? 0 : 1;
}

static wssp_u32 count_lines(wssp_str text) {
    if (text.len == 0) return 0;
    wssp_u32 n = 1;
    for (wssp_u32 i = 0; i < text.len; i++) n += text.ptr[i] == '\n';
    return n;
}

WSSP_EXPORT("wssp_score") int wssp_score(wssp_ctx *ctx) {
    wssp_u32 n = wssp_rows(ctx);
    wssp_i32 zone = wssp_label_column_str(ctx, zone_key);
    wssp_i32 pods = wssp_resource(ctx, "pods");
    wssp_u32 zones = zone >= 0 ? count_lines(wssp_label_values(ctx, zone)) : 0;
    if (zones > loads_cap) {
        wssp_u32 cap = loads_cap ? loads_cap : 16;
        while (cap < zones) cap *= 2;
        wssp_i64 *bigger = (wssp_i64 *)wssp_malloc(8 * cap);
        if (!bigger) return 1;
        loads = bigger;
        loads_cap = cap;
    }
    if (zones) wssp_memset(loads, 0, 8 * zones);

    for (wssp_u32 row = 0; row < n; row++) {
        if (!wssp_node_present(ctx, row)) continue;
        wssp_i32 id = wssp_label_id(ctx, zone, row);
        if (id >= 0 && (wssp_u32)id < zones) loads[id] += wssp_requested(ctx, pods, row);
    }

    wssp_i64 most = WSSP_I64_MIN, fewest = WSSP_I64_MAX;
    for (wssp_u32 row = 0; row < n; row++) {
        if (!wssp_candidate(ctx, row)) continue;
        wssp_i32 id = wssp_label_id(ctx, zone, row);
        if (id < 0 || (wssp_u32)id >= zones) continue;
        if (loads[id] > most) most = loads[id];
        if (loads[id] < fewest) fewest = loads[id];
    }

    for (wssp_u32 row = 0; row < n; row++) {
        if (!wssp_candidate(ctx, row)) continue;
        wssp_i32 id = wssp_label_id(ctx, zone, row);
        wssp_i64 score = 0;
        if (id >= 0 && (wssp_u32)id < zones)
            score = most == fewest ? WSSP_MAX_SCORE
                                   : (most - loads[id]) * WSSP_MAX_SCORE / (most - fewest);
        wssp_set_score(ctx, row, score);
    }
    return 0;
}
