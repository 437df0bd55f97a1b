//! A batch looks like the Bevy meshes beside it. Each scene is drawn once,
//! with the batch's instances on the left half of the frame and the same
//! meshes as ordinary Bevy entities mirrored onto the right half (camera,
//! light, ground and fog are symmetric about the camera's vertical plane),
//! and the two halves are compared. A textured material, whose left and
//! right faces are not mirror images of each other, is compared in two
//! frames instead: every object a batch instance, then every object a Bevy
//! mesh.
//!
//! The comparison is of 4x4-pixel block means, mirrored: rasterization is
//! not mirror-symmetric at triangle edges (the top-left rule breaks ties
//! one way), and screen-space ambient occlusion samples a per-pixel noise
//! that is not either, so single pixels along silhouettes differ while
//! blocks agree. A feature the batch lacks shows as whole objects of
//! another color (the fog-less batch cube of a foggy scene differs by about
//! 90 of 255 in every block it covers).

#[path = "like_bevy/blend.rs"]
mod blend;
mod common;
#[path = "like_bevy/merged.rs"]
mod merged;
#[path = "like_bevy/pixel_viewport.rs"]
mod pixel_viewport;
#[path = "like_bevy/sun_reach.rs"]
mod sun_reach;

use bevy::camera::{Hdr, ImageRenderTarget, RenderTarget};
use bevy::core_pipeline::core_3d::Opaque3d;
use bevy::core_pipeline::deferred::{AlphaMask3dDeferred, Opaque3dDeferred};
use bevy::core_pipeline::prepass::{DeferredPrepass, DepthPrepass, NormalPrepass};
use bevy::core_pipeline::tonemapping::Tonemapping;
use bevy::image::Image;
use bevy::material::OpaqueRendererMethod;
use bevy::pbr::{DistanceFog, FogFalloff, ScreenSpaceAmbientOcclusion};
use bevy::post_process::bloom::Bloom;
use bevy::prelude::*;
use bevy::render::gpu_readback::Readback;
use bevy::render::render_phase::ViewBinnedRenderPhases;
use bevy::render::render_resource::TextureFormat;
use bevy::render::{Render, RenderApp, RenderSystems};
use bevy_gpu_cull::prelude::*;
use common::{FrameApp, image_target, pair_difference};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

const WIDTH: u32 = 192;
const HEIGHT: u32 = 112;
/// One app at a time: lavapipe has two cores to share.
static SERIAL: Mutex<()> = Mutex::new(());

/// Where the instances stand, on the left (the batch); Bevy's meshes stand
/// at the mirror images (x negated). Near and far, for fog to tell apart.
const LEFT: [Vec3; 6] = [
    Vec3::new(-1.2, 0.5, 2.0),
    Vec3::new(-2.8, 0.5, -1.0),
    Vec3::new(-1.6, 0.5, -5.0),
    Vec3::new(-4.0, 0.5, -9.0),
    Vec3::new(-2.2, 0.5, -15.0),
    Vec3::new(-5.5, 0.5, -22.0),
];

/// Who draws which object.
#[derive(Clone, Copy, PartialEq)]
enum Split {
    /// The batch on the left half, Bevy's meshes mirrored onto the right.
    Mirrored,
    /// Every object (both halves' positions) as a batch, or as Bevy's meshes.
    All { batch: bool },
}

/// What the scene's camera and material are.
struct Look {
    what: &'static str,
    camera: fn(&mut EntityWorldMut),
    material: fn(&mut World) -> StandardMaterial,
    mesh: fn() -> Mesh,
}

