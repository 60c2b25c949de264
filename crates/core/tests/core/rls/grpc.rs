//! The rate limit call as an HTTP/2 stream (the native build's transport, `rls::grpc`): the request
//! Envoy's gRPC client would send, and every answer read event by event as Envoy's gRPC client reads
//! it, so both builds reach the same `Answer` (then the same reply, tested in `super`).

use mcp_policy_core::policy::RateLimitService;
use mcp_policy_core::rls::grpc::{self, AnswerReader, MAX_ANSWER_BYTES};
use mcp_policy_core::rls::{proto, Answer};
use mcp_policy_core::terms::FailureMode;

fn svc(authority: Option<&str>) -> RateLimitService {
    RateLimitService {
        cluster: "mcp_ratelimit".into(),
        authority: authority.map(str::to_owned),
        domain: "mcp".into(),
        timeout_ms: 250,
        failure_mode: FailureMode::Deny,
    }
}

/// `RateLimitResponse{overall_code: OK}` and `{overall_code: OVER_LIMIT}`.
const OK_MESSAGE: [u8; 2] = [0x08, 0x01];
const OVER_LIMIT_MESSAGE: [u8; 2] = [0x08, 0x02];

/// One event of the answer's stream.
enum Ev<'a> {
    /// `:status`, `grpc-status`, end of stream.
    Headers(Option<&'a str>, Option<&'a str>, bool),
    Data(&'a [u8], bool),
    Trailers(Option<&'a str>),
    Reset,
}
use Ev::{Data, Headers, Reset, Trailers};

/// The answer the events give, and after how many of them (`None`: the call has not ended).
fn feed(events: &[Ev]) -> Option<(Answer, usize)> {
    let mut r = AnswerReader::default();
    for (n, ev) in events.iter().enumerate() {
        match ev {
            Headers(s, g, end) => r.headers(s.map(str::as_bytes), g.map(str::as_bytes), *end),
            Data(d, end) => r.data(d, *end),
            Trailers(g) => r.trailers(g.map(str::as_bytes)),
            Reset => r.reset(),
        }
        if r.ended() {
            let answer = r.take().unwrap();
            assert!(r.take().is_none(), "given once");
            return Some((answer, n + 1));
        }
    }
    None
}

fn read(events: &[Ev]) -> Answer {
    feed(events).expect("the call ended").0
}

/// Headers of status 200 that do not end the stream, then `body`, then `trailers`' `grpc-status`.
fn answer(body: &[u8], trailers: Option<&str>) -> Answer {
    read(&[Headers(Some("200"), None, false), Data(body, false), Trailers(trailers)])
}

/// A trailers-only answer: headers with `status` and `grpc-status` that end the stream.
fn trailers_only(status: &str, grpc: &str) -> Answer {
    read(&[Headers(Some(status), Some(grpc), true)])
}

fn is_outage(a: &Answer) -> bool {
    matches!(a, Answer::Unavailable(_))
}

fn is_unusable(a: &Answer, why: &str) -> bool {
    matches!(a, Answer::Unusable(w) if w.contains(why))
}

fn decoded(code: i32) -> Answer {
    Answer::Decoded(proto::Response { overall_code: code, statuses: vec![] })
}

#[test]
fn the_request_is_what_envoys_grpc_client_sends() {
    let headers = grpc::request_headers(&svc(None));
    let want = [
        (":method", "POST"),
        (":path", "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit"),
        (":authority", "mcp_ratelimit"),
        ("te", "trailers"),
        ("grpc-timeout", "250m"),
        ("content-type", "application/grpc"),
    ];
    let got: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (*k, v.as_str())).collect();
    assert_eq!(got, want);
    // With an authority it is the `:authority` (the cluster name may be none, e.g. Istio's).
    let headers = grpc::request_headers(&svc(Some("mcp-ratelimit.mcp-system.svc.cluster.local")));
    assert_eq!(headers[2], (":authority", "mcp-ratelimit.mcp-system.svc.cluster.local".to_owned()));
    assert_eq!(grpc::grpc_timeout(60_000), "60000m");
    assert_eq!(grpc::grpc_timeout(100_000_000), "100000S");
    // The 5-byte frame: uncompressed, big-endian length.
    assert_eq!(grpc::frame(&[7; 3]), [0, 0, 0, 0, 3, 7, 7, 7]);
    assert_eq!(grpc::frame(&[]), [0, 0, 0, 0, 0]);
    assert_eq!(grpc::frame(&[1; 300])[..5], [0, 0, 0, 1, 44]);
}

