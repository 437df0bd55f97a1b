// The vertex stage of a batch's shadow maps, camera prepasses and deferred
// G-buffer: each survivor is fetched through the cull's output and
// transformed exactly as the main pass does (instanced_material.wgsl: the
// main pass tests depth with GreaterEqual against what this writes), and
// the result is Bevy's `prepass_io::VertexOutput`, so the batch's
// material's own prepass or deferred fragment shader (Bevy's for a
// `StandardMaterial`: alpha mask, normals, motion vectors, the G-buffer)
// runs unchanged. The instance's color is the vertex color the material
// sees, as in the main pass. Its `instance_index` is the instance's
// batch's entry in Bevy's `mesh` array (group 2, binding 0), as in the
// main pass.

#import bevy_pbr::view_transformations::position_world_to_clip
#import bevy_pbr::prepass_io::VertexOutput
#import bevy_gpu_cull::instance::{
    batch_member, fetch_instance, fetch_record, instance_to_world, instance_normal_to_world, instance_tangent_to_world,
    drawn_by_other_winding, skipped_position,
}
#ifdef MOTION_VECTOR_PREPASS
#import bevy_gpu_cull::instance::{instance_to_previous_world, fetch_previous_instance}
#endif
#ifdef VISIBILITY_RANGE_DITHER
#import bevy_gpu_cull::instance::level_dither
#endif

// Bevy's prepass vertex locations (`prepass_io::Vertex`).
struct Vertex {
    @builtin(instance_index) instance_index: u32,
    @location(0) position: vec3<f32>,
#ifdef VERTEX_UVS_A
    @location(1) uv: vec2<f32>,
#endif
#ifdef VERTEX_UVS_B
    @location(2) uv_b: vec2<f32>,
#endif
#ifdef NORMAL_PREPASS_OR_DEFERRED_PREPASS
#ifdef VERTEX_NORMALS
    @location(3) normal: vec3<f32>,
#endif
#ifdef VERTEX_TANGENTS
    @location(4) tangent: vec4<f32>,
#endif
#endif
#ifdef GPU_CULL_MESH_COLORS
    @location(7) color: vec4<f32>,
#endif
}

@vertex
fn vertex(vertex: Vertex) -> VertexOutput {
    let instance = fetch_instance(vertex.instance_index);
    var out: VertexOutput;
    if drawn_by_other_winding(instance) {
        out.position = skipped_position();
        return out;
    }
    let world = instance_to_world(instance, vertex.position);
    out.world_position = vec4<f32>(world, 1.0);
    out.position = position_world_to_clip(world);
#ifdef UNCLIPPED_DEPTH_ORTHO_EMULATION
    // A directional light's casters between the light and the cascade are
    // kept by the cull; clamped onto the near plane instead of clipped.
    out.unclipped_depth = out.position.z;
    out.position.z = min(out.position.z, 1.0);
#endif
#ifdef VERTEX_UVS_A
    out.uv = vertex.uv;
#endif
#ifdef VERTEX_UVS_B
    out.uv_b = vertex.uv_b;
#endif
#ifdef NORMAL_PREPASS_OR_DEFERRED_PREPASS
#ifdef VERTEX_NORMALS
    out.world_normal = instance_normal_to_world(instance, vertex.normal);
#endif
#ifdef VERTEX_TANGENTS
    out.world_tangent = instance_tangent_to_world(instance, vertex.tangent);
#endif
#endif
    // The plugin defines VERTEX_COLORS for every material draw.
#ifdef GPU_CULL_MESH_COLORS
    out.color = instance.color * vertex.color;
#else
    out.color = instance.color;
#endif
#ifdef MOTION_VECTOR_PREPASS
    // Where the vertex was last frame: the batch's transform and (with
    // GpuCullMotionVectors) the instance may have moved.
    out.previous_world_position = vec4<f32>(instance_to_previous_world(fetch_previous_instance(vertex.instance_index), vertex.position), 1.0);
#endif
#ifdef VERTEX_OUTPUT_INSTANCE_INDEX
    out.instance_index = batch_member(fetch_record(vertex.instance_index));
#endif
#ifdef VISIBILITY_RANGE_DITHER
    out.visibility_range_dither = level_dither(instance);
#endif
    return out;
}

#ifdef GPU_CULL_PREPASS_DITHER
// A depth-only camera prepass of levels that cross-fade: Bevy's runs no
// fragment stage there, so its depth would cover the pixels the main pass
// dithers out of this level. This one drops them, and cuts the alpha mask
// as Bevy's PBR prepass does, so that depth matches color.
#import bevy_pbr::pbr_functions::visibility_range_dither
#ifdef GPU_CULL_PBR_ALPHA_DISCARD
#import bevy_pbr::pbr_prepass_functions::prepass_alpha_discard
#endif

@fragment
fn fragment(in: VertexOutput) {
    visibility_range_dither(in.position, in.visibility_range_dither);
#ifdef GPU_CULL_PBR_ALPHA_DISCARD
    prepass_alpha_discard(in);
#endif
}
#endif
