/* prop_int.h - shared by the files of src/propagate only: the pass state, the kept shardings
 * and prop_set() (prop_set.c), the module index (prop_index.c), XLA's sharding predicates and
 * comparisons (prop_shd.c), the per-op rules (prop_fwd.c, prop_bwd.c), the gather/scatter
 * dimension maps (prop_gs.c), computation boundaries (prop_calls.c), unspecified dims
 * (prop_unspec.c) and the fixed point (prop_fix.c). Invariant: every sharding the pass sets
 * goes through prop_set(), which records its origin. */
#ifndef SHARDLENS_PROP_INT_H
#define SHARDLENS_PROP_INT_H

#include "propagate/prop.h"

#define PROP_MAX_RANK 64

/* Custom calls the pass treats specially, by instruction id (PropCtx.flags). */
enum {
    PROP_F_BARRIER_FROM = 1, PROP_F_BARRIER_TO = 2, PROP_F_MANUAL_CONV = 4, PROP_F_SHARDING = 8,
    PROP_F_FULL_TO_SHARD = 16,
};

typedef struct Groups {
    SlVec members; /* IrInstr *, grouped by id via `ids` */
    SlVec ids;     /* int64_t group id per member */
    SlVec kinds;   /* int8_t per member */
} Groups;

typedef struct PropCtx {
    SlArena *a;                 /* where rules allocate: `scratch` inside the sweeps, else keep */
    SlArena *keep;              /* the caller's arena: every sharding prop_set() stores */
    SlArena scratch;            /* candidates, released after each rule evaluation */
    IrModule *m;
    const PropOptions *o;
    bool allow_output, allow_params; /* any of the lists */
    uint32_t n_ids;
    const ShdSharding **sh;     /* current sharding by instruction id; NULL: none */
    const PropOrigin **origin;  /* origin of the current sharding by id */
    uint32_t *user_start;       /* CSR: users of id i are users[user_start[i]..[i+1]) */
    IrInstr **users;
    bool *provided;             /* by id: the sharding may not change */
    IrInstr **caller;           /* by computation id: the while/conditional/call calling it */
    int64_t *group;             /* by id: shard group id, -1 none */
    int8_t *group_kind;         /* by id: 1 shard_as, 2 shard_like */
    const int64_t **unspec;     /* by id: sorted unspecified dims of a Sharding op, or NULL */
    uint32_t *n_unspec;
    int level;
    PropDir dir;
    const IrInstr *from;        /* the neighbour the rule being applied reads */
    const char *rule;
    SlVec origins;              /* PropOrigin * */
    uint8_t *flags;             /* by id: PROP_F_* */
    IrInstr **by_id;            /* instruction by id */
    uint32_t *order;            /* ids, computation by computation, in post order */
    uint32_t *comp_start;       /* n_comps + 1 offsets into order */
    const ShdSharding **interned; /* open addressing, cap_interned (power of two) slots */
    uint32_t cap_interned, n_interned;
    SlVec owned[3];             /* the pass's own lists (freed by prop_run) */
    Groups groups;              /* shard_as / shard_like members */
    uint32_t iterations;
    IrInstr *man_after;         /* the manual conversion op the last refinement also set */
    int64_t max_devices;        /* the most devices any input sharding uses */
    uint64_t *memo_sig[2];      /* by id, forward/backward: inputs of the last no-change run */
    int8_t *memo_level[2];      /* the level it ran at; -1: none */
    bool *cache_group, *cache_fwd, *cache_bwd; /* XLA's already-inferred sets, by id */
    uint32_t cache_n;
    const ShdSharding **kept;   /* pointer set of the interned shardings (cap_interned slots) */
    const ShdSharding **stable; /* pointer set of the shardings the fixed point starts from */
    uint32_t cap_stable;
    struct PropMemo *memo;      /* PROP_MEMO_SLOTS results of pure transforms of kept ones */
} PropCtx;

/* ---- prop_set.c: kept (interned) shardings ---- */
/* `s` is one of the pass's interned shardings: it lives and stays unchanged to the end. */
bool prop_is_kept(const PropCtx *cx, const ShdSharding *s);
/* Interned, or one of the shardings the fixed point started from (which also live and stay
 * unchanged to the end): its pointer may key a memo. */
bool prop_is_stable(const PropCtx *cx, const ShdSharding *s);
/* The interned copy of `s` (NULL for NULL). */
const ShdSharding *prop_keep(PropCtx *cx, const ShdSharding *s);
/* Records the shardings the fixed point starts from (cx->sh) as stable. */
void prop_collect_stable(PropCtx *cx);

