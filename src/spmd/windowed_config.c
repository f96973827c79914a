/* windowed_config.c - whether a dot's base case becomes a windowed loop (gspmd.md E.5; seeds/000
 * GetWindowedEinsumConfiguration). Owns: the collective-matmul eligibility and cost rules under
 * XLA's SpmdPartitionerOptions names and defaults (the byte/MiB thresholds,
 * max_windowed_einsum_iteration, the users check, disable_ag_rewrite_for_multiple_consumers,
 * partial windowing, the `_xla_collective_matmul` attribute, the compute/communication veto),
 * the loop kind it picks (all-gather on contracting, non-contracting or batch dims, or
 * reduce-scatter) and the `decision` event that states the choice. Does not own: building the
 * loop (windowed_loop.c, windowed_variants.c), the local dot (DotJob.create).
 * Invariant: emits no instruction; only fills DotWindowedConfig and records the decision. */
#include "spmd/dot_int.h"

#include <string.h>

#define MIB_BYTES ((int64_t)1 << 20)

/* ---- configuration (E.5) ---- */

/* Time estimates of the base partitioner: XLA's are 0 unless a backend overrides them, which
 * makes the "Overhead outweighs benefit" veto inert; kept so the rule stays visible. */
static double
compute_time_ms(const DotProblem *p)
{
    (void)p;
    return 0.0;
}

static double
communication_time_ms(int64_t bytes)
{
    (void)bytes;
    return 0.0;
}

static bool
disabled_by_attribute(const IrInstr *hlo)
{
    const IrAttr *a = ir_instr_find_attr(hlo, IR_ATTR_FRONTEND_ATTRIBUTES);
    for (uint32_t k = 0; a && k < a->u.frontend.n; k++) {
        const IrFrontendAttr *f = &a->u.frontend.v[k];
        if (sl_str_eq_cstr(sl_sym_str(f->key), "_xla_collective_matmul") &&
            (sl_str_eq_cstr(f->value, "\"none\"") || sl_str_eq_cstr(f->value, "none")))
            return true;
    }
    return false;
}

static void
record(SpmdCtx *cx, const DotJob *job, const DotWindowedConfig *cfg, const char *strategy,
       const char *reason, int64_t n)
{
    static const char *const alts[] = {"windowed_all_gather", "windowed_reduce_scatter",
                                       "no_windowed_einsum"};
    TraceKV nums[] = {
        {"loop_partitions", (double)n, NULL},
        {"max_windowed_einsum_iteration", (double)cx->opts->max_windowed_einsum_iteration, NULL},
        {"compared_bytes", (double)cfg->size_bytes, NULL},
        {"threshold_bytes", (double)cfg->threshold_bytes, NULL},
        {"threshold_for_windowed_einsum_mib", (double)cx->opts->threshold_for_windowed_einsum_mib,
         NULL},
    };
    spmd_dot_decide(cx, job, strategy, reason, alts, SL_COUNTOF(alts), nums, SL_COUNTOF(nums));
}

/* Threshold test: total_bytes_windowed_einsum_threshold (XLA's option, in bytes, -1 = unset)
 * compares the source dot's two full operands; else `size` (this level's full operand or
 * output) is compared with threshold_for_windowed_einsum_mib. */
static bool
big_enough(SpmdCtx *cx, const DotJob *job, int64_t size, DotWindowedConfig *cfg)
{
    int64_t total = cx->opts->total_bytes_windowed_einsum_threshold;
    if (total >= 0) {
        const IrInstr *h = job->hlo;
        cfg->size_bytes = ir_shape_byte_size(&h->operands[0]->shape) +
                          ir_shape_byte_size(&h->operands[1]->shape);
        cfg->threshold_bytes = total;
    } else {
        cfg->size_bytes = size;
        cfg->threshold_bytes = cx->opts->threshold_for_windowed_einsum_mib * MIB_BYTES;
    }
    return cfg->size_bytes >= cfg->threshold_bytes;
}

static const ShdSharding *
own_sharding(const IrInstr *i)
{
    const IrAttr *a = ir_instr_find_attr(i, IR_ATTR_SHARDING);
    return a ? a->u.sharding : NULL;
}

/* The sharding `user` would like its operand `op` to have (GetShardingFromUser, reduced to the
 * two users that matter here: dots, and elementwise users of the same shape); NULL = unknown. */
