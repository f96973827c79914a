/* sqlite_sink_lists.c - the inserts with a JSON list column (instr.operands,
 * decision.alternatives and .numbers), one prepared statement per list length.
 * Does not own: binding the rows (sqlite_sink_module.c, sqlite_sink_rows.c). */
#include <math.h>
#include <stdio.h>

#include "trace/sqlite_sink_int.h"

/* The inserts with a JSON list column, up to it; wr_list_stmt completes them for a length. */
static const char k_instr_sql[] =
    "INSERT INTO instr(id, run_id, phase, ir_id, computation, is_root, name, opcode, shape,"
    " sharding, size_bytes, op_name, source_file, source_line, derived_from, param_number,"
    " operands) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,";
static const char k_decision_sql[] =
    "INSERT INTO decision(run_id, seq, instr, handler, strategy, reason, alternatives, numbers)"
    " VALUES (?,?,?,?,?,?,";

/* ---- JSON lists (schema/trace.sql: instr.operands, decision.alternatives, .numbers) ----
 * SQLite builds them: each element is a bound parameter, and the INSERT wraps them in
 * json_array(...) or json_object(...), which quote and escape strings and spell numbers. The
 * SQL therefore depends on the lengths: one statement per length (per pair of lengths for a
 * decision), prepared when first needed and kept until the attempt ends (wr_list_stmt). */

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
sqlite3_stmt *
wr_list_stmt(Wr *w, int kind, uint32_t n1, uint32_t n2)
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
        wr_bind_rc(w, sqlite3_prepare_v3(w->db->sql, sql.data, -1, 0, &st, NULL),
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
void
wr_bind_number(Wr *w, sqlite3_stmt *st, int i, double v)
{
    if (v != v)
        wr_bind_null(w, st, i);
    else if (v >= -0x1p63 && v < 0x1p63 && v == (double)(int64_t)v && !(v == 0 && signbit(v)))
        wr_bind_i64(w, st, i, (int64_t)v);
    else
        wr_bind_f64(w, st, i, v);
}
