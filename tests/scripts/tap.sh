# Sourced by the test scripts: TAP output.  ok/not_ok number each check,
# check runs a command and reports it (returning its failure), finish prints
# the plan and exits non-zero if any check failed.
n=0
failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else not_ok "$d"; return 1; fi; }
finish() { echo "1..$n"; [ "$failed" -eq 0 ]; exit $?; }
