/* reader.c - loads one run of a trace database into the plain structs of trace_run.h.
 * Owns: the read queries, and checking the JSON lists the schema keeps in a row (instr.operands,
 * decision.alternatives, decision.numbers); SQLite decodes them (json_each), never C code here.
 * Does not own: the cost model, which lives in the schema's views and is read from them
 * (collective_traffic, device_traffic), never recomputed here. Invariant: all queries of one
 * load run in one read transaction, so a run appended by another process meanwhile cannot mix
 * in; every string is copied into the caller's arena. Each table is read once, plus once per
 * JSON list it holds; the big ones (instr, called_computation) by key range, in key order, so
 * SQLite neither looks rows up one by one nor sorts them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/trace_int.h"
#include "trace/trace_run.h"

/* One member of decision.numbers, at index `pos` of decision `decision`. */
typedef struct NumberRow {
    uint32_t decision, pos;
    TraceRunNumber n;
} NumberRow;

typedef struct Rd {
    TraceDb *db;
    SlArena *arena;
    TraceRun *run;
    unsigned parts;   /* TraceLoadParts */
    int rc;           /* first SQLite failure */
    const char *what; /* the query that failed, described ("reading run_option") */
    char what_buf[64];
    bool oom;
    const char *bad;                 /* what held malformed JSON; the load fails */
    char range[200];                 /* with bad = "": a value out of its bounds, described */
    int64_t first_instr, last_instr; /* run.first_instr, run.last_instr; 0: no instrs */
    SlVec rows;                      /* rows of the current query, copied to the arena at its end */
    SlVec instr_ids;                 /* int64_t instr.id per run->instrs entry, ascending */
    SlVec elems;        /* list elements (OperandRow, AltRow, NumberRow) until attached */
    uint32_t instr_cap; /* run->instrs holds this many, filled in place; 0: rows go via `rows` */
    SlMap decision_idx, reshard_idx, collective_idx, while_idx, memory_idx;
    bool has_last_decision; /* row_decision_idx's last answer */
    int64_t last_decision_id;
    uint32_t last_decision;
} Rd;

typedef bool (*RowFn)(Rd *r, sqlite3_stmt *st);

/* A value the reader sizes or indexes by must be in lo..hi: a damaged trace fails to load
 * with a message, instead of making a report allocate by it. */
static bool
in_range(Rd *r, const char *what, int64_t v, int64_t lo, int64_t hi)
{
    if (v >= lo && v <= hi)
        return true;
    if (!r->bad) {
        snprintf(r->range, sizeof(r->range), "%s is %lld, outside %lld..%lld (%s)", what,
                 (long long)v, (long long)lo, (long long)hi,
                 hi == SL_MAX_DEVICES ? "shardlens handles at most 65536 devices"
                                      : "bounded by the run's num_partitions");
        r->bad = "";
    }
    return false;
}

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

/* A text column the schema declares NOT NULL. A damaged file can still hold a NULL there; the
 * readers of a run rely on these being text, so the load fails, naming `what`. */
