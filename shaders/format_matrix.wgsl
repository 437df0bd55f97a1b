// 64-byte instances: a column-major world_from_local matrix.
alias InstanceData = mat4x4<f32>;

@group(0) @binding(1) var<storage, read> instances: array<InstanceData>;

fn world_sphere(m: InstanceData) -> vec4<f32> {
    if !(all_finite(m[0]) && all_finite(m[1]) && all_finite(m[2]) && all_finite(m[3])) {
        return vec4<f32>(0.0, 0.0, 0.0, -1.0);
    }
    let c = params.local_sphere.xyz;
    let center = m[0].xyz * c.x + m[1].xyz * c.y + m[2].xyz * c.z + m[3].xyz;
    // The largest axis scale bounds any non-uniform scale too.
    let scale2 = max(max(dot(m[0].xyz, m[0].xyz), dot(m[1].xyz, m[1].xyz)), dot(m[2].xyz, m[2].xyz));
    return vec4<f32>(center, params.local_sphere.w * sqrt(scale2));
}
