//! Back-to-front order of a view's survivors, for blended draws: a GPU
//! radix sort of the list a cull wrote (`shaders/cull/sort.wgsl`; CPU
//! mirror [`crate::cpu::back_to_front`]).

use crate::buffers::CullTarget;
use crate::kernel::{ShaderModule, shader_module};
use crate::list_stage::{ListStage, StageBinding, layout_entries};
use crate::{CullError, CullInput, Culler, InstanceFormat, OutputKind};
use glam::{Vec3, Vec4};
use wgpu::util::DeviceExt;

/// The sort's module (an entry module: it imports `cull::encode` and
/// `cull::math` from [`crate::shader::library`]).
pub(crate) const SORT_MODULE: ShaderModule = shader_module!("sort.wgsl");

/// Elements per workgroup of the per-element passes, per tile of the
/// counting and scattering ones, and digit bins per pass (as `sort.wgsl`).
const TILE: u32 = 256;
const TILE_LEN: u32 = TILE * 16;
const BINS: u32 = 16;
const DIGIT_BITS: u32 = 4;
/// Passes over the key's 32 bits.
const KEY_DIGITS: u32 = 32 / DIGIT_BITS;
/// Bytes between the uniform entries bound at dynamic offsets.
const ENTRY_STRIDE: u64 = 256;
/// Bytes of `SortJob` (and at most of `SortPass`), bound at each entry.
const UNIFORM_BYTES: u64 = 64;
/// The entry points, in [`DepthSorter::pipelines`]' order.
pub(crate) const ENTRY_POINTS: [&str; 5] = [
    "make_keys",
    "count_digits",
    "scan_counts",
    "scatter",
    "store_list",
];

/// What a view's survivors are ordered by: the view-space depth of each
/// instance's transformed `local_center`, as Bevy's `ViewRangefinder3d`
/// measures it (row 2 of the view's `view_from_world` matrix dotted with
/// the point), ascending, so the farthest comes first in a view looking
/// down −Z; ties in instance order.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DepthSortView {
    /// Row 2 of the view's `view_from_world` matrix.
    pub view_from_world_row_2: Vec4,
    /// The mesh-space point each instance is sorted by (Bevy sorts a mesh by
    /// its transformed bounding-box center).
    pub local_center: Vec3,
}

impl DepthSortView {
    /// The depth of world point `p`.
    pub fn depth(&self, p: Vec3) -> f32 {
        let r = self.view_from_world_row_2;
        r.x * p.x + r.y * p.y + r.z * p.z + r.w
    }
}

/// Bits of `depth` that order as the floats do (negative ones reversed),
/// for every value but NaN: the sort's key.
pub fn depth_sort_key(depth: f32) -> u32 {
    let bits = depth.to_bits();
    bits ^ if bits >> 31 == 1 { u32::MAX } else { 0x8000_0000 }
}

/// Tuning of a [`DepthSorter`], for tests of its dispatch shapes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DepthSortDesc {
    /// Caps workgroups along one dimension below the device's limit
    /// (dispatches of more tiles use a second dimension).
    pub max_workgroups_per_dimension: Option<u32>,
}

/// Sorts a view's survivors back to front on the GPU, in place, for a
/// blended draw: a stable radix sort of (depth key, instance index) pairs
/// over the list a cull of index output ([`OutputKind::Indices`]) wrote,
/// whatever its length (read on the GPU from the draw arguments). Sorting
/// the index first makes ties come out in instance order for every scan
/// variant, including those that write survivors out of order.
///
/// Cost: per sort, `⌈log2 capacity⌉/4 + 8` passes of three dispatches,
/// each over the capacity's tiles of 4096, reading and writing 8 bytes per
/// survivor and passing the digit counts through one workgroup.
///
/// ```no_run
/// use cull_core::prelude::*;
/// use cull_core::{DepthSortDesc, DepthSortView, DepthSorter};
/// # fn f(gpu: &GpuContext, input: &CullInput, camera: &Frustum, view_from_world: glam::Mat4) -> Result<(), CullError> {
/// let desc = CullerDesc { output: OutputKind::Indices, ..CullerDesc::default() };
/// let culler = Culler::new(&gpu.device, &gpu.queue, &desc)?;
/// let sorter = DepthSorter::new(&gpu.device, &culler, DepthSortDesc::default())?;
/// let target = CullTarget::new(&gpu.device, &culler, input.capacity())?;
/// let scratch = sorter.scratch(&gpu.device, &target)?;
/// let mut encoder = gpu.device.create_command_encoder(&Default::default());
/// let bounds = Sphere::new(glam::Vec3::ZERO, 0.5);
/// let views = std::slice::from_ref(camera);
/// let request = CullRequest::new(input, &target, views, bounds, input.capacity());
/// culler.cull(&mut encoder, &gpu.queue, request)?;
/// // The view's survivors, farthest first, for a blended draw.
/// let order = DepthSortView {
///     view_from_world_row_2: view_from_world.row(2),
///     local_center: glam::Vec3::ZERO,
/// };
/// sorter.sort(&mut encoder, &gpu.queue, (input, &target), &scratch, 0, &order)?;
/// gpu.queue.submit([encoder.finish()]);
/// # Ok(()) }
/// ```
pub struct DepthSorter {
    stage: ListStage,
    culler_id: u64,
    format: InstanceFormat,
    /// The passes' digits: entries 0..8 take the index's, 8..16 the key's.
    pass_params: wgpu::Buffer,
}

