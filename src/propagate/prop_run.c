/* prop_run.c - the propagation pass as XLA's ShardingPropagation::Run orders it: metadata and
 * CSE-prevention preprocessing, `Sharding` custom calls folded into copies, shard groups, the
 * while/conditional/call consistency of related instructions, the provided (fixed) shardings,
 * the fixed point over aggressiveness 0..3 (shard groups, then a forward sweep in post order,
 * then a backward sweep in reverse), shard_as alignment, removal of the shard barriers, and the
 * parameter/output restrictions. Owns: the pass state (PropCtx), prop_set() and the origin
 * records, options. Does not own: the per-op rules (prop_fwd.c, prop_bwd.c). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "propagate/prop_int.h"

/* ---- options ---- */

void
prop_options_init(PropOptions *o)
{
    memset(o, 0, sizeof(*o));
    o->n_allow_output = 1;
    o->n_allow_params = 1;
}

static SlStatus
parse_bool(const char *v, bool *out)
{
    if (!strcmp(v, "true") || !strcmp(v, "1")) {
        *out = true;
        return SL_OK;
    }
    if (!strcmp(v, "false") || !strcmp(v, "0")) {
        *out = false;
        return SL_OK;
    }
    return SL_ERR_INVALID;
}

static SlStatus
parse_bools(const char *v, bool *out, uint32_t *n)
{
    uint32_t k = 0;
    char buf[16];
    while (*v) {
        const char *e = strchr(v, ',');
        size_t len = e ? (size_t)(e - v) : strlen(v);
        if (len >= sizeof(buf) || k >= PROP_MAX_FLAGS)
            return SL_ERR_INVALID;
        memcpy(buf, v, len);
        buf[len] = 0;
        if (parse_bool(buf, &out[k++]))
            return SL_ERR_INVALID;
        v += len + (e ? 1 : 0);
        if (e && !*v)
            return SL_ERR_INVALID;
    }
    if (!k)
        return SL_ERR_INVALID;
    *n = k;
    return SL_OK;
}

bool
prop_options_has_key(const char *key)
{
    static const char *const keys[] = {"is_spmd",
                                       "propagate_metadata",
                                       "cse_prevention_only",
                                       "allow_spmd_sharding_propagation_to_output",
                                       "allow_spmd_sharding_propagation_to_parameters",
                                       "execution_threads"};
    for (size_t k = 0; k < SL_COUNTOF(keys); k++)
        if (!strcmp(key, keys[k]))
            return true;
    return false;
}

SlStatus
prop_options_set(PropOptions *o, const char *key, const char *value, SlError *err)
{
    SlSrcLoc none = {0};
    SlStatus st = SL_ERR_INVALID;
    if (!strcmp(key, "is_spmd"))
        st = parse_bool(value, &o->is_spmd);
    else if (!strcmp(key, "propagate_metadata"))
        st = parse_bool(value, &o->propagate_metadata);
    else if (!strcmp(key, "cse_prevention_only"))
        st = parse_bool(value, &o->cse_prevention_only);
    else if (!strcmp(key, "allow_spmd_sharding_propagation_to_output"))
        st = parse_bools(value, o->allow_output, &o->n_allow_output);
    else if (!strcmp(key, "allow_spmd_sharding_propagation_to_parameters"))
        st = parse_bools(value, o->allow_params, &o->n_allow_params);
    else if (!strcmp(key, "execution_threads")) {
        size_t n = strlen(value);
        st = n && n < sizeof(o->threads) && value[0] != ',' && value[n - 1] != ','
                 ? SL_OK
                 : SL_ERR_INVALID;
        if (!st)
            memcpy(o->threads, value, n + 1);
    }
    else
        return sl_fail(err, SL_ERR_INVALID, none, "unknown propagation option '%s'", key);
    if (st)
        return sl_fail(err, SL_ERR_INVALID, none, "bad value '%s' for option %s", value, key);
    return SL_OK;
}

bool
prop_options_thread(const PropOptions *o, const IrComputation *c)
{
    return prop_options_thread_named(o, c->execution_thread);
}

bool
prop_options_thread_named(const PropOptions *o, SlStr t)
{
    if (!o->threads[0])
        return true;
    if (t.len >= 2 && t.ptr[0] == '"') {
        t.ptr++;
        t.len -= 2;
    }
    if (!t.len)
        t = sl_str("main");
    for (const char *v = o->threads; *v;) {
        const char *e = strchr(v, ',');
        size_t len = e ? (size_t)(e - v) : strlen(v);
        if (len == t.len && !memcmp(v, t.ptr, len))
            return true;
        v += len + (e ? 1 : 0);
    }
    return false;
}

SlStatus
prop_options_from_module(PropOptions *o, const IrModule *m, SlError *err)
{
    static const char *const keys[] = {"allow_spmd_sharding_propagation_to_output",
                                       "allow_spmd_sharding_propagation_to_parameters"};
    for (int k = 0; k < 2; k++) {
        const IrHeaderAttr *h = ir_module_find_header(m, keys[k]);
        if (!h)
            continue;
        SlStr v = h->value;
        if (v.len >= 2 && v.ptr[0] == '{' && v.ptr[v.len - 1] == '}') {
            v.ptr++;
            v.len -= 2;
        }
        char *text = malloc(v.len + 1);
        if (!text)
            return sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){0}, "out of memory");
        memcpy(text, v.ptr, v.len);
        text[v.len] = 0;
        SlStatus st = k == 0 ? parse_bools(text, o->allow_output, &o->n_allow_output)
                             : parse_bools(text, o->allow_params, &o->n_allow_params);
        free(text);
        if (st)
            return sl_fail(err, SL_ERR_INVALID, (SlSrcLoc){0},
                           "module header: %s needs at most %d values true or false", keys[k],
                           PROP_MAX_FLAGS);
    }
    return SL_OK;
}

static void
print_bools(SlBuf *out, const bool *v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        sl_buf_printf(out, "%s%s", i ? "," : "", v[i] ? "true" : "false");
}

void
prop_options_print(const PropOptions *o, SlBuf *out)
{
    sl_buf_printf(out, "is_spmd=%s\npropagate_metadata=%s\n", o->is_spmd ? "true" : "false",
                  o->propagate_metadata ? "true" : "false");
    sl_buf_puts(out, "allow_spmd_sharding_propagation_to_output=");
    print_bools(out, o->allow_output, o->n_allow_output);
    sl_buf_puts(out, "\nallow_spmd_sharding_propagation_to_parameters=");
    print_bools(out, o->allow_params, o->n_allow_params);
    sl_buf_printf(out, "\ncse_prevention_only=%s\n", o->cse_prevention_only ? "true" : "false");
}

/* ---- small queries ---- */

bool
prop_is_custom_call(const IrInstr *i, const char *target)
{
    if (i->op != IR_OP_CUSTOM_CALL)
        return false;
    const IrAttr *a = ir_instr_find_attr(i, IR_ATTR_CUSTOM_CALL_TARGET);
    if (!a)
        return false;
    SlStr t = a->u.text;
    if (t.len >= 2 && t.ptr[0] == '"') {
        t.ptr++;
        t.len -= 2;
    }
    return sl_str_eq_cstr(t, target);
}

bool
prop_is_entry_root(const IrInstr *i)
{
    return i->parent->is_entry && i->parent->root == i;
}

bool
prop_saturated(const PropCtx *cx, const ShdSharding *s)
{
    return s && s->kind == SHD_TILED && s->n_subgroups == 0 &&
           shd_num_tiles(s) >= cx->max_devices;
}

uint32_t
prop_n_users(const PropCtx *cx, const IrInstr *i)
{
    return cx->user_start[i->id + 1] - cx->user_start[i->id];
}

IrInstr *
prop_user(const PropCtx *cx, const IrInstr *i, uint32_t k)
{
    return cx->users[cx->user_start[i->id] + k];
}

uint32_t
prop_non_root_users(const PropCtx *cx, const IrInstr *i)
{
    uint32_t n = prop_n_users(cx, i), r = n;
    for (uint32_t k = 0; k < n; k++)
        if (prop_user(cx, i, k) == i->parent->root)
            r--;
    return r;
}

/* ---- setting shardings ---- */

static uint64_t
sh_hash(const ShdSharding *s)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)s->kind;
#define MIX(v) (h = (h ^ (uint64_t)(v)) * 1099511628211ull)
    MIX(s->shard_group_kind);
    MIX(s->device);
    for (size_t k = 0; k < s->metadata.len; k++)
        MIX((unsigned char)s->metadata.ptr[k]);
    if (s->kind == SHD_TILED) {
        for (uint32_t k = 0; k < s->n_tile_dims; k++)
            MIX(s->tile_dims[k]);
        for (uint32_t k = 0; k < s->n_subgroups; k++)
            MIX(s->subgroups[k]);
        int64_t total = shd_device_count(s);
        for (int64_t k = 0; k < total; k++)
            MIX(s->devices[k]);
        MIX(s->has_iota);
    }
    if (s->kind == SHD_TUPLE)
        for (uint32_t k = 0; k < s->n_leaves; k++)
            MIX(sh_hash(s->leaves[k]));
#undef MIX
    return h;
}

static bool
same_exactly(const ShdSharding *a, const ShdSharding *b)
{
    if (!shd_equal(a, b) || !sl_str_eq(a->metadata, b->metadata) || a->has_iota != b->has_iota)
        return false;
    if (a->kind == SHD_TUPLE)
        for (uint32_t k = 0; k < a->n_leaves; k++)
            if (!same_exactly(a->leaves[k], b->leaves[k]))
                return false;
    return true;
}

/* Slot of a pointer in the kept-pointer set (cap a power of two). */
static uint32_t
ptr_slot(const ShdSharding *s, uint32_t cap)
{
    uint64_t v = (uint64_t)(uintptr_t)s * 0x9e3779b97f4a7c15ull;
    return (uint32_t)(v >> 32) & (cap - 1);
}

/* The kept copy of `s`: one per distinct sharding (most instructions share a few). Kept
 * shardings are never freed or changed, so their pointers also key the transform memo
 * (prop_shd.c); scratch memory is reused, so a scratch pointer is never in `kept`. */
static const ShdSharding *
keep_sharding(PropCtx *cx, const ShdSharding *s)
{
    if (!s)
        return NULL;
    if (prop_is_kept(cx, s))
        return s; /* no two kept shardings are the same: s is the one the probe would find */
    if (cx->n_interned * 2 >= cx->cap_interned) {
        uint32_t cap = cx->cap_interned ? cx->cap_interned * 2 : 1024;
        const ShdSharding **t = SL_NEW_ARRAY(cx->keep, const ShdSharding *, cap);
        const ShdSharding **kt = SL_NEW_ARRAY(cx->keep, const ShdSharding *, cap);
        if (!t || !kt)
            return shd_clone(cx->keep, s);
        for (uint32_t k = 0; k < cx->cap_interned; k++) {
            const ShdSharding *e = cx->interned[k];
            if (!e)
                continue;
            uint32_t p = (uint32_t)sh_hash(e) & (cap - 1);
            while (t[p])
                p = (p + 1) & (cap - 1);
            t[p] = e;
            p = ptr_slot(e, cap);
            while (kt[p])
                p = (p + 1) & (cap - 1);
            kt[p] = e;
        }
        cx->interned = t;
        cx->kept = kt;
        cx->cap_interned = cap;
    }
    uint32_t p = (uint32_t)sh_hash(s) & (cx->cap_interned - 1);
    while (cx->interned[p]) {
        if (cx->interned[p] == s || same_exactly(cx->interned[p], s))
            return cx->interned[p];
        p = (p + 1) & (cx->cap_interned - 1);
    }
    const ShdSharding *c = cx->a != cx->keep ? shd_clone(cx->keep, s) : s;
    if (c) {
        cx->interned[p] = c;
        cx->n_interned++;
        uint32_t q = ptr_slot(c, cx->cap_interned);
        while (cx->kept[q])
            q = (q + 1) & (cx->cap_interned - 1);
        cx->kept[q] = c;
    }
    return c;
}

