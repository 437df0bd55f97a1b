//! What the plugin's headless test apps share.
// Each test crate compiles this module and uses a part of it.
#![allow(dead_code)]

use bevy::prelude::*;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// Consecutive render-world frames in which no pipeline waited to compile.
/// A scene is not what the test set up until every pipeline it draws with
/// has compiled: Bevy skips the draws of a pipeline still compiling (on
/// lavapipe, a 4x MSAA prepass pipeline can take longer than a count takes
/// to look settled).
#[derive(Resource, Clone, Default)]
pub struct PipelinesIdle(pub Arc<AtomicU32>);

/// Counts [`PipelinesIdle`] (a render-world system, in `RenderSystems::Cleanup`).
pub fn watch_pipelines(cache: Res<bevy::render::render_resource::PipelineCache>, idle: Res<PipelinesIdle>) {
    if cache.waiting_pipelines().next().is_some() {
        idle.0.store(0, Ordering::Relaxed);
    } else {
        idle.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// A headless app with the plugin, no window and no log, that watches its
/// pipelines ([`PipelinesIdle`]) and keeps the last frame read back by a
/// `Readback` (rows padded to the copy's alignment).
pub struct FrameApp {
    pub app: App,
    pub idle: PipelinesIdle,
    pub pixels: Arc<std::sync::Mutex<Option<Vec<u8>>>>,
}

impl FrameApp {
    pub fn new() -> Self {
        let mut app = App::new();
        app.add_plugins((
            DefaultPlugins
                .set(WindowPlugin {
                    primary_window: None,
                    exit_condition: bevy::window::ExitCondition::DontExit,
                    ..default()
                })
                .disable::<bevy::log::LogPlugin>()
                .disable::<bevy::winit::WinitPlugin>(),
            bevy::app::ScheduleRunnerPlugin::run_loop(std::time::Duration::ZERO),
            bevy_gpu_cull::GpuCullPlugin::default(),
        ));
        let idle = PipelinesIdle::default();
        if let Some(render_app) = app.get_sub_app_mut(bevy::render::RenderApp) {
            render_app.insert_resource(idle.clone()).add_systems(
                bevy::render::Render,
                watch_pipelines.in_set(bevy::render::RenderSystems::Cleanup),
            );
        }
        let pixels = Arc::new(std::sync::Mutex::new(None::<Vec<u8>>));
        let sink = pixels.clone();
        app.add_observer(move |event: On<bevy::render::gpu_readback::ReadbackComplete>| {
            *sink.lock().unwrap() = Some(event.data.clone());
        });
        Self { app, idle, pixels }
    }

    /// Updates the app until `ready` holds after 30 frames with every
    /// pipeline compiled for 10 frames, and returns the last frame read
    /// back (rows of `width` RGBA pixels), also saved as `png` in the
    /// temporary directory. Panics after four minutes.
    pub fn frame_when(
        &mut self,
        width: u32,
        height: u32,
        png: &str,
        ready: impl Fn(&World) -> bool,
    ) -> Vec<u8> {
        let start = std::time::Instant::now();
        let mut frames = 0;
        while start.elapsed() < std::time::Duration::from_secs(240) {
            self.app.update();
            frames += 1;
            if frames > 30 && ready(self.app.world()) && self.idle.0.load(Ordering::Relaxed) > 10 {
                let padded = self
                    .pixels
                    .lock()
                    .unwrap()
                    .clone()
                    .expect("a frame was read back");
                let stride = padded.len() / height as usize;
                let frame: Vec<u8> = padded
                    .chunks(stride)
                    .flat_map(|row| row[..width as usize * 4].to_vec())
                    .collect();
                let path = std::env::temp_dir().join(png);
                let _ = image::save_buffer(&path, &frame, width, height, image::ColorType::Rgba8);
                return frame;
            }
        }
        panic!("{png}: the scene was not drawn with every pipeline compiled");
    }
}

/// An sRGB render target of `width` x `height` that can be read back.
pub fn image_target(world: &mut World, width: u32, height: u32) -> Handle<Image> {
    use bevy::render::render_resource::{TextureFormat, TextureUsages};
    let mut image = Image::new_target_texture(width, height, TextureFormat::Rgba8UnormSrgb, None);
    image.texture_descriptor.usage |= TextureUsages::COPY_SRC;
    world.resource_mut::<Assets<Image>>().add(image)
}

/// The mean color of each 4x4 block of a frame `width` pixels wide.
pub fn blocks(frame: &[u8], width: u32) -> Vec<[f64; 3]> {
    let w = width as usize;
    let height = frame.len() / 4 / w;
    let mut out = Vec::new();
    for by in (0..height).step_by(4) {
        for bx in (0..w).step_by(4) {
            let mut mean = [0.0; 3];
            for y in by..by + 4 {
                for x in bx..bx + 4 {
                    for (c, m) in mean.iter_mut().enumerate() {
                        *m += f64::from(frame[(y * w + x) * 4 + c]) / 16.0;
                    }
                }
            }
            out.push(mean);
        }
    }
    out
}

/// The largest and mean difference (of 255) between paired blocks.
pub fn pair_difference(blocks: &[([f64; 3], [f64; 3])]) -> (f64, f64) {
    let diffs: Vec<f64> = blocks
        .iter()
        .map(|(l, r)| (0..3).map(|c| (l[c] - r[c]).abs()).fold(0.0, f64::max))
        .collect();
    let max = diffs.iter().copied().fold(0.0, f64::max);
    (max, diffs.iter().sum::<f64>() / diffs.len() as f64)
}

/// The largest and mean difference between two frames' blocks.
pub fn frame_difference(a: &[u8], b: &[u8], width: u32) -> (f64, f64) {
    let pairs: Vec<_> = blocks(a, width).into_iter().zip(blocks(b, width)).collect();
    pair_difference(&pairs)
}
