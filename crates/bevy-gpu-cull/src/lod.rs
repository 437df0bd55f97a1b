//! Levels of detail of a batch ([`GpuCullLod`]): which mesh each instance
//! is drawn with, chosen on the GPU from its projected size.

use bevy::prelude::*;

/// [`GpuCullLod::MAX_LEVELS`]. (Views whose levels do not fit one pass
/// together, such as a camera's 8 levels beside its shadow cascades, are
/// culled one view at a time.)
pub(crate) const MAX_LOD_LEVELS: usize = cull_core::MAX_VIEWS as usize;

// The render world keeps the levels facing the camera as bits of a u32.
const _: () = assert!(MAX_LOD_LEVELS <= 32);

/// Levels of detail of a batch: which mesh each instance is drawn with,
/// chosen on the GPU from the instance's projected size in the camera's
/// view (the fraction of the screen height its bounding sphere's diameter
/// covers; `cull_core::SizeMetric`). Level `k` is drawn where the size is at
/// least `levels[k].min_screen_size` and below level `k - 1`'s; instances
/// smaller than the last level's are not drawn (a last size of 0 draws
/// every instance). Shadow views draw each instance at the level the camera
/// chose, so shadows match what casts them (a level facing the camera,
/// [`GpuCullLodLevel::facing_camera`], turns toward each shadow view instead).
///
/// The meshes must share the vertex layout of the batch's `Mesh3d` (the
/// attributes it has; the draw's pipeline is specialized once), and should
/// fit its bounds ([`GpuCullBounds`](crate::GpuCullBounds) is computed from the `Mesh3d`).
/// Thresholds must descend, finite and non-negative; at most
/// [`GpuCullLod::MAX_LEVELS`] levels. A component that breaks these is reported once
/// and the batch is drawn without levels.
///
/// Levels switch at their thresholds unless [`Self::with_cross_fade`] makes
/// them cross-fade, dithered, as Bevy's `VisibilityRange` margins do.
#[derive(Component, Clone, Debug, Default, PartialEq, Reflect)]
#[reflect(Component, Default, Debug, PartialEq, Clone)]
pub struct GpuCullLod {
    /// Finest first.
    pub levels: Vec<GpuCullLodLevel>,
    /// The width of each cross-fade, as a fraction of its threshold: 0 (the
    /// default) switches at the threshold ([`Self::with_cross_fade`]).
    pub cross_fade: f32,
}

/// One level of detail of a [`GpuCullLod`] ([`GpuCullLodLevel::new`]).
#[derive(Clone, Debug, PartialEq, Reflect)]
#[reflect(Debug, PartialEq, Clone)]
#[non_exhaustive]
pub struct GpuCullLodLevel {
    /// The mesh drawn at this level.
    pub mesh: Handle<Mesh>,
    /// The smallest projected size (fraction of the screen height) drawn at
    /// this level.
    pub min_screen_size: f32,
    /// An impostor ([`Self::facing_camera`]): the mesh is turned with the
    /// view that draws it instead of the instance's rotation.
    pub facing_camera: bool,
    /// Drawn as pixels ([`Self::as_pixels`]): one pixel per instance in a
    /// camera's main pass, the mesh elsewhere.
    pub as_pixels: bool,
}

impl GpuCullLodLevel {
    /// A level drawing `mesh` down to `min_screen_size`, turned by each
    /// instance's rotation.
    pub fn new(mesh: Handle<Mesh>, min_screen_size: f32) -> Self {
        Self {
            mesh,
            min_screen_size,
            facing_camera: false,
            as_pixels: false,
        }
    }

    /// Makes the level an impostor, as for distant trees or rocks: its mesh
    /// is drawn turned like the view that draws it (mesh +X to the view's
    /// right, +Y up, +Z toward the viewer), placed and scaled by each
    /// instance but not rotated; normals and tangents turn with it. A flat
    /// mesh in the XY plane then always faces the view. A shadow view turns
    /// it toward its light, so the impostor casts its full outline (and
    /// shades itself where the copy turned toward the light crosses the one
    /// turned toward the camera, as the far side of a sphere is).
    ///
    /// The mesh turns about its origin, while the cull places the batch's
    /// bounding sphere ([`GpuCullBounds`](crate::GpuCullBounds)) by the instance's rotation: every
    /// vertex must lie within `radius - |center|` of the mesh's origin, or
    /// the impostor may be culled while part of it shows. Center the mesh
    /// on its origin, or make the bounds cover it turned every way.
    pub fn facing_camera(mut self) -> Self {
        self.facing_camera = true;
        self
    }

    /// Draws the level's instances as one pixel each, for instances a
    /// pixel or two across (the coarsest level, down to the smallest size
    /// drawn): a compute pass writes each instance's pixel (the nearest
    /// where several land on one) and the batch's material shades those
    /// pixels in one pass over the view's tiles of 16x16 pixels they lie
    /// in, where a GPU's triangle setup would spend as long on each
    /// instance as on a large one. A camera takes the pixel levels of up to
    /// 256 batches; further batches draw their meshes.
    ///
    /// A pixel is shaded as the mesh about its middle: at the instance's
    /// bounding-sphere center, with the mesh's mean normal turned as the
    /// level turns (a closed mesh shows the side facing the view), the
    /// material's texture at the mesh's mean texture coordinate and its
    /// coarsest mip, the instance's color (not the mesh's vertex colors).
    /// Where a camera cannot take the pixels (a depth, normal or
    /// motion-vector prepass, deferred rendering, occlusion culling, a
    /// resolution override), for a material whose fragment shader is not
    /// Bevy's PBR one or that blends, with an application's draw shader,
    /// and in shadow views, the level's mesh is drawn instead.
    pub fn as_pixels(mut self) -> Self {
        self.as_pixels = true;
        self
    }
}

