/* cleanup.c - tuple simplification and common-subexpression elimination after partitioning.
 * The rest of the cleanup XLA's partitioner runs when it is done (gspmd.md, "Pipeline
 * context" step 4): dead code, tuple simplification, dead code, CSE. Both passes here only
 * redirect uses (operands and roots) to the surviving instruction and leave the replaced ones
 * in place, unused: ir_module_remove_dead() drops them afterwards. Names of the instructions
 * that stay are unchanged. Computations holding control-predecessors edges are left alone, as
 * in dce.c (ordering edges are kept by name). */
#include "ir.h"

#include <string.h>

static bool
has_control_edges(const IrComputation *c)
{
    for (uint32_t k = 0; k < c->n_instrs; k++)
        if (ir_instr_find_attr(c->instrs[k], IR_ATTR_CONTROL_PREDECESSORS))
            return true;
    return false;
}

static IrInstr *
root_of(const IrComputation *c)
{
    return c->root ? c->root : (c->n_instrs ? c->instrs[c->n_instrs - 1] : NULL);
}

/* Points every operand of `i` at its replacement (repl by instruction id; NULL: itself). The
 * replacements are final: instructions are visited in order and a replacement precedes its
 * replaced instruction's users. */
static void
forward_operands(IrInstr *i, IrInstr **repl)
{
    for (uint32_t o = 0; o < i->n_operands; o++)
        if (repl[i->operands[o]->id])
            i->operands[o] = repl[i->operands[o]->id];
}

/* The root keeps its place even when the replaced instruction is dropped later: an unmarked
 * root (the last instruction) becomes an explicit one. */
static void
forward_root(IrComputation *c, IrInstr **repl)
{
    IrInstr *root = root_of(c);
    if (root && repl[root->id])
        c->root = repl[root->id];
}

/* ---- tuple simplification ---- */

static bool
shardings_agree(const IrInstr *old, const IrInstr *now, IrShardingEqual eq)
{
    const struct ShdSharding *a = ir_instr_sharding(old), *b = ir_instr_sharding(now);
    if (!a || !b)
        return true;
    return eq ? eq(a, b) : a == b;
}

/* tuple(gte(x,0), ..., gte(x,n-1)) of an x of the tuple's shape: x; else NULL. */
static IrInstr *
whole_tuple_source(const IrInstr *t)
{
    IrInstr *x = NULL;
    for (uint32_t o = 0; o < t->n_operands; o++) {
        const IrInstr *g = t->operands[o];
        int64_t index = -1;
        if (g->op != IR_OP_GET_TUPLE_ELEMENT || !ir_instr_int_attr(g, IR_ATTR_INDEX, &index) ||
            index != (int64_t)o)
            return NULL;
        if (!x) {
            x = g->operands[0];
            if (!ir_shape_equal(&x->shape, &t->shape, false))
                return NULL;
        } else if (x != g->operands[0]) {
            return NULL;
        }
    }
    return x;
}

uint32_t
ir_module_simplify_tuples(IrModule *m, SlArena *scratch, IrShardingEqual sharding_equal)
{
    SlArenaMark mark = sl_arena_mark(scratch);
    IrInstr **repl = SL_NEW_ARRAY(scratch, IrInstr *, (size_t)m->next_instr_id + 1);
    if (!repl) {
        sl_arena_release(scratch, mark);
        return 0;
    }
    memset(repl, 0, ((size_t)m->next_instr_id + 1) * sizeof(*repl));
    uint32_t n = 0;
    for (uint32_t c = 0; c < m->n_comps; c++) {
        IrComputation *comp = m->comps[c];
        if (has_control_edges(comp))
            continue;
        for (uint32_t k = 0; k < comp->n_instrs; k++) {
            IrInstr *i = comp->instrs[k];
            forward_operands(i, repl);
            IrInstr *r = NULL;
            int64_t index = -1;
            if (i->op == IR_OP_TUPLE) {
                r = whole_tuple_source(i);
            } else if (i->op == IR_OP_GET_TUPLE_ELEMENT && i->n_operands == 1 &&
                       i->operands[0]->op == IR_OP_TUPLE &&
                       ir_instr_int_attr(i, IR_ATTR_INDEX, &index) && index >= 0 &&
                       index < (int64_t)i->operands[0]->n_operands) {
                r = i->operands[0]->operands[index];
            }
            if (r && shardings_agree(i, r, sharding_equal)) {
                repl[i->id] = r;
                n++;
            }
        }
        forward_root(comp, repl);
    }
    sl_arena_release(scratch, mark);
    return n;
}

/* ---- common subexpressions ---- */

static bool
is_commutative(IrOp op)
{
    switch (op) {
    case IR_OP_ADD:
    case IR_OP_MULTIPLY:
    case IR_OP_MAXIMUM:
    case IR_OP_MINIMUM:
    case IR_OP_AND:
    case IR_OP_OR:
    case IR_OP_XOR: return true;
    default: return false;
    }
}

