/* memory.c - the memory estimate of memory.h: values, their live ranges over the schedule,
 * and the peak. Owns: the aliasing rules (memory.h lists them) and the nested peaks of called
 * computations. Invariants: one pass per computation in schedule order (callees are analysed
 * before callers, in the module's computation order), so the cost is linear in instructions
 * and array leaves; output does not depend on pointer values (ties break by IR order). */
#include "memory/memory.h"

#include <stdlib.h>
#include <string.h>

#define NO_VAL UINT32_MAX

/* Storage classes: which values count where. */
enum {
    C_EXTERNAL, /* storage owned by a caller (a nested computation's parameters): 0 bytes here */
    C_PARAM,    /* an entry parameter */
    C_TEMP,
    C_OUTPUT, /* returned by the entry */
    C_CALLER, /* returned by a call/conditional callee: the caller's value, 0 bytes here */
};

/* How a computation is analysed: as the entry, as a while body/condition (its root is the
 * next loop state: new values there coexist with the old state), or as a callee (its root's
 * values are the caller's results). */
enum { MODE_WHILE, MODE_CALL, MODE_COUNT };

typedef struct Val {
    int64_t bytes;
    const IrInstr *instr;
    uint32_t leaf;
    uint32_t def, last; /* positions in the schedule, inclusive */
    uint32_t parent;    /* the value whose storage this one takes over in place; NO_VAL */
    uint32_t parent2;   /* an elementwise op's second candidate, when `parent` lives on */
    uint8_t cls;
    bool is_readonly; /* a constant, or an entry parameter that is not donated */
    bool returned;    /* summarize: already met among the entry root's leaves */
} Val;

typedef struct Ctx {
    const IrModule *m;
    SlArena arena;
    uint32_t *leaf_start; /* by IrInstr.id: first index into leaf_val */
    uint32_t *leaf_val;   /* value of each array leaf, for the computation being analysed */
    Val *vals;
    uint32_t n_vals, cap_vals;
    int64_t *nested[MODE_COUNT]; /* by computation id: its own peak; -1 not analysed */
    uint8_t *need;               /* by computation id: 1 << mode for the modes its callers use */
    bool *donated;               /* by entry parameter leaf (leaf_start order): donated */
    bool *is_output_alias;       /* by entry root leaf: an output with a donated parameter */
    bool **passthru; /* by computation id (while bodies): root leaf k is the parameter's leaf
                        k unchanged (loop-invariant state, which needs no copy); NULL: none */
    int64_t param_tables; /* the entry's: pointer tables of its tuple-shaped parameters, */
    int64_t root_tables;  /* and of its root with the copies it needs (root_outputs), live
                             from the root's place to the end */
    uint32_t root_pos;
    uint32_t n_ignored;
    bool oom;
} Ctx;

/* The pointer tables of a tuple-shaped value: one pointer per element, for the tuple and for
 * every tuple inside it (what XLA's buffer assignment gives a tuple's own buffer). */
static int64_t
tuple_tables(const IrShape *s)
{
    if (!ir_shape_is_tuple(s))
        return 0;
    int64_t b = (int64_t)s->n_elems * MEM_POINTER_BYTES;
    for (uint32_t k = 0; k < s->n_elems; k++)
        b += tuple_tables(&s->elems[k]);
    return b;
}

const char *
mem_buf_kind_name(MemBufKind k)
{
    switch (k) {
    case MEM_BUF_PARAMETER:
        return "parameter";
    case MEM_BUF_OUTPUT:
        return "output";
    case MEM_BUF_TEMP:
        return "temp";
    case MEM_BUF_NESTED:
        return "nested";
    }
    return "temp";
}

static uint32_t
new_val(Ctx *cx, const IrInstr *i, uint32_t leaf, uint32_t pos, uint8_t cls)
{
    if (cx->n_vals == cx->cap_vals) {
        uint32_t cap = cx->cap_vals ? 2 * cx->cap_vals : 1024;
        Val *v = realloc(cx->vals, (size_t)cap * sizeof(Val));
        if (!v) {
            cx->oom = true;
            return NO_VAL;
        }
        cx->vals = v;
        cx->cap_vals = cap;
    }
    const IrShape *s = ir_shape_leaf(&i->shape, leaf);
    Val v = {s ? ir_shape_byte_size(s) : 0, i, leaf, pos, pos, NO_VAL, NO_VAL, cls, false, false};
    cx->vals[cx->n_vals] = v;
    return cx->n_vals++;
}

static uint32_t *
leaves_of(Ctx *cx, const IrInstr *i)
{
    return cx->leaf_val + cx->leaf_start[i->id];
}

