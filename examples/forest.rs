//! A lit forest: tens of thousands of trees and rocks, two batches culled on
//! the GPU by `bevy-gpu-cull`, each shaded by its own textured
//! `StandardMaterial`, casting shadows from the sun (every cascade culled on
//! the GPU too) onto an ordinary Bevy ground.
//!
//! ```text
//! cargo run --release --example forest                     # window: the camera circles the forest
//! cargo run --release --example forest -- --count 200000
//! cargo run --release --example forest -- --occlusion       # trees hidden behind trees are not drawn
//! cargo run --release --example forest -- --count 4e6 --cells  # read only the cells of the forest in view
//! cargo run --release --example forest -- --lod             # coarser trees and rocks far away, flat trees farthest
//! cargo run --release --example forest -- --compare bevy    # the same forest as ordinary Bevy entities
//! cargo run --release --example forest -- --depth-prepass    # a depth prepass: the main pass shades each pixel once
//! cargo run --release --example forest -- --headless --frames 60 --screenshot forest.png
//! cargo run --release --example forest -- --headless --size 1280x720 --pass-times  # GPU time of each render pass
//! ```

// Bevy systems take many parameters by design.
#![allow(clippy::too_many_arguments)]

mod support;

use bevy::asset::RenderAssetUsages;
use bevy::camera::RenderTarget;
use bevy::prelude::*;
use bevy::render::render_resource::{Extent3d, TextureDimension, TextureFormat};
use bevy_gpu_cull::prelude::*;

type Args = support::SceneArgs;

/// A lit forest with shadows: trees and rocks as batches, or as Bevy entities to compare.
#[derive(argh::FromArgs)]
#[argh(help_triggers("-h", "--help", "help"))]
struct Flags {
    /// trees (default 40000; 1e6 works)
    #[argh(option, default = "40_000", from_str_fn(support::parse_count))]
    count: usize,
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
    /// occlusion culling on the camera (the plugin's, with Bevy's depth prepass)
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
}

fn main() {
    let flags: Flags = argh::from_env();
    let args = Args {
        occlusion: flags.occlusion,
        cells: flags.cells,
        lod: flags.lod,
        compare_bevy: flags.compare,
        no_cpu_culling: flags.no_cpu_culling,
        depth_prepass: flags.depth_prepass,
        pass_times: flags.pass_times,
        ..Args::new(
            flags.count,
            flags.headless,
            flags.frames,
            flags.screenshot,
            flags.size,
        )
    };
    if args.no_cpu_culling && !args.compare_bevy || args.lod && args.compare_bevy {
        eprintln!("forest: --no-cpu-culling goes with --compare bevy, --lod without it");
        std::process::exit(2);
    }
    if !args.headless {
        support::require_display(
            "forest",
            "cargo run --release --example forest -- --headless --frames 60 --screenshot forest.png",
        );
    }
    let mut app = App::new();
    support::add_default_plugins(
        &mut app,
        args.headless,
        "bevy-gpu-cull: forest",
        args.width,
        args.height,
    );
    if args.pass_times {
        support::add_pass_times(&mut app);
    }
    app.add_plugins(GpuCullPlugin::default())
        .insert_resource(ClearColor(Color::srgb(0.55, 0.7, 0.9)))
        .insert_resource(args)
        .init_resource::<support::HeadlessRun>()
        .add_systems(Startup, setup)
        .add_systems(Update, (circle, hud, finish_headless))
        .run();
}

#[derive(Component)]
struct Trees;

#[derive(Component)]
struct Rocks;

#[derive(Component)]
struct Hud;

/// A small tileable texture: `base` with darker streaks, so that the
/// material's texture is visible on the instances.
fn streaks(base: [u8; 3]) -> Image {
    let size = 16;
    let mut data = Vec::with_capacity(size * size * 4);
    for y in 0..size {
        for x in 0..size {
            let dark = (x * 7 + y * 3) % 5 == 0;
            let k = if dark { 0.55 } else { 1.0 };
            data.extend(base.map(|c| (c as f32 * k) as u8));
            data.push(255);
        }
    }
    Image::new(
        Extent3d {
            width: size as u32,
            height: size as u32,
            depth_or_array_layers: 1,
        },
        TextureDimension::D2,
        data,
        TextureFormat::Rgba8UnormSrgb,
        RenderAssetUsages::RENDER_WORLD,
    )
}

