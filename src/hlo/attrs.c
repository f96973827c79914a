/* attrs.c - attribute values (hlo-text.md §8-§11): decodes every key in ir_attrs.def into its
 * typed IrAttr value and keeps any other `name=value` verbatim. Owns: the value grammars below
 * and computation-reference fixups. Does not own: sharding text (shd_parse), instruction
 * structure (parser.c). Invariant: each value parser starts with the cursor just past '=' and
 * ends with P->tok on the token after the value. */
#include <string.h>

#include "hlo/hlo_int.h"
#include "hlo/sdy.h"
#include "sharding/shd.h"

static SlStatus
nomem(HloParser *P)
{
    return hlo_fail_tok(P, SL_ERR_NOMEM, &P->tok, "out of memory");
}

static SlStatus
raw_fail(HloParser *P, const char *what, const char *why)
{
    return hlo_fail_here(P, SL_ERR_PARSE, "bad %s: %s", what, why);
}

/* Skips whitespace before a raw value; false (after reporting) on a bad comment. */
static SlStatus
raw_start(HloParser *P)
{
    if (!hlo_lex_skip_space(&P->lx))
        return hlo_fail_here(P, SL_ERR_PARSE, "unterminated /* comment");
    return SL_OK;
}

static char
cur_char(const HloParser *P)
{
    return P->lx.p < P->lx.end ? *P->lx.p : '\0';
}

/* Copies the int scratch vector (from `base`) into the arena, or shares a recent identical
 * list (values are never written after parsing; dimension lists repeat a lot). */
static SlStatus
take_ints(HloParser *P, size_t base, uint32_t *n, int64_t **v)
{
    *n = (uint32_t)(P->ints.len - base);
    *v = NULL;
    const int64_t *src = *n ? &SL_VEC_AT(&P->ints, int64_t, base) : NULL; /* data may be NULL */
    for (uint32_t k = 0; *n && k < HLO_RECENT && !*v; k++)
        if (P->recent_n_ints[k] == *n && memcmp(P->recent_ints[k], src, *n * sizeof(*src)) == 0)
            *v = (int64_t *)P->recent_ints[k];
    if (*n && !*v) {
        if (!(*v = SL_DUP_ARRAY(P->arena, int64_t, src, *n)))
            return nomem(P);
        uint32_t slot = P->next_ints++ % HLO_RECENT;
        P->recent_ints[slot] = *v;
        P->recent_n_ints[slot] = *n;
    }
    P->ints.len = base;
    return SL_OK;
}

/* ints := '{' (INT (',' INT)*)? '}'   (the '{' is the current token; appends to P->ints) */
static SlStatus
read_int_list(HloParser *P)
{
    SlStatus st;
    if ((st = hlo_expect(P, HLO_TOK_LBRACE, "'{'")) != SL_OK)
        return st;
    if (P->tok.kind == HLO_TOK_RBRACE) {
        hlo_advance(P);
        return SL_OK;
    }
    for (;;) {
        if (P->tok.kind != HLO_TOK_INT)
            return hlo_expected(P, "an integer");
        if (!SL_VEC_PUSH(&P->ints, int64_t, P->tok.ival))
            return nomem(P);
        hlo_advance(P);
        if (P->tok.kind == HLO_TOK_RBRACE) {
            hlo_advance(P);
            return SL_OK;
        }
        if ((st = hlo_expect(P, HLO_TOK_COMMA, "',' or '}'")) != SL_OK)
            return st;
    }
}

/* lists := '{' (ints (',' ints)*)? '}' */
static SlStatus
read_int_lists(HloParser *P, uint32_t *n, uint32_t **sizes, int64_t **v)
{
    SlStatus st;
    size_t base = P->ints.len, sbase = P->sizes.len;
    if ((st = hlo_expect(P, HLO_TOK_LBRACE, "'{'")) != SL_OK)
        return st;
    while (P->tok.kind != HLO_TOK_RBRACE) {
        if (P->sizes.len > sbase && (st = hlo_expect(P, HLO_TOK_COMMA, "',' or '}'")) != SL_OK)
            return st;
        size_t before = P->ints.len;
        if (P->tok.kind != HLO_TOK_LBRACE)
            return hlo_expected(P, "'{' to open a group");
        if ((st = read_int_list(P)) != SL_OK)
            return st;
        if (!SL_VEC_PUSH(&P->sizes, uint32_t, (uint32_t)(P->ints.len - before)))
            return nomem(P);
    }
    hlo_advance(P);
    *n = (uint32_t)(P->sizes.len - sbase);
    *sizes = NULL;
    if (*n && !(*sizes = SL_DUP_ARRAY(P->arena, uint32_t, &SL_VEC_AT(&P->sizes, uint32_t, sbase),
                                      *n)))
        return nomem(P);
    P->sizes.len = sbase;
    uint32_t total;
    return take_ints(P, base, &total, v);
}

/* '[' INT (',' INT)* ']' or '(' ... ')' (the opener is the current token), appended to
 * P->ints; values below `min` are rejected. */
static SlStatus
read_bracketed_ints(HloParser *P, HloTokKind close, int64_t min, const char *what)
{
    SlStatus st;
    size_t base = P->ints.len;
    hlo_advance(P);
    while (P->tok.kind != close) {
        if (P->ints.len > base &&
            (st = hlo_expect(P, HLO_TOK_COMMA, close == HLO_TOK_RSQUARE ? "',' or ']'"
                                                                     : "',' or ')'")) != SL_OK)
            return st;
        if (P->tok.kind != HLO_TOK_INT || P->tok.ival < min)
            return hlo_expected(P, what);
        if (!SL_VEC_PUSH(&P->ints, int64_t, P->tok.ival))
            return nomem(P);
        hlo_advance(P);
    }
    hlo_advance(P);
    return SL_OK;
}

