/* dot_alternatives.c - what the dot strategies the engine passed over would have cost, for the
 * decision it records. Owns: for each alternative, what it needs that this problem does not
 * have (the reason it lost), and the bytes each device would send if it were made to apply:
 * the collectives its reshards would need, priced by the ring model of reports/cost.c
 * (all-gather and all-to-all (g-1)/g*S, all-reduce 2(g-1)/g*S, collective-permute S).
 * Does not own: choosing (handle_dot.c keeps GSPMD's fixed order) or emitting anything: this
 * is sharding arithmetic only, and leaves nothing in the output module.
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

typedef struct Alt {
    bool priced;     /* the plan is what making it apply would need */
    Plan plan;
    char needs[200]; /* what the strategy needs that this problem does not have */
} Alt;

/* Reshards both operands to `lt` and `rt` (NULL: replicated). */
static void
price_both(SpmdCtx *cx, const DotProblem *p, const ShdSharding *lt, const ShdSharding *rt,
           Alt *a)
{
    a->priced = true;
    price_reshard(cx, p->lhs.hlo, p->lhs.base_shape, p->lhs.sharding, lt, &a->plan);
    price_reshard(cx, p->rhs.hlo, p->rhs.base_shape, p->rhs.sharding, rt, &a->plan);
}

/* Fills `a` for strategy `s` of problem `p`. */
static void
describe(SpmdCtx *cx, const DotJob *job, const DotProblem *p, const DotCounts *c, DotStrategy s,
         Alt *a)
{
    const DotDims *d = &job->dims;
    memset(a, 0, sizeof(*a));
    long long n = (long long)c->n;
    switch (s) {
    case DOT_S_CONV:
        snprintf(a->needs, sizeof(a->needs), "a convolution case of its own");
        return;
    case DOT_S_BATCH_PARALLEL:
        snprintf(a->needs, sizeof(a->needs),
                 "both operands split alike on batch dims only, over all %lld devices", n);
        return;
    case DOT_S_BATCH_RESHARD_CHEAP:
    case DOT_S_BATCH_RESHARD:
        snprintf(a->needs, sizeof(a->needs),
                 "the output and an operand split alike on batch dims over all %lld devices%s", n,
                 s == DOT_S_BATCH_RESHARD_CHEAP ? ", the other operand within a permute or "
                                                  "all-to-all"
                                                : "");
        return;
    case DOT_S_WINDOWED:
        snprintf(a->needs, sizeof(a->needs),
                 "a ring-shaped sharding and an operand or output of at least %lld MiB "
                 "(threshold_for_windowed_einsum_mib)",
                 (long long)cx->opts->threshold_for_windowed_einsum_mib);
        return;
    case DOT_S_LHS_MATCHES_OUT:
    case DOT_S_RHS_MATCHES_OUT: {
        bool lhs = s == DOT_S_LHS_MATCHES_OUT;
        snprintf(a->needs, sizeof(a->needs),
                 "the %s split like the output on its free dims over all %lld devices (%lld and "
                 "%lld ways here)",
                 lhs ? "lhs" : "rhs", n, (long long)(lhs ? c->lnc : c->rnc),
                 (long long)(lhs ? c->olnc : c->ornc));
        const ShdSharding *me = spmd_dot_infer_operand(cx, d, p->out, lhs ? DOT_LHS : DOT_RHS);
        if (me)
            price_both(cx, p, lhs ? me : NULL, lhs ? NULL : me, a);
        return;
    }
    case DOT_S_GROUP_BATCH:
        snprintf(a->needs, sizeof(a->needs), "batch dims split on the operands and the output");
        return;
    case DOT_S_GROUP_NC:
        snprintf(a->needs, sizeof(a->needs), "an operand split like the output on its free dims");
        return;
    case DOT_S_GROUP_CONTRACTING:
        snprintf(a->needs, sizeof(a->needs), "both operands split alike on contracting dims");
        return;
    case DOT_S_REMOVE_PARTIAL:
        snprintf(a->needs, sizeof(a->needs), "a partially replicated output");
        return;
    case DOT_S_OUT_BATCH:
    case DOT_S_OUT_LHS_NC:
    case DOT_S_OUT_RHS_NC: {
        int64_t have = s == DOT_S_OUT_BATCH ? c->ob : s == DOT_S_OUT_LHS_NC ? c->olnc : c->ornc;
        snprintf(a->needs, sizeof(a->needs),
                 "the output split on %s dims over all %lld devices (%lld ways here)",
                 s == DOT_S_OUT_BATCH    ? "batch"
                 : s == DOT_S_OUT_LHS_NC ? "lhs free"
                                         : "rhs free",
                 n, (long long)have);
        const ShdSharding *o2l = spmd_dot_seen_from(cx, d, p->out, DOT_OUT, DOT_LHS);
        const ShdSharding *o2r = spmd_dot_seen_from(cx, d, p->out, DOT_OUT, DOT_RHS);
        if (o2l && o2r && shd_is_tiled(p->out))
            price_both(cx, p, s == DOT_S_OUT_RHS_NC ? NULL : o2l,
                       s == DOT_S_OUT_LHS_NC ? NULL : o2r, a);
        return;
    }
    case DOT_S_REPLICATED_OUT_CONTRACTING:
        snprintf(a->needs, sizeof(a->needs),
                 "a replicated output and a larger operand split on contracting dims");
        return;
    case DOT_S_INFER_FROM_OUTPUT: {
        snprintf(a->needs, sizeof(a->needs), "no earlier strategy to apply");
        const ShdSharding *lt = spmd_dot_infer_operand(cx, d, p->out, DOT_LHS);
        const ShdSharding *rt = spmd_dot_infer_operand(cx, d, p->out, DOT_RHS);
        if (lt && rt)
            price_both(cx, p, lt, rt, a);
        return;
    }
    case DOT_S_REPLICATE:
        snprintf(a->needs, sizeof(a->needs), "no other strategy to apply");
        price_both(cx, p, NULL, NULL, a);
        return;
    case DOT_S_COUNT:
        return;
    }
}

