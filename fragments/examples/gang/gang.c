/*
 * gang: place a pod group all at once or not at all (gang scheduling).
 *
 * A pod belongs to a group when it carries the group label (config "groupLabel", default
 * "pod-group.wssp.io/name"); groups are per namespace. The group needs minMember pods placed
 * together: the pod's annotation (config "minMemberAnnotation", default
 * "pod-group.wssp.io/min-member"), else config "groups" {"<group>": minMember}; without
 * either the pod is not gang-scheduled and every stage lets it pass, as it does a pod without
 * the label. The built-in profile chooses the nodes; this module only decides when the
 * reserved members may bind:
 *
 *   permit      the pod waits (holding its reserved node) until minMember members of its group
 *               are reserved; the member that completes the group allows every waiting one.
 *               A wait lasts at most config "timeoutSeconds" (default 60).
 *   unreserve   a member that will not bind after all (its wait timed out, a later stage or the
 *               binding failed, it was deleted) rejects every waiting member of its group: the
 *               group gives its nodes back at once and is tried again as a whole.
 *   postfilter  a member that fits no node rejects the waiting members of its group likewise.
 *   prefilter   while members of another group wait at permit, a group pod is refused (it is
 *               retried later): one group assembles at a time, so two groups never each hold
 *               part of the room the other needs. When two groups are waiting (a race), the
 *               one first in (namespace, name) order goes on.
 *
 * Everything is derived from the pod record and the waiting lines of each call: the module
 * keeps no state between calls, so any instance may serve any call.
 *
 * Configuration (every member optional):
 *   {"groupLabel": "pod-group.wssp.io/name",
 *    "minMemberAnnotation": "pod-group.wssp.io/min-member",
 *    "timeoutSeconds": 60,
 *    "groups": {"trainer": 4}}
 */
#include "wssp.h"

typedef struct {
    wssp_str name;
    wssp_i64 min;
} group_size;

static wssp_str group_label;
static wssp_str min_annotation;
static wssp_u32 timeout_ms;
static group_size *groups;
static wssp_u32 n_groups;

/* A string member: absent -> fallback; present but not a non-empty string -> 0. */
static int config_string(wssp_json cfg, const char *key, const char *fallback, wssp_str *out) {
    wssp_json v;
    wssp_str raw;
    if (!wssp_json_find(cfg, key, &v)) {
        *out = wssp_cstr(fallback);
        return 1;
    }
    if (!wssp_json_string(cfg, key, &raw)) return 0;
    return wssp_json_unescape(raw, out) && out->len > 0;
}

WSSP_EXPORT("wssp_init") int wssp_init(wssp_ctx *ctx, const char *config, int config_len) {
    (void)ctx;
    wssp_json cfg = wssp_json_of(config, config_len);
    if (!config_string(cfg, "groupLabel", "pod-group.wssp.io/name", &group_label)) return 1;
    if (!config_string(cfg, "minMemberAnnotation", "pod-group.wssp.io/min-member",
                       &min_annotation))
        return 1;
    wssp_json v;
    wssp_i64 seconds = 60;
    if (wssp_json_find(cfg, "timeoutSeconds", &v) &&
        (!wssp_json_as_int(v, &seconds) || seconds < 1 || seconds > 4294967))
        return 1;
    timeout_ms = (wssp_u32)(seconds * 1000);

    wssp_json_iter it;
    wssp_str name;
    if (wssp_json_find(cfg, "groups", &v)) {
        if (!wssp_json_object(cfg, "groups", &it)) return 1;
        wssp_u32 count = 0;
        while (wssp_json_object_next(&it, &name, &v)) count++;
        groups = (group_size *)wssp_malloc(count * sizeof(group_size) + 8);
        if (!groups) return 1;
        wssp_json_object(cfg, "groups", &it);
        while (wssp_json_object_next(&it, &name, &v)) {
            group_size *g = &groups[n_groups++];
            if (!wssp_json_unescape(name, &g->name) || !wssp_json_as_int(v, &g->min) ||
                g->min < 1)
                return 1;
        }
    }
    return 0;
}

/* The pod of the call and its group. */
typedef struct {
    wssp_str ns, name, uid, group;
    wssp_i64 min;
} pod_group;

