//! The [`Culler`]: compiled pipelines for one variant, format and output kind,
//! and the encoding of a cull into a command encoder.

use crate::buffers::{CullInput, CullTarget};
use crate::frustum::{Frustum, Sphere};
use crate::passes::Pipelines;
use crate::timing::PassKind;
use crate::{CullError, InstanceFormat, ScanVariant};
use bytemuck::{Pod, Zeroable};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Most output bindings one batch may span (see `emit()` in the shaders):
/// a batch can hold up to this many times the device's largest storage binding.
pub const MAX_OUTPUT_WINDOWS: u32 = 4;
/// Instances in each of a thread's row groups in the single-pass variants
/// (`ITEMS` in the shaders; see [`crate::shader::row_groups`]).
pub(crate) const ITEMS_PER_THREAD: u32 = 4;
/// Status words carry 30-bit counts (`shaders/ordered.wgsl`), so no chunk may
/// hold more instances than this.
const MAX_CHUNK_LEN: u32 = (1 << 30) - 1;
/// Dynamic uniform offsets must be multiples of this on every device.
pub(crate) const PARAMS_STRIDE: u64 = 256;

/// What the compaction writes for each survivor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum OutputKind {
    /// A copy of the instance, in the input's format: the draw reads it as
    /// per-instance data directly.
    #[default]
    Instances,
    /// The survivor's index in the batch (`u32`): 4 bytes written per survivor,
    /// the draw fetches the instance through it.
    Indices,
}

impl OutputKind {
    /// Bytes per output element.
    pub const fn stride(self, format: InstanceFormat) -> u64 {
        match self {
            Self::Instances => format.stride(),
            Self::Indices => 4,
        }
    }
}

/// Knobs that bound how a batch is split into chunks and tiles. `None`
/// takes the device's limit or the default. Smaller values exercise the
/// multi-binding, two-dimensional-dispatch and look-back paths at small
/// sizes (the tests do this); programs rarely need them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Tuning {
    /// Largest storage binding, in bytes.
    pub max_binding_size: Option<u64>,
    /// Largest dispatch along one dimension, in workgroups.
    pub max_workgroups_per_dimension: Option<u32>,
    /// Threads per workgroup: a power of two from 32 to 256 (the default),
    /// and at least the subgroup size for the subgroup variants. A tile is
    /// four times as many instances.
    pub workgroup_size: Option<u32>,
    /// [`ScanVariant::Ordered`]: how many times a tile polls a predecessor
    /// that has published nothing before counting that tile's survivors
    /// itself (default 256; 0 always counts, which tests the fallback).
    pub lookback_spin_limit: Option<u32>,
    /// [`ScanVariant::Ordered`], for testing the fallback: tiles whose ID has
    /// any of these bits set publish nothing, so their successors must
    /// count their survivors themselves. 0 (the default) for real use.
    pub lookback_silent_tiles: u32,
    /// [`ScanVariant::Ordered`]: scan tiles in workgroup memory even where
    /// the device has subgroups (the form used without
    /// [`wgpu::Features::SUBGROUP`]), for tests and comparisons. Off by
    /// default: the subgroup form is faster.
    pub workgroup_scan: bool,
}

/// Default threads per workgroup.
pub const DEFAULT_WORKGROUP_SIZE: u32 = 256;
/// Default polls of a silent predecessor before the ordered variant's fallback.
pub const DEFAULT_LOOKBACK_SPIN_LIMIT: u32 = 256;

/// How to build a [`Culler`].
#[derive(Clone, Debug)]
pub struct CullerDesc {
    /// The scan variant; `None` picks the best one the device runs.
    pub variant: Option<ScanVariant>,
    /// Replace an unavailable variant by the best available (logged) instead
    /// of failing.
    pub allow_fallback: bool,
    /// Layout of the instances.
    pub format: InstanceFormat,
    /// What the compaction writes.
    pub output: OutputKind,
    /// Record GPU timestamps per pass when the device has `TIMESTAMP_QUERY`.
    pub timestamps: bool,
    /// Chunk and tile sizes.
    pub tuning: Tuning,
}

