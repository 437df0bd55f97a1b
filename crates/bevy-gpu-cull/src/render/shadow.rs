//! Shadows and the camera's prepasses: every light view (a directional
//! light's cascades, a point light's six faces, a spot light) and every
//! camera with a depth, normal or motion-vector prepass draws the batches
//! with a depth-only pipeline, each light view culled on the GPU against its
//! own frustum.

use super::custom_material::prepass_dithers;
use super::draw::{CulledPipeline, DrawCulledInstances, remove_from_phase};
use super::prepare::{GpuBatch, ViewTargets};
use bevy::asset::load_embedded_asset;
use bevy::core_pipeline::core_3d::CORE_3D_DEPTH_FORMAT;
use bevy::core_pipeline::prepass::{
    AlphaMask3dPrepass, Opaque3dPrepass, OpaqueNoLightmap3dBatchSetKey, OpaqueNoLightmap3dBinKey,
    prepass_target_descriptors,
};
use bevy::mesh::{Mesh, MeshVertexBufferLayoutRef};
use bevy::pbr::{
    LightKeyCache, MeshPipelineKey, PreparedMaterial, PrepassPipeline, RenderMeshInstances,
    SetPrepassViewBindGroup, SetPrepassViewEmptyBindGroup, Shadow, ShadowBatchSetKey, ShadowBinKey,
    ViewKeyPrepassCache,
};
use bevy::platform::collections::HashMap;
use bevy::prelude::*;
use bevy::render::erased_render_asset::ErasedRenderAssets;
use bevy::render::mesh::RenderMesh;
use bevy::render::mesh::allocator::MeshSlabs;
use bevy::render::render_asset::RenderAssets;
use bevy::render::render_phase::{
    BinnedRenderPhaseType, DrawFunctions, InputUniformIndex, SetItemPipeline, ViewBinnedRenderPhases,
};
use bevy::render::render_resource::{
    BindGroupLayoutDescriptor, CompareFunction, DepthStencilState, FragmentState, MultisampleState,
    PipelineCache, PrimitiveState, RenderPipelineDescriptor, SpecializedMeshPipeline,
    SpecializedMeshPipelineError, SpecializedMeshPipelines, VertexState,
};
use bevy::render::sync_world::MainEntity;
use bevy::render::view::{ExtractedView, RetainedViewEntity};
use bevy::shader::{Shader, ShaderDefVal};

/// The depth-only draw: Bevy's prepass view bindings (group 0), an empty
/// group 1, and the batch's instances (group 2, as in the main pass).
#[derive(Resource)]
pub(crate) struct CulledPrepassPipeline {
    view_layout_motion_vectors: BindGroupLayoutDescriptor,
    view_layout_no_motion_vectors: BindGroupLayoutDescriptor,
    empty_layout: BindGroupLayoutDescriptor,
    instance_layout: BindGroupLayoutDescriptor,
    shader: Handle<Shader>,
    depth_clip_control_supported: bool,
}

pub(crate) fn init_prepass_pipeline(
    mut commands: Commands,
    prepass: Res<PrepassPipeline>,
    culled: Res<CulledPipeline>,
    asset_server: Res<AssetServer>,
) {
    commands.insert_resource(CulledPrepassPipeline {
        view_layout_motion_vectors: prepass.view_layout_motion_vectors.clone(),
        view_layout_no_motion_vectors: prepass.view_layout_no_motion_vectors.clone(),
        empty_layout: prepass.empty_layout.clone(),
        instance_layout: culled.instance_layout.clone(),
        shader: load_embedded_asset!(asset_server.as_ref(), "shaders/instanced_prepass.wgsl"),
        depth_clip_control_supported: prepass.depth_clip_control_supported,
    });
}

/// What the depth-only draw is specialized for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct CulledPrepassKey {
    pub mesh: MeshPipelineKey,
    /// The batch's material is alpha-masked: sample it and discard.
    pub alpha_mask: bool,
    /// The batch's levels cross-fade, dithered (a camera's prepass; shadow
    /// views draw both levels in full).
    pub cross_fade: bool,
}

impl SpecializedMeshPipeline for CulledPrepassPipeline {
    type Key = CulledPrepassKey;

