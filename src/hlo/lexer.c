/* lexer.c - tokens and raw scans over HLO text (hlo-text.md §2). Owns: character classes,
 * comments, line/column tracking and bracket balancing. Does not own: what a token means in
 * context (parser.c). Invariant: every read is guarded by `p < end`; no allocation. */
#include "hlo/hlo_int.h"

#include <string.h>

enum { C_SPACE = 1, C_IDENT0 = 2, C_IDENT = 4, C_DIGIT = 8 };

/* Character classes, built once at compile time from ranges. */
#define R8(x) x, x, x, x, x, x, x, x
#define LET   (C_IDENT0 | C_IDENT)
#define DIG   (C_IDENT | C_DIGIT)
static const unsigned char k_class[256] = {
    0, 0, 0, 0, 0, 0, 0, 0, 0, C_SPACE, C_SPACE, C_SPACE, C_SPACE, C_SPACE, 0, 0, /* 0x00 */
    R8(0), R8(0),                                                                   /* 0x10 */
    C_SPACE, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, C_IDENT, C_IDENT, 0,              /* 0x20 */
    DIG, DIG, DIG, DIG, DIG, DIG, DIG, DIG, DIG, DIG, 0, 0, 0, 0, 0, 0,            /* 0x30 */
    0, LET, LET, LET, LET, LET, LET, LET, LET, LET, LET, LET, LET, LET, LET, LET,  /* 0x40 */
    LET, LET, LET, LET, LET, LET, LET, LET, LET, LET, LET, 0, 0, 0, 0, LET,        /* 0x50 */
    0, LET, LET, LET, LET, LET, LET, LET, LET, LET, LET, LET, LET, LET, LET, LET,  /* 0x60 */
    LET, LET, LET, LET, LET, LET, LET, LET, LET, LET, LET, 0, 0, 0, 0, 0,          /* 0x70 */
};
#undef R8
#undef LET
#undef DIG

static inline bool
is_class(char c, unsigned cls)
{
    return (k_class[(unsigned char)c] & cls) != 0;
}

void
hlo_lex_init(HloLexer *lx, SlStr text, const char *path)
{
    lx->base = text.ptr;
    lx->p = text.ptr;
    lx->end = text.ptr + text.len;
    lx->line_start = text.ptr;
    lx->line = 1;
    lx->path = path;
}

SlSrcLoc
hlo_lex_here(const HloLexer *lx)
{
    SlSrcLoc loc = {lx->path, lx->line, (uint32_t)(lx->p - lx->line_start) + 1};
    return loc;
}

SlSrcLoc
hlo_tok_loc(const HloLexer *lx, const HloTok *t)
{
    SlSrcLoc loc = {lx->path, t->line, t->col};
    return loc;
}

static inline void
newline(HloLexer *lx, const char *nl)
{
    lx->line++;
    lx->line_start = nl + 1;
}

bool
hlo_lex_skip_space(HloLexer *lx)
{
    const char *p = lx->p, *end = lx->end;
    for (;;) {
        while (p < end && is_class(*p, C_SPACE)) {
            if (*p == '\n')
                newline(lx, p);
            p++;
        }
        if (p + 1 < end && p[0] == '/' && p[1] == '/') {
            while (p < end && *p != '\n')
                p++;
            continue;
        }
        if (p + 1 < end && p[0] == '/' && p[1] == '*') {
            const char *start = p, *start_ls = lx->line_start;
            uint32_t start_line = lx->line;
            p += 2;
            while (p + 1 < end && !(p[0] == '*' && p[1] == '/')) {
                if (*p == '\n')
                    newline(lx, p);
                p++;
            }
            if (p + 1 >= end) { /* reported at the opening '/' *: its line, not the last one */
                lx->p = start;
                lx->line = start_line;
                lx->line_start = start_ls;
                return false;
            }
            p += 2;
            continue;
        }
        break;
    }
    lx->p = p;
    return true;
}

static void
set_tok(HloLexer *lx, HloTok *t, HloTokKind kind, const char *start, const char *stop)
{
    t->kind = kind;
    t->text.ptr = start;
    t->text.len = (size_t)(stop - start);
    lx->p = stop;
}

static void
bad_tok(HloLexer *lx, HloTok *t, const char *start, const char *stop, const char *why)
{
    set_tok(lx, t, HLO_TOK_BAD, start, stop);
    t->bad = why;
}

