/* manual.c - the meaning of manually partitioned regions in an unpartitioned module (SimEnv
 * `manual`): the module runs on N lanes, one per device; SPMDFullToShardShape cuts each
 * device's tile out of the full value by the operand's sharding, and SPMDShardToFullShape
 * reassembles the tiles held by the devices of one manual group by its own sharding.
 * Owns: manual groups (which devices share a value) and those two cuts. Does not own: tile
 * arithmetic (src/sharding), the other opcodes (eval_*.c). */
#include "sim/sim_int.h"

#include <inttypes.h>
#include <string.h>

#include "sharding/shd.h"

int64_t
sim_manual_group(const ShdSharding *s, int64_t dev)
{
    if (!s)
        return 0;
    if (s->kind == SHD_MANUAL)
        return dev;
    if (s->kind != SHD_TILED || !shd_is_manual_subgroup(s))
        return 0;
    int64_t total = shd_device_count(s), pos = -1;
    for (int64_t i = 0; i < total && pos < 0; i++)
        if (s->devices[i] == dev)
            pos = i;
    if (pos < 0)
        return -1;
    int64_t group = 0;
    for (uint32_t d = s->n_tile_dims; d-- > 0;) {
        int64_t c = pos % s->tile_dims[d];
        pos /= s->tile_dims[d];
        uint32_t data = s->n_tile_dims - s->n_subgroups;
        if (d >= data && s->subgroups[d - data] == SHD_SUB_MANUAL)
            group = c;
    }
    return group;
}

bool
sim_is_manual_cut(const SimCtx *cx, const IrInstr *ins)
{
    if (!cx->env || !cx->env->manual || ins->op != IR_OP_CUSTOM_CALL)
        return false;
    const IrAttr *a = ir_instr_find_attr(ins, IR_ATTR_CUSTOM_CALL_TARGET);
    return a && (sl_str_eq_cstr(a->u.text, "\"SPMDFullToShardShape\"") ||
                 sl_str_eq_cstr(a->u.text, "\"SPMDShardToFullShape\""));
}

/* Copies the box of `src` at src_off with extent `ext` to `dst` at dst_off. */
static void
copy_box(const SimValue *src, const int64_t *src_off, SimValue *dst, const int64_t *dst_off,
         const int64_t *ext)
{
    uint32_t r = src->rank;
    int64_t ss[SIM_MAX_RANK], ds[SIM_MAX_RANK], idx[SIM_MAX_RANK] = {0}, n = 1;
    sim_strides(src->dims, r, ss);
    sim_strides(dst->dims, r, ds);
    for (uint32_t d = 0; d < r; d++)
        n *= ext[d];
    for (int64_t i = 0; i < n; i++, sim_idx_next(idx, ext, r)) {
        int64_t a = 0, b = 0;
        for (uint32_t d = 0; d < r; d++) {
            a += (src_off[d] + idx[d]) * ss[d];
            b += (dst_off[d] + idx[d]) * ds[d];
        }
        dst->data[b] = src->data[a];
    }
}

/* Offset and extent in the full shape `full` of device `dev`'s part along each dim: the whole
 * dim where the shard keeps it (same size), else the tile of `s`, cut to the shard's size. */
static bool
part_box(const ShdSharding *s, const IrShape *full, const int64_t *shard, int64_t dev,
         int64_t *off, int64_t *ext)
{
    for (uint32_t d = 0; d < full->rank; d++) {
        if (shard[d] == full->dims[d]) {
            off[d] = 0, ext[d] = shard[d];
            continue;
        }
        if (!s || s->kind != SHD_TILED || d >= shd_data_rank(s))
            return false;
        off[d] = shd_tile_offset(s, full, d, dev);
        ext[d] = shd_tile_extent(s, full, d, dev);
        if (ext[d] > shard[d])
            ext[d] = shard[d];
        if (ext[d] < 0)
            ext[d] = 0;
    }
    return true;
}

SlStatus
sim_eval_manual_cut(SimCtx *cx, const IrInstr *ins, const int64_t *devs, uint32_t n,
                    SimValue *const *ops, SimValue **out)
{
    const IrAttr *a = ir_instr_find_attr(ins, IR_ATTR_CUSTOM_CALL_TARGET);
    bool to_shard = sl_str_eq_cstr(a->u.text, "\"SPMDFullToShardShape\"");
    const IrShape *rs = &ins->shape;
    if (ins->n_operands != 1 || rs->dtype == IR_DT_TUPLE || rs->rank > SIM_MAX_RANK)
        return sim_fail(cx, ins, SL_ERR_INVALID, "takes one array operand");
    const IrShape *os = &ins->operands[0]->shape;
    if (os->rank != rs->rank || os->dtype != rs->dtype)
        return sim_fail(cx, ins, SL_ERR_INVALID, "operand and result differ in rank or type");
    const ShdSharding *s = ir_instr_sharding(to_shard ? ins->operands[0] : ins);
    if (!to_shard && n != (uint32_t)cx->n_devices)
        return sim_fail(cx, ins, SL_ERR_INVALID, "reassembles tiles while only %u of %" PRId64
                        " devices run it (diverged control flow)", n, cx->n_devices);
    int64_t off[SIM_MAX_RANK], ext[SIM_MAX_RANK], zero[SIM_MAX_RANK] = {0};
    for (uint32_t l = 0; l < n; l++) {
        SimValue *v = sim_value_new(rs);
        if (!v)
            return sim_fail(cx, ins, SL_ERR_NOMEM, "out of memory");
        out[l] = v;
        if (ops[l]->dtype == IR_DT_TUPLE || ops[l]->rank != rs->rank)
            return sim_fail(cx, ins, SL_ERR_INVALID, "operand is not an array of rank %u",
                            rs->rank);
        if (to_shard) {
            if (!part_box(s, os, rs->dims, devs[l], off, ext))
                return sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "cutting a shard needs a tiled "
                                "operand sharding");
            copy_box(ops[l], off, v, zero, ext);
            continue;
        }
        int64_t g = sim_manual_group(s, devs[l]);
        for (uint32_t e = 0; e < n; e++) { /* every device of the group places its tile */
            if (sim_manual_group(s, devs[e]) != g)
                continue;
            if (!part_box(s, rs, os->dims, devs[e], off, ext))
                return sim_fail(cx, ins, SL_ERR_UNSUPPORTED, "placing a shard needs a tiled "
                                "sharding");
            copy_box(ops[e], zero, v, off, ext);
        }
    }
    return SL_OK;
}
