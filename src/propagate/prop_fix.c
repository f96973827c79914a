/* prop_fix.c - the fixed point at one aggressiveness level, in XLA's order: per computation,
 * shard groups (InferShardingFromShardGroup), then a forward sweep in post order, then a
 * backward sweep in reverse, repeated until nothing changes; XLA's already-inferred caches and
 * what a change clears in them. Owns: the sweep order, the caches, and running rules with
 * candidates in the scratch arena, where a rule that changed nothing is not run again on the
 * same inputs (memo_sig, memo_level). Does not own: the rules (prop_fwd.c, prop_bwd.c,
 * prop_unspec.c), what happens before and after the fixed points (prop_run.c). */
#include <string.h>

#include "propagate/prop_int.h"

uint32_t
prop_group_members(const Groups *g, int64_t id, IrInstr **out, uint32_t cap)
{
    uint32_t n = 0;
    for (size_t k = 0; k < g->ids.len && n < cap; k++)
        if (SL_VEC_AT(&g->ids, int64_t, k) == id)
            out[n++] = SL_VEC_AT(&g->members, IrInstr *, k);
    return n;
}

typedef struct Caches {
    bool *group, *fwd, *bwd;
} Caches;

static void
clear_cache(PropCtx *cx, Caches *k, const Groups *g, IrInstr *i, IrInstr *for_users)
{
    for (uint32_t j = 0; j < i->n_operands; j++)
        k->bwd[i->operands[j]->id] = false;
    if (!for_users)
        for_users = i;
    uint32_t n = prop_n_users(cx, for_users);
    for (uint32_t u = 0; u < n; u++) {
        IrInstr *user = prop_user(cx, for_users, u);
        k->fwd[user->id] = false;
        IrComputation *b[PROP_MAX_RELATED];
        uint32_t nb = prop_bodies(user, b, PROP_MAX_RELATED);
        for (uint32_t c = 0; c < nb; c++)
            for (uint32_t p = 0; p < b[c]->n_params; p++)
                if (b[c]->params[p])
                    k->fwd[b[c]->params[p]->id] = false;
    }
    if (cx->group[i->id] >= 0) {
        for (size_t m = 0; m < g->ids.len; m++)
            if (SL_VEC_AT(&g->ids, int64_t, m) == cx->group[i->id])
                k->group[SL_VEC_AT(&g->members, IrInstr *, m)->id] = false;
        k->group[i->id] = true;
    }
}

static void
after_change(PropCtx *cx, Caches *k, const Groups *g, IrInstr *i)
{
    SlVec changed = {0};
    prop_computation_propagation(cx, i, &changed, 0);
    clear_cache(cx, k, g, i, NULL);
    for (size_t c = 0; c < changed.len; c++)
        clear_cache(cx, k, g, SL_VEC_AT(&changed, IrInstr *, c), NULL);
    sl_vec_fini(&changed);
}

/* InferShardingFromShardGroup. */
static bool
from_group(PropCtx *cx, IrInstr *i, IrInstr **members, uint32_t n)
{
    if (!prop_can_pass_at_level(i, cx->level))
        return false;
    const ShdSharding *cur = prop_sh(cx, i);
    if (cur && px_manual(cur))
        return false;
    if (prop_is_custom_call(i, "ShardBarrierTo"))
        return false;
    cx->dir = PROP_DIR_GROUP;
    cx->rule = "shard group";
    if (!cur || px_tile_maximal(cur))
        for (uint32_t k = 0; k < n; k++) {
            const ShdSharding *ms = prop_sh(cx, members[k]);
            if (members[k] == i || !ms || !px_manual(ms))
                continue;
            cx->from = members[k];
            return prop_set(cx, i, ms, NULL);
        }
    bool combine = cx->o->is_spmd && cx->level > 0, changed = false;
    for (uint32_t k = 0; k < n; k++) {
        if (members[k] == i || prop_is_custom_call(members[k], "ShardBarrierFrom"))
            continue;
        cx->from = members[k];
        changed |= prop_improve(cx, i, prop_sh(cx, members[k]), combine, false);
    }
    return changed;
}

#define SIG_MIX(h, p) ((h) = ((h) ^ (uint64_t)(uintptr_t)(p)) * 0x100000001b3ull)

