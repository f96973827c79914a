/* ir.c - opcode/type/attribute tables, shapes, and construction of modules, computations and
 * instructions. Owns: the only allocation paths for IR nodes. Invariant: every node lives in the
 * module arena; side tables on the heap are released by ir_module_fini(). */
#include "ir/ir.h"

#include <string.h>

/* ---- tables ---- */

static const struct {
    const char *name;
    uint32_t bits;
    char kind;
} k_dtypes[] = {
#define IR_DTYPE(e, name, bits, kind) {name, bits, kind},
#include "ir/ir_types.def"
#undef IR_DTYPE
};

_Static_assert(IR_ATTR_COUNT <= 64, "required attributes are a 64-bit mask");

static const struct {
    const char *name;
    IrOpFamily family;
    int min, max;
    uint64_t attrs; /* bit k: IR_ATTR k is required */
} k_ops[] = {
#define A(k) (UINT64_C(1) << IR_ATTR_##k)
#define IR_OP(e, name, family, min, max, attrs) {name, IR_FAM_##family, min, max, attrs},
#include "ir/ir_ops.def"
#undef IR_OP
#undef A
};

static const struct {
    const char *name;
    IrAttrKind kind;
} k_attrs[] = {
#define IR_ATTR(e, name, kind) {name, IR_AK_##kind},
#include "ir/ir_attrs.def"
#undef IR_ATTR
    {"", IR_AK_RAW},
};

const char *
ir_dtype_name(IrDtype t)
{
    return (unsigned)t < IR_DT_COUNT ? k_dtypes[t].name : "invalid";
}

uint32_t
ir_dtype_bits(IrDtype t)
{
    return (unsigned)t < IR_DT_COUNT ? k_dtypes[t].bits : 0;
}

char
ir_dtype_kind(IrDtype t)
{
    return (unsigned)t < IR_DT_COUNT ? k_dtypes[t].kind : 'O';
}

bool
ir_dtype_from_name(SlStr s, IrDtype *out)
{
    for (unsigned i = 1; i < IR_DT_COUNT; i++) {
        if (i == IR_DT_TUPLE)
            continue;
        if (sl_str_eq_cstr(s, k_dtypes[i].name)) {
            *out = (IrDtype)i;
            return true;
        }
    }
    return false;
}

const char *
ir_op_name(IrOp op)
{
    return (unsigned)op < IR_OP_COUNT ? k_ops[op].name : "unknown-op";
}

IrOpFamily
ir_op_family(IrOp op)
{
    return (unsigned)op < IR_OP_COUNT ? k_ops[op].family : IR_FAM_OTHER;
}

int
ir_op_arity(IrOp op)
{
    if ((unsigned)op >= IR_OP_COUNT || k_ops[op].min != k_ops[op].max)
        return -1;
    return k_ops[op].min;
}

uint32_t
ir_op_min_operands(IrOp op)
{
    return (unsigned)op < IR_OP_COUNT ? (uint32_t)k_ops[op].min : 0;
}

int
ir_op_max_operands(IrOp op)
{
    return (unsigned)op < IR_OP_COUNT ? k_ops[op].max : -1;
}

bool
ir_op_operand_count_ok(IrOp op, uint32_t n)
{
    int max = ir_op_max_operands(op);
    return n >= ir_op_min_operands(op) && (max < 0 || n <= (uint32_t)max);
}

bool
ir_op_requires_attr(IrOp op, IrAttrKey k)
{
    return (unsigned)op < IR_OP_COUNT && (unsigned)k < IR_ATTR_COUNT &&
           (k_ops[op].attrs >> k & 1u);
}

bool
ir_op_from_name(SlStr s, IrOp *out)
{
    /* Linear scan over ~150 short names; the parser caches results per interned symbol. */
    for (unsigned i = 0; i < IR_OP_COUNT; i++) {
        if (sl_str_eq_cstr(s, k_ops[i].name)) {
            *out = (IrOp)i;
            return true;
        }
    }
    return false;
}

