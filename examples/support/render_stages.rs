//! `GPU_CULL_STAGE_TIMES=1`: where the render thread's frame goes, stage by
//! stage. A system at each boundary of Bevy's render stages
//! (`RenderSystems`), of the render graph (`RenderGraphSystems`) and of a
//! camera's `Core3d` run notes the time; each stage's median over the last
//! frames (as many as the render thread's frame times keep) is reported
//! (`render_stages_us`). With more than one camera, the `Core3d` stages
//! are the last camera's.

use bevy::core_pipeline::schedule::{Core3d, Core3dSystems};
use bevy::prelude::*;
use bevy::render::renderer::{RenderGraph, RenderGraphSystems};
use bevy::render::{Render, RenderApp, RenderSystems};
use bevy_gpu_cull::GpuCullSystems;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The stages, each ending at its boundary: what ran since the one before
/// (the first since the frame's start; "graph: before cameras" is Bevy's
/// pipeline queue and the render graph's `Begin` systems).
const STAGES: [&str; 22] = [
    "extract commands, prepare assets",
    "prepare meshes",
    "create views",
    "specialize",
    "prepare views",
    "queue",
    "phase sort",
    "prepare resources",
    "batch phases",
    "phase buffers",
    "prepare flush",
    "prepare bind groups",
    "graph: before cameras",
    "core3d: culls, shadows, prepass",
    "core3d: main pass",
    "core3d: post-processing",
    "graph: encoders finished",
    "graph: submit",
    "graph: finish",
    "render: rest",
    "cleanup",
    "post cleanup",
];

/// The boundaries of the frame under way and the stage times of the last
/// frames, shared by the main world (for the summary) and the render world.
#[derive(Resource, Clone, Default)]
pub struct RenderStageTimes(Arc<Mutex<StageLog>>);

#[derive(Default)]
struct StageLog {
    start: Option<Instant>,
    boundaries: [Option<Instant>; STAGES.len()],
    frames: VecDeque<[f64; STAGES.len()]>,
}

impl RenderStageTimes {
    fn lock(&self) -> std::sync::MutexGuard<'_, StageLog> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Each stage's median time over the kept frames, in µs, in order.
    pub fn medians(&self) -> Option<Vec<(&'static str, f64)>> {
        let log = self.lock();
        let medians = (0..STAGES.len()).map(|i| {
            let median = super::median(log.frames.iter().map(|f| f[i]))?;
            Some((STAGES[i], median))
        });
        medians.collect()
    }
}

fn frame_start(times: Res<RenderStageTimes>) {
    let mut log = times.lock();
    log.start = Some(Instant::now());
    log.boundaries = [None; STAGES.len()];
}

fn boundary<const I: usize>(times: Res<RenderStageTimes>) {
    times.lock().boundaries[I] = Some(Instant::now());
}

/// The last boundary: the frame's stage times, from consecutive
/// boundaries (a stage whose boundary did not run, e.g. no camera, is 0).
fn frame_end(times: Res<RenderStageTimes>) {
    let now = Instant::now();
    let mut log = times.lock();
    let Some(mut previous) = log.start else {
        return;
    };
    log.boundaries[STAGES.len() - 1] = Some(now);
    let mut frame = [0.0; STAGES.len()];
    for (i, at) in log.boundaries.iter().enumerate() {
        if let Some(at) = *at {
            frame[i] = (at - previous).as_secs_f64() * 1e6;
            previous = at;
        }
    }
    log.frames.push_back(frame);
    if log.frames.len() > super::pass_times::RENDER_TIMES_KEPT {
        log.frames.pop_front();
    }
}

/// Adds the boundaries to the render app, and the shared times to both.
pub fn add_render_stage_times(app: &mut App) {
    let times = RenderStageTimes::default();
    let Some(render_app) = app.get_sub_app_mut(RenderApp) else {
        return;
    };
    use Core3dSystems as C;
    use RenderGraphSystems as G;
    use RenderSystems as S;
    render_app.insert_resource(times.clone()).add_systems(
        Render,
        (
            frame_start.before(S::ExtractCommands),
            boundary::<0>.after(S::PrepareAssets).before(S::PrepareMeshes),
            boundary::<1>.after(S::PrepareMeshes).before(S::CreateViews),
            boundary::<2>.after(S::CreateViews).before(S::Specialize),
            boundary::<3>.after(S::Specialize).before(S::PrepareViews),
            boundary::<4>.after(S::PrepareViews).before(S::Queue),
            boundary::<5>.after(S::Queue).before(S::PhaseSort),
            boundary::<6>.after(S::PhaseSort).before(S::Prepare),
            boundary::<7>
                .after(S::PrepareResources)
                .before(S::PrepareResourcesBatchPhases),
            boundary::<8>
                .after(S::PrepareResourcesBatchPhases)
                .before(S::PrepareResourcesWritePhaseBuffers),
            boundary::<9>
                .after(S::PrepareResourcesCollectPhaseBuffers)
                .before(S::PrepareResourcesFlush),
            boundary::<10>
                .after(S::PrepareResourcesFlush)
                .before(S::PrepareBindGroups),
            boundary::<11>.after(S::PrepareBindGroups).before(S::Render),
            boundary::<19>.after(S::Render).before(S::Cleanup),
            boundary::<20>.after(S::Cleanup).before(S::PostCleanup),
            frame_end.after(S::PostCleanup),
        ),
    );
    render_app.add_systems(
        RenderGraph,
        (
            boundary::<16>.after(G::Render).before(G::Submit),
            boundary::<17>.after(G::Submit).before(G::Finish),
            boundary::<18>.after(G::Finish),
        ),
    );
    render_app.add_systems(
        Core3d,
        (
            boundary::<12>.before(C::Prepass).before(GpuCullSystems::Cull),
            boundary::<13>.after(C::Prepass).before(C::MainPass),
            boundary::<14>.after(C::MainPass).before(C::EarlyPostProcess),
            boundary::<15>.after(C::PostProcess),
        ),
    );
    app.insert_resource(times);
}

/// Adds the stage times to a summary: a line, and the field
/// `render_stages_us`, from each stage's name to its median in µs.
pub fn add_render_stages(summary: &mut super::Summary, times: Option<&RenderStageTimes>) {
    let Some(medians) = times.and_then(RenderStageTimes::medians) else {
        return;
    };
    let line: Vec<String> = medians
        .iter()
        .map(|(name, us)| format!("{name} {us:.0}"))
        .collect();
    summary.line(format!("render thread stages, µs (medians): {}", line.join(", ")));
    let field: std::collections::BTreeMap<String, f64> =
        medians.iter().map(|(name, us)| (name.to_string(), *us)).collect();
    summary.field("render_stages_us", field);
}
