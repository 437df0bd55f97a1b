//! GPU resources: the culler (rebuilt when the settings change), each batch's
//! buffers (rewritten only when its list changed), a cull target per (view
//! group, batch), and per (view, batch) its draw bind group. A view group is
//! culled in one pass: a camera with its directional cascades (up to
//! `MAX_VIEWS` views a group), a point light's six faces, or a spot light's
//! view alone.

use super::bindings::{self, InstanceBindings};
use super::extract::BatchData;
use super::material::GpuMaterial;
use super::standard::TEXTURES;
use crate::components::CulledInstance;
use crate::plugin::{GpuCullSettings, ShadowViewId, StatMessage, StatSender};
use bevy::camera::visibility::RenderLayers;
use bevy::pbr::RenderMeshInstances;
use bevy::pbr::{LightEntity, RenderMeshInstanceFlags, ViewLightEntities};
use bevy::platform::collections::HashMap;
use bevy::prelude::*;
use bevy::render::mesh::allocator::MeshAllocator;
use bevy::render::mesh::{RenderMesh, RenderMeshBufferInfo};
use bevy::render::render_asset::RenderAssets;
use bevy::render::render_resource::{
    BindGroup, BindGroupEntries, BindGroupLayout, BindGroupLayoutDescriptor, Buffer, CachedComputePipelineId,
    CachedPipelineState, ComputePipelineDescriptor, PipelineCache,
};
use bevy::render::renderer::{RenderDevice, RenderQueue};
use bevy::render::sync_world::MainEntity;
use bevy::render::texture::{FallbackImage, GpuImage};
use bevy::render::view::ExtractedView;
use bevy::shader::ShaderCacheError;
use bevy::shader::{Shader, ShaderDefVal};
use cull_core::{
    AsyncReadback, CellIndex, CellLayout, CullInput, CullTarget, Culler, CullerDesc, Instance,
    InstanceFormat, KernelSpec, MAX_VIEWS, OcclusionHistory, OutputKind, Sphere, VisibilityTest,
};
use std::ops::Range;
use std::sync::Arc;

use std::sync::atomic::{AtomicU32, AtomicU64};

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

/// The kernels a group's cull votes with: the occlusion phases for an
/// occluded camera; for a camera alone with levels of detail, the kernel
/// that tests its frustum once for all levels (what `Culler::cull_views`
/// picks for such views, `VisibilityTest::for_views`); else the frustum
/// test's.
fn group_tests(occluded: bool, group_views: u32, levels: u32) -> &'static [VisibilityTest] {
    if occluded {
        &[VisibilityTest::OcclusionEarly, VisibilityTest::OcclusionLate]
    } else if group_views == 1 && levels > 1 {
        &[VisibilityTest::DetailLevels]
    } else {
        &[VisibilityTest::Frustum]
    }
}

/// One view group's cull of one batch: a target with a list of survivors
/// and draw arguments per view of the group.
pub(crate) struct GroupTarget {
    pub target: Arc<CullTarget>,
    /// `target.draw_args()` as a Bevy buffer, for the render pass.
    pub draw_args: Buffer,
    pub views: u32,
    pub capacity: u32,
    pub culler_generation: u64,
    /// The draw arguments last written to `target` (all but the counts),
    /// one per level of detail.
    written_args: Option<Vec<DrawArgs>>,
    /// The levels of detail each view is culled into: their smallest
    /// screen sizes (empty: one list per view, no levels).
    pub lod: Vec<f32>,
    /// Whose stats its GPU time goes to: the group's first view's.
    pub main_view: Entity,
    pub main_batch: Entity,
    pub shadow: Option<ShadowViewId>,
    /// An occlusion-culled camera's group: `target` takes the early phase's
    /// lists, this the late phase's.
    pub occlusion: Option<GroupOcclusion>,
    live: bool,
}

/// What an occlusion-culled camera's group adds: the late phase's target
/// and the history both phases read.
pub(crate) struct GroupOcclusion {
    pub late: Arc<CullTarget>,
    /// `late.draw_args()` as a Bevy buffer.
    pub late_draw_args: Buffer,
    /// Locked by the early cull (read) and the late cull (written).
    pub history: std::sync::Mutex<OcclusionHistory>,
    /// Whether this frame's early phase picked the batch's cells (same
    /// views, same pick): the late phase culls by them too where its
    /// kernel is ready, without counting the cells again.
    pub by_cells: std::sync::atomic::AtomicBool,
}

/// A view's lists from the late phase of occlusion culling, drawn in the
/// late prepass and the main pass.
pub(crate) struct LateLists {
    pub target: Arc<CullTarget>,
    pub draw_args: Buffer,
    /// One per level of detail, as [`ViewTarget::bind_groups`].
    pub bind_groups: Vec<BindGroup>,
    /// The late phase's visible counts on their way to the CPU.
    pub counts: AsyncReadback,
    /// The latest late counts read back, per level; empty until one arrives.
    pub last_counts: std::sync::Mutex<Vec<u32>>,
}

