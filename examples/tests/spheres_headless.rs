//! Runs the `spheres` example headless (as a user without a display would)
//! for each compiled-in variant: the printed visible count must equal the
//! CPU reference for the final camera (with levels of detail in one run:
//! the sum of the levels' references; occlusion-culled in another: at most
//! the reference), and the screenshot must show spheres;
//! one run also prints Bevy's render diagnostics with the plugin's cull.

use std::process::{Command, Stdio};

/// `cargo test` builds the examples next to the test binaries.
mod common;

use common::field;

fn example() -> std::path::PathBuf {
    common::example("spheres")
}

#[test]
fn spheres_headless_every_variant() {
    let variants = [
        "hillis-steele",
        "block-atomic",
        "subgroup-ballot",
        "subgroup-shuffle",
        "ordered",
    ];
    // Every variant's run at once: each keeps about one core busy.
    let runs: Vec<_> = variants
        .into_iter()
        .map(|variant| {
            let shot = std::env::temp_dir().join(format!("spheres-{variant}.png"));
            let _ = std::fs::remove_file(&shot);
            (variant, shot.clone(), run(variant, &shot))
        })
        .collect();
    // All finished before any is checked: a failed check leaves none running.
    let finished: Vec<_> = runs
        .into_iter()
        .map(|(variant, shot, child)| (variant, shot, child.wait_with_output().unwrap()))
        .collect();
    for (variant, shot, out) in finished {
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "{variant}: exit {:?}\n{stdout}\n{stderr}",
            out.status
        );
        let line = common::summary("spheres", &stdout)
            .unwrap_or_else(|| panic!("{variant}: no summary\n{stdout}\n{stderr}"));
        let line = line.as_str();
        let visible: u32 = field(line, "visible").parse().unwrap();
        // Every clearly visible sphere, and any of the borderline ones
        // (within rounding of the widened frustum boundary).
        let reference: u32 = field(line, "cpu_reference").parse().unwrap();
        let borderline: u32 = field(line, "cpu_borderline").parse().unwrap();
        if variant == "subgroup-shuffle" {
            let levels = common::numbers(line, "visible_per_level");
            assert_eq!(levels.len(), 5, "{variant}: {line}");
            assert_eq!(levels.iter().sum::<u32>(), visible, "{variant}: {line}");
        }
        if variant == "hillis-steele" {
            // Occlusion culling keeps what the frustum keeps and passes the
            // depth pyramid: at most the frustum's reference.
            assert_eq!(field(line, "occlusion"), "true", "{variant}: {line}");
            assert!(visible <= reference + borderline, "{variant}: {line}");
            // The late phase ran (its pass timed), not a fallback to the
            // frustum alone.
            assert!(
                common::pass_value(line, "render/gpu_cull_late/elapsed_gpu").is_some(),
                "{variant}: no late phase\n{stdout}"
            );
        } else {
            assert!(
                (reference..=reference + borderline).contains(&visible),
                "{variant}: {line}"
            );
        }
        if variant == "ordered" {
            // Bevy's main pass and the plugin's cull, both timed on the GPU.
            for pass in [
                "render/main_opaque_pass_3d/elapsed_gpu",
                "render/gpu_cull/elapsed_gpu",
            ] {
                let ms = common::pass_value(line, pass)
                    .unwrap_or_else(|| panic!("{variant}: no GPU time of {pass}\n{stdout}"));
                assert!(ms > 0.0 && ms < 1000.0, "{variant}: {pass} took {ms} ms");
            }
        }
        if variant == "subgroup-ballot" {
            // Too few spheres to skip: the pick culls flat.
            assert_eq!(field(line, "cells"), "20", "{variant}: {line}");
            assert_eq!(field(line, "by_cells"), "false", "{variant}: {line}");
        }
        assert!(
            visible > 100 && visible < 20_000,
            "{variant}: the camera should see part of the field: {line}"
        );
        // Frames are timed only once the scene is drawn with every pipeline
        // compiled: not before the first drawn frame, only after pipelines
        // were seen compiling (on lavapipe they take several frames), and
        // 50 asked for, the first 20 of them not timed.
        let ready: u32 = field(line, "ready_frame")
            .parse()
            .unwrap_or_else(|_| panic!("{variant}: {line}"));
        let first_drawn: u32 = field(line, "first_drawn_frame").parse().unwrap();
        let waiting: u32 = field(line, "pipelines_waiting_frames").parse().unwrap();
        let timed: u32 = field(line, "timed_frames").parse().unwrap();
        let frames: u32 = field(line, "frames").parse().unwrap();
        assert!(ready >= first_drawn && waiting > 0, "{variant}: {line}");
        assert!(frames >= ready + 50 && timed == 30, "{variant}: {line}");
        let img = image::open(&shot)
            .unwrap_or_else(|e| panic!("{variant}: screenshot {}: {e}", shot.display()))
            .to_rgba8();
        let first = *img.get_pixel(0, 0);
        let differing = img.pixels().filter(|p| **p != first).count();
        assert!(
            differing > (img.width() * img.height() / 20) as usize,
            "{variant}: the screenshot is (nearly) blank"
        );
    }
}

