"""A second `make run` starts in seconds: what it builds (`make build native`: the module, then every
native binary in one cargo command) compiles nothing when no source changed, and wasm-opt does not run
again on a module it already shrank.

Cargo reports each unit with `-v`: `Fresh` (nothing to do), `Dirty` and `Compiling` (work). Two cargo
commands that build the core (mcp-policy-core) with different features make each other rebuild it and
everything on top of it: the Makefile builds it one way only (FILTER_FEATURES, the `native` target),
and this test holds it to that.
"""

from __future__ import annotations

import re
import subprocess

from testkit.paths import REPO_ROOT

UNITS = ("mcp-policy-core", "mcp-policy-filter", "mcp-approvals", "mcp-ratelimit")


def make_build() -> str:
    done = subprocess.run(["make", "--no-print-directory", "build", "native", "CARGO=cargo -v"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout + done.stderr


def test_a_second_build_compiles_nothing():
    make_build()  # whatever an earlier step left stale
    out = make_build()
    work = [line.strip() for line in out.splitlines() if re.match(r"\s*(Compiling|Dirty) ", line)]
    assert work == []
    fresh = {m.group(1) for m in re.finditer(r"^\s*Fresh (\S+) v", out, re.M)}
    assert set(UNITS) <= fresh, sorted(fresh)
    assert "wasm-opt: target/wasm32-wasip1/release/mcp_policy_filter.wasm unchanged since it was shrunk" in out
