//! The camera an occlusion test projects with, and the test itself on the
//! CPU ([`OcclusionCamera::classify`]), the mirror of the late phase.

use super::{CpuPyramid, OCCLUSION_DEPTH_TOLERANCE, OCCLUSION_PIXEL_MARGIN};
use crate::CullError;
use crate::sphere::{PLANE_TOLERANCE, SphereClass, WorldSphere};
use glam::{DMat4, DVec3, DVec4, Mat4, Vec3};

/// The camera an occlusion test projects with: its `clip_from_world`, with
/// the translation taken about `origin` (the camera's position), so that the
/// shaders project positions relative to the camera and keep their
/// precision far from the world's origin.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OcclusionCamera {
    /// Maps `(position − origin, 1)` to clip space.
    pub clip_from_relative: Mat4,
    /// The point positions are taken relative to.
    pub origin: Vec3,
    /// How far, in pixels of the depth buffer, what was drawn may lie from
    /// this projection along each axis: the jitter of temporal
    /// anti-aliasing, which offsets each frame's projection by up to half
    /// a pixel (Bevy's `TemporalJitter::offset`). The late phase widens
    /// each sphere's screen rectangle by it; 0 for an unjittered camera
    /// (the constructors' value; set it with [`Self::with_jitter`]).
    pub jitter: f32,
}

impl OcclusionCamera {
    /// The camera of a projection and the camera's transform (Bevy's
    /// `clip_from_view` and `GlobalTransform`), combined in `f64`.
    pub fn from_view(clip_from_view: Mat4, world_from_view: Mat4) -> Result<Self, CullError> {
        if !(clip_from_view.is_finite() && world_from_view.is_finite()) {
            return Err(CullError::DegenerateFrustum("the matrix is not finite"));
        }
        Self::from_view_f64(clip_from_view, world_from_view.as_dmat4())
    }

    /// [`Self::from_view`] with the camera's transform in `f64` (composed
    /// with a batch's frame by [`crate::LocalFrame`]).
    pub(crate) fn from_view_f64(clip_from_view: Mat4, world_from_view: DMat4) -> Result<Self, CullError> {
        let origin = world_from_view.w_axis.truncate();
        let mut linear = world_from_view;
        linear.w_axis = DVec4::W;
        if linear.determinant() == 0.0 {
            return Err(CullError::DegenerateFrustum("world_from_view is singular"));
        }
        let camera = Self {
            clip_from_relative: (clip_from_view.as_dmat4() * linear.inverse()).as_mat4(),
            origin: origin.as_vec3(),
            jitter: 0.0,
        };
        // The product, rounded to f32, may still overflow.
        camera.validate()?;
        Ok(camera)
    }

    /// The camera of a `clip_from_world` matrix, positions taken relative
    /// to `origin` (best the camera's position; any point works, with less
    /// precision the farther it is from the camera).
    pub fn from_clip_from_world(clip_from_world: Mat4, origin: Vec3) -> Result<Self, CullError> {
        if !(clip_from_world.is_finite() && origin.is_finite()) {
            return Err(CullError::DegenerateFrustum("the matrix is not finite"));
        }
        Self::from_clip_from_world_f64(clip_from_world.as_dmat4(), origin.as_dvec3())
    }

    /// [`Self::from_clip_from_world`] in `f64` (a batch's frame composed in
    /// by [`crate::LocalFrame`]).
    pub(crate) fn from_clip_from_world_f64(clip_from_world: DMat4, origin: DVec3) -> Result<Self, CullError> {
        let relative = clip_from_world * DMat4::from_translation(origin);
        let camera = Self {
            clip_from_relative: relative.as_mat4(),
            origin: origin.as_vec3(),
            jitter: 0.0,
        };
        camera.validate()?;
        Ok(camera)
    }

    /// The camera with its projection jittered by up to `pixels` along each
    /// axis ([`Self::jitter`]); an error unless `pixels` is finite and not
    /// negative (and the camera passes [`Self::validate`]).
    pub fn with_jitter(self, pixels: f32) -> Result<Self, CullError> {
        let jitter = Self {
            jitter: pixels,
            ..self
        };
        jitter.validate()?;
        Ok(jitter)
    }

