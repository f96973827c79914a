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

/* handle_gather_scatter.c (engine: gs_*.c, gs_int.h): PartitionGather / PartitionScatter
 * strategies in XLA's order. */
SlStatus spmd_handle_gather(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_scatter(SpmdCtx *cx, const IrInstr *hlo, SlError *err);

/* handle_window.c: halo through spmd_reshard_as_windowed_input, no all-reduce. */
SlStatus spmd_handle_reduce_window(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_select_and_scatter(SpmdCtx *cx, const IrInstr *hlo, SlError *err);

#endif
