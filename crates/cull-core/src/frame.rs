//! Culling instances that are given relative to a transform (a Bevy
//! entity's `GlobalTransform`) in that transform's own space.
//!
//! The kernels cull whatever space the instances are in: the views only
//! have to be in the same one. [`LocalFrame`] takes a view's frustum,
//! level-of-detail metric and occlusion camera into a batch's space,
//! composing the matrices in `f64`. Instances then keep the precision of
//! their local coordinates: a chunk a million units from the world's
//! origin, seen by a camera near it, is culled with planes whose offsets
//! are as small as the chunk's own coordinates, and moving the chunk moves
//! no instance.

use crate::CullError;
use crate::cone::SpotCone;
use crate::frustum::{Frustum, SizeMetric};
use crate::occlusion::OcclusionCamera;
use glam::{DMat4, DVec3, DVec4, Mat4};

/// The space a batch's instances are given in: `world_from_local` maps it
/// into the world the views are in. Build views for the batch with its
/// methods and cull the instances as they are.
///
/// Any invertible affine transform works: rotation, translation, uniform or
/// non-uniform scale, shear and mirroring. A frustum in the frame is exact
/// under all of them (a sphere in the frame is an ellipsoid in the world,
/// and a plane taken into the frame tests that ellipsoid exactly), and so
/// is the late phase of occlusion culling (it bounds the sphere's image
/// under any linear map). Only the level-of-detail size is approximate
/// under a non-uniform scale ([`Self::size_metric`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LocalFrame {
    world_from_local: DMat4,
    local_from_world: DMat4,
}

impl LocalFrame {
    /// The world's own frame: views are used as they are.
    pub const IDENTITY: Self = Self {
        world_from_local: DMat4::IDENTITY,
        local_from_world: DMat4::IDENTITY,
    };

    /// The frame of an affine `world_from_local` (its last row must be
    /// `0, 0, 0, 1`). An error when it is not finite, not affine or
    /// singular: such a batch cannot be placed.
    pub fn new(world_from_local: Mat4) -> Result<Self, CullError> {
        if !world_from_local.is_finite() {
            return Err(CullError::DegenerateFrustum("world_from_local is not finite"));
        }
        if world_from_local.row(3) != glam::Vec4::W {
            return Err(CullError::DegenerateFrustum("world_from_local is not affine"));
        }
        let world_from_local = world_from_local.as_dmat4();
        if world_from_local.determinant() == 0.0 {
            return Err(CullError::DegenerateFrustum("world_from_local is singular"));
        }
        Ok(Self {
            world_from_local,
            local_from_world: world_from_local.inverse(),
        })
    }

    /// Whether this is the world's own frame.
    pub fn is_identity(&self) -> bool {
        self.world_from_local == DMat4::IDENTITY
    }

    /// Whether the frame mirrors (its determinant is negative): triangles
    /// wound counter-clockwise in it are clockwise in the world.
    pub fn mirrors(&self) -> bool {
        self.world_from_local.determinant() < 0.0
    }

    /// The transform into the world, in `f64`.
    pub fn world_from_local(&self) -> DMat4 {
        self.world_from_local
    }

    /// [`Frustum::from_view`] in this frame: the camera's transform taken
    /// into the frame in `f64` before the planes are found. `max_distance`
    /// is measured in the world, as for `from_view`.
    pub fn frustum_from_view(
        &self,
        clip_from_view: Mat4,
        world_from_view: Mat4,
        max_distance: Option<f32>,
    ) -> Result<Frustum, CullError> {
        if !(clip_from_view.is_finite() && world_from_view.is_finite()) {
            return Err(CullError::DegenerateFrustum("the matrix is not finite"));
        }
        // A world distance `D` along the near plane's unit normal `n` is
        // `D / |Aᵀn|` in the frame (`A` the frame's linear part): the plane
        // at that distance in the frame is the world's.
        let max_distance = match max_distance {
            Some(d) if !self.is_identity() => {
                let view_from_world = world_from_view.as_dmat4().inverse();
                let normal = view_from_world
                    .transpose()
                    .transform_vector3(DVec3::NEG_Z)
                    .normalize();
                let stretch = self
                    .world_from_local
                    .transpose()
                    .transform_vector3(normal)
                    .length();
                Some((d as f64 / stretch) as f32)
            }
            other => other,
        };
        Frustum::from_view_f64(
            clip_from_view,
            self.local_from_view(world_from_view),
            max_distance,
        )
    }

