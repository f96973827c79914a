/* printer.c - IR to canonical HLO text, as current XLA dumps print it (hlo-text.md §1, §3-§11).
 * Owns: layout of module, computation and instruction lines, and the text of every typed
 * attribute value. Does not own: sharding text (shd_print). Invariants: output depends only on
 * the IR (module order, attribute order), never on pointers; printing what the parser read and
 * parsing it again gives the same text (print(parse(print(parse(x)))) == print(parse(x))). */
#include "hlo/hlo.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "sharding/shd.h"

/* Output goes through a small local buffer: a module is printed as many short pieces, and
 * one SlBuf append per few kilobytes is much cheaper than one per piece. */
enum { SHD_CACHE = 8 };
typedef struct Out {
    SlBuf *buf;
    size_t n;
    char chunk[4096];
    /* Text of recently printed shardings: big modules repeat a few on every instruction. */
    const struct ShdSharding *shd[SHD_CACHE];
    SlBuf shd_text[SHD_CACHE];
    uint32_t shd_next;
} Out;

static void
out_init(Out *o, SlBuf *buf)
{
    o->buf = buf;
    o->n = 0;
    o->shd_next = 0;
    for (int k = 0; k < SHD_CACHE; k++) {
        o->shd[k] = NULL;
        sl_buf_init(&o->shd_text[k]);
    }
}

/* The printer only appends, so a streaming buffer (SlBuf.spill) may be handed on here. */
static void
flush(Out *o)
{
    if (o->n)
        sl_buf_append(o->buf, o->chunk, o->n);
    o->n = 0;
    sl_buf_spill(o->buf, false);
}

static inline void
put(Out *o, const char *p, size_t n)
{
    if (n > sizeof(o->chunk) - o->n) {
        flush(o);
        if (n > sizeof(o->chunk)) {
            sl_buf_append(o->buf, p, n);
            return;
        }
    }
    memcpy(o->chunk + o->n, p, n);
    o->n += n;
}

static inline void
putc1(Out *o, char c)
{
    if (o->n == sizeof(o->chunk))
        flush(o);
    o->chunk[o->n++] = c;
}

#define PUT_LIT(o, lit) put((o), (lit), sizeof(lit) - 1)

static void
out_fini(Out *o)
{
    flush(o);
    for (int k = 0; k < SHD_CACHE; k++)
        sl_buf_fini(&o->shd_text[k]);
}

static void
put_sharding(Out *o, const ShdSharding *s)
{
    int hit = -1;
    for (int k = 0; k < SHD_CACHE && hit < 0; k++)
        if (o->shd[k] == s)
            hit = k;
    if (hit < 0) {
        hit = (int)(o->shd_next++ % SHD_CACHE);
        SlBuf *t = &o->shd_text[hit];
        sl_buf_clear(t);
        shd_print(s, t);
        if (t->failed) {
            o->buf->failed = true;
            o->shd[hit] = NULL;
            return;
        }
        o->shd[hit] = s;
    }
    put(o, o->shd_text[hit].data, o->shd_text[hit].len);
}

static void
put_str(Out *o, SlStr s)
{
    put(o, s.ptr, s.len);
}

static void
put_cstr(Out *o, const char *s)
{
    put(o, s, strlen(s));
}

static void
put_i64(Out *o, int64_t v)
{
    char tmp[24];
    char *e = tmp + sizeof(tmp), *p = e;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--p = '-';
    put(o, p, (size_t)(e - p));
}

/* Spellings with their lengths, from the same .def rows as the IR's own tables. */
static const SlStr k_op_spelling[] = {
#define IR_OP(e, name, family, min, max, attrs) {name, sizeof(name) - 1},
#include "ir/ir_ops.def"
#undef IR_OP
};
static const SlStr k_dtype_spelling[] = {
#define IR_DTYPE(e, name, bits, kind) {name, sizeof(name) - 1},
#include "ir/ir_types.def"
#undef IR_DTYPE
};
static const SlStr k_attr_spelling[] = {
#define IR_ATTR(e, name, kind) {name, sizeof(name) - 1},
#include "ir/ir_attrs.def"
#undef IR_ATTR
};

static SlStr
spelling(const SlStr *table, size_t n, unsigned k, const char *fallback)
{
    return k < n ? table[k] : sl_str(fallback);
}

/* XLA prints an index comment before every fifth element of long lists and tuples. */
enum { INDEX_COMMENT_EVERY = 5 };

