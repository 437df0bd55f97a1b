//! Thousands to millions of spheres, culled per camera on the GPU by
//! `bevy-gpu-cull` and drawn with one indirect draw.
//!
//! ```text
//! cargo run --release --example spheres                      # window: fly through a field of spheres
//! cargo run --release --example spheres -- --count 1000000
//! cargo run --release --example spheres -- --compare bevy    # the same spheres as ordinary Bevy entities
//! cargo run --release --example spheres -- --count 4e6 --lod  # levels of detail chosen on the GPU
//! cargo run --release --example spheres -- --lod --cross-fade 0.2  # levels cross-fading, dithered
//! cargo run --release --example spheres -- --occlusion       # occlusion culling (two-phase, on the GPU)
//! cargo run --release --example spheres -- --count 4e6 --cells  # read only the cells in view
//! cargo run --release --example spheres -- --headless --frames 120 --screenshot spheres.png
//! cargo run --release --example spheres -- --headless --size 1280x720 --count 1e6 --lod --pass-times  # GPU time of each render pass
//! ```
//!
//! Keys (window): `V` next scan variant, `F` next instance format, `L`
//! shadows on/off (`--shadows` starts with them on), `N` levels of detail
//! on/off (`--lod` starts with them on; the HUD shows the count per level),
//! `O` occlusion culling on/off (`--occlusion` starts with it on), `P` write the scene
//! file of the current view (`gpu-cull-capture.json`, for cull-core's
//! `replay`), `C` freeze
//! the culling frustum (fly away to see what was culled; the frozen frustum is
//! drawn), `Space` auto fly-through on/off, `W A S D Q E` move, right mouse
//! button + drag to look around.

// Bevy systems take many parameters by design.
#![allow(clippy::too_many_arguments)]

mod support;

use bevy::camera::RenderTarget;
use bevy::input::mouse::AccumulatedMouseMotion;
use bevy::prelude::*;
use bevy::render::view::screenshot::{Screenshot, ScreenshotCaptured, save_to_disk};
use bevy_gpu_cull::prelude::*;
use bevy_gpu_cull::{GpuCullInstance, InstanceFormat};
use std::path::PathBuf;
use std::time::Instant;

#[derive(Resource, Clone, Debug)]
struct Args {
    count: usize,
    headless: bool,
    frames: u32,
    screenshot: Option<PathBuf>,
    /// Headless: the scene file of the final view (for `replay`), written
    /// with the summary.
    capture: Option<PathBuf>,
    compare_bevy: bool,
    variant: Option<ScanVariant>,
    format: InstanceFormat,
    width: u32,
    height: u32,
    /// The directional light casts shadows (its 4 cascades culled on the GPU
    /// too); `L` toggles it.
    shadows: bool,
    /// Levels of detail (`GpuCullLod`): ico-spheres of decreasing detail and
    /// an octahedron, and one triangle facing the camera for the farthest; `N` toggles them.
    lod: bool,
    /// With the levels of detail: the width of their cross-fades
    /// (`GpuCullLod::with_cross_fade`), 0 to switch at each threshold.
    cross_fade: f32,
    /// Occlusion culling on the camera: the plugin's (`GpuCullOcclusion`),
    /// or with `--compare bevy` Bevy's own; both with Bevy's depth prepass.
    occlusion: bool,
    /// With `--compare bevy`: Bevy's `NoCpuCulling` on the camera, which
    /// skips its CPU frustum culling of every entity (its GPU culling stays).
    no_cpu_culling: bool,
    /// Cull the batch by cells (`GpuCullCells`): sorted into spatially
    /// compact cells, only the cells in view read where that pays off.
    cells: bool,
    /// Headless: print each render pass's GPU time (`--pass-times`).
    pass_times: bool,
}

/// Thousands to millions of spheres, culled per camera on the GPU and drawn
/// with one indirect draw.
#[derive(argh::FromArgs)]
#[argh(help_triggers("-h", "--help", "help"))]
struct Flags {
    /// spheres (default 100000; 1e6 works)
    #[argh(option, default = "100_000", from_str_fn(support::parse_count))]
    count: usize,
    /// with `bevy`: the same spheres as Bevy entities, culled and drawn by Bevy
    #[argh(option, default = "false", from_str_fn(support::parse_compare))]
    compare: bool,
    /// the scan variant (e.g. subgroup-ballot, ordered); default: the fastest the GPU runs
    #[argh(option, from_str_fn(parse_variant))]
    variant: Option<ScanVariant>,
    /// the instance format: matrix, posquat or packed16 (default posquat)
    #[argh(option, default = "InstanceFormat::PosQuat", from_str_fn(parse_format))]
    format: InstanceFormat,
    /// the sun casts shadows (its cascades culled on the GPU too)
    #[argh(switch)]
    shadows: bool,
    /// levels of detail, chosen on the GPU
    #[argh(switch)]
    lod: bool,
    /// with --lod: the width of the levels' cross-fades (0 switches at each threshold)
    #[argh(option, default = "0.0")]
    cross_fade: f32,
    /// occlusion culling on the camera (the plugin's, or with --compare bevy Bevy's)
    #[argh(switch)]
    occlusion: bool,
    /// with --compare bevy: Bevy's NoCpuCulling on the camera
    #[argh(switch)]
    no_cpu_culling: bool,
    /// sort the batch into cells and cull by cells where that pays off
    #[argh(switch)]
    cells: bool,
    /// render offscreen, without a window, for --frames frames, then exit
    #[argh(switch)]
    headless: bool,
    /// frames to render headless (default 120)
    #[argh(option, default = "120")]
    frames: u32,
    /// headless: save the last frame to this PNG file
    #[argh(option)]
    screenshot: Option<PathBuf>,
    /// headless: write the final view's scene file (for cull-core's replay)
    #[argh(option)]
    capture: Option<PathBuf>,
    /// the frame's size, WxH (default 1280x720; 640x360 headless)
    #[argh(option, from_str_fn(support::parse_size_flag))]
    size: Option<(u32, u32)>,
    /// headless: print each render pass's GPU time at the end
    #[argh(switch)]
    pass_times: bool,
}

