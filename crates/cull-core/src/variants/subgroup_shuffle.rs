//! Subgroup shuffle: the votes scanned in registers by shuffle-up steps.
//! One pass (`shaders/cull/variants/subgroup_shuffle.wgsl`, encoded by [`super::fused`]);
//! order not preserved.

use super::fused::FusedKernel;
use crate::kernel::shader_module;

pub(super) static KERNEL: FusedKernel = FusedKernel {
    entry: shader_module!("variants/subgroup_shuffle.wgsl"),
    subgroups: true,
    stages_indices: true,
};