/* What a rule reads: the instruction's sharding and its operands' (forward); its users' and
 * their operands' (backward). Shardings are kept once each, so pointers identify them. */
static uint64_t
rule_inputs(const PropCtx *cx, const IrInstr *i, bool forward, bool *broadcast)
{
    uint64_t h = 0xcbf29ce484222325ull;
    SIG_MIX(h, cx->sh[i->id]);
    *broadcast = i->op == IR_OP_BROADCAST;
    if (forward) {
        for (uint32_t k = 0; k < i->n_operands; k++)
            SIG_MIX(h, cx->sh[i->operands[k]->id]);
        return h;
    }
    uint32_t nu = prop_n_users(cx, i);
    for (uint32_t u = 0; u < nu; u++) {
        const IrInstr *user = prop_user(cx, i, u);
        *broadcast |= user->op == IR_OP_BROADCAST;
        SIG_MIX(h, user);
        SIG_MIX(h, cx->sh[user->id]);
        /* the users whose request also reads their other operands */
        if (user->op == IR_OP_DOT || user->op == IR_OP_CONVOLUTION || user->op == IR_OP_REDUCE ||
            user->op == IR_OP_SCATTER)
            for (uint32_t k = 0; k < user->n_operands; k++)
                SIG_MIX(h, cx->sh[user->operands[k]->id]);
    }
    return h;
}

/* Rules run with candidates in the scratch arena; prop_set() keeps what is set. A rule that
 * changed nothing is not run again on the same inputs at a level that behaves the same (levels
 * 1-3 differ only for broadcasts); parameters read their caller's operands, so they always
 * run. */
static bool
eval_rule(PropCtx *cx, IrInstr *i, bool forward)
{
    int d = forward ? 0 : 1;
    bool bcast = false, memo = i->op != IR_OP_PARAMETER;
    uint64_t sig = memo ? rule_inputs(cx, i, forward, &bcast) : 0;
    int8_t prev = cx->memo_level[d][i->id];
    if (memo && prev >= 0 && cx->memo_sig[d][i->id] == sig &&
        (prev == cx->level || (prev >= 1 && cx->level >= 1 && !bcast)))
        return false;
    SlArenaMark mk = sl_arena_mark(&cx->scratch);
    cx->a = &cx->scratch;
    bool r = forward ? prop_forward(cx, i) : prop_backward(cx, i);
    cx->a = cx->keep;
    sl_arena_release(&cx->scratch, mk);
    if (!r && memo) {
        cx->memo_sig[d][i->id] = sig;
        cx->memo_level[d][i->id] = (int8_t)cx->level;
    }
    return r;
}

static bool
eval_group(PropCtx *cx, IrInstr *i, IrInstr **members, uint32_t n)
{
    SlArenaMark mk = sl_arena_mark(&cx->scratch);
    cx->a = &cx->scratch;
    bool r = from_group(cx, i, members, n);
    cx->a = cx->keep;
    sl_arena_release(&cx->scratch, mk);
    return r;
}

static bool
eval_unspec(PropCtx *cx, IrInstr *i, int how, IrInstr **members, uint32_t n)
{
    SlArenaMark mk = sl_arena_mark(&cx->scratch);
    cx->a = &cx->scratch;
    bool r = how == 0   ? prop_unspecified_from_group(cx, i, members, n)
             : how == 1 ? prop_unspecified_from_operand(cx, i)
                        : prop_unspecified_from_users(cx, i);
    cx->a = cx->keep;
    sl_arena_release(&cx->scratch, mk);
    return r;
}

