#!/usr/bin/env bash
# The dashboard at GET / kept open in a real browser while its server stops
# and starts again (test_dashboard.sh looks at single loads).  Headless
# chromium, driven by tests/scripts/browser_steps.py over the DevTools pipe,
# keeps the page open: it loads with no console error (no /favicon.ico
# request to 404), shows rates once two refreshes have run, says
# "unreachable" (not "ready") once the server is stopped, "ready" again once
# it is back on the same port, and never shows a negative rate although the
# server's counters started again from zero, and shows the new process's
# start time (from /metrics) once it is back.  Prints TAP.
#
# Needs chromium and python3 (browser_env.sh installs them as root).  Every
# process started here is stopped by PID and the temp dir is removed.
set -u
cd "$(dirname "$0")/../.."
bin=${TEST_LOGSTORE_BINARY:-build/san/logstore}
. tests/scripts/tap.sh

tmp=$(mktemp -d /tmp/logstore-dashlive-XXXXXX)
# Both servers' PIDs go to files: the second is started from a browser step.
cleanup() {
    stop_pid "$tmp/pid1"
    stop_pid "$tmp/pid2"
    stop_chromium_under "$tmp"
    rm -rf "$tmp"
}
trap cleanup EXIT
. tests/scripts/browser_env.sh
. tests/scripts/ready.sh

# start_logstore N PORT: the server on PORT (0: any), its PID in $tmp/pidN;
# prints the port once it is ready.
start_logstore() {
    local k=$1 port=$2
    "$bin" --set log.dirs="$tmp/data" --set listeners="http://127.0.0.1:$port" >>"$tmp/logstore$k.log" 2>&1 &
    echo $! >"$tmp/pid$k"
    ready_port "$tmp/logstore$k.log" && return 0
    tail -20 "$tmp/logstore$k.log" | sed 's/^/# /' >&2
    return 1
}
export -f start_logstore ready_port
export bin tmp

port=$(start_logstore 1 0)
check "logstore starts" test -n "$port" || finish
B=http://127.0.0.1:$port
post() { curl -sf -X POST "$B$1" -H 'Content-Type: application/json' -d "$2" >/dev/null; }
traffic() {
    post /v1/topics '{"name":"live"}' &&
    post /v1/topics/live/partitions/0/records '{"records":[{"value":"a"},{"value":"b"},{"value":"c"}]}' &&
    curl -sf "$B/v1/topics/live/partitions/0/records?offset=0" >/dev/null
}
check "a topic with records appended and read" traffic

state='document.getElementById("state")'
h3='(document.querySelector("#topics h3") || {}).textContent || ""'
# Every topic heading the page ever draws, kept to look for negative rates.
watch='window.seen = []; new MutationObserver(() => document.querySelectorAll("#topics h3").forEach((h) => seen.push(h.textContent))).observe(document.getElementById("topics"), {childList: true, subtree: true}); true'
# The process start time the page shows (/metrics): another after the restart.
started='([...document.querySelectorAll("#process .stat")].find((d) => d.textContent.startsWith("Process started")) || {textContent: ""}).textContent'
profile=$(mktemp -d "$tmp/profile-XXXXXX")
timeout -k 5 120 python3 tests/scripts/browser_steps.py "$chrome" "$profile" "$B/" \
    "until:10000:/in [0-9.]+ rec\\/s/.test($h3)" \
    "js:$watch; window.firstStarted = $started; true" \
    "js:$state.textContent" \
    "sh:kill \$(cat $tmp/pid1)" \
    "until:10000:$state.textContent === 'unreachable'" \
    "js:[$state.className, document.getElementById('error').textContent]" \
    "sh:start_logstore 2 $port >/dev/null" \
    "until:10000:$state.textContent === 'ready' && /rec\\/s/.test($h3)" \
    "sleep:4500" \
    "js:seen.filter((t) => /(in|out) -[0-9]/.test(t))" \
    "js:$h3" \
    "until:15000:/Process started[0-9]/.test($started) && $started !== firstStarted" \
    "js:[firstStarted, $started]" \
    >"$tmp/steps.out" 2>"$tmp/steps.err"
rc=$?
sed 's/^/# /' "$tmp/steps.out"
check "the browser ran every step (status $rc)" test "$rc" -eq 0 || { sed 's/^/# /' "$tmp/steps.err" | tail -20; finish; }
mapfile -t out < <(grep -v '^console-error ' "$tmp/steps.out")
# Console errors while the server is up: before the stop, and once the page
# has seen it back (the refresh under way at the restart may fail).
before_stop=$(sed -n '1,/^sh /p' "$tmp/steps.out" | grep -c '^console-error ')
back=$(grep -n '^until ' "$tmp/steps.out" | sed -n '3s/:.*//p')
after_start=$(tail -n +"${back:-1}" "$tmp/steps.out" | grep -c '^console-error ')
check "the page loads and refreshes with no console error ($before_stop)" test "$before_stop" -eq 0
check "rates are shown after two refreshes" test "${out[0]}" = "until true"
check "the badge said ready while the server ran" test "${out[2]}" = 'js "ready"'
check "the badge says unreachable once the server stops" test "${out[4]}" = "until true"
check "drawn as bad, with an error line saying so" \
    grep -qF 'js ["status bad", "the server does not answer' "$tmp/steps.out"
check "logstore starts again on the same port" test "${out[6]}" = "sh 0"
check "the badge says ready again" test "${out[7]}" = "until true"
check "no negative rate after the server's counters restarted from zero" test "${out[8]}" = "js []"
check "no console error once the server is back ($after_start)" test "$after_start" -eq 0
echo "# the topic's heading at the end: ${out[9]}"
echo "# process start times shown: ${out[11]}"
check "the page showed the first server's start time" \
    grep -qE '^js \["Process started[0-9]{4}-[0-9]{2}-[0-9]{2} ' <<<"${out[11]}"
check "and shows the new server's once it is back" test "${out[10]}" = "until true"

stop_pid "$tmp/pid2"
if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error' "$tmp"/logstore*.log; then
    not_ok "no sanitizer report from logstore"
    grep -h -A5 -E 'ERROR: (Address|Leak)Sanitizer|runtime error' "$tmp"/logstore*.log | head -20 | sed 's/^/# /'
else
    ok "no sanitizer report from logstore"
fi
finish
