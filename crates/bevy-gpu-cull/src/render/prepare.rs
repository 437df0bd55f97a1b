//! GPU resources: cull-core's shaders as Bevy assets, the culler (rebuilt
//! when the settings change, its kernels compiled by Bevy's pipeline cache)
//! and each batch's buffers (rewritten only when its list changed). The
//! cull targets are [`super::targets`]'.

use super::extract::BatchData;
use crate::components::CulledInstance;
use crate::plugin::{GpuCullSettings, StatMessage, StatSender};
use bevy::platform::collections::HashMap;
use bevy::prelude::*;
use bevy::render::render_resource::{
    BindGroupLayoutDescriptor, CachedComputePipelineId, CachedPipelineState, ComputePipelineDescriptor,
    PipelineCache,
};
use bevy::render::renderer::{RenderDevice, RenderQueue};
use bevy::shader::ShaderCacheError;
use bevy::shader::{Shader, ShaderDefVal};
use cull_core::{
    CellIndex, CellLayout, CullInput, Culler, CullerDesc, Instance, InstanceFormat, KernelSpec, MAX_VIEWS,
    OutputKind, Sphere, VisibilityTest,
};
use std::ops::Range;
use std::sync::atomic::AtomicU64;

/// IDs of cullers (generations) and of batch buffers, unique across device losses.
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The WGSL of cull-core, as Bevy shader assets: the library modules
/// (importable as `cull::params`, `cull::items`, ...) and each variant's
/// entry module, by path. Bevy's `PipelineCache` composes and compiles the
/// cull kernels from them, as it does its own shaders.
#[derive(Resource, Clone)]
pub(crate) struct CullShaders {
    /// Held so that the library stays loaded.
    _library: Vec<Handle<Shader>>,
    entries: HashMap<&'static str, Handle<Shader>>,
    /// Pipeline ids of every kernel queued, by what it is compiled from.
    kernels: HashMap<KernelKey, Vec<CachedComputePipelineId>>,
}

/// What a kernel's pipelines are compiled from: each pass's entry module,
/// entry point, bindings and workgroup-memory zeroing, and the shader defs.
/// Two cullers share a kernel's pipelines only where these agree, so that
/// settings the kernel's shape does not name (the variant, the format, the
/// culler's `Tuning`: its workgroup size, staging, row writes) never hand
/// one culler pipelines compiled for another.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct KernelKey {
    passes: Vec<(
        &'static str,
        &'static str,
        Vec<(u32, cull_core::kernel::Slot)>,
        bool,
    )>,
    shader_defs: Vec<(&'static str, cull_core::kernel::ShaderDefValue)>,
}

impl KernelKey {
    pub(crate) fn of(recipe: &cull_core::shader::KernelRecipe) -> Self {
        Self {
            passes: recipe
                .passes
                .iter()
                .map(|pass| {
                    (
                        recipe.module_of(pass).path,
                        pass.entry_point,
                        pass.bindings.clone(),
                        pass.zeroed_workgroup_memory,
                    )
                })
                .collect(),
            shader_defs: recipe.shader_defs.clone(),
        }
    }
}

impl CullShaders {
    pub fn add_to(app: &mut App) -> Self {
        let mut shaders = app.world_mut().resource_mut::<Assets<Shader>>();
        let mut add = |m: cull_core::kernel::ShaderModule| {
            shaders.add(Shader::from_wgsl(m.source, format!("cull_core/{}", m.path)))
        };
        let library = cull_core::shader::library().into_iter().map(&mut add).collect();
        let entries = cull_core::shader::entry_modules()
            .into_iter()
            .map(|m| (m.path, add(m)))
            .collect();
        Self {
            _library: library,
            entries,
            kernels: HashMap::default(),
        }
    }
}

