//! The [`Culler`]: the top layer. It resolves a variant, format and output
//! kind against the device, holds the compiled kernels (compiled here, or
//! handed in by a renderer that compiles them itself), makes targets, and
//! encodes a cull into a command encoder.

use crate::buffers::{CullInput, CullTarget, TargetSpec};
use crate::cells::CellIndex;
use crate::frustum::{Frustum, Sphere};
pub use crate::kernel::MAX_OUTPUT_WINDOWS;
pub use crate::kernel::MAX_VIEWS;
use crate::kernel::{Chunk, DispatchShape, GpuParams, ITEMS_PER_THREAD, LOOKBACK_COUNT_BITS, PARAMS_STRIDE};
use crate::occlusion::{DepthPyramid, OcclusionCamera, OcclusionHistory};
pub use crate::outputs::OutputKind;
use crate::passes::{CompiledPass, EncodeContext};
use crate::shader::{KernelRecipe, ModuleShape};
use crate::variants::{KernelTuning, ScanKernel};
use crate::visibility::VisibilityTest;
use crate::{CullError, InstanceFormat, ScanVariant};
use bytemuck::Zeroable;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Status words carry counts of `LOOKBACK_COUNT_BITS`
/// (`shaders/cull/variants/ordered_chain.wgsl`), so no chunk may hold more
/// instances than this.
const MAX_CHUNK_LEN: u32 = (1 << LOOKBACK_COUNT_BITS) - 1;

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
    /// [`ScanVariant::SubgroupBallot`] writing instance copies wider than
    /// 16 bytes ([`OutputKind::Instances`] of 32 B and 64 B instances): a
    /// subgroup writes each row in which at least half its lanes keep their
    /// instance together, every store covering consecutive 16-byte parts,
    /// instead of each lane storing its own instance in parts that leave
    /// every store half (32 B) or a quarter (64 B) of each sector. `None`
    /// (the default): on for 64 B instances, off for 32 B ones. On an H200
    /// it takes much of the time off fully visible batches and changes
    /// little at 5-50% visible for 64 B instances; for 32 B instances it
    /// costs a few percent at 5-50% visible, where its path is rarely taken
    /// (`docs/benchmarks.md#fully-visible-batches-rows-written-together`).
    /// Batches that are mostly visible (a shadow view that covers the whole
    /// scene) may turn it on for 32 B instances.
    pub row_writes: Option<bool>,
    /// Culls of plain views ([`KernelSpec::plain_views`]: five planes and no
    /// size band, as Bevy's perspective cameras, spot lights, point-light
    /// faces and directional cascades have) take a kernel with the sixth
    /// plane and the band compiled out, where the general kernel branches
    /// on them per view for every instance. `None` (the default): on,
    /// except for [`ScanVariant::BlockAtomic`] kernels of two to four views
    /// (one scan batch), which measured slower in that form on an H100
    /// (`docs/benchmarks.md#several-views-in-one-pass`). `Some(true)` or
    /// `Some(false)`: always or never.
    pub plain_views: Option<bool>,
    /// [`ScanVariant::SubgroupBallot`] and [`ScanVariant::SubgroupShuffle`]
    /// writing indices ([`OutputKind::Indices`]): each lane stages the indices it keeps in
    /// workgroup memory, and the workgroup writes each view's survivors out
    /// in whole rows, two views at a time: the same slots, and on an NVIDIA
    /// H200 (centred meshes, plain views) a fifth less time for six to eight
    /// views of 32 B instances and 7-12% less for four levels of detail
    /// (`docs/benchmarks.md#several-views-in-one-pass`).
    /// `None` (the default): on. `Some(false)`: each lane stores its own
    /// survivors.
    pub staged_indices: Option<bool>,
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
    /// Most views of one target ([`CullTarget::with_views`]) and so of one
    /// cull ([`Culler::cull_views`]), from 1 (the default) to [`MAX_VIEWS`].
    /// Each target's kernel is compiled for its own view count.
    pub max_views: u32,
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
            max_views: 1,
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

/// What a cull of several views in one pass needs beyond the buffers
/// ([`Culler::cull_views`]).
#[derive(Clone, Copy, Debug)]
pub struct CullViewsParams<'a> {
    /// One frustum per view: view `v`'s survivors and draw arguments go to
    /// the target's view `v`.
    pub frusta: &'a [Frustum],
    /// The mesh's bounding sphere in its local space.
    pub local_bounds: Sphere,
    /// Instances to cull, from the start of the input.
    pub count: u32,
}

