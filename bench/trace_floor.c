/* trace_floor.c - the floor for tracing cost: how long a bare C program takes to insert the
 * rows of one recorded run, one prepared statement per table, in one transaction.
 *
 *   bench_trace_floor TRACE.db     (a file holding exactly the run to measure, e.g. written by
 *                                   `shardlens partition --trace` into a fresh file)
 *
 * The rows are read into memory first (not timed), then inserted into a fresh database with
 * the same schema (created by trace_db_open, so the indexes match what the tool maintains).
 * Prints rows, milliseconds and rows per second. Benchmark only: not part of the test suite. */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "trace/trace_db.h"

typedef struct Table {
    char name[64];
    int n_cols;
    size_t n_rows;
    sqlite3_value **vals; /* n_rows * n_cols */
} Table;

static double
now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int
load_table(sqlite3 *db, Table *t)
{
    char sql[128];
    snprintf(sql, sizeof(sql), "SELECT * FROM \"%.63s\"", t->name);
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return -1;
    t->n_cols = sqlite3_column_count(st);
    size_t cap = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        if (t->n_rows == cap) {
            cap = cap ? cap * 2 : 1024;
            t->vals = realloc(t->vals, cap * (size_t)t->n_cols * sizeof(*t->vals));
            if (!t->vals)
                return -1;
        }
        for (int c = 0; c < t->n_cols; c++)
            t->vals[t->n_rows * (size_t)t->n_cols + (size_t)c] =
                sqlite3_value_dup(sqlite3_column_value(st, c));
        t->n_rows++;
    }
    return sqlite3_finalize(st) == SQLITE_OK ? 0 : -1;
}

static int
insert_table(sqlite3 *db, const Table *t)
{
    char sql[512];
    int n = snprintf(sql, sizeof(sql), "INSERT INTO \"%.63s\" VALUES (", t->name);
    for (int c = 0; c < t->n_cols && n < (int)sizeof(sql) - 4; c++)
        n += snprintf(sql + n, sizeof(sql) - (size_t)n, c ? ",?" : "?");
    snprintf(sql + n, sizeof(sql) - (size_t)n, ")");
    sqlite3_stmt *st;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK)
        return -1;
    for (size_t r = 0; r < t->n_rows; r++) {
        for (int c = 0; c < t->n_cols; c++)
            sqlite3_bind_value(st, c + 1, t->vals[r * (size_t)t->n_cols + (size_t)c]);
        if (sqlite3_step(st) != SQLITE_DONE)
            return -1;
        sqlite3_reset(st);
    }
    return sqlite3_finalize(st) == SQLITE_OK ? 0 : -1;
}

int
main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: bench_trace_floor TRACE.db\n");
        return 2;
    }
    sqlite3 *src;
    if (sqlite3_open_v2(argv[1], &src, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
        return fprintf(stderr, "%s: cannot open\n", argv[1]), 2;
    Table tables[32];
    int n_tables = 0;
    sqlite3_stmt *st;
    sqlite3_prepare_v2(src, "SELECT name FROM sqlite_master WHERE type='table' ORDER BY rowid",
                       -1, &st, NULL);
    while (sqlite3_step(st) == SQLITE_ROW && n_tables < 32) {
        memset(&tables[n_tables], 0, sizeof(Table));
        snprintf(tables[n_tables].name, sizeof(tables[n_tables].name), "%s",
                 (const char *)sqlite3_column_text(st, 0));
        n_tables++;
    }
    sqlite3_finalize(st);
    size_t rows = 0;
    for (int i = 0; i < n_tables; i++) {
        if (load_table(src, &tables[i]))
            return fprintf(stderr, "cannot read %s\n", tables[i].name), 1;
        rows += tables[i].n_rows;
    }
    const char *dst_path = "trace_floor.tmp.db";
    remove(dst_path);
    TraceDb *tdb;
    SlError err = {0};
    if (trace_db_open(dst_path, TRACE_DB_APPEND, &tdb, &err))
        return fprintf(stderr, "%s\n", err.msg), 1;
    trace_db_close(tdb);
    sqlite3 *dst;
    sqlite3_open(dst_path, &dst);
    double t0 = now_ms();
    sqlite3_exec(dst, "BEGIN", NULL, NULL, NULL);
    for (int i = 0; i < n_tables; i++)
        if (insert_table(dst, &tables[i]))
            return fprintf(stderr, "insert into %s: %s\n", tables[i].name, sqlite3_errmsg(dst)),
                   1;
    sqlite3_exec(dst, "COMMIT", NULL, NULL, NULL);
    double ms = now_ms() - t0;
    printf("%zu rows in %.1f ms = %.0f rows/s (bare insert, one statement per table, one "
           "transaction)\n",
           rows, ms, (double)rows / ms * 1e3);
    sqlite3_close(dst);
    sqlite3_close(src);
    remove(dst_path);
    return 0;
}
