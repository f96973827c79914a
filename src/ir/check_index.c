/* check_index.c - shape rules of the contraction and indexing family for ir_module_check():
 * dot (batch and contracting dims), convolution (dim_labels, groups, window), gather and scatter
 * (index vector, offset/window dims, batching dims). Owns: inferring these result shapes the
 * way XLA's ShapeInference does. Does not own: dispatch or structure (check.c), the shared
 * helpers (check_common.c, through check_int.h). Invariant: the module is never modified;
 * inferred shapes live in the checker's scratch arena. */
/* clang-format off */
#include "ir/check_int.h" /* the file's own header first */
/* clang-format on */

#include <string.h>

/* ---- dot and convolution -------------------------------------------------------------- */

static SlStatus
pair_dims(IrCheck *ck, const IrInstr *in, const char *what, IrAttrKey lk, IrAttrKey rk,
          const int64_t **lv, const int64_t **rv, uint32_t *n)
{
    const IrShape *l = opnd(in, 0), *r = opnd(in, 1);
    uint32_t nl = ir_instr_ints_attr(in, lk, lv), nr = ir_instr_ints_attr(in, rk, rv);
    SlStatus st;
    if (nl != nr)
        return ck_bad(ck, in, "lhs has %u %s dims but rhs has %u", nl, what, nr);
    if ((st = ck_need_dims(ck, in, ir_attr_name(lk), *lv, nl, l->rank)) ||
        (st = ck_need_dims(ck, in, ir_attr_name(rk), *rv, nr, r->rank)))
        return st;
    for (uint32_t i = 0; i < nl; i++) {
        int64_t a = dim(l, (uint32_t)(*lv)[i]), b = dim(r, (uint32_t)(*rv)[i]);
        if (!dim_eq(a, b))
            return ck_bad(ck, in, "%s dim sizes differ: lhs dim %lld is %lld, rhs dim %lld is %lld",
                          what, (long long)(*lv)[i], (long long)a, (long long)(*rv)[i],
                          (long long)b);
    }
    *n = nl;
    return SL_OK;
}

/* The dot of `l` and `r`: batch dims, lhs free dims, rhs free dims (rhs dim `skip_r` left out
 * too, -1: none), after `lead` leading dims of size `lead_size` (ragged-dot's group dim). */
static SlStatus
dot_shape(IrCheck *ck, const IrInstr *in, int64_t skip_r, uint32_t lead, int64_t lead_size,
          IrShape *inf)
{
    SlStatus st;
    const IrShape *l = opnd(in, 0), *r = opnd(in, 1);
    const int64_t *lb, *rb, *lc, *rc;
    uint32_t nb, nc;
    if ((st = pair_dims(ck, in, "batch", IR_ATTR_LHS_BATCH_DIMS, IR_ATTR_RHS_BATCH_DIMS, &lb, &rb,
                        &nb)) ||
        (st = pair_dims(ck, in, "contracting", IR_ATTR_LHS_CONTRACTING_DIMS,
                        IR_ATTR_RHS_CONTRACTING_DIMS, &lc, &rc, &nc)))
        return st;
    for (uint32_t i = 0; i < nb; i++)
        if (contains(lc, nc, lb[i]) || contains(rc, nc, rb[i]))
            return ck_bad(ck, in, "a dim is both batch and contracting");
    if (skip_r >= 0 && (contains(rb, nb, skip_r) || contains(rc, nc, skip_r)))
        return ck_bad(ck, in, "rhs group dim %lld is a batch or contracting dim",
                      (long long)skip_r);
    uint32_t rank = lead + l->rank + r->rank - nb - 2 * nc - (skip_r >= 0);
    if (!ck_new_shape(ck, in->shape.dtype, rank, inf))
        return ck_nomem(ck, in);
    uint32_t w = 0;
    for (uint32_t i = 0; i < lead; i++)
        inf->dims[w++] = lead_size;
    for (uint32_t i = 0; i < nb; i++)
        inf->dims[w++] = dim(l, (uint32_t)lb[i]);
    for (uint32_t i = 0; i < l->rank; i++)
        if (!contains(lb, nb, i) && !contains(lc, nc, i))
            inf->dims[w++] = dim(l, i);
    for (uint32_t i = 0; i < r->rank; i++)
        if (!contains(rb, nb, i) && !contains(rc, nc, i) && (int64_t)i != skip_r)
            inf->dims[w++] = dim(r, i);
    return SL_OK;
}

