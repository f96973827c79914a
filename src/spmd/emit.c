/* emit.c - the emit choke (seed: SpmdBuilder::AddInstruction) and the small instruction
 * builders every partitioner file uses. Owns: naming, derived-from links, metadata copying,
 * broadcast-dims bookkeeping, the `xla.sdy.has_unreduced_axes` strip, and cloning source
 * instructions and computations into the output module. Does not own: deciding what to emit.
 * Invariant: spmd_emit() is the only function that appends to an output computation built by
 * the partitioner (verbatim computation copies append through copy_computation below). */
#include "spmd/spmd_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BCAST_KNOWN ((uint64_t)1 << 63) /* flag: the instruction has an entry */
#define BCAST_MAX_RANK 62u

static const char k_unreduced_key[] = "xla.sdy.has_unreduced_axes";

/* ---- broadcast dims (seed: SetBroadcastDimsForAddedHlo) ---- */

uint64_t
spmd_bcast_dims(const SpmdCtx *cx, const IrInstr *i)
{
    return i->id < cx->cap_bcast_dims ? cx->bcast_dims[i->id] & ~BCAST_KNOWN : 0;
}

static bool
bcast_known(const SpmdCtx *cx, const IrInstr *i, uint64_t *mask)
{
    if (i->id >= cx->cap_bcast_dims || !(cx->bcast_dims[i->id] & BCAST_KNOWN))
        return false;
    *mask = cx->bcast_dims[i->id] & ~BCAST_KNOWN;
    return true;
}

/* An array by output instruction id instead of a hash map: one store per emitted instruction
 * (the map's lookups were a cache miss each on 100k-instruction modules). */
void
spmd_set_bcast_dims(SpmdCtx *cx, const IrInstr *i, uint64_t mask)
{
    if (i->shape.rank > BCAST_MAX_RANK)
        return;
    if (i->id >= cx->cap_bcast_dims) {
        size_t cap = cx->cap_bcast_dims ? cx->cap_bcast_dims : 1024;
        while (cap <= i->id)
            cap *= 2;
        if (cap > UINT32_MAX)
            return;
        uint64_t *v = realloc(cx->bcast_dims, cap * sizeof(uint64_t));
        if (!v)
            return; /* an unknown entry only costs a later reshard its shortcut */
        memset(v + cx->cap_bcast_dims, 0, (cap - cx->cap_bcast_dims) * sizeof(uint64_t));
        cx->bcast_dims = v;
        cx->cap_bcast_dims = (uint32_t)cap;
    }
    cx->bcast_dims[i->id] = mask | BCAST_KNOWN;
}

void
spmd_note_sharding(SpmdCtx *cx, const IrInstr *i, const ShdSharding *s)
{
    if (!i || !s)
        return;
    if (i->id >= cx->cap_out_shardings) {
        size_t cap = cx->cap_out_shardings ? cx->cap_out_shardings : 1024;
        while (cap <= i->id)
            cap *= 2;
        if (cap > UINT32_MAX)
            return;
        const ShdSharding **v = realloc((void *)cx->out_shardings, cap * sizeof(*v));
        if (!v)
            return; /* a missing record only lets the clean-up merge more */
        memset((void *)(v + cx->cap_out_shardings), 0,
               (cap - cx->cap_out_shardings) * sizeof(*v));
        cx->out_shardings = v;
        cx->cap_out_shardings = (uint32_t)cap;
    }
    cx->out_shardings[i->id] = s;
}

/* Output dim j of a reshape is broadcast when every input dim it is made of is; groups are the
 * minimal runs of dims with equal products on both sides. */
static uint64_t
bcast_reshape(const IrShape *in, const IrShape *out, uint64_t m)
{
    uint64_t r = 0;
    uint32_t i = 0, j = 0;
    while (i < in->rank || j < out->rank) {
        uint32_t i0 = i, j0 = j;
        int64_t pi = 1, pj = 1;
        if (i < in->rank)
            pi = in->dims[i++];
        if (j < out->rank)
            pj = out->dims[j++];
        while (pi != pj) {
            if (pi < pj && i < in->rank)
                pi *= in->dims[i++];
            else if (pj < pi && j < out->rank)
                pj *= out->dims[j++];
            else
                return r;
        }
        bool all = true;
        for (uint32_t k = i0; k < i; k++)
            all = all && (m >> k & 1);
        if (all)
            for (uint32_t k = j0; k < j; k++)
                r |= (uint64_t)1 << k;
    }
    return r;
}