fn parse_variant(value: &str) -> Result<ScanVariant, String> {
    ScanVariant::from_name(value).ok_or_else(|| format!("`{value}` is not a scan variant"))
}

fn parse_format(value: &str) -> Result<InstanceFormat, String> {
    InstanceFormat::from_name(value).ok_or_else(|| format!("`{value}`: matrix, posquat or packed16"))
}

fn parse_args() -> Args {
    let flags: Flags = argh::from_env();
    // lavapipe renders every pixel on the CPU: keep headless frames small.
    let (width, height) = flags
        .size
        .unwrap_or(if flags.headless { (640, 360) } else { (1280, 720) });
    Args {
        count: flags.count,
        headless: flags.headless,
        frames: flags.frames,
        screenshot: flags.screenshot,
        capture: flags.capture,
        compare_bevy: flags.compare,
        variant: flags.variant,
        format: flags.format,
        width,
        height,
        shadows: flags.shadows,
        lod: flags.lod,
        cross_fade: flags.cross_fade,
        occlusion: flags.occlusion,
        no_cpu_culling: flags.no_cpu_culling,
        pass_times: flags.pass_times,
        cells: flags.cells,
    }
}

fn main() {
    let args = parse_args();
    if !args.headless {
        support::require_display(
            "spheres",
            "cargo run --release --example spheres -- --headless --frames 120 --screenshot spheres.png",
        );
    }
    let mut app = App::new();
    support::add_default_plugins(
        &mut app,
        args.headless,
        "bevy-gpu-cull: spheres",
        args.width,
        args.height,
    );
    app.add_plugins(GpuCullPlugin {
        settings: GpuCullSettings {
            variant: args.variant,
            format: args.format,
        },
        ..default()
    })
    .insert_resource(args.clone())
    .insert_resource(Fly {
        auto: true,
        t: 0.0,
        yaw: 0.0,
        pitch: -0.25,
    })
    .insert_resource(FrameTimes {
        started: Some(Instant::now()),
        ..default()
    })
    .add_systems(Startup, setup)
    .add_systems(Update, (fly, keys, hud, draw_frozen_frustum, record_frame))
    .add_systems(Last, finish_headless.run_if(|args: Res<Args>| args.headless));
    if args.pass_times {
        support::add_pass_times(&mut app);
        app.add_systems(Last, print_pass_times);
    }
    app.run();
}

/// The field: a square grid of spheres on gently rolling ground, colored by position.
fn field(count: usize) -> (Vec<GpuCullInstance>, f32) {
    let side = (count as f32).sqrt().ceil() as usize;
    let spacing = 3.0;
    let half = side as f32 * spacing / 2.0;
    let instances = (0..count)
        .map(|i| {
            let (x, z) = (
                (i % side) as f32 * spacing - half,
                (i / side) as f32 * spacing - half,
            );
            let y = (x * 0.05).sin() * 2.0 + (z * 0.07).cos() * 2.0;
            let hue = ((x / half + 1.0) * 180.0 + (z / half) * 60.0).rem_euclid(360.0);
            let color = LinearRgba::from(Color::hsl(hue, 0.7, 0.55));
            GpuCullInstance {
                scale: 1.0,
                ..GpuCullInstance::new(Vec3::new(x, y, z), color)
            }
        })
        .collect();
    (instances, half)
}

#[derive(Resource)]
struct Field {
    half: f32,
}

#[derive(Component)]
struct MainCamera;

#[derive(Component)]
struct Hud;

#[derive(Resource)]
struct Fly {
    auto: bool,
    t: f32,
    yaw: f32,
    pitch: f32,
}

#[derive(Resource, Default)]
struct FrameTimes {
    /// Frames since start.
    frames: u32,
    /// The frame from which the scene was ready: the batch drawn (Bevy's
    /// path: its meshes) with no pipeline left to compile
    /// (`support::PipelinesSettled`). Frames before it time a scene that is
    /// not drawn yet; on a machine whose driver had not cached the
    /// pipelines that was most of a 400-frame run.
    ready_at: Option<u32>,
    /// The first frame that drew the batch (Bevy's path: 0).
    first_drawn_frame: Option<u32>,
    /// The timed frames' times (from `WARM_UP` frames after `ready_at`).
    wall_ms: Vec<f64>,
    /// The last frame's time, timed or not (the HUD's).
    last_ms: f64,
    last: Option<Instant>,
    /// Process CPU seconds and frame number when warm-up ended.
    cpu_start: Option<(f64, u32)>,
    /// The plugin's render frame when the headless camera stopped.
    stopped_at: Option<u64>,
    /// The screenshot was requested (once the culled spheres were drawn).
    screenshot_requested: bool,
    /// The screenshot was captured and written (it arrives a few frames
    /// after it is requested, later on a busy machine).
    screenshot_saved: bool,
    /// Process start, and the seconds from it to the scene's build (the
    /// `Startup` system's end) and to the first frame that drew the batch.
    started: Option<Instant>,
    built_s: Option<f64>,
    first_drawn_s: Option<f64>,
    /// Frames from the camera's stop to the frame the summary's count came
    /// back in.
    count_wait_frames: u32,
}

