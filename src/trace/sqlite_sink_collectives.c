/* sqlite_sink_collectives.c - the windowed_loop, while_loop, collective and collective_group
 * rows: every collective of the output module with its kind, its S (bytes), its device groups
 * and how often it runs (trip counts through loops, conditionals and calls).
 * Invariant: one collective row per collective instruction of the printed module. */
#include <stdio.h>
#include <string.h>

#include "trace/sqlite_sink_int.h"

/* The conditional a loop event's true_branch_runs speaks of: the only conditional directly in
 * the loop's body, a predicated one (true_computation, false_computation). NULL when the event
 * states no count or the body does not have exactly one such conditional. */
static const IrInstr *
hinted_conditional(Wr *w, const EvLoop *l)
{
    if (l->true_branch_runs <= 0 || l->true_branch_runs > l->iterations)
        return NULL;
    uint32_t id = wr_resolve(w, AFTER, l->loop);
    const IrInstr *loop = id == UINT32_MAX ? NULL : w->instr_by_id[AFTER][id];
    const IrAttr *body =
        loop && loop->op == IR_OP_WHILE ? ir_instr_find_attr(loop, IR_ATTR_BODY) : NULL;
    const IrInstr *found = NULL;
    for (uint32_t k = 0; body && body->u.comp && k < body->u.comp->n_instrs; k++) {
        const IrInstr *i = body->u.comp->instrs[k];
        if (i->op != IR_OP_CONDITIONAL)
            continue;
        bool is_pred = ir_instr_find_attr(i, IR_ATTR_TRUE_COMPUTATION) != NULL;
        if (found || !is_pred || i->id >= w->n_ids[AFTER])
            return NULL;
        found = i;
    }
    return found;
}

void
wr_write_loops(Wr *w)
{
    const EvLoop *ev = w->db->loops.data;
    sqlite3_stmt *st = wr_stmt(w, ST_LOOP);
    for (size_t k = 0; k < w->db->loops.len && w->rc == SQLITE_OK; k++) {
        const EvLoop *l = &ev[k];
        wr_bind_i64(w, st, 1, w->run_id);
        wr_bind_row(w, st, 2, wr_row_of(w, BEFORE, l->dot));
        wr_bind_row(w, st, 3, wr_row_of(w, AFTER, l->loop));
        wr_bind_text(w, st, 4, sl_sym_cstr(l->loop.name));
        wr_bind_text(w, st, 5, l->variant);
        wr_bind_i64(w, st, 6, l->iterations);
        wr_bind_i64(w, st, 7, l->bytes_per_iteration);
        (void)wr_insert(w, ST_LOOP);
        if (l->loop.name && l->iterations >= 0)
            wr_put(w, &w->loop_trips, SL_MAP_KEY(l->loop.name), (uint64_t)l->iterations);
        const IrInstr *cond = hinted_conditional(w, l);
        if (cond)
            wr_put(w, &w->branch_hint, cond->id, (uint64_t)k + 1);
    }
}

/* ---- collectives: kind, S, device groups, trip counts --------------------------------- */

typedef enum CollBytes {
    CB_OPERANDS,      /* S = all operands (all-reduce, reduce-scatter, all-to-all, broadcast) */
    CB_FIRST_OPERAND, /* S = operand 0 (collective-permute, ragged all-to-all) */
    CB_GATHERED,      /* S = operands x group size (all-gather: the gathered buffer) */
} CollBytes;

static const struct {
    IrOp op;
    const char *kind;
    CollBytes bytes;
} k_collectives[] = {
    {IR_OP_ALL_GATHER,               "all-gather",           CB_GATHERED     },
    {IR_OP_ALL_GATHER_START,         "all-gather",           CB_GATHERED     },
    {IR_OP_REDUCE_SCATTER,           "reduce-scatter",       CB_OPERANDS     },
    {IR_OP_ALL_REDUCE,               "all-reduce",           CB_OPERANDS     },
    {IR_OP_ALL_REDUCE_START,         "all-reduce",           CB_OPERANDS     },
    {IR_OP_ALL_TO_ALL,               "all-to-all",           CB_OPERANDS     },
    {IR_OP_RAGGED_ALL_TO_ALL,        "all-to-all",           CB_FIRST_OPERAND},
    {IR_OP_COLLECTIVE_PERMUTE,       "collective-permute",   CB_FIRST_OPERAND},
    {IR_OP_COLLECTIVE_PERMUTE_START, "collective-permute",   CB_FIRST_OPERAND},
    {IR_OP_COLLECTIVE_BROADCAST,     "collective-broadcast", CB_OPERANDS     },
};

