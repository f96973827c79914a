/* gather_int.h - handler prototypes for the gather/scatter and windowed-op families
 * (gspmd.md D.11, D.12, F.2-F.4). Used by driver.c's dispatch table only.
 * Every handler follows the SpmdHandler contract in spmd_int.h:
 * requires:    operands visited; cx->visiting == hlo; cx->comp open
 * produces:    the local result in hlo's sharding, registered with spmd_set_result(), and one
 *              `decision` trace event per strategy choice
 * invalidates: nothing (cx->scratch is released by the driver afterwards) */
#ifndef SHARDLENS_SPMD_GATHER_INT_H
#define SHARDLENS_SPMD_GATHER_INT_H

#include "spmd/spmd_int.h"

/* handle_gather_scatter.c: PartitionGather / PartitionScatter strategies in XLA's order. */
SlStatus spmd_handle_gather(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_scatter(SpmdCtx *cx, const IrInstr *hlo, SlError *err);

/* handle_window.c: halo through spmd_reshard_as_windowed_input, no all-reduce. */
SlStatus spmd_handle_reduce_window(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_select_and_scatter(SpmdCtx *cx, const IrInstr *hlo, SlError *err);

/* gather_parallel.c: operand and indices shardings sharded alike on the paired parallel dims
 * (`od` of the operand, `id` of the indices), the operand keeping its other dims; false when
 * either is not a plain (partially replicated) tiling or the tile counts cannot be matched. */
bool spmd_gs_parallel_shardings(SpmdCtx *cx, const ShdSharding *op, const ShdSharding *idx,
                                const int64_t *od, const int64_t *id, uint32_t n,
                                const ShdSharding **op_out, const ShdSharding **idx_out);

#endif
