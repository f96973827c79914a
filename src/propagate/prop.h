/* prop.h - sharding propagation, the way XLA's ShardingPropagation pass (GSPMD) does it.
 * Owns: filling in the shardings of a module's unannotated instructions from the annotated
 * ones (forward and backward passes over aggressiveness levels 0..3 to a fixed point), and the
 * record of where every propagated sharding came from. Does not own: partitioning (src/spmd
 * never depends on this module), text (src/hlo), sharding arithmetic (src/sharding).
 * Lifetime: shardings and origins live in the arena passed to prop_run(). */
#ifndef SHARDLENS_PROP_H
#define SHARDLENS_PROP_H

#include "base/base.h"
#include "ir/ir.h"
#include "sharding/shd.h"

#define PROP_MAX_FLAGS 4096

/* The ShardingPropagation constructor arguments, by XLA's names. The two allow_* options are
 * lists like XLA's absl::Span<bool>: one value for the whole output (parameters), or one per
 * element of the entry's result tuple (per entry parameter). */
typedef struct PropOptions {
    bool is_spmd;
    bool propagate_metadata;
    bool cse_prevention_only;
    uint32_t n_allow_output, n_allow_params;
    bool allow_output[PROP_MAX_FLAGS];
    bool allow_params[PROP_MAX_FLAGS];
    /* execution_threads: comma-separated thread names; empty: every computation. A
     * computation's thread is its `execution_thread=` ("main" when it has none). */
    char threads[256];
} PropOptions;

/* XLA's defaults: is_spmd=false, propagate_metadata=false, both allow lists {false}. */
void prop_options_init(PropOptions *o);
/* Sets one option from "KEY=VALUE" text; SL_ERR_INVALID (message in err) for an unknown key
 * or a bad value. With `execution_threads`, as in XLA, computations of other threads are left
 * alone: no rule runs on them and their instructions keep their shardings. */
SlStatus prop_options_set(PropOptions *o, const char *key, const char *value, SlError *err);
/* The two allow_* options from the module config, as XLA's pipeline constructs the pass: the
 * header's allow_spmd_sharding_propagation_to_output={...} and ..._to_parameters={...} (left
 * as they are when the header has none). SL_ERR_INVALID (message in err) for a bad list. */
SlStatus prop_options_from_module(PropOptions *o, const IrModule *m, SlError *err);
/* `key` names one of the options above (partition's --set routes such keys here). */
bool prop_options_has_key(const char *key);
/* `c` runs on one of the threads of o->threads (always true when that list is empty). */
bool prop_options_thread(const PropOptions *o, const IrComputation *c);
/* The same for a thread named by its text (quotes allowed; empty is "main"). */
bool prop_options_thread_named(const PropOptions *o, SlStr thread);
/* One line per option with its value ("is_spmd=false"), for help text. */
void prop_options_print(const PropOptions *o, SlBuf *out);

typedef enum PropDir {
    PROP_DIR_ANNOTATED,   /* the input's own sharding (a user annotation) */
    PROP_DIR_FORWARD,     /* from operands */
    PROP_DIR_BACKWARD,    /* from users */
    PROP_DIR_GROUP,       /* from a shard_as / shard_like group member */
    PROP_DIR_COMPUTATION, /* kept consistent across a while/conditional/call boundary */
    PROP_DIR_FIXUP,       /* set by the pass's pre- or post-processing */
} PropDir;

/* One sharding the pass set on one instruction. Origins chain through `prev`: the record of
 * the neighbour's sharding that this one was derived from (NULL at an annotation). */
typedef struct PropOrigin {
    const IrInstr *instr;
    const ShdSharding *sharding;  /* the sharding set */
    const IrInstr *from;          /* the neighbour it came from; NULL for annotations */
    const struct PropOrigin *prev; /* the neighbour's origin at that time; NULL: annotated */
    const ShdSharding *replaced;  /* the instruction's sharding before (NULL: none) */
    const ShdSharding *candidate; /* the candidate derived from `from` before merging */
    PropDir dir;
    int level;                    /* aggressiveness 0..3; -1 outside the fixed point */
    const char *rule;             /* static text naming the rule ("elementwise", "dot lhs") */
    uint32_t seq;                 /* order in which the pass set it */
} PropOrigin;

typedef struct PropResult {
    PropOrigin **origins; /* n_origins records in the order they were made */
    uint32_t n_origins;
    /* Per instruction id (< n_ids): the origin of its final sharding, NULL when the sharding is
     * the input's own or it has none. */
    const PropOrigin **final_origin;
    uint32_t n_ids;
    uint32_t n_instrs;     /* instructions in the module after the pass */
    uint32_t n_propagated; /* of those, how many got a sharding they did not have */
    uint32_t iterations;   /* fixed-point sweeps */
    bool changed;          /* XLA's return value: the module changed */
} PropResult;

/* Runs the pass on `m` in place: instructions get `sharding=` attributes, `Sharding` custom
 * calls become copies, ShardBarrierFrom/To custom calls are removed. Everything it allocates
 * goes to `a` (the module's arena is fine). SL_ERR_INVALID / SL_ERR_UNSUPPORTED with a message
 * naming the instruction when XLA's pass would fail. */
SlStatus prop_run(IrModule *m, const PropOptions *o, SlArena *a, PropResult *out, SlError *err);

/* XLA's CallInliner, which its compile pipeline runs before sharding propagation: every `call`
 * becomes the instructions of its callee (parameters replaced by the call's operands, the call's
 * users by the callee's root); a callee called once keeps its instruction names, one called
 * from several sites is copied per site. Computations the entry no longer reaches are dropped.
 * Not part of prop_run (XLA's ShardingPropagation alone keeps calls): the partition pipeline
 * runs it first. Returns the number of calls inlined. */
uint32_t prop_inline_calls(IrModule *m);

/* The instructions the sharding of `o` passed through, source first (the annotated
 * instruction, when there is one) and o->instr last; at most `cap` (the ones nearest the
 * source are dropped first). Returns the count. */
uint32_t prop_origin_path(const PropOrigin *o, const IrInstr **path, uint32_t cap);
/* The annotated instruction the chain starts at; NULL when it starts at a fix-up. */
const IrInstr *prop_origin_source(const PropOrigin *o);
/* "forward", "backward", "shard group", "computation", "fix-up", "annotated". */
const char *prop_dir_name(PropDir d);

/* The origin chain of `o` as one sentence: "%dot got {...} forward from %x (annotated)
 * through %convert.3 and %multiply.5 at level 0 (rule dot lhs)". */
void prop_origin_describe(const PropOrigin *o, SlBuf *out);

#endif
