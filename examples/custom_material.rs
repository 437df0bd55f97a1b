//! A `Material` of your own on a culled batch: a ring of rocks culled on the
//! GPU by `bevy-gpu-cull`, shaded by an `ExtendedMaterial<StandardMaterial,
//! GlowingVeins>` — Bevy's PBR lighting plus glowing veins from the
//! example's fragment shader (`shaders/glowing_veins.wgsl`). Nothing but
//! Bevy's own `MaterialPlugin` is added for the material: the plugin runs
//! its fragment shader behind the instance fetch, and each instance's color
//! tints it as a vertex color would. Each rock's user data says which ore
//! it holds (none, copper or ice), which the shader reads with
//! `bevy_gpu_cull::instance::get_instance_user`.
//!
//! ```text
//! cargo run --release --example custom_material
//! cargo run --release --example custom_material -- --count 1e6
//! cargo run --release --example custom_material -- --headless --frames 30 --screenshot rocks.png
//! ```

// Bevy systems take many parameters by design.
#![allow(clippy::too_many_arguments)]

mod support;

use bevy::pbr::{ExtendedMaterial, MaterialExtension};
use bevy::prelude::*;
use bevy::render::render_resource::AsBindGroup;
use bevy::shader::{Shader, ShaderRef};
use bevy_gpu_cull::prelude::*;

/// The extension: glowing horizontal veins over the standard material.
#[derive(Asset, TypePath, AsBindGroup, Debug, Clone)]
struct GlowingVeins {
    /// The veins' emitted color for each ore (linear, added to the lit
    /// color): a rock's `user[0]` of 1 takes the first, 2 the second.
    #[uniform(100)]
    colors: [LinearRgba; 2],
    /// x: the distance between veins, y: the fraction of it a vein covers.
    #[uniform(101)]
    spacing_width: Vec4,
}

/// The fragment shader, compiled into the example so that it runs from any
/// working directory.
const VEINS_SHADER: Handle<Shader> = bevy::asset::uuid_handle!("9d3f4c1e-2b7a-4f5e-8c61-0a9e7d2b3c44");

impl MaterialExtension for GlowingVeins {
    fn fragment_shader() -> ShaderRef {
        VEINS_SHADER.into()
    }
}

type RockMaterial = ExtendedMaterial<StandardMaterial, GlowingVeins>;

type Args = support::SceneArgs;

/// Rocks shaded by a material of their own (an ExtendedMaterial whose veins glow in each rock's color).
#[derive(argh::FromArgs)]
#[argh(help_triggers("-h", "--help", "help"))]
struct Flags {
    /// rocks (default 100000; 1e6 works)
    #[argh(option, default = "100_000", from_str_fn(support::parse_count))]
    count: usize,
    /// render offscreen, without a window, for --frames frames, then exit
    #[argh(switch)]
    headless: bool,
    /// frames to render headless (default 30)
    #[argh(option, default = "30")]
    frames: u32,
    /// headless: save the last frame to this PNG file
    #[argh(option)]
    screenshot: Option<std::path::PathBuf>,
    /// the frame's size, WxH (default 1280x720; 480x270 headless)
    #[argh(option, from_str_fn(support::parse_size_flag))]
    size: Option<(u32, u32)>,
    /// occlusion culling on the camera (the plugin's, with Bevy's depth prepass)
    #[argh(switch)]
    occlusion: bool,
    /// headless: the summary as one JSON line
    #[argh(switch)]
    json: bool,
}

fn main() {
    let flags: Flags = argh::from_env();
    let args = Args {
        occlusion: flags.occlusion,
        ..support::scene_args!(flags)
    };
    let mut app = support::example_app("custom_material", &args);
    let wgsl = include_str!("shaders/glowing_veins.wgsl");
    support::embed_shader(&mut app, VEINS_SHADER, wgsl, "shaders/glowing_veins.wgsl");
    app.add_plugins((
        GpuCullPlugin::default(),
        MaterialPlugin::<RockMaterial>::default(),
    ))
    .insert_resource(ClearColor(Color::srgb(0.02, 0.02, 0.05)))
    .add_systems(Startup, setup)
    .add_systems(Update, (orbit, support::finish_headless))
    .run();
}

