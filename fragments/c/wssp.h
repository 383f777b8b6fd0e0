/*
 * wssp.h — header-only C SDK for pyscheduler fragments, ABI v1 (fragments/ABI.md).
 *
 * A fragment is one C file that includes this header and defines
 *
 *     WSSP_EXPORT("wssp_init")   int wssp_init(wssp_ctx *ctx, const char *config, int len);
 *     WSSP_EXPORT("wssp_filter") int wssp_filter(wssp_ctx *ctx);   (if it has a filter stage)
 *     WSSP_EXPORT("wssp_score")  int wssp_score(wssp_ctx *ctx);    (if it has a score stage)
 *
 * and, for the stages of ABI minor 3 it takes (section 10), any of
 *
 *     WSSP_EXPORT("wssp_prefilter") int wssp_prefilter(wssp_ctx *ctx);
 *     (likewise wssp_postfilter, wssp_reserve, wssp_unreserve, wssp_permit, wssp_prebind,
 *      wssp_postbind: every stage function is (ctx) -> int, 0 when the call worked)
 *
 * The header itself provides the other required exports: `wssp_abi_v1` (the version marker) and
 * `wssp_alloc` (a bump allocator). `memory` is exported by the linker.
 *
 * Build (freestanding, no libc, no imports):
 *
 *     clang --target=wasm32 -mcpu=mvp -mbulk-memory -msign-ext -mmutable-globals \
 *           -O2 -ffreestanding -nostdlib -fno-exceptions \
 *           -Wl,--no-entry -Wl,--strip-all -Wl,-z,stack-size=65536 \
 *           -I fragments/c -o my.wasm my.c
 *
 * Bulk memory is required: it makes __builtin_memcpy/__builtin_memset (and any copy loop the
 * optimizer recognizes) compile to memory.copy/memory.fill instead of calls to a libc memcpy.
 *
 * Everything here is `static inline` (or a macro) except the two exports, so including the
 * header from exactly one translation unit is the intended use.
 *
 * Contents:
 *   1. basic types, strings, lines
 *   2. the context (struct with its offsets checked against the ABI)
 *   3. node columns: resources, flags, labels, names, taints, candidates, outputs
 *   4. the pod record: requests, requirements, labels and annotations
 *   5. node constraints: wssp_node_matches()
 *   6. allocator and exports; incremental calls: wssp_changed_rows()
 *   7. init helpers: declaring reasons and wanted labels
 *   8. a small JSON reader for the configuration
 *   9. optional: the wssp.log import (define WSSP_WITH_LOG before including)
 *  10. stages of minor 3 (prefilter .. postbind): answers, messages, commands, waiting pods
 */
#ifndef WSSP_H
#define WSSP_H

#if !defined(__wasm32__)
#error "wssp.h targets wasm32: compile with clang --target=wasm32"
#endif
#if !defined(__wasm_bulk_memory__)
#error "compile with -mbulk-memory (memcpy/memset become memory.copy/memory.fill; no libc needed)"
#endif

/* ------------------------------------------------------------------------------------------ */
/* 1. Basic types, strings, lines                                                              */
/* ------------------------------------------------------------------------------------------ */

typedef unsigned char wssp_u8;
typedef unsigned short wssp_u16;
typedef unsigned int wssp_u32;
typedef int wssp_i32;
typedef long long wssp_i64;
typedef unsigned long long wssp_u64;
typedef unsigned long wssp_uptr; /* pointer-sized (32 bits on wasm32) */

_Static_assert(sizeof(wssp_u16) == 2, "u16");
_Static_assert(sizeof(wssp_u32) == 4, "u32");
_Static_assert(sizeof(wssp_i64) == 8, "i64");
_Static_assert(sizeof(void *) == 4, "wasm32 pointers are 32 bits");

#define WSSP_EXPORT(name) __attribute__((export_name(name), used))
#define WSSP_I64_MAX ((wssp_i64)0x7fffffffffffffffLL)
#define WSSP_I64_MIN (-WSSP_I64_MAX - 1)
#define WSSP_MAX_SCORE 100

/* A pointer the host wrote (a u32 offset) as a C pointer. */
#define WSSP_PTR(type, offset) ((type *)(wssp_uptr)(offset))

static inline void wssp_memcpy(void *dst, const void *src, wssp_u32 n) {
    __builtin_memcpy(dst, src, n);
}

static inline void wssp_memset(void *dst, int value, wssp_u32 n) {
    __builtin_memset(dst, value, n);
}

static inline int wssp_memeq(const void *a, const void *b, wssp_u32 n) {
    const wssp_u8 *p = (const wssp_u8 *)a, *q = (const wssp_u8 *)b;
    for (wssp_u32 i = 0; i < n; i++)
        if (p[i] != q[i]) return 0;
    return 1;
}

/* Unaligned little-endian loads (wasm is little-endian; memcpy compiles to a plain load). */
static inline wssp_u32 wssp_load_u32(const void *p) {
    wssp_u32 v;
    __builtin_memcpy(&v, p, 4);
    return v;
}

static inline wssp_i32 wssp_load_i32(const void *p) {
    wssp_i32 v;
    __builtin_memcpy(&v, p, 4);
    return v;
}

static inline wssp_i64 wssp_load_i64(const void *p) {
    wssp_i64 v;
    __builtin_memcpy(&v, p, 8);
    return v;
}

/* A piece of UTF-8 text: pointer and length, no terminating NUL. */
typedef struct {
    const char *ptr;
    wssp_u32 len;
} wssp_str;

static inline wssp_str wssp_str_make(const char *ptr, wssp_u32 len) {
    wssp_str s = {ptr, len};
    return s;
}

static inline wssp_u32 wssp_cstrlen(const char *s) {
    wssp_u32 n = 0;
    while (s[n]) n++;
    return n;
}

/* A NUL-terminated C string (e.g. a literal) as a wssp_str. */
static inline wssp_str wssp_cstr(const char *s) {
    return wssp_str_make(s, wssp_cstrlen(s));
}

static inline int wssp_str_eq(wssp_str a, wssp_str b) {
    if (a.len != b.len) return 0;
    for (wssp_u32 i = 0; i < a.len; i++)
        if (a.ptr[i] != b.ptr[i]) return 0;
    return 1;
}

static inline int wssp_str_eq_cstr(wssp_str a, const char *b) {
    return wssp_str_eq(a, wssp_cstr(b));
}

/*
 * Lines: items separated by '\n', no trailing '\n'; empty text has no items, so "a" is one
 * item and "a\n" is two ("a" and "").
 *
 *     wssp_lines it = wssp_lines_of(text);
 *     wssp_str line;
 *     while (wssp_lines_next(&it, &line)) { ... }
 */
typedef struct {
    const char *pos;
    const char *end;
    int done;
} wssp_lines;

static inline wssp_lines wssp_lines_of(wssp_str text) {
    wssp_lines it = {text.ptr, text.ptr + text.len, text.len == 0};
    return it;
}

static inline int wssp_lines_next(wssp_lines *it, wssp_str *line) {
    if (it->done) return 0;
    const char *start = it->pos;
    const char *p = start;
    while (p < it->end && *p != '\n') p++;
    line->ptr = start;
    line->len = (wssp_u32)(p - start);
    if (p < it->end) {
        it->pos = p + 1; /* skip the separator; an item follows, possibly empty */
    } else {
        it->done = 1;
    }
    return 1;
}

/* Index of the first line equal to `needle`, or -1. */
static inline wssp_i32 wssp_lines_find(wssp_str text, wssp_str needle) {
    wssp_lines it = wssp_lines_of(text);
    wssp_str line;
    wssp_i32 i = 0;
    while (wssp_lines_next(&it, &line)) {
        if (wssp_str_eq(line, needle)) return i;
        i++;
    }
    return -1;
}

/* Line `index` (0-based); returns 0 when there are fewer lines. */
static inline int wssp_lines_at(wssp_str text, wssp_u32 index, wssp_str *out) {
    wssp_lines it = wssp_lines_of(text);
    wssp_str line;
    wssp_u32 i = 0;
    while (wssp_lines_next(&it, &line)) {
        if (i == index) {
            *out = line;
            return 1;
        }
        i++;
    }
    return 0;
}

/* In "key=value" lines, the value of the first line whose key is `key`. */
static inline int wssp_lines_lookup(wssp_str text, wssp_str key, wssp_str *value) {
    wssp_lines it = wssp_lines_of(text);
    wssp_str line;
    while (wssp_lines_next(&it, &line)) {
        if (line.len > key.len && line.ptr[key.len] == '=' &&
            wssp_str_eq(wssp_str_make(line.ptr, key.len), key)) {
            *value = wssp_str_make(line.ptr + key.len + 1, line.len - key.len - 1);
            return 1;
        }
    }
    return 0;
}

/*
 * A decimal integer the way Go's strconv.ParseInt(s, 10, 64) accepts it (what Kubernetes uses
 * for Gt/Lt): optional sign, one or more ASCII digits, nothing else, within int64.
 */
