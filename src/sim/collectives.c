/* collectives.c - the simulator's communication: all-reduce, all-gather, reduce-scatter,
 * all-to-all (array and tuple forms), collective-permute and collective-broadcast, exchanging
 * the real operands of every participating device. Owns: XLA's replica-group semantics
 * (hlo-text.md §10: list and iota groups, empty = all, the four group modes) and the checks
 * that make a broken program fail loudly: a device in no group or twice, a group member that
 * is not executing this instruction (devices diverged: a deadlock on hardware).
 * Invariant: replica_count is 1 (checked by sim_run), so replica ids are all 0. */
#include "sim/sim_int.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

bool
sim_is_collective(IrOp op)
{
    return op == IR_OP_ALL_REDUCE || op == IR_OP_ALL_GATHER || op == IR_OP_REDUCE_SCATTER ||
           op == IR_OP_ALL_TO_ALL || op == IR_OP_COLLECTIVE_PERMUTE ||
           op == IR_OP_COLLECTIVE_BROADCAST;
}

typedef struct Groups {
    uint32_t n;        /* groups */
    int64_t *start;    /* n + 1 offsets into ids */
    int64_t *ids;      /* device ids, group after group */
    int64_t *group_of; /* device -> group, -1 when in none */
    int64_t *pos_of;   /* device -> position in its group */
    int64_t *lane_of;  /* device -> lane, -1 when not executing */
} Groups;

static void
groups_fini(Groups *g)
{
    free(g->start);
    free(g->ids);
    free(g->group_of);
    free(g->pos_of);
    free(g->lane_of);
}

static SlStatus
groups_alloc(SimCtx *cx, const IrInstr *ins, Groups *g, uint32_t n, int64_t total)
{
    int64_t N = cx->n_devices;
    g->n = n;
    g->start = calloc(n + 1, sizeof *g->start);
    g->ids = calloc((size_t)total + 1, sizeof *g->ids);
    g->group_of = malloc((size_t)N * sizeof *g->group_of);
    g->pos_of = calloc((size_t)N, sizeof *g->pos_of);
    g->lane_of = malloc((size_t)N * sizeof *g->lane_of);
    if (!g->start || !g->ids || !g->group_of || !g->pos_of || !g->lane_of)
        return sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    for (int64_t d = 0; d < N; d++)
        g->group_of[d] = g->lane_of[d] = -1;
    return SL_OK;
}

/* The listed ids as written (iota expanded); `*is_all` for the empty list. */
static SlStatus
read_groups(SimCtx *cx, const IrInstr *ins, Groups *g, bool *is_all)
{
    const IrAttr *a = ir_instr_find_attr(ins, IR_ATTR_REPLICA_GROUPS);
    const IrReplicaGroups *rg = a ? a->u.groups : NULL;
    *is_all = !rg || (!rg->is_iota && rg->n_groups == 0);
    if (*is_all)
        return groups_alloc(cx, ins, g, 0, 0);
    if (rg->is_iota) {
        if (rg->iota.n_dims != 2)
            return sim_fail(cx, ins, SL_ERR_INVALID, "iota replica groups need [G,M]");
        SlStatus st = groups_alloc(cx, ins, g, (uint32_t)rg->iota.dims[0], ir_iota_count(&rg->iota));
        if (st)
            return st;
        ir_iota_expand(&rg->iota, g->ids);
        for (uint32_t i = 0; i <= g->n; i++)
            g->start[i] = i * rg->iota.dims[1];
        return SL_OK;
    }
    int64_t total = 0;
    for (uint32_t i = 0; i < rg->n_groups; i++)
        total += rg->group_sizes[i];
    SlStatus st = groups_alloc(cx, ins, g, rg->n_groups, total);
    if (st)
        return st;
    memcpy(g->ids, rg->ids, (size_t)total * sizeof *g->ids);
    for (uint32_t i = 0; i < g->n; i++)
        g->start[i + 1] = g->start[i] + rg->group_sizes[i];
    return SL_OK;
}

