//! Visibility tests: how an instance's world-space sphere votes. One module
//! each (its descriptor here, the WGSL in `shaders/cull/visibility/`, its
//! CPU mirror named in the module: `Frustum::classify` for the frustum
//! test), registered in [`VISIBILITY_TESTS`] and selected by shader def in
//! `items.wgsl`. The sphere against the view frustum also applies each
//! view's level-of-detail band ([`screen_size`], a library module of its
//! own); the two phases of occlusion culling ([`occlusion`]) add the
//! visibility history and the depth pyramid to it.

mod occlusion;
mod screen_size;
mod sphere_frustum;

use crate::kernel::{ShaderModule, Slot};

/// Which visibility test a kernel votes with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum VisibilityTest {
    /// The sphere against the view frustum (and each view's level-of-detail
    /// band): every cull but an occlusion cull's.
    #[default]
    Frustum,
    /// Occlusion culling's early phase: the frustum test, and visible after
    /// the last late phase ([`crate::Culler::cull_views_early`]).
    OcclusionEarly,
    /// Occlusion culling's late phase: the frustum test and the depth
    /// pyramid, not drawn early ([`crate::Culler::cull_views_late`]).
    OcclusionLate,
}

impl VisibilityTest {
    /// Every test, in the registry's order.
    pub const ALL: [VisibilityTest; 3] = [Self::Frustum, Self::OcclusionEarly, Self::OcclusionLate];

    /// Its place in [`VISIBILITY_TESTS`] (and in a culler's kernel cache).
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    pub(crate) fn kernel(self) -> &'static VisibilityKernel {
        &VISIBILITY_TESTS[self.index()]
    }
}

/// One visibility test, described.
pub(crate) struct VisibilityKernel {
    /// A short name.
    pub name: &'static str,
    /// The shader def that selects it in `items.wgsl`.
    pub shader_def: &'static str,
    /// Its WGSL: `visible(WorldSphere, i: u32, view: u32) -> bool`.
    pub module: ShaderModule,
    /// What it binds beyond the uniforms, in every pass that
    /// votes (`crate::passes::EncodeContext::chunk_entries` binds them).
    pub bindings: &'static [(u32, Slot)],
}

/// The registry, in [`VisibilityTest`]'s order.
pub(crate) static VISIBILITY_TESTS: [VisibilityKernel; 3] =
    [sphere_frustum::KERNEL, occlusion::EARLY, occlusion::LATE];

/// Library modules the tests import, in dependency order (before the
/// tests' own modules).
pub(crate) static LIBRARY: [ShaderModule; 1] = [screen_size::MODULE];

/// The tests' own modules, each once, in the registry's order.
pub(crate) fn modules() -> Vec<ShaderModule> {
    let mut modules: Vec<ShaderModule> = VISIBILITY_TESTS.iter().map(|v| v.module).collect();
    modules.dedup();
    modules
}
