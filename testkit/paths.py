"""Where things are: the repository, the test data, the filter under test."""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
TESTS_DIR = REPO_ROOT / "tests"
CASES_DIR = TESTS_DIR / "cases"
DEFAULT_WASM = REPO_ROOT / "target" / "wasm32-wasip1" / "release" / "mcp_policy_filter.wasm"


def wasm_path() -> Path:
    """The filter to test: `$MCP_POLICY_WASM`, else the release build under target/ (absolute)."""
    env = os.environ.get("MCP_POLICY_WASM")
    return Path(env).resolve() if env else DEFAULT_WASM