static const char *
col_req(Rd *r, sqlite3_stmt *st, int col, const char *what)
{
    const char *t = col_text(r, st, col);
    if (t)
        return t;
    if (!r->bad) {
        snprintf(r->range, sizeof(r->range), "%s is NULL, which the schema forbids (a damaged "
                 "trace)", what);
        r->bad = "";
    }
    return "";
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

/* The index of instr row `id` in run->instrs, or TRACE_NONE. Rows were read in id order and a
 * run's ids are contiguous, so the offset from the first id finds it; a binary search covers
 * a file where they are not. */
static uint32_t
instr_index(const Rd *r, int64_t id)
{
    const int64_t *ids = r->instr_ids.data;
    size_t n = r->instr_ids.len;
    if (!n)
        return TRACE_NONE;
    if (id >= ids[0] && (uint64_t)(id - ids[0]) < n && ids[id - ids[0]] == id)
        return (uint32_t)(id - ids[0]);
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ids[mid] < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && ids[lo] == id ? (uint32_t)lo : TRACE_NONE;
}

static uint32_t
col_instr(const Rd *r, sqlite3_stmt *st, int col)
{
    if (sqlite3_column_type(st, col) == SQLITE_NULL)
        return TRACE_NONE;
    return instr_index(r, sqlite3_column_int64(st, col));
}

static void
put(Rd *r, SlMap *m, int64_t row, size_t idx)
{
    if (!sl_map_put(m, (uint64_t)row, idx))
        r->oom = true;
}

/* "reading TABLE" for a query's first FROM: errors name what was read, never the SQL. */
static const char *
describe(Rd *r, const char *sql)
{
    const char *from = strstr(sql, " FROM ");
    size_t n = 0;
    if (from) {
        from += 6;
        while (from[n] && from[n] != ' ' && n < sizeof(r->what_buf) - 16)
            n++;
    }
    snprintf(r->what_buf, sizeof(r->what_buf), "reading %.*s", (int)n,
             from && n ? from : "the trace");
    return r->what_buf;
}

/* Runs `sql` with ?1 bound to the run id and ?2, ?3 to its first and last instr id, calling
 * `fn` per row. A failure is reported as `what` (NULL: "reading" the table it reads). */
static void
query_what(Rd *r, const char *what, const char *sql, RowFn fn)
{
    if (r->rc != SQLITE_OK || r->oom || r->bad)
        return;
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(r->db->sql, sql, -1, &st, NULL);
    int n_params = rc == SQLITE_OK ? sqlite3_bind_parameter_count(st) : 0;
    if (rc == SQLITE_OK && n_params >= 1)
        rc = sqlite3_bind_int64(st, 1, r->run->id);
    if (rc == SQLITE_OK && n_params >= 3 &&
        (rc = sqlite3_bind_int64(st, 2, r->first_instr)) == SQLITE_OK)
        rc = sqlite3_bind_int64(st, 3, r->last_instr);
    while (rc == SQLITE_OK && !r->oom && !r->bad) {
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
        r->what = what ? what : describe(r, sql);
    }
}

static void
query(Rd *r, const char *sql, RowFn fn)
{
    query_what(r, NULL, sql, fn);
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
    TraceRunOption o = {col_req(r, st, 0, "run_option.key"), col_text(r, st, 1)};
    return PUSH(r, TraceRunOption, o);
}

static bool
row_instr(Rd *r, sqlite3_stmt *st)
{
    TraceRunInstr i = {0};
    const char *phase = (const char *)sqlite3_column_text(st, 1);
    i.phase = phase && strcmp(phase, "after") == 0 ? TRACE_AFTER : TRACE_BEFORE;
    i.ir_id = (uint32_t)sqlite3_column_int64(st, 2);
    i.computation = col_req(r, st, 3, "instr.computation");
    i.is_root = sqlite3_column_int(st, 4) != 0;
    i.name = col_req(r, st, 5, "instr.name");
    i.opcode = col_req(r, st, 6, "instr.opcode");
    i.shape = col_req(r, st, 7, "instr.shape");
    i.sharding = col_text(r, st, 8);
    i.size_bytes = sqlite3_column_int64(st, 9);
    i.op_name = col_text(r, st, 10);
    i.source_file = col_text(r, st, 11);
    i.source_line = sqlite3_column_int64(st, 12);
    i.derived_from = col_instr(r, st, 13); /* 'before' rows come first */
    i.param_number = sqlite3_column_type(st, 14) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 14);
    if (!SL_VEC_PUSH(&r->instr_ids, int64_t, sqlite3_column_int64(st, 0)))
        return false;
    if (!r->instr_cap)
        return PUSH(r, TraceRunInstr, i);
    if (SL_NEVER(r->run->n_instrs >= r->instr_cap)) /* ids are unique within the range */
        return false;
    r->run->instrs[r->run->n_instrs++] = i;
    return true;
}

static bool
row_call(Rd *r, sqlite3_stmt *st)
{
    TraceRunCall c = {col_instr(r, st, 0), col_req(r, st, 1, "called_computation.role"),
                     col_req(r, st, 2, "called_computation.computation")};
    if (c.instr == TRACE_NONE)
        return true;
    return PUSH(r, TraceRunCall, c);
}

static bool
row_decision(Rd *r, sqlite3_stmt *st)
{
    TraceRunDecision d = {0};
    d.seq = (uint32_t)sqlite3_column_int64(st, 1);
    d.instr = col_instr(r, st, 2);
    d.handler = col_req(r, st, 3, "decision.handler");
    d.strategy = col_req(r, st, 4, "decision.strategy");
    d.reason = col_text(r, st, 5);
    put(r, &r->decision_idx, sqlite3_column_int64(st, 0), r->rows.len);
    return PUSH(r, TraceRunDecision, d);
}

/* ---- the JSON lists of a row: instr.operands, decision.alternatives, decision.numbers ----
 * SQLite decodes them: json_each gives one row per element, with its index (key), its JSON
 * type and its SQL value (atom), and a column that is not JSON fails the query with SQLite's
 * "malformed JSON". Here we only check that each element has the type the schema gives it
 * and put it in its place: an array's element at the index json_each gives, an object's
 * member (decision.numbers) after the ones before it, as json_each walks it in text order. */

typedef enum JsonKind { JK_NULL, JK_INTEGER, JK_REAL, JK_TEXT, JK_ARRAY, JK_OTHER } JsonKind;

/* json_each's type column: null, true, false, integer, real, text, array or object. */
static JsonKind
col_kind(sqlite3_stmt *st, int col)
{
    const char *t = (const char *)sqlite3_column_text(st, col);
    switch (t ? t[0] : '\0') {
    case 'n':
        return JK_NULL;
    case 'i':
        return JK_INTEGER;
    case 'r':
        return JK_REAL;
    case 't':
        return t[1] == 'e' ? JK_TEXT : JK_OTHER; /* text; true */
    case 'a':
        return JK_ARRAY;
    default:
        return JK_OTHER;
    }
}

/* json_each's key column: the element's index in its array; -1 when the value was not an
 * array (an object's key, or NULL for a scalar). */
static int64_t
col_pos(sqlite3_stmt *st, int col)
{
    if (sqlite3_column_type(st, col) != SQLITE_INTEGER)
        return -1;
    int64_t k = sqlite3_column_int64(st, col);
    return k >= 0 && k < UINT32_MAX ? k : -1;
}

/* A JSON string element, copied; NULL when it holds a NUL byte, which a C string cannot (SQLite
 * 3.40 ends a string at \u0000 itself; a later one may not). */