/* ---- prop_shd.c: XLA's notions over ShdSharding ---- */
bool px_tile_maximal(const ShdSharding *s);  /* replicated, maximal, unknown; tuples: all */
bool px_replicated(const ShdSharding *s);
bool px_manual(const ShdSharding *s);        /* {manual}; tuples: all leaves */
bool px_manual_leaf(const ShdSharding *s);
bool px_spatial(const ShdSharding *s);       /* IsSpatiallyPartitioned; NULL: false */
bool px_partial(const ShdSharding *s);       /* HasPartialReplication */
int64_t px_num_tiles(const ShdSharding *s);
bool px_more_specific(const ShdSharding *l, const ShdSharding *r);
/* MergeSharding: true when `*dst` (possibly replaced by the merge) should win over to_merge. */
bool px_merge(PropCtx *cx, const ShdSharding *to_merge, const ShdSharding **dst, bool combine);
/* MergeShardingIfCompatible with minimum tiles; replaces *dst on success. */
bool px_merge_if_compatible(PropCtx *cx, const ShdSharding *to_merge, int64_t min_tiles,
                            const ShdSharding **dst);
bool px_manual_subgroup(const ShdSharding *s); /* tiled with a manual subgroup */
const ShdSharding *px_manual_as_data(PropCtx *cx, const ShdSharding *s);
const ShdSharding *px_data_as_manual(PropCtx *cx, const ShdSharding *s);
bool px_subtiling_or_equal(const IrShape *shape, const ShdSharding *sub, const ShdSharding *s);
/* ReturnImprovedShardingImpl: the sharding to set, or NULL. */
const ShdSharding *px_improved(PropCtx *cx, const ShdSharding *from, const ShdSharding *cur,
                               const IrShape *shape, bool combine, bool aggressive);
/* Metadata: `s` with the metadata list `md` (verbatim "{...}" or "{{...}, {...}}"). */
const ShdSharding *px_with_md(PropCtx *cx, const ShdSharding *s, SlStr md);
/* `s` carrying `src`'s metadata (derived shardings keep their source's). */
const ShdSharding *px_keep_md(PropCtx *cx, const ShdSharding *s, const ShdSharding *src);
SlStr px_md_merge(PropCtx *cx, SlStr first, SlStr second);
const ShdSharding *px_strip_md(PropCtx *cx, const ShdSharding *s);
/* Sub-sharding of tuple element `index` of `shape`; a leaf sharding or a tuple of leaves. */
const ShdSharding *px_sub(PropCtx *cx, const ShdSharding *s, const IrShape *shape, uint32_t index);
/* The same sharding on every leaf of `shape` (SingleTuple); arrays: `s`. */
const ShdSharding *px_single_tuple(PropCtx *cx, const IrShape *shape, const ShdSharding *s);
/* A tuple sharding for `shape` with `s` on tuple element `index` and `base` elsewhere. */
const ShdSharding *px_replace_sub(PropCtx *cx, const ShdSharding *base, const IrShape *shape,
                                  uint32_t index, const ShdSharding *s);
const ShdSharding *px_replicate_all_data(PropCtx *cx, const ShdSharding *s, uint32_t rank);
const ShdSharding *px_replicate_dims(PropCtx *cx, const ShdSharding *s, const int64_t *dims,
                                     uint32_t n);
const ShdSharding *px_replicate_except(PropCtx *cx, const ShdSharding *s, const int64_t *keep,
                                       uint32_t n);
/* PropagateShardingAlongDimsAndReplicateOthers. */
const ShdSharding *px_along_dims(PropCtx *cx, const ShdSharding *s, const int64_t *src_dims,
                                 const int64_t *tgt_dims, uint32_t n, uint32_t tgt_rank);
/* shd_remove_dims / shd_insert_dims / shd_transpose_collapsed in cx->a; like the px_replicate_*
 * transforms, a result for a kept input is computed once and kept (the rules ask the same few
 * shardings the same questions over and over). */
const ShdSharding *px_remove_dims(PropCtx *cx, const ShdSharding *s, const int64_t *dims,
                                  uint32_t n);
const ShdSharding *px_insert_dims(PropCtx *cx, const ShdSharding *s, const int64_t *pos,
                                  uint32_t n);
const ShdSharding *px_transpose_collapsed(PropCtx *cx, const ShdSharding *s,
                                          const int64_t *src_to_tgt, uint32_t src_rank,
                                          uint32_t tgt_rank);
const ShdSharding *px_replicated_sh(PropCtx *cx, const ShdSharding *md_from);
const ShdSharding *px_manual_sh(PropCtx *cx, const ShdSharding *md_from);
bool px_evenly(const IrShape *shape, const ShdSharding *s);

/* ---- prop_set.c: setting shardings ---- */
static inline const ShdSharding *
prop_sh(const PropCtx *cx, const IrInstr *i)
{
    return cx->sh[i->id];
}
bool prop_set(PropCtx *cx, IrInstr *i, const ShdSharding *s, const ShdSharding *candidate);
/* MaybeImproveInstructionSharding with the context's origin fields. */
bool prop_improve(PropCtx *cx, IrInstr *i, const ShdSharding *s, bool combine, bool aggressive);
bool prop_improve_sub(PropCtx *cx, IrInstr *i, const ShdSharding *s, uint32_t index,
                      bool combine, bool aggressive);
/* shd_equal(), or both NULL. */
bool prop_same_sharding(const ShdSharding *a, const ShdSharding *b);