#[test]
fn one_complete_message_is_the_answer() {
    let ok = decoded(proto::CODE_OK);
    assert_eq!(answer(&grpc::frame(&OK_MESSAGE), Some("0")), ok);
    // A `grpc-status` in headers that do not end the stream is initial metadata: the trailers decide.
    let framed = grpc::frame(&OK_MESSAGE);
    let events = [Headers(Some("200"), Some("0"), false), Data(&framed, false), Trailers(Some("0"))];
    assert_eq!(read(&events), ok);
    // The message in pieces, a byte at a time.
    let mut events = vec![Headers(Some("200"), None, false)];
    events.extend(framed.chunks(1).map(|b| Data(b, false)));
    events.push(Trailers(Some("0")));
    assert_eq!(feed(&events), Some((ok.clone(), framed.len() + 2)));
    // An empty message is a valid RateLimitResponse (overall_code UNKNOWN): the pipeline refuses it.
    assert_eq!(answer(&grpc::frame(&[]), Some("0")), decoded(proto::CODE_UNKNOWN));
    // Two messages: the last one, as Envoy's unary client keeps it.
    let two = [grpc::frame(&OK_MESSAGE), grpc::frame(&OVER_LIMIT_MESSAGE)].concat();
    assert_eq!(answer(&two, Some("0")), decoded(proto::CODE_OVER_LIMIT));
    // Bytes after the message that are no complete frame are never read (Envoy's decoder waits for
    // the rest, and the trailers end the call).
    let mut extra = framed.clone();
    extra.push(0);
    assert_eq!(answer(&extra, Some("0")), ok);
}

#[test]
fn the_status_in_trailers_decides_over_the_message() {
    let framed = grpc::frame(&OK_MESSAGE);
    // An OK message then a failed status: the status (no decision is read from the message).
    assert!(is_unusable(&answer(&framed, Some("13")), "gRPC status 13"));
    assert!(is_outage(&answer(&framed, Some("14"))));
    // A status in trailers after headers, with no message.
    assert!(is_outage(&answer(b"", Some("14"))));
    assert!(is_unusable(&answer(b"", Some("3")), "gRPC status 3"));
    // Trailers without a status, or no trailers at all: 2 UNKNOWN.
    assert!(is_unusable(&answer(&framed, None), "gRPC status 2"));
    let no_trailers = [Headers(Some("200"), None, false), Data(&framed, true)];
    assert!(is_unusable(&read(&no_trailers), "gRPC status 2"));
}

#[test]
fn outages_are_what_envoy_reports_as_unavailable_or_deadline_exceeded() {
    // Envoy's local replies to a gRPC request: trailers-only, grpc-status 14 (its callout timeout,
    // no healthy endpoint, connection refused), or plain 503/504/502/429 with a text body.
    assert!(is_outage(&trailers_only("200", "14")));
    assert!(is_outage(&trailers_only("200", "4")));
    for http in ["502", "503", "504", "429"] {
        // Decided on the headers: the body that follows is not read.
        let events = [Headers(Some(http), None, false), Data(b"upstream connect error", true)];
        assert!(matches!(feed(&events), Some((Answer::Unavailable(_), 1))), "{http}");
    }
    // A non-200 that ends the stream with a grpc-status: that status.
    assert!(is_outage(&trailers_only("503", "14")));
    assert!(is_unusable(&trailers_only("503", "3"), "gRPC status 3"));
    // A non-200 that does not end the stream: the HTTP status, whatever grpc-status it carries.
    assert!(is_outage(&read(&[Headers(Some("503"), Some("3"), false)])));
}

#[test]
fn every_other_answer_is_unusable_whatever_the_failure_mode() {
    // Statuses the service sends when it will not decide (INVALID_ARGUMENT, UNIMPLEMENTED, …).
    for g in ["3", "12", "13", "7", "16", "2"] {
        assert!(is_unusable(&trailers_only("200", g), &format!("gRPC status {g}")), "{g}");
    }
    // A grpc-status that is no number is Envoy's InvalidCode (-1).
    assert!(is_unusable(&trailers_only("200", "x"), "gRPC status 4294967295"));
    // Non-200 statuses, mapped as gRPC does.
    for (http, g) in [("400", 13), ("401", 16), ("403", 7), ("404", 12), ("500", 2), ("302", 2)] {
        assert!(is_unusable(&read(&[Headers(Some(http), None, true)]), &format!("gRPC status {g}")), "{http}");
    }
    // OK with no message: trailers-only, or trailers after headers; headers alone without a status.
    assert!(is_unusable(&trailers_only("200", "0"), "gRPC status 13"));
    assert!(is_unusable(&answer(b"", Some("0")), "gRPC status 13"));
    assert!(is_unusable(&read(&[Headers(Some("200"), None, true)]), "gRPC status 2"));
    // Frames that are no complete uncompressed message. A compressed message and an unknown frame
    // flag end the call as Envoy's gRPC client ends it (13 INTERNAL): the wasm build's reason.
    let framed = grpc::frame(&OK_MESSAGE);
    assert!(is_unusable(&answer(&framed[..3], Some("0")), "gRPC status 13"));
    assert!(is_unusable(&answer(&framed[..6], Some("0")), "gRPC status 13"));
    let mut compressed = framed.clone();
    compressed[0] = 1;
    assert!(is_unusable(&answer(&compressed, Some("0")), "did not take the request: gRPC status 13"));
    assert!(is_unusable(&answer(b"hello world", Some("0")), "did not take the request: gRPC status 13"));
    // A flag byte other than 0 or 1 is refused as soon as it comes, even in a frame that never
    // completes, after a whole message.
    for tail in [&[2u8][..], &[0x80], &[2, 0, 0, 0]] {
        let body = [framed.as_slice(), tail].concat();
        assert!(is_unusable(&answer(&body, Some("0")), "did not take the request: gRPC status 13"), "{tail:?}");
        assert!(is_unusable(&answer(&body, Some("14")), "did not take the request: gRPC status 13"), "{tail:?}");
    }
    // Bytes that are no RateLimitResponse.
    assert!(is_unusable(&answer(&grpc::frame(&[0xff]), Some("0")), "unreadable"));
    // No HTTP status; a reset stream, before or after the message (Envoy: 13 INTERNAL).
    assert!(is_unusable(&read(&[Headers(None, None, false)]), "no HTTP status"));
    assert!(is_unusable(&read(&[Reset]), "gRPC status 13"));
    let reset_after = [Headers(Some("200"), None, false), Data(&framed, false), Reset];
    assert!(is_unusable(&read(&reset_after), "gRPC status 13"));
}

