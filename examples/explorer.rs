//! A field of spheres to fly over, with keys that switch the plugin's
//! settings while it runs: the scan variant (`V`), the instance format
//! (`F`), shadows (`L`), levels of detail (`N`), occlusion culling (`O`);
//! `C` freezes the culling frustum, so that you can fly out and see what
//! was culled; `P` writes the current view as a scene file for cull-core's
//! `replay`. `Space` hands the camera from the automatic flight to the keys
//! (`W A S D Q E`, right mouse button and drag to look around). The HUD
//! says what is on, and what the GPU kept.
//!
//! ```text
//! cargo run --release --example explorer
//! cargo run --release --example explorer -- --count 4e6 --lod
//! cargo run --release --example explorer -- --headless --screenshot explorer.png
//! ```

mod support;

use bevy::prelude::*;
use bevy::ui::UiTargetCamera;
use bevy_gpu_cull::prelude::*;
use support::explorer::{Explorer, ExplorerPlugin, hud};
use support::fly_over::{FlyOver, FlyOverCamera};
use support::sphere_levels::{SPHERE_RADIUS, sphere_field, sphere_levels};
use support::sphere_scene::spawn_sun;

/// A field of spheres to fly over, with keys that switch the plugin's
/// settings while it runs.
#[derive(argh::FromArgs)]
#[argh(help_triggers("-h", "--help", "help"))]
struct Flags {
    /// spheres (default 100000; 1e6 works)
    #[argh(option, default = "100_000", from_str_fn(support::parse_count))]
    count: usize,
    /// start with levels of detail on (`N` switches them)
    #[argh(switch)]
    lod: bool,
    /// start with the sun casting shadows (`L` switches them)
    #[argh(switch)]
    shadows: bool,
    /// sort the batch into cells and cull by cells where that pays off (the
    /// HUD shows the cells kept)
    #[argh(switch)]
    cells: bool,
    /// render offscreen, without a window, for --frames frames, then exit
    #[argh(switch)]
    headless: bool,
    /// frames to render headless once the scene is ready (default 30)
    #[argh(option, default = "30")]
    frames: u32,
    /// headless: save the last frame, with the HUD, to this PNG file
    #[argh(option)]
    screenshot: Option<std::path::PathBuf>,
    /// the frame's size, WxH (default 1280x720; 480x270 headless)
    #[argh(option, from_str_fn(support::parse_size_flag))]
    size: Option<(u32, u32)>,
    /// headless: the summary as one JSON line
    #[argh(switch)]
    json: bool,
}

/// Whether the sun starts casting shadows (`--shadows`).
#[derive(Resource)]
struct Shadows(bool);

fn main() {
    let flags: Flags = argh::from_env();
    let args = support::SceneArgs {
        lod: flags.lod,
        cells: flags.cells,
        hud: true,
        ..support::scene_args!(flags)
    };
    support::example_app("explorer", &args)
        .add_plugins((
            GpuCullPlugin {
                // The HUD shows the cull's GPU time.
                settings: GpuCullSettings {
                    pass_timings: true,
                    ..default()
                },
                ..default()
            },
            ExplorerPlugin,
        ))
        .insert_resource(Shadows(flags.shadows))
        .add_systems(Startup, setup)
        .add_systems(Update, support::finish_headless)
        .run();
}

fn setup(
    mut commands: Commands,
    args: Res<support::SceneArgs>,
    shadows: Res<Shadows>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut images: ResMut<Assets<Image>>,
) {
    let (instances, half) = sphere_field(args.count);
    let sphere = Sphere::new(SPHERE_RADIUS)
        .mesh()
        .ico(2)
        .expect("a small icosphere");
    let mesh = meshes.add(sphere);
    // The levels `N` puts on the batch and takes off.
    let levels = sphere_levels(&mut meshes, mesh.clone(), 0.0);
    let mut batch = commands.spawn((Mesh3d(mesh), GpuCullInstances::new(instances)));
    if args.lod {
        batch.insert(levels.clone());
    }
    if args.cells {
        batch.insert(GpuCullCells::default());
    }
    commands.insert_resource(Explorer::new(levels));
    commands.insert_resource(FlyOver::new(half * 0.6));
    spawn_sun(&mut commands, shadows.0);
    let mut camera = commands.spawn((
        Camera3d::default(),
        FlyOverCamera,
        Transform::from_xyz(0.0, 8.0, 0.0),
    ));
    if args.headless {
        camera.insert(support::headless_target(&mut images, args.width, args.height));
    }
    // The HUD on this camera's image, in a window or headless.
    let camera = camera.id();
    commands.spawn((hud(), UiTargetCamera(camera)));
}