/// The spheres' levels of detail, finest first: ico-spheres of 320, 80 and
/// 20 triangles (`Sphere::mesh().ico(2 | 1 | 0)`), an octahedron of 8
/// (`octahedron`), then an impostor: one triangle facing the camera
/// (`impostor`, `GpuCullLodLevel::facing_camera`). Each level is drawn down to the
/// size at which the next, coarser one strays from the sphere by at most
/// `LOD_ERROR` (`lod_thresholds`); spheres smaller than `LOD_CUT_OFF` are
/// not drawn. Sizes are fractions of the screen height (the bounding
/// sphere's diameter, as `GpuCullLod` measures), so the levels look the
/// same at any resolution.
const LOD_ERROR: f32 = 0.64 / 720.0;
/// The smallest size drawn: the bounding sphere a pixel across at 720
/// pixels (the drawn sphere 0.6 pixels).
const LOD_CUT_OFF: f32 = 0.0015;

/// How far a mesh strays from the sphere of radius `r` it stands for, as a
/// fraction of `r`: its farthest vertex outside the sphere, or its face
/// nearest the centre inside it, whichever is farther. For a mesh facing the
/// camera, what shows is its outline against the sphere's disc: its
/// farthest vertex from the centre in its plane, or its outline's edge
/// nearest the centre (a convex outline around the centre: its vertices in
/// order of angle).
fn sphere_error(mesh: &Mesh, r: f32, facing_camera: bool) -> f32 {
    use bevy::mesh::VertexAttributeValues;
    let Some(VertexAttributeValues::Float32x3(positions)) = mesh.attribute(Mesh::ATTRIBUTE_POSITION) else {
        return f32::INFINITY;
    };
    let p: Vec<Vec3> = positions.iter().map(|p| Vec3::from_array(*p)).collect();
    if facing_camera {
        let mut outline: Vec<Vec2> = p.iter().map(|p| p.truncate()).collect();
        outline.sort_by(|a, b| a.to_angle().total_cmp(&b.to_angle()));
        let outside = outline.iter().map(|v| v.length() - r).fold(0.0, f32::max);
        let nearest_edge = (0..outline.len())
            .map(|i| {
                let (a, b) = (outline[i], outline[(i + 1) % outline.len()]);
                (b - a).perp().normalize().dot(a).abs()
            })
            .fold(f32::INFINITY, f32::min);
        return outside.max(r - nearest_edge) / r;
    }
    let outside = p.iter().map(|p| p.length() - r).fold(0.0, f32::max);
    let indices: Vec<usize> = mesh
        .indices()
        .map_or((0..p.len()).collect(), |i| i.iter().collect());
    let nearest_face = indices
        .chunks_exact(3)
        .map(|t| {
            let (a, b, c) = (p[t[0]], p[t[1]], p[t[2]]);
            (b - a).cross(c - a).normalize().dot(a).abs()
        })
        .fold(f32::INFINITY, f32::min);
    outside.max(r - nearest_face) / r
}

/// Each level's smallest size: where the next level's error (`sphere_error`
/// of a sphere of radius `r`, whose bounding sphere has radius `bound`)
/// reaches `LOD_ERROR`, then `LOD_CUT_OFF`. A size `s` is a bounding sphere
/// of radius `s / 2`, and so a drawn sphere of radius `s·r / (2·bound)`.
fn lod_thresholds(levels: &[(Mesh, bool)], r: f32, bound: f32) -> Vec<f32> {
    let sizes: Vec<f32> = levels
        .iter()
        .skip(1)
        .map(|(coarser, facing)| 2.0 * bound * LOD_ERROR / (r * sphere_error(coarser, r, *facing)))
        .chain([LOD_CUT_OFF])
        .collect();
    // Coarser meshes stray more: the sizes descend (GpuCullLod's rule).
    debug_assert!(sizes.windows(2).all(|w| w[0] > w[1]), "{sizes:?}");
    sizes
}