#[test]
fn a_message_over_the_limit_is_refused_only_when_it_is_the_answer() {
    let framed = grpc::frame(&OK_MESSAGE);
    let ok = decoded(proto::CODE_OK);
    // The last message over the limit: refused. At the limit: read (an empty RateLimitResponse
    // padded with zero bytes is no valid message, so "unreadable", not "exceeds").
    assert!(is_unusable(&answer(&grpc::frame(&vec![0; MAX_ANSWER_BYTES + 1]), Some("0")), "exceeds"));
    assert!(is_unusable(&answer(&grpc::frame(&vec![0; MAX_ANSWER_BYTES]), Some("0")), "unreadable"));
    // Over the limit, then a message: the message (the large one is counted, not kept).
    let then_ok = [grpc::frame(&vec![0; 70_000]), framed.clone()].concat();
    assert_eq!(answer(&then_ok, Some("0")), ok);
    // The same in 1000-byte pieces.
    let mut events = vec![Headers(Some("200"), None, false)];
    events.extend(then_ok.chunks(1000).map(|c| Data(c, false)));
    events.push(Trailers(Some("0")));
    assert_eq!(read(&events), ok);
    // A message, then a frame header announcing 4 GiB that never completes: the message.
    let announced = [framed.as_slice(), &[0, 0xff, 0xff, 0xff, 0xff], &[7; 100]].concat();
    assert_eq!(answer(&announced, Some("0")), ok);
    // A compressed message over the limit: refused once complete, as a compressed one.
    let mut compressed = grpc::frame(&vec![0; 70_000]);
    compressed[0] = 1;
    assert!(is_unusable(&answer(&compressed, Some("0")), "did not take the request: gRPC status 13"));
    // Unfinished, it is never read: the trailers decide.
    assert!(is_outage(&answer(&compressed[..1000], Some("14"))));
}

#[test]
fn grpc_status_values_are_read_as_envoy_reads_them() {
    let framed = grpc::frame(&OK_MESSAGE);
    let ok = decoded(proto::CODE_OK);
    // ASCII whitespace around the number, and a leading +.
    for g in [" 0", "0\t", "\t0 ", "+0", "00"] {
        assert_eq!(answer(&framed, Some(g)), ok, "{g:?}");
    }
    for g in [" 14", "14 ", "+14", "\x0b14"] {
        assert!(is_outage(&answer(&framed, Some(g))), "{g:?}");
    }
    assert!(is_outage(&trailers_only("200", " 4")));
    assert!(is_outage(&trailers_only("503", "14 ")));
    // Over 16, no number, a negative number, a list: Envoy's InvalidCode (-1).
    for g in ["17", "4294967310", "x", "-0", "0,13", "1 4", " "] {
        assert!(is_unusable(&answer(&framed, Some(g)), "gRPC status 4294967295"), "{g:?}");
    }
    // An empty value is no status: UNKNOWN.
    assert!(is_unusable(&answer(&framed, Some("")), "gRPC status 2"));
}

#[test]
fn the_first_event_that_ends_the_call_decides() {
    let framed = grpc::frame(&OK_MESSAGE);
    let events = [Headers(Some("200"), Some("14"), true), Data(&framed, false), Trailers(Some("0"))];
    assert!(matches!(feed(&events), Some((Answer::Unavailable(_), 1))));
    // After the answer is given, later events give nothing more.
    let mut r = AnswerReader::default();
    r.trailers(Some(b"14"));
    assert!(r.take().is_some());
    r.data(&framed, false);
    r.trailers(Some(b"0"));
    r.reset();
    assert!(r.take().is_none());
    // Nothing has ended the call yet: no answer.
    assert_eq!(feed(&[Headers(Some("200"), None, false), Data(&framed, false)]), None);
}
