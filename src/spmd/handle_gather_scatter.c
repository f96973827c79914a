/* handle_gather_scatter.c - gather and scatter (gspmd.md F.3, F.4; seed: HandleGather,
 * PartitionGather). Owns: classifying gather/scatter dims (explicit batch, index parallel,
 * operand passthrough, trivially sliced operand, index passthrough), ordering the strategies
 * (preferred methods first, then a cost estimate), the per-group recursion, the index masking
 * of the trivially sliced case and the scatter's combining all-reduce. Does not own: resharding
 * (spmd_reshard), sharding arithmetic (src/sharding), collectives (spmd_all_reduce_along_dims).
 * Invariants: a method checks that it applies before it emits anything; every recursion level
 * emits one `decision` event; emission only through spmd_emit()/builders. */
#include "spmd/gather_int.h"

#include <string.h>

#define GS_R SPMD_MAX_RANK
#define GS_NO_COST INT64_MAX

/* Dimension numbers of a gather or a scatter, under the gather's names. */
typedef struct GsDims {
    const int64_t *offset, *collapsed, *index_map, *op_batch, *idx_batch;
    uint32_t n_offset, n_collapsed, n_index_map, n_op_batch, n_idx_batch;
    int64_t ivd; /* index_vector_dim */
} GsDims;

/* Paired dims of operand, indices and output/update (upstream GatherScatterDims). */
typedef struct GsPairs {
    uint32_t n;
    int64_t op[GS_R], idx[GS_R], out[GS_R];
} GsPairs;

/* One level of the recursive problem; values may live in a grouped state. */
typedef struct Gs {
    const IrInstr *hlo;
    bool is_scatter;
    GsDims dn;
    uint32_t n;               /* scatter operands (== updates); 1 for gather */
    SpmdValue *ops, idx, *upd;
    const IrShape *out_base;  /* gather output / scatter operand base shape (array) */
    const ShdSharding *out_s; /* sharding the result must be in (array) */
    const int64_t *slice;     /* slice size per operand dim */
    const SpmdState *st;
    uint32_t depth;
    const IrModule *m;        /* the source module (callers of loop bodies for iota_dim) */
} Gs;

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

static SlStatus partition(SpmdCtx *cx, const Gs *p, bool recursive, IrInstr **out,
                          SlError *err);

/* ---- small helpers ---- */

static bool
has_dim(const int64_t *v, uint32_t n, int64_t d)
{
    for (uint32_t i = 0; i < n; i++)
        if (v[i] == d)
            return true;
    return false;
}

static int64_t
tiles_on(const ShdSharding *s, const int64_t *dims, uint32_t n)
{
    int64_t t = 1;
    for (uint32_t i = 0; shd_is_tiled(s) && i < n; i++)
        t *= shd_dim_shards(s, (uint32_t)dims[i]);
    return t;
}

static uint32_t
ints_attr(const IrInstr *i, IrAttrKey k, const int64_t **v)
{
    return ir_instr_ints_attr(i, k, v);
}

static void
read_dims(const IrInstr *hlo, bool is_scatter, GsDims *dn)
{
    memset(dn, 0, sizeof(*dn));
    dn->n_offset = ints_attr(hlo, is_scatter ? IR_ATTR_UPDATE_WINDOW_DIMS : IR_ATTR_OFFSET_DIMS,
                             &dn->offset);
    dn->n_collapsed = ints_attr(
        hlo, is_scatter ? IR_ATTR_INSERTED_WINDOW_DIMS : IR_ATTR_COLLAPSED_SLICE_DIMS,
        &dn->collapsed);
    dn->n_index_map = ints_attr(
        hlo, is_scatter ? IR_ATTR_SCATTER_DIMS_TO_OPERAND_DIMS : IR_ATTR_START_INDEX_MAP,
        &dn->index_map);
    dn->n_op_batch = ints_attr(
        hlo, is_scatter ? IR_ATTR_INPUT_BATCHING_DIMS : IR_ATTR_OPERAND_BATCHING_DIMS,
        &dn->op_batch);
    dn->n_idx_batch = ints_attr(hlo,
                                is_scatter ? IR_ATTR_SCATTER_INDICES_BATCHING_DIMS
                                           : IR_ATTR_START_INDICES_BATCHING_DIMS,
                                &dn->idx_batch);
    if (!ir_instr_int_attr(hlo, IR_ATTR_INDEX_VECTOR_DIM, &dn->ivd))
        dn->ivd = 0;
}

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

/* ---- dimension classes ---- */

/* k-th batch (non-offset) output dim for indices dim `idx_dim` (FillOutputDimsWithIndicesDims). */
static int64_t
out_dim_of_idx(const GsDims *dn, int64_t idx_dim, uint32_t out_rank)
{
    int64_t k = idx_dim - (idx_dim > dn->ivd ? 1 : 0);
    for (uint32_t o = 0; o < out_rank; o++)
        if (!has_dim(dn->offset, dn->n_offset, o) && k-- == 0)
            return o;
    return -1;
}

/* Operand dims whose slice spans the whole dim, with their offset (window) output dims. */
static void
operand_passthrough_dims(const Gs *p, GsPairs *r)
{
    r->n = 0;
    uint32_t k = 0;
    const IrShape *ob = p->ops[0].base_shape;
    for (uint32_t d = 0; d < ob->rank; d++) {
        if (has_dim(p->dn.collapsed, p->dn.n_collapsed, d) ||
            has_dim(p->dn.op_batch, p->dn.n_op_batch, d))
            continue;
        if (k < p->dn.n_offset && p->slice[d] == ob->dims[d]) {
            r->op[r->n] = d;
            r->out[r->n++] = p->dn.offset[k];
        }
        k++;
    }
}

/* The only instruction of `m` calling `c` (through any computation attribute), else NULL. */
static const IrInstr *
sole_caller(const IrModule *m, const IrComputation *c)
{
    const IrInstr *found = NULL;
    for (uint32_t k = 0; m && k < m->n_comps; k++) {
        const IrComputation *cc = m->comps[k];
        for (uint32_t j = 0; j < cc->n_instrs; j++) {
            const IrInstr *i = cc->instrs[j];
            for (uint16_t a = 0; a < i->n_attrs; a++) {
                const IrAttr *at = &i->attrs[a];
                bool calls = false;
                if (ir_attr_kind(at->key) == IR_AK_COMP)
                    calls = at->u.comp == c;
                else if (ir_attr_kind(at->key) == IR_AK_COMPS)
                    for (uint32_t b = 0; b < at->u.comps.n; b++)
                        calls = calls || at->u.comps.v[b] == c;
                if (!calls)
                    continue;
                if (found && found != i)
                    return NULL;
                found = i;
            }
        }
    }
    return found;
}

/* First dim (of size > 1) along which every element of an s32 constant equals its own
 * index on that dim; -1 when none or when the literal is not a plain list of integers. The
 * literal lists elements in row-major order, so a running multi-index tracks each value. */
static int64_t
constant_iota_dim(const IrInstr *i)
{
    uint32_t r = i->shape.rank;
    int64_t at[GS_R] = {0}, count = 0, total = 1;
    bool is_iota[GS_R];
    if (r == 0 || r > GS_R)
        return -1;
    for (uint32_t d = 0; d < r; d++) {
        is_iota[d] = true;
        total *= i->shape.dims[d];
    }
    const char *s = i->literal.ptr, *e = s + i->literal.len;
    while (s < e) {
        bool neg = *s == '-';
        if (!neg && (*s < '0' || *s > '9')) {
            if (!strchr("{}, \t\r\n", *s))
                return -1;
            s++;
            continue;
        }
        s += neg;
        int64_t v = 0;
        while (s < e && *s >= '0' && *s <= '9' && v < INT64_MAX / 10)
            v = v * 10 + (*s++ - '0');
        if (count++ >= total)
            return -1;
        for (uint32_t d = 0; d < r; d++)
            is_iota[d] = is_iota[d] && !neg && v == at[d];
        for (uint32_t d = r; d-- > 0;)
            if (++at[d] < i->shape.dims[d])
                break;
            else
                at[d] = 0;
    }
    for (uint32_t d = 0; count == total && d < r; d++)
        if (is_iota[d] && i->shape.dims[d] > 1)
            return d;
    return -1;
}

