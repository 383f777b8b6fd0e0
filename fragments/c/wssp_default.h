/*
 * wssp_default.h — the default filter rule as a reusable piece, for fragments that add their
 * own checks to it (fragments/default/default.c and fragments/examples/gpu-binpack use it).
 *
 * A node passes when
 *   1. it is not cordoned                          "node(s) were unschedulable"
 *   2. it has no NoSchedule/NoExecute taint the pod does not tolerate
 *                                                  "node(s) had untolerated taint"
 *   3. it matches the pod's nodeSelector and required node affinity
 *                                                  "node(s) didn't match Pod's node affinity/selector"
 *   4. it has room for one more pod                "Too many pods"
 *   5. for every resource the pod requests (> 0): requested + request <= allocatable
 *                                                  "Insufficient <resource>"
 * checked in kube-scheduler's plugin order (NodeUnschedulable, TaintToleration, NodeAffinity,
 * NodeResourcesFit); a node gets the reason of the first check it fails.
 *
 * Usage:
 *     wssp_init:   if (!wssp_default_init(ctx)) return 1;   (declares the reasons above)
 *     wssp_filter: wssp_default_filter(ctx);                (incremental: only changed rows)
 *              or: wssp_default_verdict(ctx, row, ...)      (per row, for a rule of your own)
 */
#ifndef WSSP_DEFAULT_H
#define WSSP_DEFAULT_H

#include "wssp.h"

typedef struct {
    wssp_u32 unschedulable;
    wssp_u32 taint;
    wssp_u32 affinity;
    wssp_u32 too_many_pods;
    /* "Insufficient <name>" of resource column r, for r < n_known. */
    wssp_u32 *insufficient;
    wssp_u32 n_known;
    /* For a resource column added after init. The host starts a fresh instance (and so calls
     * wssp_init again) whenever the resource columns change, so this is only a safety net. */
    wssp_u32 insufficient_other;
    wssp_i32 col_pods;
} wssp_default_reasons;

static wssp_default_reasons wssp_default;

/* Declare the default rule's reasons (call from wssp_init). Returns 0 when out of memory. */
static inline int wssp_default_init(wssp_ctx *ctx) {
    wssp_default_reasons *d = &wssp_default;
    d->unschedulable = wssp_add_reason(ctx, "node(s) were unschedulable");
    d->taint = wssp_add_reason(ctx, "node(s) had untolerated taint");
    d->affinity = wssp_add_reason(ctx, "node(s) didn't match Pod's node affinity/selector");
    d->too_many_pods = wssp_add_reason(ctx, "Too many pods");
    d->insufficient_other = wssp_add_reason(ctx, "Insufficient resources");
    if (!d->unschedulable || !d->taint || !d->affinity || !d->too_many_pods ||
        !d->insufficient_other)
        return 0;
    d->n_known = ctx->n_resources;
    d->insufficient = (wssp_u32 *)wssp_malloc(4 * (d->n_known ? d->n_known : 1));
    if (!d->insufficient) return 0;
    wssp_lines names = wssp_lines_of(wssp_resource_names(ctx));
    wssp_str name;
    for (wssp_u32 r = 0; r < d->n_known; r++) {
        if (!wssp_lines_next(&names, &name)) return 0;
        d->insufficient[r] = wssp_add_reason2(ctx, "Insufficient ", name);
        if (!d->insufficient[r]) return 0;
    }
    d->col_pods = wssp_resource(ctx, "pods");
    return 1;
}

/* Whether the pod has node constraints at all (compute once per call, pass to the verdict). */
static inline int wssp_pod_constrained(const wssp_ctx *ctx) {
    return wssp_pod_n_requirements(ctx) > 0 || wssp_pod_n_terms(ctx) > 0;
}

/* The resources part (checks 4 and 5): a reason id, or 0 when the pod fits. */
static inline wssp_u32 wssp_default_fit(const wssp_ctx *ctx, wssp_u32 row) {
    const wssp_default_reasons *d = &wssp_default;
    wssp_i32 pods = d->col_pods;
    /* kube: len(pods) + 1 > allowed pods, checked for every pod; `requested` of the pods
     * column counts the pods on the node. */
    if (pods >= 0 && wssp_requested(ctx, pods, row) >= wssp_allocatable(ctx, pods, row))
        return d->too_many_pods;
    wssp_u32 n_resources = ctx->n_resources;
    for (wssp_u32 r = 0; r < n_resources; r++) {
        if ((wssp_i32)r == pods) continue;
        wssp_i64 request = wssp_pod_request(ctx, (wssp_i32)r);
        if (request <= 0) continue;
        wssp_i64 free = wssp_allocatable(ctx, (wssp_i32)r, row) -
                        wssp_requested(ctx, (wssp_i32)r, row);
        if (request > free) return r < d->n_known ? d->insufficient[r] : d->insufficient_other;
    }
    return 0;
}

/* The default rule's verdict for a present row: a reason id, or 0 when feasible. */
static inline wssp_u32 wssp_default_verdict(const wssp_ctx *ctx, wssp_u32 row, int constrained) {
    const wssp_default_reasons *d = &wssp_default;
    if (wssp_pod_cordoned(ctx, row)) return d->unschedulable;
    if (wssp_pod_taint(ctx, row)) return d->taint;
    if (constrained && !wssp_node_matches(ctx, row)) return d->affinity;
    return wssp_default_fit(ctx, row);
}

