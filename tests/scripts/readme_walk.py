"""Runs README.md's walk-through against a live server, as a new user would.

Used by test_readme_walk.sh, which starts the server; this file reads the
examples from README.md itself (never a copy, so the two cannot drift),
runs them in order and prints one line per check: "ok - ...",
"not ok - ..." or "ok - ... # SKIP reason"; lines starting with "#" are
diagnostics.  The shell script numbers them as TAP.

    python3 readme_walk.py README.md http://127.0.0.1:PORT WORKDIR

What is run.  Every ```sh block of the sections from "## A walk through the
API" up to "## What is on disk" (the walk, "Reading records" and "Errors"),
in README order, each command through bash with B set to the server's URL
and the working directory WORKDIR (where `-o batches.bin` lands).  A command
is a line that is not a comment, with its backslash continuations and the
lines a quoted string spans.  Blocks elsewhere start servers of their own,
build, or deploy: each is reported as skipped with its reason.  A block
outside the walk that uses $B is a failure: it would go unchecked.

What is checked, per command:
- curl exits 0, and the HTTP status is the one the comment states, else a
  2xx.  The comment is the command's own (`# 204`, with the indented `#`
  lines that continue it) and the comment paragraph that opens its group
  (`# create: 201 ...`).  The status is the first number from 100 to 599 in
  that text outside parentheses and outside a shown JSON answer:
  parentheses hold conditions (`(404 record_not_found if compacted away`),
  not what this run answers.
- The answer matches what README shows for it: the JSON in its own comment
  (`# {"offset":0,"timestamp":-1}`), or the ```json block that follows its
  ```sh block directly (for the block's last command; a json block of the
  walk that follows none is a failure).  Comparison rule:
  objects have exactly the keys shown, unless `...` stands among them (then
  more keys may follow); arrays have exactly the elements shown, in order,
  unless the last is `...` (then more may follow); `{...}` is any object;
  every value shown must be equal, except `request_id`, which the server
  generates per request (it must be a string).  A brace group that lists
  names only (`{"offset","position"}`) is README's notation for the fields
  of entries, not an answer, and is not compared.
- A command the server holds open longer than CAP_S seconds (a stream
  without max_records or until_timestamp, which follows the log; a long-poll
  whose wait_ms is longer, with nothing being appended) must still be open
  when curl's --max-time ends it: exit 28.  A stream must have answered 200.
- Streams: SSE `record` events carry ids that are consecutive offsets from
  where the request starts (offset=N, or after Last-Event-ID); NDJSON's
  record lines are consecutive offsets and a bounded stream's last line
  carries next_offset.  A raw read (`-o FILE`) answers 200 with
  X-Next-Offset and writes a non-empty FILE.
- The binary append (`--data-binary @batches.bin`) comes before the raw read
  that saves batches.bin, and README says the walk's offsets assume it was
  not made: at its place it runs as a new user meets it, without the file
  (README: curl sends an empty body, 422); after the whole walk it runs again
  with the file the raw read saved and must succeed.  By then the walk's
  configs:alter has made the topic compacted, and batches.bin holds the
  keyless record, which a compacted topic refuses (README: Appending), so
  the topic's cleanup.policy is reverted first, a step of this test's own.
"""
import json
import os
import re
import subprocess
import sys

CAP_S = 2           # how long a held-open command is given before curl stops it
DEADLINE_S = 30     # generous per-command deadline on a shared, slow machine
MORE = "\0more"     # stands for README's `...`
GENERATED_KEYS = {"request_id"}

WALK_FIRST = "## A walk through the API"
WALK_END = "## What is on disk"
SKIP_REASONS = {
    "## Quick start": "builds and serves on the fixed port 8080 with ./data; make test is what runs this",
    "## Configuration": "starts servers of its own, on fixed ports",
    "## Securing it": "needs a tokens file or a TLS pair and a fixed port; the integration suites cover both",
    "## Running in Docker and Kubernetes": "needs docker and kubectl; test_dockerfile.sh checks the image",
}


def out(line):
    print(line, flush=True)


def ok(desc):
    out("ok - " + desc)


def not_ok(desc, why=()):
    out("not ok - " + desc)
    for w in why:
        for line in str(w).splitlines() or [""]:
            out("#   " + line)


def skip(desc, reason):
    out("ok - %s # SKIP %s" % (desc, reason))


# ---- README parsing ------------------------------------------------------------------

