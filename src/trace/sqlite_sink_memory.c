/* sqlite_sink_memory.c - the memory rows: the estimate (src/memory) of each phase, with its
 * profile and its largest buffers. The estimates are made before the attempts (end_run). */
#include "trace/sqlite_sink_int.h"

/* One memory row per phase: the input on one device, the output for every device (an SPMD
 * program has the same local shapes everywhere, so every device shares one row). */
void
wr_write_memory(Wr *w)
{
    for (int phase = BEFORE; phase <= AFTER && w->rc == SQLITE_OK; phase++) {
        const MemEstimate *e = &w->mem[phase];
        sqlite3_stmt *st = wr_stmt(w, ST_MEMORY);
        wr_bind_i64(w, st, 1, w->run_id);
        wr_bind_text(w, st, 2, wr_phase_name(phase));
        sl_buf_clear(&w->text);
        if (phase == AFTER) {
            sl_buf_putc(&w->text, '[');
            for (int64_t d = 0; d < w->db->info.num_partitions; d++)
                sl_buf_printf(&w->text, d ? ",%lld" : "%lld", (long long)d);
            sl_buf_putc(&w->text, ']');
            if (w->text.failed)
                w->oom = true;
            wr_bind_text(w, st, 3, sl_buf_str(&w->text).ptr);
        } else {
            wr_bind_null(w, st, 3);
        }
        wr_bind_i64(w, st, 4, e->parameter_bytes);
        wr_bind_i64(w, st, 5, e->output_bytes);
        wr_bind_i64(w, st, 6, e->alias_bytes);
        wr_bind_i64(w, st, 7, e->peak_bytes);
        wr_bind_i64(w, st, 8, e->peak_temp_bytes);
        wr_bind_i64(w, st, 9, e->max_temp_bytes);
        wr_bind_row(w, st, 10, e->peak_instr ? w->rows_by_id[phase][e->peak_instr->id] : 0);
        wr_bind_i64(w, st, 11, e->peak_position);
        wr_bind_i64(w, st, 12, e->n_values);
        sl_buf_clear(&w->profile);
        sl_buf_putc(&w->profile, '[');
        for (uint32_t k = 0; k < e->n_profile; k++)
            sl_buf_printf(&w->profile, k ? ",%lld" : "%lld", (long long)e->profile[k]);
        sl_buf_putc(&w->profile, ']');
        if (w->profile.failed)
            w->oom = true;
        wr_bind_text(w, st, 13, sl_buf_str(&w->profile).ptr);
        wr_bind_i64(w, st, 14, e->profile_step);
        int64_t row = wr_insert(w, ST_MEMORY);
        st = wr_stmt(w, ST_MEMORY_BUFFER);
        for (uint32_t k = 0; k < e->n_top && w->rc == SQLITE_OK; k++) {
            wr_bind_i64(w, st, 1, row);
            wr_bind_i64(w, st, 2, k + 1);
            wr_bind_row(w, st, 3, w->rows_by_id[phase][e->top[k].instr->id]);
            wr_bind_i64(w, st, 4, e->top[k].leaf);
            wr_bind_i64(w, st, 5, e->top[k].bytes);
            wr_bind_text(w, st, 6, mem_buf_kind_name(e->top[k].kind));
            (void)wr_insert(w, ST_MEMORY_BUFFER);
        }
    }
}