static const char *
col_json_text(Rd *r, sqlite3_stmt *st, int col)
{
    const char *t = (const char *)sqlite3_column_text(st, col);
    size_t n = (size_t)sqlite3_column_bytes(st, col);
    if (!t || memchr(t, '\0', n))
        return NULL;
    char *c = sl_arena_strndup(r->arena, t, n);
    if (!c)
        r->oom = true;
    return c ? c : "";
}

/* Refuses the load: `column` holds JSON that is not the list the schema describes. */
static bool
malformed(Rd *r, const char *column)
{
    r->bad = column;
    return true;
}

typedef struct OperandRow {
    uint32_t instr, pos; /* the user's index into run->instrs, and the operand's position */
    int64_t id;          /* the operand's instr.id; -1: null */
} OperandRow;

/* instr.operands: [7,8], a list of instr ids or null. Runs after every instr is read. */
static bool
row_operand(Rd *r, sqlite3_stmt *st)
{
    uint32_t user = col_instr(r, st, 0);
    int64_t pos = col_pos(st, 1);
    JsonKind kind = col_kind(st, 2);
    int64_t id = kind == JK_INTEGER ? sqlite3_column_int64(st, 3) : -1;
    if (user == TRACE_NONE || pos < 0 || !(kind == JK_NULL || (kind == JK_INTEGER && id >= 0)))
        return malformed(r, "instr.operands");
    OperandRow o = {user, (uint32_t)pos, id};
    return SL_VEC_PUSH(&r->elems, OperandRow, o);
}

/* Gives every instr its operands. An operand outside the run (or null) is TRACE_NONE;
 * trailing ones are dropped. */
static void
attach_operands(Rd *r)
{
    TraceRun *run = r->run;
    const OperandRow *o = r->elems.data;
    for (size_t k = 0; k < r->elems.len; k++) {
        TraceRunInstr *u = &run->instrs[o[k].instr];
        if (u->n_operands <= o[k].pos)
            u->n_operands = o[k].pos + 1;
    }
    size_t total = 0;
    for (uint32_t k = 0; k < run->n_instrs; k++)
        total += run->instrs[k].n_operands;
    uint32_t *all = total ? SL_NEW_ARRAY(r->arena, uint32_t, total) : NULL;
    if (total && !all) {
        r->oom = true;
        return;
    }
    for (size_t k = 0; k < total; k++)
        all[k] = TRACE_NONE;
    size_t off = 0;
    for (uint32_t k = 0; k < run->n_instrs; k++) { /* each instr's slice, still full length */
        run->instrs[k].operands = all + off;
        off += run->instrs[k].n_operands;
    }
    for (size_t k = 0; k < r->elems.len; k++)
        if (o[k].id >= 0)
            run->instrs[o[k].instr].operands[o[k].pos] = instr_index(r, o[k].id);
    for (uint32_t k = 0; k < run->n_instrs; k++) {
        TraceRunInstr *u = &run->instrs[k];
        while (u->n_operands > 0 && u->operands[u->n_operands - 1] == TRACE_NONE)
            u->n_operands--;
        if (!u->n_operands)
            u->operands = NULL;
    }
    sl_vec_fini(&r->elems); /* the next list has elements of another size */
}

/* The index of the decision whose list the row of `st` is from (column 0, decision.id), or
 * TRACE_NONE. A decision's elements come together, so the last answer is kept. */
static uint32_t
row_decision_idx(Rd *r, sqlite3_stmt *st)
{
    int64_t id = sqlite3_column_int64(st, 0);
    if (!r->has_last_decision || id != r->last_decision_id) {
        r->has_last_decision = true;
        r->last_decision_id = id;
        r->last_decision = col_idx(&r->decision_idx, st, 0);
    }
    return r->last_decision;
}

typedef struct AltRow {
    uint32_t decision, pos;
    const char *strategy;
} AltRow;

/* decision.alternatives: ["batch","windowed_einsum"], a list of strings. */
static bool
row_alternative(Rd *r, sqlite3_stmt *st)
{
    uint32_t d = row_decision_idx(r, st);
    int64_t pos = col_pos(st, 1);
    const char *s = col_kind(st, 2) == JK_TEXT ? col_json_text(r, st, 3) : NULL;
    if (d == TRACE_NONE || pos < 0 || !s)
        return malformed(r, "decision.alternatives");
    AltRow a = {d, (uint32_t)pos, s};
    TraceRunDecision *dec = &r->run->decisions[d];
    if (dec->n_alternatives <= a.pos)
        dec->n_alternatives = a.pos + 1;
    return SL_VEC_PUSH(&r->elems, AltRow, a);
}

static void
attach_alternatives(Rd *r)
{
    TraceRun *run = r->run;
    size_t total = 0;
    for (uint32_t k = 0; k < run->n_decisions; k++)
        total += run->decisions[k].n_alternatives;
    const char **all = total ? SL_NEW_ARRAY(r->arena, const char *, total) : NULL;
    if (total && !all) {
        r->oom = true;
        return;
    }
    if (total)
        memset(all, 0, total * sizeof(*all));
    size_t off = 0;
    for (uint32_t k = 0; k < run->n_decisions; k++) {
        TraceRunDecision *d = &run->decisions[k];
        d->alternatives = d->n_alternatives ? all + off : NULL;
        off += d->n_alternatives;
    }
    const AltRow *a = r->elems.data;
    for (size_t k = 0; k < r->elems.len; k++)
        run->decisions[a[k].decision].alternatives[a[k].pos] = a[k].strategy;
    for (size_t k = 0; k < total; k++) /* every index came once: a list has no holes */
        if (!all[k])
            r->bad = "decision.alternatives";
    sl_vec_fini(&r->elems); /* the next list has elements of another size */
}

