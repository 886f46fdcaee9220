#!/usr/bin/env bash
# /metrics against the real Prometheus tools: `promtool check metrics` must
# accept the exposition, and a real prometheus scraping logstore every second
# must store its series.  Prints TAP.
#
# Installs Debian's prometheus package (prometheus + promtool) when missing,
# never starting its service; if the package's postinst started a daemon
# anyway, that process is stopped by its PID.  Then: logstore (the sanitizer
# build, or $TEST_LOGSTORE_BINARY) on a free loopback port with traffic - a
# topic with flush.messages=1 (fsyncs), appends and reads, a compacted topic
# cleaned on demand, a retention run deleting a segment - its /metrics
# through promtool, and a prometheus with a temporary config and TSDB whose
# HTTP API must return logstore_build_info and a handful of other series.
# Every process started here is stopped by PID; the temp dir is removed.
set -u
cd "$(dirname "$0")/../.."
bin=${TEST_LOGSTORE_BINARY:-build/san/logstore}
. tests/scripts/tap.sh
. tests/scripts/ready.sh

tmp=$(mktemp -d /tmp/logstore-prom-XXXXXX)
ls_pid=
prom_pid=
cleanup() {
    [ -n "$prom_pid" ] && kill "$prom_pid" 2>/dev/null && wait "$prom_pid" 2>/dev/null
    [ -n "$ls_pid" ] && kill "$ls_pid" 2>/dev/null && wait "$ls_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

# PIDs of processes whose executable name is $1 (no procps needed).
pids_named() {
    local f
    for f in /proc/[0-9]*/comm; do
        [ "$(cat "$f" 2>/dev/null)" = "$1" ] && { f=${f#/proc/}; echo "${f%/comm}"; }
    done
}

# A loopback port nothing listens on (bash's /dev/tcp: no python needed).
free_port() {
    local p
    for _ in $(seq 1 50); do
        p=$((20000 + RANDOM % 40000))
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return 0; }
    done
    return 1
}

# Stops logstore (clean exit, no sanitizer report) and prometheus, by PID.
stop_logstore() {
    [ -n "$prom_pid" ] && { kill "$prom_pid"; wait "$prom_pid" 2>/dev/null; prom_pid=; }
    kill "$ls_pid"; wait "$ls_pid"; local rc=$?; ls_pid=
    check "logstore stops cleanly (status $rc)" test "$rc" -eq 0
    if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error' "$tmp/logstore.log"; then
        not_ok "no sanitizer report in the logstore log"
        grep -A5 -E 'ERROR: (Address|Leak)Sanitizer|runtime error' "$tmp/logstore.log" | head -20 | sed 's/^/# /'
    else
        ok "no sanitizer report in the logstore log"
    fi
}

# ---- logstore with some traffic --------------------------------------------------
"$bin" --set log.dirs="$tmp/data" --set listeners=http://127.0.0.1:0 --set log.cleaner.threads=0 \
    >"$tmp/logstore.log" 2>&1 &
ls_pid=$!
if ! port=$(ready_port "$tmp/logstore.log"); then
    not_ok "logstore starts"
    sed 's/^/# /' "$tmp/logstore.log" | tail -20
    finish
fi
ok "logstore starts on port $port"
B=http://127.0.0.1:$port
post() { curl -sf -X POST "$B$1" -H 'Content-Type: application/json' -d "$2" >>"$tmp/traffic.log" && echo >>"$tmp/traffic.log"; }
traffic() {
    post /v1/topics '{"name":"prom-orders","partitions":2,"configs":{"flush.messages":"1"}}' &&
    for _ in 1 2 3; do
        post /v1/topics/prom-orders/partitions/0/records '{"records":[{"key":"a","value":"1"},{"key":"b","value":"2"}]}' || return 1
    done &&
    post /v1/topics/prom-orders/partitions/1/records '{"records":[{"value":"x"}]}' &&
    curl -sf "$B/v1/topics/prom-orders/partitions/0/records?offset=0" >/dev/null &&
    post /v1/topics '{"name":"prom-users","configs":{"cleanup.policy":"compact","min.cleanable.dirty.ratio":"0.01"}}' &&
    post /v1/topics/prom-users/partitions/0/records '{"records":[{"key":"u1","value":"a"},{"key":"u1","value":"b"},{"key":"u2","value":"c"}]}' &&
    post /v1/topics/prom-users/partitions/0/segments:roll '{}' &&
    post /v1/topics/prom-users/compaction:run '{}' &&
    post /v1/topics '{"name":"prom-old","configs":{"retention.ms":"1000"}}' &&
    post /v1/topics/prom-old/partitions/0/records '{"records":[{"value":"old","timestamp":1000}]}' &&
    post /v1/topics/prom-old/partitions/0/segments:roll '{}' &&
    post /v1/topics/prom-old/retention:run '{"dry_run":false}'
}
check "traffic: topics, appends, reads, a compaction and a retention run" traffic
curl -s -D "$tmp/metrics.headers" "$B/metrics" >"$tmp/metrics.txt"
check "/metrics answers text/plain; version=0.0.4" grep -qi '^content-type: text/plain; version=0.0.4' "$tmp/metrics.headers"

has() { grep -qE "$1" "$tmp/metrics.txt" || { echo "# /metrics has no line matching $1"; return 1; }; }
check "high watermark of prom-orders-0 is 6" has '^logstore_partition_high_watermark\{topic="prom-orders",partition="0"\} 6$'
check "records appended to prom-orders: 7" has '^logstore_records_appended_total\{topic="prom-orders"\} 7$'
check "the retention run counted a segment" has '^logstore_retention_deleted_segments_total\{rule="retention.ms"\} [1-9]'
check "the compaction counted a run" has '^logstore_cleaner_runs_total [1-9]'
check "flush.messages=1 fsyncs are in the histogram" has '^logstore_fsync_duration_seconds_count [1-9]'
fds_ok() { # open descriptors counted, under the limit, which was raised to the hard one
    local open max
    open=$(awk '/^process_open_fds /{print $2}' "$tmp/metrics.txt")
    max=$(awk '/^process_max_fds /{print $2}' "$tmp/metrics.txt")
    echo "# process_open_fds $open, process_max_fds $max, ulimit -Hn $(ulimit -Hn)"
    [ -n "$open" ] && [ -n "$max" ] && [ "$open" -gt 10 ] && [ "$open" -lt "$max" ] &&
        { [ "$(ulimit -Hn)" = unlimited ] || [ "$max" -eq "$(ulimit -Hn)" ]; }
}
check "process_open_fds and process_max_fds (raised to the hard limit)" fds_ok
check "append requests are counted by route and status" \
    has '^logstore_http_requests_total\{method="POST",route="/v1/topics/\{topic\}/partitions/\{partition\}/records",status="200"\} [1-9]'

# ---- install -------------------------------------------------------------------
if ! command -v promtool >/dev/null || ! command -v prometheus >/dev/null || ! command -v curl >/dev/null; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "# SKIP: prometheus is not installed and we are not root"
        stop_logstore
        finish
    fi
    before=" $(pids_named prometheus | tr '\n' ' ') "
    export DEBIAN_FRONTEND=noninteractive
    if ! { apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus curl; } >"$tmp/apt.log" 2>&1; then
        not_ok "apt-get install prometheus"
        sed 's/^/# /' "$tmp/apt.log" | tail -20
        stop_logstore
        finish
    fi
    # the packaged daemon must not run: stop what the postinst may have started
    for pid in $(pids_named prometheus); do
        case "$before" in *" $pid "*) ;; *) echo "# stopping prometheus $pid started by the package"; kill "$pid" ;; esac
    done