def fenced_blocks(lines):
    """Yields (lang, text's first line, text, section, closing fence's line) for
    each fenced block; line numbers count from 1."""
    section = None
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("## "):
            section = line.rstrip()
        m = re.match(r"^```(\w*)\s*$", line)
        if m:
            start = i + 1
            j = start
            while j < len(lines) and not lines[j].startswith("```"):
                j += 1
            yield m.group(1), start + 1, "".join(lines[start:j]), section, j + 1
            i = j + 1
            continue
        i += 1


def split_commands(text, first_line):
    """Splits a sh block into commands: [{"cmd", "comment", "intro", "line"}].

    Shell quoting decides where a command ends (a newline outside quotes not
    escaped by a backslash) and where a comment starts (`#` at a word's
    start outside quotes).  Indented comment lines after a command continue
    its comment; comment lines at column 0 form the paragraph that opens the
    commands after it, up to a blank line or the next paragraph."""
    cmds = []
    intro = []
    in_paragraph = False
    lines = text.split("\n")
    k = 0
    while k < len(lines):
        line = lines[k]
        stripped = line.strip()
        if not stripped:
            intro, in_paragraph = [], False
        elif line.startswith("#"):
            if not in_paragraph:
                intro, in_paragraph = [], True
            intro.append(stripped.lstrip("#").strip())
        elif stripped.startswith("#"):
            if cmds:
                cmds[-1]["comment"] += " " + stripped.lstrip("#").strip()
        else:
            in_paragraph = False
            cur = {"cmd": "", "comment": "", "intro": " ".join(intro), "line": first_line + k}
            k = _scan(lines, k, cur)
            cmds.append(cur)
            continue
        k += 1
    return cmds


def _scan(lines, k, cur):
    """Reads one command from lines[k:]; returns the index after it."""
    quote = None
    buf = []
    while k < len(lines):
        line = lines[k]
        i = 0
        comment = None
        while i < len(line):
            ch = line[i]
            if quote:
                if ch == quote:
                    quote = None
                elif ch == "\\" and quote == '"':
                    buf.append(ch)
                    i += 1
                    ch = line[i] if i < len(line) else ""
            elif ch in "'\"":
                quote = ch
            elif ch == "#" and (i == 0 or line[i - 1].isspace()):
                comment = line[i + 1:].strip()
                break
            buf.append(ch)
            i += 1
        if comment is not None:
            cur["comment"] += (" " if cur["comment"] else "") + comment
        k += 1
        if quote:
            buf.append("\n")
            continue
        body = "".join(buf).rstrip()
        if comment is None and body.endswith("\\"):
            buf = [body[:-1], " "]
            continue
        cur["cmd"] = body.strip()
        return k
    cur["cmd"] = "".join(buf).strip()
    return k


def strip_groups(text):
    """Drops (...) and {...} groups, which hold conditions and answers."""
    res = []
    depth = 0
    for ch in text:
        if ch in "({":
            depth += 1
        elif ch in ")}" and depth:
            depth -= 1
        elif depth == 0:
            res.append(ch)
    return "".join(res)


def stated_status(cmd):
    for text in (cmd["comment"], cmd["intro"]):
        m = re.search(r"(?<![\w.=-])([1-5]\d\d)(?![\w.])", strip_groups(text))
        if m:
            return int(m.group(1))
    return None


def shown_json(text):
    """README's JSON with `...`, as Python values (MORE marks the `...`)."""
    res = []
    stack = []
    i = 0
    in_str = False
    while i < len(text):
        ch = text[i]
        if in_str:
            res.append(ch)
            if ch == "\\":
                res.append(text[i + 1])
                i += 1
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
            res.append(ch)
        elif text.startswith("...", i):
            res.append(json.dumps(MORE) + (":null" if stack and stack[-1] == "{" else ""))
            i += 3
            continue
        else:
            if ch in "{[":
                stack.append(ch)
            elif ch in "}]" and stack:
                stack.pop()
            res.append(ch)
        i += 1
    return json.loads("".join(res))


def comment_json(comment):
    """The JSON answer shown in a comment: from its first `{` to the brace closing it."""
    start = comment.find("{")
    if start < 0:
        return None
    depth = 0
    in_str = False
    for i in range(start, len(comment)):
        ch = comment[i]
        if in_str:
            if ch == '"' and comment[i - 1] != "\\":
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return comment[start:i + 1]
    return None