/* What ir_iota_expand() relies on: sizes agree, at most 64 reshape dims, a permutation. */
static SlStatus
check_iota(HloParser *P, const HloTok *at, const IrIota *io)
{
    if (io->n_dims == 0 || io->n_reshape == 0 || io->n_reshape > 64)
        return hlo_fail_tok(P, SL_ERR_INVALID, at,
                            "iota needs 1..64 reshape dims and at least one dim");
    int64_t total = 1, rtotal = 1;
    for (uint32_t k = 0; k < io->n_dims; k++) {
        if (io->dims[k] > 0 && total > INT64_MAX / io->dims[k])
            return hlo_fail_tok(P, SL_ERR_INVALID, at, "iota size overflows");
        total *= io->dims[k];
    }
    for (uint32_t k = 0; k < io->n_reshape; k++) {
        if (rtotal > INT64_MAX / io->reshape[k])
            return hlo_fail_tok(P, SL_ERR_INVALID, at, "iota size overflows");
        rtotal *= io->reshape[k];
    }
    if (total != rtotal)
        return hlo_fail_tok(P, SL_ERR_INVALID, at,
                            "iota dims hold %lld ids but the reshape holds %lld",
                            (long long)total, (long long)rtotal);
    if (total > IR_MAX_DEVICES) /* before ir_iota_expand() allocates that many */
        return hlo_fail_tok(P, SL_ERR_INVALID, at, "iota of %lld ids is more than %d devices "
                            "(the limit)", (long long)total, IR_MAX_DEVICES);
    uint64_t seen = 0;
    for (uint32_t k = 0; io->perm && k < io->n_reshape; k++) {
        int64_t d = io->perm[k];
        if (d < 0 || d >= (int64_t)io->n_reshape || (seen >> d) & 1u)
            return hlo_fail_tok(P, SL_ERR_INVALID, at, "transpose is not a permutation of 0..%u",
                                io->n_reshape - 1);
        seen |= (uint64_t)1 << d;
    }
    return SL_OK;
}

/* iota := '[' INT (',' INT)* ']' '<=' '[' INT (',' INT)* ']' ('T' '(' INT (',' INT)* ')')? */
static SlStatus
read_iota(HloParser *P, IrIota *io)
{
    SlStatus st;
    HloTok start = P->tok;
    size_t base = P->ints.len;
    if ((st = read_bracketed_ints(P, HLO_TOK_RSQUARE, 0, "a dimension size")) != SL_OK ||
        (st = take_ints(P, base, &io->n_dims, &io->dims)) != SL_OK ||
        (st = hlo_expect(P, HLO_TOK_LEQ, "'<='")) != SL_OK)
        return st;
    if (P->tok.kind != HLO_TOK_LSQUARE)
        return hlo_expected(P, "'['");
    if ((st = read_bracketed_ints(P, HLO_TOK_RSQUARE, 1, "a positive reshape size")) != SL_OK ||
        (st = take_ints(P, base, &io->n_reshape, &io->reshape)) != SL_OK)
        return st;
    io->perm = NULL;
    if (P->tok.kind == HLO_TOK_IDENT && sl_str_eq_cstr(P->tok.text, "T")) {
        hlo_advance(P);
        if (P->tok.kind != HLO_TOK_LPAREN)
            return hlo_expected(P, "'(' after 'T'");
        uint32_t n_perm;
        if ((st = read_bracketed_ints(P, HLO_TOK_RPAREN, 0, "a dimension index")) != SL_OK ||
            (st = take_ints(P, base, &n_perm, &io->perm)) != SL_OK)
            return st;
        if (n_perm != io->n_reshape)
            return hlo_fail_tok(P, SL_ERR_INVALID, &start,
                                "transpose has %u entries for %u reshape dims", n_perm,
                                io->n_reshape);
    }
    return check_iota(P, &start, io);
}

/* replica_groups := '{' ('{' ints '}' (',' ...)*)? '}' | iota | mesh[...] (mesh_groups.c) */
static SlStatus
parse_replica_groups(HloParser *P, const IrReplicaGroups **out)
{
    hlo_advance(P);
    IrReplicaGroups *g = SL_NEW(P->arena, IrReplicaGroups);
    if (!g)
        return nomem(P);
    *out = g;
    if (P->tok.kind == HLO_TOK_LSQUARE) {
        g->is_iota = true;
        SlStatus st = read_iota(P, &g->iota);
        if (st == SL_OK && g->iota.n_dims != 2)
            return hlo_fail_tok(P, SL_ERR_INVALID, &P->tok,
                                "iota replica groups need exactly 2 dims [groups,size]");
        return st;
    }
    if (P->tok.kind == HLO_TOK_IDENT && sl_str_eq_cstr(P->tok.text, "mesh"))
        return hlo_parse_mesh_groups(P, g);
    if (P->tok.kind != HLO_TOK_LBRACE)
        return hlo_expected(P, "'{' or '[' for replica groups");
    return read_int_lists(P, &g->n_groups, &g->group_sizes, &g->ids);
}

