//! Blended batches (`AlphaMode::Blend`, `Premultiplied`, `Add`,
//! `Multiply`): the main-pass queue records which (camera, batch) draws
//! are blended, and each camera's cull sorts those lists back to front
//! right after culling them (cull-core's `DepthSorter`, the depth Bevy's
//! `Transparent3d` phase sorts meshes by), so that the instances blend in
//! the order Bevy would draw them as entities. The batch itself is one
//! item of Bevy's `Transparent3d` phase, sorted among Bevy's meshes by the
//! center of its instances' positions.

use super::extract::BatchData;
use super::kernels::RenderCuller;
use super::queue::TwinPipelines;
use super::targets::ViewTargets;
use bevy::core_pipeline::core_3d::{Transparent3d, TransparentSortingInfo3d};
use bevy::ecs::system::SystemParam;
use bevy::platform::collections::HashMap;
use bevy::prelude::*;
use bevy::render::mesh::RenderMesh;
use bevy::render::render_asset::RenderAssets;
use bevy::render::render_phase::{DrawFunctions, PhaseItemExtraIndex, ViewSortedRenderPhases};
use bevy::render::render_resource::CachedRenderPipelineId;
use bevy::render::renderer::RenderDevice;
use bevy::render::sync_world::MainEntity;
use bevy::render::view::{ExtractedView, RetainedViewEntity};
use cull_core::{CullInput, CullTarget, DepthSortScratch, DepthSortView, DepthSorter};
use std::sync::Mutex;

/// The blended draws of this frame and what sorts them.
#[derive(Resource, Default)]
pub(crate) struct BlendedDraws {
    /// Per (camera, batch) drawn blended and sorted: the mesh-space center of each
    /// level's mesh (its bounding box's, as Bevy sorts a mesh by).
    draws: HashMap<(Entity, Entity), Vec<Vec3>>,
    sorter: Option<DepthSorter>,
    /// Per (camera, batch, late phase): the sort's scratch for that list's
    /// target.
    scratch: Mutex<HashMap<(Entity, Entity, bool), DepthSortScratch>>,
}

impl BlendedDraws {
    /// Forgets last frame's draws (the queue records this frame's).
    pub fn clear(&mut self) {
        self.draws.clear();
    }

    /// Records that `camera` draws `batch` blended and sorted, its levels'
    /// meshes centred at `centers`.
    pub fn insert(&mut self, camera: Entity, batch: Entity, centers: Vec<Vec3>) {
        self.draws.insert((camera, batch), centers);
    }

    /// Sorts `camera`'s lists of `batch` in `target` (from `first_slot`, one
    /// per level) back to front, after the cull that wrote them in
    /// `encoder`. Nothing for a draw that is not blended.
    #[allow(clippy::too_many_arguments)]
    pub fn sort(
        &self,
        device: &RenderDevice,
        encoder: &mut wgpu::CommandEncoder,
        queue: &wgpu::Queue,
        (camera, view): (Entity, &ExtractedView),
        (batch_entity, data, input): (Entity, &BatchData, &CullInput),
        (target, first_slot, late): (&CullTarget, u32, bool),
    ) {
        let (Some(centers), Some(sorter)) = (self.draws.get(&(camera, batch_entity)), &self.sorter) else {
            return;
        };
        let row = local_depth_row(view, data);
        let mut scratches = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let key = (camera, batch_entity, late);
        if !scratches.get(&key).is_some_and(|s| s.fits(target)) {
            match sorter.scratch(device.wgpu_device(), target) {
                Ok(scratch) => {
                    scratches.insert(key, scratch);
                }
                Err(e) => {
                    scratches.remove(&key);
                    error_once!("bevy-gpu-cull: a blended batch is drawn unsorted: {e}");
                    return;
                }
            }
        }
        let scratch = &scratches[&key];
        for (level, center) in centers.iter().enumerate() {
            let order = DepthSortView {
                view_from_world_row_2: row,
                local_center: *center,
            };
            let slot = first_slot + level as u32;
            if let Err(e) = sorter.sort(encoder, queue, (input, target), scratch, slot, &order) {
                error_once!("bevy-gpu-cull: a blended batch is drawn unsorted: {e}");
            }
        }
    }
}

