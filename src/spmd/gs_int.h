/* gs_int.h - the gather/scatter engine's internal interface, shared by
 * handle_gather_scatter.c (handlers, strategy order), gs_dims.c (dimension classes),
 * gs_level.c (one recursion level's helpers), gs_methods.c (the methods) and
 * gather_parallel.c (gspmd.md F.3, F.4). Owns: the problem record of one recursion
 * level (Gs) and its dimension records. The handlers themselves are declared in
 * gather_int.h, for the driver's dispatch table.
 * Invariant: every function taking a Gs works in that level's state p->st; a method leaves
 * *out NULL when it does not apply and emits nothing then. */
#ifndef SHARDLENS_SPMD_GS_INT_H
#define SHARDLENS_SPMD_GS_INT_H

#include "spmd/spmd_int.h"

#define GS_R SPMD_MAX_RANK

/* Dimension numbers of a gather or a scatter, under the gather's names. */
typedef struct GsDims {
    const int64_t *offset, *collapsed, *index_map, *op_batch, *idx_batch;
    uint32_t n_offset, n_collapsed, n_index_map, n_op_batch, n_idx_batch;
    int64_t ivd; /* index_vector_dim */
} GsDims;

/* Paired dims of operand, indices and output/update (upstream GatherScatterDims). */
typedef struct GsPairs {
    uint32_t n;
    int64_t op[GS_R], idx[GS_R], out[GS_R];
} GsPairs;

/* One level of the recursive problem; values may live in a grouped state. */
typedef struct Gs {
    const IrInstr *hlo;
    bool is_scatter;
    GsDims dn;
    uint32_t n;               /* scatter operands (== updates); 1 for gather */
    SpmdValue *ops, idx, *upd;
    const IrShape *out_base;  /* gather output / scatter operand base shape (array) */
    const ShdSharding *out_s; /* sharding the result must be in (array) */
    const int64_t *slice;     /* slice size per operand dim */
    const SpmdState *st;
    uint32_t depth;
    const IrModule *m;        /* the source module (callers of loop bodies for iota_dim) */
} Gs;

/* ---- the recursion's entry (handle_gather_scatter.c): partitions one level, methods in
 * order, the replicated fallback last; *out = the level's local result ---- */
SlStatus spmd_gs_partition(SpmdCtx *cx, const Gs *p, bool recursive, IrInstr **out, SlError *err);

/* ---- dimension classes (gs_dims.c): the *_dims finders fill the pairs of their class ---- */
bool spmd_gs_has_dim(const int64_t *v, uint32_t n, int64_t d);
void spmd_gs_read_dims(const IrInstr *hlo, bool is_scatter, GsDims *dn);
int64_t spmd_gs_out_dim_of_idx(const GsDims *dn, int64_t idx_dim, uint32_t out_rank);
void spmd_gs_operand_passthrough_dims(const Gs *p, GsPairs *r);
bool spmd_gs_index_parallel_dims(const Gs *p, GsPairs *r);
void spmd_gs_index_passthrough_dims(const Gs *p, uint32_t out_rank, GsPairs *r);
bool spmd_gs_explicit_batch_dims(const Gs *p, uint32_t out_rank, GsPairs *r);
uint32_t spmd_gs_trivial_sliced_dims(const Gs *p, int64_t *dims);

/* ---- one level's helpers (gs_level.c) ---- */
int64_t spmd_gs_tiles_on(const ShdSharding *s, const int64_t *dims, uint32_t n);
const ShdSharding *spmd_gs_prop_dims(SpmdCtx *cx, const ShdSharding *src, const int64_t *sd,
                                     const int64_t *td, uint32_t n, uint32_t tgt_rank);
ShdGrouped spmd_gs_group_on_replicated(SpmdCtx *cx, const ShdSharding *s, int64_t num_groups,
                                       int64_t num_tiles, uint32_t rank, const int64_t *prio,
                                       uint32_t n_prio);
ShdGrouped spmd_gs_align(SpmdCtx *cx, const ShdGrouped *x, const ShdGrouped *ref);
bool spmd_gs_grouped_ok(const ShdGrouped *g, const ShdGrouped *ref);
const IrShape *spmd_gs_per_group_shape(SpmdCtx *cx, const IrShape *base, const ShdGrouped *g);
SlStatus spmd_gs_reshard(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *t, IrInstr *pad,
                         SpmdValue *out, SlError *err);