/// One view's part of its group's cull of one batch.
pub(crate) struct ViewTarget {
    /// The group's target, shared by the group's views.
    pub target: Arc<CullTarget>,
    /// This view's first place in the group's target; its levels of detail
    /// follow it (`slot + k`).
    pub slot: u32,
    /// The mesh of each level of detail (the batch's `Mesh3d` alone without
    /// levels), drawn from its own list in `target`.
    pub meshes: Vec<AssetId<Mesh>>,
    /// The levels' smallest screen sizes (empty without levels), as culled.
    pub lod: Vec<f32>,
    /// `target.draw_args()` as a Bevy buffer, for the render pass.
    pub draw_args: Buffer,
    /// One per level of detail: the level's survivors.
    pub bind_groups: Vec<BindGroup>,
    /// What `bind_group` binds: the batch's buffers ([`GpuBatch::buffers_id`])
    /// and its material's textures, when ready.
    /// and whether its levels are the batch's levels of detail.
    bound: (u64, [Option<AssetId<Image>>; TEXTURES], bool),
    /// The visible count on its way to the CPU, tagged with its render frame.
    pub counts: AsyncReadback,
    /// The latest visible count read back; `u32::MAX` until one arrives.
    pub last_count: AtomicU32,
    pub main_view: Entity,
    pub main_batch: Entity,
    /// The light view it is, for a shadow map's target.
    pub shadow: Option<ShadowViewId>,
    /// The late phase's lists, for an occlusion-culled camera.
    pub late: Option<LateLists>,
    live: bool,
}

impl ViewTarget {
    /// Whether the latest count read back is above zero.
    pub fn has_instances(&self) -> bool {
        let count = self.last_count.load(std::sync::atomic::Ordering::Relaxed);
        count != 0 && count != u32::MAX
    }

    /// Byte offset of this view's (first level's) draw arguments in
    /// `draw_args`.
    pub fn draw_args_offset(&self) -> u64 {
        self.target.draw_args_offset(self.slot)
    }

    /// Levels of detail (1 without any).
    pub fn levels(&self) -> u32 {
        self.meshes.len() as u32
    }

    /// Bytes of `draw_args` from the first level's instance count to the
    /// last's end: what the count readback copies.
    pub fn counts_len(&self) -> u64 {
        counts_len(self.levels())
    }
}

/// The mesh's part of a target's draw arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum DrawArgs {
    Indexed {
        index_count: u32,
        first_index: u32,
        base_vertex: i32,
    },
    NonIndexed {
        vertex_count: u32,
        first_vertex: u32,
    },
}

/// Bytes from the first of `levels` consecutive views' instance counts to
/// the end of the last's.
pub(crate) fn counts_len(levels: u32) -> u64 {
    (levels as u64 - 1) * cull_core::DRAW_ARGS_SIZE + 4
}

/// The draw arguments of a mesh in Bevy's shared buffers.
fn mesh_draw_args(mesh: &RenderMesh, id: &AssetId<Mesh>, allocator: &MeshAllocator) -> Option<DrawArgs> {
    let vertices = allocator.mesh_vertex_slice(id)?;
    Some(match &mesh.buffer_info {
        RenderMeshBufferInfo::Indexed { count, .. } => DrawArgs::Indexed {
            index_count: *count,
            first_index: allocator.mesh_index_slice(id)?.range.start,
            base_vertex: vertices.range.start as i32,
        },
        RenderMeshBufferInfo::NonIndexed => DrawArgs::NonIndexed {
            vertex_count: mesh.vertex_count,
            first_vertex: vertices.range.start,
        },
    })
}

/// Counts render-world frames, to date the counts read back.
#[derive(Resource, Default)]
pub(crate) struct RenderFrame(pub u64);

pub(crate) fn count_frame(mut frame: ResMut<RenderFrame>) {
    frame.0 += 1;
}

/// Cull targets by (view, batch) render-world entities, and the targets of
/// their groups by (group, batch): a group is named by its first view.
#[derive(Resource, Default)]
pub(crate) struct ViewTargets {
    pub map: HashMap<(Entity, Entity), ViewTarget>,
    pub groups: HashMap<(Entity, Entity), GroupTarget>,
}

