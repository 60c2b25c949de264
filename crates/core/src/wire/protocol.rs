//! MCP protocol versions and what each one allows: the per-version method table, as data.
//!
//! Sources: MCP specification 2025-03-26, 2025-06-18, 2025-11-25 and 2026-07-28 ("Base Protocol",
//! "Lifecycle", "Transports / Streamable HTTP", "Versioning"); the method registry of the official
//! Python SDK 2.3 (`mcp_types/methods.py`). One table ([`METHODS`]) says, for every client-to-server
//! method, in which versions it exists, whether it is a request or a notification and how the
//! filter treats it; [`RULES`] says what each version forbids; [`SUBSCRIPTION_KINDS`] says which
//! method each kind of a `subscriptions/listen` request stands for ("Subscriptions", 2026-07-28).
//! The README's protocol section is rendered from the first two ([`render_markdown`]), its table of
//! subscription kinds from the third ([`render_subscription_kinds`]), and tests keep them equal.

mod render;
mod subscriptions;

pub use render::{render_markdown, render_subscription_kinds};
pub use subscriptions::{subscription_kind, KindValue, Listen, SubscriptionKind, SUBSCRIPTION_KINDS};

/// An MCP protocol version the filter knows (the `MCP-Protocol-Version` header value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Version {
    V2025_03_26,
    V2025_06_18,
    V2025_11_25,
    V2026_07_28,
}

impl Version {
    /// Every known version, oldest first; also the default of `gateway.protocol_versions`.
    pub const ALL: [Version; 4] =
        [Version::V2025_03_26, Version::V2025_06_18, Version::V2025_11_25, Version::V2026_07_28];

    /// The version a request without `MCP-Protocol-Version` (and without a `params._meta` version) is
    /// read by: MCP 2025-06-18 "Transports / Protocol Version Header" — "the server SHOULD assume
    /// protocol version 2025-03-26".
    pub const ASSUMED: Version = Version::V2025_03_26;

    /// The wire name, e.g. `"2026-07-28"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Version::V2025_03_26 => "2025-03-26",
            Version::V2025_06_18 => "2025-06-18",
            Version::V2025_11_25 => "2025-11-25",
            Version::V2026_07_28 => "2026-07-28",
        }
    }

    /// The version named exactly `s` (case-sensitive, no whitespace), if the filter knows it.
    pub fn parse(s: &str) -> Option<Version> {
        Version::ALL.into_iter().find(|v| v.as_str() == s)
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }

    /// What this version forbids and requires.
    pub fn rules(self) -> &'static VersionRules {
        match self {
            Version::V2025_03_26 => &RULES[0],
            Version::V2025_06_18 => &RULES[1],
            Version::V2025_11_25 => &RULES[2],
            Version::V2026_07_28 => &RULES[3],
        }
    }
}

/// A set of versions, e.g. the ones a method exists in or `gateway.protocol_versions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Versions(u8);

impl Versions {
    pub const ALL: Versions = Versions(0b1111);
    const V03: u8 = 1;
    const V06: u8 = 2;
    const V11: u8 = 4;
    const V26: u8 = 8;
    const LEGACY: Versions = Versions(Self::V03 | Self::V06 | Self::V11);
    const MODERN: Versions = Versions(Self::V26);
    const V11_ONLY: Versions = Versions(Self::V11);

    pub fn contains(self, v: Version) -> bool {
        self.0 & v.bit() != 0
    }

    pub fn insert(&mut self, v: Version) {
        self.0 |= v.bit();
    }

    /// The members, oldest first.
    pub fn iter(self) -> impl Iterator<Item = Version> {
        Version::ALL.into_iter().filter(move |v| self.contains(*v))
    }
}

/// How the filter treats a method that exists in the request's version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handling {
    /// Lifecycle, discovery and listing: forwarded without a policy decision (grant still required).
    Pass,
    /// `subscriptions/listen`: each subscription kind it asks for is judged as the method it stands
    /// for ([`SUBSCRIPTION_KINDS`]); every SSE event of its response stream is filtered like the GET
    /// stream (hidden tools never appear).
    Stream,
    /// Judged by tool name: `hide`, `tools`, `default`, conditions, limits, approval.
    Tool,
    /// Judged by `gateway.methods[method]`, else `default`.
    Method,
}

/// Request (has an id, expects a response) or notification (no id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Request,
    Notification,
}

