/* sqlite_sink_int.h - shared by the sqlite sink's files only (sqlite_sink*.c): the buffered
 * events, the writer of one attempt (Wr) and the row writers end_run calls in order.
 * Events are buffered by sqlite_sink.c; sqlite_sink_write.c owns the attempt and the binding
 * helpers; each other file writes the rows of one concern. */
#ifndef SHARDLENS_TRACE_SQLITE_SINK_INT_H
#define SHARDLENS_TRACE_SQLITE_SINK_INT_H

#include "memory/memory.h"
#include "trace/trace_int.h"

/* ---- buffered events ------------------------------------------------------------------ */

/* An instruction named in an event: its id in its module, checked against the name when
 * the rows are written (the name alone is used if they disagree). */
typedef struct Ref {
    SlSym name; /* NULL: no instruction */
    uint32_t id;
} Ref;

typedef struct EvEmit {
    Ref out, source;
} EvEmit;

typedef struct EvDecision {
    uint32_t seq; /* 1-based, in arrival order */
    Ref instr;
    const char *handler, *strategy, *reason;
    const char **alts;
    uint32_t n_alts;
    TraceKV *numbers;
    uint32_t n_numbers;
} EvDecision;

typedef struct EvReshard {
    uint32_t seq;
    Ref requester, value, result;
    const char *from, *to, *method;
} EvReshard;

typedef struct EvCollective {
    Ref instr, source;
    uint32_t reshard_seq, decision_seq; /* 0: none */
    const char *cause;
} EvCollective;

typedef struct EvLoop {
    Ref dot, loop;
    const char *variant;
    int64_t iterations, bytes_per_iteration, true_branch_runs;
} EvLoop;

typedef struct EvWarning {
    Ref source;
    TraceWarnKind kind;
    const char *message;
} EvWarning;

typedef struct EvOrigin {
    Ref instr, source;
    Ref *path; /* n_path refs in the events arena */
    uint32_t n_path;
    int level;
    const char *sharding, *direction, *rule, *candidate, *replaced; /* NULL: none */
} EvOrigin;

/* ---- the writer ----------------------------------------------------------------------- */

enum { BEFORE, AFTER }; /* the phase: the input module, the output module */

typedef struct Wr {
    TraceDb *db;
    int rc;           /* first SQLite failure; SQLITE_OK while all is well */
    bool fault;       /* the failure is an injected one (tests) */
    const char *what; /* what was being written when rc was set */
    uint64_t rows;
    int64_t run_id;
    int64_t next_instr_row; /* the row id the next instr insert takes */
    int64_t instr_rows[2];  /* the first and last instr row of the run; 0: none */
    SlBuf text;             /* scratch for shape and sharding text */
    SlMap list_idx;         /* wr_list_stmt key -> index into list_stmts */
    SlVec list_stmts;       /* sqlite3_stmt *: the inserts with JSON lists, by length */
    SlArena scratch;        /* row-id arrays and device groups; freed after the attempt */
    /* Per phase (BEFORE: the input module, AFTER: the output module), by IrInstr.id: */
    const IrModule *mod[2];
    uint32_t n_ids[2];              /* next_instr_id of the module */
    const IrInstr **instr_by_id[2]; /* NULL for ids not in any computation */
    int64_t *rows_by_id[2];         /* row id, assigned before any row is written */
    SlMap by_name[2];               /* SlSym -> id; built only if an event's id misleads */
    bool has_by_name[2];
    uint32_t *emit_by_id; /* AFTER id -> index + 1 into db->emits */
    uint32_t *coll_by_id; /* AFTER id -> index + 1 into db->collectives */
    SlMap decision_row;   /* decision seq -> row id */
    SlMap reshard_row;    /* reshard seq -> row id */
    SlMap loop_trips;     /* while name -> iterations (windowed loops) */
    SlMap branch_hint;    /* AFTER conditional id -> index + 1 into db->loops (true_branch_runs) */
    SlVec whiles;         /* WhileRow: every while of the output, callers' before callees' */
    uint32_t *comp_loop;  /* AFTER computation id -> index + 1 into whiles of the innermost
                             loop that runs it (its first call site's); 0: in no loop */
    const MemEstimate *mem; /* [BEFORE], [AFTER]: estimated once, before the attempts */
    uint32_t ignored_aliases[2]; /* input_output_alias pairs the estimates ignored */
    SlBuf profile;          /* a memory row's profile text (`text` holds its devices) */
    bool oom;
} Wr;

