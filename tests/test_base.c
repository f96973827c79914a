/* test_base.c - arenas, interning, buffers, the u64 map and error recording. */
#include <fcntl.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "base/base.h"

static void
test_arena_alignment_and_zeroing(void **state)
{
    (void)state;
    SlArena a;
    sl_arena_init(&a);
    char *c = sl_arena_alloc(&a, 3, 1);
    int64_t *p = SL_NEW(&a, int64_t);
    assert_non_null(c);
    assert_non_null(p);
    assert_int_equal((uintptr_t)p % _Alignof(int64_t), 0);
    assert_int_equal(*p, 0);
    /* A block larger than a chunk still works. */
    unsigned char *big = sl_arena_alloc(&a, SL_ARENA_CHUNK_BYTES * 3, 16);
    assert_non_null(big);
    assert_int_equal(big[SL_ARENA_CHUNK_BYTES * 3 - 1], 0);
    sl_arena_fini(&a);
}

static void
test_arena_mark_release(void **state)
{
    (void)state;
    SlArena a;
    sl_arena_init(&a);
    (void)sl_arena_alloc(&a, 100, 8);
    SlArenaMark m = sl_arena_mark(&a);
    size_t before = a.total_bytes;
    for (int i = 0; i < 100; i++)
        (void)sl_arena_alloc(&a, 4096, 8);
    assert_true(a.total_bytes > before);
    sl_arena_release(&a, m);
    assert_int_equal(a.total_bytes, before);
    sl_arena_fini(&a);
}

static void
test_arena_overflow_is_sticky(void **state)
{
    (void)state;
    SlArena a;
    sl_arena_init(&a);
    assert_null(sl_arena_alloc_array(&a, SIZE_MAX / 2, 4, 4));
    assert_true(sl_arena_failed(&a));
    assert_null(sl_arena_alloc(&a, 1, 1));
    sl_arena_fini(&a);
}

static void
test_intern_identity(void **state)
{
    (void)state;
    SlArena a;
    sl_arena_init(&a);
    SlInterner in;
    sl_interner_init(&in, &a);
    SlSym x = sl_intern_cstr(&in, "all-gather.3");
    char buf[] = "all-gather.3";
    SlSym y = sl_intern(&in, (SlStr){buf, 12});
    SlSym z = sl_intern_cstr(&in, "all-gather.4");
    assert_ptr_equal(x, y);
    assert_ptr_not_equal(x, z);
    assert_string_equal(sl_sym_cstr(x), "all-gather.3");
    /* Many symbols force several rehashes; all stay distinct and findable. */
    char name[32];
    SlSym first = NULL;
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof(name), "n%d", i);
        SlSym s = sl_intern_cstr(&in, name);
        if (i == 0)
            first = s;
    }
    assert_int_equal(in.count, 5002);
    assert_ptr_equal(sl_intern_cstr(&in, "n0"), first);
    sl_interner_fini(&in);
    sl_arena_fini(&a);
}

static void
test_buf_formatting(void **state)
{
    (void)state;
    SlBuf b;
    sl_buf_init(&b);
    sl_buf_puts(&b, "f32[");
    sl_buf_put_i64(&b, -9223372036854775807LL - 1);
    sl_buf_putc(&b, ']');
    sl_buf_printf(&b, " %s=%d", "k", 42);
    assert_string_equal(b.data, "f32[-9223372036854775808] k=42");
    assert_int_equal(b.len, strlen(b.data));
    sl_buf_fini(&b);
}

/* Numbers for people: whole bytes below 1 KiB, three significant digits above; times in
 * us/ms/s with three significant digits; rounding that reaches the next unit moves to it. */