/// A [`DepthSorter`]'s scratch for one target: key and index pairs twice
/// over, the digit counts and a job entry per view. Sorts of a target's
/// views may follow each other in one encoder.
pub struct DepthSortScratch {
    capacity: u32,
    views: u32,
    pairs: [wgpu::Buffer; 2],
    counts: wgpu::Buffer,
    jobs: wgpu::Buffer,
    /// Which of `pairs` the last sort left its sorted pairs in.
    result: std::sync::atomic::AtomicUsize,
}

impl DepthSorter {
    /// A sorter of the lists `culler`'s culls write (which must be of
    /// [`OutputKind::Indices`]), compiling its pipelines.
    pub fn new(device: &wgpu::Device, culler: &Culler, desc: DepthSortDesc) -> Result<Self, CullError> {
        if culler.output() != OutputKind::Indices {
            return Err(CullError::InvalidParameter(
                "a depth sort reorders survivor indices: it needs a culler of OutputKind::Indices",
            ));
        }
        let stage = ListStage::new(
            device,
            (SORT_MODULE, &ENTRY_POINTS),
            &layout_entries(&BINDINGS),
            desc.max_workgroups_per_dimension,
        );
        let mut params = vec![0u8; (2 * KEY_DIGITS) as usize * ENTRY_STRIDE as usize];
        for entry in 0..2 * KEY_DIGITS {
            let words = [
                (entry % KEY_DIGITS) * DIGIT_BITS,
                u32::from(entry < KEY_DIGITS),
                0,
                0,
            ];
            let at = entry as usize * ENTRY_STRIDE as usize;
            params[at..at + 16].copy_from_slice(bytemuck::cast_slice(&words));
        }
        let pass_params = device.create_buffer_init(&wgpu::util::BufferInitDescriptor {
            label: Some("cull-sort-passes"),
            contents: &params,
            usage: wgpu::BufferUsages::UNIFORM,
        });
        Ok(Self {
            stage,
            culler_id: culler.id(),
            format: culler.format(),
            pass_params,
        })
    }

    /// Whether it sorts the lists of `culler`'s targets (a sorter is made
    /// for one culler).
    pub fn sorts_for(&self, culler: &Culler) -> bool {
        culler.id() == self.culler_id
    }

    /// Scratch for sorting `target`'s views. Refused where the sort's
    /// (key, index) pairs, 8 bytes a survivor, would not fit one storage
    /// binding of `device` (twice the bytes of the target's index lists).
    pub fn scratch(&self, device: &wgpu::Device, target: &CullTarget) -> Result<DepthSortScratch, CullError> {
        let capacity = target.capacity();
        let limits = device.limits();
        let pairs_bytes = capacity as u64 * 8;
        if pairs_bytes > limits.max_storage_buffer_binding_size || pairs_bytes > limits.max_buffer_size {
            return Err(CullError::InvalidParameter(
                "a depth sort's pairs (8 bytes a survivor of the target's capacity) must fit one storage binding",
            ));
        }
        let buffer = |label, size| {
            device.create_buffer(&wgpu::BufferDescriptor {
                label: Some(label),
                size,
                usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            })
        };
        Ok(DepthSortScratch {
            capacity,
            views: target.views(),
            pairs: [
                buffer("cull-sort-pairs-a", pairs_bytes),
                buffer("cull-sort-pairs-b", pairs_bytes),
            ],
            counts: buffer("cull-sort-counts", tiles(capacity) as u64 * BINS as u64 * 4),
            jobs: device.create_buffer(&wgpu::BufferDescriptor {
                label: Some("cull-sort-jobs"),
                size: target.views() as u64 * ENTRY_STRIDE,
                usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                mapped_at_creation: false,
            }),
            result: Default::default(),
        })
    }

