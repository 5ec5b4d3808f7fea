// SPDX-License-Identifier: MIT
//! Lets this crate's tests and examples run against an uninstalled
//! libcuflag-client: cuflag-sys found it in a directory (CUFLAG_LIB_DIR or
//! the source tree's meson build), which goes into their run path.

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_CUFLAG_CLIENT_LIB_DIR");
    if let Some(dir) = std::env::var_os("DEP_CUFLAG_CLIENT_LIB_DIR") {
        let dir = std::path::PathBuf::from(dir);
        println!("cargo:rustc-link-arg-tests=-Wl,-rpath,{}", dir.display());
        println!("cargo:rustc-link-arg-examples=-Wl,-rpath,{}", dir.display());
    }
}