static void
set_bcast_for_added(SpmdCtx *cx, const IrInstr *h)
{
    if (!ir_shape_is_array(&h->shape) || h->shape.rank > BCAST_MAX_RANK)
        return;
    uint64_t m = 0, all = h->shape.rank ? (((uint64_t)1 << h->shape.rank) - 1) : 0;
    switch (h->op) {
    case IR_OP_BROADCAST: {
        const int64_t *dims;
        uint32_t n = ir_instr_ints_attr(h, IR_ATTR_DIMENSIONS, &dims);
        uint64_t opm = 0;
        bool known = h->n_operands && bcast_known(cx, h->operands[0], &opm);
        m = all;
        for (uint32_t k = 0; k < n; k++)
            if (!known || !(opm >> k & 1))
                m &= ~((uint64_t)1 << dims[k]);
        spmd_set_bcast_dims(cx, h, m);
        return;
    }
    case IR_OP_CONSTANT:
    case IR_OP_IOTA:
        return;
    case IR_OP_SLICE:
    case IR_OP_TRANSPOSE:
    case IR_OP_PAD:
    case IR_OP_RESHAPE: {
        if (!h->n_operands || !bcast_known(cx, h->operands[0], &m))
            return;
        if (h->op == IR_OP_TRANSPOSE) {
            const int64_t *perm;
            uint32_t n = ir_instr_ints_attr(h, IR_ATTR_DIMENSIONS, &perm);
            uint64_t r = 0;
            for (uint32_t k = 0; k < n; k++)
                if (m >> perm[k] & 1)
                    r |= (uint64_t)1 << k;
            m = r;
        } else if (h->op == IR_OP_RESHAPE) {
            m = bcast_reshape(&h->operands[0]->shape, &h->shape, m);
        }
        spmd_set_bcast_dims(cx, h, m & all);
        return;
    }
    default:
        break;
    }
    if (ir_op_is_elementwise(h->op) && h->n_operands > 0) {
        m = all;
        for (uint32_t k = 0; k < h->n_operands; k++) {
            uint64_t om = 0;
            if (!bcast_known(cx, h->operands[k], &om))
                return;
            if (h->operands[k]->shape.rank == h->shape.rank)
                m &= om;
        }
        spmd_set_bcast_dims(cx, h, m);
    }
}

/* ---- names ---- */

#define NO_BASE UINT32_MAX

/* Index of base symbol `b`, added unused when new; NO_BASE on allocation failure. */
static uint32_t
base_index(SpmdNames *nm, SlSym b)
{
    uint64_t v = 0;
    if (sl_map_get(&nm->index, SL_MAP_KEY(b), &v))
        return (uint32_t)v;
    if (nm->n == nm->cap) {
        uint32_t cap = nm->cap ? nm->cap * 2 : 256;
        SpmdNameBase *nv = cap > nm->cap ? realloc(nm->v, (size_t)cap * sizeof(*nv)) : NULL;
        if (!nv)
            return NO_BASE;
        nm->v = nv;
        nm->cap = cap;
    }
    if (!sl_map_put(&nm->index, SL_MAP_KEY(b), nm->n))
        return NO_BASE;
    nm->v[nm->n] = (SpmdNameBase){b, 0};
    return nm->n++;
}

/* Index of the base with text `base` (interned when new); NO_BASE on allocation failure. */
static uint32_t
base_text_index(SpmdCtx *cx, SlStr base)
{
    SpmdNames *nm = &cx->names;
    uint64_t h = sl_hash_bytes(base.ptr, base.len);
    size_t slot = h & (SL_COUNTOF(nm->recent) - 1);
    if (nm->recent[slot].k1 && nm->recent[slot].hash == h) {
        SlStr have = sl_sym_str(nm->v[nm->recent[slot].k1 - 1].base);
        if (have.len == base.len && !memcmp(have.ptr, base.ptr, base.len))
            return nm->recent[slot].k1 - 1;
    }
    SlSym b = sl_intern(cx->out->names, base);
    uint32_t k = b ? base_index(nm, b) : NO_BASE;
    if (k != NO_BASE) {
        nm->recent[slot].hash = h;
        nm->recent[slot].k1 = k + 1;
    }
    return k;
}

/* The base of `want` (interned); NO_BASE on allocation failure. */
static uint32_t
base_of(SpmdCtx *cx, SlStr want)
{
    SlStr base;
    if (ir_name_split(want, &base) < 0)
        base = want;
    return base_text_index(cx, base);
}

/* The base of source instruction `src`'s name, resolved once per source instruction (checked
 * against the name, so any instruction may be passed). */
static uint32_t
base_of_src(SpmdCtx *cx, const IrInstr *src)
{
    SpmdNames *nm = &cx->names;
    SlStr name = sl_sym_str(src->name), base;
    if (src->id < nm->n_src && nm->by_src[src->id]) {
        uint32_t k = nm->by_src[src->id] - 1;
        SlStr have = sl_sym_str(nm->v[k].base);
        if (ir_name_split(name, &base) < 0)
            base = name;
        if (have.len == base.len && !memcmp(have.ptr, base.ptr, base.len))
            return k;
    }
    uint32_t k = base_of(cx, name);
    if (k != NO_BASE && src->id < nm->n_src)
        nm->by_src[src->id] = k + 1;
    return k;
}

static uint32_t
base_of_op(SpmdCtx *cx, IrOp op)
{
    SpmdNames *nm = &cx->names;
    if ((unsigned)op >= IR_OP_COUNT)
        return base_of(cx, sl_str(ir_op_name(op)));
    if (!nm->by_op[op]) {
        uint32_t k = base_of(cx, sl_str(ir_op_name(op)));
        if (k == NO_BASE)
            return k;
        nm->by_op[op] = k + 1;
    }
    return nm->by_op[op] - 1;
}

