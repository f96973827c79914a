/* reader.c - loads one run of a trace database into the plain structs of trace_run.h.
 * Owns: the read queries. Does not own: the cost model, which lives in the schema's views and
 * is read from them (collective_traffic, device_traffic), never recomputed here.
 * Invariant: all queries of one load run in one read transaction, so a run appended by another
 * process meanwhile cannot mix in; every string is copied into the caller's arena. */
#include <stdlib.h>
#include <string.h>

#include "trace/trace_int.h"
#include "trace/trace_run.h"

typedef struct Rd {
    TraceDb *db;
    SlArena *arena;
    TraceRun *run;
    int rc;           /* first SQLite failure */
    const char *what; /* the query that failed */
    bool oom;
    SlVec rows;      /* rows of the current query, copied to the arena at its end */
    SlMap instr_idx; /* instr.id -> index into run->instrs */
    SlMap decision_idx, reshard_idx, collective_idx;
} Rd;

typedef bool (*RowFn)(Rd *r, sqlite3_stmt *st);

static const char *
col_text(Rd *r, sqlite3_stmt *st, int col)
{
    const unsigned char *t = sqlite3_column_text(st, col);
    if (!t)
        return NULL;
    char *c = sl_arena_strndup(r->arena, (const char *)t, (size_t)sqlite3_column_bytes(st, col));
    if (!c)
        r->oom = true;
    return c ? c : "";
}

/* The index a foreign key column points to, or TRACE_NONE. */
static uint32_t
col_idx(const SlMap *m, sqlite3_stmt *st, int col)
{
    uint64_t idx = 0;
    if (sqlite3_column_type(st, col) == SQLITE_NULL)
        return TRACE_NONE;
    if (!sl_map_get(m, (uint64_t)sqlite3_column_int64(st, col), &idx))
        return TRACE_NONE;
    return (uint32_t)idx;
}

static void
put(Rd *r, SlMap *m, int64_t row, size_t idx)
{
    if (!sl_map_put(m, (uint64_t)row, idx))
        r->oom = true;
}

/* Runs `sql` with ?1 bound to the run id, calling `fn` per row. */
static void
query(Rd *r, const char *sql, RowFn fn)
{
    if (r->rc != SQLITE_OK || r->oom)
        return;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(r->db->sql, sql, -1, &st, NULL);
    if (rc == SQLITE_OK && sqlite3_bind_parameter_count(st) >= 1)
        rc = sqlite3_bind_int64(st, 1, r->run->id);
    while (rc == SQLITE_OK && !r->oom) {
        int step = sqlite3_step(st);
        if (step == SQLITE_DONE)
            break;
        if (step != SQLITE_ROW)
            rc = step;
        else if (!fn(r, st))
            r->oom = true;
    }
    int rc2 = sqlite3_finalize(st);
    if (rc == SQLITE_OK)
        rc = rc2;
    if (rc != SQLITE_OK) {
        r->rc = rc;
        r->what = sql;
    }
}

/* Moves the collected rows into the arena. */
static void *
take(Rd *r, size_t elem, size_t align, uint32_t *n)
{
    *n = 0;
    void *p = NULL;
    if (r->rows.len && !r->oom) {
        p = sl_arena_memdup(r->arena, r->rows.data, r->rows.len * elem, align);
        if (p)
            *n = (uint32_t)r->rows.len;
        else
            r->oom = true;
    }
    sl_vec_fini(&r->rows);
    return p;
}

#define PUSH(r, T, x) SL_VEC_PUSH(&(r)->rows, T, x)
#define TAKE(r, T, n) ((T *)take((r), sizeof(T), _Alignof(T), (n)))

static bool
row_option(Rd *r, sqlite3_stmt *st)
{
    TraceRunOption o = {col_text(r, st, 0), col_text(r, st, 1)};
    return PUSH(r, TraceRunOption, o);
}

