/* trace_fixture.c - see trace_fixture.h. */
#include "trace_fixture.h"

#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "spmd/spmd.h"

int
tfx_setup(void **state)
{
    TraceFx *fx = calloc(1, sizeof(*fx));
    if (!fx)
        return -1;
    snprintf(fx->dir, sizeof(fx->dir), "/tmp/sl_test_XXXXXX");
    if (!mkdtemp(fx->dir)) {
        free(fx);
        return -1;
    }
    snprintf(fx->path, sizeof(fx->path), "%s/t.db", fx->dir);
    sl_arena_init(&fx->arena);
    sl_interner_init(&fx->names, &fx->arena);
    *state = fx;
    return 0;
}

int
tfx_teardown(void **state)
{
    TraceFx *fx = *state;
    DIR *d = opendir(fx->dir);
    for (struct dirent *e = d ? readdir(d) : NULL; e; e = readdir(d)) {
        char p[sizeof(fx->dir) + sizeof(e->d_name) + 1];
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            snprintf(p, sizeof(p), "%s/%s", fx->dir, e->d_name);
            (void)unlink(p);
        }
    }
    if (d)
        closedir(d);
    (void)rmdir(fx->dir);
    sl_interner_fini(&fx->names);
    sl_arena_fini(&fx->arena);
    free(fx);
    return 0;
}

IrModule *
tfx_parse(TraceFx *fx, const char *text)
{
    IrModule *m = NULL;
    SlError err = {0};
    SlStatus st = hlo_parse(&fx->arena, &fx->names, sl_str(text), "test.hlo", &m, &err);
    if (st != SL_OK)
        fail_msg("parse: %s: %u:%u: %s", sl_status_name(st), err.loc.line, err.loc.col, err.msg);
    return m;
}

SlStatus
tfx_record(TraceFx *fx, const char *hlo, int64_t n, const char *set, int64_t *run_id, SlError *err)
{
    SlArena in_arena, out_arena; /* the modules die here; only the database keeps the run */
    SlInterner names;
    IrModule *in = NULL, *out = NULL;
    TraceDb *db = NULL;
    TraceSink *sink = NULL;
    sl_arena_init(&in_arena);
    sl_arena_init(&out_arena);
    sl_interner_init(&names, &in_arena);
    SpmdOptions o;
    spmd_options_init(&o);
    o.num_partitions = n;
    TraceRunInfo info = {"test", "2000-01-01T00:00:00Z", sl_str(hlo), sl_str(""), n, NULL, 0};
    SlStatus st = SL_OK;
    for (const char *p = set; p && *p && !st;) { /* KEY=VALUE options separated by spaces */
        size_t len = strcspn(p, " ");
        st = spmd_options_set(&o, (SlStr){p, len}, err);
        p += len + (p[len] == ' ');
    }
    if (!st)
        st = hlo_parse(&in_arena, &names, sl_str(hlo), "test.hlo", &in, err);
    if (!st)
        st = trace_db_open(fx->path, TRACE_DB_APPEND, &db, err);
    if (!st)
        st = trace_db_begin_run(db, in, &info, &sink, err);
    if (!st)
        st = spmd_partition(in, &o, sink, &out_arena, &out, err);
    if (!st)
        st = trace_db_end_run(db, out, -1, run_id, err);
    else if (sink)
        trace_db_abort_run(db);
    trace_db_close(db);
    if (out)
        ir_module_fini(out);
    if (in)
        ir_module_fini(in);
    sl_interner_fini(&names);
    sl_arena_fini(&out_arena);
    sl_arena_fini(&in_arena);
    return st;
}

const TraceRun *
tfx_load(TraceFx *fx, int64_t run_id)
{
    TraceDb *db = NULL;
    const TraceRun *run = NULL;
    SlError err = {0};
    if (trace_db_open(fx->path, TRACE_DB_READ, &db, &err) ||
        trace_run_load(db, run_id, &fx->arena, &run, &err))
        fail_msg("load run %lld: %s", (long long)run_id, err.msg);
    trace_db_close(db);
    return run;
}

const TraceRun *
tfx_traced(TraceFx *fx, const char *hlo, int64_t n, const char *set)
{
    SlError err = {0};
    int64_t run_id = 0;
    if (tfx_record(fx, hlo, n, set, &run_id, &err))
        fail_msg("record: %s: %u:%u: %s", sl_status_name(err.status), err.loc.line, err.loc.col,
                 err.msg);
    return tfx_load(fx, run_id);
}
