/* shd_int.h - helpers shared by the files of src/sharding only (value, text, algebra, groups).
 * Owns: the normalizing tiled constructor, iota recovery, and small device-array utilities.
 * Invariant: every tiled value is built through shd_make_tiled(), so normalization (A.4) and
 * the device -> position index are applied in one place. */
#ifndef SHARDLENS_SHD_INT_H
#define SHARDLENS_SHD_INT_H

#include "sharding/shd.h"

/* Upper bound on tile-assignment and iota ranks (ir_iota_expand() shares it). */
#define SHD_MAX_DIMS 64

/* How shd_make_tiled() chooses the printed form of the device array. */
typedef enum ShdForm {
    SHD_FORM_EXPLICIT, /* keep the explicit list (XLA V1 inputs and their derivatives) */
    SHD_FORM_IOTA,     /* describe as an iota when the array is one (V2 inputs, shd_tiled) */
} ShdForm;

/* Builds a tiled sharding from `n` dims (the last `n_sub` are subgroups of the given types)
 * and a row-major device array, both copied, applying XLA's normalization: subgroup dims of
 * size 1 dropped, same types merged and ordered manual, unreduced, replicated, collapse to
 * {manual}/{replicated}/{unreduced}, sorted replication groups for explicit arrays. NULL only
 * when the arena fails. */
const ShdSharding *shd_make_tiled(SlArena *a, const int64_t *dims, uint32_t n,
                                  const int64_t *devices, const ShdSubgroup *sub,
                                  uint32_t n_sub, ShdForm form);
/* Same dims/subgroups as `like`, new device array; form follows `like` (iota if it had one). */
const ShdSharding *shd_with_devices(SlArena *a, const ShdSharding *like, const int64_t *dims,
                                    uint32_t n, const int64_t *devices);
const ShdSharding *shd_make_simple(SlArena *a, ShdKind kind);

/* Finds the canonical iota (reshape dims + perm, A.3) that expands to `devs`; fills `io`
 * except its `dims`. False when `devs` is no transposed iota. */
bool shd_iota_recover(SlArena *a, const int64_t *devs, int64_t count, IrIota *io);

int64_t shd_prod(const int64_t *v, uint32_t n);
/* out[j] = array transposed so that new axis j is old axis perm[j]; new dims in out_dims. */
void shd_arr_transpose(const int64_t *src, const int64_t *dims, uint32_t n, const int64_t *perm,
                       int64_t *out, int64_t *out_dims);
/* Linear position of `device` in s->devices, or -1. O(1) with the constructor's index. */
int64_t shd_device_pos(const ShdSharding *s, int64_t device);
/* Row-major coordinates of linear index `lin` in `dims`. */
void shd_unravel(int64_t lin, const int64_t *dims, uint32_t n, int64_t *coords);

#endif
