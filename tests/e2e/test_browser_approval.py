"""Tier 3: an approver in a real browser (Debian's chromium driven by npm playwright-core,
tests/browser/approve.mjs) on the mcp-approvals web page, with the agent's calls going through Envoy
and the filter to tests/cases/recorder.py.

- The approver logs in with name and token, sees the pending call with its grant, tool, reason and
  pretty-printed arguments, approves it with a note; the agent's identical retry then passes.
- Enter in the note field decides nothing (it would otherwise press Approve).
- A wrong token shows the login error and no session.
- The page shows a new pending call on its own (the script never reloads it).
- Arguments and a note carrying markup are shown as text: no dialog, no element of theirs.
- The page with one pending call at 1366x768, saved to docs/approvals-page.png by `make screenshot`
  (MCP_SCREENSHOT_OUT set).

Needs `make browser-deps` (chromium, tests/browser/node_modules); missing pieces fail, never skip.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import threading
from pathlib import Path

import pytest

from testkit import approvals as ha
from testkit.jsonrpc import headers_for, post, tool_call
from testkit.logs import grant_label
from testkit.paths import TESTS_DIR
from testkit.stack import Stack
from testkit.upstream import recorder_lines, recorder_reply

BROWSER_DIR = TESTS_DIR / "browser"
SCRIPT = BROWSER_DIR / "approve.mjs"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
ARGS = {"node": "pve2", "vmid": 200}
REASON = "starting a VM costs money"


@pytest.fixture(scope="module")
def browser_ready():
    problems = []
    if not shutil.which("node"):
        problems.append("node is not on PATH")
    if not (BROWSER_DIR / "node_modules" / "playwright-core").is_dir():
        problems.append(f"{BROWSER_DIR}/node_modules is missing")
    if not Path(CHROMIUM).exists():
        problems.append(f"{CHROMIUM} is missing")
    if problems:
        pytest.fail("; ".join(problems) + " (make browser-deps)", pytrace=False)


class Agent:
    """Envoy with a require_approval policy in front of the recorder, and the approval service."""

    def __init__(self, stack: Stack):
        self.svc = ha.approvals(stack)
        _, port, self.log = stack.recorder()
        self.envoy = stack.envoy(ha.approval_policy(), port, approvals_port=self.svc.check_port)

    def call(self, token: str, id_=1):
        return post(self.envoy.mcp_url, tool_call("start_vm", ARGS, id_), headers_for(token))

    def pending_call(self, token: str, id_=1) -> str:
        r = self.call(token, id_)
        assert r.error["code"] == -31007, r.body
        return r.error["data"]["approval_id"]


@pytest.fixture
def agent(stack, browser_ready):
    return Agent(stack)


def run_browser(svc: ha.Approvals, scenario: str, *, token: str | None = None, on_ready=None,
                timeout: float = 90.0, expected_console: tuple[str, ...] = (), **extra: str) -> dict:
    """Run approve.mjs; returns its result object. `on_ready(event)` runs when it reports ready.
    The page must log no console error besides `expected_console`."""
    env = {**os.environ, "APPROVALS_URL": svc.url, "SCENARIO": scenario, "APPROVER_NAME": svc.approver,
           "APPROVER_TOKEN": svc.token if token is None else token, "CHROMIUM": CHROMIUM, **extra}
    proc = subprocess.Popen(["node", str(SCRIPT)], cwd=BROWSER_DIR, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    timer = threading.Timer(timeout, proc.kill)
    timer.start()
    events, stderr = [], ""
    try:
        for line in proc.stdout:
            event = json.loads(line)
            events.append(event)
            if event["event"] == "ready" and on_ready is not None:
                on_ready(event)
        stderr = proc.stderr.read()
        proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, f"approve.mjs {scenario} exited {proc.returncode}:\n{stderr}"
    (result,) = [e for e in events if e["event"] == "result"]
    assert [e for e in result["console_errors"] if e not in expected_console] == [], result["console_errors"]
    return result


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and data[12:16] == b"IHDR", path
    return struct.unpack(">II", data[16:24])


def expected_text(token: str) -> list[str]:
    """What the pending row must show: tool, grant label, the server it goes to (the route's cluster
    and path), reason, the arguments pretty-printed."""
    return ["start_vm", grant_label(token), "server: cluster mcp_upstream", "/mcp", REASON, '"node": "pve2"',
            '"vmid": 200']


def test_approver_approves_in_the_browser_and_the_retry_passes(agent, tmp_path):
    token = "browser-agent"
    approval_id = agent.pending_call(token, id_=1)
    shot = tmp_path / "pending.png"

    result = run_browser(agent.svc, "approve", APPROVAL_ID=approval_id, NOTE="approved in the browser",
                         EXPECT_TEXT=json.dumps(expected_text(token)), SCREENSHOT=str(shot))
    assert png_size(shot) == (1366, 768)

    decided = agent.svc.get(approval_id)
    assert (decided["state"], decided["approver"], decided["note"]) == ("approved", "alice", "approved in the browser")

    r = agent.call(token, id_=2)
    assert (r.status, r.body) == (200, recorder_reply(2))
    (seen,) = recorder_lines(agent.log)
    assert seen["body_len"] == len(tool_call("start_vm", ARGS, 2))
    assert agent.svc.get(approval_id)["state"] == "consumed"


def test_enter_in_the_note_field_decides_nothing(agent):
    """An approver typing a note and pressing Enter must not approve: the form's default button is
    a hidden, disabled one."""
    approval_id = agent.pending_call("browser-agent-enter")
    result = run_browser(agent.svc, "enter-in-note", APPROVAL_ID=approval_id)
    assert (result["navigations"], result["still_pending"]) == (0, 1), result
    assert agent.svc.get(approval_id)["state"] == "pending"
    assert recorder_lines(agent.log) == []


def test_wrong_token_shows_the_login_error(agent):
    approval_id = agent.pending_call("browser-agent-2")
    result = run_browser(agent.svc, "wrong-token", token="not-the-token", expected_console=(
        "Failed to load resource: the server responded with a status of 401 (Unauthorized)",))
    assert result["path"] == "/login"
    assert result["index_path"] == "/login"  # no session: the index sends us back
    lowered = result["text"].lower()
    assert "wrong name or token" in lowered, result["text"]
    assert "start_vm" not in result["text"]
    assert agent.svc.get(approval_id)["state"] == "pending"


def test_page_shows_a_new_pending_call_without_reloading(agent):
    made: dict[str, str] = {}

    def on_ready(event):
        assert event["before"] == []
        made["id"] = agent.pending_call("browser-agent-3")

    result = run_browser(agent.svc, "live-update", on_ready=on_ready, TIMEOUT_MS="20000")
    assert result["added"] == [made["id"]]
    assert "start_vm" in result["text"]


MARKUP_ARGS = {"node": "<script>alert(1)</script>", '"><img src=x onerror=alert(2)>': "</textarea><img src=x onerror=alert(3)>"}
MARKUP_NOTE = "<img src=x onerror=alert(4)></textarea><script>alert(5)</script>"


def test_markup_in_arguments_and_note_stays_text(agent):
    r = post(agent.envoy.mcp_url, tool_call("start_vm", MARKUP_ARGS, 1), headers_for("browser-agent-markup"))
    assert r.error["code"] == -31007, r.body
    approval_id = r.error["data"]["approval_id"]
    result = run_browser(agent.svc, "markup", APPROVAL_ID=approval_id, NOTE=MARKUP_NOTE)
    assert result["dialogs"] == []
    assert (result["injected"], result["injected_after"], result["scripts"]) == (0, 0, 2), result
    assert result["args_text"] == ('{\n  "node": "<script>alert(1)</script>",\n'
                                   '  "\\"><img src=x onerror=alert(2)>": "</textarea><img src=x onerror=alert(3)>"\n}')
    assert result["note_text"] == "note: " + MARKUP_NOTE
    assert result["url"].endswith(f"/approvals/{approval_id}")
    decided = agent.svc.get(approval_id)
    assert (decided["state"], decided["note"]) == ("denied", MARKUP_NOTE)
    assert recorder_lines(agent.log) == []


def test_screenshot_of_one_pending_call(agent, tmp_path):
    """The page as an approver sees it with one pending call, at laptop size. With
    MCP_SCREENSHOT_OUT set (make screenshot), the PNG is also copied there."""
    token = "agent-7"
    agent.pending_call(token)
    shot = tmp_path / "approvals-page.png"
    result = run_browser(agent.svc, "screenshot", EXPECT_TEXT=json.dumps(expected_text(token)), SCREENSHOT=str(shot))
    assert len(result["ids"]) == 1
    assert png_size(shot) == (1366, 768)
    out = os.environ.get("MCP_SCREENSHOT_OUT")
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(shot, out)
