//! A batch lives in its entity's space, as a Bevy mesh does: instances are
//! placed relative to the batch entity's `GlobalTransform`, so a batch
//! under a moving parent follows it without an upload, and the cull runs in
//! the batch's own frame, keeping the precision of its local coordinates
//! far from the world's origin.

mod common;

use bevy::camera::{ImageRenderTarget, RenderTarget};
use bevy::core_pipeline::prepass::{DeferredPrepass, DepthPrepass};
use bevy::material::OpaqueRendererMethod;
use bevy::prelude::*;
use bevy::render::gpu_readback::Readback;
use bevy_gpu_cull::prelude::*;
use common::{FrameApp, frame_difference, image_target};

const WIDTH: u32 = 192;
const HEIGHT: u32 = 112;

/// The parent that carries the batch (a ship carrying crates).
#[derive(Component)]
struct Ship;

/// How many frames the ship has moved; it stops at [`SHIP_FRAMES`], so
/// that every app draws its last pose whatever its frame count.
#[derive(Resource, Default)]
struct ShipFrames(u32);

const SHIP_FRAMES: u32 = 40;

/// The ship's pose after `frame` frames: moved and turned every frame.
fn ship_pose(frame: u32) -> Transform {
    let t = frame as f32 * 0.05;
    Transform::from_xyz(1.5 * t.sin(), 0.2 + 0.3 * (1.3 * t).sin(), -3.0 + 1.5 * t.cos())
        .with_rotation(Quat::from_euler(EulerRot::YXZ, 0.9 * t, 0.15 * t.sin(), -0.1 * t))
}

/// Frames the ship stays at its last pose before a frame counts: a frame
/// is read back a few frames after it was drawn.
const SETTLED_FRAMES: u32 = 10;

fn move_ship(mut frames: ResMut<ShipFrames>, mut ships: Query<&mut Transform, With<Ship>>) {
    frames.0 = (frames.0 + 1).min(SHIP_FRAMES + SETTLED_FRAMES);
    for mut transform in &mut ships {
        *transform = ship_pose(frames.0.min(SHIP_FRAMES));
    }
}

/// The crates in the hold: positions, turns and sizes.
fn crates() -> Vec<GpuCullInstance> {
    (0..12)
        .map(|i| {
            let (x, z) = ((i % 4) as f32 - 1.5, (i / 4) as f32 - 1.0);
            GpuCullInstance::new(
                Vec3::new(1.1 * x, 0.1 * (i % 3) as f32, 1.2 * z),
                LinearRgba::WHITE,
            )
            .with_rotation(Quat::from_euler(
                EulerRot::XYZ,
                0.2 * i as f32,
                0.5 * i as f32,
                0.1,
            ))
            .with_scale(0.5 + 0.07 * i as f32)
        })
        .collect()
}

/// The hold's transform under the ship: offset, turned, and scaled
/// unevenly (so that its crates' world transforms shear, as Bevy's
/// hierarchy composes them).
fn hold() -> Transform {
    Transform::from_xyz(0.4, 0.6, 0.2)
        .with_rotation(Quat::from_rotation_z(0.25))
        .with_scale(Vec3::new(1.3, 0.8, 1.1))
}

/// The ship scene, its crates one batch (`batch`) or Bevy children.
fn ship_scene(world: &mut World, batch: bool) -> Entity {
    let mesh = world
        .resource_mut::<Assets<Mesh>>()
        .add(Cuboid::new(0.8, 0.6, 1.0).mesh().build());
    let material = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial {
            base_color: Color::srgb(0.7, 0.45, 0.2),
            perceptual_roughness: 0.7,
            ..default()
        });
    let ship = world.spawn((Ship, ship_pose(0), Visibility::default())).id();
    let hold = if batch {
        world
            .spawn((
                Mesh3d(mesh),
                MeshMaterial3d(material),
                GpuCullInstances::new(crates()),
                hold(),
                ChildOf(ship),
            ))
            .id()
    } else {
        let hold = world.spawn((hold(), Visibility::default(), ChildOf(ship))).id();
        for c in crates() {
            world.spawn((
                Mesh3d(mesh.clone()),
                MeshMaterial3d(material.clone()),
                Transform {
                    translation: c.position,
                    rotation: c.rotation,
                    scale: Vec3::splat(c.scale),
                },
                ChildOf(hold),
            ));
        }
        hold
    };
    stage(
        world,
        Transform::from_xyz(0.0, 4.0, 6.0).looking_at(Vec3::new(0.0, 0.0, -3.0), Vec3::Y),
    );
    hold
}

