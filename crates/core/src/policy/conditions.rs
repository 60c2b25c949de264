//! Argument conditions: `tools.NAME.require` (all must hold) and `tools.NAME.deny_if` (none may).
//!
//! A condition is `{path, op, value?, reason?}` over `params.arguments`. Evaluation is three-valued:
//! `True`, `False`, or `Unknown` when the condition cannot be evaluated (path missing, or the argument
//! has a different JSON type than the operator needs). **Unknown denies**, in `require` and in
//! `deny_if` alike: a gateway that reads `"100"` as "not 100" would let a call through that an MCP
//! server which coerces strings to integers runs as 100.
//!
//! Types are strict: the integer `100` is not the string `"100"`, and `"1_01"`, `" 100 "`, `"+100"`
//! are strings. Numbers compare exactly as decimals (`100` = `100.0` = `1e2`; integers beyond 2^53
//! keep every digit), never through `f64`.
//!
//! Every condition is judged twice when the server may read the arguments differently
//! (`numbers::Reading::Server`: numbers as binary64, strings after NFKC without default-ignorable
//! code points): the call passes only if it passes on both readings.

use std::cmp::Ordering;

use crate::wire::json::Json;
use crate::wire::numbers::Reading;

/// One step of a condition path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    Key(String),
    Index(usize),
}

/// The operators (PolicyLayer's open engine set).
#[derive(Debug, Clone)]
pub enum Op {
    Eq(Json),
    Neq(Json),
    In(Vec<Json>),
    NotIn(Vec<Json>),
    Lt(Json),
    Lte(Json),
    Gt(Json),
    Gte(Json),
    /// Unanchored search (`is_match`); anchor with `^…$` to match the whole string. A pattern
    /// that starts with plain text is run only where that text occurs.
    Regex(crate::policy::needle::Needle),
    /// Substring of a string argument, or an element of an array argument.
    Contains(Json),
    /// The path is present (`true`, the default) or absent (`false`).
    Exists(bool),
}

impl Op {
    pub fn name(&self) -> &'static str {
        match self {
            Op::Eq(_) => "eq",
            Op::Neq(_) => "neq",
            Op::In(_) => "in",
            Op::NotIn(_) => "not_in",
            Op::Lt(_) => "lt",
            Op::Lte(_) => "lte",
            Op::Gt(_) => "gt",
            Op::Gte(_) => "gte",
            Op::Regex(_) => "regex",
            Op::Contains(_) => "contains",
            Op::Exists(_) => "exists",
        }
    }
}

/// A compiled condition.
#[derive(Debug, Clone)]
pub struct Condition {
    /// As written in the policy, e.g. `args.vmid`.
    pub path_text: String,
    pub path: Vec<Step>,
    pub op: Op,
    pub reason: Option<String>,
    /// JSON path of the condition in the policy, e.g. `tools.vm_agent_exec.require[0]`.
    pub rule: String,
}

/// The result of one condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Truth {
    True,
    False,
    Unknown,
}

impl From<bool> for Truth {
    fn from(b: bool) -> Self {
        if b {
            Truth::True
        } else {
            Truth::False
        }
    }
}

/// Parse `args.a.b[0].c` into steps. Keys are 1+ characters other than `.`, `[` and `]`.
pub fn parse_path(text: &str) -> Result<Vec<Step>, String> {
    let rest = text.strip_prefix("args").ok_or("must start with \"args.\"")?;
    let mut steps = Vec::new();
    let mut chars = rest.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        match c {
            '.' => {
                let mut key = String::new();
                while let Some(&(_, k)) = chars.peek() {
                    if matches!(k, '.' | '[' | ']') {
                        break;
                    }
                    key.push(k);
                    chars.next();
                }
                if key.is_empty() {
                    return Err("empty key in path".into());
                }
                steps.push(Step::Key(key));
            }
            '[' => {
                let mut digits = String::new();
                while let Some(&(_, d)) = chars.peek() {
                    if d == ']' {
                        break;
                    }
                    digits.push(d);
                    chars.next();
                }
                if chars.next().map(|(_, c)| c) != Some(']') {
                    return Err("unclosed [ in path".into());
                }
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return Err("array index must be a non-negative integer".into());
                }
                steps.push(Step::Index(digits.parse().map_err(|_| "array index too large")?));
            }
            _ => return Err("expected '.' or '[' in path".into()),
        }
    }
    if steps.is_empty() {
        return Err("must name an argument: \"args.NAME\"".into());
    }
    Ok(steps)
}

fn lookup<'a>(args: Option<&'a Json>, path: &[Step]) -> Option<&'a Json> {
    let mut cur = args?;
    for step in path {
        cur = match (step, cur) {
            (Step::Key(k), Json::Object(_)) => cur.get(k)?,
            (Step::Index(i), Json::Array(items)) => items.get(*i)?,
            _ => return None,
        };
    }
    Some(cur)
}

fn same_type(a: &Json, b: &Json) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

/// Structural equality of an argument `a`, already in `reading` (its strings read once, by
/// `server_view`), and a policy value `b`: numbers by value, strings as read, objects
/// order-insensitive.
fn json_eq(a: &Json, b: &Json, reading: Reading) -> bool {
    match (a, b) {
        (Json::Number(x), Json::Number(y)) => reading.cmp_numbers(x, y) == Some(Ordering::Equal),
        (Json::String(x), Json::String(y)) => *x == reading.text(y),
        (Json::Array(x), Json::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q, reading)),
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| b.get(k).is_some_and(|w| json_eq(v, w, reading)))
        }
        _ => a == b,
    }
}