uint32_t
spmd_dot_alternative_numbers(SpmdCtx *cx, const DotJob *job, const DotProblem *p,
                             DotStrategy chosen, const char *const *names, TraceKV *out,
                             uint32_t cap)
{
    DotCounts c;
    spmd_dot_counts(job, p, &c);
    int first = job->conv_case ? DOT_S_CONV : DOT_S_BATCH_PARALLEL;
    uint32_t n = 0;
    if (c.n <= 1)
        return 0; /* one device: nothing to choose between */
    for (int s = first; s < DOT_S_COUNT && n + 3 <= cap; s++) {
        /* the strategies tried before the chosen one, and the last resort */
        if (s == (int)chosen || (s > (int)chosen && s != DOT_S_REPLICATE))
            continue;
        Alt a;
        describe(cx, job, p, &c, (DotStrategy)s, &a);
        const char *name = names[s];
        size_t klen = strlen(name) + 24;
        char *k_bytes = sl_arena_alloc(&cx->scratch, klen, 1);
        char *k_plan = sl_arena_alloc(&cx->scratch, klen, 1);
        char *k_needs = sl_arena_alloc(&cx->scratch, klen, 1);
        char *plan = sl_arena_alloc(&cx->scratch, sizeof(a.plan.text), 1);
        char *needs = sl_arena_alloc(&cx->scratch, sizeof(a.needs), 1);
        if (!k_bytes || !k_plan || !k_needs || !plan || !needs)
            return n;
        snprintf(k_bytes, klen, "alt.%s.device_bytes", name);
        snprintf(k_plan, klen, "alt.%s.plan", name);
        snprintf(k_needs, klen, "alt.%s.needs", name);
        memcpy(plan, a.plan.text, sizeof(a.plan.text));
        memcpy(needs, a.needs, sizeof(a.needs));
        if (!a.plan.len)
            snprintf(plan, sizeof(a.plan.text), "no collective");
        if (a.priced) {
            out[n++] = (TraceKV){k_bytes, a.plan.device_bytes, NULL};
            out[n++] = (TraceKV){k_plan, 0, plan};
        }
        out[n++] = (TraceKV){k_needs, 0, needs};
    }
    return n;
}
