//! Link the module with every symbol resolved at load (`-z now`, the `BIND_NOW` flag), not only by
//! the toolchain's default: Envoy opens it with `RTLD_LAZY`, so without the flag a
//! callback that this Envoy lacks would be found missing only when first called. With it, an older
//! Envoy, which lacks a callback the module imports, fails to load the module and refuses the
//! configuration (`ffi::hooks::ABI_VERSION`).

fn main() {
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-z,now");
    }
    println!("cargo:rerun-if-changed=build.rs");
}
