"""The official MCP conformance suite (npm @modelcontextprotocol/conformance, pinned twice in
tests/conformance/package.json: the stable release and the 2026-07-28 draft suite, run by the Node 22
pinned there) in server mode, its results read per check; the server it tests
(tests/conformance/server.mjs); and an Envoy bootstrap with this filter in front of that server.

The suite's client sends no credential, so the bootstrap puts Envoy's `header_mutation` filter in
front of this filter: it sets `Authorization: Bearer <token>` on every request (overwriting any the
client sent), which is how a deployment that authenticates earlier hands the filter its grant.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import yaml

from testkit.envoy import hcm, render_envoy_config
from testkit.paths import REPO_ROOT
from testkit.processes import free_port

DIR = REPO_ROOT / "tests" / "conformance"
NODE = DIR / "node_modules" / "node" / "bin" / "node"
SERVER = DIR / "server.mjs"
GRANT_TOKEN = "conformance-suite-agent"
HEADER_MUTATION_TYPE = "type.googleapis.com/envoy.extensions.filters.http.header_mutation.v3.HeaderMutation"


@dataclass(frozen=True)
class Suite:
    name: str
    package: str        # the npm alias in tests/conformance/package.json
    args: tuple[str, ...]


# Stable: the suite's active scenarios (2025-06-18 and 2025-11-25). Draft: every server scenario
# 2026-07-28 requires, run at the 2026-07-28 wire, plus its unscored (extension, pending) scenarios.
STABLE = Suite("stable", "conformance-stable", ())
DRAFT = Suite("draft", "conformance-draft", ("--requirements", "2026-07-28"))


def installed() -> bool:
    return NODE.is_file() and all((DIR / "node_modules" / s.package / "dist" / "index.js").is_file()
                                  for s in (STABLE, DRAFT))


def server_argv(port: int) -> list[str]:
    return [str(NODE), str(SERVER), str(port)]


@dataclass(frozen=True)
class Check:
    status: str         # the suite's: SUCCESS, FAILURE, WARNING, SKIPPED, INFO
    error: str          # its errorMessage, if any
    scored: bool = True  # False: a scenario the suite runs and reports but does not score (extension, pending)


def run_suite(suite: Suite, url: str, out: Path, *, timeout: float = 240.0) -> dict[tuple[str, str], Check]:
    """Run `suite` in server mode against `url`; {(scenario, check id): Check} from the
    checks.json files it writes under `out` (a check id repeated in one scenario gets `#2`, `#3`...)."""
    argv = [str(NODE), str(DIR / "node_modules" / suite.package / "dist" / "index.js"), "server",
            "--url", url, "-o", str(out), *suite.args]
    proc = subprocess.run(argv, cwd=DIR, capture_output=True, text=True, timeout=timeout)
    (out / "suite.log").write_text(proc.stdout + proc.stderr, encoding="utf-8")
    # "Not scored for 2026-07-28: ..." then one line per scenario: "  ✗ tasks-lifecycle (extension)".
    unscored = set(re.findall(r"^\s+\S (\S+) \((?:extension|pending|added-after-release)\)$", proc.stdout, re.M))
    results: dict[tuple[str, str], Check] = {}
    files = sorted(out.glob("server-*/checks.json"))
    if not files:
        raise RuntimeError(f"the {suite.name} suite wrote no results (exit {proc.returncode}):\n{proc.stdout[-3000:]}"
                           f"{proc.stderr[-3000:]}")
    for path in files:
        scenario = re.sub(r"-\d{4}-\d\d-\d\dT[\d-]+Z$", "", path.parent.name.removeprefix("server-"))
        seen: Counter[str] = Counter()
        for check in json.loads(path.read_text(encoding="utf-8")):
            seen[check["id"]] += 1
            key = check["id"] if seen[check["id"]] == 1 else f"{check['id']}#{seen[check['id']]}"
            results[(scenario, key)] = Check(check["status"], check.get("errorMessage") or "", scenario not in unscored)
    return results


def tally(results: dict[tuple[str, str], Check]) -> str:
    """"P of N checks pass (status counts)", and the same for the scored scenarios when some are not."""
    def line(checks: list[Check]) -> str:
        counts = Counter(c.status for c in checks)
        return f"{counts['SUCCESS']} of {len(checks)} checks pass (" + \
            ", ".join(f"{k.lower()} {v}" for k, v in sorted(counts.items())) + ")"
    scored = [c for c in results.values() if c.scored]
    text = line(list(results.values()))
    return text if len(scored) == len(results) else f"{text}; scored scenarios: {line(scored)}"


def lost(direct: dict[tuple[str, str], Check], through: dict[tuple[str, str], Check]) -> dict[tuple[str, str], Check]:
    """The checks that pass directly and do not pass through the filter (status MISSING: not run through
    it, as when a scenario stops at its first refused call)."""
    missing = Check("MISSING", "")
    return {k: through.get(k, missing) for k, c in direct.items()
            if c.status == "SUCCESS" and through.get(k, missing).status != "SUCCESS"}


def render_config(wasm: Path, policy: str, upstream_port: int) -> str:
    """envoy/envoy.yaml with this filter under `policy` in front of 127.0.0.1:`upstream_port`, and
    Envoy's header_mutation filter first in the chain, setting the suite's grant."""
    cfg = yaml.safe_load(render_envoy_config(policy, wasm, free_port(), free_port(), upstream_port))
    grant = {"append": {"header": {"key": "authorization", "value": f"Bearer {GRANT_TOKEN}"},
                        "append_action": "OVERWRITE_IF_EXISTS_OR_ADD"}}
    hcm(cfg)["http_filters"].insert(0, {
        "name": "envoy.filters.http.header_mutation",
        "typed_config": {"@type": HEADER_MUTATION_TYPE, "mutations": {"request_mutations": [grant]}},
    })
    return yaml.safe_dump(cfg, sort_keys=False, width=1000)