enum { NOT_GANG = 0, GANG = 1, BAD_MIN = 2 };

/* Whether the pod is gang-scheduled (GANG, with p filled), not (NOT_GANG) or carries a
 * minimum that is not a positive integer (BAD_MIN, p->group and the text in *bad). */
static int read_pod(const wssp_ctx *ctx, pod_group *p, wssp_str *bad) {
    p->ns = wssp_pod_namespace(ctx);
    p->name = wssp_pod_name(ctx);
    p->uid = wssp_pod_uid(ctx);
    if (!wssp_pod_label_str(ctx, group_label, &p->group) || p->group.len == 0) return NOT_GANG;
    if (wssp_pod_annotation_str(ctx, min_annotation, bad))
        return wssp_parse_i64(*bad, &p->min) && p->min >= 1 ? GANG : BAD_MIN;
    for (wssp_u32 k = 0; k < n_groups; k++) {
        if (wssp_str_eq(groups[k].name, p->group)) {
            p->min = groups[k].min;
            return GANG;
        }
    }
    return NOT_GANG;
}

/* The waiting pod's group (0 when it has none). */
static int waiting_group(const wssp_waiting_pod *w, wssp_str *group) {
    return wssp_waiting_label_str(w, group_label, group) && group->len > 0;
}

/* Whether the waiting pod is another member of p's group. */
static int same_group(const pod_group *p, const wssp_waiting_pod *w) {
    wssp_str group;
    return waiting_group(w, &group) && wssp_str_eq(group, p->group) && wssp_str_eq(w->ns, p->ns) &&
           !wssp_str_eq(w->uid, p->uid);
}

static int compare(wssp_str a, wssp_str b) {
    wssp_u32 n = a.len < b.len ? a.len : b.len;
    for (wssp_u32 i = 0; i < n; i++) {
        if (a.ptr[i] != b.ptr[i]) return (wssp_u8)a.ptr[i] < (wssp_u8)b.ptr[i] ? -1 : 1;
    }
    return a.len < b.len ? -1 : a.len > b.len;
}

/* Groups in (namespace, name) order. */
static int group_before(wssp_str ns, wssp_str group, wssp_str other_ns, wssp_str other_group) {
    int c = compare(ns, other_ns);
    return c < 0 || (c == 0 && compare(group, other_group) < 0);
}

/* Waiting members of p's group: reject each (reject != 0) or count them. */
static wssp_u32 members(wssp_ctx *ctx, const pod_group *p, int reject) {
    wssp_waiting it = wssp_waiting_of(ctx);
    wssp_waiting_pod w;
    wssp_u32 n = 0;
    while (wssp_waiting_next(&it, &w)) {
        if (!same_group(p, &w)) continue;
        n++;
        if (reject && !wssp_output_reject(ctx, w.uid)) return 0xFFFFFFFFu;
    }
    return n;
}

/* "<ns>/<name>" */
static void message_path(wssp_ctx *ctx, wssp_str ns, wssp_str name) {
    wssp_message_add(ctx, ns);
    wssp_message_add_cstr(ctx, "/");
    wssp_message_add(ctx, name);
}

