//! A [`Culler`] resolved against the device: variant, chunk and tile sizes,
//! dispatch shape, and what it reports of them.

use super::desc::{CullerDesc, DEFAULT_LOOKBACK_SPIN_LIMIT, DEFAULT_WORKGROUP_SIZE};
use super::spec::{Kernel, KernelSpec};
use crate::kernel::{DispatchShape, ITEMS_PER_THREAD, LOOKBACK_COUNT_BITS, MAX_OUTPUT_WINDOWS, MAX_VIEWS};
use crate::outputs::OutputKind;
use crate::variants::{KernelTuning, ScanKernel};
use crate::visibility::VisibilityTest;
use crate::{CullError, InstanceFormat, ScanVariant};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Status words carry counts of `LOOKBACK_COUNT_BITS`
/// (`shaders/cull/variants/ordered_chain.wgsl`), so no chunk may hold more
/// instances than this.
const MAX_CHUNK_LEN: u32 = (1 << LOOKBACK_COUNT_BITS) - 1;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Culls batches of instances with one scan variant, instance format and
/// output kind. Create once (it compiles pipelines); cull every frame with
/// [`Culler::cull`] (a whole frame: the [crate](crate) example).
///
/// ```no_run
/// use cull_core::{Culler, CullerDesc, InstanceFormat, OutputKind, ScanVariant};
/// # fn f(device: &wgpu::Device, queue: &wgpu::Queue) -> Result<(), cull_core::CullError> {
/// // The survivors' indices, in input order, of 16-byte instances.
/// let culler = Culler::new(
///     device,
///     queue,
///     &CullerDesc {
///         variant: Some(ScanVariant::OrderedTwoPass),
///         format: InstanceFormat::Packed16,
///         output: OutputKind::Indices,
///         ..Default::default()
///     },
/// )?;
/// # Ok(()) }
/// ```
pub struct Culler {
    pub(super) id: u64,
    pub(super) device: wgpu::Device,
    pub(super) variant: ScanVariant,
    pub(super) kernel: &'static dyn ScanKernel,
    pub(super) format: InstanceFormat,
    pub(super) output: OutputKind,
    pub(super) window_len: u32,
    pub(super) dispatch: DispatchShape,
    pub(super) workgroup_size: u32,
    pub(super) tuning: KernelTuning,
    /// [`super::Tuning::plain_views`], as given.
    pub(super) plain_views: Option<bool>,
    pub(super) subgroups: bool,
    /// Instances per workgroup of the single-pass variants.
    pub(super) tile_len: u32,
    pub(super) timestamps: bool,
    pub(super) timestamp_period: f32,
    pub(super) max_views: u32,
    /// Compile kernels here when first needed (`false`: they are handed in).
    pub(super) compiles: bool,
    /// Kernels by form (general or for plain views, general or for centred
    /// meshes), visibility test, by cells or not, views and output windows
    /// (`kernel_index`).
    pub(super) kernels: Mutex<Vec<Option<Kernel>>>,
    /// Where [`Self::cull_all`]'s shared culls take their uniforms.
    pub(super) shared_uniforms: super::shared::SharedUniforms,
}

impl Culler {
    /// Resolves the variant against the device and compiles the pipelines
    /// for single-binding batches.
    pub fn new(device: &wgpu::Device, queue: &wgpu::Queue, desc: &CullerDesc) -> Result<Self, CullError> {
        let culler = Self::resolve(device, queue, desc, true)?;
        culler.kernel_for(KernelSpec::flat(1, 1, VisibilityTest::Frustum))?;
        Ok(culler)
    }

    /// Like [`Self::new`], but compiles nothing: a renderer compiles each
    /// kernel's [`Self::recipe`] (named by a [`KernelSpec`]) itself
    /// (asynchronously, in its own pipeline cache) and hands the pipelines
    /// over with [`Self::provide_pipelines`]. Until then, culls into targets that
    /// need that kernel fail with [`CullError::PipelinesNotReady`]. The form
    /// for meshes centred on their origin ([`KernelSpec::for_centred_meshes`])
    /// is optional: culls of such meshes take it once provided; so is the
    /// form for plain views ([`KernelSpec::for_plain_views`]). The Bevy
    /// plugin works this way.
    pub fn deferred(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        desc: &CullerDesc,
    ) -> Result<Self, CullError> {
        Self::resolve(device, queue, desc, false)
    }

