/*
 * bench_json_parse.c - the anchor for JSON appends: jansson parsing the same
 * request body alone, with the flags the append handler uses
 * (json_loadb(JSON_ALLOW_NUL) + json_decref, nothing else), in a loop on one
 * thread for a few seconds.  Prints parses/s and records/s (parses/s times
 * the number of records in the body's "records" array).
 *
 *   bench_json_parse BODY.json [SECONDS]
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_json_parse BODY.json [SECONDS]\n");
        return 2;
    }
    double seconds = argc > 2 ? atof(argv[2]) : 5.0;
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    static char body[16 << 20];
    size_t len = fread(body, 1, sizeof body, f);
    fclose(f);
    json_error_t err;
    json_t *doc = json_loadb(body, len, JSON_ALLOW_NUL, &err);
    if (!doc) {
        fprintf(stderr, "%s: %s\n", argv[1], err.text);
        return 1;
    }
    size_t records = json_array_size(json_object_get(doc, "records"));
    json_decref(doc);

    long n = 0;
    double t0 = now_s(), t = t0;
    while (t - t0 < seconds) {
        for (int i = 0; i < 64; i++) {
            doc = json_loadb(body, len, JSON_ALLOW_NUL, &err);
            if (!doc) {
                fprintf(stderr, "parse failed: %s\n", err.text);
                return 1;
            }
            json_decref(doc);
        }
        n += 64;
        t = now_s();
    }
    double rate = n / (t - t0);
    printf("jansson json_loadb+json_decref: %zu-byte body, %zu records: %.0f parses/s, %.0f records/s (1 thread)\n",
           len, records, rate, rate * (double)records);
    return 0;
}
