//! What the examples share: a window or a headless run (no display, the
//! frames rendered to an image, paced), what the examples' flags parse
//! into and their parsers, and the headless screenshot-then-exit sequence. Each example uses part of it.
#![allow(dead_code)]

use bevy::app::ScheduleRunnerPlugin;
use bevy::camera::{ImageRenderTarget, RenderTarget};
use bevy::core_pipeline::core_3d::{Opaque3d, Opaque3dBatchSetKey};
use bevy::prelude::*;
use bevy::render::render_phase::ViewBinnedRenderPhases;
use bevy::render::render_resource::PipelineCache;
use bevy::render::render_resource::{TextureFormat, TextureUsages};
use bevy::render::renderer::{RenderDevice, RenderQueue, WgpuWrapper};
use bevy::render::view::screenshot::{Screenshot, ScreenshotCaptured, save_to_disk};
use bevy::render::{Render, RenderApp, RenderSystems};
use bevy::window::ExitCondition;
use bevy::winit::WinitPlugin;
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// Parses `WxH`.
pub fn parse_size(value: &str) -> Option<(u32, u32)> {
    let (w, h) = value.split_once('x')?;
    Some((w.parse().ok()?, h.parse().ok()?))
}

/// Exits with a message pointing to `headless_command` when a window is
/// asked for and there is no display: on Linux and the BSDs, where windows
/// need an X11 or Wayland server (`DISPLAY` or `WAYLAND_DISPLAY`). macOS
/// and Windows always have one.
pub fn require_display(name: &str, headless_command: &str) {
    let needs_server = cfg!(any(
        target_os = "linux",
        target_os = "freebsd",
        target_os = "openbsd",
        target_os = "netbsd",
        target_os = "dragonfly"
    ));
    let has_display = std::env::var_os("DISPLAY").is_some() || std::env::var_os("WAYLAND_DISPLAY").is_some();
    if needs_server && !has_display {
        eprintln!(
            "{name}: no display found (DISPLAY and WAYLAND_DISPLAY are unset).\n\
             Run it headless instead: {headless_command}"
        );
        std::process::exit(2);
    }
}

/// Bevy's default plugins: a window titled `title`, or headless (no window,
/// no winit, frames as fast as the GPU finishes them, at most
/// [`HEADLESS_FRAMES_IN_FLIGHT`] ahead: see [`pace_headless_frames`]).
pub fn add_default_plugins(app: &mut App, headless: bool, title: &str, width: u32, height: u32) {
    // Both kinds of run: the examples read it in their headless summaries.
    let settled = PipelinesSettled::default();
    app.insert_resource(settled.clone());
    if headless {
        let mut plugins = DefaultPlugins
            .set(WindowPlugin {
                primary_window: None,
                exit_condition: ExitCondition::DontExit,
                ..default()
            })
            .disable::<WinitPlugin>();
        // A headless run draws no HUD and no gizmos: Bevy's UI, text,
        // sprite and gizmo-drawing plugins would only add systems to every
        // frame (on an H100 host, 7-25% of the frame of a small scene). The
        // gizmo plugin itself stays: without it a system of the default plugins
        // fails for a missing resource.
        plugins = plugins
            .disable::<bevy::text::TextPlugin>()
            .disable::<bevy::ui::UiPlugin>()
            .disable::<bevy::ui_render::UiRenderPlugin>()
            .disable::<bevy::sprite::SpritePlugin>()
            .disable::<bevy::sprite_render::SpriteRenderPlugin>()
            .disable::<bevy::gizmos_render::GizmoRenderPlugin>()
            .disable::<bevy::a11y::AccessibilityPlugin>();
        app.add_plugins((plugins, ScheduleRunnerPlugin::run_loop(Duration::ZERO)));
        if std::env::var_os("GPU_CULL_UNPACED").is_none()
            && let Some(render_app) = app.get_sub_app_mut(RenderApp)
        {
            render_app
                .init_resource::<FramesInFlight>()
                .add_systems(Render, pace_headless_frames.in_set(RenderSystems::Cleanup));
        }
    } else {
        app.add_plugins(DefaultPlugins.set(WindowPlugin {
            primary_window: Some(Window {
                title: title.into(),
                resolution: (width, height).into(),
                ..default()
            }),
            ..default()
        }));
    }
    if let Some(render_app) = app.get_sub_app_mut(RenderApp) {
        render_app
            .insert_resource(settled)
            .add_systems(Render, watch_pipelines.in_set(RenderSystems::Cleanup));
    }
}

