"""Tier 1: scripts/decisions.py, the one-line-per-decision view of `make run` (no Envoy run)."""

import importlib.util

from testkit.paths import REPO_ROOT

spec = importlib.util.spec_from_file_location("decisions", REPO_ROOT / "scripts" / "decisions.py")
decisions = importlib.util.module_from_spec(spec)
spec.loader.exec_module(decisions)

# envoy/envoy.yaml's access log format, as Envoy 1.40 printed it.
DENIED = ('[2026-11-30T22:57:35.373Z] "POST /mcp" 200 via_upstream mcp_decision=denied mcp_tool=delete_vm '
          'mcp_grant=sha256:7c43ef5ae21d mcp_rule=default mcp_error=denied up=- rid=84f13ef5')
ALLOWED = DENIED.replace("decision=denied", "decision=allowed").replace("rule=default", "rule=tools.list_vms") \
    .replace("tool=delete_vm", "tool=list_vms").replace("error=denied", "error=-")


def test_one_line_per_decision_without_colour():
    assert decisions.decision_line(DENIED, colour=False) == (
        "22:57:35.373  sha256:7c43ef5ae21d   delete_vm           denied                default")
    assert decisions.decision_line(ALLOWED, colour=False).split() == [
        "22:57:35.373", "sha256:7c43ef5ae21d", "list_vms", "allowed", "tools.list_vms"]


def test_colours_by_outcome():
    assert "\033[31mdenied" in decisions.decision_line(DENIED, colour=True)
    assert "\033[32mallowed" in decisions.decision_line(ALLOWED, colour=True)
    limited = DENIED.replace("decision=denied", "decision=rate_limited")
    assert "\033[33mrate_limited" in decisions.decision_line(limited, colour=True)


def test_requests_without_a_decision_are_skipped():
    assert decisions.decision_line(DENIED.replace("mcp_decision=denied", "mcp_decision=-"), colour=False) is None
    assert decisions.decision_line("[2026-11-30 22:53:01.019][22663][warning][main] something", colour=False) is None


def test_several_envoys_each_line_names_its_envoy(tmp_path):
    import subprocess
    import sys
    first, second = tmp_path / "envoy-1.log", tmp_path / "envoy-2.log"
    first.write_text(DENIED + "\n", encoding="utf-8")
    second.write_text(ALLOWED + "\n" + "not a decision\n", encoding="utf-8")
    proc = subprocess.Popen([sys.executable, str(REPO_ROOT / "scripts" / "decisions.py"), "--from-start",
                             "--color", "never", f"envoy-1={first}", f"envoy-2={second}"],
                            stdout=subprocess.PIPE, text=True)
    try:
        lines = [proc.stdout.readline().rstrip("\n") for _ in range(2)]
    finally:
        proc.kill()
        proc.wait()
    assert [line.split() for line in lines] == [
        ["envoy-1", "22:57:35.373", "sha256:7c43ef5ae21d", "delete_vm", "denied", "default"],
        ["envoy-2", "22:57:35.373", "sha256:7c43ef5ae21d", "list_vms", "allowed", "tools.list_vms"]]


# A request that names no tool, and its audit line as Envoy's log holds it (the wasm build's prefix).
PASSED = DENIED.replace("decision=denied", "decision=passed").replace("tool=delete_vm", "tool=-") \
    .replace("rule=default", "rule=-").replace("error=denied", "error=-")
AUDIT_LINE = ('[2026-11-30 22:57:35.373][22663][info][wasm] wasm log mcp_policy: [ctx 3] audit '
              '{"ts":"2026-11-30T22:57:35.373Z","decision":"passed","method":"tools/list",'
              '"grant":"sha256:7c43ef5ae21d","id":1,"request_id":"84f13ef5"}')


def test_a_request_without_a_tool_shows_its_method():
    # Unknown until its audit record is read.
    assert decisions.decision_line(PASSED, colour=False).split() == [
        "22:57:35.373", "sha256:7c43ef5ae21d", "-", "passed", "-"]
    # From Envoy's log, by Envoy and request id, taken once used.
    methods = {("", "84f13ef5"): "tools/list"}
    assert decisions.decision_line(PASSED, colour=False, methods=methods).split() == [
        "22:57:35.373", "sha256:7c43ef5ae21d", "tools/list", "passed", "-"]
    assert methods == {}
    assert decisions.decision_line(PASSED, colour=False, methods={("", "other"): "tools/list"}).split()[2] == "-"
    assert decisions.decision_line(PASSED, colour=False, methods={("envoy-2", "84f13ef5"): "ping"}).split()[2] == "-"
    # A client's own x-request-id claimed by two requests: neither method is trusted.
    methods = {}
    decisions.remember(methods, ("", "84f13ef5"), "tools/list")
    decisions.remember(methods, ("", "84f13ef5"), "initialize")
    assert decisions.decision_line(PASSED, colour=False, methods=methods).split()[2] == "-"
    # From the access log's own audit record (gateway.audit: "access_log").
    own = PASSED + ' audit={"decision":"passed","method":"initialize","request_id":"84f13ef5"}'
    assert decisions.decision_line(own, colour=False).split()[2] == "initialize"
    # A tools/call keeps its tool.
    assert decisions.decision_line(DENIED, colour=False, methods={("", "84f13ef5"): "tools/call"}).split()[2] == "delete_vm"
    # A method a terminal would act on is shown escaped, and cut.
    hostile = PASSED + ' audit={"method":"\\u001b[2J\\n12:00:00.000 admin list_vms allowed\\u2028","request_id":"r"}'
    assert decisions.decision_line(hostile, colour=False).split("  ")[2].strip() == \
        "\\u{1b}[2J\\u{a}12:00:00.000 admin list_vms allowed\\u{2028}"
    long = PASSED + ' audit={"method":"' + "m" * 300 + '","request_id":"r"}'
    assert decisions.decision_line(long, colour=False).split()[2] == "m" * 127 + "…"


def test_the_method_is_read_from_envoys_log(tmp_path):
    import subprocess
    import sys
    access, envoy = tmp_path / "access.log", tmp_path / "envoy.log"
    envoy.write_text(AUDIT_LINE + "\n", encoding="utf-8")
    access.write_text(PASSED + "\n", encoding="utf-8")
    proc = subprocess.Popen([sys.executable, str(REPO_ROOT / "scripts" / "decisions.py"), "--from-start",
                             "--color", "never", str(access), "--envoy-log", str(envoy)],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline().rstrip("\n")
    finally:
        proc.kill()
        proc.wait()
    assert line.split() == ["22:57:35.373", "sha256:7c43ef5ae21d", "tools/list", "passed", "-"]