static void
put_index_sep(Out *out, uint32_t k)
{
    if (k == 0)
        return;
    PUT_LIT(out, ", ");
    if (k % INDEX_COMMENT_EVERY == 0) {
        PUT_LIT(out, "/*index=");
        put_i64(out, k);
        PUT_LIT(out, "*/");
    }
}

static void
put_shape(Out *out, const IrShape *s, bool with_layout)
{
    if (ir_shape_is_tuple(s)) {
        putc1(out, '(');
        for (uint32_t k = 0; k < s->n_elems; k++) {
            put_index_sep(out, k);
            put_shape(out, &s->elems[k], with_layout);
        }
        putc1(out, ')');
        return;
    }
    put_str(out, spelling(k_dtype_spelling, SL_COUNTOF(k_dtype_spelling), s->dtype, "invalid"));
    putc1(out, '[');
    for (uint32_t k = 0; k < s->rank; k++) {
        if (k)
            putc1(out, ',');
        uint8_t kind = s->dim_kinds ? s->dim_kinds[k] : IR_DIM_STATIC;
        if (kind == IR_DIM_UNBOUNDED) {
            putc1(out, '?');
            continue;
        }
        if (kind == IR_DIM_BOUNDED)
            PUT_LIT(out, "<=");
        put_i64(out, s->dims[k]);
    }
    putc1(out, ']');
    if (with_layout && s->layout.len)
        put_str(out, s->layout);
}

/* ints := '{' INT (',' INT)* '}' */
static void
put_ints(Out *out, const int64_t *v, uint32_t n)
{
    putc1(out, '{');
    for (uint32_t k = 0; k < n; k++) {
        if (k)
            putc1(out, ',');
        put_i64(out, v[k]);
    }
    putc1(out, '}');
}

static void
put_int_lists(Out *out, uint32_t n, const uint32_t *sizes, const int64_t *v)
{
    putc1(out, '{');
    for (uint32_t k = 0, at = 0; k < n; at += sizes[k], k++) {
        if (k)
            putc1(out, ',');
        put_ints(out, v + at, sizes[k]);
    }
    putc1(out, '}');
}

/* [d0,d1]<=[r0,...] with T(p...) only when the permutation is not the identity */
static void
put_iota(Out *out, const IrIota *io)
{
    putc1(out, '[');
    for (uint32_t k = 0; k < io->n_dims; k++) {
        if (k)
            putc1(out, ',');
        put_i64(out, io->dims[k]);
    }
    PUT_LIT(out, "]<=[");
    for (uint32_t k = 0; k < io->n_reshape; k++) {
        if (k)
            putc1(out, ',');
        put_i64(out, io->reshape[k]);
    }
    putc1(out, ']');
    bool identity = true;
    for (uint32_t k = 0; io->perm && k < io->n_reshape; k++)
        identity = identity && io->perm[k] == (int64_t)k;
    if (identity)
        return;
    PUT_LIT(out, "T(");
    for (uint32_t k = 0; k < io->n_reshape; k++) {
        if (k)
            putc1(out, ',');
        put_i64(out, io->perm[k]);
    }
    putc1(out, ')');
}

static void
put_comp(Out *out, const IrComputation *c)
{
    putc1(out, '%');
    put_str(out, c ? sl_sym_str(c->name) : sl_str("<null>"));
}

/* Dims joined by 'x' (window fields). */
static void
put_window_field(Out *out, const char *name, const IrWindowDim *w, uint32_t n, int which,
                 bool first)
{
    if (!first)
        putc1(out, ' ');
    put_cstr(out, name);
    putc1(out, '=');
    for (uint32_t k = 0; k < n; k++) {
        if (k)
            putc1(out, 'x');
        switch (which) {
        case 0: put_i64(out, w[k].size); break;
        case 1: put_i64(out, w[k].stride); break;
        case 2:
            put_i64(out, w[k].pad_lo);
            putc1(out, '_');
            put_i64(out, w[k].pad_hi);
            break;
        case 3: put_i64(out, w[k].lhs_dilate); break;
        case 4: put_i64(out, w[k].rhs_dilate); break;
        default: putc1(out, w[k].reversal ? '1' : '0'); break;
        }
    }
}

/* window := '{' 'size=' dxd (' stride=' ..)? (' pad=' ..)? (' lhs_dilate=' ..)?
 *           (' rhs_dilate=' ..)? (' rhs_reversal=' ..)? '}'   only non-default fields */
