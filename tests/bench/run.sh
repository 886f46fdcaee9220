#!/usr/bin/env bash
# Benchmarks: each prints its figures beside the anchor measured in the same
# run, and a summary table at the end (name, figure, anchor, ratio, target).
# Never pass/fail: a missed target is printed, not asserted.  Peers and load
# tools (wrk, redis-server, redis-benchmark, nginx-light) are installed with
# apt-get when missing, started on free loopback ports with their files in a
# throwaway directory, and stopped by PID when their group ends.
#
#   make bench                          everything
#   tests/bench/run.sh GROUP...         some groups, in order:
#       engine         engine append vs raw write() of the same chunks
#       http           JSON append, 10 records x 250 B a request (64 connections)
#       durable        flush.messages=1 appends, 1/8/64 clients, vs raw fsync rate
#       json           JSON append, 100 records x 100 B, vs jansson alone and Redis XADD
#       binary         the same 100 records as one RecordBatch, vs a bare pwrite() loop of
#                      that batch (the page cache's ceiling), a bare libmicrohttpd server
#                      and Redis XADD
#       durable-redis  flush.messages=1, 50 clients, vs Redis appendfsync always
#       read           JSON reads of 1,000 records vs Redis XRANGE of 100
#       raw            raw batch reads of 1 MiB vs nginx serving the segment file
#       tail           append-to-delivery latency to 100 parked long-polls
#       compress       lz4 and zstd vs uncompressed: bytes on disk and records/s
#       recovery       restart after an unclean stop (kill -9): engine open time against
#                      the total and the unflushed log size, warm and cold page cache;
#                      RECOVERY_TOTALS_MB (256,1024) and RECOVERY_UNFLUSHED_MB (0,32,128,512)
#       startup        start time with STARTUP_PARTITIONS (2000) small partitions over 8 topics,
#                      after a clean stop and after kill -9 (every active segment to recover),
#                      warm page cache (cold with STARTUP_COLD=1: every file dropped from it
#                      before each start), on STARTUP_THREADS (1,4,8) num.recovery.threads.per.data.dir
#       cleaner        one cleaner thread compacting CLEANER_MB (256) of 100-byte values over
#                      100,000 keys: Kafka's default 1 GiB segments with the 128 MiB (default)
#                      and 4 MiB dedupe buffers, and 1 MiB segments; vs read() of the same files
#
# BENCH_SECONDS (default 5) sets the length of each measurement; HTTP_THREADS,
# when set, overrides logstore's http.threads; BENCH_SET, space-separated
# name=value pairs, adds settings to every logstore started (after the
# script's own, so they win): BENCH_SET="log.level=INFO http.access.log=true".
set -u
cd "$(dirname "$0")/../.."
B=build/rel/tests/bench
SECS=${BENCH_SECONDS:-5}
work=$(mktemp -d /tmp/logstore-bench-XXXXXX)
summary="$work/summary.tsv"
pids=()
stop_servers() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    pids=()
    # A group's logs go with it: their dirty pages would otherwise be written
    # back during the next group and count against it.
    rm -rf "$work"/data-*
}
cleanup() {
    stop_servers
    rm -rf "$work"
}
trap cleanup EXIT