    /// An error unless [`Self::jitter`] is finite and not negative and the
    /// matrix and origin are finite (the late phase and [`Self::classify`]
    /// check it: the fields are public).
    pub fn validate(&self) -> Result<(), CullError> {
        if !(self.clip_from_relative.is_finite() && self.origin.is_finite()) {
            return Err(CullError::DegenerateFrustum("the matrix is not finite"));
        }
        if self.jitter.is_finite() && self.jitter >= 0.0 {
            Ok(())
        } else {
            Err(CullError::InvalidParameter(
                "OcclusionCamera::jitter must be finite and not negative",
            ))
        }
    }

    /// The radius slack the shader adds for the rounding of
    /// `center − origin` (`occlusion_origin.w`): that subtraction rounds by
    /// at most 2⁻²⁴ of each operand's magnitude; the center's share is in
    /// the frustum test's slack already, this is the origin's, four times
    /// over.
    pub(crate) fn origin_slack(&self) -> f32 {
        const ORIGIN_TOLERANCE: f32 = 1.0 / (1 << 22) as f32;
        ORIGIN_TOLERANCE * (self.origin.x.abs() + self.origin.y.abs() + self.origin.z.abs())
    }

    /// How an instance's world sphere fares against `pyramid` in the late
    /// phase, as the shader decides: `Inside` when it must be kept (it may
    /// be visible), `Outside` when it must be culled (hidden behind what the
    /// pyramid holds), `Borderline` when rounding may decide either way. A
    /// sphere that overflowed `f32` is kept. Frustum and level-of-detail
    /// band are [`crate::Frustum::classify`]'s. An error where the camera
    /// does not pass [`Self::validate`] (as the late phase refuses it).
    pub fn classify(&self, sphere: &WorldSphere, pyramid: &CpuPyramid) -> Result<SphereClass, CullError> {
        self.validate()?;
        Ok(self.classify_valid(sphere, pyramid))
    }

    /// [`Self::classify`] of a camera already validated.
    fn classify_valid(&self, sphere: &WorldSphere, pyramid: &CpuPyramid) -> SphereClass {
        let c = sphere.center;
        let magnitude = c.x.abs() + c.y.abs() + c.z.abs() + sphere.radius + sphere.terms;
        let wide = sphere.radius + PLANE_TOLERANCE * magnitude + self.origin_slack();
        if !wide.is_finite() {
            return SphereClass::Inside;
        }
        let relative = c.as_dvec3() - self.origin.as_dvec3();
        // The shader's sphere is within (wide - radius) of the true one: it
        // contains the true sphere and lies within the doubled slack. The
        // test is monotone in the rectangle and the tolerances.
        let tight = Test {
            radius: sphere.radius as f64,
            margin: self.jitter as f64,
            tolerance: 0.0,
        };
        if self.hiz_visible(relative, tight, pyramid) {
            return SphereClass::Inside;
        }
        let loose = Test {
            radius: 2.0 * wide as f64 - sphere.radius as f64,
            margin: 2.0 * OCCLUSION_PIXEL_MARGIN as f64 + self.jitter as f64,
            tolerance: 2.0 * OCCLUSION_DEPTH_TOLERANCE as f64,
        };
        if self.hiz_visible(relative, loose, pyramid) {
            SphereClass::Borderline
        } else {
            SphereClass::Outside
        }
    }

