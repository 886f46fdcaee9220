#!/usr/bin/env bash
# Runs every test binary under ROOT/tests (ROOT: the first argument, default
# build/san; unit first, then integration,
# then crash and fuzz-corpus replays when present), each with a time limit,
# and ends with one line: "N passed, N failed".
#
# Binaries print TAP (cmocka's CMOCKA_MESSAGE_OUTPUT=TAP): "ok N - name" and
# "not ok N - name".  A binary that dies without reporting (a sanitizer abort,
# a signal) counts as one failure on top of what it reported.
set -u
root=${1:-build/san}
passed=0
failed=0
failed_names=()
export CMOCKA_MESSAGE_OUTPUT=TAP
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
export TEST_LOGSTORE_BINARY=${TEST_LOGSTORE_BINARY:-$root/logstore}
logdir=$root/test-logs
mkdir -p "$logdir"

run_one() {
    local bin=$1 limit=$2 name out rc p f start
    name=$(basename "$bin")
    start=$SECONDS
    out=$logdir/$name.log
    echo "== $name"
    timeout --kill-after=10 "$limit" "$bin" >"$out" 2>&1
    rc=$?
    p=$(grep -cE '^ok [0-9]+' "$out")
    f=$(grep -cE '^not ok [0-9]+' "$out")
    if [ "$rc" -ne 0 ] && [ "$f" -eq 0 ]; then
        f=1
        echo "   $name exited with status $rc without reporting a failure (see $out)"
        tail -n 30 "$out" | sed 's/^/   | /'
    fi
    if [ "$f" -gt 0 ]; then
        grep -E '^not ok' "$out" | sed 's/^/   /'
        grep -E '^# (ERROR|FAIL|.*error)' "$out" | head -20 | sed 's/^/   /'
        failed_names+=("$name")
    fi
    echo "   $p passed, $f failed ($((SECONDS - start)) s)"
    passed=$((passed + p))
    failed=$((failed + f))
}

for suite in unit integration crash fuzz; do
    [ -d "$root/tests/$suite" ] || continue
    for bin in "$root"/tests/$suite/test_*; do
        [ -x "$bin" ] && [ -f "$bin" ] || continue
        case "$bin" in *.o|*.d) continue;; esac
        run_one "$bin" 900
    done
done

# RUN_ALL_SCRIPTS=0 (make tsan) leaves out the scripts: they check the
# release and ASan binaries and the packaging, whatever the root.
if [ "${RUN_ALL_SCRIPTS:-1}" != 0 ]; then
    for script in tests/scripts/test_*.sh; do
        [ -x "$script" ] && run_one "$script" 300
    done
fi

if [ ${#failed_names[@]} -gt 0 ]; then
    echo "failing suites: ${failed_names[*]}"
fi
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