    fn specialize(
        &self,
        key: Self::Key,
        layout: &MeshVertexBufferLayoutRef,
    ) -> Result<RenderPipelineDescriptor, SpecializedMeshPipelineError> {
        let CulledPrepassKey {
            mesh: key,
            alpha_mask,
            cross_fade,
        } = key;
        let normal = key.contains(MeshPipelineKey::NORMAL_PREPASS);
        let motion = key.contains(MeshPipelineKey::MOTION_VECTOR_PREPASS);
        let unclipped = key.contains(MeshPipelineKey::UNCLIPPED_DEPTH_ORTHO);
        let emulate_unclipped = unclipped && !self.depth_clip_control_supported;
        let mut shader_defs: Vec<ShaderDefVal> = Vec::new();
        let mut attributes = vec![Mesh::ATTRIBUTE_POSITION.at_shader_location(0)];
        if normal {
            shader_defs.push("NORMAL_PREPASS".into());
            attributes.push(Mesh::ATTRIBUTE_NORMAL.at_shader_location(1));
        }
        if motion {
            shader_defs.push("MOTION_VECTOR_PREPASS".into());
        }
        if emulate_unclipped {
            shader_defs.push("UNCLIPPED_DEPTH_ORTHO_EMULATION".into());
        }
        if alpha_mask {
            shader_defs.push("GPU_CULL_ALPHA_MASK".into());
            if layout.0.contains(Mesh::ATTRIBUTE_UV_0) {
                shader_defs.push("VERTEX_UVS_A".into());
                attributes.push(Mesh::ATTRIBUTE_UV_0.at_shader_location(2));
            }
        }
        let mut targets = prepass_target_descriptors(normal, motion, false);
        if targets.iter().all(Option::is_none) {
            targets.clear();
        }
        let needs_outputs = !targets.is_empty() || emulate_unclipped;
        if needs_outputs {
            shader_defs.push("PREPASS_FRAGMENT".into());
        }
        if cross_fade {
            // The main pass's dither (Bevy's visibility ranges'), so that
            // the prepass keeps exactly the pixels the main pass shades.
            shader_defs.push("VISIBILITY_RANGE_DITHER".into());
        }
        let discards = alpha_mask || cross_fade;
        if discards {
            shader_defs.push("GPU_CULL_DISCARDS".into());
        }
        let fragment_required = needs_outputs || discards;
        let view_layout = if motion {
            self.view_layout_motion_vectors.clone()
        } else {
            self.view_layout_no_motion_vectors.clone()
        };
        Ok(RenderPipelineDescriptor {
            label: Some("gpu_cull_prepass".into()),
            layout: vec![
                view_layout,
                self.empty_layout.clone(),
                self.instance_layout.clone(),
            ],
            vertex: VertexState {
                shader: self.shader.clone(),
                shader_defs: shader_defs.clone(),
                entry_point: Some("vertex".into()),
                buffers: vec![layout.0.get_layout(&attributes)?],
            },
            fragment: fragment_required.then(|| FragmentState {
                shader: self.shader.clone(),
                shader_defs,
                entry_point: Some("fragment".into()),
                targets,
            }),
            primitive: PrimitiveState {
                topology: key.primitive_topology(),
                strip_index_format: key.strip_index_format(),
                unclipped_depth: unclipped && self.depth_clip_control_supported,
                ..default()
            },
            depth_stencil: Some(DepthStencilState {
                format: CORE_3D_DEPTH_FORMAT,
                depth_write_enabled: Some(true),
                depth_compare: Some(CompareFunction::GreaterEqual),
                stencil: default(),
                bias: default(),
            }),
            multisample: MultisampleState {
                count: key.msaa_samples(),
                mask: !0,
                alpha_to_coverage_enabled: false,
            },
            ..default()
        })
    }
}

pub(crate) type DrawCulledPrepass = (
    SetItemPipeline,
    SetPrepassViewBindGroup<0>,
    SetPrepassViewEmptyBindGroup<1>,
    DrawCulledInstances,
);

/// The batches this plugin put into each view's `Shadow` and
/// `Opaque3dPrepass` phases last frame (binned phases are retained).
#[derive(Resource, Default)]
pub(crate) struct QueuedPrepassBatches {
    shadow: HashMap<RetainedViewEntity, Vec<MainEntity>>,
    prepass: HashMap<RetainedViewEntity, Vec<MainEntity>>,
}

