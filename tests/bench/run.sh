#!/usr/bin/env bash
# Benchmarks: each prints its figures beside the anchor measured in the same
# run.  Never pass/fail.  Peers and load tools (wrk) are installed with
# apt-get when missing, started on loopback, and stopped by PID.
#
#   make bench                     everything
#   tests/bench/run.sh engine      one group: engine | http | durable
set -u
cd "$(dirname "$0")/../.."
B=build/rel/tests/bench
work=$(mktemp -d /tmp/logstore-bench-XXXXXX)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
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

start_logstore() { # start_logstore <port> <extra --set args...>
    local port=$1; shift
    ./build/logstore --set log.dirs="$work/data-$port" --set listeners=http://127.0.0.1:$port \
        --set log.level=WARN "$@" >"$work/logstore-$port.log" 2>&1 &
    pids+=($!)
    for _ in $(seq 200); do
        curl -sf "http://127.0.0.1:$port/health/ready" >/dev/null && return 0
        sleep 0.05
    done
    echo "logstore did not start"; cat "$work/logstore-$port.log"; return 1
}

bench_engine() {
    echo "== engine append (seed workload: 10 records x 250 B a batch)"
    "$B/bench_engine_append" "$work/engine" 512
}

bench_http() {
    need wrk wrk || { echo "wrk unavailable; skipping HTTP benchmarks"; return; }
    local port; port=$(free_port)
    start_logstore "$port" || return
    curl -s -XPOST "http://127.0.0.1:$port/v1/topics" -H 'Content-Type: application/json' \
        -d '{"name":"bench","partitions":1}' >/dev/null
    python3 - "$work" <<'PY'
import json, sys
w = sys.argv[1]
body = json.dumps({"records": [{"key": "k-%06d" % i, "value": "v" * 250} for i in range(10)]})
open(w + "/seed.json", "w").write(body)
open(w + "/post.lua", "w").write(
    'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
    'local f = io.open("%s/seed.json", "r")\nwrk.body = f:read("*a")\nf:close()\n' % w)
PY
    echo "== HTTP JSON append (10 records x 250 B a request, 64 connections, 10 s)"
    wrk -t2 -c64 -d10s -s "$work/post.lua" "http://127.0.0.1:$port/v1/topics/bench/partitions/0/records" |
        tee "$work/wrk.out" | grep -E 'Requests/sec|Latency'
    awk '/Requests\/sec/ {printf "  records/s: %.0f\n", $2 * 10}' "$work/wrk.out"
}

bench_durable() {
    need wrk wrk || { echo "wrk unavailable; skipping"; return; }
    local port; port=$(free_port)
    start_logstore "$port" || return
    curl -s -XPOST "http://127.0.0.1:$port/v1/topics" -H 'Content-Type: application/json' \
        -d '{"name":"durable","partitions":1,"configs":{"flush.messages":"1"}}' >/dev/null
    echo '{"records":[{"key":"k","value":"durable-record-0123456789"}]}' >"$work/one.json"
    printf 'wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\nlocal f = io.open("%s/one.json", "r")\nwrk.body = f:read("*a")\nf:close()\n' "$work" >"$work/one.lua"
    echo "== durable append (flush.messages=1, 1 record a request; group commit)"
    mkdir -p "$work/fsync"
    "$B/bench_fsync" "$work/fsync" 3 | sed 's/^/  /'
    local one=0
    for c in 1 8 64; do
        local rps
        rps=$(wrk -t1 -c$c -d5s -s "$work/one.lua" "http://127.0.0.1:$port/v1/topics/durable/partitions/0/records" |
            awk '/Requests\/sec/ {print $2}')
        [ "$c" = 1 ] && one=$rps
        awk -v c="$c" -v r="$rps" -v o="$one" 'BEGIN {printf "  %2d clients: %8.0f appends/s (%.1fx one client)\n", c, r, (o > 0 ? r / o : 0)}'
    done
}

groups=${1:-all}
case "$groups" in
    engine) bench_engine ;;
    http) bench_http ;;
    durable) bench_durable ;;
    all) bench_engine; bench_http; bench_durable ;;
    *) echo "unknown group $groups"; exit 2 ;;
esac