/* dot: output = batch dims, lhs free dims, rhs free dims. The result type is free (a
 * preferred element type may widen it). */
SlStatus
ck_check_dot(IrCheck *ck, const IrInstr *in)
{
    SlStatus st;
    IrShape inf;
    if ((st = ck_need_arrays(ck, in, 2)) || (st = dot_shape(ck, in, -1, 0, 0, &inf)))
        return st;
    return ck_expect(ck, in, &inf);
}

/* ragged-dot(lhs, rhs, group_sizes): one lhs_ragged_dims entry, and group_sizes an integer
 * [prefix..., G] whose prefix matches lhs's leading dims (the ragged dim after them). By
 * where the ragged dim is: non-contracting, the rhs has one group dim (rhs_group_dims, of
 * size G) and the result is the dot without it; contracting, the result is [G, dot...];
 * batch, the result is the dot. */
SlStatus
ck_check_ragged_dot(IrCheck *ck, const IrInstr *in)
{
    SlStatus st;
    if ((st = ck_need_arrays(ck, in, 3)))
        return st;
    const IrShape *l = opnd(in, 0), *r = opnd(in, 1), *gs = opnd(in, 2);
    const int64_t *lr, *lb, *lc, *rg;
    if (ir_instr_ints_attr(in, IR_ATTR_LHS_RAGGED_DIMS, &lr) != 1 || lr[0] < 0 ||
        lr[0] >= (int64_t)l->rank)
        return ck_bad(ck, in, "lhs_ragged_dims must name one dim of the lhs");
    char kind = ir_dtype_kind(gs->dtype);
    if ((kind != 'S' && kind != 'U') || gs->rank < 1 || gs->rank - 1 > (uint32_t)lr[0])
        return ck_bad(ck, in, "group_sizes must be an integer array [prefix..., G] with fewer "
                              "prefix dims than the ragged dim's position");
    uint32_t P = gs->rank - 1;
    for (uint32_t d = 0; d < P; d++)
        if (!dim_eq(dim(gs, d), dim(l, d)))
            return ck_bad(ck, in, "group_sizes dim %u is %lld but lhs dim %u is %lld", d,
                          (long long)dim(gs, d), d, (long long)dim(l, d));
    int64_t G = dim(gs, P);
    uint32_t nb = ir_instr_ints_attr(in, IR_ATTR_LHS_BATCH_DIMS, &lb);
    uint32_t nc = ir_instr_ints_attr(in, IR_ATTR_LHS_CONTRACTING_DIMS, &lc);
    uint32_t ng = ir_instr_ints_attr(in, IR_ATTR_RHS_GROUP_DIMS, &rg);
    bool is_batch = contains(lb, nb, lr[0]), is_contracting = contains(lc, nc, lr[0]);
    IrShape inf;
    if (is_batch || is_contracting) {
        if (ng)
            return ck_bad(ck, in, "rhs_group_dims with a ragged %s dim",
                          is_batch ? "batch" : "contracting");
        st = dot_shape(ck, in, -1, is_contracting, G, &inf);
    } else {
        if (ng != 1 || rg[0] < 0 || rg[0] >= (int64_t)r->rank)
            return ck_bad(ck, in, "a ragged non-contracting dim needs one rhs_group_dims entry");
        if (!dim_eq(dim(r, (uint32_t)rg[0]), G))
            return ck_bad(ck, in, "rhs group dim %lld is %lld but group_sizes has %lld groups",
                          (long long)rg[0], (long long)dim(r, (uint32_t)rg[0]), (long long)G);
        st = dot_shape(ck, in, rg[0], 0, 0, &inf);
    }
    return st ? st : ck_expect(ck, in, &inf);
}

