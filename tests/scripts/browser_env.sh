# Sourced by the browser tests: sets $chrome to a headless-capable chromium,
# installing Debian's chromium (and python3, curl, a font) with apt-get when
# something is missing and we are root, as on CI's fresh machine.  Prints
# TAP's skip line and exits when it cannot.  Needs ok/not_ok/finish and $tmp
# from the caller.
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
