/* memory.h - a static estimate of the device memory one execution of a module needs.
 * Owns: buffer liveness over a sequential schedule and the aliasing rules of XLA's buffer
 * assignment, as far as they follow from the HLO alone. Does not own: sharding (the estimate
 * of a partitioned module is per device because its shapes are local), the trace, reports.
 *
 * The schedule is the module's instruction order (a module printed with is_scheduled=true
 * lists each computation in its HloSchedule's order, so the same order is its schedule).
 * Every array leaf of every instruction is a value; a value is live from the instruction that
 * defines it to its last use (through views), entry parameters and outputs for the whole run.
 *   views (no storage):  get-tuple-element, tuple, bitcast, opt-barrier, the *-done of an
 *                        async pair (the result slot of its *-start), the operand slot of a
 *                        *-start;
 *   in place:            dynamic-update-slice (operand 0), scatter (its operands), a fusion
 *                        whose root is one of those on a fused parameter (that operand), while
 *                        (its state: operand, body parameter and root, output share storage),
 *                        when the operand's value has no later use and is not read-only (an
 *                        entry parameter that is not donated, a constant); else a copy. A
 *                        while's loop-invariant state (the body returns it unchanged) is never
 *                        copied: the loop only reads it;
 *   operand sharing:     an elementwise op, or a loop/input fusion whose fused parameter
 *                        reaches the root through elementwise ops only, writes into the buffer
 *                        of an operand of the same shape (element type and dimensions) that
 *                        has no later use and is not read-only (XLA's dataflow analysis lets
 *                        its buffer assignment share these);
 *   nested computations: a while adds the larger of its body's and condition's own peak at
 *                        its place in the schedule, a call/conditional/async-start its
 *                        callee's (the largest branch); fused computations and to_apply
 *                        reducers hold no buffers;
 *   donation:            input_output_alias in the header: a donated parameter may be
 *                        updated in place, and is live only until its last use.
 *   outputs:             every leaf of the entry's root is an output buffer of its own: a leaf
 *                        passed through from a parameter that is not donated, or returned
 *                        twice, is copied at the root (as XLA's copy insertion does).
 *   pointer tables:      a tuple-shaped entry parameter or root has a table of one pointer
 *                        (MEM_POINTER_BYTES) per element, for each tuple in its shape, counted in
 *                        parameter_bytes / output_bytes (as XLA's argument and output sizes).
 * Tables of temporary tuples, layouts and fusion are not modelled (tools/xla/MEMORY.md compares
 * the figures with XLA's). */
#ifndef SHARDLENS_MEMORY_H
#define SHARDLENS_MEMORY_H

#include "base/base.h"
#include "ir/ir.h"

#define MEM_TOP_BUFFERS   10  /* buffers kept from the peak, largest first */
#define MEM_PROFILE_SLOTS 512 /* points of the live-bytes profile over the schedule */
#define MEM_POINTER_BYTES 8   /* one element of a tuple's pointer table */

typedef enum MemBufKind {
    MEM_BUF_PARAMETER, /* an entry parameter (leaf `leaf` of it) */
    MEM_BUF_OUTPUT,    /* a value the entry returns */
    MEM_BUF_TEMP,      /* any other value of the entry computation */
    MEM_BUF_NESTED,    /* the own peak of the computations `instr` (a while, call, ...) runs */
} MemBufKind;
const char *mem_buf_kind_name(MemBufKind k); /* "parameter", "output", "temp", "nested" */

typedef struct MemBuffer {
    const IrInstr *instr; /* the instruction that defines it */
    uint32_t leaf;        /* pre-order array leaf of instr's shape */
    int64_t bytes;
    MemBufKind kind;
} MemBuffer;

typedef struct MemEstimate {
    int64_t parameter_bytes;    /* every entry parameter leaf, with tuple pointer tables */
    int64_t output_bytes;       /* every leaf the entry root returns, with its pointer tables */
    int64_t alias_bytes;        /* outputs given storage of donated parameters */
    int64_t peak_bytes;         /* the most bytes live at once: parameters, outputs, temps */
    int64_t peak_temp_bytes;    /* of peak_bytes: temporaries (nested peaks included) */
    int64_t max_temp_bytes;     /* the most temporary bytes live at once, anywhere */
    const IrInstr *peak_instr;  /* where peak_bytes is reached first (entry computation) */
    uint32_t peak_position;     /* its 0-based place in the entry's schedule */
    uint32_t n_values;          /* values of the entry with storage */
    uint32_t n_top;
    /* Live bytes over the entry's schedule, for a chart: point k is the most live at once in
     * positions [k * profile_step, (k + 1) * profile_step), so the peak is in it. */
    uint32_t n_profile, profile_step;
    int64_t profile[MEM_PROFILE_SLOTS];
    MemBuffer top[MEM_TOP_BUFFERS]; /* live at the peak, largest first (ties: IR order, leaf,
                                       kind) */
} MemEstimate;

/* Estimates `m` (its entry computation, and what it calls). Temporary tables live in a local
 * arena. Fails only when out of memory (SL_ERR_NOMEM) or on a module without an entry
 * (SL_ERR_INVALID). An input_output_alias it cannot read, and an entry whose parameter and
 * output buffers differ in size (a partitioned module whose donated parameter is sharded
 * unlike its output; XLA rejects it), are ignored: `*n_ignored_aliases` counts the entries
 * (may be NULL), the pair is neither donated nor aliased. */
SlStatus mem_estimate(const IrModule *m, MemEstimate *out, uint32_t *n_ignored_aliases,
                      SlError *err);

#endif
