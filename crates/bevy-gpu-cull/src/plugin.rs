//! [`GpuCullPlugin`]: settings, statistics and the render-world setup.

use crate::render;
use bevy::diagnostic::{Diagnostic, DiagnosticPath, Diagnostics, RegisterDiagnostic};
use bevy::platform::collections::HashMap;
use bevy::prelude::*;
use bevy::shader::ShaderRef;
use cull_core::{CullTimings, InstanceFormat, KernelSpec, ScanVariant};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender};

/// Adds GPU culling and drawing of [`crate::GpuCulledInstances`] batches.
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
    /// the plugin), e.g. to read [`crate::CulledInstance::user`].
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

/// The plugin's systems, for ordering your own against them.
///
/// ```no_run
/// # use bevy::prelude::*;
/// # use bevy_gpu_cull::GpuCullSystems;
/// # fn read_survivors() {}
/// # let mut render_app = App::new();
/// // In the render app: a pass of yours that reads this frame's culled sets.
/// render_app.add_systems(
///     bevy::core_pipeline::schedule::Core3d,
///     read_survivors.after(GpuCullSystems::Cull),
/// );
/// ```
#[derive(SystemSet, Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum GpuCullSystems {
    /// Main world, `PostUpdate`: fills in [`crate::GpuCullBounds`] for
    /// batches whose mesh has loaded.
    ComputeBounds,
    /// Main world, `PreUpdate`: takes the render world's statistics into
    /// [`GpuCullStats`].
    ReceiveStats,
    /// Render world, `ExtractSchedule`: brings the batches' changes and the
    /// settings over.
    Extract,
    /// Render world, in `RenderSystems::PrepareResources`: the culler, each
    /// batch's buffers and each (view, batch) target, in that order.
    Prepare,
    /// Render world, in `RenderSystems::QueueMeshes`: each (view, batch)
    /// put into the view's phases (`Opaque3d` after Bevy's
    /// `queue_material_meshes`; `Shadow`, `Opaque3dPrepass` and the
    /// deferred phase after Bevy's `queue_shadows` and
    /// `queue_prepass_material_meshes`).
    Queue,
    /// Render world, in the `Core3d` schedule: the cull of every batch for
    /// each view, before it draws (a camera before `Core3dSystems::Prepass`,
    /// its directional cascades before Bevy's `per_view_shadow_pass`, point
    /// and spot light views before `shared_shadow_pass`).
    Cull,
    /// Render world, in `RenderSystems::Cleanup`: the asynchronous readback
    /// of counts and timings, and the statistics sent to the main world.
    Readback,
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

/// A light's shadow view, culled like a camera: the light's main-world
/// entity; for a directional light the camera its cascades follow and the
/// cascade's index; for a point light the cube face's index (0 to 5); for a
/// spot light 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ShadowViewId {
    /// The light.
    pub light: Entity,
    /// The camera a directional light's cascades belong to.
    pub camera: Option<Entity>,
    /// The cascade (directional) or cube face (point light).
    pub index: u32,
}

