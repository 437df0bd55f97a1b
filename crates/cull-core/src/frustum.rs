//! View frustum planes extracted from a `clip_from_world` matrix.
//!
//! wgpu's clip space keeps a point when `-w <= x <= w`, `-w <= y <= w` and
//! `0 <= z <= w` (Gribb & Hartmann with a 0..1 depth range). Each inequality
//! is a plane `dot(row, p) >= 0` built from the matrix rows. Bevy's default
//! projection is reverse-Z with an infinite far plane: there the `z >= 0` row
//! has a zero normal (the far plane sits at infinity). Such a plane is dropped
//! rather than normalized into NaN.
//!
//! The frustum is the one the given `f32` matrix defines in exact
//! arithmetic: the rows are combined and normalized in `f64`, so neither the
//! distance of the camera from the world origin nor the cancellation in a
//! row difference loses a plane (see `docs/architecture.md`, "Contracts").

use crate::CullError;
use crate::cone::SpotCone;
use crate::sphere::{BORDER_BAND, PLANE_TOLERANCE, SphereClass, WorldSphere, slack_magnitude};
use glam::{DMat4, DVec3, DVec4, Mat4, Vec3, Vec4};

/// A plane whose normal is this small against the magnitude of the matrix
/// entries it was combined from (`|n| ≤ 2⁻²⁰·(|a| + |b|)` for `n = a ± b`)
/// is within `f32` rounding of zero: it lies at infinity (the far plane of an
/// infinite projection) or so far that the matrix cannot place it (a
/// standard-depth far plane beyond about 10⁶ times the near distance). Such
/// a plane is dropped, which keeps more, never less. The test compares
/// normals with normals only, so it does not depend on where the world
/// origin is.
const AT_INFINITY: f64 = 1.0 / (1u64 << 20) as f64;

/// A plane with its offset widened by the tolerance, as uploaded to the GPU.
pub fn widen_plane(p: Vec4) -> Vec4 {
    Vec4::new(p.x, p.y, p.z, p.w + PLANE_TOLERANCE * p.w.abs())
}

/// The planes of a view frustum, normals pointing inwards, normalized, and
/// optionally a level-of-detail band: the view then keeps only the
/// instances whose projected size lies in the band ([`Self::detail_levels`]
/// makes one view per level).
///
/// ```
/// use cull_core::Frustum;
/// use glam::{Mat4, Vec3};
/// // A camera at the origin looking down -Z, with Bevy's projection
/// // (reverse Z, no far plane).
/// let clip_from_world = Mat4::perspective_infinite_reverse_rh(1.0, 16.0 / 9.0, 0.1);
/// let view = Frustum::from_clip_from_world(clip_from_world, None)?;
/// assert!(view.intersects_sphere(Vec3::new(0.0, 0.0, -10.0), 0.5)); // ahead
/// assert!(!view.intersects_sphere(Vec3::new(0.0, 0.0, 10.0), 0.5)); // behind
/// # Ok::<(), cull_core::CullError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Frustum {
    /// Planes as `(normal, d)`: a point `p` is inside when `dot(normal, p) + d >= 0`.
    /// Only the first `len` are used.
    pub planes: [Vec4; 6],
    /// Number of planes in use: 5 for an infinite far plane, 6 otherwise;
    /// up to 6 for a cascade culled to its receivers ([`Self::from_shadow_receivers`]),
    /// none for [`Self::everything`].
    pub len: usize,
    /// The projected sizes this view keeps; `None`: every size.
    pub size_band: Option<SizeBand>,
    /// The cone this view's light lights ([`Self::with_cone`]); `None`:
    /// the whole frustum.
    pub cone: Option<SpotCone>,
}

/// How big a sphere looks from a camera: the fraction of the screen height
/// its diameter covers, `radius · scale / distance` for a perspective view
/// (`distance` from the camera's position), `radius · scale` for an
/// orthographic one. Right for any field of view and resolution.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SizeMetric {
    /// The camera's position, in the space the instances are in (the
    /// world's, or a batch's: [`crate::LocalFrame::size_metric`]).
    pub origin: Vec3,
    /// The projection's vertical scale (`clip_from_view.y_axis.y`, its
    /// magnitude for a mirrored view).
    pub scale: f32,
    /// Whether size falls with distance (a perspective projection).
    pub perspective: bool,
}

impl SizeMetric {
    /// The metric of a camera with this projection and `world_from_view`
    /// transform (the camera's global transform).
    pub fn from_view(clip_from_view: Mat4, world_from_view: Mat4) -> Self {
        Self {
            origin: world_from_view.w_axis.truncate(),
            scale: clip_from_view.y_axis.y.abs(),
            // A perspective projection divides by depth: w comes from z.
            perspective: clip_from_view.w_axis.w == 0.0,
        }
    }

    /// The projected size of a sphere, in `f64` (the CPU reference's).
    pub fn size(&self, center: Vec3, radius: f32) -> f64 {
        let numerator = radius as f64 * self.scale as f64;
        if !self.perspective {
            return numerator;
        }
        let distance = (center.as_dvec3() - self.origin.as_dvec3()).length();
        if distance == 0.0 {
            f64::INFINITY
        } else {
            numerator / distance
        }
    }
}

/// The projected sizes a view keeps: `min <= size < max` ([`SizeMetric`]).
/// A level of detail is a band; the nearest level's `max` is infinite and
/// the farthest level's `min` is the size below which instances are culled.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SizeBand {
    /// How sizes are measured.
    pub metric: SizeMetric,
    /// The smallest size kept (0: no cut-off).
    pub min: f32,
    /// The size from which the next, finer level takes over (`f32::INFINITY`
    /// for the finest level).
    pub max: f32,
}

