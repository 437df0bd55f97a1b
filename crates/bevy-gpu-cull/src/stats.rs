//! What the GPU reported ([`GpuCullStats`]), read back asynchronously, and
//! the messages the render world sends it in.

use bevy::platform::collections::HashMap;
use bevy::prelude::*;
use cull_core::{CullTimings, KernelSpec, ScanVariant};
use std::sync::Mutex;
use std::sync::mpsc::{Receiver, Sender};

/// A light's shadow view, culled like a camera: the light's main-world
/// entity; for a directional light the camera its cascades follow and the
/// cascade's index; for a point light the cube face's index (0 to 5); for a
/// spot light 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Reflect)]
#[reflect(Debug, PartialEq, Hash, Clone)]
pub struct GpuCullShadowView {
    /// The light.
    pub light: Entity,
    /// The camera a directional light's cascades belong to.
    pub camera: Option<Entity>,
    /// The cascade (directional) or cube face (point light).
    pub index: u32,
}

/// What the GPU reported, read back asynchronously (a frame or more late).
///
/// Reflected, for inspectors; the fields of `cull-core` types (the scan
/// variant, the timings, the kernels), which know nothing of Bevy, are not.
#[derive(Resource, Clone, Debug, Default, Reflect)]
#[reflect(Resource, Default, Debug, Clone)]
pub struct GpuCullStats {
    /// Visible instances per (camera, batch) entity pair of the main world,
    /// for the pairs culled now: a despawned or hidden batch, and a camera
    /// that is gone or no longer sees the batch (its render layers), have
    /// no entry. [`visible_for`](Self::visible_for) and
    /// [`visible_in`](Self::visible_in) read it.
    pub visible: HashMap<(Entity, Entity), u32>,
    /// Instances kept per (shadow view, batch): what each light view draws
    /// into its shadow map.
    pub shadow_visible: HashMap<(GpuCullShadowView, Entity), u32>,
    /// For a batch with levels of detail ([`crate::GpuCullLod`]): the
    /// instances drawn at each level, finest first, per (camera, batch);
    /// they sum to its `visible` count (an instance in a cross-fade,
    /// [`crate::GpuCullLod::with_cross_fade`], counts in both its levels).
    pub visible_per_level: HashMap<(Entity, Entity), Vec<u32>>,
    /// The same per (shadow view, batch): each instance at the level the
    /// camera chose.
    pub shadow_visible_per_level: HashMap<(GpuCullShadowView, Entity), Vec<u32>>,
    /// The scan variant in use.
    pub variant: Option<ScanVariant>,
    /// GPU time per pass of the latest timed cull of each (camera, batch),
    /// from timestamp queries (with [`crate::GpuCullSettings::pass_timings`],
    /// when the adapter has them), read back
    /// asynchronously. A camera's cull covers its directional cascades too
    /// (they are culled in the same pass).
    #[reflect(ignore)]
    pub timings: HashMap<(Entity, Entity), CullTimings>,
    /// GPU time per pass of the latest timed cull of each (shadow view,
    /// batch) culled as the first view of its pass: a spot light's view, or
    /// a point light's first face, whose cull covers all six faces.
    #[reflect(ignore)]
    pub shadow_timings: HashMap<(GpuCullShadowView, Entity), CullTimings>,
    /// The sum of the latest timed culls' totals (cameras' and shadow
    /// views'), in milliseconds; `None` unless
    /// [`crate::GpuCullSettings::pass_timings`].
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
    /// (see [`crate::GpuCullInstances`]).
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
    /// and draw records, each (view, batch)'s cull target, shadow views
    /// included, and the counts' readback), as of a frame or two ago. It returns to its earlier level when the
    /// batches and cameras that grew it are gone.
    pub gpu_buffer_bytes: u64,
    /// For each (camera or first shadow view of a pass, batch) with
    /// [`crate::GpuCullCells`]: its cells, how many the pass's views keep
    /// (their frusta and levels' cut-off; an occlusion-culled camera's late
    /// phase also culls the cells behind its depth pyramid, not counted
    /// here), and whether the latest cull read only those.
    pub cells: HashMap<(Entity, Entity), GpuCullCellStats>,
    /// The cull kernels Bevy has compiled for the plugin so far, by variant,
    /// in the order they became ready: the one-view kernel first, then a
    /// kernel per view count, visibility test and cull by cells that the
    /// batches and views need, and the forms for meshes centred on their
    /// origin (`KernelSpec::centred`) and for plain views
    /// (`KernelSpec::plain_views`), which follow their general kernels.
    #[reflect(ignore)]
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
    pub(crate) fn forget(&mut self, view: Entity, shadow: Option<GpuCullShadowView>, batch: Entity) {
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
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Reflect)]
#[reflect(Debug, Default, PartialEq, Clone)]
pub struct GpuCullCellStats {
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
        view: GpuCullShadowView,
        batch: Entity,
        count: u32,
    },
    Frame {
        variant: ScanVariant,
        frame: u64,
    },
    Timing {
        view: Entity,
        shadow: Option<GpuCullShadowView>,
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
        cells: GpuCullCellStats,
    },
    /// A (view, batch) is no longer culled (the batch was despawned or
    /// hidden, the view is gone or no longer sees it).
    TargetGone {
        view: Entity,
        shadow: Option<GpuCullShadowView>,
        batch: Entity,
    },
    /// The counts per level of detail of a (view, batch) with levels.
    LevelsVisible {
        view: Entity,
        shadow: Option<GpuCullShadowView>,
        batch: Entity,
        levels: Vec<u32>,
    },
}

#[derive(Resource)]
pub(crate) struct StatSender(pub Mutex<Sender<StatMessage>>);

#[derive(Resource)]
pub(crate) struct StatReceiver(pub Mutex<Receiver<StatMessage>>);

#[cfg(test)]
mod tests {
    use super::*;
    use bevy::reflect::{GetPath, TypeRegistry};

    /// An inspector finds the statistics as a resource and reads their
    /// fields by name, the visible counts' map included.
    #[test]
    fn stats_reflect_as_a_resource_with_readable_fields() {
        let mut registry = TypeRegistry::default();
        registry.register::<GpuCullStats>();
        let registration = registry
            .get(std::any::TypeId::of::<GpuCullStats>())
            .expect("registered");
        assert!(registration.data::<ReflectResource>().is_some());
        let (camera, batch) = (Entity::from_raw_u32(1).unwrap(), Entity::from_raw_u32(2).unwrap());
        let mut stats = GpuCullStats {
            uploaded_instances: 42,
            ..default()
        };
        stats.visible.insert((camera, batch), 7);
        assert_eq!(stats.path::<u64>("uploaded_instances"), Ok(&42));
        let visible = stats.path::<HashMap<(Entity, Entity), u32>>("visible").unwrap();
        assert_eq!(visible.get(&(camera, batch)), Some(&7));
    }
}