/// The views culled together in one pass: a camera, then the cascades of
/// the directional lights it draws shadows for (culled in its run), cut
/// into groups of at most `MAX_VIEWS`. An occlusion-culled camera is a group
/// of its own (an occlusion cull's views are one camera's), its cascades
/// the next. [`prepare_targets`] and the cull both take the groups from
/// here, so their slots agree.
pub(crate) fn camera_groups(
    camera: Entity,
    lights: Option<&ViewLightEntities>,
    is_cascade: impl Fn(Entity) -> bool,
    occluded: bool,
) -> Vec<Vec<Entity>> {
    let cascades = lights
        .into_iter()
        .flat_map(|l| l.lights.iter().copied())
        .filter(|&light_view| is_cascade(light_view));
    if occluded {
        let cascades: Vec<Entity> = cascades.collect();
        return std::iter::once(vec![camera])
            .chain(cascades.chunks(MAX_VIEWS as usize).map(<[Entity]>::to_vec))
            .collect();
    }
    let views: Vec<Entity> = std::iter::once(camera).chain(cascades).collect();
    views.chunks(MAX_VIEWS as usize).map(<[Entity]>::to_vec).collect()
}

/// What decides whether a camera view is occlusion-culled, as the render
/// world has it.
pub(crate) type OcclusionQueryData = (
    Has<crate::components::GpuCullOcclusion>,
    Has<bevy::core_pipeline::prepass::DepthPrepass>,
    Has<bevy::render::occlusion_culling::OcclusionCulling>,
    Option<&'static bevy::render::camera::ExtractedCamera>,
    (
        Option<&'static bevy::render::camera::TemporalJitter>,
        Has<bevy::render::view::NoIndirectDrawing>,
        Has<bevy::camera::MainPassResolutionOverride>,
        Option<&'static ExtractedView>,
    ),
);

/// Whether a camera with these components is occlusion-culled: it asks for
/// it ([`crate::GpuCullOcclusion`]) and has what it needs, Bevy's early and
/// late prepasses (`DepthPrepass` and `OcclusionCulling`, without
/// `NoIndirectDrawing`), no custom viewport or resolution override, and
/// temporal jitter (TAA) only on a perspective projection, where it moves
/// everything drawn by the same offset ([`occlusion_jitter`]). A camera
/// that asks without them is warned about once. MSAA needs nothing: the
/// pyramid takes each pixel's farthest sample (`cull_core::PyramidBuilder`).
/// On a device that cannot build depth pyramids (wgpu's GL backend) no
/// camera is: [`crate::GpuCullStats::occlusion_unavailable`] says why, and
/// a warning was logged when the plugin started.
pub(crate) fn occlusion_culled(
    (asks, depth_prepass, occlusion_culling, camera, (jitter, no_indirect, resolution_override, view)): bevy::ecs::query::QueryItem<
        '_,
        '_,
        OcclusionQueryData,
    >,
    pyramids: &crate::render::cull::Pyramids,
) -> bool {
    if !asks || !pyramids.available() {
        return false;
    }
    if !(depth_prepass && occlusion_culling) || no_indirect {
        warn_once!(
            "bevy-gpu-cull: GpuCullOcclusion needs Bevy's DepthPrepass and OcclusionCulling on the camera \
             (and no NoIndirectDrawing); its batches are frustum-culled only"
        );
        return false;
    }
    // Bevy's jitter (TemporalJitter::jitter_projection) moves what a
    // projection whose w is the view depth (every perspective one) draws by
    // the offset, in pixels, at every depth: the late phase widens its
    // rectangles by that. Another projection's shift scales with its w row,
    // an orthographic one's with the view depth: no margin bounds them.
    if let Some(jitter) = jitter {
        let w_is_depth = view.is_some_and(|v| v.clip_from_view.row(3) == Vec4::new(0.0, 0.0, -1.0, 0.0));
        if !(w_is_depth && jitter.offset.is_finite()) {
            warn_once!(
                "bevy-gpu-cull: occlusion culling with TemporalJitter (TAA) needs a perspective projection \
                 and a finite offset; the camera's batches are frustum-culled only"
            );
            return false;
        }
    }
    if camera.is_some_and(|c| c.viewport.is_some()) || resolution_override {
        warn_once!(
            "bevy-gpu-cull: occlusion culling of a camera with a custom viewport or resolution override \
             is not supported; its batches are frustum-culled only"
        );
        return false;
    }
    true
}

/// How far, in pixels, a camera's temporal jitter moves what it draws from
/// its unjittered projection (the one the late phase tests with): the
/// offset's larger component, which Bevy adds to a perspective projection
/// as the same shift at every depth (`TemporalJitter::jitter_projection`).
pub(crate) fn occlusion_jitter(jitter: Option<&bevy::render::camera::TemporalJitter>) -> f32 {
    jitter.map_or(0.0, |j| j.offset.abs().max_element())
}

