/* sdy_import.c - Shardy's round-trip attributes into GSPMD shardings (sdy.h).
 * Owns: reading the sdy attribute text (meshes, tensor shardings, per-value lists), converting a
 * tensor sharding to a tile assignment the way XLA's Shardy-to-HLO export does, and the module
 * rewrite that XLA's round-trip import implies (which shardings count, the result shardings),
 * and shard_map's manual computations rewritten into GSPMD's form.
 * Does not own: sharding normalization (shd_tiled applies XLA's Subgroup rules).
 * Invariants: every sdy value is read (and checked) before the shardings are rewritten, and on
 * any error the parser discards the module, so no half-imported module escapes; errors point at
 * the byte in the source file.
 *
 * The conversion (XLA convertToHloSharding, non-V3): every mesh axis is split at each sub-axis
 * boundary that the dimension or unreduced axes use ("x":(2)4 of x=16 splits x into 2,4,2), in
 * mesh order, major first. The tile assignment is iota (or the mesh's device_ids) over those
 * pieces, transposed so that the dimensions' axes come first (dimension by dimension, in the
 * order written), then the unreduced axes (one UNREDUCED subgroup dim), then every other piece
 * in mesh order (one REPLICATED subgroup dim when larger than 1). Replicated axes need nothing
 * of their own: axes not sharding a dimension are replicated anyway. Priorities only order
 * Shardy's propagation and have no GSPMD form: read and ignored. */
#include "hlo/sdy.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sharding/shd.h"

#define SDY_MAX_AXES   64  /* mesh axes; more is rejected */
#define SDY_MAX_REFS   128 /* axis references in one tensor sharding */
#define SDY_MAX_RANK   64
#define SDY_MAX_PIECES 256 /* mesh axes after splitting at sub-axis boundaries */

typedef struct SdyMesh {
    SlStr name;
    uint32_t n_axes;
    SlStr *axis_names;
    int64_t *axis_sizes;
    uint32_t n_ids;
    int64_t *ids; /* NULL: iota */
    int64_t total;
} SdyMesh;

typedef struct SdyRef {
    uint32_t axis;     /* index into the mesh */
    int64_t pre, size; /* a whole axis: pre 1, size = the axis size */
} SdyRef;

typedef struct SdyTensor {
    const SdyMesh *mesh;
    uint32_t rank;
    uint32_t dim_first[SDY_MAX_RANK], dim_n[SDY_MAX_RANK]; /* into refs */
    bool dim_open[SDY_MAX_RANK];
    uint32_t n_refs;
    SdyRef refs[SDY_MAX_REFS];
    size_t ref_at[SDY_MAX_REFS]; /* text offset of each reference, for errors */
    uint32_t repl_first, n_repl, unred_first, n_unred;
} SdyTensor;

/* One value's text, unescaped ("\"" -> '"'), with the raw offset of every byte for errors. */
typedef struct SdyText {
    const char *s;
    size_t n, p;
    const uint32_t *raw_off; /* n + 1 entries */
    SlStr raw;
    SlSrcLoc at; /* the raw value's first byte */
    SlError *err;
} SdyText;

typedef struct SdyCtx {
    IrModule *m;
    SlArena *a;
    SlError *err;
    const char *path;
    SlMap locs; /* value pointer -> 1 + index into `loc_list` */
    const SdyValueLoc *loc_list;
    SdyMesh *meshes;
    uint32_t n_meshes;
} SdyCtx;

/* ---- text -------------------------------------------------------------------------------- */

static SlSrcLoc
text_loc(const SdyText *t, size_t k)
{
    SlSrcLoc l = t->at;
    if (!l.line)
        return l;
    uint32_t r = t->raw_off[k < t->n ? k : t->n];
    for (uint32_t i = 0; i < r && i < t->raw.len; i++) {
        if (t->raw.ptr[i] == '\n') {
            l.line++;
            l.col = 1;
        } else {
            l.col++;
        }
    }
    return l;
}

static SlStatus text_fail(SdyText *t, SlStatus st, const char *fmt, const char *arg)
    __attribute__((format(printf, 3, 0)));

/* Fails at the cursor; `fmt` has one %s, for `arg`. */
static SlStatus
text_fail(SdyText *t, SlStatus st, const char *fmt, const char *arg)
{
    char msg[SL_ERROR_MSG_BYTES];
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    snprintf(msg, sizeof(msg), fmt, arg);
#pragma GCC diagnostic pop
    return sl_fail(t->err, st, text_loc(t, t->p), "%s", msg);
}

static SlStatus
text_init(SdyText *t, SlArena *a, SlStr raw, SlSrcLoc at, SlError *err)
{
    memset(t, 0, sizeof(*t));
    t->raw = raw;
    t->at = at;
    t->err = err;
    size_t b = 0, e = raw.len;
    if (e >= 2 && raw.ptr[0] == '"' && raw.ptr[e - 1] == '"') {
        b = 1;
        e--;
    }
    char *s = SL_NEW_ARRAY(a, char, e - b + 1);
    uint32_t *off = SL_NEW_ARRAY(a, uint32_t, e - b + 1);
    if (!s || !off)
        return sl_fail(err, SL_ERR_NOMEM, at, "out of memory");
    size_t n = 0;
    bool quoted = b == 1;
    for (size_t i = b; i < e; i++) {
        off[n] = (uint32_t)i;
        if (quoted && raw.ptr[i] == '\\' && i + 1 < e &&
            (raw.ptr[i + 1] == '"' || raw.ptr[i + 1] == '\\'))
            i++;
        s[n++] = raw.ptr[i];
    }
    off[n] = (uint32_t)e;
    t->s = s;
    t->n = n;
    t->raw_off = off;
    return SL_OK;
}

static void
skip_ws(SdyText *t)
{
    while (t->p < t->n && (t->s[t->p] == ' ' || t->s[t->p] == '\t' || t->s[t->p] == '\n' ||
                           t->s[t->p] == '\r'))
        t->p++;
}

static char
peek(SdyText *t)
{
    skip_ws(t);
    return t->p < t->n ? t->s[t->p] : '\0';
}

/* Consumes `lit` when the text continues with it. */
static bool
eat(SdyText *t, const char *lit)
{
    skip_ws(t);
    size_t l = strlen(lit);
    if (t->n - t->p < l || memcmp(t->s + t->p, lit, l))
        return false;
    t->p += l;
    return true;
}

static SlStatus
expect(SdyText *t, const char *lit, const char *what)
{
    if (eat(t, lit))
        return SL_OK;
    return text_fail(t, SL_ERR_PARSE, "Shardy attribute: expected %s", what);
}

static bool
is_ident_char(char c, bool first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' ||
           c == '.' || (!first && ((c >= '0' && c <= '9') || c == '-'));
}

/* name := '"' [^"]* '"' | IDENT */
static SlStatus
read_name(SdyText *t, bool allow_ident, SlStr *out, const char *what)
{
    skip_ws(t);
    if (t->p < t->n && t->s[t->p] == '"') {
        size_t b = ++t->p;
        while (t->p < t->n && t->s[t->p] != '"')
            t->p++;
        if (t->p >= t->n) {
            t->p = b - 1;
            return text_fail(t, SL_ERR_PARSE, "Shardy attribute: unterminated %s", what);
        }
        *out = (SlStr){t->s + b, t->p - b};
        t->p++;
        return SL_OK;
    }
    if (allow_ident && t->p < t->n && is_ident_char(t->s[t->p], true)) {
        size_t b = t->p;
        while (t->p < t->n && is_ident_char(t->s[t->p], false))
            t->p++;
        *out = (SlStr){t->s + b, t->p - b};
        return SL_OK;
    }
    return text_fail(t, SL_ERR_PARSE, "Shardy attribute: expected %s", what);
}

static SlStatus
read_int(SdyText *t, int64_t lo, int64_t *out, const char *what)
{
    skip_ws(t);
    size_t b = t->p;
    int64_t v = 0;
    while (t->p < t->n && t->s[t->p] >= '0' && t->s[t->p] <= '9') {
        v = v * 10 + (t->s[t->p++] - '0');
        if (v > ((int64_t)1 << 40)) {
            t->p = b;
            return text_fail(t, SL_ERR_INVALID, "Shardy attribute: %s is too large", what);
        }
    }
    if (t->p == b)
        return text_fail(t, SL_ERR_PARSE, "Shardy attribute: expected %s", what);
    if (v < lo) {
        t->p = b;
        return text_fail(t, SL_ERR_INVALID, "Shardy attribute: %s must be positive", what);
    }
    *out = v;
    return SL_OK;
}

/* ---- meshes ------------------------------------------------------------------------------ */

/* mesh := '<' '[' (NAME '=' INT (',' NAME '=' INT)*)? ']' (',' 'device_ids' '=' '[' INT
 *         (',' INT)* ']')? '>'      (after `#sdy.mesh` or `mesh`) */
