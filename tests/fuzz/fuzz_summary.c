/* fuzz_summary.c - fuzz target: summary.json text -> report_parse_json (what `shardlens diff`
 * reads), then everything diff does with it: the text and JSON diff against itself and
 * and against the summary written back as JSON. Only a crash or sanitizer report,
 * or an error without a message, is a finding. */
#include <string.h>

#include "fuzz.h"
#include "reports/report.h"

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > FUZZ_MAX_INPUT_BYTES)
        return 0;
    SlArena arena;
    sl_arena_init(&arena);
    Report *r = NULL;
    SlError err = {0};
    SlStatus st = report_parse_json((SlStr){(const char *)data, size}, "fuzz.json", &arena, &r,
                                    &err);
    if (st) {
        if (!err.msg[0])
            FUZZ_BUG("summary error %d without a message", (int)st);
    } else {
        SlBuf b;
        sl_buf_init(&b);
        ReportDiffOptions o = {true, 5.0, "old.json", "new.json", false, 0};
        bool over = false;
        SlError derr = {0};
        report_diff(r, r, &o, false, &b, &over, &derr);
        report_diff(r, r, &o, true, &b, &over, &derr);
        if (over)
            FUZZ_BUG("a summary is over budget against itself");
        SlError jerr = {0};
        sl_buf_clear(&b);
        if (report_write_json(r, &b, &jerr) == SL_OK) {
            Report *again = NULL;
            SlError perr = {0};
            if (report_parse_json((SlStr){b.data ? b.data : "", b.len}, "again.json", &arena,
                                  &again, &perr) == SL_OK) {
                SlBuf d;
                sl_buf_init(&d);
                report_diff(r, again, &o, false, &d, &over, &derr);
                sl_buf_fini(&d);
            }
        }
        sl_buf_fini(&b);
    }
    sl_arena_fini(&arena);
    return 0;
}