static void
test_buf_sizes_and_durations(void **state)
{
    (void)state;
    static const struct {
        double v;
        const char *bytes, *time;
    } cases[] = {
        {0,             "0 B",      "0 us"   },
        {4.5,           "5 B",      "4.50 us"},
        {768,           "768 B",    "768 us" },
        {1023.4,        "1023 B",   "1.02 ms"},
        {1023.6,        "1.00 KiB", "1.02 ms"},
        {1536,          "1.50 KiB", "1.54 ms"},
        {15.5 * 1024,   "15.5 KiB", "15.9 ms"},
        {150 * 1024,    "150 KiB",  "154 ms" },
        {1048575,       "1.00 MiB", "1.05 s" },
        {3.0 * (1 << 30), "3.00 GiB", "3221 s"}, /* past 1000 s: whole seconds */
        {0.12,          "0 B",      "0.12 us"},
        {30.06,         "30 B",     "30.1 us"},
        {999.4,         "999 B",    "999 us" },
        {999.6,         "1000 B",   "1.00 ms"},
    };
    SlBuf b;
    sl_buf_init(&b);
    for (size_t k = 0; k < SL_COUNTOF(cases); k++) {
        sl_buf_clear(&b);
        sl_buf_put_size(&b, cases[k].v);
        if (strcmp(b.data, cases[k].bytes) != 0)
            fail_msg("size %.17g: got '%s', want '%s'", cases[k].v, b.data, cases[k].bytes);
        sl_buf_clear(&b);
        sl_buf_put_duration_us(&b, cases[k].v);
        if (strcmp(b.data, cases[k].time) != 0)
            fail_msg("time %.17g: got '%s', want '%s'", cases[k].v, b.data, cases[k].time);
    }
    sl_buf_clear(&b);
    sl_buf_put_size(&b, -1536);
    assert_string_equal(b.data, "-1.50 KiB");
    sl_buf_clear(&b);
    sl_buf_put_size(&b, 5.0 * 1024 * 1024 * 1024 * 1024 * 1024 * 1024); /* past PiB: stays PiB */
    assert_string_equal(b.data, "5120 PiB");
    sl_buf_fini(&b);
}

static void
test_map_put_get(void **state)
{
    (void)state;
    SlMap m;
    sl_map_init(&m);
    for (uint64_t k = 0; k < 10000; k++)
        assert_true(sl_map_put(&m, k * 7919, k));
    uint64_t v = 0;
    assert_true(sl_map_get(&m, 7919 * 123, &v));
    assert_int_equal(v, 123);
    assert_false(sl_map_get(&m, 5, &v));
    assert_true(sl_map_put(&m, 7919 * 123, 77)); /* overwrite */
    assert_true(sl_map_get(&m, 7919 * 123, &v));
    assert_int_equal(v, 77);
    assert_int_equal(m.count, 10000);
    sl_map_fini(&m);
}

static void
test_first_error_wins(void **state)
{
    (void)state;
    SlError err = {0};
    SlSrcLoc loc = {"a.hlo", 3, 7};
    assert_int_equal(sl_fail(&err, SL_ERR_PARSE, loc, "expected '%c'", ']'), SL_ERR_PARSE);
    SlSrcLoc loc2 = {"a.hlo", 9, 1};
    assert_int_equal(sl_fail(&err, SL_ERR_INVALID, loc2, "later"), SL_ERR_INVALID);
    assert_int_equal(err.status, SL_ERR_PARSE);
    assert_int_equal(err.loc.line, 3);
    assert_int_equal(err.loc.col, 7);
    assert_string_equal(err.msg, "expected ']'");
}

static void
test_atomic_write_keeps_devices(void **state)
{
    (void)state;
    SlError err = {0};
    /* A device must be written in place, never renamed over (that would replace /dev/null
     * with a regular file for the whole machine). */
    assert_int_equal(sl_file_write_atomic("/dev/null", "x", 1, &err), SL_OK);
    struct stat st;
    assert_int_equal(stat("/dev/null", &st), 0);
    assert_true(S_ISCHR(st.st_mode));

    char path[] = "/tmp/shardlens_test_atomicXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(sl_file_write_atomic(path, "abc", 3, &err), SL_OK);
    SlBuf b;
    sl_buf_init(&b);
    assert_int_equal(sl_file_read(path, &b, &err), SL_OK);
    assert_string_equal(b.data, "abc");
    sl_buf_fini(&b);
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    unlink(path);
}