def match(want, have, path="$"):
    """Mismatches between README's answer and the server's (the rule above)."""
    errs = []
    if isinstance(want, dict):
        if not isinstance(have, dict):
            return ["%s: README shows an object, the server answered %s" % (path, json.dumps(have))]
        more = MORE in want
        for key, val in want.items():
            if key == MORE:
                continue
            if key not in have:
                errs.append("%s: README shows key %r, the answer has none" % (path, key))
            elif key in GENERATED_KEYS:
                if not isinstance(have[key], str):
                    errs.append("%s.%s: a string expected" % (path, key))
            else:
                errs += match(val, have[key], "%s.%s" % (path, key))
        if not more:
            extra = sorted(set(have) - set(want))
            if extra:
                errs.append("%s: the answer has keys README does not show (and no ...): %s"
                            % (path, ", ".join(extra)))
    elif isinstance(want, list):
        if not isinstance(have, list):
            return ["%s: README shows an array, the server answered %s" % (path, json.dumps(have))]
        more = bool(want) and want[-1] == MORE
        shown = want[:-1] if more else want
        if len(have) < len(shown) or (not more and len(have) != len(shown)):
            errs.append("%s: README shows %d element(s)%s, the answer has %d"
                        % (path, len(shown), " and more" if more else "", len(have)))
        for idx, val in enumerate(shown[:len(have)]):
            errs += match(val, have[idx], "%s[%d]" % (path, idx))
    elif want != have or type(want) is bool and type(have) is not bool:
        errs.append("%s: README shows %s, the server answered %s"
                    % (path, json.dumps(want), json.dumps(have)))
    return errs


# ---- running ---------------------------------------------------------------------------

PRELUDE = r'''
curl() { command curl -sS --max-time "$WALK_MAX_TIME" -w '%{stderr}\n@@status=%{http_code}\n' "$@"; }
'''


def held_open(cmd):
    """Whether the server keeps this request open past CAP_S (see the rule above)."""
    c = cmd["cmd"]
    if " -N " in " %s " % c and "max_records=" not in c and "until_timestamp=" not in c:
        return True
    m = re.search(r"[?&]wait_ms=(\d+)", c)
    return bool(m) and int(m.group(1)) > CAP_S * 1000


def run(cmd, base, workdir):
    env = dict(os.environ, B=base,
               WALK_MAX_TIME=str(CAP_S if held_open(cmd) else DEADLINE_S))
    p = subprocess.run(["bash", "-c", PRELUDE + cmd["cmd"]], cwd=workdir, env=env,
                       capture_output=True, timeout=DEADLINE_S + 10)
    err = p.stderr.decode("utf-8", "replace")
    m = re.findall(r"@@status=(\d+)", err)
    status = int(m[-1]) if m else None
    err = re.sub(r"\n?@@status=\d+\n?", "", err)
    return p.returncode, status, p.stdout.decode("utf-8", "replace"), err


def start_offset(c):
    m = re.search(r"Last-Event-ID: (\d+)", c)
    if m:
        return int(m.group(1)) + 1
    m = re.search(r"[?&]offset=(\d+)", c)
    return int(m.group(1)) if m else None


def check_stream(cmd, body):
    """Extra checks for SSE and NDJSON answers; returns mismatches."""
    c = cmd["cmd"]
    errs = []
    start = start_offset(c)
    if "text/event-stream" in c:
        ids = []
        for ev in body.split("\n\n"):
            fields = dict(l.split(": ", 1) for l in ev.splitlines() if ": " in l and not l.startswith(":"))
            if fields.get("event") == "record":
                ids.append(int(fields.get("id", "-1")))
        if not ids:
            errs.append("no record event")
        elif start is not None and ids != list(range(start, start + len(ids))):
            errs.append("record event ids %s are not consecutive offsets from %d" % (ids, start))
    elif "application/x-ndjson" in c:
        try:
            rows = [json.loads(l) for l in body.splitlines() if l.strip()]
        except ValueError as e:
            return ["a line is not JSON: %s" % e]
        recs = [r["offset"] for r in rows if isinstance(r, dict) and "offset" in r]
        if start is not None and recs != list(range(start, start + len(recs))):
            errs.append("record offsets %s are not consecutive from %d" % (recs, start))
        m = re.search(r"max_records=(\d+)", c)
        if m and len(recs) != int(m.group(1)):
            errs.append("%d records, max_records=%s" % (len(recs), m.group(1)))
        if not held_open(cmd) and (not rows or "next_offset" not in rows[-1]):
            errs.append("the bounded stream's last line has no next_offset")
    return errs


