/* fuzz_util.h - helpers the HLO fuzz targets share (compiled into each, as static inline). */
#ifndef SHARDLENS_FUZZ_UTIL_H
#define SHARDLENS_FUZZ_UTIL_H

#include "ir/ir.h"
#include "sharding/shd.h"

/* The device count a module's shardings are checked against: the header's num_partitions=,
 * else 8 (the fuzzer's default mesh). */
static inline int64_t
fuzz_num_partitions(const IrModule *m)
{
    return ir_module_find_header(m, "num_partitions") ? ir_module_num_partitions(m) : 8;
}

/* The check for that device count and shd_check of every sharding, as `shardlens check`
 * does (cli_check_shardings). */
static inline SlStatus
fuzz_check_shardings(const IrModule *m, SlError *err)
{
    int64_t n = fuzz_num_partitions(m);
    SlStatus checked = ir_module_check_for(m, "fuzz.hlo", n, err);
    if (checked)
        return checked;
    for (uint32_t k = 0; k < m->n_comps; k++) {
        const IrComputation *c = m->comps[k];
        for (uint32_t i = 0; i < c->n_instrs; i++) {
            const IrInstr *in = c->instrs[i];
            const ShdSharding *s = ir_instr_sharding(in);
            SlSrcLoc loc = {"fuzz.hlo", in->src_line, in->src_col};
            SlStatus st = s ? shd_check(s, &in->shape, n, loc, err) : SL_OK;
            if (st)
                return st;
        }
    }
    return SL_OK;
}

#endif