/// Relative widening of each end of a [`SizeBand`] on the GPU: neighbouring
/// levels overlap by this much rather than leave a gap to rounding, so a
/// sphere within it of a threshold may be kept at both levels, never at
/// neither.
pub const SIZE_BAND_TOLERANCE: f32 = 1.0 / (1 << 16) as f32;

impl SizeBand {
    /// Refuses a band the GPU and the CPU reference could read differently:
    /// a non-finite origin or scale, a negative or NaN `min`, a `max` not
    /// above `min` (an infinite `max` is the finest level).
    pub fn validate(&self) -> Result<(), CullError> {
        let m = self.metric;
        let ok = m.origin.is_finite()
            && m.scale.is_finite()
            && m.scale >= 0.0
            && self.min.is_finite()
            && self.min >= 0.0
            && self.max > self.min
            && !self.max.is_nan();
        if ok {
            Ok(())
        } else {
            Err(CullError::InvalidParameter(
                "a size band needs a finite origin and scale and 0 <= min < max",
            ))
        }
    }

    /// Refuses thresholds that do not make levels: each level's smallest
    /// size must be finite and non-negative, and the sizes must descend.
    pub fn validate_thresholds(thresholds: &[f32]) -> Result<(), CullError> {
        let valid = thresholds.iter().all(|t| t.is_finite() && *t >= 0.0)
            && thresholds.windows(2).all(|w| w[0] > w[1]);
        if valid {
            Ok(())
        } else {
            Err(CullError::InvalidParameter(
                "detail level thresholds must be finite, non-negative and descending",
            ))
        }
    }

    /// The band as the shaders read it (`size_bands` in `params.wgsl`).
    pub(crate) fn gpu(&self) -> [[f32; 4]; 2] {
        let m = self.metric;
        [
            [m.origin.x, m.origin.y, m.origin.z, m.scale],
            [
                self.min * (1.0 - SIZE_BAND_TOLERANCE),
                if self.max.is_finite() {
                    self.max * (1.0 + SIZE_BAND_TOLERANCE)
                } else {
                    f32::INFINITY
                },
                if m.perspective { 1.0 } else { 0.0 },
                1.0,
            ],
        ]
    }

    /// Classifies a sphere against the band as the GPU decides it: clearly
    /// inside or outside the widened band, or within twice the tolerance of
    /// one of its ends (either answer is right there). `magnitude` is that of
    /// the terms the center was summed from (as for the planes): far from
    /// the origin the GPU's center may differ from the CPU's by a few ulps
    /// of it, which moves the size by that much over the distance, so the
    /// borderline zone widens by it.
    pub fn classify(&self, center: Vec3, radius: f32, magnitude: f32) -> SphereClass {
        let size = self.metric.size(center, radius);
        let mut t = 2.0 * SIZE_BAND_TOLERANCE as f64;
        if self.metric.perspective {
            let distance = (center.as_dvec3() - self.metric.origin.as_dvec3()).length();
            let terms = magnitude as f64 + self.metric.origin.abs().element_sum() as f64;
            t += PLANE_TOLERANCE as f64 * terms / distance.max(f64::MIN_POSITIVE);
        }
        let (min, max) = (self.min as f64, self.max as f64);
        // An infinite max (the finest level) keeps every size above min,
        // an infinitely large one (the camera at the center) included.
        let below_max = |k: f64| !max.is_finite() || size < max * k;
        if size < min * (1.0 - t) || !below_max(1.0 + t) {
            return SphereClass::Outside;
        }
        if size < min || !below_max(1.0) {
            return SphereClass::Borderline;
        }
        SphereClass::Inside
    }
}

impl Frustum {
    /// Extracts the frustum of a `clip_from_world` matrix in wgpu's clip space
    /// (depth 0..1, either standard or reverse-Z, finite or infinite far plane,
    /// perspective or orthographic, mirrored or not), anywhere in the world.
    ///
    /// `max_distance`, when given, adds a plane parallel to the near plane at
    /// that distance beyond it, which bounds infinite projections. A
    /// perspective matrix tells its near plane by `w`, which grows with view
    /// depth. An orthographic one cannot: a mirrored view and a reverse-Z one
    /// give the same kind of matrix, so with `max_distance` an orthographic
    /// matrix is refused ([`CullError::AmbiguousDepth`]); use
    /// [`Self::from_view`], which knows where the camera looks.
    pub fn from_clip_from_world(clip_from_world: Mat4, max_distance: Option<f32>) -> Result<Self, CullError> {
        if !clip_from_world.is_finite() {
            return Err(CullError::DegenerateFrustum("the matrix is not finite"));
        }
        Self::extract(clip_from_world.as_dmat4(), None, max_distance, false)
    }

    /// The volume that casts shadows into an orthographic shadow map (a
    /// directional light's cascade, reverse-Z as Bevy builds it: the
    /// light-side plane at depth 1): the frustum of `clip_from_world`
    /// without that plane, so a caster between the light and the cascade,
    /// whose shadow falls into it, is kept. (The shadow pass draws such a
    /// caster with unclipped depth, clamped onto the near plane.)
    pub fn from_shadow_cascade(clip_from_world: Mat4) -> Result<Self, CullError> {
        if !clip_from_world.is_finite() {
            return Err(CullError::DegenerateFrustum("the matrix is not finite"));
        }
        Self::extract(clip_from_world.as_dmat4(), None, None, true)
    }