static SlStatus
parse_mesh(SdyText *t, SlArena *a, SdyMesh *mesh)
{
    SlStatus st;
    SlStr names[SDY_MAX_AXES];
    int64_t sizes[SDY_MAX_AXES];
    uint32_t n = 0;
    if ((st = expect(t, "<", "'<' after the mesh")) || (st = expect(t, "[", "'[' of mesh axes")))
        return st;
    mesh->total = 1;
    if (!eat(t, "]")) {
        do {
            if (n == SDY_MAX_AXES)
                return text_fail(t, SL_ERR_UNSUPPORTED, "Shardy mesh: more than %s axes", "64");
            size_t at = t->p;
            if ((st = read_name(t, false, &names[n], "a quoted mesh axis name")) ||
                (st = expect(t, "=", "'=' and the axis size")) ||
                (st = read_int(t, 1, &sizes[n], "a mesh axis size")))
                return st;
            for (uint32_t k = 0; k < n; k++)
                if (sl_str_eq(names[k], names[n])) {
                    t->p = at;
                    return text_fail(t, SL_ERR_INVALID, "Shardy mesh: axis %s named twice",
                                     "name");
                }
            mesh->total *= sizes[n];
            if (mesh->total > IR_MAX_DEVICES) {
                t->p = at;
                return text_fail(t, SL_ERR_INVALID, "Shardy mesh: more than %s devices",
                                 "65536");
            }
            n++;
        } while (eat(t, ","));
        if ((st = expect(t, "]", "',' or ']' in the mesh axes")))
            return st;
    }
    mesh->n_axes = n;
    mesh->axis_names = n ? SL_DUP_ARRAY(a, SlStr, names, n) : NULL;
    mesh->axis_sizes = n ? SL_DUP_ARRAY(a, int64_t, sizes, n) : NULL;
    if (n && (!mesh->axis_names || !mesh->axis_sizes))
        return sl_fail(t->err, SL_ERR_NOMEM, t->at, "out of memory");
    if (eat(t, ",")) {
        skip_ws(t);
        size_t at = t->p;
        if ((st = expect(t, "device_ids", "'device_ids'")) || (st = expect(t, "=", "'='")) ||
            (st = expect(t, "[", "'[' of device ids")))
            return st;
        int64_t cap = mesh->total, k = 0;
        int64_t *ids = SL_NEW_ARRAY(a, int64_t, cap);
        if (!ids)
            return sl_fail(t->err, SL_ERR_NOMEM, t->at, "out of memory");
        do {
            int64_t v;
            if (k == cap) {
                t->p = at;
                return text_fail(t, SL_ERR_INVALID,
                                 "Shardy mesh: more device ids than the %s of its axes",
                                 "product");
            }
            if ((st = read_int(t, 0, &v, "a device id")))
                return st;
            if (v >= IR_MAX_DEVICES)
                return text_fail(t, SL_ERR_INVALID, "Shardy mesh: device id above %s", "65535");
            ids[k++] = v;
        } while (eat(t, ","));
        if ((st = expect(t, "]", "',' or ']' in the device ids")))
            return st;
        if (k != cap) {
            t->p = at;
            return text_fail(t, SL_ERR_INVALID,
                             "Shardy mesh: device_ids must list one id per device (the %s of "
                             "the axis sizes)",
                             "product");
        }
        for (int64_t x = 0; x < k; x++)
            for (int64_t y = x + 1; y < k && k <= 4096; y++)
                if (ids[x] == ids[y]) {
                    t->p = at;
                    return text_fail(t, SL_ERR_INVALID, "Shardy mesh: a device id is %s twice",
                                     "listed");
                }
        mesh->ids = ids;
        mesh->n_ids = (uint32_t)k;
    }
    return expect(t, ">", "'>' closing the mesh");
}

/* meshes := '{' (NAME '=' '#sdy.mesh' mesh (',' NAME '=' '#sdy.mesh' mesh)*)? '}' */
static SlStatus
parse_meshes(SdyCtx *cx, SdyText *t)
{
    SlStatus st;
    SlVec v = {0};
    if ((st = expect(t, "{", "'{' opening the meshes")))
        return st;
    if (!eat(t, "}")) {
        do {
            SdyMesh mesh;
            memset(&mesh, 0, sizeof(mesh));
            size_t at = t->p;
            if ((st = read_name(t, true, &mesh.name, "a mesh name")) ||
                (st = expect(t, "=", "'=' after the mesh name")) ||
                (st = expect(t, "#sdy.mesh", "'#sdy.mesh'")) || (st = parse_mesh(t, cx->a, &mesh)))
                goto out;
            for (size_t k = 0; k < v.len; k++)
                if (sl_str_eq(SL_VEC_AT(&v, SdyMesh, k).name, mesh.name)) {
                    t->p = at;
                    st = text_fail(t, SL_ERR_INVALID, "Shardy mesh %s defined twice", "name");
                    goto out;
                }
            if (!SL_VEC_PUSH(&v, SdyMesh, mesh)) {
                st = sl_fail(cx->err, SL_ERR_NOMEM, t->at, "out of memory");
                goto out;
            }
        } while (eat(t, ","));
        if ((st = expect(t, "}", "',' or '}' in the meshes")))
            goto out;
    }
    if (peek(t) != '\0') {
        st = text_fail(t, SL_ERR_PARSE, "Shardy meshes: unexpected text after %s", "'}'");
        goto out;
    }
    cx->n_meshes = (uint32_t)v.len;
    cx->meshes = v.len ? SL_DUP_ARRAY(cx->a, SdyMesh, v.data, v.len) : NULL;
    if (v.len && !cx->meshes)
        st = sl_fail(cx->err, SL_ERR_NOMEM, t->at, "out of memory");
out:
    sl_vec_fini(&v);
    return st;
}

/* ---- tensor shardings -------------------------------------------------------------------- */

/* axis := NAME (':' '(' INT ')' INT)?   checked against the mesh */
static SlStatus
parse_axis(SdyText *t, const SdyMesh *mesh, SdyRef *r)
{
    SlStatus st;
    SlStr name;
    size_t at = t->p;
    skip_ws(t);
    at = t->p;
    if ((st = read_name(t, false, &name, "a quoted axis name")))
        return st;
    uint32_t k = 0;
    while (k < mesh->n_axes && !sl_str_eq(mesh->axis_names[k], name))
        k++;
    if (k == mesh->n_axes) {
        t->p = at;
        char buf[96];
        snprintf(buf, sizeof(buf), "%.*s", (int)(name.len < 80 ? name.len : 80), name.ptr);
        return text_fail(t, SL_ERR_INVALID, "Shardy sharding: axis \"%s\" is not in the mesh",
                         buf);
    }
    r->axis = k;
    r->pre = 1;
    r->size = mesh->axis_sizes[k];
    if (eat(t, ":")) {
        if ((st = expect(t, "(", "'(' and the sub-axis pre-size")) ||
            (st = read_int(t, 1, &r->pre, "a sub-axis pre-size")) ||
            (st = expect(t, ")", "')' after the pre-size")) ||
            (st = read_int(t, 1, &r->size, "a sub-axis size")))
            return st;
        int64_t whole = mesh->axis_sizes[k];
        if (r->size < 2 || r->pre * r->size > whole || whole % (r->pre * r->size)) {
            t->p = at;
            return text_fail(t, SL_ERR_INVALID,
                             "Shardy sharding: sub-axis %s does not divide its axis (pre-size "
                             "times size must divide the axis size; size at least 2)",
                             "here");
        }
    }
    return SL_OK;
}

static SlStatus
add_ref(SdyText *t, SdyTensor *ts, const SdyRef *r, size_t at)
{
    if (ts->n_refs == SDY_MAX_REFS)
        return text_fail(t, SL_ERR_UNSUPPORTED, "Shardy sharding: more than %s axis references",
                         "128");
    ts->ref_at[ts->n_refs] = at;
    ts->refs[ts->n_refs++] = *r;
    return SL_OK;
}

/* axes := '{' (axis (',' axis)*)? '}' */
static SlStatus
parse_axis_list(SdyText *t, SdyTensor *ts)
{
    SlStatus st;
    if ((st = expect(t, "{", "'{' of an axis list")))
        return st;
    if (eat(t, "}"))
        return SL_OK;
    do {
        SdyRef r;
        skip_ws(t);
        size_t at = t->p;
        if ((st = parse_axis(t, ts->mesh, &r)) || (st = add_ref(t, ts, &r, at)))
            return st;
    } while (eat(t, ","));
    return expect(t, "}", "',' or '}' in the axis list");
}

