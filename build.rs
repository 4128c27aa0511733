//! Link options for the `toolgate` binary that shrink its resident memory (BENCHMARKS.md "Link order").
//!
//! - `-z pack-relative-relocs`: the position-independent binary's relative relocations are
//!   stored packed (DT_RELR), so the loader reads kilobytes instead of the 3 MB `.rela.dyn`
//!   it otherwise pages in at every start. glibc applies them from 2.36 on, and the linker
//!   marks the binary as needing `GLIBC_ABI_DT_RELR`, so an older glibc should refuse to
//!   load it (a missing-version error; not tried here) rather than run it unrelocated.
//!   Only added when the build machine's own glibc is 2.36 or later and the build is native
//!   (the binary runs where it was built, or on a newer system).
//! - `--symbol-ordering-file=link/toolgate.order`: the functions a gateway runs (listed by
//!   `scripts/link-order`) go first in `.text`, so the pages it touches are few and adjacent
//!   rather than spread over 30 MB of code. Names the linker does not find (another build's
//!   hashes) are skipped: a stale list costs memory, never correctness.
//!
//! Both are options of lld, which rustc uses on `x86_64-unknown-linux-gnu` unless another
//! linker is configured; when a linker is (`target.*.linker`, or a `RUSTFLAGS` flag naming
//! `linker`, `link-self-contained` or `fuse-ld`), or with `TOOLGATE_LINK_PLAIN=1` (for a
//! binary that must run on an older glibc), nothing is added.

use std::{env, path::Path, process::Command};

const ORDER: &str = "link/toolgate.order";

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={ORDER}");
    println!("cargo:rerun-if-env-changed=TOOLGATE_LINK_PLAIN");
    let var = |key: &str| env::var(key).unwrap_or_default();
    let default_lld = var("CARGO_CFG_TARGET_ARCH") == "x86_64"
        && var("CARGO_CFG_TARGET_OS") == "linux"
        && var("CARGO_CFG_TARGET_ENV") == "gnu"
        && env::var_os("RUSTC_LINKER").is_none()
        && !var("CARGO_ENCODED_RUSTFLAGS").split('\x1f').any(|flag| {
            ["linker", "link-self-contained", "fuse-ld"]
                .iter()
                .any(|k| flag.contains(k))
        });
    if !default_lld || env::var_os("TOOLGATE_LINK_PLAIN").is_some() {
        return;
    }
    if var("HOST") == var("TARGET") && glibc_has_relr() {
        println!("cargo:rustc-link-arg-bin=toolgate=-Wl,-z,pack-relative-relocs");
    }
    let order = Path::new(&var("CARGO_MANIFEST_DIR")).join(ORDER);
    if order.is_file() {
        println!(
            "cargo:rustc-link-arg-bin=toolgate=-Wl,--symbol-ordering-file={}",
            order.display()
        );
        println!("cargo:rustc-link-arg-bin=toolgate=-Wl,--no-warn-symbol-ordering");
    }
}

/// Whether this machine's glibc is 2.36 or later (`getconf GNU_LIBC_VERSION` prints
/// `glibc 2.36`); anything unreadable counts as no.
fn glibc_has_relr() -> bool {
    let Ok(out) = Command::new("getconf").arg("GNU_LIBC_VERSION").output() else {
        return false;
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut parts = text
        .trim()
        .strip_prefix("glibc ")
        .unwrap_or_default()
        .split('.')
        .map(|n| n.parse::<u32>().unwrap_or(0));
    let (major, minor) = (parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    (major, minor) >= (2, 36)
}
