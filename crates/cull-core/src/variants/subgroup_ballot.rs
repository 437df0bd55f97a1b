//! Subgroup ballot: one bit per vote, ranks by population count.
//! One pass (`shaders/cull/variants/subgroup_ballot.wgsl`, encoded by [`super::fused`]);
//! order not preserved.

use super::fused::FusedKernel;
use crate::kernel::shader_module;

pub(super) static KERNEL: FusedKernel = FusedKernel {
    entry: shader_module!("variants/subgroup_ballot.wgsl"),
    subgroups: true,
    stages_indices: true,
};