bool
ir_op_is_elementwise(IrOp op)
{
    return ir_op_family(op) == IR_FAM_ELEMENTWISE;
}

const char *
ir_attr_name(IrAttrKey k)
{
    return (unsigned)k < IR_ATTR_COUNT ? k_attrs[k].name : "";
}

IrAttrKind
ir_attr_kind(IrAttrKey k)
{
    return (unsigned)k < IR_ATTR_COUNT ? k_attrs[k].kind : IR_AK_RAW;
}

IrAttrKey
ir_attr_key_from_name(SlStr s)
{
    for (unsigned i = 0; i < IR_ATTR_OTHER; i++)
        if (sl_str_eq_cstr(s, k_attrs[i].name))
            return (IrAttrKey)i;
    return IR_ATTR_OTHER;
}

/* ---- shapes ---- */

bool
ir_shape_is_tuple(const IrShape *s)
{
    return s->dtype == IR_DT_TUPLE;
}

bool
ir_shape_is_array(const IrShape *s)
{
    return s->dtype != IR_DT_TUPLE && s->dtype != IR_DT_TOKEN && s->dtype != IR_DT_OPAQUE &&
           s->dtype != IR_DT_INVALID;
}

/* Saturating at INT64_MAX: ir_module_check rejects input shapes that big, so only modules
 * built in memory could get there, and a saturated size never wraps into a small one. */
int64_t
ir_shape_elem_count(const IrShape *s)
{
    int64_t n = 1;
    for (uint32_t i = 0; i < s->rank; i++)
        if (__builtin_mul_overflow(n, s->dims[i], &n))
            return INT64_MAX;
    return n;
}

int64_t
ir_shape_byte_size(const IrShape *s)
{
    if (ir_shape_is_tuple(s)) {
        int64_t total = 0;
        for (uint32_t i = 0; i < s->n_elems; i++)
            if (__builtin_add_overflow(total, ir_shape_byte_size(&s->elems[i]), &total))
                return INT64_MAX;
        return total;
    }
    uint32_t bits = ir_dtype_bits(s->dtype);
    if (bits == 0)
        return 0;
    int64_t bytes_per = bits < 8 ? 1 : bits / 8; /* GSPMD counts sub-byte types as whole bytes */
    int64_t bytes;
    return __builtin_mul_overflow(ir_shape_elem_count(s), bytes_per, &bytes) ? INT64_MAX : bytes;
}

bool
ir_shape_equal(const IrShape *a, const IrShape *b, bool compare_layout)
{
    if (a->dtype != b->dtype || a->rank != b->rank || a->n_elems != b->n_elems)
        return false;
    for (uint32_t i = 0; i < a->rank; i++) {
        if (a->dims[i] != b->dims[i])
            return false;
        uint8_t ka = a->dim_kinds ? a->dim_kinds[i] : 0, kb = b->dim_kinds ? b->dim_kinds[i] : 0;
        if (ka != kb)
            return false;
    }
    if (compare_layout && !sl_str_eq(a->layout, b->layout))
        return false;
    for (uint32_t i = 0; i < a->n_elems; i++)
        if (!ir_shape_equal(&a->elems[i], &b->elems[i], compare_layout))
            return false;
    return true;
}

uint32_t
ir_shape_leaf_count(const IrShape *s)
{
    if (!ir_shape_is_tuple(s))
        return 1;
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->n_elems; i++)
        n += ir_shape_leaf_count(&s->elems[i]);
    return n;
}

static const IrShape *
leaf_walk(const IrShape *s, uint32_t *left)
{
    if (!ir_shape_is_tuple(s)) {
        if (*left == 0)
            return s;
        (*left)--;
        return NULL;
    }
    for (uint32_t i = 0; i < s->n_elems; i++) {
        const IrShape *r = leaf_walk(&s->elems[i], left);
        if (r)
            return r;
    }
    return NULL;
}

const IrShape *
ir_shape_leaf(const IrShape *s, uint32_t leaf)
{
    return leaf_walk(s, &leaf);
}

