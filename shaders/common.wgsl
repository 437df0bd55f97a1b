// Shared by every culling pass. Rust composes each module as:
//   common.wgsl + format_<format>.wgsl + output_<kind>.wgsl + <generated emit()> + <variant>.wgsl
// so that a pass sees one flat module (WGSL has no imports).

const WORKGROUP_SIZE: u32 = 256u;

// Must equal cull_core::frustum::PLANE_TOLERANCE (2^-18): a few ulps of slack
// so that mathematically tangent spheres survive any rounding.
const PLANE_TOLERANCE: f32 = 3.814697265625e-6;

// One entry per dispatch, at a 256-byte dynamic offset.
struct CullParams {
    // Inward-facing normalized planes (n, d): inside when dot(n, p) + d >= 0.
    planes: array<vec4<f32>, 6>,
    // The batch's bounding sphere in mesh space: xyz center, w radius.
    local_sphere: vec4<f32>,
    plane_count: u32,
    // Index of this chunk's first instance within the batch.
    chunk_start: u32,
    // Instances in this chunk (the binding holds at least this many).
    chunk_len: u32,
    // Workgroups along x: dispatches over 65535 groups wrap into y.
    groups_x: u32,
    // Elements per output window (see emit()).
    window_len: u32,
    // Hillis-Steele: the distance added in this step.
    scan_offset: u32,
    _pad0: u32,
    _pad1: u32,
}

@group(0) @binding(0) var<uniform> params: CullParams;

// True when no component is NaN or infinite. Tested on the bits, since a
// compiler may assume `x != x` is false.
fn all_finite(v: vec4<f32>) -> bool {
    let exponent = bitcast<vec4<u32>>(v) & vec4<u32>(0x7f800000u);
    return all(exponent != vec4<u32>(0x7f800000u));
}

// The conservative sphere test, mirrored by Frustum::classify_sphere.
fn sphere_visible(center: vec3<f32>, radius: f32) -> bool {
    var visible = true;
    for (var i = 0u; i < params.plane_count; i += 1u) {
        let p = params.planes[i];
        let dist = p.x * center.x + p.y * center.y + p.z * center.z;
        let margin = dist + p.w + radius;
        // Bounds the rounding error of margin: the magnitudes of its terms.
        let scale = dot(abs(p.xyz), abs(center)) + abs(p.w) + abs(radius);
        visible = visible && (margin >= -PLANE_TOLERANCE * scale);
    }
    return visible;
}

fn rotate(q: vec4<f32>, v: vec3<f32>) -> vec3<f32> {
    return v + 2.0 * cross(q.xyz, cross(q.xyz, v) + q.w * v);
}

// Linear workgroup index of a possibly two-dimensional dispatch.
fn workgroup_index(wid: vec3<u32>) -> u32 {
    return wid.y * params.groups_x + wid.x;
}

// Whether chunk-local instance `i` is visible; false past the chunk's end.
// Non-finite instances make world_sphere() return a negative radius.
fn vote(i: u32) -> bool {
    if i >= params.chunk_len {
        return false;
    }
    let s = world_sphere(i);
    return s.w >= 0.0 && sphere_visible(s.xyz, s.w);
}