/// A point light's cube faces, culled together in one pass: the light's
/// face views among `views`, in face order.
pub(crate) fn point_light_faces<'a>(
    light: Entity,
    views: impl Iterator<Item = (Entity, &'a LightEntity)>,
) -> Vec<Entity> {
    let mut faces: Vec<(usize, Entity)> = views
        .filter_map(|(view, l)| match l {
            LightEntity::Point {
                light_entity,
                face_index,
            } if *light_entity == light => Some((*face_index, view)),
            _ => None,
        })
        .collect();
    faces.sort_unstable_by_key(|&(face, _)| face);
    faces
        .into_iter()
        .map(|(_, view)| view)
        .take(MAX_VIEWS as usize)
        .collect()
}

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
        .get_resource::<ViewTargets>()
        .map(|t| {
            t.groups
                .values()
                .flat_map(|g| {
                    let levels = (g.lod.len() as u32).max(1);
                    group_tests(g.occlusion.is_some(), g.views / levels, levels)
                        .iter()
                        .map(move |&test| (g.views, test))
                })
                .collect()
        })
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

/// The material textures a batch's draw binds: the prepared images, and
/// Bevy's fallback for those not loaded yet. Grouped, like [`BatchMeshes`],
/// so that [`prepare_targets`] stays under Bevy's limit of sixteen system
/// parameters.
#[derive(bevy::ecs::system::SystemParam)]
pub(crate) struct MaterialTextures<'w> {
    images: Res<'w, RenderAssets<GpuImage>>,
    fallback: Res<'w, FallbackImage>,
}

