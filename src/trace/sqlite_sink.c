/* sqlite_sink.c - recording one partitioner run into the trace database.
 * Owns: the TraceSink that buffers events while the partitioner runs, and the writer that turns
 * the input module, the output module and the buffered events into rows at end_run.
 * Does not own: the schema (schema/trace.sql), opening files (trace_db.c), reading (reader.c).
 * Invariants: events are copied when they arrive (their pointers die with the callback) and
 * refer to instructions by interned name; a run is written in one IMMEDIATE transaction that
 * is retried as a whole when another writer holds the lock, so a run is in the file entirely
 * or not at all and the lock is held only while rows are inserted. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "sharding/shd.h"
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

static TraceDb *
db_of(TraceSink *s)
{
    return s->self;
}

static Ref
ref_of(const IrInstr *i)
{
    Ref r = {i ? i->name : NULL, i ? i->id : UINT32_MAX};
    return r;
}

/* The run's copy of an event string: one per distinct text. */
static const char *
dup(TraceDb *db, const char *s)
{
    if (!s)
        return NULL;
    SlSym k = sl_intern_cstr(&db->strings, s);
    if (!k)
        db->events_failed = true;
    return k ? sl_sym_cstr(k) : "";
}

static const char *
sharding_text(TraceDb *db, const ShdSharding *s)
{
    if (!s)
        return "{replicated}";
    sl_buf_clear(&db->text);
    shd_print(s, &db->text);
    SlSym k = db->text.failed ? NULL : sl_intern(&db->strings, sl_buf_str(&db->text));
    if (!k)
        db->events_failed = true;
    return k ? sl_sym_cstr(k) : "";
}

#define PUSH(db, vec, T, x)                                                                        \
    do {                                                                                           \
        if (!SL_VEC_PUSH(&(db)->vec, T, x))                                                        \
            (db)->events_failed = true;                                                            \
    } while (0)

/* Kept only when the output's own link to its source says otherwise (source_row reads the
 * link first): one event per emitted instruction was a tenth of a traced run's memory. */
static void
on_emit(TraceSink *s, const IrInstr *out, const IrInstr *source)
{
    TraceDb *db = db_of(s);
    if (out && out->derived_from == source)
        return;
    EvEmit e = {ref_of(out), ref_of(source)};
    PUSH(db, emits, EvEmit, e);
}

static void
on_decision(TraceSink *s, const TraceDecision *d)
{
    TraceDb *db = db_of(s);
    EvDecision e = {(uint32_t)db->decisions.len + 1,
                    ref_of(d->instr),
                    dup(db, d->handler),
                    dup(db, d->strategy),
                    dup(db, d->reason),
                    NULL,
                    0,
                    NULL,
                    0};
    if (d->n_alternatives) {
        e.alts = SL_NEW_ARRAY(&db->events, const char *, d->n_alternatives);
        if (e.alts) {
            e.n_alts = d->n_alternatives;
            for (uint32_t i = 0; i < d->n_alternatives; i++)
                e.alts[i] = dup(db, d->alternatives[i]);
        }
    }
    if (d->n_numbers) {
        e.numbers = SL_NEW_ARRAY(&db->events, TraceKV, d->n_numbers);
        if (e.numbers) {
            e.n_numbers = d->n_numbers;
            for (uint32_t i = 0; i < d->n_numbers; i++) {
                e.numbers[i].key = dup(db, d->numbers[i].key);
                e.numbers[i].num = d->numbers[i].num;
                e.numbers[i].str = dup(db, d->numbers[i].str);
            }
        }
    }
    if ((d->n_alternatives && !e.alts) || (d->n_numbers && !e.numbers))
        db->events_failed = true;
    if (e.instr.name && !sl_map_put(&db->last_decision, SL_MAP_KEY(e.instr.name), e.seq))
        db->events_failed = true;
    PUSH(db, decisions, EvDecision, e);
}

static void
on_reshard(TraceSink *s, const TraceReshard *r)
{
    TraceDb *db = db_of(s);
    EvReshard e = {r->seq,
                   ref_of(r->requester),
                   ref_of(r->value),
                   ref_of(r->result),
                   sharding_text(db, r->from),
                   sharding_text(db, r->to),
                   dup(db, r->method ? r->method : "unknown")};
    PUSH(db, reshards, EvReshard, e);
}

static void
on_collective(TraceSink *s, const TraceCollective *c)
{
    TraceDb *db = db_of(s);
    EvCollective e = {ref_of(c->instr), ref_of(c->source), c->reshard_seq, 0, dup(db, c->cause)};
    uint64_t seq = 0;
    if (e.source.name && sl_map_get(&db->last_decision, SL_MAP_KEY(e.source.name), &seq))
        e.decision_seq = (uint32_t)seq;
    PUSH(db, collectives, EvCollective, e);
}

static void
on_windowed_loop(TraceSink *s, const TraceWindowedLoop *w)
{
    TraceDb *db = db_of(s);
    EvLoop e = {
        ref_of(w->dot), ref_of(w->loop),        dup(db, w->variant ? w->variant : "unknown"),
        w->iterations,  w->bytes_per_iteration, w->true_branch_runs};
    PUSH(db, loops, EvLoop, e);
}

static void
on_warning(TraceSink *s, const IrInstr *source, TraceWarnKind kind, const char *message)
{
    TraceDb *db = db_of(s);
    EvWarning e = {ref_of(source), kind, dup(db, message ? message : "")};
    PUSH(db, warnings, EvWarning, e);
}

static void
on_origin(TraceSink *s, const TraceOrigin *o)
{
    TraceDb *db = db_of(s);
    EvOrigin e = {ref_of(o->instr),
                  ref_of(o->source),
                  o->n_path ? SL_NEW_ARRAY(&db->events, Ref, o->n_path) : NULL,
                  o->n_path,
                  o->level,
                  sharding_text(db, o->sharding),
                  dup(db, o->direction ? o->direction : "unknown"),
                  dup(db, o->rule),
                  o->candidate ? sharding_text(db, o->candidate) : NULL,
                  o->replaced ? sharding_text(db, o->replaced) : NULL};
    if (o->n_path && !e.path)
        db->events_failed = true;
    for (uint32_t k = 0; e.path && k < o->n_path; k++)
        e.path[k] = ref_of(o->path[k]);
    PUSH(db, origins, EvOrigin, e);
}

static const TraceSinkOps k_db_ops = {on_emit,       on_decision,      on_reshard,
                                      on_collective, on_windowed_loop, on_warning,
                                      on_origin};

static void
clear_run(TraceDb *db)
{
    sl_vec_fini(&db->emits);
    sl_vec_fini(&db->decisions);
    sl_vec_fini(&db->reshards);
    sl_vec_fini(&db->collectives);
    sl_vec_fini(&db->loops);
    sl_vec_fini(&db->warnings);
    sl_vec_fini(&db->origins);
    sl_map_fini(&db->last_decision);
    sl_map_init(&db->last_decision);
    sl_interner_fini(&db->strings);
    sl_arena_fini(&db->events);
    sl_arena_init(&db->events);
    sl_interner_init(&db->strings, &db->events);
    memset(&db->info, 0, sizeof(db->info));
    db->in = NULL;
    db->in_run = false;
    db->events_failed = false;
}

void
trace_db_abort_run(TraceDb *db)
{
    if (db && db->in_run)
        clear_run(db);
}

SlStatus
trace_db_begin_run(TraceDb *db, const IrModule *in, const TraceRunInfo *info, TraceSink **sink,
                   SlError *err)
{
    SlSrcLoc loc = trace_db_loc(db);
    *sink = NULL;
    if (db->mode != TRACE_DB_APPEND)
        return sl_fail(err, SL_ERR_INVALID, loc, "trace database opened read-only");
    if (SL_NEVER(db->in_run))
        return sl_fail(err, SL_ERR_INTERNAL, loc, "a trace run is already open");
    clear_run(db);
    db->in_run = true;
    db->in = in;
    db->info.tool_version = dup(db, info->tool_version ? info->tool_version : "");
    db->info.created_at = dup(db, info->created_at ? info->created_at : "");
    db->info.num_partitions = info->num_partitions;
    snprintf(db->input_hash, sizeof(db->input_hash), "%016llx",
             (unsigned long long)sl_hash_bytes(info->input_text.ptr, info->input_text.len));
    const char *opts = info->options.len
                           ? sl_arena_strndup(&db->events, info->options.ptr, info->options.len)
                           : "";
    db->info.options = sl_str(opts);
    TraceTripCount *tc = NULL;
    if (info->n_trip_counts && (tc = SL_NEW_ARRAY(&db->events, TraceTripCount,
                                                  info->n_trip_counts)) != NULL) {
        for (uint32_t k = 0; k < info->n_trip_counts; k++)
            tc[k] = (TraceTripCount){dup(db, info->trip_counts[k].name),
                                     info->trip_counts[k].count};
        db->info.trip_counts = tc;
        db->info.n_trip_counts = info->n_trip_counts;
    } else if (info->n_trip_counts) {
        db->events_failed = true;
    }
    if (!opts || db->events_failed) {
        clear_run(db);
        return sl_fail(err, SL_ERR_NOMEM, loc, "out of memory");
    }
    db->sink.ops = &k_db_ops;
    db->sink.self = db;
    *sink = &db->sink;
    return SL_OK;
}