bool
prop_is_kept(const PropCtx *cx, const ShdSharding *s)
{
    if (!s || !cx->cap_interned)
        return false;
    for (uint32_t q = ptr_slot(s, cx->cap_interned); cx->kept[q];
         q = (q + 1) & (cx->cap_interned - 1))
        if (cx->kept[q] == s)
            return true;
    return false;
}

bool
prop_is_stable(const PropCtx *cx, const ShdSharding *s)
{
    if (prop_is_kept(cx, s))
        return true;
    if (!s || !cx->cap_stable)
        return false;
    for (uint32_t q = ptr_slot(s, cx->cap_stable); cx->stable[q];
         q = (q + 1) & (cx->cap_stable - 1))
        if (cx->stable[q] == s)
            return true;
    return false;
}

/* Records the shardings the fixed point starts from (cx->sh) as stable. */
static void
collect_stable(PropCtx *cx)
{
    uint32_t cap = 64;
    while (cap < 2 * cx->n_ids + 2)
        cap *= 2;
    cx->stable = SL_NEW_ARRAY(cx->keep, const ShdSharding *, cap);
    if (!cx->stable)
        return;
    cx->cap_stable = cap;
    for (uint32_t id = 0; id < cx->n_ids; id++) {
        const ShdSharding *s = cx->sh[id];
        if (!s)
            continue;
        uint32_t q = ptr_slot(s, cap);
        while (cx->stable[q] && cx->stable[q] != s)
            q = (q + 1) & (cap - 1);
        cx->stable[q] = s;
    }
}

const ShdSharding *
prop_keep(PropCtx *cx, const ShdSharding *s)
{
    return keep_sharding(cx, s);
}

bool
prop_set(PropCtx *cx, IrInstr *i, const ShdSharding *s, const ShdSharding *candidate)
{
    if (ir_shape_is_tuple(&i->shape))
        s = px_single_tuple(cx, &i->shape, s);
    s = keep_sharding(cx, s);
    candidate = keep_sharding(cx, candidate);
    if (!s)
        return false;
    PropOrigin *o = SL_NEW(cx->keep, PropOrigin);
    if (!o)
        return false;
    o->instr = i;
    o->sharding = s;
    o->from = cx->from;
    o->prev = cx->from ? cx->origin[cx->from->id] : NULL;
    o->replaced = cx->sh[i->id];
    o->candidate = candidate;
    o->dir = cx->dir;
    o->level = cx->level;
    o->rule = cx->rule ? cx->rule : "";
    o->seq = (uint32_t)cx->origins.len;
    SL_VEC_PUSH(&cx->origins, PropOrigin *, o);
    cx->sh[i->id] = s;
    cx->origin[i->id] = o;
    return true;
}

bool
prop_improve(PropCtx *cx, IrInstr *i, const ShdSharding *s, bool combine, bool aggressive)
{
    if (!s)
        return false;
    const ShdSharding *r = px_improved(cx, s, prop_sh(cx, i), &i->shape, combine, aggressive);
    if (!r)
        return false;
    return prop_set(cx, i, r, s);
}

bool
prop_improve_sub(PropCtx *cx, IrInstr *i, const ShdSharding *s, uint32_t index, bool combine,
                 bool aggressive)
{
    if (!s)
        return false;
    if (!ir_shape_is_tuple(&i->shape))
        return index == 0 && prop_improve(cx, i, s, combine, aggressive);
    const ShdSharding *cur = prop_sh(cx, i);
    const ShdSharding *sub = cur ? px_sub(cx, cur, &i->shape, index) : NULL;
    const ShdSharding *r =
        px_improved(cx, s, sub, &i->shape.elems[index], combine, aggressive);
    if (!r)
        return false;
    return prop_set(cx, i, px_replace_sub(cx, cur, &i->shape, index, r), s);
}

/* ---- module edits ---- */

static void
replace_uses(IrComputation *c, IrInstr *old, IrInstr *now)
{
    for (uint32_t k = 0; k < c->n_instrs; k++) {
        IrInstr *u = c->instrs[k];
        for (uint32_t j = 0; j < u->n_operands; j++)
            if (u->operands[j] == old)
                u->operands[j] = now;
    }
    if (c->root == old)
        c->root = now;
}

static void
remove_instr(IrComputation *c, IrInstr *i)
{
    for (uint32_t k = 0; k < c->n_instrs; k++)
        if (c->instrs[k] == i) {
            memmove(c->instrs + k, c->instrs + k + 1, (c->n_instrs - k - 1) * sizeof(IrInstr *));
            c->n_instrs--;
            return;
        }
}

/* A copy of `i`'s operand in `i`'s place (same position in the computation). */
static IrInstr *
copy_in_place_of(IrModule *m, IrInstr *i, IrInstr *operand)
{
    IrComputation *c = i->parent;
    IrInstr *cp = ir_instr_new(m, IR_OP_COPY, &i->shape, &operand, 1);
    if (!cp)
        return NULL;
    cp->name = ir_module_unique_name(m, sl_str("copy"));
    if (!cp->name || ir_computation_add_instr(c, m, cp))
        return NULL;
    /* ir_computation_add_instr appended it: move it to i's slot. */
    c->n_instrs--;
    for (uint32_t k = 0; k < c->n_instrs; k++)
        if (c->instrs[k] == i) {
            c->instrs[k] = cp;
            break;
        }
    replace_uses(c, i, cp);
    return cp;
}

/* "unspecified_dims=[0,2]" in a Sharding custom call's backend_config. */
static uint32_t
parse_unspecified(const IrInstr *i, int64_t *dims, uint32_t cap)
{
    const IrAttr *a = ir_instr_find_attr(i, IR_ATTR_BACKEND_CONFIG);
    if (!a)
        return 0;
    SlStr t = a->u.text;
    const char *key = "unspecified_dims=[";
    size_t kl = strlen(key);
    for (size_t p = 0; p + kl <= t.len; p++) {
        if (memcmp(t.ptr + p, key, kl))
            continue;
        uint32_t n = 0;
        size_t q = p + kl;
        while (q < t.len && t.ptr[q] != ']' && n < cap) {
            while (q < t.len && (t.ptr[q] == ',' || t.ptr[q] == ' '))
                q++;
            int64_t v = 0;
            bool any = false;
            while (q < t.len && t.ptr[q] >= '0' && t.ptr[q] <= '9') {
                v = v * 10 + (t.ptr[q++] - '0');
                any = true;
            }
            if (!any)
                break;
            dims[n++] = v;
        }
        /* sorted */
        for (uint32_t x = 1; x < n; x++)
            for (uint32_t y = x; y > 0 && dims[y - 1] > dims[y]; y--) {
                int64_t tmp = dims[y];
                dims[y] = dims[y - 1];
                dims[y - 1] = tmp;
            }
        return n;
    }
    return 0;
}

/* ---- the pass ---- */

typedef struct UnspecDims {
    const IrInstr *copy; /* the copy that replaced a Sharding op */
    uint32_t n;
    int64_t dims[PROP_MAX_RANK];
} UnspecDims;


static uint32_t
group_members(const PropCtx *cx, const Groups *g, int64_t id, IrInstr **out, uint32_t cap)
{
    (void)cx;
    uint32_t n = 0;
    for (size_t k = 0; k < g->ids.len && n < cap; k++)
        if (SL_VEC_AT(&g->ids, int64_t, k) == id)
            out[n++] = SL_VEC_AT(&g->members, IrInstr *, k);
    return n;
}

static void
add_group_member(PropCtx *cx, Groups *g, IrInstr *i, int64_t id, int kind)
{
    SL_VEC_PUSH(&g->members, IrInstr *, i);
    SL_VEC_PUSH(&g->ids, int64_t, id);
    int8_t k8 = (int8_t)kind;
    SL_VEC_PUSH(&g->kinds, int8_t, k8);
    if (i->id < cx->n_ids) {
        cx->group[i->id] = id;
        cx->group_kind[i->id] = (int8_t)kind;
    }
}

static const ShdSharding *
without_group(PropCtx *cx, const ShdSharding *s)
{
    if (!s || !s->shard_group_kind)
        return s;
    ShdSharding *c = SL_NEW(cx->a, ShdSharding);
    if (!c)
        return s;
    *c = *s;
    c->shard_group_kind = 0;
    c->shard_group_id = 0;
    return c;
}

static bool
is_cse_prevention(const ShdSharding *s)
{
    static const char k[] = "_sharding_propagation_cse_prevention";
    if (!s || s->kind == SHD_TUPLE)
        return false;
    SlStr md = s->metadata;
    if (!md.len || (md.len > 1 && md.ptr[1] == '{'))
        return false;
    for (size_t p = 0; p + sizeof(k) - 1 <= md.len; p++)
        if (!memcmp(md.ptr + p, k, sizeof(k) - 1))
            return true;
    return false;
}

static const ShdSharding *
assign_md(PropCtx *cx, const ShdSharding *s, SlStr md)
{
    if (s->kind != SHD_TUPLE)
        return s->metadata.len ? s : px_with_md(cx, s, md);
    const ShdSharding **lv = SL_NEW_ARRAY(cx->a, const ShdSharding *, s->n_leaves + 1);
    if (!lv)
        return s;
    for (uint32_t i = 0; i < s->n_leaves; i++)
        lv[i] = assign_md(cx, s->leaves[i], md);
    return shd_tuple(cx->a, lv, s->n_leaves);
}

static IrComputation *
called(const IrInstr *i, IrAttrKey key)
{
    return ir_instr_called(i, key);
}