    /// Extracts the frustum of a camera from its projection (`clip_from_view`,
    /// wgpu clip space) and its transform (`world_from_view`, which may mirror
    /// or scale): the planes are found in view space, where the camera looks
    /// along −Z (Bevy's and glam's convention), and moved into the world in
    /// `f64`. Unlike [`Self::from_clip_from_world`], this tells the near plane
    /// of an orthographic projection in a mirrored view, so `max_distance`
    /// works with every projection.
    pub fn from_view(
        clip_from_view: Mat4,
        world_from_view: Mat4,
        max_distance: Option<f32>,
    ) -> Result<Self, CullError> {
        if !(clip_from_view.is_finite() && world_from_view.is_finite()) {
            return Err(CullError::DegenerateFrustum("the matrix is not finite"));
        }
        Self::from_view_f64(clip_from_view, world_from_view.as_dmat4(), max_distance)
    }

    /// [`Self::from_view`] with the camera's transform in `f64` (composed
    /// with a batch's frame by [`crate::LocalFrame`]).
    pub(crate) fn from_view_f64(
        clip_from_view: Mat4,
        world_from_view: DMat4,
        max_distance: Option<f32>,
    ) -> Result<Self, CullError> {
        if world_from_view.determinant() == 0.0 {
            return Err(CullError::DegenerateFrustum("world_from_view is singular"));
        }
        // Depth grows along w's gradient for a perspective projection and
        // along the camera's -Z for an orthographic one (constant w), told
        // exactly from the projection alone.
        let perspective = clip_from_view.row(3).truncate() != Vec3::ZERO;
        let deeper = if perspective {
            None
        } else {
            Some(world_from_view.transform_vector3(DVec3::NEG_Z))
        };
        let clip_from_world = clip_from_view.as_dmat4() * world_from_view.inverse();
        Self::extract(clip_from_world, deeper, max_distance, false)
    }

    /// The planes of `clip_from_world` (entries exact `f32` values, or the
    /// `f64` product of [`Self::from_view`]); `deeper` is where an
    /// orthographic camera looks, when known (`None` for a perspective one,
    /// or when unknown).
    pub(crate) fn extract(
        m: DMat4,
        deeper: Option<DVec3>,
        max_distance: Option<f32>,
        open_toward_depth_one: bool,
    ) -> Result<Self, CullError> {
        let mut planes = ClipPlanes::of(m, open_toward_depth_one)?;
        if let Some(max_distance) = max_distance {
            planes.bound_distance(m, deeper, max_distance)?;
        }
        Ok(Self {
            planes: planes.planes,
            len: planes.len,
            size_band: None,
            cone: None,
        })
    }

    /// A frustum with no planes: it keeps every finite instance. For a view
    /// whose matrices give no usable frustum, culling with it draws too much
    /// rather than losing what might be visible (the Bevy plugin does this).
    pub const fn everything() -> Self {
        Self {
            planes: [Vec4::ZERO; 6],
            len: 0,
            size_band: None,
            cone: None,
        }
    }

    /// This frustum keeping only the sizes in `band`.
    pub fn with_size_band(self, band: SizeBand) -> Self {
        Self {
            size_band: Some(band),
            ..self
        }
    }

    /// This frustum keeping only what touches `cone`, the cone a spot light
    /// lights (its shadow map's frustum is the square around the cone):
    /// culled with [`crate::VisibilityTest::SpotCone`], which keeps fewer
    /// shadow casters than the frustum alone and loses none that can shadow
    /// a lit point. A frustum's levels of detail ([`Self::detail_levels`])
    /// keep its cone.
    pub fn with_cone(self, cone: SpotCone) -> Self {
        Self {
            cone: Some(cone),
            ..self
        }
    }

    /// One view per level of detail: view `k` keeps the instances whose size
    /// ([`SizeMetric`]) is in `[thresholds[k], thresholds[k - 1])`, level 0
    /// from `thresholds[0]` up. `thresholds` descend; past the last, an
    /// instance is culled (a last threshold of 0 keeps every size). Cull
    /// them with `Culler::cull`: each level gets its own survivor list
    /// and draw arguments, and the order-preserving variants keep input
    /// order within each.
    pub fn detail_levels(&self, metric: SizeMetric, thresholds: &[f32]) -> Result<Vec<Frustum>, CullError> {
        self.detail_levels_overlapping(metric, thresholds, 0.0)
    }

    /// [`Self::detail_levels`] with each level reaching `overlap` (a
    /// fraction) above the finer level's threshold: view `k` keeps
    /// `[thresholds[k], thresholds[k - 1] · (1 + overlap))`. An instance in
    /// the overlap is in both levels' lists, for a draw that cross-fades
    /// between them (the Bevy plugin dithers the finer level out and the
    /// coarser one in across the overlap). `overlap` must be finite and at
    /// least 0; 0 is [`Self::detail_levels`].
    pub fn detail_levels_overlapping(
        &self,
        metric: SizeMetric,
        thresholds: &[f32],
        overlap: f32,
    ) -> Result<Vec<Frustum>, CullError> {
        SizeBand::validate_thresholds(thresholds)?;
        if !(metric.scale.is_finite() && metric.origin.is_finite()) {
            return Err(CullError::InvalidParameter(
                "a detail level metric must be finite",
            ));
        }
        if !(overlap.is_finite() && overlap >= 0.0) {
            return Err(CullError::InvalidParameter(
                "a detail level overlap must be finite and at least 0",
            ));
        }
        let levels: Vec<Frustum> = thresholds
            .iter()
            .enumerate()
            .map(|(k, &min)| {
                let max = if k == 0 {
                    f32::INFINITY
                } else {
                    thresholds[k - 1] * (1.0 + overlap)
                };
                self.with_size_band(SizeBand { metric, min, max })
            })
            .collect();
        // A threshold near f32::MAX times (1 + overlap) overflows, which
        // would make a coarser level keep every size above its own.
        if levels[1.min(levels.len())..]
            .iter()
            .any(|l| l.size_band.is_some_and(|b| !b.max.is_finite()))
        {
            return Err(CullError::InvalidParameter(
                "a detail level threshold times 1 + overlap must be finite",
            ));
        }
        Ok(levels)
    }

