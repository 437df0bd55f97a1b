//! `--local-center origin|offset`: where the mesh's bounding sphere sits in
//! its own space. Most meshes are centred on their origin, and the formats'
//! votes skip the rotation of the center then; the random scenes put it off
//! the origin, so that every vote rotates it.

use cull_core::scene::Scene;

/// Whether the sphere is centred (`origin`) or not (`offset`).
pub fn parse(value: &str) -> Result<bool, String> {
    match value {
        "origin" => Ok(true),
        "offset" => Ok(false),
        o => Err(format!("--local-center {o}: origin or offset")),
    }
}

/// Moves `scene`'s mesh sphere to the origin when `centred`.
pub fn apply(scene: &mut Scene, centred: bool) {
    if centred {
        scene.bounds.center = glam::Vec3::ZERO;
    }
}

/// The run's setting, for table headers.
pub fn describe(centred: bool) -> &'static str {
    if centred {
        "the mesh's sphere centred on its origin"
    } else {
        "the mesh's sphere off its origin"
    }
}