static void
put_window(Out *out, const IrWindowDim *w, uint32_t n)
{
    bool any[6] = {n > 0, false, false, false, false, false};
    for (uint32_t k = 0; k < n; k++) {
        any[1] |= w[k].stride != 1;
        any[2] |= w[k].pad_lo != 0 || w[k].pad_hi != 0;
        any[3] |= w[k].lhs_dilate != 1;
        any[4] |= w[k].rhs_dilate != 1;
        any[5] |= w[k].reversal;
    }
    static const char *const names[6] = {"size",       "stride",     "pad",
                                         "lhs_dilate", "rhs_dilate", "rhs_reversal"};
    putc1(out, '{');
    bool first = true;
    for (int f = 0; f < 6; f++) {
        if (any[f]) {
            put_window_field(out, names[f], w, n, f, first);
            first = false;
        }
    }
    putc1(out, '}');
}

static void
put_padding(Out *out, const IrPadDim *p, uint32_t n)
{
    bool interior = false;
    for (uint32_t k = 0; k < n; k++)
        interior |= p[k].interior != 0;
    for (uint32_t k = 0; k < n; k++) {
        if (k)
            putc1(out, 'x');
        put_i64(out, p[k].lo);
        putc1(out, '_');
        put_i64(out, p[k].hi);
        if (interior) {
            putc1(out, '_');
            put_i64(out, p[k].interior);
        }
    }
}

/* slice := '{' '[' start ':' limit (':' stride)? ']' (', ' ...)* '}'  strides only if any != 1 */
static void
put_slice(Out *out, const IrSliceDim *d, uint32_t n)
{
    bool strides = false;
    for (uint32_t k = 0; k < n; k++)
        strides |= d[k].stride != 1;
    putc1(out, '{');
    for (uint32_t k = 0; k < n; k++) {
        if (k)
            PUT_LIT(out, ", ");
        putc1(out, '[');
        put_i64(out, d[k].start);
        putc1(out, ':');
        put_i64(out, d[k].limit);
        if (strides) {
            putc1(out, ':');
            put_i64(out, d[k].stride);
        }
        putc1(out, ']');
    }
    putc1(out, '}');
}

static void
put_attr_value(Out *out, const IrAttr *a)
{
    switch (ir_attr_kind(a->key)) {
    case IR_AK_INT: put_i64(out, a->u.i); return;
    case IR_AK_BOOL: put_cstr(out, a->u.b ? "true" : "false"); return;
    case IR_AK_INTS: put_ints(out, a->u.ints.v, a->u.ints.n); return;
    case IR_AK_INT_LISTS: put_int_lists(out, a->u.lists.n, a->u.lists.sizes, a->u.lists.v); return;
    case IR_AK_REPLICA_GROUPS: {
        const IrReplicaGroups *g = a->u.groups;
        if (g && g->is_iota)
            put_iota(out, &g->iota);
        else if (g)
            put_int_lists(out, g->n_groups, g->group_sizes, g->ids);
        else
            put_int_lists(out, 0, NULL, NULL);
        return;
    }
    case IR_AK_COMP: put_comp(out, a->u.comp); return;
    case IR_AK_COMPS:
        if (a->key == IR_ATTR_CALLS && a->u.comps.n == 1) { /* fusion/async: calls=%f */
            put_comp(out, a->u.comps.v[0]);
            return;
        }
        putc1(out, '{');
        for (uint32_t k = 0; k < a->u.comps.n; k++) {
            if (k)
                PUT_LIT(out, ", ");
            put_comp(out, a->u.comps.v[k]);
        }
        putc1(out, '}');
        return;
    case IR_AK_IDENT:
    case IR_AK_STRING:
    case IR_AK_DIM_LABELS:
    case IR_AK_RAW: put_str(out, a->u.text); return;
    case IR_AK_SLICE: put_slice(out, a->u.slice.v, a->u.slice.n); return;
    case IR_AK_PADDING: put_padding(out, a->u.pad.v, a->u.pad.n); return;
    case IR_AK_WINDOW: put_window(out, a->u.window.v, a->u.window.n); return;
    case IR_AK_SHARDING:
        if (a->u.sharding) {
            put_sharding(out, a->u.sharding);
        } else {
            PUT_LIT(out, "{}");
        }
        return;
    case IR_AK_METADATA:
        if (a->u.metadata)
            put_str(out, a->u.metadata->raw);
        else
            PUT_LIT(out, "{}");
        return;
    case IR_AK_FRONTEND:
        putc1(out, '{');
        for (uint32_t k = 0; k < a->u.frontend.n; k++) {
            if (k)
                putc1(out, ',');
            put_str(out, sl_sym_str(a->u.frontend.v[k].key));
            putc1(out, '=');
            put_str(out, a->u.frontend.v[k].value);
        }
        putc1(out, '}');
        return;
    }
}