/* decision.numbers: {"lhs_bytes":4096,"output_sharding":"{replicated}"}, an object whose
 * members are numbers, strings or null, in order (json_each walks it in text order). */
static bool
row_number(Rd *r, sqlite3_stmt *st)
{
    uint32_t d = row_decision_idx(r, st);
    JsonKind kind = col_kind(st, 2);
    NumberRow n = {.decision = d};
    if (d == TRACE_NONE || sqlite3_column_type(st, 1) != SQLITE_TEXT) /* not an object */
        return malformed(r, "decision.numbers");
    if (!(n.n.key = col_json_text(r, st, 1)))
        return malformed(r, "decision.numbers");
    if (kind == JK_INTEGER || kind == JK_REAL) /* 9e999 and -9e999 come back as infinities */
        n.n.num = sqlite3_column_double(st, 3);
    else if (kind == JK_TEXT)
        n.n.str = col_json_text(r, st, 3);
    if (kind == JK_TEXT ? !n.n.str : kind != JK_INTEGER && kind != JK_REAL && kind != JK_NULL)
        return malformed(r, "decision.numbers");
    n.pos = r->run->decisions[d].n_numbers++;
    return SL_VEC_PUSH(&r->elems, NumberRow, n);
}

static void
attach_numbers(Rd *r)
{
    TraceRun *run = r->run;
    size_t total = 0;
    for (uint32_t k = 0; k < run->n_decisions; k++)
        total += run->decisions[k].n_numbers;
    TraceRunNumber *all = total ? SL_NEW_ARRAY(r->arena, TraceRunNumber, total) : NULL;
    if (total && !all) {
        r->oom = true;
        return;
    }
    if (total)
        memset(all, 0, total * sizeof(*all));
    size_t off = 0;
    for (uint32_t k = 0; k < run->n_decisions; k++) {
        TraceRunDecision *d = &run->decisions[k];
        d->numbers = d->n_numbers ? all + off : NULL;
        off += d->n_numbers;
    }
    const NumberRow *n = r->elems.data;
    for (size_t k = 0; k < r->elems.len; k++)
        run->decisions[n[k].decision].numbers[n[k].pos] = n[k].n;
    sl_vec_fini(&r->elems); /* the next list has elements of another size */
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
    x.requester = col_instr(r, st, 2);
    x.value = col_instr(r, st, 3);
    x.value_name = col_req(r, st, 4, "reshard.value_name");
    x.from = col_req(r, st, 5, "reshard.from_sharding");
    x.to = col_req(r, st, 6, "reshard.to_sharding");
    x.method = col_req(r, st, 7, "reshard.method");
    x.result = col_instr(r, st, 8);
    x.result_name = col_text(r, st, 9);
    put(r, &r->reshard_idx, sqlite3_column_int64(st, 0), r->rows.len);
    return PUSH(r, TraceRunReshard, x);
}

static int64_t
col_count(sqlite3_stmt *st, int col)
{
    return sqlite3_column_type(st, col) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, col);
}

static bool
row_while(Rd *r, sqlite3_stmt *st)
{
    TraceRunWhile w = {0};
    w.instr = col_instr(r, st, 1);
    w.source = col_instr(r, st, 2);
    w.trip_count = col_count(st, 3);
    w.method = col_req(r, st, 4, "while_loop.method");
    w.reason = col_text(r, st, 5);
    w.induction_index = col_count(st, 6);
    w.executions = col_count(st, 7);
    w.outer = col_idx(&r->while_idx, st, 8);
    put(r, &r->while_idx, sqlite3_column_int64(st, 0), r->rows.len);
    return PUSH(r, TraceRunWhile, w);
}

static bool
row_collective(Rd *r, sqlite3_stmt *st)
{
    TraceRunCollective c = {0};
    c.instr = col_instr(r, st, 1);
    c.kind = col_req(r, st, 2, "collective.kind");
    c.has_channel_id = sqlite3_column_type(st, 3) != SQLITE_NULL;
    c.channel_id = sqlite3_column_int64(st, 3);
    c.group_size = sqlite3_column_int64(st, 4);
    c.n_groups = sqlite3_column_int64(st, 5);
    c.shape = col_req(r, st, 6, "collective.shape");
    c.bytes = sqlite3_column_double(st, 7);
    c.trip_count = sqlite3_column_type(st, 8) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 8);
    c.source = col_instr(r, st, 9);
    c.cause = col_text(r, st, 10);
    c.reshard = col_idx(&r->reshard_idx, st, 11);
    c.decision = col_idx(&r->decision_idx, st, 12);
    c.send_bytes = sqlite3_column_double(st, 13);
    c.max_device_send_bytes = sqlite3_column_double(st, 14);
    c.max_trip_count =
        sqlite3_column_type(st, 15) == SQLITE_NULL ? -1 : sqlite3_column_int64(st, 15);
    c.loop = col_idx(&r->while_idx, st, 16);
    if (!in_range(r, "collective.group_size", c.group_size, 0, r->run->num_partitions) ||
        !in_range(r, "collective.n_groups", c.n_groups, 0, r->run->num_partitions))
        return true;
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
    if (!in_range(r, "collective_group.device", g.device, 0, r->run->num_partitions - 1))
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
    TraceRunLoop l = {col_instr(r, st, 0),         col_instr(r, st, 1),
                      col_req(r, st, 2, "windowed_loop.loop_name"),
                      col_req(r, st, 3, "windowed_loop.variant"),
                      sqlite3_column_int64(st, 4), sqlite3_column_int64(st, 5)};
    return PUSH(r, TraceRunLoop, l);
}

