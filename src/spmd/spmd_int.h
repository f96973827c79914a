/* spmd_int.h - the partitioner's internal interface, shared by driver.c, emit.c, reshard.c,
 * collectives.c and every handle_*.c (gspmd.md §0, §C, §D, §G; seeds/000).
 * Owns: the run context (SpmdCtx), the partitioned value (SpmdValue) and its partitioning state
 * (SpmdState), and the two chokes: spmd_emit() (every instruction that enters the output) and
 * spmd_reshard() (every change of sharding). Does not own: sharding arithmetic (src/sharding).
 * Invariants: handlers emit only through spmd_emit() and the spmd_emit_* builders below (which
 * call it); handlers never create collectives (only reshard.c, the reduce/all-reduce helpers and
 * the dot engine call the spmd_coll_* creators); nothing iterates a hash map into output.
 * Lifetimes: output IR, SpmdState and the shardings values keep live in cx->arena (the
 * output arena) or, for shardings passed through spmd_keep_sharding, in cx->kept_arena (until
 * the end of the run); values live in cx->values; cx->scratch may be used for temporaries
 * inside one handler call and is released after each source instruction (driver.c). The dot
 * engine hands back the output-arena bytes of strategies that did not apply. */
#ifndef SHARDLENS_SPMD_INT_H
#define SHARDLENS_SPMD_INT_H

#include "spmd/spmd.h"

#include "sharding/shd.h"

typedef struct SpmdCtx SpmdCtx;

#define SPMD_MAX_RANK 64u /* ranks (and tile-assignment ranks) above this are SL_ERR_UNSUPPORTED */

/* ---- partitioning state and partitioned values ----------------------------------------- */

/* Mutable per-state memo (the lazily emitted partition-id of the current computation). */
typedef struct SpmdStateMemo {
    const IrComputation *comp; /* computation `pid` was emitted in */
    IrInstr *pid;              /* u32[] (in-group) partition id, NULL until first asked */
} SpmdStateMemo;

/* Partitioning state snapshot (gspmd.md B.9 "Per-group partitioning state"). The root state
 * covers all N partitions. A grouped state describes the inside of `n_groups` device groups of
 * `group_size` devices each: inside, shardings use in-group ids 0..group_size-1, collectives
 * are mapped back to real ids through `device_groups` (recursively through `outer`), and the
 * partition id is the in-group index looked up from the outer partition id. */
typedef struct SpmdState {
    int64_t num_partitions;       /* devices seen from inside: N at the root, else group_size */
    int64_t n_groups;             /* 0 at the root */
    int64_t group_size;           /* == num_partitions when grouped */
    const int64_t *device_groups; /* [n_groups][group_size] ids of the `outer` state */
    const struct SpmdState *outer;
    SpmdStateMemo *memo;          /* never NULL */
} SpmdState;

/* The partitioned form of one source value (upstream PartitionedHlo). */
typedef struct SpmdValue {
    IrInstr *hlo;                /* local instruction in the output module */
    const IrShape *base_shape;   /* full (unpartitioned) shape */
    const ShdSharding *sharding; /* sharding `hlo` is in; never NULL */
    const SpmdState *state;      /* never NULL */
} SpmdValue;

/* ---- run context ------------------------------------------------------------------------ */

/* One reshard-cache entry: `target` view of a local instruction holding a value of base shape
 * `base_shape` (chained per instruction; one local instruction may carry several values). */
typedef struct SpmdCacheEntry {
    const ShdSharding *target;
    const IrShape *base_shape;
    SpmdValue result;
    struct SpmdCacheEntry *next;
} SpmdCacheEntry;

/* Unique-name bookkeeping of the output module, kept by the partitioner (emit.c): the same
 * names ir_module_unique_name gives ("base", then "base.N" with N above every suffix seen),
 * with each base resolved once per source instruction or opcode instead of once per emitted
 * instruction. spmd_names_sync() hands the counters to the output module at the end. */
typedef struct SpmdNameBase {
    SlSym base;
    uint64_t next; /* 0: base unused; else 1 + the highest suffix taken (ir.c's meaning) */
} SpmdNameBase;