/* Rewrites the groups to partition ids by the mode of hlo-text.md §10 (replica_count 1). */
static SlStatus
apply_mode(SimCtx *cx, const IrInstr *ins, Groups *g, bool is_all)
{
    bool has_channel = ir_instr_find_attr(ins, IR_ATTR_CHANNEL_ID) != NULL;
    const IrAttr *flag = ir_instr_find_attr(ins, IR_ATTR_USE_GLOBAL_DEVICE_IDS);
    bool global = flag && flag->u.b;
    bool flag_op = ins->op == IR_OP_ALL_REDUCE || ins->op == IR_OP_ALL_GATHER ||
                   ins->op == IR_OP_REDUCE_SCATTER;
    bool replica_ids = !has_channel || (flag_op && !global);
    int64_t N = cx->n_devices;
    for (int64_t i = 0; replica_ids && i < g->start[g->n]; i++)
        if (g->ids[i] != 0)
            return sim_fail(cx, ins, SL_ERR_INVALID,
                            "replica id %" PRId64 " in replica_groups, but replica_count is 1",
                            g->ids[i]);
    if (replica_ids || is_all) {
        /* cross_replica: every partition alone; otherwise one group of every partition */
        bool alone = !has_channel;
        groups_fini(g);
        memset(g, 0, sizeof *g);
        SlStatus st = groups_alloc(cx, ins, g, alone ? (uint32_t)N : 1, N);
        for (int64_t d = 0; !st && d < N; d++)
            g->ids[d] = d;
        for (uint32_t i = 0; !st && i <= g->n; i++)
            g->start[i] = alone ? i : (int64_t)i * N;
        return st;
    }
    return SL_OK;
}

static SlStatus
resolve_groups(SimCtx *cx, const IrInstr *ins, const int64_t *devs, uint32_t n_lanes, Groups *g)
{
    bool is_all;
    memset(g, 0, sizeof *g);
    SlStatus st = read_groups(cx, ins, g, &is_all);
    if (!st)
        st = apply_mode(cx, ins, g, is_all);
    for (uint32_t i = 0; !st && i < g->n; i++) {
        for (int64_t j = g->start[i]; j < g->start[i + 1]; j++) {
            int64_t d = g->ids[j];
            if (d < 0 || d >= cx->n_devices)
                return sim_fail(cx, ins, SL_ERR_INVALID, "device %" PRId64 " in replica_groups "
                                "is out of range for %" PRId64 " devices", d, cx->n_devices);
            if (g->group_of[d] >= 0)
                return sim_fail(cx, ins, SL_ERR_INVALID,
                                "device %" PRId64 " appears twice in replica_groups", d);
            g->group_of[d] = i;
            g->pos_of[d] = j - g->start[i];
        }
    }
    for (uint32_t l = 0; !st && l < n_lanes; l++) {
        g->lane_of[devs[l]] = l;
        if (g->group_of[devs[l]] < 0)
            return sim_fail(cx, ins, SL_ERR_INVALID, "device %" PRId64 " is in no replica group",
                            devs[l]);
    }
    for (uint32_t l = 0; !st && l < n_lanes; l++) {
        int64_t gi = g->group_of[devs[l]];
        for (int64_t j = g->start[gi]; j < g->start[gi + 1]; j++)
            if (g->lane_of[g->ids[j]] < 0)
                return sim_fail(cx, ins, SL_ERR_INVALID,
                                "deadlock: device %" PRId64 " waits for device %" PRId64
                                " of its group, which is not executing this collective "
                                "(devices diverged in control flow)", devs[l], g->ids[j]);
    }
    return st;
}

/* ---- the operations, one group at a time ----------------------------------------------- */

typedef struct Coll {
    SimCtx *cx;
    const IrInstr *ins;
    SimValue *const *ops; /* [lane * k + j] */
    uint32_t k;           /* operands */
    SimValue **out;       /* [lane] */
    const int64_t *devs;
    Groups g;
} Coll;

static SimValue *
member_op(const Coll *c, uint32_t gi, int64_t m, uint32_t j)
{
    int64_t d = c->g.ids[c->g.start[gi] + m];
    return c->ops[(size_t)c->g.lane_of[d] * c->k + j];
}

static int64_t
group_size(const Coll *c, uint32_t gi)
{
    return c->g.start[gi + 1] - c->g.start[gi];
}

