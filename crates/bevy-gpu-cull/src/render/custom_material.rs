//! A batch's material in the main pass: Bevy's own `MaterialPlugin<M>`
//! prepares it (bind group, bindless slot, shaders, specialization), and the
//! plugin draws the batch's survivors with the material's fragment shader
//! and bind group (group 3) behind its own instance-fetching vertex shader
//! (`shaders/instanced_material.wgsl`). A `StandardMaterial` is shaded by
//! Bevy's own PBR fragment shader, so every feature of it (fog, ambient
//! occlusion, emissive and its exposure weight, textures, unlit, ...) works
//! as on a mesh; a batch without a material gets a white
//! `StandardMaterial`. Nothing here is generic over the material type: Bevy
//! 0.19's prepared materials are type-erased, so every material type
//! registered with Bevy works without a plugin of ours.

use bevy::asset::{UntypedAssetId, load_embedded_asset, uuid_handle};
use bevy::ecs::system::{SystemParamItem, lifetimeless::SRes};
use bevy::material::key::ErasedMaterialPipelineKey;
use bevy::material::labels::ShaderLabel;
use bevy::material::{MaterialProperties, OpaqueRendererMethod, RenderPhaseType, key::ErasedMeshPipelineKey};
use bevy::mesh::MeshVertexBufferLayoutRef;
use bevy::pbr::{
    MATERIAL_BIND_GROUP_INDEX, MaterialBindGroupAllocators, MaterialFragmentShader, MaterialPipeline,
    MaterialVertexShader, MeshPipeline, MeshPipelineKey, PreparedMaterial, RenderMaterialInstances,
    alpha_mode_pipeline_key,
};
use bevy::platform::collections::HashMap;
use bevy::prelude::*;
use bevy::render::erased_render_asset::ErasedRenderAssets;
use bevy::render::render_phase::{PhaseItem, RenderCommand, RenderCommandResult, TrackedRenderPass};
use bevy::render::render_resource::{
    BindGroupLayoutDescriptor, CachedRenderPipelineId, PipelineCache, RenderPipelineDescriptor,
    SpecializedMeshPipeline, SpecializedMeshPipelineError,
};
use bevy::render::sync_world::MainEntity;
use bevy::shader::{Shader, ShaderDefVal};

/// The material of a batch that has none: white, as Bevy's
/// `StandardMaterial::default()` (Bevy's own default handle holds a pink
/// "missing material" one).
pub(crate) const DEFAULT_MATERIAL: Handle<StandardMaterial> =
    uuid_handle!("4b0a61d2-6f53-4d3c-9a57-0c3f2d8e91b7");

/// Registers [`DEFAULT_MATERIAL`] with Bevy's `StandardMaterial` assets.
pub(crate) fn add_default_material(app: &mut App) {
    if let Some(mut materials) = app.world_mut().get_resource_mut::<Assets<StandardMaterial>>() {
        let _ = materials.insert(&DEFAULT_MATERIAL, StandardMaterial::default());
    } else {
        error!(
            "bevy-gpu-cull needs Bevy's PbrPlugin (in DefaultPlugins): batches without a material are not drawn"
        );
    }
}

/// The material a batch is drawn with: the one Bevy extracted for its
/// entity (a `MeshMaterial3d` of any type), else [`DEFAULT_MATERIAL`].
pub(crate) fn batch_material(
    instances: &RenderMaterialInstances,
    main_entity: &MainEntity,
) -> UntypedAssetId {
    instances
        .instances
        .get(main_entity)
        .map_or_else(|| DEFAULT_MATERIAL.id().untyped(), |instance| instance.asset_id)
}

/// Whether a material's main pass dithers a cross-fade: its fragment shader
/// is Bevy's PBR one (`StandardMaterial`'s, which [`DEFAULT_MATERIAL`] has,
/// or an extension's that keeps it), which applies the visibility-range
/// dither. A material of its own fragment shader draws both levels in full
/// across a fade, and so do its prepasses (depth must match color).
pub(crate) fn dithers(material: &PreparedMaterial, materials: &ErasedRenderAssets<PreparedMaterial>) -> bool {
    keeps_pbr_fragment(material, materials)
}