/* Attributes that do not make two instructions different (XLA's Identical ignores them). */
static bool
attr_ignored(const IrAttr *a)
{
    if (a->key == IR_ATTR_SHARDING || a->key == IR_ATTR_METADATA ||
        a->key == IR_ATTR_FRONTEND_ATTRIBUTES)
        return true;
    return a->key == IR_ATTR_OTHER && a->u.other.key &&
           strcmp(sl_sym_cstr(a->u.other.key), "origin") == 0;
}

static bool
ints_eq(const int64_t *a, const int64_t *b, size_t n)
{
    return n == 0 || memcmp(a, b, n * sizeof(*a)) == 0;
}

static bool
groups_eq(const IrReplicaGroups *a, const IrReplicaGroups *b)
{
    if (a == b)
        return true;
    if (!a || !b || a->is_iota != b->is_iota)
        return false;
    if (a->is_iota) {
        const IrIota *x = &a->iota, *y = &b->iota;
        if (x->n_dims != y->n_dims || x->n_reshape != y->n_reshape ||
            !ints_eq(x->dims, y->dims, x->n_dims) ||
            !ints_eq(x->reshape, y->reshape, x->n_reshape) || (!x->perm) != (!y->perm))
            return false;
        return !x->perm || ints_eq(x->perm, y->perm, x->n_reshape);
    }
    if (a->n_groups != b->n_groups)
        return false;
    size_t total = 0;
    for (uint32_t g = 0; g < a->n_groups; g++) {
        if (a->group_sizes[g] != b->group_sizes[g])
            return false;
        total += a->group_sizes[g];
    }
    return ints_eq(a->ids, b->ids, total);
}

static bool
attr_value_eq(const IrAttr *a, const IrAttr *b)
{
    if (a->key != b->key)
        return false;
    switch (ir_attr_kind(a->key)) {
    case IR_AK_INT: return a->u.i == b->u.i;
    case IR_AK_BOOL: return a->u.b == b->u.b;
    case IR_AK_INTS:
        return a->u.ints.n == b->u.ints.n && ints_eq(a->u.ints.v, b->u.ints.v, a->u.ints.n);
    case IR_AK_INT_LISTS: {
        if (a->u.lists.n != b->u.lists.n)
            return false;
        size_t total = 0;
        for (uint32_t k = 0; k < a->u.lists.n; k++) {
            if (a->u.lists.sizes[k] != b->u.lists.sizes[k])
                return false;
            total += a->u.lists.sizes[k];
        }
        return ints_eq(a->u.lists.v, b->u.lists.v, total);
    }
    case IR_AK_REPLICA_GROUPS: return groups_eq(a->u.groups, b->u.groups);
    case IR_AK_COMP: return a->u.comp == b->u.comp;
    case IR_AK_COMPS:
        if (a->u.comps.n != b->u.comps.n)
            return false;
        for (uint32_t k = 0; k < a->u.comps.n; k++)
            if (a->u.comps.v[k] != b->u.comps.v[k])
                return false;
        return true;
    case IR_AK_SLICE:
        if (a->u.slice.n != b->u.slice.n)
            return false;
        for (uint32_t k = 0; k < a->u.slice.n; k++) {
            const IrSliceDim *x = &a->u.slice.v[k], *y = &b->u.slice.v[k];
            if (x->start != y->start || x->limit != y->limit || x->stride != y->stride)
                return false;
        }
        return true;
    case IR_AK_PADDING:
        if (a->u.pad.n != b->u.pad.n)
            return false;
        for (uint32_t k = 0; k < a->u.pad.n; k++) {
            const IrPadDim *x = &a->u.pad.v[k], *y = &b->u.pad.v[k];
            if (x->lo != y->lo || x->hi != y->hi || x->interior != y->interior)
                return false;
        }
        return true;
    case IR_AK_WINDOW:
        if (a->u.window.n != b->u.window.n)
            return false;
        for (uint32_t k = 0; k < a->u.window.n; k++) {
            const IrWindowDim *x = &a->u.window.v[k], *y = &b->u.window.v[k];
            if (x->size != y->size || x->stride != y->stride || x->pad_lo != y->pad_lo ||
                x->pad_hi != y->pad_hi || x->lhs_dilate != y->lhs_dilate ||
                x->rhs_dilate != y->rhs_dilate || x->reversal != y->reversal)
                return false;
        }
        return true;
    case IR_AK_SHARDING: return a->u.sharding == b->u.sharding;
    case IR_AK_METADATA: return a->u.metadata == b->u.metadata;
    case IR_AK_FRONTEND: return true; /* ignored by attr_ignored */
    case IR_AK_IDENT:
    case IR_AK_STRING:
    case IR_AK_DIM_LABELS:
    case IR_AK_RAW:
    default:
        if (a->key == IR_ATTR_OTHER && a->u.other.key != b->u.other.key)
            return false;
        return sl_str_eq(a->u.text, b->u.text);
    }
}