/* Computations `i` calls that the pass treats as partitionable bodies. */
static uint32_t
bodies(const IrInstr *i, IrComputation **out, uint32_t cap)
{
    uint32_t n = 0;
    if (i->op == IR_OP_WHILE) {
        if (called(i, IR_ATTR_CONDITION) && n < cap)
            out[n++] = called(i, IR_ATTR_CONDITION);
        if (called(i, IR_ATTR_BODY) && n < cap)
            out[n++] = called(i, IR_ATTR_BODY);
    } else if (i->op == IR_OP_CONDITIONAL) {
        const IrAttr *b = ir_instr_find_attr(i, IR_ATTR_BRANCH_COMPUTATIONS);
        if (b) {
            for (uint32_t k = 0; k < b->u.comps.n && n < cap; k++)
                out[n++] = b->u.comps.v[k];
        } else {
            if (called(i, IR_ATTR_TRUE_COMPUTATION) && n < cap)
                out[n++] = called(i, IR_ATTR_TRUE_COMPUTATION);
            if (called(i, IR_ATTR_FALSE_COMPUTATION) && n < cap)
                out[n++] = called(i, IR_ATTR_FALSE_COMPUTATION);
        }
    } else if (i->op == IR_OP_CALL) {
        IrComputation *c = called(i, IR_ATTR_TO_APPLY);
        if (c && n < cap)
            out[n++] = c;
    }
    return n;
}

#define MAX_RELATED 64

/* GetRelatedInstructions. */
static uint32_t
related(PropCtx *cx, IrInstr *i, IrInstr **out)
{
    IrComputation *b[MAX_RELATED];
    uint32_t n = 0;
    if (i->op == IR_OP_WHILE) {
        IrComputation *body = called(i, IR_ATTR_BODY), *cond = called(i, IR_ATTR_CONDITION);
        out[n++] = i;
        if (body && body->root)
            out[n++] = body->root;
        if (body && ir_computation_param(body, 0))
            out[n++] = ir_computation_param(body, 0);
        if (cond && ir_computation_param(cond, 0))
            out[n++] = ir_computation_param(cond, 0);
        return n;
    }
    if (i->op == IR_OP_CONDITIONAL) {
        uint32_t nb = bodies(i, b, MAX_RELATED - 1);
        out[n++] = i;
        for (uint32_t k = 0; k < nb; k++)
            if (b[k]->root)
                out[n++] = b[k]->root;
        return n;
    }
    if (i->op == IR_OP_CALL) {
        IrComputation *c = called(i, IR_ATTR_TO_APPLY);
        out[n++] = i;
        if (c && c->root)
            out[n++] = c->root;
        return n;
    }
    if (i->op == IR_OP_PARAMETER) {
        IrInstr *caller = cx->caller[i->parent->id];
        if (!caller)
            return 0;
        if (caller->op == IR_OP_CONDITIONAL) {
            uint32_t nb = bodies(caller, b, MAX_RELATED);
            for (uint32_t k = 0; k < nb; k++)
                if (b[k] == i->parent && k + 1 < caller->n_operands) {
                    out[n++] = i;
                    out[n++] = caller->operands[k + 1];
                    return n;
                }
        }
        if (caller->op == IR_OP_CALL && i->parameter_number < caller->n_operands) {
            out[n++] = i;
            out[n++] = caller->operands[i->parameter_number];
            return n;
        }
    }
    return 0;
}

static bool
same_sharding(const ShdSharding *a, const ShdSharding *b)
{
    if (!a || !b)
        return a == b;
    return shd_equal(a, b);
}

static void
mark_changed(SlVec *changed, IrInstr *i)
{
    SL_VEC_PUSH(changed, IrInstr *, i);
}

static void computation_propagation(PropCtx *cx, IrInstr *i, SlVec *changed, int depth);

static void
propagate_to(PropCtx *cx, IrInstr *search, IrInstr *i, SlVec *changed, int depth)
{
    IrInstr *rel[MAX_RELATED];
    uint32_t n = related(cx, search, rel);
    bool found = false;
    for (uint32_t k = 0; k < n; k++)
        found = found || rel[k] == i;
    if (!found)
        return;
    for (uint32_t k = 0; k < n; k++) {
        IrInstr *r = rel[k];
        if ((!prop_sh(cx, r) || !same_sharding(prop_sh(cx, r), prop_sh(cx, i))) &&
            !cx->provided[r->id]) {
            PropDir d = cx->dir;
            const IrInstr *f = cx->from;
            const char *rule = cx->rule;
            cx->dir = PROP_DIR_COMPUTATION;
            cx->from = i;
            cx->rule = "computation boundary";
            prop_set(cx, r, prop_sh(cx, i), NULL);
            cx->dir = d;
            cx->from = f;
            cx->rule = rule;
            mark_changed(changed, r);
            computation_propagation(cx, r, changed, depth + 1);
        }
    }
}

/* MaybeComputationPropagation. */
static void
computation_propagation(PropCtx *cx, IrInstr *i, SlVec *changed, int depth)
{
    if (depth > 64)
        return;
    if (i->op == IR_OP_CONDITIONAL || i->op == IR_OP_WHILE || i->op == IR_OP_CALL)
        propagate_to(cx, i, i, changed, depth);
    if (i->op == IR_OP_PARAMETER || i->parent->root == i) {
        IrInstr *caller = cx->caller[i->parent->id];
        if (caller) {
            propagate_to(cx, caller, i, changed, depth);
            if (i->op == IR_OP_PARAMETER &&
                (caller->op == IR_OP_CONDITIONAL || caller->op == IR_OP_CALL))
                propagate_to(cx, i, i, changed, depth);
        }
    }
}

typedef struct Caches {
    bool *group, *fwd, *bwd;
} Caches;

static void
clear_cache(PropCtx *cx, Caches *k, const Groups *g, IrInstr *i, IrInstr *for_users)
{
    for (uint32_t j = 0; j < i->n_operands; j++)
        k->bwd[i->operands[j]->id] = false;
    if (!for_users)
        for_users = i;
    uint32_t n = prop_n_users(cx, for_users);
    for (uint32_t u = 0; u < n; u++) {
        IrInstr *user = prop_user(cx, for_users, u);
        k->fwd[user->id] = false;
        IrComputation *b[MAX_RELATED];
        uint32_t nb = bodies(user, b, MAX_RELATED);
        for (uint32_t c = 0; c < nb; c++)
            for (uint32_t p = 0; p < b[c]->n_params; p++)
                if (b[c]->params[p])
                    k->fwd[b[c]->params[p]->id] = false;
    }
    if (cx->group[i->id] >= 0) {
        for (size_t m = 0; m < g->ids.len; m++)
            if (SL_VEC_AT(&g->ids, int64_t, m) == cx->group[i->id])
                k->group[SL_VEC_AT(&g->members, IrInstr *, m)->id] = false;
        k->group[i->id] = true;
    }
}

static void
after_change(PropCtx *cx, Caches *k, const Groups *g, IrInstr *i)
{
    SlVec changed = {0};
    computation_propagation(cx, i, &changed, 0);
    clear_cache(cx, k, g, i, NULL);
    for (size_t c = 0; c < changed.len; c++)
        clear_cache(cx, k, g, SL_VEC_AT(&changed, IrInstr *, c), NULL);
    sl_vec_fini(&changed);
}

/* InferShardingFromShardGroup. */
static bool
from_group(PropCtx *cx, IrInstr *i, IrInstr **members, uint32_t n)
{
    if (!prop_can_pass_at_level(i, cx->level))
        return false;
    const ShdSharding *cur = prop_sh(cx, i);
    if (cur && px_manual(cur))
        return false;
    if (prop_is_custom_call(i, "ShardBarrierTo"))
        return false;
    cx->dir = PROP_DIR_GROUP;
    cx->rule = "shard group";
    if (!cur || px_tile_maximal(cur))
        for (uint32_t k = 0; k < n; k++) {
            const ShdSharding *ms = prop_sh(cx, members[k]);
            if (members[k] == i || !ms || !px_manual(ms))
                continue;
            cx->from = members[k];
            return prop_set(cx, i, ms, NULL);
        }
    bool combine = cx->o->is_spmd && cx->level > 0, changed = false;
    for (uint32_t k = 0; k < n; k++) {
        if (members[k] == i || prop_is_custom_call(members[k], "ShardBarrierFrom"))
            continue;
        cx->from = members[k];
        changed |= prop_improve(cx, i, prop_sh(cx, members[k]), combine, false);
    }
    return changed;
}

/* Refines the unspecified dims of an annotation from `s` (InferUnspecifiedDims*). */
static bool
refine_unspecified(PropCtx *cx, IrInstr *i, const ShdSharding *s)
{
    if (!s || s->kind != SHD_TILED)
        return false;
    const ShdSharding *pr = px_replicate_except(cx, s, cx->unspec[i->id], cx->n_unspec[i->id]);
    const ShdSharding *cur = prop_sh(cx, i);
    if (!cur || !px_merge_if_compatible(cx, pr, px_num_tiles(cur) + 1, &cur))
        return false;
    return prop_set(cx, i, cur, pr);
}

/* The SPMDFullToShardShape / SPMDShardToFullShape right after annotation `i` (its one user,
 * with the same unspecified dims), else NULL; *bad when the dims differ. */
static IrInstr *
manual_conversion_after(PropCtx *cx, const IrInstr *i, bool *bad)
{
    *bad = false;
    if (prop_n_users(cx, i) != 1)
        return NULL;
    IrInstr *u = prop_user(cx, i, 0);
    if (!(cx->flags[u->id] & PROP_F_MANUAL_CONV))
        return NULL;
    int64_t ud[PROP_MAX_RANK];
    uint32_t n = parse_unspecified(u, ud, PROP_MAX_RANK);
    if (n != cx->n_unspec[i->id] || memcmp(ud, cx->unspec[i->id], n * sizeof(int64_t))) {
        *bad = true;
        return NULL;
    }
    return u;
}

/* RefineManualAutoShardingFromAuto: `to_merge` (no manual dims) refines both the auto
 * annotation and the manual one (treating its manual dim as a data dim). */
static bool
refine_from_auto(PropCtx *cx, const ShdSharding *to_merge, const int64_t *ud, uint32_t nu,
                 const ShdSharding **autos, const ShdSharding **manual)
{
    const ShdSharding *m = *manual;
    if (!px_manual_subgroup(m) || px_manual_subgroup(*autos) || !px_partial(m) ||
        m->n_subgroups != 2 || to_merge->kind != SHD_TILED || px_manual_subgroup(to_merge))
        return false;
    const ShdSharding *pr = px_replicate_except(cx, to_merge, ud, nu);
    if (px_tile_maximal(pr) || pr->kind != SHD_TILED)
        return false;
    if (!px_merge_if_compatible(cx, pr, px_num_tiles(*autos) + 1, autos))
        return false;
    /* pr with a size-1 dim before its replication, as the manual one's data dim */
    int64_t pos = shd_data_rank(pr);
    const ShdSharding *prm = px_insert_dims(cx, pr, &pos, 1);
    const ShdSharding *tmp = px_manual_as_data(cx, m);
    if (!prm || !tmp || !px_merge_if_compatible(cx, prm, px_num_tiles(tmp) + 1, &tmp))
        return false;
    const ShdSharding *back = px_data_as_manual(cx, tmp);
    if (!back)
        return false;
    *manual = px_keep_md(cx, back, m);
    return true;
}

/* RefineManualAutoShardingFromManual: `to_merge` (with a manual dim) refines the manual
 * annotation, and with its manual dim read as replication the auto one. */
