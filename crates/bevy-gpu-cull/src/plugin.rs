//! [`GpuCullPlugin`]: settings, statistics and the render-world setup.

use crate::render;
use crate::settings::{GpuCullSettings, GpuCullSystems};
use crate::stats::{GpuCullStats, StatMessage, StatReceiver, StatSender};
use bevy::diagnostic::{Diagnostic, DiagnosticPath, Diagnostics, RegisterDiagnostic};
use bevy::prelude::*;
use bevy::shader::ShaderRef;
use cull_core::CullTimings;
use std::sync::Mutex;

/// Adds GPU culling and drawing of [`crate::GpuCullInstances`] batches.
#[derive(Default)]
pub struct GpuCullPlugin {
    /// The initial settings (also changeable at run time through the
    /// [`GpuCullSettings`] resource).
    pub settings: GpuCullSettings,
    /// The draw shader: `ShaderRef::Default` draws each batch with its
    /// material's own shaders through Bevy's material pipeline (a white
    /// `StandardMaterial` for a batch without one), behind the plugin's
    /// instance-fetching vertex stage. A custom shader replaces both
    /// stages for every batch: it provides `vertex` and `fragment` entry points taking
    /// Bevy's mesh vertex layout, and fetches instances with
    /// `#import bevy_gpu_cull::instance::fetch_instance` (group 2, bound by
    /// the plugin), e.g. to read [`crate::GpuCullInstance::user`].
    pub draw_shader: ShaderRef,
}

impl std::fmt::Debug for GpuCullPlugin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let shader = match &self.draw_shader {
            ShaderRef::Default => "default".to_string(),
            ShaderRef::Handle(h) => format!("{h:?}"),
            ShaderRef::Path(p) => p.to_string(),
        };
        f.debug_struct("GpuCullPlugin")
            .field("settings", &self.settings)
            .field("draw_shader", &shader)
            .finish()
    }
}

impl GpuCullPlugin {
    /// Visible instances summed over batches and views.
    pub const VISIBLE: DiagnosticPath = DiagnosticPath::const_new("gpu_cull/visible_instances");
    /// GPU time of the culling passes, milliseconds (all views and batches).
    pub const GPU_TIME: DiagnosticPath = DiagnosticPath::const_new("gpu_cull/gpu_time_ms");
    /// GPU time of the single-pass culls, milliseconds.
    pub const FUSED_TIME: DiagnosticPath = DiagnosticPath::const_new("gpu_cull/fused_pass_ms");
    /// GPU time of Hillis-Steele's vote passes, milliseconds.
    pub const VOTE_TIME: DiagnosticPath = DiagnosticPath::const_new("gpu_cull/vote_pass_ms");
    /// GPU time of Hillis-Steele's scan passes, milliseconds.
    pub const SCAN_TIME: DiagnosticPath = DiagnosticPath::const_new("gpu_cull/scan_passes_ms");
    /// GPU time of Hillis-Steele's compaction passes, milliseconds.
    pub const COMPACT_TIME: DiagnosticPath = DiagnosticPath::const_new("gpu_cull/compact_pass_ms");
    /// Draw arguments the CPU wrote to the GPU since the previous culled
    /// frame: one per new (view, batch) target or changed mesh, none in a
    /// frame that changes neither.
    pub const DRAW_ARGS_WRITES: DiagnosticPath = DiagnosticPath::const_new("gpu_cull/draw_args_writes");
}

impl Plugin for GpuCullPlugin {
    fn build(&self, app: &mut App) {
        #[cfg(feature = "picking")]
        crate::picking::hide_batch_meshes_from_mesh_picking(app);
        let (sender, receiver) = std::sync::mpsc::channel();
        app.insert_resource(self.settings.clone())
            .init_resource::<GpuCullStats>()
            .insert_resource(StatReceiver(Mutex::new(receiver)))
            .register_diagnostic(Diagnostic::new(Self::VISIBLE))
            .register_diagnostic(Diagnostic::new(Self::GPU_TIME))
            .register_diagnostic(Diagnostic::new(Self::FUSED_TIME))
            .register_diagnostic(Diagnostic::new(Self::VOTE_TIME))
            .register_diagnostic(Diagnostic::new(Self::SCAN_TIME))
            .register_diagnostic(Diagnostic::new(Self::COMPACT_TIME))
            .register_diagnostic(Diagnostic::new(Self::DRAW_ARGS_WRITES))
            .register_type::<crate::settings::GpuCullSettings>()
            .register_type::<GpuCullStats>()
            .register_type::<crate::components::GpuCullInstances>()
            .register_type::<crate::components::GpuCullBounds>()
            .register_type::<crate::lod::GpuCullLod>()
            .register_type::<crate::components::GpuCullCells>()
            .register_type::<crate::components::GpuCullOcclusion>()
            .register_type::<crate::gpu_instances::GpuCullComputeWrites>()
            .register_type::<crate::gpu_instances::GpuCullMotionVectors>()
            .register_type::<crate::components::GpuCullFrustumOverride>()
            .add_message::<crate::capture::GpuCullCaptureScene>()
            .add_systems(Last, crate::capture::write_captures)
            .add_systems(PreUpdate, receive_stats.in_set(GpuCullSystems::ReceiveStats))
            .add_systems(
                PostUpdate,
                crate::components::compute_bounds.in_set(GpuCullSystems::ComputeBounds),
            )
            .add_plugins(
                (
                    bevy::render::extract_component::ExtractComponentPlugin::<
                        crate::components::GpuCullFrustumOverride,
                    >::default(),
                    bevy::render::extract_component::ExtractComponentPlugin::<
                        crate::components::GpuCullOcclusion,
                    >::default(),
                ),
            );
        let draw_shader = match &self.draw_shader {
            ShaderRef::Default => ShaderRef::Default,
            ShaderRef::Handle(h) => ShaderRef::Handle(h.clone()),
            ShaderRef::Path(p) => ShaderRef::Path(p.clone()),
        };
        render::build(app, StatSender(Mutex::new(sender)), draw_shader);
    }

