//! Runs the `pick` example headless, as CI does: its own click in the
//! middle of the image picks an instance through `bevy_picking`, which the
//! example paints orange.

mod common;

#[test]
fn pick_headless() {
    let (line, img) = common::run_headless(
        "pick",
        &["--frames", "10", "--count", "10000", "--size", "240x136"],
        "pick.png",
    );
    let line = line.as_str();
    let picked = common::field(line, "picked");
    assert!(picked.parse::<u32>().is_ok(), "nothing picked: {line}");
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