/* ir_module_unique_name on base `k`: the base itself while unused, else "base.N". */
static SlSym
take_name(SpmdCtx *cx, uint32_t k)
{
    if (k == NO_BASE)
        return NULL;
    SpmdNameBase *e = &cx->names.v[k];
    if (e->next == 0) {
        e->next = 1;
        return e->base;
    }
    uint64_t next = e->next;
    SlSym r = ir_name_with_suffix(cx->out->names, sl_sym_str(e->base), next);
    e->next = next + 1;
    return r;
}

SlSym
spmd_unique_name(SpmdCtx *cx, SlStr want)
{
    return take_name(cx, base_of(cx, want));
}

/* ir_module_reserve_name in the partitioner's table; returns the base index (NO_BASE on
 * allocation failure). */
static uint32_t
reserve_name(SpmdCtx *cx, SlSym name)
{
    SlStr base;
    int64_t suffix = ir_name_split(sl_sym_str(name), &base);
    uint32_t k = base_text_index(cx, base);
    if (k == NO_BASE)
        return k;
    uint64_t want = suffix < 0 ? 1 : (uint64_t)suffix + 1;
    if (want > cx->names.v[k].next)
        cx->names.v[k].next = want;
    return k;
}

bool
spmd_names_init(SpmdCtx *cx)
{
    SpmdNames *nm = &cx->names;
    const IrModule *in = cx->in;
    memset(nm, 0, sizeof(*nm));
    sl_map_init(&nm->index);
    nm->n_src = in->next_instr_id;
    nm->by_src = calloc(nm->n_src ? nm->n_src : 1, sizeof(uint32_t));
    if (!nm->by_src || !sl_map_reserve(&nm->index, 1024))
        return false;
    /* Every input name is taken. The base found for each instruction is kept, so a clone's
     * name costs no second split and lookup of the same text. */
    for (uint32_t c = 0; c < in->n_comps; c++) {
        if (reserve_name(cx, in->comps[c]->name) == NO_BASE)
            return false;
        const IrComputation *comp = in->comps[c];
        for (uint32_t i = 0; i < comp->n_instrs; i++) {
            const IrInstr *ins = comp->instrs[i];
#if defined(__GNUC__)
            /* a cache miss per instruction and per name record otherwise: fetch ahead */
            if (i + 16 < comp->n_instrs)
                __builtin_prefetch(comp->instrs[i + 16]);
            if (i + 8 < comp->n_instrs)
                __builtin_prefetch(comp->instrs[i + 8]->name);
#endif
            uint32_t k = reserve_name(cx, ins->name);
            if (k == NO_BASE)
                return false;
            if (ins->id < nm->n_src)
                nm->by_src[ins->id] = k + 1;
        }
    }
    return true;
}

bool
spmd_names_sync(SpmdCtx *cx)
{
    const SpmdNames *nm = &cx->names;
    for (uint32_t k = 0; k < nm->n; k++)
        if (nm->v[k].next && !ir_module_set_name_counter(cx->out, nm->v[k].base, nm->v[k].next))
            return false;
    return true;
}

void
spmd_names_fini(SpmdCtx *cx)
{
    free(cx->names.v);
    free(cx->names.by_src);
    sl_map_fini(&cx->names.index);
    memset(&cx->names, 0, sizeof(cx->names));
}

/* ---- the choke ---- */

static void
strip_unreduced(SpmdCtx *cx, IrInstr *i)
{
    IrAttr *a = ir_instr_find_attr_mut(i, IR_ATTR_FRONTEND_ATTRIBUTES);
    if (!a)
        return;
    uint32_t n = a->u.frontend.n, w = 0;
    bool found = false;
    for (uint32_t k = 0; k < n; k++)
        found = found || sl_str_eq_cstr(sl_sym_str(a->u.frontend.v[k].key), k_unreduced_key);
    if (!found)
        return;
    IrFrontendAttr *v = SL_NEW_ARRAY(cx->arena, IrFrontendAttr, n);
    if (!v)
        return;
    for (uint32_t k = 0; k < n; k++)
        if (!sl_str_eq_cstr(sl_sym_str(a->u.frontend.v[k].key), k_unreduced_key))
            v[w++] = a->u.frontend.v[k];
    if (w == 0) {
        ir_instr_remove_attr(i, IR_ATTR_FRONTEND_ATTRIBUTES);
        return;
    }
    a->u.frontend.v = v;
    a->u.frontend.n = w;
}

static void
setup_derived(SpmdCtx *cx, IrInstr *i)
{
    const IrInstr *src = cx->visiting;
    i->derived_from = src;
    if (!src)
        return;
    const IrAttr *md = ir_instr_find_attr(src, IR_ATTR_METADATA);
    if (md && !ir_instr_find_attr(i, IR_ATTR_METADATA)) {
        IrAttr *a = ir_instr_add_attr(cx->out, i, IR_ATTR_METADATA);
        if (a)
            *a = *md;
    }
}