/// What the GPU reported, read back asynchronously (a frame or more late).
#[derive(Resource, Clone, Debug, Default)]
pub struct GpuCullStats {
    /// Visible instances per (camera, batch) entity pair of the main world,
    /// for the pairs culled now: a despawned or hidden batch, and a camera
    /// that is gone or no longer sees the batch (its render layers), have
    /// no entry. [`visible_for`](Self::visible_for) and
    /// [`visible_in`](Self::visible_in) read it.
    pub visible: HashMap<(Entity, Entity), u32>,
    /// Instances kept per (shadow view, batch): what each light view draws
    /// into its shadow map.
    pub shadow_visible: HashMap<(ShadowViewId, Entity), u32>,
    /// For a batch with levels of detail ([`crate::GpuCullLod`]): the
    /// instances drawn at each level, finest first, per (camera, batch);
    /// they sum to its `visible` count (an instance in a cross-fade,
    /// [`crate::GpuCullLod::with_cross_fade`], counts in both its levels).
    pub visible_per_level: HashMap<(Entity, Entity), Vec<u32>>,
    /// The same per (shadow view, batch): each instance at the level the
    /// camera chose.
    pub shadow_visible_per_level: HashMap<(ShadowViewId, Entity), Vec<u32>>,
    /// The scan variant in use.
    pub variant: Option<ScanVariant>,
    /// GPU time per pass of the latest timed cull of each (camera, batch),
    /// from timestamp queries (when the adapter has them), read back
    /// asynchronously. A camera's cull covers its directional cascades too
    /// (they are culled in the same pass).
    pub timings: HashMap<(Entity, Entity), CullTimings>,
    /// GPU time per pass of the latest timed cull of each (shadow view,
    /// batch) culled as the first view of its pass: a spot light's view, or
    /// a point light's first face, whose cull covers all six faces.
    pub shadow_timings: HashMap<(ShadowViewId, Entity), CullTimings>,
    /// The sum of the latest timed culls' totals (cameras' and shadow
    /// views'), in milliseconds.
    pub gpu_time_ms: Option<f64>,
    /// Render frames in which the render world culled at least one batch
    /// (for any view: a camera or a shadow view; counted once per frame).
    pub culled_frames: u64,
    /// The render frame (a counter of render-world frames) of the latest
    /// cull reported by a [`GpuCullStats::culled_frames`] update.
    pub render_frame: u64,
    /// The render frame in which the newest counts in `visible` were culled.
    /// Counts arrive a few frames late: after moving a camera, wait until
    /// this exceeds the `render_frame` seen at the move to read counts that
    /// include it.
    pub counts_frame: u64,
    /// Instances uploaded to the GPU since the app started: a new or
    /// replaced batch counts whole, an edit counts the instances it touched
    /// (see [`crate::GpuCulledInstances`]).
    pub uploaded_instances: u64,
    /// Frames that drew at least one culled batch with instances in it (by
    /// the batch's latest visible count read back: a batch culled to zero
    /// instances does not count). It stays 0 until the cull kernels and
    /// the draw's pipeline have compiled, which Bevy does asynchronously
    /// (from a few frames to seconds after startup, by driver): until then
    /// the culled instances are culled and counted but not on screen. Wait
    /// for it before a screenshot. Like the counts, it arrives from the
    /// render world a frame or two after the draw.
    pub drawn_frames: u64,
    /// Bytes of GPU buffer memory the plugin holds (each batch's instances
    /// and draw records, each (view, batch)'s cull target and readback, shadow views included),
    /// as of a frame or two ago. It returns to its earlier level when the
    /// batches and cameras that grew it are gone.
    pub gpu_buffer_bytes: u64,
    /// For each (camera or first shadow view of a pass, batch) with
    /// [`crate::GpuCullCells`]: its cells, how many the pass's views keep
    /// (their frusta and levels' cut-off; an occlusion-culled camera's late
    /// phase also culls the cells behind its depth pyramid, not counted
    /// here), and whether the latest cull read only those.
    pub cells: HashMap<(Entity, Entity), CellStats>,
    /// The cull kernels Bevy has compiled for the plugin so far, by variant,
    /// in the order they became ready: the one-view kernel first, then a
    /// kernel per view count, visibility test and cull by cells that the
    /// batches and views need, and the forms for meshes centred on their
    /// origin (`KernelSpec::centred`) and for plain views
    /// (`KernelSpec::plain_views`), which follow their general kernels.
    pub kernels: Vec<(ScanVariant, KernelSpec)>,
    /// Why this device cannot occlusion-cull (it cannot build depth
    /// pyramids on the GPU: wgpu's GL backend), or `None` where it can.
    /// Cameras with [`crate::GpuCullOcclusion`] are then frustum-culled
    /// only, as if they had no such component; the plugin logs a warning
    /// once when it starts.
    pub occlusion_unavailable: Option<String>,
}

impl GpuCullStats {
    /// The instances of `batch` that `camera` sees, as of the latest count
    /// read back: 0 for a hidden or despawned batch, or a camera that does
    /// not see it.
    pub fn visible_for(&self, camera: Entity, batch: Entity) -> u32 {
        self.visible.get(&(camera, batch)).copied().unwrap_or(0)
    }

    /// The instances of `batch` visible, summed over the cameras that see
    /// it: 0 for a hidden or despawned batch.
    pub fn visible_in(&self, batch: Entity) -> u32 {
        self.visible
            .iter()
            .filter(|((_, b), _)| *b == batch)
            .map(|(_, &count)| count)
            .sum()
    }

