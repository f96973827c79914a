/* loop.c - trip counts of while loops, found the way XLA's while-loop analysis finds them
 * (known_trip_count in backend_config, else the induction-variable pattern). Owns: matching
 * the pattern and computing the count exactly. Does not own: nesting (a loop inside a loop or
 * a called computation runs as often as its callers: the trace writer multiplies), counts a
 * user gives, or what a count is used for.
 *
 * The pattern: a tuple element i of the loop state (or the state itself, when it is a scalar)
 * whose
 *   - condition is compare(get-tuple-element(param, i), N) in either operand order, with
 *     direction LT, LE, GT, GE, NE or EQ, N a constant or a tuple element the body passes on
 *     unchanged and whose initial value is a constant;
 *   - body root element i is add(get-tuple-element(param, i), constant) in either order, or
 *     subtract(get-tuple-element(param, i), constant), or a chain of those (one step of their
 *     sum, as XLA's brute-force evaluation finds it);
 *   - initial value (element i of the while's operand) is a constant, or integer arithmetic
 *     on constants.
 * Copies, get-tuple-element of a tuple, widening integer converts, one-element reshapes and
 * bitcasts, and a parameter of a computation called from exactly one call instruction are
 * looked through, as XLA's analysis looks through copies and GTE-tuple chains (and sees calls
 * inlined).
 * Invariant: the count is computed in exact integers; a loop whose induction variable would
 * leave its type's range, or that would never end, is unknown, never a guess. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/ir.h"

enum { MAX_TRACE_STEPS = 256 }; /* bounds every walk through operands and call sites */

const char *
ir_trip_method_name(IrTripMethod m)
{
    switch (m) {
    case IR_TRIP_BACKEND_CONFIG:
        return "backend_config";
    case IR_TRIP_PATTERN:
        return "pattern";
    case IR_TRIP_UNKNOWN:
        break;
    }
    return "unknown";
}

static void
say(IrTripCount *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->reason, sizeof(t->reason), fmt, ap);
    va_end(ap);
}

/* The root, or the last instruction when none is marked. */
static const IrInstr *
root_of(const IrComputation *c)
{
    return !c ? NULL : c->root ? c->root : c->n_instrs ? c->instrs[c->n_instrs - 1] : NULL;
}

static const char *
nm(const IrInstr *i)
{
    return i && i->name ? sl_sym_cstr(i->name) : "?";
}

/* backend_config={"known_trip_count":{"n":"8"}} -> 8; -1 when absent or malformed. */
static int64_t
backend_trip_count(const IrInstr *w)
{
    const IrAttr *a = ir_instr_find_attr(w, IR_ATTR_BACKEND_CONFIG);
    if (!a)
        return -1;
    SlStr t = a->u.text;
    static const char key[] = "\"known_trip_count\"";
    size_t k = 0;
    while (k + sizeof(key) - 1 <= t.len && memcmp(t.ptr + k, key, sizeof(key) - 1) != 0)
        k++;
    for (; k + 3 <= t.len && memcmp(t.ptr + k, "\"n\"", 3) != 0; k++)
        ;
    if (k + 3 > t.len)
        return -1;
    for (k += 3; k < t.len && (t.ptr[k] == ':' || t.ptr[k] == ' ' || t.ptr[k] == '"'); k++)
        ;
    int64_t n = 0;
    size_t digits = 0;
    for (; k < t.len && t.ptr[k] >= '0' && t.ptr[k] <= '9'; k++, digits++) {
        if (n > (INT64_MAX - (t.ptr[k] - '0')) / 10)
            return -1;
        n = n * 10 + (t.ptr[k] - '0');
    }
    return digits ? n : -1;
}

static bool
is_int(IrDtype t)
{
    char k = ir_dtype_kind(t);
    return k == 'S' || k == 'U';
}

