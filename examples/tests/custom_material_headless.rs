//! Runs the `custom_material` example headless, as CI does: the rocks are
//! culled and drawn with the example's `ExtendedMaterial`, whose glowing
//! veins (the example's own fragment shader) show in the screenshot, in the
//! color each rock's user data picks.

mod common;

#[test]
fn custom_material_headless() {
    let (line, img) = common::run_headless(
        "custom_material",
        &["--frames", "20", "--count", "20000", "--size", "240x136"],
        "custom_material.png",
    );
    let line = line.as_str();
    let visible = common::field(line, "visible").parse::<u32>().unwrap();
    assert!(visible > 0 && visible < 20_000, "{line}");
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