/// Where a batch's meshes are: Bevy's render-world entry for the batch
/// entity, the prepared meshes of its levels, and their places in the mesh
/// allocator's buffers.
#[derive(bevy::ecs::system::SystemParam)]
pub(crate) struct BatchMeshes<'w> {
    mesh_instances: Res<'w, RenderMeshInstances>,
    meshes: Res<'w, RenderAssets<RenderMesh>>,
    allocator: Res<'w, MeshAllocator>,
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn prepare_targets(
    device: Res<RenderDevice>,
    queue: Res<RenderQueue>,
    culler: Option<ResMut<RenderCuller>>,
    mut shaders: ResMut<CullShaders>,
    mut targets: ResMut<ViewTargets>,
    views: Query<(
        Entity,
        &ExtractedView,
        Option<&MainEntity>,
        Option<&RenderLayers>,
        Option<&ViewLightEntities>,
        Option<&LightEntity>,
        OcclusionQueryData,
    )>,
    batches: Query<(Entity, &MainEntity, &GpuBatch, &BatchData, Option<&GpuMaterial>)>,
    textures: MaterialTextures,
    batch_meshes: BatchMeshes,
    bindings: Res<InstanceBindings>,
    pipeline_cache: Res<PipelineCache>,
    sender: Res<StatSender>,
    pyramids: Res<crate::render::cull::Pyramids>,
) {
    let MaterialTextures { images, fallback } = textures;
    let BatchMeshes {
        mesh_instances,
        meshes,
        allocator,
    } = batch_meshes;
    let Some(mut culler) = culler else {
        return;
    };
    let targets = &mut *targets;
    for target in targets.map.values_mut() {
        target.live = false;
    }
    for group in targets.groups.values_mut() {
        group.live = false;
    }
    // Each view's group (its first view), its slot there and the group's size.
    let mut grouping: HashMap<Entity, (Entity, u32, u32)> = HashMap::default();
    let is_cascade = |e| {
        matches!(
            views.get(e),
            Ok((_, _, _, _, _, Some(LightEntity::Directional { .. }), _))
        )
    };
    let light_views = || views.iter().filter_map(|(e, _, _, _, _, l, _)| l.map(|l| (e, l)));
    for (view, _, main_view, _, lights, light, occlusion) in &views {
        let groups = match light {
            None if main_view.is_some() => {
                camera_groups(view, lights, is_cascade, occlusion_culled(occlusion, &pyramids))
            }
            Some(LightEntity::Point { light_entity, .. }) if !grouping.contains_key(&view) => {
                vec![point_light_faces(*light_entity, light_views())]
            }
            _ => continue,
        };
        for group in groups {
            for (slot, &member) in group.iter().enumerate() {
                grouping.insert(member, (group[0], slot as u32, group.len() as u32));
            }
        }
    }
    for (view, extracted, main_view, view_layers, _, light, occlusion) in &views {
        // A camera culled in two phases: its lists in an early and a late
        // target (it is a group of its own).
        let occluded = light.is_none() && main_view.is_some() && occlusion_culled(occlusion, &pyramids);
        // A camera (it has a main-world entity) or a light's shadow view.
        let (main_view, shadow) = match (main_view, light.is_some()) {
            (_, true) => {
                let rve = extracted.retained_view_entity;
                let camera = rve.auxiliary_entity.id();
                let id = ShadowViewId {
                    light: rve.main_entity.id(),
                    camera: (camera != Entity::PLACEHOLDER).then_some(camera),
                    index: rve.subview_index,
                };
                (id.light, Some(id))
            }
            (Some(main_view), false) => (main_view.id(), None),
            (None, false) => continue,
        };
        // A cascade no camera took in is culled on its own, as is a spot
        // light's view.
        let (group, slot, group_views) = grouping.get(&view).copied().unwrap_or((view, 0, 1));
        let default_layers = RenderLayers::default();
        let view_layers = view_layers.unwrap_or(&default_layers);
        for (batch_entity, main_batch, gpu, batch, material) in &batches {
            let Some(mesh_instance) = mesh_instances.render_mesh_queue_data(*main_batch) else {
                continue;
            };
            // As Bevy does for its meshes: a view sees a visible batch whose
            // render layers it shares, and a light draws only shadow casters.
            if !batch.visible || !view_layers.intersects(&batch.render_layers) {
                continue;
            }
            if shadow.is_some()
                && !mesh_instance
                    .flags()
                    .contains(RenderMeshInstanceFlags::SHADOW_CASTER)
            {
                continue;
            }
            let mesh_id = mesh_instance.mesh_asset_id();
            let Some(mesh) = meshes.get(mesh_id) else {
                continue;
            };
            // The mesh of each level of detail and where it lies in Bevy's
            // buffers. Until every level's mesh is ready the batch is not
            // drawn, as Bevy's meshes wait for theirs; a level whose vertex
            // layout differs from the Mesh3d's cannot use its pipeline, and
            // the batch is drawn without levels.
            let mut lod: Vec<f32> = batch.lod.iter().map(|(_, size)| *size).collect();
            let mut level_meshes: Vec<AssetId<Mesh>> = batch.lod.iter().map(|(id, _)| *id).collect();
            if level_meshes.iter().any(|id| meshes.get(*id).is_none()) {
                continue;
            }
            if level_meshes
                .iter()
                .any(|id| meshes.get(*id).is_some_and(|m| m.layout != mesh.layout))
            {
                error_once!(
                    "bevy-gpu-cull: a GpuCullLod mesh has other vertex attributes than the batch's Mesh3d; \
                     the batch is drawn without levels of detail"
                );
                lod.clear();
                level_meshes.clear();
            }
            if level_meshes.is_empty() {
                level_meshes.push(mesh_id);
            }
            let Some(mut args) = level_meshes
                .iter()
                .map(|id| mesh_draw_args(meshes.get(*id)?, id, &allocator))
                .collect::<Option<Vec<DrawArgs>>>()
            else {
                continue;
            };
            let levels = level_meshes.len() as u32;
            // The group's target, shared by its views, each with a list per
            // level. A batch whose lists for every view of the group would
            // not fit (more than MAX_VIEWS lists, or more than the output
            // windows hold) is culled view by view instead.
            let fits = |views: u32| {
                views <= MAX_VIEWS && culler.culler().windows_for_views(gpu.capacity, views).is_ok()
            };
            let (group, slot, group_views) = if group_views > 1 && !fits(group_views * levels) {
                (view, 0, 1)
            } else {
                (group, slot, group_views)
            };
            // A batch too large for even one view's levels is drawn without
            // levels.
            let levels = if levels > 1 && !fits(group_views * levels) {
                error_once!(
                    "bevy-gpu-cull: a batch is too large for a list per level of detail; it is drawn without levels"
                );
                lod.clear();
                level_meshes = vec![mesh_id];
                args.truncate(0);
                match mesh_draw_args(mesh, &mesh_id, &allocator) {
                    Some(a) => args.push(a),
                    None => continue,
                }
                1
            } else {
                levels
            };
            let (slot, target_views) = (slot * levels, group_views * levels);
            let group_key = (group, batch_entity);
            // A batch sorted into cells is culled flat until its group's
            // kernels that cull by cells have compiled.
            if gpu.cells.is_some()
                && let Ok(windows) = culler.culler().windows_for_views(gpu.capacity, target_views)
            {
                for &test in group_tests(occluded, group_views, levels) {
                    culler.inner.request(
                        KernelSpec::cells(windows, target_views, test),
                        &pipeline_cache,
                        &mut shaders,
                    );
                }
            }
            // Faster forms of the group's kernels, each culled with once
            // Bevy has compiled it and with the general kernel until then
            // (both keep the same instances; cull-core picks): for a mesh
            // centred on its origin (most meshes), the form that leaves the
            // rotation of its center out (KernelSpec::centred); for plain
            // views (Bevy's perspective cameras and lights' views, without
            // a level's band), the form without a sixth plane or a band
            // (KernelSpec::plain_views); and both together.
            request_faster_forms(
                &mut culler,
                batch,
                gpu,
                (occluded, group_views, levels),
                &pipeline_cache,
                &mut shaders,
            );
            let stale = targets.groups.get(&group_key).is_none_or(|g| {
                g.capacity < gpu.capacity
                    || g.culler_generation != culler.generation
                    || g.views != target_views
                    || g.lod != lod
                    || g.occlusion.is_some() != occluded
            });
            if stale {
                // A batch past one storage binding needs a kernel with more
                // output windows, an occluded camera the occlusion phases':
                // until Bevy has compiled them, the batch is not drawn (as
                // Bevy does with a mesh whose pipeline is not ready).
                let tests = group_tests(occluded, group_views, levels);
                if let Ok(windows) = culler.culler().windows_for_views(gpu.capacity, target_views) {
                    let mut ready = true;
                    for &test in tests {
                        if !culler.culler().has_pipelines_for(windows, target_views, test) {
                            culler.inner.request(
                                KernelSpec::flat(windows, target_views, test),
                                &pipeline_cache,
                                &mut shaders,
                            );
                            ready = false;
                        }
                    }
                    if !ready {
                        continue;
                    }
                }
                let new_target = || {
                    CullTarget::with_views(device.wgpu_device(), culler.culler(), gpu.capacity, target_views)
                        .map_err(|e| error!("GPU culling: {e}"))
                        .ok()
                };
                let Some(target) = new_target() else {
                    continue;
                };
                let occlusion = if occluded {
                    let history = OcclusionHistory::new(device.wgpu_device(), gpu.capacity)
                        .map_err(|e| error!("GPU culling: {e}"))
                        .ok();
                    let (Some(late), Some(history)) = (new_target(), history) else {
                        continue;
                    };
                    Some(GroupOcclusion {
                        late_draw_args: Buffer::from(late.draw_args().clone()),
                        late: Arc::new(late),
                        history: std::sync::Mutex::new(history),
                        by_cells: Default::default(),
                    })
                } else {
                    None
                };
                let draw_args = Buffer::from(target.draw_args().clone());
                targets.groups.insert(
                    group_key,
                    GroupTarget {
                        target: Arc::new(target),
                        draw_args,
                        views: target_views,
                        capacity: gpu.capacity,
                        culler_generation: culler.generation,
                        written_args: None,
                        lod: lod.clone(),
                        main_view,
                        main_batch: main_batch.id(),
                        shadow,
                        occlusion,
                        live: false,
                    },
                );
            }
            let group_target = targets.groups.get_mut(&group_key).expect("inserted above");
            group_target.live = true;
            // Each level's mesh's place in Bevy's shared vertex and index
            // buffers, written only when it changes (a new target, a mesh
            // that moved in the allocator or was replaced): view slot
            // `v * levels + k` draws level k's mesh.
            if group_target.written_args.as_ref() != Some(&args) {
                write_level_args(&queue, group_target, &args, levels, target_views);
                group_target.written_args = Some(args);
                let _ = sender.0.lock().map(|s| s.send(StatMessage::DrawArgsWritten));
            }
            let shared = group_target.target.clone();
            let draw_args = group_target.draw_args.clone();
            let late_target = group_target
                .occlusion
                .as_ref()
                .map(|o| (o.late.clone(), o.late_draw_args.clone()));
            let key = (view, batch_entity);
            // Levels drawn with the batch's levels' uniforms (binding 19);
            // without levels, or where they fell back, the plain one.
            let uses_levels = !lod.is_empty();
            let fresh = targets.map.get(&key).is_none_or(|t| {
                !Arc::ptr_eq(&t.target, &shared)
                    || t.slot != slot
                    || t.meshes != level_meshes
                    || t.late.as_ref().map(|l| Arc::as_ptr(&l.target))
                        != late_target.as_ref().map(|(l, _)| Arc::as_ptr(l))
            });
            if fresh {
                let counts = AsyncReadback::new(
                    device.wgpu_device(),
                    counts_len(levels),
                    "gpu_cull_count_readback",
                );
                targets.map.insert(
                    key,
                    ViewTarget {
                        target: shared,
                        slot,
                        meshes: level_meshes,
                        lod,
                        draw_args,
                        bind_groups: Vec::new(),
                        bound: (0, [None; TEXTURES], false),
                        counts,
                        last_count: AtomicU32::new(u32::MAX),
                        main_view,
                        main_batch: main_batch.id(),
                        shadow,
                        late: late_target.map(|(target, draw_args)| LateLists {
                            target,
                            draw_args,
                            bind_groups: Vec::new(),
                            counts: AsyncReadback::new(
                                device.wgpu_device(),
                                counts_len(levels),
                                "gpu_cull_late_count_readback",
                            ),
                            last_counts: std::sync::Mutex::new(Vec::new()),
                        }),
                        live: false,
                    },
                );
            }
            let target = targets.map.get_mut(&key).expect("inserted above");
            // The output is this view's list in its group's target; the draw
            // data and the material are the batch's: rebind only when one was
            // replaced or the material's texture became ready.
            let Some(material) = material else {
                continue;
            };
            // Each texture once it is ready, else Bevy's white fallback.
            let ready = batch
                .material
                .textures
                .map(|id| id.and_then(|id| images.get(id).map(|image| (id, image))));
            let [image, normals, metallic_roughness, emissive, occlusion] =
                ready.map(|t| t.map_or(&fallback.d2, |(_, image)| image));
            let bound = (gpu.buffers_id, ready.map(|t| t.map(|(id, _)| id)), uses_levels);
            if fresh || target.bound != bound {
                let layout = pipeline_cache.get_bind_group_layout(&bindings.layout);
                let textures = [image, normals, metallic_roughness, emissive, occlusion];
                let lists_at = (target.slot, target.levels());
                let bind_groups = |lists: &CullTarget| {
                    instance_bind_groups(
                        &device,
                        &layout,
                        lists,
                        lists_at,
                        gpu,
                        material,
                        textures,
                        uses_levels,
                    )
                };
                target.bind_groups = bind_groups(&target.target);
                if let Some(late) = &mut target.late {
                    late.bind_groups = bind_groups(&late.target);
                }
                target.bound = bound;
            }
            target.live = true;
        }
    }
    retire_stale_targets(targets, &sender);
}

