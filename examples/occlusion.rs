//! Occlusion culling on the GPU: a field of spheres behind a row of walls.
//! The walls are ordinary Bevy meshes; the camera has `GpuCullOcclusion`,
//! which brings Bevy's depth prepass and two-phase occlusion culling. Each
//! frame the plugin first draws what was visible last frame, builds a depth
//! pyramid from it (Bevy's), then culls every instance against the pyramid:
//! the spheres behind the walls are not drawn, the ones seen through the
//! gaps are. A sphere that comes into view is drawn in the frame it does.
//!
//! ```text
//! cargo run --release --example occlusion
//! cargo run --release --example occlusion -- --off        # the same scene, frustum culling only
//! cargo run --release --example occlusion -- --no-walls   # what the spheres hide of each other
//! cargo run --release --example occlusion -- --headless --screenshot occlusion.png
//! ```

mod support;

use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;
use support::sphere_levels::{FieldHalf, SPHERE_RADIUS, sphere_field};

/// A field of spheres behind walls, occlusion-culled on the GPU.
#[derive(argh::FromArgs)]
#[argh(help_triggers("-h", "--help", "help"))]
struct Flags {
    /// spheres (default 200000; 1e6 works)
    #[argh(option, default = "200_000", from_str_fn(support::parse_count))]
    count: usize,
    /// occlusion culling off: frustum culling only, to compare
    #[argh(switch)]
    off: bool,
    /// no walls: what the spheres hide of each other alone, to compare
    #[argh(switch)]
    no_walls: bool,
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
    let args = support::SceneArgs {
        occlusion: !flags.off,
        ..support::scene_args!(flags)
    };
    support::example_app("occlusion", &args)
        .add_plugins(GpuCullPlugin::default())
        .insert_resource(Walls(!flags.no_walls))
        .add_systems(Startup, setup)
        .add_systems(Update, (walk_along, support::finish_headless))
        .run();
}

/// Whether there are walls (`--no-walls`).
#[derive(Resource)]
struct Walls(bool);

fn setup(
    mut commands: Commands,
    args: Res<support::SceneArgs>,
    walls: Res<Walls>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
    mut images: ResMut<Assets<Image>>,
) {
    let (instances, half) = sphere_field(args.count);
    commands.insert_resource(FieldHalf(half));
    commands.spawn((
        Mesh3d(
            meshes.add(
                Sphere::new(SPHERE_RADIUS)
                    .mesh()
                    .ico(2)
                    .expect("a small icosphere"),
            ),
        ),
        MeshMaterial3d(materials.add(StandardMaterial::default())),
        GpuCullInstances::new(instances),
    ));
    // The walls: Bevy meshes just before the field's near edge, 10 m wide
    // and 16 m high (from below the lowest sphere), with 4 m gaps.
    let wall = meshes.add(Cuboid::new(10.0, 16.0, 1.0));
    let stone = materials.add(StandardMaterial::from(Color::srgb(0.5, 0.45, 0.4)));
    let count = if walls.0 { (half / 14.0).ceil() as i32 } else { -1 };
    for k in -count..=count {
        let at = Vec3::new(k as f32 * 14.0, 3.0, -half - 2.0);
        commands.spawn((
            Mesh3d(wall.clone()),
            MeshMaterial3d(stone.clone()),
            Transform::from_translation(at),
        ));
    }
    commands.spawn((
        DirectionalLight {
            illuminance: 8_000.0,
            ..default()
        },
        Transform::from_xyz(1.0, 3.0, -2.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    let mut camera = commands.spawn(Camera3d::default());
    if args.occlusion {
        // Brings Bevy's DepthPrepass and OcclusionCulling with it: the
        // plugin culls in Bevy's two phases, against Bevy's depth pyramid.
        camera.insert(GpuCullOcclusion);
    }
    if args.headless {
        camera.insert(support::headless_target(&mut images, args.width, args.height));
    }
}

/// The camera walks along the walls, looking through them (still in a
/// headless run): the spheres seen through each gap change as it goes.
fn walk_along(
    time: Res<Time>,
    args: Res<support::SceneArgs>,
    half: Option<Res<FieldHalf>>,
    mut camera: Query<&mut Transform, With<Camera3d>>,
) {
    let Some(half) = half else {
        return;
    };
    let x = if args.headless {
        1.5
    } else {
        (time.elapsed_secs() * 0.2).sin() * half.0 * 0.5
    };
    for mut transform in &mut camera {
        *transform =
            Transform::from_xyz(x, 3.0, -half.0 - 10.0).looking_to(Vec3::new(0.0, -0.05, 1.0), Vec3::Y);
    }
}
