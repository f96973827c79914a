/* check_collective.c - collectives for ir_module_check(): the result shapes of all-reduce,
 * all-gather, reduce-scatter, all-to-all, collective-permute and collective-broadcast from the
 * group size their group mode gives (hlo-text.md §10), and, on every instruction, the device ids
 * that replica_groups and source_target_pairs name. Owns: the partition count a check runs with
 * (the caller's, else the header's). Does not own: dispatch or the module walk (check.c), the
 * reducer's signature (check_common.c). Invariant: the module is never modified; ck->ids holds
 * one attribute's device ids at a time. */
/* clang-format off */
#include "ir/check_int.h" /* the file's own header first */
/* clang-format on */

/* ---- collectives --------------------------------------------------------------------------- */

/* The partition count the module runs with: the caller's, else the header's. */
static int64_t
module_partitions(const IrCheck *ck)
{
    return ck->num_partitions ? ck->num_partitions : ir_module_num_partitions(ck->m);
}

/* Devices per group, following the collective's group mode (hlo-text.md §10). Empty groups
 * mean "everything the mode spans". */
static SlStatus
group_size(IrCheck *ck, const IrInstr *in, int64_t *out)
{
    const IrAttr *a = ir_instr_find_attr(in, IR_ATTR_REPLICA_GROUPS);
    int64_t size = 0;
    const IrReplicaGroups *rg = a ? a->u.groups : NULL;
    if (rg && rg->is_iota) {
        if (rg->iota.n_dims != 2)
            return ck_bad(ck, in, "iota replica_groups must have two dims");
        size = rg->iota.dims[1];
    } else if (rg && rg->n_groups > 0) {
        size = rg->group_sizes[0];
        for (uint32_t g = 1; g < rg->n_groups; g++)
            if (rg->group_sizes[g] != size)
                return ck_bad(ck, in, "replica groups have different sizes (%lld and %u)",
                              (long long)size, rg->group_sizes[g]);
    }
    const IrAttr *global = ir_instr_find_attr(in, IR_ATTR_USE_GLOBAL_DEVICE_IDS);
    bool has_channel = ir_instr_find_attr(in, IR_ATTR_CHANNEL_ID) != NULL;
    bool cross_partition = in->op == IR_OP_ALL_TO_ALL || in->op == IR_OP_COLLECTIVE_PERMUTE;
    int64_t replicas = ir_module_replica_count(ck->m), parts = module_partitions(ck);
    if (!has_channel)
        *out = size ? size : replicas;
    else if (global && global->u.b)
        *out = size ? size : replicas * parts;
    else if (cross_partition)
        *out = size ? size : parts;
    else
        *out = (size ? size : replicas) * parts;
    return SL_OK;
}

/* all-gather multiplies dimensions[0] by the group size, reduce-scatter divides it. */
static SlStatus
check_gather_scatter_dim(IrCheck *ck, const IrInstr *in, int64_t g, IrShape *leaves)
{
    SlStatus st;
    const int64_t *d;
    if (ir_instr_ints_attr(in, IR_ATTR_DIMENSIONS, &d) != 1)
        return ck_bad(ck, in, "dimensions= must name exactly one dim");
    for (uint32_t k = 0; k < in->n_operands; k++) {
        if ((st = ck_need_dims(ck, in, "dimensions", d, 1, leaves[k].rank)))
            return st;
        int64_t *x = &leaves[k].dims[d[0]];
        if (*x == ANY_DIM)
            continue;
        if (in->op == IR_OP_ALL_GATHER) {
            *x = ck_sat_mul(*x, g);
        } else if (*x % g) {
            return ck_bad(ck, in, "dim %lld of size %lld is not divisible by the group size %lld",
                          (long long)d[0], (long long)*x, (long long)g);
        } else {
            *x /= g;
        }
    }
    return SL_OK;
}

