/* prop_unspec.c - the unspecified dims of a `Sharding` annotation (XLA's InferUnspecifiedDims*
 * rules): the dims its backend_config lists as `unspecified_dims=[...]` are refined from the
 * operand, the users or the shard group while the others stay fixed, and an annotation right
 * before SPMDFullToShardShape / SPMDShardToFullShape is refined together with that manual
 * conversion op (RefineManualAutoShardingFromAuto / FromManual). Owns: those refinements and
 * reading the dims list. Does not own: when they run (prop_fix.c). */
#include <string.h>

#include "propagate/prop_int.h"

/* "unspecified_dims=[0,2]" in a Sharding custom call's backend_config. */
uint32_t
prop_parse_unspecified(const IrInstr *i, int64_t *dims, uint32_t cap)
{
    const IrAttr *a = ir_instr_find_attr(i, IR_ATTR_BACKEND_CONFIG);
    if (!a)
        return 0;
    SlStr t = a->u.text;
    const char *key = "unspecified_dims=[";
    size_t kl = strlen(key);
    for (size_t p = 0; p + kl <= t.len; p++) {
        if (memcmp(t.ptr + p, key, kl))
            continue;
        uint32_t n = 0;
        size_t q = p + kl;
        while (q < t.len && t.ptr[q] != ']' && n < cap) {
            while (q < t.len && (t.ptr[q] == ',' || t.ptr[q] == ' '))
                q++;
            int64_t v = 0;
            bool any = false;
            while (q < t.len && t.ptr[q] >= '0' && t.ptr[q] <= '9') {
                v = v * 10 + (t.ptr[q++] - '0');
                any = true;
            }
            if (!any)
                break;
            dims[n++] = v;
        }
        /* sorted */
        for (uint32_t x = 1; x < n; x++)
            for (uint32_t y = x; y > 0 && dims[y - 1] > dims[y]; y--) {
                int64_t tmp = dims[y];
                dims[y] = dims[y - 1];
                dims[y - 1] = tmp;
            }
        return n;
    }
    return 0;
}

/* Refines the unspecified dims of an annotation from `s` (InferUnspecifiedDims*). */
static bool
refine_unspecified(PropCtx *cx, IrInstr *i, const ShdSharding *s)
{
    if (!s || s->kind != SHD_TILED)
        return false;
    const ShdSharding *pr = px_replicate_except(cx, s, cx->unspec[i->id], cx->n_unspec[i->id]);
    const ShdSharding *cur = prop_sh(cx, i);
    if (!cur || !px_merge_if_compatible(cx, pr, px_num_tiles(cur) + 1, &cur))
        return false;
    return prop_set(cx, i, cur, pr);
}

/* The SPMDFullToShardShape / SPMDShardToFullShape right after annotation `i` (its one user,
 * with the same unspecified dims), else NULL; *bad when the dims differ. */
static IrInstr *
manual_conversion_after(PropCtx *cx, const IrInstr *i, bool *bad)
{
    *bad = false;
    if (prop_n_users(cx, i) != 1)
        return NULL;
    IrInstr *u = prop_user(cx, i, 0);
    if (!(cx->flags[u->id] & PROP_F_MANUAL_CONV))
        return NULL;
    int64_t ud[PROP_MAX_RANK];
    uint32_t n = prop_parse_unspecified(u, ud, PROP_MAX_RANK);
    if (n != cx->n_unspec[i->id] || memcmp(ud, cx->unspec[i->id], n * sizeof(int64_t))) {
        *bad = true;
        return NULL;
    }
    return u;
}

/* RefineManualAutoShardingFromAuto: `to_merge` (no manual dims) refines both the auto
 * annotation and the manual one (treating its manual dim as a data dim). */
static bool
refine_from_auto(PropCtx *cx, const ShdSharding *to_merge, const int64_t *ud, uint32_t nu,
                 const ShdSharding **autos, const ShdSharding **manual)
{
    const ShdSharding *m = *manual;
    if (!px_manual_subgroup(m) || px_manual_subgroup(*autos) || !px_partial(m) ||
        m->n_subgroups != 2 || to_merge->kind != SHD_TILED || px_manual_subgroup(to_merge))
        return false;
    const ShdSharding *pr = px_replicate_except(cx, to_merge, ud, nu);
    if (px_tile_maximal(pr) || pr->kind != SHD_TILED)
        return false;
    if (!px_merge_if_compatible(cx, pr, px_num_tiles(*autos) + 1, autos))
        return false;
    /* pr with a size-1 dim before its replication, as the manual one's data dim */
    int64_t pos = shd_data_rank(pr);
    const ShdSharding *prm = px_insert_dims(cx, pr, &pos, 1);
    const ShdSharding *tmp = px_manual_as_data(cx, m);
    if (!prm || !tmp || !px_merge_if_compatible(cx, prm, px_num_tiles(tmp) + 1, &tmp))
        return false;
    const ShdSharding *back = px_data_as_manual(cx, tmp);
    if (!back)
        return false;
    *manual = px_keep_md(cx, back, m);
    return true;
}

/* RefineManualAutoShardingFromManual: `to_merge` (with a manual dim) refines the manual
 * annotation, and with its manual dim read as replication the auto one. */