/* ---- the writer ----------------------------------------------------------------------- */

static const char *const k_insert_sql[ST_COUNT] = {
    [ST_RUN] = "INSERT INTO run(module, input_hash, num_partitions, tool_version, created_at,"
               " duration_ms, first_instr, last_instr) VALUES (?,?,?,?,?,?,?,?)",
    [ST_OPTION] = "INSERT OR REPLACE INTO run_option(run_id, key, value) VALUES (?,?,?)",
    [ST_CALL] = "INSERT INTO called_computation(run_id, instr, idx, role, computation)"
                " VALUES (?,?,?,?,?)",
    [ST_RESHARD] = "INSERT INTO reshard(run_id, seq, requester, value, value_name, from_sharding,"
                   " to_sharding, method, result, result_name) VALUES (?,?,?,?,?,?,?,?,?,?)",
    [ST_COLLECTIVE] = "INSERT INTO collective(run_id, instr, kind, channel_id, group_size,"
                      " n_groups, shape, bytes, trip_count, source, cause, reshard_id,"
                      " decision_id, max_trip_count, loop)"
                      " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [ST_GROUP] = "INSERT INTO collective_group(collective_id, group_idx, position, device, size)"
                 " VALUES (?,?,?,?,?)",
    [ST_LOOP] = "INSERT INTO windowed_loop(run_id, dot, loop, loop_name, variant, iterations,"
                " bytes_per_iteration) VALUES (?,?,?,?,?,?,?)",
    [ST_WHILE] = "INSERT INTO while_loop(run_id, instr, source, trip_count, method, reason,"
                 " induction_index, executions, outer_loop) VALUES (?,?,?,?,?,?,?,?,?)",
    [ST_WARNING] = "INSERT INTO warning(run_id, instr, kind, message) VALUES (?,?,?,?)",
    [ST_ORIGIN] = "INSERT INTO sharding_origin(run_id, instr, sharding, source, path, direction,"
                  " level, rule, candidate, replaced) VALUES (?,?,?,?,?,?,?,?,?,?)",
};

/* The inserts with a JSON list column, up to it; list_stmt completes them for a length. */
static const char k_instr_sql[] =
    "INSERT INTO instr(id, run_id, phase, ir_id, computation, is_root, name, opcode, shape,"
    " sharding, size_bytes, op_name, source_file, source_line, derived_from, param_number,"
    " operands) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,";
static const char k_decision_sql[] =
    "INSERT INTO decision(run_id, seq, instr, handler, strategy, reason, alternatives, numbers)"
    " VALUES (?,?,?,?,?,?,";

static const char *const k_phase[] = {"before", "after"};
enum { BEFORE, AFTER };

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
    SlMap list_idx;         /* list_stmt key -> index into list_stmts */
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
    bool oom;
} Wr;

static void
bind_rc(Wr *w, int rc, const char *what)
{
    if (rc != SQLITE_OK && w->rc == SQLITE_OK) {
        w->rc = rc;
        w->what = what;
    }
}

static void
bind_i64(Wr *w, sqlite3_stmt *st, int i, int64_t v)
{
    if (w->rc == SQLITE_OK)
        bind_rc(w, sqlite3_bind_int64(st, i, v), "binding a value");
}

static void
bind_f64(Wr *w, sqlite3_stmt *st, int i, double v)
{
    if (w->rc == SQLITE_OK)
        bind_rc(w, sqlite3_bind_double(st, i, v), "binding a value");
}

static void
bind_null(Wr *w, sqlite3_stmt *st, int i)
{
    if (w->rc == SQLITE_OK)
        bind_rc(w, sqlite3_bind_null(st, i), "binding a value");
}

/* Rows are numbered from 1, so row 0 binds NULL. */
static void
bind_row(Wr *w, sqlite3_stmt *st, int i, int64_t row)
{
    if (row > 0)
        bind_i64(w, st, i, row);
    else
        bind_null(w, st, i);
}

/* Text that stays alive until the statement is stepped; NULL binds NULL. */
static void
bind_text(Wr *w, sqlite3_stmt *st, int i, const char *s)
{
    if (!s)
        bind_null(w, st, i);
    else if (w->rc == SQLITE_OK)
        bind_rc(w, sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC), "binding a value");
}

/* A slice; empty binds NULL (metadata fields that are absent). */
static void
bind_str_or_null(Wr *w, sqlite3_stmt *st, int i, SlStr s)
{
    if (!s.len)
        bind_null(w, st, i);
    else if (w->rc == SQLITE_OK)
        bind_rc(w, sqlite3_bind_text(st, i, s.ptr, (int)s.len, SQLITE_STATIC), "binding a value");
}

/* Steps an INSERT, resets it for the next row, and returns the new row id (0 on failure).
 * `what` names it in an error. */
static int64_t
insert_stmt(Wr *w, sqlite3_stmt *st, const char *what)
{
    int64_t row = 0;
    if (w->rc == SQLITE_OK) {
        if (w->db->fault_rows && ++w->rows >= w->db->fault_rows) {
            w->rc = SQLITE_ABORT;
            w->fault = true;
            w->what = "injected fault";
        } else {
            int rc = sqlite3_step(st);
            if (rc == SQLITE_DONE)
                row = sqlite3_last_insert_rowid(w->db->sql);
            else
                bind_rc(w, rc, what);
        }
    }
    /* After a failed step, reset returns the same error, already recorded. Bindings are
     * cleared even then: text is bound SQLITE_STATIC, from buffers the attempt frees. */
    (void)sqlite3_reset(st);
    int rc = sqlite3_clear_bindings(st);
    if (w->rc == SQLITE_OK)
        bind_rc(w, rc, "clearing bindings");
    return row;
}

static int64_t
insert(Wr *w, TraceStmt which)
{
    return insert_stmt(w, w->db->stmts[which], k_insert_sql[which]);
}

static sqlite3_stmt *
stmt(Wr *w, TraceStmt which)
{
    return w->db->stmts[which];
}

static void
put(Wr *w, SlMap *m, uint64_t key, uint64_t val)
{
    if (!sl_map_put(m, key, val))
        w->oom = true;
}

/* The id an event's instruction has in the phase's module: its own id when the names agree,
 * else the id of the instruction with its name (a map built on first need), else
 * UINT32_MAX. */
static uint32_t
resolve(Wr *w, int phase, Ref r)
{
    if (!r.name)
        return UINT32_MAX;
    if (r.id < w->n_ids[phase] && w->instr_by_id[phase][r.id] &&
        w->instr_by_id[phase][r.id]->name == r.name)
        return r.id;
    if (!w->has_by_name[phase]) {
        w->has_by_name[phase] = true;
        for (uint32_t id = 0; id < w->n_ids[phase]; id++)
            if (w->instr_by_id[phase][id] && w->instr_by_id[phase][id]->name)
                put(w, &w->by_name[phase], SL_MAP_KEY(w->instr_by_id[phase][id]->name), id);
    }
    uint64_t id = 0;
    return sl_map_get(&w->by_name[phase], SL_MAP_KEY(r.name), &id) ? (uint32_t)id : UINT32_MAX;
}

/* The row of an event's instruction, 0 when it is not in the module. */
static int64_t
row_of(Wr *w, int phase, Ref r)
{
    uint32_t id = resolve(w, phase, r);
    return id == UINT32_MAX ? 0 : w->rows_by_id[phase][id];
}

