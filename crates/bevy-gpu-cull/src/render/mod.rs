//! The render-world side: extraction, GPU resources, the cull pass per view,
//! and the indirect draw.

mod cull;
mod custom_material;
mod draw;
mod material;
mod material_prepass;
mod prepare;
mod queue_prepass;
mod shadow;
mod views;

use crate::components::{
    CulledInstance, DirtyRanges, GpuCullBounds, GpuCullCells, GpuCullLod, GpuCulledInstances, ScaleRange,
};
use crate::plugin::{GpuCullSettings, GpuCullSystems, StatSender};
use bevy::asset::embedded_asset;
use bevy::camera::visibility::RenderLayers;
use bevy::core_pipeline::core_3d::Opaque3d;
use bevy::core_pipeline::deferred::AlphaMask3dDeferred;
use bevy::core_pipeline::mip_generation::experimental::depth::early_downsample_depth;
use bevy::core_pipeline::prepass::Opaque3dPrepass;
use bevy::core_pipeline::prepass::node::{early_prepass, late_prepass};
use bevy::core_pipeline::schedule::{Core3d, Core3dSystems};
use bevy::ecs::system::SystemState;
use bevy::light::NotShadowReceiver;
use bevy::math::Affine3A;
use bevy::pbr::{
    EARLY_SHADOW_PASS, LATE_SHADOW_PASS, MeshPipelineSystems, Shadow, init_prepass_pipeline,
    per_view_shadow_pass, queue_material_meshes, queue_prepass_material_meshes, queue_shadows,
    shared_shadow_pass,
};
use bevy::platform::collections::HashSet;
use bevy::prelude::*;
use bevy::render::render_phase::AddRenderCommand;
use bevy::render::render_resource::SpecializedMeshPipelines;
use bevy::render::sync_world::RenderEntity;
use bevy::render::{
    ExtractSchedule, GpuResourceAppExt, MainWorld, Render, RenderApp, RenderStartup, RenderSystems,
};
use bevy::shader::load_shader_library;
use cull_core::{LocalFrame, Sphere};

/// A batch in the render world: a copy of the main world's list, kept up to
/// date by applying only the changed ranges, and the ranges still to upload.
#[derive(Component)]
pub(crate) struct BatchData {
    pub instances: Vec<CulledInstance>,
    pub bounds: Sphere,
    /// Upload the whole list (new batch, replaced list, or new GPU buffers).
    pub upload_all: bool,
    /// Ranges to upload when `upload_all` is false.
    pub uploads: DirtyRanges,
    /// The finite scales in the batch, for formats that carry no scale.
    pub scales: ScaleRange,
    /// Whether its instances receive shadows (no `NotShadowReceiver`).
    pub shadow_receiver: bool,
    /// The views that see it (its `RenderLayers`, layer 0 without one).
    pub render_layers: RenderLayers,
    /// Its `MeshMaterial3d<StandardMaterial>`, as the draw uses it.
    pub material: material::BatchMaterial,
    /// Levels of detail, finest first: each level's mesh and smallest
    /// screen size; empty without a (usable) `GpuCullLod`.
    pub lod: Vec<(AssetId<Mesh>, f32)>,
    /// The levels drawn facing the camera (`LodLevel::facing_camera`), bit
    /// `k` for level `k`.
    pub lod_facing: u32,
    /// `GpuCullLod::cross_fade` (0 without levels).
    pub lod_cross_fade: f32,
    /// Culled by cells ([`crate::GpuCullCells`]).
    pub cells: Option<GpuCullCells>,
    /// Its `InheritedVisibility`: a hidden batch is neither culled nor
    /// drawn (its instances stay on the GPU, so showing it uploads nothing).
    /// False too for a transform that places nothing (zero scale).
    pub visible: bool,
    /// Its `GlobalTransform`: the instances are relative to it.
    pub world_from_local: Affine3A,
    /// Last frame's, for motion vectors.
    pub previous_world_from_local: Affine3A,
    /// The space the batch is culled in (views are taken into it).
    pub frame: LocalFrame,
    /// Whether its transform places anything (`frame` is its own).
    pub placed: bool,
}

