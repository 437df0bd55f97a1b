//! Spot lights' views (`VisibilityTest::SpotCone`): each view's frustum and
//! cone against the CPU reference as exact sets, for every variant (both
//! forms of the ordered one), format and output kind (each form with both
//! output kinds, each output kind with every format; every combination with
//! `GPU_CULL_FULL_MATRIX=1`), at sizes 0, 1 and non-multiples of the
//! workgroup; eight views in one pass and one alone; spheres tangent to a
//! cone's side and to its range from outside (kept), a view with a cone and
//! no frustum (the cone's back and a half-space cone), a view without a
//! cone beside them; cones far from the origin and in a mirrored, scaled
//! frame.

use crate::harness::*;
use cull_core::scene::{Scene, SceneRng};
use cull_core::{
    CullRequest, Frustum, InstanceFormat, LocalFrame, MAX_VIEWS, OutputKind, SpotCone, VisibilityTest,
};
use glam::{Mat4, Vec3};

const SIZES: [usize; 5] = [0, 1, 257, 4099, 70_001];

/// A cone as the test places instances against it: in the frame's own
/// coordinates, exact (the culled one is `LocalFrame::spot_cone`'s, widened).
#[derive(Clone, Copy)]
struct Placed {
    apex: Vec3,
    axis: Vec3,
    half_angle: f32,
    range: f32,
}

/// The world's cones: a narrow one, wide ones, one far from the origin,
/// one along a diagonal. Ranges in the world.
fn world_cones(far: bool) -> Vec<(Vec3, Vec3, f32, f32)> {
    let far_apex = if far {
        Vec3::new(2.0e5, -7.0e4, 1.5e5)
    } else {
        Vec3::ZERO
    };
    vec![
        (Vec3::new(0.0, 2.0, 8.0), Vec3::new(0.1, -0.2, -1.0), 0.35, 30.0),
        (Vec3::new(-3.0, 0.5, 0.0), Vec3::X, 1.1, 12.0),
        (
            far_apex + Vec3::new(1.0, 1.0, 1.0),
            Vec3::new(-1.0, -0.5, 0.3),
            0.7,
            20.0,
        ),
        (Vec3::new(4.0, -4.0, -4.0), Vec3::new(-1.0, 1.0, 1.0), 0.2, 40.0),
        (Vec3::new(0.0, -6.0, 0.0), Vec3::Y, 1.4, 9.0),
        (Vec3::new(2.0, 2.0, -9.0), Vec3::new(0.0, 0.0, 1.0), 0.05, 50.0),
    ]
}

/// A spot light's view of a world cone: the square frustum around it
/// (`clip_from_view` of twice its half angle, far plane at its range), as
/// the Bevy plugin builds it, with the cone.
fn spot_view(frame: &LocalFrame, apex: Vec3, axis: Vec3, half_angle: f32, range: f32) -> Frustum {
    let up = if axis.normalize().abs().y > 0.9 {
        Vec3::X
    } else {
        Vec3::Y
    };
    let world_from_view = Mat4::look_to_rh(apex, axis.normalize(), up).inverse();
    let clip_from_view = Mat4::perspective_infinite_reverse_rh(2.0 * half_angle, 1.0, 0.01);
    let cone = SpotCone::new(apex, axis, half_angle, range).unwrap();
    let frustum = frame
        .frustum_from_view(clip_from_view, world_from_view, Some(range))
        .unwrap();
    frustum.with_cone(frame.spot_cone(cone).expect("a similarity keeps the cone"))
}

/// The views: every world cone's spot view, a frustum without a cone, and
/// a cone without a frustum (a half-space: the apex's plane), then the
/// exact cones in the frame's coordinates.
fn views(frame: &LocalFrame, far: bool) -> (Vec<Frustum>, Vec<Placed>) {
    let mut frusta = Vec::new();
    let mut placed = Vec::new();
    let local = |p: Vec3| frame.local_point(p.as_dvec3()).as_vec3();
    let scale = (frame.local_point(glam::DVec3::X) - frame.local_point(glam::DVec3::ZERO)).length() as f32;
    for (apex, axis, half_angle, range) in world_cones(far) {
        frusta.push(spot_view(frame, apex, axis, half_angle, range));
        placed.push(Placed {
            apex: local(apex),
            axis: (local(apex + axis.normalize()) - local(apex)).normalize(),
            half_angle,
            range: range * scale,
        });
    }
    let (apex, axis, half_angle, range) = world_cones(far)[0];
    let mut plain = spot_view(frame, apex, axis, half_angle, range);
    plain.cone = None;
    frusta.push(plain);
    placed.push(placed[0]);
    let half_space = SpotCone::new(
        Vec3::new(1.0, 0.0, 0.0),
        Vec3::Z,
        std::f32::consts::FRAC_PI_2,
        f32::INFINITY,
    )
    .unwrap();
    frusta.push(Frustum::everything().with_cone(frame.spot_cone(half_space).unwrap()));
    placed.push(Placed {
        apex: local(Vec3::X),
        axis: (local(Vec3::X + Vec3::Z) - local(Vec3::X)).normalize(),
        half_angle: std::f32::consts::FRAC_PI_2,
        range: 1.0e4,
    });
    assert_eq!(frusta.len(), MAX_VIEWS as usize);
    (frusta, placed)
}