/* Iota dim of a source index value: iota, an s32 constant counting along a dim, broadcasts, and
 * (GetDimensionForIota) element k of a loop body's or branch's parameter when the caller's
 * tuple operand carries such a value at k and, for a while, the body passes element k on
 * unchanged. */
static int64_t
iota_dim(const IrModule *m, const IrInstr *i, uint32_t depth)
{
    if (depth > GS_R)
        return -1;
    if (i->op == IR_OP_GET_TUPLE_ELEMENT && i->n_operands == 1 &&
        i->operands[0]->op == IR_OP_PARAMETER && i->parent && !i->parent->is_entry) {
        int64_t k = -1;
        const IrInstr *call = sole_caller(m, i->parent);
        if (!ir_instr_int_attr(i, IR_ATTR_INDEX, &k) || k < 0 || !call)
            return -1;
        const IrInstr *arg = NULL;
        if (call->op == IR_OP_WHILE && call->n_operands == 1 &&
            ir_instr_called(call, IR_ATTR_BODY) == i->parent) {
            const IrInstr *root = i->parent->root;
            if (root && root->op == IR_OP_TUPLE && (uint64_t)k < root->n_operands &&
                root->operands[k] == i)
                arg = call->operands[0];
        } else if (call->op == IR_OP_CONDITIONAL) {
            const IrAttr *br = ir_instr_find_attr(call, IR_ATTR_BRANCH_COMPUTATIONS);
            for (uint32_t b = 0; br && b < br->u.comps.n; b++)
                if (br->u.comps.v[b] == i->parent && b + 1 < call->n_operands)
                    arg = call->operands[b + 1];
        }
        if (!arg || arg->op != IR_OP_TUPLE || (uint64_t)k >= arg->n_operands)
            return -1;
        return iota_dim(m, arg->operands[k], depth + 1);
    }
    if (i->op == IR_OP_IOTA) {
        int64_t d = -1;
        return ir_instr_int_attr(i, IR_ATTR_IOTA_DIMENSION, &d) ? d : -1;
    }
    if (i->op == IR_OP_BROADCAST && i->n_operands == 1) {
        const int64_t *bd = NULL;
        uint32_t n = ir_instr_ints_attr(i, IR_ATTR_DIMENSIONS, &bd);
        int64_t d = iota_dim(m, i->operands[0], depth + 1);
        return d >= 0 && (uint32_t)d < n ? bd[d] : -1;
    }
    if (i->op != IR_OP_CONSTANT || i->shape.dtype != IR_DT_S32)
        return -1;
    return constant_iota_dim(i);
}

/* Index-parallel dims (GetGatherScatterBatchParallelDims) from the source indices producer. */
static bool
index_parallel_dims(const Gs *p, GsPairs *r)
{
    const IrInstr *ind = p->hlo->operands[p->is_scatter ? p->n : 1];
    const IrInstr *op = p->hlo->operands[0];
    int64_t in_dim[GS_R];
    uint32_t m = p->dn.n_index_map < GS_R ? p->dn.n_index_map : GS_R;
    for (uint32_t i = 0; i < m; i++)
        in_dim[i] = -1;
    const IrInstr *c = ind;
    while (c->op == IR_OP_COPY && c->n_operands == 1)
        c = c->operands[0];
    const int64_t *cd = NULL;
    if (c->op == IR_OP_CONCATENATE && ir_instr_ints_attr(c, IR_ATTR_DIMENSIONS, &cd) == 1 &&
        cd[0] == p->dn.ivd) {
        uint32_t at = 0;
        for (uint32_t k = 0; k < c->n_operands; k++) {
            const IrInstr *o = c->operands[k];
            int64_t cnt = (int64_t)o->shape.rank > p->dn.ivd ? o->shape.dims[p->dn.ivd] : 1;
            int64_t d = iota_dim(p->m, o, 0);
            for (int64_t j = 0; j < cnt && at < m; j++, at++)
                in_dim[at] = d != p->dn.ivd ? d : -1;
        }
    } else {
        int64_t d = iota_dim(p->m, ind, 0);
        for (uint32_t i = 0; i < m && d >= 0 && d != p->dn.ivd; i++)
            in_dim[i] = d;
    }
    r->n = 0;
    for (uint32_t i = 0; i < m; i++) {
        int64_t id = in_dim[i], od = p->dn.index_map[i];
        if (id < 0 || has_dim(p->dn.idx_batch, p->dn.n_idx_batch, id))
            continue;
        if (has_dim(r->idx, r->n, id))
            return false;
        if (p->slice[od] != 1)
            continue;
        if (op->shape.dims[od] != ind->shape.dims[id])
            return false;
        r->op[r->n] = od;
        r->idx[r->n++] = id;
    }
    for (uint32_t i = 0; i < r->n; i++)
        r->out[i] = out_dim_of_idx(&p->dn, r->idx[i], p->out_base->rank + 0);
    return r->n > 0;
}

/* Indices dims (not ivd, not batching, not index-parallel) and their output/update dims. */
static void
index_passthrough_dims(const Gs *p, uint32_t out_rank, GsPairs *r)
{
    GsPairs par;
    bool has_par = index_parallel_dims(p, &par);
    uint32_t ir = p->idx.base_shape->rank;
    r->n = 0;
    for (uint32_t d = 0; d < ir; d++) {
        if ((int64_t)d == p->dn.ivd || has_dim(p->dn.idx_batch, p->dn.n_idx_batch, d) ||
            (has_par && has_dim(par.idx, par.n, d)))
            continue;
        int64_t o = out_dim_of_idx(&p->dn, d, out_rank);
        if (o < 0)
            continue;
        r->idx[r->n] = d;
        r->out[r->n++] = o;
    }
}

static bool
explicit_batch_dims(const Gs *p, uint32_t out_rank, GsPairs *r)
{
    r->n = 0;
    if (p->dn.n_op_batch == 0 || p->dn.n_op_batch != p->dn.n_idx_batch)
        return false;
    for (uint32_t i = 0; i < p->dn.n_op_batch && i < GS_R; i++) {
        r->op[i] = p->dn.op_batch[i];
        r->idx[i] = p->dn.idx_batch[i];
        r->out[i] = out_dim_of_idx(&p->dn, r->idx[i], out_rank);
        r->n++;
    }
    return true;
}

/* Sharded operand dims indexed with slice size 1 (GatherScatterOperandPartitionedOnTrivial..). */
static uint32_t
trivial_sliced_dims(const Gs *p, int64_t *dims)
{
    const ShdSharding *s = p->ops[0].sharding;
    if (!shd_is_tiled(s))
        return 0;
    uint32_t n = 0;
    int64_t parts = 1;
    for (uint32_t i = 0; i < p->dn.n_index_map; i++) {
        int64_t d = p->dn.index_map[i];
        if (p->slice[d] == 1 && !has_dim(dims, n, d)) {
            parts *= shd_dim_shards(s, (uint32_t)d);
            dims[n++] = d;
        }
    }
    return parts > 1 ? n : 0;
}

/* ---- sharding helpers (gspmd.md B) ---- */

/* PropagateShardingAlongDimsAndReplicateOthers: target dim td[i] takes the tiling of source
 * dim sd[i]; every other device factor becomes replication. */
