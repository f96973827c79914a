/* reshard_int.h - the interface between the reshard decision order (reshard.c) and the complex
 * reshard patterns (reshard_complex.c, gspmd.md C.9.1-C.9.3). Used only by these two files. */
#ifndef SHARDLENS_RESHARD_INT_H
#define SHARDLENS_RESHARD_INT_H

#include "spmd/spmd_int.h"

/* What one reshard decided, for its trace event. */
typedef struct SpmdPlan {
    const char *method; /* recorded in the trace; each step that succeeds may overwrite it */
    uint32_t depth;     /* spmd_reshard_no_cache calls open in this reshard, nested reshards
                           included; past SPMD_RESHARD_MAX_DEPTH the reshard replicates */
} SpmdPlan;

/* Deepest legitimate chain (tuple leaf, complex pattern, grouping, all-to-all chain, partial
 * replication...) is far below this; reaching it means a pattern made no progress. */
#define SPMD_RESHARD_MAX_DEPTH 16

/* Tiled with a trailing replicated subgroup (partial replication). */
bool spmd_is_partial(const ShdSharding *s);
/* At most one subgroup dim, and it is a replicated one (no manual/unreduced subgroups). */
bool spmd_has_plain_subgroups(const ShdSharding *s);

/* The C.2 decision order for v -> y without consulting or filling the cache.
 * returns: SL_OK with *out in y; SL_ERR_UNSUPPORTED when only full replication would do and
 *          cx->allow_full_replication is off; other codes on failure */
SlStatus spmd_reshard_no_cache(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, IrInstr *pad,
                               SpmdValue *out, SpmdPlan *plan, SlError *err);
/* spmd_reshard (cache included) for a step inside the reshard `parent` is building: the new
 * reshard starts at parent's depth, so that loops through the cache are bounded too. */
SlStatus spmd_reshard_nested(SpmdCtx *cx, const SpmdPlan *parent, const SpmdValue *v,
                             const ShdSharding *y, SpmdValue *out, SlError *err);
/* One all-to-all moving the shards of tile dim `src` of v's sharding onto tile dim `tgt`. */
SlStatus spmd_reshard_all_to_all_one(SpmdCtx *cx, const SpmdValue *v, uint32_t src, uint32_t tgt,
                                     SpmdValue *out, SlError *err);
/* TryComplexReshardHandling between two tiled shardings; SL_ERR_UNSUPPORTED (nothing emitted)
 * when no pattern applies without full replication. */
SlStatus spmd_reshard_complex(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *y, SpmdValue *out,
                              SpmdPlan *plan, SlError *err);

#endif