static inline int wssp_parse_i64(wssp_str s, wssp_i64 *out) {
    wssp_u32 i = 0;
    int negative = 0;
    if (s.len > 0 && (s.ptr[0] == '+' || s.ptr[0] == '-')) {
        negative = s.ptr[0] == '-';
        i = 1;
    }
    if (i == s.len) return 0;
    wssp_u64 limit = negative ? (wssp_u64)WSSP_I64_MAX + 1 : (wssp_u64)WSSP_I64_MAX;
    wssp_u64 value = 0;
    for (; i < s.len; i++) {
        char c = s.ptr[i];
        if (c < '0' || c > '9') return 0;
        wssp_u64 digit = (wssp_u64)(c - '0');
        if (value > (limit - digit) / 10) return 0; /* value * 10 + digit > limit */
        value = value * 10 + digit;
    }
    *out = negative ? (wssp_i64)(0 - value) : (wssp_i64)value;
    return 1;
}

/* ------------------------------------------------------------------------------------------ */
/* 2. The context (ABI §4): 256 bytes, every field a u32                                       */
/* ------------------------------------------------------------------------------------------ */

typedef struct wssp_ctx {
    /* host fields */
    wssp_u32 abi_version;        /*   0 */
    wssp_u32 capacity;           /*   4  C: rows per node column */
    wssp_u32 count;              /*   8  N: rows in use */
    wssp_u32 n_resources;        /*  12  R */
    wssp_u32 resource_names;     /*  16  R lines */
    wssp_u32 resource_names_len; /*  20 */
    wssp_u32 allocatable;        /*  24  i64[R x C] */
    wssp_u32 requested;          /*  28  i64[R x C] */
    wssp_u32 node_flags;         /*  32  u8[C] */
    wssp_u32 n_labels;           /*  36  L */
    wssp_u32 label_capacity;     /*  40 */
    wssp_u32 label_keys;         /*  44  L lines */
    wssp_u32 label_keys_len;     /*  48 */
    wssp_u32 labels;             /*  52  i32[label_capacity x C] */
    wssp_u32 label_values;       /*  56  u32[2 x label_capacity] */
    wssp_u32 node_names;         /*  60  u32[2 x C] */
    wssp_u32 pod;                /*  64  pod record */
    wssp_u32 pod_len;            /*  68 */
    wssp_u32 pod_taints;         /*  72  u8[C] */
    wssp_u32 candidates;         /*  76  u8[C] */
    wssp_u32 verdicts;           /*  80  u16[C] */
    wssp_u32 scores;             /*  84  i64[C] */
    wssp_u32 generation;         /*  88 */
    wssp_u32 stage;              /*  92  0 init, 1 filter, 2 score */
    wssp_u32 changed;            /*  96  u32[C]: rows changed since this stage's last call (1.1) */
    wssp_u32 n_changed;          /* 100  rows listed, or WSSP_ALL_ROWS (1.1) */
    wssp_u32 host_minor;         /* 104  the newest minor the host speaks (1.1; 0 before) */
    /* stages 3-9 (1.3; zero on older hosts, which never call those stages) */
    wssp_u32 node_row;           /* 108  host: the pod's node row (reserve..postbind), else
                                            WSSP_NO_ROW */
    wssp_u32 answer;             /* 112  guest: the stage's answer code (host writes 0) */
    wssp_u32 answer_value;       /* 116  guest: a number going with the answer (host writes 0) */
    wssp_u32 message;            /* 120  guest: text, why (host writes 0) */
    wssp_u32 message_len;        /* 124 */
    /* guest fields */
    wssp_u32 reasons;            /* 128  lines; reason id k is line k (1-based) */
    wssp_u32 reasons_len;        /* 132 */
    wssp_u32 want_labels;        /* 136  lines */
    wssp_u32 want_labels_len;    /* 140 */
    /* stages 3-9, continued (1.3) */
    wssp_u32 output;             /* 144  guest: command lines (host writes 0) */
    wssp_u32 output_len;         /* 148 */
    wssp_u32 waiting;            /* 152  host: lines, the pods waiting at this fragment's permit */
    wssp_u32 waiting_len;        /* 156 */
    wssp_u32 prefilter_rows;     /* 160  host: u8[C], zeroed before each wssp_prefilter */
    wssp_u32 cause;              /* 164  host: why wssp_unreserve is called (WSSP_CAUSE_*) */
    wssp_u32 now_ms[2];          /* 168  host: i64 wall clock, Unix milliseconds (stages 1-9);
                                            read with wssp_now_ms() (kept as two u32 so that
                                            the struct needs only 4-byte alignment) */
    wssp_u32 reserved_176[20];   /* 176..255 */
} wssp_ctx;

