//! A batch's material in its shadow maps, its camera's prepasses and the
//! deferred G-buffer: Bevy's own prepass pipeline, specialized for the
//! material as Bevy specializes it for a mesh (its prepass or deferred
//! fragment shader, bind group and `specialize`), with the plugin's
//! instance-fetching vertex shader (`shaders/instanced_material_prepass.wgsl`)
//! and the batch's bindings at group 2. An alpha-masked `StandardMaterial`
//! is cut out of the shadow as on a mesh; a camera with Bevy's deferred
//! rendering draws a batch whose material is deferred into the G-buffer,
//! and Bevy's deferred lighting shades it.

use super::bindings::InstanceBindings;
use super::custom_material::{
    add_batch_defs, dithers, renders_deferred, shader_and_standard, wind_clockwise,
};
use super::draw::{DrawCulledInstances, DrawCulledTwin};
use bevy::asset::{UntypedAssetId, load_embedded_asset};
use bevy::material::RenderPhaseType;
use bevy::material::key::{ErasedMaterialPipelineKey, ErasedMeshPipelineKey};
use bevy::mesh::MeshVertexBufferLayoutRef;
use bevy::pbr::{
    MeshPipelineKey, PreparedMaterial, PrepassFragmentShader, PrepassPipeline, PrepassPipelineSpecializer,
    PrepassVertexShader, SetPrepassEmptyMaterialBindGroup, SetPrepassViewBindGroup,
    SetPrepassViewEmptyBindGroup, alpha_mode_pipeline_key,
};
use bevy::platform::collections::HashMap;
use bevy::prelude::*;
use bevy::render::erased_render_asset::ErasedRenderAssets;
use bevy::render::render_phase::SetItemPipeline;
use bevy::render::render_resource::{
    BindGroupLayoutDescriptor, CachedRenderPipelineId, FragmentState, PipelineCache,
    RenderPipelineDescriptor, SpecializedMeshPipeline, SpecializedMeshPipelineError,
};
use bevy::shader::Shader;

use super::custom_material::SetBatchMaterialBindGroup;

/// Bevy's prepass pipeline with the instance fetch as its vertex shader and
/// the batch's bindings at group 2.
#[derive(Resource)]
pub(crate) struct CulledMaterialPrepassPipeline {
    prepass: PrepassPipeline,
    vertex_shader: Handle<Shader>,
    instance_layout: BindGroupLayoutDescriptor,
    /// Pipelines already queued, by material key, mesh layout and winding.
    queued: HashMap<(ErasedMaterialPipelineKey, MeshVertexBufferLayoutRef, bool), PrepassDraw>,
}

/// Builds the pipeline from Bevy's prepass pipeline and the plugin's
/// instance bind group layout (`RenderStartup`).
pub(crate) fn init_pipeline(
    mut commands: Commands,
    prepass: Res<PrepassPipeline>,
    bindings: Res<InstanceBindings>,
    asset_server: Res<AssetServer>,
) {
    commands.insert_resource(CulledMaterialPrepassPipeline {
        prepass: prepass.clone(),
        vertex_shader: load_embedded_asset!(asset_server.as_ref(), "shaders/instanced_material_prepass.wgsl"),
        instance_layout: bindings.layout.clone(),
        queued: HashMap::default(),
    });
}

/// The kind of view a batch's prepass draw is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PrepassView {
    /// A light's shadow map.
    Shadow,
    /// A camera's prepasses; `deferred`: it renders deferred
    /// (`DeferredPrepass`).
    Camera { deferred: bool },
}

/// A batch's specialized prepass draw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PrepassDraw {
    /// The pipeline, queued in Bevy's `PipelineCache`.
    pub pipeline: CachedRenderPipelineId,
    /// The pipeline reads the material's bind group (Bevy gives a depth-only
    /// opaque prepass an empty group 3 instead).
    pub binds_material: bool,
    /// It writes the deferred G-buffer (a deferred phase of the view; the
    /// main pass leaves the batch to Bevy's deferred lighting).
    pub deferred: bool,
}