/// Draws `look`'s scene until every pipeline has compiled and the batch is
/// drawn, and returns the frame (rows of `WIDTH` RGBA pixels).
fn draw(look: &Look, split: Split) -> Vec<u8> {
    let mut frame_app = FrameApp::new();
    frame_app
        .app
        .sub_app_mut(RenderApp)
        .add_systems(Render, count_batch_items.in_set(RenderSystems::PhaseSort));
    spawn_scene(frame_app.app.world_mut(), look, split);
    frame_app.app.finish();
    frame_app.app.cleanup();
    frame_app.frame_when(WIDTH, HEIGHT, &png_name(look, split), |world| {
        world.resource::<GpuCullStats>().drawn_frames > 5 || split == Split::All { batch: false }
    })
}

fn spawn_scene(world: &mut World, look: &Look, split: Split) {
    let mesh = world.resource_mut::<Assets<Mesh>>().add((look.mesh)());
    let standard = (look.material)(world);
    let material = world.resource_mut::<Assets<StandardMaterial>>().add(standard);
    let ground_mesh = world
        .resource_mut::<Assets<Mesh>>()
        .add(Plane3d::default().mesh().size(80.0, 80.0));
    let ground = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial {
            base_color: Color::srgb(0.55, 0.55, 0.5),
            perceptual_roughness: 0.9,
            ..default()
        });
    world.spawn((Mesh3d(ground_mesh), MeshMaterial3d(ground)));
    let mirrored = LEFT.map(|p| Vec3::new(-p.x, p.y, p.z));
    let (batched, entities): (Vec<Vec3>, Vec<Vec3>) = match split {
        Split::Mirrored => (LEFT.to_vec(), mirrored.to_vec()),
        Split::All { batch: true } => ([LEFT, mirrored].concat(), Vec::new()),
        Split::All { batch: false } => (Vec::new(), [LEFT, mirrored].concat()),
    };
    let instances = batched
        .iter()
        .map(|&position| GpuCullInstance::new(position, LinearRgba::WHITE))
        .collect();
    world.spawn((
        Mesh3d(mesh.clone()),
        MeshMaterial3d(material.clone()),
        GpuCullInstances::new(instances),
    ));
    for position in entities {
        world.spawn((
            Mesh3d(mesh.clone()),
            MeshMaterial3d(material.clone()),
            Transform::from_translation(position),
        ));
    }
    // A sun in the camera's vertical plane, so that light and shadows are
    // mirror-symmetric too.
    world.spawn((
        DirectionalLight {
            shadow_maps_enabled: true,
            illuminance: 8000.0,
            ..default()
        },
        Transform::from_xyz(0.0, 10.0, 4.0).looking_at(Vec3::new(0.0, 0.0, -6.0), Vec3::Y),
    ));
    let target = image_target(world, WIDTH, HEIGHT);
    let mut camera = world.spawn((
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
        Transform::from_xyz(0.0, 2.5, 8.0).looking_at(Vec3::new(0.0, 0.3, -6.0), Vec3::Y),
    ));
    (look.camera)(&mut camera);
    world.spawn(Readback::texture(target));
}

/// The plugin's items (the only non-mesh items) in the views' main
/// opaque phases and deferred G-buffer phases, last frame.
static MAIN_PASS_ITEMS: AtomicUsize = AtomicUsize::new(0);
static G_BUFFER_ITEMS: AtomicUsize = AtomicUsize::new(0);

fn count_batch_items(
    main: Res<ViewBinnedRenderPhases<Opaque3d>>,
    opaque_deferred: Res<ViewBinnedRenderPhases<Opaque3dDeferred>>,
    alpha_mask_deferred: Res<ViewBinnedRenderPhases<AlphaMask3dDeferred>>,
) {
    let main = main.values().map(|phase| phase.non_mesh_items.len()).sum();
    let deferred = opaque_deferred
        .values()
        .map(|phase| phase.non_mesh_items.len())
        .chain(
            alpha_mask_deferred
                .values()
                .map(|phase| phase.non_mesh_items.len()),
        )
        .sum();
    MAIN_PASS_ITEMS.store(main, Ordering::Relaxed);
    G_BUFFER_ITEMS.store(deferred, Ordering::Relaxed);
}

