/* options.c - SpmdPartitionerOptions by XLA's names (spmd.h), and the few of shardlens's own
 * listed last. Owns: defaults, `KEY=VALUE` parsing and the fixed-order listing. Names XLA
 * accepts but the partitioner does not model are accepted and recorded as unused (listed with
 * "# unused"); unknown names are errors. */
#include "spmd/spmd.h"

#include <stddef.h>
#include <string.h>

/* OPT_UNREAD_*: stored like OPT_INT/OPT_BOOL but read by no part of the partitioner, so help
 * does not offer them; OPT_UNUSED_*: accepted and not even stored. */
typedef enum OptKind { OPT_INT, OPT_BOOL, OPT_STR, OPT_UNREAD_INT, OPT_UNREAD_BOOL,
                       OPT_UNUSED_INT, OPT_UNUSED_BOOL, OPT_UNUSED_STR } OptKind;

static const struct {
    const char *name;
    OptKind kind;
    size_t offset; /* into SpmdOptions; unused for OPT_UNUSED_* */
} k_opts[] = {
    {"num_partitions", OPT_INT, offsetof(SpmdOptions, num_partitions)},
    {"threshold_for_windowed_einsum_mib", OPT_INT,
     offsetof(SpmdOptions, threshold_for_windowed_einsum_mib)},
    {"total_bytes_windowed_einsum_threshold", OPT_INT,
     offsetof(SpmdOptions, total_bytes_windowed_einsum_threshold)},
    {"max_windowed_einsum_iteration", OPT_INT, offsetof(SpmdOptions, max_windowed_einsum_iteration)},
    {"unroll_windowed_einsum", OPT_BOOL, offsetof(SpmdOptions, unroll_windowed_einsum)},
    {"bidirectional_windowed_einsum", OPT_BOOL,
     offsetof(SpmdOptions, bidirectional_windowed_einsum)},
    {"enable_windowed_einsum_for_all_gather", OPT_BOOL,
     offsetof(SpmdOptions, enable_windowed_einsum_for_all_gather)},
    {"enable_windowed_einsum_for_reduce_scatter", OPT_BOOL,
     offsetof(SpmdOptions, enable_windowed_einsum_for_reduce_scatter)},
    /* parsed into SpmdOptions, read by nothing yet: accepted, not listed in help */
    {"bidirectional_decomposed_windowed_einsum", OPT_UNREAD_BOOL,
     offsetof(SpmdOptions, bidirectional_decomposed_windowed_einsum)},
    {"choose_faster_windowed_einsum_over_mem", OPT_BOOL,
     offsetof(SpmdOptions, choose_faster_windowed_einsum_over_mem)},
    {"allow_module_signature_change", OPT_UNREAD_BOOL,
     offsetof(SpmdOptions, allow_module_signature_change)},
    {"cache_all_gather", OPT_BOOL, offsetof(SpmdOptions, cache_all_gather)},
    {"skip_checking_windowed_einsum_users", OPT_BOOL,
     offsetof(SpmdOptions, skip_checking_windowed_einsum_users)},
    {"enable_experimental_all_to_all_windowed_einsum", OPT_UNREAD_BOOL,
     offsetof(SpmdOptions, enable_experimental_all_to_all_windowed_einsum)},
    {"partial_windowed_einsum", OPT_BOOL, offsetof(SpmdOptions, partial_windowed_einsum)},
    {"disable_ag_rewrite_for_multiple_consumers", OPT_BOOL,
     offsetof(SpmdOptions, disable_ag_rewrite_for_multiple_consumers)},
    {"conv_halo_exchange_always_on_lhs", OPT_BOOL,
     offsetof(SpmdOptions, conv_halo_exchange_always_on_lhs)},
    {"report_instruction_count", OPT_UNREAD_INT, offsetof(SpmdOptions, report_instruction_count)},
    {"preferred_gather_partition_methods", OPT_STR,
     offsetof(SpmdOptions, preferred_gather_partition_methods)},
    {"preferred_scatter_partition_methods", OPT_STR,
     offsetof(SpmdOptions, preferred_scatter_partition_methods)},
    {"enable_enzyme_opt", OPT_BOOL, offsetof(SpmdOptions, enable_enzyme_opt)},
    {"enable_dynamic_slice_collective_broadcast", OPT_BOOL,
     offsetof(SpmdOptions, enable_dynamic_slice_collective_broadcast)},
    {"max_dynamic_slice_collective_broadcast_partitions", OPT_INT,
     offsetof(SpmdOptions, max_dynamic_slice_collective_broadcast_partitions)},
    /* accepted, recorded, not modelled */
    {"speculative_windowed_einsum", OPT_UNUSED_BOOL, 0},
    {"enable_full_replicated_partition_tiling", OPT_UNUSED_BOOL, 0},
    {"xla_gpu_operand_bytes_threshold_for_windowed_einsum", OPT_UNUSED_INT, 0},
    {"skip_dot_windowed_einsum_check", OPT_UNUSED_BOOL, 0},
    {"use_v3_sharding", OPT_UNUSED_STR, 0},
    /* shardlens's own */
    {"remove_dead_code", OPT_BOOL, offsetof(SpmdOptions, remove_dead_code)},
};

void
spmd_options_init(SpmdOptions *o)
{
    memset(o, 0, sizeof(*o));
    o->threshold_for_windowed_einsum_mib = 256;
    o->total_bytes_windowed_einsum_threshold = -1;
    o->max_windowed_einsum_iteration = 32;
    o->enable_windowed_einsum_for_all_gather = true;
    o->enable_windowed_einsum_for_reduce_scatter = true;
    o->allow_module_signature_change = true;
    o->cache_all_gather = true;
    o->conv_halo_exchange_always_on_lhs = true;
    o->report_instruction_count = 5;
    o->max_dynamic_slice_collective_broadcast_partitions = 32;
    o->remove_dead_code = true;
}

