/* trace_db.h - the trace database (schema/trace.sql): recording runs through a TraceSink, and
 * opening a file for the reader (trace_run.h). Owns: SQLite; nothing outside src/trace sees it.
 * A run is written in one transaction when it ends, so it is wholly in the file or not at all,
 * and the write lock is held only for that moment: several processes may append to one file.
 *
 * Recording a run:
 *     TraceDb *db; TraceSink *sink;
 *     trace_db_open("t.db", TRACE_DB_APPEND, &db, &err);
 *     trace_db_begin_run(db, in, &info, &sink, &err);         // sink: give it to spmd_partition
 *     st = spmd_partition(in, &opts, sink, &out_arena, &out, &err);
 *     if (st == SL_OK) st = trace_db_end_run(db, out, duration_ms, &run_id, &err);
 *     else trace_db_abort_run(db);                            // nothing of the run is written
 *     trace_db_close(db);
 * `in` (and the interner holding its names) must stay alive until end_run or abort_run: the
 * 'before' rows are written from it then. The output module must intern its names in the
 * input's interner (spmd_partition does), since events are matched to rows by name. */
#ifndef SHARDLENS_TRACE_DB_H
#define SHARDLENS_TRACE_DB_H

#include "base/base.h"
#include "ir/ir.h"
#include "trace/trace.h"

typedef struct TraceDb TraceDb;

typedef enum TraceDbMode {
    TRACE_DB_READ,   /* the file must exist and hold our schema version; read-only */
    TRACE_DB_APPEND, /* creates the file and the schema when missing; runs are appended */
} TraceDbMode;

/* Opens `path`. A file whose PRAGMA user_version is not ours is SL_ERR_DB naming both
 * versions; a missing file in TRACE_DB_READ mode is SL_ERR_IO. `path` is not copied: every
 * error of this handle (err.loc.path) points at it, so it must outlive the handle and those
 * errors (an argv string does). */
SlStatus trace_db_open(const char *path, TraceDbMode mode, TraceDb **out, SlError *err);
void trace_db_close(TraceDb *db);  /* aborts a run still open; NULL is fine */
int trace_db_schema_version(void); /* the version this binary writes and reads */

/* A trip count the user gives for a while instruction of the input (--trip-count NAME=N). */
typedef struct TraceTripCount {
    const char *name; /* the input while, without '%' */
    int64_t count;    /* >= 0 */
} TraceTripCount;

/* What the run row records besides the module. Strings are copied. */
typedef struct TraceRunInfo {
    const char *tool_version; /* e.g. "0.1.0" */
    const char *created_at;   /* caller's clock, ISO 8601 (the library reads no clock) */
    SlStr input_text;         /* the HLO text as read; hashed into run.input_hash */
    SlStr options;            /* "key=value" lines as spmd_options_print() writes them */
    int64_t num_partitions;   /* the effective device count N (> 0) */
    /* Counts that win over every analysis for the output loops derived from these input
     * whiles (copied; may be NULL). Names that are no while of the input are ignored: the
     * caller checks them. */
    const TraceTripCount *trip_counts;
    uint32_t n_trip_counts;
} TraceRunInfo;

/* Starts buffering a run of the partitioner over `in`; `*sink` is valid until end/abort. */
SlStatus trace_db_begin_run(TraceDb *db, const IrModule *in, const TraceRunInfo *info,
                            TraceSink **sink, SlError *err);
/* Writes the run: run and options, 'before' rows from `in`, 'after' rows, edges and calls from
 * `out`, then every buffered event, collectives (one row per collective instruction of `out`,
 * with groups and trip counts) and warnings, in one transaction, retried while another
 * process holds the lock. On failure nothing of the run is in the file. `duration_ms` < 0:
 * not measured. `run_id` may be NULL. */
SlStatus trace_db_end_run(TraceDb *db, const IrModule *out, double duration_ms, int64_t *run_id,
                          SlError *err);
/* Drops the buffered run (the partitioner failed). */
void trace_db_abort_run(TraceDb *db);

/* Lock waits: each attempt waits up to `busy_timeout_ms` for the lock, and a run is retried
 * `attempts` times (defaults: 10000 ms, 30 attempts). */
void trace_db_set_busy(TraceDb *db, int busy_timeout_ms, int attempts);
/* Tests only: the write of the next run fails after `rows` rows (0 = never). */
void trace_db_inject_fault(TraceDb *db, uint64_t rows);

#endif
