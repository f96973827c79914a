/* spmd_fixture.h - shared by the partitioner's end-to-end tests: parse a hand-written module,
 * partition it with a memory trace sink, and assert fragments of the printed result and of the
 * trace log. Failures go through cmocka's fail_msg, so include <cmocka.h> first. */
#ifndef SHARDLENS_TESTS_SPMD_FIXTURE_H
#define SHARDLENS_TESTS_SPMD_FIXTURE_H

#include <stddef.h>
#include <stdint.h>

#include "hlo/hlo.h"
#include "spmd/spmd.h"
#include "trace/trace.h"

typedef struct SpmdRun {
    SlArena in, out;
    SlInterner names;
    IrModule *src, *dst;
    SlBuf text;         /* the partitioned module, NUL-terminated */
    TraceMemSink trace; /* trace.log: one line per event, NUL-terminated */
    SlError err;
} SpmdRun;

/* Partitions `hlo` over n devices with the windowed threshold and extra KEY=VALUE options;
 * fails the test when parsing or partitioning fails. Release with fx_done(). */
void fx_run_with(SpmdRun *r, const char *hlo, int64_t n, int64_t threshold_mib,
                 const char *const *sets, size_t n_sets);
void fx_run(SpmdRun *r, const char *hlo, int64_t n, int64_t threshold_mib);
void fx_done(SpmdRun *r);
size_t fx_count(const char *hay, const char *needle);       /* occurrences of needle */
void fx_want(const SpmdRun *r, const char *fragment);       /* in the printed module */
void fx_want_none(const SpmdRun *r, const char *fragment);  /* not in the printed module */
void fx_want_trace(const SpmdRun *r, const char *fragment); /* in the trace log */
void fx_want_no_collectives(const SpmdRun *r);

#endif
