/* handle_gather_scatter.c - gather and scatter (gspmd.md F.3, F.4; seed: HandleGather,
 * PartitionGather). Owns: the two handlers (operands, indices and updates as the recursion
 * wants them), the recursion's entry (spmd_gs_partition), the strategy order (preferred
 * methods first, then a memory and communication estimate per method) and the `decision`
 * event of every level. Does not own: the dimension classes (gs_dims.c), one level's
 * sharding, value and emission helpers (gs_level.c), the methods themselves (gs_methods.c),
 * resharding (spmd_reshard), sharding arithmetic (src/sharding), collectives.
 * Invariants: a method checks that it applies before it emits anything; every recursion level
 * emits one `decision` event; emission only through spmd_emit()/builders. */
#include "spmd/gather_int.h"
#include "spmd/gs_int.h"

#include <string.h>

#define GS_NO_COST INT64_MAX

typedef enum GsMethod {
    GS_EXPLICIT_BATCH, GS_INDEX_PARALLEL, GS_OPERAND_PASSTHROUGH, GS_TRIVIAL_SLICED,
    GS_INDEX_PASSTHROUGH, GS_METHOD_COUNT
} GsMethod;

static const struct {
    const char *name, *option, *alias;
} k_methods[GS_METHOD_COUNT] = {
    [GS_EXPLICIT_BATCH] = {"explicit-batch", "kExplicitBatch", "explicit_batch"},
    [GS_INDEX_PARALLEL] = {"index-parallel", "kIndexParallel", "index_parallel"},
    [GS_OPERAND_PASSTHROUGH] = {"operand-passthrough", "kOperandPassthrough",
                                "operand_passthrough"},
    [GS_TRIVIAL_SLICED] = {"trivial-sliced-operand", "kTrivialSlicedOperand",
                           "trivial_sliced_operand"},
    [GS_INDEX_PASSTHROUGH] = {"index-passthrough", "kIndexPassthrough", "index_passthrough"},
};

static void
decide(SpmdCtx *cx, const Gs *p, const char *strategy, const char *reason,
       const char *const *alts, uint32_t n_alts, const TraceKV *nums, uint32_t n_nums)
{
    if (!cx->trace->ops->decision)
        return;
    TraceDecision d = {p->hlo,   p->is_scatter ? "scatter" : "gather", strategy, reason, alts,
                       n_alts,   nums,                                 n_nums};
    cx->trace->ops->decision(cx->trace, &d);
}

/* ---- strategy order (preferred methods first, then estimated memory and communication) ---- */

static bool
is_preferred(SpmdCtx *cx, const Gs *p, GsMethod m)
{
    const char *o = p->is_scatter ? cx->opts->preferred_scatter_partition_methods
                                  : cx->opts->preferred_gather_partition_methods;
    if (!o)
        return m == GS_EXPLICIT_BATCH || m == GS_INDEX_PARALLEL;
    return strstr(o, k_methods[m].option) || strstr(o, k_methods[m].alias) ||
           strstr(o, k_methods[m].name);
}

static int64_t
local_bytes(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *s)
{
    IrShape l = spmd_local_shape(cx, v->base_shape, s);
    return ir_shape_byte_size(&l);
}

/* Bytes of `base` per group when grouped on `dims` of `s` (GetPerGroupBaseShape). */
static int64_t
group_bytes(SpmdCtx *cx, const IrShape *base, const ShdSharding *s, const int64_t *dims,
            uint32_t n)
{
    IrShape g = ir_shape_clone(cx->arena, base);
    for (uint32_t i = 0; shd_is_tiled(s) && i < n; i++) {
        int64_t d = dims[i], k = shd_dim_shards(s, (uint32_t)d);
        if (d >= 0 && (uint32_t)d < g.rank && k > 1)
            g.dims[d] = (g.dims[d] + k - 1) / k;
    }
    return ir_shape_byte_size(&g);
}

/* Memory and communication of resharding a gather result of base `base` from `from` to `to`:
 * both buffers live at once (all-to-all, all-gather), the source crosses the wire. */
static void
result_reshard_cost(SpmdCtx *cx, const IrShape *base, const ShdSharding *from,
                    const ShdSharding *to, int64_t *mem, int64_t *comm)
{
    *mem = *comm = 0;
    if (!from || !to || shd_equal(from, to))
        return;
    IrShape lf = spmd_local_shape(cx, base, from), lt = spmd_local_shape(cx, base, to);
    *mem = ir_shape_byte_size(&lf) + ir_shape_byte_size(&lt);
    *comm = ir_shape_byte_size(&lf);
}