static void
test_arena_zeroing_after_release(void **state)
{
    (void)state;
    SlArena a;
    sl_arena_init(&a);
    SlArenaMark m = sl_arena_mark(&a);
    unsigned char *p = sl_arena_alloc_uninit(&a, 256, 8);
    assert_non_null(p);
    memset(p, 0xab, 256);
    sl_arena_release(&a, m);
    /* Reused memory must come back zeroed from sl_arena_alloc even though it was dirtied. */
    unsigned char *q = sl_arena_alloc(&a, 256, 8);
    assert_non_null(q);
    for (int i = 0; i < 256; i++)
        assert_int_equal(q[i], 0);
    sl_arena_fini(&a);
}

static void
test_reserve_keeps_contents(void **state)
{
    (void)state;
    SlArena a;
    sl_arena_init(&a);
    SlInterner in;
    sl_interner_init(&in, &a);
    SlSym x = sl_intern_cstr(&in, "x");
    assert_true(sl_interner_reserve(&in, 100000));
    assert_ptr_equal(sl_intern_cstr(&in, "x"), x);
    assert_int_equal(in.count, 1);
    SlMap m;
    sl_map_init(&m);
    assert_true(sl_map_put(&m, 42, 7));
    assert_true(sl_map_reserve(&m, 100000));
    uint64_t v = 0;
    assert_true(sl_map_get(&m, 42, &v));
    assert_int_equal(v, 7);
    assert_int_equal(m.count, 1);
    sl_map_fini(&m);
    sl_interner_fini(&in);
    sl_arena_fini(&a);
}

/* Collects what a streaming SlBuf hands on, piece by piece. */
typedef struct Sink {
    SlBuf all;
    int pieces;
} Sink;

static void
sink_spill(void *ctx, const char *p, size_t n)
{
    Sink *s = ctx;
    sl_buf_append(&s->all, p, n);
    s->pieces++;
}

/* Both slot forms: tagged addresses (the usual) and bare ones (after an address with its top
 * bits in use); many names, so that the table is rebuilt several times. */
static void
test_intern_slot_forms(void **state)
{
    (void)state;
    for (int plain = 0; plain < 2; plain++) {
        SlArena a;
        sl_arena_init(&a);
        SlInterner in;
        sl_interner_init(&in, &a);
        in.plain = plain;
        enum { N = 5000 };
        static SlSym first[N];
        char name[32];
        for (int i = 0; i < N; i++) {
            snprintf(name, sizeof(name), "instr.%d", i);
            first[i] = sl_intern_cstr(&in, name);
            assert_non_null(first[i]);
        }
        assert_int_equal(in.count, N);
        assert_true(in.cap * 13 >= (size_t)N * 16); /* grown at 13/16 full */
        assert_int_equal(in.plain, plain);
        for (int i = 0; i < N; i++) {
            snprintf(name, sizeof(name), "instr.%d", i);
            SlSym again = sl_intern_cstr(&in, name);
            assert_ptr_equal(again, first[i]);
            assert_string_equal(again->text, name);
        }
        assert_int_equal(in.count, N);
        /* the empty name and a long one */
        assert_ptr_equal(sl_intern_cstr(&in, ""), sl_intern_cstr(&in, ""));
        assert_int_equal(sl_intern_cstr(&in, "")->len, 0);
        sl_interner_fini(&in);
        sl_arena_fini(&a);
    }
}

static void
test_buf_spill_streams_pieces(void **state)
{
    (void)state;
    Sink sink;
    sl_buf_init(&sink.all);
    sink.pieces = 0;
    SlBuf b;
    sl_buf_init(&b);
    /* Without a spill function sl_buf_spill keeps everything. */
    sl_buf_append(&b, "abc", 3);
    sl_buf_spill(&b, true);
    assert_int_equal(b.len, 3);
    sl_buf_clear(&b);
    b.spill = sink_spill;
    b.spill_ctx = &sink;
    char line[100];
    memset(line, 'x', sizeof(line) - 1);
    line[sizeof(line) - 1] = '\n';
    /* 2000 lines of 100 bytes: spilled whenever 64 KiB are held, so three full pieces. */
    for (int i = 0; i < 2000; i++) {
        line[0] = (char)('a' + i % 26);
        sl_buf_append(&b, line, sizeof(line));
        sl_buf_spill(&b, false);
        assert_true(b.len < SL_BUF_SPILL_BYTES);
    }
    assert_int_equal(sink.pieces, 3); /* at 65600, 131200 and 196800 bytes */
    assert_int_equal(b.spilled + b.len, 200000);
    sl_buf_spill(&b, true);
    assert_int_equal(b.len, 0);
    assert_int_equal(b.spilled, 200000);
    assert_int_equal(sink.all.len, 200000);
    for (int i = 0; i < 2000; i++)
        assert_int_equal(sink.all.data[i * 100], 'a' + i % 26);
    sl_buf_fini(&b);
    sl_buf_fini(&sink.all);
}

