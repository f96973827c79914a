/* sdy_text.c - the sdy attribute text of Shardy's round-trip form (sdy.h): a cursor over one
 * unescaped value, the header's mesh table and one tensor sharding. Owns: the grammar of
 * meshes, axis references and tensor shardings, and their checks against the mesh (axes named
 * once, sub-axes that divide their axis, no axis used twice). Does not own: which attribute
 * holds what (sdy_import.c), the conversion (sdy_convert.c). Invariant: errors point at the
 * offending byte of the raw value in the source file. */
#include <stdio.h>
#include <string.h>

#include "hlo/sdy_int.h"

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

/* Fails at the cursor; `fmt` has one %s, for `arg`. */
SlStatus
sdy_text_fail(SdyText *t, SlStatus st, const char *fmt, const char *arg)
{
    char msg[SL_ERROR_MSG_BYTES];
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
    snprintf(msg, sizeof(msg), fmt, arg);
#pragma GCC diagnostic pop
    return sl_fail(t->err, st, text_loc(t, t->p), "%s", msg);
}

SlStatus
sdy_text_init(SdyText *t, SlArena *a, SlStr raw, SlSrcLoc at, SlError *err)
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

void
sdy_skip_ws(SdyText *t)
{
    while (t->p < t->n && (t->s[t->p] == ' ' || t->s[t->p] == '\t' || t->s[t->p] == '\n' ||
                           t->s[t->p] == '\r'))
        t->p++;
}

char
sdy_peek(SdyText *t)
{
    sdy_skip_ws(t);
    return t->p < t->n ? t->s[t->p] : '\0';
}

/* Consumes `lit` when the text continues with it. */
bool
sdy_eat(SdyText *t, const char *lit)
{
    sdy_skip_ws(t);
    size_t l = strlen(lit);
    if (t->n - t->p < l || memcmp(t->s + t->p, lit, l))
        return false;
    t->p += l;
    return true;
}

SlStatus
sdy_expect(SdyText *t, const char *lit, const char *what)
{
    if (sdy_eat(t, lit))
        return SL_OK;
    return sdy_text_fail(t, SL_ERR_PARSE, "Shardy attribute: expected %s", what);
}

static bool
is_ident_char(char c, bool first)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == '$' ||
           c == '.' || (!first && ((c >= '0' && c <= '9') || c == '-'));
}

