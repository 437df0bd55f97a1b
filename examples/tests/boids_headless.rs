//! Runs the `boids` example headless, as CI does: a flock the CPU never
//! sees, simulated and written by the example's compute pass, is culled
//! (some boids in view, not all) and drawn in its speeds' colors.

use std::process::Command;

mod common;

#[test]
fn boids_headless() {
    let shot = std::env::temp_dir().join("boids.png");
    let _ = std::fs::remove_file(&shot);
    let out = Command::new(common::example("boids"))
        .args([
            "--headless",
            "--frames",
            "30",
            "--count",
            "4000",
            "--size",
            "240x136",
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
        .find(|l| l.starts_with("boids:"))
        .unwrap_or_else(|| panic!("no summary\n{stdout}\n{stderr}"));
    let visible = common::field(line, "visible").parse::<u32>().unwrap();
    assert!(visible > 100 && visible < 4_000, "{line}");
    let img = image::open(&shot)
        .unwrap_or_else(|e| panic!("screenshot {}: {e}", shot.display()))
        .to_rgba8();
    // Lit boids, blue to orange, on a near-black sky: only what the compute
    // pass wrote is drawn (the batch's list is empty).
    let boids = img.pixels().filter(|p| p[0].max(p[1]).max(p[2]) > 60).count();
    assert!(boids > 100, "{boids} pixels show boids: {line}");
}
