#!/usr/bin/env bash
# A web page on another origin reading logstore as browsers do: headless
# chromium, driven by tests/scripts/browser_steps.py, opens a page served by
# python3 -m http.server and, with http.cors.allowed.origins naming it:
# fetch() reads X-Next-Offset from a raw read and the error_code of a 404;
# an EventSource on offset=latest that has had no record yet stays open
# across a server stop and a start on the same port and, reconnecting by
# itself with Last-Event-ID, gets exactly the records appended meanwhile and
# after (no gap, no duplicate).  Prints TAP.
#
# Needs chromium and python3 (browser_env.sh installs them as root).  Every
# process started here is stopped by PID and the temp dir is removed.
set -u
cd "$(dirname "$0")/../.."
bin=${TEST_LOGSTORE_BINARY:-build/san/logstore}
. tests/scripts/tap.sh

tmp=$(mktemp -d /tmp/logstore-browser-XXXXXX)
cleanup() {
    stop_pid "$tmp/pid1"
    stop_pid "$tmp/pid2"
    stop_pid "$tmp/pid-web"
    stop_chromium_under "$tmp"
    rm -rf "$tmp"
}
trap cleanup EXIT
. tests/scripts/browser_env.sh
. tests/scripts/ready.sh

# ---- the page's origin ------------------------------------------------------------------
mkdir "$tmp/web"
echo '<!doctype html><html><head><link rel="icon" href="data:,"></head><body>another origin</body></html>' \
    >"$tmp/web/index.html"
python3 -u -m http.server 0 --bind 127.0.0.1 --directory "$tmp/web" >"$tmp/web.log" 2>&1 &
echo $! >"$tmp/pid-web"
web=
for _ in $(seq 1 100); do
    web=$(sed -n 's|.* port \([0-9]*\).*|\1|p' "$tmp/web.log" | head -1)
    [ -n "$web" ] && break
    sleep 0.05
done
check "a page server for another origin" test -n "$web" || finish
origin=http://127.0.0.1:$web

# ---- logstore ----------------------------------------------------------------------------
# start_logstore N PORT: the server on PORT (0: any), its PID in $tmp/pidN;
# prints the port once it is ready.
start_logstore() {
    local k=$1 port=$2
    "$bin" --set log.dirs="$tmp/data" --set listeners="http://127.0.0.1:$port" \
        --set http.cors.allowed.origins="$origin" --set http.sse.heartbeat.ms=500 >>"$tmp/logstore$k.log" 2>&1 &
    echo $! >"$tmp/pid$k"
    ready_port "$tmp/logstore$k.log" && return 0
    tail -20 "$tmp/logstore$k.log" | sed 's/^/# /' >&2
    return 1
}
export -f start_logstore ready_port
export bin tmp origin

port=$(start_logstore 1 0)
check "logstore starts" test -n "$port" || finish
B=http://127.0.0.1:$port
export B
append() {
    curl -sf -X POST "$B/v1/topics/feed/partitions/0/records" -H 'Content-Type: application/json' -d "$1" >/dev/null
}
export -f append
setup() {
    curl -sf -X POST "$B/v1/topics" -H 'Content-Type: application/json' -d '{"name":"feed"}' >/dev/null &&
    append '{"records":[{"value":"r0"},{"value":"r1"}]}'
}
check "a topic with two records" setup

# ---- the page -----------------------------------------------------------------------------
fetches="(async () => {
  const raw = await fetch('$B/v1/topics/feed/partitions/0/records?offset=0', {headers: {Accept: 'application/octet-stream'}});
  const bytes = (await raw.arrayBuffer()).byteLength;
  const nf = await fetch('$B/v1/topics/nope/partitions/0/records');
  return [raw.status, raw.headers.get('X-Next-Offset'), bytes > 0, nf.status, (await nf.json()).error_code];
})()"
listen="window.got = []; window.opens = 0;
  window.es = new EventSource('$B/v1/topics/feed/partitions/0/records?offset=latest');
  es.onopen = () => opens++;
  es.addEventListener('record', (e) => got.push([+e.lastEventId, JSON.parse(e.data).value]));
  true"
profile=$(mktemp -d "$tmp/profile-XXXXXX")
timeout -k 5 120 python3 tests/scripts/browser_steps.py "$chrome" "$profile" "$origin/" \
    "until:10000:document.readyState === 'complete'" \
    "js:$fetches" \
    "js:$listen" \
    "until:5000:opens === 1" \
    "sh:kill \$(cat $tmp/pid1); while kill -0 \$(cat $tmp/pid1) 2>/dev/null; do sleep 0.05; done" \
    "sh:start_logstore 2 $port >/dev/null && append '{\"records\":[{\"value\":\"r2\"},{\"value\":\"r3\"}]}'" \
    "until:15000:opens === 2" \
    "sh:append '{\"records\":[{\"value\":\"r4\"}]}'" \
    "until:5000:got.length >= 3" \
    "sleep:500" \
    "js:[es.readyState, got]" \
    >"$tmp/steps.out" 2>"$tmp/steps.err"
rc=$?
sed 's/^/# /' "$tmp/steps.out"
check "the browser ran every step (status $rc)" test "$rc" -eq 0 || { sed 's/^/# /' "$tmp/steps.err" | tail -20; finish; }
mapfile -t out < <(grep -v '^console-error ' "$tmp/steps.out")
check "fetch() reads a raw read, X-Next-Offset and a 404's error_code" \
    test "${out[1]}" = 'js [200, "2", true, 404, "unknown_topic"]'
check "the EventSource opens" test "${out[3]}" = "until true"
check "logstore starts again on the same port, and a record batch goes in" test "${out[5]}" = "sh 0"
check "the EventSource reconnects by itself" test "${out[6]}" = "until true"
check "it gets the records appended while it was away and after, each once" \
    test "${out[9]}" = 'js [1, [[2, "r2"], [3, "r3"], [4, "r4"]]]'

stop_pid "$tmp/pid2"
if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error' "$tmp"/logstore*.log; then
    not_ok "no sanitizer report from logstore"
    grep -h -A5 -E 'ERROR: (Address|Leak)Sanitizer|runtime error' "$tmp"/logstore*.log | head -20 | sed 's/^/# /'
else
    ok "no sanitizer report from logstore"
fi
finish
