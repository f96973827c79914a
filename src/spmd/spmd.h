/* spmd.h - the SPMD partitioner (gspmd.md §C-§G, seeds/000). Owns: rewriting a sharded module
 * into the per-device module. Does not own: text (src/hlo), recording (it only talks to a
 * TraceSink). Every emitted instruction goes through one choke (SpmdBuilder::AddInstruction)
 * and every change of sharding through Reshard. */
#ifndef SHARDLENS_SPMD_H
#define SHARDLENS_SPMD_H

#include "base/base.h"
#include "ir/ir.h"
#include "trace/trace.h"

/* Options by XLA's SpmdPartitionerOptions names; defaults follow XLA's library defaults. */
typedef struct SpmdOptions {
    int64_t num_partitions;                      /* 0: take the module header's */
    int64_t threshold_for_windowed_einsum_mib;   /* 256 */
    int64_t total_bytes_windowed_einsum_threshold; /* bytes; -1 = unset (XLA: nullopt) */
    int64_t max_windowed_einsum_iteration;       /* 32 */
    bool unroll_windowed_einsum;
    bool bidirectional_windowed_einsum;
    bool enable_windowed_einsum_for_all_gather;    /* true */
    bool enable_windowed_einsum_for_reduce_scatter; /* true */
    bool bidirectional_decomposed_windowed_einsum;
    bool choose_faster_windowed_einsum_over_mem;
    bool allow_module_signature_change;          /* true */
    bool cache_all_gather;                       /* true */
    bool skip_checking_windowed_einsum_users;
    bool enable_experimental_all_to_all_windowed_einsum; /* false */
    bool partial_windowed_einsum;
    bool disable_ag_rewrite_for_multiple_consumers;
    bool conv_halo_exchange_always_on_lhs;       /* true */
    bool enable_enzyme_opt; /* XLA's xla_enable_enzyme_comms_opt: DUS with constant starts stays local */
    int64_t report_instruction_count;            /* 5 */
    /* a replicated dynamic-slice of one row of a sharded operand: the owner broadcasts it */
    bool enable_dynamic_slice_collective_broadcast;         /* false */
    int64_t max_dynamic_slice_collective_broadcast_partitions; /* 32: one branch each */
    const char *preferred_gather_partition_methods;  /* verbatim, NULL = XLA default */
    const char *preferred_scatter_partition_methods; /* verbatim, NULL = XLA default */
    /* shardlens's own, not an XLA name: the clean-up XLA's partitioner pass runs after
     * partitioning (dead code, tuple simplification, dead code, CSE; true); false shows every
     * instruction the handlers emitted */
    bool remove_dead_code;
    /* not an option: the input went through sharding propagation first (the CLI's default),
     * so instructions still without a sharding are no sign of a missing pass */
    bool input_propagated;
} SpmdOptions;

void spmd_options_init(SpmdOptions *o);
/* Sets one option from "KEY=VALUE" text; unknown keys and bad values are SL_ERR_INVALID. */
SlStatus spmd_options_set(SpmdOptions *o, SlStr key_eq_value, SlError *err);
/* Writes "key=value" lines for every option, in a fixed order (for traces). */
void spmd_options_print(const SpmdOptions *o, SlBuf *out);
/* The same for the options the partitioner reads, the ones help offers (XLA names accepted
 * for compatibility but without effect, and num_partitions, which -n sets, are left out). */
void spmd_options_print_modelled(const SpmdOptions *o, SlBuf *out);

/* How many of the instructions the partitioner reads (`*total`; reducer, comparator and
 * scatter/select functions left out) carry no sharding; constants count (in both) only `with_constants`. */
uint32_t spmd_count_unannotated(const IrModule *m, bool with_constants, uint32_t *total);

/* Partitions `in` into a new module allocated in `out_arena` (names interned in `in`'s
 * interner). Emits events to `sink` (never NULL: use trace_null_sink()). Returns
 * SL_ERR_INVALID for inconsistent shardings and SL_ERR_UNSUPPORTED for constructs it cannot
 * partition, naming the instruction in `err`. */
SlStatus spmd_partition(const IrModule *in, const SpmdOptions *opts, TraceSink *sink,
                        SlArena *out_arena, IrModule **out, SlError *err);

#endif
