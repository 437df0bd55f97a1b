//! Directional cascades culled to their receivers' reach
//! (`Frustum::from_shadow_receivers`, up to six planes of any orientation):
//! the GPU's sets equal the CPU reference for every variant (both forms of
//! the ordered one), format and output kind of the topic's kernels, at sizes
//! 0, 1 and non-multiples of the workgroup; four cascades of one camera in
//! one pass, in the world, in a mirrored and scaled frame, and with the
//! camera far from the origin, the instances given in a frame near it (as
//! the Bevy plugin culls a batch). Instances are scattered around the
//! camera's view, where the cascades' planes cut through them.

use crate::harness::*;
use cull_core::scene::{Scene, SceneRng};
use cull_core::{Frustum, InstanceFormat, LocalFrame, OutputKind, ShadowReceivers};
use glam::{Mat4, Quat, Vec3};

const SIZES: [usize; 5] = [0, 1, 257, 4099, 70_001];
/// Cascade depths, as Bevy's default four (overlapping by a fifth).
const DEPTHS: [(f32, f32); 4] = [(0.1, 5.0), (4.0, 15.0), (12.0, 40.0), (32.0, 100.0)];

/// The camera's position in the world, far from the origin or not.
fn camera_position(far: bool) -> Vec3 {
    if far {
        Vec3::new(-1.5e5, 40.0, 2.5e5)
    } else {
        Vec3::new(0.0, 6.0, 0.0)
    }
}

/// A camera looking across the ground with the sun high to one side: its
/// four cascades' volumes in `frame`.
fn cascades(frame: &LocalFrame, far: bool) -> Vec<Frustum> {
    let world_from_view = Mat4::from_rotation_translation(Quat::from_rotation_x(-0.15), camera_position(far));
    DEPTHS
        .iter()
        .map(|&(near, far_depth)| {
            let receivers = ShadowReceivers {
                clip_from_view: Mat4::perspective_infinite_reverse_rh(0.8, 16.0 / 9.0, 0.1),
                world_from_view,
                near,
                far: far_depth,
                light_direction: Vec3::new(-0.4, -1.0, -0.3),
                margin: 0.05 * far_depth / 5.0,
            };
            frame.shadow_receivers(&receivers).unwrap()
        })
        .collect()
}

/// A random scene moved around the camera (in the frame's coordinates):
/// instances up to 120 units across the ground, 10 below to 30 above it;
/// every 41st with a NaN position.
fn scene_around(seed: u64, count: usize, format: InstanceFormat, frame: &LocalFrame, far: bool) -> Scene {
    let mut scene = Scene::random(seed, count, Camera::InfiniteReverseZ, None).fit(format);
    let mut rng = SceneRng::new(seed ^ 0x5A4D);
    let camera = camera_position(far);
    for (i, inst) in scene.instances.iter_mut().enumerate() {
        let world = camera
            + Vec3::new(
                rng.range(-120.0, 120.0),
                rng.range(-16.0, 24.0),
                rng.range(-120.0, 40.0),
            );
        inst.position = frame.local_point(world.as_dvec3()).as_vec3();
        if i % 41 == 3 {
            inst.position.x = f32::NAN;
        }
    }
    scene
}

fn check_all(output: OutputKind) {
    let ctx = gpu();
    let mirrored = mirrored_frame();
    let far_away = LocalFrame::new(Mat4::from_translation(camera_position(true))).unwrap();
    let kernels = topic_kernels(ctx, output);
    for &(variant, tuning, format) in &kernels {
        let culler = views_culler(ctx, variant, format, output, tuning, DEPTHS.len() as u32);
        let form = form_name(&culler);
        for (s, &size) in SIZES.iter().enumerate() {
            let (frame, far) = match s % 3 {
                0 => (LocalFrame::IDENTITY, false),
                1 => (mirrored, false),
                _ => (far_away, true),
            };
            let frusta = cascades(&frame, far);
            assert!(frusta.iter().all(|f| f.planes().len() >= 5));
            let scene = scene_around(s as u64 + 1300, size, format, &frame, far);
            let what = format!(
                "{variant:?} ({form}) {format:?} {output:?} n={size} frame {}",
                s % 3
            );
            let capacity = size as u32 + 33;
            let survivors = run_views(ctx, &culler, &scene, &frusta, capacity, DEPTHS.len() as u32);
            assert_views_exact(&what, &culler, &scene, &frusta, &survivors);
            if size >= 4099 {
                // The planes cut through the scene: some kept, some not.
                let kept: usize = survivors.iter().map(Vec::len).sum();
                assert!(kept > 0 && kept < size * DEPTHS.len(), "{what}: {kept} kept");
            }
        }
    }
}

#[test]
fn cascades_culled_to_their_receivers_match_the_cpu_indices() {
    check_all(OutputKind::Indices);
}

#[test]
fn cascades_culled_to_their_receivers_match_the_cpu_instances() {
    check_all(OutputKind::Instances);
}