/// One row of the method table: a client-to-server method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MethodRow {
    pub name: &'static str,
    pub kind: Kind,
    pub handling: Handling,
    /// The versions it exists in.
    pub versions: Versions,
    /// Its `params` member mirrored by the `Mcp-Name` header (2026-07-28), if any.
    pub name_param: Option<&'static str>,
}

const fn row(
    name: &'static str,
    kind: Kind,
    handling: Handling,
    versions: Versions,
    name_param: Option<&'static str>,
) -> MethodRow {
    MethodRow { name, kind, handling, versions, name_param }
}

use Handling::{Method, Pass, Stream, Tool};
use Kind::{Notification, Request};

/// Every client-to-server method of every version the filter knows.
pub const METHODS: &[MethodRow] = &[
    row("initialize", Request, Pass, Versions::LEGACY, None),
    row("ping", Request, Pass, Versions::LEGACY, None),
    row("server/discover", Request, Pass, Versions::MODERN, None),
    row("tools/list", Request, Pass, Versions::ALL, None),
    row("tools/call", Request, Tool, Versions::ALL, Some("name")),
    row("subscriptions/listen", Request, Stream, Versions::MODERN, None),
    row("resources/list", Request, Method, Versions::ALL, None),
    row("resources/templates/list", Request, Method, Versions::ALL, None),
    row("resources/read", Request, Method, Versions::ALL, Some("uri")),
    row("resources/subscribe", Request, Method, Versions::LEGACY, None),
    row("resources/unsubscribe", Request, Method, Versions::LEGACY, None),
    row("prompts/list", Request, Method, Versions::ALL, None),
    row("prompts/get", Request, Method, Versions::ALL, Some("name")),
    row("completion/complete", Request, Method, Versions::ALL, None),
    row("logging/setLevel", Request, Method, Versions::LEGACY, None),
    row("tasks/get", Request, Method, Versions::V11_ONLY, None),
    row("tasks/list", Request, Method, Versions::V11_ONLY, None),
    row("tasks/result", Request, Method, Versions::V11_ONLY, None),
    row("tasks/cancel", Request, Method, Versions::V11_ONLY, None),
    row("notifications/initialized", Notification, Pass, Versions::LEGACY, None),
    row("notifications/cancelled", Notification, Pass, Versions::ALL, None),
    row("notifications/progress", Notification, Pass, Versions::LEGACY, None),
    row("notifications/roots/list_changed", Notification, Pass, Versions::LEGACY, None),
];

/// What a version forbids and requires on Streamable HTTP.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionRules {
    pub version: Version,
    /// A POST may carry a JSON array of messages (removed in 2025-06-18).
    pub batches: bool,
    /// `Mcp-Session-Id` exists (removed in 2026-07-28: no sessions).
    pub sessions: bool,
    /// A POST may carry JSON-RPC responses from the client (removed in 2026-07-28).
    pub client_responses: bool,
    /// `Mcp-Method` (and, for name-bearing methods, `Mcp-Name`) headers are required.
    pub method_headers: bool,
    /// Each request carries `params._meta["io.modelcontextprotocol/protocolVersion"]`, which must
    /// equal the `MCP-Protocol-Version` header.
    pub meta_version: bool,
    /// The HTTP status of the −32601 answer to a method the version does not define: 404 in
    /// 2026-07-28 (Streamable HTTP: "the server MUST respond with 404 Not Found and a JSON-RPC
    /// error with code −32601"); before, a JSON-RPC error is the body of an ordinary 200 reply.
    pub method_not_found_status: u16,
}

pub const RULES: [VersionRules; 4] = [
    VersionRules {
        version: Version::V2025_03_26,
        batches: true,
        sessions: true,
        client_responses: true,
        method_headers: false,
        meta_version: false,
        method_not_found_status: 200,
    },
    VersionRules {
        version: Version::V2025_06_18,
        batches: false,
        sessions: true,
        client_responses: true,
        method_headers: false,
        meta_version: false,
        method_not_found_status: 200,
    },
    VersionRules {
        version: Version::V2025_11_25,
        batches: false,
        sessions: true,
        client_responses: true,
        method_headers: false,
        meta_version: false,
        method_not_found_status: 200,
    },
    VersionRules {
        version: Version::V2026_07_28,
        batches: false,
        sessions: false,
        client_responses: false,
        method_headers: true,
        meta_version: true,
        method_not_found_status: 404,
    },
];

/// The `params._meta` key carrying a 2026-07-28 request's protocol version.
pub const META_VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";