/* A scalar (or one-element) integer constant and its value. */
static bool
const_int(const IrInstr *i, int64_t *v)
{
    if (!i || i->op != IR_OP_CONSTANT || !is_int(i->shape.dtype) || ir_shape_elem_count(&i->shape) != 1)
        return false;
    char buf[64];
    size_t n = i->literal.len;
    if (n == 0 || n >= sizeof(buf))
        return false;
    memcpy(buf, i->literal.ptr, n);
    buf[n] = '\0';
    char *p = buf;
    while (*p == '{' || *p == ' ')
        p++;
    char *end = NULL;
    errno = 0;
    long long x = strtoll(p, &end, 10);
    if (errno || end == p)
        return false;
    while (*end == '}' || *end == ' ')
        end++;
    if (*end)
        return false;
    *v = x;
    return true;
}

/* A convert from one integer type to one that holds all its values. */
static bool
is_widening_convert(const IrInstr *i)
{
    if (i->op != IR_OP_CONVERT || i->n_operands != 1 || !i->operands[0])
        return false;
    IrDtype from = i->operands[0]->shape.dtype, to = i->shape.dtype;
    if (!is_int(from) || !is_int(to))
        return false;
    uint32_t fb = ir_dtype_bits(from), tb = ir_dtype_bits(to);
    char fk = ir_dtype_kind(from), tk = ir_dtype_kind(to);
    return fk == tk ? tb >= fb : (fk == 'U' && tk == 'S' && tb > fb);
}

/* A reshape or bitcast between one-element arrays of one type (s32[1] -> s32[]): the value
 * passes unchanged. */
static bool
is_scalar_reshape(const IrInstr *i)
{
    if ((i->op != IR_OP_RESHAPE && i->op != IR_OP_BITCAST) || i->n_operands != 1 ||
        !i->operands[0] || !ir_shape_is_array(&i->shape))
        return false;
    const IrShape *from = &i->operands[0]->shape;
    return ir_shape_is_array(from) && from->dtype == i->shape.dtype &&
           ir_shape_elem_count(from) == 1 && ir_shape_elem_count(&i->shape) == 1;
}

/* Through copies, widening converts, one-element reshapes and get-tuple-element of a tuple
 * instruction. */
static const IrInstr *
strip(const IrInstr *i)
{
    for (int n = 0; i && n < MAX_TRACE_STEPS; n++) {
        int64_t k = 0;
        if ((i->op == IR_OP_COPY && i->n_operands == 1) || is_widening_convert(i) ||
            is_scalar_reshape(i)) {
            i = i->operands[0];
        } else if (i->op == IR_OP_GET_TUPLE_ELEMENT && i->n_operands == 1 && i->operands[0] &&
                   i->operands[0]->op == IR_OP_TUPLE && ir_instr_int_attr(i, IR_ATTR_INDEX, &k) &&
                   k >= 0 && k < i->operands[0]->n_operands) {
            i = i->operands[0]->operands[k];
        } else {
            break;
        }
    }
    return i;
}

/* Which part of the loop state a value is: a tuple element's index, the whole state when the
 * state is a scalar (a while over s32[] itself, which XLA's analysis does not count), or
 * none. */
enum { ELEM_NONE = -1, ELEM_STATE = -2 };

/* The words for part `k` of the loop state, for reasons. */
typedef struct ElemName {
    char s[40];
} ElemName;

static ElemName
elem_name(int64_t k)
{
    ElemName n;
    if (k == ELEM_STATE)
        snprintf(n.s, sizeof(n.s), "the loop state");
    else
        snprintf(n.s, sizeof(n.s), "tuple element %lld", (long long)k);
    return n;
}

/* get-tuple-element(parameter 0 of `c`, K): K; parameter 0 itself when it is a scalar:
 * ELEM_STATE; else ELEM_NONE. */
static int64_t
param_elem(const IrInstr *i, const IrComputation *c)
{
    int64_t k = -1;
    const IrInstr *self = strip(i);
    if (self && self->op == IR_OP_PARAMETER && self->parent == c && self->parameter_number == 0 &&
        ir_shape_is_array(&self->shape) && self->shape.rank == 0)
        return ELEM_STATE;
    if (!i || i->op != IR_OP_GET_TUPLE_ELEMENT || i->n_operands != 1)
        return -1;
    const IrInstr *p = strip(i->operands[0]);
    if (!p || p->op != IR_OP_PARAMETER || p->parent != c || p->parameter_number != 0 ||
        !ir_instr_int_attr(i, IR_ATTR_INDEX, &k))
        return -1;
    return k;
}

