/* mesh.c - named mesh axes over the device order (`--mesh data=2,model=4`): device d has
 * row-major coordinates over the axes, the last axis varying fastest, as in an iota tile
 * assignment. Owns: parsing the mesh and naming the axes a collective's device groups span
 * ("all-gather over model"). Invariant: labels depend only on the groups, never on order of
 * discovery: axes are always listed in mesh order. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reports/report_int.h"

enum { MAX_AXES = 16 };

static SlStatus
bad_mesh(SlError *err, const char *text, const char *why)
{
    SlSrcLoc nowhere = {NULL, 0, 0};
    return sl_fail(err, SL_ERR_INVALID, nowhere,
                   "bad --mesh '%s': %s (want NAME=SIZE,... such as data=2,model=4)", text, why);
}

/* mesh := axis (',' axis)*      axis := NAME '=' SIZE | SIZE ('x' SIZE)*  (names axis_0..) */
SlStatus
report_mesh_parse(const char *text, int64_t n_devices, SlArena *arena, ReportAxis **axes,
                  uint32_t *n_axes, SlError *err)
{
    ReportAxis tmp[MAX_AXES];
    uint32_t n = 0;
    bool unnamed = isdigit((unsigned char)text[0]) != 0;
    const char *p = text;
    while (*p) {
        if (n == MAX_AXES)
            return bad_mesh(err, text, "too many axes");
        const char *name = p;
        size_t len = 0;
        if (!unnamed) {
            while (isalnum((unsigned char)p[len]) || p[len] == '_' || p[len] == '-')
                len++;
            if (!len || p[len] != '=')
                return bad_mesh(err, text, "expected NAME=SIZE");
            p += len + 1;
        }
        char *end = NULL;
        errno = 0;
        long long size = strtoll(p, &end, 10);
        if (errno || end == p || size < 1)
            return bad_mesh(err, text, "axis sizes must be positive integers");
        if (unnamed) {
            char buf[32];
            snprintf(buf, sizeof(buf), "axis_%u", n);
            tmp[n].name = sl_arena_strndup(arena, buf, strlen(buf));
        } else {
            tmp[n].name = sl_arena_strndup(arena, name, len);
        }
        tmp[n].size = size;
        for (uint32_t k = 0; k < n && tmp[n].name; k++)
            if (strcmp(tmp[k].name, tmp[n].name) == 0)
                return bad_mesh(err, text, "an axis is named twice");
        n++;
        p = end;
        if (*p == (unnamed ? 'x' : ','))
            p++;
        else if (*p)
            return bad_mesh(err, text, unnamed ? "expected 'x'" : "expected ','");
    }
    if (!n)
        return bad_mesh(err, text, "no axes");
    int64_t product = 1;
    for (uint32_t k = 0; k < n; k++) {
        if (product > INT64_MAX / tmp[k].size)
            return bad_mesh(err, text, "too many devices");
        product *= tmp[k].size;
    }
    if (product != n_devices) {
        char why[96];
        snprintf(why, sizeof(why), "the axes hold %lld devices but the run has %lld",
                 (long long)product, (long long)n_devices);
        return bad_mesh(err, text, why);
    }
    *axes = SL_DUP_ARRAY(arena, ReportAxis, tmp, n);
    if (!*axes || sl_arena_failed(arena)) {
        SlSrcLoc nowhere = {NULL, 0, 0};
        return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory");
    }
    *n_axes = n;
    return SL_OK;
}

const char *
report_mesh_print(const ReportAxis *axes, uint32_t n_axes, SlArena *arena)
{
    SlBuf b;
    sl_buf_init(&b);
    for (uint32_t k = 0; k < n_axes; k++)
        sl_buf_printf(&b, "%s%s=%lld", k ? "," : "", axes[k].name, (long long)axes[k].size);
    const char *s = b.failed ? NULL : sl_arena_strndup(arena, b.data ? b.data : "", b.len);
    sl_buf_fini(&b);
    return s;
}

/* Coordinate of device `d` along axis `a`. */
static int64_t
coord(const ReportAxis *axes, uint32_t n_axes, int64_t d, uint32_t a)
{
    for (uint32_t k = n_axes; k-- > a + 1;)
        d /= axes[k].size;
    return d % axes[a].size;
}

/* Marks in `spans` the axes along which devices[0..n) differ; returns the product of their
 * sizes. */
static int64_t
spanned(const ReportAxis *axes, uint32_t n_axes, const int64_t *devices, uint32_t n, bool *spans)
{
    int64_t product = 1;
    for (uint32_t a = 0; a < n_axes; a++) {
        bool varies = false;
        for (uint32_t k = 1; k < n && !varies; k++)
            varies = coord(axes, n_axes, devices[k], a) != coord(axes, n_axes, devices[0], a);
        if (varies) {
            spans[a] = true;
            product *= axes[a].size;
        }
    }
    return product;
}

const char *
report_mesh_axes_of(const ReportAxis *axes, uint32_t n_axes, const TraceRunCollective *c,
                    bool is_permute, SlArena *arena)
{
    bool spans[MAX_AXES] = {0};
    bool partial = false;
    for (int64_t g = 0; g < c->n_groups && c->devices; g++) {
        uint32_t off = c->group_offsets[g], n = c->group_offsets[g + 1] - off;
        const int64_t *dev = c->devices + off;
        bool in_mesh = true;
        for (uint32_t k = 0; k < n; k++)
            in_mesh = in_mesh && dev[k] >= 0;
        if (!in_mesh)
            continue;
        if (is_permute) { /* a pair moves along the axes where its ends differ */
            (void)spanned(axes, n_axes, dev, n, spans);
            continue;
        }
        bool mine[MAX_AXES] = {0};
        int64_t covered = spanned(axes, n_axes, dev, n, mine);
        for (uint32_t a = 0; a < n_axes; a++)
            spans[a] = spans[a] || mine[a];
        partial = partial || covered != (int64_t)n;
    }
    SlBuf b;
    sl_buf_init(&b);
    if (partial)
        sl_buf_puts(&b, "part of ");
    uint32_t listed = 0;
    for (uint32_t a = 0; a < n_axes; a++)
        if (spans[a])
            sl_buf_printf(&b, "%s%s", listed++ ? "," : "", axes[a].name);
    if (!listed)
        sl_buf_puts(&b, "none");
    const char *s = b.failed ? NULL : sl_arena_strndup(arena, b.data, b.len);
    sl_buf_fini(&b);
    return s;
}
