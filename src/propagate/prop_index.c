/* prop_index.c - the pass's index of the module and the small queries the rules share: the
 * users of each instruction (CSR; a user is listed once however many of its operands the
 * instruction is), instructions by id, and each computation's instructions in post order; plus
 * custom-call targets, the entry root, and saturated shardings. Owns: building the index
 * (prop_build_users) and reading it. Does not own: when it is rebuilt (prop_run.c, after the
 * pass adds an instruction). */
#include "propagate/prop_int.h"

/* ---- small queries ---- */

bool
prop_is_custom_call(const IrInstr *i, const char *target)
{
    if (i->op != IR_OP_CUSTOM_CALL)
        return false;
    const IrAttr *a = ir_instr_find_attr(i, IR_ATTR_CUSTOM_CALL_TARGET);
    if (!a)
        return false;
    SlStr t = a->u.text;
    if (t.len >= 2 && t.ptr[0] == '"') {
        t.ptr++;
        t.len -= 2;
    }
    return sl_str_eq_cstr(t, target);
}

bool
prop_is_entry_root(const IrInstr *i)
{
    return i->parent->is_entry && i->parent->root == i;
}

bool
prop_saturated(const PropCtx *cx, const ShdSharding *s)
{
    return s && s->kind == SHD_TILED && s->n_subgroups == 0 &&
           shd_num_tiles(s) >= cx->max_devices;
}

uint32_t
prop_n_users(const PropCtx *cx, const IrInstr *i)
{
    return cx->user_start[i->id + 1] - cx->user_start[i->id];
}

IrInstr *
prop_user(const PropCtx *cx, const IrInstr *i, uint32_t k)
{
    return cx->users[cx->user_start[i->id] + k];
}

uint32_t
prop_non_root_users(const PropCtx *cx, const IrInstr *i)
{
    uint32_t n = prop_n_users(cx, i), r = n;
    for (uint32_t k = 0; k < n; k++)
        if (prop_user(cx, i, k) == i->parent->root)
            r--;
    return r;
}

/* ---- the index ---- */

void
prop_build_users(PropCtx *cx)
{
    uint32_t *count = SL_NEW_ARRAY(cx->a, uint32_t, cx->n_ids + 1);
    cx->user_start = SL_NEW_ARRAY(cx->a, uint32_t, cx->n_ids + 2);
    uint32_t *last = SL_NEW_ARRAY(cx->a, uint32_t, cx->n_ids + 1);
    if (!count || !cx->user_start || !last)
        return;
    /* A user counts once per operand (last[] remembers the latest user seen). */
    for (uint32_t ci = 0; ci < cx->m->n_comps; ci++) {
        IrComputation *c = cx->m->comps[ci];
        for (uint32_t x = 0; x < c->n_instrs; x++) {
            IrInstr *u = c->instrs[x];
            for (uint32_t j = 0; j < u->n_operands; j++) {
                IrInstr *o = u->operands[j];
                if (last[o->id] == u->id + 1)
                    continue;
                last[o->id] = u->id + 1;
                count[o->id]++;
            }
        }
    }
    uint32_t total = 0;
    for (uint32_t i = 0; i < cx->n_ids; i++) {
        cx->user_start[i] = total;
        total += count[i];
        count[i] = 0;
        last[i] = 0;
    }
    cx->user_start[cx->n_ids] = total;
    cx->by_id = SL_NEW_ARRAY(cx->a, IrInstr *, cx->n_ids + 1);
    cx->order = SL_NEW_ARRAY(cx->a, uint32_t, cx->n_ids + 1);
    cx->comp_start = SL_NEW_ARRAY(cx->a, uint32_t, cx->m->n_comps + 1);
    if (!cx->by_id || !cx->order || !cx->comp_start)
        return;
    uint32_t w = 0;
    for (uint32_t ci = 0; ci < cx->m->n_comps; ci++) {
        IrComputation *c = cx->m->comps[ci];
        cx->comp_start[ci] = w;
        for (uint32_t x = 0; x < c->n_instrs; x++) {
            cx->by_id[c->instrs[x]->id] = c->instrs[x];
            cx->order[w++] = c->instrs[x]->id;
        }
    }
    cx->comp_start[cx->m->n_comps] = w;
    cx->users = SL_NEW_ARRAY(cx->a, IrInstr *, total + 1);
    if (!cx->users || !cx->order)
        return;
    for (uint32_t ci = 0; ci < cx->m->n_comps; ci++) {
        IrComputation *c = cx->m->comps[ci];
        for (uint32_t x = 0; x < c->n_instrs; x++) {
            IrInstr *u = c->instrs[x];
            for (uint32_t j = 0; j < u->n_operands; j++) {
                IrInstr *o = u->operands[j];
                if (last[o->id] == u->id + 1)
                    continue;
                last[o->id] = u->id + 1;
                cx->users[cx->user_start[o->id] + count[o->id]++] = u;
            }
        }
    }
}
