/* origin_recovery.c - the original-value recovery table (XLA: SetPartitionedHlo recording
 * recovery computations in HloModule::OriginalValueRecoveryTable). When partitioning changes
 * the shape of a value that carries `origin={...}`, the output module keeps, per original
 * array, a small module that rebuilds the full value from the shard: parameter 0 (the shard,
 * with the value's sharding), partition-id, then the reshard to replicated (all-gathers, slice
 * of the padding).
 * Owns: reading and writing the verbatim `origin=` attribute text, placeholder names, building
 * the recovery modules. Does not own: the collectives (reshard.c and collectives.c build them,
 * here into a module of their own through a second SpmdCtx) or the table's storage (src/ir).
 * Invariants: the run's own context is never touched by a recovery build (names, channel ids,
 * caches, partition-id memos and trace stay as if no table existed); entries are added in IR
 * order, the first for an original array wins (the printer sorts them). */
#include "spmd/origin_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace.h"

#define ORIGIN_MAX_DEPTH 64u /* tuple nesting read from `origin=` text */
static const char k_origin_key[] = "origin";
static const char k_placeholder[] = "__ovp";

/* ---- original values: the arrays of a shape's leaves ---- */

typedef struct Leaf {
    const IrShape *shape;
    const int64_t *index; /* shape index of the leaf */
    uint32_t n_index;
    bool has; /* `array` is set */
    IrOriginArray array;
} Leaf;

typedef struct Origin {
    const IrShape *shape;
    Leaf *leaves; /* non-tuple subshapes in pre-order (ir_shape_leaf numbering) */
    uint32_t n;
} Origin;

static bool
add_leaves(SlArena *a, const IrShape *s, int64_t *path, uint32_t depth, Origin *o)
{
    if (!ir_shape_is_tuple(s)) {
        Leaf *l = &o->leaves[o->n++];
        l->shape = s;
        l->n_index = depth;
        l->index = depth ? SL_DUP_ARRAY(a, int64_t, path, depth) : NULL;
        return depth == 0 || l->index;
    }
    if (depth == ORIGIN_MAX_DEPTH)
        return false;
    for (uint32_t k = 0; k < s->n_elems; k++) {
        path[depth] = k;
        if (!add_leaves(a, &s->elems[k], path, depth + 1, o))
            return false;
    }
    return true;
}

/* An empty original value over `s`; false on arena failure or a too deeply nested shape. */
static bool
origin_init(SlArena *a, const IrShape *s, Origin *o)
{
    int64_t path[ORIGIN_MAX_DEPTH];
    o->shape = s;
    o->n = 0;
    o->leaves = SL_NEW_ARRAY(a, Leaf, ir_shape_leaf_count(s));
    return o->leaves && add_leaves(a, s, path, 0, o);
}

static Leaf *
leaf_at(Origin *o, const int64_t *index, uint32_t n)
{
    for (uint32_t k = 0; k < o->n; k++)
        if (o->leaves[k].n_index == n &&
            (n == 0 || !memcmp(o->leaves[k].index, index, n * sizeof(int64_t))))
            return &o->leaves[k];
    return NULL;
}

static void
skip_space(SlStr t, size_t *p)
{
    while (*p < t.len && (t.ptr[*p] == ' ' || t.ptr[*p] == '\t' || t.ptr[*p] == '\n'))
        (*p)++;
}

/* original_array := '{' ('"' NAME '"' ('{' (INT (',' INT)*)? '}')?)? '}'    at t[*p] == '{' */
static bool
read_array(SlArena *a, SlStr t, size_t *p, IrOriginArray *out)
{
    memset(out, 0, sizeof(*out));
    (*p)++;
    skip_space(t, p);
    if (*p < t.len && t.ptr[*p] == '"') {
        size_t start = ++(*p);
        while (*p < t.len && t.ptr[*p] != '"')
            *p += t.ptr[*p] == '\\' ? 2 : 1;
        if (*p >= t.len)
            return false;
        out->name = (SlStr){t.ptr + start, *p - start};
        (*p)++;
        skip_space(t, p);
        if (*p < t.len && t.ptr[*p] == '{') {
            int64_t idx[ORIGIN_MAX_DEPTH];
            uint32_t n = 0;
            (*p)++;
            for (;;) {
                skip_space(t, p);
                if (*p < t.len && t.ptr[*p] == '}')
                    break;
                if (n == ORIGIN_MAX_DEPTH || *p >= t.len || t.ptr[*p] < '0' || t.ptr[*p] > '9')
                    return false;
                int64_t v = 0;
                while (*p < t.len && t.ptr[*p] >= '0' && t.ptr[*p] <= '9' && v < INT32_MAX)
                    v = v * 10 + (t.ptr[(*p)++] - '0');
                idx[n++] = v;
                skip_space(t, p);
                if (*p < t.len && t.ptr[*p] == ',')
                    (*p)++;
            }
            (*p)++;
            out->n_index = n;
            if (n && !(out->index = SL_DUP_ARRAY(a, int64_t, idx, n)))
                return false;
        }
        skip_space(t, p);
    }
    if (*p >= t.len || t.ptr[*p] != '}')
        return false;
    (*p)++;
    return true;
}

