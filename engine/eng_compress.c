/*
 * eng_compress.c - plain views of record sections.
 *
 * This build stores and reads uncompressed batches; a compressed batch is
 * refused as corrupt by every reader until the codecs are linked in.
 */
#include "eng_compress.h"

#include "eng_error.h"

#include <string.h>

int eng_codec_supported(int codec)
{
    return codec == ENG_CODEC_NONE;
}

int eng_batch_plain_records(const uint8_t *batch, const eng_batch_header *h, eng_buf *scratch,
                            const uint8_t **recs, size_t *len)
{
    (void)scratch;
    if ((h->attributes & ENG_ATTR_CODEC_MASK) != ENG_CODEC_NONE)
        return ENG_ECORRUPT;
    *recs = batch + ENG_BATCH_OVERHEAD;
    *len = eng_batch_size(h) - ENG_BATCH_OVERHEAD;
    return 0;
}

int eng_records_compress(int codec, int level, const uint8_t *in, size_t len, eng_buf *out)
{
    (void)level;
    if (codec != ENG_CODEC_NONE)
        return ENG_EINVAL;
    int rc = eng_buf_reserve(out, len);
    if (rc)
        return rc;
    memcpy(out->data, in, len);
    out->len = len;
    return 0;
}
