//! `mcp-policy apply`: put a policy live in a running Envoy that takes the filter's configuration
//! through ECDS from a file (`envoy/envoy-ecds.yaml`, `make run`), and report Envoy's verdict.
//!
//! 1. The policy is loaded with the filter's own code; an invalid one is never written.
//! 2. The ECDS file (a JSON discovery response holding one `TypedExtensionConfig` with the filter's
//!    config: the Wasm plugin's, or the native build's `DynamicModuleFilter`) gets the policy as its
//!    `configuration.value` (native: `filter_config.value`), everything else kept, and replaces the
//!    old file by a rename in the same directory: Envoy reloads a path config source only on a move.
//! 3. The verdict comes from Envoy's stats `extension_config_discovery.http_filter.<name>.update_success`
//!    and `update_rejected` on the admin endpoint. Envoy counts a file identical to its last update as
//!    a success without loading it, even when that update was rejected. It compares the resource,
//!    not the file's bytes: a file rewritten with its keys in another order is the same update. So
//!    when the new policy text equals the one in the file, whatever the file's layout, the policy
//!    text's trailing newline is toggled (JSON whitespace) and Envoy really loads it again.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::Path;
use std::time::{Duration, Instant};

use mcp_policy_core::config;
use serde_json::Value;

mod clusters;

use super::args::ApplyArgs;
use super::check::{key_from_env, load_policy, warning_lines};
use super::{read_input, Failure, Report, INVALID_POLICY, OK};

/// How a failed apply ends: exit status 1 (the policy is invalid, nothing written), 2 (usage, files,
/// admin endpoint), 5 (written, but Envoy refused it or did not answer).
pub struct ApplyError {
    pub status: u8,
    pub message: String,
}

fn fail(status: u8, message: impl Into<String>) -> ApplyError {
    ApplyError { status, message: message.into() }
}

/// Exit status when Envoy refused the new configuration or gave no verdict in time.
pub const NOT_APPLIED: u8 = 5;

/// The ECDS file with a new policy, from [`render`].
#[derive(Debug)]
pub struct Rendered {
    /// The new file.
    pub text: String,
    /// The resource's name (the filter name in the stats).
    pub name: String,
    /// The file held this policy text already: Envoy would see the same resource.
    pub unchanged: bool,
}

/// The ECDS file with `policy` as the Wasm plugin's `configuration.value`, or the dynamic module
/// filter's `filter_config.value` (the native build).
pub fn render(ecds: &[u8], policy: &str) -> Result<Rendered, String> {
    let mut doc: Value =
        serde_json::from_slice(ecds).map_err(|e| format!("not the JSON ECDS file `apply` writes: {e}"))?;
    let resources = doc.get_mut("resources").and_then(Value::as_array_mut).ok_or("no `resources` array")?;
    let [resource] = resources.as_mut_slice() else {
        return Err(format!("{} resources; expected exactly one (the mcp_policy filter)", resources.len()));
    };
    let name = resource.get("name").and_then(Value::as_str).ok_or("the resource has no `name`")?.to_owned();
    let native = resource.pointer("/typed_config/@type").and_then(Value::as_str) == Some(DYNAMIC_MODULE_FILTER);
    let (pointer, what) = if native {
        ("/typed_config/filter_config/value", "typed_config.filter_config.value (the dynamic module filter's)")
    } else {
        (
            "/typed_config/config/configuration/value",
            "typed_config.config.configuration.value (the Wasm plugin configuration)",
        )
    };
    let value = resource.pointer_mut(pointer).ok_or(format!("the resource has no {what}"))?;
    let unchanged = value.as_str() == Some(policy);
    *value = Value::String(policy.to_owned());
    let text = serde_json::to_string_pretty(&doc).map_err(|e| e.to_string())? + "\n";
    Ok(Rendered { text, name, unchanged })
}

/// The `@type` of the native build's filter configuration.
const DYNAMIC_MODULE_FILTER: &str =
    "type.googleapis.com/envoy.extensions.filters.http.dynamic_modules.v3.DynamicModuleFilter";

