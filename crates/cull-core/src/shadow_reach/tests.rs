//! The swept volume against the receivers it must serve: every caster whose
//! shadow reaches the slice (widened by the margin) is kept, in any camera,
//! light and frame; what cannot reach it is culled; bad input is refused.

use super::*;
use crate::SphereClass;
use crate::scene::SceneRng;
use glam::Quat;

/// A camera's projection as the tests know it, to place receivers in its
/// view without the code under test.
#[derive(Clone, Copy)]
enum Lens {
    /// Vertical field of view, aspect and near plane (either depth convention).
    Perspective { fov: f32, aspect: f32, near: f32 },
    /// Left, right, bottom, top and the near plane's view depth.
    Orthographic {
        l: f32,
        r: f32,
        b: f32,
        t: f32,
        near: f32,
    },
}

impl Lens {
    fn nearest(self) -> f32 {
        match self {
            Lens::Perspective { near, .. } | Lens::Orthographic { near, .. } => near,
        }
    }

    /// The view-space point at NDC `x`, `y` (-1 to 1) and view depth `depth`.
    fn point(self, x: f32, y: f32, depth: f32) -> Vec3 {
        match self {
            Lens::Perspective { fov, aspect, .. } => {
                let h = (fov / 2.0).tan() * depth;
                Vec3::new(x * h * aspect, y * h, -depth)
            }
            Lens::Orthographic { l, r, b, t, .. } => Vec3::new(
                l + (r - l) * (x + 1.0) / 2.0,
                b + (t - b) * (y + 1.0) / 2.0,
                -depth,
            ),
        }
    }
}

/// A random camera: perspective (reverse-Z infinite or standard) or
/// orthographic (with its near plane behind the camera sometimes), placed
/// anywhere (mirrored sometimes, far from the origin sometimes), with a
/// random light and depth range, from the camera's near plane sometimes.
fn random_receivers(rng: &mut SceneRng, case: usize) -> (ShadowReceivers, Lens) {
    let aspect = rng.range(0.5, 2.5);
    let (fov, near) = (rng.range(0.2, 2.0), rng.range(0.01, 1.0));
    let (clip_from_view, lens) = match case % 3 {
        0 => (
            Mat4::perspective_infinite_reverse_rh(fov, aspect, near),
            Lens::Perspective { fov, aspect, near },
        ),
        1 => (
            Mat4::perspective_rh(fov, aspect, near, 500.0),
            Lens::Perspective { fov, aspect, near },
        ),
        _ => {
            let h = rng.range(1.0, 30.0);
            let near = if case.is_multiple_of(2) { -20.0 } else { 0.0 };
            let (l, r, b, t) = (-h * aspect, h * aspect, -h, h);
            (
                Mat4::orthographic_rh(l, r, b, t, near, 400.0),
                Lens::Orthographic { l, r, b, t, near },
            )
        }
    };
    let rotation = Quat::from_euler(
        glam::EulerRot::YXZ,
        rng.range(-3.0, 3.0),
        rng.range(-1.4, 1.4),
        rng.range(-0.5, 0.5),
    );
    let origin = if case % 5 == 4 {
        Vec3::new(3.0e5, -2.0e4, 1.0e5)
    } else {
        Vec3::ZERO
    };
    let position = origin
        + Vec3::new(
            rng.range(-50.0, 50.0),
            rng.range(-5.0, 20.0),
            rng.range(-50.0, 50.0),
        );
    let mirror = if case % 7 == 6 {
        Vec3::new(-1.0, 1.0, 1.0)
    } else {
        Vec3::ONE
    };
    let from = rng.range(0.0, 30.0);
    // Axis-aligned lights and level cameras too, where faces and edges lie
    // parallel to the light.
    let light_direction = match case % 11 {
        0 => Vec3::NEG_Y,
        1 => Vec3::X,
        _ => Vec3::new(rng.range(-1.0, 1.0), rng.range(-1.0, 0.2), rng.range(-1.0, 1.0)),
    };
    let rotation = if case % 11 < 2 { Quat::IDENTITY } else { rotation };
    let receivers = ShadowReceivers {
        clip_from_view,
        world_from_view: Mat4::from_scale_rotation_translation(mirror, rotation, position),
        near: if case.is_multiple_of(4) {
            f32::NEG_INFINITY
        } else {
            from
        },
        far: from.max(lens.nearest()) + rng.range(0.5, 150.0),
        light_direction,
        margin: rng.range(0.0, 0.5),
    };
    (receivers, lens)
}