/* Fills the id tables of one module; rows come later. */
static void
index_module(Wr *w, int phase, const IrModule *m)
{
    uint32_t n = m->next_instr_id;
    w->mod[phase] = m;
    w->instr_by_id[phase] = SL_NEW_ARRAY(&w->scratch, const IrInstr *, (size_t)n + 1);
    w->rows_by_id[phase] = SL_NEW_ARRAY(&w->scratch, int64_t, (size_t)n + 1);
    if (!w->instr_by_id[phase] || !w->rows_by_id[phase]) {
        w->oom = true;
        return;
    }
    w->n_ids[phase] = n;
    for (uint32_t c = 0; c < m->n_comps; c++)
        for (uint32_t k = 0; k < m->comps[c]->n_instrs; k++) {
            const IrInstr *i = m->comps[c]->instrs[k];
            if (i->id < n)
                w->instr_by_id[phase][i->id] = i;
        }
}

/* Emit and collective events by output id, so writing an instruction finds them directly. */
static void
index_events(Wr *w)
{
    uint32_t n = w->n_ids[AFTER];
    w->emit_by_id = SL_NEW_ARRAY(&w->scratch, uint32_t, (size_t)n + 1);
    w->coll_by_id = SL_NEW_ARRAY(&w->scratch, uint32_t, (size_t)n + 1);
    if (!w->emit_by_id || !w->coll_by_id) {
        w->oom = true;
        return;
    }
    const EvEmit *em = w->db->emits.data;
    for (size_t k = 0; k < w->db->emits.len; k++) {
        uint32_t id = resolve(w, AFTER, em[k].out);
        if (id != UINT32_MAX)
            w->emit_by_id[id] = (uint32_t)k + 1;
    }
    const EvCollective *co = w->db->collectives.data;
    for (size_t k = 0; k < w->db->collectives.len; k++) {
        uint32_t id = resolve(w, AFTER, co[k].instr);
        if (id != UINT32_MAX)
            w->coll_by_id[id] = (uint32_t)k + 1;
    }
}

/* Gives both modules' instructions their row ids, in the order write_module inserts them, from
 * just past the largest id in the file (the transaction holds the write lock, so no other
 * writer takes them): a row can then name operands that are inserted after it. */
static void
assign_rows(Wr *w)
{
    int64_t last = 0;
    if (w->rc == SQLITE_OK) {
        sqlite3_stmt *st = NULL;
        int rc = sqlite3_prepare_v2(w->db->sql, "SELECT max(id) FROM instr", -1, &st, NULL);
        if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
            last = sqlite3_column_int64(st, 0);
            rc = SQLITE_OK;
        }
        int rc2 = sqlite3_finalize(st);
        bind_rc(w, rc != SQLITE_OK ? rc : rc2, "finding the next instr id");
    }
    w->next_instr_row = last + 1;
    int64_t row = last;
    for (int phase = BEFORE; phase <= AFTER; phase++) {
        const IrModule *m = w->mod[phase];
        if (!m || !w->rows_by_id[phase])
            continue;
        for (uint32_t c = 0; c < m->n_comps; c++)
            for (uint32_t k = 0; k < m->comps[c]->n_instrs; k++) {
                uint32_t id = m->comps[c]->instrs[k]->id;
                row++;
                if (id < w->n_ids[phase])
                    w->rows_by_id[phase][id] = row;
            }
    }
    if (row > last) {
        w->instr_rows[0] = last + 1;
        w->instr_rows[1] = row;
    }
}

static void
write_run(Wr *w, const IrModule *in, double duration_ms)
{
    const TraceRunInfo *info = &w->db->info;
    sqlite3_stmt *st = stmt(w, ST_RUN);
    bind_text(w, st, 1, sl_sym_cstr(in->name));
    bind_text(w, st, 2, w->db->input_hash);
    bind_i64(w, st, 3, info->num_partitions);
    bind_text(w, st, 4, info->tool_version);
    bind_text(w, st, 5, info->created_at);
    if (duration_ms >= 0)
        bind_f64(w, st, 6, duration_ms);
    else
        bind_null(w, st, 6);
    bind_row(w, st, 7, w->instr_rows[0]);
    bind_row(w, st, 8, w->instr_rows[1]);
    w->run_id = insert(w, ST_RUN);

    /* Options: "key=value" lines; a line without '=' is a key with an empty value. */
    st = stmt(w, ST_OPTION);
    const char *p = info->options.ptr, *end = p + info->options.len;
    while (p < end && w->rc == SQLITE_OK) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        const char *eq = memchr(p, '=', (size_t)(eol - p));
        const char *vend = eol > p && eol[-1] == '\r' ? eol - 1 : eol;
        if (vend > p) {
            const char *kend = eq ? eq : vend;
            const char *val = eq ? eq + 1 : vend;
            bind_i64(w, st, 1, w->run_id);
            if (w->rc == SQLITE_OK)
                bind_rc(w, sqlite3_bind_text(st, 2, p, (int)(kend - p), SQLITE_STATIC), "key");
            if (w->rc == SQLITE_OK)
                bind_rc(w, sqlite3_bind_text(st, 3, val, (int)(vend - val), SQLITE_STATIC),
                        "value");
            (void)insert(w, ST_OPTION);
        }
        p = eol + 1;
    }
}

/* The 'before' row an output instruction derives from: the IR link when it points into the
 * input module, else the emit event's source. */
static int64_t
source_row(Wr *w, const IrInstr *i)
{
    const IrInstr *d = i->derived_from;
    if (d && d->id < w->n_ids[BEFORE] && w->instr_by_id[BEFORE][d->id] == d)
        return w->rows_by_id[BEFORE][d->id];
    uint32_t ev = i->id < w->n_ids[AFTER] ? w->emit_by_id[i->id] : 0;
    if (ev)
        return row_of(w, BEFORE, ((const EvEmit *)w->db->emits.data)[ev - 1].source);
    return 0;
}

/* ---- JSON lists (schema/trace.sql: instr.operands, decision.alternatives, .numbers) ----
 * SQLite builds them: each element is a bound parameter, and the INSERT wraps them in
 * json_array(...) or json_object(...), which quote and escape strings and spell numbers. The
 * SQL therefore depends on the lengths: one statement per length (per pair of lengths for a
 * decision), prepared when first needed and kept until the attempt ends (list_stmt). */

enum { LIST_INSTR, LIST_DECISION };

/* The JSON array of parameters ?p.. (`n` of them; *p is advanced past them); NULL when n is 0
 * (the schema's "none"). json_array takes at most `max_args` arguments: past that, nested
 * json_insert(..., '$[#]', x, ...) calls append the rest. */
static void
put_array_sql(SlBuf *sql, uint32_t n, int *p, uint32_t max_args)
{
    if (!n) {
        sl_buf_puts(sql, "NULL");
        return;
    }
    uint32_t head = n < max_args ? n : max_args;
    uint32_t per = (max_args - 1) / 2; /* json_insert(json, path, value, path, value, ...) */
    uint32_t groups = (n - head + per - 1) / per;
    for (uint32_t g = 0; g < groups; g++)
        sl_buf_puts(sql, "json_insert(");
    sl_buf_puts(sql, "json_array(");
    for (uint32_t k = 0; k < head; k++)
        sl_buf_printf(sql, k ? ",?%d" : "?%d", (*p)++);
    sl_buf_putc(sql, ')');
    for (uint32_t k = head; k < n; k++) {
        sl_buf_printf(sql, ",'$[#]',?%d", (*p)++);
        if ((k - head + 1) % per == 0 || k + 1 == n)
            sl_buf_putc(sql, ')');
    }
}

/* A number of decision.numbers, `arg` as bind_number bound it. json_object spells integers,
 * strings and NULL itself; a REAL is spelled here because json_object would round it to 15
 * digits: with 15 digits when SQLite's JSON parser reads them back to the same double, else
 * with 21 (%!.20e, which always does). JSON has no infinities: they are 9e999 and -9e999. A
 * REAL zero is -0.0, as +0.0 is bound as an integer. */
static void
put_value_sql(SlBuf *sql, const char *arg)
{
    static const char value[] = /* each '@' is `arg` */
        "CASE WHEN typeof(@) <> 'real' THEN @"
        " WHEN @ > 1.7976931348623157e308 THEN json('9e999')"
        " WHEN @ < -1.7976931348623157e308 THEN json('-9e999')"
        " WHEN @ = 0 THEN json('-0.0')"
        " WHEN json_extract(printf('%!.15g', @), '$') = @ THEN json(printf('%!.15g', @))"
        " ELSE json(printf('%!.20e', @)) END";
    for (const char *c = value; *c; c++)
        if (*c == '@')
            sl_buf_puts(sql, arg);
        else
            sl_buf_putc(sql, *c);
}