/// The prepass pipeline key of a material drawn by a prepass view of
/// `view_and_mesh_key`, as Bevy's `specialize_prepass_material_meshes` and
/// `specialize_shadows` build it for a mesh: a shadow may discard for
/// every alpha mode Bevy's does (blended ones cast the shadow of what is
/// not nearly transparent); a camera's prepass draws no blended batch
/// ([`CulledMaterialPrepassPipeline::specialize_for`]).
fn prepass_key(
    view_and_mesh_key: MeshPipelineKey,
    material: &PreparedMaterial,
    view: PrepassView,
    dither: bool,
) -> MeshPipelineKey {
    let properties = &material.properties;
    let mut key = view_and_mesh_key;
    let masked = matches!(properties.alpha_mode, AlphaMode::Mask(_));
    match view {
        PrepassView::Shadow => {
            let may_discard = matches!(
                properties.alpha_mode,
                AlphaMode::Mask(_)
                    | AlphaMode::Blend
                    | AlphaMode::Premultiplied
                    | AlphaMode::Add
                    | AlphaMode::AlphaToCoverage
            );
            if may_discard {
                key |= MeshPipelineKey::MAY_DISCARD;
            }
        }
        PrepassView::Camera { deferred } => {
            if masked {
                let msaa = Msaa::from_samples(view_and_mesh_key.msaa_samples());
                key |= alpha_mode_pipeline_key(properties.alpha_mode, &msaa);
            }
            if deferred && renders_deferred(material) {
                key |= MeshPipelineKey::DEFERRED_PREPASS;
            }
            if dither {
                key |= MeshPipelineKey::VISIBILITY_RANGE_DITHER;
            }
        }
    }
    // Bevy's own test for a material whose prepass reads its bind group
    // (`MaterialPropertiesExt::prepass_reads_material`, private to Bevy).
    let reads_material = properties.get_shader(PrepassVertexShader).is_some()
        || properties.get_shader(PrepassFragmentShader).is_some();
    if reads_material {
        key |= MeshPipelineKey::PREPASS_READS_MATERIAL;
    }
    key
}

/// Whether `material`'s prepass fragment shader is Bevy's PBR prepass (a
/// `StandardMaterial`'s, or an extension's that keeps it), which cuts alpha
/// masks with `StandardMaterial`'s bindings. (A material without one gets
/// Bevy's default prepass shader, which reads no material.)
fn has_pbr_prepass(material: &PreparedMaterial, materials: &ErasedRenderAssets<PreparedMaterial>) -> bool {
    let (own, pbr) = shader_and_standard(material, materials, PrepassFragmentShader);
    own.is_some() && pbr.is_some_and(|pbr| pbr == own)
}

/// Gives a dithered depth-only prepass (no fragment outputs) the plugin's
/// fragment stage, which drops the pixels the main pass dithers out of
/// the level (Bevy runs none there, or, for an alpha mask, Bevy's PBR one
/// without the dither). A prepass with outputs runs the material's own
/// fragment shader, which dithers (Bevy's PBR prepass does).
fn dither_depth_only(descriptor: &mut RenderPipelineDescriptor, shader: &Handle<Shader>, pbr_prepass: bool) {
    let defs = &descriptor.vertex.shader_defs;
    if defs.contains(&"PREPASS_FRAGMENT".into()) {
        return;
    }
    let may_discard = defs.contains(&"MAY_DISCARD".into());
    if may_discard && !pbr_prepass {
        // The material's own fragment shader (or none, as Bevy has for
        // its default prepass shader) decides its pixels.
        return;
    }
    let mut shader_defs = defs.clone();
    shader_defs.push("GPU_CULL_PREPASS_DITHER".into());
    if may_discard {
        shader_defs.push("GPU_CULL_PBR_ALPHA_DISCARD".into());
    }
    descriptor.fragment = Some(FragmentState {
        shader: shader.clone(),
        shader_defs,
        entry_point: Some("fragment".into()),
        targets: Vec::new(),
    });
}

