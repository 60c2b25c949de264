//! The verified token's payload, as Envoy's `jwt_authn` forwards it (`forward_payload_header`):
//! the JWT claims set as base64url without padding (RFC 7515 §2), read with the strict JSON parser.
//!
//! `jwt_authn` writes this header only after it verified the token's signature, and overwrites any
//! copy the client sent; the recipe also strips it at the edge. A header present more than once, not
//! canonical base64url, not strict JSON or not an object is no identity at all: nothing is read from
//! it, so no policy can be attached and no counter or approval keyed on it.

use crate::wire::b64::{self, Alphabet};
use crate::wire::json::{self, Json};

/// Longest payload header read, in bytes: a claims set is a few hundred bytes; the cap bounds the
/// parse.
pub const MAX_PAYLOAD_BYTES: usize = 16 * 1024;
/// Most actors read from a nested `act` claim (RFC 8693 §4.1).
pub const MAX_ACTORS: usize = 8;

/// Why a payload header yields no identity (`data.reason` of the 401).
pub const PAYLOAD_MISSING: &str = "no verified token: the token payload header is missing";
pub const PAYLOAD_REPEATED: &str = "the token payload header was sent more than once";
pub const PAYLOAD_NOT_BASE64URL: &str = "the token payload header is not base64url without padding";
pub const PAYLOAD_NOT_JSON: &str = "the token payload is not a strict JSON object";
pub const GRANT_CLAIM_MISSING: &str =
    "the verified token has no grant claim (gateway.identity.grant_claim) as a non-empty string";

/// The claims of a verified token: a JSON object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Claims(Json);

impl Claims {
    /// Read a payload header value; `Err` names why it is no identity.
    pub fn read(value: &[u8]) -> Result<Claims, &'static str> {
        if value.len() > MAX_PAYLOAD_BYTES {
            return Err(PAYLOAD_NOT_JSON);
        }
        let bytes = b64::decode(value, Alphabet::UrlNoPad).ok_or(PAYLOAD_NOT_BASE64URL)?;
        Claims::from_json(json::parse(&bytes).map_err(|_| PAYLOAD_NOT_JSON)?)
    }

    /// Claims from a parsed JSON value; only an object is a claims set.
    pub fn from_json(v: Json) -> Result<Claims, &'static str> {
        match v {
            Json::Object(_) => Ok(Claims(v)),
            _ => Err(PAYLOAD_NOT_JSON),
        }
    }

    /// The claim `name`, if present.
    pub fn get(&self, name: &str) -> Option<&Json> {
        self.0.get(name)
    }

    /// The claim `name` as a non-empty string.
    pub fn text(&self, name: &str) -> Option<&str> {
        self.get(name).and_then(Json::as_str).filter(|s| !s.is_empty())
    }

    /// Does claim `name` equal the string `value`?
    pub fn equals(&self, name: &str, value: &str) -> bool {
        Claims::value_equals(self.get(name), value)
    }

    /// Is the claim value `v` (looked up already) the string `value`?
    pub fn value_equals(v: Option<&Json>, value: &str) -> bool {
        v.and_then(Json::as_str) == Some(value)
    }

    /// Does claim `name` include `value`: a member of an array of strings, or one entry of a
    /// space-separated string (`scope`, RFC 8693 §4.2)?
    pub fn includes(&self, name: &str, value: &str) -> bool {
        Claims::value_includes(self.get(name), value)
    }

    /// Does the claim value `v` (looked up already) include `value`, as [`Claims::includes`]?
    pub fn value_includes(v: Option<&Json>, value: &str) -> bool {
        match v {
            Some(Json::Array(items)) => items.iter().any(|i| i.as_str() == Some(value)),
            Some(Json::String(s)) => s.split(' ').any(|e| e == value),
            _ => false,
        }
    }

    /// Who the token speaks for and who acts: `sub`, `client_id` (else `azp`), and the actor chain
    /// of nested `act` claims, outermost (the current actor) first.
    pub fn provenance(&self) -> Provenance {
        let mut act = Vec::new();
        let mut at = self.get("act");
        while let Some(a @ Json::Object(_)) = at {
            if act.len() == MAX_ACTORS {
                break;
            }
            act.push(a.get("sub").and_then(Json::as_str).unwrap_or("").to_owned());
            at = a.get("act");
        }
        Provenance {
            policy: None,
            subject: self.text("sub").map(str::to_owned),
            client_id: self.text("client_id").or_else(|| self.text("azp")).map(str::to_owned),
            act,
        }
    }
}

/// Who made a call, from the verified token only: recorded with every decision.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Provenance {
    /// The attached policy's name, under a policy set.
    pub policy: Option<String>,
    pub subject: Option<String>,
    pub client_id: Option<String>,
    /// The RFC 8693 actor chain: each actor's `sub`, the current actor first.
    pub act: Vec<String>,
}
