//! Drawing the survivors: Bevy's material pipeline for the batch's material
//! (`custom_material`), behind a vertex shader that fetches each instance
//! through the cull's output, and one indirect draw per (view, batch) and
//! level of detail. An application's own draw shader
//! ([`crate::GpuCullPlugin::draw_shader`]) replaces the material's shaders
//! with the plugin's bindings instead.

use super::bindings::{DrawShaderRef, InstanceBindings};
use super::custom_material::{
    BatchDrawForm, CulledMaterialPipeline, SetBatchMaterialBindGroup, batch_material, renders_deferred,
};
use super::queue::{BatchQueue, TwinPipelines};
use super::targets::{ViewTarget, ViewTargets};
use crate::stats::{StatMessage, StatSender};
use bevy::core_pipeline::core_3d::{AlphaMask3d, Opaque3d};
use bevy::core_pipeline::prepass::DeferredPrepass;
use bevy::ecs::system::{SystemParamItem, lifetimeless::SRes};
use bevy::material::RenderPhaseType;
use bevy::mesh::MeshVertexBufferLayoutRef;
use bevy::pbr::{
    MATERIAL_BIND_GROUP_INDEX, MeshPipeline, MeshPipelineKey, PreparedMaterial, RenderMaterialInstances,
    RenderMeshInstances, SetMeshViewBindGroup, SetMeshViewBindingArrayBindGroup, Transmissive3d,
    ViewKeyCache,
};
use bevy::prelude::*;
use bevy::render::erased_render_asset::ErasedRenderAssets;
use bevy::render::mesh::allocator::MeshAllocator;
use bevy::render::mesh::{RenderMesh, RenderMeshBufferInfo};
use bevy::render::render_asset::RenderAssets;
use bevy::render::render_phase::{
    DrawFunctionId, PhaseItem, RenderCommand, RenderCommandResult, SetItemPipeline, TrackedRenderPass,
    ViewBinnedRenderPhases, ViewSortedRenderPhases,
};
use bevy::render::render_resource::{
    BindGroupLayoutDescriptor, CachedRenderPipelineId, PipelineCache, RenderPipelineDescriptor,
    SpecializedMeshPipeline, SpecializedMeshPipelineError, SpecializedMeshPipelines,
};
use bevy::render::sync_world::MainEntity;
use bevy::render::view::{ExtractedView, RetainedViewEntity};
use bevy::shader::{Shader, ShaderRef};
use std::sync::atomic::{AtomicBool, Ordering};

/// Bevy's mesh pipeline with an application's draw shader
/// ([`crate::GpuCullPlugin::draw_shader`]).
#[derive(Resource)]
pub(crate) struct CulledPipeline {
    mesh_pipeline: MeshPipeline,
    /// The application's draw shader; `None` draws every batch with its
    /// material's shaders.
    pub shader: Option<Handle<Shader>>,
    /// Group 2: the batch's bindings.
    instance_layout: BindGroupLayoutDescriptor,
}

pub(crate) fn init_pipeline(
    mut commands: Commands,
    mesh_pipeline: Res<MeshPipeline>,
    asset_server: Res<AssetServer>,
    draw_shader: Res<DrawShaderRef>,
    bindings: Res<InstanceBindings>,
) {
    commands.insert_resource(CulledPipeline {
        mesh_pipeline: mesh_pipeline.clone(),
        shader: match &draw_shader.0 {
            ShaderRef::Default => None,
            ShaderRef::Handle(handle) => Some(handle.clone()),
            ShaderRef::Path(path) => Some(asset_server.load(path.clone())),
        },
        instance_layout: bindings.layout.clone(),
    });
}

