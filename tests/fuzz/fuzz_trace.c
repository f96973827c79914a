/* fuzz_trace.c - fuzz target: the trace reader (trace_db_open, trace_run_load_parts) and
 * what reads a loaded run (report_build and its printers, trace_explain) on corrupted trace
 * databases. The first call records one run of a small module of ours into a template
 * database; every input is a list of corruptions applied to a copy of it:
 *   byte 0 even: SQL edits, records of [table, column, row, op, value bytes...] turned into
 *                UPDATE/DELETE/DROP statements on the copy (op: NULL, integer, real, text,
 *                blob, delete the row, drop the table);
 *   byte 0 odd:  raw patches of the file, records of [offset u24, length u8, bytes].
 * Only a crash or sanitizer report is a finding: every error is the reader's to word. */
#include <sqlite3.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "hlo/hlo.h"
#include "reports/report.h"
#include "spmd/spmd.h"
#include "trace/trace_db.h"
#include "trace/trace_run.h"

static const char k_module[] =
    "HloModule fuzz_trace, num_partitions=4\n"
    "\n"
    "%sum (a: f32[], b: f32[]) -> f32[] {\n"
    "  %a = f32[] parameter(0)\n"
    "  %b = f32[] parameter(1)\n"
    "  ROOT %s = f32[] add(%a, %b)\n"
    "}\n"
    "\n"
    "ENTRY %main (x: f32[8,16], w: f32[16,32], v: f32[32,16]) -> (f32[8,16], f32[16]) {\n"
    "  %x = f32[8,16] parameter(0), sharding={devices=[2,1,2]<=[4] last_tile_dim_replicate}, "
    "metadata={op_name=\"x\"}\n"
    "  %w = f32[16,32] parameter(1), sharding={devices=[1,4]<=[4]}\n"
    "  %v = f32[32,16] parameter(2), sharding={devices=[4,1]<=[4]}\n"
    "  %h = f32[8,32] dot(%x, %w), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
    "sharding={devices=[1,4]<=[4]}, metadata={op_name=\"h\" source_file=\"m.py\" "
    "source_line=3}\n"
    "  %y = f32[8,16] dot(%h, %v), lhs_contracting_dims={1}, rhs_contracting_dims={0}, "
    "sharding={replicated}\n"
    "  %z = f32[] constant(0)\n"
    "  %r = f32[16] reduce(%y, %z), dimensions={0}, to_apply=%sum, "
    "sharding={devices=[4]<=[4]}\n"
    "  ROOT %t = (f32[8,16], f32[16]) tuple(%y, %r), sharding={{replicated}, "
    "{devices=[4]<=[4]}}\n"
    "}\n";

typedef struct Template {
    char dir[64], path[96];
    unsigned char *bytes;
    size_t len;
} Template;

static Template g_tpl; /* built once per process: the fuzzer calls us many times */

static void
fail_setup(const char *what, const SlError *err)
{
    fprintf(stderr, "fuzz_trace: cannot build the template database: %s: %s\n", what,
            err ? err->msg : "");
    abort();
}

static void
read_file(const char *path, unsigned char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        fail_setup("reopen", NULL);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *out = malloc(n > 0 ? (size_t)n : 1);
    if (!*out || fread(*out, 1, (size_t)n, f) != (size_t)n)
        fail_setup("read", NULL);
    *len = (size_t)n;
    fclose(f);
}

