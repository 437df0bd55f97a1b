//! A headless run's progress: when the scene is ready, which frames are
//! timed, the screenshot, and when to print the summary and exit.

use super::{PipelinesSettled, SceneArgs, Summary, frame_or_na};
use bevy::camera::RenderTarget;
use bevy::prelude::*;
use bevy::render::view::screenshot::{Screenshot, ScreenshotCaptured, save_to_disk};
use std::time::Instant;

/// Frames after a headless scene is ready that are not timed: the first
/// frames of a drawn scene still upload and fill caches. Half the frames
/// asked for, where that is fewer ([`warm_up`]).
pub const TIMING_WARM_UP: u32 = 20;

/// The frames not timed of a run of `frames` frames: [`TIMING_WARM_UP`], or
/// half of them where that is fewer.
pub fn warm_up(frames: u32) -> u32 {
    TIMING_WARM_UP.min(frames / 2)
}

/// Frames at the end of a headless run in which a moving camera holds
/// still ([`HeadlessRun::camera_still`]), so that the counts read back (a
/// few frames late) are of the final view.
pub const CAMERA_HOLD: u32 = 30;

/// Frames a headless run waits, past the frames asked for, for the scene
/// to be ready or its results to arrive before it gives up.
const PATIENCE: u32 = 2000;

/// A headless run's progress: frames run, their times, the screenshot asked
/// for and saved.
#[derive(Resource)]
pub struct HeadlessRun {
    /// Frames since start.
    pub frames: u32,
    /// The frame (from 0) from which the scene was ready: drawn, with no
    /// pipeline left to compile ([`PipelinesSettled`]).
    ready_at: Option<u32>,
    /// The first frame that drew the scene, and the seconds from the app's
    /// start (this resource's creation) to it.
    first_drawn: Option<(u32, f64)>,
    started: Instant,
    screenshot_requested: bool,
    screenshot_saved: bool,
    last_frame: Option<Instant>,
    /// Milliseconds of each timed frame.
    frame_ms: Vec<f64>,
    /// The process's CPU seconds when timing started, and its CPU time a
    /// timed frame once timing ended (where the OS tells it).
    cpu_start: Option<f64>,
    cpu_ms_per_frame: Option<f64>,
}

impl Default for HeadlessRun {
    fn default() -> Self {
        Self {
            frames: 0,
            ready_at: None,
            first_drawn: None,
            started: Instant::now(),
            screenshot_requested: false,
            screenshot_saved: false,
            last_frame: None,
            frame_ms: Vec::new(),
            cpu_start: None,
            cpu_ms_per_frame: None,
        }
    }
}

/// What [`HeadlessRun::step`] says to do after this frame.
pub enum HeadlessStep {
    /// Keep running.
    Continue,
    /// Print the summary and exit, successfully or (the scene was never
    /// ready, or its results never came) not.
    Finish(AppExit),
}

/// The median of `values` (the upper one of an even count); `None` for none.
pub fn median(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let mut sorted: Vec<f64> = values.into_iter().collect();
    sorted.sort_by(f64::total_cmp);
    sorted.get(sorted.len() / 2).copied()
}

impl HeadlessRun {
    /// The median time of the timed frames, in ms.
    pub fn median_frame_ms(&self) -> f64 {
        median(self.frame_ms.iter().copied()).unwrap_or(f64::NAN)
    }

    /// Frames run since the scene was ready (0 before).
    pub fn frames_ready(&self) -> u32 {
        self.ready_at.map_or(0, |at| self.frames - at)
    }

    /// Whether a moving camera should hold still: before the scene is
    /// ready (so that every run times the same path) and for the last
    /// [`CAMERA_HOLD`] frames.
    pub fn camera_still(&self, args: &SceneArgs) -> bool {
        self.ready_at.is_none() || self.frames_ready() + CAMERA_HOLD >= args.frames
    }

