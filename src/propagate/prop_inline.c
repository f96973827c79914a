/* prop_inline.c - the call inlining XLA's compile pipeline runs before sharding propagation
 * (its CallInliner, after FlattenCallGraph): every `call` is replaced by the instructions of
 * the computation it calls, its parameters by the call's operands and the call's users by the
 * callee's root. Owns: that rewrite and dropping the computations nothing calls afterwards.
 * A callee called once (the common case) has its instructions moved, names kept; a callee
 * called from several places is copied per site with fresh names. Calls into computations
 * with control-predecessor edges, or of another execution thread, are left as they are. */
#include <string.h>

#include "propagate/prop_int.h"

static bool
has_control_edges(const IrComputation *c)
{
    for (uint32_t k = 0; k < c->n_instrs; k++)
        if (ir_instr_find_attr(c->instrs[k], IR_ATTR_CONTROL_PREDECESSORS))
            return true;
    return false;
}

static bool
same_thread(const IrComputation *a, const IrComputation *b)
{
    return a->execution_thread.len == b->execution_thread.len &&
           (!a->execution_thread.len ||
            !memcmp(a->execution_thread.ptr, b->execution_thread.ptr, a->execution_thread.len));
}

/* Marks every computation c's instructions name. */
static void
mark_callees(const IrComputation *c, uint32_t *mark)
{
    for (uint32_t x = 0; x < c->n_instrs; x++) {
        const IrInstr *i = c->instrs[x];
        for (uint32_t k = 0; k < i->n_attrs; k++) {
            const IrAttr *a = &i->attrs[k];
            IrAttrKind kind = ir_attr_kind(a->key);
            if (kind == IR_AK_COMP && a->u.comp)
                mark[a->u.comp->id] = 1;
            else if (kind == IR_AK_COMPS)
                for (uint32_t b = 0; b < a->u.comps.n; b++)
                    if (a->u.comps.v[b])
                        mark[a->u.comps.v[b]->id] = 1;
        }
    }
}

/* How often each computation is named by an attribute (to_apply, body, branches, ...). */
static void
count_refs(const IrModule *m, uint32_t *refs)
{
    for (uint32_t ci = 0; ci < m->n_comps; ci++)
        for (uint32_t x = 0; x < m->comps[ci]->n_instrs; x++) {
            const IrInstr *i = m->comps[ci]->instrs[x];
            for (uint32_t k = 0; k < i->n_attrs; k++) {
                const IrAttr *a = &i->attrs[k];
                IrAttrKind kind = ir_attr_kind(a->key);
                if (kind == IR_AK_COMP && a->u.comp)
                    refs[a->u.comp->id]++;
                else if (kind == IR_AK_COMPS)
                    for (uint32_t b = 0; b < a->u.comps.n; b++)
                        if (a->u.comps.v[b])
                            refs[a->u.comps.v[b]->id]++;
            }
        }
}

/* A copy of `x` (operands as given), named after it. */
static IrInstr *
copy_instr(IrModule *m, const IrInstr *x, IrInstr **ops)
{
    IrInstr *n = ir_instr_new(m, x->op, &x->shape, ops, x->n_operands);
    if (!n || !(n->name = ir_module_unique_name(m, sl_sym_str(x->name))))
        return NULL;
    n->parameter_number = x->parameter_number;
    n->literal = x->literal;
    n->src_line = x->src_line;
    n->src_col = x->src_col;
    if (x->n_attrs && !ir_instr_reserve_attrs(m, n, x->n_attrs))
        return NULL;
    for (uint32_t a = 0; a < x->n_attrs; a++) {
        IrAttr *na = ir_instr_add_attr(m, n, x->attrs[a].key);
        if (!na)
            return NULL;
        *na = x->attrs[a];
    }
    return n;
}

/* Inlines call `call` (at position `at` of its computation). `move`: the callee has no other
 * use, so its instructions move over; else they are copied. False when out of memory (the
 * module is then unchanged). */
