/* handle_feed.c - infeeds and outfeeds (gspmd.md D.0; upstream HandleInfeed/HandleOutfeed).
 * Owns: the even tiled infeed (each device receives its own tile: the infeed has the shard
 * shape), the per-partition unpadded shapes of an uneven one, grouping partitions with the
 * same shape into branches, and the conditional whose branch k runs the infeed with branch
 * k's shape and pads it to the shard shape; the same for outfeeds. Does not own: replicated,
 * manual and single-device infeeds (spmd_handle_default), the token (its producer's value).
 * Invariants: nothing is emitted before the shapes are known to be supported; emission only
 * through spmd_emit() and the builders. */
#include "spmd/spmd_int.h"

#include <stdio.h>
#include <string.h>

#define FEED_MAX_LEAVES 64

/* MakeNonPaddedShapeForGivenPartition over the leaves of `shape` from *leaf on. */
static bool
part_shape(SpmdCtx *cx, const IrShape *shape, const ShdSharding *s, uint32_t *leaf, int64_t dev,
           IrShape *out)
{
    if (shape->dtype == IR_DT_TUPLE) {
        *out = ir_shape_clone(cx->arena, shape);
        for (uint32_t k = 0; k < shape->n_elems; k++)
            if (!part_shape(cx, &shape->elems[k], s, leaf, dev, &out->elems[k]))
                return false;
        return true;
    }
    const ShdSharding *l = shd_leaf(s, (*leaf)++);
    int64_t owner = -1;
    *out = ir_shape_clone(cx->arena, shape);
    if (!l || shd_is_replicated(l) || !ir_shape_is_array(shape))
        return l != NULL;
    if (shd_unique_device(l, &owner)) {
        if (owner != dev)
            *out = ir_shape_make(cx->arena, IR_DT_TUPLE, NULL, 0);
        return true;
    }
    if (!shd_is_tiled(l) || shd_data_rank(l) != shape->rank)
        return false;
    for (uint32_t d = 0; d < shape->rank; d++)
        out->dims[d] = shd_tile_extent(l, shape, d, dev);
    return true;
}

/* Branch k's infeed element padded to the shard shape `want` (PadToShape / CreateZero). */
static IrInstr *
pad_to(SpmdCtx *cx, IrInstr *x, const IrShape *want)
{
    if (!x || ir_shape_equal(&x->shape, want, false))
        return x;
    if (want->dtype == IR_DT_TUPLE) {
        IrInstr *el[FEED_MAX_LEAVES];
        if (want->n_elems > FEED_MAX_LEAVES)
            return NULL;
        bool empty = x->shape.dtype == IR_DT_TUPLE && x->shape.n_elems == 0;
        for (uint32_t k = 0; k < want->n_elems; k++) {
            IrInstr *g = empty ? NULL : spmd_emit_gte(cx, x, k);
            el[k] = empty ? pad_to(cx, spmd_emit_zero_like(cx, &want->elems[k]), &want->elems[k])
                          : pad_to(cx, g, &want->elems[k]);
            if (!el[k])
                return NULL;
        }
        return spmd_emit_tuple(cx, el, want->n_elems);
    }
    if (x->shape.dtype == IR_DT_TUPLE)
        return spmd_emit_zero_like(cx, want);
    IrPadDim pads[SPMD_MAX_RANK];
    for (uint32_t d = 0; d < want->rank && d < SPMD_MAX_RANK; d++)
        pads[d] = (IrPadDim){0, want->dims[d] - x->shape.dims[d], 0};
    return spmd_emit_pad(cx, x, spmd_emit_constant_scalar(cx, want->dtype, 0), pads);
}

/* Starts conditional branch `k` of an infeed or outfeed (`what`): a new computation
 * "<what>_branch_k" whose parameter 0 has `param_shape`, made the current computation (the
 * caller restores cx->comp). The emitted parameter goes to *param; NULL when out of memory. */
static IrComputation *
open_branch(SpmdCtx *cx, const char *what, uint32_t k, const IrShape *param_shape,
            IrInstr **param)
{
    char name[48], reason[48];
    snprintf(name, sizeof(name), "%s_branch_%u", what, k);
    snprintf(reason, sizeof(reason), "%s_token_param", what);
    SlSym nm = spmd_unique_name(cx, sl_str(name));
    IrComputation *c = nm ? ir_computation_new(cx->out, nm) : NULL;
    IrShape ps = ir_shape_clone(cx->arena, param_shape);
    IrInstr *pi = c ? ir_instr_new(cx->out, IR_OP_PARAMETER, &ps, NULL, 0) : NULL;
    if (!pi)
        return NULL;
    pi->parameter_number = 0;
    cx->comp = c;
    *param = spmd_emit(cx, pi, reason);
    return c;
}

