/* viz_label.c - the words and colours of a diagram: readable shardings (with mesh axis names),
 * byte counts, the sharding palette and the collective colours. Owns: every colour value.
 * Does not own: placing anything in a graph. Invariant: the palette is assigned in the order
 * shardings first appear among the 'before' instructions, so colours are stable per trace. */
#include <stdio.h>
#include <string.h>

#include "sharding/shd.h"
#include "viz/viz_int.h"

/* ---- mesh ------------------------------------------------------------------------------- */

/* mesh := axis (',' axis)*   axis := NAME '=' SIZE */
SlStatus
viz_mesh_parse(const char *text, VizMesh *out, SlError *err)
{
    memset(out, 0, sizeof(*out));
    if (!text || !*text)
        return SL_OK;
    SlSrcLoc nowhere = {0};
    const char *p = text;
    while (*p) {
        const char *eq = strchr(p, '='), *comma = strchr(p, ',');
        if (!comma)
            comma = p + strlen(p);
        if (!eq || eq > comma || eq == p)
            return sl_fail(err, SL_ERR_INVALID, nowhere,
                           "--mesh '%s': expected NAME=SIZE[,NAME=SIZE...]", text);
        if (out->n_axes == SL_COUNTOF(out->sizes))
            return sl_fail(err, SL_ERR_INVALID, nowhere, "--mesh '%s': more than %zu axes", text,
                           SL_COUNTOF(out->sizes));
        int64_t size = 0;
        for (const char *d = eq + 1; d < comma; d++) {
            if (*d < '0' || *d > '9' || size > INT32_MAX)
                return sl_fail(err, SL_ERR_INVALID, nowhere,
                               "--mesh '%s': axis size must be a positive integer", text);
            size = size * 10 + (*d - '0');
        }
        if (size < 1)
            return sl_fail(err, SL_ERR_INVALID, nowhere,
                           "--mesh '%s': axis size must be a positive integer", text);
        out->names[out->n_axes] = p; /* not NUL-terminated at '=': see name_len() */
        out->sizes[out->n_axes++] = size;
        p = *comma ? comma + 1 : comma;
    }
    return SL_OK;
}

static int
name_len(const char *n)
{
    return (int)strcspn(n, "=");
}

static int64_t
mesh_size(const VizMesh *m)
{
    int64_t p = 1;
    for (uint32_t i = 0; i < m->n_axes; i++)
        p *= m->sizes[i];
    return p;
}

/* Mesh coordinates of `device` (row-major over the axes). */
static void
mesh_coords(const VizMesh *m, int64_t device, int64_t *coords)
{
    for (uint32_t i = m->n_axes; i-- > 0;) {
        coords[i] = device % m->sizes[i];
        device /= m->sizes[i];
    }
}

bool
viz_mesh_axes_of(const VizMesh *mesh, const int64_t *devices, uint32_t n, SlBuf *out)
{
    if (!mesh->n_axes || n < 2)
        return false;
    int64_t total = mesh_size(mesh), first[8], c[8];
    bool varies[8] = {false};
    for (uint32_t k = 0; k < n; k++)
        if (devices[k] < 0 || devices[k] >= total)
            return false;
    mesh_coords(mesh, devices[0], first);
    for (uint32_t k = 1; k < n; k++) {
        mesh_coords(mesh, devices[k], c);
        for (uint32_t a = 0; a < mesh->n_axes; a++)
            varies[a] = varies[a] || c[a] != first[a];
    }
    int64_t product = 1;
    for (uint32_t a = 0; a < mesh->n_axes; a++)
        if (varies[a])
            product *= mesh->sizes[a];
    if (product != (int64_t)n)
        return false;
    bool sep = false;
    for (uint32_t a = 0; a < mesh->n_axes; a++) {
        if (!varies[a])
            continue;
        sl_buf_printf(out, "%s%.*s", sep ? "+" : "", name_len(mesh->names[a]), mesh->names[a]);
        sep = true;
    }
    return true;
}

/* ---- shardings ---------------------------------------------------------------------------- */

/* The devices along tile dim `dim` from the origin tile. */
static uint32_t
devices_along(const ShdSharding *s, uint32_t dim, int64_t *out, uint32_t cap)
{
    int64_t stride = 1;
    for (uint32_t d = s->n_tile_dims; d-- > dim + 1;)
        stride *= s->tile_dims[d];
    uint32_t n = 0;
    for (int64_t i = 0; i < s->tile_dims[dim] && n < cap; i++)
        out[n++] = s->devices[i * stride];
    return n;
}

