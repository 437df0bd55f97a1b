//! [`InstanceFormat::PosQuat`]: position, uniform scale and a rotation
//! quaternion, 32 B (`shaders/cull/formats/posquat.wgsl`).

use super::{FormatKernel, Instance, InstanceFormat, abs_sum, rotate};
use crate::kernel::shader_module;
use crate::sphere::{Sphere, WorldSphere};
use bytemuck::{Pod, Zeroable};
use glam::{Vec3, Vec4};

pub(super) const KERNEL: FormatKernel = FormatKernel {
    format: InstanceFormat::PosQuat,
    name: "posquat",
    stride: size_of::<PosQuatInstance>() as u64,
    rotation_error: 0.0,
    carries_scale: true,
    centred_form: true,
    shader_def: "FORMAT_POSQUAT",
    module: shader_module!("formats/posquat.wgsl"),
    encode,
    vertex_fields: &[
        (wgpu::VertexFormat::Float32x4, 0),
        (wgpu::VertexFormat::Float32x4, 16),
    ],
    world_sphere,
};

/// The 32 B instance: `[x, y, z, scale]` then `[qx, qy, qz, qw]`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct PosQuatInstance {
    /// Translation.
    pub position: [f32; 3],
    /// Uniform scale.
    pub scale: f32,
    /// Rotation quaternion `[x, y, z, w]`.
    pub rotation: [f32; 4],
}

impl From<&Instance> for PosQuatInstance {
    fn from(i: &Instance) -> Self {
        Self {
            position: i.position.to_array(),
            scale: i.scale,
            rotation: i.rotation.to_array(),
        }
    }
}

fn encode(instances: &[Instance]) -> Vec<u8> {
    let records: Vec<PosQuatInstance> = instances.iter().map(PosQuatInstance::from).collect();
    bytemuck::cast_slice(&records).to_vec()
}

fn world_sphere(raw: &[u8], local: Sphere, c_terms: f32) -> Option<WorldSphere> {
    let p: PosQuatInstance = bytemuck::pod_read_unaligned(raw);
    let all = [p.position[0], p.position[1], p.position[2], p.scale];
    if all.iter().chain(p.rotation.iter()).any(|v| !v.is_finite()) {
        return None;
    }
    let q = Vec4::from_array(p.rotation);
    let position = Vec3::from_array(p.position);
    let qq = q.dot(q);
    let stretch = (2.0 * qq - 1.0).max(1.0);
    // As the shaders: the kernel for meshes centred on their origin, or the
    // general kernel's uniform branch, leaves the rotation out.
    let center = if local.center == Vec3::ZERO {
        position
    } else {
        position + rotate(q, local.center) * p.scale
    };
    Some(WorldSphere {
        center,
        radius: local.radius * p.scale.abs() * stretch,
        terms: abs_sum(position) + p.scale.abs() * c_terms * (1.0 + qq),
    })
}
