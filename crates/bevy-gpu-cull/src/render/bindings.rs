//! The batch's bind group, group 2 of every draw of the plugin (main pass,
//! prepasses, shadows, G-buffer): its binding numbers, which the shader
//! library `bevy_gpu_cull::instance` declares with the same numbers, and
//! its layout.

use bevy::prelude::*;
use bevy::render::render_resource::binding_types::{
    sampler, storage_buffer_read_only_sized, texture_2d, uniform_buffer_sized,
};
use bevy::render::render_resource::{
    BindGroupLayoutDescriptor, BindGroupLayoutEntries, SamplerBindingType, ShaderStages, TextureSampleType,
};

/// Bevy's `mesh` array (`bevy_pbr::mesh_bindings`), one entry for the
/// batch: its transform, flags and material slot.
pub(crate) const MESH: u32 = 0;
/// The batch's draw records.
pub(crate) const INSTANCES: u32 = 10;
/// The view's survivor indices for the drawn level.
pub(crate) const SURVIVORS: u32 = 11;
/// The plugin's material uniform (`GpuCullMaterial`, for draw shaders).
pub(crate) const MATERIAL: u32 = 12;
/// The base color texture, then its sampler.
pub(crate) const BASE_COLOR_TEXTURE: u32 = 13;
pub(crate) const BASE_COLOR_SAMPLER: u32 = 14;
/// The normal map, metallic-roughness, emissive and occlusion textures.
pub(crate) const NORMAL_MAP_TEXTURE: u32 = 15;
pub(crate) const METALLIC_ROUGHNESS_TEXTURE: u32 = 16;
pub(crate) const EMISSIVE_TEXTURE: u32 = 17;
pub(crate) const OCCLUSION_TEXTURE: u32 = 18;
/// The drawn level's `GpuCullLevel`.
pub(crate) const LEVEL: u32 = 19;
/// Last frame's draw records (this frame's for a batch without
/// `GpuCullMotionVectors`), for motion vectors.
pub(crate) const PREVIOUS_INSTANCES: u32 = 20;
/// The drawn list's indirect draw arguments, up to and including its
/// instance count: the vertex stage spreads its draw order over that many
/// survivors (`shaders/gpu_cull_draw_order.wgsl`).
pub(crate) const DRAWN_ARGS: u32 = 21;

/// The draw shader the plugin was configured with
/// ([`crate::GpuCullPlugin::draw_shader`]), which draws with these bindings
/// instead of a material's.
#[derive(Resource)]
pub(crate) struct DrawShaderRef(pub bevy::shader::ShaderRef);

/// The layout of the batch's bind group.
#[derive(Resource, Clone)]
pub(crate) struct InstanceBindings {
    pub layout: BindGroupLayoutDescriptor,
}

impl Default for InstanceBindings {
    fn default() -> Self {
        let texture = || texture_2d(TextureSampleType::Float { filterable: true });
        let layout = BindGroupLayoutDescriptor::new(
            "gpu_cull_instances",
            &BindGroupLayoutEntries::with_indices(
                ShaderStages::VERTEX_FRAGMENT,
                (
                    (MESH, storage_buffer_read_only_sized(false, None)),
                    (INSTANCES, storage_buffer_read_only_sized(false, None)),
                    (SURVIVORS, storage_buffer_read_only_sized(false, None)),
                    (MATERIAL, uniform_buffer_sized(false, None)),
                    (BASE_COLOR_TEXTURE, texture()),
                    (BASE_COLOR_SAMPLER, sampler(SamplerBindingType::Filtering)),
                    (NORMAL_MAP_TEXTURE, texture()),
                    (METALLIC_ROUGHNESS_TEXTURE, texture()),
                    (EMISSIVE_TEXTURE, texture()),
                    (OCCLUSION_TEXTURE, texture()),
                    (LEVEL, uniform_buffer_sized(false, None)),
                    (PREVIOUS_INSTANCES, storage_buffer_read_only_sized(false, None)),
                    // The vertex stage's alone: a fragment stage has few
                    // storage buffers to spare on some devices.
                    (
                        DRAWN_ARGS,
                        storage_buffer_read_only_sized(false, None).visibility(ShaderStages::VERTEX),
                    ),
                ),
            ),
        );
        Self { layout }
    }
}
