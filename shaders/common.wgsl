// Shared by every culling pass. Rust composes each module as:
//   common.wgsl + format_<format>.wgsl + output_<kind>.wgsl + <generated emit()> + <variant>.wgsl
// so that a pass sees one flat module (WGSL has no imports).

const WORKGROUP_SIZE: u32 = 256u;

// Must equal cull_core::frustum::PLANE_TOLERANCE (2^-18): a few ulps of slack
// so that mathematically tangent spheres survive any rounding.
const PLANE_TOLERANCE: f32 = 3.814697265625e-6;

// One entry per dispatch, at a 256-byte dynamic offset.
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
    // Elements per output window (see emit()).
    window_len: u32,
    // Hillis-Steele: the distance added in this step.
    scan_offset: u32,
    // 3 * |local_sphere.xyz|: the magnitude of the mesh-space center's terms
    // per unit of scale (cull_core::instance::local_terms).
    local_terms: f32,
    _pad1: u32,
}

// An instance's bounding sphere in world space (WorldSphere in Rust).
struct WorldSphere {
    center: vec3<f32>,
    // NaN or infinite when the transform overflows f32: kept.
    radius: f32,
    // Magnitude of the terms the center was summed from: its rounding scales
    // with this, not with |center|, when the position cancels the offset.
    terms: f32,
    // False when the instance holds a NaN or an infinity: culled.
    finite_input: bool,
}

@group(0) @binding(0) var<uniform> params: CullParams;

// True when no component is NaN or infinite. Tested on the bits, since a
// compiler may assume `x != x` is false.
fn all_finite(v: vec4<f32>) -> bool {
    let exponent = bitcast<vec4<u32>>(v) & vec4<u32>(0x7f800000u);
    return all(exponent != vec4<u32>(0x7f800000u));
}

// True when x is neither NaN nor infinite, on the bits.
fn finite(x: f32) -> bool {
    return (bitcast<u32>(x) & 0x7f800000u) != 0x7f800000u;
}

// One plane of the conservative sphere test, mirrored by
// Frustum::classify in the same order of operations. The plane's
// offset arrives widened by the tolerance (widen_plane on the CPU).
fn plane_keeps(p: vec4<f32>, center: vec3<f32>, wide_radius: f32) -> bool {
    return p.x * center.x + p.y * center.y + p.z * center.z + p.w + wide_radius >= 0.0;
}

// All six planes with constant indices (unused ones are (0, 0, 0, 1), which
// keeps everything): no loop, and constant indices let the compiler read the
// uniforms directly instead of with indexed loads. `wide_radius` is widened
// by the tolerance (see visible()).
fn sphere_visible(center: vec3<f32>, r: f32) -> bool {
    return plane_keeps(params.planes[0], center, r) & plane_keeps(params.planes[1], center, r)
        & plane_keeps(params.planes[2], center, r) & plane_keeps(params.planes[3], center, r)
        & plane_keeps(params.planes[4], center, r) & plane_keeps(params.planes[5], center, r);
}

fn rotate(q: vec4<f32>, v: vec3<f32>) -> vec3<f32> {
    return v + 2.0 * cross(q.xyz, cross(q.xyz, v) + q.w * v);
}

// Linear workgroup index of a possibly two-dimensional dispatch.
fn workgroup_index(wid: vec3<u32>) -> u32 {
    return wid.y * params.groups_x + wid.x;
}

// Whether a loaded instance is visible, mirrored by Frustum::classify. The
// radius is widened by the tolerance once per instance (widen_radius on the
// CPU), which bounds the rounding of the world sphere and of every plane's
// sum since the normals are unit length. Non-finite input is culled; a
// sphere that overflows f32 from finite input is kept (it may cover
// anything). Both are decided on bits: a compiler may assume no NaN.
fn visible(inst: InstanceData) -> bool {
    let s = world_sphere(inst);
    let c = s.center;
    let wide = s.radius + PLANE_TOLERANCE * (abs(c.x) + abs(c.y) + abs(c.z) + s.radius + s.terms);
    // Every center component reaches `wide` through abs(): an infinity or
    // NaN anywhere makes it non-finite, so one scalar test covers them all.
    let overflow = !finite(wide);
    return s.finite_input & (overflow | sphere_visible(c, wide));
}

