//! The help, the version and usage errors.

use super::run;

#[test]
fn usage() {
    // No command: the summary (what `-h` prints), on stderr, status 2.
    let (status, out, err) = run(&[]);
    let (_, summary, _) = run(&["-h"]);
    assert_eq!((status, out.as_str(), err.as_str()), (2, "", summary.as_str()));
    assert!(
        summary.starts_with(
            "Check, explain and test mcp-policy-filter policies (PolicyLayer policy.json)\n\n\
             Usage: mcp-policy <COMMAND>\n\n\
             Commands:\n\
             \x20 check     Check policies: load each one exactly as the Envoy filter does\n\
             \x20 explain   Decide a request with the filter's own code, and say why\n\
             \x20 apply     Put a policy live in a running Envoy, through the ECDS file it reads\n\
             \x20 grant-id  Print the grant id of a token read from standard input\n\
             \x20 test      Test a policy against a tests file of calls and the decisions expected\n\
             \x20 contain   Cut off one identity of a policy set at once: add a `contain` entry\n\
             \x20 release   Restore an identity cut off by `contain`: remove its `contain` entry\n\
             \x20 pin       Pin an MCP server's tool definitions: print each tool's `pin`\n\
             \x20 schema    Print the JSON Schema of the policy file (generated from the filter's config types)\n"
        ),
        "{summary}"
    );
    // --help: what it runs, the commands, and every exit status.
    let (status, out, err) = run(&["--help"]);
    assert_eq!((status, err.as_str()), (0, ""));
    assert!(
        out.contains("\nRuns the filter's own code: a policy is read exactly as the filter reads it in Envoy"),
        "{out}"
    );
    assert!(
        out.ends_with(
            "Exit status:\n\
             \x20 0  check: every policy is valid; explain: the request would be forwarded to the MCP server;\n\
             \x20    apply: Envoy loaded the policy; test: every case got the decision expected\n\
             \x20 1  a policy is invalid; test: a case got another decision than expected\n\
             \x20 2  usage error, or a file cannot be read; test: also an invalid policy or tests file\n\
             \x20 3  explain: the filter would refuse the request (it answers the agent itself)\n\
             \x20 4  explain: the request would be held until a person approves it (require_approval)\n\
             \x20 5  apply: Envoy refused the policy, or did not confirm it in time (the previous one serves)\n"
        ),
        "{out}"
    );
    // A command's help: its options with their defaults, and its own exit statuses.
    let (status, out, err) = run(&["explain", "--help"]);
    assert_eq!((status, err.as_str()), (0, ""));
    assert!(out.contains("\nUsage: mcp-policy explain [OPTIONS] <POLICY.json> <REQUEST.json>\n"), "{out}");
    assert!(
        out.contains(
            "      --grant <LABEL>\n\
             \x20         The agent's credential (default `cli`): sent as `Authorization:\n\
             \x20         Bearer LABEL`, or as `gateway.grant_header` when the policy sets one\n"
        ),
        "{out}"
    );
    assert!(
        out.ends_with(
            "Exit status:\n\
             \x20 0  the request would be forwarded to the MCP server (also in dry run)\n\
             \x20 1  the policy is invalid\n\
             \x20 2  usage error, or a file cannot be read\n\
             \x20 3  the filter would refuse the request (it answers the agent itself)\n\
             \x20 4  the request would be held until a person approves it (require_approval)\n"
        ),
        "{out}"
    );
    assert_eq!(run(&["help", "explain"]).1, out);
    // Usage errors: what is wrong, the usage, where to read more; status 2.
    let more = "For more information, try '--help'.\n";
    let explain_usage = "Usage: mcp-policy explain [OPTIONS] <POLICY.json> <REQUEST.json>\n\n";
    for (args, message) in [
        (&["frob"][..], format!("error: unrecognized subcommand 'frob'\n\nUsage: mcp-policy <COMMAND>\n\n{more}")),
        (
            &["check"],
            format!(
                "error: the following required arguments were not provided:\n  <POLICY.json>...\n\n\
                 Usage: mcp-policy check <POLICY.json>...\n\n{more}"
            ),
        ),
        (
            &["explain", "envoy/policy.json"],
            format!(
                "error: the following required arguments were not provided:\n  <REQUEST.json>\n\n\
                 Usage: mcp-policy explain <POLICY.json> <REQUEST.json>\n\n{more}"
            ),
        ),
        (
            &["explain", "a", "b", "--grant"],
            format!("error: a value is required for '--grant <LABEL>' but none was supplied\n\n{more}"),
        ),
        (
            &["explain", "a", "b", "--grant", "x", "--grant", "y"],
            format!("error: the argument '--grant <LABEL>' cannot be used multiple times\n\n{explain_usage}{more}"),
        ),
        (
            &["explain", "a", "b", "--grnat", "x"],
            format!(
                "error: unexpected argument '--grnat' found\n\n  tip: a similar argument exists: '--grant'\n\n\
                 Usage: mcp-policy explain --grant <LABEL> <POLICY.json> <REQUEST.json>\n\n{more}"
            ),
        ),
        (
            &["explain", "a", "b", "--grant="],
            format!("error: --grant must be non-empty, without control characters\n\n{explain_usage}{more}"),
        ),
        (
            &["explain", "a", "b", "--path", ""],
            format!(
                "error: --cluster, --authority, --path and --protocol-version must be non-empty, without control characters\n\n\
                 {explain_usage}{more}"
            ),
        ),
        (
            &["check", "envoy/policy.json", "--strict"],
            format!(
                "error: unexpected argument '--strict' found\n\n  tip: to pass '--strict' as a value, use '-- --strict'\n\n\
                 Usage: mcp-policy check <POLICY.json>...\n\n{more}"
            ),
        ),
        (&["schema", "x"], format!("error: unexpected argument 'x' found\n\nUsage: mcp-policy schema [OPTIONS]\n\n{more}")),
    ] {
        let (status, out, err) = run(args);
        assert_eq!((status, out.as_str()), (2, ""), "{args:?}");
        assert_eq!(err, message, "{args:?}");
    }
    let (status, out, _) = run(&["--version"]);
    assert_eq!((status, out), (0, format!("mcp-policy {}\n", env!("CARGO_PKG_VERSION"))));
}
