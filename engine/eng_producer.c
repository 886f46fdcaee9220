/*
 * eng_producer.c - idempotent producers' sequence and epoch rules (Kafka's
 * ProducerAppendInfo and ProducerStateEntry), over a dense array of entries
 * indexed by a linear-probing hash of their ids.
 */
#include "eng_producer.h"

#include "eng_endian.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

void eng_producers_init(eng_producers *st)
{
    memset(st, 0, sizeof *st);
}

void eng_producers_free(eng_producers *st)
{
    free(st->entries);
    free(st->slots);
    eng_producers_init(st);
}

static size_t slot_of(const eng_producers *st, int64_t producer_id)
{
    uint64_t h = (uint64_t)producer_id * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & (st->nslots - 1);
}

/* The slot holding producer_id, or the empty one where it would go. */
static size_t probe(const eng_producers *st, int64_t producer_id)
{
    size_t i = slot_of(st, producer_id);
    while (st->slots[i] && st->entries[st->slots[i] - 1].producer_id != producer_id)
        i = (i + 1) & (st->nslots - 1);
    return i;
}

const eng_producer_entry *eng_producers_find(const eng_producers *st, int64_t producer_id)
{
    if (!st->nslots)
        return NULL;
    uint32_t e = st->slots[probe(st, producer_id)];
    return e ? &st->entries[e - 1] : NULL;
}

/* Fills a cleared index of nslots slots from the entries. */
static int fill_slots(eng_producers *st)
{
    for (size_t k = 0; k < st->n; k++) {
        size_t i = probe(st, st->entries[k].producer_id);
        if (st->slots[i])
            return ENG_ECORRUPT;
        st->slots[i] = (uint32_t)(k + 1);
    }
    return 0;
}

/* An index of at least twice the entries' room, so probes stay short. */
static int resize_slots(eng_producers *st, size_t room)
{
    size_t want = 16;
    while (want < 2 * room)
        want *= 2;
    if (want == st->nslots) {
        memset(st->slots, 0, st->nslots * sizeof *st->slots);
        return fill_slots(st);
    }
    uint32_t *slots = calloc(want, sizeof *slots);
    if (!slots)
        return -ENOMEM;
    free(st->slots);
    st->slots = slots;
    st->nslots = want;
    return fill_slots(st);
}

int eng_producers_reindex(eng_producers *st)
{
    if (st->n > UINT32_MAX - 1)
        return -ENOMEM;
    return resize_slots(st, st->n > st->cap ? st->n : st->cap);
}

/* Room for `more` entries, in the array and the index, so that inserting
 * them (entry_for) cannot fail. */
static int reserve(eng_producers *st, size_t more)
{
    if (st->n + more <= st->cap && 2 * (st->n + more) <= st->nslots)
        return 0;
    if (more > UINT32_MAX / 4 - st->n)
        return -ENOMEM;
    size_t cap = st->cap ? st->cap : 8;
    while (cap < st->n + more)
        cap *= 2;
    if (cap != st->cap) {
        eng_producer_entry *e = realloc(st->entries, cap * sizeof *e);
        if (!e)
            return -ENOMEM;
        st->entries = e;
        st->cap = cap;
    }
    return 2 * cap <= st->nslots ? 0 : resize_slots(st, cap);
}

/* The entry of producer_id, inserted empty (epoch -1, as Kafka's
 * ProducerStateEntry.empty) when new; room must have been reserved. */
static eng_producer_entry *entry_for(eng_producers *st, int64_t producer_id)
{
    size_t i = probe(st, producer_id);
    if (st->slots[i])
        return &st->entries[st->slots[i] - 1];
    eng_producer_entry *e = &st->entries[st->n++];
    st->slots[i] = (uint32_t)st->n;
    memset(e, 0, sizeof *e);
    e->producer_id = producer_id;
    e->epoch = -1;
    e->coordinator_epoch = -1;
    e->txn_first_offset = -1;
    e->last_timestamp = -1;
    return e;
}

/* Kafka's DefaultRecordBatch.incrementSequence and decrementSequence:
 * sequences wrap past INT32_MAX to 0.  delta >= 0; 64-bit sums, so
 * neither direction overflows. */
static int32_t seq_add(int32_t seq, int32_t delta)
{
    int64_t s = (int64_t)seq + delta;
    return (int32_t)(s > INT32_MAX ? s - INT32_MAX - 1 : s);
}