// Whether chunk-local instance `i` is visible; false past the chunk's end.
fn vote(i: u32) -> bool {
    if i >= params.chunk_len {
        return false;
    }
    return visible(instances[i]);
}

// The single-pass variants handle four item rows per thread (Items below).
const ITEMS: u32 = 4u;
// Groups of ITEMS rows per thread (set by Rust): 2 in the ordered variant's
// subgroup form for 16-byte instances, 1 everywhere else.
const ROW_GROUPS: u32 = 1u;
const TILE: u32 = WORKGROUP_SIZE * ITEMS * ROW_GROUPS;

// Instance `i` of the chunk, or zeros past its end.
fn load_item(i: u32) -> InstanceData {
    var d: InstanceData;
    if i < params.chunk_len {
        d = instances[i];
    }
    return d;
}

fn vote_item(i: u32, d: InstanceData) -> bool {
    return i < params.chunk_len && visible(d);
}

// A thread's four items: rows k = 0..4 at index first + k * WORKGROUP_SIZE,
// so loads and stores coalesce. Fields, not an array: an array indexed in a
// loop would live in local memory on some GPUs (seen on NVIDIA: half the speed).
struct Items {
    index: vec4<u32>,
    d0: InstanceData,
    d1: InstanceData,
    d2: InstanceData,
    d3: InstanceData,
}

// Issues all four loads before any vote, for memory-level parallelism:
// rows at `first + k * stride`.
fn load_rows(first: u32, stride: u32) -> Items {
    let index = vec4<u32>(first) + vec4<u32>(0u, 1u, 2u, 3u) * stride;
    return Items(index, load_item(index.x), load_item(index.y), load_item(index.z), load_item(index.w));
}

// A thread's items in the workgroup-wide layout: rows of WORKGROUP_SIZE.
fn load_items(first: u32) -> Items {
    return load_rows(first, WORKGROUP_SIZE);
}

fn vote_items(items: Items) -> vec4<bool> {
    return vec4<bool>(vote_item(items.index.x, items.d0), vote_item(items.index.y, items.d1),
                      vote_item(items.index.z, items.d2), vote_item(items.index.w, items.d3));
}

// Writes the kept items to their slots.
fn emit_items(items: Items, keep: vec4<bool>, slots: vec4<u32>) {
    if keep.x { emit(slots.x, items.index.x, items.d0); }
    if keep.y { emit(slots.y, items.index.y, items.d1); }
    if keep.z { emit(slots.z, items.index.z, items.d2); }
    if keep.w { emit(slots.w, items.index.w, items.d3); }
}

// The four row votes of a thread as the bytes of one u32.
fn pack_votes(v: vec4<bool>) -> u32 {
    return dot(select(vec4<u32>(0u), vec4<u32>(1u, 0x100u, 0x10000u, 0x1000000u), v), vec4<u32>(1u));
}

fn unpack_bytes(packed: u32) -> vec4<u32> {
    return (vec4<u32>(packed) >> vec4<u32>(0u, 8u, 16u, 24u)) & vec4<u32>(0xffu);
}

// Byte k of a u32 holding four 8-bit counters (one per item row).
fn byte_of(packed: u32, k: u32) -> u32 {
    return (packed >> (8u * k)) & 0xffu;
}

// Where each item row starts: the exclusive prefix of four row totals.
fn row_offsets(totals: vec4<u32>) -> vec4<u32> {
    return vec4<u32>(0u, totals.x, totals.x + totals.y, totals.x + totals.y + totals.z);
}
