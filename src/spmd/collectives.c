/* collectives.c - the collective creator (gspmd.md G.1-G.5, B.9). Owns: every all-reduce,
 * all-gather, all-to-all, collective-permute, collective-broadcast and partition-id the
 * partitioner emits, channel id assignment, replica-group mapping out of device groups, and
 * the partition-id table lookups.
 * Does not own: choosing a collective (reshard.c and the handlers decide).
 * Invariants: channel ids increase by one per collective in emission order; all-reduce and
 * all-gather carry use_global_device_ids=true; groups printed in iota form only when the
 * creator got them in iota form in the root state. */
#include "spmd/spmd_int.h"

#include <string.h>

/* ---- replica groups ---- */

/* Flat list view of replica groups: n groups, sizes[], ids[] (concatenated). */
typedef struct Groups {
    uint32_t n;
    uint32_t *sizes;
    int64_t *ids;
    int64_t total;
} Groups;

static bool
expand_groups(SpmdCtx *cx, const SpmdState *st, const IrReplicaGroups *g, Groups *out)
{
    if (g->is_iota && g->iota.n_dims == 2) {
        int64_t n = ir_iota_count(&g->iota);
        out->ids = SL_NEW_ARRAY(cx->arena, int64_t, n ? n : 1);
        out->n = (uint32_t)g->iota.dims[0];
        out->sizes = SL_NEW_ARRAY(cx->arena, uint32_t, out->n ? out->n : 1);
        if (!out->ids || !out->sizes)
            return false;
        ir_iota_expand(&g->iota, out->ids);
        for (uint32_t k = 0; k < out->n; k++)
            out->sizes[k] = (uint32_t)g->iota.dims[1];
        out->total = n;
        return true;
    }
    if (g->n_groups == 0) { /* all partitions of the state */
        int64_t n = st->num_partitions;
        out->n = 1;
        out->sizes = SL_NEW(cx->arena, uint32_t);
        out->ids = SL_NEW_ARRAY(cx->arena, int64_t, n);
        if (!out->sizes || !out->ids)
            return false;
        out->sizes[0] = (uint32_t)n;
        for (int64_t k = 0; k < n; k++)
            out->ids[k] = k;
        out->total = n;
        return true;
    }
    out->n = g->n_groups;
    out->sizes = g->group_sizes;
    out->ids = g->ids;
    out->total = 0;
    for (uint32_t k = 0; k < g->n_groups; k++)
        out->total += g->group_sizes[k];
    return true;
}

/* Maps groups given in `st`'s ids to root ids (B.9): every device group contributes a copy. */
static bool
map_groups(SpmdCtx *cx, const SpmdState *st, Groups *g)
{
    for (; st && st->n_groups > 0; st = st->outer) {
        Groups r = {0};
        r.n = (uint32_t)(g->n * st->n_groups);
        r.total = g->total * st->n_groups;
        r.sizes = SL_NEW_ARRAY(cx->arena, uint32_t, r.n ? r.n : 1);
        r.ids = SL_NEW_ARRAY(cx->arena, int64_t, r.total ? r.total : 1);
        if (!r.sizes || !r.ids)
            return false;
        int64_t w = 0;
        uint32_t wn = 0;
        for (int64_t dg = 0; dg < st->n_groups; dg++) {
            const int64_t *row = st->device_groups + dg * st->group_size;
            int64_t at = 0;
            for (uint32_t k = 0; k < g->n; k++) {
                r.sizes[wn++] = g->sizes[k];
                for (uint32_t m = 0; m < g->sizes[k]; m++)
                    r.ids[w++] = row[g->ids[at + m]];
                at += g->sizes[k];
            }
        }
        *g = r;
    }
    return true;
}

static bool
set_groups_attr(SpmdCtx *cx, const SpmdState *st, IrInstr *i, const IrReplicaGroups *in,
                int64_t *group_size)
{
    IrAttr *a = ir_instr_add_attr(cx->out, i, IR_ATTR_REPLICA_GROUPS);
    IrReplicaGroups *rg = SL_NEW(cx->arena, IrReplicaGroups);
    if (!a || !rg)
        return false;
    a->u.groups = rg;
    if (st->n_groups == 0 && in->is_iota && in->iota.n_dims == 2) {
        rg->is_iota = true;
        rg->iota = in->iota;
        *group_size = in->iota.dims[1];
        return true;
    }
    Groups g = {0};
    if (!expand_groups(cx, st, in, &g) || !map_groups(cx, st, &g))
        return false;
    rg->n_groups = g.n;
    rg->group_sizes = g.sizes;
    rg->ids = g.ids;
    *group_size = g.n ? g.sizes[0] : 1;
    return true;
}

