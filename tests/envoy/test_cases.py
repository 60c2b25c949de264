"""Tier 2: replay every shared case (tests/cases/requests/*.json) against Envoy running the filter
in front of tests/cases/recorder.py.

Cases without a `policy` of their own run in one Envoy under tests/cases/policy.json, with the
positive control (tests/cases/control.json) after each. A case that carries its own `policy` runs in
an Envoy of its own, loaded with that policy, without the control (tests/cases/README.md: the policy
may not allow the control's tool)."""

import pytest

from testkit.cases import CASE_FILES, own_policy, replay
from testkit.paths import CASES_DIR

# Run on the wasm build and on the native build (tests/conftest.py).
pytestmark = pytest.mark.both_builds

SHARED_POLICY_CASES = [p for p in CASE_FILES if own_policy(p) is None]
OWN_POLICY_CASES = [p for p in CASE_FILES if own_policy(p) is not None]


def _replay(envoy_port, upstream_log, cases, control):
    done = replay(envoy_port, upstream_log, cases, control=control, timeout=120)
    return done, done.stdout + done.stderr


def test_case_files_present():
    assert len(CASE_FILES) >= 32
    # The split is exact: every case runs once, under exactly one policy.
    assert len(SHARED_POLICY_CASES) + len(OWN_POLICY_CASES) == len(CASE_FILES)
    assert all(isinstance(own_policy(p), dict) for p in OWN_POLICY_CASES)


def test_all_cases_pass(stack):
    _, upstream_port, upstream_log = stack.recorder()
    envoy = stack.envoy((CASES_DIR / "policy.json").read_text(encoding="utf-8"), upstream_port)
    done, report = _replay(envoy.listen_port, upstream_log, SHARED_POLICY_CASES, control=True)
    assert done.stdout.splitlines()[-1:] == [f"{len(SHARED_POLICY_CASES)} passed, 0 failed"], report
    assert done.returncode == 0, report


@pytest.mark.parametrize("case", OWN_POLICY_CASES, ids=lambda p: p.stem)
def test_case_with_its_own_policy(stack, case):
    _, upstream_port, upstream_log = stack.recorder()
    envoy = stack.envoy(own_policy(case), upstream_port)
    done, report = _replay(envoy.listen_port, upstream_log, [case], control=False)
    assert done.stdout.splitlines()[-1:] == ["1 passed, 0 failed"], report
    assert done.returncode == 0, report
