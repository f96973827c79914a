/* driver.c - spmd_partition: builds the output module, visits computations reachable from
 * ENTRY (called computations in the context of their caller, D.17), dispatches every
 * instruction to its handler by IrOpFamily, reshards roots, runs the windowed-loop code
 * motion on each finished computation, and checks the result.
 * Owns: the dispatch table, visiting, default shardings (gspmd.md §0). Does not own: what a
 * handler emits, the per-run state handlers share (values, kept shardings, errors: ctx.c).
 * Invariant: visits follow IR order (deterministic). */
#include "spmd/spmd_int.h"

#include "spmd/dot_int.h"
#include "spmd/gather_int.h"
#include "spmd/origin_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- dispatch ---- */

/* One entry per family. The dot engine plugs in here: replace spmd_handle_default on the
 * DOT/CONVOLUTION/GATHER/SCATTER/REDUCE_WINDOW/SELECT_AND_SCATTER rows with its handlers. */
static const SpmdHandler k_handlers[] = {
    [IR_FAM_PARAMETER] = spmd_handle_parameter,
    [IR_FAM_CONSTANT] = spmd_handle_constant,
    [IR_FAM_IOTA] = spmd_handle_iota,
    [IR_FAM_PARTITION_ID] = spmd_handle_partition_id,
    [IR_FAM_ELEMENTWISE] = spmd_handle_elementwise,
    [IR_FAM_BITCAST_CONVERT] = spmd_handle_bitcast_convert,
    [IR_FAM_OPT_BARRIER] = spmd_handle_elementwise,
    [IR_FAM_BROADCAST] = spmd_handle_broadcast,
    [IR_FAM_RESHAPE] = spmd_handle_reshape,
    [IR_FAM_TRANSPOSE] = spmd_handle_transpose,
    [IR_FAM_SLICE] = spmd_handle_slice,
    [IR_FAM_CONCATENATE] = spmd_handle_concatenate,
    [IR_FAM_PAD] = spmd_handle_pad,
    [IR_FAM_DYNAMIC_SLICE] = spmd_handle_dynamic_slice,
    [IR_FAM_DYNAMIC_UPDATE_SLICE] = spmd_handle_dynamic_update_slice,
    [IR_FAM_REVERSE] = spmd_handle_reverse,
    [IR_FAM_REDUCE] = spmd_handle_reduce,
    [IR_FAM_REDUCE_WINDOW] = spmd_handle_reduce_window,
    [IR_FAM_SELECT_AND_SCATTER] = spmd_handle_select_and_scatter,
    [IR_FAM_SORT] = spmd_handle_sort,
    [IR_FAM_DOT] = spmd_handle_dot,
    [IR_FAM_CONVOLUTION] = spmd_handle_conv,
    [IR_FAM_GATHER] = spmd_handle_gather,
    [IR_FAM_SCATTER] = spmd_handle_scatter,
    [IR_FAM_CHOLESKY] = spmd_handle_cholesky,
    [IR_FAM_TRIANGULAR_SOLVE] = spmd_handle_cholesky,
    [IR_FAM_TUPLE] = spmd_handle_tuple,
    [IR_FAM_GET_TUPLE_ELEMENT] = spmd_handle_gte,
    [IR_FAM_WHILE] = spmd_handle_while,
    [IR_FAM_CONDITIONAL] = spmd_handle_conditional,
    [IR_FAM_CALL] = spmd_handle_call,
    [IR_FAM_CUSTOM_CALL] = spmd_handle_custom_call,
    [IR_FAM_ALL_REDUCE] = spmd_handle_all_reduce,
    [IR_FAM_COLLECTIVE] = NULL,
    [IR_FAM_COLLECTIVE_PERMUTE] = spmd_handle_collective_permute,
    [IR_FAM_SIDE_EFFECT] = spmd_handle_side_effect,
    [IR_FAM_RNG] = spmd_handle_rng,
    [IR_FAM_RAGGED_DOT] = spmd_handle_ragged_dot,
    [IR_FAM_SCAN] = spmd_handle_scan,
    [IR_FAM_OTHER] = NULL,
};