static bool
add_channel(SpmdCtx *cx, IrInstr *i)
{
    IrAttr *a = ir_instr_add_attr(cx->out, i, IR_ATTR_CHANNEL_ID);
    if (!a)
        return false;
    a->u.i = cx->next_channel_id++;
    return true;
}

static bool
add_bool(SpmdCtx *cx, IrInstr *i, IrAttrKey k, bool v)
{
    IrAttr *a = ir_instr_add_attr(cx->out, i, k);
    if (!a)
        return false;
    a->u.b = v;
    return true;
}

static bool
add_dim(SpmdCtx *cx, IrInstr *i, int64_t dim)
{
    IrAttr *a = ir_instr_add_attr(cx->out, i, IR_ATTR_DIMENSIONS);
    int64_t *v = SL_NEW(cx->arena, int64_t);
    if (!a || !v)
        return false;
    *v = dim;
    a->u.ints.n = 1;
    a->u.ints.v = v;
    return true;
}

static IrInstr *
finish(SpmdCtx *cx, IrInstr *i)
{
    IrInstr *r = spmd_emit(cx, i, NULL);
    if (r && cx->trace->ops->collective) {
        TraceCollective ev = {r, cx->visiting, cx->cur_reshard,
                              cx->coll_cause ? cx->coll_cause : "reshard"};
        cx->trace->ops->collective(cx->trace, &ev);
    }
    return r;
}

IrInstr *
spmd_coll_all_reduce(SpmdCtx *cx, const SpmdState *st, IrInstr *x, IrComputation *reducer,
                     const IrReplicaGroups *groups)
{
    if (!x || !reducer)
        return NULL;
    IrShape s = ir_shape_clone(cx->arena, &x->shape);
    IrInstr *i = ir_instr_new(cx->out, IR_OP_ALL_REDUCE, &s, &x, 1);
    int64_t gs = 0;
    if (!i || !add_channel(cx, i) || !set_groups_attr(cx, st, i, groups, &gs) ||
        !add_bool(cx, i, IR_ATTR_USE_GLOBAL_DEVICE_IDS, true))
        return NULL;
    IrAttr *a = ir_instr_add_attr(cx->out, i, IR_ATTR_TO_APPLY);
    if (!a)
        return NULL;
    a->u.comp = reducer;
    return finish(cx, i);
}

IrInstr *
spmd_coll_all_gather(SpmdCtx *cx, const SpmdState *st, IrInstr *x, const IrReplicaGroups *groups,
                     int64_t dim)
{
    if (!x || dim < 0 || (uint32_t)dim >= x->shape.rank)
        return NULL;
    IrInstr *i = ir_instr_new(cx->out, IR_OP_ALL_GATHER, NULL, &x, 1);
    int64_t gs = 0;
    if (!i || !add_channel(cx, i) || !set_groups_attr(cx, st, i, groups, &gs) ||
        !add_dim(cx, i, dim) || !add_bool(cx, i, IR_ATTR_USE_GLOBAL_DEVICE_IDS, true))
        return NULL;
    i->shape = ir_shape_clone(cx->arena, &x->shape);
    if (!i->shape.dims && i->shape.rank)
        return NULL;
    i->shape.dims[dim] *= gs;
    return finish(cx, i);
}

IrInstr *
spmd_coll_all_to_all(SpmdCtx *cx, const SpmdState *st, IrInstr *x, const IrReplicaGroups *groups,
                     int64_t dim)
{
    if (!x)
        return NULL;
    IrShape s = ir_shape_clone(cx->arena, &x->shape);
    IrInstr *i = ir_instr_new(cx->out, IR_OP_ALL_TO_ALL, &s, &x, 1);
    int64_t gs = 0;
    if (!i || !add_channel(cx, i) || !set_groups_attr(cx, st, i, groups, &gs) ||
        !add_dim(cx, i, dim))
        return NULL;
    return finish(cx, i);
}

