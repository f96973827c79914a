/* prop_inline.c - the call inlining XLA's compile pipeline runs before sharding propagation
 * (its CallInliner, after FlattenCallGraph): every `call` is replaced by the instructions of
 * the computation it calls, its parameters by the call's operands and the call's users by the
 * callee's root. Owns: that rewrite and dropping the computations nothing calls afterwards.
 * A callee called once (the common case) has its instructions moved, names kept; a callee
 * called from several places is copied per site with fresh names. Calls into computations
 * with control-predecessor edges, or of another execution thread, are left as they are.
 * Like XLA's inliner, every inlined instruction's op_name gets the call's op_name in front
 * ("jit(f)/while/body/closed_call" + "/" + "dot_general"; the call's op_name alone when it had
 * none), and so do the instructions of the while bodies/conditions and conditional branches
 * it calls (recursively; not of other calls, nor of embedded computations such as to_apply
 * of a reduce). Names that would reach kMaxOpNameSize (1024 bytes) are left alone.
 * A module read from Shardy's round-trip form (m->sdy_round_trip) then has every
 * get-tuple-element of a `tuple` instruction replaced by that tuple's operand: XLA's Shardy
 * pipeline takes the inlined module through StableHLO, where a call's tuple result is a list
 * of values, so in its spmd input the users read the element itself (and the partitioner's
 * per-instruction reshard cache then serves a gather and a scatter-add of the same indices
 * with one all-gather). GSPMD's pipeline keeps the get-tuple-element. Such a module's
 * whiles also take their loop-invariant sharded state through a copy (copy_while_free_vars).
 */
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

#define MAX_OP_NAME 1024 /* XLA's CallInliner::kMaxOpNameSize */

/* i's metadata with `prefix` + "/" in front of its op_name (the prefix alone when it has
 * none). The raw text is rebuilt (it is what gets printed); metadata is shared between
 * instructions, so a new one is made. False on OOM. */
static bool
prefix_op_name(IrModule *m, IrInstr *i, SlStr prefix)
{
    IrAttr *a = ir_instr_find_attr_mut(i, IR_ATTR_METADATA);
    const IrMetadata *old = a ? a->u.metadata : NULL;
    size_t name_len = old ? old->op_name.len : 0;
    if (!prefix.len || prefix.len + name_len >= MAX_OP_NAME)
        return true;
    IrMetadata *md = SL_NEW(m->arena, IrMetadata);
    SlStr raw = old && old->raw.len >= 2 ? old->raw : sl_str("{}");
    /* where the new name goes: over the old op_name, or first in the braces */
    size_t at, cut;
    bool had = old && old->op_name.ptr && old->op_name.ptr >= raw.ptr &&
               old->op_name.ptr + old->op_name.len <= raw.ptr + raw.len;
    if (had) {
        at = (size_t)(old->op_name.ptr - raw.ptr);
        cut = old->op_name.len;
    } else {
        at = 1;
        cut = 0;
    }
    static const char open[] = "op_name=\"";
    bool empty_braces = raw.len == 2;
    size_t extra = had ? prefix.len + (name_len ? 1 : 0)
                       : sizeof(open) - 1 + prefix.len + 1 + (empty_braces ? 0 : 1);
    char *buf = md ? SL_NEW_ARRAY(m->arena, char, raw.len + extra + 1) : NULL;
    if (!buf)
        return false;
    if (old)
        *md = *old;
    size_t n = 0, name_at;
    memcpy(buf, raw.ptr, at);
    n = at;
    if (!had) {
        memcpy(buf + n, open, sizeof(open) - 1);
        n += sizeof(open) - 1;
    }
    name_at = n;
    memcpy(buf + n, prefix.ptr, prefix.len);
    n += prefix.len;
    if (had && name_len)
        buf[n++] = '/';
    memcpy(buf + n, raw.ptr + at, cut);
    n += cut;
    size_t name_end = n;
    if (!had) {
        buf[n++] = '"';
        if (!empty_braces)
            buf[n++] = ' ';
    }
    memcpy(buf + n, raw.ptr + at + cut, raw.len - at - cut);
    n += raw.len - at - cut;
    buf[n] = 0;
    md->raw = (SlStr){buf, n};
    md->op_name = (SlStr){buf + name_at, name_end - name_at};
    /* the other fields point into the old raw text: rebase them */
    if (old) {
        const SlStr *f[] = {&old->op_type, &old->source_file};
        SlStr *g[] = {&md->op_type, &md->source_file};
        for (int k = 0; k < 2; k++)
            if (f[k]->ptr >= raw.ptr && f[k]->ptr + f[k]->len <= raw.ptr + raw.len) {
                size_t off = (size_t)(f[k]->ptr - raw.ptr);
                off += off >= at + cut ? n - raw.len : 0;
                g[k]->ptr = buf + off;
            }
    }
    if (!a && !(a = ir_instr_add_attr(m, i, IR_ATTR_METADATA)))
        return false;
    a->u.metadata = md;
    return true;
}

