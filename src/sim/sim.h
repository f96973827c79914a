/* sim.h - an HLO interpreter and an N-device SPMD simulator, and `verify` built on both.
 * Owns: typed values, evaluating a module's entry computation on one or more simulated devices
 * (collectives exchange real data between the devices), and checking a partitioned module
 * against its unpartitioned original. Does not own: text (src/hlo) or partitioning
 * (src/spmd). Values are heap objects with reference counts; every function that returns one
 * hands the caller a reference to drop with sim_value_unref(). */
#ifndef SHARDLENS_SIM_H
#define SHARDLENS_SIM_H

#include "base/base.h"
#include "ir/ir.h"

#define SIM_MAX_RANK 16 /* ranks above this are reported as unsupported */

/* One element: floats in `f` (already rounded to their type), integers and pred in `i`
 * (sign-extended for signed types, zero-extended for unsigned; u64 keeps its bit pattern). */
typedef union SimElem {
    double f;
    int64_t i;
} SimElem;

typedef struct SimValue {
    uint32_t refs;
    IrDtype dtype; /* IR_DT_TUPLE for tuples, IR_DT_TOKEN for tokens */
    uint32_t rank;
    int64_t dims[SIM_MAX_RANK];
    int64_t n;     /* element count (arrays) */
    SimElem *data; /* n elements, row-major */
    uint32_t n_elems;
    struct SimValue **elems; /* tuples: n_elems references */
} SimValue;

/* A zeroed value of `shape` (tuples recursively); NULL on allocation failure or rank above
 * SIM_MAX_RANK. */
SimValue *sim_value_new(const IrShape *shape);
SimValue *sim_value_new_array(IrDtype t, const int64_t *dims, uint32_t rank);
SimValue *sim_value_new_tuple(SimValue *const *elems, uint32_t n); /* takes new references */
SimValue *sim_value_ref(SimValue *v);
void sim_value_unref(SimValue *v); /* NULL is fine */
/* Stores `x` into element `i`, rounding (floats) or wrapping (integers) to the value's type. */
void sim_value_set_f64(SimValue *v, int64_t i, double x);
void sim_value_set_i64(SimValue *v, int64_t i, int64_t x);
/* Rounds a double to `t` (round to nearest even, overflow to inf; integers truncate and wrap). */
double sim_round(IrDtype t, double x);
/* Decodes a constant literal (hlo-text.md §7) of `shape`; `{...}` is "literal not available". */
SlStatus sim_literal_parse(const IrShape *shape, SlStr text, SimValue **out, SlError *err);

/* Runs the entry computation of `m` on devices 0..n_devices-1 in lockstep. `args` holds
 * n_devices * n_params borrowed values, device-major; `out` receives n_devices results.
 * Unknown opcodes are SL_ERR_UNSUPPORTED (named); a collective whose groups or participants do
 * not match, or devices that diverge in control flow around a collective, are SL_ERR_INVALID
 * naming the instruction. */
SlStatus sim_run(const IrModule *m, int64_t n_devices, SimValue *const *args, SimValue **out,
                 SlError *err);

/* What a run sees beyond its arguments.
 * Host transfers: `infeed` hands device `dev` the data part of infeed `ins` (a new reference
 * shaped like ins's element 0); `outfeed` receives the data operand of outfeed `ins`
 * (borrowed). Each device calls in its own program order. A callback fails through `err`; the
 * run then fails with that status, naming the instruction. NULL callbacks: unsupported.
 * `manual`: the module is an unpartitioned one run on N devices to give manually partitioned
 * regions their meaning. Each device holds the full value of its manual group (all devices
 * alike outside manual regions); SPMDFullToShardShape gives each device its tile of the
 * operand by the operand's sharding, SPMDShardToFullShape reassembles the tiles of the
 * devices in a manual group by its own sharding, and collectives exchange data as usual. */
typedef struct SimEnv {
    SlStatus (*infeed)(void *user, const IrInstr *ins, int64_t dev, SimValue **out,
                       SlError *err);
    SlStatus (*outfeed)(void *user, const IrInstr *ins, int64_t dev, const SimValue *data,
                        SlError *err);
    void *user;
    bool manual;
    const uint64_t *rng_seed; /* what GetRngSeed returns on every device; NULL: unsupported */
    int64_t max_while_trips;  /* a loop running longer is reported (unsupported); 0: 2^24 */
} SimEnv;

/* sim_run in an environment (NULL: none, as sim_run). */
SlStatus sim_run_env(const IrModule *m, int64_t n_devices, SimValue *const *args,
                     const SimEnv *env, SimValue **out, SlError *err);

/* ---- verify ---- */
typedef struct SimVerifyOptions {
    uint64_t seed;   /* 0 is a valid seed */
    uint32_t trials; /* at least 1 */
    double rtol;     /* < 0: by dtype (f32 1e-4, f16/bf16 2e-2, f64 1e-9) */
    double atol;     /* < 0: by dtype (f32 1e-4, f16/bf16 2e-2, f64 1e-9) */
    int64_t max_while_trips; /* per while loop; 0: 2^24 (the fuzzer asks for far fewer) */
} SimVerifyOptions;

void sim_verify_options_init(SimVerifyOptions *o);

typedef struct SimVerifyReport {
    bool ok;
    uint32_t n_outputs;  /* array leaves of the result compared per trial */
    uint32_t trials_run;
    double max_abs_err;  /* over every trial and output */
    /* first mismatch when !ok */
    uint32_t bad_trial, bad_output;
    int64_t bad_index;   /* row-major element index in the full output */
    int64_t bad_device;  /* the device whose copy differed; -1 when assembled from tiles */
    double want, got, err;
    char detail[SL_ERROR_MSG_BYTES]; /* a one-line description of the failure */
    bool error_in_partitioned; /* an error status came from running `part` (else `orig`) */
} SimVerifyReport;

/* Evaluates `orig` on one device (on n_devices when it has manually partitioned regions: see
 * SimEnv) and `part` (its partitioned form) on n_devices, on seeded random inputs cut by the
 * entry parameter shardings of `orig`, reassembles `part`'s outputs by the root sharding and
 * compares; infeeds get seeded host data cut by their shardings and outfeed data is compared
 * like extra outputs (numbered after the root's). A mismatch, and a simulator failure of
 * `part` (collective mismatch, deadlock, host transfers out of step), is SL_OK with
 * report->ok false; bad modules are SL_ERR_INVALID, and opcodes the evaluator lacks, modules
 * too large to simulate and random numbers SL_ERR_UNSUPPORTED. */
SlStatus sim_verify(const IrModule *orig, const IrModule *part, int64_t n_devices,
                    const SimVerifyOptions *o, SimVerifyReport *report, SlError *err);

#endif