/// A mesh of `positions` shared by its `faces`, each wound
/// counter-clockwise seen from outside, with a sphere's normals (each
/// vertex's direction from the centre). At the sizes the coarse levels are
/// drawn (a few pixels) their shape does not show, and shared vertices run
/// the vertex shader once each, where Bevy's polyhedra give each face its
/// own vertices (flat normals): at 1M spheres the coarse levels are most of
/// the frame's vertices.
fn shared_vertex_mesh(positions: &[Vec3], faces: &[[u32; 3]]) -> Mesh {
    use bevy::asset::RenderAssetUsages;
    use bevy::mesh::{Indices, PrimitiveTopology};
    let mut indices = Vec::new();
    for &face in faces {
        let [a, b, c] = face.map(|i| positions[i as usize]);
        // Wound so that the face's normal points away from the centre.
        let outward = (b - a).cross(c - a).dot(a + b + c) > 0.0;
        indices.extend(if outward {
            face
        } else {
            [face[0], face[2], face[1]]
        });
    }
    let extent = positions
        .iter()
        .map(|p| p.abs().max_element())
        .fold(0.0, f32::max);
    let normals: Vec<[f32; 3]> = positions.iter().map(|p| p.normalize().to_array()).collect();
    let uvs: Vec<[f32; 2]> = positions
        .iter()
        .map(|p| {
            [
                0.5 + p.x.atan2(p.z) / std::f32::consts::TAU,
                0.5 - p.y / (2.0 * extent),
            ]
        })
        .collect();
    Mesh::new(PrimitiveTopology::TriangleList, RenderAssetUsages::default())
        .with_inserted_indices(Indices::U32(indices))
        .with_inserted_attribute(
            Mesh::ATTRIBUTE_POSITION,
            positions.iter().map(|p| p.to_array()).collect::<Vec<_>>(),
        )
        .with_inserted_attribute(Mesh::ATTRIBUTE_NORMAL, normals)
        .with_inserted_attribute(Mesh::ATTRIBUTE_UV_0, uvs)
}

/// The second coarsest level: an octahedron of 8 triangles on 6 vertices
/// for a sphere of radius `r`, its vertices at `2r / (1 + 1/√3)` from the
/// centre so that they stray outside the sphere as far as its faces stray
/// inside (0.268 r). Within the sphere's bounding sphere (`√3 r`, around
/// its box), which is what culling tests.
fn octahedron(r: f32) -> Mesh {
    let a = 2.0 * r / (1.0 + 1.0 / 3f32.sqrt());
    let positions = [Vec3::X, -Vec3::X, Vec3::Y, -Vec3::Y, Vec3::Z, -Vec3::Z].map(|p| p * a);
    let faces: Vec<[u32; 3]> = [0u32, 1]
        .iter()
        .flat_map(|&x| [2u32, 3].map(move |y| [x, y]))
        .flat_map(|[x, y]| [4u32, 5].map(move |z| [x, y, z]))
        .collect();
    shared_vertex_mesh(&positions, &faces)
}

/// The coarsest level, an impostor: one triangle in the mesh's XY plane,
/// drawn facing the camera (`GpuCullLodLevel::facing_camera`), its corners at
/// `4r/3` from the centre so that they stray outside the sphere's disc as
/// far as its edges stray inside (`r/3`). Its normals lean out from the
/// centre, so that it is lit like the sphere it stands for, brighter on the
/// side facing the light. It replaced a tetrahedron (4 triangles on 4
/// vertices, straying 0.567 r): the impostor is drawn from larger sizes
/// with one triangle and 3 vertices.
fn impostor(r: f32) -> Mesh {
    use bevy::asset::RenderAssetUsages;
    use bevy::mesh::{Indices, PrimitiveTopology};
    let a = 4.0 * r / 3.0;
    // Counter-clockwise seen from +Z, the side that faces the camera.
    let corners: Vec<Vec2> = [90.0f32, 210.0, 330.0]
        .iter()
        .map(|deg| Vec2::from_angle(deg.to_radians()))
        .collect();
    let positions: Vec<[f32; 3]> = corners.iter().map(|c| (*c * a).extend(0.0).to_array()).collect();
    let normals: Vec<[f32; 3]> = corners
        .iter()
        .map(|c| c.extend(0.5).normalize().to_array())
        .collect();
    let uvs: Vec<[f32; 2]> = corners
        .iter()
        .map(|c| [0.5 + 0.5 * c.x, 0.5 - 0.5 * c.y])
        .collect();
    Mesh::new(PrimitiveTopology::TriangleList, RenderAssetUsages::default())
        .with_inserted_indices(Indices::U32(vec![0, 1, 2]))
        .with_inserted_attribute(Mesh::ATTRIBUTE_POSITION, positions)
        .with_inserted_attribute(Mesh::ATTRIBUTE_NORMAL, normals)
        .with_inserted_attribute(Mesh::ATTRIBUTE_UV_0, uvs)
}

/// The levels, kept to toggle them (`N`).
#[derive(Resource)]
struct SphereLevels(GpuCullLod);

/// Frames of a ready scene (`FrameTimes::ready_at`) not timed (a run of
/// `--frames N` times N - WARM_UP): the first frames after the scene is
/// drawn still upload and fill caches.
const WARM_UP: u32 = 20;
/// Frames the headless camera holds still at the end.
const CAMERA_HOLD: u32 = 30;

/// CPU time of the whole process (all threads), where Linux tells it.
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may contain spaces) start at ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0) // USER_HZ is 100 on Linux
}