/* mesh_ref := '@' NAME | '#sdy.mesh' mesh | 'mesh' mesh */
static SlStatus
parse_mesh_ref(SdyCtx *cx, SdyText *t, const SdyMesh **out)
{
    SlStatus st;
    skip_ws(t);
    size_t at = t->p;
    if (eat(t, "@")) {
        SlStr name;
        if ((st = read_name(t, true, &name, "a mesh name after '@'")))
            return st;
        for (uint32_t k = 0; k < cx->n_meshes; k++)
            if (sl_str_eq(cx->meshes[k].name, name)) {
                *out = &cx->meshes[k];
                return SL_OK;
            }
        t->p = at;
        return text_fail(t, SL_ERR_INVALID,
                         "Shardy sharding: mesh %s is not in the module's xla.sdy.meshes",
                         "reference");
    }
    if (eat(t, "#sdy.mesh") || eat(t, "mesh")) {
        SdyMesh *mesh = SL_NEW(cx->a, SdyMesh);
        if (!mesh)
            return sl_fail(cx->err, SL_ERR_NOMEM, t->at, "out of memory");
        if ((st = parse_mesh(t, cx->a, mesh)))
            return st;
        *out = mesh;
        return SL_OK;
    }
    return text_fail(t, SL_ERR_PARSE, "Shardy sharding: expected %s", "'@mesh' or a mesh");
}

static bool
refs_overlap(const SdyRef *x, const SdyRef *y)
{
    return x->axis == y->axis && x->pre < y->pre * y->size && y->pre < x->pre * x->size;
}

/* tensor := mesh_ref ',' '[' (dim (',' dim)*)? ']' (',' ('replicated' | 'unreduced') '='
 *           axes)* '>'
 * dim    := '{' ((axis (',' axis)* (',' '?')?) | '?')? '}' ('p' INT)?   (after the '<') */
static SlStatus
parse_tensor(SdyCtx *cx, SdyText *t, SdyTensor *ts)
{
    SlStatus st;
    memset(ts, 0, sizeof(*ts));
    if ((st = parse_mesh_ref(cx, t, &ts->mesh)) || (st = expect(t, ",", "',' after the mesh")) ||
        (st = expect(t, "[", "'[' of the dimension shardings")))
        return st;
    if (!eat(t, "]")) {
        do {
            if (ts->rank == SDY_MAX_RANK)
                return text_fail(t, SL_ERR_UNSUPPORTED, "Shardy sharding: rank above %s", "64");
            uint32_t d = ts->rank++;
            ts->dim_first[d] = ts->n_refs;
            if ((st = expect(t, "{", "'{' of a dimension sharding")))
                return st;
            if (eat(t, "?")) {
                ts->dim_open[d] = true;
            } else if (peek(t) != '}') {
                do {
                    if (eat(t, "?")) {
                        ts->dim_open[d] = true;
                        break;
                    }
                    SdyRef r;
                    skip_ws(t);
                    size_t at = t->p;
                    if ((st = parse_axis(t, ts->mesh, &r)) || (st = add_ref(t, ts, &r, at)))
                        return st;
                } while (eat(t, ","));
            }
            if ((st = expect(t, "}", "',' or '}' in a dimension sharding")))
                return st;
            ts->dim_n[d] = ts->n_refs - ts->dim_first[d];
            if (t->p < t->n && t->s[t->p] == 'p') { /* priority: no GSPMD form */
                int64_t prio;
                t->p++;
                if ((st = read_int(t, 0, &prio, "a priority after 'p'")))
                    return st;
            }
        } while (eat(t, ","));
        if ((st = expect(t, "]", "',' or ']' in the dimension shardings")))
            return st;
    }
    bool seen_repl = false, seen_unred = false;
    while (eat(t, ",")) {
        bool repl;
        skip_ws(t);
        size_t at = t->p;
        if (eat(t, "replicated"))
            repl = true;
        else if (eat(t, "unreduced"))
            repl = false;
        else
            return text_fail(t, SL_ERR_UNSUPPORTED,
                             "Shardy sharding: expected 'replicated=' or 'unreduced=' (other "
                             "%s are not supported)",
                             "fields");
        if ((repl && seen_repl) || (!repl && seen_unred)) {
            t->p = at;
            return text_fail(t, SL_ERR_PARSE, "Shardy sharding: %s given twice", "axis list");
        }
        uint32_t first = ts->n_refs;
        if ((st = expect(t, "=", "'=' and an axis list")) || (st = parse_axis_list(t, ts)))
            return st;
        if (repl) {
            seen_repl = true;
            ts->repl_first = first;
            ts->n_repl = ts->n_refs - first;
        } else {
            seen_unred = true;
            ts->unred_first = first;
            ts->n_unred = ts->n_refs - first;
        }
    }
    if ((st = expect(t, ">", "'>' closing the sharding")))
        return st;
    for (uint32_t x = 0; x < ts->n_refs; x++)
        for (uint32_t y = x + 1; y < ts->n_refs; y++)
            if (refs_overlap(&ts->refs[x], &ts->refs[y])) {
                t->p = ts->ref_at[y];
                return text_fail(t, SL_ERR_INVALID,
                                 "Shardy sharding: an axis (or overlapping sub-axes) is used "
                                 "twice in this %s",
                                 "sharding");
            }
    return SL_OK;
}

/* ---- conversion -------------------------------------------------------------------------- */

static int
cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* The GSPMD sharding of one tensor sharding (XLA convertToHloSharding; see the file comment). */
static const ShdSharding *
convert_manual(SlArena *a, const SdyTensor *ts, const bool *manual)
{
    const SdyMesh *mesh = ts->mesh;
    if (mesh->n_axes == 0)
        return mesh->n_ids ? shd_maximal(a, mesh->ids[0]) : shd_replicated(a);
    /* the pieces: each axis cut at the boundaries its dimension / unreduced sub-axes use */
    uint32_t n_p = 0;
    uint32_t p_axis[SDY_MAX_PIECES];
    int64_t p_pre[SDY_MAX_PIECES], p_size[SDY_MAX_PIECES];
    for (uint32_t ax = 0; ax < mesh->n_axes; ax++) {
        int64_t cut[2 * SDY_MAX_REFS + 2];
        uint32_t n_cut = 0;
        cut[n_cut++] = 1;
        cut[n_cut++] = mesh->axis_sizes[ax];
        for (uint32_t k = 0; k < ts->n_refs; k++) {
            bool counted = !(k >= ts->repl_first && k < ts->repl_first + ts->n_repl);
            const SdyRef *r = &ts->refs[k];
            if (!counted || r->axis != ax || (manual && manual[ax]))
                continue;
            cut[n_cut++] = r->pre;
            cut[n_cut++] = r->pre * r->size;
        }
        qsort(cut, n_cut, sizeof(int64_t), cmp_i64);
        for (uint32_t k = 0; k + 1 < n_cut; k++) {
            /* equal cuts are one boundary; an axis of size 1 is still one (size-1) piece */
            if (cut[k] == cut[k + 1] && !(mesh->axis_sizes[ax] == 1 && k == 0))
                continue;
            if (n_p == SDY_MAX_PIECES)
                return NULL;
            p_axis[n_p] = ax;
            p_pre[n_p] = cut[k];
            p_size[n_p] = cut[k + 1] / cut[k];
            n_p++;
        }
    }
    /* the transposition: dimension axes, then unreduced axes, then the rest in mesh order */
    int64_t tile[SDY_MAX_RANK + 2];
    ShdSubgroup types[3];
    uint32_t n_tile = ts->rank, n_types = 0, n_perm = 0;
    uint32_t perm[SDY_MAX_PIECES];
    bool placed[SDY_MAX_PIECES] = {false};
    for (uint32_t d = 0; d < ts->rank; d++)
        tile[d] = 1;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && manual) { /* the manual axes: one MANUAL subgroup dim, mesh order */
            tile[n_tile] = 1;
            for (uint32_t q = 0; q < n_p; q++)
                if (manual[p_axis[q]] && !placed[q]) {
                    placed[q] = true;
                    perm[n_perm++] = q;
                    tile[n_tile] *= p_size[q];
                }
            n_tile++;
            types[n_types++] = SHD_SUB_MANUAL;
        }
        for (uint32_t d = 0; d < (pass ? 1u : ts->rank); d++) {
            uint32_t first = pass ? ts->unred_first : ts->dim_first[d];
            uint32_t n = pass ? ts->n_unred : ts->dim_n[d];
            if (pass && n)
                tile[n_tile] = 1;
            for (uint32_t k = first; k < first + n; k++) {
                const SdyRef *r = &ts->refs[k];
                if (manual && manual[r->axis])
                    continue; /* inside a manual computation only the free axes tile */
                uint32_t q = 0;
                while (q < n_p && !(p_axis[q] == r->axis && p_pre[q] == r->pre &&
                                    p_size[q] == r->size))
                    q++;
                if (q == n_p || placed[q])
                    return NULL; /* parse_tensor rejects overlaps: not reached */
                placed[q] = true;
                perm[n_perm++] = q;
                tile[pass ? n_tile : d] *= r->size;
            }
            if (pass && n) {
                n_tile++;
                types[n_types++] = SHD_SUB_UNREDUCED;
            }
        }
    }
    int64_t replicated = 1;
    for (uint32_t q = 0; q < n_p; q++)
        if (!placed[q]) {
            perm[n_perm++] = q;
            replicated *= p_size[q];
        }
    if (replicated > 1) {
        tile[n_tile++] = replicated;
        types[n_types++] = SHD_SUB_REPLICATED;
    }
    /* devices[i]: element i (row-major) of the piece array transposed by `perm` */
    int64_t total = mesh->total;
    int64_t *devs = SL_NEW_ARRAY(a, int64_t, total);
    if (!devs)
        return NULL;
    int64_t stride[SDY_MAX_PIECES], idx[SDY_MAX_PIECES] = {0};
    int64_t s = 1;
    for (uint32_t q = n_p; q-- > 0;) {
        stride[q] = s;
        s *= p_size[q];
    }
    for (int64_t i = 0; i < total; i++) {
        int64_t src = 0;
        for (uint32_t k = 0; k < n_p; k++)
            src += idx[k] * stride[perm[k]];
        devs[i] = mesh->ids ? mesh->ids[src] : src;
        for (uint32_t k = n_p; k-- > 0;) { /* next index of the transposed array */
            if (++idx[k] < p_size[perm[k]])
                break;
            idx[k] = 0;
        }
    }
    return shd_tiled(a, tile, n_tile, devs, n_types ? types : NULL, n_types);
}