static const ShdSharding *
prop_dims(SpmdCtx *cx, const ShdSharding *src, const int64_t *sd, const int64_t *td, uint32_t n,
          uint32_t tgt_rank)
{
    SlArena *a = cx->arena;
    if (!shd_is_tiled(src) || tgt_rank >= GS_R)
        return shd_replicated(a);
    const ShdSharding *p = shd_partially_replicate_all_except(a, src, sd, n);
    if (!p || !shd_is_tiled(p) || p->n_subgroups > 1 ||
        (p->n_subgroups == 1 && p->subgroups[0] != SHD_SUB_REPLICATED))
        return shd_replicated(a);
    uint32_t sr = shd_data_rank(p), nt = p->n_tile_dims;
    int64_t dims[GS_R + 1], prod = 1, total = shd_device_count(p);
    for (uint32_t d = 0; d < tgt_rank; d++)
        dims[d] = 1;
    for (uint32_t i = 0; i < n; i++)
        prod *= dims[td[i]] = shd_dim_shards(p, (uint32_t)sd[i]);
    dims[tgt_rank] = total / prod;
    int64_t *devs = SL_NEW_ARRAY(a, int64_t, total);
    if (!devs)
        return NULL;
    int64_t tc[GS_R + 1] = {0}, sc[GS_R + 1];
    for (int64_t lin = 0; lin < total; lin++) {
        memset(sc, 0, sizeof(sc));
        for (uint32_t i = 0; i < n; i++)
            sc[sd[i]] = tc[td[i]];
        if (nt > sr)
            sc[sr] = tc[tgt_rank];
        int64_t at = 0;
        for (uint32_t d = 0; d < nt; d++)
            at = at * p->tile_dims[d] + sc[d];
        devs[lin] = p->devices[at];
        for (uint32_t d = tgt_rank + 1; d-- > 0;)
            if (++tc[d] < dims[d])
                break;
            else
                tc[d] = 0;
    }
    ShdSubgroup rep = SHD_SUB_REPLICATED;
    return shd_tiled(a, dims, tgt_rank + 1, devs, &rep, 1);
}

/* GroupShardingOnReplicatedDim: the replication dim's major part when it splits into the
 * groups, else shards borrowed from the data dims in priority order `prio`, else replicated
 * inside iota groups (src/sharding/groups.c). */
static ShdGrouped
group_on_replicated(SpmdCtx *cx, const ShdSharding *s, int64_t num_groups, int64_t num_tiles,
                    uint32_t rank, const int64_t *prio, uint32_t n_prio)
{
    return shd_group_on_replicated_dim(cx->arena, s, num_groups, num_tiles, rank, prio, n_prio);
}

static ShdGrouped
align(SpmdCtx *cx, const ShdGrouped *x, const ShdGrouped *ref)
{
    return shd_align_groups_with(cx->arena, x, ref);
}

static bool
grouped_ok(const ShdGrouped *g, const ShdGrouped *ref)
{
    return g->inner && g->device_groups && g->n_groups == ref->n_groups &&
           g->group_size == ref->group_size;
}

/* GetPerGroupBaseShape. */
static const IrShape *
per_group_shape(SpmdCtx *cx, const IrShape *base, const ShdGrouped *g)
{
    IrShape *r = SL_NEW(cx->arena, IrShape);
    if (!r)
        return NULL;
    *r = ir_shape_clone(cx->arena, base);
    for (uint32_t i = 0; i < g->n_group_dims; i++) {
        int64_t d = g->group_dims[i];
        if (d < (int64_t)r->rank && g->group_dim_sizes[i] > 0)
            r->dims[d] = (r->dims[d] + g->group_dim_sizes[i] - 1) / g->group_dim_sizes[i];
    }
    return r;
}

/* ---- values ---- */

/* spmd_reshard in any state; in a grouped state a cached view keyed by the same local
 * instruction may belong to another state, so a shape mismatch retries on a fresh copy. */
static SlStatus
reshard(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *t, IrInstr *pad, SpmdValue *out,
        SlError *err)
{
    if (shd_equal(v->sharding, t)) {
        *out = *v;
        out->sharding = t;
        return SL_OK;
    }
    SlStatus st = spmd_reshard(cx, v, t, pad, out, err);
    if (st != SL_OK || v->state->n_groups == 0)
        return st;
    IrShape want = spmd_local_shape(cx, v->base_shape, t);
    if (ir_shape_equal(&want, &out->hlo->shape, false))
        return SL_OK;
    SpmdValue fresh = *v;
    fresh.hlo = spmd_emit_copy(cx, v->hlo);
    if (!fresh.hlo)
        return spmd_nomem(cx, err);
    return spmd_reshard(cx, &fresh, t, pad, out, err);
}

/* PerGroupPartitionedHlo: reshard to the ungrouped sharding, then view inside the groups. */
static SlStatus
group_value(SpmdCtx *cx, const SpmdValue *v, const ShdGrouped *g, const SpmdState *gs,
            SpmdValue *out, SlError *err)
{
    const ShdSharding *u = shd_ungroup(cx->arena, g);
    if (!u)
        return spmd_fail(cx, err, SL_ERR_INTERNAL, "cannot ungroup a gather/scatter sharding");
    SpmdValue r;
    SlStatus st = reshard(cx, v, u, NULL, &r, err);
    if (st != SL_OK)
        return st;
    const IrShape *b = per_group_shape(cx, v->base_shape, g);
    if (!b)
        return spmd_nomem(cx, err);
    *out = (SpmdValue){r.hlo, b, g->inner, gs};
    return SL_OK;
}

static SlStatus
group_values(SpmdCtx *cx, const SpmdValue *v, uint32_t n, const ShdGrouped *g,
             const SpmdState *gs, SpmdValue *out, SlError *err)
{
    for (uint32_t k = 0; k < n; k++) {
        SlStatus st = group_value(cx, &v[k], g, gs, &out[k], err);
        if (st != SL_OK)
            return st;
    }
    return SL_OK;
}

/* Result of a level: local `x` in sharding `s` (array, or per leaf for a variadic scatter),
 * resharded to the level's output sharding. */
static SlStatus
finish_level(SpmdCtx *cx, const Gs *p, IrInstr *x, const ShdSharding *s, IrInstr **out,
             SlError *err)
{
    if (!x)
        return spmd_nomem(cx, err);
    const IrShape *base = p->out_base;
    const ShdSharding *from = s, *to = p->out_s;
    if (p->is_scatter && p->n > 1) {
        IrShape *t = SL_NEW(cx->arena, IrShape);
        const ShdSharding **fl = SL_NEW_ARRAY(cx->arena, const ShdSharding *, p->n);
        const ShdSharding **tl = SL_NEW_ARRAY(cx->arena, const ShdSharding *, p->n);
        IrShape *el = SL_NEW_ARRAY(cx->arena, IrShape, p->n);
        if (!t || !fl || !tl || !el)
            return spmd_nomem(cx, err);
        for (uint32_t k = 0; k < p->n; k++) {
            el[k] = *p->ops[k].base_shape;
            fl[k] = s;
            tl[k] = p->out_s;
        }
        memset(t, 0, sizeof(*t));
        t->dtype = IR_DT_TUPLE;
        t->n_elems = p->n;
        t->elems = el;
        base = t;
        from = shd_tuple(cx->arena, fl, p->n);
        to = shd_tuple(cx->arena, tl, p->n);
        if (!from || !to)
            return spmd_nomem(cx, err);
    }
    SpmdValue v = {x, base, from, p->st}, r;
    SlStatus st = reshard(cx, &v, to, NULL, &r, err);
    *out = st == SL_OK ? r.hlo : NULL;
    return st;
}

/* ---- emission ---- */

static IrInstr *
emit_concat_1d(SpmdCtx *cx, IrInstr *const *parts, uint32_t n, IrDtype t)
{
    int64_t len = n;
    IrShape s = ir_shape_make(cx->arena, t, &len, 1);
    IrInstr *i = ir_instr_new(cx->out, IR_OP_CONCATENATE, &s, parts, n);
    IrAttr *a = i ? ir_instr_add_attr(cx->out, i, IR_ATTR_DIMENSIONS) : NULL;
    int64_t *v = SL_NEW(cx->arena, int64_t);
    if (!a || !v)
        return NULL;
    *v = 0;
    a->u.ints.n = 1;
    a->u.ints.v = v;
    return spmd_emit(cx, i, NULL);
}

/* One s32 scalar per index component, as a value shaped like the local indices `like`
 * (concatenated along index_vector_dim, converted to the indices' type). */
