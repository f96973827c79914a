/* ctx.c - the partitioner's per-run state that every handler reads and writes: the value map
 * (source instruction -> its partitioned value), the kept-sharding table, and error and
 * warning reporting. Owns: those three. Does not own: dispatch or visiting (driver.c), what a
 * handler emits. It sits below the handlers and the driver, so that neither has to include
 * the other to reach the state they share. */
#include "spmd/spmd_int.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* ---- values ---- */

/* Values live in an array by source instruction id (ids are dense per module): a store and a
 * load instead of a hash-map insert and probe per operand. */
void
spmd_set_result(SpmdCtx *cx, const IrInstr *src, const SpmdValue *v)
{
    if (SL_NEVER(src->id >= cx->n_values || !v->hlo))
        return;
    cx->values[src->id] = *v;
    spmd_note_sharding(cx, v->hlo, v->sharding);
}

const SpmdValue *
spmd_get_value(const SpmdCtx *cx, const IrInstr *src)
{
    if (src->id >= cx->n_values || !cx->values[src->id].hlo)
        return NULL;
    return &cx->values[src->id];
}

const ShdSharding *
spmd_sharding_of(SpmdCtx *cx, const IrInstr *src)
{
    const ShdSharding *s = ir_instr_sharding(src);
    if (s && s->kind != SHD_UNKNOWN)
        return s;
    if (src->op == IR_OP_RNG)
        return shd_maximal(cx->arena, 0);
    return shd_replicated(cx->arena);
}

/* ---- kept shardings ---- */

static uint64_t
mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

static uint64_t
sharding_hash(const ShdSharding *s)
{
    uint64_t h = mix(0, (uint64_t)s->n_tile_dims);
    for (uint32_t k = 0; k < s->n_tile_dims; k++)
        h = mix(h, (uint64_t)s->tile_dims[k]);
    int64_t n = shd_device_count(s);
    for (int64_t k = 0; k < n; k++)
        h = mix(h, (uint64_t)s->devices[k]);
    for (uint32_t k = 0; k < s->n_subgroups; k++)
        h = mix(h, (uint64_t)s->subgroups[k]);
    h = mix(h, (uint64_t)s->has_iota);
    return h == SL_MAP_EMPTY ? 0 : h;
}

static bool
same_ints(const int64_t *a, const int64_t *b, uint32_t n)
{
    return a == b || (a && b && !memcmp(a, b, (size_t)n * sizeof(int64_t)));
}

/* shd_equal plus everything printing looks at (the iota form), so that a kept sharding
 * prints exactly like the one it stands for (traces print reshard shardings). */
static bool
same_sharding(const ShdSharding *a, const ShdSharding *b)
{
    if (!shd_equal(a, b) || a->has_iota != b->has_iota || a->metadata.len || b->metadata.len)
        return false;
    if (!a->has_iota)
        return true;
    const IrIota *x = &a->iota, *y = &b->iota;
    return x->n_dims == y->n_dims && x->n_reshape == y->n_reshape &&
           same_ints(x->dims, y->dims, x->n_dims) &&
           same_ints(x->reshape, y->reshape, x->n_reshape) &&
           (!x->perm) == (!y->perm) && same_ints(x->perm, y->perm, x->n_reshape);
}

static bool
keepable(const ShdSharding *s)
{
    return s->kind == SHD_TILED && s->metadata.len == 0 && s->shard_group_kind == 0;
}

const ShdSharding *
spmd_keep_sharding(SpmdCtx *cx, SlArenaMark mark, const ShdSharding *s)
{
    if (!s || !keepable(s) || sl_arena_failed(cx->arena))
        return s;
    uint64_t h = sharding_hash(s), v = 0;
    const ShdSharding *k = NULL;
    if (sl_map_get(&cx->kept_shardings, h, &v)) {
        k = (const ShdSharding *)(uintptr_t)v;
        if (!same_sharding(k, s))
            return s; /* a different sharding with the same hash: the first one stays */
    } else {
        k = shd_tiled(&cx->kept_arena, s->tile_dims, s->n_tile_dims, s->devices, s->subgroups,
                      s->n_subgroups);
        if (!k || !same_sharding(k, s) || !sl_map_put(&cx->kept_shardings, h, SL_MAP_KEY(k)))
            return s;
    }
    sl_arena_release(cx->arena, mark);
    return k;
}

IrShape
spmd_local_shape(SpmdCtx *cx, const IrShape *base, const ShdSharding *s)
{
    if (!s || (!shd_is_tiled(s) && s->kind != SHD_TUPLE))
        return ir_shape_clone(cx->arena, base);
    return shd_tile_shape(cx->arena, base, s);
}

SpmdValue
spmd_value(SpmdCtx *cx, IrInstr *hlo, const IrShape *base, const ShdSharding *s)
{
    SpmdValue v = {hlo, base, s, cx->state};
    return v;
}

/* ---- errors ---- */

static SlSrcLoc
loc_of(const SpmdCtx *cx)
{
    SlSrcLoc l = {NULL, 0, 0};
    if (cx->visiting) {
        l.line = cx->visiting->src_line;
        l.col = cx->visiting->src_col;
    }
    return l;
}

SlStatus
spmd_nomem(SpmdCtx *cx, SlError *err)
{
    return sl_fail(err, SL_ERR_NOMEM, loc_of(cx), "out of memory while partitioning %s",
                   cx->visiting ? sl_sym_cstr(cx->visiting->name) : "the module");
}

SlStatus
spmd_fail(SpmdCtx *cx, SlError *err, SlStatus st, const char *fmt, ...)
{
    char msg[SL_ERROR_MSG_BYTES];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return sl_fail(err, st, loc_of(cx), "%%%s (%s): %s",
                   cx->visiting ? sl_sym_cstr(cx->visiting->name) : "?",
                   cx->visiting ? ir_op_name(cx->visiting->op) : "module", msg);
}

void
spmd_warn(SpmdCtx *cx, TraceWarnKind kind, const char *message)
{
    if (cx->trace->ops->warning)
        cx->trace->ops->warning(cx->trace, cx->visiting, kind, message);
}