typedef struct SpmdNames {
    SpmdNameBase *v;          /* heap */
    uint32_t n, cap;
    SlMap index;              /* base SlSym -> index in v */
    uint32_t *by_src;         /* heap, by source instruction id: 1 + index, 0 = unresolved */
    uint32_t n_src;
    uint32_t by_op[IR_OP_COUNT]; /* 1 + index of the opcode name's base, 0 = unresolved */
    /* base text -> index, direct-mapped by hash (1 + index, 0 = empty): a module has a few
     * hundred bases, so this small table answers what the big interner would with a miss */
    struct { uint64_t hash; uint32_t k1; } recent[1024];
} SpmdNames;

typedef enum SpmdRedKind { SPMD_RED_ADD, SPMD_RED_MAX, SPMD_RED_MIN, SPMD_RED_AND, SPMD_RED_OR,
                           SPMD_RED_COUNT } SpmdRedKind;

/* A windowed dot-general loop emitted by the dot handler (windowed_loop.c), kept so the
 * driver can move the loop's consumers into it once the computation is partitioned. */
typedef struct SpmdWindowedLoop {
    IrInstr *loop;            /* the while */
    IrComputation *comp;      /* the output computation it was emitted in */
    bool output_dus;          /* the result is assembled by dynamic-update-slices (all-gather
                                 loops windowed on non-contracting or batch dims) */
} SpmdWindowedLoop;

struct SpmdCtx {
    const IrModule *in;
    IrModule *out;                /* built in `arena`; names interned in in->names */
    SlArena *arena;               /* output arena: output IR, values, kept shardings */
    SlArena scratch;              /* temporaries; released after each source instruction */
    const SpmdOptions *opts;
    TraceSink *trace;             /* never NULL */
    int64_t num_partitions;       /* N */
    int64_t next_channel_id;      /* max channel id of the input + 1, then +1 per collective */
    SpmdState root_state;         /* all N partitions */
    SpmdStateMemo root_memo;
    const SpmdState *state;       /* state handlers run in (root_state except in groups) */
    SpmdValue *values;            /* by source instruction id (hlo NULL: not partitioned yet) */
    uint32_t n_values;            /* in->next_instr_id */
    const IrInstr *visiting;      /* the source instruction being partitioned ("derived-from") */
    IrComputation *comp;          /* the output computation being built */
    SlMap comp_map;               /* source IrComputation* -> output IrComputation* */
    struct SpmdCompVariant *variants; /* called computations partitioned so far, one per
                                       * distinct (parameter, root) shardings */
    SlMap reshard_cache;          /* local IrInstr* -> SpmdCacheEntry* chain */
    uint64_t *bcast_dims;         /* by output instruction id: broadcast dims mask | known flag
                                   * (heap, grown with the output; 0 = no entry) */
    uint32_t cap_bcast_dims;
    const ShdSharding **out_shardings; /* by output instruction id: the sharding XLA's
                                        * instruction carries until its clean-up (NULL: none) */
    uint32_t cap_out_shardings;
    IrComputation *reducers[SPMD_RED_COUNT][IR_DT_COUNT]; /* created once per (kind, dtype) */
    uint32_t reshard_seq;         /* reshards started so far in the run */
    uint32_t cur_reshard;         /* reshard being built (0: none), for collective events */
    const char *coll_cause;       /* cause recorded on the next collective events */
    bool allow_full_replication;  /* false while trying C.9 patterns that must not replicate */
    bool cache_frozen;            /* no reshard-cache insertions (a trial that may be undone) */
    const ShdSharding *const *param_shardings; /* overrides for the computation being built */
    uint32_t n_param_shardings;
    uint32_t depth;               /* nesting of called computations being partitioned */
    SpmdNames names;
    SlMap kept_shardings;         /* hash -> a tiled sharding kept by spmd_keep_sharding */
    SlArena kept_arena;           /* the kept shardings: never rolled back during the run */
    SpmdWindowedLoop *wloops;     /* heap: windowed loops emitted so far */
    uint32_t n_wloops, cap_wloops;
};

/* Post-partition code motion over the windowed loops emitted in `oc` (windowed_motion.c):
 * reduces (and the elementwise ops before them) that consume a loop's result move into the
 * loop body, so the loop carries reduce-shaped buffers instead of the whole result. */