static bool
exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static void
test_out_file_commit_and_abort(void **state)
{
    (void)state;
    char dir[] = "/tmp/shardlens_test_outXXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[128], tmp[160];
    snprintf(path, sizeof(path), "%s/out.txt", dir);
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    SlOutFile o;
    assert_int_equal(sl_out_open(&o, path), SL_OK);
    assert_int_equal(sl_out_write(&o, "hello ", 6), SL_OK);
    assert_int_equal(sl_out_write(&o, "world", 5), SL_OK);
    assert_int_equal(o.bytes, 11);
    /* Nothing at the target until commit: the bytes go to the temporary file. */
    assert_false(exists(path));
    assert_true(exists(tmp));
    assert_int_equal(sl_out_commit(&o), SL_OK);
    assert_false(exists(tmp));
    SlError err = {0};
    SlBuf b;
    sl_buf_init(&b);
    assert_int_equal(sl_file_read(path, &b, &err), SL_OK);
    assert_string_equal(b.data, "hello world");
    /* An aborted rewrite leaves the old file as it was and no temporary file. */
    assert_int_equal(sl_out_open(&o, path), SL_OK);
    assert_int_equal(sl_out_write(&o, "partial", 7), SL_OK);
    sl_out_abort(&o);
    assert_false(exists(tmp));
    sl_buf_clear(&b);
    assert_int_equal(sl_file_read(path, &b, &err), SL_OK);
    assert_string_equal(b.data, "hello world");
    /* A directory that does not exist: an I/O error naming the path, nothing created. */
    char bad[160];
    snprintf(bad, sizeof(bad), "%s/no/out.txt", dir);
    assert_int_equal(sl_out_open(&o, bad), SL_ERR_IO);
    assert_string_equal(o.err.loc.path, bad);
    assert_non_null(strstr(o.err.msg, "cannot create"));
    assert_int_equal(sl_out_write(&o, "x", 1), SL_ERR_IO); /* sticky */
    sl_out_abort(&o);
    sl_buf_fini(&b);
    unlink(path);
    rmdir(dir);
}

static void
test_file_text_mapped_and_released(void **state)
{
    (void)state;
    char path[] = "/tmp/shardlens_test_textXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    /* More than one page, so that releasing and reading again is about real pages. */
    char chunk[5000];
    for (size_t i = 0; i < sizeof(chunk); i++)
        chunk[i] = (char)('a' + i % 23);
    assert_int_equal(write(fd, chunk, sizeof(chunk)), (ssize_t)sizeof(chunk));
    close(fd);
    SlFileText t;
    SlError err = {0};
    assert_int_equal(sl_file_text_load(&t, path, &err), SL_OK);
    assert_non_null(t.map);
    assert_int_equal(t.text.len, sizeof(chunk));
    assert_memory_equal(t.text.ptr, chunk, sizeof(chunk));
    sl_file_text_release(&t);
    /* The text reads the same after its pages were given back. */
    assert_memory_equal(t.text.ptr, chunk, sizeof(chunk));
    sl_file_text_fini(&t);
    assert_null(t.map);
    assert_int_equal(t.text.len, 0);
    /* An empty file is read, not mapped; a missing one is an I/O error. */
    fd = open(path, O_WRONLY | O_TRUNC);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(sl_file_text_load(&t, path, &err), SL_OK);
    assert_null(t.map);
    assert_int_equal(t.text.len, 0);
    sl_file_text_fini(&t);
    unlink(path);
    assert_int_equal(sl_file_text_load(&t, path, &err), SL_ERR_IO);
    assert_non_null(strstr(err.msg, "cannot open"));
    sl_file_text_fini(&t);
}

