/* spmd_fixture.c - see spmd_fixture.h. */
#include "spmd_fixture.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>
/* Partitions `hlo` over n devices with the windowed threshold and extra KEY=VALUE options. */
void
fx_run_with(SpmdRun *r, const char *hlo, int64_t n, int64_t threshold_mib, const char *const *sets,
            size_t n_sets)
{
    memset(r, 0, sizeof(*r));
    sl_arena_init(&r->in);
    sl_arena_init(&r->out);
    sl_interner_init(&r->names, &r->in);
    sl_buf_init(&r->text);
    trace_mem_sink_init(&r->trace);
    SpmdOptions o;
    spmd_options_init(&o);
    o.num_partitions = n;
    o.threshold_for_windowed_einsum_mib = threshold_mib;
    for (size_t k = 0; k < n_sets; k++)
        if (spmd_options_set(&o, sl_str(sets[k]), &r->err) != SL_OK)
            fail_msg("bad option %s: %s", sets[k], r->err.msg);
    SlStatus st = hlo_parse(&r->in, &r->names, sl_str(hlo), "test.hlo", &r->src, &r->err);
    if (st == SL_OK)
        st = spmd_partition(r->src, &o, &r->trace.sink, &r->out, &r->dst, &r->err);
    if (st != SL_OK)
        fail_msg("partition failed: %s", r->err.msg);
    hlo_print_module(r->dst, &r->text);
    sl_buf_putc(&r->text, '\0');
    sl_buf_putc(&r->trace.log, '\0');
}

void
fx_run(SpmdRun *r, const char *hlo, int64_t n, int64_t threshold_mib)
{
    fx_run_with(r, hlo, n, threshold_mib, NULL, 0);
}

void
fx_done(SpmdRun *r)
{
    ir_module_fini(r->dst);
    ir_module_fini(r->src);
    sl_buf_fini(&r->text);
    trace_mem_sink_fini(&r->trace);
    sl_interner_fini(&r->names);
    sl_arena_fini(&r->out);
    sl_arena_fini(&r->in);
}

size_t
fx_count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

void
fx_want(const SpmdRun *r, const char *fragment)
{
    if (!strstr(r->text.data, fragment))
        fail_msg("missing \"%s\" in:\n%s\ntrace:\n%s", fragment, r->text.data, r->trace.log.data);
}

void
fx_want_trace(const SpmdRun *r, const char *fragment)
{
    if (!strstr(r->trace.log.data, fragment))
        fail_msg("missing trace \"%s\" in:\n%s", fragment, r->trace.log.data);
}

void
fx_want_no_collectives(const SpmdRun *r)
{
    static const char *const k[] = {"all-reduce(", "all-gather(", "all-to-all(",
                                    "collective-permute("};
    for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++)
        if (strstr(r->text.data, k[i]))
            fail_msg("unexpected %s in:\n%s", k[i], r->text.data);
}

void
fx_want_none(const SpmdRun *r, const char *fragment)
{
    if (strstr(r->text.data, fragment))
        fail_msg("unexpected \"%s\" in:\n%s", fragment, r->text.data);
}