static const ShdSharding *
convert(SlArena *a, const SdyTensor *ts)
{
    return convert_manual(a, ts, NULL);
}

/* ---- the module -------------------------------------------------------------------------- */

static SlStr
strip_quotes(SlStr s)
{
    if (s.len >= 2 && s.ptr[0] == '"' && s.ptr[s.len - 1] == '"')
        return (SlStr){s.ptr + 1, s.len - 2};
    return s;
}

static SlStr
call_target(const IrInstr *i)
{
    const IrAttr *a = i->op == IR_OP_CUSTOM_CALL ? ir_instr_find_attr(i, IR_ATTR_CUSTOM_CALL_TARGET)
                                                 : NULL;
    return a ? strip_quotes(a->u.text) : (SlStr){"", 0};
}

static bool
target_is(const IrInstr *i, const char *t)
{
    return sl_str_eq_cstr(call_target(i), t);
}

static const IrFrontendAttr *
find_frontend(const IrInstr *i, const char *key)
{
    const IrAttr *a = ir_instr_find_attr(i, IR_ATTR_FRONTEND_ATTRIBUTES);
    if (!a)
        return NULL;
    for (uint32_t k = 0; k < a->u.frontend.n; k++)
        if (sl_str_eq_cstr(sl_sym_str(a->u.frontend.v[k].key), key))
            return &a->u.frontend.v[k];
    return NULL;
}

static SlSrcLoc
value_loc(const SdyCtx *cx, const char *value, const IrInstr *owner)
{
    uint64_t k;
    if (sl_map_get(&cx->locs, SL_MAP_KEY(value), &k)) {
        const SdyValueLoc *l = &cx->loc_list[k - 1];
        return (SlSrcLoc){cx->path, l->line, l->col};
    }
    return (SlSrcLoc){cx->path, owner ? owner->src_line : 0, owner ? owner->src_col : 0};
}

static SlSrcLoc
instr_loc(const SdyCtx *cx, const IrInstr *i)
{
    return (SlSrcLoc){cx->path, i->src_line, i->src_col};
}

/* An instruction's `xla.sdy.sharding`: one tensor sharding, or a per-value list whose length
 * is the number of results (array leaves of the shape; 1 for an array). `open` (may be NULL)
 * gets the open dims of a single array value. */
typedef struct SdyParsed {
    const ShdSharding *sharding;
    const SdyMesh *mesh; /* of the (last) value sharding */
    const SdyTensor **tensors; /* per value, as read (in the arena) */
    uint32_t n_tensors;
    uint32_t n_open;
    int64_t open[SDY_MAX_RANK];
} SdyParsed;

static SlStatus
check_rank(SdyCtx *cx, SdyText *t, const SdyTensor *ts, const IrShape *shape, const IrInstr *i)
{
    /* a maximal (or empty) mesh may leave the dimensions out, as Shardy's import writes it */
    if (!ir_shape_is_array(shape) || ts->rank == shape->rank ||
        (ts->mesh->n_axes == 0 && ts->rank == 0))
        return SL_OK;
    (void)t;
    return sl_fail(cx->err, SL_ERR_INVALID, instr_loc(cx, i),
                   "%s: its xla.sdy.sharding has %u dimension shardings but the value has rank "
                   "%u",
                   sl_sym_cstr(i->name), ts->rank, shape->rank);
}

static SlStatus
convert_failed(SdyCtx *cx, const IrInstr *i)
{
    if (sl_arena_failed(cx->a))
        return sl_fail(cx->err, SL_ERR_NOMEM, instr_loc(cx, i), "out of memory");
    return sl_fail(cx->err, SL_ERR_UNSUPPORTED, instr_loc(cx, i),
                   "%s: its xla.sdy.sharding splits the mesh into more than %d pieces",
                   sl_sym_cstr(i->name), SDY_MAX_PIECES);
}

/* sharding := '#sdy.sharding' '<' tensor | '#sdy.sharding_per_value' '<' '[' ('<' tensor
 *             (',' '<' tensor)*)? ']' '>' */
static SlStatus
parse_instr_sharding(SdyCtx *cx, const IrInstr *i, const IrFrontendAttr *f, const IrShape *shape,
                     bool keep, SdyParsed *out)
{
    SlStatus st;
    SdyText t;
    SdyTensor *ts = SL_NEW(cx->a, SdyTensor);
    memset(out, 0, sizeof(*out));
    if (!ts)
        return sl_fail(cx->err, SL_ERR_NOMEM, instr_loc(cx, i), "out of memory");
    if ((st = text_init(&t, cx->a, f->value, value_loc(cx, f->value.ptr, i), cx->err)))
        return st;
    uint32_t n_leaves = ir_shape_is_tuple(shape) ? ir_shape_leaf_count(shape) : 1;
    if (eat(&t, "#sdy.sharding_per_value")) {
        if ((st = expect(&t, "<", "'<'")) || (st = expect(&t, "[", "'[' of the value shardings")))
            return st;
        const ShdSharding *buf[64], **leaves = buf;
        uint32_t n = 0;
        if (n_leaves > SL_COUNTOF(buf) && !(leaves = SL_NEW_ARRAY(cx->a, const ShdSharding *,
                                                                 n_leaves)))
            return sl_fail(cx->err, SL_ERR_NOMEM, instr_loc(cx, i), "out of memory");
        if (keep && !(out->tensors = SL_NEW_ARRAY(cx->a, const SdyTensor *, n_leaves + 1)))
            return sl_fail(cx->err, SL_ERR_NOMEM, instr_loc(cx, i), "out of memory");
        if (!eat(&t, "]")) {
            do {
                size_t at = t.p;
                if (keep && n > 0 && !(ts = SL_NEW(cx->a, SdyTensor)))
                    return sl_fail(cx->err, SL_ERR_NOMEM, instr_loc(cx, i), "out of memory");
                if ((st = expect(&t, "<", "'<' opening a value sharding")) ||
                    (st = parse_tensor(cx, &t, ts)))
                    return st;
                if (n == n_leaves) {
                    t.p = at;
                    return text_fail(&t, SL_ERR_INVALID,
                                     "Shardy sharding: more value shardings than the %s has "
                                     "results",
                                     "instruction");
                }
                const IrShape *leaf = ir_shape_is_tuple(shape) ? ir_shape_leaf(shape, n) : shape;
                if ((st = check_rank(cx, &t, ts, leaf, i)))
                    return st;
                out->mesh = ts->mesh;
                if (keep)
                    out->tensors[out->n_tensors++] = ts;
                if (!(leaves[n++] = convert(cx->a, ts)))
                    return convert_failed(cx, i);
                if (n_leaves == 1 && !ir_shape_is_tuple(shape))
                    for (uint32_t d = 0; d < ts->rank; d++)
                        if (ts->dim_open[d])
                            out->open[out->n_open++] = d;
            } while (eat(&t, ","));
            if ((st = expect(&t, "]", "',' or ']' in the value shardings")))
                return st;
        }
        if ((st = expect(&t, ">", "'>' closing the value shardings")))
            return st;
        if (n != n_leaves && !(n == 1 && n_leaves == 0))
            return sl_fail(cx->err, SL_ERR_INVALID, instr_loc(cx, i),
                           "%s: its xla.sdy.sharding lists %u value shardings for %u results",
                           sl_sym_cstr(i->name), n, n_leaves);
        out->sharding = ir_shape_is_tuple(shape) ? shd_tuple(cx->a, leaves, n) : leaves[0];
    } else if (eat(&t, "#sdy.sharding")) {
        if ((st = expect(&t, "<", "'<'")) || (st = parse_tensor(cx, &t, ts)) ||
            (st = check_rank(cx, &t, ts, shape, i)))
            return st;
        if (ir_shape_is_tuple(shape))
            return sl_fail(cx->err, SL_ERR_INVALID, instr_loc(cx, i),
                           "%s: a tuple-shaped value needs #sdy.sharding_per_value",
                           sl_sym_cstr(i->name));
        out->mesh = ts->mesh;
        if (keep && (out->tensors = SL_NEW_ARRAY(cx->a, const SdyTensor *, 1)))
            out->tensors[out->n_tensors++] = ts;
        if (!(out->sharding = convert(cx->a, ts)))
            return convert_failed(cx, i);
        for (uint32_t d = 0; d < ts->rank; d++)
            if (ts->dim_open[d])
                out->open[out->n_open++] = d;
    } else {
        return text_fail(&t, SL_ERR_PARSE, "Shardy sharding: expected %s",
                         "'#sdy.sharding<' or '#sdy.sharding_per_value<'");
    }
    if (peek(&t) != '\0')
        return text_fail(&t, SL_ERR_PARSE, "Shardy sharding: unexpected text after %s", "'>'");
    if (!out->sharding)
        return sl_fail(cx->err, SL_ERR_NOMEM, instr_loc(cx, i), "out of memory");
    return SL_OK;
}