static void
test_arena_extend_in_place(void **state)
{
    (void)state;
    SlArena a;
    sl_arena_init(&a);
    int64_t *p = SL_NEW_ARRAY(&a, int64_t, 2);
    assert_non_null(p);
    p[0] = 11;
    p[1] = 22;
    assert_true(sl_arena_extend(&a, p, 2 * sizeof(int64_t), 3 * sizeof(int64_t)));
    p[2] = 33;
    /* The next allocation comes after the extended block. */
    int64_t *q = SL_NEW(&a, int64_t);
    assert_ptr_equal(q, p + 3);
    assert_int_equal(p[0] + p[1] + p[2], 66);
    /* Only the latest block grows in place, and only while its chunk has room. */
    assert_false(sl_arena_extend(&a, p, 3 * sizeof(int64_t), 4 * sizeof(int64_t)));
    assert_false(sl_arena_extend(&a, q, sizeof(int64_t), SL_ARENA_CHUNK_BYTES * 2));
    assert_true(sl_arena_extend(&a, q, sizeof(int64_t), 2 * sizeof(int64_t)));
    sl_arena_fini(&a);
}

/* A scratch arena whose every mark/release cycle needs a new chunk reuses one chunk (not a
 * fresh, cleared one each time), and zeroed allocations from it are still zero. */
static void
test_arena_release_reuses_chunk(void **state)
{
    (void)state;
    SlArena a;
    sl_arena_init(&a);
    assert_non_null(sl_arena_alloc(&a, SL_ARENA_CHUNK_BYTES - 64, 8)); /* first chunk full */
    size_t base_total = a.total_bytes;
    unsigned char *first = NULL;
    for (int cycle = 0; cycle < 3; cycle++) {
        SlArenaMark m = sl_arena_mark(&a);
        unsigned char *p = sl_arena_alloc(&a, 4096, 8);
        assert_non_null(p);
        for (int i = 0; i < 4096; i++)
            assert_int_equal(p[i], 0);
        memset(p, 0xcd, 4096); /* dirty it for the next cycle */
        if (cycle == 0)
            first = p;
        else
            assert_ptr_equal(p, first);
        assert_true(a.total_bytes > base_total);
        sl_arena_release(&a, m);
        assert_int_equal(a.total_bytes, base_total);
    }
    /* uninit allocations may see the old bytes; zeroed ones never do */
    SlArenaMark m = sl_arena_mark(&a);
    unsigned char *u = sl_arena_alloc_uninit(&a, 4096, 8); /* too big for the first chunk */
    assert_ptr_equal(u, first);
    unsigned char *z = sl_arena_alloc(&a, 64, 8);
    for (int i = 0; i < 64; i++)
        assert_int_equal(z[i], 0);
    sl_arena_release(&a, m);
    sl_arena_fini(&a);
    assert_null(a.spare);
}

static void
test_arena_big_chunks(void **state)
{
    (void)state;
    SlArena a;
    sl_arena_init(&a);
    /* Blocks of 1 MiB: the arena grows its chunks past the size that is mapped directly;
     * every block stays zeroed, aligned and writable, and mark/release frees mapped chunks. */
    SlArenaMark m = sl_arena_mark(&a);
    unsigned char *blocks[24];
    for (int k = 0; k < 24; k++) {
        blocks[k] = sl_arena_alloc(&a, (size_t)1 << 20, 64);
        assert_non_null(blocks[k]);
        assert_int_equal((uintptr_t)blocks[k] % 64, 0);
        assert_int_equal(blocks[k][0] | blocks[k][((size_t)1 << 20) - 1], 0);
        memset(blocks[k], k + 1, (size_t)1 << 20);
    }
    for (int k = 0; k < 24; k++)
        assert_int_equal(blocks[k][12345], k + 1);
    assert_true(a.total_bytes >= (size_t)24 << 20);
    sl_arena_release(&a, m);
    assert_true(a.total_bytes < (size_t)24 << 20);
    unsigned char *again = sl_arena_alloc(&a, (size_t)3 << 20, 16);
    assert_non_null(again);
    assert_int_equal(again[((size_t)3 << 20) - 1], 0);
    sl_arena_fini(&a);
    assert_int_equal(a.total_bytes, 0);
}

