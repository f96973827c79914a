/* hlo_int.h - internals shared by the HLO lexer and parser (src/hlo only).
 * The lexer is a cursor over the caller's byte buffer: tokens are slices of it, nothing is
 * allocated per token. Besides whole tokens it offers raw scans (balanced brackets, strings,
 * generic attribute values) that the parser runs from the cursor when a value's form is not
 * token-shaped (metadata, padding, dim labels, unknown attributes).
 * Invariant: the cursor never moves past `end`; embedded NUL bytes are ordinary bad bytes. */
#ifndef SHARDLENS_HLO_INT_H
#define SHARDLENS_HLO_INT_H

#include "base/base.h"
#include "ir/ir.h"

/* Largest rank / window rank / nesting depth accepted; deeper input is rejected, not truncated. */
#define HLO_MAX_RANK  64
#define HLO_MAX_DEPTH 256

typedef enum HloTokKind {
    HLO_TOK_EOF,
    HLO_TOK_IDENT,  /* [A-Za-z_][A-Za-z0-9_.-]* */
    HLO_TOK_NAME,   /* '%' name; text excludes the '%' */
    HLO_TOK_ATTR,   /* identifier immediately followed by '='; text excludes the '=' */
    HLO_TOK_INT,    /* -?[0-9]+, value in ival */
    HLO_TOK_STRING, /* "..." or '...'; text includes the quotes */
    HLO_TOK_LBRACE, HLO_TOK_RBRACE, HLO_TOK_LPAREN, HLO_TOK_RPAREN, HLO_TOK_LSQUARE,
    HLO_TOK_RSQUARE, HLO_TOK_COMMA, HLO_TOK_COLON, HLO_TOK_EQUAL, HLO_TOK_QUESTION,
    HLO_TOK_ARROW,    /* -> */
    HLO_TOK_LEQ,      /* <= */
    HLO_TOK_ELLIPSIS, /* ... */
    HLO_TOK_BAD,      /* anything else; `bad` says why */
} HloTokKind;

typedef struct HloTok {
    HloTokKind kind;
    SlStr text;
    int64_t ival;
    uint32_t line, col; /* 1-based; col in bytes */
    const char *bad;    /* HLO_TOK_BAD: reason */
} HloTok;

typedef struct HloLexer {
    const char *base, *p, *end;
    const char *line_start; /* first byte of the current line */
    uint32_t line;
    const char *path;
} HloLexer;

void hlo_lex_init(HloLexer *lx, SlStr text, const char *path);
void hlo_lex_next(HloLexer *lx, HloTok *t);
/* Skips whitespace and comments; false on an unterminated block comment. */
bool hlo_lex_skip_space(HloLexer *lx);
SlSrcLoc hlo_lex_here(const HloLexer *lx);
SlSrcLoc hlo_tok_loc(const HloLexer *lx, const HloTok *t);
/* Raw scans from the cursor. On failure the cursor stays where the problem is and `why` says
 * what it is; the caller reports it at hlo_lex_here(). */
bool hlo_lex_scan_string(HloLexer *lx, const char **why);   /* cursor at the opening quote */
bool hlo_lex_scan_balanced(HloLexer *lx, const char **why); /* cursor at '(' '[' or '{' */
/* An attribute value of unknown form: brackets balanced, strings skipped, ends before ',',
 * whitespace or an unmatched closer at depth 0. */
bool hlo_lex_scan_value(HloLexer *lx, SlStr *out, const char **why);

/* ---- parser state (parser.c, attrs.c) ---- */

/* A computation reference read before its computation: patched when the file is read. */
typedef struct HloCompFixup {
    IrInstr *instr;
    uint32_t attr;      /* index into instr->attrs */
    uint32_t elem;      /* COMPS: index into the list; COMP: 0 */
    SlSym name;
    uint32_t line, col; /* of the reference, for "undefined computation" */
} HloCompFixup;

/* A small open-addressing table from a word's spelling to its meaning (opcodes, attribute
 * keys), so that the hot path hashes a few bytes instead of interning and looking up. */
#define HLO_WORD_SLOTS 1024 /* power of two; a module uses at most a few hundred words */
typedef struct HloWord {
    SlSym sym; /* NULL: empty */
    uint32_t val;
} HloWord;
/* The slot spelling `text` (a hit: sym set), or the empty slot to fill for it (sym NULL), or
 * NULL when the neighbourhood is full (then do not cache). */
HloWord *hlo_word_slot(HloWord *table, SlStr text);