static bool
refine_from_manual(PropCtx *cx, const ShdSharding *to_merge, const int64_t *ud, uint32_t nu,
                   const ShdSharding **autos, const ShdSharding **manual)
{
    const ShdSharding *m = *manual;
    if (!px_manual_subgroup(to_merge) || !px_manual_subgroup(m) || !px_partial(m) ||
        px_manual_subgroup(*autos) || m->n_subgroups != 2)
        return false;
    const ShdSharding *pr = px_replicate_except(cx, to_merge, ud, nu);
    if (px_tile_maximal(pr) || pr->kind != SHD_TILED)
        return false;
    if (!px_merge_if_compatible(cx, pr, px_num_tiles(m) + 1, manual))
        return false;
    ShdSubgroup reps[PROP_MAX_RANK];
    for (uint32_t k = 0; k < pr->n_subgroups; k++)
        reps[k] = SHD_SUB_REPLICATED;
    const ShdSharding *pa =
        shd_tiled(cx->a, pr->tile_dims, pr->n_tile_dims, pr->devices, reps, pr->n_subgroups);
    return pa && px_merge_if_compatible(cx, px_keep_md(cx, pa, pr), px_num_tiles(*autos) + 1,
                                        autos);
}

/* Sets the annotation and its manual conversion op after a refinement. */
static bool
set_pair(PropCtx *cx, IrInstr *i, const ShdSharding *si, IrInstr *conv, const ShdSharding *sc)
{
    bool ok = prop_set(cx, i, si, NULL);
    const IrInstr *f = cx->from;
    cx->from = i;
    ok = prop_set(cx, conv, sc, NULL) && ok;
    cx->from = f;
    return ok;
}

static bool
unspecified_from_operand(PropCtx *cx, IrInstr *i)
{
    const IrInstr *op = i->operands[0];
    const ShdSharding *os = prop_sh(cx, op);
    cx->man_after = NULL;
    if (!px_spatial(os) || os->kind != SHD_TILED)
        return false;
    bool bad;
    IrInstr *conv = manual_conversion_after(cx, i, &bad);
    if (bad)
        return false;
    cx->man_after = conv;
    cx->from = op;
    cx->dir = PROP_DIR_FORWARD;
    cx->rule = "unspecified dims";
    if (!conv)
        return refine_unspecified(cx, i, os);
    const int64_t *ud = cx->unspec[i->id];
    uint32_t nu = cx->n_unspec[i->id];
    if (cx->flags[conv->id] & PROP_F_FULL_TO_SHARD) {
        const ShdSharding *au = prop_sh(cx, i), *ma = prop_sh(cx, conv);
        if (!au || !ma || !refine_from_auto(cx, os, ud, nu, &au, &ma))
            return false;
        return set_pair(cx, i, au, conv, ma);
    }
    const ShdSharding *ma = prop_sh(cx, i), *au = prop_sh(cx, conv);
    if (!au || !ma || !refine_from_manual(cx, os, ud, nu, &au, &ma))
        return false;
    return set_pair(cx, i, ma, conv, au);
}

static bool
unspecified_from_users(PropCtx *cx, IrInstr *i)
{
    bool changed = false, bad;
    cx->man_after = NULL;
    IrInstr *conv = manual_conversion_after(cx, i, &bad);
    if (bad)
        return false;
    cx->man_after = conv;
    IrInstr *src = conv ? conv : i;
    const int64_t *ud = cx->unspec[i->id];
    uint32_t nu = cx->n_unspec[i->id];
    uint32_t n = prop_n_users(cx, src);
    for (uint32_t k = 0; k < n; k++) {
        IrInstr *u = prop_user(cx, src, k);
        const ShdSharding *us = prop_sh(cx, u);
        if (!us || us->kind != SHD_TILED)
            continue;
        const ShdSharding *s = prop_from_user(cx, src, u, cx->level);
        if (!s || px_tile_maximal(s))
            continue;
        cx->from = u;
        cx->dir = PROP_DIR_BACKWARD;
        cx->rule = "unspecified dims";
        if (!conv) {
            changed |= refine_unspecified(cx, i, s);
        } else if (cx->flags[conv->id] & PROP_F_FULL_TO_SHARD) {
            const ShdSharding *au = prop_sh(cx, i), *ma = prop_sh(cx, conv);
            if (au && ma && refine_from_manual(cx, s, ud, nu, &au, &ma))
                changed |= set_pair(cx, i, au, conv, ma);
        } else {
            const ShdSharding *ma = prop_sh(cx, i), *au = prop_sh(cx, conv);
            if (au && ma && refine_from_auto(cx, s, ud, nu, &au, &ma))
                changed |= set_pair(cx, i, ma, conv, au);
        }
    }
    return changed;
}

static bool
unspecified_from_group(PropCtx *cx, IrInstr *i, IrInstr **members, uint32_t n)
{
    if (prop_is_custom_call(i, "ShardBarrierTo"))
        return false;
    bool changed = false;
    for (uint32_t k = 0; k < n; k++) {
        if (members[k] == i || prop_is_custom_call(members[k], "ShardBarrierFrom"))
            continue;
        const ShdSharding *ms = prop_sh(cx, members[k]);
        if (!px_spatial(ms) || ms->kind != SHD_TILED)
            continue;
        cx->from = members[k];
        cx->dir = PROP_DIR_GROUP;
        cx->rule = "unspecified dims";
        changed |= refine_unspecified(cx, i, ms);
    }
    return changed;
}

#define MAX_GROUP 4096

#define SIG_MIX(h, p) ((h) = ((h) ^ (uint64_t)(uintptr_t)(p)) * 0x100000001b3ull)

/* What a rule reads: the instruction's sharding and its operands' (forward); its users' and
 * their operands' (backward). Shardings are kept once each, so pointers identify them. */
static uint64_t
rule_inputs(const PropCtx *cx, const IrInstr *i, bool forward, bool *broadcast)
{
    uint64_t h = 0xcbf29ce484222325ull;
    SIG_MIX(h, cx->sh[i->id]);
    *broadcast = i->op == IR_OP_BROADCAST;
    if (forward) {
        for (uint32_t k = 0; k < i->n_operands; k++)
            SIG_MIX(h, cx->sh[i->operands[k]->id]);
        return h;
    }
    uint32_t nu = prop_n_users(cx, i);
    for (uint32_t u = 0; u < nu; u++) {
        const IrInstr *user = prop_user(cx, i, u);
        *broadcast |= user->op == IR_OP_BROADCAST;
        SIG_MIX(h, user);
        SIG_MIX(h, cx->sh[user->id]);
        /* the users whose request also reads their other operands */
        if (user->op == IR_OP_DOT || user->op == IR_OP_CONVOLUTION || user->op == IR_OP_REDUCE ||
            user->op == IR_OP_SCATTER)
            for (uint32_t k = 0; k < user->n_operands; k++)
                SIG_MIX(h, cx->sh[user->operands[k]->id]);
    }
    return h;
}

/* Rules run with candidates in the scratch arena; prop_set() keeps what is set. A rule that
 * changed nothing is not run again on the same inputs at a level that behaves the same (levels
 * 1-3 differ only for broadcasts); parameters read their caller's operands, so they always
 * run. */
static bool
eval_rule(PropCtx *cx, IrInstr *i, bool forward)
{
    int d = forward ? 0 : 1;
    bool bcast = false, memo = i->op != IR_OP_PARAMETER;
    uint64_t sig = memo ? rule_inputs(cx, i, forward, &bcast) : 0;
    int8_t prev = cx->memo_level[d][i->id];
    if (memo && prev >= 0 && cx->memo_sig[d][i->id] == sig &&
        (prev == cx->level || (prev >= 1 && cx->level >= 1 && !bcast)))
        return false;
    SlArenaMark mk = sl_arena_mark(&cx->scratch);
    cx->a = &cx->scratch;
    bool r = forward ? prop_forward(cx, i) : prop_backward(cx, i);
    cx->a = cx->keep;
    sl_arena_release(&cx->scratch, mk);
    if (!r && memo) {
        cx->memo_sig[d][i->id] = sig;
        cx->memo_level[d][i->id] = (int8_t)cx->level;
    }
    return r;
}

static bool
eval_group(PropCtx *cx, IrInstr *i, IrInstr **members, uint32_t n)
{
    SlArenaMark mk = sl_arena_mark(&cx->scratch);
    cx->a = &cx->scratch;
    bool r = from_group(cx, i, members, n);
    cx->a = cx->keep;
    sl_arena_release(&cx->scratch, mk);
    return r;
}

static bool
eval_unspec(PropCtx *cx, IrInstr *i, int how, IrInstr **members, uint32_t n)
{
    SlArenaMark mk = sl_arena_mark(&cx->scratch);
    cx->a = &cx->scratch;
    bool r = how == 0   ? unspecified_from_group(cx, i, members, n)
             : how == 1 ? unspecified_from_operand(cx, i)
                        : unspecified_from_users(cx, i);
    cx->a = cx->keep;
    sl_arena_release(&cx->scratch, mk);
    return r;
}

