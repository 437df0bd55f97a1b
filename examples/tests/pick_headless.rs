//! Runs the `pick` example headless, as CI does: its own click in the
//! middle of the image picks an instance through `bevy_picking`, which the
//! example paints orange.

use std::process::Command;

mod common;

#[test]
fn pick_headless() {
    let shot = std::env::temp_dir().join("pick.png");
    let _ = std::fs::remove_file(&shot);
    let out = Command::new(common::example("pick"))
        .args([
            "--headless",
            "--frames",
            "10",
            "--count",
            "10000",
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
        .find(|l| l.starts_with("pick:"))
        .unwrap_or_else(|| panic!("no summary\n{stdout}\n{stderr}"));
    let picked = common::field(line, "picked");
    assert!(picked.parse::<u32>().is_ok(), "nothing picked: {line}");
    let img = image::open(&shot)
        .unwrap_or_else(|e| panic!("screenshot {}: {e}", shot.display()))
        .to_rgba8();
    // The picked sphere, orange, around the middle of the image.
    let orange = img
        .enumerate_pixels()
        .filter(|(x, y, p)| {
            x.abs_diff(120) < 30
                && y.abs_diff(68) < 30
                && p[0] > 120
                && p[0] as u32 > p[2] as u32 + 60
                && p[1] < p[0]
        })
        .count();
    assert!(orange > 5, "{orange} orange pixels around the middle: {line}");
}