/* A mapped input that shrinks under the reader: the child reads a page past the new end
 * while it streams an output file; it must exit 2 naming the input, and leave neither the
 * temporary nor the destination behind. */
static void
test_file_text_truncated_while_read(void **state)
{
    (void)state;
    char path[] = "/tmp/shardlens_test_shrinkXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    char chunk[3 * 4096];
    memset(chunk, 'x', sizeof(chunk));
    assert_int_equal(write(fd, chunk, sizeof(chunk)), (ssize_t)sizeof(chunk));
    close(fd);
    char out[sizeof(path) + 8];
    snprintf(out, sizeof(out), "%s.out", path);
    int errp[2];
    assert_int_equal(pipe(errp), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(errp[1], STDERR_FILENO);
        close(errp[0]);
        SlFileText t;
        SlError err = {0};
        SlOutFile o;
        if (sl_file_text_load(&t, path, &err) != SL_OK || !t.map)
            _exit(10);
        if (sl_out_open(&o, out) != SL_OK || sl_out_write(&o, "partial", 7) != SL_OK)
            _exit(11);
        sl_file_text_release(&t); /* the next read faults the page in again */
        if (truncate(path, 100) != 0)
            _exit(12);
        volatile char c = t.text.ptr[2 * 4096]; /* past the new end: SIGBUS */
        (void)c;
        _exit(13);
    }
    close(errp[1]);
    char msg[512] = {0};
    size_t got = 0;
    ssize_t r;
    while (got < sizeof(msg) - 1 && (r = read(errp[0], msg + got, sizeof(msg) - 1 - got)) > 0)
        got += (size_t)r;
    close(errp[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 2);
    assert_non_null(strstr(msg, path));
    assert_non_null(strstr(msg, "error: the file changed while it was being read"));
    struct stat st;
    char tmp[sizeof(out) + 32];
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", out, (long)pid);
    assert_int_not_equal(stat(tmp, &st), 0); /* the temporary was removed */
    assert_int_not_equal(stat(out, &st), 0); /* and the destination never appeared */
    unlink(path);
}

/* A run ended by SIGTERM or SIGINT while writing removes its temporaries (an SlOutFile's and
 * one registered by hand, as analyze registers its trace) and still dies of the signal. */
static void
test_tmp_removed_on_signal(void **state)
{
    (void)state;
    static const int k_sigs[] = {SIGTERM, SIGINT, SIGHUP};
    for (size_t i = 0; i < SL_COUNTOF(k_sigs); i++) {
        char dir[] = "/tmp/shardlens_test_sigXXXXXX";
        assert_non_null(mkdtemp(dir));
        char out[64], mine[64];
        snprintf(out, sizeof(out), "%s/out.hlo", dir);
        snprintf(mine, sizeof(mine), "%s/.trace.db.tmp.x", dir);
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            signal(k_sigs[i], SIG_DFL); /* whatever the test runner set */
            SlOutFile o;
            if (sl_out_open(&o, out) != SL_OK || sl_out_write(&o, "partial", 7) != SL_OK)
                _exit(11);
            FILE *f = fopen(mine, "w");
            if (!f || !sl_tmp_register(mine))
                _exit(12);
            fclose(f);
            raise(k_sigs[i]);
            _exit(13);
        }
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status));
        assert_int_equal(WTERMSIG(status), k_sigs[i]);
        char tmp[96];
        snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", out, (long)pid);
        struct stat st;
        assert_int_not_equal(stat(tmp, &st), 0);
        assert_int_not_equal(stat(mine, &st), 0);
        assert_int_not_equal(stat(out, &st), 0);
        assert_int_equal(rmdir(dir), 0); /* nothing else was left in it */
    }
}

