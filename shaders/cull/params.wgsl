// The uniform block every culling pass binds, and the sizes Rust sets.
// Every `#{NAME}` is a shader def from cull_core's `shader_defs()` (Rust's
// constants, in one place); Bevy's PipelineCache and cull-core's own
// composer substitute them alike.
#define_import_path cull::params

const WORKGROUP_SIZE: u32 = #{WORKGROUP_SIZE}u;
// Instances per item row group of a thread in the single-pass variants.
const ITEMS: u32 = #{ITEMS}u;
// Groups of ITEMS rows per thread: 2 in the ordered variant's subgroup form
// for 16-byte instances, 1 everywhere else.
const ROW_GROUPS: u32 = #{ROW_GROUPS}u;
const TILE: u32 = WORKGROUP_SIZE * ITEMS * ROW_GROUPS;

// One entry per dispatch, at a 256-byte dynamic offset (cull_core's GpuParams).
struct CullParams {
    // Inward-facing normalized planes (n, d): inside when dot(n, p) + d >= 0,
    // d widened by PLANE_TOLERANCE * |d|.
    planes: array<vec4<f32>, 6>,
    // The batch's bounding sphere in mesh space: xyz center, w radius.
    local_sphere: vec4<f32>,
    // Planes in use; the rest are (0, 0, 0, 1).
    plane_count: u32,
    // Index of this chunk's first instance within the batch.
    chunk_start: u32,
    // Instances in this chunk (the binding holds at least this many).
    chunk_len: u32,
    // Workgroups along x: dispatches over 65535 groups wrap into y.
    groups_x: u32,
    // Elements per output window (see emit() in items.wgsl).
    window_len: u32,
    // Hillis-Steele: the distance added in this step.
    scan_offset: u32,
    // 3 * |local_sphere.xyz|: the magnitude of the mesh-space center's terms
    // per unit of scale (cull_core::instance::local_terms).
    local_terms: f32,
    pad: u32,
}

@group(0) @binding(#{BINDING_PARAMS}) var<uniform> params: CullParams;

// Linear workgroup index of a possibly two-dimensional dispatch.
fn workgroup_index(wid: vec3<u32>) -> u32 {
    return wid.y * params.groups_x + wid.x;
}
