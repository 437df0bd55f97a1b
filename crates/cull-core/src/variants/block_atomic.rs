//! Block scan + atomic offset: the workgroup scans its tile in shared memory, one global atomic per workgroup.
//! One pass (`shaders/cull/variants/block_atomic.wgsl`, encoded by [`super::fused`]);
//! order not preserved.

use super::fused::FusedKernel;
use crate::kernel::shader_module;

pub(super) static KERNEL: FusedKernel = FusedKernel {
    entry: shader_module!("variants/block_atomic.wgsl"),
    subgroups: false,
    stages_indices: false,
};
