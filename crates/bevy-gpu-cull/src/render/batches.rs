//! Each batch's GPU buffers: its instances in the culler's format for the
//! cull, and the records the draw reads, rewritten only where the list
//! changed; a batch sorted into cells keeps its cells' bounds on the GPU.

use super::extract::BatchData;
use super::kernels::{RenderCuller, batch_capacity, next_id};
use super::merge::MergedInto;
use crate::components::GpuCullInstance;
use crate::gpu_instances::GpuCullComputeWrites;
use crate::stats::{StatMessage, StatSender};
use bevy::prelude::*;
use bevy::render::renderer::{RenderDevice, RenderQueue};
use cull_core::{CellIndex, CellLayout, CullInput, Culler, Instance, InstanceFormat, Sphere};
use std::ops::Range;

/// A batch's GPU buffers.
#[derive(Component)]
pub(crate) struct GpuBatch {
    /// Instances in the culler's format, for culling.
    pub input: CullInput,
    /// [`GpuCullInstance`] records (64 bytes), read by the draw through the
    /// survivors' indices, whatever the culling format.
    pub draw_data: wgpu::Buffer,
    /// Instances in the buffers (the batch's length when last prepared).
    pub count: u32,
    pub capacity: u32,
    pub culler_generation: u64,
    /// Unique per pair of buffers, so views rebind only when they change.
    pub buffers_id: u64,
    /// A batch culled by cells ([`crate::GpuCullCells`]): the buffers hold
    /// its instances in cell order.
    pub cells: Option<BatchCells>,
    /// A batch written on the GPU ([`crate::GpuCullComputeWrites`]): its
    /// header (count, capacity, format, scales).
    pub gpu_writes: Option<wgpu::Buffer>,
    /// A batch with [`crate::GpuCullMotionVectors`]: last frame's draw
    /// records, copied from `draw_data` after each frame's draws.
    pub previous: Option<wgpu::Buffer>,
}

impl GpuBatch {
    /// Instances each cull reads: a batch written on the GPU is culled over
    /// its capacity (those past its count are marked culled on the GPU).
    pub fn cull_count(&self) -> u32 {
        if self.gpu_writes.is_some() {
            self.capacity
        } else {
            self.count
        }
    }

    /// The records the motion-vector prepass reads as last frame's: the
    /// copy where the batch keeps one, else this frame's (no motion of
    /// the instances' own).
    pub fn previous_records(&self) -> &wgpu::Buffer {
        self.previous.as_ref().unwrap_or(&self.draw_data)
    }
}

/// The header of a batch written on the GPU (`GpuCullBatchHeader` in
/// `bevy_gpu_cull::gpu_writes`).
#[repr(C)]
#[derive(Clone, Copy, bytemuck::Pod, bytemuck::Zeroable)]
struct GpuWritesHeader {
    count: u32,
    capacity: u32,
    format: u32,
    parts: u32,
    min_scale: f32,
    max_scale: f32,
    _padding: [u32; 2],
}

/// A batch sorted into cells: instance `k` of the GPU buffers is the
/// batch's `layout.order[k]`.
pub(crate) struct BatchCells {
    pub layout: CellLayout,
    /// Where each of the batch's instances is in the GPU buffers.
    pub position: Vec<u32>,
    pub index: CellIndex,
    /// The mesh-space sphere the cells' bounds were computed with
    /// ([`BatchData::cull_bounds`]).
    pub bounds: Sphere,
    /// Each cell's radius when its bounds were last computed from all its
    /// instances; edits grow the bounds from there.
    fitted: Vec<f32>,
    /// Cells grown by edits since they were last computed: tightened a
    /// few per frame ([`LOOSE_CELLS_PER_FRAME`]), or at once when grown
    /// past twice their fitted radius.
    loose: std::collections::BTreeSet<u32>,
}

/// Grown cells [`BatchCells::edit`] tightens per frame: a bounded cost for
/// a batch whose instances all move, each tightening reading one cell.
const LOOSE_CELLS_PER_FRAME: usize = 64;

