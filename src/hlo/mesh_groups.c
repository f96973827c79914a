/* mesh_groups.c - replica groups in the mesh-axes form XLA 0.10's printer uses:
 *
 *   replica_groups=mesh['a'=2,'b'=4] {'b'}
 *   replica_groups=mesh['a'=4,'b'=1,'c'=2], device_ids=([2,4]T(1,0)) {'a'}
 *   ... {'b':(1)2}   a sub-axis: 2 of axis b's factors, after the first 1
 *
 * The mesh lays the devices (0..N-1, or `device_ids`, an iota or a list) out in row-major
 * order over the named axes. There is one group per index of the axes (or parts of axes) not
 * listed in braces, holding the devices along the listed ones in the order they are listed.
 * The value becomes the explicit list form, so the rest of the tools see ordinary groups. */
#include <string.h>

#include "hlo/hlo_int.h"

enum { MAX_AXES = 32, MAX_PIECES = 96 };

typedef struct Piece {
    uint32_t axis;
    int64_t pre, size; /* factors of the axis before this piece, and its own */
} Piece;

typedef struct Used {
    uint32_t axis;
    int64_t pre, size; /* size 0: the whole axis */
} Used;

static SlStatus
read_int(HloParser *P, int64_t min, int64_t *out)
{
    if (P->tok.kind != HLO_TOK_INT || P->tok.ival < min)
        return hlo_expected(P, min > 0 ? "a positive integer" : "a non-negative integer");
    *out = P->tok.ival;
    hlo_advance(P);
    return SL_OK;
}

/* '[' or '(' INT (',' INT)* closer, into v[*n]. */
static SlStatus
read_ints(HloParser *P, HloTokKind close, int64_t *v, uint32_t cap, uint32_t *n, int64_t min)
{
    SlStatus st;
    hlo_advance(P);
    *n = 0;
    while (P->tok.kind != close) {
        if (*n && (st = hlo_expect(P, HLO_TOK_COMMA, "','")) != SL_OK)
            return st;
        if (*n == cap)
            return hlo_fail_tok(P, SL_ERR_INVALID, &P->tok, "more than %u values", cap);
        if ((st = read_int(P, min, &v[(*n)++])) != SL_OK)
            return st;
    }
    hlo_advance(P);
    return SL_OK;
}

static SlStatus
axis_index(HloParser *P, SlStr *names, uint32_t n_axes, uint32_t *out)
{
    if (P->tok.kind != HLO_TOK_STRING)
        return hlo_expected(P, "a quoted axis name");
    for (uint32_t a = 0; a < n_axes; a++)
        if (sl_str_eq(names[a], P->tok.text)) {
            *out = a;
            hlo_advance(P);
            return SL_OK;
        }
    return hlo_fail_tok(P, SL_ERR_INVALID, &P->tok, "axis %.*s is not in the mesh",
                        SL_STR_ARG(P->tok.text));
}

/* The row-major index into `dims` of position `k` of the array transposed by `perm`. */
static int64_t
source_index(const int64_t *dims, const uint32_t *perm, uint32_t rank, int64_t k)
{
    int64_t coord[MAX_PIECES];
    for (uint32_t d = rank; d-- > 0;) {
        coord[perm[d]] = k % dims[perm[d]];
        k /= dims[perm[d]];
    }
    int64_t idx = 0;
    for (uint32_t d = 0; d < rank; d++)
        idx = idx * dims[d] + coord[d];
    return idx;
}