SpmdHandler
spmd_handler_for(IrOpFamily fam)
{
    return (unsigned)fam < SL_COUNTOF(k_handlers) ? k_handlers[fam] : NULL;
}

/* ---- visiting ---- */

static SlStatus
visit(SpmdCtx *cx, const IrInstr *hlo, SlError *err)
{
    SpmdHandler h = spmd_handler_for(ir_op_family(hlo->op));
    if (!h) {
        char msg[128];
        snprintf(msg, sizeof(msg), "no handler for %s: partitioned as replicated",
                 ir_op_name(hlo->op));
        spmd_warn(cx, TRACE_WARN_NO_HANDLER, msg);
        h = spmd_handle_default;
    }
    const ShdSharding *s = spmd_sharding_of(cx, hlo);
    if (!s)
        return spmd_nomem(cx, err);
    spmd_check_partitioned_op(cx, hlo, s);
    SlStatus st = h(cx, hlo, err);
    if (st == SL_OK && !spmd_get_value(cx, hlo))
        return spmd_fail(cx, err, SL_ERR_INTERNAL, "handler produced no value");
    return st == SL_OK ? spmd_record_origin(cx, hlo, err) : st;
}

static SlStatus
partition_as(SpmdCtx *cx, const IrComputation *c, SlSym name,
             const ShdSharding *const *param_shardings, uint32_t n_params,
             const ShdSharding *root_sharding, IrComputation **out, SlError *err)
{
    if (cx->depth > 64)
        return spmd_fail(cx, err, SL_ERR_UNSUPPORTED, "computations nested too deeply");
    IrComputation *saved_comp = cx->comp;
    const IrInstr *saved_visiting = cx->visiting;
    const ShdSharding *const *saved_ps = cx->param_shardings;
    uint32_t saved_nps = cx->n_param_shardings;
    IrComputation *oc = ir_computation_new(cx->out, name);
    if (!oc)
        return spmd_nomem(cx, err);
    oc->execution_thread = c->execution_thread;
    sl_map_put(&cx->comp_map, SL_MAP_KEY(c), SL_MAP_KEY(oc));
    cx->comp = oc;
    cx->param_shardings = param_shardings;
    cx->n_param_shardings = n_params;
    cx->depth++;
    SlStatus st = SL_OK;
    for (uint32_t k = 0; k < c->n_instrs && st == SL_OK; k++) {
        const IrInstr *hlo = c->instrs[k];
        cx->visiting = hlo;
        SlArenaMark scratch = sl_arena_mark(&cx->scratch);
        st = visit(cx, hlo, err);
        if (st == SL_OK && (sl_arena_failed(cx->arena) || sl_arena_failed(&cx->scratch)))
            st = spmd_nomem(cx, err);
        sl_arena_release(&cx->scratch, scratch);
    }
    const IrInstr *root = c->root ? c->root : (c->n_instrs ? c->instrs[c->n_instrs - 1] : NULL);
    if (st == SL_OK && root) {
        cx->visiting = root;
        const SpmdValue *rv = spmd_get_value(cx, root);
        SpmdValue r;
        st = rv ? spmd_reshard(cx, rv, root_sharding ? root_sharding : spmd_sharding_of(cx, root),
                               NULL, &r, err)
                : spmd_fail(cx, err, SL_ERR_INTERNAL, "root not partitioned");
        if (st == SL_OK)
            oc->root = r.hlo;
    }
    if (st == SL_OK && cx->n_wloops)
        st = spmd_windowed_code_motion(cx, oc, err);
    cx->depth--;
    cx->comp = saved_comp;
    cx->visiting = saved_visiting;
    cx->param_shardings = saved_ps;
    cx->n_param_shardings = saved_nps;
    if (st != SL_OK)
        return st;
    if (ir_module_add_computation(cx->out, oc) != SL_OK)
        return spmd_nomem(cx, err);
    *out = oc;
    return SL_OK;
}

