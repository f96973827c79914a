/* test_trace.c - the trace database: schema and version check, every row of a hand-fed run,
 * atomicity, two concurrent writers, the cost-model views, the reader and explain.
 * Modules are parsed from HLO text; events are fed to the sink by hand, the way the
 * partitioner would. This file reads the database with SQL directly (sqlite3.h) to check the
 * schema as users see it; the library itself keeps SQLite inside src/trace. */
#include <math.h>
#include <setjmp.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "sharding/shd.h"
#include "trace_fixture.h"

static IrInstr *
instr(const IrModule *m, const char *name)
{
    for (uint32_t c = 0; c < m->n_comps; c++)
        for (uint32_t k = 0; k < m->comps[c]->n_instrs; k++)
            if (strcmp(sl_sym_cstr(m->comps[c]->instrs[k]->name), name) == 0)
                return m->comps[c]->instrs[k];
    fail_msg("no instruction %s", name);
    return NULL;
}

/* ---- raw SQL helpers (the test's view of the file) ---- */

static sqlite3 *
sql_open(const char *path)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(sqlite3_busy_timeout(db, 10000), SQLITE_OK);
    return db;
}

/* Prepares `sql` and steps to its first row; the caller reads a column and finalizes. */
static sqlite3_stmt *
sql_first_row(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        fail_msg("%s: %s", sql, sqlite3_errmsg(db));
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    return st;
}

static int64_t
sql_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = sql_first_row(db, sql);
    int64_t v = sqlite3_column_int64(st, 0);
    assert_int_equal(sqlite3_finalize(st), SQLITE_OK);
    return v;
}

static double
sql_real(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = sql_first_row(db, sql);
    double v = sqlite3_column_double(st, 0);
    assert_int_equal(sqlite3_finalize(st), SQLITE_OK);
    return v;
}

/* The first column of the first row as text ("NULL" for NULL) into a static-free buffer. */
static void
sql_text(sqlite3 *db, const char *sql, char *out, size_t cap)
{
    sqlite3_stmt *st = sql_first_row(db, sql);
    const unsigned char *t = sqlite3_column_text(st, 0);
    snprintf(out, cap, "%s", t ? (const char *)t : "NULL");
    assert_int_equal(sqlite3_finalize(st), SQLITE_OK);
}

#define ASSERT_SQL_TEXT(db, sql, want)                                                             \
    do {                                                                                           \
        char got_[256];                                                                            \
        sql_text((db), (sql), got_, sizeof(got_));                                                 \
        assert_string_equal(got_, (want));                                                         \
    } while (0)

/* ---- the contracting-dim dot used by several tests ---- */

static const char k_dot_in[] =
    "HloModule dotmod, num_partitions=2\n"
    "\n"
    "ENTRY main {\n"
    "  lhs = f32[8,16] parameter(0), sharding={devices=[1,2]0,1}\n"
    "  rhs = f32[16,4] parameter(1), sharding={devices=[2,1]0,1}\n"
    "  ROOT dot = f32[8,4] dot(lhs, rhs), lhs_contracting_dims={1}, rhs_contracting_dims={0},"
    " sharding={replicated}, metadata={op_name=\"jit(f)/dot_general\" source_file=\"model.py\""
    " source_line=42}\n"
    "}\n";

static const char k_dot_out[] =
    "HloModule dotmod_spmd, num_partitions=2\n"
    "\n"
    "add {\n"
    "  x = f32[] parameter(0)\n"
    "  y = f32[] parameter(1)\n"
    "  ROOT sum = f32[] add(x, y)\n"
    "}\n"
    "\n"
    "ENTRY main {\n"
    "  lhs.1 = f32[8,8] parameter(0), sharding={devices=[1,2]0,1}\n"
    "  rhs.1 = f32[8,4] parameter(1), sharding={devices=[2,1]0,1}\n"
    "  dot.1 = f32[8,4] dot(lhs.1, rhs.1), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n"
    "  ROOT all-reduce.1 = f32[8,4] all-reduce(dot.1), channel_id=1, replica_groups={{0,1}},"
    " use_global_device_ids=true, to_apply=add\n"
    "}\n";

#define OPTIONS_TEXT "threshold_for_windowed_einsum_mib=256\ncache_all_gather=true\n"
static const TraceRunInfo k_info = {
    "0.1.0-test", "2024-01-02T03:04:05Z", {"abc",        3                       },
      {OPTIONS_TEXT, sizeof(OPTIONS_TEXT) - 1},
      2, NULL, 0
};

/* Feeds the events the partitioner would send for the dot (contracting strategy). */
static void
feed_dot_events(TraceFx *fx, TraceSink *s, const IrModule *in, const IrModule *out)
{
    const IrInstr *dot = instr(in, "dot"), *lhs = instr(in, "lhs"), *rhs = instr(in, "rhs");
    const IrInstr *dot1 = instr(out, "dot.1"), *ar = instr(out, "all-reduce.1");
    s->ops->emit(s, instr(out, "lhs.1"), lhs);
    s->ops->emit(s, instr(out, "rhs.1"), rhs);
    s->ops->emit(s, dot1, dot);
    s->ops->emit(s, ar, dot);
    static const char *const alts[] = {"batch", "non_contracting", "windowed_einsum"};
    const TraceKV nums[] = {
        {"lhs_bytes",       512, NULL          },
        {"threshold_mib",   256, NULL          },
        {"output_sharding", 0,   "{replicated}"}
    };
    TraceDecision d = {
        dot,  "dot", "contracting", "both operands are split along the contracting dimension",
        alts, 3,     nums,          3};
    s->ops->decision(s, &d);
    const ShdSharding *tiled = ir_instr_sharding(lhs);
    TraceReshard r = {dot, instr(out, "lhs.1"), tiled, tiled, "cache-hit", instr(out, "lhs.1"), 1};
    s->ops->reshard(s, &r);
    const ShdSharding *repl = shd_replicated(&fx->arena);
    TraceReshard r2 = {dot, dot1, ir_instr_sharding(rhs), repl, "all-reduce", ar, 2};
    s->ops->reshard(s, &r2);
    TraceCollective c = {ar, dot, 0, "dot"};
    s->ops->collective(s, &c);
    s->ops->warning(s, lhs, TRACE_WARN_OTHER, "test warning");
}

/* Begins a run of the dot module with k_info and feeds its events; end or abort it next. */
static void
begin_dot_run(TraceFx *fx, TraceDb *db, const IrModule *in, const IrModule *out)
{
    SlError err = {0};
    TraceSink *sink = NULL;
    assert_int_equal(trace_db_begin_run(db, in, &k_info, &sink, &err), SL_OK);
    feed_dot_events(fx, sink, in, out);
}

static int64_t
write_dot_run(TraceFx *fx, TraceDb *db)
{
    IrModule *in = tfx_parse(fx, k_dot_in), *out = tfx_parse(fx, k_dot_out);
    SlError err = {0};
    begin_dot_run(fx, db, in, out);
    int64_t run_id = 0;
    SlStatus st = trace_db_end_run(db, out, 12.5, &run_id, &err);
    if (st != SL_OK)
        fail_msg("end_run: %s", err.msg);
    ir_module_fini(in);
    ir_module_fini(out);
    return run_id;
}

/* ---- schema and version ---- */

static void
test_schema_created_and_version_checked(void **state)
{
    TraceFx *fx = *state;
    SlError err = {0};
    TraceDb *db = NULL;
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_READ, &db, &err), SL_ERR_IO);
    assert_null(db);

    /* A new file that ends up holding no run is removed again on close, with SQLite's side
     * files: a failed first --trace leaves nothing behind. */
    err = (SlError){0};
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_APPEND, &db, &err), SL_OK);
    assert_int_equal(access(fx->path, F_OK), 0);
    trace_db_close(db);
    assert_int_not_equal(access(fx->path, F_OK), 0);
    char side[128];
    snprintf(side, sizeof(side), "%s-journal", fx->path);
    assert_int_not_equal(access(side, F_OK), 0);

    assert_int_equal(trace_db_open(fx->path, TRACE_DB_APPEND, &db, &err), SL_OK);
    write_dot_run(fx, db);
    trace_db_close(db);
    sqlite3 *raw = sql_open(fx->path);
    assert_int_equal(sql_int(raw, "PRAGMA user_version"), trace_db_schema_version());
    assert_true(trace_db_schema_version() >= 1);
    static const char *const objects[] = {"run",
                                          "run_option",
                                          "instr",
                                          "edge",
                                          "called_computation",
                                          "decision",
                                          "decision_alt",
                                          "decision_number",
                                          "reshard",
                                          "collective",
                                          "collective_group",
                                          "windowed_loop",
                                          "warning",
                                          "collective_device",
                                          "device_traffic",
                                          "collective_traffic",
                                          "source_traffic"};
    for (size_t k = 0; k < SL_COUNTOF(objects); k++) {
        char q[160];
        snprintf(q, sizeof(q), "SELECT count(*) FROM sqlite_schema WHERE name = '%s'", objects[k]);
        if (sql_int(raw, q) != 1)
            fail_msg("schema object %s missing", objects[k]);
    }
    /* Reopening (both modes) accepts our own version and does not recreate anything. */
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_APPEND, &db, &err), SL_OK);
    trace_db_close(db);
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_READ, &db, &err), SL_OK);
    trace_db_close(db);

    /* Another version: a clear SL_ERR_DB naming both versions, in both modes. */
    assert_int_equal(sqlite3_exec(raw, "PRAGMA user_version = 99", NULL, NULL, NULL), SQLITE_OK);
    for (int mode = TRACE_DB_READ; mode <= TRACE_DB_APPEND; mode++) {
        err = (SlError){0};
        assert_int_equal(trace_db_open(fx->path, (TraceDbMode)mode, &db, &err), SL_ERR_DB);
        assert_null(db);
        char want[64];
        snprintf(want, sizeof(want), "newer than the version %d", trace_db_schema_version());
        assert_non_null(strstr(err.msg, "version 99"));
        assert_non_null(strstr(err.msg, want));
        assert_string_equal(err.loc.path, fx->path);
    }
    /* An older trace says so, and what to do. */
    assert_int_equal(sqlite3_exec(raw, "PRAGMA user_version = 4", NULL, NULL, NULL), SQLITE_OK);
    err = (SlError){0};
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_READ, &db, &err), SL_ERR_DB);
    char old[96];
    snprintf(old, sizeof(old), "schema version 4, older than the version %d",
             trace_db_schema_version());
    assert_non_null(strstr(err.msg, old));
    assert_non_null(strstr(err.msg, "recorded by an older shardlens; record the run again"));
    /* A database that is not ours (tables, user_version 0) is refused, not written into. */
    assert_int_equal(sqlite3_exec(raw, "PRAGMA user_version = 0", NULL, NULL, NULL), SQLITE_OK);
    err = (SlError){0};
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_APPEND, &db, &err), SL_ERR_DB);
    assert_non_null(strstr(err.msg, "not a shardlens trace"));
    assert_int_equal(sqlite3_close(raw), SQLITE_OK);

    /* Not a database at all. */
    FILE *f = fopen(fx->path, "w");
    assert_non_null(f);
    fputs("this is not sqlite, just text that is long enough to have a header......\n", f);
    assert_int_equal(fclose(f), 0);
    /* The error names the caller's path, alive after the handle is gone (issue 7: it pointed
     * at SQLite's copy of the name, freed with the connection: a use-after-free). */
    for (int mode = TRACE_DB_READ; mode <= TRACE_DB_APPEND; mode++) {
        err = (SlError){0};
        assert_int_equal(trace_db_open(fx->path, (TraceDbMode)mode, &db, &err), SL_ERR_DB);
        assert_null(db);
        assert_ptr_equal(err.loc.path, fx->path);
        assert_string_equal(err.loc.path, fx->path);
        assert_non_null(strstr(err.msg, "not a database"));
    }
}