need() { # need <command> <debian package>
    command -v "$1" >/dev/null 2>&1 && return 0
    echo "installing $2 for the benchmarks"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null 2>&1 ||
        { apt-get update -qq >/dev/null 2>&1; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null 2>&1; }
    command -v "$1" >/dev/null 2>&1
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

wait_port() { # wait_port <port>: true once something accepts connections on it
    for _ in $(seq 200); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.05
    done
    return 1
}

start_logstore() { # start_logstore <port> <extra --set args...>
    local port=$1; shift
    local kv extra=()
    for kv in ${BENCH_SET:-}; do extra+=(--set "$kv"); done
    ./build/logstore --set log.dirs="$work/data-$port" --set listeners=http://127.0.0.1:$port \
        --set log.level=WARN ${HTTP_THREADS:+--set http.threads=$HTTP_THREADS} "$@" "${extra[@]}" \
        >"$work/logstore-$port.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 200); do
        curl -sf "http://127.0.0.1:$port/health/ready" >/dev/null && return 0
        sleep 0.05
    done
    echo "logstore did not start"; cat "$work/logstore-$port.log"; return 1
}

create_topic() { # create_topic <port> <name> [configs JSON object]
    local cfg=${3:-}
    [ -n "$cfg" ] || cfg='{}'
    curl -sf -XPOST "http://127.0.0.1:$1/v1/topics" -H 'Content-Type: application/json' \
        -d "{\"name\":\"$2\",\"partitions\":1,\"configs\":$cfg}" >/dev/null ||
        echo "  (could not create topic $2)"
}

start_redis() { # start_redis <port> <everysec|always>
    need redis-server redis-server && need redis-benchmark redis-tools || return 1
    mkdir -p "$work/redis-$1"
    redis-server --port "$1" --bind 127.0.0.1 --save '' --appendonly yes --appendfsync "$2" \
        --dir "$work/redis-$1" --logfile "$work/redis-$1/redis.log" --daemonize no >/dev/null 2>&1 &
    pids+=($!)
    wait_port "$1" || { echo "redis-server did not start"; return 1; }
}

start_nginx() { # start_nginx <port> <root>: a throwaway nginx serving <root> with sendfile
    need nginx nginx-light || return 1
    local d="$work/nginx-$1"
    mkdir -p "$d"
    cat >"$d/nginx.conf" <<EOF
daemon off;
master_process on;
worker_processes auto;
user root;
pid $d/nginx.pid;
error_log $d/error.log warn;
events { worker_connections 4096; use epoll; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    keepalive_requests 1000000;
    keepalive_timeout 60s;
    default_type application/octet-stream;
    server {
        listen 127.0.0.1:$1;
        root $2;
        location / { }
    }
}
EOF
    nginx -p "$d/" -e "$d/error.log" -c "$d/nginx.conf" >"$d/stdout" 2>&1 &
    pids+=($!)
    wait_port "$1" || { echo "nginx did not start"; cat "$d/error.log"; return 1; }
}

# wrk_rate <wrk args...>: runs wrk, prints its key lines, sets RATE to the
# successful requests per second (non-2xx answers are not counted).
nwrk=0
wrk_rate() {
    local out="$work/wrk-$((++nwrk)).out"
    wrk "$@" >"$out" 2>&1
    grep -E 'Latency|Requests/sec|Transfer/sec|Non-2xx|Socket errors' "$out" | sed -E 's/^ */    wrk: /'
    RATE=$(awk '/requests in/ { n = $1; d = $4; sub(/,$/, "", d);
                                 if (d ~ /ms$/) { sub(/ms$/, "", d); d /= 1000 }
                                 else if (d ~ /m$/) { sub(/m$/, "", d); d *= 60 }
                                 else sub(/s$/, "", d) }
                /Non-2xx/ { bad = $NF }
                END { printf "%.0f", (d > 0 ? (n - bad) / d : 0) }' "$out")
}

# redis_rate <port> <redis-benchmark options> <command...>: runs the command
# for about SECS seconds (a 1-second calibration run sizes -n), prints the
# result, sets RATE to requests per second.
redis_rate() {
    local port=$1 opts=$2; shift 2
    local cal n
    cal=$(redis-benchmark -h 127.0.0.1 -p "$port" $opts -n 20000 --csv "$@" 2>/dev/null |
        awk -F'"' 'NR == 2 {print $4}')
    n=$(awk -v r="${cal:-0}" -v s="$SECS" 'BEGIN {n = int(r * s); print (n < 20000 ? 20000 : n)}')
    redis-benchmark -h 127.0.0.1 -p "$port" $opts -n "$n" --csv "$@" >"$work/redis-bench.out" 2>&1
    RATE=$(awk -F'"' 'NR == 2 {printf "%.0f", $4}' "$work/redis-bench.out")
    awk -F'"' -v n="$n" -v o="$opts" 'NR == 2 {printf "    redis-benchmark %s -n %d: %.0f requests/s, p50 %s ms, p99 %s ms\n", o, n, $4, $10, $14}' \
        "$work/redis-bench.out"
    [ -n "$RATE" ] || { RATE=0; echo "    redis-benchmark failed:"; sed 's/^/      /' "$work/redis-bench.out" | head -5; }
}

# The Redis XADD figure shared by the json and binary groups: 50 clients,
# pipelined 16 deep, appendfsync everysec, one entry {k-000000: 100 B} per XADD.
REDIS_XADD=""
redis_xadd_everysec() {
    [ -n "$REDIS_XADD" ] && { echo "  Redis 7 XADD (measured earlier in this run): $REDIS_XADD entries/s"; return 0; }
    local port; port=$(free_port)
    start_redis "$port" everysec || { REDIS_XADD=0; return 1; }
    echo "  Redis $(redis-server --version | sed -E 's/.*v=([0-9.]+).*/\1/') XADD, 50 clients, pipeline 16, appendonly yes, appendfsync everysec:"
    redis_rate "$port" "-c 50 -P 16" XADD bench '*' k-000000 "$(printf 'v%.0s' $(seq 100))"
    REDIS_XADD=$RATE
    stop_servers
}

# row <name> <figure> <anchor> <ratio> <target> <verdict>: one summary line.
row() { printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$summary"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", (b > 0 ? a / b : 0)}'; }
atleast() { awk -v r="$1" -v t="$2" 'BEGIN {print (r >= t ? "met" : "MISSED")}'; }
fmt() { printf '%.0f' "$1" | sed -E ':a; s/([0-9])([0-9]{3})($|,)/\1,\2\3/; ta'; }

make_bodies() { # the JSON bodies and wrk scripts the HTTP groups share
    [ -f "$work/json100.json" ] && return 0
    python3 - "$work" <<'PY'
import json, random, sys
w = sys.argv[1]
def lua(name, method, ctype, body=None, headers=()):
    s = 'wrk.method = "%s"\n' % method
    if ctype:
        s += 'wrk.headers["Content-Type"] = "%s"\n' % ctype
    for k, v in headers:
        s += 'wrk.headers["%s"] = "%s"\n' % (k, v)
    if body:
        s += 'local f = io.open("%s/%s", "rb")\nwrk.body = f:read("*a")\nf:close()\n' % (w, body)
    open("%s/%s" % (w, name), "w").write(s)
# 100 records x 100 B, the json and binary groups' workload
open(w + "/json100.json", "w").write(json.dumps(
    {"records": [{"key": "k-%06d" % i, "value": "v" * 100} for i in range(100)]}))
# 100 JSON-like values (~130-190 B), the compress group's workload
rnd = random.Random(42)
events = ["page_view", "click", "add_to_cart", "checkout", "login", "search"]
def value(i):
    return json.dumps({"event_id": "%08x-%04x" % (rnd.getrandbits(32), rnd.getrandbits(16)),
                       "user_id": rnd.randint(1, 500000), "event": rnd.choice(events),
                       "path": "/products/%d" % rnd.randint(1, 20000),
                       "ts": 1795965985919 + i * 7, "amount": round(rnd.uniform(1, 500), 2),
                       "country": rnd.choice(["DE", "FR", "US", "JP", "BR"]), "ok": rnd.random() > 0.1},
                      separators=(",", ":"))
vals = [value(i) for i in range(100)]
open(w + "/jsonlike100.json", "w").write(json.dumps(
    {"records": [{"key": "user-%06d" % i, "value": v} for i, v in enumerate(vals)]}))
open(w + "/jsonlike.stats", "w").write("%d %d\n" % (sum(len(v) for v in vals), sum(len("user-%06d" % i) for i in range(100))))
open(w + "/one.json", "w").write('{"records":[{"key":"k","value":"durable-record-0123456789"}]}')
lua("json100.lua", "POST", "application/json", "json100.json")
lua("jsonlike100.lua", "POST", "application/json", "jsonlike100.json")
lua("binary100.lua", "POST", "application/octet-stream", "batch100.bin")
lua("one.lua", "POST", "application/json", "one.json")
lua("get-json.lua", "GET", None)
lua("get-raw.lua", "GET", None, headers=[("Accept", "application/octet-stream")])
lua("get-range.lua", "GET", None, headers=[("Range", "bytes=0-1048575")])
PY
    "$B/bench_make_batch" "$work/batch100.bin" 100 100 | sed 's/^/  /'
}

# ---- groups ------------------------------------------------------------------

bench_engine() {
    echo "== engine append (seed workload: 10 records x 250 B a batch)"
    "$B/bench_engine_append" "$work/engine" 512 | tee "$work/engine.out"
    local raw eng
    raw=$(awk '/raw write/ {print $3}' "$work/engine.out")
    eng=$(awk '/engine append:/ && /MB\/s/ {print $3}' "$work/engine.out")
    row "engine append, 10 x 250 B batches" "$eng MB/s" "raw write() $raw MB/s" "$(ratio "$eng" "$raw")" \
        ">= 0.8 of raw" "$(atleast "$(ratio "$eng" "$raw")" 0.8)"
}

bench_http() {
    need wrk wrk || { echo "wrk unavailable; skipping HTTP benchmarks"; return; }
    local port; port=$(free_port)
    start_logstore "$port" || return
    create_topic "$port" bench
    python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
body = json.dumps({"records": [{"key": "k-%06d" % i, "value": "v" * 250} for i in range(10)]})
open(w + "/seed.json", "w").write(body)
open(w + "/post.lua", "w").write(
    'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
    'local f = io.open("%s/seed.json", "r")\nwrk.body = f:read("*a")\nf:close()\n' % w)
PY
    echo "== HTTP JSON append (10 records x 250 B a request, 64 connections, $SECS s)"
    wrk_rate -t2 -c64 -d${SECS}s -s "$work/post.lua" "http://127.0.0.1:$port/v1/topics/bench/partitions/0/records"
    echo "  records/s: $(fmt $((RATE * 10)))"
    row "HTTP JSON append, 10 x 250 B, 64 conns" "$(fmt $((RATE * 10))) rec/s ($(fmt "$RATE") req/s)" "-" "-" "-" "-"
    stop_servers
}

bench_durable() {
    need wrk wrk || { echo "wrk unavailable; skipping"; return; }
    make_bodies
    local port; port=$(free_port)
    start_logstore "$port" || return
    create_topic "$port" durable '{"flush.messages":"1"}'
    echo "== durable append (flush.messages=1, 1 record a request; group commit)"
    mkdir -p "$work/fsync"
    "$B/bench_fsync" "$work/fsync" 3 | tee "$work/fsync.out" | sed 's/^/  /'
    local one=0 fs f0 f1
    fs=$(awk '/raw fsync/ {print $3}' "$work/fsync.out")
    for c in 1 8 64; do
        f0=$(fsyncs "$port")
        wrk_rate -t1 -c$c -d${SECS}s -s "$work/one.lua" "http://127.0.0.1:$port/v1/topics/durable/partitions/0/records" >/dev/null
        f1=$(fsyncs "$port")
        [ "$c" = 1 ] && one=$RATE
        awk -v c="$c" -v r="$RATE" -v o="$one" -v s="$SECS" -v f=$((f1 - f0)) \
            'BEGIN {printf "  %2d clients: %8.0f appends/s (%.1fx one client), %.1f appends per fsync\n", c, r, (o > 0 ? r / o : 0), (f > 0 ? r * s / f : 0)}'
    done
    row "durable group commit, 64 clients (HTTP)" "$(fmt "$RATE") appends/s (1 client: $(fmt "$one"))" \
        "raw write+fdatasync $(fmt "$fs")/s" "$(ratio "$RATE" "$one")" ">= 20x one client" "$(atleast "$(ratio "$RATE" "$one")" 20)"
    stop_servers
    echo "== the same through the engine alone (threads as clients, commits on scheduler workers as in the service, no HTTP)"
    "$B/bench_group_commit" "$work/gc" 3 | tee "$work/gc.out" | sed 's/^/  /'
    local e1 e64
    e1=$(awk '/ 1 clients:/ {print $6}' "$work/gc.out")
    e64=$(awk '/64 clients:/ {print $6}' "$work/gc.out")
    row "durable group commit, 64 clients (engine)" "$(fmt "$e64") appends/s (1 client: $(fmt "$e1"))" \
        "$(awk '/raw fsync/ {print "raw write+fdatasync " $3 "/s"}' "$work/gc.out")" \
        "$(ratio "$e64" "$e1")" ">= 20x one client" "$(atleast "$(ratio "$e64" "$e1")" 20)"
}

# Count of partition fsyncs so far, from /metrics.
fsyncs() {
    curl -s "http://127.0.0.1:$1/metrics" | awk '/^logstore_fsync_duration_seconds_count/ {print $2; f=1} END {if (!f) print 0}'
}

bench_json() {
    need wrk wrk || { echo "wrk unavailable; skipping"; return; }
    make_bodies
    echo "== JSON append (100 records x 100 B a request, 64 connections, $SECS s)"
    "$B/bench_json_parse" "$work/json100.json" "$SECS" | tee "$work/jansson.out" | sed 's/^/  /'
    local jansson; jansson=$(awk '{for (i = 1; i < NF; i++) if ($(i + 1) == "records/s") print $i}' "$work/jansson.out")
    local port; port=$(free_port)
    start_logstore "$port" || return
    create_topic "$port" json
    echo "  logstore:"
    wrk_rate -t2 -c64 -d${SECS}s -s "$work/json100.lua" "http://127.0.0.1:$port/v1/topics/json/partitions/0/records"
    local ls=$((RATE * 100))
    echo "    records/s: $(fmt $ls)"
    stop_servers
    redis_xadd_everysec
    row "JSON append, 100 x 100 B, 64 conns" "$(fmt $ls) rec/s" "jansson parse alone $(fmt "$jansson") rec/s" \
        "$(ratio $ls "$jansson")" ">= 0.7 of jansson" "$(atleast "$(ratio $ls "$jansson")" 0.7)"
    row "JSON append vs Redis" "$(fmt $ls) rec/s" "Redis XADD -P16 -c50 $(fmt "$REDIS_XADD") entries/s" \
        "$(ratio $ls "$REDIS_XADD")" ">= 2x Redis" "$(atleast "$(ratio $ls "$REDIS_XADD")" 2)"
}

bench_binary() {
    need wrk wrk || { echo "wrk unavailable; skipping"; return; }
    make_bodies
    echo "== binary append (the same 100 records as one RecordBatch v2 a request, 64 connections, $SECS s)"
    local port; port=$(free_port)
    start_logstore "$port" || return
    create_topic "$port" binary
    echo "  logstore:"
    wrk_rate -t2 -c64 -d${SECS}s -s "$work/binary100.lua" "http://127.0.0.1:$port/v1/topics/binary/partitions/0/records"
    local ls=$((RATE * 100))
    echo "    records/s: $(fmt $ls)"
    stop_servers
    # The ceiling: the same batch appended by a bare pwrite() loop for as
    # long, on the same file system, with nothing else running.
    mkdir -p "$work/data-pagecache"
    echo "  page cache alone (bench_page_cache: one thread pwrite()s the same batch at the end of a file, $SECS s):"
    "$B/bench_page_cache" "$work/data-pagecache" "$work/batch100.bin" "$SECS" | tee "$work/pagecache.out" | sed 's/^/    /'
    local pc; pc=$(awk '/chunks\/s/ {printf "%.0f", $5 * 100}' "$work/pagecache.out")
    echo "    records/s: $(fmt "${pc:-0}")"
    stop_servers
    local eport; eport=$(free_port)
    "$B/bench_mhd_echo" "$eport" 4 >"$work/echo.out" 2>&1 &
    pids+=($!)
    wait_port "$eport" || { echo "bench_mhd_echo did not start"; return; }
    echo "  bare libmicrohttpd server (bench_mhd_echo: thread pool of 4, epoll, body gathered, 200 {\"ok\":true}):"
    wrk_rate -t2 -c64 -d${SECS}s -s "$work/binary100.lua" "http://127.0.0.1:$eport/"
    local echo_rps=$RATE
    echo "    requests/s x 100: $(fmt $((echo_rps * 100))) records/s"
    stop_servers
    redis_xadd_everysec
    local v; v=$(awk -v x=$ls 'BEGIN {print (x >= 2000000 ? "met" : "MISSED")}')
    row "binary append, 100-record batches, 64 conns" "$(fmt $ls) rec/s" \
        "bare MHD server $(fmt $((echo_rps * 100))) rec/s" "$(ratio $ls $((echo_rps * 100)))" ">= 2,000,000 rec/s" "$v"
    row "binary append vs page cache alone" "$(fmt $ls) rec/s" "pwrite() loop $(fmt "${pc:-0}") rec/s" \
        "$(ratio $ls "${pc:-0}")" "(ceiling)" "-"
    row "binary append vs Redis" "$(fmt $ls) rec/s" "Redis XADD -P16 -c50 $(fmt "$REDIS_XADD") entries/s" \
        "$(ratio $ls "$REDIS_XADD")" ">= 10x Redis" "$(atleast "$(ratio $ls "$REDIS_XADD")" 10)"
}

bench_durable_redis() {
    need wrk wrk || { echo "wrk unavailable; skipping"; return; }
    make_bodies
    echo "== durable append vs Redis (flush.messages=1 / appendfsync always, 1 record a request, 50 clients, $SECS s)"
    local port; port=$(free_port)
    start_logstore "$port" || return
    create_topic "$port" durable '{"flush.messages":"1"}'
    echo "  logstore:"
    wrk_rate -t2 -c50 -d${SECS}s -s "$work/one.lua" "http://127.0.0.1:$port/v1/topics/durable/partitions/0/records"
    local ls=$RATE
    stop_servers
    local rport; rport=$(free_port)
    start_redis "$rport" always || return
    echo "  Redis XADD, 50 clients, no pipelining, appendonly yes, appendfsync always:"
    redis_rate "$rport" "-c 50" XADD durable '*' k durable-record-0123456789
    local rd=$RATE
    stop_servers
    row "durable append, 50 clients" "$(fmt "$ls") appends/s" "Redis XADD appendfsync always $(fmt "$rd")/s" \
        "$(ratio "$ls" "$rd")" ">= Redis" "$(atleast "$(ratio "$ls" "$rd")" 1)"
}

bench_read() {
    need wrk wrk || { echo "wrk unavailable; skipping"; return; }
    make_bodies
    echo "== JSON read (1,000 records of 100 B a request from a warm log, 50 connections, $SECS s)"
    local port; port=$(free_port)
    start_logstore "$port" || return
    create_topic "$port" read
    local url="http://127.0.0.1:$port/v1/topics/read/partitions/0/records"
    wrk -t1 -c4 -d1s -s "$work/binary100.lua" "$url" >/dev/null 2>&1 # fill: thousands of batches
    local n
    n=$(curl -s "$url?offset=0&max_records=1000" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["records"]))')
    echo "  log filled: high watermark $(curl -s "http://127.0.0.1:$port/v1/topics/read/partitions/0/offsets?spec=latest"); a read returns $n records"
    echo "  logstore GET ?offset=0&max_records=1000:"
    wrk_rate -t2 -c50 -d${SECS}s -s "$work/get-json.lua" "$url?offset=0&max_records=1000"
    local ls=$((RATE * n))
    echo "    records/s: $(fmt $ls)"
    stop_servers
    local rport; rport=$(free_port)
    start_redis "$rport" everysec || return
    redis-benchmark -h 127.0.0.1 -p "$rport" -c 50 -P 16 -n 100000 XADD read '*' k-000000 "$(printf 'v%.0s' $(seq 100))" >/dev/null 2>&1
    echo "  Redis XRANGE read - + COUNT 100 (stream of $(redis-cli -p "$rport" XLEN read) entries {k-000000: 100 B}), 50 clients:"
    redis_rate "$rport" "-c 50" XRANGE read - + COUNT 100
    local rd=$((RATE * 100))
    echo "    entries/s: $(fmt $rd)"
    stop_servers
    row "JSON read, 1,000 records a request" "$(fmt $ls) rec/s" "Redis XRANGE COUNT 100 $(fmt $rd) entries/s" \
        "$(ratio $ls $rd)" ">= Redis" "$(atleast "$(ratio $ls $rd)" 1)"
}