/// What the main-pass draw is specialized for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CulledPipelineKey {
    pub mesh: MeshPipelineKey,
    /// Sample the lights' shadow maps (the batch has no `NotShadowReceiver`).
    pub shadow_receiver: bool,
    /// The batch's levels cross-fade, dithered (`GpuCullLod::with_cross_fade`).
    pub cross_fade: bool,
    /// The batch's material is alpha-masked (`AlphaMode::Mask`). Only then
    /// does the fragment shader hold the mask's `discard`: a shader that
    /// may discard loses the GPU's early depth test and write, and every
    /// hidden fragment of an opaque batch would be shaded.
    pub alpha_mask: bool,
    /// The front face is clockwise: the draw of the instances that wind
    /// backwards ([`super::extract::BatchData::windings`]).
    pub clockwise: bool,
}

impl SpecializedMeshPipeline for CulledPipeline {
    type Key = CulledPipelineKey;

    fn specialize(
        &self,
        key: Self::Key,
        layout: &MeshVertexBufferLayoutRef,
    ) -> Result<RenderPipelineDescriptor, SpecializedMeshPipelineError> {
        // A cross-fade takes Bevy's visibility-range dither (the shader
        // library's `level_dither`, applied by Bevy's `visibility_range_dither`).
        let mut mesh_key = key.mesh;
        if key.cross_fade {
            mesh_key |= MeshPipelineKey::VISIBILITY_RANGE_DITHER;
        }
        let mut descriptor = self.mesh_pipeline.specialize(mesh_key, layout)?;
        descriptor.label = Some("gpu_cull_instanced".into());
        let shader = self.shader.clone().unwrap_or_default();
        descriptor.vertex.shader = shader.clone();
        if let Some(fragment) = descriptor.fragment.as_mut() {
            fragment.shader = shader;
            if key.shadow_receiver {
                fragment.shader_defs.push("GPU_CULL_SHADOW_RECEIVER".into());
            }
            if key.alpha_mask {
                fragment.shader_defs.push("GPU_CULL_ALPHA_MASK".into());
            }
        }
        // Group 2 holds Bevy's per-mesh uniforms; ours replaces it.
        descriptor.layout.truncate(2);
        descriptor.layout.push(self.instance_layout.clone());
        if key.clockwise {
            super::custom_material::wind_clockwise(&mut descriptor);
        }
        super::custom_material::keep_order_if_blended(&mut descriptor);
        Ok(descriptor)
    }
}