static bool
inline_one(IrModule *m, IrInstr *call, uint32_t at, IrComputation *f, bool move,
           SlArena *scratch)
{
    IrComputation *p = call->parent;
    IrInstr **map = SL_NEW_ARRAY(scratch, IrInstr *, m->next_instr_id + 1);
    IrInstr **body = SL_NEW_ARRAY(scratch, IrInstr *, f->n_instrs + 1);
    if (!map || !body)
        return false;
    uint32_t nb = 0;
    for (uint32_t k = 0; k < f->n_instrs; k++) {
        IrInstr *x = f->instrs[k];
        if (x->op == IR_OP_PARAMETER) {
            if (x->parameter_number < 0 || (uint64_t)x->parameter_number >= call->n_operands)
                return false;
            map[x->id] = call->operands[x->parameter_number];
            continue;
        }
        IrInstr **ops = SL_NEW_ARRAY(m->arena, IrInstr *, x->n_operands + 1);
        if (!ops)
            return false;
        for (uint32_t j = 0; j < x->n_operands; j++) {
            IrInstr *o = x->operands[j];
            ops[j] = map[o->id] ? map[o->id] : o;
        }
        IrInstr *n;
        if (move) {
            n = x;
            if (x->n_operands)
                memcpy(x->operands, ops, x->n_operands * sizeof(IrInstr *));
        } else if (!(n = copy_instr(m, x, ops))) {
            return false;
        }
        map[x->id] = n;
        body[nb++] = n;
    }
    IrInstr *root = f->root ? map[f->root->id] : NULL;
    if (!root)
        return false;
    /* p's list: [0, at) + body + (at, n) */
    uint32_t n_new = p->n_instrs - 1 + nb;
    IrInstr **v = SL_NEW_ARRAY(m->arena, IrInstr *, n_new + 1);
    if (!v)
        return false;
    memcpy(v, p->instrs, at * sizeof(IrInstr *));
    memcpy(v + at, body, nb * sizeof(IrInstr *));
    memcpy(v + at + nb, p->instrs + at + 1, (p->n_instrs - at - 1) * sizeof(IrInstr *));
    for (uint32_t k = 0; k < nb; k++)
        body[k]->parent = p;
    p->instrs = v;
    p->n_instrs = p->cap_instrs = n_new;
    for (uint32_t k = 0; k < p->n_instrs; k++) {
        IrInstr *u = p->instrs[k];
        for (uint32_t j = 0; j < u->n_operands; j++)
            if (u->operands[j] == call)
                u->operands[j] = root;
    }
    if (p->root == call)
        p->root = root;
    if (move)
        f->n_instrs = 0; /* moved out; the computation is dropped below */
    return true;
}

uint32_t
prop_inline_calls(IrModule *m)
{
    if (!m->entry)
        return 0;
    SlArena scratch_arena, *scratch = &scratch_arena;
    sl_arena_init(scratch);
    uint32_t *refs = SL_NEW_ARRAY(scratch, uint32_t, m->next_comp_id + 1);
    bool *gone = SL_NEW_ARRAY(scratch, bool, m->next_comp_id + 1);
    if (!refs || !gone) {
        sl_arena_fini(scratch);
        return 0;
    }
    count_refs(m, refs);
    uint32_t inlined = 0;
    /* Callees come before callers: a callee's own calls are inlined before it is. */
    for (uint32_t ci = 0; ci < m->n_comps; ci++) {
        IrComputation *c = m->comps[ci];
        for (uint32_t x = 0; x < c->n_instrs; x++) {
            IrInstr *i = c->instrs[x];
            IrComputation *f = i->op == IR_OP_CALL ? ir_instr_called(i, IR_ATTR_TO_APPLY) : NULL;
            if (!f || f == c || gone[f->id] || has_control_edges(f) || !same_thread(c, f))
                continue;
            bool move = refs[f->id] == 1;
            uint32_t before = c->n_instrs;
            SlArenaMark m2 = sl_arena_mark(scratch);
            bool ok = inline_one(m, i, x, f, move, scratch);
            sl_arena_release(scratch, m2);
            if (!ok)
                continue;
            refs[f->id]--;
            if (move)
                gone[f->id] = true;
            inlined++;
            /* continue after the inlined body (it has no calls left) */
            x += c->n_instrs - before;
        }
    }
    /* drop the computations the entry no longer reaches (callers come after callees) */
    if (inlined) {
        memset(refs, 0, (m->next_comp_id + 1) * sizeof(uint32_t));
        refs[m->entry->id] = 1;
        for (uint32_t ci = m->n_comps; ci-- > 0;)
            if (refs[m->comps[ci]->id] && !gone[m->comps[ci]->id])
                mark_callees(m->comps[ci], refs);
    }
    uint32_t w = 0;
    for (uint32_t ci = 0; ci < m->n_comps; ci++) {
        IrComputation *c = m->comps[ci];
        if (!inlined || (refs[c->id] && !gone[c->id]))
            m->comps[w++] = c;
    }
    m->n_comps = w;
    sl_arena_fini(scratch);
    return inlined;
}