bench_raw() {
    need wrk wrk || { echo "wrk unavailable; skipping"; return; }
    make_bodies
    echo "== raw read (Accept: application/octet-stream, 1 MiB a request, 64 connections, $SECS s)"
    local port; port=$(free_port)
    start_logstore "$port" || return
    create_topic "$port" raw
    local url="http://127.0.0.1:$port/v1/topics/raw/partitions/0/records?offset=0&max_bytes=1048576"
    wrk -t1 -c4 -d1s -s "$work/binary100.lua" "http://127.0.0.1:$port/v1/topics/raw/partitions/0/records" >/dev/null 2>&1
    local size seg="$work/data-$port/raw-0/00000000000000000000.log"
    size=$(curl -s -H 'Accept: application/octet-stream' -o /dev/null -w '%{size_download}' "$url")
    echo "  segment file $(stat -c %s "$seg") bytes; a raw read returns $size bytes (whole batches up to 1 MiB)"
    echo "  logstore:"
    wrk_rate -t2 -c64 -d${SECS}s -s "$work/get-raw.lua" "$url"
    local ls; ls=$(awk -v r="$RATE" -v s="$size" 'BEGIN {printf "%.0f", r * s / 1e6}')
    echo "    body MB/s: $ls"
    local nport; nport=$(free_port)
    start_nginx "$nport" "$work/data-$port" || return
    local nsize
    nsize=$(curl -s -r 0-1048575 -o /dev/null -w '%{size_download}' "http://127.0.0.1:$nport/raw-0/00000000000000000000.log")
    echo "  nginx $(nginx -v 2>&1 | sed 's/.*\///') (sendfile on, $(nproc) workers), Range: bytes=0-1048575 of the same segment file ($nsize bytes):"
    wrk_rate -t2 -c64 -d${SECS}s -s "$work/get-range.lua" "http://127.0.0.1:$nport/raw-0/00000000000000000000.log"
    local ng; ng=$(awk -v r="$RATE" -v s="$nsize" 'BEGIN {printf "%.0f", r * s / 1e6}')
    echo "    body MB/s: $ng"
    row "raw read, 1 MiB a request, 64 conns" "$(fmt "$ls") MB/s ($(fmt "$size") B a request)" \
        "nginx sendfile $(fmt "$ng") MB/s" "$(ratio "$ls" "$ng")" ">= 0.8 of nginx" "$(atleast "$(ratio "$ls" "$ng")" 0.8)"
    if [ "$size" -lt 943718 ]; then
        # logstore answered much less than the 1 MiB asked for: also compare
        # with nginx sending the same number of bytes a request, to tell the
        # short answer apart from the cost of each request.
        echo "  logstore answered $size of the 1,048,576 bytes asked for; nginx with Range: bytes=0-$((size - 1)) (the same bytes a request):"
        printf 'wrk.headers["Range"] = "bytes=0-%d"\n' $((size - 1)) >"$work/get-range-same.lua"
        wrk_rate -t2 -c64 -d${SECS}s -s "$work/get-range-same.lua" "http://127.0.0.1:$nport/raw-0/00000000000000000000.log"
        local ng2; ng2=$(awk -v r="$RATE" -v s="$size" 'BEGIN {printf "%.0f", r * s / 1e6}')
        echo "    body MB/s: $ng2"
        row "  (info) raw read, same $(fmt "$size") B a request" "$(fmt "$ls") MB/s" "nginx sendfile $(fmt "$ng2") MB/s" \
            "$(ratio "$ls" "$ng2")" "(info)" "-"
    fi
    stop_servers
}

