# Sourced by the test scripts that start a server with listeners port 0:
# ready_port LOG prints the port the server logging to LOG listens on, once
# its /health/ready answers (about 10 s at most), or returns 1.
ready_port() {
    local log=$1 port
    for _ in $(seq 1 200); do
        port=$(sed -n 's|.*listening on http://127.0.0.1:\([0-9]*\).*|\1|p' "$log" | tail -1)
        [ -n "$port" ] && curl -sf "http://127.0.0.1:$port/health/ready" >/dev/null &&
            { echo "$port"; return 0; }
        sleep 0.05
    done
    return 1
}