/// `policy` with its trailing newline toggled: the same JSON document, different bytes.
pub fn toggle_trailing_newline(policy: &str) -> String {
    match policy.strip_suffix('\n') {
        Some(p) => p.to_owned(),
        None => format!("{policy}\n"),
    }
}

/// `host:port` of an admin address given as `http://host:port`, `host:port` (a trailing `/` allowed).
fn admin_authority(admin: &str) -> Result<String, ApplyError> {
    let a = admin.strip_prefix("http://").unwrap_or(admin).trim_end_matches('/');
    if a.is_empty() || a.contains('/') || admin.starts_with("https://") {
        return Err(fail(2, format!("mcp-policy: --admin {admin:?}: expected http://HOST:PORT")));
    }
    Ok(a.to_owned())
}

/// GET `path` from Envoy's admin endpoint (plain HTTP/1.0 on the local admin port; 2 s timeouts).
fn admin_get(authority: &str, path: &str) -> Result<String, String> {
    let addr = authority.to_socket_addrs().map_err(|e| e.to_string())?.next().ok_or("no address")?;
    let timeout = Duration::from_secs(2);
    let mut s = TcpStream::connect_timeout(&addr, timeout).map_err(|e| e.to_string())?;
    s.set_read_timeout(Some(timeout)).map_err(|e| e.to_string())?;
    s.set_write_timeout(Some(timeout)).map_err(|e| e.to_string())?;
    // Envoy's admin answers HTTP/1.0 with 426; HTTP/1.1 with `connection: close` ends at EOF.
    let request = format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    s.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw).map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&raw);
    let (head, body) = text.split_once("\r\n\r\n").ok_or("no HTTP response")?;
    let status = head.split(' ').nth(1).unwrap_or("");
    if status != "200" {
        return Err(format!("HTTP {status} for {path}"));
    }
    let chunked = head.lines().any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("transfer-encoding") && v.trim().eq_ignore_ascii_case("chunked")
        })
    });
    if chunked {
        dechunk(body).ok_or_else(|| "malformed chunked response".to_owned())
    } else {
        Ok(body.to_owned())
    }
}

/// The payload of an HTTP/1.1 chunked body (RFC 9112 §7.1; extensions and trailers ignored).
fn dechunk(mut body: &str) -> Option<String> {
    let mut out = String::new();
    loop {
        let (size_line, rest) = body.split_once("\r\n")?;
        let size = usize::from_str_radix(size_line.split(';').next()?.trim(), 16).ok()?;
        if size == 0 {
            return Some(out);
        }
        out.push_str(rest.get(..size)?);
        body = rest.get(size..)?.strip_prefix("\r\n")?;
    }
}

/// The ECDS update counters of filter `name`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counters {
    pub success: u64,
    pub rejected: u64,
}

/// Read `update_success` and `update_rejected` from `/stats` text (absent counters are 0).
pub fn parse_counters(stats: &str, name: &str) -> Counters {
    let prefix = format!("extension_config_discovery.http_filter.{name}.");
    let get = |stat: &str| {
        stats
            .lines()
            .filter_map(|l| l.split_once(": "))
            .find(|(k, _)| k.strip_prefix(&prefix) == Some(stat))
            .and_then(|(_, v)| v.trim().parse().ok())
            .unwrap_or(0)
    };
    Counters { success: get("update_success"), rejected: get("update_rejected") }
}

fn counters(authority: &str, name: &str) -> Result<Counters, String> {
    let filter = format!("^extension_config_discovery\\.http_filter\\.{}\\.update_", name.replace('.', "\\."));
    let query: String = filter
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"_-".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    admin_get(authority, &format!("/stats?filter={query}")).map(|body| parse_counters(&body, name))
}

