/* sqlite_sink_write.c - one attempt at writing a buffered run: the prepared inserts, binding
 * and stepping them, the id and row tables of both modules, the run and run_option rows, and
 * the order in which the other writers (sqlite_sink_*.c) add theirs.
 * Does not own: the transaction and its retries (sqlite_sink.c).
 * Invariant: the first failure (w->rc, w->oom) stops every later insert of the attempt. */
#include <string.h>

#include "trace/sqlite_sink_int.h"

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
    [ST_MEMORY] = "INSERT INTO memory(run_id, phase, devices, parameter_bytes, output_bytes,"
                  " alias_bytes, peak_bytes, peak_temp_bytes, max_temp_bytes, peak_instr,"
                  " peak_position, n_values, profile, profile_step)"
                  " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
    [ST_MEMORY_BUFFER] = "INSERT INTO memory_buffer(memory_id, rank, instr, leaf, bytes, kind)"
                         " VALUES (?,?,?,?,?,?)",
};

const char *
wr_phase_name(int phase)
{
    return phase == BEFORE ? "before" : "after";
}

void
wr_bind_rc(Wr *w, int rc, const char *what)
{
    if (rc != SQLITE_OK && w->rc == SQLITE_OK) {
        w->rc = rc;
        w->what = what;
    }
}

void
wr_bind_i64(Wr *w, sqlite3_stmt *st, int i, int64_t v)
{
    if (w->rc == SQLITE_OK)
        wr_bind_rc(w, sqlite3_bind_int64(st, i, v), "binding a value");
}

void
wr_bind_f64(Wr *w, sqlite3_stmt *st, int i, double v)
{
    if (w->rc == SQLITE_OK)
        wr_bind_rc(w, sqlite3_bind_double(st, i, v), "binding a value");
}

void
wr_bind_null(Wr *w, sqlite3_stmt *st, int i)
{
    if (w->rc == SQLITE_OK)
        wr_bind_rc(w, sqlite3_bind_null(st, i), "binding a value");
}

/* Rows are numbered from 1, so row 0 binds NULL. */
void
wr_bind_row(Wr *w, sqlite3_stmt *st, int i, int64_t row)
{
    if (row > 0)
        wr_bind_i64(w, st, i, row);
    else
        wr_bind_null(w, st, i);
}

/* Text that stays alive until the statement is stepped; NULL binds NULL. */
void
wr_bind_text(Wr *w, sqlite3_stmt *st, int i, const char *s)
{
    if (!s)
        wr_bind_null(w, st, i);
    else if (w->rc == SQLITE_OK)
        wr_bind_rc(w, sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC), "binding a value");
}

/* A slice; empty binds NULL (metadata fields that are absent). */
void
wr_bind_str_or_null(Wr *w, sqlite3_stmt *st, int i, SlStr s)
{
    if (!s.len)
        wr_bind_null(w, st, i);
    else if (w->rc == SQLITE_OK)
        wr_bind_rc(w, sqlite3_bind_text(st, i, s.ptr, (int)s.len, SQLITE_STATIC),
                   "binding a value");
}

/* Steps an INSERT, resets it for the next row, and returns the new row id (0 on failure).
 * `what` names it in an error. */
int64_t
wr_insert_stmt(Wr *w, sqlite3_stmt *st, const char *what)
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
                wr_bind_rc(w, rc, what);
        }
    }
    /* After a failed step, reset returns the same error, already recorded. Bindings are
     * cleared even then: text is bound SQLITE_STATIC, from buffers the attempt frees. */
    (void)sqlite3_reset(st);
    int rc = sqlite3_clear_bindings(st);
    if (w->rc == SQLITE_OK)
        wr_bind_rc(w, rc, "clearing bindings");
    return row;
}

int64_t
wr_insert(Wr *w, TraceStmt which)
{
    return wr_insert_stmt(w, w->db->stmts[which], k_insert_sql[which]);
}

sqlite3_stmt *
wr_stmt(Wr *w, TraceStmt which)
{
    return w->db->stmts[which];
}

void
wr_put(Wr *w, SlMap *m, uint64_t key, uint64_t val)
{
    if (!sl_map_put(m, key, val))
        w->oom = true;
}

/* The id an event's instruction has in the phase's module: its own id when the names agree,
 * else the id of the instruction with its name (a map built on first need), else
 * UINT32_MAX. */
uint32_t
wr_resolve(Wr *w, int phase, Ref r)
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
                wr_put(w, &w->by_name[phase], SL_MAP_KEY(w->instr_by_id[phase][id]->name), id);
    }
    uint64_t id = 0;
    return sl_map_get(&w->by_name[phase], SL_MAP_KEY(r.name), &id) ? (uint32_t)id : UINT32_MAX;
}