static SlStatus
add_fixup(HloParser *P, IrInstr *ins, uint32_t elem, SlSym name)
{
    HloCompFixup f = {ins, (uint32_t)P->attrs.len, elem, name, P->tok.line, P->tok.col};
    return SL_VEC_PUSH(&P->fixups, HloCompFixup, f) ? SL_OK : nomem(P);
}

/* Reads one computation name; resolves it now when already read, else records a fixup for
 * the attribute being parsed (the next slot of P->attrs). */
static SlStatus
read_comp_ref(HloParser *P, IrInstr *ins, uint32_t elem, IrComputation **out)
{
    if (P->tok.kind != HLO_TOK_NAME && P->tok.kind != HLO_TOK_IDENT)
        return hlo_expected(P, "a computation name");
    SlSym s = hlo_intern(P, P->tok.text);
    if (!s)
        return nomem(P);
    uint64_t v;
    *out = NULL;
    if (sl_map_get(&P->comps, SL_MAP_KEY(s), &v))
        *out = (IrComputation *)(uintptr_t)v;
    else if (add_fixup(P, ins, elem, s) != SL_OK)
        return SL_ERR_NOMEM;
    hlo_advance(P);
    return SL_OK;
}

/* comps := '{' (NAME (',' NAME)*)? '}' | NAME */
static SlStatus
parse_comps(HloParser *P, IrInstr *ins, IrAttr *a)
{
    SlStatus st;
    hlo_advance(P);
    IrComputation *buf[16], **list = buf;
    uint32_t n = 0, cap = SL_COUNTOF(buf);
    if (P->tok.kind != HLO_TOK_LBRACE) {
        if (!(a->u.comps.v = SL_NEW_ARRAY(P->arena, IrComputation *, 1)))
            return nomem(P);
        a->u.comps.n = 1;
        return read_comp_ref(P, ins, 0, &a->u.comps.v[0]);
    }
    hlo_advance(P);
    while (P->tok.kind != HLO_TOK_RBRACE) {
        if (n > 0 && (st = hlo_expect(P, HLO_TOK_COMMA, "',' or '}'")) != SL_OK)
            return st;
        if (n == cap) { /* grow in the arena; the old block is abandoned */
            IrComputation **bigger = SL_NEW_ARRAY(P->arena, IrComputation *, cap * 2);
            if (!bigger)
                return nomem(P);
            memcpy(bigger, list, cap * sizeof(*list));
            list = bigger;
            cap *= 2;
        }
        if ((st = read_comp_ref(P, ins, n, &list[n])) != SL_OK)
            return st;
        n++;
    }
    hlo_advance(P);
    a->u.comps.n = n;
    if (n && !(a->u.comps.v = SL_DUP_ARRAY(P->arena, IrComputation *, list, n)))
        return nomem(P);
    return SL_OK;
}

SlStatus
hlo_resolve_fixups(HloParser *P)
{
    for (size_t k = 0; k < P->fixups.len; k++) {
        HloCompFixup *f = &SL_VEC_AT(&P->fixups, HloCompFixup, k);
        uint64_t v;
        if (!sl_map_get(&P->comps, SL_MAP_KEY(f->name), &v)) {
            SlSrcLoc loc = {P->lx.path, f->line, f->col};
            return sl_fail(P->err, SL_ERR_INVALID, loc, "undefined computation '%s'",
                           sl_sym_cstr(f->name));
        }
        IrAttr *a = &f->instr->attrs[f->attr];
        if (ir_attr_kind(a->key) == IR_AK_COMP)
            a->u.comp = (IrComputation *)(uintptr_t)v;
        else
            a->u.comps.v[f->elem] = (IrComputation *)(uintptr_t)v;
    }
    return SL_OK;
}

/* slice := '{' ('[' INT ':' INT (':' INT)? ']' (',' ...)*)? '}' */
static SlStatus
parse_slice(HloParser *P, IrAttr *a)
{
    SlStatus st;
    hlo_advance(P);
    size_t base = P->ints.len;
    if ((st = hlo_expect(P, HLO_TOK_LBRACE, "'{' to open the slice")) != SL_OK)
        return st;
    while (P->tok.kind != HLO_TOK_RBRACE) {
        if (P->ints.len > base && (st = hlo_expect(P, HLO_TOK_COMMA, "',' or '}'")) != SL_OK)
            return st;
        if ((st = hlo_expect(P, HLO_TOK_LSQUARE, "'[' to open a slice range")) != SL_OK)
            return st;
        int64_t v[3] = {0, 0, 1};
        for (int k = 0; k < 3; k++) {
            if (k > 0) {
                if (k == 2 && P->tok.kind == HLO_TOK_RSQUARE)
                    break;
                if ((st = hlo_expect(P, HLO_TOK_COLON, k == 1 ? "':'" : "':' or ']'")) != SL_OK)
                    return st;
            }
            if (P->tok.kind != HLO_TOK_INT)
                return hlo_expected(P, "an integer");
            v[k] = P->tok.ival;
            hlo_advance(P);
        }
        if ((st = hlo_expect(P, HLO_TOK_RSQUARE, "']'")) != SL_OK)
            return st;
        for (int k = 0; k < 3; k++)
            if (!SL_VEC_PUSH(&P->ints, int64_t, v[k]))
                return nomem(P);
    }
    hlo_advance(P);
    uint32_t n = (uint32_t)((P->ints.len - base) / 3);
    a->u.slice.n = n;
    if (n && !(a->u.slice.v = SL_NEW_ARRAY(P->arena, IrSliceDim, n)))
        return nomem(P);
    for (uint32_t k = 0; k < n; k++) {
        const int64_t *v = &SL_VEC_AT(&P->ints, int64_t, base + 3 * (size_t)k);
        a->u.slice.v[k] = (IrSliceDim){v[0], v[1], v[2]};
    }
    P->ints.len = base;
    return SL_OK;
}