/// Write `text` next to `target` and rename it over `target` (atomic on one file system).
fn replace_file(target: &Path, text: &str) -> std::io::Result<()> {
    let dir = target.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let file = target.file_name().and_then(|n| n.to_str()).unwrap_or("ecds");
    let tmp = dir.join(format!(".{file}.{}.tmp", std::process::id()));
    let write = std::fs::File::create(&tmp).and_then(|mut f| {
        f.write_all(text.as_bytes())?;
        f.sync_all()
    });
    match write.and_then(|()| std::fs::rename(&tmp, target)) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// The lines of Envoy's log `text` about a rejected update, shortened to `[level] message`: its
/// `[wasm]` (native build: `[dynamic_modules]`) errors (the filter's own `invalid policy at PATH: MESSAGE` first) and `config update
/// rejected`. Repeated messages (one per worker thread) are shown once with their count.
pub fn rejection_lines(text: &str) -> Vec<String> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for l in text.lines() {
        // `[time][thread][level][component] [source:line] message`
        let mut brackets = l.split(']');
        let level = brackets.nth(2).map(|b| b.trim_start_matches('[')).unwrap_or("");
        let message = l.split_once("] ").and_then(|(_, rest)| rest.split_once("] ")).map_or(l, |(_, m)| m);
        let filter_line = l.contains("][wasm]") || l.contains("][dynamic_modules]");
        let relevant = (filter_line && matches!(level, "error" | "critical")) || l.contains("config update rejected");
        if !relevant {
            continue;
        }
        let shown = shortened(&format!("[{level}] {message}"), 1000);
        match out.iter_mut().find(|(m, _)| *m == shown) {
            Some((_, n)) => *n += 1,
            None => out.push((shown, 1)),
        }
    }
    out.into_iter().map(|(m, n)| if n > 1 { format!("{m} (x{n})") } else { m }).collect()
}

/// What to check when Envoy's admin listener does not answer.
const NO_ADMIN: &str = "(is Envoy running, with its admin listener there? --admin)";

/// `line` cut to at most `max` characters at the end of a word, with ` …` after it when cut (a
/// policy's own text can make Envoy's line long).
fn shortened(line: &str, max: usize) -> String {
    match line.char_indices().nth(max) {
        None => line.to_owned(),
        Some((end, _)) => {
            // At the last space, unless that leaves less than half: a long word is cut within.
            let cut = &line[..end];
            let at = cut.rfind(' ').filter(|&space| space >= end / 2).unwrap_or(end);
            format!("{} …", &cut[..at])
        }
    }
}

/// What `apply` reports once Envoy loaded the policy: the line to print, and warnings (for stderr).
pub struct Applied {
    pub line: String,
    pub warnings: Vec<String>,
}

impl Applied {
    /// The warnings, one `FILE: warning: …` line each.
    pub fn warning_lines(&self, file: &str) -> String {
        self.warnings.iter().map(|w| format!("{file}: {w}\n")).collect()
    }
}

/// What `apply` does besides loading the policy (already done by the caller).
pub struct Target<'a> {
    /// The ECDS file Envoy watches.
    pub ecds: &'a Path,
    /// Envoy's admin address; `None`: only write the file (before Envoy starts).
    pub admin: Option<&'a str>,
    /// Envoy's log file, to quote why an update was refused.
    pub envoy_log: Option<&'a Path>,
    /// How long to wait for Envoy's verdict.
    pub timeout: Duration,
}