static SlStatus
set_sharding(SdyCtx *cx, IrInstr *i, const ShdSharding *s)
{
    IrAttr *a = ir_instr_find_attr_mut(i, IR_ATTR_SHARDING);
    if (!a) {
        if (!(a = ir_instr_add_attr(cx->m, i, IR_ATTR_SHARDING)))
            return sl_fail(cx->err, SL_ERR_NOMEM, instr_loc(cx, i), "out of memory");
        a = ir_instr_place_sharding(i, a);
    }
    a->u.sharding = s;
    return SL_OK;
}

/* An open dimension of a `Sharding` call may still be refined by propagation: GSPMD says so
 * with `unspecified_dims` in the backend_config (JAX's GSPMD lowering of UNCONSTRAINED). Open
 * dimensions anywhere else are kept closed: GSPMD shardings have no open dimensions. */
static SlStatus
set_unspecified(SdyCtx *cx, IrInstr *i, const int64_t *dims, uint32_t n)
{
    if (!n || ir_instr_find_attr(i, IR_ATTR_BACKEND_CONFIG))
        return SL_OK;
    SlBuf b;
    sl_buf_init(&b);
    sl_buf_puts(&b, "\"unspecified_dims=[");
    for (uint32_t k = 0; k < n; k++)
        sl_buf_printf(&b, "%s%lld", k ? "," : "", (long long)dims[k]);
    sl_buf_puts(&b, "]\"");
    SlStr v = sl_buf_str(&b);
    char *copy = sl_arena_strndup(cx->a, v.ptr, v.len);
    size_t len = v.len;
    sl_buf_fini(&b);
    IrAttr *a = copy ? ir_instr_add_attr(cx->m, i, IR_ATTR_BACKEND_CONFIG) : NULL;
    if (!a)
        return sl_fail(cx->err, SL_ERR_NOMEM, instr_loc(cx, i), "out of memory");
    a->u.text = (SlStr){copy, len};
    return SL_OK;
}

static SlStatus
mark_open(SdyCtx *cx, IrInstr *i, const SdyParsed *p)
{
    return set_unspecified(cx, i, p->open, p->n_open);
}

static bool
is_python_callback(const IrInstr *i)
{
    SlStr t = call_target(i);
    return sl_str_eq_cstr(t, "xla_python_cpu_callback") ||
           sl_str_eq_cstr(t, "xla_python_gpu_callback") ||
           sl_str_eq_cstr(t, "xla_ffi_python_cpu_callback") ||
           sl_str_eq_cstr(t, "xla_ffi_python_gpu_callback");
}

/* Shardy constructs without a GSPMD rewrite here (yet): exit 3, named. */
static SlStatus
check_supported(SdyCtx *cx, const IrInstr *i)
{
    if (target_is(i, "xla.sdy.ShardingGroup"))
        return sl_fail(cx->err, SL_ERR_UNSUPPORTED, instr_loc(cx, i),
                       "%s: custom call xla.sdy.ShardingGroup (a sharding group) is not "
                       "supported: GSPMD's shard_as needs a sharding on the grouped values",
                       sl_sym_cstr(i->name));
    return SL_OK;
}

/* The entry root's leaves that an FuncResultSharding call feeds (through tuple and
 * get-tuple-element of a tuple): leaf_frs[leaf] = the call, or NULL. */
static void
root_leaves(IrInstr *v, uint32_t leaf, IrInstr **leaf_frs, uint32_t depth)
{
    if (depth > 64)
        return;
    if (v->op == IR_OP_TUPLE) {
        for (uint32_t k = 0; k < v->n_operands; k++) {
            root_leaves(v->operands[k], leaf, leaf_frs, depth + 1);
            leaf += ir_shape_is_tuple(&v->operands[k]->shape)
                        ? ir_shape_leaf_count(&v->operands[k]->shape)
                        : 1;
        }
        return;
    }
    int64_t idx;
    if (v->op == IR_OP_GET_TUPLE_ELEMENT && v->operands[0]->op == IR_OP_TUPLE &&
        ir_instr_int_attr(v, IR_ATTR_INDEX, &idx) && idx >= 0 &&
        idx < v->operands[0]->n_operands) {
        root_leaves(v->operands[0]->operands[idx], leaf, leaf_frs, depth + 1);
        return;
    }
    if (target_is(v, "xla.sdy.FuncResultSharding") && !ir_shape_is_tuple(&v->shape))
        leaf_frs[leaf] = v;
}

static SlStatus
import_results(SdyCtx *cx, const SdyParsed *frs_sharding, SlMap *frs_index)
{
    IrComputation *entry = cx->m->entry;
    IrInstr *root = entry ? entry->root : NULL;
    if (!root)
        return SL_OK;
    bool tuple = ir_shape_is_tuple(&root->shape);
    uint32_t n = tuple ? ir_shape_leaf_count(&root->shape) : 1;
    IrInstr **leaf_frs = SL_NEW_ARRAY(cx->a, IrInstr *, n ? n : 1);
    const ShdSharding **leaves = SL_NEW_ARRAY(cx->a, const ShdSharding *, n ? n : 1);
    if (!leaf_frs || !leaves)
        return sl_fail(cx->err, SL_ERR_NOMEM, instr_loc(cx, root), "out of memory");
    root_leaves(root, 0, leaf_frs, 0);
    const ShdSharding *old = ir_instr_sharding(root);
    bool any = false;
    for (uint32_t k = 0; k < n; k++) {
        uint64_t x;
        if (leaf_frs[k] && sl_map_get(frs_index, SL_MAP_KEY(leaf_frs[k]), &x)) {
            leaves[k] = frs_sharding[x].sharding;
            any = true;
        } else {
            /* a result without FuncResultSharding: XLA leaves it to propagation; a tuple
             * sharding needs every leaf, so such a leaf keeps what it had (or replicated) */
            leaves[k] = old ? shd_leaf(old, k) : shd_replicated(cx->a);
        }
    }
    if (!any)
        return SL_OK;
    const ShdSharding *s = tuple ? shd_tuple(cx->a, leaves, n) : leaves[0];
    if (!s)
        return sl_fail(cx->err, SL_ERR_NOMEM, instr_loc(cx, root), "out of memory");
    return set_sharding(cx, root, s);
}

/* Removes FuncResultSharding calls: every use reads the operand instead (a use other than the
 * entry root becomes unconstrained: XLA turns it into a constraint with all dims open, which
 * constrains nothing a GSPMD propagation could not change). */
static void
forward_frs(IrModule *m)
{
    for (uint32_t c = 0; c < m->n_comps; c++) {
        IrComputation *comp = m->comps[c];
        uint32_t w = 0;
        for (uint32_t k = 0; k < comp->n_instrs; k++) {
            IrInstr *i = comp->instrs[k];
            for (uint32_t o = 0; o < i->n_operands; o++)
                while (target_is(i->operands[o], "xla.sdy.FuncResultSharding") &&
                       i->operands[o]->n_operands == 1)
                    i->operands[o] = i->operands[o]->operands[0];
            if (target_is(i, "xla.sdy.FuncResultSharding") && i->n_operands == 1) {
                if (comp->root == i)
                    comp->root = i->operands[0];
                continue;
            }
            comp->instrs[w++] = i;
        }
        comp->n_instrs = w;
    }
}

/* ---- shard_map: manual computations -------------------------------------------------- */

/* XLA's export of a manual computation, in GSPMD terms (what JAX's GSPMD lowering writes):
 *   GlobalToLocalShape(a_1..a_n)  ->  per operand: copy(a_k) with the in-sharding, then
 *                                     custom-call SPMDFullToShardShape {manual} (local shape)
 *   call(body)                    ->  the call, its get-tuple-elements and every instruction of
 *                                     the body (and of what it calls) {manual}
 *   LocalToGlobalShape(r_1..r_m)  ->  per result: copy(r_k) {manual}, then custom-call
 *                                     SPMDShardToFullShape with the out-sharding
 * Over some axes (`axis_names=`) the local values keep the free axes plus a MANUAL subgroup;
 * the body's parameters and results take them and propagation fills the rest of the body, as
 * Shardy's propagation does there. Open dimensions (free axes propagation may add) make the
 * copies `Sharding` calls and both them and the conversion carry `unspecified_dims`: GSPMD's
 * partial-auto form, which its propagation refines. */

