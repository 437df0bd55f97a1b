//! Cull targets: per (view group, batch) a target holding every view's
//! lists of survivors and indirect arguments, and per (view, batch) its
//! slot there (its draw bind groups are made in `bind_groups`; its counts
//! come back through `count_readback`). A view group ([`ViewGroups`]) is
//! culled in one pass: a camera with its directional cascades (up to
//! `MAX_VIEWS` views a group), a point light's six faces, or a spot light's
//! view alone.

use super::batches::GpuBatch;
use super::count_readback::CountReadback;
use super::extract::BatchData;
use super::groups::{ViewGroups, ViewKind, ViewPlace};
use super::kernels::{CullShaders, KernelDemand, RenderCuller};
use super::member_counts::MemberCounts;
use super::merge::{MergeMember, MergedBatch, MergedInto};
use super::standard::TEXTURES;
use crate::stats::{GpuCullShadowView, StatMessage, StatSender};
use bevy::camera::visibility::RenderLayers;
use bevy::pbr::{RenderMeshInstanceFlags, RenderMeshInstances};
use bevy::platform::collections::{HashMap, HashSet};
use bevy::prelude::*;
use bevy::render::mesh::allocator::MeshAllocator;
use bevy::render::mesh::{RenderMesh, RenderMeshBufferInfo};
use bevy::render::render_asset::RenderAssets;
use bevy::render::render_resource::{BindGroup, Buffer, PipelineCache};
use bevy::render::renderer::{RenderDevice, RenderQueue};
use bevy::render::sync_world::MainEntity;
use bevy::render::view::ExtractedView;
use cull_core::{CullTarget, KernelSpec, MAX_VIEWS, OcclusionHistory, VisibilityTest};
use std::sync::Arc;
use std::sync::atomic::AtomicU32;

/// The kernels a group's cull votes with: the occlusion phases for an
/// occluded camera; a spot light's cone test for its view; for a camera
/// alone with levels of detail, the kernel
/// that tests its frustum once for all levels (what `Culler::cull`
/// picks for such views, `VisibilityTest::for_views`); else the frustum
/// test's.
fn group_tests(kind: ViewKind, group_views: u32, levels: u32) -> &'static [VisibilityTest] {
    if kind.occluded() {
        &[VisibilityTest::OcclusionEarly, VisibilityTest::OcclusionLate]
    } else if kind == ViewKind::Spot {
        &[VisibilityTest::SpotCone]
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
    /// The visibility tests its cull votes with ([`group_tests`]).
    pub tests: &'static [VisibilityTest],
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
    pub shadow: Option<GpuCullShadowView>,
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
    /// As [`ViewTarget::member_counts`], for the late lists.
    pub member_counts: Option<MemberCounts>,
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
    /// What `bind_groups` bind (`None` until made): the batch's buffers
    /// ([`GpuBatch::buffers_id`]), its material's textures that are ready,
    /// and whether its levels are the batch's levels of detail.
    pub bound: Option<(u64, [Option<AssetId<Image>>; TEXTURES], bool)>,
    /// The latest visible count read back; `u32::MAX` until one arrives.
    pub last_count: AtomicU32,
    pub main_view: Entity,
    pub main_batch: Entity,
    /// The light view it is, for a shadow map's target.
    pub shadow: Option<GpuCullShadowView>,
    /// The late phase's lists, for an occlusion-culled camera.
    pub late: Option<LateLists>,
    /// The batches drawn in it, for a combined batch
    /// ([`super::merge::MergedBatch`]), whose counts are its members'.
    pub members: Option<Arc<[MergeMember]>>,
    /// A combined batch's count of this view's survivors per member, made
    /// with its bind groups.
    pub member_counts: Option<MemberCounts>,
    live: bool,
}