/* The only `call` instruction of `m` that calls `c` (NULL when none, several, or another
 * kind of caller). */
static const IrInstr *
only_call_site(const IrModule *m, const IrComputation *c)
{
    const IrInstr *found = NULL;
    for (uint32_t k = 0; k < m->n_comps; k++) {
        const IrComputation *comp = m->comps[k];
        for (uint32_t j = 0; j < comp->n_instrs; j++) {
            const IrInstr *i = comp->instrs[j];
            for (uint16_t a = 0; a < i->n_attrs; a++) {
                const IrAttr *at = &i->attrs[a];
                if (at->key >= IR_ATTR_OTHER)
                    continue;
                IrAttrKind kind = ir_attr_kind(at->key);
                uint32_t n = kind == IR_AK_COMP ? 1 : kind == IR_AK_COMPS ? at->u.comps.n : 0;
                for (uint32_t q = 0; q < n; q++) {
                    const IrComputation *callee =
                        kind == IR_AK_COMP ? at->u.comp : at->u.comps.v[q];
                    if (callee != c)
                        continue;
                    if (found || i->op != IR_OP_CALL || at->key != IR_ATTR_TO_APPLY)
                        return NULL;
                    found = i;
                }
            }
        }
    }
    return found;
}

/* What `v` is before the loop starts: through strip() and parameters of computations called
 * from one call site. */
static const IrInstr *
resolve(const IrModule *m, const IrInstr *v)
{
    for (int n = 0; v && n < MAX_TRACE_STEPS; n++) {
        v = strip(v);
        if (!v || v->op != IR_OP_PARAMETER || !v->parent || v->parent->is_entry)
            return v;
        const IrInstr *call = only_call_site(m, v->parent);
        if (!call || v->parameter_number < 0 || v->parameter_number >= call->n_operands)
            return v;
        v = call->operands[v->parameter_number];
    }
    return v;
}

/* The value of `v` when it is integer arithmetic on constants (XLA's analysis evaluates the
 * initial value the same way): constants, add, subtract, multiply, negate, through resolve(). */
static bool
eval_int(const IrModule *m, const IrInstr *v, int depth, int64_t *out)
{
    v = resolve(m, v);
    if (!v || depth > MAX_TRACE_STEPS)
        return false;
    if (const_int(v, out))
        return true;
    int64_t a = 0, b = 0;
    if (!is_int(v->shape.dtype) || ir_shape_elem_count(&v->shape) != 1)
        return false;
    if (v->op == IR_OP_NEGATE && v->n_operands == 1)
        return eval_int(m, v->operands[0], depth + 1, &a) && !__builtin_sub_overflow(0, a, out);
    if ((v->op != IR_OP_ADD && v->op != IR_OP_SUBTRACT && v->op != IR_OP_MULTIPLY) ||
        v->n_operands != 2 || !eval_int(m, v->operands[0], depth + 1, &a) ||
        !eval_int(m, v->operands[1], depth + 1, &b))
        return false;
    if (v->op == IR_OP_ADD)
        return !__builtin_add_overflow(a, b, out);
    if (v->op == IR_OP_SUBTRACT)
        return !__builtin_sub_overflow(a, b, out);
    return !__builtin_mul_overflow(a, b, out);
}

/* Element `k` of the loop's initial state, resolved; NULL with a reason when the state is
 * not built by a tuple instruction. */
static const IrInstr *
init_elem(const IrModule *m, const IrInstr *w, int64_t k, IrTripCount *t)
{
    const IrInstr *s = w->n_operands == 1 ? resolve(m, w->operands[0]) : NULL;
    if (k == ELEM_STATE)
        return s;
    if (!s || s->op != IR_OP_TUPLE || k >= s->n_operands) {
        say(t, "the loop's initial state is not a tuple instruction (%s %%%s)",
            s ? ir_op_name(s->op) : "none", nm(s));
        return NULL;
    }
    return resolve(m, s->operands[k]);
}

