//! Runs the `grass` example headless, as CI does: blades placed and swayed
//! by the example's compute pass (the batch's list is empty) are culled,
//! levelled and drawn green over the ground; the same field moved from the
//! CPU (`--mode cpu`) keeps about as many blades in view.

mod common;

/// The summary line and the green pixels of a headless run in `mode`.
fn run(mode: &str) -> (String, usize) {
    let (line, img) = common::run_headless(
        "grass",
        &[
            "--frames", "20", "--count", "40000", "--size", "240x136", "--mode", mode,
        ],
        &format!("grass-{mode}.png"),
    );
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
