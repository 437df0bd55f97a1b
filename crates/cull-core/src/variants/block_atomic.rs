//! Block scan + atomic offset: the workgroup scans its tile in shared memory, one global atomic per workgroup.
//! One pass (`shaders/cull/variants/block_atomic.wgsl`); order not preserved.

use super::{ScanKernel, fused};
use crate::kernel::{PassLayout, ShaderModule, shader_module};
use crate::passes::{CompiledPass, EncodeContext};

pub(super) struct BlockAtomic;

pub(super) static KERNEL: BlockAtomic = BlockAtomic;

impl ScanKernel for BlockAtomic {
    fn entry(&self, _subgroups: bool) -> ShaderModule {
        shader_module!("variants/block_atomic.wgsl")
    }

    fn subgroup_form(&self, _available: bool) -> bool {
        false
    }

    fn passes(&self, windows: u32) -> Vec<PassLayout> {
        fused::passes(windows, false)
    }

    fn encode(&self, cx: EncodeContext, passes: &[CompiledPass]) {
        fused::encode(cx, passes, false)
    }
}