/// Takes the items of `entities` out of `view`'s phase, where it has one.
/// Queues each (view, batch) with a cull target, drawn by its material's
/// pipeline or the application's draw shader: for a forward camera into the
/// batches drawn first (`opaque_first`; into Bevy's `Opaque3d` phase where
/// the camera has no opaque mesh of Bevy's own), for a deferred one into
/// the view's `Opaque3d` phase (through the shared [`BatchQueue`]).
pub(crate) fn queue_batches(
    mut opaque: BatchQueue<Opaque3d>,
    pipeline: Option<Res<CulledPipeline>>,
    mut pipelines: ResMut<SpecializedMeshPipelines<CulledPipeline>>,
    pipeline_cache: Res<PipelineCache>,
    meshes: Res<RenderAssets<RenderMesh>>,
    mesh_instances: Res<RenderMeshInstances>,
    view_keys: Res<ViewKeyCache>,
    targets: Res<ViewTargets>,
    batches: Query<(Entity, &MainEntity, &super::extract::BatchData), With<super::batches::GpuBatch>>,
    mut alpha_mask_phases: ResMut<ViewBinnedRenderPhases<AlphaMask3d>>,
    views: Query<(Entity, &ExtractedView, Has<DeferredPrepass>)>,
    (material_instances, render_materials, mut material_pipeline): (
        Res<RenderMaterialInstances>,
        Res<ErasedRenderAssets<PreparedMaterial>>,
        Option<ResMut<CulledMaterialPipeline>>,
    ),
    (mut blended, mut transmissive_phases, mut pixels, mut first): (
        super::blend::BlendedQueue,
        ResMut<ViewSortedRenderPhases<Transmissive3d>>,
        ResMut<super::pixels::PixelViews>,
        ResMut<super::opaque_first::GpuCullOpaqueBatches>,
    ),
    every_batch: Query<&MainEntity, With<super::extract::BatchData>>,
) {
    first.clear();
    let views_seen = views.iter().map(|(_, view, _)| view.retained_view_entity);
    let phases = (&mut opaque, &mut blended, &mut *alpha_mask_phases);
    let others = (&mut *transmissive_phases, &mut *pixels);
    take_out_last_frame(phases, others, views_seen, every_batch.iter().copied());
    let Some(pipeline) = pipeline else {
        return;
    };
    let mut specializer = MainPassSpecializer {
        pipeline: &pipeline,
        meshes: &meshes,
        pipelines: &mut pipelines,
        cache: &pipeline_cache,
        material_pipeline: material_pipeline.as_deref_mut(),
        materials: &render_materials,
        material_instances: &material_instances,
        draw: opaque.draw_function::<DrawCulled>(),
        draw_material: opaque.draw_function::<DrawCulledMaterial>(),
    };
    for (view_entity, view, deferred) in &views {
        let rve = view.retained_view_entity;
        let Some(view_key) = view_keys.get(&rve).filter(|_| opaque.has(&rve)) else {
            continue;
        };
        for (entity, main_entity, data) in &batches {
            // Specialized as soon as the view sees the batch, so that the
            // pipeline compiles while the cull's kernels do; queued once
            // the batch has its cull target.
            if !targets.seen.contains(&(view_entity, entity))
                || (deferred && specializer.left_to_deferred_lighting(main_entity))
            {
                continue;
            }
            let Some((mesh_id, mesh)) = batch_mesh(&mesh_instances, &meshes, main_entity) else {
                continue;
            };
            let key = *view_key | MeshPipelineKey::from_bits_retain(mesh.key_bits.bits());
            let Some((id, draw_function, twin)) =
                specializer.specialize_windings(main_entity, data, key, &mesh.layout)
            else {
                continue;
            };
            if !targets.map.contains_key(&(view_entity, entity)) {
                continue;
            }
            if let Some(blend) = specializer.blended(main_entity) {
                let draw = blended_draw(
                    blend,
                    key,
                    ((view_entity, rve), (entity, *main_entity)),
                    data,
                    (id, twin),
                    mesh,
                );
                blended.add::<DrawCulledBlended>(draw, &targets, &meshes);
                continue;
            }
            let (view, batch) = (((view_entity, rve), deferred), (entity, *main_entity));
            queue_opaque(
                (&mut opaque, &mut first),
                view,
                batch,
                mesh_id,
                ((id, draw_function), twin),
            );
            specializer.queue_pixels(&mut pixels, (view_entity, entity, main_entity), data, *view_key);
        }
    }
    let forward = views.iter().filter(|(_, _, deferred)| !deferred);
    let forward = forward.map(|(entity, view, _)| (entity, view.retained_view_entity));
    super::opaque_first::hand_lone_cameras_to_bevy(&mut first, &mut opaque, forward, &pixels);
    first.sort();
}

/// Queues an opaque batch's draw (`pipeline`, `draw_function`, from
/// `mesh`'s buffers, and `twin` for its instances that wind backwards):
/// for a forward camera among the batches drawn first (`opaque_first`),
/// for a deferred one into the view's `Opaque3d` phase.
fn queue_opaque(
    (opaque, first): (
        &mut BatchQueue<Opaque3d>,
        &mut super::opaque_first::GpuCullOpaqueBatches,
    ),
    ((view_entity, view), deferred): ((Entity, RetainedViewEntity), bool),
    batch: (Entity, MainEntity),
    mesh: AssetId<Mesh>,
    (pipeline, twin): (
        (CachedRenderPipelineId, DrawFunctionId),
        Option<CachedRenderPipelineId>,
    ),
) {
    if deferred {
        opaque.add((view_entity, view), batch, mesh.untyped(), pipeline, twin);
    } else {
        opaque.add_twin(view_entity, batch.0, twin);
        first.add(view_entity, batch, mesh.untyped(), pipeline);
    }
}

