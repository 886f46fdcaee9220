#!/usr/bin/env bash
# The Dockerfile, checked without a Docker engine (CI machines have none):
#   1. the build stage's COPY lines hold everything `make build/logstore` needs:
#      the copied tree alone builds the binary;
#   2. every shared library that binary needs (its ELF NEEDED entries) comes
#      from a Debian package the runtime stage installs (libc6 is in the base);
#   3. the runtime stage runs as a non-root user, with /data as a volume,
#      port 8080, a HEALTHCHECK on /health/ready, SIGTERM to stop, and
#      configuration by LOGSTORE_* environment variables the binary accepts.
# Prints TAP.
set -u
cd "$(dirname "$0")/../.."
bin=${TEST_LOGSTORE_BINARY:-build/san/logstore}
n=0 fails=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); fails=$((fails + 1)); echo "not ok $n - $1"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else not_ok "$what"; fi; }
echo "1..8"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The build stage is everything before the second FROM.
awk '/^FROM /{k++} k==1' Dockerfile >"$tmp/build.stage"
awk '/^FROM /{k++} k==2' Dockerfile >"$tmp/run.stage"

# ---- 1: the copied tree builds -----------------------------------------------------
mkdir -p "$tmp/src"
copied=$(awk '$1 == "COPY" && $2 !~ /^--from/ {print $2}' "$tmp/build.stage")
for c in $copied; do cp -r "$c" "$tmp/src/"; done
if (cd "$tmp/src" && make -j2 build/logstore >"$tmp/make.log" 2>&1) && [ -x "$tmp/src/build/logstore" ]; then
    ok "the build stage's COPY set ($(echo $copied)) builds build/logstore"
else
    not_ok "the build stage's COPY set ($(echo $copied)) builds build/logstore"
    tail -15 "$tmp/make.log" | sed 's/^/# /'
fi

# ---- 2: runtime libraries ---------------------------------------------------------------
built=$tmp/src/build/logstore
[ -x "$built" ] || built=build/logstore
runtime_pkgs=$(sed -n '/apt-get install/,/rm -rf/p' "$tmp/run.stage" | tr ' \\' '\n\n' |
    grep -E '^[a-z0-9][a-z0-9.+-]+$' | grep -vE '^(apt-get|install|rm|update|useradd|mkdir|chown|curl|ca-certificates)$')
missing=""
for lib in $(objdump -p "$built" 2>/dev/null | awk '$1 == "NEEDED" {print $2}'); do
    path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64|x86_64/ {print $NF; exit}')
    [ -n "$path" ] || path=$(ldconfig -p | awk -v l="$lib" '$1 == l {print $NF; exit}')
    pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -1 | cut -d: -f1)
    [ -n "$pkg" ] || pkg=$(dpkg -S "$path" 2>/dev/null | head -1 | cut -d: -f1)
    case "$pkg" in libc6|"") [ -n "$pkg" ] && continue ;; esac
    echo "$runtime_pkgs" | grep -qx "$pkg" || missing="$missing $lib($pkg)"
done
if [ -z "$missing" ] && [ -n "$runtime_pkgs" ]; then
    ok "every library logstore links comes from a runtime-stage package ($(echo $runtime_pkgs))"
else
    not_ok "libraries without a runtime-stage package:${missing:- (no packages parsed)}"
fi

# ---- 3: the runtime stage's shape ----------------------------------------------------
has() { grep -qE "$1" "$tmp/run.stage"; }
check "the runtime stage is Debian 12 slim" has '^FROM debian:12-slim'
check "it runs as a non-root user" bash -c "grep -E '^USER ' '$tmp/run.stage' | grep -vqE 'USER (root|0)\$'"
check "/data is a volume and port 8080 is exposed" bash -c "grep -q 'VOLUME \\[\"/data\"\\]' '$tmp/run.stage' && grep -q '^EXPOSE 8080' '$tmp/run.stage'"
check "HEALTHCHECK asks /health/ready" bash -c "grep -A1 '^HEALTHCHECK' '$tmp/run.stage' | grep -q '/health/ready'"
check "SIGTERM stops it" has '^STOPSIGNAL SIGTERM'
# The ENV settings must be ones the binary accepts: start it with them
# (data and port moved to scratch ones) and look for warnings.
env_args=$(awk '/^ENV /,/[^\\]$/' "$tmp/run.stage" | grep -oE 'LOGSTORE_[A-Z_]+=[^ \\]+')
if [ -n "$env_args" ]; then
    env_names=$(echo "$env_args" | cut -d= -f1)
    ( for e in $env_args; do export "$e"; done
      export LOGSTORE_LOG_DIRS="$tmp/data" LOGSTORE_LISTENERS=http://127.0.0.1:0
      exec "$bin" >"$tmp/env.log" 2>&1 ) &
    pid=$!
    for _ in $(seq 100); do grep -q "ready" "$tmp/env.log" 2>/dev/null && break; sleep 0.1; done
    kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null
    if grep -q "ready" "$tmp/env.log" && ! grep -q "unknown setting" "$tmp/env.log"; then
        ok "its LOGSTORE_* environment ($(echo $env_names)) is accepted by the binary"
    else
        not_ok "its LOGSTORE_* environment ($(echo $env_names)) is accepted by the binary"
        sed 's/^/# /' "$tmp/env.log" | head -10
    fi
else
    not_ok "the runtime stage configures logstore with LOGSTORE_* environment variables"
fi
[ "$fails" = 0 ]
