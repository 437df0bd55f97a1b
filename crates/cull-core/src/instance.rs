//! Instances and their formats. The formats live one module each in the
//! crate's `formats/` (beside their WGSL in `shaders/cull/formats/`); this
//! module is their public path.

pub use crate::formats::{
    Instance, InstanceFormat, PACKED_ROTATION_ERROR_BOUND, PackedInstance, PosQuatInstance, pack_quat,
    unpack_quat,
};