/* ---- atomicity ---- */

static void
assert_db_empty(const char *path)
{
    static const char *const tables[] = {"run",
                                         "run_option",
                                         "instr",
                                         "edge",
                                         "decision",
                                         "decision_alt",
                                         "decision_number",
                                         "reshard",
                                         "collective",
                                         "collective_group",
                                         "windowed_loop",
                                         "warning",
                                         "called_computation"};
    sqlite3 *raw = sql_open(path);
    for (size_t k = 0; k < SL_COUNTOF(tables); k++) {
        char q[96];
        snprintf(q, sizeof(q), "SELECT count(*) FROM %s", tables[k]);
        if (sql_int(raw, q) != 0)
            fail_msg("%s is not empty", tables[k]);
    }
    assert_int_equal(sqlite3_close(raw), SQLITE_OK);
}

/* ---- the memory estimate: rows, the peak's buffers, the view, the reader ---- */

/* The dot run: before, lhs 512 + rhs 256 + dot 128 = 896 at dot; after, lhs.1 256 + rhs.1 128
 * + dot.1 128 + all-reduce.1 128 = 640 at the all-reduce, for devices [0,1]. */
static void
test_memory_rows(void **state)
{
    TraceFx *fx = *state;
    SlError err = {0};
    TraceDb *db = NULL;
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_APPEND, &db, &err), SL_OK);
    (void)write_dot_run(fx, db);
    trace_db_close(db);
    sqlite3 *raw = sql_open(fx->path);
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM memory"), 2);
    assert_int_equal(sql_int(raw, "SELECT peak_bytes FROM memory WHERE phase = 'before'"), 896);
    assert_int_equal(sql_int(raw, "SELECT parameter_bytes FROM memory WHERE phase = 'before'"),
                     768);
    assert_int_equal(sql_int(raw, "SELECT peak_bytes FROM memory WHERE phase = 'after'"), 640);
    assert_int_equal(sql_int(raw, "SELECT output_bytes FROM memory WHERE phase = 'after'"), 128);
    ASSERT_SQL_TEXT(raw, "SELECT devices FROM memory WHERE phase = 'after'", "[0,1]");
    ASSERT_SQL_TEXT(raw, "SELECT profile FROM memory WHERE phase = 'before'", "[768,768,896]");
    ASSERT_SQL_TEXT(raw, "SELECT profile FROM memory WHERE phase = 'after'",
                    "[384,384,512,640]");
    ASSERT_SQL_TEXT(raw, "SELECT i.name FROM memory m JOIN instr i ON i.id = m.peak_instr"
                         " WHERE m.phase = 'after'", "all-reduce.1");
    ASSERT_SQL_TEXT(raw, "SELECT group_concat(buffer || ':' || bytes || ':' || kind || ':' ||"
                         " source, ' ') FROM (SELECT * FROM memory_peak WHERE phase = 'after'"
                         " ORDER BY rank)",
                    "lhs.1:256:parameter:lhs rhs.1:128:parameter:rhs dot.1:128:temp:dot "
                    "all-reduce.1:128:output:dot");
    assert_int_equal(sqlite3_close(raw), SQLITE_OK);

    const TraceRun *run = tfx_load(fx, 0);
    assert_int_equal(run->n_memory, 2);
    assert_int_equal(run->memory[0].phase, TRACE_BEFORE);
    assert_int_equal(run->memory[0].n_devices, 0);
    assert_int_equal(run->memory[0].n_top, 3);
    assert_string_equal(run->instrs[run->memory[0].peak_instr].name, "dot");
    const TraceRunMemory *m = &run->memory[1];
    assert_int_equal(m->phase, TRACE_AFTER);
    assert_int_equal(m->n_devices, 2);
    assert_int_equal(m->devices[1], 1);
    assert_int_equal(m->peak_bytes, 640);
    assert_int_equal(m->n_top, 4);
    assert_string_equal(run->instrs[m->top[0].instr].name, "lhs.1");
    assert_string_equal(m->top[3].kind, "output");
    assert_int_equal(m->n_profile, 4);
    assert_int_equal(m->profile_step, 1);
    assert_int_equal(m->profile[2], 512);
    assert_int_equal(m->profile[3], 640);
}

/* ---- one run, every row ---- */

static void
test_run_rows(void **state)
{
    TraceFx *fx = *state;
    SlError err = {0};
    TraceDb *db = NULL;
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_APPEND, &db, &err), SL_OK);
    int64_t run_id = write_dot_run(fx, db);
    assert_int_equal(run_id, 1);
    trace_db_close(db);

    sqlite3 *raw = sql_open(fx->path);
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM run"), 1);
    ASSERT_SQL_TEXT(raw, "SELECT module FROM run", "dotmod");
    ASSERT_SQL_TEXT(raw, "SELECT tool_version FROM run", "0.1.0-test");
    ASSERT_SQL_TEXT(raw, "SELECT created_at FROM run", "2024-01-02T03:04:05Z");
    assert_int_equal(sql_int(raw, "SELECT num_partitions FROM run"), 2);
    assert_true(sql_real(raw, "SELECT duration_ms FROM run") == 12.5);
    assert_int_equal(sql_int(raw, "SELECT length(input_hash) FROM run"), 16);
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM run_option"), 2);
    ASSERT_SQL_TEXT(raw, "SELECT value FROM run_option WHERE key = 'cache_all_gather'", "true");

    /* Instructions: 3 before, 3 + 4 after (the reducer computation too). */
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM instr WHERE phase = 'before'"), 3);
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM instr WHERE phase = 'after'"), 7);
    ASSERT_SQL_TEXT(raw,
                    "SELECT shape || ' ' || opcode || ' ' || sharding FROM instr"
                    " WHERE name = 'lhs'",
                    "f32[8,16] parameter {devices=[1,2]0,1}");
    ASSERT_SQL_TEXT(raw,
                    "SELECT op_name || ' ' || source_file || ':' || source_line"
                    " FROM instr WHERE name = 'dot'",
                    "jit(f)/dot_general model.py:42");
    assert_int_equal(sql_int(raw, "SELECT size_bytes FROM instr WHERE name = 'dot'"), 128);
    assert_int_equal(sql_int(raw, "SELECT is_root FROM instr WHERE name = 'dot'"), 1);
    ASSERT_SQL_TEXT(raw, "SELECT sharding FROM instr WHERE name = 'dot.1'", "NULL");
    /* Every entry instruction of the output links back to its source. */
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM instr a JOIN instr b ON b.id ="
                                  " a.derived_from WHERE a.phase = 'after' AND b.phase ="
                                  " 'before' AND a.computation = 'main'"),
                     4);
    ASSERT_SQL_TEXT(raw,
                    "SELECT b.name FROM instr a JOIN instr b ON b.id = a.derived_from"
                    " WHERE a.name = 'all-reduce.1'",
                    "dot");

    /* Edges: dot(lhs, rhs) before; dot.1(lhs.1, rhs.1), all-reduce.1(dot.1), add(x, y). */
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM edge WHERE phase = 'before'"), 2);
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM edge WHERE phase = 'after'"), 5);
    ASSERT_SQL_TEXT(raw,
                    "SELECT o.name FROM edge e JOIN instr u ON u.id = e.user JOIN instr o"
                    " ON o.id = e.operand WHERE u.name = 'dot' AND e.operand_index = 1",
                    "rhs");

    /* Decision with its alternatives and numbers. */
    ASSERT_SQL_TEXT(raw,
                    "SELECT i.name || ' ' || d.handler || ' ' || d.strategy FROM decision d"
                    " JOIN instr i ON i.id = d.instr",
                    "dot dot contracting");
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM decision_alt"), 3);
    ASSERT_SQL_TEXT(raw, "SELECT strategy FROM decision_alt WHERE idx = 2", "windowed_einsum");
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM decision_number"), 3);
    assert_int_equal(sql_int(raw, "SELECT num FROM decision_number WHERE key = 'lhs_bytes'"), 512);
    ASSERT_SQL_TEXT(raw, "SELECT str FROM decision_number WHERE key = 'output_sharding'",
                    "{replicated}");

    /* Reshards. */
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM reshard"), 2);
    ASSERT_SQL_TEXT(raw,
                    "SELECT from_sharding || ' -> ' || to_sharding || ' ' || method ||"
                    " ' ' || result_name FROM reshard WHERE seq = 2",
                    "{devices=[2,1]0,1} -> {replicated} all-reduce all-reduce.1");
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM reshard r JOIN instr v ON v.id = r.value"
                                  " JOIN instr q ON q.id = r.requester WHERE v.phase = 'after'"
                                  " AND q.name = 'dot'"),
                     2);

    /* The collective: one row, its group, S, trip count and links. */
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM collective"), 1);
    ASSERT_SQL_TEXT(raw, "SELECT kind || ' ' || shape || ' ' || cause FROM collective",
                    "all-reduce f32[8,4] dot");
    assert_int_equal(sql_int(raw, "SELECT channel_id FROM collective"), 1);
    assert_int_equal(sql_int(raw, "SELECT group_size * 10 + n_groups FROM collective"), 21);
    assert_true(sql_real(raw, "SELECT bytes FROM collective") == 128.0);
    assert_int_equal(sql_int(raw, "SELECT trip_count FROM collective"), 1);
    ASSERT_SQL_TEXT(raw, "SELECT s.name FROM collective c JOIN instr s ON s.id = c.source", "dot");
    ASSERT_SQL_TEXT(raw,
                    "SELECT d.strategy FROM collective c JOIN decision d"
                    " ON d.id = c.decision_id",
                    "contracting");
    ASSERT_SQL_TEXT(raw,
                    "SELECT group_concat(device) FROM (SELECT device FROM collective_group"
                    " ORDER BY group_idx, position)",
                    "0,1");
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM windowed_loop"), 0);
    ASSERT_SQL_TEXT(raw,
                    "SELECT i.name || ': ' || w.message FROM warning w JOIN instr i"
                    " ON i.id = w.instr",
                    "lhs: test warning");
    assert_int_equal(sqlite3_close(raw), SQLITE_OK);

    /* The reader gives the same run back. */
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_READ, &db, &err), SL_OK);
    const TraceRun *run = NULL;
    assert_int_equal(trace_run_load(db, 0, &fx->arena, &run, &err), SL_OK);
    assert_int_equal(run->id, 1);
    assert_string_equal(run->module, "dotmod");
    assert_int_equal(run->n_options, 2);
    assert_string_equal(run->options[0].key, "cache_all_gather"); /* sorted */
    assert_int_equal(run->n_instrs, 10);
    assert_int_equal(run->n_before, 3);
    const TraceRunInstr *d = trace_run_find_instr(run, TRACE_BEFORE, "dot");
    assert_non_null(d);
    assert_int_equal(d->n_operands, 2);
    assert_string_equal(run->instrs[d->operands[1]].name, "rhs");
    const TraceRunInstr *ar = trace_run_find_instr(run, TRACE_AFTER, "all-reduce.1");
    assert_non_null(ar);
    assert_ptr_equal(&run->instrs[ar->derived_from], d);
    assert_int_equal(run->n_decisions, 1);
    assert_int_equal(run->decisions[0].n_alternatives, 3);
    assert_int_equal(run->decisions[0].n_numbers, 3);
    assert_string_equal(run->decisions[0].numbers[2].str, "{replicated}");
    assert_null(run->decisions[0].numbers[0].str);
    assert_int_equal(run->n_reshards, 2);
    assert_int_equal(run->n_collectives, 1);
    const TraceRunCollective *c = &run->collectives[0];
    assert_string_equal(c->kind, "all-reduce");
    assert_int_equal(c->group_offsets[1], 2);
    assert_int_equal(c->devices[1], 1);
    assert_int_equal(c->decision, 0);
    assert_true(c->bytes == 128.0);
    assert_true(c->max_device_send_bytes == 128.0); /* 2(g-1)/g * S, g = 2 */
    assert_true(c->send_bytes == 256.0);
    assert_int_equal(run->n_devices, 2);
    assert_true(run->devices[1].recv_bytes == 128.0);
    assert_int_equal(run->n_warnings, 1);
    err = (SlError){0};
    assert_int_equal(trace_run_load(db, 7, &fx->arena, &run, &err), SL_ERR_INVALID);
    assert_non_null(strstr(err.msg, "no run 7"));
    trace_db_close(db);

    /* A second run is appended; 0 loads the latest, an id loads that run. */
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_APPEND, &db, &err), SL_OK);
    assert_int_equal(write_dot_run(fx, db), 2);
    assert_int_equal(trace_run_load(db, 0, &fx->arena, &run, &err), SL_OK);
    assert_int_equal(run->id, 2);
    assert_int_equal(run->n_instrs, 10);
    assert_int_equal(run->n_collectives, 1);
    assert_int_equal(trace_run_load(db, 1, &fx->arena, &run, &err), SL_OK);
    assert_int_equal(run->id, 1);
    assert_int_equal(run->n_reshards, 2);
    trace_db_close(db);
}

