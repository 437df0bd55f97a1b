// Writing instances on the GPU: a transform (position, uniform scale,
// rotation quaternion) in any registered format's bytes, as
// cull_core::InstanceFormat::encode writes it on the CPU (normalized, an
// instance that cannot be drawn written so that it is culled). No bindings
// and no shader defs: a renderer's own compute pass imports it, and picks
// the format at run time by its id (cull_core::InstanceFormat::encode_id),
// a branch uniform over the dispatch.
#define_import_path cull::encode

#import cull::math::all_finite

// cull_core::InstanceFormat::encode_id of each format.
const FORMAT_MATRIX: u32 = 0u;
const FORMAT_POSQUAT: u32 = 1u;
const FORMAT_PACKED16: u32 = 2u;

// An encoded instance: its first `parts` 16-byte parts (stride / 16).
struct EncodedInstance {
    parts: array<vec4<u32>, 4>,
    count: u32,
}

// A quiet NaN, made at run time (a constant NaN may be folded away).
fn nan() -> f32 {
    return bitcast<f32>(0x7fc00000u);
}

// The first part of a culled instance in every format: its position (the
// matrix's first column) NaN, which every format's vote culls.
fn culled_part() -> vec4<u32> {
    return vec4<u32>(0x7fc00000u);
}

// `q` scaled to unit length (first by its largest component, so that no
// finite quaternion overflows); NaN for a zero or non-finite one.
fn unit_rotation(q: vec4<f32>) -> vec4<f32> {
    let largest = max(max(abs(q.x), abs(q.y)), max(abs(q.z), abs(q.w)));
    if !all_finite(q) || largest == 0.0 {
        return vec4<f32>(nan());
    }
    let s = q / largest;
    return s / sqrt(dot(s, s));
}

// A rotation as "smallest three" (cull_core::pack_quat): 2 bits naming the
// largest component, dropped with its sign made positive, and 10 bits for
// each other one in [-1/sqrt(2), 1/sqrt(2)], rounded half away from zero.
fn pack_quat(q: vec4<f32>) -> u32 {
    let a = abs(q);
    var largest = 0u;
    var top = a.x;
    if a.y > top { largest = 1u; top = a.y; }
    if a.z > top { largest = 2u; top = a.z; }
    if a.w > top { largest = 3u; }
    let sign = select(1.0, -1.0, q[largest] < 0.0);
    var bits = largest << 30u;
    var shift = 20u;
    for (var i = 0u; i < 4u; i++) {
        if i == largest {
            continue;
        }
        let unit = clamp((q[i] * sign / 0.70710677) * 0.5 + 0.5, 0.0, 1.0);
        bits |= u32(floor(unit * 1023.0 + 0.5)) << shift;
        shift -= 10u;
    }
    return bits;
}

// The column-major matrix of scale, rotation and translation, as glam's
// Mat4::from_scale_rotation_translation computes it.
fn matrix_parts(position: vec3<f32>, scale: f32, q: vec4<f32>) -> array<vec4<u32>, 4> {
    let x2 = q.x + q.x;
    let y2 = q.y + q.y;
    let z2 = q.z + q.z;
    let xx = q.x * x2;
    let xy = q.x * y2;
    let xz = q.x * z2;
    let yy = q.y * y2;
    let yz = q.y * z2;
    let zz = q.z * z2;
    let wx = q.w * x2;
    let wy = q.w * y2;
    let wz = q.w * z2;
    let x = vec3<f32>(1.0 - (yy + zz), xy + wz, xz - wy) * scale;
    let y = vec3<f32>(xy - wz, 1.0 - (xx + zz), yz + wx) * scale;
    let z = vec3<f32>(xz + wy, yz - wx, 1.0 - (xx + yy)) * scale;
    return array(
        bitcast<vec4<u32>>(vec4<f32>(x, 0.0)),
        bitcast<vec4<u32>>(vec4<f32>(y, 0.0)),
        bitcast<vec4<u32>>(vec4<f32>(z, 0.0)),
        bitcast<vec4<u32>>(vec4<f32>(position, 1.0)),
    );
}

// An instance in format `format` (an encode_id). The rotation is
// normalized; a non-finite position, scale or rotation, or a zero rotation,
// gives a culled instance (culled_part first). In the packed format, which
// stores no scale, the caller covers the scale in the bounds it culls with,
// as on the CPU; the scale is not written.
fn encode_instance(format: u32, position: vec3<f32>, scale: f32, rotation: vec4<f32>) -> EncodedInstance {
    let q = unit_rotation(rotation);
    let drawable = all_finite(q) && all_finite(vec4<f32>(position, scale));
    var out: EncodedInstance;
    switch format {
        case FORMAT_MATRIX: {
            out.parts = matrix_parts(position, scale, q);
            out.count = 4u;
        }
        case FORMAT_PACKED16: {
            out.parts[0] = vec4<u32>(bitcast<vec3<u32>>(position), pack_quat(q));
            out.count = 1u;
        }
        default: {
            out.parts[0] = bitcast<vec4<u32>>(vec4<f32>(position, scale));
            out.parts[1] = bitcast<vec4<u32>>(q);
            out.count = 2u;
        }
    }
    if !drawable {
        out.parts[0] = culled_part();
    }
    return out;
}