/* The first leaf of tuple element `k` of `s`. */
static uint32_t
elem_leaf(const IrShape *s, int64_t k)
{
    uint32_t off = 0;
    for (int64_t j = 0; j < k && j < (int64_t)s->n_elems; j++)
        off += ir_shape_leaf_count(&s->elems[j]);
    return off;
}

/* Leaf `leaf` of `i` takes over the storage of value `from` when that value has no later use
 * (decided once the computation is done); read-only values are copied. */
static void
in_place(Ctx *cx, const IrInstr *i, uint32_t leaf, uint32_t from, uint32_t pos)
{
    uint32_t v = new_val(cx, i, leaf, pos, C_TEMP);
    if (v == NO_VAL)
        return;
    if (from != NO_VAL && !cx->vals[from].is_readonly && cx->vals[from].bytes == cx->vals[v].bytes)
        cx->vals[v].parent = from;
    leaves_of(cx, i)[leaf] = v;
}

static void
fresh(Ctx *cx, const IrInstr *i, uint32_t pos)
{
    uint32_t n = ir_shape_leaf_count(&i->shape);
    uint32_t *lv = leaves_of(cx, i);
    for (uint32_t k = 0; k < n; k++)
        lv[k] = new_val(cx, i, k, pos, C_TEMP);
}

static void
view(Ctx *cx, const IrInstr *i, const IrInstr *of, uint32_t first)
{
    uint32_t n = ir_shape_leaf_count(&i->shape);
    if (first + n > ir_shape_leaf_count(&of->shape)) {
        fresh(cx, i, 0);
        return;
    }
    memcpy(leaves_of(cx, i), leaves_of(cx, of) + first, n * sizeof(uint32_t));
}

static bool
is_done_op(IrOp op)
{
    return op == IR_OP_ALL_GATHER_DONE || op == IR_OP_ALL_REDUCE_DONE ||
           op == IR_OP_COLLECTIVE_PERMUTE_DONE || op == IR_OP_ASYNC_DONE ||
           op == IR_OP_COPY_DONE;
}

static bool
is_start_op(IrOp op)
{
    return op == IR_OP_ALL_GATHER_START || op == IR_OP_COLLECTIVE_PERMUTE_START ||
           op == IR_OP_COPY_START || op == IR_OP_ASYNC_START;
}

static bool
is_view_op(IrOp op)
{
    return op == IR_OP_GET_TUPLE_ELEMENT || op == IR_OP_TUPLE || op == IR_OP_BITCAST ||
           op == IR_OP_OPT_BARRIER || is_done_op(op);
}

/* A *-start's result is (operands, results[, context]): its first element is the operands'
 * storage when the leaves line up; the rest is new. */
static void
async_start(Ctx *cx, const IrInstr *i, uint32_t pos)
{
    fresh(cx, i, pos);
    if (!ir_shape_is_tuple(&i->shape) || i->shape.n_elems < 2)
        return;
    uint32_t n0 = ir_shape_leaf_count(&i->shape.elems[0]), k = 0;
    for (uint32_t o = 0; o < i->n_operands; o++)
        k += ir_shape_leaf_count(&i->operands[o]->shape);
    if (k != n0)
        return;
    uint32_t *lv = leaves_of(cx, i);
    k = 0;
    for (uint32_t o = 0; o < i->n_operands; o++) {
        uint32_t n = ir_shape_leaf_count(&i->operands[o]->shape);
        for (uint32_t j = 0; j < n; j++, k++) {
            cx->vals[lv[k]].bytes = 0; /* an unused slot: the operand holds the storage */
            lv[k] = leaves_of(cx, i->operands[o])[j];
        }
    }
}

/* A *-done is the result slot of its start: element 1 when the start is a tuple of at least
 * two elements whose element 1 has as many leaves, else the whole start. */
static void
async_done(Ctx *cx, const IrInstr *i)
{
    const IrInstr *s = i->operands[0];
    uint32_t n = ir_shape_leaf_count(&i->shape);
    if (ir_shape_is_tuple(&s->shape) && s->shape.n_elems >= 2 &&
        ir_shape_leaf_count(&s->shape.elems[1]) == n)
        view(cx, i, s, elem_leaf(&s->shape, 1));
    else if (ir_shape_leaf_count(&s->shape) == n)
        view(cx, i, s, 0);
    else
        fresh(cx, i, 0);
}

static int64_t
nested_peak(Ctx *cx, const IrComputation *c, int mode)
{
    if (!c || cx->nested[mode][c->id] < 0)
        return 0;
    return cx->nested[mode][c->id];
}

