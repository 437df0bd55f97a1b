//! Bounding spheres, and the tolerance every visibility test widens them
//! by: what the frustum, the spot cone and their CPU mirrors share.

use crate::CullError;
use glam::Vec3;

/// A bounding sphere: `center` and `radius` in the space of the mesh (local)
/// or of the world, depending on context.
#[derive(Clone, Copy, Debug, PartialEq, Default)]
pub struct Sphere {
    /// Center of the sphere.
    pub center: Vec3,
    /// Radius, never negative.
    pub radius: f32,
}

impl Sphere {
    /// A sphere from its center and radius.
    pub const fn new(center: Vec3, radius: f32) -> Self {
        Self { center, radius }
    }

    /// `Ok` when the sphere can bound a mesh: a finite center and a finite,
    /// non-negative radius. [`crate::Culler::cull`] and the CPU reference
    /// refuse other bounds with [`CullError::InvalidBounds`].
    pub fn validate(&self) -> Result<(), CullError> {
        if self.center.is_finite() && self.radius.is_finite() && self.radius >= 0.0 {
            Ok(())
        } else {
            Err(CullError::InvalidBounds {
                center: self.center.to_array(),
                radius: self.radius,
            })
        }
    }

    /// The mesh-space sphere that bounds this one under every uniform scale
    /// in `min_scale..=max_scale` (negative scales included), for instance
    /// formats that carry no scale ([`crate::InstanceFormat::carries_scale`]):
    /// cull with it and draw with each instance's own scale, and no scaled
    /// instance is culled while visible.
    ///
    /// Centered at the middle scale `k`, the sphere's points `s·v` lie within
    /// `|s − k|·|c| + |s|·r` of `k·c`. Returns `None` when a scale is not
    /// finite or `min_scale > max_scale`.
    pub fn covering_scales(&self, min_scale: f32, max_scale: f32) -> Option<Sphere> {
        if !(min_scale.is_finite() && max_scale.is_finite() && min_scale <= max_scale) {
            return None;
        }
        let (lo, hi) = (min_scale as f64, max_scale as f64);
        let k = 0.5 * (lo + hi);
        let center = self.center.as_dvec3();
        let radius = 0.5 * (hi - lo) * center.length() + lo.abs().max(hi.abs()) * self.radius as f64;
        // Rounded outwards: f32 conversion may round down by half an ulp.
        let radius = (radius as f32) * (1.0 + f32::EPSILON);
        Some(Sphere::new((center * k).as_vec3(), radius))
    }
}

/// Relative tolerance of the sphere/plane test, shared by the CPU reference
/// and the shaders (`PLANE_TOLERANCE` in `shaders/cull/visibility/sphere_frustum.wgsl`).
///
/// A sphere is kept when, for every plane,
/// `dot(n, c) + d' + r' >= 0` with `d' = d + PLANE_TOLERANCE·|d|` (widened
/// once per frame, [`crate::frustum::widen_plane`]) and
/// `r' = r + PLANE_TOLERANCE·(|c|₁ + r + t)` (once per instance,
/// [`widen_radius`]), where `t` is the magnitude of the terms the center was
/// computed from ([`WorldSphere::terms`]: the position and the transformed
/// mesh-space offset, which may cancel). For a unit normal `Σ|nᵢcᵢ| ≤ |c|₁`,
/// so the slack is at least `2⁻¹⁸` of the magnitudes of every term, about 32
/// ulps: it bounds the rounding of the left side and of the world sphere, so
/// mathematically tangent spheres survive whatever the rounding (fused
/// multiply-add on the GPU, none on the CPU), which is what "conservative"
/// demands. GPU and CPU can then only disagree within a few ulps of that
/// slightly widened boundary; the tests count such borderline instances and
/// allow either answer for them alone.
pub const PLANE_TOLERANCE: f32 = 1.0 / (1 << 18) as f32;

/// The magnitude the slack scales with: `|c|₁ + r + terms`, as the shaders
/// compute it.
pub(crate) fn slack_magnitude(center: Vec3, radius: f32, terms: f32) -> f32 {
    center.x.abs() + center.y.abs() + center.z.abs() + radius + terms
}

/// A sphere's radius widened by the tolerance, as the shaders compute it;
/// `terms` is [`WorldSphere::terms`] (0 for a sphere given in world space).
pub fn widen_radius(center: Vec3, radius: f32, terms: f32) -> f32 {
    radius + PLANE_TOLERANCE * slack_magnitude(center, radius, terms)
}

/// An instance's bounding sphere in world space, as a format computes it
/// ([`crate::InstanceFormat::world_sphere`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct WorldSphere {
    /// Center in world space.
    pub center: Vec3,
    /// Radius. NaN or infinite when the transform overflows `f32` (such a
    /// sphere is kept: it may cover anything).
    pub radius: f32,
    /// Magnitude of the terms the center was summed from (the position and
    /// the transformed mesh-space center): its rounding is relative to this,
    /// not to the center, when the two cancel.
    pub terms: f32,
}

#[cfg(test)]
impl WorldSphere {
    /// A sphere given in world space (no terms it was summed from): the
    /// unit tests' spheres.
    pub(crate) fn exact(center: Vec3, radius: f32) -> Self {
        Self {
            center,
            radius,
            terms: 0.0,
        }
    }
}

/// Half-width, relative to the magnitude of the terms, of the band around the
/// boundary where the GPU's rounding (FMA contraction) may decide
/// differently from the CPU: about 8 ulps, a quarter of the slack, so that
/// exactly tangent spheres are clearly kept, never borderline.
pub(crate) const BORDER_BAND: f32 = 1.0 / (1 << 20) as f32;

/// How a sphere relates to the frustum, for tests that compare GPU and CPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SphereClass {
    /// Clearly kept.
    Inside,
    /// Within rounding of the kept/culled boundary: either answer is right.
    Borderline,
    /// Clearly culled.
    Outside,
}