/// A unit vector across `axis`, at angle `turn` about it.
fn across(axis: Vec3, turn: f32) -> Vec3 {
    let (a, b) = axis.any_orthonormal_pair();
    a * turn.cos() + b * turn.sin()
}

/// Instance `i` of the scene moved against cone `i % cones`: tangent to its
/// side from outside, tangent to its range from outside, or near its
/// boundary anywhere; every 41st not finite. Returns the scene and the
/// indices placed tangent (the cone keeps them).
fn cone_scene(
    seed: u64,
    count: usize,
    format: InstanceFormat,
    cones: &[Placed],
) -> (Scene, Vec<(u32, usize)>) {
    let mut scene = Scene::random(seed, count, Camera::InfiniteReverseZ, None).fit(format);
    let mut rng = SceneRng::new(seed ^ 0xC0AE);
    let mut tangent = Vec::new();
    for i in 0..count {
        let k = i % cones.len();
        let c = cones[k];
        let inst = &mut scene.instances[i];
        let Some(s) = format.world_sphere(&format.encode(&[*inst]).unwrap(), 0, scene.bounds) else {
            continue;
        };
        let r = s.radius;
        let side = across(c.axis, rng.range(0.0, std::f32::consts::TAU));
        let target = match i % 4 {
            0 if c.half_angle < 1.5 => {
                // On the side at distance d, pushed out along its normal by r.
                let d = rng.range(0.05, 0.8) * c.range;
                let (sin, cos) = c.half_angle.sin_cos();
                let on_side = c.apex + (c.axis * cos + side * sin) * d;
                tangent.push((i as u32, k));
                on_side + (side * cos - c.axis * sin) * r
            }
            1 => {
                // Inside the cone's angle, touching its range from outside.
                let angle = rng.range(0.0, 0.9) * c.half_angle.min(1.2);
                let dir = c.axis * angle.cos() + side * angle.sin();
                tangent.push((i as u32, k));
                c.apex + dir * (c.range + r)
            }
            _ => {
                let angle = rng.range(0.0, (c.half_angle * 1.4 + 0.1).min(3.0));
                let dir = c.axis * angle.cos() + side * angle.sin();
                c.apex + dir * rng.range(-0.1, 1.15) * c.range.min(100.0)
            }
        };
        inst.position += target - s.center;
        if i % 41 == 3 {
            inst.position.x = f32::NAN;
            inst.position.z = i as f32;
        }
    }
    (scene, tangent)
}

/// Culls `scene` for `frusta` (a target of `views` lists) and checks every
/// view's survivors against the CPU reference as exact sets, and that the
/// CPU keeps every tangent instance its view's frustum does.
#[allow(clippy::too_many_arguments)]
fn check(
    what: &str,
    culler: &cull_core::Culler,
    scene: &Scene,
    frusta: &[Frustum],
    views: u32,
    tangent: &[(u32, usize)],
) {
    let ctx = gpu();
    let capacity = scene.instances.len() as u32 + 33;
    let survivors = run_views(ctx, culler, scene, frusta, capacity, views);
    assert_views_exact(what, culler, scene, frusta, &survivors);
    let bytes = culler.format().encode(&scene.instances).unwrap();
    for &(i, view) in tangent.iter().filter(|(_, v)| *v < frusta.len()) {
        let Some(s) = culler.format().world_sphere(&bytes, i as usize, scene.bounds) else {
            continue;
        };
        let mut without_cone = frusta[view];
        without_cone.cone = None;
        if without_cone.classify(&s) == cull_core::SphereClass::Inside {
            assert_eq!(
                frusta[view].classify(&s),
                cull_core::SphereClass::Inside,
                "{what}: instance {i} touches view {view}'s cone from outside and is not kept"
            );
            assert!(
                survivors[view].contains(&i),
                "{what}: instance {i} touches view {view}'s cone, culled"
            );
        }
    }
}