SlStatus spmd_windowed_code_motion(SpmdCtx *cx, IrComputation *oc, SlError *err);

/* ---- the emit choke (emit.c) ------------------------------------------------------------ */

/* requires:    `i` built with ir_instr_new(cx->out, ...) and not yet in a computation
 * produces:    `i` appended to cx->comp with a unique name (base `name_hint`, else the opcode),
 *              metadata copied and derived_from set from cx->visiting, broadcast dims recorded,
 *              frontend key `xla.sdy.has_unreduced_axes` removed, an `emit` trace event
 * returns:     `i`, or NULL when the arena failed (sticky; check sl_arena_failed at the end) */
IrInstr *spmd_emit(SpmdCtx *cx, IrInstr *i, const char *name_hint);
/* A unique output name from `want` ("base" or "base.N"); NULL on allocation failure. Every
 * name the partitioner gives goes through here (or spmd_emit), never through
 * ir_module_unique_name(cx->out), whose counters are only filled at the end of the run. */
SlSym spmd_unique_name(SpmdCtx *cx, SlStr want);
/* Starts the name bookkeeping from the input module (names it already holds are taken). */
bool spmd_names_init(SpmdCtx *cx);
/* Writes the counters into cx->out's own bookkeeping, so later ir_module_unique_name calls on
 * the output stay unique; false on allocation failure. */
bool spmd_names_sync(SpmdCtx *cx);
void spmd_names_fini(SpmdCtx *cx);
/* Sets (or replaces) the `sharding=` attribute of emitted instruction `i`, placed where XLA
 * prints it: after the opcode's own attributes, before frontend_attributes, metadata and
 * backend_config. False on arena failure. */
bool spmd_set_sharding_attr(SpmdCtx *cx, IrInstr *i, const ShdSharding *s);
/* Records that output instruction `i` holds a value in sharding `s`, as XLA's partitioner
 * leaves the sharding on every instruction backing a partitioned value (a clone of the source
 * instruction, a reshard's result) until its CSE has run: the clean-up keeps two identical
 * instructions apart when both have one and they differ. The last record wins. */
void spmd_note_sharding(SpmdCtx *cx, const IrInstr *i, const ShdSharding *s);
/* Broadcast dims bookkeeping (seed: SetBroadcastDimsForAddedHlo). Bit d set = output dim d is
 * identical on all partitions. Ranks above 63 record nothing. */
uint64_t spmd_bcast_dims(const SpmdCtx *cx, const IrInstr *i);
void spmd_set_bcast_dims(SpmdCtx *cx, const IrInstr *i, uint64_t mask);

/* Builders: construct + spmd_emit in one call; NULL only on arena failure. Shapes are local. */
IrInstr *spmd_emit_op(SpmdCtx *cx, IrOp op, const IrShape *shape, IrInstr *const *ops,
                      uint32_t n_ops);
IrInstr *spmd_emit_constant_scalar(SpmdCtx *cx, IrDtype t, int64_t value);
IrInstr *spmd_emit_constant_literal(SpmdCtx *cx, IrDtype t, const char *literal); /* "inf" .. */
IrInstr *spmd_emit_constant_int_array(SpmdCtx *cx, IrDtype t, const int64_t *v, uint32_t n);
IrInstr *spmd_emit_constant_s32_array(SpmdCtx *cx, const int64_t *v, uint32_t n);
IrInstr *spmd_emit_constant_u32_array(SpmdCtx *cx, const int64_t *v, uint32_t n);
IrInstr *spmd_emit_zero_like(SpmdCtx *cx, const IrShape *shape); /* broadcast of constant 0 */
IrInstr *spmd_emit_broadcast(SpmdCtx *cx, IrInstr *x, const IrShape *shape, const int64_t *dims,
                             uint32_t n_dims);
