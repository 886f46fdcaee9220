/*
 * bench_group_commit.c - durable appends through the engine alone, to show
 * what group commit does without HTTP in the way.
 *
 * A flush.messages=1 partition; N threads each append one record and wait
 * until it is on disk (eng_partition_when_durable), in a loop, for a few
 * seconds.  One thread is bounded by the fsync rate; N threads share each
 * fsync.  Printed beside the raw write+fdatasync rate of the same directory.
 * The commits run where the service runs them, on scheduler workers (see
 * request_commit below), so one client pays the same hand-off to a worker
 * as a durable append over HTTP does.
 *
 *   bench_group_commit [DIR] [SECONDS]
 */
#include "eng_batch.h"
#include "eng_config.h"
#include "eng_fs.h"
#include "eng_partition.h"
#include "eng_scheduler.h"
#include "eng_stats.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

typedef struct waiter {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;
} waiter;

static void on_durable(void *ctx, int rc)
{
    waiter *w = ctx;
    pthread_mutex_lock(&w->lock);
    w->done = rc ? -1 : 1;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->lock);
}

/* Commits run as the service runs them: one-shot "group-commit" jobs on a
 * pool of scheduler threads (background.threads, 10 by default), which the
 * partition asks for through its request_commit event. */
static int job_commit(void *arg, char *note, size_t len)
{
    (void)note;
    (void)len;
    eng_partition_commit(arg);
    eng_partition_unref(arg);
    return 0;
}

static void drop_commit(void *arg)
{
    eng_partition_commit(arg);
    eng_partition_unref(arg);
}

/* The job holds a reference: it may still be returning when the last
 * client has been answered and the partition is closed. */
static void request_commit(eng_partition *p, void *ctx)
{
    eng_partition_ref(p);
    eng_scheduler_add_once(ctx, "group-commit", 0, job_commit, p, drop_commit);
}

static eng_partition *g_p;
static double g_until;
static _Atomic long g_count;

static void *client(void *arg)
{
    (void)arg;
    eng_record_spec r = {.timestamp = 1, .key = (const uint8_t *)"k", .key_len = 1,
                         .value = (const uint8_t *)"durable-record-0123456789", .value_len = 25};
    eng_batch_params bp;
    eng_batch_params_init(&bp);
    uint8_t batch[256];
    waiter w;
    pthread_mutex_init(&w.lock, NULL);
    pthread_cond_init(&w.cond, NULL);
    eng_append_opts o = {.expected_offset = -1, .async_durable = true};
    while (now_s() < g_until) {
        size_t n = eng_batch_encode(batch, sizeof batch, &bp, &r, 1);
        eng_append_result res;
        if (eng_partition_append(g_p, batch, n, &o, &res, NULL))
            break;
        if (res.durable_pending) {
            w.done = 0;
            eng_partition_when_durable(g_p, res.durable_upto, on_durable, &w);
            pthread_mutex_lock(&w.lock);
            while (!w.done)
                pthread_cond_wait(&w.cond, &w.lock);
            pthread_mutex_unlock(&w.lock);
            if (w.done < 0)
                break;
        }
        atomic_fetch_add(&g_count, 1);
    }
    return NULL;
}

static double raw_fsync_rate(const char *dir, double seconds)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/raw.bin", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    char rec[100] = {0};
    long n = 0;
    double t0 = now_s(), t;
    while ((t = now_s()) - t0 < seconds && write(fd, rec, sizeof rec) == sizeof rec &&
           fdatasync(fd) == 0)
        n++;
    close(fd);
    unlink(path);
    return n / (t - t0);
}

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp/logstore-gc-bench";
    double seconds = argc > 2 ? atof(argv[2]) : 3.0;
    eng_fs_remove_tree(dir);
    eng_fs_mkdir(dir);
    printf("raw fsync: %.0f write+fdatasync/s\n", raw_fsync_rate(dir, seconds));
    eng_config_defaults d;
    eng_config_defaults_init(&d);
    d.cfg.v[ENG_CFG_FLUSH_MESSAGES].i = 1;
    eng_scheduler *sched;
    if (eng_scheduler_new(10, &sched) || eng_scheduler_start(sched)) {
        fprintf(stderr, "cannot start the scheduler\n");
        return 1;
    }
    static const int clients[] = {1, 8, 64};
    double one = 0;
    for (size_t k = 0; k < 3; k++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/gc-%d", dir, clients[k]);
        eng_partition_params pp = {.topic = "gc", .id = 0, .dir = path, .config = d.cfg,
                                   .clean_shutdown = true, .log_start_offset = -1,
                                   .events = {.request_commit = request_commit, .ctx = sched}};
        if (eng_partition_open(&pp, &g_p, NULL)) {
            fprintf(stderr, "cannot open partition\n");
            return 1;
        }
        atomic_store(&g_count, 0);
        eng_stats before, after;
        eng_stats_snapshot(&before);
        double t0 = now_s();
        g_until = t0 + seconds;
        pthread_t th[64];
        for (int i = 0; i < clients[k]; i++)
            pthread_create(&th[i], NULL, client, NULL);
        for (int i = 0; i < clients[k]; i++)
            pthread_join(th[i], NULL);
        double rate = atomic_load(&g_count) / (now_s() - t0);
        eng_stats_snapshot(&after);
        uint64_t fsyncs = after.fsync_count - before.fsync_count;
        if (k == 0)
            one = rate;
        /* Appends per fsync shows the sharing itself; the ratio to one
         * client is capped by CPU when the disk's fsync is cheap. */
        printf("engine group commit, %2d clients: %8.0f durable appends/s (%.1fx one client), "
               "%.1f appends per fsync, fsync mean %.0f us\n",
               clients[k], rate, rate / one,
               fsyncs ? (double)atomic_load(&g_count) / (double)fsyncs : 0.0,
               fsyncs ? (double)(after.fsync_sum_us - before.fsync_sum_us) / (double)fsyncs : 0.0);
        eng_partition_close(g_p);
        eng_partition_unref(g_p);
    }
    eng_scheduler_free(sched);
    eng_fs_remove_tree(dir);
    return 0;
}
