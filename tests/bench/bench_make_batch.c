/*
 * bench_make_batch.c - writes the body of a binary append: one uncompressed
 * RecordBatch v2, encoded by the engine's own eng_batch_encode, holding the
 * records the JSON append benchmark sends (keys k-000000..., values of
 * VALUE_BYTES 'v's, timestamp = now, producer fields -1).
 *
 *   bench_make_batch OUT [RECORDS] [VALUE_BYTES]
 */
#include "eng_batch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_make_batch OUT [RECORDS] [VALUE_BYTES]\n");
        return 2;
    }
    long n = argc > 2 ? atol(argv[2]) : 100;
    long vlen = argc > 3 ? atol(argv[3]) : 100;
    if (n < 1 || n > 100000 || vlen < 0 || vlen > 1000000) {
        fprintf(stderr, "bad RECORDS or VALUE_BYTES\n");
        return 2;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    uint8_t *value = malloc((size_t)vlen + 1);
    char(*keys)[16] = calloc((size_t)n, sizeof *keys);
    eng_record_spec *recs = calloc((size_t)n, sizeof *recs);
    if (!value || !keys || !recs)
        return 1;
    memset(value, 'v', (size_t)vlen);
    for (long i = 0; i < n; i++) {
        snprintf(keys[i], sizeof keys[i], "k-%06ld", i);
        recs[i] = (eng_record_spec){.timestamp = now_ms, .key = (const uint8_t *)keys[i],
                                    .key_len = (int32_t)strlen(keys[i]), .value = value,
                                    .value_len = (int32_t)vlen};
    }
    size_t cap = eng_batch_encoded_size(recs, (size_t)n);
    uint8_t *batch = malloc(cap);
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    size_t size = batch ? eng_batch_encode(batch, cap, &bp, recs, (size_t)n) : 0;
    if (!size) {
        fprintf(stderr, "encode failed\n");
        return 1;
    }
    FILE *f = fopen(argv[1], "wb");
    if (!f || fwrite(batch, 1, size, f) != size || fclose(f) != 0) {
        perror(argv[1]);
        return 1;
    }
    printf("wrote %s: one RecordBatch v2, %ld records x %ld B values, %zu bytes\n", argv[1], n, vlen,
           size);
    free(batch);
    free(recs);
    free(keys);
    free(value);
    return 0;
}
