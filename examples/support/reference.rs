//! The CPU's reference for what a camera's cull of a batch keeps, to check
//! the GPU's count against.

use bevy::prelude::*;
use bevy_gpu_cull::cull_core::{Frustum, SizeMetric, cpu::Reference};
use bevy_gpu_cull::prelude::*;

/// The CPU's reference for the final view: the spheres in its frustum;
/// with levels of detail, the sum of the levels' references (each level's
/// frustum limited to its sizes; a sphere in a cross-fade counts in two).
pub fn cpu_reference(
    clip_from_view: Mat4,
    world_from_view: Mat4,
    instances: &GpuCullInstances,
    bounds: GpuCullBounds,
    lod: Option<&GpuCullLod>,
    format: GpuCullInstanceFormat,
) -> Option<Reference> {
    let frustum = Frustum::from_view(clip_from_view, world_from_view, None).ok()?;
    let frusta = match lod {
        Some(lod) => {
            let sizes: Vec<f32> = lod.levels.iter().map(|l| l.min_screen_size).collect();
            let metric = SizeMetric::from_view(clip_from_view, world_from_view);
            frustum
                .detail_levels_overlapping(metric, &sizes, lod.cross_fade)
                .ok()?
        }
        None => vec![frustum],
    };
    let mut sum = Reference::default();
    for frustum in &frusta {
        let r = instances.reference_on_cpu(bounds, frustum, format).ok()?;
        sum.visible.extend(r.visible);
        sum.borderline.extend(r.borderline);
    }
    Some(sum)
}
