/* sdy_import.c - Shardy's round-trip attributes into GSPMD shardings (sdy.h).
 * Owns: the module rewrite that XLA's round-trip import implies (which shardings count, the
 * result shardings) and the removal of the round-trip attributes afterwards; the sdy text is
 * read in sdy_text.c, one instruction's attributes in sdy_instr.c, a tensor sharding
 * converted to a tile assignment in sdy_convert.c, and shard_map's manual computations
 * rewritten into GSPMD's form in sdy_manual.c.
 * Does not own: sharding normalization (shd_tiled applies XLA's Subgroup rules).
 * Invariants: every sdy value is read (and checked) before the shardings are rewritten, and on
 * any error the parser discards the module, so no half-imported module escapes; errors point at
 * the byte in the source file. */
#include <string.h>

#include "hlo/sdy_int.h"

static SlStatus
mark_open(SdyCtx *cx, IrInstr *i, const SdyParsed *p)
{
    return sdy_set_unspecified(cx, i, p->open, p->n_open);
}

static bool
is_python_callback(const IrInstr *i)
{
    SlStr t = sdy_call_target(i);
    return sl_str_eq_cstr(t, "xla_python_cpu_callback") ||
           sl_str_eq_cstr(t, "xla_python_gpu_callback") ||
           sl_str_eq_cstr(t, "xla_ffi_python_cpu_callback") ||
           sl_str_eq_cstr(t, "xla_ffi_python_gpu_callback");
}

/* Shardy constructs without a GSPMD rewrite here (yet): exit 3, named. */
static SlStatus
check_supported(SdyCtx *cx, const IrInstr *i)
{
    if (sdy_target_is(i, "xla.sdy.ShardingGroup"))
        return sl_fail(cx->err, SL_ERR_UNSUPPORTED, sdy_instr_loc(cx, i),
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
    if (sdy_target_is(v, "xla.sdy.FuncResultSharding") && !ir_shape_is_tuple(&v->shape))
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
        return sl_fail(cx->err, SL_ERR_NOMEM, sdy_instr_loc(cx, root), "out of memory");
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
        return sl_fail(cx->err, SL_ERR_NOMEM, sdy_instr_loc(cx, root), "out of memory");
    return sdy_set_sharding(cx, root, s);
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
                while (sdy_target_is(i->operands[o], "xla.sdy.FuncResultSharding") &&
                       i->operands[o]->n_operands == 1)
                    i->operands[o] = i->operands[o]->operands[0];
            if (sdy_target_is(i, "xla.sdy.FuncResultSharding") && i->n_operands == 1) {
                if (comp->root == i)
                    comp->root = i->operands[0];
                continue;
            }
            comp->instrs[w++] = i;
        }
        comp->n_instrs = w;
    }
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

/* The import reads operands by position (a get-tuple-element's tuple, a call's arguments)
 * before the checker has seen the module: it runs only when every instruction has the operand
 * count ir_ops.def allows its opcode (found by the mutation run: get-tuple-element()). */
static bool
operand_counts_ok(const IrModule *m)
{
    for (uint32_t c = 0; c < m->n_comps; c++)
        for (uint32_t k = 0; k < m->comps[c]->n_instrs; k++) {
            const IrInstr *i = m->comps[c]->instrs[k];
            if (!ir_op_operand_count_ok(i->op, i->n_operands))
                return false;
        }
    return true;
}

/* Where entry `key` (with its '=') starts among the top-level entries of a frontend_attributes
 * value `{k=v, ...}`: never inside a nested value or a string, where the same text may appear
 * (and where stripping it would leave the rest unreadable). NULL when absent. */
static const char *
top_level_key(SlStr value, const char *key)
{
    size_t kl = strlen(key);
    int depth = 0;
    char in_str = 0; /* the open quote: the lexer reads '...' strings too */
    bool entry_start = false;
    for (size_t p = 0; p < value.len; p++) {
        char c = value.ptr[p];
        if (in_str) {
            if (c == '\\')
                p++;
            else if (c == in_str)
                in_str = 0;
            continue;
        }
        if (depth == 1 && entry_start && c != ' ') {
            if (p + kl <= value.len && !memcmp(value.ptr + p, key, kl))
                return value.ptr + p;
            entry_start = false;
        }
        if (c == '"' || c == '\'')
            in_str = c;
        else if (c == '{')
            entry_start = ++depth == 1;
        else if (c == '}')
            depth--;
        else if (c == ',' && depth == 1)
            entry_start = true;
    }
    return NULL;
}

