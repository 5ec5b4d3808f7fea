// SPDX-License-Identifier: MIT
//! Finds libcuflag-client, in this order: `$CUFLAG_LIB_DIR` (a directory
//! holding libcuflag-client.so, such as a meson build's `client/`),
//! pkg-config's `cuflag-client` (an installed library), then the meson
//! build of this source tree (`../../build/client`). The directory found
//! goes to dependents' build scripts as `DEP_CUFLAG_CLIENT_LIB_DIR`, so that
//! their tests and examples can run from an uninstalled build.

use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

const LIB_FILE: &str = "libcuflag-client.so";

fn from_env() -> Option<PathBuf> {
    env::var_os("CUFLAG_LIB_DIR").map(PathBuf::from)
}

/// The -L directories pkg-config gives, or None when it has no cuflag-client.
fn from_pkg_config() -> Option<Vec<PathBuf>> {
    let out = Command::new("pkg-config")
        .args(["--libs-only-L", "cuflag-client"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    Some(
        text.split_whitespace()
            .filter_map(|w| w.strip_prefix("-L"))
            .map(PathBuf::from)
            .collect(),
    )
}

fn from_source_tree() -> Option<PathBuf> {
    let manifest = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR")?);
    let dir = manifest.join("..").join("..").join("build").join("client");
    if dir.join(LIB_FILE).exists() {
        Some(dir)
    } else {
        None
    }
}

fn search(dir: &Path) {
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:lib_dir={}", dir.display());
}

fn main() {
    println!("cargo:rerun-if-env-changed=CUFLAG_LIB_DIR");
    println!("cargo:rerun-if-env-changed=PKG_CONFIG_PATH");
    println!("cargo:rerun-if-changed=build.rs");
    if let Some(dir) = from_env() {
        if !dir.join(LIB_FILE).exists() {
            panic!("CUFLAG_LIB_DIR={}: no {} there", dir.display(), LIB_FILE);
        }
        search(&dir);
    } else if let Some(dirs) = from_pkg_config() {
        // An empty list: the library is in the linker's default path.
        for dir in &dirs {
            println!("cargo:rustc-link-search=native={}", dir.display());
        }
    } else if let Some(dir) = from_source_tree() {
        search(&dir);
    } else {
        println!(
            "cargo:warning=libcuflag-client not found: set CUFLAG_LIB_DIR to a meson \
             build's client/ directory, or install it (pkg-config cuflag-client)"
        );
    }
    println!("cargo:rustc-link-lib=dylib=cuflag-client");
}