/* The own peak of what instruction `i` runs, at its place in the schedule. */
static int64_t
callee_peak(Ctx *cx, const IrInstr *i)
{
    int64_t best = 0, p;
    switch (i->op) {
    case IR_OP_WHILE:
        best = nested_peak(cx, ir_instr_called(i, IR_ATTR_BODY), MODE_WHILE);
        p = nested_peak(cx, ir_instr_called(i, IR_ATTR_CONDITION), MODE_WHILE);
        return p > best ? p : best;
    case IR_OP_CALL:
    case IR_OP_CONDITIONAL:
    case IR_OP_ASYNC_START:
        for (uint32_t a = 0; a < i->n_attrs; a++) {
            const IrAttr *at = &i->attrs[a];
            if (at->key == IR_ATTR_TO_APPLY || at->key == IR_ATTR_TRUE_COMPUTATION ||
                at->key == IR_ATTR_FALSE_COMPUTATION) {
                p = nested_peak(cx, at->u.comp, MODE_CALL);
                best = p > best ? p : best;
            } else if (at->key == IR_ATTR_CALLS || at->key == IR_ATTR_BRANCH_COMPUTATIONS) {
                for (uint32_t k = 0; k < at->u.comps.n; k++) {
                    p = nested_peak(cx, at->u.comps.v[k], MODE_CALL);
                    best = p > best ? p : best;
                }
            }
        }
        return best;
    default:
        return 0;
    }
}

/* Whether fused parameter `pnum` of fusion computation `fc` reaches the root through
 * elementwise ops (and tuples) only, so that each element of the output is computed from the
 * same element of that operand (what XLA's dataflow analysis asks before a loop fusion may
 * write into an operand's buffer). Large or scattered computations answer no. */
static bool
fused_param_elementwise(Ctx *cx, const IrComputation *fc, int64_t pnum)
{
    const IrInstr *param = ir_computation_param(fc, pnum);
    if (!param || !fc->root || fc->n_instrs == 0)
        return false;
    uint32_t lo = UINT32_MAX, hi = 0;
    for (uint32_t k = 0; k < fc->n_instrs; k++) {
        uint32_t id = fc->instrs[k]->id;
        lo = id < lo ? id : lo;
        hi = id > hi ? id : hi;
    }
    if (hi - lo > 4 * fc->n_instrs + 64)
        return false;
    SlArenaMark mk = sl_arena_mark(&cx->arena);
    bool *reached = SL_NEW_ARRAY(&cx->arena, bool, (size_t)(hi - lo) + 1);
    bool ok = reached != NULL;
    if (ok)
        reached[param->id - lo] = true;
    for (uint32_t k = 0; ok && k < fc->n_instrs; k++) {
        const IrInstr *j = fc->instrs[k];
        bool from = false;
        for (uint32_t o = 0; o < j->n_operands && !from; o++)
            from = j->operands[o]->id >= lo && j->operands[o]->id <= hi &&
                   reached[j->operands[o]->id - lo];
        if (!from || j == param)
            continue;
        if (!ir_op_is_elementwise(j->op) && j->op != IR_OP_TUPLE)
            ok = false;
        reached[j->id - lo] = true;
    }
    ok = ok && reached[fc->root->id - lo];
    sl_arena_release(&cx->arena, mk);
    return ok;
}

/* An array result written into the buffer of an operand of the same shape (element type and
 * dimensions) that has no later use, as XLA's buffer assignment shares it: an elementwise op,
 * or a loop or input fusion whose fused parameter for that operand reaches the root through
 * elementwise ops only. Up to two candidates; settle() keeps the first whose value dies here.
 * False when `i` is neither. */
static bool
share_operand(Ctx *cx, const IrInstr *i, uint32_t pos)
{
    if (ir_shape_is_tuple(&i->shape) || !ir_shape_is_array(&i->shape))
        return false;
    const IrComputation *fc = NULL;
    if (i->op == IR_OP_FUSION) {
        const IrAttr *kind = ir_instr_find_attr(i, IR_ATTR_FUSION_KIND);
        const IrAttr *calls = ir_instr_find_attr(i, IR_ATTR_CALLS);
        if (!kind || !calls || !calls->u.comps.n || !calls->u.comps.v[0] ||
            !(sl_str_eq_cstr(kind->u.text, "kLoop") || sl_str_eq_cstr(kind->u.text, "kInput")))
            return false;
        fc = calls->u.comps.v[0];
    } else if (!ir_op_is_elementwise(i->op)) {
        return false;
    }
    uint32_t cand[2], n_cand = 0;
    for (uint32_t o = 0; o < i->n_operands && n_cand < 2; o++) {
        const IrInstr *op = i->operands[o];
        if (ir_shape_is_tuple(&op->shape) || !ir_shape_equal(&op->shape, &i->shape, false))
            continue;
        uint32_t from = leaves_of(cx, op)[0];
        if (from == NO_VAL || cx->vals[from].is_readonly || (n_cand && cand[0] == from))
            continue;
        if (fc && !fused_param_elementwise(cx, fc, o))
            continue;
        cand[n_cand++] = from;
    }
    if (n_cand == 0)
        return false;
    in_place(cx, i, 0, cand[0], pos);
    uint32_t v = leaves_of(cx, i)[0];
    if (v != NO_VAL && n_cand == 2 && cx->vals[v].parent != NO_VAL)
        cx->vals[v].parent2 = cand[1];
    return true;
}