/// A random world point the camera sees between the receivers' depths (a
/// random point of its view, or a corner of it), placed without the code
/// under test.
fn point_in_slice(rng: &mut SceneRng, receivers: &ShadowReceivers, lens: Lens) -> DVec3 {
    let near = receivers.near.max(lens.nearest());
    let corner = rng.unit() < 0.2;
    let pick = |rng: &mut SceneRng, lo: f32, hi: f32| {
        if corner {
            if rng.unit() < 0.5 { lo } else { hi }
        } else {
            rng.range(lo, hi)
        }
    };
    let (x, y, depth) = (
        pick(rng, -1.0, 1.0),
        pick(rng, -1.0, 1.0),
        pick(rng, near, receivers.far),
    );
    receivers
        .world_from_view
        .as_dmat4()
        .transform_point3(lens.point(x, y, depth).as_dvec3())
}

/// A random vector no longer than `length`.
fn within(rng: &mut SceneRng, length: f32) -> DVec3 {
    let v = DVec3::new(
        rng.range(-1.0, 1.0) as f64,
        rng.range(-1.0, 1.0) as f64,
        rng.range(-1.0, 1.0) as f64,
    );
    v.normalize_or_zero() * (rng.unit() as f64 * length as f64)
}

#[test]
fn keeps_every_caster_whose_shadow_reaches_the_receivers() {
    let mut rng = SceneRng::new(41);
    // Mirrored, unevenly scaled, sheared, turned and far away.
    let shear = Mat4::from_cols(
        Vec4::X,
        Vec4::new(0.6, 1.0, 0.0, 0.0),
        Vec4::new(0.0, -0.3, 1.0, 0.0),
        Vec4::W,
    );
    let frame = LocalFrame::new(
        Mat4::from_scale_rotation_translation(
            Vec3::new(-2.0, 0.5, 3.0),
            Quat::from_rotation_z(0.4),
            Vec3::new(-70.0, 8.0, 1.0e4),
        ) * shear,
    )
    .unwrap();
    for case in 0..300 {
        let (receivers, lens) = random_receivers(&mut rng, case);
        let world = Frustum::from_shadow_receivers(&receivers).unwrap();
        let local = frame.shadow_receivers(&receivers).unwrap();
        assert!(world.len <= MAX_PLANES && local.len == world.len);
        let light = receivers.light_direction.as_dvec3().normalize();
        for _ in 0..200 {
            // A receiver within the margin of the slice, and a caster
            // sphere whose point `touch` lies toward the light from it.
            let receiver =
                point_in_slice(&mut rng, &receivers, lens) + within(&mut rng, receivers.margin * 0.999);
            let touch = receiver - light * (rng.range(0.0, 1.0).powi(3) * 300.0) as f64;
            let radius = rng.range(0.0, 3.0);
            let center = touch + within(&mut rng, radius * 0.999);
            assert_ne!(
                world.classify_sphere(center.as_vec3(), radius),
                SphereClass::Outside,
                "case {case}: a caster at {center} (radius {radius}) shadows {receiver}"
            );
            // In the frame: the caster's center, with a point-sized sphere.
            let local_center = frame.local_point(touch);
            assert_ne!(
                local.classify_sphere(local_center.as_vec3(), 0.0),
                SphereClass::Outside,
                "case {case}: in the frame, a caster at {touch} shadows {receiver}"
            );
        }
    }
}