/// Writes each level's mesh's place in Bevy's shared vertex and index
/// buffers into every view slot of `group`'s lists (early and late): view
/// slot `v * levels + k` draws level k's mesh.
fn write_level_args(queue: &RenderQueue, group: &GroupTarget, args: &[DrawArgs], levels: u32, views: u32) {
    let late = group.occlusion.as_ref().map(|o| &o.late);
    for (view_slot, target) in
        (0..views).flat_map(|slot| std::iter::once(&group.target).chain(late).map(move |t| (slot, t)))
    {
        match args[(view_slot % levels) as usize] {
            DrawArgs::Indexed {
                index_count,
                first_index,
                base_vertex,
            } => target.set_view_indexed_draw(
                queue,
                view_slot,
                wgpu::util::DrawIndexedIndirectArgs {
                    index_count,
                    first_index,
                    base_vertex,
                    ..Default::default()
                },
            ),
            DrawArgs::NonIndexed {
                vertex_count,
                first_vertex,
            } => target.set_view_draw(
                queue,
                view_slot,
                wgpu::util::DrawIndirectArgs {
                    vertex_count,
                    first_vertex,
                    ..Default::default()
                },
            ),
        }
    }
}

/// The batch's bind groups for a view's lists in `lists` (its early or late
/// target; the view's first list at `slot`), one per level: the level's survivors, the batch's draw records,
/// uniforms and material textures (Bevy's fallback for those not ready).
#[allow(clippy::too_many_arguments)]
fn instance_bind_groups(
    device: &RenderDevice,
    layout: &BindGroupLayout,
    lists: &CullTarget,
    (slot, levels): (u32, u32),
    gpu: &GpuBatch,
    material: &GpuMaterial,
    textures: [&GpuImage; TEXTURES],
    uses_levels: bool,
) -> Vec<BindGroup> {
    let [image, normals, metallic_roughness, emissive, occlusion] = textures;
    (0..levels)
        .map(|level| {
            let survivors = wgpu::BufferBinding {
                buffer: lists.output_buffer(),
                offset: lists.view_output_offset(slot + level),
                size: wgpu::BufferSize::new(lists.capacity() as u64 * lists.output_stride()),
            };
            let level_uniform = material.level_binding(uses_levels.then_some(level));
            device.create_bind_group(
                "gpu_cull_instances",
                layout,
                &BindGroupEntries::with_indices((
                    (bindings::MESH, material.mesh.as_entire_binding()),
                    (bindings::INSTANCES, gpu.draw_data.as_entire_binding()),
                    (bindings::SURVIVORS, wgpu::BindingResource::Buffer(survivors)),
                    (bindings::MATERIAL, material.buffer.as_entire_binding()),
                    (bindings::BASE_COLOR_TEXTURE, &image.texture_view),
                    (bindings::BASE_COLOR_SAMPLER, &image.sampler),
                    (bindings::NORMAL_MAP_TEXTURE, &normals.texture_view),
                    (
                        bindings::METALLIC_ROUGHNESS_TEXTURE,
                        &metallic_roughness.texture_view,
                    ),
                    (bindings::EMISSIVE_TEXTURE, &emissive.texture_view),
                    (bindings::OCCLUSION_TEXTURE, &occlusion.texture_view),
                    (bindings::LEVEL, wgpu::BindingResource::Buffer(level_uniform)),
                )),
            )
        })
        .collect()
}

