// 64-byte instances: a column-major world_from_local matrix (CPU mirror in
// src/formats/matrix.rs).
#define_import_path cull::formats::matrix

#import cull::params::params
#import cull::math::{WorldSphere, all_finite}

// A struct, not an alias: composed modules export structs, not aliases.
struct InstanceData {
    world_from_local: mat4x4<f32>,
}

@group(0) @binding(#{BINDING_INSTANCES}) var<storage, read> instances: array<InstanceData>;

// The instance as its 16-byte parts, bit for bit (cull::outputs::instances).
fn instance_parts(inst: InstanceData) -> array<vec4<u32>, 4> {
    let m = inst.world_from_local;
    return array(bitcast<vec4<u32>>(m[0]), bitcast<vec4<u32>>(m[1]), bitcast<vec4<u32>>(m[2]), bitcast<vec4<u32>>(m[3]));
}

fn world_sphere(inst: InstanceData) -> WorldSphere {
    let m = inst.world_from_local;
    let finite = all_finite(m[0]) & all_finite(m[1]) & all_finite(m[2]) & all_finite(m[3]);
    let c = params.local_sphere.xyz;
    let x = m[0].xyz;
    let y = m[1].xyz;
    let z = m[2].xyz;
    let center = x * c.x + y * c.y + z * c.z + m[3].xyz;
    // The largest factor by which the 3x3 stretches any vector, for any
    // matrix (sheared too): Gershgorin's bound on its Gram matrix
    // (cull_core::instance::gram_bound).
    let xy = abs(dot(x, y));
    let xz = abs(dot(x, z));
    let yz = abs(dot(y, z));
    let scale2 = max(max(dot(x, x) + xy + xz, dot(y, y) + xy + yz), dot(z, z) + xz + yz);
    let scale = sqrt(scale2);
    let t = abs(m[3].xyz);
    return WorldSphere(center, params.local_sphere.w * scale, t.x + t.y + t.z + scale * params.local_terms, finite);
}