/// Whether `material`'s fragment shader is Bevy's PBR one (a plain
/// `StandardMaterial`'s, which reads the vertex color only under
/// `VERTEX_COLORS`), not a shader of its own.
pub(crate) fn keeps_pbr_fragment(
    material: &PreparedMaterial,
    materials: &ErasedRenderAssets<PreparedMaterial>,
) -> bool {
    let (own, pbr) = shader_and_standard(material, materials, MaterialFragmentShader);
    own.is_none() || pbr.is_some_and(|pbr| pbr == own)
}

/// `material`'s shader under `label`, and a `StandardMaterial`'s
/// ([`DEFAULT_MATERIAL`]'s, once prepared): whether a material keeps Bevy's
/// PBR shader there.
pub(crate) fn shader_and_standard(
    material: &PreparedMaterial,
    materials: &ErasedRenderAssets<PreparedMaterial>,
    label: impl ShaderLabel,
) -> (Option<Handle<Shader>>, Option<Option<Handle<Shader>>>) {
    let label = label.intern();
    let own = material.properties.get_shader(label);
    let pbr = materials
        .get(DEFAULT_MATERIAL.id().untyped())
        .map(|standard| standard.properties.get_shader(label));
    (own, pbr)
}

/// The defs every material draw of a batch adds to Bevy's descriptor: the
/// instance's color as the vertex color (times the mesh's own, where it has
/// one; left out where `instance_colors` is false: every instance white), which Bevy's `StandardMaterial` functions multiply into the base
/// color and an alpha mask cuts by; and `GPU_CULL_BATCH` for the fragment
/// shader, where a material's shader may read its instance's data (Bevy
/// compiles the same shader for ordinary meshes, and for the batch entity's
/// own mesh, which it does not draw).
pub(crate) fn add_batch_defs(descriptor: &mut RenderPipelineDescriptor, instance_colors: bool) {
    let vertex_colors = ShaderDefVal::from("VERTEX_COLORS");
    if descriptor.vertex.shader_defs.contains(&vertex_colors) {
        descriptor.vertex.shader_defs.push("GPU_CULL_MESH_COLORS".into());
    } else if instance_colors {
        descriptor.vertex.shader_defs.push(vertex_colors.clone());
        if let Some(fragment) = descriptor.fragment.as_mut() {
            fragment.shader_defs.push(vertex_colors);
        }
    }
    if let Some(fragment) = descriptor.fragment.as_mut() {
        fragment.shader_defs.push("GPU_CULL_BATCH".into());
    }
}

/// A draw that blends goes through its list in the list's order (which
/// a batch sorted back to front needs); others spread their order over it
/// (`shaders/gpu_cull_draw_order.wgsl`), which the picture of a
/// depth-tested opaque draw does not depend on.
pub(crate) fn keep_order_if_blended(descriptor: &mut RenderPipelineDescriptor) {
    let blends = descriptor
        .fragment
        .as_ref()
        .is_some_and(|f| f.targets.iter().flatten().any(|target| target.blend.is_some()));
    if blends {
        descriptor
            .vertex
            .shader_defs
            .push("GPU_CULL_DRAW_IN_ORDER".into());
    }
}

/// Whether a camera with Bevy's deferred rendering draws `material` into
/// its G-buffer, as it does a mesh with that material: a deferred material
/// of an opaque or alpha-mask phase (Bevy draws a blended or transmissive
/// one forward).
pub(crate) fn renders_deferred(material: &PreparedMaterial) -> bool {
    material.properties.render_method == OpaqueRendererMethod::Deferred
        && matches!(
            material.properties.render_phase_type,
            RenderPhaseType::Opaque | RenderPhaseType::AlphaMask
        )
}

/// The bind group of the batch's material (of `main_entity`), once Bevy has
/// made it.
pub(crate) fn material_bind_group<'a>(
    instances: &RenderMaterialInstances,
    materials: &'a ErasedRenderAssets<PreparedMaterial>,
    allocators: &'a MaterialBindGroupAllocators,
    main_entity: &MainEntity,
) -> Option<&'a bevy::render::render_resource::BindGroup> {
    let id = batch_material(instances, main_entity);
    allocators
        .get(&id.type_id())
        .zip(materials.get(id))
        .and_then(|(allocator, material)| allocator.get(material.binding.group))
        .and_then(|group| group.bind_group())
}

/// Binds the batch's material at group `I`: Bevy's `SetMaterialBindGroup`,
/// with [`DEFAULT_MATERIAL`] for a batch that has none.
pub(crate) struct SetBatchMaterialBindGroup<const I: usize>;

