// 32-byte instances: [position.xyz, scale] then the rotation quaternion.
struct InstanceData {
    position_scale: vec4<f32>,
    rotation: vec4<f32>,
}

@group(0) @binding(1) var<storage, read> instances: array<InstanceData>;

fn world_sphere(inst: InstanceData) -> vec4<f32> {
    if !(all_finite(inst.position_scale) && all_finite(inst.rotation)) {
        return vec4<f32>(0.0, 0.0, 0.0, -1.0);
    }
    let scale = inst.position_scale.w;
    let center = inst.position_scale.xyz + rotate(inst.rotation, params.local_sphere.xyz) * scale;
    return vec4<f32>(center, params.local_sphere.w * abs(scale));
}
