/* fuzz_hlo.c - fuzz target: HLO text -> hlo_parse -> ir_module_check -> shd_check of every
 * sharding, plus the printer's round trip on every module that parses:
 * print(parse(print(parse(x)))) == print(parse(x)). */
#include <string.h>

#include "fuzz.h"
#include "fuzz_util.h"
#include "hlo/hlo.h"
#include "sharding/shd.h"

static void
round_trip(const IrModule *m, size_t size)
{
    SlBuf a, b;
    sl_buf_init(&a);
    sl_buf_init(&b);
    hlo_print_module(m, &a);
    if (a.failed)
        FUZZ_BUG("printing failed");
    SlArena arena;
    SlInterner names;
    sl_arena_init(&arena);
    sl_interner_init(&names, &arena);
    IrModule *again = NULL;
    SlError err = {0};
    SlStr text = {a.data ? a.data : "", a.len};
    SlStatus st = hlo_parse(&arena, &names, text, "printed", &again, &err);
    if (st)
        FUZZ_BUG("printed text does not parse again: %u:%u: %s\n%.*s", err.loc.line, err.loc.col,
                 err.msg, (int)a.len, a.data ? a.data : "");
    hlo_print_module(again, &b);
    if (a.len != b.len || memcmp(a.data, b.data, a.len) != 0)
        FUZZ_BUG("printing is not stable:\n%.*s\n---\n%.*s", (int)a.len, a.data, (int)b.len,
                 b.data);
    ir_module_fini(again);
    sl_interner_fini(&names);
    sl_arena_fini(&arena);
    sl_buf_fini(&a);
    sl_buf_fini(&b);
    (void)size;
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
    if (st) {
        fuzz_check_error(&err, st, size, "parse");
    } else {
        round_trip(m, size);
        st = ir_module_check(m, "fuzz.hlo", &err);
        if (st)
            fuzz_check_error(&err, st, size, "check");
        else if ((st = fuzz_check_shardings(m, &err)) != SL_OK)
            fuzz_check_error(&err, st, size, "check shardings");
        ir_module_fini(m);
    }
    sl_interner_fini(&names);
    sl_arena_fini(&arena);
    return 0;
}