/// A culler whose kernels Bevy's `PipelineCache` compiles: it culls only
/// into targets whose kernel (by output windows and views) is ready.
pub(crate) struct CompilingCuller {
    pub culler: Culler,
    pub settings: GpuCullSettings,
    /// Kernels queued in the pipeline cache, by spec (the occlusion
    /// phases, culls by cells and centred meshes have kernels of their own).
    queued: HashMap<KernelSpec, Vec<CachedComputePipelineId>>,
    /// Kernels that failed to compile, not asked for again (Bevy keeps a
    /// failed pipeline failed: queueing its ids again would only repeat the
    /// error every frame).
    given_up: bevy::platform::collections::HashSet<KernelSpec>,
    /// A kernel the culls need failed to compile: a pending culler is then
    /// given up. (The form for centred meshes is optional: without it the
    /// general kernel culls them.)
    failed: bool,
    /// Kernels handed to the culler since the last frame's report
    /// (`GpuCullStats::kernels`).
    ready: Vec<KernelSpec>,
}

impl CompilingCuller {
    /// Queues the kernel of `shape`, once: the pipeline ids of a kernel
    /// queued before from the same recipe ([`KernelKey`]: e.g. when `V`
    /// comes back to a variant) are reused, so switching settings does not
    /// grow Bevy's pipeline cache.
    pub fn request(&mut self, shape: KernelSpec, cache: &PipelineCache, shaders: &mut CullShaders) {
        if self.culler.has_pipelines_of(shape)
            || self.queued.contains_key(&shape)
            || self.given_up.contains(&shape)
        {
            return;
        }
        let recipe = self.culler.recipe_of(shape);
        let key = KernelKey::of(&recipe);
        if let Some(ids) = shaders.kernels.get(&key) {
            self.queued.insert(shape, ids.clone());
            return;
        }
        // Each pass's entry module: the kernel's, or its own (the cell pass).
        let mut pass_shaders = Vec::with_capacity(recipe.passes.len());
        for pass in &recipe.passes {
            let path = recipe.module_of(pass).path;
            let Some(shader) = shaders.entries.get(path) else {
                error!("GPU culling: no shader {path}");
                return;
            };
            pass_shaders.push(shader.clone());
        }
        let shader_defs: Vec<ShaderDefVal> = recipe
            .shader_defs
            .iter()
            .map(|&(name, value)| match value {
                cull_core::kernel::ShaderDefValue::Bool(b) => ShaderDefVal::Bool(name.into(), b),
                cull_core::kernel::ShaderDefValue::UInt(u) => ShaderDefVal::UInt(name.into(), u),
            })
            .collect();
        let variant = self.culler.variant().name();
        let ids: Vec<CachedComputePipelineId> = recipe
            .passes
            .iter()
            .zip(pass_shaders)
            .map(|(pass, shader)| {
                cache.queue_compute_pipeline(ComputePipelineDescriptor {
                    label: Some(format!("gpu_cull_{variant}_{}", pass.entry_point).into()),
                    layout: vec![BindGroupLayoutDescriptor::new(
                        pass.entry_point,
                        &pass.layout_entries(),
                    )],
                    immediate_size: 0,
                    shader,
                    shader_defs: shader_defs.clone(),
                    entry_point: Some(pass.entry_point.into()),
                    zero_initialize_workgroup_memory: pass.zeroed_workgroup_memory,
                })
            })
            .collect();
        shaders.kernels.insert(key, ids.clone());
        self.queued.insert(shape, ids);
    }