static bool
row_warning(Rd *r, sqlite3_stmt *st)
{
    TraceRunWarning w = {col_instr(r, st, 0), col_req(r, st, 1, "warning.kind"),
                         col_req(r, st, 2, "warning.message")};
    return PUSH(r, TraceRunWarning, w);
}

static bool
row_origin(Rd *r, sqlite3_stmt *st)
{
    TraceRunOrigin o = {0};
    o.instr = col_instr(r, st, 0);
    o.sharding = col_req(r, st, 1, "sharding_origin.sharding");
    o.source = col_instr(r, st, 2);
    o.direction = col_req(r, st, 4, "sharding_origin.direction");
    o.level = sqlite3_column_type(st, 5) == SQLITE_NULL ? -1 : (int)sqlite3_column_int(st, 5);
    o.rule = col_text(r, st, 6);
    o.candidate = col_text(r, st, 7);
    o.replaced = col_text(r, st, 8);
    /* column 3: the path's instr ids, comma-separated (group_concat over the JSON array) */
    const unsigned char *p = sqlite3_column_text(st, 3);
    uint32_t n = 0;
    for (const unsigned char *q = p; q && *q; q++)
        n += *q == ',';
    if (p && *p) {
        o.path = SL_NEW_ARRAY(r->arena, uint32_t, n + 1);
        if (!o.path)
            return false;
        const char *q = (const char *)p;
        while (*q) {
            char *end;
            long long id = strtoll(q, &end, 10);
            if (end == q)
                break;
            o.path[o.n_path++] = instr_index(r, id);
            q = *end == ',' ? end + 1 : end;
        }
    }
    return PUSH(r, TraceRunOrigin, o);
}

static bool
row_device(Rd *r, sqlite3_stmt *st)
{
    TraceRunDevice d = {sqlite3_column_int64(st, 0), sqlite3_column_double(st, 1),
                        sqlite3_column_double(st, 2), (uint32_t)sqlite3_column_int64(st, 3),
                        (uint32_t)sqlite3_column_int64(st, 4)};
    if (!in_range(r, "device_traffic.device", d.device, 0, r->run->num_partitions - 1))
        return true;
    return PUSH(r, TraceRunDevice, d);
}

static bool
row_memory(Rd *r, sqlite3_stmt *st)
{
    TraceRunMemory m = {0};
    m.phase = strcmp((const char *)sqlite3_column_text(st, 1), "after") == 0 ? TRACE_AFTER
                                                                              : TRACE_BEFORE;
    m.parameter_bytes = sqlite3_column_int64(st, 2);
    m.output_bytes = sqlite3_column_int64(st, 3);
    m.alias_bytes = sqlite3_column_int64(st, 4);
    m.peak_bytes = sqlite3_column_int64(st, 5);
    m.peak_temp_bytes = sqlite3_column_int64(st, 6);
    m.max_temp_bytes = sqlite3_column_int64(st, 7);
    m.peak_instr = col_instr(r, st, 8);
    m.peak_position = sqlite3_column_int64(st, 9);
    m.profile_step = sqlite3_column_int64(st, 10);
    put(r, &r->memory_idx, sqlite3_column_int64(st, 0), r->rows.len);
    return PUSH(r, TraceRunMemory, m);
}

/* A memory row's list element (a device or profile point, or a buffer at the peak), until
 * attached. */
typedef struct MemElem {
    uint32_t memory;
    int64_t device; /* or the profile point */
    TraceRunMemBuffer buf;
} MemElem;

static bool
row_memory_elem(Rd *r, sqlite3_stmt *st)
{
    MemElem e = {col_idx(&r->memory_idx, st, 0), 0, {TRACE_NONE, 0, 0, NULL}};
    if (sqlite3_column_type(st, 2) == SQLITE_NULL) {
        e.device = sqlite3_column_int64(st, 1);
    } else {
        e.buf.instr = col_instr(r, st, 1);
        e.buf.leaf = (uint32_t)sqlite3_column_int64(st, 2);
        e.buf.bytes = sqlite3_column_int64(st, 3);
        e.buf.kind = col_req(r, st, 4, "memory_buffer.kind");
    }
    return e.memory != TRACE_NONE ? SL_VEC_PUSH(&r->elems, MemElem, e) : true;
}

enum { MEM_DEVICES, MEM_BUFFERS, MEM_PROFILE };