/// A blended batch's draw in a view's sorted phase: sorted back to front,
/// except where Bevy's order-independent transparency composites what
/// `AlphaMode::Blend` draws in any order.
fn blended_draw<'a>(
    (depth_bias, alpha_mode): (f32, AlphaMode),
    key: MeshPipelineKey,
    (view, batch): ((Entity, RetainedViewEntity), (Entity, MainEntity)),
    data: &'a super::extract::BatchData,
    (pipeline, twin): (CachedRenderPipelineId, Option<CachedRenderPipelineId>),
    mesh: &RenderMesh,
) -> super::blend::BlendedDraw<'a> {
    let composited = key.contains(MeshPipelineKey::OIT_ENABLED) && alpha_mode == AlphaMode::Blend;
    super::blend::BlendedDraw {
        sorted: !composited,
        view,
        batch,
        data,
        pipeline,
        twin,
        depth_bias,
        indexed: matches!(mesh.buffer_info, RenderMeshBufferInfo::Indexed { .. }),
    }
}

/// The batch entity's mesh, once Bevy has prepared it.
fn batch_mesh<'a>(
    mesh_instances: &RenderMeshInstances,
    meshes: &'a RenderAssets<RenderMesh>,
    main_entity: &MainEntity,
) -> Option<(AssetId<Mesh>, &'a RenderMesh)> {
    let id = mesh_instances
        .render_mesh_queue_data(*main_entity)?
        .mesh_asset_id();
    Some((id, meshes.get(id)?))
}

/// Takes last frame's batch items out of every view's main-pass phases (the
/// live ones go back in), Bevy's own items for the batch entities `mains`
/// ([`remove_bevy_items`]: every entity with a render-world copy, also one
/// drawn in a combined batch or not uploaded yet), and the pixel levels'
/// resolve pipelines.
fn take_out_last_frame(
    (opaque, blended, alpha_mask): (
        &mut BatchQueue<Opaque3d>,
        &mut super::blend::BlendedQueue,
        &mut ViewBinnedRenderPhases<AlphaMask3d>,
    ),
    (transmissive, pixels): (
        &mut ViewSortedRenderPhases<Transmissive3d>,
        &mut super::pixels::PixelViews,
    ),
    views: impl Iterator<Item = RetainedViewEntity>,
    mains: impl Iterator<Item = MainEntity>,
) {
    let mains: Vec<MainEntity> = mains.collect();
    opaque.clear();
    blended.clear();
    pixels.pipelines.clear();
    for view in views {
        opaque.remove(&view, mains.iter().copied());
        super::queue::remove_bevy_items(&view, &mains, alpha_mask, (blended.phases(), &mut *transmissive));
    }
}

/// What specializes a batch's main-pass pipeline: the application's draw
/// shader with the plugin's bindings, or the batch's material as Bevy
/// prepared it.
struct MainPassSpecializer<'a> {
    pipeline: &'a CulledPipeline,
    meshes: &'a RenderAssets<RenderMesh>,
    pipelines: &'a mut SpecializedMeshPipelines<CulledPipeline>,
    cache: &'a PipelineCache,
    material_pipeline: Option<&'a mut CulledMaterialPipeline>,
    materials: &'a ErasedRenderAssets<PreparedMaterial>,
    material_instances: &'a RenderMaterialInstances,
    draw: DrawFunctionId,
    draw_material: DrawFunctionId,
}

