//! The plugin against Bevy's entity path: thousands to millions of spheres,
//! culled per camera on the GPU by `bevy-gpu-cull` and drawn with an
//! indirect draw per batch, or the same spheres as Bevy entities
//! (`--compare bevy`), under the same flight over the field, in the same
//! colors: twelve materials in turn (twelve batches, culled and drawn
//! together, or entities with twelve materials), or with `--colors
//! position` each sphere its own (one batch with the instances' colors, or
//! entities with a material each). The benchmarks run it headless and
//! compare the summaries' frame times; the `explorer` example is the same
//! field with keys that switch the plugin's settings.
//!
//! ```text
//! cargo run --release --example spheres                      # window: fly over a field of spheres
//! cargo run --release --example spheres -- --compare bevy    # the same spheres as ordinary Bevy entities
//! cargo run --release --example spheres -- --headless --size 1280x720 --count 1e6 --json
//! cargo run --release --example spheres -- --headless --size 1280x720 --count 1e6 --compare bevy --json
//! cargo run --release --example spheres -- --headless --size 1280x720 --count 1e6 --lod --pass-times --json
//! ```

// Bevy systems take many parameters by design.
#![allow(clippy::too_many_arguments)]

mod support;

use bevy::camera::RenderTarget;
use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;
use std::path::PathBuf;
use support::fly_over::{FlyOver, FlyOverCamera, FlyOverPlugin};
use support::sphere_levels::{SPHERE_RADIUS, sphere_field, sphere_levels};
use support::sphere_scene::{
    SphereColors, parse_sphere_colors, spawn_bevy_spheres, spawn_sphere_batches, spawn_sun,
};
use support::{HeadlessRun, HeadlessStep, PipelinesSettled, SceneArgs};

/// Thousands to millions of spheres, culled per camera on the GPU and drawn
/// with an indirect draw per batch, or drawn by Bevy's entity path.
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
    #[argh(option, from_str_fn(support::parse_variant))]
    variant: Option<GpuCullScanVariant>,
    /// the instance format: matrix, posquat or packed16 (default posquat)
    #[argh(
        option,
        default = "GpuCullInstanceFormat::PosQuat",
        from_str_fn(support::parse_format)
    )]
    format: GpuCullInstanceFormat,
    /// palette (default): twelve materials in turn, as twelve batches (or,
    /// with --compare bevy, entities with twelve materials); position: each
    /// sphere its color by its place, as one batch with the instances'
    /// colors (or entities with a material each)
    #[argh(option, default = "SphereColors::Palette", from_str_fn(parse_sphere_colors))]
    colors: SphereColors,
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
    /// cull and draw each batch on its own, not the twelve palette batches
    /// together (GpuCullSettings::merge_batches off)
    #[argh(switch)]
    no_merge: bool,
    /// render offscreen, without a window, for --frames frames, then exit
    #[argh(switch)]
    headless: bool,
    /// frames to render headless once the scene is ready (default 120)
    #[argh(option, default = "120")]
    frames: u32,
    /// headless: save the last frame to this PNG file
    #[argh(option)]
    screenshot: Option<PathBuf>,
    /// the frame's size, WxH (default 1280x720; 480x270 headless)
    #[argh(option, from_str_fn(support::parse_size_flag))]
    size: Option<(u32, u32)>,
    /// headless: add each render pass's GPU time to the summary
    #[argh(switch)]
    pass_times: bool,
    /// headless: the summary as one JSON line
    #[argh(switch)]
    json: bool,
}

/// What only this example was asked for.
#[derive(Resource)]
struct Options {
    shadows: bool,
    cross_fade: f32,
    colors: SphereColors,
}

fn main() {
    let flags: Flags = argh::from_env();
    let args = SceneArgs {
        compare_bevy: flags.compare,
        lod: flags.lod,
        occlusion: flags.occlusion,
        no_cpu_culling: flags.no_cpu_culling,
        cells: flags.cells,
        pass_times: flags.pass_times,
        ..support::scene_args!(flags)
    };
    let mut app = support::example_app("spheres", &args);
    let headless = args.headless;
    app.add_plugins((GpuCullPlugin::default(), FlyOverPlugin))
        .insert_resource(GpuCullSettings {
            variant: flags.variant,
            format: flags.format,
            merge_batches: !flags.no_merge,
            ..default()
        })
        .insert_resource(Options {
            shadows: flags.shadows,
            cross_fade: flags.cross_fade,
            colors: flags.colors,
        })
        .add_systems(Startup, setup)
        .add_systems(Last, finish_headless.run_if(move || headless))
        .run();
}

