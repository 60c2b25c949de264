"""Tier 2: the Grafana dashboard and the Prometheus alert rules of deploy/observability/, against a real
Prometheus (Debian's, `make prometheus-deps`) scraping a real Envoy with the filter, a second Envoy
reloading its policy through ECDS, mcp-ratelimit (on a real Redis) and mcp-approvals.

- Every panel's query of deploy/observability/dashboard.json returns data once the stack has seen
  allowed calls, refusals, a rate-limit refusal, a call waiting for approval and a dry-run refusal;
  the counters behind them have exact values.
- Every alert of deploy/observability/rules.yaml becomes active (pending, or firing when it has no
  `for`) in the test that provokes it, and no alert is active before. The `for` durations and the
  thresholds are covered by `promtool test rules` (deploy/observability/rules.test.yaml).

Prometheus runs as a plain process on 127.0.0.1 (free port, its data in the stack's log directory,
scrape and rule evaluation every second). Grafana's `$__rate_interval` and `$__range` are replaced by
fixed windows, as Grafana would replace them.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.parse
import urllib.request
import uuid
from pathlib import Path

import pytest
import yaml

from testkit import approvals as ha
from testkit import rls as hr
from testkit.clock import avoid_boundary
from testkit.envoy import render_ecds_config, set_policy
from testkit.jsonrpc import headers_for, post, tool_call
from testkit.paths import REPO_ROOT
from testkit.processes import HOST, answers, free_port

OBS = REPO_ROOT / "deploy" / "observability"
PROMETHEUS = REPO_ROOT / "tools" / "prometheus" / "usr" / "bin" / "prometheus"
ARGS = {"node": "pve1", "vmid": 100, "command": "uptime"}

POLICY = hr.cluster_policy(
    {
        "vm_agent_exec": {"limits": [{"counter": "exec_rate", "window": "hour", "max": 2, "scope": "grant"}]},
        "start_vm": ha.approval_tool(),
        "resize_vm": {"action": "deny", "reason": "resizing is under review"},
    },
    approval={"cluster": ha.APPROVALS_CLUSTER, "path": "/v1/check", "timeout": "5s", "mode": "retry"},
    tool_modes={"resize_vm": "dry_run"},
)
POLICY["hide"] = ["delete_vm"]


def token(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def kind(r) -> str | None:
    try:
        return r.error["data"]["kind"]
    except Exception:  # noqa: BLE001 - not an error reply
        return None


class Prometheus:
    def __init__(self, port: int):
        self.url = f"http://{HOST}:{port}"

    def api(self, path: str, **params) -> dict:
        url = f"{self.url}/api/v1/{path}" + ("?" + urllib.parse.urlencode(params) if params else "")
        with urllib.request.urlopen(url, timeout=5) as r:
            body = json.loads(r.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        return self.api("query", query=expr)["result"]

    def value(self, expr: str) -> float:
        result = self.query(expr)
        assert len(result) == 1, (expr, result)
        return float(result[0]["value"][1])

    def wait_value(self, expr: str, want: float, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        got = None
        while time.monotonic() < deadline:
            result = self.query(expr)
            got = [float(s["value"][1]) for s in result]
            if got == [want]:
                return
            time.sleep(0.5)
        raise AssertionError(f"{expr}: {got}, want [{want}]")

    def active_alerts(self) -> dict[str, str]:
        return {a["labels"]["alertname"]: a["state"] for a in self.api("alerts")["alerts"]}

    def wait_alert(self, name: str, states: tuple[str, ...], timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.active_alerts().get(name)
            if state in states:
                return state
            time.sleep(0.5)
        raise AssertionError(f"{name} not {states}: {self.active_alerts()}")


def prometheus_config(jobs: dict[str, tuple[str, list[str]]]) -> dict:
    return {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s", "scrape_timeout": "900ms"},
        "rule_files": [str(OBS / "rules.yaml")],
        "scrape_configs": [{"job_name": job, "metrics_path": path, "static_configs": [{"targets": targets}]}
                           for job, (path, targets) in jobs.items()],
    }


@pytest.fixture(scope="module")
def obs(module_stack):
    """Redis, mcp-ratelimit, mcp-approvals, a recorder upstream, Envoy with POLICY, an ECDS Envoy, and
    Prometheus scraping them all: {stack, envoy, ecds_envoy, ecds_file, rls, approvals, prom}."""
    if not PROMETHEUS.is_file():
        raise RuntimeError(f"{PROMETHEUS} is missing (make prometheus-deps)")
    s = module_stack
    _, redis_port = hr.start_redis(s)
    rls = hr.start_rls(s, redis_port)
    svc = ha.approvals(s)
    _, up, _ = s.recorder()
    envoy = s.start_envoy(hr.render(s, POLICY, up, [rls.port], approvals_port=svc.check_port), name="envoy")
    setup = render_ecds_config(s.log_dir / "envoy-ecds", up)
    set_policy({"version": "1", "tools": {"list_vms": {}}}, setup.ecds_file, wasm=s.wasm)
    ecds_envoy = s.start_envoy(setup.config, name="envoy-ecds")
    port = free_port()
    config = s.log_dir / "prometheus.yml"
    config.write_text(yaml.safe_dump(prometheus_config({
        "envoy": ("/stats/prometheus", [f"{HOST}:{envoy.admin_port}", f"{HOST}:{ecds_envoy.admin_port}"]),
        "mcp-ratelimit": ("/metrics", [f"{HOST}:{rls.metrics_port}"]),
        "mcp-approvals": ("/metrics", [f"{HOST}:{svc.port}"]),
    })), encoding="utf-8")
    data = s.log_dir / "prometheus-data"
    data.mkdir()
    argv = [str(PROMETHEUS), f"--config.file={config}", f"--storage.tsdb.path={data}",
            f"--web.listen-address={HOST}:{port}", "--storage.tsdb.retention.time=1h"]
    s.spawn("prometheus", argv, lambda: answers(f"http://{HOST}:{port}/-/ready"), "ready", timeout=30)
    prom = Prometheus(port)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        targets = prom.api("targets")["activeTargets"]
        if len(targets) == 4 and all(t["health"] == "up" for t in targets):
            break
        time.sleep(0.3)
    assert sorted((t["labels"]["job"], t["health"]) for t in prom.api("targets")["activeTargets"]) == [
        ("envoy", "up"), ("envoy", "up"), ("mcp-approvals", "up"), ("mcp-ratelimit", "up")]
    return {"stack": s, "envoy": envoy, "ecds_envoy": ecds_envoy, "ecds_file": setup.ecds_file, "rls": rls,
            "approvals": svc, "prom": prom}


def dashboard_queries() -> list[tuple[str, str, str]]:
    """(panel title / refId, query with Grafana's variables replaced, legend) of every panel target."""
    dash = json.loads((OBS / "dashboard.json").read_text(encoding="utf-8"))
    out = []
    for p in dash["panels"]:
        for t in p.get("targets", []):
            out.append((f'{p["title"]} / {t["refId"]}',
                        t["expr"].replace("$__rate_interval", "1m").replace("$__range", "10m"), t["legendFormat"]))
    return out


def write_table(path: Path, results: dict[str, tuple[str, list[dict]]], names: dict[str, str]) -> None:
    """Each panel query's series (named by its legend, an instance by `names`) and values, as a
    Markdown table."""
    lines = ["<!-- Written by tests/envoy/test_dashboards.py (MCP_DASHBOARD_TABLE): the dashboard's queries "
             "after its load. -->", "| Panel | Series: value |", "|---|---|"]
    for name, (legend, result) in results.items():
        cells = []
        for sample in sorted(result, key=lambda r: json.dumps(r["metric"], sort_keys=True)):
            labels = {**sample["metric"], "instance": names.get(sample["metric"].get("instance", ""), "")}
            shown = re.sub(r"\{\{(\w+)\}\}", lambda m: labels.get(m.group(1), ""), legend)
            value = float(sample["value"][1])
            cells.append(f"{shown}: {value:.4g}")
        lines.append(f"| {name.split(' / ')[0]} | {'; '.join(cells)} |")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def test_every_dashboard_query_returns_data_under_load(obs):
    envoy, prom, svc = obs["envoy"], obs["prom"], obs["approvals"]
    avoid_boundary(3600, margin=30)
    assert prom.active_alerts() == {}, "nothing is provoked yet"
    url, agent = envoy.mcp_url, token("agent")
    for i in range(4):
        assert post(url, tool_call("list_vms", {}, id=i), headers_for(agent)).status == 200
    hidden = post(url, tool_call("delete_vm", ARGS, id=10), headers_for(agent))
    assert (hidden.error["data"]["kind"], hidden.error["data"]["rule"]) == ("denied", "hide")
    assert kind(post(url, tool_call("reboot_vm", ARGS, id=11), headers_for(agent))) == "denied"
    assert kind(post(url, tool_call("list_vms", {}, id=12), headers_for(None))) == "no_grant"
    for i in range(2):
        assert kind(post(url, tool_call("vm_agent_exec", ARGS, id=20 + i), headers_for(agent))) is None
    assert kind(post(url, tool_call("vm_agent_exec", ARGS, id=22), headers_for(agent))) == "rate_limited"
    assert kind(post(url, tool_call("start_vm", ARGS, id=30), headers_for(agent))) == "approval_required"
    assert len(svc.pending()) == 1
    # Dry run: forwarded, counted as would_deny.
    assert kind(post(url, tool_call("resize_vm", ARGS, id=40), headers_for(agent))) is None

    job = '{job="envoy",instance="%s:%d"}' % (HOST, envoy.admin_port)
    for name, want in [("allowed", 6), ("hidden", 1), ("denied", 1), ("no_grant", 1), ("rate_limited", 1),
                       ("approval_required", 1), ("would_deny", 1), ("limiter_unavailable", 0),
                       ("approval_unavailable", 0)]:
        prom.wait_value(f"mcp_policy_{name}_total{job}", want)
    prom.wait_value('mcp_policy_tool_decisions_total{mcp_tool="vm_agent_exec",mcp_decision="rate_limited"}', 1)
    prom.wait_value('mcp_ratelimit_decisions_total{code="ok"}', 2)
    prom.wait_value('mcp_ratelimit_decisions_total{code="over_limit"}', 1)
    prom.wait_value("mcp_approvals_pending", 1)
    prom.wait_value('mcp_approvals_checks_total{status="pending"}', 1)
    prom.wait_value("mcp_policy_tracked_grants" + job, 0)  # limits are counted by the service here
    assert prom.value("mcp_approvals_oldest_pending_age_seconds") >= 0

    results = {name: (legend, prom.query(expr)) for name, expr, legend in dashboard_queries()}
    if os.environ.get("MCP_DASHBOARD_TABLE"):  # the table of docs/src/operate/dashboards.md
        names = {f"{HOST}:{envoy.admin_port}": "(envoy)", f"{HOST}:{obs['ecds_envoy'].admin_port}": "(envoy-ecds)",
                 f"{HOST}:{svc.port}": "(mcp-approvals)", f"{HOST}:{obs['rls'].metrics_port}": "(mcp-ratelimit)"}
        write_table(Path(os.environ["MCP_DASHBOARD_TABLE"]), results, names)
    empty = [name for name, (_, result) in results.items() if not result]
    assert empty == [], f"panels without data: {empty}"
    assert len(dashboard_queries()) == 36
    # The would_deny alert fires at once (no `for`); nothing else is active.
    assert prom.wait_alert("McpWouldDenyInDryRun", ("firing",)) == "firing"
    assert set(prom.active_alerts()) == {"McpWouldDenyInDryRun"}


def test_a_rejected_policy_reload_fires_its_alert(obs):
    prom = obs["prom"]
    assert "McpPolicyReloadRejected" not in prom.active_alerts()
    set_policy({"version": "1", "tools": {"list_vms": {"acton": "allow"}}}, obs["ecds_file"], wasm=obs["stack"].wasm)
    prom.wait_value("envoy_extension_config_discovery_http_filter_mcp_policy_update_rejected", 1)
    assert prom.wait_alert("McpPolicyReloadRejected", ("firing",)) == "firing"


def test_a_refusal_spike_fires_its_alert(obs):
    envoy, prom = obs["envoy"], obs["prom"]
    assert "McpRefusalSpike" not in prom.active_alerts()
    agent = token("spike")
    for i in range(60):
        assert kind(post(envoy.mcp_url, tool_call("reboot_vm", ARGS, id=i), headers_for(agent))) == "denied"
    assert prom.wait_alert("McpRefusalSpike", ("pending", "firing")) == "pending"  # for: 2m


def test_failing_services_fire_their_alerts(obs):
    envoy, prom = obs["envoy"], obs["prom"]
    for name in ("McpRateLimitServiceFailing", "McpApprovalServiceFailing"):
        assert name not in prom.active_alerts()
    agent = token("down")
    obs["rls"].proc.stop()
    assert kind(post(envoy.mcp_url, tool_call("vm_agent_exec", ARGS, id=1), headers_for(agent))) == "limiter_unavailable"
    assert prom.wait_alert("McpRateLimitServiceFailing", ("pending", "firing")) == "pending"  # for: 1m
    obs["approvals"].stop()
    assert kind(post(envoy.mcp_url, tool_call("start_vm", ARGS, id=2), headers_for(agent))) == "approval_unavailable"
    assert prom.wait_alert("McpApprovalServiceFailing", ("pending", "firing")) == "pending"  # for: 1m
    prom.wait_value("mcp_policy_limiter_unavailable_total" + '{instance="%s:%d"}' % (HOST, envoy.admin_port), 1)
    prom.wait_value("mcp_policy_approval_unavailable_total" + '{instance="%s:%d"}' % (HOST, envoy.admin_port), 1)
    assert prom.value('up{job="mcp-approvals"}') == 0