/* The pid of a process that has exited. */
static long
dead_pid(void)
{
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    return (long)pid;
}

static void
touch(const char *path, time_t age_s)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("old", f);
    fclose(f);
    struct timespec t[2];
    clock_gettime(CLOCK_REALTIME, &t[0]);
    t[0].tv_sec -= age_s;
    t[1] = t[0];
    assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
}

/* Opening an output sweeps what killed runs left beside it, and only that. */
static void
test_tmp_sweep_only_stale_ours(void **state)
{
    (void)state;
    char dir[] = "/tmp/shardlens_test_sweepXXXXXX";
    assert_non_null(mkdtemp(dir));
    long dead = dead_pid();
    char out[64];
    snprintf(out, sizeof(out), "%s/out.hlo", dir);
    static const struct {
        const char *mid, *tail; /* the name: output, mid, a pid, tail */
        bool alive;      /* the pid is ours (a live process) instead of a dead one */
        time_t age_s;
        bool swept;
    } k_files[] = {
        {".tmp.", "",         false, 3600, true },
        {".tmp.", "-journal", false, 3600, true }, /* SQLite's, beside a temporary trace */
        {".tmp.", "",         true,  3600, false}, /* its process still runs */
        {".tmp.", ".bak",     false, 3600, false}, /* not a name we make */
        {".tmp.", "-wal2",    false, 3600, false},
        {".old.", "",         false, 3600, false},
    };
    char names[SL_COUNTOF(k_files)][128];
    for (size_t k = 0; k < SL_COUNTOF(k_files); k++) {
        snprintf(names[k], sizeof(names[k]), "%s%s%ld%s", out, k_files[k].mid,
                 k_files[k].alive ? (long)getppid() : dead, k_files[k].tail);
        touch(names[k], k_files[k].age_s);
    }
    /* Written within the last minute: maybe a live process elsewhere; left alone. */
    char young[128];
    snprintf(young, sizeof(young), "%s.tmp.%ld", out, dead + 1);
    touch(young, 0);
    bool young_dead = kill((pid_t)(dead + 1), 0) != 0;

    SlError err = {0};
    assert_int_equal(sl_file_write_atomic(out, "new", 3, &err), SL_OK);
    struct stat st;
    for (size_t k = 0; k < SL_COUNTOF(k_files); k++) {
        bool there = stat(names[k], &st) == 0;
        if (there == k_files[k].swept)
            fail_msg("%s: %s", names[k], there ? "not swept" : "swept");
        unlink(names[k]);
    }
    if (young_dead)
        assert_int_equal(stat(young, &st), 0);
    unlink(young);
    assert_int_equal(stat(out, &st), 0);
    assert_int_equal(st.st_size, 3);
    unlink(out);
    assert_int_equal(rmdir(dir), 0);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arena_alignment_and_zeroing),
        cmocka_unit_test(test_arena_mark_release),
        cmocka_unit_test(test_arena_overflow_is_sticky),
        cmocka_unit_test(test_intern_identity),
        cmocka_unit_test(test_buf_formatting),
        cmocka_unit_test(test_buf_sizes_and_durations),
        cmocka_unit_test(test_map_put_get),
        cmocka_unit_test(test_first_error_wins),
        cmocka_unit_test(test_atomic_write_keeps_devices),
        cmocka_unit_test(test_arena_zeroing_after_release),
        cmocka_unit_test(test_reserve_keeps_contents),
        cmocka_unit_test(test_buf_spill_streams_pieces),
        cmocka_unit_test(test_intern_slot_forms),
        cmocka_unit_test(test_out_file_commit_and_abort),
        cmocka_unit_test(test_file_text_mapped_and_released),
        cmocka_unit_test(test_file_text_truncated_while_read),
        cmocka_unit_test(test_tmp_removed_on_signal),
        cmocka_unit_test(test_tmp_sweep_only_stale_ours),
        cmocka_unit_test(test_arena_extend_in_place),
        cmocka_unit_test(test_arena_big_chunks),
        cmocka_unit_test(test_arena_release_reuses_chunk),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