IrInstr *spmd_emit_reshape(SpmdCtx *cx, IrInstr *x, const int64_t *dims, uint32_t rank);
IrInstr *spmd_emit_transpose(SpmdCtx *cx, IrInstr *x, const int64_t *perm);
IrInstr *spmd_emit_slice(SpmdCtx *cx, IrInstr *x, const int64_t *start, const int64_t *limit);
IrInstr *spmd_emit_pad(SpmdCtx *cx, IrInstr *x, IrInstr *pad_value, const IrPadDim *pads);
/* slice with strides (plain spmd_emit_slice when every stride is 1). */
IrInstr *spmd_emit_slice_strided(SpmdCtx *cx, IrInstr *x, const int64_t *start,
                                 const int64_t *limit, const int64_t *stride);
/* concatenate(ops...) along `dim`; ops[0] itself when n == 1. */
IrInstr *spmd_emit_concatenate(SpmdCtx *cx, IrInstr *const *ops, uint32_t n, int64_t dim);
/* dynamic-slice(x, offsets[rank]) with dynamic_slice_sizes = sizes. */
IrInstr *spmd_emit_dynamic_slice(SpmdCtx *cx, IrInstr *x, IrInstr *const *offsets,
                                 const int64_t *sizes);
IrInstr *spmd_emit_dus(SpmdCtx *cx, IrInstr *x, IrInstr *update, IrInstr *const *offsets);
IrInstr *spmd_emit_binary(SpmdCtx *cx, IrOp op, IrInstr *a, IrInstr *b);
IrInstr *spmd_emit_compare(SpmdCtx *cx, IrInstr *a, IrInstr *b, const char *direction);
IrInstr *spmd_emit_select(SpmdCtx *cx, IrInstr *pred, IrInstr *t, IrInstr *f);
IrInstr *spmd_emit_convert(SpmdCtx *cx, IrInstr *x, IrDtype t);
IrInstr *spmd_emit_iota(SpmdCtx *cx, const IrShape *shape, int64_t dim);
IrInstr *spmd_emit_copy(SpmdCtx *cx, IrInstr *x);
IrInstr *spmd_emit_gte(SpmdCtx *cx, IrInstr *tuple, int64_t index);
IrInstr *spmd_emit_tuple(SpmdCtx *cx, IrInstr *const *elems, uint32_t n);
/* Clone of source `src` (opcode, attributes except sharding, literal, parameter number) with a
 * new shape and operands; called computations are mapped via spmd_output_computation(). */
IrInstr *spmd_emit_clone(SpmdCtx *cx, const IrInstr *src, const IrShape *shape,
                         IrInstr *const *ops, uint32_t n_ops);

/* The output computation for source computation `c`: the partitioned one when the driver has
 * partitioned it, else a verbatim copy (reduction/comparator bodies), made once. */
IrComputation *spmd_output_computation(SpmdCtx *cx, const IrComputation *c);
/* Scalar reduction computation (x, y) -> op(x, y) of dtype `t`, created once per (kind, t). */
IrComputation *spmd_reducer(SpmdCtx *cx, SpmdRedKind kind, IrDtype t);

/* ---- collectives (collectives.c): the only creators of communication --------------------- */

/* Replica groups and pairs are given in ids of `st` (in-group indices when grouped) and mapped
 * to real partition ids. Each call takes a fresh channel id, emits a `collective` trace event
 * with cx->coll_cause and cx->cur_reshard. `groups` with n_groups == 0 and !is_iota = all
 * partitions of `st`. Result shapes are derived from the operand. */
IrInstr *spmd_coll_all_reduce(SpmdCtx *cx, const SpmdState *st, IrInstr *x,
                              IrComputation *reducer, const IrReplicaGroups *groups);
IrInstr *spmd_coll_all_gather(SpmdCtx *cx, const SpmdState *st, IrInstr *x,
                              const IrReplicaGroups *groups, int64_t dim);
IrInstr *spmd_coll_all_to_all(SpmdCtx *cx, const SpmdState *st, IrInstr *x,
                              const IrReplicaGroups *groups, int64_t dim);
/* pairs: n_pairs (source, target) couples, flattened. */
IrInstr *spmd_coll_permute(SpmdCtx *cx, const SpmdState *st, IrInstr *x, const int64_t *pairs,
                           uint32_t n_pairs);
/* collective-broadcast: the first id of each group sends `x` to the others of its group. */
IrInstr *spmd_coll_broadcast(SpmdCtx *cx, const SpmdState *st, IrInstr *x,
                             const IrReplicaGroups *groups);