/* device_ids=(...) after the mesh: '[' dims ']' ('T' '(' perm ')')? or a list of ids. */
static SlStatus
read_device_ids(HloParser *P, int64_t n, int64_t **ids)
{
    SlStatus st;
    if ((st = hlo_expect(P, HLO_TOK_LPAREN, "'(' after device_ids=")) != SL_OK)
        return st;
    int64_t *v = SL_NEW_ARRAY(P->arena, int64_t, (size_t)n);
    if (!v)
        return hlo_fail_tok(P, SL_ERR_NOMEM, &P->tok, "out of memory");
    if (P->tok.kind == HLO_TOK_LSQUARE) {
        int64_t dims[MAX_PIECES], perm64[MAX_PIECES];
        uint32_t rank, n_perm = 0;
        HloTok at = P->tok;
        if ((st = read_ints(P, HLO_TOK_RSQUARE, dims, MAX_PIECES, &rank, 1)) != SL_OK)
            return st;
        int64_t total = 1;
        for (uint32_t d = 0; d < rank; d++)
            total = total > n ? total : total * dims[d];
        if (total != n)
            return hlo_fail_tok(P, SL_ERR_INVALID, &at,
                                "device_ids hold %lld devices, the mesh %lld", (long long)total,
                                (long long)n);
        uint32_t perm[MAX_PIECES];
        for (uint32_t d = 0; d < rank; d++)
            perm[d] = d;
        if (P->tok.kind == HLO_TOK_IDENT && sl_str_eq_cstr(P->tok.text, "T")) {
            hlo_advance(P);
            if (P->tok.kind != HLO_TOK_LPAREN)
                return hlo_expected(P, "'(' after 'T'");
            at = P->tok;
            if ((st = read_ints(P, HLO_TOK_RPAREN, perm64, MAX_PIECES, &n_perm, 0)) != SL_OK)
                return st;
            bool seen[MAX_PIECES] = {false};
            bool ok = n_perm == rank;
            for (uint32_t d = 0; ok && d < rank; d++) {
                ok = perm64[d] < rank && !seen[perm64[d]];
                if (ok) {
                    seen[perm64[d]] = true;
                    perm[d] = (uint32_t)perm64[d];
                }
            }
            if (!ok)
                return hlo_fail_tok(P, SL_ERR_INVALID, &at, "not a permutation of %u dims", rank);
        }
        for (int64_t k = 0; k < n; k++)
            v[k] = source_index(dims, perm, rank, k);
    } else {
        for (int64_t k = 0; k < n; k++) {
            if (k && (st = hlo_expect(P, HLO_TOK_COMMA, "','")) != SL_OK)
                return st;
            if ((st = read_int(P, 0, &v[k])) != SL_OK)
                return st;
        }
    }
    *ids = v;
    return hlo_expect(P, HLO_TOK_RPAREN, "')' closing device_ids");
}