/* A scatter's or gather's indices resharded to `t`: for a scatter, padding (an uneven `t`)
 * holds -1, an index the scatter drops (upstream pads only indices that arrive uneven; those
 * made uneven here would otherwise scatter padded updates at index 0). */
SlStatus spmd_gs_reshard_indices(SpmdCtx *cx, const Gs *p, const ShdSharding *t, SpmdValue *out,
                                 SlError *err);
SlStatus spmd_gs_group_value(SpmdCtx *cx, const SpmdValue *v, const ShdGrouped *g,
                             const SpmdState *gs, SpmdValue *out, SlError *err);
SlStatus spmd_gs_finish_level(SpmdCtx *cx, const Gs *p, IrInstr *x, const ShdSharding *s,
                              IrInstr **out, SlError *err);
bool spmd_gs_index_bounds(SpmdCtx *cx, const Gs *p, const SpmdValue *op, const int64_t *dims,
                          uint32_t n, const IrInstr *like, IrInstr **lo, IrInstr **hi);
IrInstr *spmd_gs_emit_clamp(SpmdCtx *cx, IrInstr *lo, IrInstr *x, IrInstr *hi);
SlStatus spmd_gs_replicate_fallback(SpmdCtx *cx, const Gs *p, IrInstr **out, SlError *err);
uint32_t spmd_gs_window_rank(const Gs *p);
uint32_t spmd_gs_index_prio(const Gs *p, int64_t *out);
uint32_t spmd_gs_operand_prio(const Gs *p, int64_t *out);
uint32_t spmd_gs_window_prio(const Gs *p, int64_t *out);
bool spmd_gs_parallel_targets(SpmdCtx *cx, const Gs *p, const GsPairs *pd, const ShdSharding **os,
                              const ShdSharding **is);
SlStatus spmd_gs_subtract_offsets(SpmdCtx *cx, const Gs *p, const SpmdValue *op,
                                  const int64_t *dims, uint32_t n, SpmdValue *idx, SlError *err);
Gs spmd_gs_child_of(const Gs *p, const SpmdState *gs, SpmdValue *ops, SpmdValue *upd,
                    const SpmdValue *idx, const IrShape *out_base, const ShdSharding *out_s,
                    const int64_t *slice);
SpmdValue *spmd_gs_values_copy(SpmdCtx *cx, const SpmdValue *v, uint32_t n);
SlStatus spmd_gs_recurse(SpmdCtx *cx, const Gs *p, const ShdGrouped *gop, const ShdGrouped *gidx,
                         const ShdGrouped *gupd, const ShdGrouped *gout, const SpmdValue *idx,
                         const int64_t *slice, IrInstr **res, SlError *err);

/* ---- gather_parallel.c: operand and indices shardings sharded alike on the paired
 * parallel dims (`od` of the operand, `id` of the indices), the operand keeping its other
 * dims; false when either is not a plain (partially replicated) tiling or the tile counts
 * cannot be matched ---- */
bool spmd_gs_parallel_shardings(SpmdCtx *cx, const ShdSharding *op, const ShdSharding *idx,
                                const int64_t *od, const int64_t *id, uint32_t n,
                                const ShdSharding **op_out, const ShdSharding **idx_out);

/* ---- the methods (gs_methods.c): *out = NULL when the method does not apply ---- */
SlStatus spmd_gs_method_parallel(SpmdCtx *cx, const Gs *p, const GsPairs *pd, bool need_offset,
                                 IrInstr **out, SlError *err);
const ShdSharding *spmd_gs_refine_window(SpmdCtx *cx, const Gs *p, const ShdSharding *ws);
SlStatus spmd_gs_method_operand_passthrough(SpmdCtx *cx, const Gs *p, IrInstr **out, SlError *err);
SlStatus spmd_gs_method_trivial_sliced(SpmdCtx *cx, const Gs *p, IrInstr **out, SlError *err);
SlStatus spmd_gs_method_index_passthrough(SpmdCtx *cx, const Gs *p, IrInstr **out, SlError *err);

#endif