/* Reads the verbatim `origin=` value (hlo-text.md §11, XLA's original_value grammar: a tuple
 * tree of '(' ',' ')' around original arrays) into `o`, an empty value over the shape. False
 * when the text is malformed or a synthetic-call value (nothing to recover). Arrays at shape
 * indices that are not leaves of the shape are dropped, as XLA drops inner-node arrays. */
static bool
origin_read(SlArena *a, SlStr t, Origin *o)
{
    int64_t path[ORIGIN_MAX_DEPTH];
    uint32_t depth = 0;
    size_t p = 0;
    skip_space(t, &p);
    if (p >= t.len || t.ptr[p] != '{')
        return false;
    for (p++;;) {
        skip_space(t, &p);
        if (p >= t.len)
            return false;
        char c = t.ptr[p];
        if (c == '}')
            return depth == 0;
        if (c == '(' && depth < ORIGIN_MAX_DEPTH) {
            path[depth++] = 0;
            p++;
        } else if (c == ')' && depth > 0) {
            depth--;
            p++;
        } else if (c == ',' && depth > 0) {
            path[depth - 1]++;
            p++;
        } else if (c == '{') {
            IrOriginArray arr;
            if (!read_array(a, t, &p, &arr))
                return false;
            Leaf *l = arr.name.len ? leaf_at(o, path, depth) : NULL;
            if (l) {
                l->has = true;
                l->array = arr;
            }
        } else {
            return false; /* '[synthetic_call]' or garbage */
        }
    }
}

/* node := '(' (node (', ' node)*)? ')' | '{' array? '}'    (XLA's OriginalValue::ToString) */
static void
put_node(SlBuf *b, const IrShape *s, const Origin *o, uint32_t *leaf)
{
    if (ir_shape_is_tuple(s)) {
        sl_buf_putc(b, '(');
        for (uint32_t k = 0; k < s->n_elems; k++) {
            if (k)
                sl_buf_puts(b, ", ");
            put_node(b, &s->elems[k], o, leaf);
        }
        sl_buf_putc(b, ')');
        return;
    }
    const Leaf *l = &o->leaves[(*leaf)++];
    if (l->has)
        ir_origin_array_print(&l->array, b);
    else
        sl_buf_puts(b, "{}");
}

/* ---- the origin attribute of output instructions ---- */

static IrAttr *
origin_attr(const IrInstr *i)
{
    for (uint32_t k = 0; k < i->n_attrs; k++)
        if (i->attrs[k].key == IR_ATTR_OTHER &&
            sl_str_eq_cstr(sl_sym_str(i->attrs[k].u.other.key), k_origin_key))
            return &i->attrs[k];
    return NULL;
}

/* XLA prints origin= just before metadata= and backend_config=. */
static bool
prints_after_origin(const IrAttr *a)
{
    return a->key == IR_ATTR_METADATA || a->key == IR_ATTR_BACKEND_CONFIG;
}

static void
remove_origin(IrInstr *i)
{
    IrAttr *a = origin_attr(i);
    if (!a)
        return;
    uint32_t at = (uint32_t)(a - i->attrs);
    memmove(&i->attrs[at], &i->attrs[at + 1], (i->n_attrs - at - 1) * sizeof(IrAttr));
    i->n_attrs--;
}

/* Sets `origin=` on `i` to the text of `o`, placed where XLA prints it: before metadata and
 * backend_config. False on arena failure. */