/* spmd_emit with the name base already resolved (NO_BASE: a failed resolution). */
static IrInstr *
emit_as(SpmdCtx *cx, IrInstr *i, uint32_t base)
{
    setup_derived(cx, i);
    set_bcast_for_added(cx, i);
    strip_unreduced(cx, i);
    if (!i->name) {
        i->name = take_name(cx, base);
        if (!i->name)
            return NULL;
    }
    if (ir_computation_add_instr(cx->comp, cx->out, i) != SL_OK)
        return NULL;
    if (cx->trace->ops->emit)
        cx->trace->ops->emit(cx->trace, i, cx->visiting);
    return i;
}

IrInstr *
spmd_emit(SpmdCtx *cx, IrInstr *i, const char *name_hint)
{
    if (!i || !cx->comp)
        return NULL;
    if (i->name)
        return emit_as(cx, i, NO_BASE);
    return emit_as(cx, i, name_hint ? base_of(cx, sl_str(name_hint)) : base_of_op(cx, i->op));
}

/* ---- builders ---- */

static IrInstr *
emit_new(SpmdCtx *cx, IrOp op, const IrShape *shape, IrInstr *const *ops, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++)
        if (!ops[k])
            return NULL;
    return ir_instr_new(cx->out, op, shape, ops, n);
}

static bool
add_ints(SpmdCtx *cx, IrInstr *i, IrAttrKey key, const int64_t *v, uint32_t n)
{
    IrAttr *a = ir_instr_add_attr(cx->out, i, key);
    if (!a)
        return false;
    a->u.ints.n = n;
    a->u.ints.v = n ? SL_DUP_ARRAY(cx->arena, int64_t, v, n) : NULL;
    return n == 0 || a->u.ints.v;
}

static bool
add_int(SpmdCtx *cx, IrInstr *i, IrAttrKey key, int64_t v)
{
    IrAttr *a = ir_instr_add_attr(cx->out, i, key);
    if (!a)
        return false;
    a->u.i = v;
    return true;
}

IrInstr *
spmd_emit_op(SpmdCtx *cx, IrOp op, const IrShape *shape, IrInstr *const *ops, uint32_t n_ops)
{
    return spmd_emit(cx, emit_new(cx, op, shape, ops, n_ops), NULL);
}

static IrInstr *
emit_constant(SpmdCtx *cx, const IrShape *shape, const char *text, size_t len)
{
    IrInstr *i = ir_instr_new(cx->out, IR_OP_CONSTANT, shape, NULL, 0);
    if (!i)
        return NULL;
    char *lit = sl_arena_strndup(cx->arena, text, len);
    if (!lit)
        return NULL;
    i->literal.ptr = lit;
    i->literal.len = len;
    return spmd_emit(cx, i, NULL);
}

IrInstr *
spmd_emit_constant_literal(SpmdCtx *cx, IrDtype t, const char *literal)
{
    IrShape s = ir_shape_make(cx->arena, t, NULL, 0);
    return emit_constant(cx, &s, literal, strlen(literal));
}

IrInstr *
spmd_emit_constant_scalar(SpmdCtx *cx, IrDtype t, int64_t value)
{
    char buf[32];
    if (t == IR_DT_PRED)
        snprintf(buf, sizeof(buf), "%s", value ? "true" : "false");
    else
        snprintf(buf, sizeof(buf), "%lld", (long long)value);
    return spmd_emit_constant_literal(cx, t, buf);
}

static IrInstr *
constant_array(SpmdCtx *cx, IrDtype t, const int64_t *v, uint32_t n)
{
    SlBuf b;
    sl_buf_init(&b);
    sl_buf_putc(&b, '{');
    for (uint32_t k = 0; k < n; k++) {
        if (k)
            sl_buf_puts(&b, ", ");
        sl_buf_put_i64(&b, v[k]);
    }
    sl_buf_putc(&b, '}');
    int64_t d = n;
    IrShape s = ir_shape_make(cx->arena, t, &d, 1);
    IrInstr *r = b.failed ? NULL : emit_constant(cx, &s, b.data, b.len);
    sl_buf_fini(&b);
    return r;
}

IrInstr *
spmd_emit_constant_int_array(SpmdCtx *cx, IrDtype t, const int64_t *v, uint32_t n)
{
    return constant_array(cx, t, v, n);
}

IrInstr *
spmd_emit_constant_s32_array(SpmdCtx *cx, const int64_t *v, uint32_t n)
{
    return constant_array(cx, IR_DT_S32, v, n);
}

IrInstr *
spmd_emit_constant_u32_array(SpmdCtx *cx, const int64_t *v, uint32_t n)
{
    return constant_array(cx, IR_DT_U32, v, n);
}

IrInstr *
spmd_emit_broadcast(SpmdCtx *cx, IrInstr *x, const IrShape *shape, const int64_t *dims,
                    uint32_t n_dims)
{
    IrInstr *i = emit_new(cx, IR_OP_BROADCAST, shape, &x, 1);
    if (!i || !add_ints(cx, i, IR_ATTR_DIMENSIONS, dims, n_dims))
        return NULL;
    return spmd_emit(cx, i, NULL);
}

