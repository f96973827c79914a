/* sqlite_sink.c - recording one partitioner run into the trace database.
 * Owns: the TraceSink that buffers events while the partitioner runs (begin_run, the event
 * callbacks, abort_run), and end_run's transaction: the attempts at writing the run, retried
 * as a whole while another writer holds the lock.
 * Does not own: the rows (sqlite_sink_write.c and the sqlite_sink_*.c it calls), the schema
 * (schema/trace.sql), opening files (trace_db.c), reading (reader.c).
 * Invariants: events are copied when they arrive (their pointers die with the callback) and
 * refer to instructions by interned name; a run is written in one IMMEDIATE transaction that
 * is retried as a whole when another writer holds the lock, so a run is in the file entirely
 * or not at all and the lock is held only while rows are inserted. */
#include <stdio.h>
#include <string.h>

#include "memory/memory.h"
#include "sharding/shd.h"
#include "trace/sqlite_sink_int.h"

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
    MemEstimate mem[2];
    uint32_t ignored[2] = {0, 0};
    SlStatus st = mem_estimate(db->in, &mem[BEFORE], &ignored[BEFORE], err);
    if (st == SL_OK)
        st = mem_estimate(out, &mem[AFTER], &ignored[AFTER], err);
    if (st == SL_OK)
        st = wr_prepare_all(db, err);
    for (int attempt = 0; st == SL_OK; attempt++) {
        Wr w;
        wr_init(&w, db);
        w.mem = mem;
        w.ignored_aliases[BEFORE] = ignored[BEFORE];
        w.ignored_aliases[AFTER] = ignored[AFTER];
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
        wr_write_all(&w, out, duration_ms);
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
