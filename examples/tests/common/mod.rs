//! What the example tests share: finding an example's binary and reading
//! its summary line.

use std::path::PathBuf;

/// The binary `cargo test` built for example `name`.
pub fn example(name: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap().join("examples");
    let path = dir.join(format!("{name}{}", std::env::consts::EXE_SUFFIX));
    assert!(
        path.exists(),
        "{} is missing: run through `cargo test`, which builds examples",
        path.display()
    );
    path
}

/// The value of `key=value` in a summary line.
pub fn field(line: &str, key: &str) -> String {
    line.split_whitespace()
        .find_map(|kv| kv.strip_prefix(&format!("{key}=")))
        .unwrap_or_else(|| panic!("no {key}= in {line:?}"))
        .to_string()
}

/// The value of a `--pass-times` line, `KIND PATH VALUE` (`KIND` is
/// `pass_time` or `pass_cpu`), for the render pass diagnostic `path`.
// Not every test binary that includes this module reads pass times.
#[allow(dead_code)]
pub fn pass_value(stdout: &str, kind: &str, path: &str) -> Option<f64> {
    stdout.lines().find_map(|l| {
        // A pass's path may hold spaces ("render/early prepass/..."); the
        // value never does.
        let (k, rest) = l.split_once(' ')?;
        let (p, value) = rest.rsplit_once(' ')?;
        (k == kind && p == path).then(|| value.trim().parse().ok())?
    })
}
