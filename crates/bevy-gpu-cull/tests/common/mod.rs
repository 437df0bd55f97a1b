//! What the plugin's headless test apps share.

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