static bool
run_to_fix_point(PropCtx *cx, const Groups *g, int level)
{
    Caches k;
    /* One set of cache arrays for every fixed point (fresh pages cost more than a clear). */
    if (cx->cache_n != cx->n_ids) {
        cx->cache_group = SL_NEW_ARRAY(cx->a, bool, cx->n_ids);
        cx->cache_fwd = SL_NEW_ARRAY(cx->a, bool, cx->n_ids);
        cx->cache_bwd = SL_NEW_ARRAY(cx->a, bool, cx->n_ids);
        if (!cx->cache_group || !cx->cache_fwd || !cx->cache_bwd)
            return false;
        cx->cache_n = cx->n_ids;
    } else {
        memset(cx->cache_group, 0, cx->n_ids);
        memset(cx->cache_fwd, 0, cx->n_ids);
        memset(cx->cache_bwd, 0, cx->n_ids);
    }
    k.group = cx->cache_group;
    k.fwd = cx->cache_fwd;
    k.bwd = cx->cache_bwd;
    IrInstr **members = SL_NEW_ARRAY(cx->a, IrInstr *, MAX_GROUP);
    if (!members)
        return false;
    cx->level = level;
    bool changed = false, last = true;
    bool merge_partial = cx->o->is_spmd && level > 0;
    while (last) {
        last = false;
        cx->iterations++;
        for (uint32_t ci = 0; ci < cx->m->n_comps; ci++) {
            if (!prop_options_thread(cx->o, cx->m->comps[ci]))
                continue;
            const uint32_t *ord = cx->order + cx->comp_start[ci];
            uint32_t n_ord = cx->comp_start[ci + 1] - cx->comp_start[ci];
            /* 1. shard groups */
            for (uint32_t x = 0; x < n_ord && g->ids.len; x++) {
                IrInstr *i = cx->by_id[ord[x]];
                if (k.group[i->id] || cx->group[i->id] < 0)
                    continue;
                uint32_t nm = group_members(cx, g, cx->group[i->id], members, MAX_GROUP);
                if (cx->provided[i->id]) {
                    if (!merge_partial)
                        continue;
                    if (cx->unspec[i->id] && eval_unspec(cx, i, 0, members, nm)) {
                        clear_cache(cx, &k, g, i, NULL);
                        k.group[i->id] = true;
                        last = true;
                    }
                    continue;
                }
                k.group[i->id] = true;
                if (eval_group(cx, i, members, nm)) {
                    changed = true;
                    after_change(cx, &k, g, i);
                    last = true;
                }
            }
            /* 2. forward, post order */
            for (uint32_t x = 0; x < n_ord; x++) {
                if (k.fwd[ord[x]] || (cx->provided[ord[x]] && !merge_partial))
                    continue;
                IrInstr *i = cx->by_id[ord[x]];
                if (cx->provided[i->id]) {
                    if (!merge_partial)
                        continue;
                    if (cx->unspec[i->id] && eval_unspec(cx, i, 1, NULL, 0)) {
                        clear_cache(cx, &k, g, i, cx->man_after);
                        k.fwd[i->id] = true;
                        last = true;
                    }
                    continue;
                }
                k.fwd[i->id] = true;
                cx->dir = PROP_DIR_FORWARD;
                cx->from = NULL;
                cx->rule = NULL;
                if (eval_rule(cx, i, true)) {
                    changed = true;
                    after_change(cx, &k, g, i);
                    last = true;
                }
            }
            /* 3. backward, reverse post order */
            for (uint32_t x = n_ord; x-- > 0;) {
                uint32_t id = ord[x];
                if ((cx->flags[id] & PROP_F_MANUAL_CONV) && !k.bwd[id] &&
                    cx->by_id[id]->n_operands)
                    k.bwd[cx->by_id[id]->operands[0]->id] = false;
                if (k.bwd[id] || (cx->provided[id] && !merge_partial))
                    continue;
                IrInstr *i = cx->by_id[id];
                if (cx->provided[i->id]) {
                    if (!merge_partial)
                        continue;
                    if (cx->unspec[i->id] && eval_unspec(cx, i, 2, NULL, 0)) {
                        clear_cache(cx, &k, g, i, cx->man_after);
                        k.bwd[i->id] = true;
                        if (cx->man_after)
                            k.bwd[cx->man_after->id] = true;
                        last = true;
                    }
                    continue;
                }
                k.bwd[i->id] = true;
                cx->dir = PROP_DIR_BACKWARD;
                cx->from = NULL;
                cx->rule = NULL;
                if (eval_rule(cx, i, false)) {
                    changed = true;
                    after_change(cx, &k, g, i);
                    last = true;
                }
            }
        }
        if (cx->iterations > 100000)
            break;
    }
    return changed;
}

static SlStatus
write_back(PropCtx *cx, IrInstr *i, const ShdSharding *s)
{
    IrAttr *a = ir_instr_find_attr_mut(i, IR_ATTR_SHARDING);
    if (!s) {
        if (a)
            ir_instr_remove_attr(i, IR_ATTR_SHARDING);
        return SL_OK;
    }
    if (a && a->u.sharding == s)
        return SL_OK;
    if (!a && !(a = ir_instr_add_attr(cx->m, i, IR_ATTR_SHARDING)))
        return SL_ERR_NOMEM;
    a->u.sharding = s;
    ir_instr_place_sharding(i, a);
    return SL_OK;
}

static bool
md_equal_deep(const ShdSharding *a, const ShdSharding *b)
{
    if (!a || !b)
        return a == b;
    if (!shd_equal(a, b))
        return false;
    if (a->kind == SHD_TUPLE && b->kind == SHD_TUPLE) {
        for (uint32_t i = 0; i < a->n_leaves && i < b->n_leaves; i++)
            if (!sl_str_eq(a->leaves[i]->metadata, b->leaves[i]->metadata))
                return false;
        return true;
    }
    if (a->kind == SHD_TUPLE || b->kind == SHD_TUPLE)
        return true;
    return sl_str_eq(a->metadata, b->metadata);
}

static void
build_users(PropCtx *cx)
{
    uint32_t *count = SL_NEW_ARRAY(cx->a, uint32_t, cx->n_ids + 1);
    cx->user_start = SL_NEW_ARRAY(cx->a, uint32_t, cx->n_ids + 2);
    uint32_t *last = SL_NEW_ARRAY(cx->a, uint32_t, cx->n_ids + 1);
    if (!count || !cx->user_start || !last)
        return;
    /* A user counts once per operand (last[] remembers the latest user seen). */
    for (uint32_t ci = 0; ci < cx->m->n_comps; ci++) {
        IrComputation *c = cx->m->comps[ci];
        for (uint32_t x = 0; x < c->n_instrs; x++) {
            IrInstr *u = c->instrs[x];
            for (uint32_t j = 0; j < u->n_operands; j++) {
                IrInstr *o = u->operands[j];
                if (last[o->id] == u->id + 1)
                    continue;
                last[o->id] = u->id + 1;
                count[o->id]++;
            }
        }
    }
    uint32_t total = 0;
    for (uint32_t i = 0; i < cx->n_ids; i++) {
        cx->user_start[i] = total;
        total += count[i];
        count[i] = 0;
        last[i] = 0;
    }
    cx->user_start[cx->n_ids] = total;
    cx->by_id = SL_NEW_ARRAY(cx->a, IrInstr *, cx->n_ids + 1);
    cx->order = SL_NEW_ARRAY(cx->a, uint32_t, cx->n_ids + 1);
    cx->comp_start = SL_NEW_ARRAY(cx->a, uint32_t, cx->m->n_comps + 1);
    if (!cx->by_id || !cx->order || !cx->comp_start)
        return;
    uint32_t w = 0;
    for (uint32_t ci = 0; ci < cx->m->n_comps; ci++) {
        IrComputation *c = cx->m->comps[ci];
        cx->comp_start[ci] = w;
        for (uint32_t x = 0; x < c->n_instrs; x++) {
            cx->by_id[c->instrs[x]->id] = c->instrs[x];
            cx->order[w++] = c->instrs[x]->id;
        }
    }
    cx->comp_start[cx->m->n_comps] = w;
    cx->users = SL_NEW_ARRAY(cx->a, IrInstr *, total + 1);
    if (!cx->users || !cx->order)
        return;
    for (uint32_t ci = 0; ci < cx->m->n_comps; ci++) {
        IrComputation *c = cx->m->comps[ci];
        for (uint32_t x = 0; x < c->n_instrs; x++) {
            IrInstr *u = c->instrs[x];
            for (uint32_t j = 0; j < u->n_operands; j++) {
                IrInstr *o = u->operands[j];
                if (last[o->id] == u->id + 1)
                    continue;
                last[o->id] = u->id + 1;
                cx->users[cx->user_start[o->id] + count[o->id]++] = u;
            }
        }
    }
}

static bool
other_attr_true(const IrInstr *i, const char *key)
{
    const IrAttr *a = ir_instr_find_other(i, key);
    return a && sl_str_eq_cstr(a->u.other.text, "true");
}

static SlStatus
device_conflict(SlError *err, const IrInstr *i, int64_t dev, const IrInstr *ch, int64_t ch_dev)
{
    return sl_fail(err, SL_ERR_INVALID, (SlSrcLoc){NULL, i->src_line, i->src_col},
                   "Instruction: %s is on device: %lld, which conflicts with device: %lld of "
                   "channel instruction: %s",
                   sl_sym_cstr(i->name), (long long)dev, (long long)ch_dev, sl_sym_cstr(ch->name));
}

/* CheckAndUpdateDeviceAssignmentsInWhileBody. */
static SlStatus
check_while_devices(PropCtx *cx, IrInstr *w, SlError *err)
{
    IrComputation *body = called(w, IR_ATTR_BODY);
    if (!body)
        return SL_OK;
    int64_t unique = -1;
    const IrInstr *channel = NULL;
    /* device -> the last instruction seen on it, by device */
    int64_t devs[256];
    const IrInstr *by_dev[256];
    uint32_t nd = 0;
    for (uint32_t x = 0; x < body->n_instrs; x++) {
        IrInstr *i = body->instrs[x];
        int64_t dev;
        if (!cx->sh[i->id] || !shd_unique_device(cx->sh[i->id], &dev))
            continue;
        bool is_channel =
            ((i->op == IR_OP_SEND || i->op == IR_OP_RECV) && !other_attr_true(i, "is_host_transfer")) ||
            ((i->op == IR_OP_ALL_REDUCE || i->op == IR_OP_REDUCE_SCATTER) &&
             ir_instr_find_attr(i, IR_ATTR_CHANNEL_ID));
        if (unique >= 0) {
            if (dev != unique)
                return device_conflict(err, i, dev, channel, unique);
        } else if (is_channel) {
            channel = i;
            unique = dev;
            /* the lowest conflicting device first, as a sorted map gives */
            int64_t best = -1;
            const IrInstr *bi = NULL;
            for (uint32_t k = 0; k < nd; k++)
                if (devs[k] != unique && (best < 0 || devs[k] < best)) {
                    best = devs[k];
                    bi = by_dev[k];
                }
            if (bi)
                return device_conflict(err, bi, best, channel, unique);
        } else {
            uint32_t k = 0;
            while (k < nd && devs[k] != dev)
                k++;
            if (k == nd && nd < SL_COUNTOF(devs))
                devs[nd++] = dev;
            if (k < SL_COUNTOF(devs))
                by_dev[k] = i;
        }
    }
    if (unique < 0)
        return SL_OK;
    int64_t wd;
    if (cx->sh[w->id] && shd_unique_device(cx->sh[w->id], &wd) && wd != unique)
        return device_conflict(err, w, wd, channel, unique);
    IrInstr *root = body->root;
    int64_t rd;
    if (!cx->sh[root->id] || !shd_unique_device(cx->sh[root->id], &rd)) {
        cx->from = channel;
        cx->rule = "channel device in while body";
        prop_set(cx, root, shd_maximal(cx->a, unique), NULL);
        cx->from = NULL;
    } else if (rd != unique) {
        return device_conflict(err, root, rd, channel, unique);
    }
    return SL_OK;
}