/* Recently decoded values that instructions may share (metadata, layouts): most repeat. */
#define HLO_RECENT 8

typedef struct HloParser {
    HloLexer lx;
    HloTok tok; /* current token; the cursor is just past it */
    IrModule *m;
    SlArena *arena;
    SlInterner *names;
    SlError *err;
    IrComputation *comp; /* being read */
    SlMap instrs;        /* SlSym -> IrInstr*; an entry counts only if its parent is `comp` */
    SlMap comps;         /* SlSym -> IrComputation* */
    SlMap shardings;     /* interned sharding text -> const ShdSharding* (values are shared:
                            big modules repeat a handful of shardings on every instruction) */
    int64_t sharding_ids_left; /* SHD_MAX_TOTAL_IDS budget of the distinct shardings' ids */
    HloWord ops[HLO_WORD_SLOTS];       /* opcode spelling -> IrOp */
    HloWord attr_keys[HLO_WORD_SLOTS]; /* attribute name -> IrAttrKey */
    const IrMetadata *recent_md[HLO_RECENT]; /* shared, immutable */
    SlSym recent_shd_text[HLO_RECENT];       /* interned sharding text ... */
    const struct ShdSharding *recent_shd[HLO_RECENT]; /* ... and its value */
    SlStr recent_layout[HLO_RECENT];
    const int64_t *recent_dims[HLO_RECENT]; /* shared, never written after parsing (as the
                                               shapes that infer_shape copies already are) */
    uint32_t recent_rank[HLO_RECENT];
    const int64_t *recent_ints[HLO_RECENT]; /* integer lists of attributes: shared the same way */
    uint32_t recent_n_ints[HLO_RECENT];
    IrInstr *recent_instr[HLO_RECENT];       /* of `comp`: operands often name these */
    uint32_t next_md, next_layout, next_instr, next_shd, next_dims, next_ints; /* round-robin */
    uint32_t hit_shd, hit_layout; /* the last hit: tried first, since runs repeat */
    SlVec operands;      /* IrInstr* scratch for one operand list */
    SlVec attrs;         /* IrAttr scratch for one instruction (copied out at exact size) */
    SlVec shapes;        /* IrShape scratch stack for tuple elements */
    SlVec ints;          /* int64_t scratch for list values */
    SlVec sizes;         /* uint32_t scratch for list-of-list sizes */
    SlVec fixups;        /* HloCompFixup */
    SlVec sdy_locs;      /* SdyValueLoc of every `xla.sdy.*` value read (sdy_import) */
    uint32_t depth;      /* tuple-shape nesting */
    SlFileText *src;     /* hlo_parse_file: pages behind the cursor are given back */
    const char *release_at; /* the next cursor position to do that at */
    uint32_t nest;       /* 0: a whole input; n: a recovery module inside a level-n-1 one */
} HloParser;

void hlo_advance(HloParser *P);
/* replica_groups=mesh['a'=2,'b'=4][, device_ids=(...)] {'b'} (XLA 0.10's print form), the
 * current token being `mesh`, into the explicit list form (mesh_groups.c). */
SlStatus hlo_parse_mesh_groups(HloParser *P, struct IrReplicaGroups *g);
/* Fails at the current token: "expected WHAT, got '...'". */
SlStatus hlo_expected(HloParser *P, const char *what);
/* Takes a token of kind `k`, or fails as hlo_expected(P, what). */
SlStatus hlo_expect(HloParser *P, HloTokKind k, const char *what);
SlStatus hlo_fail_tok(HloParser *P, SlStatus st, const HloTok *t, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
SlStatus hlo_fail_here(HloParser *P, SlStatus st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
SlStr hlo_dup(HloParser *P, SlStr s); /* arena copy; ptr NULL on allocation failure */
SlSym hlo_intern(HloParser *P, SlStr s);

/* requires: P->tok is the ATTR token `key=`, the cursor just past '='; P->attrs holds the
 *           attributes of `ins` read so far.
 * produces: the decoded attribute appended to P->attrs; P->tok is the token after the value. */
SlStatus hlo_parse_attr(HloParser *P, IrInstr *ins);
/* frontend_attributes' value {KEY=VALUE, ...}; `strict`: every VALUE a string or {...};
 * *close (when not NULL): the end of its '}'. */
SlStatus hlo_parse_frontend(HloParser *P, IrAttr *a, bool strict, const char **close);
/* Patches every pending computation reference; SL_ERR_INVALID for an unknown name. */
SlStatus hlo_resolve_fixups(HloParser *P);

#endif