static IrInstr *
index_vector(SpmdCtx *cx, const Gs *p, IrInstr **comp, const IrInstr *like)
{
    uint32_t k = p->dn.n_index_map;
    IrInstr *v;
    int64_t bdim = p->dn.ivd;
    if ((int64_t)like->shape.rank > p->dn.ivd) {
        int64_t one = 1;
        for (uint32_t i = 0; i < k; i++)
            comp[i] = spmd_emit_reshape(cx, comp[i], &one, 1);
        v = k == 1 ? comp[0] : emit_concat_1d(cx, comp, k, IR_DT_S32);
    } else {
        v = comp[0];
        bdim = -1;
    }
    if (v && like->shape.dtype != IR_DT_S32)
        v = spmd_emit_convert(cx, v, like->shape.dtype);
    if (!v)
        return NULL;
    IrShape s = ir_shape_clone(cx->arena, &like->shape);
    return spmd_emit_broadcast(cx, v, &s, &bdim, bdim < 0 ? 0 : 1);
}

/* Per-component lower bound: the partition's offset on `dims` of the operand, else 0; upper
 * bound (when `hi` is given): offset + local size - 1, else the full size. */
static bool
index_bounds(SpmdCtx *cx, const Gs *p, const SpmdValue *op, const int64_t *dims, uint32_t n,
             const IrInstr *like, IrInstr **lo, IrInstr **hi)
{
    IrInstr *los[GS_R], *his[GS_R];
    uint32_t k = p->dn.n_index_map;
    if (k == 0 || k > GS_R)
        return false;
    for (uint32_t i = 0; i < k; i++) {
        int64_t d = p->dn.index_map[i];
        bool on = has_dim(dims, n, d) && shd_dim_shards(op->sharding, (uint32_t)d) > 1;
        los[i] = on ? spmd_partition_offset(cx, op->state, op->sharding, op->base_shape,
                                            (uint32_t)d)
                    : spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
        if (!hi)
            continue;
        int64_t lim = on ? op->hlo->shape.dims[d] - 1 : op->base_shape->dims[d];
        IrInstr *c = spmd_emit_constant_scalar(cx, IR_DT_S32, lim);
        his[i] = on ? spmd_emit_binary(cx, IR_OP_ADD, los[i], c) : c;
    }
    *lo = index_vector(cx, p, los, like);
    if (hi)
        *hi = index_vector(cx, p, his, like);
    return *lo && (!hi || *hi);
}

static IrInstr *
emit_clamp(SpmdCtx *cx, IrInstr *lo, IrInstr *x, IrInstr *hi)
{
    IrInstr *ops[3] = {lo, x, hi};
    IrShape s = ir_shape_clone(cx->arena, &x->shape);
    return spmd_emit_op(cx, IR_OP_CLAMP, &s, ops, 3);
}

/* The local gather/scatter on values in `p`'s state (replicated there in the fallback). */
static IrInstr *
emit_local(SpmdCtx *cx, const Gs *p, IrInstr *const *ops, uint32_t n_ops)
{
    IrShape sh;
    if (p->is_scatter && p->n > 1) {
        IrShape *el = SL_NEW_ARRAY(cx->arena, IrShape, p->n);
        if (!el)
            return NULL;
        for (uint32_t k = 0; k < p->n; k++)
            el[k] = ops[k]->shape;
        memset(&sh, 0, sizeof(sh));
        sh.dtype = IR_DT_TUPLE;
        sh.n_elems = p->n;
        sh.elems = el;
    } else {
        sh = ir_shape_clone(cx->arena, p->is_scatter ? &ops[0]->shape : p->out_base);
    }
    IrInstr *g = spmd_emit_clone(cx, p->hlo, &sh, ops, n_ops);
    if (!g || p->is_scatter)
        return g;
    IrAttr *a = ir_instr_find_attr_mut(g, IR_ATTR_SLICE_SIZES);
    int64_t *v = SL_DUP_ARRAY(cx->arena, int64_t, p->slice, p->ops[0].base_shape->rank);
    if (!a || !v)
        return a ? NULL : g;
    a->u.ints.v = v;
    return g;
}

static uint32_t
n_inputs(const Gs *p)
{
    return p->is_scatter ? 2 * p->n + 1 : 2;
}

/* Input i of the local op: operands, indices, updates (gather: operand, indices). */
static const SpmdValue *
input(const Gs *p, uint32_t i)
{
    if (i < p->n)
        return &p->ops[i];
    return i == p->n ? &p->idx : &p->upd[i - p->n - 1];
}

static SlStatus
replicate_fallback(SpmdCtx *cx, const Gs *p, IrInstr **out, SlError *err)
{
    uint32_t n = n_inputs(p);
    IrInstr **ops = SL_NEW_ARRAY(cx->arena, IrInstr *, n);
    const ShdSharding *rep = shd_replicated(cx->arena);
    if (!ops || !rep)
        return spmd_nomem(cx, err);
    for (uint32_t i = 0; i < n; i++) {
        SpmdValue r;
        SlStatus st = reshard(cx, input(p, i), rep, NULL, &r, err);
        if (st != SL_OK)
            return st;
        ops[i] = r.hlo;
    }
    return finish_level(cx, p, emit_local(cx, p, ops, n), rep, out, err);
}

/* ---- shared pieces of the methods ---- */

/* Rank of the dims paired with index dims: gather output, scatter updates. */
static uint32_t
window_rank(const Gs *p)
{
    return p->is_scatter ? p->upd[0].base_shape->rank : p->out_base->rank;
}

/* GatherIndexDimsByPriority: ivd, index passthrough dims, then batching dims. */
static uint32_t
index_prio(const Gs *p, int64_t *out)
{
    uint32_t r = p->idx.base_shape->rank, n = 0;
    if (p->dn.ivd < (int64_t)r)
        out[n++] = p->dn.ivd;
    for (uint32_t d = 0; d < r; d++)
        if ((int64_t)d != p->dn.ivd && !has_dim(p->dn.idx_batch, p->dn.n_idx_batch, d))
            out[n++] = d;
    for (uint32_t i = 0; i < p->dn.n_idx_batch && n < GS_R; i++)
        out[n++] = p->dn.idx_batch[i];
    return n;
}

/* GatherOperandDimsByPriority: trivially sliced dims, then operand passthrough dims. */
static uint32_t
operand_prio(const Gs *p, int64_t *out)
{
    uint32_t n = trivial_sliced_dims(p, out);
    GsPairs pp;
    operand_passthrough_dims(p, &pp);
    for (uint32_t i = 0; i < pp.n; i++)
        out[n++] = pp.op[i];
    return n;
}

/* GatherOutputDimsByPriority: output/update dims that are not operand passthrough first. */
static uint32_t
window_prio(const Gs *p, int64_t *out)
{
    GsPairs pp;
    operand_passthrough_dims(p, &pp);
    uint32_t n = 0, r = window_rank(p);
    for (uint32_t d = 0; d < r; d++)
        if (!has_dim(pp.out, pp.n, d))
            out[n++] = d;
    for (uint32_t i = 0; i < pp.n; i++)
        out[n++] = pp.out[i];
    return n;
}

/* Operand/indices shardings that agree on the parallel dims
 * (GatherScatterOperandsShardedAcrossParallelDims, the side with fewer shards adopts). */
static bool
parallel_targets(SpmdCtx *cx, const Gs *p, const GsPairs *pd, const ShdSharding **os,
                 const ShdSharding **is)
{
    const ShdSharding *o = p->ops[0].sharding, *i = p->idx.sharding;
    int64_t to = tiles_on(o, pd->op, pd->n), ti = tiles_on(i, pd->idx, pd->n);
    uint32_t orank = p->ops[0].base_shape->rank, irank = p->idx.base_shape->rank;
    if (to == 1 && ti == 1)
        return false;
    if (spmd_gs_parallel_shardings(cx, o, i, pd->op, pd->idx, pd->n, os, is))
        return true;
    if (ti >= to) {
        const ShdSharding *mine = prop_dims(cx, o, pd->op, pd->idx, pd->n, irank);
        const ShdSharding *theirs = prop_dims(cx, i, pd->idx, pd->idx, pd->n, irank);
        *is = i;
        *os = mine && theirs && shd_equal(mine, theirs)
                  ? o
                  : prop_dims(cx, i, pd->idx, pd->op, pd->n, orank);
    } else {
        *os = o;
        *is = prop_dims(cx, o, pd->op, pd->idx, pd->n, irank);
    }
    return *os && *is && shd_is_tiled(*os) && shd_is_tiled(*is);
}