bool
prop_run_to_fix_point(PropCtx *cx, const Groups *g, int level)
{
    Caches k;
    /* One set of cache arrays for every fixed point (fresh pages cost more than a clear). */
    if (cx->cache_n != cx->n_ids) {
        cx->cache_group = SL_NEW_ARRAY(cx->a, bool, cx->n_ids);
        cx->cache_fwd = SL_NEW_ARRAY(cx->a, bool, cx->n_ids);
        cx->cache_bwd = SL_NEW_ARRAY(cx->a, bool, cx->n_ids);
        if (!cx->cache_group || !cx->cache_fwd || !cx->cache_bwd)
            return false;
        cx->cache_n = cx->n_ids;
    } else {
        memset(cx->cache_group, 0, cx->n_ids);
        memset(cx->cache_fwd, 0, cx->n_ids);
        memset(cx->cache_bwd, 0, cx->n_ids);
    }
    k.group = cx->cache_group;
    k.fwd = cx->cache_fwd;
    k.bwd = cx->cache_bwd;
    IrInstr **members = SL_NEW_ARRAY(cx->a, IrInstr *, PROP_MAX_GROUP);
    if (!members)
        return false;
    cx->level = level;
    bool changed = false, last = true;
    bool merge_partial = cx->o->is_spmd && level > 0;
    while (last) {
        last = false;
        cx->iterations++;
        for (uint32_t ci = 0; ci < cx->m->n_comps; ci++) {
            if (!prop_options_thread(cx->o, cx->m->comps[ci]))
                continue;
            const uint32_t *ord = cx->order + cx->comp_start[ci];
            uint32_t n_ord = cx->comp_start[ci + 1] - cx->comp_start[ci];
            /* 1. shard groups */
            for (uint32_t x = 0; x < n_ord && g->ids.len; x++) {
                IrInstr *i = cx->by_id[ord[x]];
                if (k.group[i->id] || cx->group[i->id] < 0)
                    continue;
                uint32_t nm = prop_group_members(g, cx->group[i->id], members, PROP_MAX_GROUP);
                if (cx->provided[i->id]) {
                    if (!merge_partial)
                        continue;
                    if (cx->unspec[i->id] && eval_unspec(cx, i, 0, members, nm)) {
                        clear_cache(cx, &k, g, i, NULL);
                        k.group[i->id] = true;
                        last = true;
                    }
                    continue;
                }
                k.group[i->id] = true;
                if (eval_group(cx, i, members, nm)) {
                    changed = true;
                    after_change(cx, &k, g, i);
                    last = true;
                }
            }
            /* 2. forward, post order */
            for (uint32_t x = 0; x < n_ord; x++) {
                if (k.fwd[ord[x]] || (cx->provided[ord[x]] && !merge_partial))
                    continue;
                IrInstr *i = cx->by_id[ord[x]];
                if (cx->provided[i->id]) {
                    if (!merge_partial)
                        continue;
                    if (cx->unspec[i->id] && eval_unspec(cx, i, 1, NULL, 0)) {
                        clear_cache(cx, &k, g, i, cx->man_after);
                        k.fwd[i->id] = true;
                        last = true;
                    }
                    continue;
                }
                k.fwd[i->id] = true;
                cx->dir = PROP_DIR_FORWARD;
                cx->from = NULL;
                cx->rule = NULL;
                if (eval_rule(cx, i, true)) {
                    changed = true;
                    after_change(cx, &k, g, i);
                    last = true;
                }
            }
            /* 3. backward, reverse post order */
            for (uint32_t x = n_ord; x-- > 0;) {
                uint32_t id = ord[x];
                if ((cx->flags[id] & PROP_F_MANUAL_CONV) && !k.bwd[id] &&
                    cx->by_id[id]->n_operands)
                    k.bwd[cx->by_id[id]->operands[0]->id] = false;
                if (k.bwd[id] || (cx->provided[id] && !merge_partial))
                    continue;
                IrInstr *i = cx->by_id[id];
                if (cx->provided[i->id]) {
                    if (!merge_partial)
                        continue;
                    if (cx->unspec[i->id] && eval_unspec(cx, i, 2, NULL, 0)) {
                        clear_cache(cx, &k, g, i, cx->man_after);
                        k.bwd[i->id] = true;
                        if (cx->man_after)
                            k.bwd[cx->man_after->id] = true;
                        last = true;
                    }
                    continue;
                }
                k.bwd[i->id] = true;
                cx->dir = PROP_DIR_BACKWARD;
                cx->from = NULL;
                cx->rule = NULL;
                if (eval_rule(cx, i, false)) {
                    changed = true;
                    after_change(cx, &k, g, i);
                    last = true;
                }
            }
        }
        if (cx->iterations > 100000)
            break;
    }
    return changed;
}
