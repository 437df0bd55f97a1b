// The vertex output of every batch's main pass: Bevy's forward
// `VertexOutput` (`bevy_pbr::forward_io`, the same fields at the same
// locations) and the drawn instance's record. A material's fragment shader
// written for Bevy's meshes takes Bevy's struct and runs unchanged (it
// reads a subset of these locations); one that takes this struct reaches
// its instance's color and user data through `instance_record`
// (`bevy_gpu_cull::instance::{get_instance_color, get_instance_user}`).
#define_import_path bevy_gpu_cull::forward_io

struct VertexOutput {
    @builtin(position) position: vec4<f32>,
    @location(0) world_position: vec4<f32>,
    @location(1) world_normal: vec3<f32>,
#ifdef VERTEX_UVS_A
    @location(2) uv: vec2<f32>,
#endif
#ifdef VERTEX_UVS_B
    @location(3) uv_b: vec2<f32>,
#endif
#ifdef VERTEX_TANGENTS
    @location(4) world_tangent: vec4<f32>,
#endif
#ifdef VERTEX_COLORS
    @location(5) color: vec4<f32>,
#endif
#ifdef VERTEX_OUTPUT_INSTANCE_INDEX
    @location(6) @interpolate(flat) instance_index: u32,
#endif
#ifdef VISIBILITY_RANGE_DITHER
    @location(7) @interpolate(flat) visibility_range_dither: i32,
#endif
    // The drawn instance's record on the GPU, what get_instance_color and
    // get_instance_user take: its index in the batch's list
    // (`GpuCullInstances::instances`), except in a batch sorted into
    // cells (`GpuCullCells`), whose records are in the cells' order.
    @location(15) @interpolate(flat) instance_record: u32,
}