/* Positions of the labelled dims in one group of dim_labels ("b01f", "01io", ...). */
typedef struct ConvDims {
    int batch, feature; /* 'b'/'f' in lhs and out, 'i'/'o' in rhs; -1 when absent */
    int spatial[10];    /* position of digit d; -1 when absent */
    int n_spatial;
    uint32_t rank;
} ConvDims;

static bool
parse_labels(SlStr s, char b, char f, ConvDims *out)
{
    memset(out, 0xff, sizeof(*out)); /* every position -1 */
    out->n_spatial = 0;
    out->rank = (uint32_t)s.len;
    for (size_t i = 0; i < s.len; i++) {
        char c = s.ptr[i];
        if (c == b && out->batch < 0)
            out->batch = (int)i;
        else if (c == f && out->feature < 0)
            out->feature = (int)i;
        else if (c >= '0' && c <= '9' && out->spatial[c - '0'] < 0) {
            out->spatial[c - '0'] = (int)i;
            out->n_spatial++;
        } else
            return false;
    }
    if (out->batch < 0 || out->feature < 0)
        return false;
    for (int d = 0; d < out->n_spatial; d++)
        if (out->spatial[d] < 0)
            return false;
    return true;
}

/* Splits "b01f_01io->b01f" into the three label groups. */
static bool
split_labels(SlStr t, ConvDims *l, ConvDims *r, ConvDims *o)
{
    const char *us = memchr(t.ptr, '_', t.len);
    const char *end = t.ptr + t.len;
    if (!us)
        return false;
    const char *arrow = NULL;
    for (const char *p = us; p + 1 < end; p++)
        if (p[0] == '-' && p[1] == '>')
            arrow = p;
    if (!arrow)
        return false;
    SlStr ls = {t.ptr, (size_t)(us - t.ptr)}, rs = {us + 1, (size_t)(arrow - us - 1)};
    SlStr os = {arrow + 2, (size_t)(end - arrow - 2)};
    return parse_labels(ls, 'b', 'f', l) && parse_labels(rs, 'o', 'i', r) &&
           parse_labels(os, 'b', 'f', o) && l->n_spatial == r->n_spatial &&
           l->n_spatial == o->n_spatial;
}

static SlStatus
conv_features(IrCheck *ck, const IrInstr *in, const ConvDims *l, const ConvDims *r, int64_t *batch)
{
    const IrShape *ls = opnd(in, 0), *rs = opnd(in, 1);
    int64_t fgc = 1, bgc = 1;
    ir_instr_int_attr(in, IR_ATTR_FEATURE_GROUP_COUNT, &fgc);
    ir_instr_int_attr(in, IR_ATTR_BATCH_GROUP_COUNT, &bgc);
    if (fgc < 1 || bgc < 1)
        return ck_bad(ck, in, "group counts must be positive");
    int64_t in_f = dim(ls, (uint32_t)l->feature), k_in = dim(rs, (uint32_t)r->feature);
    int64_t k_out = dim(rs, (uint32_t)r->batch), in_b = dim(ls, (uint32_t)l->batch);
    if (in_f != ANY_DIM && k_in != ANY_DIM && (in_f % fgc || in_f / fgc != k_in))
        return ck_bad(
            ck, in, "input features %lld / feature_group_count %lld != kernel input features %lld",
            (long long)in_f, (long long)fgc, (long long)k_in);
    if (k_out != ANY_DIM && (k_out % fgc || k_out % bgc))
        return ck_bad(ck, in, "kernel output features %lld not divisible by the group counts",
                      (long long)k_out);
    if (in_b != ANY_DIM && in_b % bgc)
        return ck_bad(ck, in, "batch %lld not divisible by batch_group_count %lld", (long long)in_b,
                      (long long)bgc);
    *batch = in_b == ANY_DIM ? ANY_DIM : in_b / bgc;
    return SL_OK;
}

