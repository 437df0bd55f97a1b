//! A spot light's cone (`shaders/cull/visibility/spot_cone.wgsl`): the
//! frustum test, and the sphere against the cone the light lights, bounded
//! by its range. A spot light's shadow map is the square frustum around
//! that cone; what lies in the frustum's corners, outside the cone, is
//! neither lit nor shadowed by the light, so the cone keeps fewer casters
//! than the frustum and loses none. Its CPU mirror is
//! [`crate::SpotCone::classify`] (in `cone.rs`, with the type),
//! which [`crate::Frustum::classify`] applies to a view with a cone.
//!
//! The test owns its uniforms: each view's cone, written from the views by
//! [`write_uniforms`] into the target's test uniforms
//! ([`crate::kernel::bindings::TEST_UNIFORMS`]), not the shared block.

use super::{TestInputs, VisibilityKernel};
use crate::kernel::{MAX_VIEWS, Slot, bindings, shader_module};

pub(super) const KERNEL: VisibilityKernel = VisibilityKernel {
    name: "spot-cone",
    shader_def: "VISIBILITY_SPOT_CONE",
    module: shader_module!("visibility/spot_cone.wgsl"),
    bindings: &[(bindings::TEST_UNIFORMS, Slot::Uniform)],
    uniforms: Some(write_uniforms),
};

/// Writes each view's cone (a view without one: zeros, no cone) as the
/// `SpotCones` block of `spot_cone.wgsl`.
fn write_uniforms(inputs: &TestInputs) -> Vec<u8> {
    let mut cones = [[[0.0f32; 4]; 3]; MAX_VIEWS as usize];
    for (dst, frustum) in cones.iter_mut().zip(inputs.frusta) {
        if let Some(cone) = frustum.cone {
            *dst = cone.gpu();
        }
    }
    bytemuck::cast_slice(&cones).to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Frustum, SpotCone};
    use glam::Vec3;

    /// The block is the WGSL's: three vectors per view, for every view.
    #[test]
    fn uniforms_hold_every_view() {
        let cone = SpotCone::new(Vec3::ONE, Vec3::Y, 0.4, 9.0).unwrap();
        let frusta = [Frustum::everything(), Frustum::everything().with_cone(cone)];
        let bytes = write_uniforms(&TestInputs {
            frusta: &frusta,
            occlusion: None,
        });
        assert_eq!(bytes.len(), MAX_VIEWS as usize * 48);
        let floats: &[f32] = bytemuck::cast_slice(&bytes);
        assert_eq!(floats[11], 0.0, "no cone in view 0");
        assert_eq!(&floats[12..16], &[1.0, 1.0, 1.0, cone.apex_slack()]);
        assert_eq!(floats[23], 1.0, "a cone in view 1");
        assert!(bytes.len() as u64 <= crate::kernel::TEST_UNIFORM_BYTES);
    }
}