impl BatchCells {
    /// Sorts `instances` into cells and uploads them in cell order into new
    /// buffers' `input` and `draw_data`.
    fn upload(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        culler: &Culler,
        capacity: u32,
        data: &BatchData,
        input: &CullInput,
        draw_data: &wgpu::Buffer,
    ) -> Result<Self, cull_core::CullError> {
        let format = culler.format();
        let encoded: Vec<Instance> = data.instances.iter().map(|i| i.cull_instance(format)).collect();
        let bytes = format.encode(&encoded)?;
        let (sorted, layout) = CellLayout::sort(format, &bytes, data.cull_bounds(format), culler.tile_len())?;
        input.write(queue, 0, &sorted)?;
        let records: Vec<GpuCullInstance> =
            layout.order.iter().map(|&i| data.instances[i as usize]).collect();
        queue.write_buffer(draw_data, 0, bytemuck::cast_slice(&draw_records(&records)));
        let mut index = CellIndex::new(device, culler, capacity)?;
        index.write_bounds(queue, 0, &layout.bounds)?;
        if let Some(settings) = data.cells {
            set_thresholds(&mut index, settings);
        }
        let mut position = vec![0; layout.order.len()];
        for (k, &i) in layout.order.iter().enumerate() {
            position[i as usize] = k as u32;
        }
        Ok(Self {
            fitted: layout.bounds.iter().map(|c| c.sphere[3]).collect(),
            layout,
            position,
            index,
            bounds: data.cull_bounds(format),
            loose: Default::default(),
        })
    }

    /// Recomputes the bounds of `cells` (all with `None`) from `data`'s
    /// instances and writes them: new mesh bounds, or grown cells to tighten.
    fn refit(
        &mut self,
        queue: &wgpu::Queue,
        format: InstanceFormat,
        data: &BatchData,
        cells: Option<&std::collections::BTreeSet<u32>>,
    ) -> Result<(), cull_core::CullError> {
        let len = self.layout.cell_len as usize;
        let n = self.layout.order.len();
        let all_cells = cells.is_none();
        let all: Vec<u32> = (0..self.layout.cells()).collect();
        let cells: Vec<u32> = cells.map_or(all, |c| c.iter().copied().collect());
        for &c in &cells {
            let range = c as usize * len..((c as usize + 1) * len).min(n);
            let encoded: Vec<Instance> = self.layout.order[range]
                .iter()
                .map(|&i| data.instances[i as usize].cull_instance(format))
                .collect();
            let bytes = format.encode(&encoded)?;
            let cell =
                CellLayout::bounds_of(format, &bytes, data.cull_bounds(format), self.layout.cell_len)?[0];
            self.layout.bounds[c as usize] = cell;
            self.fitted[c as usize] = cell.sphere[3];
            self.loose.remove(&c);
        }
        if all_cells {
            self.bounds = data.cull_bounds(format);
        }
        self.write_bounds(queue, &cells)
    }

    /// Writes the bounds of `cells` (ascending), one write per run of
    /// consecutive cells.
    fn write_bounds(&self, queue: &wgpu::Queue, cells: &[u32]) -> Result<(), cull_core::CullError> {
        for run in runs(cells) {
            let at = run.start as usize..run.end as usize;
            self.index
                .write_bounds(queue, run.start, &self.layout.bounds[at])?;
        }
        Ok(())
    }

