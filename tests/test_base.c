/* test_base.c - arenas, interning, buffers, the u64 map and error recording. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
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

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_arena_alignment_and_zeroing),
        cmocka_unit_test(test_arena_mark_release),
        cmocka_unit_test(test_arena_overflow_is_sticky),
        cmocka_unit_test(test_intern_identity),
        cmocka_unit_test(test_buf_formatting),
        cmocka_unit_test(test_map_put_get),
        cmocka_unit_test(test_first_error_wins),
        cmocka_unit_test(test_atomic_write_keeps_devices),
        cmocka_unit_test(test_arena_zeroing_after_release),
        cmocka_unit_test(test_reserve_keeps_contents),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