bench_tail() {
    echo "== tail latency (100 parked long-polls, one record appended, 200 rounds)"
    local port; port=$(free_port)
    start_logstore "$port" || return
    create_topic "$port" tail
    "$B/bench_tail_latency" "$port" tail 100 200 30 | tee "$work/tail.out" | sed 's/^/  /'
    # Delivery is the answer reaching the poller's socket (the kernel's
    # receive timestamp); "seen" adds this one client thread's own queue.
    local p50 p99 mx s50 s99
    read -r p50 p99 mx < <(awk '/append-to-arrival, every poller/ {print $5, $11, $14}' "$work/tail.out")
    read -r s50 s99 < <(awk '/append-to-seen, every poller/ {print $5, $11}' "$work/tail.out")
    local v; v=$(awk -v x="${p99:-999}" 'BEGIN {print (x <= 2 ? "met" : "MISSED")}')
    row "tail latency, 100 parked long-polls" "p50 $p50 / p99 $p99 / max $mx ms" \
        "seen by the client: p50 $s50 / p99 $s99 ms" "-" "p99 <= 2 ms" "$v"
    stop_servers
}

bench_compress() {
    need wrk wrk || { echo "wrk unavailable; skipping"; return; }
    make_bodies
    local vb kb
    read -r vb kb <"$work/jsonlike.stats"
    echo "== compression (100 JSON-like values a request, $vb B of values + $kb B of keys; 64 connections, $SECS s each)"
    local port; port=$(free_port)
    start_logstore "$port" || return
    local base_rate=0 base_bpr=0
    for codec in uncompressed lz4 zstd; do
        create_topic "$port" "c-$codec" "{\"compression.type\":\"$codec\"}"
        echo "  compression.type=$codec:"
        wrk_rate -t2 -c64 -d${SECS}s -s "$work/jsonlike100.lua" "http://127.0.0.1:$port/v1/topics/c-$codec/partitions/0/records"
        local info bytes recs bpr
        info=$(curl -s "http://127.0.0.1:$port/v1/topics/c-$codec/partitions/0")
        read -r bytes recs < <(python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["size_bytes"], d["high_watermark"])' <<<"$info")
        bpr=$(awk -v b="$bytes" -v r="$recs" 'BEGIN {printf "%.1f", (r > 0 ? b / r : 0)}')
        echo "    $(fmt $((RATE * 100))) records/s; $(fmt "$bytes") bytes on disk for $(fmt "$recs") records = $bpr B/record"
        if [ "$codec" = uncompressed ]; then
            base_rate=$((RATE * 100)) base_bpr=$bpr
            row "compression: uncompressed" "$(fmt $((RATE * 100))) rec/s, $bpr B/record on disk" "-" "-" "(reference)" "-"
        else
            row "compression: $codec" "$(fmt $((RATE * 100))) rec/s, $bpr B/record on disk" \
                "uncompressed $(fmt $base_rate) rec/s, $base_bpr B/record" \
                "size $(ratio "$bpr" "$base_bpr"), speed $(ratio $((RATE * 100)) $base_rate)" "(report)" "-"
        fi
    done
    stop_servers
}