    /// Records the sort of `view`'s survivors in `target` (culled from
    /// `input`) by `order`, in a compute pass of its own, after the cull
    /// that wrote them in `encoder`.
    pub fn sort(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        queue: &wgpu::Queue,
        lists: (&CullInput, &CullTarget),
        scratch: &DepthSortScratch,
        view: u32,
        order: &DepthSortView,
    ) -> Result<(), CullError> {
        let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some("cull-sort"),
            timestamp_writes: None,
        });
        self.sort_in_pass(&mut pass, queue, lists, scratch, view, order)
    }

    /// [`Self::sort`] recorded into `pass` (several sorts in one pass, or a
    /// pass with timestamps).
    pub fn sort_in_pass(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        queue: &wgpu::Queue,
        (input, target): (&CullInput, &CullTarget),
        scratch: &DepthSortScratch,
        view: u32,
        order: &DepthSortView,
    ) -> Result<(), CullError> {
        self.check(input, target, scratch, view)?;
        let elements = self.stage.dims(target.capacity().div_ceil(TILE))?;
        let tiles = self.stage.dims(tiles(target.capacity()))?;
        let words = job_words(self.format, order, view, [elements.0, tiles.0]);
        queue.write_buffer(
            &scratch.jobs,
            view as u64 * ENTRY_STRIDE,
            bytemuck::cast_slice(&words),
        );
        let groups = [false, true].map(|flip| self.bind_group(input, target, scratch, view, flip));
        let index_digits = index_digits(target.capacity());
        let passes = index_digits + KEY_DIGITS;
        let job_offset = (view as u64 * ENTRY_STRIDE) as u32;
        // The keys go into pairs A (the flipped group writes A).
        self.dispatch(pass, 0, &groups[1], [job_offset, 0], elements);
        for k in 0..passes {
            let entry = if k < index_digits {
                k
            } else {
                KEY_DIGITS + k - index_digits
            };
            let offsets = [job_offset, (entry as u64 * ENTRY_STRIDE) as u32];
            let group = &groups[(k % 2) as usize];
            self.dispatch(pass, 1, group, offsets, tiles);
            self.dispatch(pass, 2, group, offsets, (1, 1));
            self.dispatch(pass, 3, group, offsets, tiles);
        }
        let last = (passes % 2) as usize;
        self.dispatch(pass, 4, &groups[last], [job_offset, 0], elements);
        scratch.result.store(last, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    fn check(
        &self,
        input: &CullInput,
        target: &CullTarget,
        scratch: &DepthSortScratch,
        view: u32,
    ) -> Result<(), CullError> {
        if target.culler_id() != self.culler_id {
            return Err(CullError::ForeignTarget);
        }
        self.stage.check(input, target, view)?;
        if !scratch.fits(target) {
            return Err(CullError::InvalidParameter(
                "the depth sort's scratch was made for another target",
            ));
        }
        Ok(())
    }

    fn dispatch(
        &self,
        pass: &mut wgpu::ComputePass<'_>,
        pipeline: usize,
        group: &wgpu::BindGroup,
        offsets: [u32; 2],
        (x, y): (u32, u32),
    ) {
        pass.set_pipeline(&self.stage.pipelines[pipeline]);
        pass.set_bind_group(0, group, &offsets);
        pass.dispatch_workgroups(x, y, 1);
    }

    /// The bindings of a sort of `view`: reading pairs A and writing B, or
    /// (`flipped`) the other way round.
    fn bind_group(
        &self,
        input: &CullInput,
        target: &CullTarget,
        scratch: &DepthSortScratch,
        view: u32,
        flipped: bool,
    ) -> wgpu::BindGroup {
        let (read, write) = if flipped { (1, 0) } else { (0, 1) };
        fn whole(binding: u32, buffer: &wgpu::Buffer) -> wgpu::BindGroupEntry<'_> {
            wgpu::BindGroupEntry {
                binding,
                resource: buffer.as_entire_binding(),
            }
        }
        let uniform = |binding, buffer| wgpu::BindGroupEntry {
            binding,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer,
                offset: 0,
                size: wgpu::BufferSize::new(UNIFORM_BYTES),
            }),
        };
        let list = wgpu::BindGroupEntry {
            binding: 3,
            resource: wgpu::BindingResource::Buffer(wgpu::BufferBinding {
                buffer: target.output_buffer(),
                offset: target.view_output_offset(view),
                size: wgpu::BufferSize::new(target.capacity() as u64 * 4),
            }),
        };
        let entries = [
            uniform(0, &scratch.jobs),
            uniform(1, &self.pass_params),
            whole(2, input.buffer()),
            list,
            whole(4, target.draw_args()),
            whole(5, &scratch.pairs[read]),
            whole(6, &scratch.pairs[write]),
            whole(7, &scratch.counts),
        ];
        self.stage.device.create_bind_group(&wgpu::BindGroupDescriptor {
            label: Some("cull-sort"),
            layout: &self.stage.layout,
            entries: &entries,
        })
    }
}