static bool
attrs_eq(const IrInstr *a, const IrInstr *b)
{
    uint32_t x = 0, y = 0;
    for (;;) {
        while (x < a->n_attrs && attr_ignored(&a->attrs[x]))
            x++;
        while (y < b->n_attrs && attr_ignored(&b->attrs[y]))
            y++;
        if (x == a->n_attrs || y == b->n_attrs)
            return x == a->n_attrs && y == b->n_attrs;
        if (!attr_value_eq(&a->attrs[x], &b->attrs[y]))
            return false;
        x++;
        y++;
    }
}

/* Operands are the same instruction, or two iotas of one shape (layouts aside) and
 * dimension: XLA's CSE keeps identical iotas apart but treats them as equal operands. */
static bool
operand_eq(const IrInstr *a, const IrInstr *b)
{
    if (a == b)
        return true;
    int64_t da = -1, db = -1;
    return a->op == IR_OP_IOTA && b->op == IR_OP_IOTA &&
           ir_instr_int_attr(a, IR_ATTR_IOTA_DIMENSION, &da) &&
           ir_instr_int_attr(b, IR_ATTR_IOTA_DIMENSION, &db) && da == db &&
           ir_shape_equal(&a->shape, &b->shape, false);
}

/* The shardings the instructions carry during the CSE (XLA's partitioner clears them after it). */
typedef struct CseShardings {
    const struct ShdSharding *const *v;
    size_t n;
    IrShardingEqual eq;
} CseShardings;

static const struct ShdSharding *
carried(const CseShardings *s, const IrInstr *i)
{
    return s->v && i->id < s->n ? s->v[i->id] : NULL;
}

/* XLA's sharding-sensitive Identical: different only when both carry a sharding. */
static bool
carried_agree(const CseShardings *s, const IrInstr *a, const IrInstr *b)
{
    const struct ShdSharding *x = carried(s, a), *y = carried(s, b);
    if (!x || !y || x == y)
        return true;
    return s->eq ? s->eq(x, y) : false;
}

/* Same opcode, shape (layout ignored: XLA's partitioner runs CSE layout-insensitive),
 * carried sharding, operands (either order for commutative binary ops), literal and
 * attributes. */
static bool
instr_eq(const CseShardings *sh, const IrInstr *a, const IrInstr *b)
{
    if (!carried_agree(sh, a, b))
        return false;
    if (a->op != b->op || a->n_operands != b->n_operands ||
        !ir_shape_equal(&a->shape, &b->shape, false) || !sl_str_eq(a->literal, b->literal))
        return false;
    bool same = true;
    for (uint32_t o = 0; o < a->n_operands && same; o++)
        same = operand_eq(a->operands[o], b->operands[o]);
    if (!same && !(is_commutative(a->op) && a->n_operands == 2 &&
                   operand_eq(a->operands[0], b->operands[1]) &&
                   operand_eq(a->operands[1], b->operands[0])))
        return false;
    return attrs_eq(a, b);
}

/* Hash contribution of an operand: iotas by content (they compare by content), others by id. */
static uint64_t
operand_key(const IrInstr *o)
{
    if (o->op != IR_OP_IOTA)
        return (uint64_t)o->id + 1;
    int64_t d = 0;
    (void)ir_instr_int_attr(o, IR_ATTR_IOTA_DIMENSION, &d);
    uint64_t h = 0x10000000000ULL + (uint64_t)d;
    for (uint32_t k = 0; k < o->shape.rank; k++)
        h = h * 1000003u + (uint64_t)o->shape.dims[k];
    return h;
}

static uint64_t
mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    return h;
}

/* A hash of content only (opcode, dims, operand ids, literal text), never of addresses. */
static uint64_t
instr_hash(const IrInstr *i)
{
    uint64_t h = mix(1469598103934665603ULL, (uint64_t)i->op);
    h = mix(h, (uint64_t)i->shape.dtype);
    for (uint32_t d = 0; d < i->shape.rank; d++)
        h = mix(h, (uint64_t)i->shape.dims[d]);
    if (is_commutative(i->op) && i->n_operands == 2) {
        uint64_t x = operand_key(i->operands[0]), y = operand_key(i->operands[1]);
        h = mix(mix(h, x < y ? x : y), x < y ? y : x);
    } else {
        for (uint32_t o = 0; o < i->n_operands; o++)
            h = mix(h, operand_key(i->operands[o]));
    }
    for (size_t k = 0; k < i->literal.len; k++)
        h = mix(h, (unsigned char)i->literal.ptr[k]);
    int64_t v = 0;
    if (ir_instr_int_attr(i, IR_ATTR_INDEX, &v))
        h = mix(h, (uint64_t)v);
    return h;
}