/* Bytes the updates must gather to follow the operand on its passthrough dims. */
static int64_t
window_reshard_bytes(SpmdCtx *cx, const Gs *p, const GsPairs *pp)
{
    const SpmdValue *u = &p->upd[0];
    const ShdSharding *t = spmd_gs_prop_dims(cx, p->ops[0].sharding, pp->op, pp->out, pp->n,
                                     u->base_shape->rank);
    if (!t || shd_equal(t, u->sharding))
        return 0;
    int64_t have = local_bytes(cx, u, u->sharding), want = local_bytes(cx, u, t);
    return (want > have ? want - have : have) * p->n;
}

/* Estimated (memory, communication) bytes of one method on this level; GS_NO_COST when it
 * cannot apply. Stand-in for upstream's dry run: what each device holds and moves. */
static void
method_cost(SpmdCtx *cx, const Gs *p, GsMethod m, int64_t *mem, int64_t *comm)
{
    const SpmdValue *op = &p->ops[0];
    int64_t op_full = ir_shape_byte_size(op->base_shape) * p->n;
    int64_t op_loc = local_bytes(cx, op, op->sharding) * p->n;
    int64_t idx_full = ir_shape_byte_size(p->idx.base_shape);
    int64_t idx_loc = local_bytes(cx, &p->idx, p->idx.sharding);
    int64_t win_full = p->is_scatter ? ir_shape_byte_size(p->upd[0].base_shape) * p->n
                                     : ir_shape_byte_size(p->out_base);
    GsPairs pr;
    int64_t dims[GS_R], g = 1;
    *mem = *comm = GS_NO_COST;
    switch (m) {
    case GS_EXPLICIT_BATCH:
    case GS_INDEX_PARALLEL:
        if (m == GS_EXPLICIT_BATCH ? !spmd_gs_explicit_batch_dims(p, spmd_gs_window_rank(p), &pr)
                                   : !spmd_gs_index_parallel_dims(p, &pr))
            return;
        g = spmd_gs_tiles_on(op->sharding, pr.op, pr.n);
        int64_t gi = spmd_gs_tiles_on(p->idx.sharding, pr.idx, pr.n);
        g = g > gi ? g : gi;
        if (g > 1) {
            *mem = op_full / g + idx_full / g + win_full / g;
            *comm = 0;
        }
        return;
    case GS_OPERAND_PASSTHROUGH:
        spmd_gs_operand_passthrough_dims(p, &pr);
        g = spmd_gs_tiles_on(op->sharding, pr.op, pr.n);
        if (g > 1 && p->is_scatter) {
            *mem = op_loc + idx_full + win_full / g;
            *comm = (idx_full > idx_loc ? idx_full - idx_loc : 0) +
                    window_reshard_bytes(cx, p, &pr);
        } else if (g > 1) {
            /* upstream's dry run: the per-group gather on the operand's group and the full
             * indices, then the result resharded from the passthrough sharding */
            const ShdSharding *ws =
                spmd_gs_prop_dims(cx, op->sharding, pr.op, pr.out, pr.n, spmd_gs_window_rank(p));
            int64_t rm, rc;
            result_reshard_cost(cx, p->out_base, spmd_gs_refine_window(cx, p, ws), p->out_s,
                                &rm, &rc);
            *mem = group_bytes(cx, op->base_shape, op->sharding, pr.op, pr.n) + idx_full +
                   group_bytes(cx, p->out_base, ws, pr.out, pr.n);
            *mem = rm > *mem ? rm : *mem;
            *comm = (idx_full > idx_loc ? idx_full - idx_loc : 0) + rc;
        }
        return;
    case GS_TRIVIAL_SLICED: {
        uint32_t nd = spmd_gs_trivial_sliced_dims(p, dims);
        if (nd > 0 && p->is_scatter) {
            *mem = op_loc + idx_full + win_full;
            *comm = idx_full - idx_loc;
        } else if (nd > 0) {
            /* the operand's group, full indices and output; the result all-reduced */
            IrShape lo = spmd_local_shape(cx, p->out_base, p->out_s);
            int64_t ar = ir_shape_byte_size(&lo);
            *mem = group_bytes(cx, op->base_shape, op->sharding, dims, nd) + idx_full + win_full;
            *mem = ar > *mem ? ar : *mem;
            *comm = win_full;
        }
        return;
    }
    case GS_INDEX_PASSTHROUGH:
        spmd_gs_index_passthrough_dims(p, spmd_gs_window_rank(p), &pr);
        g = spmd_gs_tiles_on(p->idx.sharding, pr.idx, pr.n);
        if (g > 1 && p->is_scatter) {
            *mem = op_full + idx_loc + win_full / g;
            *comm = (op_full - op_loc) + op_full;
        } else if (g > 1) {
            /* the full operand, the indices' group, the result resharded from the indices' */
            const ShdSharding *pass =
                spmd_gs_prop_dims(cx, p->idx.sharding, pr.idx, pr.out, pr.n,
                                  spmd_gs_window_rank(p));
            int64_t rm, rc;
            result_reshard_cost(cx, p->out_base, pass, p->out_s, &rm, &rc);
            *mem = op_full + group_bytes(cx, p->idx.base_shape, p->idx.sharding, pr.idx, pr.n) +
                   group_bytes(cx, p->out_base, pass, pr.out, pr.n);
            *mem = rm > *mem ? rm : *mem;
            *comm = (op_full - op_loc) + rc;
        }
        return;
    case GS_METHOD_COUNT:
        return;
    }
}

