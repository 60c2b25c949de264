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

use crate::wire::fold;
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

/// Where a condition's path leads in the arguments.
#[cfg_attr(test, derive(Debug, PartialEq))]
enum Found<'a> {
    At(&'a Json),
    Absent,
    /// Neither: absent by its exact name, but a member there folds onto it (a server that folds
    /// member names, as Go's `encoding/json` does, reads `Force` as `force`), or the object holds a
    /// `__proto__` member; a step of the other kind into an object, an array or a string; or the
    /// arguments, sent, could not be read (they are not an object).
    Unknown,
}

fn lookup<'a>(args: Option<&'a Json>, path: &[Step]) -> Found<'a> {
    let mut cur = match args {
        None => return Found::Absent,
        Some(object @ Json::Object(_)) => object,
        Some(_) => return Found::Unknown,
    };
    for step in path {
        cur = match (step, cur) {
            (Step::Key(k), Json::Object(members)) => match cur.get(k) {
                Some(v) => v,
                // JavaScript's `Object.assign` makes a `__proto__` member the prototype, whose
                // members the copy then reads as its own.
                None if folds_onto(members, k) || cur.get("__proto__").is_some() => return Found::Unknown,
                None => return Found::Absent,
            },
            (Step::Index(i), Json::Array(items)) => match items.get(*i) {
                Some(v) => v,
                None => return Found::Absent,
            },
            // An index into an object, or any step into a string or by name into an array, may
            // still find something: JavaScript reads `o[0]` as `o["0"]`, and JavaScript and
            // Python both index strings (`"rm"[0]` is `"r"`).
            (_, Json::Object(_) | Json::Array(_) | Json::String(_)) => return Found::Unknown,
            // Null, a boolean or a number holds nothing.
            _ => return Found::Absent,
        };
    }
    Found::At(cur)
}

/// Does a name of `members` fold onto `key` (`fold::name_key`)? Each is folded only as far as
/// `key`'s own key is long (`fold::near_miss`).
fn folds_onto(members: &[(String, Json)], key: &str) -> bool {
    let want = fold::name_key(key);
    members.iter().any(|(k, _)| *k == want || fold::near_miss(k, &[&want]).is_some())
}

fn same_type(a: &Json, b: &Json) -> bool {
    std::mem::discriminant(a) == std::mem::discriminant(b)
}

/// Structural equality of an argument `a`, already in `reading` (from the arguments'
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

/// Could a server's coercion make the argument `a` equal `b`? pydantic reads strings as booleans
/// and numbers, numbers and booleans as each other (`"on"` and `1` as `true`, `"999"` as 999),
/// at any depth, and ignores the members a model does not name.
fn may_coerce(a: &Json, b: &Json, reading: Reading) -> bool {
    let near = |x: &Json, y: &Json| json_eq(x, y, reading) || may_coerce(x, y, reading);
    match (a, b) {
        (Json::String(_), Json::Bool(_) | Json::Number(_))
        | (Json::Number(_), Json::Bool(_))
        | (Json::Bool(_), Json::Number(_)) => true,
        (Json::Array(x), Json::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| near(p, q)),
        (Json::Object(_), Json::Object(y)) => y.iter().all(|(k, w)| a.get(k).is_some_and(|v| near(v, w))),
        _ => false,
    }
}

/// Equality of an argument and a policy value: True if equal, Unknown if a server may coerce the
/// one into the other ([`may_coerce`]), else False.
fn equals(a: &Json, b: &Json, reading: Reading) -> Truth {
    if json_eq(a, b, reading) {
        Truth::True
    } else if may_coerce(a, b, reading) {
        Truth::Unknown
    } else {
        Truth::False
    }
}

/// True if one of `found` is, else Unknown if one is, else False.
fn any(found: impl Iterator<Item = Truth>) -> Truth {
    found.fold(Truth::False, |acc, t| match (acc, t) {
        (Truth::True, _) | (_, Truth::True) => Truth::True,
        (Truth::Unknown, _) | (_, Truth::Unknown) => Truth::Unknown,
        _ => Truth::False,
    })
}