SlStatus
ck_check_convolution(IrCheck *ck, const IrInstr *in)
{
    SlStatus st;
    if ((st = ck_need_arrays(ck, in, 2)))
        return st;
    const IrAttr *dl = ir_instr_find_attr(in, IR_ATTR_DIM_LABELS);
    if (!dl)
        return SL_OK; /* default dimension numbers: not checked */
    ConvDims l, r, o;
    if (!split_labels(dl->u.text, &l, &r, &o))
        return ck_bad(ck, in, "cannot read dim_labels=%.*s", SL_STR_ARG(dl->u.text));
    const IrShape *ls = opnd(in, 0), *rs = opnd(in, 1);
    if (l.rank != ls->rank || r.rank != rs->rank || o.rank != in->shape.rank)
        return ck_bad(ck, in, "dim_labels=%.*s do not match the operand and result ranks",
                      SL_STR_ARG(dl->u.text));
    const IrAttr *wa = ir_instr_find_attr(in, IR_ATTR_WINDOW);
    uint32_t nw = wa ? wa->u.window.n : 0;
    if (nw != (uint32_t)l.n_spatial)
        return ck_bad(ck, in, "window has %u dims but dim_labels have %d spatial dims", nw,
                      l.n_spatial);
    int64_t batch = 0;
    if ((st = conv_features(ck, in, &l, &r, &batch)))
        return st;
    IrShape inf;
    if (!ck_new_shape(ck, in->shape.dtype, o.rank, &inf))
        return ck_nomem(ck, in);
    inf.dims[o.batch] = batch;
    inf.dims[o.feature] = dim(rs, (uint32_t)r.batch); /* 'o' was parsed as the batch slot */
    for (int s = 0; s < l.n_spatial; s++) {
        const IrWindowDim *w = &wa->u.window.v[s];
        int64_t ks = dim(rs, (uint32_t)r.spatial[s]);
        if (ks != ANY_DIM && w->size != ks)
            return ck_bad(ck, in, "window size %lld in spatial dim %d != kernel size %lld",
                          (long long)w->size, s, (long long)ks);
        inf.dims[o.spatial[s]] = ck_window_out(dim(ls, (uint32_t)l.spatial[s]), w);
    }
    return ck_expect(ck, in, &inf);
}

/* ---- gather and scatter ----------------------------------------------------------------- */

/* Indices with the index vector dim made explicit: when index_vector_dim == rank the index
 * vector is an implicit trailing 1. Fills the batch dims (all dims but the index vector). */
static SlStatus
index_batch_dims(IrCheck *ck, const IrInstr *in, const IrShape *idx, int64_t ivd, int64_t **out,
                 uint32_t *n, int64_t *vec_len)
{
    char kind = ir_dtype_kind(idx->dtype);
    if (kind != 'S' && kind != 'U') /* pred is no index: XLA refuses it too */
        return ck_bad(ck, in, "indices must be integers, got %s", ir_dtype_name(idx->dtype));
    if (ivd < 0 || ivd > (int64_t)idx->rank)
        return ck_bad(ck, in, "index_vector_dim %lld out of range for indices of rank %u",
                      (long long)ivd, idx->rank);
    *out = SL_NEW_ARRAY(&ck->scratch, int64_t, idx->rank + 1);
    if (!*out)
        return ck_nomem(ck, in);
    *n = 0;
    *vec_len = 1;
    for (uint32_t i = 0; i < idx->rank; i++) {
        if ((int64_t)i == ivd)
            *vec_len = dim(idx, i);
        else
            (*out)[(*n)++] = dim(idx, i);
    }
    return SL_OK;
}