impl<P: PhaseItem, const I: usize> RenderCommand<P> for SetBatchMaterialBindGroup<I> {
    type Param = (
        SRes<ErasedRenderAssets<PreparedMaterial>>,
        SRes<RenderMaterialInstances>,
        SRes<MaterialBindGroupAllocators>,
    );
    type ViewQuery = ();
    type ItemQuery = ();

    fn render<'w>(
        item: &P,
        _view: (),
        _item_query: Option<()>,
        (materials, instances, allocators): SystemParamItem<'w, '_, Self::Param>,
        pass: &mut TrackedRenderPass<'w>,
    ) -> RenderCommandResult {
        let (materials, allocators) = (materials.into_inner(), allocators.into_inner());
        let Some(bind_group) = material_bind_group(&instances, materials, allocators, &item.main_entity())
        else {
            return RenderCommandResult::Skip;
        };
        pass.set_bind_group(I, bind_group, &[]);
        RenderCommandResult::Success
    }
}

/// Bevy's mesh pipeline with the instance fetch as its vertex shader, a
/// material's fragment shader and its bind group layout at group 3.
#[derive(Resource)]
pub(crate) struct CulledMaterialPipeline {
    mesh_pipeline: MeshPipeline,
    vertex_shader: Handle<Shader>,
    /// A quad per tile: the vertex stage of a pixel level's resolve
    /// ([`BatchDrawForm::pixels`]).
    tile_quad: Handle<Shader>,
    instance_layout: BindGroupLayoutDescriptor,
    /// Pipelines already queued, by material key and mesh layout.
    queued: HashMap<
        (
            ErasedMaterialPipelineKey,
            MeshVertexBufferLayoutRef,
            BatchDrawForm,
        ),
        CachedRenderPipelineId,
    >,
}

pub(crate) fn init_pipeline(
    mut commands: Commands,
    mesh_pipeline: Res<MeshPipeline>,
    bindings: Res<super::bindings::InstanceBindings>,
    asset_server: Res<AssetServer>,
) {
    commands.insert_resource(CulledMaterialPipeline {
        mesh_pipeline: mesh_pipeline.clone(),
        tile_quad: super::pixels::tile_quad_shader(&asset_server),
        vertex_shader: load_embedded_asset!(asset_server.as_ref(), "shaders/instanced_material.wgsl"),
        instance_layout: bindings.layout.clone(),
        queued: HashMap::default(),
    });
}

/// The pipeline key of a material drawn by `view_key`'s view with a mesh of
/// `mesh_key_bits`, as Bevy's `queue_material_meshes` builds it, with
/// Bevy's visibility-range dither for a batch whose levels cross-fade.
/// A blended alpha mode keeps its blend state: the batch is queued in
/// `Transparent3d` ([`super::blend`]).
pub(crate) fn material_key(
    view_key: MeshPipelineKey,
    mesh_key_bits: MeshPipelineKey,
    properties: &MaterialProperties,
    type_id: std::any::TypeId,
    cross_fade: bool,
) -> ErasedMaterialPipelineKey {
    let msaa = Msaa::from_samples(view_key.msaa_samples());
    let dither = if cross_fade {
        MeshPipelineKey::VISIBILITY_RANGE_DITHER
    } else {
        MeshPipelineKey::NONE
    };
    let mesh_key = view_key
        | dither
        | mesh_key_bits
        | properties.mesh_pipeline_key_bits.downcast::<MeshPipelineKey>()
        | alpha_mode_pipeline_key(properties.alpha_mode, &msaa);
    ErasedMaterialPipelineKey {
        mesh_key: ErasedMeshPipelineKey::new(mesh_key),
        material_key: properties.material_key.clone(),
        type_id,
    }
}

/// How a batch's main-pass draw differs from a mesh's with the same
/// material and key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct BatchDrawForm {
    /// The front face is clockwise: the draw of the instances that wind
    /// backwards ([`super::extract::BatchData::windings`]).
    pub clockwise: bool,
    /// Each instance's color is the vertex color
    /// ([`super::extract::BatchData::instance_colors`]).
    pub instance_colors: bool,
    /// The resolve of a pixel level's pixels
    /// ([`resolve_pixels`]), not the instances' draw.
    pub pixels: bool,
    /// The vertex stage passes the mesh's texture coordinates on: false
    /// only for a `StandardMaterial` that reads none
    /// ([`leave_out_texture_coordinates`]).
    pub texture_coordinates: bool,
}

