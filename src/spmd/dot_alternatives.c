/* dot_alternatives.c - what the dot strategies the engine passed over would have cost, for the
 * decision it records. Owns: for each alternative that resharding the operands would make
 * apply, the bytes each device would send for those reshards: the collectives the reshard
 * planner's main cases use, priced by the ring model of reports/cost.c (all-gather and
 * all-to-all (g-1)/g*S, collective-permute S). Does not own: choosing (handle_dot.c keeps
 * GSPMD's fixed order), the words for what an alternative needs (explain.c builds them from
 * the partition counts the decision records), or emitting anything: this is sharding
 * arithmetic only, and leaves nothing in the output module.
 * Invariant: only alternatives to the chosen strategy are listed, never the chosen one. */
#include "spmd/dot_int.h"

#include <stdio.h>
#include <string.h>

/* A reshard plan being priced: the bytes each device sends and the collectives, in words. */
typedef struct Plan {
    double device_bytes;
    char text[384];
    size_t len;
} Plan;

static void
plan_add(Plan *pl, const char *what, const IrInstr *v, int64_t g, double bytes)
{
    pl->device_bytes += bytes;
    if (pl->len + 1 >= sizeof(pl->text))
        return;
    if (v && v->derived_from)
        v = v->derived_from; /* name the input instruction, as explain does */
    SlBuf size;
    sl_buf_init(&size);
    sl_buf_put_size(&size, bytes);
    int n = snprintf(pl->text + pl->len, sizeof(pl->text) - pl->len, "%s%s of %%%s over %lld: %s",
                     pl->len ? "; " : "", what, v ? sl_sym_cstr(v->name) : "?", (long long)g,
                     size.data ? size.data : "?");
    sl_buf_fini(&size);
    pl->len = n > 0 ? pl->len + (size_t)n : sizeof(pl->text);
    if (pl->len >= sizeof(pl->text))
        pl->len = sizeof(pl->text) - 1;
}

static int64_t
local_bytes(SpmdCtx *cx, const IrShape *base, const ShdSharding *s)
{
    IrShape l = spmd_local_shape(cx, base, s);
    return ir_shape_byte_size(&l);
}

/* Every data dim of `fine` splits its counterpart of `coarse` into a whole number of pieces. */
static bool
refines(const ShdSharding *fine, const ShdSharding *coarse)
{
    uint32_t r = shd_data_rank(fine);
    if (r != shd_data_rank(coarse))
        return false;
    for (uint32_t d = 0; d < r; d++)
        if (shd_dim_shards(fine, d) % shd_dim_shards(coarse, d) != 0)
            return false;
    return true;
}

/* Prices the reshard of `v` (base shape `base`) from `from` to `to` (NULL: replicated) the way
 * the reshard planner's main cases do it: nothing for equal shardings and for slicing (to a
 * finer or a first sharding), an all-gather to a coarser or replicated one, a permute between
 * tilings of the same shape, an all-to-all between dims, else an all-gather of the whole value
 * and a slice (the planner's last resort). */
static void
price_reshard(SpmdCtx *cx, const IrInstr *v, const IrShape *base, const ShdSharding *from,
              const ShdSharding *to, Plan *pl)
{
    double full = (double)ir_shape_byte_size(base);
    if (!from || shd_is_tile_maximal(from) || (to && shd_equal(from, to)))
        return; /* replicated (or equal) to anything: a local slice at most */
    int64_t t_from = shd_num_tiles(from);
    if (!to || shd_is_tile_maximal(to)) {
        plan_add(pl, "all-gather", v, t_from, (double)(t_from - 1) / (double)t_from * full);
        return;
    }
    int64_t t_to = shd_num_tiles(to);
    if (shd_can_reshard_with_collective_permute(from, to)) {
        plan_add(pl, "collective-permute", v, 2, (double)local_bytes(cx, base, from));
        return;
    }
    int64_t src[SPMD_MAX_RANK], tgt[SPMD_MAX_RANK];
    uint32_t n = shd_all_to_all_dims(from, to, src, tgt, SPMD_MAX_RANK);
    if (n > 0) {
        int64_t g = 1;
        for (uint32_t k = 0; k < n; k++)
            g *= shd_dim_shards(from, (uint32_t)src[k]);
        double s = (double)local_bytes(cx, base, from);
        plan_add(pl, "all-to-all", v, g, (double)(g - 1) / (double)g * s);
        return;
    }
    if (t_to >= t_from && refines(to, from))
        return; /* dynamic-slice */
    if (t_from > t_to && refines(from, to)) {
        int64_t g = t_from / t_to;
        double s = (double)local_bytes(cx, base, to);
        plan_add(pl, "all-gather", v, g, (double)(g - 1) / (double)g * s);
        return;
    }
    plan_add(pl, "all-gather (whole value, then slice)", v, t_from,
             (double)(t_from - 1) / (double)t_from * full);
}