impl ViewTarget {
    /// Whether the latest count read back is above zero.
    pub fn has_instances(&self) -> bool {
        let count = self.last_count.load(std::sync::atomic::Ordering::Relaxed);
        count != 0 && count != u32::MAX
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

    /// Bytes of a combined batch's counts per member, which the count
    /// readback copies too (none for a batch on its own).
    pub fn member_counts_len(&self) -> u64 {
        self.members.as_ref().map_or(0, |m| m.len() as u64 * 4)
    }

    /// Bytes the count readback copies for it each frame.
    fn readback_len(&self) -> u64 {
        let align = |len: u64| len.next_multiple_of(wgpu::COPY_BUFFER_ALIGNMENT);
        (align(self.counts_len()) + align(self.member_counts_len())) * (1 + self.late.is_some() as u64)
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

/// Cull targets by (view, batch) render-world entities, and the targets of
/// their groups by (group, batch): a group is named by its first view.
#[derive(Resource, Default)]
pub(crate) struct ViewTargets {
    pub map: HashMap<(Entity, Entity), ViewTarget>,
    pub groups: HashMap<(Entity, Entity), GroupTarget>,
    /// The (view, batch) pairs a view sees this frame, with or without a
    /// target: the queues specialize their draw pipelines from the first
    /// frame, so that those compile while the cull's kernels do.
    pub seen: HashSet<(Entity, Entity)>,
}

/// Whether any view target has late lists (occlusion culling's late
/// phase): `cull_view_late`'s run condition.
pub(crate) fn any_late_lists(targets: Option<Res<ViewTargets>>) -> bool {
    targets.is_some_and(|targets| targets.map.values().any(|target| target.late.is_some()))
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

/// What making targets and requesting kernels takes.
#[derive(bevy::ecs::system::SystemParam)]
pub(crate) struct TargetMaker<'w> {
    device: Res<'w, RenderDevice>,
    queue: Res<'w, RenderQueue>,
    culler: Option<ResMut<'w, RenderCuller>>,
    shaders: ResMut<'w, CullShaders>,
    pipeline_cache: Res<'w, PipelineCache>,
    sender: Res<'w, StatSender>,
    counts: Res<'w, CountReadback>,
}

/// A batch's levels of detail as one view draws them: each level's smallest
/// screen size (empty without levels), mesh and draw arguments.
struct Levels {
    lod: Vec<f32>,
    meshes: Vec<AssetId<Mesh>>,
    args: Vec<DrawArgs>,
}

impl Levels {
    fn count(&self) -> u32 {
        self.meshes.len() as u32
    }
}

/// Where one (view, batch) is culled: its group's first view, the view's
/// first list in the group's target, the group's views and levels.
#[derive(Clone, Copy)]
struct Placement {
    group: Entity,
    slot: u32,
    group_views: u32,
    levels: u32,
}

impl Placement {
    /// Lists in the group's target: a list per (view, level).
    fn target_views(self) -> u32 {
        self.group_views * self.levels
    }
}

/// Makes, per (view, batch) a view sees, its group's cull target (shared by
/// the group's views) and the view's slot there, requests the kernels the
/// group's cull needs, and drops the targets no view culls any more.
pub(crate) fn prepare_targets(
    mut maker: TargetMaker,
    mut targets: ResMut<ViewTargets>,
    groups: Res<ViewGroups>,
    views: Query<(Entity, Option<&RenderLayers>), With<ExtractedView>>,
    batches: Query<(Entity, &MainEntity, &GpuBatch, &BatchData, Option<&MergedBatch>), Without<MergedInto>>,
    batch_meshes: BatchMeshes,
    mut demand: ResMut<KernelDemand>,
) {
    if maker.culler.is_none() {
        return;
    }
    let targets = &mut *targets;
    targets.map.values_mut().for_each(|t| t.live = false);
    targets.groups.values_mut().for_each(|g| g.live = false);
    targets.seen.clear();
    let default_layers = RenderLayers::default();
    for (view, view_layers) in &views {
        let Some(place) = groups.places.get(&view) else {
            continue;
        };
        let view_layers = view_layers.unwrap_or(&default_layers);
        for (batch_entity, main_batch, gpu, batch, merged) in &batches {
            let Some(mesh_instance) = batch_meshes.mesh_instances.render_mesh_queue_data(*main_batch) else {
                continue;
            };
            // As Bevy does for its meshes: a view sees a visible batch whose
            // render layers it shares, and a light draws only shadow casters.
            let caster = mesh_instance
                .flags()
                .contains(RenderMeshInstanceFlags::SHADOW_CASTER);
            if !batch.visible
                || !view_layers.intersects(&batch.render_layers)
                || (place.shadow.is_some() && !caster)
            {
                continue;
            }
            targets.seen.insert((view, batch_entity));
            let mesh_id = mesh_instance.mesh_asset_id();
            let Some(mut levels) = batch_levels(batch, mesh_id, &batch_meshes) else {
                continue;
            };
            let Some(placement) = maker.place(view, place, gpu, &mut levels, mesh_id, &batch_meshes) else {
                continue;
            };
            maker.request_kernels(place.kind, placement, batch, gpu);
            let group_key = (placement.group, batch_entity);
            let Some(group_target) = maker.group_target(
                &mut targets.groups,
                group_key,
                place,
                placement,
                (main_batch.id(), gpu),
                &levels.lod,
            ) else {
                continue;
            };
            group_target.live = true;
            // Each level's mesh's place in Bevy's shared vertex and index
            // buffers, written only when it changes (a new target, a mesh
            // that moved in the allocator or was replaced).
            if group_target.written_args.as_ref() != Some(&levels.args) {
                write_level_args(
                    &maker.queue,
                    group_target,
                    &levels.args,
                    placement.levels,
                    placement.target_views(),
                );
                group_target.written_args = Some(std::mem::take(&mut levels.args));
                let _ = maker
                    .sender
                    .0
                    .lock()
                    .map(|s| s.send(StatMessage::DrawArgsWritten));
            }
            let view_key = (view, batch_entity);
            if !keep_view_target(
                &mut targets.map,
                view_key,
                group_target,
                placement.slot,
                &levels.meshes,
            ) {
                let target = view_target(group_target, place, placement, main_batch.id(), levels);
                targets.map.insert(view_key, target);
            }
            // A combined batch's members move when one's length changes.
            if let Some(target) = targets.map.get_mut(&view_key) {
                target.members = merged.map(|m| m.members.clone());
            }
        }
    }
    retire_stale_targets(targets, &maker.sender);
    demand.0 = kernels_in_use(targets);
    let count_bytes = targets.map.values().map(ViewTarget::readback_len).sum();
    maker.counts.reserve(maker.device.wgpu_device(), count_bytes);
}

/// The mesh of each level of detail of `batch` and where it lies in Bevy's
/// buffers. Until every level's mesh is ready the batch is not drawn
/// (`None`), as Bevy's meshes wait for theirs; a level whose vertex layout
/// differs from the `Mesh3d`'s cannot use its pipeline, and the batch is
/// drawn without levels.
fn batch_levels(batch: &BatchData, mesh_id: AssetId<Mesh>, at: &BatchMeshes) -> Option<Levels> {
    let mesh = at.meshes.get(mesh_id)?;
    let mut lod: Vec<f32> = batch.lod.iter().map(|(_, size)| *size).collect();
    let mut meshes: Vec<AssetId<Mesh>> = batch.lod.iter().map(|(id, _)| *id).collect();
    if meshes.iter().any(|id| at.meshes.get(*id).is_none()) {
        return None;
    }
    if meshes
        .iter()
        .any(|id| at.meshes.get(*id).is_some_and(|m| m.layout != mesh.layout))
    {
        error_once!(
            "bevy-gpu-cull: a GpuCullLod mesh has other vertex attributes than the batch's Mesh3d; \
             the batch is drawn without levels of detail"
        );
        lod.clear();
        meshes.clear();
    }
    if meshes.is_empty() {
        meshes.push(mesh_id);
    }
    let args = meshes
        .iter()
        .map(|id| mesh_draw_args(at.meshes.get(*id)?, id, &at.allocator))
        .collect::<Option<Vec<DrawArgs>>>()?;
    Some(Levels { lod, meshes, args })
}

impl TargetMaker<'_> {
    fn culler(&self) -> &RenderCuller {
        self.culler
            .as_deref()
            .expect("prepare_targets returns without a culler")
    }

    /// The culler, with what it needs to ask Bevy for kernels.
    fn requester(&mut self) -> (&mut RenderCuller, &mut CullShaders, &PipelineCache) {
        let culler = self
            .culler
            .as_deref_mut()
            .expect("prepare_targets returns without a culler");
        (culler, &mut *self.shaders, &*self.pipeline_cache)
    }

    /// Where `view` culls a batch of `gpu.capacity` instances: in its group,
    /// or alone where the group's lists would not fit (more than
    /// `MAX_VIEWS` lists, or more than the output windows hold). A batch
    /// too large for even one view's levels is drawn without levels.
    fn place(
        &self,
        view: Entity,
        place: &ViewPlace,
        gpu: &GpuBatch,
        levels: &mut Levels,
        mesh_id: AssetId<Mesh>,
        at: &BatchMeshes,
    ) -> Option<Placement> {
        let culler = self.culler().culler();
        let fits = |views: u32| views <= MAX_VIEWS && culler.windows_for(gpu.capacity, views).is_ok();
        let (group, slot, group_views) = if place.group_views > 1 && !fits(place.group_views * levels.count())
        {
            (view, 0, 1)
        } else {
            (place.group, place.slot, place.group_views)
        };
        if levels.count() > 1 && !fits(group_views * levels.count()) {
            error_once!(
                "bevy-gpu-cull: a batch is too large for a list per level of detail; it is drawn without levels"
            );
            let args = mesh_draw_args(at.meshes.get(mesh_id)?, &mesh_id, &at.allocator)?;
            *levels = Levels {
                lod: Vec::new(),
                meshes: vec![mesh_id],
                args: vec![args],
            };
        }
        Some(Placement {
            group,
            slot: slot * levels.count(),
            group_views,
            levels: levels.count(),
        })
    }

    /// Requests the kernels a group's cull may take: those that cull by
    /// cells for a batch sorted into cells (culled flat until they have
    /// compiled), and the faster forms of its kernels.
    fn request_kernels(&mut self, kind: ViewKind, placement: Placement, batch: &BatchData, gpu: &GpuBatch) {
        let (culler, shaders, pipeline_cache) = self.requester();
        let target_views = placement.target_views();
        if gpu.cells.is_some()
            && let Ok(windows) = culler.culler().windows_for(gpu.capacity, target_views)
        {
            for &test in group_tests(kind, placement.group_views, placement.levels) {
                // After its general kernel, which the batch needs to be
                // drawn at all (and culls it until this one is ready).
                if culler
                    .culler()
                    .has_pipelines(KernelSpec::flat(windows, target_views, test))
                {
                    let spec = KernelSpec::cells(windows, target_views, test);
                    culler.inner.request(spec, pipeline_cache, shaders);
                }
            }
        }
        request_faster_forms(
            culler,
            batch,
            gpu,
            (kind, placement.group_views, placement.levels),
            pipeline_cache,
            shaders,
        );
    }

    /// The group's target for a batch (`gpu`, its main entity first), made
    /// again where it is stale. A batch past one storage binding needs a
    /// kernel with more output windows, an occluded camera the occlusion
    /// phases': until Bevy has compiled them, the batch is not drawn
    /// (`None`), as Bevy does with a mesh whose pipeline is not ready.
    fn group_target<'t>(
        &mut self,
        groups: &'t mut HashMap<(Entity, Entity), GroupTarget>,
        group_key: (Entity, Entity),
        place: &ViewPlace,
        placement: Placement,
        (main_batch, gpu): (Entity, &GpuBatch),
        lod: &[f32],
    ) -> Option<&'t mut GroupTarget> {
        let occluded = place.kind.occluded();
        let tests = group_tests(place.kind, placement.group_views, placement.levels);
        let target_views = placement.target_views();
        let generation = self.culler().generation;
        let stale = groups.get(&group_key).is_none_or(|g| {
            g.capacity < gpu.capacity
                || g.culler_generation != generation
                || g.views != target_views
                || g.lod != lod
                || g.tests != tests
        });
        if stale {
            if !self.kernels_ready(place.kind, placement, gpu) {
                return None;
            }
            let new_target = || {
                CullTarget::with_views(
                    self.device.wgpu_device(),
                    self.culler().culler(),
                    gpu.capacity,
                    target_views,
                )
                .map_err(|e| error!("GPU culling: {e}"))
                .ok()
            };
            let target = new_target()?;
            let occlusion = if occluded {
                let history = OcclusionHistory::new(self.device.wgpu_device(), gpu.capacity)
                    .map_err(|e| error!("GPU culling: {e}"))
                    .ok()?;
                let late = new_target()?;
                Some(GroupOcclusion {
                    late_draw_args: Buffer::from(late.draw_args().clone()),
                    late: Arc::new(late),
                    history: std::sync::Mutex::new(history),
                    by_cells: Default::default(),
                })
            } else {
                None
            };
            let group = GroupTarget {
                draw_args: Buffer::from(target.draw_args().clone()),
                target: Arc::new(target),
                views: target_views,
                tests,
                capacity: gpu.capacity,
                culler_generation: generation,
                written_args: None,
                lod: lod.to_vec(),
                main_view: place.main_view,
                main_batch,
                shadow: place.shadow,
                occlusion,
                live: false,
            };
            groups.insert(group_key, group);
        }
        groups.get_mut(&group_key)
    }

