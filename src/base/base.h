/* base.h - the foundation every other module stands on: string slices, arenas with stage
 * lifetimes, interned names, a growable byte buffer, a u64 hash map, and errors with a source
 * location. Owns: memory and error plumbing. Does not own: anything HLO-specific.
 * Invariant: nothing here calls exit() or abort(); failures are reported through SlStatus. */
#ifndef SHARDLENS_BASE_H
#define SHARDLENS_BASE_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_COUNTOF(a) (sizeof(a) / sizeof((a)[0]))
/* For "cannot happen" conditions that a release build must survive: true when it happened. */
#define SL_NEVER(cond) (!!(cond))

/* ---- string slices ------------------------------------------------------------------ */

typedef struct SlStr {
    const char *ptr;
    size_t len;
} SlStr;

#define SL_STR_ARG(s) (int)(s).len, (s).ptr
SlStr sl_str(const char *cstr);
bool sl_str_eq(SlStr a, SlStr b);
bool sl_str_eq_cstr(SlStr a, const char *cstr);

/* ---- errors --------------------------------------------------------------------------- */

typedef enum SlStatus {
    SL_OK = 0,
    SL_ERR_PARSE,       /* malformed HLO text */
    SL_ERR_INVALID,     /* well-formed but inconsistent: shape, sharding, mesh */
    SL_ERR_UNSUPPORTED, /* valid input we do not handle yet */
    SL_ERR_IO,
    SL_ERR_NOMEM,
    SL_ERR_DB,       /* sqlite failure; msg carries sqlite3_errmsg() */
    SL_ERR_INTERNAL, /* a broken invariant in our code: a bug */
} SlStatus;

typedef struct SlSrcLoc {
    const char *path; /* NULL when unknown; not owned */
    uint32_t line;    /* 1-based; 0 when unknown */
    uint32_t col;     /* 1-based; 0 when unknown */
} SlSrcLoc;

#define SL_ERROR_MSG_BYTES 512
typedef struct SlError {
    SlStatus status; /* SL_OK until the first failure */
    SlSrcLoc loc;
    char msg[SL_ERROR_MSG_BYTES];
} SlError;

/* Records the error unless one is already recorded (the first error wins), and returns `st`:
 *   return sl_fail(err, SL_ERR_PARSE, loc, "expected ']', got '%.*s'", SL_STR_ARG(tok)); */