/* Another connection holds the write lock longer than we wait: a clear error, nothing
 * written, and the next run goes through once the lock is released. */
static void
test_locked_database_fails_cleanly(void **state)
{
    TraceFx *fx = *state;
    SlError err = {0};
    TraceDb *db = NULL;
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_APPEND, &db, &err), SL_OK);
    trace_db_set_busy(db, 5, 2);
    IrModule *in = tfx_parse(fx, k_dot_in), *out = tfx_parse(fx, k_dot_out);
    sqlite3 *raw = sql_open(fx->path);
    assert_int_equal(sqlite3_exec(raw, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    begin_dot_run(fx, db, in, out);
    assert_int_equal(trace_db_end_run(db, out, 1.0, NULL, &err), SL_ERR_DB);
    assert_non_null(strstr(err.msg, "locked"));
    assert_int_equal(sqlite3_exec(raw, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_close(raw), SQLITE_OK);
    assert_db_empty(fx->path);
    err = (SlError){0};
    begin_dot_run(fx, db, in, out);
    assert_int_equal(trace_db_end_run(db, out, 1.0, NULL, &err), SL_OK);
    trace_db_close(db);
    ir_module_fini(in);
    ir_module_fini(out);
}

static void
test_failed_run_leaves_no_rows(void **state)
{
    TraceFx *fx = *state;
    SlError err = {0};
    TraceDb *db = NULL;
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_APPEND, &db, &err), SL_OK);
    IrModule *in = tfx_parse(fx, k_dot_in), *out = tfx_parse(fx, k_dot_out);

    /* The partitioner failed: nothing is written. */
    begin_dot_run(fx, db, in, out);
    trace_db_abort_run(db);
    assert_db_empty(fx->path);

    /* The write fails at row k, for every k up to the whole run (30 rows: run, 2 options,
     * 10 instrs, 1 call, 1 decision, 2 reshards, 1 collective, 2 group members, 1 warning,
     * 2 memory estimates with 3 + 4 buffers at their peaks). */
    for (uint64_t k = 1; k <= 30; k++) {
        begin_dot_run(fx, db, in, out);
        trace_db_inject_fault(db, k);
        err = (SlError){0};
        assert_int_equal(trace_db_end_run(db, out, 1.0, NULL, &err), SL_ERR_DB);
        assert_non_null(strstr(err.msg, "injected fault"));
        assert_db_empty(fx->path);
    }
    /* With one row more the run goes through, wholly. */
    trace_db_inject_fault(db, 31);
    begin_dot_run(fx, db, in, out);
    int64_t run_id = 0;
    err = (SlError){0};
    assert_int_equal(trace_db_end_run(db, out, 1.0, &run_id, &err), SL_OK);
    assert_true(run_id > 0);
    trace_db_close(db);
    sqlite3 *raw = sql_open(fx->path);
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM run"), 1);
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM collective_group"), 2);
    assert_int_equal(sqlite3_close(raw), SQLITE_OK);
    ir_module_fini(in);
    ir_module_fini(out);
}

/* ---- damaged traces: named, never the raw SQL ---- */

static void
test_damaged_traces_named(void **state)
{
    TraceFx *fx = *state;
    static const struct {
        const char *sql;
        bool at_open; /* refused by trace_db_open, else by trace_run_load */
        const char *msg;
    } k_cases[] = {
        {"DROP TABLE run_option", true,
         "table run_option is missing: not a shardlens trace, or from an older version"},
        {"DROP VIEW device_traffic", true,
         "view device_traffic is missing: not a shardlens trace, or from an older version"},
        {"ALTER TABLE decision DROP COLUMN reason", true,
         "table decision has no column reason: not a shardlens trace, or from an older "
         "version"},
        {"UPDATE run SET num_partitions = 2147483648", false,
         "run 1: run.num_partitions is 2147483648, outside 1..65536 (shardlens handles at "
         "most 65536 devices)"},
        {"UPDATE collective SET group_size = 2147483648", false,
         "run 1: collective.group_size is 2147483648, outside 0..2 (bounded by the run's "
         "num_partitions)"},
        {"UPDATE collective SET n_groups = 4294967296", false,
         "run 1: collective.n_groups is 4294967296, outside 0..2 (bounded by the run's "
         "num_partitions)"},
        {"UPDATE collective_group SET device = -1", false,
         "run 1: collective_group.device is -1, outside 0..1 (bounded by the run's "
         "num_partitions)"},
    };
    for (size_t k = 0; k < SL_COUNTOF(k_cases); k++) {
        unlink(fx->path);
        SlError err = {0};
        TraceDb *db = NULL;
        assert_int_equal(trace_db_open(fx->path, TRACE_DB_APPEND, &db, &err), SL_OK);
        write_dot_run(fx, db);
        trace_db_close(db);
        sqlite3 *raw = sql_open(fx->path);
        if (sqlite3_exec(raw, k_cases[k].sql, NULL, NULL, NULL) != SQLITE_OK)
            fail_msg("%s: %s", k_cases[k].sql, sqlite3_errmsg(raw));
        assert_int_equal(sqlite3_close(raw), SQLITE_OK);
        SlStatus st = trace_db_open(fx->path, TRACE_DB_READ, &db, &err);
        if (!k_cases[k].at_open) {
            assert_int_equal(st, SL_OK);
            const TraceRun *run = NULL;
            st = trace_run_load(db, 0, &fx->arena, &run, &err);
            assert_null(run);
            trace_db_close(db);
        } else {
            assert_null(db);
        }
        assert_int_equal(st, SL_ERR_DB);
        assert_string_equal(err.msg, k_cases[k].msg);
        assert_string_equal(err.loc.path, fx->path);
    }

    /* NULL in a column the schema declares NOT NULL (a damaged file can hold one; here the
     * constraint is edited out of the schema first): the load fails, naming the column. (A NULL
     * run_option.key, a primary-key column SQL cannot set to NULL, is
     * tests/fuzz-regressions/trace/option-null-key.bin, a raw patch of the file.) */
    static const struct {
        const char *table, *decl, *update, *msg;
    } k_nulls[] = {
        {"instr", "name         TEXT    NOT NULL", "UPDATE instr SET name = NULL WHERE name = 'dot'",
         "run 1: instr.name is NULL, which the schema forbids (a damaged trace)"},
        {"decision", "handler      TEXT    NOT NULL", "UPDATE decision SET handler = NULL",
         "run 1: decision.handler is NULL, which the schema forbids (a damaged trace)"},
    };
    for (size_t k = 0; k < SL_COUNTOF(k_nulls); k++) {
        unlink(fx->path);
        SlError err = {0};
        TraceDb *db = NULL;
        assert_int_equal(trace_db_open(fx->path, TRACE_DB_APPEND, &db, &err), SL_OK);
        write_dot_run(fx, db);
        trace_db_close(db);
        char sql[512];
        snprintf(sql, sizeof(sql),
                 "PRAGMA writable_schema = ON; UPDATE sqlite_schema SET sql = replace(sql, "
                 "'%s', '%.*s') WHERE name = '%s'; PRAGMA writable_schema = OFF",
                 k_nulls[k].decl, (int)(strstr(k_nulls[k].decl, " NOT NULL") - k_nulls[k].decl),
                 k_nulls[k].decl, k_nulls[k].table);
        sqlite3 *raw = sql_open(fx->path);
        if (sqlite3_exec(raw, sql, NULL, NULL, NULL) != SQLITE_OK)
            fail_msg("%s: %s", sql, sqlite3_errmsg(raw));
        assert_int_equal(sqlite3_close(raw), SQLITE_OK);
        raw = sql_open(fx->path);
        if (sqlite3_exec(raw, k_nulls[k].update, NULL, NULL, NULL) != SQLITE_OK)
            fail_msg("%s: %s", k_nulls[k].update, sqlite3_errmsg(raw));
        assert_int_equal(sqlite3_changes(raw) > 0, 1);
        assert_int_equal(sqlite3_close(raw), SQLITE_OK);
        assert_int_equal(trace_db_open(fx->path, TRACE_DB_READ, &db, &err), SL_OK);
        const TraceRun *run = NULL;
        assert_int_equal(trace_run_load(db, 0, &fx->arena, &run, &err), SL_ERR_DB);
        assert_null(run);
        assert_string_equal(err.msg, k_nulls[k].msg);
        trace_db_close(db);
    }

    /* A file that is not SQLite at all. */
    {
        FILE *f = fopen(fx->path, "w");
        assert_non_null(f);
        for (int k = 0; k < 40; k++)
            fputs("not a database, ", f);
        fclose(f);
        SlError err = {0};
        TraceDb *db = NULL;
        assert_int_equal(trace_db_open(fx->path, TRACE_DB_READ, &db, &err), SL_ERR_DB);
        assert_null(db);
        assert_string_equal(err.msg, "not a database: the file is not SQLite, so not a shardlens trace");
    }

    /* A directory is not a trace, in either mode; nothing is created in it. */
    for (int mode = TRACE_DB_READ; mode <= TRACE_DB_APPEND; mode++) {
        SlError err = {0};
        TraceDb *db = NULL;
        assert_int_equal(trace_db_open(fx->dir, (TraceDbMode)mode, &db, &err), SL_ERR_IO);
        assert_null(db);
        assert_string_equal(err.msg, "is a directory, not a trace database");
    }
}

/* ---- two processes appending at once ---- */

enum { RUNS_PER_WRITER = 15 };

static int
writer_child(const char *path)
{
    TraceFx fx = {0};
    sl_arena_init(&fx.arena);
    sl_interner_init(&fx.names, &fx.arena);
    int rc = 0;
    SlError err = {0};
    TraceDb *db = NULL;
    if (trace_db_open(path, TRACE_DB_APPEND, &db, &err) != SL_OK) {
        fprintf(stderr, "child open: %s\n", err.msg);
        return 1;
    }
    IrModule *in = NULL, *out = NULL;
    if (hlo_parse(&fx.arena, &fx.names, sl_str(k_dot_in), "in", &in, &err) != SL_OK ||
        hlo_parse(&fx.arena, &fx.names, sl_str(k_dot_out), "out", &out, &err) != SL_OK)
        rc = 2;
    for (int k = 0; k < RUNS_PER_WRITER && rc == 0; k++) {
        TraceSink *sink = NULL;
        if (trace_db_begin_run(db, in, &k_info, &sink, &err) != SL_OK) {
            rc = 3;
            break;
        }
        feed_dot_events(&fx, sink, in, out);
        if (trace_db_end_run(db, out, 1.0, NULL, &err) != SL_OK) {
            fprintf(stderr, "child end_run: %s\n", err.msg);
            rc = 4;
        }
    }
    trace_db_close(db);
    if (in)
        ir_module_fini(in);
    if (out)
        ir_module_fini(out);
    sl_interner_fini(&fx.names);
    sl_arena_fini(&fx.arena);
    return rc;
}

