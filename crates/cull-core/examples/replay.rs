//! Replays a scene file (see `docs/scene-format.md`) through the chosen scan
//! variants and formats on the GPU and prints, as JSON, each one's sorted
//! survivors and whether they equal the CPU reference. For bug reports.
//!
//! ```text
//! cargo run -p cull-core --example replay -- scene.json [--variant all|NAME] [--format all|NAME] [--output instances|indices]
//! cargo run -p cull-core --example replay -- --random 1000 > scene.json   # write a random scene
//! ```

use argh::FromArgs;
use cull_core::scene::{CameraKind, Scene};
use cull_core::{
    CullInput, CullRequest, CullTarget, Culler, CullerDesc, Frustum, GpuContext, Instance, InstanceFormat,
    OutputKind, ScanVariant, Sphere,
};
use glam::{Mat4, Quat, Vec3};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Serialize, Deserialize)]
struct SceneFile {
    clip_from_world: [f32; 16],
    bounds: BoundsFile,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    max_distance: Option<f32>,
    instances: Vec<InstanceFile>,
}

#[derive(Serialize, Deserialize)]
struct BoundsFile {
    center: [f32; 3],
    radius: f32,
}

#[derive(Serialize, Deserialize)]
struct InstanceFile {
    position: [Num; 3],
    rotation: [Num; 4],
    scale: Num,
}

/// A number, or the strings "NaN", "inf", "-inf", which JSON cannot write as numbers.
#[derive(Clone, Copy, Serialize, Deserialize)]
#[serde(untagged)]
enum Num {
    Float(f32),
    #[serde(with = "non_finite")]
    NonFinite(f32),
}

impl Num {
    fn new(v: f32) -> Self {
        if v.is_finite() {
            Num::Float(v)
        } else {
            Num::NonFinite(v)
        }
    }
    fn get(self) -> f32 {
        match self {
            Num::Float(v) | Num::NonFinite(v) => v,
        }
    }
}

mod non_finite {
    pub fn serialize<S: serde::Serializer>(v: &f32, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(if v.is_nan() {
            "NaN"
        } else if *v > 0.0 {
            "inf"
        } else {
            "-inf"
        })
    }
    pub fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f32, D::Error> {
        let text: String = serde::Deserialize::deserialize(d)?;
        match text.to_ascii_lowercase().as_str() {
            "nan" => Ok(f32::NAN),
            "inf" | "+inf" | "infinity" => Ok(f32::INFINITY),
            "-inf" | "-infinity" => Ok(f32::NEG_INFINITY),
            _ => Err(serde::de::Error::custom(format!(
                "{text:?} is not a number, NaN, inf or -inf"
            ))),
        }
    }
}

fn nums<const N: usize>(v: [f32; N]) -> [Num; N] {
    v.map(Num::new)
}

fn floats<const N: usize>(v: [Num; N]) -> [f32; N] {
    v.map(Num::get)
}

/// Replays a scene file through the chosen scan variants and formats on the
/// GPU and prints, as JSON, each one's sorted survivors and whether they equal the CPU reference.
#[derive(FromArgs)]
#[argh(
    help_triggers("-h", "--help", "help"),
    example = "{command_name} scene.json --variant subgroup-ballot --format packed16",
    example = "{command_name} --random 1000 --camera orthographic > scene.json",
    note = "The scene format: docs/scene-format.md."
)]
struct Args {
    /// the scene file to replay
    #[argh(positional, arg_name = "SCENE.json")]
    scene: Option<PathBuf>,
    /// a scan variant by name, or all (the default: every compiled-in one)
    #[argh(
        option,
        arg_name = "all|name",
        from_str_fn(variants),
        default = "ScanVariant::compiled().collect()"
    )]
    variant: Variants,
    /// an instance format by name (matrix, posquat, packed16), or all (the
    /// default)
    #[argh(
        option,
        arg_name = "all|name",
        from_str_fn(formats),
        default = "InstanceFormat::ALL.to_vec()"
    )]
    format: Formats,
    /// what the culls write: instances (copies, the default) or indices
    #[argh(
        option,
        arg_name = "instances|indices",
        from_str_fn(output),
        default = "OutputKind::Instances"
    )]
    output: OutputKind,
    /// print a random scene of N instances as a scene file instead
    #[argh(option, arg_name = "N")]
    random: Option<usize>,
    /// the random scene's camera: infinite (reverse-Z, the default),
    /// perspective or orthographic
    #[argh(
        option,
        arg_name = "infinite|perspective|orthographic",
        from_str_fn(camera),
        default = "CameraKind::InfiniteReverseZ"
    )]
    camera: CameraKind,
}

// argh reads a field of type `Vec<T>` as an option given once per item; these
// are single values that stand for one item or all of them, so their fields
// are typed by these names, which argh takes for single values.
type Variants = Vec<ScanVariant>;
type Formats = Vec<InstanceFormat>;

/// `--variant`: one name, or `all` for every compiled-in one.
fn variants(value: &str) -> Result<Vec<ScanVariant>, String> {
    match value {
        "all" => Ok(ScanVariant::compiled().collect()),
        name => ScanVariant::from_name(name).map(|v| vec![v]).ok_or(format!(
            "unknown variant {name}: all or one of {}",
            ScanVariant::ALL.map(|v| v.name()).join(", ")
        )),
    }
}

