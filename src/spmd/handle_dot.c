/* handle_dot.c - the dot engine (gspmd.md §E; seeds/000 HandleDot, HandleDotHelper,
 * PartitionDot). Owns: dimension roles (E.1), "sharding seen from another tensor" (E.2), the
 * recursive strategy order (E.3: base case before partial match, group on batch /
 * non-contracting / contracting dims, removal of output partial replication, base case after
 * partial match, inference from the output), the helpers the strategies share, and one
 * decision event per choice. Does not own: the grouping strategies (dot_group.c), collectives
 * (reshard.c, collectives.c), the windowed loop (windowed_einsum.c), convolution windows
 * (handle_conv.c). Invariants: every local dot is emitted by DotJob.create; a strategy checks
 * that it applies (pure sharding arithmetic) before it emits anything. */
#include "spmd/dot_int.h"

#include <string.h>

/* Strategy names, in DotStrategy order (dot_int.h). */
static const char *const k_strategy[DOT_S_COUNT] = {
    "conv_spatial", "batch_parallel", "batch_reshard_without_all_reduce", "windowed_einsum",
    "batch_reshard", "lhs_matches_output_replicate_rhs", "rhs_matches_output_replicate_lhs",
    "group_on_batch", "group_on_non_contracting", "group_on_contracting",
    "remove_output_partial_replication", "output_batch_partitioned",
    "output_lhs_non_contracting_partitioned", "output_rhs_non_contracting_partitioned",
    "replicated_output_sharded_contracting", "infer_operands_from_output", "replicate",
};

/* ---- dimension roles and counts (E.1, E.2) ---- */

int64_t
spmd_dot_dim(const DotDimMap *m, DotSide side)
{
    return side == DOT_LHS ? m->lhs : side == DOT_RHS ? m->rhs : m->out;
}

int64_t
spmd_dot_parts(const ShdSharding *s, const DotDims *d, DotRole role, DotSide side)
{
    if (!s || !shd_is_tiled(s))
        return 1;
    int64_t p = 1;
    for (uint32_t k = 0; k < d->n[role]; k++) {
        int64_t dim = spmd_dot_dim(&d->role[role][k], side);
        if (dim >= 0)
            p *= shd_dim_shards(s, (uint32_t)dim);
    }
    return p;
}

const ShdSharding *
spmd_dot_seen_from(SpmdCtx *cx, const DotDims *d, const ShdSharding *s, DotSide from, DotSide to)
{
    int64_t map[SPMD_MAX_RANK];
    if (!s || d->rank[from] > SPMD_MAX_RANK)
        return NULL;
    if (!shd_is_tiled(s))
        return s;
    for (uint32_t i = 0; i < d->rank[from]; i++)
        map[i] = -1;
    for (int r = 0; r < DOT_ROLE_COUNT; r++)
        for (uint32_t k = 0; k < d->n[r]; k++) {
            int64_t f = spmd_dot_dim(&d->role[r][k], from);
            if (f >= 0)
                map[f] = spmd_dot_dim(&d->role[r][k], to);
        }
    SlArenaMark mark = sl_arena_mark(cx->arena);
    return spmd_keep_sharding(
        cx, mark, shd_transpose_collapsed(cx->arena, s, map, d->rank[from], d->rank[to]));
}

/* The tensor dims of one role on one side, into `out`; returns the count. */
uint32_t
spmd_dot_role_dims(const DotDims *d, DotRole role, DotSide side, int64_t *out)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < d->n[role]; k++) {
        int64_t dim = spmd_dot_dim(&d->role[role][k], side);
        if (dim >= 0)
            out[n++] = dim;
    }
    return n;
}

void
spmd_dot_counts(const DotJob *job, const DotProblem *p, DotCounts *c)
{
    const DotDims *d = &job->dims;
    const ShdSharding *l = p->lhs.sharding, *r = p->rhs.sharding, *o = p->out;
    c->n = p->st->num_partitions;
    c->lb = spmd_dot_parts(l, d, DOT_BATCH, DOT_LHS);
    c->rb = spmd_dot_parts(r, d, DOT_BATCH, DOT_RHS);
    c->ob = spmd_dot_parts(o, d, DOT_BATCH, DOT_OUT);
    c->lc = spmd_dot_parts(l, d, DOT_CONTRACTING, DOT_LHS);
    c->rc = spmd_dot_parts(r, d, DOT_CONTRACTING, DOT_RHS);
    c->lnc = spmd_dot_parts(l, d, DOT_LHS_NC, DOT_LHS);
    c->rnc = spmd_dot_parts(r, d, DOT_RHS_NC, DOT_RHS);
    c->olnc = spmd_dot_parts(o, d, DOT_LHS_NC, DOT_OUT);
    c->ornc = spmd_dot_parts(o, d, DOT_RHS_NC, DOT_OUT);
    c->ls = spmd_dot_parts(l, d, DOT_SPATIAL, DOT_LHS);
    c->rs = spmd_dot_parts(r, d, DOT_SPATIAL, DOT_RHS);
    c->os = spmd_dot_parts(o, d, DOT_SPATIAL, DOT_OUT);
}

