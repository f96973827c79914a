/* prop_options.c - the pass's options (PropOptions, XLA's ShardingPropagation constructor
 * arguments): the defaults, one option set by key and value, the two allow_* lists read from
 * the module header, the execution-thread filter, and the options printed back for help text.
 * Owns: parsing and printing options. Does not own: what they change in the pass (prop_run.c,
 * prop_fix.c). */
#include <stdlib.h>
#include <string.h>

#include "propagate/prop.h"

void
prop_options_init(PropOptions *o)
{
    memset(o, 0, sizeof(*o));
    o->n_allow_output = 1;
    o->n_allow_params = 1;
}

static SlStatus
parse_bool(const char *v, bool *out)
{
    if (!strcmp(v, "true") || !strcmp(v, "1")) {
        *out = true;
        return SL_OK;
    }
    if (!strcmp(v, "false") || !strcmp(v, "0")) {
        *out = false;
        return SL_OK;
    }
    return SL_ERR_INVALID;
}

static SlStatus
parse_bools(const char *v, bool *out, uint32_t *n)
{
    uint32_t k = 0;
    char buf[16];
    while (*v) {
        const char *e = strchr(v, ',');
        size_t len = e ? (size_t)(e - v) : strlen(v);
        if (len >= sizeof(buf) || k >= PROP_MAX_FLAGS)
            return SL_ERR_INVALID;
        memcpy(buf, v, len);
        buf[len] = 0;
        if (parse_bool(buf, &out[k++]))
            return SL_ERR_INVALID;
        v += len + (e ? 1 : 0);
        if (e && !*v)
            return SL_ERR_INVALID;
    }
    if (!k)
        return SL_ERR_INVALID;
    *n = k;
    return SL_OK;
}

bool
prop_options_has_key(const char *key)
{
    static const char *const keys[] = {"is_spmd",
                                       "propagate_metadata",
                                       "cse_prevention_only",
                                       "allow_spmd_sharding_propagation_to_output",
                                       "allow_spmd_sharding_propagation_to_parameters",
                                       "execution_threads"};
    for (size_t k = 0; k < SL_COUNTOF(keys); k++)
        if (!strcmp(key, keys[k]))
            return true;
    return false;
}

SlStatus
prop_options_set(PropOptions *o, const char *key, const char *value, SlError *err)
{
    SlSrcLoc none = {0};
    SlStatus st = SL_ERR_INVALID;
    if (!strcmp(key, "is_spmd"))
        st = parse_bool(value, &o->is_spmd);
    else if (!strcmp(key, "propagate_metadata"))
        st = parse_bool(value, &o->propagate_metadata);
    else if (!strcmp(key, "cse_prevention_only"))
        st = parse_bool(value, &o->cse_prevention_only);
    else if (!strcmp(key, "allow_spmd_sharding_propagation_to_output"))
        st = parse_bools(value, o->allow_output, &o->n_allow_output);
    else if (!strcmp(key, "allow_spmd_sharding_propagation_to_parameters"))
        st = parse_bools(value, o->allow_params, &o->n_allow_params);
    else if (!strcmp(key, "execution_threads")) {
        size_t n = strlen(value);
        st = n && n < sizeof(o->threads) && value[0] != ',' && value[n - 1] != ','
                 ? SL_OK
                 : SL_ERR_INVALID;
        if (!st)
            memcpy(o->threads, value, n + 1);
    }
    else
        return sl_fail(err, SL_ERR_INVALID, none, "unknown propagation option '%s'", key);
    if (st)
        return sl_fail(err, SL_ERR_INVALID, none, "bad value '%s' for option %s", value, key);
    return SL_OK;
}

bool
prop_options_thread(const PropOptions *o, const IrComputation *c)
{
    return prop_options_thread_named(o, c->execution_thread);
}

bool
prop_options_thread_named(const PropOptions *o, SlStr t)
{
    if (!o->threads[0])
        return true;
    if (t.len >= 2 && t.ptr[0] == '"') {
        t.ptr++;
        t.len -= 2;
    }
    if (!t.len)
        t = sl_str("main");
    for (const char *v = o->threads; *v;) {
        const char *e = strchr(v, ',');
        size_t len = e ? (size_t)(e - v) : strlen(v);
        if (len == t.len && !memcmp(v, t.ptr, len))
            return true;
        v += len + (e ? 1 : 0);
    }
    return false;
}

SlStatus
prop_options_from_module(PropOptions *o, const IrModule *m, SlError *err)
{
    static const char *const keys[] = {"allow_spmd_sharding_propagation_to_output",
                                       "allow_spmd_sharding_propagation_to_parameters"};
    for (int k = 0; k < 2; k++) {
        const IrHeaderAttr *h = ir_module_find_header(m, keys[k]);
        if (!h)
            continue;
        SlStr v = h->value;
        if (v.len >= 2 && v.ptr[0] == '{' && v.ptr[v.len - 1] == '}') {
            v.ptr++;
            v.len -= 2;
        }
        char *text = malloc(v.len + 1);
        if (!text)
            return sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){0}, "out of memory");
        memcpy(text, v.ptr, v.len);
        text[v.len] = 0;
        SlStatus st = k == 0 ? parse_bools(text, o->allow_output, &o->n_allow_output)
                             : parse_bools(text, o->allow_params, &o->n_allow_params);
        free(text);
        if (st)
            return sl_fail(err, SL_ERR_INVALID, (SlSrcLoc){0},
                           "module header: %s needs at most %d values true or false", keys[k],
                           PROP_MAX_FLAGS);
    }
    return SL_OK;
}

static void
print_bools(SlBuf *out, const bool *v, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        sl_buf_printf(out, "%s%s", i ? "," : "", v[i] ? "true" : "false");
}

void
prop_options_print(const PropOptions *o, SlBuf *out)
{
    sl_buf_printf(out, "is_spmd=%s\npropagate_metadata=%s\n", o->is_spmd ? "true" : "false",
                  o->propagate_metadata ? "true" : "false");
    sl_buf_puts(out, "allow_spmd_sharding_propagation_to_output=");
    print_bools(out, o->allow_output, o->n_allow_output);
    sl_buf_puts(out, "\nallow_spmd_sharding_propagation_to_parameters=");
    print_bools(out, o->allow_params, o->n_allow_params);
    sl_buf_printf(out, "\ncse_prevention_only=%s\n", o->cse_prevention_only ? "true" : "false");
}