static bool
parse_int(SlStr v, int64_t *out)
{
    if (v.len == 0 || v.len > 20)
        return false;
    size_t i = 0;
    bool neg = false;
    if (v.ptr[0] == '-' || v.ptr[0] == '+') {
        neg = v.ptr[0] == '-';
        i = 1;
        if (v.len == 1)
            return false;
    }
    int64_t r = 0;
    for (; i < v.len; i++) {
        if (v.ptr[i] < '0' || v.ptr[i] > '9')
            return false;
        int64_t digit = v.ptr[i] - '0';
        if (r > (INT64_MAX - digit) / 10)
            return false;
        r = r * 10 + digit;
    }
    *out = neg ? -r : r;
    return true;
}

static bool
parse_bool(SlStr v, bool *out)
{
    if (sl_str_eq_cstr(v, "true") || sl_str_eq_cstr(v, "1")) {
        *out = true;
        return true;
    }
    if (sl_str_eq_cstr(v, "false") || sl_str_eq_cstr(v, "0")) {
        *out = false;
        return true;
    }
    return false;
}

SlStatus
spmd_options_set(SpmdOptions *o, SlStr kv, SlError *err)
{
    SlSrcLoc loc = {NULL, 0, 0};
    size_t eq = 0;
    while (eq < kv.len && kv.ptr[eq] != '=')
        eq++;
    if (eq == kv.len || eq == 0)
        return sl_fail(err, SL_ERR_INVALID, loc, "option '%.*s' is not KEY=VALUE",
                       SL_STR_ARG(kv));
    SlStr key = {kv.ptr, eq}, val = {kv.ptr + eq + 1, kv.len - eq - 1};
    for (size_t k = 0; k < SL_COUNTOF(k_opts); k++) {
        if (!sl_str_eq_cstr(key, k_opts[k].name))
            continue;
        char *field = (char *)o + k_opts[k].offset;
        int64_t iv = 0;
        bool bv = false;
        switch (k_opts[k].kind) {
        case OPT_INT:
        case OPT_UNREAD_INT:
        case OPT_UNUSED_INT:
            if (!parse_int(val, &iv))
                break;
            if (k_opts[k].kind != OPT_UNUSED_INT)
                memcpy(field, &iv, sizeof(iv));
            return SL_OK;
        case OPT_BOOL:
        case OPT_UNREAD_BOOL:
        case OPT_UNUSED_BOOL:
            if (!parse_bool(val, &bv))
                break;
            if (k_opts[k].kind != OPT_UNUSED_BOOL)
                memcpy(field, &bv, sizeof(bv));
            return SL_OK;
        case OPT_STR:
            /* kept by reference: `kv` must outlive the options and end at a NUL (argv does) */
            memcpy(field, &val.ptr, sizeof(val.ptr));
            return SL_OK;
        case OPT_UNUSED_STR:
            return SL_OK;
        }
        return sl_fail(err, SL_ERR_INVALID, loc, "bad value '%.*s' for option %.*s",
                       SL_STR_ARG(val), SL_STR_ARG(key));
    }
    return sl_fail(err, SL_ERR_INVALID, loc, "unknown partitioner option '%.*s'",
                   SL_STR_ARG(key));
}

static bool
is_modelled(size_t k)
{
    switch (k_opts[k].kind) {
    case OPT_INT:
    case OPT_BOOL:
    case OPT_STR:
        /* -n sets the count; --set num_partitions would be overridden by it */
        return strcmp(k_opts[k].name, "num_partitions") != 0;
    case OPT_UNREAD_INT:
    case OPT_UNREAD_BOOL:
    case OPT_UNUSED_INT:
    case OPT_UNUSED_BOOL:
    case OPT_UNUSED_STR:
        return false;
    }
    return false;
}

static void
print_options(const SpmdOptions *o, bool modelled_only, SlBuf *out)
{
    for (size_t k = 0; k < SL_COUNTOF(k_opts); k++) {
        if (modelled_only && !is_modelled(k))
            continue;
        const char *field = (const char *)o + k_opts[k].offset;
        sl_buf_puts(out, k_opts[k].name);
        sl_buf_putc(out, '=');
        switch (k_opts[k].kind) {
        case OPT_INT:
        case OPT_UNREAD_INT: {
            int64_t v;
            memcpy(&v, field, sizeof(v));
            sl_buf_put_i64(out, v);
            break;
        }
        case OPT_BOOL:
        case OPT_UNREAD_BOOL: {
            bool v;
            memcpy(&v, field, sizeof(v));
            sl_buf_puts(out, v ? "true" : "false");
            break;
        }
        case OPT_STR: {
            const char *v;
            memcpy(&v, field, sizeof(v));
            sl_buf_puts(out, v ? v : "");
            break;
        }
        case OPT_UNUSED_INT:
        case OPT_UNUSED_BOOL:
        case OPT_UNUSED_STR:
            sl_buf_puts(out, "# unused");
            break;
        }
        sl_buf_putc(out, '\n');
    }
}

void
spmd_options_print(const SpmdOptions *o, SlBuf *out)
{
    print_options(o, false, out);
}

void
spmd_options_print_modelled(const SpmdOptions *o, SlBuf *out)
{
    print_options(o, true, out);
}