/// Ground, sun and a camera at `eye` that renders into a readable image.
fn stage(world: &mut World, eye: Transform) {
    let ground_mesh = world
        .resource_mut::<Assets<Mesh>>()
        .add(Plane3d::default().mesh().size(40.0, 40.0));
    let ground = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial::from_color(Color::srgb(0.5, 0.55, 0.5)));
    world.spawn((
        Mesh3d(ground_mesh),
        MeshMaterial3d(ground),
        Transform::from_xyz(0.0, -1.0, 0.0),
    ));
    world.spawn((
        DirectionalLight {
            shadow_maps_enabled: true,
            illuminance: 8000.0,
            ..default()
        },
        Transform::from_xyz(3.0, 10.0, 4.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    let target = image_target(world, WIDTH, HEIGHT);
    world.spawn((
        Camera3d::default(),
        Camera {
            clear_color: ClearColorConfig::Custom(Color::srgb(0.3, 0.4, 0.6)),
            ..default()
        },
        RenderTarget::Image(ImageRenderTarget {
            handle: target.clone(),
            scale_factor: 1.0,
        }),
        Msaa::Off,
        eye,
    ));
    world.spawn(Readback::texture(target));
}

/// The ship's frame after it stopped, with the crates as a batch or as
/// Bevy children; for the batch, also the instances uploaded by the
/// time the ship started moving and by the end.
fn draw_ship(batch: bool) -> (Vec<u8>, Option<(u64, u64)>) {
    let mut frame_app = FrameApp::new();
    let app = &mut frame_app.app;
    app.init_resource::<ShipFrames>();
    ship_scene(app.world_mut(), batch);
    app.finish();
    app.cleanup();
    // Until the batch is up and drawn, the ship stays where it was spawned.
    let mut uploaded_before = 0;
    if batch {
        for _ in 0..2000 {
            app.update();
            let stats = app.world().resource::<GpuCullStats>();
            if stats.drawn_frames > 2 {
                uploaded_before = stats.uploaded_instances;
                break;
            }
        }
        assert!(uploaded_before > 0, "the batch was never drawn");
    }
    app.add_systems(Update, move_ship.before(TransformSystems::Propagate));
    let png = format!("bevy-gpu-cull-ship-{}.png", if batch { "batch" } else { "bevy" });
    let frame = frame_app.frame_when(WIDTH, HEIGHT, &png, |world| {
        world.resource::<ShipFrames>().0 == SHIP_FRAMES + SETTLED_FRAMES
            && (!batch || world.resource::<GpuCullStats>().drawn_frames > 5)
    });
    let uploaded_after = frame_app
        .app
        .world()
        .resource::<GpuCullStats>()
        .uploaded_instances;
    (frame, batch.then_some((uploaded_before, uploaded_after)))
}

/// Blocks may differ by at most this much (of 255). The batch's vertices
/// are the same products as Bevy's in another order (the ship's and hold's
/// transforms composed by Bevy's hierarchy on the CPU, each crate's applied
/// first in the shader), so only pixels along edges may round to the other
/// side: 0.0 measured on lavapipe, for the ship and for the mirror images.
/// Broken, they differ by far more: 172.9 with the batch's transform left
/// out of the vertex stage, 164.1 without the draw of the instances that
/// wind backwards.
const MAX_BLOCK_DIFFERENCE: f64 = 4.0;

#[test]
fn a_batch_under_a_moving_parent_draws_as_bevy_children() {
    let (batch, uploads) = draw_ship(true);
    let (bevy, _) = draw_ship(false);
    let (max, mean) = frame_difference(&batch, &bevy, WIDTH);
    println!("ship: frames differ by at most {max:.1}, {mean:.2} on average");
    assert!(
        max <= MAX_BLOCK_DIFFERENCE,
        "the batch under the moving ship differs from Bevy's children by {max:.1} (see bevy-gpu-cull-ship-*.png in {})",
        std::env::temp_dir().display()
    );
    let (before, after) = uploads.expect("the batch's uploads");
    assert_eq!(before, after, "the ship's motion uploaded instances");
    // The crates are in the frame at all (not the background or the ground).
    let crate_blocks = common::blocks(&bevy, WIDTH)
        .iter()
        .filter(|b| b[0] > b[2] + 30.0)
        .count();
    assert!(crate_blocks > 20, "{crate_blocks} blocks show crates");
}

/// Where the chunk lies: a million units from the origin on two axes.
const CHUNK: Vec3 = Vec3::new(1.0e6, 0.0, -1.0e6);

/// The instances of a chunk, in its own coordinates: a grid of varied
/// turns and sizes, which the camera sees in part.
fn chunk_instances() -> Vec<GpuCullInstance> {
    (0..4096)
        .map(|i| {
            let (x, z) = ((i % 64) as f32 - 32.0, (i / 64) as f32 - 32.0);
            GpuCullInstance::new(
                Vec3::new(0.75 * x, 0.05 * (i % 7) as f32, 0.75 * z),
                LinearRgba::WHITE,
            )
            .with_rotation(Quat::from_rotation_y(0.37 * i as f32))
            .with_scale(0.3 + 0.01 * (i % 13) as f32)
        })
        .collect()
}

/// Stages a camera at `eye` and readies the app: the camera's entity.
fn stage_and_ready(app: &mut App, eye: Transform) -> Entity {
    let world = app.world_mut();
    stage(world, eye);
    let camera = world
        .query_filtered::<Entity, With<Camera3d>>()
        .single(world)
        .unwrap();
    app.finish();
    app.cleanup();
    camera
}

/// `camera`'s frustum and size metric as the plugin takes them into
/// `batch`'s frame.
fn views_in_batch_frame(
    world: &mut World,
    camera: Entity,
    batch: Entity,
) -> (cull_core::Frustum, cull_core::SizeMetric) {
    let (cam, cam_transform) = world
        .query::<(&Camera, &GlobalTransform)>()
        .get(world, camera)
        .unwrap();
    let (clip_from_view, world_from_view) = (cam.clip_from_view(), cam_transform.to_matrix());
    let batch_transform = world.get::<GlobalTransform>(batch).unwrap().to_matrix();
    let frame = cull_core::LocalFrame::new(batch_transform).unwrap();
    let frustum = frame
        .frustum_from_view(clip_from_view, world_from_view, None)
        .unwrap();
    (frustum, frame.size_metric(clip_from_view, world_from_view))
}

/// A chunk a million units from the origin, with a camera near it: the
/// plugin's count is the CPU reference's for the camera taken into the
/// chunk's frame (`cull_core::LocalFrame`), within the borderline spheres.
#[test]
fn a_chunk_far_from_the_origin_is_culled_in_its_frame() {
    let mut frame_app = FrameApp::new();
    let app = &mut frame_app.app;
    let world = app.world_mut();
    let mesh = world
        .resource_mut::<Assets<Mesh>>()
        .add(Sphere::new(0.5).mesh().ico(1).unwrap());
    let batch = world
        .spawn((
            Mesh3d(mesh),
            GpuCullInstances::new(chunk_instances()),
            Transform::from_translation(CHUNK).with_rotation(Quat::from_rotation_y(0.3)),
        ))
        .id();
    let eye = Transform::from_translation(CHUNK + Vec3::new(3.0, 6.0, 9.0)).looking_at(CHUNK, Vec3::Y);
    let camera = stage_and_ready(app, eye);
    let mut counts = Vec::new();
    for _ in 0..3000 {
        app.update();
        let count = app.world().resource::<GpuCullStats>().visible_for(camera, batch);
        counts.push(count);
        if counts.len() > 40 && counts.iter().rev().take(10).all(|&c| c == count && c > 0) {
            break;
        }
    }
    let count = *counts.last().unwrap();
    let world = app.world_mut();
    let (frustum, _) = views_in_batch_frame(world, camera, batch);
    let format = world.resource::<GpuCullSettings>().format;
    let bounds = *world.get::<GpuCullBounds>(batch).unwrap();
    let instances = world.get::<GpuCullInstances>(batch).unwrap();
    let reference = instances.reference_on_cpu(bounds, &frustum, format).unwrap();
    let (must, may) = (reference.visible.len() as u32, reference.borderline.len() as u32);
    println!("far chunk: {count} kept; the reference keeps {must} and {may} borderline");
    assert!(
        (must..=must + may).contains(&count),
        "the plugin kept {count}; the reference in the chunk's frame keeps {must} and {may} borderline"
    );
    assert!(must > 100 && must + may < 4000, "the camera sees {must} of 4096");
}

/// Levels of detail of a batch under a turned, unevenly scaled transform
/// far from the origin: each level's count is the CPU reference's for the
/// camera's frustum and size metric taken into the batch's frame
/// (`LocalFrame::size_metric`).
#[test]
fn levels_of_detail_are_sized_in_the_batch_frame() {
    let mut frame_app = FrameApp::new();
    let app = &mut frame_app.app;
    let world = app.world_mut();
    let mut meshes = world.resource_mut::<Assets<Mesh>>();
    let fine = meshes.add(Sphere::new(0.5).mesh().ico(2).unwrap());
    let coarse = meshes.add(Sphere::new(0.5).mesh().ico(0).unwrap());
    const THRESHOLDS: [f32; 2] = [0.08, 0.02];
    let batch = world
        .spawn((
            Mesh3d(fine.clone()),
            GpuCullInstances::new(chunk_instances()),
            GpuCullLod::new([(fine, THRESHOLDS[0]), (coarse, THRESHOLDS[1])]),
            Transform::from_translation(CHUNK)
                .with_rotation(Quat::from_rotation_y(0.3))
                .with_scale(Vec3::new(1.5, 1.2, 1.8)),
        ))
        .id();
    let eye = Transform::from_translation(CHUNK + Vec3::new(3.0, 6.0, 12.0)).looking_at(CHUNK, Vec3::Y);
    let camera = stage_and_ready(app, eye);
    let mut last = Vec::new();
    for _ in 0..3000 {
        app.update();
        let stats = app.world().resource::<GpuCullStats>();
        let counts = stats
            .visible_per_level
            .get(&(camera, batch))
            .cloned()
            .unwrap_or_default();
        let settled = counts == last && counts.len() == 2 && stats.culled_frames > 20;
        last = counts;
        if settled {
            break;
        }
    }
    let world = app.world_mut();
    let (frustum, metric) = views_in_batch_frame(world, camera, batch);
    let levels = frustum.detail_levels(metric, &THRESHOLDS).unwrap();
    let format = world.resource::<GpuCullSettings>().format;
    let bounds = *world.get::<GpuCullBounds>(batch).unwrap();
    let instances = world.get::<GpuCullInstances>(batch).unwrap();
    for (k, level) in levels.iter().enumerate() {
        let reference = instances.reference_on_cpu(bounds, level, format).unwrap();
        let (must, may) = (reference.visible.len() as u32, reference.borderline.len() as u32);
        let got = last.get(k).copied().unwrap_or(u32::MAX);
        println!("level {k}: {got} kept; the reference keeps {must} and {may} borderline");
        assert!(
            (must..=must + may).contains(&got),
            "level {k}: the plugin kept {got}; the reference in the batch's frame keeps {must} and {may} borderline"
        );
        assert!(must > 50, "level {k} holds only {must}");
    }
}

/// A tetrahedron without a mirror symmetry: a mirror image of it is told
/// apart from a turned copy.
const TETRAHEDRON: [Vec3; 4] = [
    Vec3::new(0.0, 0.9, 0.0),
    Vec3::new(-0.5, -0.3, 0.45),
    Vec3::new(0.7, -0.3, 0.3),
    Vec3::new(0.1, -0.4, -0.6),
];

/// Batches of tetrahedra, each under its transform: one that mirrors, one
/// that does not (each with upright and mirror-image instances, negative
/// scales), and one of mirror images only.
fn mirror_batches() -> Vec<(Transform, Vec<GpuCullInstance>)> {
    let instances = |signs: [f32; 6]| -> Vec<GpuCullInstance> {
        signs
            .iter()
            .enumerate()
            .map(|(i, sign)| {
                let (x, z) = ((i % 3) as f32 - 1.0, (i / 3) as f32 - 0.5);
                GpuCullInstance::new(Vec3::new(1.3 * x, 0.0, 1.4 * z), LinearRgba::WHITE)
                    .with_rotation(Quat::from_euler(
                        EulerRot::YXZ,
                        0.9 * i as f32,
                        0.3,
                        0.2 * i as f32,
                    ))
                    .with_scale(sign * (0.8 + 0.05 * i as f32))
            })
            .collect()
    };
    let mixed = [1.0, -1.0, 1.0, -1.0, -1.0, 1.0];
    vec![
        (
            Transform::from_xyz(-2.6, 0.0, -2.5)
                .with_rotation(Quat::from_rotation_y(0.4))
                .with_scale(Vec3::new(-1.1, 1.1, 1.1)),
            instances(mixed),
        ),
        (Transform::from_xyz(2.4, 0.0, -2.5), instances(mixed)),
        (Transform::from_xyz(0.0, 0.0, -6.0), instances([-1.0; 6])),
    ]
}

/// The mirror scene: the batches, or each of their instances as a Bevy
/// mesh built where the instance lies in the world, wound outwards; with
/// a `deferred` camera and material, or forward.
fn mirror_scene(world: &mut World, batch: bool, deferred: bool) {
    let material = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial {
            base_color: Color::srgb(0.3, 0.7, 0.35),
            perceptual_roughness: 0.5,
            opaque_render_method: if deferred {
                OpaqueRendererMethod::Deferred
            } else {
                OpaqueRendererMethod::Forward
            },
            ..default()
        });
    let shape = Tetrahedron::new(TETRAHEDRON[0], TETRAHEDRON[1], TETRAHEDRON[2], TETRAHEDRON[3]);
    for (transform, instances) in mirror_batches() {
        if batch {
            let mesh = world.resource_mut::<Assets<Mesh>>().add(shape.mesh().build());
            world.spawn((
                Mesh3d(mesh),
                MeshMaterial3d(material.clone()),
                GpuCullInstances::new(instances),
                transform,
            ));
            continue;
        }
        for instance in instances {
            let world_from_mesh = transform.to_matrix()
                * Mat4::from_scale_rotation_translation(
                    Vec3::splat(instance.scale),
                    instance.rotation,
                    instance.position,
                );
            let [a, b, c, d] = TETRAHEDRON.map(|v| world_from_mesh.transform_point3(v));
            let mesh = world
                .resource_mut::<Assets<Mesh>>()
                .add(Tetrahedron::new(a, b, c, d).mesh().build());
            world.spawn((Mesh3d(mesh), MeshMaterial3d(material.clone())));
        }
    }
    stage(
        world,
        Transform::from_xyz(0.0, 4.5, 5.0).looking_at(Vec3::new(0.0, 0.0, -3.5), Vec3::Y),
    );
    if deferred {
        let camera = world
            .query_filtered::<Entity, With<Camera3d>>()
            .single(world)
            .unwrap();
        world.entity_mut(camera).insert((DepthPrepass, DeferredPrepass));
    }
}

fn draw_mirrors(batch: bool, deferred: bool) -> Vec<u8> {
    let mut frame_app = FrameApp::new();
    mirror_scene(frame_app.app.world_mut(), batch, deferred);
    frame_app.app.finish();
    frame_app.app.cleanup();
    let png = format!(
        "bevy-gpu-cull-mirrors-{}{}.png",
        if batch { "batch" } else { "bevy" },
        if deferred { "-deferred" } else { "" }
    );
    frame_app.frame_when(WIDTH, HEIGHT, &png, |world| {
        !batch || world.resource::<GpuCullStats>().drawn_frames > 5
    })
}

/// Mirror images, by a batch's transform, an instance's negative scale or
/// both, are lit and back-face culled as outward-wound meshes of the same
/// shapes: the batch draws the instances of each winding with its own
/// front face, in the main pass, the shadow map and (below) the deferred
/// G-buffer.
#[test]
fn mirrored_batches_and_instances_draw_as_correctly_wound_meshes() {
    assert_mirrors_match(false);
}

/// The same in a deferred camera's G-buffer, whose normals a wrongly wound
/// draw turns inside out.
#[test]
fn mirrored_instances_enter_the_g_buffer_correctly_wound() {
    assert_mirrors_match(true);
}

fn assert_mirrors_match(deferred: bool) {
    let batch = draw_mirrors(true, deferred);
    let bevy = draw_mirrors(false, deferred);
    let (max, mean) = frame_difference(&batch, &bevy, WIDTH);
    println!("mirrors (deferred: {deferred}): frames differ by at most {max:.1}, {mean:.2} on average");
    assert!(
        max <= MAX_BLOCK_DIFFERENCE,
        "the mirrored instances differ from outward-wound meshes by {max:.1} (see bevy-gpu-cull-mirrors-*.png in {})",
        std::env::temp_dir().display()
    );
}