/// `--format`: one name, or `all`.
fn formats(value: &str) -> Result<Vec<InstanceFormat>, String> {
    match value {
        "all" => Ok(InstanceFormat::ALL.to_vec()),
        name => InstanceFormat::from_name(name)
            .map(|f| vec![f])
            .ok_or(format!("unknown format {name}: all, matrix, posquat or packed16")),
    }
}

/// `--output instances|indices`.
fn output(value: &str) -> Result<OutputKind, String> {
    match value {
        "instances" => Ok(OutputKind::Instances),
        "indices" => Ok(OutputKind::Indices),
        _ => Err("expected instances or indices".into()),
    }
}

/// `--camera infinite|perspective|orthographic`.
fn camera(value: &str) -> Result<CameraKind, String> {
    match value {
        "infinite" => Ok(CameraKind::InfiniteReverseZ),
        "perspective" => Ok(CameraKind::Perspective),
        "orthographic" => Ok(CameraKind::Orthographic),
        _ => Err("expected infinite, perspective or orthographic".into()),
    }
}

fn main() {
    let Args {
        scene: path,
        variant: variants,
        format: formats,
        output,
        random,
        camera,
    } = argh::from_env();
    if let Some(n) = random {
        let scene = Scene::random(1, n, camera, None);
        let file = SceneFile {
            clip_from_world: scene.clip_from_world.to_cols_array(),
            bounds: BoundsFile {
                center: scene.bounds.center.to_array(),
                radius: scene.bounds.radius,
            },
            max_distance: None,
            instances: scene
                .instances
                .iter()
                .map(|i| InstanceFile {
                    position: nums(i.position.to_array()),
                    rotation: nums(i.rotation.to_array()),
                    scale: Num::new(i.scale),
                })
                .collect(),
        };
        println!("{}", serde_json::to_string(&file).unwrap());
        return;
    }
    let Some(path) = path else {
        eprintln!("give a SCENE.json to replay, or --random N\n\nRun replay --help for more information.");
        std::process::exit(1)
    };
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        eprintln!("{}: {e}", path.display());
        std::process::exit(1)
    });
    let file: SceneFile = serde_json::from_str(&text).unwrap_or_else(|e| {
        eprintln!(
            "{}: not a scene file ({e}); see docs/scene-format.md",
            path.display()
        );
        std::process::exit(1)
    });
    let instances: Vec<Instance> = file
        .instances
        .iter()
        .map(|i| Instance {
            position: Vec3::from_array(floats(i.position)),
            rotation: Quat::from_array(floats(i.rotation)),
            scale: i.scale.get(),
        })
        .collect();
    let bounds = Sphere::new(Vec3::from_array(file.bounds.center), file.bounds.radius);
    let frustum =
        Frustum::from_clip_from_world(Mat4::from_cols_array(&file.clip_from_world), file.max_distance)
            .unwrap_or_else(|e| {
                eprintln!("{e}");
                std::process::exit(1)
            });
    let ctx = GpuContext::new(wgpu::Backends::PRIMARY, wgpu::Features::empty()).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(1)
    });
    let count = instances.len() as u32;
    let capacity = count.max(1);
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
                    results.push(serde_json::json!({ "variant": variant.name(), "format": format.name(), "error": e.to_string() }));
                    continue;
                }
            };
            let target = CullTarget::new(&ctx.device, &culler, capacity).unwrap();
            let request = CullRequest::new(&input, &target, std::slice::from_ref(&frustum), bounds, count);
            let mut encoder = ctx.device.create_command_encoder(&Default::default());
            culler.cull(&mut encoder, &ctx.queue, request).unwrap();
            ctx.queue.submit([encoder.finish()]);
            let visible = target.read_visible_count(&ctx.device, &ctx.queue).unwrap();
            let out = target.read_output(&ctx.device, &ctx.queue, visible).unwrap();
            let survivors: Vec<u32> = match output {
                OutputKind::Indices => bytemuck::pod_collect_to_vec::<u8, u32>(&out),
                // Copies of byte-identical instances take their indices in
                // turn; u32::MAX (-1 below) is an output matching no input.
                OutputKind::Instances => {
                    cull_core::cpu::copies_to_indices(format.stride() as usize, &bytes, &out)
                }
            };
            let check = reference.check(&survivors);
            // Ordered promises input order: the survivors as written must ascend.
            let in_order = survivors.windows(2).all(|w| w[0] < w[1]);
            let order_ok = !variant.preserves_order() || in_order;
            all_match &= check.is_ok() && order_ok;
            let mut sorted: Vec<i64> = survivors
                .iter()
                .map(|&s| if s == u32::MAX { -1 } else { i64::from(s) })
                .collect();
            sorted.sort_unstable();
            results.push(serde_json::json!({
                "variant": variant.name(),
                "format": format.name(),
                "survivors": sorted,
                "matches_reference": check.is_ok(),
                "difference": check.err(),
                "in_input_order": in_order,
                "order_required": variant.preserves_order(),
            }));
        }
        results.push(serde_json::json!({
            "variant": "cpu-reference",
            "format": format.name(),
            "survivors": reference.visible,
            "borderline": reference.borderline,
        }));
    }
    let report = serde_json::json!({ "device": ctx.describe(), "instances": count, "results": results });
    println!("{}", serde_json::to_string_pretty(&report).unwrap());
    if !all_match {
        std::process::exit(1);
    }
}