/// A draw whose material is a `StandardMaterial` that reads no texture
/// coordinates ([`super::standard::reads_texture_coordinates`]: no texture,
/// no anisotropy): the vertex stage leaves them out, as Bevy's shaders do
/// for a mesh without them, and the picture is the same. Each value a vertex passes to
/// the fragment stage costs where triangles are small and many. A mesh
/// with second coordinates (a lightmap's) keeps both.
fn leave_out_texture_coordinates(
    descriptor: &mut RenderPipelineDescriptor,
    layout: &MeshVertexBufferLayoutRef,
) {
    if !layout.0.contains(Mesh::ATTRIBUTE_UV_0) || layout.0.contains(Mesh::ATTRIBUTE_UV_1) {
        return;
    }
    let defs: [ShaderDefVal; 2] = ["VERTEX_UVS".into(), "VERTEX_UVS_A".into()];
    descriptor.vertex.shader_defs.retain(|def| !defs.contains(def));
    if let Some(fragment) = descriptor.fragment.as_mut() {
        fragment.shader_defs.retain(|def| !defs.contains(def));
    }
    // Where Bevy's mesh pipeline puts them (`Vertex::uv` in
    // `shaders/instanced_material.wgsl`).
    let location = Mesh::ATTRIBUTE_UV_0.at_shader_location(2).shader_location;
    for buffer in &mut descriptor.vertex.buffers {
        buffer
            .attributes
            .retain(|attribute| attribute.shader_location != location);
    }
}

/// A pixel level's resolve (`super::pixels`): a quad per tile holding the
/// batch's pixels (`shaders/gpu_cull_pixel_tile_quad.wgsl`) behind the
/// material's fragment shader, which under Bevy's
/// `MESHLET_MESH_MATERIAL_PASS` takes its surface per pixel from
/// `resolve_vertex_output` (`shaders/gpu_cull_pixel_resolve.wgsl`); every
/// pixel shaded (the depth pass before it wrote the pixels' depth, which
/// what is drawn after them is tested against).
fn resolve_pixels(descriptor: &mut RenderPipelineDescriptor, tile_quad: &Handle<Shader>) {
    descriptor.label = Some("gpu_cull_pixels".into());
    descriptor.vertex = bevy::render::render_resource::VertexState {
        shader: tile_quad.clone(),
        shader_defs: vec!["PIXEL_RESOLVE".into()],
        entry_point: Some("tile_quad".into()),
        buffers: Vec::new(),
    };
    descriptor.primitive = default();
    if let Some(depth) = descriptor.depth_stencil.as_mut() {
        depth.depth_write_enabled = Some(false);
        depth.depth_compare = Some(bevy::render::render_resource::CompareFunction::Always);
    }
    if let Some(fragment) = descriptor.fragment.as_mut() {
        fragment.shader_defs.push("MESHLET_MESH_MATERIAL_PASS".into());
    }
}

/// Which batches' materials can shade a pixel level's pixels: opaque,
/// forward, with Bevy's PBR fragment shader (which resolves its surface
/// per pixel under `MESHLET_MESH_MATERIAL_PASS`).
#[derive(bevy::ecs::system::SystemParam)]
pub(crate) struct PixelMaterials<'w> {
    materials: Res<'w, ErasedRenderAssets<PreparedMaterial>>,
    instances: Res<'w, RenderMaterialInstances>,
}

impl PixelMaterials<'_> {
    pub fn shades_pixels(&self, main_entity: &MainEntity) -> bool {
        self.materials
            .get(batch_material(&self.instances, main_entity))
            .is_some_and(|material| shades_pixels(material, &self.materials))
    }
}

/// Whether `material` can shade a pixel level's pixels ([`PixelMaterials`]).
pub(crate) fn shades_pixels(
    material: &PreparedMaterial,
    materials: &ErasedRenderAssets<PreparedMaterial>,
) -> bool {
    let properties = &material.properties;
    keeps_pbr_fragment(material, materials)
        && properties.alpha_mode == AlphaMode::Opaque
        && properties.render_method == OpaqueRendererMethod::Forward
        && matches!(properties.render_phase_type, RenderPhaseType::Opaque)
}

