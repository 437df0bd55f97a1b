//! The spheres' scene around the field: the same spheres as Bevy's own
//! entities (what `spheres --compare bevy` draws), and the field's light.

use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;

/// How the field's spheres are colored, the same on both paths, so that
/// the plugin and Bevy's entity path draw the same picture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SphereColors {
    /// Twelve materials dealt in turn: twelve batches of white instances,
    /// or Bevy's entities with twelve materials.
    Palette,
    /// Each sphere its own color by its place ([`super::sphere_levels::sphere_field`]):
    /// one batch with the instances' colors, or Bevy's entities with a
    /// material each (Bevy's only way to draw that picture).
    Position,
}

/// Parses `palette` or `position`.
pub fn parse_sphere_colors(value: &str) -> Result<SphereColors, String> {
    match value {
        "palette" => Ok(SphereColors::Palette),
        "position" => Ok(SphereColors::Position),
        _ => Err(format!("`{value}`: the colors are `palette` or `position`")),
    }
}

/// The twelve materials of [`SphereColors::Palette`].
pub fn sphere_palette(materials: &mut Assets<StandardMaterial>) -> Vec<Handle<StandardMaterial>> {
    (0..12)
        .map(|i| materials.add(StandardMaterial::from(Color::hsl(i as f32 * 30.0, 0.7, 0.55))))
        .collect()
}

/// The same spheres as Bevy's own entities, batched and culled by Bevy,
/// colored as `colors` says.
pub fn spawn_bevy_spheres(
    commands: &mut Commands,
    instances: &[GpuCullInstance],
    mesh: Handle<Mesh>,
    materials: &mut Assets<StandardMaterial>,
    colors: SphereColors,
) {
    let palette = sphere_palette(materials);
    let entities: Vec<_> = (instances.iter().enumerate())
        .map(|(i, instance)| {
            let material = match colors {
                SphereColors::Palette => palette[i % palette.len()].clone(),
                SphereColors::Position => {
                    let [r, g, b, a] = instance.color;
                    materials.add(StandardMaterial::from(Color::linear_rgba(r, g, b, a)))
                }
            };
            let place = Transform::from_translation(instance.position);
            (Mesh3d(mesh.clone()), MeshMaterial3d(material), place)
        })
        .collect();
    commands.spawn_batch(entities);
}

/// The same spheres as batches: one per palette material, of white
/// instances, or one of the instances as they are (each its color).
/// Returns the batches.
pub fn spawn_sphere_batches(
    commands: &mut Commands,
    instances: Vec<GpuCullInstance>,
    mesh: Handle<Mesh>,
    materials: &mut Assets<StandardMaterial>,
    colors: SphereColors,
) -> Vec<Entity> {
    if colors == SphereColors::Position {
        return vec![
            commands
                .spawn((Mesh3d(mesh), GpuCullInstances::new(instances)))
                .id(),
        ];
    }
    let palette = sphere_palette(materials);
    let mut dealt = vec![Vec::new(); palette.len()];
    for (i, instance) in instances.into_iter().enumerate() {
        dealt[i % palette.len()].push(instance.with_color(Color::WHITE));
    }
    (dealt.into_iter().zip(palette))
        .map(|(instances, material)| {
            let batch = (Mesh3d(mesh.clone()), MeshMaterial3d(material));
            commands.spawn((batch, GpuCullInstances::new(instances))).id()
        })
        .collect()
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