/// The row of `name`, if the table knows it in any version.
pub fn row_of(name: &str) -> Option<&'static MethodRow> {
    METHODS.iter().find(|r| r.name == name)
}

/// The row of `name` if it exists in `version`.
pub fn method(version: Version, name: &str) -> Option<&'static MethodRow> {
    row_of(name).filter(|r| r.versions.contains(version))
}

/// Why a request's protocol version cannot be used. Each maps to one documented reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VersionError {
    /// The header is repeated, not UTF-8, or disagrees with `params._meta` (or is missing while
    /// `params._meta` names a version): HTTP 400, −32020 `header_mismatch`.
    Mismatch(&'static str),
    /// A version the filter does not know, or not in `gateway.protocol_versions`: HTTP 400,
    /// −32022 `unsupported_protocol_version`, `data.supported` lists the allowed versions.
    Unsupported(String),
    /// A 2026-07-28 request without a string `params._meta` version: HTTP 400, −32602.
    MissingMeta,
}

/// What the body's `params._meta` says about the version.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum MetaVersion {
    /// No `_meta`, or no version key in it.
    #[default]
    Absent,
    Str(String),
    /// `_meta` is not an object, or its version is not a string.
    Invalid,
}

/// The version a message is read by, from the `MCP-Protocol-Version` header (`None`: absent;
/// `Some(Err(()))`: repeated or not UTF-8) and the body's `params._meta` version (requests only).
///
/// - Header and `_meta` both present: they must be equal (else `Mismatch`).
/// - `_meta` without the header: `Mismatch` (2026-07-28 requires the header).
/// - Header 2026-07-28 on a request without a `_meta` version: `MissingMeta`.
/// - Neither: [`Version::ASSUMED`] (2025-03-26), as the specification says.
///
/// The version must be in `allowed` (`gateway.protocol_versions`), else `Unsupported`;
/// `initialize` (`exempt_assumed`) negotiates its version in the body and is exempt when the
/// header is absent.
pub fn detect(
    header: Option<Result<&str, ()>>,
    meta: &MetaVersion,
    is_request: bool,
    allowed: Versions,
    exempt_assumed: bool,
) -> Result<Version, VersionError> {
    let header = match header {
        None => None,
        Some(Err(())) => {
            return Err(VersionError::Mismatch("the MCP-Protocol-Version header is repeated or not UTF-8"))
        }
        Some(Ok(h)) => Some(h),
    };
    let name = match (header, meta) {
        (Some(h), MetaVersion::Str(m)) if h != m => {
            return Err(VersionError::Mismatch("MCP-Protocol-Version header does not match params._meta"))
        }
        (Some(_), MetaVersion::Invalid) | (None, MetaVersion::Invalid) => {
            return Err(VersionError::Mismatch("params._meta protocol version is not a string in an object"))
        }
        (None, MetaVersion::Str(_)) => {
            return Err(VersionError::Mismatch(
                "params._meta names a protocol version but MCP-Protocol-Version is missing",
            ))
        }
        (Some(h), _) => h,
        (None, MetaVersion::Absent) => {
            if exempt_assumed || allowed.contains(Version::ASSUMED) {
                return Ok(Version::ASSUMED);
            }
            return Err(VersionError::Unsupported(String::new()));
        }
    };
    let version = Version::parse(name).filter(|v| allowed.contains(*v));
    let Some(version) = version else { return Err(VersionError::Unsupported(name.to_owned())) };
    if version.rules().meta_version && is_request && *meta == MetaVersion::Absent {
        return Err(VersionError::MissingMeta);
    }
    Ok(version)
}