IrInstr *
spmd_emit_zero_like(SpmdCtx *cx, const IrShape *shape)
{
    IrInstr *z = spmd_emit_constant_scalar(cx, shape->dtype, 0);
    if (!z || shape->rank == 0)
        return z;
    IrShape s = ir_shape_clone(cx->arena, shape);
    return spmd_emit_broadcast(cx, z, &s, NULL, 0);
}

IrInstr *
spmd_emit_reshape(SpmdCtx *cx, IrInstr *x, const int64_t *dims, uint32_t rank)
{
    if (!x)
        return NULL;
    if (x->shape.rank == rank && (rank == 0 || !memcmp(x->shape.dims, dims, rank * sizeof(int64_t))))
        return x;
    IrShape s = ir_shape_make(cx->arena, x->shape.dtype, dims, rank);
    return spmd_emit_op(cx, IR_OP_RESHAPE, &s, &x, 1);
}

IrInstr *
spmd_emit_transpose(SpmdCtx *cx, IrInstr *x, const int64_t *perm)
{
    if (!x)
        return NULL;
    uint32_t r = x->shape.rank;
    bool ident = true;
    int64_t dims[64];
    if (r > SL_COUNTOF(dims))
        return NULL;
    for (uint32_t k = 0; k < r; k++) {
        ident = ident && perm[k] == (int64_t)k;
        dims[k] = x->shape.dims[perm[k]];
    }
    if (ident)
        return x;
    IrShape s = ir_shape_make(cx->arena, x->shape.dtype, dims, r);
    IrInstr *i = emit_new(cx, IR_OP_TRANSPOSE, &s, &x, 1);
    if (!i || !add_ints(cx, i, IR_ATTR_DIMENSIONS, perm, r))
        return NULL;
    return spmd_emit(cx, i, NULL);
}

IrInstr *
spmd_emit_slice(SpmdCtx *cx, IrInstr *x, const int64_t *start, const int64_t *limit)
{
    if (!x)
        return NULL;
    uint32_t r = x->shape.rank;
    bool ident = true;
    int64_t dims[64];
    if (r > SL_COUNTOF(dims))
        return NULL;
    for (uint32_t k = 0; k < r; k++) {
        ident = ident && start[k] == 0 && limit[k] == x->shape.dims[k];
        dims[k] = limit[k] - start[k];
    }
    if (ident)
        return x;
    IrShape s = ir_shape_make(cx->arena, x->shape.dtype, dims, r);
    IrInstr *i = emit_new(cx, IR_OP_SLICE, &s, &x, 1);
    IrAttr *a = i ? ir_instr_add_attr(cx->out, i, IR_ATTR_SLICE) : NULL;
    IrSliceDim *sd = SL_NEW_ARRAY(cx->arena, IrSliceDim, r ? r : 1);
    if (!a || !sd)
        return NULL;
    for (uint32_t k = 0; k < r; k++)
        sd[k] = (IrSliceDim){start[k], limit[k], 1};
    a->u.slice.n = r;
    a->u.slice.v = sd;
    return spmd_emit(cx, i, NULL);
}

IrInstr *
spmd_emit_slice_strided(SpmdCtx *cx, IrInstr *x, const int64_t *start, const int64_t *limit,
                        const int64_t *stride)
{
    if (!x)
        return NULL;
    uint32_t r = x->shape.rank;
    bool unit = true;
    int64_t dims[64];
    if (r > SL_COUNTOF(dims))
        return NULL;
    for (uint32_t k = 0; k < r; k++) {
        unit = unit && stride[k] == 1;
        dims[k] = stride[k] > 0 ? (limit[k] - start[k] + stride[k] - 1) / stride[k] : 0;
    }
    if (unit)
        return spmd_emit_slice(cx, x, start, limit);
    IrShape s = ir_shape_make(cx->arena, x->shape.dtype, dims, r);
    IrInstr *i = emit_new(cx, IR_OP_SLICE, &s, &x, 1);
    IrAttr *a = i ? ir_instr_add_attr(cx->out, i, IR_ATTR_SLICE) : NULL;
    IrSliceDim *sd = SL_NEW_ARRAY(cx->arena, IrSliceDim, r ? r : 1);
    if (!a || !sd)
        return NULL;
    for (uint32_t k = 0; k < r; k++)
        sd[k] = (IrSliceDim){start[k], limit[k], stride[k]};
    a->u.slice.n = r;
    a->u.slice.v = sd;
    return spmd_emit(cx, i, NULL);
}

IrInstr *
spmd_emit_concatenate(SpmdCtx *cx, IrInstr *const *ops, uint32_t n, int64_t dim)
{
    if (n == 0 || !ops[0])
        return NULL;
    if (n == 1)
        return ops[0];
    IrShape s = ir_shape_clone(cx->arena, &ops[0]->shape);
    for (uint32_t k = 1; k < n; k++) {
        if (!ops[k])
            return NULL;
        s.dims[dim] += ops[k]->shape.dims[dim];
    }
    IrInstr *i = emit_new(cx, IR_OP_CONCATENATE, &s, ops, n);
    if (!i || !add_ints(cx, i, IR_ATTR_DIMENSIONS, &dim, 1))
        return NULL;
    return spmd_emit(cx, i, NULL);
}