static bool
is_manual_body_call(const IrInstr *i)
{
    const IrComputation *callee = i->op == IR_OP_CALL ? ir_instr_called(i, IR_ATTR_TO_APPLY) : NULL;
    return callee && strstr(sl_sym_cstr(callee->name), "manual_computation_body");
}

/* manual_axes := '#sdy' '<' 'manual_axes' '{' (NAME (',' NAME)*)? '}' '>'
 * `mask` (SDY_MAX_AXES entries) gets the manual axes of `mesh`; `full`: they are all of it. */
static SlStatus
read_manual_axes(SdyCtx *cx, const IrInstr *i, const SdyMesh *mesh, bool *mask, bool *full)
{
    SlStatus st;
    const IrFrontendAttr *f = find_frontend(i, "xla.sdy.manual_axes");
    if (!f)
        return sl_fail(cx->err, SL_ERR_INVALID, instr_loc(cx, i),
                       "%s: a shard_map custom call without xla.sdy.manual_axes",
                       sl_sym_cstr(i->name));
    SdyText t;
    if ((st = text_init(&t, cx->a, f->value, value_loc(cx, f->value.ptr, i), cx->err)) ||
        (st = expect(&t, "#sdy", "'#sdy<manual_axes{...}>'")) || (st = expect(&t, "<", "'<'")) ||
        (st = expect(&t, "manual_axes", "'manual_axes'")) || (st = expect(&t, "{", "'{'")))
        return st;
    int64_t prod = 1;
    if (!eat(&t, "}")) {
        do {
            SlStr name;
            skip_ws(&t);
            size_t at = t.p;
            if ((st = read_name(&t, false, &name, "a quoted axis name")))
                return st;
            uint32_t k = 0;
            while (mesh && k < mesh->n_axes && !sl_str_eq(mesh->axis_names[k], name))
                k++;
            if (!mesh || k == mesh->n_axes) {
                t.p = at;
                return text_fail(&t, SL_ERR_INVALID, "Shardy manual axes: axis %s not in the mesh",
                                 "is");
            }
            prod *= mesh->axis_sizes[k];
            mask[k] = true;
        } while (eat(&t, ","));
        if ((st = expect(&t, "}", "',' or '}'")))
            return st;
    }
    if ((st = expect(&t, ">", "'>'")))
        return st;
    *full = mesh && prod == mesh->total;
    return SL_OK;
}

/* The local (in-body) sharding of a value of rank `rank` replicated over the free axes. */
static const ShdSharding *
manual_replicated(SlArena *a, const SdyMesh *mesh, uint32_t rank, const bool *mask)
{
    SdyTensor *ts = SL_NEW(a, SdyTensor);
    if (!ts)
        return NULL;
    ts->mesh = mesh;
    ts->rank = rank;
    return convert_manual(a, ts, mask);
}

static const ShdSharding *
manual_like(SlArena *a, const IrShape *shape)
{
    if (!ir_shape_is_tuple(shape))
        return shd_manual(a);
    uint32_t n = ir_shape_leaf_count(shape);
    const ShdSharding **leaves = SL_NEW_ARRAY(a, const ShdSharding *, n ? n : 1);
    if (!leaves)
        return NULL;
    for (uint32_t k = 0; k < n; k++)
        leaves[k] = shd_manual(a);
    return shd_tuple(a, leaves, n);
}

/* A new one-operand instruction next to `like`, appended to `out`. */
static IrInstr *
add_new(SdyCtx *cx, IrComputation *c, IrOp op, const IrShape *shape, IrInstr *operand,
        const char *target, const ShdSharding *s, const IrInstr *like, SlVec *out)
{
    IrInstr *n = ir_instr_new(cx->m, op, shape, &operand, 1);
    if (!n)
        return NULL;
    n->name = ir_module_unique_name(cx->m, sl_sym_str(like->name));
    n->parent = c;
    n->src_line = like->src_line;
    n->src_col = like->src_col;
    if (target) {
        IrAttr *a = ir_instr_add_attr(cx->m, n, IR_ATTR_CUSTOM_CALL_TARGET);
        size_t len = strlen(target) + 2;
        char *q = a ? SL_NEW_ARRAY(cx->a, char, len + 1) : NULL;
        if (!q)
            return NULL;
        snprintf(q, len + 1, "\"%s\"", target);
        a->u.text = (SlStr){q, len};
    }
    if (!n->name || !s || set_sharding(cx, n, s) != SL_OK || !SL_VEC_PUSH(out, IrInstr *, n))
        return NULL;
    return n;
}

/* The shape of a custom call's operands as one value (a tuple when several). */
static IrShape
operands_shape(SlArena *a, const IrInstr *i)
{
    if (i->n_operands == 1)
        return i->operands[0]->shape;
    IrShape t;
    memset(&t, 0, sizeof(t));
    t.dtype = IR_DT_TUPLE;
    t.elems = SL_NEW_ARRAY(a, IrShape, i->n_operands ? i->n_operands : 1);
    if (t.elems) {
        t.n_elems = i->n_operands;
        for (uint32_t k = 0; k < i->n_operands; k++)
            t.elems[k] = i->operands[k]->shape;
    }
    return t;
}

static SlStatus
manualize(SdyCtx *cx, IrComputation *body, uint32_t depth)
{
    if (depth > 64)
        return sl_fail(cx->err, SL_ERR_UNSUPPORTED, (SlSrcLoc){cx->path, 0, 0},
                       "shard_map bodies nested deeper than 64 calls");
    for (uint32_t k = 0; k < body->n_instrs; k++) {
        IrInstr *i = body->instrs[k];
        if (target_is(i, "SPMDFullToShardShape") || target_is(i, "SPMDShardToFullShape"))
            return sl_fail(cx->err, SL_ERR_UNSUPPORTED, instr_loc(cx, i),
                           "%s: a shard_map inside a shard_map is not supported",
                           sl_sym_cstr(i->name));
        SlStatus st = set_sharding(cx, i, manual_like(cx->a, &i->shape));
        if (st)
            return st;
        static const IrAttrKey k_callees[] = {IR_ATTR_TO_APPLY, IR_ATTR_BODY, IR_ATTR_CONDITION,
                                              IR_ATTR_TRUE_COMPUTATION,
                                              IR_ATTR_FALSE_COMPUTATION};
        if (i->op != IR_OP_CALL && i->op != IR_OP_WHILE && i->op != IR_OP_CONDITIONAL)
            continue;
        for (size_t a = 0; a < SL_COUNTOF(k_callees); a++) {
            IrComputation *callee = ir_instr_called(i, k_callees[a]);
            if (callee && (st = manualize(cx, callee, depth + 1)))
                return st;
        }
        const IrAttr *br = ir_instr_find_attr(i, IR_ATTR_BRANCH_COMPUTATIONS);
        for (uint32_t b = 0; br && b < br->u.comps.n; b++)
            if ((st = manualize(cx, br->u.comps.v[b], depth + 1)))
                return st;
    }
    return SL_OK;
}

/* A shard_map over some axes: result `v` of the body call (the call itself or one of its
 * get-tuple-elements) has the local sharding `s`; so do the call's leaf and the body's root. */
static SlStatus
set_local_result(SdyCtx *cx, IrInstr *v, const ShdSharding *s, const SdyMesh *mesh,
                 const bool *mask)
{
    SlStatus st;
    IrInstr *call = v;
    int64_t leaf = -1;
    if (v->op == IR_OP_GET_TUPLE_ELEMENT && is_manual_body_call(v->operands[0])) {
        call = v->operands[0];
        if (!ir_instr_int_attr(v, IR_ATTR_INDEX, &leaf))
            return SL_OK;
    }
    if (!is_manual_body_call(call))
        return sl_fail(cx->err, SL_ERR_UNSUPPORTED, instr_loc(cx, v),
                       "%s: a LocalToGlobalShape operand that is no result of the shard_map's "
                       "body call",
                       sl_sym_cstr(v->name));
    if ((st = set_sharding(cx, v, s)))
        return st;
    const ShdSharding *cs = s;
    if (leaf >= 0) {
        uint32_t n = ir_shape_leaf_count(&call->shape);
        const ShdSharding *old = ir_instr_sharding(call);
        const ShdSharding **leaves = SL_NEW_ARRAY(cx->a, const ShdSharding *, n ? n : 1);
        if (!leaves || leaf >= n)
            return sl_fail(cx->err, SL_ERR_NOMEM, instr_loc(cx, v), "out of memory");
        for (uint32_t k = 0; k < n; k++)
            leaves[k] = old && old->kind == SHD_TUPLE
                            ? shd_leaf(old, k)
                            : manual_replicated(cx->a, mesh, ir_shape_leaf(&call->shape, k)->rank,
                                                mask);
        leaves[leaf] = s;
        cs = shd_tuple(cx->a, leaves, n);
    }
    IrComputation *body = ir_instr_called(call, IR_ATTR_TO_APPLY);
    if ((st = set_sharding(cx, call, cs)))
        return st;
    return body && body->root ? set_sharding(cx, body->root, cs) : SL_OK;
}