/// Row 2 of `view`'s view-from-world matrix taken into the batch's space
/// (times its world-from-local), in f64: the depth Bevy's `Transparent3d`
/// sorts by, of a point in the batch's own space.
fn local_depth_row(view: &ExtractedView, data: &BatchData) -> Vec4 {
    let view_from_world = view.world_from_view.to_matrix().as_dmat4().inverse();
    let row = view_from_world.row(2);
    (data.frame.world_from_local().transpose() * row).as_vec4()
}

/// Builds the sorter once a blended draw is queued (again for a new
/// culler), and drops the scratch of draws no longer blended.
pub(crate) fn prepare_sorter(
    mut blended: ResMut<BlendedDraws>,
    culler: Option<Res<RenderCuller>>,
    device: Res<RenderDevice>,
) {
    let blended = &mut *blended;
    let draws = &blended.draws;
    blended
        .scratch
        .get_mut()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|(camera, batch, _), _| draws.contains_key(&(*camera, *batch)));
    let Some(culler) = culler.filter(|_| !draws.is_empty()) else {
        return;
    };
    if blended
        .sorter
        .as_ref()
        .is_some_and(|s| s.sorts_for(culler.culler()))
    {
        return;
    }
    blended
        .scratch
        .get_mut()
        .unwrap_or_else(|e| e.into_inner())
        .clear();
    blended.sorter = DepthSorter::new(device.wgpu_device(), culler.culler(), Default::default())
        .map_err(|e| error!("bevy-gpu-cull: blended batches are drawn unsorted: {e}"))
        .ok();
}

/// One blended (view, batch) draw to queue.
pub(crate) struct BlendedDraw<'a> {
    /// The view's render entity and retained id.
    pub view: (Entity, RetainedViewEntity),
    pub batch: (Entity, MainEntity),
    pub data: &'a BatchData,
    pub pipeline: CachedRenderPipelineId,
    /// The pipeline of the instances that wind backwards, if any.
    pub twin: Option<CachedRenderPipelineId>,
    /// The material's `depth_bias`, added to the batch's sort distance as
    /// Bevy adds it to a mesh's.
    pub depth_bias: f32,
    /// Whether the batch's mesh is indexed.
    pub indexed: bool,
    /// Whether its lists are sorted back to front (not where Bevy's
    /// order-independent transparency composites them).
    pub sorted: bool,
}

/// What the main-pass queue fills for blended batches.
#[derive(SystemParam)]
pub(crate) struct BlendedQueue<'w> {
    draws: ResMut<'w, BlendedDraws>,
    phases: ResMut<'w, ViewSortedRenderPhases<Transparent3d>>,
    twins: ResMut<'w, TwinPipelines<Transparent3d>>,
    draw_functions: Res<'w, DrawFunctions<Transparent3d>>,
}

impl BlendedQueue<'_> {
    /// Forgets last frame's blended draws (their items are transient).
    pub fn clear(&mut self) {
        self.draws.clear();
        self.twins.clear();
    }

    /// Bevy's transparent phases (to take Bevy's own items out).
    pub fn phases(&mut self) -> &mut ViewSortedRenderPhases<Transparent3d> {
        &mut self.phases
    }

    /// Adds `draw` to its view's `Transparent3d` phase, drawn by the render
    /// command `C`, and records its lists for sorting.
    pub fn add<C: 'static>(
        &mut self,
        draw: BlendedDraw,
        targets: &ViewTargets,
        meshes: &RenderAssets<RenderMesh>,
    ) {
        let (Some(phase), Some(target)) = (
            self.phases.get_mut(&draw.view.1),
            targets.map.get(&(draw.view.0, draw.batch.0)),
        ) else {
            return;
        };
        if draw.sorted {
            let centers = target
                .meshes
                .iter()
                .map(|id| meshes.get(*id).map_or(Vec3::ZERO, |mesh| mesh.aabb_center))
                .collect();
            self.draws.insert(draw.view.0, draw.batch.0, centers);
        }
        if let Some(twin) = draw.twin {
            self.twins.insert(draw.view.0, draw.batch.0, twin);
        }
        let data = draw.data;
        phase.add_transient(Transparent3d {
            sorting_info: TransparentSortingInfo3d::Sorted {
                mesh_center: data.world_from_local.transform_point3(data.positions.center()),
                depth_bias: draw.depth_bias,
            },
            distance: 0.0,
            pipeline: draw.pipeline,
            entity: draw.batch,
            draw_function: self.draw_functions.read().id::<C>(),
            batch_range: 0..1,
            extra_index: PhaseItemExtraIndex::None,
            indexed: draw.indexed,
        });
    }
}