/* Raw integer at the cursor: '-'? [0-9]+ */
static bool
raw_int(HloParser *P, int64_t *out)
{
    const char *p = P->lx.p, *end = P->lx.end;
    bool neg = p < end && *p == '-';
    if (neg)
        p++;
    const char *digits = p;
    uint64_t v = 0;
    while (p < end && *p >= '0' && *p <= '9') {
        if (v > (uint64_t)INT64_MAX / 10)
            return false;
        v = v * 10 + (uint64_t)(*p - '0');
        p++;
    }
    if (p == digits || v > (uint64_t)INT64_MAX)
        return false;
    *out = neg ? -(int64_t)v : (int64_t)v;
    P->lx.p = p;
    return true;
}

/* dxd := INT ('x' INT)*   written into vals (at most HLO_MAX_RANK) */
static SlStatus
raw_dxd(HloParser *P, const char *what, int64_t *vals, uint32_t *n)
{
    *n = 0;
    for (;;) {
        if (*n == HLO_MAX_RANK)
            return hlo_fail_here(P, SL_ERR_UNSUPPORTED, "%s has more than %d dims", what,
                                 HLO_MAX_RANK);
        if (!raw_int(P, &vals[*n]))
            return hlo_fail_here(P, SL_ERR_PARSE, "expected an integer in %s", what);
        (*n)++;
        if (cur_char(P) != 'x')
            return SL_OK;
        P->lx.p++;
    }
}

/* pads := pad ('x' pad)*   pad := INT '_' INT ('_' INT)?   (interior only when allowed) */
static SlStatus
raw_pads(HloParser *P, const char *what, bool allow_interior, IrPadDim *pads, uint32_t *n)
{
    *n = 0;
    for (;;) {
        if (*n == HLO_MAX_RANK)
            return hlo_fail_here(P, SL_ERR_UNSUPPORTED, "%s has more than %d dims", what,
                                 HLO_MAX_RANK);
        IrPadDim *d = &pads[(*n)++];
        d->interior = 0;
        if (!raw_int(P, &d->lo))
            return hlo_fail_here(P, SL_ERR_PARSE, "expected low padding in %s", what);
        if (cur_char(P) != '_')
            return hlo_fail_here(P, SL_ERR_PARSE, "expected '_' in %s", what);
        P->lx.p++;
        if (!raw_int(P, &d->hi))
            return hlo_fail_here(P, SL_ERR_PARSE, "expected high padding in %s", what);
        if (allow_interior && cur_char(P) == '_') {
            P->lx.p++;
            if (!raw_int(P, &d->interior) || d->interior < 0)
                return hlo_fail_here(P, SL_ERR_PARSE, "expected interior padding in %s",
                                     what);
        }
        if (cur_char(P) != 'x')
            return SL_OK;
        P->lx.p++;
    }
}

/* padding := pads (with interior) */
static SlStatus
parse_padding(HloParser *P, IrAttr *a)
{
    IrPadDim pads[HLO_MAX_RANK];
    uint32_t n;
    SlStatus st;
    if ((st = raw_start(P)) != SL_OK || (st = raw_pads(P, "padding", true, pads, &n)) != SL_OK)
        return st;
    a->u.pad.n = n;
    if (!(a->u.pad.v = SL_DUP_ARRAY(P->arena, IrPadDim, pads, n)))
        return nomem(P);
    hlo_advance(P);
    return SL_OK;
}

/* Sets one window field in every dim; the first field fixes the window rank. */
static SlStatus
window_field(HloParser *P, const HloTok *key, IrWindowDim *w, uint32_t *rank)
{
    int64_t vals[HLO_MAX_RANK];
    IrPadDim pads[HLO_MAX_RANK];
    uint32_t n;
    SlStatus st;
    bool is_pad = sl_str_eq_cstr(key->text, "pad");
    if (is_pad)
        st = raw_pads(P, "window pad", false, pads, &n);
    else
        st = raw_dxd(P, "window", vals, &n);
    if (st != SL_OK)
        return st;
    if (*rank == 0) {
        *rank = n;
        for (uint32_t k = 0; k < n; k++)
            w[k] = (IrWindowDim){.size = 1, .stride = 1, .lhs_dilate = 1, .rhs_dilate = 1};
    } else if (n != *rank) {
        return hlo_fail_tok(P, SL_ERR_INVALID, key, "window field '%.*s' has %u dims, not %u",
                            SL_STR_ARG(key->text), n, *rank);
    }
    /* XLA's window arithmetic wants size, stride and dilations positive (a 0 dilation made
     * the checker and the partitioner disagree on a convolution's shape). */
    bool positive = sl_str_eq_cstr(key->text, "size") || sl_str_eq_cstr(key->text, "stride") ||
                    sl_str_eq_cstr(key->text, "lhs_dilate") ||
                    sl_str_eq_cstr(key->text, "rhs_dilate");
    for (uint32_t k = 0; k < n && positive; k++)
        if (vals[k] < 1)
            return hlo_fail_tok(P, SL_ERR_INVALID, key,
                                "window field '%.*s' must be positive, got %lld in dim %u",
                                SL_STR_ARG(key->text), (long long)vals[k], k);
    for (uint32_t k = 0; k < n; k++) {
        if (is_pad) {
            w[k].pad_lo = pads[k].lo;
            w[k].pad_hi = pads[k].hi;
        } else if (sl_str_eq_cstr(key->text, "size")) {
            w[k].size = vals[k];
        } else if (sl_str_eq_cstr(key->text, "stride")) {
            w[k].stride = vals[k];
        } else if (sl_str_eq_cstr(key->text, "lhs_dilate")) {
            w[k].lhs_dilate = vals[k];
        } else if (sl_str_eq_cstr(key->text, "rhs_dilate")) {
            w[k].rhs_dilate = vals[k];
        } else if (sl_str_eq_cstr(key->text, "rhs_reversal")) {
            w[k].reversal = vals[k] != 0;
        } else {
            return hlo_fail_tok(P, SL_ERR_PARSE, key, "unknown window field '%.*s'",
                                SL_STR_ARG(key->text));
        }
    }
    return SL_OK;
}