    /// Uploads the edited instances `edited` (indices into the batch's
    /// list) where they sit in cell order, one write per run of consecutive
    /// places, and keeps their cells' bounds conservative: each edit grows
    /// its cell's bounds (constant time), and grown cells are recomputed
    /// from their instances later, a few per frame, or at once when grown
    /// past twice their fitted radius. Returns the instances written. On an
    /// error the runs after it are still written and every grown cell's
    /// bounds too; the caller then sorts and uploads the batch again.
    fn edit(
        &mut self,
        queue: &wgpu::Queue,
        format: InstanceFormat,
        data: &BatchData,
        input: &CullInput,
        draw_data: &wgpu::Buffer,
        edited: impl Iterator<Item = u32>,
    ) -> Result<u64, cull_core::CullError> {
        let mut places: Vec<u32> = edited.map(|i| self.position[i as usize]).collect();
        places.sort_unstable();
        places.dedup();
        let stride = format.stride() as usize;
        let bounds = data.cull_bounds(format);
        let mut grown = std::collections::BTreeSet::new();
        let mut failed = Ok(());
        for run in runs(&places) {
            let records: Vec<GpuCullInstance> = self.layout.order[run.start as usize..run.end as usize]
                .iter()
                .map(|&i| data.instances[i as usize])
                .collect();
            let encoded: Vec<Instance> = records.iter().map(|r| r.cull_instance(format)).collect();
            let written = format.encode(&encoded).and_then(|bytes| {
                input.write(queue, run.start, &bytes)?;
                Ok(bytes)
            });
            let bytes = match written {
                Ok(bytes) => bytes,
                Err(e) => {
                    failed = Err(e);
                    continue;
                }
            };
            queue.write_buffer(
                draw_data,
                run.start as u64 * size_of::<GpuCullInstance>() as u64,
                bytemuck::cast_slice(&draw_records(&records)),
            );
            for (k, place) in run.enumerate() {
                match self
                    .layout
                    .grow(format, place, &bytes[k * stride..(k + 1) * stride], bounds)
                {
                    Ok(cell) => {
                        grown.insert(cell);
                    }
                    Err(e) => failed = Err(e),
                }
            }
        }
        self.loose.extend(grown.iter().copied());
        // Tighten: the cells grown past twice their fitted radius, then a
        // few more of the loose ones.
        let mut tighten: std::collections::BTreeSet<u32> = grown
            .iter()
            .copied()
            .filter(|&c| self.layout.bounds[c as usize].sphere[3] > 2.0 * self.fitted[c as usize])
            .collect();
        let more: Vec<u32> = self
            .loose
            .iter()
            .copied()
            .filter(|c| !tighten.contains(c))
            .take(LOOSE_CELLS_PER_FRAME)
            .collect();
        tighten.extend(more);
        let grown: Vec<u32> = grown.difference(&tighten).copied().collect();
        self.write_bounds(queue, &grown)?;
        self.refit(queue, format, data, Some(&tighten))?;
        failed.map(|()| places.len() as u64)
    }
}

/// A batch's thresholds for culling by cells: its own, or cull-core's
/// default for each way of culling by cells.
fn set_thresholds(index: &mut CellIndex, settings: crate::GpuCullCells) {
    match settings.min_skipped_bytes {
        Some(bytes) => index.set_min_skipped_bytes(bytes),
        None => index.reset_min_skipped_bytes(),
    }
}

/// Runs of consecutive values of ascending `values`, as ranges.
fn runs(values: &[u32]) -> impl Iterator<Item = Range<u32>> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        let start = *values.get(i)?;
        let mut end = start + 1;
        i += 1;
        while values.get(i) == Some(&end) {
            end += 1;
            i += 1;
        }
        Some(start..end)
    })
}

/// The records the draw reads: rotations normalized, as the cull's input is
/// (`InstanceFormat::encode`), so cull and draw apply the same rotation
/// whatever the quaternion's length. One that cannot be normalized is left
/// as it is: the cull drops that instance.
fn draw_records(slice: &[GpuCullInstance]) -> Vec<GpuCullInstance> {
    slice
        .iter()
        .map(|i| {
            let unit = i.cull_instance(InstanceFormat::PosQuat).normalized().rotation;
            let rotation = if unit.is_finite() { unit } else { i.rotation };
            GpuCullInstance { rotation, ..*i }
        })
        .collect()
}

/// After a device loss (and at start-up): buffers of the old device are
/// dropped, and every batch is uploaded again from its render-world copy.
pub(crate) fn forget_gpu_batches(mut commands: Commands, batches: Query<Entity, With<GpuBatch>>) {
    for entity in &batches {
        commands.entity(entity).remove::<GpuBatch>();
    }
}