/* The pod inputs the default rule reads: the requests and the node constraints (its memo key). */
static inline void wssp_default_key(const wssp_ctx *ctx, wssp_memo *m) {
    const wssp_u8 *pod = wssp_pod_base(ctx);
    const wssp_u32 tail = wssp_pod_tail(ctx);
    wssp_memo_add(m, pod + 4, tail - 4);  /* R and the requests */
    wssp_memo_add(m, pod + tail + 20, 8); /* n_terms, n_requirements */
    const wssp_u32 from = wssp_load_u32(pod + tail + 28), to = wssp_load_u32(pod + tail + 32);
    if (from <= to && to <= ctx->pod_len) wssp_memo_add(m, pod + from, to - from);
}

/* The per-call constants of the fast verdict: column base pointers and the pod's non-zero
 * requests, read once (restrict-qualified so that the stores to the verdicts do not force the
 * compiler to reload them on every row). */
#define WSSP_DEFAULT_MAX_WANTED 16
typedef struct {
    const wssp_u8 *__restrict flags;
    const wssp_u8 *__restrict taints;
    const wssp_i64 *pods_alloc;
    const wssp_i64 *pods_used;
    const wssp_i64 *want_alloc[WSSP_DEFAULT_MAX_WANTED];
    const wssp_i64 *want_used[WSSP_DEFAULT_MAX_WANTED];
    wssp_i64 want[WSSP_DEFAULT_MAX_WANTED];
    wssp_u16 want_reason[WSSP_DEFAULT_MAX_WANTED];
    wssp_u32 n_want;
    int constrained;
} wssp_default__call;

static inline wssp_u16 wssp_default__fast(const wssp_ctx *ctx, const wssp_default__call *c,
                                          wssp_u32 row) {
    const wssp_default_reasons *d = &wssp_default;
    const wssp_u8 t = c->taints[row];
    /* Absent rows are ignored by the host; they get a reason all the same. */
    if (!(c->flags[row] & WSSP_NODE_PRESENT) || (t & 2u)) return (wssp_u16)d->unschedulable;
    if (t & 1u) return (wssp_u16)d->taint;
    if (c->constrained && !wssp_node_matches(ctx, row)) return (wssp_u16)d->affinity;
    if (c->pods_alloc && c->pods_used[row] >= c->pods_alloc[row]) return (wssp_u16)d->too_many_pods;
    for (wssp_u32 k = 0; k < c->n_want; k++)
        if (c->want[k] > c->want_alloc[k][row] - c->want_used[k][row]) return c->want_reason[k];
    return 0;
}

static wssp_memo wssp_default__memo;

/* Write the default rule's verdicts: for every row on the first call and whenever the pod's
 * requests or node constraints differ from the previous call's, otherwise only for the rows the
 * host lists as changed (ABI.md §4.3) — the other verdicts stand. A fragment that changes
 * verdicts after this call must use wssp_default_verdict row by row instead. */
static inline void wssp_default_filter(wssp_ctx *ctx) {
    const wssp_default_reasons *d = &wssp_default;
    const wssp_u32 n = wssp_rows(ctx), cap = ctx->capacity, n_resources = ctx->n_resources;
    const wssp_i64 *alloc = WSSP_PTR(const wssp_i64, ctx->allocatable);
    const wssp_i64 *used = WSSP_PTR(const wssp_i64, ctx->requested);
    wssp_u16 *__restrict out = WSSP_PTR(wssp_u16, ctx->verdicts);
    wssp_default__call c;
    c.flags = WSSP_PTR(const wssp_u8, ctx->node_flags);
    c.taints = WSSP_PTR(const wssp_u8, ctx->pod_taints);
    c.constrained = wssp_pod_constrained(ctx);
    const wssp_i32 pods = d->col_pods;
    c.pods_alloc = pods >= 0 ? alloc + (wssp_u32)pods * cap : 0;
    c.pods_used = pods >= 0 ? used + (wssp_u32)pods * cap : 0;
    c.n_want = 0;
    int slow = 0;
    for (wssp_u32 r = 0; r < n_resources && !slow; r++) {
        wssp_i64 request = wssp_pod_request(ctx, (wssp_i32)r);
        if ((wssp_i32)r == pods || request <= 0) continue;
        if (c.n_want == WSSP_DEFAULT_MAX_WANTED) {
            slow = 1; /* more requested resources than the fast path holds: row by row */
            break;
        }
        c.want_alloc[c.n_want] = alloc + r * cap;
        c.want_used[c.n_want] = used + r * cap;
        c.want[c.n_want] = request;
        c.want_reason[c.n_want] = (wssp_u16)(r < d->n_known ? d->insufficient[r]
                                                             : d->insufficient_other);
        c.n_want++;
    }
    wssp_memo_begin(&wssp_default__memo);
    wssp_default_key(ctx, &wssp_default__memo);
    const wssp_u32 *rows;
    const wssp_u32 m = wssp_changed_rows(ctx, &wssp_default__memo, &rows);
    if (slow) {
        const wssp_u32 count = m == WSSP_ALL_ROWS ? n : m;
        for (wssp_u32 k = 0; k < count; k++) {
            const wssp_u32 row = m == WSSP_ALL_ROWS ? k : rows[k];
            out[row] = (wssp_u16)((c.flags[row] & WSSP_NODE_PRESENT)
                                  ? wssp_default_verdict(ctx, row, c.constrained)
                                  : d->unschedulable);
        }
    } else if (m == WSSP_ALL_ROWS) {
        for (wssp_u32 row = 0; row < n; row++) out[row] = wssp_default__fast(ctx, &c, row);
    } else {
        for (wssp_u32 k = 0; k < m; k++) out[rows[k]] = wssp_default__fast(ctx, &c, rows[k]);
    }
}

#endif /* WSSP_DEFAULT_H */
