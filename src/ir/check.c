/* check.c - ir_module_check: structural checks over a whole module, and the dispatch to the
 * shape rules. Owns: deciding whether a module is consistent: one entry, a root per computation,
 * operands defined before their users in the same computation, dense parameter numbers, the
 * operand counts and required attributes of ir_ops.def, shapes whose size fits in int64,
 * constant literals that fit their shape, called computations listed before their callers, and
 * every declared result shape equal to the one inferred the way XLA's ShapeInference /
 * HloVerifier do for the opcodes the partitioner handles (hlo-text.md §12); and the error
 * (ck_bad) that names the instruction. Does not own: sharding validity (shd_check) or text
 * (src/hlo); the per-opcode rules (check_array.c, check_reduce.c, check_index.c,
 * check_control.c, check_collective.c) or the helpers they share (check_common.c), all declared
 * in check_int.h. Opcodes without a rule are accepted as declared.
 * Invariants: the module is never modified; inferred shapes live in a scratch arena released
 * before returning; layouts are ignored and an unbounded dim ('?') matches any size. */
/* clang-format off */
#include "ir/ir.h" /* the module's header first: clang-format cannot tell it is ours */
/* clang-format on */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/check_int.h"

/* ---- errors ---------------------------------------------------------------------------- */

static SlSrcLoc
instr_loc(const IrCheck *ck, const IrInstr *in)
{
    SlSrcLoc loc = {ck->path, in ? in->src_line : 0, in ? in->src_col : 0};
    return loc;
}

