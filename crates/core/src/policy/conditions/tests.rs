use super::*;
use crate::policy::needle::Needle;
use crate::wire::json::parse;
use crate::wire::numbers::cmp_numbers;

const MIB: usize = 1 << 20;

fn j(text: &str) -> Json {
    parse(text.as_bytes()).unwrap()
}

fn cond(path: &str, op: Op) -> Condition {
    Condition { path_text: path.into(), path: parse_path(path).unwrap(), op, reason: None, rule: "r".into() }
}

#[test]
fn paths() {
    assert_eq!(
        parse_path("args.a.b[2].c").unwrap(),
        vec![Step::Key("a".into()), Step::Key("b".into()), Step::Index(2), Step::Key("c".into())]
    );
    assert_eq!(parse_path("args[0]").unwrap(), vec![Step::Index(0)]);
    for bad in ["args", "arg.x", "args.", "args..x", "args.x[", "args.x[-1]", "args.x[a]", "args.x]", "x.args"] {
        assert!(parse_path(bad).is_err(), "{bad}");
    }
    let args = j(r#"{"a":{"b":[1,{"c":"deep"}]}}"#);
    assert_eq!(lookup(Some(&args), &parse_path("args.a.b[1].c").unwrap()), Found::At(&j(r#""deep""#)));
    assert_eq!(lookup(Some(&args), &parse_path("args.a.b[5]").unwrap()), Found::Absent);
    // A step of the other kind cannot say what a server finds: `o[0]` is `o["0"]` in JavaScript,
    // and strings index. Null, booleans and numbers hold nothing.
    let mixed = j(r#"{"a":{"0":"rm"},"s":"rm","l":["rm"],"n":null,"t":true,"x":1}"#);
    for (path, found) in [
        ("args.a[0]", Found::Unknown),
        ("args[0]", Found::Unknown),
        ("args.s[0]", Found::Unknown),
        ("args.s.length", Found::Unknown),
        ("args.l.0", Found::Unknown),
        ("args.n.a", Found::Absent),
        ("args.n[0]", Found::Absent),
        ("args.t[0]", Found::Absent),
        ("args.x.a", Found::Absent),
    ] {
        assert_eq!(lookup(Some(&mixed), &parse_path(path).unwrap()), found, "{path}");
    }
    assert_eq!(lookup(None, &parse_path("args.a").unwrap()), Found::Absent);
    // A name that folds onto the path's, at any step, is neither there nor absent.
    assert_eq!(lookup(Some(&args), &parse_path("args.A.b").unwrap()), Found::Unknown);
    assert_eq!(lookup(Some(&j(r#"{"a":{"B\u0000":1}}"#)), &parse_path("args.a.b").unwrap()), Found::Unknown);
    assert_eq!(lookup(Some(&args), &parse_path("args.a.c").unwrap()), Found::Absent);
    // Arguments that are not an object (sent, but not read) hold nothing that can be judged.
    assert_eq!(lookup(Some(&Json::Null), &parse_path("args.a").unwrap()), Found::Unknown);
}

#[test]
fn an_index_into_an_object_or_a_string_is_not_judged() {
    // `deny_if exists args.cmds[0]` meant "no commands": a JavaScript server reads `{"0":"rm"}`
    // at `cmds[0]`, and a string's first character is there in JavaScript and Python alike.
    let deny = [cond("args.cmds[0]", Op::Exists(true))];
    for args in [r#"{"cmds":{"0":"rm"}}"#, r#"{"cmds":"rm"}"#] {
        assert_eq!(
            check(&[], &deny, Some(&j(args)), MIB).map(|(_, w)| w).as_deref(),
            Some("deny_if condition cannot be evaluated: args.cmds[0] exists"),
            "{args}"
        );
    }
    assert_eq!(
        check(&[], &deny, Some(&j(r#"{"cmds":["rm"]}"#)), MIB).map(|(_, w)| w).as_deref(),
        Some("denied by condition: args.cmds[0] exists")
    );
    for args in [r#"{"cmds":[]}"#, r#"{"cmds":null}"#, r#"{}"#] {
        assert!(check(&[], &deny, Some(&j(args)), MIB).is_none(), "{args}");
    }
}

#[test]
fn exists_is_not_judged_on_a_name_that_folds_onto_its_path() {
    // Go's encoding/json reads `Force`, `force\u0000` or fullwidth `ｆｏｒｃｅ` as `force`.
    let deny = [cond("args.force", Op::Exists(true))];
    let require_absent = [cond("args.force", Op::Exists(false))];
    for args in [r#"{"Force":true}"#, r#"{"force\u0000":true}"#, r#"{"\uff46\uff4f\uff52\uff43\uff45":true}"#] {
        let args = j(args);
        assert_eq!(
            check(&[], &deny, Some(&args), MIB).map(|(_, w)| w).as_deref(),
            Some("deny_if condition cannot be evaluated: args.force exists")
        );
        assert_eq!(
            check(&require_absent, &[], Some(&args), MIB).map(|(_, w)| w).as_deref(),
            Some("required condition cannot be evaluated: args.force exists")
        );
    }
    // `Object.assign({}, args)` makes `__proto__` the copy's prototype, and `copy.force` true.
    assert_eq!(
        check(&[], &deny, Some(&j(r#"{"__proto__":{"force":true}}"#)), MIB).map(|(_, w)| w).as_deref(),
        Some("deny_if condition cannot be evaluated: args.force exists")
    );
    let other = j(r#"{"forced":true}"#);
    assert!(check(&[], &deny, Some(&other), MIB).is_none());
    assert!(check(&require_absent, &[], Some(&other), MIB).is_none());
}

#[test]
fn exact_number_comparison() {
    use Ordering::*;
    assert_eq!(cmp_numbers("100", "100.0"), Some(Equal));
    assert_eq!(cmp_numbers("1e2", "100"), Some(Equal));
    assert_eq!(cmp_numbers("-0", "0"), Some(Equal));
    assert_eq!(cmp_numbers("0.1", "0.10"), Some(Equal));
    assert_eq!(cmp_numbers("9007199254740993", "9007199254740992"), Some(Greater));
    assert_eq!(cmp_numbers("123456789012345678901234567890", "123456789012345678901234567891"), Some(Less));
    assert_eq!(cmp_numbers("-5", "3"), Some(Less));
    assert_eq!(cmp_numbers("-5", "-30"), Some(Greater));
    assert_eq!(cmp_numbers("2.5", "25e-1"), Some(Equal));
    assert_eq!(cmp_numbers("0.001", "0.01"), Some(Less));
    assert_eq!(cmp_numbers("99", "100"), Some(Less));
}

#[test]
fn type_strict_equality() {
    let c = cond("args.vmid", Op::In(vec![j("100"), j("101")]));
    assert_eq!(c.eval(Some(&j(r#"{"vmid":100}"#))), Truth::True);
    assert_eq!(c.eval(Some(&j(r#"{"vmid":100.0}"#))), Truth::True);
    assert_eq!(c.eval(Some(&j(r#"{"vmid":102}"#))), Truth::False);
    for s in [r#""100""#, r#""1_01""#, r#"" 100 ""#, r#""+100""#, "[100]", "null", "true"] {
        assert_eq!(c.eval(Some(&j(&format!(r#"{{"vmid":{s}}}"#)))), Truth::Unknown, "{s}");
    }
    assert_eq!(c.eval(Some(&j("{}"))), Truth::Unknown);
    assert_eq!(c.eval(None), Truth::Unknown);
    let n = cond("args.vmid", Op::NotIn(vec![j("100")]));
    assert_eq!(n.eval(Some(&j(r#"{"vmid":7}"#))), Truth::True);
    assert_eq!(n.eval(Some(&j(r#"{"vmid":"7"}"#))), Truth::Unknown);
    let e = cond("args.mode", Op::Eq(j(r#""safe""#)));
    assert_eq!(e.eval(Some(&j(r#"{"mode":"safe"}"#))), Truth::True);
    assert_eq!(e.eval(Some(&j(r#"{"mode":"Safe"}"#))), Truth::False);
    assert_eq!(e.eval(Some(&j(r#"{"mode":1}"#))), Truth::Unknown);
    let ne = cond("args.mode", Op::Neq(j(r#""x""#)));
    assert_eq!(ne.eval(Some(&j(r#"{"mode":"y"}"#))), Truth::True);
    let obj = cond("args.o", Op::Eq(j(r#"{"a":1,"b":[1,2]}"#)));
    assert_eq!(obj.eval(Some(&j(r#"{"o":{"b":[1,2.0],"a":1}}"#))), Truth::True);
}

#[test]
fn a_set_judges_a_value_a_server_may_coerce_into_one_of_its_types_only_when_equal() {
    // pydantic reads "on", "True", "1" and 1 as true, "999" as 999, and true as 1.
    let force = cond("args.force", Op::In(vec![j("true"), j(r#""true""#)]));
    assert_eq!(force.eval(Some(&j(r#"{"force":"true"}"#))), Truth::True);
    assert_eq!(force.eval(Some(&j(r#"{"force":true}"#))), Truth::True);
    for v in [r#""on""#, r#""True""#, r#""1""#, "1"] {
        assert_eq!(force.eval(Some(&j(&format!(r#"{{"force":{v}}}"#)))), Truth::Unknown, "{v}");
    }
    // No server reads false as true or as "true".
    assert_eq!(force.eval(Some(&j(r#"{"force":false}"#))), Truth::False);
    let vmid = cond("args.vmid", Op::NotIn(vec![j("999"), j(r#""all""#)]));
    assert_eq!(vmid.eval(Some(&j(r#"{"vmid":"999"}"#))), Truth::Unknown);
    assert_eq!(vmid.eval(Some(&j(r#"{"vmid":"x"}"#))), Truth::Unknown);
    assert_eq!(vmid.eval(Some(&j(r#"{"vmid":5}"#))), Truth::True);
    assert_eq!(vmid.eval(Some(&j(r#"{"vmid":999}"#))), Truth::False);
    let counts = cond("args.n", Op::In(vec![j("1"), j("true")]));
    assert_eq!(counts.eval(Some(&j(r#"{"n":false}"#))), Truth::Unknown);
    assert_eq!(counts.eval(Some(&j(r#"{"n":2}"#))), Truth::Unknown);
    // Nothing coerces a string into null: a set of strings and null judges strings.
    let env = cond("args.env", Op::In(vec![j(r#""prod""#), j("null")]));
    assert_eq!(env.eval(Some(&j(r#"{"env":"dev"}"#))), Truth::False);
    let modes = cond("args.mode", Op::In(vec![j(r#""a""#), j(r#""b""#)]));
    assert_eq!(modes.eval(Some(&j(r#"{"mode":"c"}"#))), Truth::False);
}

#[test]
fn values_a_server_may_coerce_at_any_depth_are_not_judged_unequal() {
    // pydantic reads {"recursive":"true"} and {"recursive":1} as Opts(recursive=True), ["1","2"]
    // as [1, 2], and ignores members a model does not name.
    let opts = cond("args.opts", Op::Eq(j(r#"{"recursive":true}"#)));
    for v in [r#"{"recursive":"true"}"#, r#"{"recursive":1}"#, r#"{"recursive":true,"x":1}"#] {
        assert_eq!(opts.eval(Some(&j(&format!(r#"{{"opts":{v}}}"#)))), Truth::Unknown, "{v}");
    }
    assert_eq!(opts.eval(Some(&j(r#"{"opts":{"recursive":true}}"#))), Truth::True);
    assert_eq!(opts.eval(Some(&j(r#"{"opts":{"recursive":false}}"#))), Truth::False);
    assert_eq!(opts.eval(Some(&j(r#"{"opts":{"other":true}}"#))), Truth::False);
    let pair = cond("args.p", Op::In(vec![j("[1,2]")]));
    assert_eq!(pair.eval(Some(&j(r#"{"p":["1","2"]}"#))), Truth::Unknown);
    assert_eq!(pair.eval(Some(&j(r#"{"p":[1,3]}"#))), Truth::False);
    let nested = cond("args.p", Op::Contains(j("[1]")));
    assert_eq!(nested.eval(Some(&j(r#"{"p":[["1"]]}"#))), Truth::Unknown);
    assert_eq!(nested.eval(Some(&j(r#"{"p":[[2]]}"#))), Truth::False);
    let yes = cond("args.o", Op::Neq(j(r#"{"a":true}"#)));
    assert_eq!(yes.eval(Some(&j(r#"{"o":{"a":"yes"}}"#))), Truth::Unknown);
}

#[test]
fn a_string_holding_json_is_judged_as_a_server_that_parses_it_reads_it() {
    // The Python SDK's pre_parse_json hands `cmds: list[str]` the list inside the string.
    let contains = |v: &str| cond("args.cmds", Op::Contains(j(v)));
    let rm = contains(r#""rm""#);
    let staging = contains(r#""staging""#);
    let regex = cond("args.cmds", Op::Regex(Needle::new(regex_lite::Regex::new("rm -rf").unwrap())));
    let args = |text: &str| {
        let mut out = String::new();
        crate::wire::json::write(&mut out, &Json::String(text.into()));
        j(&format!(r#"{{"cmds":{out}}}"#))
    };
    // An escape hides from the text what the parsed strings hold.
    let hidden = args(r#"["r\u006d","-rf","/"]"#);
    assert_eq!(rm.eval(Some(&hidden)), Truth::Unknown);
    assert_eq!(regex.eval(Some(&args(r#"["r\u006d -rf /"]"#))), Truth::Unknown);
    // A substring of the text is not an element of the list.
    assert_eq!(staging.eval(Some(&args(r#"["prod","not-staging"]"#))), Truth::Unknown);
    assert_eq!(
        check(std::slice::from_ref(&staging), &[], Some(&args(r#"["prod","not-staging"]"#)), MIB)
            .map(|(_, w)| w)
            .as_deref(),
        Some("required condition cannot be evaluated: args.cmds contains")
    );
    // Readings that agree are judged.
    assert_eq!(staging.eval(Some(&args(r#" ["prod", "staging"] "#))), Truth::True);
    assert_eq!(rm.eval(Some(&args(r#"["ls","pwd"]"#))), Truth::False);
    assert_eq!(rm.eval(Some(&args(r#"["rm"]"#))), Truth::True);
    assert_eq!(rm.eval(Some(&args(r#"{"sql":"select 1"}"#))), Truth::False);
    // Text that is not JSON (Python leaves it a string) is judged as it is.
    assert_eq!(rm.eval(Some(&args("[INFO] rm done"))), Truth::True);
    assert_eq!(rm.eval(Some(&args("[a-z]+"))), Truth::False);
    // JSON that Python reads and the strict parser refuses cannot be judged.
    for text in [r#"[{"a":1,"a":2}]"#, r#"{"a":"ls","a":"x"}"#, r#"["ls", NaN]"#, r#"["\ud800"]"#] {
        assert_eq!(rm.eval(Some(&args(text))), Truth::Unknown, "{text}");
    }
    assert_eq!(rm.eval(Some(&args(r#"["ls",]"#))), Truth::False);
    // An array is judged as one, with every operator: a regex or a set of strings cannot judge it,
    // as they cannot judge `["rm","-rf","/"]` sent as an array (`cmd: str | list[str]`).
    let anchored = cond("args.cmds", Op::Regex(Needle::new(regex_lite::Regex::new(r"^\s*rm\b").unwrap())));
    let commands = cond("args.cmds", Op::In(vec![j(r#""rm""#), j(r#""shutdown""#)]));
    for c in [&anchored, &commands] {
        assert_eq!(c.eval(Some(&args(r#"["rm","-rf","/"]"#))), Truth::Unknown);
        assert_eq!(c.eval(Some(&j(r#"{"cmds":["rm","-rf","/"]}"#))), Truth::Unknown);
    }
    // An object without escapes is judged as its text, spaces and all (Python's json.dumps).
    let env = cond("args.cmds", Op::Regex(Needle::new(regex_lite::Regex::new(r#""env": "staging""#).unwrap())));
    assert_eq!(env.eval(Some(&args(r#"{"env": "staging", "limit": 5}"#))), Truth::True);
    // Each string is parsed once for all of a call's conditions, which judge it alike.
    let many: Vec<Condition> = (0..20).map(|_| rm.clone()).collect();
    let big = args(&format!("[{}\"ls\"]", "\"x\",".repeat(50_000)));
    assert!(check(&[], &many, Some(&big), MIB).is_none());
    let with_rm = args(&format!("[{}\"rm\"]", "\"x\",".repeat(50_000)));
    assert_eq!(
        check(&[], &many, Some(&with_rm), MIB).map(|(_, w)| w).as_deref(),
        Some("denied by condition: args.cmds contains")
    );
}

#[test]
fn ordering_ops_need_numbers() {
    let lt = cond("args.n", Op::Lt(j("10")));
    assert_eq!(lt.eval(Some(&j(r#"{"n":9.99}"#))), Truth::True);
    assert_eq!(lt.eval(Some(&j(r#"{"n":10}"#))), Truth::False);
    assert_eq!(lt.eval(Some(&j(r#"{"n":"9"}"#))), Truth::Unknown);
    assert_eq!(cond("args.n", Op::Lte(j("10"))).eval(Some(&j(r#"{"n":10}"#))), Truth::True);
    assert_eq!(cond("args.n", Op::Gt(j("10"))).eval(Some(&j(r#"{"n":10}"#))), Truth::False);
    assert_eq!(cond("args.n", Op::Gte(j("10"))).eval(Some(&j(r#"{"n":10}"#))), Truth::True);
    let big = cond("args.n", Op::Gt(j("9007199254740992")));
    assert_eq!(big.eval(Some(&j(r#"{"n":9007199254740993}"#))), Truth::True);
}

#[test]
fn regex_contains_exists() {
    let re = cond("args.command", Op::Regex(Needle::new(regex_lite::Regex::new(r"(^|\s)rm\s").unwrap())));
    assert_eq!(re.eval(Some(&j(r#"{"command":"sudo rm -rf /"}"#))), Truth::True);
    assert_eq!(re.eval(Some(&j(r#"{"command":"uptime"}"#))), Truth::False);
    assert_eq!(re.eval(Some(&j(r#"{"command":["rm","-rf"]}"#))), Truth::Unknown);
    // A pattern led by plain text is run only where that text occurs: every occurrence is tried.
    let lit = cond("args.command", Op::Regex(Needle::new(regex_lite::Regex::new(r"rm\s+-rf\b").unwrap())));
    for (command, truth) in [
        ("rm x; rm  -rf /", Truth::True),
        ("rm x; rm -rfv", Truth::False),
        ("farm -rf", Truth::True),
        ("rm", Truth::False),
        ("", Truth::False),
    ] {
        let mut args = String::from(r#"{"command":"#);
        crate::wire::json::write_str(&mut args, command);
        args.push('}');
        assert_eq!(lit.eval(Some(&j(&args))), truth, "{command}");
    }
    // The server's reading is searched too: fullwidth `ｒｍ` is `rm` after NFKC.
    let (_, why) = check(&[], &[lit], Some(&j(r#"{"command":"\uff52\uff4d -rf /"}"#)), MIB).unwrap();
    assert_eq!(why, "denied by condition: args.command regex");
    let c = cond("args.command", Op::Contains(j(r#""shadow""#)));
    assert_eq!(c.eval(Some(&j(r#"{"command":"cat /etc/shadow"}"#))), Truth::True);
    assert_eq!(c.eval(Some(&j(r#"{"command":["a","shadow"]}"#))), Truth::True);
    assert_eq!(c.eval(Some(&j(r#"{"command":["a","b"]}"#))), Truth::False);
    assert_eq!(c.eval(Some(&j(r#"{"command":["a",1]}"#))), Truth::Unknown);
    assert_eq!(c.eval(Some(&j(r#"{"command":5}"#))), Truth::Unknown);
    let ex = cond("args.force", Op::Exists(true));
    assert_eq!(ex.eval(Some(&j(r#"{"force":null}"#))), Truth::True);
    assert_eq!(ex.eval(Some(&j("{}"))), Truth::False);
    assert_eq!(cond("args.force", Op::Exists(false)).eval(None), Truth::True);
}

#[test]
fn unknown_denies_in_both_lists() {
    let req = [cond("args.vmid", Op::In(vec![j("100")]))];
    let deny = [cond("args.command", Op::Regex(Needle::new(regex_lite::Regex::new("rm").unwrap())))];
    let ok = j(r#"{"vmid":100,"command":"ls"}"#);
    assert!(check(&req, &deny, Some(&ok), MIB).is_none());
    let (_, why) = check(&req, &deny, Some(&j(r#"{"vmid":"100","command":"ls"}"#)), MIB).unwrap();
    assert_eq!(why, "required condition cannot be evaluated: args.vmid in");
    let (_, why) = check(&req, &deny, Some(&j(r#"{"vmid":101,"command":"ls"}"#)), MIB).unwrap();
    assert_eq!(why, "required condition not met: args.vmid in");
    let (_, why) = check(&req, &deny, Some(&j(r#"{"vmid":100,"command":"rm x"}"#)), MIB).unwrap();
    assert_eq!(why, "denied by condition: args.command regex");
    let (_, why) = check(&req, &deny, Some(&j(r#"{"vmid":100}"#)), MIB).unwrap();
    assert_eq!(why, "deny_if condition cannot be evaluated: args.command regex");
}

#[test]
fn the_servers_reading_has_a_budget() {
    let fdfa = |n: usize| "\u{fdfa}".repeat(n);
    let mut set: Vec<Json> = (0..19).map(|i| Json::String(format!("cmd{i}"))).collect();
    set.push(Json::String(fdfa(1000)));
    let req = [cond("args.c", Op::In(set))];
    let deny = [
        cond("args.c", Op::Regex(Needle::new(regex_lite::Regex::new("rm").unwrap()))),
        cond("args.c", Op::Contains(j(r#""x""#))),
    ];
    let mut args = Json::Object(vec![("c".into(), Json::String(fdfa(1000)))]);
    // 3,000 bytes as sent read as 33,000: within a budget of 33,000, the call is judged and
    // passes. The string is read once, for the twenty elements of the list and both deny_if
    // conditions, within the one budget.
    assert!(check(&req, &deny, Some(&args), 33_000).is_none());
    // A byte less, and it cannot be evaluated.
    let (_, why) = check(&req, &deny, Some(&args), 32_999).unwrap();
    assert_eq!(why, "required condition cannot be evaluated: args.c in");
    // deny_if alone: the regex cannot be evaluated either, which denies.
    let (_, why) = check(&[], &deny, Some(&args), 32_999).unwrap();
    assert_eq!(why, "deny_if condition cannot be evaluated: args.c regex");
    // The strings of an array count together: 3,300 and 3,333 bytes as read.
    args = Json::Object(vec![("c".into(), Json::Array(vec![Json::String(fdfa(100)), Json::String(fdfa(101))]))]);
    let has = [cond("args.c", Op::Contains(Json::String(fdfa(101))))];
    assert!(check(&has, &[], Some(&args), 6_633).is_none());
    assert_eq!(
        check(&has, &[], Some(&args), 6_632).map(|(_, w)| w).as_deref(),
        Some("required condition cannot be evaluated: args.c contains")
    );
    // The reading as sent needs no budget: ASCII arguments are judged with none.
    let plain = j(r#"{"c":"cmd3"}"#);
    assert!(check(&req, &deny, Some(&plain), 0).is_none());
}
