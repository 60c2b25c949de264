"""Tier 2: the rate limit call and every kind of answer, on both builds: real Envoy, a stand-in
service (testkit/rls_stub.py, HTTP/2) that answers as each test sets, upstream tests/cases/recorder.py.

The wasm build makes the call with proxy-wasm's gRPC call (Envoy's gRPC client), the native build as
an HTTP/2 stream through the dynamic-module ABI (mcp_policy_core::rls::grpc), its answer read as
Envoy's gRPC client reads it. What both must do alike:
- the request: the same headers (`:path`, `content-type: application/grpc`, `te: trailers`,
  `grpc-timeout` from the policy's timeout, `:authority` the cluster) and the same framed
  RateLimitRequest bytes;
- answers that are no decision (a truncated or compressed frame, no message, a body that is no gRPC,
  INVALID_ARGUMENT, HTTP 404) refuse `limiter_unavailable` even with `failure_mode: "allow"`, and
  nothing reaches the upstream;
- an outage (a trailers-only UNAVAILABLE, HTTP 503) follows `failure_mode`: `allow` forwards;
- an answer later than the timeout: refused within the timeout under `deny`, forwarded under `allow`;
- a cluster without HTTP/2 to the real mcp-ratelimit: an outage (Envoy answers 503), never counted;
- the status in trailers decides over the message: a status after headers with no message, an OK
  message then a failed status, a message without trailers or without a status in them;
- bytes after the message that are no complete frame are never read (Envoy's gRPC client waits for
  the rest, and the trailers end the call), but a frame flag other than 0 or 1 is refused as soon as
  it comes; a message over 64 KiB is refused only when it is the answer (the last message);
- a `grpc-status` with whitespace around it is that status;
- an answer that stalls after its headers past the timeout is refused whatever `failure_mode` says.
"""

from __future__ import annotations

import hashlib
import time
import uuid

import pytest
import yaml

from testkit import rls as hr
from testkit import rls_stub as rs
from testkit.jsonrpc import Reply, headers_for, post, tool_call
from testkit.stats import filter_samples
from testkit.upstream import recorder_lines, recorder_reply

pytestmark = pytest.mark.both_builds

ARGS = {"node": "pve1", "vmid": 100, "command": "uptime"}
TIMEOUT_S = 0.2
WITHIN_S = TIMEOUT_S + 1.5  # the margin is for a loaded 2-core machine
LIMIT = {"counter": "exec_rate", "window": "hour", "max": 10}