static bool
refine_from_manual(PropCtx *cx, const ShdSharding *to_merge, const int64_t *ud, uint32_t nu,
                   const ShdSharding **autos, const ShdSharding **manual)
{
    const ShdSharding *m = *manual;
    if (!px_manual_subgroup(to_merge) || !px_manual_subgroup(m) || !px_partial(m) ||
        px_manual_subgroup(*autos) || m->n_subgroups != 2)
        return false;
    const ShdSharding *pr = px_replicate_except(cx, to_merge, ud, nu);
    if (px_tile_maximal(pr) || pr->kind != SHD_TILED)
        return false;
    if (!px_merge_if_compatible(cx, pr, px_num_tiles(m) + 1, manual))
        return false;
    ShdSubgroup reps[PROP_MAX_RANK];
    for (uint32_t k = 0; k < pr->n_subgroups; k++)
        reps[k] = SHD_SUB_REPLICATED;
    const ShdSharding *pa =
        shd_tiled(cx->a, pr->tile_dims, pr->n_tile_dims, pr->devices, reps, pr->n_subgroups);
    return pa && px_merge_if_compatible(cx, px_keep_md(cx, pa, pr), px_num_tiles(*autos) + 1,
                                        autos);
}

/* Sets the annotation and its manual conversion op after a refinement. */
static bool
set_pair(PropCtx *cx, IrInstr *i, const ShdSharding *si, IrInstr *conv, const ShdSharding *sc)
{
    bool ok = prop_set(cx, i, si, NULL);
    const IrInstr *f = cx->from;
    cx->from = i;
    ok = prop_set(cx, conv, sc, NULL) && ok;
    cx->from = f;
    return ok;
}

bool
prop_unspecified_from_operand(PropCtx *cx, IrInstr *i)
{
    const IrInstr *op = i->operands[0];
    const ShdSharding *os = prop_sh(cx, op);
    cx->man_after = NULL;
    if (!px_spatial(os) || os->kind != SHD_TILED)
        return false;
    bool bad;
    IrInstr *conv = manual_conversion_after(cx, i, &bad);
    if (bad)
        return false;
    cx->man_after = conv;
    cx->from = op;
    cx->dir = PROP_DIR_FORWARD;
    cx->rule = "unspecified dims";
    if (!conv)
        return refine_unspecified(cx, i, os);
    const int64_t *ud = cx->unspec[i->id];
    uint32_t nu = cx->n_unspec[i->id];
    if (cx->flags[conv->id] & PROP_F_FULL_TO_SHARD) {
        const ShdSharding *au = prop_sh(cx, i), *ma = prop_sh(cx, conv);
        if (!au || !ma || !refine_from_auto(cx, os, ud, nu, &au, &ma))
            return false;
        return set_pair(cx, i, au, conv, ma);
    }
    const ShdSharding *ma = prop_sh(cx, i), *au = prop_sh(cx, conv);
    if (!au || !ma || !refine_from_manual(cx, os, ud, nu, &au, &ma))
        return false;
    return set_pair(cx, i, ma, conv, au);
}

bool
prop_unspecified_from_users(PropCtx *cx, IrInstr *i)
{
    bool changed = false, bad;
    cx->man_after = NULL;
    IrInstr *conv = manual_conversion_after(cx, i, &bad);
    if (bad)
        return false;
    cx->man_after = conv;
    IrInstr *src = conv ? conv : i;
    const int64_t *ud = cx->unspec[i->id];
    uint32_t nu = cx->n_unspec[i->id];
    uint32_t n = prop_n_users(cx, src);
    for (uint32_t k = 0; k < n; k++) {
        IrInstr *u = prop_user(cx, src, k);
        const ShdSharding *us = prop_sh(cx, u);
        if (!us || us->kind != SHD_TILED)
            continue;
        const ShdSharding *s = prop_from_user(cx, src, u, cx->level);
        if (!s || px_tile_maximal(s))
            continue;
        cx->from = u;
        cx->dir = PROP_DIR_BACKWARD;
        cx->rule = "unspecified dims";
        if (!conv) {
            changed |= refine_unspecified(cx, i, s);
        } else if (cx->flags[conv->id] & PROP_F_FULL_TO_SHARD) {
            const ShdSharding *au = prop_sh(cx, i), *ma = prop_sh(cx, conv);
            if (au && ma && refine_from_manual(cx, s, ud, nu, &au, &ma))
                changed |= set_pair(cx, i, au, conv, ma);
        } else {
            const ShdSharding *ma = prop_sh(cx, i), *au = prop_sh(cx, conv);
            if (au && ma && refine_from_auto(cx, s, ud, nu, &au, &ma))
                changed |= set_pair(cx, i, ma, conv, au);
        }
    }
    return changed;
}

bool
prop_unspecified_from_group(PropCtx *cx, IrInstr *i, IrInstr **members, uint32_t n)
{
    if (prop_is_custom_call(i, "ShardBarrierTo"))
        return false;
    bool changed = false;
    for (uint32_t k = 0; k < n; k++) {
        if (members[k] == i || prop_is_custom_call(members[k], "ShardBarrierFrom"))
            continue;
        const ShdSharding *ms = prop_sh(cx, members[k]);
        if (!px_spatial(ms) || ms->kind != SHD_TILED)
            continue;
        cx->from = members[k];
        cx->dir = PROP_DIR_GROUP;
        cx->rule = "unspecified dims";
        changed |= refine_unspecified(cx, i, ms);
    }
    return changed;
}
