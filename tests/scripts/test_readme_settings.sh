#!/usr/bin/env bash
# README's configuration tables must equal `logstore --settings-markdown`.
# With --write, regenerates them in place.  Prints TAP.
set -u
cd "$(dirname "$0")/../.."
bin=${TEST_LOGSTORE_BINARY:-build/san/logstore}
want=$("$bin" --settings-markdown) || { echo "1..1"; echo "not ok 1 - settings-markdown runs"; exit 1; }
have=$(sed -n '/<!-- settings:begin -->/,/<!-- settings:end -->/p' README.md | sed '1d;$d')
if [ "${1:-}" = "--write" ]; then
    python3 - "$want" <<'PY'
import sys, re
want = sys.argv[1]
src = open("README.md").read()
src = re.sub(r"(<!-- settings:begin -->\n).*?(<!-- settings:end -->)",
             lambda m: m.group(1) + want + "\n" + m.group(2), src, flags=re.S)
open("README.md", "w").write(src)
PY
    exit 0
fi
echo "1..1"
if [ "$want" = "$have" ]; then
    echo "ok 1 - README configuration tables match the settings table"
else
    echo "not ok 1 - README configuration tables differ from logstore --settings-markdown"
    echo "# run: tests/scripts/test_readme_settings.sh --write"
    diff <(echo "$want") <(echo "$have") | head -20 | sed 's/^/# /'
    exit 1
fi