impl MainPassSpecializer<'_> {
    /// A view's resolve of the batch's pixel levels (`super::pixels`), for a
    /// view that takes them: its pipeline, kept for the view's splat.
    fn queue_pixels(
        &mut self,
        pixels: &mut super::pixels::PixelViews,
        (view, batch, main_entity): (Entity, Entity, &MainEntity),
        data: &super::extract::BatchData,
        view_key: MeshPipelineKey,
    ) {
        if super::pixels::pixel_levels(data) == 0 || !pixels.views.contains_key(&view) {
            return;
        }
        if let Some(id) = self.specialize_pixels(main_entity, data, view_key) {
            pixels.pipelines.insert((view, batch), id);
        }
    }

    /// The resolve of the batch's pixel levels with its
    /// material (`super::pixels`), keyed by its first pixel level's mesh;
    /// `None` until the material is prepared, where it failed (logged),
    /// and for a material that cannot shade pixels or an application's draw
    /// shader (the levels' meshes are drawn).
    fn specialize_pixels(
        &mut self,
        main_entity: &MainEntity,
        data: &super::extract::BatchData,
        view_key: MeshPipelineKey,
    ) -> Option<CachedRenderPipelineId> {
        let material = self
            .materials
            .get(batch_material(self.material_instances, main_entity))?;
        if self.pipeline.shader.is_some() || !super::custom_material::shades_pixels(material, self.materials)
        {
            return None;
        }
        let level = data.lod_pixels.trailing_zeros() as usize;
        let mesh = self.meshes.get(data.lod.get(level)?.0)?;
        let key = view_key | MeshPipelineKey::from_bits_retain(mesh.key_bits.bits());
        let form = BatchDrawForm {
            clockwise: false,
            instance_colors: data.instance_colors(),
            pixels: true,
            texture_coordinates: true,
        };
        self.material_pipeline
            .as_deref_mut()?
            .specialize_for(
                self.cache,
                self.materials,
                batch_material(self.material_instances, main_entity),
                key,
                false,
                form,
                &mesh.layout,
            )?
            .map_err(|e| error!("GPU culling: {e}"))
            .ok()
    }

    /// The depth bias and alpha mode of the batch's material where Bevy
    /// draws it blended (its `Transparent3d` phase), `None` otherwise. An
    /// application's draw shader draws opaque.
    fn blended(&self, main_entity: &MainEntity) -> Option<(f32, AlphaMode)> {
        let material = self
            .materials
            .get(batch_material(self.material_instances, main_entity))?;
        let properties = &material.properties;
        let transparent = matches!(properties.render_phase_type, RenderPhaseType::Transparent);
        (self.pipeline.shader.is_none() && transparent)
            .then_some((properties.depth_bias, properties.alpha_mode))
    }

    /// Whether a camera with Bevy's deferred rendering leaves the batch to
    /// its deferred lighting: the batch's material renders deferred, so its
    /// prepass wrote it into the G-buffer (an application's draw shader
    /// draws forward).
    fn left_to_deferred_lighting(&self, main_entity: &MainEntity) -> bool {
        self.pipeline.shader.is_none()
            && self
                .materials
                .get(batch_material(self.material_instances, main_entity))
                .is_some_and(renders_deferred)
    }

    /// The batch's pipeline for its first winding, with its draw function,
    /// and for a batch with both windings the other's (the instances that
    /// wind backwards, drawn by the same item with the other front face).
    /// `None` where it is not ready or failed (logged).
    fn specialize_windings(
        &mut self,
        main_entity: &MainEntity,
        data: &super::extract::BatchData,
        key: MeshPipelineKey,
        layout: &MeshVertexBufferLayoutRef,
    ) -> Option<(
        CachedRenderPipelineId,
        DrawFunctionId,
        Option<CachedRenderPipelineId>,
    )> {
        let windings = data.windings();
        let mut specialize = |clockwise| {
            self.specialize(main_entity, data, key, layout, clockwise)?
                .map_err(|e| error!("GPU culling: {e}"))
                .ok()
        };
        let (id, draw_function) = specialize(windings.first_clockwise)?;
        let twin = windings
            .both
            .then(|| specialize(true))
            .flatten()
            .map(|(twin, _)| twin);
        Some((id, draw_function, twin))
    }

    /// The pipeline and draw function of `data`'s main-pass draw for a
    /// view and mesh of `key`, with the clockwise front face where
    /// `clockwise`; `None` until Bevy has prepared the batch's material
    /// (the batch is not drawn until then, as Bevy's meshes wait for
    /// theirs).
    fn specialize(
        &mut self,
        main_entity: &MainEntity,
        data: &super::extract::BatchData,
        key: MeshPipelineKey,
        layout: &MeshVertexBufferLayoutRef,
        clockwise: bool,
    ) -> Option<Result<(CachedRenderPipelineId, DrawFunctionId), SpecializedMeshPipelineError>> {
        if self.pipeline.shader.is_some() {
            let key = CulledPipelineKey {
                mesh: key,
                shadow_receiver: data.shadow_receiver,
                cross_fade: data.cross_fades(),
                alpha_mask: data.material.alpha_mask(),
                clockwise,
            };
            let draw = self.draw;
            return Some(
                self.pipelines
                    .specialize(self.cache, self.pipeline, key, layout)
                    .map(|id| (id, draw)),
            );
        }
        let draw = self.draw_material;
        self.material_pipeline
            .as_deref_mut()?
            .specialize_for(
                self.cache,
                self.materials,
                batch_material(self.material_instances, main_entity),
                key,
                data.cross_fades(),
                BatchDrawForm {
                    clockwise,
                    instance_colors: data.instance_colors(),
                    pixels: false,
                    texture_coordinates: data.material.reads_texture_coordinates,
                },
                layout,
            )
            .map(|specialized| specialized.map(|id| (id, draw)))
    }
}

