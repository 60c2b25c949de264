"""Shared fixtures.

- `wasm`: the filter under test (`$MCP_POLICY_WASM`, default target/wasm32-wasip1/release/mcp_policy_filter.wasm);
  a missing file FAILS the tests that need it, it never skips them.
- `stack` / `module_stack`: a `testkit.stack.Stack` logging under a tmp dir; everything it started is
  stopped at teardown, and a failed test's report carries the tail of every process log and of
  every stub upstream's request log.
- `stub`: the stub upstream (testkit/upstream.py) of a test module.
- Tests under envoy/ and e2e/ get the `integration` / `e2e` markers (tier 2 and tier 3).
- Test modules run in parallel (`make test-envoy`, PYTEST_WORKERS): see `pytest_xdist_make_scheduler`.
- `filter_build`: the build of the filter `stack` runs (testkit.native): `$MCP_POLICY_FILTER_BUILD`
  (default `wasm`); a test module marked `both_builds` runs every test that uses it (through `stack`
  or `module_stack`) once per build.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from testkit.native import BUILDS, native_path
from testkit.native import filter_build as default_build
from testkit.paths import wasm_path
from testkit.stack import Stack
from testkit.upstream import StubUpstream

TESTS = Path(__file__).resolve().parent
TIER_MARKERS = {"envoy": "integration", "e2e": "e2e"}


def pytest_collection_modifyitems(items):
    for item in items:
        parts = Path(str(item.fspath)).resolve().relative_to(TESTS).parts
        if parts[0] in TIER_MARKERS:
            item.add_marker(getattr(pytest.mark, TIER_MARKERS[parts[0]]))


# Test modules that share something outside their temporary directories: they run `make`, which
# writes into target/, and `make run-cluster` listens on fixed ports. One worker runs them, one
# after another.
SHARED_MODULES = frozenset({
    "py/test_preflight.py", "py/test_reload_policy_tests.py", "envoy/test_build_fresh.py",
    "envoy/test_reload.py", "envoy/test_run.py", "envoy/test_run_cluster.py",
})
# A renamed module would silently leave the shared worker: stop at collection instead.
_missing = sorted(m for m in SHARED_MODULES if not (TESTS / m).is_file())
assert not _missing, f"tests/conftest.py SHARED_MODULES names modules that do not exist: {_missing}"


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """`make test-envoy` runs the tests on PYTEST_WORKERS processes (pytest-xdist): each module's
    tests on one worker, in order (module-scoped stacks start once, and a test may read what the
    one before it left), and the modules of SHARED_MODULES all on the same worker. (pytest-xdist's
    own `--dist loadgroup` cannot do this with pytest 9: the group it appends to a test's id is lost.)"""
    from xdist.scheduler import LoadFileScheduling

    class ModuleScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::", 1)[0]
            return "shared" if module in SHARED_MODULES else module

    return ModuleScheduling(config, log)


def pytest_generate_tests(metafunc):
    """Tests of modules marked `both_builds` that use `filter_build` (through `stack`) run on each build."""
    if "filter_build" in metafunc.fixturenames and metafunc.definition.get_closest_marker("both_builds"):
        # Module scope: a module's tests run on one build, then on the other, and `module_stack`
        # (one Envoy for a module's tests) follows the build.
        metafunc.parametrize("filter_build", BUILDS, indirect=True, scope="module")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Attach the tail of every process log of a failed test's stack to its report."""
    outcome = yield
    rep = outcome.get_result()
    if rep.failed:
        for s in [v for v in getattr(item, "funcargs", {}).values() if isinstance(v, Stack)]:
            for proc in s.all_processes():
                rep.sections.append((f"{proc.name} log {proc.log_path} (tail)", proc.log_tail()))
            for stub in s.upstreams:
                lines = stub.log.read_text(encoding="utf-8", errors="replace").splitlines() if stub.log.exists() else []
                rep.sections.append((f"upstream requests {stub.log} (last 10)", "\n".join(lines[-10:])))


@pytest.fixture(scope="session")
def wasm() -> Path:
    path = wasm_path()
    if not path.is_file():
        pytest.fail(f"filter not built: {path} is missing (make build, or set MCP_POLICY_WASM)", pytrace=False)
    return path


@pytest.fixture(scope="module")
def filter_build(request) -> str:
    build = getattr(request, "param", None) or default_build()
    if build == "native" and not native_path().is_file():
        pytest.fail(f"native filter not built: {native_path()} is missing (make dynamic-module, or set "
                    "MCP_POLICY_NATIVE)", pytrace=False)
    return build


@pytest.fixture
def stack(tmp_path, wasm, filter_build):
    with Stack(log_dir=tmp_path, wasm=wasm, build=filter_build) as s:
        yield s


@pytest.fixture(scope="module")
def stub(tmp_path_factory):
    """The stub upstream (testkit/upstream.py), shared by the tests of one module: `route()` canned
    answers on paths of its own; other paths get the recorder's answer."""
    with StubUpstream(tmp_path_factory.mktemp("stub") / "received.jsonl") as s:
        yield s


@pytest.fixture(scope="module")
def module_stack(tmp_path_factory, wasm, filter_build):
    """Like `stack`, shared by the tests of one module (for setups many tests only read from)."""
    with Stack(log_dir=tmp_path_factory.mktemp("stack"), wasm=wasm, build=filter_build) as s:
        yield s
