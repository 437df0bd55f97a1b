//! Queues each batch into its views' shadow, prepass and deferred phases:
//! every light view (a directional light's cascades, a point light's six
//! faces, a spot light) and every camera with a prepass or Bevy's deferred
//! rendering draws the batches it has a cull target for. A batch is drawn
//! there by its material's own prepass pipeline
//! ([`super::material_prepass`]), or, under an application's draw shader,
//! by the plugin's depth-only one ([`super::shadow`]).

use super::batches::GpuBatch;
use super::custom_material::batch_material;
use super::material_prepass::{
    CulledMaterialPrepassPipeline, DrawCulledDepthOnlyPrepass, DrawCulledMaterialPrepass, PrepassView,
};
use super::queue::{BatchPhase, BatchQueue, remove_from_phase};
use super::shadow::{CulledPrepassKey, CulledPrepassPipeline, DrawCulledPrepass};
use super::targets::ViewTargets;
use bevy::asset::UntypedAssetId;
use bevy::core_pipeline::deferred::{AlphaMask3dDeferred, Opaque3dDeferred};
use bevy::core_pipeline::prepass::{AlphaMask3dPrepass, DeferredPrepass, Opaque3dPrepass};
use bevy::ecs::system::SystemParam;
use bevy::mesh::MeshVertexBufferLayoutRef;
use bevy::pbr::{
    LightKeyCache, MeshPipelineKey, PreparedMaterial, RenderMaterialInstances, RenderMeshInstances, Shadow,
    ViewKeyPrepassCache,
};
use bevy::prelude::*;
use bevy::render::erased_render_asset::ErasedRenderAssets;
use bevy::render::mesh::RenderMesh;
use bevy::render::render_asset::RenderAssets;
use bevy::render::render_phase::{CachedRenderPipelinePhaseItem, DrawFunctionId, ViewBinnedRenderPhases};
use bevy::render::render_resource::{
    CachedRenderPipelineId, PipelineCache, SpecializedMeshPipelineError, SpecializedMeshPipelines,
};
use bevy::render::sync_world::MainEntity;
use bevy::render::view::{ExtractedView, RetainedViewEntity};

/// The phases a batch's prepass draws go to, and Bevy's own phases its
/// entity's mesh would otherwise be drawn in.
#[derive(SystemParam)]
pub(crate) struct PrepassPhases<'w> {
    shadow: BatchQueue<'w, Shadow>,
    prepass: BatchQueue<'w, Opaque3dPrepass>,
    /// The batches' G-buffer draws: Bevy 0.19 renders its opaque deferred
    /// phase only when it holds meshes, and never its non-mesh items, so a
    /// view whose only deferred draws are batches would draw none; the
    /// alpha-mask deferred phase, rendered right after it into the same
    /// G-buffer, renders them.
    deferred: BatchQueue<'w, AlphaMask3dDeferred>,
    opaque_deferred: ResMut<'w, ViewBinnedRenderPhases<Opaque3dDeferred>>,
    alpha_mask_prepass: ResMut<'w, ViewBinnedRenderPhases<AlphaMask3dPrepass>>,
}

/// What the specializers of a batch's prepass draws read.
#[derive(SystemParam)]
pub(crate) struct PrepassPipelines<'w> {
    depth_only: Option<Res<'w, CulledPrepassPipeline>>,
    depth_only_pipelines: ResMut<'w, SpecializedMeshPipelines<CulledPrepassPipeline>>,
    material: Option<ResMut<'w, CulledMaterialPrepassPipeline>>,
    draw_shader: Option<Res<'w, super::draw::CulledPipeline>>,
    cache: Res<'w, PipelineCache>,
    materials: Res<'w, ErasedRenderAssets<PreparedMaterial>>,
    material_instances: Res<'w, RenderMaterialInstances>,
    meshes: Res<'w, RenderAssets<RenderMesh>>,
    mesh_instances: Res<'w, RenderMeshInstances>,
    light_keys: Res<'w, LightKeyCache>,
    prepass_keys: Res<'w, ViewKeyPrepassCache>,
}

/// Which of a view's phases a batch's prepass draw goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PrepassPhase {
    Shadow,
    Prepass,
    Deferred,
}

/// The render command a batch's prepass draw runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PrepassCommand {
    /// The plugin's depth-only pipeline (an application's draw shader).
    DepthOnlyPlugin,
    /// Bevy's prepass pipeline with the material's bind group.
    Material,
    /// Bevy's depth-only opaque prepass pipeline (an empty group 3).
    DepthOnly,
}