/// A headless camera's target: an image that screenshots can read, and no
/// MSAA (lavapipe renders every sample on the CPU).
pub fn headless_target(images: &mut Assets<Image>, width: u32, height: u32) -> (RenderTarget, Msaa) {
    let mut image = Image::new_target_texture(width, height, TextureFormat::Rgba8UnormSrgb, None);
    image.texture_descriptor.usage |= TextureUsages::COPY_SRC;
    (
        RenderTarget::Image(ImageRenderTarget {
            handle: images.add(image),
            scale_factor: 1.0,
        }),
        Msaa::Off,
    )
}

/// Whether Bevy's pipeline cache has had nothing left to compile for the
/// render world's last [`SETTLED_FRAMES`] frames (shared by the main and
/// render worlds; inserted for windowed runs too). Bevy compiles pipelines
/// in the background and skips what they draw until they are ready: on a
/// machine whose driver has not cached them yet that takes a second or
/// more, and frames timed before it measure a scene that is not drawn
/// (they were in some published frame times). Several frames, because a
/// pipeline queued once another is ready (a draw after its cull kernel)
/// may arrive a frame later.
#[derive(Resource, Clone, Default)]
pub struct PipelinesSettled(Arc<SettledState>);

struct SettledState {
    settled_frames: AtomicU32,
    waiting_frames: AtomicU32,
    /// Render-world frames run so far.
    render_frames: AtomicU32,
    /// The first render-world frame (counted from 0) whose opaque phase
    /// had one of Bevy's own mesh items with its pipeline compiled, and the
    /// first with a culled batch's (the plugin's non-mesh items);
    /// `u32::MAX` before.
    first_bevy_mesh: AtomicU32,
    first_batch: AtomicU32,
}

impl Default for SettledState {
    fn default() -> Self {
        Self {
            settled_frames: AtomicU32::new(0),
            waiting_frames: AtomicU32::new(0),
            render_frames: AtomicU32::new(0),
            first_bevy_mesh: AtomicU32::new(u32::MAX),
            first_batch: AtomicU32::new(u32::MAX),
        }
    }
}

/// Consecutive frames without a pipeline waiting that make
/// [`PipelinesSettled::get`] true.
pub const SETTLED_FRAMES: u32 = 3;

impl PipelinesSettled {
    /// No pipeline waited to compile in the render world's last
    /// [`SETTLED_FRAMES`] frames.
    pub fn get(&self) -> bool {
        self.0.settled_frames.load(Ordering::Relaxed) >= SETTLED_FRAMES
    }

    /// Render-world frames so far in which a pipeline was waiting to compile.
    pub fn waiting_frames(&self) -> u32 {
        self.0.waiting_frames.load(Ordering::Relaxed)
    }

    /// The first render-world frame (from 0) that drew one of Bevy's own
    /// meshes in the opaque pass, and the first that drew a culled batch
    /// there: `(bevy, batch)`, `None` before. Both count from the same
    /// first frame, so their difference is how many frames later the batch
    /// appeared than Bevy's meshes (pipelines and kernels compiling).
    pub fn first_drawn_frames(&self) -> (Option<u32>, Option<u32>) {
        let frame = |f: &AtomicU32| Some(f.load(Ordering::Relaxed)).filter(|&f| f != u32::MAX);
        (frame(&self.0.first_bevy_mesh), frame(&self.0.first_batch))
    }
}

/// `n/a` or the frame, for the summaries.
pub fn frame_or_na(frame: Option<u32>) -> String {
    frame.map_or("n/a".into(), |f| f.to_string())
}