/* Defines the values of instruction `i` at `pos` of computation `c` (mode: -1 the entry). */
static void
define(Ctx *cx, const IrComputation *c, int mode, const IrInstr *i, uint32_t pos)
{
    uint32_t n = ir_shape_leaf_count(&i->shape);
    uint32_t *lv = leaves_of(cx, i);
    switch (i->op) {
    case IR_OP_PARAMETER: {
        uint8_t cls = mode < 0 ? C_PARAM : C_EXTERNAL;
        for (uint32_t k = 0; k < n; k++) {
            lv[k] = new_val(cx, i, k, mode < 0 ? 0 : pos, cls); /* live from the start */
            if (lv[k] == NO_VAL)
                continue;
            /* entry parameters are read-only unless donated; a while's state is its own */
            bool donated = mode < 0 && cx->donated && cx->donated[cx->leaf_start[i->id] + k];
            cx->vals[lv[k]].is_readonly = (mode < 0 && !donated) || mode == MODE_CALL;
            if (mode < 0 && !donated)
                cx->vals[lv[k]].last = c->n_instrs - 1;
        }
        return;
    }
    case IR_OP_GET_TUPLE_ELEMENT: {
        int64_t idx = 0;
        (void)ir_instr_int_attr(i, IR_ATTR_INDEX, &idx);
        view(cx, i, i->operands[0], elem_leaf(&i->operands[0]->shape, idx));
        return;
    }
    case IR_OP_TUPLE: {
        uint32_t k = 0;
        for (uint32_t o = 0; o < i->n_operands && k < n; o++) {
            uint32_t no = ir_shape_leaf_count(&i->operands[o]->shape);
            for (uint32_t j = 0; j < no && k < n; j++)
                lv[k++] = leaves_of(cx, i->operands[o])[j];
        }
        return;
    }
    case IR_OP_BITCAST:
    case IR_OP_OPT_BARRIER:
        if (i->n_operands == 1)
            view(cx, i, i->operands[0], 0);
        else
            fresh(cx, i, pos);
        return;
    case IR_OP_DYNAMIC_UPDATE_SLICE:
        in_place(cx, i, 0, i->n_operands ? leaves_of(cx, i->operands[0])[0] : NO_VAL, pos);
        return;
    case IR_OP_SCATTER:
        for (uint32_t k = 0; k < n; k++)
            in_place(cx, i, k, k < i->n_operands ? leaves_of(cx, i->operands[k])[0] : NO_VAL,
                     pos);
        return;
    case IR_OP_WHILE: {
        const IrComputation *body = ir_instr_called(i, IR_ATTR_BODY);
        const bool *same = body ? cx->passthru[body->id] : NULL;
        for (uint32_t k = 0; k < n; k++) {
            uint32_t from = i->n_operands ? leaves_of(cx, i->operands[0])[k] : NO_VAL;
            if (same && same[k] && from != NO_VAL) /* loop-invariant: the operand's storage */
                lv[k] = from;
            else
                in_place(cx, i, k, from, pos);
        }
        return;
    }
    case IR_OP_FUSION: {
        /* a fusion whose root updates one of its parameters in place updates that operand */
        const IrAttr *calls = ir_instr_find_attr(i, IR_ATTR_CALLS);
        const IrComputation *fc = calls && calls->u.comps.n ? calls->u.comps.v[0] : NULL;
        const IrInstr *root = fc ? fc->root : NULL;
        const IrInstr *target = root && (root->op == IR_OP_DYNAMIC_UPDATE_SLICE ||
                                         root->op == IR_OP_SCATTER) && root->n_operands
                                    ? root->operands[0]
                                    : NULL;
        if (n == 1 && target && target->op == IR_OP_PARAMETER && target->parameter_number >= 0 &&
            target->parameter_number < i->n_operands &&
            ir_shape_leaf_count(&i->operands[target->parameter_number]->shape) == 1) {
            in_place(cx, i, 0, leaves_of(cx, i->operands[target->parameter_number])[0], pos);
            return;
        }
        if (!share_operand(cx, i, pos))
            fresh(cx, i, pos);
        return;
    }
    case IR_OP_CONSTANT:
        fresh(cx, i, pos);
        for (uint32_t k = 0; k < n; k++)
            if (lv[k] != NO_VAL)
                cx->vals[lv[k]].is_readonly = true;
        return;
    default:
        if (is_done_op(i->op) && i->n_operands == 1)
            async_done(cx, i);
        else if (is_start_op(i->op))
            async_start(cx, i, pos);
        else if (!share_operand(cx, i, pos))
            fresh(cx, i, pos);
        return;
    }
}