static bool
is_collective_with_channel(const IrInstr *i)
{
    IrOpFamily f = ir_op_family(i->op);
    return (f == IR_FAM_ALL_REDUCE || f == IR_FAM_COLLECTIVE ||
            f == IR_FAM_COLLECTIVE_PERMUTE) &&
           ir_instr_find_attr(i, IR_ATTR_CHANNEL_ID) != NULL;
}

static bool
calls_side_effect(const IrInstr *i)
{
    for (uint32_t k = 0; k < i->n_attrs; k++) {
        const IrAttr *a = &i->attrs[k];
        IrAttrKind kind = ir_attr_kind(a->key);
        uint32_t n = kind == IR_AK_COMP ? 1 : kind == IR_AK_COMPS ? a->u.comps.n : 0;
        for (uint32_t c = 0; c < n; c++) {
            const IrComputation *comp = kind == IR_AK_COMP ? a->u.comp : a->u.comps.v[c];
            for (uint32_t j = 0; comp && j < comp->n_instrs; j++)
                if (ir_instr_has_side_effect(comp->instrs[j]) ||
                    calls_side_effect(comp->instrs[j]))
                    return true;
        }
    }
    return false;
}

/* Whether `i` may be merged with an identical earlier one: constants by value, other
 * operand-less instructions (parameters, iotas, rng state, ...) never, except partition-id and
 * replica-id; nothing with a side effect, no collective with a channel id. */
static bool
cse_candidate(const IrInstr *i)
{
    if (i->op == IR_OP_PARAMETER)
        return false;
    if (i->n_operands == 0 && i->op != IR_OP_CONSTANT && i->op != IR_OP_PARTITION_ID &&
        i->op != IR_OP_REPLICA_ID)
        return false;
    return !ir_instr_has_side_effect(i) && !is_collective_with_channel(i) && !calls_side_effect(i);
}

uint32_t
ir_module_cse(IrModule *m, SlArena *scratch, const struct ShdSharding *const *shardings,
              size_t n_shardings, IrShardingEqual sharding_equal)
{
    CseShardings sh = {shardings, n_shardings, sharding_equal};
    SlArenaMark mark = sl_arena_mark(scratch);
    size_t n_ids = (size_t)m->next_instr_id + 1;
    IrInstr **repl = SL_NEW_ARRAY(scratch, IrInstr *, n_ids);
    if (!repl) {
        sl_arena_release(scratch, mark);
        return 0;
    }
    memset(repl, 0, n_ids * sizeof(*repl));
    uint32_t n = 0;
    for (uint32_t c = 0; c < m->n_comps; c++) {
        IrComputation *comp = m->comps[c];
        if (has_control_edges(comp) || comp->n_instrs == 0)
            continue;
        SlArenaMark cmark = sl_arena_mark(scratch);
        size_t cap = 16;
        while (cap < 2 * (size_t)comp->n_instrs)
            cap *= 2;
        /* chained buckets of representatives: head[bucket], next[position] (1-based) */
        uint32_t *head = SL_NEW_ARRAY(scratch, uint32_t, cap);
        uint32_t *next = SL_NEW_ARRAY(scratch, uint32_t, comp->n_instrs);
        if (!head || !next) {
            sl_arena_release(scratch, cmark);
            break;
        }
        memset(head, 0, cap * sizeof(*head));
        for (uint32_t k = 0; k < comp->n_instrs; k++) {
            IrInstr *i = comp->instrs[k];
            forward_operands(i, repl);
            if (!cse_candidate(i))
                continue;
            size_t b = (size_t)(instr_hash(i) & (cap - 1));
            IrInstr *same = NULL;
            for (uint32_t p = head[b]; p && !same; p = next[p - 1])
                if (instr_eq(&sh, comp->instrs[p - 1], i))
                    same = comp->instrs[p - 1];
            if (same) {
                repl[i->id] = same;
                n++;
                continue;
            }
            next[k] = head[b];
            head[b] = k + 1;
            /* two equal iotas feeding one instruction: the later operand reads the first */
            for (uint32_t x = 0; x < i->n_operands; x++)
                for (uint32_t y = x + 1; y < i->n_operands; y++)
                    if (i->operands[x]->op == IR_OP_IOTA && i->operands[y] != i->operands[x] &&
                        operand_eq(i->operands[x], i->operands[y]))
                        i->operands[y] = i->operands[x];
        }
        forward_root(comp, repl);
        sl_arena_release(scratch, cmark);
    }
    sl_arena_release(scratch, mark);
    return n;
}
