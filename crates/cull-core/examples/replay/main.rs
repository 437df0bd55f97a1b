//! Replays a scene file (see `docs/scene-format.md`) through the chosen scan
//! variants and formats on the GPU and prints whether each one's survivors
//! equal the CPU reference (with `--json`, the whole report: every cull's
//! sorted survivors). For bug reports.
//!
//! ```text
//! cargo run -p cull-core --example replay -- scene.json [--variant all|NAME] [--format all|NAME] [--output instances|indices] [--json]
//! cargo run -p cull-core --example replay -- --random 1000 > scene.json   # write a random scene
//! ```

use cull_core::scene::Scene;
use cull_core::{
    CullInput, CullRequest, CullTarget, Culler, CullerDesc, Frustum, GpuContext, OutputKind, ScanVariant,
    Sphere,
};
use scene_file::SceneFile;

mod args;
mod scene_file;

use args::Args;

fn main() {
    let Args {
        scene: path,
        variant: variants,
        format: formats,
        output,
        random,
        json,
        camera,
    } = argh::from_env();
    if let Some(n) = random {
        let file = SceneFile::from_scene(&Scene::random(1, n, camera, None));
        println!("{}", serde_json::to_string(&file).unwrap());
        return;
    }
    let Some(path) = path else {
        eprintln!("give a SCENE.json to replay, or --random N\n\nRun replay --help for more information.");
        std::process::exit(1)
    };
    let file = read_scene(&path);
    let (instances, bounds) = (file.instances(), file.bounds());
    let frustum = file.frustum().unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let ctx = GpuContext::new(wgpu::Backends::PRIMARY, wgpu::Features::empty()).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let count = instances.len() as u32;
    let capacity = count.max(1);
    let scene = (&frustum, bounds, count);
    let mut results = Vec::new();
    let mut all_match = true;
    for &format in &formats {
        let fail = |e: cull_core::CullError| -> ! {
            eprintln!("{}: {e}", format.name());
            std::process::exit(1)
        };
        let bytes = match format.encode(&instances) {
            Ok(bytes) => bytes,
            Err(e @ cull_core::CullError::ScaleNotCarried { .. }) => {
                results.push(serde_json::json!({ "format": format.name(), "error": e.to_string() }));
                continue;
            }
            Err(e) => fail(e),
        };
        let reference =
            cull_core::cpu::classify(format, &bytes, bounds, &frustum).unwrap_or_else(|e| fail(e));
        let input = CullInput::new(&ctx.device, format, capacity).unwrap();
        input.write(&ctx.queue, 0, &bytes).unwrap();
        for &variant in &variants {
            let culled = cull_variant(&ctx, (&input, &bytes), variant, output, scene, &reference);
            all_match &= culled.1;
            results.push(culled.0);
        }
        results.push(serde_json::json!({
            "variant": "cpu-reference",
            "format": format.name(),
            "survivors": reference.visible,
            "borderline": reference.borderline,
        }));
    }
    if json {
        let report = serde_json::json!({ "device": ctx.describe(), "instances": count, "results": results });
        println!("{}", serde_json::to_string_pretty(&report).unwrap());
    } else {
        print_summary(&ctx.describe(), count, &results);
    }
    if !all_match {
        std::process::exit(1);
    }
}

/// The scene file at `path`; exits naming it where it cannot be read.
fn read_scene(path: &std::path::Path) -> SceneFile {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        eprintln!("{}: {e}", path.display());
        std::process::exit(1)
    });
    serde_json::from_str(&text).unwrap_or_else(|e| {
        eprintln!(
            "{}: not a scene file ({e}); see docs/scene-format.md",
            path.display()
        );
        std::process::exit(1)
    })
}

/// `variant`'s cull of the scene's instances in `input` (`bytes` in its
/// format), checked against the CPU's `reference`: its report entry, and
/// whether it matched (in input order where the variant promises it).
fn cull_variant(
    ctx: &GpuContext,
    (input, bytes): (&CullInput, &[u8]),
    variant: ScanVariant,
    output: OutputKind,
    (frustum, bounds, count): (&Frustum, Sphere, u32),
    reference: &cull_core::cpu::Reference,
) -> (serde_json::Value, bool) {
    let format = input.format();
    let desc = CullerDesc {
        variant: Some(variant),
        allow_fallback: false,
        format,
        output,
        ..Default::default()
    };
    let culler = match Culler::new(&ctx.device, &ctx.queue, &desc) {
        Ok(c) => c,
        Err(e) => {
            let entry = serde_json::json!({ "variant": variant.name(), "format": format.name(), "error": e.to_string() });
            return (entry, true);
        }
    };
    let target = CullTarget::new(&ctx.device, &culler, input.capacity()).unwrap();
    let request = CullRequest::new(input, &target, std::slice::from_ref(frustum), bounds, count);
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    culler.cull(&mut encoder, &ctx.queue, request).unwrap();
    ctx.queue.submit([encoder.finish()]);
    let visible = target.read_visible_count(&ctx.device, &ctx.queue).unwrap();
    let out = target.read_output(&ctx.device, &ctx.queue, visible).unwrap();
    let survivors: Vec<u32> = match output {
        OutputKind::Indices => bytemuck::pod_collect_to_vec::<u8, u32>(&out),
        // Copies of byte-identical instances take their indices in turn;
        // u32::MAX (-1 below) is an output matching no input.
        OutputKind::Instances => cull_core::cpu::copies_to_indices(format.stride() as usize, bytes, &out),
    };
    let check = reference.check(&survivors);
    // Ordered promises input order: the survivors as written must ascend.
    let in_order = survivors.windows(2).all(|w| w[0] < w[1]);
    let matched = check.is_ok() && (!variant.preserves_order() || in_order);
    let mut sorted: Vec<i64> = (survivors.iter())
        .map(|&s| if s == u32::MAX { -1 } else { i64::from(s) })
        .collect();
    sorted.sort_unstable();
    let entry = serde_json::json!({
        "variant": variant.name(),
        "format": format.name(),
        "survivors": sorted,
        "matches_reference": check.is_ok(),
        "difference": check.err(),
        "in_input_order": in_order,
        "order_required": variant.preserves_order(),
    });
    (entry, matched)
}

/// The report, a line per cull: how many survivors, whether they are the
/// CPU reference's (and in input order where the variant promises it).
fn print_summary(device: &str, count: u32, results: &[serde_json::Value]) {
    println!("{count} instances on {device}");
    for r in results {
        let (variant, format) = (
            r["variant"].as_str().unwrap_or("-"),
            r["format"].as_str().unwrap_or("-"),
        );
        let survivors = r["survivors"].as_array().map_or(0, Vec::len);
        let verdict = if let Some(error) = r["error"].as_str() {
            format!("not culled: {error}")
        } else if variant == "cpu-reference" {
            let borderline = r["borderline"].as_array().map_or(0, Vec::len);
            format!("{survivors} visible, {borderline} more borderline")
        } else if r["matches_reference"] == true {
            let order = if r["order_required"] == true {
                ", in input order"
            } else {
                ""
            };
            format!("{survivors} survivors, as the CPU reference{order}")
        } else {
            format!(
                "{survivors} survivors, NOT the CPU reference: {}",
                r["difference"]
            )
        };
        println!("  {variant:<18} {format:<9} {verdict}");
    }
}
