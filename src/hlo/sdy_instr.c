/* sdy_instr.c - one instruction's Shardy attributes (sdy.h): finding the frontend attribute
 * and the custom-call target, source locations inside the attribute values, parsing a
 * sharding against the instruction's shape, and writing the GSPMD result back. Used by the
 * module import (sdy_import.c) and the shard_map rewrite (sdy_manual.c). Does not own: the sdy
 * text grammar (sdy_text.c), the conversion to a tile assignment (sdy_convert.c). */
#include <string.h>

#include "hlo/sdy_int.h"

static SlStr
strip_quotes(SlStr s)
{
    if (s.len >= 2 && s.ptr[0] == '"' && s.ptr[s.len - 1] == '"')
        return (SlStr){s.ptr + 1, s.len - 2};
    return s;
}

SlStr
sdy_call_target(const IrInstr *i)
{
    const IrAttr *a = i->op == IR_OP_CUSTOM_CALL ? ir_instr_find_attr(i, IR_ATTR_CUSTOM_CALL_TARGET)
                                                 : NULL;
    return a ? strip_quotes(a->u.text) : (SlStr){"", 0};
}

bool
sdy_target_is(const IrInstr *i, const char *t)
{
    return sl_str_eq_cstr(sdy_call_target(i), t);
}

const IrFrontendAttr *
sdy_find_frontend(const IrInstr *i, const char *key)
{
    const IrAttr *a = ir_instr_find_attr(i, IR_ATTR_FRONTEND_ATTRIBUTES);
    if (!a)
        return NULL;
    for (uint32_t k = 0; k < a->u.frontend.n; k++)
        if (sl_str_eq_cstr(sl_sym_str(a->u.frontend.v[k].key), key))
            return &a->u.frontend.v[k];
    return NULL;
}

SlSrcLoc
sdy_value_loc(const SdyCtx *cx, const char *value, const IrInstr *owner)
{
    uint64_t k;
    if (sl_map_get(&cx->locs, SL_MAP_KEY(value), &k)) {
        const SdyValueLoc *l = &cx->loc_list[k - 1];
        return (SlSrcLoc){cx->path, l->line, l->col};
    }
    return (SlSrcLoc){cx->path, owner ? owner->src_line : 0, owner ? owner->src_col : 0};
}

SlSrcLoc
sdy_instr_loc(const SdyCtx *cx, const IrInstr *i)
{
    return (SlSrcLoc){cx->path, i->src_line, i->src_col};
}

static SlStatus
check_rank(SdyCtx *cx, SdyText *t, const SdyTensor *ts, const IrShape *shape, const IrInstr *i)
{
    /* a maximal (or empty) mesh may leave the dimensions out, as Shardy's import writes it */
    if (!ir_shape_is_array(shape) || ts->rank == shape->rank ||
        (ts->mesh->n_axes == 0 && ts->rank == 0))
        return SL_OK;
    (void)t;
    return sl_fail(cx->err, SL_ERR_INVALID, sdy_instr_loc(cx, i),
                   "%s: its xla.sdy.sharding has %u dimension shardings but the value has rank "
                   "%u",
                   sl_sym_cstr(i->name), ts->rank, shape->rank);
}

static SlStatus
convert_failed(SdyCtx *cx, const IrInstr *i)
{
    if (sl_arena_failed(cx->a))
        return sl_fail(cx->err, SL_ERR_NOMEM, sdy_instr_loc(cx, i), "out of memory");
    return sl_fail(cx->err, SL_ERR_UNSUPPORTED, sdy_instr_loc(cx, i),
                   "%s: its xla.sdy.sharding splits the mesh into more than %d pieces",
                   sl_sym_cstr(i->name), SDY_MAX_PIECES);
}

/* sharding := '#sdy.sharding' '<' tensor | '#sdy.sharding_per_value' '<' '[' ('<' tensor
 *             (',' '<' tensor)*)? ']' '>' */