#define WSSP_CHECK_OFFSET(field, offset) \
    _Static_assert(__builtin_offsetof(wssp_ctx, field) == (offset), "context offset of " #field)
WSSP_CHECK_OFFSET(abi_version, 0);
WSSP_CHECK_OFFSET(capacity, 4);
WSSP_CHECK_OFFSET(count, 8);
WSSP_CHECK_OFFSET(n_resources, 12);
WSSP_CHECK_OFFSET(resource_names, 16);
WSSP_CHECK_OFFSET(resource_names_len, 20);
WSSP_CHECK_OFFSET(allocatable, 24);
WSSP_CHECK_OFFSET(requested, 28);
WSSP_CHECK_OFFSET(node_flags, 32);
WSSP_CHECK_OFFSET(n_labels, 36);
WSSP_CHECK_OFFSET(label_capacity, 40);
WSSP_CHECK_OFFSET(label_keys, 44);
WSSP_CHECK_OFFSET(label_keys_len, 48);
WSSP_CHECK_OFFSET(labels, 52);
WSSP_CHECK_OFFSET(label_values, 56);
WSSP_CHECK_OFFSET(node_names, 60);
WSSP_CHECK_OFFSET(pod, 64);
WSSP_CHECK_OFFSET(pod_len, 68);
WSSP_CHECK_OFFSET(pod_taints, 72);
WSSP_CHECK_OFFSET(candidates, 76);
WSSP_CHECK_OFFSET(verdicts, 80);
WSSP_CHECK_OFFSET(scores, 84);
WSSP_CHECK_OFFSET(generation, 88);
WSSP_CHECK_OFFSET(stage, 92);
WSSP_CHECK_OFFSET(changed, 96);
WSSP_CHECK_OFFSET(n_changed, 100);
WSSP_CHECK_OFFSET(host_minor, 104);
WSSP_CHECK_OFFSET(reasons, 128);
WSSP_CHECK_OFFSET(reasons_len, 132);
WSSP_CHECK_OFFSET(want_labels, 136);
WSSP_CHECK_OFFSET(want_labels_len, 140);
WSSP_CHECK_OFFSET(node_row, 108);
WSSP_CHECK_OFFSET(answer, 112);
WSSP_CHECK_OFFSET(answer_value, 116);
WSSP_CHECK_OFFSET(message, 120);
WSSP_CHECK_OFFSET(message_len, 124);
WSSP_CHECK_OFFSET(output, 144);
WSSP_CHECK_OFFSET(output_len, 148);
WSSP_CHECK_OFFSET(waiting, 152);
WSSP_CHECK_OFFSET(waiting_len, 156);
WSSP_CHECK_OFFSET(prefilter_rows, 160);
WSSP_CHECK_OFFSET(cause, 164);
WSSP_CHECK_OFFSET(now_ms, 168);
_Static_assert(sizeof(wssp_ctx) == 256, "the context is 256 bytes");
#undef WSSP_CHECK_OFFSET

#define WSSP_STAGE_INIT 0
#define WSSP_STAGE_FILTER 1
#define WSSP_STAGE_SCORE 2
/* Stages of minor 3 (section 10); a module takes those whose wssp_<stage> it exports. */
#define WSSP_STAGE_PREFILTER 3
#define WSSP_STAGE_POSTFILTER 4
#define WSSP_STAGE_RESERVE 5
#define WSSP_STAGE_UNRESERVE 6
#define WSSP_STAGE_PERMIT 7
#define WSSP_STAGE_PREBIND 8
#define WSSP_STAGE_POSTBIND 9

/* Node flag bits (§4.1). */
#define WSSP_NODE_PRESENT 0x1u
#define WSSP_NODE_UNSCHEDULABLE 0x2u
#define WSSP_NODE_NOT_READY 0x4u
#define WSSP_NODE_VIRTUAL 0x8u      /* a cloud pool's virtual node (host minor 2) */

/* Requirement operators (§4.2). */
#define WSSP_OP_IN 0u
#define WSSP_OP_NOT_IN 1u
#define WSSP_OP_EXISTS 2u
#define WSSP_OP_DOES_NOT_EXIST 3u
#define WSSP_OP_GT 4u
#define WSSP_OP_LT 5u

/* Number of node rows to write outputs for (N). */
static inline wssp_u32 wssp_rows(const wssp_ctx *ctx) { return ctx->count; }

/* ------------------------------------------------------------------------------------------ */
/* 3. Node columns                                                                             */
/* ------------------------------------------------------------------------------------------ */

static inline wssp_str wssp_resource_names(const wssp_ctx *ctx) {
    return wssp_str_make(WSSP_PTR(const char, ctx->resource_names), ctx->resource_names_len);
}

/* Column index of resource `name` ("cpu", "memory", "nvidia.com/gpu", ...), or -1. */
static inline wssp_i32 wssp_resource(const wssp_ctx *ctx, const char *name) {
    wssp_i32 r = wssp_lines_find(wssp_resource_names(ctx), wssp_cstr(name));
    return r < (wssp_i32)ctx->n_resources ? r : -1;
}

static inline wssp_i32 wssp_resource_str(const wssp_ctx *ctx, wssp_str name) {
    wssp_i32 r = wssp_lines_find(wssp_resource_names(ctx), name);
    return r < (wssp_i32)ctx->n_resources ? r : -1;
}

/* Allocatable amount of resource column r on row i (0 for r < 0). */
static inline wssp_i64 wssp_allocatable(const wssp_ctx *ctx, wssp_i32 r, wssp_u32 row) {
    if (r < 0) return 0;
    return WSSP_PTR(const wssp_i64, ctx->allocatable)[(wssp_u32)r * ctx->capacity + row];
}

/* Sum of the requests of the pods on row i for resource column r (0 for r < 0). */
static inline wssp_i64 wssp_requested(const wssp_ctx *ctx, wssp_i32 r, wssp_u32 row) {
    if (r < 0) return 0;
    return WSSP_PTR(const wssp_i64, ctx->requested)[(wssp_u32)r * ctx->capacity + row];
}

static inline wssp_u32 wssp_node_flags(const wssp_ctx *ctx, wssp_u32 row) {
    return WSSP_PTR(const wssp_u8, ctx->node_flags)[row];
}

static inline int wssp_node_present(const wssp_ctx *ctx, wssp_u32 row) {
    return (wssp_node_flags(ctx, row) & WSSP_NODE_PRESENT) != 0;
}

static inline int wssp_node_unschedulable(const wssp_ctx *ctx, wssp_u32 row) {
    return (wssp_node_flags(ctx, row) & WSSP_NODE_UNSCHEDULABLE) != 0;
}

static inline int wssp_node_not_ready(const wssp_ctx *ctx, wssp_u32 row) {
    return (wssp_node_flags(ctx, row) & WSSP_NODE_NOT_READY) != 0;
}

static inline int wssp_node_virtual(const wssp_ctx *ctx, wssp_u32 row) {
    return (wssp_node_flags(ctx, row) & WSSP_NODE_VIRTUAL) != 0;
}

static inline wssp_str wssp_node_name(const wssp_ctx *ctx, wssp_u32 row) {
    const wssp_u32 *names = WSSP_PTR(const wssp_u32, ctx->node_names);
    return wssp_str_make(WSSP_PTR(const char, names[2 * row]), names[2 * row + 1]);
}

/* 1 when the node has a NoSchedule/NoExecute taint this pod does not tolerate. */
static inline int wssp_pod_taint(const wssp_ctx *ctx, wssp_u32 row) {
    return (WSSP_PTR(const wssp_u8, ctx->pod_taints)[row] & 1u) != 0;
}

/* 1 when the node is cordoned and this pod does not tolerate
 * node.kubernetes.io/unschedulable:NoSchedule (kube's NodeUnschedulable). */
static inline int wssp_pod_cordoned(const wssp_ctx *ctx, wssp_u32 row) {
    return (WSSP_PTR(const wssp_u8, ctx->pod_taints)[row] & 2u) != 0;
}

/* During wssp_score: 1 for the rows to score. */
static inline int wssp_candidate(const wssp_ctx *ctx, wssp_u32 row) {
    return WSSP_PTR(const wssp_u8, ctx->candidates)[row] != 0;
}

/* Filter output: 0 feasible, k >= 1 the reason id returned by wssp_add_reason(). */
static inline void wssp_set_verdict(wssp_ctx *ctx, wssp_u32 row, wssp_u32 reason) {
    WSSP_PTR(wssp_u16, ctx->verdicts)[row] = (wssp_u16)reason;
}

/* Score output, 0..100, clamped here so an arithmetic slip cannot fail the call. */
static inline void wssp_set_score(wssp_ctx *ctx, wssp_u32 row, wssp_i64 score) {
    if (score < 0) score = 0;
    if (score > WSSP_MAX_SCORE) score = WSSP_MAX_SCORE;
    WSSP_PTR(wssp_i64, ctx->scores)[row] = score;
}

/* -- labels -- */

static inline wssp_str wssp_label_keys(const wssp_ctx *ctx) {
    return wssp_str_make(WSSP_PTR(const char, ctx->label_keys), ctx->label_keys_len);
}

/* Label key column of `key`, or -1 when the key is not resident (declare it with
 * wssp_want_label() during init to have it from the start). */
static inline wssp_i32 wssp_label_column(const wssp_ctx *ctx, const char *key) {
    wssp_i32 l = wssp_lines_find(wssp_label_keys(ctx), wssp_cstr(key));
    return l < (wssp_i32)ctx->n_labels ? l : -1;
}

static inline wssp_i32 wssp_label_column_str(const wssp_ctx *ctx, wssp_str key) {
    wssp_i32 l = wssp_lines_find(wssp_label_keys(ctx), key);
    return l < (wssp_i32)ctx->n_labels ? l : -1;
}

/* Value id of label column l on row i; -1 when the node lacks the label (or l < 0). */
static inline wssp_i32 wssp_label_id(const wssp_ctx *ctx, wssp_i32 l, wssp_u32 row) {
    if (l < 0) return -1;
    return WSSP_PTR(const wssp_i32, ctx->labels)[(wssp_u32)l * ctx->capacity + row];
}

/* The value lines of label column l (value id v is line v). */
static inline wssp_str wssp_label_values(const wssp_ctx *ctx, wssp_i32 l) {
    const wssp_u32 *values = WSSP_PTR(const wssp_u32, ctx->label_values);
    wssp_u32 k = 2 * (wssp_u32)l;
    return wssp_str_make(WSSP_PTR(const char, values[k]), values[k + 1]);
}

/* Value id of `value` in label column l, or -1 when no node has that value (yet). Ids are
 * stable for the instance's life, so a fragment may look its ids up once. */
static inline wssp_i32 wssp_label_value_id(const wssp_ctx *ctx, wssp_i32 l, wssp_str value) {
    if (l < 0) return -1;
    return wssp_lines_find(wssp_label_values(ctx, l), value);
}

/* The text of row i's value for label column l; 0 when the node lacks the label. Scans the
 * value lines: prefer comparing ids (wssp_label_id / wssp_label_value_id) in hot loops. */
static inline int wssp_label_value(const wssp_ctx *ctx, wssp_i32 l, wssp_u32 row, wssp_str *out) {
    wssp_i32 id = wssp_label_id(ctx, l, row);
    if (id < 0) return 0;
    return wssp_lines_at(wssp_label_values(ctx, l), (wssp_u32)id, out);
}

/* ------------------------------------------------------------------------------------------ */
/* 4. The pod record (§4.2)                                                                    */
/* ------------------------------------------------------------------------------------------ */

static inline const wssp_u8 *wssp_pod_base(const wssp_ctx *ctx) {
    return WSSP_PTR(const wssp_u8, ctx->pod);
}

/* Offset of the fields that follow the request vector. */
static inline wssp_u32 wssp_pod_tail(const wssp_ctx *ctx) {
    return 8 + 8 * wssp_load_u32(wssp_pod_base(ctx) + 4);
}

/* The pod's request for resource column r (0 for r < 0 or beyond the record's R). */
static inline wssp_i64 wssp_pod_request(const wssp_ctx *ctx, wssp_i32 r) {
    const wssp_u8 *pod = wssp_pod_base(ctx);
    if (r < 0 || (wssp_u32)r >= wssp_load_u32(pod + 4)) return 0;
    return wssp_load_i64(pod + 8 + 8 * (wssp_u32)r);
}

static inline wssp_i64 wssp_pod_nonzero_cpu(const wssp_ctx *ctx) {
    return wssp_load_i64(wssp_pod_base(ctx) + wssp_pod_tail(ctx));
}

static inline wssp_i64 wssp_pod_nonzero_memory(const wssp_ctx *ctx) {
    return wssp_load_i64(wssp_pod_base(ctx) + wssp_pod_tail(ctx) + 8);
}

static inline wssp_i32 wssp_pod_priority(const wssp_ctx *ctx) {
    return wssp_load_i32(wssp_pod_base(ctx) + wssp_pod_tail(ctx) + 16);
}

static inline wssp_u32 wssp_pod_n_terms(const wssp_ctx *ctx) {
    return wssp_load_u32(wssp_pod_base(ctx) + wssp_pod_tail(ctx) + 20);
}

static inline wssp_u32 wssp_pod_n_requirements(const wssp_ctx *ctx) {
    return wssp_load_u32(wssp_pod_base(ctx) + wssp_pod_tail(ctx) + 24);
}

/* A (offset, length) text field of the pod record at `field` bytes past the tail. */
static inline wssp_str wssp_pod__text(const wssp_ctx *ctx, wssp_u32 field) {
    const wssp_u8 *pod = wssp_pod_base(ctx);
    const wssp_u8 *at = pod + wssp_pod_tail(ctx) + field;
    return wssp_str_make((const char *)pod + wssp_load_u32(at), wssp_load_u32(at + 4));
}

static inline wssp_str wssp_pod_namespace(const wssp_ctx *ctx) { return wssp_pod__text(ctx, 32); }
static inline wssp_str wssp_pod_name(const wssp_ctx *ctx) { return wssp_pod__text(ctx, 40); }
/* "key=value" lines */
static inline wssp_str wssp_pod_labels(const wssp_ctx *ctx) { return wssp_pod__text(ctx, 48); }
static inline wssp_str wssp_pod_annotations(const wssp_ctx *ctx) { return wssp_pod__text(ctx, 56); }

/* The value of the pod's label `key`; 0 when the pod has no such label. */
static inline int wssp_pod_label(const wssp_ctx *ctx, const char *key, wssp_str *value) {
    return wssp_lines_lookup(wssp_pod_labels(ctx), wssp_cstr(key), value);
}

/* The value of the pod's annotation `key`; 0 when absent (or its value has a newline). */
static inline int wssp_pod_annotation(const wssp_ctx *ctx, const char *key, wssp_str *value) {
    return wssp_lines_lookup(wssp_pod_annotations(ctx), wssp_cstr(key), value);
}

static inline int wssp_pod_label_str(const wssp_ctx *ctx, wssp_str key, wssp_str *value) {
    return wssp_lines_lookup(wssp_pod_labels(ctx), key, value);
}

static inline int wssp_pod_annotation_str(const wssp_ctx *ctx, wssp_str key, wssp_str *value) {
    return wssp_lines_lookup(wssp_pod_annotations(ctx), key, value);
}

/*
 * The pod's uid (record offset 72 + 8R, minor 3). Empty when the record is older and does not
 * cover the field (its `size` says how far it goes), or when the field points outside it.
 */
static inline wssp_str wssp_pod_uid(const wssp_ctx *ctx) {
    const wssp_u8 *pod = wssp_pod_base(ctx);
    wssp_u32 size = wssp_load_u32(pod);
    wssp_u32 at = wssp_pod_tail(ctx) + 64;
    if (size > ctx->pod_len || at + 8 > size) return wssp_str_make(0, 0);
    wssp_u32 offset = wssp_load_u32(pod + at), len = wssp_load_u32(pod + at + 4);
    if (offset > size || len > size - offset) return wssp_str_make(0, 0);
    return wssp_str_make((const char *)pod + offset, len);
}

/* One node selector requirement. */
typedef struct {
    wssp_u32 term;           /* 0: nodeSelector; k >= 1: required node affinity term k */
    wssp_u32 label;          /* label key column */
    wssp_u32 op;             /* WSSP_OP_* */
    wssp_u32 n_values;
    const wssp_u8 *values;   /* i64[n_values], possibly unaligned: read with wssp_req_value */
} wssp_requirement;

static inline wssp_i64 wssp_req_value(const wssp_requirement *req, wssp_u32 k) {
    return wssp_load_i64(req->values + 8 * k);
}

/*
 * Iterate the requirements:
 *
 *     wssp_requirements it = wssp_requirements_of(ctx);
 *     wssp_requirement req;
 *     while (wssp_requirements_next(&it, &req)) { ... }
 */
typedef struct {
    const wssp_u8 *pos;
    const wssp_u8 *end; /* the record's end: a malformed count cannot read past it */
    wssp_u32 left;
} wssp_requirements;

static inline wssp_requirements wssp_requirements_of(const wssp_ctx *ctx) {
    const wssp_u8 *pod = wssp_pod_base(ctx);
    wssp_u32 tail = wssp_pod_tail(ctx);
    wssp_requirements it;
    it.pos = pod + wssp_load_u32(pod + tail + 28);
    it.end = pod + ctx->pod_len;
    it.left = wssp_load_u32(pod + tail + 24);
    return it;
}

static inline int wssp_requirements_next(wssp_requirements *it, wssp_requirement *req) {
    if (it->left == 0 || it->pos + 16 > it->end) return 0;
    req->term = wssp_load_u32(it->pos);
    req->label = wssp_load_u32(it->pos + 4);
    req->op = wssp_load_u32(it->pos + 8);
    req->n_values = wssp_load_u32(it->pos + 12);
    req->values = it->pos + 16;
    if (req->n_values > (wssp_u32)(it->end - req->values) / 8) return 0;
    it->pos = req->values + 8 * req->n_values;
    it->left--;
    return 1;
}

/* ------------------------------------------------------------------------------------------ */
/* 5. Node constraints: nodeSelector AND (term 1 OR term 2 ...)                                */
/* ------------------------------------------------------------------------------------------ */

/* Whether row i satisfies one requirement. */
static inline int wssp_requirement_matches(const wssp_ctx *ctx, const wssp_requirement *req,
                                           wssp_u32 row) {
    wssp_i32 id = wssp_label_id(ctx, (wssp_i32)req->label, row);
    switch (req->op) {
    case WSSP_OP_IN:
    case WSSP_OP_NOT_IN: {
        int found = 0;
        if (id >= 0) {
            for (wssp_u32 k = 0; k < req->n_values; k++) {
                if (wssp_req_value(req, k) == (wssp_i64)id) {
                    found = 1;
                    break;
                }
            }
        }
        /* In: has the label with one of the values. NotIn: lacks it, or has another value. */
        return req->op == WSSP_OP_IN ? found : !found;
    }
    case WSSP_OP_EXISTS:
        return id >= 0;
    case WSSP_OP_DOES_NOT_EXIST:
        return id < 0;
    case WSSP_OP_GT:
    case WSSP_OP_LT: {
        wssp_str text;
        wssp_i64 number;
        if (req->n_values < 1 || !wssp_label_value(ctx, (wssp_i32)req->label, row, &text))
            return 0;
        if (!wssp_parse_i64(text, &number)) return 0; /* not an integer: no match */
        wssp_i64 bound = wssp_req_value(req, 0);
        return req->op == WSSP_OP_GT ? number > bound : number < bound;
    }
    default:
        return 0; /* an operator from a newer minor version: fail closed */
    }
}

/* Whether row i satisfies every requirement of term `term` (a term >= 1 with no requirement
 * matches no node, as in Kubernetes; term 0 with none matches every node). */
static inline int wssp_term_matches(const wssp_ctx *ctx, wssp_u32 term, wssp_u32 row) {
    wssp_requirements it = wssp_requirements_of(ctx);
    wssp_requirement req;
    int any = 0;
    while (wssp_requirements_next(&it, &req)) {
        if (req.term != term) continue;
        any = 1;
        if (!wssp_requirement_matches(ctx, &req, row)) return 0;
    }
    return any || term == 0;
}

/*
 * Whether row i matches the pod's node constraints (§4.2): every requirement of term 0 (the
 * nodeSelector) and, when n_terms > 0, every requirement of at least one term k >= 1.
 */
static inline int wssp_node_matches(const wssp_ctx *ctx, wssp_u32 row) {
    if (wssp_pod_n_requirements(ctx) == 0 && wssp_pod_n_terms(ctx) == 0) return 1;
    if (!wssp_term_matches(ctx, 0, row)) return 0;
    wssp_u32 n_terms = wssp_pod_n_terms(ctx);
    if (n_terms == 0) return 1;
    for (wssp_u32 k = 1; k <= n_terms; k++)
        if (wssp_term_matches(ctx, k, row)) return 1;
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* 6. Allocator and the marker export                                                          */
/* ------------------------------------------------------------------------------------------ */

extern unsigned char __heap_base; /* provided by wasm-ld: the first byte after data and stack */

#define WSSP_PAGE 65536u

static wssp_uptr wssp__heap_top;

/*
 * A bump allocator: 8-byte aligned, never frees. Memory past __heap_base is never handed out
 * twice, and wasm memory (initial or grown) starts zeroed, so every block is zero-filled.
 * Returns 0 when memory cannot grow (for instance at the host's memory cap).
 */
static inline void *wssp_malloc(wssp_u32 size) {
    if (wssp__heap_top == 0) wssp__heap_top = ((wssp_uptr)&__heap_base + 7u) & ~(wssp_uptr)7u;
    wssp_u64 start = wssp__heap_top;
    wssp_u64 end = start + (((wssp_u64)size + 7u) & ~(wssp_u64)7u);
    wssp_u64 have = (wssp_u64)__builtin_wasm_memory_size(0) * WSSP_PAGE;
    if (end > 0xFFFFFFFFull) return 0;
    if (end > have) {
        wssp_u64 pages = (end - have + WSSP_PAGE - 1) / WSSP_PAGE;
        if (__builtin_wasm_memory_grow(0, (wssp_uptr)pages) == (wssp_uptr)-1) return 0;
    }
    wssp__heap_top = (wssp_uptr)end;
    return (void *)(wssp_uptr)start;
}

WSSP_EXPORT("wssp_alloc") wssp_u32 wssp_alloc(wssp_i32 size) {
    if (size < 0) return 0;
    return (wssp_u32)(wssp_uptr)wssp_malloc((wssp_u32)size);
}

/*
 * ABI major 1 (the name), minor 1 (the value): the outputs are the guest's between calls.
 * The value stays 1 with the stages of minor 3: a host takes a stage because the module
 * exports its function, not because of this number, so a module using section 10 loads on
 * a host of minor 2 as well for its filter and score stages.
 */
WSSP_EXPORT("wssp_abi_v1") wssp_i32 wssp_abi_v1(void) { return 1; }

/*
 * Incremental calls (ABI.md §4.3). The host lists the rows whose inputs changed since the
 * previous call of the same stage; verdicts and scores keep what the guest wrote. A stage whose
 * output for a row depends only on that row and on some part of the pod (the stage's *key*)
 * recomputes just the listed rows when the key is unchanged:
 *
 *     static wssp_memo memo;
 *     wssp_memo_begin(&memo);
 *     wssp_memo_add(&memo, &request, sizeof request);     (every pod input the stage reads)
 *     const wssp_u32 *rows;
 *     wssp_u32 m = wssp_changed_rows(ctx, &memo, &rows);
 *     if (m == WSSP_ALL_ROWS) { every row } else { rows[0..m) }
 *
 * A memo that cannot hold its key (out of memory) makes every call a full one.
 */
#define WSSP_ALL_ROWS 0xFFFFFFFFu

typedef struct {
    wssp_u8 *key, *next;   /* the key of the last full or partial call, the one being built */
    wssp_u32 key_len, next_len, cap;
    int valid, overflow;
} wssp_memo;

static inline void wssp_memo_begin(wssp_memo *m) {
    m->next_len = 0;
    m->overflow = 0;
}

static inline void wssp_memo_add(wssp_memo *m, const void *data, wssp_u32 len) {
    if (m->overflow) return;
    if (m->next_len + len > m->cap) {
        wssp_u32 cap = 2 * (m->next_len + len) + 64;
        wssp_u8 *key = (wssp_u8 *)wssp_malloc(cap), *next = (wssp_u8 *)wssp_malloc(cap);
        if (!key || !next) {
            m->overflow = 1;
            m->valid = 0;
            return;
        }
        wssp_memcpy(key, m->key, m->key_len);
        wssp_memcpy(next, m->next, m->next_len);
        m->key = key;
        m->next = next;
        m->cap = cap;
    }
    wssp_memcpy(m->next + m->next_len, data, len);
    m->next_len += len;
}

/* The rows to compute in this call: their count with *rows pointing at them (ascending, each
 * once), or WSSP_ALL_ROWS. Remembers the key built since wssp_memo_begin for the next call. */
static inline wssp_u32 wssp_changed_rows(const wssp_ctx *ctx, wssp_memo *m, const wssp_u32 **rows) {
    *rows = WSSP_PTR(const wssp_u32, ctx->changed);
    int same = m->valid && !m->overflow && m->key_len == m->next_len &&
               wssp_memeq(m->key, m->next, m->key_len);
    if (!m->overflow) {
        wssp_u8 *t = m->key;
        m->key = m->next;
        m->next = t;
        m->key_len = m->next_len;
        m->valid = 1;
    }
    if (!same || ctx->host_minor < 1 || ctx->n_changed > ctx->count) return WSSP_ALL_ROWS;
    return ctx->n_changed;
}

/* ------------------------------------------------------------------------------------------ */
/* 7. Init helpers: reasons and wanted labels                                                  */
/* ------------------------------------------------------------------------------------------ */

/* A growing lines buffer; old buffers are left behind (init runs once per instance). */
typedef struct {
    char *ptr;
    wssp_u32 len;
    wssp_u32 cap;
    wssp_u32 count;
} wssp_text;

static wssp_text wssp__reasons;
static wssp_text wssp__want_labels;

/* Append `a` then `b` as one new line; returns the line's 1-based number, 0 when out of memory
 * or when the line would contain a '\n'. */
static inline wssp_u32 wssp_text_add_line(wssp_text *t, wssp_str a, wssp_str b) {
    for (wssp_u32 i = 0; i < a.len; i++) if (a.ptr[i] == '\n') return 0;
    for (wssp_u32 i = 0; i < b.len; i++) if (b.ptr[i] == '\n') return 0;
    wssp_u32 need = t->len + (t->count ? 1 : 0) + a.len + b.len;
    if (need > t->cap) {
        wssp_u32 cap = t->cap ? t->cap : 64;
        while (cap < need) cap *= 2;
        char *bigger = (char *)wssp_malloc(cap);
        if (!bigger) return 0;
        if (t->len) wssp_memcpy(bigger, t->ptr, t->len);
        t->ptr = bigger;
        t->cap = cap;
    }
    if (t->count) t->ptr[t->len++] = '\n';
    if (a.len) wssp_memcpy(t->ptr + t->len, a.ptr, a.len);
    t->len += a.len;
    if (b.len) wssp_memcpy(t->ptr + t->len, b.ptr, b.len);
    t->len += b.len;
    return ++t->count;
}

/*
 * Declare a failure reason during wssp_init; returns its id (the verdict to write), 0 on
 * failure. `wssp_add_reason2(ctx, "Insufficient ", name)` joins two parts.
 */
static inline wssp_u32 wssp_add_reason_str(wssp_ctx *ctx, wssp_str prefix, wssp_str rest) {
    wssp_u32 id = wssp_text_add_line(&wssp__reasons, prefix, rest);
    ctx->reasons = (wssp_u32)(wssp_uptr)wssp__reasons.ptr;
    ctx->reasons_len = wssp__reasons.len;
    return id;
}

static inline wssp_u32 wssp_add_reason(wssp_ctx *ctx, const char *reason) {
    return wssp_add_reason_str(ctx, wssp_cstr(reason), wssp_str_make(0, 0));
}

static inline wssp_u32 wssp_add_reason2(wssp_ctx *ctx, const char *prefix, wssp_str rest) {
    return wssp_add_reason_str(ctx, wssp_cstr(prefix), rest);
}

/* Ask for a label key column from the start (during wssp_init); returns 0 on failure. */
static inline wssp_u32 wssp_want_label_str(wssp_ctx *ctx, wssp_str key) {
    wssp_u32 n = wssp_text_add_line(&wssp__want_labels, key, wssp_str_make(0, 0));
    ctx->want_labels = (wssp_u32)(wssp_uptr)wssp__want_labels.ptr;
    ctx->want_labels_len = wssp__want_labels.len;
    return n;
}

static inline wssp_u32 wssp_want_label(wssp_ctx *ctx, const char *key) {
    return wssp_want_label_str(ctx, wssp_cstr(key));
}

/* ------------------------------------------------------------------------------------------ */
/* 8. A small JSON reader for flat configuration objects                                       */
/* ------------------------------------------------------------------------------------------ */

/*
 * Enough JSON for `spec.config`: the top-level object's members by key, with numbers (integers),
 * strings, booleans, and arrays of strings. Nested values are skipped correctly but not read.
 *
 *     wssp_json cfg = wssp_json_of(config, len);
 *     wssp_str s;  wssp_i64 n;  int b;
 *     if (wssp_json_string(cfg, "resource", &s)) ...
 *     if (wssp_json_int(cfg, "weight", &n)) ...
 *     if (wssp_json_bool(cfg, "strict", &b)) ...
 *     wssp_json_iter it;
 *     if (wssp_json_array(cfg, "allowed", &it)) while (wssp_json_array_next_string(&it, &s)) ...
 *
 * Member names are compared as written (no escape decoding: write keys plainly).
 * Strings are returned raw (between the quotes). A string holding a backslash escape can be
 * decoded with wssp_json_unescape().
 */
typedef struct {
    const char *ptr;
    const char *end;
} wssp_json;

typedef wssp_json wssp_json_iter;

static inline wssp_json wssp_json_of(const char *text, wssp_i32 len) {
    wssp_json j = {text, text + (len > 0 ? len : 0)};
    return j;
}

static inline const char *wssp_json__ws(const char *p, const char *end) {
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')) p++;
    return p;
}

/* p at '"': returns the position after the closing quote (0 if unterminated). */
static inline const char *wssp_json__skip_string(const char *p, const char *end) {
    for (p++; p < end; p++) {
        if (*p == '\\') {
            p++;
        } else if (*p == '"') {
            return p + 1;
        }
    }
    return 0;
}

/* Skip one value starting at p (after whitespace); returns the position after it, or 0. */
static inline const char *wssp_json__skip_value(const char *p, const char *end) {
    p = wssp_json__ws(p, end);
    if (p >= end) return 0;
    if (*p == '"') return wssp_json__skip_string(p, end);
    if (*p == '{' || *p == '[') {
        wssp_u32 depth = 0;
        while (p < end) {
            char c = *p;
            if (c == '"') {
                p = wssp_json__skip_string(p, end);
                if (!p) return 0;
                continue;
            }
            if (c == '{' || c == '[') depth++;
            if (c == '}' || c == ']') {
                if (--depth == 0) return p + 1;
            }
            p++;
        }
        return 0;
    }
    /* number, true, false, null */
    const char *start = p;
    while (p < end && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\t' &&
           *p != '\n' && *p != '\r')
        p++;
    return p > start ? p : 0;
}

/* The raw text of the top-level member `key` (value start .. end); 0 when absent. */
static inline int wssp_json_find(wssp_json j, const char *key, wssp_json *value) {
    wssp_str want = wssp_cstr(key);
    const char *p = wssp_json__ws(j.ptr, j.end);
    if (p >= j.end || *p != '{') return 0;
    p++;
    for (;;) {
        p = wssp_json__ws(p, j.end);
        if (p >= j.end || *p != '"') return 0;
        const char *name = p + 1;
        const char *after = wssp_json__skip_string(p, j.end);
        if (!after) return 0;
        wssp_str got = wssp_str_make(name, (wssp_u32)(after - 1 - name));
        p = wssp_json__ws(after, j.end);
        if (p >= j.end || *p != ':') return 0;
        p = wssp_json__ws(p + 1, j.end);
        const char *value_end = wssp_json__skip_value(p, j.end);
        if (!value_end) return 0;
        if (wssp_str_eq(got, want)) {
            value->ptr = p;
            value->end = value_end;
            return 1;
        }
        p = wssp_json__ws(value_end, j.end);
        if (p < j.end && *p == ',') {
            p++;
            continue;
        }
        return 0;
    }
}

static inline int wssp_json__as_string(wssp_json v, wssp_str *out) {
    if (v.end - v.ptr < 2 || *v.ptr != '"') return 0;
    *out = wssp_str_make(v.ptr + 1, (wssp_u32)(v.end - v.ptr - 2));
    return 1;
}

static inline int wssp_json_string(wssp_json j, const char *key, wssp_str *out) {
    wssp_json v;
    return wssp_json_find(j, key, &v) && wssp_json__as_string(v, out);
}

/* An integer member (a JSON number without fraction or exponent). */
static inline int wssp_json_int(wssp_json j, const char *key, wssp_i64 *out) {
    wssp_json v;
    if (!wssp_json_find(j, key, &v)) return 0;
    return wssp_parse_i64(wssp_str_make(v.ptr, (wssp_u32)(v.end - v.ptr)), out);
}

static inline int wssp_json_bool(wssp_json j, const char *key, int *out) {
    wssp_json v;
    if (!wssp_json_find(j, key, &v)) return 0;
    wssp_str s = wssp_str_make(v.ptr, (wssp_u32)(v.end - v.ptr));
    if (wssp_str_eq_cstr(s, "true")) { *out = 1; return 1; }
    if (wssp_str_eq_cstr(s, "false")) { *out = 0; return 1; }
    return 0;
}

/* Start iterating the array member `key`. */
static inline int wssp_json_array(wssp_json j, const char *key, wssp_json_iter *it) {
    wssp_json v;
    if (!wssp_json_find(j, key, &v) || *v.ptr != '[') return 0;
    it->ptr = v.ptr + 1; /* just after '[' */
    it->end = v.end - 1; /* at ']' */
    return 1;
}

/* The next element's raw text; 0 at the end of the array. */
static inline int wssp_json_array_next(wssp_json_iter *it, wssp_json *element) {
    const char *p = wssp_json__ws(it->ptr, it->end);
    if (p < it->end && *p == ',') p = wssp_json__ws(p + 1, it->end);
    if (p >= it->end) return 0;
    const char *after = wssp_json__skip_value(p, it->end);
    if (!after) return 0;
    element->ptr = p;
    element->end = after;
    it->ptr = after;
    return 1;
}

/* The next string element (non-string elements are skipped). */
static inline int wssp_json_array_next_string(wssp_json_iter *it, wssp_str *out) {
    wssp_json element;
    while (wssp_json_array_next(it, &element))
        if (wssp_json__as_string(element, out)) return 1;
    return 0;
}

/*
 * Iterate the members of the object member `key` (`{"groups": {"a": 2, "b": 4}}`):
 *
 *     wssp_json_iter it;  wssp_str name;  wssp_json value;
 *     if (wssp_json_object(cfg, "groups", &it))
 *         while (wssp_json_object_next(&it, &name, &value)) ...   (name raw, value any JSON)
 *
 * wssp_json_object returns 0 when the member is absent or not an object; wssp_json_object_next
 * returns 0 at the end and on malformed text. A value that is itself an object can be read
 * with wssp_json_find / wssp_json_int & co. (they take any object's text).
 */
static inline int wssp_json_object(wssp_json j, const char *key, wssp_json_iter *it) {
    wssp_json v;
    if (!wssp_json_find(j, key, &v) || *v.ptr != '{') return 0;
    it->ptr = v.ptr + 1; /* just after '{' */
    it->end = v.end - 1; /* at '}' */
    return 1;
}

static inline int wssp_json_object_next(wssp_json_iter *it, wssp_str *name, wssp_json *value) {
    const char *p = wssp_json__ws(it->ptr, it->end);
    if (p < it->end && *p == ',') p = wssp_json__ws(p + 1, it->end);
    if (p >= it->end || *p != '"') return 0;
    const char *after = wssp_json__skip_string(p, it->end);
    if (!after) return 0;
    *name = wssp_str_make(p + 1, (wssp_u32)(after - 1 - (p + 1)));
    p = wssp_json__ws(after, it->end);
    if (p >= it->end || *p != ':') return 0;
    p = wssp_json__ws(p + 1, it->end);
    const char *end = wssp_json__skip_value(p, it->end);
    if (!end) return 0;
    value->ptr = p;
    value->end = end;
    it->ptr = end;
    return 1;
}

/* A value's text as an integer (a JSON number without fraction or exponent). */
static inline int wssp_json_as_int(wssp_json v, wssp_i64 *out) {
    return wssp_parse_i64(wssp_str_make(v.ptr, (wssp_u32)(v.end - v.ptr)), out);
}

/* Whether a raw JSON string needs decoding. */
static inline int wssp_json_has_escape(wssp_str raw) {
    for (wssp_u32 i = 0; i < raw.len; i++) if (raw.ptr[i] == '\\') return 1;
    return 0;
}

static inline int wssp_json__hex(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/*
 * Decode a raw JSON string (escapes, \uXXXX as UTF-8, surrogate pairs joined) into fresh
 * memory. Returns 0 on a malformed escape or out of memory.
 */
static inline int wssp_json_unescape(wssp_str raw, wssp_str *out) {
    if (!wssp_json_has_escape(raw)) {
        *out = raw;
        return 1;
    }
    char *buf = (char *)wssp_malloc(raw.len); /* decoding never lengthens the text */
    if (!buf) return 0;
    wssp_u32 n = 0;
    for (wssp_u32 i = 0; i < raw.len; i++) {
        char c = raw.ptr[i];
        if (c != '\\') {
            buf[n++] = c;
            continue;
        }
        if (++i >= raw.len) return 0;
        switch (raw.ptr[i]) {
        case '"': buf[n++] = '"'; break;
        case '\\': buf[n++] = '\\'; break;
        case '/': buf[n++] = '/'; break;
        case 'b': buf[n++] = '\b'; break;
        case 'f': buf[n++] = '\f'; break;
        case 'n': buf[n++] = '\n'; break;
        case 'r': buf[n++] = '\r'; break;
        case 't': buf[n++] = '\t'; break;
        case 'u': {
            wssp_u32 cp = 0;
            for (int k = 0; k < 4; k++) {
                if (++i >= raw.len) return 0;
                int h = wssp_json__hex(raw.ptr[i]);
                if (h < 0) return 0;
                cp = cp * 16 + (wssp_u32)h;
            }
            if (cp >= 0xD800 && cp < 0xDC00 && i + 6 < raw.len &&
                raw.ptr[i + 1] == '\\' && raw.ptr[i + 2] == 'u') {
                wssp_u32 low = 0;
                int ok = 1;
                for (int k = 3; k < 7; k++) {
                    int h = wssp_json__hex(raw.ptr[i + (wssp_u32)k]);
                    if (h < 0) ok = 0;
                    low = low * 16 + (wssp_u32)(h < 0 ? 0 : h);
                }
                if (ok && low >= 0xDC00 && low < 0xE000) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                    i += 6;
                }
            }
            /* UTF-8 never takes more bytes than the escape it came from (6 or 12). */
            if (cp < 0x80) {
                buf[n++] = (char)cp;
            } else if (cp < 0x800) {
                buf[n++] = (char)(0xC0 | (cp >> 6));
                buf[n++] = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                buf[n++] = (char)(0xE0 | (cp >> 12));
                buf[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                buf[n++] = (char)(0x80 | (cp & 0x3F));
            } else {
                buf[n++] = (char)(0xF0 | (cp >> 18));
                buf[n++] = (char)(0x80 | ((cp >> 12) & 0x3F));
                buf[n++] = (char)(0x80 | ((cp >> 6) & 0x3F));
                buf[n++] = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default:
            return 0;
        }
    }
    *out = wssp_str_make(buf, n);
    return 1;
}

/* ------------------------------------------------------------------------------------------ */
/* 9. Optional logging (adds the `wssp.log` import; define WSSP_WITH_LOG to enable)            */
/* ------------------------------------------------------------------------------------------ */

#ifdef WSSP_WITH_LOG
__attribute__((import_module("wssp"), import_name("log")))
void wssp__host_log(wssp_i32 level, wssp_u32 ptr, wssp_u32 len);

#define WSSP_LOG_DEBUG 0
#define WSSP_LOG_INFO 1
#define WSSP_LOG_WARNING 2
#define WSSP_LOG_ERROR 3

static inline void wssp_log(int level, const char *message) {
    wssp__host_log(level, (wssp_u32)(wssp_uptr)message, wssp_cstrlen(message));
}
#endif

/* ------------------------------------------------------------------------------------------ */
/* 10. Stages of minor 3: prefilter, postfilter, reserve, unreserve, permit, prebind, postbind  */
/* ------------------------------------------------------------------------------------------ */

/*
 * Each stage is an export `int wssp_<stage>(wssp_ctx *ctx)` returning 0 when the call worked.
 * Before every call the host zeroes `answer`, `answer_value`, `message` and `output`, so a
 * stage that sets nothing answers 0 (pass, default, ok, allow) with no message and no command.
 *
 *     WSSP_EXPORT("wssp_permit") int wssp_permit(wssp_ctx *ctx) {
 *         wssp_set_answer(ctx, WSSP_PERMIT_WAIT);
 *         wssp_set_answer_value(ctx, 30000);                    (wait at most 30 s)
 *         wssp_set_message_cstr(ctx, "waiting for ");
 *         wssp_message_add(ctx, wssp_pod_name(ctx));
 *         wssp_waiting it = wssp_waiting_of(ctx);
 *         wssp_waiting_pod w;
 *         while (wssp_waiting_next(&it, &w)) wssp_output_allow(ctx, w.uid);
 *         return 0;
 *     }
 *
 * Message and output text go into two buffers of the SDK, allocated with wssp_malloc and
 * reused from call to call (they grow, doubling, only when a call needs more than any call
 * before): building them costs no allocation in the steady state. Every helper publishes the
 * buffer's pointer and length into the context at once, and the first one used in a call
 * starts from empty (the host zeroed the fields). Text from the SDK's helpers may come from
 * anywhere (literals, the pod record, the waiting lines, the stack): it is copied.
 */

/* Answer codes (ABI.md "Answers"); unreserve's and postbind's answers are ignored. */
#define WSSP_PREFILTER_PASS 0u
#define WSSP_PREFILTER_REJECT 1u      /* unschedulable, with the message */
#define WSSP_PREFILTER_RESTRICT 2u    /* only the rows marked with wssp_set_prefilter_row */
#define WSSP_POSTFILTER_DEFAULT 0u    /* the configured preemption and bursting */
#define WSSP_POSTFILTER_PREEMPT 1u    /* preemption only */
#define WSSP_POSTFILTER_BURST 2u      /* bursting only */
#define WSSP_POSTFILTER_WAIT 3u       /* neither: the pod stays Pending */
#define WSSP_POSTFILTER_NOMINATE 4u   /* preempt on the real node at row answer_value only */
#define WSSP_RESERVE_OK 0u
#define WSSP_RESERVE_REJECT 1u
#define WSSP_PERMIT_ALLOW 0u
#define WSSP_PERMIT_DENY 1u
#define WSSP_PERMIT_WAIT 2u           /* answer_value: the longest wait in milliseconds, >= 1 */
#define WSSP_PREBIND_OK 0u
#define WSSP_PREBIND_REJECT 1u

/* Why wssp_unreserve is called (the context's `cause`). */
#define WSSP_CAUSE_NONE 0u            /* every other stage */
#define WSSP_CAUSE_REFUSED 1u         /* a stage after reserve refused the pod (reserve, prebind) */
#define WSSP_CAUSE_DENIED 2u          /* permit denied it: an answer or a `reject` command */
#define WSSP_CAUSE_TIMEOUT 3u         /* its permit wait timed out */
#define WSSP_CAUSE_BIND_FAILED 4u     /* the binding failed */
#define WSSP_CAUSE_GONE 5u            /* the pod was deleted, or the scheduler stopped leading */

/* `node_row` outside reserve .. postbind. */
#define WSSP_NO_ROW 0xFFFFFFFFu

/* The row of the node the pod is placed on (reserve, unreserve, permit, prebind, postbind),
 * WSSP_NO_ROW in the other stages. */
static inline wssp_u32 wssp_node_row(const wssp_ctx *ctx) { return ctx->node_row; }

/* During wssp_unreserve: WSSP_CAUSE_*; WSSP_CAUSE_NONE in the other stages. */
static inline wssp_u32 wssp_cause(const wssp_ctx *ctx) { return ctx->cause; }

/* A short English text for a cause, for messages ("permit wait timed out"). */
static inline const char *wssp_cause_text(wssp_u32 cause) {
    switch (cause) {
    case WSSP_CAUSE_NONE: return "no cause";
    case WSSP_CAUSE_REFUSED: return "refused after reserve";
    case WSSP_CAUSE_DENIED: return "denied at permit";
    case WSSP_CAUSE_TIMEOUT: return "permit wait timed out";
    case WSSP_CAUSE_BIND_FAILED: return "binding failed";
    case WSSP_CAUSE_GONE: return "pod deleted or scheduler stopped leading";
    default: return "unknown cause";
    }
}

/* Wall clock at the call, Unix milliseconds (stages 1-9; 0 during init and on older hosts). */
static inline wssp_i64 wssp_now_ms(const wssp_ctx *ctx) { return wssp_load_i64(ctx->now_ms); }

static inline void wssp_set_answer(wssp_ctx *ctx, wssp_u32 code) { ctx->answer = code; }
static inline void wssp_set_answer_value(wssp_ctx *ctx, wssp_u32 value) {
    ctx->answer_value = value;
}

/* During wssp_prefilter with WSSP_PREFILTER_RESTRICT: keep row i a candidate (the host zeroes
 * every row before the call, so unmarked rows are taken away). */
static inline void wssp_set_prefilter_row(wssp_ctx *ctx, wssp_u32 row, int keep) {
    WSSP_PTR(wssp_u8, ctx->prefilter_rows)[row] = keep ? 1 : 0;
}

/* -- a reusable byte buffer -- */

typedef struct {
    char *ptr;
    wssp_u32 len;
    wssp_u32 cap;
} wssp_buf;

/* Room for `extra` more bytes; 0 when out of memory (the buffer is unchanged). A buffer that
 * grows leaves its old block behind (the allocator never frees): it at most doubles the
 * memory a buffer holds, once. */
static inline int wssp_buf_reserve(wssp_buf *b, wssp_u32 extra) {
    wssp_u64 need = (wssp_u64)b->len + extra;
    if (need <= b->cap) return 1;
    if (need > 0x40000000u) return 0;
    wssp_u32 cap = b->cap ? b->cap : 256;
    while (cap < need) cap *= 2;
    char *bigger = (char *)wssp_malloc(cap);
    if (!bigger) return 0;
    if (b->len) wssp_memcpy(bigger, b->ptr, b->len);
    b->ptr = bigger;
    b->cap = cap;
    return 1;
}

static inline void wssp_buf_clear(wssp_buf *b) { b->len = 0; }

static inline wssp_str wssp_buf_str(const wssp_buf *b) { return wssp_str_make(b->ptr, b->len); }

/* Append text; 0 when out of memory (nothing appended). */
static inline int wssp_buf_add(wssp_buf *b, wssp_str s) {
    if (!wssp_buf_reserve(b, s.len)) return 0;
    if (s.len) wssp_memcpy(b->ptr + b->len, s.ptr, s.len);
    b->len += s.len;
    return 1;
}

static inline int wssp_buf_add_cstr(wssp_buf *b, const char *s) {
    return wssp_buf_add(b, wssp_cstr(s));
}

/* Append an integer in decimal. */
static inline int wssp_buf_add_i64(wssp_buf *b, wssp_i64 value) {
    char digits[20];
    wssp_u32 n = 0;
    wssp_u64 v = value < 0 ? 0 - (wssp_u64)value : (wssp_u64)value;
    do {
        digits[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    if (!wssp_buf_reserve(b, n + 1)) return 0;
    if (value < 0) b->ptr[b->len++] = '-';
    while (n) b->ptr[b->len++] = digits[--n];
    return 1;
}

/* -- the message: why the stage answered as it did (at most 1024 bytes are read) -- */

static wssp_buf wssp__message;

/* The buffer, emptied when the context no longer shows it (a new call: the host zeroed it). */
static inline wssp_buf *wssp__message_of(wssp_ctx *ctx) {
    if (ctx->message != (wssp_u32)(wssp_uptr)wssp__message.ptr ||
        ctx->message_len != wssp__message.len)
        wssp__message.len = 0;
    return &wssp__message;
}

static inline int wssp__message_publish(wssp_ctx *ctx, int ok) {
    ctx->message = (wssp_u32)(wssp_uptr)wssp__message.ptr;
    ctx->message_len = wssp__message.len;
    return ok;
}

/* Append to this call's message; 0 when out of memory. */
static inline int wssp_message_add(wssp_ctx *ctx, wssp_str text) {
    return wssp__message_publish(ctx, wssp_buf_add(wssp__message_of(ctx), text));
}

static inline int wssp_message_add_cstr(wssp_ctx *ctx, const char *text) {
    return wssp_message_add(ctx, wssp_cstr(text));
}

static inline int wssp_message_add_i64(wssp_ctx *ctx, wssp_i64 value) {
    return wssp__message_publish(ctx, wssp_buf_add_i64(wssp__message_of(ctx), value));
}

/* Replace this call's message. */
static inline int wssp_set_message(wssp_ctx *ctx, wssp_str text) {
    wssp_buf_clear(wssp__message_of(ctx));
    return wssp_message_add(ctx, text);
}

static inline int wssp_set_message_cstr(wssp_ctx *ctx, const char *text) {
    return wssp_set_message(ctx, wssp_cstr(text));
}

/* -- the output: command lines (at most 1000 lines and 64 KiB are read) -- */

static wssp_buf wssp__output;

static inline wssp_buf *wssp__output_of(wssp_ctx *ctx) {
    if (ctx->output != (wssp_u32)(wssp_uptr)wssp__output.ptr ||
        ctx->output_len != wssp__output.len)
        wssp__output.len = 0;
    return &wssp__output;
}

static inline int wssp__has_newline(wssp_str s) {
    for (wssp_u32 i = 0; i < s.len; i++) if (s.ptr[i] == '\n') return 1;
    return 0;
}

/* One line "<verb> <a>" or, with b.ptr set, "<verb> <a>=<b>"; all or nothing. 0 when out of
 * memory or when a part holds a '\n' (it would make two commands of one). */
static inline int wssp__output_line(wssp_ctx *ctx, const char *verb, wssp_str a, wssp_str b) {
    wssp_buf *out = wssp__output_of(ctx);
    wssp_str v = wssp_cstr(verb);
    int pair = b.ptr != 0;
    if (wssp__has_newline(a) || wssp__has_newline(b)) return 0;
    if (!wssp_buf_reserve(out, 2 + v.len + a.len + (pair ? 1 + b.len : 0))) return 0;
    if (out->len) wssp_buf_add(out, wssp_str_make("\n", 1));
    wssp_buf_add(out, v);
    wssp_buf_add(out, wssp_str_make(" ", 1));
    wssp_buf_add(out, a);
    if (pair) {
        wssp_buf_add(out, wssp_str_make("=", 1));
        wssp_buf_add(out, b);
    }
    ctx->output = (wssp_u32)(wssp_uptr)out->ptr;
    ctx->output_len = out->len;
    return 1;
}

/* `allow <uid>`: the pod waiting at this fragment's permit goes on to bind (prefilter,
 * postfilter, reserve, unreserve, permit). */
static inline int wssp_output_allow(wssp_ctx *ctx, wssp_str uid) {
    return wssp__output_line(ctx, "allow", uid, wssp_str_make(0, 0));
}

/* `reject <uid>`: the waiting pod is refused (its unreserve runs with WSSP_CAUSE_DENIED, and
 * this call's message tells it why). Same stages as allow. */
static inline int wssp_output_reject(wssp_ctx *ctx, wssp_str uid) {
    return wssp__output_line(ctx, "reject", uid, wssp_str_make(0, 0));
}

/* `label <key>=<value>` (prebind only; the key must be in the resource's allowlist). */
static inline int wssp_output_label(wssp_ctx *ctx, wssp_str key, wssp_str value) {
    return wssp__output_line(ctx, "label", key, value.ptr ? value : wssp_str_make("", 0));
}

/* `annotation <key>=<value>` (prebind only). */
static inline int wssp_output_annotation(wssp_ctx *ctx, wssp_str key, wssp_str value) {
    return wssp__output_line(ctx, "annotation", key, value.ptr ? value : wssp_str_make("", 0));
}

/* Drop this call's commands. */
static inline void wssp_output_clear(wssp_ctx *ctx) {
    wssp__output.len = 0;
    ctx->output = (wssp_u32)(wssp_uptr)wssp__output.ptr;
    ctx->output_len = 0;
}

/* -- the pods waiting at this fragment's permit -- */

/*
 * One line of `waiting`: `<uid> <namespace>/<name> <node> <labels>`, labels as `k=v,k=v`
 * (empty when the pod has none). The parts point into the host's text (valid during the call).
 *
 *     wssp_waiting it = wssp_waiting_of(ctx);
 *     wssp_waiting_pod w;
 *     wssp_str group;
 *     while (wssp_waiting_next(&it, &w))
 *         if (wssp_waiting_label(&w, "pod-group.wssp.io/name", &group)) ...
 */
typedef struct {
    wssp_str uid;
    wssp_str ns;      /* namespace */
    wssp_str name;
    wssp_str node;
    wssp_str labels;  /* k=v,k=v */
} wssp_waiting_pod;

typedef struct {
    wssp_lines lines;
} wssp_waiting;

static inline wssp_str wssp_waiting_text(const wssp_ctx *ctx) {
    return wssp_str_make(WSSP_PTR(const char, ctx->waiting), ctx->waiting_len);
}

static inline wssp_waiting wssp_waiting_of(const wssp_ctx *ctx) {
    wssp_waiting it = {wssp_lines_of(wssp_waiting_text(ctx))};
    return it;
}

/* Split one line; 0 when it is not of that shape. */
static inline int wssp_waiting_parse(wssp_str line, wssp_waiting_pod *w) {
    wssp_str part[4];
    wssp_u32 start = 0, k = 0;
    for (wssp_u32 i = 0; i < line.len && k < 3; i++) {
        if (line.ptr[i] != ' ') continue;
        part[k++] = wssp_str_make(line.ptr + start, i - start);
        start = i + 1;
    }
    if (k < 3) return 0;
    part[3] = wssp_str_make(line.ptr + start, line.len - start);
    wssp_u32 slash = 0;
    while (slash < part[1].len && part[1].ptr[slash] != '/') slash++;
    if (slash == part[1].len) return 0;
    w->uid = part[0];
    w->ns = wssp_str_make(part[1].ptr, slash);
    w->name = wssp_str_make(part[1].ptr + slash + 1, part[1].len - slash - 1);
    w->node = part[2];
    w->labels = part[3];
    return 1;
}

/* The next waiting pod (lines not of the documented shape are skipped); 0 at the end. */
static inline int wssp_waiting_next(wssp_waiting *it, wssp_waiting_pod *w) {
    wssp_str line;
    while (wssp_lines_next(&it->lines, &line))
        if (wssp_waiting_parse(line, w)) return 1;
    return 0;
}

/* The value of the waiting pod's label `key`; 0 when it has no such label. */
static inline int wssp_waiting_label_str(const wssp_waiting_pod *w, wssp_str key,
                                         wssp_str *value) {
    const char *p = w->labels.ptr, *end = w->labels.ptr + w->labels.len;
    while (p < end) {
        const char *item = p;
        while (p < end && *p != ',') p++;
        wssp_u32 n = (wssp_u32)(p - item);
        if (n > key.len && item[key.len] == '=' && wssp_memeq(item, key.ptr, key.len)) {
            *value = wssp_str_make(item + key.len + 1, n - key.len - 1);
            return 1;
        }
        p++; /* past the ',' */
    }
    return 0;
}

static inline int wssp_waiting_label(const wssp_waiting_pod *w, const char *key,
                                     wssp_str *value) {
    return wssp_waiting_label_str(w, wssp_cstr(key), value);
}

#endif /* WSSP_H */