static SlStatus
run_pass(PropCtx *cx, IrModule *m, const PropOptions *o, SlArena *a, PropResult *out,
         SlError *err)
{
    SlSrcLoc none = {0};
    cx->m = m;
    cx->o = o;
    for (uint32_t k = 0; k < o->n_allow_output; k++)
        cx->allow_output |= o->allow_output[k];
    for (uint32_t k = 0; k < o->n_allow_params; k++)
        cx->allow_params |= o->allow_params[k];
    IrComputation *entry = m->entry;
    if (!entry || !entry->root)
        return sl_fail(err, SL_ERR_INVALID, none, "the module has no entry computation");

    /* One body per call site: a body's shardings follow its caller's. */
    if (prop_flatten_calls(m, &cx->scratch))
        out->changed = true;

    /* Original shardings by instruction, before anything changes. */
    uint32_t n0 = m->next_instr_id;
    const ShdSharding **orig = SL_NEW_ARRAY(a, const ShdSharding *, n0 + 1);
    if (!orig)
        return SL_ERR_NOMEM;
    for (uint32_t ci = 0; ci < m->n_comps; ci++)
        for (uint32_t x = 0; x < m->comps[ci]->n_instrs; x++) {
            IrInstr *i = m->comps[ci]->instrs[x];
            orig[i->id] = ir_instr_sharding(i);
        }

    /* The Sharding custom calls become copies (ProcessShardingInstruction), so that the
     * index arrays below are sized for the copies too. */
    SlVec *sharding_ops = &cx->owned[0], *removed_group_ops = &cx->owned[1];
    bool replace = !o->cse_prevention_only;
    for (uint32_t ci = 0; ci < m->n_comps; ci++) {
        IrComputation *c = m->comps[ci];
        if (!prop_options_thread(o, c))
            continue;
        for (uint32_t x = c->n_instrs; x-- > 0;) {
            IrInstr *i = c->instrs[x];
            if (!prop_is_custom_call(i, "Sharding"))
                continue;
            const ShdSharding *s = ir_instr_sharding(i);
            if (!s) {
                sl_vec_fini(sharding_ops);
                sl_vec_fini(removed_group_ops);
                return sl_fail(err, SL_ERR_INVALID,
                               (SlSrcLoc){NULL, i->src_line, i->src_col},
                               "Sharding custom call %s has no sharding attribute",
                               sl_sym_cstr(i->name));
            }
            if (!i->n_operands)
                continue;
            bool to_copy = replace && (s->kind != SHD_UNKNOWN ||
                                       i->operands[0]->op == IR_OP_PARAMETER);
            if (to_copy) {
                IrInstr *cp = copy_in_place_of(m, i, i->operands[0]);
                if (!cp)
                    return SL_ERR_NOMEM;
                /* The copy has no backend_config: its unspecified dims are kept here. */
                UnspecDims ud = {cp, 0, {0}};
                ud.n = parse_unspecified(i, ud.dims, PROP_MAX_RANK);
                if (ud.n && !SL_VEC_PUSH(&cx->owned[2], UnspecDims, ud))
                    return SL_ERR_NOMEM;
                IrAttr *sa = ir_instr_add_attr(m, cp, IR_ATTR_SHARDING);
                if (!sa)
                    return SL_ERR_NOMEM;
                sa->u.sharding = s;
                ir_instr_place_sharding(cp, sa);
                /* as XLA's ReplaceInstruction: a replacement without op_name gets the
                 * replaced instruction's metadata */
                const IrAttr *md = ir_instr_find_attr(i, IR_ATTR_METADATA);
                IrAttr *ma = md ? ir_instr_add_attr(m, cp, IR_ATTR_METADATA) : NULL;
                if (md && !ma)
                    return SL_ERR_NOMEM;
                if (ma)
                    ma->u.metadata = md->u.metadata;
                SL_VEC_PUSH(sharding_ops, IrInstr *, cp);
            } else if (replace && s->shard_group_kind) {
                SL_VEC_PUSH(removed_group_ops, IrInstr *, i);
            } else {
                SL_VEC_PUSH(sharding_ops, IrInstr *, i);
            }
        }
    }

    cx->n_ids = m->next_instr_id;
    uint32_t n = cx->n_ids;
    cx->sh = SL_NEW_ARRAY(a, const ShdSharding *, n + 1);
    cx->origin = SL_NEW_ARRAY(a, const PropOrigin *, n + 1);
    cx->provided = SL_NEW_ARRAY(a, bool, n + 1);
    cx->group = SL_NEW_ARRAY(a, int64_t, n + 1);
    cx->group_kind = SL_NEW_ARRAY(a, int8_t, n + 1);
    cx->unspec = SL_NEW_ARRAY(a, const int64_t *, n + 1);
    cx->n_unspec = SL_NEW_ARRAY(a, uint32_t, n + 1);
    cx->caller = SL_NEW_ARRAY(a, IrInstr *, m->next_comp_id + 1);
    if (!cx->sh || !cx->origin || !cx->provided || !cx->group || !cx->group_kind ||
        !cx->unspec || !cx->n_unspec || !cx->caller)
        return SL_ERR_NOMEM;
    for (uint32_t i = 0; i < n; i++)
        cx->group[i] = -1;
    cx->level = -1;
    cx->dir = PROP_DIR_FIXUP;
    bool any_changed = false;

    for (uint32_t ci = 0; ci < m->n_comps; ci++)
        for (uint32_t x = 0; x < m->comps[ci]->n_instrs; x++) {
            IrInstr *i = m->comps[ci]->instrs[x];
            const ShdSharding *s = cx->sh[i->id] = ir_instr_sharding(i);
            for (uint32_t l = 0; s && l < (s->kind == SHD_TUPLE ? s->n_leaves : 1); l++) {
                const ShdSharding *e = s->kind == SHD_TUPLE ? s->leaves[l] : s;
                if (e->kind == SHD_TILED && shd_device_count(e) > cx->max_devices)
                    cx->max_devices = shd_device_count(e);
            }
        }

    /* CSE prevention shardings of an earlier run go; metadata is assigned or removed. */
    const ShdSharding **saved_cse = NULL;
    if (o->cse_prevention_only) {
        saved_cse = SL_NEW_ARRAY(a, const ShdSharding *, n + 1);
        if (!saved_cse)
            return SL_ERR_NOMEM;
        memcpy(saved_cse, cx->sh, n * sizeof(*saved_cse));
    }
    for (uint32_t ci = 0; ci < m->n_comps; ci++)
        for (uint32_t x = 0; x < m->comps[ci]->n_instrs; x++) {
            IrInstr *i = m->comps[ci]->instrs[x];
            const ShdSharding *s = cx->sh[i->id];
            if (!s)
                continue;
            if (!o->cse_prevention_only && is_cse_prevention(s)) {
                cx->sh[i->id] = NULL;
                any_changed = true;
                continue;
            }
            if (o->propagate_metadata) {
                const IrMetadata *md = ir_instr_metadata(i);
                if (md && md->raw.len > 2)
                    cx->sh[i->id] = assign_md(cx, s, md->raw);
            } else {
                cx->sh[i->id] = px_strip_md(cx, s);
            }
        }

    /* Shard groups, unspecified dims; a Sharding op's annotation also goes to an
     * unannotated operand. */
    Groups *g = &cx->groups;
    for (uint32_t ci = 0; ci < m->n_comps; ci++) {
        IrComputation *c = m->comps[ci];
        for (uint32_t x = c->n_instrs; x-- > 0;) {
            IrInstr *i = c->instrs[x];
            const ShdSharding *s = cx->sh[i->id];
            bool is_op = false, is_removed = false;
            for (size_t k = 0; k < sharding_ops->len; k++)
                is_op = is_op || SL_VEC_AT(sharding_ops, IrInstr *, k) == i;
            for (size_t k = 0; k < removed_group_ops->len; k++)
                is_removed = is_removed || SL_VEC_AT(removed_group_ops, IrInstr *, k) == i;
            if (is_removed) {
                /* The group goes to the operand (visited later: it comes first). */
                IrInstr *op = i->operands[0];
                const ShdSharding *os = cx->sh[op->id] ? cx->sh[op->id] : shd_unknown(a);
                ShdSharding *cs = SL_NEW(a, ShdSharding);
                if (!cs)
                    return SL_ERR_NOMEM;
                *cs = *os;
                cs->shard_group_kind = s->shard_group_kind;
                cs->shard_group_id = s->shard_group_id;
                cx->sh[op->id] = cs;
                continue;
            }
            if (replace && s && s->shard_group_kind) {
                add_group_member(cx, g, i, s->shard_group_id, s->shard_group_kind);
                cx->sh[i->id] = without_group(cx, s);
            }
            if (is_op && i->n_operands) {
                int64_t ud[PROP_MAX_RANK];
                uint32_t nu = 0;
                if (i->op == IR_OP_CUSTOM_CALL) {
                    nu = parse_unspecified(i, ud, PROP_MAX_RANK);
                } else {
                    for (size_t q = 0; q < cx->owned[2].len; q++) {
                        const UnspecDims *u = &SL_VEC_AT(&cx->owned[2], UnspecDims, q);
                        if (u->copy == i) {
                            nu = u->n;
                            memcpy(ud, u->dims, nu * sizeof(int64_t));
                        }
                    }
                }
                if (nu) {
                    cx->unspec[i->id] = SL_DUP_ARRAY(a, int64_t, ud, nu);
                    cx->n_unspec[i->id] = nu;
                } else if (!cx->sh[i->operands[0]->id]) {
                    cx->sh[i->operands[0]->id] = cx->sh[i->id];
                }
            }
        }
    }
    for (size_t k = 0; k < removed_group_ops->len; k++) {
        IrInstr *i = SL_VEC_AT(removed_group_ops, IrInstr *, k);
        IrInstr *op = i->operands[0];
        replace_uses(i->parent, i, op);
        remove_instr(i->parent, i);
        any_changed = true;
    }
    sl_vec_fini(removed_group_ops);
    sl_vec_fini(sharding_ops);

    /* Saved output and parameter shardings. */
    IrInstr *root = entry->root;
    const ShdSharding *saved_root = root->shape.dtype == IR_DT_TUPLE ? cx->sh[root->id] : NULL;
    uint32_t np = entry->n_params;
    const ShdSharding **saved_params = SL_NEW_ARRAY(a, const ShdSharding *, np + 1);
    if (!saved_params)
        return SL_ERR_NOMEM;
    for (uint32_t p = 0; p < np; p++)
        saved_params[p] = entry->params[p] ? cx->sh[entry->params[p]->id] : NULL;

    if (cx->allow_params && o->n_allow_params != 1 && o->n_allow_params != np &&
        !(np == 1 && entry->params[0] && ir_shape_is_tuple(&entry->params[0]->shape) &&
          entry->params[0]->shape.n_elems == o->n_allow_params))
        return sl_fail(err, SL_ERR_INVALID, none,
                       "allow_spmd_sharding_propagation_to_parameters has %u values; the entry "
                       "has %u parameters",
                       o->n_allow_params, np);
    if (cx->allow_output && cx->sh[root->id] && o->n_allow_output != 1) {
        const ShdSharding *rs = cx->sh[root->id];
        uint32_t nl = rs->kind == SHD_TUPLE ? rs->n_leaves : 1;
        if (nl != o->n_allow_output)
            return sl_fail(err, SL_ERR_INVALID, none,
                           "allow_spmd_sharding_propagation_to_output has %u values; the "
                           "entry's result has %u elements",
                           o->n_allow_output, nl);
    }

    build_users(cx);
    if (!cx->users || !cx->order)
        return SL_ERR_NOMEM;
    cx->flags = SL_NEW_ARRAY(a, uint8_t, n + 1);
    if (!cx->flags)
        return SL_ERR_NOMEM;
    for (int d = 0; d < 2; d++) {
        cx->memo_sig[d] = SL_NEW_ARRAY(a, uint64_t, n + 1);
        cx->memo_level[d] = SL_NEW_ARRAY(a, int8_t, n + 1);
        if (!cx->memo_sig[d] || !cx->memo_level[d])
            return SL_ERR_NOMEM;
        memset(cx->memo_level[d], 0xff, n + 1);
    }
    for (uint32_t ci = 0; ci < m->n_comps; ci++)
        for (uint32_t x = 0; x < m->comps[ci]->n_instrs; x++) {
            IrInstr *i = m->comps[ci]->instrs[x];
            if (i->op != IR_OP_CUSTOM_CALL)
                continue;
            cx->flags[i->id] = (prop_is_custom_call(i, "ShardBarrierFrom") ? PROP_F_BARRIER_FROM : 0) |
                               (prop_is_custom_call(i, "ShardBarrierTo") ? PROP_F_BARRIER_TO : 0) |
                               (prop_is_custom_call(i, "SPMDFullToShardShape") ||
                                        prop_is_custom_call(i, "SPMDShardToFullShape")
                                    ? PROP_F_MANUAL_CONV
                                    : 0) |
                               (prop_is_custom_call(i, "Sharding") ? PROP_F_SHARDING : 0) |
                               (prop_is_custom_call(i, "SPMDFullToShardShape") ? PROP_F_FULL_TO_SHARD
                                                                               : 0);
        }

    /* A while whose body holds a channel instruction on one device stays on that device. */
    for (uint32_t ci = 0; ci < m->n_comps; ci++)
        for (uint32_t x = 0; x < m->comps[ci]->n_instrs; x++) {
            IrInstr *w = m->comps[ci]->instrs[x];
            if (w->op == IR_OP_WHILE && check_while_devices(cx, w, err))
                return err->status;
        }

    /* Computation map and related instructions share one sharding. */
    for (uint32_t ci = 0; ci < m->n_comps; ci++) {
        IrComputation *c = m->comps[ci];
        for (uint32_t x = 0; x < c->n_instrs; x++) {
            IrInstr *i = c->instrs[x];
            if (i->op != IR_OP_WHILE && i->op != IR_OP_CONDITIONAL && i->op != IR_OP_CALL)
                continue;
            IrInstr *rel[MAX_RELATED];
            uint32_t nr = related(cx, i, rel);
            const IrInstr *sharded = NULL;
            for (uint32_t k = 0; k < nr && !sharded; k++)
                if (cx->sh[rel[k]->id])
                    sharded = rel[k];
            if (sharded) {
                cx->from = sharded;
                cx->rule = "computation boundary";
                cx->dir = PROP_DIR_COMPUTATION;
                for (uint32_t k = 0; k < nr; k++)
                    if (rel[k] != sharded && !same_sharding(cx->sh[rel[k]->id], cx->sh[sharded->id]))
                        prop_set(cx, rel[k], cx->sh[sharded->id], NULL);
                    else if (rel[k] != sharded)
                        cx->sh[rel[k]->id] = cx->sh[sharded->id];
            }
            IrComputation *b[MAX_RELATED];
            uint32_t nb = bodies(i, b, MAX_RELATED);
            for (uint32_t k = 0; k < nb; k++)
                cx->caller[b[k]->id] = i;
        }
    }
    cx->from = NULL;
    cx->dir = PROP_DIR_FIXUP;

    /* Provided shardings. */
    for (uint32_t ci = 0; ci < m->n_comps; ci++) {
        IrComputation *c = m->comps[ci];
        for (uint32_t x = 0; x < c->n_instrs; x++) {
            IrInstr *i = c->instrs[x];
            const ShdSharding *s = cx->sh[i->id];
            if (s && i != root && i->op != IR_OP_PARAMETER && s->kind != SHD_UNKNOWN)
                cx->provided[i->id] = true;
        }
    }
    if (!cx->allow_output && (!cx->sh[root->id] || cx->sh[root->id]->kind != SHD_UNKNOWN)) {
        if (root->op == IR_OP_WHILE) {
            /* A copy after the while keeps the output sharding, so that the loop's own may
             * still change. */
            IrInstr *cp = ir_instr_new(m, IR_OP_COPY, &root->shape, &root, 1);
            if (!cp || !(cp->name = ir_module_unique_name(m, sl_str("copy"))) ||
                ir_computation_add_instr(entry, m, cp))
                return SL_ERR_NOMEM;
            /* The new id is past the arrays: give the copy the while's slot data by
             * growing them. */
            uint32_t nn = m->next_instr_id;
            const ShdSharding **sh2 = SL_NEW_ARRAY(a, const ShdSharding *, nn + 1);
            const PropOrigin **or2 = SL_NEW_ARRAY(a, const PropOrigin *, nn + 1);
            bool *pr2 = SL_NEW_ARRAY(a, bool, nn + 1);
            int64_t *g2 = SL_NEW_ARRAY(a, int64_t, nn + 1);
            int8_t *gk2 = SL_NEW_ARRAY(a, int8_t, nn + 1);
            const int64_t **u2 = SL_NEW_ARRAY(a, const int64_t *, nn + 1);
            uint32_t *nu2 = SL_NEW_ARRAY(a, uint32_t, nn + 1);
            uint8_t *f2 = SL_NEW_ARRAY(a, uint8_t, nn + 1);
            if (!sh2 || !or2 || !pr2 || !g2 || !gk2 || !u2 || !nu2 || !f2)
                return SL_ERR_NOMEM;
            memcpy(sh2, cx->sh, n * sizeof(*sh2));
            memcpy(or2, cx->origin, n * sizeof(*or2));
            memcpy(pr2, cx->provided, n * sizeof(*pr2));
            memcpy(g2, cx->group, n * sizeof(*g2));
            memcpy(gk2, cx->group_kind, n * sizeof(*gk2));
            memcpy(u2, cx->unspec, n * sizeof(*u2));
            memcpy(nu2, cx->n_unspec, n * sizeof(*nu2));
            memcpy(f2, cx->flags, n * sizeof(*f2));
            cx->flags = f2;
            for (int d = 0; d < 2; d++) {
                uint64_t *ms = SL_NEW_ARRAY(a, uint64_t, nn + 1);
                int8_t *ml = SL_NEW_ARRAY(a, int8_t, nn + 1);
                if (!ms || !ml)
                    return SL_ERR_NOMEM;
                memset(ml, 0xff, nn + 1);
                cx->memo_sig[d] = ms;
                cx->memo_level[d] = ml;
            }
            for (uint32_t k = n; k < nn; k++)
                g2[k] = -1;
            cx->sh = sh2;
            cx->origin = or2;
            cx->provided = pr2;
            cx->group = g2;
            cx->group_kind = gk2;
            cx->unspec = u2;
            cx->n_unspec = nu2;
            cx->n_ids = n = nn;
            entry->root = cp;
            cx->sh[cp->id] = cx->sh[root->id];
            root = cp;
            build_users(cx);
            if (!cx->users || !cx->order)
                return SL_ERR_NOMEM;
            any_changed = true;
        }
        cx->provided[root->id] = true;
    }
    if (!cx->allow_params)
        for (uint32_t p = 0; p < np; p++) {
            IrInstr *pi = entry->params[p];
            if (pi && cx->sh[pi->id] && cx->sh[pi->id]->kind != SHD_UNKNOWN)
                cx->provided[pi->id] = true;
        }

    /* Unknown shardings propagate as replicated. */
    for (uint32_t ci = 0; ci < m->n_comps; ci++)
        for (uint32_t x = 0; x < m->comps[ci]->n_instrs; x++) {
            IrInstr *i = m->comps[ci]->instrs[x];
            const ShdSharding *s = cx->sh[i->id];
            if (s && s->kind == SHD_UNKNOWN)
                cx->sh[i->id] = px_replicated_sh(cx, s);
        }

    collect_stable(cx);
    for (int level = 0; level < 4; level++)
        any_changed |= run_to_fix_point(cx, g, level);

    /* shard_as groups adopt one common sharding. */
    IrInstr **members = SL_NEW_ARRAY(a, IrInstr *, MAX_GROUP);
    if (!members)
        return SL_ERR_NOMEM;
    cx->level = -1;
    cx->dir = PROP_DIR_GROUP;
    cx->rule = "shard_as alignment";
    for (size_t k = 0; k < g->ids.len; k++) {
        int64_t id = SL_VEC_AT(&g->ids, int64_t, k);
        if (SL_VEC_AT(&g->kinds, int8_t, k) != 1)
            continue;
        bool first = true;
        for (size_t j = 0; j < k; j++)
            if (SL_VEC_AT(&g->ids, int64_t, j) == id && SL_VEC_AT(&g->kinds, int8_t, j) == 1)
                first = false;
        if (!first)
            continue;
        uint32_t nm = group_members(cx, g, id, members, MAX_GROUP);
        const ShdSharding *def = shd_replicated(a), *common = NULL;
        bool compatible = true;
        for (uint32_t x = 0; x < nm; x++) {
            const ShdSharding *s = cx->sh[members[x]->id];
            if (!s)
                continue;
            if (!prop_is_custom_call(members[x], "ShardBarrierFrom") && px_replicated(def))
                def = s;
            if (!common)
                common = s;
            else if (compatible && !shd_equal(common, s) &&
                     !px_merge_if_compatible(cx, s, px_num_tiles(common), &common))
                compatible = false;
        }
        if (!common || !compatible)
            common = def;
        for (uint32_t x = 0; x < nm; x++) {
            IrInstr *mi = members[x];
            if (prop_is_custom_call(mi, "ShardBarrierTo"))
                continue;
            if (!same_sharding(cx->sh[mi->id], common) ||
                !md_equal_deep(cx->sh[mi->id], common)) {
                cx->from = NULL;
                prop_set(cx, mi, common, NULL);
            }
        }
    }

    /* A ShardBarrierFrom in a shard_as group relays its sharding to its operand; then one more
     * fixed point at the highest level. */
    cx->rule = "shard barrier relay";
    for (uint32_t ci = 0; ci < m->n_comps; ci++)
        for (uint32_t x = 0; x < m->comps[ci]->n_instrs; x++) {
            IrInstr *i = m->comps[ci]->instrs[x];
            if (!(cx->flags[i->id] & PROP_F_BARRIER_FROM) || cx->group[i->id] < 0 ||
                cx->group_kind[i->id] != 1 || !i->n_operands || !cx->sh[i->id])
                continue;
            const ShdSharding *s = cx->sh[i->id];
            const ShdSharding *os = cx->sh[i->operands[0]->id];
            if (os)
                px_merge_if_compatible(cx, os, px_num_tiles(s), &s);
            cx->from = i;
            prop_set(cx, i->operands[0], s, NULL);
        }
    any_changed |= run_to_fix_point(cx, g, 3);

    /* Shard barriers go. */
    for (uint32_t ci = 0; ci < m->n_comps; ci++) {
        IrComputation *c = m->comps[ci];
        if (!prop_options_thread(o, c))
            continue;
        for (uint32_t x = c->n_instrs; x-- > 0;) {
            IrInstr *i = c->instrs[x];
            if ((cx->flags[i->id] & (PROP_F_BARRIER_FROM | PROP_F_BARRIER_TO)) && i->n_operands) {
                replace_uses(c, i, i->operands[0]);
                remove_instr(c, i);
                any_changed = true;
            }
        }
    }

    /* CSE prevention only: keep only the new shardings of the targets, marked. */
    if (o->cse_prevention_only) {
        static const char k_md[] = "{op_name=\"_sharding_propagation_cse_prevention\"}";
        for (uint32_t ci = 0; ci < m->n_comps; ci++)
            for (uint32_t x = 0; x < m->comps[ci]->n_instrs; x++) {
                IrInstr *i = m->comps[ci]->instrs[x];
                if (!cx->sh[i->id])
                    continue;
                bool target = i->op == IR_OP_BROADCAST && i->n_operands &&
                              i->operands[0]->shape.rank == 0;
                if (target) {
                    if (!saved_cse[i->id] && cx->sh[i->id]->kind != SHD_TUPLE)
                        cx->sh[i->id] =
                            px_with_md(cx, cx->sh[i->id], (SlStr){k_md, sizeof(k_md) - 1});
                    continue;
                }
                cx->sh[i->id] = i->id < n ? saved_cse[i->id] : NULL;
            }
    }

    /* Output and parameter restrictions. */
    root = entry->root;
    if (saved_root && cx->sh[root->id] && saved_root->kind == SHD_TUPLE &&
        saved_root->n_leaves == o->n_allow_output) {
        const ShdSharding *rs = px_single_tuple(cx, &root->shape, cx->sh[root->id]);
        if (rs->kind == SHD_TUPLE && rs->n_leaves == saved_root->n_leaves) {
            const ShdSharding **lv = SL_NEW_ARRAY(a, const ShdSharding *, rs->n_leaves + 1);
            if (!lv)
                return SL_ERR_NOMEM;
            for (uint32_t k = 0; k < rs->n_leaves; k++)
                lv[k] = !o->allow_output[k] && saved_root->leaves[k]->kind != SHD_UNKNOWN
                            ? saved_root->leaves[k]
                            : rs->leaves[k];
            cx->sh[root->id] = shd_tuple(a, lv, rs->n_leaves);
        }
    }
    if (cx->allow_params) {
        if (o->n_allow_params == np) {
            for (uint32_t p = 0; p < np; p++) {
                IrInstr *pi = entry->params[p];
                if (!pi || o->allow_params[p])
                    continue;
                cx->sh[pi->id] = saved_params[p] && saved_params[p]->kind != SHD_UNKNOWN
                                     ? saved_params[p]
                                     : NULL;
            }
        } else if (np == 1 && saved_params[0] && entry->params[0] &&
                   ir_shape_is_tuple(&entry->params[0]->shape) &&
                   entry->params[0]->shape.n_elems == o->n_allow_params) {
            IrInstr *pi = entry->params[0];
            const ShdSharding *ps = cx->sh[pi->id];
            for (uint32_t k = 0; k < pi->shape.n_elems && ps; k++) {
                const ShdSharding *sv = px_sub(cx, saved_params[0], &pi->shape, k);
                if (!o->allow_params[k] && sv && sv->kind != SHD_UNKNOWN)
                    ps = px_replace_sub(cx, ps, &pi->shape, k, sv);
            }
            cx->sh[pi->id] = ps;
        }
    }
    cx->rule = "not evenly partitioned";
    cx->dir = PROP_DIR_FIXUP;
    cx->from = NULL;
    if (cx->allow_output && cx->sh[root->id]) {
        const ShdSharding *rs = cx->sh[root->id];
        if (ir_shape_is_tuple(&root->shape) && o->n_allow_output == root->shape.n_elems) {
            const ShdSharding *ns = rs;
            for (uint32_t k = 0; k < root->shape.n_elems; k++)
                if (o->allow_output[k] &&
                    !px_evenly(&root->shape.elems[k], px_sub(cx, rs, &root->shape, k)))
                    ns = px_replace_sub(cx, ns, &root->shape, k, shd_replicated(a));
            if (ns != rs)
                prop_set(cx, root, ns, NULL);
        } else if (!ir_shape_is_tuple(&root->shape) && !px_evenly(&root->shape, rs)) {
            prop_set(cx, root, shd_replicated(a), NULL);
        }
    }
    if (cx->allow_params) {
        if (o->n_allow_params == np) {
            for (uint32_t p = 0; p < np; p++) {
                IrInstr *pi = entry->params[p];
                if (pi && cx->sh[pi->id] && o->allow_params[p] &&
                    !px_evenly(&pi->shape, cx->sh[pi->id]))
                    prop_set(cx, pi, shd_replicated(a), NULL);
            }
        } else if (np == 1 && entry->params[0] && cx->sh[entry->params[0]->id] &&
                   ir_shape_is_tuple(&entry->params[0]->shape) &&
                   entry->params[0]->shape.n_elems == o->n_allow_params) {
            IrInstr *pi = entry->params[0];
            const ShdSharding *ps = cx->sh[pi->id], *ns = ps;
            for (uint32_t k = 0; k < pi->shape.n_elems; k++)
                if (o->allow_params[k] &&
                    !px_evenly(&pi->shape.elems[k], px_sub(cx, ps, &pi->shape, k)))
                    ns = px_replace_sub(cx, ns, &pi->shape, k, shd_replicated(a));
            if (ns != ps)
                prop_set(cx, pi, ns, NULL);
        }
    }

    /* Write the shardings back and count. */
    out->final_origin = SL_NEW_ARRAY(a, const PropOrigin *, n + 1);
    if (!out->final_origin)
        return SL_ERR_NOMEM;
    out->n_ids = n;
    for (uint32_t ci = 0; ci < m->n_comps; ci++)
        for (uint32_t x = 0; x < m->comps[ci]->n_instrs; x++) {
            IrInstr *i = m->comps[ci]->instrs[x];
            const ShdSharding *was = i->id < n0 ? orig[i->id] : ir_instr_sharding(i);
            out->n_instrs++;
            if (!prop_options_thread(o, m->comps[ci]))
                continue; /* other threads keep what they had */
            const ShdSharding *s = cx->sh[i->id];
            if (s && !was)
                out->n_propagated++;
            if (!md_equal_deep(s, was))
                any_changed = true;
            if (s != was || (s && !md_equal_deep(s, was))) {
                SlStatus st = write_back(cx, i, s);
                if (st)
                    return st;
            }
            out->final_origin[i->id] = s && !md_equal_deep(s, was) ? cx->origin[i->id] : NULL;
        }
    out->origins = (PropOrigin **)cx->origins.data;
    out->n_origins = (uint32_t)cx->origins.len;
    out->iterations = cx->iterations;
    out->changed = out->changed || any_changed;
    /* The origin list's heap array is handed to the caller's arena. */
    if (cx->origins.len) {
        PropOrigin **copy = SL_DUP_ARRAY(a, PropOrigin *, cx->origins.data, cx->origins.len);
        sl_vec_fini(&cx->origins);
        out->origins = copy;
    }
    return sl_arena_failed(a) ? SL_ERR_NOMEM : SL_OK;
}