/// A batch's prepass draw for one view.
struct QueuedDraw {
    pipeline: CachedRenderPipelineId,
    command: PrepassCommand,
    /// The pipeline of the instances that wind backwards, for a batch with
    /// both windings.
    twin: Option<CachedRenderPipelineId>,
    phase: PrepassPhase,
}

/// The draw functions of one phase, by command.
struct PhaseCommands {
    depth_only_plugin: DrawFunctionId,
    material: DrawFunctionId,
    depth_only: DrawFunctionId,
}

impl PhaseCommands {
    fn of<P: BatchPhase>(queue: &BatchQueue<P>) -> Self {
        Self {
            depth_only_plugin: queue.draw_function::<DrawCulledPrepass>(),
            material: queue.draw_function::<DrawCulledMaterialPrepass>(),
            depth_only: queue.draw_function::<DrawCulledDepthOnlyPrepass>(),
        }
    }

    fn id(&self, command: PrepassCommand) -> DrawFunctionId {
        match command {
            PrepassCommand::DepthOnlyPlugin => self.depth_only_plugin,
            PrepassCommand::Material => self.material,
            PrepassCommand::DepthOnly => self.depth_only,
        }
    }
}

/// Registers the prepass render commands with a phase.
pub(crate) fn add_render_commands<P: CachedRenderPipelinePhaseItem>(render_app: &mut SubApp) {
    use bevy::render::render_phase::AddRenderCommand;
    render_app
        .add_render_command::<P, DrawCulledPrepass>()
        .add_render_command::<P, DrawCulledMaterialPrepass>()
        .add_render_command::<P, DrawCulledDepthOnlyPrepass>();
}

impl PrepassPipelines<'_> {
    /// The prepass draw of `data` for a view of `view` kind and a mesh
    /// and view of `key`; `None` until Bevy has prepared the batch's
    /// material, and where the material draws no prepass (or no shadow).
    fn specialize(
        &mut self,
        main_entity: &MainEntity,
        data: &super::extract::BatchData,
        key: MeshPipelineKey,
        layout: &MeshVertexBufferLayoutRef,
        view: PrepassView,
    ) -> Option<Result<QueuedDraw, SpecializedMeshPipelineError>> {
        let camera = view != PrepassView::Shadow;
        // Shadow views draw both levels of a cross-fade in full.
        let cross_fade = camera && data.cross_fades();
        let draw_shader = self.draw_shader.as_ref().is_some_and(|p| p.shader.is_some());
        if draw_shader {
            let pipeline = self.depth_only.as_deref()?;
            let key = CulledPrepassKey {
                mesh: key,
                alpha_mask: data.material.alpha_mask(),
                cross_fade,
            };
            let id = self
                .depth_only_pipelines
                .specialize(&self.cache, pipeline, key, layout);
            return Some(id.map(|pipeline| QueuedDraw {
                pipeline,
                command: PrepassCommand::DepthOnlyPlugin,
                twin: None,
                phase: if camera {
                    PrepassPhase::Prepass
                } else {
                    PrepassPhase::Shadow
                },
            }));
        }
        let material = batch_material(&self.material_instances, main_entity);
        let windings = data.windings();
        let prepass = self.material.as_deref_mut()?;
        let mut specialize = |clockwise| {
            prepass.specialize_for(
                &self.cache,
                &self.materials,
                material,
                key,
                view,
                cross_fade,
                clockwise,
                layout,
            )
        };
        let first = match specialize(windings.first_clockwise)? {
            Ok(first) => first,
            Err(e) => return Some(Err(e)),
        };
        let twin = match windings.both.then(|| specialize(true)).flatten() {
            Some(Ok(twin)) => Some(twin.pipeline),
            Some(Err(e)) => return Some(Err(e)),
            None => None,
        };
        Some(Ok(QueuedDraw {
            pipeline: first.pipeline,
            command: if first.binds_material {
                PrepassCommand::Material
            } else {
                PrepassCommand::DepthOnly
            },
            twin,
            phase: match (camera, first.deferred) {
                (false, _) => PrepassPhase::Shadow,
                (true, false) => PrepassPhase::Prepass,
                (true, true) => PrepassPhase::Deferred,
            },
        }))
    }
}

