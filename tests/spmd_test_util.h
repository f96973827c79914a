/* spmd_test_util.h - shared by the partitioner tests: parse HLO text, partition it, and print
 * the result into a heap buffer the test inspects. */
#ifndef SHARDLENS_SPMD_TEST_UTIL_H
#define SHARDLENS_SPMD_TEST_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <string.h>
#include <cmocka.h>

#include "hlo/hlo.h"
#include "spmd/spmd.h"

typedef struct PartRun {
    SlArena in, out;
    SlInterner names;
    IrModule *src, *dst;
    SlBuf text; /* printed partitioned module */
    SlError err;
} PartRun;

/* Partitions `hlo` with `n` partitions; returns the status; the printed result in r->text. */
static SlStatus
part_run(PartRun *r, const char *hlo, int64_t n)
{
    memset(r, 0, sizeof(*r));
    sl_arena_init(&r->in);
    sl_arena_init(&r->out);
    sl_interner_init(&r->names, &r->in);
    sl_buf_init(&r->text);
    SpmdOptions o;
    spmd_options_init(&o);
    o.num_partitions = n;
    SlStatus st = hlo_parse(&r->in, &r->names, sl_str(hlo), "test.hlo", &r->src, &r->err);
    if (st == SL_OK)
        st = spmd_partition(r->src, &o, trace_null_sink(), &r->out, &r->dst, &r->err);
    if (st == SL_OK)
        hlo_print_module(r->dst, &r->text);
    return st;
}

static void
part_free(PartRun *r)
{
    ir_module_fini(r->dst);
    ir_module_fini(r->src);
    sl_buf_fini(&r->text);
    sl_interner_fini(&r->names);
    sl_arena_fini(&r->out);
    sl_arena_fini(&r->in);
}

__attribute__((unused)) static size_t
count_of(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay ? strstr(hay, needle) : NULL; p; p = strstr(p + 1, needle))
        n++;
    return n;
}

/* Every `|`-separated fragment of `want` must occur in the text. */
static void
expect_all(const char *name, const char *text, const char *want)
{
    char buf[1024];
    snprintf(buf, sizeof(buf), "%s", want);
    for (char *tok = strtok(buf, "|"); tok; tok = strtok(NULL, "|"))
        if (!strstr(text, tok))
            fail_msg("%s: missing \"%s\" in:\n%s", name, tok, text);
}

#endif