static void
test_two_concurrent_writers(void **state)
{
    TraceFx *fx = *state;
    /* The file does not exist yet: both children race to create the schema as well. */
    pid_t pids[2];
    for (int k = 0; k < 2; k++) {
        pids[k] = fork();
        assert_true(pids[k] >= 0);
        if (pids[k] == 0)
            _exit(writer_child(fx->path));
    }
    for (int k = 0; k < 2; k++) {
        int status = 0;
        assert_int_equal(waitpid(pids[k], &status, 0), pids[k]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    sqlite3 *raw = sql_open(fx->path);
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM run"), 2 * RUNS_PER_WRITER);
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM instr"), 2 * RUNS_PER_WRITER * 10);
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM collective_group"),
                     2 * RUNS_PER_WRITER * 2);
    /* Each run's instrs are exactly its id range, although two processes wrote at once. */
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM run r WHERE last_instr - first_instr <> 9"
                                  " OR (SELECT count(*) FROM instr i WHERE i.id BETWEEN"
                                  " r.first_instr AND r.last_instr AND i.run_id = r.id) <> 10"),
                     0);
    /* No run is missing a part: every run has its 10 instructions and its collective. */
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM run r WHERE (SELECT count(*) FROM instr"
                                  " i WHERE i.run_id = r.id) <> 10 OR (SELECT count(*) FROM"
                                  " collective c WHERE c.run_id = r.id) <> 1"),
                     0);
    assert_int_equal(sqlite3_close(raw), SQLITE_OK);
}

/* ---- the cost-model views ---- */

static const char k_traffic_in[] = "HloModule traffic, num_partitions=4\n"
                                   "\n"
                                   "ENTRY main {\n"
                                   "  p = f32[16,8] parameter(0), sharding={devices=[4,1]0,1,2,3}\n"
                                   "  ROOT n = f32[16,8] negate(p), sharding={replicated}\n"
                                   "}\n";

/* All-gather S = 512 B over one group of 4; all-reduce S = 32 B over {0,1},{2,3};
 * collective-permute S = 16 B along 0->1->2->3; an all-reduce of S = 16 B over all four in a
 * loop body that runs 3 times. */
static const char k_traffic_out[] =
    "HloModule traffic_spmd, num_partitions=4\n"
    "\n"
    "add {\n"
    "  x = f32[] parameter(0)\n"
    "  y = f32[] parameter(1)\n"
    "  ROOT s = f32[] add(x, y)\n"
    "}\n"
    "\n"
    "body {\n"
    "  bp = (s32[], f32[4]) parameter(0)\n"
    "  i = s32[] get-tuple-element(bp), index=0\n"
    "  v = f32[4] get-tuple-element(bp), index=1\n"
    "  ar.loop = f32[4] all-reduce(v), channel_id=4, replica_groups=[1,4]<=[4],"
    " use_global_device_ids=true, to_apply=add\n"
    "  ROOT bt = (s32[], f32[4]) tuple(i, ar.loop)\n"
    "}\n"
    "\n"
    "cond {\n"
    "  cp = (s32[], f32[4]) parameter(0)\n"
    "  ROOT t = pred[] constant(true)\n"
    "}\n"
    "\n"
    "ENTRY main {\n"
    "  p.1 = f32[4,8] parameter(0)\n"
    "  ag = f32[16,8] all-gather(p.1), channel_id=1, replica_groups={{0,1,2,3}},"
    " dimensions={0}, use_global_device_ids=true\n"
    "  q = f32[8] parameter(1)\n"
    "  ar = f32[8] all-reduce(q), channel_id=2, replica_groups={{0,1},{2,3}},"
    " use_global_device_ids=true, to_apply=add\n"
    "  r = f32[2,2] parameter(2)\n"
    "  cpm = f32[2,2] collective-permute(r), channel_id=3,"
    " source_target_pairs={{0,1},{1,2},{2,3}}\n"
    "  z = s32[] constant(0)\n"
    "  w = f32[4] parameter(3)\n"
    "  init = (s32[], f32[4]) tuple(z, w)\n"
    "  loop = (s32[], f32[4]) while(init), condition=cond, body=body,"
    " backend_config={\"known_trip_count\":{\"n\":\"3\"}}\n"
    "  ROOT n.1 = f32[16,8] negate(ag)\n"
    "}\n";

static void
test_device_traffic_views(void **state)
{
    TraceFx *fx = *state;
    SlError err = {0};
    TraceDb *db = NULL;
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_APPEND, &db, &err), SL_OK);
    IrModule *in = tfx_parse(fx, k_traffic_in), *out = tfx_parse(fx, k_traffic_out);
    TraceRunInfo info = k_info;
    info.num_partitions = 4;
    TraceSink *sink = NULL;
    assert_int_equal(trace_db_begin_run(db, in, &info, &sink, &err), SL_OK);
    const IrInstr *n = instr(in, "n"), *p = instr(in, "p");
    TraceReshard r = {n,
                      instr(out, "p.1"),
                      ir_instr_sharding(p),
                      ir_instr_sharding(n),
                      "all-gather",
                      instr(out, "ag"),
                      1};
    sink->ops->reshard(sink, &r);
    TraceCollective c = {instr(out, "ag"), n, 1, "reshard"};
    sink->ops->collective(sink, &c);
    TraceWindowedLoop wl = {n, instr(out, "loop"), "all-gather", 3, 16, 0};
    sink->ops->windowed_loop(sink, &wl);
    assert_int_equal(trace_db_end_run(db, out, -1, NULL, &err), SL_OK);
    trace_db_close(db);

    sqlite3 *raw = sql_open(fx->path);
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM collective"), 4);
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM run WHERE duration_ms IS NULL"), 1);
    assert_true(sql_real(raw, "SELECT bytes FROM collective WHERE kind = 'all-gather'") == 512.0);
    assert_int_equal(sql_int(raw, "SELECT trip_count FROM collective c JOIN instr i"
                                  " ON i.id = c.instr WHERE i.name = 'ar.loop'"),
                     3);
    assert_int_equal(sql_int(raw, "SELECT n_groups * 10 + group_size FROM collective"
                                  " WHERE kind = 'collective-permute'"),
                     32);
    /* Per device, hand-computed:
     *   all-gather   (4-1)/4 * 512 = 384 each way on every device
     *   all-reduce   2(2-1)/2 * 32 = 32 each way on every device
     *   permute      16 sent by 0, 1, 2; 16 received by 1, 2, 3
     *   loop         2(4-1)/4 * 16 = 24 each way, x3 = 72 */
    static const struct {
        int device;
        double send, recv;
    } want[] = {
        {0, 504, 488},
        {1, 504, 504},
        {2, 504, 504},
        {3, 488, 504},
    };
    for (size_t k = 0; k < SL_COUNTOF(want); k++) {
        char q[160];
        snprintf(q, sizeof(q), "SELECT send_bytes_known_trips FROM device_traffic WHERE device = %d",
                 want[k].device);
        assert_true(sql_real(raw, q) == want[k].send);
        snprintf(q, sizeof(q), "SELECT recv_bytes_known_trips FROM device_traffic WHERE device = %d",
                 want[k].device);
        assert_true(sql_real(raw, q) == want[k].recv);
    }
    assert_int_equal(sql_int(raw, "SELECT sum(unknown_trip_collectives) FROM device_traffic"), 0);
    /* "Which source op caused the most all-gather bytes?" */
    ASSERT_SQL_TEXT(raw,
                    "SELECT source FROM source_traffic WHERE kind = 'all-gather'"
                    " ORDER BY send_bytes DESC LIMIT 1",
                    "n");
    assert_true(sql_real(raw, "SELECT send_bytes FROM source_traffic WHERE kind = 'all-gather'") ==
                4 * 384.0);
    assert_int_equal(sql_int(raw, "SELECT iterations FROM windowed_loop w JOIN instr l"
                                  " ON l.id = w.loop WHERE l.name = 'loop'"),
                     3);
    assert_int_equal(sqlite3_close(raw), SQLITE_OK);

    /* The reader serves the same numbers from the views. */
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_READ, &db, &err), SL_OK);
    const TraceRun *run = NULL;
    assert_int_equal(trace_run_load(db, 0, &fx->arena, &run, &err), SL_OK);
    assert_int_equal(run->n_devices, 4);
    for (size_t k = 0; k < SL_COUNTOF(want); k++) {
        assert_true(run->devices[k].send_bytes == want[k].send);
        assert_true(run->devices[k].recv_bytes == want[k].recv);
    }
    assert_int_equal(run->n_collectives, 4); /* in module order: body, then entry */
    const TraceRunCollective *pm = &run->collectives[3];
    assert_string_equal(pm->kind, "collective-permute");
    assert_int_equal(run->collectives[0].trip_count, 3);
    assert_int_equal(pm->n_groups, 3);
    assert_int_equal(pm->group_offsets[3], 6);
    assert_int_equal(pm->devices[pm->group_offsets[2] + 1], 3); /* pair 2: 2 -> 3 */
    assert_int_equal(run->n_loops, 1);
    assert_int_equal(run->loops[0].iterations, 3);
    trace_db_close(db);
    ir_module_fini(in);
    ir_module_fini(out);
}

/* ---- conditionals, called computations, parameter numbers, uneven groups ---- */

/* A loop of 4 iterations whose body permutes in a conditional's true branch (the windowed-
 * einsum shape: taken 3 times) and all-reduces in its false branch; an index conditional in
 * the entry whose branch 0 all-reduces over uneven groups {0,1,2},{3}; parameters listed out
 * of number order. */
static const char k_cond_hlo[] =
    "HloModule condmod, num_partitions=4\n"
    "\n"
    "add {\n"
    "  x = f32[] parameter(0)\n"
    "  y = f32[] parameter(1)\n"
    "  ROOT s = f32[] add(x, y)\n"
    "}\n"
    "\n"
    "permute {\n"
    "  pp = f32[4] parameter(0)\n"
    "  ROOT cpm = f32[4] collective-permute(pp), channel_id=1,"
    " source_target_pairs={{0,3},{1,0},{2,1},{3,2}}\n"
    "}\n"
    "\n"
    "noop {\n"
    "  np = f32[4] parameter(0)\n"
    "  ROOT arf = f32[4] all-reduce(np), channel_id=2, replica_groups={{0,1,2,3}}, to_apply=add\n"
    "}\n"
    "\n"
    "body {\n"
    "  bp = (u32[], f32[4]) parameter(0)\n"
    "  i = u32[] get-tuple-element(bp), index=0\n"
    "  v = f32[4] get-tuple-element(bp), index=1\n"
    "  one = u32[] constant(1)\n"
    "  i1 = u32[] add(i, one)\n"
    "  four = u32[] constant(4)\n"
    "  more = pred[] compare(i1, four), direction=LT\n"
    "  c = f32[4] conditional(more, v, v), true_computation=permute, false_computation=noop\n"
    "  ROOT bt = (u32[], f32[4]) tuple(i1, c)\n"
    "}\n"
    "\n"
    "cond {\n"
    "  cp0 = (u32[], f32[4]) parameter(0)\n"
    "  ci = u32[] get-tuple-element(cp0), index=0\n"
    "  lim = u32[] constant(4)\n"
    "  ROOT lt = pred[] compare(ci, lim), direction=LT\n"
    "}\n"
    "\n"
    "b0 {\n"
    "  a0 = f32[3] parameter(0)\n"
    "  ROOT arb = f32[3] all-reduce(a0), channel_id=3, replica_groups={{0,1,2},{3}},"
    " to_apply=add\n"
    "}\n"
    "\n"
    "b1 {\n"
    "  a1 = f32[3] parameter(0)\n"
    "  ROOT neg = f32[3] negate(a1)\n"
    "}\n"
    "\n"
    "ENTRY main {\n"
    "  w = f32[4] parameter(1)\n"
    "  z = u32[] constant(0)\n"
    "  init = (u32[], f32[4]) tuple(z, w)\n"
    "  loop = (u32[], f32[4]) while(init), condition=cond, body=body\n"
    "  k = s32[] parameter(0)\n"
    "  q = f32[3] parameter(2)\n"
    "  sw = f32[3] conditional(k, q, q), branch_computations={b0, b1}\n"
    "  ROOT t = (f32[3], (u32[], f32[4])) tuple(sw, loop)\n"
    "}\n";

