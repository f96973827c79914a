/* shd.h - the sharding value type and its algebra (gspmd.md §A, §B).
 * Owns: parsing/printing `sharding={...}` text, tile-assignment arithmetic, and every helper
 * that derives one sharding from another. Does not own: emitting HLO (src/spmd).
 * Values are immutable once built and live in the arena passed to the constructor; helpers
 * that derive a new sharding allocate the result in the arena they are given. A tiled
 * sharding always carries its materialized device array; `iota` is kept when the array is
 * known to be an iota so that printing reproduces the V2 form. */
#ifndef SHARDLENS_SHD_H
#define SHARDLENS_SHD_H

#include "base/base.h"
#include "ir/ir.h"

/* The most devices a sharding may name (tile assignment, mesh): IR_MAX_DEVICES. */
#define SHD_MAX_DEVICES IR_MAX_DEVICES
/* The most device ids the distinct shardings of one module may materialize in all (64 tile
 * assignments of 65,536 devices): bounds parse time and memory (README "Limits"). */
#define SHD_MAX_TOTAL_IDS (1 << 22)

typedef enum ShdKind {
    SHD_REPLICATED, SHD_MAXIMAL, SHD_MANUAL, SHD_UNKNOWN, SHD_UNREDUCED, SHD_TILED, SHD_TUPLE,
} ShdKind;

/* Types of trailing tile-assignment dims, in XLA's normalized order. */
typedef enum ShdSubgroup { SHD_SUB_MANUAL, SHD_SUB_UNREDUCED, SHD_SUB_REPLICATED } ShdSubgroup;

/* Counts and flags first, pointers after: no padding (the partitioner derives a sharding for
 * nearly every instruction it visits). */
typedef struct ShdSharding {
    ShdKind kind;
    uint32_t n_tile_dims;   /* TILED: data dims + subgroup dims */
    uint32_t n_subgroups;   /* TILED: trailing dims that are subgroups */
    uint32_t n_leaves;      /* TUPLE: leaf shardings in pre-order */
    int shard_group_kind;   /* 0 none, 1 shard_as, 2 shard_like */
    uint32_t written_rank;  /* is_written_tiled: the data rank of the tiled text */
    bool is_written_tiled;  /* parsed from tiled text that normalized to another kind (all
                               tiles in subgroups): shd_check still wants the written rank to
                               be the shape's; not compared, not printed */
    bool has_iota;          /* TILED: `iota` describes `devices` (print as <=[..]) */
    int64_t device;         /* MAXIMAL: the device */
    int64_t *tile_dims;     /* TILED: shards per dim */
    int64_t *devices;       /* TILED: product(tile_dims) ids, row-major */
    IrIota iota;
    ShdSubgroup *subgroups; /* n_subgroups types; a lone REPLICATED = last_tile_dim_replicate */
    const struct ShdSharding **leaves;
    int64_t shard_group_id;
    SlStr metadata;         /* verbatim "{...}" text after " metadata=", reprinted; may be empty */
    const int64_t *dev_pos; /* TILED, private: device id -> position in `devices` (-1: absent),
                               n_dev_pos entries; NULL when ids are few or sparse (linear
                               search) */
    int64_t n_dev_pos;
} ShdSharding;

/* ---- text ---- */
/* Parses the text after `sharding=` (a balanced "{...}"); `loc` is where `text` starts, so
 * errors point into the source file. */
SlStatus shd_parse(SlArena *a, SlStr text, SlSrcLoc loc, const ShdSharding **out, SlError *err);
/* Like shd_parse, but the tile assignments and meshes it materializes take their device
 * ids from `*ids_left` (decremented), checked before allocating: a module's parser gives
 * every distinct sharding text one budget of SHD_MAX_TOTAL_IDS. */
SlStatus shd_parse_bounded(SlArena *a, SlStr text, SlSrcLoc loc, int64_t *ids_left,
                           const ShdSharding **out, SlError *err);
/* Like shd_parse, but stops after the closing '}' and reports the bytes used in `consumed`. */
SlStatus shd_parse_prefix(SlArena *a, SlStr text, SlSrcLoc loc, const ShdSharding **out,
                          size_t *consumed, SlError *err);
/* Canonical XLA text, braces included. Named (V3) input is printed in the tiled form. */
void shd_print(const ShdSharding *s, SlBuf *out);

/* ---- constructors ---- */
const ShdSharding *shd_replicated(SlArena *a);
const ShdSharding *shd_manual(SlArena *a);
const ShdSharding *shd_unknown(SlArena *a);
const ShdSharding *shd_unreduced(SlArena *a);
const ShdSharding *shd_maximal(SlArena *a, int64_t device);
/* Tiled from dims and a row-major device array (copied); subgroup types may be NULL. Applies
 * XLA's normalization (A.4), sorts the devices of each replication group (PartialTile), then
 * recovers an iota description when the array is one. */
