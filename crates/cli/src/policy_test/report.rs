//! What `mcp-policy test` reports: one line per case, the expected and actual decision of each failed
//! case as a diff, a summary line; and the same as JUnit XML for CI.

use quick_junit::{NonSuccessKind, TestCase, TestCaseStatus, TestSuite};

use super::spec::{Case, Expect};

/// The files a run read, named in the report.
pub struct Source<'a> {
    pub tests: &'a str,
    pub policy: &'a str,
}

/// The decision the filter made.
pub struct Actual {
    /// `Decision::label`: the kind, or `would_deny` in dry-run mode.
    pub kind: &'static str,
    pub rule: Option<String>,
    pub reason: Option<String>,
}

/// A case, its decision, and the lines of expected versus actual.
pub struct Verdict<'c> {
    pub name: &'c str,
    /// Diff lines: ` ` matched, `-` expected, `+` actual.
    lines: Vec<String>,
    passed: bool,
}

impl<'c> Verdict<'c> {
    pub fn new(case: &'c Case, actual: Actual) -> Self {
        let Expect { kind, rule, reason } = &case.expect;
        let mut lines = Vec::new();
        let mut passed = true;
        let mut field = |name: &str, matched: bool, expected: String, got: String| {
            if matched {
                lines.push(format!(" {name:<7} {got}"));
            } else {
                passed = false;
                lines.push(format!("-{name:<7} {expected}"));
                lines.push(format!("+{name:<7} {got}"));
            }
        };
        field("kind:", kind.as_str() == actual.kind, kind.as_str().to_owned(), actual.kind.to_owned());
        let shown = |v: &Option<String>| v.clone().unwrap_or_else(|| "-".into());
        if let Some(rule) = rule {
            field("rule:", actual.rule.as_ref() == Some(rule), rule.clone(), shown(&actual.rule));
        }
        if let Some(part) = reason {
            let matched = actual.reason.as_deref().is_some_and(|r| r.contains(part.as_str()));
            field("reason:", matched, format!("contains {part:?}"), shown(&actual.reason));
        }
        // A failed case also shows the rule and reason it was not asked for: what decided it.
        if !passed {
            for (name, asked, got) in
                [("rule:", rule.is_some(), &actual.rule), ("reason:", reason.is_some(), &actual.reason)]
            {
                if let (false, Some(got)) = (asked, got) {
                    lines.push(format!("+{name:<7} {got}"));
                }
            }
        }
        Verdict { name: &case.name, lines, passed }
    }

    pub fn passed(&self) -> bool {
        self.passed
    }

    fn diff(&self) -> String {
        let mut out = String::from("--- expected\n+++ actual\n");
        for l in &self.lines {
            out.push_str(l);
            out.push('\n');
        }
        out
    }
}

fn cases(n: usize) -> String {
    format!("{n} {}", if n == 1 { "case" } else { "cases" })
}

/// The text report, for stdout.
pub fn text(source: &Source<'_>, verdicts: &[Verdict<'_>]) -> String {
    let mut out = format!("running {} of {} on {}\n", cases(verdicts.len()), source.tests, source.policy);
    for v in verdicts {
        out.push_str(&format!("case {} ... {}\n", v.name, if v.passed { "ok" } else { "FAILED" }));
    }
    let failed: Vec<_> = verdicts.iter().filter(|v| !v.passed).collect();
    if !failed.is_empty() {
        out.push_str("\nfailures:\n");
        for v in &failed {
            out.push_str(&format!("\n---- {} ----\n{}", v.name, v.diff()));
        }
    }
    let passed = verdicts.len() - failed.len();
    let result = if failed.is_empty() { "ok" } else { "FAILED" };
    out.push_str(&format!("\ntest result: {result}. {passed} passed; {} failed\n", failed.len()));
    out
}

/// The JUnit XML report: one test suite (the tests file), one test case per case, a failure holding
/// the diff. No times or timestamps: the same run gives the same file.
pub fn junit(source: &Source<'_>, verdicts: &[Verdict<'_>]) -> Result<String, String> {
    let mut suite = TestSuite::new(source.tests);
    suite.add_property(("policy", source.policy));
    for v in verdicts {
        let status = if v.passed {
            TestCaseStatus::success()
        } else {
            let mut s = TestCaseStatus::non_success(NonSuccessKind::Failure);
            s.set_message("the decision differs from the expected one");
            s.set_type("decision");
            s.set_description(v.diff());
            s
        };
        let mut case = TestCase::new(v.name, status);
        case.set_classname(source.tests);
        suite.add_test_case(case);
    }
    let mut report = quick_junit::Report::new("mcp-policy test");
    report.add_test_suite(suite);
    report.to_string().map_err(|e| format!("cannot render the JUnit report: {e}"))
}