/* Elementwise reduction of operand j over the group, in group order. */
static SlStatus
reduce_group(Coll *c, uint32_t gi, uint32_t j, SimValue **res)
{
    const IrComputation *body = ir_instr_called(c->ins, IR_ATTR_TO_APPLY);
    if (!body)
        return sim_fail(c->cx, c->ins, SL_ERR_INVALID, "missing to_apply");
    SimValue *acc = sim_value_copy(member_op(c, gi, 0, j));
    if (!acc)
        return sim_fail(c->cx, c->ins, SL_ERR_NOMEM, "out of memory");
    SlStatus st = SL_OK;
    for (int64_t m = 1; !st && m < group_size(c, gi); m++) {
        const SimValue *x = member_op(c, gi, m, j);
        if (x->n != acc->n)
            st = sim_fail(c->cx, c->ins, SL_ERR_INVALID, "group members disagree on the shape");
        for (int64_t i = 0; !st && i < acc->n; i++)
            st = sim_apply2(c->cx, c->ins, body, acc->dtype, acc->data[i], x->data[i],
                            &acc->data[i]);
    }
    if (st) {
        sim_value_unref(acc);
        return st;
    }
    *res = acc;
    return SL_OK;
}

/* Copies block `blk` of size len along `dim` between arrays of equal rank: dst[.., dst_at+i, ..]
 * = src[.., src_at+i, ..] for i < len. */
static void
copy_along(SimValue *dst, int64_t dst_at, const SimValue *src, int64_t src_at, uint32_t dim,
           int64_t len)
{
    int64_t outer = 1, inner = 1;
    for (uint32_t d = 0; d < dim; d++)
        outer *= src->dims[d];
    for (uint32_t d = dim + 1; d < src->rank; d++)
        inner *= src->dims[d];
    for (int64_t o = 0; o < outer; o++)
        memcpy(dst->data + (o * dst->dims[dim] + dst_at) * inner,
               src->data + (o * src->dims[dim] + src_at) * inner,
               (size_t)(len * inner) * sizeof *dst->data);
}

static int64_t
coll_dim(const IrInstr *ins)
{
    const int64_t *dims;
    return ir_instr_ints_attr(ins, IR_ATTR_DIMENSIONS, &dims) == 1 ? dims[0] : -1;
}

/* One result per member for operand j of group gi: all-reduce / all-gather / reduce-scatter /
 * collective-broadcast share one value per group, except reduce-scatter's slices. */
static SlStatus
group_result(Coll *c, uint32_t gi, uint32_t j, int64_t m, SimValue *shared, SimValue **res)
{
    const IrShape *rs = c->ins->shape.dtype == IR_DT_TUPLE ? &c->ins->shape.elems[j]
                                                           : &c->ins->shape;
    if (c->ins->op != IR_OP_REDUCE_SCATTER) {
        *res = sim_value_ref(shared);
        return SL_OK;
    }
    int64_t dim = coll_dim(c->ins);
    SimValue *r = sim_value_new_array(shared->dtype, rs->dims, rs->rank);
    if (!r)
        return sim_fail(c->cx, c->ins, SL_ERR_NOMEM, "out of memory");
    if (dim < 0 || dim >= r->rank || r->dims[dim] * group_size(c, gi) != shared->dims[dim]) {
        sim_value_unref(r);
        return sim_fail(c->cx, c->ins, SL_ERR_INVALID, "reduce-scatter dimension does not fit");
    }
    copy_along(r, 0, shared, m * r->dims[dim], (uint32_t)dim, r->dims[dim]);
    *res = r;
    return SL_OK;
}

static SlStatus
gather_group(Coll *c, uint32_t gi, uint32_t j, SimValue **res)
{
    const IrShape *rs = c->ins->shape.dtype == IR_DT_TUPLE ? &c->ins->shape.elems[j]
                                                           : &c->ins->shape;
    int64_t dim = coll_dim(c->ins), at = 0;
    const SimValue *x0 = member_op(c, gi, 0, j);
    SimValue *r = sim_value_new_array(x0->dtype, rs->dims, rs->rank);
    if (!r)
        return sim_fail(c->cx, c->ins, SL_ERR_NOMEM, "out of memory");
    bool ok = dim >= 0 && dim < r->rank && x0->rank == r->rank &&
              x0->dims[dim] * group_size(c, gi) == r->dims[dim];
    for (int64_t m = 0; ok && m < group_size(c, gi); m++) {
        const SimValue *x = member_op(c, gi, m, j);
        copy_along(r, at, x, 0, (uint32_t)dim, x->dims[dim]);
        at += x->dims[dim];
    }
    if (!ok) {
        sim_value_unref(r);
        return sim_fail(c->cx, c->ins, SL_ERR_INVALID, "all-gather dimension does not fit");
    }
    *res = r;
    return SL_OK;
}

