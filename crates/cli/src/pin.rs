//! `mcp-policy pin URL`: connect to an MCP server as a client, list every tool (every page), and
//! print each tool's pin (`mcp_policy_core::wire::pin`, the same code the filter checks with) as a
//! policy fragment, or add the pins to a policy file.
//!
//! Both protocol eras, as the official SDKs speak them: first `server/discover` at 2026-07-28
//! (`params._meta` with the protocol version, client info and capabilities; `MCP-Protocol-Version`
//! and `Mcp-Method` headers); a server that does not answer it with 2026-07-28 among its
//! `supportedVersions` is asked the legacy way: `initialize` (2025-11-25), its `Mcp-Session-Id`
//! kept, `notifications/initialized`, then `tools/list` with the negotiated version's header.

use std::collections::BTreeMap;

use mcp_policy_core::wire::json::{self, Json};
use mcp_policy_core::wire::pin;

use crate::args::PinArgs;
use crate::pin_write::Listed;
use crate::{Failure, Report, OK, USAGE_OR_IO};

const MODERN: &str = "2026-07-28";
const LEGACY: &str = "2025-11-25";
/// Most `tools/list` pages followed (a server whose cursor never ends is refused).
const MAX_PAGES: usize = 1000;

fn fail(message: impl std::fmt::Display) -> Failure {
    Failure { status: USAGE_OR_IO, message: format!("mcp-policy pin: {message}") }
}

/// One MCP client connection: the URL, the headers sent with every request, the session.
struct Client {
    http: reqwest::Client,
    url: String,
    headers: Vec<(String, String)>,
    session: Option<String>,
    version: Option<String>,
    next_id: u64,
}

impl Client {
    /// POST `method` with `params`; returns the JSON-RPC result (a notification: `Json::Null`).
    async fn request(&mut self, method: &str, params: Json, notify: bool) -> Result<Json, Failure> {
        let mut msg = vec![("jsonrpc".to_owned(), Json::String("2.0".into()))];
        self.next_id += 1;
        if !notify {
            msg.push(("id".into(), Json::Number(self.next_id.to_string().into())));
        }
        msg.push(("method".into(), Json::String(method.into())));
        msg.push(("params".into(), params));
        let mut body = String::new();
        json::write(&mut body, &Json::Object(msg));
        let mut req = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body);
        for (k, v) in &self.headers {
            req = req.header(k, v);
        }
        if let Some(s) = &self.session {
            req = req.header("mcp-session-id", s);
        }
        if let Some(v) = &self.version {
            req = req.header("mcp-protocol-version", v);
        }
        if self.version.as_deref() == Some(MODERN) {
            req = req.header("mcp-method", method);
        }
        let resp = req.send().await.map_err(|e| fail(format!("{method}: {e}")))?;
        let status = resp.status();
        if let Some(s) = resp.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()) {
            self.session = Some(s.to_owned());
        }
        let sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|t| t.to_ascii_lowercase().starts_with("text/event-stream"));
        let bytes = resp.bytes().await.map_err(|e| fail(format!("{method}: {e}")))?;
        if notify {
            return Ok(Json::Null);
        }
        let reply = if sse { sse_reply(&bytes, self.next_id) } else { json::parse(&bytes).ok() };
        let Some(reply) = reply else {
            return Err(fail(format!("{method}: HTTP {status}, no JSON-RPC response")));
        };
        if let Some(err) = reply.get("error") {
            let mut e = String::new();
            json::write(&mut e, err);
            return Err(fail(format!("{method}: the server answered an error: {e}")));
        }
        reply.get("result").cloned().ok_or_else(|| fail(format!("{method}: a response without a result")))
    }

    /// `params` for `method`: `_meta` with the version, client info and capabilities in 2026-07-28.
    fn params(&self, mut members: Vec<(String, Json)>) -> Json {
        if self.version.as_deref() == Some(MODERN) {
            members.push(("_meta".into(), meta()));
        }
        Json::Object(members)
    }
}

fn meta() -> Json {
    Json::Object(vec![
        ("io.modelcontextprotocol/protocolVersion".into(), Json::String(MODERN.into())),
        ("io.modelcontextprotocol/clientInfo".into(), client_info()),
        ("io.modelcontextprotocol/clientCapabilities".into(), Json::Object(vec![])),
    ])
}

fn client_info() -> Json {
    Json::Object(vec![
        ("name".into(), Json::String("mcp-policy".into())),
        ("version".into(), Json::String(mcp_policy_core::VERSION.into())),
    ])
}

