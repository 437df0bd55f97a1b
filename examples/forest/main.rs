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

#[path = "../support/mod.rs"]
mod support;

mod scene;

use bevy::camera::RenderTarget;
use bevy::prelude::*;
use bevy::window::PrimaryWindow;
use bevy_gpu_cull::prelude::*;
use scene::{AsPixels, Ground, Kind, MinPixels, circle, rocks_of, setup};
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
    /// with --lod: instances whose bounding sphere spans fewer pixels of the
    /// frame's height (at start) are not drawn (default 1; 0 draws every one)
    #[argh(option, default = "1.0", from_str_fn(parse_pixels))]
    min_pixels: f32,
    /// with --lod: trees and rocks below four pixels drawn as one pixel each,
    /// written by compute and shaded over the tiles they lie in
    #[argh(switch)]
    as_pixels: bool,
    /// with `bevy`: the same forest as Bevy entities, culled and drawn by Bevy
    #[argh(option, default = "false", from_str_fn(support::parse_compare))]
    compare: bool,
    /// with --compare bevy: Bevy's NoCpuCulling on the camera
    #[argh(switch)]
    no_cpu_culling: bool,
    /// a depth prepass on the camera (Bevy's: each pixel shaded once)
    #[argh(switch)]
    depth_prepass: bool,
    /// headless: add each render pass's GPU time to the summary
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
    if args.no_cpu_culling && !args.compare_bevy
        || args.lod && args.compare_bevy
        || flags.as_pixels && !args.lod
    {
        eprintln!(
            "forest: --no-cpu-culling goes with --compare bevy, --lod without it, --as-pixels with --lod"
        );
        std::process::exit(2);
    }
    let most_pixels = scene::SMALLEST_LEVEL_SIZE * args.height as f32;
    if args.lod && flags.min_pixels >= most_pixels {
        eprintln!(
            "forest: --min-pixels {} must be below {most_pixels} at this height (the coarser levels' sizes)",
            flags.min_pixels
        );
        std::process::exit(2);
    }
    support::example_app("forest", &args)
        .add_plugins(GpuCullPlugin::default())
        .insert_resource(ClearColor(Color::srgb(0.55, 0.7, 0.9)))
        .insert_resource(MinPixels(flags.min_pixels))
        .insert_resource(AsPixels(flags.as_pixels))
        .add_systems(Startup, setup)
        .add_systems(Update, (circle, show_counts, finish_headless))
        .run();
}

/// What Bevy's cascade lists hold that is not a tree or rock entity: the
/// ground, and on the plugin's path the batches.
type NotCaster = Or<(With<Ground>, With<Kind>)>;

/// The trees and rocks Bevy draws into its cascades as entities, summed
/// over the cascades (what `shadow_casters` counts for the batches): none on
/// the plugin's path, where Bevy's lists hold the ground and the batches.
fn bevy_casters(
    cascades: &Query<&bevy::camera::visibility::CascadesVisibleEntities>,
    not_casters: &Query<(), NotCaster>,
) -> usize {
    let cascade_lists = cascades.iter().flat_map(|c| c.entities.values().flatten());
    let entities = cascade_lists.flat_map(|list| list.entities.iter());
    entities.filter(|e| !not_casters.contains(**e)).count()
}

/// `--min-pixels`: a size in pixels, 0 or more.
fn parse_pixels(value: &str) -> Result<f32, String> {
    value
        .parse::<f32>()
        .ok()
        .filter(|p| p.is_finite() && *p >= 0.0)
        .ok_or_else(|| format!("`{value}` is not a size in pixels (0 or more)"))
}

/// In a window, the title shows the trees and rocks in view.
fn show_counts(
    args: Res<SceneArgs>,
    stats: Res<GpuCullStats>,
    batches: Query<(Entity, &Kind)>,
    mut windows: Query<&mut Window, With<PrimaryWindow>>,
) {
    let Ok(mut window) = windows.single_mut() else {
        return;
    };
    let count = |kind| {
        let of_kind = batches.iter().filter(|(_, k)| **k == kind);
        of_kind.map(|(e, _)| stats.visible_in(e)).sum::<u32>()
    };
    let title = if args.compare_bevy {
        format!("forest: {} trees as Bevy entities", args.count)
    } else {
        format!(
            "forest: {} trees and {} rocks in view",
            count(Kind::Trees),
            count(Kind::Rocks)
        )
    };
    if window.title != title {
        window.title = title;
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
    render_times: Option<Res<support::RenderFrameTimes>>,
    stage_times: Option<Res<support::RenderStageTimes>>,
    min_pixels: Res<MinPixels>,
    bevy_cascades: Query<&bevy::camera::visibility::CascadesVisibleEntities>,
    not_casters: Query<(), NotCaster>,
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
        .field("bevy_shadow_casters", bevy_casters(&bevy_cascades, &not_casters))
        .field("variant", stats.variant.map(|v| v.name()))
        .field("lod", args.lod)
        .field("min_pixels", args.lod.then_some(f64::from(min_pixels.0)))
        .field("occlusion", args.occlusion)
        .field("no_cpu_culling", args.no_cpu_culling)
        .field("depth_prepass", args.depth_prepass);
    support::add_cells(&mut summary, cells);
    if let Some(store) = diagnostics.filter(|_| args.pass_times) {
        support::add_render_diagnostics(&mut summary, &store, render_times.as_deref());
    }
    support::add_render_stages(&mut summary, stage_times.as_deref());
    summary.print(args.json);
    exit.write(code);
}