/* Indices minus the operand offsets on `dims` (index-parallel and trivially sliced). */
static SlStatus
subtract_offsets(SpmdCtx *cx, const Gs *p, const SpmdValue *op, const int64_t *dims,
                 uint32_t n, SpmdValue *idx, SlError *err)
{
    IrInstr *lo = NULL;
    if (!index_bounds(cx, p, op, dims, n, idx->hlo, &lo, NULL))
        return spmd_nomem(cx, err);
    idx->hlo = spmd_emit_binary(cx, IR_OP_SUBTRACT, idx->hlo, lo);
    return idx->hlo ? SL_OK : spmd_nomem(cx, err);
}

/* The child problem: values grouped, output/update base shape per group. */
static Gs
child_of(const Gs *p, const SpmdState *gs, SpmdValue *ops, SpmdValue *upd, const SpmdValue *idx,
         const IrShape *out_base, const ShdSharding *out_s, const int64_t *slice)
{
    Gs c = *p;
    c.ops = ops;
    c.upd = upd;
    c.idx = *idx;
    c.out_base = out_base;
    c.out_s = out_s;
    c.slice = slice;
    c.st = gs;
    c.depth = p->depth + 1;
    return c;
}

static SpmdValue *
values_copy(SpmdCtx *cx, const SpmdValue *v, uint32_t n)
{
    return n ? SL_DUP_ARRAY(cx->arena, SpmdValue, v, n) : NULL;
}

/* Groups every input of `p` (operands with `gop`, updates with `gupd`, indices with `gidx`),
 * partitions the child problem and returns its local result. */
static SlStatus
recurse(SpmdCtx *cx, const Gs *p, const ShdGrouped *gop, const ShdGrouped *gidx,
        const ShdGrouped *gupd, const ShdGrouped *gout, const SpmdValue *idx,
        const int64_t *slice, IrInstr **res, SlError *err)
{
    const SpmdState *gs =
        spmd_state_grouped(cx, p->st, gout->device_groups, gout->n_groups, gout->group_size);
    SpmdValue *ops = values_copy(cx, p->ops, p->n), gi;
    SpmdValue *upd = p->is_scatter ? values_copy(cx, p->upd, p->n) : NULL;
    const IrShape *ob = per_group_shape(cx, p->out_base, gout);
    if (!gs || !ops || (p->is_scatter && !upd) || !ob)
        return spmd_nomem(cx, err);
    SlStatus st = group_values(cx, p->ops, p->n, gop, gs, ops, err);
    if (st == SL_OK && p->is_scatter)
        st = group_values(cx, p->upd, p->n, gupd, gs, upd, err);
    if (st == SL_OK)
        st = group_value(cx, idx, gidx, gs, &gi, err);
    if (st != SL_OK)
        return st;
    Gs c = child_of(p, gs, ops, upd, &gi, ob, gout->inner, slice);
    return partition(cx, &c, true, res, err);
}

/* ---- the methods (each: *out = NULL when it does not apply, checked before emitting) ---- */

/* Output (scatter: updates) sharding of the parallel methods: the indices' sharding on every
 * index dim but the index vector dim (GatherOutputShardingFromIndex), refined where compatible
 * by the operand's passthrough dims with its parallel dims replicated, so the recursion can
 * work on the operand as it is instead of aligning groups. */
static const ShdSharding *
parallel_window(SpmdCtx *cx, const Gs *p, const ShdSharding *os, const ShdSharding *is,
                const GsPairs *pd, uint32_t wr)
{
    int64_t id[GS_R], od[GS_R];
    uint32_t n = 0;
    for (uint32_t d = 0; d < p->idx.base_shape->rank && n < GS_R; d++) {
        int64_t o = (int64_t)d == p->dn.ivd ? -1 : out_dim_of_idx(&p->dn, d, wr);
        if (o >= 0) {
            id[n] = d;
            od[n++] = o;
        }
    }
    const ShdSharding *ws = prop_dims(cx, is, id, od, n, wr);
    if (!ws || !shd_is_tiled(ws))
        return prop_dims(cx, is, pd->idx, pd->out, pd->n, wr);
    GsPairs pp;
    operand_passthrough_dims(p, &pp);
    const ShdSharding *po =
        pp.n ? shd_partially_replicate_dims(cx->arena, os, pd->op, pd->n) : NULL;
    const ShdSharding *pass = po && shd_is_tiled(po) ? prop_dims(cx, po, pp.op, pp.out, pp.n, wr)
                                                    : NULL;
    const ShdSharding *m =
        pass && shd_is_tiled(pass) && tiles_on(pass, pp.out, pp.n) > 1
            ? shd_merge_if_compatible(cx->arena, pass, ws, shd_num_tiles(ws) + 1)
            : NULL;
    return m && shd_is_tiled(m) ? m : ws;
}

/* Explicit-batch and index-parallel: operand and indices sharded alike on the parallel dims,
 * indices shifted by the operand offsets (index-parallel only), grouped, recursed. */
static SlStatus
method_parallel(SpmdCtx *cx, const Gs *p, const GsPairs *pd, bool need_offset, IrInstr **out,
                SlError *err)
{
    const ShdSharding *os = NULL, *is = NULL;
    *out = NULL;
    if (!parallel_targets(cx, p, pd, &os, &is))
        return SL_OK;
    uint32_t wr = window_rank(p);
    const ShdSharding *ws = parallel_window(cx, p, os, is, pd, wr);
    ShdGrouped gi = shd_group_on_dims(cx->arena, is, pd->idx, pd->n, NULL);
    if (!ws || !shd_is_tiled(ws) || !gi.inner)
        return SL_OK;
    ShdGrouped g0 = shd_group_on_dims(cx->arena, os, pd->op, pd->n, NULL);
    ShdGrouped gop = align(cx, &g0, &gi);
    ShdGrouped w0 = shd_group_on_dims(cx->arena, ws, pd->out, pd->n, NULL);
    ShdGrouped gw = align(cx, &w0, &gi);
    if (!grouped_ok(&gop, &gi) || !grouped_ok(&gw, &gi))
        return SL_OK;
    Gs q = *p;
    q.ops = values_copy(cx, p->ops, p->n);
    q.upd = p->is_scatter ? values_copy(cx, p->upd, p->n) : NULL;
    if (!q.ops || (p->is_scatter && !q.upd))
        return spmd_nomem(cx, err);
    SlStatus st = SL_OK;
    for (uint32_t k = 0; k < p->n && st == SL_OK; k++)
        st = reshard(cx, &p->ops[k], os, NULL, &q.ops[k], err);
    for (uint32_t k = 0; p->is_scatter && k < p->n && st == SL_OK; k++)
        st = reshard(cx, &p->upd[k], ws, NULL, &q.upd[k], err);
    if (st == SL_OK)
        st = reshard(cx, &p->idx, is, NULL, &q.idx, err);
    if (st == SL_OK && need_offset)
        st = subtract_offsets(cx, &q, &q.ops[0], pd->op, pd->n, &q.idx, err);
    if (st != SL_OK)
        return st;
    const ShdGrouped *gout = p->is_scatter ? &gop : &gw;
    IrInstr *res = NULL;
    st = recurse(cx, &q, &gop, &gi, &gw, gout, &q.idx, p->slice, &res, err);
    if (st != SL_OK)
        return st;
    return finish_level(cx, p, res, shd_ungroup(cx->arena, gout), out, err);
}

/* The output (scatter: updates) sharding merged into the operand passthrough one `ws` where
 * compatible, so its other sharded dims are partitioned by the recursion instead of resharded
 * after; `ws` itself otherwise. */