impl From<(Handle<Mesh>, f32)> for GpuCullLodLevel {
    fn from((mesh, min_screen_size): (Handle<Mesh>, f32)) -> Self {
        Self::new(mesh, min_screen_size)
    }
}

impl GpuCullLod {
    /// The most levels a batch may have: one view's levels are culled
    /// together, one list each, in one multi-view cull of at most
    /// `cull_core::MAX_VIEWS` (8) lists.
    pub const MAX_LEVELS: usize = MAX_LOD_LEVELS;

    /// Levels, finest first, from `(mesh, min_screen_size)` pairs or
    /// [`GpuCullLodLevel`]s (`GpuCullLodLevel::new(mesh, size).facing_camera()` for an
    /// impostor).
    pub fn new(levels: impl IntoIterator<Item = impl Into<GpuCullLodLevel>>) -> Self {
        Self {
            levels: levels.into_iter().map(Into::into).collect(),
            cross_fade: 0.0,
        }
    }

    /// Cross-fades each level into the next over the sizes from its
    /// threshold `t` up to `t · (1 + width)` (0 < `width` <= 1; 0 switches
    /// at the threshold), instead of switching meshes at `t`: across that
    /// range the cull keeps an instance in both levels, and each pixel of
    /// it shows one of the two, the finer level on a share of the pixels
    /// that falls from all at `t · (1 + width)` to none at `t` (a fixed
    /// per-pixel dither, the same in the prepasses, so depth agrees). The
    /// last level fades out the same way above its size, rather than
    /// vanishing at it.
    ///
    /// The camera's passes (main and prepasses) dither; shadow views draw
    /// both levels in full across the fade (one mesh inside the other, for
    /// levels that approximate the same shape). Costs: the instances in a
    /// fade are drawn twice, and the batch's draws discard fragments, which
    /// takes early depth testing from them. With the packed 16-byte format
    /// both levels are drawn in full across a fade (its cull widens the
    /// spheres for its quantization, which the draw cannot follow). The
    /// dither is Bevy's visibility-range dither, applied by Bevy's PBR
    /// fragment shader (a `StandardMaterial`'s); a `Material` with a
    /// fragment shader of its own does not dither (both levels are drawn
    /// across the fade) unless it calls Bevy's `visibility_range_dither`,
    /// and a custom draw shader gets the level from the shader library's
    /// `level_dither`.
    pub fn with_cross_fade(mut self, width: f32) -> Self {
        self.cross_fade = width;
        self
    }

    /// Why these levels cannot be used, if they cannot.
    pub fn problem(&self) -> Option<&'static str> {
        let sizes: Vec<f32> = self.levels.iter().map(|l| l.min_screen_size).collect();
        if sizes.is_empty() || sizes.len() > MAX_LOD_LEVELS {
            Some("a GpuCullLod needs 1 to GpuCullLod::MAX_LEVELS (8) levels")
        } else if cull_core::SizeBand::validate_thresholds(&sizes).is_err() {
            Some("GpuCullLod sizes must be finite, non-negative and descending")
        } else if !(0.0..=1.0).contains(&self.cross_fade) {
            Some("a GpuCullLod cross-fade must be from 0 to 1")
        } else if sizes
            .first()
            .is_some_and(|t| !(t * (1.0 + self.cross_fade)).is_finite())
        {
            Some("GpuCullLod sizes times 1 + cross_fade must be finite")
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn level_of_detail_rules_are_checked() {
        let lod = |sizes: &[f32]| GpuCullLod::new(sizes.iter().map(|s| (Handle::<Mesh>::default(), *s)));
        assert_eq!(lod(&[0.05, 0.01, 0.0]).problem(), None);
        // Pairs with literal sizes, or levels, one of them an impostor.
        let mixed = GpuCullLod::new([
            GpuCullLodLevel::new(Handle::default(), 0.05),
            GpuCullLodLevel::new(Handle::default(), 0.01).facing_camera(),
        ]);
        assert_eq!(mixed.problem(), None);
        assert_eq!(
            mixed.levels.iter().map(|l| l.facing_camera).collect::<Vec<_>>(),
            [false, true]
        );
        let pairs = GpuCullLod::new([(Handle::default(), 0.05), (Handle::default(), 0.01)]);
        assert!(pairs.levels.iter().all(|l| !l.facing_camera));
        let most: Vec<f32> = (0..MAX_LOD_LEVELS).map(|k| 0.5 - 0.05 * k as f32).collect();
        assert_eq!(lod(&most).problem(), None);
        let too_many: Vec<f32> = (0..=MAX_LOD_LEVELS).map(|k| 0.5 - 0.05 * k as f32).collect();
        for bad in [
            &[][..],
            &too_many,
            &[0.01, 0.05],
            &[0.05, 0.05],
            &[f32::NAN],
            &[-0.1],
        ] {
            assert!(lod(bad).problem().is_some(), "{bad:?}");
        }
        assert_eq!(lod(&[0.05, 0.01]).with_cross_fade(0.2).problem(), None);
        assert_eq!(lod(&[0.05, 0.01]).with_cross_fade(1.0).problem(), None);
        for bad in [-0.1, 1.5, f32::NAN, f32::INFINITY] {
            assert!(
                lod(&[0.05, 0.01]).with_cross_fade(bad).problem().is_some(),
                "cross-fade {bad}"
            );
        }
        assert!(lod(&[f32::MAX, 0.01]).with_cross_fade(1.0).problem().is_some());
    }
}