fn watch_pipelines(
    cache: Res<PipelineCache>,
    settled: Res<PipelinesSettled>,
    opaque: Option<Res<ViewBinnedRenderPhases<Opaque3d>>>,
) {
    let state = &settled.0;
    let frame = state.render_frames.fetch_add(1, Ordering::Relaxed);
    // What this frame drew: an item is drawn once its pipeline is compiled
    // (Bevy skips it before). Bevy puts its meshes in the mesh bins, the
    // plugin its batches among the non-mesh items.
    let ready = |key: &Opaque3dBatchSetKey| cache.get_render_pipeline(key.pipeline).is_some();
    for phase in opaque.iter().flat_map(|phases| phases.values()) {
        let bevy_mesh = phase.multidrawable_meshes.keys().any(ready)
            || phase.batchable_meshes.keys().any(|(key, _)| ready(key))
            || phase.unbatchable_meshes.keys().any(|(key, _)| ready(key));
        let batch = phase.non_mesh_items.keys().any(|(key, _)| ready(key));
        if bevy_mesh {
            let _ =
                state
                    .first_bevy_mesh
                    .compare_exchange(u32::MAX, frame, Ordering::Relaxed, Ordering::Relaxed);
        }
        if batch {
            let _ = state
                .first_batch
                .compare_exchange(u32::MAX, frame, Ordering::Relaxed, Ordering::Relaxed);
        }
    }
    if cache.waiting_pipelines().next().is_some() {
        state.waiting_frames.fetch_add(1, Ordering::Relaxed);
        state.settled_frames.store(0, Ordering::Relaxed);
    } else if cache.pipelines().next().is_some() {
        state.settled_frames.fetch_add(1, Ordering::Relaxed);
    }
}

/// Frames a headless run lets the GPU fall behind, as a window's swapchain
/// would (Bevy's default frame latency is 2).
pub const HEADLESS_FRAMES_IN_FLIGHT: usize = 2;

/// The submissions of the frames the GPU may still be working on.
#[derive(Resource, Default)]
struct FramesInFlight(VecDeque<WgpuWrapper<wgpu::SubmissionIndex>>);

/// Without a window nothing throttles Bevy's frames: the CPU submits frames
/// faster than a GPU-bound scene renders them, the queue grows by hundreds of
/// frames, the app's frame times measure the CPU alone, results read back
/// from the GPU arrive hundreds of frames late, and exiting waits for the
/// whole queue to drain. This waits, after each frame's submission, until
/// the GPU has finished all but the last [`HEADLESS_FRAMES_IN_FLIGHT`] frames.
/// `GPU_CULL_UNPACED=1` turns it off (to reproduce the difference).
fn pace_headless_frames(
    device: Res<RenderDevice>,
    queue: Res<RenderQueue>,
    mut in_flight: ResMut<FramesInFlight>,
) {
    // An empty submission's index follows this frame's work.
    in_flight.0.push_back(WgpuWrapper::new(queue.submit([])));
    while in_flight.0.len() > HEADLESS_FRAMES_IN_FLIGHT {
        let oldest = in_flight.0.pop_front().expect("more than zero").into_inner();
        let _ = device.wgpu_device().poll(wgpu::PollType::Wait {
            submission_index: Some(oldest),
            timeout: None,
        });
    }
}

/// What a one-scene example was asked for: the instances, how it runs
/// (a window, or headless frames saved to a screenshot) and the scene's
/// options. Each example parses its own flags (with `argh`, so `--help`
/// lists exactly the flags it takes) into this.
#[derive(Resource, Clone, Debug)]
pub struct SceneArgs {
    pub count: usize,
    pub headless: bool,
    pub frames: u32,
    pub screenshot: Option<std::path::PathBuf>,
    pub width: u32,
    pub height: u32,
    /// Occlusion culling on the camera (`--occlusion`).
    pub occlusion: bool,
    /// The batches sorted into cells and culled by cells where that pays
    /// off (`--cells`, `GpuCullCells`).
    pub cells: bool,
    /// Levels of detail on the batches (`--lod`, `GpuCullLod`), in the
    /// examples that have them.
    pub lod: bool,
    /// The same scene as ordinary Bevy entities, culled and drawn by Bevy
    /// (`--compare bevy`), in the examples that have it.
    pub compare_bevy: bool,
    /// With `--compare bevy`: Bevy's `NoCpuCulling` on the camera
    /// (`--no-cpu-culling`), which leaves the culling to Bevy's GPU.
    pub no_cpu_culling: bool,
    /// Headless: each render pass's GPU time at the end (`--pass-times`,
    /// [`add_pass_times`]), in the examples that have it.
    pub pass_times: bool,
    /// Bevy's `DepthPrepass` on the camera (`--depth-prepass`), in the
    /// examples that have it: the main pass then shades each pixel once.
    pub depth_prepass: bool,
}

