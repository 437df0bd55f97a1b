// 16-byte instances: position.xyz as f32 bits, then a "smallest three"
// quaternion: 2 bits naming the dropped largest component, 3 x 10 bits
// (cull_core::PackedInstance; CPU mirror in src/formats/packed16.rs).
#define_import_path cull::formats::packed16

#import cull::params::params
#import cull::math::{WorldSphere, all_finite, rotate}

// A struct, not an alias: composed modules export structs, not aliases.
struct InstanceData {
    bits: vec4<u32>,
}

@group(0) @binding(#{BINDING_INSTANCES}) var<storage, read> instances: array<InstanceData>;

// The instance as its 16-byte parts (cull::outputs::instances).
fn instance_parts(inst: InstanceData) -> array<vec4<u32>, 1> {
    return array(inst.bits);
}

// Must equal cull_core::instance::PACKED_ROTATION_ERROR_BOUND: the sphere is
// widened by |center| * this so culling stays conservative for the rotation
// before quantization.
const PACKED_ROTATION_ERROR_BOUND: f32 = 0.006;
const QUAT_RANGE: f32 = 0.70710677;
// One quantization step: component = bits * QUAT_STEP - QUAT_RANGE, one
// multiply-add per component instead of a division
// (cull_core::instance::QUAT_STEP, the same f32 expression).
const QUAT_STEP: f32 = 2.0 * QUAT_RANGE / 1023.0;

fn unpack_quat(bits: u32) -> vec4<f32> {
    let q = vec3<f32>((vec3<u32>(bits) >> vec3<u32>(20u, 10u, 0u)) & vec3<u32>(1023u)) * QUAT_STEP - QUAT_RANGE;
    let a = q.x;
    let b = q.y;
    let c = q.z;
    let d = sqrt(max(1.0 - a * a - b * b - c * c, 0.0));
    // Insert d at the index in the top bits, with selects rather than a
    // branch per index (which would diverge within a subgroup).
    let largest = bits >> 30u;
    return vec4<f32>(
        select(a, d, largest == 0u),
        select(select(b, d, largest == 1u), a, largest == 0u),
        select(select(c, d, largest == 2u), b, largest <= 1u),
        select(c, d, largest == 3u),
    );
}

fn world_sphere(inst: InstanceData) -> WorldSphere {
    let raw = inst.bits;
    let position = bitcast<vec3<f32>>(raw.xyz);
    let finite = all_finite(vec4<f32>(position, 0.0));
    let c = params.local_sphere.xyz;
    // Most meshes are centred on their origin: then the rotation moves
    // nothing, and the quaternion's unpacking, most of this format's
    // arithmetic, can be left out. A culler that compiles its own kernels
    // picks a kernel without it (LOCAL_CENTER_ORIGIN) for such meshes: in
    // the general kernel, the uniform branch below costs the rotation's
    // registers even where it is never taken. The general kernel keeps the
    // branch for renderers that compile the kernels themselves
    // (Culler::deferred, the Bevy plugin): until they provide the centred
    // form, or where they never do, centred meshes take this kernel.
    // rotate(q, 0) is +-0 for the finite q this format decodes, so every
    // path gives the CPU mirror's center.
#ifdef LOCAL_CENTER_ORIGIN
    let center = position;
#else
    var center = position;
    if any(c != vec3<f32>(0.0)) {
        center = position + rotate(unpack_quat(raw.w), c);
    }
#endif
    let p = abs(position);
    return WorldSphere(center, params.local_sphere.w + length(c) * PACKED_ROTATION_ERROR_BOUND,
                       p.x + p.y + p.z + 2.0 * params.local_terms, finite);
}
