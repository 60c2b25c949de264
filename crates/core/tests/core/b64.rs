//! src/wire/b64.rs against the `base64` crate: the same encodings, and decoding only canonical text.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, clippy::indexing_slicing)]

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use mcp_policy_core::wire::b64::{self, Alphabet};
use proptest::prelude::*;

fn enc(data: &[u8], a: Alphabet) -> String {
    let mut s = String::new();
    b64::encode_into(&mut s, data, a);
    s
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn encodes_like_the_base64_crate_and_round_trips(data in proptest::collection::vec(any::<u8>(), 0..80)) {
        prop_assert_eq!(enc(&data, Alphabet::Standard), STANDARD.encode(&data));
        prop_assert_eq!(enc(&data, Alphabet::UrlNoPad), URL_SAFE_NO_PAD.encode(&data));
        prop_assert_eq!(b64::decode(enc(&data, Alphabet::Standard).as_bytes(), Alphabet::Standard), Some(data.clone()));
        prop_assert_eq!(b64::decode(enc(&data, Alphabet::UrlNoPad).as_bytes(), Alphabet::UrlNoPad), Some(data));
    }

    /// Any text: accepted exactly when the base64 crate (canonical, strict padding) accepts it, with the same bytes.
    /// Up to 40 characters: several whole groups of four, then any tail.
    #[test]
    fn decodes_exactly_what_the_base64_crate_decodes(text in "[A-Za-z0-9+/=_-]{0,40}") {
        prop_assert_eq!(b64::decode(text.as_bytes(), Alphabet::Standard), STANDARD.decode(&text).ok());
        prop_assert_eq!(b64::decode(text.as_bytes(), Alphabet::UrlNoPad), URL_SAFE_NO_PAD.decode(&text).ok());
    }
}

/// Every tail of two and three characters after whole groups, with every value of its last
/// character: canonical exactly when the base64 crate says so.
#[test]
fn every_last_character_of_a_tail() {
    let digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    for head in ["", "QUJD", "QUJDREVG"] {
        for tail in ["Q", "QU"] {
            for last in digits.chars() {
                let text = format!("{head}{tail}{last}");
                assert_eq!(
                    b64::decode(text.as_bytes(), Alphabet::UrlNoPad),
                    URL_SAFE_NO_PAD.decode(&text).ok(),
                    "{text}"
                );
            }
        }
    }
}

#[test]
fn known_values() {
    assert_eq!(b64::decode(b"ZGVsZXRlX3Zt", Alphabet::Standard).as_deref(), Some(&b"delete_vm"[..]));
    assert_eq!(b64::decode(b"w6l0w6k=", Alphabet::Standard).as_deref(), Some("été".as_bytes()));
    for bad in [&b"w6l0w6l="[..], b"w6l0w6k", b"w6l0w6k==", b"====", b"Zg=", b"Z===", b"****"] {
        assert_eq!(b64::decode(bad, Alphabet::Standard), None, "{}", String::from_utf8_lossy(bad));
    }
}