impl Default for CullerDesc {
    fn default() -> Self {
        Self {
            variant: None,
            allow_fallback: true,
            format: InstanceFormat::default(),
            output: OutputKind::default(),
            timestamps: true,
            tuning: Tuning::default(),
        }
    }
}

/// What one cull needs beyond the buffers.
#[derive(Clone, Copy, Debug)]
pub struct CullParams {
    /// The view frustum.
    pub frustum: Frustum,
    /// The mesh's bounding sphere in its local space.
    pub local_bounds: Sphere,
    /// Instances to cull, from the start of the input.
    pub count: u32,
}

/// The uniform block of `shaders/common.wgsl`.
#[repr(C)]
#[derive(Clone, Copy, Pod, Zeroable)]
pub(crate) struct GpuParams {
    pub planes: [[f32; 4]; 6],
    pub local_sphere: [f32; 4],
    pub plane_count: u32,
    pub chunk_start: u32,
    pub chunk_len: u32,
    pub groups_x: u32,
    pub window_len: u32,
    pub scan_offset: u32,
    pub local_terms: f32,
    pub _pad: u32,
}

/// One chunk of a batch: the instances one set of bindings covers.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Chunk {
    pub index: u32,
    pub start: u32,
    pub len: u32,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Culls batches of instances with one scan variant, instance format and
/// output kind. Create once (it compiles pipelines); cull every frame.
pub struct Culler {
    id: u64,
    device: wgpu::Device,
    variant: ScanVariant,
    format: InstanceFormat,
    output: OutputKind,
    window_len: u32,
    max_groups: u32,
    workgroup_size: u32,
    spin_limit: u32,
    silent_tiles: u32,
    subgroups: bool,
    /// Instances per workgroup of the single-pass variants.
    tile_len: u32,
    timestamps: bool,
    timestamp_period: f32,
    /// Pipelines by number of output windows, compiled when a target first needs them.
    pipelines: Mutex<Vec<Option<Arc<Pipelines>>>>,
}

