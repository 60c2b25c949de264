//! `subscriptions/listen` (MCP 2026-07-28 "Subscriptions"): what each member of its
//! `params.notifications` filter (`SubscriptionFilter` in the 2026-07-28 schema) asks the server
//! to send, and the client-to-server method it stands for.
//!
//! The listen request replaces `resources/subscribe` and the unsolicited list-changed
//! notifications of earlier versions, so a policy that denies those methods must not be
//! bypassed by asking for the same notifications on a listen stream: each kind asked for is
//! judged as the method it stands for ([`SUBSCRIPTION_KINDS`]), and a member the table does not
//! know is refused, since the filter cannot tell what it would open (the Python SDK's server
//! keeps unknown members, for extensions, and reads `resource_subscriptions` like
//! `resourceSubscriptions`).

use crate::wire::json::Json;

/// The value a kind takes in the filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KindValue {
    /// A boolean: `true` asks for the notification.
    Flag,
    /// An array of resource URIs (strings): a non-empty one asks for the notification.
    UriList,
}

/// One member of the `subscriptions/listen` filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SubscriptionKind {
    /// Its name in `params.notifications`.
    pub member: &'static str,
    pub value: KindValue,
    /// The notification the server then sends on the stream.
    pub notification: &'static str,
    /// The method it stands for: the listen request is judged as this method for this kind.
    pub method: &'static str,
}

const fn kind(
    member: &'static str,
    value: KindValue,
    notification: &'static str,
    method: &'static str,
) -> SubscriptionKind {
    SubscriptionKind { member, value, notification, method }
}

/// Every kind of the 2026-07-28 `SubscriptionFilter`. The list-changed flags stand for the list
/// method whose result changed (a grant that may not list prompts learns nothing from their
/// changes either); `resourceSubscriptions` stands for `resources/subscribe`, the method it
/// replaces ("Replaces the former `resources/subscribe` RPC").
pub const SUBSCRIPTION_KINDS: [SubscriptionKind; 4] = [
    kind("toolsListChanged", KindValue::Flag, "notifications/tools/list_changed", "tools/list"),
    kind("promptsListChanged", KindValue::Flag, "notifications/prompts/list_changed", "prompts/list"),
    kind("resourcesListChanged", KindValue::Flag, "notifications/resources/list_changed", "resources/list"),
    kind("resourceSubscriptions", KindValue::UriList, "notifications/resources/updated", "resources/subscribe"),
];

/// The longest unknown member name kept for the refusal's reason (bytes, cut at a character).
const MAX_UNKNOWN_NAME: usize = 64;

/// What one `subscriptions/listen` request asks for: the kinds it asks for, and the first member
/// of its filter that is none of [`SUBSCRIPTION_KINDS`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Listen {
    /// Bit `i` set: it asks for `SUBSCRIPTION_KINDS[i]`.
    asked: u8,
    unknown: Option<Box<str>>,
}

impl Listen {
    /// What the filter `notifications` (the value of `params.notifications`) asks for, or why it
    /// cannot be read. A flag must be a boolean and `resourceSubscriptions` an array of strings:
    /// a lax decoder (pydantic) reads `"true"` or `1` as `true`, so anything else is refused rather
    /// than guessed. `null` asks for nothing, as it does for the Python SDK's server; so do `false`
    /// and `[]`. Members the table does not know are kept for the policy to refuse.
    pub fn from_filter(notifications: &Json) -> Result<Listen, &'static str> {
        let Json::Object(members) = notifications else {
            return Err("\"params.notifications\" must be an object");
        };
        let mut listen = Listen::default();
        for (member, value) in members {
            let Some(i) = SUBSCRIPTION_KINDS.iter().position(|k| k.member == member) else {
                listen.note_unknown(member);
                continue;
            };
            let asks = match (SUBSCRIPTION_KINDS.get(i).map(|k| k.value), value) {
                (_, Json::Null) => false,
                (Some(KindValue::Flag), Json::Bool(b)) => *b,
                (Some(KindValue::UriList), Json::Array(uris)) if uris.iter().all(|u| matches!(u, Json::String(_))) => {
                    !uris.is_empty()
                }
                (Some(KindValue::UriList), _) => {
                    return Err("\"params.notifications.resourceSubscriptions\" must be an array of URI strings")
                }
                _ => return Err("a list-changed member of \"params.notifications\" must be true or false"),
            };
            if asks {
                listen.asked |= 1 << i;
            }
        }
        Ok(listen)
    }

    /// The kinds asked for, in table order.
    pub fn kinds(&self) -> impl Iterator<Item = &'static SubscriptionKind> + '_ {
        SUBSCRIPTION_KINDS.iter().enumerate().filter(|(i, _)| self.asked & (1 << i) != 0).map(|(_, k)| k)
    }

    /// The first member of the filter the table does not know (at most 64 bytes of its name).
    pub fn unknown(&self) -> Option<&str> {
        self.unknown.as_deref()
    }

    /// Note a member the table does not know; the first one is kept.
    fn note_unknown(&mut self, member: &str) {
        if self.unknown.is_none() {
            let mut end = member.len().min(MAX_UNKNOWN_NAME);
            while !member.is_char_boundary(end) {
                end -= 1;
            }
            self.unknown = Some(member.get(..end).unwrap_or_default().into());
        }
    }
}

/// The kind named `member`, if the table knows it (case-sensitive, as JSON member names are).
pub fn subscription_kind(member: &str) -> Option<&'static SubscriptionKind> {
    SUBSCRIPTION_KINDS.iter().find(|k| k.member == member)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_stands_for_a_method_of_the_table() {
        for k in &SUBSCRIPTION_KINDS {
            let row = super::super::row_of(k.method).expect(k.method);
            assert_eq!(row.kind, super::super::Kind::Request, "{}", k.member);
            assert!(k.notification.starts_with("notifications/"), "{}", k.member);
            assert_eq!(subscription_kind(k.member), Some(k));
        }
        assert_eq!(subscription_kind("ResourceSubscriptions"), None);
        assert_eq!(subscription_kind("resource_subscriptions"), None);
    }

    fn listen(filter: &str) -> Result<Listen, &'static str> {
        Listen::from_filter(&crate::wire::json::parse(filter.as_bytes()).unwrap())
    }

    #[test]
    fn kinds_come_back_in_table_order_and_the_first_unknown_name_is_kept_short() {
        let l =
            listen(r#"{"resourceSubscriptions":["file:///a"],"taskIds":[],"promptsListChanged":true,"x":1}"#).unwrap();
        let members: Vec<&str> = l.kinds().map(|k| k.member).collect();
        assert_eq!(members, ["promptsListChanged", "resourceSubscriptions"]);
        assert_eq!(l.unknown(), Some("taskIds"));
        let long = listen(&format!(r#"{{"{}":true}}"#, "é".repeat(40))).unwrap();
        assert_eq!(long.unknown(), Some("é".repeat(32).as_str()));
        assert_eq!(listen("{}"), Ok(Listen::default()));
        assert_eq!(listen("[]"), Err("\"params.notifications\" must be an object"));
    }
}