/* The row of an event's instruction, 0 when it is not in the module. */
int64_t
wr_row_of(Wr *w, int phase, Ref r)
{
    uint32_t id = wr_resolve(w, phase, r);
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
        uint32_t id = wr_resolve(w, AFTER, em[k].out);
        if (id != UINT32_MAX)
            w->emit_by_id[id] = (uint32_t)k + 1;
    }
    const EvCollective *co = w->db->collectives.data;
    for (size_t k = 0; k < w->db->collectives.len; k++) {
        uint32_t id = wr_resolve(w, AFTER, co[k].instr);
        if (id != UINT32_MAX)
            w->coll_by_id[id] = (uint32_t)k + 1;
    }
}

/* Gives both modules' instructions their row ids, in the order wr_write_module inserts them, from
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
        wr_bind_rc(w, rc != SQLITE_OK ? rc : rc2, "finding the next instr id");
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
    sqlite3_stmt *st = wr_stmt(w, ST_RUN);
    wr_bind_text(w, st, 1, sl_sym_cstr(in->name));
    wr_bind_text(w, st, 2, w->db->input_hash);
    wr_bind_i64(w, st, 3, info->num_partitions);
    wr_bind_text(w, st, 4, info->tool_version);
    wr_bind_text(w, st, 5, info->created_at);
    if (duration_ms >= 0)
        wr_bind_f64(w, st, 6, duration_ms);
    else
        wr_bind_null(w, st, 6);
    wr_bind_row(w, st, 7, w->instr_rows[0]);
    wr_bind_row(w, st, 8, w->instr_rows[1]);
    w->run_id = wr_insert(w, ST_RUN);

    /* Options: "key=value" lines; a line without '=' is a key with an empty value. */
    st = wr_stmt(w, ST_OPTION);
    const char *p = info->options.ptr, *end = p + info->options.len;
    while (p < end && w->rc == SQLITE_OK) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *eol = nl ? nl : end;
        const char *eq = memchr(p, '=', (size_t)(eol - p));
        const char *vend = eol > p && eol[-1] == '\r' ? eol - 1 : eol;
        if (vend > p) {
            const char *kend = eq ? eq : vend;
            const char *val = eq ? eq + 1 : vend;
            wr_bind_i64(w, st, 1, w->run_id);
            if (w->rc == SQLITE_OK)
                wr_bind_rc(w, sqlite3_bind_text(st, 2, p, (int)(kend - p), SQLITE_STATIC), "key");
            if (w->rc == SQLITE_OK)
                wr_bind_rc(w, sqlite3_bind_text(st, 3, val, (int)(vend - val), SQLITE_STATIC),
                           "value");
            (void)wr_insert(w, ST_OPTION);
        }
        p = eol + 1;
    }
}

/* The 'before' row an output instruction derives from: the IR link when it points into the
 * input module, else the emit event's source. */
int64_t
wr_source_row(Wr *w, const IrInstr *i)
{
    const IrInstr *d = i->derived_from;
    if (d && d->id < w->n_ids[BEFORE] && w->instr_by_id[BEFORE][d->id] == d)
        return w->rows_by_id[BEFORE][d->id];
    uint32_t ev = i->id < w->n_ids[AFTER] ? w->emit_by_id[i->id] : 0;
    if (ev)
        return wr_row_of(w, BEFORE, ((const EvEmit *)w->db->emits.data)[ev - 1].source);
    return 0;
}

void
wr_init(Wr *w, TraceDb *db)
{
    memset(w, 0, sizeof(*w));
    w->db = db;
    sl_buf_init(&w->text);
    sl_buf_init(&w->profile);
    sl_map_init(&w->list_idx);
    sl_arena_init(&w->scratch);
    sl_map_init(&w->by_name[BEFORE]);
    sl_map_init(&w->by_name[AFTER]);
    sl_map_init(&w->decision_row);
    sl_map_init(&w->reshard_row);
    sl_map_init(&w->loop_trips);
    sl_map_init(&w->branch_hint);
}

void
wr_fini(Wr *w)
{
    sl_buf_fini(&w->text);
    sl_buf_fini(&w->profile);
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
void
wr_write_all(Wr *w, const IrModule *out, double duration_ms)
{
    index_module(w, BEFORE, w->db->in);
    index_module(w, AFTER, out);
    if (!w->oom)
        index_events(w);
    assign_rows(w);
    write_run(w, w->db->in, duration_ms);
    wr_write_module(w, BEFORE);
    wr_write_module(w, AFTER);
    wr_write_decisions(w);
    wr_write_reshards(w);
    wr_write_loops(w);
    wr_write_collectives(w, out);
    wr_write_warnings(w);
    wr_write_origins(w);
    wr_write_memory(w);
    if (w->oom && w->rc == SQLITE_OK) {
        w->rc = SQLITE_NOMEM;
        w->what = "buffering rows";
    }
}

SlStatus
wr_prepare_all(TraceDb *db, SlError *err)
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