fn png_name(look: &Look, split: Split) -> String {
    let how = match split {
        Split::Mirrored => "",
        Split::All { batch: true } => "-batch",
        Split::All { batch: false } => "-bevy",
    };
    format!("bevy-gpu-cull-like-bevy-{}{how}.png", look.what)
}

/// The mean color of each 4x4 block of the frame's left half, and of the
/// mirrored block of its right half.
fn mirrored_blocks(frame: &[u8]) -> Vec<([f64; 3], [f64; 3])> {
    let (w, h) = (WIDTH as usize, HEIGHT as usize);
    let pixel = |x: usize, y: usize, c: usize| f64::from(frame[(y * w + x) * 4 + c]);
    let mut blocks = Vec::new();
    for by in (0..h).step_by(4) {
        for bx in (0..w / 2).step_by(4) {
            let mut left = [0.0; 3];
            let mut right = [0.0; 3];
            for y in by..by + 4 {
                for x in bx..bx + 4 {
                    for c in 0..3 {
                        left[c] += pixel(x, y, c) / 16.0;
                        right[c] += pixel(w - 1 - x, y, c) / 16.0;
                    }
                }
            }
            blocks.push((left, right));
        }
    }
    blocks
}

/// The largest and mean difference between the left half's blocks and the
/// right half's mirrored ones.
fn block_difference(frame: &[u8]) -> (f64, f64) {
    pair_difference(&mirrored_blocks(frame))
}

/// The largest and mean difference between two frames' blocks.
fn frame_difference(a: &[u8], b: &[u8]) -> (f64, f64) {
    common::frame_difference(a, b, WIDTH)
}

/// Blocks may differ by at most this much (of 255). Measured on lavapipe:
/// 0.3 under fog, 0.4 with emissive and bloom, 0.0 between the textured
/// frames, and 1.9 under ambient occlusion, whose per-pixel noise is not
/// mirror-symmetric; three times that leaves room for other drivers'
/// rounding. What a missing feature does is far more: no fog on the batch
/// changes blocks by 72, no ambient occlusion by 10.2 (checked by taking
/// the feature's shader def out of the batch's pipeline). A spot light's
/// frames: 0.0 measured; its view's cone three texels narrower than the
/// light's edge loses casters just inside it, 25.3.
const MAX_BLOCK_DIFFERENCE: f64 = 6.0;
/// The mean difference over all blocks (of 255): at most 0.15 measured.
const MEAN_BLOCK_DIFFERENCE: f64 = 0.5;

fn assert_halves_match(look: &Look) -> Vec<u8> {
    let frame = draw(look, Split::Mirrored);
    let (max, mean) = block_difference(&frame);
    println!(
        "{}: mirrored blocks differ by at most {max:.1}, {mean:.2} on average",
        look.what
    );
    let png = std::env::temp_dir().join(png_name(look, Split::Mirrored));
    assert!(
        max <= MAX_BLOCK_DIFFERENCE && mean <= MEAN_BLOCK_DIFFERENCE,
        "{}: the batch's half differs from Bevy's: largest block difference {max:.1}, mean {mean:.2} (see {})",
        look.what,
        png.display()
    );
    frame
}

/// An 8x8 checkerboard of colors `a` and `b`.
fn checker(a: [u8; 4], b: [u8; 4], srgb: bool) -> Image {
    let data: Vec<u8> = (0..64)
        .flat_map(|i| if (i % 8 + i / 8) % 2 == 0 { a } else { b })
        .collect();
    Image::new(
        bevy::render::render_resource::Extent3d {
            width: 8,
            height: 8,
            depth_or_array_layers: 1,
        },
        bevy::render::render_resource::TextureDimension::D2,
        data,
        if srgb {
            TextureFormat::Rgba8UnormSrgb
        } else {
            TextureFormat::Rgba8Unorm
        },
        bevy::asset::RenderAssetUsages::RENDER_WORLD,
    )
}