/* The JSON object of `n` key, value parameter pairs from ?p on (*p is advanced past them);
 * NULL when n is 0. json_object takes at most `max_args` arguments: past that, the pairs are
 * rows of a VALUES list that json_group_object takes in order. */
static void
put_object_sql(SlBuf *sql, uint32_t n, int *p, uint32_t max_args)
{
    char arg[24];
    if (!n) {
        sl_buf_puts(sql, "NULL");
        return;
    }
    bool is_call = 2 * n <= max_args;
    sl_buf_puts(sql, is_call ? "json_object(" : "(SELECT json_group_object(column1, ");
    if (!is_call) {
        put_value_sql(sql, "column2");
        sl_buf_puts(sql, ") FROM (VALUES ");
    }
    for (uint32_t k = 0; k < n; k++, *p += 2) {
        snprintf(arg, sizeof(arg), "?%d", *p + 1);
        sl_buf_printf(sql, is_call ? "%s?%d," : "%s(?%d,", k ? "," : "", *p);
        if (is_call)
            put_value_sql(sql, arg);
        else
            sl_buf_printf(sql, "%s)", arg);
    }
    sl_buf_puts(sql, is_call ? ")" : "))");
}

/* The INSERT for an instr with `n_operands` operands, or a decision with `n_alts`
 * alternatives and `n_numbers` numbers; NULL on failure (w->rc or w->oom is set). */
static sqlite3_stmt *
list_stmt(Wr *w, int kind, uint32_t n1, uint32_t n2)
{
    uint64_t key = (uint64_t)kind << 62 | (uint64_t)n1 << 31 | n2, idx = 0;
    if (sl_map_get(&w->list_idx, key, &idx))
        return SL_VEC_AT(&w->list_stmts, sqlite3_stmt *, idx);
    if (w->rc != SQLITE_OK || w->oom)
        return NULL;
    uint32_t max_args = (uint32_t)sqlite3_limit(w->db->sql, SQLITE_LIMIT_FUNCTION_ARG, -1);
    SlBuf sql;
    sl_buf_init(&sql);
    int p = 0;
    if (kind == LIST_INSTR) {
        sl_buf_puts(&sql, k_instr_sql);
        p = 17;
        put_array_sql(&sql, n1, &p, max_args);
    } else {
        sl_buf_puts(&sql, k_decision_sql);
        p = 7;
        put_array_sql(&sql, n1, &p, max_args);
        sl_buf_putc(&sql, ',');
        put_object_sql(&sql, n2, &p, max_args);
    }
    sl_buf_putc(&sql, ')');
    sqlite3_stmt *st = NULL;
    if (sql.failed) {
        w->oom = true;
    } else {
        bind_rc(w, sqlite3_prepare_v3(w->db->sql, sql.data, -1, 0, &st, NULL),
                "preparing a trace insert");
        if (st && !(SL_VEC_PUSH(&w->list_stmts, sqlite3_stmt *, st) &&
                    sl_map_put(&w->list_idx, key, w->list_stmts.len - 1))) {
            (void)sqlite3_finalize(st); /* not kept: nothing else would finalize it */
            st = NULL;
            w->oom = true;
        }
    }
    sl_buf_fini(&sql);
    return st;
}

/* A decision's number: NaN binds NULL (JSON null), an integral value an INTEGER (exact, and
 * spelled as one), anything else a REAL (put_value_sql spells it). */
static void
bind_number(Wr *w, sqlite3_stmt *st, int i, double v)
{
    if (v != v)
        bind_null(w, st, i);
    else if (v >= -0x1p63 && v < 0x1p63 && v == (double)(int64_t)v && !(v == 0 && signbit(v)))
        bind_i64(w, st, i, (int64_t)v);
    else
        bind_f64(w, st, i, v);
}

static void
write_instr(Wr *w, int phase, const IrComputation *c, const IrInstr *i)
{
    sqlite3_stmt *st = list_stmt(w, LIST_INSTR, i->n_operands, 0);
    if (!st)
        return;
    bind_i64(w, st, 1, w->next_instr_row++); /* the row assign_rows gave it */
    bind_i64(w, st, 2, w->run_id);
    bind_text(w, st, 3, k_phase[phase]);
    bind_i64(w, st, 4, i->id);
    bind_text(w, st, 5, sl_sym_cstr(c->name));
    bind_i64(w, st, 6, c->root ? c->root == i : i == c->instrs[c->n_instrs - 1]);
    bind_text(w, st, 7, sl_sym_cstr(i->name));
    bind_text(w, st, 8, ir_op_name(i->op));
    /* Shape and sharding share one buffer: "shape\0sharding". */
    sl_buf_clear(&w->text);
    ir_shape_print(&i->shape, false, &w->text);
    size_t shape_len = w->text.len;
    const ShdSharding *s = ir_instr_sharding(i);
    if (s) {
        sl_buf_putc(&w->text, '\0');
        shd_print(s, &w->text);
    }
    if (w->text.failed)
        w->oom = true;
    if (w->rc == SQLITE_OK && !w->oom)
        bind_rc(w, sqlite3_bind_text(st, 9, w->text.data, (int)shape_len, SQLITE_STATIC), "shape");
    if (s && w->rc == SQLITE_OK && !w->oom)
        bind_rc(w,
                sqlite3_bind_text(st, 10, w->text.data + shape_len + 1,
                                  (int)(w->text.len - shape_len - 1), SQLITE_STATIC),
                "sharding");
    bind_i64(w, st, 11, ir_shape_byte_size(&i->shape));
    const IrMetadata *md = ir_instr_metadata(i);
    if (md) {
        bind_str_or_null(w, st, 12, md->op_name);
        bind_str_or_null(w, st, 13, md->source_file);
        if (md->source_line > 0)
            bind_i64(w, st, 14, md->source_line);
    }
    if (phase == AFTER)
        bind_row(w, st, 15, source_row(w, i));
    if (i->op == IR_OP_PARAMETER)
        bind_i64(w, st, 16, i->parameter_number);
    for (uint32_t o = 0; o < i->n_operands; o++) { /* null for an operand outside the module */
        const IrInstr *op = i->operands[o];
        bind_row(w, st, 17 + (int)o,
                 op && op->id < w->n_ids[phase] ? w->rows_by_id[phase][op->id] : 0);
    }
    (void)insert_stmt(w, st, "inserting an instr row");
}

/* The called_computation role of the `k`th computation of attribute `key` ("branch_1"). */
static const char *
call_role(IrAttrKey key, uint32_t k, char *buf, size_t cap)
{
    if (key == IR_ATTR_TRUE_COMPUTATION)
        return "branch_0";
    if (key == IR_ATTR_FALSE_COMPUTATION)
        return "branch_1";
    if (key == IR_ATTR_BRANCH_COMPUTATIONS) {
        snprintf(buf, cap, "branch_%u", k);
        return buf;
    }
    if (key == IR_ATTR_CALLS || key == IR_ATTR_CALLED_COMPUTATIONS)
        return "calls";
    return ir_attr_name(key); /* body, condition, to_apply, select, scatter */
}

/* One called_computation row per (caller, callee) pair, in attribute print order. */
static void
write_calls(Wr *w, int phase, const IrInstr *i)
{
    sqlite3_stmt *st = stmt(w, ST_CALL);
    uint32_t idx = 0;
    char buf[32];
    for (uint16_t a = 0; a < i->n_attrs && w->rc == SQLITE_OK; a++) {
        const IrAttr *at = &i->attrs[a];
        if (at->key >= IR_ATTR_OTHER)
            continue;
        IrAttrKind kind = ir_attr_kind(at->key);
        uint32_t n = kind == IR_AK_COMP ? 1 : kind == IR_AK_COMPS ? at->u.comps.n : 0;
        for (uint32_t k = 0; k < n && w->rc == SQLITE_OK; k++) {
            const IrComputation *callee = kind == IR_AK_COMP ? at->u.comp : at->u.comps.v[k];
            if (!callee)
                continue;
            bind_i64(w, st, 1, w->run_id);
            bind_i64(w, st, 2, w->rows_by_id[phase][i->id]);
            bind_i64(w, st, 3, idx++);
            bind_text(w, st, 4, call_role(at->key, k, buf, sizeof(buf)));
            bind_text(w, st, 5, sl_sym_cstr(callee->name));
            (void)insert(w, ST_CALL);
        }
    }
}