    /// The planes in use.
    pub fn planes(&self) -> &[Vec4] {
        &self.planes[..self.len]
    }

    /// The conservative sphere test shared with the shaders: `true` when the
    /// sphere touches or intersects the frustum (or might, within
    /// [`PLANE_TOLERANCE`]). Non-finite spheres are never visible.
    pub fn intersects_sphere(&self, center: Vec3, radius: f32) -> bool {
        self.classify_sphere(center, radius) != SphereClass::Outside
    }

    /// Like [`Self::intersects_sphere`] but also reports spheres within a few
    /// ulps of the boundary, where GPU rounding may legitimately differ.
    pub fn classify_sphere(&self, center: Vec3, radius: f32) -> SphereClass {
        if !(center.is_finite() && radius.is_finite()) {
            return SphereClass::Outside;
        }
        self.classify(&WorldSphere {
            center,
            radius,
            terms: 0.0,
        })
    }

    /// Classifies an instance's world sphere exactly as the shaders' vote
    /// does (`visible()` and `classify()` in `shaders/cull/visibility/sphere_frustum.wgsl`): a sphere whose widened
    /// radius or center is not finite (the transform overflowed `f32`) is
    /// kept; otherwise each plane's margin decides.
    pub fn classify(&self, sphere: &WorldSphere) -> SphereClass {
        let WorldSphere {
            center,
            radius,
            terms,
        } = *sphere;
        let magnitude = slack_magnitude(center, radius, terms);
        let wide = radius + PLANE_TOLERANCE * magnitude;
        // Every center component reaches `wide` through abs(): one test
        // covers an infinity or NaN anywhere, as in the shaders.
        if !wide.is_finite() {
            return SphereClass::Inside;
        }
        let mut class = match self.size_band {
            Some(band) => band.classify(center, radius, magnitude),
            None => SphereClass::Inside,
        };
        if class == SphereClass::Outside {
            return class;
        }
        for p in self.planes() {
            let p = widen_plane(*p);
            // The same terms as the shaders' test (plane_distance(), the
            // least distance against -wide), which fuses them as
            // multiply-adds from the offset on: a few ulps apart, within
            // the borderline band.
            let margin = p.x * center.x + p.y * center.y + p.z * center.z + p.w + wide;
            let band = BORDER_BAND * (magnitude + p.w.abs());
            if margin < -band {
                return SphereClass::Outside;
            }
            if margin < band {
                class = SphereClass::Borderline;
            }
        }
        match self.cone.map(|cone| cone.classify(sphere)) {
            Some(SphereClass::Outside) => SphereClass::Outside,
            Some(SphereClass::Borderline) => SphereClass::Borderline,
            _ => class,
        }
    }
}

/// The planes of a clip-from-world matrix, before they become a
/// [`Frustum`]: the usable ones in order, and the depth planes among them.
struct ClipPlanes {
    planes: [Vec4; 6],
    len: usize,
    /// Normalized depth planes in f64: [z >= 0, z <= w] and their places in
    /// `planes`; `None` when at infinity.
    depth: [Option<(usize, DVec4)>; 2],
}

impl ClipPlanes {
    /// The planes of `m` (see [`Frustum::extract`]): a plane at infinity,
    /// or one too tilted to be told from rounding, is dropped, which keeps
    /// more, never less; fewer than five left is refused.
    fn of(m: DMat4, open_toward_depth_one: bool) -> Result<Self, CullError> {
        let (r0, r1, r2, r3) = (m.row(0), m.row(1), m.row(2), m.row(3));
        // (plane, magnitude of what it was combined from). Order matters only
        // for speed: the side planes reject most instances.
        let raw = [
            (r3 + r0, len3(r3) + len3(r0)),
            (r3 - r0, len3(r3) + len3(r0)),
            (r3 + r1, len3(r3) + len3(r1)),
            (r3 - r1, len3(r3) + len3(r1)),
            (r2, len3(r2)),
            (r3 - r2, len3(r3) + len3(r2)),
        ];
        let mut out = Self {
            planes: [Vec4::ZERO; 6],
            len: 0,
            depth: [None, None],
        };
        for (i, (p, magnitude)) in raw.iter().enumerate() {
            if open_toward_depth_one && i == 5 {
                continue;
            }
            let n = len3(*p);
            if n == 0.0 {
                if p.w >= 0.0 {
                    continue; // every point satisfies it
                }
                return Err(CullError::DegenerateFrustum(
                    "a clip plane at infinity excludes every point",
                ));
            }
            let plane = *p / n;
            // Dropped whatever the sign of its offset, which depends on where
            // the origin is: dropping keeps more, never less.
            if n <= magnitude * AT_INFINITY || !plane.as_vec4().is_finite() {
                continue;
            }
            out.planes[out.len] = plane.as_vec4();
            out.len += 1;
            if i >= 4 {
                out.depth[i - 4] = Some((out.len - 1, plane));
            }
        }
        if out.len < 5 {
            return Err(CullError::DegenerateFrustum("fewer than five usable planes"));
        }
        Ok(out)
    }