/* ---- decisions (issue 4 item 6) ---- */

void
spmd_dot_decide(SpmdCtx *cx, const DotJob *job, const char *strategy, const char *reason,
                const char *const *alts, uint32_t n_alts, const TraceKV *nums, uint32_t n_nums)
{
    if (!cx->trace->ops->decision)
        return;
    /* the chosen strategy is never one of its own alternatives */
    const char *kept[DOT_S_COUNT + 4];
    uint32_t n_kept = 0;
    for (uint32_t k = 0; k < n_alts && n_kept < SL_COUNTOF(kept); k++)
        if (!strategy || !alts[k] || strcmp(alts[k], strategy) != 0)
            kept[n_kept++] = alts[k];
    TraceDecision d = {job->hlo, job->handler, strategy, reason, kept, n_kept, nums, n_nums};
    cx->trace->ops->decision(cx->trace, &d);
}

void
spmd_dot_decide_strategy(SpmdCtx *cx, const DotJob *job, const DotProblem *p, DotStrategy strategy,
                         const char *reason)
{
    if (!cx->trace->ops->decision)
        return;
    DotCounts c;
    spmd_dot_counts(job, p, &c);
    enum { N_COUNTS = 13, PER_ALT = 3 };
    TraceKV nums[N_COUNTS + PER_ALT * DOT_S_COUNT] = {
        {"partitions", (double)c.n, NULL},
        {"lhs_batch", (double)c.lb, NULL},
        {"rhs_batch", (double)c.rb, NULL},
        {"out_batch", (double)c.ob, NULL},
        {"lhs_contracting", (double)c.lc, NULL},
        {"rhs_contracting", (double)c.rc, NULL},
        {"lhs_non_contracting", (double)c.lnc, NULL},
        {"rhs_non_contracting", (double)c.rnc, NULL},
        {"out_lhs_non_contracting", (double)c.olnc, NULL},
        {"out_rhs_non_contracting", (double)c.ornc, NULL},
        {"lhs_local_bytes", (double)ir_shape_byte_size(&p->lhs.hlo->shape), NULL},
        {"rhs_local_bytes", (double)ir_shape_byte_size(&p->rhs.hlo->shape), NULL},
        {"out_base_bytes", (double)ir_shape_byte_size(p->out_base), NULL},
    };
    uint32_t n_nums = N_COUNTS;
    n_nums += spmd_dot_alternative_numbers(cx, job, p, strategy, k_strategy, nums + n_nums,
                                           SL_COUNTOF(nums) - n_nums);
    /* the strategies tried before this one, and the last resort */
    int first = job->conv_case ? DOT_S_CONV : DOT_S_BATCH_PARALLEL;
    const char *alts[DOT_S_COUNT];
    uint32_t n_alts = 0;
    for (int s = first; s < (int)strategy; s++)
        alts[n_alts++] = k_strategy[s];
    if (strategy != DOT_S_REPLICATE && c.n > 1)
        alts[n_alts++] = k_strategy[DOT_S_REPLICATE];
    spmd_dot_decide(cx, job, k_strategy[strategy], reason, alts, n_alts, nums, n_nums);
}

/* ---- small value helpers ---- */

static bool
is_partial(const ShdSharding *s)
{
    return s && shd_is_tiled(s) && shd_has_partial_replication(s);
}

static IrInstr *
local_op(SpmdCtx *cx, const DotJob *job, const DotProblem *p, IrInstr *l, IrInstr *r)
{
    if (!l || !r)
        return NULL;
    return job->create(cx, job, l, r, p->window);
}

/* ---- block-scaled operands (upstream PartitionedHloMX): a scale follows its operand ---- */

/* The scale travelling with operand `v` of `p` (NULL for plain dots). */
const SpmdValue *
spmd_dot_scale_of(const DotProblem *p, const SpmdValue *v)
{
    const SpmdValue *s = v == &p->lhs ? &p->lhs_scale : v == &p->rhs ? &p->rhs_scale : NULL;
    return s && s->hlo ? s : NULL;
}

/* local_op for operands that may carry scales (`ls`, `rs` NULL or hlo NULL when plain). */
static IrInstr *
local_op_mx(SpmdCtx *cx, const DotJob *job, const DotProblem *p, IrInstr *l, IrInstr *r,
            const SpmdValue *ls, const SpmdValue *rs)
{
    if (!job->create_scaled)
        return local_op(cx, job, p, l, r);
    if (!l || !r || !ls || !rs || !ls->hlo || !rs->hlo)
        return NULL;
    return job->create_scaled(cx, job, l, r, ls->hlo, rs->hlo);
}

