/* replay.c - the plain-C driver for a fuzz target: calls LLVMFuzzerTestOneInput on every file
 * named on the command line (a directory: every file in it, in name order). This is how
 * `meson test` replays tests/fuzz-regressions/<target>/ in every build, sanitizers included,
 * without clang or libFuzzer. A target aborts on a bug, which fails the test. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int
replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s\n", path);
        return 1;
    }
    size_t cap = 4096, len = 0;
    unsigned char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len == cap) {
            unsigned char *more = realloc(buf, cap * 2);
            if (!more) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = more;
            cap *= 2;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "replay: out of memory reading %s\n", path);
        return 1;
    }
    fprintf(stderr, "replay: %s (%zu bytes)\n", path, len);
    LLVMFuzzerTestOneInput(buf, len);
    free(buf);
    return 0;
}

static int
by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
replay_dir(const char *dir, unsigned *count)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay: cannot open directory %s\n", dir);
        return 1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int bad = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        if (e->d_name[0] == '.')
            continue; /* ., .., and .gitkeep-like files */
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **more = realloc(names, cap * sizeof(*names));
            if (!more) {
                bad = 1;
                break;
            }
            names = more;
        }
        size_t len = strlen(dir) + strlen(e->d_name) + 2;
        names[n] = malloc(len);
        if (!names[n]) {
            bad = 1;
            break;
        }
        snprintf(names[n++], len, "%s/%s", dir, e->d_name);
    }
    closedir(d);
    if (n)
        qsort(names, n, sizeof(*names), by_name);
    for (size_t i = 0; i < n; i++) {
        struct stat st;
        if (!bad && stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
            bad |= replay_file(names[i]);
            ++*count;
        }
        free(names[i]);
    }
    free(names);
    return bad;
}

int
main(int argc, char **argv)
{
    unsigned count = 0;
    int bad = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
            bad |= replay_dir(argv[i], &count);
        } else {
            bad |= replay_file(argv[i]);
            count++;
        }
    }
    printf("replayed %u input%s\n", count, count == 1 ? "" : "s");
    return bad;
}
