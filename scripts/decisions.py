#!/usr/bin/env python3
"""Follow Envoy's access log and print one line per filter decision, for `make run`.

Usage: decisions.py ACCESS_LOG [--from-start] [--color auto|always|never]

Each line is: time (UTC, from the access log's start time), grant label, tool (or `-`), decision,
rule (or `-`). It reads the fields the filter puts in filter state and envoy/envoy.yaml's access log
format prints (`mcp_decision=… mcp_tool=… mcp_grant=… mcp_rule=…`); requests without a decision are
skipped. Colours (green: forwarded; yellow: rate limits and approvals; red: refusals) only on a
terminal, unless NO_COLOR is set. Without --from-start it starts at the end of the file, as `tail -f`.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time

LINE = re.compile(r"^\[(?P<time>[^\]]*)\] .*? mcp_decision=(?P<decision>\S*) mcp_tool=(?P<tool>.*?) "
                  r"mcp_grant=(?P<grant>\S*) mcp_rule=(?P<rule>.*?) mcp_error=\S* up=")

GREEN, YELLOW, RED, DIM, RESET = "\033[32m", "\033[33m", "\033[31m", "\033[2m", "\033[0m"
COLOURS = {
    "allowed": GREEN, "approved": GREEN, "passed": DIM,
    "rate_limited": YELLOW, "approval_required": YELLOW, "limiter_unavailable": YELLOW,
    "approval_unavailable": YELLOW, "would_deny": YELLOW,
}


def decision_line(raw: str, colour: bool) -> str | None:
    """The printed line for one access-log line, or None when it carries no decision."""
    m = LINE.match(raw)
    if not m or m["decision"] in ("", "-"):
        return None
    t = m["time"]
    t = t[11:23] if len(t) >= 23 else t  # HH:MM:SS.mmm of an RFC 3339 time
    cells = [t, f"{m['grant']:<20}", f"{m['tool']:<18}", f"{m['decision']:<20}", m["rule"]]
    if colour:
        c = COLOURS.get(m["decision"], RED)
        cells[3] = f"{c}{cells[3]}{RESET}"
    return "  ".join(cells).rstrip()


def follow(path: str, from_start: bool, colour: bool) -> None:
    while not os.path.exists(path):
        time.sleep(0.1)
    with open(path, encoding="utf-8", errors="replace") as fh:
        if not from_start:
            fh.seek(0, os.SEEK_END)
        pending = ""
        while True:
            chunk = fh.readline()
            if not chunk:
                time.sleep(0.1)
                continue
            pending += chunk
            if not pending.endswith("\n"):
                continue
            line = decision_line(pending.rstrip("\n"), colour)
            pending = ""
            if line:
                print(line, flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("access_log")
    ap.add_argument("--from-start", action="store_true")
    ap.add_argument("--color", choices=["auto", "always", "never"], default="auto")
    a = ap.parse_args()
    colour = a.color == "always" or (a.color == "auto" and sys.stdout.isatty() and not os.environ.get("NO_COLOR"))
    try:
        follow(a.access_log, a.from_start, colour)
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
