/* windowed_int.h - the windowed-einsum loop builder's internal interface, shared by
 * windowed_loop.c (the skeleton, ring primitives and plain body), windowed_variants.c (the
 * unrolled and bidirectional bodies) and windowed_motion.c (gspmd.md E.12). The entry points
 * the dot engine calls (spmd_windowed_config, spmd_emit_windowed_dot) are in dot_int.h and
 * spmd_windowed_code_motion in spmd_int.h. Owns: the WeLoop record of one loop under
 * construction. Invariant: every function here emits into cx->comp as windowed_loop.c has set
 * it (a body or condition computation while the loop is built); NULL/false means arena
 * failure or geometry the loop does not model, and leaves the caller to give up. */
#ifndef SHARDLENS_SPMD_WINDOWED_INT_H
#define SHARDLENS_SPMD_WINDOWED_INT_H

#include "spmd/dot_int.h"

typedef enum WeLoopShape { WE_LOOP_PLAIN, WE_LOOP_UNROLLED, WE_LOOP_BIDIR } WeLoopShape;

typedef struct WeLoop {
    SpmdCtx *cx;
    const DotJob *job;
    const DotProblem *p;
    const DotWindowedConfig *cfg;
    int64_t n;                 /* loop partitions: the ring length */
    int64_t N;                 /* partitions of the state: data ids are taken mod N */
    bool rs;                   /* reduce-scatter flavour: the result buffer travels */
    WeLoopShape shape;
    const ShdSharding *slice;  /* slices the non-windowed operand by data_id, or NULL */
    const ShdSharding *slice2; /* bidirectional: `slice` with the pair dim inserted at ssd */
    const ShdSharding *dus;    /* dynamic-update-slice offsets of the result, or NULL (add) */
    int64_t dus_dim;           /* partial windowing: the only output dim offsets move on */
    int64_t ssd;               /* bidirectional: first sharded dim of the slice sharding */
    int64_t wcd;               /* bidirectional all-gather: the window's pair dim */
} WeLoop;

/* ---- ring primitives (windowed_loop.c) ---- */
/* The u32[] constant `v`. */
IrInstr *spmd_we_u32(WeLoop *L, int64_t v);
/* Offsets (s32[] scalars into out[0..rank)) of device `id`'s tile of `s` in a tensor whose
 * tiles are `tile[d]` long; only dim `only` moves when it is >= 0. */
bool spmd_we_offsets_for_id(WeLoop *L, const ShdSharding *s, uint32_t rank, const int64_t *tile,
                            IrInstr *id, int64_t only, IrInstr **out);
/* `x` padded with zeros at the end of every dim `s` shards unevenly; tile sizes into `tile`. */
IrInstr *spmd_we_pad_to_tiles(SpmdCtx *cx, IrInstr *x, const ShdSharding *s, int64_t *tile);
/* The piece of the (locally full) operand `x` that belongs to ring position `id` under `s`. */
IrInstr *spmd_we_slice_for_id(WeLoop *L, IrInstr *x, IrInstr *id, const ShdSharding *s);
/* One unidirectional step at ring index `idx`: the dot of the current window accumulated
 * into `res` (add, or dynamic-update-slice at the data id's offsets). */
IrInstr *spmd_we_step(WeLoop *L, IrInstr *lhs, IrInstr *rhs, IrInstr *res, IrInstr *idx);
/* Every device sends `x` `shift` steps along its ring of L->n devices. */
IrInstr *spmd_we_ring_permute(WeLoop *L, IrInstr *x, int64_t shift);
/* The dim of `to` matched to dim `dim` of `from` by the role records, or -1. */
int64_t spmd_we_map_dim(const DotDims *d, DotSide from, DotSide to, int64_t dim);

/* ---- unrolled and bidirectional loops (windowed_variants.c) ---- */
/* `x` with a size-1 dim inserted at `at`. */
IrInstr *spmd_we_insert_unit_dim(SpmdCtx *cx, IrInstr *x, int64_t at);
/* Whether `x` is one of v[0..n). */
bool spmd_we_listed_dim(const int64_t *v, uint32_t n, int64_t x);
/* Loop bodies over g = (lhs, rhs, result, extra, i), updated in place; false on failure. */
bool spmd_we_body_unrolled_ag(WeLoop *L, IrInstr **g);
bool spmd_we_body_unrolled_rs(WeLoop *L, IrInstr **g);
bool spmd_we_body_bidir(WeLoop *L, IrInstr **g);
/* Bidirectional geometry: sets L->ssd, L->slice2 and L->wcd; false when there is none. */
bool spmd_we_bidir_dims(WeLoop *L);
/* The reduce-scatter result of `loop` (its element 2, `res`) with the extra buffer added
 * back; `res` itself for the plain loop and for all-gather loops. */
IrInstr *spmd_we_finish_rs(WeLoop *L, IrInstr *loop, IrInstr *res);

#endif
