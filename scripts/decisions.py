#!/usr/bin/env python3
"""Follow Envoy's access log and print one line per filter decision, for `make run`.

Usage: decisions.py ACCESS_LOG... [--envoy-log ENVOY_LOG]... [--from-start] [--color auto|always|never]

Several Envoys (`make run-cluster`): each ACCESS_LOG as NAME=PATH, each ENVOY_LOG as NAME=PATH too,
and each line starts with the NAME of the Envoy that decided.

Each line is: time (UTC, from the access log's start time), grant label, tool (for a tools/call)
or JSON-RPC method (`initialize`, `tools/list`, `batch`…; `-` when unknown), decision, rule (or
`-`). It reads the fields the filter puts in filter state and envoy/envoy.yaml's access log format
prints (`mcp_decision=… mcp_tool=… mcp_grant=… mcp_rule=…`); requests without a decision are
skipped. The method comes from the request's audit record, matched by x-request-id (`rid=`): the
access log's own `audit=` field (`gateway.audit: "access_log"`), else the audit line in Envoy's own
log (`--envoy-log`; `gateway.audit: "log"`, the default). Colours (green: forwarded; yellow: rate
limits and approvals; red: refusals) only on a terminal, unless NO_COLOR is set. Without
--from-start it starts at the end of the files, as `tail -f`.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time

LINE = re.compile(r"^\[(?P<time>[^\]]*)\] .*? mcp_decision=(?P<decision>\S*) mcp_tool=(?P<tool>.*?) "
                  r"mcp_grant=(?P<grant>\S*) mcp_rule=(?P<rule>.*?) mcp_error=\S* up=\S*"
                  r"(?: rid=(?P<rid>\S*))?(?: audit=(?P<audit>.*))?")
# An audit line in Envoy's own log: `... audit {"ts":...}` (the wasm build prefixes `[ctx N]`).
AUDIT = re.compile(r" audit (\{.*\})\s*$")
# Methods remembered by request id, for the access-log lines still to come.
REMEMBERED = 4096

GREEN, YELLOW, RED, DIM, RESET = "\033[32m", "\033[33m", "\033[31m", "\033[2m", "\033[0m"
COLOURS = {
    "allowed": GREEN, "approved": GREEN, "passed": DIM,
    "rate_limited": YELLOW, "approval_required": YELLOW, "limiter_unavailable": YELLOW,
    "approval_unavailable": YELLOW, "would_deny": YELLOW,
}


# What a request may name that a terminal would act on: C0 and C1 controls, DEL, and the line and
# paragraph separators, shown escaped as the filter's own access-log fields show them.
UNSAFE = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# An id two audit records claimed: its method is not known.
AMBIGUOUS = object()


def safe(text: str, most: int = 128) -> str:
    """`text` with its control characters escaped (`\\u{1b}`), cut to `most` characters."""
    shown = UNSAFE.sub(lambda m: f"\\u{{{ord(m.group()):x}}}", text)
    return shown if len(shown) <= most else shown[: most - 1] + "…"


def audit_method(record: str) -> tuple[str, str] | None:
    """(request id, method) of one audit record, or None when it has neither."""
    try:
        r = json.loads(record)
    except ValueError:
        return None
    rid, method = r.get("request_id"), r.get("method")
    return (rid, method) if isinstance(rid, str) and isinstance(method, str) else None


def remember(methods: dict, key: tuple[str, str], method: str) -> None:
    """Record `method` for `key` (Envoy, request id). A client may send its own x-request-id, so an
    id claimed twice before its access-log line is read stands for no method."""
    methods[key] = AMBIGUOUS if key in methods and methods[key] != method else method
    if len(methods) > REMEMBERED:
        del methods[next(iter(methods))]


def decision_line(raw: str, colour: bool, methods: dict | None = None, envoy: str = "") -> str | None:
    """The printed line for one access-log line, or None when it carries no decision. The tool
    column shows the method of a request that names no tool, from the line's own audit record or
    from `methods` ((Envoy, request id) to method, read off Envoy's log; taken once used)."""
    m = LINE.match(raw)
    if not m or m["decision"] in ("", "-"):
        return None
    t = m["time"]
    t = t[11:23] if len(t) >= 23 else t  # HH:MM:SS.mmm of an RFC 3339 time
    what = m["tool"]
    known = (methods or {}).pop((envoy, m["rid"] or ""), None)
    if what in ("", "-"):
        own = audit_method(m["audit"]) if m["audit"] and m["audit"] != "-" else None
        method = own[1] if own else known
        what = safe(method) if isinstance(method, str) else "-"
    cells = [t, f"{m['grant']:<20}", f"{what:<18}", f"{m['decision']:<20}", m["rule"]]
    if colour:
        c = COLOURS.get(m["decision"], RED)
        cells[3] = f"{c}{cells[3]}{RESET}"
    return "  ".join(cells).rstrip()


class Log:
    """One access log followed like `tail -f`, whole lines only."""

    def __init__(self, name: str, path: str, from_start: bool) -> None:
        while not os.path.exists(path):
            time.sleep(0.1)
        self.name, self.fh, self.pending = name, open(path, encoding="utf-8", errors="replace"), ""
        if not from_start:
            self.fh.seek(0, os.SEEK_END)

    def lines(self):
        while chunk := self.fh.readline():
            self.pending += chunk
            if self.pending.endswith("\n"):
                line, self.pending = self.pending.rstrip("\n"), ""
                yield line


def follow(logs: list[tuple[str, str]], envoy_logs: dict[str, str], from_start: bool, colour: bool) -> None:
    followed = [(Log(name, path, from_start), Log(name, envoy_logs[name], from_start) if name in envoy_logs else None)
                for name, path in logs]
    named = len(followed) > 1
    methods: dict = {}
    while True:
        for log, envoy in followed:
            # Envoy's log first: a request's audit line is written when it is decided, before its
            # access-log line at the end of the stream.
            for raw in envoy.lines() if envoy else ():
                a = AUDIT.search(raw)
                found = audit_method(a.group(1)) if a else None
                if found:
                    remember(methods, (log.name, found[0]), found[1])
            for raw in log.lines():
                line = decision_line(raw, colour, methods, log.name)
                if line:
                    print(f"{log.name:<8}  {line}" if named else line, flush=True)
        time.sleep(0.1)


def take_terminal():
    """Make the view the terminal's foreground process group, so that Ctrl-C reaches it alone, not
    make and the services started with it (`make run` then ends with status 0, and the script that
    started the view stops the services in order). Returns what gives the terminal back, or None when
    standard input is not a terminal. SIGTTOU is ignored: a process outside the foreground group may
    then set it; SIGTERM (the script's watcher ending the view) exits through `finally`."""
    if not os.isatty(0):
        return None
    before = os.tcgetpgrp(0)
    signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    signal.signal(signal.SIGINT, signal.default_int_handler)  # even if the shell started us ignoring it
    os.setpgid(0, 0)
    os.tcsetpgrp(0, os.getpgrp())

    def restore() -> None:
        try:
            os.tcsetpgrp(0, before)
        except OSError:  # that group is gone: nothing to give back to
            pass

    return restore


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("access_log", nargs="+", help="PATH, or NAME=PATH for each of several Envoys")
    ap.add_argument("--envoy-log", action="append", default=[],
                    help="Envoy's own log, for the method of each request (its audit line): PATH, or NAME=PATH")
    ap.add_argument("--from-start", action="store_true")
    ap.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    # Printed first, by the view itself: once it shows, the view runs (and, with --foreground, owns Ctrl-C).
    ap.add_argument("--title", help="a line to print before the first decision")
    ap.add_argument("--foreground", action="store_true",
                    help="on a terminal, take it for a process group of the view's own until it ends")
    a = ap.parse_args()
    colour = a.color == "always" or (a.color == "auto" and sys.stdout.isatty() and not os.environ.get("NO_COLOR"))
    restore = None
    # Once the view has the terminal, Ctrl-C may come at any point, the title's print included.
    try:
        if a.foreground:
            restore = take_terminal()
        if a.title:
            print(a.title, flush=True)
        logs = [tuple(arg.split("=", 1)) if "=" in arg else ("", arg) for arg in a.access_log]
        envoy_logs = dict(tuple(arg.split("=", 1)) if "=" in arg else ("", arg) for arg in a.envoy_log)
        follow(logs, envoy_logs, a.from_start, colour)
    except (KeyboardInterrupt, SystemExit):
        pass
    finally:
        if restore:
            restore()
    return 0


if __name__ == "__main__":
    sys.exit(main())
