//! Runs the `forest` example headless, as CI does: both batches are culled
//! and drawn with their textured materials, and the sun's cascades cull the
//! trees and draw them into the shadow maps.

use std::process::Command;

mod common;

#[test]
fn forest_headless() {
    let shot = std::env::temp_dir().join("forest.png");
    let _ = std::fs::remove_file(&shot);
    let out = Command::new(common::example("forest"))
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
        .find(|l| l.starts_with("forest:"))
        .unwrap_or_else(|| panic!("no summary\n{stdout}\n{stderr}"));
    let number = |name: &str| common::field(line, name).parse::<u32>().unwrap();
    assert!(
        number("trees_visible") > 0 && number("rocks_visible") > 0,
        "{line}"
    );
    // The sun's cascades (four by default) cull the batches for the shadow maps.
    assert!(
        number("shadow_views") >= 2 && number("shadow_casters") > 0,
        "{line}"
    );
    let img = image::open(&shot)
        .unwrap_or_else(|e| panic!("screenshot {}: {e}", shot.display()))
        .to_rgba8();
    // The trees' green texture shows.
    let green = img
        .pixels()
        .filter(|p| p[1] as u32 > p[0] as u32 + 25 && p[1] as u32 > p[2] as u32 + 25)
        .count();
    assert!(
        green > (img.width() * img.height() / 50) as usize,
        "only {green} green pixels: {line}"
    );
}