static void
build_template(void)
{
    snprintf(g_tpl.dir, sizeof(g_tpl.dir), "/tmp/shardlens-fuzz-trace-XXXXXX");
    if (!mkdtemp(g_tpl.dir))
        fail_setup("mkdtemp", NULL);
    snprintf(g_tpl.path, sizeof(g_tpl.path), "%s/t.db", g_tpl.dir);
    char tpl_path[96];
    snprintf(tpl_path, sizeof(tpl_path), "%s/template.db", g_tpl.dir);
    SlArena arena, out_arena;
    SlInterner names;
    sl_arena_init(&arena);
    sl_arena_init(&out_arena);
    sl_interner_init(&names, &arena);
    IrModule *m = NULL, *out = NULL;
    SlError err = {0};
    SlStr text = {k_module, sizeof(k_module) - 1};
    if (hlo_parse(&arena, &names, text, "template", &m, &err))
        fail_setup("parse", &err);
    SpmdOptions o;
    spmd_options_init(&o);
    o.num_partitions = 4;
    TraceDb *db = NULL;
    TraceSink *sink = NULL;
    SlBuf opts;
    sl_buf_init(&opts);
    spmd_options_print(&o, &opts);
    TraceRunInfo info = {"fuzz", "2026-01-01T00:00:00Z", text, sl_buf_str(&opts), 4, NULL, 0};
    if (trace_db_open(tpl_path, TRACE_DB_APPEND, &db, &err) ||
        trace_db_begin_run(db, m, &info, &sink, &err) ||
        spmd_partition(m, &o, sink, &out_arena, &out, &err) ||
        trace_db_end_run(db, out, 1.0, NULL, &err))
        fail_setup("record", &err);
    trace_db_close(db);
    ir_module_fini(out);
    ir_module_fini(m);
    sl_buf_fini(&opts);
    sl_interner_fini(&names);
    sl_arena_fini(&out_arena);
    sl_arena_fini(&arena);
    read_file(tpl_path, &g_tpl.bytes, &g_tpl.len);
    unlink(tpl_path);
}

static void
remove_template(void)
{
    unlink(g_tpl.path);
    rmdir(g_tpl.dir);
    free(g_tpl.bytes);
}

static void
write_copy(const unsigned char *bytes, size_t len)
{
    FILE *f = fopen(g_tpl.path, "wb");
    if (!f || fwrite(bytes, 1, len, f) != len)
        fail_setup("write the copy", NULL);
    fclose(f);
}

/* Table `k` (mod the table count) of the schema, by name order; false when there is none. */
static bool
table_name(sqlite3 *db, unsigned k, char *out, size_t n)
{
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name",
                           -1, &st, NULL) != SQLITE_OK)
        return false;
    char names[32][64];
    unsigned count = 0;
    while (count < 32 && sqlite3_step(st) == SQLITE_ROW)
        snprintf(names[count++], sizeof(names[0]), "%s", sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    if (!count)
        return false;
    snprintf(out, n, "%s", names[k % count]);
    return true;
}