const ShdSharding *shd_tiled(SlArena *a, const int64_t *tile_dims, uint32_t n_tile_dims,
                             const int64_t *devices, const ShdSubgroup *subgroups,
                             uint32_t n_subgroups);
/* Tiled over iota(prod dims) in row-major order: `{devices=[dims]<=[N]}`. */
const ShdSharding *shd_tiled_iota(SlArena *a, const int64_t *tile_dims, uint32_t n_tile_dims,
                                  const ShdSubgroup *subgroups, uint32_t n_subgroups);
const ShdSharding *shd_tuple(SlArena *a, const ShdSharding *const *leaves, uint32_t n);
/* Deep copy into `a` (arrays, leaves, metadata text): a value built in a scratch arena that
 * must outlive it. */
const ShdSharding *shd_clone(SlArena *a, const ShdSharding *s);

/* ---- predicates ---- */
bool shd_equal(const ShdSharding *a, const ShdSharding *b); /* ignores metadata */
bool shd_is_replicated(const ShdSharding *s);   /* tuples: every leaf */
bool shd_is_maximal(const ShdSharding *s);
bool shd_is_manual(const ShdSharding *s);
bool shd_is_tile_maximal(const ShdSharding *s); /* replicated or maximal (or manual/unknown) */
bool shd_is_tiled(const ShdSharding *s);        /* TILED incl. partial and subgroups */
bool shd_has_partial_replication(const ShdSharding *s);
bool shd_is_manual_subgroup(const ShdSharding *s);
/* {unreduced}, or tiled with an unreduced subgroup: devices hold partial values. NULL: no. */
bool shd_is_unreduced(const ShdSharding *s);
bool shd_unique_device(const ShdSharding *s, int64_t *device); /* maximal (tuples: all same) */

/* ---- queries on tiled shardings ---- */
uint32_t shd_data_rank(const ShdSharding *s);        /* n_tile_dims - n_subgroups */
int64_t shd_dim_shards(const ShdSharding *s, uint32_t dim); /* 1 for non-tiled */
int64_t shd_num_tiles(const ShdSharding *s);         /* product over data dims */
int64_t shd_replication_factor(const ShdSharding *s); /* size of the REPLICATED subgroup, or 1 */
int64_t shd_device_count(const ShdSharding *s);      /* product of all tile dims */
/* Tile coordinates (data dims only) of `device`; false if the device is not in the array. */
bool shd_tile_index(const ShdSharding *s, int64_t device, int64_t *index_out);
/* Local (per-device) shape: ceil(D_i / n_i) per data dim; tuples per leaf. */
IrShape shd_tile_shape(SlArena *a, const IrShape *full, const ShdSharding *s);
/* Offset and valid extent of `device`'s tile along `dim` (A.5). */
int64_t shd_tile_offset(const ShdSharding *s, const IrShape *full, uint32_t dim, int64_t device);
int64_t shd_tile_extent(const ShdSharding *s, const IrShape *full, uint32_t dim, int64_t device);
bool shd_evenly_partitions(const ShdSharding *s, const IrShape *full);
/* The sharding of tuple leaf `leaf` (pre-order); a non-tuple sharding applies to every leaf. */
const ShdSharding *shd_leaf(const ShdSharding *s, uint32_t leaf);
/* Validates against a shape and a device count: ids < num_devices, each used once, tile rank
 * fits the shape's rank, tuple leaf count matches. num_devices <= 0: the count is unknown
 * (XLA's rules without one): ids only non-negative and used once. */
SlStatus shd_check(const ShdSharding *s, const IrShape *shape, int64_t num_devices, SlSrcLoc loc,
                   SlError *err);

/* ---- algebra (gspmd.md §B); results in `a`, NULL when "none" ---- */
const ShdSharding *shd_partially_replicate_dims(SlArena *a, const ShdSharding *s,
                                                const int64_t *dims, uint32_t n);
const ShdSharding *shd_partially_replicate_all_except(SlArena *a, const ShdSharding *s,
                                                      const int64_t *keep, uint32_t n);
const ShdSharding *shd_remove_dims(SlArena *a, const ShdSharding *s, const int64_t *dims,
                                   uint32_t n); /* listed dims must be unsharded */
/* Inserts unsharded data dims so that the result has data rank `new_rank`; `positions` (sorted,
 * in result numbering) are the new dims. */
const ShdSharding *shd_insert_dims(SlArena *a, const ShdSharding *s, const int64_t *positions,
                                   uint32_t n);
const ShdSharding *shd_transpose(SlArena *a, const ShdSharding *s, const int64_t *perm);
/* src_to_tgt[i] = target dim of source dim i or -1; see gspmd.md B.4. */
const ShdSharding *shd_transpose_collapsed(SlArena *a, const ShdSharding *s,
                                           const int64_t *src_to_tgt, uint32_t src_rank,
                                           uint32_t tgt_rank);
const ShdSharding *shd_reshape(SlArena *a, const IrShape *from, const IrShape *to,
                               const ShdSharding *s); /* B.5 ReshapeSharding */