/* Extends the live range of every value `i` reads (views read nothing themselves: their users
 * read the values they show). */
static void
use(Ctx *cx, const IrInstr *i, uint32_t pos)
{
    if (is_view_op(i->op))
        return;
    for (uint32_t o = 0; o < i->n_operands; o++) {
        const IrInstr *op = i->operands[o];
        uint32_t n = ir_shape_leaf_count(&op->shape);
        const uint32_t *lv = leaves_of(cx, op);
        for (uint32_t k = 0; k < n; k++)
            if (lv[k] != NO_VAL && cx->vals[lv[k]].last < pos)
                cx->vals[lv[k]].last = pos;
    }
}

static bool
counts(const Val *v)
{
    return v->bytes > 0 && v->cls != C_EXTERNAL && v->cls != C_CALLER;
}

/* Settles in-place updates: a value takes over its parent's storage when the parent has no
 * use after it; the parent then ends just before. A nested computation's value in the storage
 * of its caller's stays the caller's. */
static void
settle(Ctx *cx)
{
    for (uint32_t k = 0; k < cx->n_vals; k++) {
        Val *v = &cx->vals[k];
        if (v->parent == NO_VAL)
            continue;
        Val *u = &cx->vals[v->parent];
        if ((u->last > v->def || u->def >= v->def) && v->parent2 != NO_VAL) {
            v->parent = v->parent2;
            u = &cx->vals[v->parent];
        }
        if (u->last > v->def || u->def >= v->def) {
            v->parent = NO_VAL; /* copied */
            continue;
        }
        u->last = v->def - 1;
        if (u->cls == C_EXTERNAL)
            v->cls = C_EXTERNAL;
    }
}

typedef struct Peak {
    int64_t bytes, temp_bytes_at_peak, max_temp;
    uint32_t pos;
    MemEstimate *profile; /* the entry's walk: receives the profile; NULL for nested ones */
} Peak;

/* Walks computation `c` in schedule order; with `extra` (n_instrs entries) receives the nested
 * peaks by position. */
static void
walk(Ctx *cx, const IrComputation *c, int mode, int64_t *extra)
{
    cx->n_vals = 0;
    for (uint32_t p = 0; p < c->n_instrs && !cx->oom; p++) {
        const IrInstr *i = c->instrs[p];
        use(cx, i, p);
        define(cx, c, mode, i, p);
        extra[p] = callee_peak(cx, i);
    }
    if (cx->oom || !c->root)
        return;
    uint32_t end = c->n_instrs - 1;
    uint32_t n = ir_shape_leaf_count(&c->root->shape);
    const uint32_t *lv = leaves_of(cx, c->root);
    for (uint32_t k = 0; k < n; k++)
        if (lv[k] != NO_VAL)
            cx->vals[lv[k]].last = end;
    settle(cx);
    bool *same = mode == MODE_WHILE ? cx->passthru[c->id] : NULL;
    for (uint32_t k = 0; k < n; k++) {
        if (lv[k] == NO_VAL)
            continue;
        Val *v = &cx->vals[lv[k]];
        if (same && c->n_params && v->instr == c->params[0] && v->leaf == k)
            same[k] = true;
        if (v->cls == C_TEMP)
            v->cls = mode < 0 ? C_OUTPUT : mode == MODE_CALL ? C_CALLER : C_TEMP;
    }
}