WSSP_EXPORT("wssp_prefilter") int wssp_prefilter(wssp_ctx *ctx) {
    pod_group p;
    wssp_str bad;
    int kind = read_pod(ctx, &p, &bad);
    if (kind == BAD_MIN) {
        wssp_set_answer(ctx, WSSP_PREFILTER_REJECT);
        wssp_set_message_cstr(ctx, "pod group ");
        message_path(ctx, p.ns, p.group);
        wssp_message_add_cstr(ctx, ": annotation ");
        wssp_message_add(ctx, min_annotation);
        wssp_message_add_cstr(ctx, "=");
        wssp_message_add(ctx, bad);
        wssp_message_add_cstr(ctx, " is not a positive integer");
        return 0;
    }
    if (kind != GANG) return 0;

    /* Is the own group assembling, and which other group is in the way? */
    wssp_waiting it = wssp_waiting_of(ctx);
    wssp_waiting_pod w;
    wssp_str group;
    int own = 0;
    wssp_str other_ns = {0, 0}, other_group = {0, 0}, first_ns = {0, 0}, first_group = {0, 0};
    int have_other = 0, have_first = 0;
    while (wssp_waiting_next(&it, &w)) {
        if (!waiting_group(&w, &group)) continue;
        if (wssp_str_eq(group, p.group) && wssp_str_eq(w.ns, p.ns)) {
            own = 1;
            continue;
        }
        if (!have_first) {
            first_ns = w.ns;
            first_group = group;
            have_first = 1;
        }
        if (!have_other && group_before(w.ns, group, p.ns, p.group)) {
            other_ns = w.ns;
            other_group = group;
            have_other = 1;
        }
    }
    if (!own && have_first) {
        other_ns = first_ns;
        other_group = first_group;
        have_other = 1;
    }
    if (!have_other) return 0;

    pod_group blocker = {other_ns, {0, 0}, {0, 0}, other_group, 0};
    wssp_u32 reserved = members(ctx, &blocker, 0);
    wssp_set_answer(ctx, WSSP_PREFILTER_REJECT);
    wssp_set_message_cstr(ctx, "pod group ");
    message_path(ctx, p.ns, p.group);
    wssp_message_add_cstr(ctx, " is waiting for pod group ");
    message_path(ctx, other_ns, other_group);
    wssp_message_add_cstr(ctx, " to be placed (");
    wssp_message_add_i64(ctx, reserved);
    for (wssp_u32 k = 0; k < n_groups; k++) {
        if (wssp_str_eq(groups[k].name, other_group)) {
            wssp_message_add_cstr(ctx, "/");
            wssp_message_add_i64(ctx, groups[k].min);
            break;
        }
    }
    wssp_message_add_cstr(ctx, " reserved)");
    return 0;
}

WSSP_EXPORT("wssp_permit") int wssp_permit(wssp_ctx *ctx) {
    pod_group p;
    wssp_str bad;
    if (read_pod(ctx, &p, &bad) != GANG) return 0;
    wssp_i64 reserved = (wssp_i64)members(ctx, &p, 0) + 1; /* + this pod */
    if (reserved >= p.min) {
        wssp_waiting it = wssp_waiting_of(ctx);
        wssp_waiting_pod w;
        while (wssp_waiting_next(&it, &w))
            if (same_group(&p, &w) && !wssp_output_allow(ctx, w.uid)) return 1;
        return 0; /* WSSP_PERMIT_ALLOW */
    }
    wssp_set_answer(ctx, WSSP_PERMIT_WAIT);
    wssp_set_answer_value(ctx, timeout_ms);
    wssp_set_message_cstr(ctx, "waiting for pod group ");
    message_path(ctx, p.ns, p.group);
    wssp_message_add_cstr(ctx, ": ");
    wssp_message_add_i64(ctx, reserved);
    wssp_message_add_cstr(ctx, " of ");
    wssp_message_add_i64(ctx, p.min);
    wssp_message_add_cstr(ctx, " members reserved");
    return 0;
}

WSSP_EXPORT("wssp_unreserve") int wssp_unreserve(wssp_ctx *ctx) {
    pod_group p;
    wssp_str bad;
    if (read_pod(ctx, &p, &bad) != GANG) return 0;
    wssp_set_message_cstr(ctx, "pod group ");
    message_path(ctx, p.ns, p.group);
    wssp_message_add_cstr(ctx, " released: member ");
    message_path(ctx, p.ns, p.name);
    wssp_message_add_cstr(ctx, " was unreserved (");
    wssp_message_add_cstr(ctx, wssp_cause_text(wssp_cause(ctx)));
    wssp_message_add_cstr(ctx, ")");
    return members(ctx, &p, 1) == 0xFFFFFFFFu;
}

WSSP_EXPORT("wssp_postfilter") int wssp_postfilter(wssp_ctx *ctx) {
    pod_group p;
    wssp_str bad;
    if (read_pod(ctx, &p, &bad) != GANG) return 0;
    wssp_set_message_cstr(ctx, "pod group ");
    message_path(ctx, p.ns, p.group);
    wssp_message_add_cstr(ctx, " cannot be placed: ");
    message_path(ctx, p.ns, p.name);
    wssp_message_add_cstr(ctx, " fits no node");
    return members(ctx, &p, 1) == 0xFFFFFFFFu; /* WSSP_POSTFILTER_DEFAULT */
}