    fn resolve(
        device: &wgpu::Device,
        queue: &wgpu::Queue,
        desc: &CullerDesc,
        compiles: bool,
    ) -> Result<Self, CullError> {
        let variant = ScanVariant::resolve(desc.variant, device.features(), desc.allow_fallback)?;
        let kernel = variant.kernel().ok_or(CullError::VariantNotCompiled {
            variant,
            feature: variant.feature(),
        })?;
        if !(1..=MAX_VIEWS).contains(&desc.max_views) {
            return Err(CullError::ViewCount {
                views: desc.max_views as usize,
                max: MAX_VIEWS,
            });
        }
        let limits = device.limits();
        let workgroup_size = desc.tuning.workgroup_size.unwrap_or(DEFAULT_WORKGROUP_SIZE);
        if !(workgroup_size.is_power_of_two() && (32..=256).contains(&workgroup_size)) {
            return Err(CullError::InvalidParameter(
                "workgroup_size must be a power of two from 32 to 256",
            ));
        }
        let available = device.features().contains(wgpu::Features::SUBGROUP) && !desc.tuning.workgroup_scan;
        let subgroups = kernel.subgroup_form(available);
        let tile = workgroup_size * ITEMS_PER_THREAD * kernel.row_groups(desc.format, subgroups);
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
        Ok(Self {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            device: device.clone(),
            variant,
            kernel,
            format: desc.format,
            output: desc.output,
            window_len,
            dispatch: DispatchShape {
                per_workgroup: kernel.per_workgroup(workgroup_size, tile),
                max_groups,
            },
            workgroup_size,
            tuning: KernelTuning {
                spin_limit: desc
                    .tuning
                    .lookback_spin_limit
                    .unwrap_or(DEFAULT_LOOKBACK_SPIN_LIMIT),
                silent_tiles: desc.tuning.lookback_silent_tiles,
                row_writes: desc.tuning.row_writes.unwrap_or(desc.format.stride() >= 64),
                staged_indices: desc.tuning.staged_indices.unwrap_or(true),
            },
            plain_views: desc.tuning.plain_views,
            subgroups,
            tile_len: tile,
            timestamps,
            timestamp_period: queue.get_timestamp_period(),
            max_views: desc.max_views,
            compiles,
            // Per (plain views or not, centred or not, test, by cells or
            // not, views, windows).
            kernels: Mutex::new(vec![
                None;
                2 * 2
                    * VisibilityTest::ALL.len()
                    * 2
                    * (MAX_OUTPUT_WINDOWS * desc.max_views) as usize
            ]),
            shared_uniforms: Default::default(),
        })
    }

    /// Whether culls of plain views ([`KernelSpec::plain_views`]) into
    /// targets of `views` views take the plain form of their kernel
    /// ([`super::Tuning::plain_views`]), so that a renderer compiles it only where
    /// it is used.
    pub fn takes_plain_form(&self, views: u32) -> bool {
        self.plain_views
            .unwrap_or(!(self.variant == ScanVariant::BlockAtomic && (2..=4).contains(&views)))
    }

    /// What ties its targets to it.
    pub(crate) fn id(&self) -> u64 {
        self.id
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
    /// (unless [`super::Tuning::workgroup_scan`]), else it scans in workgroup memory.
    pub fn uses_subgroups(&self) -> bool {
        self.subgroups
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

    /// Most views one cull votes against ([`CullerDesc::max_views`]).
    pub fn max_views(&self) -> u32 {
        self.max_views
    }

    /// Output windows (bindings) a target of `capacity` instances for
    /// `views` views spans (their survivor lists follow each other in one
    /// buffer, bound as the same windows), which picks its kernel
    /// ([`KernelSpec::windows`]); [`CullError::BatchTooLarge`] past
    /// [`MAX_OUTPUT_WINDOWS`].
    pub fn windows_for(&self, capacity: u32, views: u32) -> Result<u32, CullError> {
        let elements = crate::buffers::view_stride(capacity, views, self.output.stride(self.format)) as u64
            * views.max(1) as u64;
        let windows = elements.div_ceil(self.window_len as u64).max(1);
        if windows > MAX_OUTPUT_WINDOWS as u64 {
            return Err(CullError::BatchTooLarge {
                capacity: elements,
                windows,
                window_len: self.window_len as u64,
                max: MAX_OUTPUT_WINDOWS as u64,
            });
        }
        Ok(windows as u32)
    }
}