IrShape
ir_shape_make(SlArena *a, IrDtype t, const int64_t *dims, uint32_t rank)
{
    IrShape s = {0};
    s.dtype = t;
    s.rank = rank;
    if (rank)
        s.dims = SL_DUP_ARRAY(a, int64_t, dims, rank);
    return s;
}

IrShape
ir_shape_clone(SlArena *a, const IrShape *src)
{
    IrShape s = *src;
    if (src->rank) {
        s.dims = SL_DUP_ARRAY(a, int64_t, src->dims, src->rank);
        if (src->dim_kinds)
            s.dim_kinds = SL_DUP_ARRAY(a, uint8_t, src->dim_kinds, src->rank);
    }
    if (src->n_elems) {
        s.elems = SL_NEW_ARRAY(a, IrShape, src->n_elems);
        if (s.elems)
            for (uint32_t i = 0; i < src->n_elems; i++)
                s.elems[i] = ir_shape_clone(a, &src->elems[i]);
    }
    return s;
}

IrShape
ir_shape_with_dims(SlArena *a, const IrShape *src, const int64_t *dims)
{
    IrShape s = ir_shape_clone(a, src);
    if (s.dims)
        memcpy(s.dims, dims, s.rank * sizeof(int64_t));
    return s;
}

void
ir_shape_print(const IrShape *s, bool with_layout, SlBuf *out)
{
    if (ir_shape_is_tuple(s)) {
        sl_buf_putc(out, '(');
        for (uint32_t i = 0; i < s->n_elems; i++) {
            if (i)
                sl_buf_puts(out, ", ");
            ir_shape_print(&s->elems[i], with_layout, out);
        }
        sl_buf_putc(out, ')');
        return;
    }
    sl_buf_puts(out, ir_dtype_name(s->dtype));
    sl_buf_putc(out, '[');
    for (uint32_t i = 0; i < s->rank; i++) {
        if (i)
            sl_buf_putc(out, ',');
        uint8_t k = s->dim_kinds ? s->dim_kinds[i] : IR_DIM_STATIC;
        if (k == IR_DIM_UNBOUNDED) {
            sl_buf_putc(out, '?');
            continue;
        }
        if (k == IR_DIM_BOUNDED)
            sl_buf_puts(out, "<=");
        sl_buf_put_i64(out, s->dims[i]);
    }
    sl_buf_putc(out, ']');
    if (with_layout && s->layout.len)
        sl_buf_put_str(out, s->layout);
}

/* ---- iota device arrays ---- */

int64_t
ir_iota_count(const IrIota *io)
{
    int64_t n = 1;
    for (uint32_t i = 0; i < io->n_dims; i++)
        n *= io->dims[i];
    return n;
}

void
ir_iota_expand(const IrIota *io, int64_t *out)
{
    int64_t n = ir_iota_count(io);
    uint32_t r = io->n_reshape;
    for (int64_t lin = 0; lin < n; lin++) {
        /* `lin` indexes the transposed array; peel coordinates from the last transposed axis,
         * whose extent is reshape[perm[j]], and place them at source axis perm[j]. */
        int64_t rem = lin;
        int64_t src_idx[64] = {0};
        for (uint32_t jj = r; jj-- > 0;) {
            int64_t axis = io->perm ? io->perm[jj] : (int64_t)jj;
            int64_t ext = io->reshape[axis];
            src_idx[axis] = rem % ext;
            rem /= ext;
        }
        int64_t v = 0;
        for (uint32_t a = 0; a < r; a++)
            v = v * io->reshape[a] + src_idx[a];
        out[lin] = v;
    }
}

/* ---- modules ---- */

/* Every instruction carries its attributes by value: keep them from growing unnoticed. */
_Static_assert(sizeof(void *) != 8 || sizeof(IrAttr) <= 32, "IrAttr grew past 32 bytes");