/* name := '"' [^"]* '"' | IDENT */
SlStatus
sdy_read_name(SdyText *t, bool allow_ident, SlStr *out, const char *what)
{
    sdy_skip_ws(t);
    if (t->p < t->n && t->s[t->p] == '"') {
        size_t b = ++t->p;
        while (t->p < t->n && t->s[t->p] != '"')
            t->p++;
        if (t->p >= t->n) {
            t->p = b - 1;
            return sdy_text_fail(t, SL_ERR_PARSE, "Shardy attribute: unterminated %s", what);
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
    return sdy_text_fail(t, SL_ERR_PARSE, "Shardy attribute: expected %s", what);
}

static SlStatus
read_int(SdyText *t, int64_t lo, int64_t *out, const char *what)
{
    sdy_skip_ws(t);
    size_t b = t->p;
    int64_t v = 0;
    while (t->p < t->n && t->s[t->p] >= '0' && t->s[t->p] <= '9') {
        v = v * 10 + (t->s[t->p++] - '0');
        if (v > ((int64_t)1 << 40)) {
            t->p = b;
            return sdy_text_fail(t, SL_ERR_INVALID, "Shardy attribute: %s is too large", what);
        }
    }
    if (t->p == b)
        return sdy_text_fail(t, SL_ERR_PARSE, "Shardy attribute: expected %s", what);
    if (v < lo) {
        t->p = b;
        return sdy_text_fail(t, SL_ERR_INVALID, "Shardy attribute: %s must be positive", what);
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
    if ((st = sdy_expect(t, "<", "'<' after the mesh")) ||
        (st = sdy_expect(t, "[", "'[' of mesh axes")))
        return st;
    mesh->total = 1;
    if (!sdy_eat(t, "]")) {
        do {
            if (n == SDY_MAX_AXES)
                return sdy_text_fail(t, SL_ERR_UNSUPPORTED, "Shardy mesh: more than %s axes", "64");
            size_t at = t->p;
            if ((st = sdy_read_name(t, false, &names[n], "a quoted mesh axis name")) ||
                (st = sdy_expect(t, "=", "'=' and the axis size")) ||
                (st = read_int(t, 1, &sizes[n], "a mesh axis size")))
                return st;
            for (uint32_t k = 0; k < n; k++)
                if (sl_str_eq(names[k], names[n])) {
                    t->p = at;
                    return sdy_text_fail(t, SL_ERR_INVALID, "Shardy mesh: axis %s named twice",
                                         "name");
                }
            mesh->total *= sizes[n];
            if (mesh->total > IR_MAX_DEVICES) {
                t->p = at;
                return sdy_text_fail(t, SL_ERR_INVALID, "Shardy mesh: more than %s devices",
                                     "65536");
            }
            n++;
        } while (sdy_eat(t, ","));
        if ((st = sdy_expect(t, "]", "',' or ']' in the mesh axes")))
            return st;
    }
    mesh->n_axes = n;
    mesh->axis_names = n ? SL_DUP_ARRAY(a, SlStr, names, n) : NULL;
    mesh->axis_sizes = n ? SL_DUP_ARRAY(a, int64_t, sizes, n) : NULL;
    if (n && (!mesh->axis_names || !mesh->axis_sizes))
        return sl_fail(t->err, SL_ERR_NOMEM, t->at, "out of memory");
    if (sdy_eat(t, ",")) {
        sdy_skip_ws(t);
        size_t at = t->p;
        if ((st = sdy_expect(t, "device_ids", "'device_ids'")) ||
            (st = sdy_expect(t, "=", "'='")) || (st = sdy_expect(t, "[", "'[' of device ids")))
            return st;
        int64_t cap = mesh->total, k = 0;
        int64_t *ids = SL_NEW_ARRAY(a, int64_t, cap);
        if (!ids)
            return sl_fail(t->err, SL_ERR_NOMEM, t->at, "out of memory");
        do {
            int64_t v;
            if (k == cap) {
                t->p = at;
                return sdy_text_fail(t, SL_ERR_INVALID,
                                     "Shardy mesh: more device ids than the %s of its axes",
                                     "product");
            }
            if ((st = read_int(t, 0, &v, "a device id")))
                return st;
            if (v >= IR_MAX_DEVICES)
                return sdy_text_fail(t, SL_ERR_INVALID, "Shardy mesh: device id above %s", "65535");
            ids[k++] = v;
        } while (sdy_eat(t, ","));
        if ((st = sdy_expect(t, "]", "',' or ']' in the device ids")))
            return st;
        if (k != cap) {
            t->p = at;
            return sdy_text_fail(t, SL_ERR_INVALID,
                                 "Shardy mesh: device_ids must list one id per device (the %s of "
                                 "the axis sizes)",
                                 "product");
        }
        for (int64_t x = 0; x < k; x++)
            for (int64_t y = x + 1; y < k && k <= 4096; y++)
                if (ids[x] == ids[y]) {
                    t->p = at;
                    return sdy_text_fail(t, SL_ERR_INVALID, "Shardy mesh: a device id is %s twice",
                                         "listed");
                }
        mesh->ids = ids;
        mesh->n_ids = (uint32_t)k;
    }
    return sdy_expect(t, ">", "'>' closing the mesh");
}

/* meshes := '{' (NAME '=' '#sdy.mesh' mesh (',' NAME '=' '#sdy.mesh' mesh)*)? '}' */
SlStatus
sdy_parse_meshes(SdyCtx *cx, SdyText *t)
{
    SlStatus st;
    SlVec v = {0};
    if ((st = sdy_expect(t, "{", "'{' opening the meshes")))
        return st;
    if (!sdy_eat(t, "}")) {
        do {
            SdyMesh mesh;
            memset(&mesh, 0, sizeof(mesh));
            size_t at = t->p;
            if ((st = sdy_read_name(t, true, &mesh.name, "a mesh name")) ||
                (st = sdy_expect(t, "=", "'=' after the mesh name")) ||
                (st = sdy_expect(t, "#sdy.mesh", "'#sdy.mesh'")) ||
                (st = parse_mesh(t, cx->a, &mesh)))
                goto out;
            for (size_t k = 0; k < v.len; k++)
                if (sl_str_eq(SL_VEC_AT(&v, SdyMesh, k).name, mesh.name)) {
                    t->p = at;
                    st = sdy_text_fail(t, SL_ERR_INVALID, "Shardy mesh %s defined twice", "name");
                    goto out;
                }
            if (!SL_VEC_PUSH(&v, SdyMesh, mesh)) {
                st = sl_fail(cx->err, SL_ERR_NOMEM, t->at, "out of memory");
                goto out;
            }
        } while (sdy_eat(t, ","));
        if ((st = sdy_expect(t, "}", "',' or '}' in the meshes")))
            goto out;
    }
    if (sdy_peek(t) != '\0') {
        st = sdy_text_fail(t, SL_ERR_PARSE, "Shardy meshes: unexpected text after %s", "'}'");
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
    sdy_skip_ws(t);
    at = t->p;
    if ((st = sdy_read_name(t, false, &name, "a quoted axis name")))
        return st;
    uint32_t k = 0;
    while (k < mesh->n_axes && !sl_str_eq(mesh->axis_names[k], name))
        k++;
    if (k == mesh->n_axes) {
        t->p = at;
        char buf[96];
        snprintf(buf, sizeof(buf), "%.*s", (int)(name.len < 80 ? name.len : 80), name.ptr);
        return sdy_text_fail(t, SL_ERR_INVALID, "Shardy sharding: axis \"%s\" is not in the mesh",
                             buf);
    }
    r->axis = k;
    r->pre = 1;
    r->size = mesh->axis_sizes[k];
    if (sdy_eat(t, ":")) {
        if ((st = sdy_expect(t, "(", "'(' and the sub-axis pre-size")) ||
            (st = read_int(t, 1, &r->pre, "a sub-axis pre-size")) ||
            (st = sdy_expect(t, ")", "')' after the pre-size")) ||
            (st = read_int(t, 1, &r->size, "a sub-axis size")))
            return st;
        int64_t whole = mesh->axis_sizes[k];
        if (r->size < 2 || r->pre * r->size > whole || whole % (r->pre * r->size)) {
            t->p = at;
            return sdy_text_fail(t, SL_ERR_INVALID,
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
        return sdy_text_fail(t, SL_ERR_UNSUPPORTED, "Shardy sharding: more than %s axis references",
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
    if ((st = sdy_expect(t, "{", "'{' of an axis list")))
        return st;
    if (sdy_eat(t, "}"))
        return SL_OK;
    do {
        SdyRef r;
        sdy_skip_ws(t);
        size_t at = t->p;
        if ((st = parse_axis(t, ts->mesh, &r)) || (st = add_ref(t, ts, &r, at)))
            return st;
    } while (sdy_eat(t, ","));
    return sdy_expect(t, "}", "',' or '}' in the axis list");
}

/* mesh_ref := '@' NAME | '#sdy.mesh' mesh | 'mesh' mesh */
static SlStatus
parse_mesh_ref(SdyCtx *cx, SdyText *t, const SdyMesh **out)
{
    SlStatus st;
    sdy_skip_ws(t);
    size_t at = t->p;
    if (sdy_eat(t, "@")) {
        SlStr name;
        if ((st = sdy_read_name(t, true, &name, "a mesh name after '@'")))
            return st;
        for (uint32_t k = 0; k < cx->n_meshes; k++)
            if (sl_str_eq(cx->meshes[k].name, name)) {
                *out = &cx->meshes[k];
                return SL_OK;
            }
        t->p = at;
        return sdy_text_fail(t, SL_ERR_INVALID,
                             "Shardy sharding: mesh %s is not in the module's xla.sdy.meshes",
                             "reference");
    }
    if (sdy_eat(t, "#sdy.mesh") || sdy_eat(t, "mesh")) {
        SdyMesh *mesh = SL_NEW(cx->a, SdyMesh);
        if (!mesh)
            return sl_fail(cx->err, SL_ERR_NOMEM, t->at, "out of memory");
        if ((st = parse_mesh(t, cx->a, mesh)))
            return st;
        *out = mesh;
        return SL_OK;
    }
    return sdy_text_fail(t, SL_ERR_PARSE, "Shardy sharding: expected %s", "'@mesh' or a mesh");
}

static bool
refs_overlap(const SdyRef *x, const SdyRef *y)
{
    return x->axis == y->axis && x->pre < y->pre * y->size && y->pre < x->pre * x->size;
}

/* tensor := mesh_ref ',' '[' (dim (',' dim)*)? ']' (',' ('replicated' | 'unreduced') '='
 *           axes)* '>'
 * dim    := '{' ((axis (',' axis)* (',' '?')?) | '?')? '}' ('p' INT)?   (after the '<') */
SlStatus
sdy_parse_tensor(SdyCtx *cx, SdyText *t, SdyTensor *ts)
{
    SlStatus st;
    memset(ts, 0, sizeof(*ts));
    if ((st = parse_mesh_ref(cx, t, &ts->mesh)) ||
        (st = sdy_expect(t, ",", "',' after the mesh")) ||
        (st = sdy_expect(t, "[", "'[' of the dimension shardings")))
        return st;
    if (!sdy_eat(t, "]")) {
        do {
            if (ts->rank == SDY_MAX_RANK)
                return sdy_text_fail(t, SL_ERR_UNSUPPORTED, "Shardy sharding: rank above %s", "64");
            uint32_t d = ts->rank++;
            ts->dim_first[d] = ts->n_refs;
            if ((st = sdy_expect(t, "{", "'{' of a dimension sharding")))
                return st;
            if (sdy_eat(t, "?")) {
                ts->dim_open[d] = true;
            } else if (sdy_peek(t) != '}') {
                do {
                    if (sdy_eat(t, "?")) {
                        ts->dim_open[d] = true;
                        break;
                    }
                    SdyRef r;
                    sdy_skip_ws(t);
                    size_t at = t->p;
                    if ((st = parse_axis(t, ts->mesh, &r)) || (st = add_ref(t, ts, &r, at)))
                        return st;
                } while (sdy_eat(t, ","));
            }
            if ((st = sdy_expect(t, "}", "',' or '}' in a dimension sharding")))
                return st;
            ts->dim_n[d] = ts->n_refs - ts->dim_first[d];
            if (t->p < t->n && t->s[t->p] == 'p') { /* priority: no GSPMD form */
                int64_t prio;
                t->p++;
                if ((st = read_int(t, 0, &prio, "a priority after 'p'")))
                    return st;
            }
        } while (sdy_eat(t, ","));
        if ((st = sdy_expect(t, "]", "',' or ']' in the dimension shardings")))
            return st;
    }
    bool seen_repl = false, seen_unred = false;
    while (sdy_eat(t, ",")) {
        bool repl;
        sdy_skip_ws(t);
        size_t at = t->p;
        if (sdy_eat(t, "replicated"))
            repl = true;
        else if (sdy_eat(t, "unreduced"))
            repl = false;
        else
            return sdy_text_fail(t, SL_ERR_UNSUPPORTED,
                                 "Shardy sharding: expected 'replicated=' or 'unreduced=' (other "
                                 "%s are not supported)",
                                 "fields");
        if ((repl && seen_repl) || (!repl && seen_unred)) {
            t->p = at;
            return sdy_text_fail(t, SL_ERR_PARSE, "Shardy sharding: %s given twice", "axis list");
        }
        uint32_t first = ts->n_refs;
        if ((st = sdy_expect(t, "=", "'=' and an axis list")) || (st = parse_axis_list(t, ts)))
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
    if ((st = sdy_expect(t, ">", "'>' closing the sharding")))
        return st;
    for (uint32_t x = 0; x < ts->n_refs; x++)
        for (uint32_t y = x + 1; y < ts->n_refs; y++)
            if (refs_overlap(&ts->refs[x], &ts->refs[y])) {
                t->p = ts->ref_at[y];
                return sdy_text_fail(t, SL_ERR_INVALID,
                                     "Shardy sharding: an axis (or overlapping sub-axes) is used "
                                     "twice in this %s",
                                     "sharding");
            }
    return SL_OK;
}
