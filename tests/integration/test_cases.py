"""Tier 2: replay every shared case (tests/cases/requests/*.json) against Envoy running the filter
under tests/cases/policy.json, in front of tests/cases/recorder.py, with the positive control
after each case."""

import subprocess
import sys

from harness import CASES_DIR

CASE_FILES = sorted(CASES_DIR.glob("requests/*.json"))


def test_case_files_present():
    assert len(CASE_FILES) >= 23


def test_all_cases_pass(stack):
    _, upstream_port, upstream_log = stack.recorder()
    envoy = stack.envoy((CASES_DIR / "policy.json").read_text(encoding="utf-8"), upstream_port)
    argv = [sys.executable, str(CASES_DIR / "replay.py"), "--envoy", f"127.0.0.1:{envoy.listen_port}",
            "--upstream-log", str(upstream_log), "--control", str(CASES_DIR / "control.json"),
            *map(str, CASE_FILES)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    report = done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1:] == [f"{len(CASE_FILES)} passed, 0 failed"], report
    assert done.returncode == 0, report
