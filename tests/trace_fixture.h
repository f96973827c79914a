/* trace_fixture.h - shared by the tests that keep a trace database on disk (trace, reports,
 * viz): a fresh temporary directory, modules parsed into one arena, and runs partitioned into
 * the database and loaded back. Failures go through cmocka's fail_msg, so include <cmocka.h>
 * first. */
#ifndef SHARDLENS_TESTS_TRACE_FIXTURE_H
#define SHARDLENS_TESTS_TRACE_FIXTURE_H

#include <stdint.h>

#include "hlo/hlo.h"
#include "trace/trace_db.h"
#include "trace/trace_run.h"

typedef struct TraceFx {
    char dir[64];     /* a fresh directory; tfx_teardown() removes it and every file in it */
    char path[96];    /* dir/t.db */
    SlArena arena;    /* parsed modules, loaded runs, reports */
    SlInterner names; /* lives in `arena` */
} TraceFx;

int tfx_setup(void **state); /* cmocka setup and teardown: *state is a TraceFx */
int tfx_teardown(void **state);
/* Parses `text` into fx->arena; fails the test on a parse error. */
IrModule *tfx_parse(TraceFx *fx, const char *text);
/* Partitions `hlo` over n devices (plus the KEY=VALUE options, separated by spaces, in `set`
 * when it is not NULL) and
 * records it as a run in fx->path; returns the first failure, else SL_OK and the run's id in
 * *run_id (may be NULL). */
SlStatus tfx_record(TraceFx *fx, const char *hlo, int64_t n, const char *set, int64_t *run_id,
                    SlError *err);
/* Loads run `run_id` (0: the latest) into fx->arena; fails the test on error. */
const TraceRun *tfx_load(TraceFx *fx, int64_t run_id);
/* tfx_record() then tfx_load(); fails the test on error. */
const TraceRun *tfx_traced(TraceFx *fx, const char *hlo, int64_t n, const char *set);

#endif