impl CulledMaterialPrepassPipeline {
    /// The prepass draw of a batch with `material` for a prepass view and
    /// mesh of `view_and_mesh_key`, dithered where its levels `cross_fade`
    /// (a camera's prepasses, where the material's main pass dithers);
    /// `clockwise`: the front face is clockwise, for the instances that
    /// wind backwards. `None` until Bevy has prepared the material, and for
    /// a material without prepass (or without shadows, for `Shadow`).
    pub fn specialize_for(
        &mut self,
        cache: &PipelineCache,
        materials: &ErasedRenderAssets<PreparedMaterial>,
        material: UntypedAssetId,
        view_and_mesh_key: MeshPipelineKey,
        view: PrepassView,
        cross_fade: bool,
        clockwise: bool,
        layout: &MeshVertexBufferLayoutRef,
    ) -> Option<Result<PrepassDraw, SpecializedMeshPipelineError>> {
        let prepared = materials.get(material)?;
        // Bevy's camera prepasses leave blended meshes out (they write no
        // depth); their shadows it draws.
        let enabled = match view {
            PrepassView::Shadow => prepared.properties.shadows_enabled,
            PrepassView::Camera { .. } => {
                prepared.properties.prepass_enabled
                    && !matches!(
                        prepared.properties.render_phase_type,
                        RenderPhaseType::Transparent
                    )
            }
        };
        if !enabled {
            return None;
        }
        let dither = cross_fade && dithers(prepared, materials);
        let key = ErasedMaterialPipelineKey {
            mesh_key: ErasedMeshPipelineKey::new(prepass_key(view_and_mesh_key, prepared, view, dither)),
            material_key: prepared.properties.material_key.clone(),
            type_id: material.type_id(),
        };
        let entry = (key, layout.clone(), clockwise);
        if let Some(draw) = self.queued.get(&entry) {
            return Some(Ok(*draw));
        }
        let specializer = PrepassPipelineSpecializer {
            pipeline: self.prepass.clone(),
            properties: prepared.properties.clone(),
        };
        let descriptor = specializer.specialize(entry.0.clone(), layout);
        let pbr_prepass = has_pbr_prepass(prepared, materials);
        let draw = descriptor.map(|mut descriptor| {
            if dither {
                dither_depth_only(&mut descriptor, &self.vertex_shader, pbr_prepass);
            }
            self.queue(cache, descriptor, &entry.0, clockwise)
        });
        if let Ok(draw) = draw {
            self.queued.insert(entry, draw);
        }
        Some(draw)
    }

    /// Queues Bevy's prepass `descriptor` with the plugin's vertex stage
    /// and group 2.
    fn queue(
        &self,
        cache: &PipelineCache,
        mut descriptor: RenderPipelineDescriptor,
        key: &ErasedMaterialPipelineKey,
        clockwise: bool,
    ) -> PrepassDraw {
        let mesh_key: MeshPipelineKey = key.mesh_key.downcast();
        descriptor.label = Some("gpu_cull_material_prepass".into());
        // The prepass keeps instance colors (an alpha mask cuts by their
        // alpha); it draws only masked or dithered batches' colors anyway.
        add_batch_defs(&mut descriptor, true);
        // The material's vertex shader cannot fetch the instances: ours
        // stays, whatever the material's `specialize` set.
        if descriptor.vertex.shader != self.prepass.default_prepass_shader {
            warn_once!(
                "bevy-gpu-cull: a material's prepass or deferred vertex shader is not used for culled \
                 batches (the plugin's fetches the instances); its fragment shader gets Bevy's prepass \
                 VertexOutput"
            );
        }
        descriptor.vertex.shader = self.vertex_shader.clone();
        if descriptor.layout.len() > 2 {
            descriptor.layout[2] = self.instance_layout.clone();
        }
        let binds_material = descriptor
            .layout
            .get(3)
            .is_some_and(|layout| *layout != self.prepass.empty_layout);
        if clockwise {
            wind_clockwise(&mut descriptor);
        }
        PrepassDraw {
            pipeline: cache.queue_render_pipeline(descriptor),
            binds_material,
            deferred: mesh_key.contains(MeshPipelineKey::DEFERRED_PREPASS),
        }
    }
}

/// A batch's prepass draw with its material's bind group at group 3.
pub(crate) type DrawCulledMaterialPrepass = (
    SetItemPipeline,
    SetPrepassViewBindGroup<0>,
    SetPrepassViewEmptyBindGroup<1>,
    SetBatchMaterialBindGroup<3>,
    DrawCulledInstances,
    DrawCulledTwin,
);

/// A batch's depth-only opaque prepass draw: Bevy's empty group 3.
pub(crate) type DrawCulledDepthOnlyPrepass = (
    SetItemPipeline,
    SetPrepassViewBindGroup<0>,
    SetPrepassViewEmptyBindGroup<1>,
    SetPrepassEmptyMaterialBindGroup<3>,
    DrawCulledInstances,
    DrawCulledTwin,
);
