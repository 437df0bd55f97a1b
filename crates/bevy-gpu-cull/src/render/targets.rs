//! Cull targets: per (view group, batch) a target holding every view's
//! lists of survivors and indirect arguments, and per (view, batch) its
//! slot there, its count readback and its draw bind groups. A view group is
//! culled in one pass: a camera with its directional cascades (up to
//! `MAX_VIEWS` views a group), a point light's six faces, or a spot light's
//! view alone.

use super::bindings::{self, InstanceBindings};
use super::extract::BatchData;
use super::material::GpuMaterial;
use super::standard::TEXTURES;
use crate::plugin::{ShadowViewId, StatMessage, StatSender};
use bevy::camera::visibility::RenderLayers;
use bevy::pbr::RenderMeshInstances;
use bevy::pbr::{LightEntity, RenderMeshInstanceFlags, ViewLightEntities};
use bevy::platform::collections::HashMap;
use bevy::prelude::*;
use bevy::render::mesh::allocator::MeshAllocator;
use bevy::render::mesh::{RenderMesh, RenderMeshBufferInfo};
use bevy::render::render_asset::RenderAssets;
use bevy::render::render_resource::{BindGroup, BindGroupEntries, BindGroupLayout, Buffer, PipelineCache};
use bevy::render::renderer::{RenderDevice, RenderQueue};
use bevy::render::sync_world::MainEntity;
use bevy::render::texture::{FallbackImage, GpuImage};
use bevy::render::view::ExtractedView;
use cull_core::{AsyncReadback, CullTarget, KernelSpec, MAX_VIEWS, OcclusionHistory, VisibilityTest};
use std::sync::Arc;
use std::sync::atomic::AtomicU32;

use super::prepare::{CullShaders, GpuBatch, KernelDemand, RenderCuller};
use super::views::{OcclusionQueryData, camera_groups, occlusion_culled, point_light_faces};

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

/// Cull targets by (view, batch) render-world entities, and the targets of
/// their groups by (group, batch): a group is named by its first view.
#[derive(Resource, Default)]
pub(crate) struct ViewTargets {
    pub map: HashMap<(Entity, Entity), ViewTarget>,
    pub groups: HashMap<(Entity, Entity), GroupTarget>,
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
    pyramids: Res<super::pyramids::Pyramids>,
    mut demand: ResMut<KernelDemand>,
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
    demand.0 = kernels_in_use(targets);
}

/// The kernels the groups' culls use, as (views, visibility test), for the
/// next culler to compile before it takes over.
fn kernels_in_use(targets: &ViewTargets) -> Vec<(u32, VisibilityTest)> {
    targets
        .groups
        .values()
        .flat_map(|g| {
            let levels = (g.lod.len() as u32).max(1);
            group_tests(g.occlusion.is_some(), g.views / levels, levels)
                .iter()
                .map(move |&test| (g.views, test))
        })
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
