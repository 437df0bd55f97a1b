//! [`GpuCullPlugin`]: settings, statistics and the render-world setup.

use crate::render;
use bevy::diagnostic::{Diagnostic, DiagnosticPath, Diagnostics, RegisterDiagnostic};
use bevy::platform::collections::HashMap;
use bevy::prelude::*;
use cull_core::{InstanceFormat, ScanVariant};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender};

/// Adds GPU culling and drawing of [`crate::GpuCulledInstances`] batches.
#[derive(Clone, Debug, Default)]
pub struct GpuCullPlugin {
    /// The initial settings (also changeable at run time through the
    /// [`GpuCullSettings`] resource).
    pub settings: GpuCullSettings,
}

/// Run-time settings; a change takes effect on the next frame.
#[derive(Resource, Clone, Debug, PartialEq, Eq)]
pub struct GpuCullSettings {
    /// The scan variant; `None` picks the fastest compiled-in one the adapter runs.
    pub variant: Option<ScanVariant>,
    /// How instances are stored for culling.
    pub format: InstanceFormat,
}

impl Default for GpuCullSettings {
    fn default() -> Self {
        Self {
            variant: None,
            format: InstanceFormat::PosQuat,
        }
    }
}

/// What the GPU reported, read back asynchronously (a frame or more late).
#[derive(Resource, Clone, Debug, Default)]
pub struct GpuCullStats {
    /// Visible instances per (camera, batch) entity pair of the main world.
    pub visible: HashMap<(Entity, Entity), u32>,
    /// The scan variant in use.
    pub variant: Option<ScanVariant>,
    /// GPU time of the last culls of a frame, in milliseconds, when the
    /// adapter has timestamp queries.
    pub gpu_time_ms: Option<f64>,
    /// Frames in which the render world culled at least one batch.
    pub culled_frames: u64,
}

/// Messages from the render world to the main world.
pub(crate) enum StatMessage {
    Visible {
        view: Entity,
        batch: Entity,
        count: u32,
    },
    Frame {
        variant: ScanVariant,
        gpu_time_ms: Option<f64>,
    },
}

#[derive(Resource)]
pub(crate) struct StatSender(pub Mutex<Sender<StatMessage>>);

#[derive(Resource)]
struct StatReceiver(Mutex<Receiver<StatMessage>>);

impl GpuCullPlugin {
    /// Visible instances summed over batches and views.
    pub const VISIBLE: DiagnosticPath = DiagnosticPath::const_new("gpu_cull/visible_instances");
    /// GPU time of the culling passes, milliseconds.
    pub const GPU_TIME: DiagnosticPath = DiagnosticPath::const_new("gpu_cull/gpu_time_ms");
}

impl Plugin for GpuCullPlugin {
    fn build(&self, app: &mut App) {
        let (sender, receiver) = std::sync::mpsc::channel();
        app.insert_resource(self.settings.clone())
            .init_resource::<GpuCullStats>()
            .insert_resource(StatReceiver(Mutex::new(receiver)))
            .register_diagnostic(Diagnostic::new(Self::VISIBLE))
            .register_diagnostic(Diagnostic::new(Self::GPU_TIME))
            .add_systems(PreUpdate, receive_stats)
            .add_systems(PostUpdate, crate::components::compute_bounds);
        render::build(app, StatSender(Mutex::new(sender)));
    }

    fn finish(&self, app: &mut App) {
        render::finish(app);
    }
}

fn receive_stats(receiver: Res<StatReceiver>, mut stats: ResMut<GpuCullStats>, mut diagnostics: Diagnostics) {
    let receiver = receiver.0.lock().expect("stats channel poisoned");
    let mut frame = false;
    while let Ok(message) = receiver.try_recv() {
        match message {
            StatMessage::Visible { view, batch, count } => {
                stats.visible.insert((view, batch), count);
            }
            StatMessage::Frame { variant, gpu_time_ms } => {
                stats.variant = Some(variant);
                stats.gpu_time_ms = gpu_time_ms.or(stats.gpu_time_ms);
                stats.culled_frames += 1;
                frame = true;
            }
        }
    }
    if frame {
        let total: u32 = stats.visible.values().sum();
        diagnostics.add_measurement(&GpuCullPlugin::VISIBLE, || total as f64);
        if let Some(ms) = stats.gpu_time_ms {
            diagnostics.add_measurement(&GpuCullPlugin::GPU_TIME, || ms);
        }
    }
}
