//! Reading less: a city of a million blocks, of which the camera sees a
//! street or two. With `GpuCullCells` the plugin sorts the batch's
//! instances into cells of nearby instances (once, on the CPU), and each
//! frame a cell pass finds the cells some view may see, so that the cull
//! reads only their instances instead of all of them. It does so only
//! where enough instances go unread for that to pay; the survivors are
//! the same either way (`--flat` culls every instance, to compare).
//!
//! ```text
//! cargo run --release --example cells
//! cargo run --release --example cells -- --flat
//! cargo run --release --example cells -- --headless --screenshot cells.png
//! ```

mod support;

use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;

/// A city of blocks culled by cells: only the cells in view are read.
#[derive(argh::FromArgs)]
#[argh(help_triggers("-h", "--help", "help"))]
struct Flags {
    /// blocks (default 1000000)
    #[argh(option, default = "1_000_000", from_str_fn(support::parse_count))]
    count: usize,
    /// cull every instance (no cells), to compare
    #[argh(switch)]
    flat: bool,
    /// cull by cells however few instances that leaves unread
    #[argh(switch)]
    always: bool,
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

/// The batch's cells, or none (`--flat`).
#[derive(Resource)]
struct Cells(Option<GpuCullCells>);

fn main() {
    let flags: Flags = argh::from_env();
    let cells = match (flags.flat, flags.always) {
        (true, _) => None,
        // 0: cull by cells even where the cell pass costs about what it saves.
        (false, true) => Some(GpuCullCells {
            min_skipped_bytes: Some(0),
        }),
        (false, false) => Some(GpuCullCells::default()),
    };
    support::example_app("cells", &support::scene_args!(flags))
        .add_plugins(GpuCullPlugin::default())
        .insert_resource(Cells(cells))
        .add_systems(Startup, setup)
        .add_systems(Update, (fly_over, support::finish_headless))
        .run();
}

/// Meters between blocks.
const BLOCK: f32 = 6.0;

fn setup(
    mut commands: Commands,
    args: Res<support::SceneArgs>,
    cells: Res<Cells>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
    mut images: ResMut<Assets<Image>>,
) {
    // Blocks on a grid, each of its own height and shade. The list's order
    // does not matter: the cells sort it.
    let side = (args.count as f32).sqrt().ceil() as usize;
    let instances: Vec<GpuCullInstance> = (0..args.count)
        .map(|i| {
            let (x, z) = ((i % side) as f32 * BLOCK, (i / side) as f32 * BLOCK);
            let height = 1.0 + 3.0 * ((i as f32 * 0.618).fract());
            let shade = 0.4 + 0.4 * ((i as f32 * 0.377).fract());
            let transform = Transform::from_xyz(x, height, z).with_scale(Vec3::new(2.0, height, 2.0));
            GpuCullInstance::from_transform(&transform, Color::srgb(shade, shade, shade * 1.1))
        })
        .collect();
    let mut batch = commands.spawn((
        Mesh3d(meshes.add(Cuboid::new(2.0, 2.0, 2.0))),
        MeshMaterial3d(materials.add(StandardMaterial::default())),
        GpuCullInstances::new(instances),
    ));
    if let Some(cells) = cells.0 {
        batch.insert(cells);
    }
    commands.spawn((
        DirectionalLight {
            illuminance: 8_000.0,
            ..default()
        },
        Transform::from_xyz(2.0, 5.0, 1.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    let mut camera = commands.spawn(Camera3d::default());
    if args.headless {
        camera.insert(support::headless_target(&mut images, args.width, args.height));
    }
}

/// The camera flies over the city, looking down at it (still in a headless
/// run): it sees a few hundred blocks of the million.
fn fly_over(
    time: Res<Time>,
    args: Res<support::SceneArgs>,
    mut camera: Query<&mut Transform, With<Camera3d>>,
) {
    let side = (args.count as f32).sqrt().ceil() * BLOCK;
    let t = if args.headless {
        0.3
    } else {
        (time.elapsed_secs() * 0.01).fract()
    };
    let down = Vec3::new(0.0, -60f32.to_radians().sin(), 60f32.to_radians().cos());
    for mut transform in &mut camera {
        *transform = Transform::from_xyz(side * 0.5, 80.0, t * side).looking_to(down, Vec3::Y);
    }
}
