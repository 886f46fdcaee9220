#!/usr/bin/env bash
# README's walk-through, run the way a new user meets it: its ```sh examples,
# taken from README.md itself (readme_walk.py says which, and how each answer
# is compared with what README shows), in order, against a fresh server on a
# free loopback port with an empty data dir.  Prints TAP.
#
# The server is the sanitizer build (or $TEST_LOGSTORE_BINARY), stopped by
# PID at the end, which must be a clean exit with no sanitizer report.  The
# temp dir (data dir, the walk's working dir where batches.bin lands, the
# server's log) is removed.
set -u
cd "$(dirname "$0")/../.."
bin=${TEST_LOGSTORE_BINARY:-build/san/logstore}
. tests/scripts/tap.sh
. tests/scripts/ready.sh

# python3 parses README and compares the JSON: installed with apt-get when
# missing and we are root, as on CI's fresh machine (the browser tests do the
# same), so the walk is never skipped there.
if ! command -v python3 >/dev/null && [ "$(id -u)" -eq 0 ]; then
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null 2>&1
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 >/dev/null 2>&1
fi
if ! command -v python3 >/dev/null; then
    echo "1..0 # SKIP python3 is not installed and we cannot install it (not root, or apt-get failed)"
    exit 0
fi

tmp=$(mktemp -d /tmp/logstore-readme-walk-XXXXXX)
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
mkdir "$tmp/work"

"$bin" --set log.dirs="$tmp/data" --set listeners=http://127.0.0.1:0 >"$tmp/logstore.log" 2>&1 &
pid=$!
if ! port=$(ready_port "$tmp/logstore.log"); then
    not_ok "logstore starts"
    sed 's/^/# /' "$tmp/logstore.log" | tail -20
    finish
fi
ok "logstore starts on port $port"

# readme_walk.py prints "ok - ...", "not ok - ..." and "# ..." lines; number them.
python3 tests/scripts/readme_walk.py README.md "http://127.0.0.1:$port" "$tmp/work" >"$tmp/walk.out" 2>&1
rc=$?
while IFS= read -r line; do
    case $line in
        "ok - "*) ok "${line#ok - }" ;;
        "not ok - "*) not_ok "${line#not ok - }" ;;
        "#"*) echo "$line" ;;
        *) echo "# $line" ;;
    esac
done <"$tmp/walk.out"
check "readme_walk.py ran to its end (status $rc)" test "$rc" -eq 0

kill "$pid"; wait "$pid"; rc=$?; pid=
check "logstore stops cleanly (status $rc)" test "$rc" -eq 0
if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error' "$tmp/logstore.log"; then
    not_ok "no sanitizer report in the logstore log"
    grep -A5 -E 'ERROR: (Address|Leak)Sanitizer|runtime error' "$tmp/logstore.log" | head -20 | sed 's/^/# /'
else
    ok "no sanitizer report in the logstore log"
fi
finish
