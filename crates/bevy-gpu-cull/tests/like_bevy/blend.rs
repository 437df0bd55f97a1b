//! Translucent instances blend as Bevy's translucent meshes do: overlapping
//! cubes of five colors at half opacity, the batch's on the left and the
//! same cubes as Bevy entities (each with its own material, which Bevy
//! sorts back to front one by one) mirrored onto the right, seen from the
//! front, from above and from behind (where back to front is the other
//! way round), also in the other blended alpha modes, with a translucent
//! Bevy wall across both halves in front of
//! the cubes (behind them from behind), which the batch must sort against
//! as a whole as Bevy's cubes do. Unlit, so that the blend order is all
//! that differs.

use super::{MAX_BLOCK_DIFFERENCE, MEAN_BLOCK_DIFFERENCE, SERIAL, block_difference, cube};
use crate::common::{FrameApp, image_target};
use bevy::camera::{ImageRenderTarget, RenderTarget};
use bevy::core_pipeline::oit::OrderIndependentTransparencySettings;
use bevy::prelude::*;
use bevy::render::gpu_readback::Readback;
use bevy_gpu_cull::prelude::*;

const WIDTH: u32 = super::WIDTH;
const HEIGHT: u32 = super::HEIGHT;

/// The left cubes, listed nearest the front camera first, so that a batch
/// drawn in its list's order blends wrongly from the front, and one drawn
/// in reverse wrongly from behind.
fn left_cubes() -> Vec<(Vec3, Color)> {
    let colors = [
        Color::srgba(0.9, 0.1, 0.1, 0.5),
        Color::srgba(0.1, 0.8, 0.1, 0.5),
        Color::srgba(0.1, 0.2, 0.9, 0.5),
        Color::srgba(0.9, 0.8, 0.1, 0.5),
        Color::srgba(0.8, 0.1, 0.8, 0.5),
    ];
    colors
        .into_iter()
        .enumerate()
        .map(|(k, color)| {
            let k = k as f32;
            (Vec3::new(-1.6 + 0.3 * k, 0.6 + 0.15 * k, -0.8 * k), color)
        })
        .collect()
}

fn blended(color: Color, alpha_mode: AlphaMode) -> StandardMaterial {
    StandardMaterial {
        base_color: color,
        alpha_mode,
        unlit: true,
        ..default()
    }
}

fn spawn_scene(world: &mut World, eye: Vec3, oit: bool, mode: AlphaMode) {
    let mesh = world.resource_mut::<Assets<Mesh>>().add(cube());
    let mut materials = world.resource_mut::<Assets<StandardMaterial>>();
    // The batch: white at full opacity, times each instance's color.
    let batch_material = materials.add(blended(Color::WHITE, mode));
    let cubes = left_cubes();
    let entity_materials: Vec<_> = cubes
        .iter()
        .map(|(_, color)| materials.add(blended(*color, mode)))
        .collect();
    let instances = cubes
        .iter()
        .map(|(position, color)| GpuCullInstance::new(*position, color.to_linear()))
        .collect();
    world.spawn((
        Mesh3d(mesh.clone()),
        MeshMaterial3d(batch_material),
        GpuCullInstances::new(instances),
    ));
    let wall_mesh = world
        .resource_mut::<Assets<Mesh>>()
        .add(Cuboid::new(4.4, 1.4, 0.02).mesh().build());
    let wall = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(blended(Color::srgba(0.9, 0.9, 0.9, 0.35), AlphaMode::Blend));
    world.spawn((
        Mesh3d(wall_mesh),
        MeshMaterial3d(wall),
        Transform::from_xyz(0.0, 0.9, 1.2),
    ));
    for ((position, _), material) in cubes.iter().zip(entity_materials) {
        world.spawn((
            Mesh3d(mesh.clone()),
            MeshMaterial3d(material),
            Transform::from_xyz(-position.x, position.y, position.z),
        ));
    }
    let target = image_target(world, WIDTH, HEIGHT);
    let mut camera = world.spawn((
        Camera3d::default(),
        Camera {
            clear_color: ClearColorConfig::Custom(Color::srgb(0.2, 0.2, 0.25)),
            ..default()
        },
        RenderTarget::Image(ImageRenderTarget {
            handle: target.clone(),
            scale_factor: 1.0,
        }),
        Msaa::Off,
        Transform::from_translation(eye).looking_at(Vec3::new(0.0, 0.6, -1.6), Vec3::Y),
    ));
    if oit {
        camera.insert(OrderIndependentTransparencySettings::default());
    }
    world.spawn(Readback::texture(target));
}

fn draw(what: &str, eye: Vec3, oit: bool, mode: AlphaMode) -> Vec<u8> {
    let mut frame_app = FrameApp::new();
    spawn_scene(frame_app.app.world_mut(), eye, oit, mode);
    frame_app.app.finish();
    frame_app.app.cleanup();
    let png = format!("bevy-gpu-cull-like-bevy-blend-{what}.png");
    frame_app.frame_when(WIDTH, HEIGHT, &png, |world| {
        world.resource::<GpuCullStats>().drawn_frames > 5
    })
}

/// Each view's halves match block for block (the tolerance of the other
/// side-by-side tests: the cubes' edges rasterize differently mirrored).
/// Drawn in the list's order instead (no sort), the front view differs by
/// 64.6 of 255 where the cubes overlap; drawn before every other
/// translucent mesh (not sorted as a whole), it differs by 31.4 from
/// behind. Under Bevy's order-independent
/// transparency the batch is not sorted: it composites as Bevy's meshes
/// only if the batch draws through it.
#[test]
fn translucent_instances_blend_back_to_front_as_bevy_meshes() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let front = Vec3::new(0.0, 2.0, 7.0);
    for (what, eye, oit, mode) in [
        ("front", front, false, AlphaMode::Blend),
        ("above", Vec3::new(0.0, 9.0, 1.0), false, AlphaMode::Blend),
        ("behind", Vec3::new(0.0, 2.5, -9.0), false, AlphaMode::Blend),
        ("front-oit", front, true, AlphaMode::Blend),
        ("front-premultiplied", front, false, AlphaMode::Premultiplied),
        ("front-add", front, false, AlphaMode::Add),
        ("front-multiply", front, false, AlphaMode::Multiply),
    ] {
        let frame = draw(what, eye, oit, mode);
        let (max, mean) = block_difference(&frame);
        println!("blend {what}: mirrored blocks differ by at most {max:.1}, {mean:.2} on average");
        assert!(
            max <= MAX_BLOCK_DIFFERENCE && mean <= MEAN_BLOCK_DIFFERENCE,
            "blend seen from {what}: the batch's half differs from Bevy's: largest block difference \
             {max:.1}, mean {mean:.2} (see {})",
            std::env::temp_dir()
                .join(format!("bevy-gpu-cull-like-bevy-blend-{what}.png"))
                .display()
        );
    }
}