static void
write_module(Wr *w, int phase)
{
    const IrModule *m = w->mod[phase];
    if (w->oom)
        return;
    for (uint32_t c = 0; c < m->n_comps; c++)
        for (uint32_t k = 0; k < m->comps[c]->n_instrs && w->rc == SQLITE_OK && !w->oom; k++)
            write_instr(w, phase, m->comps[c], m->comps[c]->instrs[k]);

    for (uint32_t c = 0; c < m->n_comps; c++) {
        const IrComputation *comp = m->comps[c];
        for (uint32_t k = 0; k < comp->n_instrs && w->rc == SQLITE_OK; k++)
            if (comp->instrs[k]->id < w->n_ids[phase])
                write_calls(w, phase, comp->instrs[k]);
    }
}

static void
write_decisions(Wr *w)
{
    const EvDecision *ev = w->db->decisions.data;
    for (size_t k = 0; k < w->db->decisions.len && w->rc == SQLITE_OK; k++) {
        const EvDecision *d = &ev[k];
        sqlite3_stmt *st = list_stmt(w, LIST_DECISION, d->n_alts, d->n_numbers);
        if (!st)
            return;
        bind_i64(w, st, 1, w->run_id);
        bind_i64(w, st, 2, d->seq);
        bind_row(w, st, 3, row_of(w, BEFORE, d->instr));
        bind_text(w, st, 4, d->handler ? d->handler : "");
        bind_text(w, st, 5, d->strategy ? d->strategy : "");
        bind_text(w, st, 6, d->reason);
        int p = 7;
        for (uint32_t a = 0; a < d->n_alts; a++)
            bind_text(w, st, p++, d->alts[a] ? d->alts[a] : "");
        for (uint32_t n = 0; n < d->n_numbers; n++, p += 2) {
            const TraceKV *kv = &d->numbers[n];
            bind_text(w, st, p, kv->key ? kv->key : "");
            if (kv->str)
                bind_text(w, st, p + 1, kv->str);
            else
                bind_number(w, st, p + 1, kv->num);
        }
        int64_t row = insert_stmt(w, st, "inserting a decision row");
        put(w, &w->decision_row, d->seq, (uint64_t)row);
    }
}

static void
write_reshards(Wr *w)
{
    const EvReshard *ev = w->db->reshards.data;
    sqlite3_stmt *st = stmt(w, ST_RESHARD);
    for (size_t k = 0; k < w->db->reshards.len && w->rc == SQLITE_OK; k++) {
        const EvReshard *r = &ev[k];
        bind_i64(w, st, 1, w->run_id);
        bind_i64(w, st, 2, r->seq);
        bind_row(w, st, 3, row_of(w, BEFORE, r->requester));
        bind_row(w, st, 4, row_of(w, AFTER, r->value));
        bind_text(w, st, 5, sl_sym_cstr(r->value.name));
        bind_text(w, st, 6, r->from);
        bind_text(w, st, 7, r->to);
        bind_text(w, st, 8, r->method);
        bind_row(w, st, 9, row_of(w, AFTER, r->result));
        bind_text(w, st, 10, r->result.name ? sl_sym_cstr(r->result.name) : NULL);
        int64_t row = insert(w, ST_RESHARD);
        put(w, &w->reshard_row, r->seq, (uint64_t)row);
    }
}

/* The conditional a loop event's true_branch_runs speaks of: the only conditional directly in
 * the loop's body, a predicated one (true_computation, false_computation). NULL when the event
 * states no count or the body does not have exactly one such conditional. */
static const IrInstr *
hinted_conditional(Wr *w, const EvLoop *l)
{
    if (l->true_branch_runs <= 0 || l->true_branch_runs > l->iterations)
        return NULL;
    uint32_t id = resolve(w, AFTER, l->loop);
    const IrInstr *loop = id == UINT32_MAX ? NULL : w->instr_by_id[AFTER][id];
    const IrAttr *body =
        loop && loop->op == IR_OP_WHILE ? ir_instr_find_attr(loop, IR_ATTR_BODY) : NULL;
    const IrInstr *found = NULL;
    for (uint32_t k = 0; body && body->u.comp && k < body->u.comp->n_instrs; k++) {
        const IrInstr *i = body->u.comp->instrs[k];
        if (i->op != IR_OP_CONDITIONAL)
            continue;
        bool is_pred = ir_instr_find_attr(i, IR_ATTR_TRUE_COMPUTATION) != NULL;
        if (found || !is_pred || i->id >= w->n_ids[AFTER])
            return NULL;
        found = i;
    }
    return found;
}

static void
write_loops(Wr *w)
{
    const EvLoop *ev = w->db->loops.data;
    sqlite3_stmt *st = stmt(w, ST_LOOP);
    for (size_t k = 0; k < w->db->loops.len && w->rc == SQLITE_OK; k++) {
        const EvLoop *l = &ev[k];
        bind_i64(w, st, 1, w->run_id);
        bind_row(w, st, 2, row_of(w, BEFORE, l->dot));
        bind_row(w, st, 3, row_of(w, AFTER, l->loop));
        bind_text(w, st, 4, sl_sym_cstr(l->loop.name));
        bind_text(w, st, 5, l->variant);
        bind_i64(w, st, 6, l->iterations);
        bind_i64(w, st, 7, l->bytes_per_iteration);
        (void)insert(w, ST_LOOP);
        if (l->loop.name && l->iterations >= 0)
            put(w, &w->loop_trips, SL_MAP_KEY(l->loop.name), (uint64_t)l->iterations);
        const IrInstr *cond = hinted_conditional(w, l);
        if (cond)
            put(w, &w->branch_hint, cond->id, (uint64_t)k + 1);
    }
}

static void
write_warnings(Wr *w)
{
    const EvWarning *ev = w->db->warnings.data;
    sqlite3_stmt *st = stmt(w, ST_WARNING);
    for (size_t k = 0; k < w->db->warnings.len && w->rc == SQLITE_OK; k++) {
        bind_i64(w, st, 1, w->run_id);
        bind_row(w, st, 2, row_of(w, BEFORE, ev[k].source));
        bind_text(w, st, 3, trace_warn_kind_name(ev[k].kind));
        bind_text(w, st, 4, ev[k].message);
        (void)insert(w, ST_WARNING);
    }
}

/* One row per propagated sharding; the path as a JSON array of 'before' instr ids. */
static void
write_origins(Wr *w)
{
    const EvOrigin *ev = w->db->origins.data;
    sqlite3_stmt *st = stmt(w, ST_ORIGIN);
    SlBuf path;
    sl_buf_init(&path);
    for (size_t k = 0; k < w->db->origins.len && w->rc == SQLITE_OK; k++) {
        int64_t row = row_of(w, BEFORE, ev[k].instr);
        if (!row)
            continue; /* not an instruction of the partitioner's input */
        sl_buf_clear(&path);
        sl_buf_putc(&path, '[');
        for (uint32_t p = 0; p < ev[k].n_path; p++) {
            int64_t r = row_of(w, BEFORE, ev[k].path[p]);
            if (p)
                sl_buf_putc(&path, ',');
            if (r)
                sl_buf_put_i64(&path, r);
            else
                sl_buf_puts(&path, "null");
        }
        sl_buf_putc(&path, ']');
        if (path.failed) {
            w->oom = true;
            break;
        }
        bind_i64(w, st, 1, w->run_id);
        bind_row(w, st, 2, row);
        bind_text(w, st, 3, ev[k].sharding);
        bind_row(w, st, 4, row_of(w, BEFORE, ev[k].source));
        bind_text(w, st, 5, path.data);
        bind_text(w, st, 6, ev[k].direction);
        if (ev[k].level >= 0)
            bind_i64(w, st, 7, ev[k].level);
        else
            bind_null(w, st, 7);
        bind_text(w, st, 8, ev[k].rule);
        bind_text(w, st, 9, ev[k].candidate);
        bind_text(w, st, 10, ev[k].replaced);
        (void)insert(w, ST_ORIGIN);
    }
    sl_buf_fini(&path);
}

/* ---- collectives: kind, S, device groups, trip counts --------------------------------- */

typedef enum CollBytes {
    CB_OPERANDS,      /* S = all operands (all-reduce, reduce-scatter, all-to-all, broadcast) */
    CB_FIRST_OPERAND, /* S = operand 0 (collective-permute, ragged all-to-all) */
    CB_GATHERED,      /* S = operands x group size (all-gather: the gathered buffer) */
} CollBytes;