    /// Hands the kernels whose passes are all compiled to the culler. A
    /// kernel that failed to compile (not one whose shaders are still
    /// loading, which Bevy retries) is dropped with an error, not asked for
    /// again, and marks the culler failed unless it was the optional form
    /// for centred meshes.
    pub fn poll(&mut self, cache: &PipelineCache) {
        let culler = &self.culler;
        let mut failed = Vec::new();
        let ready = &mut self.ready;
        self.queued.retain(|shape, ids| {
            let mut pipelines = Vec::with_capacity(ids.len());
            for &id in ids.iter() {
                match cache.get_compute_pipeline_state(id) {
                    CachedPipelineState::Err(
                        ShaderCacheError::ShaderNotLoaded(_) | ShaderCacheError::ShaderImportNotYetAvailable,
                    ) => return true,
                    CachedPipelineState::Err(e) => {
                        error!(
                            "GPU culling: a {:?} kernel ({shape:?}) failed to compile: {e}",
                            culler.variant()
                        );
                        failed.push(*shape);
                        return false;
                    }
                    _ => match cache.get_compute_pipeline(id) {
                        Some(p) => pipelines.push((**p).clone()),
                        None => return true,
                    },
                }
            }
            match culler.provide_pipelines_of(*shape, pipelines) {
                Ok(()) => {
                    debug!("GPU culling: {:?} kernel ready: {shape:?}", culler.variant());
                    ready.push(*shape);
                }
                Err(e) => {
                    error!("GPU culling: {e}");
                    failed.push(*shape);
                }
            }
            false
        });
        self.failed |= failed.iter().any(|spec| !spec.centred);
        self.given_up.extend(failed);
    }
}

/// The culler for the current settings.
#[derive(Resource)]
pub(crate) struct RenderCuller {
    pub inner: CompilingCuller,
    /// Unique across cullers and device losses: what was built for an older
    /// culler is never taken for current.
    pub generation: u64,
}

impl RenderCuller {
    pub fn culler(&self) -> &Culler {
        &self.inner.culler
    }
}

/// Settings whose kernels failed to compile: not retried until they change.
#[derive(Resource)]
pub(crate) struct FailedSettings(GpuCullSettings);

/// A culler for new settings while its kernels compile: the current one
/// keeps culling until then, so a switch never stalls a frame.
#[derive(Resource)]
pub(crate) struct PendingCuller(CompilingCuller);

