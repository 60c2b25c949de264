//! `attach` and `contain` read from the parsed tree into their spec types, with the checks serde's
//! derived readers make elsewhere in the policy: each object only its own keys, each value of its
//! type, every error at the JSON path of its value. Type errors stop reading at the first.

use super::spec::{AttachSpec, ContainSpec, MatcherSpec};
use crate::config::{err, ConfigError};
use crate::wire::json::Json;

fn items<'a>(v: &'a Json, path: &str) -> Result<&'a [Json], ConfigError> {
    match v {
        Json::Array(items) => Ok(items),
        other => Err(err(path, format!("must be an array, not {}", other.type_name()))),
    }
}

/// The members of an object that holds only keys of `known`.
fn object<'a>(v: &'a Json, path: &str, known: &[&str]) -> Result<&'a [(String, Json)], ConfigError> {
    let Json::Object(members) = v else {
        return Err(err(path, format!("must be an object, not {}", v.type_name())));
    };
    for (k, _) in members {
        if !known.contains(&k.as_str()) {
            let mut m = format!("unknown field `{k}`, expected one of");
            for (i, n) in known.iter().enumerate() {
                m.push_str(if i == 0 { " `" } else { ", `" });
                m.push_str(n);
                m.push('`');
            }
            return Err(err(format!("{path}.{k}"), m));
        }
    }
    Ok(members)
}

/// The string member `key`, if present.
fn text(members: &[(String, Json)], key: &str, path: &str) -> Result<Option<String>, ConfigError> {
    match members.iter().find(|(k, _)| k == key).map(|(_, v)| v) {
        None | Some(Json::Null) => Ok(None),
        Some(Json::String(s)) => Ok(Some(s.clone())),
        Some(other) => Err(err(format!("{path}.{key}"), format!("must be a string, not {}", other.type_name()))),
    }
}

fn when(members: &[(String, Json)], path: &str) -> Result<Vec<MatcherSpec>, ConfigError> {
    let Some((_, v)) = members.iter().find(|(k, _)| k == "when") else { return Ok(Vec::new()) };
    let path = format!("{path}.when");
    let mut out = Vec::new();
    for (j, m) in items(v, &path)?.iter().enumerate() {
        let at = format!("{path}[{j}]");
        let o = object(m, &at, &["claim", "equals", "includes", "grant"])?;
        out.push(MatcherSpec {
            claim: text(o, "claim", &at)?,
            equals: text(o, "equals", &at)?,
            includes: text(o, "includes", &at)?,
            grant: text(o, "grant", &at)?,
        });
    }
    Ok(out)
}

fn required(v: Option<String>, path: &str, key: &str) -> Result<String, ConfigError> {
    v.ok_or_else(|| err(path, format!("missing field `{key}`")))
}

pub(super) fn attach(v: Option<&Json>) -> Result<Vec<AttachSpec>, ConfigError> {
    let Some(v) = v else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for (i, r) in items(v, "attach")?.iter().enumerate() {
        let path = format!("attach[{i}]");
        let o = object(r, &path, &["policy", "when"])?;
        out.push(AttachSpec { policy: required(text(o, "policy", &path)?, &path, "policy")?, when: when(o, &path)? });
    }
    Ok(out)
}

pub(super) fn contain(v: Option<&Json>) -> Result<Vec<ContainSpec>, ConfigError> {
    let Some(v) = v else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for (i, c) in items(v, "contain")?.iter().enumerate() {
        let path = format!("contain[{i}]");
        let o = object(c, &path, &["when", "reason"])?;
        out.push(ContainSpec { when: when(o, &path)?, reason: required(text(o, "reason", &path)?, &path, "reason")? });
    }
    Ok(out)
}
