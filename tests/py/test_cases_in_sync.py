"""Tier 1: tests/cases/ is a verbatim copy of the shared replay cases (re-copy with tests/sync_cases.sh).

The shared directory is `$MCP_SHARED_CASES`, else ../shared/cases next to the repository; where it
does not exist (e.g. a CI checkout of this repository alone) the comparison is skipped.
"""

import os
from pathlib import Path

import pytest

from testkit.paths import CASES_DIR, REPO_ROOT

SHARED = Path(os.environ.get("MCP_SHARED_CASES", REPO_ROOT.parent / "shared" / "cases"))
TOP_LEVEL = ["README.md", "policy.json", "control.json", "recorder.py", "replay.py"]

pytestmark = pytest.mark.skipif(not (SHARED / "requests").is_dir(),
                                reason=f"the project's shared replay cases (the source that tests/cases copies) are "
                                       f"not at {SHARED}: a checkout of this repository alone has none to compare "
                                       f"with; set MCP_SHARED_CASES to their directory to check the copy")


def _names(d: Path) -> list[str]:
    return sorted(p.name for p in d.glob("*.json"))


def test_same_case_files():
    assert _names(CASES_DIR / "requests") == _names(SHARED / "requests"), "run tests/sync_cases.sh"


@pytest.mark.parametrize("name", TOP_LEVEL)
def test_top_level_file_identical(name):
    assert (CASES_DIR / name).read_bytes() == (SHARED / name).read_bytes(), f"{name} differs: run tests/sync_cases.sh"


def test_case_files_identical():
    differing = [n for n in _names(SHARED / "requests")
                 if (CASES_DIR / "requests" / n).read_bytes() != (SHARED / "requests" / n).read_bytes()]
    assert differing == [], "run tests/sync_cases.sh"