/* One branch: parameter token, infeed with `shape`, data padded to `shard`. */
static IrComputation *
branch(SpmdCtx *cx, const IrInstr *hlo, const IrShape *shape, const IrShape *shard,
       const IrShape *token, uint32_t k)
{
    IrComputation *saved = cx->comp;
    IrInstr *param;
    IrComputation *c = open_branch(cx, "infeed", k, token, &param);
    if (!c)
        return NULL;
    IrInstr *els[2] = {param, NULL};
    IrShape ts = ir_shape_clone(cx->arena, &hlo->shape);
    ts.elems[0] = ir_shape_clone(cx->arena, shape);
    IrInstr *inf = param ? spmd_emit_clone(cx, hlo, &ts, els, 1) : NULL;
    IrInstr *root = inf;
    if (inf && !ir_shape_equal(shape, shard, false)) {
        els[0] = pad_to(cx, spmd_emit_gte(cx, inf, 0), shard);
        els[1] = els[0] ? spmd_emit_gte(cx, inf, 1) : NULL;
        root = els[1] ? spmd_emit_tuple(cx, els, 2) : NULL;
    }
    cx->comp = saved;
    if (!root)
        return NULL;
    c->root = root;
    return ir_module_add_computation(cx->out, c) == SL_OK ? c : NULL;
}

/* Partition -> branch index (shapes numbered by first appearance); NULL when unsupported. */
static IrShape *
branch_shapes(SpmdCtx *cx, const IrShape *data, const ShdSharding *s, int64_t *index,
              uint32_t *n_branches)
{
    int64_t n = cx->state->num_partitions;
    IrShape *shapes = SL_NEW_ARRAY(cx->arena, IrShape, n);
    uint32_t nb = 0;
    for (int64_t p = 0; shapes && p < n; p++) {
        uint32_t leaf = 0, k = 0;
        IrShape ps;
        if (!part_shape(cx, data, s, &leaf, p, &ps))
            return NULL;
        while (k < nb && !ir_shape_equal(&shapes[k], &ps, false))
            k++;
        if (k == nb)
            shapes[nb++] = ps;
        index[p] = k;
    }
    *n_branches = nb;
    return shapes;
}

/* The infeed's data splits evenly and some data leaf is tiled (none manual): the case where
 * each device's infeed has the shard shape. Leaves are counted as part_shape() counts them. */
static bool
even_tiled_data(const ShdSharding *s, const IrShape *data)
{
    bool tiled = false;
    for (uint32_t k = 0, n = ir_shape_leaf_count(data); k < n; k++) {
        const ShdSharding *l = shd_leaf(s, k);
        if (!l || shd_is_manual(l))
            return false;
        if (!shd_is_tiled(l))
            continue;
        if (!shd_evenly_partitions(l, ir_shape_leaf(data, k)))
            return false;
        tiled = true;
    }
    return tiled;
}

/* Even split: one infeed with the shard shape, so each device receives its own tile from the
 * host (no full-shape infeed sliced afterwards). */
static SlStatus
emit_even_infeed(SpmdCtx *cx, const IrInstr *hlo, const ShdSharding *s, SlError *err)
{
    const SpmdValue *tok = spmd_get_value(cx, hlo->operands[0]);
    if (!tok)
        return spmd_nomem(cx, err);
    IrShape shard = shd_tile_shape(cx->arena, &hlo->shape, s);
    IrInstr *op = tok->hlo;
    IrInstr *r = spmd_emit_clone(cx, hlo, &shard, &op, 1);
    if (!r)
        return spmd_nomem(cx, err);
    if (cx->trace->ops->decision) {
        TraceDecision d = {hlo, "infeed", "shard-shape",
                           "data splits evenly: each device receives its own tile", NULL, 0,
                           NULL, 0};
        cx->trace->ops->decision(cx->trace, &d);
    }
    return spmd_finish(cx, hlo, r, s, err);
}