/* "before" or "after": instr.phase and memory.phase. */
const char *wr_phase_name(int phase);

/* Binding: each is a no-op once w->rc is set, and records the first failure. */
void wr_bind_rc(Wr *w, int rc, const char *what);
void wr_bind_i64(Wr *w, sqlite3_stmt *st, int i, int64_t v);
void wr_bind_f64(Wr *w, sqlite3_stmt *st, int i, double v);
void wr_bind_null(Wr *w, sqlite3_stmt *st, int i);
/* Rows are numbered from 1, so row 0 binds NULL. */
void wr_bind_row(Wr *w, sqlite3_stmt *st, int i, int64_t row);
/* Text that stays alive until the statement is stepped; NULL binds NULL. */
void wr_bind_text(Wr *w, sqlite3_stmt *st, int i, const char *s);
/* A slice; empty binds NULL (metadata fields that are absent). */
void wr_bind_str_or_null(Wr *w, sqlite3_stmt *st, int i, SlStr s);
/* A decision's number: NaN binds NULL, an integral value an INTEGER, anything else a REAL. */
void wr_bind_number(Wr *w, sqlite3_stmt *st, int i, double v);

/* Steps an INSERT, resets it, and returns the new row id (0 on failure). */
int64_t wr_insert_stmt(Wr *w, sqlite3_stmt *st, const char *what);
/* The same for one of the statements prepared per handle (wr_prepare_all). */
int64_t wr_insert(Wr *w, TraceStmt which);
sqlite3_stmt *wr_stmt(Wr *w, TraceStmt which);
/* sl_map_put; out of memory sets w->oom. */
void wr_put(Wr *w, SlMap *m, uint64_t key, uint64_t val);

/* The id of an event's instruction in the phase's module; UINT32_MAX when it is not there. */
uint32_t wr_resolve(Wr *w, int phase, Ref r);
/* The row of an event's instruction, 0 when it is not in the module. */
int64_t wr_row_of(Wr *w, int phase, Ref r);
/* The 'before' row an output instruction derives from; 0: none. */
int64_t wr_source_row(Wr *w, const IrInstr *i);

enum { LIST_INSTR, LIST_DECISION };
/* The INSERT for an instr with `n1` operands, or a decision with `n1` alternatives and `n2`
 * numbers; NULL on failure (w->rc or w->oom is set). Finalized by wr_fini. */
sqlite3_stmt *wr_list_stmt(Wr *w, int kind, uint32_t n1, uint32_t n2);

/* The row writers, in the order wr_write_all calls them (each needs the rows before it). */
void wr_write_module(Wr *w, int phase);                /* sqlite_sink_module.c */
void wr_write_decisions(Wr *w);                        /* sqlite_sink_rows.c */
void wr_write_reshards(Wr *w);                         /* sqlite_sink_rows.c */
void wr_write_loops(Wr *w);                            /* sqlite_sink_collectives.c */
void wr_write_collectives(Wr *w, const IrModule *out); /* sqlite_sink_collectives.c */
void wr_write_warnings(Wr *w);                         /* sqlite_sink_rows.c */
void wr_write_origins(Wr *w);                          /* sqlite_sink_rows.c */
void wr_write_memory(Wr *w);                           /* sqlite_sink_memory.c */

/* One attempt (sqlite_sink_write.c): init, every row of the run, fini. */
void wr_init(Wr *w, TraceDb *db);
void wr_write_all(Wr *w, const IrModule *out, double duration_ms);
void wr_fini(Wr *w);
/* Prepares the per-handle inserts once, and clears their bindings. */
SlStatus wr_prepare_all(TraceDb *db, SlError *err);

#endif