static void
put_axes(const ShdSharding *s, uint32_t dim, const VizMesh *mesh, SlBuf *out)
{
    int64_t devs[256];
    if (!mesh->n_axes || s->tile_dims[dim] > (int64_t)SL_COUNTOF(devs) ||
        shd_device_count(s) != mesh_size(mesh))
        return;
    uint32_t n = devices_along(s, dim, devs, SL_COUNTOF(devs));
    SlBuf names;
    sl_buf_init(&names);
    if (viz_mesh_axes_of(mesh, devs, n, &names))
        sl_buf_printf(out, " (%s)", names.data);
    sl_buf_fini(&names);
}

static void
readable(const ShdSharding *s, const VizMesh *mesh, SlBuf *out)
{
    switch (s->kind) {
    case SHD_REPLICATED:
        sl_buf_puts(out, "replicated");
        return;
    case SHD_MAXIMAL:
        sl_buf_printf(out, "device %lld", (long long)s->device);
        return;
    case SHD_MANUAL:
        sl_buf_puts(out, "manual");
        return;
    case SHD_UNKNOWN:
        sl_buf_puts(out, "unknown");
        return;
    case SHD_UNREDUCED:
        sl_buf_puts(out, "unreduced");
        return;
    case SHD_TUPLE: {
        enum { SHOWN_LEAVES = 3 };
        if (s->n_leaves > SHOWN_LEAVES)
            sl_buf_printf(out, "(%u elements: ", s->n_leaves);
        else
            sl_buf_putc(out, '(');
        for (uint32_t i = 0; i < s->n_leaves && i < SHOWN_LEAVES; i++) {
            if (i)
                sl_buf_puts(out, "; ");
            readable(s->leaves[i], mesh, out);
        }
        if (s->n_leaves > SHOWN_LEAVES)
            sl_buf_puts(out, "; ...");
        sl_buf_putc(out, ')');
        return;
    }
    case SHD_TILED:
        break;
    }
    uint32_t rank = shd_data_rank(s);
    bool any = false;
    for (uint32_t d = 0; d < rank; d++) {
        if (s->tile_dims[d] <= 1)
            continue;
        sl_buf_printf(out, "%sdim%u/%lld", any ? ", " : "", d, (long long)s->tile_dims[d]);
        put_axes(s, d, mesh, out);
        any = true;
    }
    for (uint32_t k = 0; k < s->n_subgroups; k++) {
        uint32_t d = rank + k;
        if (s->tile_dims[d] <= 1)
            continue;
        static const char *const kinds[] = {"manual", "unreduced", "replicated"};
        sl_buf_printf(out, "%s%s x%lld", any ? ", " : "", kinds[s->subgroups[k]],
                      (long long)s->tile_dims[d]);
        put_axes(s, d, mesh, out);
        any = true;
    }
    if (!any)
        sl_buf_puts(out, "replicated");
}

void
viz_sharding_readable(SlArena *scratch, const char *text, const VizMesh *mesh, SlBuf *out)
{
    if (!text) {
        sl_buf_puts(out, "no sharding");
        return;
    }
    SlArenaMark m = sl_arena_mark(scratch);
    const ShdSharding *s = NULL;
    SlError err = {0};
    SlSrcLoc nowhere = {0};
    if (shd_parse(scratch, sl_str(text), nowhere, &s, &err) == SL_OK && s)
        readable(s, mesh, out);
    else
        sl_buf_puts(out, text); /* show what was recorded rather than nothing */
    sl_arena_release(scratch, m);
}

/* ---- numbers and text ---------------------------------------------------------------------- */

void
viz_bytes(SlBuf *out, double bytes)
{
    sl_buf_put_size(out, bytes); /* the report's wording: three significant digits */
}

void
viz_html_escape(SlBuf *out, const char *s)
{
    for (const char *p = s; *p; p++) {
        switch (*p) {
        case '&':
            sl_buf_puts(out, "&amp;");
            break;
        case '<':
            sl_buf_puts(out, "&lt;");
            break;
        case '>':
            sl_buf_puts(out, "&gt;");
            break;
        case '"':
            sl_buf_puts(out, "&quot;");
            break;
        default:
            sl_buf_putc(out, *p);
        }
    }
}

/* ---- colours -------------------------------------------------------------------------------- */

/* Pastel fills, far enough apart to tell neighbours apart; index 0 is kept for replicated. */
static const char *const k_palette[] = {
    "#e6e6e6", "#a6d8f0", "#b8e6a8", "#f7d08a", "#d9b8f0", "#f5b3c4", "#9fe0d2", "#f0e68c",
    "#c7c7f5", "#f8c8a0", "#b3d1a0", "#e0b0b0", "#a0c4e8", "#d8d0b0", "#c0e8f0", "#e8c0e0",
};