IrInstr *
spmd_coll_permute(SpmdCtx *cx, const SpmdState *st, IrInstr *x, const int64_t *pairs,
                  uint32_t n_pairs)
{
    if (!x)
        return NULL;
    /* Map (a, b) through every enclosing device group. */
    int64_t n = n_pairs;
    int64_t *cur = SL_DUP_ARRAY(cx->arena, int64_t, pairs, 2 * (n ? n : 1));
    if (!cur)
        return NULL;
    for (const SpmdState *s = st; s && s->n_groups > 0; s = s->outer) {
        int64_t *nx = SL_NEW_ARRAY(cx->arena, int64_t, 2 * n * s->n_groups + 2);
        if (!nx)
            return NULL;
        int64_t w = 0;
        for (int64_t g = 0; g < s->n_groups; g++) {
            const int64_t *row = s->device_groups + g * s->group_size;
            for (int64_t k = 0; k < n; k++) {
                nx[w++] = row[cur[2 * k]];
                nx[w++] = row[cur[2 * k + 1]];
            }
        }
        cur = nx;
        n *= s->n_groups;
    }
    /* XLA's creator drops trivial permutes (its channel id is spent all the same): no pairs
     * leave zeros everywhere, every device sending to itself is the operand itself. */
    bool ident = n == cx->num_partitions;
    for (int64_t k = 0; ident && k < n; k++)
        ident = cur[2 * k] == cur[2 * k + 1];
    if ((n == 0 || ident) && ir_shape_is_array(&x->shape)) {
        cx->next_channel_id++;
        return n == 0 ? spmd_emit_zero_like(cx, &x->shape) : x;
    }
    IrShape sh = ir_shape_clone(cx->arena, &x->shape);
    IrInstr *i = ir_instr_new(cx->out, IR_OP_COLLECTIVE_PERMUTE, &sh, &x, 1);
    if (!i || !add_channel(cx, i))
        return NULL;
    IrAttr *a = ir_instr_add_attr(cx->out, i, IR_ATTR_SOURCE_TARGET_PAIRS);
    uint32_t *sizes = SL_NEW_ARRAY(cx->arena, uint32_t, n ? n : 1);
    if (!a || !sizes)
        return NULL;
    for (int64_t k = 0; k < n; k++)
        sizes[k] = 2;
    a->u.lists.n = (uint32_t)n;
    a->u.lists.sizes = sizes;
    a->u.lists.v = cur;
    return finish(cx, i);
}

IrInstr *
spmd_coll_broadcast(SpmdCtx *cx, const SpmdState *st, IrInstr *x, const IrReplicaGroups *groups)
{
    if (!x)
        return NULL;
    IrShape s = ir_shape_clone(cx->arena, &x->shape);
    IrInstr *i = ir_instr_new(cx->out, IR_OP_COLLECTIVE_BROADCAST, &s, &x, 1);
    int64_t gs = 0;
    if (!i || !add_channel(cx, i) || !set_groups_attr(cx, st, i, groups, &gs))
        return NULL;
    return finish(cx, i);
}

/* ---- partition ids and tables ---- */

IrInstr *
spmd_partition_id(SpmdCtx *cx, const SpmdState *st)
{
    SpmdStateMemo *m = st->memo;
    if (m->pid && m->comp == cx->comp)
        return m->pid;
    IrInstr *pid;
    if (st->n_groups == 0) {
        IrShape s = ir_shape_make(cx->arena, IR_DT_U32, NULL, 0);
        pid = spmd_emit_op(cx, IR_OP_PARTITION_ID, &s, NULL, 0);
    } else {
        /* in-group index of every outer device */
        int64_t n = st->outer->num_partitions;
        int64_t *tbl = SL_NEW_ARRAY(cx->arena, int64_t, n);
        if (!tbl)
            return NULL;
        for (int64_t g = 0; g < st->n_groups; g++)
            for (int64_t k = 0; k < st->group_size; k++) {
                int64_t d = st->device_groups[g * st->group_size + k];
                if (d >= 0 && d < n)
                    tbl[d] = k;
            }
        pid = spmd_table_lookup(cx, st->outer, tbl, n, IR_DT_U32);
    }
    m->pid = pid;
    m->comp = cx->comp;
    return pid;
}

IrInstr *
spmd_table_lookup(SpmdCtx *cx, const SpmdState *st, const int64_t *table, int64_t n, IrDtype t)
{
    return spmd_table_lookup_at(cx, spmd_partition_id(cx, st), table, n, t);
}

IrInstr *
spmd_table_lookup_at(SpmdCtx *cx, IrInstr *pid, const int64_t *table, int64_t n, IrDtype t)
{
    if (!pid)
        return NULL;
    IrInstr *tbl = t == IR_DT_U32 ? spmd_emit_constant_u32_array(cx, table, (uint32_t)n)
                                  : spmd_emit_constant_s32_array(cx, table, (uint32_t)n);
    int64_t one = 1;
    IrInstr *ds = spmd_emit_dynamic_slice(cx, tbl, &pid, &one);
    if (ds == tbl && ds) { /* a one-entry table: dynamic_slice elided; keep the shape rule */
        IrShape s1 = ir_shape_make(cx->arena, t, &one, 1);
        IrInstr *ops[2] = {tbl, pid};
        IrInstr *i = ir_instr_new(cx->out, IR_OP_DYNAMIC_SLICE, &s1, ops, 2);
        IrAttr *a = i ? ir_instr_add_attr(cx->out, i, IR_ATTR_DYNAMIC_SLICE_SIZES) : NULL;
        int64_t *v = SL_NEW(cx->arena, int64_t);
        if (!a || !v)
            return NULL;
        *v = 1;
        a->u.ints.n = 1;
        a->u.ints.v = v;
        ds = spmd_emit(cx, i, NULL);
    }
    return spmd_emit_reshape(cx, ds, NULL, 0);
}