/* The peak of the values of the last walk over `n_pos` positions. */
static void
peak_of(Ctx *cx, uint32_t n_pos, const int64_t *extra, Peak *out)
{
    MemEstimate *prof = out->profile;
    memset(out, 0, sizeof(*out));
    uint32_t step = n_pos / MEM_PROFILE_SLOTS + (n_pos % MEM_PROFILE_SLOTS != 0);
    if (prof) {
        prof->profile_step = step ? step : 1;
        prof->n_profile = n_pos ? (n_pos + prof->profile_step - 1) / prof->profile_step : 0;
    }
    int64_t *all = SL_NEW_ARRAY(&cx->arena, int64_t, (size_t)n_pos + 1);
    int64_t *tmp = SL_NEW_ARRAY(&cx->arena, int64_t, (size_t)n_pos + 1);
    if (!all || !tmp) {
        cx->oom = true;
        return;
    }
    /* the entry's pointer tables: its parameters' throughout; its root's, with the copies the
     * root needs, from the root to the end */
    if (prof && n_pos) {
        all[0] += cx->param_tables;
        all[cx->root_pos < n_pos ? cx->root_pos : n_pos - 1] += cx->root_tables;
    }
    for (uint32_t k = 0; k < cx->n_vals; k++) {
        const Val *v = &cx->vals[k];
        if (!counts(v) || v->last < v->def)
            continue;
        all[v->def] += v->bytes;
        all[v->last + 1] -= v->bytes;
        if (v->cls == C_TEMP) {
            tmp[v->def] += v->bytes;
            tmp[v->last + 1] -= v->bytes;
        }
    }
    int64_t live = 0, live_tmp = 0;
    for (uint32_t p = 0; p < n_pos; p++) {
        live += all[p];
        live_tmp += tmp[p];
        int64_t here = live + extra[p], here_tmp = live_tmp + extra[p];
        if (here > out->bytes) {
            out->bytes = here;
            out->temp_bytes_at_peak = here_tmp;
            out->pos = p;
        }
        if (here_tmp > out->max_temp)
            out->max_temp = here_tmp;
        if (prof && here > prof->profile[p / prof->profile_step])
            prof->profile[p / prof->profile_step] = here;
    }
}

/* ---- input_output_alias ---------------------------------------------------------------- */

static void
skip_ws(const char **p, const char *e)
{
    while (*p < e && (**p == ' ' || **p == '\n' || **p == '\t'))
        (*p)++;
}

static bool
eat(const char **p, const char *e, char c)
{
    skip_ws(p, e);
    if (*p < e && **p == c) {
        (*p)++;
        return true;
    }
    return false;
}

/* index := '{' (INT (',' INT)*)? '}' ; the leaf it names in `s`, false when it names none */
static bool
read_index(const char **p, const char *e, const IrShape *s, uint32_t *leaf)
{
    *leaf = 0;
    if (!eat(p, e, '{'))
        return false;
    while (!eat(p, e, '}')) {
        skip_ws(p, e);
        char *end = NULL;
        long long k = strtoll(*p, &end, 10);
        if (end == *p || end > e || !ir_shape_is_tuple(s) || k < 0 || k >= (long long)s->n_elems)
            return false;
        *p = end;
        *leaf += elem_leaf(s, k);
        s = &s->elems[k];
        (void)eat(p, e, ',');
    }
    return !ir_shape_is_tuple(s) || ir_shape_leaf_count(s) == 1;
}

/* input_output_alias := '{' (entry (',' entry)*)? '}'
 * entry := index ':' '(' INT ',' index (',' KIND)? ')'   (output index, parameter, its index) */
static void
read_aliases(Ctx *cx, const IrComputation *entry)
{
    const IrHeaderAttr *h = ir_module_find_header(cx->m, "input_output_alias");
    if (!h || !entry->root)
        return;
    const char *p = h->value.ptr, *e = p + h->value.len;
    if (!eat(&p, e, '{'))
        goto bad;
    while (!eat(&p, e, '}')) {
        uint32_t out_leaf = 0, in_leaf = 0;
        if (!read_index(&p, e, &entry->root->shape, &out_leaf) || !eat(&p, e, ':') ||
            !eat(&p, e, '('))
            goto bad;
        skip_ws(&p, e);
        char *end = NULL;
        long long num = strtoll(p, &end, 10);
        if (end == p || end > e)
            goto bad;
        p = end;
        const IrInstr *param = ir_computation_param(entry, num);
        if (!param || !eat(&p, e, ',') || !read_index(&p, e, &param->shape, &in_leaf))
            goto bad;
        while (p < e && *p != ')')
            p++;
        if (!eat(&p, e, ')'))
            goto bad;
        /* a pair whose buffers differ in size cannot share storage (XLA rejects the module:
         * after partitioning, when the parameter and the output are sharded differently) */
        const IrShape *ps = ir_shape_leaf(&param->shape, in_leaf);
        const IrShape *os = ir_shape_leaf(&entry->root->shape, out_leaf);
        if (ps && os && ir_shape_byte_size(ps) == ir_shape_byte_size(os)) {
            cx->donated[cx->leaf_start[param->id] + in_leaf] = true;
            cx->is_output_alias[out_leaf] = true;
        } else {
            cx->n_ignored++;
        }
        (void)eat(&p, e, ',');
    }
    return;
bad:
    cx->n_ignored++;
}

/* ---- the estimate ---------------------------------------------------------------------- */

