/* dce.c - removal of dead instructions and uncalled computations.
 * The first step of the cleanup that follows partitioning (gspmd.md, "Pipeline context" step
 * 4): handlers clone every source instruction and build index arithmetic eagerly, so a
 * partitioned module holds values nothing reads (a constant whose only user was rewritten, a
 * table lookup a fast path did not need). Like XLA's cleanup, collectives count as removable;
 * sends, receives, feeds, rng and side-effecting custom calls do not. */
#include "ir.h"

#include <string.h>

/* An OTHER attribute spelled `name` whose verbatim value is `value`. */
static bool
has_other_attr(const IrInstr *i, const char *name, const char *value)
{
    const IrAttr *a = ir_instr_find_other(i, name);
    return a && sl_str_eq_cstr(a->u.text, value);
}

bool
ir_instr_has_side_effect(const IrInstr *i)
{
    switch (i->op) {
    case IR_OP_SEND:
    case IR_OP_SEND_DONE:
    case IR_OP_RECV:
    case IR_OP_RECV_DONE:
    case IR_OP_INFEED:
    case IR_OP_OUTFEED:
    case IR_OP_RNG:
    case IR_OP_RNG_GET_AND_UPDATE_STATE:
    /* async pairs: the start alone holds the transfer in flight */
    case IR_OP_ALL_GATHER_START:
    case IR_OP_ALL_GATHER_DONE:
    case IR_OP_ALL_REDUCE_START:
    case IR_OP_ALL_REDUCE_DONE:
    case IR_OP_COLLECTIVE_PERMUTE_START:
    case IR_OP_COLLECTIVE_PERMUTE_DONE:
    case IR_OP_ASYNC_START:
    case IR_OP_ASYNC_UPDATE:
    case IR_OP_ASYNC_DONE:
    case IR_OP_CALL_START:
    case IR_OP_CALL_UPDATE:
    case IR_OP_CALL_DONE:
        return true;
    case IR_OP_CUSTOM_CALL: return has_other_attr(i, "custom_call_has_side_effect", "true");
    default: return false;
    }
}

/* Calls `visit(comp, ctx)` for each computation `i` calls (to_apply, body, branches, ...). */
static void
for_each_callee(const IrInstr *i, void (*visit)(const IrComputation *, void *), void *ctx)
{
    for (uint32_t k = 0; k < i->n_attrs; k++) {
        const IrAttr *a = &i->attrs[k];
        IrAttrKind kind = ir_attr_kind(a->key);
        if (kind == IR_AK_COMP && a->u.comp)
            visit(a->u.comp, ctx);
        else if (kind == IR_AK_COMPS)
            for (uint32_t c = 0; c < a->u.comps.n; c++)
                if (a->u.comps.v[c])
                    visit(a->u.comps.v[c], ctx);
    }
}

typedef struct Dce {
    IrModule *m;
    bool *comp_effect; /* by computation id: it, or something it calls, has a side effect */
    bool *comp_called; /* by computation id: reachable from the entry */
    bool any;          /* for_each_callee accumulator */
} Dce;

static void
note_callee_effect(const IrComputation *c, void *ctx)
{
    Dce *d = ctx;
    if (d->comp_effect[c->id])
        d->any = true;
}

static bool
has_side_effect(Dce *d, const IrInstr *i)
{
    if (ir_instr_has_side_effect(i))
        return true;
    d->any = false;
    for_each_callee(i, note_callee_effect, d);
    return d->any;
}

/* Removes what nobody uses from one computation, users before operands: operands precede
 * their users, so one backward pass sees every use count final. */
static uint32_t
sweep(Dce *d, IrComputation *c, uint32_t *uses, SlVec *removed)
{
    for (uint32_t k = 0; k < c->n_instrs; k++)
        if (ir_instr_find_attr(c->instrs[k], IR_ATTR_CONTROL_PREDECESSORS))
            return 0; /* ordering edges are kept by name: leave such computations alone */
    IrInstr *root = c->root ? c->root : (c->n_instrs ? c->instrs[c->n_instrs - 1] : NULL);
    for (uint32_t k = 0; k < c->n_instrs; k++) {
        const IrInstr *i = c->instrs[k];
        for (uint32_t o = 0; o < i->n_operands; o++)
            uses[i->operands[o]->id]++;
    }
    uint32_t n_dead = 0;
    for (uint32_t k = c->n_instrs; k-- > 0;) {
        IrInstr *i = c->instrs[k];
        if (i == root || uses[i->id] > 0 || i->op == IR_OP_PARAMETER || has_side_effect(d, i))
            continue;
        for (uint32_t o = 0; o < i->n_operands; o++)
            uses[i->operands[o]->id]--;
        if (removed && !SL_VEC_PUSH(removed, IrInstr *, i))
            removed = NULL; /* out of memory: the caller learns only the count */
        c->instrs[k] = NULL;
        n_dead++;
    }
    uint32_t w = 0;
    for (uint32_t k = 0; k < c->n_instrs; k++)
        if (c->instrs[k])
            c->instrs[w++] = c->instrs[k];
    c->n_instrs = w;
    return n_dead;
}

static void
mark_called(const IrComputation *c, void *ctx)
{
    Dce *d = ctx;
    d->comp_called[c->id] = true;
}

uint32_t
ir_module_remove_dead(IrModule *m, SlArena *scratch, SlVec *removed)
{
    if (!m->entry)
        return 0;
    Dce d = {m, NULL, NULL, false};
    SlArenaMark mark = sl_arena_mark(scratch);
    d.comp_effect = SL_NEW_ARRAY(scratch, bool, (size_t)m->next_comp_id + 1);
    d.comp_called = SL_NEW_ARRAY(scratch, bool, (size_t)m->next_comp_id + 1);
    uint32_t *uses = SL_NEW_ARRAY(scratch, uint32_t, (size_t)m->next_instr_id + 1);
    if (!d.comp_effect || !d.comp_called || !uses) {
        sl_arena_release(scratch, mark);
        return 0;
    }
    /* Callees come before callers, so each computation's effect is known when a caller asks. */
    for (uint32_t c = 0; c < m->n_comps; c++) {
        const IrComputation *comp = m->comps[c];
        for (uint32_t k = 0; k < comp->n_instrs && !d.comp_effect[comp->id]; k++)
            d.comp_effect[comp->id] = has_side_effect(&d, comp->instrs[k]);
    }
    uint32_t n_dead = 0;
    /* Callers first: a removed call site may leave its callee uncalled. */
    d.comp_called[m->entry->id] = true;
    for (uint32_t c = m->n_comps; c-- > 0;) {
        IrComputation *comp = m->comps[c];
        if (!d.comp_called[comp->id])
            continue;
        n_dead += sweep(&d, comp, uses, removed);
        for (uint32_t k = 0; k < comp->n_instrs; k++)
            for_each_callee(comp->instrs[k], mark_called, &d);
    }
    uint32_t w = 0;
    for (uint32_t c = 0; c < m->n_comps; c++) {
        IrComputation *comp = m->comps[c];
        if (d.comp_called[comp->id]) {
            m->comps[w++] = comp;
            continue;
        }
        for (uint32_t k = 0; k < comp->n_instrs; k++)
            if (removed && !SL_VEC_PUSH(removed, IrInstr *, comp->instrs[k]))
                removed = NULL;
        n_dead += comp->n_instrs;
    }
    m->n_comps = w;
    sl_arena_release(scratch, mark);
    return n_dead;
}
