/*
 * The default fragment — name "default", version 1.0.0 — implementing the published default
 * rule.
 *
 * Filter: the node is not cordoned, has no untolerated NoSchedule/NoExecute taint, matches the
 * pod's nodeSelector and required node affinity, and has room for the pod (one more pod, and
 * every resource the pod requests). Reasons use kube-scheduler's wording; the rule itself is in
 * fragments/c/wssp_default.h.
 *
 * Score: the node with the most free memory wins.
 *   free  = max(0, allocatable memory - requested memory - the pod's memory request)
 *   score = free * 100 / max(free over the candidates); 0 everywhere when that maximum is 0.
 *
 * Configuration: none (any JSON object is accepted and ignored).
 */
#include "wssp.h"
#include "wssp_default.h"

static wssp_i32 col_memory;

WSSP_EXPORT("wssp_init") int wssp_init(wssp_ctx *ctx, const char *config, int config_len) {
    (void)config;
    (void)config_len;
    if (!wssp_default_init(ctx)) return 1;
    col_memory = wssp_resource(ctx, "memory");
    return 0;
}

WSSP_EXPORT("wssp_filter") int wssp_filter(wssp_ctx *ctx) {
    wssp_default_filter(ctx);
    return 0;
}

static wssp_i64 free_memory(const wssp_ctx *ctx, wssp_u32 row, wssp_i64 request) {
    wssp_i64 free = wssp_allocatable(ctx, col_memory, row) - wssp_requested(ctx, col_memory, row)
                    - request;
    return free > 0 ? free : 0;
}

WSSP_EXPORT("wssp_score") int wssp_score(wssp_ctx *ctx) {
    wssp_u32 n = wssp_rows(ctx);
    wssp_i64 request = wssp_pod_request(ctx, col_memory);
    wssp_i64 top = 0;
    for (wssp_u32 row = 0; row < n; row++) {
        if (!wssp_candidate(ctx, row)) continue;
        wssp_i64 free = free_memory(ctx, row, request);
        if (free > top) top = free;
    }
    for (wssp_u32 row = 0; row < n; row++) {
        if (!wssp_candidate(ctx, row)) continue;
        wssp_i64 score = top > 0 ? free_memory(ctx, row, request) * WSSP_MAX_SCORE / top : 0;
        wssp_set_score(ctx, row, score);
    }
    return 0;
}