    /// [`Frustum::from_clip_from_world`] (without a maximum distance) in
    /// this frame.
    pub fn frustum_from_clip_from_world(&self, clip_from_world: Mat4) -> Result<Frustum, CullError> {
        if !clip_from_world.is_finite() {
            return Err(CullError::DegenerateFrustum("the matrix is not finite"));
        }
        Frustum::extract(self.clip_from_local(clip_from_world), None, None, false)
    }

    /// [`Frustum::from_shadow_cascade`] in this frame.
    pub fn shadow_cascade(&self, clip_from_world: Mat4) -> Result<Frustum, CullError> {
        if !clip_from_world.is_finite() {
            return Err(CullError::DegenerateFrustum("the matrix is not finite"));
        }
        Frustum::extract(self.clip_from_local(clip_from_world), None, None, true)
    }

    /// [`SizeMetric::from_view`] measuring instances in this frame: the
    /// camera's position in the frame, and the projection's scale times the
    /// frame's stretch, so that a size is the one the world sees.
    ///
    /// Exact for a frame without scale or with a uniform one (a perspective
    /// size does not change under uniform scale; an orthographic one grows
    /// with it). Under a non-uniform scale, with `s_max` and `s_min` the
    /// lengths of the frame's longest and shortest axes, a perspective size
    /// is measured `s_max / s_min` times too large at most, an orthographic
    /// one as if every axis were `s_max` long: finer levels are kept a
    /// little longer, and no instance is cut off by size while the world
    /// sees it at the cut-off's size or larger (for a frame without shear,
    /// where the axes' lengths are its scales).
    pub fn size_metric(&self, clip_from_view: Mat4, world_from_view: Mat4) -> SizeMetric {
        let world = SizeMetric::from_view(clip_from_view, world_from_view);
        let (shortest, longest) = self.axis_lengths();
        let stretch = if world.perspective {
            longest / shortest
        } else {
            longest
        };
        let origin = self.local_point(world.origin.as_dvec3());
        SizeMetric {
            origin: origin.as_vec3(),
            scale: (world.scale as f64 * stretch) as f32,
            perspective: world.perspective,
        }
    }

    /// [`OcclusionCamera::from_view`] in this frame.
    pub fn occlusion_from_view(
        &self,
        clip_from_view: Mat4,
        world_from_view: Mat4,
    ) -> Result<OcclusionCamera, CullError> {
        if !(clip_from_view.is_finite() && world_from_view.is_finite()) {
            return Err(CullError::DegenerateFrustum("the matrix is not finite"));
        }
        OcclusionCamera::from_view_f64(clip_from_view, self.local_from_view(world_from_view))
    }

    /// [`OcclusionCamera::from_clip_from_world`] in this frame, positions
    /// taken relative to the world point `origin` (best the camera's).
    pub fn occlusion_from_clip_from_world(
        &self,
        clip_from_world: Mat4,
        origin: glam::Vec3,
    ) -> Result<OcclusionCamera, CullError> {
        if !(clip_from_world.is_finite() && origin.is_finite()) {
            return Err(CullError::DegenerateFrustum("the matrix is not finite"));
        }
        let origin = self.local_point(origin.as_dvec3());
        OcclusionCamera::from_clip_from_world_f64(self.clip_from_local(clip_from_world), origin)
    }

    /// A spot light's `cone`, given in the world, in this frame, for
    /// [`Frustum::with_cone`]: exact where the frame is a similarity
    /// (rotation, translation, uniform scale, mirroring), which takes a
    /// cone to a cone, its angle widened by `1e-5` radians and its range by
    /// as much relatively, for the frame's rounding. `None` under a
    /// non-uniform scale or a shear, whose image of a cone is not one: the
    /// view then culls with its frustum alone, which keeps more.
    pub fn spot_cone(&self, cone: SpotCone) -> Option<SpotCone> {
        /// How far from a similarity the frame's axes may be, relatively.
        const SIMILAR: f64 = 1.0e-7;
        /// The widening that covers it and the conversions.
        const WIDEN: f64 = 1.0e-5;
        let m = self.local_from_world;
        let axes = [m.x_axis, m.y_axis, m.z_axis].map(|c: DVec4| c.truncate());
        let scale = axes[0].length();
        let off = |a: DVec3, b: DVec3| a.dot(b).abs() > SIMILAR * scale * scale;
        if axes.iter().any(|a| (a.length() - scale).abs() > SIMILAR * scale)
            || off(axes[0], axes[1])
            || off(axes[1], axes[2])
            || off(axes[0], axes[2])
        {
            return None;
        }
        let apex = self.local_point(cone.apex().as_dvec3());
        let axis = m.transform_vector3(cone.axis().as_dvec3());
        let half_angle = (cone.half_angle() as f64 + WIDEN).min(std::f64::consts::FRAC_PI_2);
        let range = cone.range() as f64 * scale * (1.0 + WIDEN);
        SpotCone::new(apex.as_vec3(), axis.as_vec3(), half_angle as f32, range as f32).ok()
    }