static int32_t seq_sub(int32_t seq, int32_t delta)
{
    int64_t s = (int64_t)seq - delta;
    return (int32_t)(s < 0 ? s + INT32_MAX + 1 : s);
}

static bool in_sequence(int32_t last_seq, int32_t next_seq)
{
    return (int64_t)next_seq == (int64_t)last_seq + 1 || (next_seq == 0 && last_seq == INT32_MAX);
}

static int32_t last_seq_of(const eng_batch_header *h)
{
    return seq_add(h->base_sequence, h->last_offset_delta);
}

/* Kafka's ProducerStateEntry.addBatch: a new epoch forgets the batches of
 * the old one; five are kept. */
static void add_batch(eng_producer_entry *e, int16_t epoch, int32_t last_seq, int64_t last_offset,
                      int32_t offset_delta, int64_t timestamp)
{
    if (e->epoch != epoch) {
        e->epoch = epoch;
        e->nbatches = 0;
    }
    if (e->nbatches == ENG_PRODUCER_BATCHES) {
        memmove(&e->batches[0], &e->batches[1], (ENG_PRODUCER_BATCHES - 1) * sizeof e->batches[0]);
        e->nbatches--;
    }
    e->batches[e->nbatches++] = (eng_producer_batch){.last_seq = last_seq,
                                                     .last_offset = last_offset,
                                                     .offset_delta = offset_delta,
                                                     .timestamp = timestamp};
    e->last_timestamp = timestamp;
}

/* What one request has told of a producer so far (Kafka's updatedEntry):
 * its epoch and last sequence as the batches before this one leave them.
 * Found by a hash of the request's own (a request may carry many batches
 * of many producers: a linear search made one of them quadratic, under
 * the partition's append lock). */
typedef struct pending {
    int64_t producer_id;
    int16_t epoch;
    int32_t last_seq;
    bool used;
} pending;

typedef struct pending_set {
    pending *slots;
    size_t mask;
    pending inline_slots[16];
} pending_set;

/* Room for n producers at most half full; -ENOMEM. */
static int pending_init(pending_set *ps, size_t n)
{
    size_t cap = sizeof ps->inline_slots / sizeof ps->inline_slots[0];
    ps->slots = ps->inline_slots;
    if (2 * n > cap) {
        while (cap < 2 * n)
            cap *= 2;
        if (!(ps->slots = malloc(cap * sizeof *ps->slots)))
            return -ENOMEM;
    }
    memset(ps->slots, 0, cap * sizeof *ps->slots);
    ps->mask = cap - 1;
    return 0;
}

static void pending_free(pending_set *ps)
{
    if (ps->slots != ps->inline_slots)
        free(ps->slots);
}

/* The slot of producer_id: its entry (used), or where it would go. */
static pending *pending_slot(pending_set *ps, int64_t producer_id)
{
    size_t i = (size_t)(((uint64_t)producer_id * 0x9E3779B97F4A7C15ull) >> 32) & ps->mask;
    while (ps->slots[i].used && ps->slots[i].producer_id != producer_id)
        i = (i + 1) & ps->mask;
    return &ps->slots[i];
}

/* The batch of e with exactly this sequence range in the current epoch
 * (Kafka's findDuplicateBatch), or NULL. */
static const eng_producer_batch *find_duplicate(const eng_producer_entry *e, int16_t epoch,
                                                int32_t first_seq, int32_t last_seq)
{
    if (!e || e->epoch != epoch)
        return NULL;
    for (uint32_t i = 0; i < e->nbatches; i++) {
        const eng_producer_batch *b = &e->batches[i];
        if (b->last_seq == last_seq && eng_producer_batch_first_seq(b) == first_seq)
            return b;
    }
    return NULL;
}

/* Kafka's checkProducerEpoch and checkSequence for one batch, against what
 * the request's earlier batches left (pend) or else the stored entry. */
