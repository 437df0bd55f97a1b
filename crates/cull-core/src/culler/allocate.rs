//! Targets and cell indices sized for a [`Culler`]: its chunk length, tile
//! and dispatch shape decide their buffers.

use super::setup::Culler;
use super::spec::KernelSpec;
use crate::CullError;
use crate::buffers::{CullTarget, TargetSpec};
use crate::cells::CellIndex;
use crate::visibility::VisibilityTest;

impl CellIndex {
    /// Allocates the cells of a batch of up to `capacity` instances culled
    /// by `culler` (and only by it), in cells of its
    /// [`Culler::tile_len`]. Write the bounds of a [`crate::cells::CellLayout`]
    /// with [`CellIndex::write_bounds`].
    pub fn new(device: &wgpu::Device, culler: &Culler, capacity: u32) -> Result<Self, CullError> {
        let cell_len = culler.tile_len;
        let cells = capacity.div_ceil(cell_len).max(1);
        let cells_per_chunk = culler.window_len / cell_len;
        let chunks = capacity.div_ceil(culler.window_len).max(1);
        // The record, then a word per cell (a kept tile or a flag) or, for
        // the ordered variant, a bit per kept cell and one per whole cell
        // (`kept_bits_word` and `whole_bits_word` in params.wgsl).
        let words = crate::cells::CELL_RECORD_WORDS as u64
            + (cells_per_chunk as u64).max(2 * cells_per_chunk.div_ceil(32) as u64);
        let region_bytes = (words * 4).div_ceil(256) * 256;
        let buffer = |label, size: u64, usage| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage,
                mapped_at_creation: false,
            })
        };
        Ok(CellIndex {
            culler_id: culler.id,
            bounds: buffer(
                "cull-cell-bounds",
                cells as u64 * crate::cells::CELL_BOUNDS_BYTES,
                wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            ),
            kept: buffer(
                "cull-kept-cells",
                region_bytes * chunks as u64,
                wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
            ),
            cells,
            cell_len,
            cells_per_chunk,
            region_bytes,
            chunks,
            min_skipped_bytes: crate::cells::CELLS_MIN_SKIPPED_BYTES,
            listed_min_skipped_bytes: crate::cells::LISTED_CELLS_MIN_SKIPPED_BYTES,
        })
    }
}

impl CullTarget {
    /// Allocates a target for up to `capacity` instances, culled by
    /// `culler` (and only by it: another culler refuses it). A culler that
    /// compiles its own kernels compiles the general one this target needs
    /// now (the form for meshes centred on their origin, and the other
    /// visibility tests' kernels, at their first cull).
    pub fn new(device: &wgpu::Device, culler: &Culler, capacity: u32) -> Result<Self, CullError> {
        Self::with_views(device, culler, capacity, 1)
    }

    /// Like [`Self::new`], for culls of up to `views` views in one pass
    /// ([`super::CullRequest`]): `capacity` instances and one set of draw
    /// arguments per view. `views` may not exceed the culler's
    /// [`Culler::max_views`].
    pub fn with_views(
        device: &wgpu::Device,
        culler: &Culler,
        capacity: u32,
        views: u32,
    ) -> Result<Self, CullError> {
        if views == 0 || views > culler.max_views {
            return Err(CullError::ViewCount {
                views: views as usize,
                max: culler.max_views,
            });
        }
        let windows = culler.windows_for(capacity, views)?;
        if culler.compiles {
            culler.kernel_for(KernelSpec::flat(windows, views, VisibilityTest::Frustum))?;
        }
        let chunk_len = capacity.min(culler.window_len);
        let dispatch = culler.dispatch;
        let (x, y) = dispatch.dims(dispatch.groups_for(chunk_len));
        // Distinct pass kinds are the timestamped passes of one chunk.
        let mut kinds: Vec<_> = culler.kernel.passes(windows).iter().map(|p| p.kind).collect();
        kinds.dedup();
        let param_views = if culler.kernel.dispatches_per_view() {
            views
        } else {
            1
        };
        CullTarget::allocate(
            device,
            TargetSpec {
                culler_id: culler.id,
                format: culler.format,
                output: culler.output,
                capacity,
                views,
                output_stride: culler.output.stride(culler.format),
                window_len: culler.window_len,
                windows,
                params_entries: windows as u64
                    * param_views as u64
                    * culler.kernel.params_per_chunk(culler.window_len) as u64,
                scratch: culler
                    .kernel
                    .scratch(chunk_len, x as u64 * y as u64, dispatch.per_workgroup, views),
                // One more for a cull by cells' cell pass.
                timed_passes: culler
                    .timestamps
                    .then_some(windows * param_views * kinds.len() as u32 + 1),
                timestamp_period: culler.timestamp_period,
            },
        )
    }
}