/// Decode an `Mcp-Name` (or other `Mcp-*`) header value: values of the form `=?base64?…?=` are
/// canonical standard base64 of UTF-8 (MCP SEP-2243; the Python SDK's `decode_header_value`);
/// anything else is taken verbatim. `None`: a malformed sentinel (bad or non-canonical base64,
/// not UTF-8), which never matches a body value.
pub fn decode_header_value(raw: &[u8]) -> Option<std::borrow::Cow<'_, str>> {
    let text = std::str::from_utf8(raw).ok();
    match raw.strip_prefix(b"=?base64?").and_then(|r| r.strip_suffix(b"?=")) {
        None => text.map(std::borrow::Cow::Borrowed),
        Some(payload) => {
            let bytes = crate::wire::b64::decode(payload, crate::wire::b64::Alphabet::Standard)?;
            String::from_utf8(bytes).ok().map(std::borrow::Cow::Owned)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_round_trip_and_order() {
        for v in Version::ALL {
            assert_eq!(Version::parse(v.as_str()), Some(v));
            assert_eq!(v.rules().version, v);
        }
        assert_eq!(Version::parse("2024-11-05"), None);
        assert_eq!(Version::parse(" 2025-06-18"), None);
        assert_eq!(Versions::ALL.iter().collect::<Vec<_>>(), Version::ALL.to_vec());
    }

    #[test]
    fn the_table_has_each_method_once_and_what_each_version_forbids() {
        for (i, r) in METHODS.iter().enumerate() {
            assert!(METHODS.iter().skip(i + 1).all(|o| o.name != r.name), "{} twice", r.name);
            assert_eq!(r.kind == Notification, r.name.starts_with("notifications/"), "{}", r.name);
            assert_ne!(r.versions, Versions::default(), "{}", r.name);
        }
        let v26 = Version::V2026_07_28;
        assert!(method(v26, "initialize").is_none() && method(v26, "ping").is_none());
        assert_eq!(method(v26, "server/discover").map(|r| r.handling), Some(Pass));
        assert_eq!(method(v26, "subscriptions/listen").map(|r| r.handling), Some(Stream));
        assert!(method(Version::V2025_11_25, "server/discover").is_none());
        assert!(method(Version::V2025_06_18, "tasks/get").is_none());
        assert_eq!(
            Version::ALL.map(|v| v.rules().batches),
            [true, false, false, false],
            "batches were removed in 2025-06-18"
        );
        assert_eq!(Version::ALL.map(|v| v.rules().sessions), [true, true, true, false]);
    }

    #[test]
    fn detection_follows_header_and_meta() {
        let all = Versions::ALL;
        let m = |s: &str| MetaVersion::Str(s.into());
        assert_eq!(detect(None, &MetaVersion::Absent, true, all, false), Ok(Version::V2025_03_26));
        assert_eq!(detect(Some(Ok("2025-11-25")), &MetaVersion::Absent, true, all, false), Ok(Version::V2025_11_25));
        assert_eq!(detect(Some(Ok("2026-07-28")), &m("2026-07-28"), true, all, false), Ok(Version::V2026_07_28));
        assert_eq!(
            detect(Some(Ok("2026-07-28")), &MetaVersion::Absent, true, all, false),
            Err(VersionError::MissingMeta)
        );
        assert_eq!(detect(Some(Ok("2026-07-28")), &MetaVersion::Absent, false, all, false), Ok(Version::V2026_07_28));
        assert!(matches!(
            detect(Some(Ok("2025-11-25")), &m("2026-07-28"), true, all, false),
            Err(VersionError::Mismatch(_))
        ));
        assert!(matches!(detect(None, &m("2026-07-28"), true, all, false), Err(VersionError::Mismatch(_))));
        assert!(matches!(
            detect(Some(Err(())), &MetaVersion::Absent, true, all, false),
            Err(VersionError::Mismatch(_))
        ));
        assert_eq!(
            detect(Some(Ok("2024-11-05")), &MetaVersion::Absent, true, all, false),
            Err(VersionError::Unsupported("2024-11-05".into()))
        );
        let mut only26 = Versions::default();
        only26.insert(Version::V2026_07_28);
        assert_eq!(
            detect(None, &MetaVersion::Absent, true, only26, false),
            Err(VersionError::Unsupported(String::new()))
        );
        assert_eq!(detect(None, &MetaVersion::Absent, true, only26, true), Ok(Version::V2025_03_26));
    }

    #[test]
    fn sep_2243_base64_names() {
        assert_eq!(decode_header_value(b"list_vms").as_deref(), Some("list_vms"));
        assert_eq!(decode_header_value(b"=?base64?ZGVsZXRlX3Zt?=").as_deref(), Some("delete_vm"));
        assert_eq!(decode_header_value("=?base64?w6l0w6k=?=".as_bytes()).as_deref(), Some("été"));
        // Non-canonical (trailing bits set), bad alphabet, not UTF-8: never a name.
        assert_eq!(decode_header_value(b"=?base64?ZGVsZXRlX3Zu?=").as_deref(), Some("delete_vn"));
        assert_eq!(decode_header_value(b"=?base64?w6l0w6l=?="), None);
        assert_eq!(decode_header_value(b"=?base64?****?="), None);
        assert_eq!(decode_header_value(b"=?base64?/w==?="), None);
        assert_eq!(decode_header_value(b"\xff"), None);
    }
}
