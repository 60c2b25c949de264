"""Tier 1: `make reload` runs the tests file beside the policy (`RUN_DIR/policy.tests.yaml`) with
`mcp-policy test` before it applies the policy, and applies nothing when a case fails. No Envoy:
`CARGO=true` skips the CLI's rebuild (make test has built target/release/mcp-policy), and with passing
tests the apply step is reached (it then fails: there is no ECDS file)."""

import shutil
import subprocess

from testkit.paths import REPO_ROOT
from testkit.processes import free_port

FAILING = """cases:
  - name: list_vms is denied
    call: {tool: list_vms}
    expect: {kind: denied}
"""


def reload(run_dir):
    """`make reload`, its stdout without the line saying the CLI is rebuilt (when a source is newer)."""
    done = subprocess.run(["make", "-s", "--no-print-directory", "reload", f"RUN_DIR={run_dir}",
                           f"ADMIN_PORT={free_port()}", "CARGO=true"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    done.stdout = "".join(line for line in done.stdout.splitlines(keepends=True) if not line.startswith("reload: "))
    return done


def test_a_failing_case_stops_the_reload_before_anything_is_applied(tmp_path):
    shutil.copy(REPO_ROOT / "envoy" / "policy.json", tmp_path / "policy.json")
    (tmp_path / "policy.tests.yaml").write_text(FAILING, encoding="utf-8")
    done = reload(tmp_path)
    assert done.returncode == 2, done
    assert done.stdout == (f"running 1 case of {tmp_path}/policy.tests.yaml on {tmp_path}/policy.json\n"
                           "case list_vms is denied ... FAILED\n\nfailures:\n\n---- list_vms is denied ----\n"
                           "--- expected\n+++ actual\n-kind:   denied\n+kind:   allowed\n+rule:   tools.list_vms\n\n"
                           "test result: FAILED. 0 passed; 1 failed\n")
    assert done.stderr.startswith(f"reload: {tmp_path}/policy.tests.yaml fails: not applied (the previous policy "
                                  "keeps serving)\n"), done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["policy.json", "policy.tests.yaml", "reload-build.log"]


def test_passing_tests_go_on_to_apply(tmp_path):
    shutil.copy(REPO_ROOT / "envoy" / "policy.json", tmp_path / "policy.json")
    shutil.copy(REPO_ROOT / "envoy" / "policy.tests.yaml", tmp_path / "policy.tests.yaml")
    done = reload(tmp_path)
    assert done.returncode == 2, done
    assert done.stdout.endswith("test result: ok. 7 passed; 0 failed\n"), done.stdout
    assert done.stderr.startswith(f"mcp-policy: cannot read {tmp_path}/mcp_policy.yaml: "), done.stderr


def test_without_a_run_it_says_to_start_one_first(tmp_path):
    # Nothing is built or run: the policy `make run` writes is not there yet.
    done = subprocess.run(["make", "-s", "--no-print-directory", "reload", f"RUN_DIR={tmp_path}/run"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.startswith(f"reload: no {tmp_path}/run/policy.json: start `make run` first (it writes the "
                                  "policy there), edit that file, then `make reload`\n"), done.stderr
    assert not (tmp_path / "run").exists()