/// Requests the faster forms of a group's kernels, each culled with once
/// Bevy has compiled it and with the general kernel until then (both keep
/// the same instances; cull-core picks): for a mesh centred on its origin
/// (most meshes), the form that leaves the rotation of its center out
/// (`KernelSpec::centred`); for plain views (Bevy's perspective cameras and
/// lights' views, without a level's band), the form without a sixth plane
/// or a band (`KernelSpec::plain_views`); and both together. `shape`: the
/// group is occluded, its views, the batch's levels.
fn request_faster_forms(
    culler: &mut RenderCuller,
    batch: &BatchData,
    gpu: &GpuBatch,
    shape: (bool, u32, u32),
    pipeline_cache: &PipelineCache,
    shaders: &mut CullShaders,
) {
    let (occluded, group_views, levels) = shape;
    let target_views = group_views * levels;
    let format = culler.culler().format();
    let centred = format.has_centred_form() && batch.cull_bounds(format).center == Vec3::ZERO;
    let plain = culler.culler().takes_plain_form(target_views);
    if !(centred || plain) {
        return;
    }
    let Ok(windows) = culler.culler().windows_for_views(gpu.capacity, target_views) else {
        return;
    };
    for &test in group_tests(occluded, group_views, levels) {
        let flat = KernelSpec::flat(windows, target_views, test);
        let by_cells = KernelSpec { cells: true, ..flat };
        // Each after its general kernel, which the batch needs to be drawn
        // at all: not ahead of it in Bevy's queue.
        for general in std::iter::once(flat).chain(gpu.cells.is_some().then_some(by_cells)) {
            if !culler.culler().has_pipelines_of(general) {
                continue;
            }
            // Several views' levels under the frustum test (a light's views
            // taking the camera's levels) have bands: never plain.
            let plain = plain && !(test == VisibilityTest::Frustum && levels > 1);
            let forms = [
                centred.then(|| general.for_centred_meshes()),
                plain.then(|| general.for_plain_views()),
                (centred && plain).then(|| general.for_centred_meshes().for_plain_views()),
            ];
            for form in forms.into_iter().flatten() {
                culler.inner.request(form, pipeline_cache, shaders);
            }
        }
    }
}

