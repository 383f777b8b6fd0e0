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
 *     wssp_filter: wssp_default_filter(ctx);                (or wssp_default_verdict per row)
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

/* Write the default rule's verdict for every row. */
static inline void wssp_default_filter(wssp_ctx *ctx) {
    wssp_u32 n = wssp_rows(ctx);
    int constrained = wssp_pod_constrained(ctx);
    for (wssp_u32 row = 0; row < n; row++) {
        /* Absent rows are ignored by the host; they get a reason all the same. */
        wssp_u32 v = wssp_node_present(ctx, row) ? wssp_default_verdict(ctx, row, constrained)
                                                 : wssp_default.unschedulable;
        wssp_set_verdict(ctx, row, v);
    }
}

#endif /* WSSP_DEFAULT_H */