static bool
row_instr(Rd *r, sqlite3_stmt *st)
{
    TraceRunInstr i = {0};
    const char *phase = (const char *)sqlite3_column_text(st, 1);
    i.phase = phase && strcmp(phase, "after") == 0 ? TRACE_AFTER : TRACE_BEFORE;
    i.ir_id = (uint32_t)sqlite3_column_int64(st, 2);
    i.computation = col_text(r, st, 3);
    i.is_root = sqlite3_column_int(st, 4) != 0;
    i.name = col_text(r, st, 5);
    i.opcode = col_text(r, st, 6);
    i.shape = col_text(r, st, 7);
    i.sharding = col_text(r, st, 8);
    i.size_bytes = sqlite3_column_int64(st, 9);
    i.op_name = col_text(r, st, 10);
    i.source_file = col_text(r, st, 11);
    i.source_line = sqlite3_column_int64(st, 12);
    i.derived_from = col_idx(&r->instr_idx, st, 13); /* 'before' rows come first */
    i.param_number = sqlite3_column_type(st, 14) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 14);
    put(r, &r->instr_idx, sqlite3_column_int64(st, 0), r->rows.len);
    return PUSH(r, TraceRunInstr, i);
}

typedef struct EdgeRow {
    uint32_t user, index, operand;
} EdgeRow;

static bool
row_edge(Rd *r, sqlite3_stmt *st)
{
    EdgeRow e = {col_idx(&r->instr_idx, st, 0), (uint32_t)sqlite3_column_int64(st, 1),
                 col_idx(&r->instr_idx, st, 2)};
    if (e.user == TRACE_NONE || e.operand == TRACE_NONE)
        return true;
    return PUSH(r, EdgeRow, e);
}

/* Edges arrive ordered by (user, operand_index): one run of rows per user. */
static void
attach_edges(Rd *r)
{
    uint32_t n = 0;
    EdgeRow *e = TAKE(r, EdgeRow, &n);
    for (uint32_t k = 0; k < n;) {
        uint32_t end = k;
        while (end < n && e[end].user == e[k].user)
            end++;
        TraceRunInstr *u = &r->run->instrs[e[k].user];
        u->n_operands = e[end - 1].index + 1;
        u->operands = SL_NEW_ARRAY(r->arena, uint32_t, u->n_operands);
        if (!u->operands) {
            r->oom = true;
            return;
        }
        for (uint32_t j = 0; j < u->n_operands; j++)
            u->operands[j] = TRACE_NONE;
        for (uint32_t j = k; j < end; j++)
            u->operands[e[j].index] = e[j].operand;
        k = end;
    }
}

static bool
row_call(Rd *r, sqlite3_stmt *st)
{
    TraceRunCall c = {col_idx(&r->instr_idx, st, 0), col_text(r, st, 1), col_text(r, st, 2)};
    if (c.instr == TRACE_NONE)
        return true;
    return PUSH(r, TraceRunCall, c);
}

static bool
row_decision(Rd *r, sqlite3_stmt *st)
{
    TraceRunDecision d = {0};
    d.seq = (uint32_t)sqlite3_column_int64(st, 1);
    d.instr = col_idx(&r->instr_idx, st, 2);
    d.handler = col_text(r, st, 3);
    d.strategy = col_text(r, st, 4);
    d.reason = col_text(r, st, 5);
    put(r, &r->decision_idx, sqlite3_column_int64(st, 0), r->rows.len);
    return PUSH(r, TraceRunDecision, d);
}

/* Alternatives and numbers: counted by a first pass, then filled in order. */
static bool
row_alt_count(Rd *r, sqlite3_stmt *st)
{
    uint32_t d = col_idx(&r->decision_idx, st, 0);
    if (d != TRACE_NONE)
        r->run->decisions[d].n_alternatives++;
    return true;
}

static bool
row_number_count(Rd *r, sqlite3_stmt *st)
{
    uint32_t d = col_idx(&r->decision_idx, st, 0);
    if (d != TRACE_NONE)
        r->run->decisions[d].n_numbers++;
    return true;
}

static bool
alloc_decision_lists(Rd *r)
{
    for (uint32_t k = 0; k < r->run->n_decisions; k++) {
        TraceRunDecision *d = &r->run->decisions[k];
        if (d->n_alternatives &&
            !(d->alternatives = SL_NEW_ARRAY(r->arena, const char *, d->n_alternatives)))
            return false;
        if (d->n_numbers && !(d->numbers = SL_NEW_ARRAY(r->arena, TraceRunNumber, d->n_numbers)))
            return false;
        d->n_alternatives = d->n_numbers = 0; /* refilled as rows arrive */
    }
    return true;
}