/* window := '{' (FIELD '=' (dxd | pads))* '}'   fields separated by whitespace */
static SlStatus
parse_window(HloParser *P, IrAttr *a)
{
    SlStatus st;
    IrWindowDim w[HLO_MAX_RANK];
    uint32_t rank = 0;
    hlo_advance(P);
    if ((st = hlo_expect(P, HLO_TOK_LBRACE, "'{' to open the window")) != SL_OK)
        return st;
    while (P->tok.kind == HLO_TOK_ATTR) {
        HloTok key = P->tok;
        if ((st = window_field(P, &key, w, &rank)) != SL_OK)
            return st;
        hlo_advance(P);
    }
    if ((st = hlo_expect(P, HLO_TOK_RBRACE, "a window field or '}'")) != SL_OK)
        return st;
    a->u.window.n = rank;
    if (rank && !(a->u.window.v = SL_DUP_ARRAY(P->arena, IrWindowDim, w, rank)))
        return nomem(P);
    return SL_OK;
}

/* dim_labels := [0-9a-z?]+ '_' [0-9a-z?]+ '->' [0-9a-z?]+   kept verbatim */
static SlStatus
parse_dim_labels(HloParser *P, IrAttr *a)
{
    SlStatus st;
    if ((st = raw_start(P)) != SL_OK)
        return st;
    const char *s = P->lx.p, *p = s, *end = P->lx.end;
    bool arrow = false;
    while (p < end) {
        char c = *p;
        if (c == '-' && p + 1 < end && p[1] == '>') {
            arrow = true;
            p += 2;
            continue;
        }
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              c == '_' || c == '?'))
            break;
        p++;
    }
    if (!arrow)
        return hlo_fail_here(P, SL_ERR_PARSE, "expected dim labels like 'b01f_01io->b01f'");
    P->lx.p = p;
    SlStr text = {s, (size_t)(p - s)};
    if (!(a->u.text = hlo_dup(P, text)).ptr)
        return nomem(P);
    hlo_advance(P);
    return SL_OK;
}

/* Raw balanced "{...}" at the cursor, left in the source buffer. */
static SlStatus
raw_braced(HloParser *P, const char *what, SlStr *out, SlSrcLoc *loc)
{
    SlStatus st;
    if ((st = raw_start(P)) != SL_OK)
        return st;
    *loc = hlo_lex_here(&P->lx);
    if (cur_char(P) != '{')
        return hlo_fail_here(P, SL_ERR_PARSE, "expected '{' to open the %s", what);
    const char *s = P->lx.p, *why = NULL;
    if (!hlo_lex_scan_balanced(&P->lx, &why))
        return raw_fail(P, what, why);
    out->ptr = s;
    out->len = (size_t)(P->lx.p - s);
    return SL_OK;
}

static SlStatus
parse_sharding(HloParser *P, IrAttr *a)
{
    SlStr text;
    SlSrcLoc loc;
    SlStatus st;
    if ((st = raw_start(P)) != SL_OK)
        return st;
    /* Most instructions repeat one of a few recent shardings. A recent text (balanced, one
     * line) that the input starts with is exactly what the bracket scan would read. */
    size_t left = (size_t)(P->lx.end - P->lx.p);
    for (uint32_t j = 0; j < HLO_RECENT; j++) {
        uint32_t k = (P->hit_shd + j) % HLO_RECENT;
        SlSym t = P->recent_shd_text[k];
        if (t && t->len <= left && memcmp(t->text, P->lx.p, t->len) == 0) {
            P->hit_shd = k;
            P->lx.p += t->len;
            a->u.sharding = P->recent_shd[k];
            hlo_advance(P);
            return SL_OK;
        }
    }
    if ((st = raw_braced(P, "sharding", &text, &loc)) != SL_OK)
        return st;
    /* Interning gives the text a lifetime (the sharding may keep slices of it) and a key:
     * identical text parses to the same immutable value, so it is parsed once. */
    SlSym key = hlo_intern(P, text);
    if (!key)
        return nomem(P);
    uint64_t cached = 0;
    const ShdSharding *s = NULL;
    if (sl_map_get(&P->shardings, SL_MAP_KEY(key), &cached)) {
        s = (const ShdSharding *)(uintptr_t)cached;
    } else {
        if ((st = shd_parse_bounded(P->arena, sl_sym_str(key), loc, &P->sharding_ids_left, &s,
                                    P->err)) != SL_OK)
            return st;
        if (!sl_map_put(&P->shardings, SL_MAP_KEY(key), SL_MAP_KEY(s)))
            return nomem(P);
    }
    if (!memchr(text.ptr, '\n', text.len)) { /* the shortcut does not count lines */
        uint32_t slot = P->next_shd++ % HLO_RECENT;
        P->recent_shd_text[slot] = key;
        P->recent_shd[slot] = s;
    }
    a->u.sharding = s;
    hlo_advance(P);
    return SL_OK;
}