/* all-reduce, all-gather, reduce-scatter, collective-broadcast over operand j of group gi:
 * writes each member's value into res[lane]. */
static SlStatus
shared_op(Coll *c, uint32_t gi, uint32_t j, SimValue **res)
{
    SimValue *shared = NULL;
    SlStatus st;
    if (c->ins->op == IR_OP_ALL_GATHER)
        st = gather_group(c, gi, j, &shared);
    else if (c->ins->op == IR_OP_COLLECTIVE_BROADCAST)
        st = (shared = sim_value_ref(member_op(c, gi, 0, j))) ? SL_OK : SL_ERR_INTERNAL;
    else
        st = reduce_group(c, gi, j, &shared);
    for (int64_t m = 0; !st && m < group_size(c, gi); m++) {
        int64_t lane = c->g.lane_of[c->g.ids[c->g.start[gi] + m]];
        st = group_result(c, gi, j, m, shared, &res[lane]);
    }
    sim_value_unref(shared);
    return st;
}

/* all-to-all with dimensions={d}: member p's chunk q goes to member q, which concatenates the
 * chunks it receives in member order. */
static SlStatus
all_to_all_array(Coll *c, uint32_t gi, SimValue **res)
{
    int64_t dim = coll_dim(c->ins), gs = group_size(c, gi);
    const SimValue *x0 = member_op(c, gi, 0, 0);
    if (dim < 0 || dim >= x0->rank || x0->dims[dim] % gs)
        return sim_fail(c->cx, c->ins, SL_ERR_INVALID, "all-to-all dimension does not split");
    int64_t chunk = x0->dims[dim] / gs;
    for (int64_t q = 0; q < gs; q++) {
        int64_t lane = c->g.lane_of[c->g.ids[c->g.start[gi] + q]];
        SimValue *r = sim_value_like(x0);
        if (!r)
            return sim_fail(c->cx, c->ins, SL_ERR_NOMEM, "out of memory");
        for (int64_t p = 0; p < gs; p++)
            copy_along(r, p * chunk, member_op(c, gi, p, 0), q * chunk, (uint32_t)dim, chunk);
        res[lane] = r;
    }
    return SL_OK;
}

/* Tuple form: k operands, k = group size; member p's operand q goes to member q as element p. */
static SlStatus
all_to_all_tuple(Coll *c, uint32_t gi, SimValue **res)
{
    int64_t gs = group_size(c, gi);
    if ((int64_t)c->k != gs || gs > SIM_MAX_RANK * SIM_MAX_RANK)
        return sim_fail(c->cx, c->ins, SL_ERR_INVALID, "tuple all-to-all needs one operand per "
                        "group member (%u operands, group of %" PRId64 ")", c->k, gs);
    SimValue **parts = calloc((size_t)gs, sizeof *parts);
    if (!parts)
        return sim_fail(c->cx, c->ins, SL_ERR_NOMEM, "out of memory");
    for (int64_t q = 0; q < gs; q++) {
        for (int64_t p = 0; p < gs; p++)
            parts[p] = member_op(c, gi, p, (uint32_t)q);
        int64_t lane = c->g.lane_of[c->g.ids[c->g.start[gi] + q]];
        res[lane] = sim_value_new_tuple(parts, (uint32_t)gs);
        if (!res[lane]) {
            free(parts);
            return sim_fail(c->cx, c->ins, SL_ERR_NOMEM, "out of memory");
        }
    }
    free(parts);
    return SL_OK;
}

