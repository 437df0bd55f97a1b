//! Replays a scene file (see `docs/scene-format.md`) through the chosen scan
//! variants and formats on the GPU and prints, as JSON, each one's sorted
//! survivors and whether they equal the CPU reference. For bug reports.
//!
//! ```text
//! cargo run -p cull-core --example replay -- scene.json [--variant all|NAME] [--format all|NAME] [--output instances|indices]
//! cargo run -p cull-core --example replay -- --random 1000 > scene.json   # write a random scene
//! ```

use cull_core::scene::{CameraKind, Scene};
use cull_core::{
    CullInput, CullParams, CullTarget, Culler, CullerDesc, Frustum, GpuContext, Instance, InstanceFormat,
    OutputKind, ScanVariant, Sphere,
};
use glam::{Mat4, Quat, Vec3};
use serde::{Deserialize, Serialize};

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

fn usage() -> ! {
    eprintln!(
        "usage: replay SCENE.json [--variant all|{}] [--format all|matrix|posquat|packed16] [--output instances|indices]\n       replay --random N [--camera infinite|perspective|orthographic]",
        ScanVariant::ALL.map(|v| v.name()).join("|")
    );
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .map(|i| args.get(i + 1).cloned().unwrap_or_else(|| usage()))
    };
    if let Some(n) = flag("--random") {
        let camera = match flag("--camera").as_deref() {
            None | Some("infinite") => CameraKind::InfiniteReverseZ,
            Some("perspective") => CameraKind::Perspective,
            Some("orthographic") => CameraKind::Orthographic,
            Some(_) => usage(),
        };
        let scene = Scene::random(1, n.parse().unwrap_or_else(|_| usage()), camera, None);
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
    let Some(path) = args.first().filter(|a| !a.starts_with("--")) else {
        usage()
    };
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| {
        eprintln!("{path}: {e}");
        std::process::exit(1)
    });
    let file: SceneFile = serde_json::from_str(&text).unwrap_or_else(|e| {
        eprintln!("{path}: not a scene file ({e}); see docs/scene-format.md");
        std::process::exit(1)
    });
    let variants: Vec<ScanVariant> = match flag("--variant").as_deref() {
        None | Some("all") => ScanVariant::compiled().collect(),
        Some(name) => vec![ScanVariant::from_name(name).unwrap_or_else(|| usage())],
    };
    let formats: Vec<InstanceFormat> = match flag("--format").as_deref() {
        None | Some("all") => InstanceFormat::ALL.to_vec(),
        Some(name) => vec![InstanceFormat::from_name(name).unwrap_or_else(|| usage())],
    };
    let output = match flag("--output").as_deref() {
        None | Some("instances") => OutputKind::Instances,
        Some("indices") => OutputKind::Indices,
        Some(_) => usage(),
    };
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
            let mut encoder = ctx.device.create_command_encoder(&Default::default());
            culler
                .cull(
                    &mut encoder,
                    &ctx.queue,
                    &input,
                    &target,
                    &CullParams {
                        frustum,
                        local_bounds: bounds,
                        count,
                    },
                )
                .unwrap();
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
