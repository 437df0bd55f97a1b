//! The `draw` example headless: what it draws must be what the CPU
//! reference keeps, and its command line must explain itself.

use crate::run;
use std::process::Output;

fn draw(args: &[&str]) -> Output {
    run("draw", args)
}

#[test]
fn headless_draws_exactly_the_survivors_of_the_cpu_reference() {
    let count = 20_000;
    let out = draw(&[
        "--headless",
        "--json",
        "--count",
        &count.to_string(),
        "--frames",
        "2",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "draw failed: {}\nstdout: {stdout}\nstderr: {stderr}",
        out.status
    );
    let line = stdout.lines().last().expect("a JSON line");
    let summary: serde_json::Value = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
    let field = |name: &str| {
        summary[name]
            .as_f64()
            .unwrap_or_else(|| panic!("no {name} in {line}"))
    };
    assert_eq!(summary["example"], "draw");
    assert_eq!(field("instances"), f64::from(count));
    let (drawn, reference, borderline) = (field("visible"), field("cpu_reference"), field("cpu_borderline"));
    // The reference keeps borderline spheres; the GPU may round them either way.
    assert!(
        drawn <= reference && drawn >= reference - borderline,
        "the GPU drew {drawn}, the CPU reference keeps {reference} ({borderline} borderline): {line}"
    );
    assert!(
        drawn > 0.0 && drawn < f64::from(count),
        "nothing culled, or nothing drawn: {line}"
    );
    assert!(field("lit_fraction") > 0.02, "too few pixels lit: {line}");
}

#[test]
fn help_succeeds_and_a_bad_count_names_its_flag() {
    let help = draw(&["--help"]);
    assert!(help.status.success(), "--help failed: {help:?}");
    assert!(String::from_utf8_lossy(&help.stdout).contains("--headless"));
    let bad = draw(&["--count", "many"]);
    assert!(!bad.status.success(), "--count many was accepted");
    let message = String::from_utf8_lossy(&bad.stderr) + String::from_utf8_lossy(&bad.stdout);
    assert!(
        message.contains("--count"),
        "the error does not name --count: {message}"
    );
}

/// Where windows need a display server: without one it points to
/// `--headless` rather than failing in winit.
#[cfg(any(
    target_os = "linux",
    target_os = "freebsd",
    target_os = "openbsd",
    target_os = "netbsd",
    target_os = "dragonfly"
))]
#[test]
fn no_display_points_to_headless() {
    let out = std::process::Command::new(crate::example("draw"))
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--headless") && stderr.contains("WAYLAND_DISPLAY"),
        "{stderr}"
    );
}