SlStatus
ck_check_collective(IrCheck *ck, const IrInstr *in)
{
    /* Async forms and ragged-all-to-all are accepted as declared. collective-broadcast keeps
     * its operands' shapes, as all-reduce does (a mutated one summing a f32[10,6] to f32[6]
     * passed check, and verify leaked and said "ok"). */
    if (in->op != IR_OP_ALL_REDUCE && in->op != IR_OP_ALL_GATHER &&
        in->op != IR_OP_REDUCE_SCATTER && in->op != IR_OP_ALL_TO_ALL &&
        in->op != IR_OP_COLLECTIVE_PERMUTE && in->op != IR_OP_COLLECTIVE_BROADCAST)
        return SL_OK;
    SlStatus st = SL_OK;
    if (in->n_operands == 0)
        return ck_bad(ck, in, "expects at least one operand");
    if (in->op == IR_OP_COLLECTIVE_PERMUTE && in->n_operands != 1)
        return SL_OK; /* in-place form with buffers and offsets */
    int64_t g = 1;
    IrShape *leaves = SL_NEW_ARRAY(&ck->scratch, IrShape, in->n_operands);
    IrDtype *types = SL_NEW_ARRAY(&ck->scratch, IrDtype, in->n_operands);
    if (!leaves || !types)
        return ck_nomem(ck, in);
    for (uint32_t k = 0; k < in->n_operands; k++) {
        if ((st = ck_need_array(ck, in, k)))
            return st;
        if (!ck_copy_shape(ck, opnd(in, k), &leaves[k]))
            return ck_nomem(ck, in);
        types[k] = opnd(in, k)->dtype;
    }
    if ((st = group_size(ck, in, &g)))
        return st;
    if (g < 1)
        return ck_bad(ck, in, "replica groups are empty");
    if (in->op == IR_OP_ALL_GATHER || in->op == IR_OP_REDUCE_SCATTER)
        st = check_gather_scatter_dim(ck, in, g, leaves);
    if (st)
        return st;
    if (in->op == IR_OP_ALL_REDUCE || in->op == IR_OP_REDUCE_SCATTER) {
        IrComputation *c;
        for (uint32_t k = 0; k < in->n_operands; k++)
            if ((st = ck_need_called(ck, in, IR_ATTR_TO_APPLY, &c)) ||
                (st = ck_need_reducer(ck, in, c, &types[k], 1)))
                return st;
    }
    return ck_expect_k(ck, in, leaves, in->n_operands);
}

/* ---- device ids in attributes ---- */

/* Replica groups and source-target pairs name each device at most once (a pair list: each
 * source once and each target once), all below replica_count x num_partitions when the
 * header gives either (else below IR_MAX_DEVICES: the count comes with -n, later). */
SlStatus
ck_check_device_ids(IrCheck *ck, const IrInstr *in)
{
    int64_t limit = IR_MAX_DEVICES;
    if (ck->num_partitions || ir_module_find_header(ck->m, "replica_count") ||
        ir_module_find_header(ck->m, "num_partitions"))
        limit = ck_sat_mul(ir_module_replica_count(ck->m), module_partitions(ck));
    const IrAttr *rg = ir_instr_find_attr(in, IR_ATTR_REPLICA_GROUPS);
    const IrAttr *stp = ir_instr_find_attr(in, IR_ATTR_SOURCE_TARGET_PAIRS);
    const IrReplicaGroups *g = rg ? rg->u.groups : NULL;
    if (g && !g->is_iota) {
        uint32_t n = 0;
        for (uint32_t k = 0; k < g->n_groups; k++)
            n += g->group_sizes[k];
        for (uint32_t i = 0; i < n; i++) {
            int64_t d = g->ids[i];
            if (d < 0 || d >= limit)
                return ck_bad(ck, in, "replica_groups names device %lld, outside 0..%lld",
                              (long long)d, (long long)limit - 1);
            if (sl_map_get(&ck->ids, (uint64_t)d, NULL))
                return ck_bad(ck, in, "replica_groups names device %lld twice", (long long)d);
            if (!sl_map_put(&ck->ids, (uint64_t)d, 1))
                return ck_nomem(ck, in);
        }
        sl_map_fini(&ck->ids);
        sl_map_init(&ck->ids);
    }
    if (!stp)
        return SL_OK;
    const uint32_t *sizes = stp->u.lists.sizes;
    const int64_t *v = stp->u.lists.v;
    SlStatus st = SL_OK;
    for (uint32_t k = 0, at = 0; k < stp->u.lists.n && !st; at += sizes[k++]) {
        if (sizes[k] != 2) {
            st = ck_bad(ck, in, "source_target_pairs entry %u is not a pair", k);
            break;
        }
        for (uint32_t j = 0; j < 2 && !st; j++) {
            int64_t d = v[at + j];
            uint64_t key = (uint64_t)d << 1 | j; /* sources and targets apart */
            if (d < 0 || d >= limit)
                st = ck_bad(ck, in, "source_target_pairs names device %lld, outside 0..%lld",
                            (long long)d, (long long)limit - 1);
            else if (sl_map_get(&ck->ids, key, NULL))
                st = ck_bad(ck, in, "device %lld is a %s twice in source_target_pairs",
                            (long long)d, j ? "target" : "source");
            else if (!sl_map_put(&ck->ids, key, 1))
                st = ck_nomem(ck, in);
        }
    }
    sl_map_fini(&ck->ids);
    sl_map_init(&ck->ids);
    return st;
}