static const ShdSharding *
refine_window(SpmdCtx *cx, const Gs *p, const ShdSharding *ws)
{
    const ShdSharding *ref = p->is_scatter ? p->upd[0].sharding : p->out_s;
    const ShdSharding *m = shd_is_tiled(ref) && shd_is_tiled(ws)
                               ? shd_merge_if_compatible(cx->arena, ref, ws, shd_num_tiles(ws) + 1)
                               : NULL;
    return m && shd_is_tiled(m) ? m : ws;
}

/* Operand passthrough: the output (scatter: updates) follows the operand on the dims the
 * slice spans whole; indices grouped on their replication or replicated per group. */
static SlStatus
method_operand_passthrough(SpmdCtx *cx, const Gs *p, IrInstr **out, SlError *err)
{
    const ShdSharding *os = p->ops[0].sharding;
    GsPairs pp;
    *out = NULL;
    operand_passthrough_dims(p, &pp);
    if (!shd_is_tiled(os) || pp.n == 0)
        return SL_OK;
    uint32_t wr = window_rank(p);
    const ShdSharding *ws = prop_dims(cx, os, pp.op, pp.out, pp.n, wr);
    if (!ws || !shd_is_tiled(ws))
        return SL_OK;
    int64_t wdims[GS_R], prio[GS_R], *slice = SL_DUP_ARRAY(cx->arena, int64_t, p->slice,
                                                            p->ops[0].base_shape->rank);
    uint32_t nw = 0, np = index_prio(p, prio);
    for (uint32_t d = 0; d < wr; d++)
        if (shd_dim_shards(ws, d) > 1)
            wdims[nw++] = d;
    for (uint32_t i = 0; slice && i < pp.n; i++)
        slice[pp.op[i]] = p->ops[0].hlo->shape.dims[pp.op[i]];
    ws = refine_window(cx, p, ws);
    ShdGrouped gw = shd_group_on_dims(cx->arena, ws, wdims, nw, NULL);
    ShdGrouped g0 = shd_group_on_dims(cx->arena, os, pp.op, pp.n, NULL);
    ShdGrouped gop = align(cx, &g0, &gw);
    ShdGrouped i0 = group_on_replicated(cx, p->idx.sharding, tiles_on(os, pp.op, pp.n),
                                        shd_device_count(os), p->idx.base_shape->rank, prio, np);
    ShdGrouped gi = align(cx, &i0, &gw);
    if (!slice || !gw.inner || !grouped_ok(&gop, &gw) || !grouped_ok(&gi, &gw))
        return SL_OK;
    const ShdGrouped *gout = p->is_scatter ? &gop : &gw;
    IrInstr *res = NULL;
    SlStatus st = recurse(cx, p, &gop, &gi, &gw, gout, &p->idx, slice, &res, err);
    if (st != SL_OK)
        return st;
    return finish_level(cx, p, res, shd_ungroup(cx->arena, gout), out, err);
}

/* Gather on a trivially sliced operand: clamp, shift by the partition's offset, mask the
 * out-of-range rows to zero and all-reduce (sum) over the sliced dims. */
static SlStatus
gather_mask_and_reduce(SpmdCtx *cx, const Gs *p, const SpmdValue *idx, IrInstr *lo,
                       IrInstr *hi, IrInstr *pg, const ShdSharding *outs, const int64_t *dims,
                       uint32_t n, IrInstr **out, SlError *err)
{
    IrInstr *lt = spmd_emit_compare(cx, idx->hlo, lo, "LT");
    IrInstr *gt = spmd_emit_compare(cx, idx->hlo, hi, "GT");
    IrInstr *f = lt && gt ? spmd_emit_binary(cx, IR_OP_OR, lt, gt) : NULL;
    IrShape fb = ir_shape_clone(cx->arena, idx->base_shape);
    fb.dtype = IR_DT_PRED;
    if (!f || !pg)
        return spmd_nomem(cx, err);
    int64_t bi[GS_R], bo[GS_R];
    uint32_t nb = 0;
    for (uint32_t d = 0; d < idx->base_shape->rank; d++)
        if ((int64_t)d != p->dn.ivd && (bo[nb] = out_dim_of_idx(&p->dn, d, p->out_base->rank)) >= 0)
            bi[nb++] = d;
    const ShdSharding *ft = prop_dims(cx, outs, bo, bi, nb, idx->base_shape->rank);
    SpmdValue fv = {f, &fb, idx->sharding, idx->state}, fr;
    SlStatus st = ft ? reshard(cx, &fv, ft, NULL, &fr, err) : spmd_nomem(cx, err);
    if (st != SL_OK)
        return st;
    f = fr.hlo;
    if ((int64_t)f->shape.rank > p->dn.ivd) {
        int64_t rd[GS_R], k = 0;
        for (uint32_t d = 0; d < f->shape.rank; d++)
            if ((int64_t)d != p->dn.ivd)
                rd[k++] = f->shape.dims[d];
        IrShape rs = ir_shape_make(cx->arena, IR_DT_PRED, rd, (uint32_t)k);
        IrInstr *ops[2] = {f, spmd_emit_constant_scalar(cx, IR_DT_PRED, 0)};
        IrInstr *r = ops[1] ? ir_instr_new(cx->out, IR_OP_REDUCE, &rs, ops, 2) : NULL;
        IrAttr *a = r ? ir_instr_add_attr(cx->out, r, IR_ATTR_DIMENSIONS) : NULL;
        IrAttr *c = r ? ir_instr_add_attr(cx->out, r, IR_ATTR_TO_APPLY) : NULL;
        int64_t *dv = SL_NEW(cx->arena, int64_t);
        if (!a || !c || !dv)
            return spmd_nomem(cx, err);
        *dv = p->dn.ivd;
        a->u.ints.n = 1;
        a->u.ints.v = dv;
        c->u.comp = spmd_reducer(cx, SPMD_RED_OR, IR_DT_PRED);
        f = c->u.comp ? spmd_emit(cx, r, NULL) : NULL;
    }
    int64_t bd[GS_R];
    uint32_t nbd = 0;
    for (uint32_t d = 0; d < pg->shape.rank; d++)
        if (!has_dim(p->dn.offset, p->dn.n_offset, d))
            bd[nbd++] = d;
    IrShape ps = ir_shape_clone(cx->arena, &pg->shape);
    ps.dtype = IR_DT_PRED;
    IrInstr *bf = f ? spmd_emit_broadcast(cx, f, &ps, bd, nbd) : NULL;
    IrInstr *sel = bf ? spmd_emit_select(cx, bf, spmd_emit_zero_like(cx, &pg->shape), pg) : NULL;
    IrComputation *add = spmd_reducer(cx, SPMD_RED_ADD, pg->shape.dtype);
    const char *cause = cx->coll_cause;
    cx->coll_cause = "gather";
    IrInstr *ar = sel ? spmd_all_reduce_along_dims(cx, p->st, sel, p->ops[0].sharding, dims, n,
                                                   add)
                      : NULL;
    cx->coll_cause = cause;
    return finish_level(cx, p, ar, outs, out, err);
}

/* Trivially sliced operand: the operand stays sharded, indices and output (scatter: updates)
 * are grouped on their replication (or replicated per group). Gather masks and all-reduces;
 * scatter only shifts the indices (out-of-range updates are dropped by scatter semantics). */
