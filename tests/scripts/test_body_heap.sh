#!/usr/bin/env bash
# Memory given back after large request bodies, on the release build (glibc's
# malloc; the sanitizer build has its own allocator, so this is the only place
# it can be seen).  Prints TAP.
#
# Eight chunked uploads of 18 MiB, each refused once it passes
# http.max.request.bytes (16 MiB): with glibc's dynamic mmap threshold the
# body buffer of every upload after the first grew in an HTTP thread's arena,
# whose top malloc_trim never releases, and the server kept about 16 MiB per
# HTTP thread for good (RSS 10 -> 76 MB).  Now blocks of 4 MiB or more are
# mapped and unmapped, and a thread's heap keeps at most 4 MiB free at its top
# (the trim threshold): the bound below, 16 MiB over the RSS before the
# uploads for the 4 HTTP threads, is a quarter of what the bug kept.
#
# The server runs on a free loopback port with a temporary data dir and is
# stopped by PID; the temp dir is removed.
set -u
cd "$(dirname "$0")/../.."
bin=${LOGSTORE_RELEASE_BINARY:-build/logstore}
. tests/scripts/tap.sh

if [ ! -x "$bin" ]; then
    echo "# $bin is missing: make build/logstore"
    not_ok "release binary present"
    finish
fi

tmp=$(mktemp -d /tmp/logstore-heap-XXXXXX)
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

"$bin" --set listeners=http://127.0.0.1:0 --set "log.dirs=$tmp/data" --set http.threads=4 \
    >"$tmp/log" 2>&1 &
pid=$!
port=
for _ in $(seq 100); do
    port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$tmp/log")
    [ -n "$port" ] && break
    sleep 0.1
done
if [ -z "$port" ]; then
    sed 's/^/# /' "$tmp/log"
    not_ok "server started"
    finish
fi
ok "server started on port $port"
base=http://127.0.0.1:$port
curl -sf -o /dev/null -X POST "$base/v1/topics" -H 'Content-Type: application/json' -d '{"name":"t"}'

rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$pid/status"; }

head -c $((18 << 20)) /dev/zero | tr '\0' 'x' >"$tmp/body"
before=$(rss_kb)
for i in $(seq 8); do
    # Refused mid-upload: the server answers 413 or closes the connection.
    curl -s -o /dev/null -X POST "$base/v1/topics/t/partitions/0/records" \
        -H 'Content-Type: application/json' -H 'Transfer-Encoding: chunked' \
        --data-binary @"$tmp/body" || true
done
# Every upload's request has ended once the server answers again.
curl -sf -o /dev/null "$base/health/live"
after=$(rss_kb)
echo "# VmRSS before ${before} kB, after eight refused 18 MiB chunked uploads ${after} kB"
if [ $((after - before)) -lt $((16 << 10)) ]; then
    ok "refused chunked bodies leave no heap behind"
else
    not_ok "refused chunked bodies leave no heap behind (RSS grew by $((after - before)) kB)"
fi
finish
