/* memory_estimate.c - the memory estimate (src/memory) alone on one module, against a traced
 * partition of the same input: parses IN.hlo, partitions it with the partitioner's defaults and
 * times mem_estimate() on the input and on the output (CPU time, the median of RUNS), so its
 * share of a traced run can be read without the noise of two whole-process runs.
 * usage: bench_memory_estimate IN.hlo [RUNS]   (build: meson compile -C B bench_memory_estimate) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "hlo/hlo.h"
#include "memory/memory.h"
#include "spmd/spmd.h"
#include "trace/trace.h"

static double
cpu_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int
cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double
median_estimate(const IrModule *m, int runs, MemEstimate *e)
{
    double *t = calloc((size_t)runs, sizeof(double));
    for (int k = 0; t && k < runs; k++) {
        SlError err = {0};
        double t0 = cpu_s();
        if (mem_estimate(m, e, NULL, &err) != SL_OK) {
            fprintf(stderr, "mem_estimate: %s\n", err.msg);
            exit(1);
        }
        t[k] = cpu_s() - t0;
    }
    if (!t)
        return -1;
    qsort(t, (size_t)runs, sizeof(double), cmp_d);
    double med = t[runs / 2];
    free(t);
    return med;
}

int
main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s IN.hlo [RUNS]\n", argv[0]);
        return 2;
    }
    int runs = argc > 2 ? atoi(argv[2]) : 5;
    runs = runs > 0 ? runs : 5;
    SlArena arena, out_arena;
    SlInterner names;
    sl_arena_init(&arena);
    sl_arena_init(&out_arena);
    sl_interner_init(&names, &arena);
    SlBuf text;
    sl_buf_init(&text);
    SlError err = {0};
    IrModule *in = NULL, *out = NULL;
    if (sl_file_read(argv[1], &text, &err) ||
        hlo_parse(&arena, &names, sl_buf_str(&text), argv[1], &in, &err)) {
        fprintf(stderr, "%s: %s\n", argv[1], err.msg);
        return 2;
    }
    SpmdOptions o;
    spmd_options_init(&o);
    o.num_partitions = ir_module_num_partitions(in);
    double t0 = cpu_s();
    if (spmd_partition(in, &o, trace_null_sink(), &out_arena, &out, &err)) {
        fprintf(stderr, "%s: %s\n", argv[1], err.msg);
        return 3;
    }
    double part = cpu_s() - t0;
    MemEstimate e;
    double before = median_estimate(in, runs, &e);
    long long pb = (long long)e.peak_bytes;
    double after = median_estimate(out, runs, &e);
    printf("partition (null sink) cpu %.3f s\n", part);
    printf("mem_estimate input     cpu %.4f s  (peak %lld B)\n", before, pb);
    printf("mem_estimate output    cpu %.4f s  (peak %lld B)\n", after, (long long)e.peak_bytes);
    printf("estimate / partition   %.1f %%\n", 100.0 * (before + after) / part);
    ir_module_fini(out);
    ir_module_fini(in);
    sl_buf_fini(&text);
    sl_interner_fini(&names);
    sl_arena_fini(&out_arena);
    sl_arena_fini(&arena);
    return 0;
}