impl SceneArgs {
    /// `count` instances, in a window or `headless` for `frames` frames
    /// (the last saved to `screenshot`), at `size`: 1280x720 by default,
    /// 480x270 headless (lavapipe renders every pixel on the CPU). The
    /// options are off.
    pub fn new(
        count: usize,
        headless: bool,
        frames: u32,
        screenshot: Option<std::path::PathBuf>,
        size: Option<(u32, u32)>,
    ) -> Self {
        let (width, height) = size.unwrap_or(if headless { (480, 270) } else { (1280, 720) });
        Self {
            count,
            headless,
            frames,
            screenshot,
            width,
            height,
            occlusion: false,
            cells: false,
            lod: false,
            compare_bevy: false,
            no_cpu_culling: false,
            pass_times: false,
            depth_prepass: false,
        }
    }
}

/// `--count N`: a whole number of instances; `1e6` works.
pub fn parse_count(value: &str) -> Result<usize, String> {
    value
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite() && *n >= 0.0 && n.fract() == 0.0 && *n <= u32::MAX as f64)
        .map(|n| n as usize)
        .ok_or_else(|| format!("`{value}` is not a count of instances (1e6 works)"))
}

/// `--size WxH`.
pub fn parse_size_flag(value: &str) -> Result<(u32, u32), String> {
    parse_size(value)
        .filter(|&(w, h)| w > 0 && h > 0)
        .ok_or_else(|| format!("`{value}` is not a size: WxH, e.g. 1280x720"))
}

/// `--compare bevy`: the only path there is to compare with.
pub fn parse_compare(value: &str) -> Result<bool, String> {
    match value {
        "bevy" => Ok(true),
        _ => Err(format!("`{value}`: only `--compare bevy` is known")),
    }
}

/// `--pass-times`: Bevy's render diagnostics (`RenderDiagnosticsPlugin`),
/// which time every render pass on the GPU and its encoding on the CPU;
/// [`print_pass_times`] prints them.
pub fn add_pass_times(app: &mut App) {
    app.add_plugins(bevy::render::diagnostic::RenderDiagnosticsPlugin);
}

/// Prints Bevy's render diagnostics (averaged over their last frames), a
/// line each: `pass_time PATH VALUE` for every render pass's GPU time in ms
/// (`…/elapsed_gpu`; the plugin's culls are `render/gpu_cull` and, with
/// occlusion culling, `render/gpu_cull_late`) and its pipeline statistics
/// (vertex and fragment shader invocations, primitives), and `pass_cpu PATH
/// VALUE` for the CPU time of its encoding (`…/elapsed_cpu`, ms).
pub fn print_pass_times(store: &bevy::diagnostic::DiagnosticsStore) {
    for d in store.iter() {
        let path = d.path().as_str();
        if !path.starts_with("render/") {
            continue;
        }
        let kind = if path.ends_with("elapsed_cpu") {
            "pass_cpu"
        } else {
            "pass_time"
        };
        println!("{kind} {path} {:.3}", d.average().unwrap_or(f64::NAN));
    }
}

/// What a camera needs for the plugin's occlusion culling: Bevy's depth
/// prepass and two-phase occlusion culling, which the plugin joins (with
/// the camera's MSAA as it is: see `GpuCullOcclusion`).
pub fn occlusion_culling() -> impl Bundle {
    (
        bevy::core_pipeline::prepass::DepthPrepass,
        bevy::render::occlusion_culling::OcclusionCulling,
        bevy_gpu_cull::GpuCullOcclusion,
    )
}

