//! The forest: trees and rocks scattered over a ground, as two batches (or
//! as Bevy entities with `--compare bevy`), the sun, and a camera that
//! circles them.

use super::support;
use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;
use support::SceneArgs;
use support::scenery::{flat_tree, rock, scattered, streaks, tree_cone};

/// Which batch, to count each.
#[derive(Component, Clone, Copy, PartialEq)]
pub enum Kind {
    Trees,
    Rocks,
}

/// A quarter as many rocks as trees.
pub fn rocks_of(trees: usize) -> usize {
    trees / 4
}

/// The ground, to tell it from the trees and rocks in Bevy's shadow lists.
#[derive(Component)]
pub struct Ground;

/// The smallest size a level before the last is drawn down to (trees' cone
/// of four sides): `--min-pixels` must stay below it.
pub const SMALLEST_LEVEL_SIZE: f32 = 0.02;

/// `--min-pixels`: with levels of detail, instances whose bounding sphere
/// spans fewer pixels of the frame's height are not drawn.
#[derive(Resource, Clone, Copy)]
pub struct MinPixels(pub f32);

/// The smallest size the rocks' icosphere is drawn down to.
const NEAR_ROCK_SIZE: f32 = 0.03;

/// The size in pixels (bounding sphere across) below which `--as-pixels`
/// draws a pixel per instance.
const PIXEL_LEVEL_PIXELS: f32 = 4.0;

/// `--as-pixels`: below four pixels, a level drawn as a pixel per instance.
#[derive(Resource, Clone, Copy)]
pub struct AsPixels(pub bool);