fn setup(
    mut commands: Commands,
    args: Res<Args>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
    mut images: ResMut<Assets<Image>>,
    mut times: ResMut<FrameTimes>,
) {
    let (instances, half) = field(args.count);
    commands.insert_resource(Field { half });
    let mesh = meshes.add(Sphere::new(0.8).mesh().ico(2).expect("a small icosphere"));
    if args.compare_bevy {
        // Bevy's own path: one entity per sphere, batched and culled by Bevy.
        let palette: Vec<Handle<StandardMaterial>> = (0..12)
            .map(|i| materials.add(StandardMaterial::from(Color::hsl(i as f32 * 30.0, 0.7, 0.55))))
            .collect();
        commands.spawn_batch(
            instances
                .iter()
                .enumerate()
                .map(|(i, inst)| {
                    (
                        Mesh3d(mesh.clone()),
                        MeshMaterial3d(palette[i % palette.len()].clone()),
                        Transform::from_translation(inst.position),
                    )
                })
                .collect::<Vec<_>>(),
        );
    } else {
        let ico = |n| Sphere::new(0.8).mesh().ico(n).expect("a small icosphere");
        let levels = [
            (ico(2), false),
            (ico(1), false),
            (ico(0), false),
            (octahedron(0.8), false),
            (impostor(0.8), true),
        ];
        // GpuCullBounds: the sphere around the box around the finest mesh.
        use bevy::camera::primitives::MeshAabb;
        let bound = Vec3::from(
            levels[0]
                .0
                .compute_aabb()
                .expect("a mesh with positions")
                .half_extents,
        )
        .length();
        let thresholds = lod_thresholds(&levels, 0.8, bound);
        let lod = SphereLevels(
            GpuCullLod::new(levels.into_iter().zip(thresholds).enumerate().map(
                |(k, ((level, facing), size))| {
                    // The finest level is the batch's own mesh.
                    let handle = if k == 0 { mesh.clone() } else { meshes.add(level) };
                    let level = GpuCullLodLevel::new(handle, size);
                    if facing { level.facing_camera() } else { level }
                },
            ))
            .with_cross_fade(args.cross_fade),
        );
        let mut batch = commands.spawn((Mesh3d(mesh), GpuCullInstances::new(instances)));
        if args.lod {
            batch.insert(lod.0.clone());
        }
        if args.cells {
            batch.insert(GpuCullCells::default());
        }
        commands.insert_resource(lod);
    }
    commands.spawn((
        DirectionalLight {
            illuminance: 8_000.0,
            shadow_maps_enabled: args.shadows,
            ..default()
        },
        Transform::from_xyz(1.0, 3.0, 2.0).looking_at(Vec3::ZERO, Vec3::Y),
    ));
    commands.insert_resource(GlobalAmbientLight {
        brightness: 400.0,
        ..default()
    });
    let mut camera = commands.spawn((
        Camera3d::default(),
        MainCamera,
        Transform::from_xyz(0.0, 8.0, 0.0),
    ));
    if args.occlusion {
        camera.insert(support::occlusion_culling());
    }
    if args.no_cpu_culling {
        camera.insert(bevy::camera::visibility::NoCpuCulling);
    }
    if args.headless {
        camera.insert(support::headless_target(&mut images, args.width, args.height));
    } else {
        commands.spawn((
            Text::new(""),
            TextFont {
                font_size: FontSize::Px(16.0),
                ..default()
            },
            Node {
                position_type: PositionType::Absolute,
                top: Val::Px(8.0),
                left: Val::Px(8.0),
                ..default()
            },
            Hud,
        ));
    }
    times.built_s = times.started.map(|t| t.elapsed().as_secs_f64());
}

/// The automatic fly-through follows a circle across the field, looking
/// ahead, so most spheres are behind or beside the camera; the last frames of
/// a headless run hold still so the asynchronous counts settle.
fn fly(
    mut fly: ResMut<Fly>,
    args: Res<Args>,
    field: Res<Field>,
    times: Res<FrameTimes>,
    time: Res<Time>,
    keys: Res<ButtonInput<KeyCode>>,
    mouse: Res<ButtonInput<MouseButton>>,
    motion: Res<AccumulatedMouseMotion>,
    mut camera: Query<&mut Transform, With<MainCamera>>,
) {
    let Ok(mut transform) = camera.single_mut() else {
        return;
    };
    if fly.auto {
        let step = if args.headless {
            // Deterministic: by frame from the scene's readiness (still
            // until then), and frozen for the last frames.
            if times.ready_at.is_none() || times.frames_ready() + CAMERA_HOLD >= args.frames {
                0.0
            } else {
                0.01
            }
        } else {
            time.delta_secs() * 0.05
        };
        fly.t += step;
        let r = field.half * 0.6;
        let at = Vec3::new(r * fly.t.cos(), 10.0, r * fly.t.sin());
        let ahead = Vec3::new(-fly.t.sin(), -0.15, fly.t.cos());
        *transform = Transform::from_translation(at).looking_to(ahead, Vec3::Y);
        return;
    }
    if mouse.pressed(MouseButton::Right) {
        fly.yaw -= motion.delta.x * 0.003;
        fly.pitch = (fly.pitch - motion.delta.y * 0.003).clamp(-1.5, 1.5);
    }
    transform.rotation = Quat::from_euler(EulerRot::YXZ, fly.yaw, fly.pitch, 0.0);
    let speed = if keys.pressed(KeyCode::ShiftLeft) {
        120.0
    } else {
        30.0
    } * time.delta_secs();
    let (forward, right) = (*transform.forward(), *transform.right());
    for (key, dir) in [
        (KeyCode::KeyW, forward),
        (KeyCode::KeyS, -forward),
        (KeyCode::KeyD, right),
        (KeyCode::KeyA, -right),
        (KeyCode::KeyE, Vec3::Y),
        (KeyCode::KeyQ, -Vec3::Y),
    ] {
        if keys.pressed(key) {
            transform.translation += dir * speed;
        }
    }
}