/* Why a resolved value is not a constant, for the reason text. */
static void
not_constant(IrTripCount *t, const char *what, int64_t k, const IrInstr *v)
{
    if (v && v->op == IR_OP_PARAMETER)
        say(t, "%s (%s) is a parameter: %%%s of %s", what, elem_name(k).s, nm(v),
            v->parent && v->parent->name ? sl_sym_cstr(v->parent->name) : "?");
    else
        say(t, "%s (%s) is computed, not a constant: %s %%%s", what, elem_name(k).s,
            v ? ir_op_name(v->op) : "none", nm(v));
}

/* How element `k` changes in the body: *step for add/subtract of a constant (true), else
 * *invariant when passed on unchanged (false either way). */
static bool
body_step(const IrComputation *body, int64_t k, int64_t *step, bool *invariant,
          const IrInstr **upd)
{
    *invariant = false;
    const IrInstr *root = root_of(body), *u = NULL;
    if (k == ELEM_STATE && root)
        u = strip(root);
    else if (root && root->op == IR_OP_TUPLE && k >= 0 && k < root->n_operands)
        u = strip(root->operands[k]);
    else
        return false;
    *upd = u;
    if (param_elem(u, body) == k) {
        *invariant = true;
        return false;
    }
    /* A chain of additions and subtractions of constants, e.g. add(add(i, 1), 1): one step of
     * their sum (XLA's analysis evaluates such chains by brute force). */
    int64_t total = 0;
    for (int n = 0; u && n < MAX_TRACE_STEPS; n++) {
        if ((u->op != IR_OP_ADD && u->op != IR_OP_SUBTRACT) || u->n_operands != 2)
            return false;
        const IrInstr *a = strip(u->operands[0]), *b = strip(u->operands[1]), *rest = NULL;
        int64_t c = 0;
        if (const_int(b, &c)) {
            rest = a;
            if (u->op == IR_OP_SUBTRACT && __builtin_sub_overflow(0, c, &c))
                return false;
        } else if (u->op == IR_OP_ADD && const_int(a, &c)) {
            rest = b;
        } else {
            return false;
        }
        if (__builtin_add_overflow(total, c, &total))
            return false;
        if (param_elem(rest, body) == k) {
            *step = total;
            return true;
        }
        u = rest;
    }
    return false;
}

typedef enum Dir { D_LT, D_LE, D_GT, D_GE, D_NE, D_EQ, D_BAD } Dir;

static Dir
direction(const IrInstr *cmp, bool flip)
{
    static const struct {
        const char *text;
        Dir d, flipped;
    } k_dirs[] = {
        {"LT", D_LT, D_GT},
        {"LE", D_LE, D_GE},
        {"GT", D_GT, D_LT},
        {"GE", D_GE, D_LE},
        {"NE", D_NE, D_NE},
        {"EQ", D_EQ, D_EQ},
    };
    const IrAttr *a = ir_instr_find_attr(cmp, IR_ATTR_DIRECTION);
    for (size_t k = 0; a && k < SL_COUNTOF(k_dirs); k++)
        if (a->u.text.len == 2 && memcmp(a->u.text.ptr, k_dirs[k].text, 2) == 0)
            return flip ? k_dirs[k].flipped : k_dirs[k].d;
    return D_BAD;
}

static const char *const k_dir_text[] = {"<", "<=", ">", ">=", "!=", "=="};

/* floor(a / b) for b > 0 and a >= 0 is a / b; these stay in that range. */
static bool
count_of(Dir d, int64_t init, int64_t bound, int64_t step, int64_t *count)
{
    int64_t diff;
    if (__builtin_sub_overflow(bound, init, &diff))
        return false;
    switch (d) {
    case D_LT: /* runs while i < N */
        if (diff <= 0)
            return *count = 0, true;
        if (step <= 0)
            return false;
        *count = (diff - 1) / step + 1;
        return true;
    case D_LE:
        if (diff < 0)
            return *count = 0, true;
        if (step <= 0 || diff / step == INT64_MAX)
            return false;
        *count = diff / step + 1;
        return true;
    case D_GT: /* diff < 0 while running; -diff fits since diff > INT64_MIN checked below */
        if (diff >= 0)
            return *count = 0, true;
        if (step >= 0 || diff == INT64_MIN || step == INT64_MIN)
            return false;
        *count = (-diff - 1) / -step + 1;
        return true;
    case D_GE:
        if (diff > 0)
            return *count = 0, true;
        if (step >= 0 || diff == INT64_MIN || step == INT64_MIN || -diff / -step == INT64_MAX)
            return false;
        *count = -diff / -step + 1;
        return true;
    case D_NE:
        if (diff == 0)
            return *count = 0, true;
        if (step == 0 || diff % step != 0 || (diff < 0) != (step < 0))
            return false;
        *count = diff / step;
        return true;
    case D_EQ:
        *count = diff == 0 ? 1 : 0;
        return true;
    case D_BAD:
        break;
    }
    return false;
}

