#!/usr/bin/env bash
# The dashboard at GET / rendered by a real browser: headless chromium loads
# it from a running logstore, lets its JavaScript call the API, and dumps the
# DOM, which must show the topic, its partitions' high watermarks, its config
# overrides, the background jobs, a snapshot with its exact sizes and path,
# the bytes only snapshots hold (/v1/log-dirs), the process figures from
# /metrics (resident memory, CPU time, start time, memory maps of their limit,
# maintenance requests running and waiting)
# and the "ready" state, with no error line.
# A sealed segment cut short while the server was down is drawn as damaged.
# With authentication on and no token typed in, the page must show the API's
# 401 message and none of the data (no snapshot name, no process figure),
# while its state badge still says ready.
# A screenshot of the first page is saved as build/san/test-logs/dashboard.png
# (1280x1000) for people to look at.
# Prints TAP.
#
# Installs Debian's chromium when missing (browser_env.sh).  Each chromium run gets a fresh
# profile dir and a time limit; every process started here is stopped by PID
# and the temp dir is removed.
set -u
cd "$(dirname "$0")/../.."
bin=${TEST_LOGSTORE_BINARY:-build/san/logstore}
logdir=$(dirname "$bin")/test-logs
. tests/scripts/tap.sh
. tests/scripts/ready.sh

tmp=$(mktemp -d /tmp/logstore-dash-XXXXXX)
pids=()
cleanup() {
    local p
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
    stop_chromium_under "$tmp"
    rm -rf "$tmp"
}
trap cleanup EXIT

# ---- chromium --------------------------------------------------------------------------
. tests/scripts/browser_env.sh
ok "$("$chrome" --version 2>/dev/null | head -1) is installed"

# Runs headless chromium on a URL with a fresh profile; extra flags after it.
chromium_run() {
    local url=$1 profile
    shift
    profile=$(mktemp -d "$tmp/profile-XXXXXX")
    timeout -k 5 60 "$chrome" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --user-data-dir="$profile" --virtual-time-budget=5000 "$@" "$url" 2>>"$tmp/chromium.err"
}

# ---- logstore ----------------------------------------------------------------------------
# start_logstore NAME [--set ...]: sets port_NAME and pid_NAME.
start_logstore() {
    local name=$1 port= pid
    shift
    "$bin" --set log.dirs="$tmp/data-$name" --set listeners=http://127.0.0.1:0 "$@" >"$tmp/$name.log" 2>&1 &
    pid=$!
    pids+=("$pid")
    port=$(ready_port "$tmp/$name.log")
    printf -v "port_$name" '%s' "$port"
    printf -v "pid_$name" '%s' "$pid"
    [ -n "$port" ] || { tail -20 "$tmp/$name.log" | sed 's/^/# /'; return 1; }
}

# stop_logstore NAME: SIGTERM, a clean exit and no sanitizer report.
stop_logstore() {
    local name=$1 pidvar="pid_$1" rc
    kill "${!pidvar}"
    wait "${!pidvar}"
    rc=$?
    local keep=() p
    for p in "${pids[@]}"; do [ "$p" = "${!pidvar}" ] || keep+=("$p"); done
    pids=("${keep[@]}")
    check "logstore ($name) stops cleanly (status $rc)" test "$rc" -eq 0
    if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error' "$tmp/$name.log"; then
        not_ok "no sanitizer report from logstore ($name)"
        grep -A5 -E 'ERROR: (Address|Leak)Sanitizer|runtime error' "$tmp/$name.log" | head -20 | sed 's/^/# /'
    else
        ok "no sanitizer report from logstore ($name)"
    fi
}