SlStatus
sdy_parse_instr_sharding(SdyCtx *cx, const IrInstr *i, const IrFrontendAttr *f,
                         const IrShape *shape, bool keep, SdyParsed *out)
{
    SlStatus st;
    SdyText t;
    SdyTensor *ts = SL_NEW(cx->a, SdyTensor);
    memset(out, 0, sizeof(*out));
    if (!ts)
        return sl_fail(cx->err, SL_ERR_NOMEM, sdy_instr_loc(cx, i), "out of memory");
    if ((st = sdy_text_init(&t, cx->a, f->value, sdy_value_loc(cx, f->value.ptr, i), cx->err)))
        return st;
    uint32_t n_leaves = ir_shape_is_tuple(shape) ? ir_shape_leaf_count(shape) : 1;
    if (sdy_eat(&t, "#sdy.sharding_per_value")) {
        if ((st = sdy_expect(&t, "<", "'<'")) ||
            (st = sdy_expect(&t, "[", "'[' of the value shardings")))
            return st;
        const ShdSharding *buf[64], **leaves = buf;
        uint32_t n = 0;
        if (n_leaves > SL_COUNTOF(buf) && !(leaves = SL_NEW_ARRAY(cx->a, const ShdSharding *,
                                                                 n_leaves)))
            return sl_fail(cx->err, SL_ERR_NOMEM, sdy_instr_loc(cx, i), "out of memory");
        if (keep && !(out->tensors = SL_NEW_ARRAY(cx->a, const SdyTensor *, n_leaves + 1)))
            return sl_fail(cx->err, SL_ERR_NOMEM, sdy_instr_loc(cx, i), "out of memory");
        if (!sdy_eat(&t, "]")) {
            do {
                size_t at = t.p;
                if (keep && n > 0 && !(ts = SL_NEW(cx->a, SdyTensor)))
                    return sl_fail(cx->err, SL_ERR_NOMEM, sdy_instr_loc(cx, i), "out of memory");
                if ((st = sdy_expect(&t, "<", "'<' opening a value sharding")) ||
                    (st = sdy_parse_tensor(cx, &t, ts)))
                    return st;
                if (n == n_leaves) {
                    t.p = at;
                    return sdy_text_fail(&t, SL_ERR_INVALID,
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
                if (!(leaves[n++] = sdy_convert(cx->a, ts)))
                    return convert_failed(cx, i);
                if (n_leaves == 1 && !ir_shape_is_tuple(shape))
                    for (uint32_t d = 0; d < ts->rank; d++)
                        if (ts->dim_open[d])
                            out->open[out->n_open++] = d;
            } while (sdy_eat(&t, ","));
            if ((st = sdy_expect(&t, "]", "',' or ']' in the value shardings")))
                return st;
        }
        if ((st = sdy_expect(&t, ">", "'>' closing the value shardings")))
            return st;
        if (n != n_leaves && !(n == 1 && n_leaves == 0))
            return sl_fail(cx->err, SL_ERR_INVALID, sdy_instr_loc(cx, i),
                           "%s: its xla.sdy.sharding lists %u value shardings for %u results",
                           sl_sym_cstr(i->name), n, n_leaves);
        out->sharding = ir_shape_is_tuple(shape) ? shd_tuple(cx->a, leaves, n) : leaves[0];
    } else if (sdy_eat(&t, "#sdy.sharding")) {
        if ((st = sdy_expect(&t, "<", "'<'")) || (st = sdy_parse_tensor(cx, &t, ts)) ||
            (st = check_rank(cx, &t, ts, shape, i)))
            return st;
        if (ir_shape_is_tuple(shape))
            return sl_fail(cx->err, SL_ERR_INVALID, sdy_instr_loc(cx, i),
                           "%s: a tuple-shaped value needs #sdy.sharding_per_value",
                           sl_sym_cstr(i->name));
        out->mesh = ts->mesh;
        if (keep && (out->tensors = SL_NEW_ARRAY(cx->a, const SdyTensor *, 1)))
            out->tensors[out->n_tensors++] = ts;
        if (!(out->sharding = sdy_convert(cx->a, ts)))
            return convert_failed(cx, i);
        for (uint32_t d = 0; d < ts->rank; d++)
            if (ts->dim_open[d])
                out->open[out->n_open++] = d;
    } else {
        return sdy_text_fail(&t, SL_ERR_PARSE, "Shardy sharding: expected %s",
                             "'#sdy.sharding<' or '#sdy.sharding_per_value<'");
    }
    if (sdy_peek(&t) != '\0')
        return sdy_text_fail(&t, SL_ERR_PARSE, "Shardy sharding: unexpected text after %s", "'>'");
    if (!out->sharding)
        return sl_fail(cx->err, SL_ERR_NOMEM, sdy_instr_loc(cx, i), "out of memory");
    return SL_OK;
}

SlStatus
sdy_set_sharding(SdyCtx *cx, IrInstr *i, const ShdSharding *s)
{
    IrAttr *a = ir_instr_find_attr_mut(i, IR_ATTR_SHARDING);
    if (!a) {
        if (!(a = ir_instr_add_attr(cx->m, i, IR_ATTR_SHARDING)))
            return sl_fail(cx->err, SL_ERR_NOMEM, sdy_instr_loc(cx, i), "out of memory");
        a = ir_instr_place_sharding(i, a);
    }
    a->u.sharding = s;
    return SL_OK;
}

/* An open dimension of a `Sharding` call may still be refined by propagation: GSPMD says so
 * with `unspecified_dims` in the backend_config (JAX's GSPMD lowering of UNCONSTRAINED). Open
 * dimensions anywhere else are kept closed: GSPMD shardings have no open dimensions. */
SlStatus
sdy_set_unspecified(SdyCtx *cx, IrInstr *i, const int64_t *dims, uint32_t n)
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
        return sl_fail(cx->err, SL_ERR_NOMEM, sdy_instr_loc(cx, i), "out of memory");
    a->u.text = (SlStr){copy, len};
    return SL_OK;
}
