//! Two-phase occlusion culling against a depth pyramid
//! (`shaders/cull/visibility/occlusion.wgsl`): one module, two tests chosen
//! by shader def. Its CPU mirror is [`crate::OcclusionCamera::classify`],
//! with the tolerances [`crate::occlusion::OCCLUSION_PIXEL_MARGIN`] and
//! [`crate::occlusion::OCCLUSION_DEPTH_TOLERANCE`] that a test holds equal
//! to the WGSL's.

use super::VisibilityKernel;
use crate::kernel::{Slot, bindings, shader_module};

/// Frustum and history: no pyramid.
pub(super) const EARLY: VisibilityKernel = VisibilityKernel {
    name: "occlusion-early",
    shader_def: "VISIBILITY_OCCLUSION_EARLY",
    module: shader_module!("visibility/occlusion.wgsl"),
    bindings: &[(bindings::VISIBILITY_HISTORY, Slot::Read)],
    uniforms: None,
};

/// Frustum and pyramid; reads one half of the history and writes the other.
pub(super) const LATE: VisibilityKernel = VisibilityKernel {
    name: "occlusion-late",
    shader_def: "VISIBILITY_OCCLUSION_LATE",
    module: shader_module!("visibility/occlusion.wgsl"),
    bindings: &[
        (bindings::VISIBILITY_HISTORY, Slot::ReadWrite),
        (bindings::DEPTH_PYRAMID, Slot::FloatTexture),
    ],
    uniforms: None,
};
