/* schema_check.c - checks a summary.json document against schema/summary.schema.json, compiled
 * in (tools/embed.py), so that diff refuses what the schema does not allow instead of
 * reading zeros from it. Owns: the subset of JSON Schema the file uses: type (one or a list),
 * required, properties, items, allOf, local $ref (#/$defs/NAME), const, enum, minimum and
 * exclusiveMinimum. Keys the schema does not describe are allowed (the schema lets later
 * versions add fields). Invariant: the first mismatch in document order is reported, with
 * its place in the document, e.g. "collectives[3].trip_count". */
#include <cJSON.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "reports/report_int.h"

enum { MAX_DEPTH = 32, WHERE_BYTES = 256 };

typedef struct Ck {
    const cJSON *defs;
    char where[WHERE_BYTES]; /* the place being checked */
    char msg[WHERE_BYTES + 192];
    bool failed;
} Ck;

static const char *
type_of(const cJSON *v)
{
    if (cJSON_IsNull(v))
        return "null";
    if (cJSON_IsBool(v))
        return "boolean";
    if (cJSON_IsNumber(v))
        return v->valuedouble == floor(v->valuedouble) && isfinite(v->valuedouble) ? "integer"
                                                                                  : "number";
    if (cJSON_IsString(v))
        return "string";
    if (cJSON_IsArray(v))
        return "array";
    return "object";
}

static bool
type_is(const cJSON *v, const char *type)
{
    const char *t = type_of(v);
    return strcmp(t, type) == 0 || (strcmp(type, "number") == 0 && strcmp(t, "integer") == 0);
}

static void fail(Ck *ck, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
fail(Ck *ck, const char *fmt, ...)
{
    if (ck->failed)
        return;
    ck->failed = true;
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    snprintf(ck->msg, sizeof(ck->msg), "%s%s%s", ck->where[0] ? ck->where : "the document",
             ck->where[0] ? ": " : " ", what);
}

static void check(Ck *ck, const cJSON *schema, const cJSON *v, int depth);

static void
check_type(Ck *ck, const cJSON *type, const cJSON *v)
{
    if (cJSON_IsString(type)) {
        if (!type_is(v, type->valuestring))
            fail(ck, "must be %s, is %s", type->valuestring, type_of(v));
        return;
    }
    if (!cJSON_IsArray(type))
        return;
    char want[96] = "";
    const cJSON *t;
    cJSON_ArrayForEach(t, type)
    {
        if (cJSON_IsString(t) && type_is(v, t->valuestring))
            return;
        if (cJSON_IsString(t) && strlen(want) + strlen(t->valuestring) + 5 < sizeof(want)) {
            if (want[0])
                strcat(want, " or ");
            strcat(want, t->valuestring);
        }
    }
    fail(ck, "must be %s, is %s", want, type_of(v));
}

static void
check_values(Ck *ck, const cJSON *schema, const cJSON *v)
{
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(schema, "const");
    if (c && !cJSON_Compare(c, v, true))
        fail(ck, "must be the constant the schema fixes");
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(schema, "enum"), *x;
    if (cJSON_IsArray(e)) {
        bool found = false;
        cJSON_ArrayForEach(x, e) found = found || cJSON_Compare(x, v, true);
        if (!found)
            fail(ck, "is not one of the values the schema lists");
    }
    const cJSON *min = cJSON_GetObjectItemCaseSensitive(schema, "minimum");
    if (cJSON_IsNumber(min) && cJSON_IsNumber(v) && v->valuedouble < min->valuedouble)
        fail(ck, "is below its minimum");
    const cJSON *xmin = cJSON_GetObjectItemCaseSensitive(schema, "exclusiveMinimum");
    if (cJSON_IsNumber(xmin) && cJSON_IsNumber(v) && !(v->valuedouble > xmin->valuedouble))
        fail(ck, "must be above its minimum");
}

/* Checks `v` (at ck->where plus ".KEY", or "[INDEX]" when key is NULL) against `schema`,
 * then restores ck->where. */
static void
check_at(Ck *ck, const cJSON *schema, const cJSON *v, const char *key, int index, int depth)
{
    size_t len = strlen(ck->where);
    if (key)
        snprintf(ck->where + len, sizeof(ck->where) - len, "%s%s", len ? "." : "", key);
    else
        snprintf(ck->where + len, sizeof(ck->where) - len, "[%d]", index);
    check(ck, schema, v, depth + 1);
    ck->where[len] = '\0';
}

static void
check(Ck *ck, const cJSON *schema, const cJSON *v, int depth)
{
    if (ck->failed || !cJSON_IsObject(schema) || depth > MAX_DEPTH)
        return;
    const cJSON *ref = cJSON_GetObjectItemCaseSensitive(schema, "$ref");
    if (cJSON_IsString(ref) && strncmp(ref->valuestring, "#/$defs/", 8) == 0)
        check(ck, cJSON_GetObjectItemCaseSensitive(ck->defs, ref->valuestring + 8), v, depth + 1);
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(schema, "allOf"))
        check(ck, s, v, depth + 1);
    check_type(ck, cJSON_GetObjectItemCaseSensitive(schema, "type"), v);
    check_values(ck, schema, v);
    if (ck->failed)
        return;
    if (cJSON_IsObject(v)) {
        cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(schema, "required"))
        {
            if (cJSON_IsString(s) && !cJSON_GetObjectItemCaseSensitive(v, s->valuestring))
                fail(ck, "has no '%s'", s->valuestring);
        }
        cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(schema, "properties"))
        {
            const cJSON *x = cJSON_GetObjectItemCaseSensitive(v, s->string);
            if (x)
                check_at(ck, s, x, s->string, 0, depth);
        }
    }
    const cJSON *items = cJSON_GetObjectItemCaseSensitive(schema, "items");
    if (items && cJSON_IsArray(v)) {
        int k = 0;
        cJSON_ArrayForEach(s, v) check_at(ck, items, s, NULL, k++, depth);
    }
}

SlStatus
report_check_summary(const cJSON *doc, const char *path, SlError *err)
{
    SlSrcLoc loc = {path, 0, 0};
    SlBuf text;
    sl_buf_init(&text);
    for (unsigned k = 0; k < report_summary_schema_n_lines; k++)
        sl_buf_puts(&text, report_summary_schema_lines[k]);
    cJSON *schema = text.failed ? NULL : cJSON_ParseWithLength(text.data, text.len);
    sl_buf_fini(&text);
    if (!schema)
        return sl_fail(err, SL_ERR_NOMEM, loc, "out of memory reading the summary schema");
    Ck ck = {cJSON_GetObjectItemCaseSensitive(schema, "$defs"), "", "", false};
    check(&ck, schema, doc, 0);
    cJSON_Delete(schema);
    if (ck.failed)
        return sl_fail(err, SL_ERR_INVALID, loc,
                       "not a valid shardlens summary (schema/summary.schema.json): %s", ck.msg);
    return SL_OK;
}
