/* util.c - string slices, errors, byte buffers, growable arrays, the u64 map and file I/O. */
#include "base.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

SlStr
sl_str(const char *cstr)
{
    SlStr s = {cstr ? cstr : "", cstr ? strlen(cstr) : 0};
    return s;
}

bool
sl_str_eq(SlStr a, SlStr b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

bool
sl_str_eq_cstr(SlStr a, const char *cstr)
{
    return sl_str_eq(a, sl_str(cstr));
}

SlStatus
sl_fail(SlError *err, SlStatus st, SlSrcLoc loc, const char *fmt, ...)
{
    if (!err || err->status != SL_OK)
        return st;
    err->status = st;
    err->loc = loc;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
    return st;
}

const char *
sl_status_name(SlStatus st)
{
    switch (st) {
    case SL_OK: return "ok";
    case SL_ERR_PARSE: return "parse error";
    case SL_ERR_INVALID: return "invalid input";
    case SL_ERR_UNSUPPORTED: return "unsupported";
    case SL_ERR_IO: return "i/o error";
    case SL_ERR_NOMEM: return "out of memory";
    case SL_ERR_DB: return "database error";
    case SL_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

/* ---- SlBuf ---- */

void
sl_buf_init(SlBuf *b)
{
    b->data = NULL;
    b->len = b->cap = 0;
    b->failed = false;
}

void
sl_buf_fini(SlBuf *b)
{
    free(b->data);
    sl_buf_init(b);
}

void
sl_buf_clear(SlBuf *b)
{
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
}

static bool
buf_reserve(SlBuf *b, size_t extra)
{
    if (b->failed)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1) {
        if (cap > SIZE_MAX / 2) {
            b->failed = true;
            return false;
        }
        cap *= 2;
    }
    char *p = realloc(b->data, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->data = p;
    b->cap = cap;
    return true;
}

void
sl_buf_append(SlBuf *b, const char *p, size_t n)
{
    if (!buf_reserve(b, n))
        return;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void
sl_buf_puts(SlBuf *b, const char *s)
{
    sl_buf_append(b, s, strlen(s));
}

void
sl_buf_putc(SlBuf *b, char c)
{
    sl_buf_append(b, &c, 1);
}

void
sl_buf_put_str(SlBuf *b, SlStr s)
{
    sl_buf_append(b, s.ptr, s.len);
}

void
sl_buf_put_i64(SlBuf *b, int64_t v)
{
    char tmp[24];
    char *e = tmp + sizeof(tmp);
    char *p = e;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do {
        *--p = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0)
        *--p = '-';
    sl_buf_append(b, p, (size_t)(e - p));
}

void
sl_buf_vprintf(SlBuf *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || !buf_reserve(b, (size_t)n))
        return;
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void
sl_buf_printf(SlBuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    sl_buf_vprintf(b, fmt, ap);
    va_end(ap);
}

/* ---- SlVec ---- */

bool
sl_vec_grow(SlVec *v, size_t elem_size)
{
    if (v->len < v->cap)
        return true;
    size_t cap = v->cap ? v->cap * 2 : 8;
    if (cap > SIZE_MAX / elem_size)
        return false;
    void *p = realloc(v->data, cap * elem_size);
    if (!p)
        return false;
    v->data = p;
    v->cap = cap;
    return true;
}

void
sl_vec_fini(SlVec *v)
{
    free(v->data);
    v->data = NULL;
    v->len = v->cap = 0;
}

/* ---- hashing and SlMap ---- */

uint64_t
sl_hash_bytes(const void *p, size_t n)
{
    /* FNV-1a, then a final mix so that low bits are usable for power-of-two tables. */
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= s[i];
        h *= 1099511628211ull;
    }
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h;
}

static uint64_t
mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return x;
}

void
sl_map_init(SlMap *m)
{
    m->slots = NULL;
    m->cap = m->count = 0;
}

void
sl_map_fini(SlMap *m)
{
    free(m->slots);
    sl_map_init(m);
}

#define MAP_MIN_CAP ((size_t)64)

static bool
map_resize(SlMap *m, size_t cap)
{
    if (cap > SIZE_MAX / sizeof(SlMapSlot))
        return false;
    SlMapSlot *slots = malloc(cap * sizeof(SlMapSlot));
    if (!slots)
        return false;
    for (size_t i = 0; i < cap; i++)
        slots[i].key = SL_MAP_EMPTY;
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].key == SL_MAP_EMPTY)
            continue;
        size_t j = mix64(m->slots[i].key) & (cap - 1);
        while (slots[j].key != SL_MAP_EMPTY)
            j = (j + 1) & (cap - 1);
        slots[j] = m->slots[i];
    }
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    return true;
}

bool
sl_map_reserve(SlMap *m, size_t n)
{
    size_t cap = m->cap ? m->cap : MAP_MIN_CAP;
    while (cap / 2 < n) {
        if (cap > SIZE_MAX / 4 / sizeof(SlMapSlot))
            return false;
        cap *= 2;
    }
    return cap == m->cap || map_resize(m, cap);
}