static int check_one(const eng_producer_entry *e, const pending *pend, const eng_batch_header *h,
                     size_t idx, eng_errdetail *err)
{
    int16_t cur_epoch = pend ? pend->epoch : e ? e->epoch : -1;
    if (h->producer_epoch < cur_epoch)
        return eng_fail(err, ENG_EPRODUCER_FENCED,
                        "batch %zu: producer %lld has epoch %d, below its last epoch %d", idx,
                        (long long)h->producer_id, h->producer_epoch, cur_epoch);
    if (h->producer_epoch != cur_epoch) {
        /* A new epoch starts again at 0, unless nothing is known of the
         * producer (its batches retained away, or expired). */
        if (h->base_sequence != 0 && cur_epoch != -1)
            return eng_fail(err, ENG_ESEQUENCE,
                            "batch %zu: producer %lld starts epoch %d at sequence %d, not 0", idx,
                            (long long)h->producer_id, h->producer_epoch, h->base_sequence);
        return 0;
    }
    /* Kafka's checkSequence: the last sequence this request left, else
     * the stored one (-1 when none is kept, so the next must be 0); a
     * producer with no known epoch takes any sequence. */
    if (!e || e->epoch == -1)
        return 0;
    int32_t last = pend ? pend->last_seq : e->nbatches ? e->batches[e->nbatches - 1].last_seq : -1;
    if (!in_sequence(last, h->base_sequence))
        return eng_fail(err, ENG_ESEQUENCE,
                        "batch %zu: producer %lld (epoch %d) sent sequence %d, expected %d", idx,
                        (long long)h->producer_id, h->producer_epoch, h->base_sequence,
                        seq_add(last, 1));
    return 0;
}

int eng_producers_check(eng_producers *st, const uint8_t *data, size_t len,
                        eng_producer_verdict *v, eng_errdetail *err)
{
    memset(v, 0, sizeof *v);
    v->dup_first_offset = v->dup_last_offset = v->dup_timestamp = -1;
    eng_batch_header h;
    size_t with_id = 0;
    for (size_t pos = 0, i = 0; pos < len; pos += (size_t)h.length + 12, i++) {
        if (eng_batch_header_decode(data + pos, len - pos, &h))
            return eng_fail(err, ENG_ECORRUPT, "batch %zu: header does not decode", i);
        with_id += h.producer_id >= 0 && !(h.attributes & ENG_ATTR_CONTROL);
    }
    pending_set ps;
    if (pending_init(&ps, with_id))
        return eng_fail(err, -ENOMEM, "out of memory checking producer sequences");
    size_t batches = 0, dups = 0, fresh = 0;
    int rc = 0;
    for (size_t pos = 0; pos < len && !rc; pos += (size_t)h.length + 12, batches++) {
        eng_batch_header_decode(data + pos, len - pos, &h);
        if (h.producer_id < 0 || (h.attributes & ENG_ATTR_CONTROL)) {
            fresh++;
            continue;
        }
        v->producer_batches++;
        const eng_producer_entry *e = eng_producers_find(st, h.producer_id);
        pending *p = pending_slot(&ps, h.producer_id);
        const eng_producer_batch *dup =
            p->used ? NULL : find_duplicate(e, h.producer_epoch, h.base_sequence, last_seq_of(&h));
        if (dup) {
            /* The span of them all, in whatever order the retry sends them:
             * the answer's last offset is also what it waits to be durable. */
            int64_t first = dup->last_offset - dup->offset_delta;
            if (!dups || first < v->dup_first_offset)
                v->dup_first_offset = first;
            if (!dups || dup->last_offset > v->dup_last_offset) {
                v->dup_last_offset = dup->last_offset;
                v->dup_timestamp = dup->timestamp;
            }
            dups++;
            continue;
        }
        fresh++;
        if ((rc = check_one(e, p->used ? p : NULL, &h, batches, err)))
            break;
        if (!p->used) {
            p->used = true;
            p->producer_id = h.producer_id;
            if (!e)
                v->new_producers++;
        }
        p->epoch = h.producer_epoch;
        p->last_seq = last_seq_of(&h);
    }
    pending_free(&ps);
    if (rc)
        return rc;
    if (dups && fresh)
        return eng_fail(err, ENG_ESEQUENCE,
                        "%zu of the %zu batches repeat batches already appended and the others "
                        "are new: send them apart",
                        dups, batches);
    v->duplicate = dups > 0;
    if (v->new_producers && reserve(st, v->new_producers))
        return eng_fail(err, -ENOMEM, "out of memory for %zu new producers", v->new_producers);
    return 0;
}

static void record(eng_producers *st, const eng_batch_header *h, int64_t base_offset)
{
    eng_producer_entry *e = entry_for(st, h->producer_id);
    add_batch(e, h->producer_epoch, last_seq_of(h), base_offset + h->last_offset_delta,
              h->last_offset_delta, h->max_timestamp);
}