pub(crate) type DrawCulled = (
    SetItemPipeline,
    SetMeshViewBindGroup<0>,
    SetMeshViewBindingArrayBindGroup<1>,
    DrawCulledInstances,
    DrawCulledTwin,
);

/// The draw of a batch with its material: Bevy's material bind group at
/// group 3.
pub(crate) type DrawCulledMaterial = (
    SetItemPipeline,
    SetMeshViewBindGroup<0>,
    SetMeshViewBindingArrayBindGroup<1>,
    SetBatchMaterialBindGroup<MATERIAL_BIND_GROUP_INDEX>,
    DrawCulledInstances,
    DrawCulledTwin,
);

/// The draw of a blended batch (Bevy's `Transparent3d` phase): its
/// material's, its levels coarsest first (each level's list is sorted back
/// to front, and coarser levels lie farther).
pub(crate) type DrawCulledBlended = (
    SetItemPipeline,
    SetMeshViewBindGroup<0>,
    SetMeshViewBindingArrayBindGroup<1>,
    SetBatchMaterialBindGroup<MATERIAL_BIND_GROUP_INDEX>,
    DrawCulledLevels<true>,
    DrawCulledTwin,
);

/// A batch's pixel levels' resolve (`super::pixels`): its material's
/// draw of the view's pixels holding its instances, over the tiles they
/// lie in.
pub(crate) type DrawCulledPixels = (
    SetItemPipeline,
    SetMeshViewBindGroup<0>,
    SetMeshViewBindingArrayBindGroup<1>,
    SetBatchMaterialBindGroup<MATERIAL_BIND_GROUP_INDEX>,
    super::pixels::DrawPixelTiles<2>,
);

/// Set when a culled batch is drawn; reported and cleared once per frame
/// (`report_drawn`), for [`crate::GpuCullStats::drawn_frames`].
#[derive(Resource, Default)]
pub(crate) struct DrawnThisFrame(pub AtomicBool);

/// Sends [`crate::GpuCullStats::drawn_frames`]'s message for a frame that drew.
pub(crate) fn report_drawn(drawn: Res<DrawnThisFrame>, sender: Res<StatSender>) {
    if drawn.0.swap(false, Ordering::Relaxed) {
        let _ = sender.0.lock().map(|s| s.send(StatMessage::Drawn));
    }
}

/// Which lists the draws take: Bevy renders the prepass phases twice for a
/// camera with its own two-phase occlusion culling (an early and a late
/// prepass, the same phase items), so the draw command asks this which pass
/// it is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum DrawPhase {
    /// Shadow passes and the early prepass: every target's lists, an
    /// occluded camera's early ones.
    Early = 0,
    /// The late prepass (and Bevy's late shadow pass): only the late
    /// phase's lists; everything else was drawn early.
    Late = 1,
    /// The main pass: all lists.
    Main = 2,
}

