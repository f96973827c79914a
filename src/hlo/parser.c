/* parser.c - HLO text to IR (hlo-text.md §3-§7): module header, computations, instructions,
 * shapes and literals. Owns: the grammar above the attribute level, name scoping and error
 * locations. Does not own: attribute values (attrs.c), sharding text (src/sharding), the IR's
 * construction rules (src/ir). Invariants: everything the module points to is copied into the
 * arena (the input buffer may go away); the first error wins and stops the parse. */
#include "hlo/hlo.h"

#include <stdio.h>
#include <string.h>

#include "hlo/hlo_int.h"
#include "hlo/sdy.h"
#include "sharding/shd.h"

/* ---- plumbing ---- */

void
hlo_advance(HloParser *P)
{
    hlo_lex_next(&P->lx, &P->tok);
}

static const char *
tok_desc(const HloTok *t, char *buf, size_t cap)
{
    if (t->kind == HLO_TOK_EOF)
        return "end of input";
    size_t n = t->text.len;
    const char *prefix = t->kind == HLO_TOK_NAME ? "%" : "";
    const char *suffix = t->kind == HLO_TOK_ATTR ? "=" : "";
    const size_t max_shown = 40;
    bool cut = n > max_shown;
    if (cut)
        n = max_shown;
    char shown[64];
    size_t k = 0;
    for (size_t i = 0; i < n && k + 1 < sizeof(shown); i++) {
        char c = t->text.ptr[i];
        shown[k++] = (c == '\0' || c == '\n') ? ' ' : c;
    }
    shown[k] = '\0';
    snprintf(buf, cap, "'%s%s%s%s'", prefix, shown, suffix, cut ? "..." : "");
    return buf;
}