def token(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def kind(r: Reply) -> str | None:
    try:
        return r.error["data"]["kind"]
    except Exception:  # noqa: BLE001 - not an error reply
        return None


def forwarded(r: Reply, id_) -> bool:
    return r.status == 200 and r.body == recorder_reply(id_)


def upstream(log, tok: str, settle: float = 0.3) -> list[dict]:
    return [e for e in recorder_lines(log, settle=settle) if e["headers"].get("authorization") == f"Bearer {tok}"]


@pytest.fixture
def setup(stack):
    """(envoy factory by failure_mode, stub, recorder log): Envoys asking the stub."""
    stub = rs.RlsStub()
    _, up, log = stack.recorder()

    def envoy(failure_mode: str = "deny"):
        policy = hr.cluster_policy({"vm_agent_exec": {"limits": [LIMIT]}}, failure_mode=failure_mode)
        return stack.start_envoy(hr.render(stack, policy, up, [stub.port]))

    try:
        yield envoy, stub, log
    finally:
        stub.close()


def ask(envoy, tok: str, id_: int = 1) -> tuple[Reply, float]:
    t0 = time.monotonic()
    r = post(envoy.mcp_url, tool_call("vm_agent_exec", ARGS, id=id_), headers_for(tok), timeout=10)
    return r, time.monotonic() - t0


def pb_bytes(field: int, value: bytes) -> bytes:
    assert len(value) < 128
    return bytes([field << 3 | 2, len(value)]) + value


def pb_varint(field: int, value: int) -> bytes:
    assert value < 128
    return bytes([field << 3, value])


def test_the_request_is_the_same_on_both_builds(setup):
    envoy_for, stub, log = setup
    envoy = envoy_for()
    tok = token("shape")
    r, _ = ask(envoy, tok)
    assert forwarded(r, 1), r.body
    assert len(stub.received) == 1, stub.received
    (req,) = stub.received
    h = req.headers
    assert (h[":method"], h[":path"], h[":authority"], h["content-type"], h["te"], h["grpc-timeout"]) == (
        "POST", "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit", hr.RLS_CLUSTER,
        "application/grpc", "trailers", "200m")
    grant = hashlib.sha256(tok.encode()).hexdigest().encode()
    entries = (pb_bytes(1, pb_bytes(1, b"mcp_counter") + pb_bytes(2, b"exec_rate"))
               + pb_bytes(1, pb_bytes(1, b"mcp_grant") + pb_bytes(2, grant)))
    limit = pb_bytes(2, pb_varint(1, 10) + pb_varint(2, 3))  # 10 per HOUR
    descriptor = entries + limit + pb_bytes(3, pb_varint(1, 1))  # hits_addend 1
    message = pb_bytes(1, b"mcp") + bytes([2 << 3 | 2]) + bytes([len(descriptor)]) + descriptor
    assert req.body == rs.frame(message)
    assert len(upstream(log, tok, settle=0)) == 1


NO_DECISION = {
    "truncated_frame": rs.Answer(body=rs.frame(rs.OK_MESSAGE)[:6], trailers=[("grpc-status", "0")]),
    "compressed_frame": rs.Answer(body=rs.frame(rs.OK_MESSAGE, flag=1), trailers=[("grpc-status", "0")]),
    "ok_without_message": rs.trailers_only(0),
    "not_grpc": rs.Answer(headers=[(":status", "200"), ("content-type", "text/plain")], body=b"hello world"),
    "unknown_flag": rs.Answer(body=b"\x02", trailers=[("grpc-status", "0")]),
    "unknown_flag_after_ok_message": rs.Answer(body=rs.frame(rs.OK_MESSAGE) + b"\x02", trailers=[("grpc-status", "0")]),
    "invalid_argument": rs.trailers_only(3),
    "http_404": rs.Answer(headers=[(":status", "404")]),
}


# The reason the agent reads, the same on both builds: the wasm build has only the status Envoy's
# gRPC client reports, and the native build, which reads the answer itself, says no more.
NO_DECISION_REASON = {
    "truncated_frame": "rate limit service did not take the request: gRPC status 13",
    "compressed_frame": "rate limit service did not take the request: gRPC status 13",
    "unknown_flag": "rate limit service did not take the request: gRPC status 13",
    "unknown_flag_after_ok_message": "rate limit service did not take the request: gRPC status 13",
    "ok_without_message": "rate limit service did not take the request: gRPC status 13",
    "not_grpc": "rate limit service did not take the request: gRPC status 13",
    "invalid_argument": "rate limit service did not take the request: gRPC status 3",
    "http_404": "rate limit service did not take the request: gRPC status 12",
}


@pytest.mark.parametrize("case", NO_DECISION)
def test_an_answer_that_is_no_decision_refuses_even_with_failure_mode_allow(setup, case):
    envoy_for, stub, log = setup
    stub.answer = NO_DECISION[case]
    envoy = envoy_for("allow")
    tok = token(case)
    for i in range(2):
        r, elapsed = ask(envoy, tok, i)
        assert kind(r) == "limiter_unavailable", (case, r.body)
        assert r.error["data"]["reason"] == NO_DECISION_REASON[case]
        assert r.status == 200 and r.json()["id"] == i and r.error["code"] == -31004
        assert elapsed < WITHIN_S
    assert upstream(log, tok) == []
    assert len(stub.received) == 2
    assert filter_samples(envoy)["mcp_policy_limiter_unavailable_total{}"] == 2


OUTAGE = {"unavailable": rs.trailers_only(14), "http_503": rs.Answer(headers=[(":status", "503")])}


@pytest.mark.parametrize("case", OUTAGE)
def test_an_outage_answer_follows_failure_mode(setup, case):
    envoy_for, stub, log = setup
    stub.answer = OUTAGE[case]
    allow, deny = envoy_for("allow"), envoy_for("deny")
    tok = token(case)
    r, _ = ask(allow, tok, 1)
    assert forwarded(r, 1), r.body
    r, _ = ask(deny, tok, 2)
    assert kind(r) == "limiter_unavailable", r.body
    assert len(upstream(log, tok)) == 1
    assert filter_samples(allow)["mcp_policy_limiter_unavailable_total{}"] == 1


def test_an_answer_later_than_the_timeout_is_an_outage_in_bounded_time(setup):
    envoy_for, stub, log = setup
    late = rs.ok()
    late.delay = 1.0
    stub.answer = late
    deny, allow = envoy_for("deny"), envoy_for("allow")
    tok = token("late")
    for i in range(2):
        r, elapsed = ask(deny, tok, i)
        assert kind(r) == "limiter_unavailable", r.body
        assert elapsed < WITHIN_S, f"answered after {elapsed:.2f} s"
    r, elapsed = ask(allow, tok, 5)
    assert forwarded(r, 5), r.body
    assert elapsed < WITHIN_S
    assert len(upstream(log, tok)) == 1
    # The late answers, once they come, change nothing.
    time.sleep(1.0)
    assert len(upstream(log, tok, settle=0)) == 1


FRAMED_OK = rs.frame(rs.OK_MESSAGE)
# What the answer is read as: "ok" (a decision, forwarded under both failure modes), "outage"
# (`failure_mode` decides) or "unusable" (refused under both).
READ_AS = {
    "unavailable_in_trailers_after_headers": (rs.Answer(trailers=[("grpc-status", "14")]), "outage"),
    "ok_message_then_internal": (rs.Answer(body=FRAMED_OK, trailers=[("grpc-status", "13")]), "unusable"),
    "ok_message_then_unavailable": (rs.Answer(body=FRAMED_OK, trailers=[("grpc-status", "14")]), "outage"),
    "ok_message_without_trailers": (rs.Answer(body=FRAMED_OK), "unusable"),
    "ok_message_trailers_without_status": (rs.Answer(body=FRAMED_OK, trailers=[("x-other", "1")]), "unusable"),
    "partial_frame_after_ok_message": (rs.Answer(body=FRAMED_OK + b"\x00", trailers=[("grpc-status", "0")]), "ok"),
    # A frame flag other than 0 or 1 is refused as soon as it comes, though its frame never ends.
    "unknown_flag_after_ok_message": (rs.Answer(body=FRAMED_OK + b"\x02", trailers=[("grpc-status", "0")]),
                                      "unusable"),
    # A message over 64 KiB counts only if it is the last one; an unfinished frame never does.
    "4_gib_announced_after_ok_message": (rs.Answer(body=FRAMED_OK + b"\x00\xff\xff\xff\xff",
                                                   trailers=[("grpc-status", "0")]), "ok"),
    "70_kb_message_then_ok_message": (rs.Answer(body=rs.frame(bytes(70_000)) + FRAMED_OK,
                                                trailers=[("grpc-status", "0")]), "ok"),
    # Envoy reads a grpc-status with whitespace around it (absl::SimpleAtoi).
    "status_with_spaces": (rs.Answer(body=FRAMED_OK, trailers=[("grpc-status", " 14")]), "outage"),
    # Headers, then nothing until past the timeout: Envoy resets the stream, which its gRPC client
    # reads as 13 INTERNAL, no outage (a timeout is one only before the headers).
    "headers_then_stall_past_the_timeout": (rs.Answer(body=FRAMED_OK, trailers=[("grpc-status", "0")], stall=1.0),
                                            "unusable"),
}


@pytest.mark.parametrize("case", READ_AS)
def test_the_status_in_trailers_decides_over_the_message(setup, case):
    envoy_for, stub, log = setup
    stub.answer, read_as = READ_AS[case]
    allow, deny = envoy_for("allow"), envoy_for("deny")
    tok = token(case)
    for envoy, id_, mode in ((allow, 1, "allow"), (deny, 2, "deny")):
        r, elapsed = ask(envoy, tok, id_)
        if read_as == "ok" or (read_as == "outage" and mode == "allow"):
            assert forwarded(r, id_), (mode, r.body)
        else:
            assert kind(r) == "limiter_unavailable", (mode, r.body)
            assert r.status == 200 and r.json()["id"] == id_ and r.error["code"] == -31004
        assert elapsed < WITHIN_S
    assert len(upstream(log, tok)) == {"ok": 2, "outage": 1, "unusable": 0}[read_as]
    assert len(stub.received) == 2


def test_an_http1_cluster_is_an_outage_never_counted(stack):
    """The service's cluster without HTTP/2 (no `http2_protocol_options`): Envoy sends the call as
    HTTP/1.1, the real mcp-ratelimit (gRPC, HTTP/2 only) drops it, and Envoy answers 503 itself:
    gRPC status 14 on both builds, so `failure_mode` decides, and the service counts nothing."""
    _, redis_port = hr.start_redis(stack)
    rls = hr.start_rls(stack, redis_port)
    _, up, log = stack.recorder()
    tok = token("http1")
    for i, failure_mode in enumerate(("deny", "allow")):
        policy = hr.cluster_policy({"vm_agent_exec": {"limits": [LIMIT]}}, failure_mode=failure_mode)
        cfg = yaml.safe_load(hr.render(stack, policy, up, [rls.port]))
        (cluster,) = [c for c in cfg["static_resources"]["clusters"] if c["name"] == hr.RLS_CLUSTER]
        del cluster["typed_extension_protocol_options"], cluster["health_checks"]
        envoy = stack.start_envoy(yaml.safe_dump(cfg, sort_keys=False, width=1000), name=f"envoy-{failure_mode}")
        r, elapsed = ask(envoy, tok, i)
        if failure_mode == "deny":
            assert kind(r) == "limiter_unavailable", r.body
            assert "rate limit service unavailable (or too slow): gRPC status 14" in r.error["message"]
        else:
            assert forwarded(r, i), r.body
        assert elapsed < WITHIN_S
    assert 'mcp_ratelimit_decisions_total{code="ok"} 0' in rls.metrics()
    assert len(upstream(log, tok)) == 1


def test_a_cluster_envoy_does_not_have_is_an_outage_with_the_same_text(stack):
    """A policy naming a cluster this Envoy lacks: the callout cannot start (proxy-wasm says
    `ParseFailure`, the dynamic-module ABI `ClusterNotFound`, each in its own log line), and both
    builds answer the same outage, with the same text, as `failure_mode` decides."""
    _, up, log = stack.recorder()
    tok = token("nocluster")
    for i, failure_mode in enumerate(("deny", "allow")):
        policy = hr.cluster_policy({"vm_agent_exec": {"limits": [LIMIT]}}, cluster="nope", failure_mode=failure_mode)
        envoy = stack.start_envoy(hr.render(stack, policy, up, []), name=f"envoy-{failure_mode}")
        r, elapsed = ask(envoy, tok, i)
        if failure_mode == "deny":
            assert kind(r) == "limiter_unavailable", r.body
            assert (r.error["code"], r.error["message"], r.error["data"]["reason"]) == (
                -31004, "tool 'vm_agent_exec' refused: cannot call cluster 'nope'", "cannot call cluster 'nope'"), r.error
        else:
            assert forwarded(r, i), r.body
        assert elapsed < WITHIN_S
    assert len(upstream(log, tok)) == 1