static SlStatus
handle_infeed(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    int64_t dev = -1, n = cx->state->num_partitions;
    const IrShape *data = hlo->shape.n_elems == 2 ? &hlo->shape.elems[0] : NULL;
    if (!data || cx->state->n_groups || n < 1 || shd_unique_device(s, &dev) ||
        ir_shape_leaf_count(data) == 0 || s->kind != SHD_TUPLE || hlo->n_operands != 1 ||
        shd_evenly_partitions(s, &hlo->shape))
        return spmd_handle_default(cx, hlo, err);
    if (even_tiled_data(s, data))
        return emit_even_infeed(cx, hlo, s, err);
    int64_t *index = SL_NEW_ARRAY(cx->arena, int64_t, n);
    uint32_t nb = 0;
    IrShape *shapes = index ? branch_shapes(cx, data, s, index, &nb) : NULL;
    if (!shapes || nb < 2)
        return spmd_handle_default(cx, hlo, err);
    const SpmdValue *tok = spmd_get_value(cx, hlo->operands[0]);
    IrShape shard = shd_tile_shape(cx->arena, &hlo->shape, s);
    IrComputation **br = SL_NEW_ARRAY(cx->arena, IrComputation *, nb);
    IrInstr **ops = SL_NEW_ARRAY(cx->arena, IrInstr *, nb + 1);
    if (!tok || !br || !ops)
        return spmd_nomem(cx, err);
    for (uint32_t k = 0; k < nb; k++)
        if (!(br[k] = branch(cx, hlo, &shapes[k], &shard.elems[0], &tok->hlo->shape, k)))
            return spmd_nomem(cx, err);
    ops[0] = nb == (uint32_t)n
                 ? spmd_emit_convert(cx, spmd_partition_id(cx, cx->state), IR_DT_S32)
                 : spmd_table_lookup(cx, cx->state, index, n, IR_DT_S32);
    for (uint32_t k = 0; k < nb; k++)
        ops[k + 1] = tok->hlo;
    IrInstr *c = ops[0] ? ir_instr_new(cx->out, IR_OP_CONDITIONAL, &shard, ops, nb + 1) : NULL;
    IrAttr *a = c ? ir_instr_add_attr(cx->out, c, IR_ATTR_BRANCH_COMPUTATIONS) : NULL;
    if (!a)
        return spmd_nomem(cx, err);
    a->u.comps.n = nb;
    a->u.comps.v = br;
    IrInstr *r = spmd_emit(cx, c, NULL);
    return r ? spmd_finish(cx, hlo, r, s, err) : spmd_nomem(cx, err);
}

/* ---- outfeed ---- */

static IrAttr *
outfeed_shape_attr(IrInstr *i)
{
    for (uint32_t k = 0; i && k < i->n_attrs; k++) {
        IrAttr *a = &i->attrs[k];
        if (a->key == IR_ATTR_OTHER && a->u.other.key &&
            !strcmp(sl_sym_cstr(a->u.other.key), "outfeed_shape"))
            return a;
    }
    return NULL;
}

/* The layout text ("{0,1}") of leaf `*leaf` in the original outfeed_shape text, or none. */
static SlStr
leaf_layout(SlStr text, uint32_t leaf)
{
    uint32_t seen = 0;
    for (size_t p = 0; p < text.len; p++) {
        if (text.ptr[p] != ']')
            continue;
        size_t q = p + 1;
        if (seen++ != leaf)
            continue;
        if (q < text.len && text.ptr[q] == '{') {
            size_t e = q;
            while (e < text.len && text.ptr[e] != '}')
                e++;
            return (SlStr){text.ptr + q, e < text.len ? e - q + 1 : 0};
        }
        break;
    }
    return (SlStr){"", 0};
}

/* Prints `s` the way outfeed_shape spells it, layouts copied leaf by leaf from `orig`. */
static void
print_feed_shape(SlBuf *b, const IrShape *s, SlStr orig, uint32_t *leaf)
{
    if (s->dtype == IR_DT_TUPLE) {
        sl_buf_putc(b, '(');
        for (uint32_t k = 0; k < s->n_elems; k++) {
            if (k)
                sl_buf_puts(b, ", ");
            print_feed_shape(b, &s->elems[k], orig, leaf);
        }
        sl_buf_putc(b, ')');
        if (s->n_elems == 0)
            (*leaf)++;
        return;
    }
    sl_buf_puts(b, ir_dtype_name(s->dtype));
    sl_buf_putc(b, '[');
    for (uint32_t d = 0; d < s->rank; d++)
        sl_buf_printf(b, d ? ",%lld" : "%lld", (long long)s->dims[d]);
    sl_buf_putc(b, ']');
    SlStr l = leaf_layout(orig, (*leaf)++);
    sl_buf_append(b, l.ptr, l.len);
}