static void
put_instr(Out *out, const IrInstr *i)
{
    if (i->parent && i->parent->root == i)
        PUT_LIT(out, "ROOT ");
    putc1(out, '%');
    put_str(out, sl_sym_str(i->name));
    PUT_LIT(out, " = ");
    put_shape(out, &i->shape, true);
    putc1(out, ' ');
    put_str(out, spelling(k_op_spelling, SL_COUNTOF(k_op_spelling), i->op, "unknown-op"));
    putc1(out, '(');
    if (i->op == IR_OP_CONSTANT) {
        put_str(out, i->literal);
    } else if (i->op == IR_OP_PARAMETER) {
        put_i64(out, i->parameter_number);
    } else {
        for (uint32_t k = 0; k < i->n_operands; k++) {
            put_index_sep(out, k);
            putc1(out, '%');
            put_str(out, sl_sym_str(i->operands[k]->name));
        }
    }
    putc1(out, ')');
    for (uint32_t k = 0; k < i->n_attrs; k++) {
        const IrAttr *a = &i->attrs[k];
        PUT_LIT(out, ", ");
        if (a->key == IR_ATTR_OTHER)
            put_str(out, sl_sym_str(a->u.other.key));
        else
            put_str(out, spelling(k_attr_spelling, SL_COUNTOF(k_attr_spelling), a->key, ""));
        putc1(out, '=');
        put_attr_value(out, a);
    }
}

