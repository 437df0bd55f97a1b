//! Levels of detail chosen on the GPU: a field of spheres, each drawn with
//! the mesh its size on screen calls for: an ico-sphere of 320 triangles
//! near the camera, then of 80 and of 20, and far away one triangle turned
//! toward the camera. The plugin sorts every instance into its level while
//! culling, and draws each level with one indirect draw.
//!
//! A level is a mesh and the smallest size it is drawn at: the fraction of
//! the screen's height that the instance's bounding sphere spans. Sizes
//! must descend; below the last one nothing is drawn (0 draws every
//! instance). `--cross-fade 0.2` blends neighbouring levels over a fifth of
//! each threshold, dithered as Bevy's `VisibilityRange` does, instead of
//! switching. (The `spheres` example derives its thresholds from how far
//! each mesh strays from the sphere: `support/sphere_levels.rs`.)
//!
//! ```text
//! cargo run --release --example lod
//! cargo run --release --example lod -- --cross-fade 0.2
//! cargo run --release --example lod -- --headless --screenshot lod.png
//! ```

mod support;

use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;
use support::sphere_levels::{FieldHalf, SPHERE_RADIUS, impostor, sphere_field};

/// A field of spheres with levels of detail chosen on the GPU.
#[derive(argh::FromArgs)]
#[argh(help_triggers("-h", "--help", "help"))]
struct Flags {
    /// spheres (default 200000; 1e6 works)
    #[argh(option, default = "200_000", from_str_fn(support::parse_count))]
    count: usize,
    /// the width of the levels' cross-fades, a fraction of each threshold (default 0: switch)
    #[argh(option, default = "0.0")]
    cross_fade: f32,
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

/// The cross-fade's width, for `setup`.
#[derive(Resource)]
struct CrossFade(f32);

fn main() {
    let flags: Flags = argh::from_env();
    support::example_app("lod", &support::scene_args!(flags))
        .add_plugins(GpuCullPlugin::default())
        .insert_resource(CrossFade(flags.cross_fade))
        .add_systems(Startup, setup)
        .add_systems(Update, (look_across, support::finish_headless))
        .run();
}

fn setup(
    mut commands: Commands,
    args: Res<support::SceneArgs>,
    cross_fade: Res<CrossFade>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
    mut images: ResMut<Assets<Image>>,
) {
    let (instances, half) = sphere_field(args.count);
    commands.insert_resource(FieldHalf(half));
    let ico = |subdivisions| {
        Sphere::new(SPHERE_RADIUS)
            .mesh()
            .ico(subdivisions)
            .expect("a small icosphere")
    };
    let finest = meshes.add(ico(2));
    // Each level's mesh and the smallest size it is drawn at. Every level's
    // mesh has the batch mesh's vertex layout (positions, normals, uvs).
    let levels = GpuCullLod::new([
        GpuCullLodLevel::new(finest.clone(), 0.1),
        GpuCullLodLevel::new(meshes.add(ico(1)), 0.03),
        GpuCullLodLevel::new(meshes.add(ico(0)), 0.01),
        // The farthest: one triangle, turned toward each view.
        GpuCullLodLevel::new(meshes.add(impostor(SPHERE_RADIUS)), 0.0).facing_camera(),
    ])
    .with_cross_fade(cross_fade.0);
    commands.spawn((
        Mesh3d(finest),
        MeshMaterial3d(materials.add(StandardMaterial::default())),
        GpuCullInstances::new(instances),
        levels,
    ));
    commands.spawn((
        DirectionalLight {
            illuminance: 8_000.0,
            ..default()
        },
        Transform::from_xyz(1.0, 3.0, 2.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    let mut camera = commands.spawn(Camera3d::default());
    if args.headless {
        camera.insert(support::headless_target(&mut images, args.width, args.height));
    }
}

/// The camera stands at the field's edge and looks across it, turning
/// slowly (still in a headless run): the near spheres are drawn finest,
/// the far ones as single triangles.
fn look_across(
    time: Res<Time>,
    args: Res<support::SceneArgs>,
    half: Option<Res<FieldHalf>>,
    mut camera: Query<&mut Transform, With<Camera3d>>,
) {
    let Some(half) = half else {
        return;
    };
    let t = if args.headless {
        0.0
    } else {
        (time.elapsed_secs() * 0.1).sin() * 0.5
    };
    let ahead = Vec3::new(t.sin(), -0.08, t.cos());
    for mut transform in &mut camera {
        *transform = Transform::from_xyz(0.0, 8.0, -half.0 - 4.0).looking_to(ahead, Vec3::Y);
    }
}