/* Rewrites the clone's outfeed_shape for `s` (kept verbatim when absent or unprintable). */
static bool
set_outfeed_shape(SpmdCtx *cx, IrInstr *of, const IrShape *s)
{
    IrAttr *a = outfeed_shape_attr(of);
    if (!a)
        return of != NULL;
    SlBuf b;
    uint32_t leaf = 0;
    sl_buf_init(&b);
    print_feed_shape(&b, s, a->u.text, &leaf);
    char *t = b.failed ? NULL : sl_arena_strndup(cx->arena, b.data, b.len);
    size_t n = b.len;
    sl_buf_fini(&b);
    if (!t)
        return false;
    a->u.text = (SlStr){t, n};
    return true;
}

/* The leading part of `x` of shape `want` (a slice per array leaf, tuples rebuilt). */
static IrInstr *
slice_to(SpmdCtx *cx, IrInstr *x, const IrShape *want)
{
    if (!x || ir_shape_equal(&x->shape, want, false))
        return x;
    if (want->dtype == IR_DT_TUPLE) {
        IrInstr *el[FEED_MAX_LEAVES];
        if (want->n_elems > FEED_MAX_LEAVES || x->shape.dtype != IR_DT_TUPLE)
            return x;
        if (want->n_elems == 0)
            return x;
        for (uint32_t k = 0; k < want->n_elems; k++)
            if (!(el[k] = slice_to(cx, spmd_emit_gte(cx, x, k), &want->elems[k])))
                return NULL;
        return spmd_emit_tuple(cx, el, want->n_elems);
    }
    int64_t lo[SPMD_MAX_RANK] = {0};
    return spmd_emit_slice(cx, x, lo, want->dims);
}

/* Outfeed branch `k`: parameter (data, token), data sliced to `shape`, outfeed. */
static IrComputation *
outfeed_branch(SpmdCtx *cx, const IrInstr *hlo, const IrShape *shape, const IrShape *pshape,
               uint32_t k)
{
    IrComputation *saved = cx->comp;
    IrInstr *param;
    IrComputation *c = open_branch(cx, "outfeed", k, pshape, &param);
    if (!c)
        return NULL;
    IrInstr *ops[2] = {param ? spmd_emit_gte(cx, param, 0) : NULL,
                       param ? spmd_emit_gte(cx, param, 1) : NULL};
    ops[0] = ops[0] ? slice_to(cx, ops[0], shape) : NULL;
    IrInstr *of = ops[0] && ops[1] ? spmd_emit_clone(cx, hlo, &hlo->shape, ops, 2) : NULL;
    cx->comp = saved;
    if (!of || !set_outfeed_shape(cx, of, shape))
        return NULL;
    c->root = of;
    return ir_module_add_computation(cx->out, c) == SL_OK ? c : NULL;
}

/* The operand's sharding: the outfeed's without its token leaf. */
static const ShdSharding *
outfeed_data_sharding(SpmdCtx *cx, const IrInstr *hlo)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    const IrShape *shape = &hlo->operands[0]->shape;
    uint32_t need = ir_shape_leaf_count(shape);
    if (s->kind != SHD_TUPLE || s->n_leaves != need + 1)
        return s;
    if (shape->dtype != IR_DT_TUPLE)
        return shd_leaf(s, 0);
    return shd_tuple(cx->arena, s->leaves, need);
}

