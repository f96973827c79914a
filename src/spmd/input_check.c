/* input_check.c - warnings about an input that is not what the partitioner expects: a module
 * that has not been through sharding propagation (instructions without a sharding), and a
 * module that is already partitioned (collectives or partition-id outside manual regions,
 * entry parameters whose shape is already a shard's). Owns: the detection and the wording.
 * Does not own: recording (spmd_warn) or partitioning; nothing here changes the output.
 * Invariant: walks computations and instructions in IR order, so warnings are deterministic. */
#include "spmd/spmd_int.h"

#include <stdio.h>
#include <stdlib.h>

/* Computations that compute scalars for their caller (reducers, comparators, scatter and
 * select functions): their instructions never carry a sharding and are not partitioned. */
static void
mark_applied(const IrModule *m, bool *applied)
{
    static const IrAttrKey keys[] = {IR_ATTR_TO_APPLY, IR_ATTR_SELECT, IR_ATTR_SCATTER};
    for (uint32_t k = 0; k < m->n_comps; k++) {
        const IrComputation *c = m->comps[k];
        for (uint32_t i = 0; i < c->n_instrs; i++) {
            const IrInstr *hlo = c->instrs[i];
            if (hlo->op == IR_OP_CALL)
                continue; /* call's to_apply is a body, partitioned like the caller */
            for (size_t a = 0; a < SL_COUNTOF(keys); a++) {
                const IrComputation *callee = ir_instr_called(hlo, keys[a]);
                if (callee && callee->id < m->next_comp_id)
                    applied[callee->id] = true;
            }
        }
    }
}

static bool is_manual_like(const ShdSharding *s);

/* A collective or partition-id outside manual regions, in a partitioned computation. */
static bool
has_collectives(const IrModule *m, const bool *applied)
{
    for (uint32_t k = 0; k < m->n_comps; k++) {
        const IrComputation *c = m->comps[k];
        if (c->id < m->next_comp_id && applied[c->id])
            continue;
        for (uint32_t i = 0; i < c->n_instrs; i++) {
            IrOpFamily fam = ir_op_family(c->instrs[i]->op);
            if ((fam == IR_FAM_ALL_REDUCE || fam == IR_FAM_COLLECTIVE ||
                 fam == IR_FAM_COLLECTIVE_PERMUTE || fam == IR_FAM_PARTITION_ID) &&
                !is_manual_like(ir_instr_sharding(c->instrs[i])))
                return true;
        }
    }
    return false;
}

static bool
is_unannotated(const IrInstr *hlo)
{
    const ShdSharding *s = ir_instr_sharding(hlo);
    return !s || s->kind == SHD_UNKNOWN;
}

/* Instructions the partitioner reads (reducers, comparators and scatter/select functions
 * left out) and how many of them carry no sharding; `applied` as mark_applied fills it. */
static uint32_t
count_unannotated(const IrModule *m, const bool *applied, bool with_constants, uint32_t *total,
                  const IrInstr **first)
{
    uint32_t missing = 0;
    *total = 0;
    if (first)
        *first = NULL;
    for (uint32_t k = 0; k < m->n_comps; k++) {
        const IrComputation *c = m->comps[k];
        if (c->id < m->next_comp_id && applied[c->id])
            continue;
        for (uint32_t i = 0; i < c->n_instrs; i++) {
            if (!with_constants && c->instrs[i]->op == IR_OP_CONSTANT)
                continue; /* neither counted nor missing */
            (*total)++;
            if (!is_unannotated(c->instrs[i]))
                continue;
            missing++;
            /* the first in the entry computation, else the first anywhere */
            if (first && (!*first || (c->is_entry && !(*first)->parent->is_entry)))
                *first = c->instrs[i];
        }
    }
    return missing;
}

uint32_t
spmd_count_unannotated(const IrModule *m, bool with_constants, uint32_t *total)
{
    *total = 0;
    bool *applied = calloc(m->next_comp_id ? m->next_comp_id : 1, sizeof(bool));
    if (!applied)
        return 0;
    mark_applied(m, applied);
    uint32_t missing = count_unannotated(m, applied, with_constants, total, NULL);
    free(applied);
    return missing;
}

/* A module with shardings on fewer than half its instructions has not been through sharding
 * propagation: the warning then says how to get the module XLA's partitioner sees. After
 * propagation (the CLI's default) what is left unannotated is what XLA leaves too: no
 * warning then. */