static const ShdSharding *
sharding_from_user(SpmdCtx *cx, const IrInstr *op, const IrInstr *user)
{
    const ShdSharding *us = own_sharding(user);
    if (!us || us->kind == SHD_TUPLE)
        return NULL;
    if (user->op == IR_OP_DOT && user->n_operands == 2) {
        DotDims d;
        if (spmd_dot_dims_of(cx, user, &d) != SL_OK)
            return NULL;
        return spmd_dot_infer_operand(cx, &d, us, user->operands[0] == op ? DOT_LHS : DOT_RHS);
    }
    if (ir_op_family(user->op) == IR_FAM_ELEMENTWISE && ir_shape_equal(&user->shape, &op->shape, false))
        return us;
    return NULL;
}

/* The "users check" of E.5: when another user of the operand to be gathered wants the same
 * sharding the dot would gather it to, the all-gather is shared, so no loop is built. */
static bool
users_allow_loop(SpmdCtx *cx, const DotJob *job, bool window_lhs)
{
    if (cx->opts->skip_checking_windowed_einsum_users)
        return true;
    const IrInstr *op = job->hlo->operands[window_lhs ? 0 : 1];
    const IrComputation *c = job->hlo->parent;
    uint32_t users = 0;
    for (uint32_t k = 0; c && k < c->n_instrs; k++)
        for (uint32_t j = 0; j < c->instrs[k]->n_operands; j++)
            if (c->instrs[k]->operands[j] == op) {
                users++;
                break;
            }
    const ShdSharding *ideal = users > 1 ? sharding_from_user(cx, op, job->hlo) : NULL;
    const ShdSharding *have = own_sharding(op);
    for (uint32_t k = 0; ideal && k < c->n_instrs; k++) {
        const IrInstr *u = c->instrs[k];
        bool uses = false;
        for (uint32_t j = 0; j < u->n_operands; j++)
            uses = uses || u->operands[j] == op;
        const ShdSharding *want = uses && u != job->hlo ? sharding_from_user(cx, op, u) : NULL;
        if (!want || (have && shd_equal(want, have)))
            continue;
        if (shd_equal(want, ideal))
            return false;
    }
    return true;
}

/* Cases 1 and 2 of E.5: the output matches one operand on its free dims; the other operand
 * travels around the ring. */
static bool
all_gather_case(SpmdCtx *cx, const DotJob *job, const DotProblem *p, bool window_lhs,
                DotWindowedConfig *cfg)
{
    const DotDims *d = &job->dims;
    int64_t n = p->st->num_partitions;
    const SpmdValue *keep = window_lhs ? &p->rhs : &p->lhs, *win = window_lhs ? &p->lhs : &p->rhs;
    DotSide ks = window_lhs ? DOT_RHS : DOT_LHS, ws = window_lhs ? DOT_LHS : DOT_RHS;
    if (spmd_dot_parts(p->out, d, window_lhs ? DOT_RHS_NC : DOT_LHS_NC, DOT_OUT) != n ||
        !cx->opts->enable_windowed_einsum_for_all_gather)
        return false;
    const ShdSharding *o2k = spmd_dot_seen_from(cx, d, p->out, DOT_OUT, ks);
    if (!o2k || !shd_equal(o2k, keep->sharding) ||
        !big_enough(cx, job, ir_shape_byte_size(win->base_shape), cfg) ||
        !users_allow_loop(cx, job, window_lhs))
        return false;
    cfg->windowed_lhs = window_lhs;
    if (spmd_dot_parts(win->sharding, d, DOT_CONTRACTING, ws) == n)
        cfg->kind = DOT_WE_AG_CONTRACTING;
    else if (spmd_dot_parts(win->sharding, d, window_lhs ? DOT_LHS_NC : DOT_RHS_NC, ws) == n)
        cfg->kind = DOT_WE_AG_NONCONTRACTING;
    else if (spmd_dot_parts(win->sharding, d, DOT_BATCH, ws) == n)
        cfg->kind = DOT_WE_AG_BATCH;
    return cfg->kind != DOT_WE_NONE;
}

static bool
reduce_scatter_case(SpmdCtx *cx, const DotJob *job, const DotProblem *p, DotWindowedConfig *cfg)
{
    const DotDims *d = &job->dims;
    int64_t n = p->st->num_partitions;
    int64_t olnc = spmd_dot_parts(p->out, d, DOT_LHS_NC, DOT_OUT);
    int64_t ornc = spmd_dot_parts(p->out, d, DOT_RHS_NC, DOT_OUT);
    if (spmd_dot_parts(p->lhs.sharding, d, DOT_CONTRACTING, DOT_LHS) != n ||
        spmd_dot_parts(p->rhs.sharding, d, DOT_CONTRACTING, DOT_RHS) != n ||
        (olnc != n && ornc != n) || !cx->opts->enable_windowed_einsum_for_reduce_scatter ||
        !big_enough(cx, job, ir_shape_byte_size(p->out_base), cfg))
        return false;
    const ShdSharding *o2s =
        spmd_dot_seen_from(cx, d, p->out, DOT_OUT, olnc == n ? DOT_LHS : DOT_RHS);
    if (!o2s)
        return false;
    cfg->kind = DOT_WE_RS;
    cfg->windowed_lhs = olnc != n;
    return true;
}