IrModule *
ir_module_new(SlArena *arena, SlInterner *names, SlSym name)
{
    IrModule *m = SL_NEW(arena, IrModule);
    if (!m)
        return NULL;
    m->arena = arena;
    m->names = names;
    m->name = name;
    sl_map_init(&m->name_counters);
    sl_map_init(&m->recovery_index);
    return m;
}

void
ir_module_fini(IrModule *m)
{
    if (!m)
        return;
    sl_map_fini(&m->name_counters);
    sl_map_fini(&m->recovery_index);
    for (uint32_t k = 0; k < m->n_recovery; k++)
        ir_module_fini(m->recovery[k].module);
}

/* Grows an arena array to hold one more element (doubling; the old block is abandoned). */
static bool
grow(SlArena *a, void **arr, uint32_t n, uint32_t *cap, size_t elem, size_t align)
{
    if (n < *cap)
        return true;
    uint32_t ncap = *cap ? *cap * 2 : 4;
    /* Not zeroed: slots past n are written before they are read. */
    void *p = (size_t)ncap > SIZE_MAX / elem ? NULL : sl_arena_alloc_uninit(a, ncap * elem, align);
    if (!p)
        return false;
    if (n)
        memcpy(p, *arr, (size_t)n * elem);
    *arr = p;
    *cap = ncap;
    return true;
}

static int64_t
header_int(const IrModule *m, const char *key)
{
    const IrHeaderAttr *h = ir_module_find_header(m, key);
    if (!h)
        return 1;
    int64_t v = 0;
    for (size_t i = 0; i < h->value.len; i++) {
        char c = h->value.ptr[i];
        if (c < '0' || c > '9')
            return 1;
        if (v > (INT64_MAX - 9) / 10)
            return INT64_MAX; /* the parser allows at most IR_MAX_DEVICES */
        v = v * 10 + (c - '0');
    }
    return h->value.len ? v : 1;
}

int64_t
ir_module_num_partitions(const IrModule *m)
{
    return header_int(m, "num_partitions");
}

int64_t
ir_module_replica_count(const IrModule *m)
{
    return header_int(m, "replica_count");
}

const IrHeaderAttr *
ir_module_find_header(const IrModule *m, const char *key)
{
    for (uint32_t i = 0; i < m->n_header; i++)
        if (sl_str_eq_cstr(sl_sym_str(m->header[i].key), key))
            return &m->header[i];
    return NULL;
}

SlStatus
ir_module_set_header(IrModule *m, const char *key, SlStr value)
{
    char *copy = sl_arena_strndup(m->arena, value.ptr, value.len);
    if (!copy)
        return SL_ERR_NOMEM;
    SlStr v = {copy, value.len};
    for (uint32_t i = 0; i < m->n_header; i++) {
        if (sl_str_eq_cstr(sl_sym_str(m->header[i].key), key)) {
            m->header[i].value = v;
            return SL_OK;
        }
    }
    SlSym k = sl_intern_cstr(m->names, key);
    if (!k || !grow(m->arena, (void **)&m->header, m->n_header, &m->cap_header,
                    sizeof(IrHeaderAttr), _Alignof(IrHeaderAttr)))
        return SL_ERR_NOMEM;
    m->header[m->n_header].key = k;
    m->header[m->n_header].value = v;
    m->n_header++;
    return SL_OK;
}

IrComputation *
ir_module_find_computation(const IrModule *m, SlSym name)
{
    for (uint32_t i = 0; i < m->n_comps; i++)
        if (m->comps[i]->name == name)
            return m->comps[i];
    return NULL;
}

/* ---- origin recovery table ---- */

bool
ir_origin_array_equal(const IrOriginArray *a, const IrOriginArray *b)
{
    return sl_str_eq(a->name, b->name) && a->n_index == b->n_index &&
           (a->n_index == 0 || !memcmp(a->index, b->index, a->n_index * sizeof(int64_t)));
}