impl BatchData {
    /// Takes the entity's transform and inherited visibility: the frame is
    /// rebuilt only when the transform changed, and last frame's transform
    /// is kept for motion vectors, as Bevy keeps a mesh's. Writes only what
    /// changed.
    fn place(&mut self, world_from_local: Affine3A, inherited_visible: bool) {
        if self.previous_world_from_local != self.world_from_local {
            self.previous_world_from_local = self.world_from_local;
        }
        if self.world_from_local != world_from_local {
            self.world_from_local = world_from_local;
            let frame = batch_frame(world_from_local);
            self.placed = frame.is_some();
            self.frame = frame.unwrap_or_default();
        }
        let visible = inherited_visible && self.placed;
        if self.visible != visible {
            self.visible = visible;
        }
    }

    /// Whether its levels cross-fade (`GpuCullLod::with_cross_fade`).
    pub fn cross_fades(&self) -> bool {
        self.lod_cross_fade > 0.0 && !self.lod.is_empty()
    }

    /// How the main pass draws the batch's windings: an instance whose
    /// triangles wind the other way round on screen (a mirror image in a
    /// batch that does not mirror, or the other way round) is drawn with
    /// the opposite front face, so that its back faces are culled and lit
    /// as on a mesh.
    pub fn windings(&self) -> Windings {
        let (mirror_images, upright) = self.scales.signs();
        let mirrors = self.frame.mirrors();
        let (clockwise, counter_clockwise) = if mirrors {
            (upright, mirror_images)
        } else {
            (mirror_images, upright)
        };
        Windings {
            first_clockwise: !counter_clockwise,
            both: clockwise && counter_clockwise,
        }
    }

    /// The mesh-space sphere the cull tests the instances of `format` with:
    /// the mesh's, or for a format that carries no scale one covering every
    /// scale the draw applies, so that the cull is never less conservative
    /// than the draw. Cells are computed with it too.
    pub fn cull_bounds(&self, format: cull_core::InstanceFormat) -> Sphere {
        if format.carries_scale() {
            self.bounds
        } else {
            self.scales.cover(self.bounds)
        }
    }
}

/// The main pass's draws of a batch ([`BatchData::windings`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Windings {
    /// Its first draw's front face is clockwise (all its instances wind
    /// backwards).
    pub first_clockwise: bool,
    /// A second draw, with the clockwise front face, draws the instances
    /// that wind backwards.
    pub both: bool,
}