/* Reshards both operands to `lt` and `rt` (NULL: replicated). */
static void
price_both(SpmdCtx *cx, const DotProblem *p, const ShdSharding *lt, const ShdSharding *rt,
           Plan *pl)
{
    price_reshard(cx, p->lhs.hlo, p->lhs.base_shape, p->lhs.sharding, lt, pl);
    price_reshard(cx, p->rhs.hlo, p->rhs.base_shape, p->rhs.sharding, rt, pl);
}

/* Prices strategy `s` of problem `p` when resharding the operands makes it apply: the
 * operand that should match the output is resharded to the sharding the output implies and
 * the other replicated (lhs/rhs matches output), both operands resharded to what the output
 * implies (output-partitioned cases, inference from the output), or both replicated
 * (replicate). False for the strategies whose conditions are about how the operands already
 * relate to each other (batch parallel, grouping, windowed loops): no reshard of one operand
 * defines them. */
static bool
price(SpmdCtx *cx, const DotJob *job, const DotProblem *p, DotStrategy s, Plan *pl)
{
    const DotDims *d = &job->dims;
    switch (s) {
    case DOT_S_LHS_MATCHES_OUT:
    case DOT_S_RHS_MATCHES_OUT: {
        bool lhs = s == DOT_S_LHS_MATCHES_OUT;
        const ShdSharding *me = spmd_dot_infer_operand(cx, d, p->out, lhs ? DOT_LHS : DOT_RHS);
        if (!me)
            return false;
        price_both(cx, p, lhs ? me : NULL, lhs ? NULL : me, pl);
        return true;
    }
    case DOT_S_OUT_BATCH:
    case DOT_S_OUT_LHS_NC:
    case DOT_S_OUT_RHS_NC: {
        const ShdSharding *o2l = spmd_dot_seen_from(cx, d, p->out, DOT_OUT, DOT_LHS);
        const ShdSharding *o2r = spmd_dot_seen_from(cx, d, p->out, DOT_OUT, DOT_RHS);
        if (!o2l || !o2r || !shd_is_tiled(p->out))
            return false;
        price_both(cx, p, s == DOT_S_OUT_RHS_NC ? NULL : o2l, s == DOT_S_OUT_LHS_NC ? NULL : o2r,
                   pl);
        return true;
    }
    case DOT_S_INFER_FROM_OUTPUT: {
        const ShdSharding *lt = spmd_dot_infer_operand(cx, d, p->out, DOT_LHS);
        const ShdSharding *rt = spmd_dot_infer_operand(cx, d, p->out, DOT_RHS);
        if (!lt || !rt)
            return false;
        price_both(cx, p, lt, rt, pl);
        return true;
    }
    case DOT_S_REPLICATE:
        price_both(cx, p, NULL, NULL, pl);
        return true;
    case DOT_S_CONV:
    case DOT_S_BATCH_PARALLEL:
    case DOT_S_BATCH_RESHARD_CHEAP:
    case DOT_S_WINDOWED:
    case DOT_S_BATCH_RESHARD:
    case DOT_S_GROUP_BATCH:
    case DOT_S_GROUP_NC:
    case DOT_S_GROUP_CONTRACTING:
    case DOT_S_REMOVE_PARTIAL:
    case DOT_S_REPLICATED_OUT_CONTRACTING:
    case DOT_S_COUNT:
        return false;
    }
    return false;
}

uint32_t
spmd_dot_alternative_numbers(SpmdCtx *cx, const DotJob *job, const DotProblem *p,
                             DotStrategy chosen, const char *const *names, TraceKV *out,
                             uint32_t cap)
{
    int first = job->conv_case ? DOT_S_CONV : DOT_S_BATCH_PARALLEL;
    uint32_t n = 0;
    if (p->st->num_partitions <= 1)
        return 0; /* one device: nothing to choose between */
    for (int s = first; s < DOT_S_COUNT && n + 2 <= cap; s++) {
        /* the strategies tried before the chosen one, and the last resort */
        if (s == (int)chosen || (s > (int)chosen && s != DOT_S_REPLICATE))
            continue;
        Plan pl;
        memset(&pl, 0, sizeof(pl));
        if (!price(cx, job, p, (DotStrategy)s, &pl))
            continue;
        size_t klen = strlen(names[s]) + 16;
        char *k_bytes = sl_arena_alloc(&cx->scratch, klen, 1);
        char *k_plan = sl_arena_alloc(&cx->scratch, klen, 1);
        char *plan = sl_arena_alloc(&cx->scratch, sizeof(pl.text), 1);
        if (!k_bytes || !k_plan || !plan)
            return n;
        snprintf(k_bytes, klen, "alt.%s.bytes", names[s]);
        snprintf(k_plan, klen, "alt.%s.plan", names[s]);
        snprintf(plan, sizeof(pl.text), "%s", pl.len ? pl.text : "no collective");
        out[n++] = (TraceKV){k_bytes, pl.device_bytes, NULL};
        out[n++] = (TraceKV){k_plan, 0, plan};
    }
    return n;
}
