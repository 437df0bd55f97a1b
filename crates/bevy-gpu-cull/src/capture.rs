//! Capture for bug reports: the scene file (`docs/scene-format.md`) of one
//! (camera, batch) as the plugin culls it, so that cull-core's `replay`
//! example reproduces a culling question outside Bevy.

use crate::components::{GpuCullBounds, GpuCullFrustumOverride, GpuCullInstances};
use bevy::prelude::*;
use std::fmt::Write as _;
use std::path::PathBuf;

/// Write the scene file of `camera`'s view of `batch` to `path`: the view's
/// `clip_from_world` (the [`GpuCullFrustumOverride`]'s when it has one)
/// taken into the batch's space (times its `GlobalTransform`, in `f64`),
/// the batch's [`GpuCullBounds`] and its instances. Handled at the end of the
/// frame it is sent in; errors are logged.
#[derive(Message, Clone, Debug)]
pub struct GpuCullCaptureScene {
    /// The camera entity.
    pub camera: Entity,
    /// The batch entity (with [`GpuCullInstances`]).
    pub batch: Entity,
    /// Where the JSON goes.
    pub path: PathBuf,
}

/// A number as the scene format writes it: non-finite ones as strings.
fn number(v: f32) -> String {
    if v.is_nan() {
        "\"NaN\"".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "\"inf\"".into()
        } else {
            "\"-inf\"".into()
        }
    } else {
        // Rust's shortest round-trip form: the file holds the exact f32.
        format!("{v:?}")
    }
}

fn numbers(values: &[f32]) -> String {
    let items: Vec<String> = values.iter().map(|v| number(*v)).collect();
    format!("[{}]", items.join(", "))
}

/// The scene file's JSON.
pub(crate) fn scene_json(clip_from_world: Mat4, bounds: &GpuCullBounds, batch: &GpuCullInstances) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "{{");
    let _ = writeln!(
        s,
        "  \"clip_from_world\": {},",
        numbers(&clip_from_world.to_cols_array())
    );
    let _ = writeln!(
        s,
        "  \"bounds\": {{ \"center\": {}, \"radius\": {} }},",
        numbers(&bounds.center.to_array()),
        number(bounds.radius)
    );
    let _ = writeln!(s, "  \"instances\": [");
    let n = batch.instances().len();
    for (i, inst) in batch.instances().iter().enumerate() {
        let _ = writeln!(
            s,
            "    {{ \"position\": {}, \"rotation\": {}, \"scale\": {} }}{}",
            numbers(&inst.position.to_array()),
            numbers(&inst.rotation.to_array()),
            number(inst.scale),
            if i + 1 < n { "," } else { "" }
        );
    }
    let _ = writeln!(s, "  ]");
    let _ = writeln!(s, "}}");
    s
}

pub(crate) fn write_captures(
    mut captures: MessageReader<GpuCullCaptureScene>,
    cameras: Query<(&Camera, &GlobalTransform, Option<&GpuCullFrustumOverride>)>,
    batches: Query<(&GpuCullInstances, &GpuCullBounds, &GlobalTransform)>,
) {
    for capture in captures.read() {
        let Ok((camera, transform, frozen)) = cameras.get(capture.camera) else {
            error!("GPU culling capture: {:?} is not a camera", capture.camera);
            continue;
        };
        let Ok((batch, bounds, batch_transform)) = batches.get(capture.batch) else {
            error!(
                "GPU culling capture: {:?} is not a batch with bounds",
                capture.batch
            );
            continue;
        };
        // The instances are in the batch's space: so is the scene's view,
        // composed in f64 (`clip_from_view · (local_from_world ·
        // world_from_view)⁻¹`), as the plugin culls it.
        let world_from_local = batch_transform.to_matrix().as_dmat4();
        let clip_from_local = match frozen {
            Some(frozen) => frozen.clip_from_world.as_dmat4() * world_from_local,
            None => {
                let local_from_view = world_from_local.inverse() * transform.to_matrix().as_dmat4();
                camera.clip_from_view().as_dmat4() * local_from_view.inverse()
            }
        }
        .as_mat4();
        match std::fs::write(&capture.path, scene_json(clip_from_local, bounds, batch)) {
            Ok(()) => info!("GPU culling capture: wrote {}", capture.path.display()),
            Err(e) => error!("GPU culling capture: {}: {e}", capture.path.display()),
        }
    }
}