static SlStatus
import_manual_comp(SdyCtx *cx, IrComputation *c, SlVec *bodies)
{
    SlStatus st = SL_OK;
    SlVec out = {0};
    SlMap repl; /* old instruction -> its replacement */
    SlMap parts; /* GlobalToLocalShape / LocalToGlobalShape -> IrInstr *[n] of the new values */
    sl_map_init(&repl);
    sl_map_init(&parts);
    bool changed = false;
    for (uint32_t k = 0; k < c->n_instrs && st == SL_OK; k++) {
        IrInstr *i = c->instrs[k];
        for (uint32_t o = 0; o < i->n_operands; o++) {
            uint64_t v;
            if (sl_map_get(&repl, SL_MAP_KEY(i->operands[o]), &v))
                i->operands[o] = (IrInstr *)(uintptr_t)v;
        }
        bool g2l = target_is(i, "xla.sdy.GlobalToLocalShape");
        bool l2g = target_is(i, "xla.sdy.LocalToGlobalShape");
        if (g2l || l2g) {
            changed = true;
            const IrFrontendAttr *f =
                find_frontend(i, g2l ? "xla.sdy.in_shardings" : "xla.sdy.out_shardings");
            if (!f) {
                st = sl_fail(cx->err, SL_ERR_INVALID, instr_loc(cx, i), "%s: no %s",
                             sl_sym_cstr(i->name),
                             g2l ? "xla.sdy.in_shardings" : "xla.sdy.out_shardings");
                break;
            }
            IrShape global = g2l ? operands_shape(cx->a, i) : i->shape;
            SdyParsed p;
            bool mask[SDY_MAX_AXES] = {false}, full = false;
            if ((st = parse_instr_sharding(cx, i, f, &global, true, &p)) ||
                (st = read_manual_axes(cx, i, p.mesh, mask, &full)))
                break;
            for (uint32_t o = 0; o < p.n_tensors && !full; o++)
                if (p.tensors[o]->mesh != p.mesh) {
                    st = sl_fail(cx->err, SL_ERR_UNSUPPORTED, instr_loc(cx, i),
                                 "%s: a shard_map over values of different meshes",
                                 sl_sym_cstr(i->name));
                    break;
                }
            if (st)
                break;
            uint32_t n = i->n_operands;
            IrInstr **news = SL_NEW_ARRAY(cx->a, IrInstr *, n ? n : 1);
            if (!news || (n > 1) != ir_shape_is_tuple(g2l ? &i->shape : &global) ||
                (n > 1 && ir_shape_leaf_count(&i->shape) != n)) {
                st = news ? sl_fail(cx->err, SL_ERR_INVALID, instr_loc(cx, i),
                                    "%s: %u operands but its shape has another count",
                                    sl_sym_cstr(i->name), n)
                          : sl_fail(cx->err, SL_ERR_NOMEM, instr_loc(cx, i), "out of memory");
                break;
            }
            for (uint32_t o = 0; o < n && st == SL_OK; o++) {
                const IrShape *res = n > 1 ? ir_shape_leaf(&i->shape, o) : &i->shape;
                const ShdSharding *global_s = n > 1 ? shd_leaf(p.sharding, o) : p.sharding;
                /* the in-body sharding: {manual}, or the free axes plus a manual subgroup */
                const ShdSharding *local_s =
                    full ? shd_manual(cx->a) : convert_manual(cx->a, p.tensors[o], mask);
                /* open dims over the free axes: GSPMD's partial-auto form, a Sharding call and
                 * the conversion with the same unspecified_dims, which propagation refines */
                int64_t open[SDY_MAX_RANK];
                uint32_t n_open = 0;
                for (uint32_t d = 0; !full && d < p.tensors[o]->rank; d++)
                    if (p.tensors[o]->dim_open[d])
                        open[n_open++] = d;
                IrInstr *cp = add_new(cx, c, n_open ? IR_OP_CUSTOM_CALL : IR_OP_COPY,
                                      &i->operands[o]->shape, i->operands[o],
                                      n_open ? "Sharding" : NULL, g2l ? global_s : local_s, i,
                                      &out);
                IrInstr *cc = cp ? add_new(cx, c, IR_OP_CUSTOM_CALL, res, cp,
                                           g2l ? "SPMDFullToShardShape" : "SPMDShardToFullShape",
                                           g2l ? local_s : global_s, i, &out)
                                 : NULL;
                if (!cc)
                    st = sl_fail(cx->err, SL_ERR_NOMEM, instr_loc(cx, i), "out of memory");
                else if (n_open && ((st = set_unspecified(cx, cp, open, n_open)) ||
                                    (st = set_unspecified(cx, cc, open, n_open))))
                    break;
                news[o] = cc;
                if (!full && l2g && st == SL_OK && !n_open) /* open: left to propagation */
                    st = set_local_result(cx, i->operands[o], local_s, p.mesh, mask);
            }
            if (st)
                break;
            if (!(n == 1 ? sl_map_put(&repl, SL_MAP_KEY(i), SL_MAP_KEY(news[0]))
                         : sl_map_put(&parts, SL_MAP_KEY(i), SL_MAP_KEY(news)))) {
                st = sl_fail(cx->err, SL_ERR_NOMEM, instr_loc(cx, i), "out of memory");
                break;
            }
            continue;
        }
        uint64_t v;
        int64_t idx;
        if (i->op == IR_OP_GET_TUPLE_ELEMENT && sl_map_get(&parts, SL_MAP_KEY(i->operands[0]), &v)) {
            IrInstr **news = (IrInstr **)(uintptr_t)v;
            if (!ir_instr_int_attr(i, IR_ATTR_INDEX, &idx) || idx < 0 ||
                idx >= i->operands[0]->n_operands) {
                st = sl_fail(cx->err, SL_ERR_INVALID, instr_loc(cx, i), "%s: bad index",
                             sl_sym_cstr(i->name));
                break;
            }
            if (!sl_map_put(&repl, SL_MAP_KEY(i), SL_MAP_KEY(news[idx])))
                st = sl_fail(cx->err, SL_ERR_NOMEM, instr_loc(cx, i), "out of memory");
            continue;
        }
        bool partial_call = is_manual_body_call(i) && i->n_operands > 0 &&
                            target_is(i->operands[0], "SPMDFullToShardShape") &&
                            ir_instr_sharding(i->operands[0]) &&
                            !shd_is_manual(ir_instr_sharding(i->operands[0]));
        if (partial_call) {
            /* some axes manual: the body's parameters take the local shardings, its results
             * those of the LocalToGlobalShape (set_local_result); propagation does the rest */
            changed = true;
            IrComputation *body = ir_instr_called(i, IR_ATTR_TO_APPLY);
            for (uint32_t o = 0; o < i->n_operands && st == SL_OK; o++) {
                IrInstr *param = ir_computation_param(body, o);
                if (param && ir_instr_sharding(i->operands[o]) &&
                    !ir_instr_find_attr(i->operands[o], IR_ATTR_BACKEND_CONFIG))
                    st = set_sharding(cx, param, ir_instr_sharding(i->operands[o]));
            }
            if (st)
                break;
        } else if (is_manual_body_call(i)) {
            changed = true;
            IrComputation *body = ir_instr_called(i, IR_ATTR_TO_APPLY);
            if ((st = set_sharding(cx, i, manual_like(cx->a, &i->shape))) ||
                !SL_VEC_PUSH(bodies, IrComputation *, body)) {
                st = st ? st : sl_fail(cx->err, SL_ERR_NOMEM, instr_loc(cx, i), "out of memory");
                break;
            }
        } else if (i->op == IR_OP_GET_TUPLE_ELEMENT && is_manual_body_call(i->operands[0]) &&
                   shd_is_manual(ir_instr_sharding(i->operands[0]) ? ir_instr_sharding(i->operands[0])
                                                                    : shd_replicated(cx->a))) {
            if ((st = set_sharding(cx, i, manual_like(cx->a, &i->shape))))
                break;
        }
        if (!SL_VEC_PUSH(&out, IrInstr *, i))
            st = sl_fail(cx->err, SL_ERR_NOMEM, instr_loc(cx, i), "out of memory");
    }
    if (st == SL_OK && changed) {
        uint64_t v;
        if (c->root && sl_map_get(&repl, SL_MAP_KEY(c->root), &v))
            c->root = (IrInstr *)(uintptr_t)v;
        IrInstr **list = SL_DUP_ARRAY(cx->a, IrInstr *, out.data, out.len ? out.len : 1);
        if (!list) {
            st = sl_fail(cx->err, SL_ERR_NOMEM, (SlSrcLoc){cx->path, 0, 0}, "out of memory");
        } else {
            c->instrs = list;
            c->n_instrs = c->cap_instrs = (uint32_t)out.len;
        }
    }
    sl_vec_fini(&out);
    sl_map_fini(&repl);
    sl_map_fini(&parts);
    return st;
}