const char *
viz_palette_color(uint32_t idx)
{
    if (idx == VIZ_NONE)
        return "white";
    return k_palette[idx % SL_COUNTOF(k_palette)];
}

/* kind, colour, and what it does to a buffer (for the legend) */
static const struct {
    const char *kind, *color, *note;
} k_kinds[] = {
    {"all-gather",           "#e8743b", "gathers the shards: output S, input S/g" },
    {"reduce-scatter",       "#9b59b6", "sums, then scatters: input S, output S/g"},
    {"all-reduce",           "#d9534f", "sums across the group: S in and out"     },
    {"all-to-all",           "#2e86c1", "exchanges blocks: S per device"          },
    {"collective-permute",   "#17a589", "sends to one peer per pair: S"           },
    {"collective-broadcast", "#b7950b", "copies from one device to its group: S"  },
};

uint32_t
viz_kind_count(void)
{
    return SL_COUNTOF(k_kinds);
}

const char *
viz_kind_name(uint32_t k)
{
    return k_kinds[k].kind;
}

const char *
viz_kind_note(uint32_t k)
{
    return k_kinds[k].note;
}

uint32_t
viz_kind_index(const char *kind)
{
    for (uint32_t k = 0; kind && k < SL_COUNTOF(k_kinds); k++)
        if (strncmp(kind, k_kinds[k].kind, strlen(k_kinds[k].kind)) == 0)
            return k;
    return VIZ_NONE;
}

const char *
viz_collective_color(const char *kind)
{
    uint32_t k = viz_kind_index(kind);
    return k == VIZ_NONE ? "#7f8c8d" : k_kinds[k].color;
}

/* ---- palette -------------------------------------------------------------------------------- */

static uint64_t
hash_text(const char *s)
{
    uint64_t h = sl_hash_bytes(s, strlen(s));
    return h == SL_MAP_EMPTY ? 0 : h;
}

uint32_t
viz_palette_find(const VizPalette *p, const char *sharding)
{
    uint64_t v = 0;
    if (!sharding || !sl_map_get(&p->by_hash, hash_text(sharding), &v))
        return VIZ_NONE;
    if (strcmp(p->shardings[v - 1], sharding) == 0)
        return (uint32_t)v - 1;
    for (uint32_t i = 0; i < p->n; i++) /* a hash collision: rare, so a scan will do */
        if (strcmp(p->shardings[i], sharding) == 0)
            return i;
    return VIZ_NONE;
}

static bool
is_replicated_text(const char *s)
{
    return strcmp(s, "{replicated}") == 0;
}

SlStatus
viz_palette_init(VizPalette *p, const TraceRun *run, const VizMesh *mesh, SlArena *a, SlError *err)
{
    memset(p, 0, sizeof(*p));
    sl_map_init(&p->by_hash);
    uint32_t cap = run->n_before + 1;
    p->shardings = SL_NEW_ARRAY(a, const char *, cap);
    p->readable = SL_NEW_ARRAY(a, const char *, cap);
    SlSrcLoc nowhere = {0};
    if (!p->shardings || !p->readable)
        return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory building the palette");
    /* Replicated always takes entry 0, whether or not it occurs, so it is always grey. */
    p->shardings[p->n++] = "{replicated}";
    if (!sl_map_put(&p->by_hash, hash_text("{replicated}"), 1))
        return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory building the palette");
    for (uint32_t i = 0; i < run->n_before; i++) {
        const char *s = run->instrs[i].sharding;
        if (!s || viz_palette_find(p, s) != VIZ_NONE)
            continue;
        uint64_t h = hash_text(s), old = 0;
        p->shardings[p->n++] = s;
        if (!sl_map_get(&p->by_hash, h, &old) && !sl_map_put(&p->by_hash, h, p->n))
            return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory building the palette");
    }
    SlBuf b;
    sl_buf_init(&b);
    for (uint32_t i = 0; i < p->n; i++) {
        sl_buf_clear(&b);
        if (is_replicated_text(p->shardings[i]))
            sl_buf_puts(&b, "replicated");
        else
            viz_sharding_readable(a, p->shardings[i], mesh, &b);
        SlStr s = sl_buf_str(&b);
        p->readable[i] = b.failed ? NULL : sl_arena_strndup(a, s.ptr, s.len);
        if (!p->readable[i]) {
            sl_buf_fini(&b);
            return sl_fail(err, SL_ERR_NOMEM, nowhere, "out of memory building the palette");
        }
    }
    sl_buf_fini(&b);
    return SL_OK;
}

void
viz_palette_fini(VizPalette *p)
{
    sl_map_fini(&p->by_hash);
}
