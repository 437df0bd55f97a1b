//! The blades as the grass shader places them, mirrored on the CPU for
//! `--mode cpu` and `--mode list`, and the ground's height field.

use bevy::prelude::*;
use bevy_gpu_cull::prelude::*;

/// Meters between blades.
pub const SPACING: f32 = 0.25;
/// Half the blade mesh's height (`HALF_HEIGHT` in the shader).
pub const HALF_HEIGHT: f32 = 0.4;
/// The fixed step of the wind's clock, so that every run sways alike.
pub const STEP: f32 = 1.0 / 60.0;

/// The ground's height (`height` in the shader).
pub fn height(x: f32, z: f32) -> f32 {
    1.5 * (0.05 * x).sin() * (0.07 * z).cos() + 0.5 * (0.13 * x + 0.2 * z).sin()
}

/// The shader's hash of an index, in [0, 1].
fn hash(n: u32) -> f32 {
    let mut x = n.wrapping_mul(0x9e37_79b9) ^ 0x85eb_ca6b;
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    x as f32 / u32::MAX as f32
}

/// Every blade at wind time `time`, as the shader places them.
pub fn blades_at(count: u32, side: u32, time: f32) -> Vec<GpuCullInstance> {
    let half = side as f32 * SPACING * 0.5;
    (0..count)
        .map(|i| {
            let x = ((i % side) as f32 + hash(3 * i)) * SPACING - half;
            let z = ((i / side) as f32 + hash(3 * i + 1)) * SPACING - half;
            let scale = 0.6 + 0.8 * hash(3 * i + 2);
            let yaw = Quat::from_rotation_y(hash(i ^ 0x5bd1_e995) * std::f32::consts::TAU);
            let bend = 0.35 * (time * 1.3 + 0.08 * x + 0.05 * z).sin() + 0.1;
            let rotation = Quat::from_rotation_z(bend) * yaw;
            let base = Vec3::new(x, height(x, z), z);
            let position = base - rotation * Vec3::new(0.0, -HALF_HEIGHT * scale, 0.0);
            let shade = 0.5 + 0.5 * hash(i.wrapping_mul(7) + 5);
            GpuCullInstance::new(
                position,
                LinearRgba::rgb(0.25 * shade, 0.6 * shade + 0.2, 0.12 * shade),
            )
            .with_scale(scale)
            .with_rotation(rotation)
        })
        .collect()
}