/// Draws `look`'s scene twice, every object a batch instance, then a Bevy
/// mesh (for scenes that are not mirror images of themselves), and asserts
/// the frames' blocks agree.
fn assert_frames_match(look: &Look) {
    let batch = draw(look, Split::All { batch: true });
    let bevy = draw(look, Split::All { batch: false });
    let (max, mean) = frame_difference(&batch, &bevy);
    println!(
        "{}: frames differ by at most {max:.1}, {mean:.2} on average",
        look.what
    );
    let png = |batch| std::env::temp_dir().join(png_name(look, Split::All { batch }));
    assert!(
        max <= MAX_BLOCK_DIFFERENCE && mean <= MEAN_BLOCK_DIFFERENCE,
        "{}: the batch's frame differs from Bevy's: largest block difference {max:.1}, mean {mean:.2} \
         (see {} and {})",
        look.what,
        png(true).display(),
        png(false).display(),
    );
}

fn cube() -> Mesh {
    Cuboid::new(1.0, 1.0, 1.0).mesh().build()
}

fn sphere() -> Mesh {
    Sphere::new(0.6).mesh().uv(32, 16)
}

fn plain_red(_: &mut World) -> StandardMaterial {
    StandardMaterial {
        base_color: Color::srgb(0.8, 0.15, 0.1),
        perceptual_roughness: 0.6,
        ..default()
    }
}

#[test]
fn distance_fog_shades_the_batch_as_bevy_meshes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let fogged = Look {
        what: "fog",
        camera: |camera| {
            camera.insert(DistanceFog {
                color: Color::srgb(0.3, 0.4, 0.6),
                falloff: FogFalloff::Linear {
                    start: 4.0,
                    end: 30.0,
                },
                ..default()
            });
        },
        material: plain_red,
        mesh: cube,
    };
    let with_fog = assert_halves_match(&fogged);
    // A forward camera draws its opaque batches first, from outside Bevy's
    // `Opaque3d` phase, which then holds none of them.
    assert_eq!(
        MAIN_PASS_ITEMS.load(Ordering::Relaxed),
        0,
        "the batch's items in Bevy's main opaque phase"
    );
    // The fog is there at all: Bevy's half changes with it.
    let clear = Look {
        what: "fog-off",
        camera: |_| {},
        ..fogged
    };
    let without_fog = draw(&clear, Split::Mirrored);
    let (changed, _) = frame_difference(&with_fog, &without_fog);
    assert!(
        changed > 2.0 * MAX_BLOCK_DIFFERENCE,
        "the fog changes no block by more than {changed:.1}"
    );
}

#[test]
fn emissive_and_bloom_shade_the_batch_as_bevy_meshes() {
    let look = Look {
        what: "emissive-bloom",
        camera: |camera| {
            camera.insert((Hdr, Bloom::NATURAL, Tonemapping::TonyMcMapface));
        },
        material: |_| StandardMaterial {
            base_color: Color::srgb(0.1, 0.1, 0.1),
            // Bright enough to bloom at the camera's default exposure, as
            // Bevy weighs emissive by it (emissive_exposure_weight).
            emissive: LinearRgba::rgb(4000.0, 1500.0, 300.0),
            ..default()
        },
        mesh: sphere,
    };
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let frame = assert_halves_match(&look);
    // The glow is there: some blocks of the spheres are near white.
    let bright = mirrored_blocks(&frame)
        .iter()
        .filter(|(_, r)| r.iter().all(|&c| c > 200.0))
        .count();
    assert!(
        bright > 4,
        "the emissive spheres do not glow ({bright} bright blocks)"
    );
}

