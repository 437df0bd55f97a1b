//! Instance formats: how one instance's transform is laid out in GPU memory.
//!
//! Culling is memory-bound, so the format decides the speed: a 4x4 matrix
//! moves 64 B per instance, position + scale + quaternion 32 B, and the packed
//! format 16 B (position plus a "smallest three" quaternion in 32 bits).
//! Each format's CPU decoding here mirrors `shaders/format_*.wgsl` line for
//! line; the tests hold the two to the same answers.

use crate::frustum::Sphere;
use bytemuck::{Pod, Zeroable};
use glam::{Mat4, Quat, Vec3, Vec4};

/// One instance as the user describes it: a position, a unit rotation and a
/// uniform scale.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Instance {
    /// World-space translation.
    pub position: Vec3,
    /// Rotation; expected to be normalized.
    pub rotation: Quat,
    /// Uniform scale.
    pub scale: f32,
}

impl Default for Instance {
    fn default() -> Self {
        Self {
            position: Vec3::ZERO,
            rotation: Quat::IDENTITY,
            scale: 1.0,
        }
    }
}

impl Instance {
    /// An instance at `position` with no rotation and unit scale.
    pub fn from_position(position: Vec3) -> Self {
        Self {
            position,
            ..Default::default()
        }
    }

    /// The `world_from_local` matrix.
    pub fn to_matrix(&self) -> Mat4 {
        Mat4::from_scale_rotation_translation(Vec3::splat(self.scale), self.rotation, self.position)
    }
}

/// The memory layout of instances on the GPU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum InstanceFormat {
    /// A column-major `world_from_local` 4x4 matrix: 64 B.
    Matrix,
    /// Position, uniform scale, rotation quaternion: 32 B ([`PosQuatInstance`]).
    #[default]
    PosQuat,
    /// Position and a "smallest three" quaternion in 32 bits, no scale (1):
    /// 16 B ([`PackedInstance`]). Rotation error is at most
    /// [`PACKED_ROTATION_ERROR_BOUND`] radians; the culling radius is widened
    /// by that much so culling stays conservative for the unpacked rotation.
    Packed16,
}

impl InstanceFormat {
    /// Every format, largest first.
    pub const ALL: [InstanceFormat; 3] = [Self::Matrix, Self::PosQuat, Self::Packed16];

    /// Bytes per instance.
    pub const fn stride(self) -> u64 {
        match self {
            Self::Matrix => 64,
            Self::PosQuat => 32,
            Self::Packed16 => 16,
        }
    }

    /// A short lowercase name (`matrix`, `posquat`, `packed16`).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Matrix => "matrix",
            Self::PosQuat => "posquat",
            Self::Packed16 => "packed16",
        }
    }

    /// Parses [`Self::name`].
    pub fn from_name(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|f| f.name() == name)
    }

    /// Encodes instances into this format's bytes.
    pub fn encode(self, instances: &[Instance]) -> Vec<u8> {
        match self {
            Self::Matrix => bytemuck::cast_slice(
                &instances
                    .iter()
                    .map(|i| i.to_matrix().to_cols_array())
                    .collect::<Vec<_>>(),
            )
            .to_vec(),
            Self::PosQuat => {
                bytemuck::cast_slice(&instances.iter().map(PosQuatInstance::from).collect::<Vec<_>>())
                    .to_vec()
            }
            Self::Packed16 => {
                bytemuck::cast_slice(&instances.iter().map(PackedInstance::from).collect::<Vec<_>>()).to_vec()
            }
        }
    }

    /// The world-space bounding sphere of instance `index` in `bytes`, exactly
    /// as the shaders compute it. `None` when the instance is not finite (it
    /// is culled).
    pub fn world_sphere(self, bytes: &[u8], index: usize, local: Sphere) -> Option<(Vec3, f32)> {
        let s = self.stride() as usize;
        let raw = &bytes[index * s..(index + 1) * s];
        match self {
            Self::Matrix => {
                let m: [f32; 16] = bytemuck::pod_read_unaligned(raw);
                if m.iter().any(|v| !v.is_finite()) {
                    return None;
                }
                let m = Mat4::from_cols_array(&m);
                let c = local.center;
                // Same order of operations as format_matrix.wgsl.
                let center = m.x_axis.truncate() * c.x
                    + m.y_axis.truncate() * c.y
                    + m.z_axis.truncate() * c.z
                    + m.w_axis.truncate();
                let scale2 = m
                    .x_axis
                    .truncate()
                    .length_squared()
                    .max(m.y_axis.truncate().length_squared())
                    .max(m.z_axis.truncate().length_squared());
                Some((center, local.radius * scale2.sqrt()))
            }
            Self::PosQuat => {
                let p: PosQuatInstance = bytemuck::pod_read_unaligned(raw);
                let all = [p.position[0], p.position[1], p.position[2], p.scale];
                if all.iter().chain(p.rotation.iter()).any(|v| !v.is_finite()) {
                    return None;
                }
                let q = Vec4::from_array(p.rotation);
                let center = Vec3::from_array(p.position) + rotate(q, local.center) * p.scale;
                Some((center, local.radius * p.scale.abs()))
            }
            Self::Packed16 => {
                let p: PackedInstance = bytemuck::pod_read_unaligned(raw);
                if p.position.iter().any(|v| !v.is_finite()) {
                    return None;
                }
                let q = unpack_quat(p.rotation);
                let center = Vec3::from_array(p.position) + rotate(q, local.center);
                let radius = local.radius + local.center.length() * PACKED_ROTATION_ERROR_BOUND;
                Some((center, radius))
            }
        }
    }
}

