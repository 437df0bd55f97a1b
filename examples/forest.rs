//! A lit forest: tens of thousands of trees and rocks, two batches culled on
//! the GPU by `bevy-gpu-cull`, each shaded by its own textured
//! `StandardMaterial`, casting shadows from the sun (every cascade culled on
//! the GPU too) onto an ordinary Bevy ground. With `--compare bevy`, the same
//! forest as Bevy entities: the scene the frame-time benchmarks run.
//!
//! ```text
//! cargo run --release --example forest                     # window: the camera circles the forest
//! cargo run --release --example forest -- --count 200000 --lod --occlusion
//! cargo run --release --example forest -- --compare bevy    # the same forest as ordinary Bevy entities
//! cargo run --release --example forest -- --headless --frames 60 --screenshot forest.png
//! cargo run --release --example forest -- --headless --size 1280x720 --pass-times --json
//! ```

// Bevy systems take many parameters by design.
#![allow(clippy::too_many_arguments)]

mod support;

use bevy::camera::RenderTarget;
use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;
use support::scenery::{flat_tree, rock, scattered, streaks, tree_cone};
use support::{HeadlessRun, PipelinesSettled, SceneArgs};

/// A lit forest with shadows: trees and rocks as batches, or as Bevy entities to compare.
#[derive(argh::FromArgs)]
#[argh(help_triggers("-h", "--help", "help"))]
struct Flags {
    /// trees (default 40000; 1e6 works); a quarter as many rocks
    #[argh(option, default = "40_000", from_str_fn(support::parse_count))]
    count: usize,
    /// render offscreen, without a window, for --frames frames, then exit
    #[argh(switch)]
    headless: bool,
    /// frames to render headless once the scene is ready (default 60)
    #[argh(option, default = "60")]
    frames: u32,
    /// headless: save the last frame to this PNG file
    #[argh(option)]
    screenshot: Option<std::path::PathBuf>,
    /// the frame's size, WxH (default 1280x720; 480x270 headless)
    #[argh(option, from_str_fn(support::parse_size_flag))]
    size: Option<(u32, u32)>,
    /// occlusion culling on the camera (the plugin's, or with --compare bevy Bevy's)
    #[argh(switch)]
    occlusion: bool,
    /// sort the batches into cells and cull by cells where that pays off
    #[argh(switch)]
    cells: bool,
    /// levels of detail on the trees and rocks
    #[argh(switch)]
    lod: bool,
    /// with `bevy`: the same forest as Bevy entities, culled and drawn by Bevy
    #[argh(option, default = "false", from_str_fn(support::parse_compare))]
    compare: bool,
    /// with --compare bevy: Bevy's NoCpuCulling on the camera
    #[argh(switch)]
    no_cpu_culling: bool,
    /// a depth prepass on the camera (Bevy's: each pixel shaded once)
    #[argh(switch)]
    depth_prepass: bool,
    /// headless: print each render pass's GPU time at the end
    #[argh(switch)]
    pass_times: bool,
    /// headless: the summary as one JSON line
    #[argh(switch)]
    json: bool,
}

fn main() {
    let flags: Flags = argh::from_env();
    let args = SceneArgs {
        occlusion: flags.occlusion,
        cells: flags.cells,
        lod: flags.lod,
        compare_bevy: flags.compare,
        no_cpu_culling: flags.no_cpu_culling,
        depth_prepass: flags.depth_prepass,
        pass_times: flags.pass_times,
        ..support::scene_args!(flags)
    };
    if args.no_cpu_culling && !args.compare_bevy || args.lod && args.compare_bevy {
        eprintln!("forest: --no-cpu-culling goes with --compare bevy, --lod without it");
        std::process::exit(2);
    }
    support::example_app("forest", &args)
        .add_plugins(GpuCullPlugin::default())
        .insert_resource(ClearColor(Color::srgb(0.55, 0.7, 0.9)))
        .add_systems(Startup, setup)
        .add_systems(Update, (circle, finish_headless))
        .run();
}

/// Which batch, to count each.
#[derive(Component, Clone, Copy, PartialEq)]
enum Kind {
    Trees,
    Rocks,
}

/// A quarter as many rocks as trees.
fn rocks_of(trees: usize) -> usize {
    trees / 4
}