static void
check_annotated(SpmdCtx *cx)
{
    const IrModule *m = cx->in;
    if (cx->opts->input_propagated)
        return;
    bool *applied = calloc(m->next_comp_id ? m->next_comp_id : 1, sizeof(bool));
    if (!applied)
        return;
    mark_applied(m, applied);
    uint32_t total = 0;
    const IrInstr *first = NULL;
    /* constants are left out: replicated, each user slices its part locally */
    uint32_t missing = count_unannotated(m, applied, false, &total, &first);
    if (!missing) {
        free(applied);
        return;
    }
    bool partitioned = has_collectives(m, applied);
    free(applied);
    char msg[640];
    int n = snprintf(msg, sizeof(msg),
                     "%u of %u instructions carry no sharding and are partitioned as "
                     "replicated, this one first",
                     missing, total);
    if (n > 0 && (size_t)n < sizeof(msg) && 2 * (uint64_t)missing > total)
        snprintf(msg + n, sizeof(msg) - (size_t)n,
                 "; the module looks %s: partition the module XLA partitions instead, dumped by "
                 "running with "
                 "XLA_FLAGS=--xla_dump_to=DIR --xla_dump_hlo_pass_re=spmd-partitioning "
                 "(take the file whose name ends in .before_spmd-partitioning.txt, the module "
                 "before spmd-partitioning)",
                 partitioned ? "already partitioned (it holds collectives outside manual "
                               "regions)"
                             : "like it has not been through sharding propagation");
    const IrInstr *saved = cx->visiting;
    cx->visiting = first;
    spmd_warn(cx, TRACE_WARN_UNANNOTATED, msg);
    cx->visiting = saved;
}

/* An entry parameter tiled into more pieces along a dimension than the dimension has
 * elements: no program shards a global array that way, but a per-device shape seen through
 * its global sharding looks exactly like it. */
static void
check_local_params(SpmdCtx *cx)
{
    const IrComputation *entry = cx->in->entry;
    for (uint32_t p = 0; p < entry->n_params; p++) {
        const IrInstr *hlo = entry->params[p];
        const ShdSharding *s = hlo ? ir_instr_sharding(hlo) : NULL;
        if (!s || s->kind != SHD_TILED || ir_shape_is_tuple(&hlo->shape))
            continue;
        uint32_t rank = shd_data_rank(s);
        for (uint32_t d = 0; d < rank && d < hlo->shape.rank; d++) {
            if (hlo->shape.dims[d] >= s->tile_dims[d])
                continue;
            char msg[256];
            snprintf(msg, sizeof(msg),
                     "parameter dimension %u has %lld element%s but its sharding splits it %lld "
                     "ways: the shape looks already local (the input already partitioned); "
                     "partition the module before spmd-partitioning",
                     d, (long long)hlo->shape.dims[d], hlo->shape.dims[d] == 1 ? "" : "s",
                     (long long)s->tile_dims[d]);
            const IrInstr *saved = cx->visiting;
            cx->visiting = hlo;
            spmd_warn(cx, TRACE_WARN_PARTITIONED, msg);
            cx->visiting = saved;
            break;
        }
    }
}

void
spmd_check_input(SpmdCtx *cx)
{
    if (!cx->trace->ops->warning)
        return;
    check_annotated(cx);
    check_local_params(cx);
}

static bool
is_manual_like(const ShdSharding *s)
{
    if (!s)
        return false;
    if (s->kind == SHD_TUPLE) {
        for (uint32_t k = 0; k < s->n_leaves; k++)
            if (is_manual_like(s->leaves[k]))
                return true;
        return false;
    }
    return shd_is_manual(s) || shd_is_manual_subgroup(s);
}

void
spmd_check_partitioned_op(SpmdCtx *cx, const IrInstr *hlo, const ShdSharding *s)
{
    IrOpFamily fam = ir_op_family(hlo->op);
    bool is_comm = fam == IR_FAM_ALL_REDUCE || fam == IR_FAM_COLLECTIVE ||
                   fam == IR_FAM_COLLECTIVE_PERMUTE;
    if ((!is_comm && fam != IR_FAM_PARTITION_ID) || is_manual_like(s) || cx->state->n_groups)
        return;
    char msg[256];
    snprintf(msg, sizeof(msg),
             "%s outside a manual region: the input looks already partitioned, and is "
             "partitioned a second time (partition the module before spmd-partitioning)",
             ir_op_name(hlo->op));
    spmd_warn(cx, TRACE_WARN_PARTITIONED, msg);
}