/// A deterministic scatter: `i`-th point of a golden-angle spiral in a disc
/// of radius `radius`, with a pseudo-random jitter, scale and turn.
fn scatter(i: usize, count: usize, radius: f32, seed: u32) -> (Vec3, f32, f32) {
    let hash =
        |n: u32| (n.wrapping_mul(0x9E37_79B9) ^ seed).wrapping_mul(0x85EB_CA6B) as f32 / u32::MAX as f32;
    let r = radius * ((i as f32 + 0.5) / count as f32).sqrt();
    let a = i as f32 * 2.399_963;
    let jitter = Vec3::new(hash(i as u32) - 0.5, 0.0, hash(i as u32 ^ 0x55) - 0.5) * 2.0;
    let p = Vec3::new(r * a.cos(), 0.0, r * a.sin()) + jitter;
    (
        p,
        0.7 + 0.8 * hash(i as u32 ^ 0xAA),
        hash(i as u32 ^ 0x33) * std::f32::consts::TAU,
    )
}

fn setup(
    mut commands: Commands,
    args: Res<Args>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
    mut images: ResMut<Assets<Image>>,
) {
    let radius = (args.count as f32).sqrt() * 2.0;
    // Trees: cones, a streaked green material. Untinted (white instances),
    // so that Bevy's entity path (--compare bevy), one material for every
    // tree, draws the same picture: a tint per instance would cost the
    // plugin an interpolated color that Bevy's path does not draw.
    let trees: Vec<GpuCullInstance> = (0..args.count)
        .map(|i| {
            let (p, s, turn) = scatter(i, args.count, radius, 1);
            let transform = Transform::from_translation(p + Vec3::Y * 1.5 * s)
                .with_rotation(Quat::from_rotation_y(turn))
                .with_scale(Vec3::splat(s));
            GpuCullInstance::from_transform(&transform, Color::WHITE)
        })
        .collect();
    let tree_mesh = meshes.add(tree_cone(8));
    let tree_material = materials.add(StandardMaterial {
        base_color_texture: Some(images.add(streaks([40, 120, 50]))),
        perceptual_roughness: 0.9,
        ..default()
    });
    let rock_mesh = meshes.add(rock(1));
    let rock_material = materials.add(StandardMaterial {
        base_color_texture: Some(images.add(streaks([130, 125, 120]))),
        perceptual_roughness: 1.0,
        ..default()
    });
    let rock_list: Vec<GpuCullInstance> = (0..args.count / 4)
        .map(|i| {
            let (p, s, turn) = scatter(i, args.count / 4, radius, 2);
            let transform = Transform::from_translation(p + Vec3::new(0.9, 0.2, 0.4))
                .with_rotation(Quat::from_rotation_y(turn) * Quat::from_rotation_x(0.4))
                .with_scale(Vec3::splat(0.5 * s));
            GpuCullInstance::from_transform(&transform, Color::WHITE)
        })
        .collect();
    if args.compare_bevy {
        // Bevy's own path: an entity per tree and rock (sharing one mesh and
        // material per kind), batched, culled and shadowed by Bevy.
        let entities =
            |list: &[GpuCullInstance], mesh: &Handle<Mesh>, material: &Handle<StandardMaterial>| {
                list.iter()
                    .map(|i| {
                        (
                            Mesh3d(mesh.clone()),
                            MeshMaterial3d(material.clone()),
                            Transform::from_translation(i.position)
                                .with_rotation(i.rotation)
                                .with_scale(Vec3::splat(i.scale)),
                        )
                    })
                    .collect::<Vec<_>>()
            };
        commands.spawn_batch(entities(&trees, &tree_mesh, &tree_material));
        commands.spawn_batch(entities(&rock_list, &rock_mesh, &rock_material));
    } else {
        spawn_batches(
            &mut commands,
            &args,
            &mut meshes,
            trees,
            tree_mesh,
            tree_material,
            rock_list,
            rock_mesh,
            rock_material,
        );
    }
    ground_light_and_camera(
        &mut commands,
        &args,
        &mut meshes,
        &mut materials,
        &mut images,
        radius,
    );
}

