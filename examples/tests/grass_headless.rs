//! Runs the `grass` example headless, as CI does: blades placed and swayed
//! by the example's compute pass (the batch's list is empty) are culled,
//! levelled and drawn green over the ground; the same field moved from the
//! CPU (`--mode cpu`) keeps about as many blades in view.

use std::process::Command;

mod common;

/// The summary line and the green pixels of a headless run in `mode`.
fn run(mode: &str) -> (String, usize) {
    let shot = std::env::temp_dir().join(format!("grass-{mode}.png"));
    let _ = std::fs::remove_file(&shot);
    let out = Command::new(common::example("grass"))
        .args([
            "--headless",
            "--frames",
            "20",
            "--count",
            "40000",
            "--size",
            "240x136",
            "--mode",
            mode,
        ])
        .arg("--screenshot")
        .arg(&shot)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}\n{stdout}\n{stderr}", out.status);
    let line = stdout
        .lines()
        .find(|l| l.starts_with("grass:"))
        .unwrap_or_else(|| panic!("no summary\n{stdout}\n{stderr}"))
        .to_string();
    let img = image::open(&shot)
        .unwrap_or_else(|e| panic!("screenshot {}: {e}", shot.display()))
        .to_rgba8();
    let green = img
        .pixels()
        .filter(|p| p[1] > 60 && p[1] as u32 > p[0] as u32 + 20 && p[1] as u32 > p[2] as u32 + 20)
        .count();
    (line, green)
}

#[test]
fn grass_headless() {
    let (gpu, green) = run("gpu");
    let visible = common::field(&gpu, "visible").parse::<u32>().unwrap();
    assert!(visible > 1_000 && visible < 40_000, "{gpu}");
    assert!(green > 2_000, "{green} green pixels: {gpu}");
    let (cpu, _) = run("cpu");
    let on_cpu = common::field(&cpu, "visible").parse::<u32>().unwrap();
    // The two sway at different moments of the wind: close, not equal.
    assert!(on_cpu.abs_diff(visible) * 10 < visible, "GPU {gpu}\nCPU {cpu}");
}
