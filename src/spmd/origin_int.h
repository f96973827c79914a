/* origin_int.h - the original-value recovery table of the partitioned module (origin_recovery.c;
 * src/spmd only). */
#ifndef SHARDLENS_SPMD_ORIGIN_INT_H
#define SHARDLENS_SPMD_ORIGIN_INT_H

#include "spmd/spmd_int.h"

/* requires:    `src` partitioned (spmd_get_value works on it); cx->comp the computation its
 *              value was emitted in
 * produces:    when `src` carries `origin={...}` and its value is sharded (not replicated, not
 *              manual): a cx->out origin_recovery_table entry per original array whose shape
 *              the partitioning changed, mapping it to a placeholder array ("NAME__ovpN") now
 *              set on the value's instruction, with a recovery module that gathers the shard
 *              back to the full value; arrays whose shape did not change move to the value's
 *              instruction as they are. A manual value loses its origin.
 * invalidates: nothing; no trace events (the recovery modules are not part of the run) */
SlStatus spmd_record_origin(SpmdCtx *cx, const IrInstr *src, SlError *err);

#endif