SlStatus
spmd_partition_computation(SpmdCtx *cx, const IrComputation *c,
                           const ShdSharding *const *param_shardings, uint32_t n_params,
                           const ShdSharding *root_sharding, IrComputation **out, SlError *err)
{
    return partition_as(cx, c, c->name, param_shardings, n_params, root_sharding, out, err);
}

typedef struct SpmdCompVariant {
    const IrComputation *src;
    const ShdSharding *const *ps; /* n_params of them; an entry may be NULL (its own) */
    uint32_t n_params;
    const ShdSharding *root; /* NULL: the root's own */
    IrComputation *out;
    struct SpmdCompVariant *next;
} SpmdCompVariant;

static bool
same_or_null(const ShdSharding *a, const ShdSharding *b)
{
    return a == b || (a && b && shd_equal(a, b));
}

SlStatus
spmd_partition_called(SpmdCtx *cx, const IrComputation *c,
                      const ShdSharding *const *param_shardings, uint32_t n_params,
                      const ShdSharding *root_sharding, SlError *err)
{
    bool seen = false;
    for (SpmdCompVariant *v = cx->variants; v; v = v->next) {
        if (v->src != c)
            continue;
        seen = true;
        bool same = v->n_params == n_params && same_or_null(v->root, root_sharding);
        for (uint32_t k = 0; same && k < n_params; k++)
            same = same_or_null(v->ps[k], param_shardings[k]);
        if (same) {
            sl_map_put(&cx->comp_map, SL_MAP_KEY(c), SL_MAP_KEY(v->out));
            return SL_OK;
        }
    }
    SpmdCompVariant *v = SL_NEW(cx->arena, SpmdCompVariant);
    const ShdSharding **ps = SL_NEW_ARRAY(cx->arena, const ShdSharding *, n_params ? n_params : 1);
    if (!v || !ps)
        return spmd_nomem(cx, err);
    for (uint32_t k = 0; k < n_params; k++)
        ps[k] = param_shardings[k];
    SlSym name = seen ? spmd_unique_name(cx, sl_sym_str(c->name)) : c->name;
    if (!name)
        return spmd_nomem(cx, err);
    IrComputation *oc = NULL;
    SlStatus st = partition_as(cx, c, name, ps, n_params, root_sharding, &oc, err);
    if (st != SL_OK)
        return st;
    *v = (SpmdCompVariant){c, ps, n_params, root_sharding, oc, cx->variants};
    cx->variants = v;
    sl_map_put(&cx->comp_map, SL_MAP_KEY(c), SL_MAP_KEY(oc));
    return SL_OK;
}

/* ---- module-level steps ---- */

static int64_t
max_channel_id(const IrModule *m)
{
    int64_t mx = 0, v = 0;
    for (uint32_t c = 0; c < m->n_comps; c++)
        for (uint32_t i = 0; i < m->comps[c]->n_instrs; i++)
            if (ir_instr_int_attr(m->comps[c]->instrs[i], IR_ATTR_CHANNEL_ID, &v) && v > mx)
                mx = v;
    return mx;
}

/* entry_computation_layout={(p0, p1)->root} with local shapes. */
static SlStatus
rewrite_layout(SpmdCtx *cx, const IrComputation *oc)
{
    if (!ir_module_find_header(cx->in, "entry_computation_layout"))
        return SL_OK;
    SlBuf b;
    sl_buf_init(&b);
    sl_buf_puts(&b, "{(");
    uint32_t np = ir_computation_param_count(oc);
    for (uint32_t k = 0; k < np; k++) {
        const IrInstr *p = ir_computation_param(oc, k);
        if (k)
            sl_buf_puts(&b, ", ");
        if (p)
            ir_shape_print(&p->shape, true, &b);
    }
    sl_buf_puts(&b, ")->");
    if (oc->root)
        ir_shape_print(&oc->root->shape, true, &b);
    sl_buf_putc(&b, '}');
    SlStatus st = b.failed ? SL_ERR_NOMEM
                           : ir_module_set_header(cx->out, "entry_computation_layout", sl_buf_str(&b));
    sl_buf_fini(&b);
    return st;
}