/* Gives each memory row its devices, buffers or profile, in query order. */
static void
attach_memory(Rd *r, int what)
{
    bool is_buf = what == MEM_BUFFERS;
    TraceRun *run = r->run;
    const MemElem *e = r->elems.data;
    for (uint32_t m = 0; m < run->n_memory && !r->oom; m++) {
        uint32_t n = 0;
        for (size_t k = 0; k < r->elems.len; k++)
            n += e[k].memory == m;
        if (!n)
            continue;
        TraceRunMemory *mem = &run->memory[m];
        int64_t *ints = NULL;
        if (is_buf)
            mem->top = SL_NEW_ARRAY(r->arena, TraceRunMemBuffer, n);
        else
            ints = SL_NEW_ARRAY(r->arena, int64_t, n);
        if (is_buf ? !mem->top : !ints) {
            r->oom = true;
            break;
        }
        if (what == MEM_DEVICES)
            mem->devices = ints;
        else if (what == MEM_PROFILE)
            mem->profile = ints;
        for (size_t k = 0; k < r->elems.len; k++) {
            if (e[k].memory != m)
                continue;
            if (is_buf)
                mem->top[mem->n_top++] = e[k].buf;
            else if (what == MEM_DEVICES)
                mem->devices[mem->n_devices++] = e[k].device;
            else
                mem->profile[mem->n_profile++] = e[k].device;
        }
    }
    sl_vec_fini(&r->elems);
}

static void
load_memory(Rd *r)
{
    TraceRun *run = r->run;
    query(r,
          "SELECT id, phase, parameter_bytes, output_bytes, alias_bytes, peak_bytes,"
          " peak_temp_bytes, max_temp_bytes, peak_instr, peak_position, profile_step FROM memory"
          " WHERE run_id = ?1 ORDER BY phase = 'after', id",
          row_memory);
    run->memory = TAKE(r, TraceRunMemory, &run->n_memory);
    query_what(r, "reading memory.devices",
               "SELECT m.id, d.value, NULL FROM memory m, json_each(m.devices) d"
               " WHERE m.run_id = ?1 ORDER BY m.id, d.key",
               row_memory_elem);
    attach_memory(r, MEM_DEVICES);
    query_what(r, "reading memory.profile",
               "SELECT m.id, p.value, NULL FROM memory m, json_each(m.profile) p"
               " WHERE m.run_id = ?1 ORDER BY m.id, p.key",
               row_memory_elem);
    attach_memory(r, MEM_PROFILE);
    query(r,
          "SELECT b.memory_id, b.instr, b.leaf, b.bytes, b.kind FROM memory_buffer b"
          " JOIN memory m ON m.id = b.memory_id WHERE m.run_id = ?1 ORDER BY b.memory_id, b.rank",
          row_memory_elem);
    attach_memory(r, MEM_BUFFERS);
}

static bool
row_run(Rd *r, sqlite3_stmt *st)
{
    TraceRun *run = r->run;
    run->id = sqlite3_column_int64(st, 0);
    run->module = col_req(r, st, 1, "run.module");
    run->input_hash = col_req(r, st, 2, "run.input_hash");
    run->num_partitions = sqlite3_column_int64(st, 3);
    in_range(r, "run.num_partitions", run->num_partitions, 1, SL_MAX_DEVICES);
    run->tool_version = col_req(r, st, 4, "run.tool_version");
    run->created_at = col_req(r, st, 5, "run.created_at");
    run->duration_ms =
        sqlite3_column_type(st, 6) == SQLITE_NULL ? -1.0 : sqlite3_column_double(st, 6);
    r->first_instr = sqlite3_column_int64(st, 7); /* NULL (no instrs) reads as 0 */
    r->last_instr = sqlite3_column_int64(st, 8);
    return true;
}

enum { MAX_DIRECT_INSTRS = 1 << 26 };

