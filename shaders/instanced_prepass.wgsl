// The Bevy plugin's depth-only draw of a batch drawn by an application's
// draw shader, for shadow maps and the camera's prepasses (a batch drawn
// with a material uses its material's prepass, instanced_material_prepass.wgsl):
// the same instance fetch and transform as instanced_material.wgsl
// (the main pass tests depth with GreaterEqual against what this writes, so
// the two must compute identical positions), and the same pixels of a
// cross-fade (Bevy's visibility-range dither). Group 0 is Bevy's prepass view
// bindings, group 1 empty, group 2 the batch's (bevy_gpu_cull::instance).

#import bevy_pbr::{
    mesh_view_bindings::view,
    view_transformations::position_world_to_clip,
}
#ifdef MOTION_VECTOR_PREPASS
#import bevy_pbr::prepass_bindings::previous_view_uniforms
#endif
#import bevy_gpu_cull::instance::{fetch_instance, instance_to_world, instance_normal_to_world}
#ifdef MOTION_VECTOR_PREPASS
#import bevy_gpu_cull::instance::{instance_to_previous_world, fetch_previous_instance}
#endif
#ifdef GPU_CULL_ALPHA_MASK
#import bevy_gpu_cull::instance::{material_color, masked_out}
#endif
#ifdef VISIBILITY_RANGE_DITHER
#import bevy_gpu_cull::instance::level_dither
#import bevy_pbr::pbr_functions::visibility_range_dither
#endif

struct Vertex {
    @builtin(instance_index) instance_index: u32,
    @location(0) position: vec3<f32>,
#ifdef NORMAL_PREPASS
    @location(1) normal: vec3<f32>,
#endif
#ifdef VERTEX_UVS_A
    @location(2) uv: vec2<f32>,
#endif
}

struct VertexOutput {
    @builtin(position) position: vec4<f32>,
    @location(0) world_position: vec4<f32>,
#ifdef NORMAL_PREPASS
    @location(1) world_normal: vec3<f32>,
#endif
#ifdef UNCLIPPED_DEPTH_ORTHO_EMULATION
    @location(2) unclipped_depth: f32,
#endif
#ifdef GPU_CULL_ALPHA_MASK
    @location(3) color: vec4<f32>,
    @location(4) uv: vec2<f32>,
#endif
#ifdef VISIBILITY_RANGE_DITHER
    // The same pixels as the main pass keeps (level_dither).
    @location(5) @interpolate(flat) dither: i32,
#endif
#ifdef MOTION_VECTOR_PREPASS
    // Where the vertex was last frame: the batch's transform and (with
    // GpuCullMotionVectors) the instance may have moved.
    @location(6) previous_world_position: vec4<f32>,
#endif
}

@vertex
fn vertex(vertex: Vertex) -> VertexOutput {
    let instance = fetch_instance(vertex.instance_index);
    let world = instance_to_world(instance, vertex.position);
    var out: VertexOutput;
    out.position = position_world_to_clip(world);
    out.world_position = vec4<f32>(world, 1.0);
#ifdef MOTION_VECTOR_PREPASS
    out.previous_world_position = vec4<f32>(instance_to_previous_world(fetch_previous_instance(vertex.instance_index), vertex.position), 1.0);
#endif
#ifdef NORMAL_PREPASS
    out.world_normal = instance_normal_to_world(instance, vertex.normal);
#endif
#ifdef UNCLIPPED_DEPTH_ORTHO_EMULATION
    // A directional light's casters between the light and the cascade are
    // kept by the cull; clamp them onto the near plane instead of clipping.
    out.unclipped_depth = out.position.z;
    out.position.z = min(out.position.z, 1.0);
#endif
#ifdef GPU_CULL_ALPHA_MASK
    out.color = instance.color;
#ifdef VERTEX_UVS_A
    out.uv = vertex.uv;
#else
    out.uv = vec2<f32>(0.5);
#endif
#endif
#ifdef VISIBILITY_RANGE_DITHER
    out.dither = level_dither(instance);
#endif
    return out;
}

// Discards the fragment where it is not drawn: masked out by the
// material, or the other level's pixel in a cross-fade.
fn discard_hidden(in: VertexOutput) {
#ifdef GPU_CULL_ALPHA_MASK
    if masked_out(material_color(in.color, in.uv)) {
        discard;
    }
#endif
#ifdef VISIBILITY_RANGE_DITHER
    visibility_range_dither(in.position, in.dither);
#endif
}

#ifdef PREPASS_FRAGMENT
struct FragmentOutput {
#ifdef NORMAL_PREPASS
    @location(0) normal: vec4<f32>,
#endif
#ifdef MOTION_VECTOR_PREPASS
    @location(1) motion_vector: vec2<f32>,
#endif
#ifdef UNCLIPPED_DEPTH_ORTHO_EMULATION
    @builtin(frag_depth) frag_depth: f32,
#endif
}

@fragment
fn fragment(in: VertexOutput) -> FragmentOutput {
    var out: FragmentOutput;
    discard_hidden(in);
#ifdef NORMAL_PREPASS
    out.normal = vec4<f32>(normalize(in.world_normal) * 0.5 + vec3<f32>(0.5), 1.0);
#endif
#ifdef MOTION_VECTOR_PREPASS
    // The camera's motion, the batch transform's and the instance's own
    // (with GpuCullMotionVectors), as Bevy's meshes get theirs.
    let clip_t = view.unjittered_clip_from_world * in.world_position;
    let previous_t = previous_view_uniforms.clip_from_world * in.previous_world_position;
    out.motion_vector = (clip_t.xy / clip_t.w - previous_t.xy / previous_t.w) * vec2<f32>(0.5, -0.5);
#endif
#ifdef UNCLIPPED_DEPTH_ORTHO_EMULATION
    out.frag_depth = in.unclipped_depth;
#endif
    return out;
}
#else ifdef GPU_CULL_DISCARDS
// Depth only, alpha-masked or cross-faded: the fragment decides coverage,
// writes nothing.
@fragment
fn fragment(in: VertexOutput) {
    discard_hidden(in);
}
#endif