    /// Bounds the planes at `max_distance` past the near plane of `m`:
    /// the far plane moves there where it lies farther, or a plane is added
    /// where there is none. `deeper` as [`Frustum::extract`]'s.
    fn bound_distance(
        &mut self,
        m: DMat4,
        deeper: Option<DVec3>,
        max_distance: f32,
    ) -> Result<(), CullError> {
        if !(max_distance.is_finite() && max_distance > 0.0) {
            return Err(CullError::InvalidParameter(
                "max_distance must be finite and positive",
            ));
        }
        // The direction in which view depth grows: the orthographic camera's
        // forward axis when known, else w's gradient, which for a perspective
        // projection is exact whatever the mirroring. An orthographic w is
        // constant: its gradient is zero in glam's and Bevy's matrices; a
        // gradient that is rounding noise of a hand-made one points anywhere,
        // which the alignment check below refuses.
        let w_gradient = m.row(3).truncate();
        // The side rows set the scale w's gradient is judged against.
        let side_scale = len3(m.row(0)).max(len3(m.row(1)));
        let (deeper, from_w) = match deeper {
            Some(forward) => (forward, false),
            None if w_gradient.length() > side_scale * (AT_INFINITY * AT_INFINITY) => (w_gradient, true),
            None => return Err(CullError::AmbiguousDepth),
        };
        // The near plane faces deeper (its inside is in front of it); the far
        // plane faces back towards the camera.
        let faces_deeper = |p: &DVec4| p.truncate().dot(deeper) > 0.0;
        let near = self.depth.iter().flatten().find(|(_, p)| faces_deeper(p));
        let far = self.depth.iter().flatten().find(|(_, p)| !faces_deeper(p));
        let Some(&(_, near)) = near else {
            return Err(CullError::InvalidParameter(
                "max_distance needs a near plane, and this projection has none",
            ));
        };
        // A perspective near plane faces along w's gradient (exactly, unless
        // the projection is oblique); one far off it means the gradient is
        // noise, or an oblique plane too tilted to measure from.
        if from_w && near.truncate().dot(deeper) < 0.5 * deeper.length() {
            return Err(CullError::AmbiguousDepth);
        }
        // near: n.p + d >= 0 (inside is in front). bound: -n.p - d + distance >= 0.
        let bound = DVec4::new(-near.x, -near.y, -near.z, -near.w + max_distance as f64);
        match far {
            // Measure the far plane's distance from the point of the near
            // plane closest to the origin (exact for parallel depth planes).
            Some(&(idx, far)) => {
                let on_near = -near.truncate() * near.w;
                if far.truncate().dot(on_near) + far.w > max_distance as f64 {
                    self.planes[idx] = bound.as_vec4();
                }
            }
            None => {
                if self.len == self.planes.len() {
                    return Err(CullError::DegenerateFrustum("no room for the max_distance plane"));
                }
                self.planes[self.len] = bound.as_vec4();
                self.len += 1;
            }
        }
        Ok(())
    }
}