static SlStatus
run(SdyCtx *cx)
{
    SlStatus st;
    const IrHeaderAttr *h = ir_module_find_header(cx->m, "frontend_attributes");
    const char *meshes_key = "xla.sdy.meshes=";
    const char *found = h ? top_level_key(h->value, meshes_key) : NULL;
    if (!found)
        return SL_OK; /* not a Shardy module: `sharding=` is all there is */
    if (!operand_counts_ok(cx->m))
        return SL_OK; /* left as read, for ir_module_check to reject */
    /* the value after the key: a balanced {...} or a quoted string */
    const char *v = found + strlen(meshes_key), *end = h->value.ptr + h->value.len;
    const char *q = v;
    int depth = 0;
    char in_str = 0;
    if (q < end && (*q == '"' || *q == '\'')) {
        char quote = *q;
        for (q++; q < end && *q != quote; q++)
            if (*q == '\\' && q + 1 < end)
                q++;
        q = q < end ? q + 1 : q;
    } else {
        for (; q < end; q++) {
            if (in_str) {
                if (*q == '\\' && q + 1 < end)
                    q++;
                else if (*q == in_str)
                    in_str = 0;
            } else if (*q == '"' || *q == '\'') {
                in_str = *q;
            } else if (*q == '{') {
                depth++;
            } else if (*q == '}' && --depth == 0) {
                q++;
                break;
            }
        }
    }
    SlSrcLoc hloc = sdy_value_loc(cx, h->value.ptr, NULL);
    if (hloc.line)
        hloc.col += (uint32_t)(v - h->value.ptr); /* the header value is on one line */
    SdyText t;
    if ((st = sdy_text_init(&t, cx->a, (SlStr){v, (size_t)(q - v)}, hloc, cx->err)) ||
        (st = sdy_parse_meshes(cx, &t)))
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
            const IrFrontendAttr *f = sdy_find_frontend(i, "xla.sdy.sharding");
            bool frs = sdy_target_is(i, "xla.sdy.FuncResultSharding");
            bool keeps = i->op == IR_OP_PARAMETER || sdy_target_is(i, "Sharding") ||
                         is_python_callback(i) || i->op == IR_OP_SEND || i->op == IR_OP_RECV ||
                         i->op == IR_OP_AFTER_ALL || frs;
            if (!f)
                continue;
            SdyParsed p;
            if ((st = sdy_parse_instr_sharding(cx, i, f, &i->shape, false, &p)))
                goto out;
            if (!keeps)
                continue;
            if (frs && !sl_map_put(&frs_index, SL_MAP_KEY(i), parsed.len)) {
                st = sl_fail(cx->err, SL_ERR_NOMEM, sdy_instr_loc(cx, i), "out of memory");
                goto out;
            }
            if (!SL_VEC_PUSH(&parsed, SdyParsed, p) || !SL_VEC_PUSH(&targets, IrInstr *, i)) {
                st = sl_fail(cx->err, SL_ERR_NOMEM, sdy_instr_loc(cx, i), "out of memory");
                goto out;
            }
            n_frs += frs;
        }
    }
    /* then change: only the imported shardings count, as in XLA's Shardy import */
    for (uint32_t c = 0; c < cx->m->n_comps; c++) {
        IrComputation *comp = cx->m->comps[c];
        for (uint32_t k = 0; k < comp->n_instrs; k++)
            if (!sdy_target_is(comp->instrs[k], "Sharding")) /* one without sdy keeps its own */
                ir_instr_remove_attr(comp->instrs[k], IR_ATTR_SHARDING);
    }
    for (size_t k = 0; k < parsed.len; k++) {
        IrInstr *i = SL_VEC_AT(&targets, IrInstr *, k);
        const SdyParsed *p = &SL_VEC_AT(&parsed, SdyParsed, k);
        if (sdy_target_is(i, "xla.sdy.FuncResultSharding"))
            continue;
        if ((st = sdy_set_sharding(cx, i, p->sharding)))
            goto out;
        if (sdy_target_is(i, "Sharding") && (st = mark_open(cx, i, p)))
            goto out;
        n_set++;
    }
    if ((st = sdy_import_manual(cx)))
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
