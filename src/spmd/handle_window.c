/* handle_window.c - reduce-window and select-and-scatter (gspmd.md D.11, D.12, F.2; seed:
 * HandleReduceWindow, HandleSelectAndScatter). Owns: deciding whether the output sharding cuts
 * through a window, running the local op on inputs with halos (spmd_reshard_as_windowed_input;
 * for select-and-scatter spmd_halo_select_and_scatter, with the padding values the select
 * never picks and the scatter adds nothing with), and the fallbacks. Does not own: the halo
 * exchange itself (halo.c) or any collective: these ops never all-reduce, the output is
 * element-local once the halo is present.
 * Invariant: emits only through spmd_emit()/builders; one `decision` event per instruction. */
#include "spmd/gather_int.h"
#include "spmd/halo_int.h"

#include <string.h>

static void
decide(SpmdCtx *cx, const IrInstr *hlo, const char *strategy, const char *reason,
       const char *const *alts, uint32_t n_alts, const TraceKV *nums, uint32_t n_nums)
{
    if (!cx->trace->ops->decision)
        return;
    const char *handler = hlo->op == IR_OP_REDUCE_WINDOW ? "reduce-window" : "select-and-scatter";
    TraceDecision d = {hlo, handler, strategy, reason, alts, n_alts, nums, n_nums};
    cx->trace->ops->decision(cx->trace, &d);
}

static bool
window_dim_is_trivial(const IrWindowDim *w)
{
    return w->size == 1 && w->stride == 1 && w->pad_lo == 0 && w->pad_hi == 0 &&
           w->lhs_dilate <= 1 && w->rhs_dilate <= 1 && !w->reversal;
}

/* Number of sharded dims of `s` whose window is not the identity (they need halos). */
static uint32_t
windowed_sharded_dims(const ShdSharding *s, const IrWindowDim *w, uint32_t rank)
{
    uint32_t n = 0;
    for (uint32_t d = 0; d < rank; d++)
        if (shd_dim_shards(s, d) > 1 && !window_dim_is_trivial(&w[d]))
            n++;
    return n;
}

/* Output extent of one windowed dim (XLA's window shape inference). */
static int64_t
window_out_dim(int64_t in, const IrWindowDim *w)
{
    int64_t ld = w->lhs_dilate > 1 ? w->lhs_dilate : 1, rd = w->rhs_dilate > 1 ? w->rhs_dilate : 1;
    int64_t padded = (in > 0 ? (in - 1) * ld + 1 : 0) + w->pad_lo + w->pad_hi;
    int64_t win = (w->size - 1) * rd + 1;
    int64_t st = w->stride > 0 ? w->stride : 1;
    return padded < win ? 0 : (padded - win) / st + 1;
}

static const IrWindowDim *
window_of(const IrInstr *hlo, uint32_t *rank)
{
    const IrAttr *a = ir_instr_find_attr(hlo, IR_ATTR_WINDOW);
    *rank = a ? a->u.window.n : 0;
    return a ? a->u.window.v : NULL;
}

/* The sharding every array operand and result is partitioned with (leaf 0 of a tuple). */
static const ShdSharding *
array_sharding(SpmdCtx *cx, const IrInstr *hlo)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    return s->kind == SHD_TUPLE ? shd_leaf(s, 0) : s;
}

static bool
is_single_device(const ShdSharding *s)
{
    int64_t dev = 0;
    return shd_unique_device(s, &dev);
}

/* No sharded dim is windowed: inputs take the output sharding, inits are replicated, the
 * local op runs with the source window. */