fn check_all(output: OutputKind) {
    let ctx = gpu();
    let mirrored = mirrored_frame();
    let mut runs = 0;
    let kernels = topic_kernels(ctx, output);
    for &(variant, tuning, format) in &kernels {
        let many = views_culler(ctx, variant, format, output, tuning, MAX_VIEWS);
        let one = culler(ctx, variant, format, output, tuning);
        let form = form_name(&many);
        for (s, &size) in SIZES.iter().enumerate() {
            let (frame, far) = match s % 3 {
                0 => (LocalFrame::IDENTITY, false),
                1 => (mirrored, false),
                _ => (LocalFrame::IDENTITY, true),
            };
            let (frusta, placed) = views(&frame, far);
            assert_eq!(VisibilityTest::for_views(&frusta), VisibilityTest::SpotCone);
            let (scene, tangent) = cone_scene(s as u64 + 900, size, format, &placed);
            let what = format!(
                "{variant:?} ({form}) {format:?} {output:?} n={size} frame {}",
                s % 3
            );
            check(
                &format!("{what} views=8"),
                &many,
                &scene,
                &frusta,
                MAX_VIEWS,
                &tangent,
            );
            check(
                &format!("{what} views=1"),
                &one,
                &scene,
                &frusta[..1],
                1,
                &tangent,
            );
            runs += 1;
        }
    }
    assert_eq!(runs, kernels.len() * SIZES.len());
}

#[test]
fn spot_views_keep_what_touches_their_cones_indices() {
    check_all(OutputKind::Indices);
}

#[test]
fn spot_views_keep_what_touches_their_cones_instance_copies() {
    check_all(OutputKind::Instances);
}

/// The cone culls: of instances spread over a spot light's square frustum,
/// those in its corners, outside the cone, are not kept (the test would
/// pass with a cone that keeps everything otherwise).
#[test]
fn a_cone_culls_the_corners_of_its_frustum() {
    let ctx = gpu();
    let culler = posquat_culler(ctx, variants(ctx)[0]);
    let frustum = spot_view(&LocalFrame::IDENTITY, Vec3::ZERO, Vec3::NEG_Z, 0.5, 100.0);
    let mut without = frustum;
    without.cone = None;
    let mut scene = Scene::random(7, 20_000, Camera::InfiniteReverseZ, None).fit(culler.format());
    let mut rng = SceneRng::new(3);
    let tan = 0.5f32.tan();
    for inst in &mut scene.instances {
        let depth = rng.range(5.0, 90.0);
        inst.position = Vec3::new(rng.range(-tan, tan) * depth, rng.range(-tan, tan) * depth, -depth);
        inst.scale = 0.01;
    }
    let scene = scene.fit(culler.format());
    let in_cone = run_views(ctx, &culler, &scene, &[frustum], scene.instances.len() as u32, 1).remove(0);
    let in_frustum = run_views(ctx, &culler, &scene, &[without], scene.instances.len() as u32, 1).remove(0);
    assert_views_exact(
        "cone",
        &culler,
        &scene,
        &[frustum],
        std::slice::from_ref(&in_cone),
    );
    // The disc covers π/4 of the square.
    let ratio = in_cone.len() as f64 / in_frustum.len() as f64;
    assert!(
        (0.74..0.83).contains(&ratio),
        "the cone kept {ratio} of the frustum's instances"
    );
}

/// A cone with occlusion culling is refused: an occlusion cull's views are
/// a camera's.
#[test]
fn an_occlusion_cull_refuses_a_cone() {
    let ctx = gpu();
    let culler = posquat_culler(ctx, variants(ctx)[0]);
    let scene = Scene::random(1, 100, Camera::InfiniteReverseZ, None);
    let job = Job::new(ctx, &culler, &scene, 100);
    let history = cull_core::OcclusionHistory::new(&ctx.device, 100).unwrap();
    let cone = SpotCone::new(Vec3::ZERO, Vec3::NEG_Z, 0.5, 10.0).unwrap();
    let frusta = [job.frustum.with_cone(cone)];
    let request = CullRequest::new(&job.input, &job.target, &frusta, job.local_bounds, job.count)
        .occlusion_early(&history);
    let mut encoder = ctx.device.create_command_encoder(&Default::default());
    let result = culler.cull(&mut encoder, &ctx.queue, request);
    // (wgpu's GL backend refuses occlusion culling before looking at the views.)
    assert!(
        matches!(
            result,
            Err(cull_core::CullError::InvalidParameter(_) | cull_core::CullError::UnsupportedBackend { .. })
        ),
        "{result:?}"
    );
}