/* u32[] partition id of `st` in the current computation (in-group index when grouped). */
IrInstr *spmd_partition_id(SpmdCtx *cx, const SpmdState *st);
/* Groups of `st`'s ids that differ only on the tile dims `dims` of `s` (G.3). */
SlStatus spmd_groups_for_dims(SpmdCtx *cx, const ShdSharding *s, const int64_t *dims, uint32_t n,
                              IrReplicaGroups *out, SlError *err);
/* All-reduce `x` (in sharding `s`, state `st`) over the devices differing on `dims`: one
 * collective per listed dim with more than one shard, the last listed dim first, each over the
 * devices that differ only in that dim (upstream AllReduceAlongShardingDims of the base
 * SpmdPartitioner, per_dim_ar = true). `x` itself when no listed dim is sharded. */
IrInstr *spmd_all_reduce_along_dims(SpmdCtx *cx, const SpmdState *st, IrInstr *x,
                                    const ShdSharding *s, const int64_t *dims, uint32_t n,
                                    IrComputation *reducer);
/* A grouped state inside `outer`: device_groups in `outer`'s ids (copied into cx->arena). */
const SpmdState *spmd_state_grouped(SpmdCtx *cx, const SpmdState *outer, const int64_t *groups,
                                    int64_t n_groups, int64_t group_size);

/* ---- partition-dependent values (G.2) ---------------------------------------------------- */

/* table[pid] as a scalar of `t` (S32 or U32): constant + dynamic-slice + reshape, also when
 * every entry is equal (XLA's TableLookup never folds). */
IrInstr *spmd_table_lookup(SpmdCtx *cx, const SpmdState *st, const int64_t *table, int64_t n,
                           IrDtype t);
/* table[index] for a u32[] `index` (never folded either). */
IrInstr *spmd_table_lookup_at(SpmdCtx *cx, IrInstr *index, const int64_t *table, int64_t n,
                              IrDtype t);
/* s32[] offset of this partition's tile along `dim` of `base` in `s` (unclamped); constant 0
 * when the dim is unsharded (MakePartitionOffsets). */
IrInstr *spmd_partition_offset(SpmdCtx *cx, const SpmdState *st, const ShdSharding *s,
                               const IrShape *base, uint32_t dim);
/* All rank offsets at once into out[rank]. */
SlStatus spmd_partition_offsets(SpmdCtx *cx, const SpmdState *st, const ShdSharding *s,
                                const IrShape *base, IrInstr **out, SlError *err);
/* s32[] tile index along `dim` (MakeTiledPartitionOrdinals). */
IrInstr *spmd_partition_ordinal(SpmdCtx *cx, const SpmdState *st, const ShdSharding *s,
                                uint32_t dim);

/* ---- reshard (reshard.c) ----------------------------------------------------------------- */

/* requires:    v->hlo in the current output computation (or an enclosing one)
 * produces:    *out = v in sharding `target` (collectives through the creators above), cached
 *              per (v->hlo, target) and reversed; a `reshard` trace event per call
 * pad_value:   scalar used where padding becomes visible (uneven replicated -> tiled); NULL = 0 */
SlStatus spmd_reshard(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *target,
                      IrInstr *pad_value, SpmdValue *out, SlError *err);
SlStatus spmd_replicate(SpmdCtx *cx, const SpmdValue *v, SpmdValue *out, SlError *err);
/* C.10: select(valid, v, pad) over the uneven sharded dims not in `skip_mask`; returns v->hlo
 * unchanged when nothing is uneven. pad_value NULL = 0. */
IrInstr *spmd_pad_with_value(SpmdCtx *cx, const SpmdValue *v, IrInstr *pad_value,
                             uint64_t skip_mask);

/* C.12 result: local input with halos, the window to run the local op with, and per-dim
 * offsets into the local result (NULL when no dynamic-slice is needed). */
typedef struct SpmdWindowedInput {
    IrInstr *sharded_input;
    IrWindowDim *shard_window;   /* rank entries in cx->arena */
    IrInstr **dynamic_slice_index; /* rank s32[] scalars, or NULL */
} SpmdWindowedInput;
/* Returns SL_ERR_UNSUPPORTED (and records nothing in err) when no halo plan exists; callers
 * then fall back to spmd_handle_default(). */