SlStatus
ck_check_gather(IrCheck *ck, const IrInstr *in)
{
    SlStatus st;
    if ((st = ck_need_arrays(ck, in, 2)))
        return st;
    const IrShape *op = opnd(in, 0), *idx = opnd(in, 1);
    const int64_t *off, *col, *sim, *obd, *ss;
    uint32_t n_off = ir_instr_ints_attr(in, IR_ATTR_OFFSET_DIMS, &off);
    uint32_t n_col = ir_instr_ints_attr(in, IR_ATTR_COLLAPSED_SLICE_DIMS, &col);
    uint32_t n_sim = ir_instr_ints_attr(in, IR_ATTR_START_INDEX_MAP, &sim);
    uint32_t n_obd = ir_instr_ints_attr(in, IR_ATTR_OPERAND_BATCHING_DIMS, &obd);
    uint32_t n_ss = ir_instr_ints_attr(in, IR_ATTR_SLICE_SIZES, &ss);
    int64_t ivd = idx->rank;
    ir_instr_int_attr(in, IR_ATTR_INDEX_VECTOR_DIM, &ivd);
    int64_t *bdims, vec;
    uint32_t nb;
    if ((st = index_batch_dims(ck, in, idx, ivd, &bdims, &nb, &vec)))
        return st;
    if (n_ss != op->rank)
        return ck_bad(ck, in, "slice_sizes has %u entries, operand rank is %u", n_ss, op->rank);
    if (vec != ANY_DIM && vec != (int64_t)n_sim)
        return ck_bad(ck, in, "start_index_map has %u entries but the index vector has %lld", n_sim,
                      (long long)vec);
    if ((st = ck_need_dims(ck, in, "start_index_map", sim, n_sim, op->rank)) ||
        (st = ck_need_dims(ck, in, "collapsed_slice_dims", col, n_col, op->rank)) ||
        (st = ck_need_dims(ck, in, "operand_batching_dims", obd, n_obd, op->rank)))
        return st;
    if (n_off + n_col + n_obd != op->rank)
        return ck_bad(ck, in,
                      "offset_dims (%u) + collapsed_slice_dims (%u) + operand_batching_dims "
                      "(%u) != operand rank %u",
                      n_off, n_col, n_obd, op->rank);
    IrShape inf;
    if (!ck_new_shape(ck, op->dtype, nb + n_off, &inf))
        return ck_nomem(ck, in);
    if ((st = ck_need_dims(ck, in, "offset_dims", off, n_off, inf.rank)))
        return st;
    uint32_t next_off = 0, next_batch = 0;
    for (uint32_t i = 0; i < inf.rank; i++) {
        if (!contains(off, n_off, i)) {
            inf.dims[i] = bdims[next_batch++];
            continue;
        }
        while (contains(col, n_col, next_off) || contains(obd, n_obd, next_off))
            next_off++;
        inf.dims[i] = ss[next_off++];
    }
    for (uint32_t i = 0; i < op->rank; i++) {
        bool folded = contains(col, n_col, i) || contains(obd, n_obd, i);
        if (ss[i] < 0 || (dim(op, i) != ANY_DIM && ss[i] > dim(op, i)) || (folded && ss[i] > 1))
            return ck_bad(ck, in, "slice size %lld does not fit operand dim %u", (long long)ss[i],
                          i);
    }
    return ck_expect(ck, in, &inf);
}

/* scatter(inputs..., indices, updates...): result = the inputs' shapes; the updates' scatter
 * dims follow the indices' batch dims and their window dims fit the operand. */
