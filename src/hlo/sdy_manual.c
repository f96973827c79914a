/* sdy_manual.c - shard_map's manual computations rewritten into GSPMD's form (sdy.h). Owns: the
 * GlobalToLocalShape / body call / LocalToGlobalShape pattern, the manual axes, and the
 * shardings of the body (manual, or a MANUAL subgroup over some axes). Does not own: reading a
 * sharding (sdy_instr.c, sdy_text.c), the conversion (sdy_convert.c). */
#include <stdio.h>
#include <string.h>

#include "hlo/sdy_int.h"

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
    const IrFrontendAttr *f = sdy_find_frontend(i, "xla.sdy.manual_axes");
    if (!f)
        return sl_fail(cx->err, SL_ERR_INVALID, sdy_instr_loc(cx, i),
                       "%s: a shard_map custom call without xla.sdy.manual_axes",
                       sl_sym_cstr(i->name));
    SdyText t;
    if ((st = sdy_text_init(&t, cx->a, f->value, sdy_value_loc(cx, f->value.ptr, i), cx->err)) ||
        (st = sdy_expect(&t, "#sdy", "'#sdy<manual_axes{...}>'")) ||
        (st = sdy_expect(&t, "<", "'<'")) ||
        (st = sdy_expect(&t, "manual_axes", "'manual_axes'")) || (st = sdy_expect(&t, "{", "'{'")))
        return st;
    int64_t prod = 1;
    if (!sdy_eat(&t, "}")) {
        do {
            SlStr name;
            sdy_skip_ws(&t);
            size_t at = t.p;
            if ((st = sdy_read_name(&t, false, &name, "a quoted axis name")))
                return st;
            uint32_t k = 0;
            while (mesh && k < mesh->n_axes && !sl_str_eq(mesh->axis_names[k], name))
                k++;
            if (!mesh || k == mesh->n_axes) {
                t.p = at;
                return sdy_text_fail(&t, SL_ERR_INVALID,
                                     "Shardy manual axes: axis %s not in the mesh", "is");
            }
            prod *= mesh->axis_sizes[k];
            mask[k] = true;
        } while (sdy_eat(&t, ","));
        if ((st = sdy_expect(&t, "}", "',' or '}'")))
            return st;
    }
    if ((st = sdy_expect(&t, ">", "'>'")))
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
    return sdy_convert_manual(a, ts, mask);
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
    if (!n->name || !s || sdy_set_sharding(cx, n, s) != SL_OK || !SL_VEC_PUSH(out, IrInstr *, n))
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
        if (sdy_target_is(i, "SPMDFullToShardShape") || sdy_target_is(i, "SPMDShardToFullShape"))
            return sl_fail(cx->err, SL_ERR_UNSUPPORTED, sdy_instr_loc(cx, i),
                           "%s: a shard_map inside a shard_map is not supported",
                           sl_sym_cstr(i->name));
        SlStatus st = sdy_set_sharding(cx, i, manual_like(cx->a, &i->shape));
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
        return sl_fail(cx->err, SL_ERR_UNSUPPORTED, sdy_instr_loc(cx, v),
                       "%s: a LocalToGlobalShape operand that is no result of the shard_map's "
                       "body call",
                       sl_sym_cstr(v->name));
    if ((st = sdy_set_sharding(cx, v, s)))
        return st;
    const ShdSharding *cs = s;
    if (leaf >= 0) {
        uint32_t n = ir_shape_leaf_count(&call->shape);
        const ShdSharding *old = ir_instr_sharding(call);
        const ShdSharding **leaves = SL_NEW_ARRAY(cx->a, const ShdSharding *, n ? n : 1);
        if (!leaves || leaf >= n)
            return sl_fail(cx->err, SL_ERR_NOMEM, sdy_instr_loc(cx, v), "out of memory");
        for (uint32_t k = 0; k < n; k++)
            leaves[k] = old && old->kind == SHD_TUPLE
                            ? shd_leaf(old, k)
                            : manual_replicated(cx->a, mesh, ir_shape_leaf(&call->shape, k)->rank,
                                                mask);
        leaves[leaf] = s;
        cs = shd_tuple(cx->a, leaves, n);
    }
    IrComputation *body = ir_instr_called(call, IR_ATTR_TO_APPLY);
    if ((st = sdy_set_sharding(cx, call, cs)))
        return st;
    return body && body->root ? sdy_set_sharding(cx, body->root, cs) : SL_OK;
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
        bool g2l = sdy_target_is(i, "xla.sdy.GlobalToLocalShape");
        bool l2g = sdy_target_is(i, "xla.sdy.LocalToGlobalShape");
        if (g2l || l2g) {
            changed = true;
            const IrFrontendAttr *f =
                sdy_find_frontend(i, g2l ? "xla.sdy.in_shardings" : "xla.sdy.out_shardings");
            if (!f) {
                st = sl_fail(cx->err, SL_ERR_INVALID, sdy_instr_loc(cx, i), "%s: no %s",
                             sl_sym_cstr(i->name),
                             g2l ? "xla.sdy.in_shardings" : "xla.sdy.out_shardings");
                break;
            }
            IrShape global = g2l ? operands_shape(cx->a, i) : i->shape;
            SdyParsed p;
            bool mask[SDY_MAX_AXES] = {false}, full = false;
            if ((st = sdy_parse_instr_sharding(cx, i, f, &global, true, &p)) ||
                (st = read_manual_axes(cx, i, p.mesh, mask, &full)))
                break;
            for (uint32_t o = 0; o < p.n_tensors && !full; o++)
                if (p.tensors[o]->mesh != p.mesh) {
                    st = sl_fail(cx->err, SL_ERR_UNSUPPORTED, sdy_instr_loc(cx, i),
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
                st = news ? sl_fail(cx->err, SL_ERR_INVALID, sdy_instr_loc(cx, i),
                                    "%s: %u operands but its shape has another count",
                                    sl_sym_cstr(i->name), n)
                          : sl_fail(cx->err, SL_ERR_NOMEM, sdy_instr_loc(cx, i), "out of memory");
                break;
            }
            for (uint32_t o = 0; o < n && st == SL_OK; o++) {
                const IrShape *res = n > 1 ? ir_shape_leaf(&i->shape, o) : &i->shape;
                const ShdSharding *global_s = n > 1 ? shd_leaf(p.sharding, o) : p.sharding;
                /* the in-body sharding: {manual}, or the free axes plus a manual subgroup */
                const ShdSharding *local_s =
                    full ? shd_manual(cx->a) : sdy_convert_manual(cx->a, p.tensors[o], mask);
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
                    st = sl_fail(cx->err, SL_ERR_NOMEM, sdy_instr_loc(cx, i), "out of memory");
                else if (n_open && ((st = sdy_set_unspecified(cx, cp, open, n_open)) ||
                                    (st = sdy_set_unspecified(cx, cc, open, n_open))))
                    break;
                news[o] = cc;
                if (!full && l2g && st == SL_OK && !n_open) /* open: left to propagation */
                    st = set_local_result(cx, i->operands[o], local_s, p.mesh, mask);
            }
            if (st)
                break;
            if (!(n == 1 ? sl_map_put(&repl, SL_MAP_KEY(i), SL_MAP_KEY(news[0]))
                         : sl_map_put(&parts, SL_MAP_KEY(i), SL_MAP_KEY(news)))) {
                st = sl_fail(cx->err, SL_ERR_NOMEM, sdy_instr_loc(cx, i), "out of memory");
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
                st = sl_fail(cx->err, SL_ERR_INVALID, sdy_instr_loc(cx, i), "%s: bad index",
                             sl_sym_cstr(i->name));
                break;
            }
            if (!sl_map_put(&repl, SL_MAP_KEY(i), SL_MAP_KEY(news[idx])))
                st = sl_fail(cx->err, SL_ERR_NOMEM, sdy_instr_loc(cx, i), "out of memory");
            continue;
        }
        bool partial_call = is_manual_body_call(i) && i->n_operands > 0 &&
                            sdy_target_is(i->operands[0], "SPMDFullToShardShape") &&
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
                    st = sdy_set_sharding(cx, param, ir_instr_sharding(i->operands[o]));
            }
            if (st)
                break;
        } else if (is_manual_body_call(i)) {
            changed = true;
            IrComputation *body = ir_instr_called(i, IR_ATTR_TO_APPLY);
            if ((st = sdy_set_sharding(cx, i, manual_like(cx->a, &i->shape))) ||
                !SL_VEC_PUSH(bodies, IrComputation *, body)) {
                st =
                    st ? st : sl_fail(cx->err, SL_ERR_NOMEM, sdy_instr_loc(cx, i), "out of memory");
                break;
            }
        } else if (i->op == IR_OP_GET_TUPLE_ELEMENT && is_manual_body_call(i->operands[0]) &&
                   shd_is_manual(ir_instr_sharding(i->operands[0]) ? ir_instr_sharding(i->operands[0])
                                                                    : shd_replicated(cx->a))) {
            if ((st = sdy_set_sharding(cx, i, manual_like(cx->a, &i->shape))))
                break;
        }
        if (!SL_VEC_PUSH(&out, IrInstr *, i))
            st = sl_fail(cx->err, SL_ERR_NOMEM, sdy_instr_loc(cx, i), "out of memory");
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

SlStatus
sdy_import_manual(SdyCtx *cx)
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