/* Partial windowing (E.5 #4): the lhs sharding with its loop dim `w` moved into replication,
 * merged with the rhs tile dims aligned to the right (position by position, as the upstream
 * check lines them up), must give exactly the output sharding. */
static bool
partial_merge_matches(const ShdSharding *ls, const ShdSharding *rs, const ShdSharding *o,
                      uint32_t w)
{
    uint32_t r = ls->n_tile_dims;
    if (!shd_is_tiled(rs) || rs->n_tile_dims > r + 1 || !shd_is_tiled(o) ||
        shd_data_rank(o) != r || shd_device_count(o) != shd_device_count(ls) ||
        shd_device_count(rs) != shd_device_count(ls) || r > SPMD_MAX_RANK)
        return false;
    uint32_t off = r + 1 - rs->n_tile_dims;
    int64_t a[SPMD_MAX_RANK], b[SPMD_MAX_RANK];
    for (uint32_t d = 0; d < r; d++) {
        a[d] = d == w ? 1 : ls->tile_dims[d];
        b[d] = d < off ? 1 : rs->tile_dims[d - off];
        int64_t m = a[d] == 1 ? b[d] : (b[d] == 1 || b[d] == a[d]) ? a[d] : 0;
        if (m != shd_dim_shards(o, d))
            return false;
    }
    int64_t li[SPMD_MAX_RANK], ri[SPMD_MAX_RANK + 1], oi[SPMD_MAX_RANK];
    for (int64_t k = 0; k < shd_device_count(ls); k++) {
        int64_t dev = ls->devices[k];
        if (!shd_tile_index(ls, dev, li) || !shd_tile_index(rs, dev, ri) ||
            !shd_tile_index(o, dev, oi))
            return false;
        for (uint32_t d = 0; d < r; d++)
            if ((a[d] > 1 && li[d] != oi[d]) || (b[d] > 1 && ri[d - off] != oi[d]))
                return false;
    }
    return true;
}

/* The loop dim of partial windowing: exactly one sharded lhs free dim the output leaves
 * unsharded (-1 otherwise), and exactly one sharded like the output (*kept). */
static int64_t
partial_loop_dim(const DotJob *job, const DotProblem *p, int64_t *kept)
{
    const ShdSharding *ls = p->lhs.sharding;
    int64_t w = -1, n_w = 0, n_k = 0;
    for (uint32_t k = 0; k < job->dims.n[DOT_LHS_NC]; k++) {
        const DotDimMap *m = &job->dims.role[DOT_LHS_NC][k];
        int64_t t = shd_dim_shards(ls, (uint32_t)m->lhs), o = shd_dim_shards(p->out, (uint32_t)m->out);
        if (t > 1 && o == 1) {
            w = m->lhs;
            n_w++;
        } else if (t > 1 && o == t) {
            *kept = m->lhs;
            n_k++;
        }
    }
    return n_w == 1 && n_k == 1 ? w : -1;
}

static bool
partial_case(SpmdCtx *cx, const DotJob *job, const DotProblem *p, DotWindowedConfig *cfg)
{
    const DotDims *d = &job->dims;
    const ShdSharding *ls = p->lhs.sharding;
    int64_t n = p->st->num_partitions, kept = -1;
    int64_t ornc = spmd_dot_parts(p->out, d, DOT_RHS_NC, DOT_OUT);
    if (!cx->opts->partial_windowed_einsum || !shd_is_tiled(ls) || ls->n_subgroups ||
        spmd_dot_parts(ls, d, DOT_LHS_NC, DOT_LHS) != n ||
        spmd_dot_parts(p->out, d, DOT_LHS_NC, DOT_OUT) * ornc != n ||
        spmd_dot_parts(p->rhs.sharding, d, DOT_RHS_NC, DOT_RHS) != ornc ||
        !big_enough(cx, job, ir_shape_byte_size(p->rhs.base_shape), cfg))
        return false;
    int64_t w = partial_loop_dim(job, p, &kept);
    if (w < 0)
        return false;
    /* the devices along the loop dim must come in increasing order */
    int64_t stride_w = 1, stride_k = 1, prev = ls->devices[0];
    for (uint32_t k = (uint32_t)w + 1; k < ls->n_tile_dims; k++)
        stride_w *= ls->tile_dims[k];
    for (uint32_t k = (uint32_t)kept + 1; k < ls->n_tile_dims; k++)
        stride_k *= ls->tile_dims[k];
    for (int64_t a = 0; a < ls->tile_dims[kept]; a++)
        for (int64_t b = 1; b < ls->tile_dims[w]; b++) {
            int64_t dev = ls->devices[a * stride_k + b * stride_w];
            if (dev < prev)
                return false;
            prev = dev;
        }
    if (!partial_merge_matches(ls, p->rhs.sharding, p->out, (uint32_t)w))
        return false;
    cfg->kind = DOT_WE_AG_NONCONTRACTING;
    cfg->windowed_lhs = true;
    cfg->windowing_dim = w;
    cfg->loop_partitions = ls->tile_dims[w];
    return true;
}

