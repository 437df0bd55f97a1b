// Writing instances on the GPU: a transform (position, uniform scale,
// rotation quaternion) in any registered format's bytes, as
// cull_core::InstanceFormat::encode writes it on the CPU (normalized, an
// instance that cannot be drawn written so that it is culled), and read
// back from them (decode_instance). No bindings
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

// A transform read back from an instance's parts (decode_instance).
struct DecodedInstance {
    position: vec3<f32>,
    scale: f32,
    rotation: vec4<f32>,
}

// The packed rotation (cull_core::unpack_quat).
fn unpack_quat(bits: u32) -> vec4<f32> {
    let c = vec3<f32>((vec3<u32>(bits) >> vec3<u32>(20u, 10u, 0u)) & vec3<u32>(1023u)) * (2.0 * 0.70710677 / 1023.0) - 0.70710677;
    let d = sqrt(max(1.0 - dot(c, c), 0.0));
    switch bits >> 30u {
        case 0u: { return vec4<f32>(d, c.x, c.y, c.z); }
        case 1u: { return vec4<f32>(c.x, d, c.y, c.z); }
        case 2u: { return vec4<f32>(c.x, c.y, d, c.z); }
        default: { return vec4<f32>(c.x, c.y, c.z, d); }
    }
}

// The rotation of an orthonormal basis (the columns of a rotation matrix),
// by the largest of the four ways to take it (Shepperd's method).
fn basis_rotation(x: vec3<f32>, y: vec3<f32>, z: vec3<f32>) -> vec4<f32> {
    let trace = x.x + y.y + z.z;
    if trace > 0.0 {
        let s = sqrt(trace + 1.0) * 2.0;
        return vec4<f32>((y.z - z.y) / s, (z.x - x.z) / s, (x.y - y.x) / s, 0.25 * s);
    }
    if x.x > y.y && x.x > z.z {
        let s = sqrt(1.0 + x.x - y.y - z.z) * 2.0;
        return vec4<f32>(0.25 * s, (y.x + x.y) / s, (z.x + x.z) / s, (y.z - z.y) / s);
    }
    if y.y > z.z {
        let s = sqrt(1.0 + y.y - x.x - z.z) * 2.0;
        return vec4<f32>((y.x + x.y) / s, 0.25 * s, (z.y + y.z) / s, (z.x - x.z) / s);
    }
    let s = sqrt(1.0 + z.z - x.x - y.y) * 2.0;
    return vec4<f32>((z.x + x.z) / s, (z.y + y.z) / s, 0.25 * s, (x.y - y.x) / s);
}

// The transform instance `parts` of format `format` holds: what
// encode_instance wrote, up to rounding (the packed format's scale is 1
// and its rotation quantized; a matrix's scale is its first column's
// length and its rotation that of its normalized columns, so only a
// matrix of one positive uniform scale and a rotation decodes to what it
// is).
fn decode_instance(format: u32, parts: array<vec4<u32>, 4>) -> DecodedInstance {
    var out: DecodedInstance;
    switch format {
        case FORMAT_MATRIX: {
            let x = bitcast<vec4<f32>>(parts[0]).xyz;
            let y = bitcast<vec4<f32>>(parts[1]).xyz;
            let z = bitcast<vec4<f32>>(parts[2]).xyz;
            out.position = bitcast<vec4<f32>>(parts[3]).xyz;
            out.scale = length(x);
            out.rotation = basis_rotation(x / out.scale, y / length(y), z / length(z));
        }
        case FORMAT_PACKED16: {
            out.position = bitcast<vec3<f32>>(parts[0].xyz);
            out.scale = 1.0;
            out.rotation = unpack_quat(parts[0].w);
        }
        default: {
            let p = bitcast<vec4<f32>>(parts[0]);
            out.position = p.xyz;
            out.scale = p.w;
            out.rotation = bitcast<vec4<f32>>(parts[1]);
        }
    }
    return out;
}
