/* prop_bwd.c - the backward rules (XLA's GetShardingFromUser and InferShardingFromUsers): the
 * sharding a user asks of one of its operands, per user opcode, and how an instruction takes
 * the best of its users' requests. Owns: those rules. Does not own: gather/scatter dims
 * (prop_gs.c), dot operand inference (prop_fwd.c). */
#include <string.h>

#include "propagate/prop_int.h"

static int
operand_index(const IrInstr *user, const IrInstr *i)
{
    for (uint32_t k = 0; k < user->n_operands; k++)
        if (user->operands[k] == i)
            return (int)k;
    return -1;
}

static bool
shapes_compatible(const IrShape *a, const IrShape *b)
{
    if (ir_shape_is_tuple(a) != ir_shape_is_tuple(b))
        return false;
    if (ir_shape_is_tuple(a)) {
        if (a->n_elems != b->n_elems)
            return false;
        for (uint32_t k = 0; k < a->n_elems; k++)
            if (!shapes_compatible(&a->elems[k], &b->elems[k]))
                return false;
        return true;
    }
    if (a->rank != b->rank)
        return false;
    for (uint32_t k = 0; k < a->rank; k++)
        if (a->dims[k] != b->dims[k])
            return false;
    return true;
}

static const ShdSharding *
broadcast_operand(PropCtx *cx, const IrInstr *b, const ShdSharding *s)
{
    if (px_replicated(s) || px_manual(s) || s->kind != SHD_TILED)
        return s;
    const int64_t *dims;
    uint32_t nd = ir_instr_ints_attr(b, IR_ATTR_DIMENSIONS, &dims);
    int64_t rep[PROP_MAX_RANK];
    uint32_t n = 0;
    bool needs = false;
    for (uint32_t k = 0; k < b->shape.rank; k++) {
        bool kept = false;
        for (uint32_t x = 0; x < nd; x++)
            kept |= dims[x] == (int64_t)k;
        if (!kept) {
            rep[n++] = k;
            needs |= s->tile_dims[k] > 1;
        }
    }
    if (!cx->o->is_spmd && needs)
        return NULL;
    const ShdSharding *r = px_replicate_dims(cx, s, rep, n);
    const ShdSharding *t = px_remove_dims(cx, r, rep, n);
    return t ? px_keep_md(cx, t, s) : NULL;
}

static const ShdSharding *
gte_request(PropCtx *cx, const IrInstr *i, const IrInstr *user, const ShdSharding *us)
{
    int64_t idx = 0;
    ir_instr_int_attr(user, IR_ATTR_INDEX, &idx);
    if (!ir_shape_is_tuple(&i->shape) || idx < 0 || (uint32_t)idx >= i->shape.n_elems)
        return NULL;
    uint32_t nl = ir_shape_leaf_count(&i->shape);
    const ShdSharding **lv = SL_NEW_ARRAY(cx->a, const ShdSharding *, nl + 1);
    if (!lv)
        return NULL;
    const ShdSharding *cur = prop_sh(cx, i);
    const ShdSharding *base_src = us->kind == SHD_TUPLE ? (us->n_leaves ? us->leaves[0] : NULL) : us;
    if (!base_src)
        return NULL;
    for (uint32_t k = 0; k < nl; k++) {
        if (cur)
            lv[k] = cur->kind == SHD_TUPLE ? cur->leaves[k] : cur;
        else {
            const IrShape *ls = ir_shape_leaf(&i->shape, k);
            lv[k] = px_replicate_all_data(cx, base_src, ir_shape_is_array(ls) ? ls->rank : 0);
        }
    }
    uint32_t off = 0;
    for (int64_t k = 0; k < idx; k++)
        off += ir_shape_leaf_count(&i->shape.elems[k]);
    if (us->kind == SHD_TUPLE) {
        for (uint32_t k = 0; k < us->n_leaves && off + k < nl; k++)
            lv[off + k] = us->leaves[k];
    } else {
        uint32_t m = ir_shape_leaf_count(&i->shape.elems[idx]);
        for (uint32_t k = 0; k < m; k++)
            lv[off + k] = us;
    }
    return shd_tuple(cx->a, lv, nl);
}