    /// Where the world point `world` lies in the frame, in `f64`.
    pub fn local_point(&self, world: DVec3) -> DVec3 {
        self.local_from_world.transform_point3(world)
    }

    /// The camera's transform as seen from the frame.
    fn local_from_view(&self, world_from_view: Mat4) -> DMat4 {
        self.local_from_world * world_from_view.as_dmat4()
    }

    fn clip_from_local(&self, clip_from_world: Mat4) -> DMat4 {
        clip_from_world.as_dmat4() * self.world_from_local
    }

    /// The lengths of the frame's shortest and longest axes (the columns of
    /// its linear part).
    pub fn axis_lengths(&self) -> (f64, f64) {
        let m = self.world_from_local;
        let lengths = [m.x_axis, m.y_axis, m.z_axis].map(|c: DVec4| c.truncate().length());
        let shortest = lengths.iter().copied().fold(f64::INFINITY, f64::min);
        let longest = lengths.iter().copied().fold(0.0, f64::max);
        (shortest, longest)
    }
}

impl Default for LocalFrame {
    fn default() -> Self {
        Self::IDENTITY
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sphere::SphereClass;
    use glam::{Quat, Vec3};

    fn camera() -> (Mat4, Mat4) {
        let clip_from_view = Mat4::perspective_infinite_reverse_rh(0.9, 1.5, 0.1);
        let world_from_view = Mat4::from_rotation_translation(
            Quat::from_euler(glam::EulerRot::YXZ, 0.4, -0.2, 0.1),
            Vec3::new(1.0e6 + 3.0, 20.0, -1.0e6 + 7.0),
        );
        (clip_from_view, world_from_view)
    }

    fn frames() -> Vec<Mat4> {
        let rotation = Quat::from_euler(glam::EulerRot::XYZ, 0.3, 1.1, -0.7);
        let far = Vec3::new(1.0e6, 0.0, -1.0e6);
        vec![
            Mat4::from_translation(far),
            Mat4::from_scale_rotation_translation(
                Vec3::splat(2.5),
                rotation,
                far + Vec3::new(5.0, 1.0, -3.0),
            ),
            Mat4::from_scale_rotation_translation(Vec3::new(0.5, 3.0, 1.5), rotation, far),
            Mat4::from_scale_rotation_translation(Vec3::new(-1.0, 1.0, 1.0), rotation, far),
        ]
    }

    /// Whether the world point `p` is inside the view, in `f64` from the
    /// exact inputs (the infinite far plane needs no test).
    fn inside(clip_from_view: Mat4, world_from_view: Mat4, p: DVec3) -> Option<bool> {
        let clip = clip_from_view.as_dmat4() * world_from_view.as_dmat4().inverse() * p.extend(1.0);
        let margin = 1.0e-4 * clip.w.abs();
        let (x, y, z, w) = (clip.x, clip.y, clip.z, clip.w);
        let strictly = x.abs() < w - margin && y.abs() < w - margin && z > margin;
        let clearly_out = x.abs() > w + margin || y.abs() > w + margin || z < -margin;
        if strictly {
            Some(true)
        } else if clearly_out {
            Some(false)
        } else {
            None
        }
    }

    #[test]
    fn identity_frame_builds_the_world_views() {
        let (clip_from_view, world_from_view) = camera();
        let frame = LocalFrame::new(Mat4::IDENTITY).unwrap();
        assert!(frame.is_identity());
        for max_distance in [None, Some(40.0)] {
            assert_eq!(
                frame
                    .frustum_from_view(clip_from_view, world_from_view, max_distance)
                    .unwrap(),
                Frustum::from_view(clip_from_view, world_from_view, max_distance).unwrap()
            );
        }
        let clip_from_world = clip_from_view * world_from_view.inverse();
        assert_eq!(
            frame.frustum_from_clip_from_world(clip_from_world).unwrap(),
            Frustum::from_clip_from_world(clip_from_world, None).unwrap()
        );
        let cascade = Mat4::orthographic_rh(-5.0, 5.0, -5.0, 5.0, 0.1, 50.0);
        assert_eq!(
            frame.shadow_cascade(cascade).unwrap(),
            Frustum::from_shadow_cascade(cascade).unwrap()
        );
        assert_eq!(
            frame.size_metric(clip_from_view, world_from_view),
            SizeMetric::from_view(clip_from_view, world_from_view)
        );
        assert_eq!(
            frame
                .occlusion_from_view(clip_from_view, world_from_view)
                .unwrap(),
            OcclusionCamera::from_view(clip_from_view, world_from_view).unwrap()
        );
        let origin = world_from_view.w_axis.truncate();
        assert_eq!(
            frame
                .occlusion_from_clip_from_world(clip_from_world, origin)
                .unwrap(),
            OcclusionCamera::from_clip_from_world(clip_from_world, origin).unwrap()
        );
    }

    /// Points a million units from the origin, given in a frame there,
    /// are kept exactly where the exact view sees them: scaled, sheared by
    /// a non-uniform scale under rotation, and mirrored.
    #[test]
    fn far_frames_keep_what_the_view_sees() {
        let (clip_from_view, world_from_view) = camera();
        let mut rng = crate::scene::SceneRng::new(7);
        for world_from_local in frames() {
            let frame = LocalFrame::new(world_from_local).unwrap();
            assert_eq!(frame.mirrors(), world_from_local.determinant() < 0.0);
            let frustum = frame
                .frustum_from_view(clip_from_view, world_from_view, None)
                .unwrap();
            let (mut kept, mut culled) = (0, 0);
            for _ in 0..20_000 {
                let local = Vec3::new(
                    rng.range(-60.0, 60.0),
                    rng.range(-60.0, 60.0),
                    rng.range(-60.0, 60.0),
                );
                let world = frame.world_from_local().transform_point3(local.as_dvec3());
                match inside(clip_from_view, world_from_view, world) {
                    Some(true) => {
                        assert!(
                            frustum.intersects_sphere(local, 0.0),
                            "{local} lost in {world_from_local}"
                        );
                        kept += 1;
                    }
                    Some(false) => {
                        assert!(
                            !frustum.intersects_sphere(local, 0.0),
                            "{local} kept in {world_from_local}"
                        );
                        culled += 1;
                    }
                    None => {}
                }
            }
            assert!(kept > 500 && culled > 500, "{kept} kept, {culled} culled");
        }
    }

    /// A light's range bounds the view in the world's units whatever the
    /// frame's scale: points just within it are kept, just beyond culled.
    #[test]
    fn max_distance_is_the_worlds() {
        let (clip_from_view, world_from_view) = camera();
        for world_from_local in frames() {
            let frame = LocalFrame::new(world_from_local).unwrap();
            let frustum = frame
                .frustum_from_view(clip_from_view, world_from_view, Some(30.0))
                .unwrap();
            // Straight ahead, 30 past the near plane at 0.1.
            for (depth, kept) in [(30.0, true), (30.2, false), (29.8, true)] {
                let world = world_from_view
                    .as_dmat4()
                    .transform_point3(DVec3::new(0.0, 0.0, -0.1 - depth));
                let local = frame.local_point(world).as_vec3();
                if depth != 30.0 {
                    assert_eq!(
                        frustum.intersects_sphere(local, 0.0),
                        kept,
                        "{depth} in {world_from_local}"
                    );
                } else {
                    assert!(frustum.intersects_sphere(local, 1.0e-3));
                }
            }
        }
    }

    /// A sphere in a non-uniformly scaled frame is an ellipsoid in the
    /// world: the frame's planes test it as the world's planes test the
    /// ellipsoid (its support along each normal `n` is `r·|Aᵀn|`).
    #[test]
    fn frame_planes_test_the_ellipsoid() {
        let (clip_from_view, world_from_view) = camera();
        let frame = LocalFrame::new(frames()[2]).unwrap();
        let frustum = frame
            .frustum_from_view(clip_from_view, world_from_view, None)
            .unwrap();
        let world = frame.world_from_local();
        let m = clip_from_view.as_dmat4() * world_from_view.as_dmat4().inverse();
        let (r0, r1, r2, r3) = (m.row(0), m.row(1), m.row(2), m.row(3));
        // Reverse-Z with an infinite far plane: the near plane is z <= w.
        let planes = [r3 + r0, r3 - r0, r3 + r1, r3 - r1, r3 - r2].map(|p| p / p.truncate().length());
        let mut rng = crate::scene::SceneRng::new(11);
        let (mut kept, mut culled) = (0, 0);
        for _ in 0..20_000 {
            let center = Vec3::new(
                rng.range(-80.0, 80.0),
                rng.range(-80.0, 80.0),
                rng.range(-80.0, 80.0),
            );
            let radius = rng.range(0.5, 8.0) as f64;
            let world_center = world.transform_point3(center.as_dvec3());
            let reach = planes
                .iter()
                .map(|p| {
                    let support = radius * world.transpose().transform_vector3(p.truncate()).length();
                    p.truncate().dot(world_center) + p.w + support
                })
                .fold(f64::INFINITY, f64::min);
            match frustum.classify_sphere(center, radius as f32) {
                SphereClass::Inside => {
                    assert!(reach > -1.0e-3, "{center} r {radius} kept, {reach} outside");
                    kept += 1;
                }
                SphereClass::Outside => {
                    assert!(reach < 1.0e-3, "{center} r {radius} culled, {reach} inside");
                    culled += 1;
                }
                SphereClass::Borderline => {}
            }
        }
        assert!(kept > 500 && culled > 500, "{kept} kept, {culled} culled");
    }

    #[test]
    fn uniform_scale_measures_world_sizes() {
        let (clip_from_view, world_from_view) = camera();
        let world_from_local = frames()[1];
        let frame = LocalFrame::new(world_from_local).unwrap();
        let local_metric = frame.size_metric(clip_from_view, world_from_view);
        let world_metric = SizeMetric::from_view(clip_from_view, world_from_view);
        let center = Vec3::new(3.0, -2.0, 9.0);
        // The world's size in f64: radius 2.5 (the frame's scale).
        let world_center = frame.world_from_local().transform_point3(center.as_dvec3());
        let distance = (world_center - world_metric.origin.as_dvec3()).length();
        let world = 2.5 * world_metric.scale as f64 / distance;
        let local = local_metric.size(center, 1.0);
        assert!((local / world - 1.0).abs() < 1.0e-5, "{local} vs {world}");
        // Non-uniform: never smaller than the largest world sphere's size.
        let frame = LocalFrame::new(frames()[2]).unwrap();
        let metric = frame.size_metric(clip_from_view, world_from_view);
        let world_center = frame.world_from_local().transform_point3(center.as_dvec3());
        let distance = (world_center - world_metric.origin.as_dvec3()).length();
        assert!(metric.size(center, 1.0) >= 3.0 * world_metric.scale as f64 / distance * (1.0 - 1.0e-6));
    }

    /// The occlusion camera in a frame projects a frame's point where the
    /// world camera of the same matrices projects its world position.
    #[test]
    fn occlusion_projects_frame_points_as_the_world() {
        let (clip_from_view, world_from_view) = camera();
        // The f32 product loses the far camera's precision: compared with
        // the world camera of that same matrix.
        let clip_from_world = clip_from_view * world_from_view.inverse();
        let origin = world_from_view.w_axis.truncate();
        let world_cameras = [
            OcclusionCamera::from_view(clip_from_view, world_from_view).unwrap(),
            OcclusionCamera::from_clip_from_world(clip_from_world, origin).unwrap(),
        ];
        // A point 20 units in front of the camera.
        let world = world_from_view
            .as_dmat4()
            .transform_point3(DVec3::new(2.0, -1.0, -20.0));
        let project = |camera: &OcclusionCamera, p: DVec3| {
            let clip = camera.clip_from_relative.as_dmat4() * (p - camera.origin.as_dvec3()).extend(1.0);
            clip.truncate() / clip.w
        };
        for world_from_local in frames() {
            let frame = LocalFrame::new(world_from_local).unwrap();
            let cameras = [
                frame
                    .occlusion_from_view(clip_from_view, world_from_view)
                    .unwrap(),
                frame
                    .occlusion_from_clip_from_world(clip_from_world, origin)
                    .unwrap(),
            ];
            let local = frame.local_point(world);
            for (camera, world_camera) in cameras.iter().zip(&world_cameras) {
                let (a, b) = (project(camera, local), project(world_camera, world));
                assert!(
                    (a - b).abs().max_element() < 1.0e-5,
                    "{a} vs {b} in {world_from_local}"
                );
            }
        }
    }

    #[test]
    fn frames_that_place_nothing_are_refused() {
        for m in [
            Mat4::from_scale(Vec3::new(1.0, 0.0, 1.0)),
            Mat4::from_translation(Vec3::new(f32::NAN, 0.0, 0.0)),
            Mat4::from_cols_array(&[
                1.0, 0.0, 0.0, 0.5, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 1.0,
            ]),
        ] {
            assert!(LocalFrame::new(m).is_err(), "{m}");
        }
        assert!(
            LocalFrame::new(Mat4::from_scale(Vec3::new(-1.0, 1.0, 1.0)))
                .unwrap()
                .mirrors()
        );
    }
}