/// The ring's radius for `count` rocks: about one rock per 4 m² of ring.
fn ring_radius(count: usize) -> f32 {
    (count as f32).sqrt() * 1.5 + 10.0
}

fn setup(
    mut commands: Commands,
    args: Res<Args>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<RockMaterial>>,
    mut images: ResMut<Assets<Image>>,
) {
    let radius = ring_radius(args.count);
    // An integer hash (lowbias32) of the rock's index and a seed, in [0, 1].
    let hash = |n: u32, seed: u32| {
        let mut x = n ^ seed.wrapping_mul(0x9E37_79B9);
        x ^= x >> 16;
        x = x.wrapping_mul(0x7FEB_352D);
        x ^= x >> 15;
        x = x.wrapping_mul(0x846C_A68B);
        x ^= x >> 16;
        x as f32 / u32::MAX as f32
    };
    let rocks: Vec<GpuCullInstance> = (0..args.count)
        .map(|i| {
            let n = i as u32;
            let angle = hash(n, 1) * std::f32::consts::TAU;
            let r = radius * (0.8 + 0.4 * hash(n, 2));
            let position = Vec3::new(r * angle.cos(), (hash(n, 3) - 0.5) * 6.0, r * angle.sin());
            let rotation = Quat::from_euler(EulerRot::YXZ, hash(n, 4) * 6.3, hash(n, 5) * 6.3, 0.0);
            let grey = 0.4 + 0.6 * hash(n, 6);
            // Half the rocks hold copper, a quarter ice, the rest nothing.
            let ore = [1, 1, 2, 0][(hash(n, 8) * 3.999) as usize];
            GpuCullInstance::new(position, Color::srgb(grey, grey * 0.9, grey * 0.8))
                .with_rotation(rotation)
                .with_scale(0.4 + 1.2 * hash(n, 7))
                .with_user([ore, 0, 0, 0])
        })
        .collect();
    commands.spawn((
        Mesh3d(meshes.add(Sphere::new(0.8).mesh().ico(2).expect("a small icosphere"))),
        MeshMaterial3d(materials.add(RockMaterial {
            base: StandardMaterial {
                base_color: Color::srgb(0.7, 0.65, 0.6),
                perceptual_roughness: 0.95,
                ..default()
            },
            extension: GlowingVeins {
                colors: [LinearRgba::rgb(3.0, 0.8, 0.1), LinearRgba::rgb(0.02, 0.25, 1.2)],
                spacing_width: Vec4::new(0.6, 0.12, 0.0, 0.0),
            },
        })),
        GpuCullInstances::new(rocks),
    ));
    commands.spawn((
        DirectionalLight {
            illuminance: 8_000.0,
            shadow_maps_enabled: true,
            ..default()
        },
        Transform::from_xyz(3.0, 10.0, -4.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    let mut camera = commands.spawn((Camera3d::default(), Transform::default()));
    if args.occlusion {
        camera.insert(GpuCullOcclusion);
    }
    if args.headless {
        camera.insert(support::headless_target(&mut images, args.width, args.height));
    }
}

/// The camera flies along the ring, just above it (fixed in a headless run).
fn orbit(time: Res<Time>, args: Res<Args>, mut camera: Query<&mut Transform, With<Camera3d>>) {
    let radius = ring_radius(args.count);
    let t = if args.headless {
        0.3
    } else {
        time.elapsed_secs() * 0.03
    };
    let eye = Vec3::new(t.cos(), 0.0, t.sin()) * radius + Vec3::Y * 5.0;
    let ahead = Vec3::new((t + 0.12).cos(), 0.0, (t + 0.12).sin()) * radius;
    for mut transform in &mut camera {
        *transform = Transform::from_translation(eye).looking_at(ahead, Vec3::Y);
    }
}