/// Uploads what changed: the whole batch into new buffers when it is new,
/// outgrew its capacity or the culling format changed; otherwise only the
/// changed ranges.
pub(crate) fn prepare_batches(
    mut commands: Commands,
    device: Res<RenderDevice>,
    queue: Res<RenderQueue>,
    culler: Option<Res<RenderCuller>>,
    sender: Res<StatSender>,
    mut batches: Query<(Entity, &mut BatchData, Option<&mut GpuBatch>), Without<MergedInto>>,
    removed: Query<Entity, (With<GpuBatch>, Or<(Without<BatchData>, With<MergedInto>)>)>,
) {
    // Batches whose component went (extraction removed their copy), and
    // those drawn with others (their instances are in the combined batch's
    // buffers; they are uploaded again when they leave it).
    for entity in &removed {
        commands.entity(entity).remove::<GpuBatch>();
    }
    let Some(culler) = culler else {
        return;
    };
    let format = culler.culler().format();
    let mut uploaded = 0u64;
    for (entity, mut data, gpu) in &mut batches {
        let data = data.as_mut();
        let count = data.instances.len() as u32;
        // A batch sorted into cells is sorted again when its list is
        // replaced or resized; one written on the GPU gets new buffers for
        // a new capacity.
        let want_cells = data.culls_by_cells();
        let reusable = |g: &GpuBatch| {
            g.culler_generation == culler.generation
                && g.cells.is_some() == want_cells
                && (!want_cells || (g.count == count && !data.upload_all))
                && g.gpu_writes.is_some() == data.gpu_writes.is_some()
                && g.previous.is_some() == data.motion
                && match data.gpu_writes {
                    Some(writes) => g.capacity == gpu_capacity(count, writes),
                    None => g.capacity >= count,
                }
        };
        match gpu {
            Some(mut gpu) if reusable(&gpu) => uploaded += upload_edits(&queue, format, data, gpu.as_mut()),
            _ => {
                if let Some(gpu) = upload_new(device.wgpu_device(), &queue, &culler, data) {
                    uploaded += count as u64;
                    commands.entity(entity).insert(gpu);
                }
            }
        }
    }
    if uploaded > 0 {
        let _ = sender
            .0
            .lock()
            .map(|s| s.send(StatMessage::Uploaded { instances: uploaded }));
    }
}

/// Uploads the ranges of `data` edited since the last upload into `gpu`'s
/// buffers (all of it after a replacement); returns the instances written.
fn upload_edits(
    queue: &RenderQueue,
    format: InstanceFormat,
    data: &mut BatchData,
    gpu: &mut GpuBatch,
) -> u64 {
    if let Some(cells) = gpu.cells.as_mut() {
        return edit_cells(queue, format, data, cells, (&gpu.input, &gpu.draw_data));
    }
    let count = data.instances.len() as u32;
    let pending = std::mem::take(&mut data.uploads);
    let ranges: Vec<Range<u32>> = if data.upload_all {
        std::iter::once(0..count).collect()
    } else {
        pending.ranges().to_vec()
    };
    data.upload_all = false;
    let mut uploaded = 0;
    if let Some(header) = &gpu.gpu_writes
        && gpu.count != count
    {
        queue.write_buffer(header, 0, bytemuck::bytes_of(&count));
    }
    for range in ranges {
        let slice = &data.instances[range.start as usize..range.end as usize];
        let encoded: Vec<Instance> = slice.iter().map(|i| i.cull_instance(format)).collect();
        if let Err(e) = gpu.input.write_instances(queue, range.start, &encoded) {
            error!("GPU culling: {e}");
            continue;
        }
        let records = draw_records(slice);
        let offset = range.start as u64 * size_of::<GpuCullInstance>() as u64;
        queue.write_buffer(&gpu.draw_data, offset, bytemuck::cast_slice(&records));
        // Instances new to the list have no motion of their own.
        if let Some(previous) = &gpu.previous
            && range.end > gpu.count
        {
            let new = range.start.max(gpu.count) - range.start;
            let at = (range.start + new) as u64 * size_of::<GpuCullInstance>() as u64;
            queue.write_buffer(previous, at, bytemuck::cast_slice(&records[new as usize..]));
        }
        uploaded += slice.len() as u64;
    }
    gpu.count = count;
    uploaded
}

/// The edited instances of a batch sorted into cells, where they sit in
/// cell order, their cells grown to cover them; new bounds (the mesh's, or
/// the scales a format without scale covers) refit them all. On an error
/// the batch is sorted and uploaded again next frame.
fn edit_cells(
    queue: &RenderQueue,
    format: InstanceFormat,
    data: &mut BatchData,
    cells: &mut BatchCells,
    (input, draw_data): (&CullInput, &wgpu::Buffer),
) -> u64 {
    if let Some(settings) = data.cells {
        set_thresholds(&mut cells.index, settings);
    }
    let pending = std::mem::take(&mut data.uploads);
    let edited = pending.ranges().iter().flat_map(|r| r.clone());
    let (written, result) = match cells.edit(queue, format, data, input, draw_data, edited) {
        Ok(n) if cells.bounds != data.cull_bounds(format) => (n, cells.refit(queue, format, data, None)),
        Ok(n) => (n, Ok(())),
        Err(e) => (0, Err(e)),
    };
    if let Err(e) = result {
        error!("GPU culling: {e}; the batch is uploaded again");
        data.upload_all = true;
    }
    written
}