/// Write `policy` into the ECDS file and wait for Envoy's verdict.
pub fn apply(policy: &str, t: &Target<'_>) -> Result<Applied, ApplyError> {
    let shown = t.ecds.display();
    let old = std::fs::read(t.ecds).map_err(|e| fail(2, format!("mcp-policy: cannot read {shown}: {e}")))?;
    let rendered = render(&old, policy).map_err(|e| fail(2, format!("mcp-policy: {shown}: {e}")))?;
    let (mut text, name) = (rendered.text, rendered.name);
    if rendered.unchanged {
        // Envoy would count it as a success without loading it (see the module docs).
        text = render(&old, &toggle_trailing_newline(policy)).map_err(|e| fail(2, e))?.text;
    }
    let Some(admin) = t.admin else {
        replace_file(t.ecds, &text).map_err(|e| fail(2, format!("mcp-policy: cannot write {shown}: {e}")))?;
        return Ok(Applied { line: format!("written: {shown} (Envoy not asked)"), warnings: Vec::new() });
    };
    let authority = admin_authority(admin)?;
    let before = counters(&authority, &name).map_err(|e| {
        fail(2, format!("mcp-policy: cannot read Envoy's stats at {admin}: {e}; nothing written {NO_ADMIN}"))
    })?;
    let log_from = t.envoy_log.and_then(|p| std::fs::metadata(p).ok()).map_or(0, |m| m.len());
    replace_file(t.ecds, &text).map_err(|e| fail(2, format!("mcp-policy: cannot write {shown}: {e}")))?;
    let started = Instant::now();
    loop {
        // Polled every 5 ms, so the time reported is within 5 ms of when Envoy counted the update.
        std::thread::sleep(Duration::from_millis(5));
        let now = counters(&authority, &name).unwrap_or(before);
        if now.rejected > before.rejected {
            let mut msg = format!(
                "rejected: Envoy refused the new configuration of {name} (update_rejected {} -> {}); \
                 the previous policy keeps serving",
                before.rejected, now.rejected
            );
            // Envoy remembers a plugin configuration that failed and refuses it again without
            // running the filter, so its log may not say why: the filter's own code does.
            match config::load_set_with_env(policy.as_bytes(), &key_from_env) {
                Err(errors) => {
                    msg.push_str("\nthe filter's check of this policy:");
                    for e in errors.0 {
                        msg.push_str(&format!("\n  {e}"));
                    }
                }
                Ok(_) => msg.push_str("\nthis policy passes `mcp-policy check`: the cause is in Envoy's log"),
            }
            if let Some(log) = t.envoy_log {
                std::thread::sleep(Duration::from_millis(100)); // let the log lines land
                let new = std::fs::read(log)
                    .ok()
                    .and_then(|b| b.get(usize::try_from(log_from).unwrap_or(0)..).map(<[u8]>::to_vec));
                let lines = rejection_lines(&String::from_utf8_lossy(&new.unwrap_or_default()));
                msg.push_str(&format!("\nEnvoy's log ({}) about it:", log.display()));
                for l in lines {
                    msg.push_str("\n  ");
                    msg.push_str(&l);
                }
            }
            return Err(fail(NOT_APPLIED, msg));
        }
        if now.success > before.success {
            let ms = started.elapsed().as_millis();
            let line = format!(
                "applied: Envoy loaded the new policy for {name} in {ms} ms (update_success {} -> {})",
                before.success, now.success
            );
            return Ok(Applied { line, warnings: clusters::missing(policy, &authority) });
        }
        if started.elapsed() >= t.timeout {
            return Err(fail(
                NOT_APPLIED,
                format!(
                    "not confirmed: {shown} was replaced, but Envoy at {admin} counted no update of {name} within {} s \
                     (is it running with this ECDS file?)",
                    t.timeout.as_secs_f64()
                ),
            ));
        }
    }
}

/// `apply POLICY.json`: check it (unless --no-check), write it, and wait for Envoy's verdict (unless
/// --no-wait).
pub fn command(args: &ApplyArgs) -> Result<Report, Failure> {
    let policy_file = &args.policy;
    let bytes = read_input(policy_file)?;
    let mut warnings = String::new();
    if !args.no_check {
        let set = load_policy(policy_file).map_err(|f| Failure {
            status: f.status,
            message: format!("{}\nnot applied: the ECDS file is unchanged and Envoy keeps its policy", f.message),
        })?;
        warnings = warning_lines(policy_file, &set);
    }
    let text = String::from_utf8(bytes)
        .map_err(|_| Failure { status: INVALID_POLICY, message: format!("{policy_file}: not UTF-8; not applied") })?;
    let target = Target {
        ecds: Path::new(&args.ecds),
        admin: (!args.no_wait).then_some(args.admin.as_str()),
        envoy_log: args.envoy_log.as_deref().map(Path::new),
        timeout: args.timeout,
    };
    match apply(&text, &target) {
        Ok(done) => {
            warnings.push_str(&done.warning_lines(policy_file));
            Ok(Report { stdout: format!("{policy_file}: {}\n", done.line), stderr: warnings, status: OK })
        }
        Err(e) if e.message.starts_with("mcp-policy:") => Err(Failure { status: e.status, message: e.message }),
        Err(e) => Err(Failure { status: e.status, message: format!("{policy_file}: {}", e.message) }),
    }
}

#[cfg(test)]
mod tests;