static SlStatus
method_trivial_sliced(SpmdCtx *cx, const Gs *p, IrInstr **out, SlError *err)
{
    int64_t dims[GS_R], ip[GS_R], wp[GS_R];
    const ShdSharding *os = p->ops[0].sharding;
    *out = NULL;
    uint32_t n = trivial_sliced_dims(p, dims), nip = index_prio(p, ip), nwp = window_prio(p, wp);
    if (n == 0)
        return SL_OK;
    int64_t groups = tiles_on(os, dims, n), tiles = shd_device_count(os);
    ShdGrouped gop = shd_group_on_dims(cx->arena, os, dims, n, NULL);
    ShdGrouped i0 = group_on_replicated(cx, p->idx.sharding, groups, tiles,
                                        p->idx.base_shape->rank, ip, nip);
    const ShdSharding *ws0 = p->is_scatter ? p->upd[0].sharding : p->out_s;
    ShdGrouped w0 = group_on_replicated(cx, ws0, groups, tiles, window_rank(p), wp, nwp);
    ShdGrouped gi = align(cx, &i0, &gop), gw = align(cx, &w0, &gop);
    const ShdSharding *iu = shd_ungroup(cx->arena, &gi);
    if (!grouped_ok(&gop, &gop) || !grouped_ok(&gi, &gop) || !grouped_ok(&gw, &gop) || !iu)
        return SL_OK;
    SpmdValue idx;
    SlStatus st = reshard(cx, &p->idx, iu, NULL, &idx, err);
    if (st != SL_OK)
        return st;
    IrInstr *lo = NULL, *hi = NULL;
    if (!p->is_scatter) {
        IrInstr *zero = NULL, *top = NULL;
        if (!index_bounds(cx, p, &p->ops[0], NULL, 0, idx.hlo, &zero, &top))
            return spmd_nomem(cx, err);
        IrInstr *one = spmd_emit_constant_scalar(cx, idx.hlo->shape.dtype, 1);
        IrShape is = ir_shape_clone(cx->arena, &idx.hlo->shape);
        IrInstr *b1 = one ? spmd_emit_broadcast(cx, one, &is, NULL, 0) : NULL;
        top = b1 ? spmd_emit_binary(cx, IR_OP_SUBTRACT, top, b1) : NULL;
        idx.hlo = top ? emit_clamp(cx, zero, idx.hlo, top) : NULL;
    }
    if (!idx.hlo || !index_bounds(cx, p, &p->ops[0], dims, n, idx.hlo, &lo,
                                  p->is_scatter ? NULL : &hi))
        return spmd_nomem(cx, err);
    /* the shifted indices need no second clamp: the local gather clamps its start indices
     * into the shard, and those rows are masked below */
    SpmdValue adj = idx;
    adj.hlo = spmd_emit_binary(cx, IR_OP_SUBTRACT, idx.hlo, lo);
    if (!adj.hlo)
        return spmd_nomem(cx, err);
    const ShdGrouped *gout = p->is_scatter ? &gop : &gw;
    IrInstr *res = NULL;
    st = recurse(cx, p, &gop, &gi, &gw, gout, &adj, p->slice, &res, err);
    if (st != SL_OK)
        return st;
    const ShdSharding *outs = shd_ungroup(cx->arena, gout);
    if (p->is_scatter || !outs)
        return finish_level(cx, p, res, outs, out, err);
    return gather_mask_and_reduce(cx, p, &idx, lo, hi, res, outs, dims, n, out, err);
}

/* Scatter combiner kind and identity literal; false when not add/mul/min/max/and/or. */
static bool
combiner(const IrInstr *hlo, IrDtype t, SpmdRedKind *kind, const char **identity)
{
    IrComputation *c = ir_instr_called(hlo, IR_ATTR_TO_APPLY);
    const IrInstr *r = c ? c->root : NULL;
    if (!r || r->n_operands != 2 || r->operands[0]->op != IR_OP_PARAMETER ||
        r->operands[1]->op != IR_OP_PARAMETER)
        return false;
    char k = ir_dtype_kind(t);
    bool is_f = k == 'F', is_s = k == 'S';
    switch (r->op) {
    case IR_OP_ADD: *kind = SPMD_RED_ADD; *identity = "0"; return true;
    case IR_OP_MULTIPLY: *kind = SPMD_RED_ADD; *identity = "1"; return true;
    case IR_OP_AND: *kind = SPMD_RED_AND; *identity = "true"; return t == IR_DT_PRED;
    case IR_OP_OR: *kind = SPMD_RED_OR; *identity = "false"; return t == IR_DT_PRED;
    case IR_OP_MAXIMUM:
        *kind = SPMD_RED_MAX;
        *identity = is_f ? "-inf" : t == IR_DT_S32 ? "-2147483648" : "0";
        return is_f || t == IR_DT_S32 || k == 'U';
    case IR_OP_MINIMUM:
        *kind = SPMD_RED_MIN;
        *identity = is_f ? "inf" : t == IR_DT_S32 ? "2147483647" : "4294967295";
        return is_f || (is_s && t == IR_DT_S32) || t == IR_DT_U32;
    default:
        return false;
    }
}

/* Scatter index passthrough: the combining all-reduce runs over the devices that differ only
 * on the reduced index dims `rd`; inside each such group only the in-group id 0 keeps the real
 * operand, the others start from the combiner's identity, so the operand is counted once.
 * Grouping the indices' sharding on every other tile dim (index vector dim, replication)
 * yields exactly those groups. */
static SlStatus
identity_operand(SpmdCtx *cx, const Gs *p, const ShdSharding *is, const int64_t *rd,
                 uint32_t n_rd, SpmdValue *op, SlError *err)
{
    SpmdRedKind kind;
    const char *id = NULL;
    if (!combiner(p->hlo, op->hlo->shape.dtype, &kind, &id))
        return SL_ERR_UNSUPPORTED;
    const SpmdState *st = p->st;
    int64_t keep[GS_R + 4];
    uint32_t nk = 0;
    for (uint32_t d = 0; shd_is_tiled(is) && d < is->n_tile_dims && nk < GS_R + 4; d++)
        if (is->tile_dims[d] > 1 &&
            (d >= is->n_tile_dims - is->n_subgroups || !has_dim(rd, n_rd, d)))
            keep[nk++] = d;
    if (nk > 0) {
        ShdGrouped g = shd_group_on_dims(cx->arena, is, keep, nk, NULL);
        st = g.device_groups ? spmd_state_grouped(cx, p->st, g.device_groups, g.n_groups,
                                                  g.group_size)
                             : NULL;
    }
    IrInstr *pid = st ? spmd_partition_id(cx, st) : NULL;
    IrInstr *nz = pid ? spmd_emit_convert(cx, pid, IR_DT_PRED) : NULL;
    IrShape ps = ir_shape_clone(cx->arena, &op->hlo->shape), vs = ps;
    ps.dtype = IR_DT_PRED;
    vs = ir_shape_clone(cx->arena, &op->hlo->shape);
    IrInstr *bnz = nz ? spmd_emit_broadcast(cx, nz, &ps, NULL, 0) : NULL;
    IrInstr *c = bnz ? spmd_emit_constant_literal(cx, vs.dtype, id) : NULL;
    IrInstr *bc = c ? spmd_emit_broadcast(cx, c, &vs, NULL, 0) : NULL;
    op->hlo = bc ? spmd_emit_select(cx, bnz, bc, op->hlo) : NULL;
    return op->hlo ? SL_OK : spmd_nomem(cx, err);
}

static SlStatus
scatter_index_passthrough(SpmdCtx *cx, const Gs *q, const GsPairs *ip, const ShdSharding *is,
                          const ShdGrouped *gop, const ShdGrouped *gi, const ShdGrouped *gw,
                          IrInstr **out, SlError *err)
{
    const SpmdState *gs =
        spmd_state_grouped(cx, q->st, gw->device_groups, gw->n_groups, gw->group_size);
    const IrShape *ob = gs ? per_group_shape(cx, q->out_base, gop) : NULL;
    if (!ob)
        return spmd_nomem(cx, err);
    SpmdValue op, upd, idx;
    SlStatus st = group_value(cx, &q->ops[0], gop, gs, &op, err);
    if (st == SL_OK)
        st = identity_operand(cx, q, is, ip->idx, ip->n, &op, err);
    if (st == SL_OK)
        st = group_value(cx, &q->upd[0], gw, gs, &upd, err);
    if (st == SL_OK)
        st = group_value(cx, &q->idx, gi, gs, &idx, err);
    if (st != SL_OK)
        return st;
    Gs c = child_of(q, gs, &op, &upd, &idx, ob, gop->inner, q->slice);
    IrInstr *res = NULL;
    st = partition(cx, &c, true, &res, err);
    if (st != SL_OK)
        return st;
    IrComputation *red = spmd_output_computation(cx, ir_instr_called(q->hlo, IR_ATTR_TO_APPLY));
    const char *cause = cx->coll_cause;
    cx->coll_cause = "scatter";
    IrInstr *ar = res && red ? spmd_all_reduce_along_dims(cx, q->st, res, is, ip->idx, ip->n, red)
                             : NULL;
    cx->coll_cause = cause;
    return finish_level(cx, q, ar, shd_ungroup(cx->arena, gop), out, err);
}