void
ir_origin_array_print(const IrOriginArray *a, SlBuf *b)
{
    sl_buf_puts(b, "{\"");
    sl_buf_put_str(b, a->name);
    sl_buf_putc(b, '"');
    if (a->n_index) {
        sl_buf_puts(b, " {");
        for (uint32_t k = 0; k < a->n_index; k++) {
            if (k)
                sl_buf_putc(b, ',');
            sl_buf_put_i64(b, a->index[k]);
        }
        sl_buf_putc(b, '}');
    }
    sl_buf_putc(b, '}');
}

static uint64_t
origin_hash(const IrOriginArray *a)
{
    uint64_t h = sl_hash_bytes(a->name.ptr, a->name.len);
    if (a->n_index)
        h ^= sl_hash_bytes(a->index, a->n_index * sizeof(int64_t)) * 0x9e3779b97f4a7c15ull;
    return h;
}

/* Keys probe linearly from the hash (distinct arrays may share one); `*free_key` is the first
 * unused key met. Returns the matching entry's index or -1. */
static int64_t
recovery_probe(const IrModule *m, const IrOriginArray *old, uint64_t *free_key)
{
    for (uint64_t key = origin_hash(old);; key++) {
        uint64_t v = 0;
        if (key == SL_MAP_EMPTY)
            continue;
        if (!sl_map_get(&m->recovery_index, key, &v)) {
            *free_key = key;
            return -1;
        }
        if (ir_origin_array_equal(&m->recovery[v - 1].old, old))
            return (int64_t)v - 1;
    }
}

const IrRecovery *
ir_module_find_recovery(const IrModule *m, const IrOriginArray *old)
{
    uint64_t key = 0;
    int64_t k = recovery_probe(m, old, &key);
    return k < 0 ? NULL : &m->recovery[k];
}

SlStatus
ir_module_add_recovery(IrModule *m, const IrRecovery *e)
{
    uint64_t key = 0;
    if (recovery_probe(m, &e->old, &key) >= 0)
        return SL_ERR_INVALID;
    if (!grow(m->arena, (void **)&m->recovery, m->n_recovery, &m->cap_recovery,
              sizeof(IrRecovery), _Alignof(IrRecovery)) ||
        !sl_map_put(&m->recovery_index, key, (uint64_t)m->n_recovery + 1))
        return SL_ERR_NOMEM;
    m->recovery[m->n_recovery++] = *e;
    return SL_OK;
}

int64_t
ir_name_split(SlStr s, SlStr *base)
{
    /* one backward pass reads the digits and their value (unsigned: a run of more than 15
     * digits may wrap, and is rejected anyway) */
    size_t i = s.len;
    uint64_t v = 0, place = 1;
    while (i > 0 && s.ptr[i - 1] >= '0' && s.ptr[i - 1] <= '9') {
        v += (uint64_t)(s.ptr[--i] - '0') * place;
        place *= 10;
    }
    if (i == s.len || i == 0 || s.ptr[i - 1] != '.' || s.len - i > 15) {
        *base = s;
        return -1;
    }
    base->ptr = s.ptr;
    base->len = i - 1;
    return (int64_t)v;
}

/* name_counters maps a base symbol to 1 + the highest suffix seen (0 = base itself seen). */
void
ir_module_reserve_name(IrModule *m, SlSym name)
{
    SlStr base;
    int64_t suffix = ir_name_split(sl_sym_str(name), &base);
    SlSym b = suffix < 0 ? name : sl_intern(m->names, base);
    if (!b)
        return;
    uint64_t next = 0;
    bool seen = sl_map_get(&m->name_counters, SL_MAP_KEY(b), &next);
    uint64_t want = suffix < 0 ? 1 : (uint64_t)suffix + 1;
    if (!seen || want > next)
        sl_map_put(&m->name_counters, SL_MAP_KEY(b), want);
}

bool
ir_module_set_name_counter(IrModule *m, SlSym base, uint64_t next)
{
    uint64_t have = 0;
    if (sl_map_get(&m->name_counters, SL_MAP_KEY(base), &have) && have >= next)
        return true;
    return sl_map_put(&m->name_counters, SL_MAP_KEY(base), next);
}

void
ir_module_defer_names(IrModule *m)
{
    m->names_pending = true;
}