static SlStatus
check_scatter_updates(IrCheck *ck, const IrInstr *in, const IrShape *op, const IrShape *up,
                      const int64_t *bdims, uint32_t nb)
{
    const int64_t *uwd, *iwd, *ibd;
    uint32_t n_uwd = ir_instr_ints_attr(in, IR_ATTR_UPDATE_WINDOW_DIMS, &uwd);
    uint32_t n_iwd = ir_instr_ints_attr(in, IR_ATTR_INSERTED_WINDOW_DIMS, &iwd);
    uint32_t n_ibd = ir_instr_ints_attr(in, IR_ATTR_INPUT_BATCHING_DIMS, &ibd);
    SlStatus st;
    if ((st = ck_need_dims(ck, in, "update_window_dims", uwd, n_uwd, up->rank)))
        return st;
    if (up->rank != n_uwd + nb)
        return ck_bad(ck, in, "updates rank %u != update_window_dims (%u) + scatter dims (%u)",
                      up->rank, n_uwd, nb);
    if (n_uwd + n_iwd + n_ibd != op->rank)
        return ck_bad(ck, in,
                      "update_window_dims (%u) + inserted_window_dims (%u) + "
                      "input_batching_dims (%u) != operand rank %u",
                      n_uwd, n_iwd, n_ibd, op->rank);
    uint32_t next_op = 0, next_batch = 0;
    for (uint32_t i = 0; i < up->rank; i++) {
        int64_t u = dim(up, i);
        if (!contains(uwd, n_uwd, i)) {
            int64_t b = bdims[next_batch++];
            if (!dim_eq(u, b))
                return ck_bad(ck, in, "updates dim %u is %lld but the indices give %lld", i,
                              (long long)u, (long long)b);
            continue;
        }
        while (contains(iwd, n_iwd, next_op) || contains(ibd, n_ibd, next_op))
            next_op++;
        int64_t o = dim(op, next_op++);
        if (u != ANY_DIM && o != ANY_DIM && u > o)
            return ck_bad(ck, in, "updates window dim %u (%lld) exceeds operand dim %u (%lld)", i,
                          (long long)u, next_op - 1, (long long)o);
    }
    return SL_OK;
}

SlStatus
ck_check_scatter(IrCheck *ck, const IrInstr *in)
{
    SlStatus st;
    if (in->n_operands < 3 || in->n_operands % 2 == 0)
        return ck_bad(ck, in, "expects 2k+1 operands (inputs, indices, updates), got %u",
                      in->n_operands);
    uint32_t k = in->n_operands / 2;
    if ((st = ck_need_all_arrays(ck, in)))
        return st;
    const IrShape *idx = opnd(in, k);
    int64_t ivd = idx->rank, *bdims, vec;
    uint32_t nb;
    ir_instr_int_attr(in, IR_ATTR_INDEX_VECTOR_DIM, &ivd);
    if ((st = index_batch_dims(ck, in, idx, ivd, &bdims, &nb, &vec)))
        return st;
    const int64_t *sdod;
    uint32_t n_sdod = ir_instr_ints_attr(in, IR_ATTR_SCATTER_DIMS_TO_OPERAND_DIMS, &sdod);
    if (vec != ANY_DIM && vec != (int64_t)n_sdod)
        return ck_bad(ck, in,
                      "scatter_dims_to_operand_dims has %u entries but the index vector "
                      "has %lld",
                      n_sdod, (long long)vec);
    if ((st = ck_need_dims(ck, in, "scatter_dims_to_operand_dims", sdod, n_sdod,
                           opnd(in, 0)->rank)))
        return st;
    IrComputation *c;
    IrDtype *types = SL_NEW_ARRAY(&ck->scratch, IrDtype, k);
    IrShape *leaves = SL_NEW_ARRAY(&ck->scratch, IrShape, k);
    if (!types || !leaves)
        return ck_nomem(ck, in);
    for (uint32_t j = 0; j < k; j++) {
        if (!ck_same_dims(opnd(in, j), opnd(in, 0)))
            return ck_dims_mismatch(ck, in, 0, j);
        if ((st = check_scatter_updates(ck, in, opnd(in, j), opnd(in, k + 1 + j), bdims, nb)))
            return st;
        types[j] = opnd(in, j)->dtype;
        if (!ck_copy_shape(ck, opnd(in, j), &leaves[j]))
            return ck_nomem(ck, in);
    }
    if ((st = ck_need_called(ck, in, IR_ATTR_TO_APPLY, &c)) ||
        (st = ck_need_reducer(ck, in, c, types, k)))
        return st;
    return ck_expect_k(ck, in, leaves, k);
}