SlStatus spmd_reshard_as_windowed_input(SpmdCtx *cx, const SpmdValue *v,
                                        const IrWindowDim *window, const ShdSharding *target,
                                        IrInstr *pad_value, bool mask_invalid,
                                        SpmdWindowedInput *out, SlError *err);
/* As above; force_mask_in_compact masks the invalid region when the compact halo exchange is
 * used even if mask_invalid is false (the pad handler: compact pieces leave garbage). */
SlStatus spmd_reshard_as_windowed_input_ex(SpmdCtx *cx, const SpmdValue *v,
                                           const IrWindowDim *window, const ShdSharding *target,
                                           IrInstr *pad_value, bool mask_invalid,
                                           bool force_mask_in_compact, SpmdWindowedInput *out,
                                           SlError *err);

/* ---- values of source instructions (ctx.c) ---------------------------------------------- */

void spmd_set_result(SpmdCtx *cx, const IrInstr *src, const SpmdValue *v);
/* The partitioned value of an already-visited source instruction. */
const SpmdValue *spmd_get_value(const SpmdCtx *cx, const IrInstr *src);
/* The sharding a source instruction is partitioned with (filled when missing; gspmd.md §0). */
const ShdSharding *spmd_sharding_of(SpmdCtx *cx, const IrInstr *src);
/* The sharding of tuple element `index` of `tuple_shape` under `s` (a non-tuple `s` applies to
 * every element); NULL on arena failure. */
const ShdSharding *spmd_element_sharding(SpmdCtx *cx, const ShdSharding *s,
                                         const IrShape *tuple_shape, uint32_t index);
/* requires:    `s` built in cx->arena by pure sharding arithmetic, and nothing allocated in
 *              cx->arena since `mark` is referenced from anywhere but `s`
 * returns:     the run's kept copy of a sharding identical to `s` (same devices, iota form,
 *              no metadata), with the bytes since `mark` handed back; `s` when it cannot be
 *              kept. Kept copies live in cx->kept_arena until the end of the run (values and
 *              the reshard cache point at them; the output module never does).
 *              A module has a handful of distinct shardings; the dot engine and the shape
 *              handlers rebuild them for every instruction. NULL stays NULL. */
const ShdSharding *spmd_keep_sharding(SpmdCtx *cx, SlArenaMark mark, const ShdSharding *s);
/* MakePartitionedShape in cx->arena. */
IrShape spmd_local_shape(SpmdCtx *cx, const IrShape *base, const ShdSharding *s);
/* A value for a fresh local instruction in the current state. */
SpmdValue spmd_value(SpmdCtx *cx, IrInstr *hlo, const IrShape *base, const ShdSharding *s);

/* Failure helpers (ctx.c): record an error naming cx->visiting (FILE:LINE:COL from
 * src_line/src_col). */