static SlStatus
emit_outfeed_conditional(SpmdCtx *cx, const IrInstr *hlo, const ShdSharding *os,
                         const SpmdValue *v, IrInstr *tok, SlError *err)
{
    int64_t n = cx->state->num_partitions, *index = SL_NEW_ARRAY(cx->arena, int64_t, n);
    uint32_t nb = 0;
    IrShape *shapes = index ? branch_shapes(cx, v->base_shape, os, index, &nb) : NULL;
    IrComputation **br = SL_NEW_ARRAY(cx->arena, IrComputation *, nb ? nb : 1);
    IrInstr **ops = SL_NEW_ARRAY(cx->arena, IrInstr *, nb + 1);
    IrInstr *pair[2] = {v->hlo, tok};
    IrInstr *arg = shapes && br && ops ? spmd_emit_tuple(cx, pair, 2) : NULL;
    if (!arg)
        return spmd_nomem(cx, err);
    for (uint32_t k = 0; k < nb; k++)
        if (!(br[k] = outfeed_branch(cx, hlo, &shapes[k], &arg->shape, k)))
            return spmd_nomem(cx, err);
    ops[0] = nb == (uint32_t)n
                 ? spmd_emit_convert(cx, spmd_partition_id(cx, cx->state), IR_DT_S32)
                 : spmd_table_lookup(cx, cx->state, index, n, IR_DT_S32);
    for (uint32_t k = 0; k < nb; k++)
        ops[k + 1] = arg;
    IrInstr *c = ops[0] ? ir_instr_new(cx->out, IR_OP_CONDITIONAL, &hlo->shape, ops, nb + 1)
                        : NULL;
    IrAttr *a = c ? ir_instr_add_attr(cx->out, c, IR_ATTR_BRANCH_COMPUTATIONS) : NULL;
    if (!a)
        return spmd_nomem(cx, err);
    a->u.comps.n = nb;
    a->u.comps.v = br;
    IrInstr *r = spmd_emit(cx, c, NULL);
    return r ? spmd_finish(cx, hlo, r, spmd_sharding_of(cx, hlo), err) : spmd_nomem(cx, err);
}

/* HandleOutfeed: the data resharded to the outfeed's sharding; an even split outfeeds the
 * local shard, an uneven one runs one branch per local shape, each slicing off its padding. */
static SlStatus
handle_outfeed(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    int64_t dev = -1;
    if (hlo->n_operands != 2 || shd_unique_device(s, &dev) || shd_is_manual(s) ||
        cx->state->n_groups)
        return spmd_handle_default(cx, hlo, err);
    const ShdSharding *os = outfeed_data_sharding(cx, hlo);
    const SpmdValue *tv = spmd_get_value(cx, hlo->operands[1]);
    SpmdValue v;
    if (!os || !tv)
        return spmd_nomem(cx, err);
    SlStatus st = spmd_operand(cx, hlo, 0, os, &v, err);
    if (st != SL_OK)
        return st;
    if (!shd_evenly_partitions(os, v.base_shape))
        return emit_outfeed_conditional(cx, hlo, os, &v, tv->hlo, err);
    IrInstr *ops[2] = {v.hlo, tv->hlo};
    IrInstr *of = spmd_emit_clone(cx, hlo, &hlo->shape, ops, 2);
    if (!of || !set_outfeed_shape(cx, of, &v.hlo->shape))
        return spmd_nomem(cx, err);
    return spmd_finish(cx, hlo, of, s, err);
}

/* ---- single-device feeds (D.0) ----
 * An infeed or outfeed with a maximal sharding happens on its device only: the operands are
 * resharded to that device, and the op runs in the true branch of a conditional on
 * partition-id == device; the false branch returns zeros (a new token for a token), as
 * upstream's HandleSingleDevice does. */

static IrInstr *
zero_of(SpmdCtx *cx, const IrShape *shape)
{
    if (shape->dtype == IR_DT_TOKEN) {
        IrShape t = ir_shape_clone(cx->arena, shape);
        return spmd_emit_op(cx, IR_OP_AFTER_ALL, &t, NULL, 0);
    }
    if (shape->dtype != IR_DT_TUPLE)
        return spmd_emit_zero_like(cx, shape);
    IrInstr **el = SL_NEW_ARRAY(cx->arena, IrInstr *, shape->n_elems ? shape->n_elems : 1);
    for (uint32_t k = 0; el && k < shape->n_elems; k++)
        if (!(el[k] = zero_of(cx, &shape->elems[k])))
            return NULL;
    return el ? spmd_emit_tuple(cx, el, shape->n_elems) : NULL;
}

/* One branch of the single-device conditional: the op on the unpacked operands (`run`), or
 * zeros of its shape. */
