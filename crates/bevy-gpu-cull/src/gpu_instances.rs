//! Instances that live on the GPU: batches whose instances the
//! application's own compute passes write ([`GpuCullComputeWrites`]), and
//! batches that keep last frame's instances for per-instance motion
//! vectors ([`GpuCullMotionVectors`]).

use bevy::prelude::*;

/// On a batch: its instances are (also) written on the GPU, by compute
/// passes of the application, each frame before the cull, which culls,
/// levels and draws what they wrote in the same frame.
///
/// The passes run in the render world's `RenderGraph` schedule, in
/// [`crate::GpuCullSystems::WriteInstances`]; they find the batch's buffers
/// in [`crate::GpuCullInstanceBuffers`] (a bind group for the layout
/// [`crate::GpuCullInstanceBuffers::layout_descriptor`]) and write through
/// the WGSL import `bevy_gpu_cull::gpu_writes` (`write_instance`,
/// `read_instance`, `set_instance_count`, `add_instances`, ...), which
/// writes each instance both as the draw reads it and in the culler's
/// format. The instance count can be written on the GPU too, up to
/// [`Self::capacity`]; instances at and past it are neither culled in nor
/// drawn.
///
/// The batch's [`crate::GpuCullInstances`] list gives the first
/// instances and the count when it is uploaded (again whenever its length
/// changes); CPU edits overwrite what the GPU wrote in the edited ranges.
///
/// What it costs: the batch is culled over its whole capacity every frame
/// (instances past the count are culled at once, but read), and a pass of
/// the plugin's marks the instances past the count culled (16 bytes each).
/// It is culled flat: a batch with [`crate::GpuCullCells`] ignores them
/// (with a warning), since the cells' bounds are computed on the CPU.
#[derive(Component, Clone, Copy, Debug, PartialEq, Reflect)]
#[reflect(Component, Default, Debug, PartialEq, Clone)]
pub struct GpuCullComputeWrites {
    /// The most instances the GPU may hold (at least the list's length).
    pub capacity: u32,
    /// The smallest and largest scale a GPU write may give an instance. An
    /// instance written with a scale outside them is not drawn (culled):
    /// the draw's windings and, in `InstanceFormat::Packed16`, which
    /// stores no scale, the bounds the cull tests are sized for them.
    pub scales: [f32; 2],
}

impl Default for GpuCullComputeWrites {
    fn default() -> Self {
        Self {
            capacity: 0,
            scales: [0.0, 1.0],
        }
    }
}

impl GpuCullComputeWrites {
    /// Room for `capacity` instances, scales 0 to 1.
    pub fn new(capacity: u32) -> Self {
        Self {
            capacity,
            ..default()
        }
    }

    /// Scales from `min` to `max` (`min <= max`, both finite).
    pub fn with_scales(self, min: f32, max: f32) -> Self {
        Self {
            scales: [min, max],
            ..self
        }
    }

    /// What is wrong with it, if anything: non-finite or inverted scales.
    pub(crate) fn problem(&self) -> Option<&'static str> {
        let [lo, hi] = self.scales;
        (!(lo.is_finite() && hi.is_finite() && lo <= hi))
            .then_some("GpuCullComputeWrites::scales must be finite, the smaller first")
    }
}

/// On a batch: each instance gets its own motion vectors, as a moving
/// Bevy mesh does. The plugin keeps the batch's instances of the last
/// frame (a copy of its draw records, 64 bytes an instance, made after
/// each frame's draws) and the motion-vector prepass moves each vertex
/// from where its instance was to where it is, whether the CPU
/// ([`crate::GpuCullInstances`]) or the GPU
/// ([`GpuCullComputeWrites`]) moved it. Without it, a batch's motion
/// vectors carry only the camera's and the batch transform's motion, and
/// temporal anti-aliasing or motion blur smear instances that move.
///
/// An instance new this frame (pushed on the CPU) has no motion of its
/// own; one the GPU adds takes whatever its slot held last frame.
#[derive(Component, Clone, Copy, Debug, Default, PartialEq, Eq, Reflect)]
#[reflect(Component, Default, Debug, PartialEq, Clone)]
pub struct GpuCullMotionVectors;