static void
order_methods(SpmdCtx *cx, const Gs *p, GsMethod *order, int64_t *mem, int64_t *comm)
{
    for (int m = 0; m < GS_METHOD_COUNT; m++) {
        order[m] = (GsMethod)m;
        if (is_preferred(cx, p, (GsMethod)m))
            mem[m] = comm[m] = 0;
        else
            method_cost(cx, p, (GsMethod)m, &mem[m], &comm[m]);
    }
    for (int i = 1; i < GS_METHOD_COUNT; i++) /* stable insertion sort */
        for (int j = i; j > 0; j--) {
            GsMethod a = order[j - 1], b = order[j];
            if (mem[b] < mem[a] || (mem[b] == mem[a] && comm[b] < comm[a])) {
                order[j - 1] = b;
                order[j] = a;
            }
        }
}

static SlStatus
run_method(SpmdCtx *cx, const Gs *p, GsMethod m, IrInstr **out, SlError *err)
{
    GsPairs pr;
    *out = NULL;
    switch (m) {
    case GS_EXPLICIT_BATCH:
        return spmd_gs_explicit_batch_dims(p, spmd_gs_window_rank(p), &pr)
                   ? spmd_gs_method_parallel(cx, p, &pr, false, out, err)
                   : SL_OK;
    case GS_INDEX_PARALLEL:
        return spmd_gs_index_parallel_dims(p, &pr)
                   ? spmd_gs_method_parallel(cx, p, &pr, true, out, err)
                   : SL_OK;
    case GS_OPERAND_PASSTHROUGH:
        return spmd_gs_method_operand_passthrough(cx, p, out, err);
    case GS_TRIVIAL_SLICED:
        return spmd_gs_method_trivial_sliced(cx, p, out, err);
    case GS_INDEX_PASSTHROUGH:
        return spmd_gs_method_index_passthrough(cx, p, out, err);
    case GS_METHOD_COUNT:
        break;
    }
    return SL_OK;
}

static const char *const k_cost_keys[GS_METHOD_COUNT][2] = {
    {"explicit-batch.mem_bytes", "explicit-batch.comm_bytes"},
    {"index-parallel.mem_bytes", "index-parallel.comm_bytes"},
    {"operand-passthrough.mem_bytes", "operand-passthrough.comm_bytes"},
    {"trivial-sliced-operand.mem_bytes", "trivial-sliced-operand.comm_bytes"},
    {"index-passthrough.mem_bytes", "index-passthrough.comm_bytes"},
};

