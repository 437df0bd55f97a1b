//! View frustum planes extracted from a `clip_from_world` matrix.
//!
//! wgpu's clip space keeps a point when `-w <= x <= w`, `-w <= y <= w` and
//! `0 <= z <= w` (Gribb & Hartmann with a 0..1 depth range). Each inequality
//! is a plane `dot(row, p) >= 0` built from the matrix rows. Bevy's default
//! projection is reverse-Z with an infinite far plane: there the `z >= 0` row
//! has a zero normal (the far plane sits at infinity). Such a plane is dropped
//! rather than normalized into NaN.

use crate::CullError;
use glam::{Mat4, Vec3, Vec4, Vec4Swizzles};

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
}

/// Relative tolerance of the sphere/plane test, shared by the CPU reference
/// and the shaders (`PLANE_TOLERANCE` in `shaders/common.wgsl`).
///
/// A sphere is kept when, for every plane,
/// `dot(n, c) + d' + r' >= 0` with `d' = d + PLANE_TOLERANCE·|d|` (widened
/// once per frame, [`widen_plane`]) and `r' = r + PLANE_TOLERANCE·(|c|₁ + r)`
/// (once per instance, [`widen_radius`]). For a unit normal
/// `Σ|nᵢcᵢ| ≤ |c|₁`, so the slack is at least `2⁻¹⁸` of the magnitudes of
/// every term, about 32 ulps: it bounds the rounding of the left side, so
/// mathematically tangent spheres survive whatever the rounding (fused
/// multiply-add on the GPU, none on the CPU), which is what "conservative"
/// demands, at three multiply-adds and a compare per plane. GPU and CPU can
/// then only disagree within a few ulps of that slightly widened boundary;
/// the tests count such borderline instances and allow either answer for
/// them alone.
pub const PLANE_TOLERANCE: f32 = 1.0 / (1 << 18) as f32;

/// A plane with its offset widened by the tolerance, as uploaded to the GPU.
pub fn widen_plane(p: Vec4) -> Vec4 {
    Vec4::new(p.x, p.y, p.z, p.w + PLANE_TOLERANCE * p.w.abs())
}

/// A sphere's radius widened by the tolerance, as the shaders compute it.
pub fn widen_radius(center: Vec3, radius: f32) -> f32 {
    radius + PLANE_TOLERANCE * (center.x.abs() + center.y.abs() + center.z.abs() + radius)
}

/// The planes of a view frustum, normals pointing inwards, normalized.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Frustum {
    /// Planes as `(normal, d)`: a point `p` is inside when `dot(normal, p) + d >= 0`.
    /// Only the first `len` are used.
    pub planes: [Vec4; 6],
    /// Number of planes in use (5 for an infinite far plane, 6 otherwise).
    pub len: usize,
}