/// Membership: True if an element equals; False if none does but one has the argument's type;
/// Unknown if no element has the argument's type.
fn member(arg: &Json, set: &[Json], reading: Reading) -> Truth {
    if set.iter().any(|v| json_eq(arg, v, reading)) {
        Truth::True
    } else if set.iter().any(|v| same_type(arg, v)) {
        Truth::False
    } else {
        Truth::Unknown
    }
}

fn not(t: Truth) -> Truth {
    match t {
        Truth::True => Truth::False,
        Truth::False => Truth::True,
        Truth::Unknown => Truth::Unknown,
    }
}

fn compare(arg: &Json, bound: &Json, accept: fn(Ordering) -> bool, reading: Reading) -> Truth {
    match (arg, bound) {
        (Json::Number(a), Json::Number(b)) => reading.cmp_numbers(a, b).map_or(Truth::Unknown, |o| accept(o).into()),
        _ => Truth::Unknown,
    }
}

impl Condition {
    /// Evaluate against `params.arguments` as sent (`None` when the call sent none).
    pub fn eval(&self, args: Option<&Json>) -> Truth {
        self.eval_in(args, Reading::Sent)
    }

    /// Evaluate against `params.arguments` in `reading` (see `numbers`).
    pub fn eval_in(&self, args: Option<&Json>, reading: Reading) -> Truth {
        let found = lookup(args, &self.path);
        if let Op::Exists(want) = self.op {
            return (found.is_some() == want).into();
        }
        let Some(sent) = found else { return Truth::Unknown };
        let view;
        let arg = match (reading, sent) {
            (Reading::Server(_), Json::Number(t)) if crate::wire::numbers::double(t).is_none() => {
                // Beyond binary64's range: infinite to the server, or an error. Cannot be judged.
                return Truth::Unknown;
            }
            // Comparisons of order read numbers only: any other argument is Unknown, as sent.
            (Reading::Server(_), _) if matches!(self.op, Op::Lt(_) | Op::Lte(_) | Op::Gt(_) | Op::Gte(_)) => sent,
            (Reading::Server(mut budget), Json::String(_) | Json::Array(_) | Json::Object(_)) => {
                // Past its budget the server's reading is not taken, and the condition cannot be
                // evaluated.
                let Some(read) = crate::wire::numbers::server_view(sent, &mut budget) else { return Truth::Unknown };
                view = read;
                &view
            }
            _ => sent,
        };
        match &self.op {
            Op::Eq(v) if same_type(arg, v) => json_eq(arg, v, reading).into(),
            Op::Neq(v) if same_type(arg, v) => (!json_eq(arg, v, reading)).into(),
            Op::Eq(_) | Op::Neq(_) => Truth::Unknown,
            Op::In(set) => member(arg, set, reading),
            Op::NotIn(set) => not(member(arg, set, reading)),
            Op::Lt(b) => compare(arg, b, |o| o == Ordering::Less, reading),
            Op::Lte(b) => compare(arg, b, |o| o != Ordering::Greater, reading),
            Op::Gt(b) => compare(arg, b, |o| o == Ordering::Greater, reading),
            Op::Gte(b) => compare(arg, b, |o| o != Ordering::Less, reading),
            Op::Regex(re) => match arg {
                Json::String(s) => re.is_match(s).into(),
                _ => Truth::Unknown,
            },
            Op::Contains(v) => match (arg, v) {
                (Json::String(s), Json::String(needle)) => s.contains(reading.text(needle).as_ref()).into(),
                (Json::Array(items), v) => {
                    if items.iter().any(|i| json_eq(i, v, reading)) {
                        Truth::True
                    } else if items.iter().all(|i| same_type(i, v)) {
                        Truth::False
                    } else {
                        Truth::Unknown
                    }
                }
                _ => Truth::Unknown,
            },
            Op::Exists(_) => Truth::Unknown,
        }
    }

    /// The denial reason: the condition's own `reason`, or its path and operator (never the value).
    pub fn describe(&self, failed: &str) -> String {
        match &self.reason {
            Some(r) => r.clone(),
            None => format!("{failed}: {} {}", self.path_text, self.op.name()),
        }
    }
}

/// Check `require` then `deny_if`, each on the arguments as sent and as the server reads them
/// (`numbers::Reading`). Returns the first failing condition and why, or `None`. Each condition's
/// server reading of its argument may take `budget` bytes (twice `gateway.max_body_bytes`); one
/// past it cannot be evaluated.
pub fn check<'c>(
    require: &'c [Condition],
    deny_if: &'c [Condition],
    args: Option<&Json>,
    budget: usize,
) -> Option<(&'c Condition, String)> {
    let twice = args.is_some_and(crate::wire::numbers::may_read_differently);
    let both = |c: &Condition, worst: Truth| {
        let sent = c.eval(args);
        match twice.then(|| c.eval_in(args, Reading::Server(budget))) {
            None => sent,
            Some(read) if read == worst || sent == worst => worst,
            Some(read) if read == Truth::Unknown || sent == Truth::Unknown => Truth::Unknown,
            Some(read) => read,
        }
    };
    for c in require {
        match both(c, Truth::False) {
            Truth::True => {}
            Truth::False => return Some((c, c.describe("required condition not met"))),
            Truth::Unknown => return Some((c, c.describe("required condition cannot be evaluated"))),
        }
    }
    for c in deny_if {
        match both(c, Truth::True) {
            Truth::False => {}
            Truth::True => return Some((c, c.describe("denied by condition"))),
            Truth::Unknown => return Some((c, c.describe("deny_if condition cannot be evaluated"))),
        }
    }
    None
}

#[cfg(test)]
mod tests;
