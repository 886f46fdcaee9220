/*
 * eng_compress.c - Kafka's four record codecs (kafka-format.md §4).
 *
 *   gzip   a standard gzip member (zlib, windowBits 15 + 16)
 *   snappy the xerial snappy-java stream: magic 82 53 4e 41 50 50 59 00,
 *          int32 version 1, int32 compatible version 1, then blocks of
 *          big-endian int32 length + raw snappy, 32 KiB of input a block
 *          (read: also one raw snappy block without the header, as
 *          xerial's reader accepts and kafkajs-snappy writes)
 *   lz4    an LZ4 frame with independent 64 KiB blocks and no checksums,
 *          which is what Kafka's reader accepts
 *   zstd   a standard zstd frame
 *
 * Decompression is bounded: a records section that would grow past
 * ENG_MAX_PLAIN_RECORDS is refused as corrupt rather than exhausting memory.
 */
#include "eng_compress.h"

#include "eng_endian.h"
#include "eng_error.h"

#include <lz4frame.h>
#include <snappy-c.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#define ENG_MAX_PLAIN_RECORDS (256u << 20)
#define SNAPPY_BLOCK (32u << 10)

static const uint8_t xerial_magic[8] = {0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0};

int eng_codec_supported(int codec)
{
    return codec >= ENG_CODEC_NONE && codec <= ENG_CODEC_ZSTD;
}

/* Grows out so that at least `more` bytes fit after out->len. */
static int room(eng_buf *out, size_t more)
{
    if (out->len + more > ENG_MAX_PLAIN_RECORDS)
        return ENG_ECORRUPT;
    return eng_buf_reserve(out, out->len + more);
}

static int gzip_decompress(const uint8_t *in, size_t len, eng_buf *out)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (inflateInit2(&z, 15 + 32) != Z_OK)
        return -ENOMEM;
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)len;
    int rc = 0, zr;
    do {
        if ((rc = room(out, len * 4 + 4096)))
            break;
        z.next_out = out->data + out->len;
        z.avail_out = (uInt)(out->cap - out->len);
        zr = inflate(&z, Z_NO_FLUSH);
        out->len = out->cap - z.avail_out;
        if (zr == Z_STREAM_END && z.avail_in > 0) {
            /* Several concatenated members are one valid gzip stream. */
            if (inflateReset(&z) != Z_OK)
                zr = Z_DATA_ERROR;
            else
                zr = Z_OK;
        }
        if (zr != Z_OK && zr != Z_STREAM_END && zr != Z_BUF_ERROR) {
            rc = ENG_ECORRUPT;
            break;
        }
        if (zr == Z_BUF_ERROR && z.avail_in == 0) {
            rc = ENG_ECORRUPT; /* truncated stream */
            break;
        }
    } while (zr != Z_STREAM_END);
    inflateEnd(&z);
    return rc;
}

static int gzip_compress(int level, const uint8_t *in, size_t len, eng_buf *out)
{
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, level < 1 || level > 9 ? Z_DEFAULT_COMPRESSION : level, Z_DEFLATED, 15 + 16, 8,
                     Z_DEFAULT_STRATEGY) != Z_OK)
        return -ENOMEM;
    int rc = eng_buf_reserve(out, deflateBound(&z, (uLong)len));
    if (!rc) {
        z.next_in = (Bytef *)in;
        z.avail_in = (uInt)len;
        z.next_out = out->data;
        z.avail_out = (uInt)out->cap;
        rc = deflate(&z, Z_FINISH) == Z_STREAM_END ? 0 : ENG_EINVAL;
        out->len = out->cap - z.avail_out;
    }
    deflateEnd(&z);
    return rc;
}

/* One raw snappy block appended to out. */
static int snappy_block(const uint8_t *in, size_t n, eng_buf *out)
{
    size_t plain;
    if (snappy_uncompressed_length((const char *)in, n, &plain) != SNAPPY_OK)
        return ENG_ECORRUPT;
    /* At least one byte even for an empty block: out->data is NULL until
     * something is reserved, and NULL + 0 is undefined behaviour (UBSan
     * stopped the fuzzer on a snappy block that decodes to nothing). */
    int rc = room(out, plain ? plain : 1);
    if (rc)
        return rc;
    size_t got = plain;
    if (snappy_uncompress((const char *)in, n, (char *)out->data + out->len, &got) != SNAPPY_OK ||
        got != plain)
        return ENG_ECORRUPT;
    out->len += got;
    return 0;
}