/// Drops the targets and groups no view culled this frame; a (view, batch)
/// no longer culled leaves the stats with its target.
fn retire_stale_targets(targets: &mut ViewTargets, sender: &StatSender) {
    if let Ok(sender) = sender.0.lock() {
        for t in targets.map.values().filter(|t| !t.live) {
            let _ = sender.send(StatMessage::TargetGone {
                view: t.main_view,
                shadow: t.shadow,
                batch: t.main_batch,
            });
        }
    }
    targets.map.retain(|_, t| t.live);
    targets.groups.retain(|_, g| g.live);
}

/// Reports the bytes of the plugin's GPU buffers when they change.
pub(crate) fn report_gpu_bytes(
    batches: Query<&GpuBatch>,
    targets: Res<ViewTargets>,
    sender: Res<StatSender>,
    mut last: Local<Option<u64>>,
) {
    let batch_bytes: u64 = batches
        .iter()
        .map(|b| b.input.buffer_bytes() + b.draw_data.size())
        .sum();
    let target_bytes: u64 = targets
        .groups
        .values()
        .map(|g| g.target.buffer_bytes())
        .sum::<u64>()
        + targets.map.values().map(|t| t.counts.buffer_bytes()).sum::<u64>();
    let bytes = batch_bytes + target_bytes;
    if *last != Some(bytes) {
        *last = Some(bytes);
        let _ = sender.0.lock().map(|s| s.send(StatMessage::GpuBytes(bytes)));
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

    /// A camera comes first in its group, then its cascades in order, cut
    /// into groups of at most `MAX_VIEWS`; other light views stay out.
    #[test]
    fn camera_groups_take_cascades_in_order_up_to_max_views() {
        let camera = Entity::from_raw_u32(1).unwrap();
        let lights: Vec<Entity> = (10..22).map(|i| Entity::from_raw_u32(i).unwrap()).collect();
        let view_lights = ViewLightEntities {
            lights: lights.clone(),
        };
        // Every other light view is a cascade: six of them.
        let is_cascade = |e: Entity| e.index_u32().is_multiple_of(2);
        let groups = camera_groups(camera, Some(&view_lights), is_cascade, false);
        let cascades: Vec<Entity> = lights.iter().copied().filter(|&e| is_cascade(e)).collect();
        assert_eq!(groups.len(), 1);
        assert_eq!(groups[0][0], camera);
        assert_eq!(groups[0][1..], cascades[..]);
        // Twelve cascades: eight views, then five.
        let groups = camera_groups(camera, Some(&view_lights), |_| true, false);
        assert_eq!(
            groups.iter().map(Vec::len).collect::<Vec<_>>(),
            [MAX_VIEWS as usize, 5]
        );
        assert_eq!(groups.concat()[1..], lights[..]);
        assert_eq!(camera_groups(camera, None, |_| true, false), [vec![camera]]);
        // An occlusion-culled camera is a group of its own; its twelve
        // cascades follow in groups of eight and four.
        let groups = camera_groups(camera, Some(&view_lights), |_| true, true);
        assert_eq!(
            groups.iter().map(Vec::len).collect::<Vec<_>>(),
            [1, MAX_VIEWS as usize, 4]
        );
        assert_eq!(groups[0], [camera]);
        assert_eq!(groups.concat()[1..], lights[..]);
    }
}
