/* trace_run.h - one run loaded back from a trace database into plain structs, for reports/,
 * viz/ and explain. Owns: the in-memory form of a recorded run. Nothing here refers to the
 * partitioner or to SQLite, so a run recorded anywhere can be reported anywhere.
 * Everything lives in the arena passed to trace_run_load(); cross-references are indices into
 * the run's arrays, TRACE_NONE when absent. Arrays are in recording order (instructions: the
 * input module's, then the output module's, in IR order). */
#ifndef SHARDLENS_TRACE_RUN_H
#define SHARDLENS_TRACE_RUN_H

#include "base/base.h"
#include "trace/trace_db.h"

#define TRACE_NONE UINT32_MAX

typedef enum TracePhase { TRACE_BEFORE, TRACE_AFTER } TracePhase;

typedef struct TraceRunInstr {
    TracePhase phase;
    uint32_t ir_id; /* IrInstr.id in its module */
    const char *computation, *name, *opcode;
    int64_t param_number; /* parameter(N): N; -1 for other opcodes */
    const char *shape;    /* without layout */
    const char *sharding; /* NULL when none */
    int64_t size_bytes;
    const char *op_name, *source_file; /* NULL when absent */
    int64_t source_line;               /* 0 when absent */
    bool is_root;
    uint32_t derived_from; /* 'after': the 'before' instruction */
    uint32_t n_operands;
    uint32_t *operands; /* n_operands indices into TraceRun.instrs */
} TraceRunInstr;

typedef struct TraceRunNumber {
    const char *key;
    double num;
    const char *str; /* non-NULL when the value is a string */
} TraceRunNumber;

/* A handler may record several decisions for one instruction: one per recursion level (the dot
 * engine, recorded outermost first; gather/scatter, recorded innermost first with a "depth"
 * number) and configuration details (the windowed-einsum choice, recorded just before the
 * strategy it belongs to). The reader puts them in one chain, top-level strategy first:
 * ascending "depth" when every decision carries one, else recording order with each
 * windowed-einsum configuration (a "loop_partitions" number, no "partitions") moved after the
 * decision it precedes. */
typedef struct TraceRunDecision {
    uint32_t seq;
    uint32_t instr;                          /* 'before' */
    uint32_t level, chain_length; /* 1-based place in the instruction's chain (1: top level) */
    const char *handler, *strategy, *reason; /* reason may be NULL */
    uint32_t n_alternatives;
    const char **alternatives;
    uint32_t n_numbers;
    TraceRunNumber *numbers;
} TraceRunDecision;

typedef struct TraceRunReshard {
    uint32_t seq;
    uint32_t requester;                   /* 'before' */
    uint32_t value, result;               /* 'after' */
    const char *value_name, *result_name; /* result_name may be NULL */
    const char *from, *to, *method;
} TraceRunReshard;

typedef struct TraceRunCollective {
    uint32_t instr;   /* 'after' */
    const char *kind; /* all-gather, reduce-scatter, all-reduce, ... */
    bool has_channel_id;
    int64_t channel_id;
    int64_t group_size, n_groups;
    const char *shape;
    double bytes;                 /* S of the cost model, one execution */
    int64_t trip_count;           /* -1: unknown */
    int64_t max_trip_count;       /* at most this many (= trip_count when known); -1: unbounded */
    uint32_t source;              /* 'before' */
    const char *cause;            /* may be NULL */
    uint32_t reshard, decision;   /* indices into reshards / decisions */
    double send_bytes;            /* summed over devices, trip count applied (ring model) */
    double max_device_send_bytes; /* the busiest device, trip count applied */
    uint32_t loop;                /* the innermost while that runs it: index into whiles */
    uint32_t *group_offsets;      /* n_groups + 1 offsets into devices */
    int64_t *devices;             /* permute: (source, target) per group */
} TraceRunCollective;