fn keys(
    keys: Res<ButtonInput<KeyCode>>,
    mut lights: Query<&mut DirectionalLight>,
    batches: Query<Entity, With<GpuCullInstances>>,
    mut captures: MessageWriter<GpuCullCaptureScene>,
    mut settings: ResMut<GpuCullSettings>,
    stats: Res<GpuCullStats>,
    mut fly: ResMut<Fly>,
    mut commands: Commands,
    camera: Query<(Entity, &Camera, &GlobalTransform, Option<&GpuCullFrustumOverride>), With<MainCamera>>,
    (levels, with_levels): (Option<Res<SphereLevels>>, Query<(), With<GpuCullLod>>),
    occluding: Query<(), (With<MainCamera>, With<GpuCullOcclusion>)>,
) {
    // O: occlusion culling on/off (the camera keeps Bevy's depth prepass
    // once it has had it).
    if keys.just_pressed(KeyCode::KeyO)
        && let Ok((camera, ..)) = camera.single()
    {
        if occluding.is_empty() {
            commands.entity(camera).insert(support::occlusion_culling());
        } else {
            commands.entity(camera).remove::<GpuCullOcclusion>();
        }
    }
    if keys.just_pressed(KeyCode::KeyV) {
        // Only compiled-in variants are offered; the plugin falls back from
        // ones the adapter lacks.
        let all: Vec<ScanVariant> = ScanVariant::compiled().collect();
        let current = settings.variant.or(stats.variant).unwrap_or(all[0]);
        let next = all
            .iter()
            .position(|v| *v == current)
            .map_or(0, |i| (i + 1) % all.len());
        settings.variant = Some(all[next]);
    }
    if keys.just_pressed(KeyCode::KeyF) {
        let all = InstanceFormat::ALL;
        let next = all
            .iter()
            .position(|f| *f == settings.format)
            .map_or(0, |i| (i + 1) % all.len());
        settings.format = all[next];
    }
    // P: the scene file of what the camera culls, for `replay` (bug reports).
    if keys.just_pressed(KeyCode::KeyP)
        && let (Ok((camera, ..)), Ok(batch)) = (camera.single(), batches.single())
    {
        captures.write(GpuCullCaptureScene {
            camera,
            batch,
            path: "gpu-cull-capture.json".into(),
        });
    }
    if keys.just_pressed(KeyCode::KeyN)
        && let (Some(levels), Ok(batch)) = (&levels, batches.single())
    {
        if with_levels.contains(batch) {
            commands.entity(batch).remove::<GpuCullLod>();
        } else {
            commands.entity(batch).insert(levels.0.clone());
        }
    }
    if keys.just_pressed(KeyCode::KeyL) {
        for mut light in &mut lights {
            light.shadow_maps_enabled = !light.shadow_maps_enabled;
        }
    }
    if keys.just_pressed(KeyCode::Space) {
        fly.auto = !fly.auto;
        if let Ok((_, _, transform, _)) = camera.single() {
            let (yaw, pitch, _) = transform.rotation().to_euler(EulerRot::YXZ);
            (fly.yaw, fly.pitch) = (yaw, pitch);
        }
    }
    if keys.just_pressed(KeyCode::KeyC)
        && let Ok((entity, cam, transform, frozen)) = camera.single()
    {
        if frozen.is_some() {
            commands.entity(entity).remove::<GpuCullFrustumOverride>();
        } else {
            let clip_from_world = cam.clip_from_view() * transform.to_matrix().inverse();
            commands
                .entity(entity)
                .insert(GpuCullFrustumOverride { clip_from_world });
        }
    }
}

fn draw_frozen_frustum(mut gizmos: Gizmos, camera: Query<&GpuCullFrustumOverride, With<MainCamera>>) {
    let Ok(frozen) = camera.single() else {
        return;
    };
    let world_from_clip = frozen.clip_from_world.inverse();
    // Reverse-Z: depth 1 is the near plane; 0.002 is far out (the far plane is at infinity).
    let corner = |x: f32, y: f32, z: f32| world_from_clip.project_point3(Vec3::new(x, y, z));
    let near = [
        corner(-1., -1., 1.),
        corner(1., -1., 1.),
        corner(1., 1., 1.),
        corner(-1., 1., 1.),
    ];
    let far = [
        corner(-1., -1., 0.002),
        corner(1., -1., 0.002),
        corner(1., 1., 0.002),
        corner(-1., 1., 0.002),
    ];
    let color = Color::srgb(1.0, 0.9, 0.2);
    for i in 0..4 {
        gizmos.line(near[i], near[(i + 1) % 4], color);
        gizmos.line(far[i], far[(i + 1) % 4], color);
        gizmos.line(near[i], far[i], color);
    }
}

