//! `SseStream`: tool lists filtered and ids sealed event by event, across any chunking.

use super::*;
use crate::response::toolslist::filter_sse;
use crate::response::toolslist::tests::{hide, id};

#[test]
fn sse_unterminated_last_event_and_bom_are_filtered() {
    let stream = "\u{feff}data: {\"id\":3,\"result\":{\"tools\":[{\"name\":\"delete_vm\"},{\"name\":\"a\"}]}}\r";
    let (out, removed) = filter_sse(stream.as_bytes(), &id("3"), &hide).unwrap();
    assert_eq!(removed, 1);
    assert_eq!(
        std::str::from_utf8(&out).unwrap(),
        "\u{feff}data: {\"id\":3,\"result\":{\"tools\":[{\"name\":\"a\"}]}}\r"
    );
}

#[test]
fn sse_keeps_framing_ids_and_other_events() {
    let stream = concat!(
        ": keep-alive comment\r\n\r\n",
        "event: message\r\nid: ev-1\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\r\n\r\n",
        "event: message\r\nid: ev-2\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"L1\",\r\ndata: \"result\":{\"tools\":[{\"name\":\"delete_vm\"},{\"name\":\"list_vms\"}]}}\r\n\r\n",
    );
    let (out, removed) = filter_sse(stream.as_bytes(), &id("\"L1\""), &hide).unwrap();
    assert_eq!(removed, 1);
    assert_eq!(
        std::str::from_utf8(&out).unwrap(),
        concat!(
            ": keep-alive comment\r\n\r\n",
            "event: message\r\nid: ev-1\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progress\":1}}\r\n\r\n",
            "event: message\r\nid: ev-2\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"L1\",\"result\":{\"tools\":[{\"name\":\"list_vms\"}]}}\r\n\r\n",
        )
    );
}

#[test]
fn streams_are_filtered_event_by_event_across_any_chunking() {
    let stream = concat!(
        "\u{feff}event: message\r\nid: 1\r\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/x\"}\r\n\r\n",
        "data: {\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"tools\":[{\"name\":\"delete_vm\"},{\"name\":\"é\"}]}}\r\n\r\n",
        ": comment\n\n",
    );
    let (whole, removed) = filter_sse(stream.as_bytes(), &[], &hide).unwrap();
    assert_eq!(removed, 1);
    assert!(!std::str::from_utf8(&whole).unwrap().contains("delete_vm"));
    // Every split point, including inside CRLF pairs and multi-byte characters, gives the same bytes.
    let bytes = stream.as_bytes();
    for cut in 0..bytes.len() {
        let mut s = SseStream::new(1 << 20);
        let (mut out, mut n) = s.push(&bytes[..cut], false, &[], &hide).unwrap();
        let (more, m) = s.push(&bytes[cut..], true, &[], &hide).unwrap();
        out.extend(more);
        n += m;
        assert_eq!((out.as_slice(), n), (whole.as_slice(), 1), "cut at {cut}");
    }
}

#[test]
fn streams_fed_byte_by_byte_give_the_whole_streams_bytes() {
    let stream = concat!(
        "\u{feff}: c\r\n\r\nevent: message\rdata: {\"id\":9,\"result\":{\"tools\":[{\"name\":\"delete_vm\"}]}}\r\r",
        "data: {\"id\":8,\"result\":{\"tools\":[{\"name\":\"é\"},{\"name\":\"delete_x\"}]}}\n\n",
        "data: {\"jsonrpc\":\"2.0\",\r\ndata: \"method\":\"x\"}\r\n\r\nretry: 5",
    );
    let (whole, n) = filter_sse(stream.as_bytes(), &[], &hide).unwrap();
    assert_eq!(n, 2);
    for step in [1, 2, 3, 7] {
        let mut s = SseStream::new(1 << 20);
        let (mut out, mut removed) = (Vec::new(), 0);
        let chunks: Vec<&[u8]> = stream.as_bytes().chunks(step).collect();
        for (i, chunk) in chunks.iter().enumerate() {
            let last = i + 1 == chunks.len();
            let (more, m) = s.push(chunk, last, &[], &hide).unwrap();
            out.extend(more);
            removed += m;
            // Every complete event went out at once: only the bytes after the last blank line wait.
            let fed = &stream.as_bytes()[..((i + 1) * step).min(stream.len())];
            let held = if last { &[][..] } else { &fed[last_event_end(fed, 0).0..] };
            assert_eq!(s.tail, held, "chunks of {step}, after {}", fed.len());
        }
        assert_eq!((out.as_slice(), removed), (whole.as_slice(), 2), "chunks of {step}");
    }
}

#[test]
fn complete_events_pass_before_the_stream_ends() {
    let mut s = SseStream::new(64);
    let (out, _) = s
        .push(b"data: {\"id\":1,\"result\":{\"tools\":[{\"name\":\"delete_x\"}]}}\n\ndata: {", false, &[], &hide)
        .unwrap();
    assert_eq!(std::str::from_utf8(&out).unwrap(), "data: {\"id\":1,\"result\":{\"tools\":[]}}\n\n");
    assert!(matches!(s.push(&[b'x'; 100], false, &[], &hide), Err(ListError::Unreadable(_))));
}