/* Records k_cond_hlo as both input and output; a windowed-loop event for `loop` states the
 * true branch's count when `true_runs` > 0. */
static int64_t
write_cond_run(TraceFx *fx, TraceDb *db, int64_t true_runs)
{
    IrModule *in = tfx_parse(fx, k_cond_hlo), *out = tfx_parse(fx, k_cond_hlo);
    SlError err = {0};
    TraceRunInfo info = k_info;
    info.num_partitions = 4;
    TraceSink *sink = NULL;
    assert_int_equal(trace_db_begin_run(db, in, &info, &sink, &err), SL_OK);
    TraceWindowedLoop wl = {instr(in, "loop"), instr(out, "loop"), "all-gather", 4, 16, true_runs};
    sink->ops->windowed_loop(sink, &wl);
    int64_t run_id = 0;
    if (trace_db_end_run(db, out, -1, &run_id, &err) != SL_OK)
        fail_msg("end_run: %s", err.msg);
    ir_module_fini(in);
    ir_module_fini(out);
    return run_id;
}

/* "trip_count|max_trip_count" of the collective `name` in run `run`, NULL as "-". */
static void
trips_of(sqlite3 *raw, int64_t run, const char *name, char *out, size_t cap)
{
    char q[256];
    snprintf(q, sizeof(q),
             "SELECT coalesce(c.trip_count, '-') || '|' || coalesce(c.max_trip_count, '-')"
             " FROM collective c JOIN instr i ON i.id = c.instr"
             " WHERE c.run_id = %lld AND i.name = '%s'",
             (long long)run, name);
    sql_text(raw, q, out, cap);
}

static void
test_conditional_trip_counts(void **state)
{
    TraceFx *fx = *state;
    SlError err = {0};
    TraceDb *db = NULL;
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_APPEND, &db, &err), SL_OK);
    int64_t plain = write_cond_run(fx, db, 0), hinted = write_cond_run(fx, db, 3);
    trace_db_close(db);
    /* Branches run "at most" as often as their conditional unless the loop says how often: the
     * permute then runs 3 times, the false branch once (issue 7: both were recorded as 4). */
    static const struct {
        const char *name;
        const char *plain, *hinted;
    } want[] = {
        {"cpm", "-|4", "3|3"},
        {"arf", "-|4", "1|1"},
        {"arb", "-|1", "-|1"},
    };
    sqlite3 *raw = sql_open(fx->path);
    for (size_t k = 0; k < SL_COUNTOF(want); k++) {
        char got[64];
        trips_of(raw, plain, want[k].name, got, sizeof(got));
        if (strcmp(got, want[k].plain))
            fail_msg("%s without a hint: %s, want %s", want[k].name, got, want[k].plain);
        trips_of(raw, hinted, want[k].name, got, sizeof(got));
        if (strcmp(got, want[k].hinted))
            fail_msg("%s with a hint: %s, want %s", want[k].name, got, want[k].hinted);
    }
    assert_int_equal(sqlite3_close(raw), SQLITE_OK);

    /* The reader, explain and the reports' inputs see the bound. */
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_READ, &db, &err), SL_OK);
    const TraceRun *run = NULL;
    assert_int_equal(trace_run_load(db, plain, &fx->arena, &run, &err), SL_OK);
    const TraceRunInstr *cpm = trace_run_find_instr(run, TRACE_AFTER, "cpm");
    assert_non_null(cpm);
    for (uint32_t k = 0; k < run->n_collectives; k++)
        if (run->collectives[k].instr == (uint32_t)(cpm - run->instrs)) {
            assert_int_equal(run->collectives[k].trip_count, -1);
            assert_int_equal(run->collectives[k].max_trip_count, 4);
        }
    SlBuf b;
    sl_buf_init(&b);
    assert_int_equal(trace_explain(run, "cpm", &b, &err), SL_OK);
    sl_buf_fini(&b);
    trace_db_close(db);
}


/* ---- loop trip counts: nesting, called computations, windowed loops ------------------------ */

/* An outer scan of 3 whose body calls `layer`, which holds an inner loop of 4 (induction
 * variable at element 1, counting down); an all-reduce in each body. */
static const char k_nested[] =
    "HloModule nested, num_partitions=2\n\n"
    "add {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT a = f32[] add(x, y)\n}\n\n"
    "icond {\n  p = (f32[8], s32[]) parameter(0)\n  j = s32[] get-tuple-element(p), index=1\n"
    "  z = s32[] constant(0)\n  ROOT c = pred[] compare(j, z), direction=GT\n}\n\n"
    "ibody {\n  p = (f32[8], s32[]) parameter(0)\n  v = f32[8] get-tuple-element(p), index=0\n"
    "  j = s32[] get-tuple-element(p), index=1\n  one = s32[] constant(1)\n"
    "  j1 = s32[] subtract(j, one)\n"
    "  inner_ar = f32[8] all-reduce(v), channel_id=1, replica_groups={{0,1}},"
    " use_global_device_ids=true, to_apply=add\n"
    "  ROOT t = (f32[8], s32[]) tuple(inner_ar, j1)\n}\n\n"
    "layer {\n  x = f32[8] parameter(0)\n  four = s32[] constant(4)\n"
    "  t = (f32[8], s32[]) tuple(x, four)\n"
    "  w = (f32[8], s32[]) while(t), condition=icond, body=ibody\n"
    "  ROOT r = f32[8] get-tuple-element(w), index=0\n}\n\n"
    "ocond {\n  p = (s32[], f32[8]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
    "  n = s32[] constant(3)\n  ROOT c = pred[] compare(i, n), direction=LT\n}\n\n"
    "obody {\n  p = (s32[], f32[8]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n"
    "  v = f32[8] get-tuple-element(p), index=1\n  one = s32[] constant(1)\n"
    "  i1 = s32[] add(i, one)\n  l = f32[8] call(v), to_apply=layer\n"
    "  outer_ar = f32[8] all-reduce(l), channel_id=2, replica_groups={{0,1}},"
    " use_global_device_ids=true, to_apply=add\n"
    "  ROOT t = (s32[], f32[8]) tuple(i1, outer_ar)\n}\n\n"
    "ENTRY main {\n  x = f32[8] parameter(0), sharding={replicated}\n  z = s32[] constant(0)\n"
    "  t = (s32[], f32[8]) tuple(z, x)\n"
    "  ow = (s32[], f32[8]) while(t), condition=ocond, body=obody\n"
    "  ROOT g = f32[8] get-tuple-element(ow), index=1\n}\n";

static void
test_nested_loop_trip_counts(void **state)
{
    TraceFx *fx = *state;
    (void)tfx_traced(fx, k_nested, 2, NULL);
    sqlite3 *raw = sql_open(fx->path);
    /* counts multiply: 3 outer iterations, 4 inner ones each */
    assert_int_equal(sql_int(raw, "SELECT trip_count FROM collective c JOIN instr i ON i.id ="
                                  " c.instr WHERE i.name LIKE 'inner_ar%'"),
                     12);
    assert_int_equal(sql_int(raw, "SELECT trip_count FROM collective c JOIN instr i ON i.id ="
                                  " c.instr WHERE i.name LIKE 'outer_ar%'"),
                     3);
    ASSERT_SQL_TEXT(raw,
                    "SELECT group_concat(x, ' | ') FROM (SELECT s.name || ' ' || w.trip_count ||"
                    " ' ' || w.method || ' x' || w.executions || ' in ' ||"
                    " coalesce(o.source_name, '-') || ': ' || w.reason AS x FROM while_loop w"
                    " JOIN instr s ON s.id = w.source LEFT JOIN (SELECT w2.id, s2.name AS"
                    " source_name FROM while_loop w2 JOIN instr s2 ON s2.id = w2.source) o"
                    " ON o.id = w.outer_loop ORDER BY w.id)",
                    "ow 3 pattern x1 in -: i = 0; i < 3; i += 1 (tuple element 0) | "
                    "w 4 pattern x3 in ow: i = 4; i > 0; i -= 1 (tuple element 1)");
    /* the loop view: each loop with the collectives it runs directly */
    ASSERT_SQL_TEXT(raw,
                    "SELECT group_concat(x, ' | ') FROM (SELECT source || ' ' || collectives ||"
                    " ' ' || bytes_per_execution || ' ' || send_bytes_per_execution || ' ' ||"
                    " send_bytes AS x FROM loop ORDER BY loop_id)",
                    /* all-reduce of 32 B over 2: 2(2-1)/2*32 = 32 per device, 64 summed */
                    "ow 1 32.0 64.0 192.0 | w 1 32.0 64.0 768.0");
    assert_int_equal(sqlite3_close(raw), SQLITE_OK);
}

/* Every windowed-einsum loop shardlens emits is counted by the pattern, and the count is the
 * iterations its windowed_loop row states (plain, unrolled and bidirectional loops). */
static void
test_windowed_loops_counted(void **state)
{
    TraceFx *fx = *state;
    const char *root = getenv("SHARDLENS_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof(path), "%s/samples/windowed_einsum.hlo", root ? root : ".");
    SlBuf text;
    sl_buf_init(&text);
    SlError err = {0};
    assert_int_equal(sl_file_read(path, &text, &err), SL_OK);
    static const char *const sets[] = {"", "unroll_windowed_einsum=true",
                                       "bidirectional_windowed_einsum=true"};
    for (size_t k = 0; k < SL_COUNTOF(sets); k++) {
        int64_t run_id = 0;
        char both[160];
        snprintf(both, sizeof(both), "threshold_for_windowed_einsum_mib=0 %s", sets[k]);
        if (tfx_record(fx, text.data, 4, both, &run_id, &err))
            fail_msg("%s: %s", sets[k], err.msg);
    }
    sl_buf_fini(&text);
    sqlite3 *raw = sql_open(fx->path);
    assert_true(sql_int(raw, "SELECT count(*) FROM windowed_loop") >= 3);
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM windowed_loop l LEFT JOIN while_loop w"
                                  " ON w.instr = l.loop WHERE w.method IS NOT 'pattern'"
                                  " OR w.trip_count IS NOT l.iterations"),
                     0);
    assert_int_equal(sqlite3_close(raw), SQLITE_OK);
}

