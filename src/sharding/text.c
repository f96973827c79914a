/* text.c - `sharding={...}` text in and out (hlo-text.md §9). Owns: a small lexer over the
 * sharding text with line/col tracking, the V1/V2 parser, the named (V3) parser that converts
 * to the tiled form (gspmd.md A.9), and the canonical printer. Does not own: normalization
 * (shd_make_tiled in sharding.c). Invariant: print(parse(print(parse(x)))) == print(parse(x)). */
#include "sharding/shd.h"

#include <string.h>

#include "sharding/shd_int.h"

/* ---- lexer ---- */

typedef enum TokKind {
    T_EOF, T_LBRACE, T_RBRACE, T_LBRACK, T_RBRACK, T_LPAREN, T_RPAREN, T_COMMA, T_EQ, T_LE,
    T_COLON, T_QUEST, T_INT, T_IDENT, T_STRING, T_BAD,
} TokKind;

typedef struct Tok {
    TokKind kind;
    SlStr text;  /* IDENT: the name; STRING: contents without quotes */
    int64_t val; /* INT */
    SlSrcLoc loc;
} Tok;

typedef struct Lex {
    SlStr src;
    size_t pos;
    SlSrcLoc at; /* location of src[pos] */
} Lex;

typedef struct Parser {
    Lex lx;
    SlArena *a;
    SlError *err;
    int64_t *ids_left; /* device ids the caller still allows to be materialized; NULL: any */
} Parser;

static void
advance(Lex *lx, size_t n)
{
    for (size_t i = 0; i < n && lx->pos < lx->src.len; i++) {
        if (lx->src.ptr[lx->pos++] == '\n') {
            lx->at.line++;
            lx->at.col = 1;
        } else {
            lx->at.col++;
        }
    }
}

static int
cur(const Lex *lx, size_t ahead)
{
    size_t p = lx->pos + ahead;
    return p < lx->src.len ? (unsigned char)lx->src.ptr[p] : -1;
}

static void
skip_space(Lex *lx)
{
    for (;;) {
        int c = cur(lx, 0);
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            advance(lx, 1);
        } else if (c == '/' && cur(lx, 1) == '*') {
            advance(lx, 2);
            while (cur(lx, 0) != -1 && !(cur(lx, 0) == '*' && cur(lx, 1) == '/'))
                advance(lx, 1);
            advance(lx, 2);
        } else if (c == '/' && cur(lx, 1) == '/') {
            while (cur(lx, 0) != -1 && cur(lx, 0) != '\n')
                advance(lx, 1);
        } else {
            return;
        }
    }
}

