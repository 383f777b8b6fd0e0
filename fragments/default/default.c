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
 * candidate with the most free memory scores 100, the others in proportion.
 *
 * Incremental (ABI.md §4.3): free memory and candidacy are kept per row, with the largest free
 * value among the candidates and how many candidates have it. A call with the same memory
 * request updates only the listed rows; all scores are rewritten only when that maximum moved. */
static wssp_i64 *free_mem;
static wssp_u8 *was_candidate;
static wssp_i64 top;
static wssp_u32 n_top;
static wssp_memo score_memo;

/* v * 100 / top for 0 <= v <= top, exact: a double reciprocal (one multiply instead of a 64-bit
 * division per row) corrected by one step, while v * 100 stays within a double's 53 bits. */
static inline wssp_i64 scaled(wssp_i64 v, wssp_i64 top_value, double inv) {
    const wssp_i64 x = v * WSSP_MAX_SCORE;
    if (top_value > ((wssp_i64)1 << 53) / WSSP_MAX_SCORE) return x / top_value;
    wssp_i64 q = (wssp_i64)((double)x * inv);
    if (q * top_value > x) q--;
    else if ((q + 1) * top_value <= x) q++;
    return q;
}

static inline void find_top(wssp_u32 n) {
    top = 0;
    n_top = 0;
    for (wssp_u32 row = 0; row < n; row++) {
        if (!was_candidate[row]) continue;
        const wssp_i64 f = free_mem[row];
        if (f > top) {
            top = f;
            n_top = 1;
        } else if (f == top) {
            n_top++;
        }
    }
}

WSSP_EXPORT("wssp_score") int wssp_score(wssp_ctx *ctx) {
    const wssp_u32 n = wssp_rows(ctx), cap = ctx->capacity;
    const wssp_i64 request = wssp_pod_request(ctx, col_memory);
    const wssp_u8 *__restrict candidate = WSSP_PTR(const wssp_u8, ctx->candidates);
    const wssp_i64 *__restrict alloc = WSSP_PTR(const wssp_i64, ctx->allocatable);
    const wssp_i64 *__restrict used = WSSP_PTR(const wssp_i64, ctx->requested);
    wssp_i64 *__restrict out = WSSP_PTR(wssp_i64, ctx->scores);
    if (!free_mem) {
        free_mem = (wssp_i64 *)wssp_malloc(8 * cap);
        was_candidate = (wssp_u8 *)wssp_malloc(cap);
        if (!free_mem || !was_candidate) return 1;
    }
    if (col_memory >= 0) {
        alloc += (wssp_u32)col_memory * cap;
        used += (wssp_u32)col_memory * cap;
    }
    wssp_memo_begin(&score_memo);
    wssp_memo_add(&score_memo, &request, sizeof request);
    const wssp_u32 *rows;
    const wssp_u32 m = wssp_changed_rows(ctx, &score_memo, &rows);
    int rescale = 1;
    if (m == WSSP_ALL_ROWS) {
        for (wssp_u32 row = 0; row < n; row++) {
            const wssp_i64 f = col_memory >= 0 ? alloc[row] - used[row] - request : 0;
            free_mem[row] = f > 0 ? f : 0;
            was_candidate[row] = candidate[row] != 0;
        }
        find_top(n);
    } else {
        const wssp_i64 old_top = top;
        for (wssp_u32 k = 0; k < m; k++) {
            const wssp_u32 row = rows[k];
            if (was_candidate[row] && free_mem[row] == top) n_top--;
            wssp_i64 f = col_memory >= 0 ? alloc[row] - used[row] - request : 0;
            f = f > 0 ? f : 0;
            free_mem[row] = f;
            was_candidate[row] = candidate[row] != 0;
            if (!was_candidate[row]) continue;
            if (f > top) {
                top = f;
                n_top = 1;
            } else if (f == top) {
                n_top++;
            }
        }
        if (n_top == 0) find_top(n); /* the maximum's last holder shrank or left */
        rescale = top != old_top;
    }
    const double inv = top > 0 ? 1.0 / (double)top : 0.0;
    if (rescale) {
        for (wssp_u32 row = 0; row < n; row++)
            if (was_candidate[row]) out[row] = top > 0 ? scaled(free_mem[row], top, inv) : 0;
    } else {
        for (wssp_u32 k = 0; k < m; k++) {
            const wssp_u32 row = rows[k];
            if (was_candidate[row]) out[row] = top > 0 ? scaled(free_mem[row], top, inv) : 0;
        }
    }
    return 0;
}
