/* trace_db.c - opening a trace database: creating the embedded schema in a new file, refusing
 * a file of another schema version, and the locking helpers every writer uses.
 * Owns: the sqlite3 connection of a TraceDb. Does not own: what a run writes (sqlite_sink.c)
 * or reads (reader.c). Invariant: a handle is either fully open with a schema of our version,
 * or not returned at all. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "trace/trace_int.h"

enum { DEFAULT_BUSY_TIMEOUT_MS = 10000, DEFAULT_ATTEMPTS = 30 };

int
trace_db_schema_version(void)
{
    return trace_schema_version;
}

SlSrcLoc
trace_db_loc(const TraceDb *db)
{
    SlSrcLoc loc = {db ? db->path : NULL, 0, 0};
    return loc;
}

SlStatus
trace_db_fail(TraceDb *db, int rc, const char *what, SlError *err)
{
    SlSrcLoc loc = trace_db_loc(db);
    const char *msg = db && db->sql ? sqlite3_errmsg(db->sql) : sqlite3_errstr(rc);
    /* A failed read or write of the file: the system's reason says more than SQLite's
     * "disk I/O error" (a full disk, a file size limit, a directory). */
    int sys = db && db->sql ? sqlite3_system_errno(db->sql) : 0;
    if ((rc & 0xff) == SQLITE_NOMEM)
        return sl_fail(err, SL_ERR_NOMEM, loc, "%s: out of memory", what);
    if ((rc & 0xff) == SQLITE_NOTADB)
        return sl_fail(err, SL_ERR_DB, loc, "not a database: the file is not SQLite, so not a "
                                            "shardlens trace");
    if ((rc & 0xff) == SQLITE_CORRUPT)
        return sl_fail(err, SL_ERR_DB, loc, "%s: the trace database is damaged (truncated or "
                                            "overwritten)", what);
    if ((rc & 0xff) == SQLITE_FULL)
        return sl_fail(err, SL_ERR_IO, loc, "%s: the disk is full", what);
    if (((rc & 0xff) == SQLITE_IOERR || (rc & 0xff) == SQLITE_CANTOPEN) && sys)
        return sl_fail(err, SL_ERR_IO, loc, "%s: %s", what, strerror(sys));
    return sl_fail(err, SL_ERR_DB, loc, "%s: %s (sqlite code %d)", what, msg, rc);
}

bool
trace_db_is_busy(int rc)
{
    return (rc & 0xff) == SQLITE_BUSY || (rc & 0xff) == SQLITE_LOCKED;
}

int
trace_db_exec(TraceDb *db, const char *sql)
{
    return sqlite3_exec(db->sql, sql, NULL, NULL, NULL);
}

int
trace_db_begin_write(TraceDb *db)
{
    return trace_db_exec(db, "BEGIN IMMEDIATE");
}

int
trace_db_commit(TraceDb *db)
{
    return trace_db_exec(db, "COMMIT");
}

void
trace_db_rollback(TraceDb *db)
{
    /* Fails only when no transaction is open (SQLite already rolled back): nothing to do. */
    if (!sqlite3_get_autocommit(db->sql))
        (void)trace_db_exec(db, "ROLLBACK");
}

static int
query_int(TraceDb *db, const char *sql, int64_t *out)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db->sql, sql, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW) {
            *out = sqlite3_column_int64(st, 0);
            rc = SQLITE_OK;
        }
    }
    int rc2 = sqlite3_finalize(st);
    return rc != SQLITE_OK ? rc : rc2;
}

static SlStatus
version_mismatch(const char *path, int64_t version, SlError *err)
{
    SlSrcLoc loc = {path, 0, 0};
    if (version == 0)
        return sl_fail(err, SL_ERR_DB, loc,
                       "not a shardlens trace database (schema version 0, expected %d)",
                       trace_schema_version);
    if (version < trace_schema_version)
        return sl_fail(err, SL_ERR_DB, loc,
                       "trace database has schema version %lld, older than the version %d this "
                       "shardlens reads and writes: it was recorded by an older shardlens; "
                       "record the run again (partition --trace, analyze) or use a new file",
                       (long long)version, trace_schema_version);
    return sl_fail(err, SL_ERR_DB, loc,
                   "trace database has schema version %lld, newer than the version %d this "
                   "shardlens reads: use the newer shardlens that recorded it",
                   (long long)version, trace_schema_version);
}