pub fn setup(
    mut commands: Commands,
    args: Res<SceneArgs>,
    min_pixels: Res<MinPixels>,
    as_pixels: Res<AsPixels>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
    mut images: ResMut<Assets<Image>>,
) {
    let radius = (args.count as f32).sqrt() * 2.0;
    let mut textured = |rgb, perceptual_roughness| {
        let base_color_texture = Some(images.add(streaks(rgb)));
        materials.add(StandardMaterial {
            base_color_texture,
            perceptual_roughness,
            ..default()
        })
    };
    let (tree_material, rock_material) = (textured([40, 120, 50], 0.9), textured([130, 125, 120], 1.0));
    let trees = scattered(args.count, radius, 1, |p, s, turn| {
        Transform::from_translation(p + Vec3::Y * 1.5 * s)
            .with_rotation(Quat::from_rotation_y(turn))
            .with_scale(Vec3::splat(s))
    });
    let rocks = scattered(rocks_of(args.count), radius, 2, |p, s, turn| {
        Transform::from_translation(p + Vec3::new(0.9, 0.2, 0.4))
            .with_rotation(Quat::from_rotation_y(turn) * Quat::from_rotation_x(0.4))
            .with_scale(Vec3::splat(0.5 * s))
    });
    let (tree_mesh, rock_mesh) = (meshes.add(tree_cone(8)), meshes.add(rock(1)));
    let (tree_levels, rock_levels) = levels(
        (&tree_mesh, &rock_mesh),
        min_pixels.0 / args.height as f32,
        as_pixels.0.then_some(PIXEL_LEVEL_PIXELS / args.height as f32),
        &mut meshes,
    );
    let kinds = [
        (Kind::Trees, trees, tree_mesh, tree_material, tree_levels),
        (Kind::Rocks, rocks, rock_mesh, rock_material, rock_levels),
    ];
    for (kind, list, mesh, material, levels) in kinds {
        if args.compare_bevy {
            // Bevy's own path: an entity per tree and rock (one mesh and
            // material per kind), batched, culled and shadowed by Bevy.
            let entity = |i: &GpuCullInstance| {
                let transform = Transform::from_translation(i.position)
                    .with_rotation(i.rotation)
                    .with_scale(Vec3::splat(i.scale));
                (Mesh3d(mesh.clone()), MeshMaterial3d(material.clone()), transform)
            };
            commands.spawn_batch(list.iter().map(entity).collect::<Vec<_>>());
            continue;
        }
        let mut batch = commands.spawn((
            Mesh3d(mesh),
            MeshMaterial3d(material),
            GpuCullInstances::new(list),
            kind,
        ));
        if args.lod {
            batch.insert(levels);
        }
        if args.cells {
            // Sorted into cells; only the cells in view read where that pays.
            batch.insert(GpuCullCells::default());
        }
    }
    // The ground: an ordinary Bevy mesh that receives the instances' shadows.
    let ground = Plane3d::default().mesh().size(radius * 2.5, radius * 2.5);
    commands.spawn((
        Mesh3d(meshes.add(ground)),
        MeshMaterial3d(materials.add(StandardMaterial::from(Color::srgb(0.35, 0.3, 0.2)))),
        Ground,
    ));
    commands.spawn((
        DirectionalLight {
            illuminance: 12_000.0,
            shadow_maps_enabled: true,
            ..default()
        },
        Transform::from_xyz(4.0, 10.0, 3.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    spawn_camera(&mut commands, &args, &mut images);
}

/// Levels of detail (`--lod`): the cone of eight sides down to a tenth of
/// the screen's height (bounding sphere across), one of four down to a
/// fiftieth, then a flat tree turned toward the camera; rocks: the
/// icosphere, then an icosahedron, down to `min_last` (`--min-pixels` of the
/// frame's height): smaller instances are not drawn, as real renderers drop
/// what covers less than a pixel (without MSAA such a triangle only lights
/// the pixels whose centers it happens to cover, and a GPU rasterizes many
/// such triangles on the same few pixels slowly). With `--as-pixels`, below
/// `pixel_size` a pixel per instance: where the far trees stand that small
/// they stand packed, and a pixel each covers the band they fill as their
/// triangles do.
fn levels(
    (tree_mesh, rock_mesh): (&Handle<Mesh>, &Handle<Mesh>),
    min_last: f32,
    pixel_size: Option<f32>,
    meshes: &mut Assets<Mesh>,
) -> (GpuCullLod, GpuCullLod) {
    let above_pixels = pixel_size.map_or(min_last, |size| size.max(min_last));
    let flat_tree = meshes.add(flat_tree());
    let mut tree_levels = vec![
        GpuCullLodLevel::new(tree_mesh.clone(), 0.1),
        GpuCullLodLevel::new(meshes.add(tree_cone(4)), SMALLEST_LEVEL_SIZE),
    ];
    // In a frame so small that the pixels reach the coarser levels' sizes,
    // the pixels follow the level before (sizes must descend).
    if above_pixels < SMALLEST_LEVEL_SIZE {
        tree_levels.push(GpuCullLodLevel::new(flat_tree.clone(), above_pixels).facing_camera());
    }
    let rock_far = meshes.add(rock(0));
    let mut rock_levels = vec![GpuCullLodLevel::new(rock_mesh.clone(), NEAR_ROCK_SIZE)];
    if above_pixels < NEAR_ROCK_SIZE {
        rock_levels.push(GpuCullLodLevel::new(rock_far.clone(), above_pixels));
    }
    if pixel_size.is_some_and(|size| min_last < size) {
        tree_levels.push(
            GpuCullLodLevel::new(flat_tree, min_last)
                .facing_camera()
                .as_pixels(),
        );
        rock_levels.push(GpuCullLodLevel::new(rock_far, min_last).as_pixels());
    }
    (GpuCullLod::new(tree_levels), GpuCullLod::new(rock_levels))
}

/// The camera, with the options asked for.
fn spawn_camera(commands: &mut Commands, args: &SceneArgs, images: &mut Assets<Image>) {
    let mut camera = commands.spawn(Camera3d::default());
    if args.occlusion {
        // With --compare bevy, Bevy's own occlusion culling of its entities
        // (which GpuCullOcclusion requires).
        camera.insert(GpuCullOcclusion);
    }
    if args.no_cpu_culling {
        camera.insert(bevy::camera::visibility::NoCpuCulling);
    }
    if args.depth_prepass {
        // The main pass then shades each pixel once: the batches are drawn
        // into the prepass too.
        camera.insert(bevy::core_pipeline::prepass::DepthPrepass);
    }
    if args.headless {
        camera.insert(support::headless_target(images, args.width, args.height));
    }
}

/// The camera circles the forest at tree height, looking across it (fixed
/// in a headless run).
pub fn circle(time: Res<Time>, args: Res<SceneArgs>, mut camera: Query<&mut Transform, With<Camera3d>>) {
    let radius = (args.count as f32).sqrt() * 2.0;
    let t = if args.headless {
        0.6
    } else {
        time.elapsed_secs() * 0.05
    };
    let eye = Vec3::new(t.cos(), 0.0, t.sin()) * radius * 0.6 + Vec3::Y * 6.0;
    for mut transform in &mut camera {
        *transform = Transform::from_translation(eye).looking_at(Vec3::ZERO, Vec3::Y);
    }
}