    fn finish(&self, app: &mut App) {
        render::finish(app);
    }
}

fn receive_stats(
    receiver: Res<StatReceiver>,
    settings: Res<GpuCullSettings>,
    mut stats: ResMut<GpuCullStats>,
    mut diagnostics: Diagnostics,
) {
    let receiver = receiver.0.lock().expect("stats channel poisoned");
    let mut culled = false;
    let mut forgot = false;
    let mut draw_args_writes = 0u32;
    while let Ok(message) = receiver.try_recv() {
        match message {
            StatMessage::Visible {
                view,
                batch,
                count,
                frame,
            } => {
                stats.visible.insert((view, batch), count);
                stats.counts_frame = stats.counts_frame.max(frame);
            }
            StatMessage::ShadowVisible { view, batch, count } => {
                stats.shadow_visible.insert((view, batch), count);
            }
            StatMessage::LevelsVisible {
                view,
                shadow,
                batch,
                levels,
            } => match (shadow, levels.is_empty()) {
                (Some(shadow), false) => {
                    stats.shadow_visible_per_level.insert((shadow, batch), levels);
                }
                (Some(shadow), true) => {
                    stats.shadow_visible_per_level.remove(&(shadow, batch));
                }
                (None, false) => {
                    stats.visible_per_level.insert((view, batch), levels);
                }
                (None, true) => {
                    stats.visible_per_level.remove(&(view, batch));
                }
            },
            StatMessage::Frame { variant, frame } => {
                stats.variant = Some(variant);
                stats.render_frame = stats.render_frame.max(frame);
                stats.culled_frames += 1;
                culled = true;
            }
            StatMessage::Timing {
                view,
                shadow,
                batch,
                timings,
            } => match shadow {
                Some(shadow) => {
                    stats.shadow_timings.insert((shadow, batch), *timings);
                }
                None => {
                    stats.timings.insert((view, batch), *timings);
                }
            },
            StatMessage::Uploaded { instances } => {
                stats.uploaded_instances += instances;
            }
            StatMessage::Drawn => stats.drawn_frames += 1,
            StatMessage::GpuBytes(bytes) => stats.gpu_buffer_bytes = bytes,
            StatMessage::OcclusionUnavailable(why) => stats.occlusion_unavailable = why,
            StatMessage::DrawArgsWritten => draw_args_writes += 1,
            StatMessage::Cells { view, batch, cells } => {
                stats.cells.insert((view, batch), cells);
            }
            StatMessage::TargetGone { view, shadow, batch } => {
                stats.forget(view, shadow, batch);
                forgot = true;
            }
            StatMessage::KernelReady(variant, spec) => {
                if !stats.kernels.contains(&(variant, spec)) {
                    stats.kernels.push((variant, spec));
                }
            }
        }
    }
    if culled || draw_args_writes > 0 {
        diagnostics.add_measurement(&GpuCullPlugin::DRAW_ARGS_WRITES, || f64::from(draw_args_writes));
    }
    if culled || forgot {
        // With the last batch hidden or despawned nothing is culled, and
        // the sum drops to what is left.
        let total: u32 = stats.visible.values().sum();
        diagnostics.add_measurement(&GpuCullPlugin::VISIBLE, || total as f64);
    }
    if !settings.pass_timings {
        forget_gpu_times(&mut stats);
    } else if culled && (!stats.timings.is_empty() || !stats.shadow_timings.is_empty()) {
        publish_gpu_times(&mut stats, &mut diagnostics);
    }
}

/// Pass timings off (or turned off: the culler that timed may still report
/// a frame or two): no time stays behind.
fn forget_gpu_times(stats: &mut ResMut<GpuCullStats>) {
    if stats.gpu_time_ms.is_some() || !stats.timings.is_empty() || !stats.shadow_timings.is_empty() {
        stats.timings.clear();
        stats.shadow_timings.clear();
        stats.gpu_time_ms = None;
    }
}

/// The GPU times of the latest timed culls, summed into the stats and
/// Bevy's diagnostics.
fn publish_gpu_times(stats: &mut GpuCullStats, diagnostics: &mut Diagnostics) {
    let all = || stats.timings.values().chain(stats.shadow_timings.values());
    let ms = |f: fn(&CullTimings) -> Option<std::time::Duration>| {
        all().filter_map(f).map(|d| d.as_secs_f64() * 1e3).sum::<f64>()
    };
    let total = ms(|t| Some(t.total));
    let passes: [(&DiagnosticPath, fn(&CullTimings) -> Option<std::time::Duration>); 4] = [
        (&GpuCullPlugin::FUSED_TIME, |t| t.fused),
        (&GpuCullPlugin::VOTE_TIME, |t| t.vote),
        (&GpuCullPlugin::SCAN_TIME, |t| t.scan),
        (&GpuCullPlugin::COMPACT_TIME, |t| t.compact),
    ];
    for (path, pass) in passes {
        if all().any(|t| pass(t).is_some()) {
            let value = ms(pass);
            diagnostics.add_measurement(path, || value);
        }
    }
    stats.gpu_time_ms = Some(total);
    diagnostics.add_measurement(&GpuCullPlugin::GPU_TIME, || total);
}