/// Membership: True if an element equals `arg`; Unknown if `arg` may be coerced into one
/// ([`equals`]); False if none may and one has the argument's type; else Unknown.
fn member(arg: &Json, set: &[Json], reading: Reading) -> Truth {
    match any(set.iter().map(|v| equals(arg, v, reading))) {
        Truth::False if !set.iter().any(|v| same_type(arg, v)) => Truth::Unknown,
        found => found,
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

/// The strings of one call's arguments that hold a JSON array or object, by address: each parsed
/// once for all the call's conditions ([`Condition::judge`]).
#[derive(Default)]
struct Memo(Vec<(usize, Option<Held>)>);

/// A string's JSON value and that value written out without escapes (as a string), or `Err` when
/// Python's `json.loads` reads what the strict parser refuses (a name twice, a lone surrogate,
/// `NaN`, nesting past 64).
type Held = Result<(Json, Json), ()>;

impl Memo {
    fn held(&mut self, s: &str) -> Option<&Held> {
        let key = s.as_ptr() as usize;
        let at = match self.0.iter().position(|(k, _)| *k == key) {
            Some(at) => at,
            None => {
                self.0.push((key, read_held(s)));
                self.0.len() - 1
            }
        };
        self.0.get(at).and_then(|(_, held)| held.as_ref())
    }
}

fn read_held(s: &str) -> Option<Held> {
    if !matches!(s.bytes().find(|b| !matches!(b, b' ' | b'\t' | b'\n' | b'\r')), Some(b'[' | b'{')) {
        return None;
    }
    use crate::wire::json::ParseErrorKind::*;
    match crate::wire::json::parse(s.as_bytes()) {
        Ok(value) => {
            let mut text = String::new();
            crate::wire::json::write(&mut text, &value);
            Some(Ok((value, Json::String(text))))
        }
        Err(e)
            if matches!(e.kind, LoneSurrogate | DuplicateKey | FoldedDuplicateKey | FoldedNamesTooLong | TooDeep) =>
        {
            Some(Err(()))
        }
        Err(_) if s.contains("NaN") || s.contains("Infinity") => Some(Err(())),
        Err(_) => None,
    }
}

impl Condition {
    /// Evaluate against `params.arguments` as sent (`None` when the call sent none).
    pub fn eval(&self, args: Option<&Json>) -> Truth {
        match self.find(args) {
            Ok(arg) => self.judge(arg, Reading::Sent, &mut Memo::default()),
            Err(truth) => truth,
        }
    }

    /// Evaluate on `arg`, where the path led in the server's reading of the arguments.
    fn eval_server(&self, arg: &Json, memo: &mut Memo) -> Truth {
        match arg {
            // Beyond binary64's range: infinite to the server, or an error. Cannot be judged.
            Json::Number(t) if crate::wire::numbers::double(t).is_none() => Truth::Unknown,
            _ => self.judge(arg, Reading::Server, memo),
        }
    }

    /// The argument the path leads to, or the condition's truth without one: `exists` is judged
    /// here, and any other operator cannot be evaluated. A name that only folds onto the path's
    /// cannot be judged either way.
    fn find<'a>(&self, args: Option<&'a Json>) -> Result<&'a Json, Truth> {
        match (lookup(args, &self.path), &self.op) {
            (Found::At(_), Op::Exists(want)) => Err((*want).into()),
            (Found::Absent, Op::Exists(want)) => Err((!*want).into()),
            (Found::At(arg), _) => Ok(arg),
            _ => Err(Truth::Unknown),
        }
    }

    /// The operator on `arg`, already in `reading`. A string that holds a JSON array or object is
    /// judged also as a server that parses it reads it: the Python SDK hands a parameter not typed
    /// `str` the parsed value (`pre_parse_json`). An array is judged as one, with every operator;
    /// where the string holds an escape, which hides from its text what the value holds
    /// (`"r\u006d"`), `regex` and `contains` read the value written out without escapes too. Where
    /// the readings differ, or the text opens as JSON that Python reads and this parser refuses, it
    /// cannot be evaluated. Each string is parsed once for all conditions (`memo`).
    fn judge(&self, arg: &Json, reading: Reading, memo: &mut Memo) -> Truth {
        let own = self.judge_value(arg, reading);
        let Json::String(s) = arg else { return own };
        let (value, text) = match memo.held(s) {
            None => return own,
            Some(Err(())) => return Truth::Unknown,
            Some(Ok(held)) => held,
        };
        let items = if matches!(value, Json::Array(_)) { self.judge_value(value, reading) } else { own };
        let plain = if s.contains('\\') && matches!(self.op, Op::Regex(_) | Op::Contains(_)) {
            self.judge_value(text, reading)
        } else {
            own
        };
        if items == own && plain == own {
            own
        } else {
            Truth::Unknown
        }
    }

    fn judge_value(&self, arg: &Json, reading: Reading) -> Truth {
        match &self.op {
            Op::Eq(v) if same_type(arg, v) => equals(arg, v, reading),
            Op::Neq(v) if same_type(arg, v) => not(equals(arg, v, reading)),
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
                (Json::Array(items), v) => match any(items.iter().map(|i| equals(i, v, reading))) {
                    Truth::False if !items.iter().all(|i| same_type(i, v)) => Truth::Unknown,
                    found => found,
                },
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
/// (`numbers::Reading`). Returns the first failing condition and why, or `None`. The server's
/// reading of the arguments is taken once, the first time a condition needs it, within `budget`
/// bytes (twice the arguments' text plus 64, from the caller); past it, no condition can be
/// evaluated on it.
pub fn check<'c>(
    require: &'c [Condition],
    deny_if: &'c [Condition],
    args: Option<&Json>,
    budget: usize,
) -> Option<(&'c Condition, String)> {
    let twice = args.is_some_and(crate::wire::numbers::may_read_differently);
    let mut server: Option<Option<Json>> = None;
    let mut memo = Memo::default();
    let mut both = |c: &Condition, worst: Truth| {
        // Where the path leads is the same in both readings (`exists` is judged there).
        let arg = match c.find(args) {
            Ok(arg) => arg,
            Err(truth) => return truth,
        };
        let sent = c.judge(arg, Reading::Sent, &mut memo);
        let mut read = || {
            // A place that reads the same to the server is judged as it is, without the view.
            let arg = if crate::wire::numbers::may_read_differently(arg) {
                let mut left = budget;
                let view = server.get_or_insert_with(|| crate::wire::numbers::server_view(args?, &mut left));
                match view.as_ref().map(|v| c.find(Some(v))) {
                    Some(Ok(arg)) => arg,
                    Some(Err(truth)) => return truth,
                    // Past the budget the server's reading is not taken: it cannot be evaluated.
                    None => return Truth::Unknown,
                }
            } else {
                arg
            };
            c.eval_server(arg, &mut memo)
        };
        match twice.then(&mut read) {
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