static void
reserve_pending(IrModule *m)
{
    m->names_pending = false;
    uint64_t n = m->n_comps;
    for (uint32_t k = 0; k < m->n_comps; k++)
        n += m->comps[k]->n_instrs;
    sl_map_reserve(&m->name_counters, m->name_counters.count + n);
    for (uint32_t k = 0; k < m->n_comps; k++) {
        const IrComputation *c = m->comps[k];
        ir_module_reserve_name(m, c->name);
        for (uint32_t i = 0; i < c->n_instrs; i++)
            ir_module_reserve_name(m, c->instrs[i]->name);
    }
}

SlSym
ir_name_with_suffix(SlInterner *names, SlStr base, uint64_t n)
{
    /* "base.n", built on the stack unless the base is long. */
    char digits[24];
    size_t n_digits = 0;
    for (uint64_t v = n; v; v /= 10)
        digits[sizeof(digits) - ++n_digits] = (char)('0' + v % 10);
    char small[128];
    size_t len = base.len + 1 + n_digits;
    SlBuf buf;
    sl_buf_init(&buf);
    char *text = small;
    if (len > sizeof(small)) {
        sl_buf_append(&buf, base.ptr, base.len);
        sl_buf_append(&buf, ".", 1);
        sl_buf_append(&buf, digits + sizeof(digits) - n_digits, n_digits);
        text = buf.failed ? NULL : buf.data;
    } else {
        memcpy(small, base.ptr, base.len);
        small[base.len] = '.';
        memcpy(small + base.len + 1, digits + sizeof(digits) - n_digits, n_digits);
    }
    SlSym r = text ? sl_intern(names, (SlStr){text, len}) : NULL;
    sl_buf_fini(&buf);
    return r;
}

SlSym
ir_module_unique_name(IrModule *m, SlStr want)
{
    if (m->names_pending)
        reserve_pending(m);
    SlStr base;
    if (ir_name_split(want, &base) < 0)
        base = want;
    SlSym b = sl_intern(m->names, base);
    if (!b)
        return NULL;
    uint64_t next = 0;
    if (!sl_map_get(&m->name_counters, SL_MAP_KEY(b), &next)) {
        sl_map_put(&m->name_counters, SL_MAP_KEY(b), 1);
        return b;
    }
    if (next == 0)
        next = 1;
    SlSym r = ir_name_with_suffix(m->names, base, next);
    sl_map_put(&m->name_counters, SL_MAP_KEY(b), next + 1);
    return r;
}

IrComputation *
ir_computation_new(IrModule *m, SlSym name)
{
    IrComputation *c = SL_NEW(m->arena, IrComputation);
    if (!c)
        return NULL;
    c->name = name;
    c->id = m->next_comp_id++;
    return c;
}

SlStatus
ir_module_add_computation(IrModule *m, IrComputation *c)
{
    if (!grow(m->arena, (void **)&m->comps, m->n_comps, &m->cap_comps, sizeof(IrComputation *),
              _Alignof(IrComputation *)))
        return SL_ERR_NOMEM;
    m->comps[m->n_comps++] = c;
    if (c->is_entry)
        m->entry = c;
    return SL_OK;
}

/* Records parameter `i` under its number; the first of duplicate numbers wins (the checker
 * reports duplicates). Negative or absurd numbers are not indexed (and so not found). */
static SlStatus
index_param(IrComputation *c, IrModule *m, IrInstr *i)
{
    int64_t k = i->parameter_number;
    if (k < 0 || k >= IR_MAX_PARAMS)
        return SL_OK;
    uint32_t need = (uint32_t)k + 1;
    if (need > c->cap_params) {
        uint32_t cap = c->cap_params ? c->cap_params * 2 : 4;
        if (cap < need)
            cap = need;
        IrInstr **p = SL_NEW_ARRAY(m->arena, IrInstr *, cap); /* zeroed: gaps are NULL */
        if (!p)
            return SL_ERR_NOMEM;
        if (c->n_params)
            memcpy(p, c->params, c->n_params * sizeof(IrInstr *));
        c->params = p;
        c->cap_params = cap;
    }
    if (need > c->n_params)
        c->n_params = need;
    if (!c->params[k])
        c->params[k] = i;
    return SL_OK;
}

