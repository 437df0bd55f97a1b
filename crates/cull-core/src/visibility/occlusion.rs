//! Two-phase occlusion culling against a depth pyramid
//! (`shaders/cull/visibility/occlusion.wgsl`): one module, two tests chosen
//! by shader def. Its CPU mirror is [`crate::OcclusionCamera::classify`],
//! with the tolerances [`crate::occlusion::OCCLUSION_PIXEL_MARGIN`] and
//! [`crate::occlusion::OCCLUSION_DEPTH_TOLERANCE`] that a test holds equal
//! to the WGSL's.

use super::{TestInputs, VisibilityKernel};
use crate::kernel::{Slot, bindings, shader_module};
use bytemuck::{Pod, Zeroable};

/// Frustum and history: no pyramid.
pub(super) const EARLY: VisibilityKernel = VisibilityKernel {
    name: "occlusion-early",
    shader_def: "VISIBILITY_OCCLUSION_EARLY",
    module: shader_module!("visibility/occlusion.wgsl"),
    bindings: &[
        (bindings::VISIBILITY_HISTORY, Slot::Read),
        (bindings::TEST_UNIFORMS, Slot::Uniform),
    ],
    uniforms: Some(write_uniforms),
};

/// Frustum and pyramid; reads one half of the history and writes the other.
pub(super) const LATE: VisibilityKernel = VisibilityKernel {
    name: "occlusion-late",
    shader_def: "VISIBILITY_OCCLUSION_LATE",
    module: shader_module!("visibility/occlusion.wgsl"),
    bindings: &[
        (bindings::VISIBILITY_HISTORY, Slot::ReadWrite),
        (bindings::DEPTH_PYRAMID, Slot::FloatTexture),
        (bindings::TEST_UNIFORMS, Slot::Uniform),
    ],
    uniforms: Some(write_uniforms),
};

/// What an occlusion phase's uniforms are made of: the history's halves,
/// and for the late phase the camera and the pyramid.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct OcclusionInputs {
    /// Where the history's halves start, in words: read, write.
    pub history: (u32, u32),
    /// The late phase's camera and pyramid.
    pub late: Option<LateInputs>,
}

/// The late phase's camera ([`crate::OcclusionCamera`]) and depth pyramid
/// ([`crate::DepthPyramid`]), as numbers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LateInputs {
    /// `clip_from_world` about `origin`, column-major.
    pub clip: [[f32; 4]; 4],
    /// The origin, and the slack of the centers' subtraction from it.
    pub origin: [f32; 4],
    pub jitter: f32,
    pub pyramid_size: [u32; 2],
    pub pyramid_levels: u32,
    pub reverse_z: bool,
}

/// The `Occlusion` block of `occlusion.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
struct Uniforms {
    clip: [[f32; 4]; 4],
    origin: [f32; 4],
    pyramid_size: [u32; 2],
    pyramid_levels: u32,
    reverse_z: u32,
    history_read: u32,
    history_write: u32,
    jitter: f32,
    /// Up to the WGSL struct's size (a multiple of 16 bytes).
    _padding: u32,
}

/// Writes an occlusion phase's uniforms (zeros where a cull carries none).
fn write_uniforms(inputs: &TestInputs) -> Vec<u8> {
    let mut block = Uniforms::zeroed();
    if let Some(occlusion) = inputs.occlusion {
        (block.history_read, block.history_write) = occlusion.history;
        if let Some(late) = occlusion.late {
            block.clip = late.clip;
            block.origin = late.origin;
            block.jitter = late.jitter;
            block.pyramid_size = late.pyramid_size;
            block.pyramid_levels = late.pyramid_levels;
            block.reverse_z = u32::from(late.reverse_z);
        }
    }
    bytemuck::bytes_of(&block).to_vec()
}

/// The block fits the target's test uniforms.
const _: () = assert!(size_of::<Uniforms>() as u64 <= crate::kernel::TEST_UNIFORM_BYTES);