def check(cmd, base, workdir, answer=None, expect_status=None, label=None):
    label = label or "README line %d: %s" % (cmd["line"], cmd["cmd"].split("\n")[0][:90])
    rc, status, body, err = run(cmd, base, workdir)
    errs = []
    want_status = expect_status or stated_status(cmd)
    if held_open(cmd):
        if rc != 28:
            errs.append("expected it still open after %d s (curl exit 28), curl exited %d" % (CAP_S, rc))
        if " -N " in " %s " % cmd["cmd"] and status != 200:
            errs.append("stream status %s, expected 200" % status)
    else:
        if rc != 0:
            errs.append("curl exited %d: %s" % (rc, err.strip()))
        if want_status is not None and status != want_status:
            errs.append("status %s, README says %d" % (status, want_status))
        elif want_status is None and (status is None or not 200 <= status < 300):
            errs.append("status %s, expected a 2xx" % status)
    errs += check_stream(cmd, body)
    m = re.search(r"-o (\S+)", cmd["cmd"])
    if m:
        path = os.path.join(workdir, m.group(1))
        if not os.path.isfile(path) or os.path.getsize(path) == 0:
            errs.append("%s was not written" % m.group(1))
        if "-D -" in cmd["cmd"] and not re.search(r"(?im)^x-next-offset: \d+", body):
            errs.append("no X-Next-Offset header")
    shown = []
    cj = comment_json(cmd["comment"])
    if cj:
        shown.append(("its comment", cj))
    if answer:
        shown.append(("the json block after it", answer))
    for where, text in shown:
        if re.fullmatch(r'\{\s*"[^"]*"(\s*,\s*"[^"]*")*\s*\}', text):
            continue    # a list of field names, not an answer
        try:
            want = shown_json(text)
        except ValueError as e:
            errs.append("README's answer in %s does not parse: %s" % (where, e))
            continue
        try:
            have = json.loads(body)
        except ValueError:
            errs.append("the answer is not JSON: %r" % body[:200])
            continue
        errs += ["vs %s: %s" % (where, e) for e in match(want, have)]
    if errs:
        not_ok(label, errs + ["answer: " + body[:600].strip()])
    else:
        ok(label)
        if os.environ.get("WALK_VERBOSE"):
            out("#   status %s, answer: %s" % (status, body[:600].strip()))
    return status, body


def main():
    readme, base, workdir = sys.argv[1:4]
    with open(readme, encoding="utf-8") as f:
        lines = f.readlines()
    blocks = list(fenced_blocks(lines))
    in_walk = False
    attached = set()    # json blocks that follow a sh block of the walk
    walk = []   # (command, json answer or None)
    for idx, (lang, line, text, section, close) in enumerate(blocks):
        if section == WALK_FIRST:
            in_walk = True
        elif section == WALK_END:
            in_walk = False
        if lang == "json" and in_walk and idx not in attached:
            not_ok("README line %d: a json answer in the walk" % line,
                   ["it does not follow a sh block directly, so nothing compares it"])
        if lang != "sh":
            continue
        if not in_walk:
            desc = "README line %d (%s): %s" % (line, section, text.strip().split("\n")[0][:70])
            if "$B" in text:
                not_ok(desc, ["uses $B outside the walk: add it to the walk or to SKIP_REASONS"])
            else:
                skip(desc, SKIP_REASONS.get(section, "not part of the walk-through"))
            continue
        cmds = split_commands(text, line)
        answer = None
        if idx + 1 < len(blocks):
            nlang, nline, ntext = blocks[idx + 1][:3]
            if nlang == "json" and nline == close + 2:     # its fence is the very next line
                answer = ntext
                attached.add(idx + 1)
        for k, c in enumerate(cmds):
            walk.append((c, answer if k == len(cmds) - 1 else None))
    if not walk:
        not_ok("README has walk-through examples", ["no ```sh block between %r and %r" % (WALK_FIRST, WALK_END)])
        return
    deferred = []
    for c, answer in walk:
        if "@batches.bin" in c["cmd"]:
            # README: the file is what the raw read below saves, and curl sends an
            # empty body (422) without it; the walk's offsets assume no such append.
            check(c, base, workdir, expect_status=422,
                  label="README line %d: binary append before batches.bin exists answers 422" % c["line"])
            deferred.append(c)
            continue
        check(c, base, workdir, answer)
    for c in deferred:
        if not os.path.isfile(os.path.join(workdir, "batches.bin")):
            not_ok("README line %d: binary append with the raw read's batches.bin" % c["line"],
                   ["no step of the walk saved batches.bin"])
            continue
        topic = re.search(r"/v1/topics/([^/]+)/", c["cmd"]).group(1)
        revert = {"cmd": "curl -X DELETE $B/v1/topics/%s/configs/cleanup.policy" % topic,
                  "comment": "", "intro": "", "line": c["line"]}
        check(revert, base, workdir,
              label="(this test's step) %s's cleanup.policy back to delete" % topic)
        check(c, base, workdir,
              label="README line %d: binary append of the batches.bin the raw read saved" % c["line"])


if __name__ == "__main__":
    main()
