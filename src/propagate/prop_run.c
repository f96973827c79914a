/* prop_run.c - the propagation pass as XLA's ShardingPropagation::Run orders it: metadata and
 * CSE-prevention preprocessing, `Sharding` custom calls folded into copies, shard groups, the
 * while/conditional/call consistency of related instructions, the provided (fixed) shardings,
 * the fixed point over aggressiveness 0..3 (prop_fix.c), shard_as alignment, removal of the
 * shard barriers, the parameter/output restrictions, and writing the shardings back. Owns: the
 * pass state (PropCtx) and its lifetime, the order of the stages. Does not own: options
 * (prop_options.c), setting shardings and the origin records (prop_set.c), the fixed point
 * (prop_fix.c), the per-op rules (prop_fwd.c, prop_bwd.c). */
#include <string.h>

#include "propagate/prop_int.h"

/* ---- module edits ---- */

/* Every use of an instruction with a replacement `to[id]` (ids below n_ids; chains followed)
 * goes to the replacement, and the instructions marked in `drop` leave their computation: one
 * pass over the module, however many there are (one pass per instruction was quadratic in
 * the number of Sharding ops and barriers). */
static void
rewire(IrModule *m, IrInstr *const *to, const bool *drop, uint32_t n_ids)
{
    for (uint32_t ci = 0; ci < m->n_comps; ci++) {
        IrComputation *c = m->comps[ci];
        uint32_t w = 0;
        for (uint32_t k = 0; k < c->n_instrs; k++) {
            IrInstr *u = c->instrs[k];
            for (uint32_t j = 0; j < u->n_operands; j++)
                while (u->operands[j]->id < n_ids && to[u->operands[j]->id])
                    u->operands[j] = to[u->operands[j]->id];
            if (!(drop && u->id < n_ids && drop[u->id]))
                c->instrs[w++] = u;
        }
        c->n_instrs = w;
        while (c->root && c->root->id < n_ids && to[c->root->id])
            c->root = to[c->root->id];
    }
}

/* A copy of `i`'s operand in `i`'s slot `x` of its computation; the uses move later (rewire). */
static IrInstr *
copy_in_place_of(IrModule *m, IrInstr *i, uint32_t x)
{
    IrComputation *c = i->parent;
    IrInstr *cp = ir_instr_new(m, IR_OP_COPY, &i->shape, &i->operands[0], 1);
    if (!cp)
        return NULL;
    cp->name = ir_module_unique_name(m, sl_str("copy"));
    if (!cp->name || ir_computation_add_instr(c, m, cp))
        return NULL;
    /* ir_computation_add_instr appended it: move it to i's slot. */
    c->n_instrs--;
    c->instrs[x] = cp;
    return cp;
}

/* ---- the pass ---- */

typedef struct UnspecDims {
    const IrInstr *copy; /* the copy that replaced a Sharding op */
    uint32_t n;
    int64_t dims[PROP_MAX_RANK];
} UnspecDims;

static void
add_group_member(PropCtx *cx, Groups *g, IrInstr *i, int64_t id, int kind)
{
    SL_VEC_PUSH(&g->members, IrInstr *, i);
    SL_VEC_PUSH(&g->ids, int64_t, id);
    int8_t k8 = (int8_t)kind;
    SL_VEC_PUSH(&g->kinds, int8_t, k8);
    if (i->id < cx->n_ids) {
        cx->group[i->id] = id;
        cx->group_kind[i->id] = (int8_t)kind;
    }
}

static const ShdSharding *
without_group(PropCtx *cx, const ShdSharding *s)
{
    if (!s || !s->shard_group_kind)
        return s;
    ShdSharding *c = SL_NEW(cx->a, ShdSharding);
    if (!c)
        return s;
    *c = *s;
    c->shard_group_kind = 0;
    c->shard_group_id = 0;
    return c;
}

static bool
is_cse_prevention(const ShdSharding *s)
{
    static const char k[] = "_sharding_propagation_cse_prevention";
    if (!s || s->kind == SHD_TUPLE)
        return false;
    SlStr md = s->metadata;
    if (!md.len || (md.len > 1 && md.ptr[1] == '{'))
        return false;
    for (size_t p = 0; p + sizeof(k) - 1 <= md.len; p++)
        if (!memcmp(md.ptr + p, k, sizeof(k) - 1))
            return true;
    return false;
}

static const ShdSharding *
assign_md(PropCtx *cx, const ShdSharding *s, SlStr md)
{
    if (s->kind != SHD_TUPLE)
        return s->metadata.len ? s : px_with_md(cx, s, md);
    const ShdSharding **lv = SL_NEW_ARRAY(cx->a, const ShdSharding *, s->n_leaves + 1);
    if (!lv)
        return s;
    for (uint32_t i = 0; i < s->n_leaves; i++)
        lv[i] = assign_md(cx, s->leaves[i], md);
    return shd_tuple(cx->a, lv, s->n_leaves);
}