/* Creates the schema when the file is empty; in one IMMEDIATE transaction so that two
 * processes opening a new file at once do not both create it. */
static SlStatus
create_schema(TraceDb *db, const char *path, SlError *err)
{
    SlBuf sql;
    sl_buf_init(&sql);
    for (unsigned i = 0; i < trace_schema_n_lines; i++)
        sl_buf_puts(&sql, trace_schema_lines[i]);
    if (sql.failed) {
        sl_buf_fini(&sql);
        return sl_fail(err, SL_ERR_NOMEM, (SlSrcLoc){path, 0, 0}, "out of memory");
    }
    SlStatus st = SL_OK;
    for (int attempt = 0;; attempt++) {
        int64_t version = 0, n_objects = 0;
        int rc = trace_db_begin_write(db);
        if (rc == SQLITE_OK)
            rc = query_int(db, "PRAGMA user_version", &version);
        if (rc == SQLITE_OK)
            rc = query_int(db, "SELECT count(*) FROM sqlite_schema", &n_objects);
        if (rc == SQLITE_OK && version == 0 && n_objects == 0)
            rc = trace_db_exec(db, sql.data);
        if (rc == SQLITE_OK)
            rc = trace_db_commit(db);
        if (rc != SQLITE_OK) {
            trace_db_rollback(db);
            if (trace_db_is_busy(rc) && attempt + 1 < db->attempts)
                continue;
            st = trace_db_fail(db, rc, "creating the trace schema", err);
            break;
        }
        if (version == 0 && n_objects != 0)
            st = version_mismatch(path, 0, err);
        else if (version != 0 && version != trace_schema_version)
            st = version_mismatch(path, version, err);
        break;
    }
    sl_buf_fini(&sql);
    return st;
}

/* Every table and view of our schema, each table with every column ours has: a file of our
 * version with one dropped (by hand, or by a tool that rewrote it) is refused here, by name,
 * instead of failing later on a query. The expected names come from the embedded schema, built
 * once in memory. */