static bool
set_origin(SpmdCtx *cx, IrInstr *i, const Origin *o)
{
    SlBuf b;
    sl_buf_init(&b);
    uint32_t leaf = 0;
    sl_buf_putc(&b, '{');
    put_node(&b, o->shape, o, &leaf);
    sl_buf_putc(&b, '}');
    char *text = b.failed ? NULL : sl_arena_strndup(cx->arena, b.data, b.len);
    SlStr value = {text, b.len};
    sl_buf_fini(&b);
    if (!text)
        return false;
    IrAttr *a = origin_attr(i);
    if (a) {
        a->u.other.text = value;
        return true;
    }
    SlSym key = sl_intern_cstr(cx->out->names, k_origin_key);
    if (!key || !(a = ir_instr_add_attr(cx->out, i, IR_ATTR_OTHER)))
        return false;
    a->u.other.key = key;
    a->u.other.text = value;
    ir_instr_place_attr(i, a, prints_after_origin);
    return true;
}

/* "NAME__ovp0" for NAME, "NAME__ovp(N+1)" for "NAME__ovpN" (XLA's placeholder names). */
static bool
placeholder(SlArena *a, const IrOriginArray *old, IrOriginArray *out)
{
    SlStr base = old->name;
    uint64_t next = 0;
    size_t pl = sizeof(k_placeholder) - 1;
    for (size_t k = base.len; k-- > 0;) {
        if (k + pl > base.len || memcmp(base.ptr + k, k_placeholder, pl))
            continue;
        size_t d = k + pl;
        uint64_t v = 0;
        bool digits = d < base.len && base.len - d < 19;
        for (size_t j = d; j < base.len && digits; j++) {
            digits = base.ptr[j] >= '0' && base.ptr[j] <= '9';
            v = v * 10 + (uint64_t)(base.ptr[j] - '0');
        }
        if (digits) {
            base.len = k;
            next = v + 1;
        }
        break;
    }
    char num[24];
    int n = snprintf(num, sizeof(num), "%llu", (unsigned long long)next);
    size_t len = base.len + pl + (size_t)n;
    char *p = sl_arena_alloc(a, len + 1, 1);
    if (!p)
        return false;
    memcpy(p, base.ptr, base.len);
    memcpy(p + base.len, k_placeholder, pl);
    memcpy(p + base.len + pl, num, (size_t)n);
    *out = *old;
    out->name = (SlStr){p, len};
    return true;
}

/* A copy of an array whose text and index live in `a`. */
static bool
own_array(SlArena *a, const IrOriginArray *in, IrOriginArray *out)
{
    *out = *in;
    out->name.ptr = sl_arena_strndup(a, in->name.ptr, in->name.len);
    out->index = in->n_index ? SL_DUP_ARRAY(a, int64_t, in->index, in->n_index) : NULL;
    return out->name.ptr && (!in->n_index || out->index);
}

/* ---- recovery modules ---- */

/* A copy of the state chain with memos of its own (partition ids of the recovery module). */
static SpmdState *
copy_state(SlArena *a, const SpmdState *st)
{
    SpmdState *s = SL_NEW(a, SpmdState);
    SpmdStateMemo *m = SL_NEW(a, SpmdStateMemo);
    if (!s || !m)
        return NULL;
    *s = *st;
    s->memo = m;
    if (st->outer && !(s->outer = copy_state(a, st->outer)))
        return NULL;
    return s;
}

/* A context that emits into `m` only: the run's options, partitions and arena, everything else
 * (names, channel ids, caches, reducers, broadcast dims) fresh, no trace. */
static bool
ctx_open(SpmdCtx *rc, const SpmdCtx *cx, IrModule *m, const SpmdState *state)
{
    memset(rc, 0, sizeof(*rc));
    rc->in = cx->in;
    rc->out = m;
    rc->arena = cx->arena;
    sl_arena_init(&rc->scratch);
    rc->opts = cx->opts;
    rc->trace = trace_null_sink();
    rc->num_partitions = cx->num_partitions;
    rc->next_channel_id = 1; /* a module of its own: XLA numbers its channels from 1 */
    rc->allow_full_replication = true;
    rc->root_state = cx->root_state;
    rc->root_state.memo = &rc->root_memo;
    rc->state = state->n_groups ? copy_state(cx->arena, state) : &rc->root_state;
    sl_map_init(&rc->comp_map);
    sl_map_init(&rc->reshard_cache);
    sl_map_init(&rc->kept_shardings);
    sl_arena_init(&rc->kept_arena);
    sl_map_init(&rc->names.index);
    return rc->state != NULL;
}

