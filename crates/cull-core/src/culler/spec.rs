//! Which kernel of a culler ([`KernelSpec`]), and a kernel's compiled
//! passes.

use crate::passes::CompiledPass;
use crate::visibility::VisibilityTest;
use std::sync::Arc;

/// A kernel's compiled passes, in the order of its recipe.
pub(super) type Kernel = Arc<Vec<CompiledPass>>;

/// Which kernel of a culler: its shape beyond the culler's own settings
/// (variant, format, output kind). A renderer that compiles the kernels
/// itself ([`Culler::deferred`](super::Culler::deferred)) names each one by its spec: what to compile
/// ([`super::Culler::recipe`]), what it hands over
/// ([`super::Culler::provide_pipelines`]), what is ready
/// ([`super::Culler::has_pipelines`]).
///
/// Equality is field by field: for a format without a centred form, a spec
/// with `centred` set and the same spec without it are unequal but name the
/// same kernel (see [`KernelSpec::centred`]); a renderer that keys its own
/// caches by spec should ask for the centred form only where
/// [`crate::InstanceFormat::has_centred_form`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelSpec {
    /// Output windows of its targets ([`crate::CullTarget::windows`]).
    pub windows: u32,
    /// Views of its targets ([`crate::CullTarget::views`]).
    pub views: u32,
    /// How it votes.
    pub test: VisibilityTest,
    /// Whether it culls by cells ([`CullRequest::by_cells`](super::CullRequest::by_cells)): the cell
    /// pass, then the cull over the kept cells' tiles.
    pub cells: bool,
    /// Whether it serves only meshes centred on their origin (local bounds
    /// centered at zero): the 32 B and 16 B formats' votes then leave the
    /// rotation of the mesh's center out ([`crate::InstanceFormat::has_centred_form`]).
    /// A cull of such a mesh takes this kernel where it is ready and the
    /// general one otherwise (both keep the same instances). For a format
    /// without that form it names the general kernel.
    pub centred: bool,
    /// Whether it serves only culls of plain views: no view has a sixth
    /// plane (infinite reverse-Z projections, as Bevy's perspective cameras,
    /// spot lights and point-light faces have, and a directional light's
    /// cascades have five) and, under [`VisibilityTest::Frustum`], none has
    /// a size band. Its vote then tests neither a sixth plane nor a band,
    /// where the general kernel branches on each view's for every instance.
    /// A cull of plain views takes this kernel where it is ready and the
    /// culler takes the plain form for its view count
    /// ([`super::Culler::takes_plain_form`], [`super::Tuning::plain_views`]), the general
    /// one otherwise (both keep the same instances).
    pub plain_views: bool,
}

impl KernelSpec {
    /// The general flat kernel: every instance read, any mesh.
    pub fn flat(windows: u32, views: u32, test: VisibilityTest) -> Self {
        Self {
            windows,
            views,
            test,
            cells: false,
            centred: false,
            plain_views: false,
        }
    }

    /// The general kernel that culls by cells.
    pub fn cells(windows: u32, views: u32, test: VisibilityTest) -> Self {
        Self {
            cells: true,
            ..Self::flat(windows, views, test)
        }
    }

    /// The same kernel's form for meshes centred on their origin.
    pub fn for_centred_meshes(self) -> Self {
        Self {
            centred: true,
            ..self
        }
    }

    /// The same kernel's form for plain views ([`Self::plain_views`]).
    pub fn for_plain_views(self) -> Self {
        Self {
            plain_views: true,
            ..self
        }
    }
}