static const struct {
    IrOp op;
    const char *kind;
    CollBytes bytes;
} k_collectives[] = {
    {IR_OP_ALL_GATHER,               "all-gather",           CB_GATHERED     },
    {IR_OP_ALL_GATHER_START,         "all-gather",           CB_GATHERED     },
    {IR_OP_REDUCE_SCATTER,           "reduce-scatter",       CB_OPERANDS     },
    {IR_OP_ALL_REDUCE,               "all-reduce",           CB_OPERANDS     },
    {IR_OP_ALL_REDUCE_START,         "all-reduce",           CB_OPERANDS     },
    {IR_OP_ALL_TO_ALL,               "all-to-all",           CB_OPERANDS     },
    {IR_OP_RAGGED_ALL_TO_ALL,        "all-to-all",           CB_FIRST_OPERAND},
    {IR_OP_COLLECTIVE_PERMUTE,       "collective-permute",   CB_FIRST_OPERAND},
    {IR_OP_COLLECTIVE_PERMUTE_START, "collective-permute",   CB_FIRST_OPERAND},
    {IR_OP_COLLECTIVE_BROADCAST,     "collective-broadcast", CB_OPERANDS     },
};

static int
collective_row(IrOp op)
{
    for (size_t k = 0; k < SL_COUNTOF(k_collectives); k++)
        if (k_collectives[k].op == op)
            return (int)k;
    return -1;
}

/* Exact bytes: sub-byte types count packed, so s4[3] is 1.5 bytes. */
static double
exact_bytes(const IrShape *s)
{
    if (ir_shape_is_tuple(s)) {
        double total = 0;
        for (uint32_t k = 0; k < s->n_elems; k++)
            total += exact_bytes(&s->elems[k]);
        return total;
    }
    if (!ir_shape_is_array(s))
        return 0;
    double n = 1;
    for (uint32_t k = 0; k < s->rank; k++)
        n *= (double)s->dims[k];
    return n * ir_dtype_bits(s->dtype) / 8.0;
}

static double
full_bytes(const IrInstr *i, CollBytes how, int64_t group_size)
{
    uint32_t n = how == CB_FIRST_OPERAND && i->n_operands > 1 ? 1 : i->n_operands;
    double s = 0;
    for (uint32_t k = 0; k < n; k++)
        if (i->operands[k])
            s += exact_bytes(&i->operands[k]->shape);
    return how == CB_GATHERED ? s * (double)group_size : s;
}

/* Device groups as flat ids; collective-permute: one (source, target) group per pair. */
typedef struct Groups {
    uint32_t n;      /* groups */
    uint32_t *sizes; /* n sizes */
    int64_t *ids;    /* concatenated groups */
    int64_t group_size;
} Groups;

static bool
permute_groups(Wr *w, const IrInstr *i, Groups *g)
{
    const IrAttr *a = ir_instr_find_attr(i, IR_ATTR_SOURCE_TARGET_PAIRS);
    uint32_t n = a ? a->u.lists.n : 0;
    g->group_size = 2;
    g->sizes = SL_NEW_ARRAY(&w->scratch, uint32_t, n + 1);
    g->ids = SL_NEW_ARRAY(&w->scratch, int64_t, 2 * (size_t)n + 1);
    if (!g->sizes || !g->ids)
        return false;
    size_t off = 0;
    for (uint32_t k = 0; k < n; k++) {
        if (a->u.lists.sizes[k] == 2) { /* anything else is not a pair: skip it */
            g->sizes[g->n] = 2;
            g->ids[2 * g->n] = a->u.lists.v[off];
            g->ids[2 * g->n + 1] = a->u.lists.v[off + 1];
            g->n++;
        }
        off += a->u.lists.sizes[k];
    }
    return true;
}

static bool
replica_groups(Wr *w, const IrInstr *i, Groups *g)
{
    const IrAttr *a = ir_instr_find_attr(i, IR_ATTR_REPLICA_GROUPS);
    const IrReplicaGroups *rg = a ? a->u.groups : NULL;
    if (rg && rg->is_iota && rg->iota.n_dims == 2) {
        int64_t total = ir_iota_count(&rg->iota);
        int64_t n = rg->iota.dims[0];
        if (n <= 0 || n > UINT32_MAX || total != n * rg->iota.dims[1])
            return true; /* malformed: no groups */
        g->ids = SL_NEW_ARRAY(&w->scratch, int64_t, (size_t)total);
        g->sizes = SL_NEW_ARRAY(&w->scratch, uint32_t, (size_t)n);
        if (!g->ids || !g->sizes)
            return false;
        ir_iota_expand(&rg->iota, g->ids);
        g->n = (uint32_t)n;
        g->group_size = rg->iota.dims[1];
        for (uint32_t k = 0; k < g->n; k++)
            g->sizes[k] = (uint32_t)g->group_size;
        return true;
    }
    if (rg && !rg->is_iota && rg->n_groups > 0) {
        g->n = rg->n_groups;
        g->sizes = rg->group_sizes;
        g->ids = rg->ids;
        for (uint32_t k = 0; k < g->n; k++) /* the largest; costs use each group's size */
            if (rg->group_sizes[k] > g->group_size)
                g->group_size = rg->group_sizes[k];
        return true;
    }
    /* Absent or "{}": one group of every device. */
    int64_t n = w->db->info.num_partitions > 0 ? w->db->info.num_partitions : 1;
    g->ids = SL_NEW_ARRAY(&w->scratch, int64_t, (size_t)n);
    g->sizes = SL_NEW_ARRAY(&w->scratch, uint32_t, 1);
    if (!g->ids || !g->sizes)
        return false;
    for (int64_t d = 0; d < n; d++)
        g->ids[d] = d;
    g->n = 1;
    g->sizes[0] = (uint32_t)n;
    g->group_size = n;
    return true;
}

enum { TRIP_UNSEEN = -2, TRIP_UNKNOWN = -1 };

/* Executions of a computation per run of the module: `exact` when known; `max` bounds it
 * (equal to `exact` when that is known; TRIP_UNKNOWN: unbounded). */
typedef struct Trips {
    int64_t exact, max;
} Trips;

/* A while of the output module and its trip count (a while_loop row). */
typedef struct WhileRow {
    const IrInstr *w;
    IrTripCount tc;     /* count -1: unknown; reason says why, or how it was found */
    const char *method; /* backend_config, pattern, user, partitioner, unknown */
    Trips runs;         /* executions of the while itself */
    uint32_t outer;     /* index + 1 into Wr.whiles of the loop around it; 0: none */
    int64_t row;
} WhileRow;

/* The trip count of output while `i` (recorded in w->whiles): the user's count for the input
 * while it derives from; else backend_config or the pattern (ir_while_trip_count), on the
 * output loop, else on that input while (whose names the reason then gives); else the
 * iterations the partitioner stated for a windowed loop it emitted. */
static int64_t
while_count(Wr *w, const IrInstr *i, Trips runs)
{
    uint32_t outer = i->parent && w->comp_loop ? w->comp_loop[i->parent->id] : 0;
    WhileRow r = {i, {0}, NULL, runs, outer, 0};
    ir_while_trip_count(w->mod[AFTER], i, &r.tc);
    r.method = ir_trip_method_name(r.tc.method);
    const IrInstr *src = i->derived_from && i->derived_from->op == IR_OP_WHILE ? i->derived_from : i;
    if (r.tc.method == IR_TRIP_UNKNOWN && src != i && src->id < w->n_ids[BEFORE] &&
        w->instr_by_id[BEFORE][src->id] == src) /* the input's loop: its count, or its names */
        ir_while_trip_count(w->mod[BEFORE], src, &r.tc);
    r.method = ir_trip_method_name(r.tc.method);
    const TraceRunInfo *info = &w->db->info;
    for (uint32_t k = 0; src->name && k < info->n_trip_counts; k++) {
        if (strcmp(sl_sym_cstr(src->name), info->trip_counts[k].name) != 0)
            continue;
        r.tc.count = info->trip_counts[k].count;
        r.method = "user";
        snprintf(r.tc.reason, sizeof(r.tc.reason), "--trip-count %s=%lld",
                 info->trip_counts[k].name, (long long)r.tc.count);
    }
    uint64_t v = 0;
    if (r.tc.count < 0 && i->name && sl_map_get(&w->loop_trips, SL_MAP_KEY(i->name), &v)) {
        r.tc.count = (int64_t)v;
        r.method = "partitioner";
        snprintf(r.tc.reason, sizeof(r.tc.reason),
                 "the windowed-einsum loop states %lld iterations", (long long)v);
    }
    if (!SL_VEC_PUSH(&w->whiles, WhileRow, r))
        w->oom = true;
    return r.tc.count;
}