pub(crate) fn build(app: &mut App, sender: StatSender, draw_shader: bevy::shader::ShaderRef) {
    // The draw shader and the instance-fetch library it imports (which custom
    // shaders can import too), embedded in the binary.
    load_shader_library!(app, "shaders/gpu_cull_instance.wgsl");
    load_shader_library!(app, "shaders/gpu_cull_forward_io.wgsl");
    embedded_asset!(app, "shaders/instanced_prepass.wgsl");
    embedded_asset!(app, "shaders/instanced_material.wgsl");
    embedded_asset!(app, "shaders/instanced_material_prepass.wgsl");
    // cull-core's kernels, compiled by Bevy's PipelineCache.
    let cull_shaders = prepare::CullShaders::add_to(app);
    let Some(render_app) = app.get_sub_app_mut(RenderApp) else {
        return;
    };
    render_app
        .insert_resource(sender)
        .insert_resource(cull_shaders)
        .insert_resource(draw::DrawShaderRef(draw_shader))
        .init_resource::<prepare::RenderFrame>()
        .init_resource::<draw::QueuedBatches>()
        .init_resource::<draw::DrawnThisFrame>()
        .init_resource::<draw::TwinPipelines<Opaque3d>>()
        .init_resource::<draw::TwinPipelines<Shadow>>()
        .init_resource::<draw::TwinPipelines<Opaque3dPrepass>>()
        .init_resource::<draw::TwinPipelines<AlphaMask3dDeferred>>()
        .init_resource::<cull::CulledThisFrame>()
        .init_resource::<cull::LightGroupsCulled>()
        .init_resource::<cull::CurrentDrawPhase>()
        // Resources holding GPU objects are (re)created in RenderStartup, which
        // runs again with a new device after a device loss.
        .init_gpu_resource::<prepare::ViewTargets>()
        .init_gpu_resource::<cull::Pyramids>()
        .init_gpu_resource::<SpecializedMeshPipelines<draw::CulledPipeline>>()
        .init_gpu_resource::<SpecializedMeshPipelines<shadow::CulledPrepassPipeline>>()
        .init_resource::<queue_prepass::QueuedPrepassBatches>()
        .add_render_command::<Opaque3d, draw::DrawCulled>()
        .add_render_command::<Opaque3d, draw::DrawCulledMaterial>();
    queue_prepass::add_render_commands::<Shadow>(render_app);
    queue_prepass::add_render_commands::<Opaque3dPrepass>(render_app);
    queue_prepass::add_render_commands::<AlphaMask3dDeferred>(render_app);
    render_app
        .add_systems(
            RenderStartup,
            (
                (
                    draw::init_pipeline.after(MeshPipelineSystems),
                    (
                        shadow::init_prepass_pipeline.after(init_prepass_pipeline),
                        material_prepass::init_pipeline.after(init_prepass_pipeline),
                        custom_material::init_pipeline,
                    ),
                )
                    .chain(),
                prepare::forget_gpu_batches,
            ),
        )
        .add_systems(
            ExtractSchedule,
            (extract_batches, extract_settings).in_set(GpuCullSystems::Extract),
        )
        .add_systems(
            Render,
            (
                (
                    prepare::count_frame,
                    prepare::prepare_culler,
                    prepare::prepare_batches,
                    material::prepare_materials,
                    prepare::prepare_targets,
                )
                    .chain()
                    .in_set(GpuCullSystems::Prepare)
                    .in_set(RenderSystems::PrepareResources),
                // Bevy's material queue removes entities it re-specializes
                // from the bins by main entity; ours re-adds after it.
                draw::queue_batches
                    .in_set(RenderSystems::QueueMeshes)
                    .after(queue_material_meshes),
                queue_prepass::queue_prepass_batches
                    .in_set(RenderSystems::QueueMeshes)
                    .after(queue_shadows)
                    .after(queue_prepass_material_meshes),
                (
                    cull::report_culled_frame,
                    cull::read_back_counts,
                    cull::prune_pyramids,
                    draw::report_drawn,
                    prepare::report_gpu_bytes,
                )
                    .in_set(RenderSystems::Cleanup),
            ),
        )
        .add_systems(
            Core3d,
            (
                // A camera with its directional cascades (drawn in its run),
                // before its shadow pass, prepass and main pass.
                cull::cull_view
                    .before(Core3dSystems::Prepass)
                    .before(per_view_shadow_pass::<EARLY_SHADOW_PASS>),
                // Point and spot lights' views run before the cameras.
                cull::cull_light_view.before(shared_shadow_pass::<EARLY_SHADOW_PASS>),
                // Occlusion culling's late phase, where Bevy runs its own:
                // after the early prepass and its depth pyramid, before the
                // late prepass; then the main pass draws every list.
                (cull::enter_late_phase, cull::cull_view_late)
                    .chain()
                    .after(early_prepass)
                    .after(early_downsample_depth)
                    .before(late_prepass)
                    .before(per_view_shadow_pass::<LATE_SHADOW_PASS>)
                    .before(shared_shadow_pass::<LATE_SHADOW_PASS>),
                cull::enter_main_phase
                    .after(Core3dSystems::Prepass)
                    .after(per_view_shadow_pass::<LATE_SHADOW_PASS>)
                    .after(shared_shadow_pass::<LATE_SHADOW_PASS>)
                    .before(Core3dSystems::MainPass),
            )
                .in_set(GpuCullSystems::Cull),
        );
}