static void
mark_needs(Ctx *cx)
{
    for (uint32_t c = 0; c < cx->m->n_comps; c++) {
        const IrComputation *comp = cx->m->comps[c];
        for (uint32_t k = 0; k < comp->n_instrs; k++) {
            const IrInstr *i = comp->instrs[k];
            if (i->op != IR_OP_WHILE && i->op != IR_OP_CALL && i->op != IR_OP_CONDITIONAL &&
                i->op != IR_OP_ASYNC_START)
                continue;
            uint8_t bit = i->op == IR_OP_WHILE ? 1u << MODE_WHILE : 1u << MODE_CALL;
            for (uint32_t a = 0; a < i->n_attrs; a++) {
                const IrAttr *at = &i->attrs[a];
                if (ir_attr_kind(at->key) == IR_AK_COMP && at->u.comp)
                    cx->need[at->u.comp->id] |= bit;
                else if (ir_attr_kind(at->key) == IR_AK_COMPS)
                    for (uint32_t j = 0; j < at->u.comps.n; j++)
                        if (at->u.comps.v[j])
                            cx->need[at->u.comps.v[j]->id] |= bit;
            }
        }
    }
}

static int
cmp_top(const void *pa, const void *pb)
{
    const MemBuffer *a = pa, *b = pb;
    if (a->bytes != b->bytes)
        return a->bytes > b->bytes ? -1 : 1;
    if (a->instr->id != b->instr->id)
        return a->instr->id < b->instr->id ? -1 : 1;
    if (a->leaf != b->leaf)
        return a->leaf < b->leaf ? -1 : 1;
    return a->kind < b->kind ? -1 : a->kind > b->kind;
}

static void
add_top(MemEstimate *out, MemBuffer b)
{
    if (out->n_top < MEM_TOP_BUFFERS) {
        out->top[out->n_top++] = b;
    } else if (cmp_top(&b, &out->top[MEM_TOP_BUFFERS - 1]) < 0) {
        out->top[MEM_TOP_BUFFERS - 1] = b;
    } else {
        return;
    }
    qsort(out->top, out->n_top, sizeof(MemBuffer), cmp_top);
}

/* Every root leaf is an output buffer of its own: one passed through from a parameter that is
 * not donated, or returned twice, is still an output, which XLA copies at the root (live from
 * there, with the root's pointer tables). */
static void
root_outputs(Ctx *cx, const IrComputation *entry, MemEstimate *out)
{
    if (!entry->root)
        return;
    uint32_t n = ir_shape_leaf_count(&entry->root->shape);
    const uint32_t *lv = leaves_of(cx, entry->root);
    for (uint32_t k = 0; k < n; k++) {
        if (lv[k] == NO_VAL)
            continue;
        Val *v = &cx->vals[lv[k]];
        if (v->cls != C_OUTPUT || v->returned) {
            out->output_bytes += v->bytes;
            if (!cx->is_output_alias[k] || v->returned)
                cx->root_tables += v->bytes; /* a copy */
        }
        v->returned = true;
        if (cx->is_output_alias[k])
            out->alias_bytes += v->bytes;
    }
}

static void
summarize(Ctx *cx, const IrComputation *entry, const int64_t *extra, MemEstimate *out)
{
    root_outputs(cx, entry, out);
    Peak pk = {.profile = out};
    peak_of(cx, entry->n_instrs, extra, &pk);
    out->peak_bytes = pk.bytes;
    out->peak_temp_bytes = pk.temp_bytes_at_peak;
    out->max_temp_bytes = pk.max_temp;
    out->peak_position = pk.pos;
    out->peak_instr = entry->n_instrs ? entry->instrs[pk.pos] : NULL;
    for (uint32_t k = 0; k < cx->n_vals; k++) {
        const Val *v = &cx->vals[k];
        if (v->cls == C_PARAM)
            out->parameter_bytes += v->bytes;
        if (v->cls == C_OUTPUT)
            out->output_bytes += v->bytes;
        if (counts(v))
            out->n_values++;
        if (counts(v) && v->def <= pk.pos && pk.pos <= v->last) {
            MemBufKind kind = v->cls == C_PARAM    ? MEM_BUF_PARAMETER
                              : v->cls == C_OUTPUT ? MEM_BUF_OUTPUT
                                                   : MEM_BUF_TEMP;
            add_top(out, (MemBuffer){v->instr, v->leaf, v->bytes, kind});
        }
    }
    if (out->peak_instr && extra[pk.pos] > 0)
        add_top(out, (MemBuffer){out->peak_instr, 0, extra[pk.pos], MEM_BUF_NESTED});
    out->parameter_bytes += cx->param_tables;
}