impl DepthSortScratch {
    /// The keys the last sort left, in sorted order (the first `count`):
    /// for tests, which check the order against [`depth_sort_key`].
    pub fn read_sorted_keys(
        &self,
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        count: u32,
    ) -> Result<Vec<u32>, CullError> {
        let result = self.result.load(std::sync::atomic::Ordering::Relaxed);
        let bytes = crate::read_back(device, queue, &self.pairs[result], 0, count as u64 * 8)?;
        let pairs: Vec<[u32; 2]> = bytemuck::pod_collect_to_vec(&bytes);
        Ok(pairs.into_iter().map(|[key, _]| key).collect())
    }

    /// Whether it was made for a target of `target`'s capacity and views.
    pub fn fits(&self, target: &CullTarget) -> bool {
        self.capacity == target.capacity() && self.views == target.views()
    }

    /// Bytes of GPU memory it holds.
    pub fn buffer_bytes(&self) -> u64 {
        self.pairs.iter().map(wgpu::Buffer::size).sum::<u64>() + self.counts.size() + self.jobs.size()
    }
}

/// Tiles of a list of up to `capacity` elements.
fn tiles(capacity: u32) -> u32 {
    capacity.div_ceil(TILE_LEN).max(1)
}

/// Digit passes over an instance index below `capacity`.
fn index_digits(capacity: u32) -> u32 {
    let bits = u32::BITS - capacity.saturating_sub(1).leading_zeros();
    bits.div_ceil(DIGIT_BITS)
}

/// `SortJob`'s words (`sort.wgsl`).
fn job_words(format: InstanceFormat, order: &DepthSortView, view: u32, groups_x: [u32; 2]) -> [u32; 16] {
    let r = order.view_from_world_row_2;
    let c = order.local_center;
    let count_word = crate::list_stage::count_word(view);
    let f = f32::to_bits;
    [
        f(r.x),
        f(r.y),
        f(r.z),
        f(r.w),
        f(c.x),
        f(c.y),
        f(c.z),
        0,
        count_word,
        (format.stride() / 16) as u32,
        format.encode_id(),
        groups_x[0],
        groups_x[1],
        0,
        0,
        0,
    ]
}

/// The bindings of `sort.wgsl`.
const BINDINGS: [StageBinding; 8] = [
    StageBinding::Uniform(UNIFORM_BYTES),
    StageBinding::Uniform(UNIFORM_BYTES),
    StageBinding::Storage { read_only: true },
    StageBinding::Storage { read_only: false },
    StageBinding::Storage { read_only: true },
    StageBinding::Storage { read_only: true },
    StageBinding::Storage { read_only: false },
    StageBinding::Storage { read_only: false },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn index_digits_cover_the_capacity() {
        assert_eq!(index_digits(1), 0);
        assert_eq!(index_digits(16), 1);
        assert_eq!(index_digits(17), 2);
        assert_eq!(index_digits(1 << 20), 5);
        assert_eq!(index_digits(u32::MAX), 8);
    }
}
