//! The depth-only draw of a batch drawn by an application's draw shader
//! (`GpuCullPlugin::draw_shader`), in shadow maps and a camera's
//! depth, normal and motion-vector prepasses: the same instance fetch and
//! transform as the main pass, the plugin's own alpha mask and cross-fade
//! dither. Batches drawn with a material use the material's own prepass
//! pipeline instead ([`super::material_prepass`]).

use super::bindings::InstanceBindings;
use super::draw::DrawCulledInstances;
use bevy::asset::load_embedded_asset;
use bevy::core_pipeline::core_3d::CORE_3D_DEPTH_FORMAT;
use bevy::core_pipeline::prepass::prepass_target_descriptors;
use bevy::mesh::{Mesh, MeshVertexBufferLayoutRef};
use bevy::pbr::{MeshPipelineKey, PrepassPipeline, SetPrepassViewBindGroup, SetPrepassViewEmptyBindGroup};
use bevy::prelude::*;
use bevy::render::render_phase::SetItemPipeline;
use bevy::render::render_resource::{
    BindGroupLayoutDescriptor, CompareFunction, DepthStencilState, FragmentState, MultisampleState,
    PrimitiveState, RenderPipelineDescriptor, SpecializedMeshPipeline, SpecializedMeshPipelineError,
    VertexState,
};
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
    bindings: Res<InstanceBindings>,
    asset_server: Res<AssetServer>,
) {
    commands.insert_resource(CulledPrepassPipeline {
        view_layout_motion_vectors: prepass.view_layout_motion_vectors.clone(),
        view_layout_no_motion_vectors: prepass.view_layout_no_motion_vectors.clone(),
        empty_layout: prepass.empty_layout.clone(),
        instance_layout: bindings.layout.clone(),
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

/// The depth-only draw of a batch drawn by the application's draw shader.
pub(crate) type DrawCulledPrepass = (
    SetItemPipeline,
    SetPrepassViewBindGroup<0>,
    SetPrepassViewEmptyBindGroup<1>,
    DrawCulledInstances,
);
