"""What the filter writes to Envoy's log: audit lines (`audit_records`, `audit_texts`), the
access-log decision fields (`access_records`, `access_audits`), and the label it logs for a grant."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any


# ------------------------------------------------------------------------------------------ grants


def grant_label(token: str) -> str:
    """The label the filter logs for an unregistered bearer token: `sha256:` + 12 hex digits."""
    return "sha256:" + hashlib.sha256(token.encode()).hexdigest()[:12]


def token_sha256(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


# -------------------------------------------------------------------------------------------- logs


AUDIT_RE = re.compile(r"\[ctx \d+\] audit (\{.*\})\s*$")
TS_RE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def audit_records(log_text: str) -> list[dict[str, Any]]:
    """The JSON objects of the filter's audit lines, in log order."""
    out = []
    for line in log_text.splitlines():
        if " audit {" not in line:
            continue
        m = AUDIT_RE.search(line)
        if not m:
            raise AssertionError(f"malformed audit line: {line}")
        out.append(json.loads(m.group(1)))
    return out


def split_access_audit(line: str) -> tuple[str, str | None]:
    """An access-log line of the shipped format without its last field, and that field's value: the
    text after ` audit=` (after ` rid=`) to the end of the line, i.e. `wasm.mcp_audit` as Envoy printed
    it (`-` when unset); None when the line has no such field."""
    at = line.find(" audit=", max(line.find(" rid="), 0))
    if at < 0:
        return line, None
    return line[:at], line[at + len(" audit="):]


def access_audits(log_text: str, request_line: str = '"POST /mcp"') -> list[str]:
    """The `audit=` field (the filter-state value `wasm.mcp_audit`, byte for byte) of every
    access-log line containing `request_line`, in log order."""
    out = []
    for line in log_text.splitlines():
        if request_line in line and " mcp_decision=" in line:
            _, audit = split_access_audit(line)
            if audit is not None:
                out.append(audit)
    return out


def audit_texts(log_text: str) -> list[str]:
    """The JSON text of the filter's audit lines (`[ctx N] audit {…}`), byte for byte, in log order."""
    out = []
    for line in log_text.splitlines():
        if " audit {" in line:
            m = AUDIT_RE.search(line)
            if not m:
                raise AssertionError(f"malformed audit line: {line}")
            out.append(m.group(1))
    return out


def access_records(log_text: str, request_line: str = '"POST /mcp"') -> list[dict[str, str]]:
    """Access-log lines of the shipped format containing `request_line`, as dicts: the `key=value`
    fields (`mcp_decision`, `mcp_tool`, `mcp_grant`, `mcp_rule`, `mcp_error`, `up`, `rid`) plus
    `status` and `details` (%RESPONSE_CODE% and %RESPONSE_CODE_DETAILS%). The last field, `audit=`
    (see `access_audits`), is left out."""
    out = []
    for line in log_text.splitlines():
        if request_line not in line or " mcp_decision=" not in line:
            continue
        line, _ = split_access_audit(line)
        head, _, rest = line.partition(request_line)
        before_fields = rest.split(" mcp_decision=", 1)[0].split()
        rec = dict(f.split("=", 1) for f in ("mcp_decision=" + rest.split(" mcp_decision=", 1)[1]).split()
                   if "=" in f)
        rec["status"] = before_fields[0] if before_fields else ""
        rec["details"] = before_fields[1] if len(before_fields) > 1 else ""
        out.append(rec)
    return out