static IrComputation *
single_device_branch(SpmdCtx *cx, const IrInstr *hlo, const IrShape *pshape, bool run,
                     uint32_t n_ops)
{
    IrComputation *saved = cx->comp;
    IrInstr *param;
    IrComputation *c = open_branch(cx, run ? "on_device" : "off_device", 0, pshape, &param);
    if (!c)
        return NULL;
    IrInstr *root = NULL;
    if (param && run) {
        IrInstr **ops = SL_NEW_ARRAY(cx->arena, IrInstr *, n_ops ? n_ops : 1);
        bool ok = ops != NULL;
        for (uint32_t k = 0; ok && k < n_ops; k++)
            ok = (ops[k] = spmd_emit_gte(cx, param, k)) != NULL;
        root = ok ? spmd_emit_clone(cx, hlo, &hlo->shape, ops, n_ops) : NULL;
    } else if (param) {
        root = zero_of(cx, &hlo->shape);
    }
    cx->comp = saved;
    if (!root)
        return NULL;
    c->root = root;
    return ir_module_add_computation(cx->out, c) == SL_OK ? c : NULL;
}

static SlStatus
single_device_feed(SpmdCtx *cx, const IrInstr *hlo, int64_t dev, SlError *err)
{
    const ShdSharding *on = shd_maximal(cx->arena, dev);
    uint32_t n = hlo->n_operands;
    IrInstr **ops = SL_NEW_ARRAY(cx->arena, IrInstr *, n ? n : 1);
    if (!on || !ops)
        return spmd_nomem(cx, err);
    for (uint32_t i = 0; i < n; i++) {
        SpmdValue v;
        SlStatus st = spmd_operand(cx, hlo, i, on, &v, err);
        if (st != SL_OK)
            return st;
        ops[i] = v.hlo;
    }
    IrInstr *arg = spmd_emit_tuple(cx, ops, n);
    IrComputation *t = arg ? single_device_branch(cx, hlo, &arg->shape, true, n) : NULL;
    IrComputation *f = t ? single_device_branch(cx, hlo, &arg->shape, false, n) : NULL;
    IrInstr *pid = f ? spmd_partition_id(cx, cx->state) : NULL;
    IrInstr *pred =
        pid ? spmd_emit_compare(cx, pid, spmd_emit_constant_scalar(cx, pid->shape.dtype, dev),
                                "EQ")
            : NULL;
    IrInstr *cops[3] = {pred, arg, arg};
    IrInstr *c = pred ? ir_instr_new(cx->out, IR_OP_CONDITIONAL, &hlo->shape, cops, 3) : NULL;
    IrAttr *ta = c ? ir_instr_add_attr(cx->out, c, IR_ATTR_TRUE_COMPUTATION) : NULL;
    IrAttr *fa = ta ? ir_instr_add_attr(cx->out, c, IR_ATTR_FALSE_COMPUTATION) : NULL;
    if (!fa)
        return spmd_nomem(cx, err);
    ta->u.comp = t;
    fa->u.comp = f;
    if (cx->trace->ops->decision) {
        TraceDecision d = {hlo, ir_op_name(hlo->op), "single-device",
                           "maximal sharding: runs on its device only, in a conditional on "
                           "partition-id",
                           NULL, 0, NULL, 0};
        cx->trace->ops->decision(cx->trace, &d);
    }
    IrInstr *r = spmd_emit(cx, c, NULL);
    return r ? spmd_finish(cx, hlo, r, spmd_sharding_of(cx, hlo), err) : spmd_nomem(cx, err);
}

/* The side-effect family: uneven infeeds here, the rest replicated (with the driver's warning
 * for a family without a handler). */
SlStatus
spmd_handle_side_effect(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    int64_t dev = -1;
    if ((hlo->op == IR_OP_INFEED || hlo->op == IR_OP_OUTFEED) && !cx->state->n_groups &&
        shd_unique_device(spmd_sharding_of(cx, hlo), &dev))
        return single_device_feed(cx, hlo, dev, err);
    if (hlo->op == IR_OP_INFEED)
        return handle_infeed(cx, hlo, err);
    if (hlo->op == IR_OP_OUTFEED)
        return handle_outfeed(cx, hlo, err);
    char msg[128];
    snprintf(msg, sizeof(msg), "no handler for %s: partitioned as replicated",
             ir_op_name(hlo->op));
    spmd_warn(cx, TRACE_WARN_NO_HANDLER, msg);
    return spmd_handle_default(cx, hlo, err);
}
