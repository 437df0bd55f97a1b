//! The swept volume against the receivers it must serve: every caster whose
//! shadow reaches the slice (widened by the margin) is kept, in any camera,
//! light and frame; what cannot reach it is culled; bad input is refused.

use super::*;
use crate::SphereClass;
use crate::scene::SceneRng;
use glam::Quat;

/// A random camera: perspective (reverse-Z infinite or standard) or
/// orthographic, placed anywhere (mirrored sometimes, far from the origin
/// sometimes), with a random light and depth range.
fn random_receivers(rng: &mut SceneRng, case: usize) -> ShadowReceivers {
    let aspect = rng.range(0.5, 2.5);
    let clip_from_view = match case % 3 {
        0 => Mat4::perspective_infinite_reverse_rh(rng.range(0.2, 2.0), aspect, rng.range(0.01, 1.0)),
        1 => Mat4::perspective_rh(rng.range(0.2, 2.0), aspect, rng.range(0.01, 1.0), 500.0),
        _ => {
            let h = rng.range(1.0, 30.0);
            Mat4::orthographic_rh(-h * aspect, h * aspect, -h, h, 0.0, 400.0)
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
    let near = rng.range(0.0, 30.0);
    ShadowReceivers {
        clip_from_view,
        world_from_view: Mat4::from_scale_rotation_translation(mirror, rotation, position),
        near,
        far: near + rng.range(0.5, 150.0),
        light_direction: Vec3::new(rng.range(-1.0, 1.0), rng.range(-1.0, 0.2), rng.range(-1.0, 1.0)),
        margin: rng.range(0.0, 0.5),
    }
}

/// A random world point on or inside the slice: a random convex mix of its
/// corners, or a corner itself.
fn point_in_slice(rng: &mut SceneRng, corners: &[DVec3; 8]) -> DVec3 {
    if rng.unit() < 0.2 {
        return corners[(rng.unit() * 7.99) as usize];
    }
    let weights: Vec<f64> = (0..8).map(|_| rng.unit() as f64).collect();
    let total: f64 = weights.iter().sum();
    corners.iter().zip(&weights).map(|(c, w)| *c * (*w / total)).sum()
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
    let frame = LocalFrame::new(Mat4::from_scale_rotation_translation(
        Vec3::new(-2.0, 0.5, 3.0),
        Quat::from_rotation_z(0.4),
        Vec3::new(-70.0, 8.0, 1.0e4),
    ))
    .unwrap();
    for case in 0..300 {
        let receivers = random_receivers(&mut rng, case);
        let corners = receivers.corners().unwrap();
        let world = Frustum::from_shadow_receivers(&receivers).unwrap();
        let local = frame.shadow_receivers(&receivers).unwrap();
        assert!(world.len <= MAX_PLANES && local.len == world.len);
        let light = receivers.light_direction.as_dvec3().normalize();
        for _ in 0..200 {
            // A receiver within the margin of the slice, and a caster
            // sphere whose point `touch` lies toward the light from it.
            let receiver = point_in_slice(&mut rng, &corners) + within(&mut rng, receivers.margin * 0.999);
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
        ShadowReceivers { near: -1.0, ..good },
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
