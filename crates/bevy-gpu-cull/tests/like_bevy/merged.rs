//! Batches drawn together look like Bevy's meshes: ten batches of one
//! mesh, two of each of five materials, are culled and drawn together
//! (`GpuCullSettings::merge_batches`): all ten in one draw where Bevy's
//! `StandardMaterial` is bindless (its materials share a bind group), the
//! two of each material otherwise (lavapipe). Each instance is shaded with
//! its own batch's material, lit and shadowed as the same cubes drawn as
//! Bevy meshes. Two frames: every cube a batch instance, then a Bevy mesh.

use super::{assert_light_frames_match, draw_light_frame, spawn_ground};
use crate::common::FrameApp;
use bevy::prelude::*;
use bevy::render::renderer::RenderDevice;
use bevy::render::{Render, RenderApp, RenderSystems};
use bevy_gpu_cull::GpuCullOpaqueBatches;
use bevy_gpu_cull::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// The batches' colors, one material each.
const COLORS: [Color; 5] = [
    Color::srgb(0.9, 0.2, 0.1),
    Color::srgb(0.1, 0.8, 0.2),
    Color::srgb(0.15, 0.3, 0.9),
    Color::srgb(0.9, 0.85, 0.1),
    Color::srgb(0.8, 0.2, 0.8),
];

/// The plugin's opaque draws in the latest frame that had any.
static OPAQUE_DRAWS: AtomicUsize = AtomicUsize::new(0);
/// Whether the device takes Bevy's `StandardMaterial` bindless.
static BINDLESS: AtomicBool = AtomicBool::new(false);

fn count_opaque_draws(draws: Res<GpuCullOpaqueBatches>, device: Res<RenderDevice>) {
    let count = draws.iter().map(|(_, items)| items.len()).sum();
    if count > 0 {
        OPAQUE_DRAWS.store(count, Ordering::Relaxed);
    }
    let bindless = bevy::pbr::material_uses_bindless_resources::<StandardMaterial>(&device);
    BINDLESS.store(bindless, Ordering::Relaxed);
}

/// Batches per material.
const BATCHES_PER_COLOR: usize = 2;

/// Two cubes per batch, the batches interleaved across the rows.
fn cubes(batch: usize) -> Vec<Vec3> {
    (0..2)
        .map(|k| {
            let i = k * COLORS.len() * BATCHES_PER_COLOR + batch;
            Vec3::new((i % 5) as f32 * 1.6 - 3.2, 0.5, (i / 5) as f32 * -2.0)
        })
        .collect()
}

fn draw_colors(batch: bool) -> Vec<u8> {
    let mut frame_app = FrameApp::new();
    frame_app
        .app
        .sub_app_mut(RenderApp)
        .add_systems(Render, count_opaque_draws.in_set(RenderSystems::PhaseSort));
    let world = frame_app.app.world_mut();
    spawn_ground(world, 40.0, Color::srgb(0.6, 0.6, 0.55));
    world.spawn((
        DirectionalLight {
            shadow_maps_enabled: true,
            illuminance: 8000.0,
            ..default()
        },
        Transform::from_xyz(3.0, 8.0, 4.0).looking_at(Vec3::new(0.0, 0.0, -3.0), Vec3::Y),
    ));
    let mesh = world
        .resource_mut::<Assets<Mesh>>()
        .add(Cuboid::new(0.9, 0.9, 0.9));
    let materials: Vec<_> = COLORS
        .iter()
        .map(|c| {
            world
                .resource_mut::<Assets<StandardMaterial>>()
                .add(StandardMaterial::from(*c))
        })
        .collect();
    for k in 0..COLORS.len() * BATCHES_PER_COLOR {
        let material = materials[k % COLORS.len()].clone();
        if batch {
            let instances = cubes(k)
                .into_iter()
                .map(|p| GpuCullInstance::new(p, LinearRgba::WHITE))
                .collect();
            world.spawn((
                Mesh3d(mesh.clone()),
                MeshMaterial3d(material),
                GpuCullInstances::new(instances),
            ));
        } else {
            for p in cubes(k) {
                world.spawn((
                    Mesh3d(mesh.clone()),
                    MeshMaterial3d(material.clone()),
                    Transform::from_translation(p),
                ));
            }
        }
    }
    let camera = Transform::from_xyz(0.0, 4.0, 5.0).looking_at(Vec3::new(0.0, 0.0, -3.0), Vec3::Y);
    draw_light_frame(frame_app, camera, "drawn-together", batch)
}

/// The frames agree block for block, and the batches were drawn together.
/// (With every instance given the first member's material, blocks differ
/// by about 150.)
#[test]
fn batches_drawn_together_shade_each_with_its_own_material_as_bevy_meshes() {
    assert_light_frames_match("drawn-together", draw_colors);
    let bindless = BINDLESS.load(Ordering::Relaxed);
    let expected = if bindless { 1 } else { COLORS.len() };
    println!("drawn-together: bindless StandardMaterial: {bindless}, {expected} draws expected");
    // The batch frame's last frame (the Bevy frame has no draws).
    assert_eq!(
        OPAQUE_DRAWS.load(Ordering::Relaxed),
        expected,
        "the batches were not drawn together"
    );
}