bench_recovery() {
    echo "== recovery after an unclean stop (flushed total, then unflushed data after the recovery point)"
    "$B/bench_recovery" "$work/recovery" "${RECOVERY_TOTALS_MB:-256,1024}" \
        "${RECOVERY_UNFLUSHED_MB:-0,32,128,512}" | tee "$work/recovery.out" | sed 's/^/  /'
    # The largest total's rows: its biggest unflushed size, nothing unflushed, the clean open.
    local total unfl warm cold scan none clean
    total=$(awk '/^  total/ {t=$2} END {print t}' "$work/recovery.out")
    unfl=$(awk '/unflushed after it/ {u=$2} END {print u}' "$work/recovery.out")
    warm=$(awk '/unflushed after it/ {u=$2} /^    warm/ && /unclean/ {w[u]=$3; s[u]=$(NF-1)} END {print w[u] " " s[u]}' "$work/recovery.out")
    read -r warm scan <<<"$warm"
    cold=$(awk '/unflushed after it/ {u=$2} /^    cold/ {c=$3} END {print c}' "$work/recovery.out")
    none=$(awk '/^  \+ 0 MB unflushed/ {f=1; next} f && /^    warm/ {n=$3; f=0} END {print n}' "$work/recovery.out")
    clean=$(awk '/after a clean stop/ {f=1; next} f && /^    warm/ {c=$3; f=0} END {print c}' "$work/recovery.out")
    row "recovery: open after kill -9, ${total} MB flushed + ${unfl} MB not" \
        "${warm} ms warm (${scan} MB/s), ${cold} ms cold" "nothing unflushed ${none} ms; clean stop ${clean} ms" \
        "-" "(report)" "-"
    rm -rf "$work/recovery"
}