/// A main-pass draw of the instances that wind backwards: the clockwise
/// front face, and the vertex stage's `GPU_CULL_FLIPPED_WINDING`, which
/// keeps those instances and drops the others.
pub(crate) fn wind_clockwise(descriptor: &mut RenderPipelineDescriptor) {
    descriptor.primitive.front_face = bevy::render::render_resource::FrontFace::Cw;
    descriptor
        .vertex
        .shader_defs
        .push("GPU_CULL_FLIPPED_WINDING".into());
}

impl CulledMaterialPipeline {
    /// The pipeline drawing a batch with `material` for a view and mesh of
    /// `view_and_mesh_key`, dithered where its levels `cross_fade` and the
    /// material's fragment shader dithers; `None` until Bevy has prepared
    /// the material (the batch is not drawn until then, as Bevy's meshes
    /// wait for theirs). `form`: how the batch's draw differs from a mesh's.
    pub fn specialize_for(
        &mut self,
        cache: &PipelineCache,
        materials: &ErasedRenderAssets<PreparedMaterial>,
        material: UntypedAssetId,
        view_and_mesh_key: MeshPipelineKey,
        cross_fade: bool,
        form: BatchDrawForm,
        layout: &MeshVertexBufferLayoutRef,
    ) -> Option<Result<CachedRenderPipelineId, SpecializedMeshPipelineError>> {
        let prepared = materials.get(material)?;
        let dither = cross_fade && dithers(prepared, materials);
        // A material's own fragment shader may read `in.color` unguarded
        // (the plugin has always defined it): only Bevy's PBR one goes
        // without it for white instances.
        // Only a `StandardMaterial`'s shaders are known to read the
        // coordinates for textures alone.
        let standard = material.type_id() == std::any::TypeId::of::<StandardMaterial>();
        let form = BatchDrawForm {
            instance_colors: form.instance_colors || !keeps_pbr_fragment(prepared, materials),
            texture_coordinates: form.texture_coordinates || !standard,
            ..form
        };
        let key = material_key(
            view_and_mesh_key,
            MeshPipelineKey::NONE,
            &prepared.properties,
            material.type_id(),
            dither,
        );
        Some(self.specialize(cache, key, layout, &prepared.properties, form))
    }

    /// The pipeline for `key`, queued in `cache` the first time it is asked
    /// for.
    pub fn specialize(
        &mut self,
        cache: &PipelineCache,
        key: ErasedMaterialPipelineKey,
        layout: &MeshVertexBufferLayoutRef,
        properties: &MaterialProperties,
        form: BatchDrawForm,
    ) -> Result<CachedRenderPipelineId, SpecializedMeshPipelineError> {
        let entry = (key, layout.clone(), form);
        if let Some(id) = self.queued.get(&entry) {
            return Ok(*id);
        }
        let mut descriptor = self.descriptor(entry.0.clone(), layout, properties, form.instance_colors)?;
        if form.clockwise {
            wind_clockwise(&mut descriptor);
        }
        if form.pixels {
            resolve_pixels(&mut descriptor, &self.tile_quad);
        } else if !form.texture_coordinates {
            leave_out_texture_coordinates(&mut descriptor, layout);
        }
        let id = cache.queue_render_pipeline(descriptor);
        self.queued.insert(entry, id);
        Ok(id)
    }

    /// What Bevy's `MaterialPipelineSpecializer` builds, with the plugin's
    /// vertex shader and group 2 (and the instances' colors where
    /// `instance_colors`).
    fn descriptor(
        &self,
        key: ErasedMaterialPipelineKey,
        layout: &MeshVertexBufferLayoutRef,
        properties: &MaterialProperties,
        instance_colors: bool,
    ) -> Result<RenderPipelineDescriptor, SpecializedMeshPipelineError> {
        let mesh_key: MeshPipelineKey = key.mesh_key.downcast();
        let mut descriptor = self.mesh_pipeline.specialize(mesh_key, layout)?;
        descriptor.label = Some("gpu_cull_material".into());
        let material_group =
            ShaderDefVal::UInt("MATERIAL_BIND_GROUP".into(), MATERIAL_BIND_GROUP_INDEX as u32);
        descriptor.vertex.shader_defs.push(material_group.clone());
        add_batch_defs(&mut descriptor, instance_colors);
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
        keep_order_if_blended(&mut descriptor);
        if properties.bindless {
            descriptor.vertex.shader_defs.push("BINDLESS".into());
            if let Some(fragment) = descriptor.fragment.as_mut() {
                fragment.shader_defs.push("BINDLESS".into());
            }
        }
        Ok(descriptor)
    }
}