/* One-byte tokens (HLO_TOK_EOF = none). */
static const unsigned char k_punct[256] = {
    ['{'] = HLO_TOK_LBRACE,  ['}'] = HLO_TOK_RBRACE, ['('] = HLO_TOK_LPAREN,
    [')'] = HLO_TOK_RPAREN,  ['['] = HLO_TOK_LSQUARE, [']'] = HLO_TOK_RSQUARE,
    [','] = HLO_TOK_COMMA,   [':'] = HLO_TOK_COLON,  ['='] = HLO_TOK_EQUAL,
    ['?'] = HLO_TOK_QUESTION,
};

/* INT := '-'? [0-9]+, not followed by an identifier character or '.'. */
static void
lex_int(HloLexer *lx, HloTok *t, const char *p)
{
    const char *start = p, *end = lx->end;
    bool neg = *p == '-';
    if (neg)
        p++;
    uint64_t v = 0;
    bool overflow = false;
    while (p < end && is_class(*p, C_DIGIT)) {
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            overflow = true;
        else
            v = v * 10 + d;
        p++;
    }
    if (p < end && (is_class(*p, C_IDENT) || *p == '.')) {
        while (p < end && (is_class(*p, C_IDENT) || *p == '.'))
            p++;
        bad_tok(lx, t, start, p, "malformed number");
        return;
    }
    if (overflow || v > (uint64_t)INT64_MAX + (neg ? 1u : 0u)) {
        bad_tok(lx, t, start, p, "integer out of range");
        return;
    }
    set_tok(lx, t, HLO_TOK_INT, start, p);
    t->ival = neg ? (int64_t)(0 - v) : (int64_t)v;
}

void
hlo_lex_next(HloLexer *lx, HloTok *t)
{
    t->bad = NULL;
    t->ival = 0;
    const char *p = lx->p, *end = lx->end;
    bool ok = true;
    while (p < end && *p == ' ') /* the usual gap between tokens: one space, or none */
        p++;
    lx->p = p;
    if (p < end && (is_class(*p, C_SPACE) || *p == '/')) {
        ok = hlo_lex_skip_space(lx);
        p = lx->p;
    }
    t->line = lx->line;
    t->col = (uint32_t)(p - lx->line_start) + 1;
    if (!ok) {
        bad_tok(lx, t, p, p + 2, "unterminated /* comment");
        return;
    }
    if (p >= end) {
        set_tok(lx, t, HLO_TOK_EOF, p, p);
        return;
    }
    char c = *p;
    if (is_class(c, C_IDENT0)) {
        const char *q = p + 1;
        while (q < end && is_class(*q, C_IDENT))
            q++;
        if (q < end && *q == '=') {
            set_tok(lx, t, HLO_TOK_ATTR, p, q);
            lx->p = q + 1;
        } else {
            set_tok(lx, t, HLO_TOK_IDENT, p, q);
        }
        return;
    }
    if (is_class(c, C_DIGIT) || (c == '-' && p + 1 < end && is_class(p[1], C_DIGIT))) {
        lex_int(lx, t, p);
        return;
    }
    switch (c) {
    case '%': {
        const char *q = p + 1;
        while (q < end && is_class(*q, C_IDENT))
            q++;
        if (q == p + 1) {
            bad_tok(lx, t, p, q, "'%' without a name");
            return;
        }
        set_tok(lx, t, HLO_TOK_NAME, p + 1, q);
        t->text.ptr = p + 1;
        return;
    }
    case '"':
    case '\'': {
        const char *why = NULL;
        if (!hlo_lex_scan_string(lx, &why)) {
            bad_tok(lx, t, p, lx->p, why);
            lx->p = end;
            return;
        }
        set_tok(lx, t, HLO_TOK_STRING, p, lx->p);
        return;
    }
    case '-':
        if (p + 1 < end && p[1] == '>') {
            set_tok(lx, t, HLO_TOK_ARROW, p, p + 2);
            return;
        }
        break;
    case '<':
        if (p + 1 < end && p[1] == '=') {
            set_tok(lx, t, HLO_TOK_LEQ, p, p + 2);
            return;
        }
        break;
    case '.':
        if (p + 2 < end && p[1] == '.' && p[2] == '.') {
            set_tok(lx, t, HLO_TOK_ELLIPSIS, p, p + 3);
            return;
        }
        break;
    default:
        if (k_punct[(unsigned char)c] != HLO_TOK_EOF) {
            set_tok(lx, t, (HloTokKind)k_punct[(unsigned char)c], p, p + 1);
            return;
        }
        break;
    }
    bad_tok(lx, t, p, p + 1, c == '\0' ? "NUL byte in input" : "unexpected character");
}