/// The [`DrawPhase`] of the view being rendered (`Core3d` runs its views
/// one after the other): set by the three systems below, at the start of a
/// view's run (before its culls and shadow passes), before the late
/// prepass and before the main pass. No cull system touches it.
#[derive(Resource)]
pub(crate) struct CurrentDrawPhase(std::sync::atomic::AtomicU8);

impl Default for CurrentDrawPhase {
    fn default() -> Self {
        Self(std::sync::atomic::AtomicU8::new(DrawPhase::Main as u8))
    }
}

impl CurrentDrawPhase {
    pub fn set(&self, phase: DrawPhase) {
        self.0.store(phase as u8, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn get(&self) -> DrawPhase {
        match self.0.load(std::sync::atomic::Ordering::Relaxed) {
            0 => DrawPhase::Early,
            1 => DrawPhase::Late,
            _ => DrawPhase::Main,
        }
    }
}

/// At the start of every view's run: its culls, shadow passes and early
/// prepass come next.
pub(crate) fn enter_early_phase(phase: Res<CurrentDrawPhase>) {
    phase.set(DrawPhase::Early);
}

/// Before Bevy's late prepass (and late shadow pass) of every view.
pub(crate) fn enter_late_phase(phase: Res<CurrentDrawPhase>) {
    phase.set(DrawPhase::Late);
}

/// Before the main pass of every view.
pub(crate) fn enter_main_phase(phase: Res<CurrentDrawPhase>) {
    phase.set(DrawPhase::Main);
}

/// Binds the batch's instance data for this view and issues its indirect
/// draws, one per level of detail, finest first.
pub(crate) type DrawCulledInstances = DrawCulledLevels<false>;

/// [`DrawCulledInstances`], with the levels coarsest first where
/// `COARSEST_FIRST`.
pub(crate) struct DrawCulledLevels<const COARSEST_FIRST: bool>;

impl<P: PhaseItem, const COARSEST_FIRST: bool> RenderCommand<P> for DrawCulledLevels<COARSEST_FIRST> {
    type Param = (
        SRes<ViewTargets>,
        SRes<RenderAssets<RenderMesh>>,
        SRes<MeshAllocator>,
        SRes<DrawnThisFrame>,
        SRes<CurrentDrawPhase>,
        SRes<super::pixels::PixelViews>,
    );
    type ViewQuery = Entity;
    type ItemQuery = ();

    fn render<'w>(
        item: &P,
        view: Entity,
        _: Option<()>,
        (targets, meshes, allocator, drawn, phase, pixels): SystemParamItem<'w, '_, Self::Param>,
        pass: &mut TrackedRenderPass<'w>,
    ) -> RenderCommandResult {
        let (targets, meshes, allocator) =
            (targets.into_inner(), meshes.into_inner(), allocator.into_inner());
        let Some(target) = targets.map.get(&(view, item.entity())) else {
            return RenderCommandResult::Skip;
        };
        let levels = Levels {
            coarsest_first: COARSEST_FIRST,
            as_pixels: pixels.levels_drawn_as_pixels(view, item.entity()),
        };
        let drew = draw_lists(target, phase.get(), levels, meshes, allocator, pass);
        if !matches!(drew, RenderCommandResult::Success) {
            return drew;
        }
        // A frame "drew" when a batch with instances was drawn: the count
        // the GPU wrote is known a frame or two later, so the latest one
        // read back stands for it.
        if target.has_instances() {
            drawn.0.store(true, Ordering::Relaxed);
        }
        RenderCommandResult::Success
    }
}

/// Which of a target's levels a draw takes, in which order.
#[derive(Clone, Copy)]
struct Levels {
    coarsest_first: bool,
    /// The levels the view drew as pixels (bit `k` for level `k`):
    /// skipped.
    as_pixels: u32,
}

/// Draws `target`'s lists for `phase`: an occluded camera's early lists in
/// the early prepass, its late lists in the late prepass, both in the main
/// pass; every other target's lists in every pass but the late prepass
/// (they were drawn in the early one). One indirect draw per level of
/// detail: the level's mesh, from the level's list of survivors, with the
/// level's arguments; none for a level drawn as pixels.
fn draw_lists<'w>(
    target: &'w ViewTarget,
    phase: DrawPhase,
    Levels {
        coarsest_first,
        as_pixels,
    }: Levels,
    meshes: &'w RenderAssets<RenderMesh>,
    allocator: &'w MeshAllocator,
    pass: &mut TrackedRenderPass<'w>,
) -> RenderCommandResult {
    let early =
        (phase != DrawPhase::Late).then_some((&target.target, &target.draw_args, &target.bind_groups));
    let late = target
        .late
        .as_ref()
        .filter(|_| phase != DrawPhase::Early)
        .map(|l| (&l.target, &l.draw_args, &l.bind_groups));
    for (lists, draw_args, bind_groups) in early.into_iter().chain(late) {
        if bind_groups.len() != target.meshes.len() {
            return RenderCommandResult::Skip;
        }
        let levels = target.meshes.len();
        for k in 0..levels {
            let level = if coarsest_first { levels - 1 - k } else { k };
            if as_pixels & (1 << level) != 0 {
                continue;
            }
            let (mesh_id, bind_group) = (&target.meshes[level], &bind_groups[level]);
            let Some(mesh) = meshes.get(*mesh_id) else {
                return RenderCommandResult::Skip;
            };
            let Some(vertices) = allocator.mesh_vertex_slice(mesh_id) else {
                return RenderCommandResult::Skip;
            };
            let args_offset = lists.draw_args_offset(target.slot + level as u32);
            pass.set_bind_group(2, bind_group, &[]);
            pass.set_vertex_buffer(0, vertices.buffer.slice(..));
            match &mesh.buffer_info {
                bevy::render::mesh::RenderMeshBufferInfo::Indexed { index_format, .. } => {
                    let Some(indices) = allocator.mesh_index_slice(mesh_id) else {
                        return RenderCommandResult::Skip;
                    };
                    pass.set_index_buffer(indices.buffer.slice(..), *index_format);
                    pass.draw_indexed_indirect(draw_args, args_offset);
                }
                bevy::render::mesh::RenderMeshBufferInfo::NonIndexed => {
                    pass.draw_indirect(draw_args, args_offset);
                }
            }
        }
    }
    RenderCommandResult::Success
}