void eng_producers_apply(eng_producers *st, const uint8_t *data, size_t len, int64_t base_offset)
{
    eng_batch_header h;
    int64_t next = base_offset;
    for (size_t pos = 0; pos < len; pos += (size_t)h.length + 12) {
        if (eng_batch_header_decode(data + pos, len - pos, &h))
            return; /* checked before the write: cannot happen */
        if (h.producer_id >= 0 && !(h.attributes & ENG_ATTR_CONTROL))
            record(st, &h, next);
        next += (int64_t)h.last_offset_delta + 1;
    }
}

int eng_producers_reserve(eng_producers *st, const uint8_t *data, size_t len)
{
    size_t fresh = 0;
    eng_batch_header h;
    for (size_t pos = 0; pos < len; pos += (size_t)h.length + 12) {
        if (eng_batch_header_decode(data + pos, len - pos, &h))
            return ENG_ECORRUPT;
        fresh += h.producer_id >= 0 && !eng_producers_find(st, h.producer_id);
    }
    return reserve(st, fresh);
}

/* Transaction markers (control batches) are left out: logstore keeps no
 * transaction state, and Kafka's markers add no sequence. */
int eng_producers_replay(eng_producers *st, const eng_batch_header *h)
{
    if (h->producer_id < 0 || (h->attributes & ENG_ATTR_CONTROL))
        return 0;
    if (!eng_producers_find(st, h->producer_id) && reserve(st, 1))
        return -ENOMEM;
    record(st, h, h->base_offset);
    return 0;
}

/* After an expiry left the arrays at most a quarter full, gives back what
 * the surplus holds: producer ids are the clients' to choose, and a burst of
 * them once (160 bytes each, a day's worth) must not stay allocated for the
 * partition's life after they are all forgotten.  Half full after it, so
 * the next few new producers do not grow them straight back.  Returns true
 * when it rebuilt the index; false (nothing changed: too little to give
 * back, or no memory for the smaller index) leaves the caller to refill
 * the old one. */
static bool shrink(eng_producers *st)
{
    size_t cap = 8;
    while (cap < 2 * st->n)
        cap *= 2;
    if (cap >= st->cap || 4 * st->n > st->cap)
        return false;
    size_t want = 16;
    while (want < 2 * cap)
        want *= 2;
    uint32_t *slots = calloc(want, sizeof *slots);
    if (!slots)
        return false;
    /* A realloc that fails to shrink leaves the larger block, still
     * valid: only the index gets smaller then, and reserve() checks both. */
    eng_producer_entry *e = realloc(st->entries, cap * sizeof *e);
    if (e) {
        st->entries = e;
        st->cap = cap;
    }
    free(st->slots);
    st->slots = slots;
    st->nslots = want;
    (void)fill_slots(st); /* the ids indexed before, into a fresh index */
    return true;
}

size_t eng_producers_expire(eng_producers *st, int64_t now_ms, int64_t expiration_ms)
{
    size_t kept = 0;
    for (size_t i = 0; i < st->n; i++) {
        const eng_producer_entry *e = &st->entries[i];
        /* Kafka's isProducerExpired; both operands are >= 0, so the
         * difference cannot overflow. */
        bool expired = e->txn_first_offset < 0 && e->last_timestamp <= now_ms - expiration_ms;
        if (!expired)
            st->entries[kept++] = *e;
    }
    size_t dropped = st->n - kept;
    st->n = kept;
    if (dropped && !shrink(st)) {
        /* Same size: cannot fail, and the ids are the ones indexed before. */
        memset(st->slots, 0, st->nslots * sizeof *st->slots);
        (void)fill_slots(st);
    }
    return dropped;
}

int eng_producers_copy(const eng_producers *st, eng_producer_entry **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    if (!st->n)
        return 0;
    eng_producer_entry *c = malloc(st->n * sizeof *c);
    if (!c)
        return -ENOMEM;
    memcpy(c, st->entries, st->n * sizeof *c);
    qsort(c, st->n, sizeof *c, eng_producer_cmp_id);
    *out = c;
    *n = st->n;
    return 0;
}

int32_t eng_producer_batch_first_seq(const eng_producer_batch *b)
{
    return seq_sub(b->last_seq, b->offset_delta);
}

int eng_producer_cmp_id(const void *a, const void *b)
{
    int64_t x = ((const eng_producer_entry *)a)->producer_id;
    int64_t y = ((const eng_producer_entry *)b)->producer_id;
    return x < y ? -1 : x > y;
}
