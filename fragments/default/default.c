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

/* MostFreeMemory: free = allocatable - requested - the pod's request (floored at 0); the
 * candidate with the most free memory scores 100, the others in proportion. */
WSSP_EXPORT("wssp_score") int wssp_score(wssp_ctx *ctx) {
    const wssp_u32 n = wssp_rows(ctx), cap = ctx->capacity;
    const wssp_i64 request = wssp_pod_request(ctx, col_memory);
    const wssp_u8 *__restrict candidate = WSSP_PTR(const wssp_u8, ctx->candidates);
    const wssp_i64 *__restrict alloc = WSSP_PTR(const wssp_i64, ctx->allocatable);
    const wssp_i64 *__restrict used = WSSP_PTR(const wssp_i64, ctx->requested);
    wssp_i64 *__restrict out = WSSP_PTR(wssp_i64, ctx->scores);
    if (col_memory >= 0) {
        alloc += (wssp_u32)col_memory * cap;
        used += (wssp_u32)col_memory * cap;
    }
    wssp_i64 top = 0;
    for (wssp_u32 row = 0; row < n; row++) {
        wssp_i64 free = col_memory >= 0 ? alloc[row] - used[row] - request : 0;
        free = free > 0 ? free : 0;
        out[row] = free;  /* kept for the second pass; overwritten with the score */
        if (candidate[row] && free > top) top = free;
    }
    for (wssp_u32 row = 0; row < n; row++) {
        if (!candidate[row]) continue;
        out[row] = top > 0 ? out[row] * WSSP_MAX_SCORE / top : 0;
    }
    return 0;
}
