//! The request's grant: read from the credential header, checked against `gateway.grants`, or
//! refused with 401 `no_grant`.

use super::{refuse, HeaderValue, Outcome, RequestHead};
use crate::identity::grant::{self, Grant};
use crate::outcome::refusal::Refusal;
use crate::policy::{GrantSource, Policy};
use crate::wire::mcp::Id;

const NO_CREDENTIAL: &str = "a grant is required: send Authorization: Bearer <token>";
const NOT_REGISTERED: &str = "the credential is not a registered grant";
/// `gateway.grant_header` present more than once: `jwt_authn`'s `claim_to_headers` appends the verified
/// claim after any copy the client sent, so neither copy can be trusted.
const GRANT_HEADER_REPEATED: &str = "the grant header was sent more than once";
const GRANT_HEADER_EMPTY: &str = "the grant header is empty";

pub(super) fn no_grant(policy: &Policy, id: &Id, reason: &'static str) -> Outcome {
    let challenge = crate::identity::challenge::bearer(policy.gateway.resource_metadata_url.as_deref());
    refuse(Refusal::NoGrant { reason, challenge }, id)
}

/// The request's grant, or why there is none. Read from the credential once per request (`head`
/// keeps it); `head` must come from `RequestHead::from_headers` with the same `policy`.
pub(super) fn grant_of(policy: &Policy, head: &RequestHead) -> Result<Grant, &'static str> {
    head.grant.get_or_init(|| read_grant(policy, head)).clone()
}

fn read_grant(policy: &Policy, head: &RequestHead) -> Result<Grant, &'static str> {
    let v = match (&head.credential, &policy.gateway.grant) {
        (HeaderValue::One(v), _) => v,
        (HeaderValue::Many, GrantSource::Header(_)) => return Err(GRANT_HEADER_REPEATED),
        _ => return Err(NO_CREDENTIAL),
    };
    let mut g = match policy.gateway.grant {
        GrantSource::Bearer => grant::from_authorization(v).ok_or(NO_CREDENTIAL),
        GrantSource::Header(_) => grant::from_trusted_header(v).ok_or(GRANT_HEADER_EMPTY),
    }?;
    if !policy.gateway.grants.is_empty() {
        g.registered = Some(policy.gateway.grants.get(&g.id).ok_or(NOT_REGISTERED)?.clone());
    }
    Ok(g)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_credential_is_read_once_per_request() {
        let p = crate::config::load(br#"{"version":"1"}"#).unwrap();
        let h = RequestHead::from_headers(&p, [("authorization", &b"Bearer abc"[..])]);
        assert_eq!(h.grant.get(), None);
        let g = grant_of(&p, &h);
        assert_eq!(g.as_ref().map(Grant::label), Ok("sha256:ba7816bf8f01".to_owned()));
        assert_eq!(h.grant.get(), Some(&g));
        assert_eq!(grant_of(&p, &h), g);
        let none = RequestHead::from_headers(&p, [("x-other", &b"1"[..])]);
        assert_eq!(grant_of(&p, &none), Err(NO_CREDENTIAL));
        assert_eq!(none.grant.get(), Some(&Err(NO_CREDENTIAL)));
    }
}