/* The value range of integer type `t` (u64 is capped at INT64_MAX: larger literals do not
 * parse). */
static void
int_range(IrDtype t, int64_t *lo, int64_t *hi)
{
    uint32_t bits = ir_dtype_bits(t);
    if (ir_dtype_kind(t) == 'U') {
        *lo = 0;
        *hi = bits >= 63 ? INT64_MAX : (int64_t)((UINT64_C(1) << bits) - 1);
    } else {
        *lo = bits >= 64 ? INT64_MIN : -(int64_t)(UINT64_C(1) << (bits - 1));
        *hi = bits >= 64 ? INT64_MAX : (int64_t)((UINT64_C(1) << (bits - 1)) - 1);
    }
}

/* The bound: a constant, or a tuple element passed on unchanged with a constant start. */
static bool
bound_value(const IrModule *m, const IrInstr *w, const IrInstr *side, int64_t *n, IrTripCount *t)
{
    const IrComputation *cond = ir_instr_called(w, IR_ATTR_CONDITION);
    const IrComputation *body = ir_instr_called(w, IR_ATTR_BODY);
    if (const_int(side, n))
        return true;
    int64_t j = param_elem(side, cond);
    if (j == ELEM_NONE) {
        if (side && side->op == IR_OP_CONSTANT)
            say(t, "the bound %%%s is not an integer scalar constant", nm(side));
        else
            say(t, "the bound is computed in the condition, not a constant: %s %%%s",
                side ? ir_op_name(side->op) : "none", nm(side));
        return false;
    }
    int64_t step = 0;
    bool invariant = false;
    const IrInstr *upd = NULL;
    (void)body_step(body, j, &step, &invariant, &upd);
    if (!invariant) {
        say(t, "the bound (%s) changes in the body", elem_name(j).s);
        return false;
    }
    const IrInstr *v = init_elem(m, w, j, t);
    if (!v)
        return false;
    if (!eval_int(m, v, 0, n)) {
        not_constant(t, "the bound", j, v);
        return false;
    }
    return true;
}

/* The induction variable among the compare's two sides: the side that is a tuple element the
 * body changes by a constant step. */
static int
pick_induction(const IrComputation *cond, const IrComputation *body, const IrInstr *side[2],
               int64_t *k, int64_t *step, IrTripCount *t)
{
    int found = -1;
    const IrInstr *why = NULL;
    int64_t why_k = ELEM_NONE;
    for (int s = 0; s < 2; s++) {
        int64_t e = param_elem(side[s], cond), st = 0;
        bool invariant = false;
        const IrInstr *upd = NULL;
        if (e == ELEM_NONE)
            continue;
        if (body_step(body, e, &st, &invariant, &upd)) {
            if (found >= 0) {
                say(t, "both compared values (%s and %s) change in the body", elem_name(*k).s,
                    elem_name(e).s);
                return -1;
            }
            found = s;
            *k = e;
            *step = st;
        } else if (!invariant) {
            why = upd;
            why_k = e;
        }
    }
    if (found < 0 && why_k != ELEM_NONE)
        say(t, "no induction variable: %s is updated by %s %%%s, not by adding a constant",
            elem_name(why_k).s, why ? ir_op_name(why->op) : "none", nm(why));
    else if (found < 0 && (param_elem(side[0], cond) != ELEM_NONE ||
                           param_elem(side[1], cond) != ELEM_NONE))
        say(t, "no induction variable: the compared tuple elements do not change in the body");
    else if (found < 0)
        say(t, "no induction variable: the condition compares no tuple element of the loop "
               "state directly");
    return found;
}