static void
ctx_close(SpmdCtx *rc)
{
    sl_arena_fini(&rc->scratch);
    free(rc->bcast_dims);
    free((void *)rc->out_shardings);
    sl_map_fini(&rc->comp_map);
    sl_map_fini(&rc->reshard_cache);
    sl_map_fini(&rc->kept_shardings);
    sl_arena_fini(&rc->kept_arena);
    spmd_names_fini(rc);
}

/* Shape text with XLA's default layout where the shape has none (entry_computation_layout). */
static void
put_layout_shape(SlBuf *b, const IrShape *s)
{
    ir_shape_print(s, true, b);
    if (s->layout.len || !ir_shape_is_array(s) || s->rank == 0)
        return;
    sl_buf_putc(b, '{');
    for (uint32_t d = s->rank; d-- > 0;) {
        sl_buf_put_i64(b, d);
        if (d)
            sl_buf_putc(b, ',');
    }
    sl_buf_putc(b, '}');
}

static SlStatus
set_entry_layout(IrModule *m)
{
    const IrInstr *p = ir_computation_param(m->entry, 0);
    SlBuf b;
    sl_buf_init(&b);
    sl_buf_puts(&b, "{(");
    put_layout_shape(&b, &p->shape);
    sl_buf_puts(&b, ")->");
    put_layout_shape(&b, &m->entry->root->shape);
    sl_buf_putc(&b, '}');
    char *text = b.failed ? NULL : sl_arena_strndup(m->arena, b.data, b.len);
    SlStr v = {text, b.len};
    sl_buf_fini(&b);
    return text ? ir_module_set_header(m, "entry_computation_layout", v) : SL_ERR_NOMEM;
}

/* The sharding in `a` (the value's may live in the run's kept-sharding arena, which the
 * output module must never point into). */
static const ShdSharding *
own_sharding(SlArena *a, const ShdSharding *s, SlError *err)
{
    SlBuf b;
    sl_buf_init(&b);
    shd_print(s, &b);
    const ShdSharding *r = NULL;
    if (!b.failed)
        shd_parse(a, sl_buf_str(&b), (SlSrcLoc){NULL, 0, 0}, &r, err);
    sl_buf_fini(&b);
    return r;
}

/* Builds the body of the recovery module in rc->out: parameter(0) of the shard's shape in
 * `s`, the partition id, the reshard to replicated (XLA: PartitionedHlo::Replicate). */
static SlStatus
build_body(SpmdCtx *rc, const IrShape *full, const IrShape *shard, const ShdSharding *s,
           SlError *err)
{
    IrModule *m = rc->out;
    IrComputation *c = ir_computation_new(m, sl_intern_cstr(m->names, "recovery_computation"));
    const ShdSharding *ps = own_sharding(rc->arena, s, err);
    IrShape local = ir_shape_clone(rc->arena, shard);
    IrInstr *p = c ? ir_instr_new(m, IR_OP_PARAMETER, &local, NULL, 0) : NULL;
    if (!ps || !p)
        return err->status != SL_OK ? err->status : spmd_nomem(rc, err);
    rc->comp = c;
    p->parameter_number = 0;
    if (!spmd_emit(rc, p, "param") || !spmd_set_sharding_attr(rc, p, ps) ||
        !spmd_partition_id(rc, rc->state))
        return spmd_nomem(rc, err);
    SpmdValue v = spmd_value(rc, p, full, s), r;
    v.state = rc->state;
    SlStatus st = spmd_replicate(rc, &v, &r, err);
    if (st != SL_OK)
        return st;
    c->root = r.hlo;
    c->is_entry = true;
    m->entry = c;
    if (ir_module_add_computation(m, c) != SL_OK || sl_arena_failed(rc->arena) ||
        sl_arena_failed(&rc->scratch) || !spmd_names_sync(rc))
        return spmd_nomem(rc, err);
    return set_entry_layout(m) == SL_OK ? SL_OK : spmd_nomem(rc, err);
}

static SlStatus
build_module(SpmdCtx *cx, const SpmdValue *v, const IrShape *full, const IrShape *shard,
             const ShdSharding *s, IrModule **out, SlError *err)
{
    *out = NULL;
    SlSym name = sl_intern_cstr(cx->out->names, "recovery_module");
    IrModule *m = name ? ir_module_new(cx->arena, cx->out->names, name) : NULL;
    if (!m)
        return spmd_nomem(cx, err);
    SpmdCtx rc;
    SlStatus st =
        ctx_open(&rc, cx, m, v->state) ? build_body(&rc, full, shard, s, err) : spmd_nomem(cx, err);
    ctx_close(&rc);
    if (st != SL_OK) {
        ir_module_fini(m);
        return st;
    }
    *out = m;
    return SL_OK;
}