SlStatus sl_fail(SlError *err, SlStatus st, SlSrcLoc loc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
const char *sl_status_name(SlStatus st);

/* ---- arenas --------------------------------------------------------------------------- */

/* A bump allocator freed all at once. Failure is sticky: once an allocation fails every later
 * one returns NULL and sl_arena_failed() is true, so stages check once at their boundary. */
typedef struct SlArenaChunk SlArenaChunk;
typedef struct SlArena {
    SlArenaChunk *head; /* current chunk; older chunks hang off it */
    size_t total_bytes; /* bytes reserved from the heap, for memory reports (spare excluded) */
    bool failed;
    SlArenaChunk *spare; /* the largest small chunk sl_arena_release freed, kept for reuse:
                            a scratch arena that crosses a chunk boundary on every
                            mark/release cycle would otherwise get and clear one each time */
} SlArena;

/* A position in an arena to roll back to (scratch use). */
typedef struct SlArenaMark {
    SlArenaChunk *chunk;
    size_t used;
} SlArenaMark;

#define SL_ARENA_CHUNK_BYTES ((size_t)64 * 1024)

void sl_arena_init(SlArena *a);
void sl_arena_fini(SlArena *a);
void *sl_arena_alloc(SlArena *a, size_t size, size_t align); /* zeroed; NULL on failure */
/* Not zeroed: for callers that write every byte before reading any. */
void *sl_arena_alloc_uninit(SlArena *a, size_t size, size_t align);
void *sl_arena_alloc_array(SlArena *a, size_t n, size_t size, size_t align); /* overflow-checked */
char *sl_arena_strndup(SlArena *a, const char *s, size_t n);                 /* NUL-terminated */
void *sl_arena_memdup(SlArena *a, const void *p, size_t size, size_t align);
/* Grows `p`, the arena's latest allocation of `old_size` bytes, to `new_size` in place when the
 * chunk has room (the new bytes are not zeroed); false (nothing changed) otherwise. */
bool sl_arena_extend(SlArena *a, void *p, size_t old_size, size_t new_size);
bool sl_arena_failed(const SlArena *a);
SlArenaMark sl_arena_mark(const SlArena *a);
void sl_arena_release(SlArena *a, SlArenaMark m); /* frees everything allocated after m */

#define SL_NEW(a, T) ((T *)sl_arena_alloc((a), sizeof(T), _Alignof(T)))
#define SL_NEW_ARRAY(a, T, n) ((T *)sl_arena_alloc_array((a), (n), sizeof(T), _Alignof(T)))
#define SL_DUP_ARRAY(a, T, p, n)                                                               \
    ((T *)sl_arena_memdup((a), (p), (size_t)(n) * sizeof(T), _Alignof(T)))

/* ---- interned names ------------------------------------------------------------------- */

/* An interned string: equal text <=> equal pointer. The record lives in the interner's arena. */
typedef struct SlSymRec {
    uint32_t len;
    uint32_t hash;
    char text[]; /* NUL-terminated */
} SlSymRec;
typedef const SlSymRec *SlSym;

/* One word per slot: the record's address, with 16 bits of its hash in the top bits (unused by
 * user-space addresses) so that probes need not touch the record; 0 is empty. */
typedef struct SlInternSlot {
    uint64_t bits;
} SlInternSlot;
typedef struct SlInterner {
    SlArena *arena;      /* records are allocated here; not owned */
    SlInternSlot *slots; /* open addressing, heap; power-of-two capacity */
    size_t cap, count;
    bool plain; /* a record's address used the top bits: slots hold bare addresses */
} SlInterner;

void sl_interner_init(SlInterner *in, SlArena *arena);
void sl_interner_fini(SlInterner *in);
SlSym sl_intern(SlInterner *in, SlStr s); /* NULL only on allocation failure */
/* Sizes the table for `n` names up front (no rehashing below that); false on failure. */
bool sl_interner_reserve(SlInterner *in, size_t n);
SlSym sl_intern_cstr(SlInterner *in, const char *s);
/* Starts loading the table slot where `s` would be found: a hint, for a caller that knows a
 * name it will intern after some other work (a big table misses the cache on every probe). */
void sl_intern_prefetch(const SlInterner *in, SlStr s);
static inline SlStr
sl_sym_str(SlSym s)
{
    SlStr r = {s ? s->text : "", s ? s->len : 0};
    return r;
}
static inline const char *
sl_sym_cstr(SlSym s)
{
    return s ? s->text : "";
}

/* ---- growable byte buffer (heap) ----------------------------------------------------- */

typedef struct SlBuf {
    char *data; /* always NUL-terminated when len > 0 or after any append */
    size_t len, cap;
    bool failed; /* sticky allocation failure */
    /* Streaming (optional): sl_buf_spill hands the bytes to `spill` and empties the buffer, so
     * a long text never sits in memory whole. NULL: the buffer keeps everything. */
    void (*spill)(void *ctx, const char *p, size_t n);
    void *spill_ctx;
    uint64_t spilled; /* bytes handed to `spill` so far */
} SlBuf;

/* sl_buf_spill hands the buffer on once it holds this much (cache-sized, so that the text
 * is written while it is still in cache). */
#define SL_BUF_SPILL_BYTES ((size_t)64 * 1024)

void sl_buf_init(SlBuf *b);
void sl_buf_fini(SlBuf *b);
void sl_buf_clear(SlBuf *b);
void sl_buf_append(SlBuf *b, const char *p, size_t n);
void sl_buf_puts(SlBuf *b, const char *s);
void sl_buf_putc(SlBuf *b, char c);
void sl_buf_put_str(SlBuf *b, SlStr s);
void sl_buf_put_i64(SlBuf *b, int64_t v);
void sl_buf_printf(SlBuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sl_buf_vprintf(SlBuf *b, const char *fmt, va_list ap);
/* Numbers for people. Bytes: whole bytes below 1 KiB ("512 B"), else three significant digits
 * in KiB/MiB/GiB/TiB/PiB ("1.50 KiB", "15.0 MiB", "150 GiB"). Microseconds: three significant
 * digits in us, ms or s ("0.12 us", "30.1 us", "1.23 ms", "4.56 s"). Negative values keep
 * their sign. Exact figures belong in JSON and SQL, not here. */
void sl_buf_put_size(SlBuf *b, double bytes);
void sl_buf_put_duration_us(SlBuf *b, double us);
/* For writers that only append (never look back at b->data): with a spill function set and at
 * least SL_BUF_SPILL_BYTES held (any amount when `all`), hands the bytes on and empties b. */
void sl_buf_spill(SlBuf *b, bool all);
static inline SlStr
sl_buf_str(const SlBuf *b)
{
    SlStr r = {b->data ? b->data : "", b->len};
    return r;
}

/* ---- growable array (heap) ------------------------------------------------------------ */

typedef struct SlVec {
    void *data;
    size_t len, cap; /* in elements */
} SlVec;

/* Makes room for one more element of `elem_size` bytes; returns false on allocation failure. */
bool sl_vec_grow(SlVec *v, size_t elem_size);
void sl_vec_fini(SlVec *v);
#define SL_VEC_PUSH(v, T, x)                                                                   \
    (sl_vec_grow((v), sizeof(T)) ? (((T *)(v)->data)[(v)->len++] = (x), true) : false)
#define SL_VEC_AT(v, T, i) (((T *)(v)->data)[i])

/* ---- u64 -> u64 hash map (heap) -------------------------------------------------------- */

/* Keys are any u64 except SL_MAP_EMPTY (pointers cast through uintptr_t are fine). Iteration
 * order is unspecified: never let it reach output. */
#define SL_MAP_EMPTY UINT64_MAX
typedef struct SlMapSlot {
    uint64_t key, val;
} SlMapSlot;
typedef struct SlMap {
    SlMapSlot *slots; /* key and value side by side: one cache line per probe */
    size_t cap, count;
} SlMap;

void sl_map_init(SlMap *m);
void sl_map_fini(SlMap *m);
/* Sizes the table for `n` keys up front (no rehashing below that); false on failure. */
bool sl_map_reserve(SlMap *m, size_t n);
bool sl_map_put(SlMap *m, uint64_t key, uint64_t val); /* false on allocation failure */
bool sl_map_get(const SlMap *m, uint64_t key, uint64_t *val);
void sl_map_prefetch(const SlMap *m, uint64_t key); /* a hint, as sl_intern_prefetch */
#define SL_MAP_KEY(p) ((uint64_t)(uintptr_t)(p))

uint64_t sl_hash_bytes(const void *p, size_t n);

/* ---- files ---------------------------------------------------------------------------- */

/* Reads a whole file ("-" = stdin) into a heap buffer with a trailing NUL. */
SlStatus sl_file_read(const char *path, SlBuf *out, SlError *err);

/* A whole input file, read-only. A non-empty regular file is mapped: its pages belong to the
 * page cache, cost this process memory only while touched, and sl_file_text_release gives
 * them back after a pass (they are read in again if the text is looked at later). Anything
 * else (stdin, pipes, empty files) is read into `buf`. No NUL terminator is promised. The file
 * must not be truncated while mapped. */
typedef struct SlFileText {
    SlStr text;
    void *map; /* NULL when read into buf */
    size_t map_len;
    size_t released; /* bytes from the start given back so far (sl_file_text_release_before) */
    SlBuf buf;
} SlFileText;
SlStatus sl_file_text_load(SlFileText *t, const char *path, SlError *err);
void sl_file_text_release(SlFileText *t);
/* Gives back the whole pages before `p` (a position in t->text), for a reader that is done
 * with them; reading them again is still correct, only slower. */
void sl_file_text_release_before(SlFileText *t, const char *p);
void sl_file_text_fini(SlFileText *t);
/* The most devices shardlens handles: -n, shardings, named meshes and the values a trace
 * holds are checked against it before anything is sized by them. */
#define SL_MAX_DEVICES 65536

/* Temporary files being written, removed when the process is ended by SIGINT, SIGTERM or
 * SIGHUP (then it dies of the signal as before; an ignored signal stays ignored). `path`
 * must stay valid until unregistered; false when the (small) table is full. */
bool sl_tmp_register(const char *path);
void sl_tmp_unregister(const char *path);
/* Removes what killed runs left behind beside an output: files named PREFIX<pid>, or that
 * with SQLite's "-journal", "-wal" or "-shm", that are regular, ours, a minute old, and whose
 * process no longer exists. Everything else is left alone. */
void sl_tmp_sweep(const char *prefix);

/* The name diagnostics give standard output ("<stdout>: error: cannot write: ..."). */
#define SL_STDOUT_NAME "<stdout>"

/* Writes atomically: a temporary file beside `path`, then rename; "-" writes stdout. A path
 * that exists and is not a regular file (a device such as /dev/null, a FIFO) is written in
 * place instead, so it is never replaced by a file. */
SlStatus sl_file_write_atomic(const char *path, const char *data, size_t n, SlError *err);

/* The same, in pieces: open, write any number of times, then commit (flush, close and rename
 * over `path`) or abort (close and remove the temporary file). Until commit nothing is at
 * `path`; stdout and in-place targets get the bytes as they are written. The first error is
 * sticky and is returned again by later calls. */
typedef struct SlOutFile {
    const char *path; /* as given; "-" is stdout */
    void *file;       /* FILE *; NULL when not open */
    char *tmp;        /* heap: the temporary path; NULL when writing in place or to stdout */
    uint64_t bytes;   /* written so far */
    SlError err;      /* first failure */
} SlOutFile;
SlStatus sl_out_open(SlOutFile *o, const char *path);
SlStatus sl_out_write(SlOutFile *o, const char *p, size_t n);
SlStatus sl_out_commit(SlOutFile *o); /* also closes; `o` is then done */
void sl_out_abort(SlOutFile *o);      /* no-op after commit or when never opened */

#endif
