// A mesh-space point carried through an instance's transform, as each
// format transforms one: the point the depth sort orders by and the pixel
// splat projects (CPU mirror: cull_core::cpu::sort_point).
#define_import_path cull::points

#import cull::encode::decode_instance
#import cull::math::rotate

// The transform of mesh-space point `c` by the instance held in `parts`
// (16-byte parts of format `format`, InstanceFormat::encode_id).
fn transformed_point(format: u32, parts: array<vec4<u32>, 4>, c: vec3<f32>) -> vec3<f32> {
    if format == 0u {
        // A matrix's columns, in full (it may shear or scale unevenly).
        let x = bitcast<vec4<f32>>(parts[0]).xyz;
        let y = bitcast<vec4<f32>>(parts[1]).xyz;
        let z = bitcast<vec4<f32>>(parts[2]).xyz;
        return x * c.x + y * c.y + z * c.z + bitcast<vec4<f32>>(parts[3]).xyz;
    }
    let d = decode_instance(format, parts);
    return d.position + rotate(d.rotation, c * d.scale);
}
