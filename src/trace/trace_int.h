/* trace_int.h - shared inside src/trace only: the TraceDb handle, the embedded schema (built
 * from schema/trace.sql by tools/embed.py) and small SQLite helpers. */
#ifndef SHARDLENS_TRACE_INT_H
#define SHARDLENS_TRACE_INT_H

#include <sqlite3.h>

#include "trace/trace_db.h"

/* Generated: the schema text one line per element, and its PRAGMA user_version. */
extern const int trace_schema_version;
extern const char *const trace_schema_lines[];
extern const unsigned trace_schema_n_lines;

/* Insert statements, prepared once per handle when the first run is written. The inserts of
 * instr and decision rows depend on the lengths of their JSON lists: sqlite_sink.c prepares
 * those per run. */
typedef enum TraceStmt {
    ST_RUN,
    ST_OPTION,
    ST_CALL,
    ST_RESHARD,
    ST_COLLECTIVE,
    ST_GROUP,
    ST_LOOP,
    ST_WHILE,
    ST_WARNING,
    ST_ORIGIN,
    ST_MEMORY,
    ST_MEMORY_BUFFER,
    ST_COUNT
} TraceStmt;

struct TraceDb {
    sqlite3 *sql;
    const char *path; /* the caller's, not a copy: errors point at it (see trace_db_open) */
    TraceDbMode mode;
    bool created; /* APPEND: the file did not exist before this handle opened it */
    int busy_timeout_ms, attempts;
    uint64_t fault_rows; /* tests: fail a run's write after this many rows; 0 = never */
    sqlite3_stmt *stmts[ST_COUNT];

    /* The run being buffered between begin_run and end_run/abort_run (sqlite_sink.c). */
    bool in_run;
    bool events_failed; /* an event could not be buffered (out of memory) */
    const IrModule *in;
    TraceRunInfo info; /* strings copied into `events`; input_text is not kept */
    char input_hash[2 * sizeof(uint64_t) + 1]; /* hex of sl_hash_bytes(input_text) */
    SlArena events;                            /* event strings and arrays; reset per run */
    SlInterner strings; /* event strings, one copy each (in `events`): handlers, strategies,
                           methods and sharding texts repeat for every instruction */
    SlBuf text;         /* scratch for printing a sharding */
    SlVec emits, decisions, reshards, collectives, loops, warnings, origins;
    SlMap last_decision; /* source name (SlSym) -> seq of its latest decision */
    TraceSink sink;
};

/* Converts a SQLite failure into SL_ERR_DB with the connection's message, located at the
 * caller's path (never SQLite's copy of the name, which dies with the connection). */
SlStatus trace_db_fail(TraceDb *db, int rc, const char *what, SlError *err);
/* The file `db` opened has been unlinked or renamed since (a failed run that created it
 * removed it again). */
bool trace_db_was_removed(TraceDb *db);
/* Runs one or more statements without results. */
int trace_db_exec(TraceDb *db, const char *sql);
/* BEGIN IMMEDIATE / COMMIT / ROLLBACK; the busy handler waits for other writers. */
int trace_db_begin_write(TraceDb *db);
int trace_db_commit(TraceDb *db);
void trace_db_rollback(TraceDb *db);
bool trace_db_is_busy(int rc);
/* Where errors about the file are reported: the path the caller opened it with. */
SlSrcLoc trace_db_loc(const TraceDb *db);

#endif