IrInstr *
spmd_emit_pad(SpmdCtx *cx, IrInstr *x, IrInstr *pad_value, const IrPadDim *pads)
{
    if (!x || !pad_value)
        return NULL;
    uint32_t r = x->shape.rank;
    bool ident = true;
    int64_t dims[64];
    if (r > SL_COUNTOF(dims))
        return NULL;
    for (uint32_t k = 0; k < r; k++) {
        ident = ident && !pads[k].lo && !pads[k].hi && !pads[k].interior;
        int64_t d = x->shape.dims[k];
        dims[k] = pads[k].lo + pads[k].hi + d + (d > 0 ? (d - 1) * pads[k].interior : 0);
    }
    if (ident)
        return x;
    IrShape s = ir_shape_make(cx->arena, x->shape.dtype, dims, r);
    IrInstr *ops[2] = {x, pad_value};
    IrInstr *i = emit_new(cx, IR_OP_PAD, &s, ops, 2);
    IrAttr *a = i ? ir_instr_add_attr(cx->out, i, IR_ATTR_PADDING) : NULL;
    IrPadDim *pd = r ? SL_DUP_ARRAY(cx->arena, IrPadDim, pads, r) : NULL;
    if (!a || (r && !pd))
        return NULL;
    a->u.pad.n = r;
    a->u.pad.v = pd;
    return spmd_emit(cx, i, NULL);
}

IrInstr *
spmd_emit_dynamic_slice(SpmdCtx *cx, IrInstr *x, IrInstr *const *offsets, const int64_t *sizes)
{
    if (!x)
        return NULL;
    uint32_t r = x->shape.rank;
    IrInstr *ops[65];
    if (r + 1 > SL_COUNTOF(ops))
        return NULL;
    bool ident = true;
    ops[0] = x;
    for (uint32_t k = 0; k < r; k++) {
        ops[k + 1] = offsets[k];
        ident = ident && sizes[k] == x->shape.dims[k];
    }
    if (ident)
        return x;
    IrShape s = ir_shape_make(cx->arena, x->shape.dtype, sizes, r);
    IrInstr *i = emit_new(cx, IR_OP_DYNAMIC_SLICE, &s, ops, r + 1);
    if (!i || !add_ints(cx, i, IR_ATTR_DYNAMIC_SLICE_SIZES, sizes, r))
        return NULL;
    return spmd_emit(cx, i, NULL);
}

IrInstr *
spmd_emit_dus(SpmdCtx *cx, IrInstr *x, IrInstr *update, IrInstr *const *offsets)
{
    if (!x || !update)
        return NULL;
    uint32_t r = x->shape.rank;
    IrInstr *ops[66];
    if (r + 2 > SL_COUNTOF(ops))
        return NULL;
    ops[0] = x;
    ops[1] = update;
    for (uint32_t k = 0; k < r; k++)
        ops[k + 2] = offsets[k];
    IrShape s = ir_shape_clone(cx->arena, &x->shape);
    return spmd_emit_op(cx, IR_OP_DYNAMIC_UPDATE_SLICE, &s, ops, r + 2);
}

IrInstr *
spmd_emit_binary(SpmdCtx *cx, IrOp op, IrInstr *a, IrInstr *b)
{
    if (!a || !b)
        return NULL;
    IrShape s = ir_shape_clone(cx->arena, &a->shape);
    IrInstr *ops[2] = {a, b};
    return spmd_emit_op(cx, op, &s, ops, 2);
}

IrInstr *
spmd_emit_compare(SpmdCtx *cx, IrInstr *a, IrInstr *b, const char *direction)
{
    if (!a || !b)
        return NULL;
    IrShape s = ir_shape_make(cx->arena, IR_DT_PRED, a->shape.dims, a->shape.rank);
    IrInstr *ops[2] = {a, b};
    IrInstr *i = emit_new(cx, IR_OP_COMPARE, &s, ops, 2);
    IrAttr *at = i ? ir_instr_add_attr(cx->out, i, IR_ATTR_DIRECTION) : NULL;
    if (!at)
        return NULL;
    at->u.text = sl_str(direction);
    return spmd_emit(cx, i, NULL);
}

IrInstr *
spmd_emit_select(SpmdCtx *cx, IrInstr *pred, IrInstr *t, IrInstr *f)
{
    if (!pred || !t || !f)
        return NULL;
    IrShape s = ir_shape_clone(cx->arena, &t->shape);
    IrInstr *ops[3] = {pred, t, f};
    return spmd_emit_op(cx, IR_OP_SELECT, &s, ops, 3);
}

IrInstr *
spmd_emit_convert(SpmdCtx *cx, IrInstr *x, IrDtype t)
{
    if (!x)
        return NULL;
    if (x->shape.dtype == t)
        return x;
    IrShape s = ir_shape_make(cx->arena, t, x->shape.dims, x->shape.rank);
    return spmd_emit_op(cx, IR_OP_CONVERT, &s, &x, 1);
}

