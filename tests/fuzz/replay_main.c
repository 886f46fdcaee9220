/*
 * replay_main.c - runs a libFuzzer target over its committed corpus without
 * libFuzzer, so `make test` replays every corpus file under the ordinary
 * sanitizer build (gcc is enough).  Prints TAP, one line per file.
 *
 * The corpus directory comes from FUZZ_CORPUS (set by the Makefile), or the
 * command line.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : FUZZ_CORPUS;
    if (LLVMFuzzerInitialize)
        LLVMFuzzerInitialize(&argc, &argv);
    DIR *d = opendir(dir);
    if (!d) {
        printf("1..1\nnot ok 1 - corpus %s is missing\n", dir);
        return 1;
    }
    char *names[4096];
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 4096)
        if (e->d_name[0] != '.')
            names[n++] = strdup(e->d_name);
    closedir(d);
    qsort(names, n, sizeof *names, cmp);
    printf("1..%zu\n", n);
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        FILE *f = fopen(path, "rb");
        struct stat st;
        uint8_t *buf = NULL;
        size_t len = 0;
        if (f && fstat(fileno(f), &st) == 0) {
            len = (size_t)st.st_size;
            buf = malloc(len ? len : 1);
            if (buf && fread(buf, 1, len, f) != len)
                len = 0;
        }
        if (f)
            fclose(f);
        /* A crash or sanitizer report aborts the whole binary: the runner
         * counts that as a failure. */
        LLVMFuzzerTestOneInput(buf, len);
        printf("ok %zu - %s\n", i + 1, names[i]);
        fflush(stdout);
        free(buf);
        free(names[i]);
    }
    return 0;
}
