/* fuzz_partition.c - fuzz target: on every module that passes hlo_parse, ir_module_check and
 * shd_check (as `shardlens partition` runs them), spmd_partition must either refuse with a
 * located bad-input or unsupported error, or give a module that passes ir_module_check again.
 * An internal error from the partitioner (exit 3, "a shardlens bug") aborts too when
 * SHARDLENS_FUZZ_STRICT=1 is set; by default it is printed and counted as a finding, since the
 * fuzzer would otherwise stop at the first of the known ones (issue 17, item 5). */
#include <string.h>

#include "fuzz.h"
#include "fuzz_util.h"
#include "hlo/hlo.h"
#include "spmd/spmd.h"

/* Big modules and device counts only make each run slow, not the search better. */
#define FUZZ_MAX_INSTRS 400
#define FUZZ_MAX_PARTITIONS 64

static uint32_t
instr_count(const IrModule *m)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < m->n_comps; k++)
        n += m->comps[k]->n_instrs;
    return n;
}

static void
partition(const IrModule *m, size_t size)
{
    SpmdOptions o;
    spmd_options_init(&o);
    o.num_partitions = fuzz_num_partitions(m);
    SlArena out_arena;
    sl_arena_init(&out_arena);
    IrModule *out = NULL;
    SlError err = {0};
    SlStatus st = spmd_partition(m, &o, trace_null_sink(), &out_arena, &out, &err);
    if (st == SL_ERR_INTERNAL) {
        const char *strict = getenv("SHARDLENS_FUZZ_STRICT");
        if (strict && strcmp(strict, "1") == 0)
            FUZZ_BUG("partition: internal error at %u:%u: %s", err.loc.line, err.loc.col,
                     err.msg);
        fprintf(stderr, "fuzz: partition internal error at %u:%u: %s\n", err.loc.line,
                err.loc.col, err.msg);
    } else if (st) {
        if (!err.msg[0])
            FUZZ_BUG("partition: status %d without a message", (int)st);
        (void)size;
    } else {
        SlError again = {0};
        if (ir_module_check(out, "<partitioned>", &again)) {
            SlBuf b;
            sl_buf_init(&b);
            hlo_print_module(out, &b);
            FUZZ_BUG("the partitioned module fails check: %u:%u: %s\n%.*s", again.loc.line,
                     again.loc.col, again.msg, (int)b.len, b.data ? b.data : "");
        }
    }
    if (out)
        ir_module_fini(out);
    sl_arena_fini(&out_arena);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > FUZZ_MAX_INPUT_BYTES)
        return 0;
    SlArena arena;
    SlInterner names;
    sl_arena_init(&arena);
    sl_interner_init(&names, &arena);
    IrModule *m = NULL;
    SlError err = {0};
    SlStr text = {(const char *)data, size};
    SlStatus st = hlo_parse(&arena, &names, text, "fuzz.hlo", &m, &err);
    if (st == SL_OK) {
        if (!ir_module_check(m, "fuzz.hlo", &err) && !fuzz_check_shardings(m, &err) &&
            instr_count(m) <= FUZZ_MAX_INSTRS && fuzz_num_partitions(m) <= FUZZ_MAX_PARTITIONS)
            partition(m, size);
        ir_module_fini(m);
    }
    sl_interner_fini(&names);
    sl_arena_fini(&arena);
    return 0;
}