IrInstr *
spmd_emit_iota(SpmdCtx *cx, const IrShape *shape, int64_t dim)
{
    IrShape s = ir_shape_clone(cx->arena, shape);
    IrInstr *i = ir_instr_new(cx->out, IR_OP_IOTA, &s, NULL, 0);
    if (!i || !add_int(cx, i, IR_ATTR_IOTA_DIMENSION, dim))
        return NULL;
    return spmd_emit(cx, i, NULL);
}

IrInstr *
spmd_emit_copy(SpmdCtx *cx, IrInstr *x)
{
    if (!x)
        return NULL;
    IrShape s = ir_shape_clone(cx->arena, &x->shape);
    return spmd_emit_op(cx, IR_OP_COPY, &s, &x, 1);
}

IrInstr *
spmd_emit_gte(SpmdCtx *cx, IrInstr *tuple, int64_t index)
{
    if (!tuple || index < 0 || (uint32_t)index >= tuple->shape.n_elems)
        return NULL;
    IrShape s = tuple->shape.elems[index];
    IrInstr *i = emit_new(cx, IR_OP_GET_TUPLE_ELEMENT, &s, &tuple, 1);
    if (!i || !add_int(cx, i, IR_ATTR_INDEX, index))
        return NULL;
    return spmd_emit(cx, i, NULL);
}

IrInstr *
spmd_emit_tuple(SpmdCtx *cx, IrInstr *const *elems, uint32_t n)
{
    IrShape s = {0};
    s.dtype = IR_DT_TUPLE;
    s.n_elems = n;
    s.elems = SL_NEW_ARRAY(cx->arena, IrShape, n ? n : 1);
    if (!s.elems)
        return NULL;
    for (uint32_t k = 0; k < n; k++) {
        if (!elems[k])
            return NULL;
        s.elems[k] = elems[k]->shape;
    }
    return spmd_emit_op(cx, IR_OP_TUPLE, &s, elems, n);
}

/* ---- cloning ---- */

/* Copies `src`'s attributes (except sharding) onto `dst`, mapping called computations. */
static bool
copy_attrs(SpmdCtx *cx, const IrInstr *src, IrInstr *dst)
{
    /* one array of the exact size (growing by doubling from 4 cost a sixth of the output
     * arena); payloads (metadata, ints, text) are shared with the source, never copied */
    uint32_t n = 0;
    for (uint32_t k = 0; k < src->n_attrs; k++)
        n += src->attrs[k].key != IR_ATTR_SHARDING;
    if (n && !ir_instr_reserve_attrs(cx->out, dst, n))
        return false;
    for (uint32_t k = 0; k < src->n_attrs; k++) {
        const IrAttr *sa = &src->attrs[k];
        if (sa->key == IR_ATTR_SHARDING)
            continue;
        IrAttr *a = ir_instr_add_attr(cx->out, dst, sa->key);
        if (!a)
            return false;
        *a = *sa;
        IrAttrKind kind = sa->key == IR_ATTR_OTHER ? IR_AK_RAW : ir_attr_kind(sa->key);
        if (kind == IR_AK_COMP && sa->u.comp) {
            a->u.comp = spmd_output_computation(cx, sa->u.comp);
            if (!a->u.comp)
                return false;
        } else if (kind == IR_AK_COMPS && sa->u.comps.n) {
            IrComputation **v = SL_NEW_ARRAY(cx->arena, IrComputation *, sa->u.comps.n);
            if (!v)
                return false;
            for (uint32_t c = 0; c < sa->u.comps.n; c++)
                if (!(v[c] = spmd_output_computation(cx, sa->u.comps.v[c])))
                    return false;
            a->u.comps.v = v;
        }
    }
    return true;
}

IrInstr *
spmd_emit_clone(SpmdCtx *cx, const IrInstr *src, const IrShape *shape, IrInstr *const *ops,
                uint32_t n_ops)
{
    IrInstr *i = emit_new(cx, src->op, shape, ops, n_ops);
    if (!i)
        return NULL;
    i->parameter_number = src->parameter_number;
    i->literal = src->literal;
    if (!copy_attrs(cx, src, i) || !cx->comp)
        return NULL;
    return emit_as(cx, i, base_of_src(cx, src));
}