SlStatus
prop_run(IrModule *m, const PropOptions *o, SlArena *a, PropResult *out, SlError *err)
{
    memset(out, 0, sizeof(*out));
    PropCtx cx = {0};
    cx.a = a;
    cx.keep = a;
    sl_arena_init(&cx.scratch);
    SlStatus st = run_pass(&cx, m, o, a, out, err);
    sl_arena_fini(&cx.scratch);
    sl_vec_fini(&cx.origins);
    for (size_t k = 0; k < SL_COUNTOF(cx.owned); k++)
        sl_vec_fini(&cx.owned[k]);
    sl_vec_fini(&cx.groups.members);
    sl_vec_fini(&cx.groups.ids);
    sl_vec_fini(&cx.groups.kinds);
    if (st && !err->status)
        sl_fail(err, st, (SlSrcLoc){0}, "sharding propagation failed (%s)", sl_status_name(st));
    return st;
}

/* ---- origins as text ---- */

static const char *
dir_name(PropDir d)
{
    switch (d) {
    case PROP_DIR_ANNOTATED: return "annotated";
    case PROP_DIR_FORWARD: return "forward";
    case PROP_DIR_BACKWARD: return "backward";
    case PROP_DIR_GROUP: return "from its shard group";
    case PROP_DIR_COMPUTATION: return "across a computation boundary";
    case PROP_DIR_FIXUP: return "by the pass's fix-up";
    }
    return "?";
}