    /// Whether the general kernels a group's cull votes with have compiled;
    /// requests those that have not.
    fn kernels_ready(&mut self, kind: ViewKind, placement: Placement, gpu: &GpuBatch) -> bool {
        let target_views = placement.target_views();
        let Ok(windows) = self.culler().culler().windows_for(gpu.capacity, target_views) else {
            // CullTarget::with_views reports it.
            return true;
        };
        let (culler, shaders, pipeline_cache) = self.requester();
        let mut ready = true;
        for &test in group_tests(kind, placement.group_views, placement.levels) {
            let spec = KernelSpec::flat(windows, target_views, test);
            if !culler.culler().has_pipelines(spec) {
                culler.inner.request(spec, pipeline_cache, shaders);
                ready = false;
            }
        }
        ready
    }
}

/// Keeps the view's target at `key` (its bind groups and last count live on)
/// where it still culls into `group`'s lists at `slot` for the same
/// `meshes`; `false` where it must be made again.
fn keep_view_target(
    map: &mut HashMap<(Entity, Entity), ViewTarget>,
    key: (Entity, Entity),
    group: &GroupTarget,
    slot: u32,
    meshes: &[AssetId<Mesh>],
) -> bool {
    let late_lists = |late: Option<&Arc<CullTarget>>| late.map(Arc::as_ptr);
    let group_late = late_lists(group.occlusion.as_ref().map(|o| &o.late));
    let Some(old) = map.get_mut(&key) else {
        return false;
    };
    old.live = Arc::ptr_eq(&old.target, &group.target)
        && old.slot == slot
        && old.meshes == meshes
        && late_lists(old.late.as_ref().map(|l| &l.target)) == group_late;
    old.live
}

