//! A low sun shadows the ground through a batch as through Bevy's meshes:
//! each cascade of a batch keeps only the casters whose shadow can fall on
//! what the camera sees at the cascade's depths, and the long shadows of
//! pillars standing outside the view, toward the sun, reach into it. Two
//! frames: every pillar a batch instance, then a Bevy mesh.

use super::{assert_light_frames_match, draw_light_frame, spawn_ground};
use crate::common::FrameApp;
use bevy::light::CascadeShadowConfigBuilder;
use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;

/// Pillars beside the camera's view on both sides, none in it: those
/// toward the sun (+X) throw their shadows across the view, the others
/// away from it.
fn pillars() -> Vec<Vec3> {
    let columns = [-17.0, -12.0, 10.0, 12.5, 15.0, 17.5];
    columns
        .iter()
        .flat_map(|&x| (0..9).map(move |k| Vec3::new(x, 2.0, -16.0 + 3.0 * k as f32)))
        .collect()
}

fn draw_sun(batch: bool) -> Vec<u8> {
    let mut frame_app = FrameApp::new();
    let world = frame_app.app.world_mut();
    // A small map: a texel spans several pixels of the ground, so that
    // what the filter reads around a receiver shows.
    world.insert_resource(bevy::light::DirectionalLightShadowMap { size: 256 });
    spawn_ground(world, 80.0, Color::srgb(0.8, 0.8, 0.75));
    world.spawn((
        DirectionalLight {
            shadow_maps_enabled: true,
            illuminance: 8000.0,
            ..default()
        },
        // The first cascade's minimum distance beyond the nearest ground in
        // view: Bevy reads that cascade nearer than it too.
        CascadeShadowConfigBuilder {
            num_cascades: 2,
            minimum_distance: 5.0,
            first_cascade_far_bound: 9.0,
            maximum_distance: 30.0,
            ..default()
        }
        .build(),
        Transform::from_xyz(8.0, 3.0, 2.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    let mesh = world
        .resource_mut::<Assets<Mesh>>()
        .add(Cuboid::new(0.4, 4.0, 0.4).mesh().build());
    let material = world
        .resource_mut::<Assets<StandardMaterial>>()
        .add(StandardMaterial::from(Color::srgb(0.9, 0.3, 0.2)));
    if batch {
        let instances = pillars()
            .into_iter()
            .map(|p| GpuCullInstance::new(p, LinearRgba::WHITE))
            .collect();
        world.spawn((
            Mesh3d(mesh),
            MeshMaterial3d(material),
            GpuCullInstances::new(instances),
        ));
    } else {
        for p in pillars() {
            world.spawn((
                Mesh3d(mesh.clone()),
                MeshMaterial3d(material.clone()),
                Transform::from_translation(p),
            ));
        }
    }
    let camera = Transform::from_xyz(0.0, 3.0, 6.0).looking_at(Vec3::new(0.0, 0.0, -4.0), Vec3::Y);
    draw_light_frame(frame_app, camera, "sun", batch)
}

/// The frames agree block for block. (Cascades culled to the camera's
/// slices alone, without the sweep toward the sun, lose the pillars'
/// shadows: blocks differ by 106. On lavapipe, volumes without the margin
/// for the shadow filter draw the same frames: what the filter reads
/// across their edge does not show at this size.)
#[test]
fn a_low_sun_shadows_as_bevy_meshes_from_casters_outside_the_view() {
    assert_light_frames_match("sun", draw_sun);
}
