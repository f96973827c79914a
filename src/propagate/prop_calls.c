/* prop_calls.c - the pass across computation boundaries: the bodies a while, conditional or
 * call runs; the related instructions that share one sharding (XLA's GetRelatedInstructions: a
 * while with its body root and its body and condition parameters, a conditional with its
 * branch roots, a call with its callee's root, a callee parameter with the caller's operand);
 * carrying a change to them (MaybeComputationPropagation); and the device check of a while
 * body holding a channel instruction (CheckAndUpdateDeviceAssignmentsInWhileBody). Owns those.
 * Does not own: the caller of each computation (cx->caller, filled in by prop_run.c). */
#include "propagate/prop_int.h"

static IrComputation *
called(const IrInstr *i, IrAttrKey key)
{
    return ir_instr_called(i, key);
}

/* Computations `i` calls that the pass treats as partitionable bodies. */
uint32_t
prop_bodies(const IrInstr *i, IrComputation **out, uint32_t cap)
{
    uint32_t n = 0;
    if (i->op == IR_OP_WHILE) {
        if (called(i, IR_ATTR_CONDITION) && n < cap)
            out[n++] = called(i, IR_ATTR_CONDITION);
        if (called(i, IR_ATTR_BODY) && n < cap)
            out[n++] = called(i, IR_ATTR_BODY);
    } else if (i->op == IR_OP_CONDITIONAL) {
        const IrAttr *b = ir_instr_find_attr(i, IR_ATTR_BRANCH_COMPUTATIONS);
        if (b) {
            for (uint32_t k = 0; k < b->u.comps.n && n < cap; k++)
                out[n++] = b->u.comps.v[k];
        } else {
            if (called(i, IR_ATTR_TRUE_COMPUTATION) && n < cap)
                out[n++] = called(i, IR_ATTR_TRUE_COMPUTATION);
            if (called(i, IR_ATTR_FALSE_COMPUTATION) && n < cap)
                out[n++] = called(i, IR_ATTR_FALSE_COMPUTATION);
        }
    } else if (i->op == IR_OP_CALL) {
        IrComputation *c = called(i, IR_ATTR_TO_APPLY);
        if (c && n < cap)
            out[n++] = c;
    }
    return n;
}

/* GetRelatedInstructions. */
uint32_t
prop_related(PropCtx *cx, IrInstr *i, IrInstr **out)
{
    IrComputation *b[PROP_MAX_RELATED];
    uint32_t n = 0;
    if (i->op == IR_OP_WHILE) {
        IrComputation *body = called(i, IR_ATTR_BODY), *cond = called(i, IR_ATTR_CONDITION);
        out[n++] = i;
        if (body && body->root)
            out[n++] = body->root;
        if (body && ir_computation_param(body, 0))
            out[n++] = ir_computation_param(body, 0);
        if (cond && ir_computation_param(cond, 0))
            out[n++] = ir_computation_param(cond, 0);
        return n;
    }
    if (i->op == IR_OP_CONDITIONAL) {
        uint32_t nb = prop_bodies(i, b, PROP_MAX_RELATED - 1);
        out[n++] = i;
        for (uint32_t k = 0; k < nb; k++)
            if (b[k]->root)
                out[n++] = b[k]->root;
        return n;
    }
    if (i->op == IR_OP_CALL) {
        IrComputation *c = called(i, IR_ATTR_TO_APPLY);
        out[n++] = i;
        if (c && c->root)
            out[n++] = c->root;
        return n;
    }
    if (i->op == IR_OP_PARAMETER) {
        IrInstr *caller = cx->caller[i->parent->id];
        if (!caller)
            return 0;
        if (caller->op == IR_OP_CONDITIONAL) {
            uint32_t nb = prop_bodies(caller, b, PROP_MAX_RELATED);
            for (uint32_t k = 0; k < nb; k++)
                if (b[k] == i->parent && k + 1 < caller->n_operands) {
                    out[n++] = i;
                    out[n++] = caller->operands[k + 1];
                    return n;
                }
        }
        if (caller->op == IR_OP_CALL && i->parameter_number < caller->n_operands) {
            out[n++] = i;
            out[n++] = caller->operands[i->parameter_number];
            return n;
        }
    }
    return 0;
}

static void
mark_changed(SlVec *changed, IrInstr *i)
{
    SL_VEC_PUSH(changed, IrInstr *, i);
}