fn hud(
    args: Res<Args>,
    stats: Res<GpuCullStats>,
    settings: Res<GpuCullSettings>,
    times: Res<FrameTimes>,
    fly: Res<Fly>,
    frozen: Query<(), (With<MainCamera>, With<GpuCullFrustumOverride>)>,
    lights: Query<&DirectionalLight>,
    mut text: Query<&mut Text, With<Hud>>,
    with_levels: Query<(), With<GpuCullLod>>,
    occluding: Query<(), (With<MainCamera>, With<GpuCullOcclusion>)>,
) {
    let shadows = lights.iter().any(|l| l.shadow_maps_enabled);
    let lod_on = !with_levels.is_empty();
    let Ok(mut text) = text.single_mut() else {
        return;
    };
    let frame_ms = times.last_ms;
    **text = if args.compare_bevy {
        format!(
            "Bevy's own path: {} entities | frame {frame_ms:.2} ms",
            args.count
        )
    } else {
        let visible: u32 = stats.visible.values().sum();
        let levels = stats
            .visible_per_level
            .values()
            .next()
            .filter(|_| lod_on)
            .map_or(String::new(), |l| format!(" (per level {l:?})"));
        let cells = stats.cells.values().next().map_or(String::new(), |c| {
            format!(
                " | cells kept {} / {}{}",
                c.kept,
                c.cells,
                if c.by_cells { "" } else { " (culled flat)" }
            )
        });
        format!(
            "visible {visible}{levels}{cells} / {} | variant {} | format {} | GPU cull {} | frame {frame_ms:.2} ms\n\
             [V] variant  [F] format  [L] shadows {}  [N] levels of detail {}  [O] occlusion culling {}  [C] freeze culling{}  [Space] auto fly {}  [WASDQE + right drag] fly",
            args.count,
            stats.variant.map_or("-", |v| v.name()),
            settings.format.name(),
            stats.gpu_time_ms.map_or("n/a".into(), |ms| format!("{ms:.3} ms")),
            if shadows { "on" } else { "off" },
            if lod_on { "on" } else { "off" },
            if occluding.is_empty() { "off" } else { "on" },
            if frozen.is_empty() { "" } else { " (frozen)" },
            if fly.auto { "on" } else { "off" },
        )
    };
}

impl FrameTimes {
    /// Frames run since the scene was ready (0 before).
    fn frames_ready(&self) -> u32 {
        self.ready_at.map_or(0, |at| self.frames - at)
    }
}

fn record_frame(
    mut times: ResMut<FrameTimes>,
    args: Res<Args>,
    stats: Res<GpuCullStats>,
    settled: Res<support::PipelinesSettled>,
) {
    let drawn = stats.drawn_frames > 0 || args.compare_bevy;
    if times.first_drawn_s.is_none() && drawn {
        times.first_drawn_s = times.started.map(|t| t.elapsed().as_secs_f64());
        times.first_drawn_frame = Some(times.frames);
    }
    if times.ready_at.is_none() && drawn && settled.get() {
        times.ready_at = Some(times.frames);
    }
    if times.stopped_at.is_some() {
        times.count_wait_frames += 1;
    }
    if args.headless
        && times.stopped_at.is_none()
        && times.ready_at.is_some()
        && times.frames_ready() + CAMERA_HOLD >= args.frames
    {
        times.stopped_at = Some(stats.render_frame);
    }
    let now = Instant::now();
    if let Some(last) = times.last {
        times.last_ms = (now - last).as_secs_f64() * 1e3;
        if times.ready_at.is_some() && times.frames_ready() >= WARM_UP {
            let ms = times.last_ms;
            times.wall_ms.push(ms);
        }
    }
    if times.ready_at.is_some() && times.frames_ready() == WARM_UP {
        times.cpu_start = process_cpu_seconds().map(|s| (s, times.frames));
    }
    times.last = Some(now);
    times.frames += 1;
}

