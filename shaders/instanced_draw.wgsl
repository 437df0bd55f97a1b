// The Bevy plugin's draw: each instance is fetched through the cull's
// output (the indices of the survivors, in draw order), transformed, and lit
// with Bevy's PBR lighting so culled batches look like Bevy's own meshes.
// Groups 0 and 1 are Bevy's view bindings; group 2 is the batch's
// (bevy_gpu_cull::instance).

#import bevy_pbr::{
    mesh_view_bindings::view,
    mesh_types::MESH_FLAGS_SHADOW_RECEIVER_BIT,
    pbr_types::pbr_input_new,
    pbr_functions::{apply_pbr_lighting, main_pass_post_lighting_processing, calculate_view},
    view_transformations::position_world_to_clip,
}
#import bevy_gpu_cull::instance::{
    fetch_instance, instance_to_world, instance_rotate, material, material_color, masked_out, mapped_normal,
    material_metallic_roughness, material_emissive, material_occlusion, MATERIAL_UNLIT,
}
#ifdef GPU_CULL_CROSS_FADE
#import bevy_gpu_cull::instance::{level_fade, faded_out}
#endif

struct Vertex {
    @builtin(instance_index) instance_index: u32,
    @location(0) position: vec3<f32>,
    @location(1) normal: vec3<f32>,
#ifdef VERTEX_UVS_A
    @location(2) uv: vec2<f32>,
#endif
#ifdef VERTEX_TANGENTS
    @location(4) tangent: vec4<f32>,
#endif
}

struct VertexOutput {
    @builtin(position) clip_position: vec4<f32>,
    @location(0) world_position: vec4<f32>,
    @location(1) world_normal: vec3<f32>,
    @location(2) color: vec4<f32>,
#ifdef VERTEX_UVS_A
    @location(3) uv: vec2<f32>,
#endif
#ifdef VERTEX_TANGENTS
    @location(4) world_tangent: vec4<f32>,
#endif
#ifdef GPU_CULL_CROSS_FADE
    // The instance's share of the pixels in this level (level_fade).
    @location(5) @interpolate(flat) fade: vec2<f32>,
#endif
}

@vertex
fn vertex(vertex: Vertex) -> VertexOutput {
    let instance = fetch_instance(vertex.instance_index);
    let world = instance_to_world(instance, vertex.position);
    var out: VertexOutput;
    out.clip_position = position_world_to_clip(world);
    out.world_position = vec4<f32>(world, 1.0);
    out.world_normal = instance_rotate(instance, vertex.normal);
    out.color = instance.color;
#ifdef VERTEX_UVS_A
    out.uv = vertex.uv;
#endif
#ifdef VERTEX_TANGENTS
    out.world_tangent = vec4<f32>(instance_rotate(instance, vertex.tangent.xyz), vertex.tangent.w);
#endif
#ifdef GPU_CULL_CROSS_FADE
    out.fade = level_fade(instance);
#endif
    return out;
}

@fragment
fn fragment(in: VertexOutput) -> @location(0) vec4<f32> {
#ifdef GPU_CULL_CROSS_FADE
    if faded_out(in.clip_position.xy, in.fade) {
        discard;
    }
#endif
    var pbr_input = pbr_input_new();
    // The batch's material, tinted by the instance's color; a mesh without
    // UVs samples the textures' centre.
#ifdef VERTEX_UVS_A
    let uv = in.uv;
#else
    let uv = vec2<f32>(0.5);
#endif
    let color = material_color(in.color, uv);
#ifdef GPU_CULL_ALPHA_MASK
    // Only an alpha-masked batch's shader may discard (the plugin sets the
    // def): a discard anywhere in the shader costs every opaque batch the
    // early depth test.
    if masked_out(color) {
        discard;
    }
#endif
    pbr_input.material.base_color = color;
    pbr_input.material.emissive = material_emissive(uv);
    let metallic_roughness = material_metallic_roughness(uv);
    pbr_input.material.metallic = metallic_roughness.x;
    pbr_input.material.perceptual_roughness = metallic_roughness.y;
    pbr_input.diffuse_occlusion = vec3<f32>(material_occlusion(uv));
    pbr_input.frag_coord = in.clip_position;
    pbr_input.world_position = in.world_position;
    pbr_input.world_normal = normalize(in.world_normal);
#ifdef VERTEX_UVS_A
#ifdef VERTEX_TANGENTS
    pbr_input.N = mapped_normal(pbr_input.world_normal, in.world_tangent, in.uv);
#else
    pbr_input.N = pbr_input.world_normal;
#endif
#else
    pbr_input.N = pbr_input.world_normal;
#endif
    pbr_input.is_orthographic = view.clip_from_view[3].w == 1.0;
    pbr_input.V = calculate_view(in.world_position, pbr_input.is_orthographic);
#ifdef GPU_CULL_SHADOW_RECEIVER
    // As Bevy's meshes: sample the lights' shadow maps unless the batch
    // has NotShadowReceiver (the plugin sets the def per batch).
    pbr_input.flags |= MESH_FLAGS_SHADOW_RECEIVER_BIT;
#endif
    if (material.flags & MATERIAL_UNLIT) != 0u {
        return main_pass_post_lighting_processing(pbr_input, color);
    }
    let lit = apply_pbr_lighting(pbr_input);
    return main_pass_post_lighting_processing(pbr_input, lit);
}