/// The trees' and the rocks' batches, with levels of detail (`--lod`) and
/// cells (`--cells`).
fn spawn_batches(
    commands: &mut Commands,
    args: &Args,
    meshes: &mut Assets<Mesh>,
    trees: Vec<GpuCullInstance>,
    tree_mesh: Handle<Mesh>,
    tree_material: Handle<StandardMaterial>,
    rock_list: Vec<GpuCullInstance>,
    rock_mesh: Handle<Mesh>,
    rock_material: Handle<StandardMaterial>,
) {
    let mut forest = commands.spawn((
        Mesh3d(tree_mesh.clone()),
        MeshMaterial3d(tree_material),
        GpuCullInstances::new(trees),
        Trees,
    ));
    // Levels of detail: the cone of eight sides down to a tenth of the
    // screen's height (bounding sphere across), one of four down to a
    // fiftieth, then a flat tree turned toward the camera; rocks: the
    // icosphere, then its coarsest form. Every instance stays drawn (the
    // last size is 0).
    if args.lod {
        forest.insert(GpuCullLod::new([
            GpuCullLodLevel::new(tree_mesh, 0.1),
            GpuCullLodLevel::new(meshes.add(tree_cone(4)), 0.02),
            GpuCullLodLevel::new(meshes.add(flat_tree()), 0.0).facing_camera(),
        ]));
    }
    // Sorted into cells (spatially compact runs of trees), the forest is
    // culled reading only the cells in view where that leaves enough unread.
    if args.cells {
        forest.insert(GpuCullCells::default());
    }
    // Rocks between them.
    let mut rocks = commands.spawn((
        Mesh3d(rock_mesh.clone()),
        MeshMaterial3d(rock_material),
        GpuCullInstances::new(rock_list),
        Rocks,
    ));
    if args.lod {
        rocks.insert(GpuCullLod::new([
            GpuCullLodLevel::new(rock_mesh, 0.03),
            GpuCullLodLevel::new(meshes.add(rock(0)), 0.0),
        ]));
    }
    if args.cells {
        rocks.insert(GpuCullCells::default());
    }
}

/// A tree: a cone of `sides` sides (8 for the finest level, 4 for the next).
fn tree_cone(sides: u32) -> Mesh {
    Cone::new(0.9, 3.0).mesh().resolution(sides).build()
}

/// A rock: an icosphere of `subdivisions` (0: an icosahedron).
fn rock(subdivisions: u32) -> Mesh {
    Sphere::new(0.6)
        .mesh()
        .ico(subdivisions)
        .expect("a small icosphere")
}

/// A tree's outline as one triangle in the XY plane, facing +Z (the
/// camera, drawn with `GpuCullLodLevel::facing_camera`), as tall and wide as the
/// cone, with normals leaning out so that it shades like a cone.
fn flat_tree() -> Mesh {
    use bevy::asset::RenderAssetUsages;
    use bevy::mesh::{Indices, PrimitiveTopology};
    let positions = vec![[-0.9, -1.5, 0.0], [0.9, -1.5, 0.0], [0.0, 1.5, 0.0]];
    let normals: Vec<[f32; 3]> = [
        Vec3::new(-1.0, 0.3, 1.0),
        Vec3::new(1.0, 0.3, 1.0),
        Vec3::new(0.0, 0.3, 1.0),
    ]
    .iter()
    .map(|n| n.normalize().to_array())
    .collect();
    let uvs = vec![[0.0, 1.0], [1.0, 1.0], [0.5, 0.0]];
    Mesh::new(PrimitiveTopology::TriangleList, RenderAssetUsages::default())
        .with_inserted_indices(Indices::U32(vec![0, 1, 2]))
        .with_inserted_attribute(Mesh::ATTRIBUTE_POSITION, positions)
        .with_inserted_attribute(Mesh::ATTRIBUTE_NORMAL, normals)
        .with_inserted_attribute(Mesh::ATTRIBUTE_UV_0, uvs)
}

