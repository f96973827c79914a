/* spmd_run.c - a tiny driver for partitioner debugging: parse, partition, print.
 *   spmd_run [--num-partitions N] [--output FILE] [--set K=V]... IN.hlo
 * Same argument shape as `shardlens partition`, so run.py --cmd can use it. */
#include <stdio.h>
#include <string.h>

#include "hlo/hlo.h"
#include "ir/ir.h"
#include "spmd/spmd.h"

int
main(int argc, char **argv)
{
    SpmdOptions o;
    spmd_options_init(&o);
    const char *in = NULL, *outp = "-";
    SlError err = {0};
    for (int i = 1; i < argc; i++) {
        if ((!strcmp(argv[i], "--num-partitions") || !strcmp(argv[i], "-n")) && i + 1 < argc) {
            char kv[64];
            snprintf(kv, sizeof(kv), "num_partitions=%s", argv[++i]);
            if (spmd_options_set(&o, sl_str(kv), &err) != SL_OK)
                break;
        } else if ((!strcmp(argv[i], "--output") || !strcmp(argv[i], "-o")) && i + 1 < argc) {
            outp = argv[++i];
        } else if (!strcmp(argv[i], "--set") && i + 1 < argc) {
            if (spmd_options_set(&o, sl_str(argv[++i]), &err) != SL_OK)
                break;
        } else {
            in = argv[i];
        }
    }
    if (err.status != SL_OK || !in) {
        fprintf(stderr, "usage error: %s\n", err.msg);
        return 2;
    }
    SlBuf text;
    sl_buf_init(&text);
    if (sl_file_read(in, &text, &err) != SL_OK) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    SlArena a, oa;
    sl_arena_init(&a);
    sl_arena_init(&oa);
    SlInterner names;
    sl_interner_init(&names, &a);
    IrModule *m = NULL, *out = NULL;
    int rc = 0;
    if (hlo_parse(&a, &names, sl_buf_str(&text), in, &m, &err) != SL_OK ||
        spmd_partition(m, &o, trace_null_sink(), &oa, &out, &err) != SL_OK) {
        fprintf(stderr, "%s:%u:%u: error: %s\n", in, err.loc.line, err.loc.col, err.msg);
        rc = 1;
    } else {
        SlBuf b;
        sl_buf_init(&b);
        hlo_print_module(out, &b);
        if (sl_file_write_atomic(outp, b.data, b.len, &err) != SL_OK)
            rc = 1;
        sl_buf_fini(&b);
    }
    ir_module_fini(out);
    ir_module_fini(m);
    sl_interner_fini(&names);
    sl_arena_fini(&oa);
    sl_arena_fini(&a);
    sl_buf_fini(&text);
    return rc;
}