/* Reshards the scale of `v` (if any) to `t` (NULL = replicate) into *out (hlo NULL if none). */
SlStatus
spmd_dot_reshard_scale(SpmdCtx *cx, const DotProblem *p, const SpmdValue *v, const ShdSharding *t,
              SpmdValue *out, SlError *err)
{
    const SpmdValue *sc = spmd_dot_scale_of(p, v);
    memset(out, 0, sizeof(*out));
    if (!sc)
        return SL_OK;
    return t ? spmd_reshard(cx, sc, t, NULL, out, err) : spmd_replicate(cx, sc, out, err);
}

/* Reshards local `hlo` (in sharding `s`, state p->st) to the problem's output sharding. */
SlStatus
spmd_dot_to_out(SpmdCtx *cx, const DotProblem *p, IrInstr *hlo, const ShdSharding *s, IrInstr **out,
       SlError *err)
{
    if (!hlo || !s)
        return spmd_nomem(cx, err);
    SpmdValue v = {hlo, p->out_base, s, p->st}, r;
    SlStatus st = spmd_reshard(cx, &v, p->out, NULL, &r, err);
    if (st == SL_OK)
        *out = r.hlo;
    return st;
}

SlStatus
spmd_dot_reshard_to(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *t, SpmdValue *out,
                    SlError *err)
{
    if (!t)
        return spmd_nomem(cx, err);
    return spmd_reshard(cx, v, t, NULL, out, err);
}

IrInstr *
spmd_dot_all_reduce(SpmdCtx *cx, const DotJob *job, const SpmdState *st, IrInstr *x,
                    const ShdSharding *s, const int64_t *dims, uint32_t n)
{
    if (!x)
        return NULL;
    /* the tag travels only to emitted instructions of the source's own opcode */
    if (job->unreduced_out && x->op == job->hlo->op && x->derived_from == job->hlo)
        return x;
    const char *saved = cx->coll_cause;
    cx->coll_cause = job->handler;
    x = spmd_all_reduce_along_dims(cx, st, x, s, dims, n,
                                   spmd_reducer(cx, SPMD_RED_ADD, x->shape.dtype));
    cx->coll_cause = saved;
    return x;
}

/* ---- base case before partial match (E.4) ---- */

/* E.4 rules 2 and 4: output batch-partitioned like one operand; reshard the other one. */
static SlStatus
batch_with_reshard(SpmdCtx *cx, const DotJob *job, const DotProblem *p, bool may_all_reduce,
                   IrInstr **out, SlError *err)
{
    DotCounts c;
    spmd_dot_counts(job, p, &c);
    if (c.ob != c.n)
        return SL_OK;
    const DotDims *d = &job->dims;
    for (int side = 0; side < 2; side++) {
        const SpmdValue *me = side ? &p->rhs : &p->lhs, *other = side ? &p->lhs : &p->rhs;
        DotSide ms = side ? DOT_RHS : DOT_LHS, os = side ? DOT_LHS : DOT_RHS;
        if ((side ? c.rb : c.lb) != c.n)
            continue;
        const ShdSharding *o2me = spmd_dot_seen_from(cx, d, p->out, DOT_OUT, ms);
        const ShdSharding *me2o = spmd_dot_seen_from(cx, d, me->sharding, ms, os);
        if (!o2me || !me2o || !shd_equal(o2me, me->sharding))
            continue;
        int64_t s1[SPMD_MAX_RANK], s2[SPMD_MAX_RANK];
        if (!may_all_reduce && !shd_can_reshard_with_collective_permute(other->sharding, me2o) &&
            shd_all_to_all_dims(other->sharding, me2o, s1, s2, SPMD_MAX_RANK) == 0)
            continue;
        SpmdValue r, rsc;
        SlStatus st = spmd_dot_reshard_to(cx, other, me2o, &r, err);
        if (st == SL_OK)
            st = spmd_dot_reshard_scale(cx, p, other, me2o, &rsc, err);
        if (st != SL_OK)
            return st;
        spmd_dot_decide_strategy(
            cx, job, p, may_all_reduce ? DOT_S_BATCH_RESHARD : DOT_S_BATCH_RESHARD_CHEAP,
            side ? "the output is batch-partitioned exactly like the rhs, so the lhs is "
                   "resharded to match it"
                 : "the output is batch-partitioned exactly like the lhs, so the rhs is "
                   "resharded to match it");
        const SpmdValue *msc = spmd_dot_scale_of(p, me);
        *out = side ? local_op_mx(cx, job, p, r.hlo, me->hlo, &rsc, msc)
                    : local_op_mx(cx, job, p, me->hlo, r.hlo, msc, &rsc);
        return *out ? SL_OK : spmd_nomem(cx, err);
    }
    return SL_OK;
}

