/* fuzz_sharding.c - fuzz target: `sharding={...}` text (V1, V2 iota, V3 named meshes) ->
 * shd_parse -> shd_print -> shd_parse again (the printed text must parse to the same value and
 * print the same), then shd_check against a shape of the sharding's rank and its own device
 * count, and the tile queries the partitioner uses on every device of a sharding that passed. */
#include <string.h>

#include "fuzz.h"
#include "sharding/shd.h"

/* A shape of rank `rank`, 12 per dim (divisible by many tile counts, not all). */
static IrShape
shape_of_rank(uint32_t rank, int64_t *dims)
{
    for (uint32_t i = 0; i < rank; i++)
        dims[i] = 12;
    IrShape s = {0};
    s.dtype = IR_DT_F32;
    s.rank = rank;
    s.dims = rank ? dims : NULL;
    return s;
}

static void
exercise(SlArena *a, const ShdSharding *s)
{
    if (s->kind != SHD_TILED && s->kind != SHD_MAXIMAL)
        return;
    int64_t n = s->kind == SHD_TILED                        ? shd_device_count(s)
                : s->device >= 0 && s->device < 65536 ? s->device + 1
                                                        : 1;
    int64_t dims[64];
    uint32_t rank = s->kind == SHD_TILED ? shd_data_rank(s) : 1;
    if (rank > 64)
        FUZZ_BUG("data rank %u", rank);
    IrShape shape = shape_of_rank(rank, dims);
    SlError err = {0};
    SlSrcLoc loc = {"fuzz", 1, 1};
    SlStatus st = shd_check(s, &shape, n, loc, &err);
    if (st) {
        fuzz_check_error(&err, st, 1 << 20, "shd_check");
        return;
    }
    if (s->kind != SHD_TILED)
        return;
    IrShape local = shd_tile_shape(a, &shape, s);
    if (local.rank != rank)
        FUZZ_BUG("tile shape rank %u, data rank %u", local.rank, rank);
    int64_t index[64];
    for (int64_t d = 0; d < n; d++) {
        if (!shd_tile_index(s, d, index))
            FUZZ_BUG("device %lld of a checked sharding has no tile", (long long)d);
        for (uint32_t i = 0; i < rank; i++) {
            int64_t off = shd_tile_offset(s, &shape, i, d), ext = shd_tile_extent(s, &shape, i, d);
            if (off < 0 || ext < 0 || off + ext > dims[i])
                FUZZ_BUG("tile of device %lld along dim %u: offset %lld extent %lld", (long long)d,
                         i, (long long)off, (long long)ext);
        }
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > FUZZ_MAX_INPUT_BYTES)
        return 0;
    SlArena a;
    sl_arena_init(&a);
    SlError err = {0};
    SlSrcLoc loc = {"fuzz", 1, 1};
    const ShdSharding *s = NULL;
    SlStatus st = shd_parse(&a, (SlStr){(const char *)data, size}, loc, &s, &err);
    if (st) {
        fuzz_check_error(&err, st, size, "parse");
        sl_arena_fini(&a);
        return 0;
    }
    SlBuf p1, p2;
    sl_buf_init(&p1);
    sl_buf_init(&p2);
    shd_print(s, &p1);
    const ShdSharding *again = NULL;
    SlError err2 = {0};
    if (shd_parse(&a, (SlStr){p1.data ? p1.data : "", p1.len}, loc, &again, &err2))
        FUZZ_BUG("printed sharding %.*s does not parse: %s", (int)p1.len, p1.data, err2.msg);
    shd_print(again, &p2);
    if (p1.len != p2.len || memcmp(p1.data, p2.data, p1.len) != 0)
        FUZZ_BUG("sharding printing is not stable: %.*s vs %.*s", (int)p1.len, p1.data,
                 (int)p2.len, p2.data);
    if (!shd_equal(s, again))
        FUZZ_BUG("reparsed sharding %.*s differs from the parsed one", (int)p1.len, p1.data);
    if (s->kind == SHD_TUPLE) {
        for (uint32_t i = 0; i < s->n_leaves; i++)
            exercise(&a, s->leaves[i]);
    } else {
        exercise(&a, s);
    }
    sl_buf_fini(&p1);
    sl_buf_fini(&p2);
    sl_arena_fini(&a);
    return 0;
}