static int
collective_row(IrOp op)
{
    for (size_t k = 0; k < SL_COUNTOF(k_collectives); k++)
        if (k_collectives[k].op == op)
            return (int)k;
    return -1;
}

/* Exact bytes: sub-byte types count packed, so s4[3] is 1.5 bytes. */
static double
exact_bytes(const IrShape *s)
{
    if (ir_shape_is_tuple(s)) {
        double total = 0;
        for (uint32_t k = 0; k < s->n_elems; k++)
            total += exact_bytes(&s->elems[k]);
        return total;
    }
    if (!ir_shape_is_array(s))
        return 0;
    double n = 1;
    for (uint32_t k = 0; k < s->rank; k++)
        n *= (double)s->dims[k];
    return n * ir_dtype_bits(s->dtype) / 8.0;
}

static double
full_bytes(const IrInstr *i, CollBytes how, int64_t group_size)
{
    uint32_t n = how == CB_FIRST_OPERAND && i->n_operands > 1 ? 1 : i->n_operands;
    double s = 0;
    for (uint32_t k = 0; k < n; k++)
        if (i->operands[k])
            s += exact_bytes(&i->operands[k]->shape);
    return how == CB_GATHERED ? s * (double)group_size : s;
}

/* Device groups as flat ids; collective-permute: one (source, target) group per pair. */
typedef struct Groups {
    uint32_t n;      /* groups */
    uint32_t *sizes; /* n sizes */
    int64_t *ids;    /* concatenated groups */
    int64_t group_size;
} Groups;

static bool
permute_groups(Wr *w, const IrInstr *i, Groups *g)
{
    const IrAttr *a = ir_instr_find_attr(i, IR_ATTR_SOURCE_TARGET_PAIRS);
    uint32_t n = a ? a->u.lists.n : 0;
    g->group_size = 2;
    g->sizes = SL_NEW_ARRAY(&w->scratch, uint32_t, n + 1);
    g->ids = SL_NEW_ARRAY(&w->scratch, int64_t, 2 * (size_t)n + 1);
    if (!g->sizes || !g->ids)
        return false;
    size_t off = 0;
    for (uint32_t k = 0; k < n; k++) {
        if (a->u.lists.sizes[k] == 2) { /* anything else is not a pair: skip it */
            g->sizes[g->n] = 2;
            g->ids[2 * g->n] = a->u.lists.v[off];
            g->ids[2 * g->n + 1] = a->u.lists.v[off + 1];
            g->n++;
        }
        off += a->u.lists.sizes[k];
    }
    return true;
}

static bool
replica_groups(Wr *w, const IrInstr *i, Groups *g)
{
    const IrAttr *a = ir_instr_find_attr(i, IR_ATTR_REPLICA_GROUPS);
    const IrReplicaGroups *rg = a ? a->u.groups : NULL;
    if (rg && rg->is_iota && rg->iota.n_dims == 2) {
        int64_t total = ir_iota_count(&rg->iota);
        int64_t n = rg->iota.dims[0];
        if (n <= 0 || n > UINT32_MAX || total != n * rg->iota.dims[1])
            return true; /* malformed: no groups */
        g->ids = SL_NEW_ARRAY(&w->scratch, int64_t, (size_t)total);
        g->sizes = SL_NEW_ARRAY(&w->scratch, uint32_t, (size_t)n);
        if (!g->ids || !g->sizes)
            return false;
        ir_iota_expand(&rg->iota, g->ids);
        g->n = (uint32_t)n;
        g->group_size = rg->iota.dims[1];
        for (uint32_t k = 0; k < g->n; k++)
            g->sizes[k] = (uint32_t)g->group_size;
        return true;
    }
    if (rg && !rg->is_iota && rg->n_groups > 0) {
        g->n = rg->n_groups;
        g->sizes = rg->group_sizes;
        g->ids = rg->ids;
        for (uint32_t k = 0; k < g->n; k++) /* the largest; costs use each group's size */
            if (rg->group_sizes[k] > g->group_size)
                g->group_size = rg->group_sizes[k];
        return true;
    }
    /* Absent or "{}": one group of every device. */
    int64_t n = w->db->info.num_partitions > 0 ? w->db->info.num_partitions : 1;
    g->ids = SL_NEW_ARRAY(&w->scratch, int64_t, (size_t)n);
    g->sizes = SL_NEW_ARRAY(&w->scratch, uint32_t, 1);
    if (!g->ids || !g->sizes)
        return false;
    for (int64_t d = 0; d < n; d++)
        g->ids[d] = d;
    g->n = 1;
    g->sizes[0] = (uint32_t)n;
    g->group_size = n;
    return true;
}