static SlStatus
import_manual(SdyCtx *cx)
{
    SlStatus st = SL_OK;
    SlVec bodies = {0};
    uint32_t n_comps = cx->m->n_comps;
    for (uint32_t c = 0; c < n_comps && st == SL_OK; c++)
        st = import_manual_comp(cx, cx->m->comps[c], &bodies);
    for (size_t k = 0; k < bodies.len && st == SL_OK; k++)
        st = manualize(cx, SL_VEC_AT(&bodies, IrComputation *, k), 0);
    sl_vec_fini(&bodies);
    return st;
}

/* After the import the module is GSPMD's, as after XLA's Shardy pass: the mesh table and the
 * consumed attributes go, so that printing and reading it again changes nothing (a propagated
 * or partitioned module keeps its shardings when read back). */
static SlStatus
strip_round_trip(SdyCtx *cx, const IrHeaderAttr *h, const char *from, const char *to)
{
    static const char *const k_consumed[] = {"xla.sdy.sharding", "xla.sdy.in_shardings",
                                             "xla.sdy.out_shardings", "xla.sdy.manual_axes"};
    for (uint32_t c = 0; c < cx->m->n_comps; c++) {
        IrComputation *comp = cx->m->comps[c];
        for (uint32_t k = 0; k < comp->n_instrs; k++) {
            IrAttr *a = ir_instr_find_attr_mut(comp->instrs[k], IR_ATTR_FRONTEND_ATTRIBUTES);
            if (!a)
                continue;
            uint32_t w = 0;
            for (uint32_t f = 0; f < a->u.frontend.n; f++) {
                bool drop = false;
                for (size_t q = 0; q < SL_COUNTOF(k_consumed); q++)
                    drop |= sl_str_eq_cstr(sl_sym_str(a->u.frontend.v[f].key), k_consumed[q]);
                if (!drop)
                    a->u.frontend.v[w++] = a->u.frontend.v[f];
            }
            a->u.frontend.n = w;
            if (!w)
                ir_instr_remove_attr(comp->instrs[k], IR_ATTR_FRONTEND_ATTRIBUTES);
        }
    }
    /* the header's frontend_attributes without the xla.sdy.meshes entry [from, to) */
    const char *b = h->value.ptr, *e = h->value.ptr + h->value.len;
    while (to < e && (*to == ',' || *to == ' '))
        to++;
    while (from > b + 1 && (from[-1] == ' ' || (from[-1] == ',' && to >= e - 1)))
        from--;
    SlBuf v;
    sl_buf_init(&v);
    sl_buf_append(&v, b, (size_t)(from - b));
    sl_buf_append(&v, to, (size_t)(e - to));
    SlStr nv = sl_buf_str(&v);
    SlStatus st = SL_OK;
    if (nv.len <= 2) { /* "{}": no frontend attributes left */
        uint32_t k = (uint32_t)(h - cx->m->header);
        memmove(&cx->m->header[k], &cx->m->header[k + 1],
                (cx->m->n_header - k - 1) * sizeof(IrHeaderAttr));
        cx->m->n_header--;
    } else if (ir_module_set_header(cx->m, "frontend_attributes", nv) != SL_OK) {
        st = sl_fail(cx->err, SL_ERR_NOMEM, (SlSrcLoc){cx->path, 0, 0}, "out of memory");
    }
    sl_buf_fini(&v);
    return st;
}

static SlStatus
run(SdyCtx *cx)
{
    SlStatus st;
    const IrHeaderAttr *h = ir_module_find_header(cx->m, "frontend_attributes");
    const char *meshes_key = "xla.sdy.meshes=";
    const char *found = NULL;
    if (h)
        for (size_t p = 0; p + strlen(meshes_key) <= h->value.len && !found; p++)
            if (!memcmp(h->value.ptr + p, meshes_key, strlen(meshes_key)))
                found = h->value.ptr + p;
    if (!found)
        return SL_OK; /* not a Shardy module: `sharding=` is all there is */
    /* the value after the key: a balanced {...} or a quoted string */
    const char *v = found + strlen(meshes_key), *end = h->value.ptr + h->value.len;
    const char *q = v;
    int depth = 0;
    bool in_str = false;
    if (q < end && *q == '"') {
        for (q++; q < end && *q != '"'; q++)
            if (*q == '\\' && q + 1 < end)
                q++;
        q = q < end ? q + 1 : q;
    } else {
        for (; q < end; q++) {
            if (in_str) {
                if (*q == '\\' && q + 1 < end)
                    q++;
                else if (*q == '"')
                    in_str = false;
            } else if (*q == '"') {
                in_str = true;
            } else if (*q == '{') {
                depth++;
            } else if (*q == '}' && --depth == 0) {
                q++;
                break;
            }
        }
    }
    SlSrcLoc hloc = value_loc(cx, h->value.ptr, NULL);
    if (hloc.line)
        hloc.col += (uint32_t)(v - h->value.ptr); /* the header value is on one line */
    SdyText t;
    if ((st = text_init(&t, cx->a, (SlStr){v, (size_t)(q - v)}, hloc, cx->err)) ||
        (st = parse_meshes(cx, &t)))
        return st;

    /* read everything first: a bad value leaves the module as it was */
    uint32_t n_frs = 0, n_set = 0;
    SlVec parsed = {0}; /* SdyParsed per instruction with a sharding to import */
    SlVec targets = {0}; /* IrInstr * in step with `parsed` */
    SlMap frs_index;
    sl_map_init(&frs_index);
    for (uint32_t c = 0; c < cx->m->n_comps; c++) {
        IrComputation *comp = cx->m->comps[c];
        for (uint32_t k = 0; k < comp->n_instrs; k++) {
            IrInstr *i = comp->instrs[k];
            if ((st = check_supported(cx, i)))
                goto out;
            const IrFrontendAttr *f = find_frontend(i, "xla.sdy.sharding");
            bool frs = target_is(i, "xla.sdy.FuncResultSharding");
            bool keeps = i->op == IR_OP_PARAMETER || target_is(i, "Sharding") ||
                         is_python_callback(i) || i->op == IR_OP_SEND || i->op == IR_OP_RECV ||
                         i->op == IR_OP_AFTER_ALL || frs;
            if (!f)
                continue;
            SdyParsed p;
            if ((st = parse_instr_sharding(cx, i, f, &i->shape, false, &p)))
                goto out;
            if (!keeps)
                continue;
            if (frs && !sl_map_put(&frs_index, SL_MAP_KEY(i), parsed.len)) {
                st = sl_fail(cx->err, SL_ERR_NOMEM, instr_loc(cx, i), "out of memory");
                goto out;
            }
            if (!SL_VEC_PUSH(&parsed, SdyParsed, p) || !SL_VEC_PUSH(&targets, IrInstr *, i)) {
                st = sl_fail(cx->err, SL_ERR_NOMEM, instr_loc(cx, i), "out of memory");
                goto out;
            }
            n_frs += frs;
        }
    }
    /* then change: only the imported shardings count, as in XLA's Shardy import */
    for (uint32_t c = 0; c < cx->m->n_comps; c++) {
        IrComputation *comp = cx->m->comps[c];
        for (uint32_t k = 0; k < comp->n_instrs; k++)
            if (!target_is(comp->instrs[k], "Sharding")) /* one without sdy keeps its own */
                ir_instr_remove_attr(comp->instrs[k], IR_ATTR_SHARDING);
    }
    for (size_t k = 0; k < parsed.len; k++) {
        IrInstr *i = SL_VEC_AT(&targets, IrInstr *, k);
        const SdyParsed *p = &SL_VEC_AT(&parsed, SdyParsed, k);
        if (target_is(i, "xla.sdy.FuncResultSharding"))
            continue;
        if ((st = set_sharding(cx, i, p->sharding)))
            goto out;
        if (target_is(i, "Sharding") && (st = mark_open(cx, i, p)))
            goto out;
        n_set++;
    }
    if ((st = import_manual(cx)))
        goto out;
    if (n_frs && (st = import_results(cx, parsed.data, &frs_index)))
        goto out;
    forward_frs(cx->m);
    (void)n_set;
    st = strip_round_trip(cx, h, found, q);
    cx->m->sdy_round_trip = st == SL_OK;
out:
    sl_vec_fini(&parsed);
    sl_vec_fini(&targets);
    sl_map_fini(&frs_index);
    return st;
}

SlStatus
sdy_import(IrModule *m, const SdyValueLoc *locs, uint32_t n_locs, const char *path,
           SlError *err)
{
    SdyCtx cx;
    memset(&cx, 0, sizeof(cx));
    cx.m = m;
    cx.a = m->arena;
    cx.err = err;
    cx.path = path;
    cx.loc_list = locs;
    sl_map_init(&cx.locs);
    SlStatus st = SL_OK;
    for (uint32_t k = 0; k < n_locs && st == SL_OK; k++)
        if (!sl_map_put(&cx.locs, SL_MAP_KEY(locs[k].value), k + 1))
            st = sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){path, 0, 0}, "out of memory");
    if (st == SL_OK)
        st = run(&cx);
    sl_map_fini(&cx.locs);
    if (st == SL_OK && sl_arena_failed(cx.a))
        st = sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){path, 0, 0}, "out of memory");
    return st;
}