static bool
row_alt(Rd *r, sqlite3_stmt *st)
{
    uint32_t k = col_idx(&r->decision_idx, st, 0);
    if (k != TRACE_NONE) {
        TraceRunDecision *d = &r->run->decisions[k];
        d->alternatives[d->n_alternatives++] = col_text(r, st, 1);
    }
    return true;
}

static bool
row_number(Rd *r, sqlite3_stmt *st)
{
    uint32_t k = col_idx(&r->decision_idx, st, 0);
    if (k != TRACE_NONE) {
        TraceRunDecision *d = &r->run->decisions[k];
        TraceRunNumber *n = &d->numbers[d->n_numbers++];
        n->key = col_text(r, st, 1);
        n->num = sqlite3_column_double(st, 2);
        n->str = col_text(r, st, 3);
    }
    return true;
}

/* ---- decision chains (see trace_run.h) ---- */

static bool
number_of(const TraceRunDecision *d, const char *key, double *out)
{
    for (uint32_t k = 0; k < d->n_numbers; k++)
        if (!d->numbers[k].str && strcmp(d->numbers[k].key, key) == 0) {
            *out = d->numbers[k].num;
            return true;
        }
    return false;
}

/* (instr, decision index) pairs: unique, so the order is total and qsort deterministic. */
static int
cmp_by_instr(const void *a, const void *b)
{
    const uint32_t *x = a, *y = b;
    return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : (x[1] < y[1] ? -1 : x[1] > y[1]);
}

/* Orders one instruction's decisions `d` (n, recording order) top-down in place. */
static void
order_chain(const TraceRun *run, uint32_t *d, uint32_t n)
{
    double depth = 0, v = 0;
    bool all_depth = true;
    for (uint32_t k = 0; k < n && all_depth; k++)
        all_depth = number_of(&run->decisions[d[k]], "depth", &depth);
    if (all_depth) { /* insertion sort: stable, chains are short */
        for (uint32_t k = 1; k < n; k++) {
            uint32_t x = d[k], j = k;
            (void)number_of(&run->decisions[x], "depth", &depth);
            while (j > 0 && number_of(&run->decisions[d[j - 1]], "depth", &v) && v > depth) {
                d[j] = d[j - 1];
                j--;
            }
            d[j] = x;
        }
        return;
    }
    for (uint32_t k = 0; k + 1 < n; k++) {
        const TraceRunDecision *x = &run->decisions[d[k]];
        if (number_of(x, "loop_partitions", &v) && !number_of(x, "partitions", &v)) {
            uint32_t t = d[k];
            d[k] = d[k + 1];
            d[k + 1] = t;
            k++;
        }
    }
}

/* Sets level and chain_length of every decision. */
static bool
chain_decisions(TraceRun *run)
{
    uint32_t n = run->n_decisions;
    uint32_t(*by)[2] = n ? malloc((size_t)n * sizeof(*by)) : NULL;
    uint32_t *chain = n ? malloc((size_t)n * sizeof(*chain)) : NULL;
    if (n && (!by || !chain)) {
        free(by);
        free(chain);
        return false;
    }
    for (uint32_t k = 0; k < n; k++) {
        by[k][0] = run->decisions[k].instr;
        by[k][1] = k;
    }
    if (n)
        qsort(by, n, sizeof(*by), cmp_by_instr);
    for (uint32_t k = 0; k < n;) {
        uint32_t end = k;
        while (end < n && by[end][0] == by[k][0])
            end++;
        for (uint32_t j = k; j < end; j++)
            chain[j - k] = by[j][1];
        if (by[k][0] != TRACE_NONE)
            order_chain(run, chain, end - k);
        for (uint32_t j = k; j < end; j++) {
            TraceRunDecision *d = &run->decisions[chain[j - k]];
            d->level = by[k][0] != TRACE_NONE ? j - k + 1 : 1;
            d->chain_length = by[k][0] != TRACE_NONE ? end - k : 1;
        }
        k = end;
    }
    free(by);
    free(chain);
    return true;
}

