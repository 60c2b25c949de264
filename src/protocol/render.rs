//! The README's protocol tables, rendered from [`METHODS`](super::METHODS) and
//! [`RULES`](super::RULES) (tests/protocol.rs checks the README holds exactly this text).

use super::Handling::{Method, Pass, Stream, Tool};
use super::Kind::{Notification, Request};
use super::{Version, METHODS, RULES};

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
            Stream => "pass; its SSE stream is filtered like the GET stream",
            Tool => "judged by tool (precedence below)",
            Method => "`gateway.methods[method]`, else `default`",
        });
        if let Some(p) = r.name_param {
            s.push_str(&format!("; `Mcp-Name` mirrors `params.{p}`"));
        }
        s.push_str(" |\n");
    }
    s.push_str("\n| version | batches | `Mcp-Session-Id` | client responses on POST | `Mcp-Method`/`Mcp-Name` required | `params._meta` version required |\n|---|---|---|---|---|---|\n");
    for r in &RULES {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} |\n",
            r.version.as_str(),
            yes(r.batches),
            yes(r.sessions),
            yes(r.client_responses),
            yes(r.method_headers),
            yes(r.meta_version)
        ));
    }
    s
}