/* ---- recording ---- */

/* Instructions emitted for `src` that still carry its origin text although their shape is not
 * its shape: XLA's clones copy an original value only between compatible shapes. */
static void
drop_copied_origins(SpmdCtx *cx, const IrInstr *src, SlStr text)
{
    IrComputation *c = cx->comp;
    for (uint32_t k = c ? c->n_instrs : 0; k-- > 0 && c->instrs[k]->derived_from == src;) {
        IrInstr *i = c->instrs[k];
        const IrAttr *a = origin_attr(i);
        if (a && a->u.other.text.ptr == text.ptr && !ir_shape_equal(&i->shape, &src->shape, false))
            remove_origin(i);
    }
}

/* One original array (`old`, a leaf of the source value) and the same leaf of the value's
 * instruction (`now`; v->sharding is the leaf's): the table entry, and the array `now` holds. */
static SlStatus
record_leaf(SpmdCtx *cx, const SpmdValue *v, const Leaf *old, Leaf *now, bool *changed,
            SlError *err)
{
    if (ir_module_find_recovery(cx->out, &old->array))
        return SL_OK; /* recorded on another path already */
    IrRecovery e = {0};
    if (ir_shape_equal(old->shape, now->shape, false)) {
        if (!now->has) { /* nothing to recover: the array moves over as it is */
            if (!own_array(&cx->scratch, &old->array, &now->array))
                return spmd_nomem(cx, err);
            now->has = *changed = true;
            return SL_OK;
        }
    } else {
        SlStatus st = build_module(cx, v, old->shape, now->shape, v->sharding, &e.module, err);
        if (st != SL_OK)
            return st;
    }
    if (!now->has) {
        if (!placeholder(&cx->scratch, &old->array, &now->array))
            return spmd_nomem(cx, err);
        now->has = *changed = true;
    }
    if (!own_array(cx->arena, &old->array, &e.old) || !own_array(cx->arena, &now->array, &e.now))
        return spmd_nomem(cx, err);
    SlStatus st = ir_module_add_recovery(cx->out, &e);
    if (st != SL_OK) {
        ir_module_fini(e.module);
        return spmd_nomem(cx, err);
    }
    return SL_OK;
}

SlStatus
spmd_record_origin(SpmdCtx *cx, const IrInstr *src, SlError *err)
{
    const IrAttr *oa = origin_attr(src);
    const SpmdValue *v = oa ? spmd_get_value(cx, src) : NULL;
    if (!v)
        return SL_OK;
    IrInstr *now_hlo = v->hlo;
    drop_copied_origins(cx, src, oa->u.other.text);
    if (shd_is_manual(v->sharding)) { /* XLA's tools do not follow manual values */
        remove_origin(now_hlo);
        return SL_OK;
    }
    if (shd_is_replicated(v->sharding) || v->sharding->kind == SHD_UNKNOWN)
        return SL_OK;
    Origin old, now;
    SlArena *a = &cx->scratch;
    if (!origin_init(a, &src->shape, &old) || !origin_init(a, &now_hlo->shape, &now))
        return sl_arena_failed(a) ? spmd_nomem(cx, err) : SL_OK;
    if (!origin_read(a, oa->u.other.text, &old) || old.n != now.n)
        return SL_OK; /* nothing to recover, or shapes of different structure */
    const IrAttr *na = origin_attr(now_hlo);
    if (na && !origin_read(a, na->u.other.text, &now)) {
        for (uint32_t k = 0; k < now.n; k++)
            now.leaves[k].has = false;
    }
    bool changed = false;
    for (uint32_t k = 0; k < old.n; k++) {
        if (!old.leaves[k].has)
            continue;
        SpmdValue lv = *v;
        lv.sharding = v->sharding->kind == SHD_TUPLE ? shd_leaf(v->sharding, k) : v->sharding;
        if (!lv.sharding)
            return spmd_nomem(cx, err);
        SlStatus st = record_leaf(cx, &lv, &old.leaves[k], &now.leaves[k], &changed, err);
        if (st != SL_OK)
            return st;
    }
    if (changed && !set_origin(cx, now_hlo, &now))
        return spmd_nomem(cx, err);
    return SL_OK;
}
