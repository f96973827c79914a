/* halo_int.h - the interface between the windowed-input reshard (halo.c), the compact halo
 * exchange (halo_compact.c) and their other users in src/spmd (reshard.c's all-to-all,
 * handle_window.c's select-and-scatter); gspmd.md C.12. */
#ifndef SHARDLENS_HALO_INT_H
#define SHARDLENS_HALO_INT_H

#include "spmd/spmd_int.h"

/* (ordinal * m + o) / d with C's truncating division (MultiplyAddDivideOffsetCalculation). */
typedef struct SpmdMad {
    int64_t m, o, d; /* d > 0 */
} SpmdMad;

#define SPMD_CALC_MAX_TERMS 4

/* A sum of SpmdMad terms times integer coefficients (OffsetCalculation, including its
 * products of a Mad and a constant); terms with d == 1 are merged. */
typedef struct SpmdCalc {
    uint32_t n;
    SpmdMad t[SPMD_CALC_MAX_TERMS];
    int64_t coef[SPMD_CALC_MAX_TERMS];
} SpmdCalc;

/* m, o, d with the division folded away when it is exact for every ordinal >= 0. */
SpmdMad spmd_mad(int64_t m, int64_t o, int64_t d);
/* Adds coef * f to c (merged into its d == 1 term when f has d == 1). */
void spmd_calc_add(SpmdCalc *c, int64_t coef, SpmdMad f);
int64_t spmd_calc_eval(const SpmdCalc *c, int64_t ordinal);
/* max over ordinals [lo, hi) (hi > lo) */
int64_t spmd_calc_max(const SpmdCalc *c, int64_t lo, int64_t hi);
/* the value as s32[] arithmetic on `ordinal` (positive terms first, then subtractions) */
IrInstr *spmd_calc_emit(SpmdCtx *cx, const SpmdCalc *c, IrInstr *ordinal);

/* ExchangeHaloAndGetValidData along tile dim `dim` of `s` (n shards of S = x's size in
 * `dim`, full size `base_size`), unmasked: shard k gets left(k) elements before its own data
 * and right(k) after it (out-of-range positions hold zero or garbage) and keeps `size`
 * elements from where its left halo starts; shard 0 starts at `el` on the padded shape.
 * returns: NULL when spmd_halo_can_exchange is false (nothing emitted) or the arena failed */
bool spmd_halo_can_exchange(int64_t n, int64_t S, int64_t base_size, const SpmdCalc *left,
                            const SpmdCalc *right, int64_t el, int64_t size);
IrInstr *spmd_halo_exchange_valid(SpmdCtx *cx, const SpmdState *st, const ShdSharding *s,
                                  uint32_t dim, IrInstr *x, int64_t base_size,
                                  const SpmdCalc *left, const SpmdCalc *right, int64_t el,
                                  int64_t size, IrInstr *ordinal);

/* ExchangeHaloCompact along tile dim `dim` of `s` (n = s->tile_dims[dim] shards, local size
 * S = x's size in `dim`): shard k needs the elements [k*S - left[k], (k+1)*S + right[k]) of
 * the dim of full size `base_size`; halos may come from any shard, not only neighbours.
 * Collective-permutes go between devices that agree on every other tile coordinate.
 * requires:    left/right hold n entries; `ordinal` is this device's s32[] index along `dim`
 * produces:    the local data (size max_k(window_k)) with every piece in place; positions
 *              outside [0, base_size) are `pad` when `mask` (pad NULL: zero), else garbage
 * returns:     NULL only when the arena failed */
IrInstr *spmd_halo_exchange_compact(SpmdCtx *cx, const SpmdState *st, const ShdSharding *s,
                                    uint32_t dim, IrInstr *x, int64_t base_size,
                                    const int64_t *left, const int64_t *right, IrInstr *pad,
                                    bool mask, IrInstr *ordinal);

/* table[ordinal] as an s32[] scalar (constant table + dynamic-slice + reshape); a constant
 * when every entry is equal. */
IrInstr *spmd_halo_table_lookup(SpmdCtx *cx, const int64_t *table, int64_t n, IrInstr *ordinal);

/* PadFromPartialReplicateShape: before dynamic-slicing a partially replicated value (in `src`)
 * to the finer `dst` (same tile dims as the target), move data so that shard i of `src` holds
 * [i * P, (i + 1) * P) of the layout padded for `dst` (P = padded dst size / src shards), with
 * a compact exchange on sharded dims and a plain pad on unsharded ones. x itself when no dim
 * needs it; NULL on arena failure. */
IrInstr *spmd_halo_pad_from_partial(SpmdCtx *cx, const SpmdState *st, IrInstr *x,
                                    const IrShape *base, const ShdSharding *src,
                                    const ShdSharding *dst);
/* TileToPartialReplicateHaloExchange: before gathering tiles of `src` into the coarser tiles
 * of the partially replicated `dst`, shift data left so that the gathered group holds its dst
 * tile first (uneven dims only). x itself when no dim needs it; NULL on arena failure. */
IrInstr *spmd_halo_tile_to_partial(SpmdCtx *cx, const SpmdState *st, IrInstr *x,
                                   const IrShape *base, const ShdSharding *src,
                                   const ShdSharding *dst);

/* Re-lays dim `dim` of a value tiled by `s` (n = s->tile_dims[dim] shards; shard i holds
 * [i * L, (i + 1) * L) of the dim of full size `base_size`, L = x's size there) so that shard i
 * holds [i * size, (i + 1) * size): a plain pad or slice when only shard 0 holds data on both
 * sides, else a compact exchange. Positions outside [0, base_size) are zero after a plain pad,
 * else garbage. x itself when L == size; NULL on arena failure. */
IrInstr *spmd_halo_rewindow(SpmdCtx *cx, const SpmdState *st, const ShdSharding *s, uint32_t dim,
                            IrInstr *x, int64_t base_size, int64_t size);

/* Select-and-scatter operands on shards: in, the operand and the source local to the
 * sharding; out, with halos. */
typedef struct SpmdScatterHalo {
    IrInstr *operand, *source;
    IrInstr *src_pad, *op_pad;    /* source padding (the scatter's identity: windows that
                                     exist only in the halo layout add nothing), operand
                                     padding (a value the select never picks) */
    IrInstr *offs[SPMD_MAX_RANK]; /* out: where the own part starts in the local result */
} SpmdScatterHalo;
/* upstream HandleSelectAndScatter's halo loop: for every dim sharded by `s`, the source gets
 * the windows that overlap the shard's operand data and the operand the data those windows
 * cover (neighbour halo exchanges, padding masked). The local op then runs with the padding of
 * the sharded dims removed from `w`, and offs[] cut the shard out of its result.
 * requires:    base = operand (and result) shape, src_base = source shape, rank(w) = rank
 * returns:     SL_ERR_UNSUPPORTED before emitting anything when a dim has dilation, negative
 *              padding or halos beyond the neighbours */
SlStatus spmd_halo_select_and_scatter(SpmdCtx *cx, const SpmdState *st, const ShdSharding *s,
                                      const IrWindowDim *w, const IrShape *base,
                                      const IrShape *src_base, SpmdScatterHalo *io, SlError *err);

#endif