/* Decodes the fields the tools use from metadata text: `{key=value ...}` with values quoted
 * strings, integers or braced groups. Unknown or odd fields are skipped, never rejected: the
 * raw text is what gets printed. */
static void
decode_metadata(IrMetadata *md)
{
    const char *p = md->raw.ptr + 1, *end = md->raw.ptr + md->raw.len - 1;
    while (p < end) {
        while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ','))
            p++;
        const char *key = p;
        while (p < end && ((*p >= 'a' && *p <= 'z') || *p == '_' || (*p >= '0' && *p <= '9') ||
                           (*p >= 'A' && *p <= 'Z')))
            p++;
        SlStr k = {key, (size_t)(p - key)};
        if (p >= end || *p != '=')
            return;
        p++;
        const char *val = p;
        if (p < end && *p == '"') {
            p++;
            while (p < end && *p != '"')
                p += (*p == '\\' && p + 1 < end) ? 2 : 1;
            SlStr v = {val + 1, (size_t)((p < end ? p : end) - (val + 1))};
            if (sl_str_eq_cstr(k, "op_type"))
                md->op_type = v;
            else if (sl_str_eq_cstr(k, "op_name"))
                md->op_name = v;
            else if (sl_str_eq_cstr(k, "source_file"))
                md->source_file = v;
            p++;
            continue;
        }
        int depth = 0;
        while (p < end && (depth > 0 || !(*p == ' ' || *p == '\n' || *p == '\t'))) {
            depth += *p == '{' ? 1 : *p == '}' ? -1 : 0;
            p++;
        }
        if (sl_str_eq_cstr(k, "source_line")) {
            int64_t v = 0;
            const char *q = val;
            while (q < p && *q >= '0' && *q <= '9' && v < INT64_MAX / 10)
                v = v * 10 + (*q++ - '0');
            md->source_line = v;
        }
    }
}

static bool
is_key_char(char c)
{
    return (c >= 'a' && c <= 'z') || c == '_' || (c >= '0' && c <= '9') || (c >= 'A' && c <= 'Z');
}

/* Plain words: what an unquoted metadata value may hold on the fast path. */
static bool
is_plain_char(char c)
{
    return is_key_char(c) || c == '-' || c == '.' || c == '+';
}

#define KEY_IS(k, lit) ((k).len == sizeof(lit) - 1 && memcmp((k).ptr, (lit), sizeof(lit) - 1) == 0)

static void
set_md_field(IrMetadata *md, SlStr k, SlStr v)
{
    if (KEY_IS(k, "op_type"))
        md->op_type = v;
    else if (KEY_IS(k, "op_name"))
        md->op_name = v;
    else if (KEY_IS(k, "source_file"))
        md->source_file = v;
}

/* The common form of metadata, '{' (KEY '=' ("..." | PLAIN)) (' ' ...)* '}' on one line with
 * no escapes, scanned and decoded in one pass into `md` (slices of the source text) as
 * decode_metadata would decode it; false (cursor unchanged) for anything else, which the
 * general bracket scan reads. */
static bool
fast_metadata(HloParser *P, IrMetadata *md)
{
    const char *start = P->lx.p, *p = start, *end = P->lx.end;
    memset(md, 0, sizeof(*md));
    if (p >= end || *p != '{')
        return false;
    p++;
    for (;;) {
        while (p < end && (*p == ' ' || *p == ','))
            p++;
        if (p >= end)
            return false;
        if (*p == '}')
            break;
        const char *key = p;
        while (p < end && is_key_char(*p))
            p++;
        if (p == key || p >= end || *p != '=')
            return false;
        SlStr k = {key, (size_t)(p - key)};
        p++;
        if (p < end && *p == '"') {
            const char *q = memchr(p + 1, '"', (size_t)(end - p - 1));
            if (!q || memchr(p + 1, '\\', (size_t)(q - p - 1)) ||
                memchr(p + 1, '\n', (size_t)(q - p - 1)))
                return false;
            SlStr v = {p + 1, (size_t)(q - p - 1)};
            set_md_field(md, k, v);
            p = q + 1;
            if (p < end && *p != ' ' && *p != '}' && *p != ',')
                return false;
            continue;
        }
        const char *val = p;
        while (p < end && is_plain_char(*p))
            p++;
        /* not ',': decode_metadata reads an unquoted value on up to whitespace */
        if (p >= end || (*p != ' ' && *p != '}'))
            return false;
        if (KEY_IS(k, "source_line")) {
            int64_t v = 0;
            for (const char *q = val; q < p && *q >= '0' && *q <= '9' && v < INT64_MAX / 10; q++)
                v = v * 10 + (*q - '0');
            md->source_line = v;
        }
    }
    md->raw.ptr = start;
    md->raw.len = (size_t)(p + 1 - start);
    P->lx.p = p + 1;
    return true;
}