/* A verbatim copy of a (reduction/comparator) computation, with unique names. */
static IrComputation *
copy_computation(SpmdCtx *cx, const IrComputation *c)
{
    SlSym name = spmd_unique_name(cx, sl_sym_str(c->name));
    IrComputation *oc = name ? ir_computation_new(cx->out, name) : NULL;
    if (!oc)
        return NULL;
    oc->execution_thread = c->execution_thread;
    sl_map_put(&cx->comp_map, SL_MAP_KEY(c), SL_MAP_KEY(oc));
    SlMap local;
    sl_map_init(&local);
    bool ok = true;
    for (uint32_t k = 0; k < c->n_instrs && ok; k++) {
        const IrInstr *s = c->instrs[k];
        IrInstr *ops[16], **opv = ops;
        if (s->n_operands > SL_COUNTOF(ops))
            opv = SL_NEW_ARRAY(cx->arena, IrInstr *, s->n_operands);
        ok = opv != NULL;
        for (uint32_t o = 0; ok && o < s->n_operands; o++) {
            uint64_t v = 0;
            ok = sl_map_get(&local, SL_MAP_KEY(s->operands[o]), &v);
            opv[o] = (IrInstr *)(uintptr_t)v;
        }
        IrShape sh = s->shape;
        IrInstr *i = ok ? ir_instr_new(cx->out, s->op, &sh, opv, s->n_operands) : NULL;
        ok = i && copy_attrs(cx, s, i);
        if (!ok)
            break;
        i->parameter_number = s->parameter_number;
        i->literal = s->literal;
        i->derived_from = s;
        i->name = take_name(cx, base_of_src(cx, s));
        ok = i->name && ir_computation_add_instr(oc, cx->out, i) == SL_OK &&
             sl_map_put(&local, SL_MAP_KEY(s), SL_MAP_KEY(i));
        if (ok && s == c->root)
            oc->root = i;
    }
    sl_map_fini(&local);
    if (!ok || ir_module_add_computation(cx->out, oc) != SL_OK)
        return NULL;
    return oc;
}

IrComputation *
spmd_output_computation(SpmdCtx *cx, const IrComputation *c)
{
    uint64_t v = 0;
    if (sl_map_get(&cx->comp_map, SL_MAP_KEY(c), &v))
        return (IrComputation *)(uintptr_t)v;
    return copy_computation(cx, c);
}

static const struct {
    IrOp op;
    const char *name;
} k_reducers[SPMD_RED_COUNT] = {
    [SPMD_RED_ADD] = {IR_OP_ADD, "add"},
    [SPMD_RED_MAX] = {IR_OP_MAXIMUM, "maximum"},
    [SPMD_RED_MIN] = {IR_OP_MINIMUM, "minimum"},
    [SPMD_RED_AND] = {IR_OP_AND, "and"},
    [SPMD_RED_OR] = {IR_OP_OR, "or"},
};

IrComputation *
spmd_reducer(SpmdCtx *cx, SpmdRedKind kind, IrDtype t)
{
    if ((unsigned)kind >= SPMD_RED_COUNT || (unsigned)t >= IR_DT_COUNT)
        return NULL;
    if (kind == SPMD_RED_ADD && t == IR_DT_PRED)
        kind = SPMD_RED_OR;
    if (cx->reducers[kind][t])
        return cx->reducers[kind][t];
    char base[64];
    snprintf(base, sizeof(base), "%s.clone", k_reducers[kind].name);
    SlSym name = spmd_unique_name(cx, sl_str(base));
    IrComputation *c = name ? ir_computation_new(cx->out, name) : NULL;
    if (!c)
        return NULL;
    IrShape s = ir_shape_make(cx->arena, t, NULL, 0);
    IrInstr *x = ir_instr_new(cx->out, IR_OP_PARAMETER, &s, NULL, 0);
    IrInstr *y = ir_instr_new(cx->out, IR_OP_PARAMETER, &s, NULL, 0);
    if (!x || !y)
        return NULL;
    x->parameter_number = 0;
    y->parameter_number = 1;
    x->name = spmd_unique_name(cx, sl_str("x"));
    y->name = spmd_unique_name(cx, sl_str("y"));
    IrInstr *ops[2] = {x, y};
    IrInstr *r = ir_instr_new(cx->out, k_reducers[kind].op, &s, ops, 2);
    if (!r || !x->name || !y->name)
        return NULL;
    r->name = spmd_unique_name(cx, sl_str(k_reducers[kind].name));
    if (!r->name || ir_computation_add_instr(c, cx->out, x) != SL_OK ||
        ir_computation_add_instr(c, cx->out, y) != SL_OK ||
        ir_computation_add_instr(c, cx->out, r) != SL_OK)
        return NULL;
    c->root = r;
    if (ir_module_add_computation(cx->out, c) != SL_OK)
        return NULL;
    /* The body derives from the instruction that first needed it (later users share it), and
     * is reported like every emitted instruction, so trace rows always have a source. */
    for (uint32_t k = 0; k < c->n_instrs; k++) {
        c->instrs[k]->derived_from = cx->visiting;
        if (cx->trace->ops->emit)
            cx->trace->ops->emit(cx->trace, c->instrs[k], cx->visiting);
    }
    cx->reducers[kind][t] = c;
    return c;
}

bool
spmd_set_sharding_attr(SpmdCtx *cx, IrInstr *i, const ShdSharding *s)
{
    IrAttr *a = ir_instr_find_attr_mut(i, IR_ATTR_SHARDING);
    if (!a && !(a = ir_instr_add_attr(cx->out, i, IR_ATTR_SHARDING)))
        return false;
    a->u.sharding = s;
    ir_instr_place_sharding(i, a);
    return true;
}
