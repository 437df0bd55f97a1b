//! Runs the `boids` example headless, as CI does: a flock the CPU never
//! sees, simulated and written by the example's compute pass, is culled
//! (some boids in view, not all) and drawn in its speeds' colors.

mod common;

#[test]
fn boids_headless() {
    let (line, img) = common::run_headless(
        "boids",
        &["--frames", "30", "--count", "4000", "--size", "240x136"],
        "boids.png",
    );
    let line = line.as_str();
    let visible = common::field(line, "visible").parse::<u32>().unwrap();
    assert!(visible > 100 && visible < 4_000, "{line}");
    // Lit boids, blue to orange, on a near-black sky: only what the compute
    // pass wrote is drawn (the batch's list is empty).
    let boids = img.pixels().filter(|p| p[0].max(p[1]).max(p[2]) > 60).count();
    assert!(boids > 100, "{boids} pixels show boids: {line}");
}