/* E.4 rules 5 and 6: one operand is sharded exactly like the output on its free dims. */
static SlStatus
operand_matches_output(SpmdCtx *cx, const DotJob *job, const DotProblem *p, IrInstr **out,
                       SlError *err)
{
    DotCounts c;
    spmd_dot_counts(job, p, &c);
    for (int side = 0; side < 2; side++) {
        int64_t nc = side ? c.rnc : c.lnc, onc = side ? c.ornc : c.olnc;
        const SpmdValue *me = side ? &p->rhs : &p->lhs, *other = side ? &p->lhs : &p->rhs;
        if (nc != c.n || onc != c.n)
            continue;
        const ShdSharding *me2o =
            spmd_dot_seen_from(cx, &job->dims, me->sharding, side ? DOT_RHS : DOT_LHS, DOT_OUT);
        if (!me2o || !shd_equal(me2o, p->out))
            continue;
        SpmdValue r, rsc;
        SlStatus st = spmd_replicate(cx, other, &r, err);
        if (st == SL_OK)
            st = spmd_dot_reshard_scale(cx, p, other, NULL, &rsc, err);
        if (st != SL_OK)
            return st;
        spmd_dot_decide_strategy(
            cx, job, p, side ? DOT_S_RHS_MATCHES_OUT : DOT_S_LHS_MATCHES_OUT,
            "one operand is already sharded like the output on its free dims, so the "
            "other operand is replicated (all-gathered)");
        const SpmdValue *msc = spmd_dot_scale_of(p, me);
        *out = side ? local_op_mx(cx, job, p, r.hlo, me->hlo, &rsc, msc)
                    : local_op_mx(cx, job, p, me->hlo, r.hlo, msc, &rsc);
        return *out ? SL_OK : spmd_nomem(cx, err);
    }
    return SL_OK;
}

static SlStatus
base_case_before(SpmdCtx *cx, const DotJob *job, const DotProblem *p, IrInstr **out,
                 SlError *err)
{
    if (is_partial(p->out))
        return SL_OK;
    DotCounts c;
    spmd_dot_counts(job, p, &c);
    const DotDims *d = &job->dims;
    const ShdSharding *l2r = spmd_dot_seen_from(cx, d, p->lhs.sharding, DOT_LHS, DOT_RHS);
    if (c.lb == c.rb && c.rb == c.n && l2r && shd_equal(l2r, p->rhs.sharding)) {
        spmd_dot_decide_strategy(
            cx, job, p, DOT_S_BATCH_PARALLEL,
            "both operands are sharded identically on batch dims only: a local dot needs "
            "no communication");
        IrInstr *dot =
            local_op_mx(cx, job, p, p->lhs.hlo, p->rhs.hlo, &p->lhs_scale, &p->rhs_scale);
        return spmd_dot_to_out(
            cx, p, dot, spmd_dot_seen_from(cx, d, p->lhs.sharding, DOT_LHS, DOT_OUT), out, err);
    }
    SlStatus st = batch_with_reshard(cx, job, p, false, out, err);
    if (st != SL_OK || *out)
        return st;
    DotWindowedConfig cfg = {.kind = DOT_WE_NONE};
    if (!job->create_scaled) /* upstream: no windowed einsum for block-scaled dots */
        spmd_windowed_config(cx, job, p, &cfg);
    if (cfg.kind != DOT_WE_NONE) {
        spmd_dot_decide_strategy(
            cx, job, p, DOT_S_WINDOWED,
            "an operand is large enough that overlapping its ring transfer with the "
            "per-shard matmuls beats gathering it first");
        return spmd_emit_windowed_dot(cx, job, p, &cfg, out, err);
    }
    st = batch_with_reshard(cx, job, p, true, out, err);
    if (st != SL_OK || *out)
        return st;
    return operand_matches_output(cx, job, p, out, err);
}

/* ---- base case after partial match (E.10) ---- */

/* Rule 4: replicated output, one operand fully sharded on contracting dims and larger than
 * the output: slice the other operand to match, local dot, all-reduce. */
