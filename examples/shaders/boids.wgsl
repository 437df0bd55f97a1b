// The flock's step, one thread per boid: steer by a few other boids
// (cohesion, alignment, separation) and toward a wandering goal, move, and
// write the boid into the culled batch through bevy_gpu_cull::gpu_writes
// (group 0), which culls and draws it this frame. The boids' state lives in
// the example's own buffers (group 1), read from one and written to the
// other each frame.

#import bevy_gpu_cull::gpu_writes::{write_instance, culled_instance, set_instance_count, instance_capacity}

struct Boid {
    position: vec4<f32>,
    velocity: vec4<f32>,
}

struct Flock {
    count: u32,
    frame: u32,
    dt: f32,
    time: f32,
}

@group(1) @binding(0) var<storage, read> boids_in: array<Boid>;
@group(1) @binding(1) var<storage, read_write> boids_out: array<Boid>;
@group(1) @binding(2) var<uniform> flock: Flock;

// Boids each one looks at per frame (a different few every frame).
const NEIGHBOURS: u32 = 24u;

fn hash(n: u32) -> u32 {
    var x = n;
    x ^= x >> 16u;
    x *= 0x7feb352du;
    x ^= x >> 15u;
    x *= 0x846ca68bu;
    x ^= x >> 16u;
    return x;
}

// The rotation that turns the mesh's +y onto `d` (unit length).
fn facing(d: vec3<f32>) -> vec4<f32> {
    let up = vec3<f32>(0.0, 1.0, 0.0);
    let w = 1.0 + dot(up, d);
    if w < 1.0e-4 {
        return vec4<f32>(1.0, 0.0, 0.0, 0.0);
    }
    return vec4<f32>(cross(up, d), w);
}

@compute @workgroup_size(64)
fn step(@builtin(global_invocation_id) id: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let i = id.y * groups.x * 64u + id.x;
    if i == 0u {
        set_instance_count(flock.count);
    }
    if i >= flock.count || i >= instance_capacity() {
        return;
    }
    let me = boids_in[i];
    var cohesion = vec3<f32>(0.0);
    var alignment = vec3<f32>(0.0);
    var separation = vec3<f32>(0.0);
    var near = 0.0;
    for (var k = 0u; k < NEIGHBOURS; k++) {
        let j = hash(i * NEIGHBOURS + k + flock.frame * 7919u) % flock.count;
        let other = boids_in[j];
        let offset = other.position.xyz - me.position.xyz;
        let d = length(offset);
        if j == i || d > 8.0 {
            continue;
        }
        cohesion += offset;
        alignment += other.velocity.xyz;
        separation -= offset / max(d * d, 0.05);
        near += 1.0;
    }
    var velocity = me.velocity.xyz;
    if near > 0.0 {
        velocity += (cohesion / near * 0.6 + (alignment / near - velocity) * 0.8 + separation * 1.5) * flock.dt;
    }
    let t = flock.time * 0.15;
    let goal = vec3<f32>(cos(t) * 30.0, 8.0 + sin(t * 1.7) * 6.0, sin(t) * 30.0);
    velocity += normalize(goal - me.position.xyz) * 2.0 * flock.dt;
    let speed = clamp(length(velocity), 3.0, 9.0);
    velocity = normalize(velocity) * speed;
    let position = me.position.xyz + velocity * flock.dt;
    boids_out[i] = Boid(vec4<f32>(position, 1.0), vec4<f32>(velocity, 0.0));
    // Slow boids blue, fast ones orange.
    let f = (speed - 3.0) / 6.0;
    let color = mix(vec4<f32>(0.1, 0.4, 1.0, 1.0), vec4<f32>(1.0, 0.45, 0.05, 1.0), f);
    write_instance(i, culled_instance(position, 1.0, facing(velocity / speed), color));
}