static bool
is_ident_start(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool
is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static Tok
lex_next(Lex *lx)
{
    skip_space(lx);
    Tok t = {T_BAD, {lx->src.ptr + lx->pos, 0}, 0, lx->at};
    int c = cur(lx, 0);
    static const char k_single[] = "{}[](),=:?";
    static const TokKind k_single_kind[] = {T_LBRACE, T_RBRACE, T_LBRACK, T_RBRACK, T_LPAREN,
                                            T_RPAREN, T_COMMA,  T_EQ,     T_COLON,  T_QUEST};
    if (c == -1) {
        t.kind = T_EOF;
        return t;
    }
    const char *hit = c ? strchr(k_single, c) : NULL;
    if (hit) {
        t.kind = k_single_kind[hit - k_single];
        t.text.len = 1;
        advance(lx, 1);
    } else if (c == '<' && cur(lx, 1) == '=') {
        t.kind = T_LE;
        t.text.len = 2;
        advance(lx, 2);
    } else if (is_digit(c) || (c == '-' && is_digit(cur(lx, 1)))) {
        size_t n = c == '-' ? 1 : 0;
        uint64_t v = 0, max = (uint64_t)INT64_MAX + (c == '-'); /* -2^63 is an int64 */
        bool overflow = false;
        while (is_digit(cur(lx, n))) {
            overflow = overflow || v > (max - (uint64_t)(cur(lx, n) - '0')) / 10;
            v = overflow ? 0 : v * 10 + (uint64_t)(cur(lx, n) - '0');
            n++;
        }
        t.kind = overflow ? T_BAD : T_INT;
        /* two's complement: 0 - v as unsigned, then back; exact for v <= 2^63 */
        t.val = c == '-' ? (int64_t)(0 - v) : (int64_t)v;
        t.text.len = n;
        advance(lx, n);
    } else if (is_ident_start(c)) {
        size_t n = 0;
        while (is_ident_start(cur(lx, n)) || is_digit(cur(lx, n)) || cur(lx, n) == '.' ||
               cur(lx, n) == '-')
            n++;
        t.kind = T_IDENT;
        t.text.len = n;
        advance(lx, n);
    } else if (c == '\'' || c == '"') {
        size_t n = 1;
        while (cur(lx, n) != -1 && cur(lx, n) != c)
            n += cur(lx, n) == '\\' ? 2 : 1;
        if (cur(lx, n) == c) {
            t.kind = T_STRING;
            t.text.ptr++;
            t.text.len = n - 1;
            n++;
        } else {
            t.text.len = n;
        }
        advance(lx, n);
    } else {
        t.text.len = 1;
        advance(lx, 1);
    }
    return t;
}

static Tok
next(Parser *p)
{
    return lex_next(&p->lx);
}

static Tok
peek(Parser *p)
{
    Lex save = p->lx;
    return lex_next(&save);
}

static bool
is_kw(Tok t, const char *kw)
{
    return t.kind == T_IDENT && sl_str_eq_cstr(t.text, kw);
}

static SlStatus
fail_at(Parser *p, SlStatus st, Tok t, const char *what)
{
    if (t.kind == T_EOF)
        return sl_fail(p->err, st, t.loc, "%s, got end of input", what);
    return sl_fail(p->err, st, t.loc, "%s, got '%.*s'", what, SL_STR_ARG(t.text));
}

static SlStatus
expect(Parser *p, TokKind k, const char *what, Tok *out)
{
    Tok t = next(p);
    if (t.kind != k)
        return fail_at(p, SL_ERR_PARSE, t, what);
    if (out)
        *out = t;
    return SL_OK;
}

/* int_list := '[' INT (',' INT)* ']'   (also with '(' ')' when `open` is T_LPAREN) */
static SlStatus
parse_int_list(Parser *p, TokKind open, TokKind close, int64_t *v, uint32_t *n)
{
    SlStatus st = expect(p, open, open == T_LBRACK ? "expected '['" : "expected '('", NULL);
    *n = 0;
    if (st != SL_OK)
        return st;
    for (;;) {
        Tok t = next(p);
        if (t.kind != T_INT)
            return fail_at(p, SL_ERR_PARSE, t, "expected an integer");
        if (*n == SHD_MAX_DIMS)
            return fail_at(p, SL_ERR_UNSUPPORTED, t, "too many dimensions");
        v[(*n)++] = t.val;
        t = next(p);
        if (t.kind == close)
            return SL_OK;
        if (t.kind != T_COMMA)
            return fail_at(p, SL_ERR_PARSE, t, close == T_RBRACK ? "expected ',' or ']'"
                                                                 : "expected ',' or ')'");
    }
}

/* Captures a balanced "{...}" verbatim (strings may contain braces). */
static SlStatus
parse_balanced(Parser *p, SlStr *out)
{
    Lex *lx = &p->lx;
    skip_space(lx);
    Tok start = {T_BAD, {lx->src.ptr + lx->pos, 1}, 0, lx->at};
    if (cur(lx, 0) != '{')
        return fail_at(p, SL_ERR_PARSE, lex_next(lx), "expected '{'");
    size_t begin = lx->pos;
    int depth = 0;
    while (cur(lx, 0) != -1) {
        int c = cur(lx, 0);
        if (c == '"' || c == '\'') {
            advance(lx, 1);
            while (cur(lx, 0) != -1 && cur(lx, 0) != c)
                advance(lx, cur(lx, 0) == '\\' ? 2 : 1);
        } else if (c == '{') {
            depth++;
        } else if (c == '}' && --depth == 0) {
            advance(lx, 1);
            char *copy = sl_arena_strndup(p->a, lx->src.ptr + begin, lx->pos - begin);
            if (!copy)
                return sl_fail(p->err, SL_ERR_NOMEM, start.loc, "out of memory");
            *out = (SlStr){copy, lx->pos - begin};
            return SL_OK;
        }
        advance(lx, 1);
    }
    return fail_at(p, SL_ERR_PARSE, lex_next(lx), "unbalanced '{' in metadata");
}

/* ---- V1/V2 bodies ---- */

typedef struct Items {
    int n_kinds;           /* how many of replicated/manual/unknown/unreduced/maximal/devices */
    ShdKind kind;          /* the last kind keyword seen (TILED for devices=) */
    bool has_device;       /* device=N */
    int64_t device;
    bool last_rep, has_ltd;
    Tok last_rep_tok, ltd_tok;
    int64_t dims[SHD_MAX_DIMS];
    uint32_t n_dims;
    int64_t *list;         /* explicit device list (arena), n_list entries; NULL for iota */
    int64_t n_list;
    IrIota iota;           /* when list is NULL: reshape/perm */
    int64_t reshape[SHD_MAX_DIMS], perm[SHD_MAX_DIMS];
    ShdSubgroup sub[SHD_MAX_DIMS];
    uint32_t n_sub;
    int shard_kind;
    int64_t shard_id;
    SlStr metadata;
} Items;

static SlStatus
check_dims(Parser *p, Tok at, const int64_t *dims, uint32_t n, int64_t *total)
{
    *total = 1;
    for (uint32_t i = 0; i < n; i++) {
        if (dims[i] < 1)
            return fail_at(p, SL_ERR_INVALID, at, "tile dims must be positive");
        if (*total > SHD_MAX_DEVICES / dims[i]) /* before anything of that size is allocated */
            return sl_fail(p->err, SL_ERR_INVALID, at.loc, "more than %d devices (the limit)",
                           SHD_MAX_DEVICES);
        *total *= dims[i];
    }
    return SL_OK;
}

/* Takes `total` device ids from the caller's budget, before they are materialized. */
static SlStatus
spend_ids(Parser *p, Tok at, int64_t total)
{
    if (!p->ids_left)
        return SL_OK;
    if (total > *p->ids_left)
        return sl_fail(p->err, SL_ERR_INVALID, at.loc,
                       "the shardings name more than %d device ids in all (the limit)",
                       SHD_MAX_TOTAL_IDS);
    *p->ids_left -= total;
    return SL_OK;
}

/* iota := '<=' '[' INT (',' INT)* ']' ('T' '(' INT (',' INT)* ')')? */
static SlStatus
parse_iota_tail(Parser *p, Items *it, int64_t total)
{
    Tok le = next(p), open = peek(p);
    (void)le;
    int64_t rtotal;
    SlStatus st = parse_int_list(p, T_LBRACK, T_RBRACK, it->reshape, &it->iota.n_reshape);
    if (st != SL_OK)
        return st;
    if ((st = check_dims(p, open, it->reshape, it->iota.n_reshape, &rtotal)) != SL_OK)
        return st;
    if (rtotal != total)
        return fail_at(p, SL_ERR_INVALID, open, "iota reshape size differs from tile count");
    it->iota.reshape = it->reshape;
    Tok t = peek(p);
    if (!is_kw(t, "T")) {
        if (it->iota.n_reshape > 1)
            return fail_at(p, SL_ERR_PARSE, t, "expected 'T(...)' after a multi-dim iota");
        return SL_OK;
    }
    next(p);
    uint32_t n_perm;
    Tok popen = peek(p);
    if ((st = parse_int_list(p, T_LPAREN, T_RPAREN, it->perm, &n_perm)) != SL_OK)
        return st;
    if (n_perm != it->iota.n_reshape)
        return fail_at(p, SL_ERR_INVALID, popen, "transpose rank differs from the iota rank");
    uint64_t seen = 0;
    for (uint32_t i = 0; i < n_perm; i++) {
        if (it->perm[i] < 0 || it->perm[i] >= (int64_t)n_perm || (seen >> it->perm[i] & 1))
            return fail_at(p, SL_ERR_INVALID, popen, "transpose is not a permutation");
        seen |= UINT64_C(1) << it->perm[i];
    }
    it->iota.perm = it->perm;
    return SL_OK;
}

/* tile_assign := '[' INT (',' INT)* ']' (INT (',' INT)* | iota) */
static SlStatus
parse_tile_assign(Parser *p, Items *it)
{
    Tok open = peek(p);
    int64_t total;
    SlStatus st = parse_int_list(p, T_LBRACK, T_RBRACK, it->dims, &it->n_dims);
    if (st != SL_OK || (st = check_dims(p, open, it->dims, it->n_dims, &total)) != SL_OK ||
        (st = spend_ids(p, open, total)) != SL_OK)
        return st;
    Tok t = peek(p);
    if (t.kind == T_LE)
        return parse_iota_tail(p, it, total);
    SlVec v = {0};
    for (;;) {
        t = next(p);
        if (t.kind != T_INT) {
            sl_vec_fini(&v);
            return fail_at(p, SL_ERR_PARSE, t, "expected a device id or '<='");
        }
        if ((int64_t)v.len == total) {
            sl_vec_fini(&v);
            return fail_at(p, SL_ERR_INVALID, t, "device count differs from the tile dims' product");
        }
        if (t.val >= SHD_MAX_DEVICES) {
            sl_vec_fini(&v);
            return sl_fail(p->err, SL_ERR_INVALID, t.loc,
                           "device %lld is beyond the limit of %d devices", (long long)t.val,
                           SHD_MAX_DEVICES);
        }
        if (!SL_VEC_PUSH(&v, int64_t, t.val)) {
            sl_vec_fini(&v);
            return sl_fail(p->err, SL_ERR_NOMEM, t.loc, "out of memory");
        }
        if (peek(p).kind != T_COMMA)
            break;
        next(p);
    }
    t = peek(p);
    it->n_list = (int64_t)v.len;
    it->list = SL_DUP_ARRAY(p->a, int64_t, v.data, v.len);
    sl_vec_fini(&v);
    if (!it->list)
        return sl_fail(p->err, SL_ERR_NOMEM, t.loc, "out of memory");
    if (it->n_list != total)
        return fail_at(p, SL_ERR_INVALID, t, "device count differs from the tile dims' product");
    if (it->n_list < 2)
        return fail_at(p, SL_ERR_INVALID, t, "a tiled sharding needs at least two devices");
    return SL_OK;
}

/* sub_types := '{' sub_type (',' sub_type)* '}' */
static SlStatus
parse_subgroup_types(Parser *p, Items *it)
{
    SlStatus st = expect(p, T_LBRACE, "expected '{'", NULL);
    while (st == SL_OK) {
        Tok t = next(p);
        if (it->n_sub == SHD_MAX_DIMS)
            return fail_at(p, SL_ERR_UNSUPPORTED, t, "too many subgroup dims");
        if (is_kw(t, "manual"))
            it->sub[it->n_sub++] = SHD_SUB_MANUAL;
        else if (is_kw(t, "replicated"))
            it->sub[it->n_sub++] = SHD_SUB_REPLICATED;
        else if (is_kw(t, "unreduced"))
            it->sub[it->n_sub++] = SHD_SUB_UNREDUCED;
        else if (is_kw(t, "maximal"))
            return fail_at(p, SL_ERR_UNSUPPORTED, t, "maximal subgroups are not supported");
        else
            return fail_at(p, SL_ERR_PARSE, t, "expected a subgroup type");
        t = next(p);
        if (t.kind == T_RBRACE)
            return SL_OK;
        if (t.kind != T_COMMA)
            return fail_at(p, SL_ERR_PARSE, t, "expected ',' or '}'");
    }
    return st;
}

static void
add_kind(Items *it, ShdKind k)
{
    it->n_kinds++;
    it->kind = k;
}

/* One item of a V1/V2 body (hlo-text.md §9 `item`). */
static SlStatus
parse_item(Parser *p, Items *it, Tok t)
{
    static const struct {
        const char *kw;
        ShdKind kind;
    } k_kinds[] = {{"replicated", SHD_REPLICATED}, {"manual", SHD_MANUAL},
                   {"unknown", SHD_UNKNOWN},       {"unreduced", SHD_UNREDUCED},
                   {"maximal", SHD_MAXIMAL}};
    for (size_t i = 0; i < SL_COUNTOF(k_kinds); i++)
        if (is_kw(t, k_kinds[i].kw)) {
            add_kind(it, k_kinds[i].kind);
            return SL_OK;
        }
    if (is_kw(t, "last_tile_dim_replicate")) {
        it->last_rep = true;
        it->last_rep_tok = t;
        return it->has_ltd ? fail_at(p, SL_ERR_INVALID, t, "both last_tile_dims forms given")
                           : SL_OK;
    }
    if (is_kw(t, "shard_as") || is_kw(t, "shard_like")) {
        Tok id = {0};
        SlStatus st = expect(p, T_INT, "expected a shard group id", &id);
        it->shard_kind = is_kw(t, "shard_as") ? 1 : 2;
        it->shard_id = id.val;
        return st;
    }
    bool is_attr = is_kw(t, "device") || is_kw(t, "devices") || is_kw(t, "last_tile_dims") ||
                   is_kw(t, "metadata");
    if (!is_attr)
        return fail_at(p, SL_ERR_PARSE, t, "unexpected item in sharding");
    SlStatus st = expect(p, T_EQ, "expected '='", NULL);
    if (st != SL_OK)
        return st;
    if (is_kw(t, "device")) {
        Tok id = {0};
        it->has_device = true;
        st = expect(p, T_INT, "expected a device id", &id);
        it->device = id.val;
        /* the device count a module without num_partitions gets from it: bounded as -n is */
        if (st == SL_OK && id.val >= SHD_MAX_DEVICES)
            return sl_fail(p->err, SL_ERR_INVALID, id.loc,
                           "device %lld is beyond the limit of %d devices", (long long)id.val,
                           SHD_MAX_DEVICES);
        return st;
    }
    if (is_kw(t, "devices")) {
        add_kind(it, SHD_TILED);
        return parse_tile_assign(p, it);
    }
    if (is_kw(t, "metadata"))
        return parse_balanced(p, &it->metadata);
    it->has_ltd = true;
    it->ltd_tok = t;
    if (it->last_rep)
        return fail_at(p, SL_ERR_INVALID, t, "both last_tile_dims forms given");
    return parse_subgroup_types(p, it);
}

static const ShdSharding *
build_tiled(SlArena *a, const Items *it)
{
    int64_t total = shd_prod(it->dims, it->n_dims);
    const int64_t *devs = it->list;
    if (!devs) {
        int64_t *tmp = SL_NEW_ARRAY(a, int64_t, total);
        if (!tmp)
            return NULL;
        IrIota io = it->iota;
        io.n_dims = it->n_dims;
        io.dims = (int64_t *)it->dims;
        ir_iota_expand(&io, tmp);
        devs = tmp;
    }
    ShdSubgroup rep = SHD_SUB_REPLICATED;
    const ShdSubgroup *sub = it->last_rep ? &rep : it->sub;
    uint32_t n_sub = it->last_rep ? 1 : it->n_sub;
    return shd_make_tiled(a, it->dims, it->n_dims, devs, sub, n_sub,
                          it->list ? SHD_FORM_EXPLICIT : SHD_FORM_IOTA);
}

/* Checks the combination of items and builds the value; `close` is the closing brace. */
static SlStatus
finish_items(Parser *p, const Items *it, Tok close, const ShdSharding **out)
{
    const ShdSharding *base = NULL;
    if (it->n_kinds != 1)
        return fail_at(p, SL_ERR_INVALID, close,
                       it->n_kinds ? "conflicting sharding kinds" : "sharding has no kind");
    if (it->kind == SHD_MAXIMAL && !it->has_device)
        return fail_at(p, SL_ERR_INVALID, close, "maximal sharding needs device=N");
    if (it->kind != SHD_MAXIMAL && it->has_device)
        return fail_at(p, SL_ERR_INVALID, close, "device= is only valid with maximal");
    if (it->kind != SHD_TILED && (it->last_rep || it->has_ltd))
        return fail_at(p, SL_ERR_INVALID, close, "last_tile_dims without devices=");
    switch (it->kind) {
    case SHD_MAXIMAL: base = shd_maximal(p->a, it->device); break;
    case SHD_TILED:
        if ((it->last_rep ? 1u : it->n_sub) > it->n_dims)
            return fail_at(p, SL_ERR_INVALID, it->last_rep ? it->last_rep_tok : it->ltd_tok,
                           "more subgroup dims than tile dims");
        base = build_tiled(p->a, it);
        break;
    case SHD_REPLICATED:
    case SHD_MANUAL:
    case SHD_UNKNOWN:
    case SHD_UNREDUCED:
    case SHD_TUPLE: base = shd_make_simple(p->a, it->kind); break;
    }
    ShdSharding *s = base ? SL_NEW(p->a, ShdSharding) : NULL;
    if (!s)
        return sl_fail(p->err, SL_ERR_NOMEM, close.loc, "out of memory");
    *s = *base;
    if (it->kind == SHD_TILED && base->kind != SHD_TILED) {
        s->is_written_tiled = true;
        s->written_rank = it->n_dims - (it->last_rep ? 1u : it->n_sub);
    }
    s->shard_group_kind = it->shard_kind;
    s->shard_group_id = it->shard_id;
    s->metadata = it->metadata;
    *out = s;
    return SL_OK;
}

static SlStatus parse_named(Parser *p, const ShdSharding **out);

/* single := '{' (named_body | item*) '}' ; the '{' is already consumed. */
static SlStatus
parse_body(Parser *p, const ShdSharding **out)
{
    Tok t = peek(p);
    if (is_kw(t, "mesh") || is_kw(t, "maximal_mesh"))
        return parse_named(p, out);
    Items it;
    memset(&it, 0, sizeof(it));
    for (;;) {
        t = next(p);
        if (t.kind == T_RBRACE)
            return finish_items(p, &it, t, out);
        if (t.kind != T_IDENT)
            return fail_at(p, SL_ERR_PARSE, t, "expected a sharding item or '}'");
        SlStatus st = parse_item(p, &it, t);
        if (st != SL_OK)
            return st;
    }
}

/* sharding := '{' '}' | '{' single_body '}' | '{' single (',' single)* '}' */
static SlStatus
parse_top(Parser *p, const ShdSharding **out)
{
    SlStatus st = expect(p, T_LBRACE, "expected '{' to start a sharding", NULL);
    if (st != SL_OK)
        return st;
    Tok t = peek(p);
    if (t.kind == T_RBRACE) {
        next(p);
        *out = shd_tuple(p->a, NULL, 0);
        return *out ? SL_OK : sl_fail(p->err, SL_ERR_NOMEM, t.loc, "out of memory");
    }
    if (t.kind != T_LBRACE)
        return parse_body(p, out);
    SlVec leaves = {0};
    for (;;) {
        const ShdSharding *leaf = NULL;
        if ((st = expect(p, T_LBRACE, "expected '{' to start a tuple element", NULL)) != SL_OK ||
            (st = parse_body(p, &leaf)) != SL_OK)
            break;
        if (!SL_VEC_PUSH(&leaves, const ShdSharding *, leaf)) {
            st = sl_fail(p->err, SL_ERR_NOMEM, t.loc, "out of memory");
            break;
        }
        t = next(p);
        if (t.kind == T_RBRACE) {
            *out = shd_tuple(p->a, leaves.data, (uint32_t)leaves.len);
            st = *out ? SL_OK : sl_fail(p->err, SL_ERR_NOMEM, t.loc, "out of memory");
            break;
        }
        if (t.kind != T_COMMA) {
            st = fail_at(p, SL_ERR_PARSE, t, "expected ',' or '}' in a tuple sharding");
            break;
        }
    }
    sl_vec_fini(&leaves);
    return st;
}

SlStatus
shd_parse_prefix(SlArena *a, SlStr text, SlSrcLoc loc, const ShdSharding **out,
                 size_t *consumed, SlError *err)
{
    Parser p = {{text, 0, loc}, a, err, NULL};
    if (p.lx.at.line == 0)
        p.lx.at.line = 1;
    if (p.lx.at.col == 0)
        p.lx.at.col = 1;
    *out = NULL;
    SlStatus st = parse_top(&p, out);
    if (st != SL_OK)
        *out = NULL;
    if (consumed)
        *consumed = p.lx.pos;
    return st;
}

SlStatus
shd_parse(SlArena *a, SlStr text, SlSrcLoc loc, const ShdSharding **out, SlError *err)
{
    return shd_parse_bounded(a, text, loc, NULL, out, err);
}

SlStatus
shd_parse_bounded(SlArena *a, SlStr text, SlSrcLoc loc, int64_t *ids_left,
                  const ShdSharding **out, SlError *err)
{
    Parser p = {{text, 0, loc}, a, err, ids_left};
    if (p.lx.at.line == 0)
        p.lx.at.line = 1;
    if (p.lx.at.col == 0)
        p.lx.at.col = 1;
    *out = NULL;
    SlStatus st = parse_top(&p, out);
    if (st == SL_OK) {
        Tok t = next(&p);
        if (t.kind != T_EOF)
            st = fail_at(&p, SL_ERR_PARSE, t, "unexpected text after the sharding");
    }
    if (st != SL_OK)
        *out = NULL;
    return st;
}

/* ---- named (V3) shardings ---- */

typedef struct MeshAxis {
    SlStr name;
    int64_t size;
    int64_t cuts[SHD_MAX_DIMS]; /* sorted cumulative sizes from the major end: 1 .. size */
    uint32_t n_cuts;
    uint32_t first_piece;       /* index of this axis' first piece in the expanded mesh */
} MeshAxis;

typedef struct AxisRef {
    uint32_t axis;
    int64_t pre, size; /* sub-axis; pre = 0 for the whole axis */
} AxisRef;

#define NAMED_MAX_REFS 256

typedef struct Named {
    MeshAxis axes[SHD_MAX_DIMS];
    uint32_t n_axes;
    int64_t *ids;      /* explicit device_ids, or NULL */
    bool ids_iota;     /* device_ids given as an iota (reshape + T) */
    IrIota ids_io;
    int64_t ids_reshape[SHD_MAX_DIMS], ids_perm[SHD_MAX_DIMS];
    AxisRef refs[NAMED_MAX_REFS];
    uint32_t n_refs;
    uint32_t dim_start[SHD_MAX_DIMS + 1]; /* refs of data dim i: [dim_start[i], dim_start[i+1]) */
    uint32_t n_data;
    uint32_t set_start[3], set_end[3];    /* refs listed under manual=, unreduced=, replicated= */
    ShdKind whole;     /* REPLICATED/MANUAL/UNREDUCED keyword form, or TILED */
} Named;

static bool
add_cut(MeshAxis *ax, int64_t c)
{
    for (uint32_t i = 0; i < ax->n_cuts; i++)
        if (ax->cuts[i] == c)
            return true;
    if (ax->n_cuts == SHD_MAX_DIMS)
        return false;
    uint32_t i = ax->n_cuts++;
    while (i > 0 && ax->cuts[i - 1] > c) {
        ax->cuts[i] = ax->cuts[i - 1];
        i--;
    }
    ax->cuts[i] = c;
    return true;
}

/* axis := STRING (':' '(' INT ')' INT)? | INT */
static SlStatus
parse_axis_ref(Parser *p, Named *nm, Tok t)
{
    AxisRef r = {0, 0, 0};
    bool found = false;
    for (uint32_t i = 0; i < nm->n_axes && !found; i++)
        if ((t.kind == T_STRING && sl_str_eq(t.text, nm->axes[i].name)) ||
            (t.kind == T_INT && t.val == (int64_t)i)) {
            r.axis = i;
            found = true;
        }
    if (!found)
        return fail_at(p, t.kind == T_STRING || t.kind == T_INT ? SL_ERR_INVALID : SL_ERR_PARSE,
                       t, "expected a mesh axis");
    if (peek(p).kind == T_COLON) {
        Tok pre = {0}, size = {0};
        SlStatus st;
        next(p);
        if ((st = expect(p, T_LPAREN, "expected '('", NULL)) != SL_OK ||
            (st = expect(p, T_INT, "expected a pre-size", &pre)) != SL_OK ||
            (st = expect(p, T_RPAREN, "expected ')'", NULL)) != SL_OK ||
            (st = expect(p, T_INT, "expected a sub-axis size", &size)) != SL_OK)
            return st;
        MeshAxis *ax = &nm->axes[r.axis];
        if (pre.val < 1 || size.val < 2 || ax->size % pre.val ||
            (ax->size / pre.val) % size.val)
            return fail_at(p, SL_ERR_INVALID, size, "sub-axis does not divide the mesh axis");
        r.pre = pre.val;
        r.size = size.val;
        if (!add_cut(ax, pre.val) || !add_cut(ax, pre.val * size.val))
            return fail_at(p, SL_ERR_UNSUPPORTED, size, "too many sub-axes");
    }
    if (nm->n_refs == NAMED_MAX_REFS)
        return fail_at(p, SL_ERR_UNSUPPORTED, t, "too many axis references");
    nm->refs[nm->n_refs++] = r;
    return SL_OK;
}

/* axes := '{' (axis (',' axis)*)? (','? '?')? '}'   (the '{' already consumed) */
static SlStatus
parse_axes_rest(Parser *p, Named *nm)
{
    SlStatus st = SL_OK;
    while (st == SL_OK) {
        Tok t = next(p);
        if (t.kind == T_RBRACE)
            return SL_OK;
        if (t.kind == T_COMMA || t.kind == T_QUEST)
            continue;
        st = parse_axis_ref(p, nm, t);
    }
    return st;
}

static SlStatus
parse_axes(Parser *p, Named *nm)
{
    SlStatus st = expect(p, T_LBRACE, "expected '{'", NULL);
    return st == SL_OK ? parse_axes_rest(p, nm) : st;
}

/* mesh := 'mesh' '[' (STRING '=' INT (',' ...)*)? ']' (','? 'device_ids=(' ... ')')? */
static SlStatus
parse_mesh(Parser *p, Named *nm)
{
    Tok open = peek(p);
    SlStatus st = expect(p, T_LBRACK, "expected '['", NULL);
    if (st != SL_OK)
        return st;
    for (Tok t = next(p); t.kind != T_RBRACK; t = next(p)) {
        Tok size;
        if (t.kind == T_COMMA)
            continue;
        if (t.kind != T_STRING)
            return fail_at(p, SL_ERR_PARSE, t, "expected a mesh axis name");
        if ((st = expect(p, T_EQ, "expected '='", NULL)) != SL_OK ||
            (st = expect(p, T_INT, "expected an axis size", &size)) != SL_OK)
            return st;
        if (nm->n_axes == SHD_MAX_DIMS || size.val < 1)
            return fail_at(p, SL_ERR_INVALID, size, "bad mesh axis");
        MeshAxis *ax = &nm->axes[nm->n_axes++];
        ax->name = t.text;
        ax->size = size.val;
        ax->n_cuts = 0;
        add_cut(ax, 1);
        add_cut(ax, size.val);
    }
    int64_t axes_dims[SHD_MAX_DIMS], total;
    for (uint32_t i = 0; i < nm->n_axes; i++)
        axes_dims[i] = nm->axes[i].size;
    if ((st = check_dims(p, open, axes_dims, nm->n_axes, &total)) != SL_OK ||
        (st = spend_ids(p, open, total)) != SL_OK)
        return st;
    Lex save = p->lx;
    Tok t = next(p);
    if (t.kind == T_COMMA)
        t = next(p);
    if (!is_kw(t, "device_ids")) {
        p->lx = save;
        return SL_OK;
    }
    if ((st = expect(p, T_EQ, "expected '='", NULL)) != SL_OK ||
        (st = expect(p, T_LPAREN, "expected '('", NULL)) != SL_OK)
        return st;
    Tok first = peek(p);
    if (first.kind == T_LBRACK) {
        nm->ids_iota = true;
        if ((st = parse_int_list(p, T_LBRACK, T_RBRACK, nm->ids_reshape,
                                 &nm->ids_io.n_reshape)) != SL_OK)
            return st;
        int64_t rt;
        if ((st = check_dims(p, first, nm->ids_reshape, nm->ids_io.n_reshape, &rt)) != SL_OK)
            return st;
        if (rt != total)
            return fail_at(p, SL_ERR_INVALID, first, "device_ids size differs from the mesh");
        nm->ids_io.reshape = nm->ids_reshape;
        if (is_kw(peek(p), "T")) {
            uint32_t np;
            next(p);
            Tok popen = peek(p);
            if ((st = parse_int_list(p, T_LPAREN, T_RPAREN, nm->ids_perm, &np)) != SL_OK)
                return st;
            uint64_t seen = 0;
            for (uint32_t i = 0; i < np; i++) {
                if (np != nm->ids_io.n_reshape || nm->ids_perm[i] < 0 ||
                    nm->ids_perm[i] >= (int64_t)np || (seen >> nm->ids_perm[i] & 1))
                    return fail_at(p, SL_ERR_INVALID, popen, "transpose is not a permutation");
                seen |= UINT64_C(1) << nm->ids_perm[i];
            }
            nm->ids_io.perm = nm->ids_perm;
        }
        return expect(p, T_RPAREN, "expected ')'", NULL);
    }
    nm->ids = SL_NEW_ARRAY(p->a, int64_t, total);
    if (!nm->ids)
        return sl_fail(p->err, SL_ERR_NOMEM, first.loc, "out of memory");
    for (int64_t i = 0;; i++) {
        Tok id = next(p);
        if (id.kind != T_INT)
            return fail_at(p, SL_ERR_PARSE, id, "expected a device id");
        if (i >= total)
            return fail_at(p, SL_ERR_INVALID, id, "more device_ids than mesh devices");
        nm->ids[i] = id.val;
        Tok sep = next(p);
        if (sep.kind == T_RPAREN)
            return i + 1 == total ? SL_OK
                                  : fail_at(p, SL_ERR_INVALID, sep, "too few device_ids");
        if (sep.kind != T_COMMA)
            return fail_at(p, SL_ERR_PARSE, sep, "expected ',' or ')'");
    }
}

/* The piece indices (expanded-mesh axes) covered by one axis reference, appended to `out`. */
static bool
ref_pieces(const Named *nm, AxisRef r, int64_t *out, uint32_t *n)
{
    const MeshAxis *ax = &nm->axes[r.axis];
    int64_t lo = r.pre ? r.pre : 1, hi = r.pre ? r.pre * r.size : ax->size;
    for (uint32_t c = 0; c + 1 < ax->n_cuts; c++) {
        if (ax->cuts[c] >= lo && ax->cuts[c + 1] <= hi) {
            if (*n == SHD_MAX_DIMS) /* more than the mesh has: some piece is used twice */
                return false;
            out[(*n)++] = ax->first_piece + c;
        }
    }
    return true;
}

/* Converts to the tiled form (gspmd.md A.9): data dims' pieces first, in order, then the
 * manual, unreduced, and remaining (replicated) pieces as subgroup dims. */
static const ShdSharding *
named_to_tiled(SlArena *a, Named *nm)
{
    int64_t pieces[SHD_MAX_DIMS], perm[SHD_MAX_DIMS], tdims[SHD_MAX_DIMS];
    int64_t dims[SHD_MAX_DIMS + 3];
    uint32_t np = 0, n_perm = 0;
    for (uint32_t i = 0; i < nm->n_axes; i++) {
        nm->axes[i].first_piece = np;
        for (uint32_t c = 0; c + 1 < nm->axes[i].n_cuts; c++) {
            if (np == SHD_MAX_DIMS)
                return NULL;
            pieces[np++] = nm->axes[i].cuts[c + 1] / nm->axes[i].cuts[c];
        }
    }
    /* The pieces of each data dim, then of the manual and unreduced sets, in order: group g
     * is perm[start[g] .. start[g + 1]). */
    uint32_t start[SHD_MAX_DIMS + 3];
    for (uint32_t d = 0; d < nm->n_data; d++) {
        start[d] = n_perm;
        for (uint32_t r = nm->dim_start[d]; r < nm->dim_start[d + 1]; r++)
            if (!ref_pieces(nm, nm->refs[r], perm, &n_perm))
                return NULL;
    }
    for (uint32_t k = 0; k < 2; k++) { /* manual, unreduced */
        start[nm->n_data + k] = n_perm;
        for (uint32_t r = nm->set_start[k]; r < nm->set_end[k]; r++)
            if (!ref_pieces(nm, nm->refs[r], perm, &n_perm))
                return NULL;
    }
    start[nm->n_data + 2] = n_perm;
    /* Before any product: an axis used twice would multiply past the mesh size (and int64). */
    bool used[SHD_MAX_DIMS] = {false};
    for (uint32_t q = 0; q < n_perm; q++) {
        if (used[perm[q]])
            return NULL; /* an axis used twice */
        used[perm[q]] = true;
    }
    for (uint32_t g = 0; g < nm->n_data + 2; g++) {
        dims[g] = 1;
        for (uint32_t q = start[g]; q < start[g + 1]; q++)
            dims[g] *= pieces[perm[q]];
    }
    dims[nm->n_data + 2] = 1;
    for (uint32_t q = 0; q < np; q++)
        if (!used[q]) {
            perm[n_perm++] = q;
            dims[nm->n_data + 2] *= pieces[q];
        }
    int64_t total = shd_prod(pieces, np);
    if (total == 1) /* a one-device mesh tiles nothing (and a 1-device tiling is not text) */
        return shd_replicated(a);
    int64_t *mesh = SL_NEW_ARRAY(a, int64_t, total), *devs = SL_NEW_ARRAY(a, int64_t, total);
    if (!mesh || !devs)
        return NULL;
    if (nm->ids) {
        memcpy(mesh, nm->ids, (size_t)total * sizeof(int64_t));
    } else if (nm->ids_iota) {
        nm->ids_io.n_dims = 1;
        nm->ids_io.dims = &total;
        ir_iota_expand(&nm->ids_io, mesh);
    } else {
        for (int64_t i = 0; i < total; i++)
            mesh[i] = i;
    }
    shd_arr_transpose(mesh, pieces, np, perm, devs, tdims);
    static const ShdSubgroup k_sub[] = {SHD_SUB_MANUAL, SHD_SUB_UNREDUCED, SHD_SUB_REPLICATED};
    return shd_make_tiled(a, dims, nm->n_data + 3, devs, k_sub, 3,
                          nm->ids ? SHD_FORM_EXPLICIT : SHD_FORM_IOTA);
}

/* named_body := 'maximal_mesh' '[' 'device_id' '=' INT ']' tail
 *             | mesh ','? ('replicated'|'unreduced'|'manual' | '[' axes,* ']'
 *               (','? ('replicated'|'unreduced'|'manual') '=' IDENT? axes)*)? tail
 * tail := (','? 'metadata=' '{...}')? '}' */
static SlStatus
parse_named(Parser *p, const ShdSharding **out)
{
    Named *nm = SL_NEW(p->a, Named);
    Tok t = next(p), end;
    SlStr metadata = {"", 0};
    SlStatus st;
    const ShdSharding *base = NULL;
    if (!nm)
        return sl_fail(p->err, SL_ERR_NOMEM, t.loc, "out of memory");
    if (is_kw(t, "maximal_mesh")) {
        Tok key, id = {0};
        if ((st = expect(p, T_LBRACK, "expected '['", NULL)) != SL_OK ||
            (st = expect(p, T_IDENT, "expected device_id", &key)) != SL_OK ||
            (st = expect(p, T_EQ, "expected '='", NULL)) != SL_OK ||
            (st = expect(p, T_INT, "expected a device id", &id)) != SL_OK ||
            (st = expect(p, T_RBRACK, "expected ']'", NULL)) != SL_OK)
            return st;
        base = shd_maximal(p->a, id.val);
    } else if ((st = parse_mesh(p, nm)) != SL_OK) {
        return st;
    }
    nm->whole = SHD_TILED;
    for (t = next(p); t.kind != T_RBRACE; t = next(p)) {
        if (t.kind == T_COMMA)
            continue;
        if (is_kw(t, "metadata")) {
            if ((st = expect(p, T_EQ, "expected '='", NULL)) != SL_OK ||
                (st = parse_balanced(p, &metadata)) != SL_OK)
                return st;
            continue;
        }
        if (base)
            return fail_at(p, SL_ERR_PARSE, t, "expected '}' after maximal_mesh");
        if (t.kind == T_LBRACK) {
            for (Tok d = next(p); d.kind != T_RBRACK; d = next(p)) {
                if (d.kind == T_COMMA)
                    continue;
                if (d.kind != T_LBRACE)
                    return fail_at(p, SL_ERR_PARSE, d, "expected '{' or ']'");
                if (nm->n_data == SHD_MAX_DIMS - 3) /* + manual, unreduced, replicated */
                    return fail_at(p, SL_ERR_UNSUPPORTED, d, "too many dimensions");
                nm->dim_start[nm->n_data] = nm->n_refs;
                if ((st = parse_axes_rest(p, nm)) != SL_OK)
                    return st;
                nm->dim_start[++nm->n_data] = nm->n_refs;
            }
            continue;
        }
        static const char *const k_sets[] = {"manual", "unreduced", "replicated"};
        static const ShdKind k_whole[] = {SHD_MANUAL, SHD_UNREDUCED, SHD_REPLICATED};
        size_t k = 0;
        while (k < SL_COUNTOF(k_sets) && !is_kw(t, k_sets[k]))
            k++;
        if (k == SL_COUNTOF(k_sets))
            return fail_at(p, SL_ERR_PARSE, t, "unexpected item in a named sharding");
        if (peek(p).kind != T_EQ) {
            nm->whole = k_whole[k];
            continue;
        }
        next(p);
        if (peek(p).kind == T_IDENT)
            next(p); /* reduction kind of unreduced axes, e.g. max{'x'} */
        nm->set_start[k] = nm->n_refs;
        if ((st = parse_axes(p, nm)) != SL_OK)
            return st;
        nm->set_end[k] = nm->n_refs;
    }
    end = t;
    if (!base)
        base = nm->whole != SHD_TILED ? shd_make_simple(p->a, nm->whole)
                                      : named_to_tiled(p->a, nm);
    if (!base)
        return fail_at(p, SL_ERR_INVALID, end, "cannot convert the named sharding");
    ShdSharding *s = SL_NEW(p->a, ShdSharding);
    if (!s)
        return sl_fail(p->err, SL_ERR_NOMEM, end.loc, "out of memory");
    *s = *base;
    s->metadata = metadata;
    *out = s;
    return SL_OK;
}

/* ---- printing ---- */

static void
put_list(SlBuf *out, const int64_t *v, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        if (i)
            sl_buf_putc(out, ',');
        sl_buf_put_i64(out, v[i]);
    }
}

