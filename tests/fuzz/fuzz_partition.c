/* fuzz_partition.c - fuzz target: on every module that passes hlo_parse, ir_module_check and
 * shd_check (as `shardlens partition` runs them), the pipeline of `shardlens partition` runs:
 * for inputs of even length, as by default, the memory-placement conversion, call inlining
 * and sharding propagation when some instruction has no sharding (after which the module must
 * still pass both checks); for odd lengths, as with --no-propagate, none of it. Then
 * spmd_partition must either refuse with a located bad-input or unsupported error, or give a
 * module that passes ir_module_check again.
 * An internal error from the partitioner (exit 3, "a shardlens bug") aborts too when
 * SHARDLENS_FUZZ_STRICT=1 is set; by default it is printed and counted as a finding, since the
 * fuzzer would otherwise stop at the first of the known ones (issue 17, item 5).
 * With SHARDLENS_FUZZ_VERIFY=1 a small partitioned module is also run on simulated devices
 * against the original (what `shardlens verify` does): a mismatch, a wrong answer no check
 * sees, aborts. `meson test` replays the regressions with it set. */
#include <string.h>

#include "fuzz.h"
#include "fuzz_util.h"
#include "hlo/hlo.h"
#include "propagate/prop.h"
#include "sharding/shd.h"
#include "sim/sim.h"
#include "spmd/spmd.h"

/* Big modules and device counts only make each run slow, not the search better. */
#define FUZZ_MAX_INSTRS 400
#define FUZZ_MAX_PARTITIONS 64
/* The simulator's share: modules whose arrays hold more elements in all are not run. */
#define FUZZ_MAX_VERIFY_ELEMENTS 65536

static uint32_t
instr_count(const IrModule *m)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < m->n_comps; k++)
        n += m->comps[k]->n_instrs;
    return n;
}

/* What `shardlens partition` runs before partitioning (cli_propagate_first): false when the
 * input was refused, as the CLI would refuse it; the module must then be left alone. */
static bool
propagate(IrModule *m, SlArena *arena)
{
    PropOptions po;
    prop_options_init(&po);
    po.is_spmd = true;
    SlError err = {0};
    if (prop_options_from_module(&po, m, &err))
        return false;
    uint32_t total = 0;
    if (!spmd_count_unannotated(m, false, &total))
        return true;
    ir_convert_memory_placement(m);
    prop_inline_calls(m);
    PropResult r;
    SlStatus st = prop_run(m, &po, arena, &r, &err);
    if (st == SL_ERR_INTERNAL)
        FUZZ_BUG("propagation: internal error at %u:%u: %s", err.loc.line, err.loc.col,
                 err.msg);
    if (st)
        return false;
    SlError again = {0};
    if (ir_module_check(m, "<propagated>", &again) || fuzz_check_shardings(m, &again)) {
        SlBuf b;
        sl_buf_init(&b);
        hlo_print_module(m, &b);
        FUZZ_BUG("the propagated module fails check: %u:%u: %s\n%.*s", again.loc.line,
                 again.loc.col, again.msg, (int)b.len, b.data ? b.data : "");
    }
    return true;
}

static bool
env_is_1(const char *name)
{
    const char *v = getenv(name);
    return v && strcmp(v, "1") == 0;
}

static int64_t
element_count(const IrModule *m)
{
    int64_t n = 0;
    for (uint32_t k = 0; k < m->n_comps; k++)
        for (uint32_t i = 0; i < m->comps[k]->n_instrs; i++) {
            const IrShape *s = &m->comps[k]->instrs[i]->shape;
            uint32_t leaves = ir_shape_leaf_count(s);
            for (uint32_t L = 0; L < (leaves ? leaves : 1); L++) {
                const IrShape *l = leaves ? ir_shape_leaf(s, L) : s;
                int64_t e = ir_shape_is_array(l) ? ir_shape_elem_count(l) : 0;
                if (e < 0 || e > FUZZ_MAX_VERIFY_ELEMENTS)
                    return FUZZ_MAX_VERIFY_ELEMENTS + 1;
                n += e;
            }
            if (n > FUZZ_MAX_VERIFY_ELEMENTS)
                return n;
        }
    return n;
}

/* A collective or a device id means something only per device: inside a manual region. The
 * seeds hold partitioned modules too, whose collectives run on tiled values; such a module has
 * no global meaning to compare with (its verify "mismatch" is no bug). */
static bool
per_device_outside_manual(const IrModule *m)
{
    for (uint32_t k = 0; k < m->n_comps; k++)
        for (uint32_t i = 0; i < m->comps[k]->n_instrs; i++) {
            const IrInstr *in = m->comps[k]->instrs[i];
            switch (in->op) {
            case IR_OP_PARTITION_ID:
            case IR_OP_REPLICA_ID:
            case IR_OP_ALL_REDUCE:
            case IR_OP_ALL_GATHER:
            case IR_OP_REDUCE_SCATTER:
            case IR_OP_ALL_TO_ALL:
            case IR_OP_RAGGED_ALL_TO_ALL:
            case IR_OP_COLLECTIVE_PERMUTE:
            case IR_OP_COLLECTIVE_BROADCAST:
            case IR_OP_ALL_GATHER_START:
            case IR_OP_ALL_REDUCE_START:
            case IR_OP_COLLECTIVE_PERMUTE_START: {
                const ShdSharding *s = ir_instr_sharding(in);
                if (!s || !shd_is_manual(shd_leaf(s, 0)))
                    return true;
                break;
            }
            default: break;
            }
        }
    return false;
}

/* The partitioned module must compute what the original does; modules the simulator does not
 * take (unsupported opcodes, outputs not comparable, too large, loops past 4096 trips) are
 * left alone. */
static void
verify(const IrModule *m, const IrModule *out, int64_t n)
{
    if (element_count(m) > FUZZ_MAX_VERIFY_ELEMENTS ||
        element_count(out) * n > 8 * FUZZ_MAX_VERIFY_ELEMENTS || per_device_outside_manual(m))
        return;
    SimVerifyOptions o;
    sim_verify_options_init(&o);
    o.max_while_trips = 4096;
    SimVerifyReport rep;
    SlError err = {0};
    SlStatus st = sim_verify(m, out, n, &o, &rep, &err);
    if (st == SL_ERR_INTERNAL)
        FUZZ_BUG("verify: internal error: %s", err.msg);
    if (st == SL_OK && !rep.ok) {
        SlBuf b;
        sl_buf_init(&b);
        hlo_print_module(out, &b);
        FUZZ_BUG("verify: the partitioned module computes something else: %s\n%.*s", rep.detail,
                 (int)b.len, b.data ? b.data : "");
    }
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
        if (env_is_1("SHARDLENS_FUZZ_STRICT"))
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
        if (env_is_1("SHARDLENS_FUZZ_VERIFY"))
            verify(m, out, o.num_partitions);
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
            instr_count(m) <= FUZZ_MAX_INSTRS && fuzz_num_partitions(m) <= FUZZ_MAX_PARTITIONS &&
            (size % 2 == 1 || propagate(m, &arena)))
            partition(m, size);
        ir_module_fini(m);
    }
    sl_interner_fini(&names);
    sl_arena_fini(&arena);
    return 0;
}
