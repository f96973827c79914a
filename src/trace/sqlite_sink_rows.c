/* sqlite_sink_rows.c - the rows of the partitioner's events: decisions, reshards, warnings and
 * the origins of propagated shardings; also the one warning the writer adds itself (the
 * input_output_alias pairs the memory estimates ignored, counted by end_run).
 * Does not own: windowed loops and collectives (sqlite_sink_collectives.c). */
#include "trace/sqlite_sink_int.h"

void
wr_write_decisions(Wr *w)
{
    const EvDecision *ev = w->db->decisions.data;
    for (size_t k = 0; k < w->db->decisions.len && w->rc == SQLITE_OK; k++) {
        const EvDecision *d = &ev[k];
        sqlite3_stmt *st = wr_list_stmt(w, LIST_DECISION, d->n_alts, d->n_numbers);
        if (!st)
            return;
        wr_bind_i64(w, st, 1, w->run_id);
        wr_bind_i64(w, st, 2, d->seq);
        wr_bind_row(w, st, 3, wr_row_of(w, BEFORE, d->instr));
        wr_bind_text(w, st, 4, d->handler ? d->handler : "");
        wr_bind_text(w, st, 5, d->strategy ? d->strategy : "");
        wr_bind_text(w, st, 6, d->reason);
        int p = 7;
        for (uint32_t a = 0; a < d->n_alts; a++)
            wr_bind_text(w, st, p++, d->alts[a] ? d->alts[a] : "");
        for (uint32_t n = 0; n < d->n_numbers; n++, p += 2) {
            const TraceKV *kv = &d->numbers[n];
            wr_bind_text(w, st, p, kv->key ? kv->key : "");
            if (kv->str)
                wr_bind_text(w, st, p + 1, kv->str);
            else
                wr_bind_number(w, st, p + 1, kv->num);
        }
        int64_t row = wr_insert_stmt(w, st, "inserting a decision row");
        wr_put(w, &w->decision_row, d->seq, (uint64_t)row);
    }
}

void
wr_write_reshards(Wr *w)
{
    const EvReshard *ev = w->db->reshards.data;
    sqlite3_stmt *st = wr_stmt(w, ST_RESHARD);
    for (size_t k = 0; k < w->db->reshards.len && w->rc == SQLITE_OK; k++) {
        const EvReshard *r = &ev[k];
        wr_bind_i64(w, st, 1, w->run_id);
        wr_bind_i64(w, st, 2, r->seq);
        wr_bind_row(w, st, 3, wr_row_of(w, BEFORE, r->requester));
        wr_bind_row(w, st, 4, wr_row_of(w, AFTER, r->value));
        wr_bind_text(w, st, 5, sl_sym_cstr(r->value.name));
        wr_bind_text(w, st, 6, r->from);
        wr_bind_text(w, st, 7, r->to);
        wr_bind_text(w, st, 8, r->method);
        wr_bind_row(w, st, 9, wr_row_of(w, AFTER, r->result));
        wr_bind_text(w, st, 10, r->result.name ? sl_sym_cstr(r->result.name) : NULL);
        int64_t row = wr_insert(w, ST_RESHARD);
        wr_put(w, &w->reshard_row, r->seq, (uint64_t)row);
    }
}

/* The input_output_alias pairs the memory estimate of `phase` ignored, as one warning of the
 * module (no instr). The partitioner does not look at aliases, so it cannot warn: a donated
 * parameter sharded unlike its output has a local buffer of another size after partitioning,
 * and XLA rejects such a module, while the memory rows silently count the pair as neither
 * donated nor aliased. */
static void
write_ignored_aliases(Wr *w, int phase)
{
    static const char *const why[] = {
        [BEFORE] = "in the input: the pair cannot be read, or its parameter and output buffers "
                   "differ in size",
        [AFTER] = "after partitioning: the donated parameter and its output have local buffers "
                  "of different sizes (sharded differently, which XLA rejects), or the pair "
                  "cannot be read",
    };
    uint32_t n = w->ignored_aliases[phase];
    if (!n || w->rc != SQLITE_OK)
        return;
    sl_buf_clear(&w->text);
    sl_buf_printf(&w->text,
                  "%u input_output_alias pair%s ignored %s; the memory estimate counts %s as "
                  "neither donated nor aliased",
                  n, n == 1 ? "" : "s", why[phase], n == 1 ? "it" : "them");
    if (w->text.failed) {
        w->oom = true;
        return;
    }
    sqlite3_stmt *st = wr_stmt(w, ST_WARNING);
    wr_bind_i64(w, st, 1, w->run_id);
    wr_bind_null(w, st, 2);
    wr_bind_text(w, st, 3, trace_warn_kind_name(TRACE_WARN_IGNORED_ALIAS));
    wr_bind_text(w, st, 4, sl_buf_str(&w->text).ptr);
    (void)wr_insert(w, ST_WARNING);
}

void
wr_write_warnings(Wr *w)
{
    const EvWarning *ev = w->db->warnings.data;
    sqlite3_stmt *st = wr_stmt(w, ST_WARNING);
    for (size_t k = 0; k < w->db->warnings.len && w->rc == SQLITE_OK; k++) {
        wr_bind_i64(w, st, 1, w->run_id);
        wr_bind_row(w, st, 2, wr_row_of(w, BEFORE, ev[k].source));
        wr_bind_text(w, st, 3, trace_warn_kind_name(ev[k].kind));
        wr_bind_text(w, st, 4, ev[k].message);
        (void)wr_insert(w, ST_WARNING);
    }
    for (int phase = BEFORE; phase <= AFTER; phase++)
        write_ignored_aliases(w, phase);
}

/* One row per propagated sharding; the path as a JSON array of 'before' instr ids. */
void
wr_write_origins(Wr *w)
{
    const EvOrigin *ev = w->db->origins.data;
    sqlite3_stmt *st = wr_stmt(w, ST_ORIGIN);
    SlBuf path;
    sl_buf_init(&path);
    for (size_t k = 0; k < w->db->origins.len && w->rc == SQLITE_OK; k++) {
        int64_t row = wr_row_of(w, BEFORE, ev[k].instr);
        if (!row)
            continue; /* not an instruction of the partitioner's input */
        sl_buf_clear(&path);
        sl_buf_putc(&path, '[');
        for (uint32_t p = 0; p < ev[k].n_path; p++) {
            int64_t r = wr_row_of(w, BEFORE, ev[k].path[p]);
            if (p)
                sl_buf_putc(&path, ',');
            if (r)
                sl_buf_put_i64(&path, r);
            else
                sl_buf_puts(&path, "null");
        }
        sl_buf_putc(&path, ']');
        if (path.failed) {
            w->oom = true;
            break;
        }
        wr_bind_i64(w, st, 1, w->run_id);
        wr_bind_row(w, st, 2, row);
        wr_bind_text(w, st, 3, ev[k].sharding);
        wr_bind_row(w, st, 4, wr_row_of(w, BEFORE, ev[k].source));
        wr_bind_text(w, st, 5, path.data);
        wr_bind_text(w, st, 6, ev[k].direction);
        if (ev[k].level >= 0)
            wr_bind_i64(w, st, 7, ev[k].level);
        else
            wr_bind_null(w, st, 7);
        wr_bind_text(w, st, 8, ev[k].rule);
        wr_bind_text(w, st, 9, ev[k].candidate);
        wr_bind_text(w, st, 10, ev[k].replaced);
        (void)wr_insert(w, ST_ORIGIN);
    }
    sl_buf_fini(&path);
}
