//! Instances and their formats: the data types users hold, at the bottom of
//! the crate's layers. Each format's code (encoding, its CPU mirror, its
//! WGSL) is a module of the crate's `formats/`, whose registry gives
//! [`InstanceFormat`] its methods.

use glam::{Mat4, Quat, Vec3};

pub use crate::formats::{
    PACKED_ROTATION_ERROR_BOUND, PackedInstance, PosQuatInstance, pack_quat, unpack_quat,
};

/// One instance as the user describes it: a position, a unit rotation and a
/// uniform scale.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Instance {
    /// World-space translation.
    pub position: Vec3,
    /// Rotation. Normalized when written ([`InstanceFormat::encode`]); a
    /// zero or non-finite quaternion culls the instance.
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

    /// This instance as the formats store it: the rotation normalized (in
    /// `f64`, so huge or tiny quaternions keep their direction). A rotation
    /// that has no direction (zero or not finite) becomes NaN, so the
    /// instance is culled in every format.
    pub fn normalized(&self) -> Instance {
        let q = self.rotation.to_array().map(f64::from);
        let len = q.iter().map(|v| v * v).sum::<f64>().sqrt();
        let rotation = if len.is_finite() && len > 0.0 {
            Quat::from_array(q.map(|v| (v / len) as f32))
        } else {
            Quat::from_array([f32::NAN; 4])
        };
        let position = if rotation.is_finite() && self.scale.is_finite() {
            self.position
        } else {
            Vec3::NAN // the packed format has no other field to mark it
        };
        Instance {
            position,
            rotation,
            scale: self.scale,
        }
    }

    /// The `world_from_local` matrix.
    pub fn to_matrix(&self) -> Mat4 {
        Mat4::from_scale_rotation_translation(Vec3::splat(self.scale), self.rotation, self.position)
    }
}

/// The memory layout of instances on the GPU.
///
/// ```
/// use cull_core::{Instance, InstanceFormat};
/// let instances = [Instance::from_position(glam::Vec3::new(1.0, 2.0, 3.0))];
/// // What `CullInput::write_instances` uploads, 32 bytes an instance.
/// let bytes = InstanceFormat::PosQuat.encode(&instances)?;
/// assert_eq!(bytes.len(), 32);
/// assert_eq!(InstanceFormat::from_name("packed16"), Some(InstanceFormat::Packed16));
/// # Ok::<(), cull_core::CullError>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
#[cfg_attr(feature = "bevy_reflect", derive(bevy_reflect::Reflect))]
#[cfg_attr(feature = "bevy_reflect", reflect(Debug, PartialEq, Hash, Clone))]
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
