//! The conservative sphere-against-frustum test
//! (`shaders/cull/visibility/sphere_frustum.wgsl`). Its CPU mirror is
//! [`crate::Frustum::classify`], in the same order of operations, with the
//! tolerance [`crate::sphere::PLANE_TOLERANCE`] that a test holds equal to
//! the WGSL's.

use super::VisibilityKernel;
use crate::kernel::shader_module;

pub(super) const KERNEL: VisibilityKernel = VisibilityKernel {
    name: "sphere-frustum",
    shader_def: "VISIBILITY_SPHERE_FRUSTUM",
    module: shader_module!("visibility/sphere_frustum.wgsl"),
    bindings: &[],
    uniforms: None,
};

/// The same module for one camera's levels of detail: the frustum test and
/// the size once per instance, a band comparison per level.
pub(super) const DETAIL_LEVELS: VisibilityKernel = VisibilityKernel {
    name: "detail-levels",
    shader_def: "VISIBILITY_DETAIL_LEVELS",
    module: shader_module!("visibility/sphere_frustum.wgsl"),
    bindings: &[],
    uniforms: None,
};