static int snappy_decompress(const uint8_t *in, size_t len, eng_buf *out)
{
    /* The
     * kafkajs producer's snappy codec sends one raw snappy block, without the
     * xerial header.  Kafka's reader (xerial SnappyInputStream) reads a stream
     * that does not start with the magic as raw snappy, so a broker accepts
     * such batches; refusing them made every kafkajs snappy produce a 422. */
    if (len > 0 && (len < 16 || memcmp(in, xerial_magic, 8) != 0))
        return snappy_block(in, len, out);
    if (len < 16)
        return ENG_ECORRUPT;
    size_t pos = 16;
    while (pos < len) {
        if (len - pos < 4)
            return ENG_ECORRUPT;
        size_t n = eng_be32(in + pos);
        pos += 4;
        if (n > len - pos)
            return ENG_ECORRUPT;
        int rc = snappy_block(in + pos, n, out);
        if (rc)
            return rc;
        pos += n;
    }
    return 0;
}

static int snappy_compress_stream(const uint8_t *in, size_t len, eng_buf *out)
{
    size_t blocks = len / SNAPPY_BLOCK + 1;
    int rc = eng_buf_reserve(out, 16 + blocks * (4 + snappy_max_compressed_length(SNAPPY_BLOCK)));
    if (rc)
        return rc;
    memcpy(out->data, xerial_magic, 8);
    eng_put_be32(out->data + 8, 1);
    eng_put_be32(out->data + 12, 1);
    out->len = 16;
    for (size_t pos = 0; pos < len; pos += SNAPPY_BLOCK) {
        size_t chunk = len - pos < SNAPPY_BLOCK ? len - pos : SNAPPY_BLOCK;
        size_t n = snappy_max_compressed_length(chunk);
        if (snappy_compress((const char *)in + pos, chunk, (char *)out->data + out->len + 4, &n) !=
            SNAPPY_OK)
            return ENG_EINVAL;
        eng_put_be32(out->data + out->len, (uint32_t)n);
        out->len += 4 + n;
    }
    return 0;
}

static int lz4_decompress(const uint8_t *in, size_t len, eng_buf *out)
{
    LZ4F_dctx *d;
    if (LZ4F_isError(LZ4F_createDecompressionContext(&d, LZ4F_VERSION)))
        return -ENOMEM;
    size_t pos = 0;
    int rc = 0;
    size_t hint = 1;
    while (hint != 0) {
        if ((rc = room(out, 64 << 10)))
            break;
        size_t dst = out->cap - out->len, src = len - pos;
        hint = LZ4F_decompress(d, out->data + out->len, &dst, in + pos, &src, NULL);
        if (LZ4F_isError(hint)) {
            rc = ENG_ECORRUPT;
            break;
        }
        out->len += dst;
        pos += src;
        if (hint != 0 && src == 0 && dst == 0) {
            rc = ENG_ECORRUPT; /* truncated frame */
            break;
        }
    }
    LZ4F_freeDecompressionContext(d);
    return rc;
}

static int lz4_compress(int level, const uint8_t *in, size_t len, eng_buf *out)
{
    LZ4F_preferences_t prefs;
    memset(&prefs, 0, sizeof prefs);
    prefs.frameInfo.blockSizeID = LZ4F_max64KB;
    prefs.frameInfo.blockMode = LZ4F_blockIndependent;
    prefs.frameInfo.contentChecksumFlag = LZ4F_noContentChecksum;
    prefs.frameInfo.blockChecksumFlag = LZ4F_noBlockChecksum;
    prefs.compressionLevel = level == ENG_CODEC_DEFAULT_LEVEL ? 9 : level;
    size_t bound = LZ4F_compressFrameBound(len, &prefs);
    int rc = eng_buf_reserve(out, bound);
    if (rc)
        return rc;
    size_t n = LZ4F_compressFrame(out->data, out->cap, in, len, &prefs);
    if (LZ4F_isError(n))
        return ENG_EINVAL;
    out->len = n;
    return 0;
}