static SlStatus
check_tables(TraceDb *db, const char *path, SlError *err)
{
    SlSrcLoc loc = {path, 0, 0};
    sqlite3 *ref = NULL;
    SlBuf sql;
    sl_buf_init(&sql);
    for (unsigned i = 0; i < trace_schema_n_lines; i++)
        sl_buf_puts(&sql, trace_schema_lines[i]);
    int rc = sql.failed ? SQLITE_NOMEM : sqlite3_open(":memory:", &ref);
    if (rc == SQLITE_OK)
        rc = sqlite3_exec(ref, sql.data, NULL, NULL, NULL);
    sl_buf_fini(&sql);
    sqlite3_stmt *objs = NULL, *cols = NULL, *have = NULL, *have_col = NULL;
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(ref,
                                "SELECT type, name FROM sqlite_schema WHERE type IN ('table', "
                                "'view') AND name NOT LIKE 'sqlite_%' ORDER BY rowid",
                                -1, &objs, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(ref, "SELECT name FROM pragma_table_info(?1) ORDER BY cid", -1,
                                &cols, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db->sql, "SELECT type FROM sqlite_schema WHERE name = ?1", -1,
                                &have, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_prepare_v2(db->sql, "SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2",
                                -1, &have_col, NULL);
    SlStatus st = SL_OK;
    while (rc == SQLITE_OK && st == SL_OK && sqlite3_step(objs) == SQLITE_ROW) {
        const char *type = (const char *)sqlite3_column_text(objs, 0);
        const char *name = (const char *)sqlite3_column_text(objs, 1);
        sqlite3_reset(have);
        sqlite3_bind_text(have, 1, name, -1, SQLITE_TRANSIENT);
        int step = sqlite3_step(have);
        if (step != SQLITE_ROW && step != SQLITE_DONE) {
            rc = step;
            break;
        }
        const char *have_type = step == SQLITE_ROW ? (const char *)sqlite3_column_text(have, 0)
                                                   : NULL; /* NULL too in a damaged file */
        if (!have_type || strcmp(have_type, type) != 0) {
            st = sl_fail(err, SL_ERR_DB, loc,
                         "%s %s is missing: not a shardlens trace, or from an older version",
                         type, name);
            break;
        }
        if (strcmp(type, "table") != 0)
            continue;
        sqlite3_reset(cols);
        sqlite3_bind_text(cols, 1, name, -1, SQLITE_TRANSIENT);
        while (st == SL_OK && sqlite3_step(cols) == SQLITE_ROW) {
            const char *col = (const char *)sqlite3_column_text(cols, 0);
            sqlite3_reset(have_col);
            sqlite3_bind_text(have_col, 1, name, -1, SQLITE_TRANSIENT);
            sqlite3_bind_text(have_col, 2, col, -1, SQLITE_TRANSIENT);
            step = sqlite3_step(have_col);
            if (step == SQLITE_DONE)
                st = sl_fail(err, SL_ERR_DB, loc,
                             "table %s has no column %s: not a shardlens trace, or from an "
                             "older version",
                             name, col);
            else if (step != SQLITE_ROW)
                rc = step;
        }
    }
    sqlite3_finalize(objs);
    sqlite3_finalize(cols);
    sqlite3_finalize(have);
    sqlite3_finalize(have_col);
    sqlite3_close(ref);
    if (st == SL_OK && rc != SQLITE_OK)
        st = trace_db_fail(db, rc, "reading the trace schema", err);
    return st;
}

static SlStatus
check_version(TraceDb *db, const char *path, SlError *err)
{
    int64_t version = 0;
    int rc = query_int(db, "PRAGMA user_version", &version);
    if (rc != SQLITE_OK)
        return trace_db_fail(db, rc, "reading the schema version", err);
    if (version == trace_schema_version)
        return check_tables(db, path, err);
    if (version == 0 && db->mode == TRACE_DB_APPEND)
        return create_schema(db, path, err);
    return version_mismatch(path, version, err);
}

SlStatus
trace_db_open(const char *path, TraceDbMode mode, TraceDb **out, SlError *err)
{
    *out = NULL;
    SlSrcLoc loc = {path, 0, 0};
    struct stat sb;
    bool exists = stat(path, &sb) == 0;
    if (mode == TRACE_DB_READ && !exists)
        return sl_fail(err, SL_ERR_IO, loc, "no such trace database");
    if (exists && S_ISDIR(sb.st_mode))
        return sl_fail(err, SL_ERR_IO, loc, "is a directory, not a trace database");
    if (exists && !S_ISREG(sb.st_mode))
        return sl_fail(err, SL_ERR_IO, loc, "not a regular file, so not a trace database");
    TraceDb *db = calloc(1, sizeof(*db));
    if (!db)
        return sl_fail(err, SL_ERR_NOMEM, loc, "out of memory");
    db->path = path;
    db->mode = mode;
    db->created = mode == TRACE_DB_APPEND && !exists;
    db->busy_timeout_ms = DEFAULT_BUSY_TIMEOUT_MS;
    db->attempts = DEFAULT_ATTEMPTS;
    sl_arena_init(&db->events);
    sl_interner_init(&db->strings, &db->events);
    sl_buf_init(&db->text);
    sl_map_init(&db->last_decision);
    /* A handle is used by one thread at a time: no per-call mutex. */
    int flags =
        SQLITE_OPEN_NOMUTEX |
        (mode == TRACE_DB_READ ? SQLITE_OPEN_READONLY : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
    int rc = sqlite3_open_v2(path, &db->sql, flags, NULL);
    SlStatus st = SL_OK;
    if (rc != SQLITE_OK)
        st = trace_db_fail(db, rc, "opening the trace database", err);
    if (st == SL_OK && (rc = sqlite3_extended_result_codes(db->sql, 1)) != SQLITE_OK)
        st = trace_db_fail(db, rc, "configuring the trace database", err);
    if (st == SL_OK && (rc = sqlite3_busy_timeout(db->sql, db->busy_timeout_ms)) != SQLITE_OK)
        st = trace_db_fail(db, rc, "configuring the trace database", err);
    /* A new file gets 64 KiB pages (a no-op for an existing one): a run writes tens of MB of
     * rows at once, and big pages mean fewer page splits and write calls. The page cache is
     * small on purpose: a run is one transaction of appends, so pages spill to the file as they
     * fill, and a bigger cache only holds the whole database in memory (64 MiB cost 40 MB of
     * peak RSS at 100k instructions and no time). The page size goes first: SQLite turns a
     * cache size in KiB into a page count when it is set, so setting it before the page size
     * grew the cache sixteenfold. */
    if (st == SL_OK && mode == TRACE_DB_APPEND &&
        (rc = trace_db_exec(db, "PRAGMA page_size = 65536; PRAGMA cache_size = -4096")) !=
            SQLITE_OK)
        st = trace_db_fail(db, rc, "configuring the trace database", err);
    if (st == SL_OK)
        st = check_version(db, path, err);
    if (st != SL_OK) {
        trace_db_close(db);
        return st;
    }
    *out = db;
    return SL_OK;
}

void
trace_db_set_busy(TraceDb *db, int busy_timeout_ms, int attempts)
{
    db->busy_timeout_ms = busy_timeout_ms > 0 ? busy_timeout_ms : 0;
    db->attempts = attempts > 0 ? attempts : 1;
    /* Only fails for a bad handle, which `db` is not. */
    (void)sqlite3_busy_timeout(db->sql, db->busy_timeout_ms);
}

void
trace_db_inject_fault(TraceDb *db, uint64_t rows)
{
    db->fault_rows = rows;
}

/* A file this handle created that holds no run (a failed first run, or a schema that could
 * not be written on a full disk) is removed, with SQLite's side files: a failed --trace leaves
 * nothing new behind. Decided and done under the write lock, so a writer that has committed a
 * run into the new file since is never undone; one that opened it and waits for the lock
 * finds its file gone (trace_db_end_run checks). A run count that cannot be read leaves the
 * file alone unless it is empty. */
static void
discard_if_new(TraceDb *db)
{
    if (!db->created || !db->sql)
        return;
    bool empty = false;
    int64_t runs = -1;
    if (trace_db_begin_write(db) == SQLITE_OK) {
        int64_t tables = 0;
        if (query_int(db, "SELECT count(*) FROM sqlite_schema WHERE name = 'run'", &tables) ==
            SQLITE_OK) {
            if (tables == 0)
                runs = 0;
            else if (query_int(db, "SELECT count(*) FROM run", &runs) != SQLITE_OK)
                runs = -1;
        }
    }
    struct stat sb;
    if (runs != 0 && stat(db->path, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size == 0)
        runs = 0;
    empty = runs == 0;
    if (empty) {
        static const char *const k_side[] = {"", "-journal", "-wal", "-shm"};
        size_t n = strlen(db->path) + 16;
        char *name = malloc(n);
        for (size_t i = 0; name && i < SL_COUNTOF(k_side); i++) {
            snprintf(name, n, "%s%s", db->path, k_side[i]);
            (void)unlink(name);
        }
        free(name);
    }
    trace_db_rollback(db);
}

bool
trace_db_was_removed(TraceDb *db)
{
    int moved = 0;
    return db && db->sql &&
           sqlite3_file_control(db->sql, "main", SQLITE_FCNTL_HAS_MOVED, &moved) == SQLITE_OK &&
           moved;
}

void
trace_db_close(TraceDb *db)
{
    if (!db)
        return;
    trace_db_abort_run(db);
    discard_if_new(db);
    for (int i = 0; i < ST_COUNT; i++)
        (void)sqlite3_finalize(db->stmts[i]); /* returns the last step's error, already seen */
    /* sqlite3_close only fails with unfinalized statements, and all are finalized above. */
    (void)sqlite3_close(db->sql);
    sl_map_fini(&db->last_decision);
    sl_interner_fini(&db->strings);
    sl_buf_fini(&db->text);
    sl_arena_fini(&db->events);
    free(db);
}