static SlStatus
collective_permute(Coll *c, uint32_t n_lanes)
{
    const IrAttr *a = ir_instr_find_attr(c->ins, IR_ATTR_SOURCE_TARGET_PAIRS);
    int64_t N = c->cx->n_devices;
    if (c->k != 1 || c->ops[0]->dtype == IR_DT_TUPLE)
        return sim_fail(c->cx, c->ins, SL_ERR_UNSUPPORTED, "collective-permute of tuples");
    for (uint32_t l = 0; l < n_lanes; l++)
        c->g.lane_of[c->devs[l]] = l;
    uint32_t n = a ? a->u.lists.n : 0;
    for (uint32_t p = 0; p < n; p++) {
        if (a->u.lists.sizes[p] != 2)
            return sim_fail(c->cx, c->ins, SL_ERR_INVALID, "source_target_pairs need pairs");
        int64_t s = a->u.lists.v[2 * p], t = a->u.lists.v[2 * p + 1];
        if (s < 0 || t < 0 || s >= N || t >= N)
            return sim_fail(c->cx, c->ins, SL_ERR_INVALID, "pair {%" PRId64 ",%" PRId64
                            "} is out of range for %" PRId64 " devices", s, t, N);
        int64_t sl = c->g.lane_of[s], tl = c->g.lane_of[t];
        if ((sl < 0) != (tl < 0))
            return sim_fail(c->cx, c->ins, SL_ERR_INVALID,
                            "deadlock: device %" PRId64 " sends to device %" PRId64
                            " but only one of them executes this collective", s, t);
        if (tl >= 0 && c->out[tl])
            return sim_fail(c->cx, c->ins, SL_ERR_INVALID,
                            "device %" PRId64 " is the target of two pairs", t);
        if (tl >= 0)
            c->out[tl] = sim_value_ref(c->ops[sl]);
    }
    for (uint32_t l = 0; l < n_lanes; l++)
        if (!c->out[l] && !(c->out[l] = sim_value_like(c->ops[l])))
            return sim_fail(c->cx, c->ins, SL_ERR_NOMEM, "out of memory");
    return SL_OK;
}

/* Runs operand j of every group; `parts` collects per-lane results for tuple outputs. */
static SlStatus
run_groups(Coll *c, uint32_t n_lanes, SimValue **parts)
{
    SlStatus st = SL_OK;
    bool tuple_out = c->ins->shape.dtype == IR_DT_TUPLE;
    for (uint32_t j = 0; !st && j < c->k; j++) {
        SimValue **res = tuple_out ? parts + (size_t)j * n_lanes : c->out;
        for (uint32_t gi = 0; !st && gi < c->g.n; gi++) {
            if (c->g.lane_of[c->g.ids[c->g.start[gi]]] < 0)
                continue; /* none of this group runs here */
            if (c->ins->op == IR_OP_ALL_TO_ALL)
                st = coll_dim(c->ins) < 0 ? all_to_all_tuple(c, gi, c->out)
                                          : all_to_all_array(c, gi, res);
            else
                st = shared_op(c, gi, j, res);
        }
        if (c->ins->op == IR_OP_ALL_TO_ALL && coll_dim(c->ins) < 0)
            return st;
    }
    for (uint32_t l = 0; !st && tuple_out && l < n_lanes; l++) {
        SimValue *el[SIM_MAX_RANK];
        for (uint32_t j = 0; j < c->k; j++)
            el[j] = parts[(size_t)j * n_lanes + l];
        if (!(c->out[l] = sim_value_new_tuple(el, c->k)))
            st = sim_fail(c->cx, c->ins, SL_ERR_NOMEM, "out of memory");
    }
    return st;
}

SlStatus
sim_eval_collective(SimCtx *cx, const IrInstr *ins, const int64_t *devs, uint32_t n_lanes,
                    SimValue *const *ops, SimValue **out)
{
    Coll c = {cx, ins, ops, ins->n_operands, out, devs, {0}};
    bool tuple_out = ins->shape.dtype == IR_DT_TUPLE;
    if (c.k == 0 || (tuple_out && ins->op != IR_OP_ALL_TO_ALL && c.k > SIM_MAX_RANK) ||
        (tuple_out && ins->op != IR_OP_ALL_TO_ALL && ins->shape.n_elems != c.k))
        return sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "collective operand form");
    for (uint32_t i = 0; i < n_lanes * c.k; i++)
        if (ops[i]->dtype == IR_DT_TUPLE)
            return sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "tuple-shaped collective operands");
    SlStatus st;
    if (ins->op == IR_OP_COLLECTIVE_PERMUTE) {
        st = groups_alloc(cx, ins, &c.g, 0, 0);
        if (!st)
            st = collective_permute(&c, n_lanes);
        groups_fini(&c.g);
        return st;
    }
    SimValue **parts = calloc((size_t)n_lanes * c.k + 1, sizeof *parts);
    st = parts ? resolve_groups(cx, ins, devs, n_lanes, &c.g)
               : sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
    if (!st)
        st = run_groups(&c, n_lanes, parts);
    for (size_t i = 0; parts && i < (size_t)n_lanes * c.k; i++)
        sim_value_unref(parts[i]);
    free(parts);
    groups_fini(&c.g);
    return st;
}
