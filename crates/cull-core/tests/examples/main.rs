//! Runs cull-core's examples as a user would: `draw` headless, and
//! `replay` on scene files.

mod draw;
mod replay;

use std::path::PathBuf;
use std::process::{Command, Output};

/// The example `name`'s binary, which `cargo test` builds beside this
/// test's `deps/` folder (`cargo test --test examples` alone does not: run
/// `cargo test -p cull-core` once).
fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary's path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps/");
    let path = dir
        .join("examples")
        .join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is missing: run through `cargo test`, which builds examples",
        path.display()
    );
    path
}

/// Runs the example `name` with `args` to its end.
fn run(name: &str, args: &[&str]) -> Output {
    let path = example(name);
    Command::new(&path)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}