/* Re-points a decoded field from the source text into `raw`, its copy. */
static SlStr
rebase(SlStr field, const char *from, const char *to)
{
    SlStr r = {field.ptr ? to + (field.ptr - from) : field.ptr, field.len};
    return r;
}

/* metadata := '{' ... '}'   identical text shares one decoded IrMetadata (values are
 * immutable, and long programs repeat a few source locations many times) */
static SlStatus
parse_metadata(HloParser *P, IrAttr *a)
{
    SlSrcLoc loc;
    SlStr text;
    IrMetadata fast;
    SlStatus st = raw_start(P);
    if (st != SL_OK)
        return st;
    bool is_fast = fast_metadata(P, &fast);
    if (is_fast)
        text = fast.raw;
    else if ((st = raw_braced(P, "metadata", &text, &loc)) != SL_OK)
        return st;
    const IrMetadata *found = NULL;
    for (uint32_t k = 0; k < HLO_RECENT && !found; k++)
        if (P->recent_md[k] && sl_str_eq(P->recent_md[k]->raw, text))
            found = P->recent_md[k];
    if (!found) {
        IrMetadata *md = SL_NEW(P->arena, IrMetadata);
        if (!md || !(md->raw = hlo_dup(P, text)).ptr)
            return nomem(P);
        if (is_fast) {
            md->op_type = rebase(fast.op_type, text.ptr, md->raw.ptr);
            md->op_name = rebase(fast.op_name, text.ptr, md->raw.ptr);
            md->source_file = rebase(fast.source_file, text.ptr, md->raw.ptr);
            md->source_line = fast.source_line;
        } else {
            decode_metadata(md);
        }
        P->recent_md[P->next_md++ % HLO_RECENT] = md;
        found = md;
    }
    a->u.metadata = found;
    hlo_advance(P);
    return SL_OK;
}

/* A quoted string or balanced {...} at the cursor, verbatim; else any value (OTHER rules). */
static SlStatus
raw_any(HloParser *P, const char *what, bool strict, SlStr *out)
{
    SlStatus st;
    if ((st = raw_start(P)) != SL_OK)
        return st;
    const char *s = P->lx.p, *why = NULL;
    char c = cur_char(P);
    bool ok;
    if (c == '"' || c == '\'') {
        ok = hlo_lex_scan_string(&P->lx, &why);
    } else if (c == '{') {
        ok = hlo_lex_scan_balanced(&P->lx, &why);
    } else if (strict) {
        return hlo_fail_here(P, SL_ERR_PARSE, "expected a quoted string or '{' for %s", what);
    } else {
        SlStr v;
        ok = hlo_lex_scan_value(&P->lx, &v, &why);
    }
    if (!ok)
        return raw_fail(P, what, why);
    SlStr text = {s, (size_t)(P->lx.p - s)};
    if (!(*out = hlo_dup(P, text)).ptr)
        return nomem(P);
    return SL_OK;
}

/* Where an `xla.sdy.*` value starts, for sdy_import's error locations. */
static SlStatus
note_sdy_value(HloParser *P, SlSym key, SlStr value, SlSrcLoc at)
{
    SlStr k = sl_sym_str(key);
    if (k.len < 8 || memcmp(k.ptr, "xla.sdy.", 8))
        return SL_OK;
    SdyValueLoc l = {value.ptr, at.line, at.col};
    return SL_VEC_PUSH(&P->sdy_locs, SdyValueLoc, l) ? SL_OK : nomem(P);
}

/* frontend := '{' (KEY '=' (STRING | '{' ... '}'))? (',' KEY '=' ...)* '}'
 * The cursor token is the `name=` before it; *close (when not NULL) gets the end of the
 * closing '}'. `strict`: a value must be a string or braced (else, any value token). */
SlStatus
hlo_parse_frontend(HloParser *P, IrAttr *a, bool strict, const char **close)
{
    SlStatus st;
    hlo_advance(P);
    if ((st = hlo_expect(P, HLO_TOK_LBRACE, "'{' to open frontend attributes")) != SL_OK)
        return st;
    IrFrontendAttr buf[8], *list = buf;
    uint32_t n = 0, cap = SL_COUNTOF(buf);
    while (P->tok.kind != HLO_TOK_RBRACE) {
        if (n > 0 && (st = hlo_expect(P, HLO_TOK_COMMA, "',' or '}'")) != SL_OK)
            return st;
        if (P->tok.kind != HLO_TOK_ATTR)
            return hlo_expected(P, "a frontend attribute 'key='");
        if (n == cap) {
            IrFrontendAttr *bigger = SL_NEW_ARRAY(P->arena, IrFrontendAttr, cap * 2);
            if (!bigger)
                return nomem(P);
            memcpy(bigger, list, cap * sizeof(*list));
            list = bigger;
            cap *= 2;
        }
        IrFrontendAttr *f = &list[n++];
        if (!(f->key = hlo_intern(P, P->tok.text)))
            return nomem(P);
        if ((st = raw_start(P)) != SL_OK)
            return st;
        SlSrcLoc at = hlo_lex_here(&P->lx);
        if ((st = raw_any(P, "frontend attribute value", strict, &f->value)) != SL_OK)
            return st;
        if ((st = note_sdy_value(P, f->key, f->value, at)) != SL_OK)
            return st;
        hlo_advance(P);
    }
    if (close)
        *close = P->tok.text.ptr + P->tok.text.len;
    hlo_advance(P);
    a->u.frontend.n = n;
    if (n && !(a->u.frontend.v = SL_DUP_ARRAY(P->arena, IrFrontendAttr, list, n)))
        return nomem(P);
    return SL_OK;
}