static const ShdSharding *
reduce_request(PropCtx *cx, const IrInstr *i, const IrInstr *user, const ShdSharding *us)
{
    if (i->shape.rank == 0)
        return NULL;
    int k = operand_index(user, i);
    if (ir_shape_is_tuple(&user->shape))
        us = px_sub(cx, us, &user->shape, (uint32_t)(k % (int)user->shape.n_elems));
    if (!us)
        return NULL;
    const int64_t *dims;
    uint32_t nd = ir_instr_ints_attr(user, IR_ATTR_DIMENSIONS, &dims);
    if (us->kind == SHD_TILED) {
        int64_t pos[PROP_MAX_RANK];
        for (uint32_t x = 0; x < nd; x++)
            pos[x] = dims[x];
        /* insert_dims wants sorted positions */
        for (uint32_t a = 1; a < nd; a++)
            for (uint32_t b = a; b > 0 && pos[b - 1] > pos[b]; b--) {
                int64_t t = pos[b];
                pos[b] = pos[b - 1];
                pos[b - 1] = t;
            }
        const ShdSharding *t = px_insert_dims(cx, us, pos, nd);
        if (!t)
            return NULL;
        us = px_keep_md(cx, t, us);
    }
    uint32_t n_in = user->n_operands / 2;
    for (uint32_t x = 0; x < n_in; x++) {
        const IrInstr *op = user->operands[x];
        if (op != i && prop_sh(cx, op) && us->kind != SHD_TUPLE &&
            prop_sh(cx, op)->kind != SHD_TUPLE)
            px_merge_if_compatible(cx, prop_sh(cx, op), px_num_tiles(us) + 1, &us);
    }
    return us;
}

const ShdSharding *
prop_from_user(PropCtx *cx, const IrInstr *i, const IrInstr *user, int level)
{
    if (!prop_can_pass_at_level(user, level))
        return NULL;
    const ShdSharding *us = prop_sh(cx, user);
    if (!px_spatial(us))
        return NULL;
    switch (user->op) {
    case IR_OP_BROADCAST: return broadcast_operand(cx, user, us);
    case IR_OP_CONCATENATE: {
        if (level == 0)
            return NULL;
        if (px_replicated(us))
            return us;
        const int64_t *dims;
        uint32_t nd = ir_instr_ints_attr(user, IR_ATTR_DIMENSIONS, &dims);
        if (us->kind != SHD_TILED || !nd || shd_dim_shards(us, (uint32_t)dims[0]) == 1 ||
            cx->o->is_spmd)
            return us;
        /* Non-SPMD: the operand goes to the devices holding its part. */
        int64_t cdim = dims[0], start = 0;
        for (uint32_t k = 0; k < user->n_operands && user->operands[k] != i; k++)
            start += user->operands[k]->shape.dims[cdim];
        int64_t parts = us->tile_dims[cdim];
        int64_t tile = (user->shape.dims[cdim] + parts - 1) / parts;
        int64_t lo = start / tile, hi = (start + i->shape.dims[cdim] + tile - 1) / tile;
        if (us->n_subgroups)
            return NULL;
        int64_t td[PROP_MAX_RANK];
        memcpy(td, us->tile_dims, us->n_tile_dims * sizeof(int64_t));
        td[cdim] = hi - lo;
        int64_t total = 1;
        for (uint32_t k = 0; k < us->n_tile_dims; k++)
            total *= td[k];
        int64_t *devs = SL_NEW_ARRAY(cx->a, int64_t, total + 1);
        if (!devs)
            return NULL;
        int64_t idx[PROP_MAX_RANK] = {0};
        for (int64_t lin = 0; lin < total; lin++) {
            int64_t rem = lin, src = 0;
            for (uint32_t k = us->n_tile_dims; k-- > 0;) {
                idx[k] = rem % td[k];
                rem /= td[k];
            }
            for (uint32_t k = 0; k < us->n_tile_dims; k++)
                src = src * us->tile_dims[k] + idx[k] + (k == (uint32_t)cdim ? lo : 0);
            devs[lin] = us->devices[src];
        }
        if (total == 1)
            return px_with_md(cx, shd_maximal(cx->a, devs[0]), us->metadata);
        return px_keep_md(cx, shd_tiled(cx->a, td, us->n_tile_dims, devs, NULL, 0), us);
    }
    case IR_OP_CONVOLUTION:
    case IR_OP_DOT: {
        int k = operand_index(user, i);
        if (k < 0 || k > 1)
            return NULL;
        int saved = cx->level;
        cx->level = level;
        const ShdSharding *s = prop_dot_operand_from_user(cx, user, k);
        cx->level = saved;
        return s;
    }
    case IR_OP_DYNAMIC_SLICE:
    case IR_OP_DYNAMIC_UPDATE_SLICE: {
        if (level == 0)
            return NULL;
        if (px_replicated(us))
            return us;
        if (user->op == IR_OP_DYNAMIC_UPDATE_SLICE && user->operands[0] == i)
            return us;
        const IrInstr *op = user->op == IR_OP_DYNAMIC_SLICE ? user->operands[0] : user->operands[1];
        if (op != i)
            return NULL;
        int64_t sd[PROP_MAX_RANK];
        uint32_t n = 0;
        for (uint32_t k = 0; k < user->shape.rank && k < op->shape.rank; k++)
            if (user->shape.dims[k] != op->shape.dims[k])
                sd[n++] = k;
        return px_replicate_dims(cx, us, sd, n);
    }
    case IR_OP_REDUCE_WINDOW: {
        int k = operand_index(user, i);
        if (k < 0 || (uint32_t)k >= user->n_operands / 2)
            return NULL;
        if (ir_shape_is_tuple(&user->shape))
            return px_sub(cx, us, &user->shape, (uint32_t)k);
        return us;
    }
    case IR_OP_RESHAPE: {
        const ShdSharding *t = shd_propagate_through_reshape(cx->a, &user->shape, &i->shape, us);
        return t ? px_keep_md(cx, t, us) : NULL;
    }
    case IR_OP_PAD: return user->operands[0] == i ? us : NULL;
    case IR_OP_SLICE: return us;
    case IR_OP_TRANSPOSE: {
        const int64_t *dims;
        uint32_t nd = ir_instr_ints_attr(user, IR_ATTR_DIMENSIONS, &dims);
        int64_t rev[PROP_MAX_RANK];
        for (uint32_t k = 0; k < nd; k++)
            rev[dims[k]] = k;
        const ShdSharding *t = shd_transpose(cx->a, us, rev);
        return t ? px_keep_md(cx, t, us) : NULL;
    }
    case IR_OP_TUPLE: {
        const ShdSharding *best = NULL;
        for (uint32_t k = 0; k < user->n_operands; k++) {
            if (user->operands[k] != i)
                continue;
            const ShdSharding *s = px_sub(cx, us, &user->shape, k);
            if (s && (!best || px_more_specific(s, best)))
                best = s;
        }
        return best;
    }
    case IR_OP_GET_TUPLE_ELEMENT: return gte_request(cx, i, user, us);
    case IR_OP_REDUCE: return reduce_request(cx, i, user, us);
    case IR_OP_SORT: {
        if (us->kind == SHD_TUPLE)
            return px_sub(cx, us, &user->shape, (uint32_t)operand_index(user, i));
        return us;
    }
    case IR_OP_REVERSE: {
        const int64_t *dims;
        uint32_t nd = ir_instr_ints_attr(user, IR_ATTR_DIMENSIONS, &dims);
        const ShdSharding *t = shd_reverse(cx->a, us, dims, nd);
        return t ? px_keep_md(cx, t, us) : NULL;
    }
    case IR_OP_OUTFEED: {
        if (user->operands[0] != i)
            return NULL;
        if (us->kind != SHD_TUPLE)
            return us;
        return us->n_leaves ? us->leaves[0] : NULL;
    }
    case IR_OP_GATHER: return prop_gather_from_user(cx, i, user);
    case IR_OP_SCATTER: return prop_scatter_from_user(cx, i, user);
    case IR_OP_CUSTOM_CALL:
        if (!shapes_compatible(&i->shape, &user->shape))
            return NULL;
        return us;
    default:
        if (shapes_compatible(&i->shape, &user->shape))
            return us;
        return NULL;
    }
}

