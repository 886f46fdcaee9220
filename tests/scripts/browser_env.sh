# Sourced by the browser tests: sets $chrome to a headless-capable chromium,
# installing Debian's chromium (and python3, curl, a font) with apt-get when
# something is missing and we are root, as on CI's fresh machine.  Prints
# TAP's skip line and exits when it cannot.  Needs ok/not_ok/finish and $tmp
# from the caller.

# Stops the process whose PID is in file $1 (TERM, then KILL after 10 s).
stop_pid() {
    local p
    p=$(cat "$1" 2>/dev/null) || return 0
    kill "$p" 2>/dev/null || return 0
    for _ in $(seq 1 100); do kill -0 "$p" 2>/dev/null || return 0; sleep 0.1; done
    kill -9 "$p" 2>/dev/null
}
# Stops chromium helpers that outlived their browser: ours hold a profile
# dir under $1.
stop_chromium_under() {
    local f p
    for f in /proc/[0-9]*/cmdline; do
        { tr '\0' ' ' <"$f"; } 2>/dev/null | grep -q -- "--user-data-dir=$1/" || continue
        p=${f#/proc/}; kill "${p%/cmdline}" 2>/dev/null
    done
}

chrome=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$chrome" ] || ! command -v curl >/dev/null || ! command -v python3 >/dev/null; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "1..0 # SKIP needs chromium, python3 and curl, and we are not root to install them"
        exit 0
    fi
    export DEBIAN_FRONTEND=noninteractive
    if ! { apt-get update -qq &&
        apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core curl python3; } \
        >"$tmp/apt.log" 2>&1; then
        not_ok "apt-get install chromium python3"
        tail -20 "$tmp/apt.log" | sed 's/^/# /'
        finish
    fi
    chrome=$(command -v chromium)
fi
