//! The `replay` example: a scene file culled on the GPU equals the CPU
//! reference, a random scene it writes replays, and bad input is named.

use crate::run;

/// The report's GPU culls, each asserted to equal the CPU reference (and
/// to keep input order where the variant promises it): their number, and
/// the errors it reported (a format that cannot hold the scene).
fn gpu_culls(stdout: &str) -> (usize, Vec<String>) {
    let report: serde_json::Value = serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let results = report["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results: {stdout}"));
    let mut culls = 0;
    let mut errors = Vec::new();
    for result in results {
        if let Some(error) = result["error"].as_str() {
            errors.push(format!("{}: {error}", result["format"]));
        } else if result["variant"] != "cpu-reference" {
            assert_eq!(result["matches_reference"], true, "{result}");
            if result["order_required"] == true {
                assert_eq!(result["in_input_order"], true, "{result}");
            }
            culls += 1;
        }
    }
    (culls, errors)
}

fn compiled_variants() -> usize {
    cull_core::ScanVariant::compiled().count()
}

#[test]
fn a_scene_file_replays_as_the_cpu_reference() {
    let scene = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/scenes/basic.json");
    let out = run("replay", &[scene, "--json"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Every compiled variant in the two formats that carry the scene's
    // scales; packed16 (unit scale) refuses the scaled instance.
    let (culls, errors) = gpu_culls(&stdout);
    assert_eq!(culls, 2 * compiled_variants(), "{stdout}");
    assert!(
        errors.len() == 1 && errors[0].contains("packed16") && errors[0].contains("scale"),
        "{errors:?}"
    );
}

#[test]
fn a_random_scene_it_writes_replays() {
    let out = run("replay", &["--random", "1000"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let path = std::env::temp_dir().join(format!("cull-core-replay-{}.json", std::process::id()));
    std::fs::write(&path, &out.stdout).unwrap();
    let scene = path.to_str().unwrap();
    let out = run(
        "replay",
        &[scene, "--format", "posquat", "--output", "indices", "--json"],
    );
    let _ = std::fs::remove_file(&path);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(gpu_culls(&stdout), (compiled_variants(), Vec::new()), "{stdout}");
}

#[test]
fn the_summary_says_each_cull_matches_the_reference() {
    let scene = concat!(env!("CARGO_MANIFEST_DIR"), "/examples/scenes/basic.json");
    let out = run("replay", &[scene, "--format", "posquat"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    let matching = stdout
        .lines()
        .filter(|l| l.contains("as the CPU reference"))
        .count();
    assert_eq!(matching, compiled_variants(), "{stdout}");
    assert!(stdout.contains("cpu-reference"), "{stdout}");
}

#[test]
fn a_missing_scene_or_a_bad_flag_is_named() {
    let out = run("replay", &["/nonexistent/scene.json"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && stderr.contains("/nonexistent/scene.json"),
        "{stderr}"
    );
    let out = run("replay", &["--format", "huge"]);
    let message = String::from_utf8_lossy(&out.stderr) + String::from_utf8_lossy(&out.stdout);
    assert!(!out.status.success() && message.contains("--format"), "{message}");
}
