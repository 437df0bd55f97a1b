//! A field of grass placed and swayed on the GPU: each frame a compute
//! pass of the example's own (`shaders/grass.wgsl`) places every blade on
//! a grid over a height field and bends it in the wind, writing it into a
//! batch with `GpuCullComputeWrites`; the plugin culls what the pass wrote
//! in the same frame, picks each blade's level of detail, and casts the
//! blades' shadows. A million blades by default.
//!
//! `--mode static` writes the blades once and never moves them again;
//! `--mode cpu` moves them from the CPU instead (the same sway, computed in
//! a system and uploaded as edits of `GpuCullInstances`); `--mode list`
//! uploads them once as a plain list, without GPU writes: the frame times
//! of the modes compare what moving them costs.
//!
//! ```text
//! cargo run --release --example grass
//! cargo run --release --example grass -- --mode cpu
//! cargo run --release --example grass -- --headless --frames 60 --screenshot grass.png
//! ```

// Bevy systems take many parameters by design.
#![allow(clippy::too_many_arguments)]

#[path = "../support/mod.rs"]
mod support;

mod blades;
mod gpu_pass;

use bevy::prelude::*;
use bevy::render::RenderApp;
use bevy::render::extract_resource::{ExtractResource, ExtractResourcePlugin};
use bevy::render::renderer::RenderGraph;
use bevy::shader::Shader;
use bevy_gpu_cull::prelude::*;
use blades::{HALF_HEIGHT, SPACING, STEP, blades_at, height};

/// The grass's pass, compiled into the example.
const GRASS_SHADER: Handle<Shader> = bevy::asset::uuid_handle!("7c2e9a41-3b5d-4f60-9e18-2a4b6c8d0e1f");

/// How the blades move.
#[derive(Resource, Clone, Copy, Debug, PartialEq, Eq, argh::FromArgValue)]
enum Mode {
    /// Swayed every frame by the GPU pass.
    Gpu,
    /// Written once by the GPU pass, then still.
    Static,
    /// Swayed every frame on the CPU and uploaded.
    Cpu,
    /// A plain list uploaded once: no GPU writes, never moved.
    List,
}

/// The field, in both worlds.
#[derive(Resource, Clone, ExtractResource)]
struct Field {
    batch: Entity,
    count: u32,
    side: u32,
    mode: Mode,
}

/// A million grass blades swayed every frame on the GPU, culled and drawn
/// with levels of detail and shadows.
#[derive(argh::FromArgs)]
#[argh(help_triggers("-h", "--help", "help"))]
struct Flags {
    /// blades (default 1000000; 1e6 works)
    #[argh(option, default = "1_000_000", from_str_fn(support::parse_count))]
    count: usize,
    /// who moves the blades: gpu (a compute pass, every frame), static (the
    /// same pass, once), cpu (every blade from the CPU, every frame) or list
    /// (a plain list uploaded once); default gpu
    #[argh(option, default = "Mode::Gpu")]
    mode: Mode,
    /// render offscreen, without a window, for --frames frames, then exit
    #[argh(switch)]
    headless: bool,
    /// frames to render headless (default 60)
    #[argh(option, default = "60")]
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
    let mut app = support::example_app("grass", &support::scene_args!(flags));
    let wgsl = include_str!("../shaders/grass.wgsl");
    support::embed_shader(&mut app, GRASS_SHADER, wgsl, "shaders/grass.wgsl");
    app.add_plugins((
        GpuCullPlugin::default(),
        ExtractResourcePlugin::<Field>::default(),
    ))
    .insert_resource(ClearColor(Color::srgb(0.55, 0.7, 0.9)))
    .insert_resource(flags.mode)
    .add_systems(Startup, setup)
    .add_systems(Update, (sway_on_cpu, support::finish_headless));
    app.sub_app_mut(RenderApp).add_systems(
        RenderGraph,
        gpu_pass::sway_on_gpu.in_set(GpuCullSystems::WriteInstances),
    );
    app.run();
}

fn setup(
    mut commands: Commands,
    args: Res<support::SceneArgs>,
    mode: Res<Mode>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
    mut images: ResMut<Assets<Image>>,
) {
    let count = args.count as u32;
    let side = (count as f32).sqrt().ceil() as u32;
    let size = side as f32 * SPACING;
    // The ground: a plane bent by the same height field.
    let ground = support::scenery::bent_ground(size, height);
    let soil = StandardMaterial {
        base_color: Color::srgb(0.25, 0.2, 0.1),
        perceptual_roughness: 1.0,
        ..default()
    };
    commands.spawn((Mesh3d(meshes.add(ground)), MeshMaterial3d(materials.add(soil))));
    // Near blades are thin boxes, far ones a single quad.
    let near = meshes.add(Cuboid::new(0.05, 2.0 * HALF_HEIGHT, 0.01));
    let far = meshes.add(Rectangle::new(0.05, 2.0 * HALF_HEIGHT));
    let mut batch = commands.spawn((
        Mesh3d(near.clone()),
        MeshMaterial3d(materials.add(StandardMaterial {
            perceptual_roughness: 0.8,
            double_sided: true,
            cull_mode: None,
            ..default()
        })),
        GpuCullLod::new([(near, 0.02), (far, 0.003)]),
        // Bounds that hold every blade (the box's), whichever level.
        GpuCullBounds {
            center: Vec3::ZERO,
            radius: HALF_HEIGHT * 1.01,
        },
    ));
    if matches!(*mode, Mode::Cpu | Mode::List) {
        batch.insert(GpuCullInstances::new(blades_at(count, side, 0.0)));
    } else {
        batch.insert((
            GpuCullInstances::default(),
            GpuCullComputeWrites::new(count).with_scales(0.6, 1.4),
        ));
    }
    let batch = batch.id();
    commands.insert_resource(Field {
        batch,
        count,
        side,
        mode: *mode,
    });
    commands.spawn((
        DirectionalLight {
            illuminance: 10_000.0,
            shadow_maps_enabled: true,
            ..default()
        },
        Transform::from_xyz(4.0, 10.0, 3.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    let eye = Vec3::new(0.0, 6.0, size * 0.5 + 4.0);
    let mut camera = commands.spawn((
        Camera3d::default(),
        Transform::from_translation(eye).looking_at(Vec3::new(0.0, 0.0, size * 0.2), Vec3::Y),
    ));
    if args.headless {
        camera.insert(support::headless_target(&mut images, args.width, args.height));
    }
}

/// `--mode cpu`: the whole field swayed on the CPU each frame and uploaded.
fn sway_on_cpu(field: Option<Res<Field>>, mut frame: Local<u32>, mut batches: Query<&mut GpuCullInstances>) {
    let Some(field) = field.filter(|f| f.mode == Mode::Cpu) else {
        return;
    };
    *frame += 1;
    if let Ok(mut batch) = batches.get_mut(field.batch) {
        let blades = blades_at(field.count, field.side, *frame as f32 * STEP);
        batch.edit(0..blades.len()).copy_from_slice(&blades);
    }
}
