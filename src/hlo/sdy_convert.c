/* sdy_convert.c - one Shardy tensor sharding as a GSPMD sharding (sdy.h). Owns: the tile
 * assignment XLA's Shardy-to-HLO export builds, with manual axes as a MANUAL subgroup. Does not
 * own: sharding normalization (shd_tiled applies XLA's Subgroup rules), reading the text
 * (sdy_text.c).
 *
 * The conversion (XLA convertToHloSharding, non-V3): every mesh axis is split at each sub-axis
 * boundary that the dimension or unreduced axes use ("x":(2)4 of x=16 splits x into 2,4,2), in
 * mesh order, major first. The tile assignment is iota (or the mesh's device_ids) over those
 * pieces, transposed so that the dimensions' axes come first (dimension by dimension, in the
 * order written), then the unreduced axes (one UNREDUCED subgroup dim), then every other piece
 * in mesh order (one REPLICATED subgroup dim when larger than 1). Replicated axes need nothing
 * of their own: axes not sharding a dimension are replicated anyway. Priorities only order
 * Shardy's propagation and have no GSPMD form: read and ignored. */
#include <stdlib.h>

#include "hlo/sdy_int.h"

static int
cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* The GSPMD sharding of one tensor sharding (XLA convertToHloSharding; see the file comment). */
const ShdSharding *
sdy_convert_manual(SlArena *a, const SdyTensor *ts, const bool *manual)
{
    const SdyMesh *mesh = ts->mesh;
    if (mesh->n_axes == 0)
        return mesh->n_ids ? shd_maximal(a, mesh->ids[0]) : shd_replicated(a);
    /* the pieces: each axis cut at the boundaries its dimension / unreduced sub-axes use */
    uint32_t n_p = 0;
    uint32_t p_axis[SDY_MAX_PIECES];
    int64_t p_pre[SDY_MAX_PIECES], p_size[SDY_MAX_PIECES];
    for (uint32_t ax = 0; ax < mesh->n_axes; ax++) {
        int64_t cut[2 * SDY_MAX_REFS + 2];
        uint32_t n_cut = 0;
        cut[n_cut++] = 1;
        cut[n_cut++] = mesh->axis_sizes[ax];
        for (uint32_t k = 0; k < ts->n_refs; k++) {
            bool counted = !(k >= ts->repl_first && k < ts->repl_first + ts->n_repl);
            const SdyRef *r = &ts->refs[k];
            if (!counted || r->axis != ax || (manual && manual[ax]))
                continue;
            cut[n_cut++] = r->pre;
            cut[n_cut++] = r->pre * r->size;
        }
        qsort(cut, n_cut, sizeof(int64_t), cmp_i64);
        for (uint32_t k = 0; k + 1 < n_cut; k++) {
            /* equal cuts are one boundary; an axis of size 1 is still one (size-1) piece */
            if (cut[k] == cut[k + 1] && !(mesh->axis_sizes[ax] == 1 && k == 0))
                continue;
            if (n_p == SDY_MAX_PIECES)
                return NULL;
            p_axis[n_p] = ax;
            p_pre[n_p] = cut[k];
            p_size[n_p] = cut[k + 1] / cut[k];
            n_p++;
        }
    }
    /* the transposition: dimension axes, then unreduced axes, then the rest in mesh order */
    int64_t tile[SDY_MAX_RANK + 2];
    ShdSubgroup types[3];
    uint32_t n_tile = ts->rank, n_types = 0, n_perm = 0;
    uint32_t perm[SDY_MAX_PIECES];
    bool placed[SDY_MAX_PIECES] = {false};
    for (uint32_t d = 0; d < ts->rank; d++)
        tile[d] = 1;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1 && manual) { /* the manual axes: one MANUAL subgroup dim, mesh order */
            tile[n_tile] = 1;
            for (uint32_t q = 0; q < n_p; q++)
                if (manual[p_axis[q]] && !placed[q]) {
                    placed[q] = true;
                    perm[n_perm++] = q;
                    tile[n_tile] *= p_size[q];
                }
            n_tile++;
            types[n_types++] = SHD_SUB_MANUAL;
        }
        for (uint32_t d = 0; d < (pass ? 1u : ts->rank); d++) {
            uint32_t first = pass ? ts->unred_first : ts->dim_first[d];
            uint32_t n = pass ? ts->n_unred : ts->dim_n[d];
            if (pass && n)
                tile[n_tile] = 1;
            for (uint32_t k = first; k < first + n; k++) {
                const SdyRef *r = &ts->refs[k];
                if (manual && manual[r->axis])
                    continue; /* inside a manual computation only the free axes tile */
                uint32_t q = 0;
                while (q < n_p && !(p_axis[q] == r->axis && p_pre[q] == r->pre &&
                                    p_size[q] == r->size))
                    q++;
                if (q == n_p || placed[q])
                    return NULL; /* sdy_parse_tensor rejects overlaps: not reached */
                placed[q] = true;
                perm[n_perm++] = q;
                tile[pass ? n_tile : d] *= r->size;
            }
            if (pass && n) {
                n_tile++;
                types[n_types++] = SHD_SUB_UNREDUCED;
            }
        }
    }
    int64_t replicated = 1;
    for (uint32_t q = 0; q < n_p; q++)
        if (!placed[q]) {
            perm[n_perm++] = q;
            replicated *= p_size[q];
        }
    if (replicated > 1) {
        tile[n_tile++] = replicated;
        types[n_types++] = SHD_SUB_REPLICATED;
    }
    /* devices[i]: element i (row-major) of the piece array transposed by `perm` */
    int64_t total = mesh->total;
    int64_t *devs = SL_NEW_ARRAY(a, int64_t, total);
    if (!devs)
        return NULL;
    int64_t stride[SDY_MAX_PIECES], idx[SDY_MAX_PIECES] = {0};
    int64_t s = 1;
    for (uint32_t q = n_p; q-- > 0;) {
        stride[q] = s;
        s *= p_size[q];
    }
    for (int64_t i = 0; i < total; i++) {
        int64_t src = 0;
        for (uint32_t k = 0; k < n_p; k++)
            src += idx[k] * stride[perm[k]];
        devs[i] = mesh->ids ? mesh->ids[src] : src;
        for (uint32_t k = n_p; k-- > 0;) { /* next index of the transposed array */
            if (++idx[k] < p_size[perm[k]])
                break;
            idx[k] = 0;
        }
    }
    return shd_tiled(a, tile, n_tile, devs, n_types ? types : NULL, n_types);
}

const ShdSharding *
sdy_convert(SlArena *a, const SdyTensor *ts)
{
    return sdy_convert_manual(a, ts, NULL);
}
