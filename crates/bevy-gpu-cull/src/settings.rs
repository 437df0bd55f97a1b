//! What an application sets: the plugin's run-time settings, and its
//! system sets for ordering its own systems against the plugin's.

use bevy::prelude::*;
use cull_core::{InstanceFormat, ScanVariant};

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
    /// [`crate::GpuCullStats`].
    ReceiveStats,
    /// Render world, `ExtractSchedule`: brings the batches' changes and the
    /// settings over.
    Extract,
    /// Render world, in `RenderSystems::PrepareResources`: the culler, each
    /// batch's buffers, the view groups and each (view, batch) target, in
    /// that order (the targets' draw bind groups follow in
    /// `RenderSystems::PrepareBindGroups`).
    Prepare,
    /// Render world, in `RenderSystems::QueueMeshes`: each (view, batch)
    /// put into the view's phases (`Opaque3d` after Bevy's
    /// `queue_material_meshes`; `Shadow`, `Opaque3dPrepass` and the
    /// deferred phase after Bevy's `queue_shadows` and
    /// `queue_prepass_material_meshes`).
    Queue,
    /// Render world, in the `RenderGraph` schedule's
    /// `RenderGraphSystems::Begin`: the application's compute passes that
    /// write instances ([`crate::GpuCullComputeWrites`]), before every
    /// view's run, so before any cull; the plugin's pass that marks the
    /// instances past each batch's count culled follows. Systems here take
    /// Bevy's `RenderContext` and [`crate::GpuCullInstanceBuffers`].
    WriteInstances,
    /// Render world, in the `Core3d` schedule: the cull of every batch for
    /// each view, before it draws (a camera before `Core3dSystems::Prepass`,
    /// its directional cascades before Bevy's `per_view_shadow_pass`, point
    /// and spot light views before `shared_shadow_pass`).
    Cull,
    /// Render world, in `RenderSystems::Cleanup`: the asynchronous readback
    /// of counts and timings, and the statistics sent to the main world.
    Readback,
}

/// Run-time settings; a change takes effect on the next frame. Reflected
/// field by field (cull-core's `bevy_reflect` feature reflects its
/// enums), so an inspector can switch the variant or the format.
#[derive(Resource, Clone, Debug, PartialEq, Eq, Reflect)]
#[reflect(Resource, Default, Debug, PartialEq, Clone)]
pub struct GpuCullSettings {
    /// The scan variant; `None` picks the fastest compiled-in one the adapter runs.
    pub variant: Option<ScanVariant>,
    /// How instances are stored for culling.
    pub format: InstanceFormat,
    /// Times each cull's passes on the GPU (where the device has timestamp
    /// queries) into [`crate::GpuCullStats::gpu_time_ms`] and `timings`, and
    /// the `gpu_cull/*_ms` diagnostics. Off by default: the timestamps and
    /// their readback cost the GPU time of their own in every cull (about
    /// 7 µs per batch and view group on an H200). Bevy's
    /// `RenderDiagnosticsPlugin` times the culls of each view as a whole
    /// (`render/gpu_cull/elapsed_gpu`) without them.
    pub pass_timings: bool,
    /// Draws batches that share a mesh, a transform and a material bind
    /// group (one material, or bindless materials in one slab, as Bevy's
    /// `StandardMaterial`s are where the device allows) as one: one cull
    /// and one draw per view for all of them, as Bevy draws its meshes of
    /// one mesh and bind group. On by default; each batch keeps its own
    /// visible counts. Off, every batch
    /// is culled and drawn on its own, which costs the render thread a
    /// cull and a draw per batch and view (`docs/benchmarks.md`).
    pub merge_batches: bool,
}

impl Default for GpuCullSettings {
    fn default() -> Self {
        Self {
            variant: None,
            format: InstanceFormat::PosQuat,
            pass_timings: false,
            merge_batches: true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bevy::reflect::{GetPath, TypeRegistry};

    #[test]
    fn settings_reflect_as_a_resource_that_clones_and_compares() {
        let mut registry = TypeRegistry::default();
        registry.register::<GpuCullSettings>();
        let registration = registry
            .get(std::any::TypeId::of::<GpuCullSettings>())
            .expect("registered");
        assert!(registration.data::<ReflectResource>().is_some());
        assert!(registration.data::<ReflectDefault>().is_some());
        let settings = GpuCullSettings {
            variant: Some(ScanVariant::Ordered),
            format: InstanceFormat::Packed16,
            pass_timings: true,
            merge_batches: false,
        };
        let cloned = settings.reflect_clone().expect("clones");
        assert_eq!(cloned.reflect_partial_eq(&settings), Some(true));
        assert_eq!(
            cloned.reflect_partial_eq(&GpuCullSettings::default()),
            Some(false)
        );
        assert_eq!(cloned.take::<GpuCullSettings>().ok(), Some(settings.clone()));
        // Field by field, as an inspector edits it.
        let mut edited = settings;
        *edited.path_mut::<InstanceFormat>("format").unwrap() = InstanceFormat::PosQuat;
        *edited.path_mut::<Option<ScanVariant>>("variant").unwrap() = None;
        *edited.path_mut::<bool>("pass_timings").unwrap() = false;
        *edited.path_mut::<bool>("merge_batches").unwrap() = true;
        assert_eq!(edited, GpuCullSettings::default());
        let bevy::reflect::ReflectRef::Enum(format) = edited.format.reflect_ref() else {
            panic!("the format reflects as an enum");
        };
        assert_eq!(format.variant_name(), "PosQuat");
    }
}