/* Every operand precedes its user in the same computation. */
static SlStatus
verify_order(const IrModule *m, SlError *err)
{
    bool *seen = calloc(m->next_instr_id ? m->next_instr_id : 1, sizeof(bool));
    if (!seen)
        return sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){NULL, 0, 0}, "out of memory");
    SlStatus st = SL_OK;
    for (uint32_t c = 0; c < m->n_comps && st == SL_OK; c++) {
        const IrComputation *comp = m->comps[c];
        for (uint32_t i = 0; i < comp->n_instrs && st == SL_OK; i++) {
            const IrInstr *ins = comp->instrs[i];
            for (uint32_t o = 0; o < ins->n_operands; o++) {
                const IrInstr *op = ins->operands[o];
                if (op->id >= m->next_instr_id || !seen[op->id]) {
                    SlSrcLoc l = {NULL, 0, 0};
                    st = sl_fail(err, SL_ERR_INTERNAL, l,
                                 "partitioned %%%s uses %%%s before it is defined in %s",
                                 sl_sym_cstr(ins->name), sl_sym_cstr(op->name),
                                 sl_sym_cstr(comp->name));
                    break;
                }
            }
            if (ins->id < m->next_instr_id)
                seen[ins->id] = true;
        }
        if (st == SL_OK && comp->n_instrs && !comp->root)
            st = sl_fail(err, SL_ERR_INTERNAL, (SlSrcLoc){NULL, 0, 0}, "%s has no root",
                         sl_sym_cstr(comp->name));
    }
    free(seen);
    return st;
}

static void
ctx_fini(SpmdCtx *cx)
{
    sl_arena_fini(&cx->scratch);
    free(cx->values);
    free(cx->bcast_dims);
    free((void *)cx->out_shardings);
    sl_map_fini(&cx->comp_map);
    sl_map_fini(&cx->reshard_cache);
    sl_map_fini(&cx->kept_shardings);
    sl_arena_fini(&cx->kept_arena);
    spmd_names_fini(cx);
    free(cx->wloops);
}

static bool
has_unbounded_dim(const IrShape *s)
{
    for (uint32_t e = 0; e < s->n_elems; e++)
        if (has_unbounded_dim(&s->elems[e]))
            return true;
    for (uint32_t d = 0; s->dim_kinds && d < s->rank; d++)
        if (s->dim_kinds[d] == IR_DIM_UNBOUNDED)
            return true;
    return false;
}

/* Unbounded dims ('?') have no size to split, pad or count bytes by: refused up front, naming
 * the first instruction (bounded dims, '<=N', are partitioned at their bound). */
static SlStatus
refuse_unbounded(SpmdCtx *cx, SlError *err)
{
    for (uint32_t c = 0; c < cx->in->n_comps; c++) {
        const IrComputation *comp = cx->in->comps[c];
        for (uint32_t i = 0; i < comp->n_instrs; i++) {
            if (!has_unbounded_dim(&comp->instrs[i]->shape))
                continue;
            cx->visiting = comp->instrs[i];
            SlBuf b;
            sl_buf_init(&b);
            ir_shape_print(&cx->visiting->shape, false, &b);
            SlStatus st = spmd_fail(cx, err, SL_ERR_UNSUPPORTED,
                                    "shape %s has an unbounded dimension ('?'): the partitioner "
                                    "takes static and bounded shapes only",
                                    b.data ? b.data : "?");
            sl_buf_fini(&b);
            return st;
        }
    }
    return SL_OK;
}

