/* prop_flatten.c - one copy of a while/conditional/call body per call site, as XLA's
 * FlattenCallGraph leaves the module before sharding propagation: the pass keeps a body's
 * shardings equal to its caller's, which two callers with different shardings could not share.
 * Owns: cloning a computation (instructions, attributes, nested bodies get flattened on the next
 * sweep). Clones are named like XLA's ("body.clone", "add.3.clone") and listed right after the
 * original, so callees still come before callers. */
#include <string.h>

#include "propagate/prop_int.h"

static uint32_t
bodies_of(const IrInstr *i, IrComputation **out, IrAttr **slot, int *pos, uint32_t cap)
{
    uint32_t n = 0;
    static const IrAttrKey k_single[] = {IR_ATTR_CONDITION, IR_ATTR_BODY, IR_ATTR_TO_APPLY,
                                         IR_ATTR_TRUE_COMPUTATION, IR_ATTR_FALSE_COMPUTATION};
    if (i->op != IR_OP_WHILE && i->op != IR_OP_CONDITIONAL && i->op != IR_OP_CALL)
        return 0;
    for (uint32_t k = 0; k < i->n_attrs && n < cap; k++) {
        IrAttr *a = &i->attrs[k];
        for (size_t s = 0; s < SL_COUNTOF(k_single); s++)
            if (a->key == k_single[s] && a->u.comp) {
                out[n] = a->u.comp;
                slot[n] = a;
                pos[n++] = -1;
            }
        if (a->key == IR_ATTR_BRANCH_COMPUTATIONS)
            for (uint32_t b = 0; b < a->u.comps.n && n < cap; b++) {
                out[n] = a->u.comps.v[b];
                slot[n] = a;
                pos[n++] = (int)b;
            }
    }
    return n;
}

static SlSym
clone_name(IrModule *m, SlSym base)
{
    SlStr b = sl_sym_str(base);
    char buf[512];
    if (b.len + 7 > sizeof(buf))
        return ir_module_unique_name(m, b);
    memcpy(buf, b.ptr, b.len);
    memcpy(buf + b.len, ".clone", 6);
    return ir_module_unique_name(m, (SlStr){buf, b.len + 6});
}

static bool
has_control_edges(const IrComputation *c)
{
    for (uint32_t k = 0; k < c->n_instrs; k++)
        if (ir_instr_find_attr(c->instrs[k], IR_ATTR_CONTROL_PREDECESSORS))
            return true;
    return false;
}

/* A copy of `c`, listed right after it; NULL on failure. */
static IrComputation *
clone_computation(IrModule *m, IrComputation *c, SlArena *scratch)
{
    IrComputation *d = ir_computation_new(m, clone_name(m, c->name));
    if (!d || !d->name)
        return NULL;
    d->execution_thread = c->execution_thread;
    /* old instruction -> new, by id */
    IrInstr **map = SL_NEW_ARRAY(scratch, IrInstr *, m->next_instr_id + 1);
    IrInstr **ops = SL_NEW_ARRAY(scratch, IrInstr *, 1);
    if (!map || !ops)
        return NULL;
    for (uint32_t k = 0; k < c->n_instrs; k++) {
        IrInstr *i = c->instrs[k];
        IrInstr **o = i->n_operands ? SL_NEW_ARRAY(scratch, IrInstr *, i->n_operands) : ops;
        if (!o)
            return NULL;
        for (uint32_t j = 0; j < i->n_operands; j++)
            o[j] = i->operands[j]->id < m->next_instr_id && map[i->operands[j]->id]
                       ? map[i->operands[j]->id]
                       : i->operands[j];
        IrInstr *n = ir_instr_new(m, i->op, &i->shape, o, i->n_operands);
        if (!n || !(n->name = clone_name(m, i->name)))
            return NULL;
        n->parameter_number = i->parameter_number;
        n->literal = i->literal;
        n->src_line = i->src_line;
        n->src_col = i->src_col;
        if (i->n_attrs && !ir_instr_reserve_attrs(m, n, i->n_attrs))
            return NULL;
        for (uint32_t a = 0; a < i->n_attrs; a++) {
            IrAttr *na = ir_instr_add_attr(m, n, i->attrs[a].key);
            if (!na)
                return NULL;
            *na = i->attrs[a];
        }
        if (ir_computation_add_instr(d, m, n))
            return NULL;
        map[i->id] = n;
    }
    d->root = c->root ? map[c->root->id] : NULL;
    if (ir_module_add_computation(m, d))
        return NULL;
    /* move from the end to right after c */
    uint32_t at = 0;
    while (at < m->n_comps && m->comps[at] != c)
        at++;
    if (at + 1 < m->n_comps) {
        memmove(m->comps + at + 2, m->comps + at + 1,
                (m->n_comps - at - 2) * sizeof(IrComputation *));
        m->comps[at + 1] = d;
    }
    return d;
}

uint32_t
prop_flatten_calls(IrModule *m, SlArena *scratch)
{
    enum { CAP = 64 };
    uint32_t cloned = 0;
    for (int sweep = 0; sweep < 16; sweep++) {
        SlArenaMark mk = sl_arena_mark(scratch);
        uint32_t *uses = SL_NEW_ARRAY(scratch, uint32_t, m->next_comp_id + 1);
        if (!uses)
            return cloned;
        bool again = false;
        /* The call sites, callers first (the entry is last in the list): a computation's first
         * call site keeps it, every later one gets a copy. Collected before any copy is made,
         * since copies shift the list. */
        uint32_t n_sites = 0;
        for (uint32_t ci = 0; ci < m->n_comps; ci++)
            n_sites += m->comps[ci]->n_instrs;
        IrInstr **sites = SL_NEW_ARRAY(scratch, IrInstr *, n_sites + 1);
        if (!sites)
            return cloned;
        n_sites = 0;
        for (uint32_t ci = m->n_comps; ci-- > 0;) {
            IrComputation *c = m->comps[ci];
            for (uint32_t x = 0; x < c->n_instrs; x++) {
                IrInstr *i = c->instrs[x];
                if (i->op == IR_OP_WHILE || i->op == IR_OP_CONDITIONAL || i->op == IR_OP_CALL)
                    sites[n_sites++] = i;
            }
        }
        for (uint32_t si = 0; si < n_sites; si++) {
            IrComputation *b[CAP];
            IrAttr *slot[CAP];
            int pos[CAP];
            uint32_t nb = bodies_of(sites[si], b, slot, pos, CAP);
            for (uint32_t k = 0; k < nb; k++) {
                if (uses[b[k]->id]++ == 0 || has_control_edges(b[k]))
                    continue;
                IrComputation *d = clone_computation(m, b[k], scratch);
                if (!d)
                    continue;
                if (pos[k] < 0) {
                    slot[k]->u.comp = d;
                } else {
                    /* the list may be shared with another instruction: copy it */
                    IrComputation **v =
                        SL_NEW_ARRAY(m->arena, IrComputation *, slot[k]->u.comps.n);
                    if (!v)
                        continue;
                    memcpy(v, slot[k]->u.comps.v, slot[k]->u.comps.n * sizeof(*v));
                    v[pos[k]] = d;
                    slot[k]->u.comps.v = v;
                }
                cloned++;
                again = true; /* the copy's own bodies are now shared */
            }
        }
        sl_arena_release(scratch, mk);
        if (!again)
            break;
    }
    return cloned;
}
