//! The level-of-detail band (`shaders/cull/visibility/screen_size.wgsl`):
//! a view keeps the instances whose projected size lies in its band. The
//! frustum test and the occlusion phases call it for every view (one
//! camera's levels measure the size once, then compare it with each
//! level's band: `level_terms`, `terms_in_band`); a view without a
//! band keeps every size. Its CPU mirror is
//! [`crate::frustum::SizeBand::classify`], with the tolerance
//! [`crate::frustum::SIZE_BAND_TOLERANCE`].

use crate::kernel::{ShaderModule, shader_module};

pub(super) const MODULE: ShaderModule = shader_module!("visibility/screen_size.wgsl");