static void
load_tables(Rd *r)
{
    TraceRun *run = r->run;
    query(r, "SELECT key, value FROM run_option WHERE run_id = ?1 ORDER BY key", row_option);
    run->options = TAKE(r, TraceRunOption, &run->n_options);
    /* instr and called_computation by key range: the run's rows are first_instr..last_instr
     * (+run_id: only a filter). There are at most as many instrs as ids in the range, so they
     * go straight into their array, unless a damaged run row names an absurd range. */
    int64_t range = r->last_instr - r->first_instr + 1;
    if (r->first_instr > 0 && range > 0 && range <= MAX_DIRECT_INSTRS) {
        run->instrs = SL_NEW_ARRAY(r->arena, TraceRunInstr, (size_t)range);
        r->instr_cap = run->instrs ? (uint32_t)range : 0;
        r->oom = r->oom || !run->instrs;
    }
    query(r,
          "SELECT id, phase, ir_id, computation, is_root, name, opcode, shape, sharding,"
          " size_bytes, op_name, source_file, source_line, derived_from, param_number"
          " FROM instr WHERE id BETWEEN ?2 AND ?3 AND +run_id = ?1 ORDER BY id",
          row_instr);
    if (!r->instr_cap)
        run->instrs = TAKE(r, TraceRunInstr, &run->n_instrs);
    while (run->n_before < run->n_instrs && run->instrs[run->n_before].phase == TRACE_BEFORE)
        run->n_before++;
    if (r->parts & TRACE_LOAD_OPERANDS) {
        query_what(r, "reading instr.operands",
                   "SELECT i.id, o.key, o.type, o.atom FROM instr i, json_each(i.operands) o"
                   " WHERE i.id BETWEEN ?2 AND ?3 AND +i.run_id = ?1",
                   row_operand);
        if (r->rc == SQLITE_OK && !r->oom && !r->bad)
            attach_operands(r);
    }
    query(r,
          "SELECT instr, role, computation FROM called_computation"
          " WHERE instr BETWEEN ?2 AND ?3 AND +run_id = ?1 ORDER BY instr, idx",
          row_call);
    run->calls = TAKE(r, TraceRunCall, &run->n_calls);
    query(r,
          "SELECT id, seq, instr, handler, strategy, reason FROM decision"
          " WHERE run_id = ?1 ORDER BY id",
          row_decision);
    run->decisions = TAKE(r, TraceRunDecision, &run->n_decisions);
    if (r->parts & TRACE_LOAD_DECISION_DETAILS) {
        query_what(r, "reading decision.alternatives",
                   "SELECT d.id, a.key, a.type, a.atom FROM decision d,"
                   " json_each(d.alternatives) a WHERE d.run_id = ?1",
                   row_alternative);
        if (r->rc == SQLITE_OK && !r->oom && !r->bad)
            attach_alternatives(r);
        query_what(r, "reading decision.numbers",
                   "SELECT d.id, n.key, n.type, n.atom FROM decision d, json_each(d.numbers) n"
                   " WHERE d.run_id = ?1",
                   row_number);
        if (r->rc == SQLITE_OK && !r->oom && !r->bad)
            attach_numbers(r);
    }
    if (r->rc == SQLITE_OK && !r->oom && !r->bad && !chain_decisions(run))
        r->oom = true;
    query(r,
          "SELECT id, seq, requester, value, value_name, from_sharding, to_sharding, method,"
          " result, result_name FROM reshard WHERE run_id = ?1 ORDER BY id",
          row_reshard);
    run->reshards = TAKE(r, TraceRunReshard, &run->n_reshards);
    query(r,
          "SELECT id, instr, source, trip_count, method, reason, induction_index, executions,"
          " outer_loop FROM while_loop WHERE run_id = ?1 ORDER BY id",
          row_while);
    run->whiles = TAKE(r, TraceRunWhile, &run->n_whiles);
    query(r,
          "SELECT c.id, c.instr, c.kind, c.channel_id, c.group_size, c.n_groups, c.shape,"
          " c.bytes, c.trip_count, c.source, c.cause, c.reshard_id, c.decision_id,"
          " t.send_bytes, t.max_device_send_bytes, c.max_trip_count, c.loop"
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
    query(r, "SELECT instr, kind, message FROM warning WHERE run_id = ?1 ORDER BY id", row_warning);
    run->warnings = TAKE(r, TraceRunWarning, &run->n_warnings);
    query(r,
          "SELECT o.instr, o.sharding, o.source,"
          " (SELECT group_concat(p.value) FROM json_each(o.path) p WHERE p.type = 'integer'),"
          " o.direction, o.level, o.rule, o.candidate, o.replaced"
          " FROM sharding_origin o WHERE o.run_id = ?1 ORDER BY o.id",
          row_origin);
    run->origins = TAKE(r, TraceRunOrigin, &run->n_origins);
    query(r,
          "SELECT device, send_bytes_known_trips, recv_bytes_known_trips, collectives,"
          " unknown_trip_collectives FROM device_traffic WHERE run_id = ?1 ORDER BY device",
          row_device);
    run->devices = TAKE(r, TraceRunDevice, &run->n_devices);
    load_memory(r);
}

SlStatus
trace_run_load(TraceDb *db, int64_t run_id, SlArena *arena, const TraceRun **out, SlError *err)
{
    return trace_run_load_parts(db, run_id, TRACE_LOAD_ALL, arena, out, err);
}

SlStatus
trace_run_load_parts(TraceDb *db, int64_t run_id, unsigned parts, SlArena *arena,
                     const TraceRun **out, SlError *err)
{
    SlSrcLoc loc = trace_db_loc(db);
    *out = NULL;
    Rd r = {.db = db, .arena = arena, .run = SL_NEW(arena, TraceRun), .parts = parts};
    if (!r.run)
        return sl_fail(err, SL_ERR_NOMEM, loc, "out of memory");
    sl_map_init(&r.decision_idx);
    sl_map_init(&r.reshard_idx);
    sl_map_init(&r.collective_idx);
    sl_map_init(&r.while_idx);
    sl_map_init(&r.memory_idx);
    r.run->id = run_id;
    r.rc = trace_db_exec(db, "BEGIN");
    r.what = "starting a read transaction";
    query(&r,
          run_id ? "SELECT id, module, input_hash, num_partitions, tool_version, created_at,"
                   " duration_ms, first_instr, last_instr FROM run WHERE id = ?1"
                 : "SELECT id, module, input_hash, num_partitions, tool_version, created_at,"
                   " duration_ms, first_instr, last_instr FROM run ORDER BY id DESC LIMIT 1",
          row_run);
    bool found = r.run->module != NULL;
    if (found)
        load_tables(&r);
    /* The connection's message is SQLite's reason (e.g. "malformed JSON") until the next
     * statement: take it before the rollback. */
    SlStatus failed = r.rc != SQLITE_OK ? trace_db_fail(db, r.rc, r.what, err) : SL_OK;
    trace_db_rollback(db); /* read-only: ending the transaction cannot lose anything */
    sl_vec_fini(&r.rows);
    sl_vec_fini(&r.instr_ids);
    sl_vec_fini(&r.elems);
    sl_map_fini(&r.decision_idx);
    sl_map_fini(&r.reshard_idx);
    sl_map_fini(&r.collective_idx);
    sl_map_fini(&r.while_idx);
    sl_map_fini(&r.memory_idx);
    if (failed != SL_OK)
        return failed;
    if (r.bad && !r.bad[0])
        return sl_fail(err, SL_ERR_DB, loc, "run %lld: %s", (long long)r.run->id, r.range);
    if (r.bad)
        return sl_fail(err, SL_ERR_DB, loc, "malformed JSON in %s of run %lld", r.bad,
                       (long long)r.run->id);
    if (r.oom || sl_arena_failed(arena))
        return sl_fail(err, SL_ERR_NOMEM, loc, "out of memory");
    if (!found) {
        if (run_id)
            return sl_fail(err, SL_ERR_INVALID, loc, "no run %lld in the trace database",
                           (long long)run_id);
        return sl_fail(err, SL_ERR_INVALID, loc, "the trace database holds no runs");
    }
    r.run->index = trace_run_index_build(r.run, arena);
    if (!r.run->index)
        return sl_fail(err, SL_ERR_NOMEM, loc, "out of memory");
    *out = r.run;
    return SL_OK;
}

/* ---- the index by instruction (trace_run.h) ---- */

/* Up to two keys of row k: the 'before' instructions it is about (TRACE_NONE: none). */
typedef void (*RowKeys)(const TraceRun *run, uint32_t k, uint32_t keys[2]);

static void
keys_decision(const TraceRun *run, uint32_t k, uint32_t keys[2])
{
    keys[0] = run->decisions[k].instr;
}

static void
keys_reshard(const TraceRun *run, uint32_t k, uint32_t keys[2])
{
    keys[0] = run->reshards[k].requester;
}

static void
keys_collective(const TraceRun *run, uint32_t k, uint32_t keys[2])
{
    const TraceRunCollective *c = &run->collectives[k];
    keys[0] = c->source;
    if (c->reshard < run->n_reshards && run->reshards[c->reshard].requester != c->source)
        keys[1] = run->reshards[c->reshard].requester;
}

static void
keys_loop(const TraceRun *run, uint32_t k, uint32_t keys[2])
{
    keys[0] = run->loops[k].dot;
}

static void
keys_origin(const TraceRun *run, uint32_t k, uint32_t keys[2])
{
    keys[0] = run->origins[k].instr;
}

static void
keys_warning(const TraceRun *run, uint32_t k, uint32_t keys[2])
{
    keys[0] = run->warnings[k].instr;
}

/* Counting sort of the rows by key: two passes, rows of one key in recording order. */
static bool
index_rows(const TraceRun *run, uint32_t n_rows, RowKeys keys_of, SlArena *a, TraceRunRows *out)
{
    uint32_t n = run->n_before, total = 0;
    out->off = SL_NEW_ARRAY(a, uint32_t, (size_t)n + 1);
    if (!out->off)
        return false;
    for (uint32_t k = 0; k < n_rows; k++) {
        uint32_t keys[2] = {TRACE_NONE, TRACE_NONE};
        keys_of(run, k, keys);
        for (int j = 0; j < 2; j++)
            if (keys[j] < n) {
                out->off[keys[j] + 1]++;
                total++;
            }
    }
    for (uint32_t i = 0; i < n; i++)
        out->off[i + 1] += out->off[i];
    out->row = SL_NEW_ARRAY(a, uint32_t, (size_t)total + 1);
    uint32_t *fill = n ? calloc(n, sizeof(uint32_t)) : NULL;
    if (!out->row || (n && !fill)) {
        free(fill);
        return false;
    }
    for (uint32_t k = 0; k < n_rows; k++) {
        uint32_t keys[2] = {TRACE_NONE, TRACE_NONE};
        keys_of(run, k, keys);
        for (int j = 0; j < 2; j++)
            if (keys[j] < n)
                out->row[out->off[keys[j]] + fill[keys[j]]++] = k;
    }
    free(fill);
    return true;
}

const TraceRunIndex *
trace_run_index_build(const TraceRun *run, SlArena *arena)
{
    TraceRunIndex *x = SL_NEW(arena, TraceRunIndex);
    if (!x)
        return NULL;
    bool ok = index_rows(run, run->n_decisions, keys_decision, arena, &x->decisions) &&
              index_rows(run, run->n_reshards, keys_reshard, arena, &x->reshards) &&
              index_rows(run, run->n_collectives, keys_collective, arena, &x->collectives) &&
              index_rows(run, run->n_loops, keys_loop, arena, &x->loops) &&
              index_rows(run, run->n_origins, keys_origin, arena, &x->origins) &&
              index_rows(run, run->n_warnings, keys_warning, arena, &x->warnings);
    return ok ? x : NULL;
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
