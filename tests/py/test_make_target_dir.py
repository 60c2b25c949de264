"""Tier 1: where the Makefile's builds go. A CARGO_TARGET_DIR from the shell is not followed (the
tests, benchmarks and Envoy configs read ./target, and would run an older build left there); one
given on make's command line is, for a second build beside the first."""

import os
import subprocess

from testkit.paths import REPO_ROOT


def shown(expression: str, env_value: str | None, *args: str) -> str:
    """`expression` as a recipe of the Makefile prints it (a rule added for the test), make run with
    CARGO_TARGET_DIR=`env_value` in its environment (None: not set) and `args` on its command line."""
    env = {k: v for k, v in os.environ.items() if k not in ("CARGO_TARGET_DIR", "MAKEFLAGS", "MFLAGS")}
    if env_value is not None:
        env["CARGO_TARGET_DIR"] = env_value
    done = subprocess.run(["make", "-s", "--no-print-directory", "--eval", f'show: ; @echo "[{expression}]"', "show",
                           *args], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


# What a recipe's cargo sees.
SEEN = "$$CARGO_TARGET_DIR"


def test_a_shell_wide_target_dir_is_not_followed():
    assert shown(SEEN, "/tmp/elsewhere") == "[target]\n"


def test_one_on_the_command_line_is_followed_by_the_recipes_and_the_module_path():
    assert shown(SEEN, "/tmp/elsewhere", "CARGO_TARGET_DIR=/tmp/sym") == "[/tmp/sym]\n"
    assert shown("$(DYNAMIC_MODULE)", "/tmp/elsewhere", "CARGO_TARGET_DIR=/tmp/sym") == \
        "[/tmp/sym/dynamic-module/libmcp_policy_native.so]\n"


def test_without_one_cargo_chooses():
    assert shown(SEEN, None) == "[]\n"
