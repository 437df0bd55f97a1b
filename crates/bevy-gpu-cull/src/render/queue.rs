//! The one way a batch enters a view's binned phase, shared by the main
//! pass (`Opaque3d`), the shadow passes (`Shadow`), the camera prepass
//! (`Opaque3dPrepass`) and the deferred G-buffer (`AlphaMask3dDeferred`):
//! as a non-mesh item (its draw is indirect, so Bevy's per-mesh batching and
//! preprocessing do not apply), keyed by its pipeline and mesh, taken out
//! again the next frame (binned phases are retained), with the twin pipeline
//! of a batch whose instances wind both ways. What differs between the
//! phases is only how the pipeline is specialized (`draw.rs`,
//! `queue_prepass.rs`).

use bevy::asset::UntypedAssetId;
use bevy::core_pipeline::core_3d::{
    AlphaMask3d, Opaque3d, Opaque3dBatchSetKey, Opaque3dBinKey, Transparent3d,
};
use bevy::core_pipeline::deferred::AlphaMask3dDeferred;
use bevy::core_pipeline::prepass::{
    Opaque3dPrepass, OpaqueNoLightmap3dBatchSetKey, OpaqueNoLightmap3dBinKey,
};
use bevy::ecs::system::SystemParam;
use bevy::pbr::{Shadow, ShadowBatchSetKey, ShadowBinKey, Transmissive3d};
use bevy::platform::collections::HashMap;
use bevy::prelude::*;
use bevy::render::mesh::allocator::MeshSlabs;
use bevy::render::render_phase::{
    BinnedPhaseItem, BinnedRenderPhaseType, DrawFunctionId, DrawFunctions, InputUniformIndex,
    ViewBinnedRenderPhases, ViewSortedRenderPhases,
};
use bevy::render::render_resource::CachedRenderPipelineId;
use bevy::render::sync_world::MainEntity;
use bevy::render::view::RetainedViewEntity;
use std::marker::PhantomData;

/// A binned phase the plugin queues batches into: the keys of a batch's
/// item, drawn by `pipeline` with `draw_function` from `mesh`'s buffers.
pub(crate) trait BatchPhase: BinnedPhaseItem {
    fn batch_keys(
        pipeline: CachedRenderPipelineId,
        draw_function: DrawFunctionId,
        mesh: UntypedAssetId,
    ) -> (Self::BatchSetKey, Self::BinKey);
}

impl BatchPhase for Opaque3d {
    fn batch_keys(
        pipeline: CachedRenderPipelineId,
        draw_function: DrawFunctionId,
        mesh: UntypedAssetId,
    ) -> (Opaque3dBatchSetKey, Opaque3dBinKey) {
        let set = Opaque3dBatchSetKey {
            pipeline,
            draw_function,
            material_bind_group_index: None,
            slabs: MeshSlabs::default(),
            lightmap_slab: None,
        };
        (set, Opaque3dBinKey { asset_id: mesh })
    }
}

impl BatchPhase for Shadow {
    fn batch_keys(
        pipeline: CachedRenderPipelineId,
        draw_function: DrawFunctionId,
        mesh: UntypedAssetId,
    ) -> (ShadowBatchSetKey, ShadowBinKey) {
        let set = ShadowBatchSetKey {
            pipeline,
            draw_function,
            material_bind_group_index: None,
            slabs: MeshSlabs::default(),
        };
        (set, ShadowBinKey { asset_id: mesh })
    }
}

/// The prepass phases' keys (`Opaque3dPrepass`, and the deferred phase the
/// batches' G-buffer draws go to).
fn no_lightmap_keys(
    pipeline: CachedRenderPipelineId,
    draw_function: DrawFunctionId,
    mesh: UntypedAssetId,
) -> (OpaqueNoLightmap3dBatchSetKey, OpaqueNoLightmap3dBinKey) {
    let set = OpaqueNoLightmap3dBatchSetKey {
        pipeline,
        draw_function,
        material_bind_group_index: None,
        slabs: MeshSlabs::default(),
    };
    (set, OpaqueNoLightmap3dBinKey { asset_id: mesh })
}

