//! The smallest app: forty thousand cubes in one batch, culled on the GPU
//! and drawn with one indirect draw. A batch is an entity with a mesh, a
//! material and a list of instances (`GpuCullInstances`); the plugin culls
//! it for every camera and light that sees it, and draws it with Bevy's
//! own material pipeline.
//!
//! ```text
//! cargo run --release --example minimal
//! cargo run --release --example minimal -- --headless --screenshot minimal.png
//! ```

mod support;

use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;

/// Forty thousand cubes in one batch, culled on the GPU.
#[derive(argh::FromArgs)]
#[argh(help_triggers("-h", "--help", "help"))]
struct Flags {
    /// cubes (default 40000; 1e6 works)
    #[argh(option, default = "40_000", from_str_fn(support::parse_count))]
    count: usize,
    /// render offscreen, without a window, for --frames frames, then exit
    #[argh(switch)]
    headless: bool,
    /// frames to render headless once the scene is ready (default 30)
    #[argh(option, default = "30")]
    frames: u32,
    /// headless: save the last frame to this PNG file
    #[argh(option)]
    screenshot: Option<std::path::PathBuf>,
    /// the frame's size, WxH (default 1280x720; 480x270 headless)
    #[argh(option, from_str_fn(support::parse_size_flag))]
    size: Option<(u32, u32)>,
    /// headless: the summary as one JSON line
    #[argh(switch)]
    json: bool,
}

fn main() {
    let flags: Flags = argh::from_env();
    support::example_app("minimal", &support::scene_args!(flags))
        // The plugin: culling and drawing every batch.
        .add_plugins(GpuCullPlugin::default())
        .add_systems(Startup, setup)
        .add_systems(Update, (turn_camera, support::finish_headless))
        .run();
}

fn setup(
    mut commands: Commands,
    args: Res<support::SceneArgs>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
    mut images: ResMut<Assets<Image>>,
) {
    // A square of cubes, each with its own place, turn, size and color.
    let side = (args.count as f32).sqrt().ceil() as usize;
    let instances: Vec<GpuCullInstance> = (0..args.count)
        .map(|i| {
            let (x, z) = (
                (i % side) as f32 - side as f32 / 2.0,
                (i / side) as f32 - side as f32 / 2.0,
            );
            let transform = Transform::from_xyz(x * 2.0, 0.0, z * 2.0)
                .with_rotation(Quat::from_rotation_y(i as f32))
                .with_scale(Vec3::splat(0.6 + 0.4 * (i as f32 * 0.37).sin().abs()));
            let color = Color::hsl(((x + z) * 3.0).rem_euclid(360.0), 0.6, 0.5);
            GpuCullInstance::from_transform(&transform, color)
        })
        .collect();
    // The batch: one entity. Its Transform (required by GpuCullInstances,
    // here the identity) would move the whole batch, as a mesh's moves its
    // vertices.
    commands.spawn((
        Mesh3d(meshes.add(Cuboid::new(1.0, 1.0, 1.0))),
        MeshMaterial3d(materials.add(StandardMaterial::default())),
        GpuCullInstances::new(instances),
    ));
    commands.spawn((
        DirectionalLight::default(),
        Transform::from_xyz(3.0, 10.0, 5.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    let mut camera = commands.spawn(Camera3d::default());
    if args.headless {
        camera.insert(support::headless_target(&mut images, args.width, args.height));
    }
}

/// The camera circles above the cubes, looking at a point ahead of it (still
/// in a headless run): most cubes are out of view, and are not drawn.
fn turn_camera(
    time: Res<Time>,
    args: Res<support::SceneArgs>,
    mut camera: Query<&mut Transform, With<Camera3d>>,
) {
    let t = if args.headless {
        1.0
    } else {
        time.elapsed_secs() * 0.1
    };
    let radius = (args.count as f32).sqrt() * 0.5;
    let eye = Vec3::new(t.cos() * radius, 12.0, t.sin() * radius);
    let ahead = Vec3::new((t + 0.5).cos(), 0.0, (t + 0.5).sin()) * radius;
    for mut transform in &mut camera {
        *transform = Transform::from_translation(eye).looking_at(ahead, Vec3::Y);
    }
}