bool
prop_backward(PropCtx *cx, IrInstr *i)
{
    if (cx->level < 2 && i->op == IR_OP_BROADCAST)
        return false;
    const ShdSharding *cur = prop_sh(cx, i);
    if (cur && px_manual(cur))
        return false;
    uint32_t nu = prop_n_users(cx, i);
    if (!cur || px_tile_maximal(cur)) {
        for (uint32_t k = 0; k < nu; k++) {
            IrInstr *u = prop_user(cx, i, k);
            const ShdSharding *us = prop_sh(cx, u);
            if (!us || prop_is_custom_call(u, "SPMDFullToShardShape"))
                continue;
            cx->from = u;
            cx->rule = "manual";
            if (ir_shape_is_array(&i->shape) && px_manual(us))
                return prop_set(cx, i, px_manual_sh(cx, us), NULL);
            const ShdSharding *s = prop_from_user(cx, i, u, cx->level);
            if (s && px_manual(s))
                return prop_set(cx, i, s, NULL);
        }
    }
    if (!prop_support_spatial(cx, i, false, cx->allow_params))
        return false;
    bool improved = false, combine = cx->o->is_spmd && cx->level > 0;
    for (uint32_t k = 0; k < nu; k++) {
        IrInstr *u = prop_user(cx, i, k);
        cx->from = u;
        if (u->op == IR_OP_RNG_BIT_GENERATOR) {
            cx->rule = "rng-bit-generator seed";
            return prop_set(cx, i, shd_replicated(cx->a), NULL);
        }
        if (prop_saturated(cx, prop_sh(cx, i)))
            continue;
        const ShdSharding *s = prop_from_user(cx, i, u, cx->level);
        if (s && prop_is_custom_call(i, "ShardBarrierTo"))
            s = shd_replicated(cx->a);
        if (s) {
            cx->rule = ir_op_name(u->op);
            improved |= prop_improve(cx, i, s, combine, false);
        }
    }
    return improved;
}
