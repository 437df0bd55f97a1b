//! A spot light's cone, as a view carries it ([`crate::Frustum::with_cone`]),
//! and its CPU mirror: what `shaders/cull/visibility/spot_cone.wgsl` keeps
//! (the test's registration is `visibility/spot_cone.rs`).

use crate::CullError;
use crate::sphere::{BORDER_BAND, PLANE_TOLERANCE, SphereClass, WorldSphere, widen_radius};
use glam::{DVec3, Vec3};

/// The cone a spot light lights: the points whose direction from `apex`
/// lies within `half_angle` of `axis`, no farther than `range`. Give it to
/// a view with [`crate::Frustum::with_cone`]; the view then keeps the instances
/// whose bounding sphere touches both the frustum and the cone
/// ([`crate::VisibilityTest::SpotCone`]). Build it in a batch's frame with
/// [`crate::LocalFrame::spot_cone`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SpotCone {
    apex: Vec3,
    axis: Vec3,
    sin: f32,
    cos: f32,
    range: f32,
}

impl SpotCone {
    /// The cone at `apex` around `axis` (any length but zero), `half_angle`
    /// radians wide on each side (in `(0, π/2]`: `π/2` is the half-space
    /// in front of the apex), bounded by `range` (positive; infinite for
    /// none). An error for anything not finite or out of range.
    pub fn new(apex: Vec3, axis: Vec3, half_angle: f32, range: f32) -> Result<Self, CullError> {
        if !(apex.is_finite() && axis.is_finite()) {
            return Err(CullError::InvalidParameter(
                "a spot cone's apex and axis must be finite",
            ));
        }
        let axis = axis.as_dvec3().normalize_or_zero();
        if axis == DVec3::ZERO {
            return Err(CullError::InvalidParameter("a spot cone's axis must not be zero"));
        }
        if !(half_angle > 0.0 && half_angle <= std::f32::consts::FRAC_PI_2) {
            return Err(CullError::InvalidParameter(
                "a spot cone's half angle must be in (0, π/2]",
            ));
        }
        if range.is_nan() || range <= 0.0 {
            return Err(CullError::InvalidParameter(
                "a spot cone's range must be positive",
            ));
        }
        let (sin, cos) = (half_angle as f64).sin_cos();
        Ok(Self {
            apex,
            axis: axis.as_vec3(),
            sin: sin as f32,
            // Never negative (a half angle of π/2 rounds to a cosine of
            // about -4e-8 in f32): the half-space.
            cos: (cos as f32).max(0.0),
            range,
        })
    }

    /// Its apex.
    pub fn apex(&self) -> Vec3 {
        self.apex
    }

    /// Its axis, unit length.
    pub fn axis(&self) -> Vec3 {
        self.axis
    }

    /// Its half angle, in radians.
    pub fn half_angle(&self) -> f32 {
        (self.sin as f64).atan2(self.cos as f64) as f32
    }

    /// Its range (infinite for none).
    pub fn range(&self) -> f32 {
        self.range
    }

    /// What the slack adds for the apex: the test works on the center
    /// relative to it, whose rounding is relative to both.
    pub(crate) fn apex_slack(&self) -> f32 {
        PLANE_TOLERANCE * (self.apex.x.abs() + self.apex.y.abs() + self.apex.z.abs())
    }

    /// The view's uniforms: `[apex, apex slack]`, `[axis, range]`,
    /// `[sin, cos, bounded, 1]` (`bounded`: 1 where the range is finite,
    /// else 0 and the range 0, so no infinity reaches the shader; the last
    /// 1: the view has a cone).
    pub(crate) fn gpu(&self) -> [[f32; 4]; 3] {
        let bounded = self.range.is_finite();
        [
            self.apex.extend(self.apex_slack()).to_array(),
            self.axis
                .extend(if bounded { self.range } else { 0.0 })
                .to_array(),
            [self.sin, self.cos, f32::from(u8::from(bounded)), 1.0],
        ]
    }