/* Column `k` (mod the column count) of `table`, or false when the table is gone. */
static bool
column_name(sqlite3 *db, const char *table, unsigned k, char *out, size_t n)
{
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT name FROM pragma_table_info('%s')", table);
    sqlite3_stmt *st = NULL;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return false;
    char names[32][64];
    unsigned count = 0;
    while (count < 32 && sqlite3_step(st) == SQLITE_ROW)
        snprintf(names[count++], sizeof(names[0]), "%s", sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    if (!count)
        return false;
    snprintf(out, n, "%s", names[k % count]);
    return true;
}

/* Applies SQL edits from `p` on; every statement may fail (the edit is then skipped). */
static void
apply_sql_edits(const uint8_t *p, size_t n)
{
    sqlite3 *db = NULL;
    if (sqlite3_open(g_tpl.path, &db) != SQLITE_OK) {
        sqlite3_close(db);
        return;
    }
    size_t i = 0;
    while (i + 4 <= n) {
        char table[64], col[64];
        unsigned row = p[i + 2], op = p[i + 3] % 8;
        bool ok = table_name(db, p[i], table, sizeof(table)) &&
                  column_name(db, table, p[i + 1], col, sizeof(col));
        i += 4;
        if (!ok)
            continue;
        char sql[512];
        char where[160];
        snprintf(where, sizeof(where),
                 "rowid = (SELECT rowid FROM \"%s\" ORDER BY rowid LIMIT 1 OFFSET %u)", table, row);
        sqlite3_stmt *st = NULL;
        int64_t v = 0;
        size_t take = 0;
        switch (op) {
        case 0: snprintf(sql, sizeof(sql), "UPDATE \"%s\" SET \"%s\" = NULL WHERE %s", table, col,
                         where); break;
        case 1:
        case 2:
            take = n - i < 8 ? n - i : 8;
            for (size_t k = 0; k < take; k++)
                v = (int64_t)((uint64_t)v << 8 | p[i + k]);
            if (op == 2)
                v = (int8_t)(take ? p[i] : 0); /* small values, negative ones included */
            snprintf(sql, sizeof(sql), "UPDATE \"%s\" SET \"%s\" = %lld WHERE %s", table, col,
                     (long long)v, where);
            break;
        case 3:
        case 4:
            take = i < n ? 1 + (size_t)(p[i] % 24) : 0;
            take = take > n - i ? n - i : take;
            snprintf(sql, sizeof(sql), "UPDATE \"%s\" SET \"%s\" = %s WHERE %s", table, col,
                     op == 3 ? "CAST(?1 AS TEXT)" : "?1", where);
            break;
        case 5:
            snprintf(sql, sizeof(sql), "UPDATE \"%s\" SET \"%s\" = %g WHERE %s", table, col,
                     i < n ? (double)(int8_t)p[i] * 1e15 : 0.5, where);
            take = i < n;
            break;
        case 6: snprintf(sql, sizeof(sql), "DELETE FROM \"%s\" WHERE %s", table, where); break;
        default:
            if (row % 16 == 0)
                snprintf(sql, sizeof(sql), "DROP TABLE \"%s\"", table);
            else
                snprintf(sql, sizeof(sql), "INSERT INTO \"%s\" SELECT * FROM \"%s\" WHERE %s",
                         table, table, where);
        }
        if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK) {
            if (op == 3 || op == 4)
                sqlite3_bind_blob(st, 1, p + i, (int)take, SQLITE_TRANSIENT);
            sqlite3_step(st);
        }
        sqlite3_finalize(st);
        i += take;
    }
    sqlite3_close(db);
}

static void
read_run(void)
{
    TraceDb *db = NULL;
    SlError err = {0};
    SlArena arena;
    sl_arena_init(&arena);
    const TraceRun *run = NULL;
    if (trace_db_open(g_tpl.path, TRACE_DB_READ, &db, &err) == SL_OK &&
        trace_run_load_parts(db, 0, TRACE_LOAD_ALL, &arena, &run, &err) == SL_OK) {
        ReportOptions o;
        report_options_init(&o);
        Report *rep = NULL;
        SlBuf b;
        sl_buf_init(&b);
        if (report_build(run, &o, &arena, &rep, &err) == SL_OK) {
            report_print_text(rep, &b);
            report_print_summary_line(rep, &b);
            SlError jerr = {0};
            report_write_json(rep, &b, &jerr);
        }
        for (uint32_t i = 0; i < run->n_instrs && i < 8; i++)
            if (run->instrs[i].name)
                trace_explain(run, run->instrs[i].name, &b, &err);
        trace_explain(run, "no-such-instruction", &b, &err);
        sl_buf_fini(&b);
    }
    if (err.status && !err.msg[0])
        FUZZ_BUG("trace error %d without a message", (int)err.status);
    trace_db_close(db);
    sl_arena_fini(&arena);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!g_tpl.bytes) {
        build_template();
        atexit(remove_template);
    }
    if (size == 0 || size > 4096)
        return 0;
    if (data[0] % 2 == 0) {
        write_copy(g_tpl.bytes, g_tpl.len);
        apply_sql_edits(data + 1, size - 1);
    } else {
        unsigned char *copy = malloc(g_tpl.len);
        if (!copy)
            return 0;
        memcpy(copy, g_tpl.bytes, g_tpl.len);
        for (size_t i = 1; i + 4 <= size;) {
            size_t off = ((size_t)data[i] << 16 | (size_t)data[i + 1] << 8 | data[i + 2]) %
                         g_tpl.len;
            size_t len = data[i + 3] % 16;
            i += 4;
            for (size_t k = 0; k < len && i < size && off + k < g_tpl.len; k++)
                copy[off + k] = data[i++];
        }
        write_copy(copy, g_tpl.len);
        free(copy);
    }
    read_run();
    return 0;
}