static SlStatus
replicated_out_contracting(SpmdCtx *cx, const DotJob *job, const DotProblem *p,
                           const DotCounts *c, IrInstr **out, SlError *err)
{
    if (shd_is_tiled(p->out))
        return SL_OK;
    for (int side = 1; side >= 0; side--) {
        const SpmdValue *me = side ? &p->rhs : &p->lhs, *other = side ? &p->lhs : &p->rhs;
        DotSide ms = side ? DOT_RHS : DOT_LHS, os = side ? DOT_LHS : DOT_RHS;
        if ((side ? c->rc : c->lc) != c->n || shd_is_tiled(other->sharding) ||
            ir_shape_elem_count(me->base_shape) <= ir_shape_elem_count(p->out_base))
            continue;
        const ShdSharding *t = spmd_dot_seen_from(cx, &job->dims, me->sharding, ms, os);
        if (!t)
            continue;
        int64_t cd[SPMD_MAX_RANK], od[SPMD_MAX_RANK];
        uint32_t n = spmd_dot_role_dims(&job->dims, DOT_CONTRACTING, ms, cd);
        spmd_dot_role_dims(&job->dims, DOT_CONTRACTING, os, od);
        spmd_dot_decide_strategy(
            cx, job, p, DOT_S_REPLICATED_OUT_CONTRACTING,
            "the output is replicated and one operand is sharded on contracting dims: "
            "slice the other operand to match (free), then all-reduce partial products");
        SpmdValue o2, os2, ms2 = {0};
        SlStatus st = spmd_dot_reshard_to(cx, other, t, &o2, err);
        if (st == SL_OK)
            st = spmd_dot_reshard_scale(cx, p, other, t, &os2, err);
        if (st != SL_OK)
            return st;
        IrInstr *mm = spmd_dot_mask_contracting(cx, me, cd, n),
                *om = spmd_dot_mask_contracting(cx, &o2, od, n);
        if (spmd_dot_scale_of(p, me) && os2.hlo) {
            ms2 = *spmd_dot_scale_of(p, me);
            ms2.hlo = spmd_dot_mask_contracting(cx, &ms2, cd, n);
            os2.hlo = spmd_dot_mask_contracting(cx, &os2, od, n);
        }
        IrInstr *dot = side ? local_op_mx(cx, job, p, om, mm, &os2, &ms2)
                            : local_op_mx(cx, job, p, mm, om, &ms2, &os2);
        if (!dot)
            return spmd_nomem(cx, err);
        IrInstr *ar = spmd_dot_all_reduce(cx, job, p->st, dot, me->sharding, cd, n);
        return spmd_dot_to_out(cx, p, ar, shd_replicated(cx->arena), out, err);
    }
    return SL_OK;
}

/* Reshards lhs to `lt` and rhs to `rt` (NULL = replicate) and emits the local op, whose
 * result is in p->out. */
static SlStatus
reshard_both(SpmdCtx *cx, const DotJob *job, const DotProblem *p, const ShdSharding *lt,
             const ShdSharding *rt, IrInstr **out, SlError *err)
{
    SpmdValue l, r, ls, rs;
    SlStatus st =
        lt ? spmd_dot_reshard_to(cx, &p->lhs, lt, &l, err) : spmd_replicate(cx, &p->lhs, &l, err);
    if (st == SL_OK)
        st = rt ? spmd_dot_reshard_to(cx, &p->rhs, rt, &r, err)
                : spmd_replicate(cx, &p->rhs, &r, err);
    if (st == SL_OK)
        st = spmd_dot_reshard_scale(cx, p, &p->lhs, lt, &ls, err);
    if (st == SL_OK)
        st = spmd_dot_reshard_scale(cx, p, &p->rhs, rt, &rs, err);
    if (st != SL_OK)
        return st;
    *out = local_op_mx(cx, job, p, l.hlo, r.hlo, &ls, &rs);
    return *out ? SL_OK : spmd_nomem(cx, err);
}

static SlStatus
base_case_after(SpmdCtx *cx, const DotJob *job, const DotProblem *p, IrInstr **out,
                SlError *err)
{
    if (is_partial(p->out))
        return SL_OK;
    DotCounts c;
    spmd_dot_counts(job, p, &c);
    const DotDims *d = &job->dims;
    const ShdSharding *o2l = spmd_dot_seen_from(cx, d, p->out, DOT_OUT, DOT_LHS);
    const ShdSharding *o2r = spmd_dot_seen_from(cx, d, p->out, DOT_OUT, DOT_RHS);
    if (c.ob == c.n && o2l && o2r) {
        spmd_dot_decide_strategy(
            cx, job, p, DOT_S_OUT_BATCH,
            "the output is partitioned on batch dims only: reshard both operands to match");
        return reshard_both(cx, job, p, o2l, o2r, out, err);
    }
    if (c.olnc == c.n && o2l) {
        spmd_dot_decide_strategy(
            cx, job, p, DOT_S_OUT_LHS_NC,
            "the output is partitioned on the lhs free dims: reshard the lhs to match and "
            "replicate the rhs");
        return reshard_both(cx, job, p, o2l, NULL, out, err);
    }
    if (c.ornc == c.n && o2r) {
        spmd_dot_decide_strategy(
            cx, job, p, DOT_S_OUT_RHS_NC,
            "the output is partitioned on the rhs free dims: reshard the rhs to match and "
            "replicate the lhs");
        return reshard_both(cx, job, p, NULL, o2r, out, err);
    }
    return replicated_out_contracting(cx, job, p, &c, out, err);
}

/* ---- PartitionDot (E.3) ---- */

/* A strategy that does not apply has only done sharding arithmetic (it checks before it
 * emits): when it created no instruction, no computation and started no reshard, nothing
 * outside the arena points at what it allocated there, and those bytes are handed back. On
 * a transformer step most dot visits try several strategies first, each building dozens of
 * sharding objects. */
typedef struct DotProbe {
    SlArenaMark mark;
    uint32_t instrs, comps, reshards;
} DotProbe;