static void
test_called_computations_and_params(void **state)
{
    TraceFx *fx = *state;
    SlError err = {0};
    TraceDb *db = NULL;
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_APPEND, &db, &err), SL_OK);
    (void)write_cond_run(fx, db, 0);
    trace_db_close(db);
    sqlite3 *raw = sql_open(fx->path);
    ASSERT_SQL_TEXT(raw,
                    "SELECT group_concat(x, ' ') FROM (SELECT i.name || ':' || c.idx || ':' ||"
                    " c.role || ':' || c.computation AS x FROM called_computation c JOIN instr i"
                    " ON i.id = c.instr WHERE i.phase = 'before' ORDER BY c.instr, c.idx)",
                    "arf:0:to_apply:add c:0:branch_0:permute c:1:branch_1:noop"
                    " arb:0:to_apply:add loop:0:condition:cond loop:1:body:body"
                    " sw:0:branch_0:b0 sw:1:branch_1:b1");
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM called_computation c JOIN instr i"
                                  " ON i.id = c.instr WHERE i.phase = 'after'"),
                     8);
    ASSERT_SQL_TEXT(raw,
                    "SELECT group_concat(name || '=' || param_number, ' ') FROM instr"
                    " WHERE phase = 'before' AND computation = 'main' AND opcode = 'parameter'",
                    "w=1 k=0 q=2");
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM instr WHERE opcode <> 'parameter'"
                                  " AND param_number IS NOT NULL"),
                     0);
    /* Uneven groups {0,1,2},{3}: each device's own group size (issue 5: the first group's
     * size was used for all): S = 12 B, 2(3-1)/3 * 12 = 16 B on 0..2, nothing on 3. */
    assert_int_equal(sql_int(raw, "SELECT group_size FROM collective c JOIN instr i"
                                  " ON i.id = c.instr WHERE i.name = 'arb' AND i.phase = 'after'"),
                     3);
    static const double want_send[] = {16, 16, 16, 0};
    for (int d = 0; d < 4; d++) {
        char q[256];
        snprintf(q, sizeof(q),
                 "SELECT send_bytes FROM collective_device v JOIN collective c"
                 " ON c.id = v.collective_id JOIN instr i ON i.id = c.instr"
                 " WHERE i.name = 'arb' AND v.device = %d",
                 d);
        if (sql_real(raw, q) != want_send[d])
            fail_msg("device %d sends %g, want %g", d, sql_real(raw, q), want_send[d]);
    }
    assert_int_equal(sqlite3_close(raw), SQLITE_OK);

    assert_int_equal(trace_db_open(fx->path, TRACE_DB_READ, &db, &err), SL_OK);
    const TraceRun *run = NULL;
    assert_int_equal(trace_run_load(db, 0, &fx->arena, &run, &err), SL_OK);
    assert_int_equal(run->n_calls, 16);
    const TraceRunInstr *loop = trace_run_find_instr(run, TRACE_BEFORE, "loop");
    const TraceRunCall *body = NULL;
    for (uint32_t k = 0; k < run->n_calls; k++)
        if (&run->instrs[run->calls[k].instr] == loop && !strcmp(run->calls[k].role, "body"))
            body = &run->calls[k];
    assert_non_null(body);
    assert_string_equal(body->computation, "body");
    assert_int_equal(trace_run_find_instr(run, TRACE_BEFORE, "q")->param_number, 2);
    assert_int_equal(trace_run_find_instr(run, TRACE_BEFORE, "z")->param_number, -1);
    trace_db_close(db);
}

/* Loading without the optional parts: the same instructions, decisions and collectives, but
 * no operand lists and no decision alternatives or numbers. */
static void
test_load_parts(void **state)
{
    TraceFx *fx = *state;
    SlError err = {0};
    TraceDb *db = NULL;
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_APPEND, &db, &err), SL_OK);
    (void)write_dot_run(fx, db);
    const TraceRun *all = NULL, *core = NULL;
    assert_int_equal(trace_run_load(db, 0, &fx->arena, &all, &err), SL_OK);
    assert_int_equal(trace_run_load_parts(db, 0, 0, &fx->arena, &core, &err), SL_OK);
    assert_int_equal(core->n_instrs, all->n_instrs);
    assert_int_equal(core->n_decisions, all->n_decisions);
    assert_int_equal(core->n_collectives, all->n_collectives);
    assert_int_equal(core->n_devices, all->n_devices);
    uint32_t operands = 0, details = 0;
    for (uint32_t k = 0; k < all->n_instrs; k++) {
        operands += all->instrs[k].n_operands;
        assert_int_equal(core->instrs[k].n_operands, 0);
        assert_string_equal(core->instrs[k].name, all->instrs[k].name);
    }
    for (uint32_t k = 0; k < all->n_decisions; k++) {
        details += all->decisions[k].n_alternatives + all->decisions[k].n_numbers;
        assert_int_equal(core->decisions[k].n_alternatives + core->decisions[k].n_numbers, 0);
        assert_string_equal(core->decisions[k].strategy, all->decisions[k].strategy);
    }
    assert_true(operands > 0 && details > 0); /* the full load did have them */
    for (uint32_t k = 0; k < all->n_devices; k++)
        assert_true(core->devices[k].send_bytes == all->devices[k].send_bytes);
    const TraceRun *ops_only = NULL;
    assert_int_equal(trace_run_load_parts(db, 0, TRACE_LOAD_OPERANDS, &fx->arena, &ops_only, &err),
                     SL_OK);
    assert_int_equal(ops_only->instrs[all->n_instrs - 1].n_operands,
                     all->instrs[all->n_instrs - 1].n_operands);
    trace_db_close(db);
}

/* ---- explain ---- */

static void
test_explain_contracting_dot(void **state)
{
    TraceFx *fx = *state;
    SlError err = {0};
    TraceDb *db = NULL;
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_APPEND, &db, &err), SL_OK);
    (void)write_dot_run(fx, db);
    const TraceRun *run = NULL;
    assert_int_equal(trace_run_load(db, 0, &fx->arena, &run, &err), SL_OK);
    SlBuf b;
    sl_buf_init(&b);
    assert_int_equal(trace_explain(run, "dot", &b, &err), SL_OK);
    static const char *const want[] = {
        "dot was partitioned by the dot handler with strategy \"contracting\"",
        "sharding: {replicated}",
        "operand 0 lhs: f32[8,16], sharding {devices=[1,2]0,1}",
        "why: both operands are split along the contracting dimension",
        "also considered: batch, non_contracting, windowed_einsum",
        "compared lhs_bytes = 512",
        "#2 dot.1: {devices=[2,1]0,1} -> {replicated} by all-reduce",
        "all-reduce.1: all-reduce of f32[8,4] over 1 group of 2; S = 128 B",
        "busiest device sends 128 B (ring 2(g-1)/g x S, x1 executions)",
        "from: jit(f)/dot_general at model.py:42",
        "Windowed loop: none",
    };
    for (size_t k = 0; k < SL_COUNTOF(want); k++)
        if (!strstr(b.data, want[k]))
            fail_msg("explain lacks \"%s\":\n%s", want[k], b.data);

    /* An output name explains its source. */
    sl_buf_clear(&b);
    assert_int_equal(trace_explain(run, "all-reduce.1", &b, &err), SL_OK);
    assert_non_null(strstr(b.data, "all-reduce.1 is an output instruction derived from dot."));

    /* Unknown names list the close ones. */
    err = (SlError){0};
    assert_int_equal(trace_explain(run, "dott", &b, &err), SL_ERR_INVALID);
    assert_non_null(strstr(err.msg, "no instruction named 'dott'"));
    assert_non_null(strstr(err.msg, "did you mean: dot"));
    sl_buf_fini(&b);
    trace_db_close(db);
}

/* Decisions of one instruction form a chain; explain leads with the top-level one (issue 7: it
 * named the last one recorded, e.g. the inner batch_parallel of a recursion). */
static const struct {
    const char *name;
    const char *strategies[3]; /* in recording order */
    const char *numbers[3];    /* the one number key each carries, NULL: none */
    double values[3];
    const char *want; /* the summary's strategy text */
} k_chains[] = {
    {"dot engine, outermost first",
     {"group_on_contracting", "batch_parallel", NULL},
     {"partitions", "partitions"},
     {2, 1},
     "strategy \"group_on_contracting\" (then \"batch_parallel\");"                             },
    {"gather, innermost first",
     {"replicate", "trivial-sliced-operand", NULL},
     {"depth", "depth"},
     {1, 0},
     "strategy \"trivial-sliced-operand\" (then \"replicate\");"                                },
    {"windowed-einsum configuration before its strategy",
     {"no_windowed_einsum", "group_on_contracting", "batch_parallel"},
     {"loop_partitions", "partitions", "partitions"},
     {2, 2, 1},
     "strategy \"group_on_contracting\" (then \"no_windowed_einsum\", then \"batch_parallel\");"},
};

static void
test_explain_decision_chain(void **state)
{
    TraceFx *fx = *state;
    SlError err = {0};
    TraceDb *db = NULL;
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_APPEND, &db, &err), SL_OK);
    for (size_t c = 0; c < SL_COUNTOF(k_chains); c++) {
        IrModule *in = tfx_parse(fx, k_dot_in), *out = tfx_parse(fx, k_dot_out);
        TraceSink *sink = NULL;
        assert_int_equal(trace_db_begin_run(db, in, &k_info, &sink, &err), SL_OK);
        for (int k = 0; k < 3 && k_chains[c].strategies[k]; k++) {
            TraceKV num = {k_chains[c].numbers[k], k_chains[c].values[k], NULL};
            TraceDecision d = {
                instr(in, "dot"), "dot", k_chains[c].strategies[k], NULL, NULL, 0, &num, 1};
            sink->ops->decision(sink, &d);
        }
        int64_t run_id = 0;
        assert_int_equal(trace_db_end_run(db, out, -1, &run_id, &err), SL_OK);
        const TraceRun *run = NULL;
        assert_int_equal(trace_run_load(db, run_id, &fx->arena, &run, &err), SL_OK);
        SlBuf b;
        sl_buf_init(&b);
        assert_int_equal(trace_explain(run, "dot", &b, &err), SL_OK);
        const char *first_nl = strchr(b.data, '\n');
        const char *hit = strstr(b.data, k_chains[c].want);
        if (!hit || hit > first_nl)
            fail_msg("%s: first line lacks %s:\n%s", k_chains[c].name, k_chains[c].want, b.data);
        const char *top = strstr(b.data, "Decision 1 of ");
        const char *inner = strstr(b.data, "Decision 2 of ");
        assert_non_null(top);
        assert_non_null(inner);
        assert_true(top < inner);
        assert_non_null(strstr(b.data, "(inside decision 1): the dot handler chose"));
        sl_buf_fini(&b);
        ir_module_fini(in);
        ir_module_fini(out);
    }
    trace_db_close(db);
}

/* What the alternatives would have cost: the rhs already matches the output on its free dim,
 * so the dot all-gathers the lhs x (f32[256,128] = 128 KiB; 3/4 of it per device = 96 KiB).
 * Making the lhs match instead, like replicating both, also all-gathers w (f32[128,512] =
 * 256 KiB; 192 KiB per device): 288 KiB, 192 KiB more. */
static const char k_alt_dot[] =
    "HloModule alt, num_partitions=4\n\n"
    "ENTRY main {\n"
    "  x = f32[256,128] parameter(0), sharding={devices=[4,1]<=[4]}\n"
    "  w = f32[128,512] parameter(1), sharding={devices=[1,4]<=[4]}\n"
    "  ROOT dot = f32[256,512] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
    "sharding={devices=[1,4]<=[4]}\n"
    "}\n";

/* The same x alone, gathered for real: a replicated dot of x and a replicated w takes the
 * output's shardings (replicated), so x's all-gather is what the model priced above. */
