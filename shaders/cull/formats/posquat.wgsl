// 32-byte instances: [position.xyz, scale] then the rotation quaternion
// (cull_core::PosQuatInstance; CPU mirror in src/formats/posquat.rs).
#define_import_path cull::formats::posquat

#import cull::params::params
#import cull::math::{WorldSphere, all_finite, rotate}

struct InstanceData {
    position_scale: vec4<f32>,
    rotation: vec4<f32>,
}

@group(0) @binding(#{BINDING_INSTANCES}) var<storage, read> instances: array<InstanceData>;

// The instance as its 16-byte parts, bit for bit (cull::outputs::instances).
fn instance_parts(inst: InstanceData) -> array<vec4<u32>, 2> {
    return array(bitcast<vec4<u32>>(inst.position_scale), bitcast<vec4<u32>>(inst.rotation));
}

fn world_sphere(inst: InstanceData) -> WorldSphere {
    let finite = all_finite(inst.position_scale) & all_finite(inst.rotation);
    let q = inst.rotation;
    let position = inst.position_scale.xyz;
    let scale = inst.position_scale.w;
    // rotate() with |q| != 1 stretches by up to 2|q|^2 - 1: bound the
    // transform the bytes define, as the draw applies it.
    let qq = dot(q, q);
    let stretch = max(2.0 * qq - 1.0, 1.0);
    // A mesh centred on its origin skips the rotation: in a kernel of its
    // own (LOCAL_CENTER_ORIGIN), or on a uniform branch in the general one
    // (see packed16.wgsl). rotate(q, 0) * scale is +-0 for finite input (and
    // non-finite input is culled by finite_input), as in the CPU mirror.
#ifdef LOCAL_CENTER_ORIGIN
    let center = position;
#else
    var center = position;
    if any(params.local_sphere.xyz != vec3<f32>(0.0)) {
        center = position + rotate(q, params.local_sphere.xyz) * scale;
    }
#endif
    let p = abs(position);
    return WorldSphere(center, params.local_sphere.w * abs(scale) * stretch,
                       p.x + p.y + p.z + abs(scale) * params.local_terms * (1.0 + qq), finite);
}