impl Frustum {
    /// Extracts the frustum of a `clip_from_world` matrix in wgpu's clip space
    /// (depth 0..1, either standard or reverse-Z, finite or infinite far plane,
    /// perspective or orthographic).
    ///
    /// `max_distance`, when given, adds a plane parallel to the near plane at
    /// that distance beyond it, which bounds infinite projections.
    pub fn from_clip_from_world(clip_from_world: Mat4, max_distance: Option<f32>) -> Result<Self, CullError> {
        if !clip_from_world.is_finite() {
            return Err(CullError::DegenerateFrustum("the matrix is not finite"));
        }
        let r0 = clip_from_world.row(0);
        let r1 = clip_from_world.row(1);
        let r2 = clip_from_world.row(2);
        let r3 = clip_from_world.row(3);
        // Order matters only for speed: the side planes reject most instances.
        let raw = [r3 + r0, r3 - r0, r3 + r1, r3 - r1, r2, r3 - r2];
        let mut planes = [Vec4::ZERO; 6];
        let mut len = 0;
        // Normalized depth planes: [z >= 0, z <= w]; None when at infinity.
        let mut depth = [None, None];
        for (i, p) in raw.iter().enumerate() {
            let n = p.xyz().length();
            // A normal this short against its offset means the plane is at
            // infinity (the far plane of an infinite projection).
            if n == 0.0 || n <= p.w.abs() * 1e-6 {
                if p.w >= 0.0 {
                    continue; // every point satisfies it
                }
                return Err(CullError::DegenerateFrustum(
                    "a clip plane at infinity excludes every point",
                ));
            }
            let plane = *p / n;
            planes[len] = plane;
            len += 1;
            if i >= 4 {
                depth[i - 4] = Some((len - 1, plane));
            }
        }
        if len < 5 {
            return Err(CullError::DegenerateFrustum("fewer than five usable planes"));
        }
        if let Some(max_distance) = max_distance {
            if !(max_distance.is_finite() && max_distance > 0.0) {
                return Err(CullError::InvalidParameter(
                    "max_distance must be finite and positive",
                ));
            }
            let (near, far) = match depth {
                [Some(a), Some(b)] => {
                    if Self::z_zero_is_near(clip_from_world) {
                        (a.1, Some(b))
                    } else {
                        (b.1, Some(a))
                    }
                }
                [Some(a), None] | [None, Some(a)] => (a.1, None),
                [None, None] => unreachable!("five planes include a depth plane"),
            };
            let bound = flip_and_offset(near, max_distance);
            match far {
                // Depth planes are parallel: measure the far plane's distance
                // from the point of the near plane closest to the origin.
                Some((idx, far)) => {
                    let on_near = -near.xyz() * near.w;
                    if far.xyz().dot(on_near) + far.w > max_distance {
                        planes[idx] = bound;
                    }
                }
                None => {
                    planes[len] = bound;
                    len += 1;
                }
            }
        }
        Ok(Self { planes, len })
    }

    /// Whether clip depth 0 is the near plane (standard depth) rather than
    /// the far one (reverse-Z). A perspective projection tells by `w`, which
    /// grows with view depth. An orthographic one tells by handedness: a
    /// right-handed world mapped to wgpu's left-handed NDC flips orientation
    /// (negative determinant) unless depth is reversed.
    fn z_zero_is_near(clip_from_world: Mat4) -> bool {
        let world_from_clip = clip_from_world.inverse();
        let w_at = |z: f32| {
            let p = world_from_clip.project_point3(Vec3::new(0.0, 0.0, z));
            clip_from_world.row(3).dot(p.extend(1.0))
        };
        let (w0, w1) = (w_at(0.0), w_at(1.0));
        if (w0 - w1).abs() > 1e-6 * w0.abs().max(w1.abs()) {
            w0 < w1
        } else {
            glam::Mat3::from_mat4(clip_from_world).determinant() < 0.0
        }
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
        let mut class = SphereClass::Inside;
        let wide = widen_radius(center, radius);
        let magnitude = center.x.abs() + center.y.abs() + center.z.abs() + radius.abs();
        for p in self.planes() {
            let p = widen_plane(*p);
            // Same order of operations as plane_keeps() in the shaders.
            let margin = p.x * center.x + p.y * center.y + p.z * center.z + p.w + wide;
            let band = BORDER_BAND * (magnitude + p.w.abs());
            if margin < -band {
                return SphereClass::Outside;
            }
            if margin < band {
                class = SphereClass::Borderline;
            }
        }
        class
    }
}

/// Half-width, relative to the magnitude of the terms, of the band around the
/// boundary where the GPU's rounding (FMA contraction) may decide
/// differently from the CPU: about 8 ulps, a quarter of the slack, so that
/// exactly tangent spheres are clearly kept, never borderline.
const BORDER_BAND: f32 = 1.0 / (1 << 20) as f32;

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

fn flip_and_offset(near: Vec4, distance: f32) -> Vec4 {
    // near: n.p + d >= 0 (inside is in front). far: -n.p - d + distance >= 0.
    Vec4::new(-near.x, -near.y, -near.z, -near.w + distance)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frustum(m: Mat4) -> Frustum {
        Frustum::from_clip_from_world(m, None).unwrap()
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
    fn camera_inside_sphere_is_kept() {
        let f = frustum(Mat4::perspective_infinite_reverse_rh(1.0, 1.0, 0.1));
        assert!(f.intersects_sphere(Vec3::new(0.0, 0.0, 3.0), 5.0));
    }
}