static const char k_alt_gathered[] =
    "HloModule gathered, num_partitions=4\n\n"
    "ENTRY main {\n"
    "  x = f32[256,128] parameter(0), sharding={devices=[4,1]<=[4]}\n"
    "  w = f32[128,512] parameter(1), sharding={replicated}\n"
    "  ROOT dot = f32[256,512] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
    "sharding={replicated}\n"
    "}\n";

static void
test_explain_alternatives_priced(void **state)
{
    TraceFx *fx = *state;
    const TraceRun *run = tfx_traced(fx, k_alt_dot, 4, NULL);
    SlBuf b;
    SlError err = {0};
    sl_buf_init(&b);
    assert_int_equal(trace_explain(run, "dot", &b, &err), SL_OK);
    static const char *const want[] = {
        "the dot handler chose \"rhs_matches_output_replicate_lhs\"",
        "  alternatives (bytes each device would send, ring model; the chosen strategy's "
        "collectives send 96.0 KiB):\n",
        "    batch_parallel: does not apply: it needs both operands split alike on batch dims "
        "only, over all 4 devices\n",
        "    lhs_matches_output_replicate_rhs: 288 KiB (all-gather of %x over 4: 96.0 KiB; "
        "all-gather of %w over 4: 192 KiB); lost: it needs the lhs split like the output on its "
        "free dims over all 4 devices (here the lhs 4 ways, the output 1), and making it apply "
        "sends 192 KiB more per device\n",
        /* the fixture records no options: the threshold is named, not quoted */
        "    windowed_einsum: does not apply: it needs a ring-shaped sharding and an operand or "
        "output of at least threshold_for_windowed_einsum_mib\n",
        "    replicate: 288 KiB (all-gather of %x over 4: 96.0 KiB; all-gather of %w over 4: "
        "192 KiB); lost: the last resort, taken only when no strategy applies, and making it "
        "apply sends 192 KiB more per device\n",
        "busiest device sends 96.0 KiB (ring (g-1)/g x S, x1 executions)",
    };
    for (size_t k = 0; k < SL_COUNTOF(want); k++)
        if (!strstr(b.data, want[k]))
            fail_msg("explain lacks \"%s\":\n%s", want[k], b.data);
    /* the chosen strategy is not among its alternatives, and the numbers are in the trace */
    const TraceRunDecision *d = &run->decisions[0];
    assert_string_equal(d->strategy, "rhs_matches_output_replicate_lhs");
    bool priced = false;
    for (uint32_t k = 0; k < d->n_alternatives; k++)
        assert_string_not_equal(d->alternatives[k], d->strategy);
    for (uint32_t k = 0; k < d->n_numbers; k++) {
        if (strncmp(d->numbers[k].key, "alt.rhs_matches_output_replicate_lhs.", 37) == 0)
            fail_msg("the chosen strategy is priced as an alternative: %s", d->numbers[k].key);
        if (strcmp(d->numbers[k].key, "alt.replicate.bytes") == 0) {
            assert_true(d->numbers[k].num == 3.0 / 4 * 131072 + 3.0 / 4 * 262144);
            priced = true;
        }
    }
    assert_true(priced);

    /* the model's all-gather of x is what the partitioner emits when it gathers x */
    const TraceRun *g = tfx_traced(fx, k_alt_gathered, 4, NULL);
    double sent = 0;
    for (uint32_t k = 0; k < g->n_collectives; k++)
        sent += g->collectives[k].max_device_send_bytes;
    assert_int_equal(g->n_collectives, 1);
    assert_string_equal(g->collectives[0].kind, "all-gather");
    assert_true(sent == 3.0 / 4 * 131072);

    /* a windowed loop: its configuration decision lists the other variants only */
    const TraceRun *w = tfx_traced(fx, k_alt_dot, 4, "threshold_for_windowed_einsum_mib=0");
    assert_true(w->n_decisions >= 1);
    assert_string_equal(w->decisions[0].strategy, "windowed_all_gather");
    assert_int_equal(w->decisions[0].n_alternatives, 2);
    assert_string_equal(w->decisions[0].alternatives[0], "windowed_reduce_scatter");
    assert_string_equal(w->decisions[0].alternatives[1], "no_windowed_einsum");
    sl_buf_fini(&b);
}

/* ---- lists kept as JSON in a row: exact both ways, and refused when malformed ---- */

/* Every number reads back bit for bit (from the reader and from the decision_number view);
 * strings with quotes, backslashes, control bytes and UTF-8 survive; NaN is NULL as SQLite
 * stores it. The stored text is JSON as SQLite spells it (the writer formats nothing): an
 * integral number as an integer, another in 15 digits when they read back exactly, else in
 * 21, 9e999 for infinity, -0.0 keeping its sign, \u0001 for a control byte. */
static void
test_decision_lists_round_trip(void **state)
{
    TraceFx *fx = *state;
    SlError err = {0};
    TraceDb *db = NULL;
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_APPEND, &db, &err), SL_OK);
    IrModule *in = tfx_parse(fx, k_dot_in), *out = tfx_parse(fx, k_dot_out);
    static const char *const alts[] = {"say \"hi\"", "back\\slash", "tab\tnew\nline\x01",
                                       "caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x99\x82", ""};
    const double nums[] = {0.1,
                           1.0 / 3.0,
                           -2.5e-300,
                           1152921504606847232.0, /* 2^60 + 2^8: integral, past 2^53 */
                           123456789012.0,
                           -0.0,
                           1e308 * 10, /* +inf */
                           -1e308 * 10,
                           0.0 / 0.0 /* NaN */};
    TraceKV kv[SL_COUNTOF(nums) + 1];
    char keys[SL_COUNTOF(nums)][8];
    for (size_t k = 0; k < SL_COUNTOF(nums); k++) {
        snprintf(keys[k], sizeof(keys[k]), "n%zu", k);
        kv[k] = (TraceKV){keys[k], nums[k], NULL};
    }
    kv[SL_COUNTOF(nums)] = (TraceKV){"quote\"key", 0, "{devices=[2,1]0,1 \"x\"}"};
    TraceSink *sink = NULL;
    assert_int_equal(trace_db_begin_run(db, in, &k_info, &sink, &err), SL_OK);
    TraceDecision d = {instr(in, "dot"), "dot", "contracting", NULL, alts,
                       SL_COUNTOF(alts), kv,    SL_COUNTOF(kv)};
    sink->ops->decision(sink, &d);
    TraceDecision bare = {instr(in, "lhs"), "default", "replicate", NULL, NULL, 0, NULL, 0};
    sink->ops->decision(sink, &bare);
    int64_t run_id = 0;
    assert_int_equal(trace_db_end_run(db, out, -1, &run_id, &err), SL_OK);

    const TraceRun *run = NULL;
    assert_int_equal(trace_run_load(db, run_id, &fx->arena, &run, &err), SL_OK);
    assert_int_equal(run->n_decisions, 2);
    const TraceRunDecision *got = &run->decisions[0];
    assert_int_equal(got->n_alternatives, SL_COUNTOF(alts));
    for (size_t k = 0; k < SL_COUNTOF(alts); k++)
        assert_string_equal(got->alternatives[k], alts[k]);
    assert_int_equal(got->n_numbers, SL_COUNTOF(kv));
    for (size_t k = 0; k < SL_COUNTOF(nums); k++) {
        assert_string_equal(got->numbers[k].key, keys[k]);
        assert_null(got->numbers[k].str);
        double want = nums[k] != nums[k] ? 0.0 : nums[k];             /* NaN: null, read as 0 */
        if (memcmp(&got->numbers[k].num, &want, sizeof(double)) != 0) /* bit for bit */
            fail_msg("number %zu: got %.17g, want %.17g", k, got->numbers[k].num, want);
    }
    assert_true(signbit(got->numbers[5].num)); /* -0.0 keeps its sign */
    assert_string_equal(got->numbers[SL_COUNTOF(nums)].key, "quote\"key");
    assert_string_equal(got->numbers[SL_COUNTOF(nums)].str, "{devices=[2,1]0,1 \"x\"}");
    assert_int_equal(run->decisions[1].n_alternatives, 0);
    assert_null(run->decisions[1].alternatives);
    assert_int_equal(run->decisions[1].n_numbers, 0);
    trace_db_close(db);

    /* The same through the views, as SQL users see them. */
    sqlite3 *raw = sql_open(fx->path);
    char text[512];
    sql_text(raw, "SELECT numbers FROM decision WHERE strategy = 'contracting'", text,
             sizeof(text));
    assert_string_equal(text, "{\"n0\":0.1,\"n1\":3.33333333333333314829e-01,\"n2\":-2.5e-300,"
                              "\"n3\":1152921504606847232,\"n4\":123456789012,\"n5\":-0.0,"
                              "\"n6\":9e999,\"n7\":-9e999,\"n8\":null,"
                              "\"quote\\\"key\":\"{devices=[2,1]0,1 \\\"x\\\"}\"}");
    sql_text(raw, "SELECT alternatives FROM decision WHERE strategy = 'contracting'", text,
             sizeof(text));
    assert_string_equal(text, "[\"say \\\"hi\\\"\",\"back\\\\slash\",\"tab\\tnew\\nline\\u0001\","
                              "\"caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x99\x82\",\"\"]");
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM decision"
                                  " WHERE json_valid(numbers) AND json_valid(alternatives)"),
                     1);
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM decision_alt"), SL_COUNTOF(alts));
    ASSERT_SQL_TEXT(raw, "SELECT strategy FROM decision_alt WHERE idx = 1", "back\\slash");
    ASSERT_SQL_TEXT(raw, "SELECT strategy FROM decision_alt WHERE idx = 3",
                    "caf\xc3\xa9 \xe2\x86\x92 \xf0\x9f\x99\x82");
    assert_true(sql_real(raw, "SELECT num FROM decision_number WHERE key = 'n0'") == 0.1);
    assert_true(sql_real(raw, "SELECT num FROM decision_number WHERE key = 'n1'") == 1.0 / 3.0);
    assert_true(sql_real(raw, "SELECT num FROM decision_number WHERE key = 'n2'") == -2.5e-300);
    assert_true(sql_real(raw, "SELECT num FROM decision_number WHERE key = 'n3'") ==
                1152921504606847232.0);
    assert_true(sql_real(raw, "SELECT num FROM decision_number WHERE key = 'n6'") > 1e308);
    assert_true(sql_real(raw, "SELECT num FROM decision_number WHERE key = 'n7'") < -1e308);
    ASSERT_SQL_TEXT(raw, "SELECT quote(num) || quote(str) FROM decision_number WHERE key = 'n8'",
                    "NULLNULL");
    ASSERT_SQL_TEXT(raw, "SELECT str FROM decision_number WHERE idx = 9",
                    "{devices=[2,1]0,1 \"x\"}");
    ASSERT_SQL_TEXT(raw,
                    "SELECT quote(alternatives) || quote(numbers) FROM decision"
                    " WHERE strategy = 'replicate'",
                    "NULLNULL");

    /* A hand-edited list that is not JSON (SQLite's json_each refuses it), or JSON of another
     * shape than the schema's (the reader refuses it: an array of pairs, a nested value, a
     * number among strings, a scalar, a negative or fractional id): a clear SL_ERR_DB naming
     * the column, no crash. */
    static const char *const broken[][2] = {
        {"UPDATE decision SET numbers = '{\"k\":1' WHERE strategy = 'contracting'",
         "decision.numbers"                                                                                            },
        {"UPDATE decision SET numbers = '[[\"k\",1]]' WHERE strategy = 'contracting'",
         "decision.numbers"                                                                                            },
        {"UPDATE decision SET numbers = '{\"k\":[1]}' WHERE strategy = 'contracting'",
         "decision.numbers"                                                                                            },
        {"UPDATE decision SET numbers = NULL, alternatives = '[\"a\\q\"]'"
         " WHERE strategy = 'contracting'",                                            "decision.alternatives"},
        {"UPDATE decision SET alternatives = '[\"unterminated' WHERE strategy = 'contracting'",
         "decision.alternatives"                                                                                       },
        {"UPDATE decision SET alternatives = '[\"a\",2]' WHERE strategy = 'contracting'",
         "decision.alternatives"                                                                                       },
        {"UPDATE decision SET alternatives = '\"a\"' WHERE strategy = 'contracting'",
         "decision.alternatives"                                                                                       },
        {"UPDATE decision SET alternatives = NULL; UPDATE instr SET operands = '[1,x]'"
         " WHERE name = 'dot'",                                                        "instr.operands"       },
        {"UPDATE instr SET operands = '[1,2] 3' WHERE name = 'dot'",                            "instr.operands"       },
        {"UPDATE instr SET operands = '[-1]' WHERE name = 'dot'",                               "instr.operands"       },
        {"UPDATE instr SET operands = '[1.5]' WHERE name = 'dot'",                              "instr.operands"       },
        {"UPDATE instr SET operands = '{\"a\":1}' WHERE name = 'dot'",                          "instr.operands"       },
        {"UPDATE instr SET operands = '7' WHERE name = 'dot'",                                  "instr.operands"       },
    };
    for (size_t k = 0; k < SL_COUNTOF(broken); k++) {
        assert_int_equal(sqlite3_exec(raw, broken[k][0], NULL, NULL, NULL), SQLITE_OK);
        err = (SlError){0};
        assert_int_equal(trace_db_open(fx->path, TRACE_DB_READ, &db, &err), SL_OK);
        SlStatus st = trace_run_load(db, run_id, &fx->arena, &run, &err);
        if (st != SL_ERR_DB || !strstr(err.msg, broken[k][1]) || !strstr(err.msg, "malformed JSON"))
            fail_msg("%s: %s: %s", broken[k][0], sl_status_name(st), err.msg);
        trace_db_close(db);
    }
    assert_int_equal(sqlite3_close(raw), SQLITE_OK);
    ir_module_fini(in);
    ir_module_fini(out);
}

