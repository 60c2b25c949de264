//! Link the module with every symbol resolved at load (`-z now`, the `BIND_NOW` flag), not only by
//! the toolchain's default: Envoy opens it with `RTLD_LAZY`, so without the flag a
//! callback that this Envoy lacks would be found missing only when first called. With it, an older
//! Envoy, which lacks a callback the module imports, fails to load the module and refuses the
//! configuration (`ffi::hooks::ABI_VERSION`).
//!
//! Also name how the module is built (`MCP_POLICY_NATIVE_BUILD`, read by `ffi::hooks::BUILD`): profile-
//! guided when rustc is given `-Cprofile-use` (`make dynamic-module` with the profile; "with a stale
//! profile" when the Makefile says the sources changed since it was taken, `MCP_POLICY_NATIVE_PROFILE`),
//! instrumented when given `-Cprofile-generate` (`make dynamic-module-profile`), and otherwise without
//! a profile. A profile changes speed only, so the module says which it is: in its load line, and in
//! its OCI image's description (scripts/oci.sh reads it from the file). The flags are read from
//! `CARGO_ENCODED_RUSTFLAGS`, as cargo hands them to build scripts: flags that reach rustc another
//! way (`cargo rustc -- …`, a `RUSTC_WRAPPER`) are not seen.

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-z,now");
    }
    let flags = std::env::var("CARGO_ENCODED_RUSTFLAGS").unwrap_or_default();
    // Each flag, with a `-C` given apart from its value joined to it: `-C profile-use=…` as `-Cprofile-use=…`.
    let mut codegen = Vec::new();
    let mut args = flags.split('\x1f');
    while let Some(arg) = args.next() {
        match arg {
            "-C" | "--codegen" => codegen.extend(args.next().map(str::to_owned)),
            _ => codegen.extend(arg.strip_prefix("--codegen=").or(arg.strip_prefix("-C")).map(str::to_owned)),
        }
    }
    let uses = |option: &str| codegen.iter().any(|c| c == option || c.starts_with(&format!("{option}=")));
    let stale = std::env::var("MCP_POLICY_NATIVE_PROFILE").as_deref() == Ok("stale");
    let build = if uses("profile-use") && stale {
        "profile-guided with a stale profile"
    } else if uses("profile-use") {
        "profile-guided"
    } else if uses("profile-generate") {
        "instrumented for profiling"
    } else {
        "without a profile"
    };
    println!("cargo:rustc-env=MCP_POLICY_NATIVE_BUILD={build}");
    println!("cargo:rerun-if-env-changed=CARGO_ENCODED_RUSTFLAGS");
    println!("cargo:rerun-if-env-changed=RUSTFLAGS");
    println!("cargo:rerun-if-env-changed=MCP_POLICY_NATIVE_PROFILE");
    println!("cargo:rerun-if-changed=build.rs");
}