    /// The shader's `hiz_visible`, in `f64` with the given slack.
    fn hiz_visible(&self, relative: DVec3, test: Test, pyramid: &CpuPyramid) -> bool {
        let m = self.clip_from_relative.as_dmat4();
        let base = m * relative.extend(1.0);
        // As the shader: the sphere's clip coordinates lie within
        // base ± r·|row| (each row's xyz length), and x/w (y/w) over that
        // rectangle of (x, w) is bounded by its values at the rectangle's
        // corners.
        let reach =
            (m.x_axis * m.x_axis + m.y_axis * m.y_axis + m.z_axis * m.z_axis).map(f64::sqrt) * test.radius;
        let (near, far) = (base - reach, base + reach);
        // A sphere whose range is not finite may cover anything; as the shader's
        // `!(near.w > MIN_W)`, NaN counts as reaching the eye.
        if !(near.is_finite() && far.is_finite())
            || near.w.partial_cmp(&(MIN_W as f64)) != Some(std::cmp::Ordering::Greater)
        {
            return true;
        }
        let xy_lo = (near.truncate().truncate() / near.w).min(near.truncate().truncate() / far.w);
        let xy_hi = (far.truncate().truncate() / near.w).max(far.truncate().truncate() / far.w);
        // As the shader: z = a w + e·(p, 1), each term of z/w bounded over
        // the sphere's range of w and of e·p.
        let row = |k: usize| DVec4::new(m.x_axis[k], m.y_axis[k], m.z_axis[k], m.w_axis[k]);
        let (row_z, row_w) = (row(2), row(3));
        let ww = row_w.truncate().length_squared();
        let a = if ww > DEPTH_FIT_MIN as f64 * (ww + row_w.w * row_w.w) {
            row_z.truncate().dot(row_w.truncate()) / ww
        } else {
            0.0
        };
        let e = row_z - a * row_w;
        let e_center = e.truncate().dot(relative);
        let e_reach = test.radius * e.truncate().length();
        let over_w = |v: f64| [v / near.w, v / far.w];
        let [b_lo, b_hi] = over_w(e.w);
        let [lo_lo, lo_hi] = over_w(e_center - e_reach);
        let [hi_lo, hi_hi] = over_w(e_center + e_reach);
        let z_lo = a + b_lo.min(b_hi) + lo_lo.min(lo_hi);
        let z_hi = a + b_lo.max(b_hi) + hi_lo.max(hi_hi);
        let lo = xy_lo.extend(z_lo);
        let hi = xy_hi.extend(z_hi);
        let (w, h) = (pyramid.width as f64, pyramid.height as f64);
        let px_lo = [
            (lo.x * 0.5 + 0.5) * w - test.margin,
            (0.5 - hi.y * 0.5) * h - test.margin,
        ];
        let px_hi = [
            (hi.x * 0.5 + 0.5) * w + test.margin,
            (0.5 - lo.y * 0.5) * h + test.margin,
        ];
        let last = [w - 1.0, h - 1.0];
        let p0: Vec<u32> = (0..2)
            .map(|a| px_lo[a].floor().clamp(0.0, last[a]) as u32)
            .collect();
        let p1: Vec<u32> = (0..2)
            .map(|a| px_hi[a].floor().clamp(0.0, last[a]) as u32)
            .collect();
        let extent = (p1[0] - p0[0]).max(p1[1] - p0[1]) + 1;
        let level = if extent > 1 {
            u32::BITS - (extent - 1).leading_zeros()
        } else {
            0
        }
        .min(pyramid.levels.len() as u32 - 1);
        let order = pyramid.order;
        let (lw, lh) = pyramid.level_size(level);
        let texel = |x: u32, y: u32| pyramid.texel(level, (x >> level).min(lw - 1), (y >> level).min(lh - 1));
        let mut far = texel(p0[0], p0[1]);
        for (x, y) in [(p1[0], p0[1]), (p0[0], p1[1]), (p1[0], p1[1])] {
            far = order.farther(far, texel(x, y));
        }
        let far = far as f64;
        let slack = test.tolerance * far.abs();
        if order.reverse() {
            hi.z >= far - slack
        } else {
            lo.z <= far + slack
        }
    }
}

/// The least clip `w` of a sphere that the late phase projects (the
/// shader's `MIN_W`): a sphere nearer the eye plane is kept, as one that
/// reaches it (`1/w` would overflow below `f32`'s normal range).
pub(crate) const MIN_W: f32 = 1.0e-30;

/// The late phase splits the depth along `w`, `z = a·w + b + e·p`, with `a`
/// fitted only where `w` depends on the point by more than this share of
/// its magnitude (the shader's `FIT_MIN`): an orthographic projection with
/// rounding noise in its `w` row takes `a = 0`.
pub(crate) const DEPTH_FIT_MIN: f32 = 1.0e-6;

/// The slack of one evaluation of the test.
#[derive(Clone, Copy)]
struct Test {
    radius: f64,
    margin: f64,
    tolerance: f64,
}
