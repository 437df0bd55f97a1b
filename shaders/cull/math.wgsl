// What the formats and visibility tests share: the world-space sphere and
// finiteness tests on bits.
#define_import_path cull::math

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

fn rotate(q: vec4<f32>, v: vec3<f32>) -> vec3<f32> {
    return v + 2.0 * cross(q.xyz, cross(q.xyz, v) + q.w * v);
}