impl BatchPhase for Opaque3dPrepass {
    fn batch_keys(
        pipeline: CachedRenderPipelineId,
        draw_function: DrawFunctionId,
        mesh: UntypedAssetId,
    ) -> (OpaqueNoLightmap3dBatchSetKey, OpaqueNoLightmap3dBinKey) {
        no_lightmap_keys(pipeline, draw_function, mesh)
    }
}

impl BatchPhase for AlphaMask3dDeferred {
    fn batch_keys(
        pipeline: CachedRenderPipelineId,
        draw_function: DrawFunctionId,
        mesh: UntypedAssetId,
    ) -> (OpaqueNoLightmap3dBatchSetKey, OpaqueNoLightmap3dBinKey) {
        no_lightmap_keys(pipeline, draw_function, mesh)
    }
}

/// Takes `entities`' items out of `view`'s phase.
pub(crate) fn remove_from_phase<P: BinnedPhaseItem>(
    phases: &mut ViewBinnedRenderPhases<P>,
    view: &RetainedViewEntity,
    entities: impl IntoIterator<Item = MainEntity>,
) {
    if let Some(phase) = phases.get_mut(view) {
        entities.into_iter().for_each(|e| phase.remove(e));
    }
}

/// Removes Bevy's own items for the batches `mains` from a view's main-pass
/// phases other than the opaque one (`BatchQueue::remove` takes those). A
/// material on the batch entity makes Bevy queue the mesh itself, at the
/// entity's transform: the plugin draws the batch with that material
/// instead. Bevy's item is in the opaque or alpha-mask phase, or, for a
/// blended or transmissive material, a sorted phase (the batch itself is
/// drawn opaque), where Bevy keys its mesh items by the main entity alone.
pub(crate) fn remove_bevy_items(
    view: &RetainedViewEntity,
    mains: &[MainEntity],
    alpha_mask: &mut ViewBinnedRenderPhases<AlphaMask3d>,
    (transparent, transmissive): (
        &mut ViewSortedRenderPhases<Transparent3d>,
        &mut ViewSortedRenderPhases<Transmissive3d>,
    ),
) {
    remove_from_phase(alpha_mask, view, mains.iter().copied());
    if let Some(phase) = transparent.get_mut(view) {
        mains
            .iter()
            .for_each(|main| phase.remove(Entity::PLACEHOLDER, *main));
    }
    if let Some(phase) = transmissive.get_mut(view) {
        mains
            .iter()
            .for_each(|main| phase.remove(Entity::PLACEHOLDER, *main));
    }
}

/// The batches queued into each view's phase `P` last frame.
#[derive(Resource)]
pub(crate) struct QueuedBatches<P> {
    views: HashMap<RetainedViewEntity, Vec<MainEntity>>,
    phase: PhantomData<fn() -> P>,
}

impl<P> Default for QueuedBatches<P> {
    fn default() -> Self {
        Self {
            views: HashMap::default(),
            phase: PhantomData,
        }
    }
}

/// The second pipeline of each (view, batch) whose instances wind both
/// ways ([`super::extract::BatchData::windings`]) in phase `P`: the
/// clockwise front face. Rebuilt each frame by the phase's queue system,
/// read by `draw::DrawCulledTwin`.
#[derive(Resource)]
pub(crate) struct TwinPipelines<P> {
    pipelines: HashMap<(Entity, Entity), CachedRenderPipelineId>,
    phase: PhantomData<fn() -> P>,
}

impl<P> Default for TwinPipelines<P> {
    fn default() -> Self {
        Self {
            pipelines: HashMap::default(),
            phase: PhantomData,
        }
    }
}

impl<P> TwinPipelines<P> {
    /// Forgets every twin (a phase queued again each frame).
    pub fn clear(&mut self) {
        self.pipelines.clear();
    }