SlStatus
ck_bad(IrCheck *ck, const IrInstr *in, const char *fmt, ...)
{
    char why[SL_ERROR_MSG_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    const char *comp = in->parent ? sl_sym_cstr(in->parent->name) : "?";
    return sl_fail(ck->err, SL_ERR_INVALID, instr_loc(ck, in),
                   "instruction %%%s (%s) in computation %%%s: %s", sl_sym_cstr(in->name),
                   ir_op_name(in->op), comp, why);
}

SlStatus
ck_nomem(IrCheck *ck, const IrInstr *in)
{
    return sl_fail(ck->err, SL_ERR_NOMEM, instr_loc(ck, in), "out of memory checking module");
}

/* ---- dispatch -------------------------------------------------------------------------------- */

/* partition-id and replica-id: a u32 scalar (found by the mutation run: an s32[1,8,4]
 * partition-id reached the partitioner's concatenate). */
static SlStatus
check_device_id(IrCheck *ck, const IrInstr *in)
{
    IrShape inf;
    if (!ck_new_shape(ck, IR_DT_U32, 0, &inf))
        return ck_nomem(ck, in);
    return ck_expect(ck, in, &inf);
}

static SlStatus
check_shape_rules(IrCheck *ck, const IrInstr *in)
{
    switch (ir_op_family(in->op)) {
    case IR_FAM_ELEMENTWISE:
        return ck_check_elementwise(ck, in);
    case IR_FAM_BITCAST_CONVERT:
        return ck_check_bitcast_convert(ck, in);
    case IR_FAM_BROADCAST:
        return ck_check_broadcast(ck, in);
    case IR_FAM_RESHAPE:
        return ck_check_reshape(ck, in);
    case IR_FAM_TRANSPOSE:
        return ck_check_transpose(ck, in);
    case IR_FAM_SLICE:
        return ck_check_slice(ck, in);
    case IR_FAM_CONCATENATE:
        return ck_check_concatenate(ck, in);
    case IR_FAM_PAD:
        return ck_check_pad(ck, in);
    case IR_FAM_DYNAMIC_SLICE:
        return ck_check_dynamic_slice(ck, in);
    case IR_FAM_DYNAMIC_UPDATE_SLICE:
        return ck_check_dynamic_update_slice(ck, in);
    case IR_FAM_REDUCE:
        return ck_check_reduce(ck, in);
    case IR_FAM_REDUCE_WINDOW:
        return ck_check_reduce_window(ck, in);
    case IR_FAM_DOT:
        return ck_check_dot(ck, in);
    case IR_FAM_RAGGED_DOT:
        return ck_check_ragged_dot(ck, in);
    case IR_FAM_CONVOLUTION:
        return ck_check_convolution(ck, in);
    case IR_FAM_GATHER:
        return ck_check_gather(ck, in);
    case IR_FAM_SCATTER:
        return ck_check_scatter(ck, in);
    case IR_FAM_IOTA:
        return ck_check_iota(ck, in);
    case IR_FAM_TUPLE:
        return ck_check_tuple(ck, in);
    case IR_FAM_GET_TUPLE_ELEMENT:
        return ck_check_gte(ck, in);
    case IR_FAM_WHILE:
        return ck_check_while(ck, in);
    case IR_FAM_CONDITIONAL:
        return ck_check_conditional(ck, in);
    case IR_FAM_CALL:
        return ck_check_call(ck, in);
    case IR_FAM_SCAN:
        return ck_check_scan(ck, in);
    case IR_FAM_ALL_REDUCE:
    case IR_FAM_COLLECTIVE:
    case IR_FAM_COLLECTIVE_PERMUTE:
        return ck_check_collective(ck, in);
    case IR_FAM_PARAMETER:
    case IR_FAM_CONSTANT:
        return SL_OK;
    case IR_FAM_PARTITION_ID:
        return check_device_id(ck, in);
    case IR_FAM_OPT_BARRIER:
    case IR_FAM_REVERSE:
    case IR_FAM_SELECT_AND_SCATTER:
    case IR_FAM_SORT:
    case IR_FAM_CHOLESKY:
    case IR_FAM_TRIANGULAR_SOLVE:
        return ck_check_keeps_shape(ck, in);
    case IR_FAM_CUSTOM_CALL:
        return ck_check_custom_call(ck, in);
    case IR_FAM_OTHER:
        if (in->op == IR_OP_CALL_START || in->op == IR_OP_CALL_UPDATE ||
            in->op == IR_OP_CALL_DONE)
            return ck_check_async_call(ck, in);
        if (in->op == IR_OP_ADD_DEPENDENCY) /* the value, ordered after the token operand */
            return ck_expect(ck, in, opnd(in, 0));
        if (in->op == IR_OP_REPLICA_ID)
            return check_device_id(ck, in);
        return SL_OK;
    case IR_FAM_SIDE_EFFECT:
    case IR_FAM_RNG:
        return SL_OK;
    }
    return SL_OK;
}

/* ---- structure ------------------------------------------------------------------------------- */

/* Every computation an instruction names must be in the module, listed before the caller. */
static SlStatus
check_callees(IrCheck *ck, const IrInstr *in, uint64_t caller_pos)
{
    for (uint32_t k = 0; k < in->n_attrs; k++) {
        const IrAttr *a = &in->attrs[k];
        IrAttrKind kind = ir_attr_kind(a->key);
        if (kind != IR_AK_COMP && kind != IR_AK_COMPS)
            continue;
        uint32_t n = kind == IR_AK_COMP ? 1 : a->u.comps.n;
        for (uint32_t j = 0; j < n; j++) {
            const IrComputation *c = kind == IR_AK_COMP ? a->u.comp : a->u.comps.v[j];
            uint64_t pos = 0;
            if (!c || !sl_map_get(&ck->comp_pos, SL_MAP_KEY(c), &pos))
                return ck_bad(ck, in, "%s= names a computation that is not in the module",
                              ir_attr_name(a->key));
            if (pos >= caller_pos)
                return ck_bad(ck, in, "called computation %%%s must be defined before %%%s",
                              sl_sym_cstr(c->name), sl_sym_cstr(in->parent->name));
        }
    }
    return SL_OK;
}

/* Bytes of `s`, false when its element count or byte size does not fit in int64 (a tuple:
 * the sum over its elements). Unbounded dims count as their bound, or 0. */
static bool
shape_bytes_fit(const IrShape *s, int64_t *bytes)
{
    int64_t total = 0, b;
    if (ir_shape_is_tuple(s)) {
        for (uint32_t i = 0; i < s->n_elems; i++)
            if (!shape_bytes_fit(&s->elems[i], &b) || __builtin_add_overflow(total, b, &total))
                return false;
        *bytes = total;
        return true;
    }
    int64_t n = 1;
    for (uint32_t i = 0; i < s->rank; i++)
        if (__builtin_mul_overflow(n, s->dims[i] > 0 ? s->dims[i] : 0, &n))
            return false;
    uint32_t bits = ir_dtype_bits(s->dtype);
    return !__builtin_mul_overflow(n, (int64_t)(bits < 8 ? 1 : bits / 8), bytes);
}

static SlStatus
check_shape_size(IrCheck *ck, const IrInstr *in)
{
    int64_t bytes;
    if (shape_bytes_fit(&in->shape, &bytes))
        return SL_OK;
    char t[SHAPE_TEXT_BYTES];
    return ck_bad(ck, in, "shape %s holds more than 2^63-1 elements or bytes",
                  ck_shape_text(&in->shape, t, sizeof(t)));
}

/* ---- literals ---- */

/* Skips what separates the scalars of a literal: space, commas, braces, comments. */
static const char *
literal_skip(const char *p, const char *end)
{
    while (p < end) {
        if (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ',' || *p == '{' ||
            *p == '}') {
            p++;
        } else if (*p == '/' && p + 1 < end && p[1] == '*') {
            p += 2;
            while (p + 1 < end && !(p[0] == '*' && p[1] == '/'))
                p++;
            p = p + 1 < end ? p + 2 : end;
        } else {
            break;
        }
    }
    return p;
}

/* A scalar of a literal: a number (sign, digits, '.', exponent), inf or nan (with an
 * optional payload), true or false. */
static bool
is_literal_scalar(const char *p, const char *end)
{
    if (p < end && (*p == '-' || *p == '+'))
        p++;
    size_t n = (size_t)(end - p);
    if ((n >= 3 && (!memcmp(p, "inf", 3) || !memcmp(p, "nan", 3))) ||
        (n == 4 && !memcmp(p, "true", 4)) || (n == 5 && !memcmp(p, "false", 5)))
        return true;
    return n > 0 && ((*p >= '0' && *p <= '9') || *p == '.');
}

/* Scalars in an array literal (a complex scalar "(re, im)" is one), up to `stop` + 1; -1 when
 * one of them is not a scalar. */
static int64_t
literal_scalars(SlStr text, bool complex, int64_t stop)
{
    const char *p = text.ptr, *end = text.ptr + text.len;
    int64_t n = 0;
    for (p = literal_skip(p, end); p < end && n <= stop; p = literal_skip(p, end)) {
        const char *start = p;
        if (complex && *p == '(') {
            while (p < end && *p != ')')
                p++;
            p += p < end;
        } else {
            while (p < end && !strchr(" \t\n\r,{}", *p))
                p++;
            if (!is_literal_scalar(start, p))
                return -1;
        }
        n++;
    }
    return n;
}

/* The literal of `shape` must hold one scalar per element; a tuple literal "(a, b)" one
 * literal per element. "{...}" (a literal elided by the printer) matches any shape. */
static bool
literal_fits(const IrShape *shape, SlStr text, char *why, size_t n_why)
{
    for (size_t i = 0; i + 2 < text.len; i++)
        if (text.ptr[i] == '.' && text.ptr[i + 1] == '.' && text.ptr[i + 2] == '.')
            return true;
    if (ir_shape_is_tuple(shape)) {
        const char *p = text.ptr, *end = text.ptr + text.len;
        while (p < end && *p != '(')
            p++;
        while (end > p && end[-1] != ')')
            end--;
        if (p >= end) {
            snprintf(why, n_why, "a tuple literal must be in parentheses");
            return false;
        }
        p++, end--;
        for (uint32_t k = 0; k < shape->n_elems; k++) {
            int depth = 0;
            const char *q = p;
            while (q < end && (depth > 0 || *q != ',')) {
                depth += (*q == '{' || *q == '(') - (*q == '}' || *q == ')');
                q++;
            }
            if (q == p && p >= end) {
                snprintf(why, n_why, "the tuple literal has %u elements, the shape %u", k,
                         shape->n_elems);
                return false;
            }
            if (!literal_fits(&shape->elems[k], (SlStr){p, (size_t)(q - p)}, why, n_why))
                return false;
            p = q < end ? q + 1 : q;
        }
        if (literal_skip(p, end) < end) {
            snprintf(why, n_why, "the tuple literal has more than %u elements", shape->n_elems);
            return false;
        }
        return true;
    }
    if (!ir_shape_is_array(shape))
        return true;
    int64_t want = ck_elem_count(shape);
    char kind = ir_dtype_kind(shape->dtype);
    int64_t got = literal_scalars(text, kind == 'C', want);
    if (got == want)
        return true;
    if (got < 0) {
        snprintf(why, n_why, "the literal '%.*s' is not a list of scalars",
                 text.len > 40 ? 40 : (int)text.len, text.ptr);
        return false;
    }
    snprintf(why, n_why, "the literal has %s%lld values, the shape %lld elements",
             got > want ? "more than " : "", (long long)(got > want ? want : got),
             (long long)want);
    return false;
}

static SlStatus
check_constant(IrCheck *ck, const IrInstr *in)
{
    char why[160];
    if (in->op != IR_OP_CONSTANT || literal_fits(&in->shape, in->literal, why, sizeof(why)))
        return SL_OK;
    return ck_bad(ck, in, "%s", why);
}

/* The operand count and the required attributes of ir_ops.def, for every opcode. */
static SlStatus
check_signature(IrCheck *ck, const IrInstr *in)
{
    uint32_t min = ir_op_min_operands(in->op), n = in->n_operands;
    int max = ir_op_max_operands(in->op);
    if (!ir_op_operand_count_ok(in->op, n)) {
        if (max == (int)min)
            return ck_bad(ck, in, "expects %u operand%s, got %u", min, min == 1 ? "" : "s", n);
        if (max < 0)
            return ck_bad(ck, in, "expects at least %u operand%s, got %u", min,
                          min == 1 ? "" : "s", n);
        return ck_bad(ck, in, "expects %u to %d operands, got %u", min, max, n);
    }
    for (unsigned k = 0; k < IR_ATTR_COUNT; k++)
        if (ir_op_requires_attr(in->op, (IrAttrKey)k) && !ir_instr_find_attr(in, (IrAttrKey)k))
            return ck_bad(ck, in, "missing %s=", ir_attr_name((IrAttrKey)k));
    int64_t ch = 0;
    if (ir_instr_int_attr(in, IR_ATTR_CHANNEL_ID, &ch) && (ch < 0 || ch >= IR_MAX_CHANNEL_ID))
        return ck_bad(ck, in, "channel_id=%lld is out of range (0 to 2^62 - 1)", (long long)ch);
    return SL_OK;
}

static SlStatus
check_operands_defined(IrCheck *ck, const IrComputation *c, const IrInstr *in)
{
    for (uint32_t k = 0; k < in->n_operands; k++) {
        const IrInstr *o = in->operands[k];
        if (!o)
            return ck_bad(ck, in, "operand %u is missing", k);
        if (o->parent != c || o->id >= ck->n_seen || ck->seen[o->id] != o)
            return ck_bad(ck, in, "operand %u (%%%s) is not defined earlier in %%%s", k,
                          sl_sym_cstr(o->name), sl_sym_cstr(c->name));
    }
    return SL_OK;
}

/* Parameter numbers are exactly 0..n-1, each once. */
static SlStatus
check_params(IrCheck *ck, const IrComputation *c)
{
    uint32_t n = ir_computation_param_count(c);
    bool *used = n ? SL_NEW_ARRAY(&ck->scratch, bool, n) : NULL;
    if (n && !used)
        return sl_fail(ck->err, SL_ERR_NOMEM, instr_loc(ck, NULL), "out of memory");
    for (uint32_t i = 0; i < c->n_instrs; i++) {
        const IrInstr *p = c->instrs[i];
        if (p->op != IR_OP_PARAMETER)
            continue;
        if (p->parameter_number < 0 || p->parameter_number >= (int64_t)n)
            return ck_bad(ck, p, "parameter number %lld out of range: %%%s has %u parameters",
                          (long long)p->parameter_number, sl_sym_cstr(c->name), n);
        if (used[p->parameter_number])
            return ck_bad(ck, p, "parameter number %lld used twice",
                          (long long)p->parameter_number);
        used[p->parameter_number] = true;
    }
    return SL_OK;
}

static SlStatus
check_computation(IrCheck *ck, const IrComputation *c, uint64_t pos)
{
    if (c->n_instrs == 0 || !c->root || c->root->parent != c) {
        SlSrcLoc loc = instr_loc(ck, c->n_instrs ? c->instrs[0] : NULL);
        return sl_fail(ck->err, SL_ERR_INVALID, loc, "computation %%%s has no root instruction",
                       sl_sym_cstr(c->name));
    }
    SlStatus st = check_params(ck, c);
    for (uint32_t i = 0; i < c->n_instrs && !st; i++) {
        const IrInstr *in = c->instrs[i];
        if (in->parent != c)
            return sl_fail(ck->err, SL_ERR_INTERNAL, instr_loc(ck, in),
                           "instruction %%%s is listed in %%%s but belongs elsewhere",
                           sl_sym_cstr(in->name), sl_sym_cstr(c->name));
        SlArenaMark mark = sl_arena_mark(&ck->scratch);
        if ((st = check_operands_defined(ck, c, in)) || (st = check_signature(ck, in)) ||
            (st = check_shape_size(ck, in)) || (st = check_constant(ck, in)) ||
            (st = ck_check_device_ids(ck, in)) || (st = check_callees(ck, in, pos)) ||
            (st = check_shape_rules(ck, in)))
            return st;
        if (sl_arena_failed(&ck->scratch))
            return ck_nomem(ck, in);
        sl_arena_release(&ck->scratch, mark); /* inferred shapes are not kept */
        if (in->id >= ck->n_seen)
            return sl_fail(ck->err, SL_ERR_INTERNAL, instr_loc(ck, in),
                           "instruction %%%s has id %u beyond the module's %u",
                           sl_sym_cstr(in->name), in->id, ck->n_seen);
        ck->seen[in->id] = in;
    }
    return st;
}

SlStatus
ir_module_check(const IrModule *m, const char *path, SlError *err)
{
    return ir_module_check_for(m, path, 0, err);
}

SlStatus
ir_module_check_for(const IrModule *m, const char *path, int64_t num_partitions, SlError *err)
{
    IrCheck ck = {.m = m, .path = path, .err = err, .num_partitions = num_partitions};
    sl_arena_init(&ck.scratch);
    sl_map_init(&ck.comp_pos);
    sl_map_init(&ck.ids);
    SlStatus st = SL_OK;
    SlSrcLoc nowhere = {path, 0, 0};
    /* A first chunk, so that the per-instruction mark/release below never frees it. */
    (void)sl_arena_alloc(&ck.scratch, 1, 1);
    ck.n_seen = m->next_instr_id;
    ck.seen = calloc(ck.n_seen ? ck.n_seen : 1, sizeof(*ck.seen));
    if (!ck.seen)
        st = sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
    uint32_t n_entry = 0;
    for (uint32_t i = 0; i < m->n_comps && !st; i++) {
        n_entry += m->comps[i]->is_entry;
        if (!sl_map_put(&ck.comp_pos, SL_MAP_KEY(m->comps[i]), (uint64_t)i + 1))
            st = sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
    }
    if (!st && (!m->entry || n_entry != 1))
        st = sl_fail(err, SL_ERR_INVALID, nowhere,
                     "module %s must have exactly one ENTRY computation (has %u)",
                     sl_sym_cstr(m->name), n_entry);
    for (uint32_t i = 0; i < m->n_comps && !st; i++) {
        st = check_computation(&ck, m->comps[i], (uint64_t)i + 1);
        if (!st && sl_arena_failed(&ck.scratch))
            st = sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory checking module");
    }
    free(ck.seen);
    sl_map_fini(&ck.comp_pos);
    sl_map_fini(&ck.ids);
    sl_arena_fini(&ck.scratch);
    return st;
}
