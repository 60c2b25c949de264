//! The compiled `flows` and marks: rules across calls. A grant is marked (`tools.NAME.marks`, set
//! when a forwarded call of the tool is answered with a result; `tools.NAME.result.mark_if`, set
//! when a result matches), and while it carries one of a flow's marks set less than `for` ago, the
//! flow's tools are refused to it (`flow_denied`). The marks live in shared data
//! (`crate::limits::marks`), exact across workers.

use std::collections::BTreeSet;

use crate::wire::fold::FoldedNames;

/// One `flows[i]`, compiled once at configure time.
#[derive(Debug, Clone)]
pub struct Flow {
    /// `name`, unique.
    pub name: String,
    /// `flows[i]`: named in refusals (`data.rule`) and audit records.
    pub path: String,
    /// `if_marked`: any one of them, set less than `for_ms` ago, denies.
    pub marks: Vec<String>,
    /// The key base of each of `marks` (`crate::limits::mark_base`), hashed once here.
    pub mark_bases: Vec<[u8; 16]>,
    /// `deny` holds `"*"`: every tool but `except`.
    deny_all: bool,
    /// `deny` by exact name, and folded (matched as `action: "deny"` is).
    deny: BTreeSet<String>,
    deny_folded: FoldedNames,
    /// With `"*"`: the tools that set one of the flow's marks (never denied by it).
    except: BTreeSet<String>,
    /// `for`, in milliseconds.
    pub for_ms: u64,
    /// `reason`, shown to the agent.
    pub reason: String,
}

/// `data.reason` of a flow written without one.
pub const DEFAULT_FLOW_REASON: &str = "this tool is denied for a while after what this grant did before";

impl Flow {
    /// `deny` as written (`"*"` included), the tools that set the flow's marks (`except`).
    pub fn new(name: String, path: String, marks: Vec<String>, deny: &[String], except: BTreeSet<String>) -> Self {
        let deny_all = deny.iter().any(|d| d == "*");
        // Inserted one by one: `collect` into a set sorts first, and would link a stable sort of
        // `String`s only for this (6 KB of the .wasm).
        let mut named = BTreeSet::new();
        for d in deny.iter().filter(|d| *d != "*") {
            named.insert(d.clone());
        }
        let deny_folded = FoldedNames::new(named.iter().map(String::as_str));
        let mark_bases = marks.iter().map(|m| crate::limits::mark_base(crate::limits::marks::SCOPE, m)).collect();
        Flow {
            name,
            path,
            marks,
            mark_bases,
            deny_all,
            deny: named,
            deny_folded,
            except,
            for_ms: 0,
            reason: DEFAULT_FLOW_REASON.to_owned(),
        }
    }

    /// Does the flow deny `tool` (while a mark holds)?
    pub fn denies(&self, tool: &str) -> bool {
        if self.deny.contains(tool) || self.deny_folded.find(tool).is_some() {
            return true;
        }
        self.deny_all && !self.except.contains(tool)
    }
}
