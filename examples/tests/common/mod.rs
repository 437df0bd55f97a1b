//! What the example tests share: finding an example's binary and reading
//! its summary (the JSON line `--json` prints).

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

/// Runs example `name` headless with `args` and a screenshot: its summary
/// (the JSON line of `--json`) and the screenshot. Fails, with what it
/// printed, when it exits unsuccessfully or prints no summary.
// Not every test binary that includes this module runs an example this way.
#[allow(dead_code)]
pub fn run_headless(name: &str, args: &[&str], shot_name: &str) -> (String, image::RgbaImage) {
    let shot = std::env::temp_dir().join(shot_name);
    let _ = std::fs::remove_file(&shot);
    let out = std::process::Command::new(example(name))
        .args(["--headless", "--json"])
        .args(args)
        .arg("--screenshot")
        .arg(&shot)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}\n{stdout}\n{stderr}", out.status);
    let line = summary(name, &stdout).unwrap_or_else(|| panic!("no summary\n{stdout}\n{stderr}"));
    let img = image::open(&shot)
        .unwrap_or_else(|e| panic!("screenshot {}: {e}", shot.display()))
        .to_rgba8();
    (line, img)
}

/// The summary `--json` printed for example `name`: the line holding the
/// JSON object whose `example` is `name`.
// Not every test binary that includes this module reads summaries.
#[allow(dead_code)]
pub fn summary(name: &str, stdout: &str) -> Option<String> {
    let prefix = format!("{{\"example\":\"{name}\"");
    stdout
        .lines()
        .find(|l| l.starts_with(&prefix))
        .map(str::to_string)
}

/// The value of `key` in a summary, as text: numbers and flags as JSON
/// writes them, `n/a` for `null` (not measured, or not in this run).
// Not every test binary that includes this module reads summaries.
#[allow(dead_code)]
pub fn field(line: &str, key: &str) -> String {
    let summary: serde_json::Value =
        serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON summary ({e}): {line}"));
    match summary.get(key) {
        None => panic!("no {key} in {line}"),
        Some(serde_json::Value::Null) => "n/a".into(),
        Some(serde_json::Value::String(text)) => text.clone(),
        Some(value) => value.to_string(),
    }
}

/// The numbers of the array `key` in a summary (the counts per level of
/// detail).
// Not every test binary that includes this module reads arrays.
#[allow(dead_code)]
pub fn numbers(line: &str, key: &str) -> Vec<u32> {
    serde_json::from_str::<serde_json::Value>(line)
        .ok()
        .and_then(|s| serde_json::from_value(s.get(key)?.clone()).ok())
        .unwrap_or_else(|| panic!("no array of numbers {key} in {line}"))
}

/// The value of Bevy's render diagnostic `path` in a summary of a run with
/// `--pass-times` (its `render_diagnostics` object).
// Not every test binary that includes this module reads pass times.
#[allow(dead_code)]
pub fn pass_value(line: &str, path: &str) -> Option<f64> {
    let summary: serde_json::Value = serde_json::from_str(line).ok()?;
    summary.get("render_diagnostics")?.get(path)?.as_f64()
}
