//! Any other `Material` on a batch: Bevy's own `MaterialPlugin<M>` prepares
//! it (bind group, bindless slot, shaders, specialization), and the plugin
//! draws the batch's survivors with the material's fragment shader and bind
//! group (group 3) behind its own instance-fetching vertex shader
//! (`shaders/instanced_material.wgsl`). Nothing here is generic over the
//! material type: Bevy 0.19's prepared materials are type-erased, so every
//! material type registered with Bevy works without a plugin of ours.

use bevy::asset::load_embedded_asset;
use bevy::material::key::ErasedMaterialPipelineKey;
use bevy::material::{MaterialProperties, key::ErasedMeshPipelineKey};
use bevy::mesh::MeshVertexBufferLayoutRef;
use bevy::pbr::{
    MATERIAL_BIND_GROUP_INDEX, MaterialFragmentShader, MaterialPipeline, MaterialVertexShader, MeshPipeline,
    MeshPipelineKey, alpha_mode_pipeline_key,
};
use bevy::platform::collections::HashMap;
use bevy::prelude::*;
use bevy::render::render_resource::{
    BindGroupLayoutDescriptor, CachedRenderPipelineId, PipelineCache, RenderPipelineDescriptor,
    SpecializedMeshPipeline, SpecializedMeshPipelineError,
};
use bevy::shader::{Shader, ShaderDefVal};

/// Bevy's mesh pipeline with the instance fetch as its vertex shader, a
/// material's fragment shader and its bind group layout at group 3.
#[derive(Resource)]
pub(crate) struct CulledMaterialPipeline {
    mesh_pipeline: MeshPipeline,
    vertex_shader: Handle<Shader>,
    instance_layout: BindGroupLayoutDescriptor,
    /// Pipelines already queued, by material key and mesh layout.
    queued: HashMap<(ErasedMaterialPipelineKey, MeshVertexBufferLayoutRef), CachedRenderPipelineId>,
}

pub(crate) fn init_pipeline(
    mut commands: Commands,
    mesh_pipeline: Res<MeshPipeline>,
    culled: Res<super::draw::CulledPipeline>,
    asset_server: Res<AssetServer>,
) {
    commands.insert_resource(CulledMaterialPipeline {
        mesh_pipeline: mesh_pipeline.clone(),
        vertex_shader: load_embedded_asset!(asset_server.as_ref(), "shaders/instanced_material.wgsl"),
        instance_layout: culled.instance_layout.clone(),
        queued: HashMap::default(),
    });
}

/// The pipeline key of a material drawn by `view_key`'s view with a mesh of
/// `mesh_key_bits`, as Bevy's `queue_material_meshes` builds it.
/// Blended alpha modes are drawn opaque (the batch is queued in `Opaque3d`).
pub(crate) fn material_key(
    view_key: MeshPipelineKey,
    mesh_key_bits: MeshPipelineKey,
    properties: &MaterialProperties,
    type_id: std::any::TypeId,
) -> ErasedMaterialPipelineKey {
    let alpha_mode = match properties.alpha_mode {
        mode @ (AlphaMode::Opaque | AlphaMode::Mask(_)) => mode,
        _ => {
            warn_once!(
                "bevy-gpu-cull: blended alpha modes are not supported; a batch with a blended \
                 material is drawn opaque (docs/bevy-plugin.md)"
            );
            AlphaMode::Opaque
        }
    };
    let msaa = Msaa::from_samples(view_key.msaa_samples());
    let mesh_key = view_key
        | mesh_key_bits
        | properties.mesh_pipeline_key_bits.downcast::<MeshPipelineKey>()
        | alpha_mode_pipeline_key(alpha_mode, &msaa);
    ErasedMaterialPipelineKey {
        mesh_key: ErasedMeshPipelineKey::new(mesh_key),
        material_key: properties.material_key.clone(),
        type_id,
    }
}

impl CulledMaterialPipeline {
    /// The pipeline for `key`, queued in `cache` the first time it is asked
    /// for.
    pub fn specialize(
        &mut self,
        cache: &PipelineCache,
        key: ErasedMaterialPipelineKey,
        layout: &MeshVertexBufferLayoutRef,
        properties: &MaterialProperties,
    ) -> Result<CachedRenderPipelineId, SpecializedMeshPipelineError> {
        let entry = (key, layout.clone());
        if let Some(id) = self.queued.get(&entry) {
            return Ok(*id);
        }
        let descriptor = self.descriptor(entry.0.clone(), layout, properties)?;
        let id = cache.queue_render_pipeline(descriptor);
        self.queued.insert(entry, id);
        Ok(id)
    }

    /// What Bevy's `MaterialPipelineSpecializer` builds, with the plugin's
    /// vertex shader and group 2.
    fn descriptor(
        &self,
        key: ErasedMaterialPipelineKey,
        layout: &MeshVertexBufferLayoutRef,
        properties: &MaterialProperties,
    ) -> Result<RenderPipelineDescriptor, SpecializedMeshPipelineError> {
        let mesh_key: MeshPipelineKey = key.mesh_key.downcast();
        let mut descriptor = self.mesh_pipeline.specialize(mesh_key, layout)?;
        descriptor.label = Some("gpu_cull_material".into());
        let material_group =
            ShaderDefVal::UInt("MATERIAL_BIND_GROUP".into(), MATERIAL_BIND_GROUP_INDEX as u32);
        descriptor.vertex.shader_defs.push(material_group.clone());
        // The instance's color reaches the fragment shader as the vertex
        // color (times the mesh's own, where it has one), which Bevy's
        // `StandardMaterial` functions multiply into the base color.
        let vertex_colors = ShaderDefVal::from("VERTEX_COLORS");
        if descriptor.vertex.shader_defs.contains(&vertex_colors) {
            descriptor.vertex.shader_defs.push("GPU_CULL_MESH_COLORS".into());
        } else {
            descriptor.vertex.shader_defs.push(vertex_colors.clone());
            if let Some(fragment) = descriptor.fragment.as_mut() {
                fragment.shader_defs.push(vertex_colors);
            }
        }
        if let Some(fragment) = descriptor.fragment.as_mut() {
            fragment.shader_defs.push(material_group);
            if let Some(shader) = properties.get_shader(MaterialFragmentShader) {
                fragment.shader = shader;
            }
        }
        // Group 2 is the batch's (with Bevy's `mesh` array at binding 0);
        // group 3 the material's.
        descriptor.layout.truncate(2);
        descriptor.layout.push(self.instance_layout.clone());
        if let Some(material_layout) = &properties.material_layout {
            descriptor.layout.push(material_layout.clone());
        }
        if let Some(specialize) = properties.user_specialize {
            let pipeline = MaterialPipeline {
                mesh_pipeline: self.mesh_pipeline.clone(),
            };
            specialize(&pipeline, &mut descriptor, layout, key)?;
        }
        // The material's vertex shader cannot fetch the instances: ours
        // stays, whatever the material's `specialize` set.
        if properties.get_shader(MaterialVertexShader).is_some() {
            warn_once!(
                "bevy-gpu-cull: a material's vertex shader is not used for culled batches (the plugin's \
                 fetches the instances); its fragment shader gets Bevy's forward VertexOutput"
            );
        }
        descriptor.vertex.shader = self.vertex_shader.clone();
        if properties.bindless {
            descriptor.vertex.shader_defs.push("BINDLESS".into());
            if let Some(fragment) = descriptor.fragment.as_mut() {
                fragment.shader_defs.push("BINDLESS".into());
            }
        }
        Ok(descriptor)
    }
}
