//! Visibility tests: how an instance's world-space sphere votes. One module
//! each (its descriptor here, the WGSL in `shaders/cull/visibility/`, its
//! CPU mirror named in the module: `Frustum::classify` for the frustum
//! test), registered in [`VISIBILITY_TESTS`] and selected by shader def in
//! `items.wgsl` (its `#select visibility` line, generated from the
//! registry: [`crate::selection`]). The sphere against the view frustum also applies each
//! view's level-of-detail band ([`screen_size`], a library module of its
//! own); the two phases of occlusion culling ([`occlusion`]) add the
//! visibility history and the depth pyramid to it.

pub(crate) mod occlusion;
mod screen_size;
mod sphere_frustum;
mod spot_cone;

use crate::frustum::Frustum;
use crate::kernel::{ShaderModule, Slot};

/// Which visibility test a kernel votes with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum VisibilityTest {
    /// The sphere against the view frustum (and each view's level-of-detail
    /// band): every cull but an occlusion cull's.
    #[default]
    Frustum,
    /// The frustum test for the levels of detail of one camera: views with
    /// the same planes and size metric ([`crate::Frustum::detail_levels`]).
    /// The frustum test and the size are computed once per instance, and
    /// each level compares the size with its band. [`crate::CullRequest`]
    /// picks it for such views ([`Self::for_views`]) when its kernel is
    /// available, else [`Self::Frustum`]'s, which keeps the same instances.
    DetailLevels,
    /// Occlusion culling's early phase: the frustum test, and visible after
    /// the last late phase ([`crate::CullRequest::occlusion_early`]).
    OcclusionEarly,
    /// Occlusion culling's late phase: the frustum test and the depth
    /// pyramid, not drawn early ([`crate::CullRequest::occlusion_late`]).
    OcclusionLate,
    /// A spot light's views: the frustum test and the cone the light
    /// lights ([`crate::Frustum::with_cone`]). [`Self::for_views`] picks it
    /// where a view has a cone; where its kernel is not available, the
    /// frustum test's keeps a superset.
    SpotCone,
}

impl VisibilityTest {
    /// Every test, in the registry's order.
    pub const ALL: [VisibilityTest; 5] = [
        Self::Frustum,
        Self::DetailLevels,
        Self::OcclusionEarly,
        Self::OcclusionLate,
        Self::SpotCone,
    ];

    /// The test a plain cull of `frusta` ([`crate::CullRequest`])
    /// votes with: [`Self::SpotCone`] where a view has a cone;
    /// [`Self::DetailLevels`] for several views that are one camera's
    /// levels (the same planes, and no size band in any or bands of the
    /// same metric in all); else [`Self::Frustum`].
    pub fn for_views(frusta: &[Frustum]) -> Self {
        if frusta.iter().any(|f| f.cone.is_some()) {
            Self::SpotCone
        } else if frusta.len() > 1 && views_share_camera(frusta) {
            Self::DetailLevels
        } else {
            Self::Frustum
        }
    }

    /// Its place in [`VISIBILITY_TESTS`] (and in a culler's kernel cache).
    pub(crate) fn index(self) -> usize {
        self as usize
    }

    pub(crate) fn kernel(self) -> &'static VisibilityKernel {
        &VISIBILITY_TESTS[self.index()]
    }
}

/// Whether `frusta` are one camera's views, as [`crate::Frustum::detail_levels`]
/// gives them: the same planes, and either no size band in any or bands of
/// the same metric in all. The tests that measure the frustum and the size
/// once per instance ([`VisibilityTest::DetailLevels`], the occlusion
/// phases) need it.
pub(crate) fn views_share_camera(frusta: &[Frustum]) -> bool {
    let Some(first) = frusta.first() else {
        return true;
    };
    frusta.iter().all(|f| {
        f.planes() == first.planes()
            && match (&f.size_band, &first.size_band) {
                (None, None) => true,
                (Some(a), Some(b)) => a.metric == b.metric,
                _ => false,
            }
    })
}

/// Whether a cull of `frusta` with `test` may take the kernel for plain
/// views ([`crate::KernelSpec::plain_views`]): no view has a sixth plane
/// (its slot keeps everything, and the plain kernel does not read it) and,
/// under [`VisibilityTest::Frustum`], none has a size band (the other tests
/// apply their bands whatever the form).
pub(crate) fn views_are_plain(frusta: &[Frustum], test: VisibilityTest) -> bool {
    frusta
        .iter()
        .all(|f| f.planes().len() <= 5 && (test != VisibilityTest::Frustum || f.size_band.is_none()))
}

/// How a test writes its own uniforms from what a cull carries.
pub(crate) type WriteUniforms = fn(&TestInputs) -> Vec<u8>;

/// What a cull hands its visibility test's uniforms ([`VisibilityKernel::uniforms`]).
pub(crate) struct TestInputs<'a> {
    /// The cull's views.
    pub frusta: &'a [Frustum],
    /// An occlusion phase's camera, pyramid and history; `None` in other
    /// culls.
    pub occlusion: Option<occlusion::OcclusionInputs>,
}

/// One visibility test, described.
pub(crate) struct VisibilityKernel {
    /// A short name.
    pub name: &'static str,
    /// The shader def that selects it in `items.wgsl`.
    pub shader_def: &'static str,
    /// Its WGSL: a `Verdict` struct, `classify(WorldSphere, i: u32) ->
    /// Verdict` (once per instance: what no view changes),
    /// `keeps(Verdict, view: u32) -> bool` (per view) and `keeps_rows` (the
    /// same for a thread's four items).
    pub module: ShaderModule,
    /// What it binds beyond the uniforms, in every pass that
    /// votes (`crate::passes::EncodeContext::chunk_entries` binds them).
    pub bindings: &'static [(u32, Slot)],
    /// Its own uniforms, written from what the cull carries into the
    /// target's test uniforms ([`crate::kernel::bindings::TEST_UNIFORMS`], at most
    /// [`crate::kernel::TEST_UNIFORM_BYTES`]) before its passes; `None`
    /// for a test that has none.
    pub uniforms: Option<WriteUniforms>,
}

/// The registry, in [`VisibilityTest`]'s order.
pub(crate) static VISIBILITY_TESTS: [VisibilityKernel; 5] = [
    sphere_frustum::KERNEL,
    sphere_frustum::DETAIL_LEVELS,
    occlusion::EARLY,
    occlusion::LATE,
    spot_cone::KERNEL,
];

/// Library modules the tests import, in dependency order (before the
/// tests' own modules).
pub(crate) static LIBRARY: [ShaderModule; 1] = [screen_size::MODULE];

/// The tests' own modules, each once, in the registry's order.
pub(crate) fn modules() -> Vec<ShaderModule> {
    let mut modules: Vec<ShaderModule> = VISIBILITY_TESTS.iter().map(|v| v.module).collect();
    modules.dedup();
    modules
}