/// Starts the example headless with `variant` (and the options each
/// variant's run adds), its screenshot at `shot`.
fn run(variant: &str, shot: &std::path::Path) -> std::process::Child {
    Command::new(example())
        .args([
            "--headless",
            "--json",
            "--frames",
            "50",
            "--count",
            "20000",
            "--size",
            "320x180",
            "--variant",
            variant,
        ])
        // One run with the light's shadows (4 cascades culled too), one
        // with levels of detail that cross-fade (the reference is then
        // the sum of the levels', those in a fade in two).
        .args((variant == "block-atomic").then_some("--shadows"))
        .args(
            (variant == "subgroup-shuffle")
                .then_some(["--lod", "--cross-fade", "0.2"])
                .into_iter()
                .flatten(),
        )
        // And one sorted into cells (too small to be culled by cells
        // with the default threshold: it reports its cells, culled flat).
        // One batch with the instances' own colors there (the others draw
        // twelve batches of a material each).
        .args(
            (variant == "subgroup-ballot")
                .then_some(["--cells", "--colors", "position"])
                .into_iter()
                .flatten(),
        )
        // And one with Bevy's render diagnostics, the plugin's cull
        // among the passes.
        .args((variant == "ordered" || variant == "hillis-steele").then_some("--pass-times"))
        // And one occlusion-culled (issue 17): two phases around Bevy's
        // prepasses, the reference an upper bound (what spheres hide).
        .args((variant == "hillis-steele").then_some("--occlusion"))
        .arg("--screenshot")
        .arg(shot)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Where windows need a display server (elsewhere the example would open a
/// window): with neither a Wayland compositor nor an X11 server it says so
/// and points to `--headless`, rather than failing in winit.
#[cfg(any(
    target_os = "linux",
    target_os = "freebsd",
    target_os = "openbsd",
    target_os = "netbsd",
    target_os = "dragonfly"
))]
#[test]
fn no_display_points_to_headless() {
    let out = Command::new(example())
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--headless"), "{stderr}");
    assert!(stderr.contains("neither WAYLAND_DISPLAY nor DISPLAY"), "{stderr}");
}

/// `GPU_CULL_STAGE_TIMES=1`: the summary times each stage of the render
/// thread's frame, the camera's culls and main pass among them.
#[test]
fn render_stages_are_timed_when_asked() {
    let out = Command::new(example())
        .args([
            "--headless",
            "--json",
            "--size",
            "160x90",
            "--frames",
            "40",
            "--count",
            "2000",
        ])
        .env("GPU_CULL_STAGE_TIMES", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}\n{stdout}\n{stderr}", out.status);
    let line = common::summary("spheres", &stdout).unwrap_or_else(|| panic!("no summary\n{stdout}"));
    let summary: serde_json::Value = serde_json::from_str(&line).unwrap();
    let stages = summary["render_stages_us"]
        .as_object()
        .unwrap_or_else(|| panic!("no render_stages_us in {line}"));
    assert_eq!(stages.len(), 22, "{line}");
    // Every boundary ran: a stage whose closing boundary did not would
    // read 0, its time counted in the next.
    for (stage, us) in stages {
        let us = us.as_f64().unwrap_or(f64::NAN);
        assert!(us > 0.0 && us < 1e7, "{stage}: {us} µs\n{line}");
    }
}