enum { TRIP_UNSEEN = -2, TRIP_UNKNOWN = -1 };

/* Executions of a computation per run of the module: `exact` when known; `max` bounds it
 * (equal to `exact` when that is known; TRIP_UNKNOWN: unbounded). */
typedef struct Trips {
    int64_t exact, max;
} Trips;

/* A while of the output module and its trip count (a while_loop row). */
typedef struct WhileRow {
    const IrInstr *w;
    IrTripCount tc;     /* count -1: unknown; reason says why, or how it was found */
    const char *method; /* backend_config, pattern, user, partitioner, unknown */
    Trips runs;         /* executions of the while itself */
    uint32_t outer;     /* index + 1 into Wr.whiles of the loop around it; 0: none */
    int64_t row;
} WhileRow;

/* The trip count of output while `i` (recorded in w->whiles): the user's count for the input
 * while it derives from; else backend_config or the pattern (ir_while_trip_count), on the
 * output loop, else on that input while (whose names the reason then gives); else the
 * iterations the partitioner stated for a windowed loop it emitted. */
static int64_t
while_count(Wr *w, const IrInstr *i, Trips runs)
{
    uint32_t outer = i->parent && w->comp_loop ? w->comp_loop[i->parent->id] : 0;
    WhileRow r = {i, {0}, NULL, runs, outer, 0};
    ir_while_trip_count(w->mod[AFTER], i, &r.tc);
    r.method = ir_trip_method_name(r.tc.method);
    const IrInstr *src =
        i->derived_from && i->derived_from->op == IR_OP_WHILE ? i->derived_from : i;
    if (r.tc.method == IR_TRIP_UNKNOWN && src != i && src->id < w->n_ids[BEFORE] &&
        w->instr_by_id[BEFORE][src->id] == src) /* the input's loop: its count, or its names */
        ir_while_trip_count(w->mod[BEFORE], src, &r.tc);
    r.method = ir_trip_method_name(r.tc.method);
    const TraceRunInfo *info = &w->db->info;
    for (uint32_t k = 0; src->name && k < info->n_trip_counts; k++) {
        if (strcmp(sl_sym_cstr(src->name), info->trip_counts[k].name) != 0)
            continue;
        r.tc.count = info->trip_counts[k].count;
        r.method = "user";
        snprintf(r.tc.reason, sizeof(r.tc.reason), "--trip-count %s=%lld",
                 info->trip_counts[k].name, (long long)r.tc.count);
    }
    uint64_t v = 0;
    if (r.tc.count < 0 && i->name && sl_map_get(&w->loop_trips, SL_MAP_KEY(i->name), &v)) {
        r.tc.count = (int64_t)v;
        r.method = "partitioner";
        snprintf(r.tc.reason, sizeof(r.tc.reason),
                 "the windowed-einsum loop states %lld iterations", (long long)v);
    }
    if (!SL_VEC_PUSH(&w->whiles, WhileRow, r))
        w->oom = true;
    return r.tc.count;
}

static int64_t
trip_mul(int64_t t, int64_t n)
{
    if (t < 0 || n < 0 || (n > 0 && t > INT64_MAX / n))
        return TRIP_UNKNOWN;
    return t * n;
}

