#!/usr/bin/env python3
"""Drives one headless chromium page through a list of steps, for the browser tests.

usage: browser_steps.py CHROMIUM PROFILE_DIR URL STEP...

Talks the DevTools protocol over --remote-debugging-pipe (file descriptors 3
and 4, messages ending in a NUL byte), so it needs nothing beyond Python's
standard library: no websocket client, no npm package.  Steps, in order:

  js:EXPR          evaluate EXPR in the page (a promise is awaited); prints
                   "js <json of the value>" on one line
  until:MS:EXPR    evaluate EXPR every 100 ms until it is truthy or MS pass;
                   prints "until true" or "until false"
  sleep:MS         wait MS milliseconds (the page keeps running)
  sh:COMMAND       run COMMAND with bash (stop or start a server, append);
                   prints "sh <exit status>"

Whatever the page logs at level error (console.error, uncaught exceptions,
failed resource loads) is printed as "console-error <text>" as it happens.
The browser is stopped before exiting; exit status 0 unless the browser or
the protocol failed.
"""
import fcntl
import json
import os
import select
import subprocess
import sys
import time


class Page:
    def __init__(self, chrome, profile):
        # Our ends of the pipes go above 10, then chromium's are put at 3 and 4,
        # where it reads commands and writes answers.
        def high(fd):
            moved = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10)
            os.close(fd)
            return moved
        to_chrome_r, self.to_chrome = map(high, os.pipe())
        self.from_chrome, from_chrome_w = map(high, os.pipe())
        os.dup2(to_chrome_r, 3)
        os.dup2(from_chrome_w, 4)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        err = open(os.path.join(profile, "chromium.err"), "wb")
        self.proc = subprocess.Popen(
            [chrome, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             "--remote-debugging-pipe", "--user-data-dir=" + profile, "about:blank"],
            pass_fds=(3, 4), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=err)
        os.close(3)
        os.close(4)
        err.close()
        self.buf = b""
        self.next_id = 0
        self.session = None

    def send(self, method, params=None, session=True):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params or {}}
        if session and self.session:
            msg["sessionId"] = self.session
        os.write(self.to_chrome, json.dumps(msg).encode() + b"\0")
        return self.wait_for(self.next_id)

    def read_message(self):
        while b"\0" not in self.buf:
            chunk = os.read(self.from_chrome, 65536)
            if not chunk:
                raise RuntimeError("chromium closed its DevTools pipe")
            self.buf += chunk
        raw, self.buf = self.buf.split(b"\0", 1)
        return json.loads(raw)

    def wait_for(self, msg_id):
        while True:
            m = self.read_message()
            if m.get("id") == msg_id:
                if "error" in m:
                    raise RuntimeError("%s" % m["error"])
                return m.get("result", {})
            self.event(m)

    def event(self, m):
        method, p = m.get("method"), m.get("params", {})
        text = None
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in p.get("args", []))
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            text = d.get("exception", {}).get("description") or d.get("text")
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            e = p["entry"]
            text = "%s %s" % (e.get("text", ""), e.get("url", ""))
        if text is not None:
            print("console-error " + " ".join(text.split()), flush=True)

    def pump(self, seconds):
        """Handles events for a while (console errors show up in order)."""
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            if b"\0" in self.buf or select.select([self.from_chrome], [], [], left)[0]:
                self.event(self.read_message())

    def evaluate(self, expr):
        r = self.send("Runtime.evaluate", {"expression": expr, "awaitPromise": True,
                                           "returnByValue": True})
        if "exceptionDetails" in r:
            return {"exception": r["exceptionDetails"].get("exception", {}).get("description")}
        return r.get("result", {}).get("value")

    def open(self, url):
        targets = self.send("Target.getTargets", session=False)["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.send("Target.attachToTarget",
                                 {"targetId": page["targetId"], "flatten": True},
                                 session=False)["sessionId"]
        for domain in ("Runtime", "Log", "Page"):
            self.send(domain + ".enable")
        self.send("Page.navigate", {"url": url})

    def close(self):
        try:
            self.send("Browser.close", session=False)
            self.proc.wait(timeout=10)
        except Exception:
            self.proc.kill()
            self.proc.wait()


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        return 2
    chrome, profile, url, steps = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    page = Page(chrome, profile)
    try:
        page.open(url)
        for step in steps:
            kind, _, arg = step.partition(":")
            if kind == "js":
                print("js " + json.dumps(page.evaluate(arg)), flush=True)
            elif kind == "until":
                ms, _, expr = arg.partition(":")
                end = time.monotonic() + int(ms) / 1000
                ok = False
                while not ok and time.monotonic() < end:
                    ok = bool(page.evaluate(expr))
                    if not ok:
                        page.pump(0.1)
                print("until " + ("true" if ok else "false"), flush=True)
            elif kind == "sleep":
                page.pump(int(arg) / 1000)
            elif kind == "sh":
                print("sh %d" % subprocess.call(["bash", "-c", arg]), flush=True)
            else:
                raise RuntimeError("unknown step " + step)
        page.pump(0.2)
    finally:
        page.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