#[test]
fn ambient_occlusion_shades_the_batch_as_bevy_meshes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    // Ambient light strong enough for its occlusion to show in the creases
    // where the cubes meet the ground.
    let occluded = Look {
        what: "ssao",
        camera: |camera| {
            camera.insert((
                DepthPrepass,
                NormalPrepass,
                ScreenSpaceAmbientOcclusion::default(),
                AmbientLight {
                    brightness: 6000.0,
                    ..default()
                },
            ));
        },
        material: plain_red,
        mesh: cube,
    };
    let with_ssao = assert_halves_match(&occluded);
    // The occlusion is there at all: Bevy's half changes with it.
    let open = Look {
        what: "ssao-off",
        camera: |camera| {
            camera.insert(AmbientLight {
                brightness: 6000.0,
                ..default()
            });
        },
        ..occluded
    };
    let without_ssao = draw(&open, Split::Mirrored);
    let (changed, _) = frame_difference(&with_ssao, &without_ssao);
    println!("ssao: on and off differ by at most {changed:.1}");
    assert!(
        changed > 2.0 * MAX_BLOCK_DIFFERENCE,
        "ambient occlusion changes no block by more than {changed:.1}"
    );
}

/// An alpha-masked material cuts the batch's shadow and depth prepass as
/// it cuts a Bevy mesh's: the checkered cubes' shadows on the ground are
/// checkered, and the ground shows through the holes under a depth
/// prepass. (The checker is not mirror-symmetric on a cube's faces: two
/// frames.)
#[test]
fn an_alpha_mask_cuts_the_batch_shadow_and_prepass_as_bevy_meshes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let look = Look {
        what: "masked",
        camera: |camera| {
            camera.insert(DepthPrepass);
        },
        material: |world| StandardMaterial {
            base_color_texture: Some(world.resource_mut::<Assets<Image>>().add(checker(
                [230, 60, 40, 255],
                [230, 60, 40, 0],
                true,
            ))),
            alpha_mode: AlphaMode::Mask(0.5),
            ..default()
        },
        mesh: cube,
    };
    assert_frames_match(&look);
}

/// Alpha to coverage under 4x MSAA: the translucent spheres cover the
/// samples Bevy's meshes cover (drawn in the opaque phase, as Bevy draws
/// them). Two frames, since MSAA's sample positions are not mirror images
/// of each other (mirrored halves differ by up to 5.0). Drawn opaque
/// instead, the batch's spheres differ by 67.6.
#[test]
fn alpha_to_coverage_covers_the_batch_as_bevy_meshes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let look = Look {
        what: "alpha-to-coverage",
        camera: |camera| {
            camera.insert(Msaa::Sample4);
        },
        material: |_| StandardMaterial {
            base_color: Color::srgba(0.8, 0.15, 0.1, 0.4),
            alpha_mode: AlphaMode::AlphaToCoverage,
            ..default()
        },
        mesh: sphere,
    };
    assert_frames_match(&look);
}

#[test]
fn a_deferred_camera_draws_the_batch_into_its_g_buffer_as_bevy_meshes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let look = Look {
        what: "deferred",
        camera: |camera| {
            camera.insert((DepthPrepass, DeferredPrepass));
        },
        material: |world| StandardMaterial {
            opaque_render_method: OpaqueRendererMethod::Deferred,
            ..plain_red(world)
        },
        mesh: cube,
    };
    assert_halves_match(&look);
    // Drawn as Bevy draws a deferred mesh: into the G-buffer, shaded by
    // Bevy's deferred lighting, not by a forward draw of its own.
    let (g_buffer, main) = (
        G_BUFFER_ITEMS.load(Ordering::Relaxed),
        MAIN_PASS_ITEMS.load(Ordering::Relaxed),
    );
    println!("deferred: {g_buffer} batch draws in the G-buffer, {main} in the main pass");
    assert_eq!(
        (g_buffer, main),
        (1, 0),
        "the batch's draws (G-buffer, main pass)"
    );
}