static bool
row_reshard(Rd *r, sqlite3_stmt *st)
{
    TraceRunReshard x = {0};
    x.seq = (uint32_t)sqlite3_column_int64(st, 1);
    x.requester = col_idx(&r->instr_idx, st, 2);
    x.value = col_idx(&r->instr_idx, st, 3);
    x.value_name = col_text(r, st, 4);
    x.from = col_text(r, st, 5);
    x.to = col_text(r, st, 6);
    x.method = col_text(r, st, 7);
    x.result = col_idx(&r->instr_idx, st, 8);
    x.result_name = col_text(r, st, 9);
    put(r, &r->reshard_idx, sqlite3_column_int64(st, 0), r->rows.len);
    return PUSH(r, TraceRunReshard, x);
}

static bool
row_collective(Rd *r, sqlite3_stmt *st)
{
    TraceRunCollective c = {0};
    c.instr = col_idx(&r->instr_idx, st, 1);
    c.kind = col_text(r, st, 2);
    c.has_channel_id = sqlite3_column_type(st, 3) != SQLITE_NULL;
    c.channel_id = sqlite3_column_int64(st, 3);
    c.group_size = sqlite3_column_int64(st, 4);
    c.n_groups = sqlite3_column_int64(st, 5);
    c.shape = col_text(r, st, 6);
    c.bytes = sqlite3_column_double(st, 7);
    c.trip_count = sqlite3_column_type(st, 8) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 8);
    c.source = col_idx(&r->instr_idx, st, 9);
    c.cause = col_text(r, st, 10);
    c.reshard = col_idx(&r->reshard_idx, st, 11);
    c.decision = col_idx(&r->decision_idx, st, 12);
    c.send_bytes = sqlite3_column_double(st, 13);
    c.max_device_send_bytes = sqlite3_column_double(st, 14);
    c.max_trip_count =
        sqlite3_column_type(st, 15) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 15);
    if (c.n_groups < 0 || c.n_groups >= UINT32_MAX)
        c.n_groups = 0;
    c.group_offsets = SL_NEW_ARRAY(r->arena, uint32_t, (size_t)c.n_groups + 1);
    if (!c.group_offsets)
        return false;
    put(r, &r->collective_idx, sqlite3_column_int64(st, 0), r->rows.len);
    return PUSH(r, TraceRunCollective, c);
}

typedef struct GroupRow {
    uint32_t collective, group;
    int64_t device;
} GroupRow;

static bool
row_group(Rd *r, sqlite3_stmt *st)
{
    GroupRow g = {col_idx(&r->collective_idx, st, 0), (uint32_t)sqlite3_column_int64(st, 1),
                  sqlite3_column_int64(st, 3)};
    if (g.collective == TRACE_NONE)
        return true;
    return PUSH(r, GroupRow, g);
}

/* Group rows arrive ordered by (collective, group, position). */
static void
attach_groups(Rd *r)
{
    uint32_t n = 0;
    GroupRow *g = TAKE(r, GroupRow, &n);
    for (uint32_t k = 0; k < n;) {
        uint32_t end = k;
        while (end < n && g[end].collective == g[k].collective)
            end++;
        TraceRunCollective *c = &r->run->collectives[g[k].collective];
        c->devices = SL_NEW_ARRAY(r->arena, int64_t, end - k);
        if (!c->devices) {
            r->oom = true;
            return;
        }
        for (uint32_t j = k; j < end; j++) {
            c->devices[j - k] = g[j].device;
            if (g[j].group < c->n_groups)
                c->group_offsets[g[j].group + 1] = j - k + 1;
        }
        for (uint32_t q = 1; q <= c->n_groups; q++) /* empty groups keep the previous end */
            if (c->group_offsets[q] < c->group_offsets[q - 1])
                c->group_offsets[q] = c->group_offsets[q - 1];
        k = end;
    }
}