SlStatus spmd_nomem(SpmdCtx *cx, SlError *err);
SlStatus spmd_fail(SpmdCtx *cx, SlError *err, SlStatus st, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void spmd_warn(SpmdCtx *cx, TraceWarnKind kind, const char *message);
/* input_check.c: warnings about the whole input (instructions without a sharding, entry
 * parameters whose shape is already local), recorded before anything is partitioned. */
void spmd_check_input(SpmdCtx *cx);
/* input_check.c: warns when `hlo` (sharding `s`) is a collective or partition-id outside a
 * manual region, a sign that the input is already partitioned. */
void spmd_check_partitioned_op(SpmdCtx *cx, const IrInstr *hlo, const ShdSharding *s);

/* ---- handlers --------------------------------------------------------------------------- */

/* Every handler:
 * requires:    operands visited (spmd_get_value works on them); cx->visiting == hlo;
 *              cx->comp open
 * produces:    the local result in hlo's sharding, registered with spmd_set_result()
 * invalidates: nothing (cx->scratch is released by the driver afterwards) */
typedef SlStatus (*SpmdHandler)(SpmdCtx *cx, const IrInstr *hlo, SlError *err);

/* The dispatch table by IrOpFamily (driver.c); NULL entries use spmd_handle_default with a
 * trace warning. */
SpmdHandler spmd_handler_for(IrOpFamily fam);

/* handle_common.c: the shared template. Reshards every operand i to targets[i] (NULL entry:
 * leave as is), clones hlo with the local shape of `out_sharding` (tuple ok), registers the
 * result in `out_sharding`, then reshards it to hlo's own sharding. */
SlStatus spmd_handle_with_shardings(SpmdCtx *cx, const IrInstr *hlo,
                                    const ShdSharding *const *targets,
                                    const ShdSharding *out_sharding, SlError *err);
/* Registers `local` (in sharding `s`) as hlo's result after resharding it to hlo's sharding. */
SlStatus spmd_finish(SpmdCtx *cx, const IrInstr *hlo, IrInstr *local, const ShdSharding *s,
                     SlError *err);
/* Operand value resharded to `target` (the common step of every handler). */
SlStatus spmd_operand(SpmdCtx *cx, const IrInstr *hlo, uint32_t i, const ShdSharding *target,
                      SpmdValue *out, SlError *err);

SlStatus spmd_handle_default(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_elementwise(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_elementwise_dims_to_replicate(SpmdCtx *cx, const IrInstr *hlo,
                                                   const int64_t *dims, uint32_t n,
                                                   SlError *err);
SlStatus spmd_handle_concatenate(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_cholesky(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_bitcast_convert(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_broadcast(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_reshape(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_transpose(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_slice(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_pad(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_reverse(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_dynamic_slice(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_dynamic_update_slice(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_reduce(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_sort(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_parameter(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_constant(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_iota(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_tuple(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_gte(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_while(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_conditional(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_call(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_partition_id(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_rng(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
/* handle_scan.c: scan sharded off its scan dimension (or moved off it) runs shard-local with a
 * body rebuilt for the shard shapes; a parallel prefix when sharded on it (associative). */
SlStatus spmd_handle_scan(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
/* handle_feed.c: infeed that does not partition evenly (a conditional per shard shape). */
SlStatus spmd_handle_side_effect(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_all_reduce(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_collective_permute(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_custom_call(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
/* handle_topk.c: the TopK custom call (values sharded on dim 1: per-shard TopK, gather of the
 * candidates, replicated sort); DefaultAction when the pattern does not apply. */
SlStatus spmd_handle_topk(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
/* handle_internal.c: _SPMDInternalOp_RotateRight, _MultiRotate, _Wrap, _MultiSlice and
 * _MultiPad (target without quotes); SL_ERR_UNSUPPORTED (nothing emitted) for other targets. */
SlStatus spmd_handle_internal_custom_call(SpmdCtx *cx, const IrInstr *hlo, const char *target,
                                          SlError *err);
/* RotateRight of source `src`'s value by `amount` along dim `d`, registered as hlo's result
 * (hlo's shape and tiled sharding); the concatenate handler's rotate-right pattern uses it. */
SlStatus spmd_rotate_right(SpmdCtx *cx, const IrInstr *hlo, const IrInstr *src, uint32_t d,
                           int64_t amount, SlError *err);

/* driver.c: partitions source computation `c` into a new output computation whose root is
 * resharded to `root_sharding` (NULL: the root's own). Parameters take `param_shardings[i]`
 * when given (else their own). Used for while/call/conditional bodies. */
SlStatus spmd_partition_computation(SpmdCtx *cx, const IrComputation *c,
                                    const ShdSharding *const *param_shardings, uint32_t n_params,
                                    const ShdSharding *root_sharding, IrComputation **out,
                                    SlError *err);
/* The same for a computation a call, while or conditional calls: once per distinct set of
 * shardings. A computation called again with the shardings of an earlier call site reuses that
 * partitioned computation; with other shardings it is partitioned again into a clone with a
 * new name (XLA's partitioner flattens the call graph the same way: every partitioned
 * computation has one meaning). comp_map then names the variant chosen, for the caller's
 * emit. */
SlStatus spmd_partition_called(SpmdCtx *cx, const IrComputation *c,
                               const ShdSharding *const *param_shardings, uint32_t n_params,
                               const ShdSharding *root_sharding, SlError *err);

#endif
