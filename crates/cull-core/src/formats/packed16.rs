//! [`InstanceFormat::Packed16`]: position and a "smallest three" quaternion
//! in 32 bits, no scale, 16 B (`shaders/cull/formats/packed16.wgsl`).

use super::{FormatKernel, Instance, InstanceFormat, abs_sum, rotate};
use crate::kernel::shader_module;
use crate::sphere::{Sphere, WorldSphere};
use bytemuck::{Pod, Zeroable};
use glam::{Quat, Vec3, Vec4};

pub(super) const KERNEL: FormatKernel = FormatKernel {
    format: InstanceFormat::Packed16,
    name: "packed16",
    stride: size_of::<PackedInstance>() as u64,
    rotation_error: PACKED_ROTATION_ERROR_BOUND,
    carries_scale: false,
    centred_form: true,
    shader_def: "FORMAT_PACKED16",
    module: shader_module!("formats/packed16.wgsl"),
    encode,
    vertex_fields: &[
        (wgpu::VertexFormat::Float32x3, 0),
        (wgpu::VertexFormat::Uint32, 12),
    ],
    world_sphere,
};

fn encode(instances: &[Instance]) -> Vec<u8> {
    let records: Vec<PackedInstance> = instances.iter().map(PackedInstance::from).collect();
    bytemuck::cast_slice(&records).to_vec()
}

fn world_sphere(raw: &[u8], local: Sphere, c_terms: f32) -> Option<WorldSphere> {
    let p: PackedInstance = bytemuck::pod_read_unaligned(raw);
    if p.position.iter().any(|v| !v.is_finite()) {
        return None;
    }
    let position = Vec3::from_array(p.position);
    let c = local.center;
    // As the shaders: the kernel for meshes centred on their origin, or the
    // general kernel's uniform branch, leaves the rotation out.
    let center = if c == Vec3::ZERO {
        position
    } else {
        position + rotate(unpack_quat(p.rotation), c)
    };
    Some(WorldSphere {
        center,
        radius: local.radius + c.length() * PACKED_ROTATION_ERROR_BOUND,
        terms: abs_sum(position) + 2.0 * c_terms,
    })
}

/// The 16 B instance: translation and a "smallest three" quaternion.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct PackedInstance {
    /// Translation.
    pub position: [f32; 3],
    /// Rotation packed by [`pack_quat`].
    pub rotation: u32,
}

impl From<&Instance> for PackedInstance {
    fn from(i: &Instance) -> Self {
        Self {
            position: i.position.to_array(),
            rotation: pack_quat(i.rotation),
        }
    }
}

/// An upper bound, in radians, on the rotation error of [`pack_quat`]: 10
/// bits per component give a quantization step of `sqrt(2) / 1023`. The
/// `packed_quat_precision` test measures the real error over a million random
/// rotations (mean 0.083 degrees, worst 0.241 degrees = 0.0042 rad; see
/// `docs/architecture.md`) and checks it stays below this bound (0.34 degrees).
pub const PACKED_ROTATION_ERROR_BOUND: f32 = 0.006;

const QUAT_RANGE: f32 = std::f32::consts::FRAC_1_SQRT_2;
/// One quantization step of a packed component: a component is
/// `bits * QUAT_STEP - QUAT_RANGE`, one multiply-add (`QUAT_STEP` in
/// `shaders/cull/formats/packed16.wgsl`, the same `f32` expression).
pub(crate) const QUAT_STEP: f32 = 2.0 * QUAT_RANGE / 1023.0;

/// Packs a rotation as "smallest three": 2 bits for the index of the largest
/// component (dropped, its sign made positive since `q` and `-q` are the
/// same rotation) and 10 bits for each other component in `[-1/sqrt2, 1/sqrt2]`.
pub fn pack_quat(q: Quat) -> u32 {
    let q = q.normalize();
    let v = q.to_array();
    let largest = (0..4)
        .max_by(|&a, &b| v[a].abs().total_cmp(&v[b].abs()))
        .expect("four components");
    let sign = if v[largest] < 0.0 { -1.0 } else { 1.0 };
    let mut bits = (largest as u32) << 30;
    let mut shift = 20;
    for (i, c) in v.iter().enumerate() {
        if i == largest {
            continue;
        }
        let unit = ((c * sign / QUAT_RANGE) * 0.5 + 0.5).clamp(0.0, 1.0);
        bits |= ((unit * 1023.0).round() as u32) << shift;
        shift -= 10;
    }
    bits
}

/// Unpacks [`pack_quat`], as `shaders/cull/formats/packed16.wgsl` does.
pub fn unpack_quat(bits: u32) -> Vec4 {
    let largest = (bits >> 30) as usize;
    let comp = |shift: u32| ((bits >> shift) & 1023) as f32 * QUAT_STEP - QUAT_RANGE;
    let (a, b, c) = (comp(20), comp(10), comp(0));
    let d = (1.0 - a * a - b * b - c * c).max(0.0).sqrt();
    match largest {
        0 => Vec4::new(d, a, b, c),
        1 => Vec4::new(a, d, b, c),
        2 => Vec4::new(a, b, d, c),
        _ => Vec4::new(a, b, c, d),
    }
}