static SlStatus
run(Ctx *cx, MemEstimate *out, SlError *err)
{
    const IrModule *m = cx->m;
    const IrComputation *entry = m->entry;
    uint32_t n_ids = m->next_instr_id, n_comps = m->next_comp_id;
    cx->leaf_start = SL_NEW_ARRAY(&cx->arena, uint32_t, n_ids ? n_ids : 1);
    cx->need = SL_NEW_ARRAY(&cx->arena, uint8_t, n_comps ? n_comps : 1);
    for (int mode = 0; mode < MODE_COUNT; mode++)
        cx->nested[mode] = SL_NEW_ARRAY(&cx->arena, int64_t, n_comps ? n_comps : 1);
    cx->passthru = SL_NEW_ARRAY(&cx->arena, bool *, n_comps ? n_comps : 1);
    if (!cx->leaf_start || !cx->need || !cx->nested[0] || !cx->nested[1] || !cx->passthru)
        return sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){0}, "out of memory");
    uint64_t n_leaves = 0;
    uint32_t max_instrs = 1;
    for (uint32_t c = 0; c < m->n_comps; c++) {
        const IrComputation *comp = m->comps[c];
        max_instrs = comp->n_instrs > max_instrs ? comp->n_instrs : max_instrs;
        for (uint32_t k = 0; k < comp->n_instrs; k++) {
            cx->leaf_start[comp->instrs[k]->id] = (uint32_t)n_leaves;
            n_leaves += ir_shape_leaf_count(&comp->instrs[k]->shape);
        }
    }
    if (n_leaves >= UINT32_MAX)
        return sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){0}, "too many array leaves");
    cx->leaf_val = SL_NEW_ARRAY(&cx->arena, uint32_t, n_leaves ? n_leaves : 1);
    cx->donated = SL_NEW_ARRAY(&cx->arena, bool, n_leaves ? n_leaves : 1);
    cx->is_output_alias = SL_NEW_ARRAY(
        &cx->arena, bool, entry->root ? ir_shape_leaf_count(&entry->root->shape) : 1);
    int64_t *extra = SL_NEW_ARRAY(&cx->arena, int64_t, max_instrs);
    if (!cx->leaf_val || !cx->donated || !cx->is_output_alias || !extra)
        return sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){0}, "out of memory");
    for (int mode = 0; mode < MODE_COUNT; mode++)
        for (uint32_t c = 0; c < n_comps; c++)
            cx->nested[mode][c] = -1;
    mark_needs(cx);
    read_aliases(cx, entry);
    for (uint32_t c = 0; c < m->n_comps && !cx->oom; c++) {
        const IrComputation *comp = m->comps[c];
        for (int mode = 0; mode < MODE_COUNT && !cx->oom; mode++) {
            if (comp == entry || !(cx->need[comp->id] & (1u << mode)))
                continue;
            if (mode == MODE_WHILE && comp->root && !cx->passthru[comp->id])
                cx->passthru[comp->id] =
                    SL_NEW_ARRAY(&cx->arena, bool, ir_shape_leaf_count(&comp->root->shape));
            SlArenaMark mk = sl_arena_mark(&cx->arena);
            walk(cx, comp, mode, extra);
            Peak pk = {0};
            peak_of(cx, comp->n_instrs, extra, &pk);
            cx->nested[mode][comp->id] = pk.bytes;
            sl_arena_release(&cx->arena, mk);
        }
    }
    if (!cx->oom) {
        for (uint32_t k = 0; k < entry->n_params; k++)
            if (entry->params[k])
                cx->param_tables += tuple_tables(&entry->params[k]->shape);
        if (entry->root) {
            out->output_bytes = cx->root_tables = tuple_tables(&entry->root->shape);
            for (uint32_t k = 0; k < entry->n_instrs; k++)
                if (entry->instrs[k] == entry->root)
                    cx->root_pos = k;
        }
        walk(cx, entry, -1, extra);
        summarize(cx, entry, extra, out);
    }
    if (cx->oom || sl_arena_failed(&cx->arena))
        return sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){0}, "out of memory");
    return SL_OK;
}

SlStatus
mem_estimate(const IrModule *m, MemEstimate *out, uint32_t *n_ignored_aliases, SlError *err)
{
    memset(out, 0, sizeof(*out));
    if (n_ignored_aliases)
        *n_ignored_aliases = 0;
    if (!m->entry)
        return sl_fail(err, SL_ERR_INVALID, (SlSrcLoc){0}, "the module has no entry computation");
    Ctx cx = {0};
    cx.m = m;
    sl_arena_init(&cx.arena);
    SlStatus st = run(&cx, out, err);
    if (n_ignored_aliases)
        *n_ignored_aliases = cx.n_ignored;
    free(cx.vals);
    sl_arena_fini(&cx.arena);
    return st;
}