const char *
prop_dir_name(PropDir d)
{
    switch (d) {
    case PROP_DIR_ANNOTATED: return "annotated";
    case PROP_DIR_FORWARD: return "forward";
    case PROP_DIR_BACKWARD: return "backward";
    case PROP_DIR_GROUP: return "shard group";
    case PROP_DIR_COMPUTATION: return "computation";
    case PROP_DIR_FIXUP: return "fix-up";
    }
    return "?";
}

const IrInstr *
prop_origin_source(const PropOrigin *o)
{
    uint32_t guard = 0;
    while (o->prev && guard++ < 1u << 20)
        o = o->prev;
    return o->from;
}

uint32_t
prop_origin_path(const PropOrigin *o, const IrInstr **path, uint32_t cap)
{
    /* Walk back from o (nearest first), then reverse. */
    uint32_t n = 0;
    if (!cap)
        return 0;
    path[n++] = o->instr;
    const PropOrigin *p = o;
    for (; p && n < cap; p = p->prev) {
        if (!p->prev) {
            if (p->from)
                path[n++] = p->from;
            break;
        }
        path[n++] = p->prev->instr;
    }
    for (uint32_t a = 0, b = n - 1; a < b; a++, b--) {
        const IrInstr *t = path[a];
        path[a] = path[b];
        path[b] = t;
    }
    return n;
}

void
prop_origin_describe(const PropOrigin *o, SlBuf *out)
{
    sl_buf_printf(out, "%%%s got ", sl_sym_cstr(o->instr->name));
    shd_print(o->sharding, out);
    sl_buf_printf(out, " %s", dir_name(o->dir));
    /* The source: the first hop whose neighbour has no origin (an annotation). */
    const PropOrigin *hops[64];
    uint32_t nh = 0;
    for (const PropOrigin *p = o; p && nh < SL_COUNTOF(hops); p = p->prev)
        hops[nh++] = p;
    const PropOrigin *last = hops[nh - 1];
    if (last->from) {
        const IrInstr *src = last->from;
        sl_buf_printf(out, " from %%%s", sl_sym_cstr(src->name));
        if (src->op == IR_OP_PARAMETER)
            sl_buf_printf(out, " (parameter %lld, annotated)", (long long)src->parameter_number);
        else if (src->parent->root == src && src->parent->is_entry)
            sl_buf_puts(out, " (output, annotated)");
        else
            sl_buf_puts(out, " (annotated)");
    }
    if (nh > 1) {
        sl_buf_puts(out, " through");
        for (uint32_t k = nh - 1; k >= 1; k--)
            sl_buf_printf(out, "%s%%%s", k == nh - 1 ? " " : k == 1 ? " and " : ", ",
                          sl_sym_cstr(hops[k]->instr->name));
    }
    if (o->level >= 0)
        sl_buf_printf(out, " at level %d", o->level);
    if (o->rule && *o->rule)
        sl_buf_printf(out, " (rule %s)", o->rule);
    if (o->replaced && o->candidate && !shd_equal(o->candidate, o->sharding)) {
        sl_buf_puts(out, "; merged ");
        shd_print(o->candidate, out);
        sl_buf_puts(out, " with ");
        shd_print(o->replaced, out);
    }
}