static SlStatus
lookup_key(HloParser *P, SlSym *sym, IrAttrKey *key)
{
    HloWord *w = hlo_word_slot(P->attr_keys, P->tok.text);
    if (w && w->sym) {
        *sym = w->sym;
        *key = (IrAttrKey)w->val;
        return SL_OK;
    }
    if (!(*sym = hlo_intern(P, P->tok.text)))
        return nomem(P);
    *key = ir_attr_key_from_name(P->tok.text);
    if (w) {
        w->sym = *sym;
        w->val = (uint32_t)*key;
    }
    return SL_OK;
}

/* Value of a token kind: INT, BOOL, IDENT, STRING. */
static SlStatus
parse_scalar(HloParser *P, IrAttrKind kind, IrAttr *a)
{
    hlo_advance(P);
    switch (kind) {
    case IR_AK_INT:
        if (P->tok.kind != HLO_TOK_INT)
            return hlo_expected(P, "an integer");
        a->u.i = P->tok.ival;
        break;
    case IR_AK_BOOL:
        if (P->tok.kind == HLO_TOK_IDENT && sl_str_eq_cstr(P->tok.text, "true"))
            a->u.b = true;
        else if (P->tok.kind == HLO_TOK_IDENT && sl_str_eq_cstr(P->tok.text, "false"))
            a->u.b = false;
        else
            return hlo_expected(P, "'true' or 'false'");
        break;
    case IR_AK_IDENT:
        if (P->tok.kind != HLO_TOK_IDENT)
            return hlo_expected(P, "an identifier");
        if (!(a->u.text = hlo_dup(P, P->tok.text)).ptr)
            return nomem(P);
        break;
    default: /* IR_AK_STRING */
        if (P->tok.kind != HLO_TOK_STRING)
            return hlo_expected(P, "a quoted string");
        if (!(a->u.text = hlo_dup(P, P->tok.text)).ptr)
            return nomem(P);
        break;
    }
    hlo_advance(P);
    return SL_OK;
}

static SlStatus
parse_value(HloParser *P, IrInstr *ins, IrAttrKind kind, IrAttr *a)
{
    SlStatus st;
    switch (kind) {
    case IR_AK_INT:
    case IR_AK_BOOL:
    case IR_AK_IDENT:
    case IR_AK_STRING: return parse_scalar(P, kind, a);
    case IR_AK_INTS: {
        size_t base = P->ints.len;
        hlo_advance(P);
        if (P->tok.kind != HLO_TOK_LBRACE)
            return hlo_expected(P, "'{' to open an integer list");
        if ((st = read_int_list(P)) != SL_OK)
            return st;
        return take_ints(P, base, &a->u.ints.n, &a->u.ints.v);
    }
    case IR_AK_INT_LISTS:
        hlo_advance(P);
        if (P->tok.kind != HLO_TOK_LBRACE)
            return hlo_expected(P, "'{' to open a list of integer lists");
        return read_int_lists(P, &a->u.lists.n, &a->u.lists.sizes, &a->u.lists.v);
    case IR_AK_REPLICA_GROUPS: return parse_replica_groups(P, &a->u.groups);
    case IR_AK_COMP: hlo_advance(P); return read_comp_ref(P, ins, 0, &a->u.comp);
    case IR_AK_COMPS: return parse_comps(P, ins, a);
    case IR_AK_SLICE: return parse_slice(P, a);
    case IR_AK_PADDING: return parse_padding(P, a);
    case IR_AK_WINDOW: return parse_window(P, a);
    case IR_AK_DIM_LABELS: return parse_dim_labels(P, a);
    case IR_AK_SHARDING: return parse_sharding(P, a);
    case IR_AK_METADATA: return parse_metadata(P, a);
    case IR_AK_FRONTEND: return hlo_parse_frontend(P, a, false, NULL);
    case IR_AK_RAW:
        if ((st = raw_any(P, ir_attr_name(a->key), a->key != IR_ATTR_OTHER, &a->u.text)) !=
            SL_OK)
            return st;
        hlo_advance(P);
        return SL_OK;
    }
    return hlo_fail_tok(P, SL_ERR_INTERNAL, &P->tok, "attribute kind %d unhandled", (int)kind);
}

SlStatus
hlo_parse_attr(HloParser *P, IrInstr *ins)
{
    HloTok key_tok = P->tok;
    SlSym sym = NULL;
    IrAttrKey key = IR_ATTR_OTHER;
    SlStatus st;
    if ((st = lookup_key(P, &sym, &key)) != SL_OK)
        return st;
    for (size_t k = 0; k < P->attrs.len; k++) {
        const IrAttr *prev = &SL_VEC_AT(&P->attrs, IrAttr, k);
        if (prev->key == key && (key != IR_ATTR_OTHER || prev->u.other.key == sym))
            return hlo_fail_tok(P, SL_ERR_INVALID, &key_tok, "duplicate attribute '%s'",
                                sl_sym_cstr(sym));
    }
    IrAttr a;
    memset(&a, 0, sizeof(a));
    a.key = key;
    a.u.other.key = key == IR_ATTR_OTHER ? sym : NULL;
    if ((st = parse_value(P, ins, ir_attr_kind(key), &a)) != SL_OK)
        return st;
    return SL_VEC_PUSH(&P->attrs, IrAttr, a) ? SL_OK : nomem(P);
}