static void
propagate_to(PropCtx *cx, IrInstr *search, IrInstr *i, SlVec *changed, int depth)
{
    IrInstr *rel[PROP_MAX_RELATED];
    uint32_t n = prop_related(cx, search, rel);
    bool found = false;
    for (uint32_t k = 0; k < n; k++)
        found = found || rel[k] == i;
    if (!found)
        return;
    for (uint32_t k = 0; k < n; k++) {
        IrInstr *r = rel[k];
        if ((!prop_sh(cx, r) || !prop_same_sharding(prop_sh(cx, r), prop_sh(cx, i))) &&
            !cx->provided[r->id]) {
            PropDir d = cx->dir;
            const IrInstr *f = cx->from;
            const char *rule = cx->rule;
            cx->dir = PROP_DIR_COMPUTATION;
            cx->from = i;
            cx->rule = "computation boundary";
            prop_set(cx, r, prop_sh(cx, i), NULL);
            cx->dir = d;
            cx->from = f;
            cx->rule = rule;
            mark_changed(changed, r);
            prop_computation_propagation(cx, r, changed, depth + 1);
        }
    }
}

/* MaybeComputationPropagation. */
void
prop_computation_propagation(PropCtx *cx, IrInstr *i, SlVec *changed, int depth)
{
    if (depth > 64)
        return;
    if (i->op == IR_OP_CONDITIONAL || i->op == IR_OP_WHILE || i->op == IR_OP_CALL)
        propagate_to(cx, i, i, changed, depth);
    if (i->op == IR_OP_PARAMETER || i->parent->root == i) {
        IrInstr *caller = cx->caller[i->parent->id];
        if (caller) {
            propagate_to(cx, caller, i, changed, depth);
            if (i->op == IR_OP_PARAMETER &&
                (caller->op == IR_OP_CONDITIONAL || caller->op == IR_OP_CALL))
                propagate_to(cx, i, i, changed, depth);
        }
    }
}

static bool
other_attr_true(const IrInstr *i, const char *key)
{
    const IrAttr *a = ir_instr_find_other(i, key);
    return a && sl_str_eq_cstr(a->u.other.text, "true");
}

static SlStatus
device_conflict(SlError *err, const IrInstr *i, int64_t dev, const IrInstr *ch, int64_t ch_dev)
{
    return sl_fail(err, SL_ERR_INVALID, (SlSrcLoc){NULL, i->src_line, i->src_col},
                   "Instruction: %s is on device: %lld, which conflicts with device: %lld of "
                   "channel instruction: %s",
                   sl_sym_cstr(i->name), (long long)dev, (long long)ch_dev, sl_sym_cstr(ch->name));
}

/* CheckAndUpdateDeviceAssignmentsInWhileBody. */
SlStatus
prop_check_while_devices(PropCtx *cx, IrInstr *w, SlError *err)
{
    IrComputation *body = called(w, IR_ATTR_BODY);
    if (!body)
        return SL_OK;
    int64_t unique = -1;
    const IrInstr *channel = NULL;
    /* device -> the last instruction seen on it, by device */
    int64_t devs[256];
    const IrInstr *by_dev[256];
    uint32_t nd = 0;
    for (uint32_t x = 0; x < body->n_instrs; x++) {
        IrInstr *i = body->instrs[x];
        int64_t dev;
        if (!cx->sh[i->id] || !shd_unique_device(cx->sh[i->id], &dev))
            continue;
        bool is_channel =
            ((i->op == IR_OP_SEND || i->op == IR_OP_RECV) && !other_attr_true(i, "is_host_transfer")) ||
            ((i->op == IR_OP_ALL_REDUCE || i->op == IR_OP_REDUCE_SCATTER) &&
             ir_instr_find_attr(i, IR_ATTR_CHANNEL_ID));
        if (unique >= 0) {
            if (dev != unique)
                return device_conflict(err, i, dev, channel, unique);
        } else if (is_channel) {
            channel = i;
            unique = dev;
            /* the lowest conflicting device first, as a sorted map gives */
            int64_t best = -1;
            const IrInstr *bi = NULL;
            for (uint32_t k = 0; k < nd; k++)
                if (devs[k] != unique && (best < 0 || devs[k] < best)) {
                    best = devs[k];
                    bi = by_dev[k];
                }
            if (bi)
                return device_conflict(err, bi, best, channel, unique);
        } else {
            uint32_t k = 0;
            while (k < nd && devs[k] != dev)
                k++;
            if (k == nd && nd < SL_COUNTOF(devs))
                devs[nd++] = dev;
            if (k < SL_COUNTOF(devs))
                by_dev[k] = i;
        }
    }
    if (unique < 0)
        return SL_OK;
    int64_t wd;
    if (cx->sh[w->id] && shd_unique_device(cx->sh[w->id], &wd) && wd != unique)
        return device_conflict(err, w, wd, channel, unique);
    IrInstr *root = body->root;
    int64_t rd;
    if (!cx->sh[root->id] || !shd_unique_device(cx->sh[root->id], &rd)) {
        cx->from = channel;
        cx->rule = "channel device in while body";
        prop_set(cx, root, shd_maximal(cx->a, unique), NULL);
        cx->from = NULL;
    } else if (rd != unique) {
        return device_conflict(err, root, rd, channel, unique);
    }
    return SL_OK;
}