SlStatus
ir_computation_add_instr(IrComputation *c, IrModule *m, IrInstr *i)
{
    if (!grow(m->arena, (void **)&c->instrs, c->n_instrs, &c->cap_instrs, sizeof(IrInstr *),
              _Alignof(IrInstr *)))
        return SL_ERR_NOMEM;
    c->instrs[c->n_instrs++] = i;
    i->parent = c;
    if (i->op == IR_OP_PARAMETER)
        return index_param(c, m, i);
    return SL_OK;
}

uint32_t
ir_computation_param_count(const IrComputation *c)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < c->n_params; k++)
        if (c->params[k])
            n++;
    return n;
}

IrInstr *
ir_computation_param(const IrComputation *c, int64_t number)
{
    if (number < 0 || (uint64_t)number >= c->n_params)
        return NULL;
    return c->params[number];
}

IrInstr *
ir_instr_new(IrModule *m, IrOp op, const IrShape *shape, IrInstr *const *operands,
             uint32_t n_operands)
{
    IrInstr *i = SL_NEW(m->arena, IrInstr);
    if (!i)
        return NULL;
    i->op = op;
    i->id = m->next_instr_id++;
    if (shape)
        i->shape = *shape;
    if (n_operands) {
        i->operands = SL_DUP_ARRAY(m->arena, IrInstr *, operands, n_operands);
        if (!i->operands)
            return NULL;
    }
    i->n_operands = n_operands;
    return i;
}

IrAttr *
ir_instr_place_attr(IrInstr *i, IrAttr *a, bool (*prints_after)(const IrAttr *))
{
    uint32_t at = (uint32_t)(a - i->attrs), to = at;
    for (uint32_t k = 0; k < at; k++)
        if (prints_after(&i->attrs[k])) {
            to = k;
            break;
        }
    IrAttr moved = *a;
    memmove(&i->attrs[to + 1], &i->attrs[to], (size_t)(at - to) * sizeof(IrAttr));
    i->attrs[to] = moved;
    return &i->attrs[to];
}

bool
ir_attr_prints_after_sharding(const IrAttr *a)
{
    if (a->key == IR_ATTR_OTHER) {
        const char *k = a->u.other.key ? sl_sym_cstr(a->u.other.key) : "";
        return !strcmp(k, "statistics") || !strcmp(k, "result_accuracy") || !strcmp(k, "origin");
    }
    return a->key == IR_ATTR_FRONTEND_ATTRIBUTES || a->key == IR_ATTR_METADATA ||
           a->key == IR_ATTR_BACKEND_CONFIG || a->key == IR_ATTR_CONTROL_PREDECESSORS;
}

IrAttr *
ir_instr_place_sharding(IrInstr *i, IrAttr *a)
{
    return ir_instr_place_attr(i, a, ir_attr_prints_after_sharding);
}

uint32_t
ir_instr_user_count(const IrInstr *i)
{
    uint32_t n = 0;
    for (uint32_t k = 0; i->parent && k < i->parent->n_instrs; k++) {
        const IrInstr *u = i->parent->instrs[k];
        for (uint32_t j = 0; j < u->n_operands; j++)
            if (u->operands[j] == i) {
                n++;
                break;
            }
    }
    return n;
}