SlStatus
spmd_partition(const IrModule *in, const SpmdOptions *opts, TraceSink *sink, SlArena *out_arena,
               IrModule **out, SlError *err)
{
    *out = NULL;
    SpmdOptions defaults;
    if (!opts) {
        spmd_options_init(&defaults);
        opts = &defaults;
    }
    if (!in->entry)
        return sl_fail(err, SL_ERR_INVALID, (SlSrcLoc){NULL, 0, 0}, "module has no ENTRY");
    SpmdCtx cx;
    memset(&cx, 0, sizeof(cx));
    cx.in = in;
    cx.arena = out_arena;
    sl_arena_init(&cx.scratch);
    /* a first chunk that every per-instruction release keeps: a release back to an empty
     * arena would free the chunk, and the next instruction would calloc (zero) a new one */
    (void)sl_arena_alloc(&cx.scratch, 1, 1);
    cx.opts = opts;
    cx.trace = sink ? sink : trace_null_sink();
    cx.num_partitions = opts->num_partitions > 0 ? opts->num_partitions
                                                  : ir_module_num_partitions(in);
    if (cx.num_partitions < 1)
        cx.num_partitions = 1;
    cx.next_channel_id = max_channel_id(in) + 1;
    cx.allow_full_replication = true;
    cx.root_state.num_partitions = cx.num_partitions;
    cx.root_state.group_size = cx.num_partitions;
    cx.root_state.memo = &cx.root_memo;
    cx.state = &cx.root_state;
    sl_map_init(&cx.comp_map);
    sl_map_init(&cx.reshard_cache);
    sl_map_init(&cx.kept_shardings);
    sl_arena_init(&cx.kept_arena);
    cx.n_values = in->next_instr_id;
    cx.values = calloc(cx.n_values ? cx.n_values : 1, sizeof(SpmdValue));
    cx.out = cx.values ? ir_module_new(out_arena, in->names, in->name) : NULL;
    if (!cx.out) {
        ctx_fini(&cx);
        return sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){NULL, 0, 0}, "out of memory");
    }
    SlStatus st = SL_OK;
    for (uint32_t k = 0; k < in->n_header && st == SL_OK; k++)
        st = ir_module_set_header(cx.out, sl_sym_cstr(in->header[k].key), in->header[k].value);
    if (st == SL_OK && opts->num_partitions > 0) {
        char buf[32];
        snprintf(buf, sizeof(buf), "%lld", (long long)cx.num_partitions);
        st = ir_module_set_header(cx.out, "num_partitions", sl_str(buf));
    }
    if (st == SL_OK && !spmd_names_init(&cx))
        st = sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){NULL, 0, 0}, "out of memory");
    IrComputation *entry = NULL;
    if (st == SL_OK)
        st = refuse_unbounded(&cx, err);
    if (st == SL_OK)
        spmd_check_input(&cx);
    if (st == SL_OK)
        st = spmd_partition_computation(&cx, in->entry, NULL, 0, NULL, &entry, err);
    if (st == SL_OK) {
        entry->is_entry = true;
        cx.out->entry = entry;
        st = rewrite_layout(&cx, entry);
    }
    if (st == SL_OK && sl_arena_failed(out_arena))
        st = sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){NULL, 0, 0}, "out of memory");
    if (st == SL_OK)
        st = verify_order(cx.out, err);
    /* XLA's pass ends with the same cleanup: handlers clone every source instruction and
     * build index arithmetic eagerly, and what no fast path read is dropped here. */
    if (st == SL_OK && opts->remove_dead_code) {
        /* XLA's order: dead code, tuple simplification, dead code, CSE (whose replaced
         * instructions the last sweep drops). */
        (void)ir_module_remove_dead(cx.out, &cx.scratch, NULL);
        if (ir_module_simplify_tuples(cx.out, &cx.scratch, shd_equal) > 0)
            (void)ir_module_remove_dead(cx.out, &cx.scratch, NULL);
        if (ir_module_cse(cx.out, &cx.scratch, cx.out_shardings, cx.cap_out_shardings,
                          shd_equal) > 0)
            (void)ir_module_remove_dead(cx.out, &cx.scratch, NULL);
    }
    if (st == SL_OK && !spmd_names_sync(&cx))
        st = sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){NULL, 0, 0}, "out of memory");
    ctx_fini(&cx);
    if (st != SL_OK) {
        if (err->status == SL_OK)
            sl_fail(err, st, (SlSrcLoc){NULL, 0, 0}, "partitioning failed");
        ir_module_fini(cx.out);
        return st;
    }
    *out = cx.out;
    return SL_OK;
}