/* The indices' sharding improved from the output (scatter: updates) sharding `ws` on the
 * index passthrough dims: merged when compatible, else (indices unsharded on those dims) taken
 * from `ws` outright when that tiles them more. */
static const ShdSharding *
improved_indices(SpmdCtx *cx, const Gs *p, const GsPairs *ip, const ShdSharding *ws)
{
    const ShdSharding *is = p->idx.sharding;
    const ShdSharding *t = prop_dims(cx, ws, ip->out, ip->idx, ip->n, p->idx.base_shape->rank);
    if (!t || !shd_is_tiled(t))
        return is;
    const ShdSharding *m =
        shd_merge_if_compatible(cx->arena, t, is, shd_is_tiled(is) ? shd_num_tiles(is) + 1 : 2);
    if (m)
        return m;
    if ((!shd_is_tiled(is) || tiles_on(is, ip->idx, ip->n) == 1) &&
        tiles_on(t, ip->idx, ip->n) > tiles_on(is, ip->idx, ip->n))
        return t;
    return is;
}

/* Index passthrough: the output (scatter: updates) follows the indices on their batch dims;
 * the operand is grouped on its replication or replicated per group. Scatter then combines
 * the per-group partial results with its own reduction. */
static SlStatus
method_index_passthrough(SpmdCtx *cx, const Gs *p, IrInstr **out, SlError *err)
{
    GsPairs ip;
    int64_t prio[GS_R];
    uint32_t wr = window_rank(p), np = operand_prio(p, prio);
    const ShdSharding *is = p->idx.sharding, *ws = p->is_scatter ? p->upd[0].sharding : p->out_s;
    *out = NULL;
    index_passthrough_dims(p, wr, &ip);
    if (ip.n == 0 || (p->is_scatter && p->n != 1))
        return SL_OK;
    is = improved_indices(cx, p, &ip, ws);
    if (!shd_is_tiled(is))
        return SL_OK;
    const ShdSharding *pass = prop_dims(cx, is, ip.idx, ip.out, ip.n, wr);
    const ShdSharding *mp = pass && shd_is_tiled(pass)
                                ? shd_merge_if_compatible(cx->arena, ws, pass,
                                                          shd_num_tiles(pass) + 1)
                                : NULL;
    pass = mp ? mp : pass;
    SpmdRedKind kind;
    const char *ident = NULL;
    if (!pass || !shd_is_tiled(pass) ||
        (p->is_scatter && !combiner(p->hlo, p->ops[0].base_shape->dtype, &kind, &ident)))
        return SL_OK;
    int64_t groups = tiles_on(is, ip.idx, ip.n), tiles = shd_device_count(is);
    ShdGrouped gw = shd_group_on_dims(cx->arena, pass, ip.out, ip.n, NULL);
    ShdGrouped i0 = shd_group_on_dims(cx->arena, is, ip.idx, ip.n, NULL);
    ShdGrouped gi = align(cx, &i0, &gw);
    ShdGrouped o0 = group_on_replicated(cx, p->ops[0].sharding, groups, tiles,
                                        p->ops[0].base_shape->rank, prio, np);
    ShdGrouped gop = align(cx, &o0, &gw);
    if (!gw.inner || !grouped_ok(&gi, &gw) || !grouped_ok(&gop, &gw))
        return SL_OK;
    Gs q = *p;
    SlStatus st = reshard(cx, &p->idx, is, NULL, &q.idx, err);
    if (st != SL_OK || !p->is_scatter) {
        IrInstr *res = NULL;
        st = st == SL_OK ? recurse(cx, &q, &gop, &gi, &gw, &gw, &q.idx, p->slice, &res, err)
                         : st;
        return st == SL_OK ? finish_level(cx, p, res, pass, out, err) : st;
    }
    return scatter_index_passthrough(cx, &q, &ip, is, &gop, &gi, &gw, out, err);
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
    const ShdSharding *t = prop_dims(cx, p->ops[0].sharding, pp->op, pp->out, pp->n,
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
        if (m == GS_EXPLICIT_BATCH ? !explicit_batch_dims(p, window_rank(p), &pr)
                                   : !index_parallel_dims(p, &pr))
            return;
        g = tiles_on(op->sharding, pr.op, pr.n);
        int64_t gi = tiles_on(p->idx.sharding, pr.idx, pr.n);
        g = g > gi ? g : gi;
        if (g > 1) {
            *mem = op_full / g + idx_full / g + win_full / g;
            *comm = 0;
        }
        return;
    case GS_OPERAND_PASSTHROUGH:
        operand_passthrough_dims(p, &pr);
        g = tiles_on(op->sharding, pr.op, pr.n);
        if (g > 1 && p->is_scatter) {
            *mem = op_loc + idx_full + win_full / g;
            *comm = (idx_full > idx_loc ? idx_full - idx_loc : 0) +
                    window_reshard_bytes(cx, p, &pr);
        } else if (g > 1) {
            /* upstream's dry run: the per-group gather on the operand's group and the full
             * indices, then the result resharded from the passthrough sharding */
            const ShdSharding *ws =
                prop_dims(cx, op->sharding, pr.op, pr.out, pr.n, window_rank(p));
            int64_t rm, rc;
            result_reshard_cost(cx, p->out_base, refine_window(cx, p, ws), p->out_s, &rm, &rc);
            *mem = group_bytes(cx, op->base_shape, op->sharding, pr.op, pr.n) + idx_full +
                   group_bytes(cx, p->out_base, ws, pr.out, pr.n);
            *mem = rm > *mem ? rm : *mem;
            *comm = (idx_full > idx_loc ? idx_full - idx_loc : 0) + rc;
        }
        return;
    case GS_TRIVIAL_SLICED: {
        uint32_t nd = trivial_sliced_dims(p, dims);
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
        index_passthrough_dims(p, window_rank(p), &pr);
        g = tiles_on(p->idx.sharding, pr.idx, pr.n);
        if (g > 1 && p->is_scatter) {
            *mem = op_full + idx_loc + win_full / g;
            *comm = (op_full - op_loc) + op_full;
        } else if (g > 1) {
            /* the full operand, the indices' group, the result resharded from the indices' */
            const ShdSharding *pass =
                prop_dims(cx, p->idx.sharding, pr.idx, pr.out, pr.n, window_rank(p));
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
        return explicit_batch_dims(p, window_rank(p), &pr)
                   ? method_parallel(cx, p, &pr, false, out, err)
                   : SL_OK;
    case GS_INDEX_PARALLEL:
        return index_parallel_dims(p, &pr) ? method_parallel(cx, p, &pr, true, out, err)
                                           : SL_OK;
    case GS_OPERAND_PASSTHROUGH:
        return method_operand_passthrough(cx, p, out, err);
    case GS_TRIVIAL_SLICED:
        return method_trivial_sliced(cx, p, out, err);
    case GS_INDEX_PASSTHROUGH:
        return method_index_passthrough(cx, p, out, err);
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

static SlStatus
partition(SpmdCtx *cx, const Gs *p, bool recursive, IrInstr **out, SlError *err)
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
    return replicate_fallback(cx, p, out, err);
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
    read_dims(hlo, false, &p.dn);
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
    st = partition(cx, &p, true, &x, err);
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
        if (has_dim(p->dn.collapsed, p->dn.n_collapsed, d) ||
            has_dim(p->dn.op_batch, p->dn.n_op_batch, d) || k >= p->dn.n_offset)
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
    read_dims(hlo, true, &p.dn);
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
    st = partition(cx, &p, true, &x, err);
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