IrAttr *
ir_instr_add_attr(IrModule *m, IrInstr *i, IrAttrKey key)
{
    uint32_t cap = i->cap_attrs;
    if (i->n_attrs == UINT16_MAX)
        return NULL;
    /* Most instructions have one to three attributes, added one by one: start at two, and
     * grow in place while the array is still the arena's latest block (else double). */
    if (i->n_attrs == cap) {
        if (cap && sl_arena_extend(m->arena, i->attrs, (size_t)cap * sizeof(IrAttr),
                                   (size_t)(cap + 1) * sizeof(IrAttr))) {
            cap++;
        } else {
            uint32_t ncap = cap ? cap * 2 : 2;
            if (ncap > UINT16_MAX)
                ncap = UINT16_MAX;
            IrAttr *p = sl_arena_alloc_uninit(m->arena, (size_t)ncap * sizeof(IrAttr),
                                              _Alignof(IrAttr));
            if (!p)
                return NULL;
            if (i->n_attrs)
                memcpy(p, i->attrs, (size_t)i->n_attrs * sizeof(IrAttr));
            i->attrs = p;
            cap = ncap;
        }
    }
    i->cap_attrs = (uint16_t)cap;
    IrAttr *a = &i->attrs[i->n_attrs++];
    memset(a, 0, sizeof(*a));
    a->key = key;
    return a;
}

bool
ir_instr_reserve_attrs(IrModule *m, IrInstr *i, uint32_t n)
{
    uint32_t need = (uint32_t)i->n_attrs + n;
    if (need <= i->cap_attrs)
        return true;
    if (need > UINT16_MAX)
        return false;
    IrAttr *p = sl_arena_alloc_uninit(m->arena, (size_t)need * sizeof(IrAttr), _Alignof(IrAttr));
    if (!p)
        return false;
    if (i->n_attrs)
        memcpy(p, i->attrs, (size_t)i->n_attrs * sizeof(IrAttr));
    i->attrs = p;
    i->cap_attrs = (uint16_t)need;
    return true;
}

const IrAttr *
ir_instr_find_attr(const IrInstr *i, IrAttrKey key)
{
    for (uint32_t k = 0; k < i->n_attrs; k++)
        if (i->attrs[k].key == key)
            return &i->attrs[k];
    return NULL;
}

IrAttr *
ir_instr_find_attr_mut(IrInstr *i, IrAttrKey key)
{
    for (uint32_t k = 0; k < i->n_attrs; k++)
        if (i->attrs[k].key == key)
            return &i->attrs[k];
    return NULL;
}

const IrAttr *
ir_instr_find_other(const IrInstr *i, const char *name)
{
    for (uint32_t k = 0; k < i->n_attrs; k++) {
        const IrAttr *a = &i->attrs[k];
        if (a->key == IR_ATTR_OTHER && a->u.other.key &&
            strcmp(sl_sym_cstr(a->u.other.key), name) == 0)
            return a;
    }
    return NULL;
}

void
ir_instr_remove_attr(IrInstr *i, IrAttrKey key)
{
    uint32_t w = 0;
    for (uint32_t k = 0; k < i->n_attrs; k++)
        if (i->attrs[k].key != key)
            i->attrs[w++] = i->attrs[k];
    i->n_attrs = (uint16_t)w;
}

const struct ShdSharding *
ir_instr_sharding(const IrInstr *i)
{
    const IrAttr *a = ir_instr_find_attr(i, IR_ATTR_SHARDING);
    return a ? a->u.sharding : NULL;
}

const IrMetadata *
ir_instr_metadata(const IrInstr *i)
{
    const IrAttr *a = ir_instr_find_attr(i, IR_ATTR_METADATA);
    return a ? a->u.metadata : NULL;
}

bool
ir_instr_int_attr(const IrInstr *i, IrAttrKey key, int64_t *out)
{
    const IrAttr *a = ir_instr_find_attr(i, key);
    if (!a)
        return false;
    *out = a->u.i;
    return true;
}

uint32_t
ir_instr_ints_attr(const IrInstr *i, IrAttrKey key, const int64_t **values)
{
    const IrAttr *a = ir_instr_find_attr(i, key);
    if (!a) {
        *values = NULL;
        return 0;
    }
    *values = a->u.ints.v;
    return a->u.ints.n;
}

IrComputation *
ir_instr_called(const IrInstr *i, IrAttrKey key)
{
    const IrAttr *a = ir_instr_find_attr(i, key);
    return a ? a->u.comp : NULL;
}
