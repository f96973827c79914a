/* dot_int.h - the dot engine's internal interface, shared by handle_dot.c, dot_group.c,
 * windowed_einsum.c and handle_conv.c (gspmd.md §E, §F.1; seeds/000 HandleDot, PartitionDot,
 * HandleConvolution). Owns: the dimension-role records (E.1), the job that carries the
 * create-sharded-op callback (the only way a local dot or convolution is emitted), and the
 * recursion's problem record. Does not own: resharding or collectives (reshard.c,
 * collectives.c).
 * Invariants: every local dot/convolution is built by DotJob.create; strategies never emit
 * before they know they apply, so a failed strategy leaves nothing behind. */
#ifndef SHARDLENS_DOT_INT_H
#define SHARDLENS_DOT_INT_H

#include "spmd/spmd_int.h"

/* The two handlers the driver dispatches to. */
SlStatus spmd_handle_dot(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_conv(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
/* handle_ragged_dot.c: ragged-dot (IR_FAM_RAGGED_DOT) and the `__op$block_scaled_dot` custom
 * call (through spmd_dot_helper with its own create function). */
SlStatus spmd_handle_ragged_dot(SpmdCtx *cx, const IrInstr *hlo, SlError *err);
SlStatus spmd_handle_block_scaled_dot(SpmdCtx *cx, const IrInstr *hlo, SlError *err);

/* One dimension role record (E.1): -1 where the tensor has no such dim. */
typedef struct DotDimMap {
    int64_t lhs, rhs, out;
} DotDimMap;

typedef enum DotRole { DOT_BATCH, DOT_CONTRACTING, DOT_LHS_NC, DOT_RHS_NC, DOT_SPATIAL,
                       DOT_ROLE_COUNT } DotRole;

typedef enum DotSide { DOT_LHS, DOT_RHS, DOT_OUT } DotSide;

typedef struct DotDims {
    DotDimMap *role[DOT_ROLE_COUNT]; /* in cx->arena */
    uint32_t n[DOT_ROLE_COUNT];
    uint32_t rank[3];                /* lhs, rhs, out ranks */
} DotDims;

typedef struct DotJob DotJob;

/* Emits one local dot/convolution of `lhs` and `rhs` (local shapes) with the (per-partition)
 * conv window `window` (NULL for dots); NULL on arena failure. */
typedef IrInstr *(*DotCreateFn)(SpmdCtx *cx, const DotJob *job, IrInstr *lhs, IrInstr *rhs,
                                const IrWindowDim *window);

/* A convolution's case 0 (F.1) hook: sets *out (local result in `p->out`) or leaves it NULL;
 * *owned = true when no other strategy may be tried (grouped convolutions). */
/* Block-scaled dots (upstream PartitionedHloMX): as DotCreateFn, with each operand's scale
 * (local shapes, resharded exactly like their operands). */
typedef IrInstr *(*DotCreateScaledFn)(SpmdCtx *cx, const DotJob *job, IrInstr *lhs,
                                      IrInstr *rhs, IrInstr *lhs_scale, IrInstr *rhs_scale);

struct DotProblem;
typedef SlStatus (*DotConvCaseFn)(SpmdCtx *cx, const DotJob *job, const struct DotProblem *p,
                                  bool require_matching, IrInstr **out, bool *owned,
                                  SlError *err);

struct DotJob {
    const IrInstr *hlo;      /* the source dot or convolution */
    const char *handler;     /* "dot" or "convolution" (trace) */
    DotDims dims;
    DotCreateFn create;
    DotConvCaseFn conv_case; /* NULL for dots */
    const IrWindowDim *window; /* conv: the source window (one entry per spatial dim) */
    uint32_t n_window;
    void *conv;              /* handle_conv.c's private data */
    bool replicate_fallback; /* grouped convolutions: no operand inference from the output */
    DotCreateScaledFn create_scaled; /* block-scaled dots: used instead of `create`; operands
                                      * 2 and 3 of `hlo` are the lhs and rhs scales */
    struct DotReduceSlice *reduce_slice; /* dot_group.c: the wrapped job of a sliced
                                          * group-on-contracting output, else NULL */
    bool unreduced_out;      /* the source's output sharding is unreduced (or has an unreduced
                              * subgroup): its local ops keep their partial sums */
};

/* A group-on-contracting level whose inner creator all-reduces each local product over the
 * output dims `dims` (and the replication dim when `reduce_replication`) of `out` in state
 * `st`, then slices it on them (upstream's inner_creator with output_slice_dims). */
typedef struct DotReduceSlice {
    const DotJob *outer;      /* creates the local op */
    const SpmdState *st;
    const ShdSharding *out;
    int64_t dims[SPMD_MAX_RANK];
    uint32_t n;
    bool reduce_replication;
} DotReduceSlice;

/* The (possibly per-group) problem PartitionDot works on. All values share `st`. */
typedef struct DotProblem {
    SpmdValue lhs, rhs;
    const IrShape *out_base;  /* per-group output base shape */
    const ShdSharding *out;   /* output sharding in st's ids */
    const SpmdState *st;      /* N_cur = st->num_partitions */
    const IrWindowDim *window; /* conv window for the local op (per group) or NULL */
    /* block-scaled dots: the operands' scales, same sharding and state as lhs/rhs and
     * resharded with them (hlo NULL for every other dot) */
    SpmdValue lhs_scale, rhs_scale;
} DotProblem;

/* HandleDotHelper: partitions `job->hlo` and registers its result. */
SlStatus spmd_dot_helper(SpmdCtx *cx, const DotJob *job, SlError *err);
/* PartitionDot: *out = local result in p->out (never NULL on SL_OK). */
SlStatus spmd_partition_dot(SpmdCtx *cx, const DotJob *job, const DotProblem *p, IrInstr **out,
                            SlError *err);

/* ---- helpers shared by the three files (handle_dot.c) ---- */
int64_t spmd_dot_parts(const ShdSharding *s, const DotDims *d, DotRole role, DotSide side);
/* E.2: sharding `s` of `from` seen from `to` (B.4 collapsed transpose); NULL = "none". */
const ShdSharding *spmd_dot_seen_from(SpmdCtx *cx, const DotDims *d, const ShdSharding *s,
                                      DotSide from, DotSide to);
int64_t spmd_dot_dim(const DotDimMap *m, DotSide side);
/* Records a `decision` event for the job (handler, strategy, alternatives, numbers, reason). */
void spmd_dot_decide(SpmdCtx *cx, const DotJob *job, const char *strategy, const char *reason,
                     const char *const *alts, uint32_t n_alts, const TraceKV *nums,
                     uint32_t n_nums);

/* ParseDotGeneralFromDot for any dot (E.1); SL_ERR_UNSUPPORTED for odd dimension numbers. */
SlStatus spmd_dot_dims_of(SpmdCtx *cx, const IrInstr *dot, DotDims *d);
/* InferDotOperandSharding: the operand sharding output sharding `o` implies (dims absent
 * from the operand moved into replication, contracting dims unsharded). */
const ShdSharding *spmd_dot_infer_operand(SpmdCtx *cx, const DotDims *d, const ShdSharding *o,
                                          DotSide side);
/* InferDotOperandSharding with consider_other_operand and may_combine_partial_sharding: the
 * sharding implied by the output, merged with (or replaced by the more specific) one implied
 * by the other operand's sharding `other` on the shared batch and contracting dims. */
const ShdSharding *spmd_dot_infer_operand_with_other(SpmdCtx *cx, const DotDims *d,
                                                     const ShdSharding *o,
                                                     const ShdSharding *other, DotSide side);

/* Strategies in the order PartitionDot tries them; a decision lists the earlier ones as the
 * alternatives that were considered and not taken. */
typedef enum DotStrategy {
    DOT_S_CONV, DOT_S_BATCH_PARALLEL, DOT_S_BATCH_RESHARD_CHEAP, DOT_S_WINDOWED,
    DOT_S_BATCH_RESHARD, DOT_S_LHS_MATCHES_OUT, DOT_S_RHS_MATCHES_OUT, DOT_S_GROUP_BATCH,
    DOT_S_GROUP_NC, DOT_S_GROUP_CONTRACTING, DOT_S_REMOVE_PARTIAL, DOT_S_OUT_BATCH,
    DOT_S_OUT_LHS_NC, DOT_S_OUT_RHS_NC, DOT_S_REPLICATED_OUT_CONTRACTING,
    DOT_S_INFER_FROM_OUTPUT, DOT_S_REPLICATE, DOT_S_COUNT
} DotStrategy;

/* dot_alternatives.c: numbers for the decision choosing `chosen` (names[s]: strategy s's name)
 * about each alternative: the strategies tried before it and the last resort, "replicate".
 * Per alternative NAME that resharding the operands would make apply: alt.NAME.bytes (the
 * bytes each device would send for that, ring model) and alt.NAME.plan (those collectives,
 * in words). Strings live in cx->scratch. Returns the count written (<= cap). */
uint32_t spmd_dot_alternative_numbers(SpmdCtx *cx, const DotJob *job, const struct DotProblem *p,
                                      DotStrategy chosen, const char *const *names, TraceKV *out,
                                      uint32_t cap);

/* Partition counts of a problem per role and tensor (E.1). */
typedef struct DotCounts {
    int64_t n, lb, rb, ob, lc, rc, lnc, rnc, olnc, ornc, ls, rs, os;
} DotCounts;

void spmd_dot_counts(const DotJob *job, const DotProblem *p, DotCounts *c);
/* The tensor dims of one role on one side, into `out`; returns the count. */
uint32_t spmd_dot_role_dims(const DotDims *d, DotRole role, DotSide side, int64_t *out);
/* A decision for `strategy` with the problem's counts and sizes as the numbers compared. */
void spmd_dot_decide_strategy(SpmdCtx *cx, const DotJob *job, const DotProblem *p,
                              DotStrategy strategy, const char *reason);
/* The scale travelling with operand `v` of `p` (NULL for plain dots). */
const SpmdValue *spmd_dot_scale_of(const DotProblem *p, const SpmdValue *v);
/* Reshards the scale of `v` (if any) to `t` (NULL = replicate) into *out (hlo NULL if none). */
SlStatus spmd_dot_reshard_scale(SpmdCtx *cx, const DotProblem *p, const SpmdValue *v,
                                const ShdSharding *t, SpmdValue *out, SlError *err);
/* Reshards local `hlo` (in sharding `s`, state p->st) to the problem's output sharding. */
SlStatus spmd_dot_to_out(SpmdCtx *cx, const DotProblem *p, IrInstr *hlo, const ShdSharding *s,
                         IrInstr **out, SlError *err);
/* spmd_all_reduce_along_dims for the dot engine: `x` itself when it is a local op of a source
 * whose output is unreduced (upstream tags such clones `xla.sdy.has_unreduced_axes` and its
 * AllReduceAlongShardingDims leaves tagged operands alone). Sets the collective cause. */
IrInstr *spmd_dot_all_reduce(SpmdCtx *cx, const DotJob *job, const SpmdState *st, IrInstr *x,
                             const ShdSharding *s, const int64_t *dims, uint32_t n);
/* spmd_reshard with a NULL target treated as out of memory. */
SlStatus spmd_dot_reshard_to(SpmdCtx *cx, const SpmdValue *v, const ShdSharding *t,
                             SpmdValue *out, SlError *err);

/* ---- grouping strategies (dot_group.c); each leaves *out NULL when it does not apply ---- */
/* E.6 (also used by grouped convolutions with their converted roles). */
SlStatus spmd_dot_group_on_batch(SpmdCtx *cx, const DotJob *job, const DotProblem *p, bool rm,
                                 IrInstr **out, SlError *err);
/* E.7 */
SlStatus spmd_dot_group_on_non_contracting(SpmdCtx *cx, const DotJob *job, const DotProblem *p,
                                           bool rm, IrInstr **out, SlError *err);
/* E.8 */
SlStatus spmd_dot_group_on_contracting(SpmdCtx *cx, const DotJob *job, const DotProblem *p,
                                       bool rm, IrInstr **out, SlError *err);
/* E.9 */
SlStatus spmd_dot_remove_output_partial(SpmdCtx *cx, const DotJob *job, const DotProblem *p,
                                        IrInstr **out, SlError *err);
/* Masks the uneven `dims` of a per-group operand value with zeros (C.10). */
IrInstr *spmd_dot_mask_contracting(SpmdCtx *cx, const SpmdValue *outer, const int64_t *dims,
                                   uint32_t n);

/* ---- windowed einsum (windowed_einsum.c) ---- */
typedef enum DotWindowedKind { DOT_WE_NONE, DOT_WE_AG_CONTRACTING, DOT_WE_AG_NONCONTRACTING,
                               DOT_WE_AG_BATCH, DOT_WE_RS } DotWindowedKind;

typedef struct DotWindowedConfig {
    DotWindowedKind kind;
    bool windowed_lhs;       /* the operand passed around the ring */
    int64_t loop_partitions; /* n (== N_cur except partial windowing) */
    int64_t windowing_dim;   /* partial windowing: the lhs loop dim, else -1 */
    int64_t size_bytes;      /* the size compared with the threshold */
    int64_t threshold_bytes;
} DotWindowedConfig;

/* E.5: fills `cfg` (kind NONE when no windowed loop applies); records the decision. */
void spmd_windowed_config(SpmdCtx *cx, const DotJob *job, const DotProblem *p,
                          DotWindowedConfig *cfg);
/* E.12: emits the loop; *out = local result in p->out. */
SlStatus spmd_emit_windowed_dot(SpmdCtx *cx, const DotJob *job, const DotProblem *p,
                                const DotWindowedConfig *cfg, IrInstr **out, SlError *err);

#endif
