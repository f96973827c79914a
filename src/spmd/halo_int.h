/* halo_int.h - the interface between the windowed-input reshard (halo.c) and the compact halo
 * exchange (halo_compact.c); gspmd.md C.12. Private to those two files. */
#ifndef SHARDLENS_HALO_INT_H
#define SHARDLENS_HALO_INT_H

#include "spmd/spmd_int.h"

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

#endif