/// What an occlusion phase binds beyond a plain cull.
struct Occlusion<'a> {
    test: VisibilityTest,
    history: &'a OcclusionHistory,
    /// The late phase's pyramid and camera.
    late: Option<(&'a DepthPyramid, &'a OcclusionCamera)>,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// A kernel's compiled passes, in the order of its recipe.
type Kernel = Arc<Vec<CompiledPass>>;

/// Culls batches of instances with one scan variant, instance format and
/// output kind. Create once (it compiles pipelines); cull every frame.
pub struct Culler {
    id: u64,
    device: wgpu::Device,
    variant: ScanVariant,
    kernel: &'static dyn ScanKernel,
    format: InstanceFormat,
    output: OutputKind,
    window_len: u32,
    dispatch: DispatchShape,
    workgroup_size: u32,
    tuning: KernelTuning,
    /// [`Tuning::plain_views`], as given.
    plain_views: Option<bool>,
    subgroups: bool,
    /// Instances per workgroup of the single-pass variants.
    tile_len: u32,
    timestamps: bool,
    timestamp_period: f32,
    max_views: u32,
    /// Compile kernels here when first needed (`false`: they are handed in).
    compiles: bool,
    /// Kernels by form (general or for plain views, general or for centred
    /// meshes), visibility test, by cells or not, views and output windows
    /// (`kernel_index`).
    kernels: Mutex<Vec<Option<Kernel>>>,
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
    /// kernel's [`Self::recipe`] (or [`Self::recipe_of`] a [`KernelSpec`])
    /// itself (asynchronously, in its own pipeline cache) and hands the
    /// pipelines over with [`Self::provide_pipelines`]
    /// ([`Self::provide_pipelines_of`]). Until then, culls into targets that
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
        })
    }

    /// Whether culls of plain views ([`KernelSpec::plain_views`]) into
    /// targets of `views` views take the plain form of their kernel
    /// ([`Tuning::plain_views`]), so that a renderer compiles it only where
    /// it is used.
    pub fn takes_plain_form(&self, views: u32) -> bool {
        self.plain_views
            .unwrap_or(!(self.variant == ScanVariant::BlockAtomic && (2..=4).contains(&views)))
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

    /// Output windows (bindings) a target of `capacity` instances for one
    /// view spans, which picks its kernel; [`CullError::BatchTooLarge`]
    /// past [`MAX_OUTPUT_WINDOWS`].
    pub fn windows_for(&self, capacity: u32) -> Result<u32, CullError> {
        self.windows_for_views(capacity, 1)
    }

    /// [`Self::windows_for`] a target of `views` views: their survivor
    /// lists follow each other in one buffer, bound as the same windows.
    pub fn windows_for_views(&self, capacity: u32, views: u32) -> Result<u32, CullError> {
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

    /// `key`, its centred form named as the general one where the format has
    /// none ([`KernelSpec::centred`]).
    fn normalized(&self, key: KernelSpec) -> KernelSpec {
        KernelSpec {
            centred: key.centred && self.format.has_centred_form(),
            ..key
        }
    }

    fn shape(&self, key: KernelSpec) -> ModuleShape {
        let KernelSpec {
            windows,
            views,
            test,
            cells,
            centred,
            plain_views,
        } = self.normalized(key);
        ModuleShape {
            variant: self.variant,
            kernel: self.kernel,
            format: self.format,
            output: self.output,
            visibility: test.kernel(),
            windows,
            views,
            workgroup_size: self.workgroup_size,
            tuning: self.tuning,
            subgroups: self.subgroups,
            cells,
            centred,
            plain_views,
        }
    }

    /// What to compile for targets of `views` views spanning `windows`
    /// output windows ([`CullTarget::windows`], [`CullTarget::views`]): the entry module, its shader
    /// defs and the passes' layouts (see [`crate::shader::library`] for the
    /// modules it imports). The frustum test's kernel; [`Self::recipe_for`]
    /// gives the occlusion phases'.
    pub fn recipe(&self, windows: u32, views: u32) -> KernelRecipe {
        self.recipe_for(windows, views, VisibilityTest::Frustum)
    }

    /// [`Self::recipe`] of the kernel that votes with `test`.
    pub fn recipe_for(&self, windows: u32, views: u32, test: VisibilityTest) -> KernelRecipe {
        self.shape(KernelSpec::flat(windows, views, test)).recipe()
    }

    /// [`Self::recipe_for`] of the kernel that culls by cells
    /// ([`Self::cull_views_in_cells`]): the cell pass, then the cull.
    pub fn recipe_for_cells(&self, windows: u32, views: u32, test: VisibilityTest) -> KernelRecipe {
        self.shape(KernelSpec::cells(windows, views, test)).recipe()
    }

    /// [`Self::recipe`] of the kernel `spec` names.
    pub fn recipe_of(&self, spec: KernelSpec) -> KernelRecipe {
        self.shape(spec).recipe()
    }

    /// The kernel cache's index of `key`, checked.
    fn kernel_index(&self, key: KernelSpec) -> Result<usize, CullError> {
        let KernelSpec {
            windows,
            views,
            test,
            cells,
            centred,
            plain_views,
        } = self.normalized(key);
        if !(1..=MAX_OUTPUT_WINDOWS).contains(&windows) {
            return Err(CullError::InvalidParameter(
                "windows must be from 1 to MAX_OUTPUT_WINDOWS",
            ));
        }
        if !(1..=self.max_views).contains(&views) {
            return Err(CullError::ViewCount {
                views: views as usize,
                max: self.max_views,
            });
        }
        let per_test = (self.max_views * MAX_OUTPUT_WINDOWS) as usize;
        let forms =
            (usize::from(plain_views) * 2 + usize::from(centred)) * VisibilityTest::ALL.len() + test.index();
        Ok((forms * 2 + usize::from(cells)) * per_test
            + ((views - 1) * MAX_OUTPUT_WINDOWS + windows - 1) as usize)
    }

    /// The WGSL of this culler's general kernel for a batch that fits one
    /// binding, as compiled (composed, then written out by naga: for
    /// inspection, disassembly, register counts). Meshes centred on their
    /// origin take another form where the culler compiles its own kernels
    /// or a renderer provided it ([`Self::shader_source_of`] of
    /// [`KernelSpec::for_centred_meshes`]).
    pub fn shader_source(&self) -> String {
        self.shader_source_for(1, VisibilityTest::Frustum)
            .unwrap_or_else(|e| panic!("one view is always allowed: {e}"))
    }

    /// [`Self::shader_source`] of the kernel that culls `views` views with
    /// `test` (as [`Self::recipe_for`]`(1, views, test)`): the multi-view and
    /// level-of-detail kernels hold more in registers than the one-view one.
    pub fn shader_source_for(&self, views: u32, test: VisibilityTest) -> Result<String, CullError> {
        self.shader_source_of(KernelSpec::flat(1, views, test))
    }

    /// The WGSL of the kernel `spec` names (its entry pass), as
    /// [`Self::shader_source`].
    pub fn shader_source_of(&self, spec: KernelSpec) -> Result<String, CullError> {
        self.kernel_index(spec)?;
        let shape = self.shape(spec);
        Ok(crate::shader::wgsl(&shape, shape.recipe().entry)
            .unwrap_or_else(|e| panic!("the crate's WGSL composes: {e}")))
    }

    /// Hands over the pipelines of [`Self::recipe`]`(windows, views)`,
    /// compiled elsewhere, one per pass in order. Their group 0 layouts must
    /// be the recipe's ([`crate::kernel::PassLayout::layout_entries`]).
    pub fn provide_pipelines(
        &self,
        windows: u32,
        views: u32,
        pipelines: Vec<wgpu::ComputePipeline>,
    ) -> Result<(), CullError> {
        self.provide_pipelines_for(windows, views, VisibilityTest::Frustum, pipelines)
    }

    /// [`Self::provide_pipelines`] for [`Self::recipe_for`]`(windows, views, test)`.
    pub fn provide_pipelines_for(
        &self,
        windows: u32,
        views: u32,
        test: VisibilityTest,
        pipelines: Vec<wgpu::ComputePipeline>,
    ) -> Result<(), CullError> {
        self.provide_pipelines_of(KernelSpec::flat(windows, views, test), pipelines)
    }

    /// [`Self::provide_pipelines_for`] for [`Self::recipe_for_cells`].
    pub fn provide_pipelines_for_cells(
        &self,
        windows: u32,
        views: u32,
        test: VisibilityTest,
        pipelines: Vec<wgpu::ComputePipeline>,
    ) -> Result<(), CullError> {
        self.provide_pipelines_of(KernelSpec::cells(windows, views, test), pipelines)
    }

    /// [`Self::provide_pipelines`] for [`Self::recipe_of`]`(spec)`. A
    /// kernel for centred meshes ([`KernelSpec::centred`]) or for plain
    /// views ([`KernelSpec::plain_views`]) is an addition: culls it serves
    /// take it once provided, the general kernel otherwise.
    pub fn provide_pipelines_of(
        &self,
        key: KernelSpec,
        pipelines: Vec<wgpu::ComputePipeline>,
    ) -> Result<(), CullError> {
        let index = self.kernel_index(key)?;
        let recipe = self.shape(key).recipe();
        if pipelines.len() != recipe.passes.len() {
            return Err(CullError::PipelineCount {
                expected: recipe.passes.len(),
                got: pipelines.len(),
            });
        }
        let passes = pipelines
            .into_iter()
            .zip(&recipe.passes)
            .map(|(pipeline, pass)| CompiledPass::from_pipeline(pipeline, pass))
            .collect();
        self.kernels.lock().expect("kernel cache poisoned")[index] = Some(Arc::new(passes));
        Ok(())
    }

    /// Whether targets of `views` views spanning `windows` output windows
    /// can be culled now.
    pub fn has_pipelines(&self, windows: u32, views: u32) -> bool {
        self.has_pipelines_for(windows, views, VisibilityTest::Frustum)
    }

    /// [`Self::has_pipelines`] for the kernel that votes with `test`.
    pub fn has_pipelines_for(&self, windows: u32, views: u32, test: VisibilityTest) -> bool {
        self.has_pipelines_of(KernelSpec::flat(windows, views, test))
    }

    /// [`Self::has_pipelines_for`] for [`Self::recipe_for_cells`].
    pub fn has_pipelines_for_cells(&self, windows: u32, views: u32, test: VisibilityTest) -> bool {
        self.has_pipelines_of(KernelSpec::cells(windows, views, test))
    }

    /// Whether the kernel `spec` names can be culled with now.
    pub fn has_pipelines_of(&self, key: KernelSpec) -> bool {
        self.kernel_index(key)
            .is_ok_and(|i| self.compiles || self.kernels.lock().expect("kernel cache poisoned")[i].is_some())
    }

    /// The form of the general kernel `key` that a cull of `frusta` takes,
    /// where one is at hand (a culler that compiles its own kernels, or one
    /// whose renderer provided it), the fastest first: for a mesh centred on
    /// its origin (`centred_mesh`) the form that leaves the rotation of its
    /// center out ([`KernelSpec::for_centred_meshes`]), for plain views the
    /// form that tests no sixth plane and no band
    /// ([`KernelSpec::for_plain_views`], where [`Self::takes_plain_form`]),
    /// both together, then the general kernel. Every form keeps the same
    /// instances. `None`: none is ready.
    fn ready_form(&self, key: KernelSpec, centred_mesh: bool, frusta: &[Frustum]) -> Option<KernelSpec> {
        let plain = crate::visibility::views_are_plain(frusta, key.test) && self.takes_plain_form(key.views);
        [
            (centred_mesh && plain).then(|| key.for_centred_meshes().for_plain_views()),
            plain.then(|| key.for_plain_views()),
            centred_mesh.then(|| key.for_centred_meshes()),
            Some(key),
        ]
        .into_iter()
        .flatten()
        .find(|form| self.has_pipelines_of(*form))
    }

    /// The kernel `key` names, compiling it when this culler compiles its
    /// own.
    fn kernel_for(&self, key: KernelSpec) -> Result<Kernel, CullError> {
        let index = self.kernel_index(key)?;
        let mut cache = self.kernels.lock().expect("kernel cache poisoned");
        let slot = &mut cache[index];
        if let Some(k) = slot {
            return Ok(k.clone());
        }
        if !self.compiles {
            return Err(CullError::PipelinesNotReady {
                windows: key.windows,
                views: key.views,
            });
        }
        let shape = self.shape(key);
        let recipe = shape.recipe();
        let limits = self.device.limits();
        for pass in &recipe.passes {
            crate::passes::check_storage_limit(limits.clone(), pass)?;
        }
        // One wgpu module per entry module (the kernel's, the cell pass's).
        let modules: Vec<(&'static str, wgpu::ShaderModule)> = recipe
            .modules()
            .into_iter()
            .map(|entry| {
                let source = crate::shader::wgsl(&shape, entry)
                    .unwrap_or_else(|e| panic!("the crate's WGSL composes: {e}"));
                let module = self.device.create_shader_module(wgpu::ShaderModuleDescriptor {
                    label: Some(self.variant.name()),
                    source: wgpu::ShaderSource::Wgsl(source.into()),
                });
                (entry.path, module)
            })
            .collect();
        let passes = recipe
            .passes
            .iter()
            .map(|pass| {
                let path = recipe.module_of(pass).path;
                let (_, module) = modules
                    .iter()
                    .find(|(p, _)| *p == path)
                    .expect("recipe.modules() lists every pass's module");
                CompiledPass::new(&self.device, module, pass)
            })
            .collect::<Result<Vec<_>, _>>()?;
        let k = Arc::new(passes);
        *slot = Some(k.clone());
        Ok(k)
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
        let views = CullViewsParams {
            frusta: std::slice::from_ref(&params.frustum),
            local_bounds: params.local_bounds,
            count: params.count,
        };
        self.cull_views(encoder, queue, input, target, &views)
    }

    /// Records the cull of `params.count` instances of `input` against
    /// every frustum of `params.frusta`. The unordered variants do it in one
    /// pass, and [`ScanVariant::OrderedTwoPass`] in one vote pass: each
    /// instance is read and its world sphere computed once, then voted
    /// against each view. [`ScanVariant::Ordered`] and
    /// [`ScanVariant::HillisSteele`] run their passes once per view, reading
    /// the instances again each time. Either
    /// way, view `v`'s survivors go densely to the target's view `v`
    /// ([`CullTarget::view_output_offset`]) and their number to its draw
    /// arguments ([`CullTarget::draw_args_offset`]). The target needs as
    /// many views ([`CullTarget::with_views`]); its other views are left
    /// as they were. Like [`Self::cull`], once per target per submission.
    /// Views that are one camera's levels of detail vote with
    /// [`VisibilityTest::DetailLevels`]'s kernel where it is compiled (or
    /// this culler compiles its own), which tests the frustum once per
    /// instance ([`VisibilityTest::for_views`]).
    pub fn cull_views(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        queue: &wgpu::Queue,
        input: &CullInput,
        target: &CullTarget,
        params: &CullViewsParams,
    ) -> Result<(), CullError> {
        self.encode_views(encoder, queue, input, target, params, None, None)
    }

    /// Occlusion culling's early phase ([`crate::occlusion`]): like
    /// [`Self::cull_views`], keeping only the instances that `history` says
    /// were visible after the last late phase. Draw its survivors, build the
    /// depth pyramid from their depth, then record [`Self::cull_views_late`]
    /// into another target. The views must be one camera's: the same
    /// frustum, with levels of detail or not ([`crate::Frustum::detail_levels`]).
    /// With `cells`, a batch sorted into cells is culled by them
    /// ([`Self::cull_views_in_cells`]): only the kept cells' instances and
    /// history are read. The survivors are the same.
    #[allow(clippy::too_many_arguments)]
    pub fn cull_views_early(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        queue: &wgpu::Queue,
        input: &CullInput,
        target: &CullTarget,
        params: &CullViewsParams,
        history: &OcclusionHistory,
        cells: Option<&CellIndex>,
    ) -> Result<(), CullError> {
        let occlusion = Occlusion {
            test: VisibilityTest::OcclusionEarly,
            history,
            late: None,
        };
        self.encode_views(encoder, queue, input, target, params, Some(occlusion), cells)
    }

    /// Occlusion culling's late phase ([`crate::occlusion`]): keeps the
    /// instances in the frustum that may be visible past `pyramid` (built
    /// from the depth the early phase's survivors drew, seen by `camera`)
    /// and that the early phase did not keep; records for the next frame
    /// which instances passed, and swaps `history`'s halves. The views must
    /// be the early phase's, `target` another than its target. With
    /// `cells`, a batch sorted into cells is culled by them: the cell pass
    /// also tests the cells against the pyramid, only the kept cells'
    /// instances are read, and the history of the others is cleared (they
    /// are outside the frustum or hidden). The survivors and the history
    /// are the same.
    #[allow(clippy::too_many_arguments)]
    pub fn cull_views_late(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        queue: &wgpu::Queue,
        input: &CullInput,
        target: &CullTarget,
        params: &CullViewsParams,
        history: &mut OcclusionHistory,
        pyramid: &DepthPyramid,
        camera: &OcclusionCamera,
        cells: Option<&CellIndex>,
    ) -> Result<(), CullError> {
        camera.validate()?;
        let occlusion = Occlusion {
            test: VisibilityTest::OcclusionLate,
            history: &*history,
            late: Some((pyramid, camera)),
        };
        self.encode_views(encoder, queue, input, target, params, Some(occlusion), cells)?;
        history.advance();
        Ok(())
    }

    /// Records the cull of `params.count` instances of `input`, sorted into
    /// cells ([`crate::cells`]), against every frustum of `params.frusta`:
    /// first the cell pass votes `cells`' spheres, then the cull reads only
    /// the kept cells' instances. The survivors are [`Self::cull_views`]'s,
    /// as indices into the sorted batch: in no particular order, or with
    /// the order-preserving variants in the sorted batch's order. Every
    /// variant culls by cells.
    pub fn cull_views_in_cells(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        queue: &wgpu::Queue,
        input: &CullInput,
        target: &CullTarget,
        params: &CullViewsParams,
        cells: &CellIndex,
    ) -> Result<(), CullError> {
        self.encode_views(encoder, queue, input, target, params, None, Some(cells))
    }

    /// [`Self::cull_views_in_cells`] where `layout` says it pays off for
    /// these views (enough instances left unread: [`crate::CellLayout::pays_off`],
    /// or [`CellIndex::set_min_skipped_bytes`]'s threshold), else
    /// [`Self::cull_views`]. Says which, and how many cells the cell pass
    /// keeps (its CPU mirror, [`crate::CellLayout::kept_cells`], measured
    /// once for both). The survivors are the same either way. `layout`
    /// must be the one whose bounds `cells` holds.
    #[allow(clippy::too_many_arguments)]
    pub fn cull_views_by_cells_if_faster(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        queue: &wgpu::Queue,
        input: &CullInput,
        target: &CullTarget,
        params: &CullViewsParams,
        layout: &crate::cells::CellLayout,
        cells: &CellIndex,
    ) -> Result<crate::cells::CellPick, CullError> {
        let pick = layout.pick(self.format, params.frusta, params.count, cells.min_skipped_bytes);
        if pick.by_cells {
            self.cull_views_in_cells(encoder, queue, input, target, params, cells)?;
        } else {
            self.cull_views(encoder, queue, input, target, params)?;
        }
        Ok(pick)
    }

    #[allow(clippy::too_many_arguments)]
    fn encode_views(
        &self,
        encoder: &mut wgpu::CommandEncoder,
        queue: &wgpu::Queue,
        input: &CullInput,
        target: &CullTarget,
        params: &CullViewsParams,
        occlusion: Option<Occlusion>,
        cells: Option<&CellIndex>,
    ) -> Result<(), CullError> {
        if target.culler_id() != self.id {
            return Err(CullError::ForeignTarget);
        }
        if let Some(cells) = cells {
            if cells.culler_id != self.id {
                return Err(CullError::InvalidParameter(
                    "a cell index is culled by the culler that made it",
                ));
            }
            let covered = cells.cells as u64 * cells.cell_len as u64;
            if params.count as u64 > covered {
                return Err(CullError::CountExceedsCapacity {
                    count: params.count as u64,
                    capacity: covered,
                });
            }
        }
        let views = params.frusta.len();
        if views == 0 || views > target.views() as usize {
            return Err(CullError::ViewCount {
                views,
                max: target.views(),
            });
        }
        params.local_bounds.validate()?;
        for band in params.frusta.iter().filter_map(|f| f.size_band.as_ref()) {
            band.validate()?;
        }
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
        // A mesh centred on its origin, in a format whose vote rotates the
        // center: it may take the kernel that leaves the rotation out.
        let centred_mesh = params.local_bounds.center == glam::Vec3::ZERO && self.format.has_centred_form();
        let test = match &occlusion {
            Some(o) => o.test,
            None => {
                // One camera's levels measure the frustum and the size once,
                // where that kernel is at hand; the frustum test's keeps the
                // same instances.
                let levels = VisibilityTest::for_views(params.frusta);
                let key = KernelSpec {
                    windows: target.windows(),
                    views: target.views(),
                    test: levels,
                    cells: cells.is_some(),
                    centred: false,
                    plain_views: false,
                };
                // Any of its forms (a renderer may have provided only the
                // centred or the plain one; the choice between the forms
                // follows).
                if self.ready_form(key, centred_mesh, params.frusta).is_some() {
                    levels
                } else {
                    VisibilityTest::Frustum
                }
            }
        };
        if let Some(o) = &occlusion {
            // On wgpu's GL backend (llvmpipe), the late phase lost visible
            // instances in the views after the first; refused until found.
            let backend = self.device.adapter_info().backend;
            if backend == wgpu::Backend::Gl {
                return Err(CullError::UnsupportedBackend {
                    backend,
                    what: "occlusion culling",
                });
            }
            if count > o.history.capacity() {
                return Err(CullError::CountExceedsCapacity {
                    count: count as u64,
                    capacity: o.history.capacity() as u64,
                });
            }
            if !crate::visibility::views_share_camera(params.frusta) {
                return Err(CullError::InvalidParameter(
                    "an occlusion cull's views are one camera's: the same frustum and size metric (its levels of detail)",
                ));
            }
        }
        let key = KernelSpec {
            windows: target.windows(),
            views: target.views(),
            test,
            cells: cells.is_some(),
            centred: false,
            plain_views: false,
        };
        // The fastest form at hand (ready_form), or the general kernel,
        // which kernel_for compiles or reports as not ready.
        let key = self.ready_form(key, centred_mesh, params.frusta).unwrap_or(key);
        let kernel = self.kernel_for(key)?;
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

        // Uniforms: per chunk (and per view for a kernel that dispatches per
        // view), its entry then (Hillis-Steele) one per scan step.
        let views = views as u32;
        let per_chunk = self.kernel.params_per_chunk(self.window_len);
        let param_views = if self.kernel.dispatches_per_view() {
            views
        } else {
            1
        };
        let mut base = GpuParams::zeroed();
        // Unused planes keep everything; the shader skips an unused sixth.
        base.planes = [[[0.0, 0.0, 0.0, 1.0]; 6]; MAX_VIEWS as usize];
        for (view, frustum) in base.planes.iter_mut().zip(params.frusta) {
            for (dst, p) in view.iter_mut().zip(frustum.planes()) {
                *dst = crate::frustum::widen_plane(*p).to_array();
            }
        }
        // A view without a band keeps every size (zeros: no band).
        for (dst, frustum) in base.size_bands.iter_mut().zip(params.frusta) {
            if let Some(band) = frustum.size_band {
                *dst = band.gpu();
            }
        }
        base.local_sphere = params
            .local_bounds
            .center
            .extend(params.local_bounds.radius)
            .to_array();
        base.local_terms = crate::formats::local_terms(params.local_bounds.center);
        base.window_len = self.window_len;
        if let Some(cells) = cells {
            base.cell_count = count.div_ceil(cells.cell_len);
            base.cells_per_chunk = cells.cells_per_chunk;
            base.cell_region_words = (cells.region_bytes / 4) as u32;
            base.cell_views = views;
        }
        base.view_stride = target.view_stride();
        // The scratch's tiles per view, as the target sized them (with_views).
        let (x, y) = self
            .dispatch
            .dims(self.dispatch.groups_for(target.capacity().min(self.window_len)));
        base.tile_capacity = crate::kernel::ordered_tile_capacity(x as u64 * y as u64);
        if let Some(o) = &occlusion {
            (base.history_read, base.history_write) = o.history.halves();
            if let Some((pyramid, camera)) = o.late {
                base.occlusion_clip = camera.clip_from_relative.to_cols_array_2d();
                base.occlusion_origin = camera.origin.extend(camera.origin_slack()).to_array();
                base.occlusion_jitter = camera.jitter;
                base.pyramid_size = [pyramid.width(), pyramid.height()];
                base.pyramid_levels = pyramid.levels();
                base.reverse_z = u32::from(pyramid.order() == crate::occlusion::DepthOrder::ReverseZ);
            }
        }
        let entries = chunks.len() as u32 * param_views * per_chunk;
        let mut uniforms = vec![0u8; entries as usize * PARAMS_STRIDE as usize];
        for chunk in &chunks {
            let groups = self.dispatch.groups_for(chunk.len);
            for slot in 0..param_views {
                for step in 0..per_chunk {
                    let entry = GpuParams {
                        chunk_start: chunk.start,
                        chunk_len: chunk.len,
                        groups_x: self.dispatch.dims(groups).0,
                        scan_offset: if step == 0 { 0 } else { 1 << (step - 1) },
                        first_view: if param_views > 1 { slot } else { 0 },
                        view_count: if param_views > 1 { 1 } else { views },
                        ..base
                    };
                    let index = (chunk.index * param_views + slot) * per_chunk + step;
                    let at = (index as u64 * PARAMS_STRIDE) as usize;
                    uniforms[at..at + size_of::<GpuParams>()].copy_from_slice(bytemuck::bytes_of(&entry));
                }
            }
        }
        if !uniforms.is_empty() {
            queue.write_buffer(target.params_buffer(), 0, &uniforms);
        }

        // The atomic counters are the draws' instance counts: zero them.
        for view in 0..views {
            let at = target.draw_args_offset(view) + crate::kernel::INSTANCE_COUNT_OFFSET;
            encoder.clear_buffer(target.draw_args(), at, Some(4));
        }
        let mut visibility_entries = Vec::new();
        if let Some(o) = &occlusion {
            visibility_entries.push(wgpu::BindGroupEntry {
                binding: crate::kernel::bindings::VISIBILITY_HISTORY,
                resource: o.history.buffer().as_entire_binding(),
            });
            if let Some((pyramid, _)) = o.late {
                visibility_entries.push(wgpu::BindGroupEntry {
                    binding: crate::kernel::bindings::DEPTH_PYRAMID,
                    resource: wgpu::BindingResource::TextureView(pyramid.view()),
                });
            }
        }
        if let Some(cells) = cells {
            // Nothing kept yet in any chunk: the count, and the ordered
            // variant's flags (a list needs only its count cleared, but the
            // region is small: a word per cell).
            for chunk in &chunks {
                let at = chunk.index as u64 * cells.region_bytes;
                encoder.clear_buffer(&cells.kept, at, Some(cells.region_bytes));
            }
        }
        // The late phase sets the history bits of the instances that pass
        // (by cells, of the kept cells' instances: the others are outside
        // the frustum or hidden) in the half it writes, cleared here.
        if let Some(o) = occlusion.as_ref().filter(|o| o.late.is_some()) {
            let (_, write) = o.history.halves();
            let words = crate::occlusion::history_words(count) as u64;
            encoder.clear_buffer(o.history.buffer(), write as u64 * 4, Some(words * 4));
        }
        let mut recorder = target.timing_recorder();
        self.kernel.encode(
            EncodeContext {
                cells,
                visibility_entries: &visibility_entries,
                device: &self.device,
                encoder,
                input,
                target,
                chunks: &chunks,
                dispatch: self.dispatch,
                views,
                params_per_chunk: per_chunk,
                param_views,
                recorder: &mut recorder,
            },
            &kernel,
        );
        if let Some(recorder) = recorder {
            recorder.finish(encoder);
        }
        Ok(())
    }
}

/// Which kernel of a culler: its shape beyond the culler's own settings
/// (variant, format, output kind). A renderer that compiles the kernels
/// itself ([`Culler::deferred`]) names each one by its spec: what to compile
/// ([`Culler::recipe_of`]), what it hands over
/// ([`Culler::provide_pipelines_of`]), what is ready
/// ([`Culler::has_pipelines_of`]).
///
/// Equality is field by field: for a format without a centred form, a spec
/// with `centred` set and the same spec without it are unequal but name the
/// same kernel (see [`KernelSpec::centred`]); a renderer that keys its own
/// caches by spec should ask for the centred form only where
/// [`InstanceFormat::has_centred_form`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct KernelSpec {
    /// Output windows of its targets ([`CullTarget::windows`]).
    pub windows: u32,
    /// Views of its targets ([`CullTarget::views`]).
    pub views: u32,
    /// How it votes.
    pub test: VisibilityTest,
    /// Whether it culls by cells ([`Culler::cull_views_in_cells`]): the cell
    /// pass, then the cull over the kept cells' tiles.
    pub cells: bool,
    /// Whether it serves only meshes centred on their origin (local bounds
    /// centered at zero): the 32 B and 16 B formats' votes then leave the
    /// rotation of the mesh's center out ([`InstanceFormat::has_centred_form`]).
    /// A cull of such a mesh takes this kernel where it is ready and the
    /// general one otherwise (both keep the same instances). For a format
    /// without that form it names the general kernel.
    pub centred: bool,
    /// Whether it serves only culls of plain views: no view has a sixth
    /// plane (infinite reverse-Z projections, as Bevy's perspective cameras,
    /// spot lights and point-light faces have, and a directional light's
    /// cascades have five) and, under [`VisibilityTest::Frustum`], none has
    /// a size band. Its vote then tests neither a sixth plane nor a band,
    /// where the general kernel branches on each view's for every instance.
    /// A cull of plain views takes this kernel where it is ready and the
    /// culler takes the plain form for its view count
    /// ([`Culler::takes_plain_form`], [`Tuning::plain_views`]), the general
    /// one otherwise (both keep the same instances).
    pub plain_views: bool,
}

impl KernelSpec {
    /// The general flat kernel: every instance read, any mesh.
    pub fn flat(windows: u32, views: u32, test: VisibilityTest) -> Self {
        Self {
            windows,
            views,
            test,
            cells: false,
            centred: false,
            plain_views: false,
        }
    }

    /// The general kernel that culls by cells.
    pub fn cells(windows: u32, views: u32, test: VisibilityTest) -> Self {
        Self {
            cells: true,
            ..Self::flat(windows, views, test)
        }
    }

    /// The same kernel's form for meshes centred on their origin.
    pub fn for_centred_meshes(self) -> Self {
        Self {
            centred: true,
            ..self
        }
    }

    /// The same kernel's form for plain views ([`Self::plain_views`]).
    pub fn for_plain_views(self) -> Self {
        Self {
            plain_views: true,
            ..self
        }
    }
}

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
    /// ([`Culler::cull_views`]): `capacity` instances and one set of draw
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
        let windows = culler.windows_for_views(capacity, views)?;
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
