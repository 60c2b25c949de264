//! The README's protocol tables, rendered from [`METHODS`](super::METHODS) and
//! [`RULES`](super::RULES), and its table of `subscriptions/listen` kinds, rendered from
//! [`SUBSCRIPTION_KINDS`](super::SUBSCRIPTION_KINDS) (tests/core/protocol.rs checks the README holds
//! exactly this text).

use super::Handling::{Method, Pass, Stream, Tool};
use super::Kind::{Notification, Request};
use super::{KindValue, Version, METHODS, RULES, SUBSCRIPTION_KINDS};

fn yes(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// The README's protocol tables, rendered from [`METHODS`] and [`RULES`] (Markdown).
pub fn render_markdown() -> String {
    let mut s = String::new();
    s.push_str("| method | kind | ");
    for v in Version::ALL {
        s.push_str(v.as_str());
        s.push_str(" | ");
    }
    s.push_str("what the filter does |\n|---|---|");
    for _ in Version::ALL {
        s.push_str("---|");
    }
    s.push_str("---|\n");
    for r in METHODS {
        s.push_str(&format!(
            "| `{}` | {} | ",
            r.name,
            match r.kind {
                Request => "request",
                Notification => "notification",
            }
        ));
        for v in Version::ALL {
            s.push_str(if r.versions.contains(v) { "✓ | " } else { "– | " });
        }
        s.push_str(match r.handling {
            Pass => "pass",
            Stream => "each subscription kind judged as the method it stands for; its SSE stream is filtered like the GET stream",
            Tool => "judged by tool (precedence below)",
            Method => "`gateway.methods[method]`, else `default`",
        });
        if let Some(p) = r.name_param {
            s.push_str(&format!("; `Mcp-Name` mirrors `params.{p}`"));
        }
        s.push_str(" |\n");
    }
    s.push_str("\n| version | batches | `Mcp-Session-Id` | client responses on POST | `Mcp-Method`/`Mcp-Name` required | `params._meta` version required | a method it does not define |\n|---|---|---|---|---|---|---|\n");
    for r in &RULES {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} −32601 |\n",
            r.version.as_str(),
            yes(r.batches),
            yes(r.sessions),
            yes(r.client_responses),
            yes(r.method_headers),
            yes(r.meta_version),
            r.method_not_found_status
        ));
    }
    s
}

/// The README's table of `subscriptions/listen` kinds, rendered from [`SUBSCRIPTION_KINDS`] (Markdown).
pub fn render_subscription_kinds() -> String {
    let mut s = String::from("| `params.notifications` member | asks for | when | judged as |\n|---|---|---|---|\n");
    for k in &SUBSCRIPTION_KINDS {
        let when = match k.value {
            KindValue::Flag => "`true`",
            KindValue::UriList => "a non-empty array of URIs",
        };
        s.push_str(&format!("| `{}` | `{}` | {when} | `{}` |\n", k.member, k.notification, k.method));
    }
    s
}