static void
print_tile_assignment(const ShdSharding *s, SlBuf *out)
{
    sl_buf_puts(out, "devices=[");
    put_list(out, s->tile_dims, s->n_tile_dims);
    sl_buf_putc(out, ']');
    if (!s->has_iota) {
        put_list(out, s->devices, shd_device_count(s));
        return;
    }
    sl_buf_puts(out, "<=[");
    put_list(out, s->iota.reshape, s->iota.n_reshape);
    sl_buf_putc(out, ']');
    if (s->iota.perm && s->iota.n_reshape > 1) {
        sl_buf_puts(out, "T(");
        put_list(out, s->iota.perm, s->iota.n_reshape);
        sl_buf_putc(out, ')');
    }
}

static void
print_subgroups(const ShdSharding *s, SlBuf *out)
{
    static const char *const k_names[] = {"manual", "unreduced", "replicated"};
    if (s->n_subgroups == 0)
        return;
    if (s->n_subgroups == 1 && s->subgroups[0] == SHD_SUB_REPLICATED) {
        sl_buf_puts(out, " last_tile_dim_replicate");
        return;
    }
    sl_buf_puts(out, " last_tile_dims={");
    for (uint32_t i = 0; i < s->n_subgroups; i++) {
        if (i)
            sl_buf_puts(out, ", ");
        sl_buf_puts(out, k_names[s->subgroups[i]]);
    }
    sl_buf_putc(out, '}');
}