/// Frames after a headless scene is ready that are not timed: the first
/// frames of a drawn scene still upload and fill caches.
pub const TIMING_WARM_UP: u32 = 10;

/// A headless run's progress: frames run, their times, the screenshot asked
/// for and saved.
#[derive(Resource, Default)]
pub struct HeadlessRun {
    /// Frames since start.
    pub frames: u32,
    /// The frame (counted from 0) from which the scene was ready: drawn,
    /// with no pipeline left to compile ([`PipelinesSettled`]).
    ready_at: Option<u32>,
    screenshot_requested: bool,
    screenshot_saved: bool,
    last_frame: Option<std::time::Instant>,
    /// Milliseconds between consecutive frames.
    frame_ms: Vec<f64>,
}

/// What [`HeadlessRun::step`] says to do after this frame.
pub enum HeadlessStep {
    /// Keep running.
    Continue,
    /// Print the summary and exit, successfully or (the frame budget ran
    /// out before the scene was ready) not.
    Finish(AppExit),
}

impl HeadlessRun {
    /// The median time between frames once the scene was ready, less the
    /// first [`TIMING_WARM_UP`] of them, in ms.
    pub fn median_frame_ms(&self) -> f64 {
        let mut timed = self.frame_ms.clone();
        if timed.is_empty() {
            return f64::NAN;
        }
        timed.sort_by(f64::total_cmp);
        timed[timed.len() / 2]
    }

    /// The frame from which the scene was ready, if it was.
    pub fn ready_frame(&self) -> Option<u32> {
        self.ready_at
    }

    /// Frames run since the scene was ready.
    pub fn frames_ready(&self) -> u32 {
        self.ready_at.map_or(0, |at| self.frames - at)
    }

    /// Counts a frame. The scene is ready from the first frame that is
    /// `drawn` (the example's own test) while Bevy has no pipeline left to
    /// compile (`settled`); frames are timed from [`TIMING_WARM_UP`] frames
    /// later. Once the frames asked for have run after that, takes the
    /// screenshot into `target` (when one was asked for) and, once it is
    /// saved, finishes. Gives up (an error) 2,000 frames past the frames
    /// asked for: counted from the start while the scene is not ready, from
    /// readiness while the screenshot is not saved.
    pub fn step(
        &mut self,
        args: &SceneArgs,
        drawn: bool,
        settled: &PipelinesSettled,
        target: Option<&RenderTarget>,
        commands: &mut Commands,
    ) -> HeadlessStep {
        if self.ready_at.is_none() && drawn && settled.get() {
            self.ready_at = Some(self.frames);
        }
        self.frames += 1;
        let now = std::time::Instant::now();
        if let Some(last) = self.last_frame.replace(now)
            && self.ready_at.is_some()
            && self.frames_ready() > TIMING_WARM_UP
        {
            self.frame_ms.push((now - last).as_secs_f64() * 1e3);
        }
        let ready = self.ready_at.is_some() && self.frames_ready() >= args.frames;
        if ready
            && !self.screenshot_requested
            && let (Some(path), Some(RenderTarget::Image(target))) = (&args.screenshot, target)
        {
            self.screenshot_requested = true;
            commands
                .spawn(Screenshot::image(target.handle.clone()))
                .observe(save_to_disk(path.clone()))
                .observe(|_: On<ScreenshotCaptured>, mut run: ResMut<HeadlessRun>| {
                    run.screenshot_saved = true;
                });
        }
        let done = ready && (args.screenshot.is_none() || self.screenshot_saved);
        if done {
            HeadlessStep::Finish(AppExit::Success)
        } else if (self.ready_at.is_none() && self.frames >= args.frames + 2000)
            || self.frames_ready() >= args.frames + 2000
        {
            HeadlessStep::Finish(AppExit::error())
        } else {
            HeadlessStep::Continue
        }
    }
}
