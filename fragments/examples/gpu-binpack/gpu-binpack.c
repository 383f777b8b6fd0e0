/*
 * gpu-binpack: pack GPU pods onto the nodes whose GPUs are already the busiest, keeping whole
 * nodes free for large GPU jobs.
 *
 * Filter: the default rule (fragments/c/wssp_default.h), which includes "the node has enough
 * of every resource the pod requests": a pod asking for GPUs only fits nodes with that many
 * free ("Insufficient nvidia.com/gpu").
 *
 * Score: MostAllocated on one resource (config "resource", default "nvidia.com/gpu"):
 *     score = min(requested + request, allocatable) * 100 / allocatable
 * i.e. the share of the node's GPUs in use once the pod is placed. Nodes without the resource
 * score 0. A pod that requests none of it gets 0 everywhere (the stage stays neutral), as
 * kube-scheduler does for extended resources a pod does not request.
 *
 * Configuration: {"resource": "nvidia.com/gpu"}
 */
#include "wssp.h"
#include "wssp_default.h"

static wssp_str resource; /* points into the configuration text, which lives as long as we do */

WSSP_EXPORT("wssp_init") int wssp_init(wssp_ctx *ctx, const char *config, int config_len) {
    if (!wssp_default_init(ctx)) return 1;
    wssp_json cfg = wssp_json_of(config, config_len);
    wssp_str raw;
    if (wssp_json_string(cfg, "resource", &raw)) {
        if (!wssp_json_unescape(raw, &resource) || resource.len == 0) return 1;
    } else {
        resource = wssp_cstr("nvidia.com/gpu");
    }
    return 0;
}

WSSP_EXPORT("wssp_filter") int wssp_filter(wssp_ctx *ctx) {
    wssp_default_filter(ctx);
    return 0;
}

WSSP_EXPORT("wssp_score") int wssp_score(wssp_ctx *ctx) {
    wssp_u32 n = wssp_rows(ctx);
    /* Look the column up on every call: the resource may appear after init. */
    wssp_i32 r = wssp_resource_str(ctx, resource);
    wssp_i64 request = wssp_pod_request(ctx, r);
    for (wssp_u32 row = 0; row < n; row++) {
        if (!wssp_candidate(ctx, row)) continue;
        wssp_i64 alloc = wssp_allocatable(ctx, r, row);
        wssp_i64 score = 0;
        if (request > 0 && alloc > 0) {
            wssp_i64 used = wssp_requested(ctx, r, row) + request;
            if (used > alloc) used = alloc;
            score = used * WSSP_MAX_SCORE / alloc;
        }
        wssp_set_score(ctx, row, score);
    }
    return 0;
}