/* ---- prop_index.c ---- */
/* Fills cx->user_start/users, by_id, order and comp_start for cx->m (in cx->a; a table is
 * NULL when the arena failed). */
void prop_build_users(PropCtx *cx);
uint32_t prop_n_users(const PropCtx *cx, const IrInstr *i);
IrInstr *prop_user(const PropCtx *cx, const IrInstr *i, uint32_t k);
uint32_t prop_non_root_users(const PropCtx *cx, const IrInstr *i);
bool prop_is_custom_call(const IrInstr *i, const char *target);
bool prop_is_entry_root(const IrInstr *i);
/* No candidate can improve `s` (tiled on every device, no replication): rules may skip. */
bool prop_saturated(const PropCtx *cx, const ShdSharding *s);

/* ---- prop_calls.c: computation boundaries ---- */
#define PROP_MAX_RELATED 64
/* The computations a while/conditional/call runs (condition and body; branches; to_apply). */
uint32_t prop_bodies(const IrInstr *i, IrComputation **out, uint32_t cap);
/* GetRelatedInstructions: at most PROP_MAX_RELATED into `out`; 0 when `i` has none. */
uint32_t prop_related(PropCtx *cx, IrInstr *i, IrInstr **out);
/* MaybeComputationPropagation: `i`'s sharding to its related instructions (not provided
 * ones), recursively; each instruction it sets is appended to `changed` (IrInstr *). */
void prop_computation_propagation(PropCtx *cx, IrInstr *i, SlVec *changed, int depth);
/* CheckAndUpdateDeviceAssignmentsInWhileBody; SL_ERR_INVALID (in err) on a device conflict. */
SlStatus prop_check_while_devices(PropCtx *cx, IrInstr *w, SlError *err);

/* ---- prop_unspec.c: unspecified dims of Sharding annotations ---- */
/* "unspecified_dims=[0,2]" in `i`'s backend_config: at most `cap` dims, sorted. */
uint32_t prop_parse_unspecified(const IrInstr *i, int64_t *dims, uint32_t cap);
/* Refinements of provided annotation `i` from its operand, its users, its shard group (with
 * its manual conversion op, cx->man_after, when one follows it). */
bool prop_unspecified_from_operand(PropCtx *cx, IrInstr *i);
bool prop_unspecified_from_users(PropCtx *cx, IrInstr *i);
bool prop_unspecified_from_group(PropCtx *cx, IrInstr *i, IrInstr **members, uint32_t n);

/* ---- prop_fix.c: the fixed point ---- */
#define PROP_MAX_GROUP 4096
/* The members of shard group `id`, at most `cap`. */
uint32_t prop_group_members(const Groups *g, int64_t id, IrInstr **out, uint32_t cap);
/* Sweeps at aggressiveness `level` until nothing changes; true when something changed. */
bool prop_run_to_fix_point(PropCtx *cx, const Groups *g, int level);

bool prop_in_ints(const int64_t *v, uint32_t n, int64_t x); /* x among v[0..n) (prop_shd.c) */

/* ---- prop_fwd.c / prop_bwd.c ---- */
bool prop_support_spatial(PropCtx *cx, const IrInstr *i, bool allow_output, bool allow_params);
bool prop_can_pass_at_level(const IrInstr *i, int level);
bool prop_forward(PropCtx *cx, IrInstr *i);
bool prop_backward(PropCtx *cx, IrInstr *i);
/* ---- prop_dot.c: the dot's and the convolution's forward rules, and a dot operand's sharding
 * inferred from the dot's (the other operand considered): the backward rule ---- */
bool prop_dot_forward(PropCtx *cx, IrInstr *d, bool combine);
bool prop_conv_forward(PropCtx *cx, IrInstr *c, bool combine);
const ShdSharding *prop_dot_operand_from_user(PropCtx *cx, const IrInstr *d, int k);
/* GetShardingFromUser: what `user` asks of `i`, or NULL. */
const ShdSharding *prop_from_user(PropCtx *cx, const IrInstr *i, const IrInstr *user, int level);

/* ---- prop_flatten.c ---- */
/* Gives every while/conditional/call site its own body (XLA's FlattenCallGraph); returns the
 * number of computations copied. Temporary tables go to `scratch`. */
uint32_t prop_flatten_calls(IrModule *m, SlArena *scratch);

/* ---- prop_gs.c: gather/scatter dims ---- */
typedef struct PropGsDims {
    uint32_t n;
    int64_t operand[PROP_MAX_RANK], indices[PROP_MAX_RANK], output[PROP_MAX_RANK];
} PropGsDims;
bool prop_gather_forward(PropCtx *cx, IrInstr *g, bool combine);
bool prop_scatter_forward(PropCtx *cx, IrInstr *s, bool combine);
const ShdSharding *prop_gather_from_user(PropCtx *cx, const IrInstr *i, const IrInstr *g);
const ShdSharding *prop_scatter_from_user(PropCtx *cx, const IrInstr *i, const IrInstr *s);

#endif