static int zstd_decompress(const uint8_t *in, size_t len, eng_buf *out)
{
    ZSTD_DCtx *d = ZSTD_createDCtx();
    if (!d)
        return -ENOMEM;
    ZSTD_inBuffer ib = {in, len, 0};
    int rc = 0;
    size_t ret = 1;
    /* Like zstd-jni, read frame after frame until the input is used up:
     * stopping at the end of the first frame would ignore bytes after it (a
     * batch Kafka's zstd reader refuses would be stored) and lose a second
     * frame's records (a batch it accepts would be refused). */
    while (ret != 0 || ib.pos < ib.size) {
        if ((rc = room(out, 128 << 10)))
            break;
        ZSTD_outBuffer ob = {out->data + out->len, out->cap - out->len, 0};
        ret = ZSTD_decompressStream(d, &ob, &ib);
        if (ZSTD_isError(ret)) {
            rc = ENG_ECORRUPT;
            break;
        }
        out->len += ob.pos;
        if (ret != 0 && ib.pos == ib.size && ob.pos < ob.size) {
            rc = ENG_ECORRUPT; /* truncated frame */
            break;
        }
    }
    ZSTD_freeDCtx(d);
    return rc;
}

static int zstd_compress(int level, const uint8_t *in, size_t len, eng_buf *out)
{
    int rc = eng_buf_reserve(out, ZSTD_compressBound(len));
    if (rc)
        return rc;
    size_t n = ZSTD_compress(out->data, out->cap, in, len,
                             level == ENG_CODEC_DEFAULT_LEVEL ? ZSTD_CLEVEL_DEFAULT : level);
    if (ZSTD_isError(n))
        return ENG_EINVAL;
    out->len = n;
    return 0;
}

bool eng_batch_lz4_dependent(const uint8_t *batch, const eng_batch_header *h)
{
    if ((h->attributes & ENG_ATTR_CODEC_MASK) != ENG_CODEC_LZ4)
        return false;
    LZ4F_dctx *d;
    if (LZ4F_isError(LZ4F_createDecompressionContext(&d, LZ4F_VERSION)))
        return false; /* out of memory: the decompression itself reports it */
    LZ4F_frameInfo_t fi;
    size_t src = eng_batch_size(h) - ENG_BATCH_OVERHEAD;
    size_t r = LZ4F_getFrameInfo(d, &fi, batch + ENG_BATCH_OVERHEAD, &src);
    LZ4F_freeDecompressionContext(d);
    return !LZ4F_isError(r) && fi.blockMode != LZ4F_blockIndependent;
}

static const uint8_t lz4_frame_magic[4] = {0x04, 0x22, 0x4d, 0x18};

bool eng_batch_lz4_not_frame(const uint8_t *batch, const eng_batch_header *h)
{
    if ((h->attributes & ENG_ATTR_CODEC_MASK) != ENG_CODEC_LZ4)
        return false;
    size_t n = eng_batch_size(h) - ENG_BATCH_OVERHEAD;
    return n < 4 || memcmp(batch + ENG_BATCH_OVERHEAD, lz4_frame_magic, 4) != 0;
}

bool eng_batch_lz4_dict_id(const uint8_t *batch, const eng_batch_header *h)
{
    if ((h->attributes & ENG_ATTR_CODEC_MASK) != ENG_CODEC_LZ4)
        return false;
    size_t n = eng_batch_size(h) - ENG_BATCH_OVERHEAD;
    const uint8_t *f = batch + ENG_BATCH_OVERHEAD;
    /* FLG follows the magic; its bit 0 is the LZ4 spec's dictionary-ID flag,
     * which Kafka's FLG still reads as a reserved bit that must be 0.  The
     * flag itself is what Kafka refuses, whatever the ID's value. */
    return n >= 5 && memcmp(f, lz4_frame_magic, 4) == 0 && (f[4] & 0x01);
}