static SlStatus
local_without_halo(SpmdCtx *cx, const IrInstr *hlo, const ShdSharding *s, uint32_t n_arrays,
                   SlError *err)
{
    uint32_t n = hlo->n_operands;
    const ShdSharding **targets = SL_NEW_ARRAY(cx->arena, const ShdSharding *, n);
    const ShdSharding *rep = shd_replicated(cx->arena);
    if (!targets || !rep)
        return spmd_nomem(cx, err);
    for (uint32_t i = 0; i < n; i++)
        targets[i] = i < n_arrays ? s : rep;
    const ShdSharding *out = spmd_sharding_of(cx, hlo);
    if (out->kind == SHD_TUPLE) {
        const ShdSharding **leaves = SL_NEW_ARRAY(cx->arena, const ShdSharding *, out->n_leaves);
        if (!leaves)
            return spmd_nomem(cx, err);
        for (uint32_t k = 0; k < out->n_leaves; k++)
            leaves[k] = s;
        out = shd_tuple(cx->arena, leaves, out->n_leaves);
    } else {
        out = s;
    }
    if (!out)
        return spmd_nomem(cx, err);
    return spmd_handle_with_shardings(cx, hlo, targets, out, err);
}

/* The local reduce-window on a windowed input: source attributes, shard window, shape from
 * the window, then the optional dynamic-slice of the owned part. */
static SlStatus
emit_windowed_reduce(SpmdCtx *cx, const IrInstr *hlo, const ShdSharding *s,
                     const SpmdWindowedInput *wi, IrInstr *init, SlError *err)
{
    IrInstr *in = wi->sharded_input;
    uint32_t rank = in->shape.rank;
    int64_t dims[SPMD_MAX_RANK];
    for (uint32_t d = 0; d < rank; d++)
        dims[d] = window_out_dim(in->shape.dims[d], &wi->shard_window[d]);
    IrShape sh = ir_shape_with_dims(cx->arena, &hlo->shape, dims);
    IrInstr *ops[2] = {in, init};
    IrInstr *rw = spmd_emit_clone(cx, hlo, &sh, ops, 2);
    IrAttr *wa = rw ? ir_instr_find_attr_mut(rw, IR_ATTR_WINDOW) : NULL;
    if (!wa)
        return spmd_nomem(cx, err);
    wa->u.window.n = rank;
    wa->u.window.v = wi->shard_window;
    IrInstr *local = rw;
    if (wi->dynamic_slice_index) {
        IrShape ls = spmd_local_shape(cx, &hlo->shape, s);
        local = spmd_emit_dynamic_slice(cx, rw, wi->dynamic_slice_index, ls.dims);
    }
    return spmd_finish(cx, hlo, local, s, err);
}

SlStatus
spmd_handle_reduce_window(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    static const char *const alts_local[] = {"windowed-input-halo", "replicate"};
    static const char *const alts_halo[] = {"local-no-halo", "replicate"};
    uint32_t rank = 0, n_arrays = hlo->n_operands / 2;
    const IrWindowDim *w = window_of(hlo, &rank);
    const ShdSharding *s = array_sharding(cx, hlo);
    if (!w || n_arrays == 0 || !shd_is_tiled(s) || is_single_device(s) ||
        rank != hlo->operands[0]->shape.rank || rank > SPMD_MAX_RANK) {
        decide(cx, hlo, "default", "output is not tiled: run the full reduce-window", NULL, 0,
               NULL, 0);
        return spmd_handle_default(cx, hlo, err);
    }
    uint32_t n_win = windowed_sharded_dims(s, w, rank);
    TraceKV nums[] = {{"windowed_sharded_dims", (double)n_win, NULL},
                      {"inputs", (double)n_arrays, NULL}};
    if (n_win == 0) {
        decide(cx, hlo, "local-no-halo", "no sharded dim has a non-trivial window", alts_local,
               2, nums, 2);
        return local_without_halo(cx, hlo, s, n_arrays, err);
    }
    SpmdValue in, init;
    SlStatus st = n_arrays == 1 ? spmd_operand(cx, hlo, 0, NULL, &in, err) : SL_ERR_UNSUPPORTED;
    if (st == SL_OK)
        st = spmd_operand(cx, hlo, 1, shd_replicated(cx->arena), &init, err);
    SpmdWindowedInput wi;
    memset(&wi, 0, sizeof(wi));
    if (st == SL_OK)
        st = spmd_reshard_as_windowed_input(cx, &in, w, s, init.hlo, true, &wi, err);
    if (st == SL_ERR_UNSUPPORTED) {
        decide(cx, hlo, "replicate",
               "no halo plan for the windowed sharded dims (or a variadic reduce-window)",
               alts_halo, 2, nums, 2);
        return spmd_handle_default(cx, hlo, err);
    }
    if (st != SL_OK)
        return st;
    decide(cx, hlo, "windowed-input-halo",
           "a sharded dim is windowed: exchange halos, then reduce locally without all-reduce",
           alts_halo, 2, nums, 2);
    return emit_windowed_reduce(cx, hlo, s, &wi, init.hlo, err);
}

