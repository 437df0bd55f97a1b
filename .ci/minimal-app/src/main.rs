//! The smallest app using bevy-gpu-cull, with Bevy's features cut to the
//! plugin's own set and two scan variants: it must build (CI checks it).
use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;

fn main() {
    App::new()
        .add_plugins((DefaultPlugins, GpuCullPlugin::default()))
        .add_systems(Startup, setup)
        .run();
}

fn setup(mut commands: Commands, mut meshes: ResMut<Assets<Mesh>>) {
    let instances = (0..1000)
        .map(|i| CulledInstance::new(Vec3::new((i % 40) as f32, 0.0, -((i / 40) as f32)), LinearRgba::WHITE))
        .collect();
    commands.spawn((Mesh3d(meshes.add(Sphere::new(0.4))), GpuCulledInstances::new(instances)));
    commands.spawn((Camera3d::default(), Transform::from_xyz(20.0, 10.0, 15.0)));
}