const ShdSharding *shd_propagate_through_reshape(SlArena *a, const IrShape *from,
                                                 const IrShape *to, const ShdSharding *s);
const ShdSharding *shd_reverse(SlArena *a, const ShdSharding *s, const int64_t *dims, uint32_t n);
const ShdSharding *shd_move_and_merge_tiles(SlArena *a, const ShdSharding *s, uint32_t src,
                                            uint32_t tgt);
/* B.7 GetFirstTargetDimToMoveShardingTiles: the first dim t != src, not in `excluded`, whose
 * size is divisible by n_src * n_t; -1 if none, if rank < 2, or if dim src is 1 or unsharded. */
int64_t shd_find_tile_move_target(const IrShape *shape, const ShdSharding *s, uint32_t src,
                                  const int64_t *excluded, uint32_t n_excluded);
const ShdSharding *shd_split_dim(SlArena *a, const ShdSharding *s, uint32_t dim, int64_t major);
const ShdSharding *shd_merge_dims(SlArena *a, const ShdSharding *s, uint32_t dim);
/* MergeShardingIfCompatible: tiled like both `to_merge` and the partially replicated `dst` on
 * every data dim, with at least `min_tiles` tiles (XLA passes dst's tile count + 1); NULL when
 * there is none, `to_merge` when dst is not tiled. */
const ShdSharding *shd_merge_if_compatible(SlArena *a, const ShdSharding *to_merge,
                                           const ShdSharding *dst, int64_t min_tiles);
const ShdSharding *shd_partial_replicate_reshard_compatible(SlArena *a,
                                                            const ShdSharding *partial,
                                                            const ShdSharding *target);
bool shd_can_reshard_with_collective_permute(const ShdSharding *a, const ShdSharding *b);
/* B.11: fills up to `cap` (source, target) pairs; returns the count, 0 when not applicable. */
uint32_t shd_all_to_all_dims(const ShdSharding *from, const ShdSharding *to, int64_t *src_dims,
                             int64_t *tgt_dims, uint32_t cap);
const ShdSharding *shd_all_to_all_sharding(SlArena *a, const ShdSharding *s, uint32_t src,
                                           uint32_t tgt);
/* What the partitioner works with in place of an unreduced sharding (XLA converts them before
 * partitioning): {unreduced} becomes {replicated}, an unreduced subgroup a replicated one
 * (merged, unreduced-major, with an existing replicated subgroup); tuples per leaf. Returns
 * `s` itself when nothing is unreduced. */
const ShdSharding *shd_unreduced_as_replicated(SlArena *a, const ShdSharding *s);

/* ---- device groups (B.9) ---- */
typedef struct ShdGrouped {
    int64_t n_groups, group_size;
    int64_t *device_groups;         /* [n_groups][group_size] */
    uint32_t n_group_dims;
    int64_t *group_dims;            /* tile dims that define the groups */
    int64_t *group_dim_sizes;
    const ShdSharding *inner;       /* over in-group indices 0..group_size-1 */
    uint32_t data_rank;             /* data rank of the ungrouped sharding */
    bool subgroup_manual;           /* group dims are MANUAL subgroup dims, absent from inner */
} ShdGrouped;

/* shards_per_dim may be NULL (= all shards of each dim form groups). */
ShdGrouped shd_group_on_dims(SlArena *a, const ShdSharding *s, const int64_t *dims, uint32_t n,
                             const int64_t *shards_per_dim);
/* GroupShardingOnReplicatedDim: `n_groups` groups from the replication dim, else by borrowing
 * shards of `replicable_dims` in order (over iota devices, as XLA), else replicated inside
 * iota groups of num_tiles / n_groups devices. */
ShdGrouped shd_group_on_replicated_dim(SlArena *a, const ShdSharding *s, int64_t n_groups,
                                       int64_t num_tiles, uint32_t data_rank,
                                       const int64_t *replicable_dims, uint32_t n);
/* C.11: groups = devices sharing a manual coordinate; inner = the data dims and the other
 * subgroups. Sets subgroup_manual, so shd_ungroup() restores the manual dims. */
ShdGrouped shd_group_on_manual(SlArena *a, const ShdSharding *s);
const ShdSharding *shd_ungroup(SlArena *a, const ShdGrouped *g);
/* Adopts `ref`'s device groups, permuting x's inner ids when the groups match as sets. */
ShdGrouped shd_align_groups_with(SlArena *a, const ShdGrouped *x, const ShdGrouped *ref);

/* Replica groups for a collective over the tile dims `dims` of `s`: each group = devices that
 * agree on every tile coordinate except those dims, ordered by tile index along them (G.3).
 * Fills `out` with list groups and, when expressible, the iota form XLA would print. */
SlStatus shd_replica_groups_for_dims(SlArena *a, const ShdSharding *s, const int64_t *dims,
                                     uint32_t n, IrReplicaGroups *out);

#endif