#[test]
fn a_textured_normal_mapped_material_shades_the_batch_as_bevy_meshes() {
    let look = Look {
        what: "textured",
        camera: |camera| {
            camera.insert((Hdr, Tonemapping::AgX));
        },
        material: |world| {
            let mut images = world.resource_mut::<Assets<Image>>();
            StandardMaterial {
                base_color_texture: Some(images.add(checker([230, 200, 60, 255], [40, 90, 200, 255], true))),
                // Tilted normals on alternate squares.
                normal_map_texture: Some(images.add(checker(
                    [128, 128, 255, 255],
                    [200, 128, 200, 255],
                    false,
                ))),
                metallic_roughness_texture: Some(images.add(checker(
                    [0, 60, 255, 255],
                    [0, 230, 0, 255],
                    false,
                ))),
                metallic: 1.0,
                perceptual_roughness: 1.0,
                ..default()
            }
        },
        mesh: || {
            Cuboid::new(1.0, 1.0, 1.0)
                .mesh()
                .build()
                .with_generated_tangents()
                .expect("a cube has UVs and normals")
        },
    };
    // A cube's textures are not mirror images of each other on its left
    // and right faces: the scene is drawn twice, every object a batch
    // instance, then a Bevy mesh, and the frames are compared.
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    assert_frames_match(&look);
}

/// A spot light's half angle and height in [`draw_spot`]'s scene, and the
/// texels of its shadow map (a small map, so that a texel's filtering
/// spans pixels on the ground).
const SPOT_ANGLE: f32 = 0.6;
const SPOT_HEIGHT: f32 = 6.0;
const SPOT_MAP_TEXELS: u32 = 64;

/// Draws a hard-edged spot light (inner angle = outer angle) shining down on
/// the ground, with small spheres between them: inside its cone (one a
/// texel from its edge), and just outside its edge toward the corners of
/// its square shadow map (where Bevy's frustum keeps them), `k` texels out
/// for several `k`. `batch`:
/// the spheres are one batch, else Bevy meshes.
fn draw_spot(batch: bool) -> Vec<u8> {
    let mut frame_app = FrameApp::new();
    let world = frame_app.app.world_mut();
    world.insert_resource(bevy::light::DirectionalLightShadowMap {
        size: SPOT_MAP_TEXELS as usize,
    });
    world.insert_resource(GlobalAmbientLight {
        brightness: 40.0,
        ..default()
    });
    spawn_ground(world, 40.0, Color::srgb(0.8, 0.8, 0.8));
    let light = Vec3::Y * SPOT_HEIGHT;
    world.spawn((
        SpotLight {
            shadow_maps_enabled: true,
            intensity: 4.0e6,
            range: 20.0,
            outer_angle: SPOT_ANGLE,
            inner_angle: SPOT_ANGLE,
            ..default()
        },
        Transform::from_translation(light).looking_at(Vec3::ZERO, Vec3::Z),
    ));
    // A texel of the map, as an angle at the edge: the map spans
    // 2 tan(angle) over its texels at unit distance.
    let edge = SPOT_ANGLE.tan();
    let texel = 2.0 * edge / SPOT_MAP_TEXELS as f32 / (1.0 + edge * edge);
    let radius = 0.12;
    let mut positions = Vec::new();
    for (i, azimuth) in [45.0f32, 135.0, 225.0, 315.0].iter().enumerate() {
        let across = Vec3::new(azimuth.to_radians().cos(), 0.0, azimuth.to_radians().sin());
        let distance = 3.0 + i as f32 * 0.4;
        // Well inside the cone; inside it a texel from its edge (its shadow
        // at the lit disc's rim); then just outside the edge by k texels.
        let mut angles = vec![SPOT_ANGLE * 0.5, SPOT_ANGLE - texel - radius / distance];
        angles.extend([0.5, 1.0, 2.0, 4.0].map(|k| SPOT_ANGLE + k * texel + radius / distance));
        for angle in angles {
            let direction = Vec3::NEG_Y * angle.cos() + across * angle.sin();
            positions.push(light + direction * distance);
        }
    }
    let mesh = world
        .resource_mut::<Assets<Mesh>>()
        .add(Sphere::new(radius).mesh().uv(16, 8));
    let material = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial::from(Color::srgb(0.9, 0.3, 0.2)));
    if batch {
        let instances = positions
            .iter()
            .map(|&p| GpuCullInstance::new(p, LinearRgba::WHITE))
            .collect();
        world.spawn((
            Mesh3d(mesh),
            MeshMaterial3d(material),
            GpuCullInstances::new(instances),
        ));
    } else {
        for p in positions {
            world.spawn((
                Mesh3d(mesh.clone()),
                MeshMaterial3d(material.clone()),
                Transform::from_translation(p),
            ));
        }
    }
    let camera = Transform::from_xyz(0.0, 9.0, 3.0).looking_at(Vec3::ZERO, Vec3::Y);
    draw_light_frame(frame_app, camera, "spot", batch)
}