/* A while of the output module and its trip count (a while_loop row). */
typedef struct TraceRunWhile {
    uint32_t instr;          /* 'after': the while */
    uint32_t source;         /* 'before': the input while (a windowed loop: its dot) */
    int64_t trip_count;      /* -1: unknown */
    const char *method;      /* user, backend_config, pattern, partitioner, unknown */
    const char *reason;      /* unknown: why; else how it was found; may be NULL */
    int64_t induction_index; /* -1: none found */
    int64_t executions;      /* runs of the while itself per run of the module; -1: unknown */
    uint32_t outer;          /* the loop around it: index into whiles */
} TraceRunWhile;

typedef struct TraceRunLoop {
    uint32_t dot;  /* 'before' */
    uint32_t loop; /* 'after' */
    const char *loop_name, *variant;
    int64_t iterations, bytes_per_iteration;
} TraceRunLoop;

/* A computation called by an instruction (either phase), one per call site. */
typedef struct TraceRunCall {
    uint32_t instr;          /* the caller */
    const char *role;        /* body, condition, branch_K, to_apply, calls, select, scatter */
    const char *computation; /* the callee, as in TraceRunInstr.computation */
} TraceRunCall;

typedef struct TraceRunWarning {
    uint32_t instr;   /* 'before'; TRACE_NONE: about the whole module */
    const char *kind; /* trace_warn_kind_name() */
    const char *message;
} TraceRunWarning;

/* A sharding propagation set (sharding_origin): indices into instrs ('before'). */
typedef struct TraceRunOrigin {
    uint32_t instr;
    const char *sharding;
    uint32_t source;  /* TRACE_NONE: no annotated source */
    uint32_t *path;   /* n_path instrs, source first, instr last */
    uint32_t n_path;
    const char *direction, *rule, *candidate, *replaced; /* rule..replaced may be NULL */
    int level;        /* -1: outside the fixed point */
} TraceRunOrigin;

typedef struct TraceRunDevice {
    int64_t device;
    double send_bytes, recv_bytes; /* ring model, known trip counts applied (collectives of
                                      unknown count are not in them) */
    uint32_t collectives, unknown_trip_collectives;
} TraceRunDevice;

/* A buffer live at a memory estimate's peak (memory_buffer). */
typedef struct TraceRunMemBuffer {
    uint32_t instr;   /* defines it: index into instrs, in the estimate's phase */
    uint32_t leaf;    /* array leaf of its shape, pre-order */
    int64_t bytes;
    const char *kind; /* parameter, output, temp, nested */
} TraceRunMemBuffer;

/* A memory estimate (memory table): the input on one device, or the output for `devices`. */
typedef struct TraceRunMemory {
    TracePhase phase;
    uint32_t n_devices;
    int64_t *devices; /* 'after': the devices the figures hold for; 'before': none */
    int64_t parameter_bytes, output_bytes, alias_bytes, peak_bytes, peak_temp_bytes,
        max_temp_bytes;
    uint32_t peak_instr; /* index into instrs; TRACE_NONE when absent */
    int64_t peak_position;
    uint32_t n_top;
    TraceRunMemBuffer *top; /* largest first */
    uint32_t n_profile;
    int64_t profile_step; /* positions per profile point */
    int64_t *profile;     /* live bytes over the schedule: point k is the most live at once in
                             positions [k * profile_step, (k + 1) * profile_step) */
} TraceRunMemory;

typedef struct TraceRunOption {
    const char *key;   /* never NULL */
    const char *value; /* NULL when the trace holds none */
} TraceRunOption;

/* The rows of one table about each 'before' instruction i: row[off[i]] .. row[off[i + 1] - 1],
 * indices into that table in recording order. */
typedef struct TraceRunRows {
    uint32_t *off; /* [n_before + 1] */
    uint32_t *row;
} TraceRunRows;

