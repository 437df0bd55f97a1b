//! Visibility tests: how an instance's world-space sphere votes. One module
//! each (its descriptor here, the WGSL in `shaders/cull/visibility/`, its
//! CPU mirror named in the module: `Frustum::classify` for the frustum
//! test), registered in [`VISIBILITY_TESTS`] and
//! selected by shader def in `items.wgsl`. Today there is one, the sphere
//! against the view frustum, which also applies each view's level-of-detail
//! band ([`screen_size`], a library module of its own); occlusion comes
//! next.

mod screen_size;
mod sphere_frustum;

use crate::kernel::ShaderModule;

/// One visibility test, described.
pub(crate) struct VisibilityKernel {
    /// A short name.
    pub name: &'static str,
    /// The shader def that selects it in `items.wgsl`.
    pub shader_def: &'static str,
    /// Its WGSL: `visible(WorldSphere, view: u32) -> bool`.
    pub module: ShaderModule,
}

/// The registry.
pub(crate) static VISIBILITY_TESTS: [VisibilityKernel; 1] = [sphere_frustum::KERNEL];

/// Library modules the tests import, in dependency order (before the
/// tests' own modules).
pub(crate) static LIBRARY: [ShaderModule; 1] = [screen_size::MODULE];

/// The test every cull runs today.
pub(crate) fn frustum() -> &'static VisibilityKernel {
    &VISIBILITY_TESTS[0]
}