fi
t_start=$SECONDS
ok "prometheus $(prometheus --version 2>&1 | head -1 | awk '{print $3}') and promtool are installed"

# ---- promtool --------------------------------------------------------------------
if promtool check metrics <"$tmp/metrics.txt" >"$tmp/promtool.out" 2>&1; then
    ok "promtool check metrics accepts /metrics"
else
    not_ok "promtool check metrics accepts /metrics"
    sed 's/^/# /' "$tmp/promtool.out" | head -20
fi
# ---- a real prometheus scraping every second ----------------------------------------
cat >"$tmp/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: logstore
    scrape_interval: 1s
    static_configs:
      - targets: ['127.0.0.1:$port']
EOF
config_ok() { promtool check config "$tmp/prometheus.yml" >"$tmp/config.out" 2>&1 || { sed 's/^/# /' "$tmp/config.out"; return 1; }; }
check "promtool check config accepts the test config" config_ok
pport=
for _ in 1 2 3; do
    pport=$(free_port) || break
    prometheus --config.file="$tmp/prometheus.yml" --storage.tsdb.path="$tmp/tsdb" \
        --web.listen-address="127.0.0.1:$pport" >"$tmp/prometheus.log" 2>&1 &
    prom_pid=$!
    for _ in $(seq 1 300); do # up to 30 s: a loaded CI machine is slow to open the TSDB
        curl -sf "http://127.0.0.1:$pport/-/ready" >/dev/null && break 2
        kill -0 "$prom_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill "$prom_pid" 2>/dev/null; wait "$prom_pid" 2>/dev/null; prom_pid=; pport=
done
if [ -z "$pport" ]; then
    not_ok "prometheus starts"
    sed 's/^/# /' "$tmp/prometheus.log" | tail -20
    finish
fi
ok "prometheus starts on port $pport"
query() { curl -sf -G "http://127.0.0.1:$pport/api/v1/query" --data-urlencode "query=$1"; }
# non-empty result vector for a PromQL query
series() { query "$1" | grep -q '"result":\[{' || { echo "# no series for $1"; return 1; }; }
got=
for _ in $(seq 1 150); do
    series 'logstore_build_info' 2>/dev/null >/dev/null && { got=1; break; }
    sleep 0.1
done
check "prometheus stores logstore_build_info (within 15 s)" test -n "$got"
target_up() { query 'up{job="logstore"}' | grep -q '"1"\]}'; }
check "the scrape target is up" target_up
for q in 'logstore_http_requests_total' 'logstore_partition_high_watermark{topic="prom-orders"}' \
         'logstore_records_appended_total' 'logstore_fsync_duration_seconds_bucket' 'logstore_parked_readers' \
         'logstore_cleaner_dirty_ratio{topic="prom-users"}'; do
    check "prometheus has $q" series "$q"
done
hw=$(query 'logstore_partition_high_watermark{topic="prom-orders",partition="0"}' | grep -o '"value":\[[^]]*\]' | grep -o '"[0-9]*"\]$' | tr -d '"]')
check "prometheus's high watermark of prom-orders-0 is 6 (got ${hw:-none})" test "$hw" = 6

# ---- stop ---------------------------------------------------------------------------
stop_logstore
echo "# took $((SECONDS - t_start)) s after the install"
finish
