/* attr_vocab.c - which attribute names XLA's HLO text has. The parser decodes the attributes
 * of ir_attrs.def and keeps every other `name=value` verbatim, so a misspelt `shardIng=` would
 * otherwise pass unnoticed and leave its instruction unannotated. Owns: the list of XLA
 * instruction attributes shardlens keeps verbatim, and the nearest-name suggestion. */
#include <stdlib.h>
#include <string.h>

#include "hlo/hlo.h"

/* Instruction attributes XLA's parser knows that ir_attrs.def does not decode (shardlens prints
 * them back as they came). Sorted, for bsearch. `sparsity` is from older XLA releases. */
static const char *const k_verbatim[] = {
    "algorithm",
    "api_version",
    "async_execution_thread",
    "cross_program_prefetch_index",
    "custom_call_has_side_effect",
    "custom_call_schedule",
    "delta",
    "domain",
    "epsilon",
    "execution_thread",
    "exponent_bits",
    "feature_index",
    "fft_length",
    "fft_type",
    "infeed_config",
    "is_composite",
    "is_host_transfer",
    "literal",
    "mantissa_bits",
    "mode",
    "operand_layout_constraints",
    "operand_precision",
    "origin",
    "outfeed_config",
    "outfeed_shape",
    "output_to_operand_aliasing",
    "padding_type",
    "parameter_replication",
    "result_accuracy",
    "schedule",
    "sparsity",
    "statistics",
};

static int
cmp_name(const void *key, const void *elem)
{
    return strcmp(key, *(const char *const *)elem);
}

bool
hlo_attr_is_xla(const char *name)
{
    if (ir_attr_key_from_name(sl_str(name)) != IR_ATTR_OTHER)
        return true;
    return bsearch(name, k_verbatim, SL_COUNTOF(k_verbatim), sizeof(k_verbatim[0]), cmp_name) !=
           NULL;
}

/* Edit distance (insert, delete, substitute, swap of neighbours), case-insensitive, capped:
 * any distance above `cap` is reported as cap + 1. Names are short: longer ones are "far". */
static int
distance(const char *a, const char *b, int cap)
{
    enum { MAX = 48 };
    size_t n = strlen(a), m = strlen(b);
    if (n >= MAX || m >= MAX || (n > m ? n - m : m - n) > (size_t)cap)
        return cap + 1;
    int d[MAX][MAX];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        for (size_t j = 1; j <= m; j++) {
            char x = a[i - 1], y = b[j - 1];
            x = x >= 'A' && x <= 'Z' ? (char)(x - 'A' + 'a') : x;
            y = y >= 'A' && y <= 'Z' ? (char)(y - 'A' + 'a') : y;
            int best = d[i - 1][j - 1] + (x != y);
            if (d[i - 1][j] + 1 < best)
                best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best)
                best = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < best)
                best = d[i - 2][j - 2] + 1;
            d[i][j] = best;
        }
    }
    return d[n][m] > cap ? cap + 1 : d[n][m];
}

const char *
hlo_attr_nearest(const char *name)
{
    /* Two edits for names of six letters or more, one below: "sharding" for "shardIng" or
     * "shardng", but no suggestion of "index" for "kind". */
    int cap = strlen(name) >= 6 ? 2 : 1;
    const char *best = NULL;
    int best_d = cap + 1;
    for (int k = 0; k < IR_ATTR_OTHER; k++) {
        const char *cand = ir_attr_name((IrAttrKey)k);
        int d = distance(name, cand, cap);
        if (d < best_d) {
            best_d = d;
            best = cand;
        }
    }
    for (size_t k = 0; k < SL_COUNTOF(k_verbatim); k++) {
        int d = distance(name, k_verbatim[k], cap);
        if (d < best_d) {
            best_d = d;
            best = k_verbatim[k];
        }
    }
    return best;
}