static const IrInstr *
through_reshape(const IrInstr *x)
{
    bool look = x->op == IR_OP_RESHAPE || x->op == IR_OP_BITCAST || x->op == IR_OP_TRANSPOSE;
    return look && x->n_operands ? x->operands[0] : x;
}

/* disable_ag_rewrite_for_multiple_consumers: an all-gather loop built earlier in this
 * computation (found by its body's name, as upstream does) already windows an operand of
 * this dot (looking through one reshape, bitcast or transpose). */
static bool
shares_all_gather_loop(SpmdCtx *cx, const DotProblem *p)
{
    static const char prefix[] = "windowed_dot_general_body_ag";
    const IrComputation *c = cx->comp;
    if (!cx->opts->disable_ag_rewrite_for_multiple_consumers || !c)
        return false;
    const IrInstr *l = through_reshape(p->lhs.hlo), *r = through_reshape(p->rhs.hlo);
    for (uint32_t k = 0; k < c->n_instrs; k++) {
        const IrInstr *w = c->instrs[k];
        const IrAttr *b = w->op == IR_OP_WHILE ? ir_instr_find_attr(w, IR_ATTR_BODY) : NULL;
        if (!b || !b->u.comp || w->n_operands != 1)
            continue;
        SlStr name = sl_sym_str(b->u.comp->name);
        const IrInstr *t = w->operands[0];
        if (name.len < sizeof(prefix) - 1 || memcmp(name.ptr, prefix, sizeof(prefix) - 1) ||
            t->op != IR_OP_TUPLE || t->n_operands == 0)
            continue;
        if (t->operands[0] == l || t->operands[0] == r)
            return true;
    }
    return false;
}

void
spmd_windowed_config(SpmdCtx *cx, const DotJob *job, const DotProblem *p, DotWindowedConfig *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    int64_t n = p->st->num_partitions;
    cfg->loop_partitions = n;
    cfg->windowing_dim = -1;
    if (n <= 1 || disabled_by_attribute(job->hlo) || job->dims.n[DOT_SPATIAL] > 0)
        return;
    if (shares_all_gather_loop(cx, p)) {
        record(cx, job, cfg, "no_windowed_einsum",
               "an operand is already windowed by an all-gather loop and "
               "disable_ag_rewrite_for_multiple_consumers is set",
               n);
        return;
    }
    if (n > cx->opts->max_windowed_einsum_iteration) {
        DotWindowedConfig probe = *cfg;
        if (all_gather_case(cx, job, p, false, &probe) ||
            all_gather_case(cx, job, p, true, &probe) || reduce_scatter_case(cx, job, p, &probe))
            record(cx, job, &probe, "no_windowed_einsum",
                   "the loop would need more iterations than max_windowed_einsum_iteration", n);
        return;
    }
    bool found = all_gather_case(cx, job, p, false, cfg) ||
                 all_gather_case(cx, job, p, true, cfg) || reduce_scatter_case(cx, job, p, cfg) ||
                 partial_case(cx, job, p, cfg);
    if (!found) {
        cfg->kind = DOT_WE_NONE;
        return;
    }
    double comp = compute_time_ms(p), comm = communication_time_ms(cfg->size_bytes);
    if (comp > 0.0 && comm > 0.0 && comp < comm) {
        record(cx, job, cfg, "no_windowed_einsum",
               "Overhead outweighs benefit. Skipping windowed einsum", n);
        cfg->kind = DOT_WE_NONE;
        return;
    }
    record(cx, job, cfg,
           cfg->kind == DOT_WE_RS          ? "windowed_reduce_scatter"
           : cfg->windowing_dim >= 0       ? "windowed_all_gather_partial"
                                           : "windowed_all_gather",
           cfg->windowing_dim >= 0
               ? "partial_windowed_einsum: the lhs has one sharded free dim the output leaves "
                 "unsharded, so only that dim is windowed, in independent rings"
               : "the compared size reaches the windowed-einsum threshold and the output "
                 "matches an operand, so the transfer is overlapped with the per-shard dots",
           cfg->loop_partitions);
}