/* What explain reads about a 'before' instruction, found without scanning the run. */
typedef struct TraceRunIndex {
    TraceRunRows decisions;   /* by instr */
    TraceRunRows reshards;    /* by requester */
    TraceRunRows collectives; /* by source, and by the requester of the reshard that caused it */
    TraceRunRows loops;       /* by dot */
    TraceRunRows origins;     /* by instr */
    TraceRunRows warnings;    /* by instr */
} TraceRunIndex;

typedef struct TraceRun {
    int64_t id;
    const char *module, *input_hash, *tool_version, *created_at;
    int64_t num_partitions;
    double duration_ms; /* < 0: not measured */
    TraceRunOption *options;
    uint32_t n_options; /* sorted by key */
    TraceRunInstr *instrs;
    uint32_t n_instrs;
    uint32_t n_before; /* instrs[0, n_before) are 'before', the rest 'after' */
    TraceRunCall *calls;
    uint32_t n_calls; /* by caller in instrs order, then in the caller's attribute order */
    TraceRunDecision *decisions;
    uint32_t n_decisions;
    TraceRunReshard *reshards;
    uint32_t n_reshards;
    TraceRunWhile *whiles;
    uint32_t n_whiles; /* outer loops before inner ones */
    TraceRunCollective *collectives;
    uint32_t n_collectives;
    TraceRunLoop *loops;
    uint32_t n_loops;
    TraceRunWarning *warnings;
    uint32_t n_warnings;
    TraceRunOrigin *origins;
    uint32_t n_origins; /* in recording order; none when the run had no propagation */
    TraceRunDevice *devices;
    uint32_t n_devices; /* by device id */
    TraceRunMemory *memory;
    uint32_t n_memory; /* 'before' first, then the groups of 'after' */
    const TraceRunIndex *index; /* built by trace_run_load; NULL in a run made by hand (explain
                                   then builds one per call), and in a copy of a run whose
                                   row arrays were changed */
} TraceRun;

/* Builds the index of `run`'s rows by 'before' instruction into `arena` (linear in the run);
 * NULL when out of memory. trace_run_load does this once per run. */
const TraceRunIndex *trace_run_index_build(const TraceRun *run, SlArena *arena);

/* Optional parts of a run, for readers that need less than everything: decoding the JSON
 * list columns is most of the load time, and the report needs none of them. */
typedef enum TraceLoadParts {
    TRACE_LOAD_OPERANDS = 1u << 0,         /* TraceRunInstr operands (else n_operands = 0) */
    TRACE_LOAD_DECISION_DETAILS = 1u << 1, /* alternatives and numbers (else none; chains
                                              keep their recording order) */
    TRACE_LOAD_ALL = TRACE_LOAD_OPERANDS | TRACE_LOAD_DECISION_DETAILS,
} TraceLoadParts;

/* Loads run `run_id` (0: the latest run) into `arena`. No such run, or an empty file, is
 * SL_ERR_INVALID. trace_run_load_parts loads the core tables and the `parts` asked for. */
SlStatus trace_run_load(TraceDb *db, int64_t run_id, SlArena *arena, const TraceRun **out,
                        SlError *err);
SlStatus trace_run_load_parts(TraceDb *db, int64_t run_id, unsigned parts, SlArena *arena,
                              const TraceRun **out, SlError *err);
/* The instruction named `name` in `phase`, or NULL. */
const TraceRunInstr *trace_run_find_instr(const TraceRun *run, TracePhase phase, const char *name);
/* Appends a plain-words account of why source instruction `name` was partitioned the way it
 * was: shardings, decision with alternatives and numbers, reshards, collectives with bytes,
 * windowed loop. An output instruction's name explains its source. Unknown names are
 * SL_ERR_INVALID, with the closest names in the message. */
SlStatus trace_explain(const TraceRun *run, const char *name, SlBuf *out, SlError *err);
/* trace_explain of the 'before' instruction instrs[idx], found by index (no name lookup). */
SlStatus trace_explain_instr(const TraceRun *run, uint32_t idx, SlBuf *out, SlError *err);

#endif