static void
record(SpmdCtx *cx, const Gs *p, const GsMethod *order, const int64_t *mem, const int64_t *comm,
       int taken)
{
    const char *alts[GS_METHOD_COUNT + 1];
    TraceKV nums[2 * GS_METHOD_COUNT + 1];
    uint32_t na = 0, nn = 0;
    for (int k = 0; k < GS_METHOD_COUNT; k++) {
        GsMethod m = order[k];
        if (k != taken)
            alts[na++] = k_methods[m].name;
        nums[nn++] = (TraceKV){k_cost_keys[m][0], mem[m] == GS_NO_COST ? -1.0 : (double)mem[m],
                               NULL};
        nums[nn++] = (TraceKV){k_cost_keys[m][1],
                               comm[m] == GS_NO_COST ? -1.0 : (double)comm[m], NULL};
    }
    nums[nn++] = (TraceKV){"depth", (double)p->depth, NULL};
    if (taken >= 0) {
        alts[na++] = "replicate";
        decide(cx, p, k_methods[order[taken]].name,
               "first applicable method in preference/cost order (-1 = does not apply)", alts,
               na, nums, nn);
    } else {
        decide(cx, p, "replicate", "no partitioning method applies: replicate all inputs", alts,
               na, nums, nn);
    }
}

SlStatus
spmd_gs_partition(SpmdCtx *cx, const Gs *p, bool recursive, IrInstr **out, SlError *err)
{
    GsMethod order[GS_METHOD_COUNT];
    int64_t mem[GS_METHOD_COUNT], comm[GS_METHOD_COUNT];
    *out = NULL;
    order_methods(cx, p, order, mem, comm);
    for (int k = 0; recursive && p->depth < GS_R && k < GS_METHOD_COUNT; k++) {
        SlStatus st = run_method(cx, p, order[k], out, err);
        if (st != SL_OK)
            return st;
        if (*out) {
            record(cx, p, order, mem, comm, k);
            return SL_OK;
        }
    }
    record(cx, p, order, mem, comm, -1);
    return spmd_gs_replicate_fallback(cx, p, out, err);
}

/* ---- handlers ---- */

static bool
is_single_device(const ShdSharding *s)
{
    int64_t dev = 0;
    return shd_unique_device(s, &dev);
}

static SlStatus
distinct_copy(SpmdCtx *cx, SpmdValue *v, const IrInstr *other, SlError *err)
{
    if (v->hlo != other)
        return SL_OK;
    v->hlo = spmd_emit_copy(cx, v->hlo);
    return v->hlo ? SL_OK : spmd_nomem(cx, err);
}

SlStatus
spmd_handle_gather(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    const int64_t *slice = NULL;
    uint32_t ns = ir_instr_ints_attr(hlo, IR_ATTR_SLICE_SIZES, &slice);
    if (is_single_device(s) || shd_is_manual(s) || s->kind == SHD_TUPLE ||
        ns != hlo->operands[0]->shape.rank || ns > GS_R || hlo->shape.rank > GS_R)
        return spmd_handle_default(cx, hlo, err);
    Gs p;
    memset(&p, 0, sizeof(p));
    p.hlo = hlo;
    p.m = cx->in;
    p.n = 1;
    spmd_gs_read_dims(hlo, false, &p.dn);
    p.ops = SL_NEW(cx->arena, SpmdValue);
    if (!p.ops)
        return spmd_nomem(cx, err);
    SlStatus st = spmd_operand(cx, hlo, 0, NULL, p.ops, err);
    if (st == SL_OK)
        st = spmd_operand(cx, hlo, 1, NULL, &p.idx, err);
    if (st == SL_OK)
        st = distinct_copy(cx, &p.idx, p.ops->hlo, err);
    if (st != SL_OK)
        return st;
    p.out_base = &hlo->shape;
    p.out_s = s;
    p.slice = slice;
    p.st = cx->state;
    IrInstr *x = NULL;
    st = spmd_gs_partition(cx, &p, true, &x, err);
    return st == SL_OK ? spmd_finish(cx, hlo, x, s, err) : st;
}

/* Operands (and updates) of a scatter all take the first one's sharding (upstream reshards to
 * a common sharding when they differ). */
static SlStatus
scatter_inputs(SpmdCtx *cx, const IrInstr *hlo, uint32_t first, uint32_t n, SpmdValue *out,
               SlError *err)
{
    for (uint32_t k = 0; k < n; k++) {
        SlStatus st = spmd_operand(cx, hlo, first + k, k ? out[0].sharding : NULL, &out[k], err);
        if (st != SL_OK)
            return st;
    }
    return SL_OK;
}