fn setup(
    mut commands: Commands,
    args: Res<SceneArgs>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
    mut images: ResMut<Assets<Image>>,
) {
    let radius = (args.count as f32).sqrt() * 2.0;
    let mut textured = |rgb, perceptual_roughness| {
        let base_color_texture = Some(images.add(streaks(rgb)));
        materials.add(StandardMaterial {
            base_color_texture,
            perceptual_roughness,
            ..default()
        })
    };
    let (tree_material, rock_material) = (textured([40, 120, 50], 0.9), textured([130, 125, 120], 1.0));
    let trees = scattered(args.count, radius, 1, |p, s, turn| {
        Transform::from_translation(p + Vec3::Y * 1.5 * s)
            .with_rotation(Quat::from_rotation_y(turn))
            .with_scale(Vec3::splat(s))
    });
    let rocks = scattered(rocks_of(args.count), radius, 2, |p, s, turn| {
        Transform::from_translation(p + Vec3::new(0.9, 0.2, 0.4))
            .with_rotation(Quat::from_rotation_y(turn) * Quat::from_rotation_x(0.4))
            .with_scale(Vec3::splat(0.5 * s))
    });
    // Levels of detail (`--lod`): the cone of eight sides down to a tenth of
    // the screen's height (bounding sphere across), one of four down to a
    // fiftieth, then a flat tree turned toward the camera; rocks: the
    // icosphere, then an icosahedron. Every instance stays drawn (the last
    // size is 0).
    let (tree_mesh, rock_mesh) = (meshes.add(tree_cone(8)), meshes.add(rock(1)));
    let tree_levels = GpuCullLod::new([
        GpuCullLodLevel::new(tree_mesh.clone(), 0.1),
        GpuCullLodLevel::new(meshes.add(tree_cone(4)), 0.02),
        GpuCullLodLevel::new(meshes.add(flat_tree()), 0.0).facing_camera(),
    ]);
    let rock_levels = GpuCullLod::new([
        GpuCullLodLevel::new(rock_mesh.clone(), 0.03),
        GpuCullLodLevel::new(meshes.add(rock(0)), 0.0),
    ]);
    let kinds = [
        (Kind::Trees, trees, tree_mesh, tree_material, tree_levels),
        (Kind::Rocks, rocks, rock_mesh, rock_material, rock_levels),
    ];
    for (kind, list, mesh, material, levels) in kinds {
        if args.compare_bevy {
            // Bevy's own path: an entity per tree and rock (one mesh and
            // material per kind), batched, culled and shadowed by Bevy.
            let entity = |i: &GpuCullInstance| {
                let transform = Transform::from_translation(i.position)
                    .with_rotation(i.rotation)
                    .with_scale(Vec3::splat(i.scale));
                (Mesh3d(mesh.clone()), MeshMaterial3d(material.clone()), transform)
            };
            commands.spawn_batch(list.iter().map(entity).collect::<Vec<_>>());
            continue;
        }
        let mut batch = commands.spawn((
            Mesh3d(mesh),
            MeshMaterial3d(material),
            GpuCullInstances::new(list),
            kind,
        ));
        if args.lod {
            batch.insert(levels);
        }
        if args.cells {
            // Sorted into cells; only the cells in view read where that pays.
            batch.insert(GpuCullCells::default());
        }
    }
    // The ground: an ordinary Bevy mesh that receives the instances' shadows.
    let ground = Plane3d::default().mesh().size(radius * 2.5, radius * 2.5);
    commands.spawn((
        Mesh3d(meshes.add(ground)),
        MeshMaterial3d(materials.add(StandardMaterial::from(Color::srgb(0.35, 0.3, 0.2)))),
    ));
    commands.spawn((
        DirectionalLight {
            illuminance: 12_000.0,
            shadow_maps_enabled: true,
            ..default()
        },
        Transform::from_xyz(4.0, 10.0, 3.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    spawn_camera(&mut commands, &args, &mut images);
}

/// The camera, with the options asked for.
fn spawn_camera(commands: &mut Commands, args: &SceneArgs, images: &mut Assets<Image>) {
    let mut camera = commands.spawn(Camera3d::default());
    if args.occlusion {
        // With --compare bevy, Bevy's own occlusion culling of its entities
        // (which GpuCullOcclusion requires).
        camera.insert(GpuCullOcclusion);
    }
    if args.no_cpu_culling {
        camera.insert(bevy::camera::visibility::NoCpuCulling);
    }
    if args.depth_prepass {
        // The main pass then shades each pixel once: the batches are drawn
        // into the prepass too.
        camera.insert(bevy::core_pipeline::prepass::DepthPrepass);
    }
    if args.headless {
        camera.insert(support::headless_target(images, args.width, args.height));
    }
}

/// The camera circles the forest at tree height, looking across it (fixed
/// in a headless run).
fn circle(time: Res<Time>, args: Res<SceneArgs>, mut camera: Query<&mut Transform, With<Camera3d>>) {
    let radius = (args.count as f32).sqrt() * 2.0;
    let t = if args.headless {
        0.6
    } else {
        time.elapsed_secs() * 0.05
    };
    let eye = Vec3::new(t.cos(), 0.0, t.sin()) * radius * 0.6 + Vec3::Y * 6.0;
    for mut transform in &mut camera {
        *transform = Transform::from_translation(eye).looking_at(Vec3::ZERO, Vec3::Y);
    }
}

/// Headless: a screenshot once the batches have been drawn, then the
/// summary (trees and rocks in view, per level; shadow views), and exit.
fn finish_headless(
    args: Res<SceneArgs>,
    mut run: ResMut<HeadlessRun>,
    settled: Res<PipelinesSettled>,
    stats: Res<GpuCullStats>,
    batches: Query<(Entity, &Kind)>,
    camera: Query<(Entity, &RenderTarget), With<Camera3d>>,
    mut commands: Commands,
    mut exit: MessageWriter<AppExit>,
    diagnostics: Option<Res<bevy::diagnostic::DiagnosticsStore>>,
) {
    let (Some((camera, target)), true) = (camera.single().ok(), args.headless) else {
        return;
    };
    // Bevy's path has no counts to wait for: ready once its meshes are
    // drawn (their pipelines compiled), then the pipelines settled.
    let ready = if args.compare_bevy {
        settled.first_drawn_frames().0.is_some()
    } else {
        stats.drawn_frames >= 2 && !stats.shadow_visible.is_empty()
    };
    let support::HeadlessStep::Finish(code) =
        run.step(&args, ready, true, &settled, Some(target), &mut commands)
    else {
        return;
    };
    let batch = |kind| batches.iter().find(|(_, k)| **k == kind).map(|(e, _)| e);
    let (trees, rocks) = (batch(Kind::Trees), batch(Kind::Rocks));
    // `None` on Bevy's path, which has no batches.
    let visible = |batch: Option<Entity>| batch.map(|batch| stats.visible_in(batch));
    let per_level = |batch: Option<Entity>| support::per_level(&stats, |b| Some(b) == batch);
    let shadow_views: std::collections::HashSet<_> =
        stats.shadow_visible.keys().map(|(view, _)| view).collect();
    // The trees' cells for the camera.
    let cells = trees.and_then(|trees| stats.cells.get(&(camera, trees)));
    let path = if args.compare_bevy { "bevy" } else { "gpu-cull" };
    let mut summary = run.summary("forest", &settled);
    summary
        .line(match (visible(trees), visible(rocks)) {
            (Some(t), Some(r)) => format!(
                "{t} trees and {r} rocks in view, {} shadow views",
                shadow_views.len()
            ),
            _ => format!("{} trees drawn by Bevy's entity path", args.count),
        })
        .field("instances", args.count + rocks_of(args.count))
        .field("trees", args.count)
        .field("path", path)
        .field("visible", visible(trees).zip(visible(rocks)).map(|(t, r)| t + r))
        .field("trees_visible", visible(trees))
        .field("rocks_visible", visible(rocks))
        .field("trees_per_level", per_level(trees))
        .field("rocks_per_level", per_level(rocks))
        .field("shadow_views", shadow_views.len())
        .field("shadow_casters", stats.shadow_visible.values().sum::<u32>())
        .field("variant", stats.variant.map(|v| v.name()))
        .field("lod", args.lod)
        .field("occlusion", args.occlusion)
        .field("no_cpu_culling", args.no_cpu_culling)
        .field("depth_prepass", args.depth_prepass);
    support::add_cells(&mut summary, cells);
    if let Some(store) = diagnostics.filter(|_| args.pass_times) {
        support::add_render_diagnostics(&mut summary, &store);
    }
    summary.print(args.json);
    exit.write(code);
}