#[test]
fn sse_lenient_data_fields_are_refused() {
    let list = "{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"tools\":[{\"name\":\"delete_vm\"}]}}";
    for field in ["Data", " data", "data ", "DATA", "\u{feff}data", "\u{feff}\u{feff}data", "d\u{200b}ata", "\tdata"] {
        let stream = format!("event: message\n{field}: {list}\n\n");
        assert_eq!(
            filter_sse(stream.as_bytes(), &id("3"), &hide),
            Err(ListError::Unreadable("an SSE field name that lenient clients read as data".into())),
            "{field:?}"
        );
    }
    // A second BOM at the start of the stream is part of the first field name.
    let stream = format!("\u{feff}\u{feff}data: {list}\n\n");
    assert!(filter_sse(stream.as_bytes(), &id("3"), &hide).is_err());
    // Other fields pass untouched.
    let ok = "event: message\nid: 1\nretry: 5\ndatum: x\ndata: {\"id\":9,\"result\":{}}\n\n";
    assert_eq!(filter_sse(ok.as_bytes(), &id("3"), &hide).unwrap(), (ok.as_bytes().to_vec(), 0));
}

#[test]
fn sse_with_lf_and_unparsable_data() {
    let stream = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"tools\":[]}}\n\n";
    assert_eq!(filter_sse(stream.as_bytes(), &id("3"), &hide).unwrap(), (stream.as_bytes().to_vec(), 0));
    let bad = "data: {not json\n\n";
    assert!(matches!(filter_sse(bad.as_bytes(), &id("3"), &hide), Err(ListError::Unreadable(_))));
    assert!(matches!(filter_sse(b"\xff\n\n", &id("3"), &hide), Err(ListError::Unreadable(_))));
}

fn stream_ids() -> StreamIds {
    let keys = crate::identity::session::SessionKeys { current: vec![b'k'; 32], previous: None };
    StreamIds::new(keys, [5; 32], b"up-session".to_vec())
}

/// The whole stream through `s` in chunks cut at `cuts`, with its ids sealed.
fn through(mut s: SseStream, stream: &[u8], cuts: &[usize]) -> (Vec<u8>, usize) {
    let ids = stream_ids();
    let (mut out, mut removed, mut from) = (Vec::new(), 0, 0);
    for (i, &to) in cuts.iter().chain([&stream.len()]).enumerate() {
        let last = i == cuts.len();
        let (more, n) = s.push_sealed(&stream[from..to], last, &[], &hide, Some(&ids)).unwrap();
        out.extend(more);
        removed += n;
        from = to;
    }
    (out, removed)
}

#[test]
fn ids_are_sealed_across_any_chunking_with_and_without_tool_lists() {
    let stream = concat!(
        "\u{feff}event: endpoint\r\ndata: /messages/?session_id=0a1b\r\n\r\n",
        "id: ev-1\r\ndata: {\"jsonrpc\":\"2.0\",\"id\":9,\"result\":{\"tools\":[{\"name\":\"delete_vm\"}]}}\r\n\r\n",
        "id:\n: reset\n\nid: ev-2\rdata: \r\r",
    )
    .as_bytes();
    let ids = stream_ids();
    let mut want = Vec::new();
    ids.seal_events(&mut want, stream, true);
    let want = String::from_utf8(want).unwrap();
    assert!(want.contains("session_id=l1.") && !want.contains("ev-1") && want.contains("id:\n: reset"), "{want}");
    let filtered = want.replace(r#"{"name":"delete_vm"}"#, "");
    for cut in 0..stream.len() {
        assert_eq!(through(SseStream::ids_only(1 << 20), stream, &[cut]), (want.clone().into_bytes(), 0), "{cut}");
        assert_eq!(through(SseStream::new(1 << 20), stream, &[cut]), (filtered.clone().into_bytes(), 1), "{cut}");
    }
    // Without ids to seal, an ids-only stream is the stream itself, byte for byte.
    let mut s = SseStream::ids_only(1 << 20);
    assert_eq!(s.push(stream, true, &[], &hide).unwrap(), (stream.to_vec(), 0));
}

#[test]
fn ids_only_streams_read_nothing_else_and_pass_large_events_unsealed() {
    // Data that is no JSON, or no UTF-8, is not read without tool lists to filter.
    let odd = b"data: {not json\n\ndata: \xff\xfe\nid: 1\n\n";
    let (out, _) = through(SseStream::ids_only(64), odd, &[]);
    assert!(out.starts_with(b"data: {not json\n\ndata: \xff\xfe\nid: e1."), "{}", String::from_utf8_lossy(&out));
    // An incomplete event over max_pending passes as it arrives, its id unsealed, up to its blank
    // line (here CR CRLF: a line's CR, then a blank CRLF line, split anywhere); the events after it
    // are sealed again.
    let big = format!("id: big\ndata: {}\r\r\nid: next\r\n\r\nid: last\n\n", "x".repeat(100));
    let ids = stream_ids();
    let mut tail = Vec::new();
    ids.seal_events(&mut tail, b"\nid: next\r\n\r\nid: last\n\n", false);
    let want = [format!("id: big\ndata: {}\r\r", "x".repeat(100)).into_bytes(), tail].concat();
    for cut in [65, 100, 114, 115, 116] {
        for second in [cut, cut + 1, cut + 2, 117, 118, 130] {
            let cuts = if second > cut { vec![cut, second] } else { vec![cut] };
            let (out, _) = through(SseStream::ids_only(64), big.as_bytes(), &cuts);
            assert_eq!(String::from_utf8(out).unwrap(), String::from_utf8(want.clone()).unwrap(), "{cuts:?}");
        }
    }
    // With tool lists to filter, the same event is refused (the list inside cannot be checked).
    let mut s = SseStream::new(64);
    assert!(matches!(s.push(&big.as_bytes()[..100], false, &[], &hide), Err(ListError::Unreadable(_))));
}