bool
sl_map_put(SlMap *m, uint64_t key, uint64_t val)
{
    if ((m->count + 1) * 2 > m->cap && !map_resize(m, m->cap ? m->cap * 2 : MAP_MIN_CAP))
        return false;
    size_t mask = m->cap - 1;
    size_t j = mix64(key) & mask;
    while (m->slots[j].key != SL_MAP_EMPTY && m->slots[j].key != key)
        j = (j + 1) & mask;
    if (m->slots[j].key == SL_MAP_EMPTY) {
        m->slots[j].key = key;
        m->count++;
    }
    m->slots[j].val = val;
    return true;
}

bool
sl_map_get(const SlMap *m, uint64_t key, uint64_t *val)
{
    if (!m->cap)
        return false;
    size_t mask = m->cap - 1;
    size_t j = mix64(key) & mask;
    for (;;) {
        uint64_t k = m->slots[j].key;
        if (k == SL_MAP_EMPTY)
            return false;
        if (k == key) {
            if (val)
                *val = m->slots[j].val;
            return true;
        }
        j = (j + 1) & mask;
    }
}

/* ---- files ---- */

SlStatus
sl_file_read(const char *path, SlBuf *out, SlError *err)
{
    SlSrcLoc loc = {path, 0, 0};
    bool is_stdin = strcmp(path, "-") == 0;
    FILE *f = is_stdin ? stdin : fopen(path, "rb");
    if (!f)
        return sl_fail(err, SL_ERR_IO, loc, "cannot open: %s", strerror(errno));
    /* A regular file is read in one piece into a buffer of its size (+1 for the NUL, +1 to
     * see end of file); pipes and files that grew are read on with doubling. */
    struct stat st;
    if (fstat(fileno(f), &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        (uint64_t)st.st_size < SIZE_MAX / 2 && !out->failed &&
        out->cap < out->len + (size_t)st.st_size + 2) {
        char *p = realloc(out->data, out->len + (size_t)st.st_size + 2);
        if (p) {
            out->data = p;
            out->cap = out->len + (size_t)st.st_size + 2;
        }
    }
    for (;;) {
        if (!buf_reserve(out, out->cap - out->len > 1 ? 0 : (size_t)1 << 16))
            break;
        size_t room = out->cap - out->len - 1;
        size_t n = fread(out->data + out->len, 1, room, f);
        out->len += n;
        if (n < room)
            break;
    }
    bool bad = ferror(f);
    if (!is_stdin)
        fclose(f);
    if (bad)
        return sl_fail(err, SL_ERR_IO, loc, "read failed");
    sl_buf_append(out, "", 0); /* guarantees a NUL terminator even for empty input */
    if (out->failed)
        return sl_fail(err, SL_ERR_NOMEM, loc, "out of memory reading file");
    return SL_OK;
}

static SlStatus
write_in_place(const char *path, const char *data, size_t n, SlError *err)
{
    SlSrcLoc loc = {path, 0, 0};
    FILE *f = fopen(path, "wb");
    if (!f)
        return sl_fail(err, SL_ERR_IO, loc, "cannot open for writing: %s", strerror(errno));
    bool ok = fwrite(data, 1, n, f) == n;
    ok = (fclose(f) == 0) && ok;
    if (!ok)
        return sl_fail(err, SL_ERR_IO, loc, "cannot write: %s", strerror(errno));
    return SL_OK;
}

SlStatus
sl_file_write_atomic(const char *path, const char *data, size_t n, SlError *err)
{
    SlSrcLoc loc = {path, 0, 0};
    if (strcmp(path, "-") == 0) {
        if (fwrite(data, 1, n, stdout) != n || fflush(stdout) != 0)
            return sl_fail(err, SL_ERR_IO, loc, "write to stdout failed");
        return SL_OK;
    }
    /* Only a regular file (or a new one) is replaced by rename: a device, FIFO or socket
     * (e.g. -o /dev/null) is written in place, never swapped for a file. */
    struct stat st_path;
    if (stat(path, &st_path) == 0 && !S_ISREG(st_path.st_mode))
        return write_in_place(path, data, n, err);
    size_t plen = strlen(path);
    char *tmp = malloc(plen + 32);
    if (!tmp)
        return sl_fail(err, SL_ERR_NOMEM, loc, "out of memory");
    snprintf(tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        SlStatus st = sl_fail(err, SL_ERR_IO, loc, "cannot create: %s", strerror(errno));
        free(tmp);
        return st;
    }
    bool ok = fwrite(data, 1, n, f) == n;
    ok = (fclose(f) == 0) && ok;
    if (!ok || rename(tmp, path) != 0) {
        SlStatus st = sl_fail(err, SL_ERR_IO, loc, "cannot write: %s", strerror(errno));
        remove(tmp);
        free(tmp);
        return st;
    }
    free(tmp);
    return SL_OK;
}