fn setup(
    mut commands: Commands,
    args: Res<SceneArgs>,
    options: Res<Options>,
    mut meshes: ResMut<Assets<Mesh>>,
    mut materials: ResMut<Assets<StandardMaterial>>,
    mut images: ResMut<Assets<Image>>,
) {
    let (instances, half) = sphere_field(args.count);
    let mesh = meshes.add(
        Sphere::new(SPHERE_RADIUS)
            .mesh()
            .ico(2)
            .expect("a small icosphere"),
    );
    if args.compare_bevy {
        spawn_bevy_spheres(&mut commands, &instances, mesh, &mut materials, options.colors);
    } else {
        let levels = args
            .lod
            .then(|| sphere_levels(&mut meshes, mesh.clone(), options.cross_fade));
        for batch in spawn_sphere_batches(&mut commands, instances, mesh, &mut materials, options.colors) {
            let mut batch = commands.entity(batch);
            if let Some(levels) = &levels {
                batch.insert(levels.clone());
            }
            if args.cells {
                batch.insert(GpuCullCells::default());
            }
        }
    }
    commands.insert_resource(FlyOver::new(half * 0.6));
    spawn_sun(&mut commands, options.shadows);
    let mut camera = commands.spawn((
        Camera3d::default(),
        FlyOverCamera,
        Transform::from_xyz(0.0, 8.0, 0.0),
    ));
    if args.occlusion {
        camera.insert(GpuCullOcclusion);
    }
    if args.no_cpu_culling {
        camera.insert(bevy::camera::visibility::NoCpuCulling);
    }
    if args.headless {
        camera.insert(support::headless_target(&mut images, args.width, args.height));
    }
}

/// Headless: once the timed frames have run and the counts of the final
/// view are back, prints the summary, with the CPU reference for the final
/// camera, and exits.
fn finish_headless(
    args: Res<SceneArgs>,
    options: Res<Options>,
    mut run: ResMut<HeadlessRun>,
    settled: Res<PipelinesSettled>,
    stats: Res<GpuCullStats>,
    settings: Res<GpuCullSettings>,
    mut commands: Commands,
    camera: Query<(&Camera, &GlobalTransform, &RenderTarget), With<FlyOverCamera>>,
    batches: Query<(&GpuCullInstances, &GpuCullBounds, Option<&GpuCullLod>)>,
    mut exit: MessageWriter<AppExit>,
    diagnostics: Option<Res<bevy::diagnostic::DiagnosticsStore>>,
    render_times: Option<Res<support::RenderFrameTimes>>,
    stage_times: Option<Res<support::RenderStageTimes>>,
    mut stopped_at: Local<Option<u64>>,
) {
    let Ok((cam, transform, target)) = camera.single() else {
        return;
    };
    // Counts come back a few frames late: wait for one culled after the
    // camera stopped.
    if run.frames_ready() > 0 && run.camera_still(&args) && stopped_at.is_none() {
        *stopped_at = Some(stats.render_frame);
    }
    let fresh = args.compare_bevy || stopped_at.is_some_and(|stop| stats.counts_frame > stop + 2);
    // Bevy's path: once its meshes are drawn (their pipelines compiled).
    let bevy_drawn = settled.first_drawn_frames().0.is_some();
    let drawn = if args.compare_bevy {
        bevy_drawn
    } else {
        stats.drawn_frames > 0
    };
    let HeadlessStep::Finish(code) = run.step(&args, drawn, fresh, &settled, Some(target), &mut commands)
    else {
        return;
    };
    // Every batch's reference, summed.
    let view = (cam.clip_from_view(), transform.to_matrix());
    let references: Option<Vec<_>> = (batches.iter())
        .map(|(instances, bounds, lod)| {
            support::reference::cpu_reference(view.0, view.1, instances, *bounds, lod, settings.format)
        })
        .collect();
    let reference = references.filter(|r| !r.is_empty()).map(|r| {
        (
            r.iter().map(|r| r.visible.len()).sum::<usize>(),
            r.iter().map(|r| r.borderline.len()).sum::<usize>(),
        )
    });
    let visible = (!args.compare_bevy).then(|| stats.visible.values().sum::<u32>());
    let cells = stats.cells.values().next();
    let path = if args.compare_bevy { "bevy" } else { "gpu-cull" };
    let mut summary = run.summary("spheres", &settled);
    summary
        .line(match (visible, &reference) {
            (Some(v), Some(r)) => format!(
                "{v} of {} spheres drawn (CPU reference {}, {} more borderline), variant {}",
                args.count,
                r.0,
                r.1,
                stats.variant.map_or("n/a", |v| v.name()),
            ),
            _ => format!("{} spheres drawn by Bevy's entity path", args.count),
        })
        .field("instances", args.count)
        .field("visible", visible)
        .field("cpu_reference", reference.map(|r| r.0))
        .field("cpu_borderline", reference.map(|r| r.1))
        .field("variant", stats.variant.map(|v| v.name()))
        .field("path", path)
        .field("colors", format!("{:?}", options.colors).to_lowercase())
        .field("merge_batches", settings.merge_batches)
        .field("shadows", options.shadows)
        .field("lod", args.lod)
        .field("occlusion", args.occlusion)
        .field("no_cpu_culling", args.no_cpu_culling)
        .field("visible_per_level", support::per_level(&stats, |_| true))
        .field("shadow_views", stats.shadow_visible.len());
    support::add_cells(&mut summary, cells);
    if let Some(store) = diagnostics.filter(|_| args.pass_times) {
        support::add_render_diagnostics(&mut summary, &store, render_times.as_deref());
    }
    support::add_render_stages(&mut summary, stage_times.as_deref());
    summary.print(args.json);
    exit.write(code);
}