static void
match_pattern(const IrModule *m, const IrInstr *w, IrTripCount *t)
{
    const IrComputation *cond = ir_instr_called(w, IR_ATTR_CONDITION);
    const IrComputation *body = ir_instr_called(w, IR_ATTR_BODY);
    const IrInstr *cmp = root_of(cond), *body_root = root_of(body);
    if (!cmp || !body_root) {
        say(t, "the loop has no condition or body");
        return;
    }
    if (cmp->op != IR_OP_COMPARE || cmp->n_operands != 2) {
        say(t, "no induction variable: the condition's root is %s %%%s, not a compare",
            ir_op_name(cmp->op), nm(cmp));
        return;
    }
    const IrInstr *state = ir_computation_param(body, 0);
    if (body_root->op != IR_OP_TUPLE && (!state || ir_shape_is_tuple(&state->shape))) {
        say(t, "no induction variable: the body's root is %s, not a tuple",
            ir_op_name(body_root->op));
        return;
    }
    const IrInstr *side[2] = {strip(cmp->operands[0]), strip(cmp->operands[1])};
    int64_t k = -1, step = 0, init = 0, bound = 0;
    int s = pick_induction(cond, body, side, &k, &step, t);
    if (s < 0)
        return;
    t->induction_index = k == ELEM_STATE ? -1 : k;
    IrDtype dt = side[s]->shape.dtype;
    if (!is_int(dt)) {
        say(t, "the induction variable (%s) is %s, not an integer", elem_name(k).s,
            ir_dtype_name(dt));
        return;
    }
    Dir d = direction(cmp, s == 1);
    if (d == D_BAD) {
        say(t, "the condition's compare has no direction the pattern knows");
        return;
    }
    const IrInstr *iv = init_elem(m, w, k, t);
    if (!iv)
        return;
    if (!eval_int(m, iv, 0, &init)) {
        not_constant(t, "the initial value of the induction variable", k, iv);
        return;
    }
    if (!bound_value(m, w, side[1 - s], &bound, t))
        return;
    int64_t count = 0, lo = 0, hi = 0, last = 0, moved = 0;
    const char *sign = step < 0 ? "-" : "+";
    unsigned long long mag = step < 0 ? 0ull - (unsigned long long)step : (unsigned long long)step;
    if (!count_of(d, init, bound, step, &count)) {
        say(t, "the loop never ends: i = %lld; i %s %lld; i %s= %llu (%s)", (long long)init,
            k_dir_text[d], (long long)bound, sign, mag, elem_name(k).s);
        return;
    }
    int_range(dt, &lo, &hi);
    if (__builtin_mul_overflow(count, step, &moved) || __builtin_add_overflow(init, moved, &last) ||
        last < lo || last > hi || init < lo || init > hi) {
        say(t, "the induction variable (%s) would overflow: i = %lld; i %s %lld; i %s= %llu",
            ir_dtype_name(dt), (long long)init, k_dir_text[d], (long long)bound, sign, mag);
        return;
    }
    t->count = count;
    t->method = IR_TRIP_PATTERN;
    say(t, "i = %lld; i %s %lld; i %s= %llu (%s)", (long long)init, k_dir_text[d],
        (long long)bound, sign, mag, elem_name(k).s);
}

void
ir_while_trip_count(const IrModule *m, const IrInstr *w, IrTripCount *out)
{
    memset(out, 0, sizeof(*out));
    out->count = -1;
    out->induction_index = -1;
    out->method = IR_TRIP_UNKNOWN;
    if (!w || w->op != IR_OP_WHILE) {
        say(out, "not a while instruction");
        return;
    }
    int64_t n = backend_trip_count(w);
    if (n >= 0) {
        out->count = n;
        out->method = IR_TRIP_BACKEND_CONFIG;
        say(out, "backend_config known_trip_count n=%lld", (long long)n);
        return;
    }
    match_pattern(m, w, out);
}