void
shd_print(const ShdSharding *s, SlBuf *out)
{
    static const char *const k_simple[] = {
        [SHD_REPLICATED] = "replicated", [SHD_MANUAL] = "manual", [SHD_UNKNOWN] = "unknown",
        [SHD_UNREDUCED] = "unreduced"};
    sl_buf_putc(out, '{');
    switch (s->kind) {
    case SHD_TUPLE:
        for (uint32_t i = 0; i < s->n_leaves; i++) {
            if (i)
                sl_buf_puts(out, ", ");
            if (i && i % 5 == 0)
                sl_buf_printf(out, "/*index=%u*/", i);
            shd_print(s->leaves[i], out);
        }
        sl_buf_putc(out, '}');
        return;
    case SHD_REPLICATED:
    case SHD_MANUAL:
    case SHD_UNKNOWN:
    case SHD_UNREDUCED: sl_buf_puts(out, k_simple[s->kind]); break;
    case SHD_MAXIMAL:
        sl_buf_puts(out, "maximal device=");
        sl_buf_put_i64(out, s->device);
        break;
    case SHD_TILED:
        print_tile_assignment(s, out);
        print_subgroups(s, out);
        break;
    }
    if (s->shard_group_kind) {
        sl_buf_puts(out, s->shard_group_kind == 1 ? " shard_as " : " shard_like ");
        sl_buf_put_i64(out, s->shard_group_id);
    }
    if (s->metadata.len) {
        sl_buf_puts(out, " metadata=");
        sl_buf_put_str(out, s->metadata);
    }
    sl_buf_putc(out, '}');
}