bench_startup() {
    local parts=${STARTUP_PARTITIONS:-2000} threads=${STARTUP_THREADS:-1,4,8} cache=warm
    [ "${STARTUP_COLD:-0}" = 1 ] && cache=cold
    echo "== startup: $parts partitions over 8 topics, a few batches each; clean stop, then kill -9 ($cache page cache)"
    "$B/bench_startup" "$work/startup" "$parts" 8 "$threads" 3 "$cache" | tee "$work/startup.out" | sed 's/^/  /'
    # One row per thread count: the medians after a clean stop and after kill -9.
    awk '/num.recovery.threads.per.data.dir=/ {split($1, a, "="); t = a[2]}
         /^    clean/ {c[t] = $6} /^    unclean/ {u[t] = $6; order[++n] = t}
         END {for (i = 1; i <= n; i++) print order[i], c[order[i]], u[order[i]]}' "$work/startup.out" |
        while read -r t c u; do
            row "startup, $(fmt "$parts") partitions, $t recovery thread(s), $cache" "clean stop $c ms, kill -9 $u ms (medians)" \
                "-" "-" "(report)" "-"
        done
    rm -rf "$work/startup"
}

bench_cleaner() {
    local mb=${CLEANER_MB:-256} seg buf wall cpu raw
    echo "== log cleaner: one thread, ${mb} MB of dirty log, 100-byte values over 100,000 keys"
    # Kafka's default segment size (1 GiB: the dirty log is one segment), then
    # 1 MiB segments, where creating three files a segment weighs in.
    for run in 1024:128 1024:4 1:128; do
        seg=${run%%:*} buf=${run##*:}
        "$B/bench_cleaner" "$work/cleaner-$seg-$buf" "$mb" 100000 100 "$seg" "$buf" |
            tee "$work/cleaner-$seg-$buf.out" | sed 's/^/  /'
        wall=$(awk '/clean, one thread:/ {print $4}' "$work/cleaner-$seg-$buf.out")
        cpu=$(awk '/clean, per CPU-second:/ {print $4}' "$work/cleaner-$seg-$buf.out")
        raw=$(awk '/read\(\) of the same/ {print $7}' "$work/cleaner-$seg-$buf.out")
        row "cleaner: 1 thread, ${seg} MiB segments, ${buf} MiB dedupe buffer" \
            "$wall MB/s dirty log ($cpu per CPU-s)" "read() $raw MB/s" "$(ratio "$wall" "$raw")" \
            "≥ 200 MB/s" "$(atleast "$wall" 200)"
    done
}

print_summary() {
    [ -s "$summary" ] || return 0
    echo
    echo "== summary ($(nproc) cores, $(uname -r), loopback, load average now $(cut -d' ' -f1-3 /proc/loadavg);"\
         "each figure beside its anchor from this run; never pass/fail)"
    python3 - "$summary" <<'PY'
import sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
head = ["benchmark", "logstore", "anchor (same run)", "ratio", "target", "vs target"]
w = [max(len(r[i]) for r in rows + [head]) for i in range(6)]
for r in [head] + rows:
    print("  " + " | ".join(c.ljust(w[i]) for i, c in enumerate(r)))
PY
}

# ---- main ------------------------------------------------------------------------

all_groups=(engine http durable json binary durable-redis read raw tail compress recovery startup cleaner)
if [ $# -eq 0 ] || [ "$1" = all ]; then
    set -- "${all_groups[@]}"
fi
for g in "$@"; do
    case " ${all_groups[*]} " in *" $g "*) ;; *) echo "unknown group $g (groups: ${all_groups[*]})"; exit 2 ;; esac
done
missing=()
for b in build/logstore "$B"/bench_{engine_append,fsync,json_parse,make_batch,mhd_echo,tail_latency,recovery,startup,cleaner}; do
    [ -x "$b" ] || missing+=("$b")
done
if [ ${#missing[@]} -gt 0 ]; then
    make --no-print-directory "${missing[@]}" >/dev/null || { echo "cannot build ${missing[*]}"; exit 1; }
fi
echo "logstore benchmarks: $(nproc) cores, $(uname -r), loopback, ${SECS} s a measurement;" \
     "load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
for g in "$@"; do
    case "$g" in
        engine) bench_engine ;;
        http) bench_http ;;
        durable) bench_durable ;;
        json) bench_json ;;
        binary) bench_binary ;;
        durable-redis) bench_durable_redis ;;
        read) bench_read ;;
        raw) bench_raw ;;
        tail) bench_tail ;;
        compress) bench_compress ;;
        recovery) bench_recovery ;;
        startup) bench_startup ;;
        cleaner) bench_cleaner ;;
    esac
    stop_servers
done
print_summary