/// A batch's GPU buffers.
#[derive(Component)]
pub(crate) struct GpuBatch {
    /// Instances in the culler's format, for culling.
    pub input: CullInput,
    /// [`CulledInstance`] records (64 bytes), read by the draw through the
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
        let records: Vec<CulledInstance> = layout.order.iter().map(|&i| data.instances[i as usize]).collect();
        queue.write_buffer(draw_data, 0, bytemuck::cast_slice(&draw_records(&records)));
        let mut index = CellIndex::new(device, culler, capacity)?;
        index.write_bounds(queue, 0, &layout.bounds)?;
        if let Some(settings) = data.cells {
            index.set_min_skipped_bytes(settings.min_skipped_bytes);
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
            let records: Vec<CulledInstance> = self.layout.order[run.start as usize..run.end as usize]
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
                run.start as u64 * size_of::<CulledInstance>() as u64,
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

/// Counts render-world frames, to date the counts read back.
#[derive(Resource, Default)]
pub(crate) struct RenderFrame(pub u64);

pub(crate) fn count_frame(mut frame: ResMut<RenderFrame>) {
    frame.0 += 1;
}

/// The kernels the cull targets use, as (views, visibility test): written
/// by the targets stage each frame, read by [`prepare_culler`] in the next
/// to compile a new culler's kernels before it takes over.
#[derive(Resource, Default)]
pub(crate) struct KernelDemand(pub Vec<(u32, VisibilityTest)>);

/// Instances a batch's buffers hold: room to grow without reallocating.
pub(crate) fn batch_capacity(len: usize) -> u32 {
    (len as u32).max(1).next_power_of_two()
}

/// Follows the settings: new settings get a [`PendingCuller`] whose kernels
/// (one per output-window count the batches need) Bevy's `PipelineCache`
/// compiles; it replaces the current culler once they are all ready. Kernels
/// that finished compiling are handed to their cullers.
pub(crate) fn prepare_culler(world: &mut World) {
    let Some(settings) = world.get_resource::<GpuCullSettings>().cloned() else {
        return;
    };
    let wanted = match (
        world.get_resource::<PendingCuller>(),
        world.get_resource::<RenderCuller>(),
    ) {
        (Some(pending), _) => Some(&pending.0.settings),
        (None, Some(current)) => Some(&current.inner.settings),
        (None, None) => None,
    };
    let failed_before = world
        .get_resource::<FailedSettings>()
        .is_some_and(|f| f.0 == settings);
    if wanted != Some(&settings) && !failed_before {
        world.remove_resource::<FailedSettings>();
        world.remove_resource::<PendingCuller>();
        let back_to_current = world
            .get_resource::<RenderCuller>()
            .is_some_and(|c| c.inner.settings == settings);
        if !back_to_current {
            let desc = CullerDesc {
                variant: settings.variant,
                allow_fallback: true,
                format: settings.format,
                output: OutputKind::Indices,
                timestamps: true,
                // A camera and its cascades in one pass.
                max_views: MAX_VIEWS,
                ..Default::default()
            };
            let device = world.resource::<RenderDevice>().wgpu_device().clone();
            let culler = Culler::deferred(&device, world.resource::<RenderQueue>(), &desc);
            match culler {
                Ok(culler) => world.insert_resource(PendingCuller(CompilingCuller {
                    culler,
                    settings: settings.clone(),
                    queued: HashMap::default(),
                    given_up: Default::default(),
                    failed: false,
                    ready: Vec::new(),
                })),
                Err(e) => error!("GPU culling disabled: {e}"),
            }
        }
    }
    let lens: Vec<usize> = world
        .query::<&BatchData>()
        .iter(world)
        .map(|b| b.instances.len())
        .collect();
    // The view groups' sizes in use: a new culler compiles their kernels
    // before it takes over.
    // The kernels the current targets use: (views, visibility test).
    let mut view_counts: Vec<(u32, VisibilityTest)> = world
        .get_resource::<KernelDemand>()
        .map(|d| d.0.clone())
        .unwrap_or_default();
    view_counts.push((1, VisibilityTest::Frustum));
    view_counts.sort_unstable_by_key(|&(views, test)| (views, test as u8));
    view_counts.dedup();
    world.resource_scope(|world, cache: Mut<PipelineCache>| {
        world.resource_scope(|world, mut shaders: Mut<CullShaders>| {
            if let Some(mut current) = world.get_resource_mut::<RenderCuller>() {
                current.inner.poll(&cache);
            }
            if let Some(mut pending) = world.get_resource_mut::<PendingCuller>() {
                let pending = &mut pending.0;
                pending.request(
                    KernelSpec::flat(1, 1, VisibilityTest::Frustum),
                    &cache,
                    &mut shaders,
                );
                for &len in &lens {
                    for &(views, test) in &view_counts {
                        if let Ok(windows) = pending.culler.windows_for_views(batch_capacity(len), views) {
                            pending.request(KernelSpec::flat(windows, views, test), &cache, &mut shaders);
                        }
                    }
                }
                pending.poll(&cache);
            }
        });
    });
    // What became ready, for GpuCullStats::kernels.
    let mut ready = Vec::new();
    if let Some(mut current) = world.get_resource_mut::<RenderCuller>() {
        let variant = current.inner.culler.variant();
        ready.extend(current.inner.ready.drain(..).map(|spec| (variant, spec)));
    }
    if let Some(mut pending) = world.get_resource_mut::<PendingCuller>() {
        let variant = pending.0.culler.variant();
        ready.extend(pending.0.ready.drain(..).map(|spec| (variant, spec)));
    }
    if let Some(sender) = world.get_resource::<StatSender>()
        && let Ok(sender) = sender.0.lock()
    {
        for (variant, spec) in ready {
            let _ = sender.send(StatMessage::KernelReady(variant, spec));
        }
    }
    if world
        .get_resource::<PendingCuller>()
        .is_some_and(|p| p.0.queued.is_empty())
    {
        let PendingCuller(inner) = world.remove_resource().expect("checked above");
        info!(
            "GPU culling with {:?}, {:?} instances",
            inner.culler.variant(),
            inner.culler.format()
        );
        world.insert_resource(RenderCuller {
            inner,
            generation: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        });
    }
}

/// The records the draw reads: rotations normalized, as the cull's input is
/// (`InstanceFormat::encode`), so cull and draw apply the same rotation
/// whatever the quaternion's length. One that cannot be normalized is left
/// as it is: the cull drops that instance.
fn draw_records(slice: &[CulledInstance]) -> Vec<CulledInstance> {
    slice
        .iter()
        .map(|i| {
            let unit = i.cull_instance(InstanceFormat::PosQuat).normalized().rotation;
            let rotation = if unit.is_finite() { unit } else { i.rotation };
            CulledInstance { rotation, ..*i }
        })
        .collect()
}

/// After a device loss (and at start-up): buffers of the old device are
/// dropped, and every batch is uploaded again from its render-world copy.
pub(crate) fn forget_gpu_batches(
    mut commands: Commands,
    batches: Query<Entity, With<GpuBatch>>,
    shaders: Option<ResMut<CullShaders>>,
) {
    // Pipeline ids of the old device's cache mean nothing to the new one.
    if let Some(mut shaders) = shaders {
        shaders.kernels.clear();
    }
    commands.remove_resource::<RenderCuller>();
    commands.remove_resource::<PendingCuller>();
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
    mut batches: Query<(Entity, &mut BatchData, Option<&mut GpuBatch>)>,
    removed: Query<Entity, (With<GpuBatch>, Without<BatchData>)>,
) {
    // Batches whose component went (extraction removed their copy).
    for entity in &removed {
        commands.entity(entity).remove::<GpuBatch>();
    }
    let Some(culler) = culler else {
        return;
    };
    let device = device.wgpu_device();
    let format = culler.culler().format();
    let mut uploaded = 0u64;
    for (entity, mut data, gpu) in &mut batches {
        let data = data.as_mut();
        let count = data.instances.len() as u32;
        // A batch sorted into cells is sorted again when its list is
        // replaced or resized.
        let want_cells = data.cells.is_some();
        let reusable = gpu.as_ref().is_some_and(|g| {
            g.capacity >= count
                && g.culler_generation == culler.generation
                && g.cells.is_some() == want_cells
                && (!want_cells || (g.count == count && !data.upload_all))
        });
        if let (true, Some(mut gpu)) = (reusable, gpu) {
            let gpu = gpu.as_mut();
            if let Some(cells) = gpu.cells.as_mut() {
                if let Some(settings) = data.cells {
                    cells.index.set_min_skipped_bytes(settings.min_skipped_bytes);
                }
                // The edited instances where they sit in cell order, their
                // cells grown to cover them; new bounds (the mesh's, or the
                // scales a format without scale covers) refit them all. On
                // an error the batch is sorted and uploaded again next frame.
                let pending = std::mem::take(&mut data.uploads);
                let edited = pending.ranges().iter().flat_map(|r| r.clone());
                let mut written = cells.edit(&queue, format, data, &gpu.input, &gpu.draw_data, edited);
                if let Ok(n) = written {
                    uploaded += n;
                    if cells.bounds != data.cull_bounds(format) {
                        written = cells.refit(&queue, format, data, None).map(|()| n);
                    }
                }
                if let Err(e) = written {
                    error!("GPU culling: {e}; the batch is uploaded again");
                    data.upload_all = true;
                }
                continue;
            }
            let pending = std::mem::take(&mut data.uploads);
            let ranges: Vec<Range<u32>> = if data.upload_all {
                std::iter::once(0..count).collect()
            } else {
                pending.ranges().to_vec()
            };
            data.upload_all = false;
            for range in ranges {
                let slice = &data.instances[range.start as usize..range.end as usize];
                let encoded: Vec<Instance> = slice.iter().map(|i| i.cull_instance(format)).collect();
                if let Err(e) = gpu.input.write_instances(&queue, range.start, &encoded) {
                    error!("GPU culling: {e}");
                    continue;
                }
                queue.write_buffer(
                    &gpu.draw_data,
                    range.start as u64 * size_of::<CulledInstance>() as u64,
                    bytemuck::cast_slice(&draw_records(slice)),
                );
                uploaded += slice.len() as u64;
            }
            if gpu.count != count {
                gpu.count = count;
            }
            continue;
        }
        // New buffers: the whole list goes up.
        let capacity = batch_capacity(data.instances.len());
        let input = match CullInput::new(device, format, capacity) {
            Ok(input) => input,
            Err(e) => {
                error!("GPU culling: {e}");
                continue;
            }
        };
        let draw_data = device.create_buffer(&wgpu::BufferDescriptor {
            label: Some("gpu_cull_draw_data"),
            size: capacity as u64 * size_of::<CulledInstance>() as u64,
            usage: wgpu::BufferUsages::STORAGE | wgpu::BufferUsages::COPY_DST,
            mapped_at_creation: false,
        });
        let cells = if want_cells {
            match BatchCells::upload(
                device,
                &queue,
                culler.culler(),
                capacity,
                data,
                &input,
                &draw_data,
            ) {
                Ok(cells) => Some(cells),
                Err(e) => {
                    error!("GPU culling: {e}");
                    continue;
                }
            }
        } else {
            let encoded: Vec<Instance> = data.instances.iter().map(|i| i.cull_instance(format)).collect();
            if let Err(e) = input.write_instances(&queue, 0, &encoded) {
                error!("GPU culling: {e}");
                continue;
            }
            queue.write_buffer(
                &draw_data,
                0,
                bytemuck::cast_slice(&draw_records(&data.instances)),
            );
            None
        };
        uploaded += count as u64;
        data.upload_all = false;
        data.uploads.clear();
        commands.entity(entity).insert(GpuBatch {
            input,
            draw_data,
            count,
            capacity,
            culler_generation: culler.generation,
            buffers_id: NEXT_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
            cells,
        });
    }
    if uploaded > 0 {
        let _ = sender
            .0
            .lock()
            .map(|s| s.send(StatMessage::Uploaded { instances: uploaded }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cullers that differ in nothing but their tuning compile different
    /// kernels for one shape: the key under which Bevy's pipeline cache
    /// keeps a kernel's pipelines tells them apart, and two cullers of the
    /// same settings share them.
    #[test]
    fn kernel_keys_follow_the_tuning() {
        let instance = wgpu::Instance::new(wgpu::InstanceDescriptor {
            backends: wgpu::Backends::VULKAN,
            ..wgpu::InstanceDescriptor::new_without_display_handle()
        });
        let adapter =
            bevy::tasks::block_on(instance.request_adapter(&wgpu::RequestAdapterOptions::default()))
                .expect("no Vulkan adapter: install Mesa's lavapipe (scripts/install-deps.sh)");
        assert!(
            adapter.features().contains(wgpu::Features::SUBGROUP),
            "the adapter has no subgroups: run on Mesa's lavapipe (scripts/install-deps.sh)"
        );
        let (device, queue) = bevy::tasks::block_on(adapter.request_device(&wgpu::DeviceDescriptor {
            required_features: wgpu::Features::SUBGROUP,
            ..Default::default()
        }))
        .expect("a device on the adapter");
        // The plugin's default variant, whose staging is a tuning of its own.
        let key = |tuning: cull_core::Tuning| {
            let desc = cull_core::CullerDesc {
                variant: Some(cull_core::ScanVariant::SubgroupBallot),
                allow_fallback: false,
                output: OutputKind::Indices,
                tuning,
                ..Default::default()
            };
            let culler = Culler::deferred(&device, &queue, &desc).expect("a SubgroupBallot culler");
            KernelKey::of(&culler.recipe_of(KernelSpec::flat(1, 1, VisibilityTest::Frustum)))
        };
        let default = key(cull_core::Tuning::default());
        assert_eq!(key(cull_core::Tuning::default()), default);
        let narrow = cull_core::Tuning {
            workgroup_size: Some(64),
            ..Default::default()
        };
        assert_ne!(key(narrow), default, "the workgroup size is compiled in");
        let unstaged = cull_core::Tuning {
            staged_indices: Some(false),
            ..Default::default()
        };
        assert_ne!(key(unstaged), default, "staging is compiled in");
    }
}