/// New buffers for `data`, the whole list uploaded (sorted into cells where
/// it asks); `None` (logged) where they cannot be made.
fn upload_new(
    device: &wgpu::Device,
    queue: &RenderQueue,
    culler: &RenderCuller,
    data: &mut BatchData,
) -> Option<GpuBatch> {
    let format = culler.culler().format();
    let count = data.instances.len() as u32;
    let capacity = match data.gpu_writes {
        Some(writes) => gpu_capacity(count, writes),
        None => batch_capacity(data.instances.len()),
    };
    let input = CullInput::new(device, format, capacity)
        .map_err(|e| error!("GPU culling: {e}"))
        .ok()?;
    let records = |label| {
        device.create_buffer(&wgpu::BufferDescriptor {
            label: Some(label),
            size: capacity as u64 * size_of::<GpuCullInstance>() as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST | wgpu::BufferUsages::COPY_SRC,
            mapped_at_creation: false,
        })
    };
    let draw_data = records("gpu_cull_draw_data");
    let cells = if data.culls_by_cells() {
        let cells = BatchCells::upload(device, queue, culler.culler(), capacity, data, &input, &draw_data);
        Some(cells.map_err(|e| error!("GPU culling: {e}")).ok()?)
    } else {
        let encoded: Vec<Instance> = data.instances.iter().map(|i| i.cull_instance(format)).collect();
        input
            .write_instances(queue, 0, &encoded)
            .map_err(|e| error!("GPU culling: {e}"))
            .ok()?;
        queue.write_buffer(
            &draw_data,
            0,
            bytemuck::cast_slice(&draw_records(&data.instances)),
        );
        if data.gpu_writes.is_some() {
            // Past the count: culled, until the GPU writes them.
            let culled = Instance {
                position: Vec3::NAN,
                ..Instance::default()
            };
            let tail = vec![culled; (capacity - count) as usize];
            input
                .write_instances(queue, count, &tail)
                .map_err(|e| error!("GPU culling: {e}"))
                .ok()?;
        }
        None
    };
    // Last frame's records start as this frame's: no motion of their own.
    let previous = data.motion.then(|| {
        let previous = records("gpu_cull_previous_draw_data");
        let mut encoder = device.create_command_encoder(&Default::default());
        encoder.copy_buffer_to_buffer(&draw_data, 0, &previous, 0, draw_data.size());
        queue.submit([encoder.finish()]);
        previous
    });
    let gpu_writes = data
        .gpu_writes
        .map(|writes| gpu_writes_header(device, queue, format, count, capacity, writes));
    data.upload_all = false;
    data.uploads.clear();
    Some(GpuBatch {
        input,
        draw_data,
        count,
        capacity,
        culler_generation: culler.generation,
        buffers_id: next_id(),
        cells,
        gpu_writes,
        previous,
    })
}

/// The capacity of a batch written on the GPU: what it asks for, at least
/// its list's length and 1.
fn gpu_capacity(count: u32, writes: GpuCullComputeWrites) -> u32 {
    writes.capacity.max(count).max(1)
}

/// The header of a batch written on the GPU, its count its list's length.
fn gpu_writes_header(
    device: &wgpu::Device,
    queue: &wgpu::Queue,
    format: InstanceFormat,
    count: u32,
    capacity: u32,
    writes: GpuCullComputeWrites,
) -> wgpu::Buffer {
    let header = GpuWritesHeader {
        count,
        capacity,
        format: format.encode_id(),
        parts: (format.stride() / 16) as u32,
        min_scale: writes.scales[0],
        max_scale: writes.scales[1],
        _padding: [0; 2],
    };
    let buffer = device.create_buffer(&wgpu::BufferDescriptor {
        label: Some("gpu_cull_gpu_writes_header"),
        size: size_of::<GpuWritesHeader>() as u64,
        usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
        mapped_at_creation: false,
    });
    queue.write_buffer(&buffer, 0, bytemuck::bytes_of(&header));
    buffer
}