static bool
row_loop(Rd *r, sqlite3_stmt *st)
{
    TraceRunLoop l = {col_idx(&r->instr_idx, st, 0),
                      col_idx(&r->instr_idx, st, 1),
                      col_text(r, st, 2),
                      col_text(r, st, 3),
                      sqlite3_column_int64(st, 4),
                      sqlite3_column_int64(st, 5)};
    return PUSH(r, TraceRunLoop, l);
}

static bool
row_warning(Rd *r, sqlite3_stmt *st)
{
    TraceRunWarning w = {col_idx(&r->instr_idx, st, 0), col_text(r, st, 1)};
    return PUSH(r, TraceRunWarning, w);
}

static bool
row_device(Rd *r, sqlite3_stmt *st)
{
    TraceRunDevice d = {sqlite3_column_int64(st, 0), sqlite3_column_double(st, 1),
                        sqlite3_column_double(st, 2), (uint32_t)sqlite3_column_int64(st, 3),
                        (uint32_t)sqlite3_column_int64(st, 4)};
    return PUSH(r, TraceRunDevice, d);
}

static bool
row_run(Rd *r, sqlite3_stmt *st)
{
    TraceRun *run = r->run;
    run->id = sqlite3_column_int64(st, 0);
    run->module = col_text(r, st, 1);
    run->input_hash = col_text(r, st, 2);
    run->num_partitions = sqlite3_column_int64(st, 3);
    run->tool_version = col_text(r, st, 4);
    run->created_at = col_text(r, st, 5);
    run->duration_ms =
        sqlite3_column_type(st, 6) == SQLITE_NULL ? -1.0 : sqlite3_column_double(st, 6);
    return true;
}

static void
load_tables(Rd *r)
{
    TraceRun *run = r->run;
    query(r, "SELECT key, value FROM run_option WHERE run_id = ?1 ORDER BY key", row_option);
    run->options = TAKE(r, TraceRunOption, &run->n_options);
    query(r,
          "SELECT id, phase, ir_id, computation, is_root, name, opcode, shape, sharding,"
          " size_bytes, op_name, source_file, source_line, derived_from, param_number"
          " FROM instr WHERE run_id = ?1 ORDER BY id",
          row_instr);
    run->instrs = TAKE(r, TraceRunInstr, &run->n_instrs);
    while (run->n_before < run->n_instrs && run->instrs[run->n_before].phase == TRACE_BEFORE)
        run->n_before++;
    query(r,
          "SELECT e.user, e.operand_index, e.operand FROM edge e JOIN instr u ON u.id = e.user"
          " WHERE u.run_id = ?1 ORDER BY e.user, e.operand_index",
          row_edge);
    attach_edges(r);
    query(r,
          "SELECT instr, role, computation FROM called_computation WHERE run_id = ?1"
          " ORDER BY instr, idx",
          row_call);
    run->calls = TAKE(r, TraceRunCall, &run->n_calls);
    query(r,
          "SELECT id, seq, instr, handler, strategy, reason FROM decision WHERE run_id = ?1"
          " ORDER BY id",
          row_decision);
    run->decisions = TAKE(r, TraceRunDecision, &run->n_decisions);
    static const char alts[] = "SELECT a.decision_id, a.strategy FROM decision_alt a"
                               " JOIN decision d ON d.id = a.decision_id WHERE d.run_id = ?1"
                               " ORDER BY a.decision_id, a.idx";
    static const char nums[] = "SELECT n.decision_id, n.key, n.num, n.str FROM decision_number n"
                               " JOIN decision d ON d.id = n.decision_id WHERE d.run_id = ?1"
                               " ORDER BY n.decision_id, n.idx";
    query(r, alts, row_alt_count);
    query(r, nums, row_number_count);
    if (r->rc == SQLITE_OK && !r->oom && !alloc_decision_lists(r))
        r->oom = true;
    query(r, alts, row_alt);
    query(r, nums, row_number);
    if (r->rc == SQLITE_OK && !r->oom && !chain_decisions(run))
        r->oom = true;
    query(r,
          "SELECT id, seq, requester, value, value_name, from_sharding, to_sharding, method,"
          " result, result_name FROM reshard WHERE run_id = ?1 ORDER BY id",
          row_reshard);
    run->reshards = TAKE(r, TraceRunReshard, &run->n_reshards);
    query(r,
          "SELECT c.id, c.instr, c.kind, c.channel_id, c.group_size, c.n_groups, c.shape,"
          " c.bytes, c.trip_count, c.source, c.cause, c.reshard_id, c.decision_id,"
          " t.send_bytes, t.max_device_send_bytes, c.max_trip_count"
          " FROM collective c JOIN collective_traffic t ON t.collective_id = c.id"
          " WHERE c.run_id = ?1 AND t.run_id = ?1 ORDER BY c.id",
          row_collective);
    run->collectives = TAKE(r, TraceRunCollective, &run->n_collectives);
    query(r,
          "SELECT g.collective_id, g.group_idx, g.position, g.device FROM collective_group g"
          " JOIN collective c ON c.id = g.collective_id WHERE c.run_id = ?1"
          " ORDER BY g.collective_id, g.group_idx, g.position",
          row_group);
    attach_groups(r);
    query(r,
          "SELECT dot, loop, loop_name, variant, iterations, bytes_per_iteration"
          " FROM windowed_loop WHERE run_id = ?1 ORDER BY id",
          row_loop);
    run->loops = TAKE(r, TraceRunLoop, &run->n_loops);
    query(r, "SELECT instr, message FROM warning WHERE run_id = ?1 ORDER BY id", row_warning);
    run->warnings = TAKE(r, TraceRunWarning, &run->n_warnings);
    query(r,
          "SELECT device, send_bytes, recv_bytes, collectives, unknown_trip_collectives"
          " FROM device_traffic WHERE run_id = ?1 ORDER BY device",
          row_device);
    run->devices = TAKE(r, TraceRunDevice, &run->n_devices);
}