/// The ground, the sun and the camera.
fn ground_light_and_camera(
    commands: &mut Commands,
    args: &Args,
    meshes: &mut Assets<Mesh>,
    materials: &mut Assets<StandardMaterial>,
    images: &mut Assets<Image>,
    radius: f32,
) {
    // The ground: an ordinary Bevy mesh that receives the instances' shadows.
    commands.spawn((
        Mesh3d(meshes.add(Plane3d::default().mesh().size(radius * 2.5, radius * 2.5))),
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
    let mut camera = commands.spawn((Camera3d::default(), Transform::default()));
    if args.occlusion {
        // With --compare bevy, Bevy's own two-phase occlusion culling of its
        // entities (GpuCullOcclusion has no batch to act on).
        camera.insert(support::occlusion_culling());
    }
    if args.no_cpu_culling {
        camera.insert(bevy::camera::visibility::NoCpuCulling);
    }
    if args.depth_prepass {
        // The batches draw after Bevy's meshes (the ground): with the
        // prepass's depth the main pass shades only what is in front.
        camera.insert(bevy::core_pipeline::prepass::DepthPrepass);
    }
    if args.headless {
        camera.insert(support::headless_target(images, args.width, args.height));
    } else {
        commands.spawn((
            Text::new(""),
            Node {
                position_type: PositionType::Absolute,
                top: Val::Px(8.0),
                left: Val::Px(8.0),
                ..default()
            },
            Hud,
        ));
    }
}

/// The batches' counts in view and, with `--cells`, the cells tested and
/// kept for the camera.
fn hud(
    stats: Res<GpuCullStats>,
    trees: Query<Entity, With<Trees>>,
    rocks: Query<Entity, With<Rocks>>,
    camera: Query<Entity, With<Camera3d>>,
    mut text: Query<&mut Text, With<Hud>>,
) {
    let Ok(mut text) = text.single_mut() else {
        return;
    };
    let camera = camera.single().ok();
    let line = |name: &str, batch: Option<Entity>| -> String {
        let visible: u32 = stats
            .visible
            .iter()
            .filter(|((_, b), _)| Some(*b) == batch)
            .map(|(_, n)| n)
            .sum();
        let cells = camera
            .zip(batch)
            .and_then(|key| stats.cells.get(&key))
            .map_or(String::new(), |c| {
                format!(
                    ", cells kept {} / {}{}",
                    c.kept,
                    c.cells,
                    if c.by_cells { "" } else { " (culled flat)" }
                )
            });
        format!("{name} in view {visible}{cells}")
    };
    text.0 = format!(
        "{}\n{}\nGPU cull {}",
        line("trees", trees.single().ok()),
        line("rocks", rocks.single().ok()),
        stats.gpu_time_ms.map_or("n/a".into(), |ms| format!("{ms:.3} ms")),
    );
}

/// The camera circles the forest at tree height, looking across it (fixed
/// in a headless run).
fn circle(time: Res<Time>, args: Res<Args>, mut camera: Query<&mut Transform, With<Camera3d>>) {
    let radius = (args.count as f32).sqrt() * 2.0;
    let t = if args.headless {
        0.6
    } else {
        time.elapsed_secs() * 0.05
    };
    let eye = Vec3::new(t.cos(), 0.0, t.sin()) * radius * 0.6 + Vec3::Y * 6.0;
    for mut transform in &mut camera {
        *transform = Transform::from_translation(eye).looking_at(Vec3::new(0.0, 0.0, 0.0), Vec3::Y);
    }
}

/// Headless: a screenshot once the batches have been drawn, then one
/// summary line (visible trees and rocks, shadow views culled), and exit.
fn finish_headless(
    args: Res<Args>,
    mut run: ResMut<support::HeadlessRun>,
    settled: Res<support::PipelinesSettled>,
    stats: Res<GpuCullStats>,
    trees: Query<Entity, With<Trees>>,
    rocks: Query<Entity, With<Rocks>>,
    targets: Query<&RenderTarget, With<Camera3d>>,
    cameras: Query<Entity, With<Camera3d>>,
    mut commands: Commands,
    mut exit: MessageWriter<AppExit>,
    diagnostics: Option<Res<bevy::diagnostic::DiagnosticsStore>>,
) {
    if !args.headless {
        return;
    }
    // Bevy's path has no counts to wait for: a few frames for its meshes'
    // and materials to be prepared, then the pipelines settled.
    let ready = if args.compare_bevy {
        run.frames >= 10
    } else {
        stats.drawn_frames >= 2 && !stats.shadow_visible.is_empty()
    };
    let support::HeadlessStep::Finish(exit_code) =
        run.step(&args, ready, &settled, targets.single().ok(), &mut commands)
    else {
        return;
    };
    // "n/a" on Bevy's path (--compare bevy), which has no batches.
    let visible = |batch: Option<Entity>| -> String {
        batch.map_or("n/a".into(), |batch| {
            stats
                .visible
                .iter()
                .filter(|((_, b), _)| *b == batch)
                .map(|(_, n)| n)
                .sum::<u32>()
                .to_string()
        })
    };
    // Per level, finest first, summed over the cameras ("n/a" without --lod).
    let per_level = |batch: Option<Entity>| -> String {
        let mut sums: Vec<u32> = Vec::new();
        for ((_, b), levels) in &stats.visible_per_level {
            if Some(*b) == batch {
                sums.resize(sums.len().max(levels.len()), 0);
                sums.iter_mut().zip(levels).for_each(|(s, n)| *s += n);
            }
        }
        if sums.is_empty() {
            "n/a".into()
        } else {
            sums.iter().map(u32::to_string).collect::<Vec<_>>().join("/")
        }
    };
    let shadow_views = stats
        .shadow_visible
        .keys()
        .map(|(view, _)| *view)
        .collect::<std::collections::HashSet<_>>()
        .len();
    // The trees' cells for the camera: kept/total, "(flat)" when the pick
    // culled flat; "n/a" without --cells.
    let cells = cameras
        .single()
        .ok()
        .zip(trees.single().ok())
        .and_then(|key| stats.cells.get(&key))
        .map_or("n/a".into(), |c| {
            format!("{}/{}{}", c.kept, c.cells, if c.by_cells { "" } else { "(flat)" })
        });
    if let Some(store) = diagnostics.filter(|_| args.pass_times) {
        support::print_pass_times(&store);
    }
    println!(
        "forest: frames={} median_frame_ms={:.2} count={} path={} trees_visible={} rocks_visible={} trees_per_level={} rocks_per_level={} shadow_views={} shadow_casters={} variant={} lod={} occlusion={} no_cpu_culling={} depth_prepass={} cells={cells} first_bevy_mesh_frame={} first_batch_frame={} ready_frame={}",
        run.frames,
        run.median_frame_ms(),
        args.count,
        if args.compare_bevy { "bevy" } else { "gpu-cull" },
        visible(trees.single().ok()),
        visible(rocks.single().ok()),
        per_level(trees.single().ok()),
        per_level(rocks.single().ok()),
        shadow_views,
        stats.shadow_visible.values().sum::<u32>(),
        stats.variant.map_or("-", |v| v.name()),
        args.lod,
        args.occlusion,
        args.no_cpu_culling,
        args.depth_prepass,
        support::frame_or_na(settled.first_drawn_frames().0),
        support::frame_or_na(settled.first_drawn_frames().1),
        run.ready_frame().map_or("n/a".into(), |f| f.to_string()),
    );
    exit.write(exit_code);
}