/// `rotate(q, v)` as the shaders write it: `v + 2 * cross(q.xyz, cross(q.xyz, v) + q.w * v)`.
fn rotate(q: Vec4, v: Vec3) -> Vec3 {
    let u = q.truncate();
    v + 2.0 * u.cross(u.cross(v) + q.w * v)
}

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

/// Unpacks [`pack_quat`], as `shaders/format_packed16.wgsl` does.
pub fn unpack_quat(bits: u32) -> Vec4 {
    let largest = (bits >> 30) as usize;
    let comp = |shift: u32| (((bits >> shift) & 1023) as f32 / 1023.0 * 2.0 - 1.0) * QUAT_RANGE;
    let (a, b, c) = (comp(20), comp(10), comp(0));
    let d = (1.0 - a * a - b * b - c * c).max(0.0).sqrt();
    match largest {
        0 => Vec4::new(d, a, b, c),
        1 => Vec4::new(a, d, b, c),
        2 => Vec4::new(a, b, d, c),
        _ => Vec4::new(a, b, c, d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn random_quat(state: &mut u64) -> Quat {
        let mut next = || {
            *state ^= *state << 13;
            *state ^= *state >> 7;
            *state ^= *state << 17;
            (*state >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
        };
        Quat::from_xyzw(next(), next(), next(), next()).normalize()
    }

    #[test]
    fn packed_quat_precision() {
        let mut state = 0x9E3779B97F4A7C15;
        let (mut sum, mut worst) = (0.0f64, 0.0f32);
        let n = 1_000_000;
        for _ in 0..n {
            let q = random_quat(&mut state);
            let u = Quat::from_vec4(unpack_quat(pack_quat(q)));
            let angle = q.angle_between(u.normalize());
            sum += angle as f64;
            worst = worst.max(angle);
            // The decoded quaternion is close to unit length already.
            assert!((u.length() - 1.0).abs() < 2e-3);
        }
        let mean = (sum / n as f64) as f32;
        eprintln!(
            "packed quaternion error: mean {:.4} deg, worst {:.4} deg",
            mean.to_degrees(),
            worst.to_degrees()
        );
        assert!(worst < PACKED_ROTATION_ERROR_BOUND, "worst {worst} rad");
        assert!(mean < 0.1f32.to_radians());
    }

    #[test]
    fn formats_agree_on_world_sphere() {
        let inst = Instance {
            position: Vec3::new(1.0, -2.0, 3.0),
            rotation: Quat::from_rotation_y(0.7) * Quat::from_rotation_x(0.3),
            scale: 2.5,
        };
        let local = Sphere::new(Vec3::new(0.5, 0.25, -1.0), 1.5);
        let m = InstanceFormat::Matrix.world_sphere(&InstanceFormat::Matrix.encode(&[inst]), 0, local);
        let p = InstanceFormat::PosQuat.world_sphere(&InstanceFormat::PosQuat.encode(&[inst]), 0, local);
        let (mc, mr) = m.unwrap();
        let (pc, pr) = p.unwrap();
        assert!((mc - pc).length() < 1e-4, "{mc} vs {pc}");
        assert!((mr - pr).abs() < 1e-4);
        let unit = Instance { scale: 1.0, ..inst };
        let (kc, kr) = InstanceFormat::Packed16
            .world_sphere(&InstanceFormat::Packed16.encode(&[unit]), 0, local)
            .unwrap();
        let (uc, _) = InstanceFormat::PosQuat
            .world_sphere(&InstanceFormat::PosQuat.encode(&[unit]), 0, local)
            .unwrap();
        // The widened radius covers the quantized center.
        assert!((kc - uc).length() <= kr - local.radius + 1e-6);
    }

    #[test]
    fn non_finite_instances_have_no_sphere() {
        let bad = Instance {
            position: Vec3::new(f32::NAN, 0.0, 0.0),
            ..Default::default()
        };
        let inf = Instance {
            scale: f32::INFINITY,
            ..Default::default()
        };
        for f in InstanceFormat::ALL {
            assert!(
                f.world_sphere(&f.encode(&[bad]), 0, Sphere::new(Vec3::ZERO, 1.0))
                    .is_none()
            );
        }
        for f in [InstanceFormat::Matrix, InstanceFormat::PosQuat] {
            assert!(
                f.world_sphere(&f.encode(&[inf]), 0, Sphere::new(Vec3::ZERO, 1.0))
                    .is_none()
            );
        }
    }
}
