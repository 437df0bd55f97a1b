//! Runs the `custom_material` example headless, as CI does: the rocks are
//! culled and drawn with the example's `ExtendedMaterial`, whose glowing
//! veins (the example's own fragment shader) show in the screenshot, in the
//! color each rock's user data picks.

use std::process::Command;

mod common;

#[test]
fn custom_material_headless() {
    let shot = std::env::temp_dir().join("custom_material.png");
    let _ = std::fs::remove_file(&shot);
    let out = Command::new(common::example("custom_material"))
        .args([
            "--headless",
            "--frames",
            "20",
            "--count",
            "20000",
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
        .find(|l| l.starts_with("custom_material:"))
        .unwrap_or_else(|| panic!("no summary\n{stdout}\n{stderr}"));
    let visible = common::field(line, "visible").parse::<u32>().unwrap();
    assert!(visible > 0 && visible < 20_000, "{line}");
    let img = image::open(&shot)
        .unwrap_or_else(|e| panic!("screenshot {}: {e}", shot.display()))
        .to_rgba8();
    // The veins' glow in both ores' colors: only the material's own shader
    // makes it, and only each rock's user data tells the two apart.
    let copper = img
        .pixels()
        .filter(|p| p[0] > 180 && p[0] as u32 > p[1] as u32 + 40 && p[1] as u32 > p[2] as u32 + 20)
        .count();
    let ice = img
        .pixels()
        .filter(|p| p[2] > 120 && p[2] as u32 > p[0] as u32 + 40)
        .count();
    assert!(
        copper > 50 && ice > 20,
        "{copper} copper and {ice} ice pixels glow: {line}"
    );
}