static int64_t
trip_sum(int64_t t, int64_t v)
{
    if (t == TRIP_UNSEEN)
        return v;
    if (t == TRIP_UNKNOWN || v == TRIP_UNKNOWN || t > INT64_MAX - v)
        return TRIP_UNKNOWN;
    return t + v;
}

/* A computation called from several places runs once per call: the counts add up. */
static void
trip_add(Trips *trips, uint32_t n_comps, const IrComputation *c, Trips v)
{
    if (!c || c->id >= n_comps)
        return;
    trips[c->id].exact = trip_sum(trips[c->id].exact, v.exact);
    trips[c->id].max = trip_sum(trips[c->id].max, v.max);
}

/* Branch `b` of a conditional that runs `t` times. The predicate is data, so in general only
 * "at most t" is known (gspmd.md H.4); a windowed loop that states how often its body's
 * conditional takes the true branch makes both branches exact. */
static Trips
branch_trips(const EvLoop *hint, Trips t, uint32_t b)
{
    Trips bound = {TRIP_UNKNOWN, t.max};
    if (!hint || b > 1 || t.exact < 0 || hint->iterations <= 0 || t.exact % hint->iterations)
        return bound;
    int64_t loop_runs = t.exact / hint->iterations;
    int64_t runs = b == 0 ? hint->true_branch_runs : hint->iterations - hint->true_branch_runs;
    int64_t exact = trip_mul(loop_runs, runs);
    return exact < 0 ? bound : (Trips){exact, exact};
}

static bool
is_branch_attr(IrAttrKey key)
{
    return key == IR_ATTR_TRUE_COMPUTATION || key == IR_ATTR_FALSE_COMPUTATION ||
           key == IR_ATTR_BRANCH_COMPUTATIONS;
}

/* The trips of each callee of `i`, an instruction of a computation that runs `t` times. */
static void
add_callee_trips(Wr *w, const IrInstr *i, Trips t, Trips *trips, uint32_t n)
{
    int64_t loop = TRIP_UNKNOWN;
    uint64_t v = 0;
    if (i->op == IR_OP_WHILE)
        loop = while_count(w, i, t);
    uint32_t in_loop = i->op == IR_OP_WHILE ? (uint32_t)w->whiles.len
                       : i->parent && i->parent->id < n ? w->comp_loop[i->parent->id]
                                                         : 0;
    const EvLoop *hint = NULL;
    if (i->op == IR_OP_CONDITIONAL && sl_map_get(&w->branch_hint, i->id, &v))
        hint = &((const EvLoop *)w->db->loops.data)[v - 1];
    for (uint16_t a = 0; a < i->n_attrs; a++) {
        const IrAttr *at = &i->attrs[a];
        if (at->key >= IR_ATTR_OTHER)
            continue;
        IrAttrKind kind = ir_attr_kind(at->key);
        uint32_t n_callees = kind == IR_AK_COMP ? 1 : kind == IR_AK_COMPS ? at->u.comps.n : 0;
        for (uint32_t q = 0; q < n_callees; q++) {
            const IrComputation *callee = kind == IR_AK_COMP ? at->u.comp : at->u.comps.v[q];
            Trips c = t;
            if (i->op == IR_OP_WHILE && at->key == IR_ATTR_BODY)
                c = (Trips){trip_mul(t.exact, loop), trip_mul(t.max, loop)};
            else if (i->op == IR_OP_WHILE && at->key == IR_ATTR_CONDITION)
                c = (Trips){trip_mul(t.exact, loop < 0 ? loop : loop + 1),
                            trip_mul(t.max, loop < 0 ? loop : loop + 1)};
            else if (i->op == IR_OP_CONDITIONAL && is_branch_attr(at->key))
                c = branch_trips(hint, t,
                                 at->key == IR_ATTR_FALSE_COMPUTATION  ? 1
                                 : at->key == IR_ATTR_TRUE_COMPUTATION ? 0
                                                                       : q);
            trip_add(trips, n, callee, c);
            if (callee && callee->id < n && !w->comp_loop[callee->id])
                w->comp_loop[callee->id] = in_loop;
        }
    }
}