impl PrepassPhases<'_> {
    /// Takes out last frame's items of the plugin, and Bevy's own items for
    /// the batch entities (a material on a batch entity makes Bevy queue
    /// its mesh at the entity's transform: the plugin draws the batch
    /// instead).
    fn clear(&mut self, views: impl Iterator<Item = RetainedViewEntity>, batches: &[MainEntity]) {
        self.shadow.clear();
        self.prepass.clear();
        self.deferred.clear();
        for view in views {
            let mains = || batches.iter().copied();
            self.shadow.remove(&view, mains());
            self.prepass.remove(&view, mains());
            self.deferred.remove(&view, mains());
            remove_from_phase(&mut self.alpha_mask_prepass, &view, mains());
            remove_from_phase(&mut self.opaque_deferred, &view, mains());
        }
    }

    /// The draw functions of the three phases, by command.
    fn commands(&self) -> [PhaseCommands; 3] {
        [
            PhaseCommands::of(&self.shadow),
            PhaseCommands::of(&self.prepass),
            PhaseCommands::of(&self.deferred),
        ]
    }

    /// Whether `view` has the phases of a `kind` view.
    fn has(&self, view: &RetainedViewEntity, kind: PrepassView) -> bool {
        match kind {
            PrepassView::Shadow => self.shadow.has(view),
            PrepassView::Camera { .. } => self.prepass.has(view) || self.deferred.has(view),
        }
    }

    /// Adds `draw` of batch `(entity, main_entity)` drawing `mesh` to its
    /// phase of `view` (`view_entity` in the render world), through that
    /// phase's [`BatchQueue`].
    fn add(
        &mut self,
        view: (Entity, RetainedViewEntity),
        batch: (Entity, MainEntity),
        mesh: UntypedAssetId,
        draw: &QueuedDraw,
        commands: &[PhaseCommands; 3],
    ) {
        let [shadow, prepass, deferred] = commands;
        let function = |commands: &PhaseCommands| (draw.pipeline, commands.id(draw.command));
        match draw.phase {
            PrepassPhase::Shadow => self.shadow.add(view, batch, mesh, function(shadow), draw.twin),
            PrepassPhase::Prepass => self.prepass.add(view, batch, mesh, function(prepass), draw.twin),
            PrepassPhase::Deferred => self
                .deferred
                .add(view, batch, mesh, function(deferred), draw.twin),
        };
    }
}

/// Puts each (light view, batch) with a cull target into the light view's
/// `Shadow` phase, and each (camera with a prepass, batch) into its
/// `Opaque3dPrepass` phase, or its deferred phase where the camera renders
/// deferred and the batch's material is deferred, as non-mesh items.
pub(crate) fn queue_prepass_batches(
    mut pipelines: PrepassPipelines,
    mut phases: PrepassPhases,
    targets: Res<ViewTargets>,
    batches: Query<(Entity, &MainEntity, &super::extract::BatchData), With<GpuBatch>>,
    views: Query<(Entity, &ExtractedView, Has<DeferredPrepass>)>,
    every_batch: Query<&MainEntity, With<super::extract::BatchData>>,
) {
    // Bevy's own items go for every batch entity, also those drawn in a
    // combined batch or not uploaded yet.
    let mains: Vec<MainEntity> = every_batch.iter().copied().collect();
    phases.clear(views.iter().map(|(_, v, _)| v.retained_view_entity), &mains);
    let commands = phases.commands();
    for (view_entity, view, deferred) in &views {
        let rve = view.retained_view_entity;
        // A view is a light's (its shadow phase) or a camera with a prepass.
        let (view_key, kind) = if let Some(key) = pipelines.light_keys.get(&rve) {
            (*key, PrepassView::Shadow)
        } else if let Some(key) = pipelines.prepass_keys.get(&rve) {
            (*key, PrepassView::Camera { deferred })
        } else {
            continue;
        };
        if !phases.has(&rve, kind) {
            continue;
        }
        for (entity, main_entity, data) in &batches {
            // Specialized from the first frame the view sees the batch (its
            // pipeline compiles while the cull's kernels do), queued once
            // the batch has its cull target.
            if !targets.seen.contains(&(view_entity, entity)) {
                continue;
            }
            let Some(mesh_instance) = pipelines.mesh_instances.render_mesh_queue_data(*main_entity) else {
                continue;
            };
            let mesh_id = mesh_instance.mesh_asset_id();
            let Some(mesh) = pipelines.meshes.get(mesh_id) else {
                continue;
            };
            let key = view_key | MeshPipelineKey::from_bits_retain(mesh.key_bits.bits());
            let layout = mesh.layout.clone();
            let draw = match pipelines.specialize(main_entity, data, key, &layout, kind) {
                Some(Ok(draw)) => draw,
                Some(Err(e)) => {
                    error!("GPU culling: {e}");
                    continue;
                }
                None => continue,
            };
            if !targets.map.contains_key(&(view_entity, entity)) {
                continue;
            }
            let batch = (entity, *main_entity);
            phases.add((view_entity, rve), batch, mesh_id.untyped(), &draw, &commands);
        }
    }
}