static SlStatus
write_back(PropCtx *cx, IrInstr *i, const ShdSharding *s)
{
    IrAttr *a = ir_instr_find_attr_mut(i, IR_ATTR_SHARDING);
    if (!s) {
        if (a)
            ir_instr_remove_attr(i, IR_ATTR_SHARDING);
        return SL_OK;
    }
    if (a && a->u.sharding == s)
        return SL_OK;
    if (!a && !(a = ir_instr_add_attr(cx->m, i, IR_ATTR_SHARDING)))
        return SL_ERR_NOMEM;
    a->u.sharding = s;
    ir_instr_place_sharding(i, a);
    return SL_OK;
}

static bool
md_equal_deep(const ShdSharding *a, const ShdSharding *b)
{
    if (!a || !b)
        return a == b;
    if (!shd_equal(a, b))
        return false;
    if (a->kind == SHD_TUPLE && b->kind == SHD_TUPLE) {
        for (uint32_t i = 0; i < a->n_leaves && i < b->n_leaves; i++)
            if (!sl_str_eq(a->leaves[i]->metadata, b->leaves[i]->metadata))
                return false;
        return true;
    }
    if (a->kind == SHD_TUPLE || b->kind == SHD_TUPLE)
        return true;
    return sl_str_eq(a->metadata, b->metadata);
}