/// The length of a plane's normal part.
fn len3(v: DVec4) -> f64 {
    v.truncate().length()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::CullError;

    fn frustum(m: Mat4) -> Frustum {
        Frustum::from_clip_from_world(m, None).unwrap()
    }

    #[test]
    fn size_metric_is_the_screen_fraction_of_the_diameter() {
        // A 90° vertical field of view: at distance 10 the screen's height
        // spans 20 units, so a sphere of radius 1 covers a tenth of it.
        let proj = Mat4::perspective_infinite_reverse_rh(std::f32::consts::FRAC_PI_2, 1.5, 0.1);
        let eye = Mat4::from_translation(Vec3::new(3.0, 0.0, 0.0));
        let m = SizeMetric::from_view(proj, eye);
        assert!(m.perspective && m.origin == Vec3::new(3.0, 0.0, 0.0));
        let size = m.size(Vec3::new(3.0, 0.0, -10.0), 1.0);
        assert!((size - 0.1).abs() < 1e-6, "{size}");
        assert_eq!(m.size(m.origin, 1.0), f64::INFINITY);
        let ortho = SizeMetric::from_view(Mat4::orthographic_rh(-5.0, 5.0, -5.0, 5.0, 0.1, 100.0), eye);
        assert!(!ortho.perspective);
        assert!((ortho.size(Vec3::new(0.0, 0.0, -50.0), 1.0) - 0.2).abs() < 1e-6);
    }

    #[test]
    fn detail_levels_partition_sizes() {
        let m = SizeMetric {
            origin: Vec3::ZERO,
            scale: 1.0,
            perspective: true,
        };
        let levels = Frustum::everything().detail_levels(m, &[0.5, 0.1, 0.02]).unwrap();
        // Sizes 1, 0.25, 0.05, 0.01 at distance 1 (radius = size).
        for (size, expected) in [(1.0, Some(0)), (0.25, Some(1)), (0.05, Some(2)), (0.01, None)] {
            let c = Vec3::new(0.0, 0.0, -1.0);
            let inside: Vec<usize> = (0..3)
                .filter(|&k| levels[k].classify_sphere(c, size) == SphereClass::Inside)
                .collect();
            assert_eq!(inside, expected.into_iter().collect::<Vec<_>>(), "size {size}");
        }
        // On a threshold: the levels on either side may both keep it.
        let c = Vec3::new(0.0, 0.0, -1.0);
        assert_eq!(levels[0].classify_sphere(c, 0.5), SphereClass::Inside);
        assert_eq!(levels[1].classify_sphere(c, 0.5), SphereClass::Borderline);
    }

    #[test]
    fn overlapping_levels_share_the_sizes_above_each_threshold() {
        let m = SizeMetric {
            origin: Vec3::ZERO,
            scale: 1.0,
            perspective: true,
        };
        let levels = Frustum::everything()
            .detail_levels_overlapping(m, &[0.5, 0.1, 0.02], 0.2)
            .unwrap();
        let c = Vec3::new(0.0, 0.0, -1.0);
        // Sizes (radius at distance 1) and the levels that keep them: within
        // 20% above a threshold, both sides of it.
        for (size, expected) in [
            (1.0, vec![0]),
            (0.55, vec![0, 1]),
            (0.25, vec![1]),
            (0.11, vec![1, 2]),
            (0.05, vec![2]),
            (0.022, vec![2]),
            (0.01, vec![]),
        ] {
            let inside: Vec<usize> = (0..3)
                .filter(|&k| levels[k].classify_sphere(c, size) == SphereClass::Inside)
                .collect();
            assert_eq!(inside, expected, "size {size}");
        }
        assert_eq!(
            Frustum::everything()
                .detail_levels_overlapping(m, &[0.5, 0.1], 0.0)
                .unwrap(),
            Frustum::everything().detail_levels(m, &[0.5, 0.1]).unwrap()
        );
        for bad in [-0.1, f32::NAN, f32::INFINITY] {
            assert!(
                Frustum::everything()
                    .detail_levels_overlapping(m, &[0.5, 0.1], bad)
                    .is_err()
            );
        }
        assert!(
            Frustum::everything()
                .detail_levels_overlapping(m, &[f32::MAX, 1.0], 1.0)
                .is_err()
        );
    }

    #[test]
    fn infinite_reverse_z_drops_far_plane() {
        let proj = Mat4::perspective_infinite_reverse_rh(1.0, 1.5, 0.1);
        let f = frustum(proj);
        assert_eq!(f.len, 5);
        assert!(f.planes().iter().all(|p| p.is_finite()));
        // Very far in front is visible, behind is not.
        assert!(f.intersects_sphere(Vec3::new(0.0, 0.0, -1e6), 1.0));
        assert!(!f.intersects_sphere(Vec3::new(0.0, 0.0, 5.0), 1.0));
        // Touching the near plane from behind is kept.
        assert!(f.intersects_sphere(Vec3::new(0.0, 0.0, 0.9), 1.0));
        assert!(!f.intersects_sphere(Vec3::new(0.0, 0.0, 1.2), 1.0));
    }

    #[test]
    fn finite_perspective_has_six_planes_and_far_culls() {
        let proj = Mat4::perspective_rh(1.0, 1.0, 0.1, 100.0);
        let f = frustum(proj);
        assert_eq!(f.len, 6);
        assert!(f.intersects_sphere(Vec3::new(0.0, 0.0, -100.5), 1.0));
        assert!(!f.intersects_sphere(Vec3::new(0.0, 0.0, -101.5), 1.0));
    }

    #[test]
    fn orthographic_reverse_z() {
        // Bevy's orthographic projection maps near to 1 and far to 0.
        let proj = Mat4::orthographic_rh(-10.0, 10.0, -5.0, 5.0, 50.0, 0.0);
        let f = frustum(proj);
        assert_eq!(f.len, 6);
        assert!(f.intersects_sphere(Vec3::new(10.5, 0.0, -10.0), 1.0));
        assert!(!f.intersects_sphere(Vec3::new(11.5, 0.0, -10.0), 1.0));
        assert!(!f.intersects_sphere(Vec3::new(0.0, 0.0, -51.5), 1.0));
    }

    #[test]
    fn tangent_sphere_is_kept_exactly() {
        let proj = Mat4::orthographic_rh(-10.0, 10.0, -5.0, 5.0, 0.0, 50.0);
        let f = frustum(proj);
        // Sphere exactly tangent to the right plane from outside.
        assert!(f.intersects_sphere(Vec3::new(12.0, 0.0, -10.0), 2.0));
        assert!(f.intersects_sphere(Vec3::new(0.0, 7.0, -10.0), 2.0));
    }

    #[test]
    fn max_distance_bounds_infinite_projection() {
        let view = Mat4::look_at_rh(Vec3::new(5.0, 0.0, 0.0), Vec3::new(5.0, 0.0, -1.0), Vec3::Y);
        let proj = Mat4::perspective_infinite_reverse_rh(1.0, 1.0, 0.1);
        let f = Frustum::from_clip_from_world(proj * view, Some(50.0)).unwrap();
        assert_eq!(f.len, 6);
        assert!(f.intersects_sphere(Vec3::new(5.0, 0.0, -49.0), 0.5));
        assert!(!f.intersects_sphere(Vec3::new(5.0, 0.0, -52.0), 0.5));
        // A finite far plane nearer than max_distance stays.
        let proj = Mat4::perspective_rh(1.0, 1.0, 0.1, 20.0);
        let f = Frustum::from_clip_from_world(proj * view, Some(50.0)).unwrap();
        assert!(!f.intersects_sphere(Vec3::new(5.0, 0.0, -22.0), 0.5));
        let f = Frustum::from_clip_from_world(proj * view, Some(10.0)).unwrap();
        assert!(!f.intersects_sphere(Vec3::new(5.0, 0.0, -12.0), 0.5));
        assert!(f.intersects_sphere(Vec3::new(5.0, 0.0, -9.0), 0.5));
    }

    #[test]
    fn non_finite_is_rejected_or_culled() {
        assert!(Frustum::from_clip_from_world(Mat4::NAN, None).is_err());
        let f = frustum(Mat4::perspective_rh(1.0, 1.0, 0.1, 100.0));
        assert!(!f.intersects_sphere(Vec3::new(f32::NAN, 0.0, -5.0), 1.0));
        assert!(!f.intersects_sphere(Vec3::new(0.0, 0.0, -5.0), f32::INFINITY));
        assert!(Frustum::from_clip_from_world(Mat4::ZERO, None).is_err());
    }

    #[test]
    fn everything_keeps_every_finite_sphere() {
        let f = Frustum::everything();
        assert!(f.planes().is_empty());
        assert!(f.intersects_sphere(Vec3::new(1e30, -1e30, 0.0), 0.0));
        assert!(!f.intersects_sphere(Vec3::new(f32::NAN, 0.0, 0.0), 1.0));
    }

    #[test]
    fn camera_inside_sphere_is_kept() {
        let f = frustum(Mat4::perspective_infinite_reverse_rh(1.0, 1.0, 0.1));
        assert!(f.intersects_sphere(Vec3::new(0.0, 0.0, 3.0), 5.0));
    }

    fn look(eye: Vec3, target: Vec3, up: Vec3) -> Mat4 {
        Mat4::look_at_rh(eye, target, up)
    }

    /// A camera 1.2e6 from the origin keeps all its
    /// planes; Bevy's default projection there gives five.
    #[test]
    fn big_world_camera_keeps_its_planes() {
        for distance in [1.2e6f32, 1e7, 3e7] {
            let eye = Vec3::new(0.0, 0.0, distance);
            let view = look(eye, Vec3::ZERO, Vec3::Y);
            let f = frustum(Mat4::perspective_infinite_reverse_rh(1.0, 1.0, 0.1) * view);
            assert_eq!(f.len, 5, "at {distance}");
            assert!(f.intersects_sphere(Vec3::ZERO, 1.0));
            // Behind the camera, by a few times the tolerance's reach.
            let behind = eye + Vec3::Z * (distance * 1e-4 + 2.0);
            assert!(!f.intersects_sphere(behind, 1.0), "at {distance}");
            // Off to the side, far outside the 1 rad fov.
            assert!(!f.intersects_sphere(Vec3::new(distance, 0.0, 0.0), 1.0));
        }
    }

    #[test]
    fn big_world_finite_far_and_near_planes_stay() {
        // A finite far plane 1.5e6 from the origin.
        let eye = Vec3::new(0.0, 0.0, 1.6e6);
        let view = look(eye, Vec3::ZERO, Vec3::Y);
        let f = frustum(Mat4::perspective_rh(1.0, 1.0, 0.5, 1e5) * view);
        assert_eq!(f.len, 6);
        assert!(f.intersects_sphere(Vec3::new(0.0, 0.0, 1.51e6), 1.0));
        assert!(!f.intersects_sphere(Vec3::new(0.0, 0.0, 1.49e6), 1.0));
        // A standard-depth camera far from the origin keeps its near plane,
        // and max_distance keeps the slab in front of it.
        let eye = Vec3::new(1e6, 2e6, -3e6);
        let forward = Vec3::new(0.3, -0.2, 1.0).normalize();
        let view = look(eye, eye + forward, Vec3::Y);
        let proj = Mat4::perspective_rh(1.0, 1.5, 0.5, 1e4);
        let f = Frustum::from_clip_from_world(proj * view, Some(100.0)).unwrap();
        assert_eq!(f.len, 6);
        assert!(f.intersects_sphere(eye + forward * 50.0, 1.0));
        assert!(!f.intersects_sphere(eye + forward * 200.0, 1.0));
        assert!(!f.intersects_sphere(eye - forward * 60.0, 1.0));
        assert!(
            !f.intersects_sphere(eye + forward * 9_000.0, 1.0),
            "the far end is not the slab"
        );
    }

    /// A directional light's cascade keeps casters between the light and
    /// the cascade (toward depth 1 in Bevy's reverse-Z orthographic
    /// projection), and still culls beside it and beyond its far side.
    #[test]
    fn shadow_cascades_are_open_toward_the_light() {
        // Light looking down -Y from y = 50; the cascade spans y in [-10, 40].
        let view = Mat4::look_to_rh(Vec3::new(0.0, 50.0, 0.0), Vec3::NEG_Y, Vec3::Z);
        let proj = Mat4::orthographic_rh(-5.0, 5.0, -5.0, 5.0, 60.0, 10.0); // reverse-Z: near maps to 1
        let m = proj * view;
        let closed = Frustum::from_clip_from_world(m, None).unwrap();
        let open = Frustum::from_shadow_cascade(m).unwrap();
        assert_eq!(open.len, closed.len - 1);
        let above_the_cascade = Vec3::new(0.0, 45.0, 0.0); // between the light and the near plane
        let far_above = Vec3::new(0.0, 1.0e4, 0.0); // beyond the light itself
        assert!(!closed.intersects_sphere(above_the_cascade, 0.5));
        assert!(open.intersects_sphere(above_the_cascade, 0.5));
        assert!(open.intersects_sphere(far_above, 0.5));
        assert!(open.intersects_sphere(Vec3::ZERO, 0.5));
        assert!(!open.intersects_sphere(Vec3::new(8.0, 20.0, 0.0), 0.5), "beside");
        assert!(
            !open.intersects_sphere(Vec3::new(0.0, -30.0, 0.0), 0.5),
            "beyond the far side"
        );
    }

    /// A mirrored view keeps the slab at its near end.
    #[test]
    fn mirrored_views_keep_the_near_slab() {
        let eye = Vec3::new(3.0, 4.0, 5.0);
        let mirror = Mat4::from_scale(Vec3::new(-1.0, 1.0, 1.0));
        let world_from_view = Mat4::from_translation(eye) * mirror;
        let forward = world_from_view.transform_vector3(Vec3::NEG_Z);
        // Bevy's orthographic (reverse-Z), standard-depth ortho, and perspectives.
        let projections = [
            Mat4::orthographic_rh(-10.0, 10.0, -10.0, 10.0, 500.0, 0.0),
            Mat4::orthographic_rh(-10.0, 10.0, -10.0, 10.0, 0.0, 500.0),
            Mat4::perspective_rh(1.0, 1.0, 0.1, 500.0),
            Mat4::perspective_infinite_reverse_rh(1.0, 1.0, 0.1),
        ];
        for (k, proj) in projections.into_iter().enumerate() {
            let f = Frustum::from_view(proj, world_from_view, Some(50.0)).unwrap();
            assert!(f.intersects_sphere(eye + forward * 40.0, 1.0), "projection {k}");
            assert!(!f.intersects_sphere(eye + forward * 60.0, 1.0), "projection {k}");
            assert!(!f.intersects_sphere(eye + forward * 450.0, 1.0), "projection {k}");
            let m = proj * world_from_view.inverse();
            let from_matrix = Frustum::from_clip_from_world(m, Some(50.0));
            if k < 2 {
                // An orthographic matrix alone cannot tell: refused, not guessed.
                assert!(
                    matches!(from_matrix, Err(CullError::AmbiguousDepth)),
                    "projection {k}"
                );
                assert!(Frustum::from_clip_from_world(m, None).is_ok());
            } else {
                // A perspective one tells by w, mirrored or not.
                let f = from_matrix.unwrap();
                assert!(f.intersects_sphere(eye + forward * 40.0, 1.0), "projection {k}");
                assert!(!f.intersects_sphere(eye + forward * 60.0, 1.0), "projection {k}");
            }
        }
    }

    /// On the CPU, a sphere that overflows from finite
    /// input is kept, whatever overflowed.
    #[test]
    fn overflow_keeps_and_non_finite_input_culls() {
        let f = frustum(Mat4::perspective_rh(1.0, 1.0, 0.1, 100.0));
        let keep = |center: Vec3, radius: f32| {
            f.classify(&WorldSphere {
                center,
                radius,
                terms: 0.0,
            })
        };
        assert_eq!(keep(Vec3::new(0.0, 0.0, 1e3), f32::INFINITY), SphereClass::Inside);
        assert_eq!(keep(Vec3::new(0.0, 0.0, 1e3), f32::NAN), SphereClass::Inside);
        assert_eq!(keep(Vec3::new(3e38, 3e38, 1e3), 1.0), SphereClass::Inside);
        assert_eq!(keep(Vec3::new(0.0, 0.0, 1e3), 1.0), SphereClass::Outside);
        // A sphere given directly with NaN is not an instance's: culled.
        assert!(!f.intersects_sphere(Vec3::new(0.0, 0.0, -5.0), f32::NAN));
    }

    /// When the position cancels the rotated offset,
    /// the center rounds at the scale of the terms; the slack follows them.
    #[test]
    fn slack_follows_the_terms_not_the_center() {
        let f = frustum(Mat4::orthographic_rh(-10.0, 10.0, -10.0, 10.0, 0.0, 50.0));
        let tangent = WorldSphere {
            center: Vec3::new(12.0, 0.0, -10.0),
            radius: 2.0,
            terms: 0.0,
        };
        assert_eq!(
            f.classify(&tangent),
            SphereClass::Inside,
            "tangent spheres are clearly kept"
        );
        // 1e6 of cancelled terms: the center may be off by ulp(1e6) = 0.0625.
        let off = WorldSphere {
            center: Vec3::new(12.06, 0.0, -10.0),
            terms: 2e6,
            ..tangent
        };
        assert_ne!(f.classify(&off), SphereClass::Outside);
        let clearly_out = WorldSphere {
            center: Vec3::new(30.0, 0.0, -10.0),
            terms: 2e6,
            ..tangent
        };
        assert_eq!(f.classify(&clearly_out), SphereClass::Outside);
    }

    /// Review findings: a standard far plane past the matrix's precision is
    /// dropped whatever the sign of its offset (it depends on the origin),
    /// and a very narrow perspective still places max_distance.
    #[test]
    fn far_plane_noise_and_narrow_views() {
        // near 0.1, far 6e4: far/near 6e5; the origin lies beyond the far plane.
        let eye = Vec3::new(0.0, 0.0, 1e5);
        let view = look(eye, Vec3::ZERO, Vec3::Y);
        let f = frustum(Mat4::perspective_rh(1.0, 1.0, 0.1, 6e4) * view);
        assert!(f.intersects_sphere(eye - Vec3::Z * 100.0, 1.0));
        for (fov, aspect) in [(1e-3f32, 1e-3f32), (1e-4, 1e-2), (2.0, 1e3)] {
            let proj = Mat4::perspective_infinite_reverse_rh(fov, aspect, 0.1);
            let f = Frustum::from_clip_from_world(proj, Some(50.0)).unwrap();
            assert!(
                f.intersects_sphere(Vec3::new(0.0, 0.0, -40.0), 1e-3),
                "fov {fov} aspect {aspect}"
            );
            assert!(
                !f.intersects_sphere(Vec3::new(0.0, 0.0, -60.0), 1e-3),
                "fov {fov} aspect {aspect}"
            );
        }
    }

    #[test]
    fn at_infinity_ignores_the_origin_but_drops_noise() {
        // A standard infinite projection: the far plane's normal is rounding
        // noise once the matrix is far from the origin; it is dropped.
        let eye = Vec3::new(7e6, -3e6, 5e5);
        let view = look(eye, eye + Vec3::new(1.0, 0.5, 0.2), Vec3::Z);
        let f = frustum(Mat4::perspective_infinite_rh(0.8, 2.0, 0.1) * view);
        assert_eq!(f.len, 5);
        assert!(f.intersects_sphere(eye + Vec3::new(1.0, 0.5, 0.2) * 1e5, 1.0));
    }
}
