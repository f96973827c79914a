/* fuzz.h - what the fuzz targets (tests/fuzz/fuzz_<target>.c) share. Each target defines
 * LLVMFuzzerTestOneInput; it is linked either with libFuzzer (tools/fuzz.sh, clang) or with
 * replay.c, the plain-C driver that `meson test` runs over tests/fuzz-regressions/<target>/.
 * A target aborts on what would be a bug: a crash or sanitizer report, an internal error, an
 * error without a sane location, or a broken invariant (print/parse round trip, re-check of
 * the partitioned output). */
#ifndef SHARDLENS_FUZZ_H
#define SHARDLENS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/base.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Inputs longer than this are skipped: the contract is about inputs under 1 MB. */
#define FUZZ_MAX_INPUT_BYTES ((size_t)1 << 20)

/* Reports a broken invariant and aborts (libFuzzer then saves the input). */
#define FUZZ_BUG(...)                                                                      \
    do {                                                                                   \
        fprintf(stderr, "fuzz: bug: ");                                                    \
        fprintf(stderr, __VA_ARGS__);                                                      \
        fputc('\n', stderr);                                                               \
        abort();                                                                           \
    } while (0)

/* An error from bad input must carry a message and a line/col inside the input (or none). */
static inline void
fuzz_check_error(const SlError *err, SlStatus st, size_t size, const char *stage)
{
    if (st == SL_ERR_INTERNAL)
        FUZZ_BUG("%s: internal error: %s", stage, err->msg);
    if (err->status != st || !err->msg[0])
        FUZZ_BUG("%s: status %d returned but error holds %d '%s'", stage, (int)st,
                 (int)err->status, err->msg);
    if (err->loc.line > size + 1 || err->loc.col > size + 1)
        FUZZ_BUG("%s: error location %u:%u is outside a %zu-byte input: %s", stage,
                 err->loc.line, err->loc.col, size, err->msg);
}

#endif