impl Culler {
    /// Resolves the variant against the device and compiles the pipelines
    /// for single-binding batches.
    pub fn new(device: &wgpu::Device, queue: &wgpu::Queue, desc: &CullerDesc) -> Result<Self, CullError> {
        let variant = ScanVariant::resolve(desc.variant, device.features(), desc.allow_fallback)?;
        let limits = device.limits();
        let workgroup_size = desc.tuning.workgroup_size.unwrap_or(DEFAULT_WORKGROUP_SIZE);
        if !(workgroup_size.is_power_of_two() && (32..=256).contains(&workgroup_size)) {
            return Err(CullError::InvalidParameter(
                "workgroup_size must be a power of two from 32 to 256",
            ));
        }
        let subgroups = device.features().contains(wgpu::Features::SUBGROUP) && !desc.tuning.workgroup_scan;
        let tile =
            workgroup_size * ITEMS_PER_THREAD * crate::shader::row_groups(variant, desc.format, subgroups);
        let binding = desc
            .tuning
            .max_binding_size
            .unwrap_or(u64::MAX)
            .min(limits.max_storage_buffer_binding_size);
        let widest = desc.format.stride().max(desc.output.stride(desc.format));
        let window_len = (binding / widest).min(MAX_CHUNK_LEN as u64) as u32 / tile * tile;
        if window_len == 0 {
            return Err(CullError::InvalidParameter(
                "max_binding_size holds less than one workgroup tile",
            ));
        }
        let max_groups = desc
            .tuning
            .max_workgroups_per_dimension
            .unwrap_or(u32::MAX)
            .min(limits.max_compute_workgroups_per_dimension)
            .max(1);
        let timestamps = desc.timestamps && device.features().contains(wgpu::Features::TIMESTAMP_QUERY);
        let culler = Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            device: device.clone(),
            variant,
            format: desc.format,
            output: desc.output,
            window_len,
            max_groups,
            workgroup_size,
            spin_limit: desc
                .tuning
                .lookback_spin_limit
                .unwrap_or(DEFAULT_LOOKBACK_SPIN_LIMIT),
            silent_tiles: desc.tuning.lookback_silent_tiles,
            subgroups,
            tile_len: tile,
            timestamps,
            timestamp_period: queue.get_timestamp_period(),
            pipelines: Mutex::new(vec![None; MAX_OUTPUT_WINDOWS as usize]),
        };
        culler.pipelines_for(1)?;
        Ok(culler)
    }

    /// The variant in use (after any fallback).
    pub fn variant(&self) -> ScanVariant {
        self.variant
    }

    /// The instance format.
    pub fn format(&self) -> InstanceFormat {
        self.format
    }

    /// The output kind.
    pub fn output(&self) -> OutputKind {
        self.output
    }

    /// Whether the passes use subgroup operations: the subgroup variants
    /// always; [`ScanVariant::Ordered`] where the device has subgroups
    /// (unless [`Tuning::workgroup_scan`]), else it scans in workgroup memory.
    pub fn uses_subgroups(&self) -> bool {
        match self.variant {
            ScanVariant::Ordered => self.subgroups,
            v => v.required_features().contains(wgpu::Features::SUBGROUP),
        }
    }

    /// Instances per chunk: a batch larger than this is culled chunk by chunk.
    pub fn chunk_len(&self) -> u32 {
        self.window_len
    }

    /// Whether targets of this culler record timestamps.
    pub fn records_timestamps(&self) -> bool {
        self.timestamps
    }

    /// Threads per workgroup.
    pub fn workgroup_size(&self) -> u32 {
        self.workgroup_size
    }

    /// Instances per workgroup of the single-pass variants.
    pub fn tile_len(&self) -> u32 {
        self.tile_len
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    pub(crate) fn device(&self) -> &wgpu::Device {
        &self.device
    }

    pub(crate) fn timestamp_period(&self) -> f32 {
        self.timestamp_period
    }

    /// Output windows (bindings) a batch of `capacity` instances needs.
    pub(crate) fn windows_for(&self, capacity: u32) -> Result<u32, CullError> {
        let windows = capacity.div_ceil(self.window_len).max(1);
        if windows > MAX_OUTPUT_WINDOWS {
            return Err(CullError::BatchTooLarge {
                capacity: capacity as u64,
                windows: windows as u64,
                window_len: self.window_len as u64,
                max: MAX_OUTPUT_WINDOWS as u64,
            });
        }
        Ok(windows)
    }

    fn shape(&self, windows: u32) -> crate::shader::ModuleShape {
        crate::shader::ModuleShape {
            variant: self.variant,
            format: self.format,
            output: self.output,
            windows,
            workgroup_size: self.workgroup_size,
            spin_limit: self.spin_limit,
            silent_tiles: self.silent_tiles,
            subgroups: self.subgroups,
        }
    }

    /// The WGSL of this culler's passes for a batch that fits one binding,
    /// exactly as compiled (for inspection: disassembly, register counts).
    pub fn shader_source(&self) -> String {
        crate::shader::compose(self.shape(1)).expect("a culler's variant is compiled in")
    }

    pub(crate) fn pipelines_for(&self, windows: u32) -> Result<Arc<Pipelines>, CullError> {
        let mut cache = self.pipelines.lock().expect("pipeline cache poisoned");
        let slot = &mut cache[windows as usize - 1];
        if let Some(p) = slot {
            return Ok(p.clone());
        }
        let p = Arc::new(Pipelines::new(&self.device, self.shape(windows))?);
        *slot = Some(p.clone());
        Ok(p)
    }

    /// Scan steps of the Hillis-Steele baseline for a chunk of `len`.
    pub(crate) fn scan_steps(len: u32) -> u32 {
        len.max(1).next_power_of_two().trailing_zeros()
    }

    /// Uniform entries one chunk uses: one for its passes, plus one per scan step.
    pub(crate) fn params_per_chunk(&self) -> u32 {
        match self.variant {
            ScanVariant::HillisSteele => 1 + Self::scan_steps(self.window_len),
            _ => 1,
        }
    }

    /// Compute passes a cull of `windows` chunks records (for timestamp slots).
    pub(crate) fn passes_per_chunk(&self) -> u32 {
        match self.variant {
            ScanVariant::HillisSteele => 3,
            _ => 1,
        }
    }

    /// Workgroup counts for `groups` workgroups: `(x, y)` with `x <= max`.
    pub(crate) fn dispatch_dims(&self, groups: u32) -> (u32, u32) {
        if groups <= self.max_groups {
            (groups.max(1), 1)
        } else {
            (self.max_groups, groups.div_ceil(self.max_groups))
        }
    }

    /// Records the cull of `params.count` instances of `input` into `target`:
    /// survivors written densely to the target's output, their number to the
    /// instance count of its draw arguments. Writes the per-view uniforms
    /// through `queue` (applied at the next submit), so each target should be
    /// culled once per submission.
    pub fn cull(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        queue: &wgpu::Queue,
        input: &CullInput,
        target: &CullTarget,
        params: &CullParams,
    ) -> Result<(), CullError> {
        if target.culler_id() != self.id {
            return Err(CullError::ForeignTarget);
        }
        params.local_bounds.validate()?;
        if input.format() != self.format {
            return Err(CullError::FormatMismatch {
                input: input.format(),
                culler: self.format,
            });
        }
        let count = params.count;
        for capacity in [input.capacity(), target.capacity()] {
            if count > capacity {
                return Err(CullError::CountExceedsCapacity {
                    count: count as u64,
                    capacity: capacity as u64,
                });
            }
        }
        let chunks: Vec<Chunk> = (0..count.div_ceil(self.window_len))
            .map(|index| {
                let start = index * self.window_len;
                Chunk {
                    index,
                    start,
                    len: (count - start).min(self.window_len),
                }
            })
            .collect();

        // Uniforms: per chunk, its entry then (Hillis-Steele) one per scan step.
        let per_chunk = self.params_per_chunk();
        let mut base = GpuParams::zeroed();
        // Unused planes keep everything: the shader tests all six.
        base.planes = [[0.0, 0.0, 0.0, 1.0]; 6];
        for (dst, p) in base.planes.iter_mut().zip(params.frustum.planes()) {
            *dst = crate::frustum::widen_plane(*p).to_array();
        }
        base.plane_count = params.frustum.len as u32;
        base.local_sphere = params
            .local_bounds
            .center
            .extend(params.local_bounds.radius)
            .to_array();
        base.local_terms = crate::instance::local_terms(params.local_bounds.center);
        base.window_len = self.window_len;
        let mut uniforms = vec![0u8; (chunks.len() as u32 * per_chunk) as usize * PARAMS_STRIDE as usize];
        for chunk in &chunks {
            let groups = self.groups_for(chunk.len);
            for step in 0..per_chunk {
                let entry = GpuParams {
                    chunk_start: chunk.start,
                    chunk_len: chunk.len,
                    groups_x: self.dispatch_dims(groups).0,
                    scan_offset: if step == 0 { 0 } else { 1 << (step - 1) },
                    ..base
                };
                let at = ((chunk.index * per_chunk + step) as u64 * PARAMS_STRIDE) as usize;
                uniforms[at..at + size_of::<GpuParams>()].copy_from_slice(bytemuck::bytes_of(&entry));
            }
        }
        if !uniforms.is_empty() {
            queue.write_buffer(target.params_buffer(), 0, &uniforms);
        }

        // The atomic counter is the draw's instance count: zero it.
        encoder.clear_buffer(target.draw_args(), crate::buffers::INSTANCE_COUNT_OFFSET, Some(4));
        let mut recorder = target.timing_recorder();
        target
            .pipelines()
            .encode(self, encoder, input, target, &chunks, &mut recorder);
        if let Some(recorder) = recorder {
            recorder.finish(encoder);
        }
        Ok(())
    }

    /// Workgroups a chunk of `len` instances needs.
    pub(crate) fn groups_for(&self, len: u32) -> u32 {
        let per_group = match self.variant {
            ScanVariant::HillisSteele => self.workgroup_size,
            _ => self.tile_len(),
        };
        len.div_ceil(per_group)
    }

    /// A pass descriptor, with timestamp writes when recording.
    pub(crate) fn begin_pass<'e>(
        encoder: &'e mut wgpu::CommandEncoder,
        kind: PassKind,
        recorder: &mut Option<crate::timing::Recorder<'_>>,
    ) -> wgpu::ComputePass<'e> {
        let timestamp_writes = recorder.as_mut().and_then(|r| r.next(kind));
        encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
            label: Some(kind.label()),
            timestamp_writes,
        })
    }
}
