// Pixels of instances too small to rasterize well (cull_core::PixelSplatter):
// each survivor of a list projects its instance's transformed mesh point
// with the view's clip-from-world matrix and claims the one pixel of a
// view-sized buffer it falls in. Two passes of one 32-bit atomicMax each:
// `splat_depths` keeps each pixel's nearest depth key, then `splat_ids`
// keeps, among the survivors at that key, the greatest id. Every list's
// depth pass runs before any list's id pass, so the result depends on
// neither the lists' order nor the survivors' nor the threads'. CPU mirror:
// cull_core::cpu::splat.

#import cull::math::all_finite
#import cull::points::transformed_point

const GROUP: u32 = 256u;
// No pixel: the splat falls outside the target, behind the eye or past
// the depth range.
const NO_PIXEL: u32 = 0xffffffffu;

// One list's splat (PixelSplatter::splat).
struct SplatJob {
    // The view's clip_from_world times the list's world_from_local.
    clip_from_local: mat4x4<f32>,
    // The mesh-space point projected (w unused).
    local_center: vec4<f32>,
    width: u32,
    height: u32,
    // The word of `draw_args` holding the list's length.
    count_word: u32,
    // 16-byte parts per instance, and the format (InstanceFormat::encode_id).
    parts: u32,
    format: u32,
    // Workgroups along x: more are two-dimensional.
    groups_x: u32,
    // A pixel's id is id_base + instance index + 1 (0: no instance).
    id_base: u32,
    // 1 where a greater depth is nearer (reverse-Z, Bevy's), 0 where a
    // smaller one is.
    reverse_z: u32,
}

struct Splat {
    pixel: u32,
    key: u32,
}

@group(0) @binding(0) var<uniform> job: SplatJob;
@group(0) @binding(1) var<storage, read> instances: array<vec4<u32>>;
// The list's survivors: instance indices.
@group(0) @binding(2) var<storage, read> list: array<u32>;
@group(0) @binding(3) var<storage, read> draw_args: array<u32>;
// Per pixel, row by row from the top: the nearest depth key (0: none).
@group(0) @binding(4) var<storage, read_write> keys: array<atomic<u32>>;
// Per pixel: the id of the survivor kept (0: none).
@group(0) @binding(5) var<storage, read_write> ids: array<atomic<u32>>;

// The list position this thread takes, or the list's length and more.
fn element(group: vec3<u32>, lid: u32) -> u32 {
    return (group.x + group.y * job.groups_x) * GROUP + lid;
}

// The list's length, never past its binding.
fn list_len() -> u32 {
    return min(draw_args[job.count_word], arrayLength(&list));
}

// Where instance `index` lands and its depth key. A depth is kept in
// (0, 1] (reverse-Z) or [0, 1) (forward); its key is its bits, which order
// as the non-negative floats do, or their complement, so that the nearest
// has the greatest key and no kept depth has key 0.
fn splat_of(index: u32) -> Splat {
    var out = Splat(NO_PIXEL, 0u);
    // An index past the input (a list from a larger input) lands nowhere.
    if index >= arrayLength(&instances) / job.parts {
        return out;
    }
    var parts: array<vec4<u32>, 4>;
    for (var k = 0u; k < job.parts; k++) {
        parts[k] = instances[index * job.parts + k];
    }
    let p = transformed_point(job.format, parts, job.local_center.xyz);
    let clip = job.clip_from_local * vec4<f32>(p, 1.0);
    // An overflowing transform (kept by the cull) lands nowhere; the bits
    // are tested, since a compiler may assume no NaN.
    if !all_finite(clip) || !(clip.w > 0.0) {
        return out;
    }
    let ndc = clip.xyz / clip.w;
    var in_depth = (ndc.z > 0.0) && (ndc.z <= 1.0);
    if job.reverse_z == 0u {
        in_depth = (ndc.z >= 0.0) && (ndc.z < 1.0);
    }
    let x = (ndc.x * 0.5 + 0.5) * f32(job.width);
    let y = (0.5 - ndc.y * 0.5) * f32(job.height);
    if !(in_depth && x >= 0.0 && x < f32(job.width) && y >= 0.0 && y < f32(job.height)) {
        return out;
    }
    out.pixel = u32(y) * job.width + u32(x);
    // Without the sign bit: only -0 has it here, and it is 0.
    let bits = bitcast<u32>(ndc.z) & 0x7fffffffu;
    out.key = select(~bits, bits, job.reverse_z == 1u);
    return out;
}

@compute @workgroup_size(256)
fn splat_depths(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = element(group, lid);
    if i >= list_len() {
        return;
    }
    let s = splat_of(list[i]);
    if s.pixel != NO_PIXEL {
        atomicMax(&keys[s.pixel], s.key);
    }
}

@compute @workgroup_size(256)
fn splat_ids(@builtin(workgroup_id) group: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let i = element(group, lid);
    if i >= list_len() {
        return;
    }
    let index = list[i];
    let s = splat_of(index);
    if s.pixel != NO_PIXEL && atomicLoad(&keys[s.pixel]) == s.key {
        atomicMax(&ids[s.pixel], job.id_base + index + 1u);
    }
}