static DotProbe
probe_start(const SpmdCtx *cx)
{
    DotProbe pr = {sl_arena_mark(cx->arena), cx->out->next_instr_id, cx->out->next_comp_id,
                   cx->reshard_seq};
    return pr;
}

static void
probe_end(SpmdCtx *cx, const DotProbe *pr, SlStatus st, const IrInstr *out)
{
    if (st == SL_OK && !out && cx->out->next_instr_id == pr->instrs &&
        cx->out->next_comp_id == pr->comps && cx->reshard_seq == pr->reshards &&
        !sl_arena_failed(cx->arena))
        sl_arena_release(cx->arena, pr->mark);
}

static SlStatus
try_partition(SpmdCtx *cx, const DotJob *job, const DotProblem *p, bool rm, IrInstr **out,
              SlError *err)
{
    SlStatus st = SL_OK;
    bool owned = false;
    *out = NULL;
    if (job->conv_case)
        st = job->conv_case(cx, job, p, rm, out, &owned, err);
    if (owned || st != SL_OK || *out)
        return st;
    for (int k = 0; k < 6 && st == SL_OK && !*out; k++) {
        DotProbe pr = probe_start(cx);
        switch (k) {
        case 0: st = base_case_before(cx, job, p, out, err); break;
        case 1: st = spmd_dot_group_on_batch(cx, job, p, rm, out, err); break;
        case 2: st = spmd_dot_group_on_non_contracting(cx, job, p, rm, out, err); break;
        case 3: st = spmd_dot_group_on_contracting(cx, job, p, rm, out, err); break;
        case 4: st = spmd_dot_remove_output_partial(cx, job, p, out, err); break;
        default: st = base_case_after(cx, job, p, out, err); break;
        }
        probe_end(cx, &pr, st, *out);
    }
    return st;
}

/* Operand sharding implied by the output alone: dims absent from the operand are moved into
 * replication, contracting dims stay unsharded (InferDotOperandSharding). */
const ShdSharding *
spmd_dot_infer_operand(SpmdCtx *cx, const DotDims *d, const ShdSharding *o, DotSide side)
{
    if (!shd_is_tiled(o))
        return o;
    int64_t drop[SPMD_MAX_RANK];
    uint32_t n = spmd_dot_role_dims(d, side == DOT_LHS ? DOT_RHS_NC : DOT_LHS_NC, DOT_OUT, drop);
    const ShdSharding *t = shd_partially_replicate_dims(cx->arena, o, drop, n);
    return t ? spmd_dot_seen_from(cx, d, t, DOT_OUT, side) : NULL;
}

/* IsLeafShardingMoreSpecific for non-manual shardings. */
static bool
more_specific(const ShdSharding *a, const ShdSharding *b)
{
    if (shd_is_tiled(b))
        return shd_is_tiled(a) && shd_num_tiles(a) > shd_num_tiles(b);
    return b->kind == SHD_REPLICATED ? a->kind != SHD_REPLICATED : shd_is_tiled(a);
}

const ShdSharding *
spmd_dot_infer_operand_with_other(SpmdCtx *cx, const DotDims *d, const ShdSharding *o,
                                  const ShdSharding *other, DotSide side)
{
    const ShdSharding *from_out = spmd_dot_infer_operand(cx, d, o, side);
    if (!from_out || !other || !shd_is_tiled(other))
        return from_out;
    DotSide os = side == DOT_LHS ? DOT_RHS : DOT_LHS;
    int64_t drop[SPMD_MAX_RANK];
    uint32_t n = spmd_dot_role_dims(d, os == DOT_LHS ? DOT_LHS_NC : DOT_RHS_NC, os, drop);
    const ShdSharding *t = shd_partially_replicate_dims(cx->arena, other, drop, n);
    const ShdSharding *from_other = t ? spmd_dot_seen_from(cx, d, t, os, side) : NULL;
    if (!from_other)
        return from_out;
    /* MergeSharding(from_out, &from_other, may_combine_partial_sharding = true) */
    if (is_partial(from_out) && is_partial(from_other) &&
        shd_device_count(from_out) == shd_device_count(from_other)) {
        int64_t tiles = shd_num_tiles(from_out) > shd_num_tiles(from_other)
                            ? shd_num_tiles(from_out)
                            : shd_num_tiles(from_other);
        const ShdSharding *m = shd_merge_if_compatible(cx->arena, from_out, from_other, tiles + 1);
        if (m)
            return m;
    }
    return more_specific(from_other, from_out) ? from_other : from_out;
}