#[test]
fn culls_casters_whose_shadow_falls_elsewhere() {
    // A camera looking across a scene at head height, the sun high and to
    // the side: most of the cascade's box (the square around the slice as
    // seen from the light) casts its shadow outside the slice.
    let receivers = ShadowReceivers {
        clip_from_view: Mat4::perspective_infinite_reverse_rh(0.8, 16.0 / 9.0, 0.1),
        world_from_view: Mat4::from_translation(Vec3::new(0.0, 6.0, 0.0)),
        near: 5.0,
        far: 40.0,
        light_direction: Vec3::new(-0.4, -1.0, -0.3),
        margin: 0.2,
    };
    let reach = Frustum::from_shadow_receivers(&receivers).unwrap();
    assert!(
        reach.len >= 5,
        "the outline and a face away from the light: {}",
        reach.len
    );
    let mut rng = SceneRng::new(7);
    let (mut kept, total) = (0, 10_000);
    for _ in 0..total {
        // Trees on the ground around the camera, within the box's reach.
        let p = Vec3::new(
            rng.range(-60.0, 60.0),
            rng.range(0.0, 3.0),
            rng.range(-60.0, 20.0),
        );
        kept += usize::from(reach.intersects_sphere(p, 1.0));
    }
    assert!(kept * 3 < total, "{kept} of {total} kept");
    assert!(
        reach.intersects_sphere(Vec3::new(0.0, 1.0, -20.0), 0.5),
        "in view"
    );
    assert!(
        !reach.intersects_sphere(Vec3::new(0.0, 1.0, 20.0), 0.5),
        "behind the camera"
    );
    assert!(
        !reach.intersects_sphere(Vec3::new(0.0, -100.0, -20.0), 0.5),
        "far below the view"
    );
}

#[test]
fn a_face_away_from_the_light_culls_what_lies_beyond_it() {
    // A level camera, the sun straight above: four planes of the outline
    // and the slice's floor, below which nothing shadows what is seen.
    let receivers = ShadowReceivers {
        clip_from_view: Mat4::perspective_infinite_reverse_rh(0.8, 1.0, 0.1),
        world_from_view: Mat4::from_translation(Vec3::new(0.0, 2.0, 0.0)),
        near: f32::NEG_INFINITY,
        far: 20.0,
        light_direction: Vec3::NEG_Y,
        margin: 0.0,
    };
    let reach = Frustum::from_shadow_receivers(&receivers).unwrap();
    assert_eq!(reach.len, 5, "four outline planes and the floor");
    // Straight below the slice's floor (its depth at 10: y = 2 - 10 tan 0.4).
    let floor = 2.0 - 10.0 * 0.4f32.tan();
    assert!(!reach.intersects_sphere(Vec3::new(0.0, floor - 2.0, -10.0), 1.0));
    assert!(reach.intersects_sphere(Vec3::new(0.0, floor + 2.0, -10.0), 1.0));
    // Right in front of the camera, nearer than any cascade bound.
    assert!(reach.intersects_sphere(Vec3::new(0.0, 2.0, -0.2), 0.01));
}

#[test]
fn refuses_receivers_that_bound_nothing() {
    let good = ShadowReceivers {
        clip_from_view: Mat4::perspective_infinite_reverse_rh(0.8, 1.5, 0.1),
        world_from_view: Mat4::IDENTITY,
        near: 1.0,
        far: 10.0,
        light_direction: Vec3::NEG_Y,
        margin: 0.0,
    };
    assert!(Frustum::from_shadow_receivers(&good).is_ok());
    let bad = [
        ShadowReceivers { near: 10.0, ..good },
        ShadowReceivers {
            near: f32::NAN,
            ..good
        },
        // Nearer than the camera's near plane (0.1) throughout.
        ShadowReceivers {
            near: f32::NEG_INFINITY,
            far: 0.05,
            ..good
        },
        ShadowReceivers {
            far: f32::INFINITY,
            ..good
        },
        ShadowReceivers {
            light_direction: Vec3::ZERO,
            ..good
        },
        ShadowReceivers {
            light_direction: Vec3::new(f32::NAN, -1.0, 0.0),
            ..good
        },
        ShadowReceivers { margin: -1.0, ..good },
        ShadowReceivers {
            world_from_view: Mat4::ZERO,
            ..good
        },
        ShadowReceivers {
            clip_from_view: Mat4::ZERO,
            ..good
        },
    ];
    for (i, receivers) in bad.iter().enumerate() {
        assert!(
            Frustum::from_shadow_receivers(receivers).is_err(),
            "case {i} accepted"
        );
    }
}