/* Lists longer than one SQL function call takes (127 arguments): an instr with 200 operands,
 * a decision with 200 alternatives and 100 numbers keep every element, in order. */
static void
test_long_lists_round_trip(void **state)
{
    TraceFx *fx = *state;
    enum { N_OPS = 200, N_ALTS = 200, N_NUMS = 100 };
    SlBuf hlo;
    sl_buf_init(&hlo);
    sl_buf_puts(&hlo, "HloModule big, num_partitions=2\n\nENTRY main {\n");
    for (int k = 0; k < 3; k++)
        sl_buf_printf(&hlo, "  p%d = f32[] parameter(%d)\n", k, k);
    sl_buf_puts(&hlo, "  ROOT t = (");
    for (int k = 0; k < N_OPS; k++)
        sl_buf_puts(&hlo, k ? ", f32[]" : "f32[]");
    sl_buf_puts(&hlo, ") tuple(");
    for (int k = 0; k < N_OPS; k++) /* p0, p1, p2, p0, ...: the order is visible */
        sl_buf_printf(&hlo, k ? ", p%d" : "p%d", k % 3);
    sl_buf_puts(&hlo, ")\n}\n");
    assert_false(hlo.failed);
    IrModule *in = tfx_parse(fx, hlo.data), *out = tfx_parse(fx, hlo.data);
    sl_buf_fini(&hlo);

    char alt_text[N_ALTS][16], key_text[N_NUMS][16];
    const char *alts[N_ALTS];
    TraceKV nums[N_NUMS];
    for (int k = 0; k < N_ALTS; k++) {
        snprintf(alt_text[k], sizeof(alt_text[k]), "alt%d", k);
        alts[k] = alt_text[k];
    }
    for (int k = 0; k < N_NUMS; k++) { /* every 7th a string, the rest k/4 (some fractional) */
        snprintf(key_text[k], sizeof(key_text[k]), "k%d", k);
        nums[k] = (TraceKV){key_text[k], k / 4.0, k % 7 ? NULL : alt_text[k]};
    }
    SlError err = {0};
    TraceDb *db = NULL;
    TraceSink *sink = NULL;
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_APPEND, &db, &err), SL_OK);
    assert_int_equal(trace_db_begin_run(db, in, &k_info, &sink, &err), SL_OK);
    TraceDecision d = {instr(in, "t"), "tuple", "replicate", NULL, alts, N_ALTS, nums, N_NUMS};
    sink->ops->decision(sink, &d);
    int64_t run_id = 0;
    if (trace_db_end_run(db, out, -1, &run_id, &err) != SL_OK)
        fail_msg("end_run: %s", err.msg);

    const TraceRun *run = NULL;
    assert_int_equal(trace_run_load(db, run_id, &fx->arena, &run, &err), SL_OK);
    const TraceRunInstr *t = trace_run_find_instr(run, TRACE_BEFORE, "t");
    assert_non_null(t);
    assert_int_equal(t->n_operands, N_OPS);
    for (int k = 0; k < N_OPS; k++) {
        char want[8];
        snprintf(want, sizeof(want), "p%d", k % 3);
        assert_string_equal(run->instrs[t->operands[k]].name, want);
    }
    assert_int_equal(run->n_decisions, 1);
    const TraceRunDecision *got = &run->decisions[0];
    assert_int_equal(got->n_alternatives, N_ALTS);
    for (int k = 0; k < N_ALTS; k++)
        assert_string_equal(got->alternatives[k], alts[k]);
    assert_int_equal(got->n_numbers, N_NUMS);
    for (int k = 0; k < N_NUMS; k++) {
        assert_string_equal(got->numbers[k].key, key_text[k]);
        if (nums[k].str)
            assert_string_equal(got->numbers[k].str, nums[k].str);
        else
            assert_true(!got->numbers[k].str && got->numbers[k].num == k / 4.0);
    }
    trace_db_close(db);

    sqlite3 *raw = sql_open(fx->path);
    assert_int_equal(sql_int(raw, "SELECT count(*) FROM edge e JOIN instr u ON u.id = e.user"
                                  " WHERE u.name = 't' AND u.phase = 'before'"),
                     N_OPS);
    ASSERT_SQL_TEXT(raw,
                    "SELECT o.name FROM edge e JOIN instr u ON u.id = e.user"
                    " JOIN instr o ON o.id = e.operand"
                    " WHERE u.name = 't' AND u.phase = 'after' AND e.operand_index = 199",
                    "p1");
    ASSERT_SQL_TEXT(raw, "SELECT strategy FROM decision_alt WHERE idx = 150", "alt150");
    ASSERT_SQL_TEXT(raw, "SELECT key || '=' || num FROM decision_number WHERE idx = 99",
                    "k99=24.75");
    ASSERT_SQL_TEXT(raw, "SELECT str FROM decision_number WHERE idx = 98", "alt98");
    assert_int_equal(sqlite3_close(raw), SQLITE_OK);
    ir_module_fini(in);
    ir_module_fini(out);
}

/* A run's instrs are the id range its run row names; the reader keeps to its own run even
 * when a hand-edited range takes in another run's rows. */
static void
test_run_instr_range(void **state)
{
    TraceFx *fx = *state;
    SlError err = {0};
    TraceDb *db = NULL;
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_APPEND, &db, &err), SL_OK);
    assert_int_equal(write_dot_run(fx, db), 1);
    assert_int_equal(write_dot_run(fx, db), 2);
    trace_db_close(db);
    sqlite3 *raw = sql_open(fx->path);
    ASSERT_SQL_TEXT(raw, "SELECT group_concat(first_instr || '-' || last_instr, ' ') FROM run",
                    "1-10 11-20");
    /* Operands name rows of the same run: dot(lhs, rhs) of run 2 is [11,12]. */
    ASSERT_SQL_TEXT(raw, "SELECT operands FROM instr WHERE run_id = 2 AND name = 'dot'", "[11,12]");
    assert_int_equal(
        sqlite3_exec(raw, "UPDATE run SET first_instr = 1 WHERE id = 2", NULL, NULL, NULL),
        SQLITE_OK);
    assert_int_equal(sqlite3_close(raw), SQLITE_OK);
    assert_int_equal(trace_db_open(fx->path, TRACE_DB_READ, &db, &err), SL_OK);
    const TraceRun *run = NULL;
    assert_int_equal(trace_run_load(db, 2, &fx->arena, &run, &err), SL_OK);
    assert_int_equal(run->n_instrs, 10);
    assert_int_equal(run->n_before, 3);
    const TraceRunInstr *dot = trace_run_find_instr(run, TRACE_BEFORE, "dot");
    assert_non_null(dot);
    assert_int_equal(dot->n_operands, 2);
    assert_string_equal(run->instrs[dot->operands[0]].name, "lhs");
    assert_string_equal(run->instrs[dot->operands[1]].name, "rhs");
    const TraceRunInstr *ar = trace_run_find_instr(run, TRACE_AFTER, "all-reduce.1");
    assert_non_null(ar);
    assert_ptr_equal(&run->instrs[ar->derived_from], dot);
    assert_int_equal(run->n_calls, 1);
    assert_string_equal(run->calls[0].computation, "add");
    trace_db_close(db);
}

/* ---- the memory sink ---- */

static void
test_mem_sink(void **state)
{
    TraceFx *fx = *state;
    IrModule *in = tfx_parse(fx, k_dot_in), *out = tfx_parse(fx, k_dot_out);
    TraceMemSink m;
    trace_mem_sink_init(&m);
    feed_dot_events(fx, &m.sink, in, out);
    assert_int_equal(m.n_emits, 4);
    assert_int_equal(m.n_decisions, 1);
    assert_int_equal(m.n_reshards, 2);
    assert_int_equal(m.n_collectives, 1);
    assert_int_equal(m.n_warnings, 1);
    assert_non_null(strstr(m.log.data, "decision dot dot contracting alts=batch,non_contracting"));
    assert_non_null(strstr(m.log.data, "reshard #2 dot dot.1 {devices=[2,1]0,1} -> {replicated}"
                                       " all-reduce all-reduce.1\n"));
    assert_non_null(strstr(m.log.data, "collective all-reduce.1 dot cause=dot reshard=0\n"));
    trace_mem_sink_fini(&m);
    /* The null sink accepts nothing and is never NULL. */
    assert_non_null(trace_null_sink());
    ir_module_fini(in);
    ir_module_fini(out);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_schema_created_and_version_checked, tfx_setup,
                                        tfx_teardown),
        cmocka_unit_test_setup_teardown(test_run_rows, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_memory_rows, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_failed_run_leaves_no_rows, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_damaged_traces_named, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_locked_database_fails_cleanly, tfx_setup,
                                        tfx_teardown),
        cmocka_unit_test_setup_teardown(test_two_concurrent_writers, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_device_traffic_views, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_conditional_trip_counts, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_nested_loop_trip_counts, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_windowed_loops_counted, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_called_computations_and_params, tfx_setup,
                                        tfx_teardown),
        cmocka_unit_test_setup_teardown(test_load_parts, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_explain_contracting_dot, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_explain_decision_chain, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_explain_alternatives_priced, tfx_setup,
                                        tfx_teardown),
        cmocka_unit_test_setup_teardown(test_decision_lists_round_trip, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_long_lists_round_trip, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_run_instr_range, tfx_setup, tfx_teardown),
        cmocka_unit_test_setup_teardown(test_mem_sink, tfx_setup, tfx_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