SlStatus
hlo_parse_mesh_groups(HloParser *P, IrReplicaGroups *g)
{
    SlStatus st;
    HloTok start = P->tok;
    hlo_advance(P); /* mesh */
    if (P->tok.kind != HLO_TOK_LSQUARE)
        return hlo_expected(P, "'[' after mesh");
    hlo_advance(P);
    SlStr names[MAX_AXES];
    int64_t sizes[MAX_AXES];
    uint32_t n_axes = 0;
    int64_t n = 1;
    while (P->tok.kind != HLO_TOK_RSQUARE) {
        if (n_axes && (st = hlo_expect(P, HLO_TOK_COMMA, "',' or ']'")) != SL_OK)
            return st;
        if (n_axes == MAX_AXES)
            return hlo_fail_tok(P, SL_ERR_INVALID, &P->tok, "more than %d mesh axes", MAX_AXES);
        if (P->tok.kind != HLO_TOK_STRING)
            return hlo_expected(P, "a quoted axis name");
        names[n_axes] = P->tok.text;
        hlo_advance(P);
        if ((st = hlo_expect(P, HLO_TOK_EQUAL, "'=' after the axis name")) != SL_OK ||
            (st = read_int(P, 1, &sizes[n_axes])) != SL_OK)
            return st;
        if (sizes[n_axes] > SL_MAX_DEVICES || n * sizes[n_axes] > SL_MAX_DEVICES)
            return hlo_fail_tok(P, SL_ERR_INVALID, &start, "the mesh has more than %d devices",
                                SL_MAX_DEVICES);
        n *= sizes[n_axes++];
    }
    hlo_advance(P);
    int64_t *ids = NULL;
    if (P->tok.kind == HLO_TOK_COMMA) { /* `, device_ids=(...)` belongs to the value */
        HloLexer lx = P->lx;
        HloTok comma = P->tok;
        hlo_advance(P);
        if (P->tok.kind == HLO_TOK_ATTR && sl_str_eq_cstr(P->tok.text, "device_ids")) {
            hlo_advance(P);
            if ((st = read_device_ids(P, n, &ids)) != SL_OK)
                return st;
        } else {
            P->lx = lx;
            P->tok = comma;
        }
    }
    if (P->tok.kind != HLO_TOK_LBRACE)
        return hlo_expected(P, "'{' with the axes the groups span");
    hlo_advance(P);
    Used used[MAX_PIECES];
    uint32_t n_used = 0;
    while (P->tok.kind != HLO_TOK_RBRACE) {
        if (n_used && (st = hlo_expect(P, HLO_TOK_COMMA, "',' or '}'")) != SL_OK)
            return st;
        if (n_used == MAX_PIECES)
            return hlo_fail_tok(P, SL_ERR_INVALID, &P->tok, "too many axes");
        Used u = {0, 1, 0};
        HloTok at = P->tok;
        if ((st = axis_index(P, names, n_axes, &u.axis)) != SL_OK)
            return st;
        if (P->tok.kind == HLO_TOK_COLON) { /* 'x':(pre)size */
            hlo_advance(P);
            if ((st = hlo_expect(P, HLO_TOK_LPAREN, "'(' of a sub-axis")) != SL_OK ||
                (st = read_int(P, 1, &u.pre)) != SL_OK ||
                (st = hlo_expect(P, HLO_TOK_RPAREN, "')'")) != SL_OK ||
                (st = read_int(P, 1, &u.size)) != SL_OK)
                return st;
            if (sizes[u.axis] % (u.pre * u.size))
                return hlo_fail_tok(P, SL_ERR_INVALID, &at, "sub-axis (%lld)%lld does not divide "
                                    "the axis of size %lld", (long long)u.pre,
                                    (long long)u.size, (long long)sizes[u.axis]);
        }
        used[n_used++] = u;
    }
    hlo_advance(P);

    /* Cut every axis where a sub-axis starts or ends; each part is one mesh dimension. */
    Piece pieces[MAX_PIECES];
    uint32_t n_pieces = 0;
    for (uint32_t a = 0; a < n_axes; a++) {
        int64_t cuts[2 * MAX_PIECES + 2];
        uint32_t n_cuts = 0;
        cuts[n_cuts++] = 1;
        for (uint32_t k = 0; k < n_used; k++)
            if (used[k].axis == a && used[k].size) {
                cuts[n_cuts++] = used[k].pre;
                cuts[n_cuts++] = used[k].pre * used[k].size;
            }
        cuts[n_cuts++] = sizes[a];
        for (uint32_t x = 1; x < n_cuts; x++) /* sort, small */
            for (uint32_t y = x; y > 0 && cuts[y - 1] > cuts[y]; y--) {
                int64_t t = cuts[y];
                cuts[y] = cuts[y - 1];
                cuts[y - 1] = t;
            }
        bool any = false;
        for (uint32_t x = 0; x + 1 < n_cuts; x++) {
            if (cuts[x + 1] == cuts[x])
                continue;
            if (cuts[x + 1] % cuts[x] || n_pieces == MAX_PIECES)
                return hlo_fail_tok(P, SL_ERR_INVALID, &start, "sub-axes of %.*s overlap",
                                    SL_STR_ARG(names[a]));
            pieces[n_pieces++] = (Piece){a, cuts[x], cuts[x + 1] / cuts[x]};
            any = true;
        }
        if (!any)
            pieces[n_pieces++] = (Piece){a, 1, 1};
    }
    /* The mesh transposed so that the pieces the groups span come last, in the listed order:
     * each run of `group` consecutive devices is then one group. */
    uint32_t order[MAX_PIECES], rank = 0, span[MAX_PIECES], n_span = 0;
    bool spans[MAX_PIECES] = {false};
    int64_t group = 1;
    for (uint32_t k = 0; k < n_used; k++)
        for (uint32_t p = 0; p < n_pieces; p++) {
            const Piece *x = &pieces[p];
            bool in = x->axis == used[k].axis &&
                      (!used[k].size ||
                       (x->pre >= used[k].pre && x->pre * x->size <= used[k].pre * used[k].size));
            if (in && !spans[p]) {
                spans[p] = true;
                span[n_span++] = p;
                group *= x->size;
            }
        }
    for (uint32_t p = 0; p < n_pieces; p++)
        if (!spans[p])
            order[rank++] = p;
    for (uint32_t k = 0; k < n_span; k++)
        order[rank++] = span[k];
    int64_t dims[MAX_PIECES];
    for (uint32_t p = 0; p < n_pieces; p++)
        dims[p] = pieces[p].size;

    g->is_iota = false;
    g->n_groups = (uint32_t)(n / group);
    g->group_sizes = SL_NEW_ARRAY(P->arena, uint32_t, g->n_groups);
    g->ids = SL_NEW_ARRAY(P->arena, int64_t, (size_t)n);
    if (!g->group_sizes || !g->ids)
        return hlo_fail_tok(P, SL_ERR_NOMEM, &start, "out of memory");
    for (uint32_t k = 0; k < g->n_groups; k++)
        g->group_sizes[k] = (uint32_t)group;
    for (int64_t k = 0; k < n; k++) {
        int64_t d = source_index(dims, order, n_pieces, k);
        g->ids[k] = ids ? ids[d] : d;
    }
    return SL_OK;
}