int eng_batch_plain_records(const uint8_t *batch, const eng_batch_header *h, eng_buf *scratch,
                            const uint8_t **recs, size_t *len)
{
    const uint8_t *in = batch + ENG_BATCH_OVERHEAD;
    size_t inlen = eng_batch_size(h) - ENG_BATCH_OVERHEAD;
    int codec = h->attributes & ENG_ATTR_CODEC_MASK;
    if (codec == ENG_CODEC_NONE) {
        *recs = in;
        *len = inlen;
        return 0;
    }
    scratch->len = 0;
    int rc;
    switch (codec) {
    case ENG_CODEC_GZIP: rc = gzip_decompress(in, inlen, scratch); break;
    case ENG_CODEC_SNAPPY: rc = snappy_decompress(in, inlen, scratch); break;
    case ENG_CODEC_LZ4: rc = lz4_decompress(in, inlen, scratch); break;
    case ENG_CODEC_ZSTD: rc = zstd_decompress(in, inlen, scratch); break;
    default: rc = ENG_ECORRUPT;
    }
    if (rc)
        return rc == -ENOMEM ? rc : ENG_ECORRUPT;
    *recs = scratch->data ? scratch->data : in;
    *len = scratch->len;
    return 0;
}

int eng_records_compress(int codec, int level, const uint8_t *in, size_t len, eng_buf *out)
{
    out->len = 0;
    switch (codec) {
    case ENG_CODEC_NONE: {
        int rc = eng_buf_reserve(out, len);
        if (!rc && len)
            memcpy(out->data, in, len);
        out->len = rc ? 0 : len;
        return rc;
    }
    case ENG_CODEC_GZIP: return gzip_compress(level, in, len, out);
    case ENG_CODEC_SNAPPY: return snappy_compress_stream(in, len, out);
    case ENG_CODEC_LZ4: return lz4_compress(level, in, len, out);
    case ENG_CODEC_ZSTD: return zstd_compress(level, in, len, out);
    default: return ENG_EINVAL;
    }
}

int eng_batch_recode(const uint8_t *batch, const eng_batch_header *h, int codec, int level,
                     eng_buf *scratch, eng_buf *out)
{
    const uint8_t *recs;
    size_t len;
    int rc = eng_batch_plain_records(batch, h, scratch, &recs, &len);
    if (rc)
        return rc;
    /* First pass: the new base timestamp and the re-encoded size. */
    eng_record_iter it;
    eng_record r;
    int64_t base_ts = -1;
    size_t body = 0;
    eng_record_iter_init(&it, h, recs, len);
    while ((rc = eng_record_iter_next(&it, &r)) == 1) {
        if (base_ts == -1 && it.remaining == h->record_count - 1)
            base_ts = r.raw_timestamp;
        body += eng_record_reencoded_size(&r, base_ts, h->base_offset);
    }
    if (rc < 0)
        return rc;
    eng_buf plain = {0};
    if ((rc = eng_buf_reserve(&plain, body ? body : 1)))
        return rc;
    uint8_t *p = plain.data;
    eng_record_iter_init(&it, h, recs, len);
    while (eng_record_iter_next(&it, &r) == 1)
        p += eng_record_reencode(p, &r, base_ts, h->base_offset);
    eng_buf packed = {0};
    rc = eng_records_compress(codec, level, plain.data, body, &packed);
    eng_buf_free(&plain);
    size_t start = out->len;
    if (!rc)
        rc = eng_buf_reserve(out, start + ENG_BATCH_OVERHEAD + packed.len);
    if (!rc) {
        eng_batch_header nh = *h;
        nh.length = (int32_t)(ENG_BATCH_OVERHEAD - ENG_LOG_OVERHEAD + packed.len);
        nh.attributes = (int16_t)((h->attributes & ~ENG_ATTR_CODEC_MASK) | codec);
        if (h->record_count > 0)
            nh.base_timestamp = base_ts;
        eng_batch_header_encode(out->data + start, &nh);
        memcpy(out->data + start + ENG_BATCH_OVERHEAD, packed.data, packed.len);
        out->len = start + ENG_BATCH_OVERHEAD + packed.len;
        eng_batch_update_crc(out->data + start, out->len - start);
    }
    eng_buf_free(&packed);
    return rc;
}