static int
cmp_param(const void *pa, const void *pb)
{
    const IrInstr *a = *(const IrInstr *const *)pa, *b = *(const IrInstr *const *)pb;
    if (a->parameter_number != b->parameter_number)
        return a->parameter_number < b->parameter_number ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* signature := '(' (NAME ': ' shape (', ' ...)*)? ') -> ' shape    shapes without layouts */
static void
put_signature(Out *out, const IrComputation *c, SlVec *params)
{
    params->len = 0;
    bool sorted = true;
    for (uint32_t k = 0; k < c->n_instrs; k++) {
        const IrInstr *i = c->instrs[k];
        if (i->op != IR_OP_PARAMETER)
            continue;
        if (params->len && SL_VEC_AT(params, const IrInstr *, params->len - 1)
                                   ->parameter_number > i->parameter_number)
            sorted = false;
        if (!SL_VEC_PUSH(params, const IrInstr *, i)) {
            out->buf->failed = true;
            return;
        }
    }
    if (!sorted)
        qsort(params->data, params->len, sizeof(const IrInstr *), cmp_param);
    putc1(out, '(');
    for (size_t k = 0; k < params->len; k++) {
        const IrInstr *p = SL_VEC_AT(params, const IrInstr *, k);
        if (k)
            PUT_LIT(out, ", ");
        /* a bare name must lex as an identifier; "%0" does not without its '%' */
        SlStr name = sl_sym_str(p->name);
        char c0 = name.len ? name.ptr[0] : '0';
        if (!((c0 >= 'a' && c0 <= 'z') || (c0 >= 'A' && c0 <= 'Z') || c0 == '_'))
            putc1(out, '%');
        put_str(out, name);
        PUT_LIT(out, ": ");
        put_shape(out, &p->shape, false);
    }
    PUT_LIT(out, ") -> ");
    if (c->root)
        put_shape(out, &c->root->shape, false);
    else
        PUT_LIT(out, "()");
}

static void
put_indent(Out *out, uint32_t levels)
{
    for (uint32_t k = 0; k < levels; k++)
        PUT_LIT(out, "  ");
}

static void
put_origin_array(Out *out, const IrOriginArray *a)
{
    flush(out); /* the text goes straight to the buffer: keep the order */
    ir_origin_array_print(a, out->buf);
}

/* XLA's order: by name, then shape index (both lexicographic). */
static int
cmp_recovery(const void *pa, const void *pb)
{
    const IrOriginArray *a = &(*(const IrRecovery *const *)pa)->old;
    const IrOriginArray *b = &(*(const IrRecovery *const *)pb)->old;
    size_t n = a->name.len < b->name.len ? a->name.len : b->name.len;
    int c = n ? memcmp(a->name.ptr, b->name.ptr, n) : 0;
    if (c || a->name.len != b->name.len)
        return c ? c : (a->name.len < b->name.len ? -1 : 1);
    for (uint32_t k = 0; k < a->n_index && k < b->n_index; k++)
        if (a->index[k] != b->index[k])
            return a->index[k] < b->index[k] ? -1 : 1;
    return a->n_index < b->n_index ? -1 : a->n_index > b->n_index;
}

static void put_module(Out *out, const IrModule *m, uint32_t indent);

/* A recovery module as a quoted string: its own text, one level deeper, with '"' and '\'
 * escaped (XLA writes the text raw; the escapes keep nested quotes parseable). */
static void
put_recovery_module(Out *out, const IrModule *m, uint32_t indent)
{
    SlBuf text;
    sl_buf_init(&text);
    Out inner;
    out_init(&inner, &text);
    put_module(&inner, m, indent + 1);
    out_fini(&inner);
    if (text.failed)
        out->buf->failed = true;
    for (size_t k = 0; k < text.len; k++) {
        if (text.data[k] == '"' || text.data[k] == '\\')
            putc1(out, '\\');
        putc1(out, text.data[k]);
    }
    sl_buf_fini(&text);
}

/* table := ', origin_recovery_table={' NL (entry NL)* '}' NL
 * entry := original_array ' : ' original_array (',' NL '"' NL module NL '"')? */
static void
put_recovery_table(Out *out, const IrModule *m, uint32_t indent)
{
    const IrRecovery **order = malloc(m->n_recovery * sizeof(*order));
    if (!order) {
        out->buf->failed = true;
        return;
    }
    for (uint32_t k = 0; k < m->n_recovery; k++)
        order[k] = &m->recovery[k];
    qsort(order, m->n_recovery, sizeof(*order), cmp_recovery);
    PUT_LIT(out, ", origin_recovery_table={\n");
    for (uint32_t k = 0; k < m->n_recovery; k++) {
        put_indent(out, indent + 1);
        put_origin_array(out, &order[k]->old);
        PUT_LIT(out, " : ");
        put_origin_array(out, &order[k]->now);
        if (order[k]->module) {
            PUT_LIT(out, ",\n");
            put_indent(out, indent + 1);
            PUT_LIT(out, "\"\n");
            put_recovery_module(out, order[k]->module, indent + 1);
            putc1(out, '\n');
            put_indent(out, indent + 1);
            putc1(out, '"');
        }
        putc1(out, '\n');
    }
    PUT_LIT(out, "}\n");
    free(order);
}

/* `indent` levels of two spaces before the module's lines (recovery modules are nested). */
static void
put_module(Out *out, const IrModule *m, uint32_t indent)
{
    put_indent(out, indent);
    PUT_LIT(out, "HloModule ");
    SlStr name = sl_sym_str(m->name);
    /* `HloModule %1m` reads back; `HloModule 1m` would be a malformed number */
    if (name.len && !(isalpha((unsigned char)name.ptr[0]) || name.ptr[0] == '_'))
        putc1(out, '%');
    put_str(out, name);
    for (uint32_t k = 0; k < m->n_header; k++) {
        PUT_LIT(out, ", ");
        put_str(out, sl_sym_str(m->header[k].key));
        putc1(out, '=');
        put_str(out, m->header[k].value);
    }
    if (m->n_recovery)
        put_recovery_table(out, m, indent);
    PUT_LIT(out, "\n\n");
    SlVec params = {0};
    for (uint32_t k = 0; k < m->n_comps; k++) {
        const IrComputation *c = m->comps[k];
        put_indent(out, indent);
        if (c->is_entry)
            PUT_LIT(out, "ENTRY ");
        putc1(out, '%');
        put_str(out, sl_sym_str(c->name));
        putc1(out, ' ');
        put_signature(out, c, &params);
        PUT_LIT(out, " {\n");
        for (uint32_t j = 0; j < c->n_instrs; j++) {
            put_indent(out, indent + 1);
            put_instr(out, c->instrs[j]);
            putc1(out, '\n');
        }
        put_indent(out, indent);
        putc1(out, '}');
        if (c->execution_thread.len) {
            PUT_LIT(out, ", execution_thread=");
            put_str(out, c->execution_thread);
        }
        PUT_LIT(out, "\n\n");
    }
    sl_vec_fini(&params);
}

void
hlo_print_attr_value(const IrAttr *a, SlBuf *buf)
{
    Out o;
    out_init(&o, buf);
    put_attr_value(&o, a);
    out_fini(&o);
}

void
hlo_print_instr(const IrInstr *i, SlBuf *buf)
{
    Out o;
    out_init(&o, buf);
    put_instr(&o, i);
    out_fini(&o);
}

void
hlo_print_module(const IrModule *m, SlBuf *buf)
{
    Out o;
    out_init(&o, buf);
    put_module(&o, m, 0);
    out_fini(&o);
}
