// The surface of a pixel of a pixel level (GpuCullLodLevel::as_pixels), for
// a material's own fragment shader: Bevy's materials shade a pixel whose
// surface is resolved per pixel under MESHLET_MESH_MATERIAL_PASS (their
// fragment takes only its position and calls resolve_vertex_output), so the
// plugin gives this module Bevy's import path in place of Bevy's stand-in
// for it (its meshlets are off). A batch's draw over the tiles holding its
// pixels, after the splat (cull_core::PixelSplatter), keeps the pixels holding one of its
// instances' ids and shades each as its level mesh seen about its middle:
// at the instance's mesh-space bounding-sphere center, with the mesh's
// mean normal and texture coordinate.
#define_import_path bevy_pbr::meshlet_visibility_buffer_resolve

#ifdef MESHLET_MESH_MATERIAL_PASS
#import bevy_pbr::mesh_view_bindings::view
#import bevy_pbr::mesh_types::Mesh
#import bevy_render::maths::affine3_to_square
#import bevy_gpu_cull::types::GpuCullInstance

// What Bevy's PBR fragment functions read of a resolved pixel (Bevy's
// meshlet VertexOutput), with the vertex color a batch's instances give
// and the instance's record, as the plugin's forward VertexOutput has it.
struct VertexOutput {
    position: vec4<f32>,
    world_position: vec4<f32>,
    world_normal: vec3<f32>,
    uv: vec2<f32>,
    uv_b: vec2<f32>,
    ddx_uv: vec2<f32>,
    ddy_uv: vec2<f32>,
    world_tangent: vec4<f32>,
    color: vec4<f32>,
    mesh_flags: u32,
    cluster_id: u32,
    material_bind_group_slot: u32,
    instance_record: u32,
    visibility_range_dither: i32,
}

// The batch's resolve: its ids in the view's splat, the point each
// instance is splatted at, and the surface its pixel shows.
struct PixelResolve {
    // The view's viewport origin in the target, and its width in pixels.
    origin: vec2<u32>,
    width: u32,
    // The batch's ids are id_base + 1 to id_base + id_count.
    id_base: u32,
    // The mesh-space point splatted (the cull's bounding-sphere center).
    center: vec3<f32>,
    id_count: u32,
    // The level mesh's mean normal, in mesh space.
    normal: vec3<f32>,
    // 1: the level turns with the view (GpuCullLodLevel::facing_camera).
    facing_camera: u32,
    // The level mesh's mean texture coordinate.
    uv: vec2<f32>,
}

// Group 2 as the batch's draws bind it (bevy_gpu_cull's layout): Bevy's
// `mesh` array's entry for the batch, its records, the view's pixel ids in
// the survivors' place and this resolve in the level's.
@group(2) @binding(0) var<storage, read> batch_mesh: array<Mesh>;
@group(2) @binding(10) var<storage, read> instances: array<GpuCullInstance>;
@group(2) @binding(11) var<storage, read> pixel_ids: array<u32>;
@group(2) @binding(19) var<uniform> resolve: PixelResolve;

fn rotate(q: vec4<f32>, v: vec3<f32>) -> vec3<f32> {
    return v + 2.0 * cross(q.xyz, cross(q.xyz, v) + q.w * v);
}

// The surface at `frag_coord`, or a discard where the pixel holds none of
// the batch's instances.
fn resolve_vertex_output(frag_coord: vec4<f32>) -> VertexOutput {
    let xy = vec2<u32>(frag_coord.xy) - resolve.origin;
    let id = pixel_ids[xy.y * resolve.width + xy.x];
    if id <= resolve.id_base || id - resolve.id_base > min(resolve.id_count, arrayLength(&instances)) {
        discard;
    }
    let record = id - resolve.id_base - 1u;
    let instance = instances[record];
    let local = instance.position_scale.xyz
        + rotate(instance.rotation, resolve.center.xyz * instance.position_scale.w);
    let world_from_local = affine3_to_square(batch_mesh[0].world_from_local);
    let world = (world_from_local * vec4<f32>(local, 1.0)).xyz;
    // The mean normal turned as the level's mesh is: like the view for a
    // level facing the camera, else by the instance and the batch.
    var normal: vec3<f32>;
    if resolve.facing_camera == 1u {
        normal = mat3x3<f32>(
            normalize(view.world_from_view[0].xyz),
            normalize(view.world_from_view[1].xyz),
            normalize(view.world_from_view[2].xyz),
        ) * resolve.normal;
    } else {
        let turned = rotate(instance.rotation, resolve.normal) * sign(instance.position_scale.w);
        normal = mat3x3<f32>(world_from_local[0].xyz, world_from_local[1].xyz, world_from_local[2].xyz) * turned;
    }
    var out: VertexOutput;
    out.position = frag_coord;
    out.world_position = vec4<f32>(world, 1.0);
    out.world_normal = normalize(normal);
    // The mesh's middle, at the texture's coarsest level (the whole
    // texture per pixel).
    out.uv = resolve.uv;
    out.uv_b = resolve.uv;
    out.ddx_uv = vec2<f32>(1.0, 0.0);
    out.ddy_uv = vec2<f32>(0.0, 1.0);
    out.world_tangent = vec4<f32>(normalize(view.world_from_view[0].xyz), 1.0);
    out.color = instance.color;
    out.mesh_flags = batch_mesh[0].flags;
    out.material_bind_group_slot = batch_mesh[0].material_and_lightmap_bind_group_slot & 0xffffu;
    out.instance_record = record;
    return out;
}
#endif
