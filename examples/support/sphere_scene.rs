//! The spheres' scene around the field: the same spheres as Bevy's own
//! entities (what `spheres --compare bevy` draws), and the field's light.

use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;

/// The same spheres as Bevy's own entities, batched and culled by Bevy,
/// colored by twelve materials in turn.
pub fn spawn_bevy_spheres(
    commands: &mut Commands,
    instances: &[GpuCullInstance],
    mesh: Handle<Mesh>,
    materials: &mut Assets<StandardMaterial>,
) {
    let palette: Vec<Handle<StandardMaterial>> = (0..12)
        .map(|i| materials.add(StandardMaterial::from(Color::hsl(i as f32 * 30.0, 0.7, 0.55))))
        .collect();
    let entities: Vec<_> = (instances.iter().zip(palette.iter().cycle()))
        .map(|(instance, material)| {
            let place = Transform::from_translation(instance.position);
            (Mesh3d(mesh.clone()), MeshMaterial3d(material.clone()), place)
        })
        .collect();
    commands.spawn_batch(entities);
}

/// The field's sun (casting shadows where asked) and ambient light.
pub fn spawn_sun(commands: &mut Commands, shadow_maps_enabled: bool) {
    commands.spawn((
        DirectionalLight {
            illuminance: 8_000.0,
            shadow_maps_enabled,
            ..default()
        },
        Transform::from_xyz(1.0, 3.0, 2.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    commands.insert_resource(GlobalAmbientLight {
        brightness: 400.0,
        ..default()
    });
}