/// The second draw of a batch whose instances wind both ways:
/// the same lists with the clockwise front face (the vertex stage keeps the
/// instances that wind backwards, which the first draw dropped).
pub(crate) struct DrawCulledTwin;

impl<P: PhaseItem> RenderCommand<P> for DrawCulledTwin {
    type Param = (
        SRes<TwinPipelines<P>>,
        SRes<PipelineCache>,
        SRes<ViewTargets>,
        SRes<RenderAssets<RenderMesh>>,
        SRes<MeshAllocator>,
        SRes<CurrentDrawPhase>,
        SRes<super::pixels::PixelViews>,
    );
    type ViewQuery = Entity;
    type ItemQuery = ();

    fn render<'w>(
        item: &P,
        view: Entity,
        _: Option<()>,
        (twins, cache, targets, meshes, allocator, phase, pixels): SystemParamItem<'w, '_, Self::Param>,
        pass: &mut TrackedRenderPass<'w>,
    ) -> RenderCommandResult {
        let Some(twin) = twins.into_inner().get(view, item.entity()) else {
            return RenderCommandResult::Success;
        };
        let (cache, targets) = (cache.into_inner(), targets.into_inner());
        let (Some(pipeline), Some(target)) = (
            cache.get_render_pipeline(twin),
            targets.map.get(&(view, item.entity())),
        ) else {
            // Still compiling: the instances that wind backwards wait, as
            // a Bevy mesh waits for its pipeline.
            return RenderCommandResult::Success;
        };
        pass.set_render_pipeline(pipeline);
        let levels = Levels {
            coarsest_first: false,
            as_pixels: pixels.levels_drawn_as_pixels(view, item.entity()),
        };
        draw_lists(
            target,
            phase.get(),
            levels,
            meshes.into_inner(),
            allocator.into_inner(),
            pass,
        )
    }
}