SlStatus
hlo_fail_tok(HloParser *P, SlStatus st, const HloTok *t, const char *fmt, ...)
{
    char msg[SL_ERROR_MSG_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return sl_fail(P->err, st, hlo_tok_loc(&P->lx, t), "%s", msg);
}

SlStatus
hlo_fail_here(HloParser *P, SlStatus st, const char *fmt, ...)
{
    char msg[SL_ERROR_MSG_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return sl_fail(P->err, st, hlo_lex_here(&P->lx), "%s", msg);
}

SlStatus
hlo_expected(HloParser *P, const char *what)
{
    char buf[96];
    const HloTok *t = &P->tok;
    if (t->kind == HLO_TOK_BAD)
        return hlo_fail_tok(P, SL_ERR_PARSE, t, "expected %s, got %s %s", what, t->bad,
                            tok_desc(t, buf, sizeof(buf)));
    return hlo_fail_tok(P, SL_ERR_PARSE, t, "expected %s, got %s", what,
                        tok_desc(t, buf, sizeof(buf)));
}

SlStr
hlo_dup(HloParser *P, SlStr s)
{
    SlStr r = {NULL, s.len};
    char *p = sl_arena_alloc(P->arena, s.len + 1, 1);
    if (p) {
        memcpy(p, s.ptr, s.len);
        r.ptr = p;
    }
    return r;
}

SlSym
hlo_intern(HloParser *P, SlStr s)
{
    return sl_intern(P->names, s);
}

static SlStatus
nomem(HloParser *P)
{
    return hlo_fail_tok(P, SL_ERR_NOMEM, &P->tok, "out of memory");
}

static bool
tok_is(const HloTok *t, HloTokKind k, const char *text)
{
    return t->kind == k && sl_str_eq_cstr(t->text, text);
}

static char
peek_char(const HloParser *P)
{
    return P->lx.p < P->lx.end ? *P->lx.p : '\0';
}

SlStatus
hlo_expect(HloParser *P, HloTokKind k, const char *what)
{
    if (P->tok.kind != k)
        return hlo_expected(P, what);
    hlo_advance(P);
    return SL_OK;
}

/* ---- caches ---- */

HloWord *
hlo_word_slot(HloWord *table, SlStr text)
{
    enum { MAX_PROBES = 8 };
    /* The first and last (up to) eight bytes and the length: words are short, and this
     * is the hot path of every opcode and attribute key. */
    uint64_t head = 0, tail = 0;
    size_t n = text.len < 8 ? text.len : 8;
    memcpy(&head, text.ptr, n);
    memcpy(&tail, text.ptr + text.len - n, n);
    uint64_t x = (head * 0x9e3779b97f4a7c15ull) ^ (tail + text.len) * 0xc2b2ae3d27d4eb4full;
    uint32_t h = (uint32_t)(x >> 32) ^ (uint32_t)x;
    for (uint32_t probe = 0; probe < MAX_PROBES; probe++) {
        HloWord *w = &table[(h + probe) & (HLO_WORD_SLOTS - 1)];
        if (!w->sym || (w->sym->len == text.len && memcmp(w->sym->text, text.ptr, text.len) == 0))
            return w;
    }
    return NULL;
}

static SlStatus
lookup_op(HloParser *P, IrOp *op)
{
    HloWord *w = hlo_word_slot(P->ops, P->tok.text);
    if (w && w->sym) {
        *op = (IrOp)w->val;
        return SL_OK;
    }
    if (!ir_op_from_name(P->tok.text, op))
        return hlo_fail_tok(P, SL_ERR_PARSE, &P->tok, "unknown opcode '%.*s'",
                            SL_STR_ARG(P->tok.text));
    if (w) {
        if (!(w->sym = hlo_intern(P, P->tok.text)))
            return nomem(P);
        w->val = (uint32_t)*op;
    }
    return SL_OK;
}

/* The layout text at the cursor ('{' ... '}'), shared with a recent identical one. */
static SlStatus
parse_layout(HloParser *P, SlStr *out)
{
    /* A recent layout (balanced, one line) that the input starts with is exactly what the
     * bracket scan would read. */
    size_t left = (size_t)(P->lx.end - P->lx.p);
    for (uint32_t j = 0; j < HLO_RECENT; j++) {
        uint32_t k = (P->hit_layout + j) % HLO_RECENT;
        SlStr r = P->recent_layout[k];
        if (r.len && r.len <= left && memcmp(r.ptr, P->lx.p, r.len) == 0) {
            P->hit_layout = k;
            P->lx.p += r.len;
            *out = r;
            return SL_OK;
        }
    }
    const char *start = P->lx.p, *why = NULL;
    if (!hlo_lex_scan_balanced(&P->lx, &why))
        return hlo_fail_here(P, SL_ERR_PARSE, "bad layout: %s", why);
    SlStr text = {start, (size_t)(P->lx.p - start)};
    if (!(*out = hlo_dup(P, text)).ptr)
        return nomem(P);
    if (!memchr(text.ptr, '\n', text.len))
        P->recent_layout[P->next_layout++ % HLO_RECENT] = *out;
    return SL_OK;
}

/* ---- shapes ---- */

static const struct {
    const char *name;
    size_t len;
} k_dtype_names[] = {
#define IR_DTYPE(e, name, bits, kind) {name, sizeof(name) - 1},
#include "ir/ir_types.def"
#undef IR_DTYPE
};

static bool
dtype_lookup(SlStr s, IrDtype *out)
{
    for (unsigned i = 1; i < SL_COUNTOF(k_dtype_names); i++) {
        if (i == IR_DT_TUPLE || k_dtype_names[i].len != s.len ||
            k_dtype_names[i].name[0] != s.ptr[0])
            continue;
        if (memcmp(k_dtype_names[i].name, s.ptr, s.len) == 0) {
            *out = (IrDtype)i;
            return true;
        }
    }
    return false;
}

static bool
at_shape(const HloParser *P)
{
    return P->tok.kind == HLO_TOK_LPAREN || (P->tok.kind == HLO_TOK_IDENT && peek_char(P) == '[');
}

static SlStatus parse_shape(HloParser *P, IrShape *out);

/* tuple_shape := '(' (shape (',' shape)*)? ')' */
static SlStatus
parse_tuple_shape(HloParser *P, IrShape *out)
{
    if (P->depth >= HLO_MAX_DEPTH)
        return hlo_fail_tok(P, SL_ERR_PARSE, &P->tok, "tuple shapes nested too deeply");
    P->depth++;
    hlo_advance(P);
    size_t base = P->shapes.len;
    SlStatus st = SL_OK;
    if (P->tok.kind != HLO_TOK_RPAREN) {
        for (;;) {
            IrShape e;
            if ((st = parse_shape(P, &e)) != SL_OK)
                return st;
            if (!SL_VEC_PUSH(&P->shapes, IrShape, e))
                return nomem(P);
            if (P->tok.kind != HLO_TOK_COMMA)
                break;
            hlo_advance(P);
        }
    }
    if ((st = hlo_expect(P, HLO_TOK_RPAREN, "',' or ')' in tuple shape")) != SL_OK)
        return st;
    memset(out, 0, sizeof(*out));
    out->dtype = IR_DT_TUPLE;
    out->n_elems = (uint32_t)(P->shapes.len - base);
    if (out->n_elems) {
        out->elems = SL_DUP_ARRAY(P->arena, IrShape, &SL_VEC_AT(&P->shapes, IrShape, base),
                                  out->n_elems);
        if (!out->elems)
            return nomem(P);
    }
    P->shapes.len = base;
    P->depth--;
    return SL_OK;
}

/* The common spelling of dims, '[' (DIGITS (',' DIGITS)*)? ']' without spaces, read straight
 * from the cursor; false (cursor unchanged) for anything else, which the token path reads. */
static bool
raw_dims(HloParser *P, int64_t *dims, uint32_t *rank)
{
    enum { MAX_DIGITS = 18 }; /* below INT64_MAX; longer numbers take the token path */
    const char *p = P->lx.p, *end = P->lx.end;
    uint32_t n = 0;
    if (p >= end || *p != '[')
        return false;
    p++;
    if (p < end && *p == ']') {
        P->lx.p = p + 1;
        *rank = 0;
        return true;
    }
    for (;;) {
        const char *d = p;
        int64_t v = 0;
        while (p < end && *p >= '0' && *p <= '9' && p - d < MAX_DIGITS)
            v = v * 10 + (*p++ - '0');
        if (p == d || p >= end || n == HLO_MAX_RANK)
            return false;
        dims[n++] = v;
        if (*p == ']')
            break;
        if (*p != ',')
            return false;
        p++;
    }
    P->lx.p = p + 1;
    *rank = n;
    return true;
}

/* array_shape := PRIMTYPE '[' (dim (',' dim)*)? ']' layout?
 * dim := INT | '<=' INT | '?'     layout := '{' ... '}' (directly after ']', kept verbatim) */
static SlStatus
parse_array_shape(HloParser *P, IrShape *out)
{
    memset(out, 0, sizeof(*out));
    if (!dtype_lookup(P->tok.text, &out->dtype))
        return hlo_fail_tok(P, SL_ERR_PARSE, &P->tok, "unknown primitive type '%.*s'",
                            SL_STR_ARG(P->tok.text));
    int64_t dims[HLO_MAX_RANK];
    uint8_t kinds[HLO_MAX_RANK];
    uint32_t rank = 0;
    bool dynamic = false;
    HloTok type_tok = P->tok;
    bool fast = raw_dims(P, dims, &rank);
    if (!fast) {
        hlo_advance(P); /* '[' */
        hlo_advance(P);
    }
    while (!fast && P->tok.kind != HLO_TOK_RSQUARE) {
        if (rank == HLO_MAX_RANK)
            return hlo_fail_tok(P, SL_ERR_UNSUPPORTED, &P->tok, "rank above %d",
                                HLO_MAX_RANK);
        if (rank > 0) {
            if (P->tok.kind != HLO_TOK_COMMA)
                return hlo_expected(P, "',' or ']' in shape");
            hlo_advance(P);
        }
        kinds[rank] = IR_DIM_STATIC;
        if (P->tok.kind == HLO_TOK_QUESTION) {
            kinds[rank] = IR_DIM_UNBOUNDED;
            dims[rank++] = -1;
            dynamic = true;
            hlo_advance(P);
            continue;
        }
        if (P->tok.kind == HLO_TOK_LEQ) {
            kinds[rank] = IR_DIM_BOUNDED;
            dynamic = true;
            hlo_advance(P);
        }
        if (P->tok.kind != HLO_TOK_INT || P->tok.ival < 0)
            return hlo_expected(P, "a dimension size");
        dims[rank++] = P->tok.ival;
        hlo_advance(P);
    }
    out->rank = rank;
    if (rank && (out->dtype == IR_DT_TOKEN || out->dtype == IR_DT_OPAQUE))
        return hlo_fail_tok(P, SL_ERR_INVALID, &type_tok, "%s has no dimensions: write %s[]",
                            ir_dtype_name(out->dtype), ir_dtype_name(out->dtype));
    if (rank) {
        for (uint32_t k = 0; k < HLO_RECENT && !out->dims; k++)
            if (P->recent_rank[k] == rank &&
                memcmp(P->recent_dims[k], dims, rank * sizeof(int64_t)) == 0)
                out->dims = (int64_t *)P->recent_dims[k];
        if (!out->dims) {
            if (!(out->dims = SL_DUP_ARRAY(P->arena, int64_t, dims, rank)))
                return nomem(P);
            uint32_t slot = P->next_dims++ % HLO_RECENT;
            P->recent_dims[slot] = out->dims;
            P->recent_rank[slot] = rank;
        }
        if (dynamic && !(out->dim_kinds = SL_DUP_ARRAY(P->arena, uint8_t, kinds, rank)))
            return nomem(P);
    }
    SlStatus st;
    if (peek_char(P) == '{' && (st = parse_layout(P, &out->layout)) != SL_OK)
        return st;
    hlo_advance(P);
    return SL_OK;
}

/* shape := array_shape | tuple_shape */
static SlStatus
parse_shape(HloParser *P, IrShape *out)
{
    if (P->tok.kind == HLO_TOK_LPAREN)
        return parse_tuple_shape(P, out);
    if (P->tok.kind == HLO_TOK_IDENT && peek_char(P) == '[')
        return parse_array_shape(P, out);
    return hlo_expected(P, "a shape");
}

/* ---- instructions ---- */

/* A recently defined instruction of this computation spelled `name`, or NULL (then the
 * name map decides). */
static IrInstr *
find_recent(HloParser *P, SlStr name)
{
    for (uint32_t k = 0; k < HLO_RECENT; k++) {
        IrInstr *i = P->recent_instr[k];
        if (i && i->name->len == name.len && memcmp(i->name->text, name.ptr, name.len) == 0)
            return i;
    }
    return NULL;
}

/* operands := (shape? NAME (',' shape? NAME)*)?   (the '(' is the current token) */
static SlStatus
parse_operands(HloParser *P)
{
    P->operands.len = 0;
    hlo_advance(P);
    if (P->tok.kind == HLO_TOK_RPAREN)
        return SL_OK;
    for (;;) {
        SlStatus st;
        if (at_shape(P)) {
            IrShape ignored; /* older dumps repeat the operand's shape */
            if ((st = parse_shape(P, &ignored)) != SL_OK)
                return st;
        }
        if (P->tok.kind != HLO_TOK_NAME && P->tok.kind != HLO_TOK_IDENT)
            return hlo_expected(P, "an operand name");
        IrInstr *op = find_recent(P, P->tok.text);
        if (!op) {
            SlSym s = hlo_intern(P, P->tok.text);
            uint64_t v;
            if (!s)
                return nomem(P);
            if (sl_map_get(&P->instrs, SL_MAP_KEY(s), &v))
                op = (IrInstr *)(uintptr_t)v;
            if (!op || op->parent != P->comp)
                return hlo_fail_tok(P, SL_ERR_INVALID, &P->tok, "undefined operand '%s'",
                                    sl_sym_cstr(s));
        }
        if (!SL_VEC_PUSH(&P->operands, IrInstr *, op))
            return nomem(P);
        hlo_advance(P);
        if (P->tok.kind == HLO_TOK_BAD && P->tok.text.len && P->tok.text.ptr[0] == '#')
            return hlo_fail_tok(P, SL_ERR_UNSUPPORTED, &P->tok,
                                "compact get-tuple-element operands ('#i') are not supported");
        if (P->tok.kind == HLO_TOK_RPAREN)
            return SL_OK;
        if ((st = hlo_expect(P, HLO_TOK_COMMA, "',' or ')' after operand")) != SL_OK)
            return st;
    }
}

/* literal := everything between the parentheses of constant(...), brackets balanced; kept
 * verbatim without surrounding whitespace. The '(' is the current token. */
static SlStatus
parse_literal(HloParser *P, SlStr *out)
{
    const char *why = NULL;
    P->lx.p = P->tok.text.ptr; /* rescan from '(' (same line, so line tracking holds) */
    if (!hlo_lex_scan_balanced(&P->lx, &why))
        return hlo_fail_here(P, SL_ERR_PARSE, "bad constant literal: %s", why);
    const char *s = P->tok.text.ptr + 1, *e = P->lx.p - 1;
    while (s < e && (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r'))
        s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\n' || e[-1] == '\r'))
        e--;
    SlStr text = {s, (size_t)(e - s)};
    *out = hlo_dup(P, text);
    if (!out->ptr)
        return nomem(P);
    hlo_advance(P);
    return SL_OK;
}

/* Shapes that hand-written HLO may omit (hlo-text.md §5), as XLA's parser infers them:
 * elementwise ops, tuple, get-tuple-element, opt-barrier, copy, while (its operand's) and
 * call (its callee's result). Everything else must spell its shape. */
static SlStatus
infer_shape(HloParser *P, IrInstr *ins, const HloTok *op_tok)
{
    IrInstr **ops = ins->operands;
    uint32_t n = ins->n_operands;
    switch (ins->op) {
    case IR_OP_TUPLE:
        ins->shape.dtype = IR_DT_TUPLE;
        ins->shape.n_elems = n;
        if (n && !(ins->shape.elems = SL_NEW_ARRAY(P->arena, IrShape, n)))
            return nomem(P);
        for (uint32_t k = 0; k < n; k++)
            ins->shape.elems[k] = ops[k]->shape;
        return SL_OK;
    case IR_OP_GET_TUPLE_ELEMENT: {
        int64_t idx;
        if (n == 1 && ir_instr_int_attr(ins, IR_ATTR_INDEX, &idx) &&
            ir_shape_is_tuple(&ops[0]->shape) && idx >= 0 &&
            idx < (int64_t)ops[0]->shape.n_elems) {
            ins->shape = ops[0]->shape.elems[idx];
            return SL_OK;
        }
        break;
    }
    case IR_OP_CONVERT:
    case IR_OP_BITCAST_CONVERT:
    case IR_OP_STOCHASTIC_CONVERT:
        break;
    case IR_OP_SELECT:
    case IR_OP_CLAMP:
        if (n == 3) {
            ins->shape = ops[1]->shape;
            return SL_OK;
        }
        break;
    case IR_OP_OPT_BARRIER:
    case IR_OP_WHILE: /* the loop state: init, body parameter and result alike */
    case IR_OP_COPY:  /* a tuple too */
        if (n == 1) {
            ins->shape = ops[0]->shape;
            return SL_OK;
        }
        break;
    case IR_OP_CALL: {
        const IrComputation *c = ir_instr_called(ins, IR_ATTR_TO_APPLY);
        if (c && c->root) {
            ins->shape = c->root->shape;
            return SL_OK;
        }
        break;
    }
    default:
        if (ir_op_is_elementwise(ins->op) && n > 0 && ir_shape_is_array(&ops[0]->shape)) {
            ins->shape = ops[0]->shape;
            if (ins->op == IR_OP_COMPARE)
                ins->shape.dtype = IR_DT_PRED;
            return SL_OK;
        }
        break;
    }
    return hlo_fail_tok(P, SL_ERR_PARSE, op_tok, "expected a shape before opcode '%s'",
                        ir_op_name(ins->op));
}

static bool
sym_is_defined_here(const HloParser *P, SlSym s)
{
    uint64_t v;
    return sl_map_get(&P->instrs, SL_MAP_KEY(s), &v) &&
           ((const IrInstr *)(uintptr_t)v)->parent == P->comp;
}

/* args := literal (constant) | INT (parameter) | operands   (the '(' is the current token) */
static SlStatus
parse_instr_args(HloParser *P, IrOp op, SlStr *literal, int64_t *param_no)
{
    SlStatus st;
    P->operands.len = 0;
    if (op == IR_OP_CONSTANT)
        return parse_literal(P, literal);
    if (op == IR_OP_PARAMETER) {
        hlo_advance(P);
        if (P->tok.kind != HLO_TOK_INT || P->tok.ival < 0)
            return hlo_expected(P, "a parameter number");
        if (P->tok.ival >= IR_MAX_PARAMS)
            return hlo_fail_tok(P, SL_ERR_INVALID, &P->tok,
                                "parameter number %lld is not below the limit of %d",
                                (long long)P->tok.ival, IR_MAX_PARAMS);
        *param_no = P->tok.ival;
        hlo_advance(P);
        return hlo_expect(P, HLO_TOK_RPAREN, "')'");
    }
    if ((st = parse_operands(P)) != SL_OK)
        return st;
    hlo_advance(P);
    return SL_OK;
}

/* (',' ATTR value)*   stored at exact size, in the order read */
static SlStatus
parse_instr_attrs(HloParser *P, IrInstr *ins)
{
    SlStatus st;
    P->attrs.len = 0;
    while (P->tok.kind == HLO_TOK_COMMA) {
        hlo_advance(P);
        if (P->tok.kind != HLO_TOK_ATTR)
            return hlo_expected(P, "an attribute 'name='");
        if (P->attrs.len == UINT16_MAX)
            return hlo_fail_tok(P, SL_ERR_UNSUPPORTED, &P->tok, "too many attributes");
        if ((st = hlo_parse_attr(P, ins)) != SL_OK)
            return st;
    }
    if (P->attrs.len) {
        ins->attrs = SL_DUP_ARRAY(P->arena, IrAttr, P->attrs.data, P->attrs.len);
        if (!ins->attrs)
            return nomem(P);
        ins->n_attrs = ins->cap_attrs = (uint16_t)P->attrs.len;
    }
    return SL_OK;
}

/* Lists the instruction in the computation and the name scope; records the ROOT. */
static SlStatus
add_instr(HloParser *P, IrInstr *ins, bool is_root, const HloTok *first)
{
    SlSym name = ins->name;
    if (ir_computation_add_instr(P->comp, P->m, ins) != SL_OK ||
        !sl_map_put(&P->instrs, SL_MAP_KEY(name), SL_MAP_KEY(ins)))
        return nomem(P);
    P->recent_instr[P->next_instr++ % HLO_RECENT] = ins;
    if (is_root) {
        if (P->comp->root)
            return hlo_fail_tok(P, SL_ERR_INVALID, first,
                                "second ROOT in computation '%s' (first: '%s')",
                                sl_sym_cstr(P->comp->name), sl_sym_cstr(P->comp->root->name));
        P->comp->root = ins;
    }
    return SL_OK;
}

/* Hints the interner with the name on the next line, if it is where it usually is. */
static void
prefetch_next_name(const HloParser *P)
{
    const char *p = P->lx.p, *end = P->lx.end;
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    if (!nl)
        return;
    p = nl + 1;
    while (p < end && *p == ' ')
        p++;
    if (end - p > 5 && memcmp(p, "ROOT ", 5) == 0)
        p += 5;
    if (p < end && *p == '%')
        p++;
    const char *s = p;
    while (p < end && *p != ' ' && *p != '=' && *p != '\n')
        p++;
    if (p > s) {
        SlStr next = {s, (size_t)(p - s)};
        sl_intern_prefetch(P->names, next);
    }
}

/* instruction := 'ROOT'? NAME '=' shape? OPCODE '(' operands ')' (',' ATTR value)* */
static SlStatus
parse_instr(HloParser *P)
{
    SlStatus st;
    HloTok first = P->tok;
    bool is_root = tok_is(&P->tok, HLO_TOK_IDENT, "ROOT");
    if (is_root)
        hlo_advance(P);
    HloTok name_tok = P->tok;
    if (name_tok.kind != HLO_TOK_NAME && name_tok.kind != HLO_TOK_IDENT &&
        name_tok.kind != HLO_TOK_ATTR)
        return hlo_expected(P, "an instruction name");
    hlo_advance(P);
    if (name_tok.kind != HLO_TOK_ATTR && (st = hlo_expect(P, HLO_TOK_EQUAL, "'='")) != SL_OK)
        return st;
    size_t names_before = P->names->count;
    SlSym name = hlo_intern(P, name_tok.text);
    if (!name)
        return nomem(P);
    /* A name interned just now cannot be defined yet. */
    if (P->names->count == names_before && sym_is_defined_here(P, name))
        return hlo_fail_tok(P, SL_ERR_INVALID, &name_tok,
                            "duplicate instruction name '%s' in computation '%s'",
                            sl_sym_cstr(name), sl_sym_cstr(P->comp->name));
    /* Big modules miss the cache on every table probe: start loading the slots this
     * instruction and the next one's name will need while the line is read. */
    sl_map_prefetch(&P->instrs, SL_MAP_KEY(name));
    prefetch_next_name(P);

    IrShape shape = {0};
    bool has_shape = at_shape(P);
    if (has_shape && (st = parse_shape(P, &shape)) != SL_OK)
        return st;
    if (P->tok.kind != HLO_TOK_IDENT)
        return hlo_expected(P, has_shape ? "an opcode" : "a shape or an opcode");
    HloTok op_tok = P->tok;
    IrOp op;
    if ((st = lookup_op(P, &op)) != SL_OK)
        return st;
    hlo_advance(P);
    if (P->tok.kind != HLO_TOK_LPAREN)
        return hlo_expected(P, "'(' after the opcode");

    SlStr literal = {0};
    int64_t param_no = 0;
    if ((st = parse_instr_args(P, op, &literal, &param_no)) != SL_OK)
        return st;
    IrInstr *ins = ir_instr_new(P->m, op, &shape, (IrInstr *const *)P->operands.data,
                                (uint32_t)P->operands.len);
    if (!ins)
        return nomem(P);
    ins->name = name;
    ins->literal = literal;
    ins->parameter_number = param_no;
    ins->src_line = first.line;
    ins->src_col = first.col;
    if ((st = parse_instr_attrs(P, ins)) != SL_OK)
        return st;
    if (!has_shape && (st = infer_shape(P, ins, &op_tok)) != SL_OK)
        return st;
    return add_instr(P, ins, is_root, &first);
}
/* ---- computations ---- */

/* A computation's written signature, compared with its body once that is parsed. */
typedef struct Signature {
    bool present;
    uint32_t n_params;
    HloTok *at;       /* each parameter's name token (locations only) */
    IrShape result;
    HloTok result_at;
} Signature;

/* signature := '(' (PARAM ':' shape (',' PARAM ':' shape)*)? ')' '->' shape   (the printer
 * derives it from the parameters and the root; check_signature compares the two) */
static SlStatus
parse_signature(HloParser *P, Signature *sig)
{
    SlStatus st;
    SlVec toks = {0};
    sig->present = true;
    hlo_advance(P);
    if (P->tok.kind != HLO_TOK_RPAREN) {
        for (;;) {
            if (P->tok.kind != HLO_TOK_IDENT && P->tok.kind != HLO_TOK_NAME) {
                st = hlo_expected(P, "a parameter name");
                goto done;
            }
            HloTok name = P->tok;
            hlo_advance(P);
            IrShape shape; /* not kept: see check_signature */
            if ((st = hlo_expect(P, HLO_TOK_COLON, "':' after the parameter name")) != SL_OK ||
                (st = parse_shape(P, &shape)) != SL_OK)
                goto done;
            if (!SL_VEC_PUSH(&toks, HloTok, name)) {
                st = nomem(P);
                goto done;
            }
            if (P->tok.kind != HLO_TOK_COMMA)
                break;
            hlo_advance(P);
        }
    }
    if ((st = hlo_expect(P, HLO_TOK_RPAREN, "',' or ')' in the signature")) != SL_OK ||
        (st = hlo_expect(P, HLO_TOK_ARROW, "'->'")) != SL_OK)
        goto done;
    sig->result_at = P->tok;
    if ((st = parse_shape(P, &sig->result)) != SL_OK)
        goto done;
    sig->n_params = (uint32_t)toks.len;
    if (toks.len && !(sig->at = SL_DUP_ARRAY(P->arena, HloTok, toks.data, toks.len)))
        st = nomem(P);
done:
    sl_vec_fini(&toks);
    return st;
}

static SlStatus
signature_mismatch(HloParser *P, const HloTok *at, const char *what, const IrShape *written,
                   const IrShape *body)
{
    SlBuf a, b;
    sl_buf_init(&a);
    sl_buf_init(&b);
    ir_shape_print(written, false, &a);
    ir_shape_print(body, false, &b);
    SlStatus st = hlo_fail_tok(P, SL_ERR_INVALID, at, "signature gives %s %s but the body has %s",
                               what, a.data ? a.data : "?", b.data ? b.data : "?");
    sl_buf_fini(&a);
    sl_buf_fini(&b);
    return st;
}

/* The written signature must list as many parameters as the body has and the root's shape
 * (layouts aside). */
static SlStatus
check_signature(HloParser *P, const Signature *sig, const IrComputation *c)
{
    if (!sig->present)
        return SL_OK;
    uint32_t n = 0; /* parameter instructions, as the printer lists them (numbers: check) */
    for (uint32_t i = 0; i < c->n_instrs; i++)
        n += c->instrs[i]->op == IR_OP_PARAMETER;
    if (sig->n_params != n)
        return hlo_fail_tok(P, SL_ERR_INVALID, sig->n_params ? &sig->at[0] : &sig->result_at,
                            "signature lists %u parameters but %%%s has %u", sig->n_params,
                            sl_sym_cstr(c->name), n);
    /* Parameter shapes are not compared: XLA's parser takes the parameter instructions'
     * shapes over the signature's (its own tests write `()` placeholders there), and nothing
     * here reads the written signature either. */
    if (c->root && !ir_shape_equal(&sig->result, &c->root->shape, false))
        return signature_mismatch(P, &sig->result_at, "the result", &sig->result,
                                  &c->root->shape);
    return SL_OK;
}

/* hlo_parse_file gives pages back in steps of this much text. */
#define RELEASE_EVERY_BYTES ((size_t)4 * 1024 * 1024)

/* computation := 'ENTRY'? NAME signature? '{' instruction+ '}' (',' 'execution_thread=' STR)? */
static SlStatus
parse_computation(HloParser *P, const HloTok **first_entry, HloTok *entry_tok)
{
    SlStatus st;
    HloTok first = P->tok;
    bool is_entry = tok_is(&P->tok, HLO_TOK_IDENT, "ENTRY");
    if (is_entry) {
        if (*first_entry)
            return hlo_fail_tok(P, SL_ERR_INVALID, &first,
                                "second ENTRY computation (first at line %u)",
                                (*first_entry)->line);
        *entry_tok = first;
        *first_entry = entry_tok;
        hlo_advance(P);
    }
    HloTok name_tok = P->tok;
    if (name_tok.kind != HLO_TOK_NAME && name_tok.kind != HLO_TOK_IDENT)
        return hlo_expected(P, is_entry ? "a computation name" : "a computation");
    SlSym name = hlo_intern(P, name_tok.text);
    if (!name)
        return nomem(P);
    if (sl_map_get(&P->comps, SL_MAP_KEY(name), NULL))
        return hlo_fail_tok(P, SL_ERR_INVALID, &name_tok, "duplicate computation name '%s'",
                            sl_sym_cstr(name));
    hlo_advance(P);
    Signature sig = {0};
    if (P->tok.kind == HLO_TOK_LPAREN && (st = parse_signature(P, &sig)) != SL_OK)
        return st;
    if ((st = hlo_expect(P, HLO_TOK_LBRACE, "'{' to open the computation")) != SL_OK)
        return st;

    IrComputation *c = ir_computation_new(P->m, name);
    if (!c)
        return nomem(P);
    c->is_entry = is_entry;
    P->comp = c;
    memset(P->recent_instr, 0, sizeof(P->recent_instr));
    while (P->tok.kind != HLO_TOK_RBRACE) {
        if (P->tok.kind == HLO_TOK_EOF)
            return hlo_expected(P, "'}' to close the computation");
        if ((st = parse_instr(P)) != SL_OK)
            return st;
        if (P->src && P->lx.p >= P->release_at) {
            /* Everything before this line is in the module already (copied). */
            sl_file_text_release_before(P->src, P->lx.line_start);
            P->release_at = P->lx.p + RELEASE_EVERY_BYTES;
        }
    }
    if (c->n_instrs == 0)
        return hlo_expected(P, "an instruction");
    if (!c->root)
        c->root = c->instrs[c->n_instrs - 1];
    if ((st = check_signature(P, &sig, c)) != SL_OK)
        return st;
    hlo_advance(P);
    if (P->tok.kind == HLO_TOK_COMMA) {
        hlo_advance(P);
        if (!tok_is(&P->tok, HLO_TOK_ATTR, "execution_thread"))
            return hlo_expected(P, "'execution_thread='");
        hlo_advance(P);
        if (P->tok.kind != HLO_TOK_STRING)
            return hlo_expected(P, "a quoted thread name");
        if (!(c->execution_thread = hlo_dup(P, P->tok.text)).ptr)
            return nomem(P);
        hlo_advance(P);
    }
    if (ir_module_add_computation(P->m, c) != SL_OK ||
        !sl_map_put(&P->comps, SL_MAP_KEY(name), SL_MAP_KEY(c)))
        return nomem(P);
    P->comp = NULL;
    return SL_OK;
}

/* ---- module ---- */

static SlStatus parse_text(SlArena *arena, SlInterner *names, SlStr text, SlFileText *src,
                           const char *path, uint32_t nest, IrModule **out, SlError *err);

/* Recovery modules nest (a recovery module may carry a table of its own) up to this depth. */
#define MAX_MODULE_NEST 8

/* original_array := '{' (STRING ('{' (INT (',' INT)*)? '}')?)? '}'    the name kept verbatim */
static SlStatus
parse_origin_array(HloParser *P, IrOriginArray *a)
{
    memset(a, 0, sizeof(*a));
    a->name = sl_str(""); /* `{}`: no name (printed as "") */
    if (P->tok.kind != HLO_TOK_LBRACE)
        return hlo_expected(P, "'{' to start an original array");
    hlo_advance(P);
    if (P->tok.kind == HLO_TOK_STRING) {
        SlStr t = P->tok.text;
        if (!(a->name = hlo_dup(P, (SlStr){t.ptr + 1, t.len - 2})).ptr)
            return nomem(P);
        hlo_advance(P);
        if (P->tok.kind == HLO_TOK_LBRACE) {
            int64_t idx[HLO_MAX_RANK];
            uint32_t n = 0;
            hlo_advance(P);
            while (P->tok.kind != HLO_TOK_RBRACE) {
                if (n && P->tok.kind == HLO_TOK_COMMA)
                    hlo_advance(P);
                if (P->tok.kind != HLO_TOK_INT || P->tok.ival < 0)
                    return hlo_expected(P, "a shape index entry");
                if (n == HLO_MAX_RANK)
                    return hlo_fail_tok(P, SL_ERR_PARSE, &P->tok, "shape index too long");
                idx[n++] = P->tok.ival;
                hlo_advance(P);
            }
            hlo_advance(P);
            if (n && !(a->index = SL_DUP_ARRAY(P->arena, int64_t, idx, n)))
                return nomem(P);
            a->n_index = n;
        }
    }
    if (P->tok.kind != HLO_TOK_RBRACE)
        return hlo_expected(P, "'}' to end an original array");
    hlo_advance(P);
    return SL_OK;
}

/* The module text of a quoted recovery module, escapes undone, parsed on its own. */
static SlStatus
parse_recovery_module(HloParser *P, IrModule **out)
{
    const HloTok at = P->tok;
    SlStr q = {at.text.ptr + 1, at.text.len - 2};
    SlBuf text;
    sl_buf_init(&text);
    for (size_t k = 0; k < q.len; k++) {
        char c = q.ptr[k];
        if (c == '\\' && k + 1 < q.len) {
            c = q.ptr[++k];
            c = c == 'n' ? '\n' : c == 't' ? '\t' : c == 'r' ? '\r' : c;
        }
        sl_buf_putc(&text, c);
    }
    if (text.failed) {
        sl_buf_fini(&text);
        return nomem(P);
    }
    SlError inner = {0};
    SlStatus st = parse_text(P->arena, P->names, sl_buf_str(&text), NULL, P->lx.path, P->nest + 1,
                             out, &inner);
    sl_buf_fini(&text);
    if (st != SL_OK)
        return hlo_fail_tok(P, st, &at, "in this recovery module, line %u col %u: %s",
                            inner.loc.line, inner.loc.col, inner.msg);
    hlo_advance(P);
    return SL_OK;
}

/* table := '{' (original_array ':' original_array (',' STRING)?)* '}'    the STRING a module */
static SlStatus
parse_recovery_table(HloParser *P)
{
    SlStatus st;
    if (P->nest >= MAX_MODULE_NEST)
        return hlo_fail_tok(P, SL_ERR_UNSUPPORTED, &P->tok, "recovery modules nested too deeply");
    hlo_advance(P);
    if (P->tok.kind != HLO_TOK_LBRACE)
        return hlo_expected(P, "'{' to start origin_recovery_table");
    hlo_advance(P);
    while (P->tok.kind != HLO_TOK_RBRACE) {
        IrRecovery e = {0};
        const HloTok first = P->tok;
        if ((st = parse_origin_array(P, &e.old)) != SL_OK)
            return st;
        if (P->tok.kind != HLO_TOK_COLON)
            return hlo_expected(P, "':' between original arrays");
        hlo_advance(P);
        if ((st = parse_origin_array(P, &e.now)) != SL_OK)
            return st;
        if (P->tok.kind == HLO_TOK_COMMA) {
            hlo_advance(P);
            if (P->tok.kind != HLO_TOK_STRING)
                return hlo_expected(P, "a quoted recovery module");
            if ((st = parse_recovery_module(P, &e.module)) != SL_OK)
                return st;
        }
        st = ir_module_add_recovery(P->m, &e);
        if (st == SL_ERR_INVALID) {
            ir_module_fini(e.module);
            return hlo_fail_tok(P, st, &first, "original array listed twice in the table");
        }
        if (st != SL_OK) {
            ir_module_fini(e.module);
            return nomem(P);
        }
    }
    hlo_advance(P);
    return SL_OK;
}

/* A decimal count in 1..IR_MAX_DEVICES (num_partitions=, replica_count=). */
static bool
is_device_count(SlStr v)
{
    int64_t n = 0;
    for (size_t i = 0; i < v.len; i++) {
        if (v.ptr[i] < '0' || v.ptr[i] > '9')
            return false;
        n = n * 10 + (v.ptr[i] - '0');
        if (n > IR_MAX_DEVICES)
            return false;
    }
    return v.len > 0 && n >= 1;
}

/* header := ('HloModule' NAME (',' ATTR value)*)?    values kept verbatim, in order, except
 * origin_recovery_table (parsed into the module's table); like XLA, a module may start
 * directly with its computations (it is then named "module") */
/* MLIR text (StableHLO, MHLO) starts with `#loc` lines, `module @name`, `module attributes
 * {...}` or a `func.func`; an HLO computation may be called "module", but never continues with
 * those. */
static bool
is_mlir_start(const HloParser *P)
{
    SlStr t = P->tok.text;
    if (P->tok.kind == HLO_TOK_BAD) /* `#loc = loc(...)` lines open MLIR with debug info */
        return t.ptr && P->lx.end - t.ptr >= 4 && !memcmp(t.ptr, "#loc", 4);
    if (P->tok.kind != HLO_TOK_IDENT && P->tok.kind != HLO_TOK_NAME)
        return false;
    if (sl_str_eq_cstr(t, "func.func") || (t.len > 5 && !memcmp(t.ptr, "func.", 5)))
        return true;
    if (!sl_str_eq_cstr(t, "module"))
        return false;
    const char *q = t.ptr + t.len, *end = P->lx.end;
    while (q < end && (*q == ' ' || *q == '\t'))
        q++;
    static const char attrs[] = "attributes";
    return (q < end && *q == '@') ||
           ((size_t)(end - q) >= sizeof(attrs) - 1 && !memcmp(q, attrs, sizeof(attrs) - 1));
}

/* The header's frontend_attributes, read by the grammar of an instruction's with every value
 * a string or {...}, as XLA writes them (the Shardy import edits its xla.sdy.meshes entry, so
 * the text must be well-formed entries), and kept as written. A key may appear once: the import would read one mesh table and print another. */
static SlStatus
parse_header_frontend(HloParser *P, SlSym key)
{
    if (!hlo_lex_skip_space(&P->lx))
        return hlo_fail_here(P, SL_ERR_PARSE, "unterminated /* comment");
    SlSrcLoc at = hlo_lex_here(&P->lx);
    const char *open = P->lx.p, *close = NULL;
    IrAttr a = {0};
    SlStatus st = hlo_parse_frontend(P, &a, true, &close);
    if (st != SL_OK)
        return st;
    for (uint32_t i = 0; i < a.u.frontend.n; i++)
        for (uint32_t j = 0; j < i; j++)
            if (a.u.frontend.v[i].key == a.u.frontend.v[j].key)
                return sl_fail(P->err, SL_ERR_INVALID, at,
                               "module attribute frontend_attributes has key '%s' twice",
                               sl_sym_cstr(a.u.frontend.v[i].key));
    SlStr value = {open, (size_t)(close - open)};
    if (ir_module_set_header(P->m, sl_sym_cstr(key), value) != SL_OK)
        return nomem(P);
    const IrHeaderAttr *h = ir_module_find_header(P->m, "frontend_attributes");
    SdyValueLoc l = {h->value.ptr, at.line, at.col}; /* meshes are read from here */
    return SL_VEC_PUSH(&P->sdy_locs, SdyValueLoc, l) ? SL_OK : nomem(P);
}

static SlStatus
parse_header(HloParser *P)
{
    if (is_mlir_start(P))
        return hlo_fail_tok(
            P, SL_ERR_PARSE, &P->tok,
            "this is MLIR text (StableHLO or MHLO), not HLO text: shardlens reads HLO text. "
            "From JAX, export it with jax.jit(f).lower(*args).as_text(dialect=\"hlo\") (or "
            "lower(*args).compiler_ir('hlo').as_hlo_text()); from PyTorch/XLA, with "
            "torch_xla._XLAC._get_xla_tensors_hlo([outputs]); or take XLA's own dump "
            "(XLA_FLAGS=--xla_dump_to=DIR, the .txt files)");
    if (!tok_is(&P->tok, HLO_TOK_IDENT, "HloModule")) {
        if (!tok_is(&P->tok, HLO_TOK_IDENT, "ENTRY") && P->tok.kind != HLO_TOK_NAME &&
            P->tok.kind != HLO_TOK_IDENT)
            return hlo_expected(P, "'HloModule' or a computation");
        P->m->name = sl_intern_cstr(P->names, "module");
        return P->m->name ? SL_OK : nomem(P);
    }
    hlo_advance(P);
    if (P->tok.kind != HLO_TOK_IDENT && P->tok.kind != HLO_TOK_NAME)
        return hlo_expected(P, "a module name");
    if (!(P->m->name = hlo_intern(P, P->tok.text)))
        return nomem(P);
    hlo_advance(P);
    while (P->tok.kind == HLO_TOK_COMMA) {
        hlo_advance(P);
        if (P->tok.kind != HLO_TOK_ATTR)
            return hlo_expected(P, "a module attribute 'name='");
        if (sl_str_eq_cstr(P->tok.text, "origin_recovery_table")) {
            SlStatus st = parse_recovery_table(P);
            if (st != SL_OK)
                return st;
            continue;
        }
        SlSym key = hlo_intern(P, P->tok.text);
        SlStr value;
        const char *why = NULL;
        if (!key)
            return nomem(P);
        if (sl_str_eq_cstr(P->tok.text, "frontend_attributes")) {
            SlStatus st = parse_header_frontend(P, key);
            if (st != SL_OK)
                return st;
            continue;
        }
        SlSrcLoc at = hlo_lex_here(&P->lx);
        HloLexer before = P->lx;
        if (!hlo_lex_scan_value(&P->lx, &value, &why))
            return hlo_fail_here(P, SL_ERR_PARSE, "bad value for module attribute '%s': %s",
                                 sl_sym_cstr(key), why);
        /* A braced or quoted value ends at its closer: `{a}es={b}` is not one value (it would
         * be kept whole, and print back differently once the Shardy import edits it). */
        if (value.ptr[0] == '{' || value.ptr[0] == '"' || value.ptr[0] == '\'') {
            bool closed = value.ptr[0] == '{' ? hlo_lex_scan_balanced(&before, &why)
                                              : hlo_lex_scan_string(&before, &why);
            if (closed && before.p != value.ptr + value.len) {
                P->lx = before;
                return hlo_fail_here(P, SL_ERR_PARSE,
                                     "unexpected text after the value of module attribute '%s'"
                                     " (a ',' must separate attributes)",
                                     sl_sym_cstr(key));
            }
        }
        if ((sl_str_eq_cstr(P->tok.text, "num_partitions") ||
             sl_str_eq_cstr(P->tok.text, "replica_count")) &&
            !is_device_count(value))
            return sl_fail(P->err, SL_ERR_INVALID, at, "%s=%.*s is not a device count in 1..%d",
                           sl_sym_cstr(key), SL_STR_ARG(value), IR_MAX_DEVICES);
        if (ir_module_set_header(P->m, sl_sym_cstr(key), value) != SL_OK)
            return nomem(P);
        hlo_advance(P);
    }
    return SL_OK;
}

static bool
is_debug_block(const HloTok *t)
{
    return t->kind == HLO_TOK_IDENT &&
           (sl_str_eq_cstr(t->text, "FileNames") || sl_str_eq_cstr(t->text, "FunctionNames") ||
            sl_str_eq_cstr(t->text, "FileLocations") || sl_str_eq_cstr(t->text, "StackFrames"));
}

/* debug := (BLOCK_NAME (INT (STRING | '{' ... '}'))*)*   skipped: stack-frame tables */
static SlStatus
skip_debug_blocks(HloParser *P)
{
    while (is_debug_block(&P->tok)) {
        hlo_advance(P);
        while (P->tok.kind == HLO_TOK_INT) {
            hlo_advance(P);
            if (P->tok.kind == HLO_TOK_STRING) {
                hlo_advance(P);
            } else if (P->tok.kind == HLO_TOK_LBRACE) {
                const char *why = NULL;
                P->lx.p = P->tok.text.ptr;
                if (!hlo_lex_scan_balanced(&P->lx, &why))
                    return hlo_fail_here(P, SL_ERR_PARSE, "bad debug entry: %s", why);
                hlo_advance(P);
            } else {
                return hlo_expected(P, "a string or '{' in a debug table");
            }
        }
    }
    return SL_OK;
}

/* module := header debug? (computation debug?)+ EOF */
static SlStatus
parse_module(HloParser *P)
{
    SlStatus st;
    hlo_advance(P);
    if ((st = parse_header(P)) != SL_OK || (st = skip_debug_blocks(P)) != SL_OK)
        return st;
    const HloTok *first_entry = NULL;
    HloTok entry_tok;
    do {
        if ((st = parse_computation(P, &first_entry, &entry_tok)) != SL_OK ||
            (st = skip_debug_blocks(P)) != SL_OK)
            return st;
    } while (P->tok.kind != HLO_TOK_EOF);
    if ((st = hlo_resolve_fixups(P)) != SL_OK)
        return st;
    if (!P->m->entry) {
        IrComputation *last = P->m->comps[P->m->n_comps - 1];
        last->is_entry = true;
        P->m->entry = last;
    }
    if (sl_arena_failed(P->arena))
        return nomem(P);
    /* Shardy's round-trip shardings become the module's shardings before anything reads it */
    if (P->nest == 0 && (st = sdy_import(P->m, P->sdy_locs.data, (uint32_t)P->sdy_locs.len,
                                         P->lx.path, P->err)) != SL_OK)
        return st;
    return SL_OK;
}

static SlStatus
parse_text(SlArena *arena, SlInterner *names, SlStr text, SlFileText *src, const char *path,
           uint32_t nest, IrModule **out, SlError *err)
{
    *out = NULL;
    HloParser P;
    memset(&P, 0, sizeof(P));
    P.nest = nest;
    hlo_lex_init(&P.lx, text, path);
    P.src = src;
    P.release_at = text.ptr + RELEASE_EVERY_BYTES;
    P.arena = arena;
    P.names = names;
    P.err = err;
    P.sharding_ids_left = SHD_MAX_TOTAL_IDS;
    P.m = ir_module_new(arena, names, NULL);
    /* Size the name tables for the input up front (about one instruction per 256 bytes of
     * text in real dumps), instead of rehashing them through every doubling. */
    size_t guess = text.len / 256;
    SlStatus st;
    if (P.m)
        ir_module_defer_names(P.m); /* most runs never ask the input module for a new name */
    if (P.m &&
        (!sl_interner_reserve(names, names->count + guess) || !sl_map_reserve(&P.instrs, guess))) {
        ir_module_fini(P.m);
        P.m = NULL;
    }
    if (!P.m) {
        SlSrcLoc loc = {path, 0, 0};
        st = sl_fail(err, SL_ERR_NOMEM, loc, "out of memory");
    } else {
        st = parse_module(&P);
    }
    sl_map_fini(&P.instrs);
    sl_map_fini(&P.comps);
    sl_map_fini(&P.shardings);
    sl_vec_fini(&P.operands);
    sl_vec_fini(&P.attrs);
    sl_vec_fini(&P.shapes);
    sl_vec_fini(&P.ints);
    sl_vec_fini(&P.sizes);
    sl_vec_fini(&P.fixups);
    sl_vec_fini(&P.sdy_locs);
    if (st != SL_OK) {
        ir_module_fini(P.m);
        return st;
    }
    *out = P.m;
    return SL_OK;
}

SlStatus
hlo_parse(SlArena *arena, SlInterner *names, SlStr text, const char *path, IrModule **out,
          SlError *err)
{
    return parse_text(arena, names, text, NULL, path, 0, out, err);
}

SlStatus
hlo_parse_file(SlArena *arena, SlInterner *names, SlFileText *src, const char *path, IrModule **out,
               SlError *err)
{
    return parse_text(arena, names, src->text, src, path, 0, out, err);
}