/* The operand padding of a select-and-scatter with halos: a value the select never picks
 * (upstream pads with -inf for GE/GT on (a, b), +inf for LE/LT, mirrored when the compare
 * reads (b, a)); NULL when the type is not f32/bf16 or the select is not such a compare. */
static const char *
scatter_pad_literal(const IrInstr *hlo)
{
    IrDtype t = hlo->shape.dtype;
    IrComputation *sel = ir_instr_called(hlo, IR_ATTR_SELECT);
    const IrInstr *root = sel ? sel->root : NULL;
    if ((t != IR_DT_F32 && t != IR_DT_BF16) || !root || root->op != IR_OP_COMPARE ||
        root->n_operands != 2 || root->operands[0]->op != IR_OP_PARAMETER ||
        root->operands[1]->op != IR_OP_PARAMETER ||
        root->operands[0]->parameter_number + root->operands[1]->parameter_number != 1)
        return NULL;
    const IrAttr *dir = ir_instr_find_attr(root, IR_ATTR_DIRECTION);
    if (!dir)
        return NULL;
    bool greater = sl_str_eq_cstr(dir->u.text, "GE") || sl_str_eq_cstr(dir->u.text, "GT");
    bool less = sl_str_eq_cstr(dir->u.text, "LE") || sl_str_eq_cstr(dir->u.text, "LT");
    if (!greater && !less)
        return NULL;
    bool first_is_a = root->operands[0]->parameter_number == 0;
    return greater == first_is_a ? "-inf" : "inf";
}

/* The identity of the scatter computation (a binary op of its two parameters), which pads
 * the source: windows that only exist in the halo layout then scatter nothing. Upstream pads
 * with the init value, which adds the init value twice when it is not the identity. NULL when
 * the scatter is not such an op. */
static const char *
scatter_identity_literal(const IrInstr *hlo)
{
    IrComputation *sc = ir_instr_called(hlo, IR_ATTR_SCATTER);
    const IrInstr *root = sc ? sc->root : NULL;
    if (!root || root->n_operands != 2 || root->operands[0]->op != IR_OP_PARAMETER ||
        root->operands[1]->op != IR_OP_PARAMETER ||
        root->operands[0]->parameter_number == root->operands[1]->parameter_number)
        return NULL;
    if (root->op == IR_OP_ADD)
        return "0";
    if (root->op == IR_OP_MULTIPLY)
        return "1";
    if (root->op == IR_OP_MAXIMUM)
        return "-inf";
    return root->op == IR_OP_MINIMUM ? "inf" : NULL;
}

/* Operand and source in the output sharding, halos for the windows that overlap each shard,
 * the local select-and-scatter without the padding of sharded dims, then the own part. */