    /// Records `batch`'s twin in `view`.
    pub fn insert(&mut self, view: Entity, batch: Entity, twin: CachedRenderPipelineId) {
        self.pipelines.insert((view, batch), twin);
    }

    /// The twin of `batch` in `view`, if its instances wind both ways.
    pub fn get(&self, view: Entity, batch: Entity) -> Option<CachedRenderPipelineId> {
        self.pipelines.get(&(view, batch)).copied()
    }
}

/// The render-world resources of the phases `P` one queue system fills.
#[derive(SystemParam)]
pub(crate) struct BatchQueue<'w, P: BatchPhase> {
    phases: ResMut<'w, ViewBinnedRenderPhases<P>>,
    queued: ResMut<'w, QueuedBatches<P>>,
    twins: ResMut<'w, TwinPipelines<P>>,
    draw_functions: Res<'w, DrawFunctions<P>>,
}

impl<P: BatchPhase> BatchQueue<'_, P> {
    /// Takes last frame's batch items out of every view's phase, and
    /// forgets last frame's twins.
    pub fn clear(&mut self) {
        for (view, entities) in self.queued.views.drain() {
            remove_from_phase(&mut self.phases, &view, entities);
        }
        self.twins.pipelines.clear();
    }

    /// Takes `entities`' items (Bevy's own, for the batch entities) out of
    /// `view`'s phase.
    pub fn remove(&mut self, view: &RetainedViewEntity, entities: impl IntoIterator<Item = MainEntity>) {
        remove_from_phase(&mut self.phases, view, entities);
    }

    /// Whether `view` has this phase.
    pub fn has(&self, view: &RetainedViewEntity) -> bool {
        self.phases.contains_key(view)
    }

    /// Whether `view`'s phase holds no item (none of this frame's batches
    /// is in it before [`Self::add`]; nor are Bevy's items for the batch
    /// entities, once taken out).
    pub fn is_empty(&self, view: &RetainedViewEntity) -> bool {
        self.phases.get(view).is_none_or(|phase| phase.is_empty())
    }

    /// The id of the render command `C` in this phase (registered with
    /// `add_render_command`).
    pub fn draw_function<C: 'static>(&self) -> DrawFunctionId {
        self.draw_functions.read().id::<C>()
    }

    /// Adds `batch`'s draw (`pipeline`, `draw_function`, from `mesh`'s
    /// buffers, and `twin` for its instances that wind backwards) to the
    /// phase of `view`; `false` where the view has no such phase.
    pub fn add(
        &mut self,
        (view_entity, view): (Entity, RetainedViewEntity),
        batch: (Entity, MainEntity),
        mesh: UntypedAssetId,
        (pipeline, draw_function): (CachedRenderPipelineId, DrawFunctionId),
        twin: Option<CachedRenderPipelineId>,
    ) -> bool {
        let Some(phase) = self.phases.get_mut(&view) else {
            return false;
        };
        let (set, bin) = P::batch_keys(pipeline, draw_function, mesh);
        phase.add(
            set,
            bin,
            batch,
            InputUniformIndex::default(),
            BinnedRenderPhaseType::NonMesh,
        );
        self.queued.views.entry(view).or_default().push(batch.1);
        self.add_twin(view_entity, batch.0, twin);
        true
    }

    /// Records `batch`'s `twin` in `view`, for a batch drawn from outside
    /// the phase (or by [`Self::add`]).
    pub fn add_twin(&mut self, view: Entity, batch: Entity, twin: Option<CachedRenderPipelineId>) {
        if let Some(twin) = twin {
            self.twins.pipelines.insert((view, batch), twin);
        }
    }
}

/// Registers what a [`BatchQueue`] of phase `P` keeps between frames.
pub(crate) fn init_resources<P: BatchPhase>(render_app: &mut bevy::app::SubApp) {
    render_app
        .init_resource::<QueuedBatches<P>>()
        .init_resource::<TwinPipelines<P>>();
}