    /// Classifies an instance's world sphere as the shader's `in_cone()`
    /// does, in `f64` on the values it is given: clearly in the cone (or
    /// overflowed: kept), clearly out, or within a few ulps of the
    /// magnitudes of the boundary, where the GPU's rounding may decide
    /// either way. The radius is widened by the frustum's tolerance
    /// ([`widen_radius`]) and by that of the apex, so a sphere tangent to
    /// the cone is kept.
    pub fn classify(&self, sphere: &WorldSphere) -> SphereClass {
        let wide = widen_radius(sphere.center, sphere.radius, sphere.terms) + self.apex_slack();
        if !wide.is_finite() {
            return SphereClass::Inside;
        }
        let v = sphere.center.as_dvec3() - self.apex.as_dvec3();
        let axis = self.axis.as_dvec3();
        let along = v.dot(axis);
        let across = v.cross(axis).length();
        let side = self.cos as f64 * across - self.sin as f64 * along;
        let wide = wide as f64;
        // How far inside each bound the sphere reaches (negative: out).
        let range = if self.range.is_finite() {
            self.range as f64 + wide - v.length()
        } else {
            f64::INFINITY
        };
        let margins = [wide - side, along + wide, range];
        let magnitude = (sphere.center.abs().element_sum() + self.apex.abs().element_sum()) as f64
            + sphere.radius as f64
            + sphere.terms as f64;
        let band = BORDER_BAND as f64 * magnitude;
        let mut class = SphereClass::Inside;
        for margin in margins {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A sphere tangent to the cone's side, to its back (the apex's plane)
    /// or to its range is kept; one a little farther out is not; the
    /// corners of the square frustum around the cone are outside it.
    #[test]
    fn tangent_spheres_are_kept_and_corners_culled() {
        let cone = SpotCone::new(Vec3::new(3.0, -2.0, 5.0), Vec3::new(0.0, 0.0, -2.0), 0.5, 20.0).unwrap();
        let apex = cone.apex();
        let (s, c) = 0.5f32.sin_cos();
        // A point on the side at distance 10, and the side's outward normal.
        let on_side = apex + Vec3::new(s, 0.0, -c) * 10.0;
        let normal = Vec3::new(c, 0.0, s);
        for r in [0.01, 0.5, 3.0] {
            let touching = WorldSphere::exact(on_side + normal * r, r);
            assert_eq!(cone.classify(&touching), SphereClass::Inside, "r = {r}");
            let apart = WorldSphere::exact(on_side + normal * (r * 1.01 + 0.01), r);
            assert_eq!(cone.classify(&apart), SphereClass::Outside, "r = {r}");
        }
        let behind = WorldSphere::exact(apex + Vec3::Z * 2.0, 1.0);
        assert_eq!(cone.classify(&behind), SphereClass::Outside);
        let at_range = WorldSphere::exact(apex + Vec3::NEG_Z * 21.0, 1.0);
        assert_eq!(cone.classify(&at_range), SphereClass::Inside);
        assert_eq!(
            cone.classify(&WorldSphere::exact(apex + Vec3::NEG_Z * 21.1, 1.0)),
            SphereClass::Outside
        );
        // The frustum's corner at distance 10: tan(0.5) off the axis in x and y.
        let t = 0.5f32.tan() * 10.0;
        let corner = WorldSphere::exact(apex + Vec3::new(t, t, -10.0) * 0.98, 0.1);
        assert_eq!(cone.classify(&corner), SphereClass::Outside);
    }

    /// Far from the origin, the slack grows with the apex and center, and a
    /// tangent sphere is still kept.
    #[test]
    fn far_from_the_origin_a_tangent_sphere_is_kept() {
        let apex = Vec3::new(1.0e6, 2.0e5, -3.0e6);
        let cone = SpotCone::new(apex, Vec3::X, 0.3, f32::INFINITY).unwrap();
        let (s, c) = 0.3f32.sin_cos();
        let on_side = apex + Vec3::new(c, s, 0.0) * 50.0;
        let touching = WorldSphere::exact(on_side + Vec3::new(-s, c, 0.0) * 2.0, 2.0);
        assert_eq!(cone.classify(&touching), SphereClass::Inside);
    }

    #[test]
    fn bad_cones_are_refused() {
        let ok = |a, r| SpotCone::new(Vec3::ZERO, Vec3::Z, a, r).is_ok();
        assert!(ok(std::f32::consts::FRAC_PI_2, f32::INFINITY));
        for (a, r) in [
            (0.0, 1.0),
            (1.6, 1.0),
            (f32::NAN, 1.0),
            (0.5, 0.0),
            (0.5, f32::NAN),
            (0.5, -1.0),
        ] {
            assert!(!ok(a, r), "{a} {r}");
        }
        assert!(SpotCone::new(Vec3::ZERO, Vec3::ZERO, 0.5, 1.0).is_err());
        assert!(SpotCone::new(Vec3::NAN, Vec3::Z, 0.5, 1.0).is_err());
    }
}