IrInstr *
spmd_partition_ordinal(SpmdCtx *cx, const SpmdState *st, const ShdSharding *s, uint32_t dim)
{
    int64_t n = st->num_partitions;
    int64_t *tbl = SL_NEW_ARRAY(cx->arena, int64_t, n);
    int64_t idx[64];
    if (!tbl || shd_data_rank(s) > SL_COUNTOF(idx))
        return NULL;
    for (int64_t d = 0; d < n; d++)
        tbl[d] = shd_tile_index(s, d, idx) ? idx[dim] : 0;
    return spmd_table_lookup(cx, st, tbl, n, IR_DT_S32);
}

IrInstr *
spmd_partition_offset(SpmdCtx *cx, const SpmdState *st, const ShdSharding *s,
                      const IrShape *base, uint32_t dim)
{
    int64_t shards = shd_is_tiled(s) ? shd_dim_shards(s, dim) : 1;
    if (shards <= 1)
        return spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
    int64_t per = (base->dims[dim] + shards - 1) / shards;
    int64_t n = st->num_partitions;
    int64_t *tbl = SL_NEW_ARRAY(cx->arena, int64_t, n);
    int64_t idx[64];
    if (!tbl || shd_data_rank(s) > SL_COUNTOF(idx))
        return NULL;
    for (int64_t d = 0; d < n; d++)
        tbl[d] = shd_tile_index(s, d, idx) ? idx[dim] * per : 0;
    return spmd_table_lookup(cx, st, tbl, n, IR_DT_S32);
}

SlStatus
spmd_partition_offsets(SpmdCtx *cx, const SpmdState *st, const ShdSharding *s,
                       const IrShape *base, IrInstr **out, SlError *err)
{
    IrInstr *zero = NULL;
    for (uint32_t d = 0; d < base->rank; d++) {
        if (!shd_is_tiled(s) || shd_dim_shards(s, d) <= 1) {
            if (!zero)
                zero = spmd_emit_constant_scalar(cx, IR_DT_S32, 0);
            out[d] = zero;
        } else {
            out[d] = spmd_partition_offset(cx, st, s, base, d);
        }
        if (!out[d])
            return spmd_nomem(cx, err);
    }
    return SL_OK;
}

SlStatus
spmd_groups_for_dims(SpmdCtx *cx, const ShdSharding *s, const int64_t *dims, uint32_t n,
                     IrReplicaGroups *out, SlError *err)
{
    memset(out, 0, sizeof(*out));
    SlStatus st = shd_replica_groups_for_dims(cx->arena, s, dims, n, out);
    if (st != SL_OK)
        return spmd_fail(cx, err, st, "cannot form replica groups");
    return SL_OK;
}

/* XLA partitions an instruction with an unreduced sharding as replicated and tags its local
 * op: the all-reduce that would sum the partial values is skipped for that op (the tag
 * travels only to emitted instructions of the source's own opcode). */
static bool
keeps_partial_values(const SpmdCtx *cx, const IrInstr *x)
{
    const IrInstr *src = cx->visiting;
    if (!src || x->derived_from != src || x->op != src->op)
        return false;
    return shd_is_unreduced(ir_instr_sharding(src));
}

IrInstr *
spmd_all_reduce_along_dims(SpmdCtx *cx, const SpmdState *st, IrInstr *x, const ShdSharding *s,
                           const int64_t *dims, uint32_t n, IrComputation *reducer)
{
    if (x && keeps_partial_values(cx, x))
        return x;
    /* upstream's base partitioner (per_dim_ar = true): one all-reduce per sharded dim, last
     * listed dim first, each over the devices that differ only in that dim */
    for (uint32_t k = n; k-- > 0 && x;) {
        if (shd_dim_shards(s, (uint32_t)dims[k]) <= 1)
            continue;
        IrReplicaGroups g;
        memset(&g, 0, sizeof(g));
        if (shd_replica_groups_for_dims(cx->arena, s, &dims[k], 1, &g) != SL_OK)
            return NULL;
        x = spmd_coll_all_reduce(cx, st, x, reducer, &g);
    }
    return x;
}

const SpmdState *
spmd_state_grouped(SpmdCtx *cx, const SpmdState *outer, const int64_t *groups, int64_t n_groups,
                   int64_t group_size)
{
    SpmdState *s = SL_NEW(cx->arena, SpmdState);
    SpmdStateMemo *m = SL_NEW(cx->arena, SpmdStateMemo);
    int64_t *g = SL_DUP_ARRAY(cx->arena, int64_t, groups, n_groups * group_size);
    if (!s || !m || !g)
        return NULL;
    s->num_partitions = group_size;
    s->n_groups = n_groups;
    s->group_size = group_size;
    s->device_groups = g;
    s->outer = outer;
    s->memo = m;
    return s;
}
