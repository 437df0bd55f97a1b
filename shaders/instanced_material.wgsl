// The vertex stage of every batch's main pass: each survivor is fetched
// through the cull's output and transformed, and the result is Bevy's
// `forward_io::VertexOutput` (with the instance's record beside it,
// `bevy_gpu_cull::forward_io`), so the batch's material's own fragment shader
// (Bevy's for a `StandardMaterial`), written for Bevy's meshes, runs
// unchanged: fog, ambient occlusion, emissive exposure, every texture and
// flag as on a mesh. Its
// `instance_index` is the instance's batch's entry in Bevy's `mesh` array
// (group 2, binding 0: 0 but where batches are drawn together), which
// holds the batch entity's transform, flags and material slot.

#import bevy_pbr::view_transformations::position_world_to_clip
#import bevy_gpu_cull::forward_io::VertexOutput
#import bevy_gpu_cull::instance::{
    batch_member, fetch_instance, fetch_record, instance_to_world, instance_normal_to_world, instance_tangent_to_world,
    drawn_by_other_winding, skipped_position,
}
#ifdef VISIBILITY_RANGE_DITHER
#import bevy_gpu_cull::instance::level_dither
#endif

struct Vertex {
    @builtin(instance_index) instance_index: u32,
    @location(0) position: vec3<f32>,
#ifdef VERTEX_NORMALS
    @location(1) normal: vec3<f32>,
#endif
#ifdef VERTEX_UVS_A
    @location(2) uv: vec2<f32>,
#endif
#ifdef VERTEX_UVS_B
    @location(3) uv_b: vec2<f32>,
#endif
#ifdef VERTEX_TANGENTS
    @location(4) tangent: vec4<f32>,
#endif
#ifdef GPU_CULL_MESH_COLORS
    @location(5) color: vec4<f32>,
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
    out.instance_record = fetch_record(vertex.instance_index);
    out.position = position_world_to_clip(world);
    out.world_position = vec4<f32>(world, 1.0);
#ifdef VERTEX_NORMALS
    out.world_normal = instance_normal_to_world(instance, vertex.normal);
#endif
#ifdef VERTEX_UVS_A
    out.uv = vertex.uv;
#endif
#ifdef VERTEX_UVS_B
    out.uv_b = vertex.uv_b;
#endif
#ifdef VERTEX_TANGENTS
    out.world_tangent = instance_tangent_to_world(instance, vertex.tangent);
#endif
    // The instance's color is the vertex color the material sees (the
    // plugin defines VERTEX_COLORS for a batch with colored instances, and
    // Bevy for a mesh with vertex colors).
#ifdef GPU_CULL_MESH_COLORS
    out.color = instance.color * vertex.color;
#else
#ifdef VERTEX_COLORS
    out.color = instance.color;
#endif
#endif
#ifdef VERTEX_OUTPUT_INSTANCE_INDEX
    out.instance_index = batch_member(out.instance_record);
#endif
#ifdef VISIBILITY_RANGE_DITHER
    // A cross-fade between levels of detail, dithered as Bevy dithers its
    // visibility ranges (the material's fragment shader discards).
    out.visibility_range_dither = level_dither(instance);
#endif
    return out;
}
