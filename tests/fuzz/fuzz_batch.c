/*
 * fuzz_batch.c - the RecordBatch v2 decoder on arbitrary bytes.
 *
 * Whatever the input: header decode, full validation, record iteration and
 * header iteration must never read outside the buffer, and a batch the
 * validator accepts must iterate exactly record_count records.
 */
#include "eng_batch.h"
#include "eng_compress.h"
#include "eng_error.h"

#include <stdint.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    eng_batch_header h;
    if (eng_batch_header_decode(data, size, &h) == 0) {
        eng_batch_header v;
        int rc = eng_batch_validate(data, size, &v);
        if (rc == 0 && (h.attributes & ENG_ATTR_CODEC_MASK) == ENG_CODEC_NONE) {
            eng_record_iter it;
            eng_record r;
            int32_t n = 0;
            eng_record_iter_init(&it, &h, data + ENG_BATCH_OVERHEAD, size - ENG_BATCH_OVERHEAD);
            while (eng_record_iter_next(&it, &r) == 1) {
                const uint8_t *p = r.headers;
                eng_record_header hh;
                while (eng_record_header_next(&p, r.headers_end, &hh) == 1)
                    ;
                n++;
            }
            if (n != h.record_count)
                abort(); /* the validator accepted a batch that does not iterate */
        }
    }
    /* The iterator alone, on any bytes as a records section. */
    eng_batch_header fake = {.record_count = 1000, .last_offset_delta = 1000};
    eng_record_iter it;
    eng_record r;
    eng_record_iter_init(&it, &fake, data, size);
    while (eng_record_iter_next(&it, &r) == 1)
        ;
    return 0;
}
