//! When a scene is ready to time: Bevy's pipeline cache settled, and the
//! first frames that drew Bevy's meshes and the plugin's batches.

use bevy::core_pipeline::core_3d::{Opaque3d, Opaque3dBatchSetKey};
use bevy::prelude::*;
use bevy::render::render_phase::ViewBinnedRenderPhases;
use bevy::render::render_resource::PipelineCache;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

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

pub(super) fn watch_pipelines(
    cache: Res<PipelineCache>,
    settled: Res<PipelinesSettled>,
    opaque: Option<Res<ViewBinnedRenderPhases<Opaque3d>>>,
    batches_first: Option<Res<bevy_gpu_cull::GpuCullOpaqueBatches>>,
) {
    let state = &settled.0;
    let frame = state.render_frames.fetch_add(1, Ordering::Relaxed);
    // What this frame drew: an item is drawn once its pipeline is compiled
    // (Bevy skips it before). Bevy puts its meshes in the mesh bins, the
    // plugin a camera's batches among the non-mesh items (a deferred
    // camera's, or one with no opaque mesh of Bevy's) or in its own list,
    // drawn first.
    let ready = |key: &Opaque3dBatchSetKey| cache.get_render_pipeline(key.pipeline).is_some();
    let drawn_first = (batches_first.iter())
        .flat_map(|batches| batches.iter())
        .any(|(_, items)| items.iter().any(|item| ready(&item.batch_set_key)));
    if drawn_first {
        let _ = (state.first_batch).compare_exchange(u32::MAX, frame, Ordering::Relaxed, Ordering::Relaxed);
    }
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
