//! The app around an example's scene: Bevy's default plugins with a window,
//! or headless (no display, frames rendered to an image and paced like a
//! window's), the headless camera's target.

use super::pass_times::{RenderFrameTimes, add_pass_times, start_render_frame};
use super::{ExampleName, HeadlessRun, PipelinesSettled, SceneArgs};
use bevy::app::ScheduleRunnerPlugin;
use bevy::camera::{ImageRenderTarget, RenderTarget};
use bevy::prelude::*;
use bevy::render::render_resource::{TextureFormat, TextureUsages};
use bevy::render::renderer::{RenderDevice, RenderQueue, WgpuWrapper};
use bevy::render::{Render, RenderApp, RenderSystems};
use bevy::shader::Shader;
use bevy::window::ExitCondition;
use bevy::winit::WinitPlugin;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// A new app for example `name`: Bevy's default plugins, with a window
/// titled after it or headless (exiting with a hint where there is no
/// display for a window); with `--pass-times`, Bevy's render pass timings;
/// `args` and a headless run's bookkeeping ([`HeadlessRun`]) as resources.
pub fn example_app(name: &str, args: &SceneArgs) -> App {
    if !args.headless {
        require_display(
            name,
            &format!("cargo run --release --example {name} -- --headless"),
        );
    }
    let mut app = App::new();
    let title = format!("bevy-gpu-cull: {name}");
    add_default_plugins(&mut app, args, &title);
    if args.pass_times {
        add_pass_times(&mut app);
    }
    // Where the render thread's frame goes (`render_stages_us`), kept out
    // of `--pass-times` so that its GPU timestamps cost it nothing.
    if std::env::var_os("GPU_CULL_STAGE_TIMES").is_some() {
        super::add_render_stage_times(&mut app);
    }
    app.insert_resource(args.clone())
        .insert_resource(ExampleName(name.into()))
        .init_resource::<HeadlessRun>();
    app
}

/// Adds `wgsl`, an example's own shader compiled into it (from `path`), to
/// the app's shaders under `handle`.
pub fn embed_shader(app: &mut App, handle: Handle<Shader>, wgsl: &'static str, path: &'static str) {
    let shader = Shader::from_wgsl(wgsl, path);
    let mut shaders = app.world_mut().resource_mut::<Assets<Shader>>();
    shaders
        .insert(handle.id(), shader)
        .expect("a UUID handle always inserts");
}

/// Exits with a message pointing to `headless_command` when a window is
/// asked for and there is no display: on Linux and the BSDs, where a
/// window needs a Wayland compositor (`WAYLAND_DISPLAY`, tried first) or an
/// X11 server (`DISPLAY`). macOS and Windows always have a display.
pub fn require_display(name: &str, headless_command: &str) {
    let needs_server = cfg!(any(
        target_os = "linux",
        target_os = "freebsd",
        target_os = "openbsd",
        target_os = "netbsd",
        target_os = "dragonfly"
    ));
    let has_server = ["WAYLAND_DISPLAY", "DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some());
    if !needs_server || has_server {
        return;
    }
    eprintln!(
        "{name}: no display found (neither WAYLAND_DISPLAY nor DISPLAY is set).\nRun it headless instead: \
         {headless_command}"
    );
    std::process::exit(2);
}

/// Bevy's default plugins: a window titled `title`, or headless (no window,
/// no winit, frames as fast as the GPU finishes them, at most
/// [`HEADLESS_FRAMES_IN_FLIGHT`] ahead: see [`pace_headless_frames`]).
pub fn add_default_plugins(app: &mut App, args: &SceneArgs, title: &str) {
    let (headless, width, height) = (args.headless, args.width, args.height);
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
        // A headless run draws no gizmos, and no HUD unless asked: Bevy's
        // UI, text, sprite and gizmo-drawing plugins would only add systems
        // to every frame (on an H100 host, 7-25% of the frame of a small
        // scene). The gizmo plugin itself stays: without it a system of the
        // default plugins fails for a missing resource.
        if !args.hud {
            plugins = plugins
                .disable::<bevy::text::TextPlugin>()
                .disable::<bevy::ui::UiPlugin>()
                .disable::<bevy::ui_render::UiRenderPlugin>()
                .disable::<bevy::sprite::SpritePlugin>()
                .disable::<bevy::sprite_render::SpriteRenderPlugin>();
        }
        plugins = plugins
            .disable::<bevy::gizmos_render::GizmoRenderPlugin>()
            .disable::<bevy::a11y::AccessibilityPlugin>();
        app.add_plugins((plugins, ScheduleRunnerPlugin::run_loop(Duration::ZERO)));
        if std::env::var_os("GPU_CULL_UNPACED").is_none() && app.get_sub_app(RenderApp).is_some() {
            let times = RenderFrameTimes::default();
            app.insert_resource(times.clone());
            let render_app = app.sub_app_mut(RenderApp);
            render_app
                .init_resource::<FramesInFlight>()
                .insert_resource(times)
                .add_systems(
                    Render,
                    (
                        start_render_frame.in_set(RenderSystems::ExtractCommands),
                        pace_headless_frames.in_set(RenderSystems::Cleanup),
                    ),
                );
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
        render_app.insert_resource(settled).add_systems(
            Render,
            super::settled::watch_pipelines.in_set(RenderSystems::Cleanup),
        );
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
    times: Res<RenderFrameTimes>,
) {
    let waiting_from = Instant::now();
    // An empty submission's index follows this frame's work.
    in_flight.0.push_back(WgpuWrapper::new(queue.submit([])));
    while in_flight.0.len() > HEADLESS_FRAMES_IN_FLIGHT {
        let oldest = in_flight.0.pop_front().expect("more than zero").into_inner();
        let _ = device.wgpu_device().poll(wgpu::PollType::Wait {
            submission_index: Some(oldest),
            timeout: None,
        });
    }
    times.record(waiting_from);
}