/* prefix_op_name on `i` and on every instruction of the control-flow computations it calls
 * (while, conditional) that nothing else names (refs == 1), recursively. */
static bool
prefix_op_names(IrModule *m, IrInstr *i, SlStr prefix, const uint32_t *refs, uint32_t depth)
{
    if (!prefix_op_name(m, i, prefix))
        return false;
    if ((i->op != IR_OP_WHILE && i->op != IR_OP_CONDITIONAL) || depth > 64)
        return true;
    for (uint32_t k = 0; k < i->n_attrs; k++) {
        const IrAttr *a = &i->attrs[k];
        IrAttrKind kind = ir_attr_kind(a->key);
        uint32_t nc = kind == IR_AK_COMP ? 1 : kind == IR_AK_COMPS ? a->u.comps.n : 0;
        for (uint32_t b = 0; b < nc; b++) {
            IrComputation *c = kind == IR_AK_COMP ? a->u.comp : a->u.comps.v[b];
            if (!c || refs[c->id] != 1)
                continue;
            for (uint32_t x = 0; x < c->n_instrs; x++)
                if (!prefix_op_names(m, c->instrs[x], prefix, refs, depth + 1))
                    return false;
        }
    }
    return true;
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
           const uint32_t *refs, SlArena *scratch)
{
    const IrMetadata *cmd = ir_instr_metadata(call);
    SlStr prefix = cmd ? cmd->op_name : (SlStr){NULL, 0};
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
    for (uint32_t k = 0; k < nb; k++)
        if (!prefix_op_names(m, body[k], prefix, refs, 0))
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

/* Users of get-tuple-element(tuple(...)) read the tuple's operand instead; the
 * get-tuple-elements stay (unused unless one is a root). */
static void
forward_tuple_elements(IrModule *m)
{
    for (uint32_t ci = 0; ci < m->n_comps; ci++) {
        IrComputation *c = m->comps[ci];
        for (uint32_t x = 0; x < c->n_instrs; x++) {
            IrInstr *u = c->instrs[x];
            for (uint32_t j = 0; j < u->n_operands; j++) {
                IrInstr *g = u->operands[j];
                int64_t idx;
                while (g->op == IR_OP_GET_TUPLE_ELEMENT && g->n_operands == 1 &&
                       g->operands[0]->op == IR_OP_TUPLE &&
                       ir_instr_int_attr(g, IR_ATTR_INDEX, &idx) && idx >= 0 &&
                       (uint64_t)idx < g->operands[0]->n_operands)
                    g = g->operands[0]->operands[idx];
                u->operands[j] = g;
            }
        }
    }
}

/* Whether element k of computation c's parameter is read by an instruction other than (in a
 * body) the root tuple passing it on at position k. */
static bool
reads_element(const IrComputation *c, int64_t k, bool body)
{
    const IrInstr *param = c->n_params ? c->params[0] : NULL;
    if (!param)
        return false;
    for (uint32_t x = 0; x < c->n_instrs; x++) {
        const IrInstr *g = c->instrs[x];
        int64_t idx;
        if (g->op != IR_OP_GET_TUPLE_ELEMENT || g->operands[0] != param ||
            !ir_instr_int_attr(g, IR_ATTR_INDEX, &idx) || idx != k)
            continue;
        for (uint32_t y = 0; y < c->n_instrs; y++) {
            const IrInstr *u = c->instrs[y];
            for (uint32_t j = 0; j < u->n_operands; j++)
                if (u->operands[j] == g && !(body && u == c->root && j == (uint64_t)k))
                    return true;
        }
    }
    return false;
}

/* Whether a while body passes element k of its state on unchanged. */
static bool
invariant_element(const IrComputation *b, int64_t k)
{
    const IrInstr *r = b->root;
    int64_t idx;
    if (!r || r->op != IR_OP_TUPLE || (uint64_t)k >= r->n_operands || !b->n_params)
        return false;
    const IrInstr *g = r->operands[k];
    return g->op == IR_OP_GET_TUPLE_ELEMENT && g->operands[0] == b->params[0] &&
           ir_instr_int_attr(g, IR_ATTR_INDEX, &idx) && idx == k;
}

/* Inserts `n` before instruction `before` of c. False on OOM. */
static bool
insert_before(IrModule *m, IrComputation *c, IrInstr *before, IrInstr *n)
{
    IrInstr **v = SL_NEW_ARRAY(m->arena, IrInstr *, c->n_instrs + 2);
    if (!v)
        return false;
    uint32_t w = 0;
    for (uint32_t k = 0; k < c->n_instrs; k++) {
        if (c->instrs[k] == before)
            v[w++] = n;
        v[w++] = c->instrs[k];
    }
    c->instrs = v;
    c->n_instrs = c->cap_instrs = w;
    n->parent = c;
    return true;
}

/* Shardy's round trip: StableHLO makes a loop-invariant while state element read in the loop
 * a value captured from above, xla-sdy-open-while-free-vars-sharding puts an open sharding
 * constraint on each captured value that has a sharding (rank > 0), and the export turns it
 * into a copy of the value, with its metadata, that the while takes instead. The copy gets
 * no sharding (open: left to propagation). The state order the export also changes (captured
 * values last) is not reproduced. False on OOM. */
static bool
copy_while_free_vars(IrModule *m)
{
    for (uint32_t ci = 0; ci < m->n_comps; ci++) {
        IrComputation *c = m->comps[ci];
        for (uint32_t x = 0; x < c->n_instrs; x++) {
            IrInstr *w = c->instrs[x];
            IrComputation *b = w->op == IR_OP_WHILE ? ir_instr_called(w, IR_ATTR_BODY) : NULL;
            IrComputation *cond = b ? ir_instr_called(w, IR_ATTR_CONDITION) : NULL;
            IrInstr *t = b && cond && w->n_operands == 1 ? w->operands[0] : NULL;
            if (!t || t->op != IR_OP_TUPLE || t->parent != c)
                continue;
            for (uint32_t k = 0; k < t->n_operands; k++) {
                IrInstr *v = t->operands[k];
                if (!ir_shape_is_array(&v->shape) || !v->shape.rank || !ir_instr_sharding(v) ||
                    !invariant_element(b, k) ||
                    !(reads_element(b, k, true) || reads_element(cond, k, false)))
                    continue;
                IrInstr *cp = ir_instr_new(m, IR_OP_COPY, &v->shape, &v, 1);
                const IrAttr *md = ir_instr_find_attr(v, IR_ATTR_METADATA);
                IrAttr *ma = NULL;
                if (!cp || !(cp->name = ir_module_unique_name(m, sl_sym_str(v->name))) ||
                    (md && !(ma = ir_instr_add_attr(m, cp, IR_ATTR_METADATA))))
                    return false;
                if (md)
                    ma->u.metadata = md->u.metadata;
                if (!insert_before(m, c, t, cp))
                    return false;
                t->operands[k] = cp;
                x++; /* w moved one on */
            }
        }
    }
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
            bool ok = inline_one(m, i, x, f, move, refs, scratch);
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
    if (m->sdy_round_trip) {
        forward_tuple_elements(m);
        (void)copy_while_free_vars(m); /* on OOM some copies are missing: no sharding changes */
    }
    return inlined;
}