static SlStatus
windowed_scatter(SpmdCtx *cx, const IrInstr *hlo, const ShdSharding *s, const IrWindowDim *w,
                 const char *pad_literal, const char *identity, const TraceKV *nums, SlError *err)
{
    static const char *const alts_repl[] = {"local-no-halo", "windowed-input-halo"};
    static const char *const alts_halo[] = {"local-no-halo", "replicate"};
    uint32_t rank = hlo->shape.rank;
    SpmdValue op, src, init;
    SlStatus st = spmd_operand(cx, hlo, 0, s, &op, err);
    if (st == SL_OK)
        st = spmd_operand(cx, hlo, 1, s, &src, err);
    if (st != SL_OK)
        return st;
    IrInstr *pad = spmd_emit_constant_literal(cx, hlo->shape.dtype, pad_literal);
    st = spmd_operand(cx, hlo, 2, shd_replicated(cx->arena), &init, err);
    if (st != SL_OK)
        return st;
    IrInstr *none = spmd_emit_constant_literal(cx, hlo->shape.dtype, identity);
    SpmdScatterHalo io = {.operand = op.hlo, .source = src.hlo, .src_pad = none, .op_pad = pad};
    st = spmd_halo_select_and_scatter(cx, op.state, s, w, &hlo->shape, &hlo->operands[1]->shape,
                                      &io, err);
    if (st == SL_ERR_UNSUPPORTED) {
        decide(cx, hlo, "replicate",
               "a sharded dim is windowed and its halos cannot be exchanged (dilation, negative "
               "padding, or halos beyond the neighbours)",
               alts_repl, 2, nums, 1);
        return spmd_handle_default(cx, hlo, err);
    }
    if (st != SL_OK)
        return st;
    decide(cx, hlo, "windowed-input-halo",
           "a sharded dim is windowed: exchange source and operand halos, scatter locally",
           alts_halo, 2, nums, 1);
    IrWindowDim *sw = SL_DUP_ARRAY(cx->arena, IrWindowDim, w, rank ? rank : 1);
    if (!sw)
        return spmd_nomem(cx, err);
    for (uint32_t d = 0; d < rank; d++)
        if (shd_dim_shards(s, d) > 1)
            sw[d].pad_lo = sw[d].pad_hi = 0; /* the shards are padded explicitly */
    IrInstr *ops[3] = {io.operand, io.source, init.hlo};
    IrInstr *local = spmd_emit_clone(cx, hlo, &io.operand->shape, ops, 3);
    IrAttr *wa = local ? ir_instr_find_attr_mut(local, IR_ATTR_WINDOW) : NULL;
    if (!wa)
        return spmd_nomem(cx, err);
    wa->u.window.n = rank;
    wa->u.window.v = sw;
    IrShape ls = spmd_local_shape(cx, &hlo->shape, s);
    if (!ir_shape_equal(&ls, &local->shape, false))
        local = spmd_emit_dynamic_slice(cx, local, io.offs, ls.dims);
    return spmd_finish(cx, hlo, local, s, err);
}

SlStatus
spmd_handle_select_and_scatter(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    static const char *const alts[] = {"local-no-halo", "windowed-input-halo", "replicate"};
    uint32_t rank = 0;
    const IrWindowDim *w = window_of(hlo, &rank);
    const ShdSharding *s = array_sharding(cx, hlo);
    if (!w || hlo->n_operands != 3 || !shd_is_tiled(s) || is_single_device(s) ||
        rank != hlo->shape.rank || rank > SPMD_MAX_RANK) {
        decide(cx, hlo, "default", "output is not tiled: run the full select-and-scatter", NULL,
               0, NULL, 0);
        return spmd_handle_default(cx, hlo, err);
    }
    uint32_t n_win = windowed_sharded_dims(s, w, rank);
    TraceKV nums[] = {{"windowed_sharded_dims", (double)n_win, NULL}};
    if (n_win == 0) {
        decide(cx, hlo, "local-no-halo", "no sharded dim has a non-trivial window", alts + 1, 2,
               nums, 1);
        /* operand and source (same extent on every sharded dim) take the output sharding */
        return local_without_halo(cx, hlo, s, 2, err);
    }
    const char *pad_literal = scatter_pad_literal(hlo);
    const char *identity = scatter_identity_literal(hlo);
    if (!pad_literal || !identity) {
        decide(cx, hlo, "replicate",
               "a sharded dim is windowed and the select is not a plain comparison of f32/bf16 "
               "(no padding value that never wins) or the scatter has no known identity",
               alts, 2, nums, 1);
        return spmd_handle_default(cx, hlo, err);
    }
    return windowed_scatter(cx, hlo, s, w, pad_literal, identity, nums, err);
}