/// The JSON-RPC response with id `id` in an SSE body (each event's data joined across its lines).
fn sse_reply(body: &[u8], id: u64) -> Option<Json> {
    let text = std::str::from_utf8(body).ok()?;
    let want = Json::Number(id.to_string().into());
    for event in text.replace("\r\n", "\n").replace('\r', "\n").split("\n\n") {
        let data: Vec<&str> =
            event.lines().filter_map(|l| l.strip_prefix("data:").map(|d| d.strip_prefix(' ').unwrap_or(d))).collect();
        if let Ok(msg) = json::parse(data.join("\n").as_bytes()) {
            if msg.get("id") == Some(&want) {
                return Some(msg);
            }
        }
    }
    None
}

/// Connect (2026-07-28 first, else the legacy handshake) and list every tool.
async fn list_tools(mut c: Client) -> Result<Vec<Json>, Failure> {
    c.version = Some(MODERN.into());
    let discover = c.params(Vec::new());
    let modern = match c.request("server/discover", discover, false).await {
        Ok(r) => match r.get("supportedVersions") {
            Some(Json::Array(v)) => v.iter().any(|v| v.as_str() == Some(MODERN)),
            _ => false,
        },
        Err(_) => false,
    };
    if !modern {
        c.version = None;
        c.session = None;
        let init = Json::Object(vec![
            ("protocolVersion".into(), Json::String(LEGACY.into())),
            ("capabilities".into(), Json::Object(vec![])),
            ("clientInfo".into(), client_info()),
        ]);
        let r = c.request("initialize", init, false).await?;
        c.version = Some(r.get("protocolVersion").and_then(Json::as_str).unwrap_or(LEGACY).to_owned());
        c.request("notifications/initialized", Json::Object(vec![]), true).await?;
    }
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let members = cursor.take().map(|k| vec![("cursor".to_owned(), Json::String(k))]).unwrap_or_default();
        let params = c.params(members);
        let page = c.request("tools/list", params, false).await?;
        match page.get("tools") {
            Some(Json::Array(list)) => tools.extend(list.iter().cloned()),
            _ => return Err(fail("tools/list: a result without a tools array")),
        }
        match page.get("nextCursor").and_then(Json::as_str) {
            Some(next) if !next.is_empty() => cursor = Some(next.to_owned()),
            _ => return Ok(tools),
        }
    }
    Err(fail(format!("tools/list: more than {MAX_PAGES} pages")))
}

/// The pins by tool name.
fn pins(tools: &[Json]) -> Result<BTreeMap<String, Listed>, Failure> {
    let mut out = BTreeMap::new();
    for t in tools {
        let name = t.get("name").and_then(Json::as_str).ok_or_else(|| fail("a listed tool has no string name"))?;
        let listed = Listed { pin: pin::text(&pin::hash(t)), annotations: t.get("annotations").cloned() };
        if out.insert(name.to_owned(), listed).is_some() {
            return Err(fail(format!("the tool {name} is listed twice")));
        }
    }
    Ok(out)
}

pub fn command(args: &PinArgs) -> Result<Report, Failure> {
    let mut headers = Vec::new();
    for h in &args.header {
        let (k, v) = h.split_once(':').ok_or_else(|| fail("a header is written `-H 'Name: value'`"))?;
        headers.push((k.trim().to_owned(), v.trim().to_owned()));
    }
    if let Some(t) = &args.bearer {
        headers.push(("authorization".into(), format!("Bearer {t}")));
    }
    let http = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(30))
        .build()
        .map_err(|e| fail(format!("cannot start the HTTP client: {e}")))?;
    let client = Client { http, url: args.url.clone(), headers, session: None, version: None, next_id: 0 };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| fail(format!("cannot start the runtime: {e}")))?;
    let tools = rt.block_on(list_tools(client))?;
    let pins = pins(&tools)?;
    match &args.write {
        None => {
            let mut out = String::from("{\"tools\": {");
            for (i, (name, p)) in pins.iter().enumerate() {
                out.push_str(if i == 0 { "\n  " } else { ",\n  " });
                json::write_str(&mut out, name);
                out.push_str(": {\"pin\": ");
                json::write_str(&mut out, &p.pin);
                out.push('}');
            }
            out.push_str(if pins.is_empty() { "}}\n" } else { "\n}}\n" });
            Ok(Report::out(out, OK))
        }
        Some(path) => crate::pin_write::write(path, &pins),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sse_replies_join_data_lines_and_match_the_id() {
        let body = b"event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"n\"}\n\nid: 3\ndata: {\"jsonrpc\":\"2.0\",\n data: x\ndata: \"id\":2,\"result\":{}}\r\n\r\n";
        assert_eq!(sse_reply(body, 2).and_then(|m| m.get("result").cloned()), Some(Json::Object(vec![])));
        assert_eq!(sse_reply(body, 3), None);
    }
}
