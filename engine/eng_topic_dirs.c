/*
 * eng_topic_dirs.c - partition directories that no topic owns any more:
 * those of a deleted topic, renamed aside before their removal, and strays
 * found at startup (a delete cut short by a crash, or files copied in
 * without their metadata), set aside under a unique name for an operator
 * to look at, or removed when they hold no record.
 */
#include "eng_manager_impl.h"

#include "eng_fs.h"
#include "eng_logger.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <openssl/rand.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int eng__set_aside_partition_dir(const eng_manager *m, const char *topic, int32_t id,
                                 const char *suffix, char *to, size_t len)
{
    char from[PATH_MAX];
    int rc = eng__partition_dir(m, topic, id, from, sizeof from);
    if (rc)
        return rc;
    unsigned char raw[16];
    if (RAND_bytes(raw, sizeof raw) != 1)
        for (size_t k = 0; k < sizeof raw; k++)
            raw[k] = (unsigned char)random();
    char uuid[33];
    for (size_t k = 0; k < sizeof raw; k++)
        snprintf(uuid + 2 * k, 3, "%02x", raw[k]);
    char tail[80];
    int tlen = snprintf(tail, sizeof tail, "-%d.%s-%s", (int)id, uuid, suffix);
    if ((size_t)snprintf(to, len, "%s/%.*s%s", m->dir, 255 - tlen, topic, tail) >= len)
        return ENG_EINVAL;
    return rename(from, to) < 0 ? -errno : 0;
}

/* True if dir holds a non-empty log file (.log, or .log with a suffix), or
 * cannot be read: then it may be someone's records. */
static bool holds_records(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return true;
    bool any = false;
    struct dirent *e;
    char path[PATH_MAX];
    while (!any && (e = readdir(d))) {
        struct stat st;
        if (strstr(e->d_name, ".log") && !eng_fs_join(path, sizeof path, dir, e->d_name))
            any = lstat(path, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > 0;
    }
    closedir(d);
    return any;
}

void eng__set_aside_stray(const eng_manager *m, const char *topic, int32_t id, const char *why)
{
    char to[PATH_MAX + 64];
    /* Without a record in it (a partition increase cut short before its
     * metadata was written, say) there is nothing to keep. */
    if (!eng__partition_dir(m, topic, id, to, sizeof to) && !holds_records(to)) {
        int rc = eng_fs_remove_tree(to);
        if (!rc) {
            ENG_INFO("removed %s: no topic owns it (%s) and it holds no records", to, why);
            return;
        }
    }
    int rc = eng__set_aside_partition_dir(m, topic, id, "stray", to, sizeof to);
    if (rc) {
        ENG_WARN("%s/%s-%d belongs to no topic (%s) and cannot be set aside: %s", m->dir, topic,
                 (int)id, why, eng_strerror(rc));
        return;
    }
    eng_fs_sync_dir(m->dir);
    ENG_WARN("%s/%s-%d belongs to no topic (%s): a delete cut short by a crash, or files copied "
             "in without meta/%s.json; moved to %s, remove it once you know it is not needed",
             m->dir, topic, (int)id, why, topic, to);
}
