"""Tier 1: where the Makefile's builds go. A CARGO_TARGET_DIR from the shell is not followed (the
tests, benchmarks and Envoy configs read ./target, and would run an older build left there); one
given on make's command line is, for a second build beside the first."""

import os
import subprocess

from testkit.paths import REPO_ROOT

# A rule added for the test: what a recipe's cargo would see.
SHOW = ["make", "-s", "--no-print-directory", "--eval", 'show-target-dir: ; @echo "[$$CARGO_TARGET_DIR]"',
        "show-target-dir"]


def seen(env_value: str | None, *args: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("CARGO_TARGET_DIR", "MAKEFLAGS", "MFLAGS")}
    if env_value is not None:
        env["CARGO_TARGET_DIR"] = env_value
    done = subprocess.run([*SHOW, *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_shell_wide_target_dir_is_not_followed():
    assert seen("/tmp/elsewhere") == "[target]\n"


def test_one_on_the_command_line_is_followed_by_the_recipes_and_the_module_path():
    assert seen("/tmp/elsewhere", "CARGO_TARGET_DIR=/tmp/sym") == "[/tmp/sym]\n"
    done = subprocess.run(["make", "-s", "--no-print-directory", "--eval", "show-module: ; @echo $(DYNAMIC_MODULE)",
                           "show-module", "CARGO_TARGET_DIR=/tmp/sym"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=60)
    assert done.stdout == "/tmp/sym/dynamic-module/libmcp_policy_native.so\n"


def test_without_one_cargo_chooses():
    assert seen(None) == "[]\n"
