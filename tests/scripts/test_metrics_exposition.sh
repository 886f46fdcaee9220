#!/usr/bin/env bash
# /metrics read the way a strict scraper reads it, after traffic of every
# kind (JSON and binary appends, page, record, raw, NDJSON and SSE reads, a
# long-poll, a roll, a retention run, a compaction, bad requests):
#   - every line is a HELP, a TYPE or a sample of the text format 0.0.4, with
#     names, labels (escapes included) and values as the format spells them;
#   - each family has one HELP and one TYPE, before its samples, which come
#     together; no series twice;
#   - histograms: buckets by rising `le`, cumulative, `+Inf` equal to `_count`,
#     a `_sum`;
#   - counters do not go down from one scrape to the next;
#   - python's prometheus_client parser takes it (when it is installed);
#   - README's list of families (between its metrics markers) is exactly
#     what /metrics serves, both ways.
# Prints TAP.  The server is stopped by PID; the temp dir is removed.
set -u
cd "$(dirname "$0")/../.."
bin=${TEST_LOGSTORE_BINARY:-build/san/logstore}
. tests/scripts/tap.sh
. tests/scripts/ready.sh

tmp=$(mktemp -d /tmp/logstore-expo-XXXXXX)
ls_pid=
cleanup() {
    [ -n "$ls_pid" ] && kill "$ls_pid" 2>/dev/null && wait "$ls_pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT

"$bin" --set log.dirs="$tmp/data" --set listeners=http://127.0.0.1:0 >"$tmp/logstore.log" 2>&1 &
ls_pid=$!
if ! port=$(ready_port "$tmp/logstore.log"); then
    not_ok "logstore starts"
    sed 's/^/# /' "$tmp/logstore.log" | tail -20
    finish
fi
ok "logstore starts on port $port"
B=http://127.0.0.1:$port
post() { curl -sf -X POST "$B$1" -H 'Content-Type: application/json' -d "$2" >/dev/null; }
get() { curl -sf "$@" >/dev/null; }
traffic() {
    post /v1/topics '{"name":"expo.a_b-1","partitions":2}' &&
    post /v1/topics/expo.a_b-1/partitions/0/records '{"records":[{"key":"k","value":"v"},{"value":"w"}]}' &&
    curl -sf -H 'Accept: application/octet-stream' -o "$tmp/batch.bin" \
        "$B/v1/topics/expo.a_b-1/partitions/0/records?offset=0" &&
    curl -sf -X POST "$B/v1/topics/expo.a_b-1/partitions/1/records" \
        -H 'Content-Type: application/octet-stream' --data-binary @"$tmp/batch.bin" >/dev/null &&
    get "$B/v1/topics/expo.a_b-1/partitions/0/records?offset=0" &&
    get "$B/v1/topics/expo.a_b-1/partitions/0/records/1" &&
    get -H 'Accept: application/x-ndjson' "$B/v1/topics/expo.a_b-1/partitions/0/records?offset=0&max_records=2" &&
    get -H 'Accept: text/event-stream' "$B/v1/topics/expo.a_b-1/partitions/0/records?offset=0&max_records=1" &&
    get "$B/v1/topics/expo.a_b-1/partitions/1/records?offset=latest&wait_ms=50&min_bytes=1" &&
    post /v1/topics/expo.a_b-1/partitions/0/segments:roll '{}' &&
    post /v1/topics '{"name":"expo-c","configs":{"cleanup.policy":"compact","min.cleanable.dirty.ratio":"0.01"}}' &&
    post /v1/topics/expo-c/partitions/0/records '{"records":[{"key":"u","value":"1"},{"key":"u","value":"2"}]}' &&
    post /v1/topics/expo-c/partitions/0/segments:roll '{}' &&
    post /v1/topics/expo-c/compaction:run '{}' &&
    post /v1/topics '{"name":"expo-r","configs":{"retention.ms":"1000"}}' &&
    post /v1/topics/expo-r/partitions/0/records '{"records":[{"value":"old","timestamp":1000}]}' &&
    post /v1/topics/expo-r/partitions/0/segments:roll '{}' &&
    post /v1/topics/expo-r/retention:run '{"dry_run":false}' &&
    ! get "$B/v1/topics/absent" && ! get "$B/no/such/route" && ! get -X PUT "$B/v1/topics" &&
    ! post /v1/topics '{"name":' && ! get "$B/v1/topics/expo.a_b-1/partitions/0/records?offset=99"
}
check "traffic of every kind" traffic
curl -sf "$B/metrics" >"$tmp/m1.txt"
post /v1/topics/expo.a_b-1/partitions/0/records '{"records":[{"value":"more"}]}'
get "$B/v1/topics/expo.a_b-1/partitions/0/records?offset=0"
curl -sf "$B/metrics" >"$tmp/m2.txt"
check "two scrapes" test -s "$tmp/m2.txt"

# The strict reading, in python's standard library only.
cat >"$tmp/strict.py" <<'PY'
import re, sys
NAME = r'[a-zA-Z_:][a-zA-Z0-9_:]*'
LABEL = r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\[\\"n])*)"'
SAMPLE = re.compile(r'^(' + NAME + r')(\{(?:' + LABEL + r'(?:,' + LABEL + r')*,?)?\})? (\S+)( -?\d+)?$')
VALUE = re.compile(r'^(?:[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)|[+-]Inf|NaN)$')

def parse(path):
    """[(family, type)], {series: value}; errors on stderr, returns ok."""
    ok = True
    def bad(msg):
        nonlocal ok
        ok = False
        print('# %s: %s' % (path, msg))
    helps, types, order, series, done = {}, {}, [], {}, set()
    cur = None
    hist = {}
    for no, line in enumerate(open(path, encoding='utf-8').read().split('\n'), 1):
        if line == '':
            continue
        m = re.match(r'^# (HELP|TYPE) (' + NAME + r') (.*)$', line)
        if m:
            kind, name, rest = m.groups()
            d = helps if kind == 'HELP' else types
            if name in d:
                bad('line %d: a second %s for %s' % (no, kind, name))
            if name in done:
                bad('line %d: %s %s after its samples ended' % (no, kind, name))
            if kind == 'TYPE' and rest not in ('counter', 'gauge', 'histogram', 'summary', 'untyped'):
                bad('line %d: unknown type %s' % (no, rest))
            d[name] = rest
            if cur != name:
                if cur:
                    done.add(cur)
                cur = name
                order.append(name)
            continue
        if line.startswith('#'):
            continue
        m = SAMPLE.match(line)
        if not m:
            bad('line %d does not parse: %r' % (no, line))
            continue
        name, value = m.group(1), m.group(7)
        if not VALUE.match(value):
            bad('line %d: value %r' % (no, value))
            continue
        labels = re.findall(LABEL, m.group(2) or '')
        if len({k for k, _ in labels}) != len(labels):
            bad('line %d: a label twice' % no)
        fam = name
        t = types.get(cur)
        if t == 'histogram':
            fam = re.sub(r'_(bucket|sum|count)$', '', name)
        if fam != cur or t is None or cur not in helps:
            bad('line %d: sample %s outside its family (HELP and TYPE first, then its samples)' % (no, name))
        key = name + '{' + ','.join('%s=%s' % kv for kv in labels) + '}'
        if key in series:
            bad('line %d: series %s twice' % (no, key))
        series[key] = float(value)
        if t == 'counter' and not name.endswith('_total'):
            bad('line %d: counter %s does not end in _total' % (no, name))
        if t == 'histogram':
            rest = tuple(kv for kv in labels if kv[0] != 'le')
            h = hist.setdefault((fam, rest), {'buckets': [], 'count': None, 'sum': None})
            if name.endswith('_bucket'):
                le = [v for k, v in labels if k == 'le']
                if len(le) != 1:
                    bad('line %d: a bucket without le' % no)
                    continue
                h['buckets'].append((float(le[0]), float(value), le[0]))
            elif name.endswith('_count'):
                h['count'] = float(value)
            else:
                h['sum'] = float(value)
    for (fam, rest), h in hist.items():
        b = h['buckets']
        what = '%s%s' % (fam, dict(rest))
        if not b or b[-1][2] != '+Inf':
            bad('%s: no le="+Inf" bucket last' % what)
        if any(b[i][0] >= b[i + 1][0] for i in range(len(b) - 1)):
            bad('%s: buckets not by rising le' % what)
        if any(b[i][1] > b[i + 1][1] for i in range(len(b) - 1)):
            bad('%s: buckets not cumulative' % what)
        if h['count'] is None or h['sum'] is None:
            bad('%s: no _count or _sum' % what)
        elif b and b[-1][1] != h['count']:
            bad('%s: +Inf bucket %g, _count %g' % (what, b[-1][1], h['count']))
    for name in types:
        if name not in helps:
            bad('%s has a TYPE and no HELP' % name)
    return ok, types, series

mode = sys.argv[1]
if mode == 'strict':
    ok, _, _ = parse(sys.argv[2])
    sys.exit(0 if ok else 1)
if mode == 'monotonic':
    ok1, t1, s1 = parse(sys.argv[2])
    ok2, t2, s2 = parse(sys.argv[3])
    counted = [k for k in s1 if t1.get(k.split('{')[0]) == 'counter' or
               t1.get(re.sub(r'_(bucket|sum|count)\{.*', '', k)) == 'histogram']
    down = [k for k in counted if k in s2 and s2[k] < s1[k]]
    gone = [k for k in counted if k not in s2]
    for k in down:
        print('# %s went down: %g -> %g' % (k, s1[k], s2[k]))
    for k in gone:
        print('# %s went away' % k)
    sys.exit(0 if ok1 and ok2 and counted and not down and not gone else 1)
if mode == 'families':
    _, types, _ = parse(sys.argv[2])
    print('\n'.join(sorted(types)))
PY
py=python3
check "the exposition is strictly well-formed" "$py" "$tmp/strict.py" strict "$tmp/m1.txt"
check "counters and histograms do not go down between scrapes" \
    "$py" "$tmp/strict.py" monotonic "$tmp/m1.txt" "$tmp/m2.txt"

# prometheus_client's parser, from whichever python has it.
client=
for p in python3 /usr/bin/python3; do
    "$p" -c 'import prometheus_client.parser' 2>/dev/null && { client=$p; break; }
done
if [ -n "$client" ]; then
    client_parses() {
        "$client" - "$tmp/m1.txt" <<'PY'
import sys
from prometheus_client.parser import text_string_to_metric_families
fams = list(text_string_to_metric_families(open(sys.argv[1]).read()))
print('# %d families, %d samples' % (len(fams), sum(len(f.samples) for f in fams)))
assert len(fams) > 30
PY
    }
    check "prometheus_client's parser takes /metrics" client_parses
else
    echo "# SKIP prometheus_client: not installed (apt-get install python3-prometheus-client)"
fi

# README's list, both ways.
"$py" "$tmp/strict.py" families "$tmp/m1.txt" >"$tmp/served"
sed -n '/<!-- metrics:begin -->/,/<!-- metrics:end -->/p' README.md |
    sed -n 's/^| `\([a-z_:]*\)` |.*/\1/p' | sort >"$tmp/documented"
readme_lists_all() {
    local missing
    missing=$(comm -23 "$tmp/served" "$tmp/documented")
    [ -z "$missing" ] || { echo "$missing" | sed 's/^/# served, not in README: /'; return 1; }
}
readme_lists_only_served() {
    local extra
    extra=$(comm -13 "$tmp/served" "$tmp/documented")
    [ -z "$extra" ] || { echo "$extra" | sed 's/^/# in README, not served: /'; return 1; }
}
check "README lists every family /metrics serves ($(wc -l <"$tmp/served"))" readme_lists_all
check "README lists no family /metrics does not serve" readme_lists_only_served

kill "$ls_pid"
wait "$ls_pid"
rc=$?
ls_pid=
check "logstore stops cleanly (status $rc)" test "$rc" -eq 0
if grep -qE 'ERROR: (Address|Leak)Sanitizer|runtime error' "$tmp/logstore.log"; then
    not_ok "no sanitizer report in the logstore log"
    grep -A5 -E 'ERROR: (Address|Leak)Sanitizer|runtime error' "$tmp/logstore.log" | head -20 | sed 's/^/# /'
else
    ok "no sanitizer report in the logstore log"
fi
finish
