"""The shared cases (tests/cases, byte-identical to ../shared/cases): each under the policy it runs
with, and replayed by tests/cases/replay.py against a running Envoy. Plain Python."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from testkit.paths import CASES_DIR

CASE_FILES = sorted(CASES_DIR.glob("requests/*.json"))


def own_policy(path: Path) -> dict | None:
    """The `policy` a case carries, if any (it then runs in an Envoy of its own)."""
    return json.loads(path.read_text(encoding="utf-8")).get("policy")


def by_policy() -> list[tuple[dict, list[Path], bool]]:
    """Every case under the policy it runs with: (policy, cases, whether the positive control runs
    after each). The cases without a policy of their own come first, under tests/cases/policy.json,
    with the control; a case with its own policy may not allow the control's tool (tests/cases/README.md)."""
    shared = json.loads((CASES_DIR / "policy.json").read_text(encoding="utf-8"))
    groups: dict[str, tuple[dict, list[Path], bool]] = {json.dumps(shared, sort_keys=True): (shared, [], True)}
    for path in CASE_FILES:
        policy = own_policy(path)
        key = json.dumps(policy if policy is not None else shared, sort_keys=True)
        groups.setdefault(key, (policy or shared, [], False))[1].append(path)
    return [g for g in groups.values() if g[1]]


def replay(envoy_port: int, upstream_log: Path, cases: list[Path], *, control: bool,
           timeout: float = 180) -> subprocess.CompletedProcess:
    """tests/cases/replay.py on `cases` against the Envoy listening on `envoy_port`, whose upstream
    writes `upstream_log`; its last line says `N passed, M failed`."""
    argv = [sys.executable, str(CASES_DIR / "replay.py"), "--envoy", f"127.0.0.1:{envoy_port}",
            "--upstream-log", str(upstream_log)]
    if control:
        argv += ["--control", str(CASES_DIR / "control.json")]
    return subprocess.run(argv + [str(c) for c in cases], capture_output=True, text=True, timeout=timeout)
