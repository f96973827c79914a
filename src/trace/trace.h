/* trace.h - the trace sink: the only channel from the partitioner to anything that records
 * what it did. Owns: the event vocabulary. The partitioner includes this header and nothing
 * about SQLite; sinks (null, memory, sqlite) implement the callbacks. Events arrive in the
 * order the partitioner makes its choices, which is deterministic for a given input.
 * Pointers in events are valid only during the callback (copy what you keep). */
#ifndef SHARDLENS_TRACE_H
#define SHARDLENS_TRACE_H

#include "base/base.h"
#include "ir/ir.h"
#include "sharding/shd.h"

/* A number or a string compared by a decision (e.g. {"lhs_bytes", 4096} or
 * {"threshold_mib", 256}); exactly one of `str` (non-NULL) or `num` is meaningful. */
typedef struct TraceKV {
    const char *key;
    double num;
    const char *str;
} TraceKV;

typedef struct TraceDecision {
    const IrInstr *instr;      /* the source instruction being partitioned */
    const char *handler;       /* "dot", "reduce", "default", ... */
    const char *strategy;      /* the chosen strategy, e.g. "group_on_contracting" */
    const char *reason;        /* one plain sentence: why this one */
    const char *const *alternatives; /* strategies considered and not taken */
    uint32_t n_alternatives;
    const TraceKV *numbers;    /* the numbers compared */
    uint32_t n_numbers;
} TraceDecision;

typedef struct TraceReshard {
    const IrInstr *requester;  /* the source instruction whose handler asked */
    const IrInstr *value;      /* the local (emitted) instruction being resharded */
    const ShdSharding *from, *to;
    const char *method;        /* "all-gather", "all-to-all", "collective-permute",
                                  "dynamic-slice", "all-reduce", "copy", "cache-hit", ... */
    const IrInstr *result;     /* the emitted result */
    uint32_t seq;              /* 1-based number of this reshard in the run */
} TraceReshard;

typedef struct TraceCollective {
    const IrInstr *instr;      /* the emitted collective */
    const IrInstr *source;     /* the source instruction it derives from */
    uint32_t reshard_seq;      /* the reshard that caused it, 0 if none */
    const char *cause;         /* "reshard", "reduce", "dot", "windowed-einsum", ... */
} TraceCollective;

typedef struct TraceWindowedLoop {
    const IrInstr *dot;        /* the source dot/convolution */
    const IrInstr *loop;       /* the emitted while */
    const char *variant;       /* "all-gather", "reduce-scatter", "bidirectional", ... */
    int64_t iterations;
    int64_t bytes_per_iteration; /* bytes each device permutes per iteration */
    /* How often, per run of the loop, the true branch of the conditional in its body runs
     * (the plain variants' "permute unless this was the last iteration": iterations - 1),
     * so that its collectives get an exact trip count; its false branch runs the remaining
     * iterations. 0: not stated, or no such conditional (the branches then get only an upper
     * bound, gspmd.md H.4). Ignored unless the body holds exactly one two-way conditional. */
    int64_t true_branch_runs;
} TraceWindowedLoop;

/* What a warning is about (trace `warning.kind`, summary.json `warnings[].kind`). */
typedef enum TraceWarnKind {
    TRACE_WARN_UNANNOTATED,    /* "unannotated": instructions without a sharding */
    TRACE_WARN_PARTITIONED,    /* "already-partitioned": the input looks partitioned already */
    TRACE_WARN_CUSTOM_CALL,    /* "custom-call-fallback": a custom call replicated by fallback */
    TRACE_WARN_FULL_REMAT,     /* "full-remat": involuntary full rematerialization */
    TRACE_WARN_NO_HANDLER,     /* "no-handler": an opcode without a handler */
    TRACE_WARN_OTHER,          /* "other": any other fallback */
    TRACE_WARN_IGNORED_ALIAS,  /* "ignored-alias": an input_output_alias pair the memory
                                  estimate ignores (written by the trace writer) */
    TRACE_WARN_KIND_COUNT
} TraceWarnKind;
const char *trace_warn_kind_name(TraceWarnKind kind);

/* Where sharding propagation (src/propagate, before partitioning) got one sharding it set on
 * an input instruction: the annotated source, the instructions it passed through, the
 * direction, aggressiveness level and rule, and the two candidates when it merged. */
typedef struct TraceOrigin {
    const IrInstr *instr;         /* an instruction of the partitioner's input */
    const ShdSharding *sharding;  /* the sharding propagation set */
    const IrInstr *source;        /* the annotated instruction the chain starts at; NULL: none */
    const IrInstr *const *path;   /* source first, then each hop, `instr` last */
    uint32_t n_path;
    const char *direction;        /* "forward", "backward", "shard group", "computation", ... */
    int level;                    /* aggressiveness 0..3; -1: outside the fixed point */
    const char *rule;             /* e.g. "elementwise", "dot lhs (priority)" */
    const ShdSharding *candidate; /* what the last hop proposed; NULL when it was set as is */
    const ShdSharding *replaced;  /* the sharding it was merged with; NULL: none */
} TraceOrigin;

typedef struct TraceSink TraceSink;
typedef struct TraceSinkOps {
    void (*emit)(TraceSink *s, const IrInstr *out, const IrInstr *source);
    void (*decision)(TraceSink *s, const TraceDecision *d);
    void (*reshard)(TraceSink *s, const TraceReshard *r);
    void (*collective)(TraceSink *s, const TraceCollective *c);
    void (*windowed_loop)(TraceSink *s, const TraceWindowedLoop *w);
    /* source: the input instruction it is about, NULL for the whole module */
    void (*warning)(TraceSink *s, const IrInstr *source, TraceWarnKind kind, const char *message);
    void (*origin)(TraceSink *s, const TraceOrigin *o);
} TraceSinkOps;

struct TraceSink {
    const TraceSinkOps *ops; /* any callback may be NULL */
    void *self;
};

/* A sink that drops everything; stands in when tracing is off, so callers never test NULL. */
TraceSink *trace_null_sink(void);

/* A sink that counts events and keeps one line of text per event, for tests and debugging:
 *   emit OUT <- SOURCE
 *   decision SOURCE HANDLER STRATEGY [alts=A,B]
 *   reshard #SEQ REQUESTER VALUE FROM -> TO METHOD RESULT
 *   collective OUT SOURCE cause=CAUSE reshard=SEQ
 *   windowed-loop DOT LOOP VARIANT ITERATIONS BYTES [true-branch=RUNS]
 *   warning SOURCE KIND MESSAGE
 *   origin INSTR <- SOURCE DIRECTION level=L path=N
 * Names print as "-" when absent. */
typedef struct TraceMemSink {
    TraceSink sink; /* pass &m->sink to the partitioner */
    uint32_t n_emits, n_decisions, n_reshards, n_collectives, n_windowed_loops, n_warnings,
        n_origins;
    SlBuf log;
} TraceMemSink;
void trace_mem_sink_init(TraceMemSink *m);
void trace_mem_sink_fini(TraceMemSink *m);

#endif