/* Bytes that raw scans must look at; everything else is skipped in a tight loop. */
enum { S_OPEN = 1, S_CLOSE = 2, S_QUOTE = 4, S_NL = 8, S_NUL = 16, S_STOP = 32, S_ESC = 64 };
static const unsigned char k_scan[256] = {
    ['('] = S_OPEN,           ['['] = S_OPEN,           ['{'] = S_OPEN,
    [')'] = S_CLOSE | S_STOP, [']'] = S_CLOSE | S_STOP, ['}'] = S_CLOSE | S_STOP,
    ['"'] = S_QUOTE,          ['\''] = S_QUOTE,        ['\\'] = S_ESC,
    ['\n'] = S_NL | S_STOP,  ['\0'] = S_NUL,          [','] = S_STOP,
    [' '] = S_STOP,           ['\t'] = S_STOP,         ['\r'] = S_STOP,
    ['\v'] = S_STOP,         ['\f'] = S_STOP,
};

bool
hlo_lex_scan_string(HloLexer *lx, const char **why)
{
    const char *p = lx->p, *end = lx->end;
    const char *saved_ls = lx->line_start;
    uint32_t saved_line = lx->line;
    char quote = *p++;
    for (;;) {
        while (p < end && !(k_scan[(unsigned char)*p] & (S_QUOTE | S_ESC | S_NL)))
            p++;
        if (p >= end || *p == quote)
            break;
        if (*p == '\\') {
            p++;
            if (p >= end)
                break;
        }
        if (*p == '\n')
            newline(lx, p);
        p++;
    }
    if (p >= end) {
        lx->line = saved_line; /* report at the opening quote */
        lx->line_start = saved_ls;
        *why = "unterminated string";
        return false;
    }
    lx->p = p + 1;
    return true;
}

static char
closer_of(char open)
{
    return open == '(' ? ')' : open == '[' ? ']' : '}';
}

/* Scans brackets from the cursor. With `stop_at_top` it also ends (successfully) at ',' or
 * whitespace or an unmatched closer while no bracket is open. */
static bool
scan_brackets(HloLexer *lx, bool stop_at_top, const char **why)
{
    char want[HLO_MAX_DEPTH];
    int depth = 0;
    const char *p = lx->p, *end = lx->end;
    const char *open_p = p, *open_ls = lx->line_start; /* outermost opener, for errors */
    uint32_t open_line = lx->line;
    const unsigned inner = S_OPEN | S_CLOSE | S_QUOTE | S_NL | S_NUL;
    for (;;) {
        unsigned look = depth == 0 && stop_at_top ? inner | S_STOP : inner;
        while (p < end && !(k_scan[(unsigned char)*p] & look))
            p++;
        if (p >= end)
            break;
        char c = *p;
        if (depth == 0 && stop_at_top && (k_scan[(unsigned char)c] & S_STOP))
            break;
        switch (c) {
        case '(':
        case '[':
        case '{':
            if (depth == HLO_MAX_DEPTH) {
                lx->p = p;
                *why = "brackets nested too deeply";
                return false;
            }
            if (depth == 0) {
                open_p = p;
                open_ls = lx->line_start;
                open_line = lx->line;
            }
            want[depth++] = closer_of(c);
            p++;
            break;
        case ')':
        case ']':
        case '}':
            if (depth == 0 || want[depth - 1] != c) {
                lx->p = p;
                *why = depth == 0 ? "unbalanced closing bracket" : "mismatched closing bracket";
                return false;
            }
            p++;
            if (--depth == 0 && !stop_at_top) {
                lx->p = p;
                return true;
            }
            break;
        case '"':
        case '\'':
            lx->p = p;
            if (!hlo_lex_scan_string(lx, why))
                return false;
            p = lx->p;
            break;
        case '\n':
            newline(lx, p);
            p++;
            break;
        default: /* NUL */
            lx->p = p;
            *why = "NUL byte in input";
            return false;
        }
    }
    lx->p = p;
    if (depth > 0) {
        lx->p = open_p;
        lx->line = open_line;
        lx->line_start = open_ls;
        *why = "unclosed bracket";
        return false;
    }
    return true;
}

bool
hlo_lex_scan_balanced(HloLexer *lx, const char **why)
{
    return scan_brackets(lx, false, why);
}

bool
hlo_lex_scan_value(HloLexer *lx, SlStr *out, const char **why)
{
    const char *start = lx->p;
    if (!scan_brackets(lx, true, why))
        return false;
    out->ptr = start;
    out->len = (size_t)(lx->p - start);
    if (out->len == 0) {
        *why = "empty attribute value";
        return false;
    }
    return true;
}