SlStatus
spmd_partition_dot(SpmdCtx *cx, const DotJob *job, const DotProblem *p0, IrInstr **out,
                   SlError *err)
{
    DotProblem p = *p0;
    if (p.lhs.hlo == p.rhs.hlo) { /* keep the operands distinct for the reshard cache */
        p.rhs.hlo = spmd_emit_copy(cx, p.rhs.hlo);
        if (!p.rhs.hlo)
            return spmd_nomem(cx, err);
        if (p.rhs_scale.hlo && !(p.rhs_scale.hlo = spmd_emit_copy(cx, p.rhs_scale.hlo)))
            return spmd_nomem(cx, err);
    }
    for (int rm = 1; rm >= 0; rm--) {
        SlStatus st = try_partition(cx, job, &p, rm != 0, out, err);
        if (st != SL_OK || *out)
            return st;
    }
    const ShdSharding *lt = spmd_dot_infer_operand(cx, &job->dims, p.out, DOT_LHS);
    const ShdSharding *rt = spmd_dot_infer_operand(cx, &job->dims, p.out, DOT_RHS);
    if (job->dims.n[DOT_SPATIAL] == 0 && !job->replicate_fallback && lt && rt) {
        spmd_dot_decide_strategy(
            cx, job, &p, DOT_S_INFER_FROM_OUTPUT,
            "no strategy matched the operand shardings: reshard both operands to the "
            "shardings the output implies");
        return reshard_both(cx, job, &p, lt, rt, out, err);
    }
    spmd_dot_decide_strategy(
        cx, job, &p, DOT_S_REPLICATE,
        "no strategy matched: replicate both operands and slice the full result");
    IrInstr *dot = NULL;
    SlStatus st = reshard_both(cx, job, &p, NULL, NULL, &dot, err);
    if (st != SL_OK)
        return st;
    return spmd_dot_to_out(cx, &p, dot, shd_replicated(cx->arena), out, err);
}

/* ---- HandleDotHelper and HandleDot ---- */

/* Block-scaled dots: operands 2 and 3 are the scales, resharded to their operands' shardings
 * (upstream requires them identical) so that every later reshard moves both alike. */
static SlStatus
attach_scales(SpmdCtx *cx, const DotJob *job, DotProblem *p, SlError *err)
{
    const IrInstr *hlo = job->hlo;
    if (!job->create_scaled)
        return SL_OK;
    const SpmdValue *ls = hlo->n_operands == 4 ? spmd_get_value(cx, hlo->operands[2]) : NULL;
    const SpmdValue *rs = hlo->n_operands == 4 ? spmd_get_value(cx, hlo->operands[3]) : NULL;
    if (SL_NEVER(!ls || !rs))
        return spmd_fail(cx, err, SL_ERR_INTERNAL, "scales not partitioned");
    SlStatus st = spmd_reshard(cx, ls, p->lhs.sharding, NULL, &p->lhs_scale, err);
    if (st == SL_OK)
        st = spmd_reshard(cx, rs, p->rhs.sharding, NULL, &p->rhs_scale, err);
    p->lhs_scale.state = p->rhs_scale.state = cx->state;
    return st;
}

SlStatus
spmd_dot_helper(SpmdCtx *cx, const DotJob *job0, SlError *err)
{
    const IrInstr *hlo = job0->hlo;
    const SpmdValue *l = spmd_get_value(cx, hlo->operands[0]);
    const SpmdValue *r = spmd_get_value(cx, hlo->operands[1]);
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    DotJob job1 = *job0, *job = &job1;
    if (SL_NEVER(!l || !r || !s))
        return spmd_fail(cx, err, SL_ERR_INTERNAL, "operands not partitioned");
    if (s->kind == SHD_TUPLE && s->n_leaves == 1)
        s = s->leaves[0];
    int64_t dev;
    if (shd_unique_device(s, &dev) || shd_is_manual(s) || s->kind == SHD_TUPLE ||
        shd_is_manual_subgroup(s) || shd_is_manual_subgroup(l->sharding) ||
        shd_is_manual_subgroup(r->sharding)) {
        spmd_dot_decide(cx, job, "single_device_or_manual",
                        "the output is on one device or manual: no dot partitioning", NULL, 0,
                        NULL, 0);
        return spmd_handle_default(cx, hlo, err);
    }
    /* upstream converts unreduced shardings before partitioning ({unreduced} to replicated,
     * an unreduced subgroup into the replication subgroup) and tags the instruction, so that
     * its local ops keep their partial sums (spmd_dot_all_reduce) */
    const ShdSharding *o = shd_unreduced_as_replicated(cx->arena, s);
    if (!o)
        return spmd_nomem(cx, err);
    job->unreduced_out = o != s;
    DotProblem p = {*l, *r, &hlo->shape, o, cx->state, job->window, {0}, {0}};
    p.lhs.state = p.rhs.state = cx->state;
    IrInstr *local = NULL;
    SlStatus st = attach_scales(cx, job, &p, err);
    if (st == SL_OK)
        st = spmd_partition_dot(cx, job, &p, &local, err);
    if (st != SL_OK)
        return st;
    return spmd_finish(cx, hlo, local, o, err); /* o to s: no data moves (reshard.c) */
}