static int64_t
trip_mul(int64_t t, int64_t n)
{
    if (t < 0 || n < 0 || (n > 0 && t > INT64_MAX / n))
        return TRIP_UNKNOWN;
    return t * n;
}

static int64_t
trip_sum(int64_t t, int64_t v)
{
    if (t == TRIP_UNSEEN)
        return v;
    if (t == TRIP_UNKNOWN || v == TRIP_UNKNOWN || t > INT64_MAX - v)
        return TRIP_UNKNOWN;
    return t + v;
}

/* A computation called from several places runs once per call: the counts add up. */
static void
trip_add(Trips *trips, uint32_t n_comps, const IrComputation *c, Trips v)
{
    if (!c || c->id >= n_comps)
        return;
    trips[c->id].exact = trip_sum(trips[c->id].exact, v.exact);
    trips[c->id].max = trip_sum(trips[c->id].max, v.max);
}

/* Branch `b` of a conditional that runs `t` times. The predicate is data, so in general only
 * "at most t" is known (gspmd.md H.4); a windowed loop that states how often its body's
 * conditional takes the true branch makes both branches exact. */
static Trips
branch_trips(const EvLoop *hint, Trips t, uint32_t b)
{
    Trips bound = {TRIP_UNKNOWN, t.max};
    if (!hint || b > 1 || t.exact < 0 || hint->iterations <= 0 || t.exact % hint->iterations)
        return bound;
    int64_t loop_runs = t.exact / hint->iterations;
    int64_t runs = b == 0 ? hint->true_branch_runs : hint->iterations - hint->true_branch_runs;
    int64_t exact = trip_mul(loop_runs, runs);
    return exact < 0 ? bound : (Trips){exact, exact};
}

static bool
is_branch_attr(IrAttrKey key)
{
    return key == IR_ATTR_TRUE_COMPUTATION || key == IR_ATTR_FALSE_COMPUTATION ||
           key == IR_ATTR_BRANCH_COMPUTATIONS;
}

/* The trips of each callee of `i`, an instruction of a computation that runs `t` times. */
static void
add_callee_trips(Wr *w, const IrInstr *i, Trips t, Trips *trips, uint32_t n)
{
    int64_t loop = TRIP_UNKNOWN;
    uint64_t v = 0;
    if (i->op == IR_OP_WHILE)
        loop = while_count(w, i, t);
    uint32_t in_loop = i->op == IR_OP_WHILE ? (uint32_t)w->whiles.len
                       : i->parent && i->parent->id < n ? w->comp_loop[i->parent->id]
                                                         : 0;
    const EvLoop *hint = NULL;
    if (i->op == IR_OP_CONDITIONAL && sl_map_get(&w->branch_hint, i->id, &v))
        hint = &((const EvLoop *)w->db->loops.data)[v - 1];
    for (uint16_t a = 0; a < i->n_attrs; a++) {
        const IrAttr *at = &i->attrs[a];
        if (at->key >= IR_ATTR_OTHER)
            continue;
        IrAttrKind kind = ir_attr_kind(at->key);
        uint32_t n_callees = kind == IR_AK_COMP ? 1 : kind == IR_AK_COMPS ? at->u.comps.n : 0;
        for (uint32_t q = 0; q < n_callees; q++) {
            const IrComputation *callee = kind == IR_AK_COMP ? at->u.comp : at->u.comps.v[q];
            Trips c = t;
            if (i->op == IR_OP_WHILE && at->key == IR_ATTR_BODY)
                c = (Trips){trip_mul(t.exact, loop), trip_mul(t.max, loop)};
            else if (i->op == IR_OP_WHILE && at->key == IR_ATTR_CONDITION)
                c = (Trips){trip_mul(t.exact, loop < 0 ? loop : loop + 1),
                            trip_mul(t.max, loop < 0 ? loop : loop + 1)};
            else if (i->op == IR_OP_CONDITIONAL && is_branch_attr(at->key))
                c = branch_trips(hint, t,
                                 at->key == IR_ATTR_FALSE_COMPUTATION  ? 1
                                 : at->key == IR_ATTR_TRUE_COMPUTATION ? 0
                                                                       : q);
            trip_add(trips, n, callee, c);
            if (callee && callee->id < n && !w->comp_loop[callee->id])
                w->comp_loop[callee->id] = in_loop;
        }
    }
}

/* Executions of each computation per run of the module, by computation id: the entry runs
 * once; a while body runs trip-count times (while_count), its condition once more; a conditional's branches at most as often as
 * the conditional (exactly, when a windowed loop states it); other callees as often as their
 * caller. */
static Trips *
comp_trips(Wr *w, const IrModule *m)
{
    uint32_t n = m->next_comp_id;
    Trips *trips = SL_NEW_ARRAY(&w->scratch, Trips, (size_t)n + 1);
    w->comp_loop = SL_NEW_ARRAY(&w->scratch, uint32_t, (size_t)n + 1);
    if (!trips || !w->comp_loop)
        return NULL;
    memset(w->comp_loop, 0, ((size_t)n + 1) * sizeof(uint32_t));
    for (uint32_t k = 0; k < n; k++)
        trips[k] = (Trips){TRIP_UNSEEN, TRIP_UNSEEN};
    if (m->entry && m->entry->id < n)
        trips[m->entry->id] = (Trips){1, 1};
    for (uint32_t k = m->n_comps; k-- > 0;) { /* callers come after their callees */
        const IrComputation *c = m->comps[k];
        if (c->id >= n)
            continue;
        Trips *t = &trips[c->id];
        if (t->exact == TRIP_UNSEEN) /* never called: do not guess */
            *t = (Trips){TRIP_UNKNOWN, TRIP_UNKNOWN};
        for (uint32_t j = 0; j < c->n_instrs; j++)
            add_callee_trips(w, c->instrs[j], *t, trips, n);
    }
    return trips;
}

static void
write_groups(Wr *w, int64_t collective, const Groups *g)
{
    sqlite3_stmt *st = stmt(w, ST_GROUP);
    size_t off = 0;
    for (uint32_t k = 0; k < g->n && w->rc == SQLITE_OK; k++) {
        for (uint32_t p = 0; p < g->sizes[k]; p++) {
            bind_i64(w, st, 1, collective);
            bind_i64(w, st, 2, k);
            bind_i64(w, st, 3, p);
            bind_i64(w, st, 4, g->ids[off + p]);
            bind_i64(w, st, 5, g->sizes[k]);
            (void)insert(w, ST_GROUP);
        }
        off += g->sizes[k];
    }
}

static int64_t
seq_row(const SlMap *m, uint32_t seq)
{
    uint64_t row = 0;
    return seq && sl_map_get(m, seq, &row) ? (int64_t)row : 0;
}

/* A collective the partitioner did not report: it came from an input collective when it
 * derives from an instruction of the same opcode. */
static bool
was_in_input(const Wr *w, const IrInstr *i)
{
    const IrInstr *d = i->derived_from;
    return d && d->id < w->n_ids[BEFORE] && w->instr_by_id[BEFORE][d->id] == d && d->op == i->op;
}