/// Puts each (light view, batch) with a cull target into the light view's
/// `Shadow` phase, and each (camera with a prepass, batch) into its
/// `Opaque3dPrepass` phase, as non-mesh items.
pub(crate) fn queue_prepass_batches(
    shadow_draw_functions: Res<DrawFunctions<Shadow>>,
    prepass_draw_functions: Res<DrawFunctions<Opaque3dPrepass>>,
    pipeline: Option<Res<CulledPrepassPipeline>>,
    mut pipelines: ResMut<SpecializedMeshPipelines<CulledPrepassPipeline>>,
    pipeline_cache: Res<PipelineCache>,
    meshes: Res<RenderAssets<RenderMesh>>,
    mesh_instances: Res<RenderMeshInstances>,
    light_keys: Res<LightKeyCache>,
    prepass_keys: Res<ViewKeyPrepassCache>,
    targets: Res<ViewTargets>,
    batches: Query<(Entity, &MainEntity, &super::BatchData), With<GpuBatch>>,
    mut shadow_phases: ResMut<ViewBinnedRenderPhases<Shadow>>,
    mut prepass_phases: ResMut<ViewBinnedRenderPhases<Opaque3dPrepass>>,
    mut queued: ResMut<QueuedPrepassBatches>,
    views: Query<(Entity, &ExtractedView)>,
    (mut alpha_mask_prepass_phases, material_instances, render_materials, draw_pipeline): (
        ResMut<ViewBinnedRenderPhases<AlphaMask3dPrepass>>,
        Res<bevy::pbr::RenderMaterialInstances>,
        Res<ErasedRenderAssets<PreparedMaterial>>,
        Option<Res<CulledPipeline>>,
    ),
) {
    for (view, entities) in queued.shadow.drain() {
        remove_from_phase(&mut shadow_phases, &view, entities);
    }
    for (view, entities) in queued.prepass.drain() {
        remove_from_phase(&mut prepass_phases, &view, entities);
    }
    // Bevy's own items for a batch entity with a material (its mesh at the
    // entity's transform) go: the plugin draws the batch.
    for (_, view) in &views {
        let rve = view.retained_view_entity;
        let mains = || batches.iter().map(|(_, main, _)| *main);
        remove_from_phase(&mut shadow_phases, &rve, mains());
        remove_from_phase(&mut prepass_phases, &rve, mains());
        // An alpha-masked material puts Bevy's prepass item there instead.
        remove_from_phase(&mut alpha_mask_prepass_phases, &rve, mains());
    }
    let Some(pipeline) = pipeline else {
        return;
    };
    let draw_shader_set = draw_pipeline.as_ref().is_some_and(|p| p.shader.is_some());
    let shadow_draw = shadow_draw_functions.read().id::<DrawCulledPrepass>();
    let prepass_draw = prepass_draw_functions.read().id::<DrawCulledPrepass>();
    for (view_entity, view) in &views {
        let rve = view.retained_view_entity;
        // A view is a light's (its shadow phase) or a camera with a prepass.
        let (view_key, shadow) = if let Some(key) = light_keys.get(&rve) {
            (*key, true)
        } else if let Some(key) = prepass_keys.get(&rve) {
            (*key, false)
        } else {
            continue;
        };
        if (shadow && !shadow_phases.contains_key(&rve)) || (!shadow && !prepass_phases.contains_key(&rve)) {
            continue;
        }
        for (entity, main_entity, data) in &batches {
            if !targets.map.contains_key(&(view_entity, entity)) {
                continue;
            }
            let Some(mesh_instance) = mesh_instances.render_mesh_queue_data(*main_entity) else {
                continue;
            };
            let Some(mesh) = meshes.get(mesh_instance.mesh_asset_id()) else {
                continue;
            };
            let key = CulledPrepassKey {
                mesh: view_key | MeshPipelineKey::from_bits_retain(mesh.key_bits.bits()),
                alpha_mask: data.material.alpha_mask(),
                // Shadow views draw both levels of a cross-fade in full.
                cross_fade: !shadow
                    && data.cross_fades()
                    && prepass_dithers(
                        draw_shader_set,
                        &render_materials,
                        &material_instances,
                        main_entity,
                    ),
            };
            let id = match pipelines.specialize(&pipeline_cache, &pipeline, key, &mesh.layout) {
                Ok(id) => id,
                Err(e) => {
                    error!("GPU culling: {e}");
                    continue;
                }
            };
            let asset_id = mesh_instance.mesh_asset_id().untyped();
            if shadow {
                let phase = shadow_phases.get_mut(&rve).expect("checked above");
                phase.add(
                    ShadowBatchSetKey {
                        pipeline: id,
                        draw_function: shadow_draw,
                        material_bind_group_index: None,
                        slabs: MeshSlabs::default(),
                    },
                    ShadowBinKey { asset_id },
                    (entity, *main_entity),
                    InputUniformIndex::default(),
                    BinnedRenderPhaseType::NonMesh,
                );
                queued.shadow.entry(rve).or_default().push(*main_entity);
            } else {
                let phase = prepass_phases.get_mut(&rve).expect("checked above");
                phase.add(
                    OpaqueNoLightmap3dBatchSetKey {
                        pipeline: id,
                        draw_function: prepass_draw,
                        material_bind_group_index: None,
                        slabs: MeshSlabs::default(),
                    },
                    OpaqueNoLightmap3dBinKey { asset_id },
                    (entity, *main_entity),
                    InputUniformIndex::default(),
                    BinnedRenderPhaseType::NonMesh,
                );
                queued.prepass.entry(rve).or_default().push(*main_entity);
            }
        }
    }
}