static SlStatus
run_pass(PropCtx *cx, IrModule *m, const PropOptions *o, SlArena *a, PropResult *out,
         SlError *err)
{
    SlSrcLoc none = {0};
    cx->m = m;
    cx->o = o;
    for (uint32_t k = 0; k < o->n_allow_output; k++)
        cx->allow_output |= o->allow_output[k];
    for (uint32_t k = 0; k < o->n_allow_params; k++)
        cx->allow_params |= o->allow_params[k];
    IrComputation *entry = m->entry;
    if (!entry || !entry->root)
        return sl_fail(err, SL_ERR_INVALID, none, "the module has no entry computation");

    /* One body per call site: a body's shardings follow its caller's. */
    if (prop_flatten_calls(m, &cx->scratch))
        out->changed = true;

    /* Original shardings by instruction, before anything changes. */
    uint32_t n0 = m->next_instr_id;
    const ShdSharding **orig = SL_NEW_ARRAY(a, const ShdSharding *, n0 + 1);
    if (!orig)
        return SL_ERR_NOMEM;
    for (uint32_t ci = 0; ci < m->n_comps; ci++)
        for (uint32_t x = 0; x < m->comps[ci]->n_instrs; x++) {
            IrInstr *i = m->comps[ci]->instrs[x];
            orig[i->id] = ir_instr_sharding(i);
        }

    /* The Sharding custom calls become copies (ProcessShardingInstruction), so that the
     * index arrays below are sized for the copies too. */
    SlVec *sharding_ops = &cx->owned[0], *removed_group_ops = &cx->owned[1];
    bool replace = !o->cse_prevention_only;
    IrInstr **to = SL_NEW_ARRAY(a, IrInstr *, n0 + 1);
    if (!to)
        return SL_ERR_NOMEM;
    for (uint32_t ci = 0; ci < m->n_comps; ci++) {
        IrComputation *c = m->comps[ci];
        if (!prop_options_thread(o, c))
            continue;
        for (uint32_t x = c->n_instrs; x-- > 0;) {
            IrInstr *i = c->instrs[x];
            if (!prop_is_custom_call(i, "Sharding"))
                continue;
            const ShdSharding *s = ir_instr_sharding(i);
            if (!s) {
                sl_vec_fini(sharding_ops);
                sl_vec_fini(removed_group_ops);
                return sl_fail(err, SL_ERR_INVALID,
                               (SlSrcLoc){NULL, i->src_line, i->src_col},
                               "Sharding custom call %s has no sharding attribute",
                               sl_sym_cstr(i->name));
            }
            if (!i->n_operands)
                continue;
            bool to_copy = replace && (s->kind != SHD_UNKNOWN ||
                                       i->operands[0]->op == IR_OP_PARAMETER);
            if (to_copy) {
                IrInstr *cp = copy_in_place_of(m, i, x);
                if (!cp)
                    return SL_ERR_NOMEM;
                to[i->id] = cp;
                /* The copy has no backend_config: its unspecified dims are kept here. */
                UnspecDims ud = {cp, 0, {0}};
                ud.n = prop_parse_unspecified(i, ud.dims, PROP_MAX_RANK);
                if (ud.n && !SL_VEC_PUSH(&cx->owned[2], UnspecDims, ud))
                    return SL_ERR_NOMEM;
                IrAttr *sa = ir_instr_add_attr(m, cp, IR_ATTR_SHARDING);
                if (!sa)
                    return SL_ERR_NOMEM;
                sa->u.sharding = s;
                ir_instr_place_sharding(cp, sa);
                /* as XLA's ReplaceInstruction: a replacement without op_name gets the
                 * replaced instruction's metadata */
                const IrAttr *md = ir_instr_find_attr(i, IR_ATTR_METADATA);
                IrAttr *ma = md ? ir_instr_add_attr(m, cp, IR_ATTR_METADATA) : NULL;
                if (md && !ma)
                    return SL_ERR_NOMEM;
                if (ma)
                    ma->u.metadata = md->u.metadata;
                SL_VEC_PUSH(sharding_ops, IrInstr *, cp);
            } else if (replace && s->shard_group_kind) {
                SL_VEC_PUSH(removed_group_ops, IrInstr *, i);
            } else {
                SL_VEC_PUSH(sharding_ops, IrInstr *, i);
            }
        }
    }

    rewire(m, to, NULL, n0);

    cx->n_ids = m->next_instr_id;
    uint32_t n = cx->n_ids;
    cx->sh = SL_NEW_ARRAY(a, const ShdSharding *, n + 1);
    cx->origin = SL_NEW_ARRAY(a, const PropOrigin *, n + 1);
    cx->provided = SL_NEW_ARRAY(a, bool, n + 1);
    cx->group = SL_NEW_ARRAY(a, int64_t, n + 1);
    cx->group_kind = SL_NEW_ARRAY(a, int8_t, n + 1);
    cx->unspec = SL_NEW_ARRAY(a, const int64_t *, n + 1);
    cx->n_unspec = SL_NEW_ARRAY(a, uint32_t, n + 1);
    cx->caller = SL_NEW_ARRAY(a, IrInstr *, m->next_comp_id + 1);
    if (!cx->sh || !cx->origin || !cx->provided || !cx->group || !cx->group_kind ||
        !cx->unspec || !cx->n_unspec || !cx->caller)
        return SL_ERR_NOMEM;
    for (uint32_t i = 0; i < n; i++)
        cx->group[i] = -1;
    cx->level = -1;
    cx->dir = PROP_DIR_FIXUP;
    bool any_changed = false;

    for (uint32_t ci = 0; ci < m->n_comps; ci++)
        for (uint32_t x = 0; x < m->comps[ci]->n_instrs; x++) {
            IrInstr *i = m->comps[ci]->instrs[x];
            const ShdSharding *s = cx->sh[i->id] = ir_instr_sharding(i);
            for (uint32_t l = 0; s && l < (s->kind == SHD_TUPLE ? s->n_leaves : 1); l++) {
                const ShdSharding *e = s->kind == SHD_TUPLE ? s->leaves[l] : s;
                if (e->kind == SHD_TILED && shd_device_count(e) > cx->max_devices)
                    cx->max_devices = shd_device_count(e);
            }
        }

    /* CSE prevention shardings of an earlier run go; metadata is assigned or removed. */
    const ShdSharding **saved_cse = NULL;
    if (o->cse_prevention_only) {
        saved_cse = SL_NEW_ARRAY(a, const ShdSharding *, n + 1);
        if (!saved_cse)
            return SL_ERR_NOMEM;
        memcpy(saved_cse, cx->sh, n * sizeof(*saved_cse));
    }
    for (uint32_t ci = 0; ci < m->n_comps; ci++)
        for (uint32_t x = 0; x < m->comps[ci]->n_instrs; x++) {
            IrInstr *i = m->comps[ci]->instrs[x];
            const ShdSharding *s = cx->sh[i->id];
            if (!s)
                continue;
            if (!o->cse_prevention_only && is_cse_prevention(s)) {
                cx->sh[i->id] = NULL;
                any_changed = true;
                continue;
            }
            if (o->propagate_metadata) {
                const IrMetadata *md = ir_instr_metadata(i);
                if (md && md->raw.len > 2)
                    cx->sh[i->id] = assign_md(cx, s, md->raw);
            } else {
                cx->sh[i->id] = px_strip_md(cx, s);
            }
        }

    /* Shard groups, unspecified dims; a Sharding op's annotation also goes to an
     * unannotated operand. */
    Groups *g = &cx->groups;
    /* which instructions are Sharding ops (or their copies), and which leave (by id: a
     * search of the lists per instruction was quadratic in the number of Sharding ops) */
    enum { OP_KEPT = 1, OP_REMOVED = 2 };
    uint8_t *op_kind = SL_NEW_ARRAY(a, uint8_t, n + 1);
    if (!op_kind)
        return SL_ERR_NOMEM;
    for (size_t k = 0; k < sharding_ops->len; k++)
        op_kind[SL_VEC_AT(sharding_ops, IrInstr *, k)->id] |= OP_KEPT;
    for (size_t k = 0; k < removed_group_ops->len; k++)
        op_kind[SL_VEC_AT(removed_group_ops, IrInstr *, k)->id] |= OP_REMOVED;
    /* the copies' unspecified dims, kept aside when the copies were made */
    for (size_t q = 0; q < cx->owned[2].len; q++) {
        const UnspecDims *u = &SL_VEC_AT(&cx->owned[2], UnspecDims, q);
        if (!(cx->unspec[u->copy->id] = SL_DUP_ARRAY(a, int64_t, u->dims, u->n)))
            return SL_ERR_NOMEM;
        cx->n_unspec[u->copy->id] = u->n;
    }
    for (uint32_t ci = 0; ci < m->n_comps; ci++) {
        IrComputation *c = m->comps[ci];
        for (uint32_t x = c->n_instrs; x-- > 0;) {
            IrInstr *i = c->instrs[x];
            const ShdSharding *s = cx->sh[i->id];
            bool is_op = op_kind[i->id] & OP_KEPT, is_removed = op_kind[i->id] & OP_REMOVED;
            if (is_removed) {
                /* The group goes to the operand (visited later: it comes first). */
                IrInstr *op = i->operands[0];
                const ShdSharding *os = cx->sh[op->id] ? cx->sh[op->id] : shd_unknown(a);
                ShdSharding *cs = SL_NEW(a, ShdSharding);
                if (!cs)
                    return SL_ERR_NOMEM;
                *cs = *os;
                cs->shard_group_kind = s->shard_group_kind;
                cs->shard_group_id = s->shard_group_id;
                cx->sh[op->id] = cs;
                continue;
            }
            if (replace && s && s->shard_group_kind) {
                add_group_member(cx, g, i, s->shard_group_id, s->shard_group_kind);
                cx->sh[i->id] = without_group(cx, s);
            }
            if (is_op && i->n_operands) {
                int64_t ud[PROP_MAX_RANK];
                uint32_t nu = i->op == IR_OP_CUSTOM_CALL
                                  ? prop_parse_unspecified(i, ud, PROP_MAX_RANK)
                                  : 0;
                if (nu) {
                    if (!(cx->unspec[i->id] = SL_DUP_ARRAY(a, int64_t, ud, nu)))
                        return SL_ERR_NOMEM;
                    cx->n_unspec[i->id] = nu;
                } else if (!cx->n_unspec[i->id] && !cx->sh[i->operands[0]->id]) {
                    cx->sh[i->operands[0]->id] = cx->sh[i->id];
                }
            }
        }
    }
    if (removed_group_ops->len) {
        IrInstr **gone = SL_NEW_ARRAY(a, IrInstr *, n + 1);
        bool *drop = SL_NEW_ARRAY(a, bool, n + 1);
        if (!gone || !drop)
            return SL_ERR_NOMEM;
        for (size_t k = 0; k < removed_group_ops->len; k++) {
            IrInstr *i = SL_VEC_AT(removed_group_ops, IrInstr *, k);
            gone[i->id] = i->operands[0];
            drop[i->id] = true;
        }
        rewire(m, gone, drop, n);
        any_changed = true;
    }
    sl_vec_fini(removed_group_ops);
    sl_vec_fini(sharding_ops);

    /* Saved output and parameter shardings. */
    IrInstr *root = entry->root;
    const ShdSharding *saved_root = root->shape.dtype == IR_DT_TUPLE ? cx->sh[root->id] : NULL;
    uint32_t np = entry->n_params;
    const ShdSharding **saved_params = SL_NEW_ARRAY(a, const ShdSharding *, np + 1);
    if (!saved_params)
        return SL_ERR_NOMEM;
    for (uint32_t p = 0; p < np; p++)
        saved_params[p] = entry->params[p] ? cx->sh[entry->params[p]->id] : NULL;

    if (cx->allow_params && o->n_allow_params != 1 && o->n_allow_params != np &&
        !(np == 1 && entry->params[0] && ir_shape_is_tuple(&entry->params[0]->shape) &&
          entry->params[0]->shape.n_elems == o->n_allow_params))
        return sl_fail(err, SL_ERR_INVALID, none,
                       "allow_spmd_sharding_propagation_to_parameters has %u values; the entry "
                       "has %u parameters",
                       o->n_allow_params, np);
    if (cx->allow_output && cx->sh[root->id] && o->n_allow_output != 1) {
        const ShdSharding *rs = cx->sh[root->id];
        uint32_t nl = rs->kind == SHD_TUPLE ? rs->n_leaves : 1;
        if (nl != o->n_allow_output)
            return sl_fail(err, SL_ERR_INVALID, none,
                           "allow_spmd_sharding_propagation_to_output has %u values; the "
                           "entry's result has %u elements",
                           o->n_allow_output, nl);
    }

    prop_build_users(cx);
    if (!cx->users || !cx->order)
        return SL_ERR_NOMEM;
    cx->flags = SL_NEW_ARRAY(a, uint8_t, n + 1);
    if (!cx->flags)
        return SL_ERR_NOMEM;
    for (int d = 0; d < 2; d++) {
        cx->memo_sig[d] = SL_NEW_ARRAY(a, uint64_t, n + 1);
        cx->memo_level[d] = SL_NEW_ARRAY(a, int8_t, n + 1);
        if (!cx->memo_sig[d] || !cx->memo_level[d])
            return SL_ERR_NOMEM;
        memset(cx->memo_level[d], 0xff, n + 1);
    }
    for (uint32_t ci = 0; ci < m->n_comps; ci++)
        for (uint32_t x = 0; x < m->comps[ci]->n_instrs; x++) {
            IrInstr *i = m->comps[ci]->instrs[x];
            if (i->op != IR_OP_CUSTOM_CALL)
                continue;
            cx->flags[i->id] = (prop_is_custom_call(i, "ShardBarrierFrom") ? PROP_F_BARRIER_FROM : 0) |
                               (prop_is_custom_call(i, "ShardBarrierTo") ? PROP_F_BARRIER_TO : 0) |
                               (prop_is_custom_call(i, "SPMDFullToShardShape") ||
                                        prop_is_custom_call(i, "SPMDShardToFullShape")
                                    ? PROP_F_MANUAL_CONV
                                    : 0) |
                               (prop_is_custom_call(i, "Sharding") ? PROP_F_SHARDING : 0) |
                               (prop_is_custom_call(i, "SPMDFullToShardShape") ? PROP_F_FULL_TO_SHARD
                                                                               : 0);
        }

    /* A while whose body holds a channel instruction on one device stays on that device. */
    for (uint32_t ci = 0; ci < m->n_comps; ci++)
        for (uint32_t x = 0; x < m->comps[ci]->n_instrs; x++) {
            IrInstr *w = m->comps[ci]->instrs[x];
            if (w->op == IR_OP_WHILE && prop_check_while_devices(cx, w, err))
                return err->status;
        }

    /* Computation map and related instructions share one sharding. */
    for (uint32_t ci = 0; ci < m->n_comps; ci++) {
        IrComputation *c = m->comps[ci];
        for (uint32_t x = 0; x < c->n_instrs; x++) {
            IrInstr *i = c->instrs[x];
            if (i->op != IR_OP_WHILE && i->op != IR_OP_CONDITIONAL && i->op != IR_OP_CALL)
                continue;
            IrInstr *rel[PROP_MAX_RELATED];
            uint32_t nr = prop_related(cx, i, rel);
            const IrInstr *sharded = NULL;
            for (uint32_t k = 0; k < nr && !sharded; k++)
                if (cx->sh[rel[k]->id])
                    sharded = rel[k];
            if (sharded) {
                cx->from = sharded;
                cx->rule = "computation boundary";
                cx->dir = PROP_DIR_COMPUTATION;
                for (uint32_t k = 0; k < nr; k++)
                    if (rel[k] != sharded &&
                        !prop_same_sharding(cx->sh[rel[k]->id], cx->sh[sharded->id]))
                        prop_set(cx, rel[k], cx->sh[sharded->id], NULL);
                    else if (rel[k] != sharded)
                        cx->sh[rel[k]->id] = cx->sh[sharded->id];
            }
            IrComputation *b[PROP_MAX_RELATED];
            uint32_t nb = prop_bodies(i, b, PROP_MAX_RELATED);
            for (uint32_t k = 0; k < nb; k++)
                cx->caller[b[k]->id] = i;
        }
    }
    cx->from = NULL;
    cx->dir = PROP_DIR_FIXUP;

    /* Provided shardings. */
    for (uint32_t ci = 0; ci < m->n_comps; ci++) {
        IrComputation *c = m->comps[ci];
        for (uint32_t x = 0; x < c->n_instrs; x++) {
            IrInstr *i = c->instrs[x];
            const ShdSharding *s = cx->sh[i->id];
            if (s && i != root && i->op != IR_OP_PARAMETER && s->kind != SHD_UNKNOWN)
                cx->provided[i->id] = true;
        }
    }
    if (!cx->allow_output && (!cx->sh[root->id] || cx->sh[root->id]->kind != SHD_UNKNOWN)) {
        if (root->op == IR_OP_WHILE) {
            /* A copy after the while keeps the output sharding, so that the loop's own may
             * still change. */
            IrInstr *cp = ir_instr_new(m, IR_OP_COPY, &root->shape, &root, 1);
            if (!cp || !(cp->name = ir_module_unique_name(m, sl_str("copy"))) ||
                ir_computation_add_instr(entry, m, cp))
                return SL_ERR_NOMEM;
            /* The new id is past the arrays: give the copy the while's slot data by
             * growing them. */
            uint32_t nn = m->next_instr_id;
            const ShdSharding **sh2 = SL_NEW_ARRAY(a, const ShdSharding *, nn + 1);
            const PropOrigin **or2 = SL_NEW_ARRAY(a, const PropOrigin *, nn + 1);
            bool *pr2 = SL_NEW_ARRAY(a, bool, nn + 1);
            int64_t *g2 = SL_NEW_ARRAY(a, int64_t, nn + 1);
            int8_t *gk2 = SL_NEW_ARRAY(a, int8_t, nn + 1);
            const int64_t **u2 = SL_NEW_ARRAY(a, const int64_t *, nn + 1);
            uint32_t *nu2 = SL_NEW_ARRAY(a, uint32_t, nn + 1);
            uint8_t *f2 = SL_NEW_ARRAY(a, uint8_t, nn + 1);
            if (!sh2 || !or2 || !pr2 || !g2 || !gk2 || !u2 || !nu2 || !f2)
                return SL_ERR_NOMEM;
            memcpy(sh2, cx->sh, n * sizeof(*sh2));
            memcpy(or2, cx->origin, n * sizeof(*or2));
            memcpy(pr2, cx->provided, n * sizeof(*pr2));
            memcpy(g2, cx->group, n * sizeof(*g2));
            memcpy(gk2, cx->group_kind, n * sizeof(*gk2));
            memcpy(u2, cx->unspec, n * sizeof(*u2));
            memcpy(nu2, cx->n_unspec, n * sizeof(*nu2));
            memcpy(f2, cx->flags, n * sizeof(*f2));
            cx->flags = f2;
            for (int d = 0; d < 2; d++) {
                uint64_t *ms = SL_NEW_ARRAY(a, uint64_t, nn + 1);
                int8_t *ml = SL_NEW_ARRAY(a, int8_t, nn + 1);
                if (!ms || !ml)
                    return SL_ERR_NOMEM;
                memset(ml, 0xff, nn + 1);
                cx->memo_sig[d] = ms;
                cx->memo_level[d] = ml;
            }
            for (uint32_t k = n; k < nn; k++)
                g2[k] = -1;
            cx->sh = sh2;
            cx->origin = or2;
            cx->provided = pr2;
            cx->group = g2;
            cx->group_kind = gk2;
            cx->unspec = u2;
            cx->n_unspec = nu2;
            cx->n_ids = n = nn;
            entry->root = cp;
            cx->sh[cp->id] = cx->sh[root->id];
            root = cp;
            prop_build_users(cx);
            if (!cx->users || !cx->order)
                return SL_ERR_NOMEM;
            any_changed = true;
        }
        cx->provided[root->id] = true;
    }
    if (!cx->allow_params)
        for (uint32_t p = 0; p < np; p++) {
            IrInstr *pi = entry->params[p];
            if (pi && cx->sh[pi->id] && cx->sh[pi->id]->kind != SHD_UNKNOWN)
                cx->provided[pi->id] = true;
        }

    /* Unknown shardings propagate as replicated. */
    for (uint32_t ci = 0; ci < m->n_comps; ci++)
        for (uint32_t x = 0; x < m->comps[ci]->n_instrs; x++) {
            IrInstr *i = m->comps[ci]->instrs[x];
            const ShdSharding *s = cx->sh[i->id];
            if (s && s->kind == SHD_UNKNOWN)
                cx->sh[i->id] = px_replicated_sh(cx, s);
        }

    prop_collect_stable(cx);
    for (int level = 0; level < 4; level++)
        any_changed |= prop_run_to_fix_point(cx, g, level);

    /* shard_as groups adopt one common sharding. */
    IrInstr **members = SL_NEW_ARRAY(a, IrInstr *, PROP_MAX_GROUP);
    if (!members)
        return SL_ERR_NOMEM;
    cx->level = -1;
    cx->dir = PROP_DIR_GROUP;
    cx->rule = "shard_as alignment";
    for (size_t k = 0; k < g->ids.len; k++) {
        int64_t id = SL_VEC_AT(&g->ids, int64_t, k);
        if (SL_VEC_AT(&g->kinds, int8_t, k) != 1)
            continue;
        bool first = true;
        for (size_t j = 0; j < k; j++)
            if (SL_VEC_AT(&g->ids, int64_t, j) == id && SL_VEC_AT(&g->kinds, int8_t, j) == 1)
                first = false;
        if (!first)
            continue;
        uint32_t nm = prop_group_members(g, id, members, PROP_MAX_GROUP);
        const ShdSharding *def = shd_replicated(a), *common = NULL;
        bool compatible = true;
        for (uint32_t x = 0; x < nm; x++) {
            const ShdSharding *s = cx->sh[members[x]->id];
            if (!s)
                continue;
            if (!prop_is_custom_call(members[x], "ShardBarrierFrom") && px_replicated(def))
                def = s;
            if (!common)
                common = s;
            else if (compatible && !shd_equal(common, s) &&
                     !px_merge_if_compatible(cx, s, px_num_tiles(common), &common))
                compatible = false;
        }
        if (!common || !compatible)
            common = def;
        for (uint32_t x = 0; x < nm; x++) {
            IrInstr *mi = members[x];
            if (prop_is_custom_call(mi, "ShardBarrierTo"))
                continue;
            if (!prop_same_sharding(cx->sh[mi->id], common) ||
                !md_equal_deep(cx->sh[mi->id], common)) {
                cx->from = NULL;
                prop_set(cx, mi, common, NULL);
            }
        }
    }

    /* A ShardBarrierFrom in a shard_as group relays its sharding to its operand; then one more
     * fixed point at the highest level. */
    cx->rule = "shard barrier relay";
    for (uint32_t ci = 0; ci < m->n_comps; ci++)
        for (uint32_t x = 0; x < m->comps[ci]->n_instrs; x++) {
            IrInstr *i = m->comps[ci]->instrs[x];
            if (!(cx->flags[i->id] & PROP_F_BARRIER_FROM) || cx->group[i->id] < 0 ||
                cx->group_kind[i->id] != 1 || !i->n_operands || !cx->sh[i->id])
                continue;
            const ShdSharding *s = cx->sh[i->id];
            const ShdSharding *os = cx->sh[i->operands[0]->id];
            if (os)
                px_merge_if_compatible(cx, os, px_num_tiles(s), &s);
            cx->from = i;
            prop_set(cx, i->operands[0], s, NULL);
        }
    any_changed |= prop_run_to_fix_point(cx, g, 3);

    /* Shard barriers go. */
    IrInstr **barrier_to = SL_NEW_ARRAY(a, IrInstr *, n + 1);
    bool *barrier = SL_NEW_ARRAY(a, bool, n + 1), any_barrier = false;
    if (!barrier_to || !barrier)
        return SL_ERR_NOMEM;
    for (uint32_t ci = 0; ci < m->n_comps; ci++) {
        IrComputation *c = m->comps[ci];
        if (!prop_options_thread(o, c))
            continue;
        for (uint32_t x = 0; x < c->n_instrs; x++) {
            IrInstr *i = c->instrs[x];
            if ((cx->flags[i->id] & (PROP_F_BARRIER_FROM | PROP_F_BARRIER_TO)) && i->n_operands) {
                barrier_to[i->id] = i->operands[0];
                barrier[i->id] = any_barrier = true;
            }
        }
    }
    if (any_barrier) {
        rewire(m, barrier_to, barrier, n);
        any_changed = true;
    }

    /* CSE prevention only: keep only the new shardings of the targets, marked. */
    if (o->cse_prevention_only) {
        static const char k_md[] = "{op_name=\"_sharding_propagation_cse_prevention\"}";
        for (uint32_t ci = 0; ci < m->n_comps; ci++)
            for (uint32_t x = 0; x < m->comps[ci]->n_instrs; x++) {
                IrInstr *i = m->comps[ci]->instrs[x];
                if (!cx->sh[i->id])
                    continue;
                bool target = i->op == IR_OP_BROADCAST && i->n_operands &&
                              i->operands[0]->shape.rank == 0;
                if (target) {
                    if (!saved_cse[i->id] && cx->sh[i->id]->kind != SHD_TUPLE)
                        cx->sh[i->id] =
                            px_with_md(cx, cx->sh[i->id], (SlStr){k_md, sizeof(k_md) - 1});
                    continue;
                }
                cx->sh[i->id] = i->id < n ? saved_cse[i->id] : NULL;
            }
    }

    /* Output and parameter restrictions. */
    root = entry->root;
    if (saved_root && cx->sh[root->id] && saved_root->kind == SHD_TUPLE &&
        saved_root->n_leaves == o->n_allow_output) {
        const ShdSharding *rs = px_single_tuple(cx, &root->shape, cx->sh[root->id]);
        if (rs->kind == SHD_TUPLE && rs->n_leaves == saved_root->n_leaves) {
            const ShdSharding **lv = SL_NEW_ARRAY(a, const ShdSharding *, rs->n_leaves + 1);
            if (!lv)
                return SL_ERR_NOMEM;
            for (uint32_t k = 0; k < rs->n_leaves; k++)
                lv[k] = !o->allow_output[k] && saved_root->leaves[k]->kind != SHD_UNKNOWN
                            ? saved_root->leaves[k]
                            : rs->leaves[k];
            cx->sh[root->id] = shd_tuple(a, lv, rs->n_leaves);
        }
    }
    if (cx->allow_params) {
        if (o->n_allow_params == np) {
            for (uint32_t p = 0; p < np; p++) {
                IrInstr *pi = entry->params[p];
                if (!pi || o->allow_params[p])
                    continue;
                cx->sh[pi->id] = saved_params[p] && saved_params[p]->kind != SHD_UNKNOWN
                                     ? saved_params[p]
                                     : NULL;
            }
        } else if (np == 1 && saved_params[0] && entry->params[0] &&
                   ir_shape_is_tuple(&entry->params[0]->shape) &&
                   entry->params[0]->shape.n_elems == o->n_allow_params) {
            IrInstr *pi = entry->params[0];
            const ShdSharding *ps = cx->sh[pi->id];
            for (uint32_t k = 0; k < pi->shape.n_elems && ps; k++) {
                const ShdSharding *sv = px_sub(cx, saved_params[0], &pi->shape, k);
                if (!o->allow_params[k] && sv && sv->kind != SHD_UNKNOWN)
                    ps = px_replace_sub(cx, ps, &pi->shape, k, sv);
            }
            cx->sh[pi->id] = ps;
        }
    }
    cx->rule = "not evenly partitioned";
    cx->dir = PROP_DIR_FIXUP;
    cx->from = NULL;
    if (cx->allow_output && cx->sh[root->id]) {
        const ShdSharding *rs = cx->sh[root->id];
        if (ir_shape_is_tuple(&root->shape) && o->n_allow_output == root->shape.n_elems) {
            const ShdSharding *ns = rs;
            for (uint32_t k = 0; k < root->shape.n_elems; k++)
                if (o->allow_output[k] &&
                    !px_evenly(&root->shape.elems[k], px_sub(cx, rs, &root->shape, k)))
                    ns = px_replace_sub(cx, ns, &root->shape, k, shd_replicated(a));
            if (ns != rs)
                prop_set(cx, root, ns, NULL);
        } else if (!ir_shape_is_tuple(&root->shape) && !px_evenly(&root->shape, rs)) {
            prop_set(cx, root, shd_replicated(a), NULL);
        }
    }
    if (cx->allow_params) {
        if (o->n_allow_params == np) {
            for (uint32_t p = 0; p < np; p++) {
                IrInstr *pi = entry->params[p];
                if (pi && cx->sh[pi->id] && o->allow_params[p] &&
                    !px_evenly(&pi->shape, cx->sh[pi->id]))
                    prop_set(cx, pi, shd_replicated(a), NULL);
            }
        } else if (np == 1 && entry->params[0] && cx->sh[entry->params[0]->id] &&
                   ir_shape_is_tuple(&entry->params[0]->shape) &&
                   entry->params[0]->shape.n_elems == o->n_allow_params) {
            IrInstr *pi = entry->params[0];
            const ShdSharding *ps = cx->sh[pi->id], *ns = ps;
            for (uint32_t k = 0; k < pi->shape.n_elems; k++)
                if (o->allow_params[k] &&
                    !px_evenly(&pi->shape.elems[k], px_sub(cx, ps, &pi->shape, k)))
                    ns = px_replace_sub(cx, ns, &pi->shape, k, shd_replicated(a));
            if (ns != ps)
                prop_set(cx, pi, ns, NULL);
        }
    }

    /* Write the shardings back and count. */
    out->final_origin = SL_NEW_ARRAY(a, const PropOrigin *, n + 1);
    if (!out->final_origin)
        return SL_ERR_NOMEM;
    out->n_ids = n;
    for (uint32_t ci = 0; ci < m->n_comps; ci++)
        for (uint32_t x = 0; x < m->comps[ci]->n_instrs; x++) {
            IrInstr *i = m->comps[ci]->instrs[x];
            const ShdSharding *was = i->id < n0 ? orig[i->id] : ir_instr_sharding(i);
            out->n_instrs++;
            if (!prop_options_thread(o, m->comps[ci]))
                continue; /* other threads keep what they had */
            const ShdSharding *s = cx->sh[i->id];
            if (s && !was)
                out->n_propagated++;
            if (!md_equal_deep(s, was))
                any_changed = true;
            if (s != was || (s && !md_equal_deep(s, was))) {
                SlStatus st = write_back(cx, i, s);
                if (st)
                    return st;
            }
            out->final_origin[i->id] = s && !md_equal_deep(s, was) ? cx->origin[i->id] : NULL;
        }
    out->origins = (PropOrigin **)cx->origins.data;
    out->n_origins = (uint32_t)cx->origins.len;
    out->iterations = cx->iterations;
    out->changed = out->changed || any_changed;
    /* The origin list's heap array is handed to the caller's arena. */
    if (cx->origins.len) {
        PropOrigin **copy = SL_DUP_ARRAY(a, PropOrigin *, cx->origins.data, cx->origins.len);
        sl_vec_fini(&cx->origins);
        out->origins = copy;
    }
    return sl_arena_failed(a) ? SL_ERR_NOMEM : SL_OK;
}

SlStatus
prop_run(IrModule *m, const PropOptions *o, SlArena *a, PropResult *out, SlError *err)
{
    memset(out, 0, sizeof(*out));
    PropCtx cx = {0};
    cx.a = a;
    cx.keep = a;
    sl_arena_init(&cx.scratch);
    SlStatus st = run_pass(&cx, m, o, a, out, err);
    sl_arena_fini(&cx.scratch);
    sl_vec_fini(&cx.origins);
    for (size_t k = 0; k < SL_COUNTOF(cx.owned); k++)
        sl_vec_fini(&cx.owned[k]);
    sl_vec_fini(&cx.groups.members);
    sl_vec_fini(&cx.groups.ids);
    sl_vec_fini(&cx.groups.kinds);
    if (st && !err->status)
        sl_fail(err, st, (SlSrcLoc){0}, "sharding propagation failed (%s)", sl_status_name(st));
    return st;
}