/* Executions of each computation per run of the module, by computation id: the entry runs
 * once; a while body runs trip-count times (while_count), its condition once more; a
 * conditional's branches at most as often as the conditional (exactly, when a windowed loop
 * states it); other callees as often as their caller. */
static Trips *
comp_trips(Wr *w, const IrModule *m)
{
    uint32_t n = m->next_comp_id;
    Trips *trips = SL_NEW_ARRAY(&w->scratch, Trips, (size_t)n + 1);
    w->comp_loop = SL_NEW_ARRAY(&w->scratch, uint32_t, (size_t)n + 1);
    if (!trips || !w->comp_loop)
        return NULL;
    memset(w->comp_loop, 0, ((size_t)n + 1) * sizeof(uint32_t));
    for (uint32_t k = 0; k < n; k++)
        trips[k] = (Trips){TRIP_UNSEEN, TRIP_UNSEEN};
    if (m->entry && m->entry->id < n)
        trips[m->entry->id] = (Trips){1, 1};
    for (uint32_t k = m->n_comps; k-- > 0;) { /* callers come after their callees */
        const IrComputation *c = m->comps[k];
        if (c->id >= n)
            continue;
        Trips *t = &trips[c->id];
        if (t->exact == TRIP_UNSEEN) /* never called: do not guess */
            *t = (Trips){TRIP_UNKNOWN, TRIP_UNKNOWN};
        for (uint32_t j = 0; j < c->n_instrs; j++)
            add_callee_trips(w, c->instrs[j], *t, trips, n);
    }
    return trips;
}

static void
write_groups(Wr *w, int64_t collective, const Groups *g)
{
    sqlite3_stmt *st = wr_stmt(w, ST_GROUP);
    size_t off = 0;
    for (uint32_t k = 0; k < g->n && w->rc == SQLITE_OK; k++) {
        for (uint32_t p = 0; p < g->sizes[k]; p++) {
            wr_bind_i64(w, st, 1, collective);
            wr_bind_i64(w, st, 2, k);
            wr_bind_i64(w, st, 3, p);
            wr_bind_i64(w, st, 4, g->ids[off + p]);
            wr_bind_i64(w, st, 5, g->sizes[k]);
            (void)wr_insert(w, ST_GROUP);
        }
        off += g->sizes[k];
    }
}

static int64_t
seq_row(const SlMap *m, uint32_t seq)
{
    uint64_t row = 0;
    return seq && sl_map_get(m, seq, &row) ? (int64_t)row : 0;
}

/* A collective the partitioner did not report: it came from an input collective when it
 * derives from an instruction of the same opcode. */
static bool
was_in_input(const Wr *w, const IrInstr *i)
{
    const IrInstr *d = i->derived_from;
    return d && d->id < w->n_ids[BEFORE] && w->instr_by_id[BEFORE][d->id] == d && d->op == i->op;
}

