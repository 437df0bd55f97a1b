//! `--pass-times`: Bevy's render pass timings, the spans around what they
//! leave untimed, and a paced headless run's render-thread times, reported
//! in an example's summary.

use bevy::prelude::*;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Frames whose render-thread times [`RenderFrameTimes`] keeps.
pub(super) const RENDER_TIMES_KEPT: usize = 100;

/// A paced headless run's render thread, frame by frame: how long the
/// render world's schedule ran up to the pacing wait, and how long it then
/// waited for the GPU. A GPU-bound scene waits; a CPU-bound one does not.
/// Shared by the main world (for the summary) and the render world.
#[derive(Resource, Clone, Default)]
pub struct RenderFrameTimes(std::sync::Arc<std::sync::Mutex<RenderFrameLog>>);

/// What [`RenderFrameTimes`] shares.
#[derive(Default)]
struct RenderFrameLog {
    /// When the render world's frame under way began.
    started: Option<Instant>,
    /// (schedule ms, GPU wait ms) of the last [`RENDER_TIMES_KEPT`] frames.
    frames: VecDeque<(f64, f64)>,
}

impl RenderFrameTimes {
    pub(super) fn record(&self, waiting_from: Instant) {
        let mut log = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        if let Some(started) = log.started.take() {
            let frame = (ms(waiting_from - started), ms(waiting_from.elapsed()));
            log.frames.push_back(frame);
            if log.frames.len() > RENDER_TIMES_KEPT {
                log.frames.pop_front();
            }
        }
    }

    /// The medians of the kept frames' schedule and wait times, in ms.
    pub fn medians(&self) -> Option<(f64, f64)> {
        let log = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let schedule = super::median(log.frames.iter().map(|f| f.0))?;
        let wait = super::median(log.frames.iter().map(|f| f.1))?;
        Some((schedule, wait))
    }
}

/// Marks the start of a render-world frame for [`RenderFrameTimes`].
pub(super) fn start_render_frame(times: Res<RenderFrameTimes>) {
    times.0.lock().unwrap_or_else(|e| e.into_inner()).started = Some(Instant::now());
}

/// `--pass-times`: Bevy's render diagnostics (`RenderDiagnosticsPlugin`),
/// which time every render pass on the GPU and its encoding on the CPU, and
/// spans around what they leave untimed (the shadow passes, the whole
/// frame: [`super::add_untimed_spans`]); [`add_render_diagnostics`] reports
/// them.
pub fn add_pass_times(app: &mut App) {
    app.add_plugins(bevy::render::diagnostic::RenderDiagnosticsPlugin);
    super::add_untimed_spans(app);
}

/// Adds Bevy's render diagnostics (averaged over their last frames) to a
/// summary: a line each, and the field `render_diagnostics`, an object from
/// each diagnostic's path to its value: every render pass's GPU time in ms
/// (`…/elapsed_gpu`; the plugin's culls are `render/gpu_cull` and, with
/// occlusion culling, `render/gpu_cull_late`), its pipeline statistics
/// (vertex and fragment shader invocations, primitives), and the CPU time of
/// its encoding (`…/elapsed_cpu`, ms). In a paced headless run, also the
/// render thread's median schedule and GPU wait of its last frames
/// (`render_schedule_ms`, `render_gpu_wait_ms`; [`RenderFrameTimes`]).
pub fn add_render_diagnostics(
    summary: &mut super::Summary,
    store: &bevy::diagnostic::DiagnosticsStore,
    render_times: Option<&RenderFrameTimes>,
) {
    if let Some((schedule, wait)) = render_times.and_then(RenderFrameTimes::medians) {
        summary.line(format!(
            "render thread: schedule {schedule:.3} ms, then waits {wait:.3} ms for the GPU (medians)"
        ));
        summary
            .field("render_schedule_ms", schedule)
            .field("render_gpu_wait_ms", wait);
    }
    let mut values = std::collections::BTreeMap::new();
    for d in store.iter() {
        let path = d.path().as_str();
        if path.starts_with("render/") {
            values.insert(path.to_string(), d.average().unwrap_or(f64::NAN));
        }
    }
    for (path, value) in &values {
        summary.line(format!("{path}: {value:.3}"));
    }
    summary.field("render_diagnostics", values);
}