static void
write_collective(Wr *w, const IrInstr *i, int kind, Trips trip, int64_t loop_row)
{
    Groups g = {0};
    bool is_permute =
        k_collectives[kind].bytes == CB_FIRST_OPERAND && i->op != IR_OP_RAGGED_ALL_TO_ALL;
    if (!(is_permute ? permute_groups(w, i, &g) : replica_groups(w, i, &g))) {
        w->oom = true;
        return;
    }
    uint32_t ev_index = i->id < w->n_ids[AFTER] ? w->coll_by_id[i->id] : 0;
    const EvCollective *ev =
        ev_index ? &((const EvCollective *)w->db->collectives.data)[ev_index - 1] : NULL;
    sqlite3_stmt *st = stmt(w, ST_COLLECTIVE);
    int64_t channel = 0;
    bind_i64(w, st, 1, w->run_id);
    bind_row(w, st, 2, i->id < w->n_ids[AFTER] ? w->rows_by_id[AFTER][i->id] : 0);
    bind_text(w, st, 3, k_collectives[kind].kind);
    if (ir_instr_int_attr(i, IR_ATTR_CHANNEL_ID, &channel))
        bind_i64(w, st, 4, channel);
    bind_i64(w, st, 5, g.group_size);
    bind_i64(w, st, 6, g.n);
    sl_buf_clear(&w->text);
    ir_shape_print(&i->shape, false, &w->text);
    if (w->text.failed)
        w->oom = true;
    else
        bind_text(w, st, 7, w->text.data);
    bind_f64(w, st, 8, full_bytes(i, k_collectives[kind].bytes, g.group_size));
    if (trip.exact >= 0)
        bind_i64(w, st, 9, trip.exact);
    int64_t src = ev ? row_of(w, BEFORE, ev->source) : 0;
    bind_row(w, st, 10, src ? src : source_row(w, i));
    bind_text(w, st, 11, ev ? ev->cause : was_in_input(w, i) ? "input" : NULL);
    bind_row(w, st, 12, ev ? seq_row(&w->reshard_row, ev->reshard_seq) : 0);
    bind_row(w, st, 13, ev ? seq_row(&w->decision_row, ev->decision_seq) : 0);
    if (trip.max >= 0)
        bind_i64(w, st, 14, trip.max);
    bind_row(w, st, 15, loop_row);
    int64_t row = insert(w, ST_COLLECTIVE);
    write_groups(w, row, &g);
}

/* One while_loop row per while of the output, outer loops first. */
static void
write_whiles(Wr *w)
{
    sqlite3_stmt *st = stmt(w, ST_WHILE);
    for (size_t k = 0; k < w->whiles.len && w->rc == SQLITE_OK; k++) {
        WhileRow *r = &SL_VEC_AT(&w->whiles, WhileRow, k);
        bind_i64(w, st, 1, w->run_id);
        bind_row(w, st, 2, r->w->id < w->n_ids[AFTER] ? w->rows_by_id[AFTER][r->w->id] : 0);
        bind_row(w, st, 3, source_row(w, r->w));
        if (r->tc.count >= 0)
            bind_i64(w, st, 4, r->tc.count);
        bind_text(w, st, 5, r->method);
        bind_text(w, st, 6, r->tc.reason[0] ? r->tc.reason : NULL);
        if (r->tc.induction_index >= 0)
            bind_i64(w, st, 7, r->tc.induction_index);
        if (r->runs.exact >= 0)
            bind_i64(w, st, 8, r->runs.exact);
        bind_row(w, st, 9, r->outer ? SL_VEC_AT(&w->whiles, WhileRow, r->outer - 1).row : 0);
        r->row = insert(w, ST_WHILE);
    }
}

/* One row per collective instruction of the output module, whether reported by an event or
 * not, so the table always matches the printed module. */
static void
write_collectives(Wr *w, const IrModule *out)
{
    SlArenaMark outer = sl_arena_mark(&w->scratch);
    Trips *trips = comp_trips(w, out);
    if (!trips) {
        w->oom = true;
        return;
    }
    write_whiles(w);
    for (uint32_t c = 0; c < out->n_comps && w->rc == SQLITE_OK && !w->oom; c++) {
        const IrComputation *comp = out->comps[c];
        Trips trip =
            comp->id < out->next_comp_id ? trips[comp->id] : (Trips){TRIP_UNKNOWN, TRIP_UNKNOWN};
        uint32_t loop = comp->id < out->next_comp_id ? w->comp_loop[comp->id] : 0;
        int64_t loop_row = loop ? SL_VEC_AT(&w->whiles, WhileRow, loop - 1).row : 0;
        for (uint32_t k = 0; k < comp->n_instrs && w->rc == SQLITE_OK && !w->oom; k++) {
            int kind = collective_row(comp->instrs[k]->op);
            if (kind < 0)
                continue;
            SlArenaMark mark = sl_arena_mark(&w->scratch);
            write_collective(w, comp->instrs[k], kind, trip, loop_row);
            sl_arena_release(&w->scratch, mark);
        }
    }
    sl_arena_release(&w->scratch, outer);
}

static void
wr_init(Wr *w, TraceDb *db)
{
    memset(w, 0, sizeof(*w));
    w->db = db;
    sl_buf_init(&w->text);
    sl_map_init(&w->list_idx);
    sl_arena_init(&w->scratch);
    sl_map_init(&w->by_name[BEFORE]);
    sl_map_init(&w->by_name[AFTER]);
    sl_map_init(&w->decision_row);
    sl_map_init(&w->reshard_row);
    sl_map_init(&w->loop_trips);
    sl_map_init(&w->branch_hint);
}

static void
wr_fini(Wr *w)
{
    sl_buf_fini(&w->text);
    for (size_t k = 0; k < w->list_stmts.len; k++) /* returns the last step's error, seen */
        (void)sqlite3_finalize(SL_VEC_AT(&w->list_stmts, sqlite3_stmt *, k));
    sl_vec_fini(&w->list_stmts);
    sl_map_fini(&w->list_idx);
    sl_arena_fini(&w->scratch);
    sl_map_fini(&w->by_name[BEFORE]);
    sl_map_fini(&w->by_name[AFTER]);
    sl_map_fini(&w->decision_row);
    sl_map_fini(&w->reshard_row);
    sl_map_fini(&w->loop_trips);
    sl_map_fini(&w->branch_hint);
    sl_vec_fini(&w->whiles);
}

/* One attempt: every row of the run, in dependency order. */
static void
write_all(Wr *w, const IrModule *out, double duration_ms)
{
    index_module(w, BEFORE, w->db->in);
    index_module(w, AFTER, out);
    if (!w->oom)
        index_events(w);
    assign_rows(w);
    write_run(w, w->db->in, duration_ms);
    write_module(w, BEFORE);
    write_module(w, AFTER);
    write_decisions(w);
    write_reshards(w);
    write_loops(w);
    write_collectives(w, out);
    write_warnings(w);
    write_origins(w);
    if (w->oom && w->rc == SQLITE_OK) {
        w->rc = SQLITE_NOMEM;
        w->what = "buffering rows";
    }
}

static SlStatus
prepare_all(TraceDb *db, SlError *err)
{
    for (int i = 0; i < ST_COUNT; i++) {
        if (db->stmts[i]) {
            (void)sqlite3_clear_bindings(db->stmts[i]); /* none may outlive its buffer */
            continue;
        }
        int rc = sqlite3_prepare_v3(db->sql, k_insert_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
                                    &db->stmts[i], NULL);
        if (rc != SQLITE_OK)
            return trace_db_fail(db, rc, "preparing the trace inserts", err);
    }
    return SL_OK;
}

SlStatus
trace_db_end_run(TraceDb *db, const IrModule *out, double duration_ms, int64_t *run_id,
                 SlError *err)
{
    SlSrcLoc loc = trace_db_loc(db);
    if (run_id)
        *run_id = 0;
    if (SL_NEVER(!db->in_run || !out)) {
        trace_db_abort_run(db);
        return sl_fail(err, SL_ERR_INTERNAL, loc, "trace_db_end_run without a run or module");
    }
    if (db->events_failed) {
        clear_run(db);
        return sl_fail(err, SL_ERR_NOMEM, loc, "out of memory while recording the trace");
    }
    SlStatus st = prepare_all(db, err);
    for (int attempt = 0; st == SL_OK; attempt++) {
        Wr w;
        wr_init(&w, db);
        w.rc = trace_db_begin_write(db);
        if (w.rc != SQLITE_OK)
            w.what = "starting the run's transaction";
        if (w.rc == SQLITE_OK && trace_db_was_removed(db)) { /* see discard_if_new */
            trace_db_rollback(db);
            wr_fini(&w);
            st = sl_fail(err, SL_ERR_IO, loc,
                         "the trace database was removed while this run waited to write it "
                         "(another run created it and failed); run again");
            break;
        }
        write_all(&w, out, duration_ms);
        if (w.rc == SQLITE_OK && (w.rc = trace_db_commit(db)) != SQLITE_OK)
            w.what = "committing the run";
        if (w.rc == SQLITE_OK) {
            if (run_id)
                *run_id = w.run_id;
            wr_fini(&w);
            break;
        }
        trace_db_rollback(db);
        bool retry = !w.fault && trace_db_is_busy(w.rc) && attempt + 1 < db->attempts;
        if (!retry) {
            if (w.fault)
                st = sl_fail(err, SL_ERR_DB, loc, "injected fault after %llu rows",
                             (unsigned long long)w.rows);
            else
                st = trace_db_fail(db, w.rc, w.what, err);
        }
        wr_fini(&w);
    }
    clear_run(db);
    return st;
}