static void
write_collective(Wr *w, const IrInstr *i, int kind, Trips trip, int64_t loop_row)
{
    Groups g = {0};
    bool is_permute =
        k_collectives[kind].bytes == CB_FIRST_OPERAND && i->op != IR_OP_RAGGED_ALL_TO_ALL;
    if (!(is_permute ? permute_groups(w, i, &g) : replica_groups(w, i, &g))) {
        w->oom = true;
        return;
    }
    uint32_t ev_index = i->id < w->n_ids[AFTER] ? w->coll_by_id[i->id] : 0;
    const EvCollective *ev =
        ev_index ? &((const EvCollective *)w->db->collectives.data)[ev_index - 1] : NULL;
    sqlite3_stmt *st = wr_stmt(w, ST_COLLECTIVE);
    int64_t channel = 0;
    wr_bind_i64(w, st, 1, w->run_id);
    wr_bind_row(w, st, 2, i->id < w->n_ids[AFTER] ? w->rows_by_id[AFTER][i->id] : 0);
    wr_bind_text(w, st, 3, k_collectives[kind].kind);
    if (ir_instr_int_attr(i, IR_ATTR_CHANNEL_ID, &channel))
        wr_bind_i64(w, st, 4, channel);
    wr_bind_i64(w, st, 5, g.group_size);
    wr_bind_i64(w, st, 6, g.n);
    sl_buf_clear(&w->text);
    ir_shape_print(&i->shape, false, &w->text);
    if (w->text.failed)
        w->oom = true;
    else
        wr_bind_text(w, st, 7, w->text.data);
    wr_bind_f64(w, st, 8, full_bytes(i, k_collectives[kind].bytes, g.group_size));
    if (trip.exact >= 0)
        wr_bind_i64(w, st, 9, trip.exact);
    int64_t src = ev ? wr_row_of(w, BEFORE, ev->source) : 0;
    wr_bind_row(w, st, 10, src ? src : wr_source_row(w, i));
    wr_bind_text(w, st, 11, ev ? ev->cause : was_in_input(w, i) ? "input" : NULL);
    wr_bind_row(w, st, 12, ev ? seq_row(&w->reshard_row, ev->reshard_seq) : 0);
    wr_bind_row(w, st, 13, ev ? seq_row(&w->decision_row, ev->decision_seq) : 0);
    if (trip.max >= 0)
        wr_bind_i64(w, st, 14, trip.max);
    wr_bind_row(w, st, 15, loop_row);
    int64_t row = wr_insert(w, ST_COLLECTIVE);
    write_groups(w, row, &g);
}

/* One while_loop row per while of the output, outer loops first. */
static void
write_whiles(Wr *w)
{
    sqlite3_stmt *st = wr_stmt(w, ST_WHILE);
    for (size_t k = 0; k < w->whiles.len && w->rc == SQLITE_OK; k++) {
        WhileRow *r = &SL_VEC_AT(&w->whiles, WhileRow, k);
        wr_bind_i64(w, st, 1, w->run_id);
        wr_bind_row(w, st, 2, r->w->id < w->n_ids[AFTER] ? w->rows_by_id[AFTER][r->w->id] : 0);
        wr_bind_row(w, st, 3, wr_source_row(w, r->w));
        if (r->tc.count >= 0)
            wr_bind_i64(w, st, 4, r->tc.count);
        wr_bind_text(w, st, 5, r->method);
        wr_bind_text(w, st, 6, r->tc.reason[0] ? r->tc.reason : NULL);
        if (r->tc.induction_index >= 0)
            wr_bind_i64(w, st, 7, r->tc.induction_index);
        if (r->runs.exact >= 0)
            wr_bind_i64(w, st, 8, r->runs.exact);
        wr_bind_row(w, st, 9, r->outer ? SL_VEC_AT(&w->whiles, WhileRow, r->outer - 1).row : 0);
        r->row = wr_insert(w, ST_WHILE);
    }
}

/* One row per collective instruction of the output module, whether reported by an event or
 * not, so the table always matches the printed module. */
void
wr_write_collectives(Wr *w, const IrModule *out)
{
    SlArenaMark outer = sl_arena_mark(&w->scratch);
    Trips *trips = comp_trips(w, out);
    if (!trips) {
        w->oom = true;
        return;
    }
    write_whiles(w);
    for (uint32_t c = 0; c < out->n_comps && w->rc == SQLITE_OK && !w->oom; c++) {
        const IrComputation *comp = out->comps[c];
        Trips trip =
            comp->id < out->next_comp_id ? trips[comp->id] : (Trips){TRIP_UNKNOWN, TRIP_UNKNOWN};
        uint32_t loop = comp->id < out->next_comp_id ? w->comp_loop[comp->id] : 0;
        int64_t loop_row = loop ? SL_VEC_AT(&w->whiles, WhileRow, loop - 1).row : 0;
        for (uint32_t k = 0; k < comp->n_instrs && w->rc == SQLITE_OK && !w->oom; k++) {
            int kind = collective_row(comp->instrs[k]->op);
            if (kind < 0)
                continue;
            SlArenaMark mark = sl_arena_mark(&w->scratch);
            write_collective(w, comp->instrs[k], kind, trip, loop_row);
            sl_arena_release(&w->scratch, mark);
        }
    }
    sl_arena_release(&w->scratch, outer);
}