/* GetScatterSliceSize: 1 on inserted and batching dims, else the update window extent. */
static int64_t *
scatter_slice_sizes(SpmdCtx *cx, const Gs *p)
{
    const IrShape *ob = p->ops[0].base_shape, *ub = p->upd[0].base_shape;
    int64_t *v = SL_NEW_ARRAY(cx->arena, int64_t, ob->rank ? ob->rank : 1);
    uint32_t k = 0;
    for (uint32_t d = 0; v && d < ob->rank; d++) {
        if (spmd_gs_has_dim(p->dn.collapsed, p->dn.n_collapsed, d) ||
            spmd_gs_has_dim(p->dn.op_batch, p->dn.n_op_batch, d) || k >= p->dn.n_offset)
            v[d] = 1;
        else
            v[d] = ub->dims[p->dn.offset[k++]];
    }
    return v;
}

/* Uneven indices carry padding that a scatter would apply; like upstream, such indices are
 * replicated and resharded back with -1 padding, an out-of-bounds index the scatter drops. */
static SlStatus
repad_uneven_indices(SpmdCtx *cx, SpmdValue *idx, SlError *err)
{
    const ShdSharding *s = idx->sharding;
    bool uneven = false;
    if (!shd_is_tiled(s) || ir_dtype_kind(idx->base_shape->dtype) != 'S')
        return SL_OK;
    for (uint32_t d = 0; d < idx->base_shape->rank; d++)
        uneven |= idx->base_shape->dims[d] != shd_dim_shards(s, d) * idx->hlo->shape.dims[d];
    if (!uneven)
        return SL_OK;
    SpmdValue rep;
    SlStatus st = spmd_replicate(cx, idx, &rep, err);
    if (st != SL_OK)
        return st;
    IrInstr *m1 = spmd_emit_constant_scalar(cx, idx->base_shape->dtype, -1);
    return m1 ? spmd_reshard(cx, &rep, s, m1, idx, err) : spmd_nomem(cx, err);
}

SlStatus
spmd_handle_scatter(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    uint32_t n = (hlo->n_operands - 1) / 2;
    if (is_single_device(s) || shd_is_manual(s) || n == 0 || hlo->n_operands != 2 * n + 1 ||
        hlo->operands[0]->shape.rank > GS_R)
        return spmd_handle_default(cx, hlo, err);
    Gs p;
    memset(&p, 0, sizeof(p));
    p.hlo = hlo;
    p.m = cx->in;
    p.is_scatter = true;
    p.n = n;
    spmd_gs_read_dims(hlo, true, &p.dn);
    p.ops = SL_NEW_ARRAY(cx->arena, SpmdValue, n);
    p.upd = SL_NEW_ARRAY(cx->arena, SpmdValue, n);
    if (!p.ops || !p.upd)
        return spmd_nomem(cx, err);
    SlStatus st = scatter_inputs(cx, hlo, 0, n, p.ops, err);
    if (st == SL_OK)
        st = scatter_inputs(cx, hlo, n + 1, n, p.upd, err);
    if (st == SL_OK)
        st = spmd_operand(cx, hlo, n, NULL, &p.idx, err);
    if (st == SL_OK)
        st = repad_uneven_indices(cx, &p.idx, err);
    for (uint32_t k = 0; k < n && st == SL_OK; k++) {
        st = distinct_copy(cx, &p.upd[k], p.ops[k].hlo, err);
        if (st == SL_OK)
            st = distinct_copy(cx, &p.idx, p.ops[k].hlo, err);
        if (st == SL_OK)
            st = distinct_copy(cx, &p.idx, p.upd[k].hlo, err);
    }
    if (st != SL_OK)
        return st;
    p.out_base = p.ops[0].base_shape;
    p.out_s = s->kind == SHD_TUPLE ? shd_leaf(s, 0) : s;
    p.slice = scatter_slice_sizes(cx, &p);
    p.st = cx->state;
    if (!p.slice || !p.out_s)
        return spmd_nomem(cx, err);
    IrInstr *x = NULL;
    st = spmd_gs_partition(cx, &p, true, &x, err);
    if (st != SL_OK)
        return st;
    const ShdSharding *rs = p.out_s;
    if (n > 1) {
        const ShdSharding **l = SL_NEW_ARRAY(cx->arena, const ShdSharding *, n);
        for (uint32_t k = 0; l && k < n; k++)
            l[k] = p.out_s;
        rs = l ? shd_tuple(cx->arena, l, n) : NULL;
    }
    return rs ? spmd_finish(cx, hlo, x, rs, err) : spmd_nomem(cx, err);
}
