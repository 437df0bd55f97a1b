// The grass's pass, one thread per blade: the blade's place on a grid over
// the height field (jittered by a hash of its index), its size, color and
// yaw, and the wind's sway this frame, written into the culled batch
// through bevy_gpu_cull::gpu_writes (group 0). The same pass places and
// sways the blades, so the CPU never touches them.

#import bevy_gpu_cull::gpu_writes::{write_instance, culled_instance, set_instance_count}

struct Field {
    count: u32,
    // Blades along one side of the square field.
    side: u32,
    spacing: f32,
    time: f32,
}

@group(1) @binding(0) var<uniform> field: Field;

// Half the blade mesh's height: the mesh is centred on its origin.
const HALF_HEIGHT: f32 = 0.4;

fn hash(n: u32) -> f32 {
    var x = n * 0x9e3779b9u ^ 0x85ebca6bu;
    x ^= x >> 16u;
    x *= 0x7feb352du;
    x ^= x >> 15u;
    x *= 0x846ca68bu;
    x ^= x >> 16u;
    return f32(x) / 4294967295.0;
}

// The ground's height (the example's `height` on the CPU builds the
// ground mesh with the same sum).
fn height(x: f32, z: f32) -> f32 {
    return 1.5 * sin(0.05 * x) * cos(0.07 * z) + 0.5 * sin(0.13 * x + 0.2 * z);
}

fn quat_mul(a: vec4<f32>, b: vec4<f32>) -> vec4<f32> {
    return vec4<f32>(
        a.w * b.xyz + b.w * a.xyz + cross(a.xyz, b.xyz),
        a.w * b.w - dot(a.xyz, b.xyz),
    );
}

fn rotate(q: vec4<f32>, v: vec3<f32>) -> vec3<f32> {
    return v + 2.0 * cross(q.xyz, cross(q.xyz, v) + q.w * v);
}

@compute @workgroup_size(64)
fn sway(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = id.y * groups.x * 64u + id.x;
    if i == 0u {
        set_instance_count(field.count);
    }
    if i >= field.count {
        return;
    }
    let half = f32(field.side) * field.spacing * 0.5;
    let x = (f32(i % field.side) + hash(3u * i)) * field.spacing - half;
    let z = (f32(i / field.side) + hash(3u * i + 1u)) * field.spacing - half;
    let scale = 0.6 + 0.8 * hash(3u * i + 2u);
    let yaw_angle = hash(i ^ 0x5bd1e995u) * 6.2831853;
    let yaw = vec4<f32>(0.0, sin(yaw_angle * 0.5), 0.0, cos(yaw_angle * 0.5));
    // The wind: a gust rolling across the field, bending blades about z.
    let bend = 0.35 * sin(field.time * 1.3 + 0.08 * x + 0.05 * z) + 0.1;
    let tilt = vec4<f32>(0.0, 0.0, sin(bend * 0.5), cos(bend * 0.5));
    let rotation = quat_mul(tilt, yaw);
    // The blade stands on the ground at its base, wherever the wind bends it.
    let base = vec3<f32>(x, height(x, z), z);
    let position = base - rotate(rotation, vec3<f32>(0.0, -HALF_HEIGHT * scale, 0.0));
    let shade = 0.5 + 0.5 * hash(i * 7u + 5u);
    let color = vec4<f32>(0.25 * shade, 0.6 * shade + 0.2, 0.12 * shade, 1.0);
    write_instance(i, culled_instance(position, scale, rotation, color));
}
