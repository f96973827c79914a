/* util.c - string slices, errors, byte buffers, growable arrays, the u64 map and file I/O. */
#define _DEFAULT_SOURCE /* madvise(2): MADV_DONTNEED, which posix_madvise does not carry out */
#include "base.h"
#include "base_int.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
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
    b->spill = NULL;
    b->spill_ctx = NULL;
    b->spilled = 0;
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
sl_buf_spill(SlBuf *b, bool all)
{
    if (!b->spill || b->len == 0 || (!all && b->len < SL_BUF_SPILL_BYTES))
        return;
    b->spill(b->spill_ctx, b->data, b->len);
    b->spilled += b->len;
    sl_buf_clear(b);
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

/* Three significant digits of 0 <= v < 10000 without an exponent (10000 and up stay whole). */
static void
put_3sig(SlBuf *b, double v)
{
    if (v < 9.995)
        sl_buf_printf(b, "%.2f", v);
    else if (v < 99.95)
        sl_buf_printf(b, "%.1f", v);
    else
        sl_buf_printf(b, "%.0f", v);
}

void
sl_buf_put_size(SlBuf *b, double bytes)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    if (bytes != bytes) { /* NaN: never from a cost model, but never print garbage */
        sl_buf_puts(b, "? B");
        return;
    }
    if (bytes < 0)
        sl_buf_putc(b, '-');
    double v = fabs(bytes);
    size_t u = 0;
    /* 1023.6 B rounds to 1024 B: that is 1.00 KiB, so compare after rounding */
    while (u + 1 < SL_COUNTOF(units) && (u == 0 ? floor(v + 0.5) : v) >= 1024.0) {
        v /= 1024.0;
        u++;
    }
    if (u > 0 && v >= 1023.5 && u + 1 < SL_COUNTOF(units)) { /* 1023.7 KiB prints as 1.00 MiB */
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        sl_buf_printf(b, "%.0f B", floor(v + 0.5));
    else {
        put_3sig(b, v);
        sl_buf_printf(b, " %s", units[u]);
    }
}

void
sl_buf_put_duration_us(SlBuf *b, double us)
{
    if (us != us) {
        sl_buf_puts(b, "? us");
        return;
    }
    if (us < 0)
        sl_buf_putc(b, '-');
    double v = fabs(us);
    const char *unit = "us";
    if (v >= 999.5 * 1000) {
        v /= 1e6;
        unit = "s";
    } else if (v >= 999.5) {
        v /= 1e3;
        unit = "ms";
    }
    if (v == 0)
        sl_buf_puts(b, "0");
    else
        put_3sig(b, v);
    sl_buf_printf(b, " %s", unit);
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
    sl_table_free(m->slots, m->cap * sizeof(SlMapSlot));
    sl_map_init(m);
}

#define MAP_MIN_CAP ((size_t)64)

static bool
map_resize(SlMap *m, size_t cap)
{
    if (cap > SIZE_MAX / sizeof(SlMapSlot))
        return false;
    SlMapSlot *slots = sl_table_alloc(cap * sizeof(SlMapSlot));
    if (!slots)
        return false;
    memset(slots, 0xff, cap * sizeof(SlMapSlot)); /* every key SL_MAP_EMPTY */
    for (size_t i = 0; i < m->cap; i++) {
        if (m->slots[i].key == SL_MAP_EMPTY)
            continue;
        size_t j = mix64(m->slots[i].key) & (cap - 1);
        while (slots[j].key != SL_MAP_EMPTY)
            j = (j + 1) & (cap - 1);
        slots[j] = m->slots[i];
    }
    sl_table_free(m->slots, m->cap * sizeof(SlMapSlot));
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

void
sl_map_prefetch(const SlMap *m, uint64_t key)
{
    if (m->cap)
        __builtin_prefetch(&m->slots[mix64(key) & (m->cap - 1)]);
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

/* ---- SIGBUS on a mapped input that shrinks ----
 * Reading a page of a mapped file past its current end raises SIGBUS: a file truncated or
 * rewritten while shardlens reads it would crash it. The handler turns that into the usual
 * failure instead: it names the file, removes the temporary output file still being written
 * (the destination itself is only ever replaced by a rename), and exits with status 2. Its
 * state is file-scope because a signal handler can reach nothing else; it is written only
 * outside the handler and read only inside it. */
#define BUS_GUARD_MAPS 4
static struct {
    struct { const char *volatile map; size_t len; const char *path; } maps[BUS_GUARD_MAPS];
} g_bus_guard;

/* ---- temporary files ----
 * The temporaries being written (SlOutFile's, analyze's trace), so that a run ended by a
 * signal removes them: the handlers below read this table and nothing else. Slots are set
 * and cleared only outside the handlers. */
#define TMP_GUARD_SLOTS 8
static const char *volatile g_tmp_paths[TMP_GUARD_SLOTS];

static void
tmp_remove_all(void)
{
    for (int k = 0; k < TMP_GUARD_SLOTS; k++) {
        const char *p = g_tmp_paths[k];
        if (p)
            unlink(p);
    }
}

static void
on_fatal_signal(int sig)
{
    tmp_remove_all();
    /* Then die of the signal, as if no handler were installed (the exit status tells). */
    signal(sig, SIG_DFL);
    raise(sig);
}

static void
tmp_guard_install(void)
{
    static const int k_sigs[] = {SIGINT, SIGTERM, SIGHUP};
    for (size_t i = 0; i < SL_COUNTOF(k_sigs); i++) {
        struct sigaction old;
        if (sigaction(k_sigs[i], NULL, &old) != 0 || old.sa_handler == SIG_IGN)
            continue; /* ignored (nohup): stays ignored */
        if (old.sa_handler == on_fatal_signal)
            continue;
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_fatal_signal;
        sigemptyset(&sa.sa_mask);
        (void)sigaction(k_sigs[i], &sa, NULL);
    }
}

bool
sl_tmp_register(const char *path)
{
    tmp_guard_install();
    for (int k = 0; k < TMP_GUARD_SLOTS; k++) {
        if (!g_tmp_paths[k]) {
            g_tmp_paths[k] = path;
            return true;
        }
    }
    return false;
}

void
sl_tmp_unregister(const char *path)
{
    for (int k = 0; k < TMP_GUARD_SLOTS; k++)
        if (g_tmp_paths[k] == path)
            g_tmp_paths[k] = NULL;
}

/* Leftovers of a run killed before it could clean up (kill -9, a crash, a power cut): named
 * PREFIX<pid>, or that with one of SQLite's suffixes, in PREFIX's directory. Only files that
 * are certainly stale go: regular files we own, whose process no longer exists and that
 * nothing has written for a minute (a process of the same pid on another machine sharing the
 * directory would still be writing). */
void
sl_tmp_sweep(const char *prefix)
{
    static const char *const k_suffixes[] = {"", "-journal", "-wal", "-shm"};
    const char *slash = strrchr(prefix, '/');
    size_t dir_len = slash ? (size_t)(slash - prefix) + 1 : 0;
    const char *base = prefix + dir_len;
    size_t base_len = strlen(base);
    char *dir = malloc(dir_len + 2);
    if (!dir)
        return;
    if (dir_len)
        memcpy(dir, prefix, dir_len);
    else
        dir[dir_len++] = '.';
    dir[dir_len] = '\0';
    DIR *d = opendir(dir);
    struct dirent *e;
    time_t now = time(NULL);
    while (d && (e = readdir(d))) {
        const char *n = e->d_name;
        if (strncmp(n, base, base_len) != 0)
            continue;
        const char *q = n + base_len;
        long pid = 0;
        int digits = 0;
        while (*q >= '0' && *q <= '9' && digits < 10) {
            pid = pid * 10 + (*q++ - '0');
            digits++;
        }
        bool suffix_ok = false;
        for (size_t i = 0; i < SL_COUNTOF(k_suffixes); i++)
            suffix_ok = suffix_ok || strcmp(q, k_suffixes[i]) == 0;
        if (!digits || !suffix_ok || pid <= 0 || pid == (long)getpid())
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* alive (or not ours to signal): not stale */
        size_t len = strlen(dir) + 1 + strlen(n) + 1;
        char *full = malloc(len);
        if (!full)
            break;
        snprintf(full, len, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", n);
        struct stat sb;
        if (lstat(full, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_uid == geteuid() &&
            now - sb.st_mtime >= 60)
            (void)unlink(full);
        free(full);
    }
    if (d)
        closedir(d);
    free(dir);
}

static void
put_fd2(const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, s, n);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

static void
on_sigbus(int sig, siginfo_t *info, void *uctx)
{
    (void)uctx;
    const char *at = info ? (const char *)info->si_addr : NULL;
    for (int k = 0; k < BUS_GUARD_MAPS; k++) {
        const char *m = g_bus_guard.maps[k].map;
        if (!m || !at || at < m || at >= m + g_bus_guard.maps[k].len)
            continue;
        tmp_remove_all();
        put_fd2(g_bus_guard.maps[k].path);
        put_fd2(": error: the file changed while it was being read (it is shorter now); "
                "nothing was written\n");
        _exit(2);
    }
    /* Not ours: the default action, as if no handler were installed. */
    signal(sig, SIG_DFL);
    raise(sig);
}

static void
bus_guard_add(const void *map, size_t len, const char *path)
{
    /* Installed on every mapping, not once: whoever replaced the handler since (a test
     * harness does, per test) had its turn. */
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGBUS, &sa, NULL) != 0)
        return;
    for (int k = 0; k < BUS_GUARD_MAPS; k++) {
        if (!g_bus_guard.maps[k].map) {
            g_bus_guard.maps[k].len = len;
            g_bus_guard.maps[k].path = path;
            g_bus_guard.maps[k].map = map;
            return;
        }
    }
}

static void
bus_guard_remove(const void *map)
{
    for (int k = 0; k < BUS_GUARD_MAPS; k++)
        if (g_bus_guard.maps[k].map == map)
            g_bus_guard.maps[k].map = NULL;
}

SlStatus
sl_file_text_load(SlFileText *t, const char *path, SlError *err)
{
    memset(t, 0, sizeof(*t));
    sl_buf_init(&t->buf);
    if (strcmp(path, "-") != 0) {
        SlSrcLoc loc = {path, 0, 0};
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            return sl_fail(err, SL_ERR_IO, loc, "cannot open: %s", strerror(errno));
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
            (uint64_t)st.st_size < SIZE_MAX / 2) {
            size_t n = (size_t)st.st_size;
            void *p = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
            if (p != MAP_FAILED) {
                madvise(p, n, MADV_SEQUENTIAL); /* read ahead: the parser reads it once, in order */
                close(fd);
                t->map = p;
                t->map_len = n;
                t->text.ptr = p;
                t->text.len = n;
                bus_guard_add(p, n, path);
                return SL_OK;
            }
        }
        close(fd);
    }
    SlStatus st = sl_file_read(path, &t->buf, err);
    t->text = sl_buf_str(&t->buf);
    return st;
}

void
sl_file_text_release(SlFileText *t)
{
    if (t->map)
        madvise(t->map, t->map_len, MADV_DONTNEED);
}

void
sl_file_text_release_before(SlFileText *t, const char *p)
{
    if (!t->map || p < (const char *)t->map || p > (const char *)t->map + t->map_len)
        return;
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0)
        return;
    size_t upto = (size_t)(p - (const char *)t->map) / (size_t)page * (size_t)page;
    if (upto <= t->released)
        return;
    madvise((char *)t->map + t->released, upto - t->released, MADV_DONTNEED);
    t->released = upto;
}

void
sl_file_text_fini(SlFileText *t)
{
    if (t->map) {
        bus_guard_remove(t->map);
        munmap(t->map, t->map_len);
    }
    sl_buf_fini(&t->buf);
    memset(t, 0, sizeof(*t));
    sl_buf_init(&t->buf);
}

SlStatus
sl_out_open(SlOutFile *o, const char *path)
{
    memset(o, 0, sizeof(*o));
    o->path = path;
    SlSrcLoc loc = {path, 0, 0};
    if (strcmp(path, "-") == 0) {
        o->file = stdout;
        return SL_OK;
    }
    /* Only a regular file (or a new one) is replaced by rename: a device, FIFO or socket
     * (e.g. -o /dev/null) is written in place, never swapped for a file. */
    struct stat st_path;
    if (stat(path, &st_path) == 0 && !S_ISREG(st_path.st_mode)) {
        if (!(o->file = fopen(path, "wb")))
            return sl_fail(&o->err, SL_ERR_IO, loc, "cannot open for writing: %s",
                           strerror(errno));
        return SL_OK;
    }
    size_t plen = strlen(path);
    if (!(o->tmp = malloc(plen + 32)))
        return sl_fail(&o->err, SL_ERR_NOMEM, loc, "out of memory");
    snprintf(o->tmp, plen + 32, "%s.tmp.", path);
    sl_tmp_sweep(o->tmp);
    snprintf(o->tmp, plen + 32, "%s.tmp.%ld", path, (long)getpid());
    sl_tmp_register(o->tmp); /* registered first: a signal between open and here leaves none */
    if (!(o->file = fopen(o->tmp, "wb"))) {
        int e = errno;
        sl_tmp_unregister(o->tmp);
        free(o->tmp);
        o->tmp = NULL;
        return sl_fail(&o->err, SL_ERR_IO, loc, "cannot create: %s", strerror(e));
    }
    return SL_OK;
}

SlStatus
sl_out_write(SlOutFile *o, const char *p, size_t n)
{
    if (o->err.status)
        return o->err.status;
    SlSrcLoc loc = {o->path, 0, 0};
    if (!o->file)
        return sl_fail(&o->err, SL_ERR_INTERNAL, loc, "write to a file that is not open");
    if (n && fwrite(p, 1, n, o->file) != n) {
        if (o->file == stdout) {
            SlSrcLoc out = {SL_STDOUT_NAME, 0, 0};
            return sl_fail(&o->err, SL_ERR_IO, out, "cannot write: %s", strerror(errno));
        }
        return sl_fail(&o->err, SL_ERR_IO, loc, "cannot write: %s", strerror(errno));
    }
    o->bytes += n;
    return SL_OK;
}

SlStatus
sl_out_commit(SlOutFile *o)
{
    SlSrcLoc loc = {o->path, 0, 0};
    FILE *f = o->file;
    o->file = NULL;
    if (!f) {
        if (!o->err.status)
            sl_fail(&o->err, SL_ERR_INTERNAL, loc, "commit of a file that is not open");
    } else if (f == stdout) {
        SlSrcLoc out = {SL_STDOUT_NAME, 0, 0};
        if (!o->err.status && fflush(stdout) != 0)
            sl_fail(&o->err, SL_ERR_IO, out, "cannot write: %s", strerror(errno));
    } else {
        int e = 0;
        if (fclose(f) != 0)
            e = errno;
        if (!o->err.status && e)
            sl_fail(&o->err, SL_ERR_IO, loc, "cannot write: %s", strerror(e));
        if (!o->err.status && o->tmp && rename(o->tmp, o->path) != 0)
            sl_fail(&o->err, SL_ERR_IO, loc, "cannot write: %s", strerror(errno));
    }
    if (o->tmp) {
        if (o->err.status)
            remove(o->tmp);
        sl_tmp_unregister(o->tmp);
        free(o->tmp);
        o->tmp = NULL;
    }
    return o->err.status;
}

void
sl_out_abort(SlOutFile *o)
{
    if (o->file && o->file != stdout)
        fclose(o->file);
    o->file = NULL;
    if (o->tmp) {
        remove(o->tmp);
        sl_tmp_unregister(o->tmp);
        free(o->tmp);
        o->tmp = NULL;
    }
}

SlStatus
sl_file_write_atomic(const char *path, const char *data, size_t n, SlError *err)
{
    SlOutFile o;
    if (sl_out_open(&o, path) == SL_OK && sl_out_write(&o, data, n) == SL_OK)
        sl_out_commit(&o);
    else
        sl_out_abort(&o);
    if (o.err.status)
        return sl_fail(err, o.err.status, o.err.loc, "%s", o.err.msg);
    return SL_OK;
}