pub(crate) fn finish(app: &mut App) {
    custom_material::add_default_material(app);
}

fn extract_settings(mut commands: Commands, settings: bevy::render::Extract<Res<GpuCullSettings>>) {
    if settings.is_changed() {
        commands.insert_resource(settings.clone());
    }
}

type MainBatches<'w, 's> = Query<
    'w,
    's,
    (
        &'static RenderEntity,
        &'static mut GpuCulledInstances,
        &'static GpuCullBounds,
        Has<NotShadowReceiver>,
        Option<&'static RenderLayers>,
        Option<&'static MeshMaterial3d<StandardMaterial>>,
        Option<&'static GpuCullLod>,
        Option<&'static GpuCullCells>,
        &'static InheritedVisibility,
        &'static GlobalTransform,
    ),
>;

/// Brings each batch's changes to the render world: the changed ranges only
/// (taken from the main world's component, hence `MainWorld` rather than
/// `Extract`), so an unchanged batch costs a flag check and an edited one
/// the size of its edits.
/// A batch's levels of detail as the render world keeps them; none (with an
/// error, once) when the component breaks its rules.
/// With the levels facing the camera, as `BatchData::lod_facing`, and the
/// cross-fade's width.
fn lod_levels(lod: Option<&GpuCullLod>) -> (Vec<(AssetId<Mesh>, f32)>, u32, f32) {
    let Some(lod) = lod else {
        return (Vec::new(), 0, 0.0);
    };
    if let Some(problem) = lod.problem() {
        error_once!("bevy-gpu-cull: {problem}; the batch is drawn without levels of detail");
        return (Vec::new(), 0, 0.0);
    }
    let facing = lod
        .levels
        .iter()
        .enumerate()
        .filter(|(_, level)| level.facing_camera)
        .fold(0, |bits, (k, _)| bits | 1 << k);
    let levels = lod
        .levels
        .iter()
        .map(|level| (level.mesh.id(), level.min_screen_size))
        .collect();
    (levels, facing, lod.cross_fade)
}

/// The frame a batch's instances are culled in, `None` (the batch shows
/// nothing, as a mesh scaled to zero) for a transform that places nothing.
fn batch_frame(world_from_local: Affine3A) -> Option<LocalFrame> {
    match LocalFrame::new(Mat4::from(world_from_local)) {
        Ok(frame) => Some(frame),
        Err(e) => {
            warn_once!("GPU culling: a batch's GlobalTransform places nothing ({e}); it is not drawn");
            None
        }
    }
}