/* create-sharded-dot: the only place a local dot is built (dims from the local operands). */
static IrInstr *
create_dot(SpmdCtx *cx, const DotJob *job, IrInstr *lhs, IrInstr *rhs, const IrWindowDim *w)
{
    (void)w;
    const DotDims *d = &job->dims;
    int64_t dims[SPMD_MAX_RANK];
    uint32_t n = 0;
    for (uint32_t k = 0; k < d->n[DOT_BATCH]; k++)
        dims[n++] = lhs->shape.dims[d->role[DOT_BATCH][k].lhs];
    for (uint32_t k = 0; k < d->n[DOT_LHS_NC]; k++)
        dims[n++] = lhs->shape.dims[d->role[DOT_LHS_NC][k].lhs];
    for (uint32_t k = 0; k < d->n[DOT_RHS_NC]; k++)
        dims[n++] = rhs->shape.dims[d->role[DOT_RHS_NC][k].rhs];
    IrShape s = ir_shape_with_dims(cx->arena, &job->hlo->shape, dims);
    IrInstr *ops[2] = {lhs, rhs};
    return spmd_emit_clone(cx, job->hlo, &s, ops, 2);
}

static bool
listed(const int64_t *v, uint32_t n, int64_t x)
{
    for (uint32_t k = 0; k < n; k++)
        if (v[k] == x)
            return true;
    return false;
}

/* ParseDotGeneralFromDot: batch, contracting, lhs free, rhs free (E.1). */
SlStatus
spmd_dot_dims_of(SpmdCtx *cx, const IrInstr *hlo, DotDims *d)
{
    const int64_t *lb, *rb, *lc, *rc;
    uint32_t nb = ir_instr_ints_attr(hlo, IR_ATTR_LHS_BATCH_DIMS, &lb);
    uint32_t nrb = ir_instr_ints_attr(hlo, IR_ATTR_RHS_BATCH_DIMS, &rb);
    uint32_t nc = ir_instr_ints_attr(hlo, IR_ATTR_LHS_CONTRACTING_DIMS, &lc);
    uint32_t nrc = ir_instr_ints_attr(hlo, IR_ATTR_RHS_CONTRACTING_DIMS, &rc);
    const IrShape *ls = &hlo->operands[0]->shape, *rs = &hlo->operands[1]->shape;
    memset(d, 0, sizeof(*d));
    if (nb != nrb || nc != nrc || ls->rank > SPMD_MAX_RANK || rs->rank > SPMD_MAX_RANK)
        return SL_ERR_UNSUPPORTED;
    d->rank[0] = ls->rank;
    d->rank[1] = rs->rank;
    d->rank[2] = hlo->shape.rank;
    /* one block for every role (each role has at most ls->rank + rs->rank entries), in the
     * scratch arena: the roles live as long as the handler call */
    uint32_t per = ls->rank + rs->rank + 1;
    DotDimMap *block = sl_arena_alloc_uninit(&cx->scratch, sizeof(DotDimMap) * per * DOT_ROLE_COUNT,
                                             _Alignof(DotDimMap)); /* entries written before read */
    if (!block)
        return SL_ERR_NOMEM;
    for (int r = 0; r < DOT_ROLE_COUNT; r++)
        d->role[r] = block + (size_t)r * per;
    int64_t next = 0;
    for (uint32_t k = 0; k < nb; k++)
        d->role[DOT_BATCH][d->n[DOT_BATCH]++] = (DotDimMap){lb[k], rb[k], next++};
    for (uint32_t k = 0; k < nc; k++)
        d->role[DOT_CONTRACTING][d->n[DOT_CONTRACTING]++] = (DotDimMap){lc[k], rc[k], -1};
    for (uint32_t i = 0; i < ls->rank; i++)
        if (!listed(lb, nb, i) && !listed(lc, nc, i))
            d->role[DOT_LHS_NC][d->n[DOT_LHS_NC]++] = (DotDimMap){i, -1, next++};
    for (uint32_t i = 0; i < rs->rank; i++)
        if (!listed(rb, nb, i) && !listed(rc, nc, i))
            d->role[DOT_RHS_NC][d->n[DOT_RHS_NC]++] = (DotDimMap){-1, i, next++};
    return next == (int64_t)hlo->shape.rank ? SL_OK : SL_ERR_UNSUPPORTED;
}

SlStatus
spmd_handle_dot(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    DotJob job;
    memset(&job, 0, sizeof(job));
    job.hlo = hlo;
    job.handler = "dot";
    job.create = create_dot;
    SlStatus st = hlo->n_operands == 2 ? spmd_dot_dims_of(cx, hlo, &job.dims) : SL_ERR_UNSUPPORTED;
    if (st == SL_ERR_NOMEM)
        return spmd_nomem(cx, err);
    if (st != SL_OK) {
        spmd_warn(cx, TRACE_WARN_OTHER, "dot with unsupported dimension numbers: partitioned as replicated");
        return spmd_handle_default(cx, hlo, err);
    }
    return spmd_dot_helper(cx, &job, err);
}