    /// Counts a frame. The scene is ready from the first frame that is
    /// `drawn` (the example's own test) while Bevy has no pipeline left to
    /// compile (`settled`). Frames `warm_up(args.frames) + 1` to
    /// `args.frames` after that are timed. Then the screenshot goes to `target` (when one
    /// was asked for), and the run finishes once it is saved and the
    /// example's `results` (counts read back, say) are in. Gives up, with
    /// an error, [`PATIENCE`] frames past the frames asked for.
    pub fn step(
        &mut self,
        args: &SceneArgs,
        drawn: bool,
        results: bool,
        settled: &PipelinesSettled,
        target: Option<&RenderTarget>,
        commands: &mut Commands,
    ) -> HeadlessStep {
        if drawn && self.first_drawn.is_none() {
            self.first_drawn = Some((self.frames, self.started.elapsed().as_secs_f64()));
        }
        if self.ready_at.is_none() && drawn && settled.get() {
            self.ready_at = Some(self.frames);
        }
        self.frames += 1;
        self.time_frame(args.frames);
        let timed = self.ready_at.is_some() && self.frames_ready() >= args.frames;
        if timed
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
        if timed && results && (args.screenshot.is_none() || self.screenshot_saved) {
            return HeadlessStep::Finish(AppExit::Success);
        }
        let waited = if self.ready_at.is_some() {
            self.frames_ready()
        } else {
            self.frames
        };
        if waited < args.frames.saturating_add(PATIENCE) {
            return HeadlessStep::Continue;
        }
        eprintln!(
            "gave up after {} frames: scene ready {}, results in {results}, screenshot saved {} \
             (pipelines waiting in {} frames)",
            self.frames,
            self.ready_at.is_some(),
            self.screenshot_saved,
            settled.waiting_frames(),
        );
        HeadlessStep::Finish(AppExit::error())
    }

    /// Times the frame that just ended, when it is one of the timed ones,
    /// and the process's CPU time over them.
    fn time_frame(&mut self, frames: u32) {
        let now = Instant::now();
        let last = self.last_frame.replace(now);
        if self.ready_at.is_none() {
            return;
        }
        let (n, warm_up) = (self.frames_ready(), warm_up(frames));
        if n == warm_up {
            self.cpu_start = process_cpu_seconds();
        }
        if let Some(last) = last.filter(|_| n > warm_up && n <= frames) {
            self.frame_ms.push((now - last).as_secs_f64() * 1e3);
        }
        if n == frames
            && let (Some(start), Some(end)) = (self.cpu_start, process_cpu_seconds())
            && frames > warm_up
        {
            self.cpu_ms_per_frame = Some((end - start) * 1e3 / (frames - warm_up) as f64);
        }
    }

    /// The summary of the run so far, for `example`: its frames, their
    /// times, and when the scene was drawn and ready. The example adds
    /// what its scene showed.
    pub fn summary(&self, example: &str, settled: &PipelinesSettled) -> Summary {
        let mut summary = Summary::new(example);
        let cpu = self
            .cpu_ms_per_frame
            .map_or(String::new(), |ms| format!(", {ms:.2} ms of CPU a frame"));
        let (first_bevy, first_batch) = settled.first_drawn_frames();
        summary
            .line(format!(
                "median frame {:.2} ms over {} frames{cpu}; drawn from frame {}, ready to time from frame {}",
                self.median_frame_ms(),
                self.frame_ms.len(),
                frame_or_na(self.first_drawn.map(|(f, _)| f)),
                frame_or_na(self.ready_at),
            ))
            .field("frames", self.frames)
            .field("median_frame_ms", self.median_frame_ms())
            .field("timed_frames", self.frame_ms.len())
            .field("cpu_ms_per_frame", self.cpu_ms_per_frame)
            .field("first_drawn_frame", self.first_drawn.map(|(f, _)| f))
            .field("first_drawn_s", self.first_drawn.map(|(_, s)| s))
            .field("ready_frame", self.ready_at)
            .field("pipelines_waiting_frames", settled.waiting_frames())
            .field("first_bevy_mesh_frame", first_bevy)
            .field("first_batch_frame", first_batch);
        summary
    }
}

/// CPU time of the whole process (all threads), where Linux tells it.
fn process_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may contain spaces) start at ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks / 100.0) // USER_HZ is 100 on Linux
}