    /// Forgets what was reported for a (view, batch) that is no longer
    /// culled.
    fn forget(&mut self, view: Entity, shadow: Option<ShadowViewId>, batch: Entity) {
        match shadow {
            Some(shadow) => {
                self.shadow_visible.remove(&(shadow, batch));
                self.shadow_visible_per_level.remove(&(shadow, batch));
                self.shadow_timings.remove(&(shadow, batch));
            }
            None => {
                self.visible.remove(&(view, batch));
                self.visible_per_level.remove(&(view, batch));
                self.timings.remove(&(view, batch));
                self.cells.remove(&(view, batch));
            }
        }
    }
}

/// The cells of a batch culled by cells ([`GpuCullStats::cells`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CellStats {
    /// Cells the batch is sorted into.
    pub cells: u32,
    /// Cells some view of the cull keeps (the cell pass's test, evaluated
    /// on the CPU to choose between the two culls).
    pub kept: u32,
    /// Whether the cull read only the kept cells (else it read every
    /// instance: too little would have been left unread).
    pub by_cells: bool,
}

/// Messages from the render world to the main world.
pub(crate) enum StatMessage {
    Visible {
        view: Entity,
        batch: Entity,
        count: u32,
        frame: u64,
    },
    ShadowVisible {
        view: ShadowViewId,
        batch: Entity,
        count: u32,
    },
    Frame {
        variant: ScanVariant,
        frame: u64,
    },
    Timing {
        view: Entity,
        shadow: Option<ShadowViewId>,
        batch: Entity,
        // Boxed: the largest message, sent once per group and frame.
        timings: Box<CullTimings>,
    },
    Uploaded {
        instances: u64,
    },
    /// The render world drew at least one culled batch this frame.
    Drawn,
    /// The plugin's GPU buffers changed size.
    GpuBytes(u64),
    /// The device cannot build depth pyramids ([`GpuCullStats::occlusion_unavailable`]).
    OcclusionUnavailable(Option<String>),
    /// A target's draw arguments were written.
    DrawArgsWritten,
    /// A cull kernel was compiled and handed to the culler.
    KernelReady(ScanVariant, KernelSpec),
    /// The cells of a (view, batch) culled by cells.
    Cells {
        view: Entity,
        batch: Entity,
        cells: CellStats,
    },
    /// A (view, batch) is no longer culled (the batch was despawned or
    /// hidden, the view is gone or no longer sees it).
    TargetGone {
        view: Entity,
        shadow: Option<ShadowViewId>,
        batch: Entity,
    },
    /// The counts per level of detail of a (view, batch) with levels.
    LevelsVisible {
        view: Entity,
        shadow: Option<ShadowViewId>,
        batch: Entity,
        levels: Vec<u32>,
    },
}

#[derive(Resource)]
pub(crate) struct StatSender(pub Mutex<Sender<StatMessage>>);

#[derive(Resource)]
struct StatReceiver(Mutex<Receiver<StatMessage>>);

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
            .register_type::<crate::components::GpuCulledInstances>()
            .register_type::<crate::components::GpuCullBounds>()
            .register_type::<crate::components::GpuCullLod>()
            .register_type::<crate::components::GpuCullCells>()
            .register_type::<crate::components::GpuCullOcclusion>()
            .register_type::<crate::components::CullingFrustumOverride>()
            .add_message::<crate::capture::CaptureScene>()
            .add_systems(Last, crate::capture::write_captures)
            .add_systems(PreUpdate, receive_stats.in_set(GpuCullSystems::ReceiveStats))
            .add_systems(
                PostUpdate,
                crate::components::compute_bounds.in_set(GpuCullSystems::ComputeBounds),
            )
            .add_plugins(
                (
                    bevy::render::extract_component::ExtractComponentPlugin::<
                        crate::components::CullingFrustumOverride,
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

fn receive_stats(receiver: Res<StatReceiver>, mut stats: ResMut<GpuCullStats>, mut diagnostics: Diagnostics) {
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
    if culled && (!stats.timings.is_empty() || !stats.shadow_timings.is_empty()) {
        publish_gpu_times(&mut stats, &mut diagnostics);
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