/// A view's part of `group`'s lists: its slot and its levels' meshes (its
/// bind groups are made by `prepare_bind_groups`).
fn view_target(
    group: &GroupTarget,
    place: &ViewPlace,
    placement: Placement,
    main_batch: Entity,
    levels: Levels,
) -> ViewTarget {
    ViewTarget {
        target: group.target.clone(),
        slot: placement.slot,
        meshes: levels.meshes,
        lod: levels.lod,
        draw_args: group.draw_args.clone(),
        bind_groups: Vec::new(),
        bound: None,
        last_count: AtomicU32::new(u32::MAX),
        main_view: place.main_view,
        main_batch,
        shadow: place.shadow,
        late: group.occlusion.as_ref().map(|o| LateLists {
            target: o.late.clone(),
            draw_args: o.late_draw_args.clone(),
            bind_groups: Vec::new(),
            member_counts: None,
        }),
        members: None,
        member_counts: None,
        live: true,
    }
}

/// The kernels the groups' culls use, as (views, visibility test), for the
/// next culler to compile before it takes over.
fn kernels_in_use(targets: &ViewTargets) -> Vec<(u32, VisibilityTest)> {
    targets
        .groups
        .values()
        .flat_map(|g| g.tests.iter().map(move |&test| (g.views, test)))
        .collect()
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

/// Requests the faster forms of a group's kernels, each culled with once
/// Bevy has compiled it and with the general kernel until then (both keep
/// the same instances; cull-core picks): for a mesh centred on its origin
/// (most meshes), the form that leaves the rotation of its center out
/// (`KernelSpec::centred`); for plain views (Bevy's perspective cameras and
/// lights' views, without a level's band), the form without a sixth plane
/// or a band (`KernelSpec::plain_views`); and both together. `shape`: the
/// kind of the group's views, its views, the batch's levels.
fn request_faster_forms(
    culler: &mut RenderCuller,
    batch: &BatchData,
    gpu: &GpuBatch,
    shape: (ViewKind, u32, u32),
    pipeline_cache: &PipelineCache,
    shaders: &mut CullShaders,
) {
    let (kind, group_views, levels) = shape;
    let target_views = group_views * levels;
    let format = culler.culler().format();
    let centred = format.has_centred_form() && batch.cull_bounds(format).center == Vec3::ZERO;
    let plain = culler.culler().takes_plain_form(target_views);
    if !(centred || plain) {
        return;
    }
    let Ok(windows) = culler.culler().windows_for(gpu.capacity, target_views) else {
        return;
    };
    for &test in group_tests(kind, group_views, levels) {
        let flat = KernelSpec::flat(windows, target_views, test);
        let by_cells = KernelSpec { cells: true, ..flat };
        // Each after its general kernel, which the batch needs to be drawn
        // at all: not ahead of it in Bevy's queue.
        for general in std::iter::once(flat).chain(gpu.cells.is_some().then_some(by_cells)) {
            if !culler.culler().has_pipelines(general) {
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
            // A combined batch's counts were its members'.
            let members = t.members.iter().flat_map(|m| m.iter().map(|m| m.main.id()));
            let batches = members.chain(t.members.is_none().then_some(t.main_batch));
            for batch in batches {
                let _ = sender.send(StatMessage::TargetGone {
                    view: t.main_view,
                    shadow: t.shadow,
                    batch,
                });
            }
        }
    }
    targets.map.retain(|_, t| t.live);
    targets.groups.retain(|_, g| g.live);
}

/// Reports the bytes of the plugin's GPU buffers when they change.
pub(crate) fn report_gpu_bytes(
    batches: Query<&GpuBatch>,
    targets: Res<ViewTargets>,
    counts: Res<CountReadback>,
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
        + counts.buffer_bytes();
    let bytes = batch_bytes + target_bytes;
    if *last != Some(bytes) {
        *last = Some(bytes);
        let _ = sender.0.lock().map(|s| s.send(StatMessage::GpuBytes(bytes)));
    }
}