/// Headless: takes the screenshot near the end, then prints one summary line
/// with the CPU reference for the final camera, and exits.
fn finish_headless(
    args: Res<Args>,
    mut times: ResMut<FrameTimes>,
    stats: Res<GpuCullStats>,
    settings: Res<GpuCullSettings>,
    mut commands: Commands,
    camera: Query<(Entity, &Camera, &GlobalTransform), With<MainCamera>>,
    batch: Query<(Entity, &GpuCullInstances, &GpuCullBounds, Option<&GpuCullLod>)>,
    targets: Query<&RenderTarget, With<MainCamera>>,
    mut exit: MessageWriter<AppExit>,
    mut captures: MessageWriter<GpuCullCaptureScene>,
    settled: Res<support::PipelinesSettled>,
) {
    // The screenshot near the end, once the culled spheres have been drawn:
    // their pipeline compiles asynchronously, and until it has, frames show
    // only the background (for a second or more on lavapipe under load).
    let drawn = args.compare_bevy || stats.drawn_frames >= 2;
    if !times.screenshot_requested
        && times.ready_at.is_some()
        && times.frames_ready() >= args.frames.saturating_sub(6)
        && drawn
        && let (Some(path), Ok(RenderTarget::Image(target))) = (&args.screenshot, targets.single())
    {
        times.screenshot_requested = true;
        commands
            .spawn(Screenshot::image(target.handle.clone()))
            .observe(save_to_disk(path.clone()))
            .observe(|_: On<ScreenshotCaptured>, mut times: ResMut<FrameTimes>| {
                times.screenshot_saved = true;
            });
    }
    if times.ready_at.is_none() && times.frames >= args.frames + 2000 {
        eprintln!(
            "spheres: the scene was not ready after {} frames (drawn_frames={}, pipelines settled: {})",
            times.frames,
            stats.drawn_frames,
            settled.get()
        );
        exit.write(AppExit::error());
        return;
    }
    if times.frames_ready() < args.frames {
        return;
    }
    // Counts are read back a few frames late: report one culled after the
    // camera stopped (a few more frames at most), and exit once the
    // screenshot is on disk.
    let fresh = times.stopped_at.is_some_and(|stop| stats.counts_frame > stop + 2);
    let waiting = (!args.compare_bevy && !fresh) || (args.screenshot.is_some() && !times.screenshot_saved);
    if waiting && times.frames_ready() < args.frames + 1000 {
        return;
    }
    let mut wall = times.wall_ms.clone();
    wall.sort_by(f64::total_cmp);
    let median = wall.get(wall.len() / 2).copied().unwrap_or(f64::NAN);
    let visible: Option<u32> = (!args.compare_bevy).then(|| stats.visible.values().sum());
    let cpu_ms = match (times.cpu_start, process_cpu_seconds()) {
        (Some((start, frame)), Some(now)) if times.frames > frame => {
            format!("{:.2}", (now - start) * 1e3 / (times.frames - frame) as f64)
        }
        _ => "n/a".into(),
    };
    let reference = match (camera.single(), batch.single()) {
        (Ok((camera, cam, transform)), Ok((batch, instances, bounds, lod))) => {
            if let Some(path) = &args.capture {
                captures.write(GpuCullCaptureScene {
                    camera,
                    batch,
                    path: path.clone(),
                });
            }
            // With levels of detail, the sum over the levels' references.
            let metric =
                bevy_gpu_cull::cull_core::SizeMetric::from_view(cam.clip_from_view(), transform.to_matrix());
            bevy_gpu_cull::cull_core::Frustum::from_view(cam.clip_from_view(), transform.to_matrix(), None)
                .and_then(|frustum| match lod {
                    Some(lod) => frustum.detail_levels_overlapping(
                        metric,
                        &lod.levels.iter().map(|l| l.min_screen_size).collect::<Vec<_>>(),
                        lod.cross_fade,
                    ),
                    None => Ok(vec![frustum]),
                })
                .and_then(|frusta| {
                    frusta.iter().try_fold(
                        bevy_gpu_cull::cull_core::cpu::Reference::default(),
                        |mut sum, frustum| {
                            let r = instances.reference_on_cpu(*bounds, frustum, settings.format)?;
                            sum.visible.extend(r.visible);
                            sum.borderline.extend(r.borderline);
                            Ok(sum)
                        },
                    )
                })
                .ok()
        }
        _ => None,
    };
    let secs = |s: Option<f64>| s.map_or("n/a".into(), |s| format!("{s:.1}"));
    println!(
        "spheres: frames={} median_frame_ms={median:.2} cpu_ms_per_frame={cpu_ms} visible={} total={} cpu_reference={} cpu_borderline={} variant={} path={} shadows={} lod={} occlusion={} no_cpu_culling={} cells={} visible_per_level={} gpu_cull_ms={} shadow_views={} built_s={} first_drawn_s={} summary_s={} count_wait_frames={} first_drawn_frame={} pipelines_waiting_frames={} first_bevy_mesh_frame={} first_batch_frame={} ready_frame={} timed_frames={}",
        times.frames,
        visible.map_or("n/a".into(), |v| v.to_string()),
        args.count,
        reference
            .as_ref()
            .map_or("n/a".into(), |r| r.visible.len().to_string()),
        reference
            .as_ref()
            .map_or("n/a".into(), |r| r.borderline.len().to_string()),
        stats.variant.map_or("n/a", |v| v.name()),
        if args.compare_bevy { "bevy" } else { "gpu-cull" },
        args.shadows,
        args.lod,
        args.occlusion,
        args.no_cpu_culling,
        stats.cells.values().next().map_or("n/a".into(), |c| format!(
            "{}/{}{}",
            c.kept,
            c.cells,
            if c.by_cells { "" } else { "(flat)" }
        )),
        stats.visible_per_level.values().next().map_or("n/a".into(), |l| l
            .iter()
            .map(|n| n.to_string())
            .collect::<Vec<_>>()
            .join("/")),
        stats.gpu_time_ms.map_or("n/a".into(), |ms| format!("{ms:.3}")),
        stats.shadow_visible.len(),
        secs(times.built_s),
        secs(times.first_drawn_s),
        secs(times.started.map(|t| t.elapsed().as_secs_f64())),
        times.count_wait_frames,
        times.first_drawn_frame.map_or("n/a".into(), |f| f.to_string()),
        settled.waiting_frames(),
        support::frame_or_na(settled.first_drawn_frames().0),
        support::frame_or_na(settled.first_drawn_frames().1),
        times.ready_at.map_or("n/a".into(), |f| f.to_string()),
        times.wall_ms.len(),
    );
    exit.write(AppExit::Success);
}

/// `--pass-times`: once the timed frames are done, every render pass's
/// times ([`support::print_pass_times`]).
fn print_pass_times(times: Res<FrameTimes>, args: Res<Args>, store: Res<bevy::diagnostic::DiagnosticsStore>) {
    if times.frames_ready() == args.frames {
        support::print_pass_times(&store);
    }
}