SlStatus
trace_run_load(TraceDb *db, int64_t run_id, SlArena *arena, const TraceRun **out, SlError *err)
{
    SlSrcLoc loc = trace_db_loc(db);
    *out = NULL;
    Rd r = {.db = db, .arena = arena, .run = SL_NEW(arena, TraceRun)};
    if (!r.run)
        return sl_fail(err, SL_ERR_NOMEM, loc, "out of memory");
    sl_map_init(&r.instr_idx);
    sl_map_init(&r.decision_idx);
    sl_map_init(&r.reshard_idx);
    sl_map_init(&r.collective_idx);
    r.run->id = run_id;
    r.rc = trace_db_exec(db, "BEGIN");
    r.what = "starting a read transaction";
    query(&r,
          run_id ? "SELECT id, module, input_hash, num_partitions, tool_version, created_at,"
                   " duration_ms FROM run WHERE id = ?1"
                 : "SELECT id, module, input_hash, num_partitions, tool_version, created_at,"
                   " duration_ms FROM run ORDER BY id DESC LIMIT 1",
          row_run);
    bool found = r.run->module != NULL;
    if (found)
        load_tables(&r);
    trace_db_rollback(db); /* read-only: ending the transaction cannot lose anything */
    sl_vec_fini(&r.rows);
    sl_map_fini(&r.instr_idx);
    sl_map_fini(&r.decision_idx);
    sl_map_fini(&r.reshard_idx);
    sl_map_fini(&r.collective_idx);
    if (r.rc != SQLITE_OK)
        return trace_db_fail(db, r.rc, r.what, err);
    if (r.oom || sl_arena_failed(arena))
        return sl_fail(err, SL_ERR_NOMEM, loc, "out of memory");
    if (!found) {
        if (run_id)
            return sl_fail(err, SL_ERR_INVALID, loc, "no run %lld in the trace database",
                           (long long)run_id);
        return sl_fail(err, SL_ERR_INVALID, loc, "the trace database holds no runs");
    }
    *out = r.run;
    return SL_OK;
}

const TraceRunInstr *
trace_run_find_instr(const TraceRun *run, TracePhase phase, const char *name)
{
    uint32_t lo = phase == TRACE_BEFORE ? 0 : run->n_before;
    uint32_t hi = phase == TRACE_BEFORE ? run->n_before : run->n_instrs;
    for (uint32_t k = lo; k < hi; k++)
        if (strcmp(run->instrs[k].name, name) == 0)
            return &run->instrs[k];
    return NULL;
}