/// Spawns a square ground `size` across, of plain `color`, the shadows'
/// receiver in the light frames.
fn spawn_ground(world: &mut World, size: f32, color: Color) {
    let mesh = world
        .resource_mut::<Assets<Mesh>>()
        .add(Plane3d::default().mesh().size(size, size));
    let material = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial::from(color));
    world.spawn((Mesh3d(mesh), MeshMaterial3d(material)));
}

/// Spawns a camera at `camera` on a black background into `frame_app`'s
/// scene of `what` and draws it until every pipeline has compiled (and,
/// for the `batch` frame, the batch is drawn); returns the frame.
fn draw_light_frame(mut frame_app: FrameApp, camera: Transform, what: &str, batch: bool) -> Vec<u8> {
    let world = frame_app.app.world_mut();
    let target = image_target(world, WIDTH, HEIGHT);
    world.spawn((
        Camera3d::default(),
        Camera {
            clear_color: ClearColorConfig::Custom(Color::BLACK),
            ..default()
        },
        RenderTarget::Image(ImageRenderTarget {
            handle: target.clone(),
            scale_factor: 1.0,
        }),
        Msaa::Off,
        camera,
    ));
    world.spawn(Readback::texture(target));
    frame_app.app.finish();
    frame_app.app.cleanup();
    let how = if batch { "batch" } else { "bevy" };
    frame_app.frame_when(
        WIDTH,
        HEIGHT,
        &format!("bevy-gpu-cull-like-bevy-{what}-{how}.png"),
        |world| world.resource::<GpuCullStats>().drawn_frames > 5 || !batch,
    )
}

/// Asserts the frames `draw` gives with every object a batch instance and
/// with every object a Bevy mesh agree block for block.
fn assert_light_frames_match(what: &str, draw: fn(bool) -> Vec<u8>) {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let batch = draw(true);
    let bevy = draw(false);
    let (max, mean) = frame_difference(&batch, &bevy);
    println!("{what}: frames differ by at most {max:.1}, {mean:.2} on average");
    let png = |how| std::env::temp_dir().join(format!("bevy-gpu-cull-like-bevy-{what}-{how}.png"));
    assert!(
        max <= MAX_BLOCK_DIFFERENCE && mean <= MEAN_BLOCK_DIFFERENCE,
        "{what}: the batch's frame differs from Bevy's: largest block difference {max:.1}, mean {mean:.2} (see {} and {})",
        png("batch").display(),
        png("bevy").display(),
    );
}

/// A spot light shadows the ground through a batch as through Bevy's
/// meshes, up to the edge of its cone: the light's view culls the batch by
/// the cone it lights (tighter than its square shadow map), and casters
/// just outside the edge, which Bevy's shadow filter reads from inside it,
/// are kept (the cone is widened by eight texels). Two frames: every sphere
/// a batch instance, then a Bevy mesh. (On lavapipe a cone not widened at
/// all draws the same frames: what the filter reads across the edge does
/// not show at this size; one three texels too narrow does not.)
#[test]
fn a_spot_light_shadows_as_bevy_meshes_up_to_its_cone_edge() {
    assert_light_frames_match("spot", draw_spot);
}