topic=dash-zebra-$$
t_start=$SECONDS
check "logstore starts" start_logstore open || finish
B=http://127.0.0.1:$port_open
post() { curl -sf -X POST "$B$1" -H 'Content-Type: application/json' -H "${3:-X-No: 1}" -d "$2" >/dev/null; }
traffic() {
    post /v1/topics "{\"name\":\"$topic\",\"partitions\":2,\"configs\":{\"retention.ms\":\"3600000\"}}" &&
    post "/v1/topics/$topic/partitions/0/records" '{"records":[{"value":"a"},{"value":"b"},{"value":"c"}]}' &&
    post "/v1/topics/$topic/partitions/1/records" \
        '{"records":[{"value":"1"},{"value":"2"},{"value":"3"},{"value":"4"},{"value":"5"},{"value":"6"},{"value":"7"}]}' &&
    post "/v1/topics/$topic/partitions/0/segments:roll" '{}'
}
check "a topic $topic with records in both partitions, partition 0 rolled" traffic
check "a snapshot dash-snap-1" post /v1/admin/snapshots '{"name":"dash-snap-1"}'
# What the page must show, as the API and /metrics say it (nothing changes
# until the page has loaded: the periodic jobs wait log.initial.task.delay.ms).
snap_json=$(curl -sf "$B/v1/admin/snapshots")
snap_size=$(printf '%s' "$snap_json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["snapshots"][0]["size_bytes"])')
snap_unshared=$(printf '%s' "$snap_json" | python3 -c 'import json,sys; print(json.load(sys.stdin)["snapshots"][0]["unshared_bytes"])')
snapshot_bytes=$(curl -sf "$B/v1/log-dirs" | python3 -c 'import json,sys; print(json.load(sys.stdin)["log_dirs"][0]["snapshot_bytes"])')
metric() { curl -sf "$B/metrics" | sed -n "s/^$1 //p"; }
maps_limit=$(metric logstore_memory_maps_limit)
started=$(metric process_start_time_seconds)
started_text=$(date -u -d "@${started%.*}" '+%F %T')

# ---- the rendered page ----------------------------------------------------------------------
chromium_run "$B/" --dump-dom >"$tmp/dom.html"
check "chromium dumps the rendered DOM" test -s "$tmp/dom.html"
dom_has() { grep -qF -- "$1" "$tmp/dom.html" || { echo "# the DOM lacks: $1"; return 1; }; }
check "the state badge says ready" dom_has 'id="state" class="status ready">ready<'
check "the topic is listed" dom_has "<h3>$topic <span class=\"muted\">2 partition(s)"
check "partition 0: log start 0, high watermark 3" dom_has '<tr><td>0</td><td class="num">0</td><td class="num">3</td>'
check "partition 1: log start 0, high watermark 7" dom_has '<tr><td>1</td><td class="num">0</td><td class="num">7</td>'
# The empty active segment after the roll covers no offsets: its hover text
# said "offsets 3–2" (base to next - 1) and an empty time range.
check "partition 0's sealed segment: offsets 0–2" dom_has ', offsets 0–2, '
check "partition 0's empty active segment: no records" dom_has 'class="seg active" title="segment 3: 0 B, no records"'
no_backwards_range() { ! grep -qF 'offsets 3–2' "$tmp/dom.html" || { echo "# a segment shows offsets 3–2"; return 1; }; }
check "no segment shows a backwards offset range" no_backwards_range
check "the config override is shown" dom_has 'retention.ms=3600000'
check "the background jobs are listed" dom_has '<td>log-retention</td>'
# The periodic jobs have not run yet (log.initial.task.delay.ms): no duration, not "– ms".
no_unit_without_figure() { ! grep -qF -- '>– ms<' "$tmp/dom.html" || { echo "# a job shows '– ms'"; return 1; }; }
check "a job that never ran shows no duration" no_unit_without_figure
check "the cleaner section rendered" dom_has 'no compacted topics'
check "the snapshot is listed" dom_has '<tr><td>dash-snap-1</td>'
check "with its size ($snap_size bytes)" dom_has "<td class=\"num\" title=\"$snap_size bytes\">"
check "and what removing it frees ($snap_unshared bytes)" dom_has "<td class=\"num\" title=\"$snap_unshared bytes\">"
check "and its path" dom_has "$tmp/data-open/snapshots/dash-snap-1<"
check "what only snapshots hold ($snapshot_bytes bytes)" \
    dom_has "title=\"$snapshot_bytes\"><span class=\"muted\">Held only by snapshots</span>"
dom_re() { grep -qE -- "$1" "$tmp/dom.html" || { echo "# the DOM matches no: $1"; return 1; }; }
check "the resident memory" dom_re 'title="[0-9]+"><span class="muted">Resident memory</span><b>[0-9.]+ (KiB|MiB|GiB)</b>'
check "the CPU time" dom_re '<span class="muted">CPU time</span><b>[0-9]+\.[0-9]{2} s</b>'
check "when the process started ($started_text)" dom_has "<span class=\"muted\">Process started</span><b>$started_text</b>"
check "the memory maps, of the limit ($maps_limit)" dom_re "<span class=\"muted\">Memory maps</span><b>[0-9]+ of $maps_limit</b>"
check "the maintenance requests running and waiting, none" \
    dom_has '<span class="muted">Maintenance running / waiting</span><b>0 / 0</b>'
check "and by kind" dom_has 'title="compaction: 0 running, 0 waiting; retention: 0 running, 0 waiting; snapshot: 0 running, 0 waiting">'
check "no error line" dom_has '<p id="error" class="err"></p>'

# Many topics: only 20 are drawn (a refresh costs a request per topic and
# per partition drawn), and the page says so.
many() { local i; for i in $(seq -w 1 25); do post /v1/topics "{\"name\":\"zz-many-$i\"}" || return 1; done; }
check "25 more topics" many
chromium_run "$B/" --dump-dom >"$tmp/dom-many.html"
drawn=$(grep -oE '">[0-9]+ partition\(s\) ·' "$tmp/dom-many.html" | wc -l)
check "20 topics drawn of 26 ($drawn)" test "$drawn" -eq 20
check "the page says how many are shown" grep -qF 'showing 20 of 26 topics' "$tmp/dom-many.html"
check "the first by name is drawn" grep -qF "<h3>$topic <span" "$tmp/dom-many.html"

# ---- a screenshot for humans ------------------------------------------------------------------
mkdir -p "$logdir"
shot=$logdir/dashboard.png
rm -f "$shot"
chromium_run "$B/" --screenshot="$shot" --window-size=1280,1000 >/dev/null
png_ok() {
    [ -s "$shot" ] || { echo "# no $shot"; return 1; }
    local sig size w h
    sig=$(head -c 8 "$shot" | od -An -tx1 | tr -d ' \n')
    size=$(stat -c %s "$shot")
    w=$((16#$(od -An -tx1 -j16 -N4 "$shot" | tr -d ' \n')))
    h=$((16#$(od -An -tx1 -j20 -N4 "$shot" | tr -d ' \n')))
    echo "# $shot: $size bytes, ${w}x$h"
    [ "$sig" = 89504e470d0a1a0a ] && [ "$size" -gt 10000 ] && [ "$size" -lt 20000000 ] &&
        [ "$w" -eq 1280 ] && [ "$h" -eq 1000 ]
}
check "the screenshot is a 1280x1000 PNG of reasonable size" png_ok
stop_logstore open

# ---- a damaged segment ---------------------------------------------------------------------------
# A sealed segment cut short while the server was down is drawn in red.
check "logstore starts (damage)" start_logstore damage || finish
B=http://127.0.0.1:$port_damage
damage_setup() {
    post /v1/topics '{"name":"hurt"}' &&
    post /v1/topics/hurt/partitions/0/records '{"records":[{"value":"aaaa"},{"value":"bbbb"}]}' &&
    post /v1/topics/hurt/partitions/0/records '{"records":[{"value":"cccc"}]}' &&
    curl -sf -X POST "$B/v1/topics/hurt/partitions/0/segments:roll" >/dev/null &&
    post /v1/topics/hurt/partitions/0/records '{"records":[{"value":"dddd"}]}'
}
check "a topic with a sealed segment" damage_setup
stop_logstore damage
seg0=$tmp/data-damage/hurt-0/00000000000000000000.log
check "its first segment is cut short" truncate -s "$(($(stat -c %s "$seg0") - 10))" "$seg0"
check "logstore starts again (damage)" start_logstore damage || finish
B=http://127.0.0.1:$port_damage
chromium_run "$B/" --dump-dom >"$tmp/dom.html"
check "the damaged segment is drawn as damaged" dom_has 'class="seg damaged" title="segment 0 (DAMAGED'
check "the active one is not" dom_has 'class="seg active" title="segment 3:'
stop_logstore damage

# ---- with authentication on and no token ------------------------------------------------------
token=dash-admin-$$-$RANDOM
printf '%s admin\n' "$("$bin" --hash-token "$token")" >"$tmp/tokens"
check "logstore starts with auth.tokens.file" start_logstore auth --set auth.tokens.file="$tmp/tokens" || finish
B=http://127.0.0.1:$port_auth
check "a topic made with the admin token" post /v1/topics "{\"name\":\"$topic\"}" "Authorization: Bearer $token"
check "a snapshot taken with the admin token" post /v1/admin/snapshots '{"name":"dash-secret"}' "Authorization: Bearer $token"
chromium_run "$B/" --dump-dom >"$tmp/dom.html"
check "chromium dumps the page served without a token" test -s "$tmp/dom.html"
check "the page shows the API's 401 message" dom_has ': 401 a bearer token is required'
no_data() {
    ! grep -qF -- "$topic" "$tmp/dom.html" && ! grep -qF '<td>log-retention</td>' "$tmp/dom.html" &&
        ! grep -qF 'dash-secret' "$tmp/dom.html" && ! grep -qF '<span class="muted">Resident memory</span>' "$tmp/dom.html" ||
        { echo "# the page shows data without a token"; return 1; }
}
check "and none of the data (topics, jobs, snapshots, process figures)" no_data
check "the topics section still says Loading" dom_has 'id="topics" class="muted">Loading…<'
check "the snapshots section still says Loading" dom_has 'id="snapshots" class="muted">Loading…<'
check "the state badge still says ready (/health/ready needs no token)" \
    dom_has 'id="state" class="status ready">ready<'
stop_logstore auth
echo "# took $((SECONDS - t_start)) s after the install"
finish
