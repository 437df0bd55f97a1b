//! [`InstanceFormat::Matrix`]: a column-major `world_from_local` 4x4 matrix,
//! 64 B (`shaders/cull/formats/matrix.wgsl`).

use super::{FormatKernel, Instance, InstanceFormat, abs_sum};
use crate::kernel::shader_module;
use crate::sphere::{Sphere, WorldSphere};
use glam::{Mat4, Vec3};

pub(super) const KERNEL: FormatKernel = FormatKernel {
    format: InstanceFormat::Matrix,
    name: "matrix",
    stride: 64,
    rotation_error: 0.0,
    carries_scale: true,
    centred_form: false,
    shader_def: "FORMAT_MATRIX",
    module: shader_module!("formats/matrix.wgsl"),
    encode,
    vertex_fields: &[
        (wgpu::VertexFormat::Float32x4, 0),
        (wgpu::VertexFormat::Float32x4, 16),
        (wgpu::VertexFormat::Float32x4, 32),
        (wgpu::VertexFormat::Float32x4, 48),
    ],
    world_sphere,
};

fn encode(instances: &[Instance]) -> Vec<u8> {
    let cols: Vec<[f32; 16]> = instances.iter().map(|i| i.to_matrix().to_cols_array()).collect();
    bytemuck::cast_slice(&cols).to_vec()
}

fn world_sphere(raw: &[u8], local: Sphere, c_terms: f32) -> Option<WorldSphere> {
    let m: [f32; 16] = bytemuck::pod_read_unaligned(raw);
    if m.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let m = Mat4::from_cols_array(&m);
    let (x, y, z, t) = (
        m.x_axis.truncate(),
        m.y_axis.truncate(),
        m.z_axis.truncate(),
        m.w_axis.truncate(),
    );
    let c = local.center;
    // Same order of operations as matrix.wgsl.
    let center = x * c.x + y * c.y + z * c.z + t;
    let scale = gram_bound(x, y, z).sqrt();
    Some(WorldSphere {
        center,
        radius: local.radius * scale,
        terms: abs_sum(t) + scale * c_terms,
    })
}

/// An upper bound on the squared spectral norm of the 3x3 with columns
/// `x, y, z` (the largest factor by which it stretches any vector), for any
/// matrix, sheared or not: Gershgorin's bound on the largest eigenvalue of
/// its Gram matrix, the largest row sum of `|xᵢ·xⱼ|`. Exact for orthogonal
/// columns (a rotation times a non-uniform scale). Same order of operations
/// as matrix.wgsl.
fn gram_bound(x: Vec3, y: Vec3, z: Vec3) -> f32 {
    let (xx, yy, zz) = (x.dot(x), y.dot(y), z.dot(z));
    let (xy, xz, yz) = (x.dot(y).abs(), x.dot(z).abs(), y.dot(z).abs());
    (xx + xy + xz).max(yy + xy + yz).max(zz + xz + yz)
}