fn extract_batches(
    mut commands: Commands,
    mut main_world: ResMut<MainWorld>,
    mut state: Local<Option<SystemState<MainBatches<'static, 'static>>>>,
    mut batches: Query<(Entity, &mut BatchData)>,
    mut live: Local<HashSet<Entity>>,
) {
    let state = state.get_or_insert_with(|| SystemState::new(&mut main_world));
    let Ok(mut main_batches) = state.get_mut(&mut main_world) else {
        return;
    };
    live.clear();
    let mut materials = Vec::new();
    for (
        render_entity,
        mut batch,
        bounds,
        not_receiver,
        layers,
        material,
        lod,
        cells,
        visibility,
        transform,
    ) in &mut main_batches
    {
        // A change Bevy saw that the component's methods did not record (an
        // edit through reflection, a scene): the whole list goes up.
        if batch.is_changed() && !batch.changes.touched {
            batch.bypass_change_detection().mark_all();
        }
        let world_from_local = transform.affine();
        let cells = cells.copied();
        let layers = layers.cloned().unwrap_or_default();
        let (lod, lod_facing, lod_cross_fade) = lod_levels(lod);
        materials.push((render_entity.id(), material.map(|m| m.id())));
        let render_entity = render_entity.id();
        live.insert(render_entity);
        let bounds = Sphere::new(bounds.center, bounds.radius);
        let Ok((_, mut data)) = batches.get_mut(render_entity) else {
            let frame = batch_frame(world_from_local);
            let batch = batch.bypass_change_detection();
            batch.take_changes();
            commands.entity(render_entity).insert(BatchData {
                instances: batch.instances().to_vec(),
                bounds,
                upload_all: true,
                uploads: DirtyRanges::default(),
                scales: ScaleRange::of(batch.instances()),
                shadow_receiver: !not_receiver,
                render_layers: layers,
                material: material::BatchMaterial::default(),
                lod,
                lod_facing,
                lod_cross_fade,
                cells,
                visible: visibility.get() && frame.is_some(),
                world_from_local,
                previous_world_from_local: world_from_local,
                placed: frame.is_some(),
                frame: frame.unwrap_or_default(),
            });
            continue;
        };
        data.place(world_from_local, visibility.get());
        if data.lod != lod {
            data.lod = lod;
        }
        if data.lod_facing != lod_facing {
            data.lod_facing = lod_facing;
        }
        if data.lod_cross_fade != lod_cross_fade {
            data.lod_cross_fade = lod_cross_fade;
        }
        if data.cells.is_some() != cells.is_some() {
            // Sorted into cells, or back: the whole list goes up again.
            data.upload_all = true;
        }
        if data.cells != cells {
            data.cells = cells;
        }
        if data.render_layers != layers {
            data.render_layers = layers;
        }
        if data.bounds != bounds {
            data.bounds = bounds;
        }
        if data.shadow_receiver == not_receiver {
            data.shadow_receiver = !not_receiver;
        }
        if !batch.changes.any {
            continue;
        }
        let batch = batch.bypass_change_detection();
        let changes = batch.take_changes();
        let source = batch.instances();
        if changes.all {
            data.instances.clear();
            data.instances.extend_from_slice(source);
            data.upload_all = true;
            data.uploads.clear();
            data.scales = ScaleRange::of(source);
            continue;
        }
        data.instances.truncate(source.len());
        for range in changes.ranges.ranges() {
            let (start, end) = (range.start as usize, range.end as usize);
            if end > data.instances.len() {
                data.instances.resize(end, source[0]);
            }
            data.instances[start..end].copy_from_slice(&source[start..end]);
            data.scales.widen(&source[start..end]);
            data.uploads.mark(range.clone());
        }
        // Ranges still pending from a frame that uploaded nothing may lie
        // past a truncation.
        data.uploads.clip(source.len() as u32);
        if data.instances.len() != source.len() {
            // Cannot happen through the component's methods; stay correct anyway.
            data.instances.clear();
            data.instances.extend_from_slice(source);
            data.upload_all = true;
            data.scales = ScaleRange::of(source);
        }
    }
    // The batches' materials, read from the main world's assets (cheap: a
    // few fields per batch; the draw's uniform is written only on change).
    let standard = main_world.get_resource::<Assets<StandardMaterial>>();
    for (entity, id) in materials {
        let m = id.and_then(|id| standard?.get(id)).map_or_else(
            material::BatchMaterial::default,
            material::BatchMaterial::from_standard,
        );
        if let Ok((_, mut data)) = batches.get_mut(entity)
            && data.material != m
        {
            data.material = m;
        }
    }
    // Batches whose component was removed (despawned entities leave the
    // render world with their components).
    for (entity, _) in &batches {
        if !live.contains(&entity) {
            commands.entity(entity).remove::<(BatchData, prepare::GpuBatch)>();
        }
    }
}
