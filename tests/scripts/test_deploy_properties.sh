#!/usr/bin/env bash
# deploy/server.properties must equal `logstore --settings-properties`, and
# the binary must start with it (every line parses); --help names every
# option the binary takes, that one included.  Prints TAP.
set -u
cd "$(dirname "$0")/../.."
bin=${TEST_LOGSTORE_BINARY:-build/san/logstore}
echo "1..3"
if diff -q <("$bin" --settings-properties) deploy/server.properties >/dev/null; then
    echo "ok 1 - deploy/server.properties lists every setting at its default"
else
    echo "not ok 1 - deploy/server.properties differs from logstore --settings-properties"
    echo "# regenerate: $bin --settings-properties > deploy/server.properties"
fi
# Uncomment every line and start the server with it: it must accept them all.
tmp=$(mktemp -d)
sed -e 's/^#\([a-z][a-z.]*=\)/\1/' deploy/server.properties |
    grep -v '^log.dir=' |
    sed -e "s|^log.dirs=.*|log.dirs=$tmp/data|" -e 's|^listeners=.*|listeners=http://127.0.0.1:0|' >"$tmp/all.properties"
"$bin" --config "$tmp/all.properties" >"$tmp/log" 2>&1 &
pid=$!
ok=0
for _ in $(seq 100); do
    if grep -q "ready" "$tmp/log"; then ok=1; break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
if [ "$ok" = 1 ] && ! grep -q "ignoring unknown setting" "$tmp/log"; then
    echo "ok 2 - the server starts with every setting of deploy/server.properties set"
else
    echo "not ok 2 - the server did not start cleanly with deploy/server.properties"
    sed 's/^/# /' "$tmp/log" | head -20
fi
rm -rf "$tmp"
help=$("$bin" --help 2>&1)
missing=""
for opt in --config --set --help --version --hash-token --settings-markdown --settings-properties; do
    grep -q -- "$opt" service/svc_settings.c || continue
    printf '%s\n' "$help" | grep -q -- "$opt\b" || missing="$missing $opt"
done
if [ -z "$missing" ]; then
    echo "ok 3 - --help names every option"
else
    echo "not ok 3 - --help does not name:$missing"
fi
